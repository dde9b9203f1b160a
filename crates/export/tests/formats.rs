//! Exports of the hand-computed dump of `crates/analysis/tests/hand.rs`
//! (main → update → inlined get_pos: 8 misses, marked `[inlined]`; main → render → inlined
//! get_pos: 2; main → rec → rec: 1; 30 instructions), checked against the
//! hand counts and, for the Callgrind format, against `callgrind_annotate`
//! (Valgrind's own reader) when it is installed.

#[path = "../../analysis/tests/common/hand_dump.rs"]
mod hand_dump;

use coldcache_analysis::{Profile, ProfileOptions};
use std::collections::BTreeMap;
use std::process::Command;

fn profile() -> Profile {
    Profile::new(hand_dump::dump(8), ProfileOptions::default())
}

#[test]
fn folded_stacks_are_the_hand_counted_paths() {
    let p = profile();
    let f = coldcache_export::folded(&p, None).unwrap();
    assert_eq!(
        f,
        "main;rec;rec 1\nmain;render;get_pos [inlined] 2\nmain;update;get_pos [inlined] 8\n"
    );
    let f = coldcache_export::folded(&p, Some("instructions")).unwrap();
    let total: u64 = f
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 30);
    assert!(
        f.contains("main;update 5\n") && f.contains("main 1\n"),
        "{f}"
    );
    let e = coldcache_export::folded(&p, Some("badness")).unwrap_err();
    assert!(e.to_string().contains("ratio"), "{e}");
    let e = coldcache_export::folded(&p, Some("nope")).unwrap_err();
    assert!(e.to_string().contains("no column named 'nope'"), "{e}");
    let e = coldcache_export::folded(&p, Some("false_sharing")).unwrap_err();
    assert!(e.to_string().contains("nothing to draw"), "{e}");
}

#[test]
fn flamegraph_is_an_svg_with_the_functions() {
    let svg = String::from_utf8(coldcache_export::flamegraph(&profile(), None).unwrap()).unwrap();
    assert!(svg.starts_with("<?xml"), "{}", &svg[..40]);
    assert!(svg.trim_end().ends_with("</svg>"));
    for name in ["main", "update", "render", "get_pos [inlined]", "rec"] {
        assert!(
            svg.contains(&format!(">{name}<")) || svg.contains(&format!("{name} (")),
            "{name}"
        );
    }
}

