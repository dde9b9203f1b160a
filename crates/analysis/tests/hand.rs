//! Views of a small hand-built dump, checked against costs computed by hand.
//!
//! The dump: `main` calls `update` and `render`, both of which inline the
//! getter `get_pos`; `main` also calls `rec`, which calls itself once.
//! Records (instructions / accesses served by memory):
//!
//! | ip     | stack              | frames (inner first)        | instr | mem | thread |
//! |--------|--------------------|-----------------------------|-------|-----|--------|
//! | 0x1000 | root               | main m.c:9                  | 1     | 0   | 0 |
//! | 0x2004 | main→update        | get_pos pos.h:3, update u.c:20 | 10 | 8   | 0 |
//! | 0x2008 | main→update        | update u.c:21               | 5     | 0   | 0 |
//! | 0x3004 | main→render        | get_pos pos.h:3, render r.c:30 | 10 | 2   | 0 |
//! | 0x4004 | main→rec           | rec r.c:40                  | 2     | 0   | 0 |
//! | 0x4004 | main→rec→rec       | rec r.c:40                  | 2     | 1   | 1 |

use coldcache_analysis::diff::{diff, DiffQuery};
use coldcache_analysis::render;
use coldcache_analysis::views::{self, By, FlatQuery, Num, TreeQuery};
use coldcache_analysis::{Profile, ProfileOptions};

#[path = "common/hand_dump.rs"]
mod hand_dump;
use hand_dump::{counters, dump};

fn profile() -> Profile {
    Profile::new(dump(8), ProfileOptions::default())
}

fn col(p: &Profile, name: &str) -> usize {
    views::column_index(p, name).unwrap()
}

fn int(v: Num) -> u64 {
    match v {
        Num::Int(i) => i,
        Num::Float(f) => panic!("float {f}"),
    }
}

#[test]
fn flat_by_function_self_and_inclusive() {
    let p = profile();
    let (ins, mem) = (col(&p, "instructions"), col(&p, "mem"));
    let v = views::flat(&p, &FlatQuery::default()).unwrap();
    assert_eq!(v.sort, "mem");
    assert_eq!(int(v.totals[ins]), 30);
    assert_eq!(int(v.totals[mem]), 11);
    let row = |n: &str| v.rows.iter().find(|r| r.name == n).unwrap();
    let expect = [
        // name, self instr, self mem, incl instr, incl mem
        ("main", 1, 0, 30, 11),
        ("update", 5, 0, 15, 8),
        ("get_pos", 20, 10, 20, 10),
        ("render", 0, 0, 10, 2),
        ("rec", 4, 1, 4, 1), // recursion counted once
    ];
    for (n, si, sm, ii, im) in expect {
        let r = row(n);
        let inc = r.incl.as_ref().unwrap();
        assert_eq!(
            (
                int(r.self_[ins]),
                int(r.self_[mem]),
                int(inc[ins]),
                int(inc[mem])
            ),
            (si, sm, ii, im),
            "{n}"
        );
    }
    // Sorted by self mem: get_pos (10) first, rec (1) next.
    assert_eq!(v.rows[0].name, "get_pos");
    assert_eq!(v.rows[1].name, "rec");
    // Badness of get_pos = 10² / 20.
    let b = col(&p, "badness");
    assert_eq!(v.rows[0].self_[b], Num::Float(5.0));
    // Derived columns: d_miss_L1 of get_pos = reads served by L2 or memory.
    assert_eq!(int(v.rows[0].self_[col(&p, "d_miss_L1")]), 10);
    assert_eq!(int(v.rows[0].self_[col(&p, "d_refs")]), 20);

    let v = views::flat(
        &p,
        &FlatQuery {
            inclusive: true,
            sort: Some("instructions".into()),
            filter: Some("^(update|render)$".into()),
            limit: Some(1),
            ..FlatQuery::default()
        },
    )
    .unwrap();
    assert_eq!(v.matched, 2);
    assert_eq!(v.rows.len(), 1);
    assert_eq!(v.rows[0].name, "update");
}

