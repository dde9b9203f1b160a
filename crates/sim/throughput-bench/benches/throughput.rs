//! Simulated accesses per second from a large trace held in memory.
//!
//! The trace imitates a program: a loop body of instruction fetches
//! (sequential, 1-15 bytes), and per instruction ~0.5 data accesses mixing a
//! stack, sequential array sweeps, strided walks and random lookups in a
//! 64 MiB heap. Every benchmark runs over the same trace:
//! - `floor`: reading the trace and summing addresses (the loop overhead);
//! - `cachegrind`: the Cachegrind preset, one core;
//! - `cachegrind+attribution`: plus a per-instruction counter update per
//!   access, as the capture engine does;
//! - `jaguar-4t` and `jaguar-4t+attribution`: the Jaguar preset with the
//!   trace split into four threads (turns of 64 accesses) on four cores
//!   running the same code on private data (each thread's data addresses
//!   are moved to their own region);
//! - `jaguar-4t-shared`: the same split with the data left shared, so the
//!   four "threads" write each other's lines all the time (a worst case for
//!   coherence, not a realistic program);
//! - `driver/...+attribution`: the batches through
//!   `Driver::attribute_batch`, the entry a capture's consumer or a replay
//!   calls: the tally by kind, and each access attributed into a row of
//!   the counter layout (its instruction's, 65,536 rows);
//! - `driver/cachegrind+attribution+lineuse`: the same with line
//!   utilisation measured (`Driver::with_line_use`: every access through
//!   `Hierarchy::access`, watched by `lineuse.rs`);
//! - `driver/cachegrind`: the batches through `Driver::access_batch` (the
//!   tally only), the entry `coldcache sim` calls;
//! - `general/...`: the Cachegrind runs on the general caches
//!   (`Hierarchy::new_general`, the simulator before the lean engine), for
//!   the before/after ratio in the same run; `general/batch/jaguar-4t` and
//!   `general/batch/jaguar-4t-shared` likewise for the Jaguar engine;
//! - the same five through `Hierarchy::access_batch` (`batch/...`): the
//!   trace cut beforehand into runs of one thread, at most 256 accesses
//!   each, slices of one array of the trace's accesses, as a capture
//!   consumer or `coldcache sim` would pass them; the attribution then
//!   reads the batch's results.
//!
//! With `COLDCACHE_BENCH_TRACE=FILE` (a lackey trace, plain or compressed)
//! the trace is that program's instead: its first 20 million records are
//! loaded into memory, each thread-less record assigned to thread
//! (index / 64) % 4 for the Jaguar runs. `scripts/bench.sh` makes one from
//! a real program and also times `coldcache sim` against Cachegrind.
//!
//! Run: `cargo bench --manifest-path crates/sim/throughput-bench/Cargo.toml`
//! (its own workspace: criterion is compiled only there).

use coldcache_sim::*;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

const ACCESSES: usize = 4_000_000;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// (thread, access, dense instruction index)
fn make_trace() -> Vec<(u8, Access, u32)> {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut out = Vec::with_capacity(ACCESSES);
    // 4 threads, each with its own code loop, stack and array cursor.
    let mut pc = [0x40_0000u64, 0x41_0000, 0x42_0000, 0x43_0000];
    let mut sweep = [0x1000_0000u64, 0x2000_0000, 0x3000_0000, 0x4000_0000];
    let mut stride = [0x5000_0000u64; 4];
    let body = 3000u64; // bytes of code per thread loop
    while out.len() < ACCESSES {
        let t = (out.len() / 64) % 4; // switch thread every 64 accesses
        let len = 1 + rng.next() % 15;
        let ip = pc[t];
        let idx = ((ip - 0x40_0000) & 0xFFFFF) as u32;
        out.push((
            t as u8,
            Access::new(AccessKind::InstrFetch, ip, len as u32).with_ip(ip),
            idx,
        ));
        pc[t] = if ip + len >= 0x40_0000 + (t as u64) * 0x1_0000 + body {
            0x40_0000 + (t as u64) * 0x1_0000
        } else {
            ip + len
        };
        let r = rng.next();
        let data = match r % 16 {
            0..=3 => Some((
                0x7fff_0000 - (t as u64) * 0x10000 - (r >> 8) % 512,
                AccessKind::Read,
            )),
            4 | 5 => Some((
                0x7fff_0000 - (t as u64) * 0x10000 - (r >> 8) % 512,
                AccessKind::Write,
            )),
            6 | 7 => {
                sweep[t] += 8;
                Some((sweep[t], AccessKind::Read))
            }
            8 => {
                stride[t] += 4160;
                Some((stride[t] % (64 << 20) + 0x5000_0000, AccessKind::Read))
            }
            9 => Some((0x6000_0000 + (r >> 8) % (64 << 20), AccessKind::Read)),
            10 => Some((0x6000_0000 + (r >> 8) % (64 << 20), AccessKind::Write)),
            _ => None,
        };
        if let Some((a, k)) = data {
            out.push((t as u8, Access::new(k, a & !7, 8).with_ip(ip), idx));
        }
    }
    out.truncate(ACCESSES);
    out
}

