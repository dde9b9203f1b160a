//! Text rendering of the views: aligned tables for a terminal.
//!
//! Every renderer takes the view (the same value `--json` prints) and the
//! indices of the columns to show, so text and JSON never disagree.

use crate::diff::DiffView;
use crate::profile::Profile;
use crate::views::{
    takes_only_caller, AnnotateView, AsmView, ColumnHead, FlatView, Num, ThreadsView, TreeKind,
    TreeRow, TreeView, INLINED_MARK,
};
use crate::AnalysisError;
use std::collections::HashMap;
use std::fmt::Write;

/// The columns shown by default ([`crate::columns::default_shown`]):
/// instructions, data accesses, data misses per level, instruction misses of
/// the first level, memory, badness.
pub fn default_columns(columns: &[ColumnHead]) -> Vec<usize> {
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    crate::columns::default_shown(&names)
}

/// Parses `--columns`: `all`, or names separated by commas.
pub fn pick_columns(
    columns: &[ColumnHead],
    spec: Option<&str>,
) -> Result<Vec<usize>, AnalysisError> {
    match spec {
        None => Ok(default_columns(columns)),
        Some("all") => Ok((0..columns.len()).collect()),
        Some(s) => s
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| {
                columns.iter().position(|c| c.name == n).ok_or_else(|| {
                    AnalysisError::NoSuchColumn {
                        name: n.to_string(),
                        known: columns
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    }
                })
            })
            .collect(),
    }
}

/// Formats one value.
pub fn num(v: Num) -> String {
    match v {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => format!("{f:.1}"),
    }
}

