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

/// Whether the thread of `uc` (RIP at a `syscall`) is about to map code
/// that may be stable: `mmap` of a file with execution and without
/// writing (the loader mapping a `dlopen`ed library's text), or
/// `mprotect`/`pkey_mprotect` giving execution without writing. Once the
/// call has run, [`crate::jit::code_mapped`]'s rescan decides from
/// `/proc/self/maps` what is stable code.
pub fn maps_code(uc: &libc::ucontext_t) -> bool {
    let g = &uc.uc_mcontext.gregs;
    let arg = |r: libc::c_int| g[r as usize] as u64;
    let prot = arg(libc::REG_RDX);
    let exec_only = prot & libc::PROT_EXEC as u64 != 0 && prot & libc::PROT_WRITE as u64 == 0;
    match g[libc::REG_RAX as usize] {
        n if n == libc::SYS_mmap => {
            exec_only
                && arg(libc::REG_R10) & libc::MAP_ANONYMOUS as u64 == 0
                && arg(libc::REG_R8) as i32 >= 0
        }
        n if n == libc::SYS_mprotect || n == libc::SYS_pkey_mprotect => exec_only,
        _ => false,
    }
}

/// The code range the thread of `uc` (RIP at a `syscall`) is about to
/// unmap, remap or make writable: `munmap`, `mremap` (its old range),
/// `mmap` with `MAP_FIXED` over existing pages, and `mprotect` or
/// `pkey_mprotect` that removes execution or adds writing (`dlclose`, a
/// loader relocating, code patched in place). The range is page-rounded;
/// whether it holds code the caller decides. `None` for any other call.
pub fn code_range_changed(uc: &libc::ucontext_t) -> Option<(u64, u64)> {
    let g = &uc.uc_mcontext.gregs;
    let arg = |r: libc::c_int| g[r as usize] as u64;
    let (addr, len) = (arg(libc::REG_RDI), arg(libc::REG_RSI));
    let changes = match g[libc::REG_RAX as usize] {
        n if n == libc::SYS_munmap || n == libc::SYS_mremap => true,
        n if n == libc::SYS_mmap => arg(libc::REG_R10) & libc::MAP_FIXED as u64 != 0,
        n if n == libc::SYS_mprotect || n == libc::SYS_pkey_mprotect => {
            let prot = arg(libc::REG_RDX);
            prot & libc::PROT_EXEC as u64 == 0 || prot & libc::PROT_WRITE as u64 != 0
        }
        _ => false,
    };
    if !changes || len == 0 {
        return None;
    }
    let start = addr & !0xFFF;
    let end = addr.checked_add(len)?.checked_next_multiple_of(0x1000)?;
    Some((start, end))
}
