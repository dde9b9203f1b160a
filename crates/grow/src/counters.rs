//! Counters per (instruction, stack, thread): the one numbering of rows,
//! in order of first appearance, that the capture's accountant counts in
//! (`coldcache_account::tables`) and a re-simulation of its trace numbers
//! its rows with (`coldcache_replay`'s `Numbering`), so both give the
//! same rows the same numbers.
//!
//! Keys in a dense [`GrowVec`] with an open-addressing [`Index`] over
//! them, counters in a narrow and a wide part (see [`CounterTable`]), all growing
//! by mappings charged to the caller's [`Budget`]: no allocation, lock or
//! panic, so the accountant uses it inside signal handlers.

use crate::{mix, Budget, Full, GrowVec, Index, Refused};

/// The [`Full`] of a table from a refused growth.
fn full(table: &'static str, entries: usize, bytes: usize, r: Refused, b: &Budget) -> Full {
    r.full(table, entries, bytes, b)
}

/// How many counters of a row are kept apart, in its narrow part.
pub const HOT: usize = 4;

/// Counters per (instruction, stack, thread).
///
/// A row is two parts: `HOT` counters chosen at construction (the commonest:
/// instructions and first-level hits), in a narrow part every row has, and
/// a wide part of all `stride` counters, appended the first time anything
/// asks for it ([`CounterTable::row`]); a counter's value is the sum of the
/// two. On a program with millions of rows most never need the wide part
/// (CPython: 6% of 14.7M do), so a row costs its key and 36 bytes in
/// memory that is touched, not `stride` counters. Room for every row's wide
/// part is still mapped (and charged to the budget) when the row is made,
/// so that asking for it never fails: the kernel commits only the pages
/// that are used.
pub struct CounterTable {
    keys: GrowVec<(u64, u32, u32)>,
    index: Index,
    hot: GrowVec<[u64; HOT]>,
    /// Per row: its wide part's number plus one, 0 until it has one.
    wide: GrowVec<u32>,
    values: GrowVec<u64>,
    stride: usize,
    hot_at: [usize; HOT],
}

/// An empty slot of an index. Slots hold an entry's number plus one, so
/// that an index starts as zeroed memory: a fresh mapping the kernel fills
/// with zeros page by page as it is used.
pub const FREE: u32 = 0;

impl CounterTable {
    /// A table for up to `capacity` records of `stride` counters each
    /// (nothing mapped yet), counters `hot_at` kept in the narrow part
    /// (distinct, below `stride`; any when `stride` is 0: no counters).
    pub fn new(capacity: usize, stride: usize, hot_at: [usize; HOT]) -> Self {
        let capacity = capacity.max(1);
        assert!(
            stride == 0
                || (hot_at.iter().all(|&h| h < stride)
                    && (1..HOT).all(|i| !hot_at[..i].contains(&hot_at[i]))),
            "narrow positions {hot_at:?} not distinct and below {stride}"
        );
        let counted = if stride == 0 { 0 } else { capacity };
        CounterTable {
            keys: GrowVec::new(capacity),
            index: Index::new(),
            hot: GrowVec::new(counted),
            wide: GrowVec::new(counted),
            values: GrowVec::new(capacity.saturating_mul(stride)),
            stride,
            hot_at,
        }
    }

    /// Bytes mapped.
    pub fn bytes(&self) -> usize {
        self.index.bytes()
            + self.keys.bytes()
            + self.hot.bytes()
            + self.wide.bytes()
            + self.values.bytes()
    }

    /// Counters per row.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The wide part of row `r` (an index [`CounterTable::row_index`] gave;
    /// rows keep their index as the table grows), made zeroed on first use:
    /// counters to add to (the narrow part, [`CounterTable::hot`], holds
    /// the rest of the `hot_at` counters' values).
    #[inline]
    pub fn row(&mut self, r: usize) -> &mut [u64] {
        assert!(r < self.keys.len() && self.stride > 0);
        let w = *self.wide.at(r);
        let w = if w == 0 {
            self.make_wide(r)
        } else {
            w as usize - 1
        };
        // SAFETY: every wide part made has its `stride` values pushed
        // (`make_wide`), so `values` holds `w + 1` runs of `stride`.
        unsafe { self.values.run_mut_unchecked(w * self.stride, self.stride) }
    }

    #[cold]
    fn make_wide(&mut self, r: usize) -> usize {
        let w = self.values.len() / self.stride;
        // Room for it was mapped when the row was made (`insert`), so
        // no budget is asked: this never fails.
        let mut free = crate::Budget::new(0);
        self.values
            .extend(0, self.stride, &mut free)
            .expect("room mapped with the row");
        *self.wide.at_mut(r) = w as u32 + 1;
        w
    }

    /// The narrow part of row `r`: the counters `hot_at` named, in that
    /// order.
    #[inline(always)]
    pub fn hot(&mut self, r: usize) -> &mut [u64; HOT] {
        self.hot.at_mut(r)
    }

