//! The capture engine: trap-flag single-stepping of selected threads of this
//! process, the SIGTRAP handler that feeds the simulator, and the start/stop
//! life cycle that ends in a dump.
//!
//! # How it works
//! - [`prepare`] (normal context) checks the process can be traced, builds
//!   every table the handler needs at its full size, installs the handlers
//!   and a writer thread, and marks the capture running (or armed, waiting
//!   for a function breakpoint).
//! - The calling thread starts stepping when `coldcache_arm_current_thread`
//!   (assembly) sets TF right before its `ret`: the first trap is at the
//!   caller's next instruction. Other threads get a thread-directed *sync*
//!   signal whose handler sets TF in the saved context.
//! - [`on_sigtrap`] runs after every instruction of a traced thread. RIP is
//!   the *next* instruction and the saved registers are its inputs, so the
//!   handler decodes RIP (once per address, [`DecodeCache`]), computes its
//!   accesses with the model, feeds the simulator the instruction fetch and
//!   then the data accesses, and adds the results to the counters of
//!   (RIP, call stack, thread). Returning keeps TF set in the saved flags.
//! - Stopping flips the state; every traced thread clears TF at its next
//!   trap, or at once when the sync signal interrupts it in a system call.
//!   [`finish`] waits until no handler is running, then writes the dump.
//!
//! # Invariants
//! - The signal handlers allocate nothing, take no lock the program could
//!   hold (only this module's own spin lock, never held outside a handler
//!   or `finish`), and never panic on any input.
//! - `INNER` is only touched with `LOCK` held and only while the state is
//!   `ARMED` or `RUNNING`, or by `finish` once no handler is running.

use crate::machine::{ContextMachine, XsaveLayout};
use crate::model::{AccessList, CpuFacts, Model, Unmodelled};
use crate::procfs;
use crate::tables::{CounterTable, DecodeCache, Decoded, Flow, Rep, StackTable};
use coldcache_dump::{counters, Dump, Meta, Record, StackNode, Thread};
use coldcache_sim::{Access, AccessKind, Hierarchy, HierarchyConfig, PrefetchIssue};
use coldcache_trace::{Record as TraceRecord, RecordKind};
use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic};
use std::cell::UnsafeCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

/// Which threads a capture traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Threads {
    /// Every thread of the process, including threads created during the
    /// capture.
    All,
    /// Only the thread that starts the capture.
    Caller,
    /// These thread ids.
    Tids(Vec<u32>),
    /// Threads whose name (`comm`) is one of these.
    Names(Vec<String>),
}

impl Threads {
    fn describe(&self) -> String {
        match self {
            Threads::All => "all".into(),
            Threads::Caller => "caller".into(),
            Threads::Tids(t) => format!(
                "tids:{}",
                t.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Threads::Names(n) => format!("names:{}", n.join(",")),
        }
    }
}

/// How much memory the handler may use; all of it is reserved at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reserves {
    /// Distinct instruction addresses.
    pub instructions: usize,
    /// Distinct call stacks.
    pub stacks: usize,
    /// Distinct (instruction, stack, thread) records.
    pub records: usize,
    /// Traced threads.
    pub threads: usize,
    /// Call depth per thread.
    pub depth: usize,
    /// Trace records (instruction fetches and data accesses) kept when
    /// [`Options::trace`] is set.
    pub trace: usize,
}

impl Default for Reserves {
    fn default() -> Self {
        Reserves {
            instructions: 1 << 16,
            stacks: 1 << 16,
            records: 1 << 20,
            threads: 64,
            depth: 1024,
            trace: 1 << 21,
        }
    }
}

/// What starts a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// An API call (`start`).
    Api,
    /// Entry to a function, by address: capture calls `first..first+count`
    /// (1-based) from entry to return.
    Function {
        /// The function's name, for the dump.
        name: String,
        /// Runtime address of its entry.
        address: u64,
        /// First call to capture (1 = the first call).
        first: u64,
        /// Number of calls to capture.
        count: u64,
    },
    /// A signal sent from outside (`coldcache trigger`).
    Signal,
}

/// Everything a capture needs to know.
#[derive(Clone, Debug)]
pub struct Options {
    /// The simulated hierarchy.
    pub cache: HierarchyConfig,
    /// Its name for the dump (preset name or file).
    pub cache_name: String,
    /// Threads to trace.
    pub threads: Threads,
    /// Explicit thread → core assignments; others round-robin.
    pub core_map: Vec<(u32, u32)>,
    /// Where the dump goes.
    pub output: PathBuf,
    /// Memory reserves.
    pub reserves: Reserves,
    /// Stop after this many instructions (0 = no limit).
    pub max_instructions: u64,
    /// What starts the capture.
    pub trigger: Trigger,
    /// The program's command line, for the dump.
    pub program: Vec<String>,
    /// Also write every access, in order, to this cctrace file.
    pub trace: Option<PathBuf>,
}

impl Options {
    /// Options for the cache configuration `cache`, tracing the caller and
    /// writing `output`.
    pub fn new(cache: HierarchyConfig, output: impl Into<PathBuf>) -> Options {
        Options {
            cache,
            cache_name: String::new(),
            threads: Threads::Caller,
            core_map: Vec::new(),
            output: output.into(),
            reserves: Reserves::default(),
            max_instructions: 0,
            trigger: Trigger::Api,
            program: std::env::args().collect(),
            trace: None,
        }
    }
}

/// Why a capture could not start or stop.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A capture is already in progress.
    #[error("a capture is already in progress")]
    AlreadyRunning,
    /// No capture to stop.
    #[error("no capture is in progress")]
    NotRunning,
    /// A debugger or tracer is attached.
    #[error("process is traced by pid {0} (a debugger?): single-stepping would fight it")]
    Traced(u32),
    /// The program handles SIGTRAP itself.
    #[error(
        "the program has its own SIGTRAP handler; coldcache needs SIGTRAP for single-stepping"
    )]
    ForeignSigtrap,
    /// The cache configuration is invalid.
    #[error("cache configuration: {0}")]
    Config(#[from] coldcache_sim::ConfigError),
    /// Thread selection matched nothing.
    #[error("no thread matches {0}")]
    NoThreads(String),
    /// A system call failed.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// Writing the dump failed.
    #[error("writing dump {path}: {source}")]
    Write {
        /// The dump path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Not supported on this platform.
    #[error("capture needs Linux on x86-64")]
    Unsupported,
}

/// What a finished capture produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The dump file.
    pub path: PathBuf,
    /// Instructions traced.
    pub instructions: u64,
    /// Instructions whose accesses were not modelled.
    pub unmodelled: u64,
    /// Records written.
    pub records: usize,
    /// Threads traced.
    pub threads: usize,
    /// Why the capture was cut short, if it was.
    pub cut_short: Option<String>,
}

// ---------------------------------------------------------------------------
// Global state.

const IDLE: u8 = 0;
const PREPARING: u8 = 1;
const ARMED: u8 = 2;
const RUNNING: u8 = 3;
const STOPPING: u8 = 4;

const TF: i64 = 0x100;
const MAX_SELECTED: usize = 256;

static STATE: AtomicU8 = AtomicU8::new(IDLE);
static IN_HANDLER: AtomicU32 = AtomicU32::new(0);
static LOCK: AtomicBool = AtomicBool::new(false);
static ALL_THREADS: AtomicBool = AtomicBool::new(false);
static SELECTED: [AtomicU32; MAX_SELECTED] = [const { AtomicU32::new(0) }; MAX_SELECTED];
static WRITER_TID: AtomicU32 = AtomicU32::new(0);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
static SYNC_SIGNAL: AtomicI32 = AtomicI32::new(0);
static TRIGGER_SIGNAL: AtomicI32 = AtomicI32::new(0);
static INSTRUCTIONS: AtomicU64 = AtomicU64::new(0);
static CAPTURE_PID: AtomicU32 = AtomicU32::new(0);
static OWN_ALLOCATOR: AtomicBool = AtomicBool::new(false);
static REDIRECTED: AtomicBool = AtomicBool::new(false);
/// Where a thread redirected to [`coldcache_finish_trampoline`] resumes.
static RESUME_RIP: AtomicU64 = AtomicU64::new(0);
/// Top of the stack the trap handler's work runs on (see `run_on_stack`).
static HANDLER_STACK_TOP: AtomicU64 = AtomicU64::new(0);
/// Top of the stack `coldcache_finish_trampoline` runs `finish` on.
static TRAMPOLINE_STACK_TOP: AtomicU64 = AtomicU64::new(0);
/// The last breakpoint address, never cleared: an `int3` of ours that a
/// thread hits while another removes it is recognised by it.
static BP_LAST: AtomicU64 = AtomicU64::new(0);
/// Executable range of the code this engine is part of: a thread stopped
/// inside it is never redirected to `finish` (it may hold our locks).
static OWN_TEXT: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static BP_ADDR: AtomicU64 = AtomicU64::new(0);
static BP_ORIG: AtomicU8 = AtomicU8::new(0);
static BP_PLANTED: AtomicBool = AtomicBool::new(false);
static REPLANT_TID: AtomicU32 = AtomicU32::new(0);
static HANDLERS: Mutex<bool> = Mutex::new(false);
static FINISH: Mutex<Option<Result<Summary, String>>> = Mutex::new(None);
/// Options kept for a signal-triggered capture, started by the writer.
static PENDING: Mutex<Option<Options>> = Mutex::new(None);

