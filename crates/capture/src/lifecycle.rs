//! The life cycle of a capture: [`prepare`] (normal context) checks the
//! process can be traced, builds the accountant with every table at its
//! full size, installs the handlers and marks the capture running (or armed,
//! waiting for the function breakpoint); [`start`] arms the calling thread;
//! [`stop`] and [`finish`] end the capture and write its dump.
//!
//! IDLE → PREPARING → ARMED ⇄ RUNNING → STOPPING → IDLE (see `state.rs`).

use crate::account::{Accountant, FunctionCalls, Setup};
use crate::breakpoint;
use crate::engine::{self, coldcache_arm_current_thread};
use crate::machine::XsaveLayout;
use crate::options::{CaptureError, Mode, Options, Summary, Threads, Trigger};
use crate::output;
use crate::procfs;
use crate::state::lifecycle::OWN_STACK_AT;
use crate::state::lifecycle::{FINISHING, FINISH_PAUSE_MS};
use crate::state::{
    gettid, with_session, Session, ALL_THREADS, ARMED, CAPTURE_PID, FINISH, IDLE, INSTRUCTIONS,
    IN_HANDLER, MAX_SELECTED, PREPARING, RUNNING, SELECTED, STATE, STOPPING,
};
use coldcache_dump::Meta;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};

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

/// Where `record` reads the progress of a capture: the process id, the
/// addresses of the instruction counter (`u64`) and of the state (`u8`,
/// [`PROGRESS_RUNNING`] while a capture runs), as `PID INSTR STATE` (hex
/// addresses), written atomically to `path` once, before `main`.
///
/// `record` reads the two words from outside (`process_vm_readv`, allowed
/// to the parent): the program runs nothing more for it — no thread, no
/// store — so progress changes nothing the capture counts. (The library's
/// own progress, `COLDCACHE_PROGRESS`, prints from the writer thread, whose
/// existence switches glibc out of its single-threaded paths.)
pub fn publish_progress(path: &std::path::Path) {
    let text = format!(
        "{} {:x} {:x}\n",
        std::process::id(),
        &INSTRUCTIONS as *const _ as usize,
        &STATE as *const _ as usize
    );
    // Atomically, under an unguessable temporary name, refusing a link
    // planted by another user (`coldcache_fsio::check_link`).
    if let Err(e) = coldcache_fsio::write_atomically(path, text.as_bytes()) {
        coldcache_fsio::say!("coldcache: cannot publish progress: {e}");
    }
}

/// The value of the state word [`publish_progress`] names while a capture
/// runs.
pub const PROGRESS_RUNNING: u8 = RUNNING;

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
    crate::state::FINISH_PENDING.store(false, Ordering::Release);
    match on_own_stack(|| prepare_inner(options)) {
        Ok(v) => Ok(v),
        Err(e) => {
            STATE.store(IDLE, Ordering::Release);
            Err(e)
        }
    }
}

/// Bytes of the stack [`prepare`] and [`finish`] run on (mapped for the call,
/// `MAP_NORESERVE`: only the pages touched are used).
const OWN_STACK: usize = 8 << 20;