/// A table: numeric columns right-aligned, the last column (a label) left.
struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn render(&self) -> String {
        let n = self.head.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.head).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.head).chain(&self.rows) {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                if i + 1 == n {
                    line.push_str(c);
                } else {
                    let _ = write!(line, "{c:>width$}  ", width = w[i]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

fn pick(vals: &[Num], cols: &[usize]) -> Vec<String> {
    cols.iter().map(|&c| num(vals[c])).collect()
}

fn names(columns: &[ColumnHead], cols: &[usize]) -> Vec<String> {
    cols.iter().map(|&c| columns[c].name.clone()).collect()
}

/// A summary of the capture: program, cache, totals, notes and warnings.
pub fn header(p: &Profile) -> String {
    let d = p.dump();
    let m = &d.meta;
    let mut s = String::new();
    let _ = writeln!(s, "program:   {}", m.program.join(" "));
    let _ = writeln!(
        s,
        "cache:     {} (levels {}, {} core{})",
        m.cache_name,
        m.levels.join(", "),
        m.cores,
        if m.cores == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "capture:   trigger {}, threads {}, {} instructions in {:.3} ms",
        m.trigger,
        m.threads,
        m.instructions,
        m.duration_ns as f64 / 1e6
    );
    let summary = crate::summary::summary(p);
    let w = summary.window;
    let _ = writeln!(
        s,
        "window:    {} \u{2192} {}, mode {}",
        w.started, w.stopped, w.mode
    );
    // What could not be modelled, or ran trapped in fast mode, whenever
    // there is any (`summary::unmodelled`, `summary::trapped`).
    for (label, short) in [
        ("unmodelled:", &summary.unmodelled),
        ("trapped:", &summary.trapped),
        ("untraced:", &summary.untraced),
        ("requests:", &summary.client_requests),
        ("woken:", &summary.woken_early),
    ] {
        if let Some(f) = short {
            let _ = writeln!(s, "{label:<10} {}", f.text);
            let _ = writeln!(s, "{:<10} {}", "", f.advice);
        }
    }
    if let Some(c) = &summary.data_types {
        let _ = writeln!(s, "data:      {}", c.text());
    }
    if !m.warm.is_empty() {
        let _ = writeln!(s, "warmed:    {}", m.warm);
    }
    if !m.schedule.is_empty() {
        let _ = writeln!(s, "schedule:  {}", m.schedule);
    }
    if let Some(c) = &m.cut_short {
        let _ = writeln!(s, "cut short: {c}");
    }
    if let Some(p) = &m.part {
        let _ = writeln!(
            s,
            "part:      {} of {}, ended by {}",
            p.number, p.of, p.trigger
        );
    }
    if let Some(b) = crate::band::band(p) {
        band_lines(&mut s, &b);
    }
    for n in &m.notes {
        let _ = writeln!(s, "note:      {n}");
    }
    match &d.symbols {
        None => {
            let _ = writeln!(
                s,
                "symbols:   none embedded (run `coldcache resolve` while the binaries exist)"
            );
        }
        Some(sy) => {
            for (mo, st) in d.modules.iter().zip(&sy.modules) {
                use coldcache_dump::ModuleStatus::*;
                let what = match st.status {
                    Lines | Unresolved => continue,
                    SymbolsOnly => "no debug info: function names only, no lines",
                    NotFound => "not found",
                    Mismatch => "rebuilt since the capture (build id differs)",
                };
                let _ = writeln!(s, "symbols:   {}: {what}", mo.path);
            }
        }
    }
    s
}

/// The header's layout-noise band: what moved, then the headline columns
/// (instructions, data accesses, misses per level, memory) with the
/// measured value beside min, median and max; `report --json` has every
/// column.
fn band_lines(s: &mut String, b: &crate::band::BandView) {
    let _ = writeln!(
        s,
        "band:      {} moved placements (seed {}, paddings below {} bytes at region \
         boundaries): {}",
        b.moved, b.seed, b.max_offset, b.regions
    );
    if !b.whole_view {
        let _ = writeln!(
            s,
            "           (the band is of the whole dump, these totals of the threads kept)"
        );
    }
    let headline = |n: &str| {
        n == coldcache_dump::CounterLayout::INSTRUCTIONS_NAME
            || n == crate::columns::D_REFS
            || n == crate::columns::MEM
            || n.starts_with(crate::columns::I_MISS)
            || n.starts_with(crate::columns::D_MISS)
    };
    let rows: Vec<Vec<String>> = b
        .columns
        .iter()
        .filter(|c| headline(&c.name))
        .map(|c| {
            vec![
                String::new(),
                c.name.clone(),
                c.measured.to_string(),
                format!("[{} {} {}]", c.min, c.median, c.max),
            ]
        })
        .collect();
    let head = vec![
        String::new(),
        "event".into(),
        "measured".into(),
        "band [min median max]".into(),
    ];
    s.push_str(&Table { head, rows }.render());
}

/// The flat profile as a table.
pub fn flat(v: &FlatView, cols: &[usize]) -> String {
    let mut head = names(&v.columns, cols);
    let label = match v.by {
        crate::views::By::Function => "function",
        crate::views::By::Line => "line",
        crate::views::By::Instruction => "instruction",
    };
    let with_incl = v.rows.first().is_some_and(|r| r.incl.is_some());
    let sc = v.columns.iter().position(|c| c.name == v.sort).unwrap_or(0);
    if with_incl {
        head.push(format!("incl:{}", v.sort));
    }
    head.push(label.to_string());
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in &v.rows {
        let mut row = pick(&r.self_, cols);
        if let Some(inc) = &r.incl {
            row.push(num(inc[sc]));
        }
        let mut l = r.label.clone();
        if let Some(a) = &r.asm {
            let _ = write!(l, "  | {a}");
        }
        row.push(l);
        rows.push(row);
    }
    let mut total = pick(&v.totals, cols);
    if with_incl {
        total.push(String::new());
    }
    total.push("TOTAL".into());
    rows.push(total);
    let mut s = Table { head, rows }.render();
    if v.matched > v.rows.len() {
        let _ = writeln!(s, "({} of {} rows shown)", v.rows.len(), v.matched);
    }
    s
}

/// A tree as an indented table.
pub fn tree(v: &TreeView, cols: &[usize]) -> String {
    let mut head = vec!["%".to_string()];
    head.extend(
        names(&v.columns, cols)
            .into_iter()
            .map(|n| format!("incl:{n}")),
    );
    let selfname = format!("self:{}", v.sort);
    head.push(selfname);
    head.push("calls".to_string());
    head.push(
        match v.kind {
            TreeKind::TopDown => "call tree (callees below callers)",
            TreeKind::BottomUp => "function, then its callers below",
            TreeKind::Callers => "function, then the callers its costs came through",
        }
        .to_string(),
    );
    let sc = v.columns.iter().position(|c| c.name == v.sort).unwrap_or(0);
    // Inverted trees: a caller row with one caller of the same costs takes
    // that caller on its line (`a ← b ← c`), so a chain of single callers
    // is one row, not one row per level.
    // The rule is `views::takes_only_caller`, as the web UI folds.
    let inverted = v.kind != TreeKind::TopDown;
    let mut kids: HashMap<u32, Vec<&TreeRow>> = HashMap::new();
    for r in &v.rows {
        kids.entry(r.parent).or_default().push(r);
    }
    let folds = |r: &TreeRow| -> bool {
        let callers: Vec<&[Num]> = kids
            .get(&r.id)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|c| c.incl.as_slice())
            .collect();
        takes_only_caller(v.kind, r.depth, &r.incl, &callers)
    };
    // Per row id: (display row, display depth).
    let mut at: HashMap<u32, (usize, u32)> = HashMap::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut folding: HashMap<u32, bool> = HashMap::new();
    for r in &v.rows {
        // Inverted trees mark the caller a function was inlined into.
        let mark = match (r.inlined, inverted) {
            (false, _) => "",
            (true, false) => INLINED_MARK,
            (true, true) => " [inlined here]",
        };
        let name = format!("{}{mark}", r.name);
        if inverted && folding.get(&r.parent).copied().unwrap_or(false) {
            let (row, depth) = at[&r.parent];
            let last = rows[row].len() - 1;
            let _ = write!(rows[row][last], " ← {name}");
            at.insert(r.id, (row, depth));
            folding.insert(r.id, folds(r));
            continue;
        }
        let depth = at.get(&r.parent).map_or(1, |&(_, d)| d + 1);
        let mut row = vec![format!("{:.1}", r.percent)];
        row.extend(pick(&r.incl, cols));
        row.push(num(r.self_[sc]));
        row.push(
            r.calls
                .map_or_else(|| "-".to_string(), |c| num(Num::Int(c))),
        );
        row.push(format!(
            "{}{}",
            "  ".repeat(depth.saturating_sub(1) as usize),
            name
        ));
        at.insert(r.id, (rows.len(), depth));
        folding.insert(r.id, folds(r));
        rows.push(row);
    }
    let mut s = Table { head, rows }.render();
    let _ = writeln!(
        s,
        "100% = {} {} (inclusive, sorted by {})",
        num(v.totals[sc]),
        v.sort,
        v.sort
    );
    s
}

/// Annotated source.
pub fn annotate(v: &AnnotateView, cols: &[usize]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "function {}", v.name);
    for f in &v.files {
        let _ = writeln!(
            s,
            "\n-- {}{}",
            f.path.as_deref().unwrap_or("(no line information)"),
            if f.embedded {
                "  (as captured: embedded in the dump)"
            } else if f.readable || f.path.is_none() {
                ""
            } else {
                "  (source not available)"
            }
        );
        let mut head = names(&v.columns, cols);
        head.push("line".into());
        head.push("source".into());
        let rows = f
            .lines
            .iter()
            .map(|l| {
                let has = l.costs.iter().any(|c| c.as_f64() != 0.0);
                let mut row: Vec<String> = if has {
                    pick(&l.costs, cols)
                } else {
                    cols.iter().map(|_| ".".to_string()).collect()
                };
                row.push(format!(
                    "{}{}",
                    if l.worst > 0 { ">>" } else { "  " },
                    l.line
                ));
                let mut text = l.text.clone().unwrap_or_default();
                if !l.inlined.is_empty() {
                    let _ = write!(text, "   [inlined: {}]", l.inlined.join(", "));
                }
                if !l.fields.is_empty() {
                    let _ = write!(text, "   ; {}", l.fields.join(", "));
                }
                row.push(text);
                row
            })
            .collect();
        s.push_str(&Table { head, rows }.render());
    }
    let _ = writeln!(
        s,
        "\n>> marks the worst lines by badness (mem squared / instructions)."
    );
    if v.files
        .iter()
        .any(|f| f.lines.iter().any(|l| !l.fields.is_empty()))
    {
        let _ = writeln!(
            s,
            "; names the fields the line's instructions missed the first level on (the dump's data types)."
        );
    }
    s
}

/// Annotated disassembly: addresses as `objdump -d` prints them (file
/// addresses, bare hexadecimal) where the view has them, run-time addresses
/// (`0x…`, with a note) where it does not.
pub fn asm(v: &AsmView, cols: &[usize]) -> String {
    let mut head = names(&v.columns, cols);
    head.push("address".into());
    head.push("instruction".into());
    let mut rows = Vec::new();
    for r in &v.rows {
        if r.gap_before {
            let mut gap: Vec<String> = cols.iter().map(|_| String::new()).collect();
            gap.push("...".into());
            gap.push(String::new());
            rows.push(gap);
        }
        let mut row = pick(&r.costs, cols);
        row.push(match r.file_addr {
            Some(a) => format!("{a:x}:"),
            None => format!("{:#x}:", r.addr),
        });
        let mut t = r.text.clone().unwrap_or_else(|| "(bytes unknown)".into());
        if let Some(f) = &r.file {
            let _ = write!(t, "    # {}:{}", crate::views::short_path(f), r.line);
        }
        if let Some(i) = &r.inlined {
            let _ = write!(t, " [{i}]");
        }
        if let Some(f) = &r.field {
            let _ = write!(t, "  ; {f}");
        }
        row.push(t);
        rows.push(row);
    }
    let mut s = format!("function {}\n{}", v.name, Table { head, rows }.render());
    if v.rows.iter().any(|r| r.file_addr.is_none()) {
        let _ = writeln!(
            s,
            "\n0x… addresses are run-time addresses: their module's file (of the captured build) was not found to tell its load bias."
        );
    }
    s
}

/// Threads and cores.
pub fn threads(v: &ThreadsView, cols: &[usize]) -> String {
    let mut head = names(&v.columns, cols);
    head.push("thread".into());
    let mut rows: Vec<Vec<String>> = v
        .threads
        .iter()
        .map(|t| {
            let mut row = pick(&t.costs, cols);
            row.push(format!("{} {} (core {})", t.tid, t.name, t.core));
            row
        })
        .collect();
    let mut total = pick(&v.totals, cols);
    total.push("TOTAL".into());
    rows.push(total);
    let mut s = Table { head, rows }.render();
    let mut head = names(&v.columns, cols);
    head.push("simulated core".into());
    let rows = v
        .cores
        .iter()
        .map(|c| {
            let mut row = pick(&c.costs, cols);
            row.push(format!(
                "core {} (threads {})",
                c.core,
                c.threads
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            row
        })
        .collect();
    s.push('\n');
    s.push_str(&Table { head, rows }.render());
    s
}

/// A comparison.
pub fn diff(v: &DiffView, cols: &[usize]) -> String {
    let sc = v.columns.iter().position(|c| c.name == v.sort).unwrap_or(0);
    let mut head = vec![
        format!("{} before", v.sort),
        format!("{} after", v.sort),
        "change".into(),
        "%".into(),
    ];
    for &c in cols {
        if c != sc {
            head.push(format!("{} before→after", v.columns[c].name));
        }
    }
    head.push(match (v.data, v.by) {
        (Some(crate::diff::DataRows::Type), _) => "type".into(),
        (Some(crate::diff::DataRows::Field), _) => "field".into(),
        (Some(crate::diff::DataRows::Object), _) => "object".into(),
        (None, crate::views::By::Line) => "line".into(),
        (None, _) => "function".into(),
    });
    let fmt_change = |c: f64| {
        if c.fract() == 0.0 {
            format!("{c:+}")
        } else {
            format!("{c:+.1}")
        }
    };
    let mut rows: Vec<Vec<String>> = v
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![
                num(r.before[sc]),
                num(r.after[sc]),
                fmt_change(r.change),
                match (r.relative, r.status) {
                    (_, "new") => "new".into(),
                    (_, "gone") => "gone".into(),
                    (Some(x), _) => format!("{x:+.1}%"),
                    (None, _) => String::new(),
                },
            ];
            for &c in cols {
                if c != sc {
                    row.push(format!("{}→{}", num(r.before[c]), num(r.after[c])));
                }
            }
            row.push(r.label.clone());
            row
        })
        .collect();
    let (x, y) = (v.before_totals[sc].as_f64(), v.after_totals[sc].as_f64());
    let mut total = vec![
        num(v.before_totals[sc]),
        num(v.after_totals[sc]),
        fmt_change(y - x),
        if x != 0.0 {
            format!("{:+.1}%", (y - x) / x * 100.0)
        } else {
            String::new()
        },
    ];
    for &c in cols {
        if c != sc {
            total.push(format!(
                "{}→{}",
                num(v.before_totals[c]),
                num(v.after_totals[c])
            ));
        }
    }
    total.push("TOTAL".into());
    rows.push(total);
    let mut s = Table { head, rows }.render();
    if v.matched > v.rows.len() {
        let _ = writeln!(s, "({} of {} rows shown)", v.rows.len(), v.matched);
    }
    if let Some(noise) = &v.layout_noise {
        // The sort column and the columns shown, in that order.
        let shown: Vec<&str> = std::iter::once(sc)
            .chain(cols.iter().copied().filter(|&c| c != sc))
            .map(|c| v.columns[c].name.as_str())
            .collect();
        let _ = writeln!(
            s,
            "\nlayout noise of the totals (a range is a dump's band, min..max over its \
             placements, or its value without one; within when the ranges overlap):"
        );
        for name in shown {
            let Some(n) = noise.iter().find(|n| n.column == name) else {
                continue;
            };
            let range = |r: [u64; 2]| {
                if r[0] == r[1] {
                    r[0].to_string()
                } else {
                    format!("{}..{}", r[0], r[1])
                }
            };
            let _ = writeln!(
                s,
                "  {name}: {} \u{2192} {}: {}",
                range(n.before),
                range(n.after),
                if n.within {
                    "within layout noise"
                } else {
                    "outside layout noise"
                }
            );
        }
    }
    s
}

/// `n` of `whole` as `n (x.y%)`.
fn with_share(n: u64, whole: u64) -> String {
    format!("{n} ({:.1}%)", crate::data::share(n, whole))
}

/// The data view's coverage header: data accesses typed, with a field,
/// untyped; how the typed ones were learned; what the type reader found
/// per module.
pub fn data_coverage(v: &crate::data::DataView) -> String {
    let c = &v.coverage;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "data accesses: {}; typed {}, with a field {}, untyped {}",
        c.accesses,
        with_share(c.typed, c.accesses),
        with_share(c.with_field, c.accesses),
        with_share(c.untyped, c.accesses)
    );
    let _ = writeln!(
        s,
        "typed through: a register holding a pointer variable {}, a global or static {}, the stack frame {}",
        c.via_register, c.via_global, c.via_stack
    );
    let _ = writeln!(
        s,
        "instructions:  {} of {} instructions with data accesses typed",
        c.typed_instructions, c.instructions
    );
    // Modules the resolver did not look at (no record in them) say
    // nothing worth a line.
    for m in v.modules.iter().filter(|m| !m.found.is_empty()) {
        let _ = writeln!(s, "types of {}: {}", m.module, m.found);
    }
    s
}

