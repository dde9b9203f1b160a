//! `coldcache sim`: runs a cache hierarchy over recorded memory traces
//! (lackey, Dinero IV, cctrace; plain, gzip or zstd) and reports per level,
//! per access kind, and, for the Cachegrind and Cache Lab models, in their
//! own terms.
//!
//! The arguments and the progress bar live here; the replay itself
//! (interleaving, threads → cores, tallies, the reports) is
//! `coldcache-replay`.
//!
//! With `-o`, sim re-simulates instead ("capture once, simulate many"): a
//! trace kept by `coldcache record --trace` becomes a whole dump per
//! `--cache` (`coldcache_replay::resimulate`: one read of the stream, one
//! simulator thread per configuration), each resolved as record resolves
//! its dumps. It is this verb's option rather than a verb of its own
//! because the configuration options (`--cache`, `--I1`/`--D1`/`--LL`,
//! `--straddle`) and the trace options (`--format`, `--skip-bad`) are
//! sim's, and the input is the same trace. What a dump cannot hold (miss
//! classes, Cache Lab's counts, JSON tables) is refused with `-o`.
//! `--placements K` adds each dump's layout-noise band: K more simulations
//! with the regions moved, over the same read
//! (`coldcache_replay::resimulate_with_band`, `docs/noise-band.md`).
//!
//! A `TRACE.partial` (a capture killed while writing its trace) is read up
//! to its cut, with a warning naming the offset; with `-o` its dump lacks
//! the skeleton (no modules, its stacks counted on the root:
//! `coldcache_replay::fold_unknown_stacks`).

use crate::cache_choice::{cache_config, refuse_miss_classes, DEFAULT_CACHE};
use anyhow::{bail, Context, Result};
use coldcache_replay::{parse_pins, replay, CacheLabParams};
use coldcache_sim::{HierarchyConfig, StraddleMode};
use coldcache_trace::Format;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// Cache configuration: a preset (see `coldcache presets`), `host`, or a
    /// TOML file (see docs/cache-config.md). Repeatable with `-o`: one dump
    /// per configuration, simulated in parallel over one read of the trace.
    #[arg(long, default_value = DEFAULT_CACHE, value_name = "PRESET|FILE")]
    cache: Vec<String>,
    /// Write a dump (as `coldcache record` does) instead of printing
    /// tables: one `-o` per `--cache`, in the same order. The trace is
    /// best one kept by `coldcache record --trace` (it carries each
    /// access's instruction, thread and call stack, and the program's
    /// modules); other traces give a flat dump by address.
    #[arg(short = 'o', long = "output", value_name = "DUMP")]
    output: Vec<PathBuf>,
    /// With `-o`: leave the dumps unresolved (no symbols embedded).
    #[arg(long)]
    no_resolve: bool,
    /// With `-o`: do not embed source files when resolving.
    #[arg(long)]
    no_sources: bool,
    /// Cachegrind-style I1 geometry override, e.g. 32768,8,64.
    #[arg(long = "I1", value_name = "SIZE,ASSOC,LINE")]
    i1: Option<String>,
    /// Cachegrind-style D1 geometry override.
    #[arg(long = "D1", value_name = "SIZE,ASSOC,LINE")]
    d1: Option<String>,
    /// Cachegrind-style LL (last level) geometry override.
    #[arg(long = "LL", value_name = "SIZE,ASSOC,LINE")]
    ll: Option<String>,
    /// CS:APP Cache Lab semantics: one LRU cache of 2^S sets, E ways, 2^B-byte
    /// blocks; instruction records ignored; M is a load then a store. Prints
    /// `hits:H misses:M evictions:E`.
    #[arg(long, value_name = "S,E,B", conflicts_with_all = ["cache", "i1", "d1", "ll"])]
    cachelab: Option<String>,
    /// Trace format (lackey, dinero, binary); detected when omitted.
    #[arg(long)]
    format: Option<String>,
    /// Skip and count malformed lines instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
    /// Leave instruction-fetch records out.
    #[arg(long)]
    ignore_ifetch: bool,
    /// Override how accesses straddling lines count: whole or per-line.
    #[arg(long, value_name = "whole|per-line")]
    straddle: Option<String>,
    /// Classify misses as compulsory, capacity or conflict (tables only:
    /// refused with -o).
    #[arg(long)]
    classify_misses: bool,
    /// Records an input runs before the next input takes its turn.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    quantum: u64,
    /// Pin a thread to a core: INPUT[:THREAD]=CORE, INPUT being the trace's
    /// position on the command line (0-based) and THREAD a thread index
    /// within a cctrace file (default 0). Repeatable.
    #[arg(long = "thread-core", value_name = "INPUT[:THREAD]=CORE")]
    thread_core: Vec<String>,
    /// Print machine-readable JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// With -o: the layout-noise band. Also simulates K placements with
    /// the code and data regions moved by random line-aligned offsets, over
    /// the same read of the trace, and keeps each event's totals per
    /// placement in the dump (report shows the band, diff says whether a
    /// change is within it). See docs/noise-band.md.
    #[arg(long, default_value_t = 0, value_name = "K")]
    placements: u32,
    /// The seed the moved placements are drawn from (same seed, same
    /// placements).
    #[arg(long, default_value_t = 1, value_name = "N")]
    seed: u64,
    #[command(flatten)]
    progress: crate::ProgressArgs,
    /// Trace files.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
}