struct InnerCell(UnsafeCell<Option<Box<Inner>>>);
// SAFETY: the cell is only accessed with `LOCK` held (see `with_inner`) or
// by `finish` after it has made sure no handler runs.
unsafe impl Sync for InnerCell {}
static INNER: InnerCell = InnerCell(UnsafeCell::new(None));

/// Runs `f` on the capture state with the spin lock held.
fn with_inner<R>(f: impl FnOnce(&mut Option<Box<Inner>>) -> R) -> R {
    while LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    // SAFETY: the lock is held, so no other reference to the cell exists.
    let r = f(unsafe { &mut *INNER.0.get() });
    LOCK.store(false, Ordering::Release);
    r
}

/// Calls `f(arg)` with RSP switched to `top` (16-byte aligned by this
/// function), then switches back.
///
/// # Safety
/// `top` is the top of a mapped, writable stack nobody else uses during the
/// call, large enough for `f`.
#[unsafe(naked)]
unsafe extern "C" fn run_on_stack(
    arg: *mut libc::c_void,
    f: extern "C" fn(*mut libc::c_void),
    top: u64,
) {
    core::arch::naked_asm!(
        "push rbp",
        "mov rbp, rsp",
        "mov rsp, rdx",
        "and rsp, -16",
        "call rsi",
        "mov rsp, rbp",
        "pop rbp",
        "ret",
    )
}

struct StepArgs<'a> {
    inner: &'a mut Inner,
    uc: &'a mut libc::ucontext_t,
}

extern "C" fn step_thunk(p: *mut libc::c_void) {
    // SAFETY: `p` is the `StepArgs` passed by `step_switched`, alive for
    // the call.
    let a = unsafe { &mut *(p as *mut StepArgs<'_>) };
    step(a.inner, a.uc);
}

/// [`step`] on the handler stack (the caller holds `LOCK`, so only one
/// thread uses that stack at a time).
fn step_switched(inner: &mut Inner, uc: &mut libc::ucontext_t) {
    let top = HANDLER_STACK_TOP.load(Ordering::Acquire);
    if top == 0 {
        return step(inner, uc);
    }
    let mut args = StepArgs { inner, uc };
    // SAFETY: the handler stack is reserved for the process and only used
    // with `LOCK` held, which the caller holds.
    unsafe {
        run_on_stack(
            &mut args as *mut StepArgs<'_> as *mut libc::c_void,
            step_thunk,
            top,
        )
    };
}

/// Like [`with_inner`], but gives up after a bounded number of attempts.
fn try_with_inner(f: impl FnOnce(&mut Option<Box<Inner>>)) {
    for _ in 0..100_000 {
        if LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: the lock is held, so no other reference to the cell exists.
            f(unsafe { &mut *INNER.0.get() });
            LOCK.store(false, Ordering::Release);
            return;
        }
        std::hint::spin_loop();
    }
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    stack: u32,
    ret_slot: u64,
}

struct ThreadState {
    tid: u32,
    core: u32,
    active: bool,
    seeded: bool,
    at_entry: bool,
    frames: Vec<Frame>,
    pending_call: u64,
    after_syscall: u64,
    func_ret_slot: u64,
    /// A repeated string instruction that ran an iteration at the previous
    /// trap (see `finish_rep`).
    rep_ip: u64,
    rep_kind: Rep,
}

impl ThreadState {
    /// Starts tracing this thread afresh (its frames' memory is kept). At a
    /// function-entry breakpoint `at_entry` is set and `func_ret_slot` is the
    /// slot of the function's return address.
    fn restart(&mut self, at_entry: bool, func_ret_slot: u64) {
        self.active = true;
        self.seeded = false;
        self.at_entry = at_entry;
        self.frames.clear();
        self.pending_call = 0;
        self.after_syscall = 0;
        self.rep_ip = 0;
        self.func_ret_slot = func_ret_slot;
    }
}

/// The calls a function trigger captures (1-based, `first..first + count`).
#[derive(Clone, Copy, Debug)]
struct FunctionCalls {
    /// Entry address of the function.
    address: u64,
    first: u64,
    count: u64,
}

impl FunctionCalls {
    /// One past the last call to capture.
    fn end(&self) -> u64 {
        self.first.saturating_add(self.count)
    }
}

struct Inner {
    hier: Hierarchy,
    model: Model,
    layout: XsaveLayout,
    decode: DecodeCache,
    stacks: StackTable,
    counters: CounterTable,
    threads: Vec<ThreadState>,
    trace: Vec<TraceRecord>,
    trace_path: Option<PathBuf>,
    depth: usize,
    levels: usize,
    cores: u32,
    core_map: Vec<(u32, u32)>,
    next_core: u32,
    accesses: AccessList,
    instructions: u64,
    untrapped: u64,
    unmodelled: [u64; Unmodelled::ALL.len()],
    max_instructions: u64,
    cut_short: Option<&'static str>,
    exec_ranges: Vec<(u64, u64)>,
    /// DWARF CFI of the mapped files, for seeding shadow stacks.
    unwinder: crate::unwind::StackUnwinder,
    func: Option<FunctionCalls>,
    calls_seen: u64,
    calls_done: u64,
    meta: Meta,
    modules: Vec<coldcache_dump::Module>,
    output: PathBuf,
    started: Instant,
    stop_entry: u64,
}

// ---------------------------------------------------------------------------
// Entry points in assembly: they control exactly which instructions of ours
// run with TF set.

/// Sets TF on the calling thread so tracing starts at the caller's next
/// instruction: the trap comes after the instruction following `popfq`,
/// the `ret`.
///
/// # Safety
/// Only to be called by [`start`] after a successful [`prepare`]: with no
/// capture running, the first trap clears TF again, harmlessly.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn coldcache_arm_current_thread() {
    core::arch::naked_asm!("pushfq", "or qword ptr [rsp], 0x100", "popfq", "ret")
}

/// Stops the capture in progress and writes its dump; 0 on success.
///
/// The trap handler recognises this function's address and clears TF
/// before its first instruction runs, so nothing of the stop path is
/// traced.
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn coldcache_stop() -> i32 {
    core::arch::naked_asm!("nop", "jmp {stop}", stop = sym stop_after_intercept)
}

extern "C" fn stop_after_intercept() -> i32 {
    let r = finish();
    let code = if r.is_ok() { 0 } else { -1 };
    if let Ok(mut g) = FINISH.lock() {
        *g = Some(r.map_err(|e| e.to_string()));
    }
    code
}

/// A running capture; stops it when dropped.
#[must_use = "the capture stops when this guard is dropped"]
pub struct Capture {
    stopped: bool,
}

impl Capture {
    /// Stops the capture and writes the dump.
    #[inline(always)]
    pub fn stop(mut self) -> Result<Summary, CaptureError> {
        self.stopped = true;
        stop()
    }
}

impl Drop for Capture {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.stopped {
            let _ = stop();
        }
    }
}

/// Starts a capture. With [`Threads::Caller`] or a selection that includes
/// the caller, tracing of the calling thread begins at the instruction after
/// this call returns.
#[inline(always)]
pub fn start(options: Options) -> Result<Capture, CaptureError> {
    let trace_caller = prepare(options)?;
    if trace_caller {
        // SAFETY: the assembly routine only sets TF and returns.
        unsafe { coldcache_arm_current_thread() };
    }
    Ok(Capture { stopped: false })
}

/// Stops the capture in progress and writes its dump.
#[inline(always)]
pub fn stop() -> Result<Summary, CaptureError> {
    let code = coldcache_stop();
    let r = FINISH.lock().ok().and_then(|mut g| g.take());
    match r {
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) if code != 0 && e == CaptureError::NotRunning.to_string() => {
            Err(CaptureError::NotRunning)
        }
        Some(Err(e)) => Err(CaptureError::Os {
            what: "finishing the capture",
            source: std::io::Error::other(e),
        }),
        None => Err(CaptureError::NotRunning),
    }
}

/// True while a capture is armed or running.
pub fn is_active() -> bool {
    matches!(STATE.load(Ordering::Acquire), ARMED | RUNNING | STOPPING)
}

