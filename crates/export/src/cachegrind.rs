//! Cachegrind's output format (`cachegrind.out.PID`, as `cg_annotate`
//! reads it) and the summary lines Valgrind prints at a run's end.
//!
//! - Header: `desc:` lines for the three caches, `cmd:`, then `events:`
//!   in Cachegrind's order (`Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw`, or
//!   `Ir` alone for `--cache-sim=no`), mapped exactly from the counter
//!   layout as in the Callgrind export.
//! - Body: `fl=FILE`, `fn=NAME`, then one line per source line, `LINE
//!   counts`: the self costs of every instruction of that function whose
//!   line is that line, summed over stacks and threads (code inlined from
//!   another file is under that file, as Cachegrind's debug-info lookup
//!   puts it). Instructions without a line are line 0 of file `???`.
//! - `summary:` last: the profile's totals, the sum of every count line.
//!
//! [`summary_lines`] is the text Valgrind writes to stderr (or
//! `--log-file`) after the run: `I   refs:`, `I1  misses:`, ... with
//! Valgrind's labels and thousands separators; column widths follow
//! Valgrind's rule (the widest number), not its every space.

use crate::callgrind::{one_line, valgrind_terms};
use coldcache_analysis::Profile;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Options of the Cachegrind export.
#[derive(Clone, Debug, Default)]
pub struct CachegrindOptions {
    /// `Ir` alone (`--cache-sim=no`) rather than the nine events.
    pub ir_only: bool,
    /// The three `desc:` lines' caches, `(name, size, line, assoc)`, e.g.
    /// `("I1", 32768, 64, 8)`; written as Cachegrind writes them.
    pub caches: Vec<(String, u64, u32, u32)>,
}

/// Cachegrind's event order as indices into [`crate::VALGRIND_EVENTS`].
const CACHEGRIND_ORDER: [usize; 9] = [0, 3, 6, 1, 4, 7, 2, 5, 8];

/// The events of [`cachegrind`], in order.
pub fn cachegrind_events(ir_only: bool) -> Vec<&'static str> {
    let n = if ir_only { 1 } else { 9 };
    CACHEGRIND_ORDER[..n]
        .iter()
        .map(|&i| crate::VALGRIND_EVENTS[i])
        .collect()
}

