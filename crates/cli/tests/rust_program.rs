//! A Rust program nobody here wrote for the tool (`tests-programs/real/wordcount`,
//! std only: a `HashMap` with a fixed SipHash state, then `sort_by`), built
//! with cargo offline into a scratch target dir (skipped, with a message,
//! when cargo or Valgrind is missing):
//!
//! - `record --all --threads all` in fast and in trap mode, with three
//!   spawned threads, exits 0 with the program's output unchanged. Rust's runtime arms an alternate signal stack before
//!   `main` and, at the main thread's end, disables then unmaps it; the
//!   engine's handlers ran on that stack and the kernel ignored the
//!   handler's change of it, so the next trap was delivered to unmapped
//!   memory (SIGSEGV at `main`'s return). `altstack.rs` now lets such a
//!   `sigaltstack` run for real.
//! - `record --function wordcount::count_and_sort` (the demangled path)
//!   against `valgrind --tool=callgrind --cache-sim=yes
//!   --toggle-collect='wordcount::count_and_sort*'`, both with the same
//!   cache geometry and glibc told to take the string functions Valgrind
//!   makes it take (no AVX-512, same thresholds: names.rs's settings).
//!   Measured (200,000 words, two runs): Ir 90,437,979 and 90,552,914
//!   against 90,537,969 and 90,435,225 (within 0.13%); the whole
//!   difference is in glibc's string functions (`__memcmp_avx2_movbe`),
//!   whose paths depend on the page offsets of their arguments (a load
//!   that could cross a page is done another way), and the heap lies
//!   elsewhere, differently from run to run (ASLR). Outside
//!   `__mem*`/`__str*` the counts are equal (77,513,479 since the
//!   program's threads were added; 91,206,157 against 91,088,468 in
//!   all): asserted exactly;
//!   the total within 1%.
//!   D1 misses (reads + writes) within 2% (measured 1.2% more, 1.2%
//!   fewer): the memcmp paths touch other lines too. The read/write split
//!   differs more (one run: our reads 20.35M against Callgrind's Dr
//!   19.64M, writes 14.64M against Dw 15.31M, the sums within 0.1%; the
//!   cause, likely how a read-modify-write is classed, is not established
//!   here), so only the sum of misses is compared with
//!   Callgrind's. LL misses are not: Callgrind
//!   simulates the cache before the window too (its LL is warm: 1 LL read
//!   miss), a capture starts on an empty cache.
//! - The trees of a `--function` capture start at the captured function
//!   (issue 36: the top-down put 18 runtime levels above it);
//!   `--whole-stack` gives the chain from `_start`.
//! - Fast mode: trapped instructions under 0.1% (`fast_trapped`, the
//!   dump's note) and no unmodelled access, without any glibc setting (the
//!   AVX-512 string functions as a user gets them) and with them.

#[path = "common/callgrind_totals.rs"]
mod callgrind_totals;
#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use callgrind_totals::callgrind_totals;
use dumps::{load, text};
use library::{have, library, repo, COLDCACHE};
use programs::{run_with_deadline, run_within, scratch_in, SAME_GLIBC_PATHS};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One cache for both: Valgrind's own detection on this host gives a
/// direct-mapped 256 MiB LL.
const GEOMETRY: [(&str, &str); 3] = [
    ("I1", "32768,8,64"),
    ("D1", "32768,8,64"),
    ("LL", "8388608,16,64"),
];

/// The word count built with cargo offline into `dir`, or `None` (skip)
/// when cargo is not found.
fn build(test: &str, dir: &Path) -> Option<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if !have(&cargo) && !Path::new(&cargo).exists() {
        eprintln!("SKIP {test}: cargo not found");
        return None;
    }
    let manifest = repo().join("tests-programs/real/wordcount/Cargo.toml");
    let out = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "--offline",
            "--quiet",
            "--manifest-path",
        ])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(dir.join("target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo build: {}", text(&out.stderr));
    Some(dir.join("target/release/wordcount"))
}

