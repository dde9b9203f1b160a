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
//!   written, cut short with [`REASON`], before the call runs;
//! - a start requested once a filter is in place is refused
//!   ([`refuse_if_confined`], from `prepare`): the `Seccomp:` and
//!   `Seccomp_filters:` fields of every thread's `/proc` status are compared
//!   with what the process had when the library was loaded
//!   ([`note_inherited`]): a filter inherited from the parent (a container
//!   runtime's, say) lets the program run, and the engine with it, so only
//!   a confinement added since refuses a capture.

use crate::options::CaptureError;
use std::sync::atomic::{AtomicI64, Ordering};

/// What the dump says when the program confined itself during a capture.
pub(crate) const REASON: &str = "the program installed a seccomp filter";

const SECCOMP_SET_MODE_STRICT: i64 = 0;
const SECCOMP_SET_MODE_FILTER: i64 = 1;
const PR_SET_SECCOMP: i64 = 22;

/// Mode and filter count when the library was loaded (-1: not noted yet).
static INHERITED_MODE: AtomicI64 = AtomicI64::new(-1);
static INHERITED_FILTERS: AtomicI64 = AtomicI64::new(-1);

/// Whether the thread of `uc` (RIP at a `syscall`) is about to confine
/// itself with seccomp; the reason to stop the capture if so.
pub(crate) fn confines(uc: &libc::ucontext_t) -> Option<&'static str> {
    let g = &uc.uc_mcontext.gregs;
    let (nr, op) = (g[libc::REG_RAX as usize], g[libc::REG_RDI as usize]);
    let installs = (nr == libc::SYS_seccomp
        && (op == SECCOMP_SET_MODE_STRICT || op == SECCOMP_SET_MODE_FILTER))
        || (nr == libc::SYS_prctl && op == PR_SET_SECCOMP);
    installs.then_some(REASON)
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

    #[test]
    fn status_fields_are_read_and_missing_ones_are_none() {
        let s = "Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t3\nSpeculation_Store_Bypass:\tthread vulnerable\n";
        assert_eq!(fields(s), (Some(2), Some(3)));
        assert_eq!(fields("Name:\tx\nSeccomp:\t0\n"), (Some(0), None));
        assert_eq!(fields("Name:\tx\n"), (None, None));
    }
}
