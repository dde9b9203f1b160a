//! The preloaded library's long-lived file descriptors (a capture's
//! trace, the capture writer's doorbell, a zones recording's stream),
//! kept out of the program's way.
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
//!   still names that file (the capture's doorbell: before the writer
//!   reads it, not before a ring); if not (closed, or reused after all) it leaves
//!   that number alone (it may be the program's now), never closes it,
//!   and opens its file again (the trace, by its path) or makes a new
//!   doorbell.
//!
//! Every check and every reopening is a raw system call (no C library
//! function the program could define or preload, `errno` untouched, no
//! allocation): async-signal-safe, since a capture's trace is written from
//! its trap handler. Only [`GuardedFile::open`] allocates (its path), in
//! normal context.

/// A raw system call of up to four arguments: the kernel's result
/// (`-errno` on failure). `errno` is not touched.
#[inline]
fn raw(nr: i64, a: u64, b: u64, c: u64, d: u64) -> i64 {
    let r: i64;
    // SAFETY: the callers pass a system call number and arguments that
    // name live memory of theirs (or none); `syscall` clobbers RCX and R11
    // only.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr => r,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        )
    };
    r
}

/// `close(2)` of one of our own descriptors.
fn close(fd: i32) {
    raw(libc::SYS_close, fd as u64, 0, 0, 0);
}