fn data_table(
    v: &crate::data::DataView,
    rows: &[crate::data::DataRow],
    matched: usize,
    cols: &[usize],
    label: &str,
) -> String {
    let mut head = vec![format!("%{}", v.sort), "reads".into(), "writes".into()];
    head.extend(names(&v.columns, cols));
    let with_use = v.total_line_use.is_some();
    if with_use {
        head.push("fetched".into());
        head.push(format!("used/{}", v.line_size));
    }
    head.push(label.into());
    let mut body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![
                format!("{:.1}", r.percent),
                r.reads.to_string(),
                r.writes.to_string(),
            ];
            row.extend(pick(&r.costs, cols));
            if with_use {
                row.extend(line_use_cells(r.line_use));
            }
            row.push(r.label.clone());
            row
        })
        .collect();
    let mut total = vec![String::new(), String::new(), String::new()];
    total.extend(pick(&v.typed_totals, cols));
    if with_use {
        total.extend(line_use_cells(v.typed_line_use));
    }
    total.push("TOTAL of the typed instructions".into());
    body.push(total);
    let mut s = Table { head, rows: body }.render();
    if matched > rows.len() {
        let _ = writeln!(s, "({} of {matched} rows shown)", rows.len());
    }
    s
}

/// The `fetched` and `used/64` cells of a row's line utilisation: lines
/// its misses brought into the first data level, and the average bytes of
/// each used before it left (`-` without lines).
fn line_use_cells(u: Option<crate::data::LineUse>) -> [String; 2] {
    match u {
        Some(u) if u.lines_fetched > 0 => [
            u.lines_fetched.to_string(),
            format!("{:.1}", u.used_per_line),
        ],
        Some(_) => ["0".into(), "-".into()],
        None => [String::new(), String::new()],
    }
}

