//! Text rendering of the views: aligned tables for a terminal.
//!
//! Every renderer takes the view (the same value `--json` prints) and the
//! indices of the columns to show, so text and JSON never disagree.

use crate::diff::DiffView;
use crate::profile::Profile;
use crate::views::{
    AnnotateView, AsmView, ColumnHead, FlatView, Num, ThreadsView, TreeKind, TreeView,
};
use crate::AnalysisError;
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
    ] {
        if let Some(f) = short {
            let _ = writeln!(s, "{label:<10} {}", f.text);
            let _ = writeln!(s, "{:<10} {}", "", f.advice);
        }
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
    head.push(
        match v.kind {
            TreeKind::TopDown => "call tree (callees below callers)",
            TreeKind::BottomUp => "function, then its callers below",
            TreeKind::Callers => "function, then the callers its costs came through",
        }
        .to_string(),
    );
    let sc = v.columns.iter().position(|c| c.name == v.sort).unwrap_or(0);
    let rows = v
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![format!("{:.1}", r.percent)];
            row.extend(pick(&r.incl, cols));
            row.push(num(r.self_[sc]));
            row.push(format!(
                "{}{}",
                "  ".repeat(r.depth.saturating_sub(1) as usize),
                r.name
            ));
            row
        })
        .collect();
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
    head.push(match v.by {
        crate::views::By::Line => "line".into(),
        _ => "function".into(),
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
    s
}
