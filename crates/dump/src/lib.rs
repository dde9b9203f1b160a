//! coldcache-dump: the capture dump, a self-contained record of one capture.
//!
//! The crate is pure: [`Dump::to_bytes`] and [`Dump::from_bytes`] convert
//! between the data model and the versioned binary format documented in
//! `docs/dump-format.md`; the caller does the file I/O.
//!
//! A dump holds the capture's settings ([`Meta`]), the module map, the traced
//! threads, the interned call stacks (a tree of call sites) and one
//! [`Record`] of counters per (instruction address, stack, thread).
//! [`ByInstruction`] reads a dump with its records summed per instruction
//! address and kept encoded, for the work that needs no more (resolving,
//! summaries), at a small part of the memory.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! "COLDDUMP" u32 version u32 reserved
//! section*   := tag[4] u64 length payload[length]
//! "CRC32\0\0\0" u32 crc32(all bytes before the trailer)
//! ```
//!
//! Sections of version 1, in this order: `META` (JSON), `MODS`, `THRD`,
//! `STKS`, `RECS`. Version 2 adds an optional `SYMS` section after `RECS`:
//! the embedded symbol tables ([`Symbols`]). Version 3 adds an optional
//! `SRCS` section after it: the text of the source files the line tables
//! name ([`SourceText`]). Version 4 adds an optional `DATA` section after
//! that: the types and fields the memory accesses touch ([`DataTypes`]).
//! Version 5 adds an optional `OBJS` section after that: the objects (heap
//! blocks by allocation site, mappings) the data accesses touched
//! ([`Objects`], captures made with object tracking).
//! Version 6 adds an optional `TIME` section: the order of the window's
//! stack transitions per thread with counter deltas ([`Timeline`],
//! captures made with `record --timeline`).
//! Version 7 adds an optional `OBJI` section after `OBJS`: the allocation
//! sites' accesses per instruction ([`SiteInstructions`], captures made
//! with object tracking; only with `OBJS`).
//! Version 9 adds to every row of `OBJS` and `OBJI` the coherence
//! invalidations its accesses sent and the false sharing among them
//! ([`ObjectCounts::coherence`]).
//! Version 10 adds an optional `OBJG` section after `OBJI`: the modules'
//! globals as objects of their own ([`Globals`]; only with `OBJS`), whose
//! accesses the mappings' rows then leave out, and an optional `OBJF`
//! section: the traced threads' stack frames as objects ([`StackFrames`]).
//! Version 11 adds an optional `OBJL` section after `OBJF`: the frames'
//! accesses by stack slot ([`StackFrames::slots`]), and an optional `LOCL`
//! section after `DATA`: the local variable of each slot
//! ([`DataTypes::slots`]), so that the views split a frame into its
//! locals.
//! Version 12 writes the records in `RECZ` in place of `RECS`: per record
//! only the counters that are not 0, after a mask naming them (`RECS` is
//! still read, and kept by [`ByInstruction`] where it was read).
//! Unknown sections are skipped, so
//! later versions can add sections that older readers ignore; every older
//! version keeps loading (samples of each are under test).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod band;
mod by_instruction;
pub mod data;
pub mod names;
pub mod objects;
pub mod symbols;
pub mod text;
pub mod timeline;
mod varint;

pub use band::Band;
pub use by_instruction::ByInstruction;
pub use data::{DataType, DataTypes, Member, TypeKind, TypedAccess, TypedSlot, Via};
pub use objects::{
    AllocSite, FrameCounts, Globals, ObjectCounts, ObjectGlobal, ObjectRegion, Objects,
    SiteInstruction, SiteInstructions, SlotCounts, StackFrames, HEAP_BEFORE_WINDOW,
    MAPPED_BEFORE_WINDOW, MAPPING_ALLOCATORS,
};
pub use symbols::{Frame, Function, Location, ModuleStatus, ModuleSymbols, Symbols};
pub use text::thousands;
pub use timeline::{TimeEvent, TimeKind, Timeline};

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The file magic.
pub const MAGIC: &[u8; 8] = b"COLDDUMP";
/// The trailer magic, followed by the CRC-32 of everything before it.
pub const TRAILER: &[u8; 8] = b"CRC32\0\0\0";
/// The format version this crate writes.
pub const VERSION: u32 = 12;
/// Stack id of the empty stack (the root of the stack tree).
pub const ROOT_STACK: u32 = 0;

