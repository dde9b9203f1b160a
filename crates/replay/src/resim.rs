//! Re-simulation: a kept trace turned into a whole dump for another cache
//! configuration ("capture once, simulate many"; `coldcache sim --output`).
//!
//! A capture's cctrace (version 2, `docs/trace-format.md`) carries each
//! access's instruction, thread and stack id, marks the instructions whose
//! accesses were not modelled, and holds the capture's dump without its
//! records (the *skeleton*: meta, modules, threads, stack tree). The stream
//! is counted exactly as the capture's accountant did — one counter row
//! per (instruction, stack, thread), the instruction counted at its fetch
//! record, every access attributed through the one [`Driver`] — so
//! re-simulating with the capture's own configuration gives back the
//! capture's records, and with another configuration what a capture with
//! that configuration would have counted.
//!
//! The counting has two halves. What does not depend on the caches is
//! done once, on the reader thread, for every configuration: a
//! [`Numbering`] gives each record its row (rows numbered in order of
//! first appearance, in the capture accountant's own table,
//! `coldcache_grow::counters::CounterTable`), turns the records into accesses and counts the
//! instructions and unmodelled ones per row, into a [`Prepared`] batch.
//! What does depend on them is a [`Resim`] per configuration: each run of
//! one core's accesses of a prepared batch (the runs of one thread, those
//! of threads on the same core side by side merged) goes to
//! [`Driver::attribute_batch`] as it is, with no copy.
//!
//! [`resimulate`] runs several configurations over one read of the stream:
//! the reader thread decodes and prepares batches and hands each (shared,
//! read-only) to one simulator thread per configuration through bounded
//! channels, so memory is bounded by the batches in flight and the
//! distinct rows, never by the trace's length.
//!
//! [`resimulate_with_band`] adds, per configuration, simulators of moved
//! placements ([`crate::placement`]): each a [`Resim::moved`] fed the same
//! prepared batches, its addresses shifted, every access counted in one
//! row, so only its totals are kept (the dump's layout-noise band).
//!
//! Traces without stacks (cctrace version 1, lackey, din) re-simulate too:
//! every access on the root stack, threads from the trace's thread table,
//! no modules (a flat profile by address).

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;

use coldcache_dump::{Dump, Meta, Record as DumpRecord, StackNode, Thread};
use coldcache_grow::counters::CounterTable;
use coldcache_grow::Budget;
use coldcache_sim::{Access, AccessKind, CounterLayout, Driver, HierarchyConfig, RowTable};
use coldcache_trace::{Record, RecordKind, TraceReader, ATTACH_DUMP_SKELETON};

use crate::placement::{self, Placement};
use crate::{access_kind, cachegrind_data_size, data_size_limit, ReplayError};

/// Records per batch the reader thread hands to the simulators.
const BATCH: usize = 1 << 15;

/// Entries of [`Numbering`]'s row cache (a power of two).
const ROW_CACHE_BITS: u32 = 12;
const ROW_CACHE: usize = 1 << ROW_CACHE_BITS;

/// No row (a row number never given: rows are fewer than 2^32 - 1).
const NO_ROW: u32 = u32::MAX;

/// The slot of (ip, stack, thread) in [`Numbering`]'s row cache.
#[inline]
fn row_slot(ip: u64, stack: u32, thread: u32) -> usize {
    let mix = (ip ^ (u64::from(stack) << 24) ^ (u64::from(thread) << 48))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mix >> (64 - ROW_CACHE_BITS)) as usize
}

/// Batches in flight per simulator (the bound on memory, with the rows).
const IN_FLIGHT: usize = 4;

/// The largest thread index always accepted, whatever the trace's size:
/// as many threads as a capture tells apart
/// (`coldcache_capture::account::MAX_THREADS_SEEN`).
const MIN_THREAD_INDEX_LIMIT: u64 = 1 << 16;

/// One configuration to re-simulate with.
#[derive(Clone, Debug)]
pub struct Target {
    /// Its name as the user gave it (a preset name or a file), for the
    /// dump's `cache_name`.
    pub name: String,
    /// The configuration.
    pub config: HierarchyConfig,
}

/// A batch of records made ready for every configuration by
/// [`Numbering::prepare`]: the records as accesses with the row of each,
/// cut into runs of one thread.
#[derive(Default)]
pub struct Prepared {
    accesses: Vec<Access>,
    rows: Vec<u32>,
    /// Runs of one thread's records, in order: (end index, thread).
    runs: Vec<(usize, u32)>,
    /// Rows numbered so far, this batch's included.
    rows_total: usize,
}

impl Prepared {
    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.accesses.len()
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.accesses.is_empty()
    }
}

/// The part of counting a stream that no cache configuration changes,
/// done once for all of them: the row of each record, one per (ip, stack,
/// thread) numbered in order of first appearance, and per row the
/// instructions (fetch records) and the unmodelled ones among them.
///
/// Finding a record's row is, in order: the thread's last row (a data
/// access of the instruction just fetched); the row that followed the
/// thread's last row the previous time (an instruction stream mostly
/// repeats itself, as a branch predictor knows); a direct-mapped cache;
/// the hash table, which makes rows.
pub struct Numbering {
    /// (ip, stack, thread) → row: the capture accountant's own table
    /// (no counters kept in it), so rows are numbered as it numbered them.
    rows: CounterTable,
    /// What `rows` maps (unbounded: the stream's distinct rows bound it).
    budget: Budget,
    /// A direct-mapped cache in front of `rows`.
    row_cache: Vec<((u64, u32, u32), u32)>,
    /// Per row: the (ip, stack) and row of the record that followed it
    /// on its thread with another key, the last time (`NO_ROW`: none yet).
    next: Vec<(u64, u32, u32)>,
    /// Per row: fetch records.
    instructions: Vec<u64>,
    /// Rows with unmodelled instructions, and how many (rare).
    unmodelled: HashMap<u32, u64>,
    /// Per thread index: the (ip, stack) and row of its last record
    /// (`NO_ROW`: none yet).
    last: Vec<(u64, u32, u32)>,
}