/// Instructions traced so far by the capture in progress.
pub fn instructions_traced() -> u64 {
    INSTRUCTIONS.load(Ordering::Relaxed)
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

fn os(what: &'static str) -> CaptureError {
    CaptureError::Os {
        what,
        source: std::io::Error::last_os_error(),
    }
}

/// Prepares a capture; returns whether the calling thread is to be traced
/// (the caller then arms itself). For a function trigger the capture is
/// armed and starts at the breakpoint.
pub fn prepare(options: Options) -> Result<bool, CaptureError> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Err(CaptureError::Unsupported);
    }
    if STATE
        .compare_exchange(IDLE, PREPARING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(CaptureError::AlreadyRunning);
    }
    match prepare_inner(options) {
        Ok(v) => Ok(v),
        Err(e) => {
            STATE.store(IDLE, Ordering::Release);
            Err(e)
        }
    }
}

fn prepare_inner(options: Options) -> Result<bool, CaptureError> {
    if let Some(pid) = procfs::tracer_pid() {
        return Err(CaptureError::Traced(pid));
    }
    install_handlers()?;
    let hier = Hierarchy::new(&options.cache)?;
    let levels = hier.levels();
    let level_names: Vec<String> = (1..=levels).map(|l| format!("L{l}")).collect();
    let names = counters::names(&level_names);
    let stride = names.len();
    let me = gettid();
    let writer = WRITER_TID.load(Ordering::Acquire);
    let tasks: Vec<u32> = procfs::tasks()
        .into_iter()
        .filter(|&t| t != writer)
        .collect();
    let selected: Vec<u32> = match &options.threads {
        Threads::All => tasks.clone(),
        Threads::Caller => vec![me],
        Threads::Tids(t) => t.iter().copied().filter(|x| tasks.contains(x)).collect(),
        Threads::Names(n) => tasks
            .iter()
            .copied()
            .filter(|&t| n.contains(&procfs::thread_name(t)))
            .collect(),
    };
    let is_function = matches!(options.trigger, Trigger::Function { .. });
    if selected.is_empty() && !is_function && options.threads != Threads::All {
        return Err(CaptureError::NoThreads(options.threads.describe()));
    }
    if selected.len() > MAX_SELECTED.min(options.reserves.threads) {
        return Err(CaptureError::NoThreads(format!(
            "{}: {} threads selected, more than the {} reserved",
            options.threads.describe(),
            selected.len(),
            MAX_SELECTED.min(options.reserves.threads)
        )));
    }
    let cores = options.cache.cores.max(1) as u32;
    let modules = procfs::modules();
    let exec_ranges = modules.iter().map(|m| (m.start, m.end)).collect();
    let max_threads = options.reserves.threads.clamp(1, MAX_SELECTED);
    let mut threads = Vec::with_capacity(max_threads);
    // Thread slots are reserved now, frames included, so a thread that
    // appears during the capture needs no allocation.
    for _ in 0..max_threads {
        threads.push(ThreadState {
            tid: 0,
            core: 0,
            active: false,
            seeded: false,
            at_entry: false,
            frames: Vec::with_capacity(options.reserves.depth.max(1)),
            pending_call: 0,
            after_syscall: 0,
            func_ret_slot: 0,
            rep_ip: 0,
            rep_kind: Rep::None,
        });
    }
    let (trigger, func) = match &options.trigger {
        Trigger::Api => ("api".to_string(), None),
        Trigger::Signal => ("signal".to_string(), None),
        Trigger::Function {
            name,
            address,
            first,
            count,
        } => (
            format!("function:{name}"),
            Some(FunctionCalls {
                address: *address,
                first: (*first).max(1),
                count: (*count).max(1),
            }),
        ),
    };
    let mut inner = Box::new(Inner {
        hier,
        model: Model::new(CpuFacts::detect()),
        layout: XsaveLayout::detect(),
        decode: DecodeCache::new(options.reserves.instructions),
        stacks: StackTable::new(options.reserves.stacks),
        counters: CounterTable::new(options.reserves.records, stride),
        threads,
        trace: Vec::with_capacity(if options.trace.is_some() {
            options.reserves.trace
        } else {
            0
        }),
        trace_path: options.trace.clone(),
        depth: options.reserves.depth.max(1),
        levels,
        cores,
        core_map: options.core_map.clone(),
        next_core: 0,
        accesses: AccessList::default(),
        instructions: 0,
        untrapped: 0,
        unmodelled: [0; Unmodelled::ALL.len()],
        max_instructions: options.max_instructions,
        cut_short: None,
        exec_ranges,
        unwinder: crate::unwind::StackUnwinder::new(&procfs::self_maps()),
        func,
        calls_seen: 0,
        calls_done: 0,
        meta: Meta {
            program: options.program.clone(),
            pid: std::process::id(),
            cache_name: options.cache_name.clone(),
            cache_toml: coldcache_config::to_toml(&options.cache),
            levels: level_names,
            cores,
            threads: options.threads.describe(),
            trigger,
            counters: names,
            ..Meta::default()
        },
        modules,
        output: options.output.clone(),
        started: Instant::now(),
        stop_entry: coldcache_stop as *const () as usize as u64,
    });
    for &tid in &selected {
        if !is_function {
            claim_thread(&mut inner, tid);
        }
    }
    INSTRUCTIONS.store(0, Ordering::Relaxed);
    CAPTURE_PID.store(std::process::id(), Ordering::Relaxed);
    for (i, s) in SELECTED.iter().enumerate() {
        s.store(selected.get(i).copied().unwrap_or(0), Ordering::Relaxed);
    }
    ALL_THREADS.store(options.threads == Threads::All, Ordering::Relaxed);
    inner.meta.start_unix_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    with_inner(|cell| *cell = Some(inner));
    if let Some(calls) = func {
        plant_breakpoint(calls.address)?;
        STATE.store(ARMED, Ordering::Release);
        return Ok(false);
    }
    STATE.store(RUNNING, Ordering::Release);
    let sig = SYNC_SIGNAL.load(Ordering::Relaxed);
    let pid = std::process::id() as i32;
    for &tid in &selected {
        if tid != me {
            // SAFETY: tgkill with our own pid and a thread id; a thread that
            // has exited just makes it fail with ESRCH.
            unsafe { libc::syscall(libc::SYS_tgkill, pid, tid as i32, sig) };
        }
    }
    Ok(selected.contains(&me))
}

/// Claims (or finds) the slot of a thread; `None` when the slots are full.
fn claim_thread(inner: &mut Inner, tid: u32) -> Option<usize> {
    if let Some(i) = inner.threads.iter().position(|t| t.tid == tid) {
        return Some(i);
    }
    let i = inner.threads.iter().position(|t| t.tid == 0)?;
    let core = inner
        .core_map
        .iter()
        .find(|(t, _)| *t == tid)
        .map(|&(_, c)| c % inner.cores)
        .unwrap_or_else(|| {
            let c = inner.next_core % inner.cores;
            inner.next_core += 1;
            c
        });
    let t = &mut inner.threads[i];
    t.tid = tid;
    t.core = core;
    t.restart(false, 0);
    Some(i)
}

fn install_handlers() -> Result<(), CaptureError> {
    let mut done = HANDLERS.lock().unwrap_or_else(|e| e.into_inner());
    // The SIGTRAP disposition is checked at every start: the program may
    // have installed its own handler since the last capture.
    // SAFETY: querying the current disposition into a zeroed struct.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the old one.
    if unsafe { libc::sigaction(libc::SIGTRAP, std::ptr::null(), &mut old) } != 0 {
        return Err(os("reading the SIGTRAP disposition"));
    }
    let ours = on_sigtrap as *const () as usize;
    if old.sa_sigaction != ours {
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
            return Err(CaptureError::ForeignSigtrap);
        }
        install(libc::SIGTRAP, ours)?;
    }
    if *done {
        return Ok(());
    }
    // The handler's work and `finish` after a redirect run on stacks of
    // their own, so a traced thread with a small stack (glibc allows 16 KiB)
    // only holds the signal frame. Both are used under the engine's lock or
    // by one redirected thread at a time, and live for the process.
    for (top, what) in [
        (&HANDLER_STACK_TOP, "reserving the handler stack"),
        (&TRAMPOLINE_STACK_TOP, "reserving the finish stack"),
    ] {
        const LEN: usize = 2 << 20;
        // SAFETY: an anonymous private mapping has no preconditions.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os(what));
        }
        top.store((p as u64 + LEN as u64) & !63, Ordering::Release);
    }
    let own = on_sigtrap as *const () as usize as u64;
    if let Some(m) = procfs::self_maps()
        .into_iter()
        .find(|m| m.perms.contains('x') && (m.start..m.end).contains(&own))
    {
        OWN_TEXT[0].store(m.start, Ordering::Relaxed);
        OWN_TEXT[1].store(m.end, Ordering::Relaxed);
    }
    let sync = libc::SIGRTMIN() + 6;
    install(sync, on_sync as *const () as usize)?;
    SYNC_SIGNAL.store(sync, Ordering::Relaxed);
    *done = true;
    drop(done);
    if std::env::var_os("COLDCACHE_PROGRESS").is_some() {
        ensure_writer()?;
    }
    Ok(())
}

