//! Exports of a parsed recording: Chrome/Perfetto trace event JSON,
//! speedscope JSON, folded stacks, flame graph SVG (via `inferno`, feature
//! `analysis`) and graphviz DOT. Pure: they return strings or bytes.

use crate::parse::Recording;
use crate::views::{self, Tree, Unit};
use serde_json::{json, Value};
use std::fmt::Write;

fn us(rec: &Recording, ticks: u64) -> f64 {
    ticks as f64 * 1e6 / rec.tsc_hz
}

/// The Trace Event Format (JSON object form) that chrome://tracing,
/// Perfetto and speedscope read: one complete (`"ph":"X"`) event per span,
/// instant events for frame marks, and thread-name metadata events.
/// Times are microseconds from the recording's start.
pub fn chrome(rec: &Recording) -> Value {
    let pid = 1;
    let mut events = Vec::new();
    for t in &rec.threads {
        let tid = if t.tid != 0 { t.tid } else { t.index };
        events.push(json!({
            "name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
            "args": { "name": t.label() }
        }));
        for s in &t.spans {
            let mut args = serde_json::Map::new();
            if let Some(n) = rec.names.get(&s.key) {
                if !n.file.is_empty() {
                    args.insert("file".into(), json!(n.file));
                    args.insert("line".into(), json!(n.line));
                }
            }
            if s.bytes > 0 {
                args.insert("bytes".into(), json!(s.bytes));
            }
            if s.closed_by_parser {
                args.insert("end_not_recorded".into(), json!(true));
            }
            events.push(json!({
                "name": rec.name(s.key),
                "cat": match s.key { crate::ZoneKey::Label(_) => "zone", crate::ZoneKey::Function(_) => "function" },
                "ph": "X",
                "ts": us(rec, s.start.saturating_sub(rec.start_tsc)),
                "dur": us(rec, s.ticks()),
                "pid": pid,
                "tid": tid,
                "args": Value::Object(args),
            }));
        }
        for &(tsc, n) in &t.frames {
            events.push(json!({
                "name": format!("frame {n}"), "ph": "i", "s": "t",
                "ts": us(rec, tsc.saturating_sub(rec.start_tsc)), "pid": pid, "tid": tid
            }));
        }
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ns", "otherData": { "exporter": "coldcache zones" } })
}

/// speedscope's file format: one evented profile per thread, in
/// nanoseconds, over shared frames.
pub fn speedscope(rec: &Recording, name: &str) -> Value {
    let mut frame_ix: std::collections::HashMap<crate::ZoneKey, usize> = Default::default();
    let mut frames = Vec::new();
    let mut profiles = Vec::new();
    let ns = |ticks: u64| ticks as f64 * 1e9 / rec.tsc_hz;
    for t in &rec.threads {
        // Open/close events in time order: replay begin order with a stack.
        let mut events = Vec::new();
        let mut stack: Vec<(usize, usize)> = Vec::new();
        // Stack of (span index, frame index).
        let close_until =
            |depth: usize, stack: &mut Vec<(usize, usize)>, events: &mut Vec<Value>| {
                while stack.len() > depth {
                    let (i, f) = stack.pop().unwrap();
                    let s = &t.spans[i];
                    events.push(
                    json!({"type": "C", "frame": f, "at": ns(s.end.saturating_sub(rec.start_tsc))}),
                );
                }
            };
        for (i, s) in t.spans.iter().enumerate() {
            close_until(s.depth as usize, &mut stack, &mut events);
            let f = *frame_ix.entry(s.key).or_insert_with(|| {
                let n = rec.names.get(&s.key);
                let mut fr = serde_json::Map::new();
                fr.insert("name".into(), json!(rec.name(s.key)));
                if let Some(n) = n.filter(|n| !n.file.is_empty()) {
                    fr.insert("file".into(), json!(n.file));
                    fr.insert("line".into(), json!(n.line));
                }
                frames.push(Value::Object(fr));
                frames.len() - 1
            });
            events.push(
                json!({"type": "O", "frame": f, "at": ns(s.start.saturating_sub(rec.start_tsc))}),
            );
            stack.push((i, f));
        }
        close_until(0, &mut stack, &mut events);
        let start = t
            .spans
            .first()
            .map_or(0.0, |s| ns(s.start.saturating_sub(rec.start_tsc)));
        let end = t
            .spans
            .iter()
            .map(|s| ns(s.end.saturating_sub(rec.start_tsc)))
            .fold(start, f64::max);
        profiles.push(json!({
            "type": "evented", "name": t.label(), "unit": "nanoseconds",
            "startValue": start, "endValue": end, "events": events
        }));
    }
    json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": { "frames": frames },
        "profiles": profiles,
        "name": name,
        "exporter": "coldcache zones",
        "activeProfileIndex": 0
    })
}

