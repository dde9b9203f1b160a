//! Per-line coherence statistics in a fixed-capacity open-addressing table,
//! allocated once so recording an invalidation never allocates.

use crate::stats::LineSharing;

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
    pub fn new(capacity: usize) -> LineTable {
        if capacity == 0 {
            return LineTable {
                slots: Vec::new(),
                mask: 0,
                used: 0,
                limit: 0,
            };
        }
        // Keep the load factor at or under 1/2 for short probe runs.
        let n = (capacity * 2).next_power_of_two();
        let empty = LineSharing {
            line: EMPTY,
            ..LineSharing::default()
        };
        LineTable {
            slots: vec![empty; n],
            mask: n - 1,
            used: 0,
            limit: capacity,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_table_refuses_new_lines_but_keeps_old_ones() {
        let mut t = LineTable::new(2);
        t.entry(10).unwrap().sent += 1;
        t.entry(20).unwrap().sent += 1;
        assert!(t.entry(30).is_none());
        t.entry(10).unwrap().sent += 1;
        let s = t.sorted();
        assert_eq!(s.len(), 2);
        assert_eq!(s.iter().find(|x| x.line == 10).unwrap().sent, 2);
    }
}
