//! The spike detector (after the PET profiler of the seeds): a per-thread
//! stack of open zones with their start times and thresholds; when a zone
//! ends over its threshold, a spike is logged with its duration, thread,
//! frame number and full zone stack, the deepest zone over threshold marked
//! as the peak child.
//!
//! Thresholds, nearest first: one set on the zone itself ([`set_zone_threshold`],
//! or on all enclosing zones by [`set_all_parents_threshold`], or by name
//! from `COLDCACHE_SPIKE_ZONES`); the children threshold of the nearest
//! enclosing zone that set one ([`set_children_threshold`]); the global one
//! ([`set_global_threshold`], `COLDCACHE_SPIKE_THRESHOLD`).
//!
//! Descheduled or slow: each zone carries the thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) at a snapshot taken at most a quarter of the
//! global threshold before it began (a zone begin compares time stamps and
//! reads the clock only when the thread's snapshot is older than that); a
//! spike reads the clock again, so the thread's CPU time over the zone is
//! bounded above. At most the threshold: the code did not run over it,
//! the thread was off the CPU (asleep, blocked, preempted): the spike is
//! marked descheduled (`cpu_ms`, `descheduled` in the JSON) and listed
//! apart from the places worth marking up. The stderr sink prints the
//! first 20 records and counts the rest (said at exit).
//!
//! Off (one relaxed load per zone) until a global threshold is set.
//! Logging formats only when a zone is over; the time spent logging is
//! added to the start of every zone still open so it does not make their
//! parents spike in turn.

use crate::format::ZoneKey;
use crate::record;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

static ON: AtomicBool = AtomicBool::new(false);
static PAUSED: AtomicBool = AtomicBool::new(false);
static GLOBAL_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);
static FRAME: AtomicU64 = AtomicU64::new(0);
static OPT_IN: AtomicBool = AtomicBool::new(false);
static SPIKES: AtomicU64 = AtomicU64::new(0);
static HAS_BY_NAME: AtomicBool = AtomicBool::new(false);
/// How old (ticks) a thread's CPU-time snapshot may be when a zone
/// begins: a quarter of the global threshold.
static SNAPSHOT_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);
/// Spike records the stderr sink prints before it only counts them.
const STDERR_RECORDS: u64 = 20;

const IGNORE: u8 = 1;
const IGNORE_CHILDREN: u8 = 2;
const CHILD_SPIKED: u8 = 4;
const INHERITED_IGNORE: u8 = 8;

#[derive(Clone)]
struct Entry {
    key: ZoneKey,
    start: u64,
    /// Own threshold in ticks, 0 = none.
    threshold: u64,
    /// Threshold for descendants in ticks, 0 = none.
    children_threshold: u64,
    /// Nearest enclosing children threshold, 0 = none.
    inherited: u64,
    flags: u8,
    /// The thread's CPU time (ns) at a moment at most a quarter of the
    /// global threshold before `start` (the thread's snapshot then).
    cpu_before: u64,
    message: Option<String>,
    description: Option<String>,
}

struct ThreadSpikes {
    stack: Vec<Entry>,
    paused: u32,
    /// 0 default, 1 on, 2 off.
    active: u8,
    /// The last snapshot of the thread's CPU time: (tsc, CPU ns).
    snapshot: (u64, u64),
}

thread_local! {
    static STATE: RefCell<ThreadSpikes> = const {
        RefCell::new(ThreadSpikes { stack: Vec::new(), paused: 0, active: 0, snapshot: (0, 0) })
    };
    static DEPTH_OVERFLOW: Cell<u32> = const { Cell::new(0) };
}

/// Whether the detector is on (a global threshold is set).
#[inline(always)]
pub fn on() -> bool {
    ON.load(Relaxed)
}

fn ms_to_ticks(ms: f64) -> u64 {
    if ms.is_nan() || ms <= 0.0 {
        return 1;
    }
    ((ms * 1e-3 * record::tsc_hz()) as u64).max(1)
}

