//! coldcache-sim: a pure, deterministic simulator of multi-core cache
//! hierarchies.
//!
//! The simulator does no I/O and makes no OS calls: it is fed accesses and
//! returns which level served each one. One call per access,
//! [`Hierarchy::access`], is cheap enough to be made for every instruction a
//! traced program executes; [`Hierarchy::access_batch`] takes a run of one
//! core's accesses at once, with the same results.
//!
//! ```
//! use coldcache_sim::{presets, Access, AccessKind, Hierarchy};
//! let mut h = Hierarchy::new(&presets::cachegrind_default()).unwrap();
//! let first = h.access(0, Access::new(AccessKind::Read, 0x1000, 8));
//! let again = h.access(0, Access::new(AccessKind::Read, 0x1008, 8));
//! assert!(first.served_by.is_memory());
//! assert_eq!(again.served_by.level(), Some(1));
//! ```
//!
//! The design (see ARCHITECTURE.md): a [`Hierarchy`] owns one [`cache::Cache`]
//! per level *instance* (a per-core L1 exists once per core); each core has
//! two paths of instance indices, instruction and data, from L1 to the last
//! level. Coherence, inclusion and prefetchers are rules applied on top of
//! those paths. A hierarchy of Cachegrind's shape
//! ([`HierarchyConfig::lean_shape`]) runs on a leaner engine instead, and
//! one of the `jaguar` preset's shape ([`HierarchyConfig::jaguar_shape`])
//! on an engine of its own, each chosen once when the hierarchy is built,
//! with the same results and counters.
//!
//! # Invariants
//! - No I/O, no OS calls, no global state: the same accesses give the same
//!   results (random replacement uses a seeded generator).
//! - [`Hierarchy::access`] allocates nothing in steady state (queues and
//!   tables are reserved when the hierarchy is built) for accesses spanning
//!   up to 1024 lines, except with three-C miss classification, whose
//!   shadow uses hash maps. The capture engine relies on it
//!   (`tests/review.rs` counts allocations).
//! - No arithmetic reaches past the 64-bit address space: ends are
//!   inclusive (`tests/review.rs`).
//! - Fast paths are exact: one returns only when the full walk would have
//!   done the same, else it falls through, and a lookup miss changes no
//!   state; every engine and batch entry equals the general walk
//!   (`tests/properties.rs`).
//! - The `cachegrind` preset is exactly Cachegrind: LRU, write-allocate,
//!   the last level looked up only on a first-level miss, a straddling
//!   access counted once (`tests/properties.rs` against a naive model;
//!   `crates/cli/tests/oracle.rs` against Valgrind).
//! - Inclusive levels hold every line of the instances above them after
//!   any sequence; exclusive levels never duplicate a core's lines below
//!   them (`tests/properties.rs`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cache;
mod coherence;
pub mod config;
pub mod coremap;
pub mod counters;
mod driver;
mod hierarchy;
mod jaguar;
mod lean;
pub mod lineuse;
mod prefetch;
pub mod presets;
mod rows;
mod sets;
mod shadow;
pub mod stats;

pub use config::{
    CacheKind, ConfigError, HierarchyConfig, Inclusion, LevelConfig, LookupMode, PrefetcherConfig,
    PrefetcherKind, ReplacementPolicy, Sharing, StraddleMode, WritePolicy,
};
pub use coremap::CoreMap;
pub use counters::{CounterLayout, Side};
pub use driver::{Driver, Tally};
pub use hierarchy::{Hierarchy, InstanceInfo};
pub use lean::NO_LINE;
pub use rows::RowTable;
pub use stats::{CoherenceStats, LevelStats, LineSharing, MissClasses, PrefetchStats, Stats};

/// The most levels a hierarchy may have (L1 .. L7).
pub const MAX_LEVELS: usize = 7;

/// What an access does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum AccessKind {
    /// Instruction fetch (goes to the instruction side of split levels).
    InstrFetch = 0,
    /// Data load.
    Read = 1,
    /// Data store.
    Write = 2,
    /// A load and a store of the same bytes by one instruction (`add [m], r`,
    /// locked operations). Counted once, as one access that writes.
    ReadModifyWrite = 3,
    /// Software prefetch into the first level (`prefetcht0` and friends).
    Prefetch = 4,
    /// Non-temporal store: bypasses the caches and invalidates every copy.
    NonTemporalStore = 5,
    /// Cache-line flush (`clflush`): removes the line from every cache.
    Flush = 6,
}

