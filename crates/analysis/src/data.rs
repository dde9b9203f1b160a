//! The data views: which types and fields a capture's memory accesses
//! touched (`report --view data`), and one type's layout with the accesses
//! of each field and cache line (`report --view layout TYPE`).
//!
//! Pure, from the dump alone: the dump's `DATA` section
//! ([`coldcache_dump::DataTypes`], filled at resolve time from DWARF) says
//! per instruction which type, offset and member path its memory operand
//! touches. Every view here adds up the counter rows of those instructions'
//! records (kept records only, as every other view), so a field's figures
//! are the sum of its instructions' figures in the flat view, by
//! construction. Rows are ranked with the same columns, sort column and
//! tie-breaking as the flat view ([`crate::columns`], [`crate::views`]).
//!
//! Typing is static, per instruction: a field's counts say which field the
//! instructions touched, not which object; two threads touching one field
//! of one type may touch different objects. The flags of the layout view
//! ([`HOT_SHARE`], false sharing) are stated with that caveat.

use crate::profile::{add_row, Profile};
use crate::views::{column_index, default_sort, heads, values, ColumnHead, Num};
use crate::AnalysisError;
use coldcache_dump::data::{DataType, DataTypes, TypeKind, TypedAccess, Via, NO_TYPE};
use coldcache_dump::{CounterLayout, Dump, Side};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

/// The raw counter that breaks ties: `instructions`, as in the flat view.
const FIRST: usize = CounterLayout::INSTRUCTIONS;

/// How many of a dump's data accesses got a type, a field, or nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// Data accesses (reads and writes, every level) of the records
    /// counted.
    pub accesses: u64,
    /// Of which by instructions with a typed memory operand.
    pub typed: u64,
    /// Of which the operand names a field (a member path), not padding,
    /// a whole object or a scalar.
    pub with_field: u64,
    /// Data accesses by instructions the resolver could not type.
    pub untyped: u64,
    /// Typed accesses learned through a register holding a pointer
    /// variable ([`Via::Register`]).
    pub via_register: u64,
    /// Typed accesses inside a global or static variable.
    pub via_global: u64,
    /// Typed accesses to a local variable in the stack frame.
    pub via_stack: u64,
    /// Distinct instructions with data accesses.
    pub instructions: u64,
    /// Of which typed.
    pub typed_instructions: u64,
}

/// `part` as a percentage of `whole` (0 when `whole` is 0).
pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

impl Coverage {
    /// One line: `75.0% of 40000 data accesses typed, 50.0% with a field`.
    pub fn text(&self) -> String {
        format!(
            "{:.1}% of {} data accesses typed, {:.1}% with a field ({} of {} instructions with data accesses typed)",
            share(self.typed, self.accesses),
            self.accesses,
            share(self.with_field, self.accesses),
            self.typed_instructions,
            self.instructions
        )
    }
}

/// Reads and writes of a raw counter row (every level), by `layout`.
fn reads_writes(l: CounterLayout, row: &[u64]) -> (u64, u64) {
    let sum = |side| {
        l.served_from(side, 1)
            .map(|i| row.get(i).copied().unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    };
    (sum(Side::Read), sum(Side::Write))
}

/// Data misses of each level of a raw counter row, nearest level first.
fn misses(l: CounterLayout, row: &[u64]) -> Vec<u64> {
    (0..l.levels())
        .map(|k| {
            l.served_from(Side::Read, k + 2)
                .chain(l.served_from(Side::Write, k + 2))
                .map(|i| row.get(i).copied().unwrap_or(0))
                .fold(0u64, u64::saturating_add)
        })
        .collect()
}

/// Line utilisation of a row (issue 32): the lines its demand misses
/// brought into the first data level and the distinct bytes of them the
/// program touched while they stayed there (`docs/data-view.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LineUse {
    /// Lines fetched into the first data level by the row's misses.
    pub lines_fetched: u64,
    /// Bytes of those lines used before they left, summed.
    pub bytes_used: u64,
    /// `bytes_used / lines_fetched` (0 without lines).
    pub used_per_line: f64,
}

impl LineUse {
    fn of(fetched: u64, used: u64) -> LineUse {
        LineUse {
            lines_fetched: fetched,
            bytes_used: used,
            used_per_line: if fetched == 0 {
                0.0
            } else {
                ((used as f64 / fetched as f64) * 100.0).round() / 100.0
            },
        }
    }
}

/// The line utilisation of a raw counter row; `None` when the layout has
/// no such counters (a dump from before it was measured).
pub fn line_use(l: CounterLayout, row: &[u64]) -> Option<LineUse> {
    let f = row.get(l.lines_fetched()?).copied().unwrap_or(0);
    let u = row.get(l.bytes_used()?).copied().unwrap_or(0);
    Some(LineUse::of(f, u))
}

/// Why a dump shows no line utilisation (empty when it has it).
pub fn line_use_note(l: CounterLayout) -> String {
    if l.has_line_use() {
        String::new()
    } else {
        "this dump has no line utilisation data (record with --line-use to measure it)".to_string()
    }
}

/// Whether an access names a field: a member path (not padding, a whole
/// object or a scalar).
fn has_field(a: &TypedAccess) -> bool {
    !a.path.is_empty()
}

