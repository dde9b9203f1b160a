//! Named cache configurations: the CacheSim talk's Jaguar, Cachegrind's model,
//! and current CPUs with published geometries. (The `host` preset reads sysfs
//! and so lives in `coldcache-config`.)

use crate::config::*;

/// Names accepted by [`by_name`], with a one-line description each.
pub const NAMES: &[(&str, &str)] = &[
    (
        "jaguar",
        "AMD Jaguar as in the CacheSim talk: 2 modules x 4 cores, inclusive 2 MiB L2 per module",
    ),
    (
        "cachegrind",
        "Valgrind Cachegrind's model: I1 + D1 + unified LL, LRU, LL looked up on L1 miss",
    ),
    (
        "sapphire-rapids",
        "Intel Xeon Sapphire Rapids (Golden Cove), 8 cores: 48 KiB L1d, 2 MiB L2, shared L3",
    ),
    (
        "zen4",
        "AMD Zen 4, one 8-core CCX: 32 KiB L1d, 1 MiB inclusive L2, 32 MiB victim L3",
    ),
];

/// A preset by name, or `None`.
pub fn by_name(name: &str) -> Option<HierarchyConfig> {
    match name {
        "jaguar" => Some(jaguar()),
        "cachegrind" => Some(cachegrind_default()),
        "sapphire-rapids" | "spr" => Some(sapphire_rapids()),
        "zen4" => Some(zen4()),
        _ => None,
    }
}

/// A cache geometry spelled as Valgrind spells it: size, associativity, line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Capacity in bytes.
    pub size: u64,
    /// Ways per set.
    pub assoc: u32,
    /// Line size in bytes.
    pub line: u32,
}

impl Geometry {
    /// `size` bytes, `assoc` ways, `line`-byte lines, in the order of
    /// Valgrind's `--D1=size,assoc,line`.
    pub const fn new(size: u64, assoc: u32, line: u32) -> Self {
        Geometry { size, assoc, line }
    }
}

#[allow(clippy::too_many_arguments)]
fn level(
    name: &str,
    n: u8,
    kind: CacheKind,
    g: Geometry,
    policy: ReplacementPolicy,
    inclusion: Inclusion,
    sharing: Sharing,
    latency: Option<u32>,
) -> LevelConfig {
    LevelConfig {
        name: name.to_string(),
        level: n,
        kind,
        size: g.size,
        line_size: g.line,
        assoc: g.assoc,
        policy,
        write: WritePolicy::WriteBack,
        inclusion,
        sharing,
        latency,
    }
}

/// The talk's Jaguar: two modules of four cores; per core a 32 KiB 8-way D1
/// and a 32 KiB 2-way I1; per module a 2 MiB 16-way inclusive L2; 64-byte
/// lines; LRU; every level looked up on every access; a write invalidates the
/// line in the other cores' L1s and in the other module's L2; a straddling
/// access counts each line.
pub fn jaguar() -> HierarchyConfig {
    use CacheKind::*;
    let lru = ReplacementPolicy::Lru;
    HierarchyConfig {
        name: "jaguar".into(),
        cores: 8,
        levels: vec![
            level(
                "I1",
                1,
                Instruction,
                Geometry::new(32 << 10, 2, 64),
                lru,
                Inclusion::NonInclusive,
                Sharing::Core,
                Some(3),
            ),
            level(
                "D1",
                1,
                Data,
                Geometry::new(32 << 10, 8, 64),
                lru,
                Inclusion::NonInclusive,
                Sharing::Core,
                Some(3),
            ),
            level(
                "L2",
                2,
                Unified,
                Geometry::new(2 << 20, 16, 64),
                lru,
                Inclusion::Inclusive,
                Sharing::Group { cores: 4 },
                Some(26),
            ),
        ],
        straddle: StraddleMode::PerLine,
        lookup: LookupMode::AllLevels,
        coherence: true,
        ..HierarchyConfig::default()
    }
}

/// Cachegrind's model with its fallback geometry (I1 32 KiB 8-way, D1 32 KiB
/// 8-way, LL 8 MiB 16-way, 64-byte lines). See [`cachegrind`].
pub fn cachegrind_default() -> HierarchyConfig {
    cachegrind(
        Geometry::new(32 << 10, 8, 64),
        Geometry::new(32 << 10, 8, 64),
        Geometry::new(8 << 20, 16, 64),
    )
}

