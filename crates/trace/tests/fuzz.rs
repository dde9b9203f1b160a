//! Deterministic fuzzing of the cctrace decoder (issue 33), both paths:
//! thousands of mutations (`common/mutate.rs`: bit flips, boundary bytes,
//! insertions, deletions, copies, splices, truncations) of real small
//! traces — the committed v1 and v2 samples, a v2 trace with threads,
//! stacks, the unmodelled mark and a dump skeleton attached, and a
//! streamed capture's trace (chunks, then the skeleton, its index and the
//! end marker, as `coldcache-capture` writes it), read from a file by its
//! path so the tail path (`tail.rs`) reads it too. Each input is read by
//! the fast path and by the checked path alone
//! (`set_reference_decoding`). Neither may panic, hang (a watchdog ends
//! the run, naming the case) or ask for more than 64 MiB at once (the
//! allocator remembers the largest request); every error names the file;
//! the two paths give the same records and the same error.
//! `COLDCACHE_FUZZ_ITERATIONS=N` runs N mutations per sample (default
//! 1,200: a few seconds in release).

#[path = "common/mutate.rs"]
mod mutate;

use coldcache_cctrace::stream;
use coldcache_trace::{Record, RecordKind, TraceReader, TraceWriter, ATTACH_DUMP_SKELETON};
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

/// The records of a small capture-like run: two threads, stack switches,
/// an unmodelled instruction, every access kind.
fn records() -> Vec<Record> {
    let mut v = Vec::new();
    for i in 0..40u64 {
        let thread = (i % 3 == 0) as u32;
        let stack = (i / 7) as u32;
        let ip = 0x40_1000 + i * 4;
        let mut r = Record::new(RecordKind::Instr, ip, 4)
            .with_ip(ip)
            .with_thread(thread)
            .with_stack(stack);
        r.unmodelled = i == 13;
        v.push(r);
        let kind = [RecordKind::Load, RecordKind::Store, RecordKind::Modify][(i % 3) as usize];
        v.push(
            Record::new(kind, 0x7ffd_0000 + i * 24, 8)
                .with_ip(ip)
                .with_thread(thread)
                .with_stack(stack),
        );
    }
    v
}

fn skeleton() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../dump/tests/data/v2.ccdump"))
        .unwrap()
}

/// A v2 trace written by `TraceWriter`, with a skeleton attached.
fn written() -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    w.define_thread(0, 4242).unwrap();
    w.define_thread(1, 4243).unwrap();
    for r in records() {
        w.write(&r).unwrap();
    }
    w.attach(ATTACH_DUMP_SKELETON, &skeleton()).unwrap();
    w.finish().unwrap()
}

/// A streamed capture's trace: header, record chunks, the skeleton
/// attachment, its index and the end marker.
fn streamed() -> Vec<u8> {
    let mut out = stream::stream_header();
    let mut enc = stream::ChunkEncoder::new(16, 2);
    enc.define_thread(0, 4242);
    enc.define_thread(1, 4243);
    let mut total = 0u64;
    for r in records() {
        if !enc.fits(1) {
            out.extend_from_slice(enc.seal());
            enc.clear();
        }
        enc.push(&r);
        total += 1;
    }
    out.extend_from_slice(enc.seal());
    let at = out.len() as u64;
    out.extend_from_slice(&stream::attachment_chunk(ATTACH_DUMP_SKELETON, &skeleton()));
    out.extend_from_slice(&stream::skeleton_index_chunk(at));
    out.extend_from_slice(&stream::end_marker(total));
    out
}

