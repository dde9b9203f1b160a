//! `coldcache valgrind` (and the binary run as `valgrind`) against Valgrind
//! itself on `tests-programs/valgrind/harness.c`, with the options a
//! benchmark harness (gungraun) passes: per-function `Ir` read back by
//! Valgrind's own readers (`callgrind_annotate`, `cg_annotate`) equal
//! Callgrind's and Cachegrind's; the program's stdout, stderr and exit
//! status pass through; `%p`, `%n` and `-` name the files as Valgrind's; a
//! file that cannot be created ends the run as Valgrind's; refused options
//! exit 2 with a message naming them, before the program runs.
//!
//! Only harness.c's own functions are compared: coldcache captures from
//! `main` (Valgrind from the loader's first instruction) and runs glibc's
//! own string functions where Valgrind substitutes its replacements, so
//! library functions and whole-run totals differ (docs/valgrind.md). The
//! cache-miss events differ too (Valgrind's `malloc` places the data
//! elsewhere): not compared. Skipped when gcc or Valgrind is missing.

#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;

use library::{have, library, COLDCACHE};
use programs::{gcc_or_skip, run_with_deadline, scratch_in};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The options gungraun 0.20 passes to Callgrind for a library benchmark
/// (gungraun-runner's `callgrind/args.rs` and `tool/args.rs`), less the
/// out and log files.
const GUNGRAUN: &[&str] = &[
    "--tool=callgrind",
    "--error-exitcode=0",
    "--trace-children=yes",
    "--fair-sched=try",
    "--vgdb=no",
    "--I1=32768,8,64",
    "--D1=32768,8,64",
    "--LL=8388608,16,64",
    "--cache-sim=yes",
    "--compress-strings=no",
    "--compress-pos=no",
    "--dump-line=yes",
    "--dump-instr=no",
    "--combine-dumps=no",
    "--separate-threads=yes",
    "--toggle-collect=bench",
];

fn ready(test: &str) -> Option<PathBuf> {
    if !gcc_or_skip(test) {
        return None;
    }
    if !have("valgrind") {
        eprintln!("SKIP {test}: valgrind missing");
        return None;
    }
    library();
    let dir = scratch_in("valgrind", test);
    programs::build_with("tests-programs/valgrind/harness.c", &dir, false);
    Some(dir)
}

fn run(dir: &Path, exe: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args(args).current_dir(dir).env_remove("VALGRIND_OPTS");
    run_with_deadline(cmd, exe)
}

