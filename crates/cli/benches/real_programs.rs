//! Capture rate on whole real programs against Cachegrind, same run
//! (`cargo bench -p coldcache-cli --bench real_programs`): issue 31's
//! figure. Each program is run `COLDCACHE_BENCH_RUNS` rounds (3 by
//! default), alternately under `coldcache record --all` (fast mode, the
//! default `cachegrind` preset, no symbol resolution) and under `valgrind
//! --tool=cachegrind --cache-sim=yes` with our preset's geometry
//! (`common::CACHEGRIND_GEOMETRY`), and each run's CPU time (user +
//! system, of the process and the children it waited for) and peak RSS
//! are read from `wait4`. The rate is instructions per CPU second: ours
//! from the dump, Cachegrind's its `Ir`. Printed per round, then the
//! median of the rounds' ratios (these machines are noisy: a round's two
//! runs are next to each other, so a ratio is fairer than either time).
//!
//! The programs:
//! - the Rust word count of `tests-programs/real/wordcount` (std `HashMap`
//!   and sort; built here with cargo, offline), `wordcount 200000 0`;
//! - the CPython interpreter running a JSON round trip, with
//!   `PYTHONHASHSEED=0`: `COLDCACHE_BENCH_PYTHON`, else the interpreter
//!   behind `python3` (skipped, with a message, when it cannot run the
//!   script).
//!
//! - threads (issue 35): `tests-programs/capture/frame.c`'s matrix
//!   multiply, two frames, captured with `--threads all --cache jaguar`,
//!   its rows split among four worker threads, and the same frames on the
//!   caller alone; printed besides: the four threads' rate over the one
//!   thread's, per round and as a median (the bar: 2/3).
//!
//! - `zstd -3 --single-thread` compressing 1 MiB of generated text, and the `sqlite3`
//!   shell building and querying a table of 100,000 rows in memory: the
//!   machine's own binaries, found on `PATH` (skipped, with a message,
//!   where they are not).
//!
//! - a Lua 5.4 script (issue 35): the interpreter built here with `gcc
//!   -O2` from the `lua-src` crate's bundled sources (fetched with cargo
//!   into the scratch directory; skipped, with a message, where that
//!   fails) and `scripts/zones-bench/host.c`, running [`LUA_SCRIPT`]:
//!   recursive calls, string building, a sort and table traffic, about
//!   350M instructions.
//!
//! - windows (issue 35: "memory stays bounded"): one frame of `frame.c`
//!   of about 10M, 100M and 1,000M instructions (N = 112, 241, 520),
//!   `cachegrind` preset; printed besides: each window's rate and peak
//!   memory (`record` and the traced program), which must not grow with
//!   the window.
//!
//! `COLDCACHE_BENCH_ONLY=rust`, `=python`, `=threads`, `=zstd`,
//! `=sqlite`, `=lua` or `=windows` runs one of them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const COLDCACHE: &str = env!("CARGO_BIN_EXE_coldcache");

mod common;
use common::repo;

/// The JSON round trip CPython runs (about 180 million instructions).
const SCRIPT: &str = "import json
d = [{'a': i, 'b': str(i) * 3} for i in range(3000)]
s = json.dumps(d)
print(len(json.loads(s)), s.find('2999'))";

