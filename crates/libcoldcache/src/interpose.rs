//! The C library's `sigaction` and `signal`, interposed: for the two
//! signals the capture engine owns (SIGTRAP and its sync signal, once it
//! has installed its handlers) the program reads and sets its own
//! disposition, kept by the engine (`coldcache_capture::sigvirt`); every
//! other call goes to the C library unchanged.
//!
//! The library comes before the C library in the lookup order (preloaded,
//! or linked: the C library is always last), so calls from the program
//! and from other libraries land here. Calls the C library makes
//! internally, and raw `rt_sigaction` system calls, do not: a traced
//! thread's are emulated by the trap handler, an untraced thread's are
//! noticed at the next start (see `sigvirt.rs`).

use coldcache_capture::sigvirt::{program_sigaction, real_sigaction};

/// `sigaction(2)` as the program sees it.
///
/// # Safety
/// As `sigaction(2)`: `act` and `old` are null or valid.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: i32,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> i32 {
    // SAFETY: the caller's pointers, as sigaction(2) takes them.
    match unsafe { program_sigaction(sig, act, old) } {
        Some(r) => r,
        // SAFETY: as above.
        None => unsafe { real_sigaction(sig, act, old) },
    }
}

/// `signal(3)` as the C library implements it (BSD semantics: the signal
/// itself blocked in its handler, `SA_RESTART`), through [`sigaction`].
///
/// # Safety
/// As `signal(3)`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: i32, handler: libc::sighandler_t) -> libc::sighandler_t {
    if handler == libc::SIG_ERR || !(1..=64).contains(&sig) {
        // SAFETY: errno of this thread.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return libc::SIG_ERR;
    }
    // SAFETY: a zeroed sigaction is valid; the fields used are set below.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: sa_mask is a valid sigset_t inside `sa`.
    unsafe {
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaddset(&mut sa.sa_mask, sig);
    }
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: live locals.
    if unsafe { sigaction(sig, &sa, &mut old) } < 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

/// `bsd_signal(3)`: `signal` by another name.
///
/// # Safety
/// As `signal(3)`.
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: i32, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: as `signal`.
    unsafe { signal(sig, handler) }
}
