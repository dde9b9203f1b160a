//! The `coldcache` command: a thin layer of argument parsing and output over
//! the library crates. Each subcommand lives in its own module; `main` runs
//! one (`valgrind_cmd` also when the binary's name is `valgrind`), prints the whole chain of causes of an error once, and treats a
//! closed stdout (`coldcache sim ... | head`) as success.
//!
//! The command runs on a thread of its own with a [`STACK`]-byte stack, so
//! that `ulimit -s` (the main thread's stack) cannot make it overflow;
//! `SIGXFSZ` is ignored, so a file size limit is an error naming the file
//! (and the temporary file is removed) rather than death by signal. Every
//! file a command writes goes through [`write_output`].

mod attach_cmd;
mod cache_choice;
mod capture_args;
mod export_cmd;
mod output_check;
mod probe_cmd;
mod record_cmd;
mod record_function;
mod record_progress;
mod report_cmd;
mod resolve_cmd;
mod sim_cmd;
mod trigger_cmd;
mod ui_cmd;
mod valgrind_cmd;
mod written;
mod zones_cmd;

use clap::{Parser, Subcommand};
use std::path::Path;
use std::process::ExitCode;

/// See exactly how a program uses the CPU caches.
#[derive(Parser, Debug)]
#[command(name = "coldcache", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Simulate a cache hierarchy over recorded memory traces.
    Sim(Box<sim_cmd::SimArgs>),
    /// List the cache presets.
    Presets,
    /// Run a program and capture its cache behaviour (libcoldcache.so preloaded).
    Record(Box<record_cmd::RecordArgs>),
    /// Capture a process that is already running (libcoldcache.so loaded with ptrace).
    Attach(Box<attach_cmd::AttachArgs>),
    /// Embed symbols (names, inlined frames, lines, instruction bytes) in a dump.
    Resolve(resolve_cmd::ResolveArgs),
    /// Start or stop a capture in a program run by `record --signal`.
    Trigger(trigger_cmd::TriggerArgs),
    /// Measure this machine's caches by timing, and compare with sysfs/CPUID.
    Probe(Box<probe_cmd::ProbeArgs>),
    /// Zones and spikes: view a zones recording, or record a program.
    Zones(Box<zones_cmd::ZonesArgs>),
    /// Show a dump: flat profile, call trees, callers, annotated source, threads.
    Report(Box<report_cmd::ReportArgs>),
    /// Compare two dumps per function or per line.
    Diff(Box<report_cmd::DiffArgs>),
    /// Write a dump as Callgrind, folded stacks, a flame graph, speedscope or JSON.
    Export(Box<export_cmd::ExportArgs>),
    /// Browse one dump, or compare two, in a local web UI.
    Ui(Box<ui_cmd::UiArgs>),
    /// Valgrind's command line for Callgrind and Cachegrind (`--tool=...`,
    /// its options, then the program), writing Valgrind's files; also run
    /// when this binary is invoked as `valgrind` (docs/valgrind.md).
    Valgrind(valgrind_cmd::ValgrindArgs),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Sim(args) => sim_cmd::run(*args),
        Command::Record(args) => record_cmd::run(*args),
        Command::Attach(args) => attach_cmd::run(*args),
        Command::Resolve(args) => resolve_cmd::run(args),
        Command::Trigger(args) => trigger_cmd::trigger(args),
        Command::Probe(args) => probe_cmd::run(*args),
        Command::Zones(args) => zones_cmd::run(*args),
        Command::Report(args) => report_cmd::report(*args),
        Command::Diff(args) => report_cmd::diff(*args),
        Command::Export(args) => export_cmd::run(*args),
        Command::Ui(args) => ui_cmd::run(*args),
        // Dispatched in `command`, before the other errors' handling.
        Command::Valgrind(_) => unreachable!("handled by valgrind_cmd::main"),
        Command::Presets => {
            for (name, about) in coldcache_config::names() {
                println!("{name:<16} {about}");
            }
            Ok(())
        }
    }
}

/// Whether the error is stdout having been closed by the reader.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Writes an output file whole or not at all (`coldcache_fsio`: `-` is
/// standard output, devices and FIFOs are written in place, symbolic links
/// followed), naming the file in the error.
pub(crate) fn write_output(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_output_parts(path, &[bytes])
}

