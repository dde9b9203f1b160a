//! `write_atomically`: files written whole or not at all, devices and
//! FIFOs written in place, symbolic links followed, nothing left behind.

use coldcache_fsio::{write_atomically, write_atomically_with};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

/// Names in `dir` other than `keep`.
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn a_regular_file_is_replaced_whole_and_keeps_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.json");
    write_atomically(&p, b"one").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    write_atomically(&p, b"two").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"two");
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert_eq!(leftovers(dir.path(), &["out.json"]), Vec::<String>::new());
}

#[test]
fn a_symbolic_link_is_followed_and_stays_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.txt");
    std::fs::write(&real, b"old").unwrap();
    let link = dir.path().join("link.txt");
    std::os::unix::fs::symlink("real.txt", &link).unwrap();
    write_atomically(&link, b"new").unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&real).unwrap(), b"new");
    assert_eq!(
        leftovers(dir.path(), &["real.txt", "link.txt"]),
        Vec::<String>::new()
    );
}

#[test]
fn a_link_to_nothing_a_directory_and_no_file_name_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("dangling");
    std::os::unix::fs::symlink("nowhere/x", &link).unwrap();
    let e = write_atomically(&link, b"x").unwrap_err().to_string();
    assert!(e.contains("dangling") && e.contains("symbolic link"), "{e}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let e = write_atomically(dir.path(), b"x").unwrap_err().to_string();
    assert!(e.contains("is a directory"), "{e}");
    let e = write_atomically(Path::new("/"), b"x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a file name"), "{e}");
    assert_eq!(leftovers(dir.path(), &["dangling"]), Vec::<String>::new());
}

/// Regression: a rename over `/dev/null` (as root) made it a regular file.
/// Written through a link in a temporary directory, so that the real
/// `/dev/null` is only written to, never a rename target.
#[test]
fn dev_null_through_a_link_stays_a_character_device() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    write_atomically(&link, b"discarded").unwrap();
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    assert_eq!(leftovers(dir.path(), &["null"]), Vec::<String>::new());
    // /dev itself got no temporary file either.
    assert!(leftovers(Path::new("/dev"), &[])
        .iter()
        .all(|n| !n.starts_with(".null.")));
}

#[test]
fn a_fifo_is_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).unwrap())
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || tx.send(write_atomically(&fifo, b"through the pipe")));
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the write hung");
    r.unwrap();
    writer.join().unwrap().ok();
    assert_eq!(reader.join().unwrap(), b"through the pipe");
    let t = std::fs::symlink_metadata(dir.path().join("pipe"))
        .unwrap()
        .file_type();
    assert!(t.is_fifo());
    assert_eq!(leftovers(dir.path(), &["pipe"]), Vec::<String>::new());
}

#[test]
fn a_failing_or_panicking_writer_leaves_the_old_file_and_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out");
    std::fs::write(&p, b"old").unwrap();
    let e = write_atomically_with(&p, |f| {
        use std::io::Write;
        f.write_all(b"partial")?;
        Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
    })
    .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("writing") && msg.contains(".out."), "{msg}");
    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull);
    let caught = std::panic::catch_unwind(|| {
        let _ = write_atomically_with(&p, |_| panic!("filling failed"));
    });
    assert!(caught.is_err());
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    assert_eq!(leftovers(dir.path(), &["out"]), Vec::<String>::new());
}

/// A directory no one may create files in, even root: sysfs.
#[test]
fn a_directory_that_refuses_files_is_named_in_the_error() {
    let e = write_atomically(Path::new("/sys/coldcache-out.json"), b"x").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("creating temporary file /sys/.coldcache-out.json."),
        "{msg}"
    );
    assert!(msg.contains("os error"), "{msg}");
}

#[test]
fn move_file_renames_onto_a_regular_file_and_copies_into_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("rec");
    std::fs::write(&from, b"events").unwrap();
    let to = dir.path().join("out.zones");
    std::fs::write(&to, b"old").unwrap();
    coldcache_fsio::move_file(&from, &to).unwrap();
    assert_eq!(std::fs::read(&to).unwrap(), b"events");
    assert!(!from.exists());

    std::fs::write(&from, b"piped").unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).unwrap())
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let (f2, p2) = (from.clone(), fifo.clone());
    std::thread::spawn(move || tx.send(coldcache_fsio::move_file(&f2, &p2)));
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the move hung")
        .unwrap();
    assert_eq!(reader.join().unwrap(), b"piped");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(!from.exists());
    assert_eq!(
        leftovers(dir.path(), &["out.zones", "pipe"]),
        Vec::<String>::new()
    );
}

/// A symbolic link at `at` to `to`, owned by `uid` (the tests run as root
/// to give it away; skipped otherwise).
fn link_owned_by(at: &Path, to: &Path, uid: u32) -> bool {
    std::os::unix::fs::symlink(to, at).unwrap();
    let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    unsafe { libc::lchown(c.as_ptr(), uid, uid) == 0 }
}

