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
    pub version: u32,
    pub machine: Machine,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// Seconds spent measuring (without simulation).
    pub seconds: f64,
    pub line_size: LineSize,
    /// Cache levels found by the working-set sweep, then main memory.
    pub levels: Vec<Level>,
    /// The working-set sweep: latency of a random pointer chase by size.
    pub sweep: Vec<SweepPoint>,
    pub l1_assoc: Assoc,
    pub tlb: Tlb,
    pub prefetch: Prefetch,
    pub aliasing: Aliasing,
    pub reported: Reported,
    pub comparison: Vec<Comparison>,
    /// Present with `--simulate`.
    pub simulation: Option<Simulation>,
}

/// The machine and the conditions of the run.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub vendor: String,
    pub brand: String,
    pub hypervisor: Option<String>,
    /// The CPU the probe was pinned to (`None`: pinning failed).
    pub pinned_cpu: Option<u32>,
    /// Core clock measured with dependent additions (cycles = ns x GHz):
    /// the higher of the readings at the start and at the end of the run.
    pub clock_ghz: f64,
    pub clock_ghz_start: f64,
    pub clock_ghz_end: f64,
    /// `/sys/kernel/mm/transparent_hugepage/enabled` (the selected mode).
    pub thp: Option<String>,
    /// Bytes of the main buffer, and how many of them huge pages back.
    pub buffer_bytes: u64,
    pub huge_page_bytes: u64,
    /// The vector loads of the bandwidth loop: "avx2" or "sse2".
    pub read_loop: &'static str,
    /// CPUs the probe could run on, and the one-minute load average when
    /// the run ended, the probe itself counting for about 1 (other work
    /// running shares the caches it shares a core or a chip with: an SMT
    /// sibling's L1 and L2, the L3).
    pub cpus: usize,
    pub load_average: Option<f64>,
}

/// Line size: time per pair of accesses `stride` bytes apart.
#[derive(Clone, Debug, Serialize)]
pub struct LineSize {
    pub detected: Option<u32>,
    pub strides: Vec<u32>,
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
    pub latency_ns: f64,
    pub latency_cycles: f64,
    /// Sequential-read bandwidth over half the capacity (all of the buffer
    /// for memory), GB/s.
    pub read_gbps: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    pub size: u64,
    pub ns: f64,
    pub cycles: f64,
}

/// L1 associativity: `lines` lines `stride` bytes apart (one L1 set).
#[derive(Clone, Debug, Serialize)]
pub struct Assoc {
    pub detected: Option<u32>,
    pub stride: u64,
    pub lines: Vec<u32>,
    pub ns: Vec<f64>,
}

/// TLB reach: one access per 4 KiB page, against the same number of lines
/// packed together (the sweep), and against the pattern on huge pages.
#[derive(Clone, Debug, Serialize)]
pub struct Tlb {
    pub pages: Vec<u64>,
    pub ns_4k: Vec<f64>,
    /// The same pattern on huge pages (`None` when none were granted, and
    /// with `--quick`). In a
    /// virtual machine whose host backs it with 4 KiB pages, the same as
    /// `ns_4k`.
    pub ns_huge: Option<Vec<f64>>,
    /// `ns_4k` minus the sweep's latency for as many lines packed together
    /// (at least 0): the TLB's cost per access.
    pub extra_ns: Vec<f64>,
    pub levels: Vec<TlbLevel>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TlbLevel {
    /// Pages (4 KiB) covered before the next step in latency.
    pub entries: u64,
    pub reach_bytes: u64,
    /// The TLB's cost per access on the next plateau, ns.
    pub next_extra_ns: f64,
}

/// Prefetcher reach: a dependent chase with a constant ascending stride
/// from memory, across pages and within pages only.
#[derive(Clone, Debug, Serialize)]
pub struct Prefetch {
    pub strides: Vec<u64>,
    pub ns_crossing: Vec<f64>,
    pub ns_within_page: Vec<Option<f64>>,
    /// Random-chase memory latency, the no-prefetch reference.
    pub memory_ns: f64,
    /// Largest stride at least half hidden (crossing pages / within pages).
    pub reach_crossing: Option<u64>,
    pub reach_within_page: Option<u64>,
}

/// 4K aliasing: a store then a load 4096 bytes after it, against 6144.
#[derive(Clone, Debug, Serialize)]
pub struct Aliasing {
    pub ns_aliased: f64,
    pub ns_control: f64,
    /// Extra cycles per store+load pair when aliased.
    pub penalty_cycles: f64,
}

/// One cache as the OS reports it (sysfs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReportedCache {
    pub level: u8,
    pub kind: &'static str,
    pub size: u64,
    pub line: u32,
    pub assoc: u32,
}

/// What the machine says about its caches.
#[derive(Clone, Debug, Serialize)]
pub struct Reported {
    pub sysfs: Vec<ReportedCache>,
    /// Why sysfs could not be read, if it could not.
    pub sysfs_error: Option<String>,
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
    NotMeasured,
    NotReported,
}

impl Verdict {
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
    pub what: String,
    /// "bytes", "ways" or "entries".
    pub unit: &'static str,
    pub measured: Option<u64>,
    pub sysfs: Option<u64>,
    pub cpuid: Option<u64>,
    pub verdict: Verdict,
    /// sysfs and CPUID disagree with each other.
    pub reports_differ: bool,
}

impl Comparison {
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
