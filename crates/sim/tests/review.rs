//! Review: failing tests demonstrating suspected bugs (public API only).

use coldcache_sim::*;

fn lvl(name: &str, n: u8, kind: CacheKind, size: u64, assoc: u32, line: u32) -> LevelConfig {
    LevelConfig {
        name: name.into(),
        level: n,
        kind,
        size,
        line_size: line,
        assoc,
        policy: ReplacementPolicy::Lru,
        write: WritePolicy::WriteBack,
        inclusion: Inclusion::NonInclusive,
        sharing: Sharing::Core,
        latency: None,
    }
}

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
    assert!(h.instance_contains(2, 0), "setup: line 0 in the victim cache");
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
/// `start + line_size` and `addr + size`, both 2^64.
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
    h.access(1, rd(u64::MAX - 7));
    let r = h.access(0, wr(u64::MAX - 7));
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
    h.access(0, rd(u64::MAX - 7));
    h.access(0, rd(0)); // L2 evicts the last line
    assert!(!h.instance_contains(1, u64::MAX - 7));
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

/// A validated configuration whose `coherence_table` is huge makes
/// `Hierarchy::new` panic (`capacity * 2` overflow in LineTable::new).
#[test]
fn huge_coherence_table_passes_validation_then_panics() {
    let mut cfg = cfg_of(
        2,
        vec![
            lvl("L1i", 1, CacheKind::Instruction, 8 * 64, 2, 64),
            lvl("L1d", 1, CacheKind::Data, 8 * 64, 2, 64),
        ],
    );
    cfg.coherence_table = usize::MAX;
    assert!(cfg.validate().is_ok());
    let r = std::panic::catch_unwind(|| Hierarchy::new(&cfg).map(|_| ()));
    assert!(
        matches!(r, Ok(Err(_))),
        "expected a ConfigError, got a panic or Ok"
    );
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