/// Runs `f` on a stack mapped for the call, not the caller's: preparing a
/// capture took from about 35 to about 54 KiB of the caller's stack, as
/// the compiler happened to build framehop's unwinder cache (`Cache::new`:
/// an 8 KiB frame, or 32 KiB when gimli's `UnwindContext` was inlined into
/// it; an unrelated change to `codewrite.rs` switched one for the other),
/// under `prepare_inner`'s own 16 KiB frame. On the program's 64 KiB main
/// stack under `ulimit -s 64` (`record --all` arms in the library's
/// constructor) the larger build overflowed it before `main` in about 1 run
/// in 6, as the kernel's random offset of the initial stack pointer and
/// the environment's size decided. A thread with glibc's smallest stack
/// (16 KiB) calling `coldcache_start` had no chance ([`finish`] likewise at
/// `coldcache_stop`). Falls back to the caller's stack if nothing can be
/// mapped. A panic of `f` is carried across and resumed on the caller's
/// stack.
fn on_own_stack<R, F: FnOnce() -> R>(f: F) -> R {
    // SAFETY: an anonymous private mapping has no preconditions.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            OWN_STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return f();
    }
    let outer = OWN_STACK_AT.with(|c| c.replace(p as u64));
    // A guard page at the bottom: an overflow faults, it does not run
    // into a neighbouring mapping. (Failure leaves it writable: the stack
    // is still 8 MiB.)
    // SAFETY: the first page of the mapping just made.
    unsafe { libc::mprotect(p, 4096, libc::PROT_NONE) };
    struct Call<F, R> {
        f: Option<F>,
        out: Option<std::thread::Result<R>>,
    }
    extern "C" fn thunk<F: FnOnce() -> R, R>(p: *mut libc::c_void) {
        // SAFETY: `p` is the `Call` on the caller's stack, alive and not
        // otherwise used during `run_on_stack`.
        let call = unsafe { &mut *(p as *mut Call<F, R>) };
        if let Some(f) = call.f.take() {
            call.out = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
        }
    }
    let mut call = Call {
        f: Some(f),
        out: None,
    };
    // SAFETY: the top of the mapping made above, used by this call only;
    // `thunk` unwinds nothing across `run_on_stack` (panics are caught).
    unsafe {
        crate::altstack::run_on_stack(
            &mut call as *mut Call<F, R> as *mut libc::c_void,
            thunk::<F, R>,
            p as u64 + OWN_STACK as u64,
        );
        libc::munmap(p, OWN_STACK);
    }
    OWN_STACK_AT.with(|c| c.set(outer));
    match call.out {
        Some(Ok(r)) => r,
        Some(Err(panic)) => std::panic::resume_unwind(panic),
        None => unreachable!("run_on_stack returned without calling its function"),
    }
}

/// `maps` without the range of the stack [`on_own_stack`] mapped at `own`
/// (0: none): a mapping the kernel merged with it keeps its other parts.
fn without_own_stack(maps: Vec<crate::objects::Mapping>, own: u64) -> Vec<crate::objects::Mapping> {
    if own == 0 {
        return maps;
    }
    let (lo, hi) = (own, own + OWN_STACK as u64);
    let mut out = Vec::with_capacity(maps.len());
    for m in maps {
        if m.end <= lo || m.start >= hi {
            out.push(m);
            continue;
        }
        if m.start < lo {
            out.push(crate::objects::Mapping {
                end: lo,
                ..m.clone()
            });
        }
        if m.end > hi {
            out.push(crate::objects::Mapping { start: hi, ..m });
        }
    }
    out
}

