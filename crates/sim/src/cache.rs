//! One cache instance: a set-associative array of lines with a replacement
//! policy. Knows nothing about levels, cores or coherence; the hierarchy
//! composes instances. Under the lean and Jaguar engines the instances are
//! built deferred (`try_new_deferred`: arrays reserved, not written) and
//! filled only if the engine hands its state over (`fill_deferred`).
//!
//! Storage is flat (`sets * ways` entries, a line's set found as every
//! engine finds it: `sets::Geometry`) so a lookup touches one contiguous
//! run of tags. The cache remembers the line it touched last, and each set
//! its most recently used way: a hit on either
//! (consecutive instruction fetches, fields of one struct, a loop's stack
//! slots) is one compare and, for every policy but SRRIP, no state change,
//! since that way is already the most recently used of its set.
//!
//! LRU and FIFO sets of up to 16 ways keep their replacement order as a
//! recency list packed in one `u64` per set (4 bits per rank, the most
//! recent way in the low bits): a use moves a way to the front and the
//! victim is the last rank, each a few instructions whatever the
//! associativity. Empty ways sit at the back of the list, so they are
//! filled before any valid line is evicted. Wider LRU and FIFO sets keep a
//! time stamp per way instead.

use crate::config::ReplacementPolicy;
use crate::sets::{Geometry, EMPTY};
use std::collections::TryReserveError;

/// Tag of an empty way. Line addresses are `addr >> line_shift`, so a real
/// line can only equal this with a 1-byte line at the last byte of memory
/// (the empty way of every engine, `sets::EMPTY`).
pub const INVALID: u64 = EMPTY;

/// The widest set whose order fits a packed recency list.
pub const MAX_ORDERED_WAYS: usize = 16;

/// Line state flags.
pub mod flags {
    /// Modified since it was filled (write-back levels).
    pub const DIRTY: u8 = 1;
    /// Brought in by a software prefetch and not used yet.
    pub const SW_PREFETCHED: u8 = 2;
    /// Brought in by a hardware prefetcher and not used yet.
    pub const HW_PREFETCHED: u8 = 4;
    /// Either prefetch mark.
    pub const PREFETCHED: u8 = SW_PREFETCHED | HW_PREFETCHED;
}

/// Every nibble 1.
const NIBBLES_1: u64 = 0x1111_1111_1111_1111;
/// The high bit of every nibble.
const NIBBLES_8: u64 = 0x8888_8888_8888_8888;

/// Bit position (4 x rank) of way `w` in the packed recency list `order`.
/// `w` must occur exactly once among the used nibbles, and unused nibbles
/// hold 0xF, which is never a way of a set of fewer than 16 ways.
#[inline(always)]
fn rank_shift(order: u64, w: u64) -> u32 {
    let x = order ^ (w * NIBBLES_1);
    // The lowest zero nibble of `x` is exactly the lowest flagged one
    // (borrows only reach nibbles above it).
    let z = x.wrapping_sub(NIBBLES_1) & !x & NIBBLES_8;
    z.trailing_zeros() & !3
}

/// `order` with way `w` moved to the front (rank 0).
#[inline(always)]
fn promote(order: u64, w: u64) -> u64 {
    let r4 = rank_shift(order, w);
    let below = (1u64 << r4) - 1;
    let upto = below | (0xF << r4);
    (order & !upto) | ((order & below) << 4) | w
}

/// `order` with way `w` moved to the back (rank `ways - 1`).
#[inline]
fn demote(order: u64, w: u64, ways: usize) -> u64 {
    let r4 = rank_shift(order, w);
    let l4 = 4 * (ways as u32 - 1);
    let below = (1u64 << r4) - 1;
    let mid = ((1u64 << l4) - 1) & !below;
    let high = u64::MAX.checked_shl(l4 + 4).unwrap_or(0);
    (order & below) | ((order >> 4) & mid) | (order & high) | (w << l4)
}

/// The recency list of an empty set: way 0 last, so filled first.
fn initial_order(ways: usize) -> u64 {
    let mut o = u64::MAX;
    for rank in 0..ways {
        let way = (ways - 1 - rank) as u64;
        o &= !(0xF << (4 * rank));
        o |= way << (4 * rank);
    }
    o
}

/// A vector of `n` copies of `v`, or the allocation error; with `defer`,
/// the room for them reserved but left empty (untouched memory: the pages
/// are not written until [`Cache::fill_deferred`]).
fn filled<T: Clone>(n: usize, v: T, defer: bool) -> Result<Vec<T>, TryReserveError> {
    let mut out = Vec::new();
    out.try_reserve_exact(n)?;
    if !defer {
        out.resize(n, v);
    }
    Ok(out)
}

