//! From decoded events to per-thread zone instances (spans). Pure.
//!
//! Each thread's chunks are put in sequence order and its events replayed
//! against a stack. What does not balance is reported as a [`Problem`]
//! naming the thread, the event's position and what was wrong, and parsing
//! goes on: an end that matches a zone deeper in the stack closes the zones
//! above it at that time; an end matching nothing is skipped; a missing
//! chunk closes everything open at the last time stamp before it; zones
//! still open at the end of a thread are closed at its last time stamp.
//!
//! The replay ([`Replayer`]) tells a [`Visitor`] each begin, end (with the
//! zone's self time) and frame mark, keeping only the open zones: [`parse`]
//! is the visitor that keeps every span; the views' feeds
//! (`views::TopDownFeed` ...) and the streaming exports (`stream.rs`) keep
//! aggregates or write as they go.

use crate::format::{kind, Decoded, Event, FormatError, ZoneKey};
use std::collections::HashMap;

/// One zone instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// Which zone.
    pub key: ZoneKey,
    /// Begin time stamp.
    pub start: u64,
    /// End time stamp (`>= start`).
    pub end: u64,
    /// Nesting depth (0 for a top-level zone).
    pub depth: u32,
    /// Index of the enclosing span in the same thread.
    pub parent: Option<u32>,
    /// Bytes declared by `zone_bytes!` (0 if none).
    pub bytes: u64,
    /// Whether the end was not recorded (closed by the parser).
    pub closed_by_parser: bool,
}

impl Span {
    /// Duration in ticks.
    pub fn ticks(&self) -> u64 {
        self.end - self.start
    }
}

/// One thread's zones.
#[derive(Clone, Debug, Default)]
pub struct ThreadTrace {
    /// Recorder index.
    pub index: u32,
    /// OS thread id (0 if unknown).
    pub tid: u32,
    /// Name ("" if unknown).
    pub name: String,
    /// Spans in begin order (a parent before its children).
    pub spans: Vec<Span>,
    /// Frame marks: (time stamp, frame number).
    pub frames: Vec<(u64, u64)>,
    /// Events replayed.
    pub events: u64,
}

impl ThreadTrace {
    /// A display name: the thread name, or "thread N".
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            format!("thread {}", self.index)
        } else {
            self.name.clone()
        }
    }
}

/// Something that did not add up, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Recorder thread index (0 for file-level problems).
    pub thread: u32,
    /// Position of the event in the thread's event sequence (from 0).
    pub event: u64,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.thread == 0 {
            write!(f, "{}", self.what)
        } else {
            write!(
                f,
                "thread {} event #{}: {}",
                self.thread, self.event, self.what
            )
        }
    }
}

/// Name, file and line of a zone key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneName {
    /// Zone or function name.
    pub name: String,
    /// Source file ("" if unknown).
    pub file: String,
    /// Source line (0 if unknown).
    pub line: u32,
}

/// A parsed recording.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// Ticks per second (1e9 when the file has no calibration: then
    /// "seconds" are really ticks / 1e9, and a problem says so).
    pub tsc_hz: f64,
    /// Time stamp at the start of recording (the smallest one seen if
    /// unknown).
    pub start_tsc: u64,
    /// Threads in recorder index order.
    pub threads: Vec<ThreadTrace>,
    /// Names of zones (labels from the file; functions as the caller
    /// symbolizes them, else their address).
    pub names: HashMap<ZoneKey, ZoneName>,
    /// Executable mappings recorded with the data.
    pub modules: Vec<crate::format::ModuleInfo>,
    /// Events the recorder dropped (arena full).
    pub dropped_events: u64,
    /// Everything that did not add up.
    pub problems: Vec<Problem>,
    /// The decoding error that stopped reading the file, if any.
    pub format_error: Option<FormatError>,
}

impl Recording {
    /// The name of a zone key (its address or label id if unknown).
    pub fn name(&self, key: ZoneKey) -> String {
        self.names
            .get(&key)
            .map(|n| n.name.clone())
            .unwrap_or_else(|| key.to_string())
    }

