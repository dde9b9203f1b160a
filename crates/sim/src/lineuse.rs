//! Line utilisation of the first data level (issue 32): for every line a
//! demand access brought into a core's first-level data cache, the
//! distinct bytes of it the program touched while it stayed there,
//! credited to the counter row whose access fetched it.
//!
//! It watches the engine from outside, so every engine (lean, Jaguar,
//! general) is measured the same way and none of their hit paths changes.
//! Per first-level data instance it keeps a table shaped like the cache
//! (same sets, as many slots a set as the cache has ways) of the lines it
//! believes resident: line, byte mask (one bit per byte of a 64-byte line;
//! per 1/64 of a longer line, per byte of a shorter one) and the fetching
//! row. The rules, each exact:
//!
//! - A demand access (read, write, read-modify-write) that hit the first
//!   level ORs its bytes into its line's slot (found after a one-entry
//!   memo, else by a search of the set). A resident line without a slot
//!   was brought in by something other than a demand fill (a software or
//!   hardware prefetch, an instruction fetch into a unified first level):
//!   it gets a slot with no row, whose bytes count nowhere.
//! - An access that missed and left its line resident filled it: any slot
//!   of that line is a residence that ended earlier (the line was evicted
//!   or invalidated, or it would have hit) and is closed; a new slot opens
//!   with the access's row. A software prefetch that was issued opens one
//!   with no row. A miss that left the line out (no write-allocate) closes
//!   the old slot and opens nothing.
//! - Evictions and invalidations are not reported by the engines: a line
//!   that left is found when its set needs a slot (each slot of the set is
//!   checked against the cache, `Hierarchy::instance_contains`) or when it
//!   is fetched again. Its bytes cannot have changed in between: an access
//!   to a line that is not resident misses and fills it anew.
//! - An access straddling lines: which of its lines missed is looked up
//!   before it runs (only for such accesses).
//! - At the end ([`LineUse::flush`]) every open slot closes (credited
//!   straight to the caller, not through the queue).
//!
//! Closing a slot with a row queues a credit `(row, bytes)` (bytes =
//! popcount of the mask, times the granule for lines over 64 bytes: then
//! an upper bound); the caller drains the queue into the rows' counters
//! ([`crate::CounterLayout::lines_fetched`], `bytes_used`). The queue is
//! reserved at construction and never grows: credits that find it full
//! are counted in [`LineUse::lost`] (the driver drains it after each
//! access or instruction, so it holds at most a few sets' slots).
//!
//! Cost: a hit is a memo compare (or a search of its set) and one OR; a
//! miss one lookup in the cache, and a search of its set.

use crate::{Access, AccessKind, AccessResult, Hierarchy, PrefetchIssue};

/// No row: a slot whose bytes count nowhere.
pub const NO_ROW: u32 = u32::MAX;

/// An empty slot's line (no line address reaches it: lines are addresses
/// shifted right by at least 2).
const EMPTY: u64 = u64::MAX;

/// Room of the credit queue.
const QUEUE: usize = 16_384;

/// One first-level data instance's table: per slot its line, byte mask
/// and row, in three arrays (a set's lines are one search).
struct Table {
    instance: usize,
    sets: u64,
    set_mask: u64,
    ways: usize,
    lines: Vec<u64>,
    masks: Vec<u64>,
    rows: Vec<u32>,
    /// Index of the slot touched last (a slot of `EMPTY` at first).
    memo: usize,
}

impl Table {
    #[inline(always)]
    fn set_start(&self, line: u64) -> usize {
        let s = if self.set_mask != u64::MAX {
            line & self.set_mask
        } else {
            line % self.sets
        };
        s as usize * self.ways
    }

    #[inline(always)]
    fn find(&mut self, line: u64) -> Option<usize> {
        if self.lines[self.memo] == line {
            return Some(self.memo);
        }
        let b = self.set_start(line);
        let i = self.lines[b..b + self.ways]
            .iter()
            .position(|&l| l == line)?
            + b;
        self.memo = i;
        Some(i)
    }
}

/// Line utilisation of every first-level data instance of a hierarchy.
pub struct LineUse {
    /// Tables by instance index (`None` for the others).
    tables: Vec<Option<Table>>,
    /// Per core, the index of its first-level data table.
    of_core: Vec<usize>,
    shift: u32,
    /// `shift - 6` when lines are wider than 64 bytes, else 0.
    gran_shift: u32,
    credits: Vec<(u32, u32)>,
    lost: u64,
}