/// `coldcache valgrind` and Valgrind side by side in `dir` with the same
/// options `opts` (`--tool=...` among them) and program `prog`, each with
/// its own out file: `cc` for coldcache, `vg` for Valgrind (with `-q`: its
/// banner is not compared).
fn side_by_side(dir: &Path, opts: &[&str], prog: &[&str]) -> (Output, Output) {
    let flag = if opts.contains(&"--tool=cachegrind") {
        "--cachegrind-out-file"
    } else {
        "--callgrind-out-file"
    };
    let (cc, vg) = (format!("{flag}=cc"), format!("{flag}=vg"));
    let a = run(
        dir,
        COLDCACHE,
        &[&["valgrind"], opts, &[cc.as_str()], prog].concat(),
    );
    let b = run(
        dir,
        "valgrind",
        &[opts, &[vg.as_str(), "-q"], prog].concat(),
    );
    (a, b)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `function` -> its self cost in the first event, for the lines of the
/// test programs' functions in an annotator's function list.
fn per_function(annotated: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for line in annotated.lines() {
        let Some(at) = ["harness.c:", "threads.c:", "requests.c:", "dumps.c:"]
            .iter()
            .find_map(|f| line.find(f).map(|at| at + f.len()))
        else {
            continue;
        };
        let Some(first) = line.split_whitespace().next() else {
            continue;
        };
        let Ok(v) = first.replace(',', "").parse::<u64>() else {
            continue;
        };
        let name = line[at..]
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        *m.entry(name).or_insert(0) += v;
    }
    m
}

fn annotate(tool: &str, file: &Path) -> String {
    let threshold = if tool == "cg_annotate" { "0.1" } else { "100" };
    let out = Command::new(tool)
        .arg(format!("--threshold={threshold}"))
        .arg("--auto=no")
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{tool}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// The file's `KEY:` header value.
fn header(file: &Path, key: &str) -> String {
    let t = std::fs::read_to_string(file).unwrap();
    t.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("{} has no {key}", file.display()))
        .trim()
        .to_string()
}

#[test]
fn callgrind_with_gungrauns_options_counts_the_toggled_function_as_callgrind() {
    let Some(dir) = ready("callgrind") else {
        return;
    };
    let mut ours: Vec<&str> = GUNGRAUN.to_vec();
    ours.extend(["--callgrind-out-file=cc.#%p.out", "--log-file=cc.#%p.log"]);
    ours.extend(["./harness", "3"]);
    let mut theirs: Vec<&str> = GUNGRAUN.to_vec();
    theirs.extend(["--callgrind-out-file=vg.out", "-q", "./harness", "3"]);
    let a = run(&dir, COLDCACHE, &[&["valgrind"], &ours[..]].concat());
    let b = run(&dir, "valgrind", &theirs);
    // The program's status, stdout and stderr pass through.
    assert_eq!(a.status.code(), Some(3), "{}", text(&a.stderr));
    assert_eq!(b.status.code(), Some(3));
    assert_eq!(a.stdout, b.stdout);
    assert!(text(&a.stdout).starts_with("checksum "));
    assert_eq!(text(&a.stderr), "to stderr\n", "the log went to --log-file");
    // `%p` is the program's pid, as Callgrind's: the base file (empty, as
    // Callgrind leaves it) and thread 1's, `-01`.
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cc.#"))
        .collect();
    let thread1 = files
        .iter()
        .find(|n| n.ends_with(".out-01"))
        .unwrap_or_else(|| panic!("no thread file in {files:?}"));
    let pid = header(&dir.join(thread1), "pid:");
    assert_eq!(*thread1, format!("cc.#{pid}.out-01"));
    assert!(files.contains(&format!("cc.#{pid}.out")), "{files:?}");
    assert!(files.contains(&format!("cc.#{pid}.log")), "{files:?}");
    let ours_file = dir.join(thread1);
    assert_eq!(
        header(&ours_file, "events:"),
        "Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw"
    );
    assert_eq!(header(&ours_file, "thread:"), "1");
    // Valgrind's file for thread 1.
    let vg = dir.join("vg.out-01");
    assert_eq!(header(&ours_file, "events:"), header(&vg, "events:"));
    let (x, y) = (
        per_function(&annotate("callgrind_annotate", &ours_file)),
        per_function(&annotate("callgrind_annotate", &vg)),
    );
    assert_eq!(x, y, "per-function Ir: coldcache, then Callgrind");
    // Only the toggled function and what it calls: its 3 calls and
    // helper's 30,000.
    assert_eq!(x.keys().collect::<Vec<_>>(), ["bench", "helper"]);
    assert_eq!(x["helper"], 210_000, "30,000 calls of 7 instructions (-O1)");
    let ir = |f: &Path| {
        header(f, "summary:")
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(ir(&ours_file), ir(&vg), "the summary's Ir");
    // The log: Valgrind's header and summary lines, Ir as the file's.
    let log = std::fs::read_to_string(dir.join(format!("cc.#{pid}.log"))).unwrap();
    assert!(log.starts_with(&format!("=={pid}== Callgrind")), "{log}");
    assert!(
        log.contains(&format!("=={pid}== Command: ./harness 3")),
        "{log}"
    );
    let refs = log
        .lines()
        .find_map(|l| l.split_once("I   refs:"))
        .map(|(_, v)| v.trim().replace(',', ""));
    assert_eq!(refs.as_deref(), Some(ir(&ours_file).as_str()), "{log}");
}

#[test]
fn cachegrind_files_read_by_cg_annotate_count_the_programs_functions_as_cachegrind() {
    let Some(dir) = ready("cachegrind") else {
        return;
    };
    let (a, b) = side_by_side(&dir, &["--tool=cachegrind"], &["./harness"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    // The summary on stderr, after the program's own line.
    let err = text(&a.stderr);
    assert!(err.starts_with("to stderr\n=="), "{err}");
    assert!(
        err.contains("== I   refs:") && err.contains("== D1  misses:"),
        "{err}"
    );
    let ours = dir.join("cc");
    assert_eq!(
        header(&ours, "events:"),
        "Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw"
    );
    assert_eq!(header(&ours, "events:"), header(&dir.join("vg"), "events:"));
    let (x, y) = (
        per_function(&annotate("cg_annotate", &ours)),
        per_function(&annotate("cg_annotate", &dir.join("vg"))),
    );
    for f in ["bench", "helper", "setup"] {
        assert!(x.contains_key(f), "{f} missing: {x:?}");
        assert_eq!(x.get(f), y.get(f), "{f}: coldcache {x:?}, Cachegrind {y:?}");
    }
    // The whole run: from main, not the loader, so fewer than Cachegrind's.
    let ir = |f: &Path| -> u64 {
        header(f, "summary:")
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(ir(&ours) < ir(&dir.join("vg")));
    assert!(ir(&ours) > x.values().sum::<u64>());
}

#[test]
fn run_as_valgrind_without_cache_simulation_writes_ir_alone() {
    let Some(dir) = ready("argv0") else {
        return;
    };
    let link = dir.join("valgrind");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(COLDCACHE, &link).unwrap();
    let out = run(
        &dir,
        link.to_str().unwrap(),
        &[
            "-q",
            "--tool=callgrind",
            "--cache-sim=no",
            "--separate-threads=no",
            "--toggle-collect=helper",
            "--callgrind-out-file=%q{HOME_FOR_TEST}.%p",
            "./harness",
        ],
    );
    // %q{VAR} of an unset VAR: refused before the program runs.
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("HOME_FOR_TEST is not set"));
    assert!(out.stdout.is_empty(), "the program ran");
    let mut cmd = Command::new(&link);
    cmd.args([
        "-q",
        "--tool=callgrind",
        "--cache-sim=no",
        "--separate-threads=no",
        "--toggle-collect=helper",
        "--callgrind-out-file=%q{HOME_FOR_TEST}.%p",
        "./harness",
    ])
    .current_dir(&dir)
    .env("HOME_FOR_TEST", "plain");
    let out = run_with_deadline(cmd, "valgrind link");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "to stderr\n", "-q: nothing of ours");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("plain.")
        })
        .expect("plain.PID written");
    assert_eq!(header(&file, "events:"), "Ir");
    // helper: 30,000 calls of 7 instructions, as Callgrind counts it.
    assert_eq!(header(&file, "summary:"), "210000");
    assert_eq!(header(&file, "totals:"), "210000");
}

#[test]
fn what_coldcache_cannot_do_is_refused_before_the_program_runs() {
    let Some(dir) = ready("refused") else {
        return;
    };
    for (args, says) in [
        (
            &["--tool=cachegrind", "--branch-sim=yes"][..],
            "--branch-sim=yes",
        ),
        (&["--tool=memcheck"][..], "--tool=memcheck"),
        (
            &["--tool=callgrind", "--bogus"][..],
            "unknown option --bogus",
        ),
    ] {
        let all = [&["valgrind"], args, &["./harness"]].concat();
        let out = run(&dir, COLDCACHE, &all);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: the program ran");
    }
}

#[test]
fn separate_threads_write_a_file_per_thread_whose_function_counts_sum_to_callgrinds() {
    let Some(dir) = ready("threads") else {
        return;
    };
    programs::compile(
        "tests-programs/valgrind/threads.c",
        &dir.join("threads"),
        &["-O1", "-g", "-pthread"],
        false,
    );
    let opts = ["--tool=callgrind", "--separate-threads=yes", "-q"];
    let (a, b) = side_by_side(&dir, &opts, &["./threads"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    // work's Ir over the thread files. Valgrind numbers a thread by a slot
    // it reuses once a thread has ended (here often 2 files for 3
    // threads); coldcache numbers each thread: main first, -01.
    let work = |prefix: &str| -> (u64, usize) {
        let mut sum = 0;
        let mut n = 0;
        for k in 1..=9 {
            let f = dir.join(format!("{prefix}-{k:02}"));
            if !f.exists() {
                break;
            }
            assert_eq!(header(&f, "thread:"), k.to_string());
            n += 1;
            sum += per_function(&annotate("callgrind_annotate", &f))
                .get("work")
                .copied()
                .unwrap_or(0);
        }
        (sum, n)
    };
    let (ours, files) = work("cc");
    let (theirs, _) = work("vg");
    assert_eq!(files, 3, "main and two threads");
    assert_eq!(ours, theirs, "work's Ir over the threads");
    // 4 instructions a step (-O1), 6 a call.
    assert_eq!(ours, 4 * (5000 + 20000 + 40000) + 3 * 6);
    // main's file holds main's call alone.
    let main = per_function(&annotate("callgrind_annotate", &dir.join("cc-01")));
    assert_eq!(main.get("work"), Some(&(4 * 5000 + 6)));
}

/// A program using `callgrind.h`'s requests (`requests.c`: START after a
/// set-up, ZERO_STATS after a first call, TOGGLE_COLLECT around a call,
/// STOP and START around another) under `--instr-atstart=no`, in fast
/// mode and in trap mode: the same self Ir per function as Callgrind's
/// (only `measured`, `last` and their `work` counted), the same output.
#[test]
fn client_requests_count_the_functions_as_callgrind() {
    let Some(dir) = ready("requests") else {
        return;
    };
    programs::compile(
        "tests-programs/valgrind/requests.c",
        &dir.join("requests"),
        &["-O1", "-g"],
        false,
    );
    let opts = ["--tool=callgrind", "--instr-atstart=no"];
    let b = run(
        &dir,
        "valgrind",
        &[&opts[..], &["--callgrind-out-file=vg", "-q", "./requests"]].concat(),
    );
    assert_eq!(b.status.code(), Some(0), "{}", text(&b.stderr));
    // `main` is left out: where a request's own instructions fall (the
    // ones after a START counted or not) moves it by one or two, and
    // Callgrind splits it (`main'2`) after the ZERO_STATS.
    let functions = |annotated: &str| {
        let mut m = per_function(annotated);
        m.retain(|f, _| !f.starts_with("main"));
        m
    };
    let y = functions(&annotate("callgrind_annotate", &dir.join("vg")));
    assert_eq!(
        y.keys().collect::<Vec<_>>(),
        ["last", "measured", "work"],
        "Callgrind: {y:?}"
    );
    for mode in ["fast", "trap"] {
        let mut cmd = Command::new(COLDCACHE);
        cmd.arg("valgrind")
            .args(opts)
            .args(["--callgrind-out-file=cc", "./requests"])
            .current_dir(&dir)
            .env_remove("VALGRIND_OPTS")
            .env("COLDCACHE_MODE", mode);
        let a = run_with_deadline(cmd, mode);
        assert_eq!(a.status.code(), Some(0), "{mode}: {}", text(&a.stderr));
        assert_eq!(a.stdout, b.stdout, "{mode}: the program's output");
        let x = functions(&annotate("callgrind_annotate", &dir.join("cc")));
        assert_eq!(
            x, y,
            "{mode}: requests.c's functions: coldcache, then Callgrind"
        );
    }
}

/// `CALLGRIND_DUMP_STATS` and `DUMP_STATS_AT` cut the profile into parts
/// written as Callgrind writes them (`dumps.c`): FILE.1, FILE.2, then FILE
/// at the end, each with its `part:` number, each part's functions with
/// Callgrind's self Ir (`first`, then `second`, then `third`, `main`
/// left out as in the test above).
#[test]
fn dump_stats_cut_the_profile_into_callgrinds_parts() {
    let Some(dir) = ready("dumps") else {
        return;
    };
    programs::compile(
        "tests-programs/valgrind/dumps.c",
        &dir.join("dumps"),
        &["-O1", "-g"],
        false,
    );
    let b = run(
        &dir,
        "valgrind",
        &[
            "--tool=callgrind",
            "--callgrind-out-file=vg",
            "-q",
            "./dumps",
        ],
    );
    assert_eq!(b.status.code(), Some(0), "{}", text(&b.stderr));
    let a = run(
        &dir,
        COLDCACHE,
        &[
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=cc",
            "./dumps",
        ],
    );
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    for (part, file, only) in [
        ("1", ".1", "first"),
        ("2", ".2", "second"),
        ("3", "", "third"),
    ] {
        let (cc, vg) = (dir.join(format!("cc{file}")), dir.join(format!("vg{file}")));
        assert_eq!(header(&cc, "part:"), part);
        assert_eq!(header(&vg, "part:"), part);
        let mine = |f: &Path| {
            let mut m = per_function(&annotate("callgrind_annotate", f));
            m.retain(|f, _| !f.starts_with("main"));
            m
        };
        let (x, y) = (mine(&cc), mine(&vg));
        assert_eq!(x, y, "part {part}: coldcache, then Callgrind");
        assert_eq!(x.keys().collect::<Vec<_>>(), [only], "part {part}");
    }
}

#[test]
fn a_pattern_naming_nested_functions_toggles_as_callgrinds() {
    let Some(dir) = ready("nested") else {
        return;
    };
    // `?e*` names bench, helper (which bench calls) and setup: Callgrind
    // turns collection on entering bench and off again entering helper.
    let args = ["--tool=callgrind", "--toggle-collect=?e*", "-q"];
    let (a, b) = side_by_side(&dir, &args, &["./harness"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(b.status.code(), Some(0));
    let x = per_function(&annotate("callgrind_annotate", &dir.join("cc")));
    let y = per_function(&annotate("callgrind_annotate", &dir.join("vg")));
    assert_eq!(x, y, "harness.c's functions: coldcache, then Callgrind");
    assert_eq!(
        x.keys().collect::<Vec<_>>(),
        ["bench", "setup"],
        "helper toggled off"
    );
}

#[test]
fn a_stripped_program_is_captured_from_the_c_librarys_start() {
    let Some(dir) = ready("stripped") else {
        return;
    };
    let st = Command::new("strip")
        .arg("-o")
        .arg(dir.join("stripped"))
        .arg(dir.join("harness"))
        .status();
    if !st.is_ok_and(|s| s.success()) {
        eprintln!("SKIP a_stripped_program: strip failed or missing");
        return;
    }
    let (a, b) = side_by_side(&dir, &["--tool=callgrind"], &["./stripped", "3"]);
    assert_eq!(a.status.code(), Some(3), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let err = text(&a.stderr);
    assert!(err.contains("captured: from __libc_start_main"), "{err}");
    let ir = |f: &str| -> u64 { header(&dir.join(f), "summary:").parse().unwrap() };
    // bench's 3 calls, helper's 30,000 and setup (harness.c at -O1, as
    // the tests above count them): all there, and less than Valgrind's
    // run, which has the loader too.
    assert!(ir("cc") > 180_039 + 210_000 + 20_483, "{}", ir("cc"));
    assert!(ir("cc") < ir("vg"), "{} {}", ir("cc"), ir("vg"));
}

/// A file Valgrind cannot create ends the run as Valgrind ends it, each
/// side checked against Valgrind itself: Cachegrind (which opens its file
/// at the end) says the results are missing and exits with the program's
/// status; Callgrind's out file and the log file are found out before the
/// program runs, exit status 1.
#[test]
fn a_file_that_cannot_be_created_ends_the_run_as_valgrinds() {
    let Some(dir) = ready("unwritable") else {
        return;
    };
    let missing = dir.join("no-such-dir").join("x");
    let m = missing.to_str().unwrap();
    for (tool, opt, status, ran, says) in [
        (
            "--tool=cachegrind",
            "--cachegrind-out-file",
            3,
            true,
            format!("error: can't open cache simulation output file '{m}'"),
        ),
        (
            "--tool=callgrind",
            "--callgrind-out-file",
            1,
            false,
            format!("Error: can not open cache simulation output file `{m}'"),
        ),
        (
            "--tool=callgrind",
            "--log-file",
            1,
            false,
            format!("valgrind: Cannot create log file '{m}': No such file or directory"),
        ),
    ] {
        let file = format!("{opt}={m}");
        let args = ["-q", tool, file.as_str(), "./harness", "3"];
        let a = run(&dir, COLDCACHE, &[&["valgrind"], &args[..]].concat());
        let b = run(&dir, "valgrind", &args);
        let (ea, eb) = (text(&a.stderr), text(&b.stderr));
        assert_eq!(b.status.code(), Some(status), "Valgrind {args:?}: {eb}");
        assert_eq!(a.status.code(), Some(status), "coldcache {args:?}: {ea}");
        assert!(eb.contains(&says), "Valgrind {args:?}: {eb}");
        assert!(ea.contains(&says), "coldcache {args:?}: {ea}");
        assert_eq!(a.stdout, b.stdout, "{args:?}");
        assert_eq!(!a.stdout.is_empty(), ran, "{args:?}: the program ran");
    }
}

/// `%n` (a sequence number counted over the log file's name, then the out
/// file's) and `--log-file=-` (a file named `-`) name the same files as
/// Valgrind, each run in a directory of its own.
#[test]
fn percent_n_and_a_dash_name_the_files_as_valgrinds() {
    let Some(dir) = ready("names") else {
        return;
    };
    let mut listed = Vec::new();
    for (sub, exe, first) in [
        ("cc", COLDCACHE, Some("valgrind")),
        ("vg", "valgrind", None),
    ] {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        let runs: [&[&str]; 2] = [
            &[
                "--tool=callgrind",
                "--log-file=l.%n",
                "--callgrind-out-file=c.%n.%n",
                "../harness",
            ],
            &[
                "--tool=cachegrind",
                "--log-file=-",
                "--cachegrind-out-file=cg.%n",
                "../harness",
            ],
        ];
        for args in runs {
            let out = run(&d, exe, &[first.as_slice(), args].concat());
            assert_eq!(out.status.code(), Some(0), "{exe} {args:?}");
            // The program's own output alone: the log went to its file.
            assert_eq!(text(&out.stderr), "to stderr\n", "{exe} {args:?}");
            assert!(text(&out.stdout).starts_with("checksum "), "{exe}");
        }
        let log = std::fs::read_to_string(d.join("-")).unwrap();
        assert!(log.contains("== Cachegrind, a cache"), "{exe}: {log}");
        assert!(log.contains("== I   refs:"), "{exe}: {log}");
        let l1 = std::fs::read_to_string(d.join("l.1")).unwrap();
        assert!(l1.contains("== Callgrind, a call-graph"), "{exe}: {l1}");
        assert_eq!(header(&d.join("c.2.3"), "events:"), "Ir", "{exe}");
        let mut names: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        listed.push(names);
    }
    assert_eq!(
        listed[0],
        ["-", "c.2.3", "cg.1", "l.1"],
        "coldcache's files"
    );
    assert_eq!(listed[0], listed[1], "coldcache's files, then Valgrind's");
}
