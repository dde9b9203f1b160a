//! The analysis end to end, on the CacheSim talk's two examples recorded by
//! `coldcache record` (examples/programs/pushbuffer.c and getposition.cpp,
//! simulated with examples/caches/talk-scaled.toml):
//!
//! - pushbuffer: the worst line by badness is the test of the flag that
//!   drifted into the cold line (the line is found in the source by its
//!   text); after swapping the two fields (-DFIXED) `coldcache diff` shows
//!   that line's misses gone but for the first frame's compulsory ones.
//!   Hand count: 768 textures, 8 frames; unfixed, every frame misses the
//!   flag's line of every texture; fixed, the touched set fits the L2, so
//!   only the first frame misses (768 lines).
//! - getposition: `--callers GetPosition` names UpdateAI as the caller
//!   responsible for most of the getter's misses. Hand count: UpdateAI calls
//!   it on 2048 objects in shuffled order (one miss each), CullForRendering
//!   on 384 (one miss each): 2048 / 2432 = 84.2 %.
//! - inlined_getter (issue 36): a getter inlined into BroadPhase and called
//!   out of line by Cull (`tests-programs/symbols/inlined_getter.cpp`).
//!   `--callers GetPosition` shows both callers, the inlined one marked,
//!   with the D1 misses the hand count gives (1,664 and 384); Cull's calls
//!   are 384, as Callgrind's `calls=` line says, in the views and in the
//!   Callgrind export; `--no-inline` gives Cull only; the trees start at
//!   the captured function (`--whole-stack`: at `_start`) and the text
//!   callers view puts a chain of single callers on one row.
//! - A dump still shows names and lines after its binary is deleted.
//! - Corrupted and truncated dumps get a clear error naming the file.
//!
//! Skipped with a message when gcc/g++ are missing.

#[path = "common/callgrind_totals.rs"]
mod callgrind_totals;
use callgrind_totals::callgrind_totals;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

#[path = "common/library.rs"]
mod library;
use library::{have, library, repo, COLDCACHE};

fn scratch() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("coldcache-analysis-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
    .clone()
}

fn skip(test: &str) -> bool {
    if have("gcc") && have("g++") {
        false
    } else {
        eprintln!("SKIP {test}: gcc or g++ missing");
        true
    }
}

fn build(compiler: &str, source: &str, flags: &[&str], name: &str) -> PathBuf {
    let out = scratch().join(name);
    let st = Command::new(compiler)
        .args(["-O2", "-g"])
        .args(flags)
        .arg(repo().join(source))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success(), "compiling {source} failed");
    out
}

fn run(args: &[&str]) -> Output {
    let out = Command::new(COLDCACHE)
        .args(args)
        .current_dir(scratch())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "coldcache {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(args: &[&str]) -> Value {
    serde_json::from_slice(&run(args).stdout).expect("valid JSON")
}

