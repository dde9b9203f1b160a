//! seccomp: a program that confines its system calls must never be killed
//! by the capture engine's own.
//!
//! The engine's handlers make system calls (`gettid`, `getpid`, the
//! `rt_sigreturn` that ends every signal handler, and many more while a dump
//! is written). Under strict mode, or a filter that kills unknown calls,
//! any of them would kill the program. So:
//! - a traced thread's `seccomp(SECCOMP_SET_MODE_STRICT | _FILTER)` or
//!   `prctl(PR_SET_SECCOMP, ...)` is seen coming ([`confines`], on the trap
//!   engine's `Verdict::Syscall` path): the capture stops and its dump is
//!   written, cut short with [`REASON`], before the call runs (a filter
//!   synchronised to every thread first parks the library's writer thread
//!   in a call that never returns, [`park_writer`]);
//! - a start requested once a filter is in place is refused
//!   ([`refuse_if_confined`], from `prepare`): the `Seccomp:` and
//!   `Seccomp_filters:` fields of every thread's `/proc` status are compared
//!   with what the process had when the library was loaded
//!   ([`note_inherited`]): a filter inherited from the parent (a container
//!   runtime's, say) lets the program run, and the engine with it, so only
//!   a confinement added since refuses a capture.

use crate::options::CaptureError;
use crate::signal_state::seccomp::{INHERITED_FILTERS, INHERITED_MODE, PARKED};
use std::sync::atomic::Ordering;

/// What the dump says when the program confined itself during a capture.
pub(crate) const REASON: &str = "the program installed a seccomp filter";

const SECCOMP_SET_MODE_STRICT: i64 = 0;
const SECCOMP_SET_MODE_FILTER: i64 = 1;
const PR_SET_SECCOMP: i64 = 22;
const SECCOMP_FILTER_FLAG_TSYNC: i64 = 1;

/// Whether the thread of `uc` (RIP at a `syscall`) is about to confine
/// itself with seccomp; the reason to stop the capture if so. A filter
/// synchronised to every thread (`SECCOMP_FILTER_FLAG_TSYNC`) also reaches
/// the library's writer thread, so it is parked first ([`park_writer`]).
pub(crate) fn confines(uc: &libc::ucontext_t) -> Option<&'static str> {
    let g = &uc.uc_mcontext.gregs;
    let (nr, op) = (g[libc::REG_RAX as usize], g[libc::REG_RDI as usize]);
    let installs = (nr == libc::SYS_seccomp
        && (op == SECCOMP_SET_MODE_STRICT || op == SECCOMP_SET_MODE_FILTER))
        || (nr == libc::SYS_prctl && op == PR_SET_SECCOMP);
    if installs
        && nr == libc::SYS_seccomp
        && op == SECCOMP_SET_MODE_FILTER
        && g[libc::REG_RSI as usize] & SECCOMP_FILTER_FLAG_TSYNC != 0
    {
        park_writer();
    }
    if installs {
        // Other threads may still take the engine's locks (a last trap):
        // a filter may kill the program for their `futex`.
        crate::lock::forbid_system_calls();
    }
    installs.then_some(REASON)
}

/// Parks the library's writer thread (if there is one) inside a system call
/// that never returns, and waits (a bounded time) until it is there: a
/// filter applied to every thread then finds it already in the kernel, and
/// its next poll can never be the call that kills the program. Later
/// `--signal` triggers are then ignored (a start would be refused anyway).
/// Called from the trap handler; the writer needs none of its locks to
/// park, so the wait ends at once unless the writer is inside the engine's
/// lock (progress printing), which the bound (2 s) covers.
///
/// The writer sets [`PARKED`] just *before* its `pause`: a writer
/// preempted between the two would make its `pause` under the filter,
/// which kills the program (seen once in CI, on a loaded machine). So the
/// wait also asks the kernel that the writer is blocked in `pause`
/// ([`blocked_in_pause`]); where `/proc` cannot say, the bound ends it.
fn park_writer() {
    let tid = crate::doorbell::writer_tid();
    if tid == 0 || PARKED.load(Ordering::Acquire) {
        return;
    }
    crate::doorbell::post(crate::doorbell::Command::Park);
    let now = || {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the live local.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
        t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128
    };
    let start = now();
    while !(PARKED.load(Ordering::Acquire) && blocked_in_pause(tid))
        && now() - start < 2_000_000_000
    {
        // SAFETY: sched_yield has no preconditions; it lets the writer run.
        unsafe { libc::sched_yield() };
    }
}