    /// Ticks to seconds.
    pub fn seconds(&self, ticks: f64) -> f64 {
        ticks / self.tsc_hz
    }
}

/// Parses a decoded file into per-thread spans.
pub fn parse(d: &Decoded) -> Recording {
    let mut rec = Recording {
        format_error: d.error.clone(),
        modules: d.modules.clone(),
        ..Default::default()
    };
    if let Some(e) = &d.error {
        rec.problems.push(Problem {
            thread: 0,
            event: 0,
            what: format!("the file is damaged ({e}); what comes before that is used"),
        });
    } else if !d.complete {
        rec.problems.push(Problem {
            thread: 0,
            event: 0,
            what: "the file has no END section (the recording was cut short); what it has is used"
                .into(),
        });
    }
    match &d.info {
        Some(i) if i.tsc_hz.is_finite() && i.tsc_hz > 0.0 => {
            rec.tsc_hz = i.tsc_hz;
            rec.start_tsc = i.start_tsc;
            rec.dropped_events = i.dropped_events;
        }
        _ => {
            rec.tsc_hz = 1e9;
            rec.start_tsc = u64::MAX;
            rec.problems.push(Problem {
                thread: 0,
                event: 0,
                what: "no clock calibration in the file: times are shown assuming 1 GHz".into(),
            });
        }
    }
    if rec.dropped_events > 0 {
        rec.problems.push(Problem {
            thread: 0,
            event: 0,
            what: format!(
                "{} events were dropped because the recording arena was full (COLDCACHE_ZONES_ARENA makes it larger); zones lose their ends from there on",
                rec.dropped_events
            ),
        });
    }
    for l in &d.labels {
        rec.names.insert(
            ZoneKey::Label(l.id),
            ZoneName {
                name: l.name.clone(),
                file: l.file.clone(),
                line: l.line,
            },
        );
    }
    let mut by_thread: HashMap<u32, Vec<&crate::format::Chunk>> = HashMap::new();
    for c in &d.chunks {
        by_thread.entry(c.thread).or_default().push(c);
    }
    let mut indices: Vec<u32> = by_thread.keys().copied().collect();
    indices.sort_unstable();
    for index in indices {
        let mut chunks = by_thread.remove(&index).unwrap_or_default();
        chunks.sort_by_key(|c| c.seq);
        let info = d.threads.iter().find(|t| t.index == index);
        let mut b = SpanBuilder {
            t: ThreadTrace {
                index,
                tid: info.map_or(0, |i| i.tid),
                name: info.map(|i| i.name.clone()).unwrap_or_default(),
                ..Default::default()
            },
        };
        let mut replay = Replayer::new(index);
        for c in chunks {
            if !replay.chunk(c.seq, &mut b, &mut rec.problems) {
                continue;
            }
            for e in &c.events {
                replay.event(e, &mut b, &mut rec.problems);
            }
        }
        replay.finish(&mut b, &mut rec.problems);
        let mut t = b.t;
        t.events = replay.events;
        if rec.start_tsc == u64::MAX || d.info.is_none() {
            if let Some(first) = t.spans.first() {
                rec.start_tsc = rec.start_tsc.min(first.start);
            }
        }
        rec.threads.push(t);
    }
    if rec.start_tsc == u64::MAX {
        rec.start_tsc = 0;
    }
    rec
}

/// A zone still open during a replay.
#[derive(Clone, Debug)]
pub struct Open {
    /// Its number among the thread's zones, in begin order (the index
    /// of its [`Span`] in [`ThreadTrace::spans`]).
    pub index: u64,
    /// Which zone.
    pub key: ZoneKey,
    /// Begin time stamp.
    pub start: u64,
    /// Bytes declared so far.
    pub bytes: u64,
    /// Ticks of its children that have ended (for its self time).
    pub child_ticks: u64,
}

