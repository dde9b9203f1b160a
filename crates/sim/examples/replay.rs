//! Replays a Valgrind lackey trace through one preset, once, for counting
//! instructions per access with Callgrind (figures in docs/performance-log.md):
//!
//! ```text
//! cargo build --release -p coldcache-sim --example replay
//! valgrind --tool=callgrind --toggle-collect='replay::simulate*' \
//!     target/release/examples/replay TRACE.lackey cachegrind 2000000
//! ```
//!
//! Arguments: the trace, the preset (`cachegrind` on one core, on the lean
//! engine; `cachegrind-general` the same on the general caches, as before
//! the lean engine; `jaguar`
//! with records dealt to four cores in turns of 64 and each core's data
//! moved to a region of its own, `jaguar-shared` the same without moving
//! the data, both on the Jaguar engine, `jaguar-general` and
//! `jaguar-shared-general` the same on the general caches), how many records to replay (default: all), and `batch` to
//! simulate through `Hierarchy::access_batch` (`--toggle-collect` then
//! names `replay::simulate_batch*`) or `attribute` to simulate through
//! `Driver::attribute_batch`, each access counted in the row of its
//! instruction (`replay::simulate_attribute*`), or `tally` to simulate
//! through `Driver::access_batch`, the tally only (`replay::simulate_tally*`).
//! The trace is
//! parsed before `simulate` runs, so only the simulation is collected.
//! `COLDCACHE_REPLAY_RUNS=N` runs it N times, each on a fresh hierarchy,
//! and reports the best time (for wall-clock comparisons).
//! Prints the accesses replayed and how many each level served.

use coldcache_sim::*;
use std::io::BufRead;

fn parse(path: &str, limit: usize) -> Vec<(u8, Access)> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out = Vec::new();
    let mut ip = 0u64;
    for line in std::io::BufReader::new(f).lines() {
        let line = line.expect("read trace");
        let b = line.as_bytes();
        if b.len() < 4 || line.starts_with("==") {
            continue;
        }
        let kind = match (b[0], b[1]) {
            (b'I', _) => AccessKind::InstrFetch,
            (b' ', b'L') => AccessKind::Read,
            (b' ', b'S') => AccessKind::Write,
            (b' ', b'M') => AccessKind::ReadModifyWrite,
            _ => continue,
        };
        let Some((a, s)) = line.get(2..).and_then(|r| r.trim().split_once(',')) else {
            continue;
        };
        let (Ok(addr), Ok(size)) = (u64::from_str_radix(a, 16), s.trim().parse::<u32>()) else {
            continue;
        };
        if kind == AccessKind::InstrFetch {
            ip = addr;
        }
        let t = ((out.len() / 64) % 4) as u8;
        out.push((t, Access::new(kind, addr, size).with_ip(ip)));
        if out.len() == limit {
            break;
        }
    }
    out
}

#[inline(never)]
fn simulate(h: &mut Hierarchy, trace: &[(u8, Access)], threads: bool) -> [u64; MAX_LEVELS + 1] {
    let mut served = [0u64; MAX_LEVELS + 1];
    for &(t, a) in trace {
        let core = if threads { usize::from(t) } else { 0 };
        served[h.access(core, a).served_by.slot()] += 1;
    }
    served
}

/// The same through [`Hierarchy::access_batch`], one batch per run of one
/// core's accesses (at most 256), each a slice of the trace's accesses
/// (as a capture's buffer or `coldcache sim`'s run hands them over).
#[inline(never)]
fn simulate_batch(h: &mut Hierarchy, runs: &[(u8, &[Access])]) -> [u64; MAX_LEVELS + 1] {
    let mut served = [0u64; MAX_LEVELS + 1];
    let mut results = [AccessResult::default(); 256];
    for &(core, run) in runs {
        h.access_batch(usize::from(core), run, &mut results);
        for r in &results[..run.len()] {
            served[r.served_by.slot()] += 1;
        }
    }
    served
}

/// The same through [`Driver::access_batch`]: the tally by kind and
/// level only, as `coldcache sim` without a dump counts.
#[inline(never)]
fn simulate_tally(d: &mut Driver, runs: &[(u8, &[Access])]) {
    for &(core, run) in runs {
        d.access_batch(usize::from(core), run);
    }
}

/// The same through [`Driver::attribute_batch`], each access into the
/// counter row of its instruction (rows dense, numbered in order of first
/// fetch, as Cachegrind keeps a counter per instruction).
#[inline(never)]
fn simulate_attribute(d: &mut Driver, runs: &[(u8, &[Access], &[u32])], table: &mut RowTable) {
    for &(core, run, rows) in runs {
        d.attribute_batch(usize::from(core), run, rows, table);
    }
}