/// A fixed environment: symbols bound at load, optionally glibc's paths as
/// under Valgrind.
fn env(c: &mut Command, dir: &Path, same_glibc: bool) {
    c.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LD_BIND_NOW", "1")
        .env("COLDCACHE_LIB", library())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if same_glibc {
        c.env("GLIBC_TUNABLES", SAME_GLIBC_PATHS);
    }
}

fn native(bin: &Path, dir: &Path, args: &[&str]) -> String {
    let mut c = Command::new(bin);
    c.args(args);
    env(&mut c, dir, false);
    let out = run_with_deadline(c, "native run");
    assert!(out.status.success());
    text(&out.stdout)
}

/// glibc's assembly string functions, by our name.
fn is_string_function(name: &str) -> bool {
    ["__mem", "__str", "__wmem"]
        .iter()
        .any(|p| name.starts_with(p))
}

#[test]
fn record_all_on_a_rust_program_exits_0_with_its_output_unchanged_in_both_modes() {
    let test = "record_all_on_a_rust_program_exits_0_with_its_output_unchanged_in_both_modes";
    let dir = scratch_in("rust", "all");
    let Some(bin) = build(test, &dir) else { return };
    // Trap mode single-steps every instruction: a small input (500 words
    // still run over a million instructions: the runtime's start, the
    // threads). Spawned threads, traced too, end the same way (their
    // stacks are disabled and unmapped as they end).
    for (mode, words) in [("fast", "50000"), ("trap", "500")] {
        let path = dir.join(format!("{mode}.ccdump"));
        let mut rec = Command::new(COLDCACHE);
        rec.args(["record", "--all", "--threads", "all", "--no-resolve"])
            .args(["--mode", mode, "-o"])
            .arg(&path)
            .arg("--")
            .arg(&bin)
            .args([words, "3"]);
        env(&mut rec, &dir, false);
        let out = run_within(rec, mode, Duration::from_secs(300));
        assert!(
            out.status.success(),
            "record --all --mode {mode}: {:?}\n{}",
            out.status,
            text(&out.stderr)
        );
        assert_eq!(
            text(&out.stdout),
            native(&bin, &dir, &[words, "3"]),
            "--mode {mode}: the program's output changed"
        );
        let d = load(&path);
        assert_eq!(d.meta.cut_short, None, "--mode {mode}");
        assert!(d.meta.instructions > 1_000_000, "--mode {mode}");
        assert_eq!(d.threads.len(), 4, "--mode {mode}: main and 3 spawned");
    }
}

