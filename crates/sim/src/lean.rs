//! The lean engine: the whole simulator for hierarchies of Cachegrind's
//! shape, chosen once when the [`crate::Hierarchy`] is built.
//!
//! The shape: a private first level per core (split instruction and data,
//! or unified) and at most one unified level below it shared by every
//! core; true LRU everywhere; write-back and write-allocate; the level
//! below looked up only on a first-level miss; no coherence, prefetchers,
//! miss classification or inclusion rule; lines of at least 4 bytes; an
//! access straddling lines counts once (`StraddleMode::Whole`). Cachegrind's own
//! model and Cache Lab's are of this shape.
//!
//! Each set is a tag list (`sets.rs`, shared with the Jaguar engine): its
//! tags in recency order, most recent first, with the dirty bit in the
//! tag's low bit (`line << 1 | dirty`): a first-level hit on the most
//! recent line of its set is one load and one compare; in the batch loops
//! a hit further back is a search of the set and a move of the line to
//! its front ([`sets::promote`]); elsewhere, and for a miss, the walk
//! makes one pass over the set that moves each tag one place back until
//! it meets the line or falls off the end ([`sets::reference`],
//! Cachegrind's own layout). There are no flags, side arrays, memo or
//! recency words.
//!
//! The rules are those of the general walk (`Hierarchy::walk_simple`) for
//! this shape, in the same order: first-level lookups of every line the
//! access touches, fills on a miss; then, after a miss, the same lookups
//! below (as reads: the first level absorbed the write); then the victims,
//! in order: a dirty first-level victim is written back (counted) and marks
//! the copy below dirty if there is one. `tests/properties.rs` checks the
//! engine against the general walk and against a naive Cachegrind model.
//!
//! A replay that knows an instruction fetch follows one in the same line
//! with only data accesses between may skip even the quick look
//! ([`Lean::fetch_or_hit`]): on a split first level that fetch is always a
//! hit on the most recent line of its set, and changes nothing but the
//! hit count.
//!
//! Software prefetches, non-temporal stores and flushes are not handled
//! here: the hierarchy hands the engine's state to the general caches
//! ([`Lean::install`]) before the first one and never comes back.

use crate::cache::Cache;
use crate::sets::{self, clamp_to_top, promote, Found, Geometry, EMPTY, L1_HIT, TOP_REGION};
use crate::stats::LevelStats;
use crate::{Access, AccessKind, AccessResult, ServedBy};

/// No level below the first (an index into [`Lean::caches`]).
pub(crate) const NONE: u16 = u16::MAX;

/// No line: [`Lean::fetch_or_hit`]'s "the previous fetch is not known".
/// No line number is this (a line number is an address shifted right by
/// at least 2).
pub const NO_LINE: u64 = u64::MAX;

/// One cache instance of the lean engine.
pub(crate) struct LeanCache {
    /// Where this instance's `sets * ways` tags start in [`Lean`]'s one
    /// array of tags (each set most recent first).
    off: usize,
    geo: Geometry,
    shift: u32,
    /// For a first-level instance, the smaller of its line shift and that
    /// of the level below (set by [`Lean::try_new`]): an access within one
    /// such line is within one line at both levels, the walk of one line
    /// ([`Levels::walk_one`]). Its own shift otherwise.
    walk_shift: u32,
    /// Lookups by demand kind: instruction fetch, read, write,
    /// read-modify-write (counted as writes).
    acc: [u64; 4],
    /// Misses by the same kinds.
    miss: [u64; 4],
    evictions: u64,
    writebacks: u64,
}

impl LeanCache {
    /// An empty instance of `sets` sets of `ways` ways of `1 << shift`-byte
    /// lines (its tags are allocated by [`Lean::try_new`]).
    pub(crate) fn new(sets: u64, ways: u32, shift: u32) -> LeanCache {
        LeanCache {
            off: 0,
            geo: Geometry::new(sets, ways),
            shift,
            walk_shift: shift,
            acc: [0; 4],
            miss: [0; 4],
            evictions: 0,
            writebacks: 0,
        }
    }

    /// Lines this instance holds.
    fn len(&self) -> usize {
        self.geo.len()
    }

    /// The index in the array of tags of the first way of `line`'s set.
    #[inline(always)]
    fn base_of(&self, line: u64) -> usize {
        self.off + self.geo.base(line)
    }

