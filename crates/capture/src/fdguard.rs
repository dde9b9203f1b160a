//! The library's long-lived file descriptors (a capture's trace, the
//! writer thread's wake pipe), kept out of the program's way.
//!
//! A program may close descriptors it never opened: a daemon closes
//! everything from 3 up when it starts, `closefrom(3)` and
//! `close_range(3, ~0U, 0)` do it in one call. Natively that closes
//! nothing of consequence; with ours among them it closed the trace, and
//! the next file the program opened took its number, so the trace went
//! into the program's file (and the writer thread read the program's file
//! as its wake pipe, one byte at a time).
//!
//! Two fences:
//! - [`lift`]: each descriptor is moved up, near the top of the first
//!   1,024 numbers (below the soft `RLIMIT_NOFILE`), so the lowest free
//!   number a program's `open` gets is never one of ours while it holds
//!   fewer than about 960 files: a number of ours the program closed is not
//!   handed back to it.
//! - [`Identity`]: the file a descriptor was opened on (device and inode).
//!   Before each use the owner checks, with one `fstat`, that its number
//!   still names that file; if not (closed, or reused after all) it leaves
//!   that number alone (it may be the program's now), never closes it,
//!   and opens its file again (the trace, by its path) or a new pipe.
//!
//! Everything here is a plain system call: async-signal-safe, no
//! allocation (the trace is written from the trap handler).

/// The first number [`lift`] tries: 64 below the smaller of 1,024 and the
/// soft limit on open files, or 3 when that limit is too low to leave room.
fn high_base() -> i32 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit the call fills.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur.min(1024) as i32
    } else {
        1024
    };
    if soft > 128 {
        soft - 64
    } else {
        3
    }
}

/// Moves `fd` (ours, close-on-exec) to the lowest free number from
/// [`high_base`] up and returns that number; `fd` itself if there is none
/// (it stays where it is).
pub(crate) fn lift(fd: i32) -> i32 {
    // SAFETY: F_DUPFD_CLOEXEC on our own descriptor; returns a new one or -1.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, high_base()) };
    if high < 0 || high == fd {
        return fd;
    }
    // SAFETY: closing our own descriptor, now duplicated at `high`.
    unsafe { libc::close(fd) };
    high
}

/// The file a descriptor names: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    pub dev: u64,
    pub ino: u64,
}

/// What `fd` names now; `None` if it is not open.
pub(crate) fn identity(fd: i32) -> Option<Identity> {
    // SAFETY: an all-zero stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat fills `st`, a live local.
    if fd < 0 || unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some(Identity {
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// Whether `fd` still names the file `id`.
pub(crate) fn still(fd: i32, id: Identity) -> bool {
    identity(fd) == Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lifted descriptor is above the numbers a program gets first, names
    /// the same file, and once closed and its number taken by another file
    /// no longer passes for it.
    #[test]
    fn lifted_descriptors_are_told_from_their_reused_numbers() {
        let dir = std::env::temp_dir().join(format!("coldcache-fdguard-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ours = dir.join("ours");
        let theirs = dir.join("theirs");
        std::fs::write(&ours, b"x").unwrap();
        std::fs::write(&theirs, b"y").unwrap();
        let open = |p: &std::path::Path| {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a NUL-terminated path.
            unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) }
        };
        let fd = open(&ours);
        assert!(fd >= 0);
        let id = identity(fd).unwrap();
        let high = lift(fd);
        assert!(high >= high_base(), "{high} under {}", high_base());
        assert!(still(high, id));
        assert!(identity(fd).is_none(), "the low number was closed");
        // SAFETY: closing our own descriptor, as a program would.
        unsafe { libc::close(high) };
        assert!(!still(high, id));
        let other = open(&theirs);
        // SAFETY: dup2 of a fresh descriptor onto the freed number.
        let at = unsafe { libc::dup2(other, high) };
        assert_eq!(at, high);
        assert!(!still(high, id), "another file at the same number");
        // SAFETY: closing descriptors opened here.
        unsafe {
            libc::close(other);
            libc::close(high);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
