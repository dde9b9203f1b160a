//! `coldcache attach PID` (issue 20) on programs started normally, with
//! nothing preloaded: the capture of one call equals `record`'s of the
//! same call; the program's output is the same as without the attach; a
//! thread stopped in `nanosleep`, `read` or `futex` keeps the call's
//! meaning; eight threads attached to twenty times in a row neither hang
//! nor change their output; a C++ program with threads built without
//! frame pointers counts and unwinds as under `record`; a program started
//! under `record` keeps its one library; Ctrl-C and `coldcache trigger` end
//! a capture with its dump; an attach right after another, while the
//! last capture's finish is still marking it over, waits for it; a
//! process that calls `execve` while its
//! capture is armed ends `attach` with that reason; each refusal names its cause (a 32-bit
//! program is skipped where gcc -m32 cannot build one). Programs:
//! `tests-programs/attach/*.c`, built by gcc (skipped with a message when
//! missing). Needs ptrace: skipped with the reason when this machine
//! forbids it.

#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use dumps::{load, text};
use library::{library, COLDCACHE};
use programs::{compile, gcc_or_skip, run_with_deadline, scratch_in, wait_with_deadline};

use coldcache_dump::{Dump, Side};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

fn scratch(name: &str) -> PathBuf {
    scratch_in("attach", name)
}

/// Whether gcc is there and ptrace may be used on our own children; says
/// which test is skipped, and why, when not.
fn can_attach(test: &str) -> bool {
    if !gcc_or_skip(test) {
        return false;
    }
    let mut child = Command::new("sleep").arg("5").spawn().unwrap();
    let pid = child.id() as i32;
    // SAFETY: seizing and detaching our own child; no memory is passed.
    let ok = unsafe {
        let r = libc::ptrace(libc::PTRACE_SEIZE, pid, 0usize, 0usize);
        if r == 0 {
            libc::ptrace(libc::PTRACE_DETACH, pid, 0usize, 0usize);
        }
        r == 0
    };
    let why = std::io::Error::last_os_error();
    let _ = child.kill();
    let _ = child.wait();
    if !ok {
        eprintln!("SKIP {test}: this machine forbids ptrace ({why})");
    }
    ok
}

fn build(source: &str, dir: &Path, flags: &[&str]) -> PathBuf {
    let out = dir.join(Path::new(source).file_stem().unwrap());
    compile(source, &out, flags, false)
}

/// A program started with its stdout piped, once it printed `ready`; the
/// rest of its output is collected by a thread.
struct Running {
    child: Child,
    rest: std::thread::JoinHandle<Vec<u8>>,
    first: String,
}

/// Frames enough (2 ms each, a minute in all) that a program started to be
/// refused is still running when the refusal comes, however loaded the
/// machine (300 frames, 0.6 s, ended first once under CI).
const LONG: &str = "30000";

fn start(program: &Path, args: &[&str], stdin: Stdio) -> Running {
    start_with(program, args, stdin, &[])
}

/// [`start`] with these environment variables added.
fn start_with(program: &Path, args: &[&str], stdin: Stdio, env: &[(&str, &str)]) -> Running {
    // The library is built before the program starts, not by the first
    // `attach`: a build of a minute (the first test after a change) outlived
    // programs that run for seconds, and the attach found them gone.
    library();
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(first, "ready\n", "{}", program.display());
    let rest = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    Running { child, rest, first }
}

impl Running {
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Ends a program started only to be refused: it runs long enough
    /// (`LONG` frames) that a loaded machine cannot let it end before the
    /// refusal, so it is killed here.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = self.rest.join();
    }

    /// Waits (under a deadline) and returns the whole stdout, stderr, status.
    fn finish(mut self, what: &str) -> (String, String, std::process::ExitStatus) {
        let err = self.child.stderr.take();
        let out = wait_with_deadline(self.child, what);
        let mut stderr = out.stderr;
        if let Some(mut e) = err {
            let _ = e.read_to_end(&mut stderr);
        }
        let rest = self.rest.join().unwrap();
        (
            format!("{}{}", self.first, text(&rest)),
            text(&stderr),
            out.status,
        )
    }
}

fn attach(dir: &Path, pid: i32, args: &[&str]) -> Command {
    let mut cmd = Command::new(COLDCACHE);
    cmd.current_dir(dir)
        .env("COLDCACHE_LIB", library())
        .args(["attach", &pid.to_string(), "--no-resolve"])
        .args(args);
    cmd
}

/// Per side (instruction fetches, data reads, data writes), the accesses
/// served by each level and by memory.
fn served(d: &Dump) -> Vec<(Side, Vec<u64>)> {
    let l = d.layout().unwrap();
    let t = d.totals();
    Side::ALL
        .into_iter()
        .map(|s| {
            (
                s,
                (0..=d.meta.levels.len())
                    .map(|k| t[l.served(s, k)])
                    .collect(),
            )
        })
        .collect()
}

