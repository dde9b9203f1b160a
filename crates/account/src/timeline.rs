//! The order of a capture (opt-in: `record --timeline`,
//! `COLDCACHE_TIMELINE=1`): per traced thread, its stack transitions in
//! the window, in order, each with the thread's counter deltas since its
//! previous one (instructions, and the instruction fetches, data reads
//! and data writes served by each level), for the dump's `TIME` section
//! (`coldcache_dump::Timeline`) and the Perfetto export.
//!
//! How it stays off the hit path and exact:
//! - the accountant adds every counted (not warming) instruction's row
//!   increments into one running row ([`Timeline::run`]) beside its real
//!   row (`account::attribute_all`): the same increments, so the sum of
//!   the events' deltas is the dump's totals of those counters;
//! - per thread, deltas come from that one row by snapshots: a thread
//!   switch (checked once per step or replayed block) moves what the
//!   running row gained since the last snapshot to the thread that was
//!   running ([`Timeline::switch`]); an event adds the current thread's
//!   gain to what it accrued before, and writes it;
//! - events are written only at stack changes (a call entered, frames
//!   popped), a thread's start (after its shadow stack is seeded) and its
//!   stop (window end, exit, capture end). Both engines call the
//!   accountant at the same instructions with the same stacks, so a
//!   single-threaded program's timeline is the same in trap and fast mode.
//!
//! Memory: events are encoded as LEB128 into a [`GrowVec`] charged to the
//! capture's memory budget, at most [`Timeline::limit`] bytes (a quarter
//! of the budget, or `COLDCACHE_TIMELINE_LIMIT`). Once an event does not
//! fit, it and every later one are dropped and counted (the dump keeps
//! the timeline's start, the count and the limit; `report` shows a note).
//! No allocation after [`Timeline::new`].

use crate::grow::{Budget, GrowVec};
use coldcache_dump::TimeKind;
use coldcache_sim::{CounterLayout, Side};

/// Largest encoded event: thread, tag, and at most this many counters.
const MAX_COUNTERS: usize = 1 + 3 * (coldcache_sim::MAX_LEVELS + 1);
const MAX_EVENT: usize = 10 * (2 + MAX_COUNTERS);

/// The timeline being recorded; see the module doc.
pub struct Timeline {
    /// Every counted instruction's counters, summed: a row of the layout.
    pub(crate) run: Vec<u64>,
    /// The layout's columns an event carries.
    cols: Vec<usize>,
    /// `run`'s picked columns when the current thread's gain was last
    /// taken.
    base: Vec<u64>,
    /// The thread slot `run` gains for (`usize::MAX`: none yet).
    cur: usize,
    /// Per thread slot, `cols.len()` deltas accrued while other threads
    /// ran since its last event.
    acc: Vec<u64>,
    /// Per thread slot: started and not stopped.
    open: Vec<bool>,
    buf: GrowVec<u8>,
    events: u64,
    dropped: u64,
    limit: usize,
    names: Vec<String>,
}

impl Timeline {
    /// A timeline for `slots` thread slots and rows of `layout` whose
    /// counters are named `names`, at most `limit` bytes.
    pub fn new(layout: CounterLayout, names: &[String], slots: usize, limit: usize) -> Timeline {
        let levels = layout.levels();
        let mut cols = vec![CounterLayout::INSTRUCTIONS];
        for side in [Side::Instr, Side::Read, Side::Write] {
            for slot in 0..=levels {
                cols.push(layout.served(side, slot));
            }
        }
        debug_assert!(cols.len() <= MAX_COUNTERS);
        let w = cols.len();
        Timeline {
            run: vec![0; layout.len()],
            names: cols
                .iter()
                .map(|&c| names.get(c).cloned().unwrap_or_default())
                .collect(),
            cols,
            base: vec![0; w],
            cur: usize::MAX,
            acc: vec![0; w * slots],
            open: vec![false; slots],
            buf: GrowVec::new(limit.max(1)),
            events: 0,
            dropped: 0,
            limit,
        }
    }