/// The profile's totals as Valgrind's nine events in Callgrind's order
/// ([`crate::VALGRIND_EVENTS`]); `None` for a dump without coldcache's
/// counter layout.
pub fn valgrind_totals(p: &Profile) -> Option<[u64; 9]> {
    let l = p.layout()?;
    let t = p.totals();
    let terms = valgrind_terms(&l);
    Some(std::array::from_fn(|k| {
        terms[k]
            .iter()
            .map(|&i| t.get(i).copied().unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    }))
}

/// The profile in Cachegrind's format; `None` for a dump without
/// coldcache's counter layout (no mapping to Valgrind's events).
pub fn cachegrind(p: &Profile, opts: &CachegrindOptions) -> Option<String> {
    let l = p.layout()?;
    let terms = valgrind_terms(&l);
    let n = if opts.ir_only { 1 } else { 9 };
    let order = &CACHEGRIND_ORDER[..n];
    let d = p.dump();
    // (file, function, line) -> counts in Cachegrind's order.
    let mut lines: BTreeMap<(String, String), BTreeMap<u32, Vec<u64>>> = BTreeMap::new();
    for i in 0..p.record_count() {
        if !p.record_kept(i) {
            continue;
        }
        let r = &d.records[i];
        let frames = p.record_frames(i);
        let leaf = frames[frames.len() - 1];
        let info = p.function(leaf.function);
        let file = p
            .file(leaf.file)
            .map(str::to_string)
            .or_else(|| info.file.clone())
            .unwrap_or_else(|| "???".into());
        let name = if info.name.is_empty() {
            "???".to_string()
        } else {
            one_line(&info.name)
        };
        let line = if p.file(leaf.file).is_some() {
            leaf.line
        } else {
            0
        };
        let row = lines
            .entry((one_line(&file), name))
            .or_default()
            .entry(line)
            .or_insert_with(|| vec![0; n]);
        for (slot, &k) in row.iter_mut().zip(order) {
            let v = terms[k]
                .iter()
                .map(|&c| r.counters.get(c).copied().unwrap_or(0))
                .fold(0u64, u64::saturating_add);
            *slot = slot.saturating_add(v);
        }
    }
    let mut out = String::new();
    for (name, size, line, assoc) in &opts.caches {
        let _ = writeln!(
            out,
            "desc: {name} cache:         {size} B, {line} B, {assoc}-way associative"
        );
    }
    let _ = writeln!(out, "cmd: {}", one_line(&d.meta.program.join(" ")));
    let _ = writeln!(
        out,
        "events: {} ",
        cachegrind_events(opts.ir_only).join(" ")
    );
    let mut file = None;
    for ((fl, func), rows) in &lines {
        if file != Some(fl) {
            let _ = writeln!(out, "fl={fl}");
            file = Some(fl);
        }
        let _ = writeln!(out, "fn={func}");
        for (line, counts) in rows {
            let _ = write!(out, "{line}");
            for c in counts {
                let _ = write!(out, " {c}");
            }
            out.push('\n');
        }
    }
    let totals = valgrind_totals(p)?;
    out.push_str("summary:");
    for &k in order {
        let _ = write!(out, " {}", totals[k]);
    }
    out.push('\n');
    Some(out)
}

/// `1234567` as `1,234,567`, as Valgrind prints counts.
pub use coldcache_dump::thousands;

/// The summary Valgrind prints after a Callgrind or Cachegrind run, each
/// line prefixed with `==PID== `: from `totals` (Valgrind's nine events
/// in Callgrind's order); with `ir_only`, the `I   refs:` line alone.
pub fn summary_lines(pid: u32, totals: &[u64; 9], ir_only: bool) -> String {
    let [ir, dr, dw, i1mr, d1mr, d1mw, ilmr, dlmr, dlmw] = *totals;
    let mut lines: Vec<String> = Vec::new();
    let w1 = thousands(ir)
        .len()
        .max(thousands(dr.saturating_add(dw)).len());
    lines.push(format!("I   refs:      {:>w1$}", thousands(ir)));
    if !ir_only {
        let pct = |a: u64, b: u64, digits: usize| {
            if b == 0 {
                format!("{:.*}%", digits, 0.0)
            } else {
                format!("{:.*}%", digits, a as f64 * 100.0 / b as f64)
            }
        };
        let w2 = thousands(dr).len();
        let w3 = thousands(dw).len();
        let three = |label: &str, t: u64, r: u64, w: u64| {
            format!(
                "{label}{:>w1$}  ({:>w2$} rd   + {:>w3$} wr)",
                thousands(t),
                thousands(r),
                thousands(w)
            )
        };
        let rates = |label: &str, t: String, r: String, w: String| {
            format!(
                "{label}{:>w1$} ({:>w2$}     + {:>w3$}  )",
                t,
                r,
                w,
                w1 = w1 + 1,
                w2 = w2 + 1,
                w3 = w3
            )
        };
        lines.push(format!("I1  misses:    {:>w1$}", thousands(i1mr)));
        lines.push(format!("LLi misses:    {:>w1$}", thousands(ilmr)));
        lines.push(format!("I1  miss rate: {:>w1$}", pct(i1mr, ir, 2)));
        lines.push(format!("LLi miss rate: {:>w1$}", pct(ilmr, ir, 2)));
        lines.push(String::new());
        lines.push(three("D   refs:      ", dr.saturating_add(dw), dr, dw));
        lines.push(three(
            "D1  misses:    ",
            d1mr.saturating_add(d1mw),
            d1mr,
            d1mw,
        ));
        lines.push(three(
            "LLd misses:    ",
            dlmr.saturating_add(dlmw),
            dlmr,
            dlmw,
        ));
        lines.push(rates(
            "D1  miss rate: ",
            pct(d1mr.saturating_add(d1mw), dr.saturating_add(dw), 1),
            pct(d1mr, dr, 1),
            pct(d1mw, dw, 1),
        ));
        lines.push(rates(
            "LLd miss rate: ",
            pct(dlmr.saturating_add(dlmw), dr.saturating_add(dw), 1),
            pct(dlmr, dr, 1),
            pct(dlmw, dw, 1),
        ));
        lines.push(String::new());
        let llr = i1mr.saturating_add(d1mr);
        lines.push(three(
            "LL refs:       ",
            llr.saturating_add(d1mw),
            llr,
            d1mw,
        ));
        lines.push(three(
            "LL misses:     ",
            ilmr.saturating_add(dlmr).saturating_add(dlmw),
            ilmr.saturating_add(dlmr),
            dlmw,
        ));
        lines.push(rates(
            "LL miss rate:  ",
            pct(
                ilmr.saturating_add(dlmr).saturating_add(dlmw),
                ir.saturating_add(dr).saturating_add(dw),
                1,
            ),
            pct(ilmr.saturating_add(dlmr), ir.saturating_add(dr), 1),
            pct(dlmw, dw, 1),
        ));
    }
    let mut out = String::new();
    for l in lines {
        let _ = writeln!(out, "=={pid}== {l}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_reads_as_valgrinds() {
        // Cachegrind 3.19 on tests-programs/valgrind/harness.c printed
        // these figures (its lines are compared here without their spaces).
        let t = [279442, 49387, 24921, 1267, 1482, 929, 1242, 1001, 861];
        let s = summary_lines(7, &t, false);
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let want = [
            "==7== I refs: 279,442",
            "==7== I1 misses: 1,267",
            "==7== LLi misses: 1,242",
            "==7== I1 miss rate: 0.45%",
            "==7== LLi miss rate: 0.44%",
            "==7==",
            "==7== D refs: 74,308 (49,387 rd + 24,921 wr)",
            "==7== D1 misses: 2,411 ( 1,482 rd + 929 wr)",
            "==7== LLd misses: 1,862 ( 1,001 rd + 861 wr)",
            "==7== D1 miss rate: 3.2% ( 3.0% + 3.7% )",
            "==7== LLd miss rate: 2.5% ( 2.0% + 3.5% )",
            "==7==",
            "==7== LL refs: 3,678 ( 2,749 rd + 929 wr)",
            "==7== LL misses: 3,104 ( 2,243 rd + 861 wr)",
            "==7== LL miss rate: 0.9% ( 0.7% + 3.5% )",
        ];
        let got: Vec<String> = s.lines().map(squash).collect();
        let want: Vec<String> = want.iter().map(|w| squash(w)).collect();
        assert_eq!(got, want);
        assert_eq!(summary_lines(7, &t, true), "==7== I   refs:      279,442\n");
    }
}
