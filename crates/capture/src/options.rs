//! What a capture is asked to do and what it answers: the options (threads,
//! trigger, reserves, output), the errors that keep a capture from starting
//! or stopping, and the summary of a finished capture. Plain data, no
//! behaviour beyond describing itself.

pub use crate::account::Reserves;
use coldcache_sim::HierarchyConfig;
use std::path::PathBuf;

/// The default quantum of `--schedule serial`, in instructions.
pub const DEFAULT_QUANTUM: u64 = 10_000;

/// The most thread ids a selection may name (`state::SELECTED`).
pub(crate) const MAX_SELECTED: usize = 256;

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
    /// The selection as the dump records it (`all`, `caller`, `tids:1,2`, `names:a,b`).
    pub fn describe(&self) -> String {
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
        /// Calls right before `first` that only warm the cache (simulated,
        /// counted nowhere; `u64::MAX`: every earlier call; 0: cold).
        warm: u64,
    },
    /// A signal sent from outside (`coldcache trigger`).
    Signal,
}

/// How traced threads are followed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Fast mode where this process allows it, else trap mode, with a note
    /// in the dump saying why (the default).
    #[default]
    Auto,
    /// Single-stepping with the trap flag: one signal per instruction.
    Trap,
    /// Dynamic binary translation, with the trap engine for what the
    /// translator refuses (`docs/capture.md`).
    Fast,
    /// Fast mode with its translated code single-stepped too: every
    /// recorded instruction is checked against the trap engine's model on
    /// the live registers; the first difference stops the capture (for
    /// tests; about as slow as trap mode).
    Verify,
}

impl Mode {
    /// Parses `auto`, `trap`, `fast` or `verify`.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "auto" => Some(Mode::Auto),
            "trap" => Some(Mode::Trap),
            "fast" => Some(Mode::Fast),
            "verify" => Some(Mode::Verify),
            _ => None,
        }
    }

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Trap => "trap",
            Mode::Fast => "fast",
            Mode::Verify => "verify",
        }
    }
}

/// How the simulator sees traced threads interleave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// As the operating system runs them (the default): on several cores
    /// at once, an interleaving that differs from run to run.
    #[default]
    Os,
    /// One traced thread at a time, in turns of `quantum` instructions,
    /// handed on in tid order; a turn is given up at a system call that
    /// may block. Runs of a deterministic program give the same dump.
    Serial {
        /// Instructions per turn (in fast mode a turn ends at the first
        /// replay of the thread's records past it).
        quantum: u64,
    },
}

impl Schedule {
    /// Parses `os`, `serial` or `serial=QUANTUM` (QUANTUM ≥ 1).
    pub fn parse(s: &str) -> Option<Schedule> {
        match s.split_once('=') {
            None if s == "os" => Some(Schedule::Os),
            None if s == "serial" => Some(Schedule::Serial {
                quantum: DEFAULT_QUANTUM,
            }),
            Some(("serial", q)) => match q.parse::<u64>() {
                Ok(quantum) if quantum > 0 => Some(Schedule::Serial { quantum }),
                _ => None,
            },
            _ => None,
        }
    }

