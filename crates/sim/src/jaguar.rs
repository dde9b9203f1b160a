//! The Jaguar engine: the whole simulator for hierarchies of the `jaguar`
//! preset's shape, chosen once when the [`crate::Hierarchy`] is built
//! ([`crate::HierarchyConfig::jaguar_shape`]).
//!
//! The shape: per core a private instruction first level and a private
//! data first level; below them one unified, inclusive level per module
//! of `g` cores (`g` dividing the cores: 1, a group, or all); true LRU;
//! write-back, write-allocate; one line size at every level (at least 4
//! bytes); an access straddling lines counts each line; every level looked
//! up on every access or the second only on a first-level miss; coherence
//! on or off; no prefetchers, miss classification or other rule.
//!
//! Semantics (those of the general walk for this shape, in its order), per
//! first-level line an access touches: the first level is looked up and
//! the line made most recent (filled on a miss, dirty if the access
//! writes); then the second level as a read (all-levels mode, or after a
//! miss), filled on a miss; a second-level victim is removed from every
//! first level of its module (back-invalidation; a dirty copy is written
//! back and makes the victim dirty), and is written back if dirty; then a
//! dirty first-level victim is written back and marks its line dirty below
//! if it is there. A core filling a line ends any other core's sole
//! ownership of it. A data access adds the bytes it touches to its line's
//! mask; a write by a core that does not own the line alone removes every
//! copy off its path (other cores' first levels, other modules' second
//! levels: each a received invalidation, a dirty one written back, false
//! sharing when the bytes the copy's core touched and the writer's are
//! disjoint) and makes the core its sole owner.
//!
//! Each set is a tag list (`sets.rs`, shared with the lean engine): its
//! tags in recency order, most recent first, with the dirty bit in the
//! tag's low bit (`line << 1 | dirty`), and for data first levels of a
//! coherent hierarchy the bytes-touched masks moved in step: a hit on a
//! set's most recent line is an index, a load and a compare; anything else
//! one pass over the set. Snoops are filtered by inclusion: a module whose
//! second level lacks the line holds it in none of its first levels.
//!
//! Software prefetches, non-temporal stores and flushes are not handled
//! here: the hierarchy hands the engine's state to the general caches
//! ([`Jaguar::install`], [`Jaguar::take_owners`]) before the first one and
//! never comes back. `tests/properties.rs` (`jaguar_engine_is_exact`)
//! checks the engine against the general caches.

use crate::cache::Cache;
use crate::coherence::{LineTable, Owners};
use crate::sets::{self, clamp_to_top, rotate, Found, Geometry, EMPTY, L1_HIT, TOP_REGION};
use crate::stats::{CoherenceStats, LevelStats};
use crate::{Access, AccessKind, AccessResult, ServedBy};

/// An access straddling two lines, both hits (each line counts).
const L1_HIT_2: AccessResult = AccessResult::new(ServedBy::L1, 2);

/// One cache instance of the engine.
pub(crate) struct JagCache {
    /// Where this instance's `sets * ways` tags start in [`Jaguar::tags`].
    off: usize,
    /// Where its masks start in [`Jaguar::touched`], if it keeps them.
    toff: Option<usize>,
    geo: Geometry,
    /// Lookups by demand kind (fetch, read, write, read-modify-write; the
    /// second level counts fetches and reads only).
    acc: [u64; 4],
    /// Misses by the same kinds.
    miss: [u64; 4],
    evictions: u64,
    writebacks: u64,
    back_invalidations: u64,
    invalidations_received: u64,
    /// Shared by one core only (its first levels; a module of one core's
    /// second level): its invalidations count for that core.
    private: bool,
    first_core: usize,
}

impl JagCache {
    /// An empty instance of `sets` sets of `ways` ways, shared by `cores`
    /// cores from `first_core`, keeping bytes-touched masks if `touched`.
    pub(crate) fn new(
        sets: u64,
        ways: u32,
        touched: bool,
        first_core: usize,
        cores: usize,
    ) -> JagCache {
        JagCache {
            off: 0,
            toff: touched.then_some(0),
            geo: Geometry::new(sets, ways),
            acc: [0; 4],
            miss: [0; 4],
            evictions: 0,
            writebacks: 0,
            back_invalidations: 0,
            invalidations_received: 0,
            private: cores == 1,
            first_core,
        }
    }

