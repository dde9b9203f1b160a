//! The flame graph's layout: the call tree as nested spans, weighted by one
//! count column, below any node (zooming), with frames too narrow to see
//! left out and accounted for.
//!
//! The web UI draws it on a canvas; the layout is computed here so that the
//! numbers are the call tree's own (the same as the top-down view) and a
//! million-record capture answers in milliseconds: the walk only visits the
//! nodes that are drawn and their direct children.
//!
//! Layout rules (those of inferno and Brendan Gregg's flamegraph.pl): a
//! frame's width is its inclusive weight; its children sit side by side
//! from its left edge in alphabetical order of their labels; what remains
//! on the right is its self weight. One difference with
//! `coldcache export --format flamegraph`: the export joins stacks by their
//! text, so two sibling functions with the same label (closures of one
//! function) become one frame there, and stay two frames here, as in the
//! call tree.

use crate::profile::{FnId, NodeId, Profile, ROOT};
use crate::views::fn_label;
use crate::AnalysisError;
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// A flame-graph query.
#[derive(Clone, Debug)]
pub struct FlameQuery {
    /// The weight column's index in [`Profile::columns`] (a count, not a
    /// ratio: the caller checks).
    pub weight: usize,
    /// The node whose subtree fills the width ([`ROOT`]: everything).
    pub root: NodeId,
    /// Frames narrower than this fraction of the root's weight are left
    /// out (with their subtrees); 0 keeps every frame of non-zero weight.
    pub min_fraction: f64,
    /// At most this many frames; whole levels are kept, deeper levels are
    /// cut (see [`FlameView::cut_depth`]).
    pub max_frames: usize,
}

impl FlameQuery {
    /// Everything, weighted by column `weight`, frames under 1/2000 of the
    /// width left out, at most 50,000 frames.
    pub fn new(weight: usize) -> FlameQuery {
        FlameQuery {
            weight,
            root: ROOT,
            min_fraction: 1.0 / 2000.0,
            max_frames: 50_000,
        }
    }
}

/// One drawn frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlameFrame {
    /// Its call-tree node (the top-down view's row id).
    pub node: NodeId,
    /// Its parent's node ([`ROOT`] for the outermost functions).
    pub parent: NodeId,
    /// Its function.
    pub function: FnId,
    /// Whether the node is an inlined copy of its function in its parent's.
    pub inlined: bool,
    /// Depth in the call tree (1 for the outermost functions; the root,
    /// "all", is depth 0).
    pub depth: u32,
    /// Left edge, in weight units from the root's left edge.
    pub start: u64,
    /// Width: the node's inclusive weight.
    pub value: u64,
    /// The node's self weight.
    #[serde(rename = "self")]
    pub self_: u64,
    /// With [`flame_compare`]: the inclusive weight of the same call path
    /// in the other profile (0 when it has no such path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other: Option<u64>,
}

/// The layout.
#[derive(Clone, Debug, Serialize)]
pub struct FlameView {
    /// The weight column's name.
    pub weight: String,
    /// The whole profile's weight.
    pub total: u64,
    /// The node filling the width.
    pub root: NodeId,
    /// Its weight (the width).
    pub root_value: u64,
    /// The nodes from the outermost function down to the root (empty when
    /// the root is [`ROOT`]), each drawn across the whole width: clicking
    /// one zooms out to it. Their `start` is 0 and `value` their own
    /// inclusive weight.
    pub path: Vec<FlameFrame>,
    /// Frames below the root, level by level, left to right.
    pub frames: Vec<FlameFrame>,
    /// Deepest depth drawn.
    pub max_depth: u32,
    /// Frames left out for being too narrow (tops of left-out subtrees).
    pub hidden_frames: usize,
    /// Their summed weight.
    pub hidden_value: u64,
    /// When `max_frames` was reached: the first depth not drawn.
    pub cut_depth: Option<u32>,
    /// Labels of the functions drawn, by id.
    pub names: BTreeMap<FnId, String>,
    /// With [`flame_compare`]: the other profile's whole weight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_total: Option<u64>,
}