#[test]
fn count_and_sort_counts_as_callgrind_with_nothing_trapped_or_unmodelled() {
    let test = "count_and_sort_counts_as_callgrind_with_nothing_trapped_or_unmodelled";
    if !have("valgrind") {
        eprintln!("SKIP {test}: valgrind missing");
        return;
    }
    let dir = scratch_in("rust", "function");
    let Some(bin) = build(test, &dir) else { return };
    let words = "200000";
    let expected = native(&bin, &dir, &[words]);

    let cg_out = dir.join("callgrind.out");
    let mut cg = Command::new("valgrind");
    cg.args(["--tool=callgrind", "--cache-sim=yes"])
        .arg(format!("--callgrind-out-file={}", cg_out.display()))
        .arg("--toggle-collect=wordcount::count_and_sort*");
    for (level, g) in GEOMETRY {
        cg.arg(format!("--{level}={g}"));
    }
    cg.arg(&bin).arg(words);
    env(&mut cg, &dir, true);
    let cg = run_within(cg, "callgrind", Duration::from_secs(300));
    assert!(cg.status.success(), "{}", text(&cg.stderr));
    assert_eq!(text(&cg.stdout), expected);
    // events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
    let theirs: Vec<u64> = std::fs::read_to_string(&cg_out)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
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
            let f = rest.split(" [").next().unwrap_or(rest);
            let f = f.rsplit(':').next().unwrap_or(f);
            (!rest.starts_with("=>") && is_string_function(f))
                .then(|| n.replace(',', "").parse::<u64>().ok())?
        })
        .sum();

    for same_glibc in [true, false] {
        let path = dir.join(format!("f-{same_glibc}.ccdump"));
        let mut rec = Command::new(COLDCACHE);
        rec.args(["record", "--function", "wordcount::count_and_sort"]);
        for (level, g) in GEOMETRY {
            rec.arg(format!("--{level}")).arg(g);
        }
        rec.arg("-o").arg(&path).arg("--").arg(&bin).arg(words);
        env(&mut rec, &dir, same_glibc);
        let out = run_within(rec, "record --function", Duration::from_secs(300));
        let err = text(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert_eq!(text(&out.stdout), expected, "the program's output changed");
        let d = load(&path);
        assert_eq!(d.meta.cut_short, None);
        assert!(
            d.meta.trigger.contains("count_and_sort"),
            "{}",
            d.meta.trigger
        );
        let ours = callgrind_totals(&d);
        let trapped = coldcache_analysis::summary::fast_trapped(&d.meta)
            .expect("a fast-mode capture (record's default here)");
        eprintln!(
            "same glibc paths {same_glibc}: coldcache Ir {} D1mr {} D1mw {}, trapped {trapped}, \
             unmodelled {}; callgrind Ir {} D1mr {} D1mw {} ({their_strings} Ir in string \
             functions)",
            ours[0], ours[4], ours[5], ours[9], theirs[0], theirs[4], theirs[5]
        );
        assert!(
            trapped * 1000 < d.meta.instructions,
            "{trapped} of {} trapped",
            d.meta.instructions
        );
        assert_eq!(ours[9], 0, "unmodelled: {:?}", d.meta.unmodelled);
        if !same_glibc {
            continue;
        }
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
        let within = |a: u64, b: u64, share: f64| (a as f64 - b as f64).abs() <= share * b as f64;
        assert!(
            within(ours[0], theirs[0], 0.01),
            "Ir {} against {}",
            ours[0],
            theirs[0]
        );
        let (a, b) = (ours[0] - our_strings, theirs[0] - their_strings);
        eprintln!("outside string functions: {a} against {b}");
        assert_eq!(a, b, "Ir outside glibc's string functions");
        let (a, b) = (ours[4] + ours[5], theirs[4] + theirs[5]);
        assert!(within(a, b, 0.02), "D1 misses {a} against {b}");
    }
}

#[test]
fn trees_of_a_function_capture_start_at_the_captured_function() {
    let test = "trees_of_a_function_capture_start_at_the_captured_function";
    let dir = scratch_in("rust", "rooted");
    let Some(bin) = build(test, &dir) else { return };
    let path = dir.join("r.ccdump");
    let mut rec = Command::new(COLDCACHE);
    rec.args(["record", "--function", "wordcount::count_and_sort", "-o"])
        .arg(&path)
        .arg("--")
        .arg(&bin)
        .arg("2000");
    env(&mut rec, &dir, false);
    let out = run_within(rec, "record --function", Duration::from_secs(300));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tree = |extra: &[&str]| -> serde_json::Value {
        let mut c = Command::new(COLDCACHE);
        c.arg("report")
            .arg(&path)
            .args(["--view", "top-down", "--json", "--min-percent", "0"])
            .args(extra);
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let v = tree(&[]);
    let first: Vec<&serde_json::Value> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["depth"] == 1)
        .collect();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["name"], "wordcount::count_and_sort");
    assert_eq!(first[0]["calls"], 1, "called once in its window");
    // Its inclusive costs are the whole capture's.
    assert_eq!(first[0]["incl"], v["totals"]);
    let whole = tree(&["--whole-stack"]);
    let names: Vec<&str> = whole["rows"]
        .as_array()
        .unwrap()
        .iter()
        .take_while(|r| r["name"] != "wordcount::count_and_sort")
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"_start"), "{names:?}");
    assert!(names.len() >= 3, "the runtime's levels above: {names:?}");
}
