//! `coldcache record`: run a program with `libcoldcache.so` preloaded and a
//! capture armed by environment variables (the library's `preload` module
//! reads them), then summarise the dump it wrote. Also `coldcache trigger`.
//!
//! Before the program starts: `-o`/`--trace` are checked writable, the
//! cache configuration is resolved here and handed over as JSON (the
//! library links no parser), `--function` is resolved to a file and ELF
//! address (`record_function.rs`). While it runs: SIGINT, SIGTERM, SIGHUP
//! and SIGQUIT go on to the program (Ctrl-C first asks the library to stop
//! the capture with the stop request signal), progress is read from
//! outside (`record_progress.rs`). After: the library's manifest lists the
//! files written; each dump is summarised (`report_cmd::load_by_instruction`)
//! and resolved (`resolve_cmd::resolve_file`), a trace named `.zst` is
//! compressed ([`compress_if_zst`]), and `record` exits non-zero when no
//! capture was made. [`find_library`] (its canonical path) serves
//! `attach` and `zones record` too.

use crate::capture_args::CaptureArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use coldcache_capture::settings::{CacheSetting, Settings, TriggerSetting};
use coldcache_dump::{Dump, Side};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Arguments of `coldcache record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Threads to trace: `all`, `caller` (the thread that starts the
    /// capture), thread ids `1234,1235`, or names `name:render,audio`.
    /// With `--function`/`--all`: the threads traced while the function
    /// runs on the thread that called it (chosen as each window starts).
    #[arg(long, default_value = "caller")]
    threads: String,
    /// Capture calls of this function, from entry to return (no
    /// recompilation: a breakpoint is planted at its entry). Found before
    /// the program runs, in it and the libraries it links: a C name, a
    /// mangled name, a demangled C++/Rust name with or without its
    /// signature (`ns::Class::method`), its end after `::`, or a wildcard
    /// (`count_and_sort*`); unknown or ambiguous names are refused.
    #[arg(long, value_name = "SYMBOL", conflicts_with_all = ["signal", "all"])]
    function: Option<String>,
    /// With --function: a name not found in the program or the libraries
    /// it links is looked for (its exact symbol name, static functions
    /// included) in each library the program opens with `dlopen`, and the
    /// breakpoint planted there when it is loaded.
    #[arg(long, requires = "function")]
    in_dlopen: bool,
    /// Start (and stop) a capture when `coldcache trigger PID` signals the program.
    #[arg(long, conflicts_with = "all")]
    signal: bool,
    /// Capture the whole program from `main` to its return.
    #[arg(long)]
    all: bool,
    /// Print progress on stderr while capturing (instructions, rate,
    /// elapsed time; with --instructions, the share done and the time
    /// left). The default when stderr is a terminal. `record` reads the
    /// capture's counter from outside: progress changes nothing the
    /// capture counts.
    #[arg(long, overrides_with = "no_progress")]
    progress: bool,
    /// No progress (the default when stderr is not a terminal).
    #[arg(long, overrides_with = "progress")]
    no_progress: bool,
    /// How traced threads are followed: `auto` (the default) is `fast`
    /// where this process allows it, else `trap`; `trap` single-steps every
    /// instruction (the oracle); `fast` runs translated copies of the
    /// program's code that record what the access model needs, with the
    /// trap engine for what the translator refuses; `verify` is fast mode
    /// with every translated instruction also single-stepped and checked
    /// against the trap model (for tests; docs/capture.md).
    #[arg(
        long,
        value_name = "MODE",
        env = "COLDCACHE_MODE",
        default_value = "auto",
        value_parser = ["auto", "trap", "fast", "verify"]
    )]
    mode: String,
    /// Honour Valgrind's client requests (`callgrind.h`'s
    /// START/STOP_INSTRUMENTATION, TOGGLE_COLLECT, ZERO_STATS and
    /// `cachegrind.h`'s START/STOP): instructions count while collection
    /// and instrumentation are on. STATES: `collect=yes|no,instr=yes|no`
    /// at the start (default both yes). Without it requests are only
    /// counted (docs/valgrind.md).
    #[arg(long, value_name = "STATES", num_args = 0..=1, default_missing_value = "1")]
    client_requests: Option<String>,
    /// What `record` and `attach` share (after what only
    /// `record` has, in the help).
    #[command(flatten)]
    pub(crate) capture: CaptureArgs,
    /// The program and its arguments (after `--`, or without it: every
    /// word from the program on is the program's).
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM ARGS")]
    program: Vec<String>,
    /// Say nothing of the dumps written but warnings and errors (`coldcache
    /// valgrind`, which prints Valgrind's own lines instead).
    #[arg(skip)]
    pub(crate) quiet: bool,
}

/// The traced program exited with a failure code (already reported).
#[derive(Debug)]
pub struct ChildFailed(pub u8);

impl std::fmt::Display for ChildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the program exited with status {}", self.0)
    }
}

impl std::error::Error for ChildFailed {}

/// Finds `libcoldcache.so` for `record` and `zones record`:
/// `$COLDCACHE_LIB`, then next to this executable, then in its parent
/// directory (`target/release/deps` layouts). The path is made canonical
/// (absolute): the loader resolves `LD_PRELOAD` in the program's working
/// directory, which may not be ours. (Of the two copies this replaces,
/// `record`'s canonicalized and `zones record`'s did not; `zones record`'s
/// told a directory from a missing file.)
pub fn find_library() -> Result<PathBuf> {
    library_from(std::env::var_os("COLDCACHE_LIB"), std::env::current_exe())
}

fn library_from(env: Option<std::ffi::OsString>, exe: std::io::Result<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = env {
        let p = PathBuf::from(p);
        if p.is_file() {
            return p
                .canonicalize()
                .with_context(|| format!("COLDCACHE_LIB={}", p.display()));
        }
        if p.exists() {
            bail!("COLDCACHE_LIB={} is not a file", p.display());
        }
        bail!("COLDCACHE_LIB={} does not exist", p.display());
    }
    let exe = exe.context("locating the coldcache executable")?;
    for dir in exe.ancestors().skip(1).take(2) {
        let p = dir.join("libcoldcache.so");
        if p.is_file() {
            return p
                .canonicalize()
                .with_context(|| format!("locating {}", p.display()));
        }
    }
    bail!(
        "libcoldcache.so was not found next to {} (build it with \
         `cargo build --release -p libcoldcache`, or set COLDCACHE_LIB)",
        exe.display()
    )
}

/// Resolves a program name like the shell does.
/// `COLDCACHE_RSEQ_COMMIT` for the library: "1" when the running kernel's
/// configuration (`/proc/config.gz`, else `/boot/config-RELEASE`) is
/// readable and does not check rseq at every system call's exit
/// (`CONFIG_DEBUG_RSEQ`, under which the trap engine's armed commits would
/// kill the program; `capture/src/rseq.rs`), else "0".
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
    if read && config.contains("\nCONFIG_RSEQ=y") && !config.contains("\nCONFIG_DEBUG_RSEQ=y") {
        "1"
    } else {
        "0"
    }
}

pub(crate) fn find_program(name: &str) -> Result<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        if p.is_dir() {
            bail!("program {name} is a directory, not a program");
        }
        if !p.is_file() {
            bail!("program {name} does not exist");
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!("program {name} was not found on PATH")
}

