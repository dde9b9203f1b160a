//! `coldcache diff`: two profiles compared per function or per source line.
//!
//! Rows are matched by function name, module and source file (or by file
//! and line), so two builds of the same program compare even though their
//! addresses differ; the program's own executable matches across builds
//! whatever its file is called ([`module_key`]). Columns are matched by name: two dumps simulated with different
//! hierarchies compare on the columns they share.

use crate::profile::{add_row, Profile};
use crate::views::{fn_label, short_path, values, By, ColumnHead, Key, Num};
use crate::AnalysisError;
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// A comparison query.
#[derive(Clone, Debug, Default)]
pub struct DiffQuery {
    /// Per function or per line (instructions are not comparable).
    pub by: By,
    /// Column whose change orders the rows (default `mem`).
    pub sort: Option<String>,
    /// Keep rows whose label matches.
    pub filter: Option<String>,
    /// Keep the first N rows.
    pub limit: Option<usize>,
}

/// One compared row.
#[derive(Clone, Debug, Serialize)]
pub struct DiffRow {
    /// Function or line.
    pub label: String,
    /// Values before (self costs), per column; zeros when absent.
    pub before: Vec<Num>,
    /// Values after.
    pub after: Vec<Num>,
    /// Change of the sort column (after − before).
    pub change: f64,
    /// Relative change of the sort column in percent (`None` from zero).
    pub relative: Option<f64>,
    /// `changed`, `new` (only after) or `gone` (only before).
    pub status: &'static str,
}

/// The comparison.
#[derive(Clone, Debug, Serialize)]
pub struct DiffView {
    /// Columns both dumps have.
    pub columns: Vec<ColumnHead>,
    /// Row granularity.
    pub by: By,
    /// Sort column.
    pub sort: String,
    /// Totals before.
    pub before_totals: Vec<Num>,
    /// Totals after.
    pub after_totals: Vec<Num>,
    /// Rows matching the filter, before the limit.
    pub matched: usize,
    /// Rows by decreasing absolute change of the sort column.
    pub rows: Vec<DiffRow>,
}

/// Rows of one side: identity → (label, costs). Functions are identified by
/// name, module (the program's own executable counts as one module whatever
/// its file is called, so two builds compare) and source file; lines by full
/// path and line.
fn rows_of(p: &Profile, by: By) -> BTreeMap<String, (String, Vec<u64>)> {
    let nc = p.counters();
    let mut m: BTreeMap<String, (String, Vec<u64>)> = BTreeMap::new();
    let fn_identity = |f: u32| function_identity(p, f);
    match by {
        By::Function | By::Instruction => {
            for f in 0..p.functions().len() as u32 {
                let s = p.fn_self(f);
                if s.iter().all(|&v| v == 0) {
                    continue;
                }
                let info = p.function(f);
                let label = if info.module.is_empty() || !info.resolved {
                    fn_label(p, f)
                } else {
                    format!("{} ({})", info.name, info.module)
                };
                let e = m
                    .entry(fn_identity(f))
                    .or_insert_with(|| (label, vec![0; nc]));
                add_row(&mut e.1, s);
            }
        }
        By::Line => {
            // The flat profile's per-line table, summed once per profile.
            let table = p.flat_table(By::Line).expect("lines have a table");
            for (key, v) in table.rows(nc) {
                let Key::Line(f, file, line) = key else {
                    continue;
                };
                let (id, label) = match p.file(file) {
                    Some(path) => (
                        format!("{path}:{line}"),
                        format!("{}:{line}", short_path(path)),
                    ),
                    None => (
                        format!("{}\u{0}noline", fn_identity(f)),
                        format!("{} (no line info)", fn_label(p, f)),
                    ),
                };
                let e = m.entry(id).or_insert_with(|| (label, vec![0; nc]));
                add_row(&mut e.1, v);
            }
        }
    }
    m
}

/// The module a function is compared under: its file name, except that the
/// program's own executable is `<program>` (its name may differ between the
/// two builds compared).
pub fn module_key(p: &Profile, f: u32) -> String {
    let info = p.function(f);
    let program = p
        .dump()
        .meta
        .program
        .first()
        .map(|s| s.rsplit('/').next().unwrap_or(s));
    if !info.module.is_empty() && program == Some(info.module.as_str()) {
        "<program>".into()
    } else {
        info.module.clone()
    }
}

