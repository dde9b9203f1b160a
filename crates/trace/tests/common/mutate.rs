//! The deterministic fuzzing of the input decoders (issue 33): a fixed-seed
//! PRNG mutating real small inputs (bit flips, random and boundary bytes,
//! insertions, deletions, copies within the input, splices of another
//! input, truncations), a global allocator that remembers the largest
//! single request, and a watchdog that ends the process, naming the case,
//! when one input takes too long. Included by path by the fuzz tests of
//! `coldcache-trace` (the cctrace decoder's two paths), `coldcache-zones`
//! (the zones format reader), `coldcache-dump` (`tests/mutate.rs`: the
//! allocator and the watchdog) and the CLI (`tests/hostile_input.rs`:
//! damaged files through the commands); CI runs them as plain tests. `COLDCACHE_FUZZ_ITERATIONS` sets the mutations per sample for a
//! longer run.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// xorshift64*: a fixed sequence, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Mutations per sample: `COLDCACHE_FUZZ_ITERATIONS`, else `default`.
pub fn iterations(default: usize) -> usize {
    std::env::var("COLDCACHE_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One to four mutations of `v`, `other` a second real input to splice
/// from.
pub fn mutate(rng: &mut Rng, v: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..1 + rng.below(4) {
        let n = v.len();
        if n == 0 {
            v.push(rng.next() as u8);
            continue;
        }
        let at = rng.below(n);
        match rng.below(9) {
            0 | 1 => v[at] ^= 1 << rng.below(8),
            2 => v[at] = rng.next() as u8,
            3 => {
                // A boundary value over 1, 2, 4 or 8 bytes (counts, sizes,
                // varints).
                let width = [1, 2, 4, 8][rng.below(4)].min(n - at);
                let fill = [0x00, 0x7f, 0x80, 0xff][rng.below(4)];
                v[at..at + width].fill(fill);
            }
            4 => {
                let len = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            5 => {
                let len = (1 + rng.below(32)).min(n - at);
                v.drain(at..at + len);
            }
            6 => {
                let from = rng.below(n);
                let len = (1 + rng.below(64)).min(n - from);
                let chunk = v[from..from + len].to_vec();
                v.splice(at..at, chunk);
            }
            7 if !other.is_empty() => {
                // A splice: this input's head, the other's tail.
                let from = rng.below(other.len());
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
            _ => v.truncate(at),
        }
    }
}

/// The global allocator of a fuzz test: the system's, remembering the
/// largest single request since [`Largest::reset`].
pub struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

impl Largest {
    pub fn reset() {
        LARGEST.store(0, Relaxed);
    }
    pub fn get() -> usize {
        LARGEST.load(Relaxed)
    }
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// only addition is an atomic maximum.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Relaxed);
        // SAFETY: the caller's layout, as GlobalAlloc requires.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from this allocator (the system's) with `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LARGEST.fetch_max(new, Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
}

/// The most one input may ask for at once: far above what the small
/// inputs need, far below a count read from damaged bytes.
pub const ALLOCATION_LIMIT: usize = 64 << 20;

/// A watchdog: [`Watchdog::tick`] after each input; an input that takes
/// longer than `limit` ends the process (a hang), naming the case.
pub struct Watchdog {
    done: &'static AtomicU64,
    case: &'static std::sync::Mutex<String>,
}

impl Watchdog {
    pub fn start(limit: Duration) -> Watchdog {
        let done: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
        let case: &'static std::sync::Mutex<String> =
            Box::leak(Box::new(std::sync::Mutex::new(String::new())));
        std::thread::spawn(move || {
            let mut last = (u64::MAX, Instant::now());
            loop {
                std::thread::sleep(Duration::from_millis(200));
                let now = done.load(Relaxed);
                if now == u64::MAX {
                    return;
                }
                if now != last.0 {
                    last = (now, Instant::now());
                } else if last.1.elapsed() > limit {
                    eprintln!(
                        "fuzz: {} took more than {limit:?} (a hang)",
                        case.lock().map(|c| c.clone()).unwrap_or_default()
                    );
                    std::process::abort();
                }
            }
        });
        Watchdog { done, case }
    }
    /// The case about to run (named if it hangs).
    pub fn case(&self, what: String) {
        if let Ok(mut c) = self.case.lock() {
            *c = what;
        }
    }
    pub fn tick(&self) {
        self.done.fetch_add(1, Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(u64::MAX, Relaxed);
    }
}

/// Runs `check` on `iterations` mutations of each sample (spliced with
/// the next sample), under the watchdog and the allocation limit; each
/// failure names the sample, the iteration and the seed. Returns how many
/// inputs were tried.
pub fn run(
    samples: &[(&str, Vec<u8>)],
    iterations: usize,
    seed: u64,
    mut check: impl FnMut(&str, &[u8]),
) -> usize {
    let dog = Watchdog::start(Duration::from_secs(10));
    let mut rng = Rng(seed);
    let mut tried = 0;
    for (i, (name, bytes)) in samples.iter().enumerate() {
        let other = &samples[(i + 1) % samples.len()].1;
        for it in 0..iterations {
            let mut v = bytes.clone();
            mutate(&mut rng, &mut v, other);
            let case = format!("{name}, mutation {it} (seed {seed:#x})");
            dog.case(case.clone());
            Largest::reset();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(name, &v)));
            if r.is_err() {
                panic!(
                    "{case}: the decoder panicked on {} bytes: {v:02x?}",
                    v.len()
                );
            }
            let big = Largest::get();
            assert!(
                big <= ALLOCATION_LIMIT,
                "{case}: one allocation of {big} bytes for an input of {} bytes",
                v.len()
            );
            dog.tick();
            tried += 1;
        }
    }
    tried
}
