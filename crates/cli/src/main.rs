//! The `coldcache` command: a thin layer of argument parsing and output over
//! the library crates. Each subcommand lives in its own module; `main` runs
//! one, prints the whole chain of causes of an error once, and treats a
//! closed stdout (`coldcache sim ... | head`) as success.

mod export_cmd;
mod probe_cmd;
mod record_cmd;
mod report_cmd;
mod resolve_cmd;
mod sim_cmd;
mod ui_cmd;
mod zones_cmd;

use clap::{Parser, Subcommand};
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
    /// Embed symbols (names, inlined frames, lines, instruction bytes) in a dump.
    Resolve(resolve_cmd::ResolveArgs),
    /// Start or stop a capture in a program run by `record --signal`.
    Trigger(record_cmd::TriggerArgs),
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
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Sim(args) => sim_cmd::run(*args),
        Command::Record(args) => record_cmd::run(*args),
        Command::Resolve(args) => resolve_cmd::run(args),
        Command::Trigger(args) => record_cmd::trigger(args),
        Command::Probe(args) => probe_cmd::run(*args),
        Command::Zones(args) => zones_cmd::run(*args),
        Command::Report(args) => report_cmd::report(*args),
        Command::Diff(args) => report_cmd::diff(*args),
        Command::Export(args) => export_cmd::run(*args),
        Command::Ui(args) => ui_cmd::run(*args),
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<record_cmd::ChildFailed>().is_some() => ExitCode::from(
            e.downcast_ref::<record_cmd::ChildFailed>()
                .map_or(1, |c| c.0),
        ),
        Err(e) => {
            eprint!("coldcache: error: {e}");
            for cause in e.chain().skip(1) {
                eprint!(": {cause}");
            }
            eprintln!();
            ExitCode::from(2)
        }
    }
}
