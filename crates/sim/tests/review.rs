//! Review: failing tests demonstrating suspected bugs (public API only).

use coldcache_sim::*;

mod common;
use common::lvl;

fn cfg_of(cores: usize, levels: Vec<LevelConfig>) -> HierarchyConfig {
    HierarchyConfig {
        name: "review".into(),
        cores,
        levels,
        coherence: cores > 1,
        ..HierarchyConfig::default()
    }
}

fn rd(a: u64) -> Access {
    Access::new(AccessKind::Read, a, 8)
}
fn wr(a: u64) -> Access {
    Access::new(AccessKind::Write, a, 8)
}
fn served(h: &mut Hierarchy, core: usize, a: Access) -> Option<u8> {
    h.access(core, a).served_by.level()
}
fn inst(h: &Hierarchy, name: &str) -> usize {
    h.instances()
        .iter()
        .position(|i| i.name == name)
        .unwrap_or_else(|| panic!("no instance {name}"))
}
/// The general caches, and two hierarchies on the lean engine (one for
/// single accesses, one for batches) of `cfg`, which must be of its shape.
fn on_the_lean_engine(cfg: &HierarchyConfig) -> (Hierarchy, Hierarchy, Hierarchy) {
    let general = Hierarchy::new_general(cfg).unwrap();
    let single = Hierarchy::new(cfg).unwrap();
    let batched = Hierarchy::new(cfg).unwrap();
    assert!(
        batched.uses_lean_engine(),
        "setup: the lean engine takes this shape"
    );
    (general, single, batched)
}

// ---------------------------------------------------------------------------
// Coherence: the "writer owns the line" shortcut.

/// Core 1's L2 next-line prefetcher brings line 1 into core 1's L2 while
/// core 0 owns line 1 alone. That is another core filling the line, so
/// core 0's next write must invalidate it; it does not (the EXCLUSIVE flag
/// is only cleared on another core's *first-level* miss of that very line).
#[test]
fn ownership_survives_a_fill_by_another_cores_l2_prefetcher() {
    let mut cfg = cfg_of(
        2,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 2, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 2, 64),
            lvl("L2", 2, CacheKind::Unified, 64 * 64, 8, 64),
        ],
    );
    cfg.prefetchers.push(PrefetcherConfig {
        kind: PrefetcherKind::NextLine { degree: 1 },
        level: 2,
        cross_page: false,
    });
    let mut h = Hierarchy::new(&cfg).unwrap();
    let l2_1 = inst(&h, "L2#1");
    h.access(0, wr(64)); // core 0 owns line 1
    h.access(1, rd(0)); // core 1: L2 miss on line 0 prefetches line 1 into L2#1
    assert!(h.instance_contains(l2_1, 64), "setup: prefetched into L2#1");
    let r = h.access(0, wr(64));
    assert_eq!(r.invalidations, 1, "core 1's L2 copy must be invalidated");
    assert!(!h.instance_contains(l2_1, 64), "stale copy left in L2#1");
}

/// L1 lines of 64 bytes, L2 lines of 128 bytes. Core 1 reads bytes 64..72,
/// filling the 128-byte L2 line that also holds bytes 0..64, which core 0
/// owns. Core 0's next write to byte 0 must invalidate core 1's L2 line.
#[test]
fn ownership_survives_a_fill_of_a_wider_lower_level_line() {
    let cfg = cfg_of(
        2,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 2, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 2, 64),
            lvl("L2", 2, CacheKind::Unified, 64 * 128, 8, 128),
        ],
    );
    let mut h = Hierarchy::new(&cfg).unwrap();
    let l2_1 = inst(&h, "L2#1");
    h.access(0, wr(0)); // core 0 owns L1 line 0
    h.access(1, rd(64)); // core 1: L1 line 1, L2 line 0 (bytes 0..128)
    assert!(h.instance_contains(l2_1, 0));
    let r = h.access(0, wr(0));
    assert_eq!(r.invalidations, 1, "core 1's L2 holds byte 0");
    assert!(!h.instance_contains(l2_1, 0), "stale copy left in L2#1");
}

// ---------------------------------------------------------------------------
// Exclusive (victim) levels.