    fn len(&self) -> usize {
        self.geo.len()
    }

    /// The position of the first way of `line`'s set, relative to the
    /// instance's start.
    #[inline(always)]
    fn set_base(&self, line: u64) -> usize {
        self.geo.base(line)
    }

    /// The counters, as the general caches keep them.
    fn stats(&self) -> LevelStats {
        LevelStats {
            ifetch: self.acc[0],
            ifetch_misses: self.miss[0],
            reads: self.acc[1],
            read_misses: self.miss[1],
            writes: self.acc[2] + self.acc[3],
            write_misses: self.miss[2] + self.miss[3],
            evictions: self.evictions,
            writebacks: self.writebacks,
            back_invalidations: self.back_invalidations,
            invalidations_received: self.invalidations_received,
            ..LevelStats::default()
        }
    }
}

/// Per core: its instances and module.
#[derive(Clone, Copy)]
struct CoreView {
    /// First levels indexed by kind: fetch, read, write, read-modify-write.
    l1: [u16; 4],
    l2: u16,
    module: usize,
}

/// One module: its second level and the first levels above it.
struct Module {
    l2: u16,
    /// Instruction and data first levels of its cores, in instance order.
    above: Vec<u16>,
}

/// The Jaguar engine's state.
pub(crate) struct Jaguar {
    /// Every instance's tags, one after the other.
    tags: Vec<u64>,
    /// Bytes-touched masks of the data first levels (coherent only), in
    /// the same order as their tags.
    touched: Vec<u64>,
    caches: Vec<JagCache>,
    cores: Vec<CoreView>,
    modules: Vec<Module>,
    shift: u32,
    coherent: bool,
    all_levels: bool,
    /// Lines a core owns alone after its write (as the general caches'
    /// table: a write by the owner needs no snoop).
    owners: Owners,
}

impl Jaguar {
    /// An engine over `caches` (indexed as the hierarchy's instances);
    /// `cores[c]` is core `c`'s (instruction first level, data first level,
    /// second level); the allocation error if the tags cannot be allocated.
    pub(crate) fn try_new(
        mut caches: Vec<JagCache>,
        cores: Vec<[u16; 3]>,
        shift: u32,
        coherent: bool,
        all_levels: bool,
    ) -> Result<Jaguar, std::collections::TryReserveError> {
        let (mut n, mut nt) = (0, 0);
        for c in &mut caches {
            c.off = n;
            n += c.len();
            if c.toff.is_some() {
                c.toff = Some(nt);
                nt += c.len();
            }
        }
        // One more, always empty: where a quick look that cannot index a
        // set by a mask looks.
        let mut tags = Vec::new();
        tags.try_reserve_exact(n + 1)?;
        tags.resize(n + 1, EMPTY);
        let mut touched = Vec::new();
        touched.try_reserve_exact(nt)?;
        touched.resize(nt, 0);
        let mut modules: Vec<Module> = Vec::new();
        let mut views = Vec::with_capacity(cores.len());
        for &[i, d, l2] in &cores {
            let m = match modules.iter().position(|m| m.l2 == l2) {
                Some(m) => m,
                None => {
                    modules.push(Module {
                        l2,
                        above: Vec::new(),
                    });
                    modules.len() - 1
                }
            };
            modules[m].above.extend([i, d]);
            views.push(CoreView {
                l1: [i, d, d, d],
                l2,
                module: m,
            });
        }
        for m in &mut modules {
            m.above.sort_unstable();
        }
        Ok(Jaguar {
            tags,
            touched,
            caches,
            cores: views,
            modules,
            shift,
            coherent,
            all_levels,
            owners: Owners::new(),
        })
    }

    /// The counters of instance `i`.
    pub(crate) fn stats(&self, i: usize) -> LevelStats {
        self.caches[i].stats()
    }

