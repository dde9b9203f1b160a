//! The timeline of a capture as a Chrome trace-event JSON file (what
//! Perfetto UI and `chrome://tracing` open), from the dump's `TIME`
//! section (`record --timeline`).
//!
//! Per traced thread (pid, tid, its name from the dump): `B`/`E` events of
//! the functions entered and left in the window, named as `report` names
//! them (inlined call-site frames as `NAME [inlined]` unless the profile
//! was built without inlining; from the captured function down when the
//! profile is rooted), and two counter tracks: `accesses` (instruction
//! fetches, data reads, data writes) and `misses` (`i_miss_<L>` and
//! `d_miss_<L>` per level, accesses that missed level L), each sample
//! the count of the interval up to the thread's next event, so a track's
//! samples sum to the thread's totals.
//!
//! The time axis is instructions retired by the thread in the window
//! (1 µs on the axis = 1 instruction): a capture has no wall clock per
//! instruction. Stack changes are what the timeline records, so an
//! inlined frame shows only around the calls made from inside it, and a
//! tail call (a jump into another function) stays in its caller's frame.
//!
//! The file is streamed event by event to a writer ([`perfetto_to`]; no
//! JSON tree of the trace, no copy of the file in memory): memory is a
//! path per stack id and a name per function.

use crate::ExportError;
use coldcache_analysis::profile::NO_FN;
use coldcache_analysis::{FnId, Profile};
use coldcache_dump::{TimeKind, Timeline};
use serde_json::{json, Map, Value};
use std::io::Write;

/// One frame of a thread's path: function and whether inlined.
type Frame = (FnId, bool);

/// The function running in stack `s` (its callee; for a frame seeded
/// from the stack at the capture's start, whose callee is unknown, the
/// function of a call made from it), `NO_FN` when nothing says.
fn running(p: &Profile, s: u32, children: &[Option<u32>]) -> FnId {
    let f = p.stack_callee(s);
    if f != NO_FN {
        return f;
    }
    match children.get(s as usize).copied().flatten() {
        Some(c) => p.stack_frames(c).first().map_or(NO_FN, |f| f.function),
        None => NO_FN,
    }
}

/// The frames a thread in stack `s` is in, outermost first, from the
/// profile's root function down when it has one and the path holds it
/// (as `Profile::record_path`); whether it does.
fn path(p: &Profile, s: u32, children: &[Option<u32>]) -> (Vec<Frame>, bool) {
    if s == coldcache_dump::ROOT_STACK {
        return (Vec::new(), false);
    }
    let mut v: Vec<Frame> = p
        .stack_path(s)
        .iter()
        .map(|f| (f.function, f.inlined))
        .collect();
    v.push((running(p, s, children), false));
    let roots = p.root_functions();
    match v.iter().position(|&(f, inl)| !inl && roots.contains(&f)) {
        Some(cut) => {
            v.drain(..cut);
            (v, true)
        }
        None => (v, false),
    }
}

fn frame_name(p: &Profile, (f, inlined): Frame) -> String {
    let mut name = if f == NO_FN {
        "?".to_string()
    } else {
        coldcache_analysis::views::fn_label(p, f)
    };
    if inlined {
        name.push_str(coldcache_analysis::views::INLINED_MARK);
    }
    name
}

/// The counters of a timeline the tracks are made from.
struct Cols {
    instructions: usize,
    /// Per side (fetches, reads, writes): the served-at columns, nearest
    /// level first, memory last.
    sides: [Vec<usize>; 3],
    levels: Vec<String>,
}

impl Cols {
    fn of(t: &Timeline, levels: &[String]) -> Option<Cols> {
        let instructions = t.counter("instructions")?;
        let mut sides: [Vec<usize>; 3] = Default::default();
        for (side, prefix) in sides.iter_mut().zip(["i", "r", "w"]) {
            for l in levels.iter().map(String::as_str).chain(["mem"]) {
                side.push(t.counter(&format!("{prefix}_{l}"))?);
            }
        }
        Some(Cols {
            instructions,
            sides,
            levels: levels.to_vec(),
        })
    }