fn runs() -> usize {
    std::env::var("COLDCACHE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// One run's cost, from `wait4`, and its standard error.
struct Cost {
    cpu_s: f64,
    peak_mib: f64,
    stderr: String,
}

/// Runs `c` to its end (output thrown away) and reads its cost. Panics,
/// naming the command, when it fails.
// The child is reaped by `wait4` (std's `wait` gives no usage).
#[allow(clippy::zombie_processes)]
fn measure(mut c: Command) -> Cost {
    let child = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    // The child's standard error is read to its end before the wait (a
    // full pipe would block it).
    let mut err = Vec::new();
    if let Some(mut e) = child.stderr {
        use std::io::Read;
        e.read_to_end(&mut err).ok();
    }
    let mut status = 0;
    // SAFETY: `rusage` is plain data, written by `wait4` before it is
    // read; `pid` is our own child, not yet waited for (std's `Child` is
    // dropped without waiting).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `status` and `ru` outlive the call.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4 {c:?}: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{c:?} failed ({status:#x}):\n{}",
        String::from_utf8_lossy(&err)
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Cost {
        cpu_s: secs(ru.ru_utime) + secs(ru.ru_stime),
        peak_mib: ru.ru_maxrss as f64 / 1024.0,
        stderr: String::from_utf8_lossy(&err).into_owned(),
    }
}

/// A program to measure: its command line and environment.
struct Program {
    name: &'static str,
    argv: Vec<String>,
    env: Vec<(&'static str, &'static str)>,
    /// `record`'s options besides `--all --no-resolve`.
    record: Vec<&'static str>,
}

fn ours(p: &Program, dir: &Path) -> (Cost, u64) {
    let dump = dir.join(format!("{}.ccdump", p.name));
    let mut c = Command::new(COLDCACHE);
    c.args(["record", "--all", "--no-resolve"])
        .args(&p.record)
        .arg("-o")
        .arg(&dump)
        .arg("--")
        .args(&p.argv)
        .envs(p.env.iter().copied());
    let cost = measure(c);
    // From `record`'s summary, not the dump: the bench's own memory must
    // stay small (a child's peak RSS can start from its parent's).
    let summary = &cost.stderr;
    assert!(
        !summary.contains("cut short"),
        "{}: the capture was cut short:\n{summary}",
        p.name
    );
    // The summary's line `N instructions, N threads, N records, ...`,
    // its last (the program's own lines come before it).
    let instructions = summary
        .lines()
        .rev()
        .filter_map(|l| l.trim().split_once(" instructions, "))
        .find(|(_, rest)| rest.contains(" threads, "))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("{}: no instruction count in\n{summary}", p.name));
    (cost, instructions)
}

fn cachegrind(p: &Program, dir: &Path) -> (Cost, u64) {
    let out = dir.join(format!("{}.cachegrind", p.name));
    let mut c = Command::new("valgrind");
    c.args(["--tool=cachegrind", "--cache-sim=yes"])
        .args(common::CACHEGRIND_GEOMETRY)
        .arg(format!("--cachegrind-out-file={}", out.display()))
        .args(&p.argv)
        .envs(p.env.iter().copied());
    let cost = measure(c);
    let text = std::fs::read_to_string(&out).expect("read Cachegrind's output");
    let ir = text
        .lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("Cachegrind's summary line");
    (cost, ir)
}

/// The word count, built with cargo offline into `dir`.
fn wordcount(dir: &Path) -> Program {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--offline",
            "--quiet",
            "--manifest-path",
        ])
        .arg(repo().join("tests-programs/real/wordcount/Cargo.toml"))
        .arg("--target-dir")
        .arg(dir.join("target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("run cargo");
    assert!(st.success(), "building the word count failed");
    let bin = dir.join("target/release/wordcount");
    Program {
        name: "rust-wordcount",
        argv: vec![bin.display().to_string(), "200000".into(), "0".into()],
        env: vec![],
        record: vec![],
    }
}

/// CPython, or `None` (with a message) when none runs the script.
fn cpython() -> Option<Program> {
    let python = match std::env::var_os("COLDCACHE_BENCH_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => {
            let out = Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output();
            let Ok(out) = out else {
                eprintln!("SKIP cpython: no python3 on PATH (or set COLDCACHE_BENCH_PYTHON)");
                return None;
            };
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        }
    };
    let ok = Command::new(&python)
        .args(["-c", SCRIPT])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIP cpython: {} cannot run the script", python.display());
        return None;
    }
    Some(Program {
        name: "cpython-json",
        argv: vec![python.display().to_string(), "-c".into(), SCRIPT.into()],
        env: vec![("PYTHONHASHSEED", "0")],
        record: vec![],
    })
}

/// The SQL the `sqlite3` shell runs: 100,000 rows inserted, then an
/// aggregate over a third of them and an indexed lookup.
const SQL: &str = "CREATE TABLE t(a INTEGER, b TEXT); \
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000) \
INSERT INTO t SELECT x, hex(x * 7919) FROM c; \
CREATE INDEX tb ON t(b); \
SELECT count(*), sum(a), max(b) FROM t WHERE a % 3 = 0; \
SELECT a FROM t WHERE b = hex(777 * 7919);";

/// `name` on `PATH`, or `None` with a message.
fn on_path(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    });
    if found.is_none() {
        eprintln!("SKIP {name}: not on PATH");
    }
    found
}

/// `zstd -3` compressing 1 MiB of generated text (words from a fixed
/// pseudo-random sequence) written into `dir`.
fn zstd(dir: &Path) -> Option<Program> {
    let bin = on_path("zstd")?;
    let input = dir.join("zstd-input.txt");
    let words = [
        "cache", "line", "miss", "set", "way", "tag", "fetch", "store", "load", "evict",
    ];
    let mut text = String::with_capacity(1 << 20);
    let mut x: u32 = 2463534242;
    while text.len() < 1 << 20 {
        // xorshift32
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        text.push_str(words[(x % 10) as usize]);
        text.push(if x.is_multiple_of(13) { '\n' } else { ' ' });
    }
    text.truncate(1 << 20);
    std::fs::write(&input, text).expect("write zstd's input");
    Some(Program {
        name: "zstd-1mib",
        argv: vec![
            bin.display().to_string(),
            "-q".into(),
            "-f".into(),
            "-3".into(),
            // Compression on the main thread (by default the command line
            // tool hands it to a worker, which `--all` does not trace).
            "--single-thread".into(),
            input.display().to_string(),
            "-o".into(),
            dir.join("zstd-output.zst").display().to_string(),
        ],
        env: vec![],
        record: vec![],
    })
}

