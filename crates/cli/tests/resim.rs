//! "Capture once, simulate many": `coldcache sim TRACE --cache X -o DUMP`
//! on a trace kept by `coldcache record --trace`, against independent
//! truths:
//! - the capture itself: re-simulated with the capture's configuration,
//!   the dump equals the capture's dump record by record (instructions and
//!   every counter per instruction, stack and thread), with the same
//!   stacks and threads;
//! - a capture run directly with another configuration (the same
//!   deterministic single-threaded program, address randomisation off):
//!   re-simulating the first capture's trace with it gives that capture's
//!   records;
//! - Callgrind with matched geometry: a kernel's nine events in a
//!   re-simulated dump equal Callgrind's for that region, started cold;
//! - one invocation with several configurations equals one invocation per
//!   configuration, and `coldcache diff` compares the dumps.
//!
//! Skipped with a message when gcc (or, for the Callgrind oracle, Valgrind)
//! is missing.

use coldcache_dump::Dump;
use object::{Object, ObjectSymbol};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use dumps::load;
use library::{have, library, repo, COLDCACHE};
use programs::{compile, scratch_in, succeed as ok, unrandomised};

fn scratch(name: &str) -> PathBuf {
    scratch_in("resim", name)
}

/// `examples/programs/pushbuffer.c`, built in `dir` without PIE.
fn pushbuffer(dir: &Path) -> PathBuf {
    compile(
        "examples/programs/pushbuffer.c",
        &dir.join("pushbuffer"),
        &["-O1", "-g", "-fno-pie", "-no-pie"],
        false,
    )
}

/// `coldcache record` of `run_frames` with `cache`, without address
/// randomisation (so two runs touch the same addresses), in trap mode (the
/// oracle), keeping the trace when asked. The dump is left unresolved.
fn record(dir: &Path, bin: &Path, cache: &str, dump: &Path, trace: Option<&Path>) -> Dump {
    let mut cmd = unrandomised(dir);
    cmd.args(["record", "--no-resolve", "--mode", "trap", "--cache", cache])
        .arg("--line-use")
        .args(["--function", "run_frames", "-o"])
        .arg(dump);
    if let Some(t) = trace {
        cmd.arg("--trace").arg(t);
    }
    cmd.arg("--").arg(bin);
    ok(cmd);
    load(dump)
}

/// `coldcache sim TRACE --cache C -o DUMP ...` (unresolved).
fn resim(trace: &Path, targets: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(COLDCACHE);
    cmd.args(["sim", "--no-resolve", "--no-progress"])
        .arg(trace);
    for (cache, out) in targets {
        cmd.args(["--cache", cache, "-o"]).arg(out);
    }
    ok(cmd)
}

fn tools_or_skip(test: &str, valgrind: bool) -> bool {
    let setarch = Command::new("setarch").arg("--version").output().is_ok();
    let ok =
        have("gcc") && setarch && (!valgrind || (have("valgrind") && have("callgrind_annotate")));
    if !ok {
        eprintln!("SKIP {test}: gcc, setarch or valgrind missing");
    }
    ok
}

/// What two dumps must share when they count the same accesses with the
/// same configuration: records (ip, stack, thread, every counter),
/// stacks, threads, counters and totals.
fn assert_same_counts(ours: &Dump, theirs: &Dump, what: &str) {
    assert_eq!(ours.meta.counters, theirs.meta.counters, "{what}: counters");
    assert_eq!(ours.meta.instructions, theirs.meta.instructions, "{what}");
    assert_eq!(ours.meta.cores, theirs.meta.cores, "{what}: cores");
    assert_eq!(ours.stacks, theirs.stacks, "{what}: stack tree");
    // Thread ids differ between two runs; names and cores do not.
    let threads = |d: &Dump| -> Vec<(String, u32)> {
        d.threads.iter().map(|t| (t.name.clone(), t.core)).collect()
    };
    assert_eq!(threads(ours), threads(theirs), "{what}: threads");
    assert_eq!(ours.records.len(), theirs.records.len(), "{what}: records");
    for (a, b) in ours.records.iter().zip(&theirs.records) {
        assert_eq!(a, b, "{what}: record of ip {:#x} stack {}", b.ip, b.stack);
    }
    assert_eq!(ours.totals(), theirs.totals(), "{what}: totals");
}