    /// `line`'s set in the array of tags.
    #[inline(always)]
    fn set<'t>(&self, tags: &'t mut [u64], line: u64) -> &'t mut [u64] {
        let base = self.base_of(line);
        &mut tags[base..base + self.geo.ways()]
    }

    /// Looks `line` up and makes it the most recent of its set
    /// ([`sets::reference`]).
    #[inline]
    fn reference(&self, tags: &mut [u64], line: u64, dirty: u64) -> Found {
        sets::reference(self.set(tags, line), line, dirty)
    }

    /// Marks `line` dirty if present, with no change of recency.
    #[inline]
    fn mark_dirty(&self, tags: &mut [u64], line: u64) {
        sets::mark_dirty(self.set(tags, line), line);
    }

    /// Whether `line` is present.
    fn contains(&self, tags: &[u64], line: u64) -> bool {
        let base = self.base_of(line);
        sets::holds(&tags[base..base + self.geo.ways()], line)
    }

    /// Every line held, as byte addresses.
    fn lines(&self, tags: &[u64]) -> Vec<u64> {
        sets::lines(&tags[self.off..self.off + self.len()], self.shift)
    }

    /// The counters, as the general caches keep them.
    pub(crate) fn stats(&self) -> LevelStats {
        LevelStats {
            ifetch: self.acc[0],
            ifetch_misses: self.miss[0],
            reads: self.acc[1],
            read_misses: self.miss[1],
            writes: self.acc[2] + self.acc[3],
            write_misses: self.miss[2] + self.miss[3],
            evictions: self.evictions,
            writebacks: self.writebacks,
            ..LevelStats::default()
        }
    }

    /// Puts this instance's lines into `c` (empty, of the same geometry)
    /// in the same recency order, with their dirty bits.
    fn install(&self, tags: &[u64], c: &mut Cache) {
        let tags = &tags[self.off..self.off + self.len()];
        c.install_tags(tags, None, self.geo.ways());
    }
}

/// The lean engine's state: one [`LeanCache`] per instance of the
/// hierarchy (same indices), and per core its first-level instances and
/// the level below.
pub(crate) struct Lean {
    /// Every instance's tags, one after the other.
    tags: Vec<u64>,
    /// The instances and the walk's scratch: apart from `tags`, so that
    /// the batch loops hold the tags as a local slice (its pointer and
    /// length in registers, not reloaded after each store into it) while
    /// calling the walk.
    levels: Levels,
    /// Per core: instruction-side first level, data-side first level, the
    /// level below or [`NONE`].
    cores: Vec<[u16; 3]>,
    /// Per core and demand kind (fetch, read, write, read-modify-write):
    /// the first level's geometry for the quick look at the most recent
    /// line of a set, and the hits it decided. Indexed by kind, not by
    /// side, so that choosing one is an indexed load: by side (0 or 1) the
    /// compiler picks with branches on the kind, which mixes
    /// unpredictably.
    views: Vec<[View; 4]>,
    /// Per core: its first level's one geometry, when both sides share one
    /// of power-of-two sets and ways (see [`Uniform`]).
    uniform: Vec<Option<Uniform>>,
}

/// The lean engine's instances, which the walk updates beside the tags.
struct Levels {
    caches: Vec<LeanCache>,
    /// First-level victims of a walk of several lines under way: (line,
    /// dirty).
    victims: Vec<(u64, bool)>,
}

/// One core's first level for one demand kind, as the quick look needs it.
#[derive(Clone, Copy)]
struct View {
    /// The instance's first tag; for sets that are not a power of two, the
    /// always-empty tag after every instance's, so the look never hits.
    off: usize,
    /// `sets - 1`; 0 when `off` is the empty tag.
    mask: u64,
    /// Ways per set; 0 when `off` is the empty tag.
    ways: usize,
    shift: u32,
    /// The instance, for its counters.
    inst: u16,
    /// Hits of this kind decided by the quick look; part of the
    /// instance's counters.
    hits: u64,
}

/// A core's first level when both sides have one geometry with power-of-two
/// sets and ways: what [`Lean::run_uniform`] keeps in registers.
#[derive(Clone, Copy)]
struct Uniform {
    shift: u32,
    /// `sets - 1`.
    mask: u64,
    /// `ways == 1 << way_bits`.
    way_bits: u32,
    /// The instance's first tag, by demand kind (the instruction side's
    /// for fetches, the data side's for the others).
    off: [usize; 4],
}

