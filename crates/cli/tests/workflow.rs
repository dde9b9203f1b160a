//! The capture workflow as a user lives it (issue 18): `record` fails
//! before the program runs when it cannot succeed (an unwritable `-o`, an
//! unknown `--function`), never loses or silently replaces a dump, exits
//! non-zero when a capture asked for was not made, and `trigger` signals
//! only programs that run coldcache. Programs: `tests-programs/capture/
//! workflow.c` and `tests-programs/symbols/names.cpp`, built by gcc/g++
//! (skipped with a message when missing), run under a deadline.

#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use dumps::{load, text};
use library::{library, COLDCACHE};
use programs::{
    build_with, gcc_and_setarch_or_skip, gcc_or_skip, program_of, run_with_deadline, scratch_in,
    unrandomised, wait_with_deadline,
};

use coldcache_dump::Dump;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn scratch(name: &str) -> PathBuf {
    scratch_in("workflow", name)
}

/// `coldcache record` in `dir` with `args` (the program and its arguments
/// after `--`).
fn record(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(COLDCACHE);
    cmd.current_dir(dir)
        .env("COLDCACHE_LIB", library())
        .args(["record", "--cache", "jaguar", "--no-resolve"])
        .args(args);
    cmd
}

/// The run failed with a message naming `path` and containing `reason`,
/// and the program never ran (its output is empty).
fn refused(out: &Output, path: &str, reason: &str, what: &str) {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{what}: exit 0\n{err}");
    assert!(err.contains(path) && err.contains(reason), "{what}: {err}");
    assert!(
        out.stdout.is_empty(),
        "{what}: the program ran: {}",
        text(&out.stdout)
    );
}

/// Regression: an unwritable `-o` was found only after the whole program
/// ran, reported as "the program never started one", with exit 0.
#[test]
fn an_unwritable_output_is_refused_before_the_program_runs() {
    if !gcc_or_skip("an_unwritable_output_is_refused_before_the_program_runs") {
        return;
    }
    let dir = scratch("unwritable");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let p = program.to_str().unwrap();
    // A directory nobody may write to; root may write anywhere but in
    // sysfs, which refuses new files to root too.
    let ro = dir.join("read-only");
    std::fs::create_dir_all(&ro).unwrap();
    let mut perms = std::fs::metadata(&ro).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o555);
    std::fs::set_permissions(&ro, perms).unwrap();
    let ro = if std::fs::write(ro.join("probe"), b"").is_ok() {
        PathBuf::from("/sys")
    } else {
        ro
    };
    let ro_dump = ro.join("x.ccdump");
    for (output, reason) in [
        ("no/such/dir/x.ccdump", "does not exist"),
        (ro_dump.to_str().unwrap(), "no file can be created in"),
        (dir.to_str().unwrap(), "is a directory"),
    ] {
        let out = run_with_deadline(
            record(&dir, &["--all", "-o", output, "--", p, "once"]),
            output,
        );
        refused(&out, output, reason, output);
    }
    // The same for --trace.
    let out = run_with_deadline(
        record(
            &dir,
            &["--all", "--trace", "gone/t.cctrace", "--", p, "once"],
        ),
        "--trace",
    );
    refused(&out, "gone/t.cctrace", "does not exist", "--trace");
}

/// Regression: a capture that was asked for and never made exited 0
/// ("the program never started one").
#[test]
fn a_capture_asked_for_and_not_made_exits_non_zero() {
    if !gcc_or_skip("a_capture_asked_for_and_not_made_exits_non_zero") {
        return;
    }
    let dir = scratch("not_made");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let p = program.to_str().unwrap();
    // The program's own output: its checksum, computed natively.
    let native = run_with_deadline(
        {
            let mut c = Command::new(&program);
            c.arg("once");
            c
        },
        "plain",
    );
    assert!(native.status.success());
    for (trigger, says) in [
        // cmp is called fewer than a million times.
        (
            &["--function", "cmp", "--call", "1000000"][..],
            "the function was never called",
        ),
        (&["--signal"][..], "no trigger signal started one"),
        (&[][..], "never called coldcache_start"),
    ] {
        let mut args = trigger.to_vec();
        args.extend(["-o", "x.ccdump", "--", p, "once"]);
        let out = run_with_deadline(record(&dir, &args), &format!("{trigger:?}"));
        let err = text(&out.stderr);
        assert_eq!(out.stdout, native.stdout, "{trigger:?}: the program ran");
        assert!(!out.status.success(), "{trigger:?}: exit 0\n{err}");
        assert!(
            err.contains("no capture was made") && err.contains(says),
            "{trigger:?}: {err}"
        );
        let _ = std::fs::remove_file(dir.join("x.ccdump"));
    }
}

/// Regression: two `record`s to one path both reported it, and the first
/// dump was lost. perf's habit: the earlier file is kept as `NAME.old`.
#[test]
fn an_earlier_dump_is_kept_as_old_not_overwritten() {
    if !gcc_or_skip("an_earlier_dump_is_kept_as_old_not_overwritten") {
        return;
    }
    let dir = scratch("old");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let p = program.to_str().unwrap();
    let args = ["--function", "count_and_sort", "--", p, "once"];
    let first = run_with_deadline(record(&dir, &args), "first");
    assert!(first.status.success(), "{}", text(&first.stderr));
    let earlier = std::fs::read(dir.join("coldcache.ccdump")).unwrap();
    let second = run_with_deadline(record(&dir, &args), "second");
    let err = text(&second.stderr);
    assert!(second.status.success(), "{err}");
    let old = dir.join("coldcache.ccdump.old");
    assert_eq!(std::fs::read(&old).unwrap(), earlier, "{err}");
    assert!(
        err.contains(&format!(
            "the earlier {} is kept as {}",
            dir.join("coldcache.ccdump").display(),
            old.display()
        )),
        "{err}"
    );
    // The new dump is this run's (its own start time), not the earlier.
    let (a, b) = (
        Dump::from_bytes(&earlier).unwrap(),
        load(&dir.join("coldcache.ccdump")),
    );
    assert!(b.meta.start_unix_ns > a.meta.start_unix_ns);
}