fn ticks_to_ms(t: u64) -> f64 {
    t as f64 * 1e3 / record::tsc_hz()
}

/// Sets the global threshold (turns the detector on); `None` turns it off.
pub fn set_global_threshold(ms: Option<f64>) {
    // The settings first, so this call overrides them, not the reverse.
    ensure_init();
    match ms {
        Some(ms) => {
            GLOBAL_TICKS.store(ms_to_ticks(ms), Relaxed);
            SNAPSHOT_TICKS.store((ms_to_ticks(ms) / 4).max(1), Relaxed);
            ON.store(true, Relaxed);
        }
        None => ON.store(false, Relaxed),
    }
}

fn with_top(f: impl FnOnce(&mut Entry)) {
    let _ = STATE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if let Some(e) = s.stack.last_mut() {
                f(e)
            }
        }
    });
}

/// Threshold for the innermost open zone of this thread.
pub fn set_zone_threshold(ms: f64) {
    let t = ms_to_ticks(ms);
    with_top(|e| e.threshold = t);
}

/// Threshold for the descendants of the innermost open zone.
pub fn set_children_threshold(ms: f64) {
    let t = ms_to_ticks(ms);
    with_top(|e| e.children_threshold = t);
}

/// Threshold for every zone enclosing the innermost one (its parents).
pub fn set_all_parents_threshold(ms: f64) {
    let t = ms_to_ticks(ms);
    let _ = STATE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            let n = s.stack.len();
            for e in s.stack.iter_mut().take(n.saturating_sub(1)) {
                e.threshold = t;
            }
        }
    });
}

/// Do not check the innermost open zone.
pub fn ignore_zone() {
    with_top(|e| e.flags |= IGNORE);
}

/// Do not check the innermost open zone's descendants.
pub fn ignore_children() {
    with_top(|e| e.flags |= IGNORE_CHILDREN);
}

/// [`ignore_zone`] if `cond`.
pub fn ignore_zone_if(cond: bool) {
    if cond {
        ignore_zone()
    }
}

/// [`ignore_children`] if `cond`.
pub fn ignore_children_if(cond: bool) {
    if cond {
        ignore_children()
    }
}

/// Pauses checking on this thread (nests with [`unpause`]).
pub fn pause() {
    let _ = STATE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.paused += 1
        }
    });
}

/// Ends one [`pause`].
pub fn unpause() {
    let _ = STATE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.paused = s.paused.saturating_sub(1)
        }
    });
}

/// [`pause`] if `cond`.
pub fn pause_if(cond: bool) {
    if cond {
        pause()
    }
}

/// Pauses or resumes checking in every thread.
pub fn set_paused_globally(paused: bool) {
    PAUSED.store(paused, Relaxed);
}

/// Turns checking on or off for the calling thread (the default is on,
/// or off for every thread with `COLDCACHE_SPIKE_THREADS=opt-in`).
pub fn set_thread_active(active: bool) {
    let _ = STATE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.active = if active { 1 } else { 2 }
        }
    });
}

/// Marks a frame boundary (the frame number in the spike log).
pub fn next_frame() -> u64 {
    FRAME.fetch_add(1, Relaxed) + 1
}

/// The current frame number.
pub fn frame() -> u64 {
    FRAME.load(Relaxed)
}

/// Number of spikes logged so far in this process.
pub fn spikes_logged() -> u64 {
    SPIKES.load(Relaxed)
}

/// Whether the innermost open zone has run past its threshold so far (what
/// `zone_message!` checks before formatting anything).
pub fn over_threshold_now() -> bool {
    if !on() {
        return false;
    }
    let now = record::rdtsc();
    STATE
        .try_with(|s| {
            let Ok(s) = s.try_borrow() else { return false };
            s.stack
                .last()
                .is_some_and(|e| now.wrapping_sub(e.start) > threshold_of(e))
        })
        .unwrap_or(false)
}