/// Errors reading a dump.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// Not a dump at all.
    #[error("not a coldcache dump (bad magic)")]
    BadMagic,
    /// Written by a newer coldcache.
    #[error("dump version {0} is newer than this coldcache understands (up to {VERSION})")]
    UnsupportedVersion(u32),
    /// The file ends early.
    #[error("dump is truncated: {0}")]
    Truncated(&'static str),
    /// The checksum does not match.
    #[error("dump is corrupted: checksum {stored:#010x} stored, {computed:#010x} computed")]
    Checksum {
        /// Checksum in the file.
        stored: u32,
        /// Checksum of the bytes read.
        computed: u32,
    },
    /// A section's content is inconsistent.
    #[error("dump section {section} is malformed: {what}")]
    Malformed {
        /// Section tag.
        section: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A required section is missing.
    #[error("dump has no {0} section")]
    MissingSection(&'static str),
}

/// For `skip_serializing_if`: a count not written when zero.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Capture settings and totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The program and its arguments, when known.
    pub program: Vec<String>,
    /// Process id of the captured program.
    pub pid: u32,
    /// Name of the cache configuration (a preset name or a file path).
    pub cache_name: String,
    /// The cache configuration, as TOML (accepted by `--cache`).
    pub cache_toml: String,
    /// Names of the hierarchy's levels, nearest first (e.g. `["L1", "L2"]`).
    pub levels: Vec<String>,
    /// Simulated cores.
    pub cores: u32,
    /// Which threads were traced (`all`, `caller`, `tids:…`, `names:…`).
    pub threads: String,
    /// What started the capture (`api`, `function:NAME`, `signal`, `all`).
    pub trigger: String,
    /// Start of the capture, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// Wall time the capture lasted.
    pub duration_ns: u64,
    /// Why the capture stopped early, when it did (a reserve ran out, ...).
    pub cut_short: Option<String>,
    /// Names of the counters of each record, in order (see [`counters`]).
    pub counters: Vec<String>,
    /// Instructions traced in total.
    pub instructions: u64,
    /// Instructions the access model could not handle, by reason.
    pub unmodelled: Vec<(String, u64)>,
    /// Instructions that ran without a trap (after `syscall`), in total.
    pub untrapped: u64,
    /// Other notes (one line each) worth showing with the report.
    pub notes: Vec<String>,
    /// How the cache was warmed before the window: empty for a cold
    /// cache (every dump before this field existed), else what went
    /// through the simulator without being counted (`by calls 1 to 2 of
    /// the function (…)`). Written only when not empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub warm: String,
    /// How traced threads were interleaved in the simulator: empty as the
    /// operating system ran them (every dump before this field existed),
    /// else `serial, quantum N instructions`. Written only when not empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub schedule: String,
    /// Which calls of the function a `function:` capture covered, counted
    /// from the start of the run (or of the attach): `3` or `3 to 5`.
    /// Empty for other triggers, for a function never called, and in every
    /// dump before this field existed. Written only when not empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub calls: String,
    /// The call of a `function:` capture that the program's exit ended
    /// (it never returned: `exit()` in it, a `main` ending in `exit` under
    /// `record --all`); it is among `calls`, captured up to the exit. 0
    /// when none, and in every dump before this field existed. Written
    /// only when not zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit_ended: u64,
    /// The layout-noise band: the counter totals of the measured placement
    /// and of moved ones (`coldcache sim --placements`, [`band`]). Written
    /// only when present; older readers ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band: Option<Band>,
    /// Threads of the process that `--threads` left untraced: those alive
    /// when a window began (the most over the windows) and those a traced
    /// thread started during one. Their instructions and accesses are not
    /// in the dump. Written only when not zero; zero in every dump before
    /// this field existed.
    #[serde(default, skip_serializing_if = "Untraced::is_none")]
    pub untraced: Untraced,
    /// Valgrind's client requests (`callgrind.h`, `cachegrind.h`) the
    /// program made during the capture, and whether they were honoured.
    /// Written only when honoured or any was made.
    #[serde(default, skip_serializing_if = "ClientRequests::is_empty")]
    pub client_requests: ClientRequests,
    /// Which part of a profile cut by `CALLGRIND_DUMP_STATS` requests this
    /// dump is (each part a dump of its own, as Callgrind writes a file per
    /// dump). Written only for a capture that was cut so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<Part>,
    /// Waits of the program (`nanosleep`, `poll`, `epoll_wait`, ... the
    /// kernel does not restart after a signal handler) that the capture's
    /// signals ended early with EINTR: the sync signal starting a thread's
    /// tracing, and the trigger signal. Written only when not zero.
    #[serde(default, skip_serializing_if = "WokenEarly::is_none")]
    pub woken_early: WokenEarly,
    /// The capture engine that ran, and what fast mode left to the trap
    /// engine. Written by captures since version 8 (before, the same was a
    /// note, `capture mode fast: N ...`, which readers still understand);
    /// absent where no engine ran (a re-simulated trace).
    #[serde(default, skip_serializing_if = "Mode::is_unknown")]
    pub mode: Mode,
}

/// The capture engine that ran ([`Meta::mode`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mode {
    /// `fast` or `trap`; empty when not recorded (a dump written before
    /// this field, or by no capture engine).
    pub engine: String,
    /// For `trap` chosen by `--mode auto`: why fast mode could not run.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fallback: String,
    /// Fast mode: instructions that ran under the trap engine.
    #[serde(default)]
    pub trapped: u64,
    /// Fast mode: those by cause, (count, cause), causes with a count only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trapped_by: Vec<(u64, String)>,
    /// Fast mode: entries into the dispatcher.
    #[serde(default)]
    pub dispatches: u64,
}

impl Mode {
    /// Whether no engine was recorded (the field is then not written).
    pub fn is_unknown(&self) -> bool {
        self.engine.is_empty()
    }
}

/// Waits the capture's signals ended early ([`Meta::woken_early`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WokenEarly {
    /// Ended by the sync signal that starts a thread's tracing.
    pub by_start: u64,
    /// Ended by the trigger signal (`--signal`, `attach` without a
    /// trigger: its start and its stop).
    pub by_trigger: u64,
}

impl WokenEarly {
    /// None was ended early.
    pub fn is_none(&self) -> bool {
        self.by_start == 0 && self.by_trigger == 0
    }
}

/// A part of a profile ([`Meta::part`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// Its number, from 1.
    pub number: u32,
    /// How many parts the capture has.
    pub of: u32,
    /// What ended it, in Callgrind's words: `Client Request`, `Client
    /// Request: LABEL` (`DUMP_STATS_AT`), `Program termination` (the last).
    pub trigger: String,
}

