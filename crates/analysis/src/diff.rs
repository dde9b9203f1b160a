//! `coldcache diff`: two profiles compared per function or per source line,
//! or per data type or field (`DiffQuery::data`, from the dumps' `DATA`
//! sections: the flag moved to the hot line, its misses gone).
//!
//! Rows are matched by function name, module and source file (or by file
//! and line), so two builds of the same program compare even though their
//! addresses differ; the program's own executable matches across builds
//! whatever its file is called ([`module_key`]). Columns are matched by name: two dumps simulated with different
//! hierarchies compare on the columns they share, and the view says so
//! ([`DiffView::cache_mismatch`], from the configurations the dumps embed,
//! [`cache_differences`]): instruction counts compare, misses do not.

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
    /// Column whose change orders the rows (default: the "before" dump's
    /// default weight, `mem` when it reached memory; for objects the first
    /// level's misses).
    pub sort: Option<String>,
    /// Keep rows whose label matches.
    pub filter: Option<String>,
    /// Keep the first N rows.
    pub limit: Option<usize>,
    /// Compare per data type, field or object instead (`by` is then not
    /// used).
    pub data: Option<DataRows>,
}

/// What a data comparison's rows are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DataRows {
    /// Data types, by name.
    Type,
    /// Fields (`Type::member`), by label.
    Field,
    /// The data view's objects: allocation sites and mappings, matched by
    /// [`crate::objects::ObjectRow::identity`] (columns of their own:
    /// blocks, bytes, accesses, reads, writes, misses per level).
    Object,
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

impl DiffRow {
    /// The row of `label` from its values on each side, `sc` the sort
    /// column; `sides`: whether the row is in (before, after).
    fn new(
        label: String,
        before: Vec<Num>,
        after: Vec<Num>,
        sc: usize,
        sides: (bool, bool),
    ) -> Self {
        let (x, y) = (before[sc].as_f64(), after[sc].as_f64());
        DiffRow {
            label,
            change: y - x,
            relative: (x != 0.0).then(|| ((y - x) / x * 1000.0).round() / 10.0),
            before,
            after,
            status: match sides {
                (true, false) => "gone",
                (false, true) => "new",
                _ => "changed",
            },
        }
    }
}

/// Orders `rows` by decreasing absolute change (then label) and keeps the
/// first `limit`; returns how many there were.
fn rank(rows: &mut Vec<DiffRow>, limit: Option<usize>) -> usize {
    rows.sort_by(|p, q| {
        q.change
            .abs()
            .total_cmp(&p.change.abs())
            .then_with(|| p.label.cmp(&q.label))
    });
    let matched = rows.len();
    if let Some(n) = limit {
        rows.truncate(n);
    }
    matched
}

/// The comparison.
#[derive(Clone, Debug, Serialize)]
pub struct DiffView {
    /// Columns both dumps have.
    pub columns: Vec<ColumnHead>,
    /// Row granularity.
    pub by: By,
    /// Set when the rows are data types, fields or objects (then `by` is
    /// not used).
    pub data: Option<DataRows>,
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
    /// Set when the dumps were simulated with different caches: a
    /// sentence naming both and what differs (shown first).
    pub cache_mismatch: Option<String>,
    /// When either dump has a layout-noise band: per column (ratios left
    /// out), whether the totals' change is within layout noise
    /// ([`crate::band::noise`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout_noise: Option<Vec<crate::band::Noise>>,
}

/// The settings of a cache configuration as `coldcache_config_slim::to_toml`
/// writes it (the TOML each dump embeds), keyed by (section, key): the
/// top level is `""`, a `[[level]]` is its `name` (`L1d`), other tables
/// their header and index (`prefetcher 1`). The configuration's own `name`
/// is left out: two names for one configuration simulate the same.
fn settings(toml: &str) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    let mut section = String::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut in_level = false;
    for line in toml.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') {
            let head = line.trim_matches(|c| c == '[' || c == ']').to_string();
            let n = counts.entry(head.clone()).or_insert(0);
            *n += 1;
            in_level = head == "level";
            section = format!("{head} {n}");
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim().to_string(), v.trim().trim_matches('"').to_string());
        if in_level && k == "name" {
            // Rename the keys already read for this level.
            let old = std::mem::replace(&mut section, v);
            let moved: Vec<_> = out
                .keys()
                .filter(|(s, _): &&(String, String)| *s == old)
                .cloned()
                .collect();
            for key in moved {
                if let Some(val) = out.remove(&key) {
                    out.insert((section.clone(), key.1), val);
                }
            }
            continue;
        }
        if section.is_empty() && k == "name" {
            continue;
        }
        out.insert((section.clone(), k), v);
    }
    out
}

