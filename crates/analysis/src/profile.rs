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
//! for it (`views::flat_table` builds it, one per granularity, kept here
//! in a `OnceLock`, [`Profile::flat_cell`], so a profile shared between
//! threads builds it once) and every later query only filters and sorts
//! its rows. The profile calls nothing of the views: they are above it.
//!
//! An inlined copy of a function is a level of its own, a call from the
//! function it was inlined into, marked `inlined` on its [`PathFrame`] and
//! [`CallNode`] (an inlined copy and a real call of one function from one
//! caller are two nodes); [`ProfileOptions::inline`] off counts inlined
//! code to the function it was inlined into.
//!
//! Rooted profiles ([`ProfileOptions::root`], what the CLI asks for a
//! `--function` capture): the path of a record starts at the outermost
//! (not inlined) frame of the captured function; the frames above it (the
//! chain up to `_start`) are dropped from the tree, the paths and the
//! exports. Records outside every frame of that function keep their whole
//! path.
//!
//! Call counts ([`Profile::node_calls`], [`Profile::stack_calls`]): how
//! often each call ran in the window, from the dump's rows: the
//! executions of the call instruction in the caller's stack, or, when that
//! instruction has no row (the call was made before the window) or calls
//! several callees from one stack (an indirect call), the executions of
//! the callee's first instruction in the callee's stack.
//!
//! One function, one id: symbols of one module at one entry (a symbol and
//! its aliases), and an inlined-only function (no entry) with the one
//! out-of-line copy of the same name in its module, are counted under one
//! id ([`canonical_functions`]); the others keep their (empty) rows.
//!
//! Addresses the dump's symbols cannot name get a synthetic function: the
//! entry address their stack frame was called at (`0x401136`, in its module),
//! or `[unknown]` when even that is not known.

use crate::columns::{columns, default_weight, Column};
use coldcache_dump::symbols::NO_FILE;
use coldcache_dump::CounterLayout;
use coldcache_dump::{Dump, Symbols, ROOT_STACK};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use std::sync::OnceLock;

/// Index of a function in [`Profile::functions`].
pub type FnId = u32;

/// A flat row before it is materialised: what it is (the views order and
/// label it).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Key {
    Function(FnId),
    /// A line: function, file, line.
    Line(FnId, u32, u32),
    /// An instruction: address, function, first record.
    Instruction(u64, FnId, usize),
}