/// The way of `set` holding `line`. Compares four ways per step without a
/// branch between them: a miss, which must look at every way, is the case
/// that matters.
#[inline]
fn way_of(set: &[u64], line: u64) -> Option<usize> {
    let mut chunks = set.chunks_exact(4);
    for (c, q) in chunks.by_ref().enumerate() {
        let m = u32::from(q[0] == line)
            | u32::from(q[1] == line) << 1
            | u32::from(q[2] == line) << 2
            | u32::from(q[3] == line) << 3;
        if m != 0 {
            return Some(c * 4 + m.trailing_zeros() as usize);
        }
    }
    let done = set.len() - chunks.remainder().len();
    chunks
        .remainder()
        .iter()
        .position(|&t| t == line)
        .map(|w| done + w)
}

/// A line removed from a cache, with what the hierarchy needs to handle it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// Line address of the removed line (byte address `>> line_shift`).
    pub line: u64,
    /// Its [`flags`] when it left (dirty, prefetched).
    pub flags: u8,
    /// Bytes touched by the owning core (bit per 1/64 of the line), if tracked.
    pub touched: u64,
    /// Instruction that software-prefetched the line, if tracked.
    pub prefetch_ip: u64,
}

/// A set-associative cache.
#[derive(Clone, Debug)]
pub struct Cache {
    /// Sets, ways and how a line finds its set (`sets.rs`).
    geo: Geometry,
    line_shift: u32,
    policy: ReplacementPolicy,
    /// LRU or FIFO with at most [`MAX_ORDERED_WAYS`] ways: `meta` holds
    /// each set's packed recency list.
    ordered: bool,
    /// Mask of `meta` giving the set's most recently used way (or, for
    /// FIFO, the way filled last): 0xF when ordered, else 0xFFFF.
    mru_mask: u64,
    tags: Vec<u64>,
    flags: Vec<u8>,
    /// Per set: the packed recency list when `ordered`, else the most
    /// recently used way.
    meta: Vec<u64>,
    /// Unordered LRU: last use; unordered FIFO: fill time.
    stamp: Vec<u64>,
    /// SRRIP re-reference prediction values.
    rrpv: Vec<u8>,
    rrpv_max: u8,
    /// Tree-PLRU bits per set (node `i` of the heap-ordered tree is bit `i`).
    plru: Vec<u64>,
    plru_leaves: usize,
    clock: u64,
    rng: u64,
    /// Per-line byte masks (empty when not tracked).
    touched: Vec<u64>,
    /// Per-line software prefetch sites (empty when not tracked).
    prefetch_ip: Vec<u64>,
    /// The line touched last, and its index (`INVALID` when none).
    memo_line: u64,
    memo_idx: usize,
    /// Built by [`Cache::try_new_deferred`] and not yet filled: the arrays
    /// are reserved but empty.
    deferred: bool,
}

impl Cache {
    /// Puts the lines of `tags` (an engine's tag lists of `ways` ways,
    /// set after set, `sets::EMPTY` for none) into this cache (empty, of
    /// the same geometry) in the same recency order, with their dirty bits
    /// and, if given, the bytes touched of `masks` (in step with `tags`):
    /// an engine handing its state to the general caches.
    pub(crate) fn install_tags(&mut self, tags: &[u64], masks: Option<&[u64]>, ways: usize) {
        for (s, set) in tags.chunks_exact(ways).enumerate() {
            for (w, &t) in set.iter().enumerate().rev() {
                if t == EMPTY {
                    continue;
                }
                let f = if t & 1 != 0 { flags::DIRTY } else { 0 };
                let (idx, ev) = self.insert(t >> 1, f);
                debug_assert!(ev.is_none());
                if let Some(m) = masks {
                    self.add_touched(idx, m[s * ways + w]);
                }
            }
        }
    }

    /// A cache of `sets` sets of `ways` ways of `1 << line_shift`-byte lines.
    /// `track_touched` and `track_prefetch_ip` allocate the optional side
    /// arrays.
    ///
    /// # Panics
    /// If the state cannot be allocated (see [`Cache::try_new`]).
    pub fn new(
        sets: u64,
        ways: u32,
        line_shift: u32,
        policy: ReplacementPolicy,
        track_touched: bool,
        track_prefetch_ip: bool,
    ) -> Cache {
        Cache::try_new(
            sets,
            ways,
            line_shift,
            policy,
            track_touched,
            track_prefetch_ip,
        )
        .expect("cache state allocation")
    }

    /// Bytes of state [`Cache::try_new`] allocates for this geometry.
    pub fn state_bytes(
        sets: u64,
        ways: u32,
        policy: ReplacementPolicy,
        track_touched: bool,
        track_prefetch_ip: bool,
    ) -> u64 {
        let n = sets.saturating_mul(u64::from(ways));
        let ordered = Cache::is_ordered(policy, ways as usize);
        // Tags and flags; a meta word per set.
        let mut per_line = 8 + 1;
        let mut per_set = 8;
        match policy {
            ReplacementPolicy::Lru | ReplacementPolicy::Fifo if !ordered => per_line += 8,
            ReplacementPolicy::Srrip { .. } => per_line += 1,
            ReplacementPolicy::TreePlru => per_set += 8,
            _ => {}
        }
        if track_touched {
            per_line += 8;
        }
        if track_prefetch_ip {
            per_line += 8;
        }
        n.saturating_mul(per_line)
            .saturating_add(sets.saturating_mul(per_set))
    }

