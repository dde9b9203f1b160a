//! `coldcache record`: run a program with `libcoldcache.so` preloaded and a
//! capture armed by environment variables (the library's `preload` module
//! reads them), then summarise the dump it wrote (`written.rs`).
//!
//! Before the program starts: what `record` shares with `attach` is
//! checked (`CaptureArgs::check`: `-o`/`--trace` writable, the cache
//! configuration resolved and handed over as JSON, the library linking no
//! parser), `--function` is resolved to a file and ELF
//! address (`record_function.rs`). While it runs: SIGINT, SIGTERM, SIGHUP
//! and SIGQUIT go on to the program (Ctrl-C first asks the library to stop
//! the capture with the stop request signal), progress is read from
//! outside (`record_progress.rs`). After: the library's manifest lists the
//! files written; each dump is summarised and resolved, a trace named
//! `.zst` compressed (`written.rs`), and `record` exits non-zero when no
//! capture was made. [`find_library`] (its canonical path) serves
//! `attach` and `zones record` too.

use crate::capture_args::CaptureArgs;
use crate::trigger_cmd::{check_trigger_target, queue, signal_name};
use crate::written::{read_manifest, report_partial_trace, report_written, write_failure};
use anyhow::{bail, Context, Result};
use clap::Args;
use coldcache_capture::settings::{CacheSetting, Settings, TriggerSetting};
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
    let checked = args.capture.check()?;
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
        (None, true) if elf => crate::record_function::resolve_main(&program, &lib)?,
        _ => None,
    };
    let own_allocators =
        crate::capture_args::allocator_setting(&args.capture.allocators, |name| {
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
        format!(
            "{}\n{}",
            checked.cache_name.replace('\n', " "),
            checked.cache_json
        ),
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
        let (first, count) = crate::capture_args::call_window(
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
        output: checked.output.clone(),
        manifest: manifest.clone(),
        threads: args.threads.clone(),
        argv: args.program.clone(),
        mode: args.mode.clone(),
        schedule: args.capture.schedule.clone(),
        line_use: args.capture.line_use,
        objects,
        timeline: args.capture.timeline,
        rseq_commit: crate::capture_args::rseq_commit_setting().into(),
        client_requests: args.client_requests.clone(),
        cores: args.capture.thread_core.clone(),
        allocators: own_allocators.clone(),
        max_instructions: args.capture.instructions,
        trace: checked.trace.clone(),
        reserves: checked.reserves.clone(),
        stop_file: Some(stop_file.clone()),
        progress_file: show_progress.then(|| progress_file.clone()),
        trigger,
        // In every mode: `coldcache trigger` and an interrupted `record`
        // stop any capture with it.
        signal: checked.trigger_signal,
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
            checked.output.display()
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
                None => format!("nothing was written to {}", checked.output.display()),
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
