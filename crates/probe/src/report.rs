//! The probe's result as plain data (serialised as the `--json` output,
//! schema in docs/probe.md), what the machine reports about itself, and the
//! side-by-side comparison of the two.

use serde::Serialize;

use coldcache_sim::{CacheKind, HierarchyConfig};

use crate::cpu::CpuidInfo;
use crate::simulate::Simulation;

/// Version of the JSON report; bumped on incompatible changes.
pub const REPORT_VERSION: u32 = 1;

/// Everything one probe run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// [`REPORT_VERSION`] at the time of writing.
    pub version: u32,
    /// The processor and the conditions of the run.
    pub machine: Machine,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// Seconds spent measuring (without simulation).
    pub seconds: f64,
    /// The line-size test.
    pub line_size: LineSize,
    /// Cache levels found by the working-set sweep, then main memory.
    pub levels: Vec<Level>,
    /// The working-set sweep: latency of a random pointer chase by size.
    pub sweep: Vec<SweepPoint>,
    /// The L1 associativity test.
    pub l1_assoc: Assoc,
    /// The TLB reach test.
    pub tlb: Tlb,
    /// The prefetcher reach test.
    pub prefetch: Prefetch,
    /// The 4K aliasing test.
    pub aliasing: Aliasing,
    /// What sysfs and CPUID say about the caches.
    pub reported: Reported,
    /// The side-by-side table: line size, each level's size, the L1d
    /// associativity and the dTLB entries, measured against reported.
    pub comparison: Vec<Comparison>,
    /// Present with `--simulate`.
    pub simulation: Option<Simulation>,
}

/// The machine and the conditions of the run.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPUID vendor string ("GenuineIntel", "AuthenticAMD").
    pub vendor: String,
    /// CPUID processor brand string; empty when the CPU has none.
    pub brand: String,
    /// The hypervisor's CPUID signature ("KVMKVMKVM"); `None` on bare metal.
    pub hypervisor: Option<String>,
    /// The CPU the probe was pinned to (`None`: pinning failed).
    pub pinned_cpu: Option<u32>,
    /// Core clock measured with dependent additions (cycles = ns x GHz):
    /// the higher of the readings at the start and at the end of the run.
    pub clock_ghz: f64,
    /// The clock reading before the tests, GHz.
    pub clock_ghz_start: f64,
    /// The clock reading after the tests, GHz.
    pub clock_ghz_end: f64,
    /// `/sys/kernel/mm/transparent_hugepage/enabled` (the selected mode).
    pub thp: Option<String>,
    /// Bytes of the main buffer, and how many of them huge pages back.
    pub buffer_bytes: u64,
    /// Bytes of the main buffer on huge pages (`AnonHugePages` in
    /// `/proc/self/smaps`); 0 when the kernel granted none or smaps could
    /// not be read.
    pub huge_page_bytes: u64,
    /// The vector loads of the bandwidth loop: "avx2" or "sse2".
    pub read_loop: &'static str,
    /// CPUs the probe could run on, and the one-minute load average when
    /// the run ended, the probe itself counting for about 1 (other work
    /// running shares the caches it shares a core or a chip with: an SMT
    /// sibling's L1 and L2, the L3).
    pub cpus: usize,
    /// The one-minute load average (see `cpus`); `None` when
    /// `/proc/loadavg` could not be read.
    pub load_average: Option<f64>,
}

/// Line size: time per pair of accesses `stride` bytes apart.
#[derive(Clone, Debug, Serialize)]
pub struct LineSize {
    /// The line size in bytes: the stride at the steepest rise in time per
    /// pair (`None` when no rise reaches 15 %).
    pub detected: Option<u32>,
    /// Distances tested between the two loads of a pair, bytes (8 .. 256).
    pub strides: Vec<u32>,
    /// Time per pair of loads at each stride, ns (best of N).
    pub ns_per_pair: Vec<f64>,
}

