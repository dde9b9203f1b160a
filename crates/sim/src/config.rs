//! Configuration of a simulated cache hierarchy: levels, topology, policies,
//! prefetchers. Plain data, validated by [`HierarchyConfig::validate`]; the
//! `coldcache-config` crate builds these from presets, TOML files and sysfs.

use crate::MAX_LEVELS;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// What a cache holds: instructions, data, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum CacheKind {
    /// Instruction cache: serves only instruction fetches (the "I" half of a
    /// split level).
    Instruction,
    /// Data cache: serves every other access kind (the "D" half of a split
    /// level).
    Data,
    /// Holds instructions and data: on both paths of the cores it serves.
    Unified,
}

/// How a victim is chosen in a full set. Invalid ways are always filled first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "kind"))]
pub enum ReplacementPolicy {
    /// True least-recently-used.
    Lru,
    /// Binary-tree pseudo-LRU (the tree spans the next power of two of the
    /// associativity; branches with no real way are never chosen).
    TreePlru,
    /// First in, first out (hits do not change the order).
    Fifo,
    /// Uniformly random victim from a xorshift generator with a fixed seed.
    Random {
        /// Seed of the generator; the same seed gives the same victims.
        seed: u64,
    },
    /// Static re-reference interval prediction (Jaleel et al., 2010) with
    /// `bits`-bit re-reference prediction values; hit-priority promotion.
    Srrip {
        /// Width of the prediction value per way, 1..=7.
        bits: u8,
    },
}

/// Write policy of a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum WritePolicy {
    /// Write-back with write-allocate: writes mark the line dirty; evicting a
    /// dirty line counts a write-back and passes it to the level below.
    WriteBack,
    /// Write-through with no-write-allocate: a write miss does not allocate;
    /// every write is also sent to the level below.
    WriteThrough,
}

/// How a level relates to the levels above it (ignored for first levels).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Inclusion {
    /// Every line held above is also held here; evicting a line here
    /// back-invalidates it in every cache above that feeds into this one.
    Inclusive,
    /// Non-inclusive, non-exclusive: filled on a miss, evicted independently.
    NonInclusive,
    /// Exclusive (victim) cache: filled only by lines evicted from above; a hit
    /// moves the line up and removes it from here.
    Exclusive,
}

/// Which cores share one instance of a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "kind"))]
pub enum Sharing {
    /// One instance per core.
    Core,
    /// One instance per group of `cores` consecutive cores (a module or cluster).
    Group {
        /// Cores per instance; must divide the hierarchy's `cores`.
        cores: usize,
    },
    /// One instance shared by every core.
    All,
}

/// One level of the hierarchy, e.g. the L1 data caches or the shared L3.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct LevelConfig {
    /// Display name ("L1d", "L2", "LL").
    pub name: String,
    /// Level number, 1 for the first level. A level number may hold one
    /// unified level, or one instruction and one data level (split).
    pub level: u8,
    /// Instruction, data or unified: which accesses this level serves.
    pub kind: CacheKind,
    /// Capacity in bytes; must equal `line_size * assoc * sets` for a whole `sets`.
    pub size: u64,
    /// Line size in bytes, a power of two (1 is allowed, for Cache Lab).
    pub line_size: u32,
    /// Ways per set, any positive integer.
    pub assoc: u32,
    /// How a victim is chosen in a full set.
    pub policy: ReplacementPolicy,
    /// Write-back or write-through.
    pub write: WritePolicy,
    /// Relation to the levels above (ignored for a first level).
    pub inclusion: Inclusion,
    /// Which cores share one instance; the groups of a level must nest those
    /// of the level above.
    pub sharing: Sharing,
    /// Load-to-use latency in cycles, informative only (reports, probe).
    pub latency: Option<u32>,
}

impl LevelConfig {
    /// Number of sets (`size / (line_size * assoc)`), once validated.
    pub fn sets(&self) -> u64 {
        self.size / (u64::from(self.line_size) * u64::from(self.assoc))
    }
}

/// How an access that straddles cache lines is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum StraddleMode {
    /// Cachegrind: one access per level; it misses if any of its lines misses,
    /// and the whole access goes on to the next level.
    #[default]
    Whole,
    /// drcachesim: each line is a separate access, counted separately.
    PerLine,
}

/// When a level below the first is looked up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum LookupMode {
    /// Only on a miss in the level above (Cachegrind, real hardware).
    #[default]
    OnMiss,
    /// Every level on the path is looked up and its replacement state updated
    /// on every access (the CacheSim talk's Jaguar model). The access is served
    /// by the first level that hits.
    AllLevels,
}

