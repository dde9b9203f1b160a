//! Fast capture mode (`--mode fast`, binary translation) against its oracle,
//! the trap engine: the same program, captured once in each mode with
//! address-space randomisation off (so both runs see the same addresses),
//! must give the same dump counter for counter per (instruction, call
//! stack, thread), and the same address stream record by record.
//!
//! - every kernel of `tests-programs/capture/kernels.c`, captured from its
//!   entry to its return (`--function`), with the `cachegrind` and `jaguar`
//!   presets, dump and `--trace` compared;
//! - whole programs (`--all`, main to exit, libc and system calls
//!   included);
//! - eight threads created and joined during 100 captures through the C API
//!   (`COLDCACHE_MODE=fast`): the program's output equals a run without
//!   capture, and one capture holds all nine threads. Per-thread counts are
//!   not compared with trap mode: how often a thread spins on a lock
//!   depends on the schedule, which differs between any two runs.
//!
//! Skipped with a message when gcc or setarch is missing.

use coldcache_dump::Dump;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

#[path = "common/library.rs"]
mod library;
use library::{have, library, repo, COLDCACHE};

fn scratch() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("coldcache-fast-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
    .clone()
}

fn tools_or_skip(test: &str) -> bool {
    if have("gcc") && Command::new("setarch").arg("--version").output().is_ok() {
        true
    } else {
        eprintln!("SKIP {test}: gcc or setarch missing");
        false
    }
}

fn build(source: &str, flags: &[&str], name: &str) -> PathBuf {
    let lib = library();
    let out = scratch().join(name);
    let st = Command::new("gcc")
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
        .expect("run gcc");
    assert!(st.success(), "compiling {source} failed");
    out
}

fn kernels() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        build(
            "tests-programs/capture/kernels.c",
            &["-O1", "-g", "-fno-pie", "-no-pie"],
            "kernels",
        )
    })
    .clone()
}