/// The counts of one call of `frame` captured by attaching equal those of
/// `record --function frame --calls 1` (every call does the same work):
/// instructions, and with Cachegrind's geometry (cold caches in both) the
/// level serving every access. The program's output over the whole run is
/// byte for byte that of a run with no attach. Both ran in fast mode, the
/// default of both commands (`attach` defaulted to trap mode while a
/// fast-mode hang was open, issue 36).
#[test]
fn one_call_captured_by_attach_counts_as_under_record_and_the_output_is_unchanged() {
    let test = "one_call_captured_by_attach_counts_as_under_record_and_the_output_is_unchanged";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("frames");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    let alone = run_with_deadline(
        {
            let mut c = Command::new(&program);
            c.arg("800");
            c
        },
        "frames alone",
    );
    assert!(alone.status.success());

    let run = start(&program, &["800"], Stdio::null());
    let out = run_with_deadline(
        attach(
            &dir,
            run.pid(),
            &[
                "--function",
                "frame",
                "--calls",
                "1",
                "--cache",
                "cachegrind",
                "--line-use",
                "-o",
                "a.ccdump",
            ],
        ),
        "attach",
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("loaded"), "{err}");
    let (stdout, stderr, status) = run.finish("frames attached");
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, text(&alone.stdout), "the output changed");
    assert_eq!(stderr, text(&alone.stderr), "the program's stderr changed");

    let rec = run_with_deadline(
        {
            let mut c = Command::new(COLDCACHE);
            c.current_dir(&dir)
                .env("COLDCACHE_LIB", library())
                .args(["record", "--no-resolve", "--cache", "cachegrind"])
                .args([
                    "--line-use",
                    "--function",
                    "frame",
                    "--calls",
                    "1",
                    "-o",
                    "r.ccdump",
                    "--",
                ])
                .arg(&program)
                .arg("800");
            c
        },
        "record",
    );
    assert!(rec.status.success(), "{}", text(&rec.stderr));
    let (a, r) = (load(&dir.join("a.ccdump")), load(&dir.join("r.ccdump")));
    assert!(a.meta.instructions > 1000, "{}", a.meta.instructions);
    assert_eq!(a.meta.instructions, r.meta.instructions);
    assert_eq!(a.meta.trigger, "function:frame");
    assert_eq!(served(&a), served(&r));
    // `attach --line-use` measures line utilisation as `record` does.
    for name in ["l1d_lines_fetched", "l1d_bytes_used"] {
        let col = |d: &Dump| d.counter(name).map(|c| d.totals()[c]);
        assert!(col(&a).is_some_and(|n| n > 0), "attach: {name}");
        assert_eq!(col(&a), col(&r), "{name}");
    }
    // The library loaded by `dlopen` runs fast mode as a preloaded one
    // does (its translator state is in static TLS either way), by default
    // in both.
    for (what, d) in [("attach", &a), ("record", &r)] {
        assert_eq!(d.meta.mode.engine, "fast", "{what}: {:?}", d.meta.mode);
    }
}

