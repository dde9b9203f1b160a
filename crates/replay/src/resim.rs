//! Re-simulation: a kept trace turned into a whole dump for another cache
//! configuration ("capture once, simulate many"; `coldcache sim --output`).
//!
//! A capture's cctrace (version 2, `docs/trace-format.md`) carries each
//! access's instruction, thread and stack id, marks the instructions whose
//! accesses were not modelled, and holds the capture's dump without its
//! records (the *skeleton*: meta, modules, threads, stack tree). A
//! [`Resim`] counts the stream exactly as the capture's accountant did —
//! one counter row per (instruction, stack, thread), the instruction
//! counted at its fetch record, every access attributed through the one
//! [`Driver`] — so re-simulating with the capture's own configuration
//! gives back the capture's records, and with another configuration what a
//! capture with that configuration would have counted.
//!
//! [`resimulate`] runs several configurations over one read of the stream:
//! one reader thread decodes batches and hands each (shared, read-only) to
//! one simulator thread per configuration through bounded channels, so
//! memory is bounded by the batches in flight and the distinct rows, never
//! by the trace's length.
//!
//! Traces without stacks (cctrace version 1, lackey, din) re-simulate too:
//! every access on the root stack, threads from the trace's thread table,
//! no modules (a flat profile by address).

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;

use coldcache_dump::{Dump, Meta, Record as DumpRecord, StackNode, Thread};
use coldcache_sim::{Access, AccessKind, CounterLayout, Driver, HierarchyConfig, RowTable};
use coldcache_trace::{Record, RecordKind, TraceReader, ATTACH_DUMP_SKELETON};

use crate::{access_kind, ReplayError};

/// Records per batch the reader thread hands to the simulators.
const BATCH: usize = 1 << 15;

/// Entries of [`Resim`]'s row cache (a power of two).
const ROW_CACHE_BITS: u32 = 12;
const ROW_CACHE: usize = 1 << ROW_CACHE_BITS;

/// The slot of (ip, stack, thread) in [`Resim`]'s row cache.
#[inline]
fn row_slot(ip: u64, stack: u32, thread: u32) -> usize {
    let mix = (ip ^ (u64::from(stack) << 24) ^ (u64::from(thread) << 48))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mix >> (64 - ROW_CACHE_BITS)) as usize
}

/// Batches in flight per simulator (the bound on memory, with the rows).
const IN_FLIGHT: usize = 4;

/// The hasher of the row map: one multiply per word (FxHash's), instead
/// of SipHash, whose cost per fetch record dominated a re-simulation. The
/// keys are addresses and small numbers from a trace, not chosen by an
/// adversary.
#[derive(Default, Clone, Copy)]
struct RowHasher(u64);

impl std::hash::Hasher for RowHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type RowMap = HashMap<(u64, u32, u32), u32, std::hash::BuildHasherDefault<RowHasher>>;

/// One configuration to re-simulate with.
#[derive(Clone, Debug)]
pub struct Target {
    /// Its name as the user gave it (a preset name or a file), for the
    /// dump's `cache_name`.
    pub name: String,
    /// The configuration.
    pub config: HierarchyConfig,
}

/// The counting of one configuration over a stream: the capture's
/// accountant without the capture.
pub struct Resim {
    driver: Driver,
    layout: CounterLayout,
    width: usize,
    /// (ip, stack, thread) → row.
    rows: RowMap,
    /// A direct-mapped cache in front of `rows`: most instructions of a
    /// stream repeat recently seen ones, whose rows are found here with a
    /// multiply and a compare instead of a hash-table probe.
    row_cache: Vec<((u64, u32, u32), u32)>,
    keys: Vec<(u64, u32, u32)>,
    /// The counter rows, `instructions` and first-level hits dense.
    table: RowTable,
    /// Per thread index: its core, once seen.
    cores: Vec<Option<usize>>,
    /// Per thread index: the key and row of its last instruction.
    last: Vec<((u64, u32), u32)>,
    /// The recorded core of each thread, when the skeleton came before
    /// the records and has as many cores as this configuration.
    recorded_cores: Option<Vec<u32>>,
    /// The run of one core's accesses under way: its first `run_len`
    /// entries ([`Driver::BATCH`] long, written in place: no push).
    run: Box<[Access]>,
    run_rows: Box<[u32]>,
    run_len: usize,
    run_core: usize,
    instructions: u64,
    unmodelled: u64,
}

