//! Oracle test: `coldcache sim --cache cachegrind` against Valgrind itself.
//!
//! For every C program in `tests-programs/` and several cache geometries this
//! test
//!
//! 1. compiles the program with `gcc -O1 -g -fno-pie -no-pie`,
//! 2. records a memory trace with `valgrind --tool=lackey --trace-mem=yes`,
//! 3. runs `valgrind --tool=cachegrind --cache-sim=yes --I1=.. --D1=.. --LL=..`
//!    on the same binary and reads the `summary:` line of its output file,
//! 4. runs `coldcache sim --cache cachegrind ... --json` on the lackey trace,
//!
//! and requires the nine Cachegrind totals (`Ir I1mr ILmr Dr D1mr DLmr Dw
//! D1mw DLmw`) to be equal, printing a diff table otherwise.
//!
//! Both Valgrind runs must execute exactly the same guest instructions at the
//! same addresses, or the comparison means nothing. They do when the process
//! is started identically: empty environment (`env_clear`, which also drops
//! `VALGRIND_OPTS`, `HOME` and so `~/.valgrindrc`), the same working
//! directory, the same `argv[0]` (`./prog`), stdin from /dev/null and stdout
//! to a pipe in both runs (glibc's stdio takes different paths for a pipe, a
//! file, /dev/null and a terminal, which changes the instruction count). The
//! test checks it: the number of `I` records in the lackey trace must equal
//! Cachegrind's `Ir`, and the program must print the same output under both
//! tools.
//!
//! Cachegrind prints "warning:" lines about the host's own caches even when
//! all three caches are given on the command line (e.g. "L3 cache found, using
//! its data for the LL simulation" / "specified LL cache ... simulated LL
//! cache"); those concern the auto-detected geometry, which the options then
//! replace. What counts is the `desc:` lines of the output file: the test
//! fails loudly if they differ from the requested geometry.
//!
//! The test is skipped (passes with a message) when `valgrind` or `gcc` is
//! not installed. It fails, as expected, until `coldcache sim` implements the
//! Cachegrind mode.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

/// Cachegrind's event names, in its usual order.
const EVENTS: [&str; 9] = [
    "Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw",
];

/// The programs in `tests-programs/` (file stem of `NAME.c`).
const PROGRAMS: &[&str] = &[
    "matmul",
    "listchase",
    "strings",
    "hashtable",
    "stack",
    "x86isms",
];

/// A cache geometry in Valgrind's `SIZE,ASSOC,LINE` notation.
struct Geometry {
    name: &'static str,
    i1: &'static str,
    d1: &'static str,
    ll: &'static str,
}

const fn geometry(
    name: &'static str,
    i1: &'static str,
    d1: &'static str,
    ll: &'static str,
) -> Geometry {
    Geometry { name, i1, d1, ll }
}

const GEOMETRIES: &[Geometry] = &[
    // A typical desktop core: few misses, mostly compulsory.
    geometry("typical", "32768,8,64", "32768,8,64", "8388608,16,64"),
    // Small caches: plenty of L1 and LL misses; I1 line smaller than LL line.
    geometry("small", "4096,2,32", "8192,4,64", "65536,8,64"),
    // Associativities that are not powers of two (the set counts still are).
    geometry("12-way", "32768,8,64", "49152,12,64", "2097152,16,64"),
    // Direct-mapped I1, 32-byte L1 lines under a 128-byte-line LL: an access
    // that straddles two L1 lines is often inside one LL line.
    geometry("tiny-mixed-lines", "1024,1,32", "2048,2,32", "16384,4,128"),
];

#[test]
fn oracle_matmul() {
    oracle("matmul");
}

#[test]
fn oracle_listchase() {
    oracle("listchase");
}

#[test]
fn oracle_strings() {
    oracle("strings");
}

#[test]
fn oracle_hashtable() {
    oracle("hashtable");
}

#[test]
fn oracle_stack() {
    oracle("stack");
}

#[test]
fn oracle_x86isms() {
    oracle("x86isms");
}

/// Every `tests-programs/*.c` has an oracle test above, and vice versa.
#[test]
fn every_program_has_an_oracle_test() {
    let mut found: Vec<String> = fs::read_dir(programs_dir())
        .expect("read tests-programs/")
        .filter_map(|e| {
            let path = e.ok()?.path();
            if path.extension()? != "c" {
                return None;
            }
            Some(path.file_stem()?.to_str()?.to_owned())
        })
        .collect();
    found.sort();
    let mut listed: Vec<String> = PROGRAMS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        found, listed,
        "tests-programs/*.c and PROGRAMS in oracle.rs disagree"
    );
}

