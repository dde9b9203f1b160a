//! Fully-associative LRU shadow cache for the three-C miss classification:
//! a miss that this shadow (of equal capacity) would have hit is a conflict
//! miss; one it also misses is a capacity miss; a first reference is
//! compulsory. O(1) per access: a hash map into an intrusive LRU list.

use std::collections::{HashMap, HashSet, TryReserveError};

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub(crate) struct Shadow {
    capacity: usize,
    index: HashMap<u64, u32>,
    line: Vec<u64>,
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32, // most recent
    tail: u32, // least recent
    seen: HashSet<u64>,
}

/// What the shadow says about one reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShadowResult {
    pub first_reference: bool,
    pub hit: bool,
}

impl Shadow {
    /// A shadow of `capacity` lines, its list and index allocated up front
    /// (the set of lines ever seen grows with the run).
    pub fn try_new(capacity: usize) -> Result<Shadow, TryReserveError> {
        let capacity = capacity.max(1);
        let mut s = Shadow {
            capacity,
            index: HashMap::new(),
            line: Vec::new(),
            prev: Vec::new(),
            next: Vec::new(),
            head: NIL,
            tail: NIL,
            seen: HashSet::new(),
        };
        s.line.try_reserve_exact(capacity)?;
        s.prev.try_reserve_exact(capacity)?;
        s.next.try_reserve_exact(capacity)?;
        s.index.try_reserve(capacity)?;
        Ok(s)
    }

    /// About the bytes [`Shadow::try_new`] allocates for `capacity` lines:
    /// the list (16 bytes a line) and the index (12 bytes an entry and a
    /// control byte, at a load of at most 7/8).
    pub fn bytes_for(capacity: usize) -> u64 {
        let c = capacity.max(1) as u64;
        c * 16 + c.div_ceil(7) * 8 * 13
    }

    fn unlink(&mut self, n: u32) {
        let (p, x) = (self.prev[n as usize], self.next[n as usize]);
        if p != NIL {
            self.next[p as usize] = x;
        } else {
            self.head = x;
        }
        if x != NIL {
            self.prev[x as usize] = p;
        } else {
            self.tail = p;
        }
    }

    fn push_front(&mut self, n: u32) {
        self.prev[n as usize] = NIL;
        self.next[n as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = n;
        }
        self.head = n;
        if self.tail == NIL {
            self.tail = n;
        }
    }

    /// References `line`, updating the LRU order.
    pub fn access(&mut self, line: u64) -> ShadowResult {
        let first_reference = self.seen.insert(line);
        if let Some(&n) = self.index.get(&line) {
            self.unlink(n);
            self.push_front(n);
            return ShadowResult {
                first_reference,
                hit: true,
            };
        }
        let n = if self.line.len() < self.capacity {
            self.line.push(line);
            self.prev.push(NIL);
            self.next.push(NIL);
            (self.line.len() - 1) as u32
        } else {
            let n = self.tail;
            self.unlink(n);
            self.index.remove(&self.line[n as usize]);
            self.line[n as usize] = line;
            n
        };
        self.index.insert(line, n);
        self.push_front(n);
        ShadowResult {
            first_reference,
            hit: false,
        }
    }

    /// Removes `line` (it was invalidated or flushed in the real cache).
    pub fn remove(&mut self, line: u64) {
        if let Some(n) = self.index.remove(&line) {
            self.unlink(n);
            // Park the node at the tail so it is reused first.
            self.line[n as usize] = u64::MAX;
            self.prev[n as usize] = self.tail;
            self.next[n as usize] = NIL;
            if self.tail != NIL {
                self.next[self.tail as usize] = n;
            } else {
                self.head = n;
            }
            self.tail = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_of_capacity_two() {
        let mut s = Shadow::try_new(2).unwrap();
        let r: Vec<(bool, bool)> = [1, 2, 1, 3, 2, 1, 1]
            .iter()
            .map(|&l| {
                let r = s.access(l);
                (r.first_reference, r.hit)
            })
            .collect();
        assert_eq!(
            r,
            vec![
                (true, false),
                (true, false),
                (false, true),
                (true, false),  // evicts 2
                (false, false), // evicts 1
                (false, false), // evicts 3
                (false, true),
            ]
        );
    }
}