/// `report --view data`: the coverage, then the types and the fields.
pub fn data(v: &crate::data::DataView, cols: &[usize]) -> String {
    let mut s = data_coverage(v);
    let _ = writeln!(s, "\ntypes");
    s.push_str(&data_table(v, &v.types, v.types_matched, cols, "type"));
    let _ = writeln!(s, "\nfields");
    s.push_str(&data_table(v, &v.fields, v.fields_matched, cols, "field"));
    if !v.variables.is_empty() {
        let _ = writeln!(
            s,
            "\nvariables (globals, and locals by the frame holding them, that instructions' operands name)"
        );
        s.push_str(&data_table(
            v,
            &v.variables,
            v.variables_matched,
            cols,
            "variable",
        ));
    }
    let _ = writeln!(
        s,
        "\n%{} is each row's share of the {} of every record shown (the other views' TOTAL row); a field's counts are its instructions' (as in --view flat --by instruction).\n\
         <padding>: bytes of no member; [straddles]: the operand spans more than the field.",
        v.sort, v.sort
    );
    match (v.total_line_use, v.untyped_line_use) {
        (Some(all), Some(un)) => {
            let _ = writeln!(
                s,
                "fetched: lines the row's misses brought into the first data level; used/{}: bytes of each used, on average, before it left (or the capture ended).\n\
                 line utilisation: {} lines fetched, {:.1} of {} bytes used each; by untyped instructions {} lines, {:.1} bytes each.",
                v.line_size,
                all.lines_fetched,
                all.used_per_line,
                v.line_size,
                un.lines_fetched,
                un.used_per_line
            );
        }
        _ => {
            let _ = writeln!(s, "{}.", v.line_use_note);
        }
    }
    match &v.objects {
        Some(o) => s.push_str(&objects(o)),
        None => {
            let _ = writeln!(s, "{}.", v.objects_note);
        }
    }
    s
}

