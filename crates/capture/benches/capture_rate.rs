//! Capture benchmarks (run with `cargo bench -p coldcache-capture`):
//!
//! 1. Instructions traced per second by the engine, against this machine's
//!    raw single-step rate measured in the same run: the same loop stepped
//!    with an empty SIGTRAP handler (the floor no single-stepping tracer can
//!    beat). Goal: at least 85% of the raw rate.
//! 2. The cost of `libcoldcache.so` loaded but not capturing: a CPU-bound C
//!    program run alternately with and without `LD_PRELOAD`. Goal: < 1%.
//!
//! Both are ratios measured in one run, because these VMs are noisy.

use coldcache_capture::{engine, start, Options};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

core::arch::global_asm!(
    ".globl bench_loop",
    "bench_loop:", // rdi = base, rsi = iterations
    "xor eax, eax",
    "2:",
    "add rax, [rdi]",
    "add rdi, 64",
    "and rdi, rdx",
    "or rdi, rcx",
    "dec rsi",
    "jnz 2b",
    "ret",
    ".globl bench_stop_marker",
    "bench_stop_marker:",
    "ret",
);

extern "C" {
    fn bench_loop(base: *const u64, iterations: u64, mask: u64, base_bits: u64) -> u64;
    fn bench_stop_marker();
}

static TRAPS: AtomicU64 = AtomicU64::new(0);
thread_local! {
    static STARTUP: std::cell::Cell<(Duration, Duration)> = const { std::cell::Cell::new((Duration::ZERO, Duration::ZERO)) };
}
static STOP_AT: AtomicU64 = AtomicU64::new(0);

extern "C" fn empty_handler(_: i32, _: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    TRAPS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the kernel passes a valid ucontext_t to an SA_SIGINFO handler.
    let uc = unsafe { &mut *(ctx as *mut libc::ucontext_t) };
    if uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64 == STOP_AT.load(Ordering::Relaxed) {
        uc.uc_mcontext.gregs[libc::REG_EFL as usize] &= !0x100;
    }
}

fn set_handler(handler: usize) {
    // SAFETY: installing a plain handler (or SIG_DFL) with a zeroed mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigaction(libc::SIGTRAP, &sa, std::ptr::null_mut());
    }
}

const ITER: u64 = 10_000; // 6 instructions each, plus 2

fn buffer() -> Vec<u64> {
    vec![1u64; 1 << 15] // 256 KiB
}

fn run_loop(buf: &[u64]) -> u64 {
    let base = buf.as_ptr() as u64;
    // Addresses wrap inside the buffer: base | (offset & mask).
    let mask = ((buf.len() * 8) as u64 - 1) & !63;
    // SAFETY: every address the loop forms stays inside `buf` (aligned to
    // its size by construction below).
    unsafe { bench_loop(buf.as_ptr(), ITER, mask, base & !mask) }
}

fn raw_step(buf: &[u64]) -> (u64, Duration) {
    set_handler(empty_handler as *const () as usize);
    STOP_AT.store(bench_stop_marker as *const () as u64, Ordering::Relaxed);
    TRAPS.store(0, Ordering::Relaxed);
    let t = Instant::now();
    // SAFETY: sets TF; the handler clears it at `bench_stop_marker`.
    unsafe { engine::coldcache_arm_current_thread() };
    let r = run_loop(buf);
    // SAFETY: an empty function whose address the handler watches for.
    unsafe { bench_stop_marker() };
    let d = t.elapsed();
    std::hint::black_box(r);
    set_handler(libc::SIG_DFL);
    (TRAPS.load(Ordering::Relaxed), d)
}

