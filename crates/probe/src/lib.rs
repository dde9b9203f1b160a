//! coldcache-probe: measures the real machine's cache hierarchy by timing
//! access patterns, compares it with what the OS and CPUID report, and turns
//! it into a simulator configuration.
//!
//! Design:
//! - [`patterns`] (pure) says which bytes each test touches and in what
//!   order; [`kernels`] links them into a cyclic pointer chain and times the
//!   dependent chase (latency), or runs store/load and read loops;
//! - [`detect`] (pure) finds plateaus and knees in the measured curves;
//! - [`simulate`] (pure) replays the same patterns through
//!   `coldcache_sim::Hierarchy`;
//! - [`os`] (Linux: memory, huge pages, CPU pinning) and [`cpu`] (x86-64:
//!   CPUID, clock rate, `clflush`) hold every OS or architecture call;
//! - [`run`] schedules the tests within a time budget and assembles a
//!   [`Report`]; [`measured_config`] turns a report into a
//!   `HierarchyConfig`.
//!
//! Every test takes the best of several repetitions (interference only adds
//! time) within its share of the budget: about 25 s by default, 4 s with
//! [`Options::quick`].

#![warn(missing_docs)]

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!(
    "coldcache-probe measures Linux on x86-64 only (sysfs, mmap/madvise, CPUID, clflush)"
);

use std::time::{Duration, Instant};

use coldcache_sim::{
    CacheKind, HierarchyConfig, Inclusion, LevelConfig, ReplacementPolicy, Sharing, WritePolicy,
};

pub mod cpu;
pub mod detect;
pub mod kernels;
pub mod os;
pub mod patterns;
pub mod report;
pub mod simulate;

pub use report::{Report, Verdict};
pub use simulate::{SimPlan, Simulation};

use kernels::{best_of, Chain};
use os::{Buffer, Pages, PAGE};
use report::*;

/// What can go wrong while probing.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The measurement buffer could not be mapped.
    #[error("cannot map {bytes} bytes for the measurement buffer: {source}")]
    Memory {
        /// Bytes asked of `mmap`: the buffer rounded up to whole pages, plus
        /// one page (huge or base) of alignment slack.
        bytes: usize,
        /// The error `mmap` returned.
        #[source]
        source: std::io::Error,
    },
    /// A configuration the simulator rejects.
    #[error("cache configuration {name:?}: {problem}")]
    Config {
        /// The configuration's name (preset or file).
        name: String,
        /// Why the simulator rejects it.
        problem: String,
    },
}

/// How to probe.
#[derive(Clone, Debug)]
pub struct Options {
    /// A shorter run (about 4 s): fewer repetitions, a smaller buffer.
    pub quick: bool,
    /// Seed of the random permutations.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            quick: false,
            seed: 0x5EED_C01D_CAC4_E5ED,
        }
    }
}

/// Per-test time budgets in milliseconds.
struct Budget {
    clock: u64,
    line: u64,
    sweep: u64,
    assoc: u64,
    tlb: u64,
    prefetch: u64,
    alias: u64,
    bandwidth: u64,
    /// Largest working set of the sweep (and the main buffer's size).
    max_size: usize,
    /// Most pages of the TLB test.
    max_pages: usize,
    min_reps: u32,
    /// Passes of the working-set sweep over sizes up to `repeat_limit`.
    passes: u32,
    /// Passes over sizes up to `SMALL_LIMIT` (cheap, and where a physically
    /// indexed L2 needs several page placements to be seen whole).
    small_passes: u32,
    /// Whether the TLB test also runs on huge pages (for the report only).
    tlb_huge: bool,
    /// Largest working set timed in every pass of the sweep.
    repeat_limit: u64,
}

