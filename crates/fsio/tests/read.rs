//! `read_regular` / `open_regular`: regular files only, bounded, no hang.

use coldcache_fsio::{open_regular, read_regular, ReadError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runs `f` on a thread and fails if it takes over 20 s (a hang).
fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the read hung")
}

fn read(p: impl Into<PathBuf>, max: u64) -> Result<Vec<u8>, ReadError> {
    let p = p.into();
    within_deadline(move || read_regular(&p, max))
}

#[test]
fn a_fifo_without_a_writer_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = read(&fifo, 1 << 20).unwrap_err();
    assert_eq!(e.to_string(), "not a regular file (a FIFO)");
}

#[test]
fn devices_and_directories_are_refused() {
    for (p, what) in [
        ("/dev/zero", "a character device"),
        ("/dev/urandom", "a character device"),
        ("/", "a directory"),
    ] {
        let e = read(p, 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), format!("not a regular file ({what})"), "{p}");
    }
}

#[test]
fn the_limit_is_inclusive_and_symbolic_links_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, b"12345").unwrap();
    let link = dir.path().join("l");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    assert_eq!(read(&link, 5).unwrap(), b"12345");
    assert_eq!(read(&p, 4).unwrap_err().to_string(), "larger than 4 bytes");
    let e = read(dir.path().join("missing"), 5).unwrap_err();
    assert!(matches!(&e, ReadError::Io(io) if io.kind() == std::io::ErrorKind::NotFound));
    // Converted for error types that hold an io::Error, the words stay.
    let io: std::io::Error = read(&p, 4).unwrap_err().into();
    assert_eq!(io.to_string(), "larger than 4 bytes");
}

#[test]
fn an_opened_regular_file_reads_normally_after_the_nonblocking_open() {
    use std::io::Read;
    let (mut f, len) = open_regular(Path::new("Cargo.toml")).unwrap();
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    assert_eq!(s.len() as u64, len);
    assert!(s.contains("coldcache-fsio"));
}