/// Refuses programs the library cannot be preloaded into. Returns whether
/// `path` is an ELF program (not a `#!` script, whose interpreter is the
/// program that will run).
fn check_program(path: &Path) -> Result<bool> {
    use object::{Object, ObjectSegment};
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if data.starts_with(b"#!") {
        return Ok(false); // a script: its interpreter is checked by the loader
    }
    let file = object::File::parse(&*data)
        .with_context(|| format!("{} is not an executable this tool can read", path.display()))?;
    if file.architecture() != object::Architecture::X86_64 {
        bail!("{} is not an x86-64 program", path.display());
    }
    let dynamic = file
        .segments()
        .any(|s| s.name().ok().flatten() == Some("PT_INTERP"))
        || data.windows(16).any(|w| w.starts_with(b"/lib64/ld-linux"));
    if !dynamic {
        bail!(
            "{} is statically linked, so libcoldcache.so cannot be preloaded into it; \
             link the program with -lcoldcache and call coldcache_start/coldcache_stop \
             (include/coldcache.h)",
            path.display()
        );
    }
    Ok(true)
}

/// Refuses an output path the capture could not be written to, naming
/// the path and the reason: a link planted by another user in a sticky
/// directory, a directory, a link to nothing, a missing
/// parent directory, a parent that is not a directory or where no file can
/// be created (permissions, a read-only file system). A device or FIFO is
/// written through and accepted. The check creates (and removes) a
/// temporary file next to the target, as the atomic write at the end does.
pub fn check_output(path: &Path) -> Result<()> {
    // A link another user planted in a sticky directory is not followed
    // (`coldcache_fsio::check_link`): refused before the program runs.
    coldcache_fsio::check_link(path)?;
    let meta = std::fs::metadata(path);
    if let Ok(m) = &meta {
        if m.is_dir() {
            bail!("{} is a directory, not a file to write", path.display());
        }
        if !m.is_file() {
            return Ok(()); // a device or FIFO: written in place
        }
    } else if std::fs::symlink_metadata(path).is_ok() {
        bail!(
            "{} is a symbolic link to nothing ({})",
            path.display(),
            std::fs::read_link(path).unwrap_or_default().display()
        );
    }
    // The file that will be replaced: a link's target.
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = match real.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "cannot write {}: the directory {} does not exist",
                path.display(),
                dir.display()
            )
        }
        Err(e) => bail!("cannot write {}: {}: {e}", path.display(), dir.display()),
        Ok(m) if !m.is_dir() => bail!(
            "cannot write {}: {} is not a directory",
            path.display(),
            dir.display()
        ),
        Ok(_) => {}
    }
    tempfile::Builder::new()
        .prefix(".coldcache-check")
        .tempfile_in(&dir)
        .map(drop)
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot write {}: no file can be created in {}: {}",
                path.display(),
                dir.display(),
                e.raw_os_error().map_or_else(
                    || std::io::Error::from(e.kind()),
                    std::io::Error::from_raw_os_error
                )
            )
        })
}

pub fn run(args: RecordArgs) -> Result<()> {
    run_listing(args, &mut Vec::new())
}