/// The typed access of each record's instruction, looked up once per run
/// of equal addresses.
struct Lookup<'a> {
    data: &'a DataTypes,
    last: Option<(u64, Option<&'a TypedAccess>)>,
}

impl<'a> Lookup<'a> {
    fn get(&mut self, ip: u64) -> Option<&'a TypedAccess> {
        if let Some((a, t)) = self.last {
            if a == ip {
                return t;
            }
        }
        let t = self.data.access(ip);
        self.last = Some((ip, t));
        t
    }
}

/// The coverage of the records of `dump` that `kept` keeps; `None` when the
/// dump has no data types or not coldcache's counter layout.
pub fn coverage_of(dump: &Dump, kept: &dyn Fn(usize) -> bool) -> Option<Coverage> {
    let data = dump.data.as_ref()?;
    let l = dump.layout()?;
    let mut c = Coverage::default();
    let mut look = Lookup { data, last: None };
    let mut seen: HashMap<u64, bool> = HashMap::default();
    for (i, r) in dump.records.iter().enumerate() {
        if !kept(i) {
            continue;
        }
        let (rd, wr) = reads_writes(l, &r.counters);
        let n = rd.saturating_add(wr);
        if n == 0 {
            continue;
        }
        c.accesses += n;
        let a = look.get(r.ip);
        seen.insert(r.ip, a.is_some());
        let Some(a) = a else {
            c.untyped += n;
            continue;
        };
        c.typed += n;
        if has_field(a) {
            c.with_field += n;
        }
        match a.via {
            Via::Register => c.via_register += n,
            Via::Global => c.via_global += n,
            Via::Stack => c.via_stack += n,
        }
    }
    c.instructions = seen.len() as u64;
    c.typed_instructions = seen.values().filter(|&&t| t).count() as u64;
    Some(c)
}

/// The coverage of a profile's kept records ([`coverage_of`]).
pub fn coverage(p: &Profile) -> Option<Coverage> {
    coverage_of(p.dump(), &|i| p.record_kept(i))
}

/// A query of the data view.
#[derive(Clone, Debug, Default)]
pub struct DataQuery {
    /// Column to sort by, descending (default: the flat view's).
    pub sort: Option<String>,
    /// Keep rows whose label matches this regular expression.
    pub filter: Option<String>,
    /// Keep the first N rows of each table after sorting.
    pub limit: Option<usize>,
}

/// One row of the data view: a type or a field.
#[derive(Clone, Debug, Serialize)]
pub struct DataRow {
    /// `Entity` or `Entity::pos.x`, as shown.
    pub label: String,
    /// The type's name.
    pub ty: String,
    /// Data reads (read-modify-writes included), every level.
    pub reads: u64,
    /// Data writes, every level.
    pub writes: u64,
    /// Data misses per level, nearest first.
    pub misses: Vec<u64>,
    /// Share of the dump's total of the sort column, in percent.
    pub percent: f64,
    /// Typed instructions adding to the row.
    pub instructions: u64,
    /// The row's costs, per column (the flat view's columns).
    pub costs: Vec<Num>,
    /// Lines its instructions' misses fetched into the first data level
    /// and the bytes of them used; `None`: the dump has no such data.
    pub line_use: Option<LineUse>,
}

/// What the type reader found in one module.
#[derive(Clone, Debug, Serialize)]
pub struct ModuleLine {
    /// The module's path.
    pub module: String,
    /// What the type reader found (empty: not looked at).
    pub found: String,
}

/// `report --view data`: types and fields ranked.
#[derive(Clone, Debug, Serialize)]
pub struct DataView {
    /// Columns, in the order of every row's costs.
    pub columns: Vec<ColumnHead>,
    /// Sort column.
    pub sort: String,
    /// How many data accesses got a type and a field.
    pub coverage: Coverage,
    /// Per module, what the type reader found.
    pub modules: Vec<ModuleLine>,
    /// Totals of the profile (every record kept), per column.
    pub totals: Vec<Num>,
    /// Totals of the typed instructions' records, per column.
    pub typed_totals: Vec<Num>,
    /// Types matching the filter, before the limit.
    pub types_matched: usize,
    /// Types, sorted.
    pub types: Vec<DataRow>,
    /// Fields matching the filter, before the limit.
    pub fields_matched: usize,
    /// Fields, sorted.
    pub fields: Vec<DataRow>,
    /// Variables matching the filter, before the limit.
    pub variables_matched: usize,
    /// The variables the resolver named operands by, sorted: globals and
    /// statics (`global kTable (shapes)`: a rip-relative or absolute
    /// operand inside it) and locals by the frame that holds them (`local
    /// particles in simulate`: an operand in the function's stack frame).
    /// Accesses through a pointer are under their types and fields, not
    /// here (the pointer, not the object, is what DWARF names there).
    pub variables: Vec<DataRow>,
    /// The line size of the first data level (the most `used_per_line`
    /// can be).
    pub line_size: u64,
    /// Line utilisation of the typed instructions, of the untyped ones and
    /// of every record shown; `None`: the dump has no such data.
    pub typed_line_use: Option<LineUse>,
    /// See `typed_line_use`.
    pub untyped_line_use: Option<LineUse>,
    /// See `typed_line_use`.
    pub total_line_use: Option<LineUse>,
    /// Why there is no line utilisation (empty when there is).
    pub line_use_note: String,
    /// The objects (allocation sites, mappings) the data accesses touched;
    /// `None`: the dump has no object data (`objects_note` says so).
    pub objects: Option<crate::objects::ObjectsView>,
    /// Why there are no objects (empty when there are).
    pub objects_note: String,
}