/// Where [`Lean::batch_into`] puts what it decides about each access of
/// kind `k` (fetch, read, write, read-modify-write), with the sink's own
/// item for that access (its result's slot, its counter row).
pub(crate) trait BatchSink {
    /// The sink's items for the accesses of a run, in order.
    type Items: Iterator;
    /// A run of the batch's next `len` accesses begins (runs follow each
    /// other from the batch's first access): their items, at least `len`.
    /// Accesses of the run after one the engine leaves to the general
    /// caches are told nothing.
    fn start_run(&mut self, len: usize) -> Self::Items;
    /// The access hit at the first level, decided in the batch loop (see
    /// [`Lean::batch_into`]).
    fn hit(&mut self, item: <Self::Items as Iterator>::Item, k: usize);
    /// Access `n` of the run took the rest of the path, with result `r`.
    fn rest(&mut self, item: <Self::Items as Iterator>::Item, n: usize, k: usize, r: AccessResult);
    /// The hits of a run (by kind) that [`BatchSink::hit`] was told of,
    /// once the run is done.
    fn hits(&mut self, _by_kind: [u64; 4]) {}
}

/// The sink of [`Hierarchy::access_batch`](crate::Hierarchy::access_batch):
/// each access's result, in its slot. A run's slots are first all set to a
/// first-level hit (a loop the compiler turns into wide stores), so a hit
/// writes nothing and only the rest write theirs. The slots after an
/// access the engine leaves to the general caches are then written by
/// them (`Hierarchy::access_batch` passes them on).
pub(crate) struct Results<'a> {
    /// The slots of the accesses after the runs started so far.
    next: &'a mut [AccessResult],
    /// The run's slots.
    run: &'a mut [AccessResult],
}

impl<'a> Results<'a> {
    /// A sink writing the result of access `i` of the batch to `all[i]`.
    pub(crate) fn new(all: &'a mut [AccessResult]) -> Results<'a> {
        Results {
            next: all,
            run: &mut [],
        }
    }
}

impl BatchSink for Results<'_> {
    type Items = std::iter::Repeat<()>;
    #[inline(always)]
    fn start_run(&mut self, len: usize) -> Self::Items {
        let (run, next) = std::mem::take(&mut self.next).split_at_mut(len);
        run.fill(L1_HIT);
        (self.run, self.next) = (run, next);
        std::iter::repeat(())
    }
    #[inline(always)]
    fn hit(&mut self, _: (), _k: usize) {}
    #[inline(always)]
    fn rest(&mut self, _: (), n: usize, _k: usize, r: AccessResult) {
        self.run[n] = r;
    }
}

/// The index of `a` in `run` (an element of it).
fn index_in(run: &[Access], a: &Access) -> usize {
    (a as *const Access as usize - run.as_ptr() as usize) / std::mem::size_of::<Access>()
}

/// One hit of each demand kind in the packed count of a batch loop (16
/// bits a kind).
const ONE_HIT: [u64; 4] = [1, 1 << 16, 1 << 32, 1 << 48];

/// The dirty bit a demand access of each kind sets in a tag: writes and
/// read-modify-writes.
const DIRTY: [u64; 4] = [0, 0, 1, 1];

impl Lean {
    /// An engine over `caches` (indexed as the hierarchy's instances) with
    /// per-core first levels and level below `cores`; the allocation error
    /// if their tags cannot be allocated.
    pub(crate) fn try_new(
        mut caches: Vec<LeanCache>,
        cores: Vec<[u16; 3]>,
    ) -> Result<Lean, std::collections::TryReserveError> {
        let mut n = 0;
        for c in &mut caches {
            c.off = n;
            n += c.len();
        }
        for c in &cores {
            if c[2] != NONE {
                let below = caches[usize::from(c[2])].shift;
                for side in [c[0], c[1]] {
                    let x = &mut caches[usize::from(side)];
                    x.walk_shift = x.shift.min(below);
                }
            }
        }
        // One more, always empty: where a quick look that cannot index a
        // set by a mask looks.
        let mut tags = Vec::new();
        tags.try_reserve_exact(n + 1)?;
        tags.resize(n + 1, EMPTY);
        let views = cores
            .iter()
            .map(|c| {
                [0, 1, 1, 1].map(|side| {
                    let x = &caches[usize::from(c[side])];
                    let (off, mask, ways) = x.geo.quick(x.off, n);
                    View {
                        off,
                        mask,
                        ways,
                        shift: x.shift,
                        inst: c[side],
                        hits: 0,
                    }
                })
            })
            .collect();
        let uniform = cores
            .iter()
            .map(|c| {
                let (i, d) = (&caches[usize::from(c[0])], &caches[usize::from(c[1])]);
                let (gi, gd) = (i.geo, d.geo);
                let same = i.shift == d.shift && gi.sets() == gd.sets() && gi.ways() == gd.ways();
                let mask = gi
                    .pow2_mask()
                    .filter(|_| same && gi.ways().is_power_of_two())?;
                Some(Uniform {
                    shift: i.shift,
                    mask,
                    way_bits: gi.ways().trailing_zeros(),
                    off: [i.off, d.off, d.off, d.off],
                })
            })
            .collect();
        Ok(Lean {
            tags,
            levels: Levels {
                caches,
                // As the general walk's victim queue: room for an access
                // spanning 4096 lines without allocating.
                victims: Vec::with_capacity(4096),
            },
            cores,
            views,
            uniform,
        })
    }