fn run(h: &mut Hierarchy, trace: &[(u8, Access, u32)], threads: bool) -> u64 {
    let mut mem = 0u64;
    for &(t, a, _) in trace {
        let core = if threads { usize::from(t) } else { 0 };
        mem += u64::from(h.access(core, a).served_by.is_memory());
    }
    mem
}

fn run_attributed(
    h: &mut Hierarchy,
    trace: &[(u8, Access, u32)],
    threads: bool,
    counters: &mut [[u32; MAX_LEVELS + 1]],
) {
    for &(t, a, idx) in trace {
        let core = if threads { usize::from(t) } else { 0 };
        let r = h.access(core, a);
        // The common case, one line: one counter. Otherwise every slot.
        let c = &mut counters[idx as usize];
        if r.lines() == 1 {
            c[r.served_by.slot()] += 1;
        } else {
            for (s, n) in c.iter_mut().zip(r.per_slot()) {
                *s += n;
            }
        }
    }
}

/// The trace cut into runs of one thread of at most 256 accesses, each a
/// slice of one array of the trace's accesses in order (as the per-access
/// loop reads them, and as a consumer holding a buffer hands them over).
/// Separate vectors per run, the layout before, put every run elsewhere
/// in memory and cost about a third of the driver's speed on the Python
/// trace in host-memory stalls.
struct Batches {
    accesses: Vec<Access>,
    indices: Vec<u32>,
    /// (thread, first, end) of each run.
    runs: Vec<(u8, usize, usize)>,
}

impl Batches {
    /// Each run: its thread, accesses and instruction indices.
    fn iter(&self) -> impl Iterator<Item = (&u8, &[Access], &[u32])> {
        self.runs
            .iter()
            .map(|(t, a, e)| (t, &self.accesses[*a..*e], &self.indices[*a..*e]))
    }
}

fn batches(trace: &[(u8, Access, u32)], threads: bool) -> Batches {
    let mut runs: Vec<(u8, usize, usize)> = Vec::new();
    for (n, &(t, _, _)) in trace.iter().enumerate() {
        let t = if threads { t } else { 0 };
        match runs.last_mut() {
            Some((bt, first, end)) if *bt == t && *end - *first < 256 => *end = n + 1,
            _ => runs.push((t, n, n + 1)),
        }
    }
    Batches {
        accesses: trace.iter().map(|&(_, a, _)| a).collect(),
        indices: trace.iter().map(|&(_, _, i)| i).collect(),
        runs,
    }
}

fn run_batches(h: &mut Hierarchy, b: &Batches, results: &mut [AccessResult]) -> u64 {
    let mut mem = 0u64;
    for (t, acc, _) in b.iter() {
        h.access_batch(usize::from(*t), acc, results);
        for r in &results[..acc.len()] {
            mem += u64::from(r.served_by.is_memory());
        }
    }
    mem
}

fn run_batches_attributed(
    h: &mut Hierarchy,
    b: &Batches,
    results: &mut [AccessResult],
    counters: &mut [[u32; MAX_LEVELS + 1]],
) {
    for (t, acc, idx) in b.iter() {
        h.access_batch(usize::from(*t), acc, results);
        for (r, &i) in results[..acc.len()].iter().zip(idx) {
            let c = &mut counters[i as usize];
            if r.lines() == 1 {
                c[r.served_by.slot()] += 1;
            } else {
                for (s, n) in c.iter_mut().zip(r.per_slot()) {
                    *s += n;
                }
            }
        }
    }
}

