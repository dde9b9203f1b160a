//! coldcache-replay: simulates recorded traces — the driver behind
//! `coldcache sim`, usable from Rust through the `coldcache` facade.
//!
//! Every input (a lackey, Dinero IV or cctrace file, see `coldcache-trace`)
//! is one or more threads; inputs take turns of `quantum` records, so the
//! simulated cores see their accesses interleaved. Threads map to cores
//! round-robin unless pinned ([`parse_pins`]). Each input is parsed on a
//! thread of its own and handed over in batches, so parsing overlaps
//! simulation. Accesses go through the one simulator driver,
//! [`coldcache_sim::Driver`], in runs of one core's accesses
//! ([`Driver::access_batch`]), which also counts them by kind and serving
//! level; the [`Outcome`] prints that tally per level and per kind, as JSON,
//! as Cachegrind's nine events or as Cache Lab's line.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod placement;
mod resim;
pub use resim::{
    band_possible, fold_unknown_stacks, resimulate, resimulate_with_band, Numbering, Prepared,
    Resim, Target,
};

use coldcache_sim::{
    Access, AccessKind, ConfigError, Driver, HierarchyConfig, LevelStats, ServedBy, StraddleMode,
    Tally, MAX_LEVELS,
};
use coldcache_trace::{Format, Record, RecordKind, TraceError, TraceReader};
use serde_json::{json, Value};
use std::io::Write;
use std::sync::mpsc;
use std::time::Instant;

/// Why a replay could not run or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A trace could not be read.
    #[error("reading {name}: {source}")]
    Trace {
        /// The input's name.
        name: String,
        /// What went wrong, with the line or offset.
        source: TraceError,
    },
    /// An input's reader thread stopped without a word.
    #[error("{0}: the reader thread stopped unexpectedly")]
    ReaderStopped(String),
    /// An input's reader thread could not be started.
    #[error("{0}: starting its reader thread: {1}")]
    Spawn(String, std::io::Error),
    /// The configuration is invalid.
    #[error("cache configuration {name:?}: {source}")]
    Config {
        /// The configuration's name.
        name: String,
        /// What is wrong.
        source: ConfigError,
    },
    /// A thread → core pin is malformed or out of range.
    #[error("{0}")]
    Pin(String),
    /// The layout-noise band was asked of a trace that holds no dump
    /// skeleton: it does not say where the modules are.
    #[error(
        "{name}: the layout-noise band (--placements) needs a trace kept by `coldcache record \
         --trace`: {why}, so the regions to move (the modules, the mappings) are unknown"
    )]
    NoRegions {
        /// The trace's name.
        name: String,
        /// What the trace is instead (`a lackey trace holds no capture's dump`).
        why: String,
    },
    /// A trace's dump skeleton (the capture's dump without records) is
    /// unreadable.
    #[error("{name}: the capture's dump inside the trace is unreadable: {detail}")]
    Skeleton {
        /// The trace's name.
        name: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A record names a thread index no honest trace of its size could:
    /// re-simulation gives every index up to the largest a core and a
    /// thread of the dump, so it would size its tables by it.
    #[error(
        "{name}: thread index {index} is more than a trace of {bytes} bytes so far can \
         hold (a re-simulation gives every thread index up to the largest a core and a \
         row of the dump; at most {limit} here)"
    )]
    ThreadIndex {
        /// The trace's name.
        name: String,
        /// The index met.
        index: u32,
        /// Bytes of the trace read when it was met.
        bytes: u64,
        /// The largest index allowed then.
        limit: u64,
    },
    /// The quantum is zero.
    #[error("--quantum must be at least 1")]
    Quantum,
}

/// Cache Lab's `-s S -E E -b B`.
pub type CacheLabParams = (u32, u32, u32);

/// How to replay.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Records an input runs before the next input takes its turn.
    pub quantum: u64,
    /// Leave instruction-fetch records out (counted, not simulated).
    pub ignore_ifetch: bool,
    /// (thread key, core) pins, from [`parse_pins`].
    pub pins: Vec<(u64, usize)>,
    /// Cache Lab semantics with these parameters.
    pub cachelab: Option<CacheLabParams>,
}

