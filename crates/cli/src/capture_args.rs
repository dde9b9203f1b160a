//! The options `record` and `attach` share: the cache, the window's
//! shape, what the capture keeps and how it runs. One clap group,
//! flattened into both (`RecordArgs`, `AttachArgs`), so an option and its
//! help are written once; each command keeps what only it has or what it
//! reads otherwise (`--threads`' default, `--function`'s search, `--all`,
//! `--duration`, the program or the pid). Both turn these into the one
//! `coldcache_capture::settings::Settings`: [`CaptureArgs::check`] checks
//! what they share before the program runs, in one order, and the
//! functions below turn single options into the library's settings
//! (reserves, the call window, allocators, the rseq policy).

use anyhow::{bail, Context, Result};
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
        let name = cache_name(&self.cache, [&self.i1, &self.d1, &self.ll]);
        Ok((cfg, name))
    }

    /// Checks what `record` and `attach` share, before the program runs
    /// (or is attached to), in this order: the cache, `-o` and `--trace`
    /// (not standard output, writable: the whole run is lost if the dump
    /// cannot be written at its end), the reserves, the trigger signal,
    /// the schedule and the thread cores.
    pub(crate) fn check(&self) -> Result<Checked> {
        let (cfg, cache_name) = self.cache()?;
        // The library links no configuration parser: it gets the resolved
        // configuration as JSON (and writes its TOML into the dump itself).
        let cache_json = serde_json::to_string(&cfg).context("cache configuration as JSON")?;
        crate::refuse_stdout("-o", &self.output)?;
        if let Some(t) = &self.trace {
            crate::refuse_stdout("--trace", t)?;
        }
        let cwd = std::env::current_dir()?;
        let output = cwd.join(&self.output);
        crate::output_check::check_output(&output).context("-o")?;
        let trace = self.trace.as_ref().map(|t| cwd.join(t));
        if let Some(t) = &trace {
            crate::output_check::check_output(t).context("--trace")?;
        }
        let reserves = reserves(&self.reserve, &self.memory, &cfg, trace.is_some())?;
        let trigger_signal =
            crate::trigger_cmd::trigger_signal(&self.trigger_signal).context("--trigger-signal")?;
        check_schedule(&self.schedule)?;
        for tc in &self.thread_core {
            let ok = tc
                .split_once('=')
                .is_some_and(|(t, c)| t.parse::<u32>().is_ok() && c.parse::<u32>().is_ok());
            if !ok {
                bail!("--thread-core {tc}: expected TID=CORE");
            }
        }
        Ok(Checked {
            cache_name,
            cache_json,
            output,
            trace,
            reserves,
            trigger_signal,
        })
    }
}

/// What [`CaptureArgs::check`] found and resolved.
pub(crate) struct Checked {
    /// The name the dump carries (the overrides are part of it).
    pub cache_name: String,
    /// The configuration as JSON, for the library.
    pub cache_json: String,
    /// `-o`, absolute (joined to the working directory).
    pub output: PathBuf,
    /// `--trace`, absolute.
    pub trace: Option<PathBuf>,
    /// `--reserve` and `--memory` as the library's reserves setting.
    pub reserves: Option<String>,
    /// `--trigger-signal`'s number.
    pub trigger_signal: i32,
}

/// Resolves a program name like the shell does.
/// `COLDCACHE_RSEQ_COMMIT` for the library: "1" when the running kernel's
/// configuration (`/proc/config.gz`, else `/boot/config-RELEASE`) is
/// readable and does not check rseq at every system call's exit
/// (`CONFIG_DEBUG_RSEQ`, or since the reworked rseq of 6.19
/// `CONFIG_RSEQ_DEBUG_DEFAULT_ENABLE` or `rseq_debug` on the kernel's
/// command line, under which the trap engine's armed commits would kill
/// the program; `capture/src/rseq.rs`), else "0".
pub(crate) fn rseq_commit_setting() -> &'static str {
    use std::io::Read;
    let mut config = String::new();
    let read = std::fs::File::open("/proc/config.gz").is_ok_and(|f| {
        flate2::read::GzDecoder::new(f)
            .read_to_string(&mut config)
            .is_ok()
    }) || std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|r| std::fs::read_to_string(format!("/boot/config-{}", r.trim())).ok())
        .map(|c| config = c)
        .is_some();
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let debug_boot = cmdline
        .split_whitespace()
        .any(|w| w == "rseq_debug" || w.starts_with("rseq_debug=") && w != "rseq_debug=0");
    if read
        && config.contains("\nCONFIG_RSEQ=y")
        && !config.contains("\nCONFIG_DEBUG_RSEQ=y")
        && !config.contains("\nCONFIG_RSEQ_DEBUG_DEFAULT_ENABLE=y")
        && !debug_boot
    {
        "1"
    } else {
        "0"
    }
}

