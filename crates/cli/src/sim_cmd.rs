//! `coldcache sim`: runs a cache hierarchy over recorded memory traces
//! (lackey, Dinero IV, cctrace; plain, gzip or zstd) and reports per level,
//! per access kind, and, for the Cachegrind and Cache Lab models, in their
//! own terms.
//!
//! Every input file is one thread (a cctrace file may hold several); inputs
//! take turns of `--quantum` records, so the simulated cores see their
//! accesses interleaved. Threads map to cores round-robin unless pinned with
//! `--thread-core`. Each input is parsed on a thread of its own and handed
//! over in batches, so parsing overlaps simulation.

use anyhow::{bail, Context, Result};
use coldcache_sim::{
    Access, AccessKind, CoreMap, Hierarchy, HierarchyConfig, LevelStats, ServedBy, StraddleMode,
    MAX_LEVELS,
};
use coldcache_trace::{Format, Record, RecordKind, TraceError, TraceReader};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// Cache configuration: a preset (see `coldcache presets`), `host`, or a
    /// TOML file (see docs/cache-config.md).
    #[arg(long, default_value = "cachegrind", value_name = "PRESET|FILE")]
    cache: String,
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
    /// Classify misses as compulsory, capacity or conflict.
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
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Trace files.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
}

/// Counts of records by kind and by the level that served their lines.
#[derive(Default)]
struct Tally {
    records: [u64; 7],
    served: [[u64; MAX_LEVELS + 1]; 7],
    ignored_ifetch: u64,
}

fn kind_index(k: RecordKind) -> usize {
    RecordKind::ALL.iter().position(|&x| x == k).unwrap_or(0)
}

fn access_kind(k: RecordKind) -> AccessKind {
    match k {
        RecordKind::Instr => AccessKind::InstrFetch,
        RecordKind::Load => AccessKind::Read,
        RecordKind::Store => AccessKind::Write,
        RecordKind::Modify => AccessKind::ReadModifyWrite,
        RecordKind::Prefetch => AccessKind::Prefetch,
        RecordKind::NtStore => AccessKind::NonTemporalStore,
        RecordKind::Flush => AccessKind::Flush,
    }
}

/// The size Cachegrind simulates for a data access that lackey logged with
/// `size`: at most the smallest line size of its caches. Cachegrind refuses
/// lines narrower than the widest register, so only Valgrind's "dirty
/// helper" accesses (fxsave 512 B, fnsave 108 B, fnstenv 28 B, ...) are
/// ever cut; lackey logs their full size.
fn cachegrind_data_size(size: u32, min_line: u32) -> u32 {
    size.min(min_line)
}

/// Records per batch a reader thread parses and hands over.
const BATCH: usize = 1 << 16;

/// A batch parsed on an input's reader thread; an empty batch ends the
/// input.
struct Batch {
    records: Vec<Record>,
    bytes_read: u64,
    skipped: u64,
}

/// One trace being read: its reader runs on a thread of its own, so that
/// parsing (the larger cost for text traces) overlaps simulation.
struct Input {
    name: String,
    /// Cachegrind's clamp of data sizes to its smallest line size (lackey
    /// input simulated with the `cachegrind` preset), or `u32::MAX`.
    clamp: u32,
    batches: mpsc::Receiver<Result<Batch, TraceError>>,
    /// Emptied batches go back to the reader thread for reuse.
    spent: mpsc::SyncSender<Vec<Record>>,
    buf: Vec<Record>,
    pos: usize,
    done: bool,
    bytes_read: u64,
    total_bytes: Option<u64>,
    skipped: u64,
}

