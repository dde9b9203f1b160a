//! The capture's global state: the life-cycle state machine, the lock
//! (`lock.rs`) and the session it guards, and the few atomics the signal
//! handlers read without the lock; below them, in one module per file, the
//! statics of the files above the signal code (the life cycle, the entry
//! protocols, the output, the writer thread) and of `altstack.rs` and
//! `tls.rs`. Each static says who writes it and from which context; the
//! signal code's are in `signal_state.rs`, the fast front end's in
//! `jit/state.rs` (`tests/statics.rs` holds the list of such files).
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

/// The life-cycle state ([`IDLE`] to [`STOPPING`]). Written by the program
/// thread preparing, disarming or finishing a capture (`lifecycle`), by the
/// breakpoint's SIGTRAP handler (ARMED to RUNNING) and by the handler or
/// dispatcher of the traced thread that stops it (RUNNING to STOPPING);
/// read everywhere (atomic loads).
pub(crate) static STATE: AtomicU8 = AtomicU8::new(IDLE);
/// Handlers running now; `finish` waits for zero. Written (counted up and
/// down) by the engine's handlers on every traced thread.
pub(crate) static IN_HANDLER: AtomicU32 = AtomicU32::new(0);
/// The session's lock. Written (taken and released) by [`with_session`] and
/// [`try_with_session`]: program threads, handlers, the dispatcher, the
/// writer thread.
static LOCK: Lock = Lock::new();
/// Every thread is traced (`Threads::All`). Written by the program thread
/// preparing a capture and by the thread disarming or finishing it
/// (`lifecycle`); read by handlers.
pub(crate) static ALL_THREADS: AtomicBool = AtomicBool::new(false);
/// The selected thread ids (0: free). Written by the program thread
/// preparing a capture and by the thread disarming or finishing it
/// (`lifecycle`), and by the breakpoint's SIGTRAP handler when a window
/// starts (`engine::join_window`); read by handlers.
pub(crate) static SELECTED: [AtomicU32; MAX_SELECTED] = [const { AtomicU32::new(0) }; MAX_SELECTED];
/// The thread `coldcache attach`'s remote calls run on, from
/// `coldcache_attach_start` until the tracer has let it go (0: none).
/// Written by `attach::start` on that thread; cleared by [`remote_held`] the
/// first time it finds the thread no longer traced. A thread traced in
/// the middle of the remote calls crashed them (issue 33, attaching to a
/// busy process).
pub(crate) static REMOTE_TID: AtomicU32 = AtomicU32::new(0);
/// Instructions counted so far (for progress, read without the lock).
/// Written by the thread accounting (the SIGTRAP handler of a traced
/// thread, a fast-mode replay) and reset by `lifecycle::prepare_inner`.
pub(crate) static INSTRUCTIONS: AtomicU64 = AtomicU64::new(0);
/// The process that prepared the capture: a forked child is not it.
/// Written by the program thread preparing a capture
/// (`lifecycle::prepare_inner`); read by handlers.
pub(crate) static CAPTURE_PID: AtomicU32 = AtomicU32::new(0);
/// A stop asked for by a signal handler that could not have the dump
/// written where it interrupted (translated code, or the library's own
/// code with no writer thread): the next safe point of a traced thread
/// writes it, the first of the dispatcher of a thread leaving translated
/// code (`jit::dispatch_slow`), the engine's next own trap or the
/// function breakpoint's next hit. Without it the capture stayed STOPPING
/// and its dump waited for the program's exit.
///
/// Written (set) by the handler asking for the stop
/// (`engine::finish_soon`, `engine::stop_by_signal`); reset by
/// `lifecycle::prepare` (program thread); taken by the dispatcher or the
/// SIGTRAP handler of the thread that writes the dump.
pub(crate) static FINISH_PENDING: AtomicBool = AtomicBool::new(false);
/// The result of the last `finish`, for `stop` and `finish_at_exit`.
/// Written (locked) by the thread whose finish was asynchronous
/// (`lifecycle::report_async_finish`: the writer thread, or a thread
/// finishing from a handler) and taken by program threads (`stop`,
/// `finish_at_exit`).
pub(crate) static FINISH: Mutex<Option<Result<Summary, String>>> = Mutex::new(None);
/// Options kept for a signal-triggered capture, started by the writer.
/// Written (locked) by the program thread that installs the trigger signal
/// (`engine::install_trigger_signal`); read by the writer thread.
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
/// The capture in progress. Written by [`with_session`] and
/// [`try_with_session`] callers only, [`LOCK`] held: the program thread
/// preparing and finishing, handlers, the dispatcher, the writer thread.
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

