//! The capture's global state: the life-cycle state machine, the lock
//! (`lock.rs`) and the session it guards, and the few atomics the signal
//! handlers read without the lock.
//!
//! # Invariants
//! - `SESSION` is only touched with `LOCK` held ([`with_session`]) and only
//!   while the state is `ARMED` or `RUNNING`, or by `finish` once no
//!   handler is running (`IN_HANDLER` is zero).
//! - `LOCK` is never held outside a handler, `prepare` or `finish`, and
//!   never across a call that could block.

use crate::account::Accountant;
use crate::lock::Lock;
use crate::machine::XsaveLayout;
use crate::options::{Options, Summary, Threads};
use coldcache_dump::{Meta, Module};
use std::cell::UnsafeCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// No capture.
pub(crate) const IDLE: u8 = 0;
/// `prepare` is building a capture.
pub(crate) const PREPARING: u8 = 1;
/// Waiting for the function breakpoint.
pub(crate) const ARMED: u8 = 2;
/// Threads are traced.
pub(crate) const RUNNING: u8 = 3;
/// Tracing ends; `finish` is writing (or about to write) the dump.
pub(crate) const STOPPING: u8 = 4;

pub(crate) use crate::options::MAX_SELECTED;

pub(crate) static STATE: AtomicU8 = AtomicU8::new(IDLE);
/// Handlers running now; `finish` waits for zero.
pub(crate) static IN_HANDLER: AtomicU32 = AtomicU32::new(0);
static LOCK: Lock = Lock::new();
/// Every thread is traced (`Threads::All`).
pub(crate) static ALL_THREADS: AtomicBool = AtomicBool::new(false);
/// The selected thread ids (0: free).
pub(crate) static SELECTED: [AtomicU32; MAX_SELECTED] = [const { AtomicU32::new(0) }; MAX_SELECTED];
/// The thread `coldcache attach`'s remote calls run on, from
/// `coldcache_attach_start` until the tracer has let it go (0: none).
/// Set by `attach::start` on that thread; cleared by [`remote_held`] the
/// first time it finds the thread no longer traced. A thread traced in
/// the middle of the remote calls crashed them (issue 33, attaching to a
/// busy process).
pub(crate) static REMOTE_TID: AtomicU32 = AtomicU32::new(0);
/// Instructions counted so far (for progress, read without the lock).
pub(crate) static INSTRUCTIONS: AtomicU64 = AtomicU64::new(0);
/// The process that prepared the capture: a forked child is not it.
pub(crate) static CAPTURE_PID: AtomicU32 = AtomicU32::new(0);
/// The result of the last `finish`, for `stop` and `finish_at_exit`.
pub(crate) static FINISH: Mutex<Option<Result<Summary, String>>> = Mutex::new(None);
/// Options kept for a signal-triggered capture, started by the writer.
pub(crate) static PENDING: Mutex<Option<Options>> = Mutex::new(None);

/// A capture in progress: the accountant and what the dump needs besides.
pub(crate) struct Session {
    pub acc: Accountant,
    pub layout: XsaveLayout,
    pub meta: Meta,
    pub modules: Vec<Module>,
    pub output: PathBuf,
    pub trace_path: Option<PathBuf>,
    pub started: Instant,
    /// The threads a function trigger's window traces besides the caller
    /// (`Threads::Caller`: none), chosen when the window starts.
    pub window: Threads,
}

struct SessionCell(UnsafeCell<Option<Box<Session>>>);
// SAFETY: the cell is only accessed with `LOCK` held (see `with_session`).
unsafe impl Sync for SessionCell {}
static SESSION: SessionCell = SessionCell(UnsafeCell::new(None));

/// Runs `f` on the session with the lock held (`lock.rs`: spins, then
/// sleeps).
pub(crate) fn with_session<R>(f: impl FnOnce(&mut Option<Box<Session>>) -> R) -> R {
    LOCK.lock();
    // SAFETY: the lock is held, so no other reference to the cell exists.
    let r = f(unsafe { &mut *SESSION.0.get() });
    LOCK.unlock();
    r
}

/// Like [`with_session`], but gives up after a bounded number of attempts.
pub(crate) fn try_with_session(f: impl FnOnce(&mut Option<Box<Session>>)) {
    for _ in 0..100_000 {
        if LOCK.try_lock() {
            // SAFETY: the lock is held, so no other reference to the cell exists.
            f(unsafe { &mut *SESSION.0.get() });
            LOCK.unlock();
            return;
        }
        std::hint::spin_loop();
    }
}