/// One level of the measured hierarchy.
#[derive(Clone, Debug, Serialize)]
pub struct Level {
    /// "L1", "L2", ... or "memory".
    pub name: String,
    /// Largest working set still served at this level's latency; `None` for
    /// memory.
    pub capacity: Option<u64>,
    /// First working set of the next plateau (the transition's end).
    pub next_plateau: Option<u64>,
    /// Load-to-use latency: the median of the plateau's sweep points, ns.
    pub latency_ns: f64,
    /// The same latency in core cycles (ns x [`Machine::clock_ghz`]).
    pub latency_cycles: f64,
    /// Sequential-read bandwidth over half the capacity (all of the buffer
    /// for memory), GB/s.
    pub read_gbps: Option<f64>,
}

/// One working set of the sweep and its latency.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// Working set, bytes (one chased node per line).
    pub size: u64,
    /// Time per dependent load, ns: the best over the sweep's passes.
    pub ns: f64,
    /// The same time in core cycles (ns x [`Machine::clock_ghz`]).
    pub cycles: f64,
}

/// L1 associativity: `lines` lines `stride` bytes apart (one L1 set).
#[derive(Clone, Debug, Serialize)]
pub struct Assoc {
    /// The associativity: the most lines still at L1 latency (`None` when
    /// no rise of 30 % is seen within the lines tested).
    pub detected: Option<u32>,
    /// Distance between the lines, bytes: the measured L1 capacity (32 KiB
    /// when none was measured or it does not fit the buffer).
    pub stride: u64,
    /// Numbers of lines tested (1 .. 32, 1 .. 24 with `--quick`).
    pub lines: Vec<u32>,
    /// Time per dependent load for each entry of `lines`, ns.
    pub ns: Vec<f64>,
}

/// TLB reach: one access per 4 KiB page, against the same number of lines
/// packed together (the sweep), and against the pattern on huge pages.
#[derive(Clone, Debug, Serialize)]
pub struct Tlb {
    /// Numbers of 4 KiB pages tested, eight per octave from 16.
    pub pages: Vec<u64>,
    /// Time per dependent load on 4 KiB pages for each entry of `pages`, ns.
    pub ns_4k: Vec<f64>,
    /// The same pattern on huge pages (`None` when none were granted, and
    /// with `--quick`). In a
    /// virtual machine whose host backs it with 4 KiB pages, the same as
    /// `ns_4k`.
    pub ns_huge: Option<Vec<f64>>,
    /// `ns_4k` minus the sweep's latency for as many lines packed together
    /// (at least 0): the TLB's cost per access.
    pub extra_ns: Vec<f64>,
    /// The steps found in `extra_ns`, first TLB level first.
    pub levels: Vec<TlbLevel>,
}

/// One step of the TLB curve: a TLB level's reach.
#[derive(Clone, Debug, Serialize)]
pub struct TlbLevel {
    /// Pages (4 KiB) covered before the next step in latency.
    pub entries: u64,
    /// `entries` x 4 KiB: the memory this level translates.
    pub reach_bytes: u64,
    /// The TLB's cost per access on the next plateau, ns.
    pub next_extra_ns: f64,
}

/// Prefetcher reach: a dependent chase with a constant ascending stride
/// from memory, across pages and within pages only.
#[derive(Clone, Debug, Serialize)]
pub struct Prefetch {
    /// Strides tested, bytes (64 .. 8192).
    pub strides: Vec<u64>,
    /// Time per load of the chase crossing pages, per stride, ns.
    pub ns_crossing: Vec<f64>,
    /// Time per load of the chase within pages, per stride, ns (`None` for
    /// strides of a page or more, which cannot stay within one).
    pub ns_within_page: Vec<Option<f64>>,
    /// Random-chase memory latency, the no-prefetch reference.
    pub memory_ns: f64,
    /// Largest stride at least half hidden (crossing pages / within pages).
    pub reach_crossing: Option<u64>,
    /// The same within pages; `None` when even the smallest stride is not.
    pub reach_within_page: Option<u64>,
}