/// The first number [`lift`] tries: 64 below the smaller of 1,024 and the
/// soft limit on open files, or 3 when that limit is too low to leave room.
fn high_base() -> i32 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let got = raw(
        libc::SYS_getrlimit,
        libc::RLIMIT_NOFILE as u64,
        &mut r as *mut libc::rlimit as u64,
        0,
        0,
    );
    let soft = if got == 0 {
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
pub fn lift(fd: i32) -> i32 {
    let high = raw(
        libc::SYS_fcntl,
        fd as u64,
        libc::F_DUPFD_CLOEXEC as u64,
        high_base() as u64,
        0,
    );
    if high < 0 || high == i64::from(fd) {
        return fd;
    }
    close(fd);
    high as i32
}

/// Takes a descriptor just made (ours): lifted, with what it names; or,
/// if that cannot be told, closed, with `fstat`'s error.
pub fn adopt(fd: i32) -> Result<(i32, Identity), i32> {
    let fd = lift(fd);
    match fstat(fd) {
        Ok(id) => Ok((fd, id)),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

/// `openat(AT_FDCWD, path, flags, mode)`: a descriptor, or `-errno`.
fn open_at(path: &std::ffi::CStr, flags: i32, mode: u64) -> i64 {
    raw(
        libc::SYS_openat,
        libc::AT_FDCWD as u64,
        path.as_ptr() as u64,
        flags as u64,
        mode,
    )
}

/// The file a descriptor names: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
}

/// What `fd` names now: `Err(errno)` if `fstat` fails (`EBADF`: it is
/// not open).
fn fstat(fd: i32) -> Result<Identity, i32> {
    if fd < 0 {
        return Err(libc::EBADF);
    }
    // SAFETY: an all-zero stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = raw(
        libc::SYS_fstat,
        fd as u64,
        &mut st as *mut libc::stat as u64,
        0,
        0,
    );
    if r < 0 {
        return Err(-r as i32);
    }
    Ok(Identity {
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// What `fd` names now; `None` if it cannot be told (not open, or `fstat`
/// failed).
pub fn identity(fd: i32) -> Option<Identity> {
    fstat(fd).ok()
}

/// Whether `fd` still names the file `id`: false when it is closed or
/// names another file; true when `fstat` fails otherwise (a transient
/// error, say `ENOMEM`), since nothing says the number changed hands.
pub fn still(fd: i32, id: Identity) -> bool {
    match fstat(fd) {
        Ok(now) => now == id,
        Err(e) => e != libc::EBADF,
    }
}

/// A file of ours, open for writing, that outlives the program closing its
/// descriptor: each use checks the descriptor ([`still`]) and, when it
/// names something else now, leaves that number alone and opens the file
/// again by its path (positioned at its end, for a sequential writer), if
/// it may. Never closes a number that is not its own. Its checks and its
/// reopening are plain system calls with no allocation, so a trap handler
/// may write through it.
#[derive(Debug)]
pub struct GuardedFile {
    fd: i32,
    id: Identity,
    /// The path it is opened again by; `None`: it is not (a device or
    /// FIFO, whose opening may block or mean something else).
    path: Option<std::ffi::CString>,
}

impl GuardedFile {
    /// Opens `path` for writing, close-on-exec, lifted ([`lift`]):
    /// created new when `create` (a regular file of ours: `O_EXCL|
    /// O_NOFOLLOW`; a regular file or a link of the caller's already there
    /// is removed first, a link planted by another user in a sticky
    /// directory is refused, see [`crate::check_link`]), else as it is (a
    /// device or FIFO, opened without blocking: a FIFO nobody reads is
    /// refused after [`crate::READER_WAIT`]; then it is never opened
    /// again). Normal context.
    pub fn open(path: &std::path::Path, create: bool) -> std::io::Result<GuardedFile> {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        if !create {
            // A device or FIFO: opened without blocking on a FIFO nobody
            // reads (`crate::write::open_in_place`), close-on-exec.
            use std::os::fd::IntoRawFd;
            let fd = crate::write::open_in_place(path)?.into_raw_fd();
            let (fd, id) = adopt(fd).map_err(std::io::Error::from_raw_os_error)?;
            return Ok(GuardedFile { fd, id, path: None });
        }
        let flags =
            libc::O_WRONLY | libc::O_CLOEXEC | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let mut fd = open_at(&c, flags, 0o666);
        if fd == -(libc::EEXIST as i64) {
            // An earlier run's file (a killed capture's `.partial`): not
            // written through, replaced by a new one.
            crate::check_link(path)?;
            let what = std::fs::symlink_metadata(path)?.file_type();
            if what.is_dir() {
                return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
            }
            std::fs::remove_file(path)?;
            fd = open_at(&c, flags, 0o666);
        }
        if fd < 0 {
            return Err(std::io::Error::from_raw_os_error(-fd as i32));
        }
        let (fd, id) = adopt(fd as i32).map_err(std::io::Error::from_raw_os_error)?;
        Ok(GuardedFile {
            fd,
            id,
            path: Some(c),
        })
    }

    /// The descriptor, opened again if the program closed ours (see the
    /// type): `Err(EBADF)` when it cannot be (not opened again by path, or
    /// the path names another file now).
    pub fn fd(&mut self) -> Result<i32, i32> {
        if still(self.fd, self.id) {
            return Ok(self.fd);
        }
        let Some(path) = &self.path else {
            return Err(libc::EBADF);
        };
        let again = open_at(path, libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW, 0);
        if again < 0 {
            return Err(libc::EBADF);
        }
        let again = match adopt(again as i32) {
            Ok((fd, id)) if id == self.id => fd,
            Ok((fd, _)) => {
                // The path names another file now.
                close(fd);
                return Err(libc::EBADF);
            }
            Err(_) => return Err(libc::EBADF),
        };
        // At its end, for a sequential writer (one that gives offsets does
        // not mind).
        raw(libc::SYS_lseek, again as u64, 0, libc::SEEK_END as u64, 0);
        // The old number is not ours any more: not closed.
        self.fd = again;
        Ok(again)
    }

    /// The descriptor as it was last checked, for a call that must not
    /// open anything (it may name another file now: check with
    /// [`GuardedFile::is_ours`]).
    pub fn last_fd(&self) -> i32 {
        self.fd
    }

    /// Whether the descriptor still names the file.
    pub fn is_ours(&self) -> bool {
        still(self.fd, self.id)
    }
}

impl std::io::Write for GuardedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let fd = self.fd().map_err(std::io::Error::from_raw_os_error)?;
        let n = raw(
            libc::SYS_write,
            fd as u64,
            buf.as_ptr() as u64,
            buf.len() as u64,
            0,
        );
        if n < 0 {
            return Err(std::io::Error::from_raw_os_error(-n as i32));
        }
        Ok(n as usize)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for GuardedFile {
    /// Closes the descriptor only while it is still ours.
    fn drop(&mut self) {
        if self.is_ours() {
            close(self.fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests close and reuse numbers, in one process: one at a time.
    use crate::FD_TESTS as SERIAL;

    /// A lifted descriptor is above the numbers a program gets first, names
    /// the same file, and once closed and its number taken by another file
    /// no longer passes for it.
    #[test]
    fn lifted_descriptors_are_told_from_their_reused_numbers() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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

    /// A guarded file whose descriptor the program closed and gave to
    /// another file: the other file is not written, the guarded one goes
    /// on at its end, and dropping it leaves the program's number open.
    #[test]
    fn a_guarded_file_reopens_and_leaves_the_programs_number_alone() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        use std::io::Write as _;
        let dir = std::env::temp_dir().join(format!("coldcache-guarded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ours = dir.join("ours");
        let theirs = dir.join("theirs");
        let mut f = GuardedFile::open(&ours, true).unwrap();
        f.write_all(b"one ").unwrap();
        let n = f.last_fd();
        // The program closes every descriptor and opens a file at ours.
        // SAFETY: as a program would.
        unsafe { libc::close(n) };
        let t = std::fs::File::create(&theirs).unwrap();
        let t = std::os::fd::IntoRawFd::into_raw_fd(t);
        // SAFETY: dup2 of the program's file onto the freed number.
        assert_eq!(unsafe { libc::dup2(t, n) }, n);
        f.write_all(b"two").unwrap();
        assert_ne!(f.last_fd(), n);
        drop(f);
        assert_eq!(std::fs::read(&ours).unwrap(), b"one two");
        assert_eq!(std::fs::read(&theirs).unwrap(), b"");
        assert!(identity(n).is_some(), "the program's number was closed");
        // SAFETY: closing the descriptors opened here.
        unsafe {
            libc::close(n);
            libc::close(t);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