    /// The schedule as the dump records it (`""` for `os`, the default,
    /// so dumps of it are what they were; `serial, quantum N instructions`).
    pub fn describe(self) -> String {
        match self {
            Schedule::Os => String::new(),
            Schedule::Serial { quantum } => {
                format!("serial, quantum {quantum} instructions")
            }
        }
    }
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
    /// How threads are followed.
    pub mode: Mode,
    /// How the simulator sees traced threads interleave.
    pub schedule: Schedule,
    /// Measure line utilisation of the first data level (default off: it
    /// costs about 1.3x in fast mode's window; `COLDCACHE_LINE_USE=1`,
    /// `record --line-use`: on).
    pub line_use: bool,
    /// Track objects: which heap block (by allocation site) or mapping
    /// each data access touched (default off; `COLDCACHE_OBJECTS=1`,
    /// `record --objects`: on).
    pub objects: bool,
    /// Allocators of the program's own observed besides the C library's
    /// (`COLDCACHE_ALLOCATORS`, `record --allocator NAME=KIND`).
    pub allocators: Vec<crate::objects::CustomAllocator>,
    /// Record the order of the window, for `export --format perfetto`
    /// (default off; `COLDCACHE_TIMELINE=1`, `record --timeline`: on):
    /// `Some(limit)`, the bytes its events may take (0: a quarter of the
    /// memory budget; `COLDCACHE_TIMELINE_LIMIT`).
    pub timeline: Option<usize>,
    /// rseq critical sections under the trap engine: run each commit with
    /// the descriptor back in the kernel's hands (`crate::rseq`); only
    /// where the kernel does not check rseq at every system call's exit
    /// (`CONFIG_DEBUG_RSEQ`), which `record`/`attach` read from the
    /// kernel's configuration (`COLDCACHE_RSEQ_COMMIT=1`). Default off.
    pub rseq_commit: bool,
    /// Valgrind's client requests honoured from these states
    /// (`COLDCACHE_CLIENT_REQUESTS`, `record --client-requests`, `coldcache
    /// valgrind`); `None` (the default): only counted.
    pub client_requests: Option<crate::requests::Honour>,
}

/// The settings `record`'s environment and the C API's defaults share,
/// read into `o` from `var` (the mode given apart: `mode`), each refused
/// with its variable's name and what it must be. The one reader of these
/// variables (`preload.rs`, `capi.rs`).
pub(crate) fn apply_settings(
    o: &mut Options,
    mode: Option<String>,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let flag = |name: &str| -> Result<Option<bool>, String> {
        var(name)
            .map(|u| parse_line_use(&u).ok_or_else(|| format!("{name} `{u}` is not 0 or 1")))
            .transpose()
    };
    if let Some(m) = mode {
        o.mode = Mode::parse(&m)
            .ok_or_else(|| format!("COLDCACHE_MODE `{m}` is not auto, trap, fast or verify"))?;
    }
    if let Some(s) = var("COLDCACHE_SCHEDULE") {
        o.schedule = Schedule::parse(&s).ok_or_else(|| {
            format!("COLDCACHE_SCHEDULE `{s}` is not os, serial or serial=QUANTUM")
        })?;
    }
    if let Some(b) = flag("COLDCACHE_LINE_USE")? {
        o.line_use = b;
    }
    if let Some(b) = flag("COLDCACHE_OBJECTS")? {
        o.objects = b;
    }
    if let Some(a) = var("COLDCACHE_ALLOCATORS") {
        o.allocators = crate::objects::parse_custom(&a)?;
    }
    if let Some(c) = var("COLDCACHE_CLIENT_REQUESTS") {
        o.client_requests = Some(
            crate::requests::Honour::parse(&c)
                .map_err(|e| format!("COLDCACHE_CLIENT_REQUESTS: {e}"))?,
        );
    }
    if let Some(b) = flag("COLDCACHE_RSEQ_COMMIT")? {
        o.rseq_commit = b;
    }
    o.timeline = parse_timeline(
        var("COLDCACHE_TIMELINE").as_deref(),
        var("COLDCACHE_TIMELINE_LIMIT").as_deref(),
    )?;
    Ok(())
}

/// `COLDCACHE_TIMELINE` (`0` or `1`) and `COLDCACHE_TIMELINE_LIMIT`
/// (bytes) as [`Options::timeline`].
pub fn parse_timeline(on: Option<&str>, limit: Option<&str>) -> Result<Option<usize>, String> {
    let on = match on {
        None => false,
        Some(v) => {
            parse_line_use(v).ok_or_else(|| format!("COLDCACHE_TIMELINE `{v}` is not 0 or 1"))?
        }
    };
    let limit = match limit {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| format!("COLDCACHE_TIMELINE_LIMIT `{v}` is not a number of bytes"))?,
    };
    Ok(on.then_some(limit))
}