/// The dump's data types, or the error that says it has none.
fn data_of(p: &Profile) -> Result<&DataTypes, AnalysisError> {
    p.dump().data.as_ref().ok_or(AnalysisError::NoDataTypes)
}

fn layout_of(p: &Profile) -> Result<CounterLayout, AnalysisError> {
    p.layout().ok_or(AnalysisError::NoDataTypes)
}

/// A row being summed: costs and the instructions adding to it.
struct Acc {
    label: String,
    ty: String,
    costs: Vec<u64>,
    instructions: u64,
}

/// Rows of the data view by what `diff --by type|field` compares: the
/// kept records' counters summed per type name (`fields` false) or per
/// field label, keyed by that name (types of the same name in several
/// modules are one row, as two builds of a program have one type).
pub fn data_rows(
    p: &Profile,
    fields: bool,
) -> Result<std::collections::BTreeMap<String, Vec<u64>>, AnalysisError> {
    let data = data_of(p)?;
    let nc = p.counters();
    let mut out: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    let mut lookup = Lookup { data, last: None };
    for (i, r) in p.dump().records.iter().enumerate() {
        if !p.record_kept(i) {
            continue;
        }
        let Some(a) = lookup.get(r.ip) else {
            continue;
        };
        let key = if fields {
            data.label(a)
        } else {
            data.types
                .get(a.ty as usize)
                .map(|t| t.name.clone())
                .unwrap_or_default()
        };
        add_row(out.entry(key).or_insert_with(|| vec![0; nc]), &r.counters);
    }
    Ok(out)
}

/// The data view of `p`.
pub fn data(p: &Profile, q: &DataQuery) -> Result<DataView, AnalysisError> {
    let data = data_of(p)?;
    let l = layout_of(p)?;
    let cols = p.columns();
    let nc = p.counters();
    let sort = q.sort.clone().unwrap_or_else(|| default_sort(p));
    let sc = column_index(p, &sort)?;
    let re = q.filter.as_deref().map(crate::regex).transpose()?;
    let mut types: Vec<Acc> = Vec::new();
    let mut fields: Vec<Acc> = Vec::new();
    let mut variables: Vec<Acc> = Vec::new();
    let mut type_row: HashMap<u32, usize> = HashMap::default();
    let mut field_row: HashMap<String, usize> = HashMap::default();
    let mut variable_row: HashMap<String, usize> = HashMap::default();
    let mut typed = vec![0u64; nc];
    // The type, field and variable rows of each typed instruction, found
    // once.
    type Rows = Option<(usize, usize, Option<usize>)>;
    let mut rows_of: HashMap<u64, Rows> = HashMap::default();
    for (i, r) in p.dump().records.iter().enumerate() {
        if !p.record_kept(i) {
            continue;
        }
        let rows = *rows_of.entry(r.ip).or_insert_with(|| {
            let a = data.access(r.ip)?;
            let tname = data
                .types
                .get(a.ty as usize)
                .map(|t| t.name.clone())
                .unwrap_or_default();
            let t = *type_row.entry(a.ty).or_insert_with(|| {
                types.push(Acc {
                    label: tname.clone(),
                    ty: tname.clone(),
                    costs: vec![0; nc],
                    instructions: 0,
                });
                types.len() - 1
            });
            let label = data.label(a);
            let f = match field_row.get(&label) {
                Some(&f) => f,
                None => {
                    fields.push(Acc {
                        label: label.clone(),
                        ty: tname,
                        costs: vec![0; nc],
                        instructions: 0,
                    });
                    field_row.insert(label, fields.len() - 1);
                    fields.len() - 1
                }
            };
            types[t].instructions += 1;
            fields[f].instructions += 1;
            let v = variable_label(p.dump(), r.ip, a).map(|label| {
                let v = *variable_row.entry(label.clone()).or_insert_with(|| {
                    variables.push(Acc {
                        label,
                        ty: fields[f].ty.clone(),
                        costs: vec![0; nc],
                        instructions: 0,
                    });
                    variables.len() - 1
                });
                variables[v].instructions += 1;
                v
            });
            Some((t, f, v))
        });
        let Some((t, f, v)) = rows else {
            continue;
        };
        add_row(&mut typed, &r.counters);
        add_row(&mut types[t].costs, &r.counters);
        add_row(&mut fields[f].costs, &r.counters);
        if let Some(v) = v {
            add_row(&mut variables[v].costs, &r.counters);
        }
    }
    let total = cols[sc].value(p.totals());
    let rank = |rows: Vec<Acc>| -> (usize, Vec<DataRow>) {
        let mut rows: Vec<Acc> = rows
            .into_iter()
            .filter(|r| re.as_ref().is_none_or(|re| re.is_match(&r.label)))
            .collect();
        // As the flat view: descending by the sort column, then by
        // instructions, then by label (no two rows share one).
        rows.sort_by(|a, b| {
            cols[sc]
                .value(&b.costs)
                .total_cmp(&cols[sc].value(&a.costs))
                .then(b.costs[FIRST].cmp(&a.costs[FIRST]))
                .then(a.label.cmp(&b.label))
        });
        let matched = rows.len();
        if let Some(n) = q.limit {
            rows.truncate(n);
        }
        let rows = rows
            .into_iter()
            .map(|r| {
                let (reads, writes) = reads_writes(l, &r.costs);
                let v = cols[sc].value(&r.costs);
                DataRow {
                    percent: if total > 0.0 {
                        (v * 100.0 / total * 100.0).round() / 100.0
                    } else {
                        0.0
                    },
                    label: r.label,
                    ty: r.ty,
                    reads,
                    writes,
                    misses: misses(l, &r.costs),
                    instructions: r.instructions,
                    costs: values(cols, &r.costs),
                    line_use: line_use(l, &r.costs),
                }
            })
            .collect();
        (matched, rows)
    };
    let (types_matched, types) = rank(types);
    let (fields_matched, fields) = rank(fields);
    let (variables_matched, variables) = rank(variables);
    let all = line_use(l, p.totals());
    let typed_use = line_use(l, &typed);
    let untyped_use = all.zip(typed_use).map(|(a, t)| {
        LineUse::of(
            a.lines_fetched.saturating_sub(t.lines_fetched),
            a.bytes_used.saturating_sub(t.bytes_used),
        )
    });
    Ok(DataView {
        line_size: line_size(p.dump()).0,
        typed_line_use: typed_use,
        untyped_line_use: untyped_use,
        total_line_use: all,
        line_use_note: line_use_note(l),
        objects: crate::objects::objects(p, q.limit),
        objects_note: crate::objects::objects_note(p.dump()),
        columns: heads(p),
        sort,
        coverage: coverage(p).unwrap_or_default(),
        modules: p
            .dump()
            .modules
            .iter()
            .zip(&data.modules)
            .map(|(m, f)| ModuleLine {
                module: m.path.clone(),
                found: f.clone(),
            })
            .collect(),
        totals: values(cols, p.totals()),
        typed_totals: values(cols, &typed),
        types_matched,
        types,
        fields_matched,
        fields,
        variables_matched,
        variables,
    })
}