/// Starts the writer thread (dumps of asynchronous stops, progress, the
/// `--signal` trigger) if it is not running. It is only started when
/// needed: a second thread switches glibc out of its single-threaded fast
/// paths, which would change the instructions the program runs.
fn ensure_writer() -> Result<(), CaptureError> {
    static STARTED: Mutex<bool> = Mutex::new(false);
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    if *started {
        return Ok(());
    }
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os("creating the wake pipe"));
    }
    let read_fd = fds[0];
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("coldcache".into())
        .spawn(move || {
            let _ = tx.send(gettid());
            writer_loop(read_fd)
        })
        .map_err(|source| CaptureError::Os {
            what: "starting the writer thread",
            source,
        })?;
    WRITER_TID.store(rx.recv().unwrap_or(0), Ordering::Release);
    WAKE_FD.store(fds[1], Ordering::Release);
    *started = true;
    Ok(())
}

fn install(sig: i32, handler: usize) -> Result<(), CaptureError> {
    // SAFETY: a zeroed sigaction is a valid starting point; every field we
    // rely on is set below.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: sa_mask is a valid sigset_t inside `sa`.
    unsafe { libc::sigfillset(&mut sa.sa_mask) };
    // SAFETY: installing a handler with a fully initialised struct.
    if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
        return Err(os("installing a signal handler"));
    }
    Ok(())
}

/// Installs the handler of the outside trigger signal (`--signal`): each
/// delivery starts a capture with `options`, or stops the running one.
pub fn install_trigger_signal(sig: i32, options: Options) -> Result<(), CaptureError> {
    install_handlers()?;
    ensure_writer()?;
    *PENDING.lock().unwrap_or_else(|e| e.into_inner()) = Some(options);
    TRIGGER_SIGNAL.store(sig, Ordering::Relaxed);
    install(sig, on_trigger_signal as *const () as usize)
}

extern "C" fn on_trigger_signal(_sig: i32, _info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    wake(2);
}

fn wake(byte: u8) {
    let fd = WAKE_FD.load(Ordering::Acquire);
    if fd >= 0 {
        // SAFETY: write(2) of one byte from a live local; async-signal-safe.
        unsafe { libc::write(fd, &byte as *const u8 as *const libc::c_void, 1) };
    }
}

fn writer_loop(fd: i32) {
    let progress = std::env::var_os("COLDCACHE_PROGRESS").is_some();
    let mut last = (Instant::now(), 0u64);
    loop {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polling one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 1000) };
        if n > 0 {
            let mut b = 0u8;
            // SAFETY: reading one byte into a live local.
            if unsafe { libc::read(fd, &mut b as *mut u8 as *mut libc::c_void, 1) } != 1 {
                continue;
            }
            match b {
                1 => {
                    let r = finish();
                    report_async_finish(&r);
                }
                2 => {
                    if STATE.load(Ordering::Acquire) == RUNNING {
                        let r = finish();
                        report_async_finish(&r);
                    } else if STATE.load(Ordering::Acquire) == IDLE {
                        let opts = PENDING.lock().ok().and_then(|g| g.clone());
                        if let Some(o) = opts {
                            if let Err(e) = prepare(o) {
                                eprintln!("coldcache: capture not started: {e}");
                            } else if progress {
                                eprintln!("coldcache: capture started by signal");
                            }
                        }
                    }
                }
                _ => {}
            }
        } else if progress && STATE.load(Ordering::Acquire) == RUNNING {
            let now = Instant::now();
            let n = INSTRUCTIONS.load(Ordering::Relaxed);
            let rate = (n.saturating_sub(last.1)) as f64 / now.duration_since(last.0).as_secs_f64();
            let elapsed = with_inner(|c| c.as_ref().map(|i| i.started.elapsed().as_secs_f64()))
                .unwrap_or(0.0);
            eprintln!("coldcache: {n} instructions traced, {rate:.0}/s, {elapsed:.1} s elapsed");
            last = (now, n);
        }
    }
}

fn report_async_finish(r: &Result<Summary, CaptureError>) {
    if !matches!(r, Err(CaptureError::NotRunning)) {
        if let Ok(mut g) = FINISH.lock() {
            *g = Some(r.clone().map_err(|e| e.to_string()));
        }
    }
    if std::env::var_os("COLDCACHE_QUIET").is_none() {
        match r {
            Ok(s) => eprintln!(
                "coldcache: capture written to {} ({} instructions{})",
                s.path.display(),
                s.instructions,
                s.cut_short
                    .as_deref()
                    .map(|c| format!(", cut short: {c}"))
                    .unwrap_or_default()
            ),
            Err(CaptureError::NotRunning) => {}
            Err(e) => eprintln!("coldcache: capture failed: {e}"),
        }
    }
}

impl Clone for CaptureError {
    fn clone(&self) -> Self {
        match self {
            CaptureError::NotRunning => CaptureError::NotRunning,
            e => CaptureError::Os {
                what: "capture",
                source: std::io::Error::other(e.to_string()),
            },
        }
    }
}

/// Waits until the breakpoint-armed or signal-started capture has finished
/// (used at process exit). Returns the summary if one was written.
pub fn finish_at_exit() -> Option<Result<Summary, String>> {
    if is_active() {
        let r = finish();
        report_async_finish(&r);
    }
    FINISH.lock().ok().and_then(|mut g| g.take())
}

// ---------------------------------------------------------------------------
// Signal handlers.

#[inline]
fn set_tf(uc: &mut libc::ucontext_t, on: bool) {
    let f = &mut uc.uc_mcontext.gregs[libc::REG_EFL as usize];
    if on {
        *f |= TF;
    } else {
        *f &= !TF;
    }
}

extern "C" fn on_sync(_sig: i32, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid ucontext_t to an SA_SIGINFO handler.
    let uc = unsafe { &mut *(ctx as *mut libc::ucontext_t) };
    let tid = gettid();
    let on = STATE.load(Ordering::Acquire) == RUNNING
        && tid != WRITER_TID.load(Ordering::Relaxed)
        && (ALL_THREADS.load(Ordering::Relaxed)
            || SELECTED.iter().any(|s| s.load(Ordering::Relaxed) == tid));
    let was_on = uc.uc_mcontext.gregs[libc::REG_EFL as usize] & TF != 0;
    set_tf(uc, on);
    if on {
        // The interrupted code may have SIGTRAP blocked (a program signal
        // handler's mask): the first trap would then kill the process.
        // SAFETY: uc_sigmask is a sigset_t inside the live context.
        unsafe { libc::sigdelset(&mut uc.uc_sigmask, libc::SIGTRAP) };
    }
    if on && !was_on {
        // The trap comes after the interrupted instruction runs: account
        // for it now, from the state before it. The lock is only tried: a
        // thread interrupted while holding it (never expected) skips this
        // one instruction rather than deadlocking.
        IN_HANDLER.fetch_add(1, Ordering::SeqCst);
        try_with_inner(|cell| match cell {
            Some(inner) if STATE.load(Ordering::Acquire) == RUNNING => step_switched(inner, uc),
            _ => {}
        });
        IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    }
}