/// What a replay reports, in the order of the thread's events. Zones end
/// innermost first, so a visitor can keep its own stack in step with
/// `stack`.
pub trait Visitor {
    /// A zone begins; `stack` holds the zones enclosing it (innermost
    /// last), its depth is `stack.len()`.
    fn begin(&mut self, index: u64, key: ZoneKey, start: u64, stack: &[Open]);
    /// A zone ends at `end`; its self time is `self_ticks`; `stack` holds
    /// the zones still enclosing it. `closed_by_parser`: its end was not
    /// recorded.
    fn end(
        &mut self,
        span: &Open,
        end: u64,
        self_ticks: u64,
        closed_by_parser: bool,
        stack: &[Open],
    );
    /// A frame mark.
    fn frame(&mut self, _tsc: u64, _n: u64) {}
}

impl<A: Visitor, B: Visitor> Visitor for (A, B) {
    fn begin(&mut self, index: u64, key: ZoneKey, start: u64, stack: &[Open]) {
        self.0.begin(index, key, start, stack);
        self.1.begin(index, key, start, stack);
    }
    fn end(&mut self, span: &Open, end: u64, self_ticks: u64, closed: bool, stack: &[Open]) {
        self.0.end(span, end, self_ticks, closed, stack);
        self.1.end(span, end, self_ticks, closed, stack);
    }
    fn frame(&mut self, tsc: u64, n: u64) {
        self.0.frame(tsc, n);
        self.1.frame(tsc, n);
    }
}

impl<V: Visitor + ?Sized> Visitor for &mut V {
    fn begin(&mut self, index: u64, key: ZoneKey, start: u64, stack: &[Open]) {
        (**self).begin(index, key, start, stack)
    }
    fn end(&mut self, span: &Open, end: u64, self_ticks: u64, closed: bool, stack: &[Open]) {
        (**self).end(span, end, self_ticks, closed, stack)
    }
    fn frame(&mut self, tsc: u64, n: u64) {
        (**self).frame(tsc, n)
    }
}

/// A visitor that does nothing (a replay for its problems only).
impl Visitor for () {
    fn begin(&mut self, _: u64, _: ZoneKey, _: u64, _: &[Open]) {}
    fn end(&mut self, _: &Open, _: u64, _: u64, _: bool, _: &[Open]) {}
}

/// The visitor that keeps every span ([`parse`]).
struct SpanBuilder {
    t: ThreadTrace,
}

impl Visitor for SpanBuilder {
    fn begin(&mut self, _index: u64, key: ZoneKey, start: u64, stack: &[Open]) {
        self.t.spans.push(Span {
            key,
            start,
            end: start,
            depth: stack.len() as u32,
            parent: stack.last().map(|p| p.index as u32),
            bytes: 0,
            closed_by_parser: false,
        });
    }
    fn end(&mut self, span: &Open, end: u64, _self_ticks: u64, closed: bool, _stack: &[Open]) {
        let s = &mut self.t.spans[span.index as usize];
        s.end = end;
        s.bytes = span.bytes;
        s.closed_by_parser = closed;
    }
    fn frame(&mut self, tsc: u64, n: u64) {
        self.t.frames.push((tsc, n));
    }
}

/// Replays one thread's events, chunk by chunk in sequence order, against
/// a stack of open zones (the rules of the module doc), telling a
/// [`Visitor`]. Memory: the open zones only.
pub struct Replayer {
    thread: u32,
    open: Vec<Open>,
    last_tsc: u64,
    spans: u64,
    expected_seq: u32,
    /// Events replayed so far.
    pub events: u64,
}

impl Replayer {
    /// A replay of recorder thread `thread`.
    pub fn new(thread: u32) -> Replayer {
        Replayer {
            thread,
            open: Vec::new(),
            last_tsc: 0,
            spans: 0,
            expected_seq: 0,
            events: 0,
        }
    }

