//! `coldcache sim` end to end on small hand-made inputs whose results are
//! computed by hand: every input format, threads on cores, bad input and
//! configuration errors as a user sees them.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_coldcache"))
}

fn dir(name: &str) -> PathBuf {
    let d =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run coldcache")
}

fn json(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "coldcache {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A one-level, direct-mapped cache of two 64-byte lines.
const TWO_LINES: &str = r#"
cores = 1
[[level]]
name = "L1"
level = 1
kind = "unified"
size = 128
line = 64
assoc = 1
"#;

#[test]
fn dinero_trace_hand_computed() {
    let d = dir("din");
    std::fs::write(d.join("two.toml"), TWO_LINES).unwrap();
    // read 0x0 (set 0), read 0x40 (set 1), write 0x80 (set 0: evicts 0x0),
    // fetch 0x1000 (set 0: evicts dirty 0x80), read 0x0 (set 0: evicts 0x1000).
    std::fs::write(d.join("t.din"), "0 0\n0 40\n1 80\n2 1000\n0 0\n").unwrap();
    let v = json(&[
        "sim",
        "--cache",
        d.join("two.toml").to_str().unwrap(),
        "--json",
        d.join("t.din").to_str().unwrap(),
    ]);
    let l1 = &v["levels"][0];
    assert_eq!(l1["accesses"], 5);
    assert_eq!(l1["hits"], 0);
    assert_eq!(l1["stats"]["evictions"], 3);
    assert_eq!(l1["stats"]["writebacks"], 1);
    assert_eq!(v["served"]["store"]["memory"], 1);
    assert_eq!(v["served"]["instr"]["records"], 1);
}

#[test]
fn two_threads_of_a_cctrace_false_share_a_line_on_jaguar() {
    use coldcache_trace::{Record, RecordKind, TraceWriter};
    let d = dir("cctrace");
    let path = d.join("t.cctrace");
    let mut w = TraceWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    w.define_thread(0, 100).unwrap();
    w.define_thread(1, 101).unwrap();
    // Thread 1 reads bytes 0..8 of line 0x1000; thread 0 then writes bytes
    // 32..40 of it twice. Only the first write invalidates (core 1's D1),
    // and the bytes are disjoint: false sharing.
    w.write(&Record::new(RecordKind::Load, 0x1000, 8).with_thread(1))
        .unwrap();
    w.write(&Record::new(RecordKind::Store, 0x1020, 8).with_thread(0))
        .unwrap();
    w.write(&Record::new(RecordKind::Store, 0x1020, 8).with_thread(0))
        .unwrap();
    w.finish().unwrap();
    let p = path.to_str().unwrap();
    let v = json(&[
        "sim",
        "--cache",
        "jaguar",
        "--thread-core",
        "0:0=0",
        "--thread-core",
        "0:1=1",
        "--json",
        p,
    ]);
    assert_eq!(v["coherence"]["invalidations"], 1);
    assert_eq!(v["coherence"]["false_sharing"], 1);
    assert_eq!(v["coherence"]["sent_by_core"][0], 1);
    assert_eq!(v["coherence"]["received_by_core"][1], 1);
    assert_eq!(v["shared_lines"][0]["line"], 0x1000);
    // Same module: the L2 keeps the line, so core 1 would hit it there.
    // Put thread 1 in the other module: its module's L2 copy goes too.
    let v = json(&[
        "sim",
        "--cache",
        "jaguar",
        "--thread-core",
        "0:0=0",
        "--thread-core",
        "0:1=4",
        "--json",
        p,
    ]);
    assert_eq!(v["coherence"]["invalidations"], 2);
}

#[test]
fn lackey_trace_cachegrind_events_hand_computed() {
    let d = dir("lackey");
    let t = d.join("t.lackey");
    // Two fetches of one line, a load that straddles two D1 lines (one
    // miss: Cachegrind counts it once), a modify of the same line (a hit,
    // counted as a read), a store elsewhere (a miss).
    std::fs::write(
        &t,
        "==1== banner\nI  00400000,4\nI  00400004,4\n L 00001038,16\n M 00001040,8\n S 00002000,8\n==1== end\n",
    )
    .unwrap();
    let v = json(&[
        "sim",
        "--cache",
        "cachegrind",
        "--json",
        t.to_str().unwrap(),
    ]);
    let cg = v["cachegrind"].as_object().unwrap();
    let keys: Vec<&str> = cg.keys().map(String::as_str).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    let mut want = vec![
        "Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw",
    ];
    want.sort();
    assert_eq!(sorted, want, "exactly Cachegrind's event names");
    let get = |k: &str| cg[k].as_u64().unwrap();
    assert_eq!((get("Ir"), get("I1mr"), get("ILmr")), (2, 1, 1));
    assert_eq!((get("Dr"), get("D1mr"), get("DLmr")), (2, 1, 1));
    assert_eq!((get("Dw"), get("D1mw"), get("DLmw")), (1, 1, 1));
}

#[test]
fn a_bad_line_names_the_file_and_line_and_skip_bad_counts_it() {
    let d = dir("bad");
    let t = d.join("bad.lackey");
    std::fs::write(
        &t,
        "I  00400000,4\n L 00001000,8\n L 0000g000,8\n S 00002000,8\n",
    )
    .unwrap();
    let out = run(&["sim", t.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("bad.lackey:3"), "{e}");
    assert!(e.contains("hex"), "{e}");
    let v = json(&["sim", "--skip-bad", "--json", t.to_str().unwrap()]);
    assert_eq!(v["skipped_lines"], 1);
    assert_eq!(v["records"], 3);
}

#[test]
fn empty_and_binary_inputs_are_refused_by_name() {
    let d = dir("empty");
    let empty = d.join("empty.lackey");
    std::fs::write(&empty, "").unwrap();
    let e = stderr(&run(&["sim", empty.to_str().unwrap()]));
    assert!(e.contains("empty.lackey") && e.contains("empty"), "{e}");
    let garbage = d.join("garbage.bin");
    std::fs::write(&garbage, [0u8, 159, 146, 150, 0, 1, 2, 3]).unwrap();
    let e = stderr(&run(&["sim", garbage.to_str().unwrap()]));
    assert!(
        e.contains("garbage.bin") && e.contains("not a trace"),
        "{e}"
    );
    let e = stderr(&run(&["sim", d.join("missing.lackey").to_str().unwrap()]));
    assert!(e.contains("missing.lackey"), "{e}");
}

#[test]
fn configuration_errors_say_what_is_wrong() {
    let d = dir("cfg");
    let t = d.join("t.lackey");
    std::fs::write(&t, " L 00001000,8\n").unwrap();
    let t = t.to_str().unwrap();
    let e = stderr(&run(&["sim", "--cache", "jagaur", t]));
    assert!(e.contains("did you mean \"jaguar\""), "{e}");
    let e = stderr(&run(&[
        "sim",
        "--cache",
        "jaguar",
        "--thread-core",
        "0=8",
        t,
    ]));
    assert!(e.contains("8 cores"), "{e}");
    let e = stderr(&run(&["sim", "--D1", "32768,8", t]));
    assert!(e.contains("--D1") && e.contains("SIZE,ASSOC,LINE"), "{e}");
    let bad = d.join("bad.toml");
    std::fs::write(
        &bad,
        "cores = 1\n[[level]]\nlevel = 1\nkind = \"unified\"\nsize = \"32Q\"\nassoc = 8\n",
    )
    .unwrap();
    let e = stderr(&run(&["sim", "--cache", bad.to_str().unwrap(), t]));
    assert!(e.contains("bad.toml") && e.contains("size"), "{e}");
    // The cause is said once, though the error shows it in its own text
    // and also gives it as its source.
    let missing = d.join("missing.toml");
    let e = stderr(&run(&["sim", "--cache", missing.to_str().unwrap(), t]));
    assert!(
        e.contains("missing.toml") && e.matches("No such file or directory").count() == 1,
        "{e}"
    );
}

#[test]
fn two_traces_are_two_threads_on_two_cores() {
    let d = dir("two");
    let a = d.join("a.lackey");
    let b = d.join("b.lackey");
    // Each thread reads then writes its own half of line 0x3000.
    std::fs::write(&a, " L 00003000,8\n S 00003000,8\n").unwrap();
    std::fs::write(&b, " L 00003020,8\n S 00003020,8\n").unwrap();
    let v = json(&[
        "sim",
        "--cache",
        "sapphire-rapids",
        "--quantum",
        "1",
        "--json",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    // Order: A load, B load, A store (invalidates B: false sharing), B
    // store (invalidates A: false sharing). Private L1d and L2 per core:
    // each store removes the other core's L1d and L2 copies.
    assert_eq!(v["threads"].as_array().unwrap().len(), 2);
    assert_eq!(v["coherence"]["false_sharing"], 2);
    assert_eq!(v["coherence"]["invalidations"], 4);
}

/// Regression: `--progress`/`--no-progress` meant different things per
/// command (`sim` and `probe` had only `--no-progress`; `record` both).
/// Every command that shows progress takes both, and they mean what they
/// mean for `record`: `--progress` shows it on stderr even when stderr is
/// not a terminal, `--no-progress` never, the default only on a terminal
/// (here stderr is a pipe), the last one given wins.
#[test]
fn progress_and_no_progress_mean_the_same_in_every_command() {
    for cmd in ["record", "sim", "probe"] {
        let out = run(&[cmd, "--help"]);
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains("--progress") && help.contains("--no-progress"),
            "{cmd} --help: {help}"
        );
    }
    let trace = repo().join("examples/traces/example.lackey.gz");
    let t = trace.to_str().unwrap();
    for (flags, shown) in [
        (&[][..], false),
        (&["--progress"][..], true),
        (&["--no-progress"][..], false),
        (&["--no-progress", "--progress"][..], true),
        (&["--progress", "--no-progress"][..], false),
    ] {
        let out = bin().arg("sim").args(flags).arg(t).output().unwrap();
        assert!(out.status.success(), "{flags:?}: {}", stderr(&out));
        let e = stderr(&out);
        assert_eq!(e.contains("simulating"), shown, "sim {flags:?}: {e:?}");
    }
}

/// `--thread` belongs to `report` (tids or names); `diff` compares whole
/// captures and no longer lists an option it always refused. A name that
/// names no thread is an error listing the dump's threads.
#[test]
fn thread_selection_is_reports_and_takes_names() {
    let help = |cmd: &str| String::from_utf8_lossy(&run(&[cmd, "--help"]).stdout).into_owned();
    assert!(!help("diff").contains("--thread"), "{}", help("diff"));
    assert!(help("report").contains("--thread"));
    let sample = repo().join("crates/dump/tests/data/v4.ccdump");
    let s = sample.to_str().unwrap();
    // v4's one thread: tid 42, named main.
    let by_name = run(&["report", s, "--thread", "main", "--json"]);
    assert!(by_name.status.success(), "{}", stderr(&by_name));
    let by_tid = run(&["report", s, "--thread", "42", "--json"]);
    assert_eq!(by_name.stdout, by_tid.stdout);
    let bad = run(&["report", s, "--thread", "worker"]);
    assert!(!bad.status.success());
    let e = stderr(&bad);
    assert!(
        e.contains("worker") && e.contains("42 (main)") && e.contains("v4.ccdump"),
        "{e}"
    );
}

/// `report --view annotate` reads a function's name as `record --function`
/// does, and refuses a name (or regex) that matches several functions,
/// listing them, instead of showing them all under the first one's header
/// (issue 36: `annotate count_and_sort` merged 14 sort helpers).
#[test]
fn annotate_names_one_function() {
    let sample = repo().join("crates/dump/tests/data/v2-resolved-real.ccdump");
    let s = sample.to_str().unwrap();
    let out = run(&["report", s, "--view", "annotate", "."]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("functions match '.'") && e.contains("cmp"),
        "{e}"
    );
    let one = run(&["report", s, "--view", "annotate", "cmp"]);
    assert!(one.status.success(), "{}", stderr(&one));
}
