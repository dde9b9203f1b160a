//! Which system calls translated code makes itself, read by the code at
//! run time (the call number is in RAX only then).
//!
//! A `syscall` is a block of its own (`Translator::emit_syscall`). Its code
//! looks the number up in [`CLASS`] without writing a flag and either
//! - makes the call inline ([`INLINE`]): calls that cannot wait for
//!   another thread or the outside world for long and that the trap
//!   engine has nothing to do for;
//! - replays the thread's buffer first, in the dispatcher, then makes the
//!   call from the block ([`FLUSH`]): calls that may block (a futex wait,
//!   `read`, `poll`, `nanosleep`, ...), so a thread blocked in one holds no
//!   record a stop would have to wait for;
//! - or hands the thread to the trap engine, which steps the call as in
//!   trap mode ([`ENGINE`], the default for any number not listed here):
//!   everything its pre-syscall work must see (`exit`, `exit_group`,
//!   `execve`, `clone`/`clone3`/`fork`/`vfork`, `mmap`/`munmap`/`mprotect`/
//!   `mremap` (code may change), `rt_sigaction`, `rt_sigprocmask`,
//!   `rt_sigreturn`, `sigaltstack`, `rt_sigpending`, signals sent to a
//!   thread of the process, `prctl`, `seccomp`, `arch_prctl`, `openat2`,
//!   `creat`, `truncate`, ...).
//!
//! `open` and `openat` are made inline after the replay, but the
//! dispatcher first makes the check the trap engine makes before the
//! calls it steps (`codewrite.rs`: a writable open may demote code).
//!
//! A `futex` ([`FUTEX`]) is classed by its operation's low byte
//! ([`FUTEX_CLASS`]): wakes inline, waits replay first.
//!
//! Under `--schedule serial` every call goes to the trap engine
//! ([`configure`]).

pub(crate) use crate::signal_state::jit_sys::{CLASS, ENGINE, FLUSH, FUTEX, FUTEX_CLASS, INLINE};
use std::sync::atomic::Ordering;

/// Calls made inline: they return without waiting for long.
const INLINE_CALLS: &[i64] = &[
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_getppid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getpgrp,
    libc::SYS_getpgid,
    libc::SYS_getsid,
    libc::SYS_getgroups,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    libc::SYS_time,
    libc::SYS_lseek,
    libc::SYS_fstat,
    libc::SYS_stat,
    libc::SYS_lstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_statfs,
    libc::SYS_fstatfs,
    libc::SYS_access,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
    libc::SYS_getcwd,
    libc::SYS_getdents64,
    libc::SYS_close,
    libc::SYS_dup,
    libc::SYS_dup2,
    libc::SYS_dup3,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_ftruncate,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_getrusage,
    libc::SYS_times,
    libc::SYS_uname,
    libc::SYS_sysinfo,
    libc::SYS_getrlimit,
    libc::SYS_getrandom,
    libc::SYS_getcpu,
    libc::SYS_umask,
    libc::SYS_brk,
    libc::SYS_madvise,
    libc::SYS_membarrier,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_eventfd2,
    libc::SYS_pipe2,
    libc::SYS_socket,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_getsockopt,
    libc::SYS_setsockopt,
    libc::SYS_shutdown,
];

/// Calls that may block: made after the buffer is replayed.
const FLUSH_CALLS: &[i64] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_select,
    libc::SYS_pselect6,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_connect,
    libc::SYS_recvfrom,
    libc::SYS_recvmsg,
    libc::SYS_sendto,
    libc::SYS_sendmsg,
    libc::SYS_fcntl,
    libc::SYS_flock,
    libc::SYS_ioctl,
];

/// Futex operations that never wait (`FUTEX_WAKE`, `REQUEUE`,
/// `CMP_REQUEUE`, `WAKE_OP`, `UNLOCK_PI`, `TRYLOCK_PI`, `WAKE_BITSET`).
const FUTEX_WAKES: &[u8] = &[1, 3, 4, 5, 7, 8, 10];