/// 4K aliasing: a store then a load 4096 bytes after it, against 6144.
#[derive(Clone, Debug, Serialize)]
pub struct Aliasing {
    /// Time per store+load pair with the load 4096 bytes after the store, ns.
    pub ns_aliased: f64,
    /// Time per pair with the load 6144 bytes after the store, ns.
    pub ns_control: f64,
    /// Extra cycles per store+load pair when aliased.
    pub penalty_cycles: f64,
}

/// One cache as the OS reports it (sysfs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReportedCache {
    /// Level number, 1 for L1.
    pub level: u8,
    /// "data", "instruction" or "unified".
    pub kind: &'static str,
    /// Capacity, bytes.
    pub size: u64,
    /// Line size, bytes.
    pub line: u32,
    /// Ways per set.
    pub assoc: u32,
}

/// What the machine says about its caches.
#[derive(Clone, Debug, Serialize)]
pub struct Reported {
    /// The caches of the `host` configuration built from sysfs
    /// (`/sys/devices/system/cpu/cpu*/cache/`); empty when it failed.
    pub sysfs: Vec<ReportedCache>,
    /// Why sysfs could not be read, if it could not.
    pub sysfs_error: Option<String>,
    /// What CPUID says: caches, and on AMD the TLBs.
    pub cpuid: CpuidInfo,
}

impl Reported {
    /// The sysfs caches from the `host` configuration.
    pub fn from_host(host: &HierarchyConfig) -> Vec<ReportedCache> {
        host.levels
            .iter()
            .map(|l| ReportedCache {
                level: l.level,
                kind: match l.kind {
                    CacheKind::Data => "data",
                    CacheKind::Instruction => "instruction",
                    CacheKind::Unified => "unified",
                },
                size: l.size,
                line: l.line_size,
                assoc: l.assoc,
            })
            .collect()
    }

    /// The data-side cache at `level` in sysfs.
    pub fn sysfs_data(&self, level: u8) -> Option<&ReportedCache> {
        self.sysfs
            .iter()
            .find(|c| c.level == level && c.kind != "instruction")
    }

    /// The data-side cache at `level` in CPUID.
    pub fn cpuid_data(&self, level: u8) -> Option<&crate::cpu::CpuidCache> {
        self.cpuid
            .caches
            .iter()
            .find(|c| c.level == level && c.kind != "instruction")
    }
}

/// How a measured value compares with the reported ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Equal to every reported value.
    Agrees,
    /// Within a factor of 1.5 of every reported value.
    Close,
    /// Further than that from a reported value.
    Disagrees,
    /// The probe found no value (a test that did not detect a step).
    NotMeasured,
    /// Neither sysfs nor CPUID gives a value.
    NotReported,
}

impl Verdict {
    /// Compares `measured` with every reported value present; `None`
    /// entries of `reported` (a source that says nothing) are skipped.
    pub fn of(measured: Option<u64>, reported: &[Option<u64>]) -> Verdict {
        let Some(m) = measured else {
            return Verdict::NotMeasured;
        };
        let r: Vec<u64> = reported.iter().flatten().copied().collect();
        if r.is_empty() {
            return Verdict::NotReported;
        }
        if r.iter().all(|&x| x == m) {
            return Verdict::Agrees;
        }
        let close = r.iter().all(|&x| {
            let (a, b) = (x.max(m) as f64, x.min(m).max(1) as f64);
            a / b <= 1.5
        });
        if close {
            Verdict::Close
        } else {
            Verdict::Disagrees
        }
    }

    /// The words of the text report's verdict column.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::Close => "close (within 1.5x) ~",
            Verdict::Disagrees => "DISAGREES <<<",
            Verdict::NotMeasured => "not measured",
            Verdict::NotReported => "not reported",
        }
    }
}