/// Whether thread `tid` is the one `coldcache attach` runs its remote
/// calls on ([`REMOTE_TID`]) and its tracer still holds it: such a thread
/// is left alone. Once the tracer has let it go the mark is cleared, so
/// the first window (or sync signal) after that starts it like any other.
/// Async-signal-safe: one read of the thread's status file, only for that
/// thread. (No thread of ours waits for the release: a thread started in
/// the program switches glibc out of its single-threaded paths, and one
/// started as a window opened was listed in the dump as the program's.)
pub(crate) fn remote_held(tid: u32) -> bool {
    if tid == 0 || tid != REMOTE_TID.load(Ordering::Acquire) {
        return false;
    }
    if crate::procfs::traced_task(tid) {
        return true;
    }
    let _ = REMOTE_TID.compare_exchange(tid, 0, Ordering::AcqRel, Ordering::Relaxed);
    false
}

/// Whether thread `tid` is selected for tracing now.
pub(crate) fn selected(tid: u32) -> bool {
    !remote_held(tid)
        && (ALL_THREADS.load(Ordering::Relaxed)
            || SELECTED.iter().any(|s| s.load(Ordering::Relaxed) == tid))
}

/// Every signal, for an engine handler's `sa_mask`: glibc's `sigfillset`
/// leaves out its own SIGCANCEL and SIGSETXID (32, 33), and a SIGCANCEL of
/// asynchronous `pthread_cancel` arriving inside an engine handler ended
/// the thread there, with `IN_HANDLER` counted and the session's lock
/// perhaps held: the capture's stop waited for ever (`cancel.c`, trap
/// mode, 2 of 10 runs). Blocked during the handler, it is delivered when
/// the handler returns, at the program's instruction, as natively.
pub(crate) fn all_signals() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is valid; its first 8 bytes are the
    // kernel's mask of signals 1..=64.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above: a u64 inside the (larger) sigset_t.
    unsafe { *(&mut set as *mut libc::sigset_t as *mut u64) = !0 };
    set
}

/// The calling thread's id.
pub(crate) fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Defaults that `coldcache record` (or the environment) set for captures
/// the program starts itself: written by the preloaded library's
/// constructor and `attach` (program thread), read by the C API.
pub(crate) static DEFAULTS: Mutex<Option<Options>> = Mutex::new(None);

/// `COLDCACHE_MODE` as the process started with it (the variable itself is
/// removed from the environment with the others): set once by the
/// preloaded library's constructor.
static ENV_MODE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Keeps `COLDCACHE_MODE` as the process started with it (the first call
/// wins).
pub(crate) fn set_env_mode(mode: Option<String>) {
    let _ = ENV_MODE.set(mode);
}

/// The capture mode `COLDCACHE_MODE` asked for at start, if any.
pub fn env_mode() -> Option<String> {
    ENV_MODE
        .get()
        .cloned()
        .unwrap_or_else(|| coldcache_fsio::env::var("COLDCACHE_MODE"))
}

/// The address of the exit hook the preloaded library registered with
/// `atexit` (0: none): a stop entry of every capture, like
/// `coldcache_stop`. Set once by the preloaded library (program thread,
/// before it arms a capture); read by `lifecycle::prepare`.
static EXIT_HOOK: AtomicU64 = AtomicU64::new(0);

/// Records the exit hook's address (see [`exit_hook`]).
pub(crate) fn set_exit_hook(addr: u64) {
    EXIT_HOOK.store(addr, Ordering::Release);
}

/// The exit hook's address, if one was registered.
pub(crate) fn exit_hook() -> Option<u64> {
    match EXIT_HOOK.load(Ordering::Acquire) {
        0 => None,
        a => Some(a),
    }
}

/// The library's Rust allocator is its own, not the program's `malloc`
/// (`libcoldcache.so` says so at load, program thread): a capture stopped
/// anywhere may then be finished by the interrupted thread itself. Read by
/// handlers and the dispatcher.
static OWN_ALLOCATOR: AtomicBool = AtomicBool::new(false);

/// Records that the library runs on its own allocator.
pub(crate) fn set_own_allocator() {
    OWN_ALLOCATOR.store(true, Ordering::Relaxed);
}

/// Whether the library runs on its own allocator.
pub(crate) fn own_allocator() -> bool {
    OWN_ALLOCATOR.load(Ordering::Relaxed)
}
