//! Property tests: invariants that must hold after any access sequence, and
//! agreement with small reference models written independently here.

use coldcache_sim::presets::Geometry;
use coldcache_sim::*;
use proptest::prelude::*;

/// A deliberately naive Cachegrind model, written from Cachegrind's
/// documented rules: per set a list in MRU order; an access straddling two
/// lines is one reference that misses if either line misses; LL is looked
/// up (for the whole range) only on an L1 miss.
struct NaiveCache {
    sets: Vec<Vec<u64>>,
    assoc: usize,
    line_bits: u32,
}

impl NaiveCache {
    fn new(g: Geometry) -> Self {
        let nsets = (g.size / u64::from(g.assoc) / u64::from(g.line)) as usize;
        NaiveCache {
            sets: vec![Vec::new(); nsets],
            assoc: g.assoc as usize,
            line_bits: g.line.trailing_zeros(),
        }
    }
    fn ref_line(&mut self, block: u64) -> bool {
        let n = self.sets.len() as u64;
        let set = &mut self.sets[(block % n) as usize];
        if let Some(p) = set.iter().position(|&b| b == block) {
            set.remove(p);
            set.insert(0, block);
            true
        } else {
            set.insert(0, block);
            set.truncate(self.assoc);
            false
        }
    }
    /// Returns true on a miss.
    fn doref(&mut self, addr: u64, size: u64) -> bool {
        let b1 = addr >> self.line_bits;
        let b2 = (addr + size - 1) >> self.line_bits;
        let mut miss = false;
        for b in b1..=b2 {
            miss |= !self.ref_line(b);
        }
        miss
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    I(u64, u64),
    R(u64, u64),
    W(u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    (0u8..3, 0u64..4096, 1u64..=16).prop_map(|(k, a, s)| match k {
        0 => Op::I(0x10_0000 + a, s.min(15)),
        1 => Op::R(a * 3, s),
        _ => Op::W(a * 5, s),
    })
}

fn geometry() -> impl Strategy<Value = Geometry> {
    (0u32..3, 1u32..5, 0u32..3).prop_map(|(ls, assoc, sets_log)| {
        let line = 16u32 << ls;
        Geometry::new(
            u64::from(line) * u64::from(assoc) * (1u64 << sets_log),
            assoc,
            line,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn cachegrind_preset_agrees_with_a_naive_reference(
        i1 in geometry(), d1 in geometry(), ll_assoc in 1u32..9, ops in prop::collection::vec(op(), 1..600)
    ) {
        let ll = Geometry::new(64 * u64::from(ll_assoc) * 4, ll_assoc, 64);
        let mut h = Hierarchy::new(&presets::cachegrind(i1, d1, ll)).unwrap();
        // The preset runs on the lean engine: this checks it.
        prop_assert!(h.uses_lean_engine());
        let (mut ni, mut nd, mut nl) = (NaiveCache::new(i1), NaiveCache::new(d1), NaiveCache::new(ll));
        let mut want = [0u64; 9]; // Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
        let mut got = [0u64; 9];
        for o in ops {
            let (base, addr, size, kind) = match o {
                Op::I(a, s) => (0, a, s, AccessKind::InstrFetch),
                Op::R(a, s) => (3, a, s, AccessKind::Read),
                Op::W(a, s) => (6, a, s, AccessKind::Write),
            };
            want[base] += 1;
            let l1 = if base == 0 { &mut ni } else { &mut nd };
            if l1.doref(addr, size) {
                want[base + 1] += 1;
                if nl.doref(addr, size) {
                    want[base + 2] += 1;
                }
            }
            let r = h.access(0, Access::new(kind, addr, size as u32));
            got[base] += 1;
            if r.served_by.level() != Some(1) {
                got[base + 1] += 1;
            }
            if r.served_by.is_memory() {
                got[base + 2] += 1;
            }
        }
        prop_assert_eq!(got, want);
    }

    #[test]
    fn lru_with_one_set_is_fully_associative(
        lines in 1u64..12, seq in prop::collection::vec(0u64..24, 1..400)
    ) {
        let mut l = LevelConfig {
            name: "L1d".into(), level: 1, kind: CacheKind::Unified, size: lines * 64,
            line_size: 64, assoc: lines as u32, policy: ReplacementPolicy::Lru,
            write: WritePolicy::WriteBack, inclusion: Inclusion::NonInclusive,
            sharing: Sharing::Core, latency: None,
        };
        l.size = lines * 64;
        let cfg = HierarchyConfig { cores: 1, levels: vec![l], coherence: false, ..HierarchyConfig::default() };
        let mut h = Hierarchy::new(&cfg).unwrap();
        // Reference: stack distance. A reference hits a fully-associative
        // LRU cache of N lines iff fewer than N distinct lines were touched
        // since its previous reference.
        for (i, &x) in seq.iter().enumerate() {
            let prev = seq[..i].iter().rposition(|&y| y == x);
            let expect_hit = match prev {
                None => false,
                Some(p) => {
                    let mut d: Vec<u64> = seq[p + 1..i].to_vec();
                    d.sort_unstable();
                    d.dedup();
                    (d.len() as u64) < lines
                }
            };
            let hit = h.access(0, Access::new(AccessKind::Read, x * 64, 4)).served_by.level() == Some(1);
            prop_assert_eq!(hit, expect_hit, "reference {} to line {}", i, x);
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct MOp {
    core: usize,
    kind: AccessKind,
    addr: u64,
    size: u32,
}

fn mop(cores: usize) -> impl Strategy<Value = MOp> {
    (0..cores, 0u8..10, 0u64..6000, 1u32..=64).prop_map(|(core, k, a, size)| {
        let kind = match k {
            0 | 1 => AccessKind::InstrFetch,
            2..=4 => AccessKind::Read,
            5 | 6 => AccessKind::Write,
            7 => AccessKind::ReadModifyWrite,
            8 => AccessKind::Prefetch,
            _ => {
                if a % 2 == 0 {
                    AccessKind::NonTemporalStore
                } else {
                    AccessKind::Flush
                }
            }
        };
        MOp {
            core,
            kind,
            addr: a * 8,
            size,
        }
    })
}

fn policy() -> impl Strategy<Value = ReplacementPolicy> {
    prop_oneof![
        Just(ReplacementPolicy::Lru),
        Just(ReplacementPolicy::TreePlru),
        Just(ReplacementPolicy::Fifo),
        Just(ReplacementPolicy::Random { seed: 7 }),
        Just(ReplacementPolicy::Srrip { bits: 2 }),
    ]
}

fn random_hierarchy(incl: Inclusion) -> impl Strategy<Value = HierarchyConfig> {
    (
        (policy(), policy(), policy()),
        (1u32..5, 1u32..9, 1u32..17),
        prop_oneof![Just(1usize), Just(2), Just(4)],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            move |((p1, p2, p3), (a1, a2, a3), cores, per_line, all_levels, prefetch)| {
                let l =
                    |name: &str, n: u8, kind, sets: u64, assoc: u32, policy, sharing| LevelConfig {
                        name: name.into(),
                        level: n,
                        kind,
                        size: sets * u64::from(assoc) * 64,
                        line_size: 64,
                        assoc,
                        policy,
                        write: WritePolicy::WriteBack,
                        inclusion: if n == 1 {
                            Inclusion::NonInclusive
                        } else {
                            incl
                        },
                        sharing,
                        latency: None,
                    };
                HierarchyConfig {
                    name: "random".into(),
                    cores,
                    levels: vec![
                        l("L1i", 1, CacheKind::Instruction, 2, a1, p1, Sharing::Core),
                        l("L1d", 1, CacheKind::Data, 3, a1, p1, Sharing::Core),
                        l(
                            "L2",
                            2,
                            CacheKind::Unified,
                            4,
                            a2,
                            p2,
                            Sharing::Group {
                                cores: cores.min(2),
                            },
                        ),
                        l("L3", 3, CacheKind::Unified, 5, a3, p3, Sharing::All),
                    ],
                    straddle: if per_line {
                        StraddleMode::PerLine
                    } else {
                        StraddleMode::Whole
                    },
                    lookup: if all_levels && incl != Inclusion::Exclusive {
                        LookupMode::AllLevels
                    } else {
                        LookupMode::OnMiss
                    },
                    coherence: true,
                    prefetchers: if prefetch {
                        vec![PrefetcherConfig {
                            kind: PrefetcherKind::NextLine { degree: 2 },
                            level: 2,
                            cross_page: false,
                        }]
                    } else {
                        Vec::new()
                    },
                    classify_misses: true,
                    ..HierarchyConfig::default()
                }
            },
        )
}

/// For every instance, the instances directly below it on some core's path.
fn lower_instances(h: &Hierarchy, upper: usize, below_level: u8) -> Vec<usize> {
    let infos = h.instances();
    let u = &infos[upper];
    infos
        .iter()
        .enumerate()
        .filter(|(_, x)| {
            x.level == below_level
                && x.first_core <= u.first_core
                && u.first_core + u.cores <= x.first_core + x.cores
                && (x.kind == CacheKind::Unified || x.kind == u.kind)
        })
        .map(|(i, _)| i)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn inclusive_levels_hold_every_line_above(cfg in random_hierarchy(Inclusion::Inclusive), ops in prop::collection::vec(mop(4), 1..500)) {
        let mut h = Hierarchy::new(&cfg).unwrap();
        for o in ops {
            h.access(o.core % cfg.cores, Access::new(o.kind, o.addr, o.size).with_ip(o.addr / 64));
        }
        let infos = h.instances();
        for (i, info) in infos.iter().enumerate() {
            for below_level in info.level + 1..=3 {
                for b in lower_instances(&h, i, below_level) {
                    for line in h.instance_lines(i) {
                        prop_assert!(h.instance_contains(b, line), "{} holds {:#x} but {} does not", info.name, line, infos[b].name);
                    }
                }
            }
        }
    }

    #[test]
    fn exclusive_levels_never_duplicate_a_single_cores_lines(cfg in random_hierarchy(Inclusion::Exclusive), ops in prop::collection::vec(mop(1), 1..500)) {
        let mut cfg = cfg;
        cfg.cores = 1;
        cfg.levels[2].sharing = Sharing::Core;
        let mut h = Hierarchy::new(&cfg).unwrap();
        let infos = h.instances();
        let l2 = infos.iter().position(|x| x.name == "L2").unwrap();
        let l3 = infos.iter().position(|x| x.name == "L3").unwrap();
        for (i, o) in ops.iter().enumerate() {
            h.access(0, Access::new(o.kind, o.addr, o.size));
            for line in h.instance_lines(l2) {
                prop_assert!(!h.instance_contains(l3, line), "{:#x} in both L2 and exclusive L3 after op {} {:?}", line, i, o);
            }
        }
    }

    #[test]
    fn counters_are_consistent_and_runs_are_deterministic(cfg in random_hierarchy(Inclusion::NonInclusive), ops in prop::collection::vec(mop(4), 1..400)) {
        let run = || {
            let mut h = Hierarchy::new(&cfg).unwrap();
            let mut served = [0u64; MAX_LEVELS + 1];
            for o in &ops {
                let r = h.access(o.core % cfg.cores, Access::new(o.kind, o.addr, o.size).with_ip(0x400 + o.addr % 3));
                for (s, n) in served.iter_mut().zip(r.per_slot()) {
                    *s += u64::from(n);
                }
            }
            (h.stats(), served)
        };
        let (a, sa) = run();
        let (b, sb) = run();
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(sa, sb);
        for s in &a.instances {
            prop_assert!(s.miss_count() <= s.accesses());
            prop_assert_eq!(s.misses.compulsory + s.misses.capacity + s.misses.conflict, s.miss_count());
        }
        let p = a.software_prefetch;
        prop_assert!(p.useful + p.wasted <= p.issued);
        prop_assert!(a.coherence.false_sharing <= a.coherence.invalidations);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The fast path must be invisible: a hierarchy that takes it and one
    /// that cannot (miss classification disables it and changes nothing
    /// else) give the same result for every access and the same counters.
    #[test]
    fn fast_path_is_exact(
        cfg in prop_oneof![
            random_hierarchy(Inclusion::NonInclusive),
            random_hierarchy(Inclusion::Inclusive),
            random_hierarchy(Inclusion::Exclusive),
        ],
        jaguar in any::<bool>(),
        ops in prop::collection::vec(mop(8), 1..600),
    ) {
        let mut fast_cfg = if jaguar { presets::jaguar() } else { cfg };
        fast_cfg.classify_misses = false;
        fast_cfg.prefetchers.clear();
        let mut slow_cfg = fast_cfg.clone();
        slow_cfg.classify_misses = true;
        let mut fast = Hierarchy::new(&fast_cfg).unwrap();
        let mut slow = Hierarchy::new(&slow_cfg).unwrap();
        for (i, o) in ops.iter().enumerate() {
            // Bias towards hits: revisit a small working set.
            let a = Access::new(o.kind, o.addr % 2048, o.size).with_ip(0x400);
            let core = o.core % fast_cfg.cores;
            prop_assert_eq!(fast.access(core, a), slow.access(core, a), "access {} {:?}", i, o);
        }
        let strip = |mut s: Stats| {
            for l in &mut s.instances {
                l.misses = MissClasses::default();
            }
            s
        };
        prop_assert_eq!(strip(fast.stats()), strip(slow.stats()));
        prop_assert_eq!(fast.line_sharing(), slow.line_sharing());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    /// Coherence: right after a write by core c, no cache off c's data path
    /// (other cores' private caches, other groups' shared ones) holds the
    /// line, however the simulator avoids redundant snoops.
    #[test]
    fn after_a_write_no_other_core_holds_the_line(
        cfg in prop_oneof![
            random_hierarchy(Inclusion::NonInclusive),
            random_hierarchy(Inclusion::Inclusive),
            random_hierarchy(Inclusion::Exclusive),
        ],
        jaguar in any::<bool>(),
        ops in prop::collection::vec(mop(8), 1..500),
    ) {
        let cfg = if jaguar { presets::jaguar() } else { cfg };
        let mut h = Hierarchy::new(&cfg).unwrap();
        let infos = h.instances();
        for (i, o) in ops.iter().enumerate() {
            let core = o.core % cfg.cores;
            let a = Access::new(o.kind, o.addr % 4096, o.size.min(8));
            h.access(core, a);
            if !matches!(o.kind, AccessKind::Write | AccessKind::ReadModifyWrite) || cfg.cores == 1 {
                continue;
            }
            for (t, info) in infos.iter().enumerate() {
                let shares_with_core = info.first_core <= core && core < info.first_core + info.cores;
                if shares_with_core {
                    continue; // the writer's own caches and the levels it shares
                }
                prop_assert!(
                    !h.instance_contains(t, a.addr),
                    "op {}: core {} wrote {:#x} but {} still holds it", i, core, a.addr, info.name
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// `access_batch` is `access` on each access in turn: the same results
    /// and the same counters, for plain hierarchies (which take the batch
    /// loop's own fast path) and every other kind, however the accesses
    /// are cut into batches.
    #[test]
    fn batch_is_exact(
        cfg in prop_oneof![
            random_hierarchy(Inclusion::NonInclusive),
            random_hierarchy(Inclusion::Inclusive),
            random_hierarchy(Inclusion::Exclusive),
        ],
        preset in 0u8..4,
        plain in any::<bool>(),
        ops in prop::collection::vec(mop(8), 1..600),
        cuts in prop::collection::vec(1usize..40, 1..40),
    ) {
        let mut cfg = match preset {
            0 => presets::jaguar(),
            1 => presets::cachegrind(
                Geometry::new(1024, 2, 64),
                Geometry::new(2048, 4, 64),
                Geometry::new(8192, 8, 64),
            ),
            _ => cfg,
        };
        cfg.classify_misses = false;
        if plain {
            cfg.coherence = false;
            cfg.lookup = LookupMode::OnMiss;
            cfg.prefetchers.clear();
        }
        let mut one = Hierarchy::new(&cfg).unwrap();
        let mut batched = Hierarchy::new(&cfg).unwrap();
        let accesses: Vec<(usize, Access)> = ops
            .iter()
            .map(|o| {
                let a = Access::new(o.kind, o.addr % 2048, o.size).with_ip(0x400 + o.addr % 3);
                (o.core % cfg.cores, a)
            })
            .collect();
        let want: Vec<AccessResult> = accesses.iter().map(|&(c, a)| one.access(c, a)).collect();
        // Cut into runs of one core, at most `cuts[j]` long.
        let mut got = vec![AccessResult::default(); accesses.len()];
        let cores: Vec<usize> = accesses.iter().map(|&(c, _)| c).collect();
        for (core, r) in cut_runs(&cores, &cuts) {
            let run: Vec<Access> = accesses[r.clone()].iter().map(|&(_, a)| a).collect();
            batched.access_batch(core, &run, &mut got[r]);
        }
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            prop_assert_eq!(g, w, "access {} {:?}", n, accesses[n]);
        }
        prop_assert_eq!(batched.stats(), one.stats());
        prop_assert_eq!(batched.line_sharing(), one.line_sharing());
        for t in 0..batched.instances().len() {
            let (mut a, mut b) = (batched.instance_lines(t), one.instance_lines(t));
            a.sort_unstable();
            b.sort_unstable();
            prop_assert_eq!(a, b, "instance {}", t);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The batch loop of coherent or all-levels hierarchies without
    /// hardware prefetchers (`jaguar`'s shape) decides first-level hits
    /// itself; it must be invisible. The truth is the same hierarchy with
    /// miss classification on, which disables every fast path (every
    /// access takes the full walk) and changes no result and no other
    /// counter, fed one access at a time; the batches are cut anywhere, on
    /// random hierarchies (sets not powers of two, 1 to 16 ways, any
    /// policy but SRRIP's, inclusive or not, per-line or whole straddles,
    /// 1, 2 or 4 cores) and on `jaguar`, with accesses biased to a small
    /// working set shared by the cores so that hits, owned writes and
    /// writes to shared lines all occur.
    #[test]
    fn coherent_batch_is_exact(
        cfg in prop_oneof![
            random_hierarchy(Inclusion::NonInclusive),
            random_hierarchy(Inclusion::Inclusive),
        ],
        jaguar in any::<bool>(),
        all_levels in any::<bool>(),
        coherent in any::<bool>(),
        ops in prop::collection::vec(mop(8), 1..600),
        cuts in prop::collection::vec(1usize..40, 1..40),
    ) {
        let mut cfg = if jaguar { presets::jaguar() } else { cfg };
        cfg.prefetchers.clear();
        if !jaguar {
            cfg.coherence = coherent;
            cfg.lookup = if all_levels { LookupMode::AllLevels } else { LookupMode::OnMiss };
            for l in &mut cfg.levels {
                if matches!(l.policy, ReplacementPolicy::Srrip { .. }) {
                    l.policy = ReplacementPolicy::Lru;
                }
            }
        }
        cfg.classify_misses = false;
        let mut slow_cfg = cfg.clone();
        slow_cfg.classify_misses = true;
        let mut slow = Hierarchy::new(&slow_cfg).unwrap();
        let mut batched = Hierarchy::new(&cfg).unwrap();
        let accesses: Vec<(usize, Access)> = ops
            .iter()
            .map(|o| {
                let a = Access::new(o.kind, o.addr % 2048, o.size.min(16)).with_ip(0x400);
                (o.core % cfg.cores, a)
            })
            .collect();
        let want: Vec<AccessResult> = accesses.iter().map(|&(c, a)| slow.access(c, a)).collect();
        let mut got = vec![AccessResult::default(); accesses.len()];
        let cores: Vec<usize> = accesses.iter().map(|&(c, _)| c).collect();
        for (core, r) in cut_runs(&cores, &cuts) {
            let run: Vec<Access> = accesses[r.clone()].iter().map(|&(_, a)| a).collect();
            batched.access_batch(core, &run, &mut got[r]);
        }
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            prop_assert_eq!(g, w, "access {} {:?}", n, accesses[n]);
        }
        let strip = |mut s: Stats| {
            for l in &mut s.instances {
                l.misses = MissClasses::default();
            }
            s
        };
        prop_assert_eq!(strip(batched.stats()), strip(slow.stats()));
        prop_assert_eq!(batched.line_sharing(), slow.line_sharing());
        for t in 0..batched.instances().len() {
            let (mut a, mut b) = (batched.instance_lines(t), slow.instance_lines(t));
            a.sort_unstable();
            b.sort_unstable();
            prop_assert_eq!(a, b, "instance {}", t);
        }
    }
}

/// A batch with a result buffer longer than the accesses fills only the
/// first results; one shorter is a caller bug and panics.
#[test]
fn batch_writes_one_result_per_access() {
    let mut h = Hierarchy::new(&presets::cachegrind_default()).unwrap();
    let a = [
        Access::new(AccessKind::Read, 0x1000, 8),
        Access::new(AccessKind::Read, 0x1008, 8),
    ];
    // A result unlike the default (memory) to find untouched.
    let mut other = Hierarchy::new(&presets::cachegrind_default()).unwrap();
    other.access(0, a[0]);
    let sentinel = other.access(0, a[0]);
    assert_ne!(sentinel, AccessResult::default());
    let mut out = [AccessResult::default(), AccessResult::default(), sentinel];
    h.access_batch(0, &a, &mut out);
    assert!(out[0].served_by.is_memory());
    assert_eq!(out[1].served_by.level(), Some(1));
    assert_eq!(out[2], sentinel);
    let short = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        h.access_batch(0, &a, &mut [AccessResult::default(); 1]);
    }));
    assert!(short.is_err());
}

/// A hierarchy of the lean engine's shape: a private first level per core
/// (split with the two halves' own geometry or one geometry, or unified),
/// and none or one
/// unified level below shared by every core; LRU; write-back; any number
/// of sets (not only powers of two), 1 to 32 ways (the general caches keep
/// time stamps above 16), lines of 4 to 128 bytes, the same at every
/// level or each its own.
fn lean_hierarchy() -> impl Strategy<Value = HierarchyConfig> {
    (
        (1u64..9, 1u32..33, 1u64..9, 1u32..33, 1u64..40, 1u32..33),
        (0u32..6, 0u32..6, 0u32..6, any::<bool>()),
        prop_oneof![Just(1usize), Just(2), Just(4)],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |((s1, a1, s2, a2, s3, a3), (g1, g2, g3, same), cores, split, two_levels, uniform)| {
                // Half the time, a first level of one geometry on both
                // sides with power-of-two sets and ways (the batch loop's
                // register-held path; 64 sets of 8 ways of 64-byte lines,
                // the `cachegrind` preset's, is its constant case).
                let (s1, a1, s2, a2, g1, g2, same) = if uniform {
                    let sets = if s1 == 8 { 64 } else { 1 << (s1 % 4) };
                    let ways = if s1 == 8 { 8 } else { 1 << (a1 % 6) };
                    let g = if s1 == 8 { 4 } else { g1 };
                    (sets, ways, sets, ways, g, g, false)
                } else {
                    (s1, a1, s2, a2, g1, g2, same)
                };
                let l = |name: &str, n: u8, kind, sets: u64, assoc: u32, sharing| {
                    let g = if same {
                        g1
                    } else {
                        // I1, then D1 or the unified first level, then L2.
                        [g1, g2, g3][match (n, kind) {
                            (1, CacheKind::Instruction) => 0,
                            (1, _) => 1,
                            _ => 2,
                        }]
                    };
                    let line = 4u32 << g;
                    LevelConfig {
                        name: name.into(),
                        level: n,
                        kind,
                        size: sets * u64::from(assoc) * u64::from(line),
                        line_size: line,
                        assoc,
                        policy: ReplacementPolicy::Lru,
                        write: WritePolicy::WriteBack,
                        inclusion: Inclusion::NonInclusive,
                        sharing,
                        latency: None,
                    }
                };
                let mut levels = if split {
                    vec![
                        l("I1", 1, CacheKind::Instruction, s1, a1, Sharing::Core),
                        l("D1", 1, CacheKind::Data, s2, a2, Sharing::Core),
                    ]
                } else {
                    vec![l("L1", 1, CacheKind::Unified, s2, a2, Sharing::Core)]
                };
                if two_levels {
                    levels.push(l("LL", 2, CacheKind::Unified, s3, a3, Sharing::All));
                }
                HierarchyConfig {
                    name: "lean".into(),
                    cores,
                    levels,
                    straddle: StraddleMode::Whole,
                    lookup: LookupMode::OnMiss,
                    coherence: false,
                    classify_misses: false,
                    ..HierarchyConfig::default()
                }
            },
        )
}

/// Runs of one core's accesses, cut anywhere: each run ends at a change
/// of core or after `cuts[j]` accesses (the `j`-th run, `cuts` repeating).
/// `cores[i]` is access `i`'s core; each run is (core, indices).
fn cut_runs(cores: &[usize], cuts: &[usize]) -> Vec<(usize, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cores.len() {
        let (core, limit) = (cores[i], cuts[out.len() % cuts.len()]);
        let mut end = i;
        while end < cores.len() && end - i < limit && cores[end] == core {
            end += 1;
        }
        out.push((core, i..end));
        i = end;
    }
    out
}

/// [`cut_runs`] of (core, access, row) triples, as `attribute_batch`
/// takes them: (core, accesses, rows).
fn attributed_runs(
    accesses: &[(usize, Access, u32)],
    cuts: &[usize],
) -> Vec<(usize, Vec<Access>, Vec<u32>)> {
    let cores: Vec<usize> = accesses.iter().map(|&(c, _, _)| c).collect();
    cut_runs(&cores, cuts)
        .into_iter()
        .map(|(core, r)| {
            let run = &accesses[r];
            (
                core,
                run.iter().map(|&(_, a, _)| a).collect(),
                run.iter().map(|&(_, _, r)| r).collect(),
            )
        })
        .collect()
}

/// `ops` as (core, access, row) triples: cores modulo `cores`, rows from
/// `row_of` in turn.
fn with_rows<'a>(
    ops: impl Iterator<Item = &'a MOp>,
    cores: usize,
    row_of: &[u32],
) -> Vec<(usize, Access, u32)> {
    ops.enumerate()
        .map(|(i, o)| {
            let a = Access::new(o.kind, o.addr, o.size).with_ip(0x400);
            (o.core % cores, a, row_of[i % row_of.len()])
        })
        .collect()
}

/// `accesses` (core, access, row) through `Driver::attribute` one by one
/// into a table of `rows` rows.
fn attributed_one_by_one(
    one: &mut Driver,
    accesses: &[(usize, Access, u32)],
    rows: usize,
) -> Vec<u64> {
    let len = one.layout().len();
    let mut want = vec![0u64; rows * len];
    for &(c, a, r) in accesses {
        let at = r as usize * len;
        one.attribute(c, a, &mut want[at..at + len]);
    }
    want
}

/// An access for the lean engine's tests: mostly demand kinds over a small
/// region (so sets fill, evict and hit further back than the most recent
/// way), some straddling several lines, some of size 0, some at the very
/// top of the address space; `other` lets a few prefetches, non-temporal
/// stores and flushes in, which hand the state to the general caches.
fn lean_op(cores: usize, other: bool) -> impl Strategy<Value = MOp> {
    (0..cores, 0u8..40, 0u64..3000, 0u32..=300, 0u8..50).prop_map(move |(core, k, a, size, top)| {
        let kind = match k {
            0..=9 => AccessKind::InstrFetch,
            10..=22 => AccessKind::Read,
            23..=31 => AccessKind::Write,
            32..=38 => AccessKind::ReadModifyWrite,
            _ if !other => AccessKind::Read,
            _ => [
                AccessKind::Prefetch,
                AccessKind::NonTemporalStore,
                AccessKind::Flush,
            ][a as usize % 3],
        };
        let size = if size > 64 { size % 9 } else { size };
        let addr = if top == 0 {
            u64::MAX - a % 300
        } else {
            a * 4 + u64::from(top % 3)
        };
        MOp {
            core,
            kind,
            addr,
            size,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The lean engine is exact: against the general caches and walks
    /// (`Hierarchy::new_general`) on hierarchies of its shape, every
    /// access's result, every counter and every instance's lines agree,
    /// one access at a time and through `access_batch` cut anywhere; and
    /// when a prefetch, non-temporal store or flush hands its state to the
    /// general caches mid-run, everything after agrees too.
    #[test]
    fn lean_engine_is_exact(
        cfg in lean_hierarchy(),
        other in any::<bool>(),
        ops in prop::collection::vec(lean_op(4, false), 1..800),
        more in prop::collection::vec(lean_op(4, true), 0..200),
        cuts in prop::collection::vec(1usize..60, 1..40),
    ) {
        prop_assert!(cfg.lean_shape(), "{:?}", cfg);
        let mut lean = Hierarchy::new(&cfg).unwrap();
        let mut batched = Hierarchy::new(&cfg).unwrap();
        let mut general = Hierarchy::new_general(&cfg).unwrap();
        prop_assert!(lean.uses_lean_engine() && batched.uses_lean_engine());
        prop_assert!(!general.uses_lean_engine());
        let tail = if other { &more[..] } else { &[][..] };
        let accesses: Vec<(usize, Access)> = ops
            .iter()
            .chain(tail)
            .map(|o| (o.core % cfg.cores, Access::new(o.kind, o.addr, o.size).with_ip(0x400)))
            .collect();
        let want: Vec<AccessResult> = accesses.iter().map(|&(c, a)| general.access(c, a)).collect();
        for (n, &(c, a)) in accesses.iter().enumerate() {
            prop_assert_eq!(lean.access(c, a), want[n], "access {} {:?}", n, a);
        }
        let mut got = vec![AccessResult::default(); accesses.len()];
        let cores: Vec<usize> = accesses.iter().map(|&(c, _)| c).collect();
        for (core, r) in cut_runs(&cores, &cuts) {
            let run: Vec<Access> = accesses[r.clone()].iter().map(|&(_, a)| a).collect();
            batched.access_batch(core, &run, &mut got[r]);
        }
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            prop_assert_eq!(g, w, "batched access {} {:?}", n, accesses[n]);
        }
        let handed_over = accesses.iter().any(|(_, a)| a.kind as usize > AccessKind::ReadModifyWrite as usize);
        prop_assert_eq!(lean.uses_lean_engine(), !handed_over);
        prop_assert_eq!(lean.stats(), general.stats());
        prop_assert_eq!(batched.stats(), general.stats());
        prop_assert_eq!(lean.level_totals(), general.level_totals());
        for t in 0..general.instances().len() {
            let mut w = general.instance_lines(t);
            w.sort_unstable();
            for h in [&lean, &batched] {
                let mut g = h.instance_lines(t);
                g.sort_unstable();
                prop_assert_eq!(&g, &w, "instance {}", t);
                for &line in &w {
                    prop_assert!(h.instance_contains(t, line));
                }
            }
        }
        // After a hand-over, the general caches hold the lean engine's
        // recency order and dirty bits: more traffic still agrees.
        for (n, o) in more.iter().enumerate() {
            let a = Access::new(o.kind, o.addr, o.size).with_ip(0x400);
            let c = o.core % cfg.cores;
            let w = general.access(c, a);
            prop_assert_eq!(lean.access(c, a), w, "later access {} {:?}", n, a);
            prop_assert_eq!(batched.access(c, a), w, "later access {} {:?}", n, a);
        }
        prop_assert_eq!(lean.stats(), general.stats());
        prop_assert_eq!(batched.stats(), general.stats());
    }

    /// The driver's batch entries on the lean engine (the batch loop adds
    /// each first-level hit to its row's dense cell and counts the hits
    /// for the tally itself), and `Driver::attribute_batch` on the general
    /// caches, are `Driver::attribute` on each access of the general caches
    /// in turn: every row, the tally and every counter agree, with batches
    /// cut anywhere, rows repeating, and a hand-over mid-batch.
    #[test]
    fn lean_driver_batches_are_exact(
        cfg in lean_hierarchy(),
        other in any::<bool>(),
        ops in prop::collection::vec(lean_op(4, false), 1..800),
        more in prop::collection::vec(lean_op(4, true), 0..200),
        cuts in prop::collection::vec(1usize..300, 1..40),
        row_of in prop::collection::vec(0u32..24, 1..64),
    ) {
        let mut one = Driver::with_hierarchy(Hierarchy::new_general(&cfg).unwrap());
        let mut rows_batch = Driver::new(&cfg).unwrap();
        let mut general_batch = Driver::with_hierarchy(Hierarchy::new_general(&cfg).unwrap());
        let mut tally_batch = Driver::new(&cfg).unwrap();
        prop_assert!(rows_batch.hierarchy().uses_lean_engine());
        let mut got = RowTable::new(one.layout());
        got.grow_to(24);
        let mut got_general = RowTable::new(one.layout());
        got_general.grow_to(24);
        let tail = if other { &more[..] } else { &[][..] };
        let accesses = with_rows(ops.iter().chain(tail), cfg.cores, &row_of);
        let want = attributed_one_by_one(&mut one, &accesses, 24);
        for (core, run, rows) in attributed_runs(&accesses, &cuts) {
            rows_batch.attribute_batch(core, &run, &rows, &mut got);
            general_batch.attribute_batch(core, &run, &rows, &mut got_general);
            tally_batch.access_batch(core, &run);
        }
        prop_assert_eq!(&got.into_rows(), &want);
        prop_assert_eq!(&got_general.into_rows(), &want);
        prop_assert_eq!(general_batch.tally(), one.tally());
        prop_assert_eq!(rows_batch.tally(), one.tally());
        prop_assert_eq!(tally_batch.tally(), one.tally());
        prop_assert_eq!(rows_batch.hierarchy().stats(), one.hierarchy().stats());
        prop_assert_eq!(tally_batch.hierarchy().stats(), one.hierarchy().stats());
    }
}

/// Instruction fetches that mostly follow one another through a few lines,
/// as a block's instructions do: the next fetch's address is the previous
/// one's end, now and then a jump elsewhere, with data accesses between.
fn fetch_run_ops(cores: usize, other: bool) -> impl Strategy<Value = Vec<MOp>> {
    prop::collection::vec((lean_op(cores, other), 0u8..10, 1u32..16), 1..800).prop_map(|v| {
        let mut next = 0x1000u64;
        v.into_iter()
            .map(|(o, pick, len)| match o.kind {
                AccessKind::InstrFetch if pick < 7 => {
                    let addr = next;
                    next = next.wrapping_add(u64::from(len));
                    MOp {
                        addr,
                        size: len,
                        ..o
                    }
                }
                AccessKind::InstrFetch => {
                    next = o.addr.wrapping_add(u64::from(o.size));
                    o
                }
                _ => o,
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `Driver::fetch` given the line the core's previous fetch ended in
    /// (`last`, kept per core across everything else, which the contract
    /// does not even ask for) counts a fetch within it as a hit without a
    /// look where the lean engine proves it one: every fetch's result, the
    /// tally and every counter equal `Driver::access` on the general
    /// caches, on split and unified first levels, and across a hand-over
    /// to the general caches.
    #[test]
    fn fetches_counted_by_their_last_line_are_exact(
        cfg in lean_hierarchy(),
        ops in fetch_run_ops(4, true),
    ) {
        let mut general = Driver::with_hierarchy(Hierarchy::new_general(&cfg).unwrap());
        let mut lean = Driver::new(&cfg).unwrap();
        prop_assert!(lean.hierarchy().uses_lean_engine());
        let mut last = vec![NO_LINE; cfg.cores];
        for (n, o) in ops.iter().enumerate() {
            let c = o.core % cfg.cores;
            let a = Access::new(o.kind, o.addr, o.size).with_ip(0x400);
            let want = general.access(c, a);
            // Every other fetch that `Driver::fetch_shift` says lies in
            // `last` is counted by `Driver::fetch_hits` instead, as the
            // replay counts a run of such fetches at once.
            let within = |shift: u32| {
                let end = o.addr.wrapping_add(u64::from(o.size.wrapping_sub(1)));
                last[c] != NO_LINE && o.addr >> shift == last[c] && end >> shift == last[c]
            };
            let got = match o.kind {
                AccessKind::InstrFetch
                    if n % 2 == 0 && lean.fetch_shift(c).is_some_and(within) =>
                {
                    lean.fetch_hits(c, 1);
                    AccessResult::L1_HIT
                }
                AccessKind::InstrFetch => lean.fetch(c, a, &mut last[c]).unwrap_or(AccessResult::L1_HIT),
                _ => lean.access(c, a),
            };
            prop_assert_eq!(got, want, "access {} {:?}", n, a);
        }
        prop_assert_eq!(lean.tally(), general.tally());
        prop_assert_eq!(lean.hierarchy().stats(), general.hierarchy().stats());
        prop_assert_eq!(lean.hierarchy().level_totals(), general.hierarchy().level_totals());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// `Driver::simulate_or_hit` is `Driver::simulate` with `None` for
    /// some plain first-level hits: on the lean engine, with and without
    /// line use, every access's result (`None` read as that hit), the
    /// tally and every counter equal `Driver::simulate`'s on a second
    /// driver given the same accesses.
    #[test]
    fn simulate_or_hit_is_simulate(
        cfg in lean_hierarchy(),
        ops in prop::collection::vec(lean_op(4, true), 1..600),
        line_use in any::<bool>(),
    ) {
        let driver = || {
            let d = Driver::new(&cfg).unwrap();
            if line_use { d.with_line_use() } else { d }
        };
        let (mut want, mut got) = (driver(), driver());
        for (n, o) in ops.iter().enumerate() {
            let c = o.core % cfg.cores;
            let a = Access::new(o.kind, o.addr, o.size).with_ip(0x400);
            let w = want.simulate(c, a);
            let g = got.simulate_or_hit(c, a).unwrap_or(AccessResult::L1_HIT);
            prop_assert_eq!(g, w, "access {} {:?}", n, a);
        }
        prop_assert_eq!(got.tally(), want.tally());
        prop_assert_eq!(got.hierarchy().stats(), want.hierarchy().stats());
    }
}

/// By hand, on Cachegrind's default geometry: a 4-byte fetch at 0x1000
/// misses to memory; the next fifteen fetches of 4 bytes fill the line
/// (0x1004..0x1040), each a hit, counted at once by `Driver::fetch_hits`:
/// the tally and the first level's counters are those of sixteen
/// `Driver::fetch` calls, and of the general caches.
#[test]
fn a_run_of_fetches_in_the_last_line_counts_as_its_hits() {
    let cfg = coldcache_sim::presets::cachegrind_default();
    let mut general = Driver::with_hierarchy(Hierarchy::new_general(&cfg).unwrap());
    let (mut one_by_one, mut at_once) = (Driver::new(&cfg).unwrap(), Driver::new(&cfg).unwrap());
    let (mut last_a, mut last_b) = (NO_LINE, NO_LINE);
    let fetch = |addr: u64| Access::new(AccessKind::InstrFetch, addr, 4).with_ip(addr);
    for addr in (0x1000..0x1040).step_by(4) {
        general.access(0, fetch(addr));
        one_by_one.fetch(0, fetch(addr), &mut last_a);
    }
    assert!(
        at_once.fetch(0, fetch(0x1000), &mut last_b).is_some(),
        "a miss"
    );
    let shift = at_once.fetch_shift(0).expect("the lean engine");
    assert_eq!((shift, last_b), (6, 0x1000 >> 6));
    at_once.fetch_hits(0, 15);
    let t = at_once.tally();
    assert_eq!(t.of(AccessKind::InstrFetch), 16);
    assert_eq!(t.served_at(AccessKind::InstrFetch, ServedBy::L1.slot()), 15);
    assert_eq!(t, one_by_one.tally());
    assert_eq!(t, general.tally());
    assert_eq!(at_once.hierarchy().stats(), general.hierarchy().stats());
}

/// A hierarchy of the Jaguar engine's shape: per core a private
/// instruction and data first level, one unified inclusive second level
/// per module (of 1, 2 or 4 cores, or all of them); LRU; write-back; any
/// number of sets (not only powers of two), 1 to 16 ways, one line size
/// of 4 to 64 bytes; 1, 2, 4 or 8 cores; coherence and all-levels lookup
/// each on or off.
fn jaguar_hierarchy() -> impl Strategy<Value = HierarchyConfig> {
    (
        (1u64..9, 1u32..17, 1u64..9, 1u32..17, 1u64..40, 1u32..17),
        0u32..5,
        prop_oneof![Just(1usize), Just(2), Just(4), Just(8)],
        prop_oneof![Just(1usize), Just(2), Just(4), Just(0)],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |((s1, a1, s2, a2, s3, a3), g, cores, module, coherent, all_levels)| {
                let line = 4u32 << g;
                let l = |name: &str, n: u8, kind, sets: u64, assoc: u32, sharing, inclusion| {
                    LevelConfig {
                        name: name.into(),
                        level: n,
                        kind,
                        size: sets * u64::from(assoc) * u64::from(line),
                        line_size: line,
                        assoc,
                        policy: ReplacementPolicy::Lru,
                        write: WritePolicy::WriteBack,
                        inclusion,
                        sharing,
                        latency: None,
                    }
                };
                let sharing = if module == 0 || module >= cores {
                    Sharing::All
                } else {
                    Sharing::Group { cores: module }
                };
                let ni = Inclusion::NonInclusive;
                HierarchyConfig {
                    name: "jaguar-shaped".into(),
                    cores,
                    levels: vec![
                        l("I1", 1, CacheKind::Instruction, s1, a1, Sharing::Core, ni),
                        l("D1", 1, CacheKind::Data, s2, a2, Sharing::Core, ni),
                        l(
                            "L2",
                            2,
                            CacheKind::Unified,
                            s3,
                            a3,
                            sharing,
                            Inclusion::Inclusive,
                        ),
                    ],
                    straddle: StraddleMode::PerLine,
                    lookup: if all_levels {
                        LookupMode::AllLevels
                    } else {
                        LookupMode::OnMiss
                    },
                    coherence: coherent,
                    classify_misses: false,
                    ..HierarchyConfig::default()
                }
            },
        )
}

/// An access for the Jaguar engine's tests: mostly demand kinds, half
/// over a small region every core uses (shared lines: ping-pong writes,
/// false sharing) and half over a region of the core's own (private
/// lines), some straddling lines, some of size 0, a few at the very top of
/// the address space; `other` lets a few prefetches, non-temporal stores
/// and flushes in, which hand the state to the general caches.
fn jaguar_op(other: bool) -> impl Strategy<Value = MOp> {
    (
        0usize..8,
        0u8..40,
        0u64..1500,
        0u32..=200,
        0u8..60,
        any::<bool>(),
    )
        .prop_map(move |(core, k, a, size, top, shared)| {
            let kind = match k {
                0..=7 => AccessKind::InstrFetch,
                8..=21 => AccessKind::Read,
                22..=31 => AccessKind::Write,
                32..=38 => AccessKind::ReadModifyWrite,
                _ if !other => AccessKind::Read,
                _ => [
                    AccessKind::Prefetch,
                    AccessKind::NonTemporalStore,
                    AccessKind::Flush,
                ][a as usize % 3],
            };
            let size = if size > 40 { size % 9 } else { size };
            let addr = if top == 0 {
                u64::MAX - a % 300
            } else if shared {
                a * 2 + u64::from(top % 3)
            } else {
                ((core as u64 + 1) << 20) + a * 4 + u64::from(top % 3)
            };
            MOp {
                core,
                kind,
                addr,
                size,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The Jaguar engine is exact: against the general caches and walks
    /// (`Hierarchy::new_general`) on hierarchies of its shape and on the
    /// `jaguar` preset's geometry (with and without coherence and
    /// all-levels lookup), every access's result, every counter (coherence
    /// included), the per-line sharing figures and every instance's lines
    /// agree, one access at a time and through `access_batch` cut
    /// anywhere; and when a prefetch, non-temporal store or flush hands
    /// its state to the general caches mid-run, everything after agrees
    /// too.
    #[test]
    fn jaguar_engine_is_exact(
        cfg in jaguar_hierarchy(),
        preset in 0u8..4,
        other in any::<bool>(),
        ops in prop::collection::vec(jaguar_op(false), 1..800),
        more in prop::collection::vec(jaguar_op(true), 0..200),
        cuts in prop::collection::vec(1usize..60, 1..40),
    ) {
        // The preset's geometry (the batch loop's constants), with the
        // generated lookup and coherence: each of the loop's four
        // compilations.
        let cfg = if preset == 0 {
            HierarchyConfig { lookup: cfg.lookup, coherence: cfg.coherence, ..presets::jaguar() }
        } else {
            cfg
        };
        prop_assert!(cfg.jaguar_shape(), "{:?}", cfg);
        let mut single = Hierarchy::new(&cfg).unwrap();
        let mut batched = Hierarchy::new(&cfg).unwrap();
        let mut general = Hierarchy::new_general(&cfg).unwrap();
        prop_assert!(single.uses_jaguar_engine() && batched.uses_jaguar_engine());
        prop_assert!(!general.uses_jaguar_engine());
        let tail = if other { &more[..] } else { &[][..] };
        let accesses: Vec<(usize, Access)> = ops
            .iter()
            .chain(tail)
            .map(|o| (o.core % cfg.cores, Access::new(o.kind, o.addr, o.size).with_ip(0x400)))
            .collect();
        let want: Vec<AccessResult> = accesses.iter().map(|&(c, a)| general.access(c, a)).collect();
        for (n, &(c, a)) in accesses.iter().enumerate() {
            prop_assert_eq!(single.access(c, a), want[n], "access {} {:?} core {}", n, a, c);
        }
        let mut got = vec![AccessResult::default(); accesses.len()];
        let cores: Vec<usize> = accesses.iter().map(|&(c, _)| c).collect();
        for (core, r) in cut_runs(&cores, &cuts) {
            let run: Vec<Access> = accesses[r.clone()].iter().map(|&(_, a)| a).collect();
            batched.access_batch(core, &run, &mut got[r]);
        }
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            prop_assert_eq!(g, w, "batched access {} {:?}", n, accesses[n]);
        }
        let handed_over = accesses.iter().any(|(_, a)| a.kind as usize > AccessKind::ReadModifyWrite as usize);
        prop_assert_eq!(single.uses_jaguar_engine(), !handed_over);
        prop_assert_eq!(batched.uses_jaguar_engine(), !handed_over);
        for h in [&single, &batched] {
            prop_assert_eq!(h.stats(), general.stats());
            prop_assert_eq!(h.level_totals(), general.level_totals());
            prop_assert_eq!(h.line_sharing(), general.line_sharing());
        }
        for t in 0..general.instances().len() {
            let mut w = general.instance_lines(t);
            w.sort_unstable();
            for h in [&single, &batched] {
                let mut g = h.instance_lines(t);
                g.sort_unstable();
                prop_assert_eq!(&g, &w, "instance {}", t);
                for &line in &w {
                    prop_assert!(h.instance_contains(t, line));
                }
            }
        }
        // After a hand-over, the general caches hold the engine's recency
        // order, dirty bits and bytes touched: more traffic still agrees.
        for (n, o) in more.iter().enumerate() {
            let a = Access::new(o.kind, o.addr, o.size).with_ip(0x400);
            let c = o.core % cfg.cores;
            let w = general.access(c, a);
            prop_assert_eq!(single.access(c, a), w, "later access {} {:?}", n, a);
            prop_assert_eq!(batched.access(c, a), w, "later access {} {:?}", n, a);
        }
        for h in [&single, &batched] {
            prop_assert_eq!(h.stats(), general.stats());
            prop_assert_eq!(h.line_sharing(), general.line_sharing());
        }
    }

    /// `Driver::attribute_batch` on the Jaguar engine (coherence and
    /// straddles counted per line: results with invalidations, false
    /// sharing and several lines, counted into the dense cells or the
    /// wide rows) is `Driver::attribute` on each access of the general
    /// caches in turn: every row, the tally and every counter agree, with
    /// batches cut anywhere, rows repeating, and a hand-over mid-batch.
    #[test]
    fn jaguar_driver_batches_are_exact(
        cfg in jaguar_hierarchy(),
        other in any::<bool>(),
        ops in prop::collection::vec(jaguar_op(false), 1..800),
        more in prop::collection::vec(jaguar_op(true), 0..200),
        cuts in prop::collection::vec(1usize..60, 1..40),
        row_of in prop::collection::vec(0u32..24, 1..64),
    ) {
        let mut one = Driver::with_hierarchy(Hierarchy::new_general(&cfg).unwrap());
        let mut batched = Driver::new(&cfg).unwrap();
        prop_assert!(batched.hierarchy().uses_jaguar_engine());
        let mut got = RowTable::new(one.layout());
        got.grow_to(24);
        let tail = if other { &more[..] } else { &[][..] };
        let accesses = with_rows(ops.iter().chain(tail), cfg.cores, &row_of);
        let want = attributed_one_by_one(&mut one, &accesses, 24);
        for (core, run, rows) in attributed_runs(&accesses, &cuts) {
            batched.attribute_batch(core, &run, &rows, &mut got);
        }
        prop_assert_eq!(&got.into_rows(), &want);
        prop_assert_eq!(batched.tally(), one.tally());
        prop_assert_eq!(batched.hierarchy().stats(), one.hierarchy().stats());
    }
}