/// Runs `coldcache record ARGS -- PROGRAM` with randomisation off, under a
/// deadline; returns the dump and the command's output.
fn record(args: &[&str], program: &[&str], tag: &str) -> (Dump, PathBuf, Output) {
    let dump = scratch().join(format!("{tag}.ccdump"));
    let trace = scratch().join(format!("{tag}.cctrace"));
    let mut cmd = Command::new("setarch");
    cmd.args(["x86_64", "-R", COLDCACHE, "record", "--no-resolve"])
        .args(args)
        .arg("-o")
        .arg(&dump)
        .arg("--trace")
        .arg(&trace)
        .arg("--")
        .args(program)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir(scratch())
        .stdin(Stdio::null());
    let out = with_deadline(cmd, 600);
    assert!(
        out.status.success(),
        "{tag}: record failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
    (d, trace, out)
}

/// Waits for a command, killing it (and failing) after `secs` seconds.
fn with_deadline(mut cmd: Command, secs: u64) -> Output {
    use std::io::Read;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        stdout.read_to_end(&mut v).unwrap();
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        stderr.read_to_end(&mut v).unwrap();
        v
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed().as_secs() > secs {
            let _ = child.kill();
            panic!("{cmd:?} hung (killed after {secs} s)");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

/// A stack as the list of its (call site, callee) frames, root first.
fn stack_path(d: &Dump, mut id: u32) -> Vec<(u64, u64)> {
    let mut path = Vec::new();
    while id != 0 && (id as usize) < d.stacks.len() {
        let n = &d.stacks[id as usize];
        path.push((n.call_site, n.callee));
        if n.parent == id {
            break;
        }
        id = n.parent;
    }
    path.reverse();
    path
}

type Canonical = BTreeMap<(u64, Vec<(u64, u64)>, u32), Vec<u64>>;

/// The dump's records keyed by (ip, stack path, thread), independent of
/// the order stacks were interned in.
fn canonical(d: &Dump) -> Canonical {
    let mut m = Canonical::new();
    for r in &d.records {
        let prev = m.insert((r.ip, stack_path(d, r.stack), r.thread), r.counters.clone());
        assert!(prev.is_none(), "duplicate record at {:#x}", r.ip);
    }
    m
}

/// The first difference between two canonical dumps, if any.
fn first_difference(a: &Canonical, b: &Canonical) -> Option<String> {
    for (k, v) in a {
        match b.get(k) {
            None => return Some(format!("only in trap mode: {:#x} {:?} {v:?}", k.0, k.1)),
            Some(w) if w != v => {
                return Some(format!(
                    "at {:#x} stack {:?}: trap {v:?}, fast {w:?}",
                    k.0, k.1
                ))
            }
            _ => {}
        }
    }
    b.keys()
        .find(|k| !a.contains_key(*k))
        .map(|k| format!("only in fast mode: {:#x} {:?}", k.0, k.1))
}

fn trace_records(path: &Path) -> Vec<coldcache_trace::Record> {
    let mut r = coldcache_trace::open(path, None).unwrap();
    let mut all = Vec::new();
    let mut batch = Vec::new();
    while r.read_batch(&mut batch, 1 << 16).unwrap() > 0 {
        all.extend_from_slice(&batch);
    }
    all
}

/// Captures `program` in both modes and compares dumps and traces.
fn compare(args: &[&str], program: &[&str], tag: &str) -> Result<u64, String> {
    let mut trap_args = args.to_vec();
    trap_args.extend(["--mode", "trap"]);
    let mut fast_args = args.to_vec();
    fast_args.extend(["--mode", "fast"]);
    let (t, t_trace, t_out) = record(&trap_args, program, &format!("{tag}.trap"));
    let (f, f_trace, f_out) = record(&fast_args, program, &format!("{tag}.fast"));
    if t_out.stdout != f_out.stdout {
        return Err(format!("{tag}: the program's output differs between modes"));
    }
    if t.meta.instructions != f.meta.instructions {
        return Err(format!(
            "{tag}: {} instructions in trap mode, {} in fast mode",
            t.meta.instructions, f.meta.instructions
        ));
    }
    let Some(trapped) = f
        .meta
        .notes
        .iter()
        .find_map(|n| n.strip_prefix("capture mode fast: "))
        .and_then(|n| n.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
    else {
        return Err(format!(
            "{tag}: the fast dump does not say it ran in fast mode"
        ));
    };
    // Fast mode must be fast: only what the translator refuses (system
    // calls, `rep` strings and their neighbours) runs under the trap engine:
    // at most 5% of a capture, or 2,000 instructions of a small one (the
    // `strings` kernel is mostly `rep` strings).
    if trapped > 2000 && trapped * 20 > f.meta.instructions {
        return Err(format!(
            "{tag}: {trapped} of {} instructions ran under the trap engine",
            f.meta.instructions
        ));
    }
    if let Some(d) = first_difference(&canonical(&t), &canonical(&f)) {
        return Err(format!("{tag}: {d}"));
    }
    let (a, b) = (trace_records(&t_trace), trace_records(&f_trace));
    if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        return Err(format!(
            "{tag}: trace record {i} differs: trap {:?}, fast {:?}",
            a[i], b[i]
        ));
    }
    if a.len() != b.len() {
        return Err(format!(
            "{tag}: {} trace records in trap mode, {} in fast mode",
            a.len(),
            b.len()
        ));
    }
    Ok(t.meta.instructions)
}

#[test]
fn every_kernel_captured_fast_equals_the_trap_capture() {
    if !tools_or_skip("every_kernel_captured_fast_equals_the_trap_capture") {
        return;
    }
    let bin = kernels();
    let bin = bin.to_str().unwrap();
    let mut bad = Vec::new();
    for cache in ["cachegrind", "jaguar"] {
        for k in [
            "strided",
            "struct_walk",
            "strings",
            "stack",
            "x86isms",
            "bits",
            "xlat",
            "libc",
            "longjmp",
        ] {
            let f = format!("k_{k}");
            match compare(
                &["--cache", cache, "--function", &f],
                &[bin, "plain", k],
                &format!("{k}.{cache}"),
            ) {
                Ok(n) => eprintln!("{k:<12} {cache:<10} {n:>8} instructions: equal"),
                Err(e) => bad.push(e),
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn whole_programs_captured_fast_equal_the_trap_captures() {
    if !tools_or_skip("whole_programs_captured_fast_equal_the_trap_captures") {
        return;
    }
    let mut bad = Vec::new();
    for name in ["matmul", "listchase", "hashtable", "stack", "strings"] {
        let bin = build(
            &format!("tests-programs/{name}.c"),
            &["-O1", "-g", "-fno-pie", "-no-pie", "-Wl,-z,now"],
            &format!("whole-{name}"),
        );
        match compare(
            &[
                "--cache",
                "cachegrind",
                "--all",
                "--reserve",
                "depth=100000",
            ],
            &[bin.to_str().unwrap()],
            &format!("whole-{name}"),
        ) {
            Ok(n) => eprintln!("{name:<10} {n:>9} instructions: equal"),
            Err(e) => bad.push(e),
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn eight_threads_captured_fast_100_times_keep_their_output() {
    if !tools_or_skip("eight_threads_captured_fast_100_times_keep_their_output") {
        return;
    }
    let bin = build(
        "tests-programs/capture/threads.c",
        &["-O1", "-g", "-pthread"],
        "threads",
    );
    let run = |args: &[&str], mode: Option<&str>| {
        let mut c = Command::new(&bin);
        c.args(args).current_dir(scratch()).stdin(Stdio::null());
        if let Some(m) = mode {
            c.env("COLDCACHE_MODE", m);
        }
        with_deadline(c, 300)
    };
    let plain = run(&["plain", "100"], None);
    assert!(plain.status.success());
    let dump = scratch().join("threads.fast.ccdump");
    let fast = run(&["coldcache", "100", dump.to_str().unwrap()], Some("fast"));
    assert!(
        fast.status.success(),
        "captured run failed: {}\n{}",
        fast.status,
        String::from_utf8_lossy(&fast.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&fast.stdout),
        String::from_utf8_lossy(&plain.stdout),
        "the program's output changed under fast capture"
    );
    let one = scratch().join("threads1.fast.ccdump");
    assert!(
        run(&["coldcache", "1", one.to_str().unwrap()], Some("fast"))
            .status
            .success()
    );
    let d = Dump::from_bytes(&std::fs::read(&one).unwrap()).unwrap();
    assert_eq!(d.threads.len(), 9, "{:?}", d.threads);
    assert_eq!(d.meta.cut_short, None);
    assert!(
        d.meta
            .notes
            .iter()
            .any(|n| n.starts_with("capture mode fast")),
        "{:?}",
        d.meta.notes
    );
    for t in 0..9u32 {
        let n: u64 = d
            .records
            .iter()
            .filter(|r| r.thread == t)
            .map(|r| r.counters[0])
            .sum();
        assert!(n > 0, "thread {t} counted nothing");
    }
}

/// Signals, faults, threads and libraries arriving while threads run
/// translated code (`tests-programs/capture/signals.c`): SIGALRM every
/// 50 µs with and without SA_RESTART and on an alternate stack, a guard
/// page opened by a SIGSEGV handler, siglongjmp out of a handler, 64
/// threads, dlopen/dlclose, 100 captures in one process (each start and
/// stop costs about 80 ms of table set-up and dump writing whatever the
/// mode; `signals coldcache startstop DUMP 1000` runs the full 1,000 by
/// hand: 83 s, output unchanged). Each case runs
/// captured in fast mode several times; its output must equal an
/// uncaptured run's, under a deadline (a hang fails).
#[test]
fn signals_faults_threads_and_libraries_during_a_fast_capture() {
    if !tools_or_skip("signals_faults_threads_and_libraries_during_a_fast_capture") {
        return;
    }
    let bin = build(
        "tests-programs/capture/signals.c",
        &["-O1", "-g", "-pthread"],
        "signals",
    );
    let mut bad = Vec::new();
    for (case, runs) in [
        ("alarm", 5),
        ("norestart", 5),
        ("altstack", 5),
        ("segv", 20),
        ("longjmp", 10),
        ("threads", 5),
        ("dlopen", 20),
        ("startstop", 1),
    ] {
        let count = if case == "startstop" { "100" } else { "1" };
        let mut plain = Command::new(&bin);
        plain
            .args(["plain", case, "unused.ccdump", count])
            .current_dir(scratch());
        let plain = with_deadline(plain, 60);
        assert!(plain.status.success(), "{case}: plain run failed");
        let dump = scratch().join(format!("signals.{case}.ccdump"));
        for i in 0..runs {
            let _ = std::fs::remove_file(&dump);
            let mut c = Command::new(&bin);
            c.args(["coldcache", case])
                .arg(&dump)
                .arg(count)
                .env("COLDCACHE_MODE", "fast")
                .env("COLDCACHE_QUIET", "1")
                .current_dir(scratch());
            let out = with_deadline(c, 300);
            if out.status.code() != Some(0) || out.stdout != plain.stdout {
                bad.push(format!(
                    "{case} run {i}: status {}, output {:?} (plain {:?}) {}",
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&plain.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
                break;
            }
        }
        let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
        if !d
            .meta
            .notes
            .iter()
            .any(|n| n.starts_with("capture mode fast"))
        {
            bad.push(format!("{case}: the dump does not say fast mode ran"));
        }
        if d.meta.instructions == 0 {
            bad.push(format!("{case}: nothing was captured"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Code that changes under a running capture: a file mapping unmapped and
/// replaced at the same address, then made writable and patched (the
/// system calls a traced thread makes retire what was translated there);
/// an anonymous RWX page and a memfd's executable view rewritten without
/// any system call (never trusted, never translated). The truth is the
/// program's own output without capture (each round of calls returns a
/// different sum); a stale translation or decode would repeat the old one.
/// Both modes count the same instructions.
#[test]
fn code_unmapped_remapped_or_rewritten_during_a_capture_runs_anew() {
    if !tools_or_skip("code_unmapped_remapped_or_rewritten_during_a_capture_runs_anew") {
        return;
    }
    let bin = build("tests-programs/capture/remap.c", &["-O1", "-g"], "remap");
    let mut bad = Vec::new();
    for case in ["remap", "rwx", "memfd"] {
        let mut plain = Command::new(&bin);
        plain.args(["plain", case]).current_dir(scratch());
        let plain = with_deadline(plain, 60);
        assert!(plain.status.success(), "{case}: plain run failed");
        assert!(
            String::from_utf8_lossy(&plain.stdout).ends_with(" 2000 2000 4000 6000\n"),
            "{case}: {:?}",
            String::from_utf8_lossy(&plain.stdout)
        );
        let mut counts = Vec::new();
        for mode in ["trap", "fast"] {
            let dump = scratch().join(format!("remap.{case}.{mode}.ccdump"));
            for i in 0..5 {
                let _ = std::fs::remove_file(&dump);
                let mut c = Command::new(&bin);
                c.args(["coldcache", case])
                    .arg(&dump)
                    .env("COLDCACHE_MODE", mode)
                    .env("COLDCACHE_QUIET", "1")
                    .current_dir(scratch());
                let out = with_deadline(c, 120);
                if out.status.code() != Some(0) || out.stdout != plain.stdout {
                    bad.push(format!(
                        "{case} {mode} run {i}: status {}, output {:?} (plain {:?}) {}",
                        out.status,
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&plain.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                    break;
                }
            }
            let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
            counts.push(d.meta.instructions);
        }
        // Three rounds of 2,000 calls of two instructions at least.
        if counts[0] != counts[1] || counts[0] < 12_000 {
            bad.push(format!(
                "{case}: instructions trap {} fast {}",
                counts[0], counts[1]
            ));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// `--mode verify` single-steps the translated code and checks every
/// recorded instruction against the trap model on the live registers: on
/// every kernel and on whole programs (the first 300,000 instructions of
/// each under `--all`) it finds no difference, and every instruction
/// counted was checked or stepped by the trap engine. (That it reports a difference was seen by breaking the
/// translator's recording on purpose: the note names the instruction and
/// both access lists.)
#[test]
fn verify_mode_finds_no_difference_on_kernels_and_programs() {
    if !tools_or_skip("verify_mode_finds_no_difference_on_kernels_and_programs") {
        return;
    }
    let kernels = kernels();
    let mut runs: Vec<(String, Vec<String>, Vec<String>)> = [
        "strided",
        "struct_walk",
        "strings",
        "stack",
        "x86isms",
        "bits",
        "xlat",
        "libc",
        "longjmp",
    ]
    .iter()
    .map(|k| {
        (
            k.to_string(),
            vec!["--function".into(), format!("k_{k}")],
            vec![
                kernels.to_str().unwrap().into(),
                "plain".into(),
                k.to_string(),
            ],
        )
    })
    .collect();
    for name in ["matmul", "hashtable", "strings"] {
        let bin = build(
            &format!("tests-programs/{name}.c"),
            &["-O1", "-g"],
            &format!("verify-{name}"),
        );
        runs.push((
            name.into(),
            vec!["--all".into(), "--instructions".into(), "300000".into()],
            vec![bin.to_str().unwrap().into()],
        ));
    }
    let mut bad = Vec::new();
    for (name, trigger, program) in runs {
        let mut args: Vec<&str> = vec!["--mode", "verify", "--cache", "cachegrind"];
        args.extend(trigger.iter().map(String::as_str));
        let program: Vec<&str> = program.iter().map(String::as_str).collect();
        let (d, _, _) = record(&args, &program, &format!("verify-{name}"));
        let note = d
            .meta
            .notes
            .iter()
            .find_map(|n| n.strip_prefix("fast-mode verification: "))
            .unwrap_or("no verification note")
            .to_string();
        let checked: u64 = note
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let trapped: u64 = d
            .meta
            .notes
            .iter()
            .find_map(|n| n.strip_prefix("capture mode fast: "))
            .and_then(|n| n.split(' ').next()?.parse().ok())
            .unwrap_or(0);
        eprintln!("{name:<12} {} instructions: {note}", d.meta.instructions);
        let cut = d.meta.cut_short.as_deref();
        if !note.ends_with("no difference")
            || !(cut.is_none() || cut == Some("instruction limit reached"))
        {
            bad.push(format!("{name}: {note} ({cut:?})"));
        } else if (checked + trapped) * 100 < d.meta.instructions * 99 {
            // Every instruction counted was checked or trapped (checks
            // may run past an instruction limit until the replay sees it),
            // but for the final check of each `rep` string, which Valgrind
            // counts and no engine steps.
            bad.push(format!(
                "{name}: {checked} checked + {trapped} trapped < {} instructions",
                d.meta.instructions
            ));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
