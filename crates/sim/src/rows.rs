//! A table of attributed counter rows whose most frequent counts are kept
//! apart, dense, until they are read.
//!
//! A row of [`CounterLayout`] is wide (fifteen counters for two levels), and
//! a trace touches tens of thousands of them; nearly every access adds one
//! to one of four counters: the row's `instructions` or its first-level
//! count on one side (`i_L1`, `r_L1`, `w_L1`). [`RowTable`] keeps those four
//! per row in a dense array of `u16` (8 bytes a row instead of the row's
//! 120), so the counting touches a small fraction of the memory, and adds
//! them into the wide rows when the table is read ([`RowTable::settle`],
//! [`RowTable::into_rows`]; one counter at a time, [`RowTable::get`]).
//!
//! Invariant: the value of a counter is its wide cell plus, for the four
//! dense ones, its dense cell. A dense cell that wraps past `u16::MAX` to 0
//! carries 2^16 into its wide counter at once ([`Dense::bump`], the one
//! way a dense cell is added to), so no count is ever lost and no settle
//! is needed but to read.

use crate::{AccessKind, CounterLayout, Side};

/// Counter rows of one layout, row `i` at `i * layout.len()`; see the
/// [module documentation](self).
#[derive(Clone, Debug)]
pub struct RowTable {
    layout: CounterLayout,
    wide: Vec<u64>,
    /// Per row: `instructions` and the first-level counts of the three
    /// sides, in [`Side`] order.
    dense: Vec<[u16; 4]>,
    /// The wide counter of each dense cell.
    at: [usize; 4],
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

/// A [`RowTable`]'s cells, borrowed for counting into (the batch loops').
pub(crate) struct Dense<'a> {
    dense: &'a mut [[u16; 4]],
    wide: &'a mut [u64],
    len: usize,
    at: [usize; 4],
}

impl Dense<'_> {
    /// Adds one to dense cell `cell` of row `row`, carrying 2^16 into its
    /// wide counter when the cell wraps.
    ///
    /// # Panics
    /// If `row` is not in the table.
    #[inline(always)]
    pub(crate) fn bump(&mut self, row: u32, cell: usize) {
        let c = &mut self.dense[row as usize][cell];
        *c = c.wrapping_add(1);
        if *c == 0 {
            self.carry(row, cell);
        }
    }

    #[cold]
    #[inline(never)]
    fn carry(&mut self, row: u32, cell: usize) {
        self.wide[row as usize * self.len + self.at[cell]] += 1 << 16;
    }

    /// Wide row `row`.
    ///
    /// # Panics
    /// If `row` is not in the table.
    #[inline(always)]
    pub(crate) fn wide_row(&mut self, row: u32) -> &mut [u64] {
        let at = row as usize * self.len;
        &mut self.wide[at..at + self.len]
    }
}

impl RowTable {
    /// An empty table of `layout`'s rows.
    pub fn new(layout: CounterLayout) -> RowTable {
        RowTable {
            layout,
            wide: Vec::new(),
            dense: Vec::new(),
            at: [
                CounterLayout::INSTRUCTIONS,
                layout.served(Side::Instr, 0),
                layout.served(Side::Read, 0),
                layout.served(Side::Write, 0),
            ],
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

    /// Counts one instruction executed in `row`.
    ///
    /// # Panics
    /// If `row` is not in the table.
    #[inline]
    pub fn count_instruction(&mut self, row: u32) {
        self.cells().bump(row, 0);
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

    /// The cells, for counting into.
    #[inline(always)]
    pub(crate) fn cells(&mut self) -> Dense<'_> {
        Dense {
            dense: &mut self.dense,
            wide: &mut self.wide,
            len: self.layout.len(),
            at: self.at,
        }
    }

    /// Adds every dense cell into its wide counter and zeroes it.
    pub fn settle(&mut self) {
        let len = self.layout.len();
        for (d, w) in self.dense.iter_mut().zip(self.wide.chunks_exact_mut(len)) {
            for (&i, c) in self.at.iter().zip(d.iter_mut()) {
                w[i] += u64::from(*c);
                *c = 0;
            }
        }
    }

    /// Counter `counter` of row `row` (an index of the layout): its wide
    /// value plus its dense cell, if it has one. Settles nothing.
    ///
    /// # Panics
    /// If `row` is not in the table or `counter` not in the layout.
    pub fn get(&self, row: u32, counter: usize) -> u64 {
        let dense = self.at.iter().position(|&i| i == counter);
        let cell = dense.map_or(0, |c| u64::from(self.dense[row as usize][c]));
        self.wide[row as usize * self.layout.len() + counter] + cell
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

    /// Dense and wide counts add up, past the dense cells' range: 200,000
    /// instructions in one row carry three times, read at any point.
    #[test]
    fn dense_and_wide_counts_add_up() {
        let l = CounterLayout::new(2);
        let mut t = RowTable::new(l);
        assert_eq!(t.push_row(), 0);
        assert_eq!(t.push_row(), 1);
        for n in 1..=200_000u64 {
            t.count_instruction(1);
            if n == 65_535 || n == 65_536 || n == 131_073 {
                assert_eq!(t.get(1, CounterLayout::INSTRUCTIONS), n);
            }
        }
        t.wide_row_mut(1)[CounterLayout::INSTRUCTIONS] += 10;
        t.wide_row_mut(0)[CounterLayout::UNMODELLED] += 1;
        t.count_instruction(0);
        let rows = t.into_rows();
        assert_eq!(rows.len(), 2 * l.len());
        assert_eq!(rows[CounterLayout::INSTRUCTIONS], 1);
        assert_eq!(rows[CounterLayout::UNMODELLED], 1);
        assert_eq!(rows[l.len() + CounterLayout::INSTRUCTIONS], 200_010);
        assert_eq!(rows.iter().sum::<u64>(), 200_012);
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
            // Past a carry, so that both the dense cell and its wide
            // counter are checked.
            for _ in 0..70_000 {
                t.cells().bump(0, dense_cell(k).unwrap());
            }
            let rows = t.into_rows();
            let names = l.names(&["L1".into(), "L2".into(), "L3".into()]);
            let at = rows.iter().position(|&c| c != 0).unwrap();
            assert_eq!((names[at].as_str(), rows[at]), (want, 70_000), "{k:?}");
            assert_eq!(rows.iter().sum::<u64>(), 70_000, "{k:?}");
        }
        assert_eq!(dense_cell(AccessKind::Prefetch), None);
        assert_eq!(dense_cell(AccessKind::Flush), None);
    }
}