/// Rows of the attribution table in the `driver/` runs: the instruction
/// index modulo this.
const ROWS: u32 = 1 << 16;

/// The batches through `Driver::attribute_batch`, each access into the row
/// of its instruction (a table of `ROWS` rows of the layout's counters).
fn run_driver_attributed(d: &mut Driver, b: &Batches, rows: &mut Vec<u32>, table: &mut RowTable) {
    for (t, acc, idx) in b.iter() {
        rows.clear();
        rows.extend(idx.iter().map(|&i| i % ROWS));
        d.attribute_batch(usize::from(*t), acc, rows, table);
    }
}

/// A recorded trace, when `COLDCACHE_BENCH_TRACE` names one.
fn load_trace() -> Option<Vec<(u8, Access, u32)>> {
    let path = std::env::var_os("COLDCACHE_BENCH_TRACE")?;
    let mut r = coldcache_trace::open(std::path::Path::new(&path), None).expect("open trace");
    let mut recs = Vec::new();
    let mut batch = Vec::new();
    while recs.len() < 20_000_000 && r.read_batch(&mut batch, 1 << 16).expect("read trace") > 0 {
        recs.extend_from_slice(&batch);
    }
    let mut ip = 0u64;
    let out = recs
        .iter()
        .enumerate()
        .map(|(i, rec)| {
            use coldcache_trace::RecordKind as K;
            let kind = match rec.kind {
                K::Instr => {
                    ip = rec.addr;
                    AccessKind::InstrFetch
                }
                K::Load => AccessKind::Read,
                K::Store => AccessKind::Write,
                K::Modify => AccessKind::ReadModifyWrite,
                K::Prefetch => AccessKind::Prefetch,
                K::NtStore => AccessKind::NonTemporalStore,
                K::Flush => AccessKind::Flush,
            };
            let t = ((i / 64) % 4) as u8;
            (
                t,
                Access::new(kind, rec.addr, rec.size).with_ip(ip),
                (ip & 0xFFFFF) as u32,
            )
        })
        .collect();
    eprintln!(
        "benchmarking {} records of {}",
        recs.len(),
        path.to_string_lossy()
    );
    Some(out)
}