/// The access kind a trace record kind stands for.
pub fn access_kind(k: RecordKind) -> AccessKind {
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

/// The widest data access simulated from a trace in `format` with `cfg`
/// ([`cachegrind_data_size`]): the smallest line size for lackey input
/// with the `cachegrind` preset, else no limit (`u32::MAX`).
fn data_size_limit(cfg: &HierarchyConfig, format: Format) -> u32 {
    if cfg.name == "cachegrind" && format == Format::Lackey {
        cfg.levels
            .iter()
            .map(|l| l.line_size)
            .min()
            .unwrap_or(u32::MAX)
    } else {
        u32::MAX
    }
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
    fn new(name: String, clamp: u32, mut reader: TraceReader) -> Result<Input, ReplayError> {
        let name2 = name.clone();
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
            .map_err(|e| ReplayError::Spawn(name2, e))?;
        Ok(Input {
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
        })
    }

    /// Up to `max` (at least 1) of the next records, taking the next batch
    /// when needed; an empty slice at the end of the input.
    #[inline]
    fn take(&mut self, max: usize) -> Result<&[Record], ReplayError> {
        if self.pos == self.buf.len() {
            if self.done {
                return Ok(&[]);
            }
            let _ = self.spent.try_send(std::mem::take(&mut self.buf));
            self.pos = 0;
            let batch = self
                .batches
                .recv()
                .map_err(|_| ReplayError::ReaderStopped(self.name.clone()))?
                .map_err(|source| ReplayError::Trace {
                    name: self.name.clone(),
                    source,
                })?;
            self.bytes_read = batch.bytes_read;
            self.skipped = batch.skipped;
            if batch.records.is_empty() {
                self.done = true;
                return Ok(&[]);
            }
            self.buf = batch.records;
        }
        let start = self.pos;
        let end = start + (self.buf.len() - start).min(max);
        self.pos = end;
        Ok(&self.buf[start..end])
    }
}

/// The run of one core's accesses under way, simulated in one
/// [`Driver::access_batch`] when the core changes, the run is full or the
/// inputs end.
struct Run {
    accesses: Vec<Access>,
    core: usize,
    /// Key of the thread of the last record, and its core.
    last_key: u64,
    ignored_ifetch: u64,
}

impl Run {
    /// Turns `records` of input `input` into accesses and simulates them
    /// a run at a time: the replay's inner loop. `clamp` is the input's
    /// data size limit ([`Input::clamp`]).
    #[inline]
    fn feed(
        &mut self,
        driver: &mut Driver,
        input: usize,
        clamp: u32,
        ignore_ifetch: bool,
        records: &[Record],
    ) {
        if ignore_ifetch {
            self.feed_with::<true>(driver, input, clamp, records);
        } else {
            self.feed_with::<false>(driver, input, clamp, records);
        }
    }

    /// [`Run::feed`] with `ignore_ifetch` known at compile time, the run's
    /// state in locals (registers) for the loop.
    #[inline(never)]
    fn feed_with<const IGNORE_IFETCH: bool>(
        &mut self,
        driver: &mut Driver,
        input: usize,
        clamp: u32,
        records: &[Record],
    ) {
        let mut run = std::mem::take(&mut self.accesses);
        let (mut core, mut last_key) = (self.core, self.last_key);
        let mut ignored = 0;
        for rec in records {
            let instr = rec.kind == RecordKind::Instr;
            if IGNORE_IFETCH && instr {
                ignored += 1;
                continue;
            }
            let key = thread_key(input, rec.thread);
            if key != last_key {
                last_key = key;
                let c = driver.core_of(key);
                if c != core && !run.is_empty() {
                    driver.access_batch(core, &run);
                    run.clear();
                }
                core = c;
            }
            let size = if instr {
                rec.size
            } else {
                cachegrind_data_size(rec.size, clamp)
            };
            run.push(Access {
                kind: access_kind(rec.kind),
                addr: rec.addr,
                size,
                ip: rec.ip,
            });
            if run.len() == Driver::BATCH {
                driver.access_batch(core, &run);
                run.clear();
            }
        }
        self.accesses = run;
        (self.core, self.last_key) = (core, last_key);
        self.ignored_ifetch += ignored;
    }
}

/// (input, thread) → core pins from `--thread-core`.
pub fn parse_pins(
    specs: &[String],
    inputs: usize,
    cores: usize,
) -> Result<Vec<(u64, usize)>, ReplayError> {
    let mut pins = Vec::new();
    for spec in specs {
        let bad = |why: &str| ReplayError::Pin(format!("--thread-core {spec:?}: {why}"));
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

/// The key of thread `thread` of input `input` in the core map.
pub fn thread_key(input: usize, thread: u32) -> u64 {
    ((input as u64) << 32) | u64::from(thread)
}

/// Cache Lab's counts.
#[derive(Default, Clone, Copy, Debug)]
pub struct CacheLabCounts {
    /// Accesses that hit.
    pub hits: u64,
    /// Accesses that missed.
    pub misses: u64,
}

/// Cache Lab: instruction records are ignored, the size is ignored (the
/// address alone picks the block), and `M` is a load then a store.
fn cachelab_record(h: &mut Driver, rec: &Record, cl: &mut CacheLabCounts) {
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

/// Replays `traces` (name and open reader each) through a hierarchy for
/// `cfg`. `progress` is called now and then with the bytes read so far and
/// the total when known.
pub fn replay(
    cfg: &HierarchyConfig,
    traces: Vec<(String, TraceReader)>,
    opts: &Options,
    mut progress: impl FnMut(u64, u64),
) -> Result<Outcome, ReplayError> {
    if opts.quantum == 0 {
        return Err(ReplayError::Quantum);
    }
    let mut driver = Driver::new(cfg).map_err(|source| ReplayError::Config {
        name: cfg.name.clone(),
        source,
    })?;
    for &(key, core) in &opts.pins {
        driver.cores_mut().assign(key, core);
    }
    let mut inputs = Vec::new();
    for (name, reader) in traces {
        let clamp = data_size_limit(cfg, reader.format());
        inputs.push(Input::new(name, clamp, reader)?);
    }
    let total_bytes: u64 = inputs.iter().filter_map(|i| i.total_bytes).sum();
    let started = Instant::now();
    let mut cl = CacheLabCounts::default();
    let mut run = Run {
        accesses: Vec::with_capacity(Driver::BATCH),
        core: 0,
        last_key: u64::MAX,
        ignored_ifetch: 0,
    };
    // One input has no one to take turns with: its turns are whole
    // batches (the quantum only orders several inputs' records).
    let quantum = if inputs.len() == 1 {
        BATCH
    } else {
        usize::try_from(opts.quantum).unwrap_or(usize::MAX)
    };
    let mut live = inputs.len();
    let mut turns = 0u64;
    while live > 0 {
        live = 0;
        for (i, input) in inputs.iter_mut().enumerate() {
            let clamp = input.clamp;
            let mut n = 0;
            while n < quantum {
                let records = input.take(quantum - n)?;
                if records.is_empty() {
                    break;
                }
                n += records.len();
                if opts.cachelab.is_some() {
                    for rec in records {
                        cachelab_record(&mut driver, rec, &mut cl);
                    }
                } else {
                    run.feed(&mut driver, i, clamp, opts.ignore_ifetch, records);
                }
            }
            if !input.done {
                live += 1;
            }
        }
        turns += 1;
        // A lone input's turn is a whole batch: report each.
        if inputs.len() == 1 || turns.is_multiple_of(64) {
            progress(inputs.iter().map(|i| i.bytes_read).sum(), total_bytes);
        }
    }
    driver.access_batch(run.core, &run.accesses);
    let ignored_ifetch = run.ignored_ifetch;
    Ok(Outcome {
        cfg: cfg.clone(),
        driver,
        ignored_ifetch,
        inputs: inputs.iter().map(|i| i.name.clone()).collect(),
        skipped: inputs.iter().map(|i| i.skipped).sum(),
        elapsed: started.elapsed().as_secs_f64(),
        cachelab: opts.cachelab.map(|p| (p, cl)),
    })
}

/// What a replay produced: the driver (hierarchy statistics and the
/// tally) and what the report says about the inputs.
pub struct Outcome {
    cfg: HierarchyConfig,
    driver: Driver,
    ignored_ifetch: u64,
    inputs: Vec<String>,
    skipped: u64,
    elapsed: f64,
    cachelab: Option<(CacheLabParams, CacheLabCounts)>,
}

impl Outcome {
    /// The driver: the hierarchy's statistics and the tally by kind.
    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    /// Malformed lines skipped (`--skip-bad`).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Cache Lab's counts and evictions, in Cache Lab mode.
    pub fn cachelab(&self) -> Option<(CacheLabParams, CacheLabCounts, u64)> {
        self.cachelab.map(|(p, c)| {
            let ev = self
                .driver
                .hierarchy()
                .level_totals()
                .iter()
                .map(|l| l.evictions)
                .sum();
            (p, c, ev)
        })
    }
}

/// Cachegrind's nine totals from the tally (Whole straddle mode: one count
/// per access). A modify counts as a read, as Cachegrind counts it.
pub fn cachegrind_events(t: &Tally) -> [(&'static str, u64); 9] {
    use AccessKind::{InstrFetch as I, Read as L, ReadModifyWrite as M, Write as S};
    let miss1 = |k| t.first_level_misses(k);
    let mem = |k| t.memory(k);
    [
        ("Ir", t.of(I)),
        ("I1mr", miss1(I)),
        ("ILmr", mem(I)),
        ("Dr", t.of(L) + t.of(M)),
        ("D1mr", miss1(L) + miss1(M)),
        ("DLmr", mem(L) + mem(M)),
        ("Dw", t.of(S)),
        ("D1mw", miss1(S)),
        ("DLmw", mem(S)),
    ]
}

/// `n` with thousands separators.
pub use coldcache_dump::thousands as group;

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.2}%", 100.0 * part as f64 / whole as f64)
    }
}

impl Outcome {
    fn is_cachegrind(&self) -> bool {
        self.cfg.name == "cachegrind"
    }

    fn level_rows(&self) -> Vec<(String, usize, LevelStats)> {
        let infos = self.driver.hierarchy().instances();
        self.driver
            .hierarchy()
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
        let n = self.driver.hierarchy().levels();
        (1..=n)
            .map(|l| format!("L{l}"))
            .chain(std::iter::once("memory".to_string()))
            .collect()
    }

    fn slots(&self) -> Vec<usize> {
        (0..self.driver.hierarchy().levels())
            .chain(std::iter::once(MAX_LEVELS))
            .collect()
    }

    fn records(&self) -> u64 {
        self.driver.tally().accesses.iter().sum::<u64>() + self.ignored_ifetch
    }

    /// The report as JSON (the schema of docs/sim.md).
    pub fn json(&self) -> Value {
        let stats = self.driver.hierarchy().stats();
        let infos = self.driver.hierarchy().instances();
        let slot_names = self.slot_names();
        let slots = self.slots();
        let mut served = serde_json::Map::new();
        let tally = self.driver.tally();
        for kind in RecordKind::ALL {
            let k = access_kind(kind);
            if tally.of(k) == 0 {
                continue;
            }
            let mut row = serde_json::Map::new();
            row.insert("records".into(), json!(tally.of(k)));
            for (name, &s) in slot_names.iter().zip(&slots) {
                row.insert(name.clone(), json!(tally.served_at(k, s)));
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
            "inputs": self.inputs,
            "threads": self.driver.cores().assignments().iter().map(|(k, c)| json!({"input": k >> 32, "thread": k & 0xFFFF_FFFF, "core": c})).collect::<Vec<_>>(),
            "records": self.records(),
            "skipped_lines": self.skipped,
            "ignored_ifetch": self.ignored_ifetch,
            "elapsed_seconds": self.elapsed,
            "served": served,
            "levels": levels,
            "instances": instances,
            "software_prefetch": stats.software_prefetch,
            "hardware_prefetch": stats.hardware_prefetch,
            "coherence": stats.coherence,
            "shared_lines": self.driver.hierarchy().line_sharing().into_iter().take(100).collect::<Vec<_>>(),
            "nt_stores": stats.nt_stores,
            "flushes": stats.flushes,
        });
        if self.is_cachegrind() {
            let mut cg = serde_json::Map::new();
            for (name, value) in cachegrind_events(self.driver.tally()) {
                cg.insert(name.into(), json!(value));
            }
            v["cachegrind"] = Value::Object(cg);
        }
        v
    }

    /// The report as text tables.
    pub fn text(&self, out: &mut impl Write) -> std::io::Result<()> {
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
        if self.ignored_ifetch > 0 {
            writeln!(
                out,
                "  {} instruction fetches ignored",
                group(self.ignored_ifetch)
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
        let tally = self.driver.tally();
        for kind in RecordKind::ALL {
            let k = access_kind(kind);
            if tally.of(k) == 0 {
                continue;
            }
            write!(out, "{:<10} {:>15}", kind.name(), group(tally.of(k)))?;
            for s in self.slots() {
                write!(out, " {:>14}", group(tally.served_at(k, s)))?;
            }
            writeln!(out)?;
        }
        let st = self.driver.hierarchy().stats();
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
            for l in self.driver.hierarchy().line_sharing().into_iter().take(10) {
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
            let ev = cachegrind_events(self.driver.tally());
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
}