/// Regression: each `--signal` window of one run replaced the previous
/// one's dump. Two windows are two dumps, both listed by `record`.
#[test]
fn every_signal_window_of_a_run_is_its_own_dump() {
    if !gcc_or_skip("every_signal_window_of_a_run_is_its_own_dump") {
        return;
    }
    let dir = scratch("windows");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let _ = std::fs::remove_file(dir.join("stop"));
    let mut cmd = record(
        &dir,
        &[
            "--signal",
            "--instructions",
            "5000",
            "-o",
            "w.ccdump",
            "--",
            program.to_str().unwrap(),
            "windows",
        ],
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = program_of(child.id());
    // Each window ends by itself after 5000 instructions; the next is
    // opened once its dump is there (a trigger during a window ends it).
    let dumps = [dir.join("w.ccdump"), dir.join("w.2.ccdump")];
    for d in &dumps {
        std::thread::sleep(Duration::from_millis(300));
        let t = Command::new(COLDCACHE)
            .args(["trigger", &pid])
            .output()
            .unwrap();
        assert!(t.status.success(), "{}", text(&t.stderr));
        let start = std::time::Instant::now();
        while !d.exists() {
            assert!(start.elapsed() < programs::DEADLINE, "no {}", d.display());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    std::fs::write(dir.join("stop"), b"").unwrap();
    let out = wait_with_deadline(child, "windows");
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    for d in &dumps {
        let dump = load(d);
        assert_eq!(dump.meta.trigger, "signal");
        assert_eq!(dump.meta.instructions, 5000, "{}", d.display());
        assert!(
            err.contains(&format!("capture written to {}", d.display())),
            "{err}"
        );
    }
    assert!(
        err.contains(&format!(
            "2 dumps written by this run:\n  {}\n  {}\n",
            dumps[0].display(),
            dumps[1].display()
        )),
        "{err}"
    );
    assert!(!dir.join("w.3.ccdump").exists());
}

/// Regression: a program choosing its own dump path through the C API got
/// "no capture was written" and an unresolved dump. Every dump of the run
/// is found and resolved; one that cannot be written where the program
/// asked is kept in the temporary directory, named, and the exit is
/// non-zero.
#[test]
fn dumps_written_through_the_c_api_are_found_and_resolved() {
    if !gcc_or_skip("dumps_written_through_the_c_api_are_found_and_resolved") {
        return;
    }
    let dir = scratch("api");
    let program = build_with("tests-programs/capture/workflow.c", &dir, true);
    let p = program.to_str().unwrap();
    let mut cmd = record(
        &dir,
        &["-o", "default.ccdump", "--", p, "api", "own.ccdump"],
    );
    // Resolved this time: drop --no-resolve.
    let args: Vec<_> = cmd
        .get_args()
        .filter(|a| *a != "--no-resolve")
        .map(|a| a.to_owned())
        .collect();
    cmd = Command::new(COLDCACHE);
    cmd.current_dir(&dir)
        .env("COLDCACHE_LIB", library())
        .args(&args);
    let out = run_with_deadline(cmd, "api");
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    for name in ["own.ccdump", "default.ccdump"] {
        let path = dir.join(name);
        let d = load(&path);
        assert_eq!(d.meta.trigger, "api");
        assert!(d.meta.instructions > 0);
        let syms = d.symbols.as_ref().expect("resolved");
        assert!(
            syms.functions.iter().any(|f| f.name == "count_and_sort"),
            "{name}: count_and_sort not among the resolved functions"
        );
        assert!(
            err.contains(&format!("capture written to {}", path.display())),
            "{err}"
        );
    }
    // A path the program cannot write: the capture is kept elsewhere.
    let out = run_with_deadline(
        record(
            &dir,
            &["-o", "default.ccdump", "--", p, "api", "/sys/own.ccdump"],
        ),
        "api unwritable",
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let kept = err
        .split("it was kept in ")
        .nth(1)
        .and_then(|r| r.lines().next())
        .unwrap_or_else(|| panic!("where the capture was kept: {err}"));
    let d = load(Path::new(kept));
    assert!(d.meta.instructions > 0);
    assert!(err.contains("/sys/own.ccdump"), "{err}");
    std::fs::remove_file(kept).unwrap();
}

/// `record`'s error, the program not run: exit non-zero, its output empty.
fn refused_with(out: &Output, says: &[&str], what: &str) {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{what}: exit 0\n{err}");
    assert!(out.stdout.is_empty(), "{what}: the program ran\n{err}");
    for s in says {
        assert!(err.contains(s), "{what}: no {s:?} in\n{err}");
    }
}

/// Regression: `--function` was looked up only once the program ran; a
/// typo, a stripped binary or `--threads all` was reported after the whole
/// run, with exit 0.
#[test]
fn an_unknown_function_is_refused_before_the_program_runs() {
    if !gcc_or_skip("an_unknown_function_is_refused_before_the_program_runs") {
        return;
    }
    let dir = scratch("unknown_function");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let p = program.to_str().unwrap();
    let out = run_with_deadline(
        record(&dir, &["--function", "count_and_srot", "--", p, "once"]),
        "typo",
    );
    refused_with(
        &out,
        &[
            "--function count_and_srot: no function of that name in",
            "did you mean `count_and_sort`?",
        ],
        "typo",
    );
    // Stripped: the program's own functions are gone from its tables.
    let stripped = dir.join("stripped");
    std::fs::copy(&program, &stripped).unwrap();
    assert!(Command::new("strip")
        .arg(&stripped)
        .status()
        .unwrap()
        .success());
    let s = stripped.to_str().unwrap();
    let out = run_with_deadline(
        record(&dir, &["--function", "count_and_sort", "--", s, "once"]),
        "stripped",
    );
    refused_with(
        &out,
        &["has no symbol table: it was stripped"],
        "stripped --function",
    );
}

/// `record --all` on a stripped program (most system binaries: gzip, git,
/// grep were refused with "no function named main") starts at `main`,
/// found from the program's entry code: the capture counts what the same
/// program with its symbol table counts from its named `main`, to the
/// instruction. Both runs see the same stack layout (paths of the same
/// length, [`unrandomised`]): the C library's string functions take more
/// or fewer steps with the alignment of what they scan (4 instructions
/// apart in one CI run without).
#[test]
fn all_on_a_stripped_program_starts_at_main_found_from_its_entry_code() {
    let test = "all_on_a_stripped_program_starts_at_main_found_from_its_entry_code";
    if !gcc_and_setarch_or_skip(test) {
        return;
    }
    let dir = scratch("stripped_all");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let named = dir.join("named_p");
    let stripped = dir.join("strip_p");
    std::fs::copy(&program, &named).unwrap();
    std::fs::copy(&program, &stripped).unwrap();
    assert!(Command::new("strip")
        .arg(&stripped)
        .status()
        .unwrap()
        .success());
    let mut counts = Vec::new();
    for (bin, dump) in [(&named, "named_p.ccdump"), (&stripped, "strip_p.ccdump")] {
        let mut cmd = unrandomised(&dir);
        cmd.env("COLDCACHE_LIB", library())
            .args([
                "record",
                "--cache",
                "jaguar",
                "--no-resolve",
                "--all",
                "-o",
                dump,
            ])
            .arg("--")
            .arg(bin)
            .arg("once");
        let out = run_with_deadline(cmd, dump);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{dump}: {stderr}");
        if bin == &stripped {
            assert!(
                stderr.contains("main found at") && stderr.contains("entry code"),
                "the stripped run says how main was found: {stderr}"
            );
        }
        let d = load(&dir.join(dump));
        assert_eq!(d.meta.trigger, "function:main", "{dump}");
        counts.push(d.meta.instructions);
    }
    assert!(counts[0] > 1000, "{counts:?}");
    assert_eq!(counts[0], counts[1], "named main against stripped main");
}

/// The mangled name of the symbol of `binary` that `c++filt` demangles
/// to `demangled` (binutils as the independent truth).
fn mangled_by_binutils(binary: &Path, demangled: &str) -> String {
    let nm = Command::new("nm").arg(binary).output().unwrap();
    let names: Vec<String> = text(&nm.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(String::from))
        .collect();
    let filt = Command::new("c++filt")
        .args(&names)
        .output()
        .expect("c++filt");
    let plain: Vec<String> = text(&filt.stdout).lines().map(String::from).collect();
    let i = plain
        .iter()
        .position(|n| n == demangled)
        .unwrap_or_else(|| panic!("{demangled} not in nm's list"));
    names[i].clone()
}

/// `--function` takes C++ names as `report` prints them (with or without
/// the signature, or their end after `::`), mangled names and wildcards;
/// two functions matching is refused with both listed.
#[test]
fn cpp_names_and_wildcards_resolve_before_the_run() {
    if !gcc_or_skip("cpp_names_and_wildcards_resolve_before_the_run")
        || !library::have("g++")
        || !library::have("c++filt")
    {
        return;
    }
    let dir = scratch("cpp_names");
    let program = build_with("tests-programs/symbols/names.cpp", &dir, false);
    let p = program.to_str().unwrap();
    let dot = mangled_by_binutils(&program, "geo::Vec2::dot(geo::Vec2 const&) const");
    for name in [
        "geo::Vec2::dot",
        "geo::Vec2::dot(geo::Vec2 const&) const",
        "Vec2::dot",
        dot.as_str(),
        "geo::Vec2::do?",
    ] {
        let out = run_with_deadline(
            record(&dir, &["--function", name, "-o", "dot.ccdump", "--", p]),
            name,
        );
        let err = text(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        let d = load(&dir.join("dot.ccdump"));
        assert_eq!(d.meta.trigger, format!("function:{dot}"), "{name}");
        assert!(d.meta.instructions > 0, "{name}");
        if name != dot {
            assert!(
                err.contains(&format!(
                    "capturing geo::Vec2::dot(geo::Vec2 const&) const [{dot}]"
                )),
                "{name}: {err}"
            );
        }
    }
    // total<geo::Vec2> and total<int>: ambiguous, both listed.
    let out = run_with_deadline(
        record(&dir, &["--function", "geo::total*", "--", p]),
        "total",
    );
    refused_with(
        &out,
        &[
            "--function geo::total*: 2 functions match",
            "geo::Vec2 geo::total<geo::Vec2>(",
            "int geo::total<int>(",
        ],
        "total",
    );
}

/// C names with a wildcard (Callgrind's `--toggle-collect` spelling) and
/// Rust paths without the crate name or hash.
#[test]
fn wildcards_and_rust_paths_resolve_before_the_run() {
    if !gcc_or_skip("wildcards_and_rust_paths_resolve_before_the_run") {
        return;
    }
    let dir = scratch("rust_names");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let out = run_with_deadline(
        record(
            &dir,
            &[
                "--function",
                "count_and_so*",
                "-o",
                "c.ccdump",
                "--",
                program.to_str().unwrap(),
                "once",
            ],
        ),
        "wildcard",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        load(&dir.join("c.ccdump")).meta.trigger,
        "function:count_and_sort"
    );
    let src = dir.join("counter.rs");
    std::fs::write(
        &src,
        "mod ns {\n pub struct Counter(pub u64);\n impl Counter {\n  #[inline(never)]\n  \
         pub fn bump(&mut self, k: u64) { self.0 = self.0.wrapping_mul(31).wrapping_add(k); }\n }\n}\n\
         fn main() { let mut c = ns::Counter(1); for k in 0..std::hint::black_box(100) { c.bump(k); }\n \
         println!(\"{}\", c.0); }\n",
    )
    .unwrap();
    let bin = dir.join("counter");
    let st = Command::new("rustc")
        .args(["-O", "-g", "-o"])
        .arg(&bin)
        .arg(&src)
        .status();
    if !st.is_ok_and(|s| s.success()) {
        eprintln!("SKIP wildcards_and_rust_paths_resolve_before_the_run (Rust part): rustc failed");
        return;
    }
    let out = run_with_deadline(
        record(
            &dir,
            &[
                "--function",
                "ns::Counter::bump",
                "-o",
                "r.ccdump",
                "--",
                bin.to_str().unwrap(),
            ],
        ),
        "rust",
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("--function ns::Counter::bump: capturing counter::ns::Counter::bump [_ZN"),
        "{err}"
    );
    let d = load(&dir.join("r.ccdump"));
    assert!(
        d.meta
            .trigger
            .starts_with("function:_ZN7counter2ns7Counter4bump"),
        "{}",
        d.meta.trigger
    );
    assert!(d.meta.instructions > 0);
}

/// Whether `child` is still running (not exited, not a zombie).
fn alive(child: &mut std::process::Child) -> bool {
    child.try_wait().unwrap().is_none()
}

/// Regression: `coldcache trigger` sent SIGUSR2 to any process and exited
/// 0 (`sleep 100 & coldcache trigger $!` killed the sleep). A process
/// without libcoldcache, or with it but not recorded with `--signal`, is
/// refused and survives.
#[test]
fn trigger_refuses_a_process_not_running_coldcache() {
    for (preload, says) in [
        (false, "is not running coldcache"),
        (true, "does not catch SIGUSR2"),
    ] {
        let mut sleep = Command::new("sleep");
        sleep.arg("100");
        if preload {
            sleep.env("LD_PRELOAD", library());
        }
        let mut sleep = sleep.spawn().unwrap();
        // Until the loader has mapped what it maps.
        let maps = format!("/proc/{}/maps", sleep.id());
        let start = std::time::Instant::now();
        while preload
            && !std::fs::read_to_string(&maps)
                .unwrap_or_default()
                .contains("libcoldcache")
        {
            assert!(start.elapsed() < programs::DEADLINE);
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = Command::new(COLDCACHE)
            .args(["trigger", &sleep.id().to_string()])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains(&format!("process {} (sleep) ", sleep.id())) && err.contains(says),
            "{err}"
        );
        std::thread::sleep(Duration::from_millis(200));
        assert!(alive(&mut sleep), "the sleep was killed");
        sleep.kill().unwrap();
        sleep.wait().unwrap();
    }
}

/// A function of a library the program links, found where the loader
/// will find it (here through a relative `LD_LIBRARY_PATH`), before the
/// run; the capture is planted in that library.
#[test]
fn a_function_of_a_linked_library_is_found_as_the_loader_finds_it() {
    if !gcc_or_skip("a_function_of_a_linked_library_is_found_as_the_loader_finds_it") {
        return;
    }
    let dir = scratch("linked_library");
    std::fs::write(
        dir.join("l.c"),
        "int lib_sum(int n){int s=0;for(int i=0;i<n;i++)s+=i*i;return s;}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("m.c"),
        "#include <stdio.h>\nint lib_sum(int);\nint main(void){printf(\"%d\\n\",lib_sum(50));return 0;}\n",
    )
    .unwrap();
    for args in [
        &["-shared", "-fPIC", "-O1", "-o", "libl.so", "l.c"][..],
        &["-O1", "-o", "m", "m.c", "-L.", "-ll"][..],
    ] {
        assert!(Command::new("gcc")
            .args(args)
            .current_dir(&dir)
            .status()
            .unwrap()
            .success());
    }
    let mut cmd = record(
        &dir,
        &["--function", "lib_sum", "-o", "l.ccdump", "--", "./m"],
    );
    cmd.env("LD_LIBRARY_PATH", ".");
    let out = run_with_deadline(cmd, "linked library");
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(text(&out.stdout), "40425\n");
    let d = load(&dir.join("l.ccdump"));
    assert_eq!(d.meta.trigger, "function:lib_sum");
    // lib_sum(50): a loop of 50 iterations, so well over 50 instructions.
    assert!(d.meta.instructions > 50, "{}", d.meta.instructions);
}

/// Spawns `cmd` with piped outputs; returns it and its program's pid.
fn spawn_recording(mut cmd: Command) -> (std::process::Child, String) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // `record` at SIGINT's default action whatever this test process was
    // started with (a job started in the background by a non-interactive
    // shell has SIGINT and SIGQUIT ignored, and `record` and the program
    // keep an ignored SIGINT ignored, as `nohup` users expect).
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: runs in the child between fork and exec; signal(2) is
        // async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            })
        };
    }
    let child = cmd.spawn().unwrap();
    let pid = program_of(child.id());
    (child, pid)
}

/// Waits (under the deadline) until `path` exists.
fn wait_for(path: &Path) {
    let start = std::time::Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < programs::DEADLINE,
            "no {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Regression: `coldcache trigger PID` during a `--function` capture
/// killed the program (SIGUSR2 with no handler), then was refused. It stops
/// the capture, of any kind (`--function` with calls still to come, `--all`),
/// the dump is written at once, cut short "stopped by `coldcache trigger`",
/// with what ran so far, and the program runs on to its end.
#[test]
fn trigger_stops_a_function_or_all_capture_and_keeps_its_dump() {
    if !gcc_or_skip("trigger_stops_a_function_or_all_capture_and_keeps_its_dump") {
        return;
    }
    let dir = scratch("trigger_function");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    for (what, trigger) in [
        (
            "function",
            &["--function", "count_and_sort", "--calls", "1000000000"][..],
        ),
        ("all", &["--all"][..]),
    ] {
        let _ = std::fs::remove_file(dir.join("stop"));
        let dump = dir.join(format!("{what}.ccdump"));
        let _ = std::fs::remove_file(&dump);
        let mut args = trigger.to_vec();
        let o = format!("{what}.ccdump");
        args.extend(["-o", &o, "--", program.to_str().unwrap(), "windows"]);
        let (child, pid) = spawn_recording(record(&dir, &args));
        std::thread::sleep(Duration::from_millis(500));
        let t = Command::new(COLDCACHE)
            .args(["trigger", &pid])
            .output()
            .unwrap();
        assert!(t.status.success(), "{what}: {}", text(&t.stderr));
        // Written while the program still runs (it spins until `stop`, at
        // most 30 s). Regression: in fast mode a trigger that interrupted
        // the dispatcher (handing the thread to the trap engine) left the
        // capture stopping with nobody to write it, until the program's
        // exit, 30 s later.
        let asked = std::time::Instant::now();
        wait_for(&dump);
        assert!(
            asked.elapsed() < Duration::from_secs(20),
            "{what}: the dump was written at the program's exit, not when triggered"
        );
        std::fs::write(dir.join("stop"), b"").unwrap();
        let out = wait_with_deadline(child, what);
        let err = text(&out.stderr);
        // The program ended by itself: its last line printed, no signal.
        assert_eq!(text(&out.stdout), "ready\n1\n", "{what}: {err}");
        assert!(out.status.success(), "{what}: {err}");
        let d = load(&dump);
        assert_eq!(
            d.meta.cut_short.as_deref(),
            Some("stopped by `coldcache trigger`"),
            "{what}"
        );
        assert!(d.meta.instructions > 0, "{what}: empty dump");
    }
}

/// Regression: Ctrl-C during a capture lost it when the program handles
/// SIGINT itself (the capture ran on), and named a default-action SIGINT
/// "killed". `record` interrupted: the capture stops and its dump is
/// written, cut short "interrupted (SIGINT)", while the program goes on as
/// it would have: its own handler gets the first SIGINT and the second
/// (the program ends its loop when it has counted two, and exits 0); a
/// program at SIGINT's default dies of it, and `record` exits 130.
#[test]
fn ctrl_c_ends_the_capture_keeps_the_dump_and_the_program_goes_on() {
    if !gcc_or_skip("ctrl_c_ends_the_capture_keeps_the_dump_and_the_program_goes_on") {
        return;
    }
    let dir = scratch("ctrl_c");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let interrupt = |pid: u32| {
        // SAFETY: kill(2) to the `record` process this test started.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
    };
    // The program's own handler.
    let _ = std::fs::remove_file(dir.join("h.ccdump"));
    let cmd = record(
        &dir,
        &[
            "--all",
            "-o",
            "h.ccdump",
            "--",
            program.to_str().unwrap(),
            "sigint",
        ],
    );
    let (child, _) = spawn_recording(cmd);
    std::thread::sleep(Duration::from_millis(500));
    interrupt(child.id());
    wait_for(&dir.join("h.ccdump"));
    interrupt(child.id());
    let out = wait_with_deadline(child, "own handler");
    let err = text(&out.stderr);
    assert_eq!(text(&out.stdout), "ready\n2 1\n", "{err}");
    assert!(out.status.success(), "{err}");
    let d = load(&dir.join("h.ccdump"));
    assert_eq!(d.meta.cut_short.as_deref(), Some("interrupted (SIGINT)"));
    assert!(d.meta.instructions > 0);
    assert!(err.contains("capture written to"), "{err}");

    // SIGINT at its default: the dump, then the program dies of it.
    let _ = std::fs::remove_file(dir.join("stop"));
    let _ = std::fs::remove_file(dir.join("d.ccdump"));
    let cmd = record(
        &dir,
        &[
            "--all",
            "-o",
            "d.ccdump",
            "--",
            program.to_str().unwrap(),
            "windows",
        ],
    );
    let (child, _) = spawn_recording(cmd);
    std::thread::sleep(Duration::from_millis(500));
    interrupt(child.id());
    let out = wait_with_deadline(child, "default action");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("killed by SIGINT"), "{err}");
    let d = load(&dir.join("d.ccdump"));
    assert_eq!(d.meta.cut_short.as_deref(), Some("interrupted (SIGINT)"));
    assert!(d.meta.instructions > 0);
}

/// Regression: `coldcache diff` of two dumps simulated with different
/// caches compared their misses silently. It says so on its first line,
/// naming the setting that differs (here the first level's size, changed
/// by hand in a copy of the first dump's own configuration), and says
/// nothing when both used the same cache.
#[test]
fn diff_of_dumps_with_different_caches_says_so_at_the_top() {
    if !gcc_or_skip("diff_of_dumps_with_different_caches_says_so_at_the_top") {
        return;
    }
    let dir = scratch("diff_caches");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let prog = program.to_str().unwrap();
    let rec = |cache: &str, out: &str| {
        let mut cmd = Command::new(COLDCACHE);
        cmd.current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            .args(["record", "--cache", cache, "--no-resolve"])
            .args([
                "--function",
                "count_and_sort",
                "-o",
                out,
                "--",
                prog,
                "once",
            ]);
        let o = run_with_deadline(cmd, out);
        assert!(o.status.success(), "{}", text(&o.stderr));
    };
    rec("jaguar", "a.ccdump");
    rec("jaguar", "b.ccdump");
    let toml = load(&dir.join("a.ccdump")).meta.cache_toml;
    // The first level's size, doubled.
    let (head, rest) = toml.split_once("[[level]]").unwrap();
    let name = rest
        .lines()
        .find_map(|l| l.strip_prefix("name = "))
        .unwrap()
        .trim_matches('"')
        .to_string();
    let size_line = rest.lines().find(|l| l.starts_with("size = ")).unwrap();
    let size = size_line["size = ".len()..].trim_matches('"').to_string();
    let (n, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit()).unwrap());
    let doubled = format!("{}{unit}", n.parse::<u64>().unwrap() * 2);
    let changed = format!(
        "{head}[[level]]{}",
        rest.replacen(size_line, &format!("size = \"{doubled}\""), 1)
    );
    std::fs::write(dir.join("bigger.toml"), changed).unwrap();
    rec("bigger.toml", "c.ccdump");
    let diff = |a: &str, b: &str| {
        let o = Command::new(COLDCACHE)
            .current_dir(&dir)
            .args(["diff", a, b])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let same = diff("a.ccdump", "b.ccdump");
    assert!(same.starts_with("before: "), "{same}");
    assert!(!same.contains("different caches"), "{same}");
    let other = diff("a.ccdump", "c.ccdump");
    let first = other.lines().next().unwrap();
    assert!(
        first.starts_with("warning: the two dumps were simulated with different caches"),
        "{other}"
    );
    assert!(
        first.contains(&format!("{name} size {size} → {doubled}")),
        "{first}"
    );
}

/// Whether `stderr` has a progress line (`coldcache: 1,234 instructions,
/// 5,678/s, 1 s elapsed`).
fn has_progress(stderr: &str) -> bool {
    stderr.split(['\n', '\r']).any(|l| {
        l.strip_prefix("coldcache: ")
            .and_then(|r| r.split_once(" instructions, "))
            .is_some_and(|(n, rest)| {
                !n.is_empty()
                    && n.chars().all(|c| c.is_ascii_digit() || c == ',')
                    && rest.contains("/s, ")
                    && rest.contains(" elapsed")
            })
    })
}

/// Regression: an 8-minute capture printed nothing, and `--progress`
/// started the library's writer thread, which switches glibc out of its
/// single-threaded paths and so changed the instructions counted. Progress
/// is shown by default on a terminal (run under `script`), not on a pipe;
/// `--progress`/`--no-progress` override; and a capture counts the same
/// instructions, to the one, with progress as without.
#[test]
fn progress_by_default_on_a_terminal_and_counts_unchanged() {
    if !gcc_or_skip("progress_by_default_on_a_terminal_and_counts_unchanged") {
        return;
    }
    let dir = scratch("progress");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let prog = program.to_str().unwrap();
    // Counts: the same function captured with and without progress, with
    // address-space randomisation off (`setarch -R`): with it, identical
    // runs differ by a few instructions (alignment-dependent paths).
    if Command::new("setarch")
        .args(["x86_64", "-R", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        let mut counts = Vec::new();
        for flag in ["--progress", "--no-progress", "--progress"] {
            let out = format!("{}.ccdump", &flag[2..]);
            let mut cmd = Command::new("setarch");
            cmd.current_dir(&dir)
                .env("COLDCACHE_LIB", library())
                .args(["x86_64", "-R", COLDCACHE, "record", "--cache", "jaguar"])
                .args(["--no-resolve", flag, "--function", "count_and_sort"])
                .args(["-o", &out, "--", prog, "once"]);
            let o = run_with_deadline(cmd, flag);
            assert!(o.status.success(), "{flag}: {}", text(&o.stderr));
            counts.push(load(&dir.join(&out)).meta.instructions);
        }
        assert_eq!(
            counts[0], counts[1],
            "instructions with and without progress"
        );
        assert_eq!(
            counts[0], counts[2],
            "instructions with and without progress"
        );
    } else {
        eprintln!("(`setarch -R` unavailable: the counts are not compared)");
    }
    // Shown: a capture of about 2.5 s, the program stopped by a file.
    let long = |flags: &[&str], tty: bool| -> String {
        let _ = std::fs::remove_file(dir.join("stop"));
        let stopper = {
            let stop = dir.join("stop");
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(2500));
                std::fs::write(stop, b"").unwrap();
            })
        };
        let mut args = flags.to_vec();
        args.extend(["--all", "-o", "long.ccdump", "--", prog, "windows"]);
        let out = if tty {
            let line = format!(
                "{} record --cache jaguar --no-resolve {}",
                COLDCACHE,
                args.join(" ")
            );
            let mut cmd = Command::new("script");
            cmd.current_dir(&dir).env("COLDCACHE_LIB", library()).args([
                "-qec",
                &line,
                "/dev/null",
            ]);
            run_with_deadline(cmd, "under script")
        } else {
            run_with_deadline(record(&dir, &args), "long")
        };
        stopper.join().unwrap();
        assert!(out.status.success(), "{flags:?}: {}", text(&out.stderr));
        // Under `script` both streams arrive on its standard output.
        format!("{}{}", text(&out.stderr), text(&out.stdout))
    };
    let shown = long(&["--progress"], false);
    assert!(has_progress(&shown), "--progress: {shown}");
    let quiet = long(&[], false);
    assert!(!has_progress(&quiet), "default on a pipe: {quiet}");
    if library::have("script") {
        let tty = long(&[], true);
        assert!(has_progress(&tty), "default on a terminal: {tty}");
        let off = long(&["--no-progress"], true);
        assert!(!has_progress(&off), "--no-progress on a terminal: {off}");
    } else {
        eprintln!("(`script` missing: the terminal default is not checked)");
    }
}

