//! Hand-computed cases for the hierarchy rules: straddling, lookup order,
//! inclusion, write policies, coherence, prefetching, miss classes.

use coldcache_sim::*;

mod common;
use common::lvl;

fn two_level(
    l1_lines: u64,
    l1_assoc: u32,
    l2_lines: u64,
    l2_assoc: u32,
    incl: Inclusion,
) -> HierarchyConfig {
    let mut l2 = lvl("L2", 2, CacheKind::Unified, l2_lines * 64, l2_assoc, 64);
    l2.inclusion = incl;
    HierarchyConfig {
        name: "test".into(),
        cores: 1,
        levels: vec![
            lvl(
                "L1i",
                1,
                CacheKind::Instruction,
                l1_lines * 64,
                l1_assoc,
                64,
            ),
            lvl("L1d", 1, CacheKind::Data, l1_lines * 64, l1_assoc, 64),
            l2,
        ],
        coherence: false,
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

#[test]
fn straddling_access_counts_once_in_whole_mode_and_per_line_otherwise() {
    let mut cfg = two_level(4, 4, 16, 4, Inclusion::NonInclusive);
    let mut h = Hierarchy::new(&cfg).unwrap();
    // Prime line 0 only; an 8-byte read at 60 straddles lines 0 and 1.
    h.access(0, rd(0));
    let r = h.access(0, Access::new(AccessKind::Read, 60, 8));
    assert!(r.served_by.is_memory(), "a miss if either line misses");
    assert_eq!(r.lines(), 1);
    let l1d = h.level_totals()[1];
    assert_eq!((l1d.reads, l1d.read_misses), (2, 2));
    // The LL lookup covered both lines: both are now in L2.
    assert!(h.instance_contains(2, 0) && h.instance_contains(2, 64));

    cfg.straddle = StraddleMode::PerLine;
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, rd(0));
    let r = h.access(0, Access::new(AccessKind::Read, 60, 8));
    assert_eq!(r.lines_at(0), 1, "line 0 from L1");
    assert_eq!(r.lines_at(MAX_LEVELS), 1, "line 1 from memory");
    assert!(r.served_by.is_memory());
    assert_eq!(h.level_totals()[1].reads, 3);
}

#[test]
fn lower_level_is_looked_up_only_on_a_miss() {
    let cfg = two_level(4, 4, 16, 4, Inclusion::NonInclusive);
    let mut h = Hierarchy::new(&cfg).unwrap();
    for _ in 0..5 {
        h.access(0, rd(128));
    }
    let t = h.level_totals();
    assert_eq!((t[1].reads, t[1].read_misses), (5, 1));
    assert_eq!((t[2].reads, t[2].read_misses), (1, 1));
}

#[test]
fn all_levels_lookup_updates_every_level() {
    let mut cfg = two_level(4, 4, 16, 4, Inclusion::Inclusive);
    cfg.lookup = LookupMode::AllLevels;
    let mut h = Hierarchy::new(&cfg).unwrap();
    for _ in 0..5 {
        assert!(h.access(0, rd(128)).served_by.level() != Some(2));
    }
    let t = h.level_totals();
    assert_eq!((t[2].reads, t[2].read_misses), (5, 1));
}

#[test]
fn inclusive_level_back_invalidates_lines_above() {
    // L1d: 4 lines fully associative. L2: 2 lines, fully associative, inclusive.
    let cfg = two_level(4, 4, 2, 2, Inclusion::Inclusive);
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, rd(0)); // A
    h.access(0, rd(64)); // B
    h.access(0, rd(128)); // C: L2 evicts A -> A leaves L1 too
    assert!(!h.instance_contains(1, 0), "A back-invalidated from L1d");
    assert!(h.instance_contains(1, 64) && h.instance_contains(1, 128));
    assert_eq!(served(&mut h, 0, rd(0)), None, "A comes from memory again");
    assert_eq!(
        h.level_totals()[1].back_invalidations,
        2,
        "A, then B when A returned"
    );
}

