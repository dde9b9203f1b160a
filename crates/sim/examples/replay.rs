//! Replays a Valgrind lackey trace through one preset, once, for counting
//! instructions per access with Callgrind (see docs/performance.md):
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
//! names `replay::simulate_batch*`). The trace is
//! parsed before `simulate` runs, so only the simulation is collected.
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
/// core's accesses (at most 256).
#[inline(never)]
fn simulate_batch(
    h: &mut Hierarchy,
    trace: &[(u8, Access)],
    threads: bool,
) -> [u64; MAX_LEVELS + 1] {
    let mut served = [0u64; MAX_LEVELS + 1];
    let mut accesses = Vec::with_capacity(256);
    let mut results = vec![AccessResult::default(); 256];
    let mut i = 0;
    while i < trace.len() {
        let core = if threads { trace[i].0 } else { 0 };
        accesses.clear();
        while i < trace.len() && accesses.len() < 256 && (!threads || trace[i].0 == core) {
            accesses.push(trace[i].1);
            i += 1;
        }
        h.access_batch(usize::from(core), &accesses, &mut results);
        for r in &results[..accesses.len()] {
            served[r.served_by.slot()] += 1;
        }
    }
    served
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
    let mut h = if preset.ends_with("-general") {
        Hierarchy::new_general(&cfg).expect("preset")
    } else {
        Hierarchy::new(&cfg).expect("preset")
    };
    let t0 = std::time::Instant::now();
    let served = if args.get(4).is_some_and(|m| m == "batch") {
        simulate_batch(&mut h, &trace, threads)
    } else {
        simulate(&mut h, &trace, threads)
    };
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{} accesses in {secs:.3} s ({:.1} M/s, cold hierarchy); served by slot (L1.., memory): {served:?}",
        trace.len(),
        trace.len() as f64 / secs / 1e6
    );
}