/// Cachegrind's geometry with a 2-way 4 KiB first-level data cache and a
/// 64 KiB last level (smaller than the 84 KiB pushbuffer's frame touches),
/// as a configuration file.
fn two_way_l1(dir: &Path) -> PathBuf {
    let mut cfg = coldcache_config::resolve("cachegrind").unwrap();
    let d1 = coldcache_config::parse_valgrind_option("--D1", "4096,2,64").unwrap();
    let ll = coldcache_config::parse_valgrind_option("--LL", "65536,4,64").unwrap();
    coldcache_config::apply_cachegrind_overrides(&mut cfg, None, Some(d1), Some(ll)).unwrap();
    cfg.name = "two-way-l1".into();
    let path = dir.join("two-way-l1.toml");
    std::fs::write(&path, coldcache_config::to_toml(&cfg)).unwrap();
    path
}

/// The exactness oracle: a capture with `--trace`, re-simulated with the
/// capture's own configuration, gives back the capture's dump, counter for
/// counter (with cachegrind, and with jaguar's two levels and four cores).
#[test]
fn resimulated_with_the_capture_cache_equals_the_capture() {
    if !tools_or_skip(
        "resimulated_with_the_capture_cache_equals_the_capture",
        false,
    ) {
        return;
    }
    let dir = scratch("same");
    let bin = pushbuffer(&dir);
    for cache in ["cachegrind", "jaguar"] {
        // jaguar's trace is kept zstd-compressed (`.zst`).
        let trace = dir.join(if cache == "jaguar" {
            "jaguar.cctrace.zst"
        } else {
            "cachegrind.cctrace"
        });
        let cap = record(
            &dir,
            &bin,
            cache,
            &dir.join(format!("{cache}.ccdump")),
            Some(&trace),
        );
        assert!(cap.meta.instructions > 50_000, "{}", cap.meta.instructions);
        assert!(cap.stacks.len() > 1, "the capture has call stacks");
        let head = std::fs::read(&trace).unwrap()[..8].to_vec();
        if cache == "jaguar" {
            assert_eq!(head[..4], [0x28, 0xb5, 0x2f, 0xfd], "zstd frame");
        } else {
            assert_eq!(head, b"CCTRACE\0");
        }
        let out = dir.join(format!("{cache}.resim.ccdump"));
        resim(&trace, &[(cache, &out)]);
        let re = load(&out);
        // Line use too (issue 32): measured by the capture, and equal.
        let used = cap.counter("l1d_bytes_used").expect("line use counted");
        assert!(cap.totals()[used] > 0, "{cache}: bytes used");
        assert_same_counts(&re, &cap, cache);
        assert_eq!(re.meta.program, cap.meta.program);
        assert_eq!(re.meta.cache_toml, cap.meta.cache_toml);
        assert_eq!(re.modules, cap.modules, "modules for symbol resolution");
        assert_eq!(re.threads, cap.threads, "thread ids, names and cores");
        assert!(re.meta.notes.iter().any(|n| n.contains("re-simulated")));
    }
}

