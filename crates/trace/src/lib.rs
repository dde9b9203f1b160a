//! coldcache-trace: readers and a writer of memory-access traces.
//!
//! Three formats are read, each plain, gzip- or zstd-compressed (detected
//! from the first bytes, whatever the file name):
//!
//! * [`Format::Lackey`]: Valgrind `--tool=lackey --trace-mem=yes` output,
//!   which is also the format of the CS:APP Cache Lab traces
//!   (`I  0400d7d4,8`, ` L 7ff0005c8,8`, ` S …`, ` M …`);
//! * [`Format::Dinero`]: the Dinero III/IV "din" format (`LABEL ADDRESS
//!   [SIZE]`);
//! * [`Format::Binary`]: coldcache's own chunked, checksummed binary format
//!   "cctrace", described in `docs/trace-format.md`, which
//!   [`TraceWriter`] writes.
//!
//! ```
//! use coldcache_trace::{Record, RecordKind, TraceReader};
//! let text = "==1== Lackey, an example Valgrind tool\nI  0400d7d4,8\n L 7ff0005c8,8\n";
//! let mut reader =
//!     TraceReader::from_reader("mem.trace".to_string(), std::io::Cursor::new(text), None).unwrap();
//! let mut batch = Vec::new();
//! assert_eq!(reader.read_batch(&mut batch, 1024).unwrap(), 2);
//! assert_eq!(batch[1], Record::new(RecordKind::Load, 0x7ff0005c8, 8).with_ip(0x400d7d4));
//! assert_eq!(reader.read_batch(&mut batch, 1024).unwrap(), 0);
//! ```
//!
//! Reading is done in batches ([`TraceReader::read_batch`]) so that a
//! simulator pays the reader's per-call overhead once per few thousand
//! records; [`TraceReader`] is also an [`Iterator`] for convenience.
//!
//! The two hot formats have two decoding paths: a fast path (`binary.rs`'s
//! `fast_run`, ordinary cctrace records from a fixed window of the chunk
//! straight into the caller's batch; `text.rs`'s `fast_lackey`, lines
//! exactly as Valgrind writes them) in front of the checked path, which
//! takes every item the fast path declines and gives every error.
//! [`TraceReader::set_reference_decoding`] selects the checked path alone,
//! so `tests/fast_paths.rs` and `tests/fuzz.rs` compare the two record for
//! record and error for error.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod binary;
mod input;
mod reader;
pub mod tail;
mod text;

use std::fmt;
use std::str::FromStr;

pub use coldcache_cctrace::stream;
/// The trace format core (records, the cctrace writer, errors), kept in
/// `coldcache-cctrace` so the preloaded library links no reader.
pub use coldcache_cctrace::{
    BinaryError, ParseError, Record, RecordKind, TraceError, TraceWriter, ATTACH_DUMP_SKELETON,
    FORMAT_VERSION, MAGIC, MAX_ACCESS_SIZE, OLDEST_VERSION,
};
pub use reader::{open, TraceReader};

/// A trace format. Parsed from "lackey", "dinero" / "din", "binary" /
/// "cctrace" (case-insensitive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Valgrind lackey `--trace-mem=yes` text (also CS:APP Cache Lab).
    Lackey,
    /// Dinero "din" text: `LABEL ADDRESS [SIZE]`.
    Dinero,
    /// coldcache's binary "cctrace" format.
    Binary,
}

impl Format {
    /// The canonical name ("lackey", "dinero", "binary").
    pub fn name(self) -> &'static str {
        match self {
            Format::Lackey => "lackey",
            Format::Dinero => "dinero",
            Format::Binary => "binary",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error of [`Format::from_str`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown trace format {0:?} (expected lackey, dinero, din, binary or cctrace)")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Format, UnknownFormat> {
        match s.trim().to_ascii_lowercase().as_str() {
            "lackey" => Ok(Format::Lackey),
            "dinero" | "din" => Ok(Format::Dinero),
            "binary" | "cctrace" => Ok(Format::Binary),
            _ => Err(UnknownFormat(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_parse() {
        for (s, f) in [
            ("lackey", Format::Lackey),
            ("Dinero", Format::Dinero),
            ("din", Format::Dinero),
            ("binary", Format::Binary),
            ("CCTRACE", Format::Binary),
        ] {
            assert_eq!(s.parse::<Format>().unwrap(), f);
        }
        let e = "pin".parse::<Format>().unwrap_err();
        assert!(e.to_string().contains("\"pin\""), "{e}");
        for f in [Format::Lackey, Format::Dinero, Format::Binary] {
            assert_eq!(f.name().parse::<Format>().unwrap(), f);
        }
    }
}