impl Default for Numbering {
    fn default() -> Self {
        Numbering::new()
    }
}

impl Numbering {
    /// No row yet.
    pub fn new() -> Numbering {
        Numbering {
            rows: CounterTable::new(usize::MAX, 0, [0; 4]),
            budget: Budget::new(usize::MAX),
            row_cache: vec![((0, 0, 0), NO_ROW); ROW_CACHE],
            next: Vec::new(),
            instructions: Vec::new(),
            unmodelled: HashMap::new(),
            last: Vec::new(),
        }
    }

    /// Instructions (fetch records) counted so far.
    pub fn instructions(&self) -> u64 {
        self.instructions.iter().sum()
    }

    /// Rows numbered so far.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Turns `records` into `out` (emptied first): each record's access
    /// and row, the runs of one thread; counts their instructions.
    pub fn prepare(&mut self, records: &[Record], out: &mut Prepared) {
        out.accesses.clear();
        out.accesses.extend(records.iter().map(|r| Access {
            kind: access_kind(r.kind),
            addr: r.addr,
            size: r.size,
            ip: r.ip,
        }));
        out.rows.clear();
        out.rows.resize(records.len(), NO_ROW);
        out.runs.clear();
        let mut i = 0;
        while i < records.len() {
            let t = records[i].thread;
            if t as usize >= self.last.len() {
                self.last.resize(t as usize + 1, (0, 0, NO_ROW));
            }
            // The thread's last key and row, in registers for the run.
            let (mut ip, mut stack, mut row) = self.last[t as usize];
            let mut end = records.len();
            for (j, (r, slot)) in records[i..].iter().zip(&mut out.rows[i..]).enumerate() {
                if r.thread != t {
                    end = i + j;
                    break;
                }
                if r.ip != ip || r.stack != stack || row == NO_ROW {
                    (ip, stack, row) = self.step(row, r.ip, r.stack, t);
                }
                *slot = row;
                if r.kind == RecordKind::Instr {
                    self.instructions[row as usize] += 1;
                    if r.unmodelled {
                        self.count_unmodelled(row);
                    }
                }
            }
            self.last[t as usize] = (ip, stack, row);
            out.runs.push((end, t));
            i = end;
        }
        out.rows_total = self.rows.len();
    }

    /// An unmodelled instruction in `row`.
    #[cold]
    fn count_unmodelled(&mut self, row: u32) {
        *self.unmodelled.entry(row).or_insert(0) += 1;
    }

    /// The key and row of (ip, stack) on `thread` after a record of
    /// another key whose row was `last` (`NO_ROW` before the thread's
    /// first record): the row that followed `last` the previous time when
    /// it is that key, else [`Numbering::step_slow`].
    #[inline(always)]
    fn step(&mut self, last: u32, ip: u64, stack: u32, thread: u32) -> (u64, u32, u32) {
        if let Some(&next) = self.next.get(last as usize) {
            if next.0 == ip && next.1 == stack && next.2 != NO_ROW {
                return next;
            }
        }
        self.step_slow(last, ip, stack, thread)
    }

    /// The row of (ip, stack, thread) from the cache or the hash table,
    /// which then follows `last` (if a row).
    #[inline(never)]
    fn step_slow(&mut self, last: u32, ip: u64, stack: u32, thread: u32) -> (u64, u32, u32) {
        let row = self.row_cached(ip, stack, thread);
        if let Some(next) = self.next.get_mut(last as usize) {
            *next = (ip, stack, row);
        }
        (ip, stack, row)
    }

    /// The row of (ip, stack, thread) from the cache or the hash table.
    #[inline]
    fn row_cached(&mut self, ip: u64, stack: u32, thread: u32) -> u32 {
        let key = (ip, stack, thread);
        let slot = row_slot(ip, stack, thread);
        let cached = self.row_cache[slot];
        if cached.1 != NO_ROW && cached.0 == key {
            return cached.1;
        }
        let row = self.row_slow(key);
        self.row_cache[slot] = (key, row);
        row
    }

    /// The row of `key` from the hash table, made when new.
    #[inline(never)]
    fn row_slow(&mut self, key: (u64, u32, u32)) -> u32 {
        let before = self.rows.len();
        let row = match self.rows.row_index(key.0, key.1, key.2, &mut self.budget) {
            Ok(row) => row,
            // Only the kernel refuses an unbounded table: out of memory,
            // as a `Vec` that cannot grow.
            Err(_) => panic!(
                "re-simulation: the system refused memory for more than {before} \
                 (instruction, stack, thread) rows"
            ),
        };
        let row = u32::try_from(row)
            .ok()
            .filter(|&n| n != NO_ROW)
            .expect("fewer than 2^32 - 1 distinct (instruction, stack, thread)");
        if self.rows.len() > before {
            self.next.push((0, 0, NO_ROW));
            self.instructions.push(0);
        }
        row
    }
}

/// The counting of one configuration over a stream prepared by a
/// [`Numbering`]: the capture's accountant without the capture.
pub struct Resim {
    driver: Driver,
    layout: CounterLayout,
    width: usize,
    /// The counter rows (first-level hits dense), as numbered.
    table: RowTable,
    /// Per thread index: its core, once seen.
    cores: Vec<Option<usize>>,
    /// The recorded core of each thread, when the skeleton came before
    /// the records and has as many cores as this configuration.
    recorded_cores: Option<Vec<u32>>,
    /// The widest data access simulated (`u32::MAX`: no limit; see
    /// [`Resim::limit_data_sizes`]), and the run copied with its sizes cut
    /// when one is wider.
    data_limit: u32,
    clamped: Vec<Access>,
    /// A moved placement ([`Resim::moved`]): its shifts, the run moved,
    /// and row 0 for every access (totals only).
    placement: Option<Placement>,
    moved: Vec<Access>,
    zeros: Vec<u32>,
}

