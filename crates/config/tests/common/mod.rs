//! Random valid configurations for the property tests: every field of
//! [`HierarchyConfig`] over its whole legal range (names of any characters,
//! seeds and latencies up to the type's maximum, any line size, sets not
//! powers of two, 1 to 7 levels split or unified, nested sharing groups,
//! prefetchers of every kind), valid by construction.
#![allow(dead_code)]

use coldcache_sim::config::{MAX_COHERENCE_TABLE, MAX_PREFETCH_TABLE};
use coldcache_sim::{
    CacheKind, HierarchyConfig, Inclusion, LevelConfig, LookupMode, PrefetcherConfig,
    PrefetcherKind, ReplacementPolicy, Sharing, StraddleMode, WritePolicy, MAX_LEVELS,
};
use proptest::prelude::*;

/// Any characters (quotes, backslashes, control characters, newlines,
/// non-ASCII), `min` to 12 of them.
fn text(min: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => any::<char>(),
            2 => prop::sample::select(vec!['"', '\\', '\'', '\n', '\r', '\t', '\u{0}', '\u{7f}', '\u{85}', '#', '=', ' ']),
            3 => prop::char::range('a', 'z'),
        ],
        min..12,
    )
    .prop_map(String::from_iter)
}

fn policy() -> impl Strategy<Value = ReplacementPolicy> {
    prop_oneof![
        Just(ReplacementPolicy::Lru),
        Just(ReplacementPolicy::TreePlru),
        Just(ReplacementPolicy::Fifo),
        any::<u64>().prop_map(|seed| ReplacementPolicy::Random { seed }),
        prop_oneof![Just(0u64), Just(u64::MAX)].prop_map(|seed| ReplacementPolicy::Random { seed }),
        (1u8..=7).prop_map(|bits| ReplacementPolicy::Srrip { bits }),
    ]
}

/// One cache of level `n`, without its sharing (the caller nests it).
fn cache(n: u8, kind: CacheKind) -> impl Strategy<Value = LevelConfig> {
    (
        text(1),
        0u32..=8,
        prop_oneof![4 => 1u32..=16, 1 => 17u32..=64, 1 => Just(1000u32)],
        prop_oneof![1u64..=12, 13u64..=5000, Just(1 << 20)],
        policy(),
        any::<bool>(),
        0u8..3,
        prop::option::of(any::<u32>()),
    )
        .prop_map(
            move |(name, line_log, assoc, sets, policy, through, incl, latency)| {
                let line = 1u32 << line_log;
                // Tree-PLRU takes at most 64 ways; keep the total lines in
                // the simulator's limit.
                let policy = if assoc > 64 && policy == ReplacementPolicy::TreePlru {
                    ReplacementPolicy::Lru
                } else {
                    policy
                };
                let sets = sets.min((1 << 30) / u64::from(assoc));
                LevelConfig {
                    name,
                    level: n,
                    kind,
                    size: sets * u64::from(assoc) * u64::from(line),
                    line_size: line,
                    assoc,
                    policy,
                    write: if through {
                        WritePolicy::WriteThrough
                    } else {
                        WritePolicy::WriteBack
                    },
                    inclusion: match incl {
                        _ if n == 1 => Inclusion::NonInclusive,
                        0 => Inclusion::NonInclusive,
                        1 => Inclusion::Inclusive,
                        _ => Inclusion::Exclusive,
                    },
                    sharing: Sharing::Core,
                    latency,
                }
            },
        )
}

/// The caches of level `n`: one unified, or an instruction and a data one.
fn level(n: u8) -> impl Strategy<Value = Vec<LevelConfig>> {
    prop_oneof![
        cache(n, CacheKind::Unified).prop_map(|l| vec![l]),
        (
            cache(n, CacheKind::Instruction),
            cache(n, CacheKind::Data),
            any::<bool>()
        )
            .prop_map(|(i, d, swap)| if swap { vec![d, i] } else { vec![i, d] }),
    ]
}

fn prefetcher(levels: u8) -> impl Strategy<Value = PrefetcherConfig> {
    let degree = prop_oneof![1u32..=4, 1u32..=64];
    let table = prop_oneof![1u32..=64, Just(MAX_PREFETCH_TABLE)];
    (
        1..=levels,
        prop_oneof![
            degree
                .clone()
                .prop_map(|degree| PrefetcherKind::NextLine { degree }),
            (table.clone(), degree.clone(), any::<u32>()).prop_map(
                |(entries, degree, distance)| {
                    PrefetcherKind::IpStride {
                        entries,
                        degree,
                        distance,
                    }
                }
            ),
            (table, degree, any::<u32>()).prop_map(|(streams, degree, distance)| {
                PrefetcherKind::Stream {
                    streams,
                    degree,
                    distance,
                }
            }),
        ],
        any::<bool>(),
    )
        .prop_map(|(level, kind, cross_page)| PrefetcherConfig {
            kind,
            level,
            cross_page,
        })
}

/// A valid configuration; `validate()` accepts it.
pub fn arb_config() -> impl Strategy<Value = HierarchyConfig> {
    let cores = prop_oneof![Just(1usize), Just(2), Just(4), Just(6), Just(8), Just(256)];
    (cores, 1..=MAX_LEVELS as u8)
        .prop_flat_map(|(cores, depth)| {
            (
                Just(cores),
                (1..=depth).map(level).collect::<Vec<_>>(),
                prop::collection::vec(any::<u8>(), depth as usize),
                prop::collection::vec(prefetcher(depth), 0..3),
                (
                    text(0),
                    any::<bool>(),
                    any::<bool>(),
                    any::<bool>(),
                    any::<bool>(),
                    any::<u32>(),
                    prop_oneof![Just(1usize << 16), 0..=MAX_COHERENCE_TABLE],
                ),
            )
        })
        .prop_map(|(cores, levels, groups, prefetchers, top)| {
            let (name, whole, all_levels, coherence, classify, lag, table) = top;
            // Sharing groups nest: each level's group is a multiple of
            // the one above and divides the cores.
            let mut prev = 1usize;
            let mut flat = Vec::new();
            for (mut caches, pick) in levels.into_iter().zip(groups) {
                let fits: Vec<usize> = (prev..=cores)
                    .filter(|g| g % prev == 0 && cores % g == 0)
                    .collect();
                let g = fits[usize::from(pick) % fits.len()];
                let sharing = match g {
                    1 if pick % 2 == 0 => Sharing::Core,
                    g if g == cores && pick % 3 == 0 => Sharing::All,
                    g => Sharing::Group { cores: g },
                };
                for c in &mut caches {
                    c.sharing = sharing;
                }
                prev = g;
                flat.extend(caches);
            }
            HierarchyConfig {
                name,
                cores,
                levels: flat,
                straddle: if whole {
                    StraddleMode::Whole
                } else {
                    StraddleMode::PerLine
                },
                lookup: if all_levels {
                    LookupMode::AllLevels
                } else {
                    LookupMode::OnMiss
                },
                coherence,
                prefetchers,
                prefetch_lag: lag,
                classify_misses: classify,
                coherence_table: table,
            }
        })
}