fn prepare_inner(options: Options) -> Result<bool, CaptureError> {
    if let Some(pid) = procfs::tracer_pid() {
        return Err(CaptureError::Traced(pid));
    }
    crate::seccomp::refuse_if_confined()?;
    engine::install_handlers()?;
    // What acts where the poster of a finish must (`doorbell::finish_here`).
    crate::doorbell::set_finisher(finish_and_report);
    let me = gettid();
    let writer = crate::doorbell::writer_tid();
    let tasks: Vec<u32> = procfs::tasks()
        .into_iter()
        .filter(|&t| t != writer && !procfs::thread_is_ours(t))
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
    let (trigger, function) = match &options.trigger {
        Trigger::Api => ("api".to_string(), None),
        Trigger::Signal => ("signal".to_string(), None),
        Trigger::Function {
            name,
            address,
            first,
            count,
            warm,
        } => (
            format!("function:{name}"),
            Some(FunctionCalls {
                address: *address,
                first: *first,
                count: *count,
                warm: *warm,
            }),
        ),
    };
    let modules = procfs::modules();
    let exec_ranges: Vec<(u64, u64)> = modules.iter().map(|m| (m.start, m.end)).collect();
    // Code that changes only through a system call the engines see (more
    // is added when a traced thread maps a file executable: `dlopen`).
    // Not a file the program holds open for writing, nothing at all when it
    // holds a writable /proc/<pid>/mem (`codewrite.rs`).
    let trust_files = crate::codewrite::start();
    let stable_code: Vec<(u64, u64)> = procfs::self_maps()
        .iter()
        .filter(|m| procfs::is_stable_code(m.perms.as_bytes(), m.path.as_bytes()))
        .filter(|m| {
            m.path == "[vdso]" || (trust_files && !crate::codewrite::is_writable_now(&m.path))
        })
        .map(|m| (m.start, m.end))
        .collect();
    // `coldcache_stop`, and the preloaded library's exit hook (the first
    // again when there is none).
    let stop = coldcache_stop as *const () as usize as u64;
    let stop_entries = [stop, crate::state::exit_hook().unwrap_or(stop)];
    let cpu = crate::machine::cpu_facts();
    let mut reserves = options.reserves;
    reserves.threads = reserves.threads.clamp(1, MAX_SELECTED);
    // An absurd reserve is refused with its figures before anything is
    // allocated (it used to abort the program out of memory).
    crate::options::check_reserves(&reserves, &options.cache, options.trace.is_some())
        .map_err(CaptureError::Reserve)?;
    // The tables' budget: the one asked for, else a share of the memory.
    reserves.memory = usize::try_from(crate::options::memory_budget(&reserves).0)
        .unwrap_or(usize::MAX)
        .max(1);
    // glibc's rseq area, whose critical sections the trap engine keeps
    // (`rseq.rs`).
    crate::rseq::init(options.rseq_commit);
    // Object tracking: the allocator's entry points, published for the
    // translator before any block is translated. Looked up without
    // touching the program's heap (`objects::resolve_allocators`: with
    // `dlsym`, `record --all` of scatter.cpp counted 4% more instructions
    // with `--objects`, its first malloc no longer making the heap).
    let entries = if options.objects {
        // The program's own allocators at their run-time addresses (a
        // module not mapped now is left out: the dump's list of entry
        // points observed says which were). Their names live as long as
        // the process (a few bytes a capture).
        let own: Vec<(u64, crate::objects::Kind, &'static str)> = options
            .allocators
            .iter()
            .filter_map(|c| {
                let at = crate::procfs::runtime_address(&c.module, c.address).ok()?;
                Some((at, c.kind, &*Box::leak(c.name.clone().into_boxed_str())))
            })
            .collect();
        crate::objects::resolve_allocators(&own)
    } else {
        Vec::new()
    };
    crate::objects::publish(options.objects.then_some(&entries[..]));
    let mut acc = Accountant::new(Setup {
        cache: options.cache.clone(),
        reserves,
        core_map: options.core_map.clone(),
        all_threads: options.threads == Threads::All,
        max_instructions: options.max_instructions,
        trace: match &options.trace {
            Some(path) => Some(Box::new(crate::output::TraceFile::create(path)?)),
            None => None,
        },
        function,
        // A traced thread that reaches `coldcache_stop` or the exit hook
        // (`exit()` called during the capture) leaves it there, so nothing
        // of ours runs traced.
        stop_entries,
        exec_ranges,
        stable_code: stable_code.clone(),
        unwinder: procfs::self_unwinder(),
        cpu,
        line_use: options.line_use,
        timeline: options.timeline,
        client_requests: options.client_requests,
        objects: options.objects.then(|| {
            crate::objects::Objects::new(
                true,
                reserves.threads,
                &entries,
                without_own_stack(
                    crate::objects::self_mappings(),
                    OWN_STACK_AT.with(|c| c.get()),
                ),
            )
            .with_globals(crate::objects::global_symbols())
        }),
    })?;
    let mut fallback = None;
    if options.mode != Mode::Trap {
        let prepared = crate::jit::prepare(
            &stable_code,
            stop_entries,
            cpu,
            options.mode == Mode::Verify,
            matches!(options.schedule, crate::options::Schedule::Serial { .. }),
        );
        match prepared {
            Ok(()) => {}
            // The default: trap mode where fast mode cannot run.
            Err(why) if options.mode == Mode::Auto => fallback = Some(why),
            Err(why) => return Err(CaptureError::FastMode(why)),
        }
    }
    let layout = acc.layout();
    let level_names: Vec<String> = (1..=layout.levels()).map(|l| format!("L{l}")).collect();
    let cores = options.cache.cores.max(1) as u32;
    let meta = Meta {
        program: options.program.clone(),
        pid: std::process::id(),
        cache_name: options.cache_name.clone(),
        cache_toml: coldcache_config_slim::to_toml(&options.cache),
        counters: layout.names(&level_names),
        levels: level_names,
        cores,
        threads: options.threads.describe(),
        trigger,
        schedule: options.schedule.describe(),
        start_unix_ns: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        mode: coldcache_dump::Mode {
            engine: "trap".into(),
            fallback: fallback
                .map(|why| format!("fast mode could not run here ({why})"))
                .unwrap_or_default(),
            ..Default::default()
        },
        ..Meta::default()
    };
    if !is_function {
        for &tid in &selected {
            acc.claim(tid);
        }
        // A function window counts these when it opens (`join_window`).
        acc.untraced_at_start(
            tasks
                .iter()
                .filter(|&t| !selected.contains(t) && !procfs::thread_is_ours(*t))
                .count() as u64,
        );
    }
    let session = Box::new(Session {
        acc,
        layout: XsaveLayout::detect(),
        meta,
        modules,
        output: options.output.clone(),
        trace_path: options.trace.clone(),
        started: Instant::now(),
        window: options.threads.clone(),
    });
    INSTRUCTIONS.store(0, Ordering::Relaxed);
    CAPTURE_PID.store(std::process::id(), Ordering::Relaxed);
    for (i, s) in SELECTED.iter().enumerate() {
        s.store(selected.get(i).copied().unwrap_or(0), Ordering::Relaxed);
    }
    ALL_THREADS.store(options.threads == Threads::All, Ordering::Relaxed);
    with_session(|cell| *cell = Some(session));
    // The first turn is the starting thread's, when it is traced (others
    // signalled now wait for it); a function's caller or the first thread
    // a trigger reaches takes it otherwise.
    let quantum = match options.schedule {
        crate::options::Schedule::Os => 0,
        crate::options::Schedule::Serial { quantum } => quantum,
    };
    crate::schedule::configure(
        quantum,
        if selected.contains(&me) && !is_function {
            me
        } else {
            0
        },
    );
    crate::fatal::arm();
    crate::sigfault::arm();
    if let Some(calls) = function {
        breakpoint::plant(calls.address);
        STATE.store(ARMED, Ordering::Release);
        return Ok(false);
    }
    STATE.store(RUNNING, Ordering::Release);
    for &tid in &selected {
        if tid != me {
            engine::signal_thread(tid);
        }
    }
    Ok(selected.contains(&me))
}

/// What [`disarm`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disarmed {
    /// The armed capture was dropped; this many calls had been seen.
    Dropped(u64),
    /// The window (or its warming) had begun: the capture was ended there,
    /// cut short, and its dump written.
    Ended,
    /// No capture of this process was armed.
    Nothing,
}

