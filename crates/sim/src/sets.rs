//! What the simulator's three engines share: how a line finds its set
//! ([`Geometry`], for the general caches of `cache.rs`, the lean engine of
//! `lean.rs` and the Jaguar engine of `jaguar.rs`), the recency lists of
//! the two engines (the tag lists below), and the constants of all three
//! (the top of the address space, the empty way, the engines' limits, a
//! first-level hit).
//!
//! **Tag lists.** The lean and Jaguar engines keep each set as its tags in
//! recency order, most recent first, with the dirty bit in the tag's low
//! bit (`line << 1 | dirty`; lines of at least 4 bytes, so `line < 2^62`
//! and no tag has its top bit set: [`EMPTY`] is no line's). A hit on a
//! set's most recent line is one load and one compare ([`reference`]'s
//! first test, or the engines' own inlined look); anything else is one
//! pass over the set that moves each tag one place back until it meets the
//! line or falls off the end (Cachegrind's own layout). The Jaguar
//! engine's data first levels move a bytes-touched mask in step with each
//! tag ([`reference_with_masks`], [`remove_at`] on both arrays).
//!
//! The general caches keep their ways in place instead, with a policy's
//! state beside them (for LRU and FIFO a recency list packed in one word
//! per set, in `cache.rs`): their side arrays (flags, bytes touched,
//! prefetch sites, SRRIP values) are indexed by way, which moving tags
//! would have to move too, for every policy. That list and the general
//! caches' way search (raw line tags, four compared at a time) stay there.

use crate::{AccessResult, ServedBy};

/// Addresses from here up may reach the end of the 64-bit address space
/// (every engine checks this before [`clamp_to_top`]).
pub(crate) const TOP_REGION: u64 = u64::MAX - (u32::MAX as u64) - 1;

/// The last byte of the 64-bit address space aliases the byte before it:
/// an access is cut to end at `u64::MAX - 1`, so that `addr + size` never
/// overflows and no line number equals the tag of an empty way (with
/// 1-byte lines). Sizes of 0 count as 1.
#[cold]
pub(crate) fn clamp_to_top(addr: u64, size: u32) -> (u64, u32) {
    const LAST: u64 = u64::MAX - 1;
    let addr = addr.min(LAST);
    let room = LAST - addr + 1;
    (addr, u64::from(size.max(1)).min(room) as u32)
}

/// Tag of an empty way, in every engine: in the general caches a line
/// address (a real line could only equal it with a 1-byte line at the last
/// byte of memory, which [`clamp_to_top`] keeps out), in a tag list a
/// `line << 1 | dirty` tag (never: see the module header).
pub(crate) const EMPTY: u64 = u64::MAX;

/// The widest set the lean and Jaguar engines take: a miss moves every
/// tag of its set.
pub(crate) const MAX_WAYS: u32 = 32;

/// The largest instance the lean and Jaguar engines take, in lines: their
/// tags are allocated beside the general caches (which take over for
/// prefetches and flushes).
pub(crate) const MAX_LINES: u64 = 1 << 24;

/// A demand access within one line that hit the first level.
pub(crate) const L1_HIT: AccessResult = AccessResult::new(ServedBy::L1, 1);

/// Bytes of state a tag-list engine needs for an instance of `lines`
/// lines: a tag each, and with `masks` a bytes-touched mask each.
pub(crate) fn tag_bytes(lines: u64, masks: bool) -> u64 {
    lines.saturating_mul(if masks { 16 } else { 8 })
}

/// How lines map to sets: `sets` sets (a power of two or not) of `ways`
/// ways, stored set after set (`ways` entries each).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    sets: u64,
    /// `sets - 1` when `sets` is a power of two, else `u64::MAX` (modulo).
    mask: u64,
    ways: usize,
}

impl Geometry {
    /// `sets` sets of `ways` ways.
    pub(crate) fn new(sets: u64, ways: u32) -> Geometry {
        Geometry {
            sets,
            mask: if sets.is_power_of_two() {
                sets - 1
            } else {
                u64::MAX
            },
            ways: ways as usize,
        }
    }

    /// Number of sets.
    #[inline(always)]
    pub(crate) fn sets(&self) -> u64 {
        self.sets
    }

    /// Ways per set.
    #[inline(always)]
    pub(crate) fn ways(&self) -> usize {
        self.ways
    }