/// Write-through, no-write-allocate L1d above an exclusive L2. A write that
/// misses L1 and hits L2 takes the "victim cache hit: the line moves up"
/// branch, but L1 did not allocate: the line vanishes from every level
/// (and the write is lost).
#[test]
fn write_through_l1_over_exclusive_l2_loses_the_line_on_a_write() {
    let mut l1d = lvl("L1d", 1, CacheKind::Data, 64, 1, 64);
    l1d.write = WritePolicy::WriteThrough;
    let mut l2 = lvl("L2", 2, CacheKind::Unified, 2 * 64, 2, 64);
    l2.inclusion = Inclusion::Exclusive;
    let cfg = cfg_of(
        1,
        vec![lvl("L1i", 1, CacheKind::Instruction, 64, 1, 64), l1d, l2],
    );
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, rd(0)); // A in L1
    h.access(0, rd(64)); // B in L1, A to L2
    assert!(h.instance_contains(2, 0));
    assert_eq!(served(&mut h, 0, wr(0)), Some(2)); // write miss L1, hit L2
    let held = (0..h.instances().len()).any(|i| h.instance_contains(i, 0));
    assert!(held, "line A is in no cache after a write that hit L2");
}

/// L1d (1 line), L2 exclusive (1 line), L3 exclusive (2 lines). A dirty line
/// that sank to L3 is moved up on a hit; its dirty bit is handed to
/// `path[pos - 1]` (the exclusive L2, which never holds it) instead of the
/// L1 that was filled: the dirty data is lost and its later eviction from
/// L1 counts no write-back.
#[test]
fn dirty_bit_lost_when_a_line_moves_up_across_two_exclusive_levels() {
    let mut l2 = lvl("L2", 2, CacheKind::Unified, 64, 1, 64);
    l2.inclusion = Inclusion::Exclusive;
    let mut l3 = lvl("L3", 3, CacheKind::Unified, 2 * 64, 2, 64);
    l3.inclusion = Inclusion::Exclusive;
    let cfg = cfg_of(
        1,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 64, 1, 64),
            lvl("L1d", 1, CacheKind::Data, 64, 1, 64),
            l2,
            l3,
        ],
    );
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, wr(0)); // A dirty in L1
    h.access(0, rd(64)); // B; A (dirty) -> L2
    h.access(0, rd(128)); // C; B -> L2, A (dirty) -> L3
    assert!(h.instance_contains(3, 0));
    assert_eq!(served(&mut h, 0, rd(0)), Some(3)); // A moves up from L3 to L1
    h.access(0, rd(192)); // evicts A from L1: it is still dirty
    assert_eq!(
        h.level_totals()[1].writebacks,
        2,
        "A left L1 dirty twice (the dirty bit must follow it up)"
    );
}

/// A hardware prefetch issued from inside a demand walk (L1 prefetcher)
/// runs `handle_victims` at the end of its own walk, which also handles the
/// *outer* walk's queued victims before the outer walk has looked up the
/// levels below: a victim sunk into the exclusive L2 displaces the very line
/// the outer walk is about to find there (contradicting hierarchy.rs's
/// header).
#[test]
fn nested_prefetch_walk_handles_the_outer_walks_victims_too_early() {
    // L1d: 2 sets x 1 way. L2: exclusive, 4 sets x 1 way.
    let mut l2 = lvl("L2", 2, CacheKind::Unified, 4 * 64, 1, 64);
    l2.inclusion = Inclusion::Exclusive;
    let mut cfg = cfg_of(
        1,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 2 * 64, 1, 64),
            lvl("L1d", 1, CacheKind::Data, 2 * 64, 1, 64),
            l2,
        ],
    );
    cfg.prefetchers.push(PrefetcherConfig {
        kind: PrefetcherKind::NextLine { degree: 1 },
        level: 1,
        cross_page: true,
    });
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, rd(0)); // L1 {0, 1(pf)}
    h.access(0, rd(4 * 64)); // L1 {4, 5(pf)}, L2 {0, 1}
    assert!(
        h.instance_contains(2, 0),
        "setup: line 0 in the victim cache"
    );
    assert_eq!(
        served(&mut h, 0, rd(0)),
        Some(2),
        "line 0 was in the exclusive L2 when the access started"
    );
}

// ---------------------------------------------------------------------------
// Inclusion.