#[test]
fn flat_by_line_merges_the_inlined_getter_and_by_instruction_keeps_addresses() {
    let p = profile();
    let (ins, mem) = (col(&p, "instructions"), col(&p, "mem"));
    let v = views::flat(
        &p,
        &FlatQuery {
            by: By::Line,
            ..FlatQuery::default()
        },
    )
    .unwrap();
    let top = &v.rows[0];
    assert_eq!((top.file.as_deref(), top.line), (Some("/s/pos.h"), 3));
    assert_eq!((int(top.self_[ins]), int(top.self_[mem])), (20, 10));
    assert_eq!(v.rows.len(), 4); // m.c:9, pos.h:3, u.c:21, r.c:40; no r.c:30 (all of it inlined code)
    let v = views::flat(
        &p,
        &FlatQuery {
            by: By::Instruction,
            ..FlatQuery::default()
        },
    )
    .unwrap();
    assert_eq!(v.rows[0].addr, Some(0x2004));
    assert_eq!(v.rows[0].asm.as_deref(), Some("nop"));
    let r4 = v.rows.iter().find(|r| r.addr == Some(0x4004)).unwrap();
    assert_eq!(int(r4.self_[ins]), 4);
}

/// The rows by line and by instruction are aggregated once per profile and
/// kept: a later query with another sort, filter or limit must answer as a
/// fresh profile does, with nothing of the earlier query left in the table.
#[test]
fn flat_by_line_and_instruction_asked_again_answer_as_a_fresh_profile() {
    let shared = profile();
    let json = |v: views::FlatView| serde_json::to_string(&v).unwrap();
    for by in [By::Line, By::Instruction] {
        let first = FlatQuery {
            by,
            sort: Some("mem".into()),
            filter: Some("pos".into()),
            limit: Some(1),
            ..FlatQuery::default()
        };
        let a = views::flat(&shared, &first).unwrap();
        assert_eq!(
            (a.matched, a.rows.len()),
            (if by == By::Line { 1 } else { 2 }, 1)
        );
        for second in [
            FlatQuery {
                by,
                sort: Some("instructions".into()),
                ..FlatQuery::default()
            },
            FlatQuery {
                by,
                sort: Some("badness".into()),
                filter: Some("r\\.c|main".into()),
                limit: Some(2),
                ..FlatQuery::default()
            },
            FlatQuery {
                by,
                limit: Some(0),
                ..FlatQuery::default()
            },
            first.clone(),
        ] {
            let again = views::flat(&shared, &second).unwrap();
            let fresh = views::flat(&profile(), &second).unwrap();
            assert_eq!(json(again), json(fresh), "{by:?} {second:?}");
        }
        // Every row, unfiltered, in both orders.
        let all = views::flat(
            &shared,
            &FlatQuery {
                by,
                sort: Some("instructions".into()),
                ..FlatQuery::default()
            },
        )
        .unwrap();
        let n = if by == By::Line { 4 } else { 5 };
        assert_eq!((all.matched, all.rows.len()), (n, n));
    }
}

#[test]
fn top_down_tree_is_hand_computed() {
    let p = profile();
    let mem = col(&p, "mem");
    let v = views::top_down(&p, &TreeQuery::default()).unwrap();
    let got: Vec<(u32, String, u64)> = v
        .rows
        .iter()
        .map(|r| (r.depth, r.name.clone(), int(r.incl[mem])))
        .collect();
    let want = [
        (1, "main", 11),
        (2, "update", 8),
        (3, "get_pos", 8),
        (2, "render", 2),
        (3, "get_pos", 2),
        (2, "rec", 1),
        (3, "rec", 1),
    ];
    assert_eq!(
        got,
        want.iter()
            .map(|(d, n, m)| (*d, n.to_string(), *m))
            .collect::<Vec<_>>()
    );
    assert_eq!(v.rows[1].percent, 72.73);
    // A cut-off at 15 % keeps main, update, get_pos, render, get_pos.
    let v = views::top_down(
        &p,
        &TreeQuery {
            min_percent: 15.0,
            ..TreeQuery::default()
        },
    )
    .unwrap();
    assert_eq!(v.rows.len(), 5);
}