fn record(bin: &Path, function: &str, dump: &str) -> String {
    library();
    let cache = repo().join("examples/caches/talk-scaled.toml");
    let d = scratch().join(dump);
    run(&[
        "record",
        "--cache",
        cache.to_str().unwrap(),
        "--function",
        function,
        "-o",
        d.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    d.to_str().unwrap().to_string()
}

/// The line of `source` containing `text` (1-based).
fn line_of(source: &str, text: &str) -> u64 {
    let s = std::fs::read_to_string(repo().join(source)).unwrap();
    s.lines()
        .position(|l| l.contains(text))
        .expect("text in source") as u64
        + 1
}

fn col(v: &Value, name: &str) -> usize {
    v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

fn pushbuffer_dumps() -> &'static (String, String) {
    static D: OnceLock<(String, String)> = OnceLock::new();
    D.get_or_init(|| {
        let src = "examples/programs/pushbuffer.c";
        let before = build("gcc", src, &[], "pushbuffer");
        let after = build("gcc", src, &["-DFIXED"], "pushbuffer-fixed");
        (
            record(&before, "run_frames", "pushbuffer.ccdump"),
            record(&after, "run_frames", "pushbuffer-fixed.ccdump"),
        )
    })
}

#[test]
fn hot_flag_in_the_cold_line_is_the_worst_line_and_the_fix_removes_its_misses() {
    if skip("hot_flag") {
        return;
    }
    let (before, after) = pushbuffer_dumps();
    let flag_line = line_of(
        "examples/programs/pushbuffer.c",
        "if (t[i].flags & VISIBLE)",
    );
    let v = json(&[
        "report", before, "--by", "line", "--sort", "badness", "--json",
    ]);
    let top = &v["rows"][0];
    assert_eq!(top["line"], flag_line, "worst line: {top}");
    assert!(top["file"].as_str().unwrap().ends_with("pushbuffer.c"));
    let mem = col(&v, "mem");
    let misses = top["self"][mem].as_u64().unwrap();
    assert!(misses >= 6 * 768, "flag line misses {misses}");

    // The annotate view marks it as the worst line too.
    let a = json(&[
        "report",
        before,
        "--view",
        "annotate",
        "build_push_buffer",
        "--json",
    ]);
    let lines = a["files"][0]["lines"].as_array().unwrap();
    let worst = lines.iter().find(|l| l["worst"] == 1).unwrap();
    assert_eq!(worst["line"], flag_line);
    assert!(worst["text"].as_str().unwrap().contains("flags & VISIBLE"));
    let text = String::from_utf8(
        run(&["report", before, "--view", "annotate", "build_push_buffer"]).stdout,
    )
    .unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains(&format!(">>{flag_line}")) && l.contains("flags & VISIBLE")),
        "{text}"
    );

    // After the fix, the flag line misses only in the first frame.
    let d = json(&["diff", before, after, "--by", "line", "--json"]);
    let dm = col(&d, "mem");
    let row = d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["label"]
                .as_str()
                .unwrap()
                .ends_with(&format!("pushbuffer.c:{flag_line}"))
        })
        .expect("flag line in the diff");
    let (b, a) = (
        row["before"][dm].as_u64().unwrap(),
        row["after"][dm].as_u64().unwrap(),
    );
    assert_eq!(b, misses);
    assert!(
        a <= 768 + 16,
        "after the fix the flag line still misses {a} times"
    );
    // The two largest changes are the loop's two texture reads: the flag's
    // line and the hot line (which the flag now brings in: its misses go
    // to zero). Nothing else changes by more than a few misses.
    let data_line = line_of(
        "examples/programs/pushbuffer.c",
        "pb[0] = t[i].gpu_address;",
    );
    let mut top2: Vec<String> = d["rows"].as_array().unwrap()[..2]
        .iter()
        .map(|r| r["label"].as_str().unwrap().to_string())
        .collect();
    top2.sort();
    let mut want = vec![
        format!("programs/pushbuffer.c:{flag_line}"),
        format!("programs/pushbuffer.c:{data_line}"),
    ];
    want.sort();
    assert_eq!(top2, want);
    assert!(
        d["rows"][2]["change"].as_f64().unwrap().abs() <= 8.0,
        "{}",
        d["rows"][2]
    );
    let total_before = d["before_totals"][dm].as_u64().unwrap();
    let total_after = d["after_totals"][dm].as_u64().unwrap();
    assert!(total_after <= 768 + 64, "total misses after {total_after}");
    assert!(
        total_after * 10 <= total_before,
        "{total_before} -> {total_after}"
    );
}

#[test]
fn callers_of_the_getter_name_the_caller_responsible() {
    if skip("callers") {
        return;
    }
    let bin = build(
        "g++",
        "examples/programs/getposition.cpp",
        &[],
        "getposition",
    );
    let dump = record(&bin, "frame", "getposition.ccdump");
    let v = json(&["report", &dump, "--callers", "GetPosition", "--json"]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows[0]["name"], "SceneObject::GetPosition() const");
    let callers: Vec<(&str, f64)> = rows
        .iter()
        .filter(|r| r["depth"] == 2)
        .map(|r| (r["name"].as_str().unwrap(), r["percent"].as_f64().unwrap()))
        .collect();
    assert!(callers[0].0.starts_with("UpdateAI("), "{callers:?}");
    assert!((callers[0].1 - 84.2).abs() < 2.0, "{callers:?}");
    assert!(callers[1].0.starts_with("CullForRendering("), "{callers:?}");
    let text =
        String::from_utf8(run(&["report", &dump, "--callers", "GetPosition"]).stdout).unwrap();
    assert!(text.contains("UpdateAI("), "{text}");
}

