//! Hierarchies and statistics over parsed spans, and their text tables.
//! Pure.
//!
//! * [`top_down`]: the call tree — a node per distinct path of zones, with
//!   calls, total (inclusive) and self (exclusive) time, and per-call
//!   durations for min/mean/max/percentiles.
//! * [`bottom_up`]: the inverted tree — each zone's self time at the root,
//!   split by who called it below.
//! * [`flat`]: one row per zone; its total counts a recursive instance once
//!   (only the outermost).
//!
//! A node with children shows its self time as a `[self]` row so that the
//! rows under a node add up to it; a node with only self time does not get
//! that redundant row.
//!
//! Each view is also a replay visitor ([`TopDownFeed`], [`BottomUpFeed`],
//! [`FlatFeed`], [`TimelineFeed`]) fed one zone at a time by the streaming
//! reader, keeping the tree (distinct call paths) and per-instance
//! durations for the percentiles, never the spans; they make the same
//! nodes in the same order as the functions over spans (the rendering's
//! ties keep that order).

use crate::format::ZoneKey;
use crate::parse::{Open, Recording, Span, ThreadTrace, Visitor};
use std::collections::HashMap;
use std::fmt::Write;

/// A node of a tree; node 0 is the root (no key).
#[derive(Clone, Debug, Default)]
pub struct Node {
    /// The zone (None for the root).
    pub key: Option<ZoneKey>,
    /// Parent node (0 for the root itself).
    pub parent: usize,
    /// Children in first-seen order.
    pub children: Vec<usize>,
    /// Instances.
    pub calls: u64,
    /// Inclusive ticks (bottom-up: the attributed self ticks).
    pub total: u64,
    /// Exclusive ticks.
    pub self_ticks: u64,
    /// Per-instance inclusive ticks.
    pub durations: Vec<u64>,
    /// Bytes declared.
    pub bytes: u64,
}

/// A tree of nodes.
#[derive(Clone, Debug)]
pub struct Tree {
    /// Node 0 is the root.
    pub nodes: Vec<Node>,
    index: HashMap<(usize, ZoneKey), usize>,
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::new()
    }
}

impl Tree {
    /// A tree with only its root.
    pub fn new() -> Tree {
        Tree {
            nodes: vec![Node::default()],
            index: HashMap::new(),
        }
    }

    /// The child of `parent` for `key`, made if new.
    pub fn child(&mut self, parent: usize, key: ZoneKey) -> usize {
        if let Some(&n) = self.index.get(&(parent, key)) {
            return n;
        }
        let n = self.nodes.len();
        self.nodes.push(Node {
            key: Some(key),
            parent,
            ..Default::default()
        });
        self.nodes[parent].children.push(n);
        self.index.insert((parent, key), n);
        n
    }

    /// The child of `parent` for `key`, if any.
    pub fn find(&self, parent: usize, key: ZoneKey) -> Option<usize> {
        self.index.get(&(parent, key)).copied()
    }
}

/// Self ticks of every span of a thread (its duration less its children's).
pub fn self_ticks(t: &ThreadTrace) -> Vec<u64> {
    let mut child = vec![0u64; t.spans.len()];
    for s in &t.spans {
        if let Some(p) = s.parent {
            child[p as usize] += s.ticks();
        }
    }
    t.spans
        .iter()
        .zip(child)
        .map(|(s, c)| s.ticks().saturating_sub(c))
        .collect()
}

/// The top-down tree of some threads merged.
pub fn top_down(threads: &[&ThreadTrace]) -> Tree {
    let mut tree = Tree::new();
    for t in threads {
        let selfs = self_ticks(t);
        let mut node_of = vec![0usize; t.spans.len()];
        for (i, s) in t.spans.iter().enumerate() {
            let parent = s.parent.map_or(0, |p| node_of[p as usize]);
            let n = tree.child(parent, s.key);
            node_of[i] = n;
            let node = &mut tree.nodes[n];
            node.calls += 1;
            node.total += s.ticks();
            node.self_ticks += selfs[i];
            node.durations.push(s.ticks());
            node.bytes += s.bytes;
        }
    }
    finish_tree(&mut tree);
    tree
}