    fn set_of(&self, i: usize, line: u64) -> std::ops::Range<usize> {
        let c = &self.caches[i];
        let b = c.off + c.set_base(line);
        b..b + c.geo.ways()
    }

    /// Whether instance `i` holds `addr`'s line.
    pub(crate) fn contains(&self, i: usize, addr: u64) -> bool {
        self.holds(i, addr >> self.shift)
    }

    /// Every line instance `i` holds, as byte addresses.
    pub(crate) fn lines(&self, i: usize) -> Vec<u64> {
        let c = &self.caches[i];
        sets::lines(&self.tags[c.off..c.off + c.len()], self.shift)
    }

    /// Puts instance `i`'s lines into `c` (empty, of the same geometry)
    /// in the same recency order, with their dirty bits and masks.
    pub(crate) fn install(&self, i: usize, c: &mut Cache) {
        let x = &self.caches[i];
        let tags = &self.tags[x.off..x.off + x.len()];
        let masks = x.toff.map(|t| &self.touched[t..t + x.len()]);
        c.install_tags(tags, masks, x.geo.ways());
    }

    /// The table of sole owners, for the general caches at hand-over.
    pub(crate) fn take_owners(&mut self) -> Owners {
        std::mem::replace(&mut self.owners, Owners::new())
    }

    /// Looks `line` up in instance `i` and makes it the most recent of
    /// its set, ORing `dirty` into it; on a miss fills it (with `dirty`
    /// and an empty mask), pushing the others back one place
    /// ([`sets::reference`], [`sets::reference_with_masks`]).
    #[inline]
    fn reference(&mut self, i: usize, line: u64, dirty: u64) -> Found {
        let x = &self.caches[i];
        let rel = x.set_base(line);
        let base = x.off + rel;
        let ways = x.geo.ways();
        let set = &mut self.tags[base..base + ways];
        match x.toff {
            None => sets::reference(set, line, dirty),
            Some(toff) => {
                let touched = &mut self.touched;
                sets::reference_with_masks(set, line, dirty, || {
                    &mut touched[toff + rel..toff + rel + ways]
                })
            }
        }
    }

    /// Removes `line` from instance `i` if present, returning its tag and
    /// mask; the lines behind it move up one place. The search is inlined
    /// (most snoops find nothing), the removal is not.
    #[inline(always)]
    fn remove(&mut self, i: usize, line: u64) -> Option<(u64, u64)> {
        let x = &self.caches[i];
        let rel = x.set_base(line);
        let base = x.off + rel;
        let w = sets::position(&self.tags[base..base + x.geo.ways()], line)?;
        Some(self.remove_at(i, rel, w))
    }

    /// Removes way `w` of the set at `rel` of instance `i`, and its mask.
    #[inline(never)]
    fn remove_at(&mut self, i: usize, rel: usize, w: usize) -> (u64, u64) {
        let x = &self.caches[i];
        let base = x.off + rel;
        let ways = x.geo.ways();
        let t = sets::remove_at(&mut self.tags[base..base + ways], w, EMPTY);
        let mask = match x.toff {
            Some(toff) => sets::remove_at(&mut self.touched[toff + rel..toff + rel + ways], w, 0),
            None => 0,
        };
        (t, mask)
    }

    /// Whether instance `i` holds `line`.
    #[inline]
    fn holds(&self, i: usize, line: u64) -> bool {
        sets::holds(&self.tags[self.set_of(i, line)], line)
    }

    /// Marks `line` dirty in instance `i` if present, with no change of
    /// recency.
    #[inline]
    fn mark_dirty(&mut self, i: usize, line: u64) {
        let r = self.set_of(i, line);
        sets::mark_dirty(&mut self.tags[r], line);
    }

    /// Simulates one demand access (instruction fetch, read, write,
    /// read-modify-write: the caller checks) by `core`, recording
    /// invalidations in `coh` and `lines`.
    #[inline(always)]
    pub(crate) fn access(
        &mut self,
        core: usize,
        a: Access,
        coh: &mut CoherenceStats,
        lines: &mut LineTable,
    ) -> AccessResult {
        let k = a.kind as usize;
        debug_assert!(k <= AccessKind::ReadModifyWrite as usize);
        if let Some(r) = self.quick(core, k, a.addr, a.size) {
            return r;
        }
        self.demand(core, k, a.addr, a.size, coh, lines)
    }

