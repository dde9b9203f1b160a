//! What a capture is asked to do and what it answers: the options (threads,
//! trigger, reserves, output), the errors that keep a capture from starting
//! or stopping, and the summary of a finished capture. Plain data, no
//! behaviour beyond describing itself.

pub use crate::account::Reserves;
use coldcache_sim::HierarchyConfig;
use std::path::PathBuf;

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