/// `objdump -d -C`'s labels in the PLT sections of `bin`.
fn objdump_plt_labels(bin: &Path) -> Vec<String> {
    let out = Command::new("objdump")
        .args(["-d", "-C", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got"])
        .arg(bin)
        .output()
        .unwrap();
    text(&out.stdout)
        .lines()
        .filter_map(|l| Some(l.split_once(" <")?.1.strip_suffix(">:")?.to_string()))
        .collect()
}

/// Regression: the first call of an imported function goes through lazy
/// binding (the stub, then PLT0), and the PLT0 part showed as the stub's
/// run-time address (`0x5651a811b0b0 in prog`): a row of its own in every
/// report, "gone" and "new" in every diff. In a build with `.plt` only and
/// one with `.plt.sec` (`-fcf-protection=full -z ibtplt`), every function
/// of the program's PLT is named as `objdump -d` labels it (`qsort@plt`;
/// `.plt`, or `free@plt-0x10` for PLT0, which we name `.plt`), no row is an
/// address, and the diff of the two builds has no PLT row gone or new.
#[test]
fn plt_stubs_are_named_as_objdump_names_them_in_reports_and_diffs() {
    if !gcc_or_skip("plt_stubs_are_named_as_objdump_names_them_in_reports_and_diffs")
        || !library::have("objdump")
    {
        return;
    }
    let dir = scratch("plt");
    let src = "tests-programs/capture/workflow.c";
    let plain = programs::compile(
        src,
        &dir.join("plain"),
        &["-O1", "-g", "-fcf-protection=none"],
        false,
    );
    let ibt = programs::compile(
        src,
        &dir.join("ibt"),
        &["-O1", "-g", "-fcf-protection=full", "-Wl,-z,ibtplt"],
        false,
    );
    let mut dumps = Vec::new();
    for bin in [&plain, &ibt] {
        let labels = objdump_plt_labels(bin);
        let name = bin.file_name().unwrap().to_str().unwrap();
        let dump = format!("{name}.ccdump");
        let mut cmd = Command::new(COLDCACHE);
        cmd.current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            .args([
                "record",
                "--cache",
                "jaguar",
                "--function",
                "count_and_sort",
            ])
            .args(["-o", &dump, "--", bin.to_str().unwrap(), "once"]);
        let o = run_with_deadline(cmd, name);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let out = Command::new(COLDCACHE)
            .current_dir(&dir)
            .args(["report", &dump, "--limit", "1000", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows = v["rows"].as_array().expect("rows");
        let own: Vec<&str> = rows
            .iter()
            .filter(|r| r["module"].as_str().is_some_and(|m| m.ends_with(name)))
            .filter_map(|r| r["name"].as_str())
            .collect();
        for f in &own {
            assert!(!f.starts_with("0x"), "{name}: unnamed {f}: {own:?}");
        }
        let plt: Vec<&&str> = own
            .iter()
            .filter(|f| f.ends_with("@plt") || **f == ".plt")
            .collect();
        for f in ["malloc@plt", "qsort@plt", "free@plt", ".plt"] {
            assert!(plt.iter().any(|p| **p == f), "{name}: no {f}: {own:?}");
        }
        for f in &plt {
            assert!(
                labels.iter().any(|l| l == **f)
                    || (**f == ".plt" && labels.iter().any(|l| l.contains("@plt-0x"))),
                "{name}: {f} is not an objdump label: {labels:?}"
            );
        }
        dumps.push(dump);
    }
    let out = Command::new(COLDCACHE)
        .current_dir(&dir)
        .args(["diff", &dumps[0], &dumps[1], "--json", "--limit", "1000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in v["rows"].as_array().expect("rows") {
        let label = r["label"].as_str().unwrap_or_default();
        let status = r["status"].as_str().unwrap_or_default();
        assert!(!label.starts_with("0x"), "diff row {label} ({status})");
        if label.contains("@plt") || label.starts_with(".plt") {
            assert_eq!(status, "changed", "{label}");
        }
    }
}

/// The workflow program in `windows` mode with the library preloaded and
/// an `--all` capture armed as `record` arms it but without `record`'s
/// trigger handler: a program using the library on its own, its SIGUSR1
/// and SIGUSR2 left at their default.
fn preloaded_all(dir: &Path, dump: &str, program: &Path) -> Command {
    let cfg = coldcache_config::resolve("jaguar").unwrap();
    let mut cmd = Command::new(program);
    cmd.current_dir(dir)
        .arg("windows")
        .env("LD_PRELOAD", library())
        .env("COLDCACHE_LIB", library())
        .env("COLDCACHE_RECORD", "1")
        .env("COLDCACHE_QUIET", "1")
        .env("COLDCACHE_CACHE_JSON", serde_json::to_string(&cfg).unwrap())
        .env("COLDCACHE_CACHE_NAME", "jaguar")
        .env("COLDCACHE_OUTPUT", dir.join(dump))
        .env("COLDCACHE_THREADS", "caller")
        .env("COLDCACHE_TRIGGER", "function")
        .env("COLDCACHE_FUNCTION", "main")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// SIGUSR1 and SIGUSR2 are back on the fatal-signal list: without
/// `record` (no trigger handler), a capture's dump survives a SIGUSR2 that
/// ends the program (it used to be lost), while `coldcache trigger`, which
/// queues the signal with its mark, stops the capture and the program
/// runs on (it used to be refused: the signal was not caught).
#[test]
fn sigusr2_keeps_the_dump_and_a_trigger_stops_a_capture_without_record() {
    if !gcc_or_skip("sigusr2_keeps_the_dump_and_a_trigger_stops_a_capture_without_record") {
        return;
    }
    let dir = scratch("usr2");
    let program = build_with("tests-programs/capture/workflow.c", &dir, false);
    let _ = std::fs::remove_file(dir.join("stop"));
    let _ = std::fs::remove_file(dir.join("t.ccdump"));
    let child = preloaded_all(&dir, "t.ccdump", &program).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let t = Command::new(COLDCACHE)
        .args(["trigger", &child.id().to_string()])
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", text(&t.stderr));
    wait_for(&dir.join("t.ccdump"));
    std::fs::write(dir.join("stop"), b"").unwrap();
    let out = wait_with_deadline(child, "trigger");
    assert_eq!(text(&out.stdout), "ready\n1\n", "{}", text(&out.stderr));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let d = load(&dir.join("t.ccdump"));
    assert_eq!(
        d.meta.cut_short.as_deref(),
        Some("stopped by `coldcache trigger`")
    );

    let _ = std::fs::remove_file(dir.join("stop"));
    let _ = std::fs::remove_file(dir.join("k.ccdump"));
    let child = preloaded_all(&dir, "k.ccdump", &program).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) to the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGUSR2) }, 0);
    let out = wait_with_deadline(child, "kill -USR2");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGUSR2),
        "{}",
        text(&out.stderr)
    );
    let d = load(&dir.join("k.ccdump"));
    assert_eq!(
        d.meta.cut_short.as_deref(),
        Some("the program was killed by SIGUSR2")
    );
    assert!(d.meta.instructions > 0);
}

