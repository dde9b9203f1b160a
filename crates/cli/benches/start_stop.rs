//! What a capture's start and stop cost (`cargo bench -p coldcache-cli
//! --bench start_stop`): `tests-programs/capture/signals.c startstop N`
//! starts and stops N captures of every thread in one process through the
//! C API (a dump written for each), around 200 iterations of a small loop.
//! Fast and trap mode against the same program run without capture (the
//! floor), every figure measured in this run (best of
//! `COLDCACHE_BENCH_RUNS`, 3 by default); N is `COLDCACHE_BENCH_CYCLES`
//! (200 by default).
//!
//! Trap mode single-steps the loop (about 1,600 instructions a capture),
//! so its figure includes that; fast mode's is almost all start and stop.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const COLDCACHE: &str = env!("CARGO_BIN_EXE_coldcache");

mod common;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn build(dir: &Path) -> PathBuf {
    common::build_with_library("signals", dir, &common::library_dir(COLDCACHE))
}

/// The best wall time of `runs` runs of `signals MODE startstop DUMP N`
/// (each run in a fresh directory, so every dump is a new file).
fn best(dir: &Path, bin: &Path, mode: Option<&str>, cycles: usize, runs: usize) -> f64 {
    let mut t = f64::MAX;
    for r in 0..runs {
        let run_dir = dir.join(format!("{}-{r}", mode.unwrap_or("plain")));
        std::fs::create_dir_all(&run_dir).unwrap();
        let mut c = Command::new(bin);
        c.arg(if mode.is_some() { "coldcache" } else { "plain" })
            .arg("startstop")
            .arg(run_dir.join("bench.ccdump"))
            .arg(cycles.to_string())
            .env("COLDCACHE_QUIET", "1")
            .current_dir(&run_dir);
        if let Some(m) = mode {
            c.env("COLDCACHE_MODE", m);
        }
        let t0 = Instant::now();
        let out = c.output().expect("run signals");
        t = t.min(t0.elapsed().as_secs_f64());
        assert!(
            out.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    t
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("coldcache-startstop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = build(&dir);
    let (cycles, runs) = (
        env_or("COLDCACHE_BENCH_CYCLES", 200),
        env_or("COLDCACHE_BENCH_RUNS", 3),
    );
    let plain = best(&dir, &bin, None, cycles, runs);
    let fast = best(&dir, &bin, Some("fast"), cycles, runs);
    let trap = best(&dir, &bin, Some("trap"), cycles, runs);
    let ms = |t: f64| 1e3 * (t - plain) / cycles as f64;
    println!("start and stop, {cycles} captures in one process (best of {runs} runs)");
    println!("  uncaptured run (floor)   {:>8.3} s", plain);
    println!(
        "  fast mode                {:>8.3} s  = {:.1} ms a capture above the floor",
        fast,
        ms(fast)
    );
    println!(
        "  trap mode                {:>8.3} s  = {:.1} ms a capture above the floor",
        trap,
        ms(trap)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
