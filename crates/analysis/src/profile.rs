//! [`Profile`]: a dump indexed for analysis.
//!
//! Building a profile maps every record to a *path* of functions from the
//! root of its call stack to the instruction, inlined frames included, and
//! interns those paths in one call tree (all threads together). Self and
//! inclusive costs are then summed per call-tree node and per function once;
//! every view is a cheap walk over these tables.
//!
//! The flat profile by line and by instruction needs every record summed per
//! line or per instruction; that table is built the first time a view asks
//! for it ([`Profile::flat_table`], one per granularity, kept in a
//! `OnceLock` so a profile shared between threads builds it once) and every
//! later query only filters and sorts its rows.
//!
//! Addresses the dump's symbols cannot name get a synthetic function: the
//! entry address their stack frame was called at (`0x401136`, in its module),
//! or `[unknown]` when even that is not known.

use crate::columns::{columns, default_weight, Column};
use crate::views::{self, By, FlatTable};
use coldcache_dump::symbols::NO_FILE;
use coldcache_dump::CounterLayout;
use coldcache_dump::{Dump, Symbols, ROOT_STACK};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use std::sync::OnceLock;

/// Index of a function in [`Profile::functions`].
pub type FnId = u32;
/// Index of a node of the call tree ([`Profile::node`]); 0 is the root.
pub type NodeId = u32;
/// The call tree's root (no function).
pub const ROOT: NodeId = 0;
/// "No function" (the root's function).
pub const NO_FN: FnId = u32::MAX;

/// How to build a profile.
#[derive(Clone, Debug)]
pub struct ProfileOptions {
    /// Show inlined functions as functions of their own (default). Without,
    /// their code counts to the function they were inlined into.
    pub inline: bool,
    /// Keep only these threads (kernel tids); `None` keeps all.
    pub threads: Option<Vec<u32>>,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            inline: true,
            threads: None,
        }
    }
}

/// A function as the views show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionInfo {
    /// Demangled name, or the entry address for unnamed code.
    pub name: String,
    /// File name of its module (no directory), empty when unknown.
    pub module: String,
    /// Source file of its entry, when known.
    pub file: Option<String>,
    /// Line of its entry, 0 when unknown.
    pub line: u32,
    /// Run-time entry address, 0 for inlined-only or unknown functions.
    pub entry: u64,
    /// Whether the name comes from symbols (false: synthesized).
    pub resolved: bool,
}

/// One frame of a path: a function and where execution is in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathFrame {
    /// The function.
    pub function: FnId,
    /// Source file index (into [`Profile::files`]) or `NO_FILE`.
    pub file: u32,
    /// Source line, 0 when unknown.
    pub line: u32,
    /// The address: the call site for callers, the instruction for the leaf.
    pub addr: u64,
}

/// A call-tree node: its function called from its parent's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallNode {
    /// Parent node (the root is its own parent).
    pub parent: NodeId,
    /// Function of this node ([`NO_FN`] for the root).
    pub function: FnId,
    /// Depth below the root.
    pub depth: u32,
}

/// A dump with its call tree and per-function costs.
pub struct Profile {
    pub(crate) dump: Dump,
    pub(crate) columns: Vec<Column>,
    pub(crate) nc: usize,
    pub(crate) functions: Vec<FunctionInfo>,
    pub(crate) files: Vec<String>,
    pub(crate) chains: Vec<Vec<PathFrame>>,
    pub(crate) stack_chain: Vec<u32>,
    pub(crate) record_chain: Vec<u32>,
    /// Leaf node per record; `u32::MAX` for records filtered out.
    pub(crate) record_node: Vec<NodeId>,
    pub(crate) nodes: Vec<CallNode>,
    pub(crate) node_self: Vec<u64>,
    pub(crate) node_incl: Vec<u64>,
    pub(crate) child_start: Vec<u32>,
    pub(crate) child_list: Vec<NodeId>,
    pub(crate) fn_self: Vec<u64>,
    pub(crate) fn_incl: Vec<u64>,
    pub(crate) options: ProfileOptions,
    /// Kept records summed per source line, built on first use.
    flat_lines: OnceLock<FlatTable>,
    /// Kept records summed per instruction, built on first use.
    flat_instructions: OnceLock<FlatTable>,
}