    /// The next chunk (in sequence order) is `seq`: reports a gap (closing
    /// what is open) or a duplicate. Returns whether to replay its events.
    pub fn chunk(&mut self, seq: u32, v: &mut impl Visitor, problems: &mut Vec<Problem>) -> bool {
        if seq != self.expected_seq {
            let what = if seq < self.expected_seq {
                format!("chunk {seq} appears twice; the copy is skipped")
            } else {
                format!(
                    "chunks {}..{} are missing (events lost); zones open before the gap are closed there",
                    self.expected_seq,
                    seq - 1
                )
            };
            problems.push(Problem {
                thread: self.thread,
                event: self.events,
                what,
            });
            if seq < self.expected_seq {
                return false;
            }
            self.close_all(v, problems, false);
        }
        self.expected_seq = seq + 1;
        true
    }

    fn close_top(&mut self, end: u64, closed: bool, v: &mut impl Visitor) {
        let s = self.open.pop().expect("a zone is open");
        let ticks = end - s.start;
        let self_ticks = ticks.saturating_sub(s.child_ticks);
        if let Some(p) = self.open.last_mut() {
            p.child_ticks = p.child_ticks.wrapping_add(ticks);
        }
        v.end(&s, end, self_ticks, closed, &self.open);
    }

    /// Replays one event.
    pub fn event(&mut self, e: &Event, v: &mut impl Visitor, problems: &mut Vec<Problem>) {
        // Time stamps never go backwards within a thread (a migration
        // between cores with unsynchronized counters could make them).
        let tsc = e.tsc.max(self.last_tsc);
        self.last_tsc = tsc;
        match e.kind {
            kind::BEGIN | kind::FUNC_ENTER => {
                let key = key_of(e);
                v.begin(self.spans, key, tsc, &self.open);
                self.open.push(Open {
                    index: self.spans,
                    key,
                    start: tsc,
                    bytes: 0,
                    child_ticks: 0,
                });
                self.spans += 1;
            }
            kind::END | kind::FUNC_EXIT => {
                let key = key_of(e);
                match self.open.iter().rposition(|s| s.key == key) {
                    Some(p) => {
                        let above = self.open.len() - 1 - p;
                        if above > 0 {
                            let inner = self.open.last().expect("open").key;
                            problems.push(Problem {
                                thread: self.thread,
                                event: self.events,
                                what: format!(
                                    "end of {key} while {above} zone(s) inside it are still open (innermost {inner}); they are closed here"
                                ),
                            });
                        }
                        while self.open.len() > p {
                            let closed = self.open.len() > p + 1;
                            self.close_top(tsc, closed, v);
                        }
                    }
                    None => problems.push(Problem {
                        thread: self.thread,
                        event: self.events,
                        what: format!("end of {key} that is not open; skipped"),
                    }),
                }
            }
            kind::BYTES => match self.open.last_mut() {
                Some(s) => s.bytes += e.payload,
                None => problems.push(Problem {
                    thread: self.thread,
                    event: self.events,
                    what: format!("{} bytes declared outside any zone; skipped", e.payload),
                }),
            },
            kind::FRAME => v.frame(tsc, e.payload),
            _ => {}
        }
        self.events += 1;
    }

    /// The thread's events are over: closes what is still open.
    pub fn finish(&mut self, v: &mut impl Visitor, problems: &mut Vec<Problem>) {
        self.close_all(v, problems, true);
    }

    fn close_all(&mut self, v: &mut impl Visitor, problems: &mut Vec<Problem>, at_end: bool) {
        if self.open.is_empty() {
            return;
        }
        let inner = self.open.last().expect("open").key;
        problems.push(Problem {
            thread: self.thread,
            event: self.events,
            what: format!(
                "{} zone(s) still open {} (innermost {inner}); closed at the last time stamp",
                self.open.len(),
                if at_end {
                    "at the end of the thread's events"
                } else {
                    "before the gap"
                }
            ),
        });
        while !self.open.is_empty() {
            self.close_top(self.last_tsc, true, v);
        }
    }
}

fn key_of(e: &Event) -> ZoneKey {
    match e.kind {
        kind::BEGIN | kind::END => ZoneKey::Label(e.payload as u32),
        _ => ZoneKey::Function(e.payload),
    }
}
