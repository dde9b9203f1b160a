//! Threads interleaved in fast mode (`--schedule os`): while several
//! threads run translated code, each replays its records every 8 KiB (or
//! hands them over to the thread replaying, whose rounds take one buffer
//! of each thread in turn: `jit/handed.rs`), so the simulator sees the
//! threads' accesses alternate and coherence traffic between them shows. Before, each
//! thread's buffer (up to 1 MiB of records) was replayed whole: four
//! threads bumping counters in one cache line gave as few invalidations as
//! the padded layout (43 against 41).
//!
//! `tests-programs/real/false_sharing.c` on the `jaguar` model (8 cores,
//! coherent L1s): the packed layout must show false sharing, and at least
//! ten times the padded layout's invalidations. How many depends on how
//! the OS runs the four threads on this machine's cores (two here): under
//! load they overlap less, so a run that shows too little is tried again,
//! up to three times. The trap engine's figure for the same program
//! (about one invalidation per four increments) is in docs/capture.md; it
//! is not asserted here, as trap mode takes minutes on this program.
//!
//! Skipped with a message when gcc is missing.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use library::COLDCACHE;
use programs::{compile, gcc_or_skip, run_within, scratch_in};

/// Invalidations and false-sharing events of one fast-mode capture of
/// `run` with `layout` (`packed` or `padded`).
fn capture(program: &PathBuf, layout: &str, tag: &str) -> (u64, u64) {
    let (inval, fs, _) = capture_with(program, layout, tag, &[]);
    (inval, fs)
}

/// [`capture`] with `extra` options for `record`; also gives the dump.
fn capture_with(program: &PathBuf, layout: &str, tag: &str, extra: &[&str]) -> (u64, u64, PathBuf) {
    let dump = scratch_in("interleave", "all").join(format!("{tag}.ccdump"));
    let mut cmd = Command::new(COLDCACHE);
    cmd.arg("record")
        .args(extra)
        .args([
            "--no-resolve",
            "--mode",
            "fast",
            "--function",
            "run",
            "--threads",
            "all",
            "--cache",
            "jaguar",
            "-o",
        ])
        .arg(&dump)
        .arg("--")
        .arg(program)
        .args([layout, "200000"]);
    let out = run_within(cmd, "record false_sharing", Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "record failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("sum 800000"),
        "the program's output changed:\n{stdout}"
    );
    let report = Command::new(COLDCACHE)
        .args(["report", "--json"])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(report.status.success(), "report failed");
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let names: Vec<&str> = v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let total = |name: &str| {
        let i = names.iter().position(|&n| n == name).unwrap();
        v["totals"][i].as_u64().unwrap()
    };
    assert_eq!(total("unmodelled"), 0);
    (total("invalidations"), total("false_sharing"), dump)
}