impl Resim {
    /// A re-simulation with `config`. `skeleton` is the capture's dump
    /// skeleton when it is known before the first record: its threads keep
    /// their recorded cores when `config` has as many cores as the
    /// capture; otherwise threads take cores round-robin in the order of
    /// their numbers, as a capture assigns them.
    pub fn new(config: &HierarchyConfig, skeleton: Option<&Dump>) -> Result<Resim, ReplayError> {
        let driver = Driver::new(config).map_err(|source| ReplayError::Config {
            name: config.name.clone(),
            source,
        })?;
        let layout = driver.layout();
        let cores = driver.cores().cores();
        let recorded_cores = skeleton
            .filter(|d| d.meta.cores as usize == cores)
            .map(|d| d.threads.iter().map(|t| t.core).collect());
        Ok(Resim {
            driver,
            layout,
            width: layout.len(),
            rows: RowMap::default(),
            row_cache: vec![((0, 0, 0), u32::MAX); ROW_CACHE],
            keys: Vec::new(),
            table: RowTable::new(layout),
            cores: Vec::new(),
            last: Vec::new(),
            recorded_cores,
            run: vec![
                Access {
                    kind: AccessKind::Read,
                    addr: 0,
                    size: 1,
                    ip: 0,
                };
                Driver::BATCH
            ]
            .into_boxed_slice(),
            run_rows: vec![0; Driver::BATCH].into_boxed_slice(),
            run_len: 0,
            run_core: 0,
            instructions: 0,
            unmodelled: 0,
        })
    }

    /// The counter layout of the rows.
    pub fn layout(&self) -> CounterLayout {
        self.layout
    }