/// The `sqlite3` shell running [`SQL`] on an in-memory database.
fn sqlite() -> Option<Program> {
    let bin = on_path("sqlite3")?;
    Some(Program {
        name: "sqlite-100k",
        argv: vec![bin.display().to_string(), ":memory:".into(), SQL.into()],
        env: vec![],
        record: vec![],
    })
}

/// The Lua script of the bench: a recursive function, strings made and
/// sorted, a table counted by key (about 350 million instructions, 20,000
/// call stacks).
const LUA_SCRIPT: &str = "\
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local t = {}
for i = 1, 40000 do t[i] = tostring(i * 7919 % 100003) .. 'x' end
table.sort(t)
local s = 0
for i = 1, #t, 7 do s = s + #t[i] end
local words = {}
for i = 1, #t do local w = t[i]:sub(1, 2); words[w] = (words[w] or 0) + 1 end
local n = 0
for _, c in pairs(words) do n = n + c end
print(fib(22), s, n)
";

/// The version of the `lua-src` crate whose Lua sources the bench builds.
const LUA_SRC: &str = "=547.1.0";

/// A Lua interpreter built into `dir` from the `lua-src` crate's sources
/// running [`LUA_SCRIPT`], or `None` (with a message) where the crate
/// cannot be fetched or built.
fn lua(dir: &Path) -> Option<Program> {
    let skip = |why: &str| {
        eprintln!("SKIP lua: {why}");
        None
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let fetch = dir.join("lua-fetch");
    std::fs::create_dir_all(fetch.join("src")).expect("a scratch directory");
    std::fs::write(
        fetch.join("Cargo.toml"),
        format!(
            "[package]\nname = \"lua-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             [dependencies]\nlua-src = \"{LUA_SRC}\"\n\
             # Not a member of a workspace the scratch directory may lie in.\n[workspace]\n"
        ),
    )
    .expect("write the fetch manifest");
    std::fs::write(fetch.join("src/lib.rs"), "").expect("write the fetch crate");
    let manifest = fetch.join("Cargo.toml");
    let ok = Command::new(&cargo)
        .args(["fetch", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return skip("cargo could not fetch the lua-src crate");
    }
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--quiet",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output();
    let Some(meta) = out
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
    else {
        return skip("cargo metadata gave no JSON for the fetch manifest");
    };
    let Some(src) = meta["packages"].as_array().and_then(|ps| {
        ps.iter()
            .find(|p| p["name"] == "lua-src")
            .and_then(|p| p["manifest_path"].as_str())
            .and_then(|m| Path::new(m).parent())
            .map(|d| d.join("lua-5.4.7"))
    }) else {
        return skip("no lua-src package in cargo metadata");
    };
    let Ok(entries) = std::fs::read_dir(&src) else {
        return skip(&format!("no Lua sources at {}", src.display()));
    };
    let mut sources: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "c") && !p.ends_with("luac.c"))
        .collect();
    sources.sort();
    let bin = dir.join("lua");
    let st = Command::new("gcc")
        .args(["-O2", "-g", "-DLUA_USE_LINUX", "-I"])
        .arg(&src)
        .arg(repo().join("scripts/zones-bench/host.c"))
        .args(&sources)
        .args(["-lm", "-ldl", "-o"])
        .arg(&bin)
        .status();
    if !st.is_ok_and(|s| s.success()) {
        return skip(&format!("gcc could not build Lua from {}", src.display()));
    }
    let script = dir.join("bench.lua");
    std::fs::write(&script, LUA_SCRIPT).expect("write the Lua script");
    Some(Program {
        name: "lua-script",
        argv: vec![bin.display().to_string(), script.display().to_string()],
        env: vec![],
        record: vec![],
    })
}

/// `frame.c`'s two frames of N=160 (about 58M instructions) with `threads`
/// threads, every thread traced on the `jaguar` preset (8 cores).
fn frames(bin: &Path, name: &'static str, threads: &str) -> Program {
    Program {
        name,
        argv: vec![
            bin.display().to_string(),
            "160".into(),
            "2".into(),
            threads.into(),
        ],
        env: vec![],
        record: vec!["--threads", "all", "--cache", "jaguar"],
    }
}

