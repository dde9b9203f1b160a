//! Capture speed, end to end (`cargo bench -p coldcache-cli --bench
//! capture_speed`): `tests-programs/capture/frame.c` (frames of a dense
//! matrix multiply) captured by `coldcache record` in fast and trap mode,
//! against `valgrind --tool=cachegrind --cache-sim=yes` on the same program
//! (with our preset's geometry, `common::CACHEGRIND_GEOMETRY`),
//! every figure measured in this run (best of `COLDCACHE_BENCH_RUNS`, 3 by
//! default), because these machines are noisy:
//!
//! 1. instructions per second of one captured frame (`--function frame
//!    --calls 1`, `cachegrind` preset): fast mode, trap mode (a slice of the
//!    frame, `--instructions`), Cachegrind (whole program: Ir over wall
//!    time) and native (one frame's instructions over its wall time);
//! 2. the translated code alone (records thrown away, not simulated:
//!    `COLDCACHE_FAST_NULL_CONSUMER`) against native speed;
//! 3. `jaguar` with four traced threads (the C API around one frame);
//! 4. the wall time to capture one call of a frame of about 110 million
//!    instructions against the whole program (three frames) under
//!    Cachegrind.
//!
//! Goals (issue 16): fast mode at least 1/8 of Cachegrind's rate (aim 1/4);
//! the translated code alone at least 10% of native.

use coldcache_dump::Dump;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const COLDCACHE: &str = env!("CARGO_BIN_EXE_coldcache");

mod common;

