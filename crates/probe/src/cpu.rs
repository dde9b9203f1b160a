//! What the x86-64 processor says about itself (CPUID), and its clock rate
//! measured with a chain of dependent one-cycle additions (inline assembly).
//! Everything architecture-specific lives here.

use core::arch::x86_64::{__cpuid_count, CpuidResult};
use std::time::Instant;

use serde::Serialize;

/// One cache as CPUID describes it (leaf 4 on Intel, 0x8000001D on AMD).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuidCache {
    /// Level number, 1 for L1.
    pub level: u8,
    /// "data", "instruction" or "unified".
    pub kind: &'static str,
    /// Capacity, bytes: line x partitions x ways x sets.
    pub size: u64,
    /// Line size, bytes.
    pub line: u32,
    /// Ways per set; 0 for a fully associative cache.
    pub assoc: u32,
    /// Number of sets.
    pub sets: u32,
    /// Logical CPUs sharing it.
    pub shared_by: u32,
}

/// One TLB as CPUID describes it (AMD leaves 0x80000005/6 only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuidTlb {
    /// "L1 dTLB" or "L2 dTLB".
    pub name: &'static str,
    /// Entries for 4 KiB pages.
    pub entries_4k: u32,
    /// Entries for 2 MiB pages.
    pub entries_2m: u32,
}

/// What CPUID reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuidInfo {
    /// The vendor string of leaf 0 ("GenuineIntel", "AuthenticAMD").
    pub vendor: String,
    /// The processor brand string (leaves 0x80000002-4); empty when the CPU
    /// has none.
    pub brand: String,
    /// The hypervisor's signature when running in a virtual machine.
    pub hypervisor: Option<String>,
    /// Every cache of the deterministic cache parameters leaf (4 on Intel,
    /// 0x8000001D on AMD with topology extensions); empty when neither is
    /// available.
    pub caches: Vec<CpuidCache>,
    /// The data TLBs, L1 then L2 (AMD and Hygon only; empty elsewhere).
    pub tlbs: Vec<CpuidTlb>,
}

fn cpuid(leaf: u32, sub: u32) -> CpuidResult {
    // SAFETY: CPUID exists on every x86-64 processor; leaves beyond the
    // maximum return unspecified but harmless values, and callers check
    // the maximum leaf first.
    #[allow(unused_unsafe)]
    unsafe {
        __cpuid_count(leaf, sub)
    }
}

fn regs_text(regs: &[u32]) -> String {
    let bytes: Vec<u8> = regs.iter().flat_map(|r| r.to_le_bytes()).collect();
    String::from_utf8_lossy(&bytes)
        .trim_matches(char::from(0))
        .trim()
        .to_string()
}

