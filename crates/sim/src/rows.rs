//! A table of attributed counter rows whose most frequent counts are kept
//! apart, dense, until they are read.
//!
//! A row of [`CounterLayout`] is wide (fifteen counters for two levels), and
//! a trace touches tens of thousands of them; nearly every access adds one
//! to one of four counters: the row's `instructions` or its first-level
//! count on one side (`i_L1`, `r_L1`, `w_L1`). [`RowTable`] keeps those four
//! per row in a dense array of `u32` (16 bytes a row instead of the row's
//! 120), so the counting touches a small fraction of the memory, and adds
//! them into the wide rows when the table is read ([`RowTable::settle`],
//! [`RowTable::into_rows`], [`RowTable::row`]).
//!
//! Invariant: the value of a counter is its wide cell plus, for the four
//! dense ones, its dense cell. A dense cell never overflows: the table
//! settles before the adds made since the last settle could exceed
//! `u32::MAX` ([`RowTable::reserve_adds`], which every adder calls).

use crate::{AccessKind, CounterLayout, Side};

/// Adds the dense cells may take between two settles.
const SETTLE_EVERY: u64 = u32::MAX as u64;

/// Counter rows of one layout, row `i` at `i * layout.len()`; see the
/// [module documentation](self).
#[derive(Clone, Debug)]
pub struct RowTable {
    layout: CounterLayout,
    wide: Vec<u64>,
    /// Per row: `instructions` and the first-level counts of the three
    /// sides, in [`Side`] order.
    dense: Vec<[u32; 4]>,
    /// Adds reserved since the last settle (an upper bound on any cell).
    pending: u64,
    /// When `pending` may reach this the table settles first.
    settle_every: u64,
}

/// The dense cell of an access of `kind` served by the first level, if it
/// has one.
#[inline(always)]
pub(crate) const fn dense_cell(kind: AccessKind) -> Option<usize> {
    match Side::of(kind) {
        Some(s) => Some(1 + s as usize),
        None => None,
    }
}

impl RowTable {
    /// An empty table of `layout`'s rows.
    pub fn new(layout: CounterLayout) -> RowTable {
        RowTable {
            layout,
            wide: Vec::new(),
            dense: Vec::new(),
            pending: 0,
            settle_every: SETTLE_EVERY,
        }
    }

    /// The same, settling whenever a reservation of adds
    /// ([`RowTable::reserve_adds`]: one per [`RowTable::count_instruction`],
    /// one per access of a piece of [`crate::Driver::attribute_batch`])
    /// would take those reserved since the last settle past `n` (at least
    /// 1): for tests of the settle, which otherwise needs four billion
    /// adds.
    #[doc(hidden)]
    pub fn settling_every(layout: CounterLayout, n: u64) -> RowTable {
        RowTable {
            settle_every: n.clamp(1, SETTLE_EVERY),
            ..RowTable::new(layout)
        }
    }

    /// The layout of the rows.
    #[inline]
    pub fn layout(&self) -> CounterLayout {
        self.layout
    }

    /// Rows in the table.
    #[inline]
    pub fn rows(&self) -> usize {
        self.dense.len()
    }

    /// Adds a row of zeros; its index.
    pub fn push_row(&mut self) -> u32 {
        let i = self.dense.len();
        self.wide.resize(self.wide.len() + self.layout.len(), 0);
        self.dense.push([0; 4]);
        u32::try_from(i).expect("fewer than 2^32 rows")
    }

    /// Grows the table to at least `rows` rows of zeros.
    pub fn grow_to(&mut self, rows: usize) {
        if rows > self.dense.len() {
            self.wide.resize(rows * self.layout.len(), 0);
            self.dense.resize(rows, [0; 4]);
        }
    }

    /// Makes room for `n` more dense adds: settles first if they could
    /// overflow a dense cell. Every adder calls it before adding.
    #[inline(always)]
    pub(crate) fn reserve_adds(&mut self, n: usize) {
        self.pending += n as u64;
        if self.pending > self.settle_every {
            self.settle();
            self.pending = n as u64;
        }
    }

    /// Counts one instruction executed in `row`.
    ///
    /// # Panics
    /// If `row` is not in the table.
    #[inline]
    pub fn count_instruction(&mut self, row: u32) {
        self.reserve_adds(1);
        self.dense[row as usize][0] += 1;
    }