/// Re-simulating with another configuration equals capturing with it: the
/// same program, run twice without address randomisation, once with
/// cachegrind and a trace, once with a 2-way first level.
#[test]
fn resimulated_with_another_cache_equals_a_capture_with_it() {
    if !tools_or_skip(
        "resimulated_with_another_cache_equals_a_capture_with_it",
        false,
    ) {
        return;
    }
    let dir = scratch("other");
    let bin = pushbuffer(&dir);
    let two_way = two_way_l1(&dir);
    let two_way = two_way.to_str().unwrap();
    let trace = dir.join("cg.cctrace");
    let cg = record(
        &dir,
        &bin,
        "cachegrind",
        &dir.join("cg.ccdump"),
        Some(&trace),
    );
    // Also with a trace, of a name as long: the environment `record` gives
    // the program (which names the trace) is then as long, and so the
    // stack lies at the same addresses (a 2-way first level sees where).
    let direct = record(
        &dir,
        &bin,
        two_way,
        &dir.join("cg.ccdum2"),
        Some(&dir.join("dd.cctrace")),
    );
    let out = dir.join("resim.ccdump");
    resim(&trace, &[(two_way, &out)]);
    let re = load(&out);
    assert_same_counts(&re, &direct, "2-way L1");
    // Not trivially so: the small last level sends several times as many
    // reads to memory as Cachegrind's 8 MiB one.
    let mem = |d: &Dump| d.totals()[d.counter("r_mem").unwrap()];
    assert!(mem(&re) > 3 * mem(&cg), "{} vs {}", mem(&re), mem(&cg));
}

/// Several configurations in one invocation (one read of the stream, a
/// simulator each) give the dumps one invocation each gives, and `diff`
/// compares them.
#[test]
fn several_caches_in_one_run_equal_one_run_each() {
    if !tools_or_skip("several_caches_in_one_run_equal_one_run_each", false) {
        return;
    }
    let dir = scratch("many");
    let bin = pushbuffer(&dir);
    let two_way = two_way_l1(&dir);
    let two_way = two_way.to_str().unwrap();
    let trace = dir.join("t.cctrace");
    record(
        &dir,
        &bin,
        "cachegrind",
        &dir.join("cap.ccdump"),
        Some(&trace),
    );
    let caches = ["cachegrind", two_way, "jaguar"];
    let many: Vec<PathBuf> = (0..3)
        .map(|i| dir.join(format!("many{i}.ccdump")))
        .collect();
    let targets: Vec<(&str, &Path)> = caches
        .iter()
        .copied()
        .zip(many.iter().map(PathBuf::as_path))
        .collect();
    resim(&trace, &targets);
    for (i, cache) in caches.iter().enumerate() {
        let one = dir.join(format!("one{i}.ccdump"));
        resim(&trace, &[(cache, &one)]);
        assert_same_counts(&load(&many[i]), &load(&one), cache);
    }
    let mut cmd = Command::new(COLDCACHE);
    cmd.arg("diff").arg(&many[0]).arg(&many[1]);
    let out = ok(cmd);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("build_push_buffer"), "{text}");
    // A cut trace is an error naming the file and the offset, and no dump
    // is written.
    let bytes = std::fs::read(&trace).unwrap();
    let cut = dir.join("cut.cctrace");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let never = dir.join("never.ccdump");
    let mut cmd = Command::new(COLDCACHE);
    cmd.args(["sim", "--no-progress", "--cache", "cachegrind", "-o"])
        .arg(&never)
        .arg(&cut);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(cut.to_str().unwrap()) && err.contains("at byte"),
        "{err}"
    );
    assert!(!never.exists(), "no dump from a cut trace");
    // Mismatched counts of -o and --cache are refused before reading.
    let mut cmd = Command::new(COLDCACHE);
    cmd.args(["sim", "--cache", "jaguar", "--cache", "cachegrind", "-o"])
        .arg(dir.join("x.ccdump"))
        .arg(&trace);
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 -o for 2 --cache"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The nine events of the records inside `[lo, hi)` (Callgrind's names).
fn nine(d: &Dump, lo: u64, hi: u64) -> BTreeMap<&'static str, u64> {
    let mut t = vec![0u64; d.meta.counters.len()];
    for r in d.records.iter().filter(|r| r.ip >= lo && r.ip < hi) {
        for (a, b) in t.iter_mut().zip(&r.counters) {
            *a += b;
        }
    }
    let c = |n: &str| t[d.counter(n).unwrap()];
    let side = |s: &str| {
        (
            c(&format!("{s}_L1")),
            c(&format!("{s}_L2")),
            c(&format!("{s}_mem")),
        )
    };
    let (_, i2, im) = side("i");
    let (r1, r2, rm) = side("r");
    let (w1, w2, wm) = side("w");
    BTreeMap::from([
        ("Ir", c("instructions")),
        ("Dr", r1 + r2 + rm),
        ("Dw", w1 + w2 + wm),
        ("I1mr", i2 + im),
        ("D1mr", r2 + rm),
        ("D1mw", w2 + wm),
        ("ILmr", im),
        ("DLmr", rm),
        ("DLmw", wm),
    ])
}