/// Inclusive L2 evicts A whose L1 copy is dirty (L2's own copy is clean).
/// back_invalidate counts the L1 write-back ("the dirty data joins the victim
/// on its way down") but never marks the victim dirty, so the dirty data
/// never reaches L3: L3 evicts A later with no write-back.
#[test]
fn back_invalidated_dirty_data_never_reaches_the_level_below() {
    let mut l2 = lvl("L2", 2, CacheKind::Unified, 2 * 64, 2, 64);
    l2.inclusion = Inclusion::Inclusive;
    let cfg = cfg_of(
        1,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 4 * 64, 4, 64),
            lvl("L1d", 1, CacheKind::Data, 4 * 64, 4, 64),
            l2,
            lvl("L3", 3, CacheKind::Unified, 4 * 64, 4, 64),
        ],
    );
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, wr(0)); // A dirty in L1 (clean in L2, L3)
    h.access(0, rd(64)); // B
    h.access(0, rd(128)); // C: L2 evicts A, back-invalidates dirty A in L1
    assert!(!h.instance_contains(1, 0));
    assert_eq!(h.level_totals()[1].writebacks, 1);
    h.access(0, rd(192)); // D
    h.access(0, rd(256)); // E: L3 (4 lines, LRU) evicts A
    assert!(!h.instance_contains(3, 0));
    let t = h.level_totals();
    assert_eq!(
        t[2].writebacks + t[3].writebacks,
        2,
        "A's dirty data must be written back L2->L3 and L3->memory"
    );
}

// ---------------------------------------------------------------------------
// Panics / overflow at the top of the address space (debug builds).

/// The `cachegrind` preset (Whole mode, plain fast path): an 8-byte read of
/// the last 8 bytes of memory panics in `walk` (`addr + size - 1` evaluates
/// `addr + size` = 2^64 first).
#[test]
fn cachegrind_read_of_the_last_bytes_of_memory() {
    let mut h = Hierarchy::new(&presets::cachegrind_default()).unwrap();
    let r = h.access(0, Access::new(AccessKind::Read, u64::MAX - 7, 8));
    assert!(r.served_by.is_memory());
}

/// PerLine: `end = addr + size` overflows for an access ending at the last
/// byte of memory (release: `end` wraps to 0 and no line is simulated).
#[test]
fn per_line_access_to_the_last_bytes_of_memory() {
    let mut cfg = cfg_of(
        1,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 2, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 2, 64),
        ],
    );
    cfg.straddle = StraddleMode::PerLine;
    let mut h = Hierarchy::new(&cfg).unwrap();
    let r = h.access(0, Access::new(AccessKind::Read, u64::MAX - 7, 8));
    assert!(r.served_by.is_memory());
    assert_eq!(r.lines(), 1);
}

/// Coherent write to the last line of memory: `byte_mask` computes
/// `start + line_size` = 2^64 (also `invalidate_others`:
/// `line_addr + line_size - 1`).
#[test]
fn coherent_write_to_the_last_line_of_memory() {
    let cfg = cfg_of(
        2,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 2, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 2, 64),
        ],
    );
    let mut h = Hierarchy::new(&cfg).unwrap();
    // First byte of the last line: the access itself ends well before 2^64.
    h.access(1, rd(u64::MAX - 63));
    let r = h.access(0, wr(u64::MAX - 63));
    assert_eq!(r.invalidations, 1);
}

/// Inclusive eviction of the last line of memory: back_invalidate computes
/// `addr + (1 << shift) - 1`, which overflows before the `- 1`.
#[test]
fn inclusive_eviction_of_the_last_line_of_memory() {
    let mut l2 = lvl("L2", 2, CacheKind::Unified, 64, 1, 64);
    l2.inclusion = Inclusion::Inclusive;
    let cfg = cfg_of(
        1,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 8, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 8, 64),
            l2,
        ],
    );
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, rd(u64::MAX - 63)); // first bytes of the last line
    h.access(0, rd(0)); // L2 evicts the last line
    assert!(!h.instance_contains(1, u64::MAX - 63));
}

/// An access wrapping past the end of memory (addr = u64::MAX, 8 bytes):
/// debug panics on `addr + size - 1`; release computes last < first and the
/// line loop in `walk` runs ~2^58 times (a hang). "Bad input never panics".
#[test]
fn access_wrapping_past_the_end_of_memory() {
    let cfg = cfg_of(
        1,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 2, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 2, 64),
        ],
    );
    let mut h = Hierarchy::new(&cfg).unwrap();
    let r = h.access(0, Access::new(AccessKind::Read, u64::MAX, 8));
    assert!(r.served_by.is_memory());
}

/// Regression: a huge `coherence_table` passed validation, then made
/// `Hierarchy::new` panic (`capacity * 2` overflow in LineTable::new). It is
/// now refused by validation, naming the key.
#[test]
fn huge_coherence_table_is_refused_by_validation() {
    let mut cfg = cfg_of(
        2,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 2, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 2, 64),
        ],
    );
    cfg.coherence_table = usize::MAX;
    let e = cfg.validate().unwrap_err();
    assert_eq!(e.key, "coherence_table");
    let r = std::panic::catch_unwind(|| Hierarchy::new(&cfg).map(|_| ()));
    assert!(
        matches!(r, Ok(Err(_))),
        "expected a ConfigError, got a panic or Ok"
    );
}