    /// The counters of instance `i`.
    pub(crate) fn stats(&self, i: usize) -> LevelStats {
        let mut s = self.levels.caches[i].stats();
        for v in &self.views {
            let of = |k: usize| {
                if usize::from(v[k].inst) == i {
                    v[k].hits
                } else {
                    0
                }
            };
            s.ifetch += of(0);
            s.reads += of(1);
            s.writes += of(2) + of(3);
        }
        s
    }

    /// Whether instance `i` holds `addr`'s line.
    pub(crate) fn contains(&self, i: usize, addr: u64) -> bool {
        let c = &self.levels.caches[i];
        c.contains(&self.tags, addr >> c.shift)
    }

    /// Every line instance `i` holds, as byte addresses.
    pub(crate) fn lines(&self, i: usize) -> Vec<u64> {
        self.levels.caches[i].lines(&self.tags)
    }

    /// Puts instance `i`'s lines into `c` (empty, of the same geometry)
    /// in the same recency order, with their dirty bits.
    pub(crate) fn install(&self, i: usize, c: &mut Cache) {
        self.levels.caches[i].install(&self.tags, c);
    }

    /// Simulates one demand access (instruction fetch, read, write,
    /// read-modify-write: the caller checks) by `core`.
    #[inline(always)]
    pub(crate) fn access(&mut self, core: usize, a: Access) -> AccessResult {
        self.access_or_hit(core, a).unwrap_or(L1_HIT)
    }

    /// [`Lean::access`], with `None` for a single-line first-level hit
    /// found by its inlined check (the result `L1_HIT`), so that a caller
    /// can do its bookkeeping of that case with the result known.
    #[inline(always)]
    pub(crate) fn access_or_hit(&mut self, core: usize, a: Access) -> Option<AccessResult> {
        let k = a.kind as usize;
        debug_assert!(k <= AccessKind::ReadModifyWrite as usize);
        let v = &mut self.views[core][k];
        let line = a.addr >> v.shift;
        // A size of 0 or an access reaching past the end of the address
        // space gives another line: `demand_rest` sorts those out.
        let end = a.addr.wrapping_add(u64::from(a.size.wrapping_sub(1))) >> v.shift;
        if line == end {
            if let Some(t) = self.tags.get_mut(v.off + (line & v.mask) as usize * v.ways) {
                if *t >> 1 == line {
                    *t |= u64::from(k >= AccessKind::Write as usize);
                    v.hits += 1;
                    return None;
                }
            }
        }
        let c = self.cores[core];
        let served = self
            .levels
            .demand_rest(&mut self.tags, c, k, a.addr, a.size);
        Some(AccessResult::new(served, 1))
    }

    /// The first level's line shift of `core`'s instruction side: what
    /// [`Lean::fetch_or_hit`] compares with `*last`.
    #[inline(always)]
    pub(crate) fn fetch_shift(&self, core: usize) -> u32 {
        self.views[core][AccessKind::InstrFetch as usize].shift
    }

    /// `n` fetches by `core`, each within the line `*last` names (not
    /// [`NO_LINE`]) as [`Lean::fetch_or_hit`] checks it, in a row with
    /// only data accesses of `core` between: what `n` calls of it would
    /// do, each a hit without a look.
    #[inline(always)]
    pub(crate) fn fetch_hits(&mut self, core: usize, n: u64) {
        self.views[core][AccessKind::InstrFetch as usize].hits += n;
    }