fn programs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests-programs")
}

/// The full path of `name` found in `PATH`, if any.
fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// The tools the oracle needs, or `None` (after printing why) to skip.
fn tools(test: &str) -> Option<(PathBuf, PathBuf)> {
    let gcc = find_in_path("gcc");
    let valgrind = find_in_path("valgrind");
    match (gcc, valgrind) {
        (Some(gcc), Some(vg)) => Some((gcc, vg)),
        (gcc, vg) => {
            let missing: Vec<&str> = [("gcc", gcc.is_none()), ("valgrind", vg.is_none())]
                .iter()
                .filter(|(_, m)| *m)
                .map(|(n, _)| *n)
                .collect();
            eprintln!("SKIP {test}: {} not found in PATH", missing.join(" and "));
            None
        }
    }
}

fn geometry_args(g: &Geometry) -> [String; 3] {
    [
        format!("--I1={}", g.i1),
        format!("--D1={}", g.d1),
        format!("--LL={}", g.ll),
    ]
}

/// Run `valgrind ARGS ./prog` in `dir` with an empty environment.
fn run_valgrind(valgrind: &Path, dir: &Path, args: &[String]) -> Output {
    Command::new(valgrind)
        .args(args)
        .arg("./prog")
        .current_dir(dir)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", valgrind.display()))
}

fn check_ok(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the lackey log says about itself.
struct LackeyStats {
    instr_records: u64,
    /// `L` and `M` records: Cachegrind counts a modify as one read (Dr).
    read_records: u64,
    /// `S` records (Dw).
    write_records: u64,
    /// Lackey's own "guest instrs:" count, if printed.
    guest_instrs: Option<u64>,
}

fn lackey_stats(path: &Path) -> LackeyStats {
    let file = fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = Vec::new();
    let mut stats = LackeyStats {
        instr_records: 0,
        read_records: 0,
        write_records: 0,
        guest_instrs: None,
    };
    loop {
        line.clear();
        if reader
            .read_until(b'\n', &mut line)
            .expect("read lackey log")
            == 0
        {
            break;
        }
        match line.first() {
            Some(b'I') => stats.instr_records += 1,
            Some(b' ') => match line.get(1) {
                Some(b'L' | b'M') => stats.read_records += 1,
                Some(b'S') => stats.write_records += 1,
                _ => panic!(
                    "unexpected lackey line {:?}",
                    String::from_utf8_lossy(&line)
                ),
            },
            Some(b'=') => {
                let text = String::from_utf8_lossy(&line);
                if let Some(rest) = text.split("guest instrs:").nth(1) {
                    stats.guest_instrs = parse_number(rest);
                }
            }
            _ => {}
        }
    }
    stats
}

/// Parse a Valgrind number such as ` 1,822,688\n`.
fn parse_number(s: &str) -> Option<u64> {
    s.trim().replace(',', "").parse().ok()
}

/// A parsed Cachegrind output file.
#[derive(Debug)]
struct CgOut {
    /// `(I1|D1|LL) -> (size, assoc, line)` from the `desc:` lines.
    desc: BTreeMap<String, (u64, u64, u64)>,
    /// Event name -> total, from `events:` and `summary:`.
    summary: BTreeMap<String, u64>,
}

/// Parse `32768 B, 64 B, 8-way associative` (or `direct-mapped`, or `fully
/// associative`) into `(size, assoc, line)`.
fn parse_desc(text: &str) -> Option<(u64, u64, u64)> {
    let mut parts = text.split(',').map(str::trim);
    let size: u64 = parts.next()?.strip_suffix(" B")?.trim().parse().ok()?;
    let line: u64 = parts.next()?.strip_suffix(" B")?.trim().parse().ok()?;
    let kind = parts.next()?;
    let assoc = if kind == "direct-mapped" {
        1
    } else if kind == "fully associative" {
        size / line
    } else {
        kind.strip_suffix("-way associative")?.trim().parse().ok()?
    };
    Some((size, assoc, line))
}

fn parse_cg_out(text: &str) -> Result<CgOut, String> {
    let mut desc = BTreeMap::new();
    let mut events: Option<Vec<&str>> = None;
    let mut summary: Option<Vec<u64>> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("desc:") {
            // "desc: I1 cache:         32768 B, 64 B, 8-way associative"
            let rest = rest.trim();
            if let Some((name, value)) = rest.split_once(" cache:") {
                let g =
                    parse_desc(value).ok_or_else(|| format!("cannot parse desc line {line:?}"))?;
                desc.insert(name.trim().to_string(), g);
            }
        } else if let Some(rest) = line.strip_prefix("events:") {
            events = Some(rest.split_whitespace().collect());
        } else if let Some(rest) = line.strip_prefix("summary:") {
            let values: Result<Vec<u64>, _> = rest.split_whitespace().map(str::parse).collect();
            summary = Some(values.map_err(|e| format!("bad summary line {line:?}: {e}"))?);
        }
    }
    let events = events.ok_or("no events: line")?;
    let summary = summary.ok_or("no summary: line")?;
    if events.len() != summary.len() {
        return Err(format!(
            "events: has {} names but summary: has {} values",
            events.len(),
            summary.len()
        ));
    }
    let summary: BTreeMap<String, u64> =
        events.iter().map(|e| e.to_string()).zip(summary).collect();
    for e in EVENTS {
        if !summary.contains_key(e) {
            return Err(format!("event {e} missing from events: line"));
        }
    }
    Ok(CgOut { desc, summary })
}