#[test]
fn callers_of_the_getter_name_the_responsible_caller() {
    let p = profile();
    let mem = col(&p, "mem");
    let fs = p.find_functions("get_pos").unwrap();
    let v = views::callers(&p, &fs, &TreeQuery::default()).unwrap();
    let got: Vec<(u32, String, u64, f64)> = v
        .rows
        .iter()
        .map(|r| (r.depth, r.name.clone(), int(r.incl[mem]), r.percent))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, "get_pos".to_string(), 10, 100.0),
            (2, "update".to_string(), 8, 80.0),
            (3, "main".to_string(), 8, 80.0),
            (2, "render".to_string(), 2, 20.0),
            (3, "main".to_string(), 2, 20.0),
        ]
    );
    // Folded (TreeQuery::fold, the web UI's default): each caller's only
    // caller, main, with the same costs, is on the caller's row; the first
    // level keeps its callers. Same costs, two rows fewer.
    let f = views::callers(
        &p,
        &fs,
        &TreeQuery {
            fold: true,
            ..TreeQuery::default()
        },
    )
    .unwrap();
    let got: Vec<(u32, String, Vec<String>, u64, bool)> = f
        .rows
        .iter()
        .map(|r| {
            let chain = r.chain.iter().map(|c| c.name.clone()).collect();
            (
                r.depth,
                r.name.clone(),
                chain,
                int(r.incl[mem]),
                r.has_children,
            )
        })
        .collect();
    let main = || vec!["main".to_string()];
    assert_eq!(
        got,
        vec![
            (1, "get_pos".to_string(), vec![], 10, true),
            (2, "update".to_string(), main(), 8, false),
            (2, "render".to_string(), main(), 2, false),
        ]
    );
}

#[test]
fn bottom_up_starts_from_self_costs() {
    let p = profile();
    let mem = col(&p, "mem");
    let ins = col(&p, "instructions");
    let v = views::bottom_up(&p, &TreeQuery::default()).unwrap();
    let first: Vec<(String, u64, u64)> = v
        .rows
        .iter()
        .filter(|r| r.depth == 1)
        .map(|r| (r.name.clone(), int(r.incl[mem]), int(r.incl[ins])))
        .collect();
    assert_eq!(
        first,
        vec![
            ("get_pos".to_string(), 10, 20),
            ("rec".to_string(), 1, 4),
            ("update".to_string(), 0, 5),
            ("main".to_string(), 0, 1),
        ]
    );
    // rec's self costs came through rec (recursive call) and main.
    let rec_children: Vec<&str> = v
        .rows
        .iter()
        .skip_while(|r| r.name != "rec")
        .skip(1)
        .take_while(|r| r.depth > 1)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(rec_children, vec!["rec", "main", "main"]);
}

#[test]
fn annotate_marks_the_inlined_getter_call_line_as_worst() {
    let p = profile();
    let ins = col(&p, "instructions");
    let fs = p.find_functions("update").unwrap();
    let src = |path: &str| -> Option<String> {
        (path == "/s/u.c").then(|| (1..=30).map(|i| format!("line {i}\n")).collect())
    };
    let v = views::annotate(&p, &fs, &src);
    assert_eq!(v.files.len(), 1);
    let file = &v.files[0];
    assert!(file.readable);
    // Lines 18..=23 shown (context 2 around 20 and 21).
    let shown: Vec<u32> = file.lines.iter().map(|l| l.line).collect();
    assert_eq!(shown, vec![18, 19, 20, 21, 22, 23]);
    let l20 = &file.lines[2];
    assert_eq!(int(l20.costs[ins]), 10);
    assert_eq!(l20.worst, 1);
    assert_eq!(l20.badness, 6.4);
    assert_eq!(l20.inlined, vec!["get_pos".to_string()]);
    assert_eq!(l20.text.as_deref(), Some("line 20"));
    assert_eq!(file.lines[3].worst, 0);
    let asm = views::disassembly(&p, &fs);
    assert_eq!(
        asm.rows.iter().map(|r| r.addr).collect::<Vec<_>>(),
        vec![0x2004, 0x2008]
    );
    assert_eq!(asm.rows[0].inlined.as_deref(), Some("get_pos"));
    assert!(asm.rows[1].gap_before);
}

#[test]
fn threads_and_thread_filter() {
    let p = profile();
    let ins = col(&p, "instructions");
    let t = views::threads(&p);
    assert_eq!(int(t.threads[0].costs[ins]), 28);
    assert_eq!(int(t.threads[1].costs[ins]), 2);
    assert_eq!(t.cores.len(), 2);
    let q = Profile::new(
        dump(8),
        ProfileOptions {
            threads: Some(vec![100]),
            ..ProfileOptions::default()
        },
    );
    assert_eq!(q.totals()[0], 28);
    let rec = q.find_functions("rec").unwrap()[0];
    assert_eq!(q.fn_self(rec)[0], 2);
}