    /// [`Lean::access_or_hit`] for instruction fetch `a` by `core`, the
    /// next fetch after one that ended in line `*last` (the first level's
    /// line number), then sets `*last` for the fetch after this one.
    ///
    /// A fetch within the line the previous fetch of the core ended in is a
    /// first-level hit that changes nothing but the hit count, when only
    /// data accesses came between on a first level split into instruction
    /// and data sides: that line is then still the most recent of its set
    /// (a straddling fetch looks its last line up last, and a miss's fills
    /// and write-backs go below), nothing in this engine reaches the
    /// instruction side from a data access (no inclusion rule, coherence or
    /// prefetcher), and a fetch sets no dirty bit. So that fetch is counted
    /// as the quick look's hit without the look; one that runs on into the
    /// next line is one too where that line is the most recent of its set.
    /// `*last` is [`NO_LINE`]
    /// where this does not hold (a unified first level, or sets the quick
    /// look cannot index); the caller sets it to [`NO_LINE`] whenever
    /// anything other than this core's data accesses may have touched the
    /// core's first level since.
    #[inline(always)]
    pub(crate) fn fetch_or_hit(
        &mut self,
        core: usize,
        a: Access,
        last: &mut u64,
    ) -> Option<AccessResult> {
        debug_assert_eq!(a.kind, AccessKind::InstrFetch);
        let v = &mut self.views[core][AccessKind::InstrFetch as usize];
        let line = a.addr >> v.shift;
        let end = a.addr.wrapping_add(u64::from(a.size.wrapping_sub(1))) >> v.shift;
        if line == *last {
            if line == end {
                v.hits += 1;
                return None;
            }
            // A fetch that runs on into the next line, `*last` being the
            // most recent of its set: a hit when that next line is the most
            // recent of its own set, which is all the walk would find and
            // do (`Levels::two_hits`: one lookup, no dirty bit for a
            // fetch, each line left the most recent). The next fetch can
            // then be counted by that line. (Below the top region only,
            // where the walk clamps nothing.)
            if end == line.wrapping_add(1) && a.addr < TOP_REGION {
                let at = v.off + (end & v.mask) as usize * v.ways;
                if self.tags.get(at).is_some_and(|t| *t >> 1 == end) {
                    v.hits += 1;
                    *last = end;
                    return None;
                }
            }
        }
        // Not after a fetch of size 0 or one wrapping past the top of the
        // address space: the walk looks up other lines than `line..=end`
        // there (`sets::clamp_to_top`).
        let split = v.ways != 0 && self.cores[core][0] != self.cores[core][1];
        *last = if split && a.size != 0 && end >= line {
            end
        } else {
            NO_LINE
        };
        self.access_or_hit(core, a)
    }

    /// Simulates `accesses` by `core`, writing each result; returns how
    /// many were done: all, or up to the first of a kind the engine leaves
    /// to the general caches. See [`Lean::batch_into`].
    pub(crate) fn batch(
        &mut self,
        core: usize,
        accesses: &[Access],
        results: &mut [AccessResult],
    ) -> usize {
        let results = &mut results[..accesses.len()];
        self.batch_into(core, accesses, &mut Results::new(results))
    }

    /// Simulates `accesses` by `core`, handing each outcome to `sink`;
    /// returns how many were done: all, or up to the first of a kind the
    /// engine leaves to the general caches.
    ///
    /// The loop decides first-level hits itself (the sink's
    /// [`BatchSink::hit`]), with the first levels' geometry held in locals
    /// and the hits counted in one register: a hit on the most recent line
    /// of its set first (one load and one compare), then a hit further
    /// back (the line moved to the front of its set, as the walk would:
    /// the level below is not looked at on a first-level hit), and, in the
    /// loop for one geometry, an access over two lines both held. Anything
    /// else is a call ([`BatchSink::rest`]): the misses, and the hits the
    /// loop does not look for (first levels whose sets are not a power of
    /// two, other straddles, the end of the address space). When both sides of
    /// the core's first level have the same line size, the same number of
    /// sets and ways, both powers of two (the `cachegrind` preset, a
    /// unified first level of such a geometry), the loop keeps that
    /// geometry in registers and only the instance's first tag depends on
    /// the kind; otherwise each kind's geometry is loaded.
    ///
    /// # Panics
    /// If `core` is out of range.
    #[inline]
    pub(crate) fn batch_into<S: BatchSink>(
        &mut self,
        core: usize,
        accesses: &[Access],
        sink: &mut S,
    ) -> usize {
        let mut done = 0;
        // The hits are counted 16 bits a kind in one register: at most
        // `u16::MAX` accesses a run.
        for run in accesses.chunks(usize::from(u16::MAX)) {
            let items = sink.start_run(run.len());
            let n = match self.uniform[core] {
                // The `cachegrind` preset's first level (64 sets of 8 ways
                // of 64-byte lines), as constants.
                Some(u) if (u.shift, u.way_bits, u.mask) == (6, 3, 63) => {
                    self.run_uniform(core, u, 6, 3, 63, run, items, sink)
                }
                Some(u) => {
                    let (shift, way_bits, mask) = (u.shift, u.way_bits, u.mask);
                    self.run_uniform(core, u, shift, way_bits, mask, run, items, sink)
                }
                None => self.run_by_kind(core, run, items, sink),
            };
            done += n;
            if n < run.len() {
                break;
            }
        }
        done
    }

