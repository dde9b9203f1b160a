//! The views: flat, top-down, bottom-up, callers, annotate, disassembly,
//! threads. Each takes a query and returns a serializable result whose rows
//! carry values for every column (in [`Profile::columns`] order), so the
//! text renderer, `--json` and the web UI show the same numbers.

use crate::columns::Column;
pub(crate) use crate::profile::Key;
use crate::profile::{add_row, FlatTable, FnId, NodeId, Profile, ROOT};
use crate::AnalysisError;
use coldcache_dump::symbols::NO_FILE;
use rustc_hash::FxHashMap as HashMap;
use serde::{Serialize, Serializer};

/// The raw counter that breaks ties and weighs annotated lines: the first
/// one, `instructions` in coldcache's layout
/// ([`coldcache_dump::CounterLayout::INSTRUCTIONS`]).
const FIRST: usize = coldcache_dump::CounterLayout::INSTRUCTIONS;

/// A value of a column: an integer count or a ratio.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    /// A count.
    Int(u64),
    /// A ratio (badness).
    Float(f64),
}

impl Num {
    /// As a float.
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Num::Int(i) => s.serialize_u64(i),
            Num::Float(f) => s.serialize_f64((f * 1000.0).round() / 1000.0),
        }
    }
}

/// Column values of a raw counter row, in column order.
pub fn values(columns: &[Column], row: &[u64]) -> Vec<Num> {
    columns
        .iter()
        .map(|c| {
            if c.is_ratio() {
                Num::Float(c.value(row))
            } else {
                Num::Int(c.int_value(row))
            }
        })
        .collect()
}

/// A column's name and meaning, as the views list them.
#[derive(Clone, Debug, Serialize)]
pub struct ColumnHead {
    /// Name.
    pub name: String,
    /// Meaning.
    pub description: String,
}

pub(crate) fn heads(p: &Profile) -> Vec<ColumnHead> {
    p.columns()
        .iter()
        .map(|c| ColumnHead {
            name: c.name.clone(),
            description: c.description.clone(),
        })
        .collect()
}