/// [`with_session`], the lock taken in turn for thread `turn` when there
/// is one ([`Lock::lock_in_turn`]: fast mode's short replays).
pub(crate) fn with_session_in_turn<R>(
    turn: Option<u32>,
    f: impl FnOnce(&mut Option<Box<Session>>) -> R,
) -> R {
    match turn {
        Some(tid) => LOCK.lock_in_turn(tid),
        None => LOCK.lock(),
    }
    // SAFETY: the lock is held, so no other reference to the cell exists.
    let r = f(unsafe { &mut *SESSION.0.get() });
    LOCK.unlock();
    r
}

/// [`with_session`] if the lock is free now (one attempt, no wait): fast
/// mode's full short buffers go to the holder instead (`jit/handed.rs`).
pub(crate) fn with_session_if_free<R>(f: impl FnOnce(&mut Option<Box<Session>>) -> R) -> Option<R> {
    if !LOCK.try_lock_granted() {
        return None;
    }
    // SAFETY: the lock is held, so no other reference to the cell exists.
    let r = f(unsafe { &mut *SESSION.0.get() });
    LOCK.unlock();
    Some(r)
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
/// the program starts itself. Written by the preloaded library's
/// constructor and `attach` (program thread), read by the C API.
pub(crate) static DEFAULTS: Mutex<Option<Options>> = Mutex::new(None);

/// `COLDCACHE_MODE` as the process started with it (the variable itself is
/// removed from the environment with the others). Written (set once) by
/// the preloaded library's constructor (program thread).
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
/// `coldcache_stop`. Written once by the preloaded library (program thread,
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

/// The library's Rust allocator is its own, not the program's `malloc`: a
/// capture stopped anywhere may then be finished by the interrupted thread
/// itself. Written by `libcoldcache.so` at load (program thread); read by
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

// The statics of the files above the signal code: one module per file
// that uses them.

pub(crate) mod altstack {
    use std::sync::atomic::{AtomicU32, AtomicU64};

    /// Stacks in the pool (the most threads traced at once).
    pub(crate) const SLOTS: usize = crate::state::MAX_SELECTED;
    /// The pool's base (0: not mapped).
    ///
    /// Written once by `reserve` (program thread preparing a capture); read by
    /// handlers.
    pub(crate) static BASE: AtomicU64 = AtomicU64::new(0);
    /// The thread each stack belongs to (0: free).
    ///
    /// Written by the handler of a traced thread claiming a stack (`claim`,
    /// compare-and-swap), for itself.
    pub(crate) static OWNER: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];
}

pub(crate) mod output {
    use std::collections::BTreeSet;
    use std::ffi::CString;
    use std::path::PathBuf;
    use std::sync::Mutex;

