//! Abnormal ends, seccomp, blocked threads, small stacks and the program's
//! own use of the engine's signals (SIGTRAP, SIGRTMIN+6) under `coldcache
//! record`
//! (issue 17): the program must end exactly as it would natively — same
//! standard output, same exit status or killing signal and core dump bit —
//! never hang and never be killed by the engine, and the capture must be
//! kept with the reason it was cut short.
//!
//! Each case runs the program plain, then captured (20 times where a run
//! is cheap; a quarter as many in CI's trap-mode second pass, see
//! [`repeat`]),
//! under a deadline: a hang fails the test instead of blocking
//! CI. Programs are `tests-programs/capture/fatal.c`, `seccomp.c`,
//! `blocked.c`, `sigtrap.c`, `ownsignals.c` (the stop request signal, raw
//! `rt_sigaction`, ignored signals across `exec`), `smallstack.c` (small
//! stacks: `ulimit -s 64`, 16 KiB threads, a stack overflow) and
//! `finish.c` (a signal while the dump is written), `selfmod.c` (code
//! patched through `/proc/self/mem` or by writing its file, issue 33). The cases of the
//! engine's signals and stacks run in both capture modes: `--mode trap`
//! and the default (fast where it can run). Skipped with a message when gcc is missing. (The same
//! shape as `hostile.rs`.)

#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use library::{library, repo, COLDCACHE};
use programs::{gcc_or_skip, run_within, scratch_in, DEADLINE};

use coldcache_dump::Dump;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    scratch_in("abnormal", name)
}

/// Compiles `source` (a `.cpp` with g++ and `-fnon-call-exceptions`).
fn build(source: &str, dir: &Path) -> PathBuf {
    let out = dir.join(Path::new(source).file_stem().unwrap());
    let cpp = source.ends_with(".cpp");
    let st = Command::new(if cpp { "g++" } else { "gcc" })
        .args(cpp.then_some("-fnon-call-exceptions"))
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&out)
        .arg(repo().join(source))
        .status()
        .expect("run gcc");
    assert!(st.success(), "compiling {source} failed");
    out
}

/// A running program whose standard output and error are collected as
/// they come, so a test can wait for a line before acting.
struct Running {
    child: Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    what: String,
}

struct Ended {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn spawn(mut cmd: Command, what: &str) -> Running {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut readers = Vec::new();
    let mut collect = |mut r: Box<dyn Read + Send>| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let b = buf.clone();
        readers.push(std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                b.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        }));
        buf
    };
    let stdout = collect(Box::new(child.stdout.take().unwrap()));
    let stderr = collect(Box::new(child.stderr.take().unwrap()));
    Running {
        child,
        stdout,
        stderr,
        readers,
        what: what.to_string(),
    }
}

impl Running {
    /// Waits until standard output holds `line` (deadline).
    fn wait_for(&self, line: &str) {
        let start = Instant::now();
        while !String::from_utf8_lossy(&self.stdout.lock().unwrap()).contains(line) {
            assert!(
                start.elapsed() < DEADLINE,
                "{}: `{line}` never came; stderr:\n{}",
                self.what,
                String::from_utf8_lossy(&self.stderr.lock().unwrap())
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the end, or kills the program at the deadline and fails.
    fn wait(mut self) -> Ended {
        let start = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if start.elapsed() > DEADLINE {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{}: still running after {DEADLINE:?} (a hang)\nstdout:\n{}\nstderr:\n{}",
                    self.what,
                    String::from_utf8_lossy(&self.stdout.lock().unwrap()),
                    String::from_utf8_lossy(&self.stderr.lock().unwrap())
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        for r in self.readers {
            r.join().unwrap();
        }
        let text =
            |b: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&b.lock().unwrap()).into_owned();
        Ended {
            status,
            stdout: text(&self.stdout),
            stderr: text(&self.stderr),
        }
    }
}

/// The program `record` started (its only child), by pid.
fn program_of(record: &Running) -> i32 {
    let start = Instant::now();
    loop {
        let out = Command::new("pgrep")
            .args(["-P", &record.child.id().to_string()])
            .output()
            .unwrap();
        if let Some(p) = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .find(|p| {
                // Not `record`'s fork before its exec, not the `ld.so
                // --list` it runs first to resolve `--function`.
                let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                let comm = comm.trim();
                !comm.is_empty() && comm != "coldcache" && !comm.starts_with("ld-")
            })
        {
            return p.parse().unwrap();
        }
        assert!(start.elapsed() < DEADLINE, "the program never started");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn record(dir: &Path, dump: &Path, trigger: &[&str], program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(COLDCACHE);
    cmd.current_dir(dir)
        .env("COLDCACHE_LIB", library())
        .args(["record", "--cache", "jaguar", "--no-resolve", "-o"])
        .arg(dump)
        .args(trigger)
        .arg("--")
        .arg(program)
        .args(args);
    cmd
}

/// The program with the library preloaded and a capture armed exactly as
/// `record` arms it, but as our own child: its raw wait status (signal and
/// core dump bit) can be compared with the native one. Core files are
/// allowed (in `dir`), so the core dump bit means something.
fn preloaded(dir: &Path, dump: &Path, trigger: &[&str], program: &Path, args: &[&str]) -> Command {
    let cfg = coldcache_config::resolve("jaguar").unwrap();
    let mut cmd = with_cores(dir, program, args);
    // A trailing `--mode M` (as `record` takes it).
    let trigger = match trigger {
        [t @ .., "--mode", m] => {
            cmd.env("COLDCACHE_MODE", m);
            t
        }
        t => t,
    };
    cmd.env("LD_PRELOAD", library())
        .env("COLDCACHE_LIB", library())
        .env("COLDCACHE_RECORD", "1")
        .env("COLDCACHE_QUIET", "1")
        .env("COLDCACHE_CACHE_JSON", serde_json::to_string(&cfg).unwrap())
        .env("COLDCACHE_CACHE_NAME", "jaguar")
        .env("COLDCACHE_OUTPUT", dump)
        .env("COLDCACHE_THREADS", "caller")
        // `record` always names the trigger signal: it also stops captures
        // of the other kinds, and the stop request signal comes with it.
        .env("COLDCACHE_SIGNAL", libc::SIGUSR2.to_string());
    match trigger {
        ["--all"] => {
            cmd.env("COLDCACHE_TRIGGER", "function")
                .env("COLDCACHE_FUNCTION", "main");
        }
        ["--all", "--threads", "all"] => {
            cmd.env("COLDCACHE_TRIGGER", "function")
                .env("COLDCACHE_FUNCTION", "main")
                .env("COLDCACHE_THREADS", "all");
        }
        ["--function", f] => {
            cmd.env("COLDCACHE_TRIGGER", "function")
                .env("COLDCACHE_FUNCTION", f);
        }
        ["--function", f, "--threads", "all"] => {
            cmd.env("COLDCACHE_TRIGGER", "function")
                .env("COLDCACHE_FUNCTION", f)
                .env("COLDCACHE_THREADS", "all");
        }
        ["--signal"] => {
            cmd.env("COLDCACHE_TRIGGER", "signal");
        }
        other => panic!("no preloaded form for {other:?}"),
    }
    cmd
}

/// `program args` in `dir` with core files allowed.
fn with_cores(dir: &Path, program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir).args(args);
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: libc::RLIM_INFINITY,
                rlim_max: libc::RLIM_INFINITY,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &lim);
            Ok(())
        });
    }
    cmd
}