    fn is_ordered(policy: ReplacementPolicy, ways: usize) -> bool {
        matches!(policy, ReplacementPolicy::Lru | ReplacementPolicy::Fifo)
            && ways <= MAX_ORDERED_WAYS
    }

    /// [`Cache::new`] with fallible allocation: an error when the state
    /// ([`Cache::state_bytes`]) cannot be allocated.
    pub fn try_new(
        sets: u64,
        ways: u32,
        line_shift: u32,
        policy: ReplacementPolicy,
        track_touched: bool,
        track_prefetch_ip: bool,
    ) -> Result<Cache, TryReserveError> {
        Cache::build(
            sets,
            ways,
            line_shift,
            policy,
            track_touched,
            track_prefetch_ip,
            false,
        )
    }

    /// [`Cache::try_new`] with the arrays reserved but not yet written:
    /// for a hierarchy whose lean engine runs first (and may never hand
    /// over), writing every empty tag of a large last level at each start
    /// is wasted. Nothing may use the cache before
    /// [`Cache::fill_deferred`], which cannot fail.
    pub(crate) fn try_new_deferred(
        sets: u64,
        ways: u32,
        line_shift: u32,
        policy: ReplacementPolicy,
        track_touched: bool,
        track_prefetch_ip: bool,
    ) -> Result<Cache, TryReserveError> {
        Cache::build(
            sets,
            ways,
            line_shift,
            policy,
            track_touched,
            track_prefetch_ip,
            true,
        )
    }

    /// Writes the empty state of a cache built by
    /// [`Cache::try_new_deferred`] into its reserved arrays (no allocation);
    /// nothing for any other.
    pub(crate) fn fill_deferred(&mut self) {
        if !self.deferred {
            return;
        }
        self.deferred = false;
        let n = self.geo.len();
        let sets = self.geo.sets() as usize;
        // Each array was reserved for exactly the length it gets here
        // (`build`), so none of these resizes allocates.
        self.tags.resize(n, INVALID);
        self.flags.resize(n, 0);
        let m = if self.ordered {
            initial_order(self.geo.ways())
        } else {
            0
        };
        self.meta.resize(sets, m);
        if self.stamp.capacity() != 0 {
            self.stamp.resize(n, 0);
        }
        if self.rrpv.capacity() != 0 {
            self.rrpv.resize(n, self.rrpv_max);
        }
        if self.plru.capacity() != 0 {
            self.plru.resize(sets, 0);
        }
        if self.touched.capacity() != 0 {
            self.touched.resize(n, 0);
        }
        if self.prefetch_ip.capacity() != 0 {
            self.prefetch_ip.resize(n, 0);
        }
    }

    fn build(
        sets: u64,
        ways: u32,
        line_shift: u32,
        policy: ReplacementPolicy,
        track_touched: bool,
        track_prefetch_ip: bool,
        defer: bool,
    ) -> Result<Cache, TryReserveError> {
        let geo = Geometry::new(sets, ways);
        let ways = ways as usize;
        let n = geo.len();
        let ordered = Cache::is_ordered(policy, ways);
        let (rrpv, rrpv_max) = match policy {
            ReplacementPolicy::Srrip { bits } => {
                let max = ((1u16 << bits) - 1) as u8;
                (filled(n, max, defer)?, max)
            }
            _ => (Vec::new(), 0),
        };
        let plru_leaves = ways.next_power_of_two();
        let plru = if policy == ReplacementPolicy::TreePlru {
            filled(sets as usize, 0, defer)?
        } else {
            Vec::new()
        };
        let stamp = match policy {
            ReplacementPolicy::Lru | ReplacementPolicy::Fifo if !ordered => filled(n, 0, defer)?,
            _ => Vec::new(),
        };
        let rng = match policy {
            // splitmix64 of the seed: distinct seeds give distinct, non-zero
            // xorshift states.
            ReplacementPolicy::Random { seed } => {
                let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                (z ^ (z >> 31)) | 1
            }
            _ => 1,
        };
        let meta = if ordered {
            filled(sets as usize, initial_order(ways), defer)?
        } else {
            filled(sets as usize, 0, defer)?
        };
        Ok(Cache {
            geo,
            line_shift,
            policy,
            ordered,
            mru_mask: if ordered { 0xF } else { 0xFFFF },
            tags: filled(n, INVALID, defer)?,
            flags: filled(n, 0, defer)?,
            meta,
            stamp,
            rrpv,
            rrpv_max,
            plru,
            plru_leaves,
            clock: 0,
            rng,
            touched: if track_touched {
                filled(n, 0, defer)?
            } else {
                Vec::new()
            },
            prefetch_ip: if track_prefetch_ip {
                filled(n, 0, defer)?
            } else {
                Vec::new()
            },
            memo_line: INVALID,
            memo_idx: 0,
            deferred: defer,
        })
    }

