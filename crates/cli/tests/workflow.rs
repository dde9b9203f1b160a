//! The capture workflow as a user lives it (issue 18): `record` fails
//! before the program runs when it cannot succeed (an unwritable `-o`, an
//! unknown `--function`), never loses or silently replaces a dump, exits
//! non-zero when a capture asked for was not made, and `trigger` signals
//! only programs that run coldcache. Programs: `tests-programs/capture/
//! workflow.c` and `tests-programs/symbols/names.cpp`, built by gcc/g++
//! (skipped with a message when missing), run under a deadline.

#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use library::{library, COLDCACHE};
use programs::{build_with, gcc_or_skip, run_with_deadline, scratch_in};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
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