/// [`run`], also saying in `dumps` every dump the library's manifest lists
/// as written, in order (a profile cut into parts by client requests has
/// one a part), whatever the outcome.
pub(crate) fn run_listing(args: RecordArgs, dumps: &mut Vec<PathBuf>) -> Result<()> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        bail!("coldcache record needs Linux on x86-64");
    }
    let lib = find_library()?;
    let program = find_program(&args.program[0])?;
    let elf = check_program(&program)?;
    let (cfg, cache_name) = args.capture.cache()?;
    // The library links no configuration parser: it gets the resolved
    // configuration as JSON (and writes its TOML into the dump itself).
    let cache_json = serde_json::to_string(&cfg).context("cache configuration as JSON")?;
    crate::refuse_stdout("-o", &args.capture.output)?;
    if let Some(t) = &args.capture.trace {
        crate::refuse_stdout("--trace", t)?;
    }
    let cwd = std::env::current_dir()?;
    let output = cwd.join(&args.capture.output);
    // The whole run is lost if the dump cannot be written at its end:
    // found out now, before the program starts.
    check_output(&output).context("-o")?;
    if let Some(t) = &args.capture.trace {
        check_output(&cwd.join(t)).context("--trace")?;
    }
    let reserve = reserves(
        &args.capture.reserve,
        &args.capture.memory,
        &cfg,
        args.capture.trace.is_some(),
    )?;
    let trigger_sig = trigger_signal(&args.capture.trigger_signal).context("--trigger-signal")?;
    check_schedule(&args.capture.schedule)?;
    if let Some(c) = &args.client_requests {
        coldcache_capture::requests::Honour::parse(c)
            .map_err(anyhow::Error::msg)
            .context("--client-requests")?;
    }
    coldcache_capture::preload::parse_threads(&args.threads)
        .map_err(anyhow::Error::msg)
        .context("--threads")?;
    // The function is found now, in the program and the libraries it
    // links: a typo or a stripped binary is reported before the run.
    let function = match (&args.function, args.all) {
        (Some(f), _) if elf => {
            crate::record_function::resolve(&program, f, "--function", &lib, args.in_dlopen)?
        }
        (None, true) if elf => {
            crate::record_function::resolve(&program, "main", "--all", &lib, false)?
        }
        _ => None,
    };
    let own_allocators = allocator_setting(&args.capture.allocators, |name| {
        crate::record_function::resolve(&program, name, "--allocator", &lib, false)?
            .ok_or_else(|| anyhow::anyhow!("--allocator {name}: not found"))
    })?;
    let objects = args.capture.objects || own_allocators.is_some();
    // `--in-dlopen` and a name found nowhere before the run: the library
    // looks for it at each dlopen.
    let later = args.in_dlopen && elf && function.is_none();
    if later {
        coldcache_fsio::say!(
            "coldcache: warning: --function {}: not in {} or the libraries it links; it will \
             be looked for in each library the program opens with dlopen",
            args.function.as_deref().unwrap_or_default(),
            program.display()
        );
    }
    if let Some(note) = function.as_ref().and_then(|f| f.note.as_deref()) {
        if !args.quiet {
            coldcache_fsio::say!("coldcache: {note}");
        }
    }
    let mut cores = Vec::new();
    for tc in &args.capture.thread_core {
        let ok = tc
            .split_once('=')
            .is_some_and(|(t, c)| t.parse::<u32>().is_ok() && c.parse::<u32>().is_ok());
        if !ok {
            bail!("--thread-core {tc}: expected TID=CORE");
        }
        cores.push(tc.clone());
    }
    // Every file the library writes is listed in this manifest (an
    // earlier dump at -o is kept as .old by the library, never removed).
    let manifest_dir = tempfile::Builder::new()
        .prefix("coldcache-record")
        .tempdir()
        .context("creating a temporary directory")?;
    let manifest = manifest_dir.path().join("dumps.jsonl");
    // The configuration goes in a file, not the environment: the
    // environment's size moves the program's stack, and the stack must not
    // depend on the cache simulated (docs/capture.md).
    let cache_file = manifest_dir.path().join("cache");
    std::fs::write(
        &cache_file,
        format!("{}\n{cache_json}", cache_name.replace('\n', " ")),
    )
    .with_context(|| format!("writing {}", cache_file.display()))?;

    let mut cmd = Command::new(&program);
    cmd.args(&args.program[1..]);
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", lib.display()),
        _ => lib.display().to_string(),
    };
    cmd.env("LD_PRELOAD", &preload)
        .env(coldcache_capture::settings::names::LIB, &lib);
    let show_progress = if args.progress {
        true
    } else if args.no_progress {
        false
    } else {
        use std::io::IsTerminal;
        std::io::stderr().is_terminal()
    };
    // The library says there which signal carries a stop request (Ctrl-C).
    let stop_file = manifest_dir.path().join("stop-signal");
    let progress_file = manifest_dir.path().join("progress");
    let at = function.as_ref().map(|f| (f.module.clone(), f.address));
    let trigger = if let Some(f) = &args.function {
        let f = function.as_ref().map_or(f.as_str(), |r| r.raw.as_str());
        let (first, count) = call_window(
            args.capture.call,
            args.capture.calls,
            args.capture.warm_calls.as_deref(),
        )?;
        TriggerSetting::Function {
            name: f.to_string(),
            at,
            dlopen: later,
            first,
            count,
            warm: args.capture.warm_calls.clone(),
        }
    } else if args.all {
        TriggerSetting::Function {
            name: "main".into(),
            at,
            dlopen: false,
            first: 1,
            count: 1,
            warm: None,
        }
    } else if args.signal {
        TriggerSetting::Signal
    } else {
        TriggerSetting::Api
    };
    let settings = Settings {
        cache: CacheSetting::File(cache_file.clone()),
        output: output.clone(),
        manifest: manifest.clone(),
        threads: args.threads.clone(),
        argv: args.program.clone(),
        mode: args.mode.clone(),
        schedule: args.capture.schedule.clone(),
        line_use: args.capture.line_use,
        objects,
        timeline: args.capture.timeline,
        rseq_commit: rseq_commit_setting().into(),
        client_requests: args.client_requests.clone(),
        cores: cores.clone(),
        allocators: own_allocators.clone(),
        max_instructions: args.capture.instructions,
        trace: args.capture.trace.as_ref().map(|t| cwd.join(t)),
        reserves: reserve.clone(),
        stop_file: Some(stop_file.clone()),
        progress_file: show_progress.then(|| progress_file.clone()),
        trigger,
        // In every mode: `coldcache trigger` and an interrupted `record`
        // stop any capture with it.
        signal: trigger_sig,
        attacher: None,
    };
    for (name, value) in settings.pairs() {
        cmd.env(name, value);
    }
    if settings.client_requests.is_none() {
        // One of the caller's own would reach the library.
        cmd.env_remove(coldcache_capture::settings::names::CLIENT_REQUESTS);
    }
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the child between fork and exec and
        // only makes async-signal-safe system calls (prctl, getppid, kill).
        unsafe {
            cmd.pre_exec(|| {
                // `main` ignores SIGXFSZ for coldcache; an ignored signal
                // survives exec, and the program must get its own default.
                libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
                // The program never outlives `record`: killed with it rather
                // than left behind, orphaned.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() == 1 {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
                Ok(())
            })
        };
    }

    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    stop_requests(child.id() as i32, stop_file);
    forward_signals_to(child.id() as i32);
    if args.signal {
        coldcache_fsio::say!(
            "coldcache: recording pid {}; start and stop a capture with `coldcache trigger {}`",
            child.id(),
            child.id()
        );
    }
    // Several windows of one run: each dump is named as its window closes,
    // not only at the program's exit.
    let announcer = args
        .signal
        .then(|| WindowAnnouncer::start(manifest.clone()));
    let progress = show_progress.then(|| {
        crate::record_progress::Progress::start(progress_file, args.capture.instructions, {
            use std::io::IsTerminal;
            std::io::stderr().is_terminal()
        })
    });
    let status = child.wait().context("waiting for the program")?;
    if let Some(p) = progress {
        p.stop();
    }
    if let Some(a) = announcer {
        a.stop();
    }
    let written = read_manifest(&manifest)?;
    dumps.clone_from(&written.dumps);
    let (captured, failed_cut) = report_written(
        &written,
        args.capture.no_resolve,
        args.capture.no_sources,
        args.quiet,
    );
    if let Some(t) = &args.capture.trace {
        report_partial_trace(t, &written);
    }
    // A capture that could not be written where asked: a failure, even if
    // the program succeeded (a script must not take it for a capture).
    if let (Some(0), None, Some(e)) = (status.code(), &failed_cut, write_failure(&written)) {
        return Err(e);
    }
    match status.code() {
        // A capture its tables' memory or its trace's disk cut short: the
        // dump is written, but it is not the capture asked for.
        Some(0) if failed_cut.is_some() => bail!(
            "the capture was cut short, {}",
            failed_cut.unwrap_or_default()
        ),
        Some(0) if later && !captured && written.dumps.is_empty() => bail!(
            "no capture was made: --function {} was never loaded (no library the program \
             opened with dlopen defines it); nothing was written to {}",
            args.function.as_deref().unwrap_or_default(),
            output.display()
        ),
        Some(0) if !captured => bail!(
            "no capture was made ({}); {}",
            match settings.trigger {
                TriggerSetting::Function { .. } => "the function was never called",
                TriggerSetting::Signal => "no trigger signal started one",
                TriggerSetting::Api => "the program never called coldcache_start",
            },
            match written.dumps.first() {
                Some(p) => format!("the dump written to {} is empty", p.display()),
                None => format!("nothing was written to {}", output.display()),
            }
        ),
        Some(0) => Ok(()),
        Some(c) => Err(ChildFailed(c.clamp(1, 255) as u8).into()),
        None => {
            use std::os::unix::process::ExitStatusExt;
            if let Some(how) = killed_by(&status) {
                coldcache_fsio::say!("coldcache: the program was {how}");
            }
            Err(ChildFailed(128 + status.signal().unwrap_or(0).clamp(0, 127) as u8).into())
        }
    }
}

/// Says each dump's path as soon as the library lists it in the manifest
/// (a `--signal` window closed), polling the manifest while the program
/// runs; the summary of every dump still comes at the end.
struct WindowAnnouncer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl WindowAnnouncer {
    fn start(manifest: PathBuf) -> WindowAnnouncer {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut said = 0;
            loop {
                let done = flag.load(std::sync::atomic::Ordering::Acquire);
                if let Ok(w) = read_manifest(&manifest) {
                    for d in w.dumps.iter().skip(said) {
                        coldcache_fsio::say!(
                            "coldcache: window {} written to {}",
                            said + 1,
                            d.display()
                        );
                        said += 1;
                    }
                }
                if done {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        });
        WindowAnnouncer { stop, thread }
    }

    /// Says what is still unsaid, then ends the polling.
    fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let _ = self.thread.join();
    }
}

/// What the library wrote during one run, from its manifest
/// (`COLDCACHE_DUMPS`, one JSON object a line; `coldcache_capture`'s
/// `output` module writes it).
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// Dumps in the order written (those kept elsewhere included).
    pub(crate) dumps: Vec<PathBuf>,
    /// Traces in the order written.
    traces: Vec<PathBuf>,
    /// Earlier files kept: (the path, its `.old` copy).
    kept: Vec<(PathBuf, PathBuf)>,
    /// This run's dumps that another capture has since replaced at their
    /// path, keeping them as `.old`: (the path, where the dump is now).
    replaced: Vec<(PathBuf, PathBuf)>,
    /// Dumps that could not be written where asked: (asked, kept in,
    /// why).
    pub(crate) failed: Vec<(PathBuf, PathBuf, String)>,
    /// Captures that could not be written anywhere: (asked, the error).
    pub(crate) lost: Vec<(PathBuf, String)>,
}