/// Callgrind's `calls=` count from `caller` to `callee` (their names'
/// beginnings), read from a Callgrind output file with name compression.
fn callgrind_calls(path: &Path, caller: &str, callee: &str) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    let mut names: std::collections::HashMap<String, String> = Default::default();
    let mut name = |v: &str| -> String {
        let v = v.trim();
        match v.strip_prefix('(').and_then(|r| r.split_once(')')) {
            Some((id, rest)) if !rest.trim().is_empty() => {
                names.insert(id.to_string(), rest.trim().to_string());
                rest.trim().to_string()
            }
            Some((id, _)) => names.get(id).cloned().unwrap_or_default(),
            None => v.to_string(),
        }
    };
    let (mut fun, mut cfn) = (String::new(), String::new());
    let mut total = 0;
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("fn=") {
            fun = name(v);
        } else if let Some(v) = l.strip_prefix("cfn=") {
            cfn = name(v);
        } else if let Some(v) = l.strip_prefix("calls=") {
            if fun.starts_with(caller) && cfn.starts_with(callee) {
                total += v.split_whitespace().next().unwrap().parse::<u64>().unwrap();
            }
        }
    }
    total
}

#[test]
fn an_inlined_getter_is_a_call_of_its_caller_with_exact_call_counts() {
    if skip("inlined getter") {
        return;
    }
    let bin = build(
        "g++",
        "tests-programs/symbols/inlined_getter.cpp",
        &[],
        "inlined_getter",
    );
    let dump = record(&bin, "frame", "inlined_getter.ccdump");
    let v = json(&["report", &dump, "--callers", "GetPosition", "--json"]);
    let dm = col(&v, "d_miss_L1");
    let rows = v["rows"].as_array().unwrap();
    let at = |depth: u64| -> Vec<&Value> { rows.iter().filter(|r| r["depth"] == depth).collect() };
    // One function, one row: its inlined copies and its own code together.
    assert_eq!(v["functions"].as_array().unwrap().len(), 1);
    let top = at(1);
    assert_eq!(top.len(), 1, "{rows:?}");
    assert_eq!(top[0]["name"], "SceneObject::GetPosition() const");
    assert_eq!(top[0]["incl"][dm], 1664 + 384);
    let caller = |prefix: &str| -> &Value {
        at(2)
            .into_iter()
            .find(|r| r["name"].as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("no caller {prefix}: {rows:?}"))
    };
    let broad = caller("BroadPhase(");
    assert_eq!(broad["inlined"], true);
    assert_eq!(broad["incl"][dm], 1664, "hand count: one miss per object");
    assert_eq!(broad["calls"], Value::Null, "an inlined copy is no call");
    let cull = caller("Cull(");
    assert_eq!(cull["inlined"], false);
    assert_eq!(cull["incl"][dm], 384);
    assert_eq!(cull["calls"], 384);

    // Without inlined frames: the inlined copy counts to BroadPhase.
    let v = json(&[
        "report",
        &dump,
        "--callers",
        "GetPosition",
        "--json",
        "--no-inline",
    ]);
    let names: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["depth"] == 2)
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("Cull("), "{names:?}");

    // The text view: marked, and each single-caller chain on one row.
    let text =
        String::from_utf8(run(&["report", &dump, "--callers", "GetPosition"]).stdout).unwrap();
    let line = text.lines().find(|l| l.contains("BroadPhase(")).unwrap();
    assert!(
        line.contains("[inlined here]") && line.ends_with(" ← frame"),
        "{text}"
    );
    let text = String::from_utf8(
        run(&["report", &dump, "--callers", "GetPosition", "--whole-stack"]).stdout,
    )
    .unwrap();
    let line = text.lines().find(|l| l.contains("Cull(")).unwrap();
    assert!(
        line.ends_with("← frame ← main ← __libc_start_call_main ← __libc_start_main_impl ← _start"),
        "{text}"
    );

    // Trees start at the captured function; --whole-stack at _start.
    let td = json(&["report", &dump, "--view", "top-down", "--json"]);
    let first: Vec<&Value> = td["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["depth"] == 1)
        .collect();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["name"], "frame");
    assert_eq!(first[0]["calls"], 1);
    let inl = td["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["inlined"] == true)
        .unwrap();
    assert_eq!(inl["name"], "SceneObject::GetPosition() const");
    assert_eq!(inl["depth"], 3);
    let td = json(&[
        "report",
        &dump,
        "--view",
        "top-down",
        "--json",
        "--whole-stack",
    ]);
    assert_eq!(td["rows"][0]["name"], "_start");

    // Folded stacks: rooted at frame, the inlined copy marked.
    let folded = scratch().join("ig.folded");
    let folded_s = folded.to_str().unwrap();
    run(&["export", &dump, "--format", "folded", "-o", folded_s]);
    let f = std::fs::read_to_string(&folded).unwrap();
    assert!(f.lines().all(|l| l.starts_with("frame")), "{f}");
    assert!(
        f.contains("frame;BroadPhase(SceneObject const*, unsigned int);SceneObject::GetPosition() const [inlined] "),
        "{f}"
    );

    // The Callgrind export's calls= is the number of calls, as Callgrind's.
    let cg = scratch().join("ig.callgrind");
    run(&[
        "export",
        &dump,
        "--format",
        "callgrind",
        "-o",
        cg.to_str().unwrap(),
    ]);
    assert_eq!(
        callgrind_calls(&cg, "Cull(", "SceneObject::GetPosition"),
        384
    );
    assert_eq!(callgrind_calls(&cg, "frame", "Cull("), 1);
    if have("valgrind") {
        let theirs = scratch().join("ig.callgrind.out");
        let st = Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", theirs.display()))
            .arg(&bin)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(
            callgrind_calls(&theirs, "Cull(", "SceneObject::GetPosition"),
            384
        );
        assert_eq!(callgrind_calls(&theirs, "frame", "Cull("), 1);
    }
}