#[test]
fn without_inlining_the_getter_counts_to_its_callers() {
    let p = Profile::new(
        dump(8),
        ProfileOptions {
            inline: false,
            ..ProfileOptions::default()
        },
    );
    let v = views::flat(&p, &FlatQuery::default()).unwrap();
    assert_eq!(v.rows[0].name, "update");
    assert!(v.rows.iter().all(|r| r.name != "get_pos"));
}

#[test]
fn diff_shows_the_fix() {
    let before = profile();
    let after = Profile::new(dump(0), ProfileOptions::default());
    let v = diff(&before, &after, &DiffQuery::default()).unwrap();
    assert_eq!(v.rows[0].label, "get_pos (prog)");
    assert_eq!(v.rows[0].change, -8.0);
    assert_eq!(v.rows[0].relative, Some(-80.0));
    let v = diff(
        &before,
        &after,
        &DiffQuery {
            by: By::Line,
            ..DiffQuery::default()
        },
    )
    .unwrap();
    assert_eq!(v.rows[0].label, "s/pos.h:3");
    assert_eq!(v.rows[0].change, -8.0);
}

/// A fix that removes every miss leaves the "after" dump's default weight at
/// instructions: the comparison still sorts by the "before" dump's (it was
/// sorted by instructions, burying the fix), and says so.
#[test]
fn diff_sorts_by_the_before_dumps_weight() {
    let before = profile();
    let mut fixed = dump(0);
    for r in &mut fixed.records {
        // Every access served by L1: nothing reaches memory.
        let c = &r.counters;
        r.counters = counters(c[0], c[5] + c[7], 0, c[8] + c[10], 0);
    }
    let after = Profile::new(fixed, ProfileOptions::default());
    assert_eq!(views::default_sort(&after), "instructions");
    assert_eq!(views::default_sort(&before), "mem");
    let v = diff(&before, &after, &DiffQuery::default()).unwrap();
    assert_eq!(v.sort, "mem");
    assert_eq!(v.rows[0].label, "get_pos (prog)");
    let t = coldcache_analysis::render::diff(&v, &[]);
    assert!(t.lines().next().unwrap().starts_with("mem before"), "{t}");
}

#[test]
fn unresolved_dump_groups_by_called_entry() {
    let mut d = dump(8);
    d.symbols = None;
    let p = Profile::new(d, ProfileOptions::default());
    let names: Vec<String> = views::flat(&p, &FlatQuery::default())
        .unwrap()
        .rows
        .iter()
        .map(|r| r.label.clone())
        .collect();
    assert_eq!(names[0], "0x2000 in prog"); // update's 8 misses
    assert!(names.contains(&"[unknown] in prog".to_string())); // the root-level main code
}

#[test]
fn bad_queries_are_errors() {
    let p = profile();
    let e = views::flat(
        &p,
        &FlatQuery {
            sort: Some("nope".into()),
            ..FlatQuery::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("no column named 'nope'"), "{e}");
    assert!(p.find_functions("(").is_err());
    assert!(p.find_functions("zzz").is_err());
}

#[test]
fn text_tables_show_the_same_numbers_as_the_views() {
    use coldcache_analysis::render;
    let p = profile();
    let v = views::flat(&p, &FlatQuery::default()).unwrap();
    let cols = render::pick_columns(&v.columns, Some("instructions,mem,badness")).unwrap();
    let t = render::flat(&v, &cols);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["instructions", "mem", "badness", "incl:mem", "function"]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["20", "10", "5.0", "10", "get_pos"]
    );
    assert!(lines.last().unwrap().ends_with("TOTAL"));
    assert!(render::pick_columns(&v.columns, Some("nope")).is_err());

    let fs = p.find_functions("get_pos").unwrap();
    let c = views::callers(&p, &fs, &TreeQuery::default()).unwrap();
    let t = render::tree(&c, &cols);
    assert!(
        t.lines()
            .any(|l| l.trim_start().starts_with("80.0")
                && l.ends_with("  update [inlined here] ← main")),
        "{t}"
    );

    let after = Profile::new(dump(0), ProfileOptions::default());
    let d = diff(&p, &after, &DiffQuery::default()).unwrap();
    let t = render::diff(&d, &cols);
    assert!(
        t.lines().nth(1).unwrap().contains("-8") && t.lines().nth(1).unwrap().contains("-80.0%"),
        "{t}"
    );
}