/// The error of a run whose dumps could not all be written where asked
/// (`record` and `attach` exit with it even when the program succeeded):
/// each file with the operating system's error, and where a capture was
/// kept instead; `None` when every dump was written.
pub(crate) fn write_failure(w: &Written) -> Option<anyhow::Error> {
    let mut why: Vec<String> = w
        .lost
        .iter()
        .map(|(asked, e)| format!("{} ({e}; lost)", asked.display()))
        .collect();
    why.extend(
        w.failed.iter().map(|(asked, kept, e)| {
            format!("{} ({e}; kept in {})", asked.display(), kept.display())
        }),
    );
    (!why.is_empty()).then(|| {
        anyhow::anyhow!(
            "the capture{} could not be written: {}",
            if why.len() == 1 { "" } else { "s" },
            why.join(", ")
        )
    })
}

/// A trace the capture did not finish (the program killed): the library
/// left it as `TRACE.partial` beside `asked`; says where and how to read
/// it.
pub(crate) fn report_partial_trace(asked: &Path, w: &Written) {
    let mut partial = std::path::absolute(asked)
        .unwrap_or_else(|_| asked.to_path_buf())
        .into_os_string();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    if w.traces.is_empty() && partial.is_file() {
        coldcache_fsio::say!(
            "coldcache: the capture did not finish: its trace is left as {0}, whole up to its \
             last chunk (`coldcache sim {0}` reads it up to the cut)",
            partial.display()
        );
    }
}

/// Where the dump the manifest line `v` lists is now: at `path`, or, when
/// another capture has since put its own dump there and kept this one as
/// `PATH.old` (two `record`s at once in one directory), at `PATH.old`
/// (added to `replaced`, so it is said). The line's `id` is the file's
/// identity when written.
fn moved_since(
    v: &serde_json::Value,
    path: PathBuf,
    replaced: &mut Vec<(PathBuf, PathBuf)>,
) -> PathBuf {
    let id = v.get("id").and_then(|i| {
        let i = i.as_array()?;
        Some((i.first()?.as_u64()?, i.get(1)?.as_u64()?))
    });
    let Some(id) = id else { return path };
    if coldcache_fsio::file_id(&path) == Some(id) {
        return path;
    }
    let mut old = path.clone().into_os_string();
    old.push(".old");
    let old = PathBuf::from(old);
    if coldcache_fsio::file_id(&old) == Some(id) {
        replaced.push((path, old.clone()));
        return old;
    }
    path
}

/// Reads the manifest; a missing file is a run that wrote nothing.
pub(crate) fn read_manifest(path: &Path) -> Result<Written> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Written::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut w = Written::default();
    let get = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(PathBuf::from);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}: a line is not JSON: {line}", path.display()))?;
        if let Some(d) = get(&v, "dump") {
            if let Some(asked) = get(&v, "failed") {
                let e = v.get("error").and_then(|x| x.as_str()).unwrap_or_default();
                w.failed.push((asked, d.clone(), e.to_string()));
            }
            w.dumps.push(moved_since(&v, d, &mut w.replaced));
        } else if let Some(t) = get(&v, "trace") {
            w.traces.push(t);
        } else if let (Some(old), Some(was)) = (get(&v, "kept"), get(&v, "was")) {
            w.kept.push((was, old));
        } else if let Some(lost) = get(&v, "lost") {
            let e = v.get("error").and_then(|x| x.as_str()).unwrap_or_default();
            w.lost.push((lost, e.to_string()));
        }
    }
    Ok(w)
}

/// Says what the run wrote: each dump's summary (resolved unless
/// `--no-resolve`), earlier files kept as `.old`, dumps kept elsewhere,
/// and the list when there are several. Returns whether any capture has
/// instructions (an armed capture that never started is written empty,
/// with the reason).
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