    /// Adds the hits counted by kind in `packed` (16 bits a kind) to the
    /// views of `core` and tells `sink`.
    #[inline(always)]
    fn add_packed_hits<S: BatchSink>(&mut self, core: usize, packed: u64, sink: &mut S) {
        let hits = [0, 1, 2, 3].map(|k| (packed >> (16 * k)) & 0xFFFF);
        for (v, n) in self.views[core].iter_mut().zip(hits) {
            v.hits += n;
        }
        sink.hits(hits);
    }

    /// [`Lean::batch_into`]'s loop for a first level of one geometry on
    /// both sides (`u`, whose `shift`, `way_bits` and `mask` are passed
    /// apart so that a caller can make them constants).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn run_uniform<S: BatchSink>(
        &mut self,
        core: usize,
        u: Uniform,
        shift: u32,
        way_bits: u32,
        mask: u64,
        run: &[Access],
        items: S::Items,
        sink: &mut S,
    ) -> usize {
        let c = self.cores[core];
        let off = u.off;
        debug_assert_eq!((shift, way_bits, mask), (u.shift, u.way_bits, u.mask));
        let mut packed = 0u64;
        // On the stack: one `add` from memory a hit (as a constant the
        // compiler loads its address first), one `or` its dirty bit.
        let one_hit = std::hint::black_box(ONE_HIT);
        let dirty = std::hint::black_box(DIRTY);
        let (tags, levels) = (&mut self.tags[..], &mut self.levels);
        let mut done = run.len();
        let mut items = items;
        for a in run {
            // `start_run` gives at least `run.len()` items.
            let Some(item) = items.next() else { break };
            let k = a.kind as usize;
            if k > AccessKind::ReadModifyWrite as usize {
                done = index_in(run, a);
                break;
            }
            let line = a.addr >> shift;
            // As in `access`: one line, no wrap past the address space.
            let end = a.addr.wrapping_add(u64::from(a.size.wrapping_sub(1))) >> shift;
            if line == end {
                let at = off[k] + (((line & mask) as usize) << way_bits);
                // Always in range (`Uniform` is built only for an instance
                // with `mask == sets - 1` and `ways == 1 << way_bits`, from
                // its first tag): the check is a compare the branch
                // predictor never misses, and `demand_rest` would decide
                // exactly anyway.
                if let Some(t) = tags.get_mut(at) {
                    if *t >> 1 == line {
                        // Writes and read-modify-writes (kinds 2 and 3) dirty it.
                        *t |= dirty[k];
                        packed += one_hit[k];
                        sink.hit(item, k);
                        continue;
                    }
                }
                // A hit further back: what the walk would do (the line
                // made most recent, dirtied by a write).
                if let Some(set) = tags.get_mut(at..at + (1 << way_bits)) {
                    if promote(set, line, dirty[k]) {
                        packed += one_hit[k];
                        sink.hit(item, k);
                        continue;
                    }
                }
            } else if end == line.wrapping_add(1) && a.size != 0 {
                // Straddling two lines (an instruction or operand over a line
                // boundary), both held: a hit, each line made the most
                // recent of its set in turn, as the walk does (the sets may
                // be one and the same). (Past the end of the address space
                // the last byte wraps to a line below: not this case. A size
                // of 0 counts as 1, one line: `end` above took it as 2^32 - 1
                // bytes, which with lines of 2^31 bytes ends on the next.)
                let at = off[k] + (((line & mask) as usize) << way_bits);
                let at2 = off[k] + (((end & mask) as usize) << way_bits);
                let ways = 1 << way_bits;
                if let (Some(s1), Some(s2)) = (tags.get(at..at + ways), tags.get(at2..at2 + ways)) {
                    if s1.iter().any(|&t| t >> 1 == line) && s2.iter().any(|&t| t >> 1 == end) {
                        promote(&mut tags[at..at + ways], line, dirty[k]);
                        promote(&mut tags[at2..at2 + ways], end, dirty[k]);
                        packed += one_hit[k];
                        sink.hit(item, k);
                        continue;
                    }
                }
            }
            let r = AccessResult::new(levels.demand_rest(tags, c, k, a.addr, a.size), 1);
            sink.rest(item, index_in(run, a), k, r);
        }
        self.add_packed_hits(core, packed, sink);
        done
    }

    /// [`Lean::batch_into`]'s loop for first levels whose geometry differs
    /// by side (or is not a power of two): each kind's geometry is loaded.
    #[inline(always)]
    fn run_by_kind<S: BatchSink>(
        &mut self,
        core: usize,
        run: &[Access],
        items: S::Items,
        sink: &mut S,
    ) -> usize {
        let c = self.cores[core];
        // The geometry as arrays indexed by kind (see `views`).
        let v = self.views[core];
        let shift = v.map(|v| v.shift);
        let off = v.map(|v| v.off);
        let mask = v.map(|v| v.mask);
        let ways = v.map(|v| v.ways);
        let mut packed = 0u64;
        // On the stack: one `add` from memory a hit (as a constant the
        // compiler loads its address first), one `or` its dirty bit.
        let one_hit = std::hint::black_box(ONE_HIT);
        let dirty = std::hint::black_box(DIRTY);
        let (tags, levels) = (&mut self.tags[..], &mut self.levels);
        let mut done = run.len();
        let mut items = items;
        for a in run {
            // `start_run` gives at least `run.len()` items.
            let Some(item) = items.next() else { break };
            let k = a.kind as usize;
            if k > AccessKind::ReadModifyWrite as usize {
                done = index_in(run, a);
                break;
            }
            let sh = shift[k];
            let line = a.addr >> sh;
            // As in `access`.
            let end = a.addr.wrapping_add(u64::from(a.size.wrapping_sub(1))) >> sh;
            if line == end {
                let at = off[k] + (line & mask[k]) as usize * ways[k];
                // Always in range: a view of a power-of-two instance has
                // `mask == sets - 1`, its `ways` and its first tag `off`;
                // any other has `mask == 0`, `ways == 0` and `off` the
                // last, always empty tag (`Lean::try_new`).
                if let Some(t) = tags.get_mut(at) {
                    if *t >> 1 == line {
                        *t |= dirty[k];
                        packed += one_hit[k];
                        sink.hit(item, k);
                        continue;
                    }
                }
                // A hit further back, as in `run_uniform` (an empty set
                // for the always-empty tag: no hit).
                if let Some(set) = tags.get_mut(at..at + ways[k]) {
                    if promote(set, line, dirty[k]) {
                        packed += one_hit[k];
                        sink.hit(item, k);
                        continue;
                    }
                }
            }
            let r = AccessResult::new(levels.demand_rest(tags, c, k, a.addr, a.size), 1);
            sink.rest(item, index_in(run, a), k, r);
        }
        self.add_packed_hits(core, packed, sink);
        done
    }
}