/// Callgrind's self cost of `k_{kernel}`, run cold with `geometry`.
fn callgrind(bin: &Path, dir: &Path, kernel: &str, geometry: &[&str]) -> BTreeMap<String, u64> {
    let file = dir.join(format!("callgrind.{kernel}.out"));
    let mut cmd = Command::new("valgrind");
    cmd.args(["--tool=callgrind", "--cache-sim=yes", "--instr-atstart=no"])
        .args(geometry)
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(bin)
        .args(["callgrind", kernel]);
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir(dir);
    ok(cmd);
    let out = ok({
        let mut c = Command::new("callgrind_annotate");
        c.args([
            "--inclusive=no",
            "--show=Ir,Dr,Dw,I1mr,D1mr,D1mw,ILmr,DLmr,DLmw",
        ])
        .arg(&file);
        c
    });
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.contains(&format!(":k_{kernel} ")) || l.ends_with(&format!(":k_{kernel}")))
        .unwrap_or_else(|| panic!("no k_{kernel} row in:\n{text}"));
    let nums: Vec<u64> = row
        .split_whitespace()
        .filter(|t| {
            (*t == "." || t.starts_with(|c: char| c.is_ascii_digit())) && !t.ends_with("%)")
        })
        .map(|t| {
            if t == "." {
                0
            } else {
                t.replace(',', "").parse().unwrap()
            }
        })
        .take(9)
        .collect();
    [
        "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw",
    ]
    .into_iter()
    .map(String::from)
    .zip(nums)
    .collect()
}