// The web UI shares one profile between its worker threads.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Profile>();
};

struct Builder<'a> {
    dump: &'a Dump,
    syms: Option<&'a Symbols>,
    inline: bool,
    functions: Vec<FunctionInfo>,
    synthetic: HashMap<(usize, u64), FnId>,
    chains: Vec<Vec<PathFrame>>,
    chain_memo: HashMap<(u64, u64), u32>,
    nodes: Vec<CallNode>,
    child_memo: HashMap<(NodeId, FnId), NodeId>,
}

fn basename(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

impl Builder<'_> {
    /// The chain of `addr` (outermost first), executing in the function
    /// entered at `enclosing` (0 when unknown).
    fn chain(&mut self, addr: u64, enclosing: u64) -> u32 {
        let key = (addr, enclosing);
        if let Some(&c) = self.chain_memo.get(&key) {
            return c;
        }
        let mut frames = Vec::new();
        if let Some(loc) = self.syms.and_then(|s| s.location(addr)) {
            if !loc.frames.is_empty() {
                if self.inline {
                    frames.extend(loc.frames.iter().rev().map(|f| PathFrame {
                        function: f.function,
                        file: f.file,
                        line: f.line,
                        addr,
                    }));
                } else {
                    let inner = loc.frames[0];
                    frames.push(PathFrame {
                        function: loc.frames[loc.frames.len() - 1].function,
                        file: inner.file,
                        line: inner.line,
                        addr,
                    });
                }
            }
        }
        if frames.is_empty() {
            let module = self
                .dump
                .module_of(if enclosing != 0 { enclosing } else { addr })
                .unwrap_or(usize::MAX);
            let next = self.functions.len() as FnId;
            let f = *self.synthetic.entry((module, enclosing)).or_insert(next);
            if f == next {
                self.functions.push(FunctionInfo {
                    name: if enclosing != 0 {
                        format!("{enclosing:#x}")
                    } else {
                        "[unknown]".into()
                    },
                    module: self
                        .dump
                        .modules
                        .get(module)
                        .map(|m| basename(&m.path))
                        .unwrap_or_default(),
                    file: None,
                    line: 0,
                    entry: enclosing,
                    resolved: false,
                });
            }
            frames.push(PathFrame {
                function: f,
                file: NO_FILE,
                line: 0,
                addr,
            });
        }
        let id = self.chains.len() as u32;
        self.chains.push(frames);
        self.chain_memo.insert(key, id);
        id
    }

    fn extend(&mut self, mut node: NodeId, chain: u32) -> NodeId {
        for i in 0..self.chains[chain as usize].len() {
            let f = self.chains[chain as usize][i].function;
            let next = self.nodes.len() as NodeId;
            let depth = self.nodes[node as usize].depth + 1;
            let child = *self.child_memo.entry((node, f)).or_insert(next);
            if child == next {
                self.nodes.push(CallNode {
                    parent: node,
                    function: f,
                    depth,
                });
            }
            node = child;
        }
        node
    }
}