extern "C" fn on_sigtrap(_sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the kernel passes a valid ucontext_t and siginfo_t to an
    // SA_SIGINFO handler; they live until the handler returns.
    let (uc, code) = unsafe { (&mut *(ctx as *mut libc::ucontext_t), (*info).si_code) };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    let bp = BP_ADDR.load(Ordering::Acquire);
    let last = BP_LAST.load(Ordering::Acquire);
    if bp != 0 && rip == bp.wrapping_add(1) && code == libc::SI_KERNEL {
        on_breakpoint(uc, bp);
    } else if last != 0 && rip == last.wrapping_add(1) && code == libc::SI_KERNEL {
        // Our int3, removed by another thread (or by `finish`) between the
        // hit and now: run the original instruction.
        // SAFETY: `last` is an address of mapped code of this process.
        if unsafe { core::ptr::read_volatile(last as *const u8) } != 0xCC {
            uc.uc_mcontext.gregs[libc::REG_RIP as usize] = last as i64;
        }
    } else if code == libc::TRAP_TRACE || code == libc::TRAP_BRKPT || code == 4
    /* TRAP_HWBKPT */
    {
        let replant = REPLANT_TID.load(Ordering::Acquire);
        if CAPTURE_PID.load(Ordering::Relaxed) != std::process::id() {
            // A child forked (or vforked: it shares our memory, so no state
            // is written) during the capture inherited TF: it is not traced.
            set_tf(uc, false);
        } else if replant != 0 && replant == gettid() {
            REPLANT_TID.store(0, Ordering::Release);
            set_tf(uc, false);
            with_inner(|_| {
                let addr = BP_ADDR.load(Ordering::Acquire);
                if addr != 0 && STATE.load(Ordering::Acquire) == ARMED {
                    write_code_byte(addr, 0xCC);
                    BP_PLANTED.store(true, Ordering::Release);
                }
            });
        } else if STATE.load(Ordering::Acquire) != RUNNING {
            set_tf(uc, false);
        } else {
            with_inner(|cell| match cell {
                Some(inner) if STATE.load(Ordering::Acquire) == RUNNING => step_switched(inner, uc),
                _ => set_tf(uc, false),
            });
        }
    } else {
        // Not a trap of ours (an int3 of the program, a raise(SIGTRAP)):
        // give it the default action, as if we were not there.
        // SAFETY: restoring the default disposition and re-raising are
        // async-signal-safe; SIGTRAP is blocked until this handler returns.
        unsafe {
            libc::signal(libc::SIGTRAP, libc::SIG_DFL);
            libc::raise(libc::SIGTRAP);
        }
    }
    IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
}

/// Writes one byte of code (a breakpoint or the original byte back).
fn write_code_byte(addr: u64, byte: u8) {
    let page = addr & !0xFFF;
    let len = if (addr & 0xFFF) == 0xFFF {
        0x2000
    } else {
        0x1000
    };
    // SAFETY: the page holds mapped code of this process (the breakpoint
    // address was found in an executable mapping); it is made writable for
    // the one-byte store and then executable-only again. mprotect is
    // async-signal-safe.
    unsafe {
        libc::mprotect(
            page as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
        );
        core::ptr::write_volatile(addr as *mut u8, byte);
        libc::mprotect(
            page as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_EXEC,
        );
    }
}

fn plant_breakpoint(addr: u64) -> Result<(), CaptureError> {
    // SAFETY: `addr` is the entry of a function found in an executable
    // mapping of this process; reading one byte of it is valid.
    let orig = unsafe { core::ptr::read_volatile(addr as *const u8) };
    BP_ORIG.store(orig, Ordering::Release);
    BP_LAST.store(addr, Ordering::Release);
    BP_ADDR.store(addr, Ordering::Release);
    write_code_byte(addr, 0xCC);
    BP_PLANTED.store(true, Ordering::Release);
    Ok(())
}

fn unplant_breakpoint() {
    let addr = BP_ADDR.load(Ordering::Acquire);
    if addr != 0 && BP_PLANTED.swap(false, Ordering::AcqRel) {
        write_code_byte(addr, BP_ORIG.load(Ordering::Acquire));
    }
}

fn on_breakpoint(uc: &mut libc::ucontext_t, bp: u64) {
    // Re-execute the original instruction in every case. A thread that
    // loses the race to remove the breakpoint waits until the winner has
    // put the original byte back, or it would hit the int3 again.
    if BP_PLANTED.swap(false, Ordering::AcqRel) {
        write_code_byte(bp, BP_ORIG.load(Ordering::Acquire));
    } else {
        for _ in 0..1_000_000 {
            // SAFETY: `bp` is an address of mapped code of this process.
            if unsafe { core::ptr::read_volatile(bp as *const u8) } != 0xCC {
                break;
            }
            std::hint::spin_loop();
        }
    }
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] = bp as i64;
    if STATE.load(Ordering::Acquire) != ARMED {
        return;
    }
    let tid = gettid();
    with_inner(|cell| {
        let Some(inner) = cell.as_mut() else { return };
        if STATE.load(Ordering::Acquire) != ARMED {
            return;
        }
        let Some(calls) = inner.func else {
            return;
        };
        inner.calls_seen += 1;
        let n = inner.calls_seen;
        if n >= calls.first && n < calls.end() {
            let Some(i) = claim_thread(inner, tid) else {
                return;
            };
            let rsp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
            inner.threads[i].restart(true, rsp);
            for (j, s) in SELECTED.iter().enumerate() {
                s.store(if j == 0 { tid } else { 0 }, Ordering::Relaxed);
            }
            STATE.store(RUNNING, Ordering::Release);
            set_tf(uc, true);
            // The trap comes after the instruction at the entry runs:
            // account for it now, from the state before it.
            step_switched(inner, uc);
        } else {
            // Step over the original instruction, then plant again.
            REPLANT_TID.store(tid, Ordering::Release);
            set_tf(uc, true);
        }
    });
}

/// Safe read of this process's memory into `buf`: an unreadable address is
/// an error (false), not a fault.
fn read_bytes(addr: u64, buf: &mut [u8]) -> bool {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: process_vm_readv on our own pid copies into `buf`, a live
    // local buffer of the given length, and reports unreadable addresses as
    // an error instead of faulting.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n == buf.len() as isize
}

/// Safe read of a word of this process's memory.
pub(crate) fn read_word(addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    read_bytes(addr, &mut b).then(|| u64::from_ne_bytes(b))
}

/// The counter slot for what served an access: the level's index, or
/// `levels` for memory.
#[inline]
fn served_index(levels: usize, r: &coldcache_sim::AccessResult) -> usize {
    match r.served_by.level() {
        Some(l) => (usize::from(l) - 1).min(levels),
        None => levels,
    }
}

/// Stops the capture from inside a handler.
fn stop_from_handler(inner: &mut Inner, uc: &mut libc::ucontext_t, why: Option<&'static str>) {
    if inner.cut_short.is_none() {
        inner.cut_short = why;
    }
    STATE.store(STOPPING, Ordering::Release);
    set_tf(uc, false);
    finish_soon(uc, false);
}

/// Gets the dump of a capture that stopped inside a handler written: by the
/// writer thread if there is one; else by this thread, redirected through
/// [`coldcache_finish_trampoline`] when that is safe (at a safe point — the
/// triggering function just returned — or anywhere when the library runs on
/// its own allocator, so `finish` cannot wait for a lock the interrupted
/// code holds); else at the next `coldcache_stop` or at exit.
fn finish_soon(uc: &mut libc::ucontext_t, safe_point: bool) {
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    let in_own_code =
        rip >= OWN_TEXT[0].load(Ordering::Relaxed) && rip < OWN_TEXT[1].load(Ordering::Relaxed);
    if WAKE_FD.load(Ordering::Acquire) >= 0 {
        wake(1);
    } else if safe_point || (OWN_ALLOCATOR.load(Ordering::Relaxed) && !in_own_code) {
        redirect_to_finish(uc);
    }
}

/// Makes the thread call `finish` when the handler returns, then resume
/// exactly where it was: RIP goes to the trampoline, which finds the
/// original RSP on its stack (256 bytes below, past the red zone) and the
/// original RIP in `RESUME_RIP`.
fn redirect_to_finish(uc: &mut libc::ucontext_t) {
    if TRAMPOLINE_STACK_TOP.load(Ordering::Acquire) == 0 || REDIRECTED.swap(true, Ordering::AcqRel)
    {
        return;
    }
    let g = &mut uc.uc_mcontext.gregs;
    let rsp = g[libc::REG_RSP as usize] as u64;
    let rip = g[libc::REG_RIP as usize] as u64;
    let new = ((rsp - 256) & !15) - 16;
    if !write_word(new, rsp) {
        REDIRECTED.store(false, Ordering::Release);
        return;
    }
    RESUME_RIP.store(rip, Ordering::Release);
    g[libc::REG_RSP as usize] = new as i64;
    g[libc::REG_RIP as usize] = coldcache_finish_trampoline as *const () as usize as i64;
}

/// Declares that this process's Rust allocator is the library's own (not
/// the program's `malloc`), so a capture stopped anywhere may be finished
/// by the interrupted thread itself. Called by `libcoldcache.so`.
pub fn set_own_allocator() {
    OWN_ALLOCATOR.store(true, Ordering::Relaxed);
}

extern "C" fn finish_from_trampoline() {
    let r = finish();
    report_async_finish(&r);
    REDIRECTED.store(false, Ordering::Release);
}