#[test]
fn names_lines_and_sources_survive_deleting_the_binary_and_the_source() {
    if skip("deleted binary") {
        return;
    }
    // Built from a copy of the source, which is deleted with the binary.
    let dir = scratch().join("deleted-src");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("pushbuffer.c");
    std::fs::copy(repo().join("examples/programs/pushbuffer.c"), &src).unwrap();
    let bin = scratch().join("pushbuffer-deleted");
    let st = Command::new("gcc")
        .args(["-O2", "-g"])
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success());
    let dump = record(&bin, "run_frames", "deleted.ccdump");
    std::fs::remove_file(&bin).unwrap();
    std::fs::remove_file(&src).unwrap();
    // The source view shows the flag line's text from the dump.
    let flag = line_of(
        "examples/programs/pushbuffer.c",
        "if (t[i].flags & VISIBLE)",
    );
    let v = json(&[
        "report",
        &dump,
        "--view",
        "annotate",
        "build_push_buffer",
        "--json",
    ]);
    let file = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == src.to_str().unwrap())
        .expect("the copied source is annotated");
    assert_eq!(file["embedded"], true);
    let line = file["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["line"] == flag)
        .unwrap();
    assert!(
        line["text"]
            .as_str()
            .unwrap()
            .contains("t[i].flags & VISIBLE"),
        "{line}"
    );
    assert_eq!(line["worst"], 1);
    // `resolve --no-sources` takes them out again; the binary is gone, so
    // the symbols resolved before are kept rather than lost.
    let out = run(&["resolve", &dump, "--no-sources"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("kept from an earlier resolution"), "{err}");
    assert!(err.contains("sources: not embedded"), "{err}");
    let v = json(&[
        "report",
        &dump,
        "--view",
        "annotate",
        "build_push_buffer",
        "--json",
    ]);
    let file = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == src.to_str().unwrap())
        .unwrap();
    assert_eq!(
        (&file["embedded"], &file["readable"]),
        (&false.into(), &false.into())
    );
    let v = json(&["report", &dump, "--by", "line", "--json"]);
    let top = &v["rows"][0];
    assert_eq!(top["name"], "build_push_buffer");
    assert!(top["line"].as_u64().unwrap() > 0);
    let asm = String::from_utf8(
        run(&[
            "report",
            &dump,
            "--view",
            "annotate",
            "build_push_buffer",
            "--asm",
        ])
        .stdout,
    )
    .unwrap();
    assert!(asm.contains("test"), "{asm}");
}