#[test]
fn speedscope_has_the_schema_fields_and_weights_sum_to_the_total() {
    let v = coldcache_export::speedscope(&profile(), Some("mem")).unwrap();
    assert_eq!(
        v["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = v["shared"]["frames"].as_array().unwrap();
    assert!(frames.iter().all(|f| f["name"].is_string()));
    let mut total = 0;
    for prof in v["profiles"].as_array().unwrap() {
        assert_eq!(prof["type"], "sampled");
        assert_eq!(prof["unit"], "none");
        let w: u64 = prof["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(prof["endValue"].as_u64().unwrap(), w);
        assert_eq!(
            prof["samples"].as_array().unwrap().len(),
            prof["weights"].as_array().unwrap().len()
        );
        for s in prof["samples"].as_array().unwrap() {
            for i in s.as_array().unwrap() {
                assert!((i.as_u64().unwrap() as usize) < frames.len());
            }
        }
        total += w;
    }
    assert_eq!(total, 11);
    // Thread 101 ran only the recursive call: one profile per thread.
    assert_eq!(v["profiles"].as_array().unwrap().len(), 2);
}

#[test]
fn json_call_tree_has_the_hand_counted_costs() {
    let p = profile();
    let v = coldcache_export::json(&p);
    let cols: Vec<&str> = v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let mem = cols.iter().position(|c| *c == "mem").unwrap();
    let fname = |id: &serde_json::Value| {
        v["functions"][id.as_u64().unwrap() as usize]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let nodes = v["call_tree"].as_array().unwrap();
    let main = nodes.iter().find(|n| n["parent"] == 0).unwrap();
    assert_eq!(fname(&main["function"]), "main");
    assert_eq!(main["incl"][mem], 11);
    assert_eq!(v["totals"][mem], 11);
    let update = nodes
        .iter()
        .find(|n| fname(&n["function"]) == "update")
        .unwrap();
    assert_eq!(update["incl"][mem], 8);
    assert_eq!(update["self"][mem], 0);
    // get_pos under update is an inlined copy, no call; update's call ran
    // before the window (the hand dump has no row for it): 0 calls.
    assert_eq!(update["inlined"], false);
    assert_eq!(update["calls"], 0);
    let pos = nodes.iter().find(|n| n["parent"] == update["id"]).unwrap();
    assert_eq!(fname(&pos["function"]), "get_pos");
    assert_eq!(pos["inlined"], true);
    assert_eq!(pos["calls"], serde_json::Value::Null);
    // Round trip through text.
    let back: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
    assert_eq!(back, v);
}

/// callgrind_annotate's table (function name → event values), its totals
/// and its stderr.
type Annotated = (BTreeMap<String, Vec<u64>>, Vec<u64>, String);

/// Runs callgrind_annotate on `path`; `None` when it is not installed.
fn annotate(path: &std::path::Path, inclusive: bool) -> Option<Annotated> {
    let out = Command::new("callgrind_annotate")
        .arg(format!(
            "--inclusive={}",
            if inclusive { "yes" } else { "no" }
        ))
        .arg("--threshold=100")
        .arg(path)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let nums = |l: &str| -> Vec<u64> {
        l.split_whitespace()
            .filter(|w| !w.starts_with('('))
            .map_while(|w| w.replace(',', "").parse::<u64>().ok())
            .collect()
    };
    let mut fns = BTreeMap::new();
    let mut totals = Vec::new();
    for l in text.lines() {
        if l.contains("PROGRAM TOTALS") {
            totals = nums(l);
        } else if let Some((_, name)) = l.rsplit_once(':') {
            let v = nums(l);
            if !v.is_empty()
                && l.trim_start()
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit())
            {
                let name = name.split(" [").next().unwrap().trim().to_string();
                let e: &mut Vec<u64> = fns.entry(name).or_insert_with(|| vec![0; v.len()]);
                for (a, b) in e.iter_mut().zip(&v) {
                    *a += b;
                }
            }
        }
    }
    Some((fns, totals, stderr))
}

/// The Callgrind events of a two-level dump: Valgrind's names, then
/// coldcache's.
const EVENTS_2_LEVELS: [&str; 17] = [
    "Ir",
    "Dr",
    "Dw",
    "I1mr",
    "D1mr",
    "D1mw",
    "ILmr",
    "DLmr",
    "DLmw",
    "i_L2",
    "r_L2",
    "w_L2",
    "unmodelled",
    "prefetch_issued",
    "prefetch_redundant",
    "invalidations",
    "false_sharing",
];

/// Runs callgrind_annotate with `--show=EVENTS` on `text`: its program
/// totals, in the order asked; `None` when it is not installed.
fn annotate_show(text: &str, show: &str, tag: &str) -> Option<Vec<u64>> {
    let dir = std::env::temp_dir().join(format!("coldcache-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}.callgrind"));
    std::fs::write(&path, text).unwrap();
    let out = Command::new("callgrind_annotate")
        .arg(format!("--show={show}"))
        .arg("--threshold=100")
        .arg(&path)
        .output()
        .ok()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().find(|l| l.contains("PROGRAM TOTALS")).unwrap();
    Some(
        line.split_whitespace()
            .filter(|w| !w.starts_with('('))
            .map_while(|w| w.replace(',', "").parse::<u64>().ok())
            .collect(),
    )
}

/// Valgrind's event names map exactly onto the counter layout: the hand
/// dump with some accesses served by L2 and the other counters set, every
/// event's total written out by hand, read back by callgrind_annotate's
/// `--show` (one event, and all nine in another order).
#[test]
fn callgrind_events_are_valgrinds_names_with_hand_counted_totals() {
    let mut d = hand_dump::dump(8);
    // Two levels: 0 instructions, 1 unmodelled, 2-4 i_L1 i_L2 i_mem,
    // 5-7 r_*, 8-10 w_*, 11 prefetch_issued, 12 prefetch_redundant,
    // 13 invalidations, 14 false_sharing.
    d.records[0].counters[1] = 1; // 1 unmodelled
    d.records[0].counters[3] = 1; // 1 fetch served by L2
    d.records[3].counters[6] = 3; // 3 reads served by L2
    d.records[4].counters[9] = 1; // 1 write served by L2
    d.records[5].counters[11] = 4;
    d.records[5].counters[12] = 1;
    d.records[5].counters[13] = 2;
    d.records[5].counters[14] = 1;
    let p = Profile::new(d, ProfileOptions::default());
    let text = coldcache_export::callgrind(&p);
    let events_line = text.lines().find(|l| l.starts_with("events:")).unwrap();
    assert_eq!(
        events_line,
        format!("events: {}", EVENTS_2_LEVELS.join(" "))
    );
    // Valgrind's own events get no `event:` line (KCachegrind knows them
    // and derives L1m, LLm, CEst from them); coldcache's do.
    assert!(!text.contains("event: Ir "));
    assert!(text.contains("event: r_L2 : data reads"), "{text}");
    // Hand totals: Ir 30; Dr 25 + 3 = 28; Dw 4 + 1 = 5; I1mr 1 (by L2);
    // D1mr 3 (L2) + 10 (memory) = 13; D1mw 1 + 1 = 2; ILmr 0; DLmr 10;
    // DLmw 1; i_L2 1, r_L2 3, w_L2 1; unmodelled 1; prefetches 4 and 1;
    // invalidations 2; false sharing 1.
    let want = [30, 28, 5, 1, 13, 2, 0, 10, 1, 1, 3, 1, 1, 4, 1, 2, 1];
    let Some(d1mr) = annotate_show(&text, "D1mr", "d1mr") else {
        eprintln!("SKIP: callgrind_annotate not installed");
        return;
    };
    assert_eq!(d1mr, [13]);
    let nine = annotate_show(&text, "Ir,Dr,Dw,I1mr,D1mr,D1mw,ILmr,DLmr,DLmw", "nine").unwrap();
    assert_eq!(nine, want[..9]);
    let mixed = annotate_show(&text, "DLmw,false_sharing,I1mr,r_L2", "mixed").unwrap();
    assert_eq!(mixed, [1, 1, 1, 3]);
    // The `totals:` line is the same.
    let totals = text.lines().find(|l| l.starts_with("totals:")).unwrap();
    let t: Vec<u64> = totals["totals:".len()..]
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(t, want);
}

/// A dump of another counter layout exports its raw counters, under their
/// names, none of Valgrind's.
#[test]
fn callgrind_of_a_foreign_layout_has_its_raw_counters() {
    let mut d = hand_dump::dump(8);
    d.meta.counters[4] = "i_dram".into();
    let names: Vec<String> = d.meta.counters.clone();
    let p = Profile::new(d, ProfileOptions::default());
    let text = coldcache_export::callgrind(&p);
    let events_line = text.lines().find(|l| l.starts_with("events:")).unwrap();
    assert_eq!(events_line, format!("events: {}", names.join(" ")));
    let Some(t) = annotate_show(&text, "instructions,r_mem", "foreign") else {
        return;
    };
    assert_eq!(t, [30, 10]);
}

#[test]
fn callgrind_annotate_reads_it_without_warnings_with_equal_totals() {
    let p = profile();
    let text = coldcache_export::callgrind(&p);
    let dir = std::env::temp_dir().join(format!("coldcache-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hand.callgrind");
    std::fs::write(&path, &text).unwrap();
    // The events: Valgrind's nine, then coldcache's own (two levels).
    let events_line = text.lines().find(|l| l.starts_with("events:")).unwrap();
    let events: Vec<&str> = events_line["events:".len()..].split_whitespace().collect();
    assert_eq!(events, EVENTS_2_LEVELS);
    let Some((fns, totals, stderr)) = annotate(&path, false) else {
        eprintln!("SKIP: callgrind_annotate not installed");
        return;
    };
    assert_eq!(stderr, "", "callgrind_annotate warned");
    // Hand totals (see the table of crates/analysis/tests/hand.rs): 30
    // instructions, all fetches hit L1; 25 reads, 10 served by memory;
    // 4 writes, 1 served by memory; nothing served by L2.
    let want: Vec<u64> = vec![30, 25, 4, 0, 10, 1, 0, 10, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(totals, want);
    let ins = 0;
    let mem = |v: &[u64]| v[6] + v[7] + v[8]; // ILmr + DLmr + DLmw
    assert_eq!((fns["get_pos"][ins], mem(&fns["get_pos"])), (20, 10));
    assert_eq!(fns["update"][ins], 5);
    // Inclusive: self plus the arcs' inclusive costs (non-recursive ones).
    let (incl, _, stderr) = annotate(&path, true).unwrap();
    assert_eq!(stderr, "");
    for (name, i, m) in [("main", 30, 11), ("update", 15, 8), ("render", 10, 2)] {
        assert_eq!((incl[name][ins], mem(&incl[name])), (i, m), "{name}");
    }
    // Without inlining, get_pos's code counts to its callers, in its own
    // file (fi= lines), and the totals are unchanged.
    let p2 = Profile::new(
        hand_dump::dump(8),
        ProfileOptions {
            inline: false,
            threads: None,
            root: None,
        },
    );
    let text2 = coldcache_export::callgrind(&p2);
    assert!(text2.contains("\nfi="), "{text2}");
    std::fs::write(&path, &text2).unwrap();
    let (fns2, totals2, stderr2) = annotate(&path, false).unwrap();
    assert_eq!(stderr2, "");
    assert_eq!(totals2, want);
    assert!(!fns2.contains_key("get_pos"));
}

/// `calls=` lines of a Callgrind text: (caller block's `fn=` id, callee
/// `cfn=` id, the `calls=` line).
fn calls_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("calls="))
        .map(str::to_string)
        .collect()
}

/// The `calls=` line of the arc whose call site is `site` (`0x1010`).
fn calls_at(text: &str, site: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let at = (1..lines.len())
        .find(|&i| lines[i].starts_with(&format!("{site} ")) && lines[i - 1].starts_with("calls="))
        .unwrap_or_else(|| panic!("no call site {site}: {text}"));
    lines[at - 1].to_string()
}

#[test]
fn callgrind_calls_are_the_executions_of_the_call() {
    // The hand dump has no row of a call instruction or of a callee's first
    // instruction: no call ran in its window (its frames were entered
    // before), so every real arc says 0; the arcs into get_pos's inlined
    // copies (no call to count) say their one calling context.
    for inline in [true, false] {
        let p = Profile::new(
            hand_dump::dump(8),
            ProfileOptions {
                inline,
                threads: None,
                root: None,
            },
        );
        let text = coldcache_export::callgrind(&p);
        let calls = calls_lines(&text);
        assert_eq!(calls.len(), if inline { 6 } else { 4 }, "{text}");
        for site in ["0x1010", "0x1020", "0x1030", "0x4010"] {
            assert!(calls_at(&text, site).starts_with("calls=0 "), "{text}");
        }
        if inline {
            assert!(calls_at(&text, "0x2004").starts_with("calls=1 "), "{text}");
        }
    }
    // Rows for the calls: main's call of update (0x1010) ran 3 times; rec's
    // call of itself (0x4010) once in each of two stacks (main → rec → rec
    // → rec); main's call of rec (0x1030) has no row (it ran before the
    // window) but rec's entry ran once in that stack: 1.
    let mut d = hand_dump::dump(8);
    d.stacks.push(coldcache_dump::StackNode {
        parent: 4,
        call_site: 0x4010,
        callee: 0x4000,
    });
    let mut r = d.records[5].clone();
    r.stack = 5;
    d.records.push(r);
    for (ip, stack, n) in [
        (0x1010, 0, 3),
        (0x4010, 3, 1),
        (0x4010, 4, 1),
        (0x4000, 3, 1),
    ] {
        d.records.push(coldcache_dump::Record {
            ip,
            stack,
            thread: 0,
            counters: hand_dump::counters(n, 0, 0, 0, 0),
        });
    }
    d.records.sort_by_key(|r| (r.ip, r.stack, r.thread));
    let p = Profile::new(d, ProfileOptions::default());
    let text = coldcache_export::callgrind(&p);
    assert!(
        calls_at(&text, "0x1010").starts_with("calls=3 0x2000 "),
        "{text}"
    );
    assert!(
        calls_at(&text, "0x4010").starts_with("calls=2 0x4000 "),
        "{text}"
    );
    assert!(
        calls_at(&text, "0x1030").starts_with("calls=1 0x4000 "),
        "{text}"
    );
    assert!(calls_at(&text, "0x1020").starts_with("calls=0 "), "{text}");
    // The arc rec → rec counts each record once: the two records of
    // 0x4004 under it (2 + 2 instructions) and the call in stack 4 (1).
    let lines: Vec<&str> = text.lines().collect();
    let rec_rec = (1..lines.len())
        .find(|&i| lines[i].starts_with("0x4010 ") && lines[i - 1].starts_with("calls="))
        .unwrap();
    assert!(
        lines[rec_rec].starts_with("0x4010 41 5 "),
        "{}",
        lines[rec_rec]
    );
    // The views say the same: rec's node under main was called once.
    let v = coldcache_analysis::views::top_down(&p, &Default::default()).unwrap();
    let calls = |name: &str, depth: u32| {
        v.rows
            .iter()
            .find(|r| r.name == name && r.depth == depth)
            .and_then(|r| r.calls)
    };
    assert_eq!(calls("update", 2), Some(3));
    assert_eq!(calls("rec", 2), Some(1));
    assert_eq!(calls("rec", 3), Some(1));
    assert_eq!(calls("get_pos", 3), None, "an inlined copy is no call");
}

#[test]
fn callgrind_addresses_drop_the_load_bias_of_their_module() {
    let p = profile();
    let plain = coldcache_export::callgrind(&p);
    assert!(plain.contains("desc: Run-time addresses: /bin/prog (load bias unknown)"));
    let opts = coldcache_export::CallgrindOptions {
        load_bias: vec![Some(0x1000)],
        ..Default::default()
    };
    let text = coldcache_export::callgrind_with(&p, &opts);
    assert!(!text.contains("desc: Run-time addresses"));
    // main's instruction 0x1000 (m.c:9) is the file's address 0x0; the call
    // to update (made before the window: 0 calls) targets its entry
    // 0x2000 - 0x1000.
    assert!(text.lines().any(|l| l.starts_with("0x0 9 1 ")), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("calls=0 0x1000 19")),
        "{text}"
    );
    // Only addresses change: the same lines with the addresses removed.
    let strip = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with("desc: Run-time"))
            .map(|l| {
                if l.starts_with("0x") || l.starts_with("calls=") {
                    l.split(' ')
                        .filter(|w| !w.contains("0x"))
                        .collect::<Vec<_>>()
                        .join(" ")
                } else {
                    l.to_string()
                }
            })
            .collect()
    };
    assert_eq!(strip(&plain), strip(&text));
}

