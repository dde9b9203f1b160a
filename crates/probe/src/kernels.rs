//! The timed loops: a dependent pointer chase through a cyclic chain (each
//! load's address is the value the previous load returned, so the time per
//! step is the load-to-use latency), a store-then-load loop for 4K aliasing,
//! and a sequential read for bandwidth. Plus best-of-N within a time budget.

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::os::Buffer;

/// A cyclic pointer chain written into a [`Buffer`]: node `k` (a byte offset
/// of the buffer, multiple of the word size) holds the address of node
/// `k + 1`, the last node the address of the first.
pub struct Chain<'a> {
    start: usize,
    /// Where the next run continues: successive runs walk the cycle on, so
    /// each run sees the steady state of one long walk.
    cursor: Cell<usize>,
    nodes: usize,
    /// The buffer, borrowed for the chain's life: nothing else can change
    /// or free it while the chain is followed.
    words: &'a [usize],
}

impl<'a> Chain<'a> {
    /// Links `offsets` (byte offsets in visiting order; distinct, word
    /// aligned and inside the buffer) into a cycle.
    ///
    /// # Panics
    /// If an offset is outside the buffer or not word aligned, or there are
    /// no offsets (bugs in the caller's pattern).
    pub fn build(buf: &'a mut Buffer, offsets: &[usize]) -> Chain<'a> {
        const W: usize = std::mem::size_of::<usize>();
        assert!(!offsets.is_empty(), "an empty chain");
        let words = buf.words_mut();
        let n = words.len();
        for &o in offsets {
            assert!(
                o.is_multiple_of(W) && o / W < n,
                "offset {o} outside the buffer"
            );
        }
        // Node addresses as plain integers while writing through `words`.
        let base = words.as_ptr().addr();
        for (k, &o) in offsets.iter().enumerate() {
            let next = offsets[(k + 1) % offsets.len()];
            words[o / W] = base + next;
        }
        let start = base + offsets[0];
        // From here on the buffer is only read, through this shared borrow;
        // exposing its provenance lets `run` turn the stored addresses back
        // into pointers that may read it.
        let words: &'a [usize] = words;
        let _ = words.as_ptr().expose_provenance();
        Chain {
            start,
            cursor: Cell::new(start),
            nodes: offsets.len(),
            words,
        }
    }

    /// Number of nodes in the cycle.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Goes back to the first node.
    pub fn rewind(&self) {
        self.cursor.set(self.start);
    }

    /// Follows the chain for `steps` (rounded up to a multiple of 8) steps
    /// from where the last run stopped (first: the first node).
    #[inline(never)]
    pub fn run(&self, steps: u64) {
        let mut p = self.cursor.get();
        for _ in 0..steps.div_ceil(8) {
            for _ in 0..8 {
                let ptr: *const usize = std::ptr::with_exposed_provenance(p);
                // SAFETY: `build` wrote into every node the address of
                // another node of the buffer and exposed the provenance of
                // `words`, the shared borrow that keeps the buffer alive and
                // unchanged as long as `self`: `p` is always an aligned
                // address inside it, readable through that borrow.
                p = unsafe { std::ptr::read_volatile(ptr) };
            }
        }
        self.cursor.set(black_box(p));
    }

    /// Nanoseconds per step over `steps` steps.
    pub fn ns_per_step(&self, steps: u64) -> f64 {
        let steps = steps.div_ceil(8) * 8;
        let t = Instant::now();
        self.run(steps);
        t.elapsed().as_nanos() as f64 / steps as f64
    }

    /// Evicts the lines of the nodes at `offsets` (byte offsets) from
    /// every cache level (`clflush`), so the next run starts from memory.
    pub fn flush(&self, offsets: &[usize]) {
        for &o in offsets {
            crate::cpu::flush_line(&self.words[o / std::mem::size_of::<usize>()]);
        }
        crate::cpu::fence();
    }
}

/// The least of `f`'s results (best of N: interference only ever adds
/// time), running it at least `min_reps` times and then until `budget` has
/// passed, at most `max_reps` times.
pub fn best_of(budget: Duration, min_reps: u32, max_reps: u32, mut f: impl FnMut() -> f64) -> f64 {
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut reps = 0;
    while reps < min_reps || (reps < max_reps && start.elapsed() < budget) {
        best = best.min(f());
        reps += 1;
    }
    best
}

/// `rounds` passes of: store to `dst[i]`, load `src[i]`, for `i` in
/// `0..words`; `src` is `delta` bytes after `dst`. Returns nanoseconds per
/// store+load pair.
///
/// # Panics
/// If the buffer is smaller than `delta + words * 8` bytes or `delta` is not
/// word aligned.
pub fn store_load_ns(buf: &mut Buffer, delta: usize, words: usize, rounds: u32) -> f64 {
    const W: usize = std::mem::size_of::<usize>();
    assert!(delta.is_multiple_of(W));
    let all = buf.words_mut();
    assert!(delta / W + words <= all.len() && words <= all.len());
    let base = all.as_mut_ptr();
    let t = Instant::now();
    let mut sum = 0usize;
    for r in 0..rounds as usize {
        for i in 0..words {
            // SAFETY: i < words and delta / W + words <= the buffer's
            // length (asserted above), so both addresses are inside the
            // buffer, which `all` borrows mutably for this loop.
            unsafe {
                std::ptr::write_volatile(base.add(i), r ^ i);
                sum = sum.wrapping_add(std::ptr::read_volatile(base.add(delta / W + i)));
            }
        }
    }
    black_box(sum);
    t.elapsed().as_nanos() as f64 / (rounds as f64 * words as f64)
}

/// The sum loop of [`read_gbps`]: eight independent accumulators, which
/// the compiler turns into vector loads and adds.
#[inline(always)]
fn sum8(words: &[usize]) -> [usize; 8] {
    let mut acc = [0usize; 8];
    for c in words.chunks_exact(8) {
        for j in 0..8 {
            acc[j] = acc[j].wrapping_add(c[j]);
        }
    }
    acc
}

/// [`sum8`] compiled for AVX2 (32-byte loads instead of SSE2's 16).
#[target_feature(enable = "avx2")]
fn sum8_avx2(words: &[usize]) -> [usize; 8] {
    sum8(words)
}

/// Whether the read loop uses AVX2 (else SSE2).
pub fn read_uses_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Reads `words` sequentially and returns bytes per nanosecond (= GB/s).
pub fn read_gbps(words: &[usize]) -> f64 {
    let avx2 = read_uses_avx2();
    let t = Instant::now();
    let acc = if avx2 {
        // SAFETY: the CPU supports AVX2 (checked just above), which is all
        // `sum8_avx2` requires beyond what any x86-64 has.
        unsafe { sum8_avx2(words) }
    } else {
        sum8(words)
    };
    black_box(acc);
    let ns = t.elapsed().as_nanos().max(1) as f64;
    std::mem::size_of_val(words) as f64 / ns
}
