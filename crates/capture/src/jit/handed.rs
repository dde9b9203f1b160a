//! Short buffers handed over to the session lock's holder (issue 35).
//!
//! While several threads run translated code their buffers are short
//! ([`SHORT`](super::SHORT)), and each full one used to wait for the session
//! lock, whose holder replays for tens of microseconds: on two cores four
//! threads of `frame.c` spent a quarter of their CPU in the kernel's futex
//! wake and context switch (`perf record -g`), one change of the lock's
//! hands per buffer. Now a thread whose buffer fills while the lock is held
//! copies its records into its *lane* and goes on; whoever holds the lock
//! replays the lanes before its own records and again after leaving the
//! lock ([`super::recheck`]).
//!
//! # The order the simulator sees
//! One buffer of each lane in turn, round after round, not the order the
//! buffers were handed: the simulated machine runs every thread on a core
//! of its own, at once, while this machine may run them one after another
//! (two cores, four threads: the OS gives one thread a few milliseconds,
//! in which it fills many buffers). A single queue in handing order showed
//! `false_sharing.c`'s packed counters with 81-559 invalidations, the
//! padded ones' 66; in turns, as many as when every buffer waited for the
//! lock. A lane holds at most [`DEPTH`] buffers, so no thread runs more
//! than that ahead of its simulation: a thread with a full lane sleeps
//! until half of it is replayed, and the OS runs another.
//!
//! # Invariants
//! - Only a buffer that filled (`reason` 1) is handed, and only with the
//!   operating system's schedule and no signal held back: everything else
//!   replays in place, after the lanes, so a thread's records are replayed
//!   in its order, and all of them are by the time it leaves translated
//!   code, blocks in a system call or the dump is written (`flush` and
//!   `jit::finish` drain the lanes first).
//! - A slot's records are replayed with the state of the thread that
//!   handed them (its id, FS and GS bases, rseq field), never the
//!   drainer's.
//! - Each lane has one producer (the thread that claimed it, in its
//!   dispatcher, signals blocked) and one consumer (the holder of the
//!   session and translator locks): `tail` is the producer's, `head` the
//!   consumer's, and a slot belongs to whichever side its position says.
//! - Nothing is stranded for long: a producer publishes, then tries the
//!   lock; a replaying holder (`flush`) leaves the lock, then looks for
//!   published slots (a sequentially consistent fence on each side). One
//!   of the two sees the other. Other holders of the session lock (the
//!   trap engine, the life cycle) do not look: a slot handed while they
//!   hold it waits for the next replay of any thread, at the latest its
//!   own thread's next one, before that thread leaves translated code
//!   or blocks, or `jit::finish`.
//! - Waiting is bounded: a producer with a full lane sleeps on its lane's
//!   futex word (woken when half of it is free, at most a millisecond),
//!   and after three tries replays in place like any other buffer.
//! - Mapped once, at the first fast-mode capture, and never unmapped: a
//!   producer may be copying into it while a capture ends.

use super::state::{HANDED, HANDED_FULL, LANES_USED, QUEUE, TURN_START};
use super::{replay, JitState, Owner, Replayed, SHORT};
use crate::account::Accountant;
use crate::tls::EPOCH;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Buffers a lane holds: a thread runs at most about 6,400 instructions
/// ahead of the simulation.
const DEPTH: u64 = 16;
/// Lanes: threads that may hand buffers over at once (others replay in
/// place).
pub(super) const LANES: usize = 64;

/// One handed buffer: whose records, and the records.
#[repr(C)]
struct Slot {
    owner: Owner,
    epoch: u64,
    len: u64,
    records: [u8; SHORT],
}

// The replay reads a record's registers as 64-bit words: records start on
// a word's boundary in a slot as in a thread's buffer.
const _: () = assert!(
    core::mem::offset_of!(Slot, records).is_multiple_of(8)
        && core::mem::size_of::<Slot>().is_multiple_of(8)
        && core::mem::align_of::<Slot>() >= 8
);

/// One thread's handed buffers.
#[repr(C)]
struct Lane {
    /// The thread that claimed the lane (0: free).
    tid: AtomicU32,
    /// Bumped when the consumer frees slots its producer waits for: the
    /// futex word it sleeps on.
    space: AtomicU32,
    /// The producer sleeps (or is about to) on `space`.
    waiting: AtomicU32,
    /// Positions: the next slot to replay and the next to fill.
    head: AtomicU64,
    tail: AtomicU64,
    /// Written by the producer and read by the consumer, each in the
    /// slots the positions give it.
    slots: UnsafeCell<[Slot; DEPTH as usize]>,
}

