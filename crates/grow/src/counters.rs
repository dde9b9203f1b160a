//! Counters per (instruction, stack, thread): the one numbering of rows,
//! in order of first appearance, that the capture's accountant counts in
//! (`coldcache_account::tables`) and a re-simulation of its trace numbers
//! its rows with (`coldcache_replay`'s `Numbering`), so both give the
//! same rows the same numbers.
//!
//! Keys in a dense [`GrowVec`] with an open-addressing [`Index`] over
//! them, counters in a second [`GrowVec`] (`stride` per row), all growing
//! by mappings charged to the caller's [`Budget`]: no allocation, lock or
//! panic, so the accountant uses it inside signal handlers.

use crate::{mix, Budget, Full, GrowVec, Index, Refused};

/// The [`Full`] of a table from a refused growth.
fn full(table: &'static str, entries: usize, bytes: usize, r: Refused, b: &Budget) -> Full {
    r.full(table, entries, bytes, b)
}

/// Counters per (instruction, stack, thread).
pub struct CounterTable {
    keys: GrowVec<(u64, u32, u32)>,
    index: Index,
    values: GrowVec<u64>,
    stride: usize,
}

/// An empty slot of an index. Slots hold an entry's number plus one, so
/// that an index starts as zeroed memory: a fresh mapping the kernel fills
/// with zeros page by page as it is used.
pub const FREE: u32 = 0;

impl CounterTable {
    /// A table for up to `capacity` records of `stride` counters each
    /// (nothing mapped yet).
    pub fn new(capacity: usize, stride: usize) -> Self {
        let capacity = capacity.max(1);
        CounterTable {
            keys: GrowVec::new(capacity),
            index: Index::new(),
            values: GrowVec::new(capacity.saturating_mul(stride.max(1))),
            stride,
        }
    }

    /// Bytes mapped.
    pub fn bytes(&self) -> usize {
        self.index.bytes() + self.keys.bytes() + self.values.bytes()
    }

    /// The counters of a key, created zeroed on first use; `Err` when the
    /// table cannot grow.
    #[inline]
    pub fn counters(
        &mut self,
        ip: u64,
        stack: u32,
        thread: u32,
        b: &mut Budget,
    ) -> Result<&mut [u64], Full> {
        let r = self.row_index(ip, stack, thread, b)?;
        Ok(self.row(r))
    }

    /// The counters of row `r` (an index [`CounterTable::row_index`] gave;
    /// rows keep their index as the table grows).
    #[inline]
    pub fn row(&mut self, r: usize) -> &mut [u64] {
        assert!(r < self.keys.len());
        // SAFETY: every key pushed has its `stride` values pushed with it
        // (`row_index`), so `values` holds `keys.len() * stride` entries and
        // row `r < keys.len()` lies within them.
        unsafe { self.values.run_mut_unchecked(r * self.stride, self.stride) }
    }

    /// The instructions of one 64-byte window of code under one stack and
    /// thread hash to one run of 16 consecutive slots (a cache line of the
    /// index), and their rows are mostly made together (a block's
    /// instructions, the first time it runs under a stack), so making or
    /// finding them costs one cache miss in the index, not one each: on a
    /// program with millions of rows (CPython: 14.7M over 362,652 stacks)
    /// the index's misses were most of the time spent making rows.
    #[inline(always)]
    fn hash(key: (u64, u32, u32)) -> u64 {
        let (ip, stack, thread) = key;
        let window = mix(ip >> 6) ^ (u64::from(stack) << 32 | u64::from(thread));
        mix(window).wrapping_add((ip & 63) >> 2)
    }

    /// The row of a key, created zeroed on first use; `Err` when the table
    /// cannot grow.
    #[inline]
    pub fn row_index(
        &mut self,
        ip: u64,
        stack: u32,
        thread: u32,
        b: &mut Budget,
    ) -> Result<usize, Full> {
        let key = (ip, stack, thread);
        if self.index.ready() {
            let mut i = self.index.start(Self::hash(key));
            loop {
                let r = self.index.slot(i);
                if r == FREE {
                    break;
                }
                let r = r as usize - 1;
                // SAFETY: an index slot holds a pushed key's number plus one.
                if *unsafe { self.keys.at_unchecked(r) } == key {
                    return Ok(r);
                }
                i = self.index.next(i);
            }
        }
        self.insert(key, b)
    }

    /// A new row for `key` (not in the table), growing what must grow.
    #[cold]
    fn insert(&mut self, key: (u64, u32, u32), b: &mut Budget) -> Result<usize, Full> {
        let n = self.keys.len();
        let grown = (|| {
            if !self.index.fits(n) {
                let keys = &self.keys;
                self.index.grow(n, |e| Self::hash(*keys.at(e)), b)?;
            }
            self.keys.reserve(1, b)?;
            self.values.reserve(self.stride, b)
        })();
        if let Err(r) = grown {
            return Err(full("records", n, self.bytes(), r, b));
        }
        let mut i = self.index.start(Self::hash(key));
        while self.index.slot(i) != FREE {
            i = self.index.next(i);
        }
        let r = self.keys.push(key, b).expect("room made");
        self.values.extend(0, self.stride, b).expect("room made");
        self.index.fill(i, r);
        Ok(r)
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no record exists.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Sets every counter of every row to zero (`CALLGRIND_ZERO_STATS`);
    /// the rows stay, with their indexes.
    pub fn zero(&mut self) {
        self.values.as_mut_slice().fill(0);
    }

    /// Every record's key, by row.
    pub fn keys(&self) -> &[(u64, u32, u32)] {
        self.keys.as_slice()
    }

    /// Record `r`: key and counters.
    pub fn entry(&self, r: usize) -> ((u64, u32, u32), &[u64]) {
        let stride = self.stride.max(1);
        (
            self.keys.as_slice()[r],
            &self.values.as_slice()[r * stride..(r + 1) * stride],
        )
    }

    /// Every record: key and counters.
    pub fn iter(&self) -> impl Iterator<Item = ((u64, u32, u32), &[u64])> {
        self.keys
            .as_slice()
            .iter()
            .copied()
            .zip(self.values.as_slice().chunks_exact(self.stride.max(1)))
    }
}