fn parse_cachelab(text: &str) -> Result<CacheLabParams> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let [s, e, b] = parts.as_slice() else {
        bail!("--cachelab {text:?}: expected three numbers S,E,B");
    };
    let num = |what: &str, v: &str| -> Result<u32> {
        v.parse()
            .with_context(|| format!("--cachelab {text:?}: {what} = {v:?} is not a number"))
    };
    Ok((num("S", s)?, num("E", e)?, num("B", b)?))
}

/// The configuration, from `--cachelab` (with its parameters) or `--cache`
/// and its overrides.
fn configuration(args: &SimArgs) -> Result<(HierarchyConfig, Option<CacheLabParams>)> {
    if let Some(cl) = &args.cachelab {
        let (s, e, b) = parse_cachelab(cl)?;
        let cfg = coldcache_config::cachelab(s, e, b)?;
        return Ok((cfg, Some((s, e, b))));
    }
    let [cache] = args.cache.as_slice() else {
        bail!(
            "{} --cache options without -o: several configurations write one dump each \
             (give one -o per --cache)",
            args.cache.len()
        );
    };
    Ok((cache_configuration(args, cache)?, None))
}

/// The configuration `--cache NAME` with the overrides of `args`.
fn cache_configuration(args: &SimArgs, name: &str) -> Result<HierarchyConfig> {
    let mut cfg = cache_config(name, &args.i1, &args.d1, &args.ll)?;
    if let Some(s) = &args.straddle {
        cfg.straddle = match s.as_str() {
            "whole" => StraddleMode::Whole,
            "per-line" | "per_line" => StraddleMode::PerLine,
            other => bail!("--straddle {other:?}: expected whole or per-line"),
        };
    }
    if args.classify_misses {
        cfg.classify_misses = true;
    }
    Ok(cfg)
}

/// The progress bar over `total` bytes (`--progress`/`--no-progress`;
/// by default on a terminal, and hidden under 8 MiB).
fn progress_bar(args: &SimArgs, total_bytes: u64) -> indicatif::ProgressBar {
    // A bar for a trace that takes under a second only flickers, unless
    // asked for.
    if args.progress.asked().is_none() && total_bytes < (8 << 20) {
        indicatif::ProgressBar::hidden()
    } else {
        let pb = args.progress.bar(total_bytes);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} simulating [{bar:40}] {bytes}/{total_bytes} ({eta} left)",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        pb
    }
}

