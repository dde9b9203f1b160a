//! `coldcache report --view data` and `--view layout TYPE` end to end, on
//! the analysis tests' hand-made dump (`crates/analysis/tests/common/
//! data_dump.rs`, every figure counted by hand there) written to a file,
//! and the no-data message on the committed version 3 sample.

#[path = "../../analysis/tests/common/data_dump.rs"]
mod data_dump;

#[path = "common/library.rs"]
#[allow(dead_code)]
mod library;
use library::COLDCACHE;

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn dump_file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("coldcache-data-views-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, data_dump::dump().to_bytes()).unwrap();
    path
}

fn run(args: &[&str]) -> Output {
    Command::new(COLDCACHE)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "coldcache {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn report_view_data_prints_coverage_types_and_fields() {
    let d = dump_file("data.ccdump");
    let d = d.to_str().unwrap();
    let t = ok(&["report", d, "--view", "data"]);
    for want in [
        "data:      99.8% of 8392 data accesses typed, 99.8% with a field",
        "data accesses: 8392; typed 8372 (99.8%), with a field 8372 (99.8%), untyped 20 (0.2%)",
        "types of /bin/prog: 2 types, 3 of 4 memory instructions typed",
        "TOTAL of the typed instructions",
        // A dump without the line-use counters says so.
        "this dump has no line utilisation data",
    ] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
    assert!(!t.contains("used/64"), "{t}");
    // Fields ranked by mem: flags, pos.y, pos.x.
    let at = |f: &str| t.find(&format!("game::Entity{f}\n")).unwrap();
    assert!(
        at("::flags") < at("::pos.y") && at("::pos.y") < at("::pos.x"),
        "{t}"
    );
    // --json, --sort and --limit as the flat view's.
    let j: Value = serde_json::from_str(&ok(&[
        "report", d, "--view", "data", "--json", "--sort", "w_L1", "--limit", "1",
    ]))
    .unwrap();
    assert_eq!(j["sort"], "w_L1");
    assert_eq!(j["fields"].as_array().unwrap().len(), 1);
    assert_eq!(j["fields_matched"], 3);
    assert_eq!(j["fields"][0]["label"], "game::Entity::pos.x");
    assert_eq!(j["fields"][0]["writes"], 100);
    assert_eq!(j["coverage"]["untyped"], 20);
    assert!(j["total_line_use"].is_null() && j["fields"][0]["line_use"].is_null());
}

#[test]
fn report_view_layout_prints_the_type_as_pahole_does_with_its_flags() {
    let d = dump_file("layout.ccdump");
    let d = d.to_str().unwrap();
    let t = ok(&["report", d, "--view", "layout", "Entity"]);
    for want in [
        "struct game::Entity {",
        "/* XXX 92 bytes hole, try to pack */",
        "/* --- cacheline 2 boundary (128 bytes) was 32 bytes ago --- */",
        "/* padding: 29 */",
        "HOT FIELD IN A COLD LINE: flags",
        "FALSE SHARING? threads 100, 101",
    ] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
    let j: Value = serde_json::from_str(&ok(&[
        "report",
        d,
        "--view",
        "layout",
        "game::Entity",
        "--json",
    ]))
    .unwrap();
    assert_eq!(j["lines"][2]["hot"]["misses"], 8192);
    // No type given, or an unknown one: an error naming what to do.
    let out = run(&["report", d, "--view", "layout"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a type"));
    let out = run(&["report", d, "--view", "layout", "Nope"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("no data type named 'Nope'") && e.contains("game::Entity"),
        "{e}"
    );
    // The annotate view marks the field missed.
    let t = ok(&["report", d, "--view", "annotate", "update"]);
    assert!(t.contains("; game::Entity::flags"), "{t}");
}

#[test]
fn a_dump_without_data_types_says_how_to_get_them() {
    let v3 = library::repo().join("crates/dump/tests/data/v3.ccdump");
    let v3 = v3.to_str().unwrap();
    // The exit status of a view missing what it needs (as annotate's
    // without a function).
    let missing = run(&["report", v3, "--view", "annotate"]).status.code();
    assert_eq!(missing, Some(2));
    for view in ["data", "layout"] {
        let out = run(&["report", v3, "--view", view, "Entity"]);
        assert_eq!(out.status.code(), missing, "--view {view}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            e.contains(&format!("dump {v3} has no data types"))
                && e.contains(&format!("coldcache resolve {v3}")),
            "{e}"
        );
    }
    // The other views of it are as before, without a data line.
    let t = ok(&["report", v3]);
    assert!(!t.contains("data:"), "{t}");
}
