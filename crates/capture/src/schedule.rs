//! `--schedule serial[=QUANTUM]`: traced threads take turns, one at a time,
//! for a fixed quantum of instructions, so the simulator sees the same
//! interleaving in every run of a deterministic program (Valgrind
//! serialises threads the same way). See `docs/capture.md`.
//!
//! The turn is a futex word of our own ([`TURN`]: the tid that holds it, 0
//! when free). A traced thread calls [`enter`] before each step (trap
//! engine) or before going on after a replay (fast mode), outside every
//! lock of the engine, and waits there until the turn is its own; [`tick`]
//! counts the instructions of its turn and hands the turn on at the
//! quantum. The next holder is the waiting thread with the next higher tid
//! (wrapping round): tids are handed out in creation order, which the
//! serialised run makes deterministic. A thread about to make a system call
//! that may block gives up its turn ([`syscall`]) and takes one again at
//! its next step, so nothing waits for a thread that waits for it. A
//! thread that has just been cloned is waited for before the turn moves
//! on ([`PENDING`]), so it takes its place in the rotation at the same
//! point in every run.
//!
//! # Invariants
//! - Async-signal-safe: fixed-size tables of atomics, raw `futex` and
//!   `nanosleep` system calls; no allocation, no lock the program may hold.
//! - Never deadlocks on the program: every wait is bounded (a thread that
//!   waits [`STALL_NS`] for a turn that never comes takes it, and the
//!   capture is marked not reproducible: [`stalled`]).

use crate::lock::{futex_wait, futex_wake};
use crate::signal_state::schedule::{
    EXITING, FREE, OUT, PENDING, QUANTUM, STALLED, STATES, TIDS, TURN, USED, WAITING,
};
use std::sync::atomic::Ordering;

/// How long a thread waits for a turn (or a new thread for its first) before
/// it goes on anyway.
const STALL_NS: u64 = 2_000_000_000;

/// Starts serialising with `quantum` instructions per turn (0: off), the
/// first turn going to `first` (0: to the first thread that asks).
pub(crate) fn configure(quantum: u64, first: u32) {
    for (t, s) in TIDS.iter().zip(&STATES) {
        t.store(0, Ordering::Relaxed);
        s.store(FREE, Ordering::Relaxed);
    }
    USED.store(0, Ordering::Relaxed);
    PENDING.store(0, Ordering::Relaxed);
    EXITING.store(0, Ordering::Relaxed);
    STALLED.store(false, Ordering::Relaxed);
    TURN.store(if quantum == 0 { 0 } else { first }, Ordering::Release);
    QUANTUM.store(quantum, Ordering::Release);
}

/// Stops serialising: every waiting thread goes on.
pub(crate) fn off() {
    if QUANTUM.swap(0, Ordering::AcqRel) != 0 {
        TURN.store(0, Ordering::Release);
        futex_wake(&TURN, i32::MAX);
    }
}

/// Whether threads are serialised now.
#[inline]
pub(crate) fn on() -> bool {
    QUANTUM.load(Ordering::Relaxed) != 0
}

/// Whether some wait ran out (the run may not be reproducible).
pub(crate) fn stalled() -> bool {
    STALLED.load(Ordering::Relaxed)
}

fn slot_of(tid: u32) -> Option<usize> {
    TIDS.iter().position(|t| t.load(Ordering::Acquire) == tid)
}

/// The thread's slot, claimed at its first turn; whether it is new.
fn claim(tid: u32) -> Option<(usize, bool)> {
    if let Some(i) = slot_of(tid) {
        return Some((i, false));
    }
    for (i, t) in TIDS.iter().enumerate() {
        if t.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return Some((i, true));
        }
    }
    STALLED.store(true, Ordering::Relaxed);
    None
}

/// A thread cloned by a traced one has arrived (and waits, if it must).
fn arrived() {
    let _ = PENDING.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |p| p.checked_sub(1));
}