/// A process whose arguments hold line breaks (a `python3 -c` script of
/// several lines, the commonest way to run a short Python program) is
/// attached to: `attach` refused it ("a value with a line break cannot be
/// handed to the process"), its settings being sent as lines. The dump
/// names the arguments as they are.
#[test]
fn a_process_whose_arguments_hold_line_breaks_is_attached_to() {
    let test = "a_process_whose_arguments_hold_line_breaks_is_attached_to";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("argv_lines");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    let script = "import json\nprint(json.dumps([1, 2]))\r\n\\n stays";
    let run = start(&program, &["800", script], Stdio::null());
    let out = run_with_deadline(
        attach(
            &dir,
            run.pid(),
            &["--function", "frame", "--calls", "1", "-o", "l.ccdump"],
        ),
        "attach",
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let (_, stderr, status) = run.finish("frames attached");
    assert!(status.success(), "{stderr}");
    let d = load(&dir.join("l.ccdump"));
    assert!(d.meta.instructions > 1000, "{}", d.meta.instructions);
    assert_eq!(
        d.meta.program.last().map(String::as_str),
        Some(script),
        "{:?}",
        d.meta.program
    );
}

/// The system call the main thread is in, from `/proc/PID/syscall`.
fn syscall_of(pid: i32) -> Option<i64> {
    std::fs::read_to_string(format!("/proc/{pid}/syscall"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The main thread is inside `nanosleep` (clock_nanosleep), `read` on an
/// empty pipe or `FUTEX_WAIT` when the library is loaded on it: the call
/// is restarted as the kernel restarts it after any stop, so the sleep
/// lasts its whole 1.5 s, the read returns the bytes written 1.2 s later
/// and the wait returns 0 when woken (each would fail with EINTR, or end
/// early, if the restart were lost).
#[test]
fn a_thread_in_nanosleep_read_or_futex_keeps_the_call_meaning() {
    let test = "a_thread_in_nanosleep_read_or_futex_keeps_the_call_meaning";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("syscalls");
    let program = build(
        "tests-programs/attach/syscalls.c",
        &dir,
        &["-O1", "-g", "-pthread"],
    );
    for (mode, calls, says) in [
        (
            "sleep",
            &[libc::SYS_clock_nanosleep, libc::SYS_nanosleep][..],
            "slept the whole 1.5 s: yes",
        ),
        ("read", &[libc::SYS_read][..], "read returned 5: hello"),
        (
            "futex",
            &[libc::SYS_futex][..],
            "futex wait returned 0 (ok), word 1",
        ),
    ] {
        let run = start(&program, &[mode], Stdio::null());
        let pid = run.pid();
        let mut inside = None;
        for _ in 0..100 {
            inside = syscall_of(pid).filter(|n| calls.contains(n));
            if inside.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            inside.is_some(),
            "{mode}: the main thread never entered the call"
        );
        let out = run_with_deadline(
            attach(
                &dir,
                pid,
                &[
                    "--function",
                    "marker",
                    "--calls",
                    "1",
                    "-o",
                    &format!("{mode}.ccdump"),
                ],
            ),
            mode,
        );
        assert!(out.status.success(), "{mode}: {}", text(&out.stderr));
        let (stdout, stderr, status) = run.finish(mode);
        assert!(stdout.contains(says), "{mode}: {stdout}{stderr}");
        assert!(status.success(), "{mode}: {stdout}{stderr}");
        assert!(load(&dir.join(format!("{mode}.ccdump"))).meta.instructions > 100);
    }
}

/// Eight threads passing a token under a mutex and a condition variable,
/// attached to twenty times in a row (`COLDCACHE_ATTACH_ROUNDS` sets
/// how many; each a capture of one call of
/// `step`, the library loaded by the first and reused by the others):
/// no hang, every capture the same size, and the same output as a run
/// without attaching.
#[test]
fn eight_threads_attached_twenty_times_never_hang_nor_change_their_output() {
    let test = "eight_threads_attached_twenty_times_never_hang_nor_change_their_output";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("threads");
    let program = build(
        "tests-programs/attach/threads.c",
        &dir,
        &["-O1", "-g", "-pthread"],
    );
    let alone = run_with_deadline(Command::new(&program), "threads alone");
    assert!(alone.status.success());
    let mut run = start(&program, &[], Stdio::piped());
    let stdin = run.child.stdin.take().unwrap();
    let mut sizes = Vec::new();
    // The issue's hundred: `COLDCACHE_ATTACH_ROUNDS=100` (35 s here).
    let rounds: usize = std::env::var("COLDCACHE_ATTACH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    for i in 0..rounds {
        let out = run_with_deadline(
            attach(
                &dir,
                run.pid(),
                &["--function", "step", "--calls", "1", "-o", "t.ccdump"],
            ),
            "attach",
        );
        let err = text(&out.stderr);
        assert!(out.status.success(), "attach {i}: {err}");
        assert!(
            err.contains(if i == 0 {
                ": loaded"
            } else {
                "reusing the loaded"
            }),
            "attach {i}: {err}"
        );
        sizes.push(load(&dir.join("t.ccdump")).meta.instructions);
    }
    drop(stdin);
    let (stdout, stderr, status) = run.finish("threads attached");
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, text(&alone.stdout));
    assert!(
        sizes.iter().all(|&s| s == sizes[0] && s > 1000),
        "{sizes:?}"
    );
}

/// `attach --function work --threads all` on a process whose four
/// threads call `work` in a loop (`tests-programs/attach/busy.c`): the
/// window opens at once, while attach's remote calls still run on the main
/// thread. That thread was signalled and traced there: "the remote call of
/// munmap crashed" and the process hung (3 of 5 runs, trap mode; 0 of 10
/// since). Then in fast mode: a worker leaving translated code as a
/// window closed unblocked signals inside the C library's `syscall`, the
/// next window's sync signal started it there, and it was handed over
/// and looped in the dispatcher for ever (7 of 10 attaches with `--calls
/// 3`; 0 of 50 since). Three attaches of each mode in a row succeed, each
/// capture holds the workers, and the program ends as alone when its
/// stdin closes.
#[test]
fn a_busy_process_is_attached_to_with_threads_all() {
    let test = "a_busy_process_is_attached_to_with_threads_all";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("busy");
    let program = build(
        "tests-programs/attach/busy.c",
        &dir,
        &["-O1", "-g", "-pthread"],
    );
    let mut run = start(&program, &[], Stdio::piped());
    let stdin = run.child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..6 {
        let mode = if i < 3 { "fast" } else { "trap" };
        let out = run_with_deadline(
            attach(
                &dir,
                run.pid(),
                &[
                    "--mode",
                    mode,
                    "--function",
                    "work",
                    "--calls",
                    "3",
                    "--threads",
                    "all",
                    "-o",
                    "b.ccdump",
                ],
            ),
            "attach",
        );
        let err = text(&out.stderr);
        assert!(out.status.success(), "attach {i}: {err}");
        let d = load(&dir.join("b.ccdump"));
        assert!(d.meta.instructions > 1000, "attach {i}: {err}");
        assert!(d.threads.len() >= 2, "attach {i}: {:?}", d.threads);
        // The program's threads only: no thread of ours.
        assert!(
            d.threads.iter().all(|t| t.name == "busy"),
            "attach {i}: {:?}",
            d.threads
        );
    }
    drop(stdin);
    let (stdout, stderr, status) = run.finish("busy");
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, "ready\ndone\n");
}

/// `attach` stops the main thread of `tests-programs/attach/rseqspin.c`
/// almost always inside an rseq critical section (a load, a spin, the
/// committing store), runs its remote calls there while a worker pinned to
/// the same CPU adds to the same per-CPU counter, and puts the registers
/// back. Resumed inside the section, whose descriptor the kernel dropped
/// during the remote calls, the thread committed a stale value: 12,000-
/// 14,000 of about 88,000 increments lost in 4 of 4 runs of five attaches.
/// The stopped thread is now moved to the section's abort address, as the
/// kernel moves a preempted one: the counter equals the increments made.
#[test]
fn a_thread_stopped_inside_an_rseq_section_is_aborted_as_the_kernel_would() {
    let test = "a_thread_stopped_inside_an_rseq_section_is_aborted_as_the_kernel_would";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("rseqspin");
    let program = build(
        "tests-programs/attach/rseqspin.c",
        &dir,
        &["-O1", "-g", "-pthread"],
    );
    let mut run = start(&program, &[], Stdio::piped());
    let stdin = run.child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..5 {
        let out = run_with_deadline(
            attach(
                &dir,
                run.pid(),
                &["--function", "note", "--calls", "3", "-o", "r.ccdump"],
            ),
            "attach",
        );
        assert!(out.status.success(), "attach {i}: {}", text(&out.stderr));
    }
    drop(stdin);
    let (stdout, stderr, status) = run.finish("rseqspin");
    assert!(status.success(), "{stderr}");
    if stdout.contains("rseq not registered") {
        eprintln!("SKIP {test}: glibc registered no rseq area here");
        return;
    }
    let total = stdout.lines().nth(1).unwrap_or_default();
    eprintln!("rseqspin after five attaches: {total}");
    let mut words = total.split(' ');
    let (counter, made) = (words.nth(1), words.nth(1));
    assert!(made.is_some_and(|m| m != "0"), "{stdout}");
    assert_eq!(counter, made, "{stdout}");
}

/// Ctrl-C on an `attach` capturing from now on (no trigger): the capture
/// stops, its dump is written (cut short), `attach` succeeds, and the
/// program goes on to print what it prints alone.
#[test]
fn ctrl_c_on_attach_ends_the_capture_and_keeps_the_dump() {
    let test = "ctrl_c_on_attach_ends_the_capture_and_keeps_the_dump";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("ctrlc");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    let alone = run_with_deadline(
        {
            let mut c = Command::new(&program);
            c.arg("1500");
            c
        },
        "frames alone",
    );
    let run = start(&program, &["1500"], Stdio::null());
    let mut cmd = attach(&dir, run.pid(), &["-o", "c.ccdump"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = wait_with_deadline(child, "attach");
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let d = load(&dir.join("c.ccdump"));
    assert!(d.meta.instructions > 0, "{err}");
    assert_eq!(d.meta.cut_short.as_deref(), Some("interrupted"), "{err}");
    let (stdout, _, status) = run.finish("frames");
    assert!(status.success());
    assert_eq!(stdout, text(&alone.stdout));
}

/// `coldcache trigger PID` on a process `attach` captures: the window
/// closes and the dump is written; `attach` then exits.
#[test]
fn trigger_ends_a_capture_made_by_attach() {
    let test = "trigger_ends_a_capture_made_by_attach";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("trigger");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    let run = start(&program, &["1500"], Stdio::null());
    let mut cmd = attach(&dir, run.pid(), &["-o", "t.ccdump"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let trig = Command::new(COLDCACHE)
        .args(["trigger", &run.pid().to_string()])
        .output()
        .unwrap();
    assert!(trig.status.success(), "{}", text(&trig.stderr));
    let out = wait_with_deadline(child, "attach");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(load(&dir.join("t.ccdump")).meta.instructions > 0);
    let (_, _, status) = run.finish("frames");
    assert!(status.success());
}

/// The refusal of `attach` to `pid`: it fails, saying all of `says`.
fn refused(dir: &Path, pid: i32, says: &[&str], what: &str) {
    let out: Output = run_with_deadline(attach(dir, pid, &["--function", "frame"]), what);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{what}: accepted\n{err}");
    for s in says {
        assert!(err.contains(s), "{what}: no {s:?} in {err}");
    }
}

#[test]
fn a_process_that_does_not_exist_is_refused() {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id() as i32;
    c.wait().unwrap();
    let dir = scratch("nosuch");
    refused(
        &dir,
        pid,
        &[&format!("there is no process {pid}")],
        "no such process",
    );
}

#[test]
fn a_static_program_is_refused_with_the_fix() {
    let test = "a_static_program_is_refused_with_the_fix";
    if !gcc_or_skip(test) {
        return;
    }
    let dir = scratch("static");
    let out = dir.join("frames-static");
    let built = Command::new("gcc")
        .args(["-O1", "-static", "-o"])
        .arg(&out)
        .arg(library::repo().join("tests-programs/attach/frames.c"))
        .status()
        .unwrap();
    if !built.success() {
        eprintln!("SKIP {test}: gcc -static fails here (no static C library)");
        return;
    }
    let run = start(&out, &[LONG], Stdio::null());
    refused(
        &dir,
        run.pid(),
        &["is statically linked", "-lcoldcache"],
        "static",
    );
    run.kill();
}

#[test]
fn a_32_bit_program_is_refused() {
    let test = "a_32_bit_program_is_refused";
    if !gcc_or_skip(test) {
        return;
    }
    let dir = scratch("m32");
    let out = dir.join("frames32");
    let built = Command::new("gcc")
        .args(["-O1", "-m32", "-o"])
        .arg(&out)
        .arg(library::repo().join("tests-programs/attach/frames.c"))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    if !built.success() {
        eprintln!("SKIP {test}: gcc -m32 fails here (no 32-bit C library installed)");
        return;
    }
    let run = start(&out, &[LONG], Stdio::null());
    refused(&dir, run.pid(), &["is a 32-bit program"], "32-bit");
    run.kill();
}

/// A process another tracer holds (here the test itself, as a debugger
/// would) is refused, naming the tracer.
#[test]
fn a_process_already_traced_is_refused_naming_the_tracer() {
    let test = "a_process_already_traced_is_refused_naming_the_tracer";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("traced");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    let run = start(&program, &["600"], Stdio::null());
    let pid = run.pid();
    // SAFETY: seizing our own child (it keeps running); no memory passed.
    let seized = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0usize, 0usize) };
    assert_eq!(seized, 0);
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    refused(
        &dir,
        pid,
        &[
            &format!("already traced by process {me}"),
            "detach it first",
        ],
        "traced",
    );
    // SAFETY: detaching needs the tracee stopped: interrupt, wait, detach.
    unsafe {
        libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0usize, 0usize);
        let mut st = 0;
        libc::waitpid(pid, &mut st, libc::__WALL);
        libc::ptrace(libc::PTRACE_DETACH, pid, 0usize, 0usize);
    }
    let (_, _, status) = run.finish("traced");
    assert!(status.success());
}

/// Another user may not attach to root's process: the refusal names the
/// owner and the fix (run as root; `ptrace_scope` when Yama is there).
#[test]
fn attaching_to_another_users_process_names_the_cause() {
    let test = "attaching_to_another_users_process_names_the_cause";
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 || !library::have("setpriv") {
        eprintln!("SKIP {test}: needs root and setpriv to act as another user");
        return;
    }
    if !can_attach(test) {
        return;
    }
    let dir = scratch("other-user");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    let run = start(&program, &[LONG], Stdio::null());
    let out = run_with_deadline(
        {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                COLDCACHE,
            ])
            .args(["attach", &run.pid().to_string(), "-o", "/tmp/x.ccdump"])
            .env("COLDCACHE_LIB", library());
            c
        },
        "attach as nobody",
    );
    let err = text(&out.stderr);
    if err.contains("Permission denied") && err.contains("setpriv") {
        eprintln!("SKIP {test}: user 65534 cannot run {COLDCACHE}");
        run.kill();
        return;
    }
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("permission denied"), "{err}");
    assert!(
        err.contains("belongs to user 0 and you are user 65534"),
        "{err}"
    );
    run.kill();
}