#[test]
fn exclusive_level_holds_only_victims() {
    // L1d: 1 line. L2: 2 lines, exclusive (a victim cache).
    let cfg = two_level(1, 1, 2, 2, Inclusion::Exclusive);
    let mut h = Hierarchy::new(&cfg).unwrap();
    assert_eq!(served(&mut h, 0, rd(0)), None); // A: into L1 only
    assert!(!h.instance_contains(2, 0));
    assert_eq!(served(&mut h, 0, rd(64)), None); // B: A goes to L2
    assert!(h.instance_contains(2, 0) && !h.instance_contains(2, 64));
    assert_eq!(served(&mut h, 0, rd(0)), Some(2)); // A from L2, B to L2
    assert!(h.instance_contains(1, 0) && !h.instance_contains(2, 0));
    assert!(h.instance_contains(2, 64));
    assert_eq!(served(&mut h, 0, rd(64)), Some(2));
}

#[test]
fn write_back_counts_dirty_evictions() {
    let cfg = two_level(1, 1, 4, 4, Inclusion::NonInclusive);
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, wr(0)); // dirty A in L1
    h.access(0, rd(64)); // evicts dirty A: one write-back
    h.access(0, rd(128)); // evicts clean B: none
    let t = h.level_totals();
    assert_eq!(t[1].evictions, 2);
    assert_eq!(t[1].writebacks, 1);
}

#[test]
fn write_through_does_not_allocate_on_write_miss_and_passes_every_write_down() {
    let mut cfg = two_level(4, 4, 16, 4, Inclusion::NonInclusive);
    cfg.levels[1].write = WritePolicy::WriteThrough;
    let mut h = Hierarchy::new(&cfg).unwrap();
    assert_eq!(served(&mut h, 0, wr(0)), None);
    assert!(!h.instance_contains(1, 0), "no write-allocate in L1");
    assert!(h.instance_contains(2, 0), "the write-back L2 allocates");
    h.access(0, rd(0)); // L1 miss, L2 hit: now in L1
    assert_eq!(served(&mut h, 0, wr(0)), Some(1));
    let t = h.level_totals();
    assert_eq!(t[1].write_throughs, 2);
    assert_eq!((t[2].writes, t[2].write_misses), (2, 1));
    assert_eq!(t[1].writebacks, 0);
}

fn multicore(cores: usize, l2_sharing: Sharing) -> HierarchyConfig {
    let mut cfg = two_level(8, 2, 64, 8, Inclusion::Inclusive);
    cfg.cores = cores;
    cfg.levels[2].sharing = l2_sharing;
    cfg.coherence = true;
    cfg
}

#[test]
fn write_invalidates_other_cores_copies_and_detects_false_sharing() {
    let mut h = Hierarchy::new(&multicore(2, Sharing::All)).unwrap();
    // Core 1 reads bytes 0..8 of line 0; core 0 writes bytes 32..40: false sharing.
    h.access(1, rd(0));
    let r = h.access(0, Access::new(AccessKind::Write, 32, 8));
    assert_eq!((r.invalidations, r.false_sharing), (1, 1));
    let l1d1 = h
        .instances()
        .iter()
        .position(|i| i.name == "L1d#1")
        .unwrap();
    assert!(!h.instance_contains(l1d1, 0), "core 1's L1d lost the line");
    assert_eq!(
        served(&mut h, 1, rd(0)),
        Some(2),
        "core 1 re-reads from the shared L2"
    );
    // Core 0 writes again: core 1 touched bytes 0..8; core 0 now writes 0..8: true sharing.
    let r = h.access(0, Access::new(AccessKind::Write, 0, 8));
    assert_eq!((r.invalidations, r.false_sharing), (1, 0));
    // A second write with no one else touching the line sends nothing.
    let r = h.access(0, Access::new(AccessKind::Write, 0, 8));
    assert_eq!(r.invalidations, 0);
    let s = h.stats();
    assert_eq!(s.coherence.invalidations, 2);
    assert_eq!(s.coherence.false_sharing, 1);
    assert_eq!(s.coherence.sent_by_core, vec![2, 0]);
    assert_eq!(s.coherence.received_by_core, vec![0, 2]);
    let lines = h.line_sharing();
    assert_eq!(lines.len(), 1);
    assert_eq!(
        (
            lines[0].line,
            lines[0].sent,
            lines[0].received,
            lines[0].false_sharing
        ),
        (0, 2, 2, 1)
    );
}