#[test]
fn diff_matches_the_program_across_renamed_builds_and_keeps_same_named_functions_apart() {
    // The fixed build's executable has another name: still one row per function.
    let before = profile();
    let mut d = dump(0);
    d.modules[0].path = "/bin/prog-fixed".into();
    d.meta.program = vec!["/bin/prog-fixed".into()];
    let after = Profile::new(d, ProfileOptions::default());
    let v = diff(&before, &after, &DiffQuery::default()).unwrap();
    assert!(v.rows.iter().all(|r| r.status == "changed"), "{:?}", v.rows);
    assert_eq!(v.rows[0].label, "get_pos (prog-fixed)");
    assert_eq!(v.rows[0].change, -8.0);

    // Two functions named get_pos in one module, in different files.
    let renamed = |b_mem| {
        let mut d = dump(b_mem);
        d.symbols.as_mut().unwrap().functions[4].name = "get_pos".into();
        Profile::new(d, ProfileOptions::default())
    };
    let v = diff(&renamed(8), &renamed(0), &DiffQuery::default()).unwrap();
    let labels: Vec<&str> = v.rows.iter().map(|r| r.label.as_str()).collect();
    assert!(labels.contains(&"get_pos (prog) [s/pos.h]"), "{labels:?}");
    assert!(labels.contains(&"get_pos (prog) [s/r.c]"), "{labels:?}");
    assert_eq!(v.rows[0].label, "get_pos (prog) [s/pos.h]");
}

#[test]
fn annotate_keeps_line_zero_costs_when_the_source_is_readable() {
    let mut d = dump(8);
    // update's own instruction at 0x2008 has no line (DWARF line 0).
    let syms = d.symbols.as_mut().unwrap();
    let i = syms
        .locations
        .iter()
        .position(|l| l.addr == 0x2008)
        .unwrap();
    syms.locations[i].frames[0].line = 0;
    let p = Profile::new(d, ProfileOptions::default());
    let ins = col(&p, "instructions");
    let fs = p.find_functions("update").unwrap();
    let src = |path: &str| -> Option<String> {
        (path == "/s/u.c").then(|| (1..=30).map(|i| format!("line {i}\n")).collect())
    };
    let v = views::annotate(&p, &fs, &src);
    let lines = &v.files[0].lines;
    let sum: u64 = lines.iter().map(|l| int(l.costs[ins])).sum();
    assert_eq!(sum, 15, "every cost is on a shown line");
    assert_eq!(lines[0].line, 0);
    assert_eq!(int(lines[0].costs[ins]), 5);
    assert!(lines[0].text.is_none());
}