/// What makes a function the same function in another profile: its name,
/// its [`module_key`] and its source file.
pub fn function_identity(p: &Profile, f: u32) -> String {
    let info = p.function(f);
    format!(
        "{}\u{0}{}\u{0}{}",
        info.name,
        module_key(p, f),
        info.file.as_deref().unwrap_or("")
    )
}

/// Compares `before` with `after`.
pub fn diff(before: &Profile, after: &Profile, q: &DiffQuery) -> Result<DiffView, AnalysisError> {
    // Columns both have, in `after`'s order.
    let common: Vec<(usize, usize)> = after
        .columns()
        .iter()
        .enumerate()
        .filter_map(|(ai, c)| {
            before
                .columns()
                .iter()
                .position(|b| b.name == c.name)
                .map(|bi| (bi, ai))
        })
        .collect();
    let sort = q
        .sort
        .clone()
        .unwrap_or_else(|| crate::views::default_sort(after));
    let sc = common
        .iter()
        .position(|&(_, ai)| after.columns()[ai].name == sort)
        .ok_or_else(|| AnalysisError::NoSuchColumn {
            name: sort.clone(),
            known: common
                .iter()
                .map(|&(_, ai)| after.columns()[ai].name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let pick = |vals: Vec<Num>, before_side: bool| -> Vec<Num> {
        common
            .iter()
            .map(|&(bi, ai)| vals[if before_side { bi } else { ai }])
            .collect()
    };
    let re = q.filter.as_deref().map(crate::regex).transpose()?;
    let b = rows_of(before, q.by);
    let a = rows_of(after, q.by);
    let zero_b = vec![0u64; before.counters()];
    let zero_a = vec![0u64; after.counters()];
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
    keys.sort();
    keys.dedup();
    // Labels shown: the after side's (else the before side's); when two
    // rows would read the same (same name and module, different source
    // files), the file is added.
    let label_of = |k: &String| -> String {
        a.get(k)
            .or_else(|| b.get(k))
            .map(|e| e.0.clone())
            .unwrap_or_default()
    };
    let mut seen_labels: HashMap<String, usize> = HashMap::default();
    for k in &keys {
        *seen_labels.entry(label_of(k)).or_insert(0) += 1;
    }
    let mut rows = Vec::new();
    for k in keys {
        let mut label = label_of(k);
        if seen_labels.get(&label).copied().unwrap_or(0) > 1 {
            if let Some(file) = k.split('\u{0}').nth(2).filter(|f| !f.is_empty()) {
                label = format!("{label} [{}]", short_path(file));
            } else if q.by == By::Line {
                label = k.clone();
            }
        }
        if re.as_ref().is_some_and(|r| !r.is_match(&label)) {
            continue;
        }
        let bv = pick(
            values(before.columns(), b.get(k).map(|e| &e.1).unwrap_or(&zero_b)),
            true,
        );
        let av = pick(
            values(after.columns(), a.get(k).map(|e| &e.1).unwrap_or(&zero_a)),
            false,
        );
        let (x, y) = (bv[sc].as_f64(), av[sc].as_f64());
        let status = match (b.contains_key(k), a.contains_key(k)) {
            (true, false) => "gone",
            (false, true) => "new",
            _ => "changed",
        };
        rows.push(DiffRow {
            label,
            change: y - x,
            relative: (x != 0.0).then(|| ((y - x) / x * 1000.0).round() / 10.0),
            before: bv,
            after: av,
            status,
        });
    }
    rows.sort_by(|p, q| {
        q.change
            .abs()
            .total_cmp(&p.change.abs())
            .then_with(|| p.label.cmp(&q.label))
    });
    let matched = rows.len();
    if let Some(n) = q.limit {
        rows.truncate(n);
    }
    Ok(DiffView {
        columns: common
            .iter()
            .map(|&(_, ai)| {
                let c = &after.columns()[ai];
                ColumnHead {
                    name: c.name.clone(),
                    description: c.description.clone(),
                }
            })
            .collect(),
        by: q.by,
        sort,
        before_totals: pick(values(before.columns(), before.totals()), true),
        after_totals: pick(values(after.columns(), after.totals()), false),
        matched,
        rows,
    })
}
