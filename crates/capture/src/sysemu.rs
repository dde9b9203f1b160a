//! System calls the trap engine performs on a traced thread's behalf.
//!
//! `rt_sigprocmask` would let a traced thread block SIGTRAP (glibc blocks
//! every signal around `clone` in `pthread_create`, for one); the next
//! single-step trap would then kill the process. Such a call is done here
//! instead, inside the handler: the new mask is computed without SIGTRAP and
//! stored in the signal context (the kernel installs it when the handler
//! returns), the old mask is written, the result set and RIP moved past the
//! `syscall`.

use crate::memory::{read_word, write_word};

/// Emulates the `rt_sigprocmask` the thread of `uc` is about to make (RIP at
/// its `syscall`, `next` the instruction after it). Returns false, changing
/// nothing, for any other system call (which then runs normally).
pub fn emulate_sigprocmask(uc: &mut libc::ucontext_t, next: u64) -> bool {
    let g = &mut uc.uc_mcontext.gregs;
    if g[libc::REG_RAX as usize] as u64 != libc::SYS_rt_sigprocmask as u64
        || g[libc::REG_R10 as usize] != 8
    {
        return false;
    }
    let how = g[libc::REG_RDI as usize];
    let set_ptr = g[libc::REG_RSI as usize] as u64;
    let old_ptr = g[libc::REG_RDX as usize] as u64;
    let current = mask_word(uc);
    let done = |uc: &mut libc::ucontext_t, result: i64| {
        uc.uc_mcontext.gregs[libc::REG_RAX as usize] = result;
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] = next as i64;
        true
    };
    let set = if set_ptr != 0 {
        match read_word(set_ptr) {
            Some(v) => Some(v),
            None => return done(uc, -(libc::EFAULT as i64)),
        }
    } else {
        None
    };
    let new = match (how as i32, set) {
        (_, None) => current,
        (libc::SIG_BLOCK, Some(s)) => current | s,
        (libc::SIG_UNBLOCK, Some(s)) => current & !s,
        (libc::SIG_SETMASK, Some(s)) => s,
        _ => return done(uc, -(libc::EINVAL as i64)),
    };
    if old_ptr != 0 && !write_word(old_ptr, current) {
        return done(uc, -(libc::EFAULT as i64));
    }
    let never =
        (1u64 << (libc::SIGTRAP - 1)) | (1 << (libc::SIGKILL - 1)) | (1 << (libc::SIGSTOP - 1));
    set_mask_word(uc, new & !never);
    done(uc, 0)
}

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

/// Signals 1..=64 of the context's mask (bit n-1 for signal n).
fn mask_word(uc: &libc::ucontext_t) -> u64 {
    // SAFETY: uc_sigmask is a sigset_t of at least 8 bytes, its first word
    // holding signals 1..=64.
    unsafe { *(&uc.uc_sigmask as *const libc::sigset_t as *const u64) }
}

fn set_mask_word(uc: &mut libc::ucontext_t, v: u64) {
    // SAFETY: as in `mask_word`.
    unsafe { *(&mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64) = v };
}
