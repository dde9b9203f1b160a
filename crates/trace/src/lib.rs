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

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod binary;
mod error;
mod input;
mod reader;
mod text;

use std::fmt;
use std::str::FromStr;

pub use binary::{TraceWriter, FORMAT_VERSION, MAGIC};
pub use error::{BinaryError, ParseError, TraceError};
pub use reader::{open, TraceReader};

/// Largest access size accepted in any format (1 MiB). Larger sizes, and
/// size 0, are errors: no single instruction touches that much memory, so
/// such a record is a corrupt or misparsed line.
pub const MAX_ACCESS_SIZE: u32 = 1 << 20;

/// What a record does to memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKind {
    /// Instruction fetch of `size` bytes at `addr`.
    Instr,
    /// Data load.
    Load,
    /// Data store.
    Store,
    /// A load and a store of the same address by one instruction (lackey
    /// `M`, e.g. `inc [mem]`). Kept distinct: callers decide whether it is
    /// one access or a load followed by a store.
    Modify,
    /// Software prefetch hint.
    Prefetch,
    /// Non-temporal (streaming) store that bypasses the caches.
    NtStore,
    /// Flush of the cache line(s) holding `addr`..`addr+size` (clflush).
    /// Dinero's label 4 (an escape that the Dinero simulators take as "flush
    /// the cache") is read as this kind too, with the address the line has.
    Flush,
}

impl RecordKind {
    /// All kinds, in the order of their binary encoding (0..=6).
    pub const ALL: [RecordKind; 7] = [
        RecordKind::Instr,
        RecordKind::Load,
        RecordKind::Store,
        RecordKind::Modify,
        RecordKind::Prefetch,
        RecordKind::NtStore,
        RecordKind::Flush,
    ];

    /// True for [`RecordKind::Instr`].
    #[inline]
    pub fn is_instr(self) -> bool {
        matches!(self, RecordKind::Instr)
    }

    /// Short lower-case name ("instr", "load", …).
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Instr => "instr",
            RecordKind::Load => "load",
            RecordKind::Store => "store",
            RecordKind::Modify => "modify",
            RecordKind::Prefetch => "prefetch",
            RecordKind::NtStore => "ntstore",
            RecordKind::Flush => "flush",
        }
    }
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One memory access of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// What the access does.
    pub kind: RecordKind,
    /// First byte accessed.
    pub addr: u64,
    /// Bytes accessed, `1..=MAX_ACCESS_SIZE` for every record a reader
    /// returns.
    pub size: u32,
    /// Address of the instruction that made the access, 0 if unknown.
    pub ip: u64,
    /// Thread: an index into the thread table of a cctrace file
    /// ([`TraceReader::thread_os_id`]); always 0 for the text formats.
    pub thread: u32,
}

impl Record {
    /// A record with unknown ip (0) on thread 0.
    #[inline]
    pub const fn new(kind: RecordKind, addr: u64, size: u32) -> Record {
        Record {
            kind,
            addr,
            size,
            ip: 0,
            thread: 0,
        }
    }

    /// The same record with `ip` set.
    #[inline]
    pub const fn with_ip(mut self, ip: u64) -> Record {
        self.ip = ip;
        self
    }

    /// The same record with `thread` set.
    #[inline]
    pub const fn with_thread(mut self, thread: u32) -> Record {
        self.thread = thread;
        self
    }
}

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
    fn kind_encoding_order() {
        for (i, k) in RecordKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
    }

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
