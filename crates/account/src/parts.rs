//! Parts of a profile: the counts a `CALLGRIND_DUMP_STATS` request set
//! aside (`requests.rs`), each written as a dump of its own when the
//! capture ends, as Callgrind writes a file per dump.
//!
//! Setting a part aside runs where the request is stepped (the trap
//! handler): the rows with counts are copied into one growing mapping
//! ([`GrowVec`], no allocator), each as `ip`, `stack << 32 | thread`, then
//! its counters. At most [`MAX_PARTS`] parts are kept; a request past them,
//! or one whose copy the memory budget refuses, sets nothing aside (its
//! counts stay with the next part), and is counted for the dump's note.

use crate::grow::{Budget, GrowVec};
use crate::tables::CounterTable;
use coldcache_sim::CounterLayout;

/// Parts set aside at most.
pub const MAX_PARTS: usize = 64;

/// Bytes of a part's label kept (`DUMP_STATS_AT`'s string).
pub const LABEL: usize = 96;

#[derive(Clone, Copy)]
struct Mark {
    /// End of the part's words in the store.
    end: usize,
    /// Instructions it counted.
    instructions: u64,
    /// Its label (`DUMP_STATS_AT`), `label_len` bytes; none for
    /// `DUMP_STATS`.
    label: [u8; LABEL],
    label_len: usize,
}

/// The parts set aside so far.
pub struct Parts {
    store: GrowVec<u64>,
    marks: [Mark; MAX_PARTS],
    n: usize,
    /// Requests that set nothing aside (past [`MAX_PARTS`], or refused).
    merged: u64,
}

/// A row's key: `(ip, stack, thread)`, as the counter table's.
pub type Key = (u64, u32, u32);

/// One part, as the dump is written.
pub struct Part<'a> {
    /// The `DUMP_STATS_AT` label, if any.
    pub label: Option<String>,
    /// Instructions it counted.
    pub instructions: u64,
    /// Its rows: key `(ip, stack, thread)`, then counters.
    pub rows: Vec<(Key, &'a [u64])>,
}

impl Default for Parts {
    fn default() -> Self {
        Self::new()
    }
}

impl Parts {
    /// None yet (nothing mapped).
    pub fn new() -> Parts {
        Parts {
            store: GrowVec::new(usize::MAX / 64),
            marks: [Mark {
                end: 0,
                instructions: 0,
                label: [0; LABEL],
                label_len: 0,
            }; MAX_PARTS],
            n: 0,
            merged: 0,
        }
    }

    /// Sets aside every row of `table` with counts, as a part that counted
    /// `instructions` and is named `label`; false when nothing was set aside
    /// (the caller then keeps the counts). No allocation.
    pub fn set_aside(
        &mut self,
        table: &CounterTable,
        instructions: u64,
        label: &[u8],
        b: &mut Budget,
    ) -> bool {
        if self.n == MAX_PARTS {
            self.merged += 1;
            return false;
        }
        let start = self.store.len();
        let mut row = [0u64; CounterLayout::MAX_LEN];
        let c = &mut row[..table.stride()];
        for r in 0..table.len() {
            let (ip, stack, thread) = table.keys()[r];
            table.counters_into(r, c);
            if c[CounterLayout::INSTRUCTIONS] == 0 {
                continue;
            }
            let ok = self.store.push(ip, b).is_ok()
                && self
                    .store
                    .push(u64::from(stack) << 32 | u64::from(thread), b)
                    .is_ok()
                && c.iter().all(|&v| self.store.push(v, b).is_ok());
            if !ok {
                while self.store.len() > start {
                    self.store.pop();
                }
                self.merged += 1;
                return false;
            }
        }
        let len = label.len().min(LABEL);
        let m = &mut self.marks[self.n];
        m.end = self.store.len();
        m.instructions = instructions;
        m.label[..len].copy_from_slice(&label[..len]);
        m.label_len = len;
        self.n += 1;
        true
    }

    /// Parts set aside.
    pub fn count(&self) -> usize {
        self.n
    }

    /// Requests that set nothing aside.
    pub fn merged(&self) -> u64 {
        self.merged
    }

    /// Part `k` (from 0), its rows `stride` counters each.
    pub fn part(&self, k: usize, stride: usize) -> Part<'_> {
        let m = &self.marks[k];
        let start = if k == 0 { 0 } else { self.marks[k - 1].end };
        let words = &self.store.as_slice()[start..m.end];
        let rows = words
            .chunks_exact(2 + stride)
            .map(|w| ((w[0], (w[1] >> 32) as u32, w[1] as u32), &w[2..]))
            .collect();
        Part {
            label: (m.label_len > 0)
                .then(|| String::from_utf8_lossy(&m.label[..m.label_len]).into_owned()),
            instructions: m.instructions,
            rows,
        }
    }
}
