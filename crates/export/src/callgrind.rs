//! The Callgrind profile format (Valgrind's "Callgrind Format
//! Specification"), as `callgrind_annotate` and KCachegrind read it.
//!
//! - Header: `version`, `creator`, `pid`, `cmd`, `part`, `desc` lines (the
//!   capture and cache settings), `positions: instr line`, one `event:` line
//!   per event with its description, and `events:` last (callgrind_annotate
//!   stops reading the header there).
//! - Events: Valgrind's nine cache events under Valgrind's names (`Ir Dr Dw
//!   I1mr D1mr D1mw ILmr DLmr DLmw`, mapped exactly from the counter layout,
//!   so `callgrind_annotate --show=D1mr` and KCachegrind's derived events
//!   `L1m`, `LLm` and `CEst` work), then coldcache's own events (see
//!   [`VALGRIND_EVENTS`] and `events`); a dump of another counter layout
//!   exports its raw counters. Only coldcache's events get an `event:` line
//!   (Valgrind writes none for its own, KCachegrind knows their long names).
//! - Per function (`ob=`, `fl=`, `fn=`): one cost line per executed
//!   instruction, `0xADDR LINE costs`, its self costs summed over stacks
//!   and threads; lines of other files (code inlined from a header) are
//!   switched to with `fi=` and back with `fe=`.
//! - Per call arc: `cfi=`/`cfn=`, `calls=N 0xTARGET LINE`, then the call
//!   site `0xADDR LINE` with the arc's inclusive costs. N is how often the
//!   call ran in the window ([`Profile::stack_calls`]: the call
//!   instruction's executions, summed over stacks and threads), as
//!   Callgrind's `calls=`. An arc into an inlined copy (the inlined function
//!   is a callee of the function it was inlined into, as in the views) has
//!   no call to count: its N is the number of its calling contexts.
//!   Recursion counts an arc's costs once per stack, so inclusive costs
//!   never exceed the totals.
//! - `totals:` at the end: the profile's totals, which equal the sum of
//!   every self cost line.
//!
//! Names are compressed (`(3) name` the first time, `(3)` after).
//!
//! [`CallgrindOptions`] also makes the file Callgrind's own for harnesses
//! that parse it (`coldcache valgrind`): Valgrind's events only (`Ir`
//! alone for `--cache-sim=no`), a `summary:` line, a `thread:` line, names
//! written in full (`--compress-strings=no`).
//!
//! Addresses: Callgrind writes an instruction's address as the ELF file
//! states it (run-time address minus the module's load bias), which is
//! what `objdump` prints and what KCachegrind's Machine Code view asks
//! `objdump` for. A dump holds run-time addresses; [`callgrind_with`] takes
//! each module's load bias (the CLI reads it from the module's `PT_LOAD`
//! segments) and writes file addresses; modules without a known bias keep
//! their run-time addresses (a `desc:` line says which).

use coldcache_analysis::profile::ROOT;
use coldcache_analysis::{FnId, Formula, NodeId, PathFrame, Profile};
use coldcache_dump::symbols::NO_FILE;
use coldcache_dump::{CounterLayout, Side};
use rustc_hash::{FxHashMap as HashMap, FxHashSet};
use std::fmt::Write;

/// Name compression for one of the `fl`, `fn`, `ob` contexts.
#[derive(Default)]
struct Names {
    ids: HashMap<String, usize>,
    /// Write every name in full (Callgrind's `--compress-strings=no`).
    plain: bool,
}

impl Names {
    fn get(&mut self, name: &str) -> String {
        if self.plain {
            return name.to_string();
        }
        let n = self.ids.len() + 1;
        match self.ids.get(name) {
            Some(i) => format!("({i})"),
            None => {
                self.ids.insert(name.to_string(), n);
                format!("({n}) {name}")
            }
        }
    }
}

/// An event name callgrind accepts: letters, digits and `_`.
fn event_name(s: &str) -> String {
    let mut e: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if e.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        e.insert(0, 'e');
    }
    e
}

/// One event of the export: its name, its long name (`None` for
/// Valgrind's own events, whose long names and derived events KCachegrind
/// knows), and the raw counters it sums.
struct Event {
    name: String,
    description: Option<String>,
    terms: Vec<usize>,
}