/// A kernel captured cold (the C API around it) with Cachegrind's default
/// geometry and a trace,
/// re-simulated with a small 2-way data cache and a small last level:
/// its nine events equal Callgrind's run with that geometry.
#[test]
fn resimulated_events_equal_callgrinds_for_other_geometry() {
    if !tools_or_skip(
        "resimulated_events_equal_callgrinds_for_other_geometry",
        true,
    ) {
        return;
    }
    let dir = scratch("callgrind");
    let lib = library();
    let bin = dir.join("kernels");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-fno-pie", "-no-pie", "-I"])
        .arg(repo().join("include"))
        .arg(repo().join("tests-programs/capture/kernels.c"))
        .arg("-L")
        .arg(lib.parent().unwrap())
        .args(["-Wl,--no-as-needed", "-lcoldcache"])
        .arg(format!("-Wl,-rpath,{}", lib.parent().unwrap().display()))
        .arg("-o")
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success());
    let small = ["--I1=32768,8,64", "--D1=4096,2,64", "--LL=65536,4,64"];
    let syms = std::fs::read(&bin).unwrap();
    let file = object::File::parse(&*syms).unwrap();
    let mut bad = Vec::new();
    let mut changed = 0;
    // The kernels that touch only globals (at the same addresses natively
    // and under Valgrind, the program being built without PIE): with a
    // 2-way 4 KiB first level, where a stack line lands decides conflicts,
    // and Valgrind lays out the stack differently from a native run.
    for k in ["strided", "struct_walk"] {
        let sym = file
            .symbols()
            .find(|s| s.name() == Ok(&format!("k_{k}")))
            .unwrap();
        let (lo, hi) = (sym.address(), sym.address() + sym.size());
        let (dump, trace) = (
            dir.join(format!("{k}.ccdump")),
            dir.join(format!("{k}.cctrace")),
        );
        // The C API's window, as Callgrind's starts (cold, at
        // CALLGRIND_START_INSTRUMENTATION) around the same call.
        let mut cmd = Command::new(&bin);
        cmd.args(["coldcache", k, "cachegrind"])
            .arg(&dump)
            .arg(&trace);
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .current_dir(&dir);
        ok(cmd);
        let out = dir.join(format!("{k}.small.ccdump"));
        let mut cmd = Command::new(COLDCACHE);
        cmd.args([
            "sim",
            "--no-resolve",
            "--no-progress",
            "--cache",
            "cachegrind",
        ])
        .args(["--D1", "4096,2,64", "--LL", "65536,4,64", "-o"])
        .arg(&out)
        .arg(&trace);
        ok(cmd);
        let ours = nine(&load(&out), lo, hi);
        let theirs = callgrind(&bin, &dir, k, &small);
        eprintln!(
            "{k:<12} re-simulated {ours:?}\n{:<12} callgrind    {theirs:?}",
            ""
        );
        let before = bad.len();
        for (e, v) in &ours {
            let t = theirs.get(*e).copied().unwrap_or(0);
            if *v != t {
                bad.push(format!("{k} {e}: re-simulated {v}, callgrind {t}"));
            }
        }
        if bad.len() > before {
            // Seen once in CI (struct_walk DLmr 577 against 576) and never
            // in 200 runs here: where the difference fell, per instruction.
            let d = load(&out);
            for r in d.records.iter().filter(|r| r.ip >= lo && r.ip < hi) {
                let named: Vec<String> = d
                    .meta
                    .counters
                    .iter()
                    .zip(&r.counters)
                    .filter(|(_, v)| **v != 0)
                    .map(|(c, v)| format!("{c}={v}"))
                    .collect();
                eprintln!("  ours {:#x} stack {}: {}", r.ip, r.stack, named.join(" "));
            }
        }
        changed += usize::from(nine(&load(&dump), lo, hi) != ours);
    }
    assert!(bad.is_empty(), "events differ: {bad:#?}");
    // And the geometry mattered: some captures' own dumps differ.
    assert!(changed > 0, "the small geometry changed no kernel's events");
}

/// Nine threads (four workers, four created and joined inside the
/// window, and the main thread) captured through the C API on jaguar's
/// four cores: the trace interleaves them in the order the capture
/// counted them, and re-simulating it with jaguar gives back the capture,
/// record for record, each thread on its recorded core.
#[test]
fn a_multithreaded_capture_resimulates_exactly() {
    if !tools_or_skip("a_multithreaded_capture_resimulates_exactly", false) {
        return;
    }
    let dir = scratch("threads");
    let lib = library();
    let bin = dir.join("threads");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-I"])
        .arg(repo().join("include"))
        .arg(repo().join("tests-programs/capture/threads.c"))
        .arg("-L")
        .arg(lib.parent().unwrap())
        .args(["-Wl,--no-as-needed", "-lcoldcache"])
        .arg(format!("-Wl,-rpath,{}", lib.parent().unwrap().display()))
        .arg("-o")
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success());
    let (dump, trace) = (dir.join("t.ccdump"), dir.join("t.cctrace"));
    let mut cmd = Command::new(&bin);
    cmd.args(["coldcache", "1"]).arg(&dump).arg(&trace);
    cmd.current_dir(&dir);
    ok(cmd);
    let cap = load(&dump);
    assert!(cap.threads.len() >= 8, "{} threads", cap.threads.len());
    let cores: std::collections::BTreeSet<u32> = cap.threads.iter().map(|t| t.core).collect();
    assert!(cores.len() > 1, "threads on several cores: {cores:?}");
    let out = dir.join("re.ccdump");
    resim(&trace, &[("jaguar", &out)]);
    let re = load(&out);
    assert_same_counts(&re, &cap, "threads on jaguar");
    assert_eq!(re.threads, cap.threads);
}

