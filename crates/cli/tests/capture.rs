//! Capture tests against Valgrind: `tests-programs/capture/kernels.c` run
//! natively under `coldcache record` / the C API, and under Valgrind.
//!
//! - Instruction counts: `record --function k_X` must count exactly the Ir
//!   of `valgrind --tool=callgrind --toggle-collect=k_X`.
//! - Address streams: the trace written by `record --function k_X --trace`
//!   must equal, instruction by instruction, what
//!   `valgrind --tool=lackey --trace-mem=yes` prints for the same call
//!   (stack addresses compared relative to the return-address slot, since
//!   Valgrind places the stack elsewhere; globals compared exactly, the
//!   binary being built without PIE).
//! - Cache misses: a region captured from a cold cache with the C API and
//!   `cachegrind` geometry must have the same nine Cachegrind events as
//!   Callgrind's for the same region started cold with
//!   `CALLGRIND_START_INSTRUMENTATION` (`--instr-atstart=no`); the dump's
//!   counts are read through `coldcache export --format callgrind` and
//!   `callgrind_annotate --show=…` under Valgrind's event names, and must
//!   equal the counts summed from the dump by counter name.
//!
//! Skipped with a message when gcc or valgrind is missing.

use coldcache_dump::Dump;
use coldcache_trace::RecordKind;
use object::{Object, ObjectSymbol};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use library::{have, library, repo, COLDCACHE};
use programs::SAME_GLIBC_PATHS;

fn scratch() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("coldcache-capture-cli-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
    .clone()
}

/// Compiles `source` (relative to the repository) with `compiler` and
/// `flags`, linked against libcoldcache.so, into the scratch directory.
fn build_c(compiler: &str, source: &str, flags: &[&str], name: &str) -> PathBuf {
    let lib = library();
    let out = scratch().join(name);
    let st = Command::new(compiler)
        .args(flags)
        .arg("-I")
        .arg(repo().join("include"))
        .arg(repo().join(source))
        .arg("-L")
        .arg(lib.parent().unwrap())
        .args(["-Wl,--no-as-needed", "-lcoldcache"])
        .arg(format!("-Wl,-rpath,{}", lib.parent().unwrap().display()))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(st.success(), "compiling {source} failed");
    out
}

/// Builds the kernels program once (no PIE, so globals and code are at the
/// same addresses natively and under Valgrind).
fn kernels() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        build_c(
            "gcc",
            "tests-programs/capture/kernels.c",
            &["-O1", "-g", "-fno-pie", "-no-pie"],
            "kernels",
        )
    })
    .clone()
}

fn tools_or_skip(test: &str) -> bool {
    if have("gcc") && have("valgrind") {
        true
    } else {
        eprintln!("SKIP {test}: gcc or valgrind missing");
        false
    }
}

/// Passes `COLDCACHE_MODE` on: `COLDCACHE_MODE=trap cargo test --test
/// capture` runs every test of this file in that capture mode.
fn keep_mode(cmd: &mut Command) {
    if let Ok(m) = std::env::var("COLDCACHE_MODE") {
        cmd.env("COLDCACHE_MODE", m);
    }
}

/// Runs a command with a fixed, small environment (Valgrind and native runs
/// must execute the same code paths in libc).
fn run(mut cmd: Command) -> Output {
    cmd.env_clear().env("PATH", "/usr/bin:/bin");
    keep_mode(&mut cmd);
    cmd.current_dir(scratch());
    programs::succeed(cmd)
}

fn record(kernel: &str, extra: &[&str], tag: &str) -> (Dump, PathBuf) {
    let dump = scratch().join(format!("{kernel}.{tag}.ccdump"));
    let trace = scratch().join(format!("{kernel}.{tag}.cctrace"));
    let mut cmd = Command::new(COLDCACHE);
    cmd.args(["record", "--cache", "cachegrind", "--function"])
        .arg(format!("k_{kernel}"))
        .arg("-o")
        .arg(&dump)
        .arg("--trace")
        .arg(&trace)
        .args(extra)
        .arg("--")
        .arg(kernels())
        .args(["plain", kernel]);
    run(cmd);
    let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
    (d, trace)
}

