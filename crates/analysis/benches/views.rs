//! Time to load a dump with one million (instruction, stack) records and to
//! produce each view (goal: under one second each).
//!
//! `cargo bench -p coldcache-analysis --bench views [-- RECORDS] [--write FILE]`
//! (`--write` also saves the synthetic dump, to time `coldcache report` or
//! the web UI on it).
//!
//! Prints the time of each step and, as a floor measured in the same run,
//! the time to merely sum every record's counters (`Dump::totals`), so the
//! figures can be compared across noisy machines as ratios.

use coldcache_analysis::data::{self, DataQuery};
use coldcache_analysis::diff::{diff, DiffQuery};
use coldcache_analysis::synthetic::{self, Shape};
use coldcache_analysis::views::{self, By, FlatQuery, TreeQuery};
use coldcache_analysis::{Profile, ProfileOptions};
use coldcache_dump::data::NO_TYPE;
use coldcache_dump::{DataType, DataTypes, Dump, Member, TypeKind, TypedAccess};
use std::time::Instant;

fn time<T>(label: &str, floor: Option<f64>, f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let v = f();
    let s = t.elapsed().as_secs_f64();
    match floor {
        Some(fl) => println!("{label:<34} {:>9.1} ms  {:>7.1}x floor", s * 1e3, s / fl),
        None => println!("{label:<34} {:>9.1} ms", s * 1e3),
    }
    (v, s)
}