    /// The quick look: a one-line access whose line is the most recent of
    /// its set at the first level and (if looked up) at the second, and,
    /// for a write, owned alone by `core`: it changes no recency and no
    /// ownership, only the dirty bit, the bytes touched and the counters.
    #[inline(always)]
    fn quick(&mut self, core: usize, k: usize, addr: u64, size: u32) -> Option<AccessResult> {
        let sh = self.shift;
        let line = addr >> sh;
        let end = addr.wrapping_add(u64::from(size.wrapping_sub(1)));
        if end >> sh != line || addr >= TOP_REGION {
            return None;
        }
        let v = self.cores.get(core)?;
        let (i1, l2) = (usize::from(v.l1[k]), usize::from(v.l2));
        let x = &self.caches[i1];
        let at = x.off + x.set_base(line);
        let t = self.tags[at];
        if t >> 1 != line {
            return None;
        }
        let writes = k >= AccessKind::Write as usize;
        if writes && self.coherent && !self.owners.owns(line << sh, core) {
            return None;
        }
        if self.all_levels {
            let y = &self.caches[l2];
            let u = self.tags[y.off + y.set_base(line)];
            if u >> 1 != line {
                return None;
            }
            self.caches[l2].acc[usize::from(k != 0)] += 1;
        }
        let x = &mut self.caches[i1];
        x.acc[k] += 1;
        if let Some(toff) = x.toff {
            if k != 0 {
                let gran = sh.saturating_sub(6);
                let in_line = (1u64 << sh) - 1;
                let first = (addr & in_line) >> gran;
                let last = (end & in_line) >> gran;
                let rel = at - x.off;
                self.touched[toff + rel] |= (u64::MAX >> (63 - (last - first))) << first;
            }
        }
        self.tags[at] = t | u64::from(writes);
        Some(L1_HIT)
    }

    /// A demand access past the quick look: each first-level line it
    /// touches in turn.
    #[inline(never)]
    fn demand(
        &mut self,
        core: usize,
        k: usize,
        mut addr: u64,
        mut size: u32,
        coh: &mut CoherenceStats,
        lines: &mut LineTable,
    ) -> AccessResult {
        assert!(core < self.cores.len(), "core {core} out of range");
        if addr >= TOP_REGION {
            (addr, size) = clamp_to_top(addr, size);
        }
        let sh = self.shift;
        let last = addr + u64::from(size.max(1) - 1);
        let (first_line, last_line) = (addr >> sh, last >> sh);
        if first_line == last_line {
            let (s, inv, fs) = self.one_line(core, k, addr, last, first_line, coh, lines);
            let mut r = AccessResult::new(s, 1);
            r.invalidations = inv;
            r.false_sharing = fs;
            return r;
        }
        let mut r = AccessResult::new(ServedBy::L1, 0);
        let mut worst = ServedBy::L1;
        for line in first_line..=last_line {
            let at = addr.max(line << sh);
            let end = last.min((line << sh) + ((1 << sh) - 1));
            let (s, inv, fs) = self.one_line(core, k, at, end, line, coh, lines);
            r.add_line(s);
            if s.slot() > worst.slot() {
                worst = s;
            }
            r.invalidations = r.invalidations.saturating_add(inv);
            r.false_sharing = r.false_sharing.saturating_add(fs);
        }
        r.served_by = worst;
        r
    }

