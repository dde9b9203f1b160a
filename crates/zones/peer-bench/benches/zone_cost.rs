//! The cost of one zone (begin and end) against two raw `rdtsc` reads and
//! two peers, tracy-client and puffin, in the same run.
//!
//! `cargo bench --manifest-path crates/zones/peer-bench/Cargo.toml`
//!
//! Each measures an empty scope. Every recorder keeps what it records:
//! coldcache appends two events (32 bytes) to its arena, rewound between
//! batches of 1M zones (outside the timed loop) so the benchmark never
//! reaches the dropping path; puffin is given a new frame between batches
//! (outside the timed loop) so its per-thread stream does not grow without
//! bound; tracy-client runs with its default (not on-demand) client
//! started, no server connected, `only-localhost` and no broadcast: it
//! queues every zone in memory for a server that never comes, which is
//! what it does when profiling for real.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};

const BATCH: u64 = 1 << 20;

fn batched(iters: u64, mut between: impl FnMut(), mut body: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH);
        between();
        let t = Instant::now();
        for _ in 0..n {
            body();
        }
        total += t.elapsed();
        left -= n;
    }
    total
}

fn zone_cost(c: &mut Criterion) {
    let _tracy = tracy_client::Client::start();
    puffin::set_scopes_on(true);
    let mut g = c.benchmark_group("zone_begin_end");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));

    g.bench_function("two_rdtsc", |b| {
        b.iter_custom(|iters| {
            batched(
                iters,
                || {},
                || {
                    // SAFETY: rdtsc has no preconditions on x86-64.
                    black_box(unsafe { core::arch::x86_64::_rdtsc() });
                    // SAFETY: as above.
                    black_box(unsafe { core::arch::x86_64::_rdtsc() });
                },
            )
        })
    });
    g.bench_function("coldcache_zone", |b| {
        b.iter_custom(|iters| {
            batched(iters, coldcache_zones::record::rewind_for_benchmark, || {
                coldcache_zones::zone!("bench");
            })
        })
    });
    g.bench_function("coldcache_zone_recording_off", |b| {
        coldcache_zones::set_enabled(false);
        b.iter_custom(|iters| {
            batched(
                iters,
                || {},
                || {
                    coldcache_zones::zone!("bench_off");
                },
            )
        });
        coldcache_zones::set_enabled(true);
    });
    g.bench_function("tracy_client_span", |b| {
        b.iter_custom(|iters| {
            batched(
                iters,
                || {},
                || {
                    let _s = tracy_client::span!("bench");
                },
            )
        })
    });
    g.bench_function("puffin_scope", |b| {
        b.iter_custom(|iters| {
            batched(
                iters,
                || puffin::GlobalProfiler::lock().new_frame(),
                || {
                    puffin::profile_scope!("bench");
                },
            )
        })
    });
    g.finish();
}

criterion_group!(benches, zone_cost);
criterion_main!(benches);