/// Valgrind client requests of a capture ([`Meta::client_requests`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRequests {
    /// They took effect (`coldcache valgrind`, `record
    /// --client-requests`); otherwise they were only counted.
    pub honoured: bool,
    /// How many of each kind were made, by the macro's name
    /// (`CALLGRIND_TOGGLE_COLLECT`), kinds not made left out.
    pub made: Vec<(String, u64)>,
}

impl ClientRequests {
    /// Not honoured, none made.
    pub fn is_empty(&self) -> bool {
        !self.honoured && self.made.is_empty()
    }
}

/// Threads the capture's selection (`--threads`) left untraced
/// ([`Meta::untraced`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Untraced {
    /// Threads alive when a window began that were not selected (the
    /// most over the windows; the capture's own threads not counted).
    pub present: u64,
    /// Threads a traced thread started during a window (`clone` of a
    /// thread), which the selection did not trace.
    pub started: u64,
}

impl Untraced {
    /// No thread was left untraced.
    pub fn is_none(&self) -> bool {
        self.present == 0 && self.started == 0
    }
}

/// One executable mapping of the captured process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Module {
    /// Path of the mapped file.
    pub path: String,
    /// GNU build id, empty when the file has none.
    pub build_id: Vec<u8>,
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset mapped at `start`.
    pub file_offset: u64,
}

/// One traced thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Thread {
    /// Kernel thread id.
    pub tid: u32,
    /// Thread name (`comm`), possibly empty.
    pub name: String,
    /// Simulated core the thread ran on.
    pub core: u32,
}

/// One node of the stack tree: the stack of its parent plus one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackNode {
    /// Parent stack id (`ROOT_STACK` for a frame called from the root; the
    /// root's own parent is itself).
    pub parent: u32,
    /// Address of the call instruction (for frames found by unwinding at
    /// capture start: the return address minus one).
    pub call_site: u64,
    /// Address the call went to (the callee's entry), 0 when unknown.
    pub callee: u64,
}

/// Counters of one (instruction, stack, thread).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Instruction address.
    pub ip: u64,
    /// Stack id (index into [`Dump::stacks`]).
    pub stack: u32,
    /// Thread index (into [`Dump::threads`]).
    pub thread: u32,
    /// Counter values, named by [`Meta::counters`].
    pub counters: Vec<u64>,
}

/// How a dump's section of records lays them out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum RecordsForm {
    /// `RECS` (every version): every counter of every record.
    Dense,
    /// `RECZ` (version 12 on, what is written): per record a mask of its
    /// counters that are not 0, then those counters only. CPython's 14.7M
    /// records take 8.5 bytes each where `RECS` took 20 (most counters of
    /// a row are 0: an instruction that hits in the first level has its
    /// count, its fetch's hit and perhaps one access's).
    #[default]
    Sparse,
}

impl RecordsForm {
    /// The section's tag.
    fn name(self) -> &'static str {
        match self {
            RecordsForm::Dense => "RECS",
            RecordsForm::Sparse => "RECZ",
        }
    }
}

/// Where a dump's records lie in its bytes, and in which form.
#[derive(Clone, Debug)]
pub(crate) struct RecordsAt {
    pub(crate) form: RecordsForm,
    pub(crate) range: std::ops::Range<usize>,
}

/// Records encoded as a dump's `RECZ` section holds them (about 8 to 20
/// bytes a record where a [`Record`] takes about 180), for
/// [`Dump::to_bytes_with_records`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedRecords {
    /// The section's layout (`RECZ` but for tests of older versions).
    form: RecordsForm,
    /// Counters per record.
    counters: usize,
    /// Records.
    count: usize,
    /// The section's payload.
    payload: Vec<u8>,
}

impl EncodedRecords {
    /// Encodes the records `rows` gives, in order, as (instruction
    /// address, stack id, thread index, counters): `counters` counters
    /// each (missing ones are 0, extra ones are left out), as
    /// [`Dump::to_bytes`] encodes [`Record`]s.
    pub fn new<C: AsRef<[u64]>>(
        counters: usize,
        rows: impl ExactSizeIterator<Item = (u64, u32, u32, C)>,
    ) -> EncodedRecords {
        EncodedRecords::new_in(RecordsForm::Sparse, counters, rows)
    }

    /// [`EncodedRecords::new`] in `form`.
    fn new_in<C: AsRef<[u64]>>(
        form: RecordsForm,
        counters: usize,
        rows: impl ExactSizeIterator<Item = (u64, u32, u32, C)>,
    ) -> EncodedRecords {
        let mut e = EncodedRecords::encoder_in(form, counters, rows.len());
        for (ip, stack, thread, c) in rows {
            e.push(ip, stack, thread, c.as_ref());
        }
        e.finish()
    }

    /// An encoder of `count` records of `counters` counters each, pushed
    /// one by one ([`RecordEncoder::push`]), for a writer that makes each
    /// record's counters in a buffer of its own: nothing is moved or
    /// zeroed per record but the counters themselves.
    pub fn encoder(counters: usize, count: usize) -> RecordEncoder {
        EncodedRecords::encoder_in(RecordsForm::Sparse, counters, count)
    }