/// Waits until it is thread `tid`'s turn (returns at once when it is, when
/// the turn is free — then taking it — or when threads are not serialised).
/// `running` says whether the capture still runs: a stop ends every wait.
pub(crate) fn enter(tid: u32, running: impl Fn() -> bool) {
    if !on() {
        return;
    }
    let Some((i, new)) = claim(tid) else { return };
    if TURN.load(Ordering::Acquire) == tid {
        STATES[i].store(FREE, Ordering::Release);
        if new {
            arrived();
        }
        return;
    }
    STATES[i].store(WAITING, Ordering::Release);
    if new {
        arrived();
    }
    let mut waited = 0u64;
    loop {
        let turn = TURN.load(Ordering::Acquire);
        if turn == tid || !on() || !running() {
            break;
        }
        if turn == 0
            && TURN
                .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            USED.store(0, Ordering::Relaxed);
            break;
        }
        if waited >= STALL_NS {
            // The holder never handed on (a thread of ours stuck where we
            // cannot see): go on rather than hang the program.
            STALLED.store(true, Ordering::Relaxed);
            TURN.store(tid, Ordering::Release);
            USED.store(0, Ordering::Relaxed);
            break;
        }
        futex_wait(&TURN, turn, 50_000_000);
        waited += 50_000_000;
    }
    STATES[i].store(FREE, Ordering::Release);
    settle(tid);
}

/// A thread that exited at the end of the last turn is gone before this
/// one goes on (bounded wait).
fn settle(tid: u32) {
    let gone = EXITING.load(Ordering::Acquire);
    if gone == 0 || gone == tid || TURN.load(Ordering::Acquire) != tid {
        return;
    }
    let mut waited = 0u64;
    // SAFETY: getpid and tgkill with signal 0 (an existence check) are
    // plain system calls.
    while unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), gone, 0) } == 0 {
        if waited >= STALL_NS || !on() {
            STALLED.store(true, Ordering::Relaxed);
            break;
        }
        nap(20_000);
        waited += 20_000;
    }
    let _ = EXITING.compare_exchange(gone, 0, Ordering::AcqRel, Ordering::Relaxed);
}

/// Thread `tid` is about to make its `exit` system call: it leaves the
/// rotation, and the next holder waits until it is gone.
pub(crate) fn exiting(tid: u32) {
    if on() {
        EXITING.store(tid, Ordering::Release);
        leave(tid);
    }
}

/// Thread `tid` ran `n` more instructions of its turn: at the quantum the
/// turn goes to the next waiting thread (the thread then waits at its next
/// [`enter`]).
#[inline]
pub(crate) fn tick(tid: u32, n: u64) {
    let q = QUANTUM.load(Ordering::Relaxed);
    if q == 0 || TURN.load(Ordering::Relaxed) != tid {
        return;
    }
    if USED.fetch_add(n, Ordering::Relaxed) + n >= q {
        hand_on(tid, false);
    }
}

/// Thread `tid` stops being traced (it exits, or left the window): its
/// turn, if it holds it, goes on; its slot is freed.
pub(crate) fn leave(tid: u32) {
    if !on() {
        return;
    }
    if TURN.load(Ordering::Acquire) == tid {
        hand_on(tid, true);
    }
    if let Some(i) = slot_of(tid) {
        STATES[i].store(FREE, Ordering::Release);
        TIDS[i].store(0, Ordering::Release);
    }
}

/// Thread `tid` is about to make system call `nr` with first argument
/// `arg0` (`read_u64` reads its memory). One that may block gives up the
/// turn first; a `clone` of a thread is remembered so the new thread is
/// waited for.
pub(crate) fn syscall(
    tid: u32,
    nr: u64,
    arg0: u64,
    arg1: u64,
    read_u64: impl Fn(u64) -> Option<u64>,
) {
    if !on() {
        return;
    }
    if clones_thread(nr, arg0, read_u64) {
        PENDING.fetch_add(1, Ordering::AcqRel);
    }
    if may_block(nr, arg1) && TURN.load(Ordering::Acquire) == tid {
        hand_on(tid, true);
    }
}

/// Whether system call `nr` with first argument `arg0` starts a thread of
/// the process (`clone`/`clone3` with `CLONE_THREAD`; `read_u64` reads
/// `clone3`'s flags from its argument block).
pub(crate) fn clones_thread(nr: u64, arg0: u64, read_u64: impl Fn(u64) -> Option<u64>) -> bool {
    const CLONE_THREAD: u64 = 0x10000;
    match nr as i64 {
        libc::SYS_clone => arg0 & CLONE_THREAD != 0,
        libc::SYS_clone3 => read_u64(arg0).is_some_and(|f| f & CLONE_THREAD != 0),
        _ => false,
    }
}

