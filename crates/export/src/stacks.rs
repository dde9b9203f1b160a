//! Stack-shaped exports: folded stacks, the flame graph, speedscope, and the
//! JSON of the whole profile.
//!
//! Records are grouped by (thread, stack, own frames); each group's path of
//! function names (outermost first, from the captured function when the
//! profile is rooted; inlined functions included unless the profile was
//! built without them, named `NAME [inlined]`) carries the group's weight.

use crate::{weight_column, ExportError};
use coldcache_analysis::views::{values, Num};
use coldcache_analysis::{Column, Profile};
use rustc_hash::FxHashMap as HashMap;
use serde_json::{json, Value};
use std::fmt::Write;

/// One group: a thread index, a representative record, summed counters.
struct Group {
    thread: u32,
    rep: usize,
    costs: Vec<u64>,
}

fn groups(p: &Profile) -> Vec<Group> {
    let nc = p.counters();
    let d = p.dump();
    let mut index: HashMap<(u32, u32, u32), usize> = HashMap::default();
    let mut out: Vec<Group> = Vec::new();
    for i in 0..p.record_count() {
        if !p.record_kept(i) {
            continue;
        }
        let r = &d.records[i];
        let g = *index
            .entry((r.thread, r.stack, p.record_chain(i)))
            .or_insert_with(|| {
                out.push(Group {
                    thread: r.thread,
                    rep: i,
                    costs: vec![0; nc],
                });
                out.len() - 1
            });
        for (a, b) in out[g].costs.iter_mut().zip(&r.counters) {
            *a = a.saturating_add(*b);
        }
    }
    out
}

/// A frame name safe for the folded format (no `;`, no newline).
fn frame_name(p: &Profile, f: u32) -> String {
    coldcache_analysis::views::fn_label(p, f)
        .replace(';', ":")
        .replace(['\n', '\r'], " ")
}

/// Collapsed stacks, one line per distinct path: `a;b;c WEIGHT`, weighted
/// by the column `weight` (see [`weight_column`]); paths of zero weight are
/// left out, lines sorted.
pub fn folded(p: &Profile, weight: Option<&str>) -> Result<String, ExportError> {
    let col = weight_column(p, weight)?;
    let mut acc: HashMap<String, u64> = HashMap::default();
    for g in groups(p) {
        let w = col.int_value(&g.costs);
        if w == 0 {
            continue;
        }
        let names: Vec<String> = p
            .record_path(g.rep)
            .iter()
            .map(|f| {
                let mut name = frame_name(p, f.function);
                if f.inlined {
                    name.push_str(coldcache_analysis::views::INLINED_MARK);
                }
                name
            })
            .collect();
        let e = acc.entry(names.join(";")).or_insert(0);
        *e = e.saturating_add(w);
    }
    if acc.is_empty() {
        return Err(ExportError::Empty(col.name.clone()));
    }
    let mut lines: Vec<(String, u64)> = acc.into_iter().collect();
    lines.sort();
    let mut s = String::new();
    for (k, v) in lines {
        let _ = writeln!(s, "{k} {v}");
    }
    Ok(s)
}

/// A flame graph SVG (inferno) of [`folded`].
pub fn flamegraph(p: &Profile, weight: Option<&str>) -> Result<Vec<u8>, ExportError> {
    let col = weight_column(p, weight)?;
    let text = folded(p, Some(&col.name))?;
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = format!(
        "coldcache: {} — {}",
        p.dump()
            .meta
            .program
            .first()
            .map(String::as_str)
            .unwrap_or("capture"),
        col.name
    );
    opts.count_name = col.name.clone();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, text.lines(), &mut svg)
        .map_err(|e| ExportError::Flamegraph(e.to_string()))?;
    Ok(svg)
}