#[test]
fn json_functions_carry_self_and_inclusive_costs() {
    let v = coldcache_export::json(&profile());
    let cols: Vec<&str> = v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let ins = cols.iter().position(|c| *c == "instructions").unwrap();
    let mem = cols.iter().position(|c| *c == "mem").unwrap();
    let funcs = v["functions"].as_array().unwrap();
    let by_name = |n: &str| funcs.iter().find(|f| f["name"] == n).unwrap();
    // Hand counts (crates/analysis/tests/hand.rs): self and inclusive
    // instructions and mem; rec's recursion counts once.
    for (n, si, sm, ii, im) in [
        ("main", 1, 0, 30, 11),
        ("update", 5, 0, 15, 8),
        ("get_pos", 20, 10, 20, 10),
        ("render", 0, 0, 10, 2),
        ("rec", 4, 1, 4, 1),
    ] {
        let f = by_name(n);
        assert_eq!(
            (
                f["self"][ins].as_u64(),
                f["self"][mem].as_u64(),
                f["incl"][ins].as_u64(),
                f["incl"][mem].as_u64()
            ),
            (Some(si), Some(sm), Some(ii), Some(im)),
            "{n}"
        );
    }
}

/// Valgrind's files for `coldcache valgrind`: the Callgrind export with
/// Valgrind's events alone (or `Ir`), `summary:`, `thread:` and names in
/// full; the Cachegrind export in Cachegrind's event order with the same
/// hand totals (see `callgrind_events_are_valgrinds_names_with_hand_counted_totals`),
/// its per-line counts summing to them.
#[test]
fn valgrinds_own_files_have_valgrinds_events_and_the_hand_totals() {
    let mut d = hand_dump::dump(8);
    d.records[0].counters[3] = 1; // 1 fetch served by L2
    d.records[3].counters[6] = 3; // 3 reads served by L2
    d.records[4].counters[9] = 1; // 1 write served by L2
    let p = Profile::new(d, ProfileOptions::default());
    // Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw, as the test above counts.
    let nine = [30, 28, 5, 1, 13, 2, 0, 10, 1];
    assert_eq!(coldcache_export::valgrind_totals(&p), Some(nine));
    let opts = coldcache_export::CallgrindOptions {
        events: coldcache_export::EventSet::Valgrind,
        plain_names: true,
        summary: true,
        thread: Some(1),
        ..Default::default()
    };
    let text = coldcache_export::callgrind_with(&p, &opts);
    let line = |t: &str, key: &str| -> String {
        t.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {t}"))
            .trim()
            .to_string()
    };
    assert_eq!(
        line(&text, "events:"),
        "Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw"
    );
    assert_eq!(line(&text, "thread:"), "1");
    let nums =
        |s: String| -> Vec<u64> { s.split_whitespace().map(|w| w.parse().unwrap()).collect() };
    assert_eq!(nums(line(&text, "summary:")), nine);
    assert_eq!(nums(line(&text, "totals:")), nine);
    // Names in full, every time: no `(n)` compression.
    assert!(
        !text.contains("fn=(") && text.contains("fn=update"),
        "{text}"
    );
    let ir = coldcache_export::CallgrindOptions {
        events: coldcache_export::EventSet::Ir,
        summary: true,
        ..Default::default()
    };
    let text = coldcache_export::callgrind_with(&p, &ir);
    assert_eq!(line(&text, "events:"), "Ir");
    assert_eq!(line(&text, "summary:"), "30");

    let cg = coldcache_export::cachegrind(
        &p,
        &coldcache_export::CachegrindOptions {
            ir_only: false,
            caches: vec![("I1".into(), 32768, 64, 8)],
        },
    )
    .unwrap();
    assert!(cg.starts_with("desc: I1 cache:         32768 B, 64 B, 8-way associative\n"));
    assert_eq!(line(&cg, "cmd:"), p.dump().meta.program.join(" "));
    assert_eq!(
        line(&cg, "events:"),
        "Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw"
    );
    // Cachegrind's order of the same totals.
    let order = [0, 3, 6, 1, 4, 7, 2, 5, 8];
    let want: Vec<u64> = order.iter().map(|&k| nine[k]).collect();
    assert_eq!(nums(line(&cg, "summary:")), want);
    // The count lines (after `fn=`) sum to the summary.
    let mut sum = [0u64; 9];
    for l in cg
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
    {
        for (s, v) in sum.iter_mut().zip(l.split_whitespace().skip(1)) {
            *s += v.parse::<u64>().unwrap();
        }
    }
    assert_eq!(sum.to_vec(), want);
    // Without inlined functions of their own (as `coldcache valgrind`
    // asks): get_pos's lines are under the functions it was inlined into,
    // as Cachegrind counts by the symbol.
    let outer = Profile::new(
        hand_dump::dump(8),
        ProfileOptions {
            inline: false,
            ..ProfileOptions::default()
        },
    );
    let cg = coldcache_export::cachegrind(&outer, &Default::default()).unwrap();
    assert!(
        cg.contains("fn=update\n") && cg.contains("fn=render\n"),
        "{cg}"
    );
    assert!(!cg.contains("fn=get_pos"), "{cg}");
}