/// `objdump -d` of `binary` (with `-M intel` when `intel`): address →
/// (mnemonic, operands without objdump's `# …` comment and `<symbol>`).
fn objdump(binary: &Path, intel: bool) -> std::collections::HashMap<u64, (String, String)> {
    let mut cmd = Command::new("objdump");
    cmd.args(["-d", "-w", "--no-show-raw-insn"]);
    if intel {
        cmd.args(["-M", "intel"]);
    }
    let out = cmd.arg(binary).output().expect("run objdump");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut map = std::collections::HashMap::new();
    for line in text(&out.stdout).lines() {
        let Some((addr, ins)) = line.trim_start().split_once(":\t") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let ins = ins.split(" #").next().unwrap();
        let ins = ins.split(" <").next().unwrap().trim();
        let (m, ops) = ins.split_once(' ').unwrap_or((ins, ""));
        map.insert(addr, (m.to_string(), ops.trim().to_string()));
    }
    map
}

/// `report --asm` rows: (address as printed, mnemonic, operands, executed
/// instructions).
fn asm_rows(report: &str) -> Vec<(String, String, String, u64)> {
    report
        .lines()
        .skip_while(|l| !l.starts_with("instructions"))
        .skip(1)
        .filter_map(|l| {
            let (counts, rest) = l.split_once(':').filter(|(c, _)| !c.contains('#'))?;
            let mut c = counts.split_whitespace();
            let n: u64 = c.next()?.parse().ok()?;
            let addr = c.next()?.to_string();
            let ins = rest.split("    #").next()?.trim();
            let (m, ops) = ins.split_once(' ').unwrap_or((ins, ""));
            Some((addr, m.to_string(), ops.trim().to_string(), n))
        })
        .collect()
}