/// Attaches a message to the innermost open zone (printed if it spikes).
pub fn set_message(msg: String) {
    with_top(|e| e.message = Some(msg));
}

/// Attaches a description to the innermost open zone (PET's
/// `SetFunctionDescf`: formatted eagerly, printed if the zone spikes).
pub fn set_description(desc: String) {
    with_top(|e| e.description = Some(desc));
}

fn threshold_of(e: &Entry) -> u64 {
    if e.threshold != 0 {
        e.threshold
    } else if e.inherited != 0 {
        e.inherited
    } else {
        GLOBAL_TICKS.load(Relaxed)
    }
}

/// The calling thread's CPU time in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`,
/// a system call: read when a snapshot is due and when a spike is found,
/// never on every zone).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Sets the calling thread's detector state up (its stack's first
/// capacity, a CPU-time snapshot) before its first zone's start stamp is
/// read (`crate::prepare_thread`, after [`record::prepare_thread`]).
pub(crate) fn prepare_thread() {
    if !on() {
        return;
    }
    let _ = STATE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if s.stack.capacity() == 0 {
                s.stack.reserve(32);
            }
            if s.snapshot.0 == 0 {
                s.snapshot = (record::rdtsc(), thread_cpu_ns());
            }
        }
    });
}

/// A zone begins (called by the recorder's zone guards when [`on`]).
pub fn enter(key: ZoneKey) {
    enter_at(key, record::rdtsc())
}

/// [`enter`] with the time stamp the recording uses for the same event.
pub fn enter_at(key: ZoneKey, start: u64) {
    let pushed = STATE.try_with(|s| {
        let Ok(mut s) = s.try_borrow_mut() else {
            return false;
        };
        let (inherited, flags) = match s.stack.last() {
            Some(p) => (
                if p.children_threshold != 0 {
                    p.children_threshold
                } else {
                    p.inherited
                },
                if p.flags & (IGNORE_CHILDREN | INHERITED_IGNORE) != 0 {
                    INHERITED_IGNORE
                } else {
                    0
                },
            ),
            None => (0, 0),
        };
        let threshold = zone_threshold_by_name(key);
        // A fresh snapshot of the thread's CPU time when the last is older
        // than a quarter of the global threshold: one compare per zone, a
        // clock read at most once per quarter threshold of the thread's
        // zones. What a spike is measured against (`exit_at`).
        if s.snapshot.0 == 0 || start.wrapping_sub(s.snapshot.0) > SNAPSHOT_TICKS.load(Relaxed) {
            s.snapshot = (start, thread_cpu_ns());
        }
        let cpu_before = s.snapshot.1;
        s.stack.push(Entry {
            key,
            start,
            threshold,
            children_threshold: 0,
            inherited,
            flags,
            cpu_before,
            message: None,
            description: None,
        });
        true
    });
    if pushed != Ok(true) {
        let _ = DEPTH_OVERFLOW.try_with(|d| d.set(d.get() + 1));
    }
}

/// A zone ends: pops it and logs a spike if it ran over its threshold.
pub fn exit(key: ZoneKey) {
    exit_at(key, record::rdtsc())
}