/// The objects section of `report --view data`: allocation sites, then
/// the other objects (mappings), each ranked by misses.
pub fn objects(o: &crate::objects::ObjectsView) -> String {
    use crate::objects::ObjectRow;
    let mut s = String::new();
    let share = |n: u64| {
        if o.accesses == 0 {
            0.0
        } else {
            100.0 * n as f64 / o.accesses as f64
        }
    };
    let _ = writeln!(
        s,
        "\nobjects: {} data accesses, {:.1}% in heap blocks allocated in the capture{}; {} allocations and {} frees seen ({} allocator entry points observed), {} blocks live at the end",
        o.accesses,
        share(o.in_blocks),
        if o.in_mappings > 0 {
            format!(", {:.1}% in mappings made in it (outside blocks)", share(o.in_mappings))
        } else {
            String::new()
        },
        o.allocations,
        o.frees,
        o.allocators,
        o.live
    );
    if o.unknown_frees + o.unreturned + o.untracked > 0 {
        let _ = writeln!(
            s,
            "  not followed: {} frees of blocks allocated earlier, {} allocator calls not seen returning, {} allocations not tracked (table full)",
            o.unknown_frees, o.unreturned, o.untracked
        );
    }
    if o.not_per_slot > 0 {
        let _ = writeln!(
            s,
            "  {} accesses of stack frames not kept by slot (the capture's limit on slots, or more than 1 GiB below their frame's CFA): in their frames' rows, none of their locals'",
            o.not_per_slot
        );
    }
    // Coherence columns where any row sent an invalidation (a capture of
    // several simulated cores).
    let coherence = o.coherence && o.sites.iter().chain(&o.others).any(|r| r.invalidations > 0);
    let table = |rows: &[ObjectRow], sites: bool| -> String {
        let mut head: Vec<String> = Vec::new();
        if sites {
            head.extend(["blocks", "bytes"].map(String::from));
        }
        head.extend(["accesses", "reads", "writes"].map(String::from));
        head.extend(o.levels.iter().map(|l| format!("miss:{l}")));
        if coherence {
            head.extend(["invalidations", "false_sharing"].map(String::from));
        }
        if o.line_use {
            head.extend(["fetched", "used/line", "of"].map(String::from));
        }
        head.push(if sites { "allocation site" } else { "object" }.to_string());
        let mut lines = vec![head];
        for r in rows {
            let mut l: Vec<String> = Vec::new();
            if sites {
                l.push(r.blocks.to_string());
                l.push(r.bytes.to_string());
            }
            l.extend([r.accesses, r.reads, r.writes].map(|n| n.to_string()));
            l.extend(r.misses.iter().map(u64::to_string));
            if coherence {
                l.extend([r.invalidations, r.false_sharing].map(|n| n.to_string()));
            }
            if o.line_use {
                l.push(r.lines_fetched.to_string());
                l.push(if r.lines_fetched == 0 {
                    "-".to_string()
                } else {
                    format!("{:.1}", r.bytes_used as f64 / r.lines_fetched as f64)
                });
                l.push(if r.accesses == 0 {
                    "-".to_string()
                } else {
                    format!(
                        "{:.0}%",
                        100.0 * r.line_use_accesses as f64 / r.accesses as f64
                    )
                });
            }
            l.push(if sites {
                let mut label = r.label.clone();
                for f in r.frames.iter().skip(r.user_frame + 1).take(2) {
                    label.push_str(" <- ");
                    label.push_str(f);
                }
                label
            } else {
                format!("{}: {}", r.kind, r.label)
            });
            lines.push(l);
        }
        let n = lines[0].len();
        let widths: Vec<usize> = (0..n - 1)
            .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
            .collect();
        let mut t = String::new();
        for l in &lines {
            for (c, w) in widths.iter().enumerate() {
                let _ = write!(t, "{:>w$}  ", l[c], w = *w);
            }
            let _ = writeln!(t, "{}", l[n - 1]);
        }
        t
    };
    let _ = writeln!(
        s,
        "\nallocation sites (heap blocks by the call stack that allocated them; mmap and mremap: the mappings made there, their accesses outside every block)"
    );
    if o.sites.is_empty() {
        let _ = writeln!(s, "  (no allocation seen in the capture)");
    } else {
        s.push_str(&table(&o.sites, true));
        s.push_str(&site_types(o));
    }
    let _ = writeln!(
        s,
        "\nother objects (the modules' globals, and the rest by the mapping at the capture's start)"
    );
    s.push_str(&table(&o.others, false));
    if o.types_note.is_empty() && o.others.iter().any(|r| !r.fields.is_empty()) {
        let _ = writeln!(
            s,
            "\nother object types (each global's and mapping's accesses by the type and field, or global, of the instruction that made them; not the stacks')"
        );
        s.push_str(&row_fields(o, &o.others, false));
    }
    let _ = writeln!(
        s,
        "an access counts once, in the object holding its first byte, at the level that served it (as the code views count it); miss:X = accesses served below X."
    );
    if o.line_use {
        let _ = writeln!(
            s,
            "fetched, used/line: first-level data lines the object's accesses fetched and the bytes of each used while it stayed, over the instructions whose every access is the object's; of: those instructions' share of its accesses (a stack frame's are not kept per instruction)."
        );
    }
    s
}