    /// Row `r`'s counters, both parts summed, into `out` (`stride` long;
    /// nothing for a table without counters).
    pub fn counters_into(&self, r: usize, out: &mut [u64]) {
        if self.stride == 0 {
            return;
        }
        let out = &mut out[..self.stride];
        match *self.wide.at(r) {
            0 => out.fill(0),
            w => {
                let w = w as usize - 1;
                out.copy_from_slice(&self.values.as_slice()[w * self.stride..][..self.stride]);
            }
        }
        for (&at, &v) in self.hot_at.iter().zip(self.hot.at(r)) {
            out[at] += v;
        }
    }

    /// Brings row `r`'s key, narrow part and its wide part's number towards the
    /// CPU ([`crate::prefetch`]), for a loop over rows in another order
    /// than they were made ([`CounterTable::counters_into`] over sorted
    /// keys: a cache miss or two per row otherwise). Nothing for a row
    /// out of range.
    #[inline]
    pub fn prefetch(&self, r: usize) {
        if r < self.hot.len() {
            crate::prefetch(self.keys.at(r));
            crate::prefetch(self.hot.at(r));
            crate::prefetch(self.wide.at(r));
        }
    }

    /// Row `r`'s counter `i`, both parts summed.
    pub fn counter(&self, r: usize, i: usize) -> u64 {
        let wide = match *self.wide.at(r) {
            0 => 0,
            w => self.values.as_slice()[(w as usize - 1) * self.stride + i],
        };
        let hot = self.hot_at.iter().position(|&h| h == i);
        wide + hot.map_or(0, |j| self.hot.at(r)[j])
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
        if !self.index.ready() && !self.keys.is_empty() {
            self.rebuild_index(b)?;
        }
        let h = Self::hash(key);
        if self.index.ready() {
            // Keys are read only where the slot's hash bits match (CPython:
            // 162M slots passed in 16.2M lookups, the rows of one code
            // window and stack taking consecutive slots).
            let keys = &self.keys;
            let is_key = |r: usize| {
                // SAFETY: `find` asks of entries its slots hold: pushed keys.
                *unsafe { keys.at_unchecked(r) } == key
            };
            if let Ok(r) = self.index.find(h, is_key) {
                return Ok(r);
            }
        }
        self.insert(key, h, b)
    }

    /// A new row for `key` (not in the table), growing what must grow.
    #[cold]
    fn insert(&mut self, key: (u64, u32, u32), h: u64, b: &mut Budget) -> Result<usize, Full> {
        let n = self.keys.len();
        let counted = self.stride > 0;
        let grown = (|| {
            if !self.index.fits(n) {
                let keys = &self.keys;
                self.index.grow(n, |e| Self::hash(*keys.at(e)), b)?;
            }
            self.keys.reserve(1, b)?;
            if counted {
                self.hot.reserve(1, b)?;
                self.wide.reserve(1, b)?;
                // Room for every row's wide part, this one's included.
                let room = (n + 1) * self.stride - self.values.len();
                self.values.reserve(room, b)?;
            }
            Ok(())
        })();
        if let Err(r) = grown {
            return Err(full("records", n, self.bytes(), r, b));
        }
        let mut i = self.index.start(h);
        while self.index.slot(i) != FREE {
            i = self.index.next(i);
        }
        let r = self.keys.push(key, b).expect("room made");
        if counted {
            self.hot.push([0; HOT], b).expect("room made");
            self.wide.push(0, b).expect("room made");
        }
        self.index.fill(i, r, h);
        Ok(r)
    }

    /// Keys without an index (released): the index rebuilt from them, so
    /// that a lookup finds the keys held before room is made for a new row.
    #[cold]
    fn rebuild_index(&mut self, b: &mut Budget) -> Result<(), Full> {
        let n = self.keys.len();
        let keys = &self.keys;
        self.index
            .grow(n, |e| Self::hash(*keys.at(e)), b)
            .map_err(|r| full("records", n, self.bytes(), r, b))
    }

    /// Unmaps the index over the keys, giving its bytes back to `b`, for
    /// a table that is only read from now on (the capture's finish: 134
    /// MB of CPython's 14.7M records). Rows keep their numbers; a later
    /// [`CounterTable::row_index`] rebuilds the index from the keys.
    pub fn release_index(&mut self, b: &mut Budget) {
        self.index.release(b);
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
        self.hot.as_mut_slice().fill([0; HOT]);
    }

    /// Every record's key, by row.
    pub fn keys(&self) -> &[(u64, u32, u32)] {
        self.keys.as_slice()
    }

    /// Every record: key and counters (both parts summed; allocates a
    /// row's worth per record: for tests and small tables).
    pub fn iter(&self) -> impl Iterator<Item = ((u64, u32, u32), Vec<u64>)> + '_ {
        (0..self.len()).map(|r| {
            let mut c = vec![0; self.stride];
            self.counters_into(r, &mut c);
            (self.keys.as_slice()[r], c)
        })
    }
}
