//! Windows people actually want (issue 18): a capture of call N warmed by
//! the calls before it (`record --warm-calls`), and threads serialised so
//! that runs of a deterministic program give the same dump (`record
//! --schedule serial`), and every selected thread traced during a
//! function's window (`record --function F --threads all`). Programs:
//! `tests-programs/capture/warm.c`, `serial.c`, `threads.c` and
//! `window_threads.c`, built by gcc (skipped with a message when
//! missing), run under a deadline, in both capture modes.

#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use dumps::{load, text};
use library::{library, COLDCACHE};
use programs::{build_with, gcc_or_skip, run_with_deadline, scratch_in};

use coldcache_dump::{CounterLayout, Dump, Side};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    scratch_in("windows", name)
}

/// `coldcache record --cache cachegrind` (32 KiB 8-way L1s, 64-byte lines,
/// LRU, no prefetcher: the hand count below holds) in `dir`.
fn record(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(COLDCACHE);
    cmd.current_dir(dir)
        .env("COLDCACHE_LIB", library())
        .args(["record", "--cache", "cachegrind", "--no-resolve"])
        .args(args);
    cmd
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        out.status,
        text(&out.stderr)
    );
}

/// `warm.c`'s buffer: 16 KiB, 64-byte aligned, read 8 bytes at a time.
const BUFFER: u64 = 16 << 10;
const LINE: u64 = 64;
const READS: u64 = BUFFER / 8;

/// L1 misses of `side` in a record (accesses served by L2 or memory).
fn l1_misses(l: CounterLayout, c: &[u64], side: Side) -> u64 {
    l.served_from(side, 2).map(|i| c[i]).sum()
}

/// The buffer's load: the one record of `touch` that reads `READS` times.
fn the_load(d: &Dump) -> &coldcache_dump::Record {
    let l = d.layout().expect("a coldcache layout");
    let loads: Vec<_> = d
        .records
        .iter()
        .filter(|r| {
            l.served_from(Side::Read, 1)
                .map(|i| r.counters[i])
                .sum::<u64>()
                == READS
        })
        .collect();
    assert_eq!(loads.len(), 1, "one instruction reads the buffer");
    loads[0]
}