/// Reports what the library wrote; gives whether a capture holds any
/// instruction, and the cut of the first dump whose tables ran out of
/// memory (`coldcache_capture::grow::TABLE_FULL`) or whose trace could not
/// be written (`coldcache_capture::trace_write_failed`), if one was.
pub(crate) fn report_written(
    w: &Written,
    no_resolve: bool,
    no_sources: bool,
    quiet: bool,
) -> (bool, Option<String>) {
    for (was, old) in &w.kept {
        coldcache_fsio::say!(
            "coldcache: the earlier {} is kept as {}",
            was.display(),
            old.display()
        );
    }
    for (path, now) in &w.replaced {
        coldcache_fsio::say!(
            "coldcache: another capture has since written {}; this run's capture is {}",
            path.display(),
            now.display()
        );
    }
    for (asked, kept, why) in &w.failed {
        coldcache_fsio::say!(
            "coldcache: error: the capture could not be written to {} ({why}); it was kept in {}",
            asked.display(),
            kept.display()
        );
    }
    for (asked, e) in &w.lost {
        coldcache_fsio::say!(
            "coldcache: error: the capture could not be written to {}: {e}",
            asked.display()
        );
    }
    let mut captured = false;
    let mut failed_cut = None;
    for dump_path in &w.dumps {
        // A device or FIFO given as -o was written through: nothing to read.
        if !std::fs::metadata(dump_path).is_ok_and(|m| m.is_file()) {
            captured = true;
            continue;
        }
        // Read with its records summed per instruction (all the summary
        // and the resolver look at): a capture of millions of records
        // costs about its file's size here, not its records'.
        let loaded = match crate::report_cmd::load_by_instruction(dump_path) {
            Ok(d) => d,
            Err(e) => {
                coldcache_fsio::say!("coldcache: error: {e:#}");
                continue;
            }
        };
        if !quiet {
            coldcache_fsio::sigpipe::say(format_args!(
                "{}",
                summary_by_instruction(&loaded, dump_path)
            ));
        }
        let dump = &loaded.dump;
        // Quiet (`coldcache valgrind`): the warning goes to its log.
        if let Some(warning) = one_core_warning(dump).filter(|_| !quiet) {
            coldcache_fsio::say!("{warning}");
        }
        captured |= dump.meta.instructions > 0;
        // Cuts that lose what was asked for fail the run: the tables'
        // memory spent, or the trace not written (a full disk, a quota, a
        // size limit; not a trace reader that went away).
        if let Some(c) = dump.meta.cut_short.as_ref().filter(|c| {
            c.starts_with(coldcache_capture::grow::TABLE_FULL)
                || coldcache_capture::trace_write_failed(c)
        }) {
            failed_cut.get_or_insert_with(|| c.clone());
        }
        if !no_resolve {
            // The capture is written: a failure here loses nothing, so it
            // is reported and the program's own status still decides.
            match crate::resolve_cmd::resolve_loaded(
                loaded,
                dump_path,
                &coldcache_symbols::ResolveOptions::default(),
                !no_sources,
            ) {
                Ok(_) if quiet => {}
                Ok(text) => coldcache_fsio::sigpipe::say(format_args!("{text}")),
                Err(e) => coldcache_fsio::say!(
                    "coldcache: warning: the dump is left unresolved (run `coldcache resolve {}`): {e:#}",
                    dump_path.display()
                ),
            }
        }
    }
    for t in &w.traces {
        match compress_if_zst(t) {
            Ok(()) => match failed_cut
                .as_deref()
                .filter(|c| coldcache_capture::trace_write_failed(c))
            {
                Some(why) => coldcache_fsio::say!(
                    "coldcache: trace written to {}, cut short: {why}",
                    t.display()
                ),
                None => coldcache_fsio::say!("coldcache: trace written to {}", t.display()),
            },
            Err(e) => coldcache_fsio::say!(
                "coldcache: warning: the trace {} is left uncompressed: {e:#}",
                t.display()
            ),
        }
    }
    if w.dumps.len() > 1 && !quiet {
        coldcache_fsio::say!("coldcache: {} dumps written by this run:", w.dumps.len());
        for d in &w.dumps {
            coldcache_fsio::say!("  {}", d.display());
        }
    }
    (captured, failed_cut)
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

/// Compresses the trace at `path` with zstd (fastest level) when its name
/// ends in `.zst` and it is not compressed yet: the library, which links no
/// compressor, writes every trace plain, and readers tell by the first
/// bytes, so a plain trace under that name still reads. Traces repeat
/// themselves (loops): this shrinks a capture's trace many times over.
///
/// A pass after the program ends rather than chunk by chunk during the
/// capture: compressing in the traced process would slow it and link a
/// compressor into the preloaded library, and a writer thread of ours
/// would compete with the program for the cores. Streamed in bounded
/// memory (file → compressor → temporary file → rename). A streamed
/// capture's skeleton, last in the plain file, is moved first (a
/// compressed stream cannot seek to its end): header, skeleton chunk, the
/// record chunks, an index naming the new offset, the end marker.
pub(crate) fn compress_if_zst(path: &Path) -> Result<()> {
    use coldcache_trace::stream::{skeleton_index_chunk, STREAM_TAIL};
    use std::io::{Read, Seek, SeekFrom};
    if path.extension().is_none_or(|e| e != "zst") {
        return Ok(());
    }
    let (mut file, len) = coldcache_fsio::open_regular(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let mut head = [0u8; 16];
    let got = file
        .read(&mut head)
        .with_context(|| format!("reading {}", path.display()))?;
    if head[..got].starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Ok(());
    }
    // Where the skeleton is, when the file is a streamed capture's.
    let mut tail = vec![0u8; STREAM_TAIL];
    let layout = (got == 16 && head[..8] == coldcache_trace::MAGIC && len > STREAM_TAIL as u64)
        .then(|| -> Option<(u64, u64)> {
            let header = 16 + u64::from(u32::from_le_bytes(head[12..16].try_into().ok()?)) + 4;
            file.seek(SeekFrom::Start(len - STREAM_TAIL as u64)).ok()?;
            file.read_exact(&mut tail).ok()?;
            let at = coldcache_trace::tail::skeleton_offset(&tail)?;
            (header <= at && at < len - STREAM_TAIL as u64).then_some((header, at))
        })
        .flatten();
    let open = || std::fs::File::open(path).with_context(|| format!("reading {}", path.display()));
    let source: Box<dyn Read> = match layout {
        Some((header, at)) => {
            let range = |from: u64, to: u64| -> Result<Box<dyn Read>> {
                let mut f = open()?;
                f.seek(SeekFrom::Start(from))?;
                Ok(Box::new(f.take(to - from)))
            };
            let mut end = skeleton_index_chunk(header).to_vec();
            end.extend_from_slice(&tail[coldcache_trace::stream::SKELETON_INDEX_CHUNK..]);
            Box::new(
                range(0, header)?
                    .chain(range(at, len - STREAM_TAIL as u64)?)
                    .chain(range(header, at)?)
                    .chain(std::io::Cursor::new(end)),
            )
        }
        None => Box::new(open()?),
    };
    // The compressor panics on an I/O error: errors are kept aside and
    // checked after.
    struct Keep<T>(T, Option<std::io::Error>);
    impl<R: Read> Read for Keep<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.1.is_some() {
                return Ok(0);
            }
            self.0.read(buf).or_else(|e| {
                self.1 = Some(e);
                Ok(0)
            })
        }
    }
    impl<W: std::io::Write> std::io::Write for Keep<W> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.1.is_none() {
                if let Err(e) = self.0.write_all(buf) {
                    self.1 = Some(e);
                }
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut source = Keep(source, None);
    coldcache_fsio::write_atomically_with(path, |f| {
        let mut drain = Keep(std::io::BufWriter::with_capacity(1 << 20, f), None);
        ruzstd::encoding::compress(
            &mut source,
            &mut drain,
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        if let Some(e) = source.1.take().or(drain.1.take()) {
            return Err(e);
        }
        std::io::Write::flush(&mut drain.0)
    })
    .with_context(|| format!("cannot write {}", path.display()))
}

/// A few lines about a dump: totals per level and where it is.
pub fn summary(d: &Dump, path: &Path) -> String {
    summary_with(d, d.records.len(), path)
}

/// [`summary`] of a dump read with its records summed per instruction:
/// the same text (the totals, the coverage of data types and the counts
/// need no more).
pub(crate) fn summary_by_instruction(d: &coldcache_dump::ByInstruction, path: &Path) -> String {
    summary_with(&d.dump, d.records(), path)
}

/// [`summary`] of `d`, which holds `records` records in its file.
fn summary_with(d: &Dump, records: usize, path: &Path) -> String {
    let t = d.totals();
    let levels = d.meta.levels.len();
    let mut s = format!(
        "coldcache: capture written to {}\n  {} instructions, {} threads, {} records, {} stacks ({} cache, trigger {})\n",
        path.display(),
        d.meta.instructions,
        d.threads.len(),
        records,
        d.stacks.len(),
        d.meta.cache_name,
        d.meta.trigger
    );
    // A dump of another layout (not written by this version) has no
    // per-level lines.
    if let Some(l) = d.layout() {
        for (side, name) in
            Side::ALL
                .into_iter()
                .zip(["instruction fetches", "data reads", "data writes"])
        {
            let parts: Vec<String> = (0..=levels)
                .map(|k| {
                    let label = d.meta.levels.get(k).map(String::as_str).unwrap_or("memory");
                    format!("{label} {}", t.get(l.served(side, k)).copied().unwrap_or(0))
                })
                .collect();
            s += &format!("  {name:<20} served by {}\n", parts.join(", "));
        }
    }
    let un = t
        .get(coldcache_dump::CounterLayout::UNMODELLED)
        .copied()
        .unwrap_or(0);
    // In words, as `report`'s header and the web UI say them.
    if let Some(f) = coldcache_analysis::summary::unmodelled(&d.meta, un) {
        s += &format!("  {}\n    ({})\n", f.text, f.advice);
    }
    // How many data accesses got a type, when the dump has data types.
    if let Some(c) = coldcache_analysis::data::coverage_of(d, &|_| true) {
        s += &format!("  data types: {}\n", c.text());
    }
    // Which mode ran, and how much of a fast capture the trap engine did
    // (none for a dump re-simulated from a trace no capture wrote).
    if d.meta.trigger == "trace" {
        s += &format!(
            "  mode: {}\n",
            coldcache_analysis::summary::capture_mode(&d.meta)
        );
    } else {
        match coldcache_analysis::summary::fast_trapped(&d.meta) {
            Some(_) => match coldcache_analysis::summary::trapped(&d.meta) {
                Some(f) => s += &format!("  mode fast: {}\n    ({})\n", f.text, f.advice),
                None => s += "  mode fast: no instruction ran under the trap engine\n",
            },
            None => match coldcache_analysis::summary::trap_fallback(&d.meta) {
                Some(why) => s += &format!("  mode trap: {why}\n"),
                None => s += "  mode trap\n",
            },
        }
    }
    if let Some(v) = d
        .meta
        .notes
        .iter()
        .find_map(|n| n.strip_prefix("fast-mode verification: "))
    {
        s += &format!("  verify: {v}\n");
    }
    if !d.meta.warm.is_empty() {
        s += &format!("  warmed {}\n", d.meta.warm);
    }
    if !d.meta.schedule.is_empty() {
        s += &format!("  schedule {}\n", d.meta.schedule);
    }
    if let Some(c) = &d.meta.cut_short {
        s += &format!("  cut short: {c}\n");
    }
    // Threads `--threads` left out (`record --all` traces main alone).
    if let Some(u) = coldcache_analysis::summary::untraced(&d.meta) {
        s += &format!("  untraced: {}\n    ({})\n", u.text, u.advice);
    }
    if let Some(w) = coldcache_analysis::summary::woken_early(&d.meta) {
        s += &format!("  woken: {}\n    ({})\n", w.text, w.advice);
    }
    if let Some(r) = coldcache_analysis::summary::client_requests(&d.meta) {
        s += &format!("  requests: {}\n    ({})\n", r.text, r.advice);
    }
    if let Some(p) = &d.meta.part {
        s += &format!("  part {} of {}: ended by {}\n", p.number, p.of, p.trigger);
    }
    s
}

/// A warning for a capture that traced several threads on a cache
/// configuration of one core: every thread then shares every level, so no
/// invalidation or false sharing can show. Names the presets with several
/// cores (`coldcache presets`). `None` otherwise.
pub(crate) fn one_core_warning(d: &Dump) -> Option<String> {
    if d.threads.len() < 2 || d.meta.cores != 1 {
        return None;
    }
    let several: Vec<String> = coldcache_config::names()
        .iter()
        .filter(|(name, _)| *name != "host")
        .filter_map(|(name, _)| {
            let c = coldcache_config::resolve(name).ok()?;
            (c.cores > 1).then(|| format!("{name} ({} cores)", c.cores))
        })
        .collect();
    Some(format!(
        "coldcache: warning: {} threads were traced on a one-core cache ({}): they share its \
         every level as one core would, so no coherence traffic (invalidations) or false \
         sharing can show; for those, capture with a cache of several cores: --cache {}",
        d.threads.len(),
        d.meta.cache_name,
        several.join(", --cache ")
    ))
}

/// The program `record` waits for.
static CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The signals that end `record` by default and that it passes on to the
/// program while it runs.
const FORWARDED: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// From now on, while the program `pid` runs, SIGINT, SIGTERM, SIGHUP and
/// SIGQUIT sent to `record` go to the program instead of ending `record`:
/// the program then writes its dump (the capture engine catches them) and
/// dies of the signal, and `record` reports it. Before, `record` died first
/// and took the program with it (`PR_SET_PDEATHSIG`), mid-dump. A signal
/// from the terminal (Ctrl-C) reaches the whole process group, the program
/// included, so it is not sent twice. Once the program is gone (reaped),
/// such a signal ends `record` as by default.
fn forward_signals_to(pid: i32) {
    CHILD.store(pid, std::sync::atomic::Ordering::SeqCst);
    for sig in FORWARDED {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler
        // and flags are set before it is installed.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

extern "C" fn forward(sig: i32, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let pid = CHILD.load(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: waitid with WNOWAIT only asks whether `pid` is still a child
    // of ours not yet reaped (a reused pid is not our child); kill, signal
    // and raise are async-signal-safe; the kernel passes a valid siginfo_t
    // to an SA_SIGINFO handler.
    unsafe {
        let mut si: libc::siginfo_t = std::mem::zeroed();
        let ours = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut si,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        ) == 0;
        if !ours {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        } else {
            let fd = STOP_PIPE.load(std::sync::atomic::Ordering::SeqCst);
            if fd >= 0 {
                let b = sig as u8;
                libc::write(fd, &b as *const u8 as *const libc::c_void, 1);
            }
            if (*info).si_code != libc::SI_KERNEL {
                // (From the terminal, SI_KERNEL: the program got it too.)
                libc::kill(pid, sig);
            }
        }
    }
}

/// `sigqueue(pid, sig, value)`; 0 on success. Async-signal-safe.
pub(crate) fn queue(pid: i32, sig: i32, value: usize) -> i32 {
    // SAFETY: sigqueue(3) with a positive pid, a valid signal and a value
    // carried as a pointer-sized integer, never dereferenced.
    unsafe {
        libc::sigqueue(
            pid,
            sig,
            libc::sigval {
                sival_ptr: value as *mut libc::c_void,
            },
        )
    }
}

/// The write end of the pipe `forward` tells [`stop_requests`] about a
/// signal on (-1: none).
static STOP_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Starts the thread that, when `record` is interrupted (Ctrl-C, SIGTERM,
/// ...), asks the program `pid` to stop its capture by queueing the
/// library's stop-request signal (the one it names in `stop_file`) with [`REQUEST_STOP`](coldcache_capture::doorbell::REQUEST_STOP)
/// and the signal: the dump is written, cut short "interrupted (SIGINT)",
/// even when the program handles SIGINT itself (its handler still gets
/// the signal, and the program goes on as it would have). A program whose
/// SIGINT is at its default writes the dump when the signal ends it. The
/// request is only sent to a program that catches that signal (as
/// `coldcache trigger` checks): it could end any other.
fn stop_requests(pid: i32, stop_file: PathBuf) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let read_fd = fds[0];
    let spawned = std::thread::Builder::new()
        .name("stop-requests".into())
        .spawn(move || loop {
            let mut b = 0u8;
            // SAFETY: reading one byte into a live local.
            let n = unsafe { libc::read(read_fd, &mut b as *mut u8 as *mut libc::c_void, 1) };
            if n == 1 {
                let signal = stop_signal_of(&stop_file, pid);
                if check_trigger_target(pid, signal, Path::new("/proc")).is_ok() {
                    let value = coldcache_capture::doorbell::REQUEST_STOP | usize::from(b);
                    queue(pid, signal, value);
                }
            } else if n == 0
                || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                return;
            }
        });
    if spawned.is_ok() {
        STOP_PIPE.store(fds[1], std::sync::atomic::Ordering::SeqCst);
    }
}

/// The stop request signal the library in process `pid` took, from the
/// file it wrote (`PID SIGNAL`); the default one when there is none (the
/// library has not run its constructor yet) or it names another process.
fn stop_signal_of(file: &Path, pid: i32) -> i32 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut words = text.split_whitespace().map(str::parse::<i32>);
    match (words.next(), words.next()) {
        (Some(Ok(p)), Some(Ok(sig))) if p == pid && (1..=64).contains(&sig) => sig,
        _ => coldcache_capture::engine::stop_request_signal(),
    }
}

/// How a program that a signal ended ended: `killed by SIGSEGV (11), core
/// dumped`; `None` when it exited.
fn killed_by(status: &std::process::ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    let sig = status.signal()?;
    Some(format!(
        "killed by {} ({sig}){}",
        signal_name(sig),
        if status.core_dumped() {
            ", core dumped"
        } else {
            ""
        }
    ))
}

/// Arguments of `coldcache trigger`.
#[derive(Args, Debug)]
pub struct TriggerArgs {
    /// Process recorded with `coldcache record`: with `--signal` the
    /// trigger opens and closes a capture window; with `--function`,
    /// `--all` or the C API it stops the capture and its dump is written
    /// (a process without libcoldcache, or not catching the signal, is
    /// refused).
    pid: i32,
    /// The signal to send (must match `record --trigger-signal`): a name
    /// or a number.
    #[arg(long, default_value = "USR2")]
    signal: String,
}

/// The classic signals by name, as `kill -l` spells them.
const SIGNAL_NAMES: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// The name of signal `sig` (`SIGUSR2`, `SIGRTMIN+3`).
pub(crate) fn signal_name(sig: i32) -> String {
    match SIGNAL_NAMES.iter().find(|&&(_, n)| n == sig) {
        Some((name, _)) => format!("SIG{name}"),
        None if sig >= libc::SIGRTMIN() => format!("SIGRTMIN+{}", sig - libc::SIGRTMIN()),
        None => format!("signal {sig}"),
    }
}

/// Parses a trigger signal given by name (with or without `SIG`, any case;
/// `RTMIN+N`, `RTMAX-N`) or number, and refuses the signals a trigger must
/// not be: those that cannot be caught (KILL, STOP), the capture engine's
/// own (TRAP, RTMIN+6), and those that report the program's own faults
/// (SEGV, BUS, FPE, ILL, ABRT, SYS), whose handler would turn a crash into
/// a capture.
pub fn trigger_signal(text: &str) -> Result<i32> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    let sig = if let Ok(n) = t.parse::<i32>() {
        n
    } else if let Some(&(_, n)) = SIGNAL_NAMES.iter().find(|&&(s, _)| s == name) {
        n
    } else if let Some(k) = name.strip_prefix("RTMIN") {
        let off = if k.is_empty() {
            0
        } else {
            k.strip_prefix('+')
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("{t:?}: expected RTMIN+N"))?
        };
        min + off
    } else if let Some(k) = name.strip_prefix("RTMAX") {
        let off = if k.is_empty() {
            0
        } else {
            k.strip_prefix('-')
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("{t:?}: expected RTMAX-N"))?
        };
        max - off
    } else {
        bail!("{t:?} is not a signal name or number (for example USR2, SIGUSR1, RTMIN+3, 12)");
    };
    if sig <= 0 || sig > max {
        bail!("{t:?}: signals are numbered 1 to {max}");
    }
    let why = match sig {
        libc::SIGKILL | libc::SIGSTOP => Some("it cannot be caught"),
        libc::SIGTRAP => Some("the capture engine single-steps with it"),
        libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL | libc::SIGABRT | libc::SIGSYS => {
            Some("it reports the program's own faults, which would then start a capture instead of ending the program")
        }
        s if s == min + 6 => Some("the capture engine uses it to start tracing other threads"),
        s if s > libc::SIGSYS && s < min => Some("glibc reserves it for its threads"),
        _ => None,
    };
    if let Some(why) = why {
        bail!("{} ({sig}) cannot be the trigger: {why}; SIGUSR2 (the default) or SIGUSR1 are the usual choices", signal_name(sig));
    }
    Ok(sig)
}