/// `"32768,8,64"` -> `(32768, 8, 64)`.
fn parse_geometry(s: &str) -> (u64, u64, u64) {
    let v: Vec<u64> = s
        .split(',')
        .map(|x| x.parse().expect("geometry number"))
        .collect();
    assert_eq!(v.len(), 3, "geometry {s}");
    (v[0], v[1], v[2])
}

/// The `"cachegrind"` object of coldcache's JSON output, checked to have
/// exactly the nine event keys with integer values.
fn parse_coldcache_json(stdout: &[u8]) -> Result<BTreeMap<String, u64>, String> {
    let v: serde_json::Value = serde_json::from_slice(stdout).map_err(|e| {
        format!(
            "stdout is not JSON ({e}):\n{}",
            String::from_utf8_lossy(stdout)
        )
    })?;
    let obj = v
        .get("cachegrind")
        .and_then(|c| c.as_object())
        .ok_or_else(|| format!("no top-level object \"cachegrind\" in:\n{v}"))?;
    let mut out = BTreeMap::new();
    for (k, val) in obj {
        let n = val
            .as_u64()
            .ok_or_else(|| format!("\"cachegrind\".{k} is not an unsigned integer: {val}"))?;
        out.insert(k.clone(), n);
    }
    let mut keys: Vec<&str> = out.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want: Vec<&str> = EVENTS.to_vec();
    want.sort_unstable();
    if keys != want {
        return Err(format!(
            "\"cachegrind\" keys are {keys:?}, expected exactly {want:?}"
        ));
    }
    Ok(out)
}

fn diff_table(want: &BTreeMap<String, u64>, got: &BTreeMap<String, u64>) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "    {:<6} {:>14} {:>14} {:>12}",
        "event", "cachegrind", "coldcache", "diff"
    );
    for e in EVENTS {
        let w = want.get(e).copied();
        let g = got.get(e).copied();
        let fmt = |x: Option<u64>| x.map_or("-".to_string(), |x| x.to_string());
        let (diff, mark) = match (w, g) {
            (Some(w), Some(g)) if w == g => ("0".to_string(), ""),
            (Some(w), Some(g)) => (format!("{:+}", g as i128 - w as i128), "  <<<"),
            _ => ("?".to_string(), "  <<<"),
        };
        let _ = writeln!(
            t,
            "    {:<6} {:>14} {:>14} {:>12}{}",
            e,
            fmt(w),
            fmt(g),
            diff,
            mark
        );
    }
    t
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.to_ascii_lowercase().contains("warning"))
        .collect()
}

/// Warnings that Cachegrind prints about the host's auto-detected caches even
/// when --I1/--D1/--LL replace them.
fn is_host_detection_warning(line: &str) -> bool {
    [
        "cache found, using its data for the LL simulation",
        "specified LL cache:",
        "simulated LL cache:",
    ]
    .iter()
    .any(|p| line.contains(p))
}

