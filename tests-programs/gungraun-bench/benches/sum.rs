//! `checksum` over a 4096-entry table (built by the setup function, outside
//! the measured function) in two sizes, 10,000 steps (`small`: the
//! harness's own cost dominates) and 5,000,000 steps (`large`: the tool's
//! cost per instruction dominates); and `squares`, a second benchmark
//! function (a second function gungraun's `--toggle-collect` pattern
//! names in the binary).
use gungraun::prelude::*;
use std::hint::black_box;

fn with_table(n: usize) -> (Vec<u64>, usize) {
    ((0..4096u64).map(|i| i * 3).collect(), n)
}

#[library_benchmark]
#[bench::small(args = (10_000), setup = with_table)]
#[bench::large(args = (5_000_000), setup = with_table)]
fn bench_checksum(input: (Vec<u64>, usize)) -> u64 {
    let (table, n) = input;
    black_box(gungraun_bench::checksum(black_box(&table), n))
}

#[library_benchmark]
#[bench::short(1_000)]
fn bench_squares(n: u64) -> u64 {
    black_box((0..black_box(n)).map(|i| i * i).fold(0, u64::wrapping_add))
}

library_benchmark_group!(name = sums, benchmarks = [bench_checksum, bench_squares]);

main!(library_benchmark_groups = sums);
