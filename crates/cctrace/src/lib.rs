//! coldcache-cctrace: the core of coldcache's trace format, small enough
//! for the preloaded library: [`Record`], [`RecordKind`],
//! [`MAX_ACCESS_SIZE`], the cctrace writer [`TraceWriter`] and the trace
//! errors. No reader and no decompressor lives here (they are
//! `coldcache-trace`'s, which re-exports everything of this crate), so a
//! capture links a writer, never a parser.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub mod stream;
#[doc(hidden)]
pub mod wire;
mod writer;

use std::fmt;

#[doc(hidden)]
pub use error::show;
pub use error::{BinaryError, ParseError, TraceError};
pub use stream::{ChunkEncoder, ATTACH_SKELETON_INDEX};
pub use wire::{ATTACH_DUMP_SKELETON, FORMAT_VERSION, MAGIC, OLDEST_VERSION};
pub use writer::TraceWriter;

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
    /// (`coldcache_trace::TraceReader::thread_os_id`); always 0 for the text formats.
    pub thread: u32,
    /// Call stack of the access: an id of the stack tree of the dump the
    /// trace was captured with (cctrace version 2); 0 (the root) when
    /// unknown, and always 0 for the text formats and version 1.
    pub stack: u32,
    /// On an [`RecordKind::Instr`] record of a capture (cctrace version
    /// 2): the instruction's data accesses could not be modelled, so none
    /// follow and it counts as unmodelled. Always false otherwise.
    pub unmodelled: bool,
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
            stack: 0,
            unmodelled: false,
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

    /// The same record with `stack` set.
    #[inline]
    pub const fn with_stack(mut self, stack: u32) -> Record {
        self.stack = stack;
        self
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
}