/// Traces that no capture wrote re-simulate too, and count what `coldcache
/// sim` (the replay path, another loop over the same simulator) counts
/// for them: the nine events of the dump equal `sim --json`'s, on the
/// bundled lackey example; on a lackey trace with accesses wider than a
/// line (cut to the line size with the `cachegrind` preset, as Cachegrind
/// does: a 512-byte `fxsave` then reads inside it, which miss only when
/// it was cut); and on a din trace, whose data records carry no
/// instruction address (ip 0). The dump says no capture engine ran, and
/// opens in `report` and `export`.
#[test]
fn text_traces_resimulate_to_the_tables() {
    let dir = scratch("text_traces");
    let wide = dir.join("wide.lackey");
    let mut text = String::new();
    for i in 0..64u64 {
        let ip = 0x40_0000 + 8 * i;
        let buf = 0x1000_0000 + 0x1000 * i;
        text += &format!("I  {ip:08x},4\n S {buf:08x},512\nI  {:08x},4\n", ip + 4);
        for line in 1..8 {
            text += &format!(" L {:08x},8\n", buf + 64 * line);
        }
    }
    std::fs::write(&wide, text).unwrap();
    let din = dir.join("t.din");
    let mut text = String::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..30_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text += &format!("2 {:x}\n", 0x40_0000 + (i % 3000) * 4);
        match x % 4 {
            0 => text += &format!("0 {:x} 8\n", 0x2000_0000 + (x >> 8) % (1 << 20)),
            1 => text += &format!("1 {:x}\n", 0x3000_0000 + (x >> 8) % 4096),
            _ => {}
        }
    }
    std::fs::write(&din, text).unwrap();
    for trace in [repo().join("examples/traces/example.lackey.gz"), wide, din] {
        let dump = dir.join("t.ccdump");
        let said = resim(&trace, &[("cachegrind", &dump)]);
        let d = load(&dump);
        let mut cmd = Command::new(COLDCACHE);
        cmd.args(["sim", "--json", "--no-progress", "--cache", "cachegrind"])
            .arg(&trace);
        let json: serde_json::Value = serde_json::from_slice(&ok(cmd).stdout).unwrap();
        let tables: BTreeMap<&str, u64> = nine(&d, 0, u64::MAX)
            .keys()
            .map(|&k| (k, json["cachegrind"][k].as_u64().unwrap()))
            .collect();
        assert_eq!(nine(&d, 0, u64::MAX), tables, "{}", trace.display());
        // The dump opens in `report` and `export`; the Callgrind export's
        // totals are the same nine events.
        let mut cmd = Command::new(COLDCACHE);
        cmd.args(["report", "--by", "line"]).arg(&dump);
        ok(cmd);
        let mut cmd = Command::new(COLDCACHE);
        cmd.args(["export", "--format", "callgrind", "-o", "-"])
            .arg(&dump);
        let out = String::from_utf8(ok(cmd).stdout).unwrap();
        let line = |key: &str| -> Vec<&str> {
            out.lines()
                .find_map(|l| l.strip_prefix(key))
                .unwrap_or_else(|| panic!("no {key} line:\n{out}"))
                .split_whitespace()
                .collect()
        };
        let exported: BTreeMap<&str, u64> = line("events:")
            .into_iter()
            .zip(line("totals:"))
            .filter(|(e, _)| tables.contains_key(e))
            .map(|(e, v)| (e, v.parse().unwrap()))
            .collect();
        assert_eq!(exported, tables, "{}: callgrind export", trace.display());
        let said = String::from_utf8_lossy(&said.stderr);
        assert!(
            said.contains("mode: none (simulated from a recorded trace)"),
            "{said}"
        );
    }
}

