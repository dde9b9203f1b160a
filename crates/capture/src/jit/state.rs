//! The fast front end's statics (`jit/mod.rs`, `verify.rs`,
//! `interrupted.rs`), each saying who writes it and from which context (a
//! program thread preparing or finishing a capture, the handlers and the
//! dispatcher of traced threads). A child of `jit`, so it may name the
//! translator's own types; the system-call tables translated code reads
//! (`jit/sys.rs`, in the lowest layer) are in `signal_state.rs`.

use super::JitCell;
use core::fmt::Write;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64};

// `jit/mod.rs`

/// What a lookup-table entry must carry to be valid: changes at every
/// capture and whenever translations are retired (code unmapped or made
/// writable), which empties every thread's table at once.
///
/// Written (bumped) by `prepare` (program thread) and by the thread
/// retiring translations (`invalidate`: a traced thread's handler or
/// dispatcher; `replay`); read by the dispatcher (its address is in the
/// code).
pub(super) static LOOKUP_GEN: AtomicU64 = AtomicU64::new(0);

/// Threads in translated code or the dispatcher now.
///
/// Written: counted by each traced thread entering or leaving translated code
/// (`try_hand_over` in its SIGTRAP handler, `deactivate`).
pub(super) static ACTIVE: AtomicU32 = AtomicU32::new(0);

/// The dispatcher's entries and the address of its final jump.
///
/// Written by `generate_dispatcher` (program thread preparing a fast-mode
/// capture); read by handlers.
pub(super) static DISPATCH_ENTRY: AtomicU64 = AtomicU64::new(0);

/// See [`DISPATCH_ENTRY`]. Written by `generate_dispatcher` (program thread
/// preparing a fast-mode capture); read by handlers.
pub(super) static DISPATCH_FULL: AtomicU64 = AtomicU64::new(0);

/// See [`DISPATCH_ENTRY`]. Written by `generate_dispatcher` (program thread
/// preparing a fast-mode capture); read by handlers.
pub(super) static DISPATCH_TRAP: AtomicU64 = AtomicU64::new(0);

/// See [`DISPATCH_ENTRY`]. Written by `generate_dispatcher` (program thread
/// preparing a fast-mode capture); read by handlers.
pub(super) static DISPATCH_SYS: AtomicU64 = AtomicU64::new(0);

/// See [`DISPATCH_ENTRY`]. Written by `generate_dispatcher` (program thread
/// preparing a fast-mode capture); read by handlers.
pub(super) static TRAP_JMP: AtomicU64 = AtomicU64::new(0);

/// The per-thread state's offset from the thread pointer.
///
/// Written by `prepare` (program thread preparing a fast-mode capture);
/// read by handlers and the dispatcher.
pub(super) static TLS_OFFSET: AtomicI64 = AtomicI64::new(i64::MIN);

/// Instructions the trap engine stepped in this fast-mode capture.
///
/// Written: reset by `prepare` (program thread), counted by the SIGTRAP
/// handler of any traced thread (`try_hand_over`); read when the dump is
/// written.
pub(super) static TRAPPED: AtomicU64 = AtomicU64::new(0);

/// [`TRAPPED`] by cause ([`TRAP_CAUSES`](super::TRAP_CAUSES)).
///
/// Written: counted by the SIGTRAP handler of any traced thread
/// (`try_hand_over`); read when the dump is written.
pub(super) static TRAPPED_BY: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

/// Benchmarks only (`COLDCACHE_FAST_NULL_CONSUMER`): records are thrown
/// away instead of replayed, which measures the translated code alone.
///
/// Written by `prepare` (program thread); read by the dispatcher.
pub(super) static NULL_CONSUMER: AtomicBool = AtomicBool::new(false);

/// Dispatcher entries in this capture (for the summary).
///
/// Written: reset by `prepare` (program thread), counted by the dispatcher
/// of any traced thread; read when the dump is written.
pub(super) static DISPATCHES: AtomicU64 = AtomicU64::new(0);

/// The state of every thread in translated code (0: free slot), so a stop
/// can send them back to the dispatcher.
///
/// Written by each traced thread for its own slot, as it enters and leaves
/// translated code (its handler or dispatcher, compare-and-swap).
pub(super) static RUNNERS: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];

/// Several threads ran translated code at once in this capture, under the
/// OS's schedule: buffers are short from then on (see [`SHORT`](super::SHORT)).
///
/// Written by `prepare` (program thread) and by the SIGTRAP handler of a
/// traced thread that finds another in translated code (`try_hand_over`).
pub(super) static INTERLEAVE: AtomicBool = AtomicBool::new(false);

/// Replays of short buffers in this capture (for the summary).
///
/// Written: reset by `prepare` (program thread), counted by the thread
/// replaying a short buffer (`flush`); read when the dump is written.
pub(super) static SHORT_REPLAYS: AtomicU64 = AtomicU64::new(0);

// `jit/handed.rs`

/// The address of the lanes of short buffers handed over to the session
/// lock's holder (0: not mapped).
///
/// Written once by `handed::map` (program thread preparing the first
/// fast-mode capture); read by the dispatcher of traced threads.
pub(super) static QUEUE: AtomicU64 = AtomicU64::new(0);