/// Regression: every capture started from an empty cache, so `--call 2`
/// gave the same misses as `--call 1` — a short window was all first-touch
/// misses. Truth, by hand: the buffer is 16384 / 64 = 256 lines; cold, its
/// load misses the L1 once per line (256, all served by memory); warmed by
/// call 1, the 16 KiB are still in the 32 KiB L1 and the load misses
/// nowhere, and neither does anything else of the window (the same code,
/// the same stack slot). The window's instructions, per instruction, are
/// the cold capture's.
#[test]
fn a_call_warmed_by_the_calls_before_it_misses_only_what_they_left_out() {
    if !gcc_or_skip("a_call_warmed_by_the_calls_before_it_misses_only_what_they_left_out") {
        return;
    }
    let dir = scratch("warm");
    let program = build_with("tests-programs/capture/warm.c", &dir, false);
    let p = program.to_str().unwrap();
    let native = run_with_deadline(Command::new(&program), "native");
    ok(&native, "native");
    for mode in ["trap", "fast"] {
        let run = |name: &str, extra: &[&str]| {
            let dump = format!("{mode}-{name}.ccdump");
            let mut args = vec!["--mode", mode, "-o", &dump, "--function", "touch"];
            args.extend_from_slice(extra);
            args.extend_from_slice(&["--", p]);
            let out = run_with_deadline(record(&dir, &args), &dump);
            ok(&out, &dump);
            assert_eq!(out.stdout, native.stdout, "{mode} {name}: program output");
            (load(&dir.join(&dump)), text(&out.stderr))
        };
        let (cold, _) = run("cold", &["--call", "2"]);
        let (warm, said) = run("warm", &["--call", "2", "--warm-calls", "1"]);
        let l = cold.layout().unwrap();
        // Cold: one miss per line, every one from memory.
        let lines = BUFFER / LINE;
        assert_eq!(lines, 256);
        let load = the_load(&cold);
        assert_eq!(
            l1_misses(l, &load.counters, Side::Read),
            lines,
            "{mode}: cold --call 2 misses once per line"
        );
        assert_eq!(load.counters[l.memory(Side::Read)], lines, "{mode}: cold");
        // Warmed: none at the load, none anywhere in the window.
        let load = the_load(&warm);
        assert_eq!(
            l1_misses(l, &load.counters, Side::Read),
            0,
            "{mode}: --call 2 warmed by call 1 misses at the load"
        );
        let t = warm.totals();
        let all: u64 = Side::ALL.iter().map(|&s| l1_misses(l, &t, s)).sum();
        assert_eq!(all, 0, "{mode}: warmed window misses: {t:?}");
        // The same instructions, counted the same, per instruction.
        assert_eq!(warm.meta.instructions, cold.meta.instructions, "{mode}");
        // (Addresses from `touch`'s lowest: the runs load at random bases.)
        let per_ip = |d: &Dump| {
            let base = d.records.iter().map(|r| r.ip).min().unwrap_or(0);
            let mut v: Vec<(u64, u64)> = d
                .records
                .iter()
                .map(|r| (r.ip - base, r.counters[CounterLayout::INSTRUCTIONS]))
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(per_ip(&warm), per_ip(&cold), "{mode}: instructions per ip");
        // The dump and the summary say how it was warmed; cold says nothing.
        assert!(cold.meta.warm.is_empty(), "{mode}: {}", cold.meta.warm);
        assert!(
            warm.meta
                .warm
                .starts_with("by calls 1 to 1 of the function (")
                && warm
                    .meta
                    .warm
                    .contains(&format!("{} instructions", cold.meta.instructions)),
            "{mode}: {}",
            warm.meta.warm
        );
        assert!(said.contains("warmed by calls 1 to 1"), "{mode}: {said}");
        let report = Command::new(COLDCACHE)
            .arg("report")
            .arg(dir.join(format!("{mode}-warm.ccdump")))
            .output()
            .unwrap();
        ok(&report, "report");
        assert!(
            text(&report.stdout).contains("warmed:    by calls 1 to 1"),
            "{mode}: {}",
            text(&report.stdout)
        );
        // The dump says which calls it covered, and the report's window.
        assert_eq!(cold.meta.calls, "2", "{mode}");
        assert!(
            text(&report.stdout).contains("entry to touch (call 2) → touch returned"),
            "{mode}: {}",
            text(&report.stdout)
        );
        let (two, _) = run("two", &["--calls", "2"]);
        assert_eq!(two.meta.calls, "1 to 2", "{mode}");
        // `all` warms with every earlier call, K with the K before N.
        let (all, _) = run("all", &["--call", "3", "--warm-calls", "all"]);
        assert!(
            all.meta.warm.starts_with("by calls 1 to 2 "),
            "{}",
            all.meta.warm
        );
        let (one, _) = run("one", &["--call", "3", "--warm-calls", "1"]);
        assert!(
            one.meta.warm.starts_with("by calls 2 to 2 "),
            "{}",
            one.meta.warm
        );
        for d in [&all, &one] {
            assert_eq!(l1_misses(l, &the_load(d).counters, Side::Read), 0);
            assert_eq!(d.meta.instructions, cold.meta.instructions);
        }
    }
}

/// What cannot be warmed is refused before the program runs: `--call 1`
/// has no earlier call, a count must be a number of calls or `all`, and
/// the windows without earlier calls (`--all`, `--signal`, the C API)
/// take no `--warm-calls`. A schedule that is not `os`, `serial` or
/// `serial=N` (N ≥ 1) is refused too.
#[test]
fn warm_calls_without_earlier_calls_are_refused_before_the_run() {
    if !gcc_or_skip("warm_calls_without_earlier_calls_are_refused_before_the_run") {
        return;
    }
    let dir = scratch("warm_refused");
    let program = build_with("tests-programs/capture/warm.c", &dir, false);
    let p = program.to_str().unwrap();
    for (args, says) in [
        (
            &["--function", "touch", "--call", "1", "--warm-calls", "1"][..],
            "with --call 1 there are none",
        ),
        (
            &["--function", "touch", "--call", "2", "--warm-calls", "0"][..],
            "--warm-calls 0: expected a number of calls",
        ),
        (
            &["--function", "touch", "--call", "2", "--warm-calls", "x"][..],
            "--warm-calls x: expected",
        ),
        (&["--all", "--warm-calls", "1"][..], "--call"),
        (&["--signal", "--warm-calls", "1"][..], "--call"),
        (&["--warm-calls", "1"][..], "--call"),
        (
            &["--all", "--schedule", "serial=0"][..],
            "--schedule serial=0: expected",
        ),
        (
            &["--all", "--schedule", "fifo"][..],
            "--schedule fifo: expected",
        ),
    ] {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--", p]);
        let out = run_with_deadline(record(&dir, &a), &args.join(" "));
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}: exit 0\n{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: the program ran");
    }
}

/// `record` with address-space randomisation off (`setarch -R`): the
/// simulated addresses are the program's, and thread stacks mapped at
/// random places land in other cache sets from run to run whatever the
/// schedule.
fn record_fixed(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("setarch");
    cmd.current_dir(dir)
        .env("COLDCACHE_LIB", library())
        .args([
            "-R",
            COLDCACHE,
            "record",
            "--cache",
            "jaguar",
            "--no-resolve",
        ])
        .args(args);
    cmd
}

/// What must be equal between two runs: the totals and every record
/// (instruction, stack, thread number in the capture, counters).
/// A record as compared: (instruction, stack, thread, counters).
type Row = (u64, u32, u32, Vec<u64>);

fn fingerprint(d: &Dump) -> (Vec<u64>, Vec<Row>) {
    (
        d.totals(),
        d.records
            .iter()
            .map(|r| (r.ip, r.stack, r.thread, r.counters.clone()))
            .collect(),
    )
}

/// Regression: identical runs of a multi-threaded program gave very
/// different misses, because the simulated interleaving followed the real
/// scheduler. Truth: with `--schedule serial` five runs of `serial.c`
/// (four threads summing their own slices into counters that share a
/// line, then joined; deterministic) give the same dump — totals and every
/// record's counters — in both modes, and the program prints what it
/// prints natively. Without it, the spread is shown (not asserted: it may
/// happen to be small on one machine).
#[test]
fn serial_schedule_gives_identical_dumps_of_a_deterministic_threaded_program() {
    if !programs::gcc_and_setarch_or_skip(
        "serial_schedule_gives_identical_dumps_of_a_deterministic_threaded_program",
    ) {
        return;
    }
    let dir = scratch("serial");
    let program = build_with("tests-programs/capture/serial.c", &dir, true);
    let p = program.to_str().unwrap();
    // In the scratch directory: the program writes its dump (or tries to)
    // to `serial.ccdump` in the current one.
    let mut native = Command::new(&program);
    native.current_dir(&dir);
    let native = run_with_deadline(native, "native");
    ok(&native, "native");
    for mode in ["trap", "fast"] {
        let runs = |schedule: &str| -> Vec<Dump> {
            (0..5)
                .map(|i| {
                    let dump = format!("{mode}-{schedule}-{i}.ccdump");
                    let out = run_with_deadline(
                        record_fixed(
                            &dir,
                            &["--mode", mode, "--schedule", schedule, "--", p, &dump],
                        ),
                        &dump,
                    );
                    ok(&out, &dump);
                    assert_eq!(out.stdout, native.stdout, "{dump}: program output");
                    load(&dir.join(&dump))
                })
                .collect()
        };
        let serial = runs("serial");
        assert_eq!(serial[0].threads.len(), 5, "{mode}: main and four workers");
        assert_eq!(
            serial[0].meta.schedule, "serial, quantum 10000 instructions",
            "{mode}"
        );
        // A run whose thread waited more than the schedule's 2 s for a
        // turn (a loaded machine) went on and says its interleaving may
        // differ: it is left out of the comparison, not the others.
        let stalled = |d: &Dump| {
            d.meta
                .notes
                .iter()
                .any(|n| n.starts_with("schedule serial: a thread waited"))
        };
        let kept: Vec<(usize, &Dump)> = serial
            .iter()
            .enumerate()
            .filter(|(i, d)| {
                let s = stalled(d);
                if s {
                    eprintln!("{mode}: serial run {i} stalled (a loaded machine): not compared");
                }
                !s
            })
            .collect();
        let Some(&(i0, d0)) = kept.first() else {
            eprintln!("{mode}: every serial run stalled: nothing compared");
            continue;
        };
        let first = fingerprint(d0);
        for &(i, d) in &kept[1..] {
            let f = fingerprint(d);
            assert_eq!(
                f.0, first.0,
                "{mode}: run {i}'s totals differ from run {i0}'s (notes: {:?} / {:?})",
                d.meta.notes, d0.meta.notes
            );
            assert!(
                f.1 == first.1,
                "{mode}: run {i}'s records differ from run {i0}'s"
            );
        }
        let os = runs("os");
        let l = os[0].layout().unwrap();
        let misses = |d: &Dump| -> u64 {
            let t = d.totals();
            Side::ALL.iter().map(|&s| l1_misses(l, &t, s)).sum()
        };
        assert!(os[0].meta.schedule.is_empty(), "{mode}: os is the default");
        eprintln!(
            "{mode}: L1 misses of five runs, --schedule serial: {:?}; as the OS ran them: {:?}",
            serial.iter().map(misses).collect::<Vec<_>>(),
            os.iter().map(misses).collect::<Vec<_>>()
        );
    }
}

/// With threads serialised, nothing hangs and the program's output is
/// unchanged: `threads.c` (eight threads, a mutex, two condition variables,
/// atomics, threads created and exiting inside each capture) captured five
/// times, every thread, with a quantum small enough that turns end while
/// the mutex is held; each run under a deadline, in both modes.
#[test]
fn serial_schedule_does_not_hang_with_mutexes_and_condition_variables() {
    if !gcc_or_skip("serial_schedule_does_not_hang_with_mutexes_and_condition_variables") {
        return;
    }
    let dir = scratch("serial_locks");
    let program = build_with("tests-programs/capture/threads.c", &dir, true);
    let p = program.to_str().unwrap();
    let mut plain = Command::new(&program);
    plain.args(["plain", "5"]);
    let native = run_with_deadline(plain, "plain");
    ok(&native, "plain");
    for mode in ["trap", "fast"] {
        for quantum in ["serial=50", "serial"] {
            let dump = format!("{mode}-{quantum}.ccdump");
            let out = run_with_deadline(
                record(
                    &dir,
                    &[
                        "--mode",
                        mode,
                        "--schedule",
                        quantum,
                        "--",
                        p,
                        "coldcache",
                        "5",
                        &dump,
                    ],
                ),
                &dump,
            );
            ok(&out, &dump);
            assert_eq!(
                text(&out.stdout).replace("captures 5 ", ""),
                text(&native.stdout).replace("captures 5 ", ""),
                "{mode} {quantum}: program output"
            );
            let d = load(&dir.join(&dump));
            assert!(d.meta.schedule.starts_with("serial, quantum "), "{mode}");
            assert!(d.threads.len() >= 5, "{mode}: {} threads", d.threads.len());
        }
    }
}

/// The ELF address range of each function named in `names`, from `nm -S`
/// (binutils as the independent truth) on a non-PIE binary, whose run-time
/// addresses are its file addresses.
fn ranges(binary: &Path, names: &[&str]) -> Vec<(u64, u64)> {
    let nm = Command::new("nm")
        .arg("-S")
        .arg(binary)
        .output()
        .expect("nm");
    names
        .iter()
        .map(|name| {
            text(&nm.stdout)
                .lines()
                .find_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f.len() == 4 && f[3] == *name).then(|| {
                        let a = u64::from_str_radix(f[0], 16).unwrap();
                        (a, a + u64::from_str_radix(f[1], 16).unwrap())
                    })
                })
                .unwrap_or_else(|| panic!("nm: no {name}"))
        })
        .collect()
}