/// The kernel's `fs.protected_symlinks` rule, whatever the sysctl says: a
/// link another user planted in a sticky, world-writable directory is not
/// followed by any writer (the victim is unchanged and the error names the
/// link); one's own link there, and another user's link in a directory
/// that is not sticky, are followed.
#[test]
fn a_link_planted_by_another_user_in_a_sticky_directory_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP: needs root to give a link to another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = shared.join("out");
    assert!(link_owned_by(&planted, &victim, 65534));
    let e = write_atomically(&planted, b"new").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&planted.display().to_string()) && msg.contains("protected_symlinks"),
        "{msg}"
    );
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    let from = dir.path().join("from");
    std::fs::write(&from, b"moved").unwrap();
    assert!(coldcache_fsio::move_file(&from, &planted).is_err());
    assert!(coldcache_fsio::fdguard::GuardedFile::open(&planted, true).is_err());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");

    // One's own link in the same directory is followed.
    let mine = shared.join("mine");
    std::os::unix::fs::symlink(&victim, &mine).unwrap();
    write_atomically(&mine, b"mine").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"mine");

    // Another user's link in a directory that is not sticky is followed.
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o777)).unwrap();
    let theirs = plain.join("out");
    assert!(link_owned_by(&theirs, &victim, 65534));
    write_atomically(&theirs, b"theirs").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"theirs");
}

/// The temporary file's name cannot be guessed: two writes of the same
/// target in one process use unrelated names (64 random bits each), and
/// `create_unique` makes new files, never an existing name.
#[test]
fn temporary_and_unique_names_are_unpredictable() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = coldcache_fsio::create_unique(dir.path(), "x", ".ccdump").unwrap();
    let (b, _) = coldcache_fsio::create_unique(dir.path(), "x", ".ccdump").unwrap();
    assert_ne!(a, b);
    let hex = |p: &Path| {
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        let h = n
            .trim_start_matches("x.")
            .trim_end_matches(".ccdump")
            .to_string();
        assert_eq!(h.len(), 16, "{n}");
        u64::from_str_radix(&h, 16).unwrap()
    };
    // Not a counter: consecutive names differ in many bits.
    assert!((hex(&a) ^ hex(&b)).count_ones() > 8, "{a:?} {b:?}");
    assert_eq!(
        std::fs::metadata(&a).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

/// `write_claimed`: a file another writer put at the path since the caller
/// looked is never replaced (two captures finishing at once in one
/// directory lost one: issue 36); the file the caller saw is.
#[test]
fn a_claimed_write_never_replaces_another_writers_file() {
    use coldcache_fsio::{file_id, write_claimed};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("coldcache.ccdump");
    let n2 = dir.path().join("coldcache.2.ccdump");
    // Nothing there: created.
    assert_eq!(write_claimed(&p, &[b"first".as_slice()], None).unwrap(), p);
    // The caller saw `first` (and kept it elsewhere): replaced.
    let seen = file_id(&p);
    assert!(seen.is_some());
    // (Written from its parts, in order.)
    assert_eq!(
        write_claimed(&p, &[b"sec".as_slice(), b"", b"ond"], seen).unwrap(),
        p
    );
    assert_eq!(std::fs::read(&p).unwrap(), b"second");
    // The caller saw nothing, another writer's file is there now: beside.
    assert_eq!(write_claimed(&p, &[b"third".as_slice()], None).unwrap(), n2);
    assert_eq!(std::fs::read(&p).unwrap(), b"second");
    assert_eq!(std::fs::read(&n2).unwrap(), b"third");
    // The caller saw `second`, but another writer replaced it since: the
    // other's file stays, this one goes to the next free name.
    let seen = file_id(&p);
    write_atomically(&p, b"other").unwrap();
    let got = write_claimed(&p, &[b"fourth".as_slice()], seen).unwrap();
    assert_eq!(got, dir.path().join("coldcache.3.ccdump"));
    assert_eq!(std::fs::read(&p).unwrap(), b"other");
    assert_eq!(std::fs::read(&got).unwrap(), b"fourth");
    let mut left = leftovers(dir.path(), &[]);
    left.sort();
    assert_eq!(
        left,
        [
            "coldcache.2.ccdump",
            "coldcache.3.ccdump",
            "coldcache.ccdump"
        ]
    );
    // Through a link: its target is the file claimed, the link stays.
    let link = dir.path().join("latest.ccdump");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    let seen = file_id(&link);
    assert_eq!(
        write_claimed(&link, &[b"fifth".as_slice()], seen).unwrap(),
        link
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&p).unwrap(), b"fifth");
}

/// Eight writers at once, each having seen the same earlier file: every
/// one's bytes end up in a file of its own, and the paths returned say
/// which.
#[test]
fn writers_racing_for_one_name_all_keep_their_files() {
    use coldcache_fsio::{file_id, write_claimed};
    for round in 0..50 {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.ccdump");
        std::fs::write(&p, b"earlier").unwrap();
        let seen = file_id(&p);
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (p, b) = (p.clone(), barrier.clone());
                std::thread::spawn(move || {
                    b.wait();
                    let bytes = format!("writer {i}");
                    (
                        bytes.clone(),
                        write_claimed(&p, &[bytes.as_bytes()], seen).unwrap(),
                    )
                })
            })
            .collect();
        let mut paths = Vec::new();
        for h in handles {
            let (bytes, path) = h.join().unwrap();
            assert_eq!(
                std::fs::read(&path).unwrap(),
                bytes.as_bytes(),
                "round {round}"
            );
            paths.push(path);
        }
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), 8, "round {round}: {paths:?}");
        assert_eq!(
            leftovers(dir.path(), &[]).len(),
            8,
            "round {round}: the earlier file replaced once, no temporaries"
        );
    }
}