fn callgrind_ir(kernel: &str) -> u64 {
    let out_file = scratch().join(format!("callgrind.{kernel}.out"));
    let mut cmd = Command::new("valgrind");
    cmd.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(format!("--toggle-collect=k_{kernel}"))
        .arg(kernels())
        .args(["plain", kernel]);
    run(cmd);
    let text = std::fs::read_to_string(&out_file).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("callgrind summary line")
}

/// The kernels compared with Valgrind (xlat: Valgrind cannot run it).
const KERNELS: &[&str] = &[
    "strided",
    "struct_walk",
    "strings",
    "stack",
    "x86isms",
    "bits",
];

#[test]
fn function_capture_counts_the_instructions_callgrind_counts() {
    if !tools_or_skip("function_capture_counts_the_instructions_callgrind_counts") {
        return;
    }
    let mut bad = Vec::new();
    for k in KERNELS {
        let (d, _) = record(k, &[], "ir");
        let ours: u64 = d.totals()[d.counter("instructions").unwrap()];
        assert_eq!(ours, d.meta.instructions);
        let theirs = callgrind_ir(k);
        eprintln!("{k:<12} coldcache {ours:>8}  callgrind {theirs:>8}");
        if ours != theirs {
            bad.push(format!("{k}: coldcache {ours}, callgrind {theirs}"));
        }
        assert_eq!(d.meta.unmodelled, vec![], "{k}: unmodelled instructions");
        assert_eq!(d.meta.cut_short, None);
    }
    assert!(bad.is_empty(), "instruction counts differ: {bad:#?}");
}

/// One instruction and its data accesses.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Step {
    ip: u64,
    data: Vec<(char, i64, u32)>,
}

/// Lackey's records for one call of `k_{kernel}`: from its entry to the
/// instruction at the return address.
fn lackey_steps(kernel: &str, entry: u64) -> Vec<Step> {
    let log = scratch().join(format!("lackey.{kernel}.log"));
    let mut cmd = Command::new("valgrind");
    cmd.args(["--tool=lackey", "--trace-mem=yes"])
        .arg(format!("--log-file={}", log.display()))
        .arg(kernels())
        .args(["plain", kernel]);
    run(cmd);
    let text = std::fs::read_to_string(&log).unwrap();
    let mut steps: Vec<Step> = Vec::new();
    let mut started = false;
    let mut prev: Option<(u64, u64)> = None;
    let mut ret_addr = 0;
    for line in text.lines() {
        if line.starts_with("==") || line.len() < 3 {
            continue;
        }
        let (tag, rest) = line.split_at(2);
        let Some((a, s)) = rest.trim().split_once(',') else {
            continue;
        };
        let (Ok(addr), Ok(size)) = (u64::from_str_radix(a, 16), s.parse::<u32>()) else {
            continue;
        };
        if tag == "I " {
            if !started {
                if addr == entry {
                    started = true;
                    ret_addr = prev.map(|(a, s)| a + s).unwrap();
                } else {
                    prev = Some((addr, u64::from(size)));
                    continue;
                }
            } else if addr == ret_addr {
                break;
            }
            steps.push(Step {
                ip: addr,
                data: Vec::new(),
            });
        } else if started {
            let kind = tag.trim().chars().next().unwrap();
            steps
                .last_mut()
                .unwrap()
                .data
                .push((kind, addr as i64, size));
        }
    }
    assert!(started, "lackey never ran k_{kernel}");
    steps
}

/// Our trace as steps.
fn our_steps(trace: &Path) -> Vec<Step> {
    let mut r = coldcache_trace::open(trace, None).unwrap();
    let mut recs = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    while r.read_batch(&mut recs, 1 << 16).unwrap() > 0 {
        for rec in &recs {
            let kind = match rec.kind {
                RecordKind::Instr => {
                    steps.push(Step {
                        ip: rec.addr,
                        data: Vec::new(),
                    });
                    continue;
                }
                RecordKind::Load => 'L',
                RecordKind::Store | RecordKind::NtStore => 'S',
                RecordKind::Modify => 'M',
                // Valgrind records neither prefetches nor flushes.
                RecordKind::Prefetch | RecordKind::Flush => continue,
            };
            steps
                .last_mut()
                .unwrap()
                .data
                .push((kind, rec.addr as i64, rec.size));
        }
    }
    steps
}

