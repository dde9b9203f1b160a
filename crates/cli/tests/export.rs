//! `coldcache export` end to end on a real capture: the CacheSim talk's
//! getter example (examples/programs/getposition.cpp) recorded by
//! `coldcache record`, exported in every format and read back by
//! independent readers: `callgrind_annotate` (totals under Valgrind's event
//! names equal the dump's `Dump::totals()` summed by counter name, also with
//! `--show=D1mr` on a capture with the `cachegrind` preset; no warnings), the folded and speedscope weights (sum to
//! the accesses served by memory, summed here from the raw counters), the
//! JSON export (totals). Callgrind addresses are the ELF file's, as `nm`
//! prints them (what KCachegrind's Machine Code view asks objdump for).
//! Bad input gives an error naming it.
//!
//! Skipped with a message when gcc/g++ are missing (callgrind_annotate
//! checks: when valgrind is missing).

use coldcache_dump::Dump;

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
        let d = std::env::temp_dir().join(format!("coldcache-export-{}", std::process::id()));
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

fn record(bin: &Path, function: &str, dump: &str) -> String {
    let cache = repo().join("examples/caches/talk-scaled.toml");
    record_with(bin, function, dump, cache.to_str().unwrap())
}

fn record_with(bin: &Path, function: &str, dump: &str, cache: &str) -> String {
    library();
    let d = scratch().join(dump);
    run(&[
        "record",
        "--cache",
        cache,
        "--function",
        function,
        "-o",
        d.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    d.to_str().unwrap().to_string()
}

fn fail(args: &[&str]) -> String {
    let out = Command::new(COLDCACHE)
        .args(args)
        .current_dir(scratch())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "coldcache {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The recorded getposition dump (recorded once).
fn getposition() -> Option<String> {
    static DUMP: OnceLock<Option<String>> = OnceLock::new();
    DUMP.get_or_init(|| {
        if skip("export") {
            return None;
        }
        let bin = build(
            "g++",
            "examples/programs/getposition.cpp",
            &[],
            "getposition",
        );
        Some(record(&bin, "frame", "gp.ccdump"))
    })
    .clone()
}

fn export(dump: &str, format: &str, extra: &[&str]) -> String {
    export_into(&scratch(), dump, format, extra)
}

/// Exports `dump` as `format` into a file of `dir` and returns its text.
fn export_into(dir: &Path, dump: &str, format: &str, extra: &[&str]) -> String {
    let stem = Path::new(dump).file_stem().unwrap().to_string_lossy();
    let out = dir.join(format!("{stem}-{format}-{}.out", extra.join("")));
    let mut args = vec![
        "export",
        dump,
        "--format",
        format,
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args);
    std::fs::read_to_string(&out).unwrap()
}

/// The PROGRAM TOTALS line of callgrind_annotate on `text`, with `args`.
fn annotate_totals(text: &str, args: &[&str]) -> Vec<u64> {
    // A file per call: tests run in parallel.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = scratch().join(format!("check-{n}.callgrind"));
    std::fs::write(&path, text).unwrap();
    let out = Command::new("callgrind_annotate")
        .arg("--threshold=100")
        .args(args)
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.trim_end().ends_with("PROGRAM TOTALS"))
        .unwrap();
    // Numbers (with thousands separators), skipping `(100.0%)`.
    line.split_whitespace()
        .filter(|t| !t.starts_with('(') && !t.ends_with("%)") && *t != "PROGRAM" && *t != "TOTALS")
        .map(|t| {
            if t == "." {
                0
            } else {
                t.replace(',', "").parse().unwrap()
            }
        })
        .collect()
}

/// A capture recorded with the `cachegrind` preset, exported: Valgrind's
/// event names select the same totals as the dump's counters
/// (`--show=D1mr`, and the nine), and KCachegrind's derived events have
/// what they need.
#[test]
fn callgrind_export_of_a_cachegrind_capture_shows_valgrinds_events() {
    if skip("callgrind_export_of_a_cachegrind_capture_shows_valgrinds_events") {
        return;
    }
    if !have("valgrind") {
        eprintln!("SKIP: valgrind (callgrind_annotate) missing");
        return;
    }
    let bin = build(
        "g++",
        "examples/programs/getposition.cpp",
        &[],
        "getposition-cg",
    );
    let dump = record_with(&bin, "frame", "gp-cachegrind.ccdump", "cachegrind");
    let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
    assert_eq!(d.meta.levels.len(), 2, "the cachegrind preset: L1 and LL");
    let want = callgrind_totals(&d);
    assert!(want[4] > 0 && want[7] > 0, "some read misses: {want:?}");
    assert!(want[4] > want[7], "some L1 read misses served by LL");
    let text = export(&dump, "callgrind", &[]);
    let events = text
        .lines()
        .find_map(|l| l.strip_prefix("events: "))
        .unwrap();
    assert!(
        events.starts_with("Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw "),
        "{events}"
    );
    assert_eq!(annotate_totals(&text, &["--show=D1mr"]), [want[4]]);
    assert_eq!(
        annotate_totals(&text, &["--show=Ir,Dr,Dw,I1mr,D1mr,D1mw,ILmr,DLmr,DLmw"]),
        want[..9]
    );
    assert_eq!(annotate_totals(&text, &[]), want);
}

/// accesses served by memory: i_mem + r_mem + w_mem of the raw totals.
fn mem_total(d: &Dump) -> u64 {
    let t = d.totals();
    ["i_mem", "r_mem", "w_mem"]
        .iter()
        .map(|n| t[d.counter(n).unwrap()])
        .sum()
}

#[test]
fn callgrind_of_a_real_capture_is_read_by_callgrind_annotate() {
    let Some(dump) = getposition() else { return };
    if !have("valgrind") {
        eprintln!("SKIP: valgrind (callgrind_annotate) missing");
        return;
    }
    let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
    let want = callgrind_totals(&d);
    for extra in [&[][..], &["--no-inline"][..]] {
        let text = export(&dump, "callgrind", extra);
        assert_eq!(annotate_totals(&text, &[]), want, "{extra:?}");
        let path = scratch().join("check.callgrind");
        std::fs::write(&path, &text).unwrap();
        let out = Command::new("callgrind_annotate")
            .arg("--threshold=100")
            .arg(&path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("SceneObject::GetPosition() const"));
        assert!(stdout.contains("UpdateAI("));
    }
}

#[test]
fn stacks_of_a_real_capture_weigh_the_memory_accesses() {
    let Some(dump) = getposition() else { return };
    let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
    let mem = mem_total(&d);
    assert!(mem > 2048, "{mem}");
    // This test's outputs have a directory of their own, so that the
    // atomic-write check at the end sees no other test's file in flight.
    let dir = scratch().join("stacks");
    std::fs::create_dir_all(&dir).unwrap();
    let export = |dump: &str, format: &str, extra: &[&str]| export_into(&dir, dump, format, extra);
    let folded = export(&dump, "folded", &[]);
    let mut sum = 0;
    let (mut from_ai, mut getter) = (0, 0);
    for l in folded.lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        sum += n;
        if stack.ends_with(";SceneObject::GetPosition() const") {
            getter += n;
            if stack.contains(";UpdateAI(") {
                from_ai += n;
            }
        }
    }
    assert_eq!(sum, mem);
    // Hand count: 2048 of 2432 getter misses come from UpdateAI (84 %).
    assert!(
        from_ai >= 2048 && from_ai * 100 / getter >= 80,
        "{from_ai} of {getter}"
    );

    let svg = export(&dump, "flamegraph", &[]);
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("UpdateAI") && svg.contains("GetPosition"));

    let ss: Value =
        serde_json::from_str(&export(&dump, "speedscope", &["--weight", "instructions"])).unwrap();
    let w: u64 = ss["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["weights"].as_array().unwrap().iter())
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(w, d.totals()[0]);

    let js: Value = serde_json::from_str(&export(&dump, "json", &[])).unwrap();
    let t = d.totals();
    for (i, v) in t.iter().enumerate() {
        assert_eq!(js["totals"][i].as_u64(), Some(*v), "{}", d.meta.counters[i]);
    }
    // Atomic writes: the four outputs and nothing else, no temporary file
    // left beside them.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "gp-flamegraph-.out",
            "gp-folded-.out",
            "gp-json-.out",
            "gp-speedscope---weightinstructions.out"
        ],
        "{}",
        dir.display()
    );
}