#[test]
fn flame_layout_by_hand() {
    use coldcache_analysis::flame::{flame, FlameQuery};
    let p = profile();
    let ins = col(&p, "instructions");
    let v = flame(&p, &FlameQuery::new(ins)).unwrap();
    assert_eq!((v.total, v.root_value), (30, 30));
    assert!(v.path.is_empty());
    let name = |f: u32| v.names[&f].as_str();
    // (depth, name, start, width, self): children side by side from the
    // parent's left edge in alphabetical order, self weight on the right.
    let got: Vec<(u32, &str, u64, u64, u64)> = v
        .frames
        .iter()
        .map(|f| (f.depth, name(f.function), f.start, f.value, f.self_))
        .collect();
    assert_eq!(
        got,
        [
            (1, "main", 0, 30, 1),
            (2, "rec", 0, 4, 2),
            (2, "render", 4, 10, 0),
            (2, "update", 14, 15, 5),
            (3, "rec", 0, 2, 2),
            (3, "get_pos", 4, 10, 10),
            (3, "get_pos", 14, 10, 10),
        ]
    );
    assert_eq!((v.max_depth, v.hidden_frames, v.cut_depth), (3, 0, None));
    // Frame ids are the top-down tree's node ids.
    let td = views::top_down(&p, &TreeQuery::default()).unwrap();
    let update = td.rows.iter().find(|r| r.name == "update").unwrap().id;
    assert_eq!(v.frames[3].node, update);
    assert_eq!(v.frames[6].parent, update);
    assert_eq!(v.frames[0].parent, 0);

    // Zoomed into update: the path above it spans the width.
    let mut q = FlameQuery::new(ins);
    q.root = update;
    let z = flame(&p, &q).unwrap();
    assert_eq!(z.root_value, 15);
    let path: Vec<(&str, u64)> = z
        .path
        .iter()
        .map(|f| (z.names[&f.function].as_str(), f.value))
        .collect();
    assert_eq!(path, [("main", 30), ("update", 15)]);
    assert_eq!(z.frames.len(), 1);
    assert_eq!(
        (z.frames[0].depth, z.frames[0].start, z.frames[0].value),
        (3, 0, 10)
    );

    // By mem (11) with frames under a tenth left out: rec (1) is hidden.
    let mut q = FlameQuery::new(col(&p, "mem"));
    q.min_fraction = 0.1;
    let m = flame(&p, &q).unwrap();
    let got: Vec<(&str, u64, u64)> = m
        .frames
        .iter()
        .map(|f| (m.names[&f.function].as_str(), f.start, f.value))
        .collect();
    assert_eq!(
        got,
        [
            ("main", 0, 11),
            ("render", 0, 2),
            ("update", 2, 8),
            ("get_pos", 0, 2),
            ("get_pos", 2, 8)
        ]
    );
    assert_eq!((m.hidden_frames, m.hidden_value), (1, 1));

    // At most 4 frames: the third level is cut whole.
    let mut q = FlameQuery::new(ins);
    q.max_frames = 4;
    let c = flame(&p, &q).unwrap();
    assert_eq!((c.frames.len(), c.max_depth, c.cut_depth), (4, 2, Some(3)));
    // With frames under 3 left out as well: the narrow rec (2) of the cut
    // level is not counted as left out for narrowness (its level is cut).
    q.min_fraction = 0.1;
    let c = flame(&p, &q).unwrap();
    assert_eq!((c.frames.len(), c.cut_depth), (4, Some(3)));
    assert_eq!((c.hidden_frames, c.hidden_value), (0, 0));

    // A node that does not exist is refused.
    q.root = 1000;
    assert!(flame(&p, &q).is_err());
}

#[test]
fn flame_compare_matches_call_paths_by_hand() {
    use coldcache_analysis::flame::{flame_compare, FlameQuery};
    // Before: update's inlined get_pos has 8 misses; after: none.
    let before = profile();
    let after = Profile::new(dump(0), ProfileOptions::default());
    let q = FlameQuery::new(col(&before, "mem"));
    let v = flame_compare(&before, &after, &q).unwrap();
    assert_eq!((v.total, v.other_total), (11, Some(3)));
    let got: Vec<(u32, &str, u64, Option<u64>)> = v
        .frames
        .iter()
        .map(|f| (f.depth, v.names[&f.function].as_str(), f.value, f.other))
        .collect();
    assert_eq!(
        got,
        [
            (1, "main", 11, Some(3)),
            (2, "rec", 1, Some(1)),
            (2, "render", 2, Some(2)),
            (2, "update", 8, Some(0)),
            (3, "rec", 1, Some(1)),
            (3, "get_pos", 2, Some(2)),
            (3, "get_pos", 8, Some(0)),
        ]
    );
    // The other way round, update has no misses left and is not drawn.
    let v = flame_compare(&after, &before, &FlameQuery::new(col(&after, "mem"))).unwrap();
    let got: Vec<(&str, u64, Option<u64>)> = v
        .frames
        .iter()
        .map(|f| (v.names[&f.function].as_str(), f.value, f.other))
        .collect();
    assert_eq!(
        got,
        [
            ("main", 3, Some(11)),
            ("rec", 1, Some(1)),
            ("render", 2, Some(2)),
            ("rec", 1, Some(1)),
            ("get_pos", 2, Some(2)),
        ]
    );
    // Zoomed into render: the path's frames carry the other side too.
    let render = v.frames[2].node;
    let mut q = FlameQuery::new(col(&after, "mem"));
    q.root = render;
    let z = flame_compare(&after, &before, &q).unwrap();
    let path: Vec<Option<u64>> = z.path.iter().map(|f| f.other).collect();
    assert_eq!(path, [Some(11), Some(2)]);
}

