//! Columns: the dump's raw counters plus the derived measures every view can
//! show and sort by (misses per level, accesses served by memory, badness).
//!
//! A row is the raw counter vector of the dump; a [`Column`] says how to
//! compute one displayed value from it. Which raw counter counts what comes
//! from the dump's [`CounterLayout`] (`coldcache_sim`'s, the one definition),
//! never from parsing names; the default weight ([`default_weight`]) and the
//! default set of shown columns ([`default_shown`]) are defined here once.
//! Keeping rows raw means every view (and the web UI, and exports) computes
//! a column the same way.

use coldcache_dump::{CounterLayout, Side};
use serde::Serialize;

/// How a column's value is computed from a raw counter row.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Formula {
    /// The sum of these raw counters.
    Sum(Vec<usize>),
    /// Badness: the square of the sum of these counters (accesses served by
    /// memory) divided by instructions ([`CounterLayout::INSTRUCTIONS`]). The talk's "L2 misses
    /// squared over instructions", with the last cache level's misses.
    Badness(Vec<usize>),
}

/// One displayable measure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Column {
    /// Short name, used by `--sort`, `--columns`, `--weight` and the JSON.
    pub name: String,
    /// What it counts.
    pub description: String,
    /// How it is computed.
    pub formula: Formula,
}

impl Column {
    /// The value of this column for a raw counter row.
    pub fn value(&self, row: &[u64]) -> f64 {
        match &self.formula {
            Formula::Sum(t) => sum(row, t) as f64,
            Formula::Badness(t) => badness(
                sum(row, t),
                row.get(CounterLayout::INSTRUCTIONS).copied().unwrap_or(0),
            ),
        }
    }

    /// The value as an integer (badness rounded down).
    pub fn int_value(&self, row: &[u64]) -> u64 {
        match &self.formula {
            Formula::Sum(t) => sum(row, t),
            Formula::Badness(_) => self.value(row) as u64,
        }
    }

    /// Whether the column is a ratio (shown with decimals).
    pub fn is_ratio(&self) -> bool {
        matches!(self.formula, Formula::Badness(_))
    }
}

fn sum(row: &[u64], terms: &[usize]) -> u64 {
    terms
        .iter()
        .map(|&i| row.get(i).copied().unwrap_or(0))
        .fold(0u64, u64::saturating_add)
}

/// Badness: `misses² / instructions`, 0 without instructions.
pub fn badness(misses: u64, instructions: u64) -> f64 {
    if instructions == 0 {
        0.0
    } else {
        (misses as f64) * (misses as f64) / instructions as f64
    }
}

/// Name of the derived column of data accesses (reads and writes).
pub const D_REFS: &str = "d_refs";
/// Name of the derived column of accesses served by memory.
pub const MEM: &str = "mem";
/// Name of the derived badness column (`mem² / instructions`).
pub const BADNESS: &str = "badness";
/// Prefix of the derived instruction-miss columns (`i_miss_L1`, …).
pub const I_MISS: &str = "i_miss_";
/// Prefix of the derived data-miss columns (`d_miss_L1`, …).
pub const D_MISS: &str = "d_miss_";

/// The columns of a dump with raw counters `counters` and cache `levels`.
///
/// Raw counters come first, with their dump names; then, when the names are
/// exactly those of a [`CounterLayout`] for `levels`
/// ([`CounterLayout::from_names`]): `d_refs`, per level `i_miss_<L>` and
/// `d_miss_<L>`, `mem` and `badness`. A dump of another layout (another
/// tool, a later version) gets its raw counters only.
pub fn columns(counters: &[String], levels: &[String]) -> Vec<Column> {
    let layout = CounterLayout::from_names(counters, levels);
    let mut v: Vec<Column> = counters
        .iter()
        .enumerate()
        .map(|(i, name)| Column {
            name: name.clone(),
            description: match layout {
                Some(l) => describe(l, levels, i),
                None => format!("counter '{name}' of the dump (not coldcache's layout)"),
            },
            formula: Formula::Sum(vec![i]),
        })
        .collect();
    let Some(l) = layout else {
        return v;
    };
    let sorted = |r: Vec<usize>| {
        let mut r = r;
        r.sort_unstable();
        r
    };
    let data_from = |level: usize| -> Vec<usize> {
        sorted(
            l.served_from(Side::Read, level)
                .chain(l.served_from(Side::Write, level))
                .collect(),
        )
    };
    v.push(Column {
        name: D_REFS.into(),
        description: "data accesses (reads and writes)".into(),
        formula: Formula::Sum(data_from(1)),
    });
    for (k, name) in levels.iter().enumerate() {
        // Missed level k+1 = served by level k+2 or farther.
        v.push(Column {
            name: format!("{I_MISS}{name}"),
            description: format!("instruction fetches that missed {name}"),
            formula: Formula::Sum(l.served_from(Side::Instr, k + 2).collect()),
        });
        v.push(Column {
            name: format!("{D_MISS}{name}"),
            description: format!("data accesses that missed {name}"),
            formula: Formula::Sum(data_from(k + 2)),
        });
    }
    let mem: Vec<usize> = Side::ALL.iter().map(|&s| l.memory(s)).collect();
    v.push(Column {
        name: MEM.into(),
        description: format!(
            "accesses served by memory (missed every level up to {})",
            levels.last().map(String::as_str).unwrap_or("the last")
        ),
        formula: Formula::Sum(mem.clone()),
    });
    v.push(Column {
        name: BADNESS.into(),
        description: "badness: mem squared / instructions (high = a line doing little but missing)"
            .into(),
        formula: Formula::Badness(mem),
    });
    v
}