/// [`exit`] with the time stamp the recording uses for the same event.
pub fn exit_at(key: ZoneKey, end: u64) {
    if let Ok(true) = DEPTH_OVERFLOW.try_with(|d| {
        if d.get() > 0 {
            d.set(d.get() - 1);
            true
        } else {
            false
        }
    }) {
        return;
    }
    let _ = STATE.try_with(|s| {
        let Ok(mut st) = s.try_borrow_mut() else {
            return;
        };
        // Unbalanced ends (a longjmp, an exit hook without entry): unwind to
        // the matching zone if it is open, otherwise ignore the end.
        let Some(pos) = st.stack.iter().rposition(|e| e.key == key) else {
            return;
        };
        st.stack.truncate(pos + 1);
        let e = st.stack.pop().expect("pos is in the stack");
        let duration = end.wrapping_sub(e.start);
        let threshold = threshold_of(&e);
        let active = match st.active {
            0 => !OPT_IN.load(Relaxed),
            1 => true,
            _ => false,
        };
        if duration <= threshold
            || e.flags & (IGNORE | INHERITED_IGNORE) != 0
            || st.paused > 0
            || PAUSED.load(Relaxed)
            || !active
        {
            return;
        }
        if let Some(p) = st.stack.last_mut() {
            p.flags |= CHILD_SPIKED;
        }
        // The thread ran at most `cpu` of the zone: its CPU time since a
        // snapshot taken before the zone began. At most the threshold: the
        // code did not run over it, the thread was off the CPU (asleep,
        // blocked, preempted) for the rest.
        let cpu_ms = thread_cpu_ns().wrapping_sub(e.cpu_before) as f64 * 1e-6;
        let threshold_ms = ticks_to_ms(threshold);
        let spike = Spike {
            duration_ms: ticks_to_ms(duration),
            threshold_ms,
            cpu_ms,
            descheduled: cpu_ms <= threshold_ms,
            peak: e.flags & CHILD_SPIKED == 0,
            frame: frame(),
            stack: st
                .stack
                .iter()
                .chain(std::iter::once(&e))
                .map(|x| x.key)
                .collect(),
            message: e.message.clone(),
            description: e.description.clone(),
        };
        drop(st);
        let log_start = record::rdtsc();
        let cpu_start = thread_cpu_ns();
        log_spike(&spike);
        let spent = record::rdtsc().wrapping_sub(log_start);
        let cpu_spent = thread_cpu_ns().wrapping_sub(cpu_start);
        if let Ok(mut st) = s.try_borrow_mut() {
            for open in st.stack.iter_mut() {
                open.start = open.start.wrapping_add(spent);
                open.cpu_before = open.cpu_before.wrapping_add(cpu_spent);
            }
            st.snapshot.0 = st.snapshot.0.wrapping_add(spent);
            st.snapshot.1 = st.snapshot.1.wrapping_add(cpu_spent);
        }
    });
}

/// One zone over its threshold.
struct Spike {
    duration_ms: f64,
    threshold_ms: f64,
    /// CPU time of the thread over the zone, at most (a snapshot up to a
    /// quarter threshold before it began, to its end).
    cpu_ms: f64,
    /// `cpu_ms` is at most the threshold: the thread was descheduled.
    descheduled: bool,
    peak: bool,
    frame: u64,
    stack: Vec<ZoneKey>,
    message: Option<String>,
    description: Option<String>,
}

// ---- configuration from the environment ---------------------------------

/// Parses a duration such as `1ms`, `500us`, `2s`, `0.25ms`, `1000ns`, or a
/// bare number of milliseconds; returns milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let ms = match unit.trim() {
        "" | "ms" => v,
        "us" | "µs" => v * 1e-3,
        "ns" => v * 1e-6,
        "s" => v * 1e3,
        _ => return None,
    };
    (ms.is_finite() && ms >= 0.0).then_some(ms)
}

enum Sink {
    Stderr,
    File(std::fs::File),
    Off,
}

struct Sinks {
    text: Sink,
    json: Option<std::fs::File>,
    by_name: Vec<(String, f64)>,
    resolved: HashMap<ZoneKey, u64>,
    peaks: HashMap<ZoneKey, (u64, f64)>,
    /// Peaks during which the thread was descheduled.
    descheduled: HashMap<ZoneKey, (u64, f64)>,
    /// Spike records printed to stderr, and those only counted.
    printed: u64,
    not_printed: u64,
}

static SINKS: Mutex<Option<Sinks>> = Mutex::new(None);

fn sinks() -> std::sync::MutexGuard<'static, Option<Sinks>> {
    SINKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates (or truncates) a log file, refusing a link another user planted
/// in a sticky directory (`coldcache_fsio::check_link`).
fn create_log(path: &str) -> std::io::Result<std::fs::File> {
    coldcache_fsio::check_link(std::path::Path::new(path))?;
    std::fs::File::create(path)
}