/// Valgrind's nine cache events, as Cachegrind and `callgrind
/// --cache-sim=yes` name them, in their order.
pub const VALGRIND_EVENTS: [&str; 9] = [
    "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw",
];

/// The events of the export.
///
/// With coldcache's counter layout: Valgrind's nine events first, mapped
/// exactly (`Ir` instructions; `Dr`/`Dw` every read/write; `I1mr`, `D1mr`,
/// `D1mw` those served beyond L1; `ILmr`, `DLmr`, `DLmw` those served by
/// memory, i.e. missed the last level), then coldcache's own: the accesses
/// served by each level after L1 (`i_L2`, `r_L2`, `w_L2`, …), `unmodelled`,
/// the prefetch, invalidation and false-sharing counters, and the line-use
/// counters when the dump has them. Their names keep
/// coldcache's lower-case spelling with an `_`, which no Valgrind or
/// KCachegrind event has. A dump of another layout: its raw counters.
///
/// `only` keeps Valgrind's nine (or `Ir` alone) for readers that know no
/// other event (gungraun's parser refuses an unknown event name).
fn events(p: &Profile, only: EventSet) -> Vec<Event> {
    let mut v: Vec<Event> = Vec::new();
    let mut used: FxHashSet<String> = FxHashSet::default();
    let mut push = |name: String, description: Option<String>, terms: Vec<usize>| {
        let mut n = name.clone();
        let mut k = 2;
        while !used.insert(n.clone()) {
            n = format!("{name}_{k}");
            k += 1;
        }
        v.push(Event {
            name: n,
            description,
            terms,
        });
    };
    let columns = p.columns();
    let raw = |i: usize| (event_name(&columns[i].name), columns[i].description.clone());
    let Some(l) = p.layout() else {
        for c in columns {
            if let Formula::Sum(t) = &c.formula {
                push(event_name(&c.name), Some(c.description.clone()), t.clone());
            }
        }
        return v;
    };
    for (name, terms) in VALGRIND_EVENTS.iter().zip(valgrind_terms(&l)) {
        push(name.to_string(), None, terms);
    }
    if only != EventSet::All {
        v.truncate(if only == EventSet::Ir { 1 } else { 9 });
        return v;
    }
    for level in 1..l.levels() {
        for side in Side::ALL {
            let i = l.served(side, level);
            let (n, d) = raw(i);
            push(n, Some(d), vec![i]);
        }
    }
    for i in [
        CounterLayout::UNMODELLED,
        l.prefetch_issued(),
        l.prefetch_redundant(),
        l.invalidations(),
        l.false_sharing(),
    ]
    .into_iter()
    .chain(l.lines_fetched())
    .chain(l.bytes_used())
    {
        let (n, d) = raw(i);
        push(n, Some(d), vec![i]);
    }
    v
}

/// The raw counters each of Valgrind's nine events ([`VALGRIND_EVENTS`],
/// Callgrind's order) sums, in a coldcache counter layout.
pub(crate) fn valgrind_terms(l: &CounterLayout) -> [Vec<usize>; 9] {
    let from = |side, level| l.served_from(side, level).collect::<Vec<usize>>();
    [
        vec![CounterLayout::INSTRUCTIONS],
        from(Side::Read, 1),
        from(Side::Write, 1),
        from(Side::Instr, 2),
        from(Side::Read, 2),
        from(Side::Write, 2),
        vec![l.memory(Side::Instr)],
        vec![l.memory(Side::Read)],
        vec![l.memory(Side::Write)],
    ]
}

pub(crate) fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// A function's executed instructions (address, file, line, self costs)
/// and its outgoing arcs (call site, callee, arc).
type FnBody = (Vec<(u64, u32, u32, Vec<u64>)>, Vec<(u64, FnId, Arc)>);

struct Arc {
    file: u32,
    line: u32,
    /// Call-tree nodes of the callee reached through the arc.
    contexts: FxHashSet<NodeId>,
    /// The calls counted for a real call arc (none for an inlined one).
    calls: Option<u64>,
    costs: Vec<u64>,
}

