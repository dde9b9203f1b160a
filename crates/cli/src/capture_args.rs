//! The options `record` and `attach` share: the cache, the window's
//! shape, what the capture keeps and how it runs. One clap group,
//! flattened into both (`RecordArgs`, `AttachArgs`), so an option and its
//! help are written once; each command keeps what only it has or what it
//! reads otherwise (`--threads`' default, `--function`'s search, `--all`,
//! `--duration`, the program or the pid). Both turn these into the one
//! `coldcache_capture::settings::Settings`.

use anyhow::{Context, Result};
use clap::Args;
use coldcache_sim::HierarchyConfig;
use std::path::PathBuf;

/// The options of a capture that `record` and `attach` share.
#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Cache configuration: a preset name (`coldcache presets`), `host`, or
    /// a TOML file; the default, as for `sim`, is Valgrind's model.
    #[arg(long, default_value = crate::cache_choice::DEFAULT_CACHE, value_name = "PRESET|FILE")]
    pub cache: String,
    /// Cachegrind-style I1 geometry override, e.g. 32768,8,64 (as `sim`).
    #[arg(long = "I1", value_name = "SIZE,ASSOC,LINE")]
    pub i1: Option<String>,
    /// Cachegrind-style D1 geometry override.
    #[arg(long = "D1", value_name = "SIZE,ASSOC,LINE")]
    pub d1: Option<String>,
    /// Cachegrind-style LL (last level) geometry override.
    #[arg(long = "LL", value_name = "SIZE,ASSOC,LINE")]
    pub ll: Option<String>,
    /// Where to write the dump (checked before the capture starts; under
    /// `attach` the process writes it and needs the right to). An earlier
    /// file there is kept as PATH.old; further captures of the run go to
    /// NAME.2.EXT, NAME.3.EXT, ...
    #[arg(short, long, default_value = "coldcache.ccdump")]
    pub output: PathBuf,
    /// Map a thread to a simulated core: `TID=CORE` (repeatable); other
    /// threads are assigned round-robin.
    #[arg(long = "thread-core", value_name = "TID=CORE")]
    pub thread_core: Vec<String>,
    /// With --function: capture only the Nth call (1-based; under `attach`
    /// counted from the attach).
    #[arg(
        long,
        value_name = "N",
        requires = "function",
        conflicts_with = "calls"
    )]
    pub call: Option<u64>,
    /// With --function: capture the first K calls (under `attach`, the next
    /// K).
    #[arg(long, value_name = "K", requires = "function")]
    pub calls: Option<u64>,
    /// With --function --call N: warm the cache with the K calls right
    /// before call N (`all`: every earlier call). They go through the
    /// simulator, traced like the captured call, and count nowhere: the
    /// dump holds call N alone, on the cache those calls left (its meta
    /// `warm` says how it was warmed). Without it every capture starts
    /// from an empty cache.
    #[arg(long, value_name = "K|all", requires = "call")]
    pub warm_calls: Option<String>,
    /// The signal used by --signal (and `coldcache trigger`): a name
    /// (`USR2`, `SIGUSR1`, `RTMIN+3`) or a number. Signals that cannot be
    /// caught, that the capture engine uses, or that report the program's
    /// own faults are refused.
    #[arg(long, value_name = "SIGNAL", default_value = "USR2")]
    pub trigger_signal: String,
    /// Stop the capture after this many instructions.
    #[arg(long, value_name = "N")]
    pub instructions: Option<u64>,
    /// Also write every access, in order, with its instruction, thread and
    /// call stack, to this cctrace file (zstd-compressed when FILE ends in
    /// `.zst`); `coldcache sim FILE --cache X -o DUMP` re-simulates it
    /// into a dump for another cache.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Bounds on the capture's tables, for those who want them:
    /// `instructions=N,stacks=N,records=N,threads=N,depth=N,trace=N`
    /// (without one, a table grows within --memory).
    #[arg(long, value_name = "KEY=N,...")]
    pub reserve: Option<String>,
    /// The memory the capture's tables (instructions, stacks, records,
    /// call frames) may take together as they grow: a size such as `512M`
    /// or `8G`. Default: a quarter of the machine's RAM and swap, or of
    /// `ulimit -v` when that is lower. A capture that needs more stops
    /// there, says which table and how much more, writes its dump and the
    /// command exits with a failure.
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// Leave the dump unresolved (by default its addresses are resolved to
    /// names, lines and instruction bytes once the capture ends, while the
    /// binaries are still there; see `coldcache resolve`).
    #[arg(long)]
    pub no_resolve: bool,
    /// Resolve, but do not embed the source files' text in the dump (see
    /// `coldcache resolve --no-sources`).
    #[arg(long)]
    pub no_sources: bool,
    /// How the simulator sees traced threads interleave: `os` (the
    /// default) as the operating system runs them, which differs from run
    /// to run; `serial[=QUANTUM]` one traced thread at a time, in turns of
    /// QUANTUM instructions (default 10000) handed on in thread-id order,
    /// a turn given up at a system call that may block: two runs of a
    /// deterministic program give the same dump (docs/capture.md). Also
    /// for captures the program starts with the C API.
    #[arg(long, value_name = "os|serial[=QUANTUM]", default_value = "os")]
    pub schedule: String,
    /// Measure line utilisation: the bytes of each line fetched into the
    /// first data level used before it left (the data views' `fetched` and
    /// `used/64`). It costs about 1.3x in the window's simulation, so it
    /// is asked for (docs/data-view.md).
    #[arg(long)]
    pub line_use: bool,
    /// Track objects: the allocator observed (malloc, new, free, ..) and
    /// each data access attributed to its heap block's allocation site,
    /// else to the mapping it lies in (a thread's stack, the heap, a
    /// module's data): `report --view data`'s objects (docs/data-view.md).
    /// Under `attach`, blocks allocated before the attach go by mapping.
    #[arg(long)]
    pub objects: bool,
    /// An allocator of the program's own to observe as `--objects` observes
    /// malloc (a pool, an arena, an engine's allocator; implies
    /// `--objects`): NAME=KIND, KIND one of malloc (size in the first
    /// argument), calloc, realloc, free (block in the first argument),
    /// size2 (size in the second: a member function `alloc(this, size)`),
    /// free2 (block in the second). Repeatable; its sites are named by it.
    #[arg(long = "allocator", value_name = "NAME=KIND")]
    pub allocators: Vec<String>,
    /// Record the order of the window: per thread, each call entered and
    /// returned from with the counters since the previous one, for
    /// `export --format perfetto` (a timeline; docs/export.md).
    #[arg(long)]
    pub timeline: bool,
}

impl CaptureArgs {
    /// The cache configuration to capture with (`--cache` and the
    /// geometry overrides, resolved and checked for a capture), and the
    /// name the dump carries (the overrides are part of it).
    pub fn cache(&self) -> Result<(HierarchyConfig, String)> {
        let cfg = crate::cache_choice::cache_config(&self.cache, &self.i1, &self.d1, &self.ll)
            .with_context(|| format!("cache configuration {}", self.cache))?;
        crate::cache_choice::refuse_miss_classes(
            &cfg,
            &self.cache,
            crate::cache_choice::MISS_CLASSES_OF_A_CAPTURE,
        )?;
        let name = crate::record_cmd::cache_name(&self.cache, [&self.i1, &self.d1, &self.ll]);
        Ok((cfg, name))
    }
}