    /// The message of the C API's last failed call (`coldcache_last_error`),
    /// kept alive until the next failure. Written by program threads (the C
    /// API, a stop that failed: `set_error`, locked), never by a handler.
    pub(crate) static LAST_ERROR: Mutex<Option<CString>> = Mutex::new(None);
    /// The paths this process wrote (dumps and traces), absolute. A set: a
    /// process that captures a thousand times looks a thousand numbered names
    /// up for its next dump (a list made that cubic: 1,000 start/stop cycles
    /// took 34 s instead of 14).
    ///
    /// Written (locked) by the thread writing a dump (`claim`: a program
    /// thread, the writer thread or the thread finishing from a handler) and
    /// cleared by `new_run` (program thread).
    pub(crate) static WRITTEN: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
    /// The manifest file `coldcache record` asked for (`COLDCACHE_DUMPS`).
    /// Replaced by each `coldcache attach` (a process may be attached to many
    /// times, each with a manifest of its own).
    ///
    /// Written (locked) by the program thread `set_manifest` runs on (the
    /// preloaded library's constructor, or `attach`); read when a dump is
    /// reported.
    pub(crate) static MANIFEST: Mutex<Option<PathBuf>> = Mutex::new(None);
    /// Set by `coldcache attach` (the `COLDCACHE_QUIET` setting): the process
    /// it attached to prints nothing of ours on its standard error.
    ///
    /// Written by `preload::arm_from` (the program thread `coldcache attach`
    /// runs on); read by anything that speaks.
    pub(crate) static QUIET: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);
}

pub(crate) mod capi {
    use std::sync::Mutex;

    /// The core each thread is given (`coldcache_set_thread_core`). Written
    /// (locked) by program threads through the C API, never by a handler; read
    /// by `prepare_from_c`.
    pub(crate) static CORE_MAP: Mutex<Vec<(u32, u32)>> = Mutex::new(Vec::new());
}

pub(crate) mod attach {
    use std::ffi::CString;
    use std::sync::Mutex;

    /// The last refusal, kept alive so the pointer returned to the caller
    /// stays valid until the next call.
    ///
    /// Written (locked) by `coldcache_attach_start` (the program thread
    /// `coldcache attach` runs its remote calls on).
    pub(crate) static LAST_ERROR: Mutex<Option<CString>> = Mutex::new(None);
}

pub(crate) mod preload {
    use crate::options::Options;
    use std::sync::atomic::{AtomicBool, AtomicU32};

    /// A `--function` capture waiting for a library the program opens with
    /// `dlopen` (`record --in-dlopen`).
    pub(crate) struct Later {
        pub(crate) options: Options,
        pub(crate) name: String,
        pub(crate) first: u64,
        pub(crate) count: u64,
        pub(crate) warm: u64,
        /// Mapped files already searched without a match.
        pub(crate) searched: std::collections::HashSet<String>,
        /// The file the capture is armed in (its breakpoint planted), if any.
        pub(crate) armed_in: Option<String>,
        /// Calls seen by earlier armings (the library was closed and opened
        /// again before the window).
        pub(crate) calls_seen: u64,
        /// The process that waits: a child it forks does not arm the capture.
        pub(crate) pid: u32,
    }
    /// Another copy of the library (another file) comes first in the
    /// program's symbol lookup: the program's calls of the C API and of
    /// what the library interposes (`sigaction`, `dlopen`, ...) reach that
    /// copy, so this one captures nothing (`preload::shadowing_copy`).
    ///
    /// Written by the library's constructor (program thread, before
    /// `main`); read by the C API's start.
    pub(crate) static SHADOWED: AtomicBool = AtomicBool::new(false);
    /// The exit hook is registered once per process.
    ///
    /// Written (run once) by `arm` (program thread: the preloaded library's
    /// constructor or a `dlopen` interposer).
    pub(crate) static AT_EXIT: std::sync::Once = std::sync::Once::new();
    /// A capture that waits for its function's library. Written (locked, see
    /// `lock_later`) by program threads: the preloaded library's constructor,
    /// the `dlopen` and `dlclose` interposers.
    pub(crate) static LATER: std::sync::Mutex<Option<Later>> = std::sync::Mutex::new(None);
    /// The thread holding [`LATER`] (0: none): arming a capture may itself
    /// open or close a library, which must not wait for the lock it holds.
    ///
    /// Written by the program thread that locks or releases [`LATER`]
    /// (`lock_later`, `LaterGuard`).
    pub(crate) static LATER_HOLDER: AtomicU32 = AtomicU32::new(0);
    /// Whether the `dlopen` interposer is to call
    /// [`after_dlopen`](crate::preload::after_dlopen): a capture waits for its
    /// function's library. While it is false the interposer jumps straight to
    /// the C library's `dlopen`, so the loader sees the program's own call (the
    /// caller decides the search path: `RUNPATH`).
    ///
    /// Written by program threads: `arm` (the preloaded library's constructor),
    /// `after_dlopen` and `around_dlclose` (the interposers); read by the
    /// `dlopen` interposer.
    pub static WATCH_DLOPEN: AtomicBool = AtomicBool::new(false);
    /// Set once a capture waits for a `dlopen`: until then the `dlclose`
    /// interposer jumps straight to the C library's.
    ///
    /// Written by `arm` (program thread, the preloaded library's constructor);
    /// read by the `dlclose` interposer.
    pub static WATCHING: AtomicBool = AtomicBool::new(false);
}

