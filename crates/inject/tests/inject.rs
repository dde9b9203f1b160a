//! `coldcache_inject` against processes of its own: what `check` finds in
//! `/proc`, and `inject` loading a library into a running child and
//! calling its `coldcache_attach_start` with the settings, the child's
//! output and exit status unchanged. The library is a stand-in built
//! here with gcc (named `libcoldcache-*.so`, as `inject` looks for): it
//! writes the settings it is given to the file their first line names, so
//! what arrived is compared with what was sent; `coldcache attach`'s own
//! tests (crates/cli/tests/attach.rs) inject the real one.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The stand-in: `OUT=PATH` on the first line names the file the whole
/// settings text is written to; `FAIL=...` anywhere makes it refuse, as
/// the real one does, with a message.
const LIBRARY: &str = r#"
#include <stdio.h>
#include <string.h>
const char *coldcache_attach_start(const char *settings) {
    if (strstr(settings, "FAIL=")) return "refused by the stand-in";
    if (strncmp(settings, "OUT=", 4) != 0) return "no OUT= line";
    char path[4096];
    const char *end = strchr(settings, '\n');
    size_t n = end ? (size_t)(end - settings - 4) : strlen(settings + 4);
    if (n >= sizeof path) return "path too long";
    memcpy(path, settings + 4, n);
    path[n] = 0;
    FILE *f = fopen(path, "w");
    if (!f) return "cannot open OUT";
    fputs(settings, f);
    fclose(f);
    return 0;
}
"#;

/// A program that prints a line every 2 ms, `ticks` lines, then exits 7;
/// it waits in `nanosleep` most of the time, so the seized thread is
/// usually inside a system call the kernel must restart.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    int ticks = atoi(argv[1]);
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < ticks; i++) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, 0);
        printf("tick %d\n", i);
        fflush(stdout);
    }
    return 7;
}
"#;

fn gcc(dir: &Path, src: &str, name: &str, args: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(args)
        .arg(&c)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc {name}");
    out
}

struct Built {
    _dir: tempfile::TempDir,
    lib: PathBuf,
    program: PathBuf,
    out: PathBuf,
}

fn build() -> Built {
    let dir = tempfile::tempdir().unwrap();
    let lib = gcc(
        dir.path(),
        LIBRARY,
        "libcoldcache-standin.so",
        &["-O1", "-shared", "-fPIC"],
    );
    let program = gcc(dir.path(), PROGRAM, "ticker", &["-O1"]);
    let out = dir.path().join("settings.txt");
    Built {
        _dir: dir,
        lib,
        program,
        out,
    }
}

/// The child, started and past its first line (so its C library is
/// mapped and it runs its loop).
fn start(program: &Path, ticks: u32) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(program)
        .arg(ticks.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(first, "ready\n");
    (child, out)
}

/// The rest of the child's output and its exit code.
fn finish(mut child: Child, mut out: BufReader<std::process::ChildStdout>) -> (String, i32) {
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let st = child.wait().unwrap();
    (rest, st.code().unwrap_or(-1))
}

fn ticks(n: u32) -> String {
    (0..n).map(|i| format!("tick {i}\n")).collect()
}

#[test]
fn check_reads_a_running_process_and_refuses_bad_pids() {
    let b = build();
    let (mut child, out) = start(&b.program, 50);
    let t = coldcache_inject::check(child.id() as i32).expect("check");
    assert_eq!(t.pid, child.id() as i32);
    assert_eq!(t.name, "ticker");
    assert!(
        t.maps
            .iter()
            .any(|m| m.path.contains("libc.so") && m.perms.contains('x')),
        "no C library in {:?}",
        t.maps
    );
    assert!(t.who().contains(&child.id().to_string()));
    assert_eq!(coldcache_inject::loaded_library(&t.maps), None);
    let _ = child.kill();
    drop(out);
    let _ = child.wait();

    // Stopped (SIGSTOP): refused, saying how to continue it.
    let (mut child, out) = start(&b.program, 500);
    let pid = child.id() as i32;
    // SAFETY: signalling a child of ours.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let deadline = Instant::now() + Duration::from_secs(5);
    let e = loop {
        match coldcache_inject::check(pid) {
            Err(e) => break e.to_string(),
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(_) => panic!("a stopped process was accepted"),
        }
    };
    assert!(e.contains("is stopped") && e.contains("kill -CONT"), "{e}");
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    drop(out);
    let _ = child.wait();

    for pid in [0, -5] {
        let e = coldcache_inject::check(pid).unwrap_err().to_string();
        assert!(e.contains(&pid.to_string()), "{e}");
    }
    // A pid no process has (the kernel's limit is below it).
    let e = coldcache_inject::check(i32::MAX).unwrap_err().to_string();
    assert!(e.contains(&i32::MAX.to_string()), "{e}");
}

#[test]
fn a_library_is_loaded_and_called_with_the_settings_and_the_program_runs_on_unchanged() {
    let b = build();
    let n = 150;
    let (child, out) = start(&b.program, n);
    let pid = child.id() as i32;
    let settings = format!("OUT={}\nCOLDCACHE_X=1\nA=b c\n", b.out.display());

    let t = coldcache_inject::check(pid).expect("check");
    let done = coldcache_inject::inject(&t, &b.lib, &settings).expect("inject");
    assert!(done.loaded_now);
    assert_eq!(Path::new(&done.library), b.lib.as_path());
    assert_eq!(std::fs::read_to_string(&b.out).unwrap(), settings);

    // Again: the library is there, so it is called without a second load.
    std::fs::remove_file(&b.out).unwrap();
    let t = coldcache_inject::check(pid).expect("check again");
    assert_eq!(
        coldcache_inject::loaded_library(&t.maps)
            .as_deref()
            .map(Path::new),
        Some(b.lib.as_path())
    );
    let again = coldcache_inject::inject(&t, &b.lib, &settings).expect("inject again");
    assert!(!again.loaded_now);
    assert_eq!(std::fs::read_to_string(&b.out).unwrap(), settings);

    // The library's refusal comes back as the error, with its message.
    let e = coldcache_inject::inject(&t, &b.lib, "FAIL=1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("refused by the stand-in"), "{e}");

    // Every tick printed, in order, and the exit code of a plain run: the
    // interrupted nanosleep restarted, nothing of the program changed.
    let (rest, code) = finish(child, out);
    assert_eq!(rest, ticks(n));
    assert_eq!(code, 7);
}

#[test]
fn a_process_that_exits_before_the_attach_is_told_apart() {
    let b = build();
    // Checked while it runs (for 100 ms), then gone by the time of the
    // attach.
    let (child, out) = start(&b.program, 50);
    let pid = child.id() as i32;
    let t = coldcache_inject::check(pid).expect("check");
    let (rest, code) = finish(child, out);
    assert_eq!((rest, code), (ticks(50), 7));
    // Reaped: the pid names no process now.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let e = coldcache_inject::inject(&t, &b.lib, "OUT=/dev/null\n").unwrap_err();
    assert!(
        e.downcast_ref::<coldcache_inject::Exited>().is_some(),
        "not Exited: {e:#}"
    );
}
