//! Writing to a pipe without `SIGPIPE`: what the preloaded library needs
//! to write its dump, its trace or a message into a FIFO or a pipe whose
//! reader has gone, inside a program whose `SIGPIPE` disposition is the
//! program's (by default it kills the process; Rust binaries ignore it, but
//! `libcoldcache.so` runs inside programs that do not).
//!
//! [`NoSigpipe`] holds `SIGPIPE` blocked in the calling thread while it
//! lives; when dropped it takes back (`rt_sigtimedwait` with a zero
//! timeout) a `SIGPIPE` raised meanwhile, unless one was already pending
//! when it was made (that one is the program's), then restores the mask.
//! A write to a pipe without reader then fails with `EPIPE`, which the
//! caller reports, and the program never sees a signal it did not cause.
//!
//! Raw system calls only (`rt_sigprocmask`, `rt_sigpending`,
//! `rt_sigtimedwait`): async-signal-safe, no allocation, and not the C
//! library's wrappers, which the capture virtualises for the program.
//! The one thing it cannot tell apart: a `SIGPIPE` another process sends
//! with `kill` while the guard lives, to a thread that had it unblocked,
//! is taken back too.

/// `SIGPIPE`'s bit in a kernel signal set.
const BIT: u64 = 1 << (libc::SIGPIPE - 1);

/// While alive, `SIGPIPE` raised by this thread's writes is not
/// delivered; see the module doc.
#[must_use = "SIGPIPE is held only while the guard lives"]
pub struct NoSigpipe {
    /// The thread's mask before.
    old: u64,
    /// Whether a `SIGPIPE` was pending before (the program's: left alone).
    was_pending: bool,
}

impl NoSigpipe {
    /// Blocks `SIGPIPE` in the calling thread.
    pub fn hold() -> NoSigpipe {
        let mut old = 0u64;
        // SAFETY: rt_sigprocmask with 8-byte sets in live locals.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_BLOCK,
                &BIT,
                &mut old,
                8usize,
            )
        };
        // Unblocked before, a thread-directed SIGPIPE cannot be pending.
        let was_pending = old & BIT != 0 && pending() & BIT != 0;
        NoSigpipe { old, was_pending }
    }
}

/// The signals pending for the calling thread or the process.
fn pending() -> u64 {
    let mut set = 0u64;
    // SAFETY: rt_sigpending filling a live 8-byte local.
    unsafe { libc::syscall(libc::SYS_rt_sigpending, &mut set, 8usize) };
    set
}

impl Drop for NoSigpipe {
    fn drop(&mut self) {
        if !self.was_pending && pending() & BIT != 0 {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: rt_sigtimedwait on a live 8-byte set, no siginfo,
            // a zero timeout (never blocks).
            unsafe {
                libc::syscall(
                    libc::SYS_rt_sigtimedwait,
                    &BIT,
                    std::ptr::null_mut::<libc::siginfo_t>(),
                    &zero,
                    8usize,
                )
            };
        }
        // SAFETY: as in `hold`: the thread's mask as it was.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &self.old,
                std::ptr::null_mut::<u64>(),
                8usize,
            )
        };
    }
}

/// Writes `args` to standard error, ignoring every error (a closed or
/// broken standard error loses the message, nothing else) and with
/// `SIGPIPE` held ([`NoSigpipe`]): for the messages a library prints inside
/// someone else's program, where `eprintln!` would kill the program
/// (`SIGPIPE`) or panic (`EPIPE`).
pub fn say(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _held = NoSigpipe::hold();
    let _ = std::io::stderr().write_fmt(args);
}

/// [`say`] with `eprintln!`'s syntax: the message and a newline.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {
        $crate::sigpipe::say(format_args!("{}\n", format_args!($($t)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The ignored disposition Rust gives test binaries would hide a
    /// delivered SIGPIPE: count deliveries with a handler instead.
    static SEEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    extern "C" fn on_pipe(_: libc::c_int) {
        SEEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    #[test]
    fn a_write_to_a_pipe_without_reader_fails_with_epipe_and_raises_nothing() {
        let _one = crate::FD_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: installs a handler that only bumps an atomic.
        let before = unsafe {
            libc::signal(
                libc::SIGPIPE,
                on_pipe as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
        let (r, w) = std::io::pipe().unwrap();
        drop(r);
        let mut w = w;
        SEEN.store(0, std::sync::atomic::Ordering::SeqCst);
        let e = {
            let _held = NoSigpipe::hold();
            w.write_all(b"x").unwrap_err()
        };
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
        assert_eq!(SEEN.load(std::sync::atomic::Ordering::SeqCst), 0);
        // Without the guard the same write raises it (the check can fail).
        let _ = w.write_all(b"x");
        assert_eq!(SEEN.load(std::sync::atomic::Ordering::SeqCst), 1);
        // SAFETY: the disposition as it was.
        unsafe { libc::signal(libc::SIGPIPE, before) };
    }

    #[test]
    fn a_sigpipe_pending_before_is_left_to_the_program() {
        let _one = crate::FD_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: blocks SIGPIPE in this test's thread, raises one at it,
        // and restores both (the pending one taken with sigtimedwait).
        unsafe {
            let mut old = 0u64;
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_BLOCK,
                &BIT,
                &mut old,
                8usize,
            );
            libc::syscall(
                libc::SYS_tgkill,
                libc::getpid(),
                libc::gettid(),
                libc::SIGPIPE,
            );
            assert_ne!(pending() & BIT, 0);
            drop(NoSigpipe::hold());
            assert_ne!(pending() & BIT, 0, "the program's SIGPIPE was taken");
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let got = libc::syscall(
                libc::SYS_rt_sigtimedwait,
                &BIT,
                std::ptr::null_mut::<libc::siginfo_t>(),
                &zero,
                8usize,
            );
            assert_eq!(got, i64::from(libc::SIGPIPE));
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &old,
                std::ptr::null_mut::<u64>(),
                8usize,
            );
        }
    }
}