pub(crate) mod lifecycle {
    use std::sync::Mutex;

    /// One finish (or disarm) at a time.
    ///
    /// Written (locked) by the thread that finishes or disarms a capture (a
    /// program thread, the writer thread, or a handler's thread finishing
    /// itself).
    pub(crate) static FINISHING: Mutex<()> = Mutex::new(());
    /// Tests only (`COLDCACHE_TEST_FINISH_PAUSE_MS` in the process's
    /// environment, read at each attach): milliseconds a finish pauses between
    /// writing the dump (and its manifest line, which ends the last `attach`)
    /// and marking the capture over, as a thread preempted there under load
    /// does.
    ///
    /// Written by `set_test_finish_pause` (the program thread `attach` runs
    /// on); read by `finish`.
    pub(crate) static FINISH_PAUSE_MS: std::sync::atomic::AtomicU64 =
        std::sync::atomic::AtomicU64::new(0);

    thread_local! {
        /// Where this thread's stack of
        /// [`on_own_stack`](crate::lifecycle::on_own_stack) is mapped during
        /// its call (0: none), read by `prepare_inner` on the same thread (a
        /// thread's own, so a `finish` on another thread cannot clear it). The
        /// objects' regions leave it out: it is ours, and gone when `prepare`
        /// returns (the program's next `mmap` took its place, and its accesses
        /// were put down to an "anonymous" region that was our stack). A
        /// `const` cell without destructor: no allocation, safe in the handlers
        /// `finish` may run in.
        ///
        /// Written by each program thread for itself, in `on_own_stack` (around
        /// `prepare` and `finish`).
        pub(crate) static OWN_STACK_AT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
}

pub(crate) mod writer {
    use std::sync::Mutex;

    /// Whether the writer thread was started (`writer::ensure_writer`).
    /// Written (locked) by the program thread that starts it, in
    /// `ensure_writer` (handler installation, `install_trigger_signal`, a
    /// start with progress), never by a handler.
    pub(crate) static STARTED: Mutex<bool> = Mutex::new(false);
}

pub(crate) mod tls {
    use std::sync::atomic::{AtomicBool, AtomicU64};

    /// The capture in progress runs in fast mode. Written by the fast front
    /// end's start and finish (`jit::prepare`, `jit::finish`: program thread,
    /// under the session); read by handlers.
    pub(crate) static FAST: AtomicBool = AtomicBool::new(false);
    /// Numbers fast captures, so a record of an earlier one is never replayed:
    /// bumped by the fast front end's start, read by translated code (its
    /// address is in the code) and handlers.
    ///
    /// Written by `jit::prepare` (program thread).
    pub(crate) static EPOCH: AtomicU64 = AtomicU64::new(0);
}