/// One frame of `frame.c` of side `n` (about 7.1 n³ instructions), on
/// one thread, the `cachegrind` preset.
fn window(bin: &Path, name: &'static str, n: u32) -> Program {
    Program {
        name,
        argv: vec![bin.display().to_string(), n.to_string(), "1".into()],
        env: vec![],
        record: vec!["--cache", "cachegrind"],
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read.
    let dir = tempfile::tempdir().expect("a scratch directory");
    let only = std::env::var("COLDCACHE_BENCH_ONLY").unwrap_or_default();
    let lib_dir = common::library_dir(COLDCACHE);
    let mut programs = Vec::new();
    if only.is_empty() || only == "rust" {
        programs.push(wordcount(dir.path()));
    }
    if only.is_empty() || only == "python" {
        programs.extend(cpython());
    }
    if only.is_empty() || only == "zstd" {
        programs.extend(zstd(dir.path()));
    }
    if only.is_empty() || only == "sqlite" {
        programs.extend(sqlite());
    }
    if only.is_empty() || only == "lua" {
        programs.extend(lua(dir.path()));
    }
    if only.is_empty() || only == "threads" {
        let bin = common::build_with_library("frame", dir.path(), &lib_dir);
        programs.push(frames(&bin, "frame-1-thread", "1"));
        programs.push(frames(&bin, "frame-4-threads", "4"));
    }
    const WINDOWS: [(&str, u32); 3] = [
        ("window-10M", 112),
        ("window-100M", 241),
        ("window-1000M", 520),
    ];
    if only.is_empty() || only == "windows" {
        let bin = common::build_with_library("frame", dir.path(), &lib_dir);
        for (name, n) in WINDOWS {
            programs.push(window(&bin, name, n));
        }
    }
    // Per program, each round's rate (ours, instructions per CPU second).
    let mut rates: Vec<(&str, Vec<f64>)> = Vec::new();
    // Per program, our largest peak memory (MiB) and instructions.
    let mut peaks: Vec<(&str, f64, u64)> = Vec::new();
    println!(
        "real programs, whole run: `coldcache record --all` (fast mode, cachegrind preset) \
         against `valgrind --tool=cachegrind --cache-sim=yes`, {} rounds, CPU = user + sys",
        runs()
    );
    for p in &programs {
        let mut ratios = Vec::new();
        let mut ours_rates = Vec::new();
        let (mut peak, mut instructions) = (0.0f64, 0);
        for round in 1..=runs() {
            let (a, n_ours) = ours(p, dir.path());
            peak = peak.max(a.peak_mib);
            instructions = n_ours;
            let (b, n_cg) = cachegrind(p, dir.path());
            let (rate_a, rate_b) = (n_ours as f64 / a.cpu_s, n_cg as f64 / b.cpu_s);
            ratios.push(rate_a / rate_b);
            ours_rates.push(rate_a);
            println!(
                "{:>15} round {round}: ours {n_ours} instr, {:.2} CPU s, {:.1} M/s, {:.0} MiB; \
                 Cachegrind {n_cg} Ir, {:.2} CPU s, {:.1} M/s, {:.0} MiB; rate ratio 1/{:.2}",
                p.name,
                a.cpu_s,
                rate_a / 1e6,
                a.peak_mib,
                b.cpu_s,
                rate_b / 1e6,
                b.peak_mib,
                rate_b / rate_a
            );
        }
        let m = median(ratios);
        println!(
            "{:>15} median rate ratio: {m:.3} (1/{:.2}) of Cachegrind's instructions per CPU second",
            p.name,
            1.0 / m
        );
        rates.push((p.name, ours_rates));
        peaks.push((p.name, peak, instructions));
    }
    let of = |name: &str| rates.iter().find(|(n, _)| *n == name).map(|(_, r)| r);
    if let (Some(one), Some(four)) = (of("frame-1-thread"), of("frame-4-threads")) {
        let per_round: Vec<f64> = four.iter().zip(one).map(|(f, o)| f / o).collect();
        let shown: Vec<String> = per_round.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "four traced threads against one, jaguar, our instructions per CPU second: \
             rounds {}, median {:.2} (issue 35's bar: 0.67)",
            shown.join(" "),
            median(per_round)
        );
    }
    let shown: Vec<String> = WINDOWS
        .iter()
        .filter_map(|(name, _)| {
            let (_, peak, n) = peaks.iter().find(|(p, _, _)| p == name)?;
            let r = of(name).map(|r| median(r.clone()))?;
            Some(format!(
                "{:.0}M instructions: {:.1} M/s, peak {peak:.0} MiB",
                *n as f64 / 1e6,
                r / 1e6
            ))
        })
        .collect();
    if !shown.is_empty() {
        println!(
            "windows of one frame, ours (median rate, largest peak of record and the program): {}",
            shown.join("; ")
        );
    }
}
