//! Deterministic fuzzing of the zones format reader (issue 33): thousands
//! of mutations (`../trace/tests/common/mutate.rs`: bit flips, boundary
//! bytes, insertions, deletions, copies, splices, truncations) of the
//! committed v1 and v2 samples, every other one with its sections' CRCs
//! made right so the section decoders see the damage. Each input goes through what
//! `coldcache zones` does with a file — `format::decode`, `parse::parse`,
//! the views and the exports — and through `format::summarize` (what
//! `zones record` reads). None may panic, hang (a watchdog ends the run,
//! naming the case) or ask for more than 64 MiB at once; an input that is
//! refused is refused with an error (the command puts the file's name in
//! front: `zones_cmd::open_zones`, tested in `crates/cli/tests/hostile_input.rs`).
//! Every 16th input is also read from a file by the streaming reader
//! (`coldcache_zones::stream`, what the command uses), which must give the
//! same index, problems and output as the in-memory reading
//! (`common/stream_check.rs`).
//! `COLDCACHE_FUZZ_ITERATIONS=N` runs N mutations per sample (default
//! 20,000: about a second in release).

#[path = "../../trace/tests/common/mutate.rs"]
mod mutate;
#[path = "common/stream_check.rs"]
mod stream_check;

use coldcache_zones::{export, format, parse, views};
use mutate::Largest;
use std::path::Path;

#[global_allocator]
static ALLOC: Largest = Largest;

fn data(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .unwrap()
}

/// Recomputes the CRC of every section (as far as the lengths lead).
fn fix_crcs(v: &mut [u8]) {
    let mut at = 16;
    while at + 12 <= v.len() {
        let len = u64::from_le_bytes(v[at + 4..at + 12].try_into().unwrap());
        let Some(end) = usize::try_from(len)
            .ok()
            .and_then(|l| (at + 12).checked_add(l))
            .filter(|&e| e + 4 <= v.len())
        else {
            return;
        };
        let crc = crc32fast::hash(&v[at + 12..end]);
        v[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        at = end + 4;
    }
}

/// Everything the command does with a recording's bytes.
fn read(bytes: &[u8]) -> bool {
    let d = format::decode(bytes);
    let refused = d.error.is_some();
    if let Some(e) = &d.error {
        assert!(!e.to_string().is_empty());
    }
    let rec = parse::parse(&d);
    let threads: Vec<_> = rec.threads.iter().collect();
    let _ = views::top_down(&threads);
    let _ = views::bottom_up(&threads);
    let _ = views::flat(&threads);
    let _ = export::chrome(&rec);
    let _ = export::folded(&rec, views::Unit::Us);
    let _ = export::speedscope(&rec, "fuzz.zones");
    let _ = format::summarize(&mut std::io::Cursor::new(bytes));
    refused
}

#[test]
fn mutated_zones_files_are_read_or_refused_never_a_panic() {
    let samples = [
        ("sample-v1.zones", data("sample-v1.zones")),
        ("sample-v2.zones", data("sample-v2.zones")),
    ];
    for (name, bytes) in &samples {
        let d = format::decode(bytes);
        assert!(d.error.is_none() && d.complete, "{name}: {:?}", d.error);
        assert!(!read(bytes), "{name}");
    }
    let n = mutate::iterations(20_000);
    let start = std::time::Instant::now();
    let (mut refused, mut fixed) = (0usize, 0usize);
    let tried = mutate::run(&samples, n, 0x0332_02e5, |_, v| {
        let mut v = v.to_vec();
        if fixed.is_multiple_of(2) {
            fix_crcs(&mut v);
        }
        fixed += 1;
        refused += read(&v) as usize;
        if fixed % 16 == 0 {
            stream_check::same_both_ways(&v);
        }
    });
    eprintln!(
        "zones fuzz: {tried} inputs ({refused} refused, {} read) in {:.1} s, no panic, hang or \
         allocation over {} MiB",
        tried - refused,
        start.elapsed().as_secs_f64(),
        mutate::ALLOCATION_LIMIT >> 20
    );
    assert!(
        refused > 0 && refused < tried,
        "mutations that change nothing test nothing"
    );
}