impl AccessKind {
    /// Every kind, in discriminant order (`ALL[k as usize] == k`).
    pub const ALL: [AccessKind; 7] = [
        AccessKind::InstrFetch,
        AccessKind::Read,
        AccessKind::Write,
        AccessKind::ReadModifyWrite,
        AccessKind::Prefetch,
        AccessKind::NonTemporalStore,
        AccessKind::Flush,
    ];

    /// Whether the access modifies memory (and so triggers coherence).
    #[inline]
    pub fn writes(self) -> bool {
        matches!(
            self,
            AccessKind::Write | AccessKind::ReadModifyWrite | AccessKind::NonTemporalStore
        )
    }

    /// Short name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            AccessKind::InstrFetch => "ifetch",
            AccessKind::Read => "read",
            AccessKind::Write => "write",
            AccessKind::ReadModifyWrite => "rmw",
            AccessKind::Prefetch => "prefetch",
            AccessKind::NonTemporalStore => "nt_store",
            AccessKind::Flush => "flush",
        }
    }
}

/// One memory access by one core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// What the access does: decides the path (instruction or data side)
    /// and whether it writes.
    pub kind: AccessKind,
    /// First byte touched.
    pub addr: u64,
    /// Bytes touched (0 is treated as 1).
    pub size: u32,
    /// Address of the instruction making the access (for the IP-stride
    /// prefetcher and prefetch attribution); 0 when unknown.
    pub ip: u64,
}

impl Access {
    /// An access of `size` bytes at `addr` with no instruction address
    /// (`ip` 0).
    #[inline]
    pub fn new(kind: AccessKind, addr: u64, size: u32) -> Self {
        Access {
            kind,
            addr,
            size,
            ip: 0,
        }
    }
    /// The same access, made by the instruction at `ip`.
    #[inline]
    pub fn with_ip(mut self, ip: u64) -> Self {
        self.ip = ip;
        self
    }
}

/// Which level served an access: `1..=levels`, or main memory.
///
/// Never zero, so `Option<ServedBy>` and `Option<AccessResult>` cost nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServedBy(std::num::NonZeroU8);

impl ServedBy {
    /// Served by main memory (a miss in every level).
    pub const MEMORY: ServedBy = ServedBy(std::num::NonZeroU8::MAX);
    /// Served by the first level.
    pub const L1: ServedBy = ServedBy(std::num::NonZeroU8::MIN);

    /// Served by cache level `n` (1-based).
    ///
    /// # Panics
    /// If `n` is not in `1..=MAX_LEVELS`.
    #[inline]
    pub fn level_n(n: u8) -> ServedBy {
        assert!(n >= 1 && usize::from(n) <= MAX_LEVELS, "no cache level {n}");
        ServedBy(std::num::NonZeroU8::new(n).expect("checked above"))
    }
    /// The cache level that served the access, `None` for memory.
    #[inline]
    pub fn level(self) -> Option<u8> {
        (self != ServedBy::MEMORY).then_some(self.0.get())
    }
    /// Whether main memory served the access (it missed in every level).
    #[inline]
    pub fn is_memory(self) -> bool {
        self == ServedBy::MEMORY
    }
    /// Dense index for counter arrays: level `n` is `n - 1`, memory is
    /// `MAX_LEVELS`.
    #[inline]
    pub fn slot(self) -> usize {
        if self.is_memory() {
            MAX_LEVELS
        } else {
            usize::from(self.0.get()) - 1
        }
    }
    /// Inverse of [`ServedBy::slot`].
    #[inline]
    pub fn from_slot(slot: usize) -> ServedBy {
        if slot >= MAX_LEVELS {
            ServedBy::MEMORY
        } else {
            ServedBy::level_n(slot as u8 + 1)
        }
    }
}

impl std::fmt::Display for ServedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.level() {
            Some(n) => write!(f, "L{n}"),
            None => f.write_str("memory"),
        }
    }
}

/// What happened to a software prefetch when it was issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PrefetchIssue {
    /// Not a software prefetch.
    #[default]
    NotPrefetch,
    /// The line was already in the first level: the prefetch did nothing.
    Redundant,
    /// The line was brought in; whether it was useful or wasted is known
    /// later (see [`Hierarchy::drain_prefetch_outcomes`]).
    Issued,
}