impl Resim {
    /// A re-simulation with `config`. `skeleton` is the capture's dump
    /// skeleton when it is known before the first record: its threads keep
    /// their recorded cores when `config` has as many cores as the
    /// capture; otherwise threads take cores round-robin in the order of
    /// their numbers, as a capture assigns them.
    pub fn new(config: &HierarchyConfig, skeleton: Option<&Dump>) -> Result<Resim, ReplayError> {
        let mut driver = Driver::new(config).map_err(|source| ReplayError::Config {
            name: config.name.clone(),
            source,
        })?;
        // Line utilisation when the capture measured it (`record
        // --line-use`: its counters name it), as it measured it; it costs
        // up to 2x here on miss-heavy traces, so only then.
        if skeleton.is_some_and(|d| d.meta.counters.iter().any(|c| c == "l1d_lines_fetched")) {
            driver = driver.with_line_use();
        }
        let layout = driver.layout();
        let cores = driver.cores().cores();
        let recorded_cores = skeleton
            .filter(|d| d.meta.cores as usize == cores)
            .map(|d| d.threads.iter().map(|t| t.core).collect());
        Ok(Resim {
            driver,
            layout,
            width: layout.len(),
            table: RowTable::new(layout),
            cores: Vec::new(),
            recorded_cores,
            data_limit: u32::MAX,
            clamped: Vec::new(),
            placement: None,
            moved: Vec::new(),
            zeros: Vec::new(),
        })
    }

    /// This re-simulation with every address moved by `placement`,
    /// counting totals only (every access in one row): a placement of the
    /// layout-noise band, read back with [`Resim::totals`].
    pub fn moved(mut self, placement: Placement) -> Resim {
        self.placement = Some(placement);
        self
    }

    /// Simulates data accesses wider than `limit` bytes as `limit` bytes,
    /// as `coldcache sim` does for Cachegrind's model on lackey input;
    /// `u32::MAX` for no limit (the default).
    pub fn limit_data_sizes(&mut self, limit: u32) {
        self.data_limit = limit;
    }

    /// The counter layout of the rows.
    pub fn layout(&self) -> CounterLayout {
        self.layout
    }

    fn core_of(&mut self, thread: u32) -> usize {
        let t = thread as usize;
        if t >= self.cores.len() {
            self.cores.resize(t + 1, None);
        }
        if let Some(c) = self.cores[t] {
            return c;
        }
        // Threads not seen yet take cores in number order, as the
        // capture's claims did, so a thread that did nothing in the
        // window still advances the round robin.
        let mut core = 0;
        for i in 0..=t {
            if self.cores[i].is_none() {
                let c = match self.recorded_cores.as_ref().and_then(|r| r.get(i)) {
                    Some(&c) => c as usize % self.driver.cores().cores(),
                    None => self.driver.cores_mut().next_core(i as u64),
                };
                self.cores[i] = Some(c);
            }
            core = self.cores[i].unwrap_or(0);
        }
        core
    }

    /// Simulates a prepared batch in order: each run of one core's
    /// accesses in one [`Driver::attribute_batch`], straight from the
    /// batch.
    pub fn feed(&mut self, p: &Prepared) {
        let rows = if self.placement.is_some() {
            1
        } else {
            p.rows_total
        };
        self.table.grow_to(rows);
        let (mut start, mut run_start, mut run_core) = (0, 0, None);
        for &(end, thread) in &p.runs {
            let core = self.core_of(thread);
            if run_core != Some(core) {
                if let Some(c) = run_core {
                    self.simulate(p, c, run_start, start);
                }
                (run_start, run_core) = (start, Some(core));
            }
            start = end;
        }
        if let Some(c) = run_core {
            self.simulate(p, c, run_start, start);
        }
    }

    fn simulate(&mut self, p: &Prepared, core: usize, start: usize, end: usize) {
        let limit = self.data_limit;
        let mut accesses = &p.accesses[start..end];
        let wide = |a: &Access| a.kind != AccessKind::InstrFetch && a.size > limit;
        // Nearly never (Valgrind's `fxsave` and the like, lackey input):
        // that run copied with the sizes cut.
        if limit != u32::MAX && accesses.iter().any(wide) {
            self.clamped.clear();
            self.clamped.extend(accesses.iter().map(|&a| Access {
                size: if a.kind == AccessKind::InstrFetch {
                    a.size
                } else {
                    cachegrind_data_size(a.size, limit)
                },
                ..a
            }));
            accesses = &self.clamped;
        }
        if let Some(placement) = self.placement.as_mut() {
            placement.apply(accesses, &mut self.moved);
            if self.zeros.len() < self.moved.len() {
                self.zeros.resize(self.moved.len(), 0);
            }
            let n = self.moved.len();
            self.driver
                .attribute_batch(core, &self.moved, &self.zeros[..n], &mut self.table);
            return;
        }
        self.driver
            .attribute_batch(core, accesses, &p.rows[start..end], &mut self.table);
    }

    /// The counter totals of the accesses fed (every row summed, the
    /// instructions and unmodelled ones of `numbering` added), in the
    /// layout's order.
    pub fn totals(mut self, numbering: &Numbering) -> Vec<u64> {
        let width = self.width;
        let rows = if self.placement.is_some() {
            1
        } else {
            numbering.rows()
        };
        self.table.grow_to(rows);
        self.driver.finish_line_use_into(&mut self.table);
        let table = self.table.into_rows();
        let mut totals = vec![0u64; width];
        for row in table.chunks_exact(width) {
            for (t, v) in totals.iter_mut().zip(row) {
                *t = t.saturating_add(*v);
            }
        }
        totals[CounterLayout::INSTRUCTIONS] += numbering.instructions();
        totals[CounterLayout::UNMODELLED] += numbering.unmodelled.values().sum::<u64>();
        totals
    }