/// `COLDCACHE_LINE_USE`: `1` (measure line utilisation) or `0` (not, the
/// default).
pub fn parse_line_use(s: &str) -> Option<bool> {
    match s {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
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
            mode: Mode::Auto,
            schedule: Schedule::Os,
            line_use: false,
            objects: false,
            allocators: Vec::new(),
            timeline: None,
            rseq_commit: false,
            client_requests: None,
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
    /// Fast mode cannot run in this process.
    #[error("fast capture mode is not available here: {0} (use --mode trap)")]
    FastMode(&'static str),
    /// A reserve needs more memory than the process can have
    /// ([`check_reserves`]): the message names it and the figures.
    #[error("{0}")]
    Reserve(String),
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
    /// The trace file could not be opened (before the capture starts).
    #[error("opening trace {path}: {source}")]
    TraceOpen {
        /// The path written while the capture runs.
        path: PathBuf,
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
    /// A thread of the program confined its system calls with seccomp
    /// since the library was loaded: the engine's own calls could be killed.
    #[error(
        "the program installed a seccomp filter (thread {tid}, {mode} mode): \
         the capture engine's own system calls could be killed by it, so no capture is started"
    )]
    Seccomp {
        /// The confined thread.
        tid: u32,
        /// `strict` or `filter`.
        mode: &'static str,
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

/// What each reserve costs at most, in bytes (an estimate from the tables'
/// entry sizes): what its table maps once it holds that many entries
/// (`counters`: counters per record, `trace`: whether a trace is kept). An
/// unbounded table (`usize::MAX`) costs 0 here: it grows within the
/// memory budget. Saturating: an absurd reserve costs `u128::MAX`-ish,
/// never overflows.
pub fn reserve_costs(
    r: &Reserves,
    counters: usize,
    trace: bool,
) -> [(&'static str, usize, u128); 6] {
    use std::mem::size_of;
    let n = |v: usize| if v == usize::MAX { 0 } else { v as u128 };
    // Open-addressing tables hold twice the entries, rounded up to a power
    // of two, of 4-byte slots.
    let slots = |v: usize| {
        n(v).saturating_mul(2)
            .max(1)
            .next_power_of_two()
            .saturating_mul(4)
    };
    let frame = 16u128;
    // Threads traced at once are clamped as `prepare` clamps them; their
    // frames are counted under `depth`.
    let threads = r.threads.clamp(1, MAX_SELECTED);
    [
        (
            "instructions",
            r.instructions,
            n(r.instructions)
                .saturating_mul(n(size_of::<crate::tables::Decoded>() + 8))
                .saturating_add(slots(r.instructions)),
        ),
        (
            "stacks",
            r.stacks,
            n(r.stacks)
                .saturating_mul(n(size_of::<crate::tables::StackEntry>()))
                .saturating_add(slots(r.stacks)),
        ),
        (
            "records",
            r.records,
            n(r.records)
                .saturating_mul(16 + 8 * n(counters))
                .saturating_add(slots(r.records)),
        ),
        ("threads", r.threads, n(threads).saturating_mul(128)),
        (
            "depth",
            r.depth,
            n(r.depth)
                .saturating_mul(frame)
                .saturating_mul(threads as u128),
        ),
        (
            "trace",
            r.trace,
            // The chunk buffer a streamed trace is encoded in: its
            // records' worst case, capped at the largest chunk.
            if trace {
                n(coldcache_cctrace::stream::chunk_buffer_bytes(r.trace))
            } else {
                0
            },
        ),
    ]
}

/// The memory a capture's tables may take: the address-space limit
/// (`ulimit -v`) if one is set, else the machine's RAM and swap.
pub fn memory_limit() -> Option<(u128, &'static str)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a live local.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0
        && lim.rlim_cur != libc::RLIM_INFINITY
    {
        return Some((
            u128::from(lim.rlim_cur),
            "the address-space limit (ulimit -v)",
        ));
    }
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = |key: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u128>().ok())
    };
    let total = kib("MemTotal:")?.saturating_add(kib("SwapTotal:").unwrap_or(0));
    Some((total.saturating_mul(1024), "this machine's RAM and swap"))
}

use crate::grow::human;

/// The share of [`memory_limit`] the capture's tables may take by default.
pub const DEFAULT_MEMORY_SHARE: u128 = 4;

/// The budget the capture's growing tables share ([`Reserves::memory`]):
/// the one asked for (`--memory`), else a quarter of the address-space
/// limit or of the machine's RAM and swap (4 GiB where neither is known).
/// With what it is, for messages.
pub fn memory_budget(r: &Reserves) -> (u128, String) {
    if r.memory != 0 {
        return (
            r.memory as u128,
            format!("--memory {}", human(r.memory as u128)),
        );
    }
    match memory_limit() {
        Some((limit, what)) => (
            limit / DEFAULT_MEMORY_SHARE,
            format!("the default, a quarter of {what}"),
        ),
        None => (
            4 << 30,
            "the default where the machine's memory is unknown".into(),
        ),
    }
}

/// Refuses, before anything is allocated, a memory budget larger than the
/// process can have ([`memory_limit`]) and a reserve whose table (or the
/// trace's buffer, made up front) could not fit in the budget at its full
/// size (see [`reserve_costs`]): the error names the setting, its value
/// and the figures, instead of a capture that could only be cut.
pub fn check_reserves(
    r: &Reserves,
    cache: &coldcache_sim::HierarchyConfig,
    trace: bool,
) -> Result<(), String> {
    if r.memory != 0 {
        if let Some((limit, what)) = memory_limit() {
            if r.memory as u128 > limit {
                return Err(format!(
                    "a memory budget of {} is more than {what} ({}): use a smaller --memory",
                    human(r.memory as u128),
                    human(limit)
                ));
            }
        }
    }
    let (budget, how) = memory_budget(r);
    let counters = coldcache_sim::CounterLayout::new(cache.levels.len()).len();
    let costs = reserve_costs(r, counters, trace);
    let Some((name, value, cost)) = costs
        .iter()
        .copied()
        .filter(|c| c.2 > budget)
        .max_by_key(|c| c.2)
    else {
        return Ok(());
    };
    Err(format!(
        "reserve {name}={value} needs about {} of memory, more than the capture's memory \
         budget ({}, {how}): use a smaller --reserve {name} or a larger --memory",
        human(cost),
        human(budget)
    ))
}

/// Reserve sizes parsed from `key=value,...` (`instructions`, `stacks`,
/// `records`, `threads`, `depth`, `trace`; `memory`, the tables' budget,
/// as a [`parse_size`]).
pub fn parse_reserves(spec: &str, mut r: Reserves) -> Result<Reserves, String> {
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("reserve `{part}` is not key=value"))?;
        if k.trim() == "memory" {
            r.memory = parse_size(v).map_err(|e| format!("memory: {e}"))?;
            continue;
        }
        let n: usize = v
            .trim()
            .parse()
            .map_err(|_| format!("reserve `{k}`: `{v}` is not a number"))?;
        if n == 0 {
            return Err(format!("reserve `{k}` must be at least 1"));
        }
        match k.trim() {
            "instructions" => r.instructions = n,
            "stacks" => r.stacks = n,
            "records" => r.records = n,
            "threads" => r.threads = n,
            "depth" => r.depth = n,
            "trace" => r.trace = n,
            other => {
                return Err(format!(
                    "unknown reserve `{other}` (instructions, stacks, records, threads, depth, \
                     trace, memory)"
                ))
            }
        }
    }
    Ok(r)
}