/// Sets the root's total: the sum of its children's (call once fed).
pub fn finish_tree(tree: &mut Tree) {
    let root_total: u64 = tree.nodes[0]
        .children
        .iter()
        .map(|&c| tree.nodes[c].total)
        .sum();
    tree.nodes[0].total = root_total;
}

/// Feeds a top-down tree from a replay, as [`top_down`] does from spans
/// (several threads' replays into one tree merge them); the tree needs
/// [`finish_tree`] after. Memory: the tree, and with `durations` one
/// `u64` per zone instance (for the percentiles).
pub struct TopDownFeed<'a> {
    tree: &'a mut Tree,
    stack: Vec<usize>,
    durations: bool,
}

impl<'a> TopDownFeed<'a> {
    /// Feeds `tree`; `durations`: keep per-instance durations.
    pub fn new(tree: &'a mut Tree, durations: bool) -> Self {
        TopDownFeed {
            tree,
            stack: Vec::new(),
            durations,
        }
    }
}

impl Visitor for TopDownFeed<'_> {
    fn begin(&mut self, _index: u64, key: ZoneKey, _start: u64, _stack: &[Open]) {
        let parent = self.stack.last().copied().unwrap_or(0);
        let n = self.tree.child(parent, key);
        self.stack.push(n);
    }
    fn end(&mut self, span: &Open, end: u64, self_ticks: u64, _closed: bool, _stack: &[Open]) {
        let n = self.stack.pop().expect("begun");
        let ticks = end - span.start;
        let node = &mut self.tree.nodes[n];
        node.calls += 1;
        node.total += ticks;
        node.self_ticks += self_ticks;
        if self.durations {
            node.durations.push(ticks);
        }
        node.bytes += span.bytes;
    }
}

/// Feeds a bottom-up tree from a replay, as [`bottom_up`] does from
/// spans; needs [`finish_tree`] after.
pub struct BottomUpFeed<'a> {
    tree: &'a mut Tree,
}

impl<'a> BottomUpFeed<'a> {
    /// Feeds `tree`.
    pub fn new(tree: &'a mut Tree) -> Self {
        BottomUpFeed { tree }
    }
}

impl Visitor for BottomUpFeed<'_> {
    fn begin(&mut self, _index: u64, key: ZoneKey, _start: u64, stack: &[Open]) {
        // Nodes made in begin order, as `bottom_up` makes them (ties in
        // the rendering keep that order).
        let mut n = self.tree.child(0, key);
        for a in stack.iter().rev() {
            n = self.tree.child(n, a.key);
        }
    }
    fn end(&mut self, span: &Open, _end: u64, self_ticks: u64, _closed: bool, stack: &[Open]) {
        let mut n = self.tree.child(0, span.key);
        let mut i = stack.len();
        loop {
            let node = &mut self.tree.nodes[n];
            node.calls += 1;
            node.total += self_ticks;
            node.self_ticks += self_ticks;
            node.durations.push(self_ticks);
            if i == 0 {
                break;
            }
            i -= 1;
            n = self.tree.child(n, stack[i].key);
        }
    }
}

/// The bottom-up tree: roots are zones with their self time; below each,
/// the callers that time came through.
pub fn bottom_up(threads: &[&ThreadTrace]) -> Tree {
    let mut tree = Tree::new();
    for t in threads {
        let selfs = self_ticks(t);
        for (i, s) in t.spans.iter().enumerate() {
            let mut n = tree.child(0, s.key);
            let mut cur = Some(i as u32);
            let mut first = true;
            while let Some(c) = cur {
                let span = &t.spans[c as usize];
                if !first {
                    n = tree.child(n, span.key);
                }
                first = false;
                let node = &mut tree.nodes[n];
                node.calls += 1;
                node.total += selfs[i];
                node.self_ticks += selfs[i];
                node.durations.push(selfs[i]);
                cur = span.parent;
            }
        }
    }
    finish_tree(&mut tree);
    tree
}