/// Whether the detector has read its settings: 0 not yet, 1 being read,
/// 2 read. Written once by the thread that starts it ([`ensure_init`]).
static INIT: AtomicU8 = AtomicU8::new(0);

/// Whether [`ensure_init`] has run to its end.
#[inline(always)]
pub fn initialized() -> bool {
    INIT.load(Ordering::Acquire) == 2
}

/// Starts the recorder if nobody has (a threshold calibrates its clock),
/// then reads `COLDCACHE_SPIKE_*` and registers the summary written at
/// exit, once per process. Later calls return at once, and so does one
/// made while the settings are being read (by another thread, or by this
/// one from inside: no wait that could deadlock), which then finds the
/// detector off, as a thread did while the recorder's start read them
/// before. Called by every entry point that may begin a zone
/// (`crate::ensure_init`), mark a frame or name a thread, and by
/// [`set_global_threshold`], so that a program's threshold set before its
/// first zone overrides `COLDCACHE_SPIKE_THRESHOLD`.
pub fn ensure_init() {
    if initialized() {
        return;
    }
    if !record::ensure_init()
        || INIT
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        return;
    }
    init_from_env();
    // SAFETY: `at_exit` is an extern "C" fn with no arguments.
    unsafe { libc::atexit(at_exit) };
    INIT.store(2, Ordering::Release);
}

/// The summary, at exit, in the process that initialized the recorder
/// only (a forked child has a copy of the detector's state).
extern "C" fn at_exit() {
    if record::is_owner() {
        finish();
    }
}

/// Reads `COLDCACHE_SPIKE_*` (once, [`ensure_init`]).
fn init_from_env() {
    let pid = std::process::id().to_string();
    let get = |k: &str| coldcache_fsio::env::var(k).map(|v| v.replace("%p", &pid));
    let text = match get("COLDCACHE_SPIKE_LOG").as_deref() {
        None | Some("stderr") => Sink::Stderr,
        Some("off") => Sink::Off,
        Some(path) => match create_log(path) {
            Ok(f) => Sink::File(f),
            Err(e) => {
                coldcache_fsio::say!(
                    "coldcache: cannot create the spike log {path}: {e}; logging to stderr"
                );
                Sink::Stderr
            }
        },
    };
    let json = get("COLDCACHE_SPIKE_JSON").and_then(|p| match create_log(&p) {
        Ok(f) => Some(f),
        Err(e) => {
            coldcache_fsio::say!("coldcache: cannot create the spike JSON log {p}: {e}");
            None
        }
    });
    let mut by_name = Vec::new();
    if let Some(list) = get("COLDCACHE_SPIKE_ZONES") {
        for item in list.split(',') {
            match item.split_once('=').and_then(|(n, d)| Some((n.trim(), parse_duration_ms(d)?))) {
                Some((n, ms)) => by_name.push((n.to_string(), ms)),
                None => coldcache_fsio::say!(
                    "coldcache: COLDCACHE_SPIKE_ZONES: ignoring {item:?} (expected NAME=DURATION, e.g. tick=16ms)"
                ),
            }
        }
    }
    HAS_BY_NAME.store(!by_name.is_empty(), Relaxed);
    *sinks() = Some(Sinks {
        text,
        json,
        by_name,
        resolved: HashMap::new(),
        peaks: HashMap::new(),
        descheduled: HashMap::new(),
        printed: 0,
        not_printed: 0,
    });
    if get("COLDCACHE_SPIKE_THREADS").as_deref() == Some("opt-in") {
        OPT_IN.store(true, Relaxed);
    }
    if let Some(t) = get("COLDCACHE_SPIKE_THRESHOLD") {
        match parse_duration_ms(&t) {
            Some(ms) => set_global_threshold(Some(ms)),
            None => coldcache_fsio::say!(
                "coldcache: COLDCACHE_SPIKE_THRESHOLD={t:?} is not a duration (e.g. 1ms, 500us); spike detection is off"
            ),
        }
    }
}