#[test]
fn jaguar_write_invalidates_the_other_modules_l2_but_not_its_own() {
    let cfg = presets::jaguar();
    let mut h = Hierarchy::new(&cfg).unwrap();
    let infos = h.instances();
    let l2 = |m: usize| {
        infos
            .iter()
            .position(|i| i.name == format!("L2#{m}"))
            .unwrap()
    };
    let d1 = |c: usize| {
        infos
            .iter()
            .position(|i| i.name == format!("D1#{c}"))
            .unwrap()
    };
    h.access(1, rd(0x1000)); // module 0
    h.access(5, rd(0x1000)); // module 1
    assert!(h.instance_contains(l2(0), 0x1000) && h.instance_contains(l2(1), 0x1000));
    let r = h.access(0, wr(0x1000)); // core 0, module 0
    assert_eq!(
        r.invalidations, 3,
        "core 1's D1, core 5's D1, module 1's L2"
    );
    assert!(h.instance_contains(l2(0), 0x1000));
    assert!(!h.instance_contains(l2(1), 0x1000));
    assert!(!h.instance_contains(d1(1), 0x1000) && !h.instance_contains(d1(5), 0x1000));
    assert!(h.instance_contains(d1(0), 0x1000));
    // Core 1 re-reads from its module's L2; core 5 from memory.
    assert_eq!(served(&mut h, 1, rd(0x1000)), Some(2));
    assert_eq!(served(&mut h, 5, rd(0x1000)), None);
}

#[test]
fn software_prefetch_is_classified_redundant_useful_or_wasted() {
    let cfg = two_level(2, 2, 16, 4, Inclusion::NonInclusive);
    let mut h = Hierarchy::new(&cfg).unwrap();
    let pf = |a: u64| Access::new(AccessKind::Prefetch, a, 1).with_ip(0x400);
    assert_eq!(h.access(0, pf(0)).prefetch, PrefetchIssue::Issued);
    assert_eq!(h.access(0, pf(0)).prefetch, PrefetchIssue::Redundant);
    assert_eq!(served(&mut h, 0, rd(0)), Some(1)); // useful
    assert_eq!(h.access(0, pf(64)).prefetch, PrefetchIssue::Issued);
    h.access(0, rd(128)); // 2-way L1: evicts LRU line 0
    h.access(0, rd(192)); // evicts prefetched 64, unused: wasted
    let s = h.stats().software_prefetch;
    assert_eq!((s.issued, s.redundant, s.useful, s.wasted), (2, 1, 1, 1));
    let mut ev = Vec::new();
    h.drain_prefetch_outcomes(&mut ev);
    assert_eq!(
        ev,
        vec![
            PrefetchResolution {
                ip: 0x400,
                core: 0,
                outcome: PrefetchOutcome::Useful
            },
            PrefetchResolution {
                ip: 0x400,
                core: 0,
                outcome: PrefetchOutcome::Wasted
            },
        ]
    );
}

#[test]
fn non_temporal_store_and_flush_remove_every_copy() {
    let mut h = Hierarchy::new(&multicore(2, Sharing::All)).unwrap();
    h.access(0, wr(0));
    h.access(1, rd(0));
    let r = h.access(0, Access::new(AccessKind::NonTemporalStore, 0, 8));
    assert!(r.served_by.is_memory());
    assert_eq!(r.invalidations, 1, "core 1's copy");
    for i in 0..h.instances().len() {
        assert!(!h.instance_contains(i, 0));
    }
    h.access(1, rd(64));
    h.access(0, Access::new(AccessKind::Flush, 64, 1));
    for i in 0..h.instances().len() {
        assert!(!h.instance_contains(i, 64));
    }
    let s = h.stats();
    assert_eq!((s.nt_stores, s.flushes), (1, 1));
}

#[test]
fn next_line_prefetcher_turns_a_sequential_scan_into_hits() {
    let mut cfg = two_level(64, 8, 1024, 16, Inclusion::NonInclusive);
    cfg.prefetchers.push(PrefetcherConfig {
        kind: PrefetcherKind::NextLine { degree: 1 },
        level: 1,
        cross_page: false,
    });
    cfg.prefetch_lag = 0;
    let mut h = Hierarchy::new(&cfg).unwrap();
    let mut mem = 0;
    for i in 0..64u64 {
        if h.access(0, rd(i * 64)).served_by.is_memory() {
            mem += 1;
        }
    }
    // Page 0 holds lines 0..64: each miss (lines 0, 2, .., 62) prefetches the
    // next line, so every other line misses: 32 misses, 32 useful prefetches.
    let s = h.stats().hardware_prefetch;
    assert_eq!(mem, 32);
    assert_eq!(s.issued, 32);
    assert_eq!(s.useful, 32);
    assert_eq!(s.wasted, 0);
}