    /// [`EncodedRecords::encoder`] in `form`.
    fn encoder_in(form: RecordsForm, counters: usize, count: usize) -> RecordEncoder {
        let mut b = Vec::with_capacity(16 + count * 10);
        varint::put(&mut b, counters as u64);
        varint::put(&mut b, count as u64);
        RecordEncoder {
            records: EncodedRecords {
                form,
                counters,
                count,
                payload: b,
            },
            left: count,
            prev_ip: 0,
        }
    }
    /// How many records.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// A dump encoded in three parts which, written in order, are the file
/// [`Dump::to_bytes`] gives: everything up to the records' section's
/// payload, that payload (borrowed where the writer holds it encoded),
/// and the sections after it with the trailer.
#[derive(Debug)]
pub struct EncodedParts<'a> {
    head: Vec<u8>,
    recs: std::borrow::Cow<'a, [u8]>,
    tail: Vec<u8>,
}

impl EncodedParts<'_> {
    /// The parts, in the order they are written.
    pub fn parts(&self) -> [&[u8]; 3] {
        [&self.head, &self.recs, &self.tail]
    }

    /// The file's length in bytes.
    pub fn len(&self) -> usize {
        self.head.len() + self.recs.len() + self.tail.len()
    }

    /// True never (a dump has a header); for the lint.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file as one buffer.
    pub fn concat(&self) -> Vec<u8> {
        self.parts().concat()
    }
}

/// Encodes records one by one ([`EncodedRecords::encoder`]).
#[derive(Debug)]
pub struct RecordEncoder {
    records: EncodedRecords,
    /// Records still to push.
    left: usize,
    prev_ip: u64,
}

impl RecordEncoder {
    /// Encodes the next record: instruction address, stack id, thread
    /// index and counters (missing ones are 0, extra ones are left out).
    /// Panics past the count announced.
    #[inline]
    pub fn push(&mut self, ip: u64, stack: u32, thread: u32, c: &[u64]) {
        assert!(self.left > 0, "more records than announced");
        self.left -= 1;
        let b = &mut self.records.payload;
        // Delta-encode the address (records are usually sorted by ip).
        varint::put(b, varint::zigzag(ip.wrapping_sub(self.prev_ip) as i64));
        self.prev_ip = ip;
        varint::put(b, stack.into());
        varint::put(b, thread.into());
        let n = self.records.counters;
        if self.records.form == RecordsForm::Dense {
            for i in 0..n {
                varint::put(b, c.get(i).copied().unwrap_or(0));
            }
            return;
        }
        // Per 64 counters, the mask of those not 0, then their values.
        let c = &c[..c.len().min(n)];
        for w in 0..n.div_ceil(64) {
            let word = c.get(64 * w..c.len().min(64 * w + 64)).unwrap_or(&[]);
            let mask = word
                .iter()
                .enumerate()
                .fold(0u64, |m, (j, &v)| m | u64::from(v != 0) << j);
            varint::put(b, mask);
            for &v in word.iter().filter(|&&v| v != 0) {
                varint::put(b, v);
            }
        }
    }

    /// The records pushed. Panics when fewer than announced were.
    pub fn finish(self) -> EncodedRecords {
        assert_eq!(self.left, 0, "fewer records than announced");
        self.records
    }
}

/// A record as [`Dump`]'s decoder reads it, its counters borrowed.
#[derive(Clone, Copy, Debug)]
struct RecordRef<'a> {
    ip: u64,
    stack: u32,
    thread: u32,
    counters: &'a [u64],
}

/// A whole dump.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dump {
    /// Settings and totals.
    pub meta: Meta,
    /// Executable mappings.
    pub modules: Vec<Module>,
    /// Traced threads.
    pub threads: Vec<Thread>,
    /// The stack tree; index 0 is the root (empty stack).
    pub stacks: Vec<StackNode>,
    /// Counter records.
    pub records: Vec<Record>,
    /// Embedded symbol tables, once the dump has been resolved.
    pub symbols: Option<Symbols>,
    /// Embedded source files (version 3), so the source view works where
    /// the sources are not (empty when none were embedded).
    pub sources: Vec<SourceText>,
    /// The data types of the memory accesses (version 4), once the dump
    /// has been resolved with them.
    pub data: Option<DataTypes>,
    /// The objects the data accesses touched (version 5), for a capture
    /// made with object tracking.
    pub objects: Option<Objects>,
    /// The order of the window (version 6): stack transitions per thread
    /// with counter deltas, for a capture made with `--timeline`.
    pub timeline: Option<Timeline>,
}

/// The text of one source file, as it was when the dump was resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceText {
    /// The path, exactly as the line tables name it ([`Symbols::files`]).
    pub path: String,
    /// Its text (UTF-8; invalid bytes were replaced).
    pub text: String,
}

/// Largest source file read, in bytes (sqlite's 9 MB amalgamation fits).
pub const MAX_SOURCE_FILE: u64 = 16 << 20;