/// Resolves a column name to its index.
pub fn column_index(p: &Profile, name: &str) -> Result<usize, AnalysisError> {
    p.columns()
        .iter()
        .position(|c| c.name == name)
        .ok_or_else(|| AnalysisError::NoSuchColumn {
            name: name.to_string(),
            known: p
                .columns()
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The default sort column: [`Profile::default_weight`] (`mem` when
/// non-zero in total, else instructions).
pub fn default_sort(p: &Profile) -> String {
    p.default_weight().name.clone()
}

/// What a flat row stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    /// One row per function (self and inclusive costs).
    #[default]
    Function,
    /// One row per source line (of the innermost frame).
    Line,
    /// One row per instruction address.
    Instruction,
}

/// A flat-profile query.
#[derive(Clone, Debug, Default)]
pub struct FlatQuery {
    /// Row granularity.
    pub by: By,
    /// Column to sort by, descending (default: [`default_sort`]).
    pub sort: Option<String>,
    /// Sort by inclusive instead of self costs (functions only).
    pub inclusive: bool,
    /// Keep rows whose label matches this regex.
    pub filter: Option<String>,
    /// Keep the first N rows after sorting.
    pub limit: Option<usize>,
    /// Rows by instruction: their addresses and disassembly as `report
    /// --asm` shows them (ELF file addresses where the module's load bias
    /// is given, in this syntax), in the labels the filter matches too.
    /// `None`: run-time addresses, iced's Intel defaults.
    pub asm: Option<AsmOptions>,
}

/// One row of the flat profile.
#[derive(Clone, Debug, Serialize)]
pub struct FlatRow {
    /// What the row is, as shown.
    pub label: String,
    /// The function (for lines and instructions: the innermost one).
    pub function: Option<FnId>,
    /// Its name.
    pub name: String,
    /// Its module.
    pub module: String,
    /// Source file (lines, instructions; functions: declaring file).
    pub file: Option<String>,
    /// Source line (0 when unknown).
    pub line: u32,
    /// Instruction address (instructions only), at run time.
    pub addr: Option<u64>,
    /// Its ELF file address, as `objdump -d` shows it (instructions only,
    /// with [`FlatQuery::asm`] giving its module's load bias).
    pub file_addr: Option<u64>,
    /// Disassembly (instructions only, when the dump has the bytes).
    pub asm: Option<String>,
    /// Self costs, per column.
    #[serde(rename = "self")]
    pub self_: Vec<Num>,
    /// Inclusive costs, per column (functions only).
    pub incl: Option<Vec<Num>>,
}

/// The flat profile.
#[derive(Clone, Debug, Serialize)]
pub struct FlatView {
    /// Columns, in the order of every row's values.
    pub columns: Vec<ColumnHead>,
    /// Row granularity.
    pub by: By,
    /// Sort column.
    pub sort: String,
    /// Whether sorted by inclusive costs.
    pub inclusive: bool,
    /// Totals of the profile.
    pub totals: Vec<Num>,
    /// Rows matching the filter, before the limit.
    pub matched: usize,
    /// The rows, sorted.
    pub rows: Vec<FlatRow>,
    /// The dump's layout-noise band, when it has one
    /// ([`crate::band::band`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<crate::band::BandView>,
}

/// Where a record's line is: its innermost frame's function, file and line
/// (the file may be [`NO_FILE`]: such
/// costs are kept apart per function).
fn line_key(p: &Profile, i: usize) -> (FnId, u32, u32) {
    let frames = p.record_frames(i);
    let inner = frames[frames.len() - 1];
    (inner.function, inner.file, inner.line)
}

impl Key {
    /// Order among rows of equal costs; no two rows of a view share it, so
    /// the rows' order is total.
    fn order(&self) -> (u64, u64) {
        match *self {
            Key::Function(f) => (u64::from(f), 0),
            Key::Line(f, file, line) => ((u64::from(file) << 32) | u64::from(line), u64::from(f)),
            Key::Instruction(a, _, _) => (a, 0),
        }
    }
}

impl FlatTable {
    fn row(&self, i: usize, nc: usize) -> &[u64] {
        &self.costs[i * nc..(i + 1) * nc]
    }

    /// Every row: what it is and its self costs (`nc` counters).
    pub(crate) fn rows(&self, nc: usize) -> impl Iterator<Item = (Key, &[u64])> + '_ {
        self.keys
            .iter()
            .enumerate()
            .map(move |(i, &k)| (k, self.row(i, nc)))
    }
}

/// The kept records summed per line (`By::Line`) or per instruction
/// (`By::Instruction`), aggregated ([`aggregate`]) on the first call and
/// kept in the profile ([`Profile::flat_cell`]); `None` for `By::Function`
/// (functions have their own tables).
pub(crate) fn flat_table(p: &Profile, by: By) -> Option<&FlatTable> {
    let cell = match by {
        By::Function => return None,
        By::Line => p.flat_cell(true),
        By::Instruction => p.flat_cell(false),
    };
    Some(cell.get_or_init(|| aggregate(p, by)))
}

/// Sums the kept records per line (`by` = [`By::Line`]) or per instruction.
///
/// Both keys depend only on a record's own frame chain (a chain has one
/// address and one innermost frame), so each chain is looked up in the key
/// map once. A first pass gives every chain its row (the row's key made
/// from the first record that has it, as the rows are shown), a second adds
/// each record's counters to its chain's row: the costs are allocated once,
/// at their final size.
pub(crate) fn aggregate(p: &Profile, by: By) -> FlatTable {
    let nc = p.counters();
    let records = &p.dump().records;
    let kept = || {
        records
            .iter()
            .enumerate()
            .filter(|&(i, _)| p.record_kept(i))
    };
    let mut keys = Vec::new();
    let mut chain_row = vec![usize::MAX; p.chain_count()];
    let mut row_of: HashMap<(u64, u32, u32), usize> = HashMap::default();
    for (i, r) in kept() {
        let c = p.record_chain(i) as usize;
        if chain_row[c] != usize::MAX {
            continue;
        }
        let (f, file, line) = line_key(p, i);
        let key = if by == By::Line {
            // Lines without a file are kept apart per function.
            if file == NO_FILE {
                (u64::from(f), file, 0)
            } else {
                (0, file, line)
            }
        } else {
            (r.ip, 0, 0)
        };
        chain_row[c] = *row_of.entry(key).or_insert_with(|| {
            keys.push(if by == By::Line {
                Key::Line(f, file, line)
            } else {
                Key::Instruction(r.ip, f, i)
            });
            keys.len() - 1
        });
    }
    drop(row_of);
    keys.shrink_to_fit();
    let mut costs = vec![0u64; keys.len() * nc];
    for (i, r) in kept() {
        let row = chain_row[p.record_chain(i) as usize];
        add_row(&mut costs[row * nc..(row + 1) * nc], &r.counters);
    }
    FlatTable { keys, costs }
}

fn flat_label(p: &Profile, k: &Key, asm: Option<&AsmOptions>) -> String {
    let mut out = String::new();
    write_flat_label(&mut out, p, k, asm);
    out
}

/// The ELF file address of run-time address `a`, when `o` gives the load
/// bias of the module holding it.
fn file_addr_of(p: &Profile, a: u64, o: &AsmOptions) -> Option<u64> {
    p.dump()
        .modules
        .iter()
        .position(|m| (m.start..m.end).contains(&a))
        .and_then(|m| o.load_bias.get(m).copied().flatten())
        .map(|bias| a.wrapping_sub(bias))
}

/// Appends a flat row's label to `out` (what [`flat_label`] returns).
fn write_flat_label(out: &mut String, p: &Profile, k: &Key, asm: Option<&AsmOptions>) {
    use std::fmt::Write;
    // Writing to a String cannot fail: the results are ignored.
    match *k {
        Key::Function(f) => write_fn_label(out, p, f),
        Key::Line(f, file, line) => match p.file(file) {
            Some(path) => {
                let name = &p.function(f).name;
                let _ = write!(out, "{}:{line} ({name})", short_path(path));
            }
            None => {
                write_fn_label(out, p, f);
                out.push_str(" (no line info)");
            }
        },
        Key::Instruction(a, f, first) => {
            let (_, fl, ln) = line_key(p, first);
            let a = asm.and_then(|o| file_addr_of(p, a, o)).unwrap_or(a);
            let _ = write!(out, "{a:#x} {}", p.function(f).name);
            if let Some(path) = p.file(fl) {
                let _ = write!(out, " {}:{ln}", short_path(path));
            }
        }
    }
}

/// A candidate row of the flat profile: (sort value, instructions, order
/// among equals, row index: a function id or a [`FlatTable`] row).
type Candidate = (f64, u64, (u64, u64), usize);

/// Builds the flat profile.
///
/// Rows by line or instruction come from the profile's [`FlatTable`]
/// (aggregated on the first query of that granularity); each query then
/// filters, sorts and cuts them to the limit before any label or
/// disassembly is made, so a million-record dump answers quickly even per
/// instruction.
pub fn flat(p: &Profile, q: &FlatQuery) -> Result<FlatView, AnalysisError> {
    let cols = p.columns();
    let sort = q.sort.clone().unwrap_or_else(|| default_sort(p));
    let sc = column_index(p, &sort)?;
    let re = q.filter.as_deref().map(crate::regex).transpose()?;
    let nc = p.counters();
    let table = flat_table(p, q.by);
    let key_of = |i: usize| match table {
        Some(t) => t.keys[i],
        None => Key::Function(i as FnId),
    };
    // Self costs (and inclusive costs, functions only) of a row.
    let costs_of = |i: usize| -> (&[u64], Option<&[u64]>) {
        match table {
            Some(t) => (t.row(i, nc), None),
            None => (p.fn_self(i as FnId), Some(p.fn_incl(i as FnId))),
        }
    };
    let rows_total = match table {
        Some(t) => t.keys.len(),
        None => p.functions().len(),
    };
    let mut label = String::new();
    let mut order: Vec<Candidate> = Vec::with_capacity(if re.is_some() { 0 } else { rows_total });
    for i in 0..rows_total {
        let (s, inc) = costs_of(i);
        if inc.is_some_and(|inc| inc.iter().all(|&v| v == 0)) {
            continue;
        }
        let k = key_of(i);
        if let Some(re) = &re {
            label.clear();
            write_flat_label(&mut label, p, &k, q.asm.as_ref());
            if !re.is_match(&label) {
                continue;
            }
        }
        let by = match inc {
            Some(inc) if q.inclusive => inc,
            _ => s,
        };
        order.push((
            cols[sc].value(by),
            s.get(FIRST).copied().unwrap_or(0),
            k.order(),
            i,
        ));
    }
    // Descending by the sort column, then by instructions; ties in a fixed
    // order so the output is deterministic. No two rows compare equal, so
    // selecting the first `limit` rows and sorting only those gives the
    // same rows as sorting all.
    let cmp =
        |a: &Candidate, b: &Candidate| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2));
    let matched = order.len();
    if let Some(n) = q.limit {
        if n == 0 {
            order.clear();
        } else if n < order.len() {
            order.select_nth_unstable_by(n - 1, cmp);
            order.truncate(n);
        }
    }
    order.sort_unstable_by(cmp);
    let mut rows = Vec::with_capacity(order.len());
    for &(_, _, _, i) in &order {
        let k = key_of(i);
        let (s, inc) = costs_of(i);
        let (f, file, line, addr) = match k {
            Key::Function(f) => {
                let info = p.function(f);
                (f, info.file.clone(), info.line, None)
            }
            Key::Line(f, file, line) => (f, p.file(file).map(str::to_string), line, None),
            Key::Instruction(a, f, first) => {
                let (_, fl, ln) = line_key(p, first);
                (f, p.file(fl).map(str::to_string), ln, Some(a))
            }
        };
        let info = p.function(f);
        let file_addr = addr
            .zip(q.asm.as_ref())
            .and_then(|(a, o)| file_addr_of(p, a, o));
        rows.push(FlatRow {
            label: flat_label(p, &k, q.asm.as_ref()),
            function: Some(f),
            name: info.name.clone(),
            module: info.module.clone(),
            file,
            line,
            addr,
            file_addr,
            asm: addr.and_then(|a| match &q.asm {
                Some(o) => disasm_as(p, a, file_addr.unwrap_or(a), Some(o.syntax)),
                None => disasm_at(p, a),
            }),
            self_: values(cols, s),
            incl: inc.map(|v| values(cols, v)),
        });
    }
    Ok(FlatView {
        band: crate::band::band(p),
        columns: heads(p),
        by: q.by,
        sort,
        inclusive: q.inclusive && q.by == By::Function,
        totals: values(cols, p.totals()),
        matched,
        rows,
    })
}