/// The result of one [`Hierarchy::access`]: 16 bytes, returned in registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessResult {
    /// The level that served the access; for a straddling access, the
    /// farthest level any of its lines came from.
    pub served_by: ServedBy,
    /// For a software prefetch, whether it was issued or redundant;
    /// [`PrefetchIssue::NotPrefetch`] for every other kind.
    pub prefetch: PrefetchIssue,
    /// Invalidations this access sent to other caches (coherence).
    pub invalidations: u16,
    /// Of those, invalidations of lines whose bytes the other core touched
    /// were disjoint from the writer's: false sharing.
    pub false_sharing: u16,
    /// Lines counted per [`ServedBy::slot`], one byte each (saturating at 255).
    per_slot: u64,
}

impl Default for AccessResult {
    fn default() -> Self {
        AccessResult::new(ServedBy::MEMORY, 0)
    }
}

impl AccessResult {
    /// A plain first-level hit of one line: what [`Driver::fetch`] and
    /// [`Hierarchy`]'s quick looks mean by `None`.
    pub const L1_HIT: AccessResult = AccessResult::new(ServedBy::L1, 1);

    /// A result served by `s`, counting `lines` lines there.
    #[inline]
    pub(crate) const fn new(s: ServedBy, lines: u64) -> Self {
        let slot = if s.0.get() == u8::MAX {
            MAX_LEVELS
        } else {
            s.0.get() as usize - 1
        };
        AccessResult {
            served_by: s,
            prefetch: PrefetchIssue::NotPrefetch,
            invalidations: 0,
            false_sharing: 0,
            per_slot: (if lines > 255 { 255 } else { lines }) << (8 * slot),
        }
    }

    /// Counts one more line served by `s`.
    #[inline]
    pub(crate) fn add_line(&mut self, s: ServedBy) {
        let shift = 8 * s.slot();
        if (self.per_slot >> shift) & 0xFF != 0xFF {
            self.per_slot += 1 << shift;
        }
    }

    /// Lines served by the level at `slot` (see [`ServedBy::slot`]). In
    /// [`StraddleMode::Whole`] an access counts once, at `served_by`; in
    /// [`StraddleMode::PerLine`] every line it touches counts where it was
    /// found.
    #[inline]
    pub fn lines_at(&self, slot: usize) -> u32 {
        ((self.per_slot >> (8 * slot)) & 0xFF) as u32
    }

    /// Counts for every slot, `[L1, L2, .., memory]`.
    pub fn per_slot(&self) -> [u32; MAX_LEVELS + 1] {
        std::array::from_fn(|i| self.lines_at(i))
    }

    /// Whether all [`CounterLayout::add_access`] adds for this result is one
    /// first-level count of its side: served by the first level, no
    /// coherence traffic, not a prefetch.
    #[inline(always)]
    pub fn is_plain_first_level_hit(&self) -> bool {
        self.served_by == ServedBy::L1
            && self.invalidations == 0
            && self.false_sharing == 0
            && self.prefetch == PrefetchIssue::NotPrefetch
    }

    /// Whether exactly one line was counted, at [`served_by`](Self::served_by)
    /// (one compare, for hot paths that only need to know this).
    #[inline]
    pub fn is_single_line(&self) -> bool {
        self.per_slot == 1 << (8 * self.served_by.slot())
    }

    /// Lines counted in all.
    #[inline]
    pub fn lines(&self) -> u32 {
        self.per_slot
            .to_le_bytes()
            .iter()
            .map(|&b| u32::from(b))
            .sum()
    }
}

/// How a software prefetch turned out, reported once known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrefetchOutcome {
    /// The prefetched line was used by a demand access before eviction.
    Useful,
    /// The prefetched line was evicted or invalidated unused.
    Wasted,
}

/// A resolved software prefetch: the instruction that issued it and the outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrefetchResolution {
    /// Address of the prefetch instruction ([`Access::ip`] of the prefetch);
    /// 0 when unknown (only first-level data caches record it).
    pub ip: u64,
    /// The core that issued the prefetch.
    pub core: u16,
    /// Whether the prefetched line was used or lost.
    pub outcome: PrefetchOutcome,
}