/// Whether system call `nr` (second argument `arg1`: a futex's operation)
/// may wait for another thread or the outside world. Anything not known
/// not to is taken as blocking: giving up a turn costs only a wait.
fn may_block(nr: u64, arg1: u64) -> bool {
    const FUTEX_WAKE: u64 = 1;
    const FUTEX_REQUEUE: u64 = 3;
    const FUTEX_CMP_REQUEUE: u64 = 4;
    const FUTEX_WAKE_OP: u64 = 5;
    const FUTEX_UNLOCK_PI: u64 = 7;
    const FUTEX_WAKE_BITSET: u64 = 10;
    match nr as i64 {
        libc::SYS_futex => !matches!(
            arg1 & 0x7f,
            FUTEX_WAKE
                | FUTEX_REQUEUE
                | FUTEX_CMP_REQUEUE
                | FUTEX_WAKE_OP
                | FUTEX_UNLOCK_PI
                | FUTEX_WAKE_BITSET
        ),
        libc::SYS_mmap
        | libc::SYS_mprotect
        | libc::SYS_munmap
        | libc::SYS_mremap
        | libc::SYS_madvise
        | libc::SYS_brk
        | libc::SYS_rt_sigaction
        | libc::SYS_rt_sigprocmask
        | libc::SYS_getpid
        | libc::SYS_gettid
        | libc::SYS_getuid
        | libc::SYS_clone
        | libc::SYS_clone3
        | libc::SYS_set_tid_address
        | libc::SYS_set_robust_list
        | libc::SYS_rseq
        | libc::SYS_prctl
        | libc::SYS_arch_prctl
        | libc::SYS_clock_gettime
        | libc::SYS_gettimeofday
        | libc::SYS_sched_getaffinity
        | libc::SYS_prlimit64
        | libc::SYS_fstat
        | libc::SYS_newfstatat
        | libc::SYS_lseek
        | libc::SYS_getrandom => false,
        _ => true,
    }
}

/// Hands the turn from `tid` to the waiting thread with the next higher
/// tid (wrapping round), after any thread just cloned has arrived. `out`:
/// `tid` gives the turn up (a system call, its end); otherwise, with
/// nobody waiting, it keeps it for another quantum.
fn hand_on(tid: u32, out: bool) {
    let mut waited = 0u64;
    while PENDING.load(Ordering::Acquire) != 0 && on() {
        if waited >= STALL_NS {
            // A clone that failed, or a thread that never traps.
            PENDING.store(0, Ordering::Release);
            STALLED.store(true, Ordering::Relaxed);
            break;
        }
        nap(100_000);
        waited += 100_000;
    }
    // A thread whose quantum ran out waits at its next step: it is a
    // candidate from now on, not from whenever it gets there (which would
    // make the next choice depend on timing).
    if let Some(i) = slot_of(tid) {
        STATES[i].store(if out { OUT } else { WAITING }, Ordering::Release);
    }
    let mut above = u32::MAX;
    let mut lowest = u32::MAX;
    for (t, s) in TIDS.iter().zip(&STATES) {
        let t = t.load(Ordering::Acquire);
        if t == 0 || t == tid || s.load(Ordering::Acquire) != WAITING {
            continue;
        }
        lowest = lowest.min(t);
        if t > tid {
            above = above.min(t);
        }
    }
    let next = if above != u32::MAX {
        above
    } else if lowest != u32::MAX {
        lowest
    } else if out {
        0
    } else {
        tid
    };
    USED.store(0, Ordering::Relaxed);
    TURN.store(next, Ordering::Release);
    if next != tid {
        futex_wake(&TURN, i32::MAX);
    }
}

fn nap(ns: u64) {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: ns as libc::c_long,
    };
    // SAFETY: nanosleep with a live timespec.
    unsafe { libc::syscall(libc::SYS_nanosleep, &ts as *const libc::timespec, 0usize) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn futex_wakes_are_not_blocking_and_waits_are() {
        // FUTEX_WAKE and FUTEX_WAIT with FUTEX_PRIVATE_FLAG (128).
        const PRIVATE: u64 = 128;
        assert!(!may_block(libc::SYS_futex as u64, 1 + PRIVATE));
        assert!(may_block(libc::SYS_futex as u64, PRIVATE));
        assert!(may_block(libc::SYS_read as u64, 0));
        assert!(!may_block(libc::SYS_mmap as u64, 0));
    }
}