fn traced(buf: &[u64], cache: &str) -> (u64, Duration) {
    let cfg = coldcache_config::resolve(cache).unwrap();
    let out = std::env::temp_dir().join(format!("coldcache-bench-{}.ccdump", std::process::id()));
    let mut o = Options::new(cfg, &out);
    o.cache_name = cache.into();
    // Only the traced loop is timed, as for the raw rate: the capture's
    // start (tables, unwind information) and stop (the dump) are reported
    // separately.
    let t0 = Instant::now();
    let cap = start(o).unwrap();
    let t = Instant::now();
    let r = run_loop(buf);
    let d = t.elapsed();
    let t1 = Instant::now();
    let s = cap.stop().unwrap();
    let stop = t1.elapsed();
    let startup = t - t0;
    std::hint::black_box(r);
    let _ = std::fs::remove_file(&out);
    STARTUP.with(|c| c.set((startup, stop)));
    (s.instructions, d)
}

fn aligned_buffer() -> (Vec<u64>, usize) {
    // A buffer of 2 * 256 KiB, used from its first 256 KiB-aligned address.
    let v = vec![1u64; 1 << 16];
    let addr = v.as_ptr() as usize;
    let size = (1 << 15) * 8;
    let off = (size - addr % size) % size / 8;
    (v, off)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let _ = buffer;
    let (v, off) = aligned_buffer();
    let buf = &v[off..off + (1 << 15)];
    println!("capture rate ({ITER} loop iterations, 6 instructions each; best of 3):");
    let mut raw_best = 0f64;
    let mut ours_best = [0f64; 2];
    for round in 0..3 {
        let (n, d) = raw_step(buf);
        let raw = n as f64 / d.as_secs_f64();
        raw_best = raw_best.max(raw);
        let mut line = format!("  round {round}: raw single-step {raw:>9.0} instr/s");
        for (i, cache) in ["cachegrind", "jaguar"].iter().enumerate() {
            let (n, d) = traced(buf, cache);
            let rate = n as f64 / d.as_secs_f64();
            ours_best[i] = ours_best[i].max(rate);
            let (up, down) = STARTUP.with(|c| c.get());
            line += &format!(
                ", coldcache {cache} {rate:>9.0} ({:.0}%; start {:.1} ms, stop {:.1} ms)",
                100.0 * rate / raw,
                up.as_secs_f64() * 1e3,
                down.as_secs_f64() * 1e3
            );
        }
        println!("{line}");
    }
    println!(
        "  best: raw {raw_best:.0}/s; cachegrind {:.0}/s = {:.1}% of raw; jaguar {:.0}/s = {:.1}% of raw",
        ours_best[0],
        100.0 * ours_best[0] / raw_best,
        ours_best[1],
        100.0 * ours_best[1] / raw_best
    );
    loaded_not_capturing();
}

/// A CPU-bound C program with and without the library preloaded.
fn loaded_not_capturing() {
    let lib = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/release/libcoldcache.so");
    let lib = std::env::var_os("COLDCACHE_LIB")
        .map(Into::into)
        .unwrap_or(lib);
    if !lib.exists() {
        println!(
            "loaded, not capturing: skipped ({} missing; cargo build --release -p libcoldcache)",
            lib.display()
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("coldcache-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("cpu.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdint.h>\nint main(void){uint64_t h=1469598103934665603u;\
         for(uint64_t i=0;i<300000000u;i++){h^=i;h*=1099511628211u;}printf(\"%llu\\n\",(unsigned long long)h);return 0;}\n",
    )
    .unwrap();
    let exe = dir.join("cpu");
    let ok = std::process::Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        println!("loaded, not capturing: skipped (gcc failed)");
        return;
    }
    let time = |preload: bool| {
        let mut c = std::process::Command::new(&exe);
        if preload {
            c.env("LD_PRELOAD", &lib);
        }
        c.stdout(std::process::Stdio::null());
        let t = Instant::now();
        assert!(c.status().unwrap().success());
        t.elapsed().as_secs_f64()
    };
    let (mut plain, mut loaded) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        plain.push(time(false));
        loaded.push(time(true));
    }
    plain.sort_by(f64::total_cmp);
    loaded.sort_by(f64::total_cmp);
    let (p, l) = (plain[3], loaded[3]);
    println!(
        "loaded, not capturing (median of 7 alternating runs): plain {p:.3} s, with libcoldcache.so {l:.3} s: {:+.2}%",
        100.0 * (l - p) / p
    );
    let _ = std::fs::remove_dir_all(&dir);
}