impl Input {
    fn new(name: String, clamp: u32, mut reader: TraceReader) -> Input {
        let total_bytes = reader.total_bytes();
        let (tx, batches) = mpsc::sync_channel(4);
        let (spent, spent_rx) = mpsc::sync_channel::<Vec<Record>>(8);
        std::thread::Builder::new()
            .name(format!("read {name}"))
            .spawn(move || loop {
                let mut records = spent_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                let batch = reader.read_batch(&mut records, BATCH).map(|n| Batch {
                    records: if n == 0 { Vec::new() } else { records },
                    bytes_read: reader.bytes_read(),
                    skipped: reader.skipped(),
                });
                let last = !matches!(&batch, Ok(b) if !b.records.is_empty());
                if tx.send(batch).is_err() || last {
                    break;
                }
            })
            .expect("spawn a trace reader thread");
        Input {
            name,
            clamp,
            batches,
            spent,
            buf: Vec::new(),
            pos: 0,
            done: false,
            bytes_read: 0,
            total_bytes,
            skipped: 0,
        }
    }

    /// The next record, taking the next batch when needed.
    #[inline]
    fn next(&mut self) -> Result<Option<Record>> {
        if self.pos == self.buf.len() {
            if self.done {
                return Ok(None);
            }
            let _ = self.spent.try_send(std::mem::take(&mut self.buf));
            self.pos = 0;
            let batch = self.batches.recv().map_err(|_| {
                anyhow::anyhow!("{}: the reader thread stopped unexpectedly", self.name)
            })??;
            self.bytes_read = batch.bytes_read;
            self.skipped = batch.skipped;
            if batch.records.is_empty() {
                self.done = true;
                return Ok(None);
            }
            self.buf = batch.records;
        }
        let r = self.buf[self.pos];
        self.pos += 1;
        Ok(Some(r))
    }
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

/// (input, thread) → core pins from `--thread-core`.
fn parse_pins(specs: &[String], inputs: usize, cores: usize) -> Result<Vec<(u64, usize)>> {
    let mut pins = Vec::new();
    for spec in specs {
        let bad = |why: &str| anyhow::anyhow!("--thread-core {spec:?}: {why}");
        let (who, core) = spec
            .split_once('=')
            .ok_or_else(|| bad("expected INPUT[:THREAD]=CORE"))?;
        let (input, thread) = match who.split_once(':') {
            Some((i, t)) => (i, t),
            None => (who, "0"),
        };
        let input: usize = input
            .trim()
            .parse()
            .map_err(|_| bad("INPUT is not a number"))?;
        let thread: u32 = thread
            .trim()
            .parse()
            .map_err(|_| bad("THREAD is not a number"))?;
        let core: usize = core
            .trim()
            .parse()
            .map_err(|_| bad("CORE is not a number"))?;
        if input >= inputs {
            return Err(bad(&format!(
                "there are only {inputs} traces (numbered from 0)"
            )));
        }
        if core >= cores {
            return Err(bad(&format!(
                "the configuration has {cores} cores (numbered from 0)"
            )));
        }
        pins.push((thread_key(input, thread), core));
    }
    Ok(pins)
}

fn thread_key(input: usize, thread: u32) -> u64 {
    ((input as u64) << 32) | u64::from(thread)
}

/// Cache Lab's `-s S -E E -b B`.
type CacheLabParams = (u32, u32, u32);

/// The configuration, from `--cachelab` (with its parameters) or `--cache`
/// and its overrides.
fn configuration(args: &SimArgs) -> Result<(HierarchyConfig, Option<CacheLabParams>)> {
    if let Some(cl) = &args.cachelab {
        let (s, e, b) = parse_cachelab(cl)?;
        let cfg = coldcache_config::cachelab(s, e, b)?;
        return Ok((cfg, Some((s, e, b))));
    }
    let mut cfg = coldcache_config::resolve(&args.cache)?;
    let geo = |opt: &str, v: &Option<String>| {
        v.as_deref()
            .map(|t| coldcache_config::parse_valgrind_option(opt, t))
            .transpose()
    };
    let (i1, d1, ll) = (
        geo("--I1", &args.i1)?,
        geo("--D1", &args.d1)?,
        geo("--LL", &args.ll)?,
    );
    if i1.is_some() || d1.is_some() || ll.is_some() {
        coldcache_config::apply_cachegrind_overrides(&mut cfg, i1, d1, ll)?;
    }
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
    Ok((cfg, None))
}

pub fn run(args: SimArgs) -> Result<()> {
    let (cfg, cachelab) = configuration(&args)?;
    let format = args
        .format
        .as_deref()
        .map(str::parse::<Format>)
        .transpose()
        .context("--format")?;
    if args.quantum == 0 {
        bail!("--quantum must be at least 1");
    }
    let mut h =
        Hierarchy::new(&cfg).with_context(|| format!("cache configuration {:?}", cfg.name))?;
    let mut cores = CoreMap::new(cfg.cores);
    for (key, core) in parse_pins(&args.thread_core, args.traces.len(), cfg.cores)? {
        cores.assign(key, core);
    }

    let min_line = cfg
        .levels
        .iter()
        .map(|l| l.line_size)
        .min()
        .unwrap_or(u32::MAX);
    let mut inputs = Vec::new();
    for path in &args.traces {
        let mut reader = coldcache_trace::open(path, format)?;
        reader.set_skip_bad(args.skip_bad);
        let clamp = if cfg.name == "cachegrind" && reader.format() == Format::Lackey {
            min_line
        } else {
            u32::MAX
        };
        inputs.push(Input::new(path.display().to_string(), clamp, reader));
    }
    let total_bytes: u64 = inputs.iter().filter_map(|i| i.total_bytes).sum();
    let progress = if args.no_progress || total_bytes < (8 << 20) {
        indicatif::ProgressBar::hidden()
    } else {
        let pb = indicatif::ProgressBar::with_draw_target(
            Some(total_bytes),
            indicatif::ProgressDrawTarget::stderr(),
        );
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} simulating [{bar:40}] {bytes}/{total_bytes} ({eta})",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        pb
    };