#[test]
fn bad_input_gets_a_clear_error_naming_it() {
    let sample = repo().join("crates/dump/tests/data/v2-resolved-real.ccdump");
    let s = sample.to_str().unwrap();
    let out = scratch().join("bad.out");
    let o = out.to_str().unwrap();
    let e = fail(&["export", s, "--format", "pprof", "-o", o]);
    assert!(e.contains("pprof") && e.contains("callgrind"), "{e}");
    let e = fail(&[
        "export", s, "--format", "folded", "--weight", "cycles", "-o", o,
    ]);
    assert!(
        e.contains("cycles") && e.contains("d_miss_L1") && e.contains("v2-resolved-real"),
        "{e}"
    );
    let e = fail(&[
        "export",
        s,
        "--format",
        "flamegraph",
        "--weight",
        "badness",
        "-o",
        o,
    ]);
    assert!(e.contains("ratio"), "{e}");
    let missing = scratch().join("nope.ccdump");
    let e = fail(&[
        "export",
        missing.to_str().unwrap(),
        "--format",
        "json",
        "-o",
        o,
    ]);
    assert!(e.contains("nope.ccdump"), "{e}");
    let mut bytes = std::fs::read(&sample).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    let bad = scratch().join("corrupt.ccdump");
    std::fs::write(&bad, &bytes).unwrap();
    let e = fail(&[
        "export",
        bad.to_str().unwrap(),
        "--format",
        "callgrind",
        "-o",
        o,
    ]);
    assert!(
        e.contains("corrupt.ccdump") && e.contains("corrupted"),
        "{e}"
    );
    assert!(!out.exists(), "nothing written on error");
}