    /// The wide row `row`, for adding counts other than the dense ones
    /// (adding to a dense counter here is also right: the two add up).
    ///
    /// # Panics
    /// If `row` is not in the table.
    #[inline]
    pub fn wide_row_mut(&mut self, row: u32) -> &mut [u64] {
        let len = self.layout.len();
        let at = row as usize * len;
        &mut self.wide[at..at + len]
    }

    /// The dense cells and the wide rows, for the batch loops (which call
    /// [`RowTable::reserve_adds`] first).
    #[inline(always)]
    pub(crate) fn parts_mut(&mut self) -> (&mut [[u32; 4]], &mut [u64]) {
        (&mut self.dense, &mut self.wide)
    }

    /// Adds every dense cell into its wide counter and zeroes it.
    pub fn settle(&mut self) {
        let l = self.layout;
        let at = [
            CounterLayout::INSTRUCTIONS,
            l.served(Side::Instr, 0),
            l.served(Side::Read, 0),
            l.served(Side::Write, 0),
        ];
        for (d, w) in self
            .dense
            .iter_mut()
            .zip(self.wide.chunks_exact_mut(l.len()))
        {
            for (&i, c) in at.iter().zip(d.iter_mut()) {
                w[i] += u64::from(*c);
                *c = 0;
            }
        }
        self.pending = 0;
    }

    /// Row `row`, settled.
    ///
    /// # Panics
    /// If `row` is not in the table.
    pub fn row(&mut self, row: u32) -> &[u64] {
        if self.pending != 0 {
            self.settle();
        }
        let len = self.layout.len();
        let at = row as usize * len;
        &self.wide[at..at + len]
    }

    /// The rows, settled, one after the other.
    pub fn into_rows(mut self) -> Vec<u64> {
        self.settle();
        self.wide
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dense and wide counts add up, and the settle never loses one: one
    /// row counted through both, settling every 2 adds.
    #[test]
    fn dense_and_wide_counts_add_up() {
        let l = CounterLayout::new(2);
        let mut t = RowTable::settling_every(l, 2);
        assert_eq!(t.push_row(), 0);
        assert_eq!(t.push_row(), 1);
        for _ in 0..5 {
            t.count_instruction(1);
            assert!(
                t.parts_mut().0[1][0] <= 2,
                "a dense cell past the settle bound"
            );
        }
        t.wide_row_mut(1)[CounterLayout::INSTRUCTIONS] += 10;
        t.wide_row_mut(0)[CounterLayout::UNMODELLED] += 1;
        assert_eq!(t.row(1)[CounterLayout::INSTRUCTIONS], 15);
        t.count_instruction(0);
        let rows = t.into_rows();
        assert_eq!(rows.len(), 2 * l.len());
        assert_eq!(rows[CounterLayout::INSTRUCTIONS], 1);
        assert_eq!(rows[CounterLayout::UNMODELLED], 1);
        assert_eq!(rows[l.len() + CounterLayout::INSTRUCTIONS], 15);
        assert_eq!(rows.iter().sum::<u64>(), 17);
    }

    #[test]
    fn dense_cells_are_the_first_level_counters_of_their_side() {
        let l = CounterLayout::new(3);
        let mut t = RowTable::new(l);
        t.grow_to(1);
        for (k, want) in [
            (AccessKind::InstrFetch, "i_L1"),
            (AccessKind::Read, "r_L1"),
            (AccessKind::ReadModifyWrite, "r_L1"),
            (AccessKind::Write, "w_L1"),
            (AccessKind::NonTemporalStore, "w_L1"),
        ] {
            let mut t = t.clone();
            t.reserve_adds(1);
            t.parts_mut().0[0][dense_cell(k).unwrap()] += 1;
            let rows = t.into_rows();
            let names = l.names(&["L1".into(), "L2".into(), "L3".into()]);
            let at = rows.iter().position(|&c| c == 1).unwrap();
            assert_eq!(names[at], want, "{k:?}");
        }
        assert_eq!(dense_cell(AccessKind::Prefetch), None);
        assert_eq!(dense_cell(AccessKind::Flush), None);
    }
}