/// `AccessResult::invalidations` is a u16 summed over the lines of one
/// access (`r.invalidations += sent` in after_data_access): a 129-line write
/// that invalidates 255 cores' L1d and L2 copies (65 790) overflows (debug
/// panic; release wraps to a wrong count).
#[test]
fn wide_write_overflows_the_invalidation_count() {
    let cfg = cfg_of(
        256,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 64 * 64, 8, 64),
            lvl("L1d", 1, CacheKind::Data, 256 * 64, 8, 64),
            lvl("L2", 2, CacheKind::Unified, 512 * 64, 8, 64),
        ],
    );
    let mut h = Hierarchy::new(&cfg).unwrap();
    for c in 1..256 {
        for l in 0..129u64 {
            h.access(c, rd(l * 64));
        }
    }
    let r = h.access(0, Access::new(AccessKind::Write, 0, 129 * 64));
    assert_eq!(h.stats().coherence.invalidations, 129 * 255 * 2);
    assert_eq!(r.invalidations, u16::MAX, "saturates at least");
}

// ---------------------------------------------------------------------------
// Tag sentinel.

/// Line size 1 (allowed, for Cache Lab): line u64::MAX equals the INVALID
/// tag, so the very first access to address u64::MAX hits an empty cache.
#[test]
fn one_byte_lines_last_address_hits_an_empty_cache() {
    let cfg = cfg_of(1, vec![lvl("L1", 1, CacheKind::Unified, 4, 1, 1)]);
    let mut h = Hierarchy::new(&cfg).unwrap();
    let r = h.access(0, Access::new(AccessKind::Read, u64::MAX, 1));
    assert!(r.served_by.is_memory(), "cold cache cannot hit");
}

// ---------------------------------------------------------------------------
// Allocation in `Hierarchy::access`.

mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        pub static ALLOCS: Cell<u64> = const { Cell::new(0) };
    }

    pub struct Counting;

    // SAFETY: every call is forwarded to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
            System.alloc(l)
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            System.dealloc(p, l)
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
            System.realloc(p, l, n)
        }
    }

    pub fn count<R>(f: impl FnOnce() -> R) -> (R, u64) {
        let before = ALLOCS.with(|c| c.get());
        let r = f();
        (r, ALLOCS.with(|c| c.get()) - before)
    }
}

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// Sanity check (passes): a mixed coherent workload with prefetchers,
/// inclusion and software prefetches allocates nothing once warm.
#[test]
fn steady_state_mixed_workload_allocates_nothing() {
    let mut l2 = lvl("L2", 2, CacheKind::Unified, 64 * 64, 8, 64);
    l2.inclusion = Inclusion::Inclusive;
    let mut l3 = lvl("L3", 3, CacheKind::Unified, 256 * 64, 16, 64);
    l3.sharing = Sharing::All;
    let mut cfg = cfg_of(
        4,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 2, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 2, 64),
            l2,
            l3,
        ],
    );
    cfg.prefetchers.push(PrefetcherConfig {
        kind: PrefetcherKind::Stream {
            streams: 8,
            degree: 4,
            distance: 1,
        },
        level: 2,
        cross_page: false,
    });
    cfg.prefetchers.push(PrefetcherConfig {
        kind: PrefetcherKind::NextLine { degree: 2 },
        level: 1,
        cross_page: true,
    });
    let mut h = Hierarchy::new(&cfg).unwrap();
    let mut x = 0x1234_5678u64;
    let mut step = |h: &mut Hierarchy| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let kind = AccessKind::ALL[(x % 7) as usize];
        let a = Access::new(kind, (x >> 8) % (1 << 16), 1 + (x >> 40) as u32 % 16)
            .with_ip(0x400 + (x >> 50) % 8);
        h.access((x >> 33) as usize % 4, a);
    };
    let mut out = Vec::with_capacity(1 << 20);
    for _ in 0..20_000 {
        step(&mut h);
    }
    h.drain_prefetch_outcomes(&mut out);
    let (_, n) = counting::count(|| {
        for _ in 0..2_000 {
            step(&mut h);
        }
    });
    assert_eq!(n, 0);
}