    /// Lines (entries) in all: `sets * ways`.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.sets as usize * self.ways
    }

    /// The set of `line`.
    #[inline(always)]
    pub(crate) fn set_of(&self, line: u64) -> usize {
        if self.mask != u64::MAX {
            (line & self.mask) as usize
        } else {
            (line % self.sets) as usize
        }
    }

    /// The index of the first way of `line`'s set.
    #[inline(always)]
    pub(crate) fn base(&self, line: u64) -> usize {
        self.set_of(line) * self.ways
    }

    /// `sets - 1` when `sets` is a power of two: the set of a line is then
    /// `line & mask`.
    #[inline]
    pub(crate) fn pow2_mask(&self) -> Option<u64> {
        (self.mask != u64::MAX).then_some(self.mask)
    }

    /// An engine's quick look at an instance whose first entry is at
    /// `off`, as (first entry, set mask, ways), so that the first way of
    /// `line`'s set is `off + (line & mask) * ways`; for sets that are not
    /// a power of two, `(empty, 0, 0)`: every line looks at the entry
    /// `empty`, which the engine keeps empty, and never hits.
    #[inline]
    pub(crate) fn quick(&self, off: usize, empty: usize) -> (usize, u64, usize) {
        match self.pow2_mask() {
            Some(mask) => (off, mask, self.ways),
            None => (empty, 0, 0),
        }
    }
}

/// What [`reference`] found.
pub(crate) enum Found {
    Hit,
    /// A miss that filled an empty way.
    Filled,
    /// A miss that evicted this tag.
    Evicted(u64),
}

/// Looks `line` up in `set` (a tag list) and makes it the most recent,
/// ORing `dirty` into it; on a miss fills it (with `dirty`), pushing the
/// others back one place. One pass: each tag moves back until the pass
/// meets the line or falls off the end (the victim).
#[inline(always)]
pub(crate) fn reference(set: &mut [u64], line: u64, dirty: u64) -> Found {
    let first = set[0];
    if first >> 1 == line {
        set[0] = first | dirty;
        return Found::Hit;
    }
    let mut carry = first;
    set[0] = line << 1 | dirty;
    for t in set[1..].iter_mut() {
        let here = *t;
        *t = carry;
        if here >> 1 == line {
            set[0] |= here & 1;
            return Found::Hit;
        }
        carry = here;
    }
    if carry == EMPTY {
        Found::Filled
    } else {
        Found::Evicted(carry)
    }
}

/// [`reference`] for a set whose tags each have a bytes-touched mask,
/// `masks_of()` (as long as `set`; asked for only past a hit on the first
/// way): the masks move with their tags, a filled line's is empty.
#[inline(always)]
pub(crate) fn reference_with_masks<'m>(
    set: &mut [u64],
    line: u64,
    dirty: u64,
    masks_of: impl FnOnce() -> &'m mut [u64],
) -> Found {
    let first = set[0];
    if first >> 1 == line {
        set[0] = first | dirty;
        return Found::Hit;
    }
    let masks = masks_of();
    let ways = set.len();
    let mut carry = (first, masks[0]);
    set[0] = line << 1 | dirty;
    masks[0] = 0;
    for w in 1..ways {
        let here = (set[w], masks[w]);
        set[w] = carry.0;
        masks[w] = carry.1;
        if here.0 >> 1 == line {
            set[0] |= here.0 & 1;
            masks[0] = here.1;
            return Found::Hit;
        }
        carry = here;
    }
    if carry.0 == EMPTY {
        Found::Filled
    } else {
        Found::Evicted(carry.0)
    }
}

/// The way of `set` (a tag list) holding `line`.
#[inline(always)]
pub(crate) fn position(set: &[u64], line: u64) -> Option<usize> {
    set.iter().position(|&t| t >> 1 == line)
}

/// Whether `set` (a tag list) holds `line`.
#[inline]
pub(crate) fn holds(set: &[u64], line: u64) -> bool {
    set.iter().any(|&t| t >> 1 == line)
}

/// Makes `line`, if `set` (a tag list) holds it, the most recent of `set`,
/// ORing `dirty` into it: true; false, with nothing changed, if it does
/// not.
#[inline(always)]
pub(crate) fn promote(set: &mut [u64], line: u64, dirty: u64) -> bool {
    match position(set, line) {
        Some(p) => {
            let s = &mut set[..=p];
            rotate(s);
            s[0] |= dirty;
            true
        }
        None => false,
    }
}

/// Moves the last element of `s` to its front, the others back one place
/// (a tag list's way `s.len() - 1` made the most recent, or its mask).
#[inline(always)]
pub(crate) fn rotate(s: &mut [u64]) {
    let mut carry = s[s.len() - 1];
    for x in s.iter_mut() {
        carry = std::mem::replace(x, carry);
    }
}