/// Recomputes the header's and every chunk's CRC32 (as far as the
/// lengths lead), so the decoders see the mutations rather than a
/// checksum error.
fn fix_crcs(v: &mut [u8]) {
    let u32_at = |v: &[u8], at: usize| u32::from_le_bytes(v[at..at + 4].try_into().unwrap());
    if v.len() < 16 {
        return;
    }
    let m = u32_at(v, 12) as usize;
    let Some(end) = (16 + m).checked_add(4).filter(|&e| e <= v.len()) else {
        return;
    };
    let crc = crc32fast::hash(&v[..16 + m]);
    v[16 + m..end].copy_from_slice(&crc.to_le_bytes());
    let mut at = end;
    while at + 12 <= v.len() {
        let len = u32_at(v, at) as usize;
        if len == 0 || at + 12 + len > v.len() {
            return;
        }
        let crc = crc32fast::hash(&v[at + 12..at + 12 + len]);
        v[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
        at += 12 + len;
    }
}

/// Everything one path gives: the records up to the end or the first
/// error, and that error.
#[derive(Debug, PartialEq)]
struct Outcome {
    records: Vec<Record>,
    error: Option<String>,
}

fn read(r: Result<TraceReader, coldcache_trace::TraceError>, reference: bool) -> Outcome {
    let mut r = match r {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                records: Vec::new(),
                error: Some(e.to_string()),
            }
        }
    };
    r.set_reference_decoding(reference);
    let mut records = Vec::new();
    let mut buf = Vec::new();
    let error = loop {
        match r.read_batch(&mut buf, 1000) {
            Ok(0) => break None,
            Ok(_) => records.extend_from_slice(&buf),
            Err(e) => break Some(e.to_string()),
        }
    };
    Outcome { records, error }
}

/// Reads `bytes` as the file `name` (in memory, or from `file` by path
/// when given) with both paths; checks they agree and that an error
/// names the file.
fn check(name: &str, bytes: &[u8], file: Option<&Path>) -> Outcome {
    let open = || match file {
        Some(p) => coldcache_trace::open(p, None),
        None => {
            TraceReader::from_reader(name.to_string(), std::io::Cursor::new(bytes.to_vec()), None)
        }
    };
    let fast = read(open(), false);
    let reference = read(open(), true);
    assert_eq!(fast, reference, "{name}: the two paths disagree");
    let named = file.map_or(name.to_string(), |p| p.display().to_string());
    if let Some(e) = &fast.error {
        assert!(e.contains(&named), "{name}: an error without the file: {e}");
    }
    fast
}

#[test]
fn mutated_cctraces_are_read_or_refused_by_name_by_both_paths() {
    let samples = [
        ("sample-v1.cctrace", data("sample-v1.cctrace")),
        ("sample-v2.cctrace", data("sample-v2.cctrace")),
        ("written.cctrace", written()),
        ("streamed.cctrace", streamed()),
    ];
    let dir = std::env::temp_dir().join(format!("coldcache-trace-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Unmutated, each reads whole, by both paths.
    for (name, bytes) in &samples {
        let o = check(name, bytes, None);
        assert!(o.error.is_none() && !o.records.is_empty(), "{name}: {o:?}");
    }
    let file = dir.join("streamed.cctrace");
    std::fs::write(&file, &samples[3].1).unwrap();
    let o = check("streamed.cctrace", &samples[3].1, Some(&file));
    assert!(o.error.is_none() && o.records.len() == 80, "{o:?}");

    let n = mutate::iterations(1200);
    let start = std::time::Instant::now();
    let mut refused = 0usize;
    let mut fixed = 0usize;
    let tried = mutate::run(&samples, n, 0x033c_7ace, |name, v| {
        // Every other input with its checksums made right again.
        let mut v = v.to_vec();
        if fixed.is_multiple_of(2) {
            fix_crcs(&mut v);
        }
        fixed += 1;
        let v = &v[..];
        let o = if name == "streamed.cctrace" {
            // From a file, so the tail path looks for the skeleton.
            std::fs::write(&file, v).unwrap();
            check(name, v, Some(&file))
        } else {
            check(name, v, None)
        };
        refused += o.error.is_some() as usize;
    });
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "cctrace fuzz: {tried} inputs ({refused} refused by name, {} read) in {:.1} s, no panic, \
         hang or allocation over {} MiB, both paths equal",
        tried - refused,
        start.elapsed().as_secs_f64(),
        mutate::ALLOCATION_LIMIT >> 20
    );
    assert!(
        refused > 0 && refused < tried,
        "mutations that change nothing test nothing"
    );
}