/// What differs between two cache configurations (the TOML dumps embed),
/// one item per setting (`L1d size 32K → 64K`, `L3 only after`); empty
/// when they simulate the same.
pub fn cache_differences(before: &str, after: &str) -> Vec<String> {
    let (b, a) = (settings(before), settings(after));
    let mut out = Vec::new();
    let sections = |m: &BTreeMap<(String, String), String>| -> Vec<String> {
        let mut v: Vec<String> = m.keys().map(|(s, _)| s.clone()).collect();
        v.dedup();
        v
    };
    let (sb, sa) = (sections(&b), sections(&a));
    for s in &sb {
        if !s.is_empty() && !sa.contains(s) {
            out.push(format!("{s} only before"));
        }
    }
    for s in &sa {
        if !s.is_empty() && !sb.contains(s) {
            out.push(format!("{s} only after"));
        }
    }
    for ((s, k), v) in &b {
        if !sa.contains(s) && !s.is_empty() {
            continue;
        }
        let w = a.get(&(s.clone(), k.clone()));
        if w != Some(v) {
            let name = if s.is_empty() {
                k.clone()
            } else {
                format!("{s} {k}")
            };
            out.push(format!(
                "{name} {v} → {}",
                w.map_or("unset", String::as_str)
            ));
        }
    }
    for ((s, k), w) in &a {
        if (sb.contains(s) || s.is_empty()) && !b.contains_key(&(s.clone(), k.clone())) {
            let name = if s.is_empty() {
                k.clone()
            } else {
                format!("{s} {k}")
            };
            out.push(format!("{name} unset → {w}"));
        }
    }
    out
}

/// The warning a diff of these two dumps starts with, if their caches
/// differ (`coldcache diff` prints it first; the web UI shows it above
/// two dumps' summaries and on the comparison).
pub fn cache_mismatch(before: &Profile, after: &Profile) -> Option<String> {
    let (b, a) = (&before.dump.meta, &after.dump.meta);
    let diffs = if b.cache_toml.trim().is_empty() || a.cache_toml.trim().is_empty() {
        // Without the configurations, the level names are all there is.
        if b.levels == a.levels && b.cache_name == a.cache_name {
            return None;
        }
        vec![format!(
            "levels {} → {}",
            b.levels.join("/"),
            a.levels.join("/")
        )]
    } else {
        cache_differences(&b.cache_toml, &a.cache_toml)
    };
    if diffs.is_empty() {
        return None;
    }
    const SHOWN: usize = 6;
    let more = diffs.len().saturating_sub(SHOWN);
    Some(format!(
        "the two dumps were simulated with different caches (before: {}, after: {}; {}{}): \
         instruction and access counts compare, misses do not",
        b.cache_name,
        a.cache_name,
        diffs[..diffs.len().min(SHOWN)].join(", "),
        if more > 0 {
            format!(", and {more} more")
        } else {
            String::new()
        }
    ))
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
            let table = crate::views::flat_table(p, By::Line).expect("lines have a table");
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
    if q.data == Some(DataRows::Object) {
        return diff_objects(before, after, q);
    }
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
    // By default the "before" dump's weight: a fix that sent every miss
    // away leaves "after" weighted by instructions, which would bury it.
    let sort = q.sort.clone().unwrap_or_else(|| {
        let b = crate::views::default_sort(before);
        if common.iter().any(|&(bi, _)| before.columns()[bi].name == b) {
            b
        } else {
            crate::views::default_sort(after)
        }
    });
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
    let (b, a) = match q.data {
        Some(d) => {
            let rows =
                |p: &Profile| -> Result<BTreeMap<String, (String, Vec<u64>)>, AnalysisError> {
                    Ok(crate::data::data_rows(p, d == DataRows::Field)?
                        .into_iter()
                        .map(|(k, v)| (k.clone(), (k, v)))
                        .collect())
                };
            (rows(before)?, rows(after)?)
        }
        None => (rows_of(before, q.by), rows_of(after, q.by)),
    };
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
        let sides = (b.contains_key(k), a.contains_key(k));
        rows.push(DiffRow::new(label, bv, av, sc, sides));
    }
    let matched = rank(&mut rows, q.limit);
    let names: Vec<String> = common
        .iter()
        .map(|&(_, ai)| after.columns()[ai].name.clone())
        .collect();
    Ok(DiffView {
        layout_noise: crate::band::noise(before, after, &names),
        cache_mismatch: cache_mismatch(before, after),
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
        data: q.data,
        sort,
        before_totals: pick(values(before.columns(), before.totals()), true),
        after_totals: pick(values(after.columns(), after.totals()), false),
        matched,
        rows,
    })
}