/// Instructions of thread number `thread` of `d` at addresses in `r`.
fn instructions_in(d: &Dump, thread: usize, r: &[(u64, u64)]) -> u64 {
    d.records
        .iter()
        .filter(|x| x.thread as usize == thread && r.iter().any(|&(a, b)| x.ip >= a && x.ip < b))
        .map(|x| x.counters[CounterLayout::INSTRUCTIONS])
        .sum()
}

/// Regression: `--function F --threads all` (and `--all --threads all`)
/// was refused; only the C API or a hand-timed `--signal` traced every
/// thread during a function. Truth: `window_threads.c`, whose main thread
/// calls `frame` while three threads named `worker` run `spin` (a barrier
/// inside `frame` releases them; `frame` returns only once each has spun
/// 1,000 times), and whose workers run `late` only after `frame`
/// returned. Captured with `--threads all` and `--threads name:worker`,
/// in both modes: the dump's thread table lists the caller and the three
/// workers; each worker has instructions in `spin` and none in `late`
/// (the window is bounded by `frame`'s return); the caller's instructions
/// in `frame` and `work` (its deterministic part) are those of a
/// `--threads caller` capture; the program prints what it prints natively.
/// `--all --threads all` (the window is `main`) does see `late` on every
/// worker.
#[test]
fn a_function_window_traces_every_selected_thread_while_the_caller_runs_it() {
    if !gcc_or_skip("a_function_window_traces_every_selected_thread_while_the_caller_runs_it") {
        return;
    }
    let dir = scratch("window_threads");
    let program = programs::compile(
        "tests-programs/capture/window_threads.c",
        &dir.join("window_threads"),
        &["-O1", "-g", "-no-pie", "-pthread"],
        false,
    );
    let p = program.to_str().unwrap();
    let caller_part = ranges(&program, &["frame", "work"]);
    let spin = ranges(&program, &["spin"]);
    let late = ranges(&program, &["late"]);
    let native = run_with_deadline(Command::new(&program), "native");
    ok(&native, "native");
    for mode in ["trap", "fast"] {
        let run = |name: &str, window: &[&str]| -> Dump {
            let dump = format!("{mode}-{name}.ccdump");
            let mut args = vec!["--mode", mode, "-o", &dump];
            args.extend_from_slice(window);
            args.extend_from_slice(&["--", p]);
            let out = run_with_deadline(record(&dir, &args), &dump);
            ok(&out, &dump);
            assert_eq!(out.stdout, native.stdout, "{mode} {name}: program output");
            load(&dir.join(&dump))
        };
        let caller = run("caller", &["--function", "frame"]);
        assert_eq!(caller.threads.len(), 1, "{mode}: --threads caller");
        let expected = instructions_in(&caller, 0, &caller_part);
        assert!(expected > 4096, "{mode}: the caller's window: {expected}");
        for threads in ["all", "name:worker"] {
            let d = run(
                threads.trim_start_matches("name:"),
                &["--function", "frame", "--threads", threads],
            );
            let what = format!("{mode} --threads {threads}");
            assert_eq!(d.threads.len(), 4, "{what}: {:?}", d.threads);
            let main = d
                .threads
                .iter()
                .position(|t| t.name != "worker")
                .unwrap_or_else(|| panic!("{what}: no caller in {:?}", d.threads));
            assert_eq!(
                instructions_in(&d, main, &caller_part),
                expected,
                "{what}: the caller's instructions in frame and work"
            );
            for (i, t) in d.threads.iter().enumerate().filter(|(i, _)| *i != main) {
                assert_eq!(t.name, "worker", "{what}");
                assert!(
                    instructions_in(&d, i, &spin) > 0,
                    "{what}: worker {} has no instruction in spin",
                    t.tid
                );
                assert_eq!(
                    instructions_in(&d, i, &late),
                    0,
                    "{what}: worker {} ran late after the window and was counted",
                    t.tid
                );
            }
        }
        let whole = run("main", &["--all", "--threads", "all"]);
        assert_eq!(whole.threads.len(), 4, "{mode} --all: {:?}", whole.threads);
        for (i, t) in whole.threads.iter().enumerate() {
            if t.name == "worker" {
                assert!(
                    instructions_in(&whole, i, &late) > 0,
                    "{mode} --all --threads all: worker {} has no instruction in late",
                    t.tid
                );
            }
        }
    }
}