    let started = Instant::now();
    let mut tally = Tally::default();
    let mut cl = CacheLabCounts::default();
    let mut last_key = u64::MAX;
    let mut last_core = 0usize;
    let mut live = inputs.len();
    let mut turns = 0u64;
    while live > 0 {
        live = 0;
        for (i, input) in inputs.iter_mut().enumerate() {
            let mut n = 0;
            while n < args.quantum {
                let Some(rec) = input
                    .next()
                    .with_context(|| format!("reading {}", input.name))?
                else {
                    break;
                };
                n += 1;
                if let Some(_params) = cachelab {
                    cachelab_record(&mut h, &rec, &mut cl);
                    continue;
                }
                if rec.kind == RecordKind::Instr && args.ignore_ifetch {
                    tally.ignored_ifetch += 1;
                    continue;
                }
                let key = thread_key(i, rec.thread);
                if key != last_key {
                    last_key = key;
                    last_core = cores.core_of(key);
                }
                let size = if rec.kind == RecordKind::Instr {
                    rec.size
                } else {
                    cachegrind_data_size(rec.size, input.clamp)
                };
                let r = h.access(
                    last_core,
                    Access::new(access_kind(rec.kind), rec.addr, size).with_ip(rec.ip),
                );
                let k = kind_index(rec.kind);
                tally.records[k] += 1;
                let row = &mut tally.served[k];
                if r.lines() == 1 {
                    row[r.served_by.slot()] += 1;
                } else {
                    for (s, c) in row.iter_mut().zip(r.per_slot()) {
                        *s += u64::from(c);
                    }
                }
            }
            if !input.done {
                live += 1;
            }
        }
        turns += 1;
        if turns.is_multiple_of(64) {
            progress.set_position(inputs.iter().map(|i| i.bytes_read).sum());
        }
    }
    progress.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let skipped: u64 = inputs.iter().map(|i| i.skipped).sum();