#[test]
fn flame_compare_tells_functions_of_one_identity_apart_by_entry_line() {
    use coldcache_analysis::flame::{flame_compare, FlameQuery};
    // render renamed `update` and moved into u.c: main calls two functions
    // of one identity (name, module, file), entered at lines 19 and 29, as
    // two closures of one function would be.
    let twin = |b_mem, render_line| {
        let mut d = dump(b_mem);
        let f = &mut d.symbols.as_mut().unwrap().functions[3];
        f.name = "update".into();
        f.file = 1;
        f.line = render_line;
        Profile::new(d, ProfileOptions::default())
    };
    // (width, other side) of the frames at `depth` whose label starts
    // with `name`.
    let at = |v: &coldcache_analysis::flame::FlameView, depth: u32, name: &str| {
        v.frames
            .iter()
            .filter(|f| f.depth == depth && v.names[&f.function].starts_with(name))
            .map(|f| (f.value, f.other))
            .collect::<Vec<_>>()
    };
    let (before, after) = (twin(8, 29), twin(0, 29));
    let q = FlameQuery::new(col(&before, "mem"));
    let v = flame_compare(&before, &after, &q).unwrap();
    // Each update keeps its own other side: 8 → 0 and 2 → 2 (one map by
    // identity gave both the same node).
    for (depth, name) in [(2, "update"), (3, "get_pos")] {
        let got = at(&v, depth, name);
        assert_eq!(got.len(), 2, "{name}: {got:?}");
        assert!(got.contains(&(8, Some(0))), "{name}: {got:?}");
        assert!(got.contains(&(2, Some(2))), "{name}: {got:?}");
    }

    // The second moved to line 31 in the other build: no line to match, so
    // it gets both candidates' sum (0 + 2), the first still its own line.
    let moved = twin(0, 31);
    let v = flame_compare(&before, &moved, &q).unwrap();
    let got = at(&v, 2, "update");
    assert!(got.contains(&(8, Some(0))), "{got:?}");
    assert!(got.contains(&(2, Some(2))), "{got:?}");
}

/// A dump whose counter names are not coldcache's layout for its levels (a
/// foreign or older writer) gets its raw counters only, no derived column,
/// and the documented default weight: instructions when it has a counter of
/// that name, else its first counter.
#[test]
fn a_foreign_counter_list_gets_raw_columns_and_the_documented_default() {
    use coldcache_analysis::columns;
    let mut d = dump(8);
    // Same count, one name changed: not the standard list any more.
    d.meta.counters[4] = "i_dram".into();
    let names = d.meta.counters.clone();
    let p = Profile::new(d, ProfileOptions::default());
    assert_eq!(p.layout(), None);
    let got: Vec<&str> = p.columns().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(got, names.iter().map(String::as_str).collect::<Vec<_>>());
    for derived in ["d_refs", "d_miss_L1", "i_miss_L1", "mem", "badness"] {
        assert!(p.column(derived).is_none(), "{derived}");
    }
    assert_eq!(p.default_weight().name, "instructions");
    let v = views::flat(&p, &FlatQuery::default()).unwrap();
    assert_eq!(v.sort, "instructions");
    // By self instructions (hand table): get_pos 20, then update 5.
    assert_eq!(v.rows[0].name, "get_pos");
    assert_eq!(v.rows[1].name, "update");
    // Every raw column is shown by default.
    let all: Vec<usize> = (0..names.len()).collect();
    assert_eq!(render::default_columns(&v.columns), all);

    // Without a counter named instructions: the first counter.
    let mut d = dump(8);
    for (i, n) in d.meta.counters.iter_mut().enumerate() {
        *n = format!("ev{i}");
    }
    let p = Profile::new(d, ProfileOptions::default());
    assert_eq!(p.default_weight().name, "ev0");
    assert_eq!(
        columns::default_weight(p.columns(), p.totals()),
        0,
        "first column"
    );
}

/// The default weight is `mem` only when something was served by memory:
/// a dump whose accesses all hit sorts by instructions.
#[test]
fn the_default_weight_is_instructions_when_nothing_reached_memory() {
    let p = profile();
    assert_eq!(p.default_weight().name, "mem");
    let mut d = dump(8);
    for r in &mut d.records {
        // i_mem, r_mem, w_mem of the 2-level layout (hand-counted offsets).
        for i in [4, 7, 10] {
            r.counters[i] = 0;
        }
    }
    let p = Profile::new(d, ProfileOptions::default());
    assert!(p.layout().is_some());
    assert!(p.column("mem").is_some());
    assert_eq!(p.default_weight().name, "instructions");
    assert_eq!(views::default_sort(&p), "instructions");
}