/// The data view's objects of a dump: (label, invalidations, false
/// sharing) per row, sites and mappings.
fn object_coherence(dump: &PathBuf) -> Vec<(String, u64, u64)> {
    let report = Command::new(COLDCACHE)
        .args(["report", "--view", "data", "--json"])
        .arg(dump)
        .output()
        .unwrap();
    assert!(report.status.success(), "report --view data failed");
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let o = &v["objects"];
    assert_eq!(o["coherence"], true, "the dump counts coherence per object");
    ["sites", "others"]
        .iter()
        .flat_map(|k| o[k].as_array().unwrap().iter())
        .map(|r| {
            (
                format!(
                    "{}: {}",
                    r["kind"].as_str().unwrap(),
                    r["label"].as_str().unwrap()
                ),
                r["invalidations"].as_u64().unwrap(),
                r["false_sharing"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Issue 32: false sharing charged to the object whose line is shared.
/// With object tracking, every invalidation and false-sharing event the
/// code views count is in exactly one object's row (the sums are equal:
/// the truth is the code views' totals, counted apart from the objects),
/// the program's own globals (`fs .data/.bss`, where `packed` lives) hold
/// most of the false sharing, and padded they hold at least ten times
/// less. Measured: packed 16,603 invalidations and 11,645 false sharing
/// in that row; padded 13 and 5.
#[test]
fn false_sharing_is_charged_to_the_object_whose_line_is_shared() {
    if !gcc_or_skip("false_sharing_is_charged_to_the_object_whose_line_is_shared") {
        return;
    }
    let dir = scratch_in("interleave", "objects");
    let program = compile(
        "tests-programs/real/false_sharing.c",
        &dir.join("false_sharing"),
        &["-O2", "-g", "-pthread"],
        false,
    );
    // One capture of `layout` with object tracking: the objects' sums
    // checked against the code view's totals, then the program's globals'
    // (invalidations, false sharing), the code view's totals and the dump.
    let globals = |layout: &str, tag: String| -> ((u64, u64), (u64, u64), PathBuf) {
        let (inval, fs, dump) = capture_with(&program, layout, &tag, &["--objects"]);
        let rows = object_coherence(&dump);
        let sum = rows.iter().fold((0, 0), |a, r| (a.0 + r.1, a.1 + r.2));
        assert_eq!(
            sum,
            (inval, fs),
            "{layout}: objects' sums against the code view's totals"
        );
        let mine = rows
            .iter()
            .filter(|r| {
                r.0.starts_with("module data: false_sharing ")
                    || (r.0.starts_with("global: ") && r.0.ends_with(" (false_sharing)"))
            })
            .fold((0, 0), |a, r| (a.0 + r.1, a.1 + r.2));
        (mine, (inval, fs), dump)
    };
    let mut seen = Vec::new();
    // As in the test below: attempts until the threads ran at once.
    for attempt in 0..8 {
        let (packed, totals, packed_dump) = globals("packed", format!("objects{attempt}"));
        let (padded, padded_totals, padded_dump) =
            globals("padded", format!("objects-padded{attempt}"));
        eprintln!("attempt {attempt}: globals packed {packed:?}, padded {padded:?}");
        seen.push((packed, padded));
        // The same bar as the code view's test: the threads' overlap is
        // the OS's to decide.
        if packed.1 > 100 && packed.1 * 10 >= totals.1 * 9 && packed.1 >= 10 * padded.1.max(1) {
            // `diff --by object` compares the coherence counts: the
            // globals' row holds each dump's own figures, and the totals
            // the code views' (counted apart from the objects).
            let diff = Command::new(COLDCACHE)
                .args(["diff", "--by", "object", "--json"])
                .arg(&packed_dump)
                .arg(&padded_dump)
                .output()
                .unwrap();
            assert!(
                diff.status.success(),
                "diff --by object: {}",
                String::from_utf8_lossy(&diff.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
            let column = |name: &str| {
                v["columns"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .position(|c| c["name"] == name)
                    .unwrap_or_else(|| panic!("no column {name} in {}", v["columns"]))
            };
            let (ci, cf) = (column("invalidations"), column("false_sharing"));
            let pair =
                |vals: &serde_json::Value| (vals[ci].as_u64().unwrap(), vals[cf].as_u64().unwrap());
            assert_eq!(pair(&v["before_totals"]), totals, "before: the totals");
            assert_eq!(pair(&v["after_totals"]), padded_totals, "after: the totals");
            // The program's globals and data mappings (`.data`, `.bss`).
            let rows: Vec<&serde_json::Value> = v["rows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| {
                    let l = r["label"].as_str().unwrap();
                    (l.starts_with("module data: ") && l.contains("<program>"))
                        || l.starts_with("global: <program> ")
                })
                .collect();
            assert!(
                !rows.is_empty(),
                "no row of the program's data: {}",
                v["rows"]
            );
            let sum = |side: &str| {
                rows.iter().fold((0, 0), |a, r| {
                    let (i, f) = pair(&r[side]);
                    (a.0 + i, a.1 + f)
                })
            };
            assert_eq!(sum("before"), packed, "before: the globals");
            assert_eq!(sum("after"), padded, "after: the globals");
            return;
        }
    }
    panic!("false sharing was not charged to the globals: {seen:?}");
}

#[test]
fn false_sharing_shows_in_fast_mode_and_padding_removes_it() {
    if !gcc_or_skip("false_sharing_shows_in_fast_mode_and_padding_removes_it") {
        return;
    }
    let dir = scratch_in("interleave", "all");
    let program = compile(
        "tests-programs/real/false_sharing.c",
        &dir.join("false_sharing"),
        &["-O2", "-g", "-pthread"],
        false,
    );
    let mut seen = Vec::new();
    // The four threads must run at once for their counters to be shared:
    // on a loaded 2-core machine the OS may run them one after another,
    // and did in three attempts in a row once under CI; each attempt
    // takes about half a second.
    for attempt in 0..8 {
        let (inval_packed, fs_packed) = capture(&program, "packed", &format!("packed{attempt}"));
        let (inval_padded, fs_padded) = capture(&program, "padded", &format!("padded{attempt}"));
        eprintln!(
            "attempt {attempt}: packed {inval_packed} invalidations, {fs_packed} false sharing; \
             padded {inval_padded} invalidations, {fs_padded} false sharing"
        );
        seen.push((inval_packed, fs_packed, inval_padded));
        if fs_packed > 100 && inval_packed >= 10 * inval_padded.max(1) {
            return;
        }
    }
    panic!(
        "false sharing did not show in fast mode (packed invalidations, packed false-sharing \
         events, padded invalidations per attempt): {seen:?}"
    );
}