/// Saves every register (flags, general registers, the whole XSAVE state),
/// calls `finish`, restores everything and jumps back to `RESUME_RIP` with
/// the original RSP. Entered only through [`redirect_to_finish`].
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn coldcache_finish_trampoline() {
    core::arch::naked_asm!(
        "pushfq",
        "push rax",
        "push rcx",
        "push rdx",
        "push rbx",
        "push rbp",
        "push rsi",
        "push rdi",
        "push r8",
        "push r9",
        "push r10",
        "push r11",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "mov rbp, rsp",
        // `finish` and the XSAVE area go on the finish stack, not on the
        // interrupted thread's (which may be small).
        "mov rsp, qword ptr [rip + {stack}]",
        "sub rsp, 16384",
        "and rsp, -64",
        // XRSTOR needs the header's reserved bytes zero.
        "xor eax, eax",
        "mov [rsp + 512], rax",
        "mov [rsp + 520], rax",
        "mov [rsp + 528], rax",
        "mov [rsp + 536], rax",
        "mov [rsp + 544], rax",
        "mov [rsp + 552], rax",
        "mov [rsp + 560], rax",
        "mov [rsp + 568], rax",
        "mov eax, -1",
        "mov edx, -1",
        "xsave64 [rsp]",
        "cld",
        "call {finish}",
        "mov eax, -1",
        "mov edx, -1",
        "xrstor64 [rsp]",
        "mov rsp, rbp",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop r11",
        "pop r10",
        "pop r9",
        "pop r8",
        "pop rdi",
        "pop rsi",
        "pop rbp",
        "pop rbx",
        "pop rdx",
        "pop rcx",
        "pop rax",
        "popfq",
        // [rsp] holds the original RSP; neither mov nor jmp touches flags.
        "mov rsp, [rsp]",
        "jmp qword ptr [rip + {resume}]",
        finish = sym finish_from_trampoline,
        resume = sym RESUME_RIP,
        stack = sym TRAMPOLINE_STACK_TOP,
    )
}

/// One trap of a traced thread.
fn step(inner: &mut Inner, uc: &mut libc::ucontext_t) {
    let tid = gettid();
    let ti = match inner.threads.iter().position(|t| t.tid == tid) {
        Some(i) => i,
        None if ALL_THREADS.load(Ordering::Relaxed) => match claim_thread(inner, tid) {
            Some(i) => i,
            None => {
                inner.cut_short.get_or_insert("more threads than reserved");
                set_tf(uc, false);
                return;
            }
        },
        None => {
            set_tf(uc, false);
            return;
        }
    };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    if !inner.threads[ti].active || rip == inner.stop_entry {
        inner.threads[ti].active = false;
        set_tf(uc, false);
        return;
    }
    let rsp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
    let rbp = uc.uc_mcontext.gregs[libc::REG_RBP as usize] as u64;
    let layout = inner.layout;
    // SAFETY: `uc` is the live context of this handler.
    let machine = unsafe { ContextMachine::new(uc, &layout) };

    // The instruction after a `syscall` ran without a trap.
    let after = std::mem::take(&mut inner.threads[ti].after_syscall);
    if after != 0 && after != rip {
        untrapped(inner, ti, after, &machine);
    }
    // A repeated string instruction ended at the previous trap.
    let rep_ip = std::mem::take(&mut inner.threads[ti].rep_ip);
    if rep_ip != 0 && rep_ip != rip {
        finish_rep(inner, ti, rep_ip, &machine);
    }
    // A call completed: the callee's first instruction is at RIP.
    let site = std::mem::take(&mut inner.threads[ti].pending_call);
    if site != 0 {
        let parent = current_stack(&inner.threads[ti]);
        let Some(id) = inner.stacks.intern(parent, site, rip) else {
            return stop_from_handler(inner, uc, Some("stack reserve exhausted"));
        };
        let depth = inner.depth;
        let t = &mut inner.threads[ti];
        if t.frames.len() >= depth {
            return stop_from_handler(inner, uc, Some("call depth reserve exhausted"));
        }
        t.frames.push(Frame {
            stack: id,
            ret_slot: rsp,
        });
    }
    if !inner.threads[ti].seeded {
        seed(inner, ti, rip, rsp, rbp);
    }
    {
        let t = &mut inner.threads[ti];
        while t.frames.last().is_some_and(|f| f.ret_slot < rsp) {
            t.frames.pop();
        }
        if t.func_ret_slot != 0 && rsp > t.func_ret_slot {
            // The triggering function returned.
            t.func_ret_slot = 0;
            t.active = false;
            set_tf(uc, false);
            inner.calls_done += 1;
            let more = inner
                .func
                .is_some_and(|calls| inner.calls_seen < calls.end() - 1);
            if more && inner.cut_short.is_none() {
                // `finish` may have begun: only a running capture re-arms.
                if STATE
                    .compare_exchange(RUNNING, ARMED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    let addr = BP_ADDR.load(Ordering::Acquire);
                    if addr != 0 {
                        write_code_byte(addr, 0xCC);
                        BP_PLANTED.store(true, Ordering::Release);
                    }
                }
            } else {
                STATE.store(STOPPING, Ordering::Release);
                finish_soon(uc, true);
            }
            return;
        }
    }
    let Some(d) = decoded(inner, rip) else {
        return stop_from_handler(inner, uc, Some("instruction reserve exhausted"));
    };
    let stack = current_stack(&inner.threads[ti]);
    if !count_instruction(inner, ti, rip, stack, &d, &machine, Mode::Trapped) {
        return stop_from_handler(inner, uc, Some("record or trace reserve exhausted"));
    }
    if d.rep != Rep::None && count_register(&d, &machine) != 0 {
        inner.threads[ti].rep_ip = rip;
        inner.threads[ti].rep_kind = d.rep;
    }
    let mut emulated = false;
    match d.flow {
        Flow::Call => inner.threads[ti].pending_call = rip + u64::from(d.len) - 1,
        Flow::Syscall => {
            emulated = emulate_sigprocmask(uc, rip + u64::from(d.len));
            if !emulated {
                inner.threads[ti].after_syscall = rip + u64::from(d.len);
            }
        }
        _ => {}
    }
    if inner.max_instructions != 0 && inner.instructions >= inner.max_instructions {
        stop_from_handler(inner, uc, Some("instruction limit reached"));
    } else if emulated {
        // The syscall was done here and RIP moved past it: the instruction
        // there runs before the next trap, so account for it now.
        step(inner, uc);
    }
}

/// `rt_sigprocmask` would let a traced thread block SIGTRAP (glibc blocks
/// every signal around `clone` in `pthread_create`, for one); the next
/// single-step trap would then kill the process. Such a call is done here
/// instead: the handler computes the new mask without SIGTRAP, stores it in
/// the context (the kernel installs it when the handler returns), writes the
/// old mask, sets the result and moves RIP past the `syscall`. Returns false
/// (the syscall then runs normally) for any other system call.
fn emulate_sigprocmask(uc: &mut libc::ucontext_t, next: u64) -> bool {
    let g = &mut uc.uc_mcontext.gregs;
    if g[libc::REG_RAX as usize] as u64 != libc::SYS_rt_sigprocmask as u64
        || g[libc::REG_R10 as usize] != 8
    {
        return false;
    }
    let how = g[libc::REG_RDI as usize];
    let set_ptr = g[libc::REG_RSI as usize] as u64;
    let old_ptr = g[libc::REG_RDX as usize] as u64;
    // SAFETY: uc_sigmask is a sigset_t of at least 8 bytes, its first word
    // holding signals 1..=64 (bit n-1 for signal n).
    let mask_word = unsafe { &mut *(&mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64) };
    let current = *mask_word;
    let set = if set_ptr != 0 {
        match read_word(set_ptr) {
            Some(v) => Some(v),
            None => {
                uc.uc_mcontext.gregs[libc::REG_RAX as usize] = -(libc::EFAULT as i64);
                uc.uc_mcontext.gregs[libc::REG_RIP as usize] = next as i64;
                return true;
            }
        }
    } else {
        None
    };
    let new = match (how as i32, set) {
        (_, None) => current,
        (libc::SIG_BLOCK, Some(s)) => current | s,
        (libc::SIG_UNBLOCK, Some(s)) => current & !s,
        (libc::SIG_SETMASK, Some(s)) => s,
        _ => {
            uc.uc_mcontext.gregs[libc::REG_RAX as usize] = -(libc::EINVAL as i64);
            uc.uc_mcontext.gregs[libc::REG_RIP as usize] = next as i64;
            return true;
        }
    };
    if old_ptr != 0 && !write_word(old_ptr, current) {
        uc.uc_mcontext.gregs[libc::REG_RAX as usize] = -(libc::EFAULT as i64);
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] = next as i64;
        return true;
    }
    let never =
        (1u64 << (libc::SIGTRAP - 1)) | (1 << (libc::SIGKILL - 1)) | (1 << (libc::SIGSTOP - 1));
    // SAFETY: as above.
    let mask_word = unsafe { &mut *(&mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64) };
    *mask_word = new & !never;
    uc.uc_mcontext.gregs[libc::REG_RAX as usize] = 0;
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] = next as i64;
    true
}

