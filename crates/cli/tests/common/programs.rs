//! Test programs built by gcc/g++ and run under a deadline: a hang fails
//! the test instead of blocking CI, and scratch directories; commands that
//! must succeed ([`succeed`]), `coldcache` run without address
//! randomisation ([`unrandomised`]). Shared by the test files that include
//! it (each includes `library.rs` as `library` first); not every file uses
//! every helper.
#![allow(dead_code)]

use super::library::{have, library, repo, COLDCACHE};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longer than any case takes on a loaded 2-core machine; shorter than
/// forever.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// glibc settings (`GLIBC_TUNABLES`) that make a native run pick the same
/// string functions and thresholds as under Valgrind, which hides AVX-512
/// and reports other cache sizes through CPUID: without them glibc runs
/// its EVEX functions natively on a processor with AVX-512 (a Xeon with
/// AVX-512: 4 instructions more than Callgrind in a 2M-instruction
/// program), different code from what Callgrind counts. Valgrind hides
/// RTM (TSX) too: on a Xeon that has it glibc natively picks the `_rtm`
/// string functions (`__strchrnul_avx2_rtm`: 8 to 14 instructions more
/// than Callgrind in whole-program captures of 0.7M to 1.8M), and with
/// RTM taken away alone it keeps `Prefer_No_VZEROUPPER`, set from RTM
/// before the tunables apply, and picks the SSE2 ones: both go.
pub const SAME_GLIBC_PATHS: &str =
    "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-RTM,-Prefer_No_VZEROUPPER:\
glibc.cpu.x86_rep_movsb_threshold=2048:glibc.cpu.x86_rep_stosb_threshold=2048:\
glibc.cpu.x86_non_temporal_threshold=0x300000:glibc.cpu.x86_data_cache_size=0x8000:\
glibc.cpu.x86_shared_cache_size=0x100000";