/// Regression: with `--calls K --threads all` in fast mode the program
/// could hang after the dump was written (about one run in six here): a
/// worker the sync signal started while it was still leaving translated
/// code (the end of the dispatcher's work, its restore) was handed over
/// from there and jumped to the dispatcher itself forever. Truth:
/// `window_calls.c` (two workers spinning while main calls `frame` six
/// times) captured with `--calls 3` and with `--call 2 --warm-calls 1`,
/// six times each in fast mode, once in trap mode: every run ends within the deadline,
/// prints what it prints natively, and its dump lists main and both
/// workers; workers are seen in `spin` (over the runs: nothing makes a
/// worker run during one given short window).
#[test]
fn further_windows_of_a_function_start_the_other_threads_again_without_hanging() {
    if !gcc_or_skip("further_windows_of_a_function_start_the_other_threads_again_without_hanging") {
        return;
    }
    let dir = scratch("window_calls");
    let program = programs::compile(
        "tests-programs/capture/window_calls.c",
        &dir.join("window_calls"),
        &["-O1", "-g", "-no-pie", "-pthread"],
        false,
    );
    let p = program.to_str().unwrap();
    let spin = ranges(&program, &["spin"]);
    let native = run_with_deadline(Command::new(&program), "native");
    ok(&native, "native");
    for mode in ["trap", "fast"] {
        for calls in [&["--calls", "3"][..], &["--call", "2", "--warm-calls", "1"]] {
            let mut in_spin = 0;
            // The hang was fast mode's; trap mode (slow on the spinning
            // workers) once.
            for i in 0..if mode == "fast" { 6 } else { 1 } {
                let dump = format!("{mode}-{}-{i}.ccdump", calls[0].trim_start_matches('-'));
                let mut args = vec!["--mode", mode, "-o", &dump, "--function", "frame"];
                args.extend_from_slice(calls);
                args.extend_from_slice(&["--threads", "all", "--", p]);
                let out = run_with_deadline(record(&dir, &args), &dump);
                ok(&out, &dump);
                assert_eq!(out.stdout, native.stdout, "{dump}: program output");
                let d = load(&dir.join(&dump));
                assert_eq!(d.threads.len(), 3, "{dump}: {:?}", d.threads);
                // Nothing makes a worker run during one short window (two
                // cores shared): counted over the runs.
                in_spin += (0..3)
                    .filter(|&t| instructions_in(&d, t, &spin) > 0)
                    .count();
            }
            assert!(in_spin > 0, "{mode} {calls:?}: no worker traced in spin");
        }
    }
}