    /// Log2 of the line size: a byte address `>> line_shift` is a line
    /// address.
    #[inline]
    pub fn line_shift(&self) -> u32 {
        self.line_shift
    }
    /// Ways per set (associativity).
    #[inline]
    pub fn ways(&self) -> usize {
        self.geo.ways()
    }
    /// Number of sets; need not be a power of two.
    #[inline]
    pub fn sets(&self) -> u64 {
        self.geo.sets()
    }
    /// Number of lines the cache can hold.
    pub fn capacity(&self) -> usize {
        self.tags.len()
    }

    #[inline(always)]
    fn set_of(&self, line: u64) -> usize {
        self.geo.set_of(line)
    }

    /// The most recently used way of `set` (FIFO: the way filled last).
    #[inline(always)]
    fn mru_of(&self, set: usize) -> usize {
        (self.meta[set] & self.mru_mask) as usize
    }

    /// Index of `line` if present, without changing replacement state.
    #[inline]
    pub fn find(&self, line: u64) -> Option<usize> {
        let set = self.set_of(line);
        let base = set * self.geo.ways();
        let hint = base + self.mru_of(set);
        if self.tags[hint] == line {
            return Some(hint);
        }
        way_of(&self.tags[base..base + self.geo.ways()], line).map(|w| base + w)
    }

    /// Looks `line` up and, on a hit, updates the replacement state as a use.
    #[inline(always)]
    pub fn lookup(&mut self, line: u64) -> Option<usize> {
        // The memo holds the line touched last in the whole cache, which is
        // therefore the most recently used of its set.
        if self.memo_line == line {
            return Some(self.hit_mru(self.memo_idx));
        }
        let set = self.set_of(line);
        let base = set * self.geo.ways();
        let hint = base + self.mru_of(set);
        if self.tags[hint] == line {
            self.memo_line = line;
            self.memo_idx = hint;
            return Some(self.hit_mru(hint));
        }
        self.lookup_scan(line, set, base)
    }

    /// [`Cache::lookup`] for a cache whose policy is not SRRIP (the only one
    /// whose state a hit on the most recently used way changes).
    #[inline(always)]
    pub(crate) fn lookup_not_srrip(&mut self, line: u64) -> Option<usize> {
        debug_assert!(self.rrpv.is_empty());
        if self.memo_line == line {
            return Some(self.memo_idx);
        }
        let set = self.set_of(line);
        let base = set * self.geo.ways();
        let hint = base + self.mru_of(set);
        if self.tags[hint] == line {
            self.memo_line = line;
            self.memo_idx = hint;
            return Some(hint);
        }
        self.lookup_scan(line, set, base)
    }

    /// The index of `line` if it is the line touched last or its set's
    /// most recently used way, else `None` with nothing changed. Either
    /// hit needs no replacement update but for SRRIP, which the caller
    /// must not use this for.
    #[inline(always)]
    pub(crate) fn lookup_mru(&mut self, line: u64) -> Option<usize> {
        debug_assert!(self.rrpv.is_empty());
        if self.memo_line == line {
            return Some(self.memo_idx);
        }
        let set = self.set_of(line);
        let hint = set * self.geo.ways() + self.mru_of(set);
        if self.tags[hint] == line {
            self.memo_line = line;
            self.memo_idx = hint;
            return Some(hint);
        }
        None
    }

    /// A hit on the most recently used way of its set: LRU, PLRU and FIFO
    /// state is right as it is; SRRIP promotes on every hit.
    #[inline(always)]
    fn hit_mru(&mut self, idx: usize) -> usize {
        if !self.rrpv.is_empty() {
            self.rrpv[idx] = 0;
        }
        idx
    }

    #[inline(never)]
    fn lookup_scan(&mut self, line: u64, set: usize, base: usize) -> Option<usize> {
        let w = way_of(&self.tags[base..base + self.geo.ways()], line)?;
        let idx = base + w;
        if self.ordered {
            if self.policy == ReplacementPolicy::Lru {
                self.meta[set] = promote(self.meta[set], w as u64);
            }
        } else {
            self.touch(set, idx);
            self.meta[set] = w as u64;
        }
        self.memo_line = line;
        self.memo_idx = idx;
        Some(idx)
    }