fn oracle(prog: &str) {
    let test = format!("oracle_{prog}");
    let Some((gcc, valgrind)) = tools(&test) else {
        return;
    };
    let t0 = Instant::now();

    let src = programs_dir().join(format!("{prog}.c"));
    assert!(src.is_file(), "missing {}", src.display());
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("oracle-{prog}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create work dir");

    // 1. Compile.
    let out = Command::new(&gcc)
        .args(["-O1", "-g", "-fno-pie", "-no-pie", "-o"])
        .arg(dir.join("prog"))
        .arg(&src)
        .output()
        .expect("run gcc");
    check_ok(&format!("gcc {}", src.display()), &out);

    // 2. Lackey trace.
    let lackey_args: Vec<String> = [
        "--tool=lackey",
        "--trace-mem=yes",
        "--log-file=trace.lackey",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let lackey = run_valgrind(&valgrind, &dir, &lackey_args);
    check_ok(
        &format!("valgrind {} ./prog", lackey_args.join(" ")),
        &lackey,
    );
    let trace = dir.join("trace.lackey");
    let lk = lackey_stats(&trace);
    eprintln!(
        "{test}: lackey trace {} I + {} L/M + {} S records ({:.1} MB) after {:.1?}",
        lk.instr_records,
        lk.read_records,
        lk.write_records,
        fs::metadata(&trace).map(|m| m.len()).unwrap_or(0) as f64 / 1e6,
        t0.elapsed()
    );
    if let Some(g) = lk.guest_instrs {
        assert_eq!(
            g, lk.instr_records,
            "lackey's own 'guest instrs' count disagrees with the I records in its trace"
        );
    }

    let mut failures = Vec::new();
    for g in GEOMETRIES {
        let geo = format!("I1 {} D1 {} LL {}", g.i1, g.d1, g.ll);
        let cg_file = format!("cg-{}.out", g.name);

        // 3. Cachegrind.
        let mut cg_args: Vec<String> = vec!["--tool=cachegrind".into(), "--cache-sim=yes".into()];
        cg_args.extend(geometry_args(g));
        cg_args.push(format!("--cachegrind-out-file={cg_file}"));
        let cg = run_valgrind(&valgrind, &dir, &cg_args);
        check_ok(&format!("valgrind {} ./prog", cg_args.join(" ")), &cg);
        let cg_stderr = String::from_utf8_lossy(&cg.stderr).into_owned();
        let cg_text = fs::read_to_string(dir.join(&cg_file)).expect("read cachegrind output file");
        let cg_out = parse_cg_out(&cg_text)
            .unwrap_or_else(|e| panic!("{test} [{}]: {e}\n{cg_text}", g.name));

        // Valgrind must have simulated exactly the requested geometry.
        let warns = warnings(&cg_stderr);
        for (cache, spec) in [("I1", g.i1), ("D1", g.d1), ("LL", g.ll)] {
            let want = parse_geometry(spec);
            let got = cg_out.desc.get(cache).copied();
            assert_eq!(
                got,
                Some(want),
                "{test} [{}]: Cachegrind did not simulate the requested {cache} cache {spec} \
                 (size, assoc, line): it reports {got:?}.\nIts warnings:\n{}",
                g.name,
                warns.join("\n")
            );
        }
        for w in warns.iter().filter(|w| !is_host_detection_warning(w)) {
            eprintln!("{test} [{}]: note: cachegrind says: {w}", g.name);
        }

        // Both tools ran the same program the same way.
        if cg.stdout != lackey.stdout {
            failures.push(format!(
                "[{}] the program printed different output under lackey and cachegrind:\n  lackey:     {:?}\n  cachegrind: {:?}",
                g.name,
                String::from_utf8_lossy(&lackey.stdout),
                String::from_utf8_lossy(&cg.stdout)
            ));
        }
        let cg_ir = cg_out.summary["Ir"];
        if cg_ir != lk.instr_records {
            failures.push(format!(
                "[{}] lackey and cachegrind executed different instruction streams: \
                 lackey I records {}, lackey guest instrs {:?}, cachegrind Ir {} \
                 (the comparison below is meaningless until the harness is fixed)",
                g.name, lk.instr_records, lk.guest_instrs, cg_ir
            ));
        }
        let (cg_dr, cg_dw) = (cg_out.summary["Dr"], cg_out.summary["Dw"]);
        if (cg_dr, cg_dw) != (lk.read_records, lk.write_records) {
            failures.push(format!(
                "[{}] lackey and cachegrind saw different data accesses: lackey L+M {} / S {}, \
                 cachegrind Dr {} / Dw {}",
                g.name, lk.read_records, lk.write_records, cg_dr, cg_dw
            ));
        }

        // 4. coldcache.
        let cli_args: Vec<String> = vec![
            "sim".into(),
            "--cache".into(),
            "cachegrind".into(),
            "--I1".into(),
            g.i1.into(),
            "--D1".into(),
            g.d1.into(),
            "--LL".into(),
            g.ll.into(),
            "--json".into(),
            trace.display().to_string(),
        ];
        let t_cli = Instant::now();
        let cli = Command::new(env!("CARGO_BIN_EXE_coldcache"))
            .args(&cli_args)
            .stdin(Stdio::null())
            .output()
            .expect("run coldcache");
        let cli_time = t_cli.elapsed();
        let repro = format!(
            "  reproduce: cd {} && env -i valgrind {} ./prog\n             coldcache {}",
            dir.display(),
            cg_args.join(" "),
            cli_args.join(" ")
        );
        if !cli.status.success() {
            failures.push(format!(
                "[{}] {geo}: coldcache failed ({}):\n{}\n{repro}",
                g.name,
                cli.status,
                String::from_utf8_lossy(&cli.stderr).trim_end()
            ));
            continue;
        }
        let got = match parse_coldcache_json(&cli.stdout) {
            Ok(got) => got,
            Err(e) => {
                failures.push(format!("[{}] {geo}: {e}\n{repro}", g.name));
                continue;
            }
        };
        let want: BTreeMap<String, u64> = EVENTS
            .iter()
            .map(|e| (e.to_string(), cg_out.summary[*e]))
            .collect();
        if got != want {
            failures.push(format!(
                "[{}] {geo}: coldcache disagrees with cachegrind\n{}    (lackey I records {}, cachegrind Ir {})\n{repro}",
                g.name,
                diff_table(&want, &got),
                lk.instr_records,
                cg_ir
            ));
        } else {
            eprintln!(
                "{test} [{}]: all nine totals equal (coldcache took {cli_time:.1?})",
                g.name
            );
        }
    }

    eprintln!("{test}: done in {:.1?}", t0.elapsed());
    if failures.is_empty() {
        let _ = fs::remove_dir_all(&dir);
    } else {
        panic!(
            "{test}: {} of {} geometries failed (work dir kept: {})\n\n{}",
            failures.len(),
            GEOMETRIES.len(),
            dir.display(),
            failures.join("\n\n")
        );
    }
}

#[test]
fn parses_cachegrind_output() {
    let text = "desc: I1 cache:         1024 B, 32 B, direct-mapped\n\
                desc: D1 cache:         49152 B, 64 B, 12-way associative\n\
                desc: LL cache:         16384 B, 64 B, fully associative\n\
                cmd: ./prog\n\
                events: Dr Ir I1mr ILmr D1mr DLmr Dw D1mw DLmw \n\
                fl=x.c\nfn=main\n3 1 2 3 4 5 6 7 8 9\n\
                summary: 10 1 2 3 4 5 6 7 8\n";
    let cg = parse_cg_out(text).unwrap();
    assert_eq!(cg.desc["I1"], (1024, 1, 32));
    assert_eq!(cg.desc["D1"], (49152, 12, 64));
    assert_eq!(cg.desc["LL"], (16384, 256, 64));
    assert_eq!(cg.summary["Dr"], 10);
    assert_eq!(cg.summary["Ir"], 1);
    assert_eq!(cg.summary["DLmw"], 8);
    assert!(parse_cg_out("events: Ir\nsummary: 1 2\n").is_err());
    assert!(
        parse_cg_out("events: Ir\nsummary: 1\n").is_err(),
        "missing events must be an error"
    );
}

#[test]
fn parses_coldcache_json() {
    let ok = br#"{"cachegrind":{"Ir":1,"I1mr":2,"ILmr":3,"Dr":4,"D1mr":5,"DLmr":6,"Dw":7,"D1mw":8,"DLmw":9},"other":[]}"#;
    let m = parse_coldcache_json(ok).unwrap();
    assert_eq!(m["DLmw"], 9);
    let extra = br#"{"cachegrind":{"Ir":1,"I1mr":2,"ILmr":3,"Dr":4,"D1mr":5,"DLmr":6,"Dw":7,"D1mw":8,"DLmw":9,"Dm":0}}"#;
    assert!(parse_coldcache_json(extra).is_err());
    assert!(parse_coldcache_json(br#"{"Ir":1}"#).is_err());
    assert!(parse_coldcache_json(b"hits:1").is_err());
}