/// The `--reserve` and `--memory` of `record` or `attach` as the library's
/// `COLDCACHE_RESERVES`, checked (what the tables may cost) before the
/// program runs.
pub(crate) fn reserves(
    reserve: &Option<String>,
    memory: &Option<String>,
    cfg: &coldcache_sim::HierarchyConfig,
    trace: bool,
) -> Result<Option<String>> {
    let mut r = coldcache_capture::Reserves::default();
    if let Some(spec) = reserve {
        r = coldcache_capture::capi::parse_reserves(spec, r)
            .map_err(anyhow::Error::msg)
            .context("--reserve")?;
    }
    if let Some(m) = memory {
        r.memory = coldcache_capture::capi::parse_size(m)
            .map_err(anyhow::Error::msg)
            .context("--memory")?;
    }
    let what = if reserve.is_some() {
        "--reserve"
    } else {
        "--memory"
    };
    coldcache_capture::check_reserves(&r, cfg, trace)
        .map_err(anyhow::Error::msg)
        .context(what)?;
    Ok(match (reserve, memory.is_some().then_some(r.memory)) {
        (None, None) => None,
        (Some(s), None) => Some(s.clone()),
        (None, Some(m)) => Some(format!("memory={m}")),
        (Some(s), Some(m)) => Some(format!("{s},memory={m}")),
    })
}

/// The name a dump carries for `--cache CACHE` with the `--I1/--D1/--LL`
/// overrides `geometry` (they are part of it), as `record` and `attach`
/// name it.
pub(crate) fn cache_name(cache: &str, geometry: [&Option<String>; 3]) -> String {
    ["--I1", "--D1", "--LL"]
        .into_iter()
        .zip(geometry)
        .filter_map(|(o, v)| v.as_ref().map(|v| format!(" {o} {v}")))
        .fold(cache.to_string(), |name, o| name + &o)
}

/// `--schedule`, checked before the program runs (`record`, `attach`).
pub(crate) fn check_schedule(schedule: &str) -> Result<()> {
    if coldcache_capture::Schedule::parse(schedule).is_none() {
        bail!(
            "--schedule {schedule}: expected `os`, `serial` or `serial=QUANTUM` (instructions per turn, 1 or more)"
        );
    }
    Ok(())
}

/// The calls a `--function` capture takes, `(first, count)`, from `--call
/// N` / `--calls K` (default: the first call), with `--warm-calls`
/// checked against them (`record`, `attach`).
pub(crate) fn call_window(
    call: Option<u64>,
    calls: Option<u64>,
    warm_calls: Option<&str>,
) -> Result<(u64, u64)> {
    let (first, count) = match (call, calls) {
        (Some(n), _) => (n, 1),
        (None, Some(k)) => (1, k),
        (None, None) => (1, 1),
    };
    if first == 0 || count == 0 {
        bail!("--call and --calls count from 1");
    }
    if let Some(w) = warm_calls {
        let ok = w == "all" || w.parse::<u64>().is_ok_and(|k| k > 0);
        if !ok {
            bail!("--warm-calls {w}: expected a number of calls (1 or more) or `all`");
        }
        if first == 1 {
            bail!(
                "--warm-calls warms the cache with the calls before --call N; \
                 with --call 1 there are none"
            );
        }
    }
    Ok((first, count))
}

/// `--allocator NAME=KIND`s as `COLDCACHE_ALLOCATORS` (`None` for none):
/// each kind checked, each name found (`resolve`: in the program and its
/// libraries, as `--function` names are) before the run.
pub(crate) fn allocator_setting(
    specs: &[String],
    resolve: impl Fn(&str) -> Result<crate::record_function::Resolved>,
) -> Result<Option<String>> {
    use coldcache_capture::objects::USER_KINDS;
    let mut out = Vec::new();
    for spec in specs {
        let kinds = || {
            USER_KINDS
                .iter()
                .map(|k| format!("{} ({})", k.0, k.2))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some((name, kind)) = spec.rsplit_once('=') else {
            bail!(
                "--allocator {spec}: expected NAME=KIND, KIND one of {}",
                kinds()
            );
        };
        if !USER_KINDS.iter().any(|k| k.0 == kind) {
            bail!(
                "--allocator {spec}: unknown kind {kind:?}; one of {}",
                kinds()
            );
        }
        if ["mmap", "mmap64", "munmap", "mremap"].contains(&name) {
            bail!(
                "--allocator {spec}: {name} is observed already, as making or removing mappings \
                 (each mapping made in the capture is an object of its own)"
            );
        }
        let r = resolve(name)?;
        if let Some(note) = &r.note {
            coldcache_fsio::say!("coldcache: {note}");
        }
        out.push(format!(
            "{}\x1f{kind}\x1f{}\x1f{:x}",
            r.raw,
            r.module.display(),
            r.address
        ));
    }
    Ok((!out.is_empty()).then(|| out.join("\x1e")))
}