/// Removes way `w` of `s` (a tag list, or its masks), moving the ways
/// behind it up one place and putting `empty` last; returns what it held.
#[inline]
pub(crate) fn remove_at(s: &mut [u64], w: usize, empty: u64) -> u64 {
    let t = s[w];
    s.copy_within(w + 1.., w);
    let last = s.len() - 1;
    s[last] = empty;
    t
}

/// Marks `line` dirty if `set` (a tag list) holds it, with no change of
/// recency.
#[inline]
pub(crate) fn mark_dirty(set: &mut [u64], line: u64) {
    if let Some(t) = set.iter_mut().find(|t| **t >> 1 == line) {
        *t |= 1;
    }
}

/// Every line held by `tags` (tag lists), as byte addresses of
/// `1 << shift`-byte lines.
pub(crate) fn lines(tags: &[u64], shift: u32) -> Vec<u64> {
    tags.iter()
        .filter(|&&t| t != EMPTY)
        .map(|&t| (t >> 1) << shift)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(line: u64, dirty: bool) -> u64 {
        line << 1 | u64::from(dirty)
    }

    #[test]
    fn geometry_indexes_by_mask_or_modulo() {
        let g = Geometry::new(64, 8);
        assert_eq!((g.set_of(65), g.base(65), g.len()), (1, 8, 512));
        assert_eq!(g.pow2_mask(), Some(63));
        assert_eq!(g.quick(100, 7), (100, 63, 8));
        let g = Geometry::new(3, 2);
        assert_eq!((g.set_of(7), g.base(7), g.len()), (1, 2, 6));
        assert_eq!(g.pow2_mask(), None);
        assert_eq!(g.quick(100, 7), (7, 0, 0));
    }

    /// `reference` against a naive list, and `reference_with_masks` moving
    /// the masks with their tags.
    #[test]
    fn reference_keeps_recency_order_with_and_without_masks() {
        let mut set = [EMPTY; 3];
        let mut masked = [EMPTY; 3];
        let mut masks = [0u64; 3];
        let mut naive: Vec<(u64, bool, u64)> = Vec::new();
        let seq = [
            (1, false),
            (2, true),
            (1, false),
            (3, false),
            (4, false),
            (2, true),
        ];
        for (n, &(line, d)) in seq.iter().enumerate() {
            let want = match naive.iter().position(|x| x.0 == line) {
                Some(p) => {
                    let (l, dd, m) = naive.remove(p);
                    naive.insert(0, (l, dd || d, m));
                    None
                }
                None => {
                    naive.insert(0, (line, d, 0));
                    (naive.len() > 3).then(|| naive.pop().unwrap())
                }
            };
            let got = reference(&mut set, line, u64::from(d));
            let got_m = reference_with_masks(&mut masked, line, u64::from(d), || &mut masks);
            for g in [got, got_m] {
                match (g, want) {
                    (Found::Evicted(t), Some((l, dd, _))) => assert_eq!(t, tag(l, dd)),
                    (Found::Hit | Found::Filled, None) => {}
                    _ => panic!("step {n}"),
                }
            }
            masks[0] |= 1 << n;
            naive[0].2 |= 1 << n;
            let want_tags: Vec<u64> = naive.iter().map(|x| tag(x.0, x.1)).collect();
            assert_eq!(&set[..naive.len()], &want_tags[..], "step {n}");
            assert_eq!(&masked[..naive.len()], &want_tags[..], "step {n}");
            let want_masks: Vec<u64> = naive.iter().map(|x| x.2).collect();
            assert_eq!(&masks[..naive.len()], &want_masks[..], "step {n}");
        }
    }

    #[test]
    fn promote_remove_and_mark_dirty() {
        let mut set = [tag(5, false), tag(6, false), tag(7, true), EMPTY];
        assert!(!promote(&mut set, 9, 1));
        assert!(promote(&mut set, 7, 0));
        assert_eq!(set, [tag(7, true), tag(5, false), tag(6, false), EMPTY]);
        mark_dirty(&mut set, 6);
        assert_eq!(set[2], tag(6, true));
        assert!(holds(&set, 5) && !holds(&set, 9));
        assert_eq!(remove_at(&mut set, 1, EMPTY), tag(5, false));
        assert_eq!(set, [tag(7, true), tag(6, true), EMPTY, EMPTY]);
        assert_eq!(lines(&set, 6), vec![7 << 6, 6 << 6]);
    }
}