    /// Thread slot `ti` runs now: what the running row gained since the
    /// last snapshot goes to the slot that ran. One compare when `ti` ran
    /// last.
    #[inline(always)]
    pub(crate) fn switch(&mut self, ti: usize) {
        if self.cur != ti {
            self.switch_slow(ti);
        }
    }

    #[inline(never)]
    fn switch_slow(&mut self, ti: usize) {
        let w = self.cols.len();
        if self.cur != usize::MAX {
            let acc = &mut self.acc[self.cur * w..(self.cur + 1) * w];
            for (j, &c) in self.cols.iter().enumerate() {
                acc[j] += self.run[c] - self.base[j];
            }
        }
        for (j, &c) in self.cols.iter().enumerate() {
            self.base[j] = self.run[c];
        }
        self.cur = ti;
    }

    /// Thread slot `ti` (the dump's thread `serial`) starts at `stack`:
    /// nothing it gained before counts.
    pub(crate) fn start(&mut self, ti: usize, serial: u32, stack: u32, b: &mut Budget) {
        self.switch(ti);
        let w = self.cols.len();
        self.acc[ti * w..(ti + 1) * w].fill(0);
        for (j, &c) in self.cols.iter().enumerate() {
            self.base[j] = self.run[c];
        }
        self.open[ti] = true;
        self.write(ti, serial, TimeKind::Start, stack, b);
    }

    /// Thread slot `ti`'s stack is now `stack` (a no-op when it is not
    /// open).
    #[inline]
    pub(crate) fn moved(&mut self, ti: usize, serial: u32, stack: u32, b: &mut Budget) {
        if self.open[ti] {
            self.write(ti, serial, TimeKind::Move, stack, b);
        }
    }

    /// Thread slot `ti` leaves the window at `stack` (a no-op when it is
    /// not open).
    pub(crate) fn stop(&mut self, ti: usize, serial: u32, stack: u32, b: &mut Budget) {
        if self.open[ti] {
            self.write(ti, serial, TimeKind::Stop, stack, b);
            self.open[ti] = false;
        }
    }

    /// Writes an event of slot `ti` with its deltas since its previous
    /// one, or counts it dropped.
    fn write(&mut self, ti: usize, serial: u32, kind: TimeKind, stack: u32, b: &mut Budget) {
        self.switch(ti);
        let w = self.cols.len();
        let mut out = [0u8; MAX_EVENT];
        let mut n = 0;
        let mut put = |mut v: u64| {
            while v >= 0x80 {
                out[n] = v as u8 | 0x80;
                n += 1;
                v >>= 7;
            }
            out[n] = v as u8;
            n += 1;
        };
        put(u64::from(serial));
        put(u64::from(stack) << 2 | kind.code());
        let acc = &mut self.acc[ti * w..(ti + 1) * w];
        for (j, &c) in self.cols.iter().enumerate() {
            let now = self.run[c];
            put(acc[j] + now - self.base[j]);
            acc[j] = 0;
            self.base[j] = now;
        }
        if self.dropped > 0 || self.buf.reserve(n, b).is_err() {
            self.dropped += 1;
            return;
        }
        for &byte in &out[..n] {
            // Room was reserved above: this cannot fail.
            let _ = self.buf.push(byte, b);
        }
        self.events += 1;
    }

    /// Events kept.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Events dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The dump's section (normal context: it allocates); `stacks` and
    /// `threads` are the dump's counts, checked.
    pub fn finish(&self, stacks: usize, threads: usize) -> coldcache_dump::Timeline {
        let (names, dropped, limit) = (self.names.clone(), self.dropped, self.limit as u64);
        // Kept encoded: the capture wrote these bytes itself, they decode.
        coldcache_dump::Timeline::from_encoded(
            names.clone(),
            dropped,
            limit,
            self.events as usize,
            self.buf.as_slice().to_vec(),
            stacks,
            threads,
        )
        .unwrap_or_else(|e| {
            debug_assert!(false, "timeline does not decode: {e}");
            coldcache_dump::Timeline::new(names, dropped, limit)
        })
    }
}