/// Bytes of the lanes' mapping.
const BYTES: usize = LANES * core::mem::size_of::<Lane>();

/// Maps the lanes if they are not (a program thread preparing a fast-mode
/// capture). Without them nothing is handed.
pub(super) fn map() {
    if QUEUE.load(Ordering::Acquire) != 0 {
        return;
    }
    // Zero-filled: every lane free and empty.
    if let Some(p) = super::cache::map_far(BYTES as u64, libc::PROT_READ | libc::PROT_WRITE, -1) {
        QUEUE.store(p, Ordering::Release);
    }
}

/// Lane `i` of the mapping at `base` ([`QUEUE`]). Its atomics are shared;
/// its slots belong to the producer or the consumer as its positions say,
/// and are read and written through the pointer.
fn lane<'a>(base: u64, i: usize) -> (&'a Lane, *mut Slot) {
    // SAFETY: lane `i < LANES` of the mapping, never unmapped; its slots
    // are behind an `UnsafeCell`.
    let l = unsafe { &*(base as *const Lane).wrapping_add(i) };
    (l, l.slots.get().cast::<Slot>())
}

/// The lane of thread `tid`, claimed if it has none (`None`: every lane
/// taken, or not mapped).
fn lane_of(base: u64, tid: u32) -> Option<usize> {
    let used = LANES_USED.load(Ordering::Acquire) as usize;
    if let Some(i) = (0..used).find(|&i| lane(base, i).0.tid.load(Ordering::Relaxed) == tid) {
        return Some(i);
    }
    for i in 0..LANES {
        let l = lane(base, i).0;
        if l.tid
            .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            LANES_USED.fetch_max(i as u32 + 1, Ordering::AcqRel);
            return Some(i);
        }
    }
    None
}

/// Thread `tid` exits: its lane, empty by now (its last system call
/// replayed it), is freed for another thread.
pub(super) fn release(tid: u32) {
    let base = QUEUE.load(Ordering::Acquire);
    if base == 0 || tid == 0 {
        return;
    }
    let used = LANES_USED.load(Ordering::Acquire) as usize;
    for i in 0..used {
        let l = lane(base, i).0;
        if l.tid.load(Ordering::Relaxed) == tid
            && l.head.load(Ordering::SeqCst) == l.tail.load(Ordering::SeqCst)
        {
            l.tid.store(0, Ordering::Release);
        }
    }
}

/// What [`push`] did.
pub(super) enum Pushed {
    /// The records are in the lane: the buffer may be emptied.
    Yes,
    /// The lane is full.
    Full,
    /// No lane (all taken, or not mapped), or records too long.
    No,
}

/// Copies `records` (a full short buffer of `owner`, in capture `epoch`)
/// into the owner's lane.
pub(super) fn push(owner: Owner, epoch: u64, records: &[u8]) -> Pushed {
    let base = QUEUE.load(Ordering::Acquire);
    if base == 0 || records.len() > SHORT {
        return Pushed::No;
    }
    let Some(i) = lane_of(base, owner.tid) else {
        return Pushed::No;
    };
    let (l, slots) = lane(base, i);
    let tail = l.tail.load(Ordering::Relaxed);
    if tail - l.head.load(Ordering::SeqCst) >= DEPTH {
        HANDED_FULL.fetch_add(1, Ordering::Relaxed);
        return Pushed::Full;
    }
    let slot = slots.wrapping_add((tail % DEPTH) as usize);
    // SAFETY: the slot at `tail` is the producer's (the consumer has freed
    // it: `tail - head < DEPTH`), and this thread is the lane's producer;
    // the records fit (checked above).
    unsafe {
        core::ptr::addr_of_mut!((*slot).owner).write(owner);
        core::ptr::addr_of_mut!((*slot).epoch).write(epoch);
        core::ptr::addr_of_mut!((*slot).len).write(records.len() as u64);
        core::ptr::copy_nonoverlapping(
            records.as_ptr(),
            core::ptr::addr_of_mut!((*slot).records).cast::<u8>(),
            records.len(),
        );
    }
    l.tail.store(tail + 1, Ordering::SeqCst);
    // Published before the lock is tried again (`recheck`).
    std::sync::atomic::fence(Ordering::SeqCst);
    HANDED.fetch_add(1, Ordering::Relaxed);
    Pushed::Yes
}