/// A function's label: its name, with its module for unnamed code.
pub fn fn_label(p: &Profile, f: FnId) -> String {
    let info = p.function(f);
    if info.resolved || info.module.is_empty() {
        info.name.clone()
    } else {
        format!("{} in {}", info.name, info.module)
    }
}

/// Appends [`fn_label`] to `out`.
fn write_fn_label(out: &mut String, p: &Profile, f: FnId) {
    let info = p.function(f);
    out.push_str(&info.name);
    if !(info.resolved || info.module.is_empty()) {
        out.push_str(" in ");
        out.push_str(&info.module);
    }
}

/// The last two components of a path, enough to recognise a file.
pub fn short_path(path: &str) -> &str {
    let mut it = path.rmatch_indices('/');
    it.next();
    match it.next() {
        Some((i, _)) => &path[i + 1..],
        None => path,
    }
}

/// Disassembles the instruction at `addr` from the dump's embedded bytes
/// (Intel syntax, run-time addresses: the flat view's `--by instruction`).
pub fn disasm_at(p: &Profile, addr: u64) -> Option<String> {
    disasm_as(p, addr, addr, None)
}

/// Disassembles the instruction at run-time address `addr` as if it were at
/// `ip` (its ELF file address, so that branch targets read as `objdump -d`
/// shows them). In `syntax`, spelled as objdump spells it (lowercase, `0x`
/// hexadecimal, the operands from column 7), or with no syntax given as
/// the flat view has always shown it (iced's Intel defaults).
fn disasm_as(p: &Profile, addr: u64, ip: u64, syntax: Option<AsmSyntax>) -> Option<String> {
    use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter, IntelFormatter};
    use std::fmt::Write;
    let loc = p.dump().symbols.as_ref()?.location(addr)?;
    if loc.code.is_empty() {
        return None;
    }
    let mut d = Decoder::with_ip(64, &loc.code, ip, DecoderOptions::NONE);
    let ins = d.decode();
    if ins.is_invalid() {
        return None;
    }
    let mut out = String::new();
    let mut f: Box<dyn Formatter> = match syntax {
        Some(AsmSyntax::Att) => Box::new(GasFormatter::new()),
        Some(AsmSyntax::Intel) | None => Box::new(IntelFormatter::new()),
    };
    let o = f.options_mut();
    if syntax.is_none() {
        o.set_first_operand_char_index(8);
    } else {
        o.set_first_operand_char_index(7);
        o.set_uppercase_hex(false);
        o.set_hex_prefix("0x");
        o.set_hex_suffix("");
        o.set_small_hex_numbers_in_decimal(false);
        o.set_branch_leading_zeros(false);
        o.set_show_branch_size(false);
        o.set_rip_relative_addresses(true);
        // AT&T's is added below: iced writes `(%rip,)` with it.
        o.set_always_show_scale(syntax == Some(AsmSyntax::Intel));
    }
    let direct = ins.op_count() == 1
        && matches!(
            ins.op0_kind(),
            iced_x86::OpKind::NearBranch16
                | iced_x86::OpKind::NearBranch32
                | iced_x86::OpKind::NearBranch64
        );
    if syntax.is_some() && direct {
        // objdump writes a direct branch's target bare: `je     120c`.
        f.format_mnemonic(&ins, &mut out);
        let _ = write!(
            out,
            "{:w$}{:x}",
            "",
            ins.near_branch_target(),
            w = 7usize.saturating_sub(out.len()).max(1)
        );
        return Some(out);
    }
    f.format(&ins, &mut out);
    if syntax == Some(AsmSyntax::Att) {
        // objdump spells an index of scale 1: `(%rsi,%rsi,1)`.
        static INDEX: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
        let re = INDEX.get_or_init(|| {
            regex::Regex::new(r"\((%[a-z0-9]*),(%[a-z0-9]+)\)").expect("a valid expression")
        });
        out = re.replace_all(&out, "($1,$2,1)").into_owned();
    }
    Some(out)
}

