//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::Cursor;
use std::path::PathBuf;

use coldcache_trace::{Format, Record, TraceError, TraceReader};

/// The CS:APP Cache Lab traces: `shared/data/cachelab` beside the
/// repository (as on the developers' machines and in CI), if present.
pub fn cachelab_dir() -> Option<PathBuf> {
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/cachelab");
    [beside, PathBuf::from("/work/shared/data/cachelab")]
        .into_iter()
        .find(|p| p.join("dave.trace").is_file())
}

/// A reader over in-memory bytes.
pub fn reader(
    name: &str,
    data: impl Into<Vec<u8>>,
    format: Option<Format>,
) -> Result<TraceReader, TraceError> {
    TraceReader::from_reader(name.to_string(), Cursor::new(data.into()), format)
}

/// All records of a reader, in batches of `batch`.
pub fn read_all(r: &mut TraceReader, batch: usize) -> Result<Vec<Record>, TraceError> {
    let mut all = Vec::new();
    let mut buf = Vec::new();
    loop {
        let n = r.read_batch(&mut buf, batch)?;
        if n == 0 {
            return Ok(all);
        }
        assert_eq!(n, buf.len());
        assert!(n <= batch);
        all.extend_from_slice(&buf);
    }
}

/// Reads `data` fully, returning the records or the first error.
pub fn parse(name: &str, data: impl Into<Vec<u8>>) -> Result<Vec<Record>, TraceError> {
    let mut r = reader(name, data, None)?;
    read_all(&mut r, 1000)
}

/// The message of the error reading `data` gives.
pub fn error_of(name: &str, data: impl Into<Vec<u8>>) -> String {
    match parse(name, data) {
        Ok(records) => panic!("expected an error, got {} records", records.len()),
        Err(e) => e.to_string(),
    }
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

/// A fresh path in the test's scratch directory.
pub fn temp_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("coldcache-trace-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{}-{name}", std::process::id()))
}

/// A synthetic lackey trace of `n` records (every kind, several sizes,
/// addresses of 3 to 16 hex digits), with a Valgrind banner.
pub fn synthetic_lackey(n: usize) -> String {
    let mut s = String::from("==4242== Lackey, an example Valgrind tool\n==4242== \n");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let size = [1, 2, 4, 8, 16, 32][(x % 6) as usize];
        let addr = match i % 5 {
            0 => 0x0040_0000 + (x & 0xfffff),
            1 | 2 => 0x007f_f000_0000 + (x & 0xffff),
            3 => x,
            _ => x & 0xfff,
        };
        match i % 7 {
            0 | 4 => s.push_str(&format!("I  {addr:08x},{size}\n")),
            1 | 5 => s.push_str(&format!(" L {addr:08x},{size}\n")),
            2 | 6 => s.push_str(&format!(" S {addr:08x},{size}\n")),
            _ => s.push_str(&format!(" M {addr:08x},{size}\n")),
        }
    }
    s.push_str("==4242== \n==4242== Exit code:       0\n");
    s
}