    /// (accesses args, misses args) of an interval's deltas, as JSON.
    fn args(&self, d: &[u64]) -> (Value, Value) {
        let side = |s: usize| -> u64 { self.sides[s].iter().map(|&c| d[c]).sum() };
        let accesses = json!({
            "instruction fetches": side(0),
            "data reads": side(1),
            "data writes": side(2),
        });
        let mut misses = Map::new();
        for (k, l) in self.levels.iter().enumerate() {
            let below = |s: usize| -> u64 { self.sides[s][k + 1..].iter().map(|&c| d[c]).sum() };
            misses.insert(format!("i_miss_{l}"), json!(below(0)));
            misses.insert(format!("d_miss_{l}"), json!(below(1) + below(2)));
        }
        (accesses, Value::Object(misses))
    }
}

/// A thread's events being written.
struct Track {
    pid: u32,
    tid: u32,
    ts: u64,
    open: Vec<Frame>,
    /// Deltas of the interval since the last counter sample.
    pending: Vec<u64>,
    /// Where that interval started.
    since: u64,
    /// A path holding the root function was met: paths without it are
    /// outside the window (after the captured function returned).
    rooted: bool,
}

/// The Chrome trace-event JSON of the dump's timeline, as text (see
/// [`perfetto_to`]).
pub fn perfetto(p: &Profile) -> Result<String, ExportError> {
    let mut v = Vec::new();
    perfetto_to(p, &mut v)?;
    Ok(String::from_utf8(v).expect("JSON text is UTF-8"))
}

/// Writes the Chrome trace-event JSON of the dump's timeline to `w`;
/// refused ([`ExportError::NoTimeline`]) before anything is written for a
/// dump without one.
pub fn perfetto_to(p: &Profile, w: &mut dyn Write) -> Result<(), ExportError> {
    let d = p.dump();
    let t = d.timeline.as_ref().ok_or(ExportError::NoTimeline)?;
    let cols = Cols::of(t, &d.meta.levels).ok_or(ExportError::TimelineCounters)?;
    // A call made from each stack (for a seeded frame's function).
    let mut children: Vec<Option<u32>> = vec![None; d.stacks.len()];
    for (s, n) in d.stacks.iter().enumerate().skip(1) {
        children[n.parent as usize].get_or_insert(s as u32);
    }
    let pid = d.meta.pid;
    let mut events = Events::new(w);
    let program = d.meta.program.join(" ");
    events.push(&json!({
        "name": "process_name", "ph": "M", "pid": pid,
        "args": { "name": format!("coldcache: {program} (time: instructions retired, 1 us = 1 instruction)") },
    }));
    let mut tracks: Vec<Track> = d
        .threads
        .iter()
        .map(|th| Track {
            pid,
            tid: th.tid,
            ts: 0,
            open: Vec::new(),
            pending: vec![0; t.counters.len()],
            since: 0,
            rooted: false,
        })
        .collect();
    let mut seen = vec![false; d.threads.len()];
    // Frame names as JSON strings, made once per function.
    let mut named: std::collections::HashMap<Frame, String> = Default::default();
    let mut names = |f: Frame| -> String {
        named
            .entry(f)
            .or_insert_with(|| Value::String(frame_name(p, f)).to_string())
            .clone()
    };
    let nc = t.counters.len();
    // Every thread's paths are the same function of a stack: kept per id.
    let mut paths: Vec<Option<(Vec<Frame>, bool)>> = vec![None; d.stacks.len()];
    let mut path_of = |s: u32| -> (Vec<Frame>, bool) {
        paths[s as usize]
            .get_or_insert_with(|| path(p, s, &children))
            .clone()
    };
    let counters = |tr: &mut Track, out: &mut Events, end: bool| {
        if tr.ts == tr.since && !end {
            return;
        }
        let (acc, miss) = cols.args(&tr.pending);
        for (name, args) in [("accesses", acc), ("misses", miss)] {
            out.push(&json!({
                "name": format!("{name} (tid {})", tr.tid), "ph": "C",
                "ts": tr.since, "pid": tr.pid, "tid": tr.tid, "args": args,
            }));
        }
        tr.pending.iter_mut().for_each(|v| *v = 0);
        tr.since = tr.ts;
    };
    t.for_each(|_, e, deltas| {
        let ti = e.thread as usize;
        let tr = &mut tracks[ti];
        if !seen[ti] {
            seen[ti] = true;
            let th = &d.threads[ti];
            events.push(&json!({
                "name": "thread_name", "ph": "M", "pid": pid, "tid": th.tid,
                "args": { "name": format!("{} (tid {})", th.name, th.tid) },
            }));
        }
        tr.ts += deltas[cols.instructions];
        for (a, b) in tr.pending.iter_mut().zip(deltas) {
            *a += b;
        }
        // Counters change where the stack does: a sample per interval.
        if e.kind != TimeKind::Start || tr.ts != tr.since {
            counters(tr, &mut events, false);
        }
        let new = match e.kind {
            TimeKind::Stop => Vec::new(),
            _ => match path_of(e.stack) {
                (v, true) => {
                    tr.rooted = true;
                    v
                }
                (_, false) if tr.rooted => Vec::new(),
                (v, false) => v,
            },
        };
        let keep = tr.open.iter().zip(&new).take_while(|(a, b)| a == b).count();
        let keep = if e.kind == TimeKind::Start { 0 } else { keep };
        while tr.open.len() > keep {
            let f = tr.open.pop().expect("open frame");
            events.slice(&names(f), "E", None, tr.ts, pid, tr.tid);
        }
        for &f in &new[keep..] {
            let cat = if f.1 { "inlined" } else { "function" };
            events.slice(&names(f), "B", Some(cat), tr.ts, pid, tr.tid);
            tr.open.push(f);
        }
        if e.kind == TimeKind::Stop {
            counters(tr, &mut events, true);
        }
        debug_assert_eq!(tr.pending.len(), nc);
    });
    // A thread whose stop was dropped (the timeline was cut) ends where
    // its kept events end.
    for tr in tracks.iter_mut() {
        while let Some(f) = tr.open.pop() {
            events.slice(&names(f), "E", None, tr.ts, pid, tr.tid);
        }
    }
    let mut other = json!({
        "program": program,
        "cache": d.meta.cache_name,
        "trigger": d.meta.trigger,
        "time axis": "instructions retired by the thread in the window (1 us = 1 instruction); \
                      a capture has no wall clock per instruction",
        "events kept": t.len(),
        "events dropped": t.dropped,
        "exporter": format!("coldcache {}", env!("CARGO_PKG_VERSION")),
    });
    if t.dropped > 0 {
        other["cut"] = json!(format!(
            "the timeline ends early: {} events were dropped at its limit of {} bytes",
            t.dropped, t.limit
        ));
        let end = tracks.iter().map(|tr| tr.ts).max().unwrap_or(0);
        events.push(&json!({
            "name": format!("timeline cut: {} events dropped after this point", t.dropped),
            "ph": "i", "s": "g", "ts": end, "pid": pid, "tid": 0,
        }));
    }
    let end = format!("\n],\n\"otherData\": {other}\n}}\n");
    events.raw(end.as_bytes());
    match events.err {
        Some(e) => Err(ExportError::Write(e)),
        None => Ok(()),
    }
}

