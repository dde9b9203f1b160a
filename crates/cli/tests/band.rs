//! The layout-noise band (issue 37, `docs/noise-band.md`): `coldcache sim
//! TRACE --placements K -o DUMP` on the traces of three builds of
//! `tests-programs/band/band.c`, captured on a small Cachegrind model
//! where placement matters:
//! - B adds an unrelated function before the benchmarked one and an
//!   unrelated global before its array: the measured change of I1 and D1
//!   misses from A is not zero (checked first: otherwise the test proves
//!   nothing), and `diff` says it is within layout noise;
//! - C doubles the loop, a real regression: `diff` says its change is
//!   outside layout noise;
//! - every dump's band holds its measured value, the same seed gives the
//!   same band, and `report` shows it (text and JSON).
//!
//! Skipped with a message when gcc or setarch is missing.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use dumps::load;
use library::COLDCACHE;
use programs::{compile, gcc_and_setarch_or_skip, scratch_in, succeed as ok, unrandomised};

/// The small model: I1 1 KiB 2-way, D1 2 KiB 2-way, LL 64 KiB 4-way.
const GEOMETRY: [&str; 8] = [
    "--cache",
    "cachegrind",
    "--I1",
    "1024,2,64",
    "--D1",
    "2048,2,64",
    "--LL",
    "65536,4,64",
];

/// Moved placements per band.
const K: &str = "12";

/// Builds variant `v`, captures `bench` with its trace (address
/// randomisation off, object tracking on so that the trace knows the
/// mappings), and re-simulates the trace with the band. Returns the
/// band's dump.
fn band_dump(dir: &Path, v: &str, seed: &str) -> PathBuf {
    let bin = dir.join(format!("band_{v}"));
    if !bin.exists() {
        compile(
            "tests-programs/band/band.c",
            &bin,
            &[
                "-O1",
                "-g",
                "-fno-pie",
                "-no-pie",
                "-fno-toplevel-reorder",
                &format!("-DVARIANT_{v}"),
            ],
            false,
        );
    }
    let trace = dir.join(format!("{v}.cctrace"));
    if !trace.exists() {
        let mut cmd = unrandomised(dir);
        cmd.args(["record", "--no-resolve", "--objects", "--function", "bench"])
            .args(GEOMETRY)
            .arg("--trace")
            .arg(&trace)
            .arg("-o")
            .arg(dir.join(format!("{v}.ccdump")))
            .arg("--")
            .arg(format!("./band_{v}"));
        ok(cmd);
    }
    let out = dir.join(format!("{v}-{seed}.band.ccdump"));
    let mut cmd = Command::new(COLDCACHE);
    cmd.args(["sim", "--no-progress", "--placements", K, "--seed", seed])
        .args(GEOMETRY)
        .arg(&trace)
        .arg("-o")
        .arg(&out);
    ok(cmd);
    out
}

fn json(mut cmd: Command) -> Value {
    let out = ok({
        cmd.arg("--json");
        cmd
    });
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// `report DUMP --json`'s band: column → (measured, min, median, max).
fn band_of(dump: &Path) -> Vec<(String, [u64; 4])> {
    let mut cmd = Command::new(COLDCACHE);
    cmd.arg("report").arg(dump);
    let v = json(cmd);
    v["band"]["columns"]
        .as_array()
        .expect("a band in report --json")
        .iter()
        .map(|c| {
            let n = |k: &str| c[k].as_u64().unwrap();
            (
                c["name"].as_str().unwrap().to_string(),
                [n("measured"), n("min"), n("median"), n("max")],
            )
        })
        .collect()
}

fn get(band: &[(String, [u64; 4])], name: &str) -> [u64; 4] {
    band.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} in the band"))
        .1
}

