//! `coldcache attach PID`: capture a process that is already running,
//! started without coldcache. `libcoldcache.so` is loaded into it through
//! ptrace (`inject.rs`), and the capture is armed with `record`'s settings
//! (the names and meanings of its environment variables) handed to the
//! library's `coldcache_attach_start`. Then `attach` waits, as `record`
//! does, for the dump (listed in a manifest the library writes), reports
//! and resolves it, and exits; Ctrl-C stops the capture and still gets
//! the dump; `coldcache trigger PID` works as with `record`.

use crate::capture_args::CaptureArgs;
use crate::capture_args::{allocator_setting, call_window, rseq_commit_setting};
use crate::record_cmd::find_library;
use crate::trigger_cmd::{queue, signal_name};
use crate::written::{read_manifest, report_partial_trace, report_written, write_failure};
use anyhow::{bail, Context, Result};
use clap::Args;
use coldcache_capture::settings::{CacheSetting, Settings, TriggerSetting};
use coldcache_inject as inject;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Arguments of `coldcache attach`.
#[derive(Args, Debug)]
pub struct AttachArgs {
    /// The process to capture (running now, started without coldcache).
    pid: i32,
    /// Threads to trace: `all` (the default without --function), `caller`
    /// (with --function: the thread that calls it), thread ids
    /// `1234,1235`, or names `name:render,audio`.
    #[arg(long)]
    threads: Option<String>,
    /// Capture calls of this function (found in the program and the
    /// libraries mapped in the process now), from entry to return.
    #[arg(long, value_name = "SYMBOL", conflicts_with = "signal")]
    function: Option<String>,
    /// Capture windows opened and closed by `coldcache trigger PID`
    /// (without --function or --signal, the capture starts at once).
    #[arg(long)]
    signal: bool,
    /// Stop the capture after this many seconds.
    #[arg(long, value_name = "SECONDS", conflicts_with = "signal")]
    duration: Option<f64>,
    /// How traced threads are followed, as for `record`: `auto` (the
    /// default) is `fast` where the process allows it, else `trap`; `trap`
    /// single-steps every instruction (the oracle); `verify` checks fast
    /// mode against it (docs/capture.md).
    #[arg(
        long,
        value_name = "MODE",
        default_value = "auto",
        value_parser = ["auto", "trap", "fast", "verify"]
    )]
    mode: String,
    /// What `record` and `attach` share (after what only
    /// `attach` has, in the help).
    #[command(flatten)]
    capture: CaptureArgs,
}

/// Where SIGINT/SIGTERM/SIGHUP on `attach` are reported (a pipe's write
/// end; -1 before it exists).
static INTERRUPT_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_interrupt(sig: i32) {
    let fd = INTERRUPT_PIPE.load(Ordering::SeqCst);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) of one byte from a live local is async-signal-safe.
        unsafe { libc::write(fd, &b as *const u8 as *const libc::c_void, 1) };
    }
}

/// From now on SIGINT, SIGTERM and SIGHUP do not end `attach`: they are
/// read from the returned descriptor.
fn catch_interrupts() -> Result<i32> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error()).context("creating a pipe");
    }
    INTERRUPT_PIPE.store(fds[1], Ordering::SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a plain handler is valid.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_interrupt as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    Ok(fds[0])
}

/// A signal read from the interrupt pipe, if any.
fn interrupted(fd: i32) -> Option<i32> {
    let mut b = 0u8;
    // SAFETY: reading one byte into a live local from a non-blocking pipe.
    let n = unsafe { libc::read(fd, &mut b as *mut u8 as *mut libc::c_void, 1) };
    (n == 1).then_some(i32::from(b))
}

/// A descriptor that becomes readable when `pid` exits (pidfd_open).
fn pidfd(pid: i32) -> Option<i32> {
    // SAFETY: pidfd_open takes a pid and flags; it returns a descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    (fd >= 0).then_some(fd)
}

fn has_exited(fd: Option<i32>, pid: i32) -> bool {
    match fd {
        Some(fd) => {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: polling one live pollfd without waiting.
            unsafe { libc::poll(&mut p, 1, 0) == 1 }
        }
        // SAFETY: kill with signal 0 only checks the pid exists.
        None => (unsafe { libc::kill(pid, 0) }) != 0,
    }
}