/// Per-zone thresholds set by name in the environment.
fn zone_threshold_by_name(key: ZoneKey) -> u64 {
    if !HAS_BY_NAME.load(Relaxed) {
        return 0;
    }
    let mut g = sinks();
    let Some(s) = g.as_mut() else { return 0 };
    if s.by_name.is_empty() {
        return 0;
    }
    if let Some(&t) = s.resolved.get(&key) {
        return t;
    }
    let name = key_names(key).0;
    let t = s
        .by_name
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, ms)| ms_to_ticks(ms))
        .unwrap_or(0);
    s.resolved.insert(key, t);
    t
}

/// Name, file and line of a zone key as known in-process (labels fully;
/// functions by their dynamic symbol, when `dladdr` finds one).
fn key_names(key: ZoneKey) -> (String, String, u32) {
    match key {
        ZoneKey::Label(id) => record::label_by_id(id)
            .map(|l| l.info())
            .unwrap_or_else(|| (format!("label#{id}"), String::new(), 0)),
        ZoneKey::Function(addr) => {
            // SAFETY: dladdr only reads the loader's tables; `info` is a
            // valid out-parameter; the returned strings are owned by the
            // loader and copied before returning.
            let name = unsafe {
                let mut info: libc::Dl_info = std::mem::zeroed();
                if libc::dladdr(addr as *const libc::c_void, &mut info) != 0
                    && !info.dli_sname.is_null()
                {
                    std::ffi::CStr::from_ptr(info.dli_sname)
                        .to_string_lossy()
                        .into_owned()
                } else {
                    format!("0x{addr:x}")
                }
            };
            (name, String::new(), 0)
        }
    }
}