/// The trace's runs of one core (all core 0 unless `threads`), at most 256
/// accesses each: (core, first index, end).
fn runs_of(trace: &[(u8, Access)], threads: bool) -> Vec<(u8, usize, usize)> {
    let mut out: Vec<(u8, usize, usize)> = Vec::new();
    for (i, &(t, _)) in trace.iter().enumerate() {
        let t = if threads { t } else { 0 };
        match out.last_mut() {
            Some((c, start, end)) if *c == t && *end - *start < 256 => *end = i + 1,
            _ => out.push((t, i, i + 1)),
        }
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: replay TRACE PRESET [RECORDS]");
    let preset = args.get(2).map(String::as_str).unwrap_or("cachegrind");
    let limit = args
        .get(3)
        .map_or(usize::MAX, |n| n.parse().expect("RECORDS"));
    let mut trace = parse(path, limit);
    let (cfg, threads) = match preset {
        "cachegrind" | "cachegrind-general" => (presets::cachegrind_default(), false),
        "jaguar" | "jaguar-shared" | "jaguar-general" | "jaguar-shared-general" => {
            (presets::jaguar(), true)
        }
        other => panic!("unknown preset {other}"),
    };
    if preset == "jaguar" || preset == "jaguar-general" {
        for (t, a) in &mut trace {
            if a.kind != AccessKind::InstrFetch {
                a.addr ^= u64::from(*t) << 40;
            }
        }
    }
    let fresh = || {
        if preset.ends_with("-general") {
            Hierarchy::new_general(&cfg).expect("preset")
        } else {
            Hierarchy::new(&cfg).expect("preset")
        }
    };
    // `COLDCACHE_REPLAY_RUNS=N`: N runs, each on a fresh hierarchy, the
    // best time reported (for wall-clock comparisons; Callgrind wants 1).
    let repeat: usize = std::env::var("COLDCACHE_REPLAY_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let accesses: Vec<Access> = trace.iter().map(|&(_, a)| a).collect();
    let runs = runs_of(&trace, threads);
    if args.get(4).is_some_and(|m| m == "attribute") {
        let mut dense = std::collections::HashMap::new();
        let rows: Vec<u32> = trace
            .iter()
            .map(|(_, a)| {
                let n = dense.len() as u32;
                *dense.entry(a.ip).or_insert(n)
            })
            .collect();
        let runs: Vec<(u8, &[Access], &[u32])> = runs
            .iter()
            .map(|&(c, i, e)| (c, &accesses[i..e], &rows[i..e]))
            .collect();
        let mut best = f64::MAX;
        let mut counted = 0;
        for _ in 0..repeat {
            let mut d = Driver::with_hierarchy(fresh());
            let mut table = RowTable::new(d.layout());
            table.grow_to(dense.len());
            let t0 = std::time::Instant::now();
            simulate_attribute(&mut d, &runs, &mut table);
            table.settle();
            best = best.min(t0.elapsed().as_secs_f64());
            counted = table.into_rows().iter().sum::<u64>();
        }
        println!(
            "{} accesses attributed to {} instructions in {best:.3} s ({:.1} M/s, best of {repeat}, cold hierarchy); counted: {counted}",
            trace.len(),
            dense.len(),
            trace.len() as f64 / best / 1e6
        );
        return;
    }
    let runs: Vec<(u8, &[Access])> = runs.iter().map(|&(c, i, e)| (c, &accesses[i..e])).collect();
    if args.get(4).is_some_and(|m| m == "tally") {
        let mut best = f64::MAX;
        let mut served = [0u64; MAX_LEVELS + 1];
        for _ in 0..repeat {
            let mut d = Driver::with_hierarchy(fresh());
            let t0 = std::time::Instant::now();
            simulate_tally(&mut d, &runs);
            best = best.min(t0.elapsed().as_secs_f64());
            for (k, s) in served.iter_mut().enumerate() {
                *s = AccessKind::ALL
                    .iter()
                    .map(|&a| d.tally().served_at(a, k))
                    .sum();
            }
        }
        println!(
            "{} accesses in {best:.3} s ({:.1} M/s, best of {repeat}, cold hierarchy); lines served by slot (L1.., memory): {served:?}",
            trace.len(),
            trace.len() as f64 / best / 1e6
        );
        return;
    }
    let mut best = f64::MAX;
    let mut served = Default::default();
    for _ in 0..repeat {
        let mut h = fresh();
        let t0 = std::time::Instant::now();
        served = if args.get(4).is_some_and(|m| m == "batch") {
            simulate_batch(&mut h, &runs)
        } else {
            simulate(&mut h, &trace, threads)
        };
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!(
        "{} accesses in {best:.3} s ({:.1} M/s, best of {repeat}, cold hierarchy); served by slot (L1.., memory): {served:?}",
        trace.len(),
        trace.len() as f64 / best / 1e6
    );
}
