//! The translator's per-thread state, in static TLS of this library so
//! translated code reaches it with one `fs`-relative operand (no register,
//! no flags): glibc gives every thread its own copy, `clone` needs nothing.
//! It is an initial-exec TLS symbol of our own (below), so that it is in
//! static TLS also when the library is loaded by `dlopen` (`coldcache
//! attach`).
//!
//! The offset of the state from the thread pointer is the same in every
//! thread (static TLS); it is measured once per capture and checked on each
//! thread that enters translated code.

pub(crate) use crate::state::tls::{EPOCH, FAST};
use std::sync::atomic::Ordering;

/// Whether the capture in progress runs in fast mode.
#[inline]
pub(crate) fn is_on() -> bool {
    FAST.load(Ordering::Relaxed)
}

/// Whether the calling thread runs translated code (or the dispatcher):
/// the sync signal must then leave it alone. A question of this thread's
/// state here, so signal code asks it without the fast front end.
#[inline]
pub(crate) fn in_translation() -> bool {
    if !is_on() {
        return false;
    }
    // SAFETY: reading fields of this thread's own state.
    let t = unsafe { &*this() };
    // A thread marked active by an earlier capture left translated code
    // without the dispatcher (a handler that `siglongjmp`ed out): it is
    // not in this capture's translated code.
    t.active != 0 && t.epoch == EPOCH.load(Ordering::Acquire)
}

/// Field offsets, as the generated code addresses them.
pub(crate) mod off {
    /// The block's scratch register, saved.
    pub const S_SPILL: i32 = 0;
    /// RCX, saved around the buffer check.
    pub const RCX_SPILL: i32 = 8;
    /// Where the next block record goes.
    pub const CURSOR: i32 = 16;
    /// The program address the dispatcher continues at.
    pub const NEXT: i32 = 24;
    /// The program's RSP while the dispatcher runs.
    pub const APP_RSP: i32 = 32;
    /// Top of the dispatcher's stack.
    pub const STACK_TOP: i32 = 40;
    /// The dispatcher's entry.
    pub const DISPATCH: i32 = 48;
    /// Where the dispatcher jumps when it returns.
    pub const TARGET: i32 = 56;
    /// Why the dispatcher was entered (0: a block's exit, 1: buffer full,
    /// 2: a system call for the trap engine, 3: a system call that may
    /// block).
    pub const REASON: i32 = 64;
    /// The dispatcher's entry for a full buffer.
    pub const DISPATCH_FULL: i32 = 72;
    /// The direct exit the dispatcher was entered from (0: none), which it
    /// links to the target block.
    pub const FROM: i32 = 80;
    /// The dispatcher's entry for a system call the trap engine makes
    /// (the block hands the thread over before its `syscall`).
    pub const DISPATCH_TRAP: i32 = core::mem::offset_of!(super::Tls, dispatch_trap) as i32;
    /// The dispatcher's entry that replays the buffer before a system call
    /// that may block and returns to `T.resume`.
    pub const DISPATCH_SYS: i32 = core::mem::offset_of!(super::Tls, dispatch_sys) as i32;
    /// Where the dispatcher entered at `DISPATCH_SYS` returns.
    pub const RESUME: i32 = core::mem::offset_of!(super::Tls, resume) as i32;
    /// A system call block's class (0: made inline, 1: the buffer is
    /// replayed first), between its check and its `syscall`.
    pub const SYS_FLUSH: i32 = core::mem::offset_of!(super::Tls, sys_flush) as i32;
    /// Non-zero from the replay before a call that may block until the
    /// call returns.
    pub const BLOCKED: i32 = core::mem::offset_of!(super::Tls, blocked) as i32;
}

