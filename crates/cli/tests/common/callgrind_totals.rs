//! The totals a Callgrind export of a dump must show, computed from the
//! dump's raw totals by counter name (independently of `CounterLayout`'s
//! offsets). Shared by `export.rs`, `analysis.rs`, `data_objects.rs` and
//! `rust_program.rs` through `#[path]`.

use coldcache_dump::Dump;

/// The Callgrind export's event totals, computed here from the dump's raw
/// totals by counter name: Valgrind's nine (`Ir` instructions; `Dr`, `Dw`
/// every read or write; `I1mr`, `D1mr`, `D1mw` those not served by the
/// first level; `ILmr`, `DLmr`, `DLmw` those served by memory), then the
/// counters served by each level after the first, then the other counters.
pub fn callgrind_totals(d: &Dump) -> Vec<u64> {
    let t = d.totals();
    let c = |n: &str| t[d.counter(n).unwrap()];
    let levels = &d.meta.levels;
    let all = |s: &str| -> u64 {
        levels.iter().map(|l| c(&format!("{s}_{l}"))).sum::<u64>() + c(&format!("{s}_mem"))
    };
    let beyond_l1 = |s: &str| all(s) - c(&format!("{s}_{}", levels[0]));
    let mut v = vec![
        c("instructions"),
        all("r"),
        all("w"),
        beyond_l1("i"),
        beyond_l1("r"),
        beyond_l1("w"),
        c("i_mem"),
        c("r_mem"),
        c("w_mem"),
    ];
    for l in &levels[1..] {
        for s in ["i", "r", "w"] {
            v.push(c(&format!("{s}_{l}")));
        }
    }
    for n in [
        "unmodelled",
        "prefetch_issued",
        "prefetch_redundant",
        "invalidations",
        "false_sharing",
    ] {
        v.push(c(n));
    }
    // Line use, in dumps that measured it.
    for n in ["l1d_lines_fetched", "l1d_bytes_used"] {
        if let Some(i) = d.counter(n) {
            v.push(t[i]);
        }
    }
    v
}