/// A hardware prefetcher attached to the data side of one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "kind"))]
pub enum PrefetcherKind {
    /// On a demand miss to line X, prefetch X+1 .. X+degree.
    NextLine {
        /// Lines prefetched per miss, 1..=64.
        degree: u32,
    },
    /// A direct-mapped table of `entries` keyed by instruction address learns
    /// each instruction's stride; after two confirmations it prefetches
    /// `degree` strides starting `distance` strides ahead.
    IpStride {
        /// Entries of the direct-mapped table, 1..=2^20.
        entries: u32,
        /// Strides prefetched per trigger, 1..=64.
        degree: u32,
        /// How many strides ahead of the access the first prefetch lands.
        distance: u32,
    },
    /// Tracks up to `streams` ascending or descending miss streams, one per
    /// 4 KiB page; a confirmed stream prefetches `degree` lines starting
    /// `distance` lines ahead, never crossing its page.
    Stream {
        /// Streams tracked at once, 1..=2^20.
        streams: u32,
        /// Lines prefetched per trigger, 1..=64.
        degree: u32,
        /// How many lines ahead of the triggering line the first prefetch
        /// lands, in the stream's direction.
        distance: u32,
    },
}

/// One hardware prefetcher: its algorithm and the level it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct PrefetcherConfig {
    /// The algorithm and its table sizes.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub kind: PrefetcherKind,
    /// Level number the prefetcher observes and fills (data side).
    pub level: u8,
    /// Whether IP-stride and next-line may cross a 4 KiB page (stream never does).
    pub cross_page: bool,
}

/// A whole simulated machine.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct HierarchyConfig {
    /// Preset or file name, for reports.
    pub name: String,
    /// Number of simulated cores.
    pub cores: usize,
    /// Levels, in any order; validated for a consistent topology.
    pub levels: Vec<LevelConfig>,
    /// How an access that straddles cache lines is counted.
    pub straddle: StraddleMode,
    /// When levels below the first are looked up.
    pub lookup: LookupMode,
    /// Whether writes invalidate the line in caches off the writer's path.
    pub coherence: bool,
    /// Hardware prefetchers, any number per level.
    pub prefetchers: Vec<PrefetcherConfig>,
    /// A hardware prefetch is "late" when the demand access that uses it comes
    /// fewer than this many accesses (of the issuing core) after it was issued.
    pub prefetch_lag: u32,
    /// Classify misses as compulsory, capacity or conflict (costs a shadow
    /// fully-associative LRU cache per level instance).
    pub classify_misses: bool,
    /// Capacity of the per-line coherence statistics table (lines tracked);
    /// lines beyond it are counted in `CoherenceStats::untracked`.
    pub coherence_table: usize,
}

impl Default for HierarchyConfig {
    fn default() -> Self {
        HierarchyConfig {
            name: String::new(),
            cores: 1,
            levels: Vec::new(),
            straddle: StraddleMode::Whole,
            lookup: LookupMode::OnMiss,
            coherence: true,
            prefetchers: Vec::new(),
            prefetch_lag: 8,
            classify_misses: false,
            coherence_table: 1 << 16,
        }
    }
}

/// The most lines one cache instance may hold (64 GiB of 64-byte lines).
pub const MAX_LINES_PER_LEVEL: u64 = 1 << 30;
/// The most entries (IP-stride) or streams a prefetcher may track.
pub const MAX_PREFETCH_TABLE: u32 = 1 << 20;

/// The most lines the per-line coherence table may track.
pub const MAX_COHERENCE_TABLE: usize = 1 << 24;

/// A configuration problem, naming the key (`levels[1].assoc`) and the problem.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct ConfigError {
    /// The offending key as a path into the configuration
    /// (`levels[1].assoc`, `prefetchers[0].degree`, `cores`).
    pub key: String,
    /// What is wrong with its value, in words.
    pub problem: String,
}

fn err(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        problem: problem.into(),
    }
}