/// One thread's translator state (layout fixed by [`off`]).
#[repr(C)]
pub(crate) struct Tls {
    pub s_spill: u64,
    pub rcx_spill: u64,
    pub cursor: u64,
    pub next: u64,
    pub app_rsp: u64,
    pub stack_top: u64,
    pub dispatch: u64,
    pub target: u64,
    pub reason: u64,
    pub dispatch_full: u64,
    pub from: u64,
    /// Start of the record buffer.
    pub buf_start: u64,
    /// End of the buffer's usable part (a tail of non-zero words follows).
    pub buf_end: u64,
    /// The thread runs translated code (or the dispatcher).
    pub active: u64,
    /// RSP above which the watched function has returned (0: none).
    pub window: u64,
    /// The capture this thread's records belong to.
    pub epoch: u64,
    /// The next trap is the dispatcher's hand-back: step it, do not hand
    /// the thread over again.
    pub trap_once: u64,
    /// The dispatcher stack's mapping.
    pub stack_map: u64,
    /// The buffer's mapping.
    pub buf_map: u64,
    /// Thread id.
    pub tid: u64,
    /// The thread's lookup table (program address → code), at the bottom
    /// of its dispatcher stack mapping.
    pub lookup: u64,
    /// The thread left translated code through the dispatcher and has not
    /// been handed over or taken back since: it may still be on its way
    /// out (the end of `dispatch`, the dispatcher's restore).
    pub leaving: u64,
    /// The trap engine's: this thread was started by the sync signal on
    /// its way out of translated code, and its traps step on, uncounted,
    /// until it reaches the program's code (`engine.rs`). Here rather than
    /// in a `thread_local!`, which a signal handler of a `dlopen`ed
    /// library may not touch (see below).
    pub late_start: u64,
    /// See [`off::DISPATCH_TRAP`], [`off::DISPATCH_SYS`], [`off::RESUME`],
    /// [`off::SYS_FLUSH`].
    pub dispatch_trap: u64,
    pub dispatch_sys: u64,
    pub resume: u64,
    pub sys_flush: u64,
    /// See [`off::BLOCKED`]: a stop need not wait for the thread (it holds
    /// no record).
    pub blocked: u64,
    /// Where the thread's records end before a replay: `buf_end`, or
    /// `buf_start + SHORT` while several threads run translated code
    /// (non-zero words follow it either way; 0: no buffer mapped).
    pub limit: u64,
    /// The trap engine's (`crate::rseq`): the rseq descriptor this thread
    /// stored (kept here instead of in its `rseq_cs` field; 0 for none),
    /// how many times the thread had been switched out then, and the
    /// descriptor's section start, end and abort address.
    pub rseq: [u64; 5],
    /// The return address of a `posix_memalign` call this thread entered
    /// with object tracking on (0: none): the dispatcher replays the
    /// thread's records when it returns there (`jit::dispatch_slow`).
    pub flush_ret: u64,
    /// `--mode verify`'s last check point on this thread
    /// (`jit::verify::verify_trap`).
    pub verify_last: u64,
    /// Program signals held back (a kernel signal set: bit `sig - 1`)
    /// because they came where the thread's context is not the program's
    /// (`jit::interrupted::hold_back`): blocked and queued again, they are
    /// let through at the dispatcher's hand-back trap.
    pub deferred: u64,
    /// The dispatcher left the thread untraced with TF set only so that
    /// its hand-back trap lets [`Tls::deferred`] through.
    pub trap_leave: u64,
    /// Where `hold_back` made the buffer read full (0: nowhere): the
    /// next buffer check past it sends the thread to the dispatcher.
    pub fill: u64,
    /// The registers (a digest, never 0) of the last wait one of our
    /// signals was counted as having ended (`engine::interrupted_a_wait`):
    /// a second of our signals delivered before the program ran again
    /// finds the same context, and the same wait is not counted twice.
    pub woken_at: u64,
}

// A `dlopen`ed library's static TLS comes from the surplus glibc keeps
// (512 bytes by default, shared with other such libraries): stay well
// inside it (docs/capture.md, attach "Limits").
const _: () = assert!(std::mem::size_of::<Tls>() <= 320);

// The state is a TLS symbol of our own, reached with the initial-exec
// model (`fs:0` plus a GOT slot the loader fills with its offset), so it
// lives in static TLS even when the library is loaded by `dlopen`
// (`coldcache attach`): glibc then places it in the static TLS surplus it
// keeps for such libraries, and every thread, present or future, has it at
// the same offset, with no allocation on first use. Rust's `thread_local!`
// in a shared library uses the general-dynamic model, whose blocks a
// `dlopen`ed library gets from `malloc` on a thread's first access: not in
// static TLS, and not something a signal handler may do.
//
// The symbol is global (so every codegen unit's reference resolves to it)
// and hidden (so it is not exported from the library).
core::arch::global_asm!(
    ".section .tbss,\"awT\",@nobits",
    ".p2align 4",
    ".globl coldcache_jit_tls",
    ".hidden coldcache_jit_tls",
    ".type coldcache_jit_tls,@object",
    ".size coldcache_jit_tls,{size}",
    "coldcache_jit_tls:",
    ".zero {size}",
    ".text",
    size = const std::mem::size_of::<Tls>(),
);

/// The calling thread's state (all zero in a thread that never used it).
#[inline]
pub(crate) fn this() -> *mut Tls {
    let p: *mut Tls;
    // SAFETY: reads the thread pointer at fs:0 (the TCB's self pointer in
    // every x86-64 glibc or musl thread) and adds the symbol's TLS offset
    // from its GOT slot: the address of this thread's copy. Neither read
    // has side effects.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr fs:[0]",
            "add {p}, qword ptr [rip + coldcache_jit_tls@GOTTPOFF]",
            p = out(reg) p,
            options(nostack, readonly),
        )
    };
    p
}

/// The thread pointer (FS base) of the calling thread: glibc and musl keep
/// it at `fs:0` (the TCB's self pointer).
#[inline]
pub(crate) fn thread_pointer() -> u64 {
    let v: u64;
    // SAFETY: reads the TCB self pointer at fs:0, present in every thread
    // of an x86-64 glibc or musl process.
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) v, options(nostack, readonly, preserves_flags))
    };
    v
}

/// The offset of this thread's state from its thread pointer, if it fits
/// a 32-bit displacement.
pub(crate) fn offset() -> Option<i32> {
    let d = (this() as u64).wrapping_sub(thread_pointer()) as i64;
    i32::try_from(d).ok()
}
