//! The timeline of a capture (`record --timeline`, dump section `TIME`)
//! and its Chrome/Perfetto export, end to end on
//! tests-programs/timeline/calls.c, whose calls are known by hand: `work`
//! calls a() three times (each a() calls c()) and b() once.
//!
//! - The export's `B`/`E` sequence on the thread equals the hand sequence;
//!   the durations (instructions) of each function's calls sum to its
//!   inclusive instructions in the profile (`export --format json`, the
//!   numbers `report` prints); the counter tracks' samples sum to the
//!   dump's totals; c's and b's intervals read their arrays (50 and 300
//!   words) plus the return address.
//! - Fast mode's timeline equals trap mode's (address-space randomisation
//!   off, so both runs see the same addresses).
//! - Two threads running `work` give two tracks, each with the sequence.
//! - A limit (`COLDCACHE_TIMELINE_LIMIT`) drops events: counted in the
//!   dump, shown by `report`'s header and by the export (stderr, the
//!   trace's metadata, a marker on the timeline).
//! - A dump without a timeline is refused, naming the dump and the flag.
//!
//! Every trace is checked as Chrome's trace-event format requires (JSON
//! object with `traceEvents`; each event's phase, pid, tid, numeric ts;
//! per thread, `E` closes the innermost open `B` of the same name, ts never
//! decreasing). Perfetto's trace_processor is not available offline, so
//! no Perfetto tool reads it here.
//!
//! Skipped with a message when gcc or setarch is missing.

#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;

use dumps::{load, text};
use library::{library, COLDCACHE};
use programs::{compile, gcc_and_setarch_or_skip, run_within, scratch_in};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const SOURCE: &str = "tests-programs/timeline/calls.c";
const LIMIT: Duration = Duration::from_secs(60);

/// The hand sequence of one call of `work`.
const WORK: [&str; 16] = [
    "B work", "B a", "B c", "E c", "E a", "B a", "B c", "E c", "E a", "B a", "B c", "E c", "E a",
    "B b", "E b", "E work",
];

fn hand() -> Vec<&'static str> {
    WORK.to_vec()
}

fn build(dir: &Path) -> PathBuf {
    compile(
        SOURCE,
        &dir.join("calls"),
        &["-O1", "-g", "-pthread"],
        false,
    )
}

fn coldcache(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(COLDCACHE);
    cmd.args(args).current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_within(cmd, &format!("coldcache {args:?}"), LIMIT)
}

fn ok(o: Output, what: &str) -> Output {
    assert!(
        o.status.success(),
        "{what} failed:\n{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    o
}

/// `coldcache record --timeline` under `setarch -R`, with `args` before
/// the program.
fn record(dir: &Path, dump: &str, args: &[&str], prog: &[&str], env: &[(&str, &str)]) {
    library();
    let mut cmd = Command::new("setarch");
    cmd.args(["-R", COLDCACHE, "record", "--timeline", "-o", dump])
        .args(args)
        .arg("--")
        .args(prog)
        .current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    ok(run_within(cmd, "record", LIMIT), "record");
}

/// Exports `dump` as perfetto to the default name and reads it back,
/// checked as a Chrome trace; also gives the export's stderr.
fn perfetto(dir: &Path, dump: &str) -> (Value, String) {
    let o = ok(
        coldcache(dir, &["export", dump, "--format", "perfetto"], &[]),
        "export",
    );
    let stem = dump.strip_suffix(".ccdump").unwrap_or(dump);
    let path = dir.join(format!("{stem}.perfetto.json"));
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    check_chrome_trace(&v);
    (v, text(&o.stderr))
}

/// Chrome's trace-event format, as far as this export uses it.
fn check_chrome_trace(v: &Value) {
    let events = v["traceEvents"].as_array().expect("traceEvents array");
    let mut open: std::collections::HashMap<u64, (Vec<String>, f64)> = Default::default();
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(["M", "B", "E", "C", "i"].contains(&ph), "{e}");
        assert!(e["pid"].is_u64(), "{e}");
        if ph == "M" {
            assert!(e["args"]["name"].is_string(), "{e}");
            continue;
        }
        let ts = e["ts"].as_f64().unwrap_or_else(|| panic!("ts: {e}"));
        let tid = e["tid"].as_u64().unwrap_or_else(|| panic!("tid: {e}"));
        let name = e["name"].as_str().expect("name").to_string();
        match ph {
            "B" | "E" => {
                let (stack, last) = open.entry(tid).or_insert((Vec::new(), 0.0));
                assert!(ts >= *last, "ts went back on {tid}: {e}");
                *last = ts;
                if ph == "B" {
                    stack.push(name);
                } else {
                    assert_eq!(stack.pop().as_deref(), Some(name.as_str()), "{e}");
                }
            }
            "C" => {
                let args = e["args"].as_object().expect("counter args");
                assert!(args.values().all(Value::is_u64), "{e}");
            }
            _ => {}
        }
    }
    for (tid, (stack, _)) in open {
        assert!(stack.is_empty(), "thread {tid} ends with {stack:?} open");
    }
}