/// The kept records summed per line or per instruction: what the flat
/// profile of that granularity sorts and filters. Built once per profile
/// by the views (`views::flat_table`), kept here ([`Profile::flat_cell`]).
pub(crate) struct FlatTable {
    /// What each row is, in order of first appearance in the records.
    pub(crate) keys: Vec<Key>,
    /// Self costs, row after row (`keys.len()` × the profile's counters).
    pub(crate) costs: Vec<u64>,
}
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
    /// Root every path at the outermost frame of the function of this name
    /// (the captured function of a `--function` capture, as its demangled
    /// name or a name `coldcache_dump::names::match_name` accepts); `None`
    /// keeps whole stacks.
    pub root: Option<String>,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            inline: true,
            threads: None,
            root: None,
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
    /// Whether this frame is an inlined copy of its function (in the
    /// function of the frame before it).
    pub inlined: bool,
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
    /// Whether the node is an inlined copy of its function in its parent's.
    pub inlined: bool,
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
    /// Functions the paths are rooted at (empty: whole stacks).
    pub(crate) root_fns: Vec<FnId>,
    /// Per symbols' function: the id it is counted under.
    pub(crate) canon: Vec<FnId>,
    /// Calls per dump stack (kept threads), `None` without an instruction
    /// counter.
    pub(crate) stack_calls: Option<Vec<u64>>,
    /// Calls per call-tree node (0 for inlined nodes and the root).
    pub(crate) node_calls: Option<Vec<u64>>,
    /// Per dump stack: its callee's function ([`NO_FN`] when unknown).
    pub(crate) stack_callee: Vec<FnId>,
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
    /// Per symbols' function: the id it is counted under.
    canon: Vec<FnId>,
    chains: Vec<Vec<PathFrame>>,
    chain_memo: HashMap<(u64, u64), u32>,
    nodes: Vec<CallNode>,
    child_memo: HashMap<(NodeId, FnId, bool), NodeId>,
    /// Per function: whether paths are rooted at it.
    root: Vec<bool>,
    /// Per node: whether a root function's frame is on its path.
    under_root: Vec<bool>,
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
                    let outer = loc.frames.len() - 1;
                    let canon = &self.canon;
                    frames.extend(loc.frames.iter().enumerate().rev().map(|(i, f)| {
                        PathFrame {
                            function: canon
                                .get(f.function as usize)
                                .copied()
                                .unwrap_or(f.function),
                            file: f.file,
                            line: f.line,
                            addr,
                            inlined: i != outer,
                        }
                    }));
                } else {
                    let inner = loc.frames[0];
                    let outer = loc.frames[loc.frames.len() - 1].function;
                    frames.push(PathFrame {
                        function: self.canon.get(outer as usize).copied().unwrap_or(outer),
                        file: inner.file,
                        line: inner.line,
                        addr,
                        inlined: false,
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
                inlined: false,
            });
        }
        let id = self.chains.len() as u32;
        self.chains.push(frames);
        self.chain_memo.insert(key, id);
        id
    }

    fn extend(&mut self, mut node: NodeId, chain: u32) -> NodeId {
        for i in 0..self.chains[chain as usize].len() {
            let PathFrame {
                function: f,
                inlined,
                ..
            } = self.chains[chain as usize][i];
            let is_root = !inlined && self.root.get(f as usize).copied().unwrap_or(false);
            if is_root && !self.under_root[node as usize] {
                // The window's function: its outermost frame starts the path.
                node = ROOT;
            }
            let next = self.nodes.len() as NodeId;
            let depth = self.nodes[node as usize].depth + 1;
            let child = *self.child_memo.entry((node, f, inlined)).or_insert(next);
            if child == next {
                self.nodes.push(CallNode {
                    parent: node,
                    function: f,
                    depth,
                    inlined,
                });
                self.under_root
                    .push(self.under_root[node as usize] || is_root);
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
        let canon = canonical_functions(&functions);
        let mut root_fns: Vec<FnId> = root_functions(&functions, options.root.as_deref())
            .into_iter()
            .map(|f| canon[f as usize])
            .collect();
        root_fns.sort_unstable();
        root_fns.dedup();
        let mut root = vec![false; functions.len()];
        for &f in &root_fns {
            root[f as usize] = true;
        }
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
                inlined: false,
            }],
            child_memo: HashMap::default(),
            root,
            under_root: vec![false],
            canon,
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

        // Calls per stack: the call instruction's executions in the
        // caller's stack, or the callee entry's in the callee's stack.
        let mut stack_calls = None;
        let mut node_calls = None;
        let mut stack_callee = vec![NO_FN; stacks.len()];
        if dump.layout().is_some() && stacks.len() > 1 {
            const I: usize = CounterLayout::INSTRUCTIONS;
            let mut count: HashMap<(u64, u32), u64> = HashMap::default();
            let mut callees: HashMap<(u64, u32), u32> = HashMap::default();
            for (s, node) in stacks.iter().enumerate().skip(1) {
                count.insert((node.call_site, node.parent), 0);
                count.insert((node.callee, s as u32), 0);
                *callees.entry((node.call_site, node.parent)).or_insert(0) += 1;
            }
            for (r, &n) in dump.records.iter().zip(&record_node) {
                if n == u32::MAX {
                    continue;
                }
                if let Some(c) = count.get_mut(&(r.ip, r.stack)) {
                    *c = c.saturating_add(r.counters.get(I).copied().unwrap_or(0));
                }
            }
            let mut per_stack = vec![0u64; stacks.len()];
            let mut per_node = vec![0u64; b.nodes.len()];
            for (s, node) in stacks.iter().enumerate().skip(1) {
                let site = (node.call_site, node.parent);
                let at_site = count.get(&site).copied().unwrap_or(0);
                let calls = if at_site > 0 && callees.get(&site) == Some(&1) {
                    at_site
                } else {
                    count.get(&(node.callee, s as u32)).copied().unwrap_or(0)
                };
                per_stack[s] = calls;
                if node.callee == 0 {
                    continue;
                }
                let c = b.chain(node.callee, node.callee);
                let f = b.chains[c as usize][0].function;
                stack_callee[s] = f;
                if calls == 0 {
                    continue;
                }
                let caller = stack_node[s];
                let parent = if b.root.get(f as usize).copied().unwrap_or(false)
                    && !b.under_root[caller as usize]
                {
                    ROOT
                } else {
                    caller
                };
                if let Some(&n) = b.child_memo.get(&(parent, f, false)) {
                    per_node[n as usize] = per_node[n as usize].saturating_add(calls);
                }
            }
            stack_calls = Some(per_stack);
            node_calls = Some(per_node);
        }

        let Builder {
            functions,
            chains,
            nodes,
            canon,
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
            root_fns,
            canon,
            stack_calls,
            node_calls,
            stack_callee,
            dump,
            flat_lines: OnceLock::new(),
            flat_instructions: OnceLock::new(),
        }
    }

    /// Where the kept records summed per source line (`lines`) or per
    /// instruction are kept once built: the views build them
    /// (`views::flat_table`), the profile only holds them, so that it
    /// calls nothing above it.
    pub(crate) fn flat_cell(&self, lines: bool) -> &OnceLock<FlatTable> {
        if lines {
            &self.flat_lines
        } else {
            &self.flat_instructions
        }
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
        let mut v = self.stack_path(self.dump.records[i].stack);
        v.extend_from_slice(self.record_frames(i));
        if let Some(cut) = v
            .iter()
            .position(|f| !f.inlined && self.root_fns.contains(&f.function))
        {
            v.drain(..cut);
        }
        v
    }

    /// The functions paths are rooted at ([`ProfileOptions::root`]); empty
    /// for whole stacks.
    pub fn root_functions(&self) -> &[FnId] {
        &self.root_fns
    }

    /// How often the call into call-tree node `n` ran in the window (kept
    /// threads); `None` for inlined nodes, the root, and dumps without an
    /// instruction counter.
    pub fn node_calls(&self, n: NodeId) -> Option<u64> {
        if n == ROOT || self.nodes[n as usize].inlined {
            return None;
        }
        self.node_calls.as_ref().map(|c| c[n as usize])
    }

    /// The frames of dump stack `s`'s call site (outermost first; the last
    /// is the innermost function at the call instruction).
    pub fn stack_frames(&self, s: u32) -> &[PathFrame] {
        match self.stack_chain.get(s as usize) {
            Some(&c) if c != u32::MAX => &self.chains[c as usize],
            _ => &[],
        }
    }

    /// The function dump stack `s` called, when it made a call in the
    /// window ([`NO_FN`] otherwise).
    pub fn stack_callee(&self, s: u32) -> FnId {
        self.stack_callee.get(s as usize).copied().unwrap_or(NO_FN)
    }

    /// How often the call of dump stack `s` (its call site, into its
    /// callee) ran in the window (kept threads); `None` without an
    /// instruction counter.
    pub fn stack_calls(&self, s: u32) -> Option<u64> {
        self.stack_calls
            .as_ref()
            .map(|c| c.get(s as usize).copied().unwrap_or(0))
    }

    /// The frames of call stack `stack` (a dump stack id), outermost
    /// first: for every stack frame the function and call site. Empty for
    /// an id the dump does not have.
    pub fn stack_path(&self, stack: u32) -> Vec<PathFrame> {
        let mut segs = Vec::new();
        let mut s = stack;
        while s != ROOT_STACK && (s as usize) < self.dump.stacks.len() {
            let c = self.stack_chain[s as usize];
            if c != u32::MAX {
                segs.push(c);
            }
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
        let found = best_tier_matches(&self.functions, name.trim());
        if !found.is_empty() {
            return Ok(self.canonical(found));
        }
        let re = crate::regex(name)?;
        let found: Vec<FnId> = (0..self.functions.len() as FnId)
            .filter(|&f| re.is_match(&self.functions[f as usize].name))
            .collect();
        if found.is_empty() {
            return Err(crate::AnalysisError::NoSuchFunction(name.to_string()));
        }
        Ok(self.canonical(found))
    }

    /// `fs` as the ids they are counted under, each once, in order.
    fn canonical(&self, fs: Vec<FnId>) -> Vec<FnId> {
        let mut out: Vec<FnId> = Vec::with_capacity(fs.len());
        for f in fs {
            let c = self.canon.get(f as usize).copied().unwrap_or(f);
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }
}

/// Per function, the id it is counted under: the first of the functions of
/// one module at one entry; an inlined-only function (entry 0) goes to the
/// one function of its name and module with an entry, when there is
/// exactly one and its source file is that one's or unknown (else it stays
/// apart: it cannot be told which it is).
fn canonical_functions(functions: &[FunctionInfo]) -> Vec<FnId> {
    let mut canon: Vec<FnId> = (0..functions.len() as FnId).collect();
    let mut at_entry: HashMap<(&str, u64), FnId> = HashMap::default();
    // Per (module, name): the canonical id of the one entry, or None when
    // several entries have that name.
    let mut by_name: HashMap<(&str, &str), Option<FnId>> = HashMap::default();
    for (i, f) in functions.iter().enumerate() {
        if f.entry == 0 {
            continue;
        }
        let c = *at_entry
            .entry((f.module.as_str(), f.entry))
            .or_insert(i as FnId);
        canon[i] = c;
        by_name
            .entry((f.module.as_str(), f.name.as_str()))
            .and_modify(|e| {
                if *e != Some(c) {
                    *e = None;
                }
            })
            .or_insert(Some(c));
    }
    for (i, f) in functions.iter().enumerate() {
        if f.entry == 0 {
            if let Some(Some(c)) = by_name.get(&(f.module.as_str(), f.name.as_str())) {
                if f.file.is_none() || f.file == functions[*c as usize].file {
                    canon[i] = *c;
                }
            }
        }
    }
    canon
}

/// The functions `root` names (none for no root or an empty one): the
/// best tier of [`coldcache_dump::names::match_name`] with a match.
fn root_functions(functions: &[FunctionInfo], root: Option<&str>) -> Vec<FnId> {
    let Some(root) = root.map(str::trim).filter(|r| !r.is_empty()) else {
        return Vec::new();
    };
    best_tier_matches(functions, root)
}

/// The functions `query` names in the best tier of
/// [`coldcache_dump::names::match_name`] that has a match (empty if none).
fn best_tier_matches(functions: &[FunctionInfo], query: &str) -> Vec<FnId> {
    let mut best = None;
    let mut found = Vec::new();
    for (f, info) in functions.iter().enumerate() {
        let Some(k) = coldcache_dump::names::match_name(&info.name, query) else {
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
        found.push(f as FnId);
    }
    found
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
