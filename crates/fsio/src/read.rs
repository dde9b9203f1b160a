//! Reading files whose names come from a user or from a dump: regular
//! files only, bounded, and never a hang.
//!
//! `/dev/zero` as a configuration, `/dev/urandom` as a dump or a FIFO as a
//! trace would otherwise make a reader block (opening a FIFO waits for a
//! writer), read forever or allocate without end. [`open_regular`] opens
//! with `O_NONBLOCK` (so a FIFO cannot block the open), checks the opened
//! descriptor with `fstat` (no window between check and use), then clears
//! `O_NONBLOCK`. [`read_regular`] also counts the bytes while reading, so
//! a file growing meanwhile cannot pass the limit either.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Why a file was not read. The message names no path: callers add it.
#[derive(Debug)]
pub enum ReadError {
    /// Not a regular file (after symbolic links): what it is instead.
    NotRegular(&'static str),
    /// Larger than the limit given, in bytes.
    TooLarge(u64),
    /// The operating system's error.
    Io(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotRegular(what) => write!(f, "not a regular file ({what})"),
            ReadError::TooLarge(limit) => write!(f, "larger than {limit} bytes"),
            ReadError::Io(e) => e.fmt(f),
        }
    }
}

/// No source: the message already holds the operating system's error.
impl std::error::Error for ReadError {}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

impl From<ReadError> for std::io::Error {
    /// For error types that hold an `io::Error`: the message is kept.
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Io(e) => e,
            ReadError::NotRegular(_) => std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
            ReadError::TooLarge(_) => std::io::Error::new(std::io::ErrorKind::FileTooLarge, e),
        }
    }
}

/// What a file type is, in words, for messages.
pub(crate) fn describe(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a file"
    }
}

/// Opens `path` for reading if it is a regular file (symbolic links
/// followed); returns the file and its size at opening. Never blocks on a
/// FIFO.
pub fn open_regular(path: impl AsRef<Path>) -> Result<(File, u64), ReadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path.as_ref())?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(describe(meta.file_type())));
    }
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is the open descriptor `file` owns for this whole call;
    // F_GETFL/F_SETFL take and return plain integers.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(ReadError::Io(std::io::Error::last_os_error()));
    }
    Ok((file, meta.len()))
}

/// Reads the whole of `path` if it is a regular file of at most
/// `max_bytes` bytes (counted while reading).
pub fn read_regular(path: impl AsRef<Path>, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let (file, len) = open_regular(path)?;
    if len > max_bytes {
        return Err(ReadError::TooLarge(max_bytes));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge(max_bytes));
    }
    Ok(bytes)
}

/// [`read_regular`] for text: invalid UTF-8 is an error naming the byte.
pub fn read_regular_to_string(path: impl AsRef<Path>, max_bytes: u64) -> Result<String, ReadError> {
    let bytes = read_regular(path, max_bytes)?;
    String::from_utf8(bytes).map_err(|e| {
        ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        ))
    })
}

/// Fills `buf` from `r` as far as it goes: fewer bytes only at the end.
pub fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// [`read_regular`] for a format that starts with `magic`: the first
/// `magic.len()` bytes are read and checked before anything else, so a
/// file of another kind is refused at once, whatever its size (a file
/// whose size `stat` does not tell, such as `/proc/self/pagemap`, reads
/// 16 GiB and more; a regular file for `fstat`). `what` names the format
/// in the error.
pub fn read_regular_with_magic(
    path: impl AsRef<Path>,
    max_bytes: u64,
    magic: &[u8],
    what: &str,
) -> Result<Vec<u8>, ReadError> {
    let (mut file, len) = open_regular(path)?;
    if len > max_bytes {
        return Err(ReadError::TooLarge(max_bytes));
    }
    let mut bytes = vec![0u8; magic.len()];
    let got = read_up_to(&mut file, &mut bytes)?;
    bytes.truncate(got);
    check_magic(&bytes, magic, what)?;
    file.take(max_bytes.saturating_add(1) - got as u64)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge(max_bytes));
    }
    Ok(bytes)
}

/// Refuses `head`, the first bytes of a file, unless it begins with
/// `magic` (a file shorter than the magic but a prefix of it passes: its
/// reader says it is truncated).
pub fn check_magic(head: &[u8], magic: &[u8], what: &str) -> Result<(), ReadError> {
    let n = head.len().min(magic.len());
    if head.is_empty() || head[..n] != magic[..n] {
        return Err(ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not {what} (its first bytes are not {:?})",
                String::from_utf8_lossy(magic).trim_end_matches('\0')
            ),
        )));
    }
    Ok(())
}