/// Per-zone statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Instances.
    pub calls: u64,
    /// Smallest instance.
    pub min: u64,
    /// Largest instance.
    pub max: u64,
    /// Mean instance.
    pub mean: f64,
    /// Median (nearest rank).
    pub p50: u64,
    /// 90th percentile (nearest rank).
    pub p90: u64,
    /// 99th percentile (nearest rank).
    pub p99: u64,
}

/// Nearest-rank percentile of sorted values (`p` in 0..=100).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Statistics of a list of durations.
pub fn stats(durations: &[u64]) -> Stats {
    let mut s = durations.to_vec();
    s.sort_unstable();
    let n = s.len();
    Stats {
        calls: n as u64,
        min: s.first().copied().unwrap_or(0),
        max: s.last().copied().unwrap_or(0),
        mean: if n == 0 {
            0.0
        } else {
            s.iter().map(|&x| x as f64).sum::<f64>() / n as f64
        },
        p50: percentile(&s, 50.0),
        p90: percentile(&s, 90.0),
        p99: percentile(&s, 99.0),
    }
}

/// One row of the flat view.
#[derive(Clone, Debug)]
pub struct FlatRow {
    /// The zone.
    pub key: ZoneKey,
    /// Inclusive ticks, each recursive instance counted once.
    pub total: u64,
    /// Exclusive ticks.
    pub self_ticks: u64,
    /// Bytes declared.
    pub bytes: u64,
    /// Per-instance statistics of inclusive ticks.
    pub stats: Stats,
}

/// Per-zone sums of the flat view.
#[derive(Default)]
pub struct FlatFeed {
    acc: HashMap<ZoneKey, FlatAcc>,
}

#[derive(Default)]
struct FlatAcc {
    total: u64,
    self_ticks: u64,
    bytes: u64,
    durations: Vec<u64>,
}

impl FlatFeed {
    fn add(&mut self, key: ZoneKey, ticks: u64, self_ticks: u64, bytes: u64, recursive: bool) {
        let a = self.acc.entry(key).or_default();
        if !recursive {
            a.total += ticks;
        }
        a.self_ticks += self_ticks;
        a.bytes += bytes;
        a.durations.push(ticks);
    }

    /// The rows, by total descending.
    pub fn rows(self) -> Vec<FlatRow> {
        let mut rows: Vec<FlatRow> = self
            .acc
            .into_iter()
            .map(|(key, a)| FlatRow {
                key,
                total: a.total,
                self_ticks: a.self_ticks,
                bytes: a.bytes,
                stats: stats(&a.durations),
            })
            .collect();
        rows.sort_by(|a, b| b.total.cmp(&a.total).then(a.key.cmp(&b.key)));
        rows
    }
}

impl Visitor for FlatFeed {
    fn begin(&mut self, _index: u64, _key: ZoneKey, _start: u64, _stack: &[Open]) {}
    fn end(&mut self, span: &Open, end: u64, self_ticks: u64, _closed: bool, stack: &[Open]) {
        let recursive = stack.iter().any(|o| o.key == span.key);
        self.add(
            span.key,
            end - span.start,
            self_ticks,
            span.bytes,
            recursive,
        );
    }
}

/// One row per zone, by total descending.
pub fn flat(threads: &[&ThreadTrace]) -> Vec<FlatRow> {
    let mut feed = FlatFeed::default();
    for t in threads {
        let selfs = self_ticks(t);
        for (i, s) in t.spans.iter().enumerate() {
            let mut recursive = false;
            let mut p = s.parent;
            while let Some(q) = p {
                if t.spans[q as usize].key == s.key {
                    recursive = true;
                    break;
                }
                p = t.spans[q as usize].parent;
            }
            feed.add(s.key, s.ticks(), selfs[i], s.bytes, recursive);
        }
    }
    feed.rows()
}