/// Which tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TreeKind {
    /// From the roots down to the functions called.
    #[default]
    TopDown,
    /// From each function where the cost was spent up through its callers.
    BottomUp,
    /// From one function up through its callers (its inclusive costs).
    Callers,
}

/// A tree query.
#[derive(Clone, Debug, Default)]
pub struct TreeQuery {
    /// Column the children are sorted by and percentages are of.
    pub sort: Option<String>,
    /// Leave out nodes below this percentage of the total.
    pub min_percent: f64,
    /// Leave out nodes deeper than this.
    pub max_depth: Option<u32>,
    /// Inverted trees: a chain of single callers is one row, the callers
    /// in the row's [`TreeRow::chain`] ([`takes_only_caller`]), whatever
    /// `max_depth`; the rows below are the chain's last function's callers.
    pub fold: bool,
}

/// One row of a tree, in pre-order.
#[derive(Clone, Debug, Serialize)]
pub struct TreeRow {
    /// Node id (stable for a given profile and tree kind).
    pub id: u32,
    /// Parent's node id (the root's is itself).
    pub parent: u32,
    /// Depth (1 for the first level).
    pub depth: u32,
    /// The function.
    pub function: FnId,
    /// Its label.
    pub name: String,
    /// Top-down: whether this node is an inlined copy of its function in
    /// its parent's. Bottom-up and callers: whether the function below it
    /// (its child in the inverted tree, the callee) was inlined into it.
    pub inlined: bool,
    /// How often the calls this row stands for ran in the window: top-down,
    /// the calls into this node from its parent; bottom-up and callers, the
    /// calls of the inverted tree's root function that came through this
    /// path. `None` for inlined copies and dumps without an instruction
    /// counter.
    pub calls: Option<u64>,
    /// Share of the tree total, in percent, in the sort column.
    pub percent: f64,
    /// Self costs (top-down only; in inverted trees the cost spent there).
    #[serde(rename = "self")]
    pub self_: Vec<Num>,
    /// Inclusive costs.
    pub incl: Vec<Num>,
    /// Whether it has children (shown or cut off); for a folded chain,
    /// whether its last function has.
    pub has_children: bool,
    /// With [`TreeQuery::fold`]: the single callers folded onto this row,
    /// nearest first (each the only caller of the one before, with the same
    /// inclusive costs). Absent from JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<ChainLink>,
}

/// One caller folded onto an inverted tree's row ([`TreeRow::chain`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChainLink {
    /// The function.
    pub function: FnId,
    /// Its label.
    pub name: String,
    /// Whether the function below it was inlined into it.
    pub inlined: bool,
}

/// Whether a row of an inverted tree (bottom-up, callers) takes its one
/// caller on its line: the row is a caller (`depth` 2 or more) and its only
/// child row shown (`children`: their inclusive costs) has the same
/// inclusive costs (`incl`), so a chain of single callers reads as one row
/// (`update ← main ← _start`). The one statement of the rule:
/// `render::tree` (the CLI's text) and [`TreeQuery::fold`] (the web UI's
/// `/api/tree?fold=1`) both follow it. Top-down rows never fold.
pub fn takes_only_caller(kind: TreeKind, depth: u32, incl: &[Num], children: &[&[Num]]) -> bool {
    kind != TreeKind::TopDown && depth >= 2 && matches!(children, [c] if *c == incl)
}

/// A tree view.
#[derive(Clone, Debug, Serialize)]
pub struct TreeView {
    /// Columns.
    pub columns: Vec<ColumnHead>,
    /// Which tree.
    pub kind: TreeKind,
    /// Sort column.
    pub sort: String,
    /// For [`TreeKind::Callers`]: the functions whose callers are shown.
    pub functions: Vec<FnId>,
    /// The tree's total (100 %), per column.
    pub totals: Vec<Num>,
    /// Rows in pre-order, children by decreasing sort column.
    pub rows: Vec<TreeRow>,
}

/// An entry of an inverted-tree node: the call-tree node whose cost it
/// carries (the seed), the next call-tree node up its path (the cursor),
/// and whether the node below the cursor was inlined into it.
type Entry = (NodeId, NodeId, bool);

/// The marker the text views and the stack exports append to an inlined
/// copy's name.
pub const INLINED_MARK: &str = " [inlined]";

/// A function id in an inverted tree's path ([`subtree`]'s `from`) with
/// this bit set names the row marked inlined (the callee below it inlined).
pub const INLINED_BIT: u32 = 1 << 31;

/// Seeds of the bottom-up tree: every call-tree node with self costs.
fn bottom_up_seeds(p: &Profile) -> Vec<Entry> {
    (1..p.node_count() as NodeId)
        .filter(|&n| p.node_self(n).iter().any(|&v| v != 0))
        .map(|n| (n, n, false))
        .collect()
}

/// Seeds of the callers tree of `fs`: each node of a wanted function with no
/// wanted function above it (recursion counted once).
fn callers_seeds(p: &Profile, fs: &[FnId]) -> Vec<Entry> {
    let mut want = vec![false; p.functions().len()];
    for &f in fs {
        if let Some(w) = want.get_mut(f as usize) {
            *w = true;
        }
    }
    let mut seeds = Vec::new();
    let mut stack: Vec<(NodeId, bool)> = vec![(ROOT, false)];
    while let Some((n, above)) = stack.pop() {
        for &c in p.children(n) {
            let w = want[p.node(c).function as usize];
            if w && !above {
                seeds.push((c, c, false));
            }
            stack.push((c, above || w));
        }
    }
    seeds.sort_unstable();
    seeds
}

/// One node of an inverted tree: a function reached through the entries'
/// paths, with their summed costs.
struct Group {
    function: FnId,
    inlined: bool,
    entries: Vec<Entry>,
    cost: Vec<u64>,
}

/// Groups `entries` by the function of their cursor, moving each cursor one
/// node up. Entries whose cursor is the root end there.
fn group(p: &Profile, entries: &[Entry], inclusive: bool) -> Vec<Group> {
    let nc = p.counters();
    let mut index: HashMap<(FnId, bool), usize> = HashMap::default();
    let mut groups: Vec<Group> = Vec::new();
    for &(seed, cursor, below_inlined) in entries {
        if cursor == ROOT {
            continue;
        }
        let node = p.node(cursor);
        let g = *index
            .entry((node.function, below_inlined))
            .or_insert_with(|| {
                groups.push(Group {
                    function: node.function,
                    inlined: below_inlined,
                    entries: Vec::new(),
                    cost: vec![0; nc],
                });
                groups.len() - 1
            });
        groups[g].entries.push((seed, node.parent, node.inlined));
        let c = if inclusive {
            p.node_incl(seed)
        } else {
            p.node_self(seed)
        };
        add_row(&mut groups[g].cost, c);
    }
    groups
}