/// Why [`SourceText::read`] read nothing (the message names no path).
#[derive(Debug, thiserror::Error)]
pub enum SourceReadError {
    /// A directory, device, FIFO or socket.
    #[error("not a regular file")]
    NotAFile,
    /// Over the size limit (the limit in bytes).
    #[error("larger than {0} bytes")]
    TooLarge(u64),
    /// The read failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl SourceText {
    /// Reads source file `path` from disk as the `SRCS` section keeps it
    /// (invalid UTF-8 replaced). A dump names its files itself, so a
    /// crafted one could name `/dev/zero` or a pipe: only regular files
    /// (after symlinks) are read, and never more than `max_bytes` bytes
    /// (checked while reading, so a file growing meanwhile cannot pass):
    /// `coldcache_fsio::read_regular`, which also opens a FIFO without
    /// blocking.
    pub fn read(path: &str, max_bytes: u64) -> Result<SourceText, SourceReadError> {
        let bytes = coldcache_fsio::read_regular(path, max_bytes).map_err(|e| match e {
            coldcache_fsio::ReadError::NotRegular(_) => SourceReadError::NotAFile,
            coldcache_fsio::ReadError::TooLarge(n) => SourceReadError::TooLarge(n),
            coldcache_fsio::ReadError::Io(e) => SourceReadError::Io(e),
        })?;
        Ok(SourceText {
            path: path.to_string(),
            text: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}

/// The layout of [`Record::counters`]: [`CounterLayout`] (owned by
/// `coldcache-sim`, re-exported here) names every counter and gives every
/// offset; [`Dump::layout`] recovers it from a dump's names.
pub use coldcache_sim::{CounterLayout, Side};

impl Dump {
    /// Reads the bytes of the dump file at `path` as its header and
    /// sections announce them, for [`Dump::from_bytes`]: only a regular
    /// file; its first 16 bytes first, refused unless they begin with
    /// [`MAGIC`] (so `/proc/self/pagemap`, a "regular file" of size 0 that
    /// reads 16 GiB and more, is refused after 16 bytes); then each
    /// section's header and the length it gives, up to the trailer and
    /// one byte more (bytes after the trailer make the dump invalid, as
    /// before); never more than `max_bytes` in all, a section announcing
    /// more refused before it is read. A file that ends early is returned
    /// as read: [`Dump::from_bytes`] says where it is truncated.
    pub fn read_file(
        path: impl AsRef<std::path::Path>,
        max_bytes: u64,
    ) -> Result<Vec<u8>, coldcache_fsio::ReadError> {
        use coldcache_fsio::read::read_up_to;
        use coldcache_fsio::ReadError;
        use std::io::Read;
        let (file, len) = coldcache_fsio::open_regular(path)?;
        if len > max_bytes {
            return Err(ReadError::TooLarge(max_bytes));
        }
        let mut r = std::io::BufReader::new(file);
        let mut out = vec![0u8; 16];
        let got = read_up_to(&mut r, &mut out)?;
        out.truncate(got);
        coldcache_fsio::check_magic(&out, MAGIC, "a coldcache dump")?;
        if got < 16 {
            return Ok(out);
        }
        loop {
            let mut h = [0u8; 12];
            let n = read_up_to(&mut r, &mut h)?;
            out.extend_from_slice(&h[..n]);
            if n < 12 {
                break;
            }
            if h[..8] == TRAILER[..] {
                // One byte more: anything after the trailer is an error
                // `from_bytes` reports.
                let mut extra = [0u8; 1];
                let n = read_up_to(&mut r, &mut extra)?;
                out.extend_from_slice(&extra[..n]);
                break;
            }
            let section = u64::from_le_bytes(h[4..12].try_into().unwrap());
            if section > max_bytes.saturating_sub(out.len() as u64) {
                return Err(ReadError::TooLarge(max_bytes));
            }
            let before = out.len();
            (&mut r).take(section).read_to_end(&mut out)?;
            if ((out.len() - before) as u64) < section {
                break;
            }
        }
        Ok(out)
    }

    /// The standard counter layout of this dump, when its counter names
    /// are exactly [`CounterLayout::names`] for its levels; `None` for a
    /// dump of another layout (another tool, a later version), whose
    /// counters are then only known by name.
    pub fn layout(&self) -> Option<CounterLayout> {
        CounterLayout::from_names(&self.meta.counters, &self.meta.levels)
    }

    /// Index of a counter by name.
    pub fn counter(&self, name: &str) -> Option<usize> {
        self.meta.counters.iter().position(|c| c == name)
    }

    /// Sum of every record's counters (saturating: a dump's counters come
    /// from a file and may be anything).
    pub fn totals(&self) -> Vec<u64> {
        let mut t = vec![0u64; self.meta.counters.len()];
        for r in &self.records {
            for (a, b) in t.iter_mut().zip(&r.counters) {
                *a = a.saturating_add(*b);
            }
        }
        t
    }

    /// The call sites of a stack, outermost first.
    pub fn stack_frames(&self, mut id: u32) -> Vec<StackNode> {
        let mut v = Vec::new();
        let mut guard = 0;
        while id != ROOT_STACK && (id as usize) < self.stacks.len() && guard <= self.stacks.len() {
            let n = self.stacks[id as usize];
            v.push(n);
            id = n.parent;
            guard += 1;
        }
        v.reverse();
        v
    }

    /// The module containing `addr`, as an index into [`Dump::modules`].
    pub fn module_of(&self, addr: u64) -> Option<usize> {
        self.modules
            .iter()
            .position(|m| m.start <= addr && addr < m.end)
    }

    /// The embedded text of source file `path`, if the dump has it.
    pub fn source(&self, path: &str) -> Option<&str> {
        self.sources
            .iter()
            .find(|s| s.path == path)
            .map(|s| s.text.as_str())
    }

    /// Every distinct address the dump mentions: record instructions, call
    /// sites and callee entries, sorted. These are what the resolver resolves.
    pub fn addresses(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.records.iter().map(|r| r.ip).collect();
        for s in self.stacks.iter().skip(1) {
            v.push(s.call_site);
            if s.callee != 0 {
                v.push(s.callee);
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Encodes the dump in the current format version.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode(None)
    }

    /// [`to_bytes`](Self::to_bytes) with the records in `RECS`, every
    /// counter of every record, as versions before 12 wrote them (the
    /// version field still says [`VERSION`]): for tests that mark a dump
    /// as an older version.
    #[doc(hidden)]
    pub fn to_bytes_dense(&self) -> Vec<u8> {
        self.to_bytes_with_records(&self.records_in(RecordsForm::Dense))
    }

    /// This dump's records encoded in `form`.
    fn records_in(&self, form: RecordsForm) -> EncodedRecords {
        EncodedRecords::new_in(
            form,
            self.meta.counters.len(),
            self.records
                .iter()
                .map(|r| (r.ip, r.stack, r.thread, r.counters.as_slice())),
        )
    }

    /// [`to_bytes`](Self::to_bytes) in parts.
    pub fn to_parts(&self) -> EncodedParts<'static> {
        self.encode_parts(None)
    }

    /// Encodes the dump as [`to_bytes`](Self::to_bytes) does, with
    /// `records` as its records (`self.records` is not written): for a
    /// writer that holds its records in another form, so that they are
    /// never all [`Record`]s at once. `records` must have been encoded
    /// with this dump's number of counters.
    pub fn to_bytes_with_records(&self, records: &EncodedRecords) -> Vec<u8> {
        self.to_parts_with_records(records).concat()
    }

    /// [`to_bytes_with_records`](Self::to_bytes_with_records) in parts, the
    /// records' payload borrowed, not copied: for a writer of a large
    /// capture (CPython: 133 MB of records, which a copy would touch
    /// again and hold twice).
    pub fn to_parts_with_records<'a>(&self, records: &'a EncodedRecords) -> EncodedParts<'a> {
        debug_assert_eq!(records.counters, self.meta.counters.len());
        self.encode_parts(Some((records.form, &records.payload)))
    }

    /// [`to_bytes`](Self::to_bytes), with the records' section given as
    /// read from a file, in its form (`self.records` is not written).
    pub(crate) fn encode(&self, recs: Option<(RecordsForm, &[u8])>) -> Vec<u8> {
        self.encode_parts(recs).concat()
    }

    /// [`Dump::encode`] in parts, `recs` borrowed.
    pub(crate) fn encode_parts<'a>(
        &self,
        recs: Option<(RecordsForm, &'a [u8])>,
    ) -> EncodedParts<'a> {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        let meta = serde_json::to_vec(&self.meta).expect("Meta serializes");
        section(&mut out, b"META", &meta);

        let mut b = Vec::new();
        varint::put(&mut b, self.modules.len() as u64);
        for m in &self.modules {
            varint::put_bytes(&mut b, m.path.as_bytes());
            varint::put_bytes(&mut b, &m.build_id);
            varint::put(&mut b, m.start);
            varint::put(&mut b, m.end);
            varint::put(&mut b, m.file_offset);
        }
        section(&mut out, b"MODS", &b);

        b.clear();
        varint::put(&mut b, self.threads.len() as u64);
        for t in &self.threads {
            varint::put(&mut b, t.tid.into());
            varint::put_bytes(&mut b, t.name.as_bytes());
            varint::put(&mut b, t.core.into());
        }
        section(&mut out, b"THRD", &b);

        b.clear();
        varint::put(&mut b, self.stacks.len() as u64);
        for s in &self.stacks {
            varint::put(&mut b, s.parent.into());
            varint::put(&mut b, s.call_site);
            varint::put(&mut b, s.callee);
        }
        section(&mut out, b"STKS", &b);

        let (form, recs): (_, std::borrow::Cow<'a, [u8]>) = match recs {
            Some((form, recs)) => (form, recs.into()),
            None => (
                RecordsForm::Sparse,
                self.records_in(RecordsForm::Sparse).payload.into(),
            ),
        };
        out.extend_from_slice(form.name().as_bytes());
        out.extend_from_slice(&(recs.len() as u64).to_le_bytes());
        let head = std::mem::take(&mut out);

        if let Some(syms) = &self.symbols {
            b.clear();
            syms.encode(&mut b);
            section(&mut out, b"SYMS", &b);
        }

        if !self.sources.is_empty() {
            b.clear();
            varint::put(&mut b, self.sources.len() as u64);
            for src in &self.sources {
                varint::put_bytes(&mut b, src.path.as_bytes());
                varint::put_bytes(&mut b, src.text.as_bytes());
            }
            section(&mut out, b"SRCS", &b);
        }

        if let Some(data) = &self.data {
            b.clear();
            data.encode(&mut b);
            section(&mut out, b"DATA", &b);
            if !data.slots.is_empty() {
                b.clear();
                data.encode_slots(&mut b);
                section(&mut out, b"LOCL", &b);
            }
        }

        if let Some(objects) = &self.objects {
            b.clear();
            objects.encode(&mut b);
            section(&mut out, b"OBJS", &b);
            if let Some(by) = &objects.by_instruction {
                b.clear();
                by.encode(&mut b);
                section(&mut out, b"OBJI", &b);
            }
            if let Some(g) = &objects.globals {
                b.clear();
                g.encode(&mut b);
                section(&mut out, b"OBJG", &b);
            }
            if let Some(f) = &objects.frames {
                b.clear();
                f.encode(&mut b);
                section(&mut out, b"OBJF", &b);
                if !f.slots.is_empty() || f.slots_dropped.accesses() > 0 {
                    b.clear();
                    f.encode_slots(&mut b);
                    section(&mut out, b"OBJL", &b);
                }
            }
        }

        if let Some(t) = &self.timeline {
            b.clear();
            t.encode(&mut b);
            section(&mut out, b"TIME", &b);
        }

        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        crc.update(&recs);
        crc.update(&out);
        out.extend_from_slice(TRAILER);
        out.extend_from_slice(&crc.finalize().to_le_bytes());
        EncodedParts {
            head,
            recs,
            tail: out,
        }
    }

    /// Decodes a dump of any supported version, checking its checksum and
    /// the consistency of every section.
    pub fn from_bytes(bytes: &[u8]) -> Result<Dump, DumpError> {
        let mut records = Vec::new();
        let (mut dump, _) = Dump::decode(bytes, &mut |n, r| {
            if records.capacity() == 0 {
                records.reserve_exact(n);
            }
            records.push(Record {
                ip: r.ip,
                stack: r.stack,
                thread: r.thread,
                counters: r.counters.to_vec(),
            })
        })?;
        dump.records = records;
        Ok(dump)
    }

    /// Decodes a dump as [`from_bytes`](Self::from_bytes) does, checking
    /// the same, but hands each record to `each` instead of keeping it
    /// (the dump returned has no records), with the number of records.
    /// Also gives where the records' section's payload lies in `bytes`.
    pub(crate) fn decode(
        bytes: &[u8],
        each: &mut dyn FnMut(usize, RecordRef<'_>),
    ) -> Result<(Dump, RecordsAt), DumpError> {
        if bytes.len() < 16 || &bytes[..8] != MAGIC {
            if bytes.len() < 8 && MAGIC.starts_with(bytes) && !bytes.is_empty() {
                return Err(DumpError::Truncated("inside the header"));
            }
            return Err(DumpError::BadMagic);
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        if version == 0 || version > VERSION {
            return Err(DumpError::UnsupportedVersion(version));
        }
        if bytes.len() < 16 + 12 || &bytes[bytes.len() - 12..bytes.len() - 4] != TRAILER {
            return Err(DumpError::Truncated("the checksum trailer is missing"));
        }
        let body = &bytes[..bytes.len() - 12];
        let stored = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(DumpError::Checksum { stored, computed });
        }
        let mut sections: HashMap<[u8; 4], &[u8]> = HashMap::new();
        let mut recs_at = RecordsAt {
            form: RecordsForm::Dense,
            range: 0..0,
        };
        let mut pos = 16;
        while pos < body.len() {
            if body.len() - pos < 12 {
                return Err(DumpError::Truncated("inside a section header"));
            }
            let tag: [u8; 4] = body[pos..pos + 4].try_into().unwrap();
            let len = u64::from_le_bytes(body[pos + 4..pos + 12].try_into().unwrap());
            pos += 12;
            if ((body.len() - pos) as u64) < len {
                return Err(DumpError::Truncated("inside a section"));
            }
            let len = len as usize;
            // `RECZ` is version 12's (an unknown section before).
            let form = match &tag {
                b"RECS" => Some(RecordsForm::Dense),
                b"RECZ" if version >= 12 => Some(RecordsForm::Sparse),
                _ => None,
            };
            if let Some(form) = form {
                if recs_at.range.end != 0 {
                    return Err(DumpError::Malformed {
                        section: "RECS",
                        what: "more than one section of records (RECS, RECZ)".into(),
                    });
                }
                recs_at = RecordsAt {
                    form,
                    range: pos..pos + len,
                };
            }
            sections.insert(tag, &body[pos..pos + len]);
            pos += len;
        }
        let get = |tag: &'static str| -> Result<&[u8], DumpError> {
            let t: [u8; 4] = tag.as_bytes().try_into().unwrap();
            sections
                .get(&t)
                .copied()
                .ok_or(DumpError::MissingSection(tag))
        };
        let meta: Meta =
            serde_json::from_slice(get("META")?).map_err(|e| DumpError::Malformed {
                section: "META",
                what: e.to_string(),
            })?;

        let mut r = varint::Reader::new(get("MODS")?, "MODS");
        let n = r.count(5)?;
        let mut modules = Vec::with_capacity(n);
        for _ in 0..n {
            modules.push(Module {
                path: r.string()?,
                build_id: r.bytes()?.to_vec(),
                start: r.get()?,
                end: r.get()?,
                file_offset: r.get()?,
            });
        }
        r.finish()?;

        let mut r = varint::Reader::new(get("THRD")?, "THRD");
        let n = r.count(3)?;
        let mut threads = Vec::with_capacity(n);
        for _ in 0..n {
            threads.push(Thread {
                tid: r.get_u32()?,
                name: r.string()?,
                core: r.get_u32()?,
            });
        }
        r.finish()?;

        let mut r = varint::Reader::new(get("STKS")?, "STKS");
        let n = r.count(3)?;
        let mut stacks = Vec::with_capacity(n);
        for i in 0..n {
            let node = StackNode {
                parent: r.get_u32()?,
                call_site: r.get()?,
                callee: r.get()?,
            };
            if i > 0 && node.parent as usize >= i {
                return Err(DumpError::Malformed {
                    section: "STKS",
                    what: format!(
                        "stack {i} has parent {} which does not precede it",
                        node.parent
                    ),
                });
            }
            stacks.push(node);
        }
        if stacks.is_empty() {
            return Err(DumpError::Malformed {
                section: "STKS",
                what: "the root stack is missing".into(),
            });
        }
        r.finish()?;

        let form = recs_at.form;
        let name = form.name();
        let mut r = varint::Reader::new(get(name)?, name);
        let ncounters = r.count(0)?;
        if ncounters != meta.counters.len() {
            return Err(DumpError::Malformed {
                section: name,
                what: format!(
                    "{ncounters} counters per record but META names {}",
                    meta.counters.len()
                ),
            });
        }
        // The fewest bytes a record takes: address, stack, thread, and
        // every counter (`RECS`) or a mask per 64 of them (`RECZ`).
        let words = ncounters.div_ceil(64);
        let n = r.count(match form {
            RecordsForm::Dense => 3 + ncounters,
            RecordsForm::Sparse => 3 + words,
        })?;
        let mut counters = vec![0u64; ncounters];
        let mut prev_ip = 0u64;
        for i in 0..n {
            let ip = prev_ip.wrapping_add(varint::unzigzag(r.get()?) as u64);
            prev_ip = ip;
            let stack = r.get_u32()?;
            let thread = r.get_u32()?;
            if stack as usize >= stacks.len() || thread as usize >= threads.len() {
                return Err(DumpError::Malformed {
                    section: name,
                    what: format!(
                        "record {i} refers to stack {stack} of {} or thread {thread} of {}",
                        stacks.len(),
                        threads.len()
                    ),
                });
            }
            match form {
                RecordsForm::Dense => {
                    for c in counters.iter_mut() {
                        *c = r.get()?;
                    }
                }
                RecordsForm::Sparse => {
                    counters.fill(0);
                    for (w, word) in counters.chunks_mut(64).enumerate() {
                        let mut mask = r.get()?;
                        if word.len() < 64 && mask >> word.len() != 0 {
                            return Err(DumpError::Malformed {
                                section: name,
                                what: format!(
                                    "record {i} names a counter past the {ncounters} of META \
                                     (mask word {w}: {mask:#x})"
                                ),
                            });
                        }
                        while mask != 0 {
                            word[mask.trailing_zeros() as usize] = r.get()?;
                            mask &= mask - 1;
                        }
                    }
                }
            }
            each(
                n,
                RecordRef {
                    ip,
                    stack,
                    thread,
                    counters: &counters,
                },
            );
        }
        r.finish()?;
        let symbols = match get("SYMS") {
            Ok(b) if version >= 2 => Some(Symbols::decode(b, modules.len())?),
            _ => None,
        };
        let mut sources = Vec::new();
        if let (Ok(b), true) = (get("SRCS"), version >= 3) {
            let mut r = varint::Reader::new(b, "SRCS");
            let n = r.count(2)?;
            for _ in 0..n {
                sources.push(SourceText {
                    path: r.string()?,
                    text: r.string()?,
                });
            }
            r.finish()?;
        }
        let mut data = match get("DATA") {
            Ok(b) if version >= 4 => Some(DataTypes::decode(b, modules.len())?),
            _ => None,
        };
        if let (Ok(b), true) = (get("LOCL"), version >= 11) {
            match data.as_mut() {
                Some(d) => d.decode_slots(b)?,
                None => {
                    return Err(DumpError::Malformed {
                        section: "LOCL",
                        what: "a LOCL section without DATA".into(),
                    })
                }
            }
        }
        let mut objects = match get("OBJS") {
            Ok(b) if version >= 5 => {
                Some(Objects::decode(b, stacks.len(), threads.len(), version)?)
            }
            _ => None,
        };
        // The sections that extend `OBJS`, each of its own version on; a
        // dump without `OBJS` may have none of them.
        let part = |tag: &'static str, since: u32| -> Result<Option<&[u8]>, DumpError> {
            match get(tag) {
                Ok(b) if version >= since && objects.is_some() => Ok(Some(b)),
                Ok(_) if version >= since => Err(DumpError::Malformed {
                    section: tag,
                    what: format!("an {tag} section without OBJS"),
                }),
                _ => Ok(None),
            }
        };
        let (by_instruction, globals, frames, slots) = (
            part("OBJI", 7)?,
            part("OBJG", 10)?,
            part("OBJF", 10)?,
            part("OBJL", 11)?,
        );
        if let Some(o) = objects.as_mut() {
            if let Some(b) = by_instruction {
                o.by_instruction = Some(SiteInstructions::decode(
                    b,
                    o.sites.len(),
                    o.regions.len(),
                    version,
                )?);
            }
            if let Some(b) = globals {
                o.globals = Some(Globals::decode(b, o.regions.len(), version)?);
            }
            if let Some(b) = frames {
                o.frames = Some(StackFrames::decode(b, stacks.len(), version)?);
            }
            if let Some(b) = slots {
                match o.frames.as_mut() {
                    Some(f) => f.decode_slots(b, version)?,
                    None => {
                        return Err(DumpError::Malformed {
                            section: "OBJL",
                            what: "an OBJL section without OBJF".into(),
                        })
                    }
                }
            }
        }
        let timeline = match get("TIME") {
            Ok(b) if version >= 6 => Some(Timeline::decode(b, stacks.len(), threads.len())?),
            _ => None,
        };
        let dump = Dump {
            meta,
            modules,
            threads,
            stacks,
            records: Vec::new(),
            symbols,
            sources,
            data,
            objects,
            timeline,
        };
        Ok((dump, recs_at))
    }
}

fn section(out: &mut Vec<u8>, tag: &[u8; 4], payload: &[u8]) {
    out.extend_from_slice(tag);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
}