    /// Marks way `idx` of `set` as used (all but the packed recency list).
    #[inline(never)]
    fn touch(&mut self, set: usize, idx: usize) {
        match self.policy {
            ReplacementPolicy::Lru if !self.ordered => {
                self.clock += 1;
                self.stamp[idx] = self.clock;
            }
            ReplacementPolicy::TreePlru => self.plru_touch(set, idx - set * self.geo.ways()),
            ReplacementPolicy::Srrip { .. } => self.rrpv[idx] = 0,
            _ => {}
        }
    }

    fn plru_touch(&mut self, set: usize, way: usize) {
        let mut bits = self.plru[set];
        // Walk from the root (node 1) to the leaf; at each node point away
        // from the half that holds `way` (bit 1 = victim on the right).
        let mut node = 1usize;
        let mut lo = 0usize;
        let mut span = self.plru_leaves;
        while span > 1 {
            let half = span / 2;
            if way < lo + half {
                bits |= 1 << node; // used left: victim right
                node *= 2;
            } else {
                bits &= !(1 << node); // used right: victim left
                node = node * 2 + 1;
                lo += half;
            }
            span = half;
        }
        self.plru[set] = bits;
    }

    fn plru_victim(&self, set: usize) -> usize {
        let bits = self.plru[set];
        let mut node = 1usize;
        let mut lo = 0usize;
        let mut span = self.plru_leaves;
        while span > 1 {
            let half = span / 2;
            let right = bits & (1 << node) != 0;
            // A right half starting past the last real way holds no way.
            let go_right = right && lo + half < self.geo.ways();
            if go_right {
                node = node * 2 + 1;
                lo += half;
            } else {
                node *= 2;
            }
            span = half;
        }
        lo
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Way to replace in `set`: an invalid way if any, else the policy's pick.
    #[inline]
    fn victim(&mut self, set: usize) -> usize {
        if self.ordered {
            // Empty ways are at the back of the list.
            return ((self.meta[set] >> (4 * (self.geo.ways() - 1))) & 0xF) as usize;
        }
        self.victim_unordered(set)
    }

    fn victim_unordered(&mut self, set: usize) -> usize {
        let base = set * self.geo.ways();
        if let ReplacementPolicy::Lru | ReplacementPolicy::Fifo = self.policy {
            // Invalid ways have stamp 0 and valid ones at least 1: one scan
            // finds an invalid way first, else the oldest.
            let s = &self.stamp[base..base + self.geo.ways()];
            let (mut best, mut oldest) = (0, s[0]);
            for (w, &t) in s.iter().enumerate().skip(1) {
                if t < oldest {
                    best = w;
                    oldest = t;
                }
            }
            return best;
        }
        if let Some(w) = self.tags[base..base + self.geo.ways()]
            .iter()
            .position(|&t| t == INVALID)
        {
            return w;
        }
        match self.policy {
            ReplacementPolicy::Lru | ReplacementPolicy::Fifo => unreachable!("handled above"),
            ReplacementPolicy::TreePlru => self.plru_victim(set),
            ReplacementPolicy::Random { .. } => {
                (self.next_random() % self.geo.ways() as u64) as usize
            }
            ReplacementPolicy::Srrip { .. } => {
                let r = &mut self.rrpv[base..base + self.geo.ways()];
                let oldest = *r.iter().max().unwrap_or(&0);
                let age = self.rrpv_max - oldest;
                if age > 0 {
                    for v in r.iter_mut() {
                        *v += age;
                    }
                }
                r.iter().position(|&v| v == self.rrpv_max).unwrap_or(0)
            }
        }
    }

    /// Fills `line` (which must not be present) with `flags`, returning its
    /// index and the valid line it replaced, if any.
    #[inline]
    pub fn insert(&mut self, line: u64, flags: u8) -> (usize, Option<Evicted>) {
        debug_assert!(self.find(line).is_none());
        let set = self.set_of(line);
        let w = self.victim(set);
        let idx = set * self.geo.ways() + w;
        let old = std::mem::replace(&mut self.tags[idx], line);
        let old_flags = std::mem::replace(&mut self.flags[idx], flags);
        let evicted = (old != INVALID).then(|| Evicted {
            line: old,
            flags: old_flags,
            touched: self.touched.get(idx).copied().unwrap_or(0),
            prefetch_ip: self.prefetch_ip.get(idx).copied().unwrap_or(0),
        });
        if let Some(t) = self.touched.get_mut(idx) {
            *t = 0;
        }
        if let Some(p) = self.prefetch_ip.get_mut(idx) {
            *p = 0;
        }
        if self.ordered {
            self.meta[set] = promote(self.meta[set], w as u64);
        } else {
            match self.policy {
                ReplacementPolicy::Lru | ReplacementPolicy::Fifo => {
                    self.clock += 1;
                    self.stamp[idx] = self.clock;
                }
                ReplacementPolicy::TreePlru => self.plru_touch(set, w),
                ReplacementPolicy::Srrip { .. } => self.rrpv[idx] = self.rrpv_max - 1,
                ReplacementPolicy::Random { .. } => {}
            }
            self.meta[set] = w as u64;
        }
        self.memo_line = line;
        self.memo_idx = idx;
        (idx, evicted)
    }

    fn evicted_at(&self, idx: usize) -> Evicted {
        Evicted {
            line: self.tags[idx],
            flags: self.flags[idx],
            touched: self.touched.get(idx).copied().unwrap_or(0),
            prefetch_ip: self.prefetch_ip.get(idx).copied().unwrap_or(0),
        }
    }

    /// Removes `line` if present, returning what it held. Most calls (the
    /// snoops of coherence) find nothing: the search is inlined, the
    /// removal is not.
    #[inline]
    pub fn invalidate(&mut self, line: u64) -> Option<Evicted> {
        let idx = self.find(line)?;
        Some(self.remove_at(line, idx))
    }

    /// Removes `line`, found at `idx`.
    #[inline(never)]
    fn remove_at(&mut self, line: u64, idx: usize) -> Evicted {
        let e = self.evicted_at(idx);
        self.tags[idx] = INVALID;
        self.flags[idx] = 0;
        if !self.rrpv.is_empty() {
            self.rrpv[idx] = self.rrpv_max;
        }
        if !self.stamp.is_empty() {
            self.stamp[idx] = 0;
        }
        if self.ordered {
            let set = self.set_of(line);
            let w = (idx - set * self.geo.ways()) as u64;
            self.meta[set] = demote(self.meta[set], w, self.geo.ways());
        }
        if self.memo_idx == idx {
            self.memo_line = INVALID;
        }
        e
    }

    /// The [`flags`] of the line at index `idx` (as returned by
    /// [`find`](Cache::find), [`lookup`](Cache::lookup) or
    /// [`insert`](Cache::insert)).
    #[inline]
    pub fn flags(&self, idx: usize) -> u8 {
        self.flags[idx]
    }
    /// Sets the [`flags`] in `f` on the line at index `idx`, keeping the others.
    #[inline]
    pub fn set_flags(&mut self, idx: usize, f: u8) {
        self.flags[idx] |= f;
    }
    /// Clears the [`flags`] in `f` on the line at index `idx`.
    #[inline]
    pub fn clear_flags(&mut self, idx: usize, f: u8) {
        self.flags[idx] &= !f;
    }
    /// ORs `mask` into the touched-bytes mask of way `idx` (if tracked).
    #[inline]
    pub fn add_touched(&mut self, idx: usize, mask: u64) {
        if let Some(t) = self.touched.get_mut(idx) {
            *t |= mask;
        }
    }
    /// The touched-bytes mask of way `idx`, one bit per 1/64 of the line
    /// (0 when not tracked).
    pub fn touched(&self, idx: usize) -> u64 {
        self.touched.get(idx).copied().unwrap_or(0)
    }
    /// Whether this cache was built with `track_touched` (false sharing
    /// detection needs it).
    pub fn tracks_touched(&self) -> bool {
        !self.touched.is_empty()
    }
    /// The software prefetch site recorded for way `idx` (0 if untracked).
    pub fn prefetch_ip(&self, idx: usize) -> u64 {
        self.prefetch_ip.get(idx).copied().unwrap_or(0)
    }
    /// Records `ip` as the software prefetch site of way `idx` (ignored when
    /// not tracked).
    pub fn set_prefetch_ip(&mut self, idx: usize, ip: u64) {
        if let Some(p) = self.prefetch_ip.get_mut(idx) {
            *p = ip;
        }
    }

    /// Every valid line address, in storage order (for tests and reports).
    pub fn lines(&self) -> impl Iterator<Item = u64> + '_ {
        self.tags.iter().copied().filter(|&t| t != INVALID)
    }
    /// Whether `line` is present.
    pub fn contains(&self, line: u64) -> bool {
        self.find(line).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ReplacementPolicy as P;

    /// Accesses `seq` (line numbers) in a 1-set cache of `ways` ways and
    /// returns the hit (true) / miss (false) string, plus the victims.
    fn run(policy: P, ways: u32, seq: &[u64]) -> (String, Vec<u64>) {
        let mut c = Cache::new(1, ways, 0, policy, false, false);
        let mut out = String::new();
        let mut victims = Vec::new();
        for &l in seq {
            if c.lookup(l).is_some() {
                out.push('H');
            } else {
                out.push('m');
                if let (_, Some(e)) = c.insert(l, 0) {
                    victims.push(e.line);
                }
            }
        }
        (out, victims)
    }

    #[test]
    fn way_of_finds_every_position_and_misses() {
        for ways in 1..=20u64 {
            let set: Vec<u64> = (100..100 + ways).collect();
            for (w, &line) in set.iter().enumerate() {
                assert_eq!(way_of(&set, line), Some(w));
            }
            assert_eq!(way_of(&set, 7), None);
        }
    }

    #[test]
    fn lru_hand_computed() {
        // 2 ways: A B A C (evicts B) B (evicts A) A (evicts C)
        let (hm, v) = run(P::Lru, 2, &[1, 2, 1, 3, 2, 1]);
        assert_eq!(hm, "mmHmmm");
        assert_eq!(v, vec![2, 1, 3]);
    }

    #[test]
    fn fifo_hand_computed() {
        // FIFO ignores the hit on 1: C evicts A (oldest fill), then 2 hits.
        let (hm, v) = run(P::Fifo, 2, &[1, 2, 1, 3, 2, 1]);
        assert_eq!(hm, "mmHmHm");
        assert_eq!(v, vec![1, 2]);
    }

    #[test]
    fn tree_plru_hand_computed() {
        // 4 ways, fill 0..3 in ways 0..3. Tree after touching way 3:
        // root points left (victim in {0,1}), node2 after touching way 1
        // points left: victim way 0 = line 10.
        let (hm, v) = run(P::TreePlru, 4, &[10, 11, 12, 13, 14]);
        assert_eq!(hm, "mmmmm");
        assert_eq!(v, vec![10]);
        // Touch 10 (way 0) then insert: root now points right (ways 2,3);
        // node3 last touched way 3 -> victim way 2 = line 12.
        let (_, v) = run(P::TreePlru, 4, &[10, 11, 12, 13, 10, 14]);
        assert_eq!(v, vec![12]);
    }

    #[test]
    fn tree_plru_non_power_of_two_never_picks_missing_way() {
        let mut c = Cache::new(1, 3, 0, P::TreePlru, false, false);
        for l in 0..100u64 {
            if c.lookup(l % 7).is_none() {
                let (idx, _) = c.insert(l % 7, 0);
                assert!(idx < 3);
            }
        }
        assert_eq!(c.lines().count(), 3);
    }

    #[test]
    fn srrip_hand_computed() {
        // 2-bit SRRIP, 2 ways. Fill A, B (rrpv 2, 2). Hit A (0). Insert C:
        // no rrpv 3, age by 1 -> A 1, B 3: evict B. Insert D: C 2, A 1 ->
        // age by 1 -> C 3, A 2: evict C.
        let (hm, v) = run(P::Srrip { bits: 2 }, 2, &[1, 2, 1, 3, 4]);
        assert_eq!(hm, "mmHmm");
        assert_eq!(v, vec![2, 3]);
    }

    #[test]
    fn srrip_scan_resistance() {
        // A hot line survives a scan of one-time lines in a 4-way set.
        let mut seq = vec![1, 1];
        for s in 100..120 {
            seq.push(s);
            seq.push(1);
        }
        let (hm, _) = run(P::Srrip { bits: 2 }, 4, &seq);
        assert_eq!(hm.matches('H').count(), 21);
    }

    #[test]
    fn random_is_deterministic_per_seed_and_fills_invalid_first() {
        let seq: Vec<u64> = (0..200).map(|i| (i * 7919) % 13).collect();
        let a = run(P::Random { seed: 42 }, 4, &seq);
        let b = run(P::Random { seed: 42 }, 4, &seq);
        let c = run(P::Random { seed: 43 }, 4, &seq);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.0.starts_with("mmmm"));
    }