/// `diff BEFORE AFTER --json`'s layout noise: column → within.
fn noise(before: &Path, after: &Path) -> Vec<(String, bool)> {
    let mut cmd = Command::new(COLDCACHE);
    cmd.arg("diff").arg(before).arg(after);
    let v = json(cmd);
    v["layout_noise"]
        .as_array()
        .expect("layout_noise in diff --json")
        .iter()
        .map(|n| {
            (
                n["column"].as_str().unwrap().to_string(),
                n["within"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn an_unrelated_edit_is_within_the_band_and_a_doubled_loop_is_not() {
    if !gcc_and_setarch_or_skip("band") {
        return;
    }
    let dir = scratch_in("band", "abc");
    let a = band_dump(&dir, "A", "1");
    let b = band_dump(&dir, "B", "1");
    let c = band_dump(&dir, "C", "1");
    let (ba, bb, bc) = (band_of(&a), band_of(&b), band_of(&c));
    let misses = ["i_miss_L1", "d_miss_L1"];
    for (what, band) in [("A", &ba), ("B", &bb), ("C", &bc)] {
        for (name, [measured, min, median, max]) in band.iter() {
            assert!(
                min <= measured && measured <= max && min <= median && median <= max,
                "{what} {name}: measured {measured} outside its own band [{min} {median} {max}]"
            );
        }
        // The model is one where placement matters: the band has width.
        for m in misses {
            let [_, min, _, max] = get(band, m);
            assert!(max > min, "{what} {m}: a band of no width [{min}, {max}]");
        }
        // Placement changes no instruction count.
        let [i, min, _, max] = get(band, "instructions");
        assert!(
            i == min && i == max,
            "{what}: instructions {i} [{min}, {max}]"
        );
    }
    // B's unrelated edit changed the measured misses: the test means
    // something only if it did.
    for m in misses {
        let (x, y) = (get(&ba, m)[0], get(&bb, m)[0]);
        eprintln!(
            "{m}: A {x} band {:?}, B {y} band {:?}",
            get(&ba, m),
            get(&bb, m)
        );
        eprintln!("{m}: C {} band {:?}", get(&bc, m)[0], get(&bc, m));
        assert_ne!(x, y, "{m}: B's edit did not change the measured misses");
    }
    let within = |v: &[(String, bool)], m: &str| {
        v.iter()
            .find(|(n, _)| n == m)
            .unwrap_or_else(|| panic!("no {m} in layout_noise"))
            .1
    };
    let ab = noise(&a, &b);
    let ac = noise(&a, &c);
    for m in misses {
        assert!(within(&ab, m), "A→B {m}: not within layout noise: {ab:?}");
        assert!(!within(&ac, m), "A→C {m}: within layout noise: {ac:?}");
    }
    // The text says so too.
    let mut cmd = Command::new(COLDCACHE);
    cmd.arg("diff").arg(&a).arg(&c);
    let text = String::from_utf8(ok(cmd).stdout).unwrap();
    assert!(
        text.contains("outside layout noise"),
        "diff's text has no verdict:\n{text}"
    );
    let mut cmd = Command::new(COLDCACHE);
    cmd.arg("report").arg(&a);
    let text = String::from_utf8(ok(cmd).stdout).unwrap();
    let [measured, min, median, max] = get(&ba, "d_miss_L1");
    assert!(
        text.contains(&format!("{measured}  [{min} {median} {max}]")),
        "report's header lacks the band:\n{text}"
    );
    // Deterministic per seed: the same seed again gives the same totals,
    // another seed other placements.
    let again = load(&band_dump(&dir, "A", "1"));
    assert_eq!(again.meta.band, load(&a).meta.band);
    let other = load(&band_dump(&dir, "A", "2"));
    let (x, y) = (other.meta.band.unwrap(), load(&a).meta.band.unwrap());
    assert_eq!(
        x.totals[0], y.totals[0],
        "the measured placement is the same"
    );
    assert_ne!(
        x.totals[1..],
        y.totals[1..],
        "seed 2 moved nothing differently"
    );
}

/// What cannot have a band is refused, saying why: a trace that is not a
/// capture's (no modules or mappings to move), `--placements` without a
/// dump to keep it in.
#[test]
fn a_band_needs_a_captures_trace_and_a_dump() {
    let dir = scratch_in("band", "refused");
    let lackey = dir.join("t.lackey");
    std::fs::write(&lackey, "I  00401000,4\n L 00600000,8\nI  00401004,4\n").unwrap();
    let out = dir.join("t.ccdump");
    let run = |args: &[&str]| {
        let o = Command::new(COLDCACHE)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let t = lackey.to_str().unwrap();
    let e = run(&[
        "sim",
        "--no-progress",
        "--placements",
        "4",
        t,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(e.contains("needs a trace kept by `coldcache record"), "{e}");
    assert!(!out.exists(), "a dump was written without its band");
    // Refused before any work, naming the file and its format: the trace
    // is not read (its malformed third line, reached by a simulation,
    // would be the error instead).
    let bad = dir.join("bad.lackey");
    std::fs::write(&bad, "I  00401000,4\n L 00600000,8\nnot a lackey line\n").unwrap();
    let din = dir.join("t.din");
    std::fs::write(&din, "0 401000\n1 600000\nnot a din line\n").unwrap();
    for (trace, format) in [(&bad, "lackey"), (&din, "dinero")] {
        let t = trace.to_str().unwrap();
        let e = run(&[
            "sim",
            "--no-progress",
            "--placements",
            "4",
            t,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(
            e.contains(&format!("{t}: the layout-noise band"))
                && e.contains(&format!("a {format} trace holds no capture's dump")),
            "{e}"
        );
        assert!(
            !e.contains("unknown record kind"),
            "the trace was read: {e}"
        );
        assert!(!out.exists(), "a dump was written without its band");
    }
    let e = run(&["sim", "--placements", "4", t]);
    assert!(e.contains("give -o DUMP"), "{e}");
}

/// A capture's trace cut short (`.partial`) lacks the dump skeleton
/// (written at the end): refused before any work, naming the file. The
/// whole trace under a `.partial` name has it (found through its index)
/// and makes its band.
#[test]
fn a_cut_trace_is_refused_a_band_before_any_work() {
    if !gcc_and_setarch_or_skip("band_cut") {
        return;
    }
    let dir = scratch_in("band", "cut");
    band_dump(&dir, "A", "1");
    let whole = std::fs::read(dir.join("A.cctrace")).unwrap();
    let cut = dir.join("cut.cctrace.partial");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let renamed = dir.join("whole.cctrace.partial");
    std::fs::write(&renamed, &whole).unwrap();
    let sim = |trace: &Path, out: &Path| {
        let mut cmd = Command::new(COLDCACHE);
        cmd.args(["sim", "--no-progress", "--no-resolve", "--placements", K])
            .args(GEOMETRY)
            .arg(trace)
            .arg("-o")
            .arg(out)
            .stdin(Stdio::null());
        cmd.output().unwrap()
    };
    let out = dir.join("cut.ccdump");
    let o = sim(&cut, &out);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a band of a cut trace: {e}");
    assert!(
        e.contains(&format!("{}: the layout-noise band", cut.display()))
            && e.contains("trace cut short (.partial)"),
        "{e}"
    );
    assert!(!out.exists(), "a dump was written without its band");
    let out = dir.join("whole.ccdump");
    let o = sim(&renamed, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(load(&out).meta.band.is_some(), "no band in the dump");
}