/// Folded stacks (`thread;outer;inner VALUE` per line, self time in
/// integer `unit`s, nanoseconds if `unit` is not clocks), as flame graph
/// tools read them. Frames have `;` replaced.
pub fn folded(rec: &Recording, unit: Unit) -> String {
    let mut out = String::new();
    for t in &rec.threads {
        folded_tree(&views::top_down(&[t]), rec, unit, &t.label(), &mut out);
    }
    out
}

/// The folded stacks of one thread's top-down tree (see [`folded`]).
pub fn folded_tree(tree: &Tree, rec: &Recording, unit: Unit, thread: &str, out: &mut String) {
    let unit = if unit == Unit::Clocks {
        Unit::Clocks
    } else {
        Unit::Ns
    };
    fn walk(
        tree: &Tree,
        rec: &Recording,
        unit: Unit,
        n: usize,
        path: &mut String,
        out: &mut String,
    ) {
        let len = path.len();
        if let Some(k) = tree.nodes[n].key {
            path.push(';');
            path.push_str(&rec.name(k).replace(';', ":").replace(' ', "_"));
            let v = unit.of(tree.nodes[n].self_ticks as f64, rec.tsc_hz).round() as u64;
            if v > 0 {
                let _ = writeln!(out, "{path} {v}");
            }
        }
        for &c in &tree.nodes[n].children {
            walk(tree, rec, unit, c, path, out);
        }
        path.truncate(len);
    }
    let mut path = thread.replace(';', ":");
    walk(tree, rec, unit, 0, &mut path, out);
}

/// A flame graph SVG of the folded stacks.
#[cfg(feature = "analysis")]
pub fn flamegraph(rec: &Recording, title: &str) -> std::io::Result<Vec<u8>> {
    flamegraph_of(&folded(rec, Unit::Ns), title)
}

/// A flame graph SVG of folded stacks (nanoseconds).
#[cfg(feature = "analysis")]
pub fn flamegraph_of(folded: &str, title: &str) -> std::io::Result<Vec<u8>> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "ns".to_string();
    let mut svg = Vec::new();
    if folded.is_empty() {
        return Err(std::io::Error::other("no zones to draw"));
    }
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut svg)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(svg)
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The top-down tree of all threads as a graphviz digraph: a box per node
/// with total and self time and calls; edges from caller to callee.
pub fn dot(rec: &Recording, unit: Unit) -> String {
    let threads: Vec<_> = rec.threads.iter().collect();
    dot_tree(&views::top_down(&threads), rec, unit)
}

/// [`dot`] of a top-down tree.
pub fn dot_tree(tree: &Tree, rec: &Recording, unit: Unit) -> String {
    let total = tree.nodes[0].total.max(1) as f64;
    let u = unit.suffix();
    let mut out = String::from("digraph zones {\n  node [shape=box, fontname=\"monospace\"];\n");
    for (i, n) in tree.nodes.iter().enumerate().skip(1) {
        let name = n.key.map(|k| rec.name(k)).unwrap_or_default();
        let mut label = format!(
            "{}\\ntotal {:.3} {u} ({:.1}%)",
            dot_escape(&name),
            unit.of(n.total as f64, rec.tsc_hz),
            n.total as f64 * 100.0 / total
        );
        // Only a node with children has a self time different from its
        // total worth showing.
        if !n.children.is_empty() {
            let _ = write!(
                label,
                "\\nself {:.3} {u}",
                unit.of(n.self_ticks as f64, rec.tsc_hz)
            );
        }
        let _ = write!(label, "\\n{} calls", n.calls);
        let _ = writeln!(out, "  n{i} [label=\"{label}\"];");
        if n.parent != 0 {
            let _ = writeln!(out, "  n{} -> n{i} [label=\"{}\"];", n.parent, n.calls);
        }
    }
    out.push_str("}\n");
    out
}
