//! `coldcache zones`: views and exports of a zones recording, and
//! `coldcache zones record -- PROGRAM`, which runs a program with
//! `libcoldcache.so` preloaded (zones from `coldcache.h`, and every
//! function of a `-finstrument-functions` build), then symbolizes the
//! recording and the spike log. Views and exports read the recording
//! chunk by chunk (`coldcache_zones::stream`), never whole.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use coldcache_zones::format::{self, ModuleInfo};
use coldcache_zones::parse::ZoneName;
use coldcache_zones::stream::{self, ZonesFile};
use coldcache_zones::symbols::Symbolizer;
use coldcache_zones::views::{self, Unit};
use coldcache_zones::{export, record, spike};
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `coldcache zones`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ZonesArgs {
    #[command(subcommand)]
    command: Option<ZonesCommand>,
    #[command(flatten)]
    view: ViewArgs,
}

#[derive(Subcommand, Debug)]
enum ZonesCommand {
    /// Run a program with libcoldcache.so preloaded: record its zones and
    /// functions (-finstrument-functions builds), detect spikes.
    Record(RecordArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum View {
    /// Call tree: total, self, calls, min/mean/max, percentiles.
    TopDown,
    /// Self time of each zone, split by its callers.
    BottomUp,
    /// One row per zone.
    Flat,
    /// Every zone instance per thread, in time order.
    Timeline,
    /// Only what did not add up in the recording.
    Problems,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum OutFormat {
    /// Tables.
    Text,
    /// Chrome / Perfetto trace event JSON.
    Chrome,
    /// speedscope JSON.
    Speedscope,
    /// Folded stacks (flamegraph.pl, inferno).
    Folded,
    /// Flame graph SVG.
    Flamegraph,
    /// Graphviz DOT of the call tree.
    Dot,
}

#[derive(Args, Debug)]
struct ViewArgs {
    /// A zones recording (from `coldcache zones record`, COLDCACHE_ZONES_OUT
    /// or coldcache_write()).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// Which view (text format).
    #[arg(long, value_enum, default_value = "top-down")]
    view: View,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: OutFormat,
    /// Time unit: clocks, ns, us, ms or s (per byte: clocks or ns per byte).
    #[arg(long, default_value = "ms")]
    unit: String,
    /// Only this thread (recorder index, OS thread id or name); the default
    /// is each thread in turn, and `all` merges them.
    #[arg(long)]
    thread: Option<String>,
    /// Write the output here instead of stdout (atomically).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Do not read binaries to name function addresses.
    #[arg(long)]
    no_symbols: bool,
    /// Timeline: most zones to list per thread.
    #[arg(long, default_value_t = 200)]
    limit: usize,
}

#[derive(Args, Debug)]
struct RecordArgs {
    /// Global spike threshold (e.g. 1ms, 500us); no spike detection without.
    #[arg(long, value_name = "DURATION")]
    threshold: Option<String>,
    /// Per-zone threshold by name (zone label or exported function name).
    #[arg(long = "zone-threshold", value_name = "NAME=DURATION")]
    zone_threshold: Vec<String>,
    /// Where to write the recording (default coldcache-PROGRAM.zones).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write the full symbolized spike log here (default: OUTPUT.spikes.log
    /// beside the recording; stderr gets a summary).
    #[arg(long, value_name = "FILE")]
    spike_log: Option<PathBuf>,
    /// Also write the spike log as JSON lines here.
    #[arg(long, value_name = "FILE")]
    spike_json: Option<PathBuf>,
    /// Write the recording only at exit, instead of streaming full chunks
    /// to the file from a background thread while the program runs (which
    /// reuses written chunks, so memory stays bounded by --arena).
    #[arg(long)]
    no_stream: bool,
    /// Recording arena size (e.g. 256M, 4G); events past it are dropped.
    #[arg(long, value_name = "SIZE")]
    arena: Option<String>,
    /// Spike detection only: do not record events.
    #[arg(long)]
    no_record: bool,
    /// The program and its arguments (after `--`, or without it: every
    /// word from the program on is the program's).
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    program: Vec<String>,
}

/// Runs `coldcache zones ...`.
pub fn run(args: ZonesArgs) -> Result<()> {
    match args.command {
        Some(ZonesCommand::Record(r)) => record_cmd(r),
        None => view_cmd(args.view),
    }
}

/// Largest zones file read. The format states no limit (a streamed
/// recording grows with the run); this one only stops a wrong file.
const MAX_ZONES_FILE: u64 = 64 << 30;

/// Opens and indexes a recording, section by section (it is never held
/// whole: `coldcache_zones::stream`). Only a regular file is read, and
/// its magic is checked first: a file of another kind is refused after 8
/// bytes, whatever its size (`/proc/self/pagemap` reads without end).
fn open_zones(path: &Path) -> Result<ZonesFile> {
    let what = || format!("cannot read {}", path.display());
    let (mut file, size) = coldcache_fsio::open_regular(path).with_context(what)?;
    if size > MAX_ZONES_FILE {
        return Err(coldcache_fsio::ReadError::TooLarge(MAX_ZONES_FILE)).with_context(what);
    }
    let mut head = [0u8; 8];
    let got = coldcache_fsio::read::read_up_to(&mut file, &mut head).with_context(what)?;
    coldcache_fsio::check_magic(&head[..got], format::MAGIC, "a coldcache zones file")
        .with_context(what)?;
    let z = ZonesFile::open(file, size).with_context(what)?;
    if let Some(e) = &z.index.tables.error {
        if z.index.chunks.is_empty() && z.index.tables.labels.is_empty() {
            bail!("{}: {e}", path.display());
        }
    }
    Ok(z)
}

/// After the scan: warns about the problems, names the functions.
fn warn_and_name(z: &mut ZonesFile, path: &Path, symbols: bool) {
    for p in &z.rec.problems {
        coldcache_fsio::say!("coldcache: warning: {}: {p}", path.display());
    }
    if symbols {
        for f in z.symbolize() {
            coldcache_fsio::say!("coldcache: warning: cannot read symbols of {f}");
        }
    }
}

/// Writes to `-o` atomically, or to standard output, through `fill`.
fn emit(
    output: Option<&Path>,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    match output {
        Some(p) if p.as_os_str() != "-" => coldcache_fsio::write_atomically_with(p, |f| {
            let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
            fill(&mut w)?;
            w.flush()
        })
        .with_context(|| format!("cannot write {}", p.display())),
        _ => {
            let out = std::io::stdout();
            let mut w = std::io::BufWriter::with_capacity(1 << 16, out.lock());
            fill(&mut w)
                .and_then(|()| w.flush())
                .context("cannot write to standard output")
        }
    }
}

fn view_cmd(a: ViewArgs) -> Result<()> {
    let Some(path) = a.file.clone() else {
        bail!("give a zones recording: coldcache zones FILE, or coldcache zones record -- PROGRAM");
    };
    let unit: Unit = a.unit.parse().map_err(anyhow::Error::msg)?;
    let mut z = open_zones(&path)?;
    let symbols = !a.no_symbols;
    let sel: Vec<usize> = (0..z.rec.threads.len())
        .filter(|&i| match a.thread.as_deref() {
            None | Some("all") => true,
            Some(sel) => {
                let t = &z.rec.threads[i];
                t.index.to_string() == sel || t.tid.to_string() == sel || t.name == sel
            }
        })
        .collect();
    if sel.is_empty() && matches!(a.thread.as_deref(), Some(t) if t != "all") {
        for pos in 0..z.rec.threads.len() {
            z.scan(pos, &mut ())?;
        }
        z.finish_scan();
        warn_and_name(&mut z, &path, symbols);
        bail!(
            "{}: no thread {:?} in the recording",
            path.display(),
            a.thread.as_deref().unwrap_or("")
        );
    }
    let name = |z: &mut ZonesFile| warn_and_name(z, &path, symbols);
    let output = a.output.as_deref();
    match a.format {
        OutFormat::Chrome => emit(output, |w| stream::chrome(&mut z, &sel, name, &mut { w })),
        OutFormat::Speedscope => {
            let file_name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            emit(output, |w| {
                stream::speedscope(&mut z, &sel, &file_name, name, &mut { w })
            })
        }
        OutFormat::Folded | OutFormat::Flamegraph | OutFormat::Dot => {
            // Trees of distinct call paths: one per thread, or merged (dot).
            let dot = a.format == OutFormat::Dot;
            let mut trees: Vec<views::Tree> = Vec::new();
            let mut merged = views::Tree::new();
            for pos in 0..z.rec.threads.len() {
                if !sel.contains(&pos) {
                    z.scan(pos, &mut ())?;
                } else if dot {
                    z.scan(pos, &mut views::TopDownFeed::new(&mut merged, false))?;
                } else {
                    let mut t = views::Tree::new();
                    z.scan(pos, &mut views::TopDownFeed::new(&mut t, false))?;
                    trees.push(t);
                }
            }
            z.finish_scan();
            name(&mut z);
            let out = if dot {
                views::finish_tree(&mut merged);
                export::dot_tree(&merged, &z.rec, unit).into_bytes()
            } else {
                let folded_unit = if a.format == OutFormat::Flamegraph {
                    Unit::Ns
                } else {
                    unit
                };
                let mut folded = String::new();
                for (t, &pos) in trees.iter().zip(&sel) {
                    let label = z.rec.threads[pos].label();
                    export::folded_tree(t, &z.rec, folded_unit, &label, &mut folded);
                }
                if a.format == OutFormat::Flamegraph {
                    export::flamegraph_of(&folded, &path.display().to_string()).with_context(
                        || format!("cannot draw a flame graph of {}", path.display()),
                    )?
                } else {
                    folded.into_bytes()
                }
            };
            emit(output, |w| w.write_all(&out))
        }
        OutFormat::Text => {
            let text = text_view(&mut z, &sel, &a, unit, &path)?;
            emit(output, |w| w.write_all(text.as_bytes()))
        }
    }
}

/// The text views, aggregated while the threads are scanned (no zone
/// instance is kept but the timeline's first `--limit`).
fn text_view(
    z: &mut ZonesFile,
    sel: &[usize],
    a: &ViewArgs,
    unit: Unit,
    path: &Path,
) -> Result<String> {
    let merged = a.thread.as_deref() == Some("all");
    let n = z.rec.threads.len();
    // The group (of `sel`) each thread feeds.
    let group_of = |pos: usize| -> Option<usize> {
        let i = sel.iter().position(|&p| p == pos)?;
        Some(if merged { 0 } else { i })
    };
    let groups = if merged { 1 } else { sel.len() };
    let mut trees: Vec<views::Tree> = (0..groups).map(|_| views::Tree::new()).collect();
    let mut flats: Vec<views::FlatFeed> = (0..groups).map(|_| Default::default()).collect();
    let mut timelines: Vec<Option<views::TimelineFeed>> = (0..n).map(|_| None).collect();
    for (pos, timeline) in timelines.iter_mut().enumerate() {
        match (a.view, group_of(pos)) {
            (View::TopDown, Some(g)) => {
                z.scan(pos, &mut views::TopDownFeed::new(&mut trees[g], true))?
            }
            (View::BottomUp, Some(g)) => {
                z.scan(pos, &mut views::BottomUpFeed::new(&mut trees[g]))?
            }
            (View::Flat, Some(g)) => z.scan(pos, &mut flats[g])?,
            (View::Timeline, Some(_)) => {
                let mut f = views::TimelineFeed::new(a.limit);
                z.scan(pos, &mut f)?;
                *timeline = Some(f);
            }
            _ => z.scan(pos, &mut ())?,
        }
    }
    z.finish_scan();
    warn_and_name(z, path, !a.no_symbols);
    let rec = &z.rec;
    let mut out = String::new();
    if a.view == View::Problems {
        for p in &rec.problems {
            out.push_str(&format!("{p}\n"));
        }
        if rec.problems.is_empty() {
            out.push_str("no problems\n");
        }
        return Ok(out);
    }
    let titles: Vec<(String, Vec<usize>)> = if merged {
        vec![("all threads".into(), sel.to_vec())]
    } else {
        sel.iter()
            .map(|&p| {
                let t = &rec.threads[p];
                (
                    format!("{} (index {}, tid {})", t.label(), t.index, t.tid),
                    vec![p],
                )
            })
            .collect()
    };
    for ((title, members), (tree, flat)) in titles.into_iter().zip(trees.iter_mut().zip(flats)) {
        out.push_str(&format!("== {title}\n"));
        match a.view {
            View::TopDown | View::BottomUp => {
                views::finish_tree(tree);
                views::render_tree(tree, rec, unit, &mut out)
            }
            View::Flat => views::render_flat(&flat.rows(), rec, unit, &mut out),
            View::Timeline => {
                for p in members {
                    if let Some(f) = &timelines[p] {
                        views::render_timeline_spans(&f.spans, f.count, rec, unit, &mut out)
                    }
                }
            }
            View::Problems => {}
        }
        out.push('\n');
    }
    Ok(out)
}

fn record_cmd(a: RecordArgs) -> Result<()> {
    let lib = crate::record_cmd::find_library()?;
    if let Some(t) = &a.threshold {
        if spike::parse_duration_ms(t).is_none() {
            bail!("--threshold {t:?} is not a duration (e.g. 1ms, 500us, 0.2s)");
        }
    }
    for z in &a.zone_threshold {
        if z.split_once('=')
            .and_then(|(_, d)| spike::parse_duration_ms(d))
            .is_none()
        {
            bail!("--zone-threshold {z:?} is not NAME=DURATION (e.g. tick=16ms)");
        }
    }
    if let Some(s) = &a.arena {
        record::arena_size(s).map_err(|e| anyhow::anyhow!("--arena {e}"))?;
    }
    let program = &a.program[0];
    let base = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into());
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("coldcache-{base}.zones")));
    // Found out before the program runs, not after.
    crate::refuse_stdout("-o", &output)?;
    crate::output_check::check_output(&output).context("-o")?;
    let dir = tempfile::Builder::new()
        .prefix("coldcache-zones-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    // The program writes its recording (and, streaming, the `.partial` it
    // grows) beside the output, so a run cut short leaves it where the
    // user looks; a device, FIFO or `-` as output: in the directory above.
    let beside =
        std::fs::metadata(&output).map_or(true, |m| m.is_file()) && output.as_os_str() != "-";
    let out_pattern = if beside {
        let mut p = output.clone().into_os_string();
        p.push(".%p");
        PathBuf::from(p)
    } else {
        dir.path().join("rec.%p.zones")
    };
    let mut preload = lib.display().to_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD") {
        preload = format!("{preload}:{}", old.to_string_lossy());
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(&a.program[1..])
        .env("LD_PRELOAD", &preload)
        .env("COLDCACHE_ZONES_OUT", &out_pattern)
        .env("COLDCACHE_SPIKE_JSON", dir.path().join("spikes.%p.jsonl"))
        .env("COLDCACHE_SPIKE_LOG", "off")
        .env("COLDCACHE_ZONES_REPORT", dir.path().join("report.%p"));
    if let Some(t) = &a.threshold {
        cmd.env("COLDCACHE_SPIKE_THRESHOLD", t);
    }
    if !a.zone_threshold.is_empty() {
        cmd.env("COLDCACHE_SPIKE_ZONES", a.zone_threshold.join(","));
    }
    if !a.no_stream {
        cmd.env("COLDCACHE_ZONES_STREAM", "1");
    }
    if let Some(s) = &a.arena {
        cmd.env("COLDCACHE_ZONES_ARENA", s);
    }
    if a.no_record {
        cmd.env("COLDCACHE_ZONES", "0");
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {program}"))?;
    let pid = child.id();
    let status = child
        .wait()
        .with_context(|| format!("waiting for {program}"))?;
    let rec_path = PathBuf::from(
        out_pattern
            .to_string_lossy()
            .replace("%p", &pid.to_string()),
    );
    let spikes_path = dir.path().join(format!("spikes.{pid}.jsonl"));
    // Why the program could not write its recording, if it could not
    // (the library's own words: the file and the operating system's error).
    let write_error = std::fs::read_to_string(dir.path().join(format!("report.{pid}")))
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    let mut modules: Vec<ModuleInfo> = Vec::new();
    if rec_path.is_file() {
        let summary = std::fs::File::open(&rec_path)
            .map_err(anyhow::Error::from)
            .and_then(|f| Ok(format::summarize(&mut std::io::BufReader::new(f))?))
            .with_context(|| format!("cannot read the recording {}", rec_path.display()))?;
        modules = summary.tables.modules.clone();
        // A rename when it can (same file system), else a copy; a device
        // or FIFO is written in place.
        coldcache_fsio::move_file(&rec_path, &output)
            .with_context(|| format!("cannot write {}", output.display()))?;
        coldcache_fsio::say!(
            "coldcache: {} events from {} thread(s) recorded in {}{}",
            summary.events,
            summary.tables.threads.len(),
            output.display(),
            summary
                .tables
                .info
                .as_ref()
                .filter(|i| i.dropped_events > 0)
                .map(|i| format!(
                    " ({} dropped: the arena was full, see --arena)",
                    i.dropped_events
                ))
                .unwrap_or_default()
        );
    } else if let Some(kept) = keep_partial(&rec_path, pid, &output) {
        coldcache_fsio::say!("coldcache: {program} {}{kept}", ended(&status));
    } else if write_error.is_none() {
        coldcache_fsio::say!(
            "coldcache: {program} wrote no recording (it did not exit normally, was not dynamically linked, or never reached an instrumented function or zone)"
        );
    }
    if a.threshold.is_some() {
        let lines = std::fs::read_to_string(&spikes_path).unwrap_or_default();
        let log = render_spikes(&lines, modules)?;
        // The full log to a file, a summary to stderr (a busy program
        // spikes by the thousand); with no file beside the output (a
        // device, `-`), all of it to stderr.
        let log_path = a.spike_log.clone().or_else(|| {
            beside.then(|| {
                let mut p = output.clone().into_os_string();
                p.push(".spikes.log");
                PathBuf::from(p)
            })
        });
        match &log_path {
            Some(p) => {
                crate::write_output(p, log.text.as_bytes())?;
                let mut summary = log.summary;
                if log.spikes > 0 {
                    summary.push_str(&format!(
                        "coldcache spike: the full log is in {}\n",
                        p.display()
                    ));
                }
                std::io::stderr().write_all(summary.as_bytes())?;
            }
            None => std::io::stderr().write_all(log.text.as_bytes())?,
        }
        if let Some(p) = &a.spike_json {
            crate::write_output(p, log.json.as_bytes())?;
        }
    }
    if let (true, Some(why)) = (status.success(), &write_error) {
        bail!(
            "{} was not written: the program could not write its recording ({why})",
            output.display()
        );
    }
    if !status.success() {
        match status.code() {
            Some(c) => {
                // exit() runs no destructors: remove the directory first.
                drop(dir);
                std::process::exit(c)
            }
            None => bail!("{program} was killed by a signal ({status})"),
        }
    }
    Ok(())
}

/// The partial recording a streaming program left at `rec_path` when it
/// ended without writing the whole file (a crash, `SIGKILL`, `_exit`),
/// renamed to OUTPUT`.partial`; what to tell the user, or `None` when
/// there is none.
fn keep_partial(rec_path: &Path, pid: u32, output: &Path) -> Option<String> {
    let mut partial = rec_path.as_os_str().to_owned();
    partial.push(format!(".{pid}.partial"));
    let partial = PathBuf::from(partial);
    if !partial.is_file() {
        return None;
    }
    let events = std::fs::File::open(&partial)
        .ok()
        .and_then(|f| format::summarize(&mut std::io::BufReader::new(f)).ok())
        .map(|s| s.events);
    let mut kept = output.as_os_str().to_owned();
    kept.push(".partial");
    let mut kept = PathBuf::from(kept);
    if output.as_os_str() == "-" || std::fs::rename(&partial, &kept).is_err() {
        kept = partial;
    }
    Some(format!(
        "; what was streamed so far ({} events) is in {}: it reads as truncated (`coldcache zones {}`)",
        events.map_or_else(|| "?".to_string(), |n| n.to_string()),
        kept.display(),
        kept.display()
    ))
}

/// How a program ended, for a message ("was killed by signal 9 (SIGKILL)").
fn ended(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (_, Some(sig)) => format!(
            "was killed by signal {sig} ({}) before writing its recording",
            crate::trigger_cmd::signal_name(sig)
        ),
        (Some(c), _) => format!("exited with status {c} without writing its recording"),
        _ => "ended without writing its recording".to_string(),
    }
}

fn frame_name(
    f: &Value,
    sym: &mut Symbolizer,
    cache: &mut HashMap<u64, Option<ZoneName>>,
) -> (String, String, u64) {
    match f["kind"].as_str() {
        Some("function") => {
            let addr = f["addr"].as_u64().unwrap_or(0);
            let n = cache
                .entry(addr)
                .or_insert_with(|| sym.resolve(addr))
                .clone();
            match n {
                Some(n) => (n.name, n.file, n.line as u64),
                None => (format!("0x{addr:x}"), String::new(), 0),
            }
        }
        _ => (
            f["name"].as_str().unwrap_or("?").to_string(),
            f["file"].as_str().unwrap_or("").to_string(),
            f["line"].as_u64().unwrap_or(0),
        ),
    }
}

fn place(name: &str, file: &str, line: u64) -> String {
    if file.is_empty() {
        name.to_string()
    } else {
        format!("{name} ({file}:{line})")
    }
}

/// A symbolized spike log.
pub struct SpikeLog {
    /// The full text log, suggestions at its end.
    pub text: String,
    /// Symbolized JSON lines.
    pub json: String,
    /// Counts and the suggestions, for stderr.
    pub summary: String,
    /// Spike records.
    pub spikes: usize,
}

/// Suggestions listed in the stderr summary, per kind.
const SUMMARY_ROWS: usize = 10;

/// Turns the library's JSON lines (addresses) into the symbolized text log,
/// symbolized JSON lines, and the suggestions of functions worth marking
/// up; peaks during which the thread was descheduled (it ran at most the
/// threshold: `"descheduled": true`) are listed apart from those that ran.
pub fn render_spikes(lines: &str, modules: Vec<ModuleInfo>) -> Result<SpikeLog> {
    let mut sym = Symbolizer::new(modules);
    let mut cache = HashMap::new();
    let mut text = String::new();
    let mut json = String::new();
    // (place, spikes, ms) of peaks that ran, and of descheduled ones.
    let mut peaks: Vec<(String, u64, f64)> = Vec::new();
    let mut off: Vec<(String, u64, f64)> = Vec::new();
    let mut n = 0;
    for (i, line) in lines.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut v: Value = serde_json::from_str(line)
            .with_context(|| format!("spike log line {} is not JSON", i + 1))?;
        n += 1;
        let mut names = Vec::new();
        if let Some(stack) = v["stack"].as_array_mut() {
            for f in stack.iter_mut() {
                let (name, file, line) = frame_name(f, &mut sym, &mut cache);
                f["name"] = Value::from(name.clone());
                f["file"] = Value::from(file.clone());
                f["line"] = Value::from(line);
                names.push(place(&name, &file, line));
            }
        }
        let ms = v["duration_ms"].as_f64().unwrap_or(0.0);
        let thr = v["threshold_ms"].as_f64().unwrap_or(0.0);
        let thread = v["thread"].as_str().unwrap_or("?").to_string();
        let tid = v["tid"].as_u64().unwrap_or(0);
        let depth = v["depth"].as_u64().unwrap_or(0) as usize;
        let descheduled = v["descheduled"].as_bool() == Some(true);
        let mark = if descheduled {
            format!(
                "  DESCHEDULED (the thread ran {:.3} ms of it at most)",
                v["cpu_ms"].as_f64().unwrap_or(0.0)
            )
        } else {
            String::new()
        };
        if v["peak"].as_bool() == Some(true) {
            text.push_str(&format!(
                "coldcache spike: zone took too long: {ms:.3} ms (threshold {thr:.3} ms)  thread: {thread} (tid {tid})  PEAK CHILD @ frame {}{mark}\n  zone stack:\n",
                v["frame"].as_u64().unwrap_or(0)
            ));
            for (i, n) in names.iter().enumerate() {
                text.push_str(&format!("    {i}) {n}\n"));
            }
            if let Some(last) = names.last() {
                let list = if descheduled { &mut off } else { &mut peaks };
                match list.iter_mut().find(|p| &p.0 == last) {
                    Some(p) => {
                        p.1 += 1;
                        p.2 += ms;
                    }
                    None => list.push((last.clone(), 1, ms)),
                }
            }
        } else {
            text.push_str(&format!(
                "coldcache spike: thread {thread} (tid {tid}) zone took too long: {ms:.3} ms (threshold {thr:.3} ms){mark}\n    {depth}) {}\n",
                names.get(depth).map(String::as_str).unwrap_or("?")
            ));
        }
        for key in ["description", "message"] {
            if let Some(m) = v[key].as_str() {
                text.push_str(&format!("  {key}: {m}\n"));
            }
        }
        json.push_str(&serde_json::to_string(&v)?);
        json.push('\n');
    }
    let mut summary = String::new();
    if n == 0 {
        text.push_str("coldcache spike: nothing over the threshold\n");
        summary.push_str("coldcache spike: nothing over the threshold\n");
    } else {
        let count = |l: &[(String, u64, f64)]| -> (u64, f64) {
            l.iter().fold((0, 0.0), |a, p| (a.0 + p.1, a.1 + p.2))
        };
        let (ran, ran_ms) = count(&peaks);
        let (des, des_ms) = count(&off);
        summary.push_str(&format!(
            "coldcache spike: {n} zone(s) over their threshold; {} spike(s) at their deepest zone: {ran} where the code ran ({ran_ms:.3} ms), {des} where the thread was descheduled ({des_ms:.3} ms: asleep, blocked or preempted)\n",
            ran + des
        ));
        for (list, head) in [
            (&mut peaks, "coldcache spike: worth marking up (the deepest function or zone of each spike; add zones inside them, or give them their own threshold):\n"),
            (&mut off, "coldcache spike: descheduled, not slow code (the thread ran at most the threshold of these zones: asleep, blocked or preempted the rest):\n"),
        ] {
            if list.is_empty() {
                continue;
            }
            list.sort_by(|a, b| b.2.total_cmp(&a.2));
            text.push_str(head);
            summary.push_str(head);
            for (i, (name, count, ms)) in list.iter().enumerate() {
                let row = format!("    {name} — {count} spike(s), {ms:.3} ms in all\n");
                text.push_str(&row);
                if i < SUMMARY_ROWS {
                    summary.push_str(&row);
                } else if i == SUMMARY_ROWS {
                    summary.push_str(&format!("    ... {} more in the full log\n", list.len() - SUMMARY_ROWS));
                }
            }
        }
    }
    Ok(SpikeLog {
        text,
        json,
        summary,
        spikes: n,
    })
}
