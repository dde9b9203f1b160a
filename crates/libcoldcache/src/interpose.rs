//! The C library's `sigaction`, `signal`, `syscall` and `exec` functions,
//! interposed: for the three signals the capture engine owns (SIGTRAP, its
//! sync signal and its stop request signal, once it has installed its
//! handlers) the program reads and sets its own disposition, kept by the
//! engine (`coldcache_capture::sigvirt`), with `sigaction` and with
//! `syscall(SYS_rt_sigaction, …)` alike; an `exec` gets the program's
//! `SIG_IGN` of them in the kernel first, so the new program inherits it.
//! Every other call goes to the C library (or the kernel) unchanged.
//!
//! `dlopen` and `dlclose` are interposed for a `--function` capture whose
//! function is in a library the program opens later (`record
//! --in-dlopen`): `dlopen` is a plain jump to the C library's unless such a
//! capture waits (then the lookup follows the real call), and `dlclose`
//! takes the capture's breakpoint out before its library can be unmapped.
//!
//! The library comes before the C library in the lookup order (preloaded,
//! or linked: the C library is always last), so calls from the program
//! and from other libraries land here. Calls the C library makes
//! internally (`execl` and `system` reach `execve` so), and `syscall`
//! instructions of the program's own, do not: a traced thread's are
//! emulated by the trap handler, an untraced thread's are noticed at the
//! next start (see `sigvirt.rs`).

use coldcache_capture::program_sigaction;
use coldcache_capture::sigvirt::{
    after_failed_exec, before_exec, real_sigaction, syscall_sigaction,
};
use std::ffi::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// `syscall(3)`: the C library's, instruction for instruction (a traced
/// program counts the same instructions), except that `rt_sigaction`
/// (number 13) goes to [`syscall_rt_sigaction`] when the thread is not
/// single-stepped. The seventh word comes from the stack, as the C
/// library's does.
///
/// # Safety
/// As `syscall(2)`: the arguments are those of the system call.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn syscall() -> libc::c_long {
    core::arch::naked_asm!(
        "cmp rdi, 13",
        "je 3f",
        "2:",
        "mov rax, rdi",
        "mov rdi, rsi",
        "mov rsi, rdx",
        "mov rdx, rcx",
        "mov r10, r8",
        "mov r8, r9",
        "mov r9, [rsp + 8]",
        "syscall",
        "cmp rax, -4095",
        "jae 4f",
        "ret",
        "4:",
        "mov rdi, rax",
        "jmp {fail}",
        // rt_sigaction: a single-stepped thread makes it (the trap
        // handler emulates it at its `syscall`), any other goes to Rust.
        "3:",
        "pushfq",
        "pop rax",
        "test eax, 0x100",
        "jnz 2b",
        "jmp {sigaction}",
        fail = sym fail,
        sigaction = sym syscall_rt_sigaction,
    )
}

/// Sets errno from the kernel's result `r` (`-errno`) and returns -1.
extern "C" fn fail(r: libc::c_long) -> libc::c_long {
    // SAFETY: errno of this thread.
    unsafe { *libc::__errno_location() = (-r) as i32 };
    -1
}

/// `syscall(SYS_rt_sigaction, sig, act, old, size)` of a thread that is
/// not single-stepped: the engine's shadow for the signals it owns, the
/// kernel for the others.
extern "C" fn syscall_rt_sigaction(
    _nr: libc::c_long,
    sig: libc::c_long,
    act: u64,
    old: u64,
    size: u64,
) -> libc::c_long {
    let r = match syscall_sigaction(sig, act, old, size) {
        Some(r) => r,
        None => {
            let r: i64;
            // SAFETY: the program's own system call with its own
            // arguments (the kernel checks the pointers); `syscall`
            // clobbers RCX and R11 only.
            unsafe {
                core::arch::asm!(
                    "syscall",
                    inlateout("rax") libc::SYS_rt_sigaction => r,
                    in("rdi") sig,
                    in("rsi") act,
                    in("rdx") old,
                    in("r10") size,
                    lateout("rcx") _,
                    lateout("r11") _,
                    options(nostack),
                )
            };
            r
        }
    };
    if (-4095..0).contains(&r) {
        fail(r)
    } else {
        r
    }
}

/// The C library's definition of `name` (the one after ours), cached in
/// `cell`.
fn next(cell: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let mut f = cell.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the
        // definition after this library's.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        cell.store(f, Ordering::Release);
    }
    f
}

/// Runs the exec `call` with the program's ignored signals ignored in the
/// kernel; if it returns (it failed), the engine's handlers go back.
fn around_exec(call: impl FnOnce() -> i32) -> i32 {
    let changed = before_exec(false);
    let r = call();
    if changed != 0 {
        // SAFETY: errno of this thread, kept across the handlers' return.
        let e = unsafe { *libc::__errno_location() };
        after_failed_exec(changed);
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = e };
    }
    r
}

fn enosys() -> i32 {
    // SAFETY: errno of this thread.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

type Exec3 = unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> i32;
type Exec2 = unsafe extern "C" fn(*const c_char, *const *const c_char) -> i32;
type Fexec = unsafe extern "C" fn(i32, *const *const c_char, *const *const c_char) -> i32;

/// `execve(2)`, the program's ignored signals inherited as natively.
///
/// # Safety
/// As `execve(2)`.
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> i32 {
    static F: AtomicUsize = AtomicUsize::new(0);
    match next(&F, c"execve") {
        0 => enosys(),
        // SAFETY: the C library's execve, with the caller's arguments.
        f => around_exec(|| unsafe { std::mem::transmute::<usize, Exec3>(f)(path, argv, envp) }),
    }
}

/// `execvpe(3)`, as [`execve`].
///
/// # Safety
/// As `execvpe(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> i32 {
    static F: AtomicUsize = AtomicUsize::new(0);
    match next(&F, c"execvpe") {
        0 => enosys(),
        // SAFETY: the C library's execvpe, with the caller's arguments.
        f => around_exec(|| unsafe { std::mem::transmute::<usize, Exec3>(f)(file, argv, envp) }),
    }
}