/// How many fields the text lists under each allocation site's type (the
/// JSON has them all).
pub const SITE_FIELDS_SHOWN: usize = 8;

/// Each allocation site's type and its fields' accesses, in the sites'
/// order (`report --view data`).
fn site_types(o: &crate::objects::ObjectsView) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nallocation site types (each site's accesses by the type and field of the instruction that made them)"
    );
    if !o.types_note.is_empty() {
        let _ = writeln!(s, "  {}.", o.types_note);
        return s;
    }
    if o.not_per_instruction > 0 {
        let _ = writeln!(
            s,
            "  {} accesses of sites and mappings not kept per instruction (table full): untyped below",
            o.not_per_instruction
        );
    }
    s.push_str(&row_fields(o, &o.sites, true));
    s
}

/// Each row's type and its fields' accesses (`sites`: allocation sites,
/// named with their blocks; else mappings, whose rows without typed
/// accesses are left out).
fn row_fields(
    o: &crate::objects::ObjectsView,
    rows: &[crate::objects::ObjectRow],
    sites: bool,
) -> String {
    let mut s = String::new();
    for r in rows {
        if !sites && r.fields.is_empty() {
            continue;
        }
        let ty = match (r.ty.is_empty(), sites) {
            (false, _) => format!("type {}", r.ty),
            (true, true) => "type untyped".to_string(),
            (true, false) => "no one type".to_string(),
        };
        let name = if sites {
            format!(
                "{} [{} block{}]",
                r.label,
                r.blocks,
                if r.blocks == 1 { "" } else { "s" }
            )
        } else {
            format!("{}: {}", r.kind, r.label)
        };
        if r.kind == "stack frame" {
            // Its fields are the frame's own words, not a type's.
            let _ = writeln!(s, "  {name}: {} accesses, by word", r.accesses);
        } else {
            let _ = writeln!(
                s,
                "  {name}: {ty} ({:.1}% of {} accesses typed)",
                crate::data::share(r.typed_accesses, r.accesses),
                r.accesses
            );
        }
        if r.fields.is_empty() {
            continue;
        }
        let mut lines: Vec<Vec<String>> = Vec::new();
        let mut head: Vec<String> = ["accesses", "reads", "writes"].map(String::from).into();
        head.extend(o.levels.iter().map(|l| format!("miss:{l}")));
        head.push("field".to_string());
        lines.push(head);
        for f in r.fields.iter().take(SITE_FIELDS_SHOWN) {
            let mut l: Vec<String> = [f.accesses, f.reads, f.writes]
                .map(|n| n.to_string())
                .into();
            l.extend(f.misses.iter().map(u64::to_string));
            l.push(f.field.clone());
            lines.push(l);
        }
        let n = lines[0].len();
        let widths: Vec<usize> = (0..n - 1)
            .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
            .collect();
        for l in &lines {
            s.push_str("      ");
            for (c, w) in widths.iter().enumerate() {
                let _ = write!(s, "{:>w$}  ", l[c], w = *w);
            }
            let _ = writeln!(s, "{}", l[n - 1]);
        }
        if r.fields.len() > SITE_FIELDS_SHOWN {
            let _ = writeln!(
                s,
                "      ({} more fields in --json)",
                r.fields.len() - SITE_FIELDS_SHOWN
            );
        }
    }
    s
}