/// Valgrind Cachegrind's model exactly: one core, split I1/D1 in front of a
/// unified LL; true LRU; write-allocate; the LL is looked up only on an L1
/// miss; an access straddling two lines counts once and misses if either
/// line misses. Cachegrind does not model write-backs, and neither do the
/// counters it reports: write-backs here never change what the LL holds.
///
/// One more Cachegrind rule belongs to the caller that maps trace records to
/// accesses: Cachegrind cuts every data access to its smallest line size
/// (only Valgrind's "dirty helper" accesses such as `fxsave` are ever that
/// wide); `coldcache sim` applies it to lackey traces with this preset.
pub fn cachegrind(i1: Geometry, d1: Geometry, ll: Geometry) -> HierarchyConfig {
    use CacheKind::*;
    let lru = ReplacementPolicy::Lru;
    HierarchyConfig {
        name: "cachegrind".into(),
        cores: 1,
        levels: vec![
            level(
                "I1",
                1,
                Instruction,
                i1,
                lru,
                Inclusion::NonInclusive,
                Sharing::Core,
                None,
            ),
            level(
                "D1",
                1,
                Data,
                d1,
                lru,
                Inclusion::NonInclusive,
                Sharing::Core,
                None,
            ),
            level(
                "LL",
                2,
                Unified,
                ll,
                lru,
                Inclusion::NonInclusive,
                Sharing::All,
                None,
            ),
        ],
        straddle: StraddleMode::Whole,
        lookup: LookupMode::OnMiss,
        coherence: false,
        ..HierarchyConfig::default()
    }
}

/// Intel Xeon Sapphire Rapids (Golden Cove cores), 8 cores of one socket.
/// Published geometry (Intel optimization manual, 2023): L1i 32 KiB 8-way,
/// L1d 48 KiB 12-way, L2 2 MiB 16-way per core, L3 1.875 MiB 15-way per core
/// (here 8 x 1.875 = 15 MiB shared), 64-byte lines, non-inclusive L3.
/// Intel does not publish the replacement policies: tree-PLRU for L1 and
/// SRRIP below are the usual approximations.
pub fn sapphire_rapids() -> HierarchyConfig {
    use CacheKind::*;
    let plru = ReplacementPolicy::TreePlru;
    let srrip = ReplacementPolicy::Srrip { bits: 2 };
    HierarchyConfig {
        name: "sapphire-rapids".into(),
        cores: 8,
        levels: vec![
            level(
                "L1i",
                1,
                Instruction,
                Geometry::new(32 << 10, 8, 64),
                plru,
                Inclusion::NonInclusive,
                Sharing::Core,
                Some(5),
            ),
            level(
                "L1d",
                1,
                Data,
                Geometry::new(48 << 10, 12, 64),
                plru,
                Inclusion::NonInclusive,
                Sharing::Core,
                Some(5),
            ),
            level(
                "L2",
                2,
                Unified,
                Geometry::new(2 << 20, 16, 64),
                srrip,
                Inclusion::NonInclusive,
                Sharing::Core,
                Some(16),
            ),
            level(
                "L3",
                3,
                Unified,
                Geometry::new(15 << 20, 15, 64),
                srrip,
                Inclusion::NonInclusive,
                Sharing::All,
                Some(70),
            ),
        ],
        straddle: StraddleMode::PerLine,
        lookup: LookupMode::OnMiss,
        coherence: true,
        ..HierarchyConfig::default()
    }
}

/// AMD Zen 4, one CCX of 8 cores. Published geometry (AMD software
/// optimization guide for family 19h): L1i 32 KiB 8-way, L1d 32 KiB 8-way,
/// L2 1 MiB 8-way per core inclusive of L1, L3 32 MiB 16-way shared by the
/// CCX and filled by L2 victims, 64-byte lines.
pub fn zen4() -> HierarchyConfig {
    use CacheKind::*;
    let plru = ReplacementPolicy::TreePlru;
    let lru = ReplacementPolicy::Lru;
    HierarchyConfig {
        name: "zen4".into(),
        cores: 8,
        levels: vec![
            level(
                "L1i",
                1,
                Instruction,
                Geometry::new(32 << 10, 8, 64),
                plru,
                Inclusion::NonInclusive,
                Sharing::Core,
                Some(4),
            ),
            level(
                "L1d",
                1,
                Data,
                Geometry::new(32 << 10, 8, 64),
                plru,
                Inclusion::NonInclusive,
                Sharing::Core,
                Some(4),
            ),
            level(
                "L2",
                2,
                Unified,
                Geometry::new(1 << 20, 8, 64),
                lru,
                Inclusion::Inclusive,
                Sharing::Core,
                Some(14),
            ),
            level(
                "L3",
                3,
                Unified,
                Geometry::new(32 << 20, 16, 64),
                lru,
                Inclusion::Exclusive,
                Sharing::All,
                Some(50),
            ),
        ],
        straddle: StraddleMode::PerLine,
        lookup: LookupMode::OnMiss,
        coherence: true,
        ..HierarchyConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_validates() {
        for (name, _) in NAMES {
            let c = by_name(name).unwrap();
            c.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn jaguar_geometry_matches_the_talk() {
        // Slide: I1 512 lines 2-way 256 sets; D1 512 lines 8-way 64 sets;
        // L2 32768 lines 16-way 2048 sets.
        let j = jaguar();
        let get = |n: &str| j.levels.iter().find(|l| l.name == n).unwrap();
        assert_eq!(get("I1").sets(), 256);
        assert_eq!(get("D1").sets(), 64);
        assert_eq!(get("L2").sets(), 2048);
        assert_eq!(j.cores, 8);
    }
}