/// A process that installed a seccomp filter of its own is refused (the
/// filter could kill it for a system call the loading makes).
#[test]
fn a_process_with_its_own_seccomp_filter_is_refused() {
    let test = "a_process_with_its_own_seccomp_filter_is_refused";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("seccomp");
    let program = build(
        "tests-programs/attach/syscalls.c",
        &dir,
        &["-O1", "-g", "-pthread"],
    );
    let run = start(&program, &["seccomp"], Stdio::null());
    refused(
        &dir,
        run.pid(),
        &["installed a seccomp filter of its own", "coldcache record"],
        "seccomp",
    );
    let (_, _, status) = run.finish("seccomp");
    assert!(status.success());
}

/// The deepest stack of a dump (frames from the root).
fn max_depth(d: &Dump) -> usize {
    (0..d.stacks.len())
        .map(|mut i| {
            let mut n = 0;
            while i != 0 && n < 1000 {
                i = d.stacks[i].parent as usize;
                n += 1;
            }
            n
        })
        .max()
        .unwrap_or(0)
}

/// A C++ program whose four std::threads call `sim::Sim::frame` through
/// two functions of their own, built without frame pointers: one call
/// captured by attaching counts the instructions `record` counts, its
/// stacks are as deep (unwound from the CFI at the capture's start), and
/// the program prints what it prints alone.
#[test]
fn a_cpp_program_with_threads_and_no_frame_pointers_attaches_as_it_records() {
    let test = "a_cpp_program_with_threads_and_no_frame_pointers_attaches_as_it_records";
    if !can_attach(test) || !library::have("g++") {
        eprintln!("SKIP {test}: needs ptrace and g++");
        return;
    }
    // Long enough (about 2 ms a frame) that the program is still running
    // when an attach on a loaded machine arms: with 400 it sometimes ended
    // first.
    const FRAMES: &str = "2000";
    let dir = scratch("cpp");
    let program = build(
        "tests-programs/attach/worker.cpp",
        &dir,
        &["-O2", "-g", "-fomit-frame-pointer", "-pthread"],
    );
    let sorted = |s: &str| {
        let mut v: Vec<&str> = s.lines().collect();
        v.sort_unstable();
        v.join("\n")
    };
    let alone = run_with_deadline(
        {
            let mut c = Command::new(&program);
            c.arg(FRAMES);
            c
        },
        "worker alone",
    );
    let run = start(&program, &[FRAMES], Stdio::null());
    std::thread::sleep(Duration::from_millis(100));
    let out = run_with_deadline(
        attach(
            &dir,
            run.pid(),
            &[
                "--function",
                "sim::Sim::frame",
                "--calls",
                "1",
                "-o",
                "a.ccdump",
            ],
        ),
        "attach",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (stdout, stderr, status) = run.finish("worker attached");
    assert!(status.success(), "{stderr}");
    assert_eq!(sorted(&stdout), sorted(&text(&alone.stdout)));
    let rec = run_with_deadline(
        {
            let mut c = Command::new(COLDCACHE);
            c.current_dir(&dir)
                .env("COLDCACHE_LIB", library())
                .args(["record", "--no-resolve", "--function", "sim::Sim::frame"])
                .args(["--calls", "1", "-o", "r.ccdump", "--"])
                .arg(&program)
                .arg("400");
            c
        },
        "record",
    );
    assert!(rec.status.success(), "{}", text(&rec.stderr));
    let (a, r) = (load(&dir.join("a.ccdump")), load(&dir.join("r.ccdump")));
    assert_eq!(a.meta.instructions, r.meta.instructions);
    let (da, dr) = (max_depth(&a), max_depth(&r));
    assert!(dr >= 4, "record's stacks: {dr} deep");
    assert_eq!(da, dr, "attach's stacks {da} deep, record's {dr}");
}

/// The program `record` (`rec`) runs, once its maps name `mapped` (the
/// library loaded): record's child, found by its parent. Fails after 2 s.
fn program_under_record(rec: &Child, mapped: &str) -> i32 {
    for _ in 0..200 {
        let pid = child_of(rec.id() as i32).filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/maps")).is_ok_and(|m| m.contains(mapped))
        });
        if let Some(pid) = pid {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no program under record with {mapped} mapped");
}

/// `attach` to `pid` capturing one call of `frame` into `dir/a.ccdump`,
/// which must succeed; its standard error.
fn attach_one_frame(dir: &Path, pid: i32) -> String {
    let out = run_with_deadline(
        attach(
            dir,
            pid,
            &["--function", "frame", "--calls", "1", "-o", "a.ccdump"],
        ),
        "attach",
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    err
}

/// A child of `parent` (from `/proc/*/stat`).
fn child_of(parent: i32) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let ppid: i32 = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        (ppid == parent).then_some(pid)
    })
}