    #[test]
    fn modulo_set_index_for_non_power_of_two_sets() {
        // 3 sets, 1 way: lines 0 and 3 conflict, 0 and 1 do not.
        let mut c = Cache::new(3, 1, 0, P::Lru, false, false);
        c.insert(0, 0);
        c.insert(1, 0);
        assert!(c.contains(0) && c.contains(1));
        let (_, e) = c.insert(3, 0);
        assert_eq!(e.unwrap().line, 0);
    }

    #[test]
    fn packed_recency_list_moves_one_way_and_keeps_the_rest_in_order() {
        // Ways 0..4 of a 5-way set, most recent first: 3 1 4 0 2.
        let ranks =
            |o: u64, n: usize| -> Vec<u64> { (0..n).map(|r| (o >> (4 * r)) & 0xF).collect() };
        let mut o = u64::MAX;
        for (r, w) in [3u64, 1, 4, 0, 2].iter().enumerate() {
            o &= !(0xF << (4 * r));
            o |= w << (4 * r);
        }
        assert_eq!(ranks(promote(o, 0), 5), vec![0, 3, 1, 4, 2]);
        assert_eq!(ranks(promote(o, 3), 5), vec![3, 1, 4, 0, 2]);
        assert_eq!(ranks(promote(o, 2), 5), vec![2, 3, 1, 4, 0]);
        assert_eq!(ranks(demote(o, 1, 5), 5), vec![3, 4, 0, 2, 1]);
        assert_eq!(ranks(demote(o, 2, 5), 5), vec![3, 1, 4, 0, 2]);
        // Unused nibbles stay 0xF.
        assert_eq!(promote(o, 0) >> 20, u64::MAX >> 20);
        assert_eq!(demote(o, 3, 5) >> 20, u64::MAX >> 20);
        // A full 16-way list: every position.
        let full = initial_order(16);
        assert_eq!(ranks(full, 16), (0..16).rev().collect::<Vec<_>>());
        for w in 0..16 {
            let p = ranks(promote(full, w), 16);
            assert_eq!(p[0], w);
            let d = ranks(demote(full, w, 16), 16);
            assert_eq!(d[15], w);
            let mut rest: Vec<u64> = (0..16).rev().filter(|&x| x != w).collect();
            assert_eq!(&p[1..], &rest[..]);
            assert_eq!(&d[..15], &rest[..]);
            rest.clear();
        }
    }