/// The thread's B/E events as `B name` / `E name`, with their ts.
fn slices(v: &Value, tid: u64) -> Vec<(String, u64)> {
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tid"].as_u64() == Some(tid) && matches!(e["ph"].as_str(), Some("B" | "E")))
        .map(|e| {
            (
                format!(
                    "{} {}",
                    e["ph"].as_str().unwrap(),
                    e["name"].as_str().unwrap()
                ),
                e["ts"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn tids(v: &Value) -> Vec<u64> {
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect()
}

/// The sum of counter arg `arg` over the track `track (tid N)`, and the
/// samples in order.
fn counter(v: &Value, track: &str, tid: u64, arg: &str) -> Vec<u64> {
    let name = format!("{track} (tid {tid})");
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == name.as_str())
        .map(|e| e["args"][arg].as_u64().unwrap())
        .collect()
}

/// Sum of the dump's counters whose names `pick` accepts.
fn total(d: &coldcache_dump::Dump, pick: impl Fn(&str) -> bool) -> u64 {
    let t = d.totals();
    d.meta
        .counters
        .iter()
        .zip(&t)
        .filter(|(n, _)| pick(n))
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn the_timeline_is_the_hand_sequence_with_reports_durations_and_the_dumps_totals() {
    if !gcc_and_setarch_or_skip("timeline") {
        return;
    }
    let dir = scratch_in("timeline", "hand");
    build(&dir);
    record(
        &dir,
        "hand.ccdump",
        &["--function", "work"],
        &["./calls"],
        &[],
    );
    let d = load(&dir.join("hand.ccdump"));
    let (v, _) = perfetto(&dir, "hand.ccdump");
    let tid = u64::from(d.threads[0].tid);
    assert_eq!(tids(&v), [tid]);
    let s = slices(&v, tid);
    let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, hand());
    // Durations: each function's calls summed equal its inclusive
    // instructions in the profile every view is drawn from.
    let json: Value = serde_json::from_slice(
        &ok(
            coldcache(
                &dir,
                &["export", "hand.ccdump", "--format", "json", "-o", "-"],
                &[],
            ),
            "export json",
        )
        .stdout,
    )
    .unwrap();
    let col = json["columns"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| c["name"] == "instructions")
        .unwrap();
    for f in ["work", "a", "b", "c"] {
        let mut open = Vec::new();
        let mut sum = 0;
        for (n, ts) in &s {
            if n == &format!("B {f}") {
                open.push(*ts);
            } else if n == &format!("E {f}") {
                sum += ts - open.pop().unwrap();
            }
        }
        let incl = json["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == f)
            .unwrap()["incl"][col]
            .as_u64()
            .unwrap();
        assert_eq!(
            sum, incl,
            "{f}: durations against the profile's inclusive instructions"
        );
    }
    assert_eq!(s.last().unwrap().1, d.meta.instructions);
    // The counter tracks sum to the dump's totals.
    let sum = |track: &str, arg: &str| -> u64 { counter(&v, track, tid, arg).iter().sum() };
    assert_eq!(
        sum("accesses", "instruction fetches"),
        total(&d, |n| n.starts_with("i_"))
    );
    assert_eq!(
        sum("accesses", "data reads"),
        total(&d, |n| n.starts_with("r_"))
    );
    assert_eq!(
        sum("accesses", "data writes"),
        total(&d, |n| n.starts_with("w_"))
    );
    assert_eq!(sum("accesses", "instruction fetches"), d.meta.instructions);
    for (k, level) in d.meta.levels.iter().enumerate() {
        let below = |side: &str| {
            let names: Vec<String> = d.meta.levels[k + 1..]
                .iter()
                .map(|l| format!("{side}_{l}"))
                .chain([format!("{side}_mem")])
                .collect();
            total(&d, |n| names.iter().any(|x| x == n))
        };
        assert_eq!(
            sum("misses", &format!("i_miss_{level}")),
            below("i"),
            "{level}"
        );
        assert_eq!(
            sum("misses", &format!("d_miss_{level}")),
            below("r") + below("w"),
            "{level}"
        );
    }
    assert!(d.meta.levels.len() >= 2);
    // By hand: c's interval reads its 50 words, b's its 300, each plus the
    // return address its `ret` reads. Each sample covers the interval up
    // to the thread's next event.
    let reads = counter(&v, "accesses", tid, "data reads");
    let starts: Vec<u64> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == format!("accesses (tid {tid})").as_str())
        .map(|e| e["ts"].as_u64().unwrap())
        .collect();
    let read_at = |ts: u64| reads[starts.iter().position(|&s| s == ts).unwrap()];
    for (n, ts) in &s {
        match n.as_str() {
            "B c" => assert_eq!(read_at(*ts), 50 + 1, "c at {ts}"),
            "B b" => assert_eq!(read_at(*ts), 300 + 1, "b at {ts}"),
            _ => {}
        }
    }
}

#[test]
fn fast_and_trap_mode_record_the_same_timeline() {
    if !gcc_and_setarch_or_skip("timeline") {
        return;
    }
    let dir = scratch_in("timeline", "modes");
    build(&dir);
    for mode in ["trap", "fast"] {
        let dump = format!("{mode}.ccdump");
        record(
            &dir,
            &dump,
            &["--function", "work", "--mode", mode],
            &["./calls"],
            &[],
        );
    }
    let trap = load(&dir.join("trap.ccdump"));
    let fast = load(&dir.join("fast.ccdump"));
    let (t, f) = (trap.timeline.unwrap(), fast.timeline.unwrap());
    assert_eq!(t.len(), 17);
    assert_eq!(t, f);
}

#[test]
fn two_threads_have_two_tracks_with_the_sequence() {
    if !gcc_and_setarch_or_skip("timeline") {
        return;
    }
    let dir = scratch_in("timeline", "threads");
    build(&dir);
    record(
        &dir,
        "two.ccdump",
        &["--function", "main", "--threads", "all"],
        &["./calls", "threads"],
        &[],
    );
    let d = load(&dir.join("two.ccdump"));
    let (v, _) = perfetto(&dir, "two.ccdump");
    let mut got = tids(&v);
    got.sort_unstable();
    let mut want: Vec<u64> = d.threads.iter().map(|t| u64::from(t.tid)).collect();
    want.sort_unstable();
    assert_eq!(want.len(), 2);
    assert_eq!(got, want);
    for tid in got {
        let names: Vec<String> = slices(&v, tid).into_iter().map(|(n, _)| n).collect();
        let from = names.iter().position(|n| n == "B work").expect("work runs");
        assert_eq!(names[from..from + hand().len()], hand(), "thread {tid}");
    }
}

#[test]
fn a_full_timeline_drops_counts_and_shows_its_events() {
    if !gcc_and_setarch_or_skip("timeline") {
        return;
    }
    let dir = scratch_in("timeline", "cap");
    build(&dir);
    record(
        &dir,
        "cap.ccdump",
        &["--function", "work"],
        &["./calls"],
        &[("COLDCACHE_TIMELINE_LIMIT", "64")],
    );
    let d = load(&dir.join("cap.ccdump"));
    let t = d.timeline.as_ref().unwrap();
    assert!(t.dropped > 0 && !t.is_empty(), "{t:?}");
    assert_eq!(t.len() as u64 + t.dropped, 17);
    assert_eq!(t.limit, 64);
    let header = text(&ok(coldcache(&dir, &["report", "cap.ccdump"], &[]), "report").stdout);
    let line = format!(
        "timeline: {} events kept, {} dropped at its limit of 64 bytes",
        t.len(),
        t.dropped
    );
    assert!(header.contains(&line), "{header}");
    let (v, stderr) = perfetto(&dir, "cap.ccdump");
    assert!(
        stderr.contains("cap.ccdump's timeline ends early")
            && stderr.contains(&format!("{} dropped", t.dropped)),
        "{stderr}"
    );
    assert_eq!(v["otherData"]["events dropped"], t.dropped);
    assert!(v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["ph"] == "i" && e["name"].as_str().unwrap().starts_with("timeline cut")));
}

#[test]
fn a_dump_without_a_timeline_is_refused() {
    if !gcc_and_setarch_or_skip("timeline") {
        return;
    }
    let dir = scratch_in("timeline", "none");
    build(&dir);
    library();
    ok(
        coldcache(
            &dir,
            &[
                "record",
                "--function",
                "work",
                "-o",
                "plain.ccdump",
                "./calls",
            ],
            &[],
        ),
        "record",
    );
    let o = coldcache(
        &dir,
        &["export", "plain.ccdump", "--format", "perfetto"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("plain.ccdump")
            && err.contains("record --timeline")
            && err.contains("version 6"),
        "{err}"
    );
    assert!(!dir.join("plain.perfetto.json").exists());
}