    /// The walk of bytes `at..=end` of one first-level line `line` by
    /// `core` for kind `k`: the level that served it, and the
    /// invalidations sent and of those false sharing.
    #[allow(clippy::too_many_arguments)]
    fn one_line(
        &mut self,
        core: usize,
        k: usize,
        at: u64,
        end: u64,
        line: u64,
        coh: &mut CoherenceStats,
        lines: &mut LineTable,
    ) -> (ServedBy, u16, u16) {
        let v = self.cores[core];
        let (l1, l2) = (usize::from(v.l1[k]), usize::from(v.l2));
        let side = usize::from(k != 0);
        let dirty = u64::from(k >= AccessKind::Write as usize);
        let found = self.reference(l1, line, dirty);
        self.caches[l1].acc[k] += 1;
        let served = match found {
            Found::Hit => {
                if self.all_levels {
                    // Inclusion: the line is below too.
                    let f = self.reference(l2, line, 0);
                    debug_assert!(matches!(f, Found::Hit));
                    self.caches[l2].acc[side] += 1;
                }
                ServedBy::L1
            }
            Found::Filled | Found::Evicted(..) => {
                self.caches[l1].miss[k] += 1;
                let f = self.reference(l2, line, 0);
                let y = &mut self.caches[l2];
                y.acc[side] += 1;
                let served = match f {
                    Found::Hit => ServedBy::level_n(2),
                    Found::Filled => {
                        y.miss[side] += 1;
                        ServedBy::MEMORY
                    }
                    Found::Evicted(t) => {
                        y.miss[side] += 1;
                        y.evictions += 1;
                        let d = self.back_invalidate(v.module, t >> 1);
                        if d || t & 1 != 0 {
                            self.caches[l2].writebacks += 1;
                        }
                        ServedBy::MEMORY
                    }
                };
                if let Found::Evicted(t) = found {
                    self.caches[l1].evictions += 1;
                    if t & 1 != 0 {
                        self.caches[l1].writebacks += 1;
                        self.mark_dirty(l2, t >> 1);
                    }
                }
                if self.coherent {
                    self.owners.filled_by(line << self.shift, core);
                }
                served
            }
        };
        if side == 0 || !self.coherent {
            return (served, 0, 0);
        }
        let sh = self.shift;
        let gran = sh.saturating_sub(6);
        let in_line = (1u64 << sh) - 1;
        let first = (at & in_line) >> gran;
        let last = (end & in_line) >> gran;
        let mask = (u64::MAX >> (63 - (last - first))) << first;
        // The line is the most recent of its set now.
        let x = &self.caches[l1];
        let toff = x.toff.expect("a coherent data first level keeps masks");
        let slot = toff + x.set_base(line);
        self.touched[slot] |= mask;
        if dirty == 0 {
            return (served, 0, 0);
        }
        let (sent, fs) = self.invalidate_others(core, line, self.touched[slot], coh, lines);
        (served, sent, fs)
    }

    /// Removes `line`, a victim of module `m`'s second level, from every
    /// first level above it; whether a removed copy was dirty.
    fn back_invalidate(&mut self, m: usize, line: u64) -> bool {
        let mut dirty = false;
        for n in 0..self.modules[m].above.len() {
            let up = usize::from(self.modules[m].above[n]);
            if let Some((t, _)) = self.remove(up, line) {
                let x = &mut self.caches[up];
                x.back_invalidations += 1;
                if t & 1 != 0 {
                    x.writebacks += 1;
                    dirty = true;
                }
            }
        }
        dirty
    }

    /// A write by `core` to `line`, whose bytes it touched are
    /// `writer_mask`, removes every copy off its path unless it owns the
    /// line alone. Returns (copies removed, of which false sharing).
    #[inline(never)]
    fn invalidate_others(
        &mut self,
        core: usize,
        line: u64,
        writer_mask: u64,
        coh: &mut CoherenceStats,
        lines: &mut LineTable,
    ) -> (u16, u16) {
        let line_addr = line << self.shift;
        if self.owners.owns(line_addr, core) {
            return (0, 0);
        }
        let v = self.cores[core];
        let (mut sent, mut fs) = (0u32, 0u32);
        for m in 0..self.modules.len() {
            let l2 = usize::from(self.modules[m].l2);
            if m != v.module {
                // Inclusion: a module whose second level lacks the line
                // holds it nowhere.
                if !self.holds(l2, line) {
                    continue;
                }
                self.invalidate_in(l2, line, writer_mask, coh, &mut sent, &mut fs);
            }
            for n in 0..self.modules[m].above.len() {
                let up = self.modules[m].above[n];
                if up == v.l1[0] || up == v.l1[1] {
                    continue;
                }
                self.invalidate_in(usize::from(up), line, writer_mask, coh, &mut sent, &mut fs);
            }
        }
        self.owners.claim(line_addr, core);
        if sent > 0 {
            coh.sent_by_core[core] += 1;
            coh.invalidations += u64::from(sent);
            coh.false_sharing += u64::from(fs);
            match lines.entry(line_addr) {
                Some(e) => {
                    e.sent += 1;
                    e.received += u64::from(sent);
                    e.false_sharing += u64::from(fs);
                }
                None => coh.untracked += 1,
            }
        }
        (
            sent.min(u32::from(u16::MAX)) as u16,
            fs.min(u32::from(u16::MAX)) as u16,
        )
    }