/// `execv(3)`, as [`execve`].
///
/// # Safety
/// As `execv(3)`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> i32 {
    static F: AtomicUsize = AtomicUsize::new(0);
    match next(&F, c"execv") {
        0 => enosys(),
        // SAFETY: the C library's execv, with the caller's arguments.
        f => around_exec(|| unsafe { std::mem::transmute::<usize, Exec2>(f)(path, argv) }),
    }
}

/// `execvp(3)`, as [`execve`].
///
/// # Safety
/// As `execvp(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> i32 {
    static F: AtomicUsize = AtomicUsize::new(0);
    match next(&F, c"execvp") {
        0 => enosys(),
        // SAFETY: the C library's execvp, with the caller's arguments.
        f => around_exec(|| unsafe { std::mem::transmute::<usize, Exec2>(f)(file, argv) }),
    }
}

/// `fexecve(3)`, as [`execve`].
///
/// # Safety
/// As `fexecve(3)`.
#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: i32,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> i32 {
    static F: AtomicUsize = AtomicUsize::new(0);
    match next(&F, c"fexecve") {
        0 => enosys(),
        // SAFETY: the C library's fexecve, with the caller's arguments.
        f => around_exec(|| unsafe { std::mem::transmute::<usize, Fexec>(f)(fd, argv, envp) }),
    }
}

/// The C library's `dlopen`, resolved by the constructor
/// ([`resolve_dlopen`]) so that [`dlopen`] can jump to it.
static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);

/// The C library's `dlclose`, resolved by the constructor.
static REAL_DLCLOSE: AtomicUsize = AtomicUsize::new(0);

/// Resolves the C library's `dlopen` and `dlclose` (from the constructor).
pub(crate) fn resolve_dlopen() {
    next(&REAL_DLOPEN, c"dlopen");
    next(&REAL_DLCLOSE, c"dlclose");
}

type Dlopen = unsafe extern "C" fn(*const c_char, i32) -> *mut libc::c_void;
type Dlclose = unsafe extern "C" fn(*mut libc::c_void) -> i32;

/// `dlopen(3)`. Unless a capture waits for a library the program opens
/// (`record --function NAME --in-dlopen`), a jump to the C library's: the
/// loader sees the program's own return address, and so searches the
/// caller's `RUNPATH` as natively. While one waits, [`dlopen_watched`].
///
/// # Safety
/// As `dlopen(3)`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlopen(_file: *const c_char, _mode: i32) -> *mut libc::c_void {
    core::arch::naked_asm!(
        "cmp byte ptr [rip + {watch}], 0",
        "jne 2f",
        "mov rax, qword ptr [rip + {real}]",
        "test rax, rax",
        "jz 2f",
        "jmp rax",
        "2:",
        "jmp {slow}",
        watch = sym coldcache_capture::preload::WATCH_DLOPEN,
        real = sym REAL_DLOPEN,
        slow = sym dlopen_watched,
    )
}

/// `dlopen` while a capture waits for its function's library: the C
/// library's call, then the lookup in what it loaded
/// (`coldcache_capture::preload::after_dlopen`), which arms the capture
/// when the function is there.
extern "C" fn dlopen_watched(file: *const c_char, mode: i32) -> *mut libc::c_void {
    let f = next(&REAL_DLOPEN, c"dlopen");
    if f == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: the C library's dlopen, with the caller's arguments.
    let h = unsafe { std::mem::transmute::<usize, Dlopen>(f)(file, mode) };
    if !h.is_null() && coldcache_capture::preload::WATCH_DLOPEN.load(Ordering::Acquire) {
        coldcache_capture::preload::after_dlopen();
    }
    h
}

/// `dlclose(3)`: a jump to the C library's (a capture's window that spans
/// it counts six instructions of ours), unless a capture waits for or is
/// armed in a library the program opened: then [`dlclose_watched`].
///
/// # Safety
/// As `dlclose(3)`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlclose(_handle: *mut libc::c_void) -> i32 {
    core::arch::naked_asm!(
        "cmp byte ptr [rip + {watch}], 0",
        "jne 2f",
        "mov rax, qword ptr [rip + {real}]",
        "test rax, rax",
        "jz 2f",
        "jmp rax",
        "2:",
        "jmp {slow}",
        watch = sym coldcache_capture::preload::WATCHING,
        real = sym REAL_DLCLOSE,
        slow = sym dlclose_watched,
    )
}

/// `dlclose` while a capture waits for or is armed in a library the
/// program opened: its breakpoint is taken out before the library can be
/// unmapped (`coldcache_capture::preload::around_dlclose`).
extern "C" fn dlclose_watched(handle: *mut libc::c_void) -> i32 {
    let f = next(&REAL_DLCLOSE, c"dlclose");
    if f == 0 {
        return -1;
    }
    // SAFETY: the C library's dlclose, with the caller's handle.
    let call = || unsafe { std::mem::transmute::<usize, Dlclose>(f)(handle) };
    if coldcache_capture::preload::dlclose_watched() {
        coldcache_capture::preload::around_dlclose(call)
    } else {
        call()
    }
}