fn main() {
    let records = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<u32>().ok())
        .unwrap_or(1_000_000);
    let shape = Shape {
        records,
        ..Shape::default()
    };
    let d = synthetic::dump(shape);
    let bytes = d.to_bytes();
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--write") {
        let path = args.get(i + 1).expect("--write needs a path");
        std::fs::write(path, &bytes).expect("writes the dump");
        println!("wrote {path}");
    }
    println!(
        "synthetic dump: {} records, {} stacks, {} functions, {:.1} MB",
        d.records.len(),
        d.stacks.len(),
        shape.functions,
        bytes.len() as f64 / 1e6
    );
    drop(d);
    let (d, _) = time("decode (Dump::from_bytes)", None, || {
        Dump::from_bytes(&bytes).expect("decodes")
    });
    let (_, floor) = time("floor: sum all counters", None, || d.totals());
    let d2 = d.clone();
    let (p, _) = time("index (Profile::new)", Some(floor), || {
        Profile::new(d, ProfileOptions::default())
    });
    time("flat by function", Some(floor), || {
        views::flat(&p, &FlatQuery::default()).unwrap()
    });
    time("flat by line", Some(floor), || {
        views::flat(
            &p,
            &FlatQuery {
                by: By::Line,
                ..FlatQuery::default()
            },
        )
        .unwrap()
    });
    time("flat by instruction", Some(floor), || {
        views::flat(
            &p,
            &FlatQuery {
                by: By::Instruction,
                limit: Some(100),
                ..FlatQuery::default()
            },
        )
        .unwrap()
    });
    // The same granularities again with another sort column (what the web
    // UI asks when a column header is clicked), then with a filter.
    time("flat by line, another sort", Some(floor), || {
        views::flat(
            &p,
            &FlatQuery {
                by: By::Line,
                sort: Some("instructions".into()),
                limit: Some(300),
                ..FlatQuery::default()
            },
        )
        .unwrap()
    });
    time("flat by instruction, another sort", Some(floor), || {
        views::flat(
            &p,
            &FlatQuery {
                by: By::Instruction,
                sort: Some("instructions".into()),
                limit: Some(300),
                ..FlatQuery::default()
            },
        )
        .unwrap()
    });
    time("flat by line, filtered", Some(floor), || {
        views::flat(
            &p,
            &FlatQuery {
                by: By::Line,
                filter: Some("function_1[0-9]+".into()),
                limit: Some(300),
                ..FlatQuery::default()
            },
        )
        .unwrap()
    });
    time("flat by instruction, filtered", Some(floor), || {
        views::flat(
            &p,
            &FlatQuery {
                by: By::Instruction,
                filter: Some("function_1[0-9]+".into()),
                limit: Some(300),
                ..FlatQuery::default()
            },
        )
        .unwrap()
    });
    let q = TreeQuery {
        min_percent: 0.5,
        ..TreeQuery::default()
    };
    time("top-down (cut at 0.5%)", Some(floor), || {
        views::top_down(&p, &q).unwrap()
    });
    time("bottom-up (cut at 0.5%)", Some(floor), || {
        views::bottom_up(&p, &q).unwrap()
    });
    let all = TreeQuery::default();
    let (v, _) = time("top-down, whole tree", Some(floor), || {
        views::top_down(&p, &all).unwrap()
    });
    println!("  ({} rows)", v.rows.len());
    let (v, _) = time("bottom-up, whole tree", Some(floor), || {
        views::bottom_up(&p, &all).unwrap()
    });
    println!("  ({} rows)", v.rows.len());
    let f = p.find_functions("ns::function_7(int)").unwrap();
    time("callers of one function", Some(floor), || {
        views::callers(&p, &f, &TreeQuery::default()).unwrap()
    });
    time("annotate one function", Some(floor), || {
        views::annotate(&p, &f, &|_| None)
    });
    time("disassemble one function", Some(floor), || {
        views::disassembly(&p, &f)
    });
    time("threads", Some(floor), || views::threads(&p));
    let mem = views::column_index(&p, "mem").unwrap();
    let (v, _) = time("flame graph layout (mem, whole width)", Some(floor), || {
        coldcache_analysis::flame::flame(&p, &coldcache_analysis::flame::FlameQuery::new(mem))
            .unwrap()
    });
    println!(
        "    ({} frames drawn, {} left out)",
        v.frames.len(),
        v.hidden_frames
    );
    let p2 = Profile::new(d2, ProfileOptions::default());
    time("diff by function", Some(floor), || {
        diff(&p, &p2, &DiffQuery::default()).unwrap()
    });
    time("diff by line", Some(floor), || {
        diff(
            &p,
            &p2,
            &DiffQuery {
                by: By::Line,
                ..DiffQuery::default()
            },
        )
        .unwrap()
    });
    // The data views, on the same dump with every instruction typed to one
    // of 64 fields of a 512-byte type (the layout view walks every record
    // of the type).
    let mut d3 = p.dump().clone();
    drop(p2);
    let mut ips: Vec<u64> = d3.records.iter().map(|r| r.ip).collect();
    ips.sort_unstable();
    ips.dedup();
    d3.data = Some(DataTypes {
        types: vec![DataType {
            name: "ns::Big".into(),
            kind: TypeKind::Struct,
            size: 512,
            members: (0..64u64)
                .map(|k| Member {
                    name: format!("f{k}"),
                    offset: 8 * k,
                    size: 8,
                    type_name: "long".into(),
                    ty: NO_TYPE,
                    ..Member::default()
                })
                .collect(),
            decl: String::new(),
        }],
        accesses: ips
            .iter()
            .enumerate()
            .map(|(i, &addr)| TypedAccess {
                addr,
                ty: 0,
                offset: 8 * (i % 64) as u64,
                size: 8,
                path: vec![(i % 64) as u32],
                ..TypedAccess::default()
            })
            .collect(),
        modules: d3.modules.iter().map(|_| String::new()).collect(),
        slots: Vec::new(),
    });
    drop(p);
    let p3 = Profile::new(d3, ProfileOptions::default());
    time("data view (every instruction typed)", Some(floor), || {
        data::data(&p3, &DataQuery::default()).unwrap()
    });
    time("layout view of the type", Some(floor), || {
        data::layout(&p3, "Big").unwrap()
    });
    time("coverage (summary line)", Some(floor), || {
        data::coverage(&p3).unwrap()
    });
}