fn describe(key: ZoneKey) -> String {
    let (name, file, line) = key_names(key);
    match key {
        ZoneKey::Label(_) if !file.is_empty() => format!("{name} ({file}:{line})"),
        ZoneKey::Function(addr) => format!("{name} [0x{addr:x}]"),
        _ => name,
    }
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn log_spike(sp: &Spike) {
    SPIKES.fetch_add(1, Relaxed);
    let (index, tid) = record::current_thread();
    let mut thread = record::thread_name(index);
    if thread.is_empty() {
        thread = format!("thread {index}");
    }
    let depth = sp.stack.len() - 1;
    let mut g = sinks();
    let Some(s) = g.as_mut() else { return };
    // The logs may be pipes whose reader has gone: EPIPE, no SIGPIPE.
    let _held = coldcache_fsio::NoSigpipe::hold();
    let key = sp.stack[depth];
    if sp.peak {
        let by = if sp.descheduled {
            &mut s.descheduled
        } else {
            &mut s.peaks
        };
        let p = by.entry(key).or_insert((0, 0.0));
        p.0 += 1;
        p.1 += sp.duration_ms;
    }
    // Stderr gets the first records; the rest are counted and said at exit.
    let shown = match s.text {
        Sink::Stderr if s.printed >= STDERR_RECORDS => {
            s.not_printed += 1;
            false
        }
        Sink::Stderr => {
            s.printed += 1;
            true
        }
        Sink::File(_) => true,
        Sink::Off => false,
    };
    let off = if sp.descheduled {
        format!(
            "  DESCHEDULED (the thread ran {:.3} ms of it at most)",
            sp.cpu_ms
        )
    } else {
        String::new()
    };
    if shown {
        let mut t = String::new();
        if sp.peak {
            t.push_str(&format!(
                "coldcache spike: zone took too long: {:.3} ms (threshold {:.3} ms)  thread: {thread} (tid {tid})  PEAK CHILD @ frame {}{off}\n  zone stack:\n",
                sp.duration_ms, sp.threshold_ms, sp.frame
            ));
            for (i, k) in sp.stack.iter().enumerate() {
                t.push_str(&format!("    {i}) {}\n", describe(*k)));
            }
        } else {
            t.push_str(&format!(
                "coldcache spike: thread {thread} (tid {tid}) zone took too long: {:.3} ms (threshold {:.3} ms){off}\n    {depth}) {}\n",
                sp.duration_ms, sp.threshold_ms, describe(key)
            ));
        }
        if let Some(d) = &sp.description {
            t.push_str(&format!("  description: {d}\n"));
        }
        if let Some(m) = &sp.message {
            t.push_str(&format!("  message: {m}\n"));
        }
        match &mut s.text {
            Sink::Stderr => {
                let _ = std::io::stderr().write_all(t.as_bytes());
            }
            Sink::File(f) => {
                let _ = f.write_all(t.as_bytes());
            }
            Sink::Off => {}
        }
    }
    if let Some(f) = &mut s.json {
        let frames: Vec<String> = sp
            .stack
            .iter()
            .map(|k| match *k {
                ZoneKey::Label(id) => {
                    let (n, file, line) = key_names(*k);
                    format!(
                        "{{\"kind\":\"zone\",\"label\":{id},\"name\":{},\"file\":{},\"line\":{line}}}",
                        json_str(&n),
                        json_str(&file)
                    )
                }
                ZoneKey::Function(a) => format!("{{\"kind\":\"function\",\"addr\":{a}}}"),
            })
            .collect();
        let line = format!(
            "{{\"type\":\"spike\",\"duration_ms\":{:.6},\"threshold_ms\":{:.6},\"cpu_ms\":{:.6},\"descheduled\":{},\"peak\":{},\"depth\":{depth},\"frame\":{},\"thread\":{},\"tid\":{tid},\"stack\":[{}],\"message\":{},\"description\":{}}}\n",
            sp.duration_ms,
            sp.threshold_ms,
            sp.cpu_ms,
            sp.descheduled,
            sp.peak,
            sp.frame,
            json_str(&thread),
            frames.join(","),
            sp.message.as_deref().map(json_str).unwrap_or_else(|| "null".into()),
            sp.description.as_deref().map(json_str).unwrap_or_else(|| "null".into()),
        );
        let _ = f.write_all(line.as_bytes());
    }
}

/// At exit: the suggestions (zones that were the peak of a spike, the
/// places worth marking up), to the text log.
fn finish() {
    let mut g = sinks();
    let Some(s) = g.as_mut() else { return };
    if matches!(s.text, Sink::Off) {
        return;
    }
    let mut t = String::new();
    let list = |t: &mut String, m: &HashMap<ZoneKey, (u64, f64)>| {
        let mut v: Vec<_> = m.iter().map(|(k, v)| (*k, *v)).collect();
        v.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        for (k, (n, ms)) in v {
            t.push_str(&format!(
                "    {} — {n} spike(s), {ms:.3} ms in all\n",
                describe(k)
            ));
        }
    };
    if !s.peaks.is_empty() {
        t.push_str("coldcache spike: worth marking up (the deepest zone of each spike; add zones inside them, or set their thresholds):\n");
        list(&mut t, &s.peaks);
    }
    if !s.descheduled.is_empty() {
        t.push_str("coldcache spike: descheduled, not slow code (the thread ran at most the threshold of these zones: asleep, blocked or preempted the rest):\n");
        list(&mut t, &s.descheduled);
    }
    if s.not_printed > 0 {
        t.push_str(&format!(
            "coldcache spike: {} more spike record(s) not shown on stderr (COLDCACHE_SPIKE_LOG=FILE writes them all)\n",
            s.not_printed
        ));
    }
    if t.is_empty() {
        return;
    }
    // The log may be a pipe whose reader has gone: EPIPE, no SIGPIPE.
    let _held = coldcache_fsio::NoSigpipe::hold();
    match &mut s.text {
        Sink::Stderr => {
            let _ = std::io::stderr().write_all(t.as_bytes());
        }
        Sink::File(f) => {
            let _ = f.write_all(t.as_bytes());
        }
        Sink::Off => {}
    }
}
