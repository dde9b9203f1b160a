//! One library benchmark in two sizes: `checksum` over a 4096-entry table
//! (built by the setup function, outside the measured function), 10,000
//! steps (`small`: the harness's own cost dominates) and 5,000,000 steps
//! (`large`: the tool's cost per instruction dominates).
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

library_benchmark_group!(name = sums, benchmarks = [bench_checksum]);

main!(library_benchmark_groups = sums);