    /// Removes `line` from instance `t` for a write whose writer touched
    /// `writer_mask`, counting it.
    #[inline(always)]
    fn invalidate_in(
        &mut self,
        t: usize,
        line: u64,
        writer_mask: u64,
        coh: &mut CoherenceStats,
        sent: &mut u32,
        fs: &mut u32,
    ) {
        if let Some((tag, touched)) = self.remove(t, line) {
            *sent += 1;
            let x = &mut self.caches[t];
            x.invalidations_received += 1;
            if tag & 1 != 0 {
                x.writebacks += 1;
            }
            if x.private {
                coh.received_by_core[x.first_core] += 1;
            }
            if touched != 0 && touched & writer_mask == 0 {
                *fs += 1;
            }
        }
    }

    /// The quick look's view of instance `i`: its first tag, set mask and
    /// ways, and its first mask; for sets that are not a power of two,
    /// the always-empty tag after every instance's (the look never hits).
    fn view(&self, i: u16) -> View {
        let x = &self.caches[usize::from(i)];
        let (off, mask, ways) = x.geo.quick(x.off, self.tags.len() - 1);
        View {
            off,
            mask,
            ways,
            toff: x.toff.map_or(0, |t| t.wrapping_sub(x.off)),
        }
    }

    /// Simulates `accesses` by `core`, writing each result; returns how
    /// many were done: all, or up to the first of a kind the engine leaves
    /// to the general caches (the slots after those done are overwritten
    /// with a first-level hit: the caller writes them again).
    ///
    /// The loop decides the quick look's hits itself (see
    /// [`Jaguar::quick`]), with the geometry held in locals and the hits
    /// counted locally. Such a hit changes no recency and no ownership,
    /// and within one core's batch nothing else can but a call to the
    /// walk or a hit further back (other cores do not run), after either
    /// of which the keys are dropped: so the line found last on each side
    /// is *held*, and the next access to it is one compare against a
    /// per-kind key (for writes, the data side's line only if owned).
    ///
    /// The loop is compiled once for each combination of all-levels lookup
    /// and coherence (chosen here, once a batch), so that neither is a test
    /// or a register in it.
    pub(crate) fn batch(
        &mut self,
        core: usize,
        accesses: &[Access],
        results: &mut [AccessResult],
        coh: &mut CoherenceStats,
        lines: &mut LineTable,
    ) -> usize {
        let results = &mut results[..accesses.len()];
        match (self.all_levels, self.coherent) {
            (true, true) => self.batch_as::<true, true>(core, accesses, results, coh, lines),
            (true, false) => self.batch_as::<true, false>(core, accesses, results, coh, lines),
            (false, true) => self.batch_as::<false, true>(core, accesses, results, coh, lines),
            (false, false) => self.batch_as::<false, false>(core, accesses, results, coh, lines),
        }
    }

