//! Naming what people capture, and saying what a capture could not show:
//!
//! - a C++ `-O2` function with a GCC `.cold` part
//!   (`tests-programs/real/count_and_sort.cpp`) is found by its plain name
//!   and by the README's `count_and_sort*`, counts exactly the instructions
//!   of `valgrind --tool=callgrind --toggle-collect='count_and_sort*'`
//!   outside glibc's string functions (within 5% in them: their paths
//!   depend on the page offsets of their arguments, on the stack whose
//!   offset is randomised per run, and on the heap, elsewhere under
//!   Valgrind), and its `.cold` part is counted under it in the report;
//! - a function GCC split by partial inlining (`tests-programs/real/partial.c`):
//!   `record --function lookup` names the copy `lookup.part.0` that main
//!   calls instead, and the copy captured by its name counts Callgrind's
//!   Ir and is `lookup` in the dump and the report;
//! - `record` warns when several threads were traced on a one-core cache,
//!   naming presets with several cores, and not otherwise.

#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use dumps::{load, text};
use library::{have, library, COLDCACHE};
use programs::{compile, run_with_deadline, scratch_in, SAME_GLIBC_PATHS};

use std::path::Path;
use std::process::{Command, Stdio};

/// One fixed environment for the native and the Valgrind run: the same
/// glibc paths, symbols bound at load (no lazy binding inside the window).
fn same_env(c: &mut Command, dir: &Path) {
    c.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LD_BIND_NOW", "1")
        .env("GLIBC_TUNABLES", SAME_GLIBC_PATHS)
        .env("COLDCACHE_LIB", library())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Ok(m) = std::env::var("COLDCACHE_MODE") {
        c.env("COLDCACHE_MODE", m);
    }
}

/// `(address, size)` of the symbols of `bin` whose name passes `pick`, from
/// `nm -S` (ELF addresses).
fn nm_symbols(bin: &Path, pick: impl Fn(&str) -> bool) -> Vec<(String, u64, u64)> {
    let out = Command::new("nm").arg("-S").arg(bin).output().unwrap();
    text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [addr, size, kind, name] = f[..] else {
                return None;
            };
            (kind.eq_ignore_ascii_case("t") && pick(name)).then(|| {
                (
                    name.to_string(),
                    u64::from_str_radix(addr, 16).unwrap(),
                    u64::from_str_radix(size, 16).unwrap(),
                )
            })
        })
        .collect()
}

