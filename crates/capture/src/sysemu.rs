//! System calls of a traced thread that end its tracing or the capture
//! (`exit`, `exit_group`, `execve`, a seccomp confinement), seen before
//! they run. The calls the trap engine performs on a thread's behalf
//! (`rt_sigprocmask`, `rt_sigaction` of the signals it owns) are in
//! `sigvirt.rs` and `fatal.rs`.

/// Why the capture must end before the thread of `uc` (RIP at a `syscall`)
/// makes its system call: `exit_group` and `execve`/`execveat` end every
/// thread's tracing, and a seccomp confinement (`crate::seccomp::confines`)
/// could kill the engine's own system calls after it, so the capture is
/// written before them. `None` for any other call.
pub fn ends_process(uc: &libc::ucontext_t) -> Option<&'static str> {
    match uc.uc_mcontext.gregs[libc::REG_RAX as usize] {
        n if n == libc::SYS_exit_group => Some("the program exited (exit_group)"),
        n if n == libc::SYS_execve || n == libc::SYS_execveat => Some("the program called execve"),
        _ => crate::seccomp::confines(uc),
    }
}

/// Whether the thread of `uc` (RIP at a `syscall`) is about to end itself
/// (`exit`, which ends one thread; glibc's `pthread_exit` makes it).
pub fn ends_thread(uc: &libc::ucontext_t) -> bool {
    uc.uc_mcontext.gregs[libc::REG_RAX as usize] == libc::SYS_exit
}