/// The default weight of a profile with columns `columns` and totals
/// `totals`, as an index into `columns`: `mem` when the dump has it and it
/// is non-zero in total, else `instructions`, else the first column. Every
/// default sort, flame-graph and export weight (and the web UI's, through
/// its API) is this one.
pub fn default_weight(columns: &[Column], totals: &[u64]) -> usize {
    let find = |n: &str| columns.iter().position(|c| c.name == n);
    if let Some(m) = find(MEM) {
        if columns[m].int_value(totals) > 0 {
            return m;
        }
    }
    find(CounterLayout::INSTRUCTIONS_NAME).unwrap_or(0)
}

/// The columns shown by default among `names` (indices into it, in
/// display order): instructions, data accesses, data misses per level,
/// instruction misses of the first level, memory, badness; every column
/// when there is no derived column (a dump of another layout).
pub fn default_shown(names: &[&str]) -> Vec<usize> {
    let derived = |n: &str| {
        n == D_REFS || n == MEM || n == BADNESS || n.starts_with(D_MISS) || n.starts_with(I_MISS)
    };
    if !names.iter().any(|n| derived(n)) {
        return (0..names.len()).collect();
    }
    let mut v = Vec::new();
    let mut add = |pred: &dyn Fn(&str) -> bool| {
        for (i, n) in names.iter().enumerate() {
            if pred(n) && !v.contains(&i) {
                v.push(i);
            }
        }
    };
    add(&|n| n == CounterLayout::INSTRUCTIONS_NAME);
    add(&|n| n == D_REFS);
    add(&|n| n.starts_with(D_MISS));
    let first_i = names.iter().find(|n| n.starts_with(I_MISS)).copied();
    add(&|n| Some(n) == first_i);
    add(&|n| n == MEM || n == BADNESS);
    if v.is_empty() {
        v = (0..names.len()).collect();
    }
    v
}

/// What raw counter `i` of layout `l` counts.
fn describe(l: CounterLayout, levels: &[String], i: usize) -> String {
    if i == CounterLayout::INSTRUCTIONS {
        return "instructions executed".into();
    }
    if i == CounterLayout::UNMODELLED {
        return "instructions whose accesses could not be modelled".into();
    }
    if i == l.prefetch_issued() {
        return "software prefetches issued".into();
    }
    if i == l.prefetch_redundant() {
        return "software prefetches of a line already cached".into();
    }
    if i == l.invalidations() {
        return "coherence invalidations sent to other cores".into();
    }
    if i == l.false_sharing() {
        return "false-sharing events (other cores' writes to other bytes of a line)".into();
    }
    if Some(i) == l.lines_fetched() {
        return "lines this row's misses brought into the first data level".into();
    }
    if Some(i) == l.bytes_used() {
        return "bytes of those lines used before they left the first data level".into();
    }
    for side in Side::ALL {
        let what = match side {
            Side::Instr => "instruction fetches",
            Side::Read => "data reads (read-modify-writes included)",
            Side::Write => "data writes",
        };
        if i == l.memory(side) {
            return format!("{what} served by memory");
        }
        if let Some(k) = (0..l.levels()).find(|&k| l.served(side, k) == i) {
            return format!("{what} served by {}", levels[k]);
        }
    }
    format!("counter {i}")
}