/// Options of the Callgrind export.
#[derive(Clone, Debug, Default)]
pub struct CallgrindOptions {
    /// Per module of the dump (same index): its load bias, run-time address
    /// minus ELF virtual address, when known. Missing or `None`: addresses
    /// of that module are written as run-time addresses.
    pub load_bias: Vec<Option<u64>>,
    /// The events written: all (default), or only Valgrind's.
    pub events: EventSet,
    /// Names written in full each time (Callgrind's
    /// `--compress-strings=no`) rather than `(n) name` then `(n)`.
    pub plain_names: bool,
    /// A `summary:` line after `events:` (Callgrind writes one; its
    /// value equals `totals:`).
    pub summary: bool,
    /// A `thread: N` header line (Callgrind's `--separate-threads=yes`
    /// files), with the profile holding that thread alone.
    pub thread: Option<u32>,
}

/// Which events an export writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventSet {
    /// Valgrind's nine, then coldcache's own.
    #[default]
    All,
    /// Valgrind's nine (`callgrind --cache-sim=yes`).
    Valgrind,
    /// `Ir` alone (`callgrind --cache-sim=no`).
    Ir,
}

/// The profile in the Callgrind format, with run-time addresses.
pub fn callgrind(p: &Profile) -> String {
    callgrind_with(p, &CallgrindOptions::default())
}