/// Takes out a function capture's breakpoint before its code is unmapped
/// (its library is being closed), while the code is still mapped. A
/// capture armed whose window was not entered is dropped, writing nothing
/// (see [`resume_calls`]); one between calls of its window (or of its
/// warming) is ended there, cut short with `why`, and its dump written,
/// so no captured call is lost.
pub fn disarm(why: &'static str) -> Disarmed {
    if CAPTURE_PID.load(Ordering::Relaxed) != std::process::id() {
        return Disarmed::Nothing;
    }
    let entered = with_session(|cell| match cell {
        Some(s) if STATE.load(Ordering::Acquire) == ARMED => Some(s.acc.window_entered()),
        _ => None,
    });
    match entered {
        None => return Disarmed::Nothing,
        Some(true) => {
            with_session(|cell| {
                if let Some(s) = cell {
                    s.acc.set_cut_short(why);
                }
            });
            let r = finish();
            report_async_finish(&r);
            return Disarmed::Ended;
        }
        Some(false) => {}
    }
    let _g = FINISHING.lock().unwrap_or_else(|e| e.into_inner());
    let mut seen = None;
    with_session(|cell| {
        if STATE.load(Ordering::Acquire) == ARMED {
            STATE.store(STOPPING, Ordering::Release);
            breakpoint::clear();
            seen = cell.as_ref().map(|s| s.acc.calls_seen());
        }
    });
    let Some(seen) = seen else {
        return Disarmed::Nothing;
    };
    crate::schedule::off();
    while IN_HANDLER.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    let _ = crate::jit::finish();
    let session = with_session(|cell| cell.take());
    for s in &SELECTED {
        s.store(0, Ordering::Relaxed);
    }
    ALL_THREADS.store(false, Ordering::Relaxed);
    drop(session);
    crate::sigfault::disarm();
    crate::fatal::disarm();
    STATE.store(IDLE, Ordering::Release);
    Disarmed::Dropped(seen)
}