/// `sim -o` refuses, naming it, each option whose result a dump cannot
/// hold or whose input it does not take, and writes nothing: miss
/// classification (the option, and `classify_misses` in a configuration
/// file; before, the shadow caches ran and their counts were dropped),
/// Cache Lab, `--json`, `--ignore-ifetch`, `--thread-core`, two traces,
/// and `-o` and `--cache` counts that differ; and an output in a missing
/// directory, before the trace is read (it was simulated first, then the
/// write failed). `record` refuses miss classification too.
#[test]
fn resimulation_refuses_what_a_dump_cannot_hold() {
    let dir = scratch("refusals");
    let trace = repo().join("examples/traces/example.lackey.gz");
    let toml = dir.join("classify.toml");
    let preset = repo().join("examples/caches/small-2level.toml");
    let text = std::fs::read_to_string(&preset).unwrap();
    let text = text.replacen(
        "coherence = true",
        "coherence = true\nclassify_misses = true",
        1,
    );
    assert!(text.contains("classify_misses = true"));
    std::fs::write(&toml, text).unwrap();
    let dump = dir.join("out.ccdump");
    let toml_arg = toml.display().to_string();
    let cases: [(&[&str], &str); 8] = [
        (&["--classify-misses"], "--classify-misses"),
        (&["--cache", &toml_arg], "classify_misses"),
        (&["--cachelab", "4,1,4"], "--cachelab"),
        (&["--json"], "--json"),
        (&["--ignore-ifetch"], "--ignore-ifetch"),
        (&["--thread-core", "0=0"], "--thread-core"),
        (
            &["--cache", "cachegrind", "--cache", "jaguar"],
            "give one -o per --cache",
        ),
        (&["TRACE"], "one trace (2 given)"),
    ];
    for (extra, named) in cases {
        let _ = std::fs::remove_file(&dump);
        let mut cmd = Command::new(COLDCACHE);
        cmd.args(["sim", "--no-progress", "--no-resolve"])
            .arg(&trace);
        for a in extra {
            match *a {
                "TRACE" => cmd.arg(&trace),
                a => cmd.arg(a),
            };
        }
        cmd.arg("-o").arg(&dump).stdin(Stdio::null());
        let out = cmd.output().expect("run coldcache");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(named),
            "{extra:?}: expected a refusal naming {named:?}, got {} with:\n{err}",
            out.status
        );
        assert!(!dump.exists(), "{extra:?}: a dump was written");
    }
    // An output that cannot be written is refused before the trace is
    // read: here a trace that fails at its end, which must not be the
    // error reported.
    let mut cmd = Command::new(COLDCACHE);
    let nowhere = dir.join("no such directory").join("out.ccdump");
    let bad_end = dir.join("bad_end.lackey");
    std::fs::write(&bad_end, "I  00400000,4\n L 00001000,8\nnot a record\n").unwrap();
    cmd.args(["sim", "--no-progress", "--no-resolve"])
        .arg(&bad_end)
        .arg("-o")
        .arg(&nowhere)
        .stdin(Stdio::null());
    let out = cmd.output().expect("run coldcache");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("no such directory")
            && err.contains("does not exist"),
        "-o in a missing directory: got {} with:\n{err}",
        out.status
    );
    // `record` refuses such a configuration before the program starts.
    let mut cmd = Command::new(COLDCACHE);
    cmd.args([
        "record",
        "--no-resolve",
        "--all",
        "--cache",
        &toml_arg,
        "-o",
    ])
    .arg(&dump)
    .args(["--", "/bin/true"])
    .stdin(Stdio::null());
    let out = cmd.output().expect("run coldcache");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("classify_misses"),
        "record: expected a refusal naming classify_misses, got {} with:\n{err}",
        out.status
    );
    assert!(!dump.exists(), "record: a dump was written");
    // The same configuration without miss classification re-simulates.
    resim(&trace, &[(preset.to_str().unwrap(), &dump)]);
    assert!(load(&dump).records.len() > 1);
}