/// A memory budget in bytes (`--memory`, `--reserve memory=`): a size as
/// cache sizes are written (`coldcache_config_slim::parse_size`: a whole
/// number of bytes, binary units up to `T`), at least 1 MiB.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let bytes = coldcache_config_slim::parse_size(s).map_err(|e| e.to_string())?;
    let bytes = usize::try_from(bytes).map_err(|_| format!("{s:?} is too large"))?;
    if bytes < 1 << 20 {
        return Err(format!("{s:?} is less than 1M"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Budgets are read as cache sizes are (hand-computed bytes), and
    /// under 1 MiB is refused by name.
    #[test]
    fn memory_budgets_are_sizes_of_at_least_one_mebibyte() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        for (text, why) in [
            ("512K", "\"512K\" is less than 1M"),
            ("0.5M", "\"0.5M\" is less than 1M"),
            ("1.3K", "\"1.3K\" is not a whole number of bytes"),
            ("4Q", "\"4Q\" is not a size (expected bytes"),
        ] {
            let e = parse_size(text).unwrap_err();
            assert!(e.starts_with(why), "{text}: {e}");
        }
    }

    fn jaguar() -> coldcache_sim::HierarchyConfig {
        coldcache_sim::presets::by_name("jaguar").expect("the jaguar preset")
    }

    /// The default reserves fit any machine this runs on; each absurd one
    /// is refused by name, with its figure (the hand-computed cost of
    /// 10^14 records of at least 16 + 8 counters' bytes: over 2 PiB).
    #[test]
    fn absurd_reserves_are_refused_by_name_and_defaults_fit() {
        let cfg = jaguar();
        check_reserves(&Reserves::default(), &cfg, true).expect("the defaults fit");
        for knob in ["instructions", "stacks", "records", "depth"] {
            let mut r = Reserves::default();
            let big = 100_000_000_000_000usize;
            match knob {
                "instructions" => r.instructions = big,
                "stacks" => r.stacks = big,
                "records" => r.records = big,
                _ => r.depth = big,
            }
            let e = check_reserves(&r, &cfg, true).expect_err(knob);
            assert!(
                e.starts_with(&format!("reserve {knob}={big} needs about "))
                    && e.contains("more than the capture's memory budget")
                    && e.ends_with(&format!(
                        "use a smaller --reserve {knob} or a larger --memory"
                    )),
                "{e}"
            );
            // The same bound fits a budget that holds it.
            r.memory = usize::MAX;
            assert!(
                check_reserves(&r, &cfg, true).is_err(),
                "more than the machine"
            );
        }
        // A bound within the budget is accepted: 1000 records of a few
        // dozen bytes under a 1 MiB budget.
        let r = Reserves {
            records: 1000,
            memory: 1 << 20,
            ..Reserves::default()
        };
        check_reserves(&r, &cfg, false).expect("1000 records fit 1 MiB");
        // ... and refused under a budget smaller than its figure.
        let r = Reserves {
            records: 100_000,
            memory: 1 << 20,
            ..Reserves::default()
        };
        let e = check_reserves(&r, &cfg, false).expect_err("100000 records in 1 MiB");
        assert!(e.contains("--memory 1.0 MiB"), "{e}");
        // The default budget is a quarter of the machine's memory.
        if let Some((limit, _)) = memory_limit() {
            assert_eq!(memory_budget(&Reserves::default()).0, limit / 4);
        }
        let costs = reserve_costs(
            &Reserves {
                records: 100_000_000_000_000,
                ..Reserves::default()
            },
            8,
            false,
        );
        let records = costs.iter().find(|c| c.0 == "records").unwrap().2;
        assert!(records >= 100_000_000_000_000u128 * (16 + 64), "{records}");
        // No trace asked for: the trace reserve costs nothing.
        assert_eq!(costs.iter().find(|c| c.0 == "trace").unwrap().2, 0);
    }

    /// Regression: the trace reserve was costed at 36 bytes a record with
    /// no cap, so `--reserve trace=2000000000` was refused as needing 72
    /// GB, while the chunk buffer it sizes never exceeds one chunk (64
    /// MiB): it costs what the buffer takes, by hand 16 * 36 + the chunk
    /// header and four thread definitions for a small reserve.
    #[test]
    fn the_trace_reserve_costs_its_buffer_capped_at_one_chunk() {
        let cost = |trace: usize| {
            let r = Reserves {
                trace,
                ..Reserves::default()
            };
            reserve_costs(&r, 8, true)
                .iter()
                .find(|c| c.0 == "trace")
                .unwrap()
                .2
        };
        assert_eq!(cost(usize::MAX), 64 << 20);
        assert_eq!(cost(2_000_000_000), 64 << 20);
        let small = cost(1);
        assert!(small > 16 * 36 && small < 16 * 36 + 200, "{small}");
        let mut r = Reserves {
            trace: usize::MAX,
            ..Reserves::default()
        };
        check_reserves(&r, &jaguar(), true).expect("any trace reserve fits");
        r.trace = 0;
        check_reserves(&r, &jaguar(), true).expect("a zero trace reserve fits");
    }
}