/// Rows by instruction with [`FlatQuery::asm`] (what `report --by
/// instruction` and the UI ask for) give each instruction at objdump's file
/// address — its run-time address less its module's load bias, by hand
/// 0x2004 - 0x1000 — in the syntax asked, in the label the filter matches
/// too; a module of unknown bias, or no options, keeps run-time addresses
/// and (no options) iced's Intel text.
#[test]
fn flat_by_instruction_gives_objdumps_addresses_in_the_syntax_asked() {
    let mut d = dump(8);
    let syms = d.symbols.as_mut().unwrap();
    let l = syms
        .locations
        .iter_mut()
        .find(|l| l.addr == 0x2004)
        .unwrap();
    l.code = vec![0x8b, 0x47, 0x08]; // mov eax,[rdi+8]
    let p = Profile::new(d, ProfileOptions::default());
    let q = |asm: Option<views::AsmOptions>, filter: Option<&str>| FlatQuery {
        by: By::Instruction,
        asm,
        filter: filter.map(str::to_string),
        ..FlatQuery::default()
    };
    let with = |syntax, bias| views::AsmOptions {
        syntax,
        load_bias: vec![bias],
    };
    let v = views::flat(
        &p,
        &q(Some(with(views::AsmSyntax::Att, Some(0x1000))), None),
    )
    .unwrap();
    let top = &v.rows[0];
    assert_eq!((top.addr, top.file_addr), (Some(0x2004), Some(0x1004)));
    assert!(top.label.starts_with("0x1004 get_pos"), "{}", top.label);
    assert_eq!(top.asm.as_deref(), Some("mov    0x8(%rdi),%eax"));
    let v = views::flat(
        &p,
        &q(
            Some(with(views::AsmSyntax::Intel, Some(0x1000))),
            Some("^0x1004 "),
        ),
    )
    .unwrap();
    assert_eq!(v.rows.len(), 1, "the filter sees the file address");
    assert_eq!(v.rows[0].asm.as_deref(), Some("mov    eax,[rdi+0x8]"));
    let v = views::flat(&p, &q(Some(with(views::AsmSyntax::Att, None)), None)).unwrap();
    assert_eq!((v.rows[0].addr, v.rows[0].file_addr), (Some(0x2004), None));
    assert!(
        v.rows[0].label.starts_with("0x2004 get_pos"),
        "{}",
        v.rows[0].label
    );
    let v = views::flat(&p, &q(None, None)).unwrap();
    assert!(
        v.rows[0].label.starts_with("0x2004 get_pos"),
        "{}",
        v.rows[0].label
    );
    assert_eq!(v.rows[0].asm.as_deref(), Some("mov     eax,[rdi+8]"));
}

#[test]
fn a_symbol_and_its_alias_at_one_entry_are_one_function() {
    // A second symbol at update's entry (as glibc's `__GI_` aliases), which
    // names update's instruction 0x2008: one row, one node, not two.
    let mut d = dump(8);
    let syms = d.symbols.as_mut().unwrap();
    syms.functions.push(coldcache_dump::Function {
        name: "update".into(),
        module: 0,
        entry: 0x2000,
        file: 1,
        line: 19,
    });
    let alias = syms.functions.len() as u32 - 1;
    let i = syms
        .locations
        .iter()
        .position(|l| l.addr == 0x2008)
        .unwrap();
    syms.locations[i].frames[0].function = alias;
    let p = Profile::new(d, ProfileOptions::default());
    let ins = col(&p, "instructions");
    let v = views::flat(&p, &FlatQuery::default()).unwrap();
    let rows: Vec<_> = v.rows.iter().filter(|r| r.name == "update").collect();
    assert_eq!(rows.len(), 1, "{:?}", v.rows);
    assert_eq!(int(rows[0].self_[ins]), 5);
    let t = views::top_down(&p, &TreeQuery::default()).unwrap();
    let nodes: Vec<_> = t.rows.iter().filter(|r| r.name == "update").collect();
    assert_eq!(nodes.len(), 1);
    assert_eq!(int(nodes[0].incl[ins]), 15);
    // Found by its name, it is one function.
    assert_eq!(p.find_functions("update").unwrap().len(), 1);
}