impl Levels {
    /// A demand access of kind `k` (instruction fetch, read, write,
    /// read-modify-write) by the core whose instances are `c`, past the
    /// quick look at the most recent line of its first-level set (and, from
    /// the batch loops, past their search further back): the address
    /// space's end, then the walk (of one line, or of several).
    ///
    /// Cold: a few percent of accesses come here, and marking the call
    /// unlikely lets the batch loop's hit path keep its values in
    /// registers (the call clobbers the others).
    #[cold]
    #[inline(never)]
    fn demand_rest(
        &mut self,
        tags: &mut [u64],
        c: [u16; 3],
        k: usize,
        mut addr: u64,
        mut size: u32,
    ) -> ServedBy {
        if addr >= TOP_REGION {
            (addr, size) = clamp_to_top(addr, size);
        }
        let l1 = usize::from(c[usize::from(k != 0)]);
        let shift = self.caches[l1].walk_shift;
        let last_byte = addr + u64::from(size.max(1) - 1);
        if addr >> shift == last_byte >> shift {
            self.walk_one(tags, c, k, addr)
        } else if self.two_hits(tags, l1, k, addr, last_byte) {
            ServedBy::L1
        } else {
            self.walk(tags, c, k, addr, last_byte)
        }
    }

    /// An access over two first-level lines (an instruction or operand
    /// straddling them), both the most recent of their sets: a hit, with
    /// what the walk would do in that case (each made most recent, which
    /// it is, and dirtied by a write; one lookup counted).
    #[inline(always)]
    fn two_hits(&mut self, tags: &mut [u64], l1: usize, k: usize, addr: u64, last: u64) -> bool {
        let x = &mut self.caches[l1];
        let (a, b) = (addr >> x.shift, last >> x.shift);
        if b != a.wrapping_add(1) {
            return false;
        }
        let (i, j) = (x.base_of(a), x.base_of(b));
        if tags[i] >> 1 != a || tags[j] >> 1 != b {
            return false;
        }
        let dirty = u64::from(k >= AccessKind::Write as usize);
        tags[i] |= dirty;
        tags[j] |= dirty;
        x.acc[k] += 1;
        true
    }