    /// [`Jaguar::batch`] with `ALL` for [`Jaguar::all_levels`] and `COH`
    /// for [`Jaguar::coherent`]. `results` is as long as `accesses`.
    #[inline(never)]
    fn batch_as<const ALL: bool, const COH: bool>(
        &mut self,
        core: usize,
        accesses: &[Access],
        results: &mut [AccessResult],
        coh: &mut CoherenceStats,
        lines: &mut LineTable,
    ) -> usize {
        debug_assert_eq!((ALL, COH), (self.all_levels, self.coherent));
        let c = self.cores[core];
        let l1 = [self.view(c.l1[0]), self.view(c.l1[1])];
        let l2 = self.view(c.l2);
        // The `jaguar` preset's geometry, (set mask, ways) of the
        // instruction and data first levels and the second level: 32 KiB
        // of 2 ways, 32 KiB of 8 ways, 2 MiB of 16 ways, 64-byte lines.
        const PRESET: [(u64, usize); 3] = [(255, 2), (63, 8), (2047, 16)];
        if self.shift == 6 && [l1[0], l1[1], l2].map(|v| (v.mask, v.ways)) == PRESET {
            // The same values, as constants.
            let fix = |v: View, (mask, ways)| View { mask, ways, ..v };
            let (i, d) = (fix(l1[0], PRESET[0]), fix(l1[1], PRESET[1]));
            let l2 = fix(l2, PRESET[2]);
            self.batch_loop::<ALL, COH>(core, [i, d], l2, 6, accesses, results, coh, lines)
        } else {
            let sh = self.shift;
            self.batch_loop::<ALL, COH>(core, l1, l2, sh, accesses, results, coh, lines)
        }
    }

    /// [`Jaguar::batch_as`]'s loop over the first levels `l1` (instruction,
    /// data) and second level `l2` of the batch's core, with lines of
    /// `1 << sh` bytes: the values are passed apart so that a caller can
    /// make them constants.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn batch_loop<const ALL: bool, const COH: bool>(
        &mut self,
        core: usize,
        l1: [View; 2],
        l2: View,
        sh: u32,
        accesses: &[Access],
        results: &mut [AccessResult],
        coh: &mut CoherenceStats,
        lines: &mut LineTable,
    ) -> usize {
        let c = self.cores[core];
        // Without all-levels lookup the second level is not looked at.
        let all = ALL;
        let coherent = COH;
        let (gran, in_line) = (sh.saturating_sub(6), (1u64 << sh) - 1);
        // Per kind, the held line an access of that kind hits with one
        // compare; `u64::MAX` for none (no line of an address below
        // `TOP_REGION` is).
        let mut key = [u64::MAX; 4];
        // Per side, the held line's tag index.
        let mut held = [0usize; 2];
        let mut hits = [0u64; 4];
        let n = accesses.len();
        // Every slot a one-line hit first (wide stores): a hit writes nothing.
        results.fill(L1_HIT);
        let mut done = n;
        for i in 0..n {
            let a = accesses[i];
            let k = a.kind as usize;
            if k > AccessKind::ReadModifyWrite as usize {
                done = i;
                break;
            }
            let side = usize::from(k != 0);
            let line = a.addr >> sh;
            let end = a.addr.wrapping_add(u64::from(a.size.saturating_sub(1)));
            if end >> sh == line && a.addr < TOP_REGION {
                let mut hit = line == key[k];
                if !hit {
                    let v = &l1[side];
                    let at = v.off + (line & v.mask) as usize * v.ways;
                    let y = l2.off + (line & l2.mask) as usize * l2.ways;
                    // Asked for writes only: a read's hold leaves writes
                    // to look again.
                    let writes = k >= AccessKind::Write as usize;
                    let owned = writes && (!coherent || self.owners.owns(line << sh, core));
                    if !writes || owned {
                        if self.tags[at] >> 1 == line && (!all || self.tags[y] >> 1 == line) {
                            hit = true;
                        } else if self.promote(v, &l2, all, line, side == 1 && coherent) {
                            // A hit further back: the line is now the most
                            // recent of its sets, which may have changed
                            // the other side's held line's place below.
                            hit = true;
                            key = [u64::MAX; 4];
                        }
                        if hit {
                            held[side] = at;
                            if side == 0 {
                                key[0] = line;
                            } else {
                                let w = if owned { line } else { u64::MAX };
                                key = [key[0], line, w, w];
                            }
                        }
                    }
                }
                if hit {
                    let at = held[side];
                    self.tags[at] |= u64::from(k >= AccessKind::Write as usize);
                    if coherent && side == 1 {
                        let first = (a.addr & in_line) >> gran;
                        let last = (end & in_line) >> gran;
                        self.touched[at.wrapping_add(l1[1].toff)] |=
                            (u64::MAX >> (63 - (last - first))) << first;
                    }
                    hits[k] += 1;
                    continue;
                }
            } else if end >> sh == line + 1 && a.addr < TOP_REGION {
                // Two lines, each the most recent of its sets and, for a
                // write, owned: each line's walk would only set its dirty
                // bit and bytes touched, and count a hit at each level.
                let v = &l1[side];
                let next = line + 1;
                let at0 = v.off + (line & v.mask) as usize * v.ways;
                let at1 = v.off + (next & v.mask) as usize * v.ways;
                let y0 = l2.off + (line & l2.mask) as usize * l2.ways;
                let y1 = l2.off + (next & l2.mask) as usize * l2.ways;
                let writes = k >= AccessKind::Write as usize;
                if self.tags[at0] >> 1 == line
                    && self.tags[at1] >> 1 == next
                    && (!all || (self.tags[y0] >> 1 == line && self.tags[y1] >> 1 == next))
                    && (!writes
                        || !coherent
                        || (self.owners.owns(line << sh, core)
                            && self.owners.owns(next << sh, core)))
                {
                    let d = u64::from(writes);
                    self.tags[at0] |= d;
                    self.tags[at1] |= d;
                    if coherent && side == 1 {
                        let first = (a.addr & in_line) >> gran;
                        let last = in_line >> gran;
                        self.touched[at0.wrapping_add(l1[1].toff)] |=
                            (u64::MAX >> (63 - (last - first))) << first;
                        let last = (end & in_line) >> gran;
                        self.touched[at1.wrapping_add(l1[1].toff)] |= u64::MAX >> (63 - last);
                    }
                    hits[k] += 2;
                    results[i] = L1_HIT_2;
                    continue;
                }
            }
            key = [u64::MAX; 4];
            results[i] = self.demand(core, k, a.addr, a.size, coh, lines);
        }
        for (k, n) in hits.into_iter().enumerate() {
            self.caches[usize::from(c.l1[k])].acc[k] += n;
            if all {
                self.caches[usize::from(c.l2)].acc[usize::from(k != 0)] += n;
            }
        }
        done
    }
}

