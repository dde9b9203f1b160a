//! Columns: the dump's raw counters plus the derived measures every view can
//! show and sort by (misses per level, accesses served by memory, badness).
//!
//! A [`Costs`] row is the raw counter vector of the dump; a [`Column`] says
//! how to compute one displayed value from it. Keeping rows raw means every
//! view (and the web UI, and exports) computes a column the same way.

use serde::Serialize;

/// How a column's value is computed from a raw counter row.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Formula {
    /// The sum of these raw counters.
    Sum(Vec<usize>),
    /// Badness: the square of the sum of these counters (accesses served by
    /// memory) divided by instructions (counter 0). The talk's "L2 misses
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
            Formula::Badness(t) => badness(sum(row, t), row.first().copied().unwrap_or(0)),
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

/// The columns of a dump with raw counters `counters` and cache `levels`.
///
/// Raw counters come first, with their dump names; then, when the dump has
/// the standard layout (`coldcache_dump::counters::names`): `d_refs`, per
/// level `i_miss_<L>` and `d_miss_<L>`, `mem` and `badness`.
pub fn columns(counters: &[String], levels: &[String]) -> Vec<Column> {
    let mut v: Vec<Column> = counters
        .iter()
        .enumerate()
        .map(|(i, name)| Column {
            name: name.clone(),
            description: describe_raw(name),
            formula: Formula::Sum(vec![i]),
        })
        .collect();
    let idx = |n: &str| counters.iter().position(|c| c == n);
    let side = |s: &str| -> Option<Vec<usize>> {
        let mut t = Vec::new();
        for l in levels {
            t.push(idx(&format!("{s}_{l}"))?);
        }
        t.push(idx(&format!("{s}_mem"))?);
        Some(t)
    };
    let (Some(i), Some(r), Some(w)) = (side("i"), side("r"), side("w")) else {
        return v;
    };
    if idx("instructions") != Some(0) {
        return v;
    }
    let mut d: Vec<usize> = r.iter().chain(&w).copied().collect();
    d.sort_unstable();
    v.push(Column {
        name: "d_refs".into(),
        description: "data accesses (reads and writes)".into(),
        formula: Formula::Sum(d),
    });
    for (k, l) in levels.iter().enumerate() {
        v.push(Column {
            name: format!("i_miss_{l}"),
            description: format!("instruction fetches that missed {l}"),
            formula: Formula::Sum(i[k + 1..].to_vec()),
        });
        let mut t: Vec<usize> = r[k + 1..].iter().chain(&w[k + 1..]).copied().collect();
        t.sort_unstable();
        v.push(Column {
            name: format!("d_miss_{l}"),
            description: format!("data accesses that missed {l}"),
            formula: Formula::Sum(t),
        });
    }
    let n = levels.len();
    let mem = vec![i[n], r[n], w[n]];
    v.push(Column {
        name: "mem".into(),
        description: format!(
            "accesses served by memory (missed every level up to {})",
            levels.last().map(String::as_str).unwrap_or("the last")
        ),
        formula: Formula::Sum(mem.clone()),
    });
    v.push(Column {
        name: "badness".into(),
        description: "badness: mem squared / instructions (high = a line doing little but missing)"
            .into(),
        formula: Formula::Badness(mem),
    });
    v
}

fn describe_raw(name: &str) -> String {
    let fixed = match name {
        "instructions" => Some("instructions executed"),
        "unmodelled" => Some("instructions whose accesses could not be modelled"),
        "prefetch_issued" => Some("software prefetches issued"),
        "prefetch_redundant" => Some("software prefetches of a line already cached"),
        "invalidations" => Some("coherence invalidations sent to other cores"),
        "false_sharing" => {
            Some("false-sharing events (other cores' writes to other bytes of a line)")
        }
        _ => None,
    };
    if let Some(f) = fixed {
        return f.to_string();
    }
    if let Some((side, level)) = name.split_once('_') {
        let what = match side {
            "i" => "instruction fetches",
            "r" => "data reads (read-modify-writes included)",
            "w" => "data writes",
            _ => return name.to_string(),
        };
        return if level == "mem" {
            format!("{what} served by memory")
        } else {
            format!("{what} served by {level}")
        };
    }
    name.to_string()
}