    /// [`Levels::walk`] for an access within one line at the first level
    /// and below (nearly every one): the same rules in the same order, with
    /// its one possible victim held in a local instead of the queue.
    #[inline(always)]
    fn walk_one(&mut self, tags: &mut [u64], c: [u16; 3], k: usize, addr: u64) -> ServedBy {
        let l1 = usize::from(c[usize::from(k != 0)]);
        let dirty = u64::from(k >= AccessKind::Write as usize);
        let below = c[2];
        // The level below's set, read now and its value dropped: the host
        // fetches it while the first level's set is searched, rather than
        // after (on a miss-heavy trace that set is often out of the host's
        // first caches; measured 1.06x on the bench's synthetic trace,
        // neutral on the Python one).
        if below != NONE {
            let y = &self.caches[usize::from(below)];
            let at = y.base_of(addr >> y.shift);
            if let Some(t) = tags.get(at) {
                std::hint::black_box(*t);
            }
        }
        let x = &mut self.caches[l1];
        let shift1 = x.shift;
        x.acc[k] += 1;
        let victim = match x.reference(tags, addr >> shift1, dirty) {
            Found::Hit => return ServedBy::L1,
            Found::Filled => EMPTY,
            Found::Evicted(t) => {
                x.evictions += 1;
                t
            }
        };
        x.miss[k] += 1;
        if below == NONE {
            self.caches[l1].writebacks += u64::from(victim != EMPTY && victim & 1 != 0);
            return ServedBy::MEMORY;
        }
        // The first level absorbed any write: below, a read.
        let lk = usize::from(k != 0);
        let y = &mut self.caches[usize::from(below)];
        y.acc[lk] += 1;
        let served = match y.reference(tags, addr >> y.shift, 0) {
            Found::Hit => ServedBy::level_n(2),
            Found::Filled => {
                y.miss[lk] += 1;
                ServedBy::MEMORY
            }
            Found::Evicted(t) => {
                y.miss[lk] += 1;
                y.evictions += 1;
                y.writebacks += t & 1;
                ServedBy::MEMORY
            }
        };
        // The first-level victim, after the walk below: a dirty one is
        // written back and marks dirty the line below holding its first
        // byte, if there is one.
        if victim != EMPTY && victim & 1 != 0 {
            y.mark_dirty(tags, ((victim >> 1) << shift1) >> y.shift);
            self.caches[l1].writebacks += 1;
        }
        served
    }

    /// The walk of an access to bytes `addr..=last_byte` that is not a hit
    /// on the most recent line of its first-level set.
    #[inline(never)]
    fn walk(
        &mut self,
        tags: &mut [u64],
        c: [u16; 3],
        k: usize,
        addr: u64,
        last_byte: u64,
    ) -> ServedBy {
        let l1 = usize::from(c[usize::from(k != 0)]);
        let dirty = u64::from(k >= AccessKind::Write as usize);
        let x = &mut self.caches[l1];
        let (first, last) = (addr >> x.shift, last_byte >> x.shift);
        let mut miss = false;
        let mut line = first;
        loop {
            match x.reference(tags, line, dirty) {
                Found::Hit => {}
                Found::Filled => miss = true,
                Found::Evicted(t) => {
                    miss = true;
                    x.evictions += 1;
                    self.victims.push((t >> 1, t & 1 != 0));
                }
            }
            if line == last {
                break;
            }
            line += 1;
        }
        x.acc[k] += 1;
        x.miss[k] += u64::from(miss);
        if !miss {
            return ServedBy::L1;
        }
        let below = c[2];
        let mut served = ServedBy::MEMORY;
        if below != NONE {
            // The first level absorbed any write: below, a read.
            let lk = usize::from(k != 0);
            let y = &mut self.caches[usize::from(below)];
            let (first, last) = (addr >> y.shift, last_byte >> y.shift);
            let mut miss2 = false;
            let mut line = first;
            loop {
                match y.reference(tags, line, 0) {
                    Found::Hit => {}
                    Found::Filled => miss2 = true,
                    Found::Evicted(t) => {
                        miss2 = true;
                        y.evictions += 1;
                        y.writebacks += t & 1;
                    }
                }
                if line == last {
                    break;
                }
                line += 1;
            }
            y.acc[lk] += 1;
            y.miss[lk] += u64::from(miss2);
            if !miss2 {
                served = ServedBy::level_n(2);
            }
        }
        // First-level victims, after the walk below: a dirty one is written
        // back and marks dirty the line below holding its first byte, if
        // there is one.
        let shift1 = self.caches[l1].shift;
        for &(v, d) in &self.victims {
            if d {
                self.caches[l1].writebacks += 1;
                if below != NONE {
                    let y = &self.caches[usize::from(below)];
                    y.mark_dirty(tags, (v << shift1) >> y.shift);
                }
            }
        }
        self.victims.clear();
        served
    }
}