/// Without `-o`, `export` writes a file named after the dump in the
/// current directory (what the other commands do), says its name, and
/// writes the same bytes `-o` would (it was refused: `--output` required).
#[test]
fn export_without_output_writes_a_file_named_after_the_dump() {
    let sample = repo().join("crates/dump/tests/data/v2-resolved-real.ccdump");
    let dir = scratch().join("default-output");
    std::fs::create_dir_all(&dir).unwrap();
    for (format, name) in [
        ("callgrind", "callgrind.out.v2-resolved-real"),
        ("json", "v2-resolved-real.json"),
        ("folded", "v2-resolved-real.folded"),
    ] {
        let out = Command::new(COLDCACHE)
            .args(["export", sample.to_str().unwrap(), "--format", format])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{format}: {err}");
        assert!(err.contains(name), "{format}: the name is said: {err}");
        let written = std::fs::read(dir.join(name)).expect("the default file");
        let explicit = export(sample.to_str().unwrap(), format, &[]);
        assert_eq!(String::from_utf8_lossy(&written), explicit, "{format}");
    }
}

/// `nm -S` of `bin`: (address, size) of the text symbol `name`.
fn nm_symbol(bin: &Path, name: &str) -> Option<(u64, u64)> {
    let out = Command::new("nm").arg("-S").arg(bin).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() == 4 && f[3] == name && (f[2] == "T" || f[2] == "t")).then(|| {
            (
                u64::from_str_radix(f[0], 16).unwrap(),
                u64::from_str_radix(f[1], 16).unwrap(),
            )
        })
    })
}

#[test]
fn callgrind_addresses_are_the_elf_files_addresses() {
    let Some(dump) = getposition() else { return };
    if !have("nm") {
        eprintln!("SKIP: nm missing");
        return;
    }
    let bin = scratch().join("getposition");
    let (start, size) = nm_symbol(&bin, "frame").expect("frame in nm");
    // The whole stack: the arc main → frame (frame's entry ran once).
    let text = export(&dump, "callgrind", &["--whole-stack"]);
    // `frame`'s block: every cost line's address within nm's [start, start+size).
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("fn=(") && l.ends_with(") frame"))
        .expect("fn= frame");
    let mut n = 0;
    for l in &lines[at + 1..] {
        if l.is_empty() || l.starts_with("fn=") {
            break;
        }
        if let Some(hex) = l.strip_prefix("0x") {
            let a = u64::from_str_radix(hex.split(' ').next().unwrap(), 16).unwrap();
            assert!(
                a >= start && a < start + size,
                "{l}: outside frame [{start:#x}, +{size:#x})"
            );
            n += 1;
        }
    }
    assert!(n > 0, "no cost line in frame's block");
    // The call from main targets frame's entry as nm prints it.
    let id = lines[at]
        .trim_start_matches("fn=(")
        .split(')')
        .next()
        .unwrap();
    let call = lines
        .iter()
        .position(|l| *l == format!("cfn=({id})") || *l == format!("cfn=({id}) frame"))
        .expect("a call to frame");
    assert_eq!(
        lines[call + 1],
        format!(
            "calls=1 {start:#x} {}",
            lines[call + 1].rsplit(' ').next().unwrap()
        )
    );
    assert!(
        !text.contains("desc: Run-time addresses: /"),
        "every file's bias found"
    );
}