/// Lays out the flame graph.
pub fn flame(p: &Profile, q: &FlameQuery) -> Result<FlameView, AnalysisError> {
    if q.root as usize >= p.node_count() {
        return Err(AnalysisError::NoSuchNode(q.root));
    }
    let col = &p.columns()[q.weight];
    let weight = |n: NodeId| col.int_value(p.node_incl(n));
    let self_weight = |n: NodeId| col.int_value(p.node_self(n));
    let root_value = weight(q.root);
    let min = ((q.min_fraction.max(0.0) * root_value as f64).ceil() as u64).max(1);
    let mut names: BTreeMap<FnId, String> = BTreeMap::new();
    let mut label =
        |f: FnId| -> String { names.entry(f).or_insert_with(|| fn_label(p, f)).clone() };

    let mut path = Vec::new();
    let mut n = q.root;
    while n != ROOT {
        let node = p.node(n);
        label(node.function);
        path.push(FlameFrame {
            node: n,
            parent: node.parent,
            function: node.function,
            inlined: node.inlined,
            depth: node.depth,
            start: 0,
            value: weight(n),
            self_: self_weight(n),
            other: None,
        });
        n = node.parent;
    }
    path.reverse();

    let mut frames: Vec<FlameFrame> = Vec::new();
    let mut hidden_frames = 0;
    let mut hidden_value = 0u64;
    let mut cut_depth = None;
    let mut max_depth = p.node(q.root).depth;
    // Level by level: (node, left edge) of the frames of the current level.
    let mut level: Vec<(NodeId, u64)> = vec![(q.root, 0)];
    while !level.is_empty() {
        let mut next: Vec<FlameFrame> = Vec::new();
        // Counted only if this level is drawn.
        let (mut level_hidden, mut level_hidden_value) = (0, 0u64);
        for &(parent, start) in &level {
            let mut kids: Vec<(String, NodeId, u64)> = Vec::new();
            for &c in p.children(parent) {
                let v = weight(c);
                if v == 0 {
                    continue;
                }
                if v < min {
                    level_hidden += 1;
                    level_hidden_value = level_hidden_value.saturating_add(v);
                    continue;
                }
                kids.push((label(p.node(c).function), c, v));
            }
            kids.sort();
            let mut x = start;
            for (_, c, v) in kids {
                let node = p.node(c);
                next.push(FlameFrame {
                    node: c,
                    parent,
                    function: node.function,
                    inlined: node.inlined,
                    depth: node.depth,
                    start: x,
                    value: v,
                    self_: self_weight(c),
                    other: None,
                });
                x = x.saturating_add(v);
            }
        }
        if next.is_empty() {
            hidden_frames += level_hidden;
            hidden_value = hidden_value.saturating_add(level_hidden_value);
            break;
        }
        if frames.len() + next.len() > q.max_frames {
            cut_depth = Some(next[0].depth);
            break;
        }
        hidden_frames += level_hidden;
        hidden_value = hidden_value.saturating_add(level_hidden_value);
        max_depth = next[0].depth;
        level = next.iter().map(|f| (f.node, f.start)).collect();
        frames.extend(next);
    }
    Ok(FlameView {
        weight: col.name.clone(),
        total: weight(ROOT),
        root: q.root,
        root_value,
        path,
        frames,
        max_depth,
        hidden_frames,
        hidden_value,
        cut_depth,
        names,
        other_total: None,
    })
}

/// [`flame`] of `layout` with, on every frame, the weight of the same call
/// path in `other` (another capture of the same program: a differential
/// flame graph). Call paths are matched function by function from the root
/// by [`crate::diff::function_identity`] (name, module, source file), so
/// two builds of the program match. Functions of one identity (closures of
/// one function, a static helper defined in a header) are told apart by
/// their entry line when the other profile has that line, and summed
/// otherwise, as the comparison by function sums them. The layout is
/// `layout`'s: paths only `other` has are not drawn (lay out the other
/// profile to see them).
pub fn flame_compare(
    layout: &Profile,
    other: &Profile,
    q: &FlameQuery,
) -> Result<FlameView, AnalysisError> {
    let mut v = flame(layout, q)?;
    let name = &layout.columns()[q.weight].name;
    let oc = &other.columns()[crate::views::column_index(other, name)?];
    let ow = |n: NodeId| oc.int_value(other.node_incl(n));
    // Children of an `other` node by function identity, with their entry
    // lines, built on demand.
    type Kids = HashMap<String, Vec<(u32, NodeId)>>;
    let mut kids: HashMap<NodeId, Kids> = HashMap::default();
    // Layout node -> the `other` nodes of its call path; parents come
    // before their children (the path from the root, then the frames level
    // by level).
    let mut matched: HashMap<NodeId, Vec<NodeId>> = HashMap::default();
    matched.insert(ROOT, vec![ROOT]);
    let mut found: Vec<(u32, NodeId)> = Vec::new();
    for f in v.path.iter_mut().chain(v.frames.iter_mut()) {
        let id = crate::diff::function_identity(layout, f.function);
        let line = layout.function(f.function).line;
        found.clear();
        for &op in matched.get(&f.parent).map_or(&[][..], Vec::as_slice) {
            let by_id = kids.entry(op).or_insert_with(|| {
                let mut m = Kids::default();
                for &c in other.children(op) {
                    let g = other.node(c).function;
                    m.entry(crate::diff::function_identity(other, g))
                        .or_default()
                        .push((other.function(g).line, c));
                }
                m
            });
            if let Some(cs) = by_id.get(&id) {
                found.extend_from_slice(cs);
            }
        }
        let same_line = found.iter().any(|&(l, _)| l == line);
        let m: Vec<NodeId> = found
            .iter()
            .filter(|&&(l, _)| !same_line || l == line)
            .map(|&(_, c)| c)
            .collect();
        f.other = Some(m.iter().fold(0u64, |s, &c| s.saturating_add(ow(c))));
        matched.insert(f.node, m);
    }
    v.other_total = Some(ow(ROOT));
    Ok(v)
}
