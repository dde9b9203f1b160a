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
//!
//! A [`Timeline`] keeps its events encoded as the section holds them
//! (about 13 bytes an event where decoded ones take 90): a capture's
//! timeline may hold hundreds of millions; [`Timeline::for_each`] decodes
//! them one at a time.

use crate::varint;
use crate::DumpError;
use std::convert::Infallible;

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
    /// Events the capture could not keep (its limit or the memory budget
    /// was reached: every event after the first dropped one is dropped,
    /// so what is kept is the start of the timeline).
    pub dropped: u64,
    /// The bytes the capture allowed the timeline (its limit).
    pub limit: u64,
    /// Events kept.
    count: usize,
    /// The events, encoded (each: thread index, `stack << 2 | kind`, one
    /// number per counter).
    bytes: Vec<u8>,
}

impl Timeline {
    /// An empty timeline of events carrying `counters`.
    pub fn new(counters: Vec<String>, dropped: u64, limit: u64) -> Timeline {
        Timeline {
            counters,
            dropped,
            limit,
            ..Default::default()
        }
    }

    /// Events kept.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no event was kept.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Index of a counter by name.
    pub fn counter(&self, name: &str) -> Option<usize> {
        self.counters.iter().position(|c| c == name)
    }

    /// Appends an event with its deltas (`counters.len()` of them).
    pub fn push(&mut self, e: TimeEvent, deltas: &[u64]) {
        debug_assert_eq!(deltas.len(), self.counters.len());
        varint::put(&mut self.bytes, e.thread.into());
        varint::put(&mut self.bytes, u64::from(e.stack) << 2 | e.kind.code());
        for &d in deltas {
            varint::put(&mut self.bytes, d);
        }
        self.count += 1;
    }

    /// A timeline of `count` events encoded in `bytes` as [`push`](Self::push)
    /// encodes them, checked (against `stacks` stacks and `threads`
    /// threads) and kept as they are.
    pub fn from_encoded(
        counters: Vec<String>,
        dropped: u64,
        limit: u64,
        count: usize,
        bytes: Vec<u8>,
        stacks: usize,
        threads: usize,
    ) -> Result<Timeline, DumpError> {
        let mut r = varint::Reader::new(&bytes, "TIME");
        check_events(&mut r, &bytes, counters.len(), count, stacks, threads)?;
        r.finish()?;
        Ok(Timeline {
            counters,
            dropped,
            limit,
            count,
            bytes,
        })
    }

    /// Calls `f` with each event, in order: its index, the event and its
    /// deltas.
    pub fn for_each(&self, mut f: impl FnMut(usize, TimeEvent, &[u64])) {
        // Checked when the timeline was made or read.
        let n = self.counters.len();
        let Ok(()) = each_event::<Infallible>(&self.bytes, n, self.count, |i, thread, tag, d| {
            let e = TimeEvent {
                thread: thread as u32,
                kind: TimeKind::from_code(tag & 3).unwrap_or(TimeKind::Move),
                stack: (tag >> 2) as u32,
            };
            f(i, e, d);
            Ok(())
        });
    }

    /// Every event with its deltas, decoded (for small timelines: about
    /// 90 bytes an event).
    pub fn events(&self) -> Vec<(TimeEvent, Vec<u64>)> {
        let mut v = Vec::with_capacity(self.count);
        self.for_each(|_, e, d| v.push((e, d.to_vec())));
        v
    }

    /// Appends the section's payload.
    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        varint::put(b, self.counters.len() as u64);
        for c in &self.counters {
            varint::put_bytes(b, c.as_bytes());
        }
        varint::put(b, self.dropped);
        varint::put(b, self.limit);
        varint::put(b, self.count as u64);
        b.extend_from_slice(&self.bytes);
    }

    /// Reads the section's payload.
    pub(crate) fn decode(
        bytes: &[u8],
        stacks: usize,
        threads: usize,
    ) -> Result<Timeline, DumpError> {
        let mut r = varint::Reader::new(bytes, "TIME");
        let n = r.count(1)?;
        let mut counters = Vec::with_capacity(n);
        for _ in 0..n {
            counters.push(r.string()?);
        }
        let dropped = r.get()?;
        let limit = r.get()?;
        let count = r.count(2 + n)?;
        let start = r.position();
        check_events(&mut r, bytes, n, count, stacks, threads)?;
        let end = r.position();
        r.finish()?;
        Ok(Timeline {
            counters,
            dropped,
            limit,
            count,
            bytes: bytes[start..end].to_vec(),
        })
    }
}

/// Calls `f` with each of the `count` events of `n` counters encoded in
/// `bytes` as [`Timeline::push`] encodes them: its index, thread, tag (the
/// kind in the 2 low bits, the stack above) and deltas. The one decoding
/// of an event, for [`Timeline::for_each`] and [`check_events`]; the
/// numbers are taken as well-formed (a bad one reads as 0: `check_events`
/// checks them first), which keeps this loop free of error paths.
#[inline(always)]
fn each_event<E>(
    bytes: &[u8],
    n: usize,
    count: usize,
    mut f: impl FnMut(usize, u64, u64, &[u64]) -> Result<(), E>,
) -> Result<(), E> {
    let mut deltas = vec![0u64; n];
    let mut pos = 0;
    let get = |pos: &mut usize| coldcache_fsio::varint::get(bytes, pos).unwrap_or(0);
    for i in 0..count {
        let thread = get(&mut pos);
        let tag = get(&mut pos);
        for d in deltas.iter_mut() {
            *d = get(&mut pos);
        }
        f(i, thread, tag, &deltas)?;
    }
    Ok(())
}

/// Reads `count` events of `n` counters from `r` (reading `bytes`),
/// checking each: first that they are `count × (2 + n)` well-formed
/// numbers, then each event as [`each_event`] decodes it.
fn check_events(
    r: &mut varint::Reader<'_>,
    bytes: &[u8],
    n: usize,
    count: usize,
    stacks: usize,
    threads: usize,
) -> Result<(), DumpError> {
    let bad = |what: String| DumpError::Malformed {
        section: "TIME",
        what,
    };
    let start = r.position();
    for _ in 0..count.saturating_mul(2 + n) {
        r.get()?;
    }
    each_event(
        &bytes[start..r.position()],
        n,
        count,
        |i, thread, tag, _| {
            TimeKind::from_code(tag & 3)
                .ok_or_else(|| bad(format!("event {i} has unknown kind {}", tag & 3)))?;
            let stack = tag >> 2;
            if thread >= threads as u64 || stack >= stacks as u64 {
                return Err(bad(format!(
                    "event {i} refers to thread {thread} of {threads} or stack {stack} of {stacks}"
                )));
            }
            Ok(())
        },
    )
}
