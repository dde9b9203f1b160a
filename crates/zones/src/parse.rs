//! From decoded events to per-thread zone instances (spans). Pure.
//!
//! Each thread's chunks are put in sequence order and its events replayed
//! against a stack. What does not balance is reported as a [`Problem`]
//! naming the thread, the event's position and what was wrong, and parsing
//! goes on: an end that matches a zone deeper in the stack closes the zones
//! above it at that time; an end matching nothing is skipped; a missing
//! chunk closes everything open at the last time stamp before it; zones
//! still open at the end of a thread are closed at its last time stamp.

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
        let mut t = ThreadTrace {
            index,
            tid: info.map_or(0, |i| i.tid),
            name: info.map(|i| i.name.clone()).unwrap_or_default(),
            ..Default::default()
        };
        let mut replay = Replay::default();
        let mut expected_seq = 0u32;
        for c in chunks {
            if c.seq != expected_seq {
                let what = if c.seq < expected_seq {
                    format!("chunk {} appears twice; the copy is skipped", c.seq)
                } else {
                    format!(
                        "chunks {}..{} are missing (events lost); zones open before the gap are closed there",
                        expected_seq,
                        c.seq - 1
                    )
                };
                rec.problems.push(Problem {
                    thread: index,
                    event: t.events,
                    what,
                });
                if c.seq < expected_seq {
                    continue;
                }
                replay.close_all(&mut t, &mut rec.problems, false);
            }
            expected_seq = c.seq + 1;
            for e in &c.events {
                replay.event(&mut t, e, &mut rec.problems);
                t.events += 1;
            }
        }
        replay.close_all(&mut t, &mut rec.problems, true);
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

#[derive(Default)]
struct Replay {
    /// Indices of open spans, innermost last.
    open: Vec<u32>,
    last_tsc: u64,
}

impl Replay {
    fn event(&mut self, t: &mut ThreadTrace, e: &Event, problems: &mut Vec<Problem>) {
        // Time stamps never go backwards within a thread (a migration
        // between cores with unsynchronized counters could make them).
        let tsc = e.tsc.max(self.last_tsc);
        self.last_tsc = tsc;
        match e.kind {
            kind::BEGIN | kind::FUNC_ENTER => {
                let key = key_of(e);
                let parent = self.open.last().copied();
                t.spans.push(Span {
                    key,
                    start: tsc,
                    end: tsc,
                    depth: self.open.len() as u32,
                    parent,
                    bytes: 0,
                    closed_by_parser: false,
                });
                self.open.push(t.spans.len() as u32 - 1);
            }
            kind::END | kind::FUNC_EXIT => {
                let key = key_of(e);
                let pos = self
                    .open
                    .iter()
                    .rposition(|&i| t.spans[i as usize].key == key);
                match pos {
                    Some(p) => {
                        let above = self.open.len() - 1 - p;
                        if above > 0 {
                            let inner = t.spans[*self.open.last().unwrap() as usize].key;
                            problems.push(Problem {
                                thread: t.index,
                                event: t.events,
                                what: format!(
                                    "end of {key} while {above} zone(s) inside it are still open (innermost {inner}); they are closed here"
                                ),
                            });
                        }
                        while self.open.len() > p {
                            let i = self.open.pop().unwrap() as usize;
                            t.spans[i].end = tsc;
                            t.spans[i].closed_by_parser = self.open.len() > p;
                        }
                    }
                    None => problems.push(Problem {
                        thread: t.index,
                        event: t.events,
                        what: format!("end of {key} that is not open; skipped"),
                    }),
                }
            }
            kind::BYTES => match self.open.last() {
                Some(&i) => t.spans[i as usize].bytes += e.payload,
                None => problems.push(Problem {
                    thread: t.index,
                    event: t.events,
                    what: format!("{} bytes declared outside any zone; skipped", e.payload),
                }),
            },
            kind::FRAME => t.frames.push((tsc, e.payload)),
            _ => {}
        }
    }

    fn close_all(&mut self, t: &mut ThreadTrace, problems: &mut Vec<Problem>, at_end: bool) {
        if self.open.is_empty() {
            return;
        }
        let inner = t.spans[*self.open.last().unwrap() as usize].key;
        problems.push(Problem {
            thread: t.index,
            event: t.events,
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
        for &i in &self.open {
            t.spans[i as usize].end = self.last_tsc;
            t.spans[i as usize].closed_by_parser = true;
        }
        self.open.clear();
    }
}

fn key_of(e: &Event) -> ZoneKey {
    match e.kind {
        kind::BEGIN | kind::END => ZoneKey::Label(e.payload as u32),
        _ => ZoneKey::Function(e.payload),
    }
}
