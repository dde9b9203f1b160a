//! The one simulator driver: every front end (a capture's accountant,
//! `coldcache sim` over trace files) hands its accesses to a [`Driver`],
//! which maps threads to cores, runs the [`Hierarchy`], tallies every access
//! by kind and serving level, and, when asked, attributes it into a counter
//! row laid out by [`CounterLayout`].
//!
//! Keeping these in one place means one mapping of access kinds to
//! counters, one thread → core rule and one tally layout, whoever feeds the
//! simulator. Like the rest of the crate it does no I/O; once built (and
//! [`CoreMap::reserve`]d for the threads to come) it allocates nothing.

use crate::{
    Access, AccessKind, AccessResult, ConfigError, CoreMap, CounterLayout, Hierarchy,
    HierarchyConfig, MAX_LEVELS,
};

/// Accesses counted by kind and by the level that served their lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Accesses per [`AccessKind`] (indexed by `kind as usize`).
    pub accesses: [u64; 7],
    /// Lines per kind and [`crate::ServedBy::slot`]: an access counts once at
    /// the level that served it, or once per line where each line was found
    /// in [`crate::StraddleMode::PerLine`].
    pub served: [[u64; MAX_LEVELS + 1]; 7],
}

impl Tally {
    /// Counts one access of `kind` with result `r`.
    #[inline]
    pub fn add(&mut self, kind: AccessKind, r: &AccessResult) {
        let k = kind as usize;
        self.accesses[k] += 1;
        let row = &mut self.served[k];
        if r.is_single_line() {
            row[r.served_by.slot()] += 1;
        } else {
            for (s, c) in row.iter_mut().zip(r.per_slot()) {
                *s += u64::from(c);
            }
        }
    }

    /// Accesses of `kind`.
    pub fn of(&self, kind: AccessKind) -> u64 {
        self.accesses[kind as usize]
    }

    /// Lines of `kind` served at `slot`.
    pub fn served_at(&self, kind: AccessKind, slot: usize) -> u64 {
        self.served[kind as usize][slot]
    }

    /// Lines of `kind` that missed the first level.
    pub fn first_level_misses(&self, kind: AccessKind) -> u64 {
        self.served[kind as usize][1..].iter().sum()
    }

    /// Lines of `kind` served by memory.
    pub fn memory(&self, kind: AccessKind) -> u64 {
        self.served[kind as usize][MAX_LEVELS]
    }
}

/// A hierarchy with its thread → core map, tally and counter layout.
pub struct Driver {
    hier: Hierarchy,
    cores: CoreMap,
    layout: CounterLayout,
    tally: Tally,
}

impl Driver {
    /// A driver over a new hierarchy for `cfg`.
    pub fn new(cfg: &HierarchyConfig) -> Result<Driver, ConfigError> {
        Ok(Driver::with_hierarchy(Hierarchy::new(cfg)?))
    }

    /// A driver over `hier`.
    pub fn with_hierarchy(hier: Hierarchy) -> Driver {
        let cores = CoreMap::new(hier.config().cores.max(1));
        let layout = CounterLayout::new(hier.levels());
        Driver {
            hier,
            cores,
            layout,
            tally: Tally::default(),
        }
    }

    /// The counter layout rows are attributed in.
    #[inline]
    pub fn layout(&self) -> CounterLayout {
        self.layout
    }

    /// The thread → core map (pin threads with [`CoreMap::assign`], reserve
    /// room with [`CoreMap::reserve`] before a run that must not allocate).
    pub fn cores_mut(&mut self) -> &mut CoreMap {
        &mut self.cores
    }

    /// The thread → core map.
    pub fn cores(&self) -> &CoreMap {
        &self.cores
    }

    /// The core of `thread` (a caller-chosen key), assigned round-robin the
    /// first time unless pinned.
    #[inline]
    pub fn core_of(&mut self, thread: u64) -> usize {
        self.cores.core_of(thread)
    }

    /// Simulates `a` on `core` and tallies it.
    #[inline(always)]
    pub fn access(&mut self, core: usize, a: Access) -> AccessResult {
        let r = self.hier.access(core, a);
        self.tally.add(a.kind, &r);
        r
    }

    /// Simulates `a` on `core`, tallies it and attributes it into `row`
    /// (see [`CounterLayout::add_access`]).
    #[inline(always)]
    pub fn attribute(&mut self, core: usize, a: Access, row: &mut [u64]) -> AccessResult {
        let r = self.access(core, a);
        self.layout.add_access(row, a.kind, &r);
        r
    }

    /// What has been simulated so far, by kind and serving level.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The hierarchy (statistics per level and instance).
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hier
    }

    /// The hierarchy, mutably (to drain prefetch outcomes, say).
    pub fn hierarchy_mut(&mut self) -> &mut Hierarchy {
        &mut self.hier
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    /// Cachegrind's model by hand: a cold read misses to memory, the same
    /// line again hits L1; a write to a new line misses; the row and the
    /// tally agree.
    #[test]
    fn attribution_and_tally_by_hand() {
        let mut d = Driver::new(&presets::cachegrind_default()).unwrap();
        let l = d.layout();
        let mut row = vec![0u64; l.len()];
        let core = d.core_of(7);
        d.attribute(
            core,
            Access::new(AccessKind::InstrFetch, 0x1000, 4),
            &mut row,
        );
        d.attribute(core, Access::new(AccessKind::Read, 0x8000, 8), &mut row);
        d.attribute(
            core,
            Access::new(AccessKind::ReadModifyWrite, 0x8008, 8),
            &mut row,
        );
        d.attribute(core, Access::new(AccessKind::Write, 0x9000, 8), &mut row);
        d.attribute(core, Access::new(AccessKind::Flush, 0x9000, 1), &mut row);
        assert_eq!(row[l.memory(crate::Side::Instr)], 1);
        assert_eq!(row[l.memory(crate::Side::Read)], 1);
        assert_eq!(row[l.served(crate::Side::Read, 0)], 1);
        assert_eq!(row[l.memory(crate::Side::Write)], 1);
        assert_eq!(row.iter().sum::<u64>(), 4);
        let t = d.tally();
        assert_eq!(t.of(AccessKind::Read), 1);
        assert_eq!(t.of(AccessKind::ReadModifyWrite), 1);
        assert_eq!(t.memory(AccessKind::Read), 1);
        assert_eq!(t.first_level_misses(AccessKind::ReadModifyWrite), 0);
        assert_eq!(t.of(AccessKind::Flush), 1);
    }
}