/// glibc's assembly string functions (`__memcmp_avx2_movbe`,
/// `__memcpy_avx_unaligned_erms`, `__strlen_avx2`, …), by our name.
fn is_string_function(name: &str) -> bool {
    ["__mem", "__str", "__wmem"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The same, on a line of `callgrind_annotate` (`FILE:FUNCTION [OBJECT]`).
fn is_string_function_cg(line: &str) -> bool {
    let f = line.split(" [").next().unwrap_or(line);
    let f = f.rsplit(':').next().unwrap_or(f);
    is_string_function(f)
}

#[test]
fn a_function_with_a_cold_part_is_found_by_its_plain_name_and_counts_as_callgrind() {
    let test = "a_function_with_a_cold_part_is_found_by_its_plain_name_and_counts_as_callgrind";
    if !["g++", "valgrind", "nm"].iter().all(|t| have(t)) {
        eprintln!("SKIP {test}: g++, valgrind or nm missing");
        return;
    }
    let dir = scratch_in("names", "cold");
    let bin = compile(
        "tests-programs/real/count_and_sort.cpp",
        &dir.join("count_and_sort"),
        &["-O2", "-g"],
        false,
    );
    let is_fn = |n: &str| n.starts_with("_Z14count_and_sort");
    let hot = nm_symbols(&bin, |n| is_fn(n) && !n.contains('.'));
    let cold = nm_symbols(&bin, |n| is_fn(n) && n.ends_with(".cold"));
    if cold.is_empty() {
        eprintln!("SKIP {test}: this g++ made no count_and_sort.cold part");
        return;
    }
    assert_eq!(hot.len(), 1, "{hot:?}");
    let words = "20000";

    // Callgrind: Ir while in count_and_sort* (its parts and its callees).
    let cg_out = dir.join("callgrind.out");
    let mut cg = Command::new("valgrind");
    cg.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", cg_out.display()))
        .arg("--toggle-collect=count_and_sort*")
        .arg(&bin)
        .arg(words);
    same_env(&mut cg, &dir);
    let cg = run_with_deadline(cg, "callgrind");
    assert!(cg.status.success(), "{}", text(&cg.stderr));
    let theirs: u64 = std::fs::read_to_string(&cg_out)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    // Their Ir in glibc's string functions (`__memcmp_avx2_movbe`, …):
    // those take paths by the page offsets of their arguments (a load that
    // could cross a page is done another way), and the heap is elsewhere
    // under Valgrind, so only they may differ, and only a little.
    let ann = Command::new("callgrind_annotate")
        .args(["--inclusive=no", "--threshold=100", "--auto=no"])
        .arg(&cg_out)
        .output()
        .unwrap();
    assert!(ann.status.success(), "{}", text(&ann.stderr));
    let their_strings: u64 = text(&ann.stdout)
        .lines()
        .filter_map(|l| {
            let (n, rest) = l.trim_start().split_once(' ')?;
            let rest = rest.split_once(')')?.1.trim_start();
            (!rest.starts_with("=>") && is_string_function_cg(rest))
                .then(|| n.replace(',', "").parse::<u64>().ok())?
        })
        .sum();
    assert!(their_strings > 0, "{}", text(&ann.stdout));

    // The plain name and the README's wildcard: one function, the hot
    // part's entry, the same count as Callgrind's.
    for (name, dump) in [("count_and_sort", "plain"), ("count_and_sort*", "glob")] {
        let path = dir.join(format!("{dump}.ccdump"));
        let mut rec = Command::new(COLDCACHE);
        rec.args(["record", "--function", name, "-o"])
            .arg(&path)
            .arg("--")
            .arg(&bin)
            .arg(words);
        same_env(&mut rec, &dir);
        let out = run_with_deadline(rec, name);
        let err = text(&out.stderr);
        assert!(out.status.success(), "--function {name}: {err}");
        assert_eq!(
            text(&out.stdout),
            text(&cg.stdout),
            "the program's output changed"
        );
        let d = load(&path);
        assert_eq!(d.meta.trigger, format!("function:{}", hot[0].0), "{name}");
        assert_eq!(d.meta.cut_short, None);
        let syms = d.symbols.as_ref().expect("record resolves the dump");
        let our_strings: u64 = d
            .records
            .iter()
            .filter(|r| {
                syms.location(r.ip)
                    .and_then(|l| l.frames.last())
                    .is_some_and(|f| is_string_function(&syms.functions[f.function as usize].name))
            })
            .map(|r| r.counters[0])
            .sum();
        let ours = d.meta.instructions;
        eprintln!(
            "--function {name}: coldcache {ours} instructions ({our_strings} in glibc string \
             functions), callgrind {theirs} ({their_strings})"
        );
        assert_eq!(
            ours - our_strings,
            theirs - their_strings,
            "--function {name}: outside glibc's string functions"
        );
        // Their paths also follow the stack's offset in its page, which the
        // kernel randomises per run: 21 runs here gave 8.09M to 8.44M (up
        // to 3.9% above Callgrind's 8.13M; 2% failed 1 run in 21).
        let (a, b) = (our_strings as f64, their_strings as f64);
        assert!(
            (a - b).abs() <= 0.05 * b,
            "--function {name}: string functions {our_strings} against {their_strings}"
        );
    }

    // The cold part ran (every 997th word is bad) and is counted under
    // count_and_sort: its instructions' outermost function is the hot
    // part's, and no view has a `[clone .cold]` row.
    let path = dir.join("plain.ccdump");
    let d = load(&path);
    let syms = d.symbols.as_ref().expect("record resolves the dump");
    let m = d
        .modules
        .iter()
        .find(|m| Path::new(&m.path) == bin.canonicalize().unwrap())
        .expect("the program's module");
    let runtime = |v: u64| m.start - m.file_offset + v;
    let (hot_start, cold_start, cold_size) = (runtime(hot[0].1), runtime(cold[0].1), cold[0].2);
    let in_cold: Vec<u64> = d
        .records
        .iter()
        .map(|r| r.ip)
        .filter(|ip| (cold_start..cold_start + cold_size).contains(ip))
        .collect();
    assert!(!in_cold.is_empty(), "the cold part never ran");
    for ip in in_cold {
        let loc = syms.location(ip).expect("resolved");
        let f = &syms.functions[loc.frames.last().unwrap().function as usize];
        assert_eq!(f.entry, hot_start, "{ip:#x}: {}", f.name);
        assert!(f.name.starts_with("count_and_sort("), "{}", f.name);
    }
    for args in [
        &["--by", "function"][..],
        &["--view", "top-down"],
        &["--view", "callers", "count_and_sort"],
    ] {
        let out = Command::new(COLDCACHE)
            .arg("report")
            .arg(&path)
            .args(args)
            .output()
            .unwrap();
        let s = text(&out.stdout);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(s.contains("count_and_sort"), "{args:?}: {s}");
        assert!(!s.contains("[clone .cold]"), "{args:?}: {s}");
    }
}

/// Two threads traced on the default (one-core) cache: `record` warns that
/// no coherence can show and names presets with several cores; on `jaguar`
/// (8 cores) it does not.
#[test]
fn several_threads_on_a_one_core_cache_are_warned_about() {
    if !have("gcc") {
        eprintln!("SKIP several_threads_on_a_one_core_cache_are_warned_about: gcc missing");
        return;
    }
    let dir = scratch_in("names", "onecore");
    let src = dir.join("two.c");
    std::fs::write(
        &src,
        "#include <pthread.h>\n#include <stdio.h>\nstatic volatile long c[2];\n\
         static void *w(void *a) { long i = (long)a; for (int k = 0; k < 1000; k++) c[i]++; return 0; }\n\
         int main(void) { pthread_t t[2]; for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, w, (void *)i);\n\
         for (int i = 0; i < 2; i++) pthread_join(t[i], 0); printf(\"%ld\\n\", c[0] + c[1]); return 0; }\n",
    )
    .unwrap();
    let bin = dir.join("two");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    for (cache, warned) in [("cachegrind", true), ("jaguar", false)] {
        let path = dir.join(format!("{cache}.ccdump"));
        let mut rec = Command::new(COLDCACHE);
        rec.env("COLDCACHE_LIB", library())
            .current_dir(&dir)
            .args([
                "record",
                "--all",
                "--threads",
                "all",
                "--no-resolve",
                "--cache",
                cache,
                "-o",
            ])
            .arg(&path)
            .arg("--")
            .arg(&bin);
        let out = run_with_deadline(rec, cache);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{cache}: {err}");
        assert_eq!(text(&out.stdout), "2000\n");
        let d = load(&path);
        assert!(d.threads.len() >= 2, "{cache}: {} threads", d.threads.len());
        let says = err.contains("threads were traced on a one-core cache");
        assert_eq!(says, warned, "{cache}: {err}");
        if warned {
            assert!(err.contains("--cache jaguar (8 cores)"), "{err}");
        }
    }
}

/// Partial inlining: main inlines `lookup`'s header and calls
/// `lookup.part.0`, so `lookup`'s own entry never runs. `record --function
/// lookup` names the copy (and finds no call); `--function lookup.part.0`
/// counts what Callgrind counts there, and the copy's costs are `lookup`'s
/// (its entry, its name) in the dump and the report.
#[test]
fn a_partially_inlined_function_names_its_copy_and_counts_under_its_name() {
    let test = "a_partially_inlined_function_names_its_copy_and_counts_under_its_name";
    if !["gcc", "valgrind", "nm"].iter().all(|t| have(t)) {
        eprintln!("SKIP {test}: gcc, valgrind or nm missing");
        return;
    }
    let dir = scratch_in("names", "part");
    let bin = compile(
        "tests-programs/real/partial.c",
        &dir.join("partial"),
        &["-O2", "-g"],
        false,
    );
    let base = nm_symbols(&bin, |n| n == "lookup");
    let part = nm_symbols(&bin, |n| n == "lookup.part.0");
    if base.len() != 1 || part.len() != 1 {
        eprintln!("SKIP {test}: this gcc made no lookup.part.0 beside lookup");
        return;
    }
    let mut rec = Command::new(COLDCACHE);
    rec.args(["record", "--no-resolve", "--function", "lookup", "-o"])
        .arg(dir.join("base.ccdump"))
        .arg("--")
        .arg(&bin);
    same_env(&mut rec, &dir);
    let err = text(&run_with_deadline(rec, "lookup").stderr);
    assert!(
        err.contains("--function lookup: note: the compiler also made a copy of lookup")
            && err.contains("name a copy: --function lookup.part.0"),
        "{err}"
    );

    let cg_out = dir.join("callgrind.out");
    let mut cg = Command::new("valgrind");
    cg.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", cg_out.display()))
        .arg("--toggle-collect=lookup.part.0")
        .arg(&bin);
    same_env(&mut cg, &dir);
    let cg = run_with_deadline(cg, "callgrind");
    assert!(cg.status.success(), "{}", text(&cg.stderr));
    let theirs: u64 = std::fs::read_to_string(&cg_out)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();

    // Keys 0 to 3 reach the body: four calls.
    let path = dir.join("part.ccdump");
    let mut rec = Command::new(COLDCACHE);
    rec.args([
        "record",
        "--function",
        "lookup.part.0",
        "--calls",
        "4",
        "-o",
    ])
    .arg(&path)
    .arg("--")
    .arg(&bin);
    same_env(&mut rec, &dir);
    let out = run_with_deadline(rec, "lookup.part.0");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), text(&cg.stdout));
    let d = load(&path);
    assert_eq!(d.meta.calls, "1 to 4");
    assert_eq!(d.meta.instructions, theirs, "against callgrind");
    assert!(theirs > 1000);

    let syms = d.symbols.as_ref().expect("record resolves the dump");
    let m = d
        .modules
        .iter()
        .find(|m| Path::new(&m.path) == bin.canonicalize().unwrap())
        .expect("the program's module");
    let runtime = |v: u64| m.start - m.file_offset + v;
    let (start, size) = (runtime(part[0].1), part[0].2);
    let mut in_part = 0;
    for r in &d.records {
        if !(start..start + size).contains(&r.ip) {
            continue;
        }
        in_part += r.counters[0];
        let loc = syms.location(r.ip).expect("resolved");
        let f = &syms.functions[loc.frames.last().unwrap().function as usize];
        assert_eq!((f.name.as_str(), f.entry), ("lookup", runtime(base[0].1)));
    }
    assert_eq!(in_part, theirs, "every instruction is the copy's");
    assert!(!syms.functions.iter().any(|f| f.name.contains(".part")));
    let out = Command::new(COLDCACHE)
        .arg("report")
        .arg(&path)
        .args(["--by", "function"])
        .output()
        .unwrap();
    let s = text(&out.stdout);
    let row = s
        .lines()
        .find(|l| l.ends_with(" lookup"))
        .unwrap_or_else(|| panic!("{s}"));
    assert!(row.trim_start().starts_with(&format!("{theirs} ")), "{s}");
}
