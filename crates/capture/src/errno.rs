//! The interrupted code's `errno`, kept across our own work.
//!
//! Everything the capture runs in a program thread's context (signal
//! handlers, the fast dispatcher's slow path, the finish trampoline) may
//! make system calls through libc wrappers that set `errno` on failure: a
//! `process_vm_readv` of an unmapped stack word, a mapping the budget
//! refuses, a `write` to the doorbell. The program may be between a
//! failed call of its own and its read of `errno` (`readlink` returning
//! -1, then `errno == EINVAL` to mean "not a link"): a changed `errno`
//! changes what it does. CPython's start-up failed with `OSError: [Errno
//! 14] Bad address` that way. Each such entry holds a [`Kept`] for its
//! whole run. A handler of the program that the engine runs from inside
//! its own (a SIGTRAP, sync or stop request signal it sends or takes
//! itself) therefore leaves
//! `errno` as the interrupted code had it, as a handler written to POSIX's
//! advice does; the fault handlers it wraps (`sigfault.rs`) keep it only
//! around the engine's own work before and after the program's handler.

/// Saves this thread's `errno` when made and puts it back when dropped.
#[must_use = "errno is put back when the guard is dropped"]
pub(crate) struct Kept(i32);

impl Kept {
    /// Saves this thread's `errno`.
    #[inline]
    pub(crate) fn new() -> Kept {
        // SAFETY: `__errno_location` is this thread's errno, always valid.
        Kept(unsafe { *libc::__errno_location() })
    }
}

impl Drop for Kept {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: as in `new`: this thread's errno.
        unsafe { *libc::__errno_location() = self.0 };
    }
}
