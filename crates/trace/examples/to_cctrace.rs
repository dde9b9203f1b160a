//! Converts a trace of any format (lackey, din, cctrace; plain, gzip or
//! zstd) into a cctrace file with the same records, e.g. to compare
//! `coldcache sim` on lackey text and on cctrace of the same accesses.
//!
//! `cargo run --release -p coldcache-trace --example to_cctrace -- IN OUT`

use std::path::Path;

use coldcache_trace::{Record, TraceWriter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        return Err("usage: to_cctrace IN OUT".into());
    };
    let mut r = coldcache_trace::open(Path::new(input), None)?;
    let mut w = TraceWriter::new(std::io::BufWriter::new(std::fs::File::create(output)?))?;
    let mut buf: Vec<Record> = Vec::with_capacity(1 << 16);
    while r.read_batch(&mut buf, 1 << 16)? > 0 {
        w.write_all(&buf)?;
    }
    for (i, tid) in r.threads() {
        w.define_thread(i, tid)?;
    }
    let n = w.records_written();
    w.finish()?;
    eprintln!("{n} records written to {output}");
    Ok(())
}