    /// LRU and FIFO (packed lists up to 16 ways, stamps above) against a
    /// naive model: per set a list of lines, most recent (LRU) or newest
    /// fill (FIFO) first, with lookups, fills and invalidations.
    #[test]
    fn lru_and_fifo_agree_with_naive_lists_for_every_width() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for policy in [P::Lru, P::Fifo] {
            for ways in 1..=40usize {
                for sets in [1u64, 3, 4] {
                    let mut c = Cache::new(sets, ways as u32, 0, policy, false, false);
                    let mut naive: Vec<Vec<u64>> = vec![Vec::new(); sets as usize];
                    let universe = (ways as u64 + 3) * sets;
                    for step in 0..3000 {
                        let line = next() % universe;
                        let set = &mut naive[(line % sets) as usize];
                        let pos = set.iter().position(|&l| l == line);
                        if next() % 8 == 0 {
                            let got = c.invalidate(line).map(|e| e.line);
                            assert_eq!(
                                got,
                                pos.map(|_| line),
                                "{policy:?} {ways} ways step {step}"
                            );
                            if let Some(p) = pos {
                                set.remove(p);
                            }
                            continue;
                        }
                        let hit = c.lookup(line).is_some();
                        assert_eq!(hit, pos.is_some(), "{policy:?} {ways} ways step {step}");
                        match pos {
                            Some(p) => {
                                if policy == P::Lru {
                                    set.remove(p);
                                    set.insert(0, line);
                                }
                            }
                            None => {
                                let (_, e) = c.insert(line, 0);
                                let want = (set.len() == ways).then(|| set.pop().unwrap());
                                assert_eq!(
                                    e.map(|e| e.line),
                                    want,
                                    "{policy:?} {ways} ways step {step}"
                                );
                                set.insert(0, line);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn invalidate_then_lookup_misses() {
        let mut c = Cache::new(4, 2, 6, P::Lru, false, false);
        c.insert(5, 0);
        assert!(c.lookup(5).is_some());
        assert!(c.invalidate(5).is_some());
        assert!(c.lookup(5).is_none());
    }

    /// A cache built deferred (arrays reserved, not written) and then
    /// filled behaves as one built whole, for every policy and both side
    /// arrays: the same lookups, victims (with flags, bytes touched and
    /// prefetch sites) and lines, on the same pseudo-random stream.
    #[test]
    fn deferred_cache_once_filled_equals_a_new_one() {
        for policy in [
            P::Lru,
            P::Fifo,
            P::TreePlru,
            P::Random { seed: 3 },
            P::Srrip { bits: 2 },
        ] {
            for ways in [1u32, 3, 8, 20] {
                let mut a = Cache::new(5, ways, 6, policy, true, true);
                let mut b = Cache::try_new_deferred(5, ways, 6, policy, true, true).unwrap();
                assert!(b.tags.is_empty() && b.tags.capacity() >= 5 * ways as usize);
                b.fill_deferred();
                let mut x = 0x2545_f491_4f6c_dd1du64;
                for step in 0..2000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let line = x % 97;
                    let (la, lb) = (a.lookup(line), b.lookup(line));
                    assert_eq!(la, lb, "{policy:?} {ways} ways step {step}");
                    if la.is_none() {
                        let f = (x >> 20) as u8 & flags::DIRTY;
                        let (ia, ea) = a.insert(line, f);
                        let (ib, eb) = b.insert(line, f);
                        assert_eq!((ia, ea), (ib, eb), "{policy:?} {ways} ways step {step}");
                        a.add_touched(ia, x >> 32);
                        b.add_touched(ib, x >> 32);
                    }
                }
                let (mut la, mut lb): (Vec<u64>, Vec<u64>) =
                    (a.lines().collect(), b.lines().collect());
                la.sort_unstable();
                lb.sort_unstable();
                assert_eq!(la, lb, "{policy:?} {ways} ways");
            }
        }
    }
}