/// Lackey splits some read-modify-writes (`lock xadd`, `xchg`, `lock
/// cmpxchg`) into a load and a modify of the same bytes: one access.
fn merge_load_modify(steps: &mut [Step]) {
    for s in steps {
        let mut out: Vec<(char, i64, u32)> = Vec::new();
        for &d in &s.data {
            if d.0 == 'M' {
                if let Some(last) = out.last() {
                    if last.0 == 'L' && last.1 == d.1 && last.2 == d.2 {
                        out.pop();
                    }
                }
            }
            out.push(d);
        }
        s.data = out;
    }
}

/// Makes stack addresses relative to the slot the final `ret` reads;
/// globals (inside the binary's data) stay absolute.
fn normalize(steps: &mut [Step], globals: (u64, u64)) {
    let ret_slot = steps
        .last()
        .and_then(|s| s.data.last())
        .map(|d| d.1)
        .expect("the region ends with a ret that reads its return address");
    for s in steps {
        for d in &mut s.data {
            let a = d.1 as u64;
            if !(globals.0..globals.1).contains(&a) {
                d.1 -= ret_slot;
                d.0 = d.0.to_ascii_lowercase(); // marks a stack-relative address
            }
        }
    }
}

fn symbol_and_data_range(bin: &Path, name: &str) -> (u64, (u64, u64)) {
    let data = std::fs::read(bin).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let sym = file
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("{name} not in {}", bin.display()));
    let mut lo = u64::MAX;
    let mut hi = 0;
    for s in file.sections() {
        use object::ObjectSection;
        if matches!(s.name(), Ok(".data" | ".bss" | ".rodata")) {
            lo = lo.min(s.address());
            hi = hi.max(s.address() + s.size());
        }
    }
    (sym.address(), (lo, hi))
}

#[test]
fn function_capture_address_stream_equals_lackey() {
    if !tools_or_skip("function_capture_address_stream_equals_lackey") {
        return;
    }
    for k in ["strided", "struct_walk", "strings", "stack", "x86isms"] {
        let (entry, globals) = symbol_and_data_range(&kernels(), &format!("k_{k}"));
        let (_, trace) = record(k, &[], "stream");
        let mut ours = our_steps(&trace);
        let mut theirs = lackey_steps(k, entry);
        merge_load_modify(&mut theirs);
        normalize(&mut ours, globals);
        normalize(&mut theirs, globals);
        assert_eq!(ours.len(), theirs.len(), "{k}: instruction counts differ");
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "{k}: step {i} differs (ours left, lackey right)");
        }
        let accesses: usize = ours.iter().map(|s| s.data.len()).sum();
        eprintln!(
            "{k:<12} {} instructions, {accesses} data accesses: identical",
            ours.len()
        );
    }
}

/// The nine Cachegrind events of `k_{kernel}` (self cost) from Callgrind,
/// region started cold with CALLGRIND_START_INSTRUMENTATION.
fn callgrind_cold_events(kernel: &str) -> BTreeMap<String, u64> {
    let out_file = scratch().join(format!("callgrind-cold.{kernel}.out"));
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--tool=callgrind",
        "--cache-sim=yes",
        "--instr-atstart=no",
        "--I1=32768,8,64",
        "--D1=32768,8,64",
        "--LL=8388608,16,64",
    ])
    .arg(format!("--callgrind-out-file={}", out_file.display()))
    .arg(kernels())
    .args(["callgrind", kernel]);
    run(cmd);
    annotated_events(&out_file, kernel, None)
}

/// Valgrind's nine events, in Callgrind's order.
const NINE: &str = "Ir,Dr,Dw,I1mr,D1mr,D1mw,ILmr,DLmr,DLmw";