/// Sets the call count of the capture just armed to `n` calls already
/// seen (by an arming [`disarm`] abandoned).
pub fn resume_calls(n: u64) {
    with_session(|cell| {
        if let Some(s) = cell {
            s.acc.resume_calls(n);
        }
    });
}

/// Stops the capture (if it is still running), waits until no handler
/// runs, and writes the dump atomically. On a stack of its own, as
/// [`prepare`]: `coldcache_stop` called on a thread with a 16 KiB stack
/// overflowed it in `finish` (killed by SIGSEGV).
pub fn finish() -> Result<Summary, CaptureError> {
    on_own_stack(finish_inner)
}

fn finish_inner() -> Result<Summary, CaptureError> {
    let _g = FINISHING.lock().unwrap_or_else(|e| e.into_inner());
    let _me = crate::fatal::Finishing::enter();
    if CAPTURE_PID.load(Ordering::Relaxed) != std::process::id() {
        // A forked child: the capture (and its dump) belong to the parent.
        return Err(CaptureError::NotRunning);
    }
    let s = STATE.load(Ordering::Acquire);
    if !matches!(s, ARMED | RUNNING | STOPPING) {
        return Err(CaptureError::NotRunning);
    }
    with_session(|_| {
        STATE.store(STOPPING, Ordering::Release);
        breakpoint::clear();
    });
    // This finish is the one a pending request asked for: no traced
    // thread's last trap redirects into another.
    crate::state::FINISH_PENDING.store(false, Ordering::Release);
    // Threads waiting for a turn go on (to clear TF).
    crate::schedule::off();
    // Traced threads clear TF at their next trap (the state is no longer
    // RUNNING). They are not signalled: a signal would cut short the
    // program's poll/sleep/epoll_wait with EINTR.
    while IN_HANDLER.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    // Translated threads replay their buffers and leave at their next
    // block boundary.
    let fast = crate::jit::finish();
    if crate::sigvirt::take_back() {
        // A thread not traced took SIGTRAP or the sync signal with a
        // `syscall` of its own: the capture ends here, and the engine's
        // handlers are back for the traced threads' last traps.
        with_session(|cell| {
            if let Some(s) = cell {
                s.acc.set_cut_short(crate::sigvirt::TAKEN);
            }
        });
    }
    let session = with_session(|cell| cell.take());
    for s in &SELECTED {
        s.store(0, Ordering::Relaxed);
    }
    ALL_THREADS.store(false, Ordering::Relaxed);
    let Some(session) = session else {
        STATE.store(IDLE, Ordering::Release);
        return Err(CaptureError::NotRunning);
    };
    let Session {
        mut acc,
        mut meta,
        modules,
        output,
        trace_path,
        started,
        ..
    } = *session;
    meta.duration_ns = started.elapsed().as_nanos() as u64;
    if !meta.schedule.is_empty() && crate::schedule::stalled() {
        meta.notes.push(
            "schedule serial: a thread waited more than 2 s for a turn (or more threads than \
             the rotation holds were traced) and went on: this run's interleaving may differ \
             from another's"
                .to_string(),
        );
    }
    if let Some(f) = fast {
        meta.mode = coldcache_dump::Mode {
            engine: "fast".into(),
            fallback: String::new(),
            trapped: f.trapped,
            trapped_by: f
                .trapped_by
                .iter()
                .zip(crate::jit::TRAP_CAUSES)
                .filter(|(n, _)| **n > 0)
                .map(|(n, why)| (*n, why.to_string()))
                .collect(),
            dispatches: f.dispatches,
        };
        if f.short_replays > 0 {
            meta.notes.push(format!(
                "fast mode: several threads ran translated code at once; each replayed \
                 its records every {} KiB (about {} instructions; {} replays, {} of them \
                 handed over to the thread replaying at the time instead of waiting for \
                 it, {} waits for room among those), so the simulator saw the threads \
                 interleaved as their buffers filled",
                crate::jit::SHORT_KIB,
                crate::jit::SHORT_KIB * 100,
                f.short_replays,
                f.handed,
                f.handed_full,
            ));
        }
        if let Some(v) = f.verified {
            meta.notes.push(match v.difference {
                None => format!(
                    "fast-mode verification: {} translated instructions checked against the \
                     trap model, no difference",
                    v.checked
                ),
                Some(d) => format!("fast-mode verification: first difference at {d}"),
            });
        }
    }
    if let Some(note) = crate::rseq::note() {
        meta.notes.push(note);
    }
    meta.woken_early = engine::take_woken_early();
    if let Some(note) = crate::codewrite::note() {
        meta.notes.push(note);
    }
    if let Some(note) = crate::sigfault::note() {
        meta.notes.push(note);
    }
    if acc.has_late_accesses() {
        // What no object held when accessed (a library's data, mapped by
        // the dynamic linker in the window): named by what holds it now.
        acc.late_mappings(
            &crate::objects::self_mappings(),
            crate::objects::global_symbols(),
        );
    }
    let mut finished = acc.finish_encoded(meta, modules, procfs::thread_name);
    // `CALLGRIND_DUMP_STATS` parts first, each a dump of its own (the
    // numbered names beside `output`), then the last part.
    let parts = std::mem::take(&mut finished.parts);
    let of = parts.len() as u32 + 1;
    for (k, p) in parts.into_iter().enumerate() {
        let mut dump = finished.dump.clone();
        dump.records = p.records;
        dump.meta.instructions = p.instructions;
        dump.meta.cut_short = None;
        dump.meta.part = Some(coldcache_dump::Part {
            number: k as u32 + 1,
            of,
            trigger: match p.label {
                Some(l) => format!("Client Request: {l}"),
                None => "Client Request".to_string(),
            },
        });
        // What is not cut into parts stays with the last part.
        dump.objects = None;
        dump.timeline = None;
        let part = crate::account::Finished {
            dump,
            encoded: None,
            trace: None,
            unmodelled: 0,
            parts: Vec::new(),
        };
        if let Err(e) = output::write(part, output.clone(), None) {
            if !crate::output::quiet() {
                coldcache_fsio::say!("coldcache: part {} of the capture not written: {e}", k + 1);
            }
        }
    }
    if of > 1 {
        finished.dump.meta.part = Some(coldcache_dump::Part {
            number: of,
            of,
            trigger: "Program termination".to_string(),
        });
    }
    let result = output::write(finished, output, trace_path.as_deref());
    test_pause_after_write();
    crate::sigfault::disarm();
    crate::fatal::disarm();
    STATE.store(IDLE, Ordering::Release);
    result
}