/// Lanes claimed so far, at most (`handed::lane_of`): the drainer looks
/// at that many.
///
/// Written (raised) by the dispatcher of a traced thread claiming a lane;
/// read by the drainer and producers.
pub(super) static LANES_USED: AtomicU32 = AtomicU32::new(0);

/// The lane each drain starts its rounds at (moves on by one each time).
///
/// Written by the holder of the session lock draining the lanes
/// (`handed::drain`: a traced thread's dispatcher or `finish`).
pub(super) static TURN_START: AtomicU64 = AtomicU64::new(0);

/// Buffers handed over in this capture, and the times a lane was found
/// full (for the dump's note).
///
/// Written: reset by `prepare` (program thread), counted by the dispatcher
/// of a traced thread handing a buffer (`handed::push`); read when the dump
/// is written.
pub(super) static HANDED: AtomicU64 = AtomicU64::new(0);

/// See [`HANDED`]. Written: reset by `prepare` (program thread), counted by
/// the dispatcher of a traced thread that found its lane full.
pub(super) static HANDED_FULL: AtomicU64 = AtomicU64::new(0);

/// The translator's state. Written by `prepare`, the handlers and the
/// dispatcher of traced threads and `finish`, always through `with_jit`
/// ([`JIT_LOCK`] held).
pub(super) static JIT: JitCell = JitCell(UnsafeCell::new(None));

/// Written (taken and released) by `with_jit`, from program threads,
/// handlers and the dispatcher.
pub(super) static JIT_LOCK: crate::lock::Lock = crate::lock::Lock::new();

/// A retired block's code could not be redirected (no room for its stub):
/// fast mode is not used again in this process.
///
/// Written by the thread retiring translations (`retire`,
/// `retranslate_all`: a traced thread's handler or dispatcher, the
/// translator's lock held).
pub(super) static RETIRE_FAILED: AtomicBool = AtomicBool::new(false);

/// The program mapped over the code cache (a traced thread's `MAP_FIXED`,
/// `munmap`, `mremap`, `mprotect` or `madvise` on a chunk, issue 33): the
/// capture was stopped before the call, and no later capture of this
/// process translates (its chunks, buffers and stacks are not all ours
/// any more).
///
/// Written by the SIGTRAP handler of the traced thread about to make that
/// call (`code_cache_taken`); read by `prepare` (program thread).
pub(super) static TAKEN: AtomicBool = AtomicBool::new(false);

/// A traced thread made a system call that may have mapped code (see
/// `sysemu::maps_code`): the next step of a traced thread reads
/// `/proc/self/maps` again ([`trust_mapped_code`](super::trust_mapped_code)).
///
/// Written by the SIGTRAP handler of a traced thread about to map code
/// (`code_mapped`); taken by the next trap handler that looks
/// (`trust_mapped_code`).
pub(super) static MAPPED: AtomicBool = AtomicBool::new(false);

// `jit/verify.rs`

/// The first difference, formatted without allocating (handler context).
pub(super) struct Message {
    pub(super) buf: [u8; 4096],
    pub(super) len: usize,
}

impl Write for Message {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

pub(super) struct MessageCell(pub(super) core::cell::UnsafeCell<Message>);

// SAFETY: written only by the thread that set `FOUND` first (once per
// capture), read by `take` after the capture's threads have left.
unsafe impl Sync for MessageCell {}

/// The capture in progress verifies.
///
/// Written by `reset` (program thread preparing a capture); taken by `take`
/// when the dump is written.
pub(super) static ON: AtomicBool = AtomicBool::new(false);

/// Instructions checked in this capture.
///
/// Written: reset by `reset` (program thread), counted by the SIGTRAP
/// handler of any traced thread (`verify_trap`).
pub(super) static CHECKED: AtomicU64 = AtomicU64::new(0);

/// A difference was found (the first one is in `FIRST`).
///
/// Written: reset by `reset` (program thread), set by the SIGTRAP handler
/// of the first traced thread that finds a difference (`verify_trap`).
pub(super) static FOUND: AtomicBool = AtomicBool::new(false);

/// Written by the SIGTRAP handler of the thread that set [`FOUND`] first
/// (`verify_trap`) and by `reset` (program thread); read by `take`.
pub(super) static FIRST: MessageCell = MessageCell(core::cell::UnsafeCell::new(Message {
    buf: [0; 4096],
    len: 0,
}));

// `jit/interrupted.rs`

/// Handler runs whose interrupted context was given as the program's.
///
/// Written: counted by any traced thread's handler for a program signal
/// (`to_program`); taken by `sigfault::note` when the dump is written.
pub(crate) static HANDLED: AtomicU64 = AtomicU64::new(0);

/// Handler runs that interrupted translated code at a point not mapped
/// back, nor held back (they saw a code-cache RIP or our own code's).
///
/// Written: counted by any traced thread's handler for a program signal
/// (`hold_back`); taken by `sigfault::note` when the dump is written.
pub(crate) static UNMAPPED: AtomicU64 = AtomicU64::new(0);

/// Program signals held back to the thread's next program instruction
/// (they came in the dispatcher, our own code or a block's exit:
/// `interrupted::hold_back`).
///
/// Written: counted by any traced thread's handler for a program signal
/// (`hold_back`); taken by `sigfault::note` when the dump is written.
pub(crate) static HELD_BACK: AtomicU64 = AtomicU64::new(0);