/// Safe write of a word of this process's memory (false instead of a crash).
fn write_word(addr: u64, v: u64) -> bool {
    let local = libc::iovec {
        iov_base: &v as *const u64 as *mut libc::c_void,
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: process_vm_writev on our own pid copies from a live local and
    // reports unwritable addresses as an error instead of faulting.
    unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) == 8 }
}

fn current_stack(t: &ThreadState) -> u32 {
    t.frames.last().map(|f| f.stack).unwrap_or(0)
}

/// Decodes (or finds) the instruction at `ip`.
fn decoded(inner: &mut Inner, ip: u64) -> Option<Decoded> {
    if let Some(d) = inner.decode.get(ip) {
        return Some(*d);
    }
    // Read up to 15 bytes without crossing into a page the instruction
    // does not use: a first read stops at the page end; an instruction that
    // continues on the next page proves that page is mapped.
    let mut bytes = [0u8; 15];
    let to_page_end = (0x1000 - (ip & 0xFFF)) as usize;
    let first = to_page_end.min(15);
    // SAFETY: the thread is about to execute the instruction at `ip`, so
    // its first byte's page is mapped and readable code of this process.
    unsafe { core::ptr::copy_nonoverlapping(ip as *const u8, bytes.as_mut_ptr(), first) };
    let mut decoder = Decoder::with_ip(64, &bytes[..first], ip, DecoderOptions::NONE);
    let mut instr = decoder.decode();
    if instr.is_invalid() && first < 15 {
        // The rest may lie on the next page, which need not be mapped (an
        // invalid instruction at a page end): read it safely; unreadable
        // bytes stay zero and decoding fails as it would on the CPU.
        read_bytes(ip + first as u64, &mut bytes[first..]);
        let mut decoder = Decoder::with_ip(64, &bytes, ip, DecoderOptions::NONE);
        instr = decoder.decode();
    }
    let flow = match instr.flow_control() {
        FlowControl::Call | FlowControl::IndirectCall if instr.mnemonic() == Mnemonic::Call => {
            Flow::Call
        }
        _ if instr.mnemonic() == Mnemonic::Syscall => Flow::Syscall,
        _ => Flow::Other,
    };
    let plan = inner.model.plan(&instr);
    let rep = if !instr.is_string_instruction() {
        Rep::None
    } else if instr.has_repe_prefix()
        && matches!(
            instr.mnemonic(),
            Mnemonic::Cmpsb
                | Mnemonic::Cmpsw
                | Mnemonic::Cmpsd
                | Mnemonic::Cmpsq
                | Mnemonic::Scasb
                | Mnemonic::Scasw
                | Mnemonic::Scasd
                | Mnemonic::Scasq
        )
    {
        Rep::WhileEqual
    } else if instr.has_repne_prefix() {
        Rep::WhileNotEqual
    } else if instr.has_rep_prefix() || instr.has_repe_prefix() {
        Rep::Count
    } else {
        Rep::None
    };
    let d = Decoded {
        instr,
        plan,
        len: instr.len().max(1) as u8,
        flow,
        rep,
    };
    inner.decode.insert(ip, d).copied()
}

/// Where the machine state of a counted instruction comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The state before it runs (the normal case).
    Trapped,
    /// The state after it ran (the instruction after a `syscall`).
    After,
    /// No data access: the final check of a repeated string instruction.
    NoData,
}

/// The count register of a string instruction (RCX, or ECX with an
/// address-size prefix).
fn count_register(d: &Decoded, machine: &ContextMachine<'_>) -> u64 {
    use crate::model::Machine;
    use iced_x86::OpKind;
    let rcx = machine.gpr(iced_x86::Register::RCX);
    let ecx_only = (0..d.instr.op_count()).any(|i| {
        matches!(
            d.instr.op_kind(i),
            OpKind::MemoryESEDI | OpKind::MemorySegESI
        )
    });
    if ecx_only {
        rcx & 0xFFFF_FFFF
    } else {
        rcx
    }
}

/// A repeated string instruction at `ip` stopped repeating. Valgrind (and
/// so Callgrind's Ir) executes it once more when the repetition ends on
/// the count (the check that finds RCX = 0); the hardware does not trap for
/// that check. It is counted as one more execution without data access, so
/// instruction counts agree with Valgrind's (see docs/capture.md).
fn finish_rep(inner: &mut Inner, ti: usize, ip: u64, machine: &ContextMachine<'_>) {
    use crate::model::Machine;
    let kind = inner.threads[ti].rep_kind;
    let Some(d) = inner.decode.get(ip).copied() else {
        return;
    };
    let zf = machine.rflags() & 0x40 != 0;
    let ended_on_count = count_register(&d, machine) == 0
        && match kind {
            Rep::Count => true,
            Rep::WhileEqual => zf,
            Rep::WhileNotEqual => !zf,
            Rep::None => false,
        };
    if ended_on_count {
        let stack = current_stack(&inner.threads[ti]);
        count_instruction(inner, ti, ip, stack, &d, machine, Mode::NoData);
    }
}

/// Counts one execution of `d` at `rip`. Returns false when the record
/// reserve is exhausted.
fn count_instruction(
    inner: &mut Inner,
    ti: usize,
    rip: u64,
    stack: u32,
    d: &Decoded,
    machine: &ContextMachine<'_>,
    mode: Mode,
) -> bool {
    let levels = inner.levels;
    let core = inner.threads[ti].core as usize;
    inner.accesses.clear();
    let modelled = match mode {
        Mode::Trapped => d.plan.eval(&d.instr, machine, &mut inner.accesses),
        Mode::NoData => Ok(()),
        Mode::After => d.plan.eval_after(&d.instr, machine, &mut inner.accesses),
    };
    let Some(c) = inner.counters.counters(rip, stack, ti as u32) else {
        return false;
    };
    c[0] += 1;
    let r = inner.hier.access(
        core,
        Access {
            kind: AccessKind::InstrFetch,
            addr: rip,
            size: u32::from(d.len),
            ip: rip,
        },
    );
    c[counters::side_base(levels, 0) + served_index(levels, &r)] += 1;
    if inner.trace_path.is_some() {
        let n = 1 + if modelled.is_ok() {
            inner.accesses.as_slice().len()
        } else {
            0
        };
        if inner.trace.len() + n > inner.trace.capacity() {
            return false;
        }
        inner.trace.push(TraceRecord {
            kind: RecordKind::Instr,
            addr: rip,
            size: u32::from(d.len),
            ip: rip,
            thread: ti as u32,
        });
        if modelled.is_ok() {
            for a in inner.accesses.as_slice() {
                let kind = match a.kind {
                    AccessKind::Read => RecordKind::Load,
                    AccessKind::Write => RecordKind::Store,
                    AccessKind::ReadModifyWrite => RecordKind::Modify,
                    AccessKind::Prefetch => RecordKind::Prefetch,
                    AccessKind::NonTemporalStore => RecordKind::NtStore,
                    AccessKind::Flush => RecordKind::Flush,
                    AccessKind::InstrFetch => RecordKind::Instr,
                };
                inner.trace.push(TraceRecord {
                    kind,
                    addr: a.addr,
                    size: a.size.clamp(1, coldcache_trace::MAX_ACCESS_SIZE),
                    ip: rip,
                    thread: ti as u32,
                });
            }
        }
    }
    match modelled {
        Ok(()) => {
            let tail = counters::tail_base(levels);
            for a in inner.accesses.as_slice() {
                let r = inner.hier.access(
                    core,
                    Access {
                        kind: a.kind,
                        addr: a.addr,
                        size: a.size,
                        ip: rip,
                    },
                );
                match a.kind {
                    AccessKind::Prefetch => match r.prefetch {
                        PrefetchIssue::Issued => c[tail] += 1,
                        PrefetchIssue::Redundant => {
                            c[tail] += 1;
                            c[tail + 1] += 1
                        }
                        PrefetchIssue::NotPrefetch => {}
                    },
                    AccessKind::Flush => {}
                    AccessKind::Read | AccessKind::ReadModifyWrite => {
                        c[counters::side_base(levels, 1) + served_index(levels, &r)] += 1
                    }
                    AccessKind::Write | AccessKind::NonTemporalStore => {
                        c[counters::side_base(levels, 2) + served_index(levels, &r)] += 1
                    }
                    AccessKind::InstrFetch => {}
                }
                c[tail + 2] += u64::from(r.invalidations);
                c[tail + 3] += u64::from(r.false_sharing);
            }
        }
        Err(why) => {
            c[1] += 1;
            if let Some(i) = Unmodelled::ALL.iter().position(|&u| u == why) {
                inner.unmodelled[i] += 1;
            }
        }
    }
    inner.instructions += 1;
    INSTRUCTIONS.store(inner.instructions, Ordering::Relaxed);
    true
}