/// How many source lines the layout text lists under each member (the
/// JSON has them all): enough to name the loop responsible while a
/// member stays a few lines long.
pub const LAYOUT_CODE_SHOWN: usize = 3;

/// `report --view layout TYPE`: the type as pahole prints it, with each
/// member's reads, writes and misses per level, the source lines that touch
/// it, then its cache lines with their flags.
pub fn layout(v: &crate::data::LayoutView) -> String {
    use crate::data::LayoutMember;
    let nl = v.levels.len();
    let mut head = vec!["reads".to_string(), "writes".to_string()];
    head.extend(v.levels.iter().map(|l| format!("miss:{l}")));
    head.push("layout".into());
    let blank = || vec![String::new(); 2 + nl];
    let counts = |m: &LayoutMember| -> Vec<String> {
        if m.reads + m.writes == 0 {
            return vec![".".to_string(); 2 + nl];
        }
        let mut r = vec![m.reads.to_string(), m.writes.to_string()];
        r.extend(m.misses.iter().map(u64::to_string));
        r
    };
    let decl = |m: &LayoutMember| -> String {
        let name = if m.base {
            "<ancestor>".to_string()
        } else if m.bit_size > 0 {
            format!("{}:{}", m.name, m.bit_size)
        } else {
            m.name.clone()
        };
        format!("{} {name};", m.type_name)
    };
    let width = v
        .members
        .iter()
        .map(|m| 4 * m.depth as usize + decl(m).chars().count())
        .max()
        .unwrap_or(0)
        .max(24);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let text = |rows: &mut Vec<Vec<String>>, c: Vec<String>, t: String| {
        let mut r = c;
        r.push(t);
        rows.push(r);
    };
    let kw = v.kind.keyword();
    text(
        &mut rows,
        blank(),
        format!(
            "{}{} {{{}",
            if kw.is_empty() { "" } else { kw },
            if kw.is_empty() {
                v.name.clone()
            } else {
                format!(" {}", v.name)
            },
            if v.decl.is_empty() {
                String::new()
            } else {
                format!("  /* {} */", v.decl)
            }
        ),
    );
    let line = v.line_size.max(1);
    let mut last_line = 0u64;
    let (mut holes, mut hole_bytes, mut sum_members, mut n_top) = (0u64, 0u64, 0u64, 0u64);
    // A hole (or a boundary crossed inside a member) is said after the
    // member and its nested members, before the next one.
    let mut after: Vec<String> = Vec::new();
    for m in &v.members {
        let indent = "    ".repeat(m.depth as usize + 1);
        if m.depth == 0 {
            for a in after.drain(..) {
                text(&mut rows, blank(), a);
            }
            let k = m.offset / line;
            if k > last_line {
                let ago = m.offset - k * line;
                text(
                    &mut rows,
                    blank(),
                    if ago == 0 {
                        format!(
                            "{indent}/* --- cacheline {k} boundary ({} bytes) --- */",
                            k * line
                        )
                    } else {
                        format!(
                            "{indent}/* --- cacheline {k} boundary ({} bytes) was {ago} bytes ago --- */",
                            k * line
                        )
                    },
                );
                last_line = k;
            }
        }
        let pos = if m.bit_size > 0 {
            format!("/* {:>5}:{:>2} {:>5} */", m.offset, m.bit_offset, m.size)
        } else {
            format!("/* {:>5} {:>5} */", m.offset, m.size)
        };
        let d = decl(m);
        text(
            &mut rows,
            counts(m),
            format!(
                "{indent}{d:<w$} {pos}",
                w = width.saturating_sub(4 * m.depth as usize)
            ),
        );
        for c in m.code.iter().take(LAYOUT_CODE_SHOWN) {
            let at = match &c.file {
                Some(f) => format!("{} {}:{}", c.function, crate::views::short_path(f), c.line),
                None => c.function.clone(),
            };
            text(
                &mut rows,
                blank(),
                format!(
                    "{indent}    /* {at}: {} accesses, {} {} misses */",
                    c.accesses,
                    c.misses,
                    v.levels.first().map(String::as_str).unwrap_or("")
                ),
            );
        }
        if m.code.len() > LAYOUT_CODE_SHOWN {
            text(
                &mut rows,
                blank(),
                format!(
                    "{indent}    /* and {} more source lines (--json lists them) */",
                    m.code.len() - LAYOUT_CODE_SHOWN
                ),
            );
        }
        if m.depth == 0 {
            n_top += 1;
            sum_members += m.size;
            let end = m.offset + m.size;
            let k = end.saturating_sub(1) / line;
            if k > last_line && m.size > 0 {
                after.push(format!(
                    "{indent}/* --- cacheline {k} boundary ({} bytes) was {} bytes ago --- */",
                    k * line,
                    end - k * line
                ));
                last_line = k;
            }
            if m.hole_after > 0 {
                holes += 1;
                hole_bytes += m.hole_after;
                after.push(format!(
                    "{indent}/* XXX {} bytes hole, try to pack */",
                    m.hole_after
                ));
            }
        }
    }
    for a in after {
        text(&mut rows, blank(), a);
    }
    let ind = "    ";
    if v.other.reads + v.other.writes > 0 {
        text(
            &mut rows,
            counts(&v.other),
            format!("{ind}/* accesses naming no member: padding, the whole object */"),
        );
    }
    text(
        &mut rows,
        blank(),
        format!(
            "{ind}/* size: {}, cachelines: {}, members: {n_top} */",
            v.size,
            v.size.div_ceil(line)
        ),
    );
    if holes > 0 {
        text(
            &mut rows,
            blank(),
            format!(
                "{ind}/* sum members: {sum_members}, holes: {holes}, sum holes: {hole_bytes} */"
            ),
        );
    }
    if v.padding > 0 {
        text(
            &mut rows,
            blank(),
            format!("{ind}/* padding: {} */", v.padding),
        );
    }
    text(&mut rows, counts(&v.total), "};".into());
    let mut s = format!(
        "type {}: {} bytes; cache lines of {} bytes ({}), the object assumed to start on a line boundary\n\n",
        v.name, v.size, v.line_size, v.line_size_from
    );
    s.push_str(&Table { head, rows }.render());
    // The cache lines.
    let mut head = vec![
        "line".to_string(),
        "bytes".into(),
        "reads".into(),
        "writes".into(),
    ];
    head.extend(v.levels.iter().map(|l| format!("miss:{l}")));
    let with_use = v.total.line_use.is_some();
    if with_use {
        head.push("fetched".into());
        head.push(format!("used/{}", v.line_size));
    }
    head.push("members and flags".into());
    let mut rows = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for l in &v.lines {
        let mut r = vec![
            l.index.to_string(),
            format!("{}-{}", l.start, l.end.saturating_sub(1)),
            l.reads.to_string(),
            l.writes.to_string(),
        ];
        r.extend(l.misses.iter().map(u64::to_string));
        if with_use {
            r.extend(line_use_cells(l.line_use));
        }
        let mut t = l.members.join(", ");
        if let Some(h) = &l.hot {
            let _ = write!(t, "  HOT FIELD IN A COLD LINE: {}", h.field);
            notes.push(format!(
                "line {}: {} gets {:.1}% of the line's {} accesses and misses {} on {} of its {}; it uses {} of the line's {} bytes",
                l.index,
                h.field,
                h.share,
                l.reads + l.writes,
                v.levels.first().map(String::as_str).unwrap_or("the first level"),
                h.misses,
                h.accesses,
                h.bytes,
                l.end - l.start
            ));
        }
        if !l.false_sharing.is_empty() {
            let mut tids: Vec<u32> = l.false_sharing.iter().map(|f| f.tid).collect();
            tids.dedup();
            let _ = write!(
                t,
                "  FALSE SHARING? threads {}",
                tids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let who: Vec<String> = l
                .false_sharing
                .iter()
                .map(|f| {
                    format!(
                        "thread {} ({}) {} {}r/{}w",
                        f.tid, f.thread, f.field, f.reads, f.writes
                    )
                })
                .collect();
            notes.push(format!("line {}: {}", l.index, who.join("; ")));
        }
        r.push(t);
        rows.push(r);
    }
    let _ = writeln!(s);
    s.push_str(&Table { head, rows }.render());
    for n in &notes {
        let _ = writeln!(s, "{n}");
    }
    let _ = writeln!(
        s,
        "\nCounts are the typed instructions' (an access counts to the line holding its first byte).\n\
         HOT FIELD IN A COLD LINE: one field gets at least {:.0}% of the line's accesses, misses {} on at least {:.0}% of them, \
         and covers less than half of the line's bytes: the rest of the line is fetched for it.\n\
         FALSE SHARING?: one thread writes a field of the line and another thread accesses another field; \
         typing is per instruction, so whether the threads touch the same object is not known.",
        crate::data::HOT_SHARE,
        v.levels.first().map(String::as_str).unwrap_or("the first level"),
        crate::data::HOT_MISS_RATE
    );
    if with_use {
        let _ = writeln!(
            s,
            "fetched: lines the misses of the line's operands brought into the first data level; used/{}: bytes of each used, on average, \
             before it left (any byte of the fetched line: other fields, or another object where objects do not start on a line boundary).",
            v.line_size
        );
    } else {
        let _ = writeln!(s, "{}.", v.line_use_note);
    }
    s
}