    fn core_of(&mut self, thread: u32) -> usize {
        let t = thread as usize;
        if t >= self.cores.len() {
            self.cores.resize(t + 1, None);
            self.last.resize(t + 1, ((u64::MAX, u32::MAX), u32::MAX));
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

    /// The row of (ip, stack, thread); `thread` has been through
    /// [`Resim::core_of`].
    #[inline]
    fn row(&mut self, ip: u64, stack: u32, thread: u32) -> u32 {
        let t = thread as usize;
        if self.last[t].0 == (ip, stack) {
            return self.last[t].1;
        }
        let key = (ip, stack, thread);
        let slot = row_slot(ip, stack, thread);
        let cached = self.row_cache[slot];
        let row = if cached.1 != u32::MAX && cached.0 == key {
            cached.1
        } else {
            let row = self.row_slow(key);
            self.row_cache[slot] = (key, row);
            row
        };
        self.last[t] = ((ip, stack), row);
        row
    }

    /// The row of `key` from the hash table, made when new.
    #[inline(never)]
    fn row_slow(&mut self, key: (u64, u32, u32)) -> u32 {
        let next = self.keys.len() as u32;
        let row = *self.rows.entry(key).or_insert(next);
        if row == next {
            self.keys.push(key);
            self.table.push_row();
        }
        row
    }

    fn flush(&mut self) {
        let n = self.run_len;
        if n != 0 {
            self.driver.attribute_batch(
                self.run_core,
                &self.run[..n],
                &self.run_rows[..n],
                &mut self.table,
            );
            self.run_len = 0;
        }
    }

    /// Counts `records` in order.
    pub fn feed(&mut self, records: &[Record]) {
        // The thread of the previous record and its core: a thread's core
        // never changes once given.
        let (mut last_thread, mut last_core) = (u32::MAX, 0);
        for r in records {
            if r.thread != last_thread {
                last_thread = r.thread;
                last_core = self.core_of(r.thread);
            }
            let core = last_core;
            let row = self.row(r.ip, r.stack, r.thread);
            if r.kind == RecordKind::Instr {
                self.table.count_instruction(row);
                self.instructions += 1;
                if r.unmodelled {
                    self.table.wide_row_mut(row)[CounterLayout::UNMODELLED] += 1;
                    self.unmodelled += 1;
                }
            }
            if core != self.run_core || self.run_len == Driver::BATCH {
                self.flush();
                self.run_core = core;
            }
            let i = self.run_len;
            self.run[i] = Access {
                kind: access_kind(r.kind),
                addr: r.addr,
                size: r.size,
                ip: r.ip,
            };
            self.run_rows[i] = row;
            self.run_len = i + 1;
        }
        self.flush();
    }

    /// Instructions counted so far.
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// The dump: `skeleton`'s meta, modules, threads and stacks (a bare
    /// one for traces without a skeleton, with `threads` as the trace's
    /// thread table), this configuration's cache and counters, and the
    /// rows sorted by (ip, stack, thread) as a capture sorts them. `note`
    /// is added to the meta's notes.
    pub fn finish(
        mut self,
        target: &Target,
        skeleton: Option<&Dump>,
        threads: &[(u32, u64)],
        note: String,
    ) -> Dump {
        self.flush();
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
            },
            None => {
                let seen = self.cores.len().max(threads.len());
                Dump {
                    meta: Meta {
                        threads: "all".to_string(),
                        trigger: "trace".to_string(),
                        instructions: self.instructions,
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
        dump.meta.cache_toml = coldcache_config_base::to_toml(cfg);
        dump.meta.cores = cfg.cores.max(1) as u32;
        dump.meta.counters = self.layout.names(&level_names);
        dump.meta.levels = level_names;
        dump.meta.notes.push(note);
        let width = self.width;
        let table = self.table.into_rows();
        let mut records: Vec<DumpRecord> = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, &(ip, stack, thread))| DumpRecord {
                ip,
                stack,
                thread,
                counters: table[i * width..(i + 1) * width].to_vec(),
            })
            .collect();
        records.sort_by_key(|r| (r.ip, r.stack, r.thread));
        dump.records = records;
        dump
    }
}

/// What the reader thread hands the simulators.
enum Message {
    /// The skeleton, when it came before the first record.
    Skeleton(Option<Arc<Dump>>),
    /// Records in order.
    Records(Arc<Vec<Record>>),
}

/// Re-simulates the trace `reader` (named `name`) with every target over
/// one read of the stream, each on a thread of its own; returns one dump
/// per target, in order. `progress` is called on the reader thread with
/// the bytes read so far and the total when known.
pub fn resimulate(
    name: &str,
    mut reader: TraceReader,
    targets: &[Target],
    progress: impl FnMut(u64, Option<u64>),
) -> Result<Vec<Dump>, ReplayError> {
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
    let mut progress = progress;
    let results =
        std::thread::scope(|scope| {
            let mut senders = Vec::new();
            let mut handles = Vec::new();
            for (i, t) in targets.iter().enumerate() {
                let (tx, rx) = mpsc::sync_channel::<Message>(IN_FLIGHT);
                senders.push(tx);
                let config = t.config.clone();
                let handle = std::thread::Builder::new()
                    .name(format!("simulate {}", t.name))
                    .spawn_scoped(scope, move || -> Result<Resim, ReplayError> {
                        let mut sim: Option<Resim> = None;
                        for m in rx {
                            match m {
                                Message::Skeleton(s) => {
                                    sim = Some(Resim::new(&config, s.as_deref())?);
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
                            None => Resim::new(&config, None),
                        }
                    })
                    .map_err(|e| ReplayError::Spawn(format!("simulator {i}"), e))?;
                handles.push(handle);
            }
            // The reader: this thread.
            let mut first = true;
            // Batches sent earlier, taken back once every simulator has
            // dropped its share (the reader then holds the only `Arc`), so
            // a long stream reuses a few buffers instead of allocating one
            // per batch.
            let mut sent: std::collections::VecDeque<Arc<Vec<Record>>> =
                std::collections::VecDeque::new();
            let read: Result<(), ReplayError> = loop {
                let mut batch = match sent.front_mut().and_then(Arc::get_mut) {
                    Some(b) => {
                        let b = std::mem::take(b);
                        sent.pop_front();
                        b
                    }
                    None => Vec::with_capacity(BATCH),
                };
                let n = match reader.read_batch(&mut batch, BATCH) {
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
                done.push(h.join().unwrap_or_else(|_| {
                    Err(ReplayError::ReaderStopped("a simulator thread".into()))
                }));
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
    let mut dumps = Vec::new();
    for (sim, t) in results.into_iter().zip(targets) {
        let sim = sim?;
        let captured = skeleton
            .as_ref()
            .map(|s| format!(" (captured with cache {})", s.meta.cache_name))
            .unwrap_or_default();
        let note = format!(
            "re-simulated from the trace {name} with cache {}{captured}",
            t.name
        );
        dumps.push(sim.finish(t, skeleton.as_ref(), &threads, note));
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

    /// A hand-made stream: rows per (ip, stack, thread), instructions
    /// counted at their fetch, the unmodelled mark, a data access counted
    /// in its instruction's row, and hits and misses worked out by hand
    /// for Cachegrind's caches (64-byte lines, cold).
    #[test]
    fn rows_and_counts_by_hand() {
        let cfg = coldcache_sim::presets::by_name("cachegrind").unwrap();
        let mut sim = Resim::new(&cfg, None).unwrap();
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
        assert_eq!(sim.instructions(), 4);
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

    /// Many more (ip, stack, thread) keys than the row cache has slots,
    /// revisited in a scrambled order: every row counts exactly the
    /// instructions of its key (counted independently with a BTreeMap).
    #[test]
    fn row_cache_collisions_keep_rows_apart() {
        let cfg = coldcache_sim::presets::by_name("cachegrind").unwrap();
        let mut sim = Resim::new(&cfg, None).unwrap();
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
        let feed = |sim: &mut Resim| {
            for t in [2u32, 0, 1] {
                sim.feed(&[Record::new(Instr, 0x40, 4).with_ip(0x40).with_thread(t)]);
            }
        };
        let target = Target {
            name: "jaguar".into(),
            config: cfg.clone(),
        };
        let mut sim = Resim::new(&cfg, Some(&skel)).unwrap();
        feed(&mut sim);
        let d = sim.finish(&target, Some(&skel), &[], String::new());
        let got: Vec<u32> = d.threads.iter().map(|t| t.core).collect();
        assert_eq!(got, [2, 2, 1]);
        skel.meta.cores = cores + 1;
        let mut sim = Resim::new(&cfg, Some(&skel)).unwrap();
        feed(&mut sim);
        let d = sim.finish(&target, Some(&skel), &[], String::new());
        let got: Vec<u32> = d.threads.iter().map(|t| t.core).collect();
        assert_eq!(got, [0, 1, 2]);
    }
}