/// The profile in the Callgrind format, addresses of modules with a known
/// load bias written as the ELF file's addresses.
pub fn callgrind_with(p: &Profile, opts: &CallgrindOptions) -> String {
    let d = p.dump();
    let file_addr = |a: u64| -> u64 {
        match d
            .module_of(a)
            .and_then(|m| opts.load_bias.get(m).copied().flatten())
        {
            Some(bias) => a.wrapping_sub(bias),
            None => a,
        }
    };
    let nc = p.counters();
    let events = events(p, opts.events);
    let cost_line = |row: &[u64]| -> String {
        let mut s = String::new();
        for e in &events {
            let v = e
                .terms
                .iter()
                .map(|&i| row.get(i).copied().unwrap_or(0))
                .fold(0u64, u64::saturating_add);
            let _ = write!(s, " {v}");
        }
        s
    };

    // Self costs per (function, instruction).
    let mut own: HashMap<(FnId, u64), (u32, u32, Vec<u64>)> = HashMap::default();
    // Records grouped by (stack, leaf chain) for the arcs.
    let mut groups: HashMap<(u32, u32), (usize, Vec<u64>)> = HashMap::default();
    for i in 0..p.record_count() {
        if !p.record_kept(i) {
            continue;
        }
        let r = &d.records[i];
        let frames = p.record_frames(i);
        let leaf = frames[frames.len() - 1];
        let e = own
            .entry((leaf.function, r.ip))
            .or_insert_with(|| (leaf.file, leaf.line, vec![0; nc]));
        add(&mut e.2, &r.counters);
        let g = groups
            .entry((r.stack, p.record_chain(i)))
            .or_insert_with(|| (i, vec![0; nc]));
        add(&mut g.1, &r.counters);
    }
    // Arcs. Every group of a stack shares the stack's part of the path (the
    // call sites), so those arcs are counted once per stack with the summed
    // cost of its groups; only the arcs into and inside each group's own
    // frames (the instruction's inline chain) are counted per group. An arc
    // counts once per path (recursion), as if each path were walked alone.
    let mut arcs: HashMap<(FnId, u64, FnId), Arc> = HashMap::default();
    let mut by_stack: HashMap<u32, Vec<(usize, Vec<u64>)>> = HashMap::default();
    for ((stack, _), g) in groups {
        by_stack.entry(stack).or_default().push(g);
    }
    // Exact call counts per real call arc.
    let mut arc_calls: HashMap<(FnId, u64, FnId), u64> = HashMap::default();
    for s in 1..d.stacks.len() as u32 {
        let (Some(c), callee) = (p.stack_calls(s), p.stack_callee(s)) else {
            continue;
        };
        if let Some(at) = p.stack_frames(s).last() {
            if callee != coldcache_analysis::profile::NO_FN {
                let e = arc_calls.entry((at.function, at.addr, callee)).or_insert(0);
                *e = e.saturating_add(c);
            }
        }
    }
    let mut stacks: Vec<u32> = by_stack.keys().copied().collect();
    stacks.sort_unstable();
    let mut seen_prefix: Vec<(FnId, u64, FnId)> = Vec::new();
    let mut seen: Vec<(FnId, u64, FnId)> = Vec::new();
    let mut nodes: Vec<NodeId> = Vec::new();
    let mut tail_nodes: Vec<NodeId> = Vec::new();
    let mut sum = vec![0u64; nc];
    fn arc(
        arcs: &mut HashMap<(FnId, u64, FnId), Arc>,
        key: (FnId, u64, FnId),
        at: PathFrame,
        nc: usize,
    ) -> &mut Arc {
        arcs.entry(key).or_insert_with(|| Arc {
            file: at.file,
            line: at.line,
            contexts: FxHashSet::default(),
            calls: None,
            costs: vec![0; nc],
        })
    }
    for s in stacks {
        let gs = &by_stack[&s];
        let rep = gs[0].0;
        let path = p.record_path(rep);
        let prefix_len = path.len() - p.record_frames(rep).len();
        // The call-tree node of each frame of the representative's path.
        nodes.clear();
        let mut n = p.record_node(rep);
        while n != ROOT {
            nodes.push(n);
            n = p.node(n).parent;
        }
        nodes.reverse();
        sum.iter_mut().for_each(|x| *x = 0);
        for (_, c) in gs {
            add(&mut sum, c);
        }
        seen_prefix.clear();
        for j in 0..prefix_len.saturating_sub(1) {
            let key = (path[j].function, path[j].addr, path[j + 1].function);
            let a = arc(&mut arcs, key, path[j], nc);
            if let Some(&callee) = nodes.get(j + 1) {
                a.contexts.insert(callee);
            }
            if !seen_prefix.contains(&key) {
                seen_prefix.push(key);
                add(&mut a.costs, &sum);
            }
        }
        for (g_rep, costs) in gs {
            let own = p.record_frames(*g_rep);
            // The call-tree nodes of the group's own frames.
            tail_nodes.clear();
            let mut n = p.record_node(*g_rep);
            for _ in 0..own.len() {
                tail_nodes.push(n);
                n = p.node(n).parent;
            }
            tail_nodes.reverse();
            seen.clear();
            let join = prefix_len.checked_sub(1).map(|j| path[j]);
            let frames = join.iter().chain(own.iter());
            let callees = own.iter().zip(tail_nodes.iter());
            let skip = usize::from(join.is_none());
            for (from, (to, &to_node)) in frames.zip(callees.skip(skip)) {
                let key = (from.function, from.addr, to.function);
                let a = arc(&mut arcs, key, *from, nc);
                a.contexts.insert(to_node);
                if !seen_prefix.contains(&key) && !seen.contains(&key) {
                    seen.push(key);
                    add(&mut a.costs, costs);
                }
            }
        }
    }

    // Per function: its instructions and its outgoing arcs, by address.
    let mut by_fn: HashMap<FnId, FnBody> = HashMap::default();
    for ((f, addr), (file, line, c)) in own {
        by_fn.entry(f).or_default().0.push((addr, file, line, c));
    }
    for ((f, addr, callee), mut a) in arcs {
        a.calls = arc_calls.get(&(f, addr, callee)).copied();
        by_fn.entry(f).or_default().1.push((addr, callee, a));
    }
    let mut fns: Vec<FnId> = by_fn.keys().copied().collect();
    fns.sort_by(|a, b| p.function(*a).name.cmp(&p.function(*b).name).then(a.cmp(b)));

    let mut out = String::new();
    let m = &d.meta;
    out.push_str("# callgrind format\nversion: 1\n");
    let _ = writeln!(out, "creator: coldcache {}", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(out, "pid: {}", m.pid);
    let _ = writeln!(out, "cmd: {}", one_line(&m.program.join(" ")));
    // A dump that is a part of a profile (`CALLGRIND_DUMP_STATS`) says
    // which, as Callgrind's files of each dump do.
    let _ = writeln!(out, "part: {}", m.part.as_ref().map_or(1, |p| p.number));
    if let Some(t) = opts.thread {
        let _ = writeln!(out, "thread: {t}");
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "desc: Cache: {} (levels {}, {} cores)",
        one_line(&m.cache_name),
        m.levels.join(", "),
        m.cores
    );
    let _ = writeln!(
        out,
        "desc: Trigger: {}, threads {}",
        one_line(&m.trigger),
        one_line(&m.threads)
    );
    if let Some(c) = &m.cut_short {
        let _ = writeln!(out, "desc: Cut short: {}", one_line(c));
    }
    if let Some(p) = &m.part {
        let _ = writeln!(
            out,
            "desc: Part: {} of {}, ended by {}",
            p.number,
            p.of,
            one_line(&p.trigger)
        );
    }
    for (i, md) in d.modules.iter().enumerate() {
        if md.path.starts_with('/') && opts.load_bias.get(i).copied().flatten().is_none() {
            let _ = writeln!(
                out,
                "desc: Run-time addresses: {} (load bias unknown)",
                one_line(&md.path)
            );
        }
    }
    out.push_str("\npositions: instr line\n");
    for e in &events {
        if let Some(d) = &e.description {
            let _ = writeln!(out, "event: {} : {}", e.name, one_line(d));
        }
    }
    out.push_str("events:");
    for e in &events {
        let _ = write!(out, " {}", e.name);
    }
    out.push('\n');
    if opts.summary {
        let _ = writeln!(out, "summary:{}", cost_line(p.totals()));
    }
    out.push('\n');

    let names = || Names {
        plain: opts.plain_names,
        ..Names::default()
    };
    let mut fl = names();
    let mut fnn = names();
    let mut ob = names();
    let file_name = |i: u32| -> String {
        p.file(i)
            .map(str::to_string)
            .unwrap_or_else(|| "???".into())
    };
    let module_path = |f: FnId| -> String {
        let base = &p.function(f).module;
        d.modules
            .iter()
            .find(|m| !base.is_empty() && m.path.rsplit('/').next() == Some(base.as_str()))
            .map(|m| m.path.clone())
            .unwrap_or_else(|| {
                if base.is_empty() {
                    "???".into()
                } else {
                    base.clone()
                }
            })
    };
    let home_file =
        |f: FnId| -> String { p.function(f).file.clone().unwrap_or_else(|| "???".into()) };
    let fn_name = |f: FnId| -> String {
        let info = p.function(f);
        if info.resolved || info.module.is_empty() {
            one_line(&info.name)
        } else {
            format!("{} [{}]", one_line(&info.name), info.module)
        }
    };
    for f in fns {
        let (mut ins, mut calls) = by_fn.remove(&f).unwrap_or_default();
        ins.sort_by_key(|x| x.0);
        calls.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let home = home_file(f);
        let _ = writeln!(out, "ob={}", ob.get(&module_path(f)));
        let _ = writeln!(out, "fl={}", fl.get(&home));
        let _ = writeln!(out, "fn={}", fnn.get(&fn_name(f)));
        let mut current = home.clone();
        let mut switch = |out: &mut String, file: u32, fl: &mut Names| {
            let name = if file == NO_FILE {
                home.clone()
            } else {
                file_name(file)
            };
            if name != current {
                let key = if name == home { "fe" } else { "fi" };
                let _ = writeln!(out, "{key}={}", fl.get(&name));
                current = name;
            }
        };
        for (addr, file, line, c) in &ins {
            switch(&mut out, *file, &mut fl);
            let _ = writeln!(out, "{:#x} {line}{}", file_addr(*addr), cost_line(c));
        }
        for (addr, callee, a) in &calls {
            switch(&mut out, a.file, &mut fl);
            let _ = writeln!(out, "cob={}", ob.get(&module_path(*callee)));
            let _ = writeln!(out, "cfi={}", fl.get(&home_file(*callee)));
            let _ = writeln!(out, "cfn={}", fnn.get(&fn_name(*callee)));
            let info = p.function(*callee);
            let target = if info.entry != 0 { info.entry } else { *addr };
            let _ = writeln!(
                out,
                "calls={} {:#x} {}",
                a.calls.unwrap_or(a.contexts.len().max(1) as u64),
                file_addr(target),
                info.line
            );
            let _ = writeln!(
                out,
                "{:#x} {}{}",
                file_addr(*addr),
                a.line,
                cost_line(&a.costs)
            );
        }
        out.push('\n');
    }
    let _ = writeln!(out, "totals:{}", cost_line(p.totals()));
    out
}

fn add(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}