/// The trace's text, one event a line, going to a writer; the first
/// write error is kept (and nothing more written).
struct Events<'w> {
    w: &'w mut dyn Write,
    any: bool,
    err: Option<std::io::Error>,
}

impl<'w> Events<'w> {
    fn new(w: &'w mut dyn Write) -> Self {
        let mut e = Events {
            w,
            any: false,
            err: None,
        };
        e.raw(b"{\"traceEvents\": [\n");
        e
    }

    fn raw(&mut self, b: &[u8]) {
        if self.err.is_none() {
            if let Err(e) = self.w.write_all(b) {
                self.err = Some(e);
            }
        }
    }

    fn sep(&mut self) {
        if self.any {
            self.raw(b",\n");
        }
        self.any = true;
    }

    fn push(&mut self, v: &Value) {
        self.sep();
        self.raw(v.to_string().as_bytes());
    }

    /// A `B` or `E` event; `name` already a JSON string.
    fn slice(&mut self, name: &str, ph: &str, cat: Option<&str>, ts: u64, pid: u32, tid: u32) {
        self.sep();
        let cat = cat.map(|c| format!("\"cat\":\"{c}\",")).unwrap_or_default();
        let s = format!(
            "{{\"name\":{name},\"ph\":\"{ph}\",{cat}\"ts\":{ts},\"pid\":{pid},\"tid\":{tid}}}"
        );
        self.raw(s.as_bytes());
    }
}