/// Renders an inverted tree (bottom-up or callers) below the node reached
/// by following `path` (functions from the inverted root).
fn render_inverted(
    p: &Profile,
    kind: TreeKind,
    seeds: Vec<Entry>,
    inclusive: bool,
    path: &[FnId],
    sc: usize,
    q: &TreeQuery,
) -> (Vec<Num>, Vec<TreeRow>) {
    let cols = p.columns();
    let nc = p.counters();
    let mut total = vec![0u64; nc];
    for &(s, _, _) in &seeds {
        add_row(
            &mut total,
            if inclusive {
                p.node_incl(s)
            } else {
                p.node_self(s)
            },
        );
    }
    let total_v = cols[sc].value(&total);
    let pct = |v: f64| {
        if total_v > 0.0 {
            100.0 * v / total_v
        } else {
            0.0
        }
    };
    let mut entries = seeds;
    for &f in path {
        let (f, inlined) = (f & !INLINED_BIT, f & INLINED_BIT != 0);
        entries = group(p, &entries, inclusive)
            .into_iter()
            .find(|g| g.function == f && g.inlined == inlined)
            .map(|g| g.entries)
            .unwrap_or_default();
    }
    let base_depth = path.len() as u32;
    let sorted = |groups: Vec<Group>| -> Vec<Group> {
        let mut g: Vec<Group> = groups
            .into_iter()
            .filter(|g| {
                let v = cols[sc].value(&g.cost);
                pct(v) >= q.min_percent && !(q.min_percent > 0.0 && v == 0.0)
            })
            .collect();
        g.sort_by(|a, b| {
            cols[sc]
                .value(&b.cost)
                .total_cmp(&cols[sc].value(&a.cost))
                .then_with(|| b.cost[FIRST].cmp(&a.cost[FIRST]))
                .then(a.function.cmp(&b.function))
                .then(a.inlined.cmp(&b.inlined))
        });
        g
    };
    let mut rows = Vec::new();
    // Explicit stack (deep recursion makes deep inverted trees): each level
    // holds its remaining children, reversed, its row id and their depth.
    let mut stack: Vec<(Vec<Group>, u32, u32)> = Vec::new();
    let mut first = sorted(group(p, &entries, inclusive));
    first.reverse();
    stack.push((first, 0, base_depth + 1));
    while let Some((pending, parent_id, depth)) = stack.last_mut() {
        let Some(g) = pending.pop() else {
            stack.pop();
            continue;
        };
        let (parent_id, depth) = (*parent_id, *depth);
        let id = rows.len() as u32 + 1;
        let v = cols[sc].value(&g.cost);
        // A folded chain: follow single callers of the same costs, each a
        // level of the tree (`end` is the depth of the chain's last).
        let mut chain = Vec::new();
        let mut end = depth;
        let mut last: Option<Group> = None;
        let mut kids = None;
        if q.fold {
            let incl = values(cols, &g.cost);
            loop {
                let mut c = sorted(group(
                    p,
                    last.as_ref().map_or(&g.entries, |l| &l.entries),
                    inclusive,
                ));
                let next: Vec<Vec<Num>> = c.iter().map(|x| values(cols, &x.cost)).collect();
                let next: Vec<&[Num]> = next.iter().map(Vec::as_slice).collect();
                if !takes_only_caller(kind, end, &incl, &next) {
                    kids = Some(c);
                    break;
                }
                let only = c.pop().expect("one caller");
                chain.push(ChainLink {
                    function: only.function,
                    name: fn_label(p, only.function),
                    inlined: only.inlined,
                });
                last = Some(only);
                end += 1;
            }
        }
        let at_entries = last.as_ref().map_or(&g.entries, |l| &l.entries);
        let expand = q.max_depth.is_none_or(|d| depth < d);
        let children = if expand {
            kids.unwrap_or_else(|| sorted(group(p, at_entries, inclusive)))
        } else {
            Vec::new()
        };
        let has_children = if expand {
            !children.is_empty()
        } else {
            at_entries.iter().any(|&(_, c, _)| c != ROOT)
        };
        let calls = g
            .entries
            .iter()
            .filter_map(|&(seed, _, _)| p.node_calls(seed))
            .fold(None, |a: Option<u64>, c| {
                Some(a.unwrap_or(0).saturating_add(c))
            });
        rows.push(TreeRow {
            id,
            parent: parent_id,
            depth,
            function: g.function,
            name: fn_label(p, g.function),
            inlined: g.inlined,
            calls,
            percent: (pct(v) * 100.0).round() / 100.0,
            self_: if depth == 1 {
                values(cols, &g.cost)
            } else {
                values(cols, &vec![0; nc])
            },
            incl: values(cols, &g.cost),
            has_children,
            chain,
        });
        if !children.is_empty() {
            let mut c = children;
            c.reverse();
            stack.push((c, id, end + 1));
        }
    }
    (values(cols, &total), rows)
}