    /// The dump: `skeleton`'s meta, modules, threads and stacks (a bare
    /// one for traces without a skeleton, with `threads` as the trace's
    /// thread table), this configuration's cache and counters, and the
    /// rows of `numbering` (the one that prepared every batch fed) sorted
    /// by (ip, stack, thread) as a capture sorts them. `note` is added to
    /// the meta's notes.
    pub fn finish(
        mut self,
        numbering: &Numbering,
        target: &Target,
        skeleton: Option<&Dump>,
        threads: &[(u32, u64)],
        note: String,
    ) -> Dump {
        let level_names: Vec<String> = (1..=self.layout.levels())
            .map(|l| format!("L{l}"))
            .collect();
        let mut dump = match skeleton {
            Some(s) => Dump {
                meta: s.meta.clone(),
                modules: s.modules.clone(),
                threads: s.threads.clone(),
                stacks: s.stacks.clone(),
                records: Vec::new(),
                symbols: None,
                sources: Vec::new(),
                data: None,
                objects: None,
                timeline: None,
            },
            None => {
                let seen = self.cores.len().max(threads.len());
                Dump {
                    meta: Meta {
                        threads: "all".to_string(),
                        trigger: "trace".to_string(),
                        instructions: numbering.instructions(),
                        ..Meta::default()
                    },
                    modules: Vec::new(),
                    threads: (0..seen)
                        .map(|i| Thread {
                            tid: threads
                                .iter()
                                .find(|&&(t, _)| t as usize == i)
                                .map_or(i as u32, |&(_, tid)| tid as u32),
                            name: String::new(),
                            core: 0,
                        })
                        .collect(),
                    stacks: vec![StackNode::default()],
                    records: Vec::new(),
                    symbols: None,
                    sources: Vec::new(),
                    data: None,
                    objects: None,
                    timeline: None,
                }
            }
        };
        for (i, t) in dump.threads.iter_mut().enumerate() {
            if let Some(Some(c)) = self.cores.get(i) {
                t.core = *c as u32;
            }
        }
        let cfg = self.driver.hierarchy().config();
        dump.meta.cache_name = target.name.clone();
        dump.meta.cache_toml = coldcache_config_slim::to_toml(cfg);
        dump.meta.cores = cfg.cores.max(1) as u32;
        dump.meta.counters = self.layout.names(&level_names);
        dump.meta.levels = level_names;
        dump.meta.notes.push(note);
        let width = self.width;
        let mut table = self.table;
        table.grow_to(numbering.rows());
        // The lines still in a first data level are credited now.
        self.driver.finish_line_use_into(&mut table);
        let table = table.into_rows();
        let mut records: Vec<DumpRecord> = numbering
            .rows
            .keys()
            .iter()
            .enumerate()
            .map(|(i, &(ip, stack, thread))| {
                let mut counters = table[i * width..(i + 1) * width].to_vec();
                counters[CounterLayout::INSTRUCTIONS] += numbering.instructions[i];
                counters[CounterLayout::UNMODELLED] +=
                    numbering.unmodelled.get(&(i as u32)).copied().unwrap_or(0);
                DumpRecord {
                    ip,
                    stack,
                    thread,
                    counters,
                }
            })
            .collect();
        records.sort_by_key(|r| (r.ip, r.stack, r.thread));
        dump.records = records;
        dump
    }
}

/// Counts on the root stack every record of `dump` whose stack is not in
/// its stack tree (a trace without its skeleton, the `.partial` of a
/// capture that did not finish: its stack ids name a tree it does not
/// hold), merging the records of one (ip, thread), and adds a note saying
/// what the dump lacks. Returns how many stack ids were folded.
pub fn fold_unknown_stacks(dump: &mut Dump) -> usize {
    let known = dump.stacks.len() as u32;
    let unknown: std::collections::HashSet<u32> = dump
        .records
        .iter()
        .map(|r| r.stack)
        .filter(|&s| s >= known)
        .collect();
    if unknown.is_empty() {
        return 0;
    }
    let mut records = std::mem::take(&mut dump.records);
    for r in &mut records {
        if r.stack >= known {
            r.stack = 0;
        }
    }
    records.sort_by_key(|r| (r.ip, r.stack, r.thread));
    let mut merged: Vec<DumpRecord> = Vec::with_capacity(records.len());
    for r in records {
        match merged.last_mut() {
            Some(m) if (m.ip, m.stack, m.thread) == (r.ip, r.stack, r.thread) => {
                for (a, b) in m.counters.iter_mut().zip(&r.counters) {
                    *a += b;
                }
            }
            _ => merged.push(r),
        }
    }
    dump.records = merged;
    dump.meta.notes.push(format!(
        "the trace holds no dump skeleton (its capture did not finish): this dump has no \
         modules (addresses are not resolved to functions) and no call stacks (the \
         accesses of {} stacks are counted on the root)",
        unknown.len()
    ));
    unknown.len()
}

/// What the reader thread hands the simulators.
enum Message {
    /// The skeleton, when it came before the first record.
    Skeleton(Option<Arc<Dump>>),
    /// Records in order, prepared.
    Records(Arc<Prepared>),
}

/// Re-simulates the trace `reader` (named `name`) with every target over
/// one read of the stream, each on a thread of its own; returns one dump
/// per target, in order. `progress` is called on the reader thread with
/// the bytes read so far and the total when known.
pub fn resimulate(
    name: &str,
    reader: TraceReader,
    targets: &[Target],
    progress: impl FnMut(u64, Option<u64>),
) -> Result<Vec<Dump>, ReplayError> {
    resimulate_with_band(name, reader, targets, 0, 0, progress)
}

