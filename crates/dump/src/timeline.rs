//! The order of a capture (section `TIME`, dump version 6, optional:
//! captures made with `record --timeline`): per traced thread, the stack
//! transitions of the window in the order they happened, each with the
//! thread's counter deltas since its previous event. Written by the
//! capture engine (`coldcache_capture::timeline`), read by the Perfetto
//! export (`coldcache_export::perfetto`).
//!
//! Events are kept in the accountant's order (threads interleaved as the
//! simulator saw them); one thread's events, read in that order, are its
//! timeline: a [`TimeKind::Start`] when its tracing starts (the stack its
//! shadow stack was seeded with), a [`TimeKind::Move`] at each stack
//! change (a call entered, frames returned from), a [`TimeKind::Stop`]
//! when it leaves the window (the watched function returned, the thread
//! exited, the capture stopped). An event's deltas are what the thread
//! counted since its previous event (so at its stack before the event);
//! for a timeline nothing was dropped from, they sum to the dump's totals
//! of the same counters.

use crate::varint;
use crate::DumpError;

/// What an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeKind {
    /// The thread's stack changed to the event's stack.
    Move,
    /// The thread's tracing started, at the event's stack.
    Start,
    /// The thread left the window (its frames end here).
    Stop,
}

impl TimeKind {
    /// The number the format gives it.
    pub fn code(self) -> u64 {
        match self {
            TimeKind::Move => 0,
            TimeKind::Start => 1,
            TimeKind::Stop => 2,
        }
    }

    /// The kind of a code, `None` for an unknown one.
    pub fn from_code(c: u64) -> Option<TimeKind> {
        match c {
            0 => Some(TimeKind::Move),
            1 => Some(TimeKind::Start),
            2 => Some(TimeKind::Stop),
            _ => None,
        }
    }
}

/// One event of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEvent {
    /// The thread's index in the dump's threads.
    pub thread: u32,
    /// What happened.
    pub kind: TimeKind,
    /// The stack id after the event (into the dump's stacks).
    pub stack: u32,
}

/// The `TIME` section.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    /// The names of each event's counters, in order: dump counter names
    /// (`instructions`, `i_L1` .. `w_mem`).
    pub counters: Vec<String>,
    /// The events, in the accountant's order.
    pub events: Vec<TimeEvent>,
    /// Every event's deltas, `counters.len()` per event, flat.
    pub deltas: Vec<u64>,
    /// Events the capture could not keep (its limit or the memory budget
    /// was reached: every event after the first dropped one is dropped,
    /// so what is kept is the start of the timeline).
    pub dropped: u64,
    /// The bytes the capture allowed the timeline (its limit).
    pub limit: u64,
}

impl Timeline {
    /// Event `i`'s deltas.
    pub fn deltas_of(&self, i: usize) -> &[u64] {
        let n = self.counters.len();
        &self.deltas[i * n..(i + 1) * n]
    }

    /// Index of a counter by name.
    pub fn counter(&self, name: &str) -> Option<usize> {
        self.counters.iter().position(|c| c == name)
    }

    /// Decodes `count` events as the capture encodes them (each: thread
    /// index, `stack << 2 | kind`, then one number per counter), checking
    /// them against `stacks` and `threads` when given.
    pub fn decode_events(
        &mut self,
        bytes: &[u8],
        count: usize,
        stacks: usize,
        threads: usize,
    ) -> Result<(), DumpError> {
        let mut r = varint::Reader::new(bytes, "TIME");
        self.read_events(&mut r, count, stacks, threads)?;
        r.finish()
    }

    fn read_events(
        &mut self,
        r: &mut varint::Reader<'_>,
        count: usize,
        stacks: usize,
        threads: usize,
    ) -> Result<(), DumpError> {
        let n = self.counters.len();
        let bad = |what: String| DumpError::Malformed {
            section: "TIME",
            what,
        };
        self.events.reserve(count);
        self.deltas.reserve(count.saturating_mul(n));
        for i in 0..count {
            let thread = r.get_u32()?;
            let tag = r.get()?;
            let kind = TimeKind::from_code(tag & 3)
                .ok_or_else(|| bad(format!("event {i} has unknown kind {}", tag & 3)))?;
            let stack = u32::try_from(tag >> 2)
                .map_err(|_| bad(format!("event {i}'s stack exceeds 32 bits")))?;
            if thread as usize >= threads || stack as usize >= stacks {
                return Err(bad(format!(
                    "event {i} refers to thread {thread} of {threads} or stack {stack} of {stacks}"
                )));
            }
            self.events.push(TimeEvent {
                thread,
                kind,
                stack,
            });
            for _ in 0..n {
                self.deltas.push(r.get()?);
            }
        }
        Ok(())
    }

    /// Appends the section's payload.
    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        varint::put(b, self.counters.len() as u64);
        for c in &self.counters {
            varint::put_bytes(b, c.as_bytes());
        }
        varint::put(b, self.dropped);
        varint::put(b, self.limit);
        varint::put(b, self.events.len() as u64);
        for (i, e) in self.events.iter().enumerate() {
            varint::put(b, e.thread.into());
            varint::put(b, u64::from(e.stack) << 2 | e.kind.code());
            for &d in self.deltas_of(i) {
                varint::put(b, d);
            }
        }
    }

    /// Reads the section's payload.
    pub(crate) fn decode(
        bytes: &[u8],
        stacks: usize,
        threads: usize,
    ) -> Result<Timeline, DumpError> {
        let mut r = varint::Reader::new(bytes, "TIME");
        let n = r.count(1)?;
        let mut t = Timeline::default();
        for _ in 0..n {
            t.counters.push(r.string()?);
        }
        t.dropped = r.get()?;
        t.limit = r.get()?;
        let count = r.count(2 + n)?;
        t.read_events(&mut r, count, stacks, threads)?;
        r.finish()?;
        Ok(t)
    }
}