/// A scratch directory of this test process for `name` (`suite` tells the
/// test files apart). The scratch of earlier runs of the suite whose
/// process is gone is removed first: a run leaves its files behind (a
/// failed test's are worth reading), and `fast.rs` alone leaves 200 MB.
pub fn scratch_in(suite: &str, name: &str) -> PathBuf {
    let tmp = std::env::temp_dir();
    sweep_dead_runs(&tmp, suite);
    let d = tmp.join(format!("coldcache-{suite}-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Removes `coldcache-SUITE-PID-*` under `tmp` whose PID is not a live
/// process, once per suite and test process. A live PID's scratch is
/// kept (another run of the suite, or a reused PID: kept, not lost).
fn sweep_dead_runs(tmp: &Path, suite: &str) {
    static SWEPT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        if swept.iter().any(|s| s == suite) {
            return;
        }
        swept.push(suite.to_string());
    }
    let prefix = format!("coldcache-{suite}-");
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        // `PID-NAME`; another suite whose name extends this one's
        // (`hostile-input-PID-…` for `hostile`) has no number here.
        let Some(Ok(pid)) = rest.split('-').next().map(str::parse::<u32>) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Whether gcc is there; says which test is skipped when not.
pub fn gcc_or_skip(test: &str) -> bool {
    let ok = have("gcc");
    if !ok {
        eprintln!("SKIP {test}: gcc missing");
    }
    ok
}

/// Whether gcc and setarch (to turn address-space randomisation off) are
/// there; says which test is skipped when not.
pub fn gcc_and_setarch_or_skip(test: &str) -> bool {
    let ok = have("gcc") && Command::new("setarch").arg("--version").output().is_ok();
    if !ok {
        eprintln!("SKIP {test}: gcc or setarch missing");
    }
    ok
}

/// Compiles `source` (relative to the repository; `.cpp` with g++) into
/// `dir`; with `api`, against `libcoldcache.so` (the C API, with
/// `WITH_COLDCACHE_API` defined) and with threads.
pub fn build_with(source: &str, dir: &Path, api: bool) -> PathBuf {
    let out = dir.join(Path::new(source).file_stem().unwrap());
    compile(source, &out, &["-O1", "-g"], api)
}

/// Compiles `source` (relative to the repository; `.cpp` with g++) into
/// `out` with `flags`; with `api`, as [`build_with`] says.
pub fn compile(source: &str, out: &Path, flags: &[&str], api: bool) -> PathBuf {
    let compiler = if source.ends_with(".cpp") {
        "g++"
    } else {
        "gcc"
    };
    let mut cmd = Command::new(compiler);
    cmd.args(flags).arg("-o").arg(out).arg(repo().join(source));
    if api {
        let lib = library();
        let libdir = lib.parent().unwrap();
        cmd.args(["-pthread", "-DWITH_COLDCACHE_API"])
            .arg("-I")
            .arg(repo().join("include"))
            .arg("-L")
            .arg(libdir)
            .args(["-Wl,--no-as-needed", "-lcoldcache"])
            .arg(format!("-Wl,-rpath,{}", libdir.display()));
    }
    let st = cmd.status().expect("run the compiler");
    assert!(st.success(), "compiling {source} failed");
    out.to_path_buf()
}

/// Runs `cmd` (stdin empty) to its end and fails, showing its status,
/// stdout and stderr, unless it succeeded. No deadline: for commands
/// (trap-mode captures) that may take longer than [`DEADLINE`] on a loaded
/// machine.
pub fn succeed(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null());
    let out = cmd.output().expect("run command");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `setarch -R -- coldcache` in `dir` with a fixed, small environment
/// (`PATH` alone, so that the stack starts at the same place): two runs
/// of a program built without PIE touch the same addresses. The caller
/// adds the verb and its arguments.
pub fn unrandomised(dir: &Path) -> Command {
    let mut cmd = Command::new("setarch");
    cmd.args(["-R", "--"]).arg(COLDCACHE).current_dir(dir);
    cmd.env_clear().env("PATH", "/usr/bin:/bin");
    cmd
}

/// Runs `cmd` to its end, or kills it at the deadline and fails.
pub fn run_with_deadline(cmd: Command, what: &str) -> Output {
    run_within(cmd, what, DEADLINE)
}

/// Runs `cmd` to its end, or kills it after `deadline` and fails.
pub fn run_within(mut cmd: Command, what: &str, deadline: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    wait_within(child, what, deadline)
}

/// Waits for `child` to end, or kills it at the deadline and fails.
pub fn wait_with_deadline(child: Child, what: &str) -> Output {
    wait_within(child, what, DEADLINE)
}

/// Waits for `child` to end, or kills it after `deadline` and fails. Its
/// piped outputs are read meanwhile, so a chatty child cannot block on a
/// full pipe.
pub fn wait_within(mut child: Child, what: &str, deadline: Duration) -> Output {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut v);
            }
            v
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let start = Instant::now();
    let (status, hung) = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break (status, false);
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            break (child.wait().unwrap(), true);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    assert!(
        !hung,
        "{what}: still running after {deadline:?} (a hang)\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether child `pid` of `record` is the program: not `record`'s own
/// fork before its `exec`, not the `ld.so --list` it runs first to resolve
/// `--function`.
pub fn is_the_program(pid: &str) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let comm = comm.trim();
    !comm.is_empty()
        && comm != "coldcache"
        && !comm.starts_with("ld-")
        && !comm.starts_with("ld.so")
}

/// The pid of the program `coldcache record` (process `parent`) started,
/// waiting for it until the deadline.
pub fn program_of(parent: u32) -> String {
    let start = Instant::now();
    loop {
        let out = Command::new("pgrep")
            .args(["-P", &parent.to_string()])
            .output()
            .unwrap();
        if let Some(p) = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .find(|p| is_the_program(p))
        {
            return p.to_string();
        }
        assert!(start.elapsed() < DEADLINE, "the program never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}