fn runs() -> usize {
    std::env::var("COLDCACHE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

fn build(dir: &Path) -> PathBuf {
    common::build_with_library("frame", dir, &common::library_dir(COLDCACHE))
}

/// Runs a command `runs()` times; the best wall time and the last output.
fn best(mut make: impl FnMut() -> Command) -> (f64, std::process::Output) {
    let mut t = f64::MAX;
    let mut last = None;
    for _ in 0..runs() {
        let mut c = make();
        let t0 = Instant::now();
        let out = c.output().expect("run");
        t = t.min(t0.elapsed().as_secs_f64());
        assert!(
            out.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        last = Some(out);
    }
    (t, last.unwrap())
}

/// Captures with `record` `runs()` times: the best rate (instructions per
/// second of capture window), with its instructions, window and wall time.
fn record(dir: &Path, bin: &Path, args: &[&str], n: &str, env: &[(&str, &str)]) -> Capture {
    let dump = dir.join("bench.ccdump");
    let mut best: Option<Capture> = None;
    for _ in 0..runs() {
        let _ = std::fs::remove_file(&dump);
        let mut c = Command::new(COLDCACHE);
        c.args(["record", "--no-resolve", "-o"])
            .arg(&dump)
            .args(args)
            .arg("--")
            .arg(bin)
            .args([n, "3"])
            .current_dir(dir);
        for (k, v) in env {
            c.env(k, v);
        }
        let t0 = Instant::now();
        let out = c.output().expect("run record");
        let wall = t0.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d = Dump::from_bytes(&std::fs::read(&dump).unwrap()).unwrap();
        let window = d.meta.duration_ns as f64 * 1e-9;
        let cap = Capture {
            instructions: d.meta.instructions,
            window,
            wall,
        };
        if best.as_ref().is_none_or(|b| cap.rate() > b.rate()) {
            best = Some(cap);
        }
    }
    best.unwrap()
}

struct Capture {
    instructions: u64,
    window: f64,
    wall: f64,
}

impl Capture {
    fn rate(&self) -> f64 {
        self.instructions as f64 / self.window.max(1e-9)
    }
}

/// One frame's wall time, from the program's own report (the fastest of
/// its frames after the first).
fn frame_time(stderr: &[u8]) -> f64 {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter_map(|l| {
            l.split(": ")
                .nth(1)?
                .strip_suffix(" s")?
                .parse::<f64>()
                .ok()
        })
        .skip(1)
        .fold(f64::MAX, f64::min)
}

fn main() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("capture_speed: valgrind missing, nothing measured");
        return;
    }
    let dir = std::env::temp_dir().join(format!("coldcache-capture-speed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = build(&dir);
    let n = "200";

    // Native, and Cachegrind on the whole program (three frames).
    let (_, native) = best(|| {
        let mut c = Command::new(&bin);
        c.args([n, "3"]);
        c
    });
    let native_frame = frame_time(&native.stderr);
    let (cg_wall, cg) = best(|| {
        let mut c = Command::new("valgrind");
        c.args([
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--cachegrind-out-file=/dev/null",
        ])
        .args(common::CACHEGRIND_GEOMETRY)
        .arg(&bin)
        .args([n, "3"]);
        c
    });
    let cg_ir: f64 = String::from_utf8_lossy(&cg.stderr)
        .lines()
        .find_map(|l| l.split("I   refs:").nth(1))
        .map(|v| v.trim().replace(',', ""))
        .and_then(|v| v.parse().ok())
        .expect("cachegrind's I refs");
    let cg_rate = cg_ir / cg_wall;

    let fast = record(
        &dir,
        &bin,
        &[
            "--mode",
            "fast",
            "--cache",
            "cachegrind",
            "--function",
            "frame",
            "--calls",
            "1",
        ],
        n,
        &[],
    );
    let null = record(
        &dir,
        &bin,
        &[
            "--mode",
            "fast",
            "--cache",
            "cachegrind",
            "--function",
            "frame",
            "--calls",
            "1",
        ],
        n,
        &[("COLDCACHE_FAST_NULL_CONSUMER", "1")],
    );
    let trap = record(
        &dir,
        &bin,
        &[
            "--mode",
            "trap",
            "--cache",
            "cachegrind",
            "--function",
            "frame",
            "--calls",
            "1",
            "--instructions",
            "300000",
        ],
        n,
        &[],
    );
    let native_rate = fast.instructions as f64 / native_frame;
    // The null consumer counts nothing: its rate is the frame's
    // instructions over its window.
    let null_rate = fast.instructions as f64 / null.window;

    // jaguar, four threads, through the C API around the second frame.
    let mut mt = (f64::MAX, 0u64);
    for _ in 0..runs() {
        let out = Command::new(&bin)
            .args([n, "3", "4", "api"])
            .env("COLDCACHE_MODE", "fast")
            .current_dir(&dir)
            .output()
            .expect("run frame api");
        assert!(out.status.success());
        let d = Dump::from_bytes(&std::fs::read(dir.join("frame.ccdump")).unwrap()).unwrap();
        let w = d.meta.duration_ns as f64 * 1e-9;
        if w < mt.0 {
            mt = (w, d.meta.instructions);
        }
    }
    let mt_rate = mt.1 as f64 / mt.0;

    // One call of a ~110M-instruction frame against the whole program
    // under Cachegrind.
    let big = "250";
    let big_fast = record(
        &dir,
        &bin,
        &[
            "--mode",
            "fast",
            "--cache",
            "cachegrind",
            "--function",
            "frame",
            "--calls",
            "1",
        ],
        big,
        &[],
    );
    let (big_cg, _) = best(|| {
        let mut c = Command::new("valgrind");
        c.args([
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--cachegrind-out-file=/dev/null",
        ])
        .args(common::CACHEGRIND_GEOMETRY)
        .arg(&bin)
        .args([big, "3"]);
        c
    });

    let m = |r: f64| r / 1e6;
    println!("capture speed, frame.c N={n} (best of {} runs)", runs());
    println!("  frame: {} instructions", fast.instructions);
    println!(
        "  native                       {:>9.1} M instr/s",
        m(native_rate)
    );
    println!(
        "  cachegrind --cache-sim=yes   {:>9.1} M instr/s  (whole program, {cg_ir:.0} Ir in {cg_wall:.2} s)",
        m(cg_rate)
    );
    println!(
        "  coldcache fast, cachegrind   {:>9.2} M instr/s  = 1/{:.1} of cachegrind, {:.0}x trap mode",
        m(fast.rate()),
        cg_rate / fast.rate(),
        fast.rate() / trap.rate()
    );
    println!(
        "  coldcache trap, cachegrind   {:>9.3} M instr/s",
        m(trap.rate())
    );
    println!(
        "  translated code alone        {:>9.1} M instr/s  = {:.1}% of native",
        m(null_rate),
        100.0 * null_rate / native_rate
    );
    println!(
        "  coldcache fast, jaguar, 4 threads {:>4.2} M instr/s  ({} instructions)",
        m(mt_rate),
        mt.1
    );
    println!(
        "  one call of {} instructions: coldcache fast {:.2} s (window {:.2} s); cachegrind, whole program (3 frames) {:.2} s",
        big_fast.instructions, big_fast.wall, big_fast.window, big_cg
    );
    let _ = std::fs::remove_dir_all(&dir);
}