/// Refuses to signal a process that would not take the signal as a
/// trigger (whose default action, for USR1/USR2, ends it): one without
/// `libcoldcache` mapped (`/proc/PID/maps`), or one that does not catch
/// `sig` (`SigCgt` in `/proc/PID/status`: recorded with another
/// `--trigger-signal`, or running no capture of its own). `proc` is `/proc` (a directory of
/// the same layout in tests).
pub(crate) fn check_trigger_target(pid: i32, sig: i32, proc: &Path) -> Result<()> {
    let dir = proc.join(pid.to_string());
    let maps = match std::fs::read_to_string(dir.join("maps")) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("there is no process {pid}")
        }
        Err(e) => {
            return Err(e).with_context(|| {
                format!("cannot tell whether process {pid} runs coldcache (reading its maps)")
            })
        }
    };
    let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
    let who = format!("process {pid} ({})", comm.trim());
    let has_library = maps.lines().any(|l| {
        let path = l.split_whitespace().skip(5).collect::<Vec<_>>().join(" ");
        Path::new(&path)
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libcoldcache"))
    });
    if !has_library {
        bail!(
            "{who} is not running coldcache (no libcoldcache.so in its memory map), \
             so {} would not start a capture{}; run it with `coldcache record --signal`",
            signal_name(sig),
            if sig == libc::SIGUSR1 || sig == libc::SIGUSR2 {
                " and would most likely end it"
            } else {
                ""
            }
        );
    }
    let status = std::fs::read_to_string(dir.join("status"))
        .with_context(|| format!("reading the status of process {pid}"))?;
    let caught = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|mask| (1..=64).contains(&sig) && mask & (1u64 << (sig - 1)) != 0);
    if !caught {
        bail!(
            "{who} runs coldcache but does not catch {}: it was recorded with another \
             --trigger-signal, or runs no capture, and the signal could end it",
            signal_name(sig)
        );
    }
    Ok(())
}