/// Whether thread `tid` of this process is blocked in `pause`: its
/// `/proc/self/task/TID/syscall` begins with the call's number (34 on
/// x86-64) while it waits in it, `running` otherwise. Read with
/// [`crate::procfs::read_task_file`]: this runs in the trap handler
/// (async-signal-safe, no allocation).
fn blocked_in_pause(tid: u32) -> bool {
    let mut buf = [0u8; 16];
    let got = crate::procfs::read_task_file(tid, b"syscall", &mut buf).unwrap_or(0);
    got >= 3 && &buf[..3] == b"34 "
}

// The number `blocked_in_pause` looks for.
const _: () = assert!(libc::SYS_pause == 34);

/// The writer thread's end after a synchronised filter: every signal is
/// blocked on it (`fatal::block_in_own_thread`), so `pause` never returns.
pub(crate) fn park_writer_here() -> ! {
    PARKED.store(true, Ordering::Release);
    loop {
        // The raw call, so that its number is the one `blocked_in_pause`
        // looks for whatever the C library makes of `pause()`.
        // SAFETY: pause has no preconditions.
        unsafe { libc::syscall(libc::SYS_pause) };
    }
}

/// The `Seccomp:` mode and `Seccomp_filters:` count of a `/proc` status
/// file's text (`None` for a field the kernel does not give).
fn fields(status: &str) -> (Option<i64>, Option<i64>) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    (field("Seccomp:"), field("Seccomp_filters:"))
}

/// Notes the confinement the process already had when the library was
/// loaded (called once, by the library's constructor).
pub(crate) fn note_inherited() {
    if let Ok(s) = std::fs::read_to_string("/proc/thread-self/status") {
        let (mode, filters) = fields(&s);
        INHERITED_MODE.store(mode.unwrap_or(0), Ordering::Relaxed);
        INHERITED_FILTERS.store(filters.unwrap_or(0), Ordering::Relaxed);
    }
}

/// Refuses a capture when a thread of the process has confined itself
/// since the library was loaded (strict mode, or more filters).
pub(crate) fn refuse_if_confined() -> Result<(), CaptureError> {
    if INHERITED_MODE.load(Ordering::Relaxed) < 0 {
        // Not loaded as libcoldcache (the Rust API): what is there now is
        // taken as inherited.
        note_inherited();
    }
    let (base_mode, base_filters) = (
        INHERITED_MODE.load(Ordering::Relaxed),
        INHERITED_FILTERS.load(Ordering::Relaxed),
    );
    for tid in crate::procfs::tasks() {
        let Ok(s) = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")) else {
            continue; // the thread has exited
        };
        let (mode, filters) = fields(&s);
        let mode = mode.unwrap_or(0);
        let filters = filters.unwrap_or(0);
        if mode == 1 || mode > base_mode || filters > base_filters {
            return Err(CaptureError::Seccomp {
                tid,
                mode: if mode == 1 { "strict" } else { "filter" },
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's answer for a thread blocked in `pause` (as the parked
    /// writer is) and for one that runs.
    #[test]
    fn a_thread_blocked_in_pause_is_told_from_a_running_one() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            loop {
                // SAFETY: pause has no preconditions (the test process
                // ends with the thread still in it).
                unsafe { libc::syscall(libc::SYS_pause) };
            }
        });
        let parked = rx.recv().unwrap();
        let t0 = std::time::Instant::now();
        while !blocked_in_pause(parked) {
            assert!(
                t0.elapsed().as_secs() < 10,
                "thread {parked} never seen in pause"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() } as u32;
        assert!(!blocked_in_pause(me), "the running thread is not in pause");
        assert!(!blocked_in_pause(u32::MAX), "no such thread");
    }

    #[test]
    fn status_fields_are_read_and_missing_ones_are_none() {
        let s = "Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t3\nSpeculation_Store_Bypass:\tthread vulnerable\n";
        assert_eq!(fields(s), (Some(2), Some(3)));
        assert_eq!(fields("Name:\tx\nSeccomp:\t0\n"), (Some(0), None));
        assert_eq!(fields("Name:\tx\n"), (None, None));
    }
}