/// The files to look for `--function` in: the program, then every other
/// file mapped executable (its libraries, those opened later included),
/// each once; never libcoldcache.
/// Whether a `libcoldcache` is still mapped in process `pid` (`None`: its
/// maps could not be read, the process is gone). A process that calls
/// `execve` keeps its pid but loses every mapping, the library and its
/// capture with them: nothing would ever be written.
fn library_mapped(pid: i32) -> Option<bool> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    Some(inject::loaded_library(&coldcache_capture::procfs::parse_maps(&maps)).is_some())
}

fn mapped_files(t: &inject::Target) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    if let Ok(exe) = std::fs::read_link(format!("/proc/{}/exe", t.pid)) {
        files.push(exe);
    }
    for m in &t.maps {
        let p = PathBuf::from(&m.path);
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        if m.perms.contains('x')
            && m.path.starts_with('/')
            && !m.path.ends_with(" (deleted)")
            && !name.is_some_and(|n| n.starts_with("libcoldcache"))
            && !files.contains(&p)
        {
            files.push(p);
        }
    }
    files
}

pub fn run(args: AttachArgs) -> Result<()> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        bail!("coldcache attach needs Linux on x86-64");
    }
    let target = inject::check(args.pid)?;
    let pid = target.pid;
    let lib = find_library()?;
    let checked = args.capture.check()?;
    let threads = args.threads.clone().unwrap_or_else(|| {
        if args.function.is_some() {
            "caller".into()
        } else {
            "all".into()
        }
    });
    coldcache_capture::preload::parse_threads(&threads)
        .map_err(anyhow::Error::msg)
        .context("--threads")?;
    let function = match &args.function {
        Some(f) => {
            let r =
                crate::record_function::resolve_in_files(&mapped_files(&target), f, "--function")?;
            if let Some(note) = &r.note {
                coldcache_fsio::say!("coldcache: {note}");
            }
            Some(r)
        }
        None => None,
    };
    let program = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            c.split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join("\x1f")
        })
        .unwrap_or_default();

    // The manifest the library lists what it writes in; the process writes
    // it, so it gets the directory.
    let manifest_dir = tempfile::Builder::new()
        .prefix("coldcache-attach")
        .tempdir()
        .context("creating a temporary directory")?;
    if let Some(uid) = std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
    {
        let _ = std::os::unix::fs::chown(manifest_dir.path(), Some(uid), None);
    }
    let manifest = manifest_dir.path().join("dumps.jsonl");

    let files = mapped_files(&target);
    let allocators = allocator_setting(&args.capture.allocators, |name| {
        crate::record_function::resolve_in_files(&files, name, "--allocator")
    })?;
    let now = function.is_none() && !args.signal;
    let trigger = match &function {
        Some(f) => {
            let (first, count) = call_window(
                args.capture.call,
                args.capture.calls,
                args.capture.warm_calls.as_deref(),
            )?;
            TriggerSetting::Function {
                name: f.raw.clone(),
                at: Some((f.module.clone(), f.address)),
                dlopen: false,
                first,
                count,
                warm: args.capture.warm_calls.clone(),
            }
        }
        None => TriggerSetting::Signal,
    };
    let settings = Settings {
        cache: CacheSetting::Inline {
            name: checked.cache_name,
            json: checked.cache_json,
        },
        output: checked.output.clone(),
        manifest: manifest.clone(),
        threads: threads.clone(),
        argv: program.split('\x1f').map(String::from).collect(),
        mode: args.mode.clone(),
        schedule: args.capture.schedule.clone(),
        line_use: args.capture.line_use,
        objects: args.capture.objects || !args.capture.allocators.is_empty(),
        timeline: args.capture.timeline,
        rseq_commit: rseq_commit_setting().into(),
        client_requests: None,
        cores: args.capture.thread_core.clone(),
        allocators,
        max_instructions: args.capture.instructions,
        trace: checked.trace.clone(),
        reserves: checked.reserves.clone(),
        stop_file: None,
        progress_file: None,
        trigger,
        signal: checked.trigger_signal,
        // The thread that traces (ptrace works per thread): the library
        // tells it from a debugger by this id.
        // SAFETY: gettid has no preconditions.
        attacher: Some(unsafe { libc::gettid() } as u32),
    };
    let mut text = String::new();
    for (k, v) in &settings.pairs() {
        let Some(v) = v.to_str() else {
            bail!("{k}: a value that is not UTF-8 cannot be handed to the process ({v:?})");
        };
        // One line each: a line break in a value (a `python3 -c` script
        // among the program's arguments) travels escaped.
        text += &format!("{k}={}\n", coldcache_capture::settings::to_line(v));
    }

    let interrupts = catch_interrupts()?;
    // Tests only: widens the window between the checks and the seizure,
    // in which the process may end.
    if let Some(ms) = std::env::var("COLDCACHE_TEST_ATTACH_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let done = inject::inject(&target, &lib, &text)?;
    coldcache_fsio::say!(
        "coldcache: attached to {}: {} {}",
        target.who(),
        if done.loaded_now {
            "loaded"
        } else {
            "reusing the loaded"
        },
        done.library
    );
    let exit_fd = pidfd(pid);
    let stop_signal = coldcache_capture::engine::stop_request_signal();
    if now {
        // Opens the capture window at once.
        if queue(
            pid,
            checked.trigger_signal,
            coldcache_capture::doorbell::REQUEST_TRIGGER,
        ) != 0
        {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("signalling {}", target.who()));
        }
        coldcache_fsio::say!(
            "coldcache: capturing; Ctrl-C or `coldcache trigger {pid}` ends the capture"
        );
    } else if args.signal {
        coldcache_fsio::say!(
            "coldcache: start and stop a capture with `coldcache trigger {pid}`; Ctrl-C ends `attach`"
        );
    }
    let started = Instant::now();
    let mut duration_sent = false;
    let mut stopping: Option<Instant> = None;
    let mut maps_looked = Instant::now();
    let written = loop {
        let w = read_manifest(&manifest)?;
        let exited = has_exited(exit_fd, pid);
        let any = !w.dumps.is_empty() || !w.lost.is_empty();
        if exited || (any && !args.signal) {
            break w;
        }
        // The library gone (the program called execve, with nothing of
        // ours left to write a dump): say so instead of waiting forever.
        if maps_looked.elapsed() >= Duration::from_millis(250) {
            maps_looked = Instant::now();
            if library_mapped(pid) == Some(false) && read_manifest(&manifest)?.dumps.is_empty() {
                bail!(
                    "{} no longer has {} mapped (it called execve): the capture was lost",
                    target.who(),
                    done.library
                );
            }
        }
        if let Some(t) = stopping {
            // A capture to stop writes its dump at once; an idle --signal
            // attach has none to wait for.
            if t.elapsed() > Duration::from_secs(if args.signal { 2 } else { 60 }) {
                break w;
            }
        } else if let Some(sig) = interrupted(interrupts) {
            coldcache_fsio::say!("coldcache: {}: stopping the capture", signal_name(sig));
            queue(pid, stop_signal, coldcache_capture::doorbell::REQUEST_STOP);
            stopping = Some(Instant::now());
        } else if let Some(d) = args.duration.filter(|_| !duration_sent) {
            if started.elapsed().as_secs_f64() >= d {
                queue(
                    pid,
                    checked.trigger_signal,
                    coldcache_capture::doorbell::REQUEST_TRIGGER,
                );
                duration_sent = true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (captured, failed_cut) = report_written(
        &written,
        args.capture.no_resolve,
        args.capture.no_sources,
        false,
    );
    if let Some(t) = &args.capture.trace {
        report_partial_trace(t, &written);
    }
    if let Some(e) = write_failure(&written) {
        return Err(e);
    }
    if !captured {
        bail!(
            "no capture was made ({}){}",
            match settings.trigger {
                TriggerSetting::Function { .. } => "the function was not called",
                _ if args.signal => "no trigger signal started one",
                _ => "no instruction was captured",
            },
            if has_exited(exit_fd, pid) {
                "; the process exited"
            } else {
                ""
            }
        );
    }
    if let Some(why) = failed_cut {
        bail!("the capture was cut short, {why}");
    }
    Ok(())
}