/// `pending` is reserved for 256 victims; one wide access (Whole mode,
/// 32 KiB, e.g. a `rep movs`/`xsave` record) queues a victim per line per
/// level and grows it: `Hierarchy::access` allocates in a warm hierarchy.
#[test]
fn wide_access_grows_the_victim_queue() {
    let cfg = cfg_of(
        1,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 64 * 64, 8, 64),
            lvl("L1d", 1, CacheKind::Data, 512 * 64, 8, 64),
            lvl("L2", 2, CacheKind::Unified, 1024 * 64, 8, 64),
        ],
    );
    let mut h = Hierarchy::new(&cfg).unwrap();
    for i in 0..4096u64 {
        h.access(0, rd(i * 64)); // fill both levels
    }
    let (_, n) = counting::count(|| {
        h.access(0, Access::new(AccessKind::Read, 1 << 30, 32 * 1024));
    });
    assert_eq!(n, 0, "allocations in one access of a warm hierarchy");
}

// ---------------------------------------------------------------------------
// Prefetch accounting.

/// A *software* prefetch that finds a hardware-prefetched line in L2 counts
/// the hardware prefetch as useful (walk is called with `count = true`),
/// although no demand access used it (stats.rs / PrefetchOutcome: "used by
/// a demand access"). It also trains the hardware prefetchers and counts as
/// a demand read in every level's stats.
#[test]
fn software_prefetch_resolves_a_hardware_prefetch_as_useful() {
    let mut cfg = cfg_of(
        1,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 2, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 2, 64),
            lvl("L2", 2, CacheKind::Unified, 64 * 64, 8, 64),
        ],
    );
    cfg.prefetchers.push(PrefetcherConfig {
        kind: PrefetcherKind::NextLine { degree: 1 },
        level: 2,
        cross_page: false,
    });
    cfg.prefetch_lag = 0;
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, rd(0)); // L2 miss: line 1 prefetched into L2
    assert_eq!(h.stats().hardware_prefetch.issued, 1);
    h.access(0, Access::new(AccessKind::Prefetch, 64, 1).with_ip(0x500));
    let s = h.stats();
    assert_eq!(
        s.hardware_prefetch.useful, 0,
        "no demand access used line 1"
    );
    assert_eq!(s.instances[1].reads, 1, "a prefetch is not a demand read");
}

// ---------------------------------------------------------------------------
// Differential check of the fast paths (classification on disables them)
// over configurations the property tests leave out: write-through levels,
// mixed line sizes, prefetchers, SRRIP/PLRU first levels, per-line mode.

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_cfg(r: &mut Rng) -> HierarchyConfig {
    let pol = |r: &mut Rng| match r.below(5) {
        0 => ReplacementPolicy::Lru,
        1 => ReplacementPolicy::TreePlru,
        2 => ReplacementPolicy::Fifo,
        3 => ReplacementPolicy::Random { seed: 3 },
        _ => ReplacementPolicy::Srrip { bits: 2 },
    };
    let cores = [1usize, 2, 4][r.below(3) as usize];
    let l1_line = [32u32, 64][r.below(2) as usize];
    let l2_line = [32u32, 64, 128][r.below(3) as usize];
    let mut levels = Vec::new();
    let a1 = 1 + r.below(4) as u32;
    let p1 = pol(r);
    for (name, kind) in [("L1i", CacheKind::Instruction), ("L1d", CacheKind::Data)] {
        let mut l = lvl(name, 1, kind, 4 * u64::from(a1 * l1_line), a1, l1_line);
        l.policy = p1;
        if r.below(4) == 0 {
            l.write = WritePolicy::WriteThrough;
        }
        levels.push(l);
    }
    let a2 = 1 + r.below(8) as u32;
    let mut l2 = lvl(
        "L2",
        2,
        CacheKind::Unified,
        8 * u64::from(a2 * l2_line),
        a2,
        l2_line,
    );
    l2.policy = pol(r);
    l2.inclusion = match r.below(3) {
        0 => Inclusion::Inclusive,
        1 => Inclusion::NonInclusive,
        _ => Inclusion::Exclusive,
    };
    if r.below(4) == 0 {
        l2.write = WritePolicy::WriteThrough;
    }
    l2.sharing = if r.below(2) == 0 {
        Sharing::Core
    } else {
        Sharing::All
    };
    levels.push(l2);
    let mut cfg = cfg_of(cores, levels);
    cfg.coherence = r.below(4) != 0;
    cfg.straddle = if r.below(2) == 0 {
        StraddleMode::Whole
    } else {
        StraddleMode::PerLine
    };
    cfg.lookup = if r.below(3) == 0 {
        LookupMode::AllLevels
    } else {
        LookupMode::OnMiss
    };
    if r.below(2) == 0 {
        cfg.prefetchers.push(PrefetcherConfig {
            kind: PrefetcherKind::NextLine { degree: 2 },
            level: 2,
            cross_page: false,
        });
    }
    cfg
}