/// Whether a lane holds published records.
pub(super) fn ready() -> bool {
    let base = QUEUE.load(Ordering::Acquire);
    if base == 0 {
        return false;
    }
    let used = LANES_USED.load(Ordering::Acquire) as usize;
    (0..used).any(|i| {
        let l = lane(base, i).0;
        l.head.load(Ordering::SeqCst) != l.tail.load(Ordering::SeqCst)
    })
}

/// Replays what the lanes held when called, one buffer of each lane in
/// turn (the session and translator locks held; `None`: no capture to
/// count them in, they are dropped). Says whether a slot's records
/// stopped the capture (`Stop`), else whether one of thread `me`'s own
/// stopped it being traced (`Leave`).
pub(super) fn drain(mut to: Option<(&mut Accountant, &mut JitState)>, me: u32) -> Replayed {
    let base = QUEUE.load(Ordering::Acquire);
    if base == 0 {
        return Replayed::Go;
    }
    let used = LANES_USED.load(Ordering::Acquire) as usize;
    if used == 0 {
        return Replayed::Go;
    }
    let mut until = [0u64; LANES];
    for (i, u) in until.iter_mut().enumerate().take(used) {
        *u = lane(base, i).0.tail.load(Ordering::SeqCst);
    }
    // The first lane of each round moves on from drain to drain.
    let first = TURN_START.fetch_add(1, Ordering::Relaxed) as usize % used;
    let epoch_now = EPOCH.load(Ordering::Acquire);
    let mut out = Replayed::Go;
    loop {
        let mut any = false;
        for k in 0..used {
            let i = (first + k) % used;
            let (l, slots) = lane(base, i);
            let head = l.head.load(Ordering::Relaxed);
            if head >= until[i] {
                continue;
            }
            any = true;
            let slot = slots.wrapping_add((head % DEPTH) as usize);
            // SAFETY: published (`head < tail`): the consumer's, which the
            // caller is (both locks held), until `head` moves past it.
            let (owner, epoch, start, len) = unsafe {
                (
                    (*slot).owner,
                    (*slot).epoch,
                    core::ptr::addr_of!((*slot).records) as u64,
                    (*slot).len,
                )
            };
            if epoch == epoch_now {
                if let Some((acc, j)) = to.as_mut() {
                    // Another thread a slot's records stopped (it exited,
                    // left its window) stays stopped at its next records;
                    // the drainer acts on a stop of the capture, or of
                    // itself. (A window that ended leaves the state ARMED,
                    // which `flush` answers.)
                    match replay(acc, j, owner, start, start + len) {
                        Replayed::Stop => out = Replayed::Stop,
                        Replayed::Leave if owner.tid == me && out == Replayed::Go => {
                            out = Replayed::Leave
                        }
                        _ => {}
                    }
                }
            }
            l.head.store(head + 1, Ordering::SeqCst);
            if l.waiting.load(Ordering::SeqCst) != 0
                && l.tail.load(Ordering::SeqCst) - (head + 1) <= DEPTH / 2
            {
                l.space.fetch_add(1, Ordering::SeqCst);
                if !crate::signal_state::lock::NO_SYSCALLS.load(Ordering::Relaxed) {
                    crate::lock::futex_wake(&l.space, 1);
                }
            }
        }
        if !any {
            break;
        }
    }
    out
}

/// Thread `tid` found its lane full: sleeps until the holder replayed half
/// of it, at most a millisecond (a lost wake costs that, not a hang).
pub(super) fn wait_for_space(tid: u32) {
    let base = QUEUE.load(Ordering::Acquire);
    let Some(i) = (base != 0).then(|| lane_of(base, tid)).flatten() else {
        return;
    };
    let l = lane(base, i).0;
    let seen = l.space.load(Ordering::SeqCst);
    l.waiting.store(1, Ordering::SeqCst);
    let full = || l.tail.load(Ordering::SeqCst) - l.head.load(Ordering::SeqCst) > DEPTH / 2;
    if crate::signal_state::lock::NO_SYSCALLS.load(Ordering::Relaxed) {
        for _ in 0..100_000 {
            if !full() {
                break;
            }
            std::hint::spin_loop();
        }
    } else if full() {
        crate::lock::futex_wait(&l.space, seen, 1_000_000);
    }
    l.waiting.store(0, Ordering::SeqCst);
}