/// Records the result of a finish made outside `stop` (by the writer
/// thread, a redirected thread or at exit) and says what happened.
pub(crate) fn report_async_finish(r: &Result<Summary, CaptureError>) {
    if !matches!(r, Err(CaptureError::NotRunning)) {
        if let Ok(mut g) = FINISH.lock() {
            *g = Some(r.clone().map_err(|e| e.to_string()));
        }
    }
    if !crate::output::quiet() {
        match r {
            Ok(s) => coldcache_fsio::say!(
                "coldcache: capture written to {} ({} instructions{})",
                s.path.display(),
                s.instructions,
                s.cut_short
                    .as_deref()
                    .map(|c| format!(", cut short: {c}"))
                    .unwrap_or_default()
            ),
            Err(CaptureError::NotRunning) => {}
            Err(e) => coldcache_fsio::say!("coldcache: capture failed: {e}"),
        }
    }
}

/// Waits until the breakpoint-armed or signal-started capture has finished
/// (used at process exit). Returns the summary if one was written.
pub fn finish_at_exit() -> Option<Result<Summary, String>> {
    if STATE.load(Ordering::Acquire) == RUNNING {
        // A takeover of the engine's signals ended the capture before the
        // exit did (the engine saw no trap since): that is its reason.
        let taken = crate::sigvirt::taken_over();
        with_session(|cell| {
            if let Some(s) = cell {
                if taken {
                    s.acc.set_cut_short(crate::sigvirt::TAKEN);
                }
                // An exit made inside the window's call (a `main` ending in
                // `exit()`, `record --all`) ends that call; any other exit
                // cuts the window short.
                if !s.acc.exit_ends_call(crate::state::gettid(), false) {
                    s.acc.set_cut_short("the program exited");
                }
            }
        });
    }
    if is_active() {
        let r = finish();
        report_async_finish(&r);
    }
    FINISH.lock().ok().and_then(|mut g| g.take())
}