#[test]
fn fast_paths_agree_with_the_walk_on_more_configurations() {
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..1000 {
        let cfg = random_cfg(&mut r);
        let mut slow_cfg = cfg.clone();
        slow_cfg.classify_misses = true;
        let mut fast = Hierarchy::new(&cfg).unwrap();
        let mut slow = Hierarchy::new(&slow_cfg).unwrap();
        for i in 0..400 {
            let kind = AccessKind::ALL[r.below(7) as usize];
            let kind = if r.below(3) == 0 {
                AccessKind::Read
            } else {
                kind
            };
            let a = Access::new(kind, r.below(1536), 1 + r.below(40) as u32)
                .with_ip(0x400 + r.below(4));
            let core = r.below(cfg.cores as u64) as usize;
            let (x, y) = (fast.access(core, a), slow.access(core, a));
            assert_eq!(x, y, "case {case} access {i} {a:?} core {core}\n{cfg:#?}");
        }
        let strip = |mut s: Stats| {
            for l in &mut s.instances {
                l.misses = MissClasses::default();
            }
            s
        };
        assert_eq!(
            strip(fast.stats()),
            strip(slow.stats()),
            "case {case}\n{cfg:#?}"
        );
    }
}

// ---------------------------------------------------------------------------
// The lean engine's batch loop (issue 19's straddle fast path).

/// A size-0 access counts as one byte. With lines of 2^31 bytes, the batch
/// loop once took a line-aligned size-0 write for a straddle of the next
/// line too (its last byte computed from size - 1 wrapping), dirtied that
/// line, and counted a write-back for it later that the general walk does
/// not. The batch path and the per-access path must agree with it.
#[test]
fn a_size_zero_write_dirties_one_line_even_with_2_gib_lines() {
    let cfg = cfg_of(
        1,
        vec![lvl("L1", 1, CacheKind::Unified, 1 << 32, 1, 1 << 31)],
    );
    let ops = [
        rd(0),
        rd(0x8000_0000),
        Access::new(AccessKind::Write, 0, 0),
        rd(0x1_8000_0000),
    ];
    let (mut general, mut single, mut batched) = on_the_lean_engine(&cfg);
    for &a in &ops {
        general.access(0, a);
        single.access(0, a);
    }
    let mut results = [AccessResult::default(); 4];
    batched.access_batch(0, &ops, &mut results);
    let l1 = inst(&general, "L1");
    let wb = |h: &Hierarchy| h.stats().instances[l1].writebacks;
    assert_eq!(wb(&general), 0, "the line at 2 GiB was never written");
    assert_eq!(wb(&single), 0, "per access");
    assert_eq!(wb(&batched), 0, "batch");
}

/// A straddling access whose two lines share the one set of a first level,
/// both held, one behind the other: the walk makes the first line most
/// recent, then the second, so the second stays most recent and the first
/// is the next victim. The batch loop decides this case itself; by hand,
/// with one set of two ways: lines 0 and 1 read (set: 1, 0); the straddle
/// over them (set: 1, 0 again); line 2 read evicts line 0 (set: 2, 1); so
/// line 1 hits (set: 1, 2) and line 0 misses.
#[test]
fn a_straddle_over_one_set_leaves_its_second_line_most_recent() {
    let cfg = cfg_of(1, vec![lvl("L1", 1, CacheKind::Unified, 128, 2, 64)]);
    let ops = [
        rd(0),
        rd(64),
        Access::new(AccessKind::Read, 60, 8),
        rd(128),
        rd(64),
        rd(0),
    ];
    let want = [None, None, Some(1), None, Some(1), None];
    let (mut general, mut single, mut batched) = on_the_lean_engine(&cfg);
    let mut results = [AccessResult::default(); 6];
    batched.access_batch(0, &ops, &mut results);
    for (n, &a) in ops.iter().enumerate() {
        assert_eq!(served(&mut general, 0, a), want[n], "general, access {n}");
        assert_eq!(served(&mut single, 0, a), want[n], "per access, access {n}");
        assert_eq!(results[n].served_by.level(), want[n], "batch, access {n}");
    }
}