/// The variable row an instruction's typed access `a` at `ip` adds to:
/// `global NAME (MODULE)` for a global or static, `local NAME in FUNCTION`
/// for a local in the frame of the function holding `ip` (the outermost
/// of its inlined frames: the one whose frame it is); `None` for an access
/// through a register, or one the resolver gave no variable.
fn variable_label(dump: &Dump, ip: u64, a: &TypedAccess) -> Option<String> {
    if a.variable.is_empty() {
        return None;
    }
    match a.via {
        Via::Global => {
            let module = dump
                .modules
                .iter()
                .find(|m| (m.start..m.end).contains(&ip))
                .map_or("?", |m| m.path.rsplit('/').next().unwrap_or(&m.path));
            Some(format!("global {} ({module})", a.variable))
        }
        Via::Stack => {
            let syms = dump.symbols.as_ref();
            let function = syms
                .and_then(|s| {
                    let f = s.location(ip)?.frames.last()?;
                    s.functions.get(f.function as usize)
                })
                .map_or("?", |f| f.name.as_str());
            Some(format!("local {} in {function}", a.variable))
        }
        Via::Register => None,
    }
}

/// The type named `name` in `data`: the one whose name is `name`, else the
/// one whose name ends with `::name` (`Entity` for `game::Entity`); several
/// matches are an error that lists them.
pub fn find_type(data: &DataTypes, name: &str) -> Result<u32, AnalysisError> {
    let pick = |pred: &dyn Fn(&DataType) -> bool| -> Vec<u32> {
        (0..data.types.len() as u32)
            .filter(|&i| pred(&data.types[i as usize]))
            .collect()
    };
    let mut found = pick(&|t| t.name == name);
    if found.is_empty() {
        let suffix = format!("::{name}");
        found = pick(&|t| t.name.ends_with(&suffix));
    }
    let describe = |i: &u32| {
        let t = &data.types[*i as usize];
        if t.decl.is_empty() {
            t.name.clone()
        } else {
            format!("{} ({})", t.name, t.decl)
        }
    };
    match found.len() {
        1 => Ok(found[0]),
        0 => Err(AnalysisError::NoSuchType {
            name: name.to_string(),
            known: data
                .types
                .iter()
                .filter(|t| t.kind != TypeKind::Scalar)
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
        _ => Err(AnalysisError::AmbiguousType {
            name: name.to_string(),
            matches: found.iter().map(describe).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// The line size the layout view draws cache-line boundaries with: the
/// `line` of the first data (or unified) level of the dump's cache
/// configuration (`META.cache_toml`), with where it came from; 64 bytes,
/// said so, when the dump has no configuration.
pub fn line_size(dump: &Dump) -> (u64, String) {
    let mut in_level = false;
    let (mut name, mut kind, mut line): (String, String, Option<u64>) = Default::default();
    let mut levels: Vec<(String, String, Option<u64>)> = Vec::new();
    for t in dump.meta.cache_toml.lines().map(str::trim) {
        if t.starts_with('[') {
            if in_level {
                levels.push((std::mem::take(&mut name), std::mem::take(&mut kind), line));
            }
            line = None;
            in_level = t == "[[level]]";
            continue;
        }
        let Some((k, v)) = t.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim().trim_matches('"'));
        if in_level {
            match k {
                "name" => name = v.to_string(),
                "kind" => kind = v.to_string(),
                "line" => line = v.parse().ok(),
                _ => {}
            }
        }
    }
    if in_level {
        levels.push((name, kind, line));
    }
    levels
        .into_iter()
        .filter(|(_, k, _)| k != "instruction")
        .find_map(|(n, _, l)| l.filter(|&l| l > 0).map(|l| (n, l)))
        .map(|(n, l)| {
            (
                l,
                format!("the line size of {n} in the dump's cache configuration"),
            )
        })
        .unwrap_or((
            64,
            "64 bytes by default: the dump has no cache configuration".to_string(),
        ))
}

/// A source line that touches a field, with its accesses.
#[derive(Clone, Debug, Serialize)]
pub struct CodeSite {
    /// The innermost function of the instructions.
    pub function: String,
    /// Source file, when known.
    pub file: Option<String>,
    /// Line, 0 when unknown.
    pub line: u32,
    /// Data accesses (reads and writes).
    pub accesses: u64,
    /// Data misses of the first level.
    pub misses: u64,
}

/// One member of a layout, with the accesses of the instructions whose
/// member path goes through it.
#[derive(Clone, Debug, Serialize)]
pub struct LayoutMember {
    /// Nesting depth: 0 for the type's own members, 1 for their members...
    pub depth: u32,
    /// The member path from the type, dotted (`pos.x`).
    pub path: String,
    /// Its name (empty for an anonymous struct or union).
    pub name: String,
    /// Its type as written.
    pub type_name: String,
    /// Byte offset from the start of the type (nested members: of the
    /// first element of an array).
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// A bit-field's first bit in the byte at `offset`.
    pub bit_offset: u32,
    /// A bit-field's width (0: not a bit-field).
    pub bit_size: u32,
    /// Array elements (0: not an array).
    pub count: u64,
    /// A base class.
    pub base: bool,
    /// Bytes of nothing between this member's end and the next member
    /// (the type's own members only).
    pub hole_after: u64,
    /// Data reads.
    pub reads: u64,
    /// Data writes.
    pub writes: u64,
    /// Data misses per level, nearest first.
    pub misses: Vec<u64>,
    /// Costs, per column.
    pub costs: Vec<Num>,
    /// Source lines touching it, most first-level misses first.
    pub code: Vec<CodeSite>,
    /// Threads (kernel tids) that touched it.
    pub threads: Vec<u32>,
    /// Lines its instructions' misses fetched into the first data level,
    /// and the bytes of them used; `None`: the dump has no such data.
    pub line_use: Option<LineUse>,
}

/// A field that gets almost all of its cache line's accesses while it
/// misses and the rest of the line is cold ([`HOT_SHARE`]).
#[derive(Clone, Debug, Serialize)]
pub struct HotField {
    /// The field (member path).
    pub field: String,
    /// Its share of the line's accesses, in percent.
    pub share: f64,
    /// Its accesses.
    pub accesses: u64,
    /// Its first-level misses.
    pub misses: u64,
    /// Bytes of the line it covers.
    pub bytes: u64,
}

/// One thread's accesses to one field of a line.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadField {
    /// Kernel thread id.
    pub tid: u32,
    /// Thread name.
    pub thread: String,
    /// The field (member path).
    pub field: String,
    /// Reads.
    pub reads: u64,
    /// Writes.
    pub writes: u64,
}

/// One cache line of the type (the object assumed to start on a line
/// boundary).
#[derive(Clone, Debug, Serialize)]
pub struct LayoutLine {
    /// Line number in the object (0 first).
    pub index: u64,
    /// First byte.
    pub start: u64,
    /// One past the last byte (within the type).
    pub end: u64,
    /// Members (the type's own) with bytes in it.
    pub members: Vec<String>,
    /// Data reads of operands starting in it.
    pub reads: u64,
    /// Data writes.
    pub writes: u64,
    /// Data misses per level.
    pub misses: Vec<u64>,
    /// Lines fetched into the first data level by the misses of the
    /// operands starting in this line of the type, and the bytes of them
    /// used (of any field or object that shared the fetched line);
    /// `None`: the dump has no such data.
    pub line_use: Option<LineUse>,
    /// A hot field in an otherwise cold line, if any.
    pub hot: Option<HotField>,
    /// Possible false sharing: one thread writes a field and another
    /// accesses another field of the line. Every thread's accesses to the
    /// line's fields are listed; empty when there is none.
    pub false_sharing: Vec<ThreadField>,
}

/// `report --view layout TYPE`.
#[derive(Clone, Debug, Serialize)]
pub struct LayoutView {
    /// Columns of the members' costs.
    pub columns: Vec<ColumnHead>,
    /// The levels, nearest first (the misses' order).
    pub levels: Vec<String>,
    /// Type name.
    pub name: String,
    /// Struct, class, union or scalar.
    pub kind: TypeKind,
    /// `sizeof`.
    pub size: u64,
    /// Declaration (`file:line`), empty when unknown.
    pub decl: String,
    /// Line size the boundaries are drawn with.
    pub line_size: u64,
    /// Where the line size comes from.
    pub line_size_from: String,
    /// Members in memory order, each followed by its touched nested ones.
    pub members: Vec<LayoutMember>,
    /// Bytes after the last member (tail padding).
    pub padding: u64,
    /// Accesses to the type that name no member (padding, the whole
    /// object, a scalar type), as a member row with an empty path.
    pub other: LayoutMember,
    /// Every access to the type.
    pub total: LayoutMember,
    /// The type's cache lines: all of them for a type of up to
    /// [`LAYOUT_LINES`] lines, else those with accesses.
    pub lines: Vec<LayoutLine>,
    /// Why there is no line utilisation (empty when there is).
    pub line_use_note: String,
}

/// The share of a line's accesses one field must get to be flagged as a
/// hot field in an otherwise cold line, in percent. The field must also
/// miss the first level on at least [`HOT_MISS_RATE`] percent of its
/// accesses and cover less than half of the line's bytes.
pub const HOT_SHARE: f64 = 90.0;
/// See [`HOT_SHARE`].
pub const HOT_MISS_RATE: f64 = 10.0;
/// Types of up to this many cache lines list every line; longer ones only
/// the lines with accesses.
pub const LAYOUT_LINES: u64 = 64;

/// Sums one access into a member row.
struct MemberAcc {
    costs: Vec<u64>,
    sites: HashMap<(u32, u32, u32), (u64, u64)>,
    threads: Vec<u32>,
}

impl MemberAcc {
    fn new(nc: usize) -> Self {
        MemberAcc {
            costs: vec![0; nc],
            sites: HashMap::default(),
            threads: Vec::new(),
        }
    }
}

/// Per line: per (field, thread index) reads, writes and first-level
/// misses; a field is an index into the layout's interned member paths.
type LineFields = HashMap<(usize, u32), (u64, u64, u64)>;

/// Where an access reaches type `target`: the rest of its member path from
/// there and its offset in that type; `None` when its path never reaches
/// `target`.
fn reach(data: &DataTypes, a: &TypedAccess, target: u32) -> Option<(Vec<u32>, u64)> {
    let mut ty = a.ty;
    let mut off = a.offset;
    for k in 0..=a.path.len() {
        if ty == target {
            return Some((a.path[k..].to_vec(), off));
        }
        let m = data
            .types
            .get(ty as usize)?
            .members
            .get(*a.path.get(k)? as usize)?;
        off = off.saturating_sub(m.offset);
        if m.count > 0 {
            if let Some(e) = data.types.get(m.ty as usize).filter(|e| e.size > 0) {
                off %= e.size;
            }
        }
        ty = m.ty;
        if ty == NO_TYPE {
            return None;
        }
    }
    None
}

/// The layout of the type named `name` ([`find_type`]) with the accesses
/// of its members and cache lines.
pub fn layout(p: &Profile, name: &str) -> Result<LayoutView, AnalysisError> {
    let data = data_of(p)?;
    let l = layout_of(p)?;
    let target = find_type(data, name)?;
    let t = &data.types[target as usize];
    let cols = p.columns();
    let nc = p.counters();
    let dump = p.dump();
    let (line, line_from) = line_size(dump);
    let nlines = t.size.div_ceil(line).max(1);
    // Every kept record of an instruction reaching the type, summed per
    // member path (every prefix of its path; the empty path for accesses
    // naming no member), per line and in total. Paths are interned and
    // each instruction's rows found once.
    let mut accs: Vec<MemberAcc> = Vec::new();
    let mut acc_paths: Vec<Vec<u32>> = Vec::new();
    let mut acc_index: HashMap<Vec<u32>, usize> = HashMap::default();
    let mut intern = |path: &[u32], accs: &mut Vec<MemberAcc>| -> usize {
        if let Some(&i) = acc_index.get(path) {
            return i;
        }
        accs.push(MemberAcc::new(nc));
        acc_paths.push(path.to_vec());
        acc_index.insert(path.to_vec(), accs.len() - 1);
        accs.len() - 1
    };
    // Per instruction: the rows it adds to, its leaf row, its offset.
    type Reached = Option<(Vec<usize>, usize, u64)>;
    let mut reached: HashMap<u64, Reached> = HashMap::default();
    // Lines with accesses only: a type may be megabytes long.
    let mut lines: std::collections::BTreeMap<u64, (Vec<u64>, LineFields)> = Default::default();
    let mut total = MemberAcc::new(nc);
    for (i, r) in dump.records.iter().enumerate() {
        if !p.record_kept(i) {
            continue;
        }
        let hit = reached.entry(r.ip).or_insert_with(|| {
            let (path, off) = reach(data, data.access(r.ip)?, target)?;
            let rows: Vec<usize> = if path.is_empty() {
                vec![intern(&[], &mut accs)]
            } else {
                (1..=path.len())
                    .map(|k| intern(&path[..k], &mut accs))
                    .collect()
            };
            let leaf = rows[rows.len() - 1];
            Some((rows, leaf, off))
        });
        let Some((rows, leaf, off)) = hit.as_ref() else {
            continue;
        };
        let frames = p.record_frames(i);
        let inner = frames[frames.len() - 1];
        let site = (inner.function, inner.file, inner.line);
        let (rd, wr) = reads_writes(l, &r.counters);
        let miss = misses(l, &r.counters).first().copied().unwrap_or(0);
        let tid = dump.threads.get(r.thread as usize).map_or(0, |t| t.tid);
        let add = |m: &mut MemberAcc| {
            add_row(&mut m.costs, &r.counters);
            let s = m.sites.entry(site).or_default();
            s.0 += rd + wr;
            s.1 += miss;
            if !m.threads.contains(&tid) {
                m.threads.push(tid);
            }
        };
        add(&mut total);
        for &k in rows {
            add(&mut accs[k]);
        }
        let li = lines
            .entry((off / line).min(nlines - 1))
            .or_insert_with(|| (vec![0; nc], HashMap::default()));
        add_row(&mut li.0, &r.counters);
        let e = li.1.entry((*leaf, r.thread)).or_default();
        e.0 += rd;
        e.1 += wr;
        e.2 += miss;
    }
    let acc = |path: &[u32]| acc_index.get(path).map(|&i| &accs[i]);
    type MemberFigures = (u64, u64, Vec<u64>, Vec<Num>, Vec<CodeSite>, Vec<u32>);
    let member_row = |m: &MemberAcc| -> MemberFigures {
        let (reads, writes) = reads_writes(l, &m.costs);
        let mut code: Vec<CodeSite> = m
            .sites
            .iter()
            .map(|(&(f, file, ln), &(accesses, misses))| CodeSite {
                function: crate::views::fn_label(p, f),
                file: p.file(file).map(str::to_string),
                line: ln,
                accesses,
                misses,
            })
            .collect();
        code.sort_by(|a, b| {
            b.misses
                .cmp(&a.misses)
                .then(b.accesses.cmp(&a.accesses))
                .then_with(|| a.function.cmp(&b.function))
                .then_with(|| a.file.cmp(&b.file))
                .then(a.line.cmp(&b.line))
        });
        let mut threads = m.threads.clone();
        threads.sort_unstable();
        (
            reads,
            writes,
            misses(l, &m.costs),
            values(cols, &m.costs),
            code,
            threads,
        )
    };
    let empty = MemberAcc::new(nc);
    let row_for = |path: &[u32], depth: u32, m: Option<&coldcache_dump::data::Member>, offset| {
        let a = acc(path).unwrap_or(&empty);
        let (reads, writes, misses, costs, code, threads) = member_row(a);
        let dotted = member_path(data, target, path);
        LayoutMember {
            depth,
            path: dotted,
            name: m.map(|m| m.name.clone()).unwrap_or_default(),
            type_name: m.map(|m| m.type_name.clone()).unwrap_or_default(),
            offset,
            size: m.map_or(0, |m| m.size),
            bit_offset: m.map_or(0, |m| m.bit_offset),
            bit_size: m.map_or(0, |m| m.bit_size),
            count: m.map_or(0, |m| m.count),
            base: m.is_some_and(|m| m.base),
            hole_after: 0,
            reads,
            writes,
            misses,
            costs,
            code,
            threads,
            line_use: line_use(l, &a.costs),
        }
    };
    // Members in memory order, each followed by its nested members when an
    // access went deeper (explicit stack: paths are as deep as the dump's).
    let mut members: Vec<LayoutMember> = Vec::new();
    let mut stack: Vec<(u32, Vec<u32>, u64, usize)> = vec![(target, Vec::new(), 0, 0)];
    while let Some((ty, prefix, base, next)) = stack.pop() {
        let Some(m) = data
            .types
            .get(ty as usize)
            .and_then(|t| t.members.get(next))
        else {
            continue;
        };
        stack.push((ty, prefix.clone(), base, next + 1));
        let mut path = prefix.clone();
        path.push(next as u32);
        members.push(row_for(
            &path,
            prefix.len() as u32,
            Some(m),
            base + m.offset,
        ));
        let deeper = acc_paths
            .iter()
            .any(|k| k.len() > path.len() && k.starts_with(&path));
        if deeper && m.ty != NO_TYPE {
            stack.push((m.ty, path, base + m.offset, 0));
        }
    }
    // Holes between the type's own members, and the tail padding.
    let mut end = 0u64;
    let mut last_top: Option<usize> = None;
    for i in 0..members.len() {
        if members[i].depth != 0 {
            continue;
        }
        if let Some(j) = last_top {
            members[j].hole_after = members[i].offset.saturating_sub(end);
        }
        end = end.max(members[i].offset + members[i].size.max(1));
        last_top = Some(i);
    }
    let padding = if t.kind == TypeKind::Scalar || t.members.is_empty() {
        0
    } else {
        t.size.saturating_sub(end)
    };
    // Cache lines.
    let top: Vec<&coldcache_dump::data::Member> = t.members.iter().collect();
    // Every line of a type of up to LAYOUT_LINES lines, else those with
    // accesses.
    let shown: Vec<u64> = if nlines <= LAYOUT_LINES {
        (0..nlines).collect()
    } else {
        lines.keys().copied().collect()
    };
    let none = (vec![0; nc], LineFields::default());
    let lines = shown
        .into_iter()
        .map(|k| {
            let (costs, fields) = lines.get(&k).unwrap_or(&none);
            let (start, stop) = (k * line, ((k + 1) * line).min(t.size));
            let (reads, writes) = reads_writes(l, costs);
            let inside: Vec<String> = top
                .iter()
                .filter(|m| m.offset < stop && m.offset + m.size.max(1) > start)
                .map(|m| m.name.clone())
                .collect();
            let hot = hot_field(
                data,
                target,
                &acc_paths,
                fields,
                reads + writes,
                start,
                stop,
            );
            LayoutLine {
                index: k,
                start,
                end: stop,
                members: inside,
                reads,
                writes,
                misses: misses(l, costs),
                line_use: line_use(l, costs),
                hot,
                false_sharing: false_sharing(data, target, dump, &acc_paths, fields),
            }
        })
        .collect();
    Ok(LayoutView {
        columns: heads(p),
        levels: dump.meta.levels.clone(),
        name: t.name.clone(),
        kind: t.kind,
        size: t.size,
        decl: t.decl.clone(),
        line_size: line,
        line_size_from: line_from,
        members,
        padding,
        other: row_for(&[], 0, None, 0),
        total: {
            let (reads, writes, misses, costs, code, threads) = member_row(&total);
            LayoutMember {
                path: t.name.clone(),
                name: t.name.clone(),
                size: t.size,
                reads,
                writes,
                misses,
                costs,
                code,
                threads,
                line_use: line_use(l, &total.costs),
                ..row_for(&[], 0, None, 0)
            }
        },
        lines,
        line_use_note: line_use_note(l),
    })
}

/// A member path from type `ty`, dotted (`pos.x`); empty for no member.
fn member_path(data: &DataTypes, ty: u32, path: &[u32]) -> String {
    let a = TypedAccess {
        ty,
        path: path.to_vec(),
        ..TypedAccess::default()
    };
    data.members(&a)
        .iter()
        .map(|(_, m)| {
            if m.name.is_empty() {
                "<anonymous>"
            } else {
                m.name.as_str()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The bytes `path` covers in type `ty`: offset and size of its last
/// member, from the start of the type (first elements of arrays).
fn member_span(data: &DataTypes, ty: u32, path: &[u32]) -> Option<(u64, u64)> {
    let a = TypedAccess {
        ty,
        path: path.to_vec(),
        ..TypedAccess::default()
    };
    let ms = data.members(&a);
    let off = ms.iter().map(|(_, m)| m.offset).sum();
    ms.last().map(|(_, m)| (off, m.size))
}

/// The hot field of a line ([`HOT_SHARE`]), if it has one.
fn hot_field(
    data: &DataTypes,
    ty: u32,
    paths: &[Vec<u32>],
    fields: &LineFields,
    accesses: u64,
    start: u64,
    stop: u64,
) -> Option<HotField> {
    if accesses == 0 {
        return None;
    }
    let mut per: HashMap<&Vec<u32>, (u64, u64)> = HashMap::default();
    for ((path, _), &(r, w, m)) in fields {
        let e = per.entry(&paths[*path]).or_default();
        e.0 += r + w;
        e.1 += m;
    }
    let (path, &(n, miss)) = per
        .iter()
        .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then_with(|| b.0.cmp(a.0)))?;
    if path.is_empty() {
        return None;
    }
    let (off, size) = member_span(data, ty, path)?;
    let bytes = (off + size).min(stop).saturating_sub(off.max(start));
    let part = share(n, accesses);
    let line_bytes = stop - start;
    (part >= HOT_SHARE && share(miss, n) >= HOT_MISS_RATE && bytes * 2 < line_bytes).then(|| {
        HotField {
            field: member_path(data, ty, path),
            share: (part * 100.0).round() / 100.0,
            accesses: n,
            misses: miss,
            bytes,
        }
    })
}

/// The accesses of a line when one thread writes a field of it and another
/// thread accesses another field; empty otherwise.
fn false_sharing(
    data: &DataTypes,
    ty: u32,
    dump: &Dump,
    paths: &[Vec<u32>],
    fields: &LineFields,
) -> Vec<ThreadField> {
    let shared = fields.iter().any(|((p1, t1), &(_, w1, _))| {
        w1 > 0
            && fields
                .iter()
                .any(|((p2, t2), &(r2, w2, _))| t2 != t1 && p2 != p1 && r2 + w2 > 0)
    });
    if !shared {
        return Vec::new();
    }
    let mut v: Vec<ThreadField> = fields
        .iter()
        .filter(|(_, &(r, w, _))| r + w > 0)
        .map(|((path, t), &(reads, writes, _))| {
            let th = dump.threads.get(*t as usize);
            ThreadField {
                tid: th.map_or(0, |t| t.tid),
                thread: th.map(|t| t.name.clone()).unwrap_or_default(),
                field: member_path(data, ty, &paths[*path]),
                reads,
                writes,
            }
        })
        .collect();
    v.sort_by(|a, b| a.tid.cmp(&b.tid).then_with(|| a.field.cmp(&b.field)));
    v
}