fn render_top_down(
    p: &Profile,
    from: NodeId,
    sc: usize,
    q: &TreeQuery,
) -> (Vec<Num>, Vec<TreeRow>) {
    let cols = p.columns();
    let root_incl = p.node_incl(ROOT);
    let total = cols[sc].value(root_incl);
    let pct = |v: f64| if total > 0.0 { 100.0 * v / total } else { 0.0 };
    let mut rows = Vec::new();
    let sorted_children = |n: NodeId| -> Vec<NodeId> {
        let mut c: Vec<NodeId> = p
            .children(n)
            .iter()
            .copied()
            .filter(|&c| {
                let v = cols[sc].value(p.node_incl(c));
                p.node_incl(c).iter().any(|&x| x != 0)
                    && pct(v) >= q.min_percent
                    && !(q.min_percent > 0.0 && v == 0.0)
            })
            .collect();
        c.sort_by(|&a, &b| {
            cols[sc]
                .value(p.node_incl(b))
                .total_cmp(&cols[sc].value(p.node_incl(a)))
                .then_with(|| p.node_incl(b)[FIRST].cmp(&p.node_incl(a)[FIRST]))
                .then(a.cmp(&b))
        });
        c
    };
    let mut stack: Vec<NodeId> = sorted_children(from).into_iter().rev().collect();
    while let Some(n) = stack.pop() {
        let node = p.node(n);
        let v = cols[sc].value(p.node_incl(n));
        let kids = sorted_children(n);
        let expand = q.max_depth.is_none_or(|d| node.depth < d);
        rows.push(TreeRow {
            id: n,
            parent: node.parent,
            depth: node.depth,
            function: node.function,
            name: fn_label(p, node.function),
            inlined: node.inlined,
            calls: p.node_calls(n),
            percent: (pct(v) * 100.0).round() / 100.0,
            self_: values(cols, p.node_self(n)),
            incl: values(cols, p.node_incl(n)),
            has_children: !kids.is_empty(),
            chain: Vec::new(),
        });
        if expand {
            stack.extend(kids.into_iter().rev());
        }
    }
    (values(cols, root_incl), rows)
}

/// The top-down tree (from the roots, all threads together).
pub fn top_down(p: &Profile, q: &TreeQuery) -> Result<TreeView, AnalysisError> {
    subtree(p, TreeKind::TopDown, None, &[], q)
}

/// The bottom-up tree (from the functions where cost was spent up to the
/// roots).
pub fn bottom_up(p: &Profile, q: &TreeQuery) -> Result<TreeView, AnalysisError> {
    subtree(p, TreeKind::BottomUp, None, &[], q)
}

/// The callers of the functions `fs` (all with the same name, usually one):
/// which callers and call paths their inclusive costs came through.
pub fn callers(p: &Profile, fs: &[FnId], q: &TreeQuery) -> Result<TreeView, AnalysisError> {
    subtree(p, TreeKind::Callers, Some(fs), &[], q)
}

/// The rows of a tree below one node, for lazy expansion (the web UI).
///
/// `from` names the node: for the top-down tree, empty (the root) or one
/// call-tree node id (a row's `id`); for the inverted trees (bottom-up,
/// callers), the functions on the path from the inverted root to the node
/// (the `function` of each row down to it). Rows' depths are absolute;
/// `max_depth` is absolute too. In inverted trees, row ids number the rows
/// of this answer only.
pub fn subtree(
    p: &Profile,
    kind: TreeKind,
    fs: Option<&[FnId]>,
    from: &[u32],
    q: &TreeQuery,
) -> Result<TreeView, AnalysisError> {
    let sort = q.sort.clone().unwrap_or_else(|| default_sort(p));
    let sc = column_index(p, &sort)?;
    let (totals, rows) = match kind {
        TreeKind::TopDown => {
            let from = from.first().copied().unwrap_or(ROOT);
            if from as usize >= p.node_count() {
                return Err(AnalysisError::NoSuchNode(from));
            }
            render_top_down(p, from, sc, q)
        }
        TreeKind::BottomUp => render_inverted(p, kind, bottom_up_seeds(p), false, from, sc, q),
        TreeKind::Callers => render_inverted(
            p,
            kind,
            callers_seeds(p, fs.unwrap_or(&[])),
            true,
            from,
            sc,
            q,
        ),
    };
    Ok(TreeView {
        columns: heads(p),
        kind,
        sort,
        functions: fs.map(<[FnId]>::to_vec).unwrap_or_default(),
        totals,
        rows,
    })
}

/// One source line of an annotated function.
#[derive(Clone, Debug, Serialize)]
pub struct SourceLine {
    /// Line number.
    pub line: u32,
    /// The source text, when the file could be read.
    pub text: Option<String>,
    /// Costs of the function's instructions at this line (code inlined into
    /// the function counts at the line of the inlined call).
    pub costs: Vec<Num>,
    /// Badness of the line.
    pub badness: f64,
    /// 1 for the worst line by badness, 2 for the next, ...; 0 unmarked.
    pub worst: u32,
    /// Functions inlined at this line.
    pub inlined: Vec<String>,
    /// The fields (`Entity::flags`) the line's typed instructions missed
    /// the first level on, most misses first (from the dump's data types;
    /// empty without them).
    pub fields: Vec<String>,
}

/// The lines of one file of an annotated function.
#[derive(Clone, Debug, Serialize)]
pub struct SourceFile {
    /// File path, `None` for code without line information.
    pub path: Option<String>,
    /// Whether the source text was available.
    pub readable: bool,
    /// Whether the text came from the dump (embedded when it was resolved)
    /// rather than from the disk.
    pub embedded: bool,
    /// Lines: those with costs, and around them the source context.
    pub lines: Vec<SourceLine>,
}

/// A function's annotated source.
#[derive(Clone, Debug, Serialize)]
pub struct AnnotateView {
    /// Columns.
    pub columns: Vec<ColumnHead>,
    /// The functions annotated.
    pub functions: Vec<FnId>,
    /// Their label.
    pub name: String,
    /// Self costs of the functions (the sum of every line).
    pub totals: Vec<Num>,
    /// Per file.
    pub files: Vec<SourceFile>,
}

/// How many lines are marked as the worst (at most; only lines with at
/// least a tenth of the worst line's badness are marked).
pub const WORST_MARKED: usize = 3;
/// Lines of source context shown around lines with costs.
pub const CONTEXT: u32 = 2;