impl Jaguar {
    /// A one-line hit further back than the most recent line of its set
    /// at the first level `v` (and, if `all`, at the second level `w`):
    /// moves it to the front of its set at each (with its mask, if
    /// `masks`) and returns true; false, with nothing changed, if the
    /// first level lacks the line (or its sets are not a power of two).
    #[inline(always)]
    fn promote(&mut self, v: &View, w: &View, all: bool, line: u64, masks: bool) -> bool {
        let b1 = v.off + (line & v.mask) as usize * v.ways;
        let Some(p1) = sets::position(&self.tags[b1..b1 + v.ways], line) else {
            return false;
        };
        let b2 = w.off + (line & w.mask) as usize * w.ways;
        let mut p2 = 0;
        if all {
            // Inclusion: the line is below too (unless that level's sets
            // are not a power of two: then the walk does it).
            match sets::position(&self.tags[b2..b2 + w.ways], line) {
                Some(p) => p2 = p,
                None => return false,
            }
        }
        rotate(&mut self.tags[b1..=b1 + p1]);
        if masks {
            let t = b1.wrapping_add(v.toff);
            rotate(&mut self.touched[t..=t + p1]);
        }
        if all {
            rotate(&mut self.tags[b2..=b2 + p2]);
        }
        true
    }
}

/// One instance as the batch loop's quick look needs it.
#[derive(Clone, Copy)]
struct View {
    off: usize,
    mask: u64,
    ways: usize,
    /// Add to a tag index for its mask's index (data first levels of a
    /// coherent hierarchy).
    toff: usize,
}