/// Whether a layout-noise band can be made of `reader`'s trace (named
/// `name`), as far as can be told before reading it: a text trace
/// (lackey, Dinero IV) or a cctrace of version 1 never holds the
/// capture's dump skeleton, so it is refused here, before any work; a
/// cctrace of version 2 may hold it anywhere (a capture's plain file is
/// checked through its index when opened), so one without is found out
/// only at its end.
pub fn band_possible(name: &str, reader: &TraceReader) -> Result<(), ReplayError> {
    let why = match (reader.format(), reader.version()) {
        (coldcache_trace::Format::Binary, Some(v)) if v >= 2 => return Ok(()),
        (coldcache_trace::Format::Binary, v) => format!(
            "a cctrace of version {} holds no attachments, so no capture's dump",
            v.unwrap_or(0)
        ),
        (f, _) => format!("a {} trace holds no capture's dump", f.name()),
    };
    Err(ReplayError::NoRegions {
        name: name.to_string(),
        why,
    })
}

/// [`resimulate`], and with `placements` > 0 the layout-noise band of
/// each dump ([`coldcache_dump::Band`], in its meta): every target also
/// simulated under `placements` moved placements
/// ([`crate::placement`], drawn from `seed`) over the same read of the
/// stream, one more simulator thread each, counting totals only. The
/// regions moved come from the trace's dump skeleton: a trace without
/// one (not a capture's) is refused, before any work where its format
/// says so ([`band_possible`]).
pub fn resimulate_with_band(
    name: &str,
    mut reader: TraceReader,
    targets: &[Target],
    placements: u32,
    seed: u64,
    progress: impl FnMut(u64, Option<u64>),
) -> Result<Vec<Dump>, ReplayError> {
    if placements > 0 {
        band_possible(name, &reader)?;
    }
    let trace_err = |source| ReplayError::Trace {
        name: name.to_string(),
        source,
    };
    // Every configuration is checked first, so one that cannot be built
    // is refused before the trace is read.
    for t in targets {
        t.config.validate().map_err(|source| ReplayError::Config {
            name: t.name.clone(),
            source,
        })?;
    }
    let total = reader.total_bytes();
    let format = reader.format();
    let mut progress = progress;
    let mut numbering = Numbering::new();
    let results = std::thread::scope(|scope| {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        // Per target: the measured placement (0), then the moved ones.
        let sims = targets
            .iter()
            .enumerate()
            .flat_map(|(i, t)| (0..=placements).map(move |k| (i, t, k)));
        for (i, t, k) in sims {
            let (tx, rx) = mpsc::sync_channel::<Message>(IN_FLIGHT);
            senders.push(tx);
            let config = t.config.clone();
            let handle = std::thread::Builder::new()
                .name(format!("simulate {} {k}", t.name))
                .spawn_scoped(scope, move || -> Result<Resim, ReplayError> {
                    let mut sim: Option<Resim> = None;
                    for m in rx {
                        match m {
                            Message::Skeleton(s) => {
                                let mut r = Resim::new(&config, s.as_deref())?;
                                r.limit_data_sizes(data_size_limit(&config, format));
                                if k > 0 {
                                    let regions =
                                        s.as_deref().map(placement::regions_of).unwrap_or_default();
                                    r = r.moved(Placement::new(
                                        &regions,
                                        seed,
                                        k,
                                        placement::line_alignment(&config),
                                        placement::max_offset(&config),
                                    ));
                                }
                                sim = Some(r);
                            }
                            Message::Records(batch) => {
                                if let Some(sim) = sim.as_mut() {
                                    sim.feed(&batch);
                                }
                            }
                        }
                    }
                    match sim {
                        Some(s) => Ok(s),
                        None => Resim::new(&config, None).map(|mut r| {
                            r.limit_data_sizes(data_size_limit(&config, format));
                            r
                        }),
                    }
                })
                .map_err(|e| ReplayError::Spawn(format!("simulator {i}"), e))?;
            handles.push(handle);
        }
        // The reader and numbering: this thread.
        let mut first = true;
        let mut records: Vec<Record> = Vec::with_capacity(BATCH);
        // Batches sent earlier, taken back once every simulator has
        // dropped its share (the reader then holds the only `Arc`), so
        // a long stream reuses a few buffers instead of allocating one
        // per batch.
        let mut sent: std::collections::VecDeque<Arc<Prepared>> = std::collections::VecDeque::new();
        let read: Result<(), ReplayError> = loop {
            let n = match reader.read_batch(&mut records, BATCH) {
                Ok(n) => n,
                Err(e) => break Err(trace_err(e)),
            };
            if first {
                first = false;
                let skeleton = match reader.attachment(ATTACH_DUMP_SKELETON) {
                    Some(b) => Some(Arc::new(Dump::from_bytes(b).map_err(|e| {
                        ReplayError::Skeleton {
                            name: name.to_string(),
                            detail: e.to_string(),
                        }
                    })?)),
                    None => None,
                };
                for tx in &senders {
                    let _ = tx.send(Message::Skeleton(skeleton.clone()));
                }
            }
            progress(reader.bytes_read(), total);
            if n == 0 {
                break Ok(());
            }
            // Thread indices index per-thread tables here: bounded by what
            // the input read so far could name densely (a thread costs at
            // least a byte), and never below the most threads a capture
            // tells apart. `0xffffffff` in a tiny file made `sim -o` abort
            // on a 64 GiB allocation.
            let bytes = reader.bytes_read();
            let limit = bytes.max(MIN_THREAD_INDEX_LIMIT);
            if let Some(r) = records.iter().find(|r| u64::from(r.thread) > limit) {
                break Err(ReplayError::ThreadIndex {
                    name: name.to_string(),
                    index: r.thread,
                    bytes,
                    limit,
                });
            }
            let mut batch = match sent.front_mut().and_then(Arc::get_mut) {
                Some(b) => {
                    let b = std::mem::take(b);
                    sent.pop_front();
                    b
                }
                None => Prepared::default(),
            };
            numbering.prepare(&records, &mut batch);
            let batch = Arc::new(batch);
            for tx in &senders {
                // A simulator that stopped reports why when joined.
                let _ = tx.send(Message::Records(Arc::clone(&batch)));
            }
            // At most the batches in flight plus a few are kept.
            if sent.len() > IN_FLIGHT + 2 {
                sent.pop_front();
            }
            sent.push_back(batch);
        };
        drop(senders);
        let mut done = Vec::new();
        for h in handles {
            done.push(
                h.join().unwrap_or_else(|_| {
                    Err(ReplayError::ReaderStopped("a simulator thread".into()))
                }),
            );
        }
        read.map(|()| done)
    })?;
    let skeleton = match reader.attachment(ATTACH_DUMP_SKELETON) {
        Some(b) => Some(Dump::from_bytes(b).map_err(|e| ReplayError::Skeleton {
            name: name.to_string(),
            detail: e.to_string(),
        })?),
        None => None,
    };
    let threads: Vec<(u32, u64)> = reader.threads().into_iter().collect();
    if placements > 0 && skeleton.is_none() {
        return Err(ReplayError::NoRegions {
            name: name.to_string(),
            why: "this one holds no capture's dump".into(),
        });
    }
    let mut dumps = Vec::new();
    let mut results = results.into_iter();
    for t in targets {
        let sim = results
            .next()
            .ok_or_else(|| ReplayError::ReaderStopped("a simulator thread".into()))??;
        let mut moved = Vec::new();
        for _ in 0..placements {
            let m = results
                .next()
                .ok_or_else(|| ReplayError::ReaderStopped("a simulator thread".into()))??;
            moved.push(m.totals(&numbering));
        }
        let captured = skeleton
            .as_ref()
            .map(|s| format!(" (captured with cache {})", s.meta.cache_name))
            .unwrap_or_default();
        let note = format!(
            "re-simulated from the trace {name} with cache {}{captured}",
            t.name
        );
        let mut dump = sim.finish(&numbering, t, skeleton.as_ref(), &threads, note);
        if let Some(s) = skeleton.as_ref().filter(|_| placements > 0) {
            let mut measured = vec![0u64; dump.meta.counters.len()];
            for r in &dump.records {
                for (m, v) in measured.iter_mut().zip(&r.counters) {
                    *m = m.saturating_add(*v);
                }
            }
            let regions = placement::regions_of(s);
            let mut totals = vec![measured];
            totals.extend(moved);
            dump.meta.band = Some(coldcache_dump::Band {
                seed,
                max_offset: placement::max_offset(&t.config),
                regions: placement::describe(&regions, s.objects.is_some()),
                totals,
            });
        }
        dumps.push(dump);
    }
    Ok(dumps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldcache_trace::{Record, RecordKind::*};

    fn counter(d: &Dump, r: &DumpRecord, name: &str) -> u64 {
        r.counters[d.counter(name).unwrap()]
    }

    /// A numbering and one configuration, fed the same batches.
    struct One {
        numbering: Numbering,
        sim: Resim,
        batch: Prepared,
    }

    impl One {
        fn new(cfg: &HierarchyConfig, skeleton: Option<&Dump>) -> One {
            One {
                numbering: Numbering::new(),
                sim: Resim::new(cfg, skeleton).unwrap(),
                batch: Prepared::default(),
            }
        }

        fn feed(&mut self, records: &[Record]) {
            self.numbering.prepare(records, &mut self.batch);
            self.sim.feed(&self.batch);
        }

        fn finish(
            self,
            target: &Target,
            skeleton: Option<&Dump>,
            threads: &[(u32, u64)],
            note: String,
        ) -> Dump {
            self.sim
                .finish(&self.numbering, target, skeleton, threads, note)
        }
    }

    /// A hand-made stream: rows per (ip, stack, thread), instructions
    /// counted at their fetch, the unmodelled mark, a data access counted
    /// in its instruction's row, and hits and misses worked out by hand
    /// for Cachegrind's caches (64-byte lines, cold).
    #[test]
    fn rows_and_counts_by_hand() {
        let cfg = coldcache_sim::presets::by_name("cachegrind").unwrap();
        let mut sim = One::new(&cfg, None);
        let i = |ip: u64, stack: u32, thread: u32| {
            Record::new(Instr, ip, 4)
                .with_ip(ip)
                .with_stack(stack)
                .with_thread(thread)
        };
        let mut unmodelled = i(0x1000, 0, 0);
        unmodelled.unmodelled = true;
        sim.feed(&[
            i(0x1000, 0, 0),                                             // I1 miss
            Record::new(Load, 0x8000, 8).with_ip(0x1000),                // D1 miss
            i(0x1004, 3, 0),                                             // same line: hit
            Record::new(Store, 0x8008, 8).with_ip(0x1004).with_stack(3), // hit
            unmodelled,                                                  // hit, unmodelled
            i(0x1040, 0, 1),                                             // new line: miss
        ]);
        assert_eq!(sim.numbering.instructions(), 4);
        let target = Target {
            name: "cachegrind".into(),
            config: cfg,
        };
        let d = sim.finish(&target, None, &[(0, 100), (1, 101)], "note".into());
        let keys: Vec<(u64, u32, u32)> = d
            .records
            .iter()
            .map(|r| (r.ip, r.stack, r.thread))
            .collect();
        assert_eq!(keys, [(0x1000, 0, 0), (0x1004, 3, 0), (0x1040, 0, 1)]);
        let (a, b, c) = (&d.records[0], &d.records[1], &d.records[2]);
        assert_eq!(counter(&d, a, "instructions"), 2);
        assert_eq!(counter(&d, a, "unmodelled"), 1);
        assert_eq!(counter(&d, a, "i_mem"), 1);
        assert_eq!(counter(&d, a, "i_L1"), 1);
        assert_eq!(counter(&d, a, "r_mem"), 1);
        assert_eq!(counter(&d, b, "instructions"), 1);
        assert_eq!(counter(&d, b, "i_L1"), 1);
        assert_eq!(counter(&d, b, "w_L1"), 1);
        assert_eq!(counter(&d, c, "i_mem"), 1);
        assert_eq!(d.meta.instructions, 4);
        assert_eq!(d.meta.cache_name, "cachegrind");
        let tids: Vec<u32> = d.threads.iter().map(|t| t.tid).collect();
        assert_eq!(tids, [100, 101]);
        assert_eq!(d.stacks.len(), 1, "no skeleton: the root stack only");
        assert_eq!(d.meta.notes, ["note"]);
    }

    /// A moved placement counted by hand: two loads 4 KiB apart, in two
    /// regions, alternate on a direct-mapped D1 of two sets. Where they
    /// stay in one set (the relative shift an even number of lines) every
    /// load misses; apart, only the first two. The measured placement's
    /// totals are the rows' sums.
    #[test]
    fn a_moved_placement_by_hand() {
        use crate::placement::{Placement, Region};
        use coldcache_sim::presets::{cachegrind, Geometry};
        let g = Geometry::new;
        let cfg = cachegrind(g(1024, 2, 64), g(128, 1, 64), g(65536, 4, 64));
        let regions = [
            Region {
                start: 0x2000,
                end: 0x2040,
                kind: "data",
            },
            Region {
                start: 0x3000,
                end: 0x3040,
                kind: "data",
            },
        ];
        let mut records = Vec::new();
        for _ in 0..10 {
            records.push(Record::new(Instr, 0x1000, 4).with_ip(0x1000));
            records.push(Record::new(Load, 0x2000, 8).with_ip(0x1000));
            records.push(Record::new(Instr, 0x1004, 4).with_ip(0x1004));
            records.push(Record::new(Load, 0x3000, 8).with_ip(0x1004));
        }
        let names = Resim::new(&cfg, None)
            .unwrap()
            .layout()
            .names(&["L1".to_string(), "L2".to_string()]);
        let at = |n: &str| names.iter().position(|x| x == n).unwrap();
        let mut seen = [false; 2];
        for index in 0..16 {
            let p = Placement::new(&regions, 9, index, 64, 128);
            let apart = (p.shift(0x3000) - p.shift(0x2000)) / 64 % 2 == 1;
            let mut numbering = Numbering::new();
            let mut batch = Prepared::default();
            numbering.prepare(&records, &mut batch);
            let mut sim = Resim::new(&cfg, None).unwrap().moved(p);
            sim.feed(&batch);
            let t = sim.totals(&numbering);
            assert_eq!(t[at("instructions")], 20);
            assert_eq!(t[at("r_L1")] + t[at("r_L2")] + t[at("r_mem")], 20);
            let misses = 20 - t[at("r_L1")];
            assert_eq!(misses, if apart { 2 } else { 20 }, "placement {index}");
            seen[usize::from(apart)] = true;
            if index == 0 {
                // Unmoved: the rows' sums.
                let mut one = One::new(&cfg, None);
                one.feed(&records);
                let target = Target {
                    name: "c".into(),
                    config: cfg.clone(),
                };
                let d = one.finish(&target, None, &[], String::new());
                let mut sums = vec![0u64; t.len()];
                for r in &d.records {
                    for (s, v) in sums.iter_mut().zip(&r.counters) {
                        *s += v;
                    }
                }
                assert_eq!(sums, t);
            }
        }
        assert_eq!(seen, [true, true], "both outcomes among 16 placements");
    }

    /// Many more (ip, stack, thread) keys than the row cache has slots,
    /// revisited in a scrambled order: every row counts exactly the
    /// instructions of its key (counted independently with a BTreeMap).
    #[test]
    fn row_cache_collisions_keep_rows_apart() {
        let cfg = coldcache_sim::presets::by_name("cachegrind").unwrap();
        let mut sim = One::new(&cfg, None);
        let mut truth = std::collections::BTreeMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut batch = Vec::new();
        // Keys of one ip that share a cache slot, alternating with
        // another ip so the per-thread last row does not answer.
        let slot = row_slot(0x1000, 0, 0);
        let same: Vec<(u32, u32)> = (0..u32::MAX)
            .flat_map(|s| [(s, 0), (s, 1)])
            .filter(|&(s, t)| row_slot(0x1000, s, t) == slot)
            .take(4)
            .collect();
        for i in 0..400 {
            let (stack, thread) = same[i % same.len()];
            for (ip, stack) in [(0x1000, stack), (0x2000, 0)] {
                *truth.entry((ip, stack, thread)).or_insert(0u64) += 1;
                batch.push(
                    Record::new(Instr, ip, 4)
                        .with_ip(ip)
                        .with_stack(stack)
                        .with_thread(thread),
                );
            }
        }
        for _ in 0..60_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ip = 0x40_0000 + (x % 9000) * 4;
            let stack = (x >> 20) as u32 % 3;
            let thread = (x >> 30) as u32 % 2;
            *truth.entry((ip, stack, thread)).or_insert(0u64) += 1;
            batch.push(
                Record::new(Instr, ip, 4)
                    .with_ip(ip)
                    .with_stack(stack)
                    .with_thread(thread),
            );
        }
        for part in batch.chunks(777) {
            sim.feed(part);
        }
        let target = Target {
            name: "cachegrind".into(),
            config: cfg,
        };
        let d = sim.finish(&target, None, &[], String::new());
        let got: std::collections::BTreeMap<(u64, u32, u32), u64> = d
            .records
            .iter()
            .map(|r| ((r.ip, r.stack, r.thread), counter(&d, r, "instructions")))
            .collect();
        assert!(truth.len() > 2 * ROW_CACHE, "{} keys", truth.len());
        assert_eq!(got, truth);
    }

    /// The numbering equals a naive one — a row per (ip, stack, thread)
    /// in order of first appearance, instructions and unmodelled ones
    /// counted per row — on a stream that defeats each shortcut in turn:
    /// instruction walks whose successors change (the row that followed
    /// last time is wrong), data records of another ip than their thread's
    /// last fetch, stacks and threads switching, batches cut anywhere.
    #[test]
    fn numbering_equals_first_appearance() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        // Each thread's first record: a data record of ip 0, stack 0 (the
        // key of a row slot not yet filled).
        let mut records: Vec<Record> = (0..3)
            .map(|t| Record::new(Load, 0x8000, 8).with_thread(t))
            .collect();
        let mut at = [0u64; 3];
        let (mut thread, mut stack) = (0u32, 0u32);
        for _ in 0..60_000 {
            if rand(20) == 0 {
                thread = rand(3) as u32;
            }
            if rand(50) == 0 {
                stack = rand(3) as u32;
            }
            let t = thread as usize;
            // Mostly the next instruction, sometimes a jump elsewhere.
            at[t] = if rand(8) == 0 {
                rand(300)
            } else {
                (at[t] + 1) % 300
            };
            let ip = 0x1000 + at[t] * 4;
            let mut fetch = Record::new(Instr, ip, 4)
                .with_ip(ip)
                .with_stack(stack)
                .with_thread(thread);
            fetch.unmodelled = rand(100) == 0;
            records.push(fetch);
            for _ in 0..rand(3) {
                // Another instruction's ip now and then, and ip 0 (a din
                // trace's data records) with stack 0.
                let ip = match rand(20) {
                    0 | 1 => 0x1000 + rand(300) * 4,
                    2 => 0,
                    _ => ip,
                };
                let stack = if ip == 0 { 0 } else { stack };
                records.push(
                    Record::new(Load, 0x8000 + rand(4096), 8)
                        .with_ip(ip)
                        .with_stack(stack)
                        .with_thread(thread),
                );
            }
        }
        let mut naive: HashMap<(u64, u32, u32), u32> = HashMap::new();
        let mut want_rows = Vec::new();
        let (mut want_instr, mut want_unmodelled) = (Vec::new(), Vec::new());
        for r in &records {
            let n = naive.len() as u32;
            let row = *naive.entry((r.ip, r.stack, r.thread)).or_insert(n);
            if row == n {
                want_instr.push(0u64);
                want_unmodelled.push(0u64);
            }
            if r.kind == Instr {
                want_instr[row as usize] += 1;
                want_unmodelled[row as usize] += u64::from(r.unmodelled);
            }
            want_rows.push(row);
        }
        let mut numbering = Numbering::new();
        let mut batch = Prepared::default();
        let (mut got_rows, mut start) = (Vec::new(), 0);
        while start < records.len() {
            let end = (start + 1 + rand(5000) as usize).min(records.len());
            numbering.prepare(&records[start..end], &mut batch);
            assert_eq!(batch.len(), end - start);
            assert_eq!(batch.rows_total, numbering.rows());
            // Runs of one thread, in order, covering the batch.
            let mut from = 0;
            for (i, &(to, t)) in batch.runs.iter().enumerate() {
                assert!(to > from);
                assert!(records[start + from..start + to]
                    .iter()
                    .all(|r| r.thread == t));
                if let Some(&(_, next)) = batch.runs.get(i + 1) {
                    assert_ne!(next, t, "two runs of one thread side by side");
                }
                from = to;
            }
            assert_eq!(from, end - start);
            for (a, r) in batch.accesses.iter().zip(&records[start..end]) {
                assert_eq!(
                    (a.kind, a.addr, a.size, a.ip),
                    (access_kind(r.kind), r.addr, r.size, r.ip)
                );
            }
            got_rows.extend_from_slice(&batch.rows);
            start = end;
        }
        assert_eq!(got_rows, want_rows);
        assert_eq!(numbering.instructions, want_instr);
        let unmodelled: Vec<u64> = (0..want_unmodelled.len() as u32)
            .map(|r| numbering.unmodelled.get(&r).copied().unwrap_or(0))
            .collect();
        assert_eq!(unmodelled, want_unmodelled);
        assert_eq!(numbering.instructions(), want_instr.iter().sum::<u64>());
        assert!(want_unmodelled.iter().sum::<u64>() > 0);
    }

    /// Threads keep the recorded cores of the skeleton when the
    /// configuration has as many cores; otherwise they take cores
    /// round-robin in number order.
    #[test]
    fn cores_recorded_or_round_robin() {
        let cfg = coldcache_sim::presets::by_name("jaguar").unwrap();
        let cores = cfg.cores as u32;
        let mut skel = Dump::default();
        skel.meta.cores = cores;
        skel.threads = (0..3)
            .map(|i| Thread {
                tid: 10 + i,
                name: String::new(),
                core: [2, 2, 1][i as usize],
            })
            .collect();
        let feed = |sim: &mut One| {
            for t in [2u32, 0, 1] {
                sim.feed(&[Record::new(Instr, 0x40, 4).with_ip(0x40).with_thread(t)]);
            }
        };
        let target = Target {
            name: "jaguar".into(),
            config: cfg.clone(),
        };
        let mut sim = One::new(&cfg, Some(&skel));
        feed(&mut sim);
        let d = sim.finish(&target, Some(&skel), &[], String::new());
        let got: Vec<u32> = d.threads.iter().map(|t| t.core).collect();
        assert_eq!(got, [2, 2, 1]);
        skel.meta.cores = cores + 1;
        let mut sim = One::new(&cfg, Some(&skel));
        feed(&mut sim);
        let d = sim.finish(&target, Some(&skel), &[], String::new());
        let got: Vec<u32> = d.threads.iter().map(|t| t.core).collect();
        assert_eq!(got, [0, 1, 2]);
    }
}