/// Annotates the functions `fs` line by line. A file's text is the one
/// embedded in the dump, else what `source` returns for its path (the
/// caller does the reading, or returns `None`).
pub fn annotate(p: &Profile, fs: &[FnId], source: &dyn Fn(&str) -> Option<String>) -> AnnotateView {
    let cols = p.columns();
    let nc = p.counters();
    let want = |f: FnId| fs.contains(&f);
    // (file, line) -> (costs, inlined callee names)
    let mut acc: HashMap<(u32, u32), (Vec<u64>, Vec<FnId>)> = HashMap::default();
    let mut total = vec![0u64; nc];
    // (file, line) -> (field, first-level data misses) of its typed
    // instructions that missed.
    let data = p.dump().data.as_ref();
    let miss = p
        .dump()
        .meta
        .levels
        .first()
        .and_then(|l| p.column(&format!("{}{l}", crate::columns::D_MISS)));
    let mut missed: HashMap<(u32, u32), Vec<(String, u64)>> = HashMap::default();
    for i in 0..p.record_count() {
        if !p.record_kept(i) {
            continue;
        }
        let frames = p.record_frames(i);
        let Some(j) = frames.iter().rposition(|fr| want(fr.function)) else {
            continue;
        };
        let fr = frames[j];
        let r = &p.dump().records[i];
        if let (Some(d), Some(mc)) = (data, miss) {
            let n = mc.int_value(&r.counters);
            if let Some(a) = d.access(r.ip).filter(|_| n > 0) {
                let label = d.label(a);
                let v = missed.entry((fr.file, fr.line)).or_default();
                match v.iter_mut().find(|e| e.0 == label) {
                    Some(e) => e.1 += n,
                    None => v.push((label, n)),
                }
            }
        }
        let e = acc
            .entry((fr.file, fr.line))
            .or_insert_with(|| (vec![0; nc], Vec::new()));
        add_row(&mut e.0, &p.dump().records[i].counters);
        add_row(&mut total, &p.dump().records[i].counters);
        if let Some(inl) = frames.get(j + 1) {
            if !e.1.contains(&inl.function) {
                e.1.push(inl.function);
            }
        }
    }
    let bad = cols.iter().position(|c| c.name == crate::columns::BADNESS);
    // Worst lines by badness.
    let mut ranked: Vec<((u32, u32), f64)> = acc
        .iter()
        .map(|(k, v)| (*k, bad.map(|b| cols[b].value(&v.0)).unwrap_or(0.0)))
        .filter(|(_, b)| *b > 0.0)
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // At most WORST_MARKED lines, and only lines within a tenth of the
    // worst: a line far below it is not worth the reader's attention.
    let top = ranked.first().map(|r| r.1).unwrap_or(0.0);
    let worst: HashMap<(u32, u32), u32> = ranked
        .iter()
        .filter(|r| r.1 >= top / 10.0)
        .take(WORST_MARKED)
        .enumerate()
        .map(|(i, (k, _))| (*k, i as u32 + 1))
        .collect();
    let mut by_file: HashMap<u32, Vec<u32>> = HashMap::default();
    for &(file, line) in acc.keys() {
        by_file.entry(file).or_default().push(line);
    }
    let mut files: Vec<(u64, SourceFile)> = Vec::new();
    for (file, mut lines) in by_file {
        lines.sort_unstable();
        let path = p.file(file).map(str::to_string);
        // The text embedded in the dump first (the code as captured),
        // else the caller's reader.
        let embedded = path.as_deref().and_then(|f| p.dump().source(f));
        let text = embedded
            .map(str::to_string)
            .or_else(|| path.as_deref().and_then(source));
        let src_lines: Vec<&str> = text
            .as_deref()
            .map(|t| t.lines().collect())
            .unwrap_or_default();
        let mut shown: Vec<u32> = Vec::new();
        if src_lines.is_empty() {
            shown = lines.clone();
        } else {
            // Every line with costs (line 0, "no line", included), and
            // source context around the real ones.
            for &l in &lines {
                shown.push(l);
                if l >= 1 {
                    let lo = l.saturating_sub(CONTEXT).max(1);
                    let hi = l.saturating_add(CONTEXT).min(src_lines.len() as u32).max(l);
                    shown.extend(lo..=hi);
                }
            }
            shown.sort_unstable();
            shown.dedup();
        }
        let mut weight = 0u64;
        let rows = shown
            .into_iter()
            .map(|l| {
                let entry = acc.get(&(file, l));
                let costs = entry.map(|e| e.0.clone()).unwrap_or_else(|| vec![0; nc]);
                weight += costs.get(FIRST).copied().unwrap_or(0);
                SourceLine {
                    line: l,
                    text: src_lines
                        .get((l as usize).wrapping_sub(1))
                        .map(|s| s.to_string()),
                    badness: bad.map(|b| cols[b].value(&costs)).unwrap_or(0.0),
                    costs: values(cols, &costs),
                    worst: worst.get(&(file, l)).copied().unwrap_or(0),
                    inlined: entry
                        .map(|e| e.1.iter().map(|&f| fn_label(p, f)).collect())
                        .unwrap_or_default(),
                    fields: missed
                        .get(&(file, l))
                        .map(|v| {
                            let mut v = v.clone();
                            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                            v.into_iter().map(|e| e.0).collect()
                        })
                        .unwrap_or_default(),
                }
            })
            .collect();
        files.push((
            weight,
            SourceFile {
                path,
                readable: !src_lines.is_empty(),
                embedded: embedded.is_some(),
                lines: rows,
            },
        ));
    }
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.path.cmp(&b.1.path)));
    AnnotateView {
        columns: heads(p),
        functions: fs.to_vec(),
        name: fs.first().map(|&f| fn_label(p, f)).unwrap_or_default(),
        totals: values(cols, &total),
        files: files.into_iter().map(|f| f.1).collect(),
    }
}

/// One instruction of a function's disassembly.
#[derive(Clone, Debug, Serialize)]
pub struct AsmRow {
    /// Run-time address (the dump's).
    pub addr: u64,
    /// The address `objdump -d` and `perf annotate` show: the run-time
    /// address minus its module's load bias. `None` when the module's file
    /// (of the captured build) is not there to tell the bias.
    pub file_addr: Option<u64>,
    /// Instruction bytes, hex.
    pub bytes: String,
    /// Disassembly in the view's syntax, `None` without the bytes.
    pub text: Option<String>,
    /// Source file and line of the innermost frame.
    pub file: Option<String>,
    /// Line.
    pub line: u32,
    /// The inlined function the instruction belongs to, if not the
    /// annotated one.
    pub inlined: Option<String>,
    /// Costs.
    pub costs: Vec<Num>,
    /// The field its memory operand touches (`Entity::flags`), when the
    /// dump's data types type it.
    pub field: Option<String>,
    /// Whether instructions that never ran (or are unknown) precede it.
    pub gap_before: bool,
}

