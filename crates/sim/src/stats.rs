//! Counters kept by the hierarchy: per level instance, per core, coherence
//! per line, prefetcher outcomes and miss classes.

#[cfg(feature = "serde")]
use serde::Serialize;

/// Three-C classification of misses (Hill's model): a compulsory miss is the
/// first reference to a line; a capacity miss also misses in a
/// fully-associative LRU cache of equal capacity; a conflict miss hits there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
pub struct MissClasses {
    pub compulsory: u64,
    pub capacity: u64,
    pub conflict: u64,
}

/// Prefetch counters. For software prefetches `redundant` counts prefetches
/// of lines already in the first level; for hardware prefetchers it counts
/// candidates dropped because the line was already present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
pub struct PrefetchStats {
    pub issued: u64,
    pub redundant: u64,
    pub useful: u64,
    /// Used by a demand access that came within `prefetch_lag` accesses of
    /// the prefetch (hardware prefetchers only).
    pub late: u64,
    pub wasted: u64,
}

/// Counters of one cache instance (one core's L1d, one module's L2, ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
pub struct LevelStats {
    /// Lookups by kind: instruction fetches, reads, writes (including
    /// read-modify-writes and write-throughs from above).
    pub ifetch: u64,
    pub ifetch_misses: u64,
    pub reads: u64,
    pub read_misses: u64,
    pub writes: u64,
    pub write_misses: u64,
    /// Valid lines replaced to make room.
    pub evictions: u64,
    /// Dirty lines written back to the level below (write-back levels).
    pub writebacks: u64,
    /// Writes passed through to the level below (write-through levels).
    pub write_throughs: u64,
    /// Lines removed because an inclusive level below evicted them.
    pub back_invalidations: u64,
    /// Lines removed by another core's write (coherence).
    pub invalidations_received: u64,
    /// Lines removed by non-temporal stores and flushes.
    pub flushed: u64,
    pub misses: MissClasses,
}

impl LevelStats {
    pub fn accesses(&self) -> u64 {
        self.ifetch + self.reads + self.writes
    }
    pub fn miss_count(&self) -> u64 {
        self.ifetch_misses + self.read_misses + self.write_misses
    }
    pub fn hits(&self) -> u64 {
        self.accesses() - self.miss_count()
    }
    pub fn add(&mut self, o: &LevelStats) {
        self.ifetch += o.ifetch;
        self.ifetch_misses += o.ifetch_misses;
        self.reads += o.reads;
        self.read_misses += o.read_misses;
        self.writes += o.writes;
        self.write_misses += o.write_misses;
        self.evictions += o.evictions;
        self.writebacks += o.writebacks;
        self.write_throughs += o.write_throughs;
        self.back_invalidations += o.back_invalidations;
        self.invalidations_received += o.invalidations_received;
        self.flushed += o.flushed;
        self.misses.compulsory += o.misses.compulsory;
        self.misses.capacity += o.misses.capacity;
        self.misses.conflict += o.misses.conflict;
    }
}

/// Coherence traffic of one line address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
pub struct LineSharing {
    /// Line address (byte address of its first byte).
    pub line: u64,
    /// Writes to this line that invalidated at least one other copy.
    pub sent: u64,
    /// Copies of this line invalidated.
    pub received: u64,
    /// Invalidations where writer and victim touched disjoint bytes.
    pub false_sharing: u64,
}

/// Coherence totals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
pub struct CoherenceStats {
    /// Per core: invalidating writes sent, copies invalidated by others.
    pub sent_by_core: Vec<u64>,
    pub received_by_core: Vec<u64>,
    pub invalidations: u64,
    pub false_sharing: u64,
    /// Invalidation events on lines that did not fit the per-line table.
    pub untracked: u64,
}

/// A snapshot of every counter of a hierarchy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
pub struct Stats {
    /// One entry per cache instance, in [`crate::Hierarchy::instances`] order.
    pub instances: Vec<LevelStats>,
    pub software_prefetch: PrefetchStats,
    pub hardware_prefetch: PrefetchStats,
    pub coherence: CoherenceStats,
    pub nt_stores: u64,
    pub flushes: u64,
    /// Software prefetch resolutions dropped because the caller did not drain
    /// them (counted, never lost silently).
    pub prefetch_events_dropped: u64,
}