fn remove_cores(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("core") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What a test does to the program once it runs: nothing, wait for
/// "ready" and send it SIGTERM from here (another process), or wait for
/// "ready" and start a capture with `coldcache trigger` (captured runs
/// only: natively the program is left alone).
#[derive(Clone, Copy)]
enum Poke {
    Nothing,
    TermWhenReady,
    TriggerWhenReady,
}

fn run(cmd: Command, what: &str, poke: Poke, pid_of: fn(&Running) -> i32) -> Ended {
    let r = spawn(cmd, what);
    match poke {
        Poke::Nothing => {}
        Poke::TermWhenReady => {
            r.wait_for("ready\n");
            let pid = pid_of(&r);
            // SAFETY: kill(2) of a process we started and have not reaped.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        }
        Poke::TriggerWhenReady => {
            r.wait_for("ready\n");
            let t = Command::new(COLDCACHE)
                .args(["trigger", &pid_of(&r).to_string()])
                .status()
                .unwrap();
            assert!(t.success(), "{what}: coldcache trigger failed");
        }
    }
    r.wait()
}

fn own_pid(r: &Running) -> i32 {
    r.child.id() as i32
}

fn load(dump: &Path, what: &str, stderr: &str) -> Dump {
    let bytes =
        std::fs::read(dump).unwrap_or_else(|e| panic!("{what}: no dump ({e})\nstderr:\n{stderr}"));
    Dump::from_bytes(&bytes).unwrap()
}

/// Runs `fatal MODE` natively, then captured `runs` times through `record`
/// (output, exit code, the dump and its reason, what `record` says) and
/// twice preloaded directly (the raw wait status, core dump bit included;
/// once in CI's trap-mode pass, [`repeat`]).
fn fatal_case(case: &str, mode: &str, trigger: &[&str], poke: Poke, runs: usize, reason: &str) {
    program_case(
        "tests-programs/capture/fatal.c",
        case,
        mode,
        trigger,
        poke,
        runs,
        Some(reason),
    );
}

/// [`fatal_case`] for any program of `tests-programs/capture/`; `reason`
/// `None`: the capture ends normally (not cut short).
fn program_case(
    source: &str,
    case: &str,
    mode: &str,
    trigger: &[&str],
    poke: Poke,
    runs: usize,
    reason: Option<&str>,
) {
    if !gcc_or_skip(case) {
        return;
    }
    let dir = scratch(case);
    let program = build(source, &dir);
    let native_poke = match poke {
        Poke::TriggerWhenReady => Poke::Nothing,
        p => p,
    };
    let native = run(
        with_cores(&dir, &program, &[mode]),
        &format!("{case}: plain"),
        native_poke,
        own_pid,
    );
    // The raw status comparison below covers the core dump bit only if
    // cores are written here (a `core` pattern, not a pipe to a daemon).
    let plain_cores = std::fs::read_to_string("/proc/sys/kernel/core_pattern")
        .is_ok_and(|p| p.starts_with("core"));
    if plain_cores && matches!(native.status.signal(), Some(libc::SIGSEGV | libc::SIGABRT)) {
        assert!(native.status.core_dumped(), "{case}: no core natively");
    }
    remove_cores(&dir);
    for i in 0..repeat(runs) {
        let what = format!("{case}: recorded run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run(
            record(&dir, &dump, trigger, &program, &[mode]),
            &what,
            poke,
            program_of,
        );
        assert_eq!(
            out.stdout, native.stdout,
            "{what}: standard output\n{}",
            out.stderr
        );
        let expected = native
            .status
            .code()
            .unwrap_or_else(|| 128 + native.status.signal().unwrap());
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{what}: status\n{}",
            out.stderr
        );
        if let Some(sig) = native.status.signal() {
            assert!(
                out.stderr.contains("the program was killed by SIG")
                    && out.stderr.contains(&format!("({sig})")),
                "{what}: record does not say how the program ended:\n{}",
                out.stderr
            );
        }
        let d = load(&dump, &what, &out.stderr);
        assert!(d.meta.instructions > 0, "{what}: an empty capture");
        assert_eq!(d.meta.cut_short.as_deref(), reason, "{what}: reason");
        remove_cores(&dir);
    }
    for i in 0..repeat(2) {
        let what = format!("{case}: preloaded run {i}");
        let dump = dir.join(format!("direct{i}.ccdump"));
        let out = run(
            preloaded(&dir, &dump, trigger, &program, &[mode]),
            &what,
            poke,
            own_pid,
        );
        assert_eq!(
            out.stdout, native.stdout,
            "{what}: standard output\n{}",
            out.stderr
        );
        assert_eq!(
            out.status.into_raw(),
            native.status.into_raw(),
            "{what}: wait status (native {:?}, captured {:?})\n{}",
            native.status,
            out.status,
            out.stderr
        );
        let d = load(&dump, &what, &out.stderr);
        assert_eq!(d.meta.cut_short.as_deref(), reason, "{what}: reason");
        remove_cores(&dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `abort()` during a capture: the dump was lost and `record` said the
/// program "never started" one.
#[test]
fn abort_during_a_capture_keeps_the_dump_and_the_sigabrt() {
    fatal_case(
        "abort",
        "abort",
        &["--all"],
        Poke::Nothing,
        20,
        "the program was killed by SIGABRT",
    );
}

/// An unhandled SIGSEGV (a store through a null pointer).
#[test]
fn an_unhandled_segfault_keeps_the_dump_and_the_sigsegv() {
    fatal_case(
        "segv",
        "segv",
        &["--all"],
        Poke::Nothing,
        20,
        "the program was killed by SIGSEGV",
    );
}

/// SIGTERM sent by another process while the capture runs.
#[test]
fn sigterm_from_another_process_keeps_the_dump_and_the_sigterm() {
    fatal_case(
        "term",
        "term",
        &["--all"],
        Poke::TermWhenReady,
        5,
        "the program was killed by SIGTERM",
    );
}

/// A worker thread faults while every thread is traced (a `--signal`
/// capture): the handler runs on the worker while the main thread keeps
/// trapping, and the dump names the signal.
#[test]
fn a_worker_thread_segfault_during_an_all_threads_capture_keeps_the_dump() {
    fatal_case(
        "thread_segv",
        "thread-segv",
        &["--signal"],
        Poke::TriggerWhenReady,
        5,
        "the program was killed by SIGSEGV",
    );
}

/// `execve` from the traced thread: the dump is written before the call
/// and the new program runs (and ends) as natively.
#[test]
fn execve_from_a_traced_thread_keeps_the_dump() {
    fatal_case(
        "exec",
        "exec",
        &["--all"],
        Poke::Nothing,
        20,
        "the program called execve",
    );
}

/// A SIGSEGV handler the program installs during the capture gets the
/// signal, and the program goes on (siglongjmp) to a normal exit.
#[test]
fn a_segv_handler_installed_during_the_capture_still_gets_the_signal() {
    fatal_case(
        "handled",
        "handled",
        &["--all"],
        Poke::Nothing,
        20,
        "the program exited",
    );
}

/// A SIGSEGV handler installed before the capture gets the fault raised
/// inside it, and its `_exit(9)` is the program's status. (The handler
/// runs untraced — the kernel clears TF for a signal handler — so its
/// `_exit` is not seen and no dump is written: only the program's
/// behaviour is checked.)
#[test]
fn a_segv_handler_installed_before_the_capture_still_gets_the_signal() {
    if !gcc_or_skip("handled_early") {
        return;
    }
    let dir = scratch("handled_early");
    let program = build("tests-programs/capture/fatal.c", &dir);
    let native = run(
        with_cores(&dir, &program, &["handled-early"]),
        "handled-early: plain",
        Poke::Nothing,
        own_pid,
    );
    assert_eq!(native.status.code(), Some(9));
    for i in 0..repeat(20) {
        let what = format!("handled-early: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run(
            preloaded(
                &dir,
                &dump,
                &["--function", "frame"],
                &program,
                &["handled-early"],
            ),
            &what,
            Poke::Nothing,
            own_pid,
        );
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(
            out.status.into_raw(),
            native.status.into_raw(),
            "{what}\n{}",
            out.stderr
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Strict seccomp mode entered during a capture: the engine's next system
/// call killed the program (status 137); the capture now stops before the
/// `prctl` runs.
#[test]
fn strict_seccomp_during_a_capture_stops_it_instead_of_killing_the_program() {
    seccomp_case("strict");
}

/// A filter that kills on unknown system calls, installed with seccomp(2)
/// during a capture: the program died of SIGSYS (status 159).
#[test]
fn a_seccomp_filter_during_a_capture_stops_it_instead_of_killing_the_program() {
    seccomp_case("filter");
}

fn seccomp_case(mode: &str) {
    let case = format!("seccomp_{mode}");
    if !gcc_or_skip(&case) {
        return;
    }
    let dir = scratch(&case);
    let program = build("tests-programs/capture/seccomp.c", &dir);
    let native = run(
        with_cores(&dir, &program, &[mode]),
        &format!("{case}: plain"),
        Poke::Nothing,
        own_pid,
    );
    assert_eq!(native.status.code(), Some(0), "{}", native.stderr);
    for i in 0..repeat(20) {
        let what = format!("{case}: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run(
            record(&dir, &dump, &["--all"], &program, &[mode]),
            &what,
            Poke::Nothing,
            program_of,
        );
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(out.status.code(), Some(0), "{what}\n{}", out.stderr);
        let d = load(&dump, &what, &out.stderr);
        assert!(d.meta.instructions > 0, "{what}: an empty capture");
        assert_eq!(
            d.meta.cut_short.as_deref(),
            Some("the program installed a seccomp filter"),
            "{what}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `--signal` capture asked for after the program installed a filter
/// that kills unknown system calls: refused with the reason, the program
/// runs on unharmed (it was killed by the engine's calls). The program is
/// run preloaded, as `record` runs it, so its raw wait status is compared
/// (and `record`'s own policy for a run without a capture does not enter).
#[test]
fn a_start_after_a_seccomp_filter_is_refused_with_the_reason() {
    if !gcc_or_skip("seccomp_before") {
        return;
    }
    let dir = scratch("seccomp_before");
    let program = build("tests-programs/capture/seccomp.c", &dir);
    let native = run(
        with_cores(&dir, &program, &["before"]),
        "seccomp before: plain",
        Poke::Nothing,
        own_pid,
    );
    assert_eq!(native.status.code(), Some(0));
    for i in 0..5 {
        let what = format!("seccomp before: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let mut cmd = preloaded(&dir, &dump, &["--signal"], &program, &["before"]);
        cmd.env("COLDCACHE_THREADS", "all");
        let out = run(cmd, &what, Poke::TriggerWhenReady, own_pid);
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(
            out.status.into_raw(),
            native.status.into_raw(),
            "{what}: wait status (native {:?}, captured {:?})\n{}",
            native.status,
            out.status,
            out.stderr
        );
        assert!(
            out.stderr
                .contains("capture not started: the program installed a seccomp filter"),
            "{what}: {}",
            out.stderr
        );
        assert!(!dump.exists(), "{what}: a dump");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `coldcache trigger` while the program's other threads are blocked in
/// `read` on a pipe and in a futex wait: the capture starts (and, in half
/// the runs, is stopped by a second trigger), the blocked calls are
/// restarted, nothing hangs and the output is unchanged.
#[test]
fn a_trigger_while_threads_block_in_read_and_futex_does_not_hang() {
    if !gcc_or_skip("blocked") {
        return;
    }
    let dir = scratch("blocked");
    let program = build("tests-programs/capture/blocked.c", &dir);
    let native = run(
        Command::new(&program),
        "blocked: plain",
        Poke::Nothing,
        own_pid,
    );
    assert_eq!(native.status.code(), Some(0));
    for i in 0..6 {
        let what = format!("blocked: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let r = spawn(record(&dir, &dump, &["--signal"], &program, &[]), &what);
        r.wait_for("ready ");
        let pid = program_of(&r).to_string();
        let trigger = || {
            let t = Command::new(COLDCACHE)
                .args(["trigger", &pid])
                .status()
                .unwrap();
            assert!(t.success());
        };
        trigger();
        let stopped = i % 2 == 1;
        if stopped {
            std::thread::sleep(Duration::from_millis(300));
            trigger();
        }
        let out = r.wait();
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(out.status.code(), Some(0), "{what}\n{}", out.stderr);
        let d = load(&dump, &what, &out.stderr);
        assert!(d.meta.instructions > 0, "{what}: an empty capture");
        assert_eq!(d.threads.len(), 3, "{what}: main, reader and waiter traced");
        if !stopped {
            assert_eq!(
                d.meta.cut_short.as_deref(),
                Some("the program exited"),
                "{what}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The engine takes SIGTERM and SIGSEGV while a capture runs (to write the
/// dump if they end the program); a traced thread reading their
/// disposition back must still see the `SIG_DFL` it had (it saw the
/// engine's handler), and its own handler, once set, gets the signal.
#[test]
fn a_traced_thread_reads_back_the_default_dispositions_it_had() {
    if !gcc_or_skip("query") {
        return;
    }
    let dir = scratch("query");
    let program = build("tests-programs/capture/fatal.c", &dir);
    let native = run(
        with_cores(&dir, &program, &["query"]),
        "query: plain",
        Poke::Nothing,
        own_pid,
    );
    assert!(
        native.stdout.contains("SIGTERM: default, flags 0\n"),
        "{}",
        native.stdout
    );
    assert!(native
        .stdout
        .contains("SIGTERM reached the program's handler\n"));
    for i in 0..repeat(20) {
        let what = format!("query: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run(
            record(&dir, &dump, &["--all"], &program, &["query"]),
            &what,
            Poke::Nothing,
            program_of,
        );
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(out.status.code(), Some(0), "{what}\n{}", out.stderr);
        let d = load(&dump, &what, &out.stderr);
        assert!(d.meta.instructions > 0, "{what}: an empty capture");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM sent to `record` itself (not to the program) during a capture:
/// `record` died at once, and its death killed the program (SIGKILL, the
/// parent-death signal) in the middle of the capture: no dump. It now
/// passes the signal on, the program writes its dump and dies of it, and
/// `record` reports that with the program's status.
#[test]
fn sigterm_to_record_reaches_the_program_and_the_dump_is_kept() {
    if !gcc_or_skip("term_record") {
        return;
    }
    let dir = scratch("term_record");
    let program = build("tests-programs/capture/fatal.c", &dir);
    let mut plain = Command::new(&program);
    plain.arg("term");
    let native = run(plain, "term_record: plain", Poke::TermWhenReady, own_pid);
    assert_eq!(native.status.signal(), Some(libc::SIGTERM));
    for i in 0..5 {
        let what = format!("term_record: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run(
            record(&dir, &dump, &["--all"], &program, &["term"]),
            &what,
            Poke::TermWhenReady,
            own_pid,
        );
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(
            out.status.code(),
            Some(128 + libc::SIGTERM),
            "{what}\n{}",
            out.stderr
        );
        assert!(
            out.stderr
                .contains("the program was killed by SIGTERM (15)"),
            "{what}: {}",
            out.stderr
        );
        let d = load(&dump, &what, &out.stderr);
        assert_eq!(
            d.meta.cut_short.as_deref(),
            Some("the program was killed by SIGTERM"),
            "{what}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A filter synchronised to every thread (`SECCOMP_FILTER_FLAG_TSYNC`)
/// during a `--signal` capture of every thread: it also reached the
/// engine's writer thread, whose next `poll` killed the program (status
/// 159). The writer is now parked for good before the call runs. A traced
/// worker waiting in `read` takes its last trap after the filter: in trap
/// mode that trap's handler made a `gettid` (the virtual SIGTRAP state was
/// keyed by thread id) and the program died of SIGSYS, every run; it is
/// looked up by the thread pointer first now, and a thread with none makes
/// no system call there.
#[test]
fn a_filter_on_every_thread_does_not_reach_the_engines_writer() {
    if !gcc_or_skip("seccomp_tsync") {
        return;
    }
    let dir = scratch("seccomp_tsync");
    let program = build("tests-programs/capture/seccomp.c", &dir);
    let native = run(
        with_cores(&dir, &program, &["tsync"]),
        "seccomp tsync: plain",
        Poke::Nothing,
        own_pid,
    );
    assert_eq!(native.status.code(), Some(0), "{}", native.stderr);
    for i in 0..repeat(5) {
        let what = format!("seccomp tsync: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run(
            record(&dir, &dump, &["--signal"], &program, &["tsync"]),
            &what,
            Poke::TriggerWhenReady,
            program_of,
        );
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(out.status.code(), Some(0), "{what}\n{}", out.stderr);
        let d = load(&dump, &what, &out.stderr);
        assert_eq!(d.threads.len(), 3, "{what}: main and both workers traced");
        assert_eq!(
            d.meta.cut_short.as_deref(),
            Some("the program installed a seccomp filter"),
            "{what}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// rseq critical sections under the trap engine (`tests-programs/capture/
/// rseq.c`: four threads incrementing per-CPU counters in sections that
/// commit with a store). Single-stepping delivers a signal after every
/// instruction, and the kernel aborts a section on any signal: each section
/// was aborted at its first instruction, for ever (2M instructions and no
/// progress in 60 s). The trap engine now keeps the descriptor itself and
/// aborts on a preemption as the kernel would: the program ends, the dump
/// counts the sections. The total must be exact in both modes: the trap
/// engine makes each commit itself, inside a critical section of its own,
/// so that a preemption in a trap handler's last instructions before a
/// commit cannot go unseen (it lost 0-69 of 80,000 when the commit ran
/// with the program's descriptor given back to the kernel).
#[test]
fn rseq_critical_sections_run_under_the_trap_engine() {
    if !gcc_or_skip("rseq") {
        return;
    }
    if std::env::var("COLDCACHE_MODE").as_deref() == Ok("trap") {
        eprintln!("trap-mode case: run by the first pass, not again in CI's trap-mode pass");
        return;
    }
    let dir = scratch("rseq");
    let program = build("tests-programs/capture/rseq.c", &dir);
    let native = run(
        with_cores(&dir, &program, &["200"]),
        "rseq: plain",
        Poke::Nothing,
        own_pid,
    );
    if native.stdout.contains("rseq not registered") {
        eprintln!("SKIP: glibc registered no rseq area here");
        return;
    }
    assert_eq!(native.stdout, "total 800 of 800\n");
    let dump = dir.join("rseq.ccdump");
    let out = run(
        record(
            &dir,
            &dump,
            &["--all", "--threads", "all", "--mode", "trap"],
            &program,
            &["200"],
        ),
        "rseq: trap mode",
        Poke::Nothing,
        program_of,
    );
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    eprintln!("rseq under the trap engine: {}", out.stdout.trim());
    let total: u64 = out
        .stdout
        .strip_prefix("total ")
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{}", out.stdout));
    let d = load(&dump, "rseq", &out.stderr);
    let note = d
        .meta
        .notes
        .iter()
        .find(|n| n.starts_with("rseq: "))
        .unwrap_or_else(|| panic!("no rseq note: {:?}", d.meta.notes));
    assert_eq!(total, 800, "{}\n{note}", out.stdout);
    let entered: u64 = note["rseq: ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(entered >= 800, "{note}");
    // Every section that was not aborted committed through the trap
    // engine's own section (`rseq.c`'s commit is a `mov` of a register).
    assert_eq!(commits_made(note), 800, "{note}");
    // Fast mode: the translator recognises the descriptor's store (`lea
    // desc(%rip), %rax; mov %rax, 8(%rsi)`) and leaves it to the trap
    // engine from its first execution, so no section runs translated
    // (before, the first buffer's worth of sections did, thousands at
    // 20,000 per thread, where the kernel cannot restart them).
    let out = run(
        record(
            &dir,
            &dump,
            &["--all", "--threads", "all", "--mode", "fast"],
            &program,
            &["200"],
        ),
        "rseq: fast mode",
        Poke::Nothing,
        program_of,
    );
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    let d = load(&dump, "rseq fast", &out.stderr);
    let note = d
        .meta
        .notes
        .iter()
        .find(|n| n.starts_with("rseq: "))
        .unwrap_or_else(|| panic!("no rseq note in fast mode: {:?}", d.meta.notes));
    assert!(!note.contains("ran as translated"), "{note}");
    let entered: u64 = note["rseq: ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(entered >= 800, "{note}");
    assert_eq!(out.stdout, "total 800 of 800\n", "{note}");
    assert_eq!(commits_made(note), 800, "{note}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The number before " commits itself" in an rseq note.
fn commits_made(note: &str) -> u64 {
    let head = note
        .split(" commits itself")
        .next()
        .unwrap_or_else(|| panic!("{note}"));
    head.rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no commits made in {note}"))
}

/// The program's own SIGTRAP and SIGRTMIN+6 (the signals the engine uses
/// for single-stepping and for starting other threads), handled by
/// handlers `main` installed before a `--function` capture: its `int3`s,
/// `raise`/`kill`/`pthread_kill` of SIGTRAP and `sigqueue`s of SIGRTMIN+6
/// reach its handlers with their codes and values, and `sigaction` reads
/// its handlers back. (A foreign SIGTRAP handler used to refuse the
/// capture; the program's `int3` under capture died of SIGTRAP.)
#[test]
fn the_programs_own_sigtrap_and_rt_handlers_set_before_the_capture_run() {
    sigtrap_case("before", 20, None);
}

/// The same handlers installed during the capture (one on an alternate
/// stack, one `SA_RESETHAND`, `signal()` read-backs): the handler runs on
/// its alternate stack, is reset after one signal, and every read-back
/// gives what the program set.
#[test]
fn the_programs_own_sigtrap_and_rt_handlers_set_during_the_capture_run() {
    sigtrap_case("during", 20, None);
}

/// SIGTRAP and SIGRTMIN+6 set to SIG_IGN during the capture: raised, both
/// are ignored, and read back as ignored (the program died of SIGTRAP).
#[test]
fn sigtrap_and_rt_ignored_by_the_program_stay_ignored() {
    sigtrap_case("ignore", 10, None);
}

/// SIGTRAP and SIGRTMIN+6 blocked by the program during the capture: the
/// mask reads back with both, both raised stay pending (`sigpending`
/// shows them) and reach the handlers once unblocked.
#[test]
fn sigtrap_and_rt_blocked_by_the_program_stay_pending_until_unblocked() {
    sigtrap_case("mask", 20, None);
}

/// `int3` with SIGTRAP at SIG_DFL during the capture: the program dies of
/// SIGTRAP with its core dump, as natively, and the dump says so.
#[test]
fn an_int3_with_sigtrap_at_its_default_kills_the_program_as_natively() {
    sigtrap_case("trap", 10, Some("the program was killed by SIGTRAP"));
}

/// `raise(SIGRTMIN+6)` at SIG_DFL during the capture: the program dies of
/// it, as natively (the engine's handler used to swallow it).
#[test]
fn sigrtmin_6_at_its_default_kills_the_program_as_natively() {
    sigtrap_case(
        "rt",
        10,
        Some("the program was killed by a real-time signal"),
    );
}

fn sigtrap_case(mode: &str, runs: usize, reason: Option<&str>) {
    program_case(
        "tests-programs/capture/sigtrap.c",
        &format!("sigtrap_{mode}"),
        mode,
        &["--function", "work"],
        Poke::Nothing,
        runs,
        reason,
    );
}

/// `cmd` with the stack limit of `ulimit -s 64` (inherited by the program
/// `record` starts) and core files allowed.
fn with_small_stack(mut cmd: Command) -> Command {
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            let stack = libc::rlimit {
                rlim_cur: 64 << 10,
                rlim_max: libc::RLIM_INFINITY,
            };
            libc::setrlimit(libc::RLIMIT_STACK, &stack);
            Ok(())
        });
    }
    cmd
}

/// `smallstack` under `ulimit -s 64`: plain once, then captured `runs`
/// times (`trigger`, program arguments `args`): output and status byte for
/// byte, a dump with `threads` threads every time.
fn small_stack_case(case: &str, trigger: &[&str], args: &[&str], runs: usize, threads: usize) {
    if !gcc_or_skip(case) {
        return;
    }
    let dir = scratch(case);
    let program = build("tests-programs/capture/smallstack.c", &dir);
    let mut plain = Command::new(&program);
    plain.current_dir(&dir).args(args);
    let native = run(
        with_small_stack(plain),
        &format!("{case}: plain"),
        Poke::Nothing,
        own_pid,
    );
    assert_eq!(native.status.code(), Some(0), "{}", native.stderr);
    for i in 0..repeat(runs) {
        let what = format!("{case}: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run(
            with_small_stack(record(&dir, &dump, trigger, &program, args)),
            &what,
            Poke::Nothing,
            own_pid,
        );
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(out.status.code(), Some(0), "{what}\n{}", out.stderr);
        let d = load(&dump, &what, &out.stderr);
        assert!(d.meta.instructions > 0, "{what}: an empty capture");
        assert_eq!(d.meta.cut_short, None, "{what}");
        assert_eq!(d.threads.len(), threads, "{what}: threads traced");
        if trigger.contains(&"fast") {
            assert_eq!(
                d.meta.mode.engine, "fast",
                "{what}: not captured in fast mode: {:?}",
                d.meta.mode
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Threads with 16 KiB stacks that use about 11 KiB of them (natively
/// they manage about 12), created during a capture of every thread under
/// `ulimit -s 64`: every single-step trap's signal frame used to land on
/// the thread's stack, which overflowed (status 139) from about 10.5 KiB;
/// it now lands on an alternate stack of the engine's.
#[test]
fn threads_with_16_kib_stacks_survive_a_capture_under_ulimit_s_64() {
    small_stack_case(
        "small_threads",
        &["--threads", "all"],
        &["api", "4", "44"],
        20,
        5,
    );
}

/// `record --all` under `ulimit -s 64`: the capture is armed by the
/// library's constructor on the program's 64 KiB main stack, and main
/// (using 24 KiB itself) and its 16 KiB threads keep their output.
#[test]
fn a_capture_armed_in_the_constructor_fits_a_64_kib_main_stack() {
    small_stack_case("small_main", &["--all"], &["none", "4", "44"], 10, 1);
}

/// A capture started and stopped through the API by a thread with a
/// 16 KiB stack, in both modes: preparing the capture took 35 to 54 KiB
/// of the caller's stack (as the compiler built framehop's unwinder cache)
/// and finishing it more than 16, so the program was killed by SIGSEGV in
/// `coldcache_start`, then in `coldcache_stop`; both now run on a stack
/// of the library's. The same overflow on the 64 KiB main stack, when
/// `record --all` arms in the constructor, made the tests above and below
/// fail in about 1 run in 6 (the kernel's random stack offset decided).
#[test]
fn a_capture_started_and_stopped_on_a_16_kib_thread_stack_keeps_the_program_alive() {
    // Before the fix every run died: a few runs are enough.
    small_stack_case("small_api_thread", &["--mode", "trap"], &["thread"], 4, 1);
    small_stack_case(
        "small_api_thread_fast",
        &["--mode", "fast"],
        &["thread"],
        4,
        1,
    );
}

/// A traced thread overflows its stack (no alternate stack of its own):
/// the kernel could not deliver the SIGSEGV, so the capture was lost. The
/// engine's alternate stack (trap mode) takes the signal frame: the dump is
/// written, cut short with SIGSEGV, and the program dies of it as natively.
#[test]
fn a_stack_overflow_of_a_traced_thread_keeps_the_dump() {
    overflow_case("overflow", "trap");
}

/// `smallstack overflow` under `ulimit -s 64`, captured `--all` in capture
/// mode `mode` ten times: the dump is kept, cut short with SIGSEGV, and
/// the program dies of it as natively.
fn overflow_case(case: &str, mode: &str) {
    if !gcc_or_skip(case) {
        return;
    }
    let dir = scratch(case);
    let program = build("tests-programs/capture/smallstack.c", &dir);
    let mut plain = Command::new(&program);
    plain.current_dir(&dir).arg("overflow");
    let native = run(
        with_small_stack(plain),
        &format!("{case}: plain"),
        Poke::Nothing,
        own_pid,
    );
    assert_eq!(native.status.signal(), Some(libc::SIGSEGV));
    for i in 0..repeat(10) {
        let what = format!("{case}: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run(
            with_small_stack(record(
                &dir,
                &dump,
                &["--all", "--mode", mode],
                &program,
                &["overflow"],
            )),
            &what,
            Poke::Nothing,
            own_pid,
        );
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(
            out.status.code(),
            Some(128 + libc::SIGSEGV),
            "{what}\n{}",
            out.stderr
        );
        let d = load(&dump, &what, &out.stderr);
        assert!(d.meta.instructions > 0, "{what}: an empty capture");
        assert_eq!(
            d.meta.cut_short.as_deref(),
            Some("the program was killed by SIGSEGV"),
            "{what}"
        );
        assert_eq!(
            d.meta.mode.engine, mode,
            "{what}: not captured in {mode} mode: {:?}",
            d.meta.mode
        );
        remove_cores(&dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An absurd reserve (`--reserve records=100000000000000`, and each other
/// one) aborted the program with a Rust out-of-memory backtrace once the
/// capture started. Its cost is now computed first: `record` refuses it
/// before the program runs, naming the reserve and the figures. The
/// `trace` reserve sizes a buffer capped at one chunk (64 MiB), so any
/// value of it fits and the program runs.
#[test]
fn absurd_reserves_are_refused_by_name_before_the_program_runs() {
    let dir = scratch("reserves");
    let marker = dir.join("ran");
    let out = Command::new(COLDCACHE)
        .current_dir(&dir)
        .env("COLDCACHE_LIB", library())
        .args(["record", "--signal", "--trace", "t.cctrace", "--reserve"])
        .arg("trace=100000000000000")
        .args(["--", "sh", "-c"])
        .arg(format!("touch {}", marker.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("needs about"), "trace: {err}");
    assert!(marker.exists(), "trace: the program did not run: {err}");
    std::fs::remove_file(&marker).unwrap();
    for knob in ["records", "instructions", "stacks", "depth"] {
        let spec = format!("{knob}=100000000000000");
        let out = Command::new(COLDCACHE)
            .current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            .args(["record", "--signal", "--trace", "t.cctrace", "--reserve"])
            .arg(&spec)
            .args(["--", "sh", "-c"])
            .arg(format!("touch {}", marker.display()))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{spec}: exit 0\n{err}");
        assert!(
            err.contains(&format!("--reserve: reserve {spec} needs about"))
                && err.contains(&format!("use a smaller --reserve {knob}")),
            "{spec}: {err}"
        );
        assert!(!marker.exists(), "{spec}: the program ran");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same reserve handed to the library directly (`COLDCACHE_RESERVES`,
/// as the C and Rust APIs' callers can): no capture, the reason printed,
/// and the program runs to its end as natively instead of aborting.
#[test]
fn an_absurd_reserve_given_to_the_library_leaves_the_program_unharmed() {
    if !gcc_or_skip("reserves_library") {
        return;
    }
    let dir = scratch("reserves_library");
    let program = build("tests-programs/capture/smallstack.c", &dir);
    let native = run(
        with_cores(&dir, &program, &["none", "2"]),
        "reserves: plain",
        Poke::Nothing,
        own_pid,
    );
    let dump = dir.join("never.ccdump");
    let mut cmd = preloaded(&dir, &dump, &["--all"], &program, &["none", "2"]);
    cmd.env("COLDCACHE_RESERVES", "records=100000000000000")
        .env_remove("COLDCACHE_QUIET");
    let out = run(cmd, "reserves: preloaded", Poke::Nothing, own_pid);
    assert_eq!(out.stdout, native.stdout, "{}", out.stderr);
    assert_eq!(
        out.status.into_raw(),
        native.status.into_raw(),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("coldcache: not capturing: reserve records=100000000000000 needs about"),
        "{}",
        out.stderr
    );
    assert!(!dump.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGALRM (left at SIG_DFL) fires while `coldcache_stop` writes the dump
/// on the program's only thread: the fatal handler could not wait for a
/// dump its own thread was writing, so the program died mid-write and the
/// capture was lost. The asynchronous fatal signals are now held back
/// while a thread writes the dump: it is complete, then the program dies
/// of SIGALRM as natively.
#[test]
fn an_alarm_while_the_dump_is_written_waits_for_it() {
    if !gcc_or_skip("finish_alarm") {
        return;
    }
    let dir = scratch("finish_alarm");
    let program = build("tests-programs/capture/finish.c", &dir);
    let native = run(
        with_cores(&dir, &program, &[]),
        "finish alarm: plain",
        Poke::Nothing,
        own_pid,
    );
    assert_eq!(native.status.signal(), Some(libc::SIGALRM));
    // Each run waits for its alarm (seconds in trap mode): 8, not 20.
    for i in 0..8 {
        let what = format!("finish alarm: run {i}");
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run(
            record(&dir, &dump, &[], &program, &[]),
            &what,
            Poke::Nothing,
            own_pid,
        );
        assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
        assert_eq!(
            out.status.code(),
            Some(128 + libc::SIGALRM),
            "{what}\n{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("killed by SIGALRM (14)"),
            "{what}: {}",
            out.stderr
        );
        let d = load(&dump, &what, &out.stderr);
        assert!(d.meta.instructions > 0, "{what}: an empty capture");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// How many times a case repeats its captured run: `runs`, or a quarter of
/// it under `COLDCACHE_MODE=trap`. That is CI's second pass over this file
/// (the first ran every case in the default mode, and the both-mode cases
/// in trap mode too); each trap-mode run single-steps its window (the
/// pass's 61 tests took 200 s of CPU at half; CI must stay under 25
/// minutes).
fn repeat(runs: usize) -> usize {
    if std::env::var("COLDCACHE_MODE").as_deref() == Ok("trap") {
        runs.div_ceil(4)
    } else {
        runs
    }
}

/// The runs of a both-mode case in mode `extra`: half of `runs` in trap
/// mode (each single-steps its window; the default mode's runs are the
/// ones whose timing varies).
fn runs_in(extra: &[&str], runs: usize) -> usize {
    if extra.is_empty() {
        runs
    } else {
        runs.div_ceil(2)
    }
}

/// The capture modes every case of the engine's own signals runs in:
/// `--mode trap`, and the default (fast where it can run). None under
/// `COLDCACHE_MODE=trap`: that is CI's second pass over this file, in trap
/// mode, and the first pass already ran these cases in both modes.
fn modes() -> Vec<&'static [&'static str]> {
    if std::env::var("COLDCACHE_MODE").as_deref() == Ok("trap") {
        eprintln!("both-mode case: run in both modes by the first pass, not again in trap mode");
        Vec::new()
    } else {
        vec![&["--mode", "trap"], &[]]
    }
}

/// [`program_case`] of `source` with argument `arg` in both capture modes
/// ([`modes`]), no poke: each mode's options after `trigger`, [`runs_in`]
/// the mode; `name` makes the case's name from the mode's tag (`trap` or
/// `default`).
fn both_modes_case(
    source: &str,
    name: &dyn Fn(&str) -> String,
    arg: &str,
    trigger: &[&str],
    runs: usize,
    reason: Option<&str>,
) {
    cases_in_modes(modes(), source, name, arg, trigger, runs, reason);
}

/// [`both_modes_case`] in the capture modes `modes` only.
fn cases_in_modes(
    modes: Vec<&[&str]>,
    source: &str,
    name: &dyn Fn(&str) -> String,
    arg: &str,
    trigger: &[&str],
    runs: usize,
    reason: Option<&str>,
) {
    for extra in modes {
        let tag = if extra.is_empty() { "default" } else { "trap" };
        let trigger: Vec<&str> = trigger.iter().chain(extra.iter()).copied().collect();
        program_case(
            source,
            &name(tag),
            arg,
            &trigger,
            Poke::Nothing,
            runs_in(extra, runs),
            reason,
        );
    }
}

/// [`program_case`] of `ownsignals.c` in both capture modes.
fn own_signals_case(mode: &str, trigger: &[&str], runs: usize, reason: Option<&str>) {
    both_modes_case(
        "tests-programs/capture/ownsignals.c",
        &|tag| format!("own_{mode}_{tag}"),
        mode,
        trigger,
        runs,
        reason,
    );
}

/// `raise(SIGRTMIN+7)` at its default during a capture under `record`: the
/// library's stop request handler took it for `coldcache trigger`, the
/// capture stopped and the program ran on (exit 0 instead of dying of the
/// signal), and the disposition read back before `main` was a handler.
/// The program's disposition is now its own: it dies of the signal, with
/// the dump.
#[test]
fn sigrtmin_7_at_its_default_kills_the_program_as_natively() {
    own_signals_case(
        "stop-default",
        &["--all"],
        10,
        Some("the program was killed by a real-time signal"),
    );
}

/// A handler of SIGRTMIN+7 installed during the capture: `sigaction` read
/// the old disposition back as a handler (the library's), not `SIG_DFL`.
/// It now reads what the program had, and the three values it queues
/// reach its handler in order.
#[test]
fn the_programs_own_sigrtmin_7_handler_reads_back_and_runs() {
    own_signals_case("stop-handler", &["--function", "work"], 20, None);
}

/// A thread the capture does not trace takes SIGTRAP and SIGRTMIN+6 with
/// `syscall(SYS_rt_sigaction, …)`, bypassing the C library's `sigaction`:
/// it read the engine's handlers back, and the traced thread's every
/// later instruction trapped into the program's handler (39,000 traps
/// counted instead of 1). Its disposition now goes to the engine's shadow:
/// it reads back `SIG_DFL`, its handlers get exactly the signals it
/// raises, and the capture goes on to its end.
#[test]
fn an_untraced_thread_taking_sigtrap_with_a_raw_syscall_keeps_the_capture() {
    // 8 runs (4 in trap mode): the bug it guards against showed in every
    // run, and each run takes half a second of CPU (CI's time, issue 34).
    own_signals_case("takeover", &["--function", "work"], 8, None);
}

/// The same takeover of SIGTRAP made with a `syscall` instruction of the
/// program's own, which nothing can intercept: the traced thread's next
/// traps went to the program's handler (a handler it installed, so it
/// lived; they are not in its output), the capture was never stopped and
/// read "the program exited". The engine now looks at its full buffers
/// (fast mode) and when the capture ends: it takes the signal back, so
/// the traced thread stops trapping, and the dump says why it was cut
/// short.
#[test]
fn an_untraced_thread_taking_sigtrap_with_a_syscall_instruction_stops_the_capture() {
    own_signals_case(
        "takeover-asm",
        &["--function", "work"],
        10,
        Some("the program took over SIGTRAP or the sync signal with a raw system call"),
    );
}

/// SIGTRAP, SIGRTMIN+6 and SIGRTMIN+7 set to `SIG_IGN`, then `execv` from
/// the traced thread during an `--all` capture: the new program raises
/// the three and must survive (ignored dispositions survive `exec`); the
/// engine's handlers became `SIG_DFL` instead, and it died of SIGTRAP
/// (status 133).
#[test]
fn signals_ignored_by_the_program_stay_ignored_across_an_exec_during_a_capture() {
    own_signals_case(
        "exec-during",
        &["--all"],
        10,
        Some("the program called execve"),
    );
}

/// The same `execv` made by main after a `--function work` capture ended
/// (the thread no longer traced: the interposed `execv` restores them).
#[test]
fn signals_ignored_by_the_program_stay_ignored_across_an_exec_after_a_capture() {
    own_signals_case("exec-after", &["--function", "work"], 10, None);
}

/// `cmd` with SIGRTMIN+7 blocked from the start (inherited across exec,
/// as from a parent that blocks it).
fn with_rt7_blocked(mut cmd: Command) -> Command {
    // SAFETY: sigprocmask is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGRTMIN() + 7);
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    cmd
}

/// `ownsignals MODE` interrupted twice (SIGINT: natively sent to the
/// program, captured sent to `record`, which passes it on after its stop
/// request), in both capture modes, `runs` times each: the same output
/// and status, and a dump cut short "interrupted (SIGINT)" (written
/// before the second SIGINT is sent).
fn ctrl_c_case(mode: &str, blocked: bool, runs: usize) {
    let case = format!("own_{mode}");
    if !gcc_or_skip(&case) {
        return;
    }
    let dir = scratch(&case);
    let program = build("tests-programs/capture/ownsignals.c", &dir);
    let prepare = |cmd: Command| if blocked { with_rt7_blocked(cmd) } else { cmd };
    let interrupt_twice = |r: &Running, pid: i32, dump: Option<&Path>| {
        r.wait_for("ready\n");
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: kill(2) of a process this test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        let start = Instant::now();
        // Not forever: a stop request that went astray never writes it.
        if let Some(d) = dump {
            while !d.exists() && start.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // The second SIGINT only once the program has taken the first: sent
        // while the first is still pending (the program busy in a handler
        // with signals blocked, under load), the two would be one and the
        // program would spin on (seen once in CI, in trap mode).
        r.wait_for("interrupted once\n");
        // SAFETY: as above.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    };
    let mut plain = Command::new(&program);
    plain.current_dir(&dir).arg(mode);
    let r = spawn(prepare(plain), &format!("{case}: plain"));
    interrupt_twice(&r, own_pid(&r), None);
    let native = r.wait();
    assert_eq!(native.status.code(), Some(0), "{}", native.stderr);
    for extra in modes() {
        for i in 0..repeat(runs_in(extra, runs)) {
            let what = format!("{case} {extra:?}: run {i}");
            let dump = dir.join(format!("run{i}.ccdump"));
            let _ = std::fs::remove_file(&dump);
            let trigger: Vec<&str> = ["--all"].iter().chain(extra.iter()).copied().collect();
            let cmd = record(&dir, &dump, &trigger, &program, &[mode]);
            let r = spawn(prepare(cmd), &what);
            let pid = r.child.id() as i32;
            interrupt_twice(&r, pid, Some(&dump));
            let out = r.wait();
            assert_eq!(out.stdout, native.stdout, "{what}\n{}", out.stderr);
            assert_eq!(out.status.code(), Some(0), "{what}\n{}", out.stderr);
            let d = load(&dump, &what, &out.stderr);
            assert!(d.meta.instructions > 0, "{what}: an empty capture");
            assert_eq!(
                d.meta.cut_short.as_deref(),
                Some("interrupted (SIGINT)"),
                "{what}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C (`record` interrupted) while the program has its own handler of
/// SIGRTMIN+7: `record`'s stop request went to the program's handler
/// (which counted one signal it never sent) and the capture ran on. The
/// request now reaches the library, and the program's handler sees none.
#[test]
fn ctrl_c_reaches_the_capture_past_the_programs_own_sigrtmin_7_handler() {
    ctrl_c_case("stop-ctrlc", false, 3);
}

/// Ctrl-C while the program keeps SIGRTMIN+7 blocked from its start (it
/// takes it with `sigtimedwait`): the stop request stayed pending on the
/// program, which then took it as its own, and no dump was written. The
/// library now takes another signal, tells `record` which, and the
/// program finds nothing pending.
#[test]
fn ctrl_c_uses_another_signal_when_the_program_blocks_sigrtmin_7() {
    ctrl_c_case("stop-wait", true, 3);
}

/// Threads with 16 KiB stacks that make a system call at their deepest
/// point (about 11 KiB down), captured in fast mode under `ulimit -s 64`:
/// fast mode hands a system call to the trap engine, whose signal frame
/// landed on the thread's stack and overflowed it (status 139). Fast mode
/// now has the engine's alternate stacks too.
#[test]
fn threads_with_16_kib_stacks_survive_a_fast_capture_under_ulimit_s_64() {
    small_stack_case(
        "small_threads_fast",
        &["--threads", "all", "--mode", "fast"],
        &["api", "4", "44", "syscall"],
        20,
        5,
    );
}

/// A stack overflow of a thread in translated code (fast mode): the
/// kernel could not deliver the SIGSEGV (no alternate stack), so the dump
/// was lost; it is now written, cut short with SIGSEGV, and the program
/// dies of it as natively.
#[test]
fn a_stack_overflow_in_fast_mode_keeps_the_dump() {
    overflow_case("overflow_fast", "fast");
}

/// [`program_case`] of `selfmod.c` (issue 33: code that changes without an
/// `mprotect` or `munmap`) in both capture modes, under `record --all` and
/// a `--function work` window. The program's output is the truth: each
/// round of calls returns what the code there says now (`200 400
/// 1000`); a stale translation or decode repeated the first round's sum
/// (fast mode printed `2000 2000 2000`, with 2,000 calls a round, in every case before the fix).
fn selfmod_case(case: &str) {
    for (t, trigger) in [
        ("all", &["--all"][..]),
        ("work", &["--function", "work"][..]),
    ] {
        both_modes_case(
            "tests-programs/capture/selfmod.c",
            &|tag| format!("selfmod-{case}-{tag}-{t}"),
            case,
            trigger,
            // 2 (1 in trap mode), from 4: CI time; each case fails in
            // every run without its fix.
            2,
            None,
        );
    }
}

/// Asynchronous `pthread_cancel` of a spinning worker, ten rounds
/// (`tests-programs/capture/cancel.c`), every thread traced: under the
/// trap engine the cancellation arrived inside the engine's handler,
/// whose mask lacked glibc's SIGCANCEL, and the capture's stop waited for
/// ever (2-3 runs in 12). In fast mode the cancellation landed in the
/// dispatcher or translated code, where glibc's handler unwinds from:
/// the unwinder met the dispatcher's Rust frame and the program aborted
/// (134, every run here); its handler is now wrapped as the timers' are
/// (held back out of our code, mapped in a block). Both modes, the output
/// as uncaptured.
#[test]
fn an_asynchronous_pthread_cancel_during_a_capture_ends_the_thread_as_natively() {
    // 8 runs in fast mode, 4 in trap mode.
    both_modes_case(
        "tests-programs/capture/cancel.c",
        &|tag| format!("cancel-{tag}"),
        "async",
        &["--all", "--threads", "all"],
        8,
        None,
    );
}

/// Deferred `pthread_cancel` of a worker blocked in `read`
/// (`cancel.c read`): glibc acts on it only where its handler finds the
/// thread in its system call bridge. In fast mode the read is a system
/// call block's; the signal that interrupts it is mapped to the program's
/// `syscall` (the kernel's restart moves RIP back onto the call's copy).
/// Both modes, the output as uncaptured.
#[test]
fn a_deferred_pthread_cancel_of_a_blocked_read_ends_the_thread_as_natively() {
    both_modes_case(
        "tests-programs/capture/cancel.c",
        &|tag| format!("cancel-read-{tag}"),
        "read",
        &["--all", "--threads", "all"],
        4,
        None,
    );
}

/// The same worker whose blocked `read` outlives the capture (`cancel.c
/// outlive`, `--function window --threads all`): the window wakes it with
/// a byte, its next `read` starts in translated code (fast mode) and still
/// waits there when the window has closed and the program's handlers are
/// its own again; the cancellation then unwinds it through its cleanup
/// handler, as natively. Both modes, the output as uncaptured.
#[test]
fn a_read_that_outlives_the_capture_is_cancelled_through_its_cleanup() {
    both_modes_case(
        "tests-programs/capture/cancel.c",
        &|tag| format!("cancel-outlive-{tag}"),
        "outlive",
        &["--function", "window", "--threads", "all"],
        2,
        None,
    );
}

/// A code file rewritten through a shared writable view whose descriptor
/// was closed before the code was mapped through a read-only one (no
/// writable descriptor left to find: the stale translation ran).
#[test]
fn code_rewritten_through_a_view_whose_descriptor_is_closed_runs_its_new_code() {
    selfmod_case("view");
}

/// `.text` patched through `/proc/self/fd/N`, a read-only descriptor of
/// `/proc/self/mem` reopened for writing through its magic link (not
/// named `mem`: missed before, the stale translation ran).
#[test]
fn code_patched_through_a_reopened_mem_descriptor_runs_its_new_code() {
    selfmod_case("fdlink");
}

/// `.text` patched through `/proc/self/mem` (open + pwrite, no system call
/// between the write and the call).
#[test]
fn code_patched_through_proc_self_mem_runs_its_new_code() {
    selfmod_case("mem");
}

/// The same through `/proc/<pid>/mem`, the descriptor closed and
/// `getppid` made between the write and the call.
#[test]
fn code_patched_through_proc_pid_mem_with_a_syscall_between_runs_its_new_code() {
    selfmod_case("memsys");
}

/// The same through `/proc/thread-self/mem` with `lseek` + `write`.
#[test]
fn code_patched_through_proc_thread_self_mem_runs_its_new_code() {
    selfmod_case("thread");
}

/// The same through `/proc/self/mem` opened by `main` before `work`: under
/// `--function work` the open is outside the window (no thread traced), and
/// the window's start finds the descriptor (fast mode printed `2000 2000
/// 2000` without that).
#[test]
fn code_patched_through_proc_self_mem_opened_before_the_window_runs_its_new_code() {
    selfmod_case("early");
}

/// A code file mapped executable and private, rewritten through a second,
/// `MAP_SHARED` writable mapping of the same file.
#[test]
fn a_code_file_rewritten_through_a_shared_mapping_runs_its_new_code() {
    selfmod_case("shared");
}

/// A code file mapped executable and private, rewritten with `pwrite`, then
/// `lseek` + `write`.
#[test]
fn a_code_file_rewritten_with_pwrite_runs_its_new_code() {
    selfmod_case("pwrite");
}

/// A code file mapped through a read-only descriptor, then opened again for
/// writing and rewritten with `pwrite`, then `lseek` + `write`.
#[test]
fn a_code_file_opened_for_writing_after_it_ran_runs_its_new_code() {
    selfmod_case("reopen");
}

/// What the patched code counts, hand-computed (`selfmod.c mem` and
/// `memsys`, built without PIE so `nm` gives `patch_me`'s address): three
/// rounds of 200 calls, `mov eax, imm; ret` twice then `push 5; pop rax;
/// ret`, are 1,400 instructions, 800 reads (each `ret`, each `pop`) and
/// 200 writes (each `push`) at `patch_me`, in both modes under `record
/// --all`. A stale decode of the old `mov` counts no write (trap mode, with
/// the demotion off, counted 6,000 instead of 8,000 with 2,000 calls a round data accesses on a
/// one-patch variant; its output was right, its counts were not).
#[test]
fn code_patched_through_proc_mem_counts_the_new_codes_accesses() {
    if !gcc_or_skip("code_patched_through_proc_mem_counts_the_new_codes_accesses") {
        return;
    }
    let dir = scratch("selfmod-counts");
    let program = dir.join("selfmod-nopie");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-no-pie", "-o"])
        .arg(&program)
        .arg(repo().join("tests-programs/capture/selfmod.c"))
        .status()
        .expect("run gcc");
    assert!(st.success(), "compiling selfmod.c failed");
    let nm = Command::new("nm").arg(&program).output().expect("run nm");
    let nm = String::from_utf8_lossy(&nm.stdout);
    let at = nm
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            let (a, _, name) = (f.next()?, f.next()?, f.next()?);
            (name == "patch_me").then(|| u64::from_str_radix(a, 16).ok())?
        })
        .expect("patch_me in nm's output");
    for extra in modes() {
        for case in ["mem", "memsys"] {
            let what = format!("selfmod {case} {extra:?}");
            let dump = dir.join(format!("{case}.ccdump"));
            let _ = std::fs::remove_file(&dump);
            let trigger: Vec<&str> = ["--all"].iter().chain(extra.iter()).copied().collect();
            let out = run(
                record(&dir, &dump, &trigger, &program, &[case]),
                &what,
                Poke::Nothing,
                program_of,
            );
            assert_eq!(
                out.stdout,
                format!("{case}: 200 400 1000\n"),
                "{what}\n{}",
                out.stderr
            );
            let d = load(&dump, &what, &out.stderr);
            let mut t = vec![0u64; d.meta.counters.len()];
            for r in d.records.iter().filter(|r| r.ip >= at && r.ip < at + 6) {
                for (a, b) in t.iter_mut().zip(&r.counters) {
                    *a += b;
                }
            }
            let side = |s: &str| -> u64 {
                d.meta
                    .levels
                    .iter()
                    .map(String::as_str)
                    .chain(["mem"])
                    .map(|lv| t[d.counter(&format!("{s}_{lv}")).unwrap()])
                    .sum()
            };
            let ir = t[d.counter("instructions").unwrap()];
            assert_eq!(
                (ir, side("r"), side("w")),
                (1_400, 800, 200),
                "{what}: instructions, reads, writes at patch_me"
            );
            assert!(
                d.meta
                    .notes
                    .iter()
                    .any(|n| n.contains("/proc/<pid>/mem opened for writing 2 time(s)")),
                "{what}: the demotion is not in the notes: {:?}",
                d.meta.notes
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sampling profiler inside the program (`tests-programs/capture/
/// profsig.c`): its SIGPROF handler reads the interrupted RIP and looks it
/// up with `dladdr` while `work` computes, in the default (fast) mode,
/// the handler installed before the capture. SIGPROF comes from a thread
/// of the program every 50 us (`storm`), so that dozens land in
/// translated code whatever the machine's load. Before the timers' handlers
/// were run on the program's context, every one of those saw a code-cache
/// address (no object: 39 and 49 of 76 and 88 here, 0 and 1 in the
/// program); then most landed in the program's text, 2 to 7 still in a
/// block's exit code or the dispatcher; now those are held back to the
/// thread's next program instruction and none sees a code-cache address.
/// The output is the uncaptured run's and the dump's note counts the
/// handler runs that saw the program's context and the signals held back. The instruction count (the handler's own are not traced) is
/// Callgrind's on the run without signals: 20,000,009.
#[test]
fn a_sampling_profilers_sigprof_handler_sees_the_programs_rip() {
    if !gcc_or_skip("a_sampling_profilers_sigprof_handler_sees_the_programs_rip") {
        return;
    }
    if std::env::var("COLDCACHE_MODE").as_deref() == Ok("trap") {
        // Trap mode has no translated code to map (and would single-step
        // 20 million instructions).
        eprintln!("fast mode only: not run again in trap mode");
        return;
    }
    let dir = scratch("profsig");
    let program = build("tests-programs/capture/profsig.c", &dir);
    let args = ["2000000", "storm"];
    let native = Command::new(&program).args(args).output().unwrap();
    assert!(native.status.success());
    let dump = dir.join("profsig.ccdump");
    let out = record(&dir, &dump, &["--function", "work"], &program, &args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(out.stdout, native.stdout, "{err}");
    // "profsig: S samples, N in no object, P in the program, C in coldcache"
    let line = err
        .lines()
        .find(|l| l.starts_with("profsig: "))
        .unwrap_or_else(|| panic!("no profsig line: {err}"));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let (samples, nowhere, own, tool) = (n[0], n[1], n[2], n[3]);
    // No sample sees a code-cache address: those that come in a block's
    // head or exit, the dispatcher or the replay are held back to the next
    // program instruction (before, 2 to 7 of about 80 were in no object,
    // and about half in `libcoldcache.so`'s replay). What remains in the
    // library is the thread writing the dump after the window, natively.
    assert!(own > 0 && nowhere == 0, "{line}");
    assert!(tool < own / 4, "{line}");
    assert!(samples >= nowhere + own + tool, "{line}");
    let d = load(&dump, "profsig", &err);
    assert_eq!(d.meta.instructions, 20_000_009, "{err}");
    let note = d
        .meta
        .notes
        .iter()
        .find(|n| n.contains("program signal handler runs interrupted translated code"))
        .unwrap_or_else(|| panic!("{:?}", d.meta.notes));
    assert!(note.contains("; 0 saw a code-cache"), "{note}");
    assert!(!note.contains("; 0 signals came"), "{note}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The self-pipe pattern (`tests-programs/capture/selfpipe.c`): each
/// round arms a one-shot SIGALRM, computes, then blocks in `read` on a
/// pipe only the handler writes to; the whole program captured in fast
/// mode, so the `read` is a system call block's. A first version of the
/// held-back signals (a signal that came while the dispatcher replayed
/// the buffer before the call was held, so the call blocked with it
/// blocked) hung this program in 5 runs of 5; and every handler run saw a
/// code-cache or coldcache address before the call's copy and the point
/// after it were mapped (99 of 100 here). Now the output is the
/// uncaptured run's and every run saw the program's context.
#[test]
fn a_timer_handler_that_wakes_the_programs_own_wait_runs_before_it() {
    if !gcc_or_skip("a_timer_handler_that_wakes_the_programs_own_wait_runs_before_it") {
        return;
    }
    if std::env::var("COLDCACHE_MODE").as_deref() == Ok("trap") {
        eprintln!("fast mode only: not run again in trap mode");
        return;
    }
    let dir = scratch("selfpipe");
    let program = build("tests-programs/capture/selfpipe.c", &dir);
    let native = Command::new(&program).output().unwrap();
    assert!(native.status.success());
    for run in 0..3 {
        let dump = dir.join(format!("selfpipe.{run}.ccdump"));
        let out = run_within(
            record(&dir, &dump, &["--all"], &program, &[]),
            "selfpipe",
            Duration::from_secs(60),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "run {run}: {err}");
        assert_eq!(out.stdout, native.stdout, "run {run}: {err}");
        let d = load(&dump, "selfpipe", &err);
        let note = d
            .meta
            .notes
            .iter()
            .find(|n| n.contains("program signal handler runs"))
            .unwrap_or_else(|| panic!("run {run}: {:?}", d.meta.notes));
        assert!(note.contains("; 0 saw a code-cache"), "run {run}: {note}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Signal handlers that read and move the interrupted RIP
/// (`tests-programs/capture/faultctx.c`, issue 33), in both capture modes,
/// the handler installed during the capture (`--all`) and before it
/// (`--function work`): a "safe fetch" whose SIGSEGV handler finds RIP in
/// the probe and moves it to the probe's recovery label (1,000 faults; 100
/// in trap mode, `safefetch:300`; the probe's registers checked in the
/// handler), a crash handler printing
/// `dladdr(RIP)` (the object and RIP's offset in it) of faults in the
/// program and in the C library, then `siglongjmp`ing out, and a handler
/// that opens the page and returns with RIP unchanged (4 captured runs
/// and 2 preloaded ones each; trap mode's half). In fast mode the
/// handlers saw code-cache addresses: status 3 ("RIP ... is not the
/// program's", or "no object"). Output and status must be the uncaptured
/// run's. And `faultthrow.cpp`, below.
#[test]
fn fault_handlers_see_the_programs_rip_in_both_modes() {
    for case in ["safefetch", "dladdr", "retry"] {
        for trigger in [&["--all"][..], &["--function", "work"][..]] {
            for extra in modes() {
                // Trap mode single-steps each probe: 300 of them (3,000
                // took 2.2 s a run, 16 s of the test).
                let arg = match (case, extra.is_empty()) {
                    ("safefetch", false) => "safefetch:300",
                    _ => case,
                };
                cases_in_modes(
                    vec![extra],
                    "tests-programs/capture/faultctx.c",
                    &|tag| format!("faultctx_{case}_{tag}_{}", trigger.len()),
                    arg,
                    trigger,
                    4,
                    // After its `siglongjmp` the thread runs untraced (in
                    // both modes): the window's end is not seen.
                    (case == "dladdr").then_some("the program exited"),
                );
            }
        }
    }
    // SIGBUS sent by another thread every 20 us while the traced one
    // computes: asynchronous, anywhere in a block (the handler counts
    // them). In the default mode only: trap mode single-steps 442,348
    // instructions per run; fast.rs compares one run of each mode. (Not
    // under `COLDCACHE_MODE=trap`, as the both-mode cases.)
    if modes().iter().any(|e| e.is_empty()) {
        program_case(
            "tests-programs/capture/faultctx.c",
            "faultctx_storm",
            "storm",
            &["--function", "work"],
            Poke::Nothing,
            10,
            None,
        );
    }
    // A C++ exception thrown from the SIGSEGV handler (which reads RIP
    // with dladdr first) through the signal frame into the faulting
    // function (`-fnon-call-exceptions`): in fast mode the unwinder
    // would find no frame at a code-cache RIP (abort). Caught, the
    // thread runs on untraced, in both modes.
    for trigger in [&["--all"][..], &["--function", "work"][..]] {
        both_modes_case(
            "tests-programs/capture/faultthrow.cpp",
            &|tag| format!("faultthrow_{tag}_{}", trigger.len()),
            "run",
            trigger,
            4,
            Some("the program exited"),
        );
    }
}