/// The self cost of `k_{kernel}` per event in a Callgrind file, as
/// `callgrind_annotate --inclusive=no [--show=SHOW]` prints it.
fn annotated_events(file: &Path, kernel: &str, show: Option<&str>) -> BTreeMap<String, u64> {
    let mut cmd = Command::new("callgrind_annotate");
    cmd.arg("--inclusive=no");
    if let Some(show) = show {
        cmd.arg(format!("--show={show}"));
    }
    let out = cmd.arg(file).output().expect("run callgrind_annotate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let events: Vec<String> = text
        .lines()
        .find_map(|l| l.strip_prefix("Events shown:"))
        .expect("events line")
        .split_whitespace()
        .map(String::from)
        .collect();
    let row = text
        .lines()
        .find(|l| l.contains(&format!(":k_{kernel} ")) || l.ends_with(&format!(":k_{kernel}")))
        .unwrap_or_else(|| panic!("no k_{kernel} row in:\n{text}"));
    // Each event column is a number with commas, possibly followed by a
    // percentage in parentheses, or `.` for an event the file leaves out
    // (Callgrind drops trailing zeros): zero, in its place.
    let nums: Vec<u64> = row
        .split_whitespace()
        .filter(|t| {
            (*t == "." || t.chars().next().is_some_and(|c| c.is_ascii_digit()))
                && !t.ends_with("%)")
        })
        .map(|t| {
            if t == "." {
                0
            } else {
                t.replace(',', "").parse().unwrap()
            }
        })
        .take(events.len())
        .collect();
    events.into_iter().zip(nums).collect()
}

/// The same nine events from a dump, for records inside `[lo, hi)`.
fn dump_events(d: &Dump, lo: u64, hi: u64) -> BTreeMap<String, u64> {
    let l = d.meta.levels.len();
    assert_eq!(l, 2, "cachegrind geometry has two levels");
    let mut t = vec![0u64; d.meta.counters.len()];
    for r in d.records.iter().filter(|r| r.ip >= lo && r.ip < hi) {
        for (a, b) in t.iter_mut().zip(&r.counters) {
            *a += b;
        }
    }
    // By name (the per-level counters of each side, nearest first).
    let side = |s: &str| -> Vec<u64> {
        d.meta
            .levels
            .iter()
            .map(String::as_str)
            .chain(["mem"])
            .map(|lv| t[d.counter(&format!("{s}_{lv}")).unwrap()])
            .collect()
    };
    let (i, r, w) = (side("i"), side("r"), side("w"));
    let m = |v: &[u64]| -> (u64, u64, u64) { (v.iter().sum(), v[1] + v[2], v[2]) };
    let (_, i1, il) = m(&i);
    let ir = t[d.counter("instructions").unwrap()];
    let (dr, d1r, dlr) = m(&r);
    let (dw, d1w, dlw) = m(&w);
    [
        ("Ir", ir),
        ("I1mr", i1),
        ("ILmr", il),
        ("Dr", dr),
        ("D1mr", d1r),
        ("DLmr", dlr),
        ("Dw", dw),
        ("D1mw", d1w),
        ("DLmw", dlw),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[test]
fn cold_region_misses_equal_callgrinds() {
    if !tools_or_skip("cold_region_misses_equal_callgrinds") || !have("callgrind_annotate") {
        return;
    }
    let bin = kernels();
    let data = std::fs::read(&bin).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut bad = Vec::new();
    for k in KERNELS {
        let sym = file
            .symbols()
            .find(|s| s.name() == Ok(&format!("k_{k}")))
            .unwrap();
        let (lo, hi) = (sym.address(), sym.address() + sym.size());
        let dump_path = scratch().join(format!("{k}.cold.ccdump"));
        let mut cmd = Command::new(&bin);
        cmd.args(["coldcache", k, "cachegrind"]).arg(&dump_path);
        run(cmd);
        let d = Dump::from_bytes(&std::fs::read(&dump_path).unwrap()).unwrap();
        let dumped = dump_events(&d, lo, hi);
        // The Callgrind export of the dump (without inlining, as Valgrind
        // attributes code), read by callgrind_annotate under Valgrind's
        // event names: equal to the dump's counts, event by event.
        let exported = scratch().join(format!("{k}.cold.callgrind"));
        let mut cmd = Command::new(COLDCACHE);
        cmd.args(["export", "--format", "callgrind", "--no-inline", "-o"])
            .arg(&exported)
            .arg(&dump_path);
        run(cmd);
        let ours = annotated_events(&exported, k, Some(NINE));
        assert_eq!(ours, dumped, "{k}: export against dump");
        let d1mr = annotated_events(&exported, k, Some("D1mr"));
        assert_eq!(
            d1mr.into_iter().collect::<Vec<_>>(),
            [("D1mr".to_string(), dumped["D1mr"])]
        );
        let theirs = callgrind_cold_events(k);
        eprintln!(
            "{k:<12} coldcache {ours:?}\n{:<12} callgrind {theirs:?}",
            ""
        );
        // Callgrind counts a read-modify-write as a write (and splits
        // `xadd`/`xchg` into a read and a modify); coldcache counts it once,
        // as a read, like Cachegrind. With RMWs in the kernel only the
        // instruction events and the misses per level are compared.
        let rmw = matches!(*k, "x86isms" | "bits");
        let get = |m: &BTreeMap<String, u64>, e: &str| m.get(e).copied().unwrap_or(0);
        let mut compare = |what: &str, a: u64, b: u64| {
            if a != b {
                bad.push(format!("{k} {what}: coldcache {a}, callgrind {b}"));
            }
        };
        for e in ["Ir", "I1mr", "ILmr"] {
            compare(e, get(&ours, e), get(&theirs, e));
        }
        if rmw {
            compare(
                "D1 misses",
                get(&ours, "D1mr") + get(&ours, "D1mw"),
                get(&theirs, "D1mr") + get(&theirs, "D1mw"),
            );
            compare(
                "LL data misses",
                get(&ours, "DLmr") + get(&ours, "DLmw"),
                get(&theirs, "DLmr") + get(&theirs, "DLmw"),
            );
        } else {
            for e in ["Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw"] {
                compare(e, get(&ours, e), get(&theirs, e));
            }
        }
    }
    assert!(bad.is_empty(), "events differ: {bad:#?}");
}

#[test]
fn xlat_reads_the_table_entry_of_al() {
    if !have("gcc") {
        eprintln!("SKIP xlat_reads_the_table_entry_of_al: gcc missing");
        return;
    }
    let (d, trace) = record("xlat", &[], "xlat");
    assert_eq!(d.meta.unmodelled, vec![]);
    let (_, globals) = symbol_and_data_range(&kernels(), "k_xlat");
    let data = std::fs::read(kernels()).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let table = file
        .symbols()
        .find(|s| s.name() == Ok("table"))
        .unwrap()
        .address();
    assert!(globals.0 <= table && table < globals.1);
    // One-byte loads of table[i * 50] for i = 0..5, in order.
    let loads: Vec<(u64, u32)> = our_steps(&trace)
        .iter()
        .flat_map(|s| s.data.clone())
        .filter(|d| d.0 == 'L' && d.2 == 1)
        .map(|d| (d.1 as u64, d.2))
        .collect();
    let expected: Vec<(u64, u32)> = (0..5).map(|i| (table + i * 50, 1)).collect();
    assert_eq!(loads, expected);
}

fn build_threads() -> PathBuf {
    build_c(
        "gcc",
        "tests-programs/capture/threads.c",
        &["-O1", "-g", "-pthread"],
        "threads",
    )
}

/// Runs with a deadline: a hang is a failure, not a stuck test.
fn run_with_deadline(mut cmd: Command, secs: u64) -> Output {
    use std::io::Read;
    cmd.current_dir(scratch())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stdout = Vec::new();
            let mut stderr = Vec::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_end(&mut stdout)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_end(&mut stderr)
                .unwrap();
            return Output {
                status,
                stdout,
                stderr,
            };
        }
        if start.elapsed().as_secs() > secs {
            let _ = child.kill();
            panic!("{cmd:?} hung (killed after {secs} s)");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn eight_threads_captured_100_times_keep_their_output() {
    if !have("gcc") {
        eprintln!("SKIP eight_threads_captured_100_times_keep_their_output: gcc missing");
        return;
    }
    let bin = build_threads();
    let mut plain = Command::new(&bin);
    plain.args(["plain", "100"]);
    let plain = run_with_deadline(plain, 60);
    assert!(plain.status.success());
    let dump = scratch().join("threads.ccdump");
    let mut traced = Command::new(&bin);
    traced.args(["coldcache", "100"]).arg(&dump);
    let traced = run_with_deadline(traced, 300);
    assert!(
        traced.status.success(),
        "captured run failed: {}\n{}",
        traced.status,
        String::from_utf8_lossy(&traced.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&traced.stdout),
        String::from_utf8_lossy(&plain.stdout),
        "the program's output changed under capture"
    );
    // One capture that creates and joins four threads: all nine threads
    // (main, four workers, four short-lived) are in the dump.
    let one = scratch().join("threads1.ccdump");
    let mut first = Command::new(&bin);
    first.args(["coldcache", "1"]).arg(&one);
    assert!(run_with_deadline(first, 60).status.success());
    let d = Dump::from_bytes(&std::fs::read(&one).unwrap()).unwrap();
    assert_eq!(d.threads.len(), 9, "{:?}", d.threads);
    assert_eq!(d.meta.cut_short, None);
    let per_thread: Vec<u64> = (0..9u32)
        .map(|t| {
            d.records
                .iter()
                .filter(|r| r.thread == t)
                .map(|r| r.counters[0])
                .sum()
        })
        .collect();
    assert!(per_thread.iter().all(|&n| n > 0), "{per_thread:?}");
}

/// Whole programs: `record --all` (main, entry to return) counts exactly the
/// Ir of `callgrind --toggle-collect=main`, libc calls, system calls and
/// all. The program links libcoldcache.so (so the same library constructor
/// runs under Valgrind), symbols are bound at load time (Valgrind's own
/// preloaded libraries would otherwise lengthen lazy-binding lookups), and
/// stdout is a pipe in both runs. `x86isms` and `strings` are left out:
/// the first prints values read from uninitialised registers (`fxsave`),
/// the second runs libc string functions whose paths depend on the
/// alignment of stack buffers, and Valgrind places the stack elsewhere.
#[test]
fn whole_program_capture_counts_the_instructions_callgrind_counts() {
    if !tools_or_skip("whole_program_capture_counts_the_instructions_callgrind_counts") {
        return;
    }
    let mut bad = Vec::new();
    for name in ["matmul", "listchase", "hashtable"] {
        let bin = build_c(
            "gcc",
            &format!("tests-programs/{name}.c"),
            &["-O1", "-g", "-fno-pie", "-no-pie"],
            &format!("whole-{name}"),
        );
        let env = |c: &mut Command| {
            c.env_clear();
            keep_mode(c);
            c.env("PATH", "/usr/bin:/bin")
                .env("LD_BIND_NOW", "1")
                .env("GLIBC_TUNABLES", SAME_GLIBC_PATHS)
                .current_dir(scratch())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        };
        let cg_out = scratch().join(format!("whole-{name}.callgrind"));
        let mut cg = Command::new("valgrind");
        cg.arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", cg_out.display()))
            .arg("--toggle-collect=main")
            .arg(&bin);
        env(&mut cg);
        let out = cg.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs: u64 = std::fs::read_to_string(&cg_out)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("summary: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap();
        let dump_path = scratch().join(format!("whole-{name}.ccdump"));
        let mut rec = Command::new(COLDCACHE);
        rec.args([
            "record",
            "--cache",
            "cachegrind",
            "--all",
            "--reserve",
            "depth=100000",
            "-o",
        ])
        .arg(&dump_path)
        .arg("--")
        .arg(&bin);
        env(&mut rec);
        let out = rec.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d = Dump::from_bytes(&std::fs::read(&dump_path).unwrap()).unwrap();
        let ours = d.meta.instructions;
        eprintln!(
            "{name:<10} coldcache {ours:>8}  callgrind {theirs:>8}  (untrapped after syscall: {})",
            d.meta.untrapped
        );
        assert_eq!(d.meta.cut_short, None);
        if ours != theirs {
            bad.push(format!("{name}: coldcache {ours}, callgrind {theirs}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn c_and_cpp_api_examples_build_and_capture() {
    if !have("gcc") || !have("g++") {
        eprintln!("SKIP c_and_cpp_api_examples_build_and_capture: gcc/g++ missing");
        return;
    }
    for (compiler, src) in [("gcc", "api.c"), ("g++", "api.cpp")] {
        let bin = build_c(
            compiler,
            &format!("examples/capture/{src}"),
            &["-O1", "-g"],
            &format!("example-{src}"),
        );
        let plain = run(Command::new(&bin));
        let dump_path = scratch().join(format!("example-{src}.ccdump"));
        let mut c = Command::new(&bin);
        c.arg(&dump_path);
        let captured = run(c);
        assert_eq!(plain.stdout, captured.stdout, "{src}: output changed");
        let d = Dump::from_bytes(&std::fs::read(&dump_path).unwrap()).unwrap();
        // integrate() visits 4096 particles: several instructions each, and
        // at least one data read per particle.
        let t = d.totals();
        let l = d.layout().expect("coldcache's counter layout");
        let reads: u64 = t[l.served_from(coldcache_dump::Side::Read, 1)].iter().sum();
        assert!(
            d.meta.instructions > 4 * 4096,
            "{src}: {}",
            d.meta.instructions
        );
        assert!(reads >= 4096, "{src}: {reads} reads");
        assert_eq!(d.meta.cache_name, "jaguar");
        assert_eq!(d.meta.trigger, "api");
    }
}

#[test]
fn signal_trigger_starts_a_capture_of_n_instructions() {
    if !have("gcc") {
        eprintln!("SKIP signal_trigger_starts_a_capture_of_n_instructions: gcc missing");
        return;
    }
    let src = scratch().join("spin.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <unistd.h>\n#include <stdint.h>\n\
         int main(void){volatile uint64_t s=0;for(int r=0;r<60;r++){for(int i=0;i<200000;i++)s+=i;usleep(50000);}\
         printf(\"%llu\\n\",(unsigned long long)s);return 0;}\n",
    )
    .unwrap();
    let bin = scratch().join("spin");
    assert!(Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap()
        .success());
    let dump_path = scratch().join("spin.ccdump");
    let _ = std::fs::remove_file(&dump_path);
    let mut rec = Command::new(COLDCACHE);
    rec.args(["record", "--signal", "--instructions", "5000", "-o"])
        .arg(&dump_path)
        .arg("--")
        .arg(&bin)
        .current_dir(scratch())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = rec.spawn().unwrap();
    // The program's pid: the only child of `coldcache record`, spawned by
    // whichever of its threads runs the command (not the main thread since
    // the CLI runs commands on a large-stack thread), so every task's
    // children are read. Bounded: a `record` that exits early fails here.
    let mut waited = 0;
    let pid = loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        waited += 1;
        assert!(waited < 150, "coldcache record started no program");
        let children: String = std::fs::read_dir(format!("/proc/{}/task", child.id()))
            .map(|tasks| {
                tasks
                    .flatten()
                    .map(|t| std::fs::read_to_string(t.path().join("children")).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(p) = children.split_whitespace().next() {
            break p.to_string();
        }
    };
    // `record` names the window's dump when it closes, while the program
    // still runs (it was said only at the exit): whether the program was
    // alive (not a zombie) when the line came.
    let mut child = child;
    let stderr = child.stderr.take().unwrap();
    let watched = pid.clone();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut text = String::new();
        let mut said_while_running = None;
        for line in std::io::BufReader::new(stderr).lines() {
            let line = line.unwrap_or_default();
            if said_while_running.is_none() && line.contains("window 1 written to") {
                let stat =
                    std::fs::read_to_string(format!("/proc/{watched}/stat")).unwrap_or_default();
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                said_while_running = Some(!state.is_empty() && !state.starts_with('Z'));
            }
            text.push_str(&line);
            text.push('\n');
        }
        (text, said_while_running)
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    let st = Command::new(COLDCACHE)
        .args(["trigger", &pid])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    let (err, said_while_running) = reader.join().unwrap();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("window 1 written to {}", dump_path.display())),
        "{err}"
    );
    assert_eq!(said_while_running, Some(true), "{err}");
    let d = Dump::from_bytes(&std::fs::read(&dump_path).unwrap()).unwrap();
    assert_eq!(d.meta.trigger, "signal");
    assert_eq!(d.meta.instructions, 5000);
    assert_eq!(
        d.meta.cut_short.as_deref(),
        Some("instruction limit reached")
    );
}

#[test]
fn longjmp_out_of_a_recursion_leaves_no_stale_frames() {
    if !have("gcc") {
        eprintln!("SKIP longjmp_out_of_a_recursion_leaves_no_stale_frames: gcc missing");
        return;
    }
    let (d, _) = record("longjmp", &[], "longjmp");
    let data = std::fs::read(kernels()).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let range = |name: &str| {
        let s = file.symbols().find(|s| s.name() == Ok(name)).unwrap();
        (s.address(), s.address() + s.size())
    };
    let depth_in = |(lo, hi): (u64, u64)| -> Vec<usize> {
        let mut v: Vec<usize> = d
            .records
            .iter()
            .filter(|r| r.ip >= lo && r.ip < hi)
            .map(|r| d.stack_frames(r.stack).len())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let top = depth_in(range("k_longjmp"));
    let deep = depth_in(range("k_deep"));
    let leaf = depth_in(range("k_leaf"));
    assert_eq!(top.len(), 1, "k_longjmp runs at one depth: {top:?}");
    // k_deep(6)..k_deep(0): seven depths, starting one below k_longjmp.
    assert_eq!(deep, (top[0] + 1..=top[0] + 7).collect::<Vec<_>>());
    // After the longjmp, k_leaf is called from k_longjmp: one below it, not
    // below the abandoned recursion.
    assert_eq!(leaf, vec![top[0] + 1]);
}

/// Regressions from review: posix_spawn (a vfork child sharing our memory)
/// once ended the capture; a forked child could hang at exit or overwrite
/// the dump; a 16 KiB thread stack overflowed in the handler.
#[test]
fn spawn_fork_and_small_stacks_during_a_capture() {
    if !have("gcc") {
        eprintln!("SKIP spawn_fork_and_small_stacks_during_a_capture: gcc missing");
        return;
    }
    let bin = build_c(
        "gcc",
        "tests-programs/capture/hostile.c",
        &["-O1", "-g", "-pthread"],
        "hostile",
    );
    let plain = run_with_deadline(Command::new(&bin), 60);
    assert!(plain.status.success());
    let dump = scratch().join("hostile.ccdump");
    let _ = std::fs::remove_file(&dump);
    let mut c = Command::new(&bin);
    c.arg(&dump);
    let traced = run_with_deadline(c, 300);
    assert!(
        traced.status.success(),
        "{}",
        String::from_utf8_lossy(&traced.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&traced.stdout),
        String::from_utf8_lossy(&plain.stdout)
    );
    assert!(String::from_utf8_lossy(&traced.stdout).ends_with("stop 0\n"));
    let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
    assert_eq!(d.meta.cut_short, None);
    assert!(
        d.threads.len() >= 2,
        "the 16 KiB thread was traced: {:?}",
        d.threads
    );
    assert!(d.threads.iter().all(|t| t.tid != 0));
}

/// A program linked with another copy of libcoldcache.so than the one
/// `record` preloads (its C API from an install, `record` from a build):
/// two copies of the library in one process. The program's calls of the C
/// API and of what the library interposes (`sigaction`, `dlopen`) reach
/// the preloaded copy, first in lookup order, so that copy captures and
/// the linked one stays idle, and says so. Both arming captures used to
/// kill the program with SIGSEGV. The capture counts what the same
/// program linked with the preloaded copy itself counts: the kernel's
/// records, every counter equal (by hand, `k_struct_walk` runs 8,724
/// instructions at -O1: 3 rounds of 512 objects).
#[test]
fn a_program_linked_with_another_copy_of_the_library_is_captured_by_the_preloaded_one() {
    if !have("gcc") {
        eprintln!("SKIP a_program_linked_with_another_copy_of_the_library...: gcc missing");
        return;
    }
    let dir = scratch().join("two-copies");
    let lib_dir = dir.join("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::fs::copy(library(), lib_dir.join("libcoldcache.so")).unwrap();
    let bin = dir.join("kernels");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-fno-pie", "-no-pie", "-I"])
        .arg(repo().join("include"))
        .arg(repo().join("tests-programs/capture/kernels.c"))
        .arg("-L")
        .arg(&lib_dir)
        .args(["-Wl,--no-as-needed", "-lcoldcache"])
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .arg("-o")
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success());
    let capture = |program: &Path, dump: &Path| {
        let mut cmd = Command::new(COLDCACHE);
        cmd.args(["record", "--cache", "cachegrind", "--no-resolve"])
            .args(["--function", "k_struct_walk", "-o"])
            .arg(dump)
            .arg("--")
            .arg(program)
            .args(["plain", "struct_walk"]);
        let out = run(cmd);
        let d = Dump::from_bytes(&std::fs::read(dump).unwrap()).unwrap();
        (d, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (two, said) = capture(&bin, &dir.join("two.ccdump"));
    assert!(
        said.contains("second copy of libcoldcache.so")
            && said.contains(&*lib_dir.to_string_lossy()),
        "{said}"
    );
    let (one, _) = capture(&kernels(), &dir.join("one.ccdump"));
    assert_eq!(two.meta.instructions, 8724);
    // The two binaries differ only in their run path: the kernel's code
    // and data are at the same addresses.
    let key = |d: &Dump| {
        let mut v: Vec<_> = d
            .records
            .iter()
            .map(|r| (r.ip, r.counters.clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(key(&two), key(&one));
}