/// A function's executed instructions with their costs.
#[derive(Clone, Debug, Serialize)]
pub struct AsmView {
    /// Columns.
    pub columns: Vec<ColumnHead>,
    /// The functions.
    pub functions: Vec<FnId>,
    /// Label.
    pub name: String,
    /// The syntax of the rows' text.
    pub syntax: AsmSyntax,
    /// Instructions by address.
    pub rows: Vec<AsmRow>,
}

/// Assembly syntax.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AsmSyntax {
    /// AT&T, as `objdump -d` and `perf annotate` print by default.
    #[default]
    Att,
    /// Intel, as `objdump -d -M intel` prints.
    Intel,
}

/// How [`disassembly_with`] shows the instructions.
#[derive(Clone, Debug, Default)]
pub struct AsmOptions {
    /// The syntax.
    pub syntax: AsmSyntax,
    /// Per module of the dump (same order as `Dump::modules`), its load
    /// bias (run-time address minus ELF virtual address), `None` when
    /// unknown: those instructions keep their run-time addresses. The
    /// analysis reads no files; the caller finds the biases.
    pub load_bias: Vec<Option<u64>>,
}

/// The executed instructions of the functions `fs` (inlined code included),
/// in AT&T syntax at run-time addresses ([`disassembly_with`] gives file
/// addresses).
pub fn disassembly(p: &Profile, fs: &[FnId]) -> AsmView {
    disassembly_with(p, fs, &AsmOptions::default())
}

/// The executed instructions of the functions `fs` (inlined code included),
/// in `o.syntax`, with the file address of every instruction whose module's
/// load bias `o` gives.
pub fn disassembly_with(p: &Profile, fs: &[FnId], o: &AsmOptions) -> AsmView {
    let cols = p.columns();
    let nc = p.counters();
    let mut acc: HashMap<u64, (usize, Vec<u64>)> = HashMap::default();
    for i in 0..p.record_count() {
        if !p.record_kept(i) {
            continue;
        }
        let frames = p.record_frames(i);
        if !frames.iter().any(|fr| fs.contains(&fr.function)) {
            continue;
        }
        let ip = p.dump().records[i].ip;
        let e = acc.entry(ip).or_insert_with(|| (i, vec![0; nc]));
        add_row(&mut e.1, &p.dump().records[i].counters);
    }
    let mut addrs: Vec<u64> = acc.keys().copied().collect();
    addrs.sort_unstable();
    let syms = p.dump().symbols.as_ref();
    let mut rows = Vec::with_capacity(addrs.len());
    let mut next_expected: Option<u64> = None;
    for a in addrs {
        let (i, costs) = &acc[&a];
        let frames = p.record_frames(*i);
        let inner = frames[frames.len() - 1];
        let code = syms
            .and_then(|s| s.location(a))
            .map(|l| l.code.clone())
            .unwrap_or_default();
        let len = code_len(&code, a);
        let file_addr = file_addr_of(p, a, o);
        rows.push(AsmRow {
            addr: a,
            file_addr,
            bytes: code
                .iter()
                .take(len.max(1).min(code.len()))
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" "),
            text: disasm_as(p, a, file_addr.unwrap_or(a), Some(o.syntax)),
            file: p.file(inner.file).map(str::to_string),
            line: inner.line,
            inlined: (!fs.contains(&inner.function)).then(|| fn_label(p, inner.function)),
            costs: values(cols, costs),
            field: p
                .dump()
                .data
                .as_ref()
                .and_then(|d| d.access(a).map(|x| d.label(x))),
            gap_before: next_expected.is_some_and(|n| n != a),
        });
        next_expected = (len > 0).then(|| a + len as u64);
    }
    AsmView {
        columns: heads(p),
        functions: fs.to_vec(),
        name: fs.first().map(|&f| fn_label(p, f)).unwrap_or_default(),
        syntax: o.syntax,
        rows,
    }
}

fn code_len(code: &[u8], addr: u64) -> usize {
    if code.is_empty() {
        return 0;
    }
    let mut d = iced_x86::Decoder::with_ip(64, code, addr, iced_x86::DecoderOptions::NONE);
    let ins = d.decode();
    if ins.is_invalid() {
        0
    } else {
        ins.len()
    }
}

/// One thread's costs.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadRow {
    /// Kernel thread id.
    pub tid: u32,
    /// Name.
    pub name: String,
    /// Simulated core.
    pub core: u32,
    /// Costs.
    pub costs: Vec<Num>,
}

/// One simulated core's costs.
#[derive(Clone, Debug, Serialize)]
pub struct CoreRow {
    /// Core number.
    pub core: u32,
    /// Threads that ran on it.
    pub threads: Vec<u32>,
    /// Costs.
    pub costs: Vec<Num>,
}

/// Per thread and per simulated core.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadsView {
    /// Columns.
    pub columns: Vec<ColumnHead>,
    /// Totals.
    pub totals: Vec<Num>,
    /// Threads in dump order.
    pub threads: Vec<ThreadRow>,
    /// Cores by number.
    pub cores: Vec<CoreRow>,
}

/// Costs per thread and per simulated core.
pub fn threads(p: &Profile) -> ThreadsView {
    let cols = p.columns();
    let nc = p.counters();
    let d = p.dump();
    let mut per = vec![vec![0u64; nc]; d.threads.len()];
    for (i, r) in d.records.iter().enumerate() {
        if p.record_kept(i) {
            if let Some(row) = per.get_mut(r.thread as usize) {
                add_row(row, &r.counters);
            }
        }
    }
    let mut cores: Vec<(u32, Vec<u32>, Vec<u64>)> = Vec::new();
    for (t, row) in d.threads.iter().zip(&per) {
        match cores.iter_mut().find(|c| c.0 == t.core) {
            Some(c) => {
                c.1.push(t.tid);
                add_row(&mut c.2, row);
            }
            None => cores.push((t.core, vec![t.tid], row.clone())),
        }
    }
    cores.sort_by_key(|c| c.0);
    ThreadsView {
        columns: heads(p),
        totals: values(cols, p.totals()),
        threads: d
            .threads
            .iter()
            .zip(&per)
            .map(|(t, row)| ThreadRow {
                tid: t.tid,
                name: t.name.clone(),
                core: t.core,
                costs: values(cols, row),
            })
            .collect(),
        cores: cores
            .into_iter()
            .map(|(core, threads, row)| CoreRow {
                core,
                threads,
                costs: values(cols, &row),
            })
            .collect(),
    }
}