/// Fills the tables for a capture (normal context, before any thread is
/// handed to translated code). `serial`: `--schedule serial`, where every
/// call goes through the trap engine.
pub(crate) fn configure(serial: bool) {
    for c in &CLASS {
        c.store(ENGINE, Ordering::Relaxed);
    }
    for c in &FUTEX_CLASS {
        c.store(FLUSH, Ordering::Relaxed);
    }
    if serial {
        // Every call through the trap engine, as before calls were made in
        // translated code: with them inline, `--schedule serial` no longer
        // gave identical dumps (`windows.rs`' serial.c: 109,737 against
        // 109,549 instructions in two runs). Why is not known yet.
        return;
    }
    for &n in INLINE_CALLS {
        CLASS[n as usize].store(INLINE, Ordering::Relaxed);
    }
    for &n in FLUSH_CALLS {
        CLASS[n as usize].store(FLUSH, Ordering::Relaxed);
    }
    CLASS[libc::SYS_futex as usize].store(FUTEX, Ordering::Relaxed);
    for (b, c) in FUTEX_CLASS.iter().enumerate() {
        let wake = FUTEX_WAKES.contains(&(b as u8 & 0x7f));
        c.store(if wake { INLINE } else { FLUSH }, Ordering::Release);
    }
}

/// Whether this processor has BMI2 (`shrx`, with which the code bounds the
/// call number without writing flags); without it system calls are
/// refused (they run under the trap engine).
pub(crate) fn supported() -> bool {
    std::arch::is_x86_feature_detected!("bmi2")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call the trap engine's pre-syscall work looks at goes to it.
    #[test]
    fn the_calls_the_engine_must_see_go_to_it() {
        configure(false);
        for n in [
            libc::SYS_exit,
            libc::SYS_exit_group,
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_clone,
            libc::SYS_clone3,
            libc::SYS_fork,
            libc::SYS_vfork,
            libc::SYS_mmap,
            libc::SYS_munmap,
            libc::SYS_mprotect,
            libc::SYS_pkey_mprotect,
            libc::SYS_mremap,
            libc::SYS_rt_sigaction,
            libc::SYS_rt_sigprocmask,
            libc::SYS_rt_sigreturn,
            libc::SYS_rt_sigpending,
            libc::SYS_rt_sigsuspend,
            libc::SYS_sigaltstack,
            libc::SYS_kill,
            libc::SYS_tgkill,
            libc::SYS_tkill,
            libc::SYS_prctl,
            libc::SYS_seccomp,
            libc::SYS_arch_prctl,
            libc::SYS_rseq,
            // A writable open may demote code (`codewrite.rs`; `open` and
            // `openat` are checked by the dispatcher, see below).
            libc::SYS_openat2,
            libc::SYS_creat,
            libc::SYS_truncate,
        ] {
            assert_eq!(CLASS[n as usize].load(Ordering::Relaxed), ENGINE, "{n}");
        }
        assert_eq!(
            CLASS[libc::SYS_futex as usize].load(Ordering::Relaxed),
            FUTEX
        );
        // Replayed first, so the dispatcher's `codewrite` check runs.
        for n in [libc::SYS_open, libc::SYS_openat] {
            assert_eq!(CLASS[n as usize].load(Ordering::Relaxed), FLUSH, "{n}");
        }
        // FUTEX_WAIT_PRIVATE replays first, FUTEX_WAKE_PRIVATE is inline.
        assert_eq!(FUTEX_CLASS[128].load(Ordering::Relaxed), FLUSH);
        assert_eq!(FUTEX_CLASS[129].load(Ordering::Relaxed), INLINE);
        // Under --schedule serial every call goes to the trap engine.
        configure(true);
        for n in [libc::SYS_getpid, libc::SYS_futex, libc::SYS_read] {
            assert_eq!(CLASS[n as usize].load(Ordering::Relaxed), ENGINE, "{n}");
        }
        assert_eq!(FUTEX_CLASS[129].load(Ordering::Relaxed), FLUSH);
        configure(false);
    }
}