    let out = std::io::stdout();
    let mut out = out.lock();
    if let Some((s, e, b)) = cachelab {
        let ev: u64 = h.level_totals().iter().map(|l| l.evictions).sum();
        if args.json {
            let v = json!({
                "cachelab": {"s": s, "E": e, "b": b, "hits": cl.hits, "misses": cl.misses, "evictions": ev},
                "skipped_lines": skipped,
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
    let report = Report {
        cfg: &cfg,
        h: &h,
        tally: &tally,
        inputs: &inputs,
        skipped,
        elapsed,
        cores: &cores,
    };
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report.json())?)?;
    } else {
        report.text(&mut out)?;
    }
    Ok(())
}

#[derive(Default)]
struct CacheLabCounts {
    hits: u64,
    misses: u64,
}

/// Cache Lab: instruction records are ignored, the size is ignored (the
/// address alone picks the block), and `M` is a load then a store.
fn cachelab_record(h: &mut Hierarchy, rec: &Record, cl: &mut CacheLabCounts) {
    let mut one = |kind| {
        if h.access(0, Access::new(kind, rec.addr, 1)).served_by == ServedBy::L1 {
            cl.hits += 1;
        } else {
            cl.misses += 1;
        }
    };
    match rec.kind {
        RecordKind::Load => one(AccessKind::Read),
        RecordKind::Store => one(AccessKind::Write),
        RecordKind::Modify => {
            one(AccessKind::Read);
            one(AccessKind::Write);
        }
        _ => {}
    }
}

struct Report<'a> {
    cfg: &'a HierarchyConfig,
    h: &'a Hierarchy,
    tally: &'a Tally,
    inputs: &'a [Input],
    skipped: u64,
    elapsed: f64,
    cores: &'a CoreMap,
}

/// Cachegrind's nine totals from the tally (Whole straddle mode: one count
/// per access). A modify counts as a read, as Cachegrind counts it.
fn cachegrind_events(t: &Tally) -> [(&'static str, u64); 9] {
    let i = kind_index(RecordKind::Instr);
    let (l, m, s) = (
        kind_index(RecordKind::Load),
        kind_index(RecordKind::Modify),
        kind_index(RecordKind::Store),
    );
    let miss1 = |k: usize| t.served[k][1..].iter().sum::<u64>();
    let mem = |k: usize| t.served[k][MAX_LEVELS];
    [
        ("Ir", t.records[i]),
        ("I1mr", miss1(i)),
        ("ILmr", mem(i)),
        ("Dr", t.records[l] + t.records[m]),
        ("D1mr", miss1(l) + miss1(m)),
        ("DLmr", mem(l) + mem(m)),
        ("Dw", t.records[s]),
        ("D1mw", miss1(s)),
        ("DLmw", mem(s)),
    ]
}

fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.2}%", 100.0 * part as f64 / whole as f64)
    }
}