/// Regression: `report --asm` showed run-time addresses
/// (`0x5651a811b1e0`) and MASM syntax; it shows what `objdump -d` and
/// `perf annotate` show: ELF file addresses and AT&T syntax, Intel with
/// `--syntax intel`. Truth: objdump's own disassembly of the binary (a
/// position-independent executable, so run-time and file addresses
/// differ), instruction by instruction over the hottest function.
#[test]
fn report_asm_shows_objdump_addresses_and_att_syntax() {
    if !gcc_or_skip("report_asm_shows_objdump_addresses_and_att_syntax")
        || !library::have("objdump")
    {
        return;
    }
    let dir = scratch("asm");
    let program = programs::compile(
        "examples/programs/pushbuffer.c",
        &dir.join("pushbuffer"),
        &["-O2", "-g", "-fPIE", "-pie"],
        false,
    );
    let _ = std::fs::remove_file(dir.join("pb.ccdump"));
    let out = run_with_deadline(
        {
            let mut c = Command::new(COLDCACHE);
            c.current_dir(&dir)
                .env("COLDCACHE_LIB", library())
                .args(["record", "--cache", "jaguar", "--function", "run_frames"])
                .args(["-o", "pb.ccdump", "--"])
                .arg(&program);
            c
        },
        "record pushbuffer",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dump = Dump::from_bytes(&std::fs::read(dir.join("pb.ccdump")).unwrap()).unwrap();
    let exe = dump
        .modules
        .iter()
        .find(|m| m.path.ends_with("/pushbuffer"))
        .expect("the executable's module");
    assert!(exe.start > 0x10_0000, "a PIE loads high: {:#x}", exe.start);
    for (syntax, intel) in [(None, false), (Some("att"), false), (Some("intel"), true)] {
        let mut c = Command::new(COLDCACHE);
        c.args([
            "report",
            "pb.ccdump",
            "--view",
            "annotate",
            "build_push_buffer",
        ])
        .args(["--asm", "--columns", "instructions"])
        .current_dir(&dir);
        if let Some(s) = syntax {
            c.args(["--syntax", s]);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let report = text(&out.stdout);
        let rows = asm_rows(&report);
        let truth = objdump(&program, intel);
        // The hot loop: 6144 tests of the flag (8 frames × 768 items).
        assert!(rows.len() >= 15, "{syntax:?}: {report}");
        assert!(rows.iter().any(|r| r.3 == 6144), "{syntax:?}: {report}");
        for (addr, m, ops, _) in &rows {
            let a = u64::from_str_radix(addr, 16).unwrap_or_else(|_| {
                panic!("{syntax:?}: {addr:?} is not objdump's address\n{report}")
            });
            let Some((tm, tops)) = truth.get(&a) else {
                panic!("{syntax:?}: objdump has no instruction at {a:x}\n{report}");
            };
            assert_eq!(m, tm, "{syntax:?} at {a:x}: mnemonic\n{report}");
            // AT&T operands as objdump spells them, but for a nop's
            // padding displacement (`0x0(%rax,%rax,1)`).
            if !intel && !m.starts_with("nop") {
                assert_eq!(ops, tops, "{syntax:?} at {a:x}: operands\n{report}");
            }
        }
    }
}

/// Regression: `-o -` wrote a file named `-` (`record`, `zones record`),
/// and `resolve -o -` called standard output "-". Every command with `-o`:
/// `export`, `resolve` and the zones views write to standard output (what
/// arrives there is the file itself: a dump that loads, JSON that parses,
/// folded stacks); `record` and `zones record` refuse it before the
/// program runs (the program shares standard output). No file named `-`
/// is left anywhere.
#[test]
fn dash_output_is_standard_output_or_refused_in_every_command() {
    if !gcc_or_skip("dash_output_is_standard_output_or_refused_in_every_command") {
        return;
    }
    let dir = scratch("dash");
    let _ = std::fs::remove_file(dir.join("-"));
    let zoned = programs::compile(
        "examples/programs/pushbuffer.c",
        &dir.join("zoned"),
        &["-O1", "-g", "-finstrument-functions"],
        false,
    );
    let run = |args: &[&str]| {
        let out = Command::new(COLDCACHE)
            .current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            .args(args)
            .output()
            .unwrap();
        assert!(!dir.join("-").exists(), "{args:?} wrote a file named -");
        out
    };
    // record, to a file, to have a dump and a zones recording.
    let _ = std::fs::remove_file(dir.join("d.ccdump"));
    let out = run_with_deadline(
        {
            let mut c = record(&dir, &["--all", "-o", "d.ccdump", "--"]);
            c.arg(&zoned);
            c
        },
        "record",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let z = run(&[
        "zones",
        "record",
        "-o",
        "z.zones",
        "--",
        zoned.to_str().unwrap(),
    ]);
    assert!(z.status.success(), "{}", text(&z.stderr));

    // Refused, before the program runs.
    let mut c = record(&dir, &["--all", "-o", "-", "--"]);
    c.arg(&zoned);
    let out = run_with_deadline(c, "record -o -");
    refused(&out, "-o -", "standard output", "record -o -");
    let mut c = record(&dir, &["--all", "--trace", "-", "--"]);
    c.arg(&zoned);
    let out = run_with_deadline(c, "record --trace -");
    refused(&out, "--trace -", "standard output", "record --trace -");
    let out = run(&["zones", "record", "-o", "-", "--", zoned.to_str().unwrap()]);
    refused(&out, "-o -", "standard output", "zones record -o -");

    // Written to standard output.
    let out = run(&["resolve", "d.ccdump", "-o", "-"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let d = Dump::from_bytes(&out.stdout).expect("a dump on standard output");
    assert!(d.symbols.is_some());
    assert!(
        text(&out.stderr).contains("standard output"),
        "{}",
        text(&out.stderr)
    );
    for format in ["callgrind", "folded", "json", "speedscope", "flamegraph"] {
        let out = run(&["export", "d.ccdump", "--format", format, "-o", "-"]);
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
        let s = text(&out.stdout);
        let ok = match format {
            "callgrind" => s.contains("events:"),
            "folded" => s.lines().all(|l| {
                l.rsplit_once(' ')
                    .is_some_and(|(_, n)| n.parse::<u64>().is_ok())
            }),
            "flamegraph" => s.contains("<svg"),
            _ => serde_json::from_str::<serde_json::Value>(&s).is_ok(),
        };
        assert!(ok && !s.is_empty(), "export {format} -o -: {s}");
    }
    let out = run(&["zones", "z.zones", "--format", "folded", "-o", "-"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("build_push_buffer"),
        "{}",
        text(&out.stdout)
    );
}

/// Regression: `record` needed `--` before the program; it takes the
/// program without it when nothing is ambiguous (every word from the
/// program on is the program's, options included; an unknown option
/// before it is still an error, not a program name).
#[test]
fn record_takes_the_program_without_dashes() {
    let dir = scratch("nodash");
    let run = |args: &[&str]| {
        let mut c = Command::new(COLDCACHE);
        c.current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            .arg("record")
            .args(args);
        run_with_deadline(c, "record")
    };
    // echo is stripped: no function to name, so nothing is captured and
    // record exits non-zero; what counts is what echo was given.
    let out = run(&[
        "--no-resolve",
        "-o",
        "e.ccdump",
        "/bin/echo",
        "-n",
        "--all",
        "-o",
        "x",
    ]);
    assert_eq!(text(&out.stdout), "--all -o x", "{}", text(&out.stderr));
    let out = run(&["-o", "e.ccdump", "--", "/bin/echo", "-n", "a", "--", "b"]);
    assert_eq!(text(&out.stdout), "a -- b", "{}", text(&out.stderr));
    let out = run(&["--fnction", "main", "/bin/echo", "ran"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("--fnction"),
        "{}",
        text(&out.stderr)
    );
}

/// Regression: `record` simulated the jaguar preset by default and `sim`
/// Cachegrind's model, and only `sim` took `--I1/--D1/--LL`. Truth: the
/// cache a dump was captured with (its embedded TOML, run through `sim`)
/// is the cache `sim` simulates with the same options.
#[test]
fn record_and_sim_agree_on_the_default_cache_and_overrides() {
    if !gcc_or_skip("record_and_sim_agree_on_the_default_cache_and_overrides") {
        return;
    }
    let dir = scratch("samecache");
    let program = programs::compile(
        "examples/programs/pushbuffer.c",
        &dir.join("pushbuffer"),
        &["-O1", "-g"],
        false,
    );
    let trace = library::repo().join("examples/traces/example.lackey.gz");
    let sim_config = |args: &[&str]| -> serde_json::Value {
        let out = Command::new(COLDCACHE)
            .arg("sim")
            .args(args)
            .arg("--json")
            .arg(&trace)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut c = v["config"].take();
        c.as_object_mut().unwrap().remove("name");
        c
    };
    for (overrides, dump) in [
        (&[][..], "default.ccdump"),
        (
            &["--D1", "4096,2,64", "--LL", "1048576,16,64"][..],
            "small.ccdump",
        ),
    ] {
        let _ = std::fs::remove_file(dir.join(dump));
        let mut c = Command::new(COLDCACHE);
        c.current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            .args(["record", "--no-resolve", "--all", "-o", dump])
            .args(overrides)
            .arg(&program);
        let out = run_with_deadline(c, "record");
        assert!(out.status.success(), "{overrides:?}: {}", text(&out.stderr));
        let d = Dump::from_bytes(&std::fs::read(dir.join(dump)).unwrap()).unwrap();
        assert!(
            d.meta.cache_name.starts_with("cachegrind"),
            "{}",
            d.meta.cache_name
        );
        for o in overrides {
            assert!(d.meta.cache_name.contains(o), "{}", d.meta.cache_name);
        }
        let toml = dir.join(format!("{dump}.toml"));
        std::fs::write(&toml, &d.meta.cache_toml).unwrap();
        let recorded = sim_config(&["--cache", toml.to_str().unwrap()]);
        assert_eq!(recorded, sim_config(overrides), "{overrides:?}");
        if !overrides.is_empty() {
            assert_ne!(recorded, sim_config(&[]), "the overrides changed nothing");
        }
    }
}

/// Regression: `scripts/demo.sh` built silently for minutes and ended on a
/// directory name. It says what it builds while it builds and ends with
/// the next steps: the `coldcache ui` command on the two dumps it wrote
/// (which exist and load), putting coldcache on PATH, and `record` on
/// one's own program. Run with the test's coldcache (`COLDCACHE`), so
/// nothing is built here; `scripts/demo-test.sh` (run by `.ci/run`) tests
/// the building path with a fake cargo (binaries where cargo says).
#[test]
fn demo_says_what_it_builds_and_ends_with_the_next_steps() {
    if !gcc_or_skip("demo_says_what_it_builds_and_ends_with_the_next_steps") {
        return;
    }
    let dir = scratch("demo");
    let out = run_with_deadline(
        {
            let mut c = Command::new("bash");
            c.arg(library::repo().join("scripts/demo.sh"))
                .arg(&dir)
                .env("COLDCACHE", COLDCACHE)
                .env("COLDCACHE_LIB", library());
            c
        },
        "scripts/demo.sh",
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let compiling = stdout.find("== compiling the example").expect(&stdout);
    let capturing = stdout.find("== capturing run_frames").expect(&stdout);
    let next = stdout.find("== next steps").expect(&stdout);
    assert!(compiling < capturing && capturing < next, "{stdout}");
    let tail = &stdout[next..];
    let (before, after) = (dir.join("before.ccdump"), dir.join("after.ccdump"));
    let ui = format!("coldcache ui {} {}", before.display(), after.display());
    assert!(tail.contains(&ui), "no `{ui}` in the next steps:\n{tail}");
    for p in [&before, &after] {
        Dump::from_bytes(&std::fs::read(p).unwrap()).expect("the dumps the ui line names");
    }
    assert!(tail.contains("export PATH="), "{tail}");
    assert!(tail.contains("coldcache record --function"), "{tail}");
    assert!(tail.contains("coldcache report"), "{tail}");
    // The building path announces itself (not run here: cargo inside
    // cargo test waits for the build lock).
    let script = std::fs::read_to_string(library::repo().join("scripts/demo.sh")).unwrap();
    let build = script.find("cargo build").unwrap();
    assert!(
        script[..build].contains("say \"building coldcache"),
        "demo.sh builds without saying so"
    );
}

/// The library of [`a_function_of_a_library_opened_with_dlopen_is_captured_with_in_dlopen`]:
/// `spin` (a static function: in `.symtab` only) runs `2n + 2`
/// instructions (`mov`, `n` times `dec`+`jnz`, `ret`), `libfn(n)` calls it:
/// `2n + 4`. Written in assembly so the counts hold whatever the compiler.
const DLOPEN_LIB: &str = r#"
__asm__(".text\n"
        ".type spin,@function\n"
        "spin:\n mov %rdi,%rax\n1:\n dec %rax\n jnz 1b\n ret\n"
        ".size spin,.-spin\n"
        ".globl libfn\n.type libfn,@function\n"
        "libfn:\n call spin\n ret\n"
        ".size libfn,.-libfn\n");
"#;

/// The program: writes a marker file (it ran), opens `./libdl1.so`, calls
/// `libfn(1000)` and `libfn(5000)`; with `reopen`, closes the library,
/// checks it is unmapped, opens it again and calls `libfn(300)`.
const DLOPEN_PROG: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
typedef void (*fn)(long);
static fn load(void **h) {
    *h = dlopen("./libdl1.so", RTLD_NOW);
    if (!*h) { fprintf(stderr, "%s\n", dlerror()); return 0; }
    return (fn)dlsym(*h, "libfn");
}
int main(int argc, char **argv) {
    FILE *m = fopen("ran", "w");
    if (m) fclose(m);
    void *h;
    fn f = load(&h);
    if (!f) return 2;
    f(1000);
    f(5000);
    printf("called twice\n");
    if (argc > 1 && strcmp(argv[1], "reopen") == 0) {
        dlclose(h);
        printf("%s\n", dlopen("./libdl1.so", RTLD_NOW | RTLD_NOLOAD) ? "still loaded" : "unloaded");
        f = load(&h);
        if (!f) return 2;
        f(300);
        printf("called again\n");
    }
    return 0;
}
"#;

/// Issue 18: a function of a library the program opens later with `dlopen`
/// was refused. With `--in-dlopen` it is looked up at each `dlopen` (its
/// exact name, a static function too) and the window counts the
/// instructions the assembly says (`2n + 4` for `libfn(n)`, `2n + 2` for
/// the static `spin`), in trap and fast mode; `--call` counts on across a
/// `dlclose` that unmaps the library and the `dlopen` that brings it back;
/// a `dlclose` between calls of the window ends it there, cut short, with
/// the calls captured so far; the program's output is unchanged. Without the flag the name is refused
/// before the run (the marker file is absent), with a hint naming the flag;
/// a name never loaded exits non-zero saying so.
#[test]
fn a_function_of_a_library_opened_with_dlopen_is_captured_with_in_dlopen() {
    if !gcc_or_skip("a_function_of_a_library_opened_with_dlopen_is_captured_with_in_dlopen") {
        return;
    }
    let dir = scratch("in_dlopen");
    std::fs::write(dir.join("l.c"), DLOPEN_LIB).unwrap();
    std::fs::write(dir.join("m.c"), DLOPEN_PROG).unwrap();
    for args in [
        &["-shared", "-fPIC", "-o", "libdl1.so", "l.c"][..],
        &["-O1", "-o", "m", "m.c", "-ldl"][..],
    ] {
        assert!(Command::new("gcc")
            .args(args)
            .current_dir(&dir)
            .status()
            .unwrap()
            .success());
    }
    let native = |arg: &str| {
        let mut c = Command::new(dir.join("m"));
        c.current_dir(&dir).arg(arg);
        let out = run_with_deadline(c, "native");
        assert!(out.status.success());
        text(&out.stdout)
    };
    let once = native("once");
    let reopen = native("reopen");
    assert_eq!(reopen, "called twice\nunloaded\ncalled again\n");
    let marker = dir.join("ran");

    // Without the flag: refused before the run, the flag named.
    let _ = std::fs::remove_file(&marker);
    let out = run_with_deadline(
        record(&dir, &["--function", "libfn", "--call", "2", "--", "./m"]),
        "without --in-dlopen",
    );
    refused_with(
        &out,
        &[
            "--function libfn: no function of that name",
            "add --in-dlopen",
        ],
        "without --in-dlopen",
    );
    assert!(!marker.exists(), "the program ran");
    // A wildcard cannot be looked up at load time: refused too.
    let out = run_with_deadline(
        record(&dir, &["--function", "lib*", "--in-dlopen", "--", "./m"]),
        "wildcard",
    );
    refused_with(&out, &["exact symbol name"], "wildcard");
    assert!(!marker.exists(), "the program ran");

    for mode in ["trap", "fast"] {
        for (name, which, call, arg, expected, output) in [
            ("libfn", "--call", "2", "once", 2 * 5000 + 4, &once),
            ("spin", "--call", "2", "once", 2 * 5000 + 2, &once),
            // Call 3 is in the library opened again after the dlclose.
            ("libfn", "--call", "3", "reopen", 2 * 300 + 4, &reopen),
            // Calls 1 and 2, then the dlclose ends the window.
            (
                "libfn",
                "--calls",
                "3",
                "reopen",
                2 * 1000 + 4 + 2 * 5000 + 4,
                &reopen,
            ),
        ] {
            let what = format!("{mode} {name} {which} {call} {arg}");
            let dump = format!("{name}{which}-{call}-{mode}.ccdump");
            let out = run_with_deadline(
                record(
                    &dir,
                    &[
                        "--mode",
                        mode,
                        "--function",
                        name,
                        "--in-dlopen",
                        which,
                        call,
                        "-o",
                        &dump,
                        "--",
                        "./m",
                        arg,
                    ],
                ),
                &what,
            );
            let err = text(&out.stderr);
            assert!(out.status.success(), "{what}: {err}");
            assert!(
                err.contains("will be looked for in each library the program opens with dlopen"),
                "{what}: {err}"
            );
            assert_eq!(&text(&out.stdout), output, "{what}");
            let d = load(&dir.join(&dump));
            assert_eq!(d.meta.trigger, format!("function:{name}"), "{what}");
            assert_eq!(d.meta.instructions, expected, "{what}");
            assert_eq!(
                d.meta
                    .cut_short
                    .as_ref()
                    .is_some_and(|c| c.contains("dlclose")),
                which == "--calls",
                "{what}: {:?}",
                d.meta.cut_short
            );
        }
    }

    // A name no library defines: the run goes on, then a non-zero exit.
    let out = run_with_deadline(
        record(
            &dir,
            &[
                "--function",
                "nosuch",
                "--in-dlopen",
                "-o",
                "n.ccdump",
                "--",
                "./m",
                "once",
            ],
        ),
        "never loaded",
    );
    let err = text(&out.stderr);
    assert_eq!(
        text(&out.stdout),
        once,
        "never loaded: the program's output"
    );
    assert!(!out.status.success(), "never loaded: exit 0\n{err}");
    assert!(
        err.contains("no capture was made: --function nosuch was never loaded"),
        "{err}"
    );
    assert!(!dir.join("n.ccdump").exists());
}

/// Regression (issue 33): `coldcache.h` said the C API's default mode was
/// trap, while a capture started with the default options (`mode` NULL,
/// no `COLDCACHE_MODE`, no `record`) runs in `auto`: fast where the
/// process allows it, else trap with the reason in a note. The header and
/// the captures agree: the header names `auto` as the default, and both
/// captures of `workflow api` (options from `coldcache_options_init`, and
/// NULL options) say fast mode or auto's fallback, never plain trap.
#[test]
fn the_c_api_default_mode_is_what_the_header_says() {
    if !gcc_or_skip("the_c_api_default_mode_is_what_the_header_says") {
        return;
    }
    let header = std::fs::read_to_string(library::repo().join("include/coldcache.h")).unwrap();
    let field = header
        .split("const char *mode;")
        .nth(1)
        .and_then(|rest| rest.split("};").next())
        .expect("coldcache_options has a mode field");
    assert!(
        field.contains("\"auto\" (the default")
            && !field.contains("\"trap\" (single-step, the default"),
        "the header's mode comment: {field}"
    );
    let dir = scratch("api-mode");
    let program = build_with("tests-programs/capture/workflow.c", &dir, true);
    let mut cmd = Command::new(&program);
    cmd.current_dir(&dir)
        .env_remove("COLDCACHE_MODE")
        .env_remove("LD_PRELOAD")
        .args(["api", "own.ccdump"]);
    let out = run_with_deadline(cmd, "workflow api");
    assert!(out.status.success(), "{}", text(&out.stderr));
    for name in ["own.ccdump", "coldcache.ccdump"] {
        let d = load(&dir.join(name));
        assert!(d.meta.instructions > 0, "{name}");
        let fast = d.meta.mode.engine == "fast";
        let fell_back = d.meta.mode.engine == "trap" && !d.meta.mode.fallback.is_empty();
        assert!(fast || fell_back, "{name}: {:?}", d.meta.mode);
    }
}
