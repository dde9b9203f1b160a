//! Deterministic mutation test of the reader: 100,000 mutations (bit flips,
//! random bytes, insertions, deletions, copies, truncations) of the
//! committed samples, each with its CRC trailer recomputed so the section
//! decoders see the damage rather than a checksum error. `Dump::from_bytes`
//! must return an error or a dump, never panic; a dump it returns must
//! survive a round trip. (The fuzz targets in `fuzz/` do the same without
//! a fixed budget.) Also (issue 33): no input may ask for more than 64 MiB
//! at once (the allocator of `../trace/tests/common/mutate.rs` remembers
//! the largest request), and a watchdog ends the run, naming the
//! mutation, if one takes more than 10 s. `COLDCACHE_FUZZ_ITERATIONS`
//! sets the number of mutations for a longer run.

#[path = "../../trace/tests/common/mutate.rs"]
mod fuzz;

use coldcache_dump::{Dump, TRAILER};
use fuzz::Largest;

#[global_allocator]
static ALLOC: Largest = Largest;

/// xorshift64*: a fixed sequence, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn fix_crc(v: &mut [u8]) {
    if v.len() < 28 {
        return;
    }
    let body = v.len() - 12;
    let crc = crc32fast::hash(&v[..body]);
    v[body..body + 8].copy_from_slice(TRAILER);
    v[body + 8..].copy_from_slice(&crc.to_le_bytes());
}

fn mutate(rng: &mut Rng, v: &mut Vec<u8>) {
    // Leave the 16-byte header and the trailer mostly alone: the body is
    // what the decoders read.
    for _ in 0..1 + rng.below(4) {
        let n = v.len();
        let at = if n > 28 {
            16 + rng.below(n - 28)
        } else {
            rng.below(n)
        };
        match rng.below(7) {
            0 => v[at] ^= 1 << rng.below(8),
            1 => v[at] = rng.next() as u8,
            2 => v[at] = [0, 0x7f, 0x80, 0xff][rng.below(4)],
            3 => {
                let len = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            4 => {
                let len = (1 + rng.below(16)).min(n - at);
                v.drain(at..at + len);
            }
            5 => {
                let from = rng.below(n);
                let len = (1 + rng.below(32)).min(n - from);
                let chunk = v[from..from + len].to_vec();
                v.splice(at..at, chunk);
            }
            _ => v.truncate(at + 12),
        }
        if v.len() < 28 {
            return;
        }
    }
}

#[test]
fn a_hundred_thousand_mutations_never_panic() {
    let samples: Vec<Vec<u8>> = [
        "v1.ccdump",
        "v2.ccdump",
        "v2-resolved-real.ccdump",
        "v3.ccdump",
        "v4.ccdump",
        "v6-timeline.ccdump",
    ]
    .iter()
    .map(|n| {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data")
                .join(n),
        )
        .unwrap()
    })
    .collect();
    let mut rng = Rng(0x00c0_1dca_c4e5_eed1);
    let (mut loaded, mut refused) = (0, 0);
    let n = fuzz::iterations(100_000);
    let dog = fuzz::Watchdog::start(std::time::Duration::from_secs(10));
    let start = std::time::Instant::now();
    for i in 0..n {
        let mut v = samples[i % samples.len()].clone();
        mutate(&mut rng, &mut v);
        fix_crc(&mut v);
        dog.case(format!("mutation {i}"));
        dog.tick();
        Largest::reset();
        let r = Dump::from_bytes(&v);
        let big = Largest::get();
        assert!(
            big <= fuzz::ALLOCATION_LIMIT,
            "mutation {i}: one allocation of {big} bytes for a dump of {} bytes",
            v.len()
        );
        match r {
            Ok(d) => {
                loaded += 1;
                let again = Dump::from_bytes(&d.to_bytes())
                    .unwrap_or_else(|e| panic!("mutation {i}: reloading failed: {e}"));
                assert_eq!(again, d, "mutation {i}: round trip changed the dump");
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                refused += 1;
            }
        }
    }
    eprintln!(
        "dump fuzz: {n} mutations, {loaded} loaded, {refused} refused, in {:.1} s; no panic, \
         hang or allocation over {} MiB",
        start.elapsed().as_secs_f64(),
        fuzz::ALLOCATION_LIMIT >> 20
    );
    assert!(
        refused > n / 2,
        "the mutations should mostly break something"
    );
    assert!(
        loaded > 0,
        "some mutations (counter values, strings) stay valid"
    );
}