impl Report<'_> {
    fn is_cachegrind(&self) -> bool {
        self.cfg.name == "cachegrind"
    }

    fn level_rows(&self) -> Vec<(String, usize, LevelStats)> {
        let infos = self.h.instances();
        self.h
            .level_totals()
            .into_iter()
            .enumerate()
            .map(|(li, s)| {
                let n = infos.iter().filter(|i| i.level_index == li).count();
                (self.cfg.levels[li].name.clone(), n, s)
            })
            .collect()
    }

    fn slot_names(&self) -> Vec<String> {
        let n = self.h.levels();
        (1..=n)
            .map(|l| format!("L{l}"))
            .chain(std::iter::once("memory".to_string()))
            .collect()
    }

    fn slots(&self) -> Vec<usize> {
        (0..self.h.levels())
            .chain(std::iter::once(MAX_LEVELS))
            .collect()
    }

    fn records(&self) -> u64 {
        self.tally.records.iter().sum()
    }

    fn json(&self) -> Value {
        let stats = self.h.stats();
        let infos = self.h.instances();
        let slot_names = self.slot_names();
        let slots = self.slots();
        let mut served = serde_json::Map::new();
        for (k, kind) in RecordKind::ALL.iter().enumerate() {
            if self.tally.records[k] == 0 {
                continue;
            }
            let mut row = serde_json::Map::new();
            row.insert("records".into(), json!(self.tally.records[k]));
            for (name, &s) in slot_names.iter().zip(&slots) {
                row.insert(name.clone(), json!(self.tally.served[k][s]));
            }
            served.insert(kind.name().into(), Value::Object(row));
        }
        let levels: Vec<Value> = self
            .level_rows()
            .into_iter()
            .map(|(name, n, s)| {
                json!({"name": name, "instances": n, "accesses": s.accesses(), "hits": s.hits(),
                       "misses": s.miss_count(), "stats": s})
            })
            .collect();
        let instances: Vec<Value> = infos
            .iter()
            .zip(&stats.instances)
            .map(|(i, s)| json!({"info": i, "stats": s}))
            .collect();
        let mut v = json!({
            "config": self.cfg,
            "inputs": self.inputs.iter().map(|i| i.name.clone()).collect::<Vec<_>>(),
            "threads": self.cores.assignments().iter().map(|(k, c)| json!({"input": k >> 32, "thread": k & 0xFFFF_FFFF, "core": c})).collect::<Vec<_>>(),
            "records": self.records(),
            "skipped_lines": self.skipped,
            "ignored_ifetch": self.tally.ignored_ifetch,
            "elapsed_seconds": self.elapsed,
            "served": served,
            "levels": levels,
            "instances": instances,
            "software_prefetch": stats.software_prefetch,
            "hardware_prefetch": stats.hardware_prefetch,
            "coherence": stats.coherence,
            "shared_lines": self.h.line_sharing().into_iter().take(100).collect::<Vec<_>>(),
            "nt_stores": stats.nt_stores,
            "flushes": stats.flushes,
        });
        if self.is_cachegrind() {
            let mut cg = serde_json::Map::new();
            for (name, value) in cachegrind_events(self.tally) {
                cg.insert(name.into(), json!(value));
            }
            v["cachegrind"] = Value::Object(cg);
        }
        v
    }

    fn text(&self, out: &mut impl Write) -> Result<()> {
        let records = self.records();
        writeln!(
            out,
            "coldcache sim: {} ({} core{}), {} trace{}, {} records in {:.2} s ({:.1} M records/s)",
            self.cfg.name,
            self.cfg.cores,
            if self.cfg.cores == 1 { "" } else { "s" },
            self.inputs.len(),
            if self.inputs.len() == 1 { "" } else { "s" },
            group(records),
            self.elapsed,
            records as f64 / self.elapsed.max(1e-9) / 1e6
        )?;
        if self.skipped > 0 {
            writeln!(
                out,
                "  {} malformed lines skipped (--skip-bad)",
                group(self.skipped)
            )?;
        }
        if self.tally.ignored_ifetch > 0 {
            writeln!(
                out,
                "  {} instruction fetches ignored",
                group(self.tally.ignored_ifetch)
            )?;
        }
        writeln!(out)?;
        let classify = self.cfg.classify_misses;
        write!(
            out,
            "{:<8} {:>4} {:>15} {:>15} {:>13} {:>8} {:>13} {:>12}",
            "level", "inst", "accesses", "hits", "misses", "miss%", "evictions", "write-backs"
        )?;
        if classify {
            write!(
                out,
                " {:>12} {:>12} {:>12}",
                "compulsory", "capacity", "conflict"
            )?;
        }
        writeln!(out)?;
        for (name, n, s) in self.level_rows() {
            write!(
                out,
                "{:<8} {:>4} {:>15} {:>15} {:>13} {:>8} {:>13} {:>12}",
                name,
                n,
                group(s.accesses()),
                group(s.hits()),
                group(s.miss_count()),
                pct(s.miss_count(), s.accesses()),
                group(s.evictions),
                group(s.writebacks)
            )?;
            if classify {
                write!(
                    out,
                    " {:>12} {:>12} {:>12}",
                    group(s.misses.compulsory),
                    group(s.misses.capacity),
                    group(s.misses.conflict)
                )?;
            }
            writeln!(out)?;
        }
        writeln!(out)?;
        if self.cfg.straddle == StraddleMode::PerLine {
            writeln!(
                out,
                "(per-line mode: an access straddling lines counts each line where it was found)"
            )?;
        }
        write!(out, "{:<10} {:>15}", "served by", "records")?;
        let slot_names = self.slot_names();
        for n in &slot_names {
            write!(out, " {n:>14}")?;
        }
        writeln!(out)?;
        for (k, kind) in RecordKind::ALL.iter().enumerate() {
            if self.tally.records[k] == 0 {
                continue;
            }
            write!(
                out,
                "{:<10} {:>15}",
                kind.name(),
                group(self.tally.records[k])
            )?;
            for s in self.slots() {
                write!(out, " {:>14}", group(self.tally.served[k][s]))?;
            }
            writeln!(out)?;
        }
        let st = self.h.stats();
        for (what, p) in [
            ("software prefetch", st.software_prefetch),
            ("hardware prefetch", st.hardware_prefetch),
        ] {
            if p.issued + p.redundant > 0 {
                writeln!(
                    out,
                    "\n{what}: {} issued, {} redundant, {} useful, {} late, {} wasted",
                    group(p.issued),
                    group(p.redundant),
                    group(p.useful),
                    group(p.late),
                    group(p.wasted)
                )?;
            }
        }
        let c = &st.coherence;
        if c.invalidations > 0 {
            writeln!(
                out,
                "\ncoherence: {} invalidations, {} false sharing ({} untracked)",
                group(c.invalidations),
                group(c.false_sharing),
                group(c.untracked)
            )?;
            writeln!(
                out,
                "  {:<18} {:>10} {:>10} {:>14}",
                "line", "writes", "copies", "false sharing"
            )?;
            for l in self.h.line_sharing().into_iter().take(10) {
                writeln!(
                    out,
                    "  {:<#18x} {:>10} {:>10} {:>14}",
                    l.line,
                    group(l.sent),
                    group(l.received),
                    group(l.false_sharing)
                )?;
            }
        }
        if st.nt_stores + st.flushes > 0 {
            writeln!(
                out,
                "\nnon-temporal stores: {}, flushes: {}",
                group(st.nt_stores),
                group(st.flushes)
            )?;
        }
        if self.is_cachegrind() {
            writeln!(out, "\nCachegrind events:")?;
            let ev = cachegrind_events(self.tally);
            for (name, v) in ev {
                writeln!(out, "  {name:<5} {:>15}", group(v))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1234567), "1,234,567");
    }

    #[test]
    fn pins_are_checked() {
        assert_eq!(
            parse_pins(&["1:2=3".into()], 2, 4).unwrap(),
            vec![(thread_key(1, 2), 3)]
        );
        assert!(parse_pins(&["2=0".into()], 2, 4)
            .unwrap_err()
            .to_string()
            .contains("only 2 traces"));
        assert!(parse_pins(&["0=4".into()], 2, 4)
            .unwrap_err()
            .to_string()
            .contains("4 cores"));
        assert!(parse_pins(&["0".into()], 2, 4).is_err());
    }

    #[test]
    fn cachegrind_clamps_to_its_smallest_line() {
        // Ordinary accesses (at most 32 bytes) fit every line Cachegrind
        // accepts; fnstenv 28, fnsave 108, fxsave 512 are cut to the line.
        for ordinary in [1, 2, 4, 8, 10, 16, 32] {
            assert_eq!(cachegrind_data_size(ordinary, 32), ordinary);
        }
        assert_eq!(cachegrind_data_size(108, 32), 32);
        assert_eq!(cachegrind_data_size(512, 64), 64);
        assert_eq!(cachegrind_data_size(28, 64), 28);
    }

    #[test]
    fn cachelab_spec_is_three_numbers() {
        assert_eq!(parse_cachelab("4,2,4").unwrap(), (4, 2, 4));
        assert!(parse_cachelab("4,2").is_err());
        assert!(parse_cachelab("4,x,4").is_err());
    }
}
