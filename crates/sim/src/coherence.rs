//! Coherence bookkeeping, allocated once so that recording never allocates:
//! per-line invalidation statistics in a fixed-capacity open-addressing
//! table, and the table of lines a core owns alone.

use crate::stats::LineSharing;
use std::collections::TryReserveError;

const EMPTY: u64 = u64::MAX;

#[derive(Clone, Debug)]
pub(crate) struct LineTable {
    slots: Vec<LineSharing>,
    mask: usize,
    used: usize,
    limit: usize,
}

impl LineTable {
    /// A table for up to `capacity` lines (0 disables per-line tracking).
    pub fn try_new(capacity: usize) -> Result<LineTable, TryReserveError> {
        if capacity == 0 {
            return Ok(LineTable {
                slots: Vec::new(),
                mask: 0,
                used: 0,
                limit: 0,
            });
        }
        let n = LineTable::slots_for(capacity);
        let empty = LineSharing {
            line: EMPTY,
            ..LineSharing::default()
        };
        let mut slots = Vec::new();
        slots.try_reserve_exact(n)?;
        slots.resize(n, empty);
        Ok(LineTable {
            slots,
            mask: n - 1,
            used: 0,
            limit: capacity,
        })
    }

    /// Slots allocated for `capacity` lines: the load factor stays at or
    /// under 1/2 for short probe runs.
    fn slots_for(capacity: usize) -> usize {
        (capacity * 2).next_power_of_two()
    }

    /// Bytes [`LineTable::try_new`] allocates for `capacity` lines.
    pub fn bytes_for(capacity: usize) -> u64 {
        if capacity == 0 {
            return 0;
        }
        LineTable::slots_for(capacity) as u64 * std::mem::size_of::<LineSharing>() as u64
    }

    /// The entry for `line`, created if there is room; `None` when full.
    pub fn entry(&mut self, line: u64) -> Option<&mut LineSharing> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = (line.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) as usize & self.mask;
        loop {
            let l = self.slots[i].line;
            if l == line {
                return Some(&mut self.slots[i]);
            }
            if l == EMPTY {
                if self.used >= self.limit {
                    return None;
                }
                self.used += 1;
                self.slots[i].line = line;
                return Some(&mut self.slots[i]);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Every tracked line, most invalidations first.
    pub fn sorted(&self) -> Vec<LineSharing> {
        let mut v: Vec<LineSharing> = self
            .slots
            .iter()
            .filter(|s| s.line != EMPTY)
            .copied()
            .collect();
        v.sort_by(|a, b| b.received.cmp(&a.received).then(a.line.cmp(&b.line)));
        v
    }
}

/// Lines a core owns alone because its write invalidated every other copy:
/// a direct-mapped table keyed by first-level line address. A write by the
/// owner needs no snoop; a fill of the line by any other core drops the
/// entry; a collision also drops an entry, which only costs one more snoop.
#[derive(Clone, Debug)]
pub(crate) struct Owners {
    slots: Vec<(u64, u32)>,
}

const OWNER_BITS: u32 = 12;

impl Owners {
    pub fn new() -> Owners {
        Owners {
            slots: vec![(EMPTY, 0); 1 << OWNER_BITS],
        }
    }

    #[inline]
    fn slot(line_addr: u64) -> usize {
        (line_addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - OWNER_BITS)) as usize
    }

    /// Whether `core` owns `line_addr` alone.
    #[inline]
    pub fn owns(&self, line_addr: u64, core: usize) -> bool {
        self.slots[Self::slot(line_addr)] == (line_addr, core as u32)
    }

    /// `core` now owns `line_addr` alone.
    #[inline]
    pub fn claim(&mut self, line_addr: u64, core: usize) {
        self.slots[Self::slot(line_addr)] = (line_addr, core as u32);
    }

    /// `core` filled `line_addr`: whoever else owned it no longer does.
    #[inline]
    pub fn filled_by(&mut self, line_addr: u64, core: usize) {
        let e = &mut self.slots[Self::slot(line_addr)];
        if e.0 == line_addr && e.1 != core as u32 {
            e.0 = EMPTY;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_is_dropped_by_another_cores_fill_only() {
        let mut o = Owners::new();
        o.claim(0x1000, 2);
        assert!(o.owns(0x1000, 2) && !o.owns(0x1000, 1) && !o.owns(0x1040, 2));
        o.filled_by(0x1000, 2);
        assert!(o.owns(0x1000, 2));
        o.filled_by(0x1000, 3);
        assert!(!o.owns(0x1000, 2));
    }

    #[test]
    fn full_table_refuses_new_lines_but_keeps_old_ones() {
        let mut t = LineTable::try_new(2).unwrap();
        t.entry(10).unwrap().sent += 1;
        t.entry(20).unwrap().sent += 1;
        assert!(t.entry(30).is_none());
        t.entry(10).unwrap().sent += 1;
        let s = t.sorted();
        assert_eq!(s.len(), 2);
        assert_eq!(s.iter().find(|x| x.line == 10).unwrap().sent, 2);
    }
}
