//! The CPython interpreter captured as a new user would: `record
//! --function PyRun_SimpleStringFlags` with the default options on a
//! `python -c` script that round-trips JSON (about 35 million
//! instructions; CPython's `_json` C extension is loaded by the script's
//! `import`, inside the window). Before the growing tables the capture
//! was cut at about 6 million instructions ("record reserve exhausted",
//! then "instruction reserve exhausted"), and before code mapped in the
//! window was translated every instruction of `_json` ran under the trap
//! engine.
//!
//! Checked: the capture completes (no `cut_short`), the program's output
//! equals an uncaptured run's, under 0.1% of the instructions ran under
//! the trap engine, none is unmodelled, and the instruction count is
//! within 2% of Callgrind's `--toggle-collect=PyRun_SimpleStringFlags`
//! (measured: +1.0% in this test, 34,394,663 against 34,054,703, and +1.4%
//! from a shell with another environment; the interpreter's own
//! work differs between the two runs, e.g. its cyclic garbage collector
//! ran in Callgrind's window and not in ours: its trigger counts the
//! allocations made since start-up, which depend on the environment the
//! tools give the program).
//!
//! Skipped with a message when no CPython whose symbol tables name
//! `PyRun_SimpleStringFlags` is found (Debian's `/usr/bin/python3` is
//! stripped; a pyenv or source build is not), or when valgrind is missing.
//! `COLDCACHE_TEST_PYTHON` names the interpreter to use.

use coldcache_dump::Dump;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use library::{have, COLDCACHE};
use programs::{run_within, scratch_in};

const SCRIPT: &str = "import json
d = [{'a': i, 'b': str(i) * 3, 'c': [i, i + 1]} for i in range(1500)]
s = json.dumps(d)
print(len(json.loads(s)), len(s))";

/// The interpreters to try: `COLDCACHE_TEST_PYTHON`, then the real
/// executables behind `python3` on PATH (a pyenv shim names its target in
/// `sys.executable`) and `/usr/bin/python3`.
fn candidates() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("COLDCACHE_TEST_PYTHON") {
        return vec![PathBuf::from(p)];
    }
    let mut v = Vec::new();
    if let Ok(out) = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
    {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !p.is_empty() {
            v.push(PathBuf::from(p));
        }
    }
    v.push(PathBuf::from("/usr/bin/python3"));
    v
}

#[test]
fn a_cpython_call_is_captured_whole_translated_and_agrees_with_callgrind() {
    const NAME: &str = "a_cpython_call_is_captured_whole_translated_and_agrees_with_callgrind";
    if !have("valgrind") {
        eprintln!("SKIP {NAME}: valgrind missing");
        return;
    }
    let dir = scratch_in("cpython", "all");
    let dump_path = dir.join("py.ccdump");
    for python in candidates() {
        let plain = Command::new(&python)
            .args(["-c", SCRIPT])
            .env("PYTHONHASHSEED", "0")
            .output();
        let Ok(plain) = plain else { continue };
        if !plain.status.success() {
            continue;
        }
        let mut cmd = Command::new(COLDCACHE);
        cmd.args([
            "record",
            "--no-resolve",
            "--function",
            "PyRun_SimpleStringFlags",
            "-o",
        ])
        .arg(&dump_path)
        .arg("--")
        .arg(&python)
        .args(["-c", SCRIPT])
        .env("PYTHONHASHSEED", "0");
        let out = run_within(cmd, "record python", Duration::from_secs(300));
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("no function named") {
            eprintln!(
                "{}: no PyRun_SimpleStringFlags in its symbol tables",
                python.display()
            );
            continue;
        }
        assert!(
            out.status.success(),
            "record {} failed:\n{stderr}",
            python.display()
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&plain.stdout),
            "the interpreter's output changed under the capture"
        );
        let d = Dump::from_bytes(&std::fs::read(&dump_path).unwrap()).unwrap();
        assert_eq!(d.meta.cut_short, None, "the capture was cut short");
        let instructions = d.meta.instructions;
        assert!(
            instructions > 10_000_000,
            "only {instructions} instructions captured"
        );
        let trapped = coldcache_analysis::summary::fast_trapped(&d.meta)
            .expect("the dump says how many instructions fast mode trapped");
        assert!(
            trapped * 1000 < instructions,
            "{trapped} of {instructions} instructions ran under the trap engine"
        );
        let unmodelled: u64 = d.meta.unmodelled.iter().map(|(_, n)| n).sum();
        assert_eq!(unmodelled, 0, "unmodelled: {:?}", d.meta.unmodelled);

        let cg_out = dir.join("callgrind.out");
        let mut vg = Command::new("valgrind");
        vg.args([
            "--tool=callgrind",
            "--toggle-collect=PyRun_SimpleStringFlags",
        ])
        .arg(format!("--callgrind-out-file={}", cg_out.display()))
        .arg(&python)
        .args(["-c", SCRIPT])
        .env("PYTHONHASHSEED", "0");
        let vg_out = run_within(vg, "callgrind python", Duration::from_secs(300));
        assert!(vg_out.status.success(), "callgrind failed");
        let text = std::fs::read_to_string(&cg_out).unwrap();
        let ir: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("totals: "))
            .or_else(|| text.lines().find_map(|l| l.strip_prefix("summary: ")))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .expect("Callgrind's totals line");
        let ratio = instructions as f64 / ir as f64;
        eprintln!("coldcache {instructions} instructions, Callgrind {ir} (ratio {ratio:.4}), trapped {trapped}");
        assert!(
            (0.98..=1.02).contains(&ratio),
            "coldcache counted {instructions} instructions, Callgrind {ir}"
        );
        return;
    }
    eprintln!("SKIP {NAME}: no CPython with PyRun_SimpleStringFlags in its symbol tables");
}
