//! Hostile programs under `coldcache record`: the program must end as it
//! would natively — same standard output, same exit status — never hang,
//! and the capture must be kept with the reason it was cut short.
//!
//! Each case runs the program plain once, then captured several times,
//! under a deadline: a hang fails the test instead of blocking CI. Programs
//! are in `tests-programs/capture/`. Skipped with a message when gcc is
//! missing.

#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use library::{library, COLDCACHE};
use programs::{
    build_with, gcc_or_skip, program_of, run_with_deadline, scratch_in, wait_with_deadline,
};

use coldcache_dump::Dump;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn scratch(name: &str) -> PathBuf {
    scratch_in("hostile", name)
}

fn build(source: &str, dir: &Path) -> PathBuf {
    build_with(source, dir, false)
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

/// How a capture ended: cut short with a reason, or whole with the call
/// the program's exit ended (`Meta::exit_ended`).
#[derive(Debug, Clone, Copy)]
enum End {
    Cut(&'static str),
    ExitInCall(u64),
}

/// Plain once, captured `runs` times: output and status byte for byte, a
/// dump every time, ended as `end` says.
fn survives(case: &str, trigger: &[&str], args: &[&str], runs: usize, end: End) {
    if !gcc_or_skip(case) {
        return;
    }
    let dir = scratch(case);
    let program = build("tests-programs/capture/exits.c", &dir);
    let mut plain = Command::new(&program);
    plain.args(args);
    let native = run_with_deadline(plain, &format!("{case}: plain run"));
    for i in 0..runs {
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run_with_deadline(
            record(&dir, &dump, trigger, &program, args),
            &format!("{case}: captured run {i}"),
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&native.stdout),
            "{case}: run {i}: standard output differs\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            out.status.code(),
            native.status.code(),
            "{case}: run {i}: exit status differs\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bytes = std::fs::read(&dump).unwrap_or_else(|e| {
            panic!(
                "{case}: run {i}: no dump ({e})\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let d = Dump::from_bytes(&bytes).unwrap();
        assert!(d.meta.instructions > 0, "{case}: run {i}: an empty capture");
        let (cut, exit_ended) = match end {
            End::Cut(why) => (Some(why), 0),
            End::ExitInCall(n) => (None, n),
        };
        assert_eq!(d.meta.cut_short.as_deref(), cut, "{case}: run {i}: reason");
        assert_eq!(d.meta.exit_ended, exit_ended, "{case}: run {i}: exit_ended");
        if exit_ended != 0 {
            // The call counts as captured: no note of calls missing.
            assert_eq!(d.meta.calls, exit_ended.to_string(), "{case}: run {i}");
            assert!(
                !d.meta
                    .notes
                    .iter()
                    .any(|n| n.contains("were to be captured")),
                "{case}: run {i}: {:?}",
                d.meta.notes
            );
        }
    }
}

/// `--all` and `exit()` from `main`: `main` never returns (the exit hook
/// once ran on the traced thread and spun on the engine's lock forever).
/// The exit ends main's call: a whole capture, not one cut short (as it
/// was reported until 2026-12: "cut short: the program exited", "calls 1
/// to 1 were to be captured and 0 were", for half the programs on a
/// Linux machine).
#[test]
fn exit_from_main_during_an_all_capture_ends_it() {
    survives(
        "exit_from_main",
        &["--all"],
        &["main-exit"],
        5,
        End::ExitInCall(1),
    );
}

/// `exit()` from inside the captured function ends its call.
#[test]
fn exit_from_the_captured_function_ends_the_capture() {
    survives(
        "exit_from_function",
        &["--function", "frame"],
        &["function-exit"],
        5,
        End::ExitInCall(1),
    );
}

/// `_exit()` runs no exit hook: the dump is written before `exit_group`,
/// which ends the call it is made in.
#[test]
fn underscore_exit_during_a_capture_keeps_the_dump() {
    survives(
        "underscore_exit",
        &["--function", "frame"],
        &["function-_exit"],
        5,
        End::ExitInCall(1),
    );
}

/// Another thread's `exit()` while the captured call waits: the call is
/// cut short (it did not end by itself or by an exit of its own).
#[test]
fn exit_from_another_thread_cuts_the_captured_call_short() {
    survives(
        "exit_from_thread",
        &["--function", "waiting_frame"],
        &["thread-exit"],
        3,
        End::Cut("the program exited"),
    );
}

/// A `--signal` capture still running when the program calls `exit()`.
#[test]
fn a_signal_capture_running_at_exit_is_written() {
    if !gcc_or_skip("a_signal_capture_running_at_exit_is_written") {
        return;
    }
    let dir = scratch("signal_exit");
    let program = build("tests-programs/capture/exits.c", &dir);
    for i in 0..3 {
        let dump = dir.join(format!("run{i}.ccdump"));
        let mut cmd = record(&dir, &dump, &["--signal"], &program, &["signal-exit"]);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd.spawn().unwrap();
        // The program prints its first line, then spins for 1.5 s: find it
        // and start a capture.
        let pid = program_of(child.id());
        std::thread::sleep(Duration::from_millis(300));
        let t = Command::new(COLDCACHE)
            .args(["trigger", &pid])
            .status()
            .unwrap();
        assert!(t.success());
        let out = wait_with_deadline(child, &format!("signal_exit: run {i}"));
        assert_eq!(out.status.code(), Some(6), "run {i}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("waiting ") && text.contains("\nspun "),
            "{text}"
        );
        let d = Dump::from_bytes(&std::fs::read(&dump).expect("a dump")).unwrap();
        assert_eq!(d.meta.cut_short.as_deref(), Some("the program exited"));
        assert!(d.meta.instructions > 0);
    }
}

/// A trigger signal that cannot or must not be used is refused by name
/// before the program runs, with a non-zero exit (it used to start the
/// program and exit 0; SIGSEGV turned the program's own crash into a hang).
#[test]
fn bad_trigger_signals_are_refused_before_the_program_runs() {
    let dir = scratch("bad_signals");
    let marker = dir.join("ran");
    for (sig, says) in [
        ("0", "numbered 1 to"),
        ("9", "SIGKILL (9)"),
        ("99", "numbered 1 to"),
        ("11", "SIGSEGV (11)"),
        ("TRAP", "SIGTRAP (5)"),
    ] {
        let out = Command::new(COLDCACHE)
            .current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            .args([
                "record",
                "--signal",
                "--trigger-signal",
                sig,
                "--",
                "sh",
                "-c",
            ])
            .arg(format!("touch {}", marker.display()))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{sig}: exit 0\n{err}");
        assert!(err.contains(says), "{sig}: {err}");
        assert!(!marker.exists(), "{sig}: the program ran");
    }
}

/// A JIT that rewrites its buffer in place with another function: the
/// capture must not act on its first decode of the rewritten bytes (it
/// took a 2-byte `inc eax` for the `syscall` that was there before and
/// "emulated" an `rt_sigprocmask`: the program printed -14 instead of 15).
#[test]
fn a_jit_rewriting_its_buffer_keeps_its_results() {
    if !gcc_or_skip("a_jit_rewriting_its_buffer_keeps_its_results") {
        return;
    }
    let dir = scratch("jit");
    let program = build("tests-programs/capture/jit.c", &dir);
    let native = run_with_deadline(Command::new(&program), "jit: plain run");
    assert!(String::from_utf8_lossy(&native.stdout).contains("fifteen 15"));
    for i in 0..5 {
        let dump = dir.join(format!("run{i}.ccdump"));
        let out = run_with_deadline(
            record(&dir, &dump, &["--all"], &program, &[]),
            &format!("jit: captured run {i}"),
        );
        assert_eq!(out.status.code(), native.status.code(), "run {i}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&native.stdout),
            "run {i}"
        );
        let d = Dump::from_bytes(&std::fs::read(&dump).expect("a dump")).unwrap();
        assert!(d.meta.cut_short.is_none(), "{:?}", d.meta.cut_short);
    }
}

/// A thread pool that churns: 100 threads created and joined one after
/// another inside one capture of every thread. Each used to keep its slot
/// for good, so the capture was cut short after 64 creations; slots are now
/// freed when a thread exits, and every thread is in the dump.
#[test]
fn a_churning_thread_pool_is_captured_whole() {
    if !gcc_or_skip("a_churning_thread_pool_is_captured_whole") {
        return;
    }
    let dir = scratch("churn");
    let program = build_with("tests-programs/capture/churn.c", &dir, true);
    let mut plain = Command::new(&program);
    plain.args(["plain", "100"]);
    let native = run_with_deadline(plain, "churn: plain");
    let dump = dir.join("churn.ccdump");
    let mut captured = Command::new(&program);
    captured.args(["capture", "100"]).arg(&dump);
    let out = run_with_deadline(captured, "churn: captured");
    assert_eq!(out.stdout, native.stdout);
    assert_eq!(out.status.code(), Some(0));
    let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
    assert_eq!(d.meta.cut_short, None);
    assert_eq!(d.threads.len(), 101, "main and the 100 workers");
    let mut tids: Vec<u32> = d.threads.iter().map(|t| t.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    assert_eq!(tids.len(), 101);
    // Every worker counted its own instructions under its own number.
    let mut per_thread = vec![0u64; d.threads.len()];
    for r in &d.records {
        per_thread[r.thread as usize] += r.counters[0];
    }
    assert!(per_thread.iter().all(|&n| n > 0), "{per_thread:?}");
}

/// A program that closes every descriptor from 3 up during an `--all`
/// capture kept with `--trace` (a loop of `close`, `closefrom`, and
/// `close_range` through `syscall()`), then opens files of its own. Its
/// next file used to take the trace's number, so the trace was written
/// into the program's file (28 MB of it into the first) and the trace was
/// lost. Now: output as native (the same descriptor numbers too), each file
/// holds what the program wrote, and the trace is whole: re-simulated with
/// the capture's cache it counts the dump's instructions.
#[test]
fn a_program_closing_every_descriptor_keeps_its_files_and_the_trace() {
    if !gcc_or_skip("a_program_closing_every_descriptor_keeps_its_files_and_the_trace") {
        return;
    }
    let dir = scratch("closefds");
    let program = build("tests-programs/capture/closefds.c", &dir);
    for how in ["loop", "closefrom", "close_range"] {
        let native_dir = dir.join(format!("{how}-native"));
        let captured_dir = dir.join(format!("{how}-captured"));
        for d in [&native_dir, &captured_dir] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut plain = Command::new(&program);
        plain.arg(how).current_dir(&native_dir);
        let native = run_with_deadline(plain, &format!("closefds {how}: plain"));
        assert!(native.status.success());
        let dump = captured_dir.join("d.ccdump");
        let trace = captured_dir.join("t.cctrace");
        let trace_arg = trace.to_str().unwrap();
        let cmd = record(
            &captured_dir,
            &dump,
            &["--all", "--trace", trace_arg],
            &program,
            &[how],
        );
        let out = run_with_deadline(cmd, &format!("closefds {how}: captured"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&native.stdout),
            "closefds {how}: standard output differs\nstderr:\n{stderr}"
        );
        assert_eq!(out.status.code(), Some(0), "closefds {how}:\n{stderr}");
        for i in 0..8 {
            let name = format!("out{i}.txt");
            assert_eq!(
                std::fs::read_to_string(captured_dir.join(&name)).unwrap(),
                format!("file {i}\nend {i}\n"),
                "closefds {how}: {name}"
            );
        }
        let d = Dump::from_bytes(&std::fs::read(&dump).expect("a dump")).unwrap();
        assert!(d.meta.cut_short.is_none(), "{:?}", d.meta.cut_short);
        let again = captured_dir.join("again.ccdump");
        let mut sim = Command::new(COLDCACHE);
        sim.args(["sim", "--no-progress", "--no-resolve", "--cache", "jaguar"])
            .arg(&trace)
            .arg("-o")
            .arg(&again);
        let s = run_with_deadline(sim, &format!("closefds {how}: sim -o"));
        assert!(
            s.status.success(),
            "closefds {how}: the trace does not re-simulate:\n{}",
            String::from_utf8_lossy(&s.stderr)
        );
        let r = Dump::from_bytes(&std::fs::read(&again).unwrap()).unwrap();
        assert_eq!(
            r.meta.instructions, d.meta.instructions,
            "closefds {how}: the trace is not whole"
        );
    }
}

/// A program that closes every descriptor from 3 up under a `--signal`
/// trigger (no capture made), then opens a file and reads it after two
/// seconds. The writer thread waits for the trigger on a pipe the program
/// had closed: it polled the program's file at that number and read it a
/// byte at a time (the program read 0 of its 717 bytes), spinning. Now the
/// program reads the whole file, at the descriptor number it gets natively.
#[test]
fn a_program_closing_every_descriptor_keeps_its_reads_under_a_signal_trigger() {
    if !gcc_or_skip("a_program_closing_every_descriptor_keeps_its_reads_under_a_signal_trigger") {
        return;
    }
    let dir = scratch("closefds_wait");
    let program = build("tests-programs/capture/closefds.c", &dir);
    let input = dir.join("input.txt");
    std::fs::write(&input, "x".repeat(5000)).unwrap();
    let mut plain = Command::new(&program);
    plain.arg("wait").arg(&input);
    let native = run_with_deadline(plain, "closefds wait: plain");
    assert_eq!(
        String::from_utf8_lossy(&native.stdout),
        format!("fd 3: 5000 bytes, sum {}\n", 5000 * u32::from(b'x'))
    );
    let dump = dir.join("d.ccdump");
    let out = run_with_deadline(
        record(
            &dir,
            &dump,
            &["--signal"],
            &program,
            &["wait", input.to_str().unwrap()],
        ),
        "closefds wait: under --signal",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&native.stdout),
        "standard output differs\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A threaded program calling `setuid` during the capture: glibc signals
/// every thread of the process with SIGSETXID and waits for each (the
/// capture's writer thread too), so a thread of ours that blocked it would
/// hang the program (checked: the writer blocking every signal hung the
/// `--signal` case below). Both modes, a function window and `--all`: output and
/// status as native, the capture whole. (The instruction counts of the two
/// modes differ by how long `__nptl_setxid` waits for the other thread, as
/// from run to run natively.)
#[test]
fn setuid_in_a_threaded_program_does_not_wait_on_our_threads() {
    if !gcc_or_skip("setuid_in_a_threaded_program") {
        return;
    }
    let dir = scratch("setxid");
    let program = build_with("tests-programs/capture/setxid.c", &dir, true);
    let mut plain = Command::new(&program);
    plain.arg("50");
    let native = run_with_deadline(plain, "setxid: plain");
    for trigger in [
        &["--function", "work"][..],
        &["--all", "--threads", "all"][..],
    ] {
        for mode in ["trap", "fast"] {
            let dump = dir.join(format!("{mode}.ccdump"));
            let mut with_mode = trigger.to_vec();
            with_mode.extend(["--mode", mode]);
            let cmd = record(&dir, &dump, &with_mode, &program, &["50"]);
            let out = run_with_deadline(cmd, &format!("setxid: {mode} {trigger:?}"));
            assert_eq!(
                out.stdout,
                native.stdout,
                "{mode} {trigger:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(0), "{mode} {trigger:?}");
            let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
            assert_eq!(d.meta.cut_short, None, "{mode} {trigger:?}");
            assert!(d.meta.instructions > 0, "{mode} {trigger:?}");
        }
    }
    // `--signal` starts the writer thread at once (no trigger is sent):
    // with SIGSETXID blocked there the program hung in its first `setuid`.
    let dump = dir.join("signal.ccdump");
    let out = run_with_deadline(
        record(&dir, &dump, &["--signal"], &program, &["50"]),
        "setxid: --signal",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.stdout, native.stdout, "--signal: {err}");
    assert!(err.contains("no capture was made"), "--signal: {err}");
}