impl LineUse {
    /// Tables for the first-level data (or unified) instances of `h`.
    pub fn new(h: &Hierarchy) -> LineUse {
        let cfg = h.config();
        let infos = h.instances();
        let mut tables: Vec<Option<Table>> = infos.iter().map(|_| None).collect();
        let mut of_core = Vec::with_capacity(cfg.cores);
        let mut shift = 6;
        for core in 0..cfg.cores {
            let i = h.first_data_instance(core);
            let l = &cfg.levels[infos[i].level_index];
            shift = l.line_size.trailing_zeros();
            if tables[i].is_none() {
                let sets = l.sets();
                let ways = l.assoc as usize;
                let n = sets as usize * ways;
                tables[i] = Some(Table {
                    instance: i,
                    sets,
                    set_mask: if sets.is_power_of_two() {
                        sets - 1
                    } else {
                        u64::MAX
                    },
                    ways,
                    lines: vec![EMPTY; n],
                    masks: vec![0; n],
                    rows: vec![NO_ROW; n],
                    memo: 0,
                });
            }
            of_core.push(i);
        }
        LineUse {
            tables,
            of_core,
            shift,
            gran_shift: shift.saturating_sub(6),
            credits: Vec::with_capacity(QUEUE),
            lost: 0,
        }
    }

    /// Before `a` runs on `core`: for an access straddling lines, which of
    /// its first 64 lines the first level holds (bit i: line i of the
    /// access); 0 for anything else (no lookup).
    #[inline(always)]
    pub fn before(&self, h: &Hierarchy, core: usize, a: &Access) -> u64 {
        if !tracked(a.kind) {
            return 0;
        }
        let (first, last) = self.lines(a);
        if first == last {
            return 0;
        }
        let inst = self.of_core[core];
        let mut held = 0u64;
        for (i, line) in (first..=last).take(64).enumerate() {
            if h.instance_contains(inst, line << self.shift) {
                held |= 1 << i;
            }
        }
        held
    }

    /// After `a` ran on `core` with result `r` (and `held`, what
    /// [`LineUse::before`] said): the access's bytes, fills and closings,
    /// a fill credited later to `row`.
    #[inline(always)]
    pub fn after(
        &mut self,
        h: &Hierarchy,
        core: usize,
        a: &Access,
        r: &AccessResult,
        held: u64,
        row: u32,
    ) {
        if !tracked(a.kind) {
            return;
        }
        let (first, last) = self.lines(a);
        let ti = self.of_core[core];
        if first == last {
            let mask = self.mask(a, first);
            // The common case first: a demand hit on the line touched last.
            let t = self.table(ti);
            if t.lines[t.memo] == first && r.served_by.slot() == 0 && a.kind != AccessKind::Prefetch
            {
                let m = t.memo;
                t.masks[m] |= mask;
                return;
            }
            if a.kind == AccessKind::Prefetch {
                if r.prefetch == PrefetchIssue::Issued {
                    self.fill(h, ti, first, 0, NO_ROW);
                }
            } else if r.served_by.slot() == 0 {
                self.hit(h, ti, first, mask);
            } else {
                self.miss(h, ti, first, mask, row);
            }
            return;
        }
        for (i, line) in (first..=last).enumerate() {
            let mask = self.mask(a, line);
            // Past 64 lines nothing was looked up: a line with a slot is
            // taken as held (exact unless it left and came back within
            // the access).
            let was_held = if i < 64 {
                held >> i & 1 != 0
            } else {
                self.table(ti).find(line).is_some()
            };
            if a.kind == AccessKind::Prefetch {
                if !was_held && r.prefetch == PrefetchIssue::Issued {
                    self.fill(h, ti, line, 0, NO_ROW);
                }
            } else if was_held {
                self.hit(h, ti, line, mask);
            } else {
                self.miss(h, ti, line, mask, row);
            }
        }
    }

    /// Closes every open slot (the end of a capture or replay), handing
    /// the queued credits and then each slot's with a row to `f(row,
    /// bytes)` directly (not through the queue, which holds fewer than a
    /// big cache's lines).
    pub fn flush(&mut self, mut f: impl FnMut(u32, u64)) {
        self.drain(&mut f);
        let gran = self.gran_shift;
        for t in self.tables.iter_mut().flatten() {
            for i in 0..t.lines.len() {
                if t.lines[i] != EMPTY && t.rows[i] != NO_ROW {
                    f(t.rows[i], u64::from(t.masks[i].count_ones() << gran));
                }
                t.lines[i] = EMPTY;
                t.masks[i] = 0;
                t.rows[i] = NO_ROW;
            }
        }
    }

