//! Helpers shared by the simulator's integration tests.

use coldcache_sim::*;

/// A write-back, non-inclusive, per-core LRU level.
pub fn lvl(name: &str, n: u8, kind: CacheKind, size: u64, assoc: u32, line: u32) -> LevelConfig {
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
