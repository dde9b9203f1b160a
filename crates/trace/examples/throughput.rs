//! Measures reading throughput.
//!
//! `cargo run --release -p coldcache-trace --example throughput` parses a
//! synthetic lackey trace held in memory (about 150 MB), then the same
//! records as a cctrace file, and prints MB/s and records/s for each.
//! `… --example throughput -- FILE [FORMAT|-]` reads FILE instead (any format
//! or compression; MB/s is then of the file's bytes as stored), three
//! times with the checked reference decoder and three times with the fast
//! paths, alternating, in one run; a third argument `reference` or `fast`
//! reads it once that way (for Callgrind).

use std::io::Cursor;
use std::path::Path;
use std::time::Instant;

use coldcache_trace::{Format, Record, TraceError, TraceReader, TraceWriter};

/// Reads everything; returns (records, seconds, checksum of addresses).
fn drain(mut r: TraceReader) -> Result<(u64, f64, u64), TraceError> {
    let t = Instant::now();
    let mut buf: Vec<Record> = Vec::with_capacity(4096);
    let (mut n, mut sum) = (0u64, 0u64);
    loop {
        let got = r.read_batch(&mut buf, 4096)?;
        if got == 0 {
            break;
        }
        n += got as u64;
        sum = buf.iter().fold(sum, |s, r| s.wrapping_add(r.addr));
    }
    Ok((n, t.elapsed().as_secs_f64(), sum))
}

fn report(what: &str, bytes: u64, (n, secs, sum): (u64, f64, u64)) {
    println!(
        "{what}: {n} records, {:.1} MB in {secs:.3} s: {:.0} MB/s, {:.1} M records/s (checksum {sum:x})",
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / secs,
        n as f64 / 1e6 / secs
    );
}

/// A lackey trace shaped like real output: mostly instructions and
/// stack/heap accesses with 8-9 hex digit addresses.
fn synthetic(records: usize) -> String {
    let mut s = String::with_capacity(records * 16 + 200);
    s.push_str("==1== Lackey, an example Valgrind tool\n==1== \n");
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut pc = 0x0040_0000u64;
    for i in 0..records {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match i % 3 {
            0 => {
                pc = pc.wrapping_add(1 + x % 9) & 0x00ff_ffff;
                s.push_str(&format!("I  {pc:08x},{}\n", 1 + x % 9));
            }
            1 => s.push_str(&format!(" L {:09x},8\n", 0x1_fff0_0000 + (x & 0xffff))),
            _ => {
                let k = if x.is_multiple_of(5) { 'M' } else { 'S' };
                s.push_str(&format!(
                    " {k} {:08x},{}\n",
                    0x0060_0000 + (x & 0xfffff),
                    1 << (x % 4)
                ));
            }
        }
    }
    s
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(path) = args.first() {
        let format = args
            .get(1)
            .filter(|f| *f != "-")
            .map(|f| f.parse::<Format>())
            .transpose()?;
        let (rounds, modes): (usize, &[bool]) = match args.get(2).map(String::as_str) {
            Some("reference") => (1, &[true]),
            Some("fast") => (1, &[false]),
            _ => (3, &[true, false]),
        };
        for _ in 0..rounds {
            for &reference in modes {
                let mut r = coldcache_trace::open(Path::new(path), format)?;
                r.set_reference_decoding(reference);
                let size = r.total_bytes().unwrap_or(0);
                let what = format!(
                    "{path} ({}, {}, {})",
                    r.format(),
                    r.compression().unwrap_or("plain"),
                    if reference { "reference" } else { "fast" }
                );
                report(&what, size, drain(r)?);
            }
        }
        return Ok(());
    }
    let text = synthetic(10_000_000);
    let bytes = text.len() as u64;
    let data = text.into_bytes();
    for _ in 0..2 {
        let r =
            TraceReader::from_reader("synthetic.lackey".into(), Cursor::new(data.clone()), None)?;
        report("lackey text", bytes, drain(r)?);
    }
    // The same records as cctrace.
    let r = TraceReader::from_reader("synthetic.lackey".into(), Cursor::new(data), None)?;
    let records: Vec<Record> = r.collect::<Result<_, _>>()?;
    let t = Instant::now();
    let mut w = TraceWriter::new(Vec::new())?;
    w.write_all(&records)?;
    let bin = w.finish()?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "cctrace write: {} records in {secs:.3} s: {:.1} M records/s, {:.2} bytes/record",
        records.len(),
        records.len() as f64 / 1e6 / secs,
        bin.len() as f64 / records.len() as f64
    );
    let len = bin.len() as u64;
    let r = TraceReader::from_reader("synthetic.cctrace".into(), Cursor::new(bin), None)?;
    report("cctrace read", len, drain(r)?);
    Ok(())
}
