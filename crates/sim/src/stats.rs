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
    /// Misses on the first reference to a line by this instance.
    pub compulsory: u64,
    /// Misses that a fully-associative LRU cache of the same capacity would
    /// also have taken.
    pub capacity: u64,
    /// Misses that a fully-associative LRU cache of the same capacity would
    /// have hit: caused by the set mapping or the replacement policy.
    pub conflict: u64,
}

/// Prefetch counters. For software prefetches `redundant` counts prefetches
/// of lines already in the first level; for hardware prefetchers it counts
/// candidates dropped because the line was already present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
pub struct PrefetchStats {
    /// Prefetches that fetched a line not yet in the cache they target.
    pub issued: u64,
    /// Prefetches dropped because the line was already there (see above).
    pub redundant: u64,
    /// Prefetched lines later used by a demand access (for hardware
    /// prefetchers, used after `prefetch_lag` accesses: not late).
    pub useful: u64,
    /// Used by a demand access that came within `prefetch_lag` accesses of
    /// the prefetch (hardware prefetchers only).
    pub late: u64,
    /// Prefetched lines evicted, invalidated or flushed before any demand
    /// access used them.
    pub wasted: u64,
}

/// Counters of one cache instance (one core's L1d, one module's L2, ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
pub struct LevelStats {
    /// Lookups by kind: instruction fetches, reads, writes (including
    /// read-modify-writes and write-throughs from above).
    pub ifetch: u64,
    /// Instruction fetches that missed in this instance.
    pub ifetch_misses: u64,
    /// Data lookups that do not write here: loads, and the fills below a
    /// write-back level for a write that level absorbs.
    pub reads: u64,
    /// Reads that missed in this instance.
    pub read_misses: u64,
    /// Lookups that write here: stores, read-modify-writes, and writes
    /// passed through from a write-through level above.
    pub writes: u64,
    /// Writes that missed in this instance.
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
    /// The misses split into compulsory, capacity and conflict; all zero
    /// unless the configuration sets `classify_misses`.
    pub misses: MissClasses,
}

impl LevelStats {
    /// Lookups of every kind: `ifetch + reads + writes`.
    pub fn accesses(&self) -> u64 {
        self.ifetch + self.reads + self.writes
    }
    /// Misses of every kind: `ifetch_misses + read_misses + write_misses`.
    pub fn miss_count(&self) -> u64 {
        self.ifetch_misses + self.read_misses + self.write_misses
    }
    /// Lookups that hit: [`accesses`](Self::accesses) minus
    /// [`miss_count`](Self::miss_count).
    pub fn hits(&self) -> u64 {
        self.accesses() - self.miss_count()
    }
    /// Adds every counter of `o` to this one (used to total the instances
    /// of one level).
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
    /// Per core: writes (and non-temporal stores) by that core that
    /// invalidated at least one copy elsewhere.
    pub sent_by_core: Vec<u64>,
    /// Per core: lines removed from that core's private caches by other
    /// cores' writes and non-temporal stores.
    pub received_by_core: Vec<u64>,
    /// Copies invalidated in all, over every core and line.
    pub invalidations: u64,
    /// Of `invalidations`, those where the victim's touched bytes and the
    /// writer's were disjoint: false sharing.
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
    /// Outcomes of software prefetch instructions ([`crate::AccessKind::Prefetch`]).
    pub software_prefetch: PrefetchStats,
    /// Outcomes of the configured hardware prefetchers, all together.
    pub hardware_prefetch: PrefetchStats,
    /// Invalidations between cores; all zero in a non-coherent hierarchy.
    pub coherence: CoherenceStats,
    /// Non-temporal stores simulated ([`crate::AccessKind::NonTemporalStore`]).
    pub nt_stores: u64,
    /// Cache-line flushes simulated ([`crate::AccessKind::Flush`]).
    pub flushes: u64,
    /// Software prefetch resolutions dropped because the caller did not drain
    /// them (counted, never lost silently).
    pub prefetch_events_dropped: u64,
}