/// [`write_output`] of the file that `parts` make in order.
pub(crate) fn write_output_parts(path: &std::path::Path, parts: &[&[u8]]) -> anyhow::Result<()> {
    use anyhow::Context;
    coldcache_fsio::write_output_parts(path, parts).with_context(|| {
        if path.as_os_str() == "-" {
            "cannot write to standard output".to_string()
        } else {
            format!("cannot write {}", path.display())
        }
    })
}

/// `--progress` and `--no-progress`, meaning the same in every command
/// that shows progress (`record` spells the same pair out): progress on
/// stderr when it is a terminal, `--progress` also when it is not (a log
/// file), `--no-progress` never. The last one given wins.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct ProgressArgs {
    /// Show progress on stderr, even when it is not a terminal (the default
    /// on a terminal).
    #[arg(long, overrides_with = "no_progress")]
    progress: bool,
    /// No progress (the default when stderr is not a terminal).
    #[arg(long, overrides_with = "progress")]
    no_progress: bool,
}

impl ProgressArgs {
    /// Whether progress was asked for explicitly, ruled out, or left to
    /// the terminal: `Some(true)`, `Some(false)`, `None`.
    pub(crate) fn asked(self) -> Option<bool> {
        match (self.progress, self.no_progress) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }

    /// A progress bar on stderr: hidden with `--no-progress`, drawn even
    /// on a file with `--progress`, else where stderr is a terminal.
    pub(crate) fn bar(self, len: u64) -> indicatif::ProgressBar {
        let target = match self.asked() {
            Some(false) => indicatif::ProgressDrawTarget::hidden(),
            Some(true) => {
                indicatif::ProgressDrawTarget::term_like(Box::new(console::Term::stderr()))
            }
            None => indicatif::ProgressDrawTarget::stderr(),
        };
        indicatif::ProgressBar::with_draw_target(Some(len), target)
    }
}

/// Refuses `-` (standard output) for an output that a traced program's run
/// produces: the program writes to the same standard output, so the file
/// would arrive mixed with its output (it used to be written to a file
/// named `-`).
pub(crate) fn refuse_stdout(option: &str, path: &std::path::Path) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        anyhow::bail!(
            "{option} -: the program shares standard output, so a recording cannot be \
             written there; give a file name (`coldcache export`, `zones --format` and \
             `resolve -o -` write to standard output)"
        );
    }
    Ok(())
}

/// Stack of the thread that runs the command. Only touched pages cost
/// memory; deep recursions (clap's parser, the resolver's DWARF walk, the
/// views' trees) stay far from it.
const STACK: usize = 256 << 20;

fn main() -> ExitCode {
    // SAFETY: setting a signal's disposition to SIG_IGN has no
    // preconditions; no handler is installed.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let worker = std::thread::Builder::new()
        .name("coldcache".into())
        .stack_size(STACK)
        .spawn(command);
    match worker.map(|w| w.join()) {
        Ok(Ok(code)) => code,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => {
            coldcache_fsio::say!("coldcache: error: cannot start the command's thread: {e}");
            ExitCode::from(2)
        }
    }
}

/// Parses the arguments and runs the command: the whole program but for
/// the thread it runs on.
fn command() -> ExitCode {
    // Invoked as `valgrind` (a link a benchmark harness runs), or as
    // `coldcache valgrind`: Valgrind's command line, its own exit statuses.
    let mut argv = std::env::args_os();
    let name = argv.next().unwrap_or_default();
    if Path::new(&name)
        .file_name()
        .is_some_and(|n| n == "valgrind")
    {
        return valgrind_cmd::main(argv.collect());
    }
    let cli = Cli::parse();
    if let Command::Valgrind(v) = cli.command {
        return valgrind_cmd::main(v.args);
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<record_cmd::ChildFailed>().is_some() => ExitCode::from(
            e.downcast_ref::<record_cmd::ChildFailed>()
                .map_or(1, |c| c.0),
        ),
        Err(e) => {
            let mut msg = format!("coldcache: error: {e}");
            for cause in e.chain().skip(1) {
                // An error that shows its source in its own text (as
                // thiserror's `{source}` does) would say it twice.
                let cause = cause.to_string();
                if !msg.contains(&cause) {
                    msg.push_str(&format!(": {cause}"));
                }
            }
            coldcache_fsio::say!("{msg}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_files_are_replaced_whole_and_errors_name_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.toml");
        write_output(&p, b"one").unwrap();
        write_output(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let err = write_output(&dir.path().join("no/such/dir.svg"), b"x").unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("cannot write") && msg.contains("no/such/dir.svg"),
            "{msg}"
        );
    }
}