/// Accounts for the instruction at `ip` that ran untrapped after a
/// `syscall`; the machine state is the one after it ran.
fn untrapped(inner: &mut Inner, ti: usize, ip: u64, machine: &ContextMachine<'_>) {
    let Some(d) = decoded(inner, ip) else { return };
    let stack = current_stack(&inner.threads[ti]);
    if count_instruction(inner, ti, ip, stack, &d, machine, Mode::After) {
        inner.untrapped += 1;
    }
    if d.flow == Flow::Call {
        inner.threads[ti].pending_call = ip + u64::from(d.len) - 1;
    }
}

/// Seeds a thread's shadow stack from the state at its first trap: with
/// the DWARF CFI of the mapped files ([`crate::unwind`]), else, when that
/// finds no frame, by walking frame pointers. Frames are accepted only while
/// the chain climbs the stack and every return address lies in an
/// executable mapping.
fn seed(inner: &mut Inner, ti: usize, rip: u64, rsp: u64, rbp: u64) {
    let mut chain = [(0u64, 0u64); 64];
    // At a function-entry breakpoint RIP is the entry, where the CFI says
    // the return address is at [RSP], as the frame-pointer walk assumes. An
    // entry without CFI (framehop's fallback there is the frame-pointer rule,
    // which would skip the direct caller) takes the frame-pointer path.
    let mut n = inner.unwinder.unwind(rip, rsp, rbp, &mut chain);
    if inner.threads[ti].at_entry && chain[0].1 != rsp {
        n = 0;
    }
    let walk_fp = n == 0;
    let in_exec = |a: u64| inner.exec_ranges.iter().any(|&(s, e)| a >= s && a < e);
    if walk_fp && inner.threads[ti].at_entry {
        if let Some(ret) = read_word(rsp) {
            if in_exec(ret) {
                chain[n] = (ret, rsp);
                n += 1;
            }
        }
    }
    let mut fp = rbp;
    while walk_fp && n < chain.len() {
        if fp < rsp || fp & 7 != 0 || fp - rsp > (64 << 20) {
            break;
        }
        let (Some(next), Some(ret)) = (read_word(fp), read_word(fp + 8)) else {
            break;
        };
        if !in_exec(ret) {
            break;
        }
        chain[n] = (ret, fp + 8);
        n += 1;
        if next <= fp {
            break;
        }
        fp = next;
    }
    let entry = inner.func.map(|f| f.address).unwrap_or(0);
    let at_entry = inner.threads[ti].at_entry;
    let mut parent = 0;
    let t = &mut inner.threads[ti];
    t.frames.clear();
    for (k, &(ret, slot)) in chain[..n].iter().enumerate().rev() {
        let callee = if k == 0 && at_entry { entry } else { 0 };
        let Some(id) = inner.stacks.intern(parent, ret - 1, callee) else {
            break;
        };
        if t.frames.len() >= inner.depth {
            break;
        }
        t.frames.push(Frame {
            stack: id,
            ret_slot: slot,
        });
        parent = id;
    }
    t.seeded = true;
}

// ---------------------------------------------------------------------------
// Finishing.

/// Stops the capture (if it is still running), waits until no handler
/// runs, and writes the dump atomically.
pub fn finish() -> Result<Summary, CaptureError> {
    static ONE: Mutex<()> = Mutex::new(());
    let _g = ONE.lock().unwrap_or_else(|e| e.into_inner());
    if CAPTURE_PID.load(Ordering::Relaxed) != std::process::id() {
        // A forked child: the capture (and its dump) belong to the parent.
        return Err(CaptureError::NotRunning);
    }
    let s = STATE.load(Ordering::Acquire);
    if !matches!(s, ARMED | RUNNING | STOPPING) {
        return Err(CaptureError::NotRunning);
    }
    with_inner(|_| {
        STATE.store(STOPPING, Ordering::Release);
        unplant_breakpoint();
        BP_ADDR.store(0, Ordering::Release);
        REPLANT_TID.store(0, Ordering::Release);
    });
    // Traced threads clear TF at their next trap (the state is no longer
    // RUNNING). They are not signalled: a signal would cut short the
    // program's poll/sleep/epoll_wait with EINTR.
    while IN_HANDLER.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    let inner = with_inner(|cell| cell.take());
    for s in &SELECTED {
        s.store(0, Ordering::Relaxed);
    }
    ALL_THREADS.store(false, Ordering::Relaxed);
    let Some(inner) = inner else {
        STATE.store(IDLE, Ordering::Release);
        return Err(CaptureError::NotRunning);
    };
    let duration = inner.started.elapsed();
    let result = write_dump(*inner, duration);
    STATE.store(IDLE, Ordering::Release);
    result
}

fn write_dump(inner: Inner, duration: std::time::Duration) -> Result<Summary, CaptureError> {
    if let Some(path) = &inner.trace_path {
        write_trace(path, &inner.trace, &inner.threads).map_err(|source| CaptureError::Write {
            path: path.clone(),
            source,
        })?;
    }
    let Inner {
        stacks,
        counters: table,
        threads,
        mut meta,
        mut modules,
        output,
        instructions,
        untrapped,
        func,
        calls_seen,
        calls_done,
        unmodelled,
        cut_short,
        ..
    } = inner;
    meta.duration_ns = duration.as_nanos() as u64;
    meta.instructions = instructions;
    meta.untrapped = untrapped;
    meta.cut_short = cut_short.map(String::from);
    meta.unmodelled = Unmodelled::ALL
        .iter()
        .zip(unmodelled.iter())
        .filter(|&(_, &n)| n > 0)
        .map(|(why, &n)| (why.reason().to_string(), n))
        .collect();
    if let Some(FunctionCalls { first, count, .. }) = func {
        if calls_done < count {
            let note = format!(
                "the function was called {calls_seen} times; calls {first} to {} were to be \
                 captured and {calls_done} were",
                first + count - 1
            );
            if meta.cut_short.is_none() {
                meta.cut_short = Some(if calls_done == 0 {
                    "the function was not called (often enough) before the program ended"
                        .to_string()
                } else {
                    "the program ended before every requested call was captured".to_string()
                });
            }
            meta.notes.push(note);
        }
    }
    if untrapped > 0 {
        meta.notes.push(format!(
            "{untrapped} instructions ran untrapped right after a syscall; their accesses \
             were computed from the state after they ran, or counted unmodelled"
        ));
    }
    // Modules mapped since the start are added; those unmapped are kept.
    for m in procfs::modules() {
        if !modules
            .iter()
            .any(|x| x.start == m.start && x.path == m.path)
        {
            modules.push(m);
        }
    }
    let used: Vec<usize> = (0..threads.len())
        .filter(|&i| threads[i].tid != 0)
        .collect();
    let dump_threads: Vec<Thread> = threads
        .iter()
        .filter(|t| t.tid != 0)
        .map(|t| Thread {
            tid: t.tid,
            name: procfs::thread_name(t.tid),
            core: t.core,
        })
        .collect();
    let mut records: Vec<Record> = table
        .iter()
        .map(|((ip, stack, thread), c)| Record {
            ip,
            stack,
            thread: used.iter().position(|&u| u == thread as usize).unwrap_or(0) as u32,
            counters: c.to_vec(),
        })
        .collect();
    records.sort_by_key(|r| (r.ip, r.stack, r.thread));
    let dump = Dump {
        meta,
        modules,
        threads: dump_threads,
        stacks: stacks
            .nodes()
            .iter()
            .map(|s| StackNode {
                parent: s.parent,
                call_site: s.call_site,
                callee: s.callee,
            })
            .collect(),
        records,
        symbols: None,
        sources: Vec::new(),
    };
    let bytes = dump.to_bytes();
    write_atomically(&output, &bytes).map_err(|source| CaptureError::Write {
        path: output.clone(),
        source,
    })?;
    Ok(Summary {
        path: output,
        instructions,
        unmodelled: unmodelled.iter().sum(),
        records: dump.records.len(),
        threads: dump.threads.len(),
        cut_short: dump.meta.cut_short.clone(),
    })
}

fn write_trace(
    path: &std::path::Path,
    records: &[TraceRecord],
    threads: &[ThreadState],
) -> std::io::Result<()> {
    let mut w = coldcache_trace::TraceWriter::new(Vec::new()).map_err(std::io::Error::other)?;
    for (i, t) in threads.iter().enumerate().filter(|(_, t)| t.tid != 0) {
        w.define_thread(i as u32, u64::from(t.tid))
            .map_err(std::io::Error::other)?;
    }
    w.write_all(records).map_err(std::io::Error::other)?;
    let bytes = w.finish().map_err(std::io::Error::other)?;
    write_atomically(path, &bytes)
}

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename, so readers never see a partial dump.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dump".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
