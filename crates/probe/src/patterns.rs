//! The access patterns the probe times, as pure data: byte offsets into a
//! buffer, in visiting order (the kernels link them into a cyclic pointer
//! chain; the simulator replays them). Same seed, same pattern.

use crate::os::PAGE;

/// A small deterministic generator (SplitMix64): patterns must be the same
/// for the timed run and for the simulation.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`; the same seed gives the same
    /// sequence.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// `0..n` in random order (Fisher-Yates). Visiting it cyclically is one
/// cycle through all `n` elements.
pub fn shuffled(n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.below(i + 1));
    }
    v
}

/// One node per line of the first `size` bytes, in random order: the
/// working-set sweep. Prefetchers cannot predict the next line.
pub fn working_set(size: usize, line: usize, seed: u64) -> Vec<usize> {
    let n = (size / line).max(2);
    shuffled(n, &mut Rng::new(seed))
        .into_iter()
        .map(|i| i * line)
        .collect()
}

/// Blocks of `block` bytes in random order; in each, the block's start and
/// then the byte `stride` after it: the line-size test. While `stride` is
/// below the line size, the second access hits the line the first brought.
pub fn line_pairs(blocks: usize, block: usize, stride: usize, seed: u64) -> Vec<usize> {
    shuffled(blocks, &mut Rng::new(seed))
        .into_iter()
        .flat_map(|b| [b * block, b * block + stride])
        .collect()
}

/// `k` lines `stride` bytes apart, in random order: with `stride` a multiple
/// of the L1 way size they all fall in one L1 set.
pub fn same_set(k: usize, stride: usize, seed: u64) -> Vec<usize> {
    shuffled(k, &mut Rng::new(seed))
        .into_iter()
        .map(|i| i * stride)
        .collect()
}

/// One line in each of `count` pages, in random page order: the TLB test
/// (one access per page). The line within page `p` is `(p + p / L) mod L`
/// (L lines per page), so that the lines spread evenly over the sets of a
/// virtually indexed L1 (4 KiB of index) and, for up to `32 L` contiguous
/// pages, over distinct sets of a physically indexed cache with up to
/// 128 KiB of index (an L2): page `p` and line `l` give index bits
/// `(p mod 32, l)`, distinct for distinct `p < 32 L`.
pub fn one_per_page(count: usize, line: usize, seed: u64) -> Vec<usize> {
    let lines_per_page = (PAGE / line).max(1);
    shuffled(count, &mut Rng::new(seed))
        .into_iter()
        .map(|p| p * PAGE + ((p + p / lines_per_page) % lines_per_page) * line)
        .collect()
}

/// `0, stride, 2 stride, ...` below `region`: an ascending walk that crosses
/// page boundaries.
pub fn ascending(region: usize, stride: usize) -> Vec<usize> {
    (0..region / stride).map(|i| i * stride).collect()
}

/// Pages of `region` in random order; within each, `0, stride, ...` below
/// the page size: an ascending walk that never continues into the next
/// page.
pub fn ascending_within_pages(region: usize, stride: usize, seed: u64) -> Vec<usize> {
    let per_page = (PAGE / stride).max(1);
    shuffled(region / PAGE, &mut Rng::new(seed))
        .into_iter()
        .flat_map(|p| (0..per_page).map(move |j| p * PAGE + j * stride))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffled_is_a_permutation_and_deterministic() {
        let a = shuffled(1000, &mut Rng::new(7));
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..1000).collect::<Vec<_>>());
        assert_eq!(a, shuffled(1000, &mut Rng::new(7)));
        assert_ne!(a, shuffled(1000, &mut Rng::new(8)));
    }

    #[test]
    fn patterns_stay_in_their_region() {
        assert!(working_set(1 << 16, 64, 1).iter().all(|&o| o < 1 << 16));
        assert_eq!(working_set(1 << 16, 64, 1).len(), 1024);
        let p = line_pairs(8, 1024, 256, 1);
        assert_eq!(p.len(), 16);
        assert!(p.chunks(2).all(|c| c[1] == c[0] + 256 && c[0] % 1024 == 0));
        let s = same_set(9, 32 << 10, 1);
        assert!(s.iter().all(|&o| o % (32 << 10) == 0 && o < 9 * (32 << 10)));
        // Distinct (page mod 32, line) pairs for 2048 pages (see the doc).
        let t = one_per_page(2048, 64, 1);
        let mut idx: Vec<usize> = t.iter().map(|&o| (o >> 6) & 2047).collect();
        idx.sort_unstable();
        idx.dedup();
        assert_eq!(idx.len(), 2048);
        let t = one_per_page(100, 64, 1);
        let mut pages: Vec<usize> = t.iter().map(|&o| o / PAGE).collect();
        pages.sort_unstable();
        assert_eq!(pages, (0..100).collect::<Vec<_>>());
        assert_eq!(ascending(1 << 20, 4096).len(), 256);
        let w = ascending_within_pages(1 << 16, 1024, 1);
        assert_eq!(w.len(), 64);
        assert!(w.chunks(4).all(|c| c[0] % PAGE == 0 && c[3] == c[0] + 3072));
    }
}