impl Budget {
    fn new(quick: bool) -> Budget {
        if quick {
            Budget {
                clock: 40,
                line: 150,
                sweep: 1000,
                assoc: 150,
                tlb: 300,
                prefetch: 250,
                alias: 80,
                bandwidth: 150,
                max_size: 64 << 20,
                max_pages: 2048,
                min_reps: 5,
                passes: 2,
                small_passes: 3,
                tlb_huge: false,
                repeat_limit: 8 << 20,
            }
        } else {
            Budget {
                clock: 300,
                line: 1000,
                sweep: 8000,
                assoc: 800,
                tlb: 3000,
                prefetch: 2000,
                alias: 400,
                bandwidth: 1500,
                max_size: 128 << 20,
                max_pages: 8192,
                min_reps: 5,
                passes: 3,
                small_passes: 6,
                tlb_huge: true,
                repeat_limit: 32 << 20,
            }
        }
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Sizes `m/4 x 2^k` (m = 4..7) from `lo` to `hi`: four per octave, on the
/// sizes caches come in (32 KiB, 48 KiB, 1.25 MiB, ...).
pub fn sweep_sizes(lo: u64, hi: u64) -> Vec<u64> {
    grid(lo, hi, 4)
}

/// The whole numbers `m/n x 2^k` (m = n..2n-1) from `lo` to `hi`: `n` per
/// octave. With n = 8 it holds the TLB sizes CPUs come with (64, 72, 96,
/// 1536, 2048, 3072 entries).
pub fn grid(lo: u64, hi: u64, per_octave: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut k = 0u32;
    while k < 63 && (1u64 << k) <= hi {
        for m in per_octave..2 * per_octave {
            let whole = (1u64 << k) * m;
            if whole.is_multiple_of(per_octave) {
                let s = whole / per_octave;
                if s >= lo && s <= hi {
                    v.push(s);
                }
            }
        }
        k += 1;
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Steps per timed repetition: about half a millisecond, so that most
/// repetitions run between two interruptions (a 250 Hz tick, another
/// process on a loaded machine) and best-of-N can discard the others.
const REP_NS: f64 = 500_000.0;

/// Walks the whole cycle once (every node in cache if it fits) and returns
/// how many steps make one repetition of about [`REP_NS`].
fn warm(chain: &Chain) -> u64 {
    let n = (chain.nodes() as u64).max(64);
    let ns = chain.ns_per_step(n).max(0.1);
    ((REP_NS / ns) as u64).clamp(4_000, 200_000)
}

/// Progress callback: the test being run and the fraction of the whole run
/// done (0..=1).
pub type Progress<'a> = &'a mut dyn FnMut(&str, f64);

/// Runs every test and assembles the report (without simulation: see
/// [`simulate::simulate`] and [`sim_plan`]).
pub fn run(opts: &Options, progress: Progress) -> Result<Report, ProbeError> {
    let started = Instant::now();
    let b = Budget::new(opts.quick);
    let total =
        (b.clock + b.line + b.sweep + b.assoc + b.tlb + b.prefetch + b.alias + b.bandwidth) as f64;
    let mut done = 0u64;
    // Reports the start of a test and counts its budget as done.
    let mut step = |name: &str, cost: u64, progress: &mut dyn FnMut(&str, f64)| {
        progress(name, done as f64 / total);
        done += cost;
        done
    };

    // Before pinning, which narrows what the thread may use to one CPU.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pinned_cpu = os::pin_to_current_cpu();
    step("clock", b.clock, progress);
    let ghz = cpu::clock_ghz(b.clock);
    let cyc = |ns: f64| ns * ghz;
    let cpuid = cpu::cpuid_info();
    let (sysfs, sysfs_error) = match coldcache_config::host() {
        Ok(h) => (report::Reported::from_host(&h), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };

    let mut buf = Buffer::new(b.max_size, Pages::Huge)?;

    // Line size.
    step("line size", b.line, progress);
    // Pairs in 1 KiB blocks; lines above 256 bytes are not made.
    let strides: Vec<u32> = vec![8, 16, 32, 64, 128, 256];
    let per = ms(b.line / strides.len() as u64);
    let ns_per_pair: Vec<f64> = strides
        .iter()
        .map(|&s| {
            let offs = patterns::line_pairs(512, 1024, s as usize, opts.seed);
            let chain = Chain::build(&mut buf, &offs);
            let steps = warm(&chain);
            2.0 * best_of(per, b.min_reps, 10_000, || chain.ns_per_step(steps))
        })
        .collect();
    let line_detected = detect_line(&strides, &ns_per_pair);
    let line = line_detected.unwrap_or(64) as usize;

    // Working-set sweep, in passes some time apart and each in another part
    // of the buffer: a disturbance that lasts longer than one point's
    // repetitions (another virtual machine on this core's SMT sibling,
    // sharing its L1 and L2) rarely hits the same point twice, and each
    // pass gets other physical pages, so a physically indexed cache whose
    // sets a pass's pages fill unevenly (pages the host placed at random)
    // is seen at its best. Working sets up to SMALL_LIMIT get the most
    // passes (they cost little); beyond `b.repeat_limit` they are timed in
    // the first pass only: they take longest (a whole pass from memory to
    // warm up) and matter least.
    const PASS_STRIDE: usize = 20 << 20;
    const SMALL_LIMIT: u64 = 4 << 20;
    let passes_for = |size: u64| {
        if size <= SMALL_LIMIT {
            b.small_passes.max(b.passes)
        } else if size <= b.repeat_limit {
            b.passes
        } else {
            1
        }
    };
    let sizes = sweep_sizes(4096, b.max_size as u64);
    let sweep_start = step("working-set sweep", 0, progress) as f64;
    let slots: usize = sizes.iter().map(|&s| passes_for(s) as usize).sum();
    let per = ms(b.sweep / slots as u64);
    let mut best = vec![f64::INFINITY; sizes.len()];
    let mut slot = 0;
    for pass in 0..b.small_passes.max(b.passes) {
        for (i, &size) in sizes.iter().enumerate() {
            if pass >= passes_for(size) {
                continue;
            }
            progress(
                "working-set sweep",
                (sweep_start + b.sweep as f64 * slot as f64 / slots as f64) / total,
            );
            slot += 1;
            let mut base = pass as usize * PASS_STRIDE;
            if base + size as usize > buf.bytes() {
                base = 0;
            }
            let offs: Vec<usize> = patterns::working_set(size as usize, line, opts.seed)
                .into_iter()
                .map(|o| base + o)
                .collect();
            let chain = Chain::build(&mut buf, &offs);
            let steps = warm(&chain);
            let ns = best_of(per, b.min_reps, 10_000, || chain.ns_per_step(steps));
            best[i] = best[i].min(ns);
        }
    }
    let mut sweep: Vec<SweepPoint> = sizes
        .iter()
        .zip(&best)
        .map(|(&size, &ns)| SweepPoint {
            size,
            ns,
            cycles: cyc(ns),
        })
        .collect();
    step("working-set sweep", b.sweep, progress);
    let values: Vec<f64> = sweep.iter().map(|p| p.ns).collect();
    let plats = detect::plateaus(&values, &detect::Params::default());
    let knees = detect::knees(&values, &plats);
    let mut levels: Vec<Level> = plats
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let last = i + 1 == plats.len();
            Level {
                name: if last {
                    "memory".to_string()
                } else {
                    format!("L{}", i + 1)
                },
                capacity: knees.get(i).map(|&k| sizes[k]),
                next_plateau: plats.get(i + 1).map(|q| sizes[q.first]),
                latency_ns: p.value,
                latency_cycles: cyc(p.value),
                read_gbps: None,
            }
        })
        .collect();

    // L1 associativity.
    step("L1 associativity", b.assoc, progress);
    let assoc_stride = levels
        .first()
        .and_then(|l| l.capacity)
        .filter(|&c| c >= 4096 && (c as usize) * 32 <= buf.bytes())
        .unwrap_or(32 << 10);
    let assoc_lines: Vec<u32> = (1..=if opts.quick { 24 } else { 32 }).collect();
    let per = ms(b.assoc / assoc_lines.len() as u64);
    let assoc_ns: Vec<f64> = assoc_lines
        .iter()
        .map(|&k| {
            let offs = patterns::same_set(k as usize, assoc_stride as usize, opts.seed);
            let chain = Chain::build(&mut buf, &offs);
            let steps = warm(&chain);
            best_of(per, b.min_reps, 10_000, || chain.ns_per_step(steps))
        })
        .collect();
    let assoc_detected = detect::last_before_rise(&assoc_ns, 4, 0.3)
        .filter(|&i| i + 1 < assoc_ns.len())
        .map(|i| assoc_lines[i]);

    // TLB reach.
    step("TLB reach", b.tlb, progress);
    let tlb = measure_tlb(&mut buf, &b, line, &sweep, opts.seed)?;

    // Prefetcher reach.
    step("prefetcher reach", b.prefetch, progress);
    let memory_ns = levels.last().map_or(f64::NAN, |l| l.latency_ns);
    let l1_ns = levels.first().map_or(f64::NAN, |l| l.latency_ns);
    let prefetch = measure_prefetch(&mut buf, &b, memory_ns, l1_ns, opts.seed);

    // 4K aliasing.
    step("4K aliasing", b.alias, progress);
    let per = ms(b.alias / 2);
    let ns_aliased = best_of(per, b.min_reps, 1000, || {
        kernels::store_load_ns(&mut buf, 4096, 512, 200)
    });
    let ns_control = best_of(per, b.min_reps, 1000, || {
        kernels::store_load_ns(&mut buf, 6144, 512, 200)
    });
    let aliasing = Aliasing {
        ns_aliased,
        ns_control,
        penalty_cycles: 0.0,
    };

    // Bandwidth per level.
    step("bandwidth", b.bandwidth, progress);
    let per = ms(b.bandwidth / levels.len().max(1) as u64);
    for l in &mut levels {
        let bytes = l
            .capacity
            .map_or(buf.bytes(), |c| (c as usize / 2).min(buf.bytes()));
        let words = &buf.words()[..bytes / std::mem::size_of::<usize>()];
        kernels::read_gbps(words);
        // Best of N on the time per byte (best_of keeps the least).
        let ns_per_byte = best_of(per, b.min_reps, 10_000, || 1.0 / kernels::read_gbps(words));
        l.read_gbps = Some(1.0 / ns_per_byte);
    }
    // The clock again: a reading lowered by the hypervisor taking the CPU
    // away, or by a boost clock that sank while other cores were busy, is
    // replaced by the higher one, and the cycles rescaled.
    let ghz_end = cpu::clock_ghz(b.clock);
    let scale = ghz_end.max(ghz) / ghz;
    for p in &mut sweep {
        p.cycles *= scale;
    }
    for l in &mut levels {
        l.latency_cycles *= scale;
    }
    let penalty_cycles = (ns_aliased - ns_control) * ghz.max(ghz_end);
    progress("done", 1.0);

    let mut report = Report {
        version: REPORT_VERSION,
        machine: Machine {
            vendor: cpuid.vendor.clone(),
            brand: cpuid.brand.clone(),
            hypervisor: cpuid.hypervisor.clone(),
            pinned_cpu,
            clock_ghz: ghz.max(ghz_end),
            clock_ghz_start: ghz,
            clock_ghz_end: ghz_end,
            thp: os::thp_mode(),
            buffer_bytes: buf.bytes() as u64,
            huge_page_bytes: buf.huge_bytes(),
            read_loop: if kernels::read_uses_avx2() {
                "avx2"
            } else {
                "sse2"
            },
            cpus,
            load_average: os::load_average(),
        },
        quick: opts.quick,
        seconds: started.elapsed().as_secs_f64(),
        line_size: LineSize {
            detected: line_detected,
            strides,
            ns_per_pair,
        },
        levels,
        sweep,
        l1_assoc: Assoc {
            detected: assoc_detected,
            stride: assoc_stride,
            lines: assoc_lines,
            ns: assoc_ns,
        },
        tlb,
        prefetch,
        aliasing: Aliasing {
            penalty_cycles,
            ..aliasing
        },
        reported: Reported {
            sysfs,
            sysfs_error,
            cpuid,
        },
        comparison: Vec::new(),
        simulation: None,
    };
    report.comparison = report::compare(&report);
    Ok(report)
}

/// The line size from the pair test: the stride at the steepest rise in
/// cost from one stride to the next (a pair within one line costs a miss
/// and a hit, a pair across lines two misses). `None` when no step is at
/// least 15 %.
pub fn detect_line(strides: &[u32], ns: &[f64]) -> Option<u32> {
    let (i, ratio) = ns
        .windows(2)
        .enumerate()
        .map(|(i, w)| (i + 1, w[1] / w[0]))
        .filter(|(_, r)| r.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    (ratio >= 1.15).then(|| strides[i])
}

/// The sweep's latency at working set `size` (log-log interpolation; the
/// first point below the sweep's start).
fn sweep_at(sweep: &[SweepPoint], size: u64) -> f64 {
    let i = sweep.partition_point(|p| p.size < size);
    if i == 0 {
        return sweep.first().map_or(f64::NAN, |p| p.ns);
    }
    if i == sweep.len() {
        return sweep.last().map_or(f64::NAN, |p| p.ns);
    }
    let (a, b) = (&sweep[i - 1], &sweep[i]);
    if b.size == size {
        return b.ns;
    }
    let t =
        ((size as f64).ln() - (a.size as f64).ln()) / ((b.size as f64).ln() - (a.size as f64).ln());
    (a.ns.ln() + t * (b.ns.ln() - a.ns.ln())).exp()
}

fn measure_tlb(
    buf: &mut Buffer,
    b: &Budget,
    line: usize,
    sweep: &[SweepPoint],
    seed: u64,
) -> Result<Tlb, ProbeError> {
    let pages: Vec<u64> = grid(16, b.max_pages as u64, 8);
    let mut small = Buffer::new(b.max_pages * PAGE, Pages::Base)?;
    let huge_ok = b.tlb_huge && buf.huge_bytes() > 0;
    let per = ms(b.tlb / (pages.len() as u64 * if huge_ok { 2 } else { 1 }));
    let time = |buf: &mut Buffer, count: u64| {
        let offs = patterns::one_per_page(count as usize, line, seed);
        let chain = Chain::build(buf, &offs);
        let steps = warm(&chain);
        best_of(per, b.min_reps, 10_000, || chain.ns_per_step(steps))
    };
    let ns_4k: Vec<f64> = pages.iter().map(|&p| time(&mut small, p)).collect();
    let ns_huge: Option<Vec<f64>> = huge_ok.then(|| pages.iter().map(|&p| time(buf, p)).collect());
    // The same number of lines packed together (the sweep at pages x line
    // bytes) costs the same in the caches but touches few pages: the
    // difference is the TLB's. Shifted onto the L1 latency, it is a
    // staircase like the sweep's.
    let base = sweep.first().map_or(1.0, |p| p.ns);
    let extra: Vec<f64> = pages
        .iter()
        .zip(&ns_4k)
        .map(|(&p, &ns)| (ns - sweep_at(sweep, p * line as u64)).max(0.0))
        .collect();
    let shifted: Vec<f64> = extra.iter().map(|e| base + e).collect();
    let plats = detect::plateaus(&shifted, &detect::Params::default());
    let knees = detect::knees(&shifted, &plats);
    // A step into the last two or three page counts cannot be told from
    // noise or from the start of a rise the range ends in: not a level.
    let levels = plats
        .windows(2)
        .zip(&knees)
        .filter(|(w, _)| w[1].last + 1 - w[1].first >= 3)
        .map(|(w, &k)| TlbLevel {
            entries: pages[k],
            reach_bytes: pages[k] * PAGE as u64,
            next_extra_ns: w[1].value - base,
        })
        .collect();
    Ok(Tlb {
        pages,
        ns_4k,
        ns_huge,
        extra_ns: extra,
        levels,
    })
}

fn measure_prefetch(
    buf: &mut Buffer,
    b: &Budget,
    memory_ns: f64,
    l1_ns: f64,
    seed: u64,
) -> Prefetch {
    let strides: Vec<u64> = vec![64, 128, 256, 512, 1024, 2048, 4096, 8192];
    let region = buf.bytes().min(64 << 20);
    let per = ms(b.prefetch / (2 * strides.len() as u64));
    let time = |buf: &mut Buffer, offs: &[usize]| {
        let steps = offs.len().min(4096);
        let chain = Chain::build(buf, offs);
        best_of(per, 2, 50, || {
            chain.flush(&offs[..steps]);
            chain.rewind();
            chain.ns_per_step(steps as u64)
        })
    };
    let ns_crossing: Vec<f64> = strides
        .iter()
        .map(|&s| time(buf, &patterns::ascending(region, s as usize)))
        .collect();
    let ns_within_page: Vec<Option<f64>> = strides
        .iter()
        .map(|&s| {
            ((s as usize) < PAGE).then(|| {
                time(
                    buf,
                    &patterns::ascending_within_pages(region, s as usize, seed),
                )
            })
        })
        .collect();
    // Half hidden: at most half-way between L1 and memory latency.
    let half = (memory_ns + l1_ns) / 2.0;
    let reach = |v: &mut dyn Iterator<Item = (u64, Option<f64>)>| {
        v.take_while(|(_, ns)| ns.is_some_and(|ns| ns < half))
            .last()
            .map(|(s, _)| s)
    };
    let reach_crossing = reach(
        &mut strides
            .iter()
            .copied()
            .zip(ns_crossing.iter().map(|&v| Some(v))),
    );
    let reach_within_page = reach(&mut strides.iter().copied().zip(ns_within_page.iter().copied()));
    Prefetch {
        strides,
        ns_crossing,
        ns_within_page,
        memory_ns,
        reach_crossing,
        reach_within_page,
    }
}

/// Whether `--simulate` replays working set `s`: every size up to 4 MiB,
/// then 2^k and 1.5 x 2^k only (the three top bits are 100 or 110).
fn simulated_size(s: u64) -> bool {
    let top = s >> (63 - s.leading_zeros()).saturating_sub(2);
    s <= 4 << 20 || top == 4 || top == 6
}

/// The simulation plan matching a report's run (same line, seed and
/// sizes; above 4 MiB only two sizes per octave, 2^k and 1.5 x 2^k: the
/// simulator takes about a microsecond per miss on large caches).
pub fn sim_plan(r: &Report, opts: &Options) -> SimPlan {
    SimPlan {
        sizes: r
            .sweep
            .iter()
            .map(|p| p.size)
            .filter(|&s| simulated_size(s))
            .collect(),
        line: r.line_size.detected.unwrap_or(64) as usize,
        seed: opts.seed,
        assoc_stride: r.l1_assoc.stride,
        assoc_lines: r.l1_assoc.lines.clone(),
    }
}

/// The largest number of ways, at most `want`, that divides `size` into
/// whole sets of `line`-byte lines (1 always does for sizes that are
/// multiples of the line).
fn fit_assoc(size: u64, line: u32, want: u32) -> u32 {
    (1..=want.max(1))
        .rev()
        .find(|&a| size.is_multiple_of(u64::from(line) * u64::from(a)))
        .unwrap_or(1)
}

/// A simulator configuration from the measurements: one core; L1d and the
/// L2.. capacities, the line size and the L1 associativity as measured;
/// the L1i assumed equal to the L1d; the associativity of the lower levels
/// from sysfs when it reports that level (else 16); LRU, write-back,
/// non-inclusive; load-to-use latencies in cycles as measured. Returns the
/// configuration and one note per assumption.
pub fn measured_config(r: &Report) -> (HierarchyConfig, Vec<String>) {
    let mut notes = Vec::new();
    let line = r.line_size.detected.unwrap_or_else(|| {
        notes.push("line size not detected: 64 bytes assumed".to_string());
        64
    });
    let caches: Vec<&Level> = r.levels.iter().filter(|l| l.capacity.is_some()).collect();
    let mut levels = Vec::new();
    for (i, l) in caches.iter().enumerate() {
        let n = (i + 1) as u8;
        let size = l.capacity.unwrap_or(0).max(u64::from(line));
        let size = size / u64::from(line) * u64::from(line);
        let (want, from) = if n == 1 {
            match r.l1_assoc.detected {
                Some(a) => (a, "measured"),
                None => (
                    r.reported.sysfs_data(1).map_or(8, |c| c.assoc),
                    "not detected: from sysfs or 8",
                ),
            }
        } else {
            match r.reported.sysfs_data(n) {
                Some(c) => (c.assoc, "from sysfs, not measured"),
                None => (16, "assumed, not measured or reported"),
            }
        };
        let assoc = fit_assoc(size, line, want);
        if n > 1 || from != "measured" || assoc != want {
            notes.push(format!(
                "L{n}: {assoc} ways ({from}{})",
                if assoc != want {
                    format!(", reduced from {want} to divide {size} bytes into whole sets")
                } else {
                    String::new()
                }
            ));
        }
        let level = |name: &str, kind: CacheKind| LevelConfig {
            name: name.to_string(),
            level: n,
            kind,
            size,
            line_size: line,
            assoc,
            policy: ReplacementPolicy::Lru,
            write: WritePolicy::WriteBack,
            inclusion: Inclusion::NonInclusive,
            sharing: Sharing::Core,
            latency: Some(l.latency_cycles.round().max(1.0) as u32),
        };
        if n == 1 {
            levels.push(level("L1d", CacheKind::Data));
            levels.push(level("L1i", CacheKind::Instruction));
            notes.push("L1i: not measured, assumed equal to the L1d".to_string());
        } else {
            levels.push(level(&format!("L{n}"), CacheKind::Unified));
        }
    }
    notes.push("one core; LRU, write-back, non-inclusive levels assumed".to_string());
    let cfg = HierarchyConfig {
        name: "probe".to_string(),
        cores: 1,
        levels,
        ..HierarchyConfig::default()
    };
    (cfg, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_sizes_are_on_the_cache_size_grid() {
        let s = sweep_sizes(4096, 1 << 20);
        assert_eq!(&s[..5], &[4096, 5120, 6144, 7168, 8192]);
        assert_eq!(*s.last().unwrap(), 1 << 20);
        assert!(s.contains(&(48 << 10)) && s.contains(&(1280 << 10 >> 1)));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn line_from_pair_costs() {
        let strides = [8, 16, 32, 64, 128, 256];
        // Within a line: one miss + one hit; from 64 on: two misses.
        let ns = [4.6, 4.5, 4.7, 7.0, 7.1, 6.9];
        assert_eq!(detect_line(&strides, &ns), Some(64));
        // Measured on a KVM guest (AMD EPYC), one run with a dear last
        // stride (an earlier version read 512 from the 512-byte stride).
        let ns = [6.35, 6.35, 6.35, 8.3, 8.3, 9.5];
        assert_eq!(detect_line(&strides, &ns), Some(64));
        // An adjacent-line prefetcher hides most of the step at 64: the
        // result is then 128 (a limitation, docs/probe.md).
        let ns = [4.6, 4.5, 4.7, 5.2, 7.1, 6.9];
        assert_eq!(detect_line(&strides, &ns), Some(128));
        // No step: not detected.
        assert_eq!(detect_line(&strides, &[5.0; 6]), None);
        assert_eq!(detect_line(&[], &[]), None);
    }

    #[test]
    fn tlb_grid_holds_common_tlb_sizes() {
        let g = grid(16, 8192, 8);
        assert_eq!(&g[..10], &[16, 18, 20, 22, 24, 26, 28, 30, 32, 36]);
        for entries in [64, 72, 96, 1536, 2048, 3072] {
            assert!(g.contains(&entries), "{entries}");
        }
        assert_eq!(*g.last().unwrap(), 8192);
    }

    #[test]
    fn simulated_sizes_thin_out_above_4_mib() {
        let kept: Vec<u64> = sweep_sizes(4 << 20, 32 << 20)
            .into_iter()
            .filter(|&s| simulated_size(s))
            .collect();
        let mib = 1 << 20;
        assert_eq!(
            kept,
            vec![
                4 * mib,
                6 * mib,
                8 * mib,
                12 * mib,
                16 * mib,
                24 * mib,
                32 * mib
            ]
        );
    }

    #[test]
    fn fit_assoc_divides_into_whole_sets() {
        assert_eq!(fit_assoc(32 << 10, 64, 8), 8);
        assert_eq!(fit_assoc(48 << 10, 64, 12), 12);
        assert_eq!(fit_assoc(40 << 10, 64, 16), 16);
        assert_eq!(fit_assoc(3 * 64 * 7, 64, 8), 7);
        assert_eq!(fit_assoc(64, 64, 0), 1);
    }
}