#[test]
fn late_prefetches_are_counted_with_a_lag() {
    let mut cfg = two_level(64, 8, 1024, 16, Inclusion::NonInclusive);
    cfg.prefetchers.push(PrefetcherConfig {
        kind: PrefetcherKind::NextLine { degree: 1 },
        level: 1,
        cross_page: false,
    });
    cfg.prefetch_lag = 4;
    let mut h = Hierarchy::new(&cfg).unwrap();
    for i in 0..64u64 {
        h.access(0, rd(i * 64));
    }
    let s = h.stats().hardware_prefetch;
    assert_eq!(
        s.late, 32,
        "each prefetched line is used by the very next access"
    );
    assert_eq!(s.useful, 0);
}

#[test]
fn three_c_classification_hand_computed() {
    // Direct-mapped L1d with 2 sets (2 lines); lines 0 and 2 conflict.
    let mut cfg = two_level(2, 1, 64, 8, Inclusion::NonInclusive);
    cfg.classify_misses = true;
    let mut h = Hierarchy::new(&cfg).unwrap();
    for a in [0u64, 128, 0, 64, 192, 256, 0] {
        h.access(0, rd(a));
    }
    // 0 comp, 128 comp (evicts 0), 0 conflict (FA-2 holds 0,128),
    // 64 comp, 192 comp, 256 comp, 0: FA-2 holds {192,256}: capacity.
    let m = h.level_totals()[1].misses;
    assert_eq!((m.compulsory, m.conflict, m.capacity), (5, 1, 1));
}

#[test]
fn non_power_of_two_sets_use_modulo() {
    // 3 sets x 1 way: line 0 and line 3 collide, lines 0 and 1 do not.
    let mut cfg = two_level(3, 1, 64, 8, Inclusion::NonInclusive);
    cfg.levels[1].size = 3 * 64;
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.access(0, rd(0));
    h.access(0, rd(64));
    assert_eq!(served(&mut h, 0, rd(0)), Some(1));
    h.access(0, rd(3 * 64));
    assert_eq!(served(&mut h, 0, rd(0)), Some(2));
}

/// Regression: an L1 victim queued behind a prefetch fill that evicted the
/// same line from the exclusive L2 was sunk into the exclusive L3 although
/// it had been refilled into L2: the line sat in both.
#[test]
fn stale_victim_refilled_by_a_prefetch_does_not_sink_into_an_exclusive_level() {
    let l = |name: &str, n: u8, kind, size, assoc, incl| LevelConfig {
        name: String::from(name),
        level: n,
        kind,
        size,
        line_size: 64,
        assoc,
        policy: ReplacementPolicy::Lru,
        write: WritePolicy::WriteBack,
        inclusion: incl,
        sharing: Sharing::Core,
        latency: None,
    };
    let cfg = HierarchyConfig {
        cores: 1,
        levels: vec![
            l(
                "L1i",
                1,
                CacheKind::Instruction,
                384,
                3,
                Inclusion::NonInclusive,
            ),
            l("L1d", 1, CacheKind::Data, 576, 3, Inclusion::NonInclusive),
            l("L2", 2, CacheKind::Unified, 512, 2, Inclusion::Exclusive),
            l("L3", 3, CacheKind::Unified, 320, 1, Inclusion::Exclusive),
        ],
        coherence: false,
        prefetchers: vec![PrefetcherConfig {
            kind: PrefetcherKind::NextLine { degree: 2 },
            level: 2,
            cross_page: false,
        }],
        ..HierarchyConfig::default()
    };
    let mut h = Hierarchy::new(&cfg).unwrap();
    for (a, s) in [(11400, 57), (16808, 25), (39680, 1), (25472, 1)] {
        h.access(0, Access::new(AccessKind::Read, a, s));
    }
    for line in h.instance_lines(2) {
        assert!(!h.instance_contains(3, line), "{line:#x} in L2 and L3");
    }
    assert!(h.instance_contains(2, 179 * 64));
}