/// The first zones of a thread in begin order, for the timeline, and how
/// many there are.
pub struct TimelineFeed {
    /// The first `limit` zones.
    pub spans: Vec<Span>,
    /// Zones in all.
    pub count: u64,
    limit: usize,
}

impl TimelineFeed {
    /// Keeps the first `limit` zones.
    pub fn new(limit: usize) -> Self {
        TimelineFeed {
            spans: Vec::new(),
            count: 0,
            limit,
        }
    }
}

impl Visitor for TimelineFeed {
    fn begin(&mut self, index: u64, key: ZoneKey, start: u64, stack: &[Open]) {
        self.count += 1;
        if (index as usize) < self.limit {
            self.spans.push(Span {
                key,
                start,
                end: start,
                depth: stack.len() as u32,
                parent: stack.last().map(|p| p.index as u32),
                bytes: 0,
                closed_by_parser: false,
            });
        }
    }
    fn end(&mut self, span: &Open, end: u64, _self_ticks: u64, closed: bool, _stack: &[Open]) {
        if let Some(s) = self.spans.get_mut(span.index as usize) {
            s.end = end;
            s.bytes = span.bytes;
            s.closed_by_parser = closed;
        }
    }
}

/// Units for times in text views and exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Time stamp counter ticks.
    Clocks,
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl std::str::FromStr for Unit {
    type Err = String;
    fn from_str(s: &str) -> Result<Unit, String> {
        Ok(match s {
            "clocks" | "ticks" | "cycles" => Unit::Clocks,
            "ns" => Unit::Ns,
            "us" => Unit::Us,
            "ms" => Unit::Ms,
            "s" | "seconds" => Unit::S,
            _ => {
                return Err(format!(
                    "unknown unit {s:?} (expected clocks, ns, us, ms or s)"
                ))
            }
        })
    }
}

impl Unit {
    /// Suffix shown in headers.
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Clocks => "clk",
            Unit::Ns => "ns",
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }

    /// Converts ticks to this unit.
    pub fn of(self, ticks: f64, tsc_hz: f64) -> f64 {
        match self {
            Unit::Clocks => ticks,
            Unit::Ns => ticks * 1e9 / tsc_hz,
            Unit::Us => ticks * 1e6 / tsc_hz,
            Unit::Ms => ticks * 1e3 / tsc_hz,
            Unit::S => ticks / tsc_hz,
        }
    }
}