/// The columns of `diff --by object`: blocks and bytes (allocation sites),
/// accesses, reads, writes, then `miss:LEVEL` per level of `levels`, then
/// the coherence counts (`invalidations`, `false_sharing`), as the data
/// view's objects table heads them.
fn object_columns(levels: &[String]) -> Vec<ColumnHead> {
    let head = |name: &str, description: &str| ColumnHead {
        name: name.to_string(),
        description: description.to_string(),
    };
    let mut c = vec![
        head("blocks", "heap blocks allocated at the site in the capture"),
        head("bytes", "their bytes, summed"),
        head("accesses", "data accesses to the object"),
        head("reads", "of those, reads (and read-modify-writes)"),
        head("writes", "of those, writes"),
    ];
    c.extend(
        levels
            .iter()
            .map(|l| head(&format!("miss:{l}"), &format!("accesses that missed {l}"))),
    );
    c.push(head(
        "invalidations",
        "coherence invalidations the accesses sent to other cores",
    ));
    c.push(head(
        "false_sharing",
        "of those, false sharing: the other core had touched only other bytes of the line",
    ));
    c
}

/// The objects of one dump for `diff --by object`, by identity: (label,
/// values in [`object_columns`]' order), rows of one identity summed.
struct ObjectRows {
    rows: BTreeMap<String, (String, Vec<u64>)>,
    /// Whether the dump counts coherence per object
    /// ([`crate::objects::ObjectsView::coherence`]).
    coherence: bool,
}

/// [`ObjectRows`] of `p`, `None` when it has no object data.
fn object_rows(p: &Profile) -> Option<ObjectRows> {
    let v = crate::objects::objects(p, None)?;
    let coherence = v.coherence;
    let mut out: BTreeMap<String, (String, Vec<u64>, usize)> = BTreeMap::new();
    for (r, site) in v
        .sites
        .iter()
        .map(|r| (r, true))
        .chain(v.others.iter().map(|r| (r, false)))
    {
        let mut vals = vec![r.blocks, r.bytes, r.accesses, r.reads, r.writes];
        vals.extend(&r.misses);
        vals.extend([r.invalidations, r.false_sharing]);
        // A site as the objects table names it (two callers more); a
        // mapping by its identity (`module data: <program> rw-p`).
        let label = if site {
            let mut l = r.label.clone();
            for f in r.frames.iter().skip(r.user_frame + 1).take(2) {
                l.push_str(" <- ");
                l.push_str(f);
            }
            l
        } else {
            let mut parts = r.identity.split('\0');
            let kind = parts.next().unwrap_or_default();
            let rest: Vec<&str> = parts.collect();
            if rest.is_empty() {
                kind.to_string()
            } else {
                format!("{kind}: {}", rest.join(" "))
            }
        };
        let e = out
            .entry(r.identity.clone())
            .or_insert_with(|| (label, vec![0; vals.len()], 0));
        for (a, b) in e.1.iter_mut().zip(&vals) {
            *a += b;
        }
        e.2 += 1;
    }
    // Two identities may still read the same (sites whose stacks differ
    // further out): the second and later get `#2`, `#3` in identity order.
    let mut seen: HashMap<String, usize> = HashMap::default();
    let rows = out
        .into_iter()
        .map(|(k, (label, vals, n))| {
            let what = if k.starts_with("heap\0") {
                "sites"
            } else {
                "mappings"
            };
            let mut label = if n > 1 {
                format!("{label} ({n} {what})")
            } else {
                label
            };
            let count = seen.entry(label.clone()).or_insert(0);
            *count += 1;
            if *count > 1 {
                label = format!("{label} #{count}");
            }
            (k, (label, vals))
        })
        .collect();
    Some(ObjectRows { rows, coherence })
}