/// `sim -o`: one dump per `--cache` from one read of the trace.
fn resimulate(args: &SimArgs) -> Result<()> {
    let refuse = |what: &str| -> Result<()> { bail!("{what} cannot be combined with -o") };
    if args.cachelab.is_some() {
        refuse("--cachelab")?;
    }
    if args.ignore_ifetch {
        refuse("--ignore-ifetch")?;
    }
    if !args.thread_core.is_empty() {
        refuse("--thread-core")?;
    }
    if args.json {
        refuse("--json")?;
    }
    if args.output.len() != args.cache.len() {
        bail!(
            "{} -o for {} --cache: give one -o per --cache, in the same order",
            args.output.len(),
            args.cache.len()
        );
    }
    let [trace] = args.traces.as_slice() else {
        bail!(
            "-o re-simulates one trace ({} given): simulate them one at a time",
            args.traces.len()
        );
    };
    for (i, a) in args.output.iter().enumerate() {
        if args.output[..i].contains(a) {
            bail!("-o {} is given twice", a.display());
        }
        // Found out now, not after a long trace was simulated for nothing.
        if a.as_os_str() != "-" {
            crate::output_check::check_output(a).context("-o")?;
        }
    }
    let mut targets = Vec::new();
    for name in &args.cache {
        let config = cache_configuration(args, name)?;
        refuse_miss_classes(&config, name, "run sim without -o for its table")?;
        targets.push(coldcache_replay::Target {
            name: name.clone(),
            config,
        });
    }
    let format = args
        .format
        .as_deref()
        .map(str::parse::<Format>)
        .transpose()
        .context("--format")?;
    if args.placements > MAX_PLACEMENTS {
        bail!(
            "--placements {}: at most {MAX_PLACEMENTS} (each is one more simulation of the whole \
             trace)",
            args.placements
        );
    }
    let mut reader = coldcache_trace::open(trace, format)?;
    reader.set_skip_bad(args.skip_bad);
    let name = trace.display().to_string();
    // A trace that cannot hold the regions a band moves is refused now,
    // not after the simulations (`band_possible`); a capture's trace cut
    // short lacks them too unless its dump skeleton was found already
    // (it is written at the end).
    if args.placements > 0 {
        coldcache_replay::band_possible(&name, &reader)?;
        let skeleton = reader.attachment(coldcache_trace::ATTACH_DUMP_SKELETON);
        if is_partial(trace) && skeleton.is_none() {
            bail!(
                "{name}: the layout-noise band (--placements) needs the capture's dump, which a \
                 trace cut short (.partial) lacks (it is written at the end): run sim without \
                 --placements"
            );
        }
    }
    // A capture's trace that did not finish: read up to its cut. It lacks
    // the dump skeleton (written at the end), so the dump has no modules
    // or call stacks; the dump's notes say so.
    let cut = is_partial(trace).then(|| reader.accept_cut());
    let progress = progress_bar(args, reader.total_bytes().unwrap_or(0));
    let mut dumps = coldcache_replay::resimulate_with_band(
        &name,
        reader,
        &targets,
        args.placements,
        args.seed,
        |read, _| progress.set_position(read),
    )?;
    progress.finish_and_clear();
    if let Some(cut) = cut.as_ref().and_then(|c| c.get()) {
        coldcache_fsio::say!(
            "coldcache: warning: {cut}: the capture did not finish; simulated the records \
             before the cut, without the capture's modules and call stacks"
        );
        for d in &mut dumps {
            d.meta.cut_short = Some(format!("the trace was cut ({cut})"));
            // A bare dump (trigger `trace`): the skeleton was not there.
            let bare = d.meta.trigger == "trace";
            if coldcache_replay::fold_unknown_stacks(d) == 0 && bare {
                d.meta.notes.push(
                    "the trace holds no dump skeleton (its capture did not finish): this dump \
                     has no modules (addresses are not resolved to functions)"
                        .to_string(),
                );
            }
        }
    }
    for (dump, out) in dumps.iter().zip(&args.output) {
        crate::write_output(out, &dump.to_bytes())?;
        let text = crate::written::summary(dump, out);
        coldcache_fsio::sigpipe::say(format_args!(
            "{}",
            text.replacen("capture written", "re-simulated dump written", 1)
        ));
        if !args.no_resolve && out.as_os_str() != "-" {
            match crate::resolve_cmd::resolve_file(
                out,
                out,
                &coldcache_symbols::ResolveOptions::default(),
                !args.no_sources,
            ) {
                Ok(text) => coldcache_fsio::sigpipe::say(format_args!("{text}")),
                Err(e) => coldcache_fsio::say!(
                    "coldcache: warning: the dump is left unresolved (run `coldcache resolve {}`): {e:#}",
                    out.display()
                ),
            }
        }
    }
    Ok(())
}

/// A trace a capture was still writing (`NAME.partial`): read up to its
/// cut, said so.
fn is_partial(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e == "partial")
}

/// The most placements `--placements` takes.
const MAX_PLACEMENTS: u32 = 64;

pub fn run(args: SimArgs) -> Result<()> {
    if !args.output.is_empty() {
        return resimulate(&args);
    }
    if args.placements > 0 {
        bail!("--placements makes a dump's layout-noise band: give -o DUMP");
    }
    let (cfg, cachelab) = configuration(&args)?;
    let format = args
        .format
        .as_deref()
        .map(str::parse::<Format>)
        .transpose()
        .context("--format")?;
    let pins = parse_pins(&args.thread_core, args.traces.len(), cfg.cores)?;
    let mut traces = Vec::new();
    let mut total_bytes = 0;
    let mut cuts = Vec::new();
    for path in &args.traces {
        let mut reader = coldcache_trace::open(path, format)?;
        reader.set_skip_bad(args.skip_bad);
        if is_partial(path) {
            cuts.push(reader.accept_cut());
        }
        total_bytes += reader.total_bytes().unwrap_or(0);
        traces.push((path.display().to_string(), reader));
    }
    let progress = progress_bar(&args, total_bytes);
    let opts = coldcache_replay::Options {
        quantum: args.quantum,
        ignore_ifetch: args.ignore_ifetch,
        pins,
        cachelab,
    };
    let outcome = replay(&cfg, traces, &opts, |read, _| progress.set_position(read))?;
    progress.finish_and_clear();
    for cut in cuts.iter().filter_map(|c| c.get()) {
        coldcache_fsio::say!(
            "coldcache: warning: {cut}: the capture did not finish; simulated the records \
             before the cut"
        );
    }

    let out = std::io::stdout();
    let mut out = out.lock();
    if let Some(((s, e, b), cl, ev)) = outcome.cachelab() {
        if args.json {
            let v = json!({
                "cachelab": {"s": s, "E": e, "b": b, "hits": cl.hits, "misses": cl.misses, "evictions": ev},
                "skipped_lines": outcome.skipped(),
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        } else {
            writeln!(
                out,
                "hits:{} misses:{} evictions:{}",
                cl.hits, cl.misses, ev
            )?;
        }
        return Ok(());
    }
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&outcome.json())?)?;
    } else {
        outcome.text(&mut out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cachelab_spec_is_three_numbers() {
        assert_eq!(parse_cachelab("4,2,4").unwrap(), (4, 2, 4));
        assert!(parse_cachelab("4,2").is_err());
        assert!(parse_cachelab("4,x,4").is_err());
    }
}