/// One row of the side-by-side table.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// What is compared ("line size", "L2 size", "L1d associativity").
    pub what: String,
    /// "bytes", "ways" or "entries".
    pub unit: &'static str,
    /// The probe's value, in `unit`.
    pub measured: Option<u64>,
    /// What sysfs reports, in `unit`.
    pub sysfs: Option<u64>,
    /// What CPUID reports, in `unit`.
    pub cpuid: Option<u64>,
    /// `measured` against `sysfs` and `cpuid` ([`Verdict::of`]).
    pub verdict: Verdict,
    /// sysfs and CPUID disagree with each other.
    pub reports_differ: bool,
}

impl Comparison {
    /// A row, with its verdict and `reports_differ` worked out.
    pub fn new(
        what: impl Into<String>,
        unit: &'static str,
        measured: Option<u64>,
        sysfs: Option<u64>,
        cpuid: Option<u64>,
    ) -> Comparison {
        Comparison {
            what: what.into(),
            unit,
            measured,
            sysfs,
            cpuid,
            verdict: Verdict::of(measured, &[sysfs, cpuid]),
            reports_differ: matches!((sysfs, cpuid), (Some(a), Some(b)) if a != b),
        }
    }
}

/// The comparison rows for a report.
pub fn compare(r: &Report) -> Vec<Comparison> {
    let rep = &r.reported;
    let mut rows = Vec::new();
    rows.push(Comparison::new(
        "line size",
        "bytes",
        r.line_size.detected.map(u64::from),
        rep.sysfs_data(1).map(|c| u64::from(c.line)),
        rep.cpuid_data(1).map(|c| u64::from(c.line)),
    ));
    let caches: Vec<&Level> = r.levels.iter().filter(|l| l.capacity.is_some()).collect();
    let reported_levels = rep
        .sysfs
        .iter()
        .map(|c| c.level)
        .chain(rep.cpuid.caches.iter().map(|c| c.level))
        .max()
        .unwrap_or(0) as usize;
    for n in 1..=caches.len().max(reported_levels) {
        let lvl = n as u8;
        let name = if n == 1 {
            "L1d size".to_string()
        } else {
            format!("L{n} size")
        };
        rows.push(Comparison::new(
            name,
            "bytes",
            caches.get(n - 1).and_then(|l| l.capacity),
            rep.sysfs_data(lvl).map(|c| c.size),
            rep.cpuid_data(lvl).map(|c| c.size),
        ));
        if n == 1 {
            rows.push(Comparison::new(
                "L1d associativity",
                "ways",
                r.l1_assoc.detected.map(u64::from),
                rep.sysfs_data(1).map(|c| u64::from(c.assoc)),
                rep.cpuid_data(1).map(|c| u64::from(c.assoc)),
            ));
        }
    }
    for (i, name) in [
        "L1 dTLB entries (4 KiB pages)",
        "L2 dTLB entries (4 KiB pages)",
    ]
    .iter()
    .enumerate()
    {
        let cpuid = rep
            .cpuid
            .tlbs
            .get(i)
            .map(|t| u64::from(t.entries_4k))
            .filter(|&e| e > 0);
        let measured = r.tlb.levels.get(i).map(|t| t.entries);
        if measured.is_some() || cpuid.is_some() {
            rows.push(Comparison::new(*name, "entries", measured, None, cpuid));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(
            Verdict::of(Some(64), &[Some(64), Some(64)]),
            Verdict::Agrees
        );
        assert_eq!(Verdict::of(Some(64), &[Some(64), None]), Verdict::Agrees);
        assert_eq!(Verdict::of(Some(896), &[Some(1024), None]), Verdict::Close);
        assert_eq!(
            Verdict::of(Some(32), &[Some(64), Some(64)]),
            Verdict::Disagrees
        );
        assert_eq!(Verdict::of(None, &[Some(1)]), Verdict::NotMeasured);
        assert_eq!(Verdict::of(Some(1), &[None, None]), Verdict::NotReported);
    }
}