    /// Hands every queued credit to `f(row, bytes)` and empties the queue.
    #[inline]
    pub fn drain(&mut self, mut f: impl FnMut(u32, u64)) {
        for &(row, bytes) in &self.credits {
            f(row, u64::from(bytes));
        }
        self.credits.clear();
    }

    /// Credits that found the queue full and were dropped (0 when it is
    /// drained as documented).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    #[inline(always)]
    fn lines(&self, a: &Access) -> (u64, u64) {
        let size = u64::from(a.size.max(1));
        let end = a.addr.saturating_add(size - 1);
        (a.addr >> self.shift, end >> self.shift)
    }

    #[inline(always)]
    fn mask(&self, a: &Access, line: u64) -> u64 {
        let start = line << self.shift;
        let line_last = start + ((1u64 << self.shift) - 1);
        let lo = a.addr.max(start) - start;
        let hi = a
            .addr
            .saturating_add(u64::from(a.size.max(1)) - 1)
            .min(line_last)
            - start;
        let first = lo >> self.gran_shift;
        let n = (hi >> self.gran_shift) - first + 1;
        let bits = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        bits << first
    }

    #[inline(always)]
    fn table(&mut self, ti: usize) -> &mut Table {
        self.tables[ti].as_mut().expect("a first-level data table")
    }

    #[inline(always)]
    fn hit(&mut self, h: &Hierarchy, ti: usize, line: u64, mask: u64) {
        match self.table(ti).find(line) {
            Some(i) => self.table(ti).masks[i] |= mask,
            None => self.fill(h, ti, line, mask, NO_ROW),
        }
    }

    #[inline(always)]
    fn miss(&mut self, h: &Hierarchy, ti: usize, line: u64, mask: u64, row: u32) {
        let inst = self.table(ti).instance;
        if h.instance_contains(inst, line << self.shift) {
            self.fill(h, ti, line, mask, row);
        } else if let Some(i) = self.table(ti).find(line) {
            self.close(ti, i);
        }
    }

    /// `line` was just brought in: an old slot of it closes, a new one
    /// opens with `mask` and `row`.
    fn fill(&mut self, h: &Hierarchy, ti: usize, line: u64, mask: u64, row: u32) {
        if let Some(i) = self.table(ti).find(line) {
            self.close(ti, i);
            self.open(ti, i, line, mask, row);
            return;
        }
        let shift = self.shift;
        let t = self.table(ti);
        let b = t.set_start(line);
        let ways = t.ways;
        if let Some(i) = t.lines[b..b + ways].iter().position(|&l| l == EMPTY) {
            self.open(ti, b + i, line, mask, row);
            return;
        }
        // The set is full: a line that left since is found now (the first
        // one; others, after invalidations, at the next fills).
        let inst = t.instance;
        let free = t.lines[b..b + ways]
            .iter()
            .position(|&l| !h.instance_contains(inst, l << shift));
        // A cache of these sets and ways holds at most `ways` lines of
        // the set, `line` among them: one slot was stale. Should that ever
        // fail, the first slot closes (its credit is early, not lost).
        let i = b + free.unwrap_or(0);
        self.close(ti, i);
        self.open(ti, i, line, mask, row);
    }

    #[inline(always)]
    fn open(&mut self, ti: usize, i: usize, line: u64, mask: u64, row: u32) {
        let t = self.table(ti);
        t.lines[i] = line;
        t.masks[i] = mask;
        t.rows[i] = row;
        t.memo = i;
    }

    fn close(&mut self, ti: usize, i: usize) {
        let gran = self.gran_shift;
        let t = self.table(ti);
        let (line, mask, row) = (t.lines[i], t.masks[i], t.rows[i]);
        t.lines[i] = EMPTY;
        t.masks[i] = 0;
        t.rows[i] = NO_ROW;
        if line != EMPTY && row != NO_ROW {
            let bytes = mask.count_ones() << gran;
            if self.credits.len() < self.credits.capacity() {
                self.credits.push((row, bytes));
            } else {
                self.lost += 1;
            }
        }
    }
}

/// Whether accesses of `kind` are watched: demand data accesses and
/// software prefetches (non-temporal stores and flushes only remove lines,
/// found as such later; instruction fetches are the other side).
#[inline(always)]
fn tracked(kind: AccessKind) -> bool {
    matches!(
        kind,
        AccessKind::Read | AccessKind::Write | AccessKind::ReadModifyWrite | AccessKind::Prefetch
    )
}