/// The trace with each thread's data moved to a region of its own.
fn private_data(trace: &[(u8, Access, u32)]) -> Vec<(u8, Access, u32)> {
    trace
        .iter()
        .map(|&(t, mut a, i)| {
            if a.kind != AccessKind::InstrFetch {
                a.addr ^= u64::from(t) << 40;
            }
            (t, a, i)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let trace = load_trace().unwrap_or_else(make_trace);
    let private = private_data(&trace);
    let mut g = c.benchmark_group("simulate");
    g.throughput(Throughput::Elements(trace.len() as u64));
    g.sample_size(10);
    g.warm_up_time(std::time::Duration::from_secs(1));
    g.measurement_time(std::time::Duration::from_secs(4));

    g.bench_function("floor", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for &(_, a, i) in black_box(&trace) {
                s = s.wrapping_add(a.addr ^ u64::from(i));
            }
            s
        })
    });

    let cg = presets::cachegrind_default();
    let jag = presets::jaguar();
    let mut counters = vec![[0u32; MAX_LEVELS + 1]; 1 << 20];
    g.bench_function("cachegrind", |b| {
        let mut h = Hierarchy::new(&cg).unwrap();
        assert!(h.uses_lean_engine());
        b.iter(|| run(&mut h, black_box(&trace), false))
    });
    g.bench_function("general/cachegrind", |b| {
        let mut h = Hierarchy::new_general(&cg).unwrap();
        b.iter(|| run(&mut h, black_box(&trace), false))
    });
    g.bench_function("cachegrind+attribution", |b| {
        let mut h = Hierarchy::new(&cg).unwrap();
        b.iter(|| run_attributed(&mut h, black_box(&trace), false, &mut counters))
    });
    g.bench_function("jaguar-4t", |b| {
        let mut h = Hierarchy::new(&jag).unwrap();
        b.iter(|| run(&mut h, black_box(&private), true))
    });
    g.bench_function("jaguar-4t+attribution", |b| {
        let mut h = Hierarchy::new(&jag).unwrap();
        b.iter(|| run_attributed(&mut h, black_box(&private), true, &mut counters))
    });
    g.bench_function("jaguar-4t-shared", |b| {
        let mut h = Hierarchy::new(&jag).unwrap();
        b.iter(|| run(&mut h, black_box(&trace), true))
    });

    let one_core = batches(&trace, false);
    let four = batches(&private, true);
    let four_shared = batches(&trace, true);
    let mut results = vec![AccessResult::default(); 256];
    g.bench_function("batch/cachegrind", |b| {
        let mut h = Hierarchy::new(&cg).unwrap();
        b.iter(|| run_batches(&mut h, black_box(&one_core), &mut results))
    });
    g.bench_function("batch/cachegrind+attribution", |b| {
        let mut h = Hierarchy::new(&cg).unwrap();
        b.iter(|| run_batches_attributed(&mut h, black_box(&one_core), &mut results, &mut counters))
    });
    let mut rows = Vec::with_capacity(256);
    g.bench_function("driver/cachegrind+attribution", |b| {
        let mut d = Driver::new(&cg).unwrap();
        let mut table = RowTable::new(d.layout());
        table.grow_to(ROWS as usize);
        b.iter(|| run_driver_attributed(&mut d, black_box(&one_core), &mut rows, &mut table))
    });
    g.bench_function("driver/cachegrind+attribution+lineuse", |b| {
        let mut d = Driver::new(&cg).unwrap().with_line_use();
        let mut table = RowTable::new(d.layout());
        table.grow_to(ROWS as usize);
        b.iter(|| run_driver_attributed(&mut d, black_box(&one_core), &mut rows, &mut table))
    });
    g.bench_function("driver/cachegrind", |b| {
        let mut d = Driver::new(&cg).unwrap();
        b.iter(|| {
            for (t, acc, _) in black_box(&one_core).iter() {
                d.access_batch(usize::from(*t), acc);
            }
            d.tally().of(AccessKind::Read)
        })
    });
    g.bench_function("driver/jaguar-4t+attribution", |b| {
        let mut d = Driver::new(&jag).unwrap();
        let mut table = RowTable::new(d.layout());
        table.grow_to(ROWS as usize);
        b.iter(|| run_driver_attributed(&mut d, black_box(&four), &mut rows, &mut table))
    });
    g.bench_function("driver/jaguar-4t+attribution+lineuse", |b| {
        let mut d = Driver::new(&jag).unwrap().with_line_use();
        let mut table = RowTable::new(d.layout());
        table.grow_to(ROWS as usize);
        b.iter(|| run_driver_attributed(&mut d, black_box(&four), &mut rows, &mut table))
    });
    g.bench_function("general/batch/cachegrind", |b| {
        let mut h = Hierarchy::new_general(&cg).unwrap();
        b.iter(|| run_batches(&mut h, black_box(&one_core), &mut results))
    });
    g.bench_function("general/batch/cachegrind+attribution", |b| {
        let mut h = Hierarchy::new_general(&cg).unwrap();
        b.iter(|| run_batches_attributed(&mut h, black_box(&one_core), &mut results, &mut counters))
    });
    g.bench_function("batch/jaguar-4t", |b| {
        let mut h = Hierarchy::new(&jag).unwrap();
        b.iter(|| run_batches(&mut h, black_box(&four), &mut results))
    });
    g.bench_function("batch/jaguar-4t+attribution", |b| {
        let mut h = Hierarchy::new(&jag).unwrap();
        b.iter(|| run_batches_attributed(&mut h, black_box(&four), &mut results, &mut counters))
    });
    g.bench_function("batch/jaguar-4t-shared", |b| {
        let mut h = Hierarchy::new(&jag).unwrap();
        b.iter(|| run_batches(&mut h, black_box(&four_shared), &mut results))
    });
    g.bench_function("general/batch/jaguar-4t", |b| {
        let mut h = Hierarchy::new_general(&jag).unwrap();
        assert!(!h.uses_jaguar_engine());
        b.iter(|| run_batches(&mut h, black_box(&four), &mut results))
    });
    g.bench_function("general/batch/jaguar-4t-shared", |b| {
        let mut h = Hierarchy::new_general(&jag).unwrap();
        b.iter(|| run_batches(&mut h, black_box(&four_shared), &mut results))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