/// A program started under `record --signal` already has the library:
/// `attach` reuses it (no second copy is loaded) and captures.
#[test]
fn a_program_started_under_record_is_attached_with_its_library() {
    let test = "a_program_started_under_record_is_attached_with_its_library";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("under-record");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    let mut rec = Command::new(COLDCACHE);
    rec.current_dir(&dir)
        .env("COLDCACHE_LIB", library())
        .args(["record", "--no-resolve", "--signal", "-o", "r.ccdump", "--"])
        .arg(&program)
        .arg("1000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let rec = rec.spawn().unwrap();
    let pid = program_under_record(&rec, "libcoldcache");
    let err = attach_one_frame(&dir, pid);
    assert!(err.contains("reusing the loaded"), "{err}");
    assert!(load(&dir.join("a.ccdump")).meta.instructions > 1000);
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let copies: std::collections::BTreeSet<&str> = maps
        .lines()
        .filter(|l| l.contains("libcoldcache"))
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    assert!(copies.len() <= 1, "{copies:?}");
    let _ = wait_with_deadline(rec, "record");
}

/// A program that links its own copy of the library, started under
/// `record --signal` (which preloads another), then attached: the capture
/// is armed in the preloaded copy, the one the program's calls of what the
/// library interposes reach. `attach` takes that copy from the process's
/// `LD_PRELOAD`; this program hides it (overwritten in place, as
/// `/proc/PID/environ` shows it), so `attach` calls the copy mapped
/// lowest, its linked one, which hands the call over. (Arming the linked
/// copy killed the program with SIGSEGV.)
#[test]
fn a_program_with_two_copies_of_the_library_is_attached_through_the_first() {
    let test = "a_program_with_two_copies_of_the_library_is_attached_through_the_first";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("two-copies");
    let lib_dir = dir.join("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::fs::copy(library(), lib_dir.join("libcoldcache.so")).unwrap();
    let src = dir.join("hides.c");
    std::fs::write(
        &src,
        r#"#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static void on_usr2(int s) { (void)s; }
__attribute__((noinline)) long frame(int f) {
    long s = 0;
    for (int i = 0; i < 1000; i++) s += (i * 7 + f) & 15;
    signal(SIGUSR2, on_usr2);
    return s;
}
/* Overwrites `LD_PRELOAD=` in the environment block the process started
 * with (what /proc/PID/environ shows): fields 50 and 51 of its stat. */
static void hide_preload(void) {
    char buf[4096];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    char *q = strrchr(buf, ')');
    unsigned long start = 0, end = 0;
    for (int field = 2; q && *q; q++) {
        if (*q != ' ') continue;
        field++;
        if (field == 50) start = strtoul(q + 1, NULL, 10);
        if (field == 51) end = strtoul(q + 1, NULL, 10);
    }
    for (char *e = (char *)start; e && e < (char *)end; e += strlen(e) + 1)
        if (strncmp(e, "LD_PRELOAD=", 11) == 0) memset(e, 'x', strlen(e));
}
int main(int argc, char **argv) {
    if (argc > 2) hide_preload();
    printf("ready\n");
    fflush(stdout);
    /* Frames until the test makes the file `stop` (or argv[1] of them). */
    int frames = atoi(argv[1]);
    long check = 0;
    struct timespec pause = {0, 2000000};
    for (int f = 0; f < frames && access("stop", F_OK) != 0; f++) {
        check += frame(f);
        nanosleep(&pause, NULL);
    }
    printf("done %ld\n", check);
    return 0;
}
"#,
    )
    .unwrap();
    let program = dir.join("hides");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-o"])
        .arg(&program)
        .arg(&src)
        .arg("-L")
        .arg(&lib_dir)
        .args(["-Wl,--no-as-needed", "-lcoldcache"])
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .status()
        .unwrap();
    assert!(st.success());
    let linked = lib_dir.join("libcoldcache.so").display().to_string();
    let preloaded = library().display().to_string();
    // Run as it starts, then with `LD_PRELOAD` hidden: `attach` calls the
    // preloaded copy, then the linked one, which hands the call over.
    for (hide, called) in [(false, &preloaded), (true, &linked)] {
        let _ = std::fs::remove_file(dir.join("stop"));
        let mut rec = Command::new(COLDCACHE);
        rec.current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            // cargo's test runner puts the build's library directory there,
            // ahead of the program's run path: the loader would then find the
            // preloaded file again, not the copy.
            .env_remove("LD_LIBRARY_PATH")
            // The copy `attach` calls is read from `LD_PRELOAD`: only
            // ours there, as `record` alone sets it.
            .env_remove("LD_PRELOAD")
            .args(["record", "--no-resolve", "--signal", "-o", "r.ccdump", "--"])
            .arg(&program)
            .arg("30000")
            .args(hide.then_some("hide"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut rec = rec.spawn().unwrap();
        // The program's output: its first line once `LD_PRELOAD` is hidden.
        let mut printed = std::io::BufReader::new(rec.stdout.take().unwrap());
        let mut first = String::new();
        std::io::BufRead::read_line(&mut printed, &mut first).unwrap();
        assert_eq!(first, "ready\n");
        let pid = program_under_record(&rec, &linked);
        // The copy mapped lowest, the one `attach` falls back to without
        // `LD_PRELOAD`, is the linked one (else the hidden run would not
        // reach the hand-over).
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        let lowest = maps
            .lines()
            .find(|l| l.contains("libcoldcache"))
            .and_then(|l| l.split_whitespace().nth(5))
            .unwrap_or_default()
            .to_string();
        assert_eq!(
            lowest, linked,
            "the linked copy is not mapped lowest:\n{maps}"
        );
        let err = attach_one_frame(&dir, pid);
        assert!(
            err.contains(&format!("reusing the loaded {called}")),
            "{err}"
        );
        let d = load(&dir.join("a.ccdump"));
        std::fs::remove_file(dir.join("a.ccdump")).unwrap();
        std::fs::write(dir.join("stop"), "").unwrap();
        assert!(d.meta.instructions > 1000, "{}", d.meta.instructions);
        let done = wait_with_deadline(rec, "record");
        let said = text(&done.stderr);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut printed, &mut rest).unwrap();
        assert!(!said.contains("killed"), "{said}");
        assert!(rest.starts_with("done "), "{rest}\n{said}");
    }
}

/// A process that ends while the library is being loaded (here: a
/// library whose constructor exits, given as `COLDCACHE_LIB`) is reported
/// as such, with no other error.
#[test]
fn a_process_that_exits_during_the_attach_is_reported() {
    let test = "a_process_that_exits_during_the_attach_is_reported";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("exits");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    let src = dir.join("exits.c");
    std::fs::write(
        &src,
        "#include <unistd.h>\n__attribute__((constructor)) static void bye(void) { _exit(7); }\n",
    )
    .unwrap();
    let lib = dir.join("libcoldcache.so");
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .unwrap();
    assert!(built.success());
    let run = start(&program, &["1000"], Stdio::null());
    let pid = run.pid();
    let out = run_with_deadline(
        {
            let mut c = attach(&dir, pid, &["--function", "frame", "-o", "x.ccdump"]);
            c.env("COLDCACHE_LIB", &lib);
            c
        },
        "attach",
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("process {pid} exited during the attach")),
        "{err}"
    );
    let (_, _, status) = run.finish("frames");
    assert_eq!(status.code(), Some(7));
}

/// A stopped process (SIGSTOP, Ctrl-Z) is refused with the fix: resuming
/// it to load the library would change what it does.
#[test]
fn a_stopped_process_is_refused_with_the_fix() {
    let test = "a_stopped_process_is_refused_with_the_fix";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("stopped");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    let run = start(&program, &["300"], Stdio::null());
    let pid = run.pid();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    for _ in 0..100 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        if stat
            .rsplit_once(')')
            .unwrap()
            .1
            .trim_start()
            .starts_with('T')
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    refused(
        &dir,
        pid,
        &["is stopped", &format!("kill -CONT {pid}")],
        "stopped",
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let (_, _, status) = run.finish("stopped");
    assert!(status.success());
}

/// A process that calls `execve` while its capture is armed loses the
/// library and the capture with its old image: `attach` says so and ends
/// (it used to wait for a dump nothing would write, forever; seen in a
/// stress run that attached while `chrt` was still starting the program).
#[test]
fn a_process_that_execs_during_the_capture_ends_attach_with_the_reason() {
    let test = "a_process_that_execs_during_the_capture_ends_attach_with_the_reason";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("execs");
    let program = build("tests-programs/attach/execs.c", &dir, &["-O1", "-g"]);
    let mut run = start(&program, &[], Stdio::piped());
    let pid = run.pid();
    let mut stdin = run.child.stdin.take().unwrap();
    let child = attach(&dir, pid, &["--function", "never_called", "-o", "x.ccdump"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The capture is armed once the library is mapped and `attach` has let
    // the thread go (its tracer gone).
    let armed = || {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        maps.contains("libcoldcache") && status.contains("TracerPid:\t0\n")
    };
    let t0 = std::time::Instant::now();
    while !armed() && t0.elapsed() < programs::DEADLINE {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(armed(), "the library was never loaded in {pid}");
    std::io::Write::write_all(&mut stdin, b"exec\n").unwrap();
    let out = wait_with_deadline(child, "attach");
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("process {pid} (execs) no longer has "))
            && err.contains("mapped (it called execve): the capture was lost"),
        "{err}"
    );
    drop(stdin);
    let (stdout, stderr, status) = run.finish("execs");
    assert_eq!(stdout, "ready\nagain\n", "{stderr}");
    assert!(status.success(), "{stderr}");
}

/// A process that ends between `attach`'s checks and its seizure (the
/// window widened by `COLDCACHE_TEST_ATTACH_PAUSE_MS`; it happened under
/// load with a short-lived program) is reported as having exited: the
/// kernel's EPERM for a thread that is exiting used to be reported as
/// "ptrace is not permitted here (a security module ...)".
#[test]
fn a_process_that_ends_before_it_is_seized_is_reported_as_exited() {
    let test = "a_process_that_ends_before_it_is_seized_is_reported_as_exited";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("ends");
    let program = build("tests-programs/attach/execs.c", &dir, &["-O1", "-g"]);
    let mut run = start(&program, &[], Stdio::piped());
    let pid = run.pid();
    let stdin = run.child.stdin.take().unwrap();
    let child = attach(&dir, pid, &["--function", "never_called", "-o", "x.ccdump"])
        .env("COLDCACHE_TEST_ATTACH_PAUSE_MS", "4000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Closing stdin, once `attach` has checked the process and paused,
    // ends the program (a zombie until it is reaped below).
    std::thread::sleep(Duration::from_millis(1500));
    drop(stdin);
    let out = wait_with_deadline(child, "attach");
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("process {pid} exited during the attach")),
        "{err}"
    );
    assert!(!err.contains("not permitted"), "{err}");
    let (stdout, _, _) = run.finish("execs");
    assert_eq!(stdout, "ready\n");
}

/// An attach that arrives while the last capture's thread, its dump and
/// manifest line written (which ended the last `attach`), has not yet
/// marked the capture over (preempted there under load; here paused 3 s
/// by `COLDCACHE_TEST_FINISH_PAUSE_MS`) waits for it and captures: it was
/// refused "a capture is already in progress" (seen once in 271 attaches
/// with the program starved by `chrt --idle`).
#[test]
fn an_attach_right_after_a_finish_waits_for_it_instead_of_refusing() {
    let test = "an_attach_right_after_a_finish_waits_for_it_instead_of_refusing";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("refinish");
    let program = build(
        "tests-programs/attach/threads.c",
        &dir,
        &["-O1", "-g", "-pthread"],
    );
    let mut run = start_with(
        &program,
        &[],
        Stdio::piped(),
        &[("COLDCACHE_TEST_FINISH_PAUSE_MS", "3000")],
    );
    let stdin = run.child.stdin.take().unwrap();
    for i in 0..2 {
        let out = run_with_deadline(
            attach(
                &dir,
                run.pid(),
                &["--function", "step", "--calls", "1", "-o", "r.ccdump"],
            ),
            "attach",
        );
        let err = text(&out.stderr);
        assert!(out.status.success(), "attach {i}: {err}");
        assert!(
            load(&dir.join("r.ccdump")).meta.instructions > 1000,
            "{err}"
        );
    }
    drop(stdin);
    let (stdout, stderr, status) = run.finish("threads");
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("every round agreed: yes"), "{stdout}");
}

/// Regression (issue 33): an attach whose dump could not be written where
/// asked (`-o /dev/full`) exited 0, the capture kept elsewhere; now it
/// fails, its closing error naming the file and the operating system's
/// error and where the capture was kept. The target runs on unchanged.
#[test]
fn an_attach_whose_dump_cannot_be_written_fails_with_the_os_error() {
    let test = "an_attach_whose_dump_cannot_be_written_fails_with_the_os_error";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("full");
    let program = build("tests-programs/attach/frames.c", &dir, &["-O1", "-g"]);
    library(); // built before the program starts its short run
    let run = start(&program, &["1500"], Stdio::null());
    let cmd = attach(
        &dir,
        run.pid(),
        &["--function", "frame", "--call", "1", "-o", "/dev/full"],
    );
    let out = run_with_deadline(cmd, "attach -o /dev/full");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("/dev/full") && last.contains("No space left on device"),
        "{err}"
    );
    if let Some(kept) = last
        .split_whitespace()
        .find(|w| w.contains("coldcache.") && w.contains(".ccdump"))
    {
        let kept = kept.trim_end_matches([')', ',']);
        assert!(load(Path::new(kept)).meta.instructions > 0, "{kept}");
        let _ = std::fs::remove_file(kept);
    }
    let (out, _, status) = run.finish("frames");
    assert!(status.success() && out.contains("frame 1500:"), "{out}");
}

/// Regression (issue 33): attaching to a kernel thread (`kthreadd`, pid 2
/// where this pid namespace shows it) said "reading its executable: No
/// such file or directory"; now it says what the process is.
#[test]
fn a_kernel_thread_is_refused_as_one() {
    let Some(pid) = (1..100).find(|p| {
        std::fs::read_to_string(format!("/proc/{p}/stat"))
            .ok()
            .and_then(|s| {
                let (_, r) = s.rsplit_once(')')?;
                r.split_whitespace().nth(6)?.parse::<u64>().ok()
            })
            .is_some_and(|flags| flags & 0x0020_0000 != 0)
    }) else {
        eprintln!("SKIP a_kernel_thread_is_refused_as_one: no kernel thread visible here");
        return;
    };
    let dir = scratch("kthread");
    refused(
        &dir,
        pid,
        &["is a kernel thread", "cannot be attached"],
        "kthread",
    );
}

/// `attach` without a trigger starts and stops its capture with signals,
/// and the sync signal starts the other threads: each ends a `nanosleep`
/// it interrupts with EINTR (the kernel never restarts one after a
/// handler). The dump counts every such wait, as many as the program
/// itself counted, and the summary says so (issue 33: "start threads without a signal that
/// breaks their sleep, or say so").
#[test]
fn waits_the_capture_ends_early_are_counted_as_the_program_counts_them() {
    let test = "waits_the_capture_ends_early_are_counted_as_the_program_counts_them";
    if !can_attach(test) {
        return;
    }
    let dir = scratch("sleepers");
    let program = build(
        "tests-programs/attach/sleepers.c",
        &dir,
        &["-O1", "-g", "-pthread"],
    );
    let run = start(&program, &[], Stdio::null());
    std::thread::sleep(Duration::from_millis(300));
    let out = run_with_deadline(
        attach(
            &dir,
            run.pid(),
            &["--threads", "all", "--duration", "1", "-o", "s.ccdump"],
        ),
        "attach",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (stdout, stderr, status) = run.finish("sleepers");
    assert!(status.success(), "{stderr}");
    let counted: u32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("interrupted "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(counted > 0, "no wait was interrupted: {stdout}");
    let d = load(&dir.join("s.ccdump"));
    let w = d.meta.woken_early;
    assert_eq!(w.by_start + w.by_trigger, counted as u64, "{w:?}");
    // `attach`'s summary says it.
    assert!(
        text(&out.stderr).contains("woken:"),
        "{}",
        text(&out.stderr)
    );
}