/// Sets [`FINISH_PAUSE_MS`] (`attach`, from its settings).
pub(crate) fn set_test_finish_pause(ms: u64) {
    FINISH_PAUSE_MS.store(ms, Ordering::Relaxed);
}

/// See [`FINISH_PAUSE_MS`] (called by `finish`; nothing unless a test set it).
fn test_pause_after_write() {
    let ms = FINISH_PAUSE_MS.load(Ordering::Relaxed);
    if ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// [`finish`] from a thread the capture did not expect to finish it (a
/// fatal signal's handler, the finish trampoline, the dispatcher, the
/// writer): its result is reported (`report_async_finish`), there being no
/// caller to return it to.
pub(crate) fn finish_and_report() {
    let r = finish();
    report_async_finish(&r);
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
    if let Some(e) = r
        .as_ref()
        .err()
        .filter(|e| !matches!(e, CaptureError::NotRunning))
    {
        // Said, and kept for `coldcache_last_error`: a dump that could not
        // be written is never a silent -1.
        crate::output::set_error(e);
    }
    if let Ok(mut g) = FINISH.lock() {
        *g = Some(r.map_err(|e| e.to_string()));
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Mapping;

    fn m(start: u64, end: u64) -> Mapping {
        Mapping {
            start,
            end,
            perms: "rw-p".into(),
            path: String::new(),
        }
    }

    /// The own stack's range goes, whole mappings and the parts of one the
    /// kernel merged with it; the rest stays.
    #[test]
    fn the_own_stack_is_cut_out_of_the_mappings() {
        let own = 0x10_0000_0000;
        let top = own + OWN_STACK as u64;
        let maps = vec![
            m(0x1000, 0x2000),
            m(own - 0x3000, own + 0x1000),
            m(own + 0x1000, top - 0x1000),
            m(top - 0x1000, top + 0x5000),
            m(top + 0x8000, top + 0x9000),
        ];
        assert_eq!(
            without_own_stack(maps.clone(), own),
            [
                m(0x1000, 0x2000),
                m(own - 0x3000, own),
                m(top, top + 0x5000),
                m(top + 0x8000, top + 0x9000),
            ]
        );
        assert_eq!(without_own_stack(maps.clone(), 0), maps);
    }
}