pub fn trigger(args: TriggerArgs) -> Result<()> {
    if args.pid <= 0 {
        bail!("pid {} is not a process id", args.pid);
    }
    let sig = trigger_signal(&args.signal).context("--signal")?;
    check_trigger_target(args.pid, sig, Path::new("/proc"))?;
    // Queued with a value, so the library tells a trigger from a plain
    // `kill` (a SIGUSR2 its fatal-signal handler catches stops the capture
    // instead of ending the program).
    if queue(args.pid, sig, coldcache_capture::doorbell::REQUEST_TRIGGER) != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("signalling process {}", args.pid));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A program path that is a directory is named as one, not as missing.
    #[test]
    fn a_directory_given_as_the_program_is_named_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("prog");
        std::fs::create_dir(&d).unwrap();
        let e = find_program(d.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.ends_with("prog is a directory, not a program"), "{e}");
        let e = find_program(dir.path().join("none").to_str().unwrap()).unwrap_err();
        assert!(e.to_string().ends_with("none does not exist"), "{e}");
    }

    /// The summary says unmodelled instructions by class in words (not as
    /// a Debug tuple) and the fast-mode trapped count with its share; the
    /// one-core warning only for several threads on one core.
    #[test]
    fn the_summary_says_unmodelled_and_trapped_in_words() {
        use coldcache_dump::{CounterLayout, Meta, Record, Thread};
        let levels = vec!["L1".to_string(), "L2".to_string()];
        let counters = CounterLayout::new(2).names(&levels);
        let mut row = vec![0u64; counters.len()];
        row[0] = 1_000;
        row[CounterLayout::UNMODELLED] = 405;
        let mut d = Dump {
            meta: Meta {
                cache_name: "cachegrind".into(),
                levels,
                cores: 1,
                counters,
                instructions: 1_000,
                trigger: "all".into(),
                unmodelled: vec![("partially masked AVX-512 memory operand".into(), 405)],
                mode: coldcache_dump::Mode {
                    engine: "fast".into(),
                    trapped: 12,
                    ..Default::default()
                },
                ..Meta::default()
            },
            threads: vec![Thread::default()],
            records: vec![Record {
                ip: 0x1000,
                stack: 0,
                thread: 0,
                counters: row,
            }],
            ..Dump::default()
        };
        let s = summary(&d, Path::new("x.ccdump"));
        assert!(
            s.contains(
                "  405 instructions unmodelled: 405 partially masked AVX-512 memory operand\n    ("
            ),
            "{s}"
        );
        assert!(!s.contains("(\""), "no Debug tuple: {s}");
        assert!(
            s.contains("  mode fast: 12 of 1,000 instructions (1.20%) ran under the trap engine\n"),
            "{s}"
        );
        assert_eq!(one_core_warning(&d), None, "one thread");
        d.threads.push(Thread::default());
        let w = one_core_warning(&d).unwrap();
        assert!(
            w.contains("2 threads were traced on a one-core cache (cachegrind)"),
            "{w}"
        );
        assert!(w.contains("--cache jaguar (8 cores)"), "{w}");
        d.meta.cores = 8;
        assert_eq!(one_core_warning(&d), None, "eight cores");
        // The data-type coverage only for a dump with data types: 30 reads
        // of the one record's instruction, typed to a field.
        assert!(!s.contains("data types:"), "{s}");
        let l = CounterLayout::new(2);
        d.records[0].counters[l.served(coldcache_dump::Side::Read, 0)] = 30;
        d.data = Some(coldcache_dump::DataTypes {
            types: vec![coldcache_dump::DataType {
                name: "S".into(),
                size: 8,
                members: vec![coldcache_dump::Member {
                    name: "a".into(),
                    size: 8,
                    ty: coldcache_dump::data::NO_TYPE,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            accesses: vec![coldcache_dump::TypedAccess {
                addr: 0x1000,
                size: 8,
                path: vec![0],
                ..Default::default()
            }],
            modules: vec![],
        });
        let s = summary(&d, Path::new("x.ccdump"));
        assert!(
            s.contains("  data types: 100.0% of 30 data accesses typed, 100.0% with a field (1 of 1 instructions with data accesses typed)\n"),
            "{s}"
        );
    }

    /// The summary of a dump read with its records summed per instruction
    /// (`record`'s and `attach`'s way) is the text of the whole dump's:
    /// several records per address, on two stacks and two threads, with a
    /// data type on one address.
    #[test]
    fn the_summary_read_per_instruction_is_the_whole_dumps() {
        use coldcache_dump::{ByInstruction, CounterLayout, Meta, Record, StackNode, Thread};
        let levels = vec!["L1".to_string(), "L2".to_string()];
        let counters = CounterLayout::new(2).names(&levels);
        let l = CounterLayout::new(2);
        let row = |k: u64| {
            let mut r = vec![0u64; counters.len()];
            r[0] = 10 * k;
            r[l.served(coldcache_dump::Side::Read, 0)] = 3 * k;
            r[l.served(coldcache_dump::Side::Write, 2)] = k;
            r
        };
        let rec = |ip, stack, thread, counters| Record {
            ip,
            stack,
            thread,
            counters,
        };
        let d = Dump {
            meta: Meta {
                cache_name: "jaguar".into(),
                levels: levels.clone(),
                cores: 8,
                counters: counters.clone(),
                instructions: 70,
                trigger: "all".into(),
                ..Meta::default()
            },
            threads: vec![Thread::default(), Thread::default()],
            stacks: vec![
                StackNode::default(),
                StackNode {
                    parent: 0,
                    call_site: 0x1004,
                    callee: 0x2000,
                },
            ],
            records: vec![
                rec(0x1000, 0, 0, row(1)),
                rec(0x1000, 1, 1, row(2)),
                rec(0x2000, 1, 0, row(4)),
            ],
            data: Some(coldcache_dump::DataTypes {
                types: vec![coldcache_dump::DataType {
                    name: "S".into(),
                    size: 8,
                    ..Default::default()
                }],
                accesses: vec![coldcache_dump::TypedAccess {
                    addr: 0x1000,
                    size: 8,
                    ..Default::default()
                }],
                modules: vec![],
            }),
            ..Dump::default()
        };
        let b = ByInstruction::from_bytes(d.to_bytes()).unwrap();
        let path = Path::new("x.ccdump");
        let whole = summary(&d, path);
        assert!(
            whole.contains("70 instructions, 2 threads, 3 records, 2 stacks"),
            "{whole}"
        );
        assert!(
            whole.contains("data types: 42.9% of 28 data accesses typed"),
            "{whole}"
        );
        assert_eq!(summary_by_instruction(&b, path), whole);
    }

    /// Names and numbers as `kill -l` spells them; the refused ones named.
    #[test]
    fn trigger_signals_by_name_and_number() {
        assert_eq!(trigger_signal("USR2").unwrap(), 12);
        assert_eq!(trigger_signal("sigusr1").unwrap(), 10);
        assert_eq!(trigger_signal("12").unwrap(), 12);
        assert_eq!(trigger_signal("RTMIN+3").unwrap(), libc::SIGRTMIN() + 3);
        assert_eq!(trigger_signal("SIGRTMAX-1").unwrap(), libc::SIGRTMAX() - 1);
        for (bad, says) in [
            ("0", "numbered 1 to"),
            ("99", "numbered 1 to"),
            ("9", "SIGKILL (9) cannot be the trigger"),
            ("11", "SIGSEGV (11) cannot be the trigger"),
            ("SEGV", "the program's own faults"),
            ("TRAP", "single-steps"),
            ("RTMIN+6", "start tracing other threads"),
            ("USR3", "not a signal name"),
        ] {
            let e = format!("{:#}", trigger_signal(bad).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// A fake `/proc`: the library mapped or not, the signal caught or not.
    #[test]
    fn trigger_targets_must_run_coldcache_and_catch_the_signal() {
        let proc = tempfile::tempdir().unwrap();
        let dir = proc.path().join("42");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("comm"), "prog\n").unwrap();
        let lib = "7f0000000000-7f0000001000 r-xp 00000000 08:01 1234 /opt/cc/libcoldcache.so\n";
        let plain = "55d000000000-55d000001000 r-xp 00000000 08:01 99 /usr/bin/prog\n";
        // SIGUSR2 is 12: bit 11 of SigCgt.
        let caught = "Name:\tprog\nSigCgt:\t0000000000000800\n";
        let not_caught = "Name:\tprog\nSigCgt:\t0000000000004000\n";
        let check = |maps: &str, status: &str| {
            std::fs::write(dir.join("maps"), maps).unwrap();
            std::fs::write(dir.join("status"), status).unwrap();
            check_trigger_target(42, libc::SIGUSR2, proc.path()).map_err(|e| format!("{e:#}"))
        };
        check(&format!("{plain}{lib}"), caught).unwrap();
        let e = check(plain, caught).unwrap_err();
        assert!(
            e.contains("process 42 (prog) is not running coldcache"),
            "{e}"
        );
        assert!(e.contains("would most likely end it"), "{e}");
        let e = check(&format!("{plain}{lib}"), not_caught).unwrap_err();
        assert!(e.contains("does not catch SIGUSR2"), "{e}");
        let e = check_trigger_target(43, libc::SIGUSR2, proc.path()).unwrap_err();
        assert_eq!(e.to_string(), "there is no process 43");
    }

    #[test]
    fn the_library_path_is_absolute_and_a_directory_is_not_taken_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libcoldcache.so");
        std::fs::write(&lib, b"").unwrap();
        let deps = dir.path().join("deps");
        std::fs::create_dir(&deps).unwrap();
        // Next to the executable's directory (target/release/deps layout).
        let found = library_from(None, Ok(deps.join("coldcache"))).unwrap();
        assert_eq!(found, lib.canonicalize().unwrap());
        // A relative COLDCACHE_LIB comes back absolute.
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(&lib, &cwd);
        let found = library_from(Some(rel.into()), Ok(PathBuf::from("/x"))).unwrap();
        assert!(found.is_absolute(), "{}", found.display());
        assert_eq!(found, lib.canonicalize().unwrap());
        let e = library_from(Some(deps.clone().into()), Ok(PathBuf::from("/x"))).unwrap_err();
        assert!(e.to_string().ends_with("is not a file"), "{e}");
        let e = library_from(Some(deps.join("no").into()), Ok(PathBuf::from("/x"))).unwrap_err();
        assert!(e.to_string().ends_with("does not exist"), "{e}");
        let e = library_from(None, Ok(dir.path().join("a/b/c"))).unwrap_err();
        assert!(e.to_string().contains("was not found next to"), "{e}");
    }

    /// `to` relative to `from` (both absolute), through `..` as needed.
    fn pathdiff(to: &Path, from: &Path) -> PathBuf {
        let to: Vec<_> = to.components().collect();
        let from: Vec<_> = from.components().collect();
        let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
        let mut p = PathBuf::new();
        for _ in common..from.len() {
            p.push("..");
        }
        for c in &to[common..] {
            p.push(c);
        }
        p
    }
}
