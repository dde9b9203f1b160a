//! The benchmarked code: a checksum over a table walked with a stride, no
//! allocation and no libc call inside (so its instruction count does not
//! depend on glibc's CPU dispatch or Valgrind's replacement functions).

/// Sums `n` entries of `table` visited with stride 7 (wrapping); with the
/// `regress` feature the walk is done twice (the planted regression).
#[inline(never)]
pub fn checksum(table: &[u64], n: usize) -> u64 {
    let rounds = if cfg!(feature = "regress") { 2 } else { 1 };
    let mut s = 0u64;
    for _ in 0..rounds {
        for i in 0..n {
            s = s.wrapping_add(table[(i * 7) % table.len()] ^ i as u64);
        }
    }
    s
}