/// speedscope's file format: shared frames (name, file, line) and one
/// `sampled` profile per thread whose samples are the paths and weights the
/// chosen column.
pub fn speedscope(p: &Profile, weight: Option<&str>) -> Result<Value, ExportError> {
    let col: &Column = weight_column(p, weight)?;
    let d = p.dump();
    let mut frame_index: HashMap<(u32, bool), usize> = HashMap::default();
    let mut frames: Vec<Value> = Vec::new();
    let mut per_thread: Vec<(Vec<Vec<usize>>, Vec<u64>)> =
        vec![(Vec::new(), Vec::new()); d.threads.len().max(1)];
    for g in groups(p) {
        let w = col.int_value(&g.costs);
        if w == 0 {
            continue;
        }
        let stack: Vec<usize> = p
            .record_path(g.rep)
            .iter()
            .map(|f| {
                *frame_index
                    .entry((f.function, f.inlined))
                    .or_insert_with(|| {
                        let info = p.function(f.function);
                        let mut name = coldcache_analysis::views::fn_label(p, f.function);
                        if f.inlined {
                            name.push_str(coldcache_analysis::views::INLINED_MARK);
                        }
                        let mut fr = json!({ "name": name });
                        if let Some(file) = &info.file {
                            fr["file"] = json!(file);
                            if info.line > 0 {
                                fr["line"] = json!(info.line);
                            }
                        }
                        frames.push(fr);
                        frames.len() - 1
                    })
            })
            .collect();
        let t = (g.thread as usize).min(per_thread.len() - 1);
        per_thread[t].0.push(stack);
        per_thread[t].1.push(w);
    }
    if frames.is_empty() {
        return Err(ExportError::Empty(col.name.clone()));
    }
    let profiles: Vec<Value> = per_thread
        .into_iter()
        .enumerate()
        .filter(|(_, (s, _))| !s.is_empty())
        .map(|(t, (samples, weights))| {
            let total: u64 = weights.iter().sum();
            let name = d
                .threads
                .get(t)
                .map(|th| format!("thread {} {} ({})", th.tid, th.name, col.name))
                .unwrap_or_else(|| col.name.clone());
            json!({
                "type": "sampled",
                "name": name,
                "unit": "none",
                "startValue": 0,
                "endValue": total,
                "samples": samples,
                "weights": weights,
            })
        })
        .collect();
    Ok(json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": { "frames": frames },
        "profiles": profiles,
        "name": format!("coldcache: {}", d.meta.program.join(" ")),
        "activeProfileIndex": 0,
        "exporter": format!("coldcache {}", env!("CARGO_PKG_VERSION")),
    }))
}

/// The whole profile as JSON (schema in docs/export.md): capture settings,
/// columns, functions, files, totals, and the call tree with self and
/// inclusive values of every column per node.
pub fn json(p: &Profile) -> Value {
    let d = p.dump();
    let cols = p.columns();
    let nodes: Vec<Value> = (1..p.node_count() as u32)
        .filter(|&n| p.node_incl(n).iter().any(|&v| v != 0))
        .map(|n| {
            let node = p.node(n);
            json!({
                "id": n,
                "parent": node.parent,
                "function": node.function,
                "inlined": node.inlined,
                "calls": p.node_calls(n),
                "self": values(cols, p.node_self(n)),
                "incl": values(cols, p.node_incl(n)),
            })
        })
        .collect();
    let fns: Vec<Value> = p
        .functions()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut v = serde_json::to_value(f).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut v {
                let id = i as u32;
                m.insert("self".into(), json!(values(cols, p.fn_self(id))));
                m.insert("incl".into(), json!(values(cols, p.fn_incl(id))));
            }
            v
        })
        .collect();
    let totals: Vec<Num> = values(cols, p.totals());
    json!({
        "format": "coldcache-profile",
        "version": 1,
        "meta": {
            "program": d.meta.program,
            "pid": d.meta.pid,
            "cache": d.meta.cache_name,
            "levels": d.meta.levels,
            "cores": d.meta.cores,
            "trigger": d.meta.trigger,
            "threads": d.meta.threads,
            "instructions": d.meta.instructions,
            "cut_short": d.meta.cut_short,
            "notes": d.meta.notes,
        },
        "columns": cols.iter().map(|c| json!({"name": c.name, "description": c.description})).collect::<Vec<_>>(),
        "threads": d.threads.iter().map(|t| json!({"tid": t.tid, "name": t.name, "core": t.core})).collect::<Vec<_>>(),
        "files": p.files(),
        "functions": fns,
        "totals": totals,
        "call_tree": nodes,
    })
}