/// `diff --by object`: the data view's objects of both dumps matched by
/// identity (a site by its allocator and the functions of its stack, a
/// mapping by its kind and file: [`crate::objects::ObjectRow::identity`]),
/// with their own columns ([`object_columns`]; the levels both dumps
/// have), sorted by the absolute change of the sort column (default: the
/// first level's misses).
fn diff_objects(
    before: &Profile,
    after: &Profile,
    q: &DiffQuery,
) -> Result<DiffView, AnalysisError> {
    let (Some(b), Some(a)) = (object_rows(before), object_rows(after)) else {
        return Err(AnalysisError::NoObjects);
    };
    let (bl, al) = (&before.dump().meta.levels, &after.dump().meta.levels);
    // Columns both have: the five counts, the levels of the same name, and
    // the coherence counts where both dumps count them per object (index
    // in each side's values).
    let mut common: Vec<(usize, usize)> = (0..5).map(|i| (i, i)).collect();
    for (ai, l) in al.iter().enumerate() {
        if let Some(bi) = bl.iter().position(|x| x == l) {
            common.push((5 + bi, 5 + ai));
        }
    }
    if b.coherence && a.coherence {
        let (bc, ac) = (5 + bl.len(), 5 + al.len());
        common.extend([(bc, ac), (bc + 1, ac + 1)]);
    }
    let (b, a) = (b.rows, a.rows);
    let all = object_columns(al);
    let columns: Vec<ColumnHead> = common.iter().map(|&(_, ai)| all[ai].clone()).collect();
    let sort = match &q.sort {
        Some(s) => s.clone(),
        // The first level's misses, else accesses.
        None => columns
            .iter()
            .find(|c| c.name.starts_with("miss:"))
            .unwrap_or(&columns[2])
            .name
            .clone(),
    };
    let sc =
        columns
            .iter()
            .position(|c| c.name == sort)
            .ok_or_else(|| AnalysisError::NoSuchColumn {
                name: sort.clone(),
                known: columns
                    .iter()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
    let pick = |vals: Option<&Vec<u64>>, before_side: bool| -> Vec<u64> {
        common
            .iter()
            .map(|&(bi, ai)| vals.map_or(0, |v| v[if before_side { bi } else { ai }]))
            .collect()
    };
    let nums = |v: Vec<u64>| v.into_iter().map(Num::Int).collect::<Vec<_>>();
    let re = q.filter.as_deref().map(crate::regex).transpose()?;
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut rows = Vec::new();
    let mut totals = (vec![0u64; common.len()], vec![0u64; common.len()]);
    for k in keys {
        let label = a
            .get(k)
            .or_else(|| b.get(k))
            .map(|e| e.0.clone())
            .unwrap_or_default();
        let (bv, av) = (
            pick(b.get(k).map(|e| &e.1), true),
            pick(a.get(k).map(|e| &e.1), false),
        );
        for (t, v) in totals.0.iter_mut().zip(&bv) {
            *t += v;
        }
        for (t, v) in totals.1.iter_mut().zip(&av) {
            *t += v;
        }
        if re.as_ref().is_some_and(|r| !r.is_match(&label)) {
            continue;
        }
        let sides = (b.contains_key(k), a.contains_key(k));
        rows.push(DiffRow::new(label, nums(bv), nums(av), sc, sides));
    }
    let matched = rank(&mut rows, q.limit);
    Ok(DiffView {
        layout_noise: None,
        cache_mismatch: cache_mismatch(before, after),
        columns,
        by: q.by,
        data: q.data,
        sort,
        before_totals: nums(totals.0),
        after_totals: nums(totals.1),
        matched,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::cache_differences;

    const BASE: &str = "# coldcache cache configuration\nname = \"jaguar\"\ncores = 8\n\n\
        [[level]]\nname = \"L1\"\nlevel = 1\nsize = \"32K\"\nassoc = 8\n\n\
        [[level]]\nname = \"L2\"\nlevel = 2\nsize = \"2M\"\nassoc = 16\n";

    #[test]
    fn cache_differences_name_each_setting_that_differs() {
        // Another name for the same configuration simulates the same.
        let renamed = BASE.replace("name = \"jaguar\"", "name = \"mine\"");
        assert!(cache_differences(BASE, &renamed).is_empty());
        let bigger = BASE.replace("size = \"32K\"", "size = \"64K\"");
        assert_eq!(cache_differences(BASE, &bigger), ["L1 size 32K → 64K"]);
        let more = format!(
            "{}\n[[level]]\nname = \"L3\"\nlevel = 3\nsize = \"8M\"\n",
            BASE.replace("cores = 8", "cores = 4")
        );
        assert_eq!(
            cache_differences(BASE, &more),
            ["L3 only after", "cores 8 → 4"]
        );
    }
}