impl Profile {
    /// Indexes `dump`.
    pub fn new(dump: Dump, options: ProfileOptions) -> Profile {
        let nc = dump.meta.counters.len();
        let syms = dump.symbols.as_ref();
        let functions: Vec<FunctionInfo> = syms
            .map(|s| {
                s.functions
                    .iter()
                    .map(|f| FunctionInfo {
                        name: f.name.clone(),
                        module: dump
                            .modules
                            .get(f.module as usize)
                            .map(|m| basename(&m.path))
                            .unwrap_or_default(),
                        file: s.file(f.file).map(str::to_string),
                        line: f.line,
                        entry: f.entry,
                        resolved: true,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let files = syms.map(|s| s.files.clone()).unwrap_or_default();
        let mut b = Builder {
            dump: &dump,
            syms,
            inline: options.inline,
            functions,
            synthetic: HashMap::default(),
            chains: Vec::new(),
            chain_memo: HashMap::default(),
            nodes: vec![CallNode {
                parent: ROOT,
                function: NO_FN,
                depth: 0,
            }],
            child_memo: HashMap::default(),
        };

        let stacks = &dump.stacks;
        let mut stack_node = vec![ROOT; stacks.len()];
        let mut stack_chain = vec![u32::MAX; stacks.len()];
        for (s, node) in stacks.iter().enumerate().skip(1) {
            let enclosing = if node.parent == ROOT_STACK {
                0
            } else {
                stacks[node.parent as usize].callee
            };
            let c = b.chain(node.call_site, enclosing);
            stack_chain[s] = c;
            stack_node[s] = b.extend(stack_node[node.parent as usize], c);
        }

        let keep: Option<Vec<bool>> = options
            .threads
            .as_ref()
            .map(|tids| dump.threads.iter().map(|t| tids.contains(&t.tid)).collect());
        let mut record_chain = Vec::with_capacity(dump.records.len());
        let mut record_node = Vec::with_capacity(dump.records.len());
        let mut last: Option<(u64, u32, u32, NodeId)> = None;
        for r in &dump.records {
            if let Some((ip, st, c, n)) = last {
                if ip == r.ip && st == r.stack {
                    record_chain.push(c);
                    record_node.push(if keep_thread(&keep, r.thread) {
                        n
                    } else {
                        u32::MAX
                    });
                    continue;
                }
            }
            let enclosing = stacks[r.stack as usize].callee;
            let c = b.chain(r.ip, enclosing);
            let n = b.extend(stack_node[r.stack as usize], c);
            last = Some((r.ip, r.stack, c, n));
            record_chain.push(c);
            record_node.push(if keep_thread(&keep, r.thread) {
                n
            } else {
                u32::MAX
            });
        }

        let Builder {
            functions,
            chains,
            nodes,
            ..
        } = b;
        let nn = nodes.len();
        let mut node_self = vec![0u64; nn * nc];
        for (r, &n) in dump.records.iter().zip(&record_node) {
            if n == u32::MAX {
                continue;
            }
            let row = &mut node_self[n as usize * nc..(n as usize + 1) * nc];
            for (a, b) in row.iter_mut().zip(&r.counters) {
                *a = a.saturating_add(*b);
            }
        }
        let mut node_incl = node_self.clone();
        for n in (1..nn).rev() {
            let p = nodes[n].parent as usize;
            let (head, tail) = node_incl.split_at_mut(n * nc);
            for (a, b) in head[p * nc..(p + 1) * nc].iter_mut().zip(&tail[..nc]) {
                *a = a.saturating_add(*b);
            }
        }
        // Children in CSR form.
        let mut child_start = vec![0u32; nn + 1];
        for n in nodes.iter().skip(1) {
            child_start[n.parent as usize + 1] += 1;
        }
        for i in 0..nn {
            child_start[i + 1] += child_start[i];
        }
        let mut fill = child_start.clone();
        let mut child_list = vec![0u32; nn.saturating_sub(1)];
        for (i, n) in nodes.iter().enumerate().skip(1) {
            let p = n.parent as usize;
            child_list[fill[p] as usize] = i as NodeId;
            fill[p] += 1;
        }

        let nf = functions.len();
        let mut fn_self = vec![0u64; nf * nc];
        for (i, n) in nodes.iter().enumerate().skip(1) {
            let f = n.function as usize;
            add_row(
                &mut fn_self[f * nc..(f + 1) * nc],
                &node_self[i * nc..(i + 1) * nc],
            );
        }
        // Inclusive per function: each node whose function is not already on
        // the path above it (recursion counts once).
        let mut fn_incl = vec![0u64; nf * nc];
        let mut active = vec![0u32; nf];
        let mut stack: Vec<(NodeId, u32)> = vec![(ROOT, child_start[0])];
        while let Some(&mut (n, ref mut next)) = stack.last_mut() {
            if *next < child_start[n as usize + 1] {
                let c = child_list[*next as usize];
                *next += 1;
                let f = nodes[c as usize].function as usize;
                if active[f] == 0 {
                    let ci = c as usize;
                    add_row(
                        &mut fn_incl[f * nc..(f + 1) * nc],
                        &node_incl[ci * nc..(ci + 1) * nc],
                    );
                }
                active[f] += 1;
                stack.push((c, child_start[c as usize]));
            } else {
                if n != ROOT {
                    active[nodes[n as usize].function as usize] -= 1;
                }
                stack.pop();
            }
        }

        let columns = columns(&dump.meta.counters, &dump.meta.levels);
        Profile {
            columns,
            nc,
            functions,
            files,
            chains,
            stack_chain,
            record_chain,
            record_node,
            nodes,
            node_self,
            node_incl,
            child_start,
            child_list,
            fn_self,
            fn_incl,
            options,
            dump,
            flat_lines: OnceLock::new(),
            flat_instructions: OnceLock::new(),
        }
    }

    /// The kept records summed per line (`By::Line`) or per instruction
    /// (`By::Instruction`), aggregated on the first call and kept; `None`
    /// for `By::Function` (functions have their own tables).
    pub(crate) fn flat_table(&self, by: By) -> Option<&FlatTable> {
        let cell = match by {
            By::Function => return None,
            By::Line => &self.flat_lines,
            By::Instruction => &self.flat_instructions,
        };
        Some(cell.get_or_init(|| views::aggregate(self, by)))
    }

    /// Number of distinct instruction frame chains ([`Profile::record_chain`]
    /// is below it).
    pub(crate) fn chain_count(&self) -> usize {
        self.chains.len()
    }

    /// The dump this profile was built from.
    pub fn dump(&self) -> &Dump {
        &self.dump
    }

    /// The options it was built with.
    pub fn options(&self) -> &ProfileOptions {
        &self.options
    }

    /// Every column (raw counters, then derived measures).
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The dump's counter layout, when it has coldcache's (see
    /// [`Dump::layout`]); `None` for a dump of another layout, which has
    /// raw columns only.
    pub fn layout(&self) -> Option<CounterLayout> {
        self.dump.layout()
    }

    /// The default weight: the column every view sorts by, and the flame
    /// graph and the exports weigh by, when none is asked for
    /// ([`crate::columns::default_weight`]: `mem` when non-zero in total,
    /// else `instructions`).
    pub fn default_weight(&self) -> &Column {
        &self.columns[default_weight(&self.columns, self.totals())]
    }

    /// A column by name.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// Number of raw counters per row.
    pub fn counters(&self) -> usize {
        self.nc
    }

    /// Every function.
    pub fn functions(&self) -> &[FunctionInfo] {
        &self.functions
    }

    /// One function.
    pub fn function(&self, f: FnId) -> &FunctionInfo {
        &self.functions[f as usize]
    }

    /// Source file paths (indexed by [`PathFrame::file`]).
    pub fn files(&self) -> &[String] {
        &self.files
    }

    /// A file path by index, `None` for `NO_FILE`.
    pub fn file(&self, i: u32) -> Option<&str> {
        self.files.get(i as usize).map(String::as_str)
    }

    /// Totals of the kept records (the root's inclusive costs).
    pub fn totals(&self) -> &[u64] {
        &self.node_incl[..self.nc]
    }

    /// Self costs of a function (code of its own, not of its callees).
    pub fn fn_self(&self, f: FnId) -> &[u64] {
        &self.fn_self[f as usize * self.nc..(f as usize + 1) * self.nc]
    }

    /// Inclusive costs of a function (its callees included, recursion once).
    pub fn fn_incl(&self, f: FnId) -> &[u64] {
        &self.fn_incl[f as usize * self.nc..(f as usize + 1) * self.nc]
    }

    /// Number of call-tree nodes (root included).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A call-tree node.
    pub fn node(&self, n: NodeId) -> CallNode {
        self.nodes[n as usize]
    }

    /// Children of a call-tree node, in creation order.
    pub fn children(&self, n: NodeId) -> &[NodeId] {
        let s = self.child_start[n as usize] as usize;
        let e = self.child_start[n as usize + 1] as usize;
        &self.child_list[s..e]
    }

    /// Self costs of a call-tree node.
    pub fn node_self(&self, n: NodeId) -> &[u64] {
        &self.node_self[n as usize * self.nc..(n as usize + 1) * self.nc]
    }

    /// Inclusive costs of a call-tree node.
    pub fn node_incl(&self, n: NodeId) -> &[u64] {
        &self.node_incl[n as usize * self.nc..(n as usize + 1) * self.nc]
    }

    /// Functions from the root to `n` (outermost first).
    pub fn node_path(&self, mut n: NodeId) -> Vec<FnId> {
        let mut v = Vec::new();
        while n != ROOT {
            v.push(self.nodes[n as usize].function);
            n = self.nodes[n as usize].parent;
        }
        v.reverse();
        v
    }

    /// Number of records (the dump's, filtered or not).
    pub fn record_count(&self) -> usize {
        self.dump.records.len()
    }

    /// Whether record `i` is kept (its thread is selected).
    pub fn record_kept(&self, i: usize) -> bool {
        self.record_node[i] != u32::MAX
    }

    /// Leaf call-tree node of record `i` (`u32::MAX` when filtered out).
    pub fn record_node(&self, i: usize) -> NodeId {
        self.record_node[i]
    }

    /// The instruction's own frames of record `i` (outermost first; the last
    /// is the innermost, possibly inlined, function of the instruction).
    pub fn record_frames(&self, i: usize) -> &[PathFrame] {
        &self.chains[self.record_chain[i] as usize]
    }

    /// Identity of record `i`'s own frames: records with equal stacks and
    /// equal chain ids have equal paths.
    pub fn record_chain(&self, i: usize) -> u32 {
        self.record_chain[i]
    }

    /// The full path of record `i`, outermost first: for every stack frame
    /// the function and call site, then the instruction's own frames.
    pub fn record_path(&self, i: usize) -> Vec<PathFrame> {
        let mut v = Vec::new();
        let mut s = self.dump.records[i].stack;
        let mut segs = Vec::new();
        while s != ROOT_STACK {
            segs.push(self.stack_chain[s as usize]);
            s = self.dump.stacks[s as usize].parent;
        }
        for c in segs.iter().rev() {
            v.extend_from_slice(&self.chains[*c as usize]);
        }
        v.extend_from_slice(self.record_frames(i));
        v
    }

    /// The frames of call stack `stack` (a dump stack id), outermost
    /// first: for every stack frame the function and call site. Empty for
    /// an id the dump does not have.
    pub fn stack_path(&self, stack: u32) -> Vec<PathFrame> {
        let mut segs = Vec::new();
        let mut s = stack;
        while s != ROOT_STACK && (s as usize) < self.dump.stacks.len() {
            segs.push(self.stack_chain[s as usize]);
            s = self.dump.stacks[s as usize].parent;
        }
        segs.iter()
            .rev()
            .flat_map(|c| self.chains[*c as usize].iter().copied())
            .collect()
    }

    /// The functions `name` names, as `record --function` reads a name:
    /// the best tier of `coldcache_dump::names::match_name` with a match
    /// (the name, without parameters, its `::` suffix, a wildcard), or else
    /// those it matches as a regex.
    pub fn find_functions(&self, name: &str) -> Result<Vec<FnId>, crate::AnalysisError> {
        // As `record --function` reads a name (`coldcache_dump::names`):
        // the best tier with a match decides; a regex only when none does.
        let query = name.trim();
        let mut best = None;
        let mut found: Vec<FnId> = Vec::new();
        for f in 0..self.functions.len() as FnId {
            let Some(k) =
                coldcache_dump::names::match_name(&self.functions[f as usize].name, query)
            else {
                continue;
            };
            match best {
                Some(b) if k > b => continue,
                Some(b) if k == b => {}
                _ => {
                    best = Some(k);
                    found.clear();
                }
            }
            found.push(f);
        }
        if !found.is_empty() {
            return Ok(found);
        }
        let re = crate::regex(name)?;
        let found: Vec<FnId> = (0..self.functions.len() as FnId)
            .filter(|&f| re.is_match(&self.functions[f as usize].name))
            .collect();
        if found.is_empty() {
            return Err(crate::AnalysisError::NoSuchFunction(name.to_string()));
        }
        Ok(found)
    }
}

fn keep_thread(keep: &Option<Vec<bool>>, t: u32) -> bool {
    keep.as_ref()
        .is_none_or(|k| k.get(t as usize).copied().unwrap_or(false))
}

pub(crate) fn add_row(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}