fn fmt_val(v: f64) -> String {
    if v >= 1e6 {
        format!("{v:.0}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Clocks (or nanoseconds) per byte of a node that declares bytes.
fn per_byte(ticks: u64, bytes: u64, unit: Unit, hz: f64) -> String {
    if bytes == 0 {
        return String::new();
    }
    match unit {
        Unit::Clocks => format!("{:.3} clk/B", ticks as f64 / bytes as f64),
        _ => format!("{:.3} ns/B", Unit::Ns.of(ticks as f64, hz) / bytes as f64),
    }
}

fn header(out: &mut String, unit: Unit, first: &str) {
    let u = unit.suffix();
    let _ = writeln!(
        out,
        "{:>12} {:>12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}  {:<14} {first}",
        format!("total {u}"),
        format!("self {u}"),
        "calls",
        "min",
        "mean",
        "max",
        "p50",
        "p99",
        "per byte"
    );
}

/// Renders a tree (top-down or bottom-up) as an indented table.
pub fn render_tree(tree: &Tree, rec: &Recording, unit: Unit, out: &mut String) {
    let hz = rec.tsc_hz;
    header(out, unit, "zone");
    fn walk(tree: &Tree, rec: &Recording, unit: Unit, n: usize, depth: usize, out: &mut String) {
        let hz = rec.tsc_hz;
        let node = &tree.nodes[n];
        let st = stats(&node.durations);
        let name = node.key.map(|k| rec.name(k)).unwrap_or_default();
        let _ = writeln!(
            out,
            "{:>12} {:>12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}  {:<14} {}{}",
            fmt_val(unit.of(node.total as f64, hz)),
            fmt_val(unit.of(node.self_ticks as f64, hz)),
            node.calls,
            fmt_val(unit.of(st.min as f64, hz)),
            fmt_val(unit.of(st.mean, hz)),
            fmt_val(unit.of(st.max as f64, hz)),
            fmt_val(unit.of(st.p50 as f64, hz)),
            fmt_val(unit.of(st.p99 as f64, hz)),
            per_byte(node.total, node.bytes, unit, hz),
            "  ".repeat(depth),
            name
        );
        let mut kids = node.children.clone();
        kids.sort_by(|&a, &b| tree.nodes[b].total.cmp(&tree.nodes[a].total));
        if !kids.is_empty() && node.self_ticks > 0 && node.total != node.self_ticks {
            let _ = writeln!(
                out,
                "{:>12} {:>12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}  {:<14} {}[self]",
                fmt_val(unit.of(node.self_ticks as f64, hz)),
                fmt_val(unit.of(node.self_ticks as f64, hz)),
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "  ".repeat(depth + 1),
            );
        }
        for k in kids {
            walk(tree, rec, unit, k, depth + 1, out);
        }
    }
    let mut roots = tree.nodes[0].children.clone();
    roots.sort_by(|&a, &b| tree.nodes[b].total.cmp(&tree.nodes[a].total));
    for r in roots {
        walk(tree, rec, unit, r, 0, out);
    }
    let _ = hz;
}

/// Renders the flat view.
pub fn render_flat(rows: &[FlatRow], rec: &Recording, unit: Unit, out: &mut String) {
    let hz = rec.tsc_hz;
    header(out, unit, "zone");
    for r in rows {
        let st = &r.stats;
        let name = rec.names.get(&r.key);
        let place = name
            .filter(|n| !n.file.is_empty())
            .map(|n| format!("  ({}:{})", n.file, n.line))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:>12} {:>12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}  {:<14} {}{}",
            fmt_val(unit.of(r.total as f64, hz)),
            fmt_val(unit.of(r.self_ticks as f64, hz)),
            st.calls,
            fmt_val(unit.of(st.min as f64, hz)),
            fmt_val(unit.of(st.mean, hz)),
            fmt_val(unit.of(st.max as f64, hz)),
            fmt_val(unit.of(st.p50 as f64, hz)),
            fmt_val(unit.of(st.p99 as f64, hz)),
            per_byte(r.total, r.bytes, unit, hz),
            rec.name(r.key),
            place
        );
    }
}

/// Renders one thread's timeline: every span with its start (from the
/// recording's start) and duration, indented by depth.
pub fn render_timeline(
    t: &ThreadTrace,
    rec: &Recording,
    unit: Unit,
    limit: usize,
    out: &mut String,
) {
    let shown = &t.spans[..t.spans.len().min(limit)];
    render_timeline_spans(shown, t.spans.len() as u64, rec, unit, out);
}

/// [`render_timeline`] of the first zones of a thread (`spans`, in begin
/// order) out of `count`.
pub fn render_timeline_spans(
    spans: &[Span],
    count: u64,
    rec: &Recording,
    unit: Unit,
    out: &mut String,
) {
    let hz = rec.tsc_hz;
    let u = unit.suffix();
    let _ = writeln!(
        out,
        "{:>14} {:>12}  zone",
        format!("start {u}"),
        format!("dur {u}")
    );
    for s in spans {
        let _ = writeln!(
            out,
            "{:>14} {:>12}  {}{}{}",
            fmt_val(unit.of(s.start.saturating_sub(rec.start_tsc) as f64, hz)),
            fmt_val(unit.of(s.ticks() as f64, hz)),
            "  ".repeat(s.depth as usize),
            rec.name(s.key),
            if s.closed_by_parser {
                "  (end not recorded)"
            } else {
                ""
            }
        );
    }
    if count > spans.len() as u64 {
        let _ = writeln!(out, "... {} more", count - spans.len() as u64);
    }
}