#[test]
fn corrupted_and_truncated_dumps_are_refused_with_the_file_named() {
    if skip("corrupted") {
        return;
    }
    let (before, _) = pushbuffer_dumps();
    let bytes = std::fs::read(before).unwrap();
    let cases = [
        (
            "truncated.ccdump",
            bytes[..bytes.len() / 2].to_vec(),
            "truncated",
        ),
        (
            "flipped.ccdump",
            {
                let mut b = bytes.clone();
                b[bytes.len() / 3] ^= 0x40;
                b
            },
            "corrupted",
        ),
        ("text.ccdump", b"hello".to_vec(), "not a coldcache dump"),
    ];
    for (name, content, what) in cases {
        let p = scratch().join(name);
        std::fs::write(&p, content).unwrap();
        let out = Command::new(COLDCACHE)
            .arg("report")
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(name) && err.contains(what), "{name}: {err}");
    }
}

#[test]
fn exports_of_a_recorded_dump_are_read_by_their_tools() {
    if skip("exports") {
        return;
    }
    let bin = build(
        "g++",
        "examples/programs/getposition.cpp",
        &[],
        "getposition-export",
    );
    let dump = record(&bin, "frame", "getposition-export.ccdump");
    let d = coldcache_dump::Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
    let totals = d.totals();
    let out = |ext: &str| {
        scratch()
            .join(format!("gp.{ext}"))
            .to_str()
            .unwrap()
            .to_string()
    };

    // Callgrind: callgrind_annotate reads it silently; its totals are the dump's.
    let cg = out("callgrind");
    run(&["export", &dump, "--format", "callgrind", "-o", &cg]);
    if have("valgrind") {
        let a = Command::new("callgrind_annotate")
            .arg(&cg)
            .output()
            .unwrap();
        assert!(a.status.success());
        assert_eq!(
            String::from_utf8_lossy(&a.stderr),
            "",
            "callgrind_annotate warned"
        );
        let text = String::from_utf8(a.stdout).unwrap();
        let line = text.lines().find(|l| l.contains("PROGRAM TOTALS")).unwrap();
        let nums: Vec<u64> = line
            .split_whitespace()
            .filter(|w| !w.starts_with('('))
            .map_while(|w| w.replace(',', "").parse().ok())
            .collect();
        // Valgrind's nine events, then coldcache's, summed by name.
        assert_eq!(nums, callgrind_totals(&d), "{line}");
        assert!(text.contains("SceneObject::GetPosition() const"));
    }

    // Folded: weights add up to the dump's total of the column.
    let folded = out("folded");
    run(&[
        "export",
        &dump,
        "--format",
        "folded",
        "--weight",
        "instructions",
        "-o",
        &folded,
    ]);
    let sum: u64 = std::fs::read_to_string(&folded)
        .unwrap()
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, totals[0]);

    let svg = out("svg");
    run(&["export", &dump, "--format", "flamegraph", "-o", &svg]);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.trim_end().ends_with("</svg>") && s.contains("UpdateAI"));

    let ss = out("speedscope.json");
    run(&["export", &dump, "--format", "speedscope", "-o", &ss]);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&ss).unwrap()).unwrap();
    assert_eq!(v["profiles"][0]["type"], "sampled");

    let js = out("json");
    run(&["export", &dump, "--format", "json", "-o", &js]);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    assert_eq!(v["format"], "coldcache-profile");
    assert_eq!(v["totals"][0].as_u64().unwrap(), totals[0]);

    // Bad requests are refused with the reason, and nothing is written.
    let bad = scratch().join("bad.folded");
    let o = Command::new(COLDCACHE)
        .args([
            "export", &dump, "--format", "folded", "--weight", "badness", "-o",
        ])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("ratio"));
    assert!(!bad.exists());
}
