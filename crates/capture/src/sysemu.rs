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

/// The address ranges (up to two, page-rounded) whose mappings the call of
/// the thread of `uc` (RIP at a `syscall`) replaces, removes, moves,
/// reprotects or empties: `mmap` with `MAP_FIXED` (not
/// `MAP_FIXED_NOREPLACE`, which fails instead), `munmap`, `mremap` (its old
/// range, and its new one with `MREMAP_FIXED`), `mprotect`,
/// `pkey_mprotect`, and `madvise` with an advice that discards contents
/// (`MADV_DONTNEED`, `MADV_FREE`, `MADV_REMOVE`, `MADV_DONTNEED_LOCKED`).
/// The caller checks them against its own memory (issue 33: a program that
/// claims address space it believes free). In fast mode translated code
/// makes `madvise` itself (`jit/sys.rs`): only the trap engine sees it.
pub fn replaced_ranges(uc: &libc::ucontext_t) -> [Option<(u64, u64)>; 2] {
    let g = &uc.uc_mcontext.gregs;
    let arg = |r: libc::c_int| g[r as usize] as u64;
    let range = |addr: u64, len: u64| -> Option<(u64, u64)> {
        if len == 0 {
            return None;
        }
        let end = addr.checked_add(len)?.checked_next_multiple_of(0x1000)?;
        Some((addr & !0xFFF, end))
    };
    let (addr, len) = (arg(libc::REG_RDI), arg(libc::REG_RSI));
    const MADV_DONTNEED_LOCKED: u64 = 24;
    match g[libc::REG_RAX as usize] {
        n if n == libc::SYS_mmap => {
            let flags = arg(libc::REG_R10);
            let fixed = flags & libc::MAP_FIXED as u64 != 0
                && flags & libc::MAP_FIXED_NOREPLACE as u64 == 0;
            [fixed.then(|| range(addr, len)).flatten(), None]
        }
        n if n == libc::SYS_munmap || n == libc::SYS_mprotect || n == libc::SYS_pkey_mprotect => {
            [range(addr, len), None]
        }
        n if n == libc::SYS_mremap => {
            let fixed = arg(libc::REG_R10) & libc::MREMAP_FIXED as u64 != 0;
            [
                range(addr, len),
                fixed
                    .then(|| range(arg(libc::REG_R8), arg(libc::REG_RDX)))
                    .flatten(),
            ]
        }
        n if n == libc::SYS_madvise => {
            let advice = arg(libc::REG_RDX);
            let discards = [
                libc::MADV_DONTNEED as u64,
                libc::MADV_FREE as u64,
                libc::MADV_REMOVE as u64,
                MADV_DONTNEED_LOCKED,
            ]
            .contains(&advice);
            [discards.then(|| range(addr, len)).flatten(), None]
        }
        _ => [None, None],
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A context at a `syscall` with `nr` and arguments `a` (RDI, RSI,
    /// RDX, R10, R8).
    fn at_call(nr: i64, a: [u64; 5]) -> libc::ucontext_t {
        // SAFETY: ucontext_t is plain old data; all zeroes is a valid value.
        let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
        let g = &mut uc.uc_mcontext.gregs;
        g[libc::REG_RAX as usize] = nr;
        for (r, v) in [
            libc::REG_RDI,
            libc::REG_RSI,
            libc::REG_RDX,
            libc::REG_R10,
            libc::REG_R8,
        ]
        .into_iter()
        .zip(a)
        {
            g[r as usize] = v as i64;
        }
        uc
    }

    /// The ranges a call takes, page-rounded, by hand; calls that cannot
    /// replace a mapping take none.
    #[test]
    fn the_ranges_a_call_replaces() {
        let fixed = libc::MAP_FIXED as u64 | libc::MAP_PRIVATE as u64;
        let noreplace = libc::MAP_FIXED_NOREPLACE as u64 | libc::MAP_PRIVATE as u64;
        let r = |nr, a| replaced_ranges(&at_call(nr, a));
        assert_eq!(
            r(libc::SYS_mmap, [0x10_0000, 0x1801, 3, fixed, 0]),
            [Some((0x10_0000, 0x10_2000)), None]
        );
        assert_eq!(
            r(libc::SYS_mmap, [0x10_0000, 0x1000, 3, noreplace, 0]),
            [None, None]
        );
        assert_eq!(r(libc::SYS_mmap, [0, 0x1000, 3, 0x22, 0]), [None, None]);
        assert_eq!(
            r(libc::SYS_munmap, [0x10_0800, 0x1000, 0, 0, 0]),
            [Some((0x10_0000, 0x10_2000)), None]
        );
        assert_eq!(r(libc::SYS_munmap, [0x10_0000, 0, 0, 0, 0]), [None, None]);
        // mremap(old, old_len, new_len, MREMAP_MAYMOVE | MREMAP_FIXED, new)
        let flags = (libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED) as u64;
        assert_eq!(
            r(
                libc::SYS_mremap,
                [0x10_0000, 0x1000, 0x3000, flags, 0x40_0000]
            ),
            [Some((0x10_0000, 0x10_1000)), Some((0x40_0000, 0x40_3000))]
        );
        assert_eq!(
            r(libc::SYS_mremap, [0x10_0000, 0x1000, 0x3000, 1, 0x40_0000]),
            [Some((0x10_0000, 0x10_1000)), None]
        );
        let dontneed = libc::MADV_DONTNEED as u64;
        assert_eq!(
            r(libc::SYS_madvise, [0x10_0000, 0x1000, dontneed, 0, 0]),
            [Some((0x10_0000, 0x10_1000)), None]
        );
        let willneed = libc::MADV_WILLNEED as u64;
        assert_eq!(
            r(libc::SYS_madvise, [0x10_0000, 0x1000, willneed, 0, 0]),
            [None, None]
        );
        assert_eq!(
            r(libc::SYS_read, [0x10_0000, 0x1000, 0, 0, 0]),
            [None, None]
        );
        // An end past the address space is no range (the call fails).
        assert_eq!(
            r(libc::SYS_munmap, [u64::MAX - 0xFFF, 0x2000, 0, 0, 0]),
            [None, None]
        );
    }
}