impl HierarchyConfig {
    /// Checks geometry and topology; every error names the offending key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cores == 0 {
            return Err(err("cores", "must be at least 1"));
        }
        if self.cores > 256 {
            return Err(err(
                "cores",
                format!("{} is more than the 256 supported", self.cores),
            ));
        }
        if self.levels.is_empty() {
            return Err(err("levels", "at least one level is required"));
        }
        let mut max_level = 0u8;
        for (i, l) in self.levels.iter().enumerate() {
            let k = |f: &str| format!("levels[{i}].{f}");
            if l.name.is_empty() {
                return Err(err(k("name"), "must not be empty"));
            }
            if l.level == 0 {
                return Err(err(k("level"), "level numbers start at 1"));
            }
            if !l.line_size.is_power_of_two() {
                return Err(err(
                    k("line_size"),
                    format!("{} is not a power of two", l.line_size),
                ));
            }
            if l.policy == ReplacementPolicy::TreePlru && l.assoc > 64 {
                return Err(err(k("policy"), "tree-PLRU supports at most 64 ways"));
            }
            if l.assoc == 0 || l.assoc > 65536 {
                return Err(err(k("assoc"), format!("{} is not in 1..=65536", l.assoc)));
            }
            let set_bytes = u64::from(l.line_size) * u64::from(l.assoc);
            if l.size == 0 || l.size % set_bytes != 0 {
                return Err(err(
                    k("size"),
                    format!(
                        "{} bytes is not a whole number of sets of {} ways x {} bytes",
                        l.size, l.assoc, l.line_size
                    ),
                ));
            }
            if l.sets() > (1 << 32) {
                return Err(err(k("size"), "more than 2^32 sets"));
            }
            if l.size / u64::from(l.line_size) > MAX_LINES_PER_LEVEL {
                return Err(err(
                    k("size"),
                    format!("more than {MAX_LINES_PER_LEVEL} lines in one cache"),
                ));
            }
            match l.policy {
                ReplacementPolicy::Srrip { bits } if !(1..=7).contains(&bits) => {
                    return Err(err(k("policy.bits"), format!("{bits} is not in 1..=7")));
                }
                _ => {}
            }
            match l.sharing {
                Sharing::Group { cores } if cores == 0 || !self.cores.is_multiple_of(cores) => {
                    return Err(err(
                        k("sharing.cores"),
                        format!(
                            "group of {cores} cores does not divide {} cores",
                            self.cores
                        ),
                    ));
                }
                _ => {}
            }
            if l.level == 1 && l.inclusion == Inclusion::Exclusive {
                return Err(err(k("inclusion"), "a first level cannot be exclusive"));
            }
            max_level = max_level.max(l.level);
        }
        if usize::from(max_level) > MAX_LEVELS {
            return Err(err(
                "levels",
                format!("at most {MAX_LEVELS} levels are supported"),
            ));
        }
        // Each level number holds one unified level or one I + one D level.
        let mut prev_group = 1usize;
        for n in 1..=max_level {
            let at: Vec<(usize, &LevelConfig)> = self
                .levels
                .iter()
                .enumerate()
                .filter(|(_, l)| l.level == n)
                .collect();
            let kinds: Vec<CacheKind> = at.iter().map(|(_, l)| l.kind).collect();
            let ok = matches!(
                kinds.as_slice(),
                [CacheKind::Unified]
                    | [CacheKind::Instruction, CacheKind::Data]
                    | [CacheKind::Data, CacheKind::Instruction]
            );
            if !ok {
                return Err(err(
                    "levels",
                    format!(
                        "level {n} must hold one unified cache or one instruction and one data cache, found {kinds:?}"
                    ),
                ));
            }
            for (i, l) in &at {
                let g = match l.sharing {
                    Sharing::Core => 1,
                    Sharing::Group { cores } => cores,
                    Sharing::All => self.cores,
                };
                if g % prev_group != 0 {
                    return Err(err(
                        format!("levels[{i}].sharing"),
                        format!(
                            "shared by groups of {g} cores, which does not nest the groups of {prev_group} cores above"
                        ),
                    ));
                }
                if n > 1 && l.kind != CacheKind::Unified && at.len() == 2 {
                    // split below L1 is allowed; inclusion applies per side
                }
            }
            prev_group = at
                .iter()
                .map(|(_, l)| match l.sharing {
                    Sharing::Core => 1,
                    Sharing::Group { cores } => cores,
                    Sharing::All => self.cores,
                })
                .max()
                .unwrap_or(1);
        }
        if self.coherence_table > MAX_COHERENCE_TABLE {
            return Err(err(
                "coherence_table",
                format!(
                    "{} lines is more than the {MAX_COHERENCE_TABLE} supported",
                    self.coherence_table
                ),
            ));
        }
        for (i, p) in self.prefetchers.iter().enumerate() {
            let k = |f: &str| format!("prefetchers[{i}].{f}");
            if p.level == 0 || p.level > max_level {
                return Err(err(
                    k("level"),
                    format!("no level {} in this hierarchy", p.level),
                ));
            }
            let (degree, ok_extra) = match p.kind {
                PrefetcherKind::NextLine { degree } => (degree, true),
                PrefetcherKind::IpStride {
                    entries, degree, ..
                } => (degree, (1..=MAX_PREFETCH_TABLE).contains(&entries)),
                PrefetcherKind::Stream {
                    streams, degree, ..
                } => (degree, (1..=MAX_PREFETCH_TABLE).contains(&streams)),
            };
            if degree == 0 || degree > 64 {
                return Err(err(k("degree"), format!("{degree} is not in 1..=64")));
            }
            if !ok_extra {
                return Err(err(
                    k("entries"),
                    format!("the table needs 1..={MAX_PREFETCH_TABLE} entries"),
                ));
            }
        }
        Ok(())
    }
}