/// Reads CPUID.
pub fn cpuid_info() -> CpuidInfo {
    let l0 = cpuid(0, 0);
    let max = l0.eax;
    let vendor = regs_text(&[l0.ebx, l0.edx, l0.ecx]);
    let ext_max = cpuid(0x8000_0000, 0).eax;
    let brand = if ext_max >= 0x8000_0004 {
        let mut regs = Vec::new();
        for leaf in 0x8000_0002..=0x8000_0004 {
            let r = cpuid(leaf, 0);
            regs.extend([r.eax, r.ebx, r.ecx, r.edx]);
        }
        regs_text(&regs)
    } else {
        String::new()
    };
    let hypervisor = (max >= 1 && cpuid(1, 0).ecx & (1 << 31) != 0).then(|| {
        let r = cpuid(0x4000_0000, 0);
        regs_text(&[r.ebx, r.ecx, r.edx])
    });
    let amd = vendor == "AuthenticAMD" || vendor == "HygonGenuine";
    // Deterministic cache parameters: same layout in both leaves.
    let topoext = ext_max >= 0x8000_0001 && cpuid(0x8000_0001, 0).ecx & (1 << 22) != 0;
    let leaf = if amd && topoext && ext_max >= 0x8000_001D {
        Some(0x8000_001D)
    } else if !amd && max >= 4 {
        Some(4)
    } else {
        None
    };
    let mut caches = Vec::new();
    if let Some(leaf) = leaf {
        for sub in 0..16 {
            let r = cpuid(leaf, sub);
            let kind = match r.eax & 0x1F {
                1 => "data",
                2 => "instruction",
                3 => "unified",
                _ => break,
            };
            let level = ((r.eax >> 5) & 7) as u8;
            let line = (r.ebx & 0xFFF) + 1;
            let partitions = ((r.ebx >> 12) & 0x3FF) + 1;
            let assoc = ((r.ebx >> 22) & 0x3FF) + 1;
            let sets = r.ecx.wrapping_add(1);
            let fully = r.eax & (1 << 9) != 0;
            let shared_by = ((r.eax >> 14) & 0xFFF) + 1;
            let size = u64::from(line) * u64::from(partitions) * u64::from(assoc) * u64::from(sets);
            caches.push(CpuidCache {
                level,
                kind,
                size,
                line,
                assoc: if fully { 0 } else { assoc },
                sets,
                shared_by,
            });
        }
    }
    let mut tlbs = Vec::new();
    if amd && ext_max >= 0x8000_0006 {
        let l1 = cpuid(0x8000_0005, 0);
        tlbs.push(CpuidTlb {
            name: "L1 dTLB",
            entries_4k: (l1.ebx >> 16) & 0xFF,
            entries_2m: (l1.eax >> 16) & 0xFF,
        });
        let l2 = cpuid(0x8000_0006, 0);
        tlbs.push(CpuidTlb {
            name: "L2 dTLB",
            entries_4k: (l2.ebx >> 16) & 0xFFF,
            entries_2m: (l2.eax >> 16) & 0xFFF,
        });
    }
    CpuidInfo {
        vendor,
        brand,
        hypervisor,
        caches,
        tlbs,
    }
}

/// Runs `iters` x 64 dependent one-cycle additions; returns the elapsed
/// nanoseconds. Register to register: an addition of an immediate
/// (`add acc, 1`) is folded at rename by newer cores (Intel's Golden Cove:
/// a Sapphire Rapids Xeon "measured" 17.6 GHz with it), a register's is
/// not.
fn add_chain_ns(iters: u64) -> f64 {
    let start = Instant::now();
    let mut acc = 0u64;
    let mut n = iters;
    // SAFETY: the assembly only reads and writes the two named registers
    // (and flags, which the default options allow); it touches no memory and
    // no stack. It ends when the counter reaches zero (iters >= 1).
    unsafe {
        core::arch::asm!(
            "2:",
            ".rept 64",
            "add {acc}, {n}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            acc = inout(reg) acc,
            n = inout(reg) n,
            options(nomem, nostack),
        );
    }
    std::hint::black_box((acc, n));
    start.elapsed().as_nanos() as f64
}

/// The core clock in GHz: dependent additions retire one per cycle, so
/// additions per nanosecond is the clock rate. Best of the repetitions that
/// fit in `budget_ms` (at least 5).
pub fn clock_ghz(budget_ms: u64) -> f64 {
    const ITERS: u64 = 20_000; // 1.28 M additions, ~0.5 ms at 2.5 GHz
    add_chain_ns(ITERS / 10); // warm up (and wake the core up)
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut reps = 0;
    while reps < 5 || (start.elapsed().as_millis() as u64) < budget_ms {
        best = best.min(add_chain_ns(ITERS));
        reps += 1;
        if reps > 10_000 {
            break;
        }
    }
    (ITERS * 64) as f64 / best
}

/// Evicts the line holding `word` from every cache level (`clflush`).
pub fn flush_line(word: &usize) {
    // SAFETY: clflush (SSE2, part of x86-64) needs a mapped address, which
    // a reference is; it changes no memory contents.
    unsafe { core::arch::x86_64::_mm_clflush((word as *const usize).cast()) }
}

/// Orders the flushes before the loads that follow (`mfence`).
pub fn fence() {
    // SAFETY: mfence has no operands and no preconditions.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_mfence()
    }
}
