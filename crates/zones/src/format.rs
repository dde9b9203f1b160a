//! The zones file format, version 1 ("cczones"): encoding and decoding of
//! whole files and of the 16-byte events. Pure: bytes in, values out; no
//! OS calls (the recorder in `record.rs` does those), except that
//! [`index`] reads a file section by section through `Read + Seek` and
//! [`read_chunk`] reads one chunk back (the streaming reader, `stream.rs`);
//! [`decode`] and [`index`] share one section walker, so a file gives the
//! same tables, chunks and error either way.
//!
//! A file is the 8-byte magic `CCZONES\0`, a little-endian `u32` version
//! (2; version 1 files, whose chunks are all plain, are still read)
//! and a `u32` of flags (0), then sections. Each section is a `u32` tag, a
//! `u64` payload length, the payload, and the CRC-32 of the payload. The
//! recorder writes event chunks first (a streaming writer writes them as
//! they fill up) and the tables (labels, threads, modules, info) last,
//! closed by an `END` section; a reader accepts sections in any order and
//! reports a file without `END` as truncated, keeping what it read.
//! `docs/zones.md` is the specification.

use std::fmt;

/// First 8 bytes of every zones file.
pub const MAGIC: &[u8; 8] = b"CCZONES\0";
/// The version this code writes. Version 1 files (plain chunks only) are
/// still read.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest version this code reads.
pub const OLDEST_VERSION: u32 = 1;

/// Section tags.
pub mod section {
    /// Recording facts: clock calibration, process id, dropped events.
    pub const INFO: u32 = 1;
    /// Static labels: id, name, file, line.
    pub const LABELS: u32 = 2;
    /// Threads: recorder index, OS thread id, name.
    pub const THREADS: u32 = 3;
    /// Executable mappings of the process (for symbolizing addresses).
    pub const MODULES: u32 = 4;
    /// A chunk of events of one thread.
    pub const CHUNK: u32 = 5;
    /// The last section: counts to check the file against.
    pub const END: u32 = 6;
    /// A chunk of events of one thread, delta-encoded (version 2).
    pub const CHUNK_PACKED: u32 = 7;
}

/// Event kinds, stored in bits 60..64 of an event's first word.
pub mod kind {
    /// Begin of a labelled zone; payload: label id.
    pub const BEGIN: u64 = 1;
    /// End of a labelled zone; payload: label id.
    pub const END: u64 = 2;
    /// Entry into a function (`-finstrument-functions`); payload: address.
    pub const FUNC_ENTER: u64 = 3;
    /// Exit from a function; payload: address.
    pub const FUNC_EXIT: u64 = 4;
    /// Frame boundary; payload: frame number.
    pub const FRAME: u64 = 5;
    /// The innermost open zone processes this many bytes; payload: bytes.
    pub const BYTES: u64 = 6;
}

/// Bits of an event word below the kind.
pub const PAYLOAD_MASK: u64 = (1 << 60) - 1;

/// Packs an event's first word. A packed word is never 0 (kinds start at
/// 1): the recorder relies on this to find the filled part of a chunk.
#[inline(always)]
pub const fn pack(kind: u64, payload: u64) -> u64 {
    (kind << 60) | (payload & PAYLOAD_MASK)
}

/// One recorded event: what happened and the `rdtsc` value when it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// One of [`kind`].
    pub kind: u64,
    /// Label id, function address, frame number or byte count.
    pub payload: u64,
    /// Time stamp counter.
    pub tsc: u64,
}

impl Event {
    /// Decodes the two words the recorder stores.
    pub fn from_words(word: u64, tsc: u64) -> Event {
        Event {
            kind: word >> 60,
            payload: word & PAYLOAD_MASK,
            tsc,
        }
    }
}

/// Where a zone comes from: a static label or a function address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ZoneKey {
    /// A label id (`zone!`, `COLDCACHE_ZONE`).
    Label(u32),
    /// A function's runtime address (`-finstrument-functions`).
    Function(u64),
}

/// A static label as stored in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelInfo {
    /// Id used by events (never 0).
    pub id: u32,
    /// Zone name.
    pub name: String,
    /// Source file of the call site.
    pub file: String,
    /// Source line of the call site.
    pub line: u32,
}

/// A recorded thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    /// The recorder's index (the id stored in chunks).
    pub index: u32,
    /// OS thread id.
    pub tid: u32,
    /// Thread name ("" if unknown).
    pub name: String,
}

/// An executable mapping of the recorded process, as in `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset of `start`.
    pub file_offset: u64,
    /// File path.
    pub path: String,
}

/// Recording facts.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordingInfo {
    /// Time stamp counter ticks per second.
    pub tsc_hz: f64,
    /// Counter value when recording started.
    pub start_tsc: u64,
    /// Process id.
    pub pid: u32,
    /// Events dropped because the arena was full.
    pub dropped_events: u64,
    /// Arena size in bytes.
    pub arena_bytes: u64,
    /// Executable path.
    pub exe: String,
}

/// A chunk of one thread's events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Recorder thread index.
    pub thread: u32,
    /// Sequence number of this chunk among its thread's chunks (from 0).
    pub seq: u32,
    /// Events in recording order.
    pub events: Vec<Event>,
}

/// A decoded file. Whatever could be read is here even when decoding
/// stopped on an error (see [`Decoded::error`]).
#[derive(Clone, Debug, Default)]
pub struct Decoded {
    /// Recording facts, if the section was present.
    pub info: Option<RecordingInfo>,
    /// Labels.
    pub labels: Vec<LabelInfo>,
    /// Threads.
    pub threads: Vec<ThreadInfo>,
    /// Executable mappings.
    pub modules: Vec<ModuleInfo>,
    /// Event chunks in file order.
    pub chunks: Vec<Chunk>,
    /// Whether the `END` section was read.
    pub complete: bool,
    /// The error that stopped decoding, if any.
    pub error: Option<FormatError>,
}

/// What is wrong with a zones file, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// Not a zones file at all.
    #[error("not a coldcache zones file (the first 8 bytes are not CCZONES\\0)")]
    BadMagic,
    /// A version this code does not read.
    #[error(
        "zones format version {0} is not supported (this build reads version {FORMAT_VERSION})"
    )]
    UnsupportedVersion(u32),
    /// The file ends inside a section.
    #[error("truncated at byte {offset}: {what}")]
    Truncated {
        /// Byte offset where more data was needed.
        offset: u64,
        /// What was being read.
        what: &'static str,
    },
    /// A section's checksum does not match.
    #[error("section at byte {offset} (tag {tag}): checksum mismatch (stored {stored:08x}, computed {computed:08x})")]
    Checksum {
        /// Offset of the section.
        offset: u64,
        /// Its tag.
        tag: u32,
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A section's contents are inconsistent.
    #[error("section at byte {offset} (tag {tag}): {what}")]
    BadSection {
        /// Offset of the section.
        offset: u64,
        /// Its tag.
        tag: u32,
        /// What is wrong.
        what: String,
    },
}

/// Appends a whole section (tag, length, payload, CRC) to `out`.
pub fn write_section(out: &mut Vec<u8>, tag: u32, payload: &[u8]) {
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
}

/// The file header: magic, version, flags.
pub fn header() -> Vec<u8> {
    let mut h = Vec::with_capacity(16);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Payload of an `INFO` section.
pub fn info_payload(info: &RecordingInfo) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&info.tsc_hz.to_le_bytes());
    p.extend_from_slice(&info.start_tsc.to_le_bytes());
    p.extend_from_slice(&info.pid.to_le_bytes());
    p.extend_from_slice(&info.dropped_events.to_le_bytes());
    p.extend_from_slice(&info.arena_bytes.to_le_bytes());
    put_str(&mut p, &info.exe);
    p
}

/// Payload of a `LABELS` section.
pub fn labels_payload(labels: &[LabelInfo]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&(labels.len() as u32).to_le_bytes());
    for l in labels {
        p.extend_from_slice(&l.id.to_le_bytes());
        p.extend_from_slice(&l.line.to_le_bytes());
        put_str(&mut p, &l.name);
        put_str(&mut p, &l.file);
    }
    p
}

/// Payload of a `THREADS` section.
pub fn threads_payload(threads: &[ThreadInfo]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&(threads.len() as u32).to_le_bytes());
    for t in threads {
        p.extend_from_slice(&t.index.to_le_bytes());
        p.extend_from_slice(&t.tid.to_le_bytes());
        put_str(&mut p, &t.name);
    }
    p
}

/// Payload of a `MODULES` section.
pub fn modules_payload(modules: &[ModuleInfo]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&(modules.len() as u32).to_le_bytes());
    for m in modules {
        p.extend_from_slice(&m.start.to_le_bytes());
        p.extend_from_slice(&m.end.to_le_bytes());
        p.extend_from_slice(&m.file_offset.to_le_bytes());
        put_str(&mut p, &m.path);
    }
    p
}

/// Payload of a `CHUNK` section from raw event words (pairs of tag and
/// time stamp, as the recorder stores them).
pub fn chunk_payload(thread: u32, seq: u32, words: &[u64]) -> Vec<u8> {
    let n = words.len() / 2;
    let mut p = Vec::with_capacity(12 + n * 16);
    p.extend_from_slice(&thread.to_le_bytes());
    p.extend_from_slice(&seq.to_le_bytes());
    p.extend_from_slice(&(n as u32).to_le_bytes());
    for w in &words[..n * 2] {
        p.extend_from_slice(&w.to_le_bytes());
    }
    p
}

use coldcache_fsio::varint::{self, put as put_varint, unzigzag, zigzag};

/// Appends a `CHUNK_PACKED` payload (version 2) for raw event words:
/// thread `u32`, seq `u32`, event count `u32`, then per event two LEB128
/// varints: `zigzag(payload - previous payload) << 3 | kind` and
/// `zigzag(tsc - previous tsc)` (previous values start at 0). An enter and
/// exit of the same function costs 1 byte for the second tag, and a time
/// stamp a byte or two: about 4 bytes per event instead of 16.
pub fn packed_chunk_payload(thread: u32, seq: u32, words: &[u64], out: &mut Vec<u8>) {
    let n = words.len() / 2;
    // At most 10 + 10 bytes an event: no reallocation inside the loop.
    out.reserve(12 + n * 20);
    out.extend_from_slice(&thread.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    let (mut prev_payload, mut prev_tsc) = (0u64, 0u64);
    for e in words[..n * 2].chunks_exact(2) {
        let (word, tsc) = (e[0], e[1]);
        let kind = word >> 60;
        let payload = word & PAYLOAD_MASK;
        // Payloads are 60-bit: their difference fits in 61 bits zigzagged,
        // leaving 3 bits for the kind (1..=6).
        let d = zigzag(payload as i64 - prev_payload as i64);
        put_varint(out, (d << 3) | kind);
        put_varint(out, zigzag(tsc.wrapping_sub(prev_tsc) as i64));
        prev_payload = payload;
        prev_tsc = tsc;
    }
}

/// Payload of the `END` section.
pub fn end_payload(chunks: u32, events: u64) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&chunks.to_le_bytes());
    p.extend_from_slice(&events.to_le_bytes());
    p
}

/// Encodes a whole file (current version, packed chunks) from decoded
/// parts (used by tests and tools that build recordings; the recorder
/// writes the same sections itself).
pub fn encode(d: &Decoded) -> Vec<u8> {
    let mut out = header();
    let mut events = 0u64;
    for c in &d.chunks {
        let mut words = Vec::with_capacity(c.events.len() * 2);
        for e in &c.events {
            words.push(pack(e.kind, e.payload));
            words.push(e.tsc);
        }
        events += c.events.len() as u64;
        let mut p = Vec::new();
        packed_chunk_payload(c.thread, c.seq, &words, &mut p);
        write_section(&mut out, section::CHUNK_PACKED, &p);
    }
    write_section(&mut out, section::LABELS, &labels_payload(&d.labels));
    write_section(&mut out, section::THREADS, &threads_payload(&d.threads));
    write_section(&mut out, section::MODULES, &modules_payload(&d.modules));
    if let Some(info) = &d.info {
        write_section(&mut out, section::INFO, &info_payload(info));
    }
    write_section(
        &mut out,
        section::END,
        &end_payload(d.chunks.len() as u32, events),
    );
    out
}

/// A cursor over a section payload; every read names what it reads.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.buf.len() - self.pos < n {
            return Err(format!(
                "payload ends at byte {} of {} while reading {n} more bytes",
                self.pos,
                self.buf.len()
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        Ok(String::from_utf8_lossy(b).into_owned())
    }
    /// A LEB128 number (`coldcache_fsio::varint`: more than 64 bits is an
    /// error, never silently cut).
    fn varint(&mut self) -> Result<u64, String> {
        let at = self.pos;
        varint::get(self.buf, &mut self.pos).map_err(|e| format!("varint at byte {at}: {e}"))
    }
    /// A count of items each at least `min` bytes long, checked against
    /// what is left so that a corrupt count cannot make us allocate.
    fn count(&mut self, min: usize) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.buf.len() - self.pos {
            return Err(format!(
                "count {n} does not fit in the {} bytes left",
                self.buf.len() - self.pos
            ));
        }
        Ok(n)
    }
}

/// Decodes a section's payload into `d` (tables, END) or, for a chunk,
/// its events into `events` (replaced), returning its thread and sequence
/// number. `chunks_read` is the count the END section is checked against.
fn decode_payload(
    d: &mut Decoded,
    tag: u32,
    payload: &[u8],
    chunks_read: usize,
    events: &mut Vec<Event>,
) -> Result<Option<(u32, u32)>, String> {
    let mut chunk = None;
    let mut c = Cursor {
        buf: payload,
        pos: 0,
    };
    match tag {
        section::INFO => {
            d.info = Some(RecordingInfo {
                tsc_hz: c.f64()?,
                start_tsc: c.u64()?,
                pid: c.u32()?,
                dropped_events: c.u64()?,
                arena_bytes: c.u64()?,
                exe: c.string()?,
            });
        }
        section::LABELS => {
            for _ in 0..c.count(16)? {
                let id = c.u32()?;
                let line = c.u32()?;
                let name = c.string()?;
                let file = c.string()?;
                d.labels.push(LabelInfo {
                    id,
                    name,
                    file,
                    line,
                });
            }
        }
        section::THREADS => {
            for _ in 0..c.count(12)? {
                let index = c.u32()?;
                let tid = c.u32()?;
                let name = c.string()?;
                d.threads.push(ThreadInfo { index, tid, name });
            }
        }
        section::MODULES => {
            for _ in 0..c.count(28)? {
                let start = c.u64()?;
                let end = c.u64()?;
                let file_offset = c.u64()?;
                let path = c.string()?;
                d.modules.push(ModuleInfo {
                    start,
                    end,
                    file_offset,
                    path,
                });
            }
        }
        section::CHUNK => {
            let thread = c.u32()?;
            let seq = c.u32()?;
            let n = c.count(16)?;
            events.clear();
            events.reserve(n);
            for _ in 0..n {
                let w = c.u64()?;
                let tsc = c.u64()?;
                let e = Event::from_words(w, tsc);
                if e.kind == 0 || e.kind > kind::BYTES {
                    return Err(format!(
                        "event {} has unknown kind {}",
                        events.len(),
                        e.kind
                    ));
                }
                events.push(e);
            }
            chunk = Some((thread, seq));
        }
        section::CHUNK_PACKED => {
            let thread = c.u32()?;
            let seq = c.u32()?;
            let n = c.count(2)?;
            events.clear();
            events.reserve(n);
            let (mut payload, mut tsc) = (0u64, 0u64);
            for i in 0..n {
                let t = c.varint()?;
                let k = t & 7;
                if k == 0 || k > kind::BYTES {
                    return Err(format!("event {i} has unknown kind {k}"));
                }
                payload = (payload as i64).wrapping_add(unzigzag(t >> 3)) as u64;
                if payload > PAYLOAD_MASK {
                    return Err(format!("event {i}: payload out of range"));
                }
                tsc = tsc.wrapping_add(unzigzag(c.varint()?) as u64);
                events.push(Event {
                    kind: k,
                    payload,
                    tsc,
                });
            }
            chunk = Some((thread, seq));
        }
        section::END => {
            let chunks = c.u32()?;
            let _events = c.u64()?;
            if chunks as usize != chunks_read {
                return Err(format!(
                    "END says {chunks} chunks but {chunks_read} were read"
                ));
            }
            d.complete = true;
        }
        _ => {} // unknown sections are skipped (forward compatible)
    }
    if c.pos != payload.len() {
        return Err(format!(
            "{} bytes left over after the section's contents",
            payload.len() - c.pos
        ));
    }
    Ok(chunk)
}

impl Decoded {
    /// Keeps one entry per label id and per thread index, the last one the
    /// file gave, and each module once. A streaming writer appends table
    /// sections as the recording grows (so a file cut short still names
    /// its zones) and the trailer repeats them whole.
    fn keep_last_entries(&mut self) {
        fn last_by<T, K: Eq + std::hash::Hash>(v: &mut Vec<T>, key: impl Fn(&T) -> K) {
            let mut seen = std::collections::HashSet::new();
            let mut kept: Vec<T> = std::mem::take(v)
                .into_iter()
                .rev()
                .filter(|x| seen.insert(key(x)))
                .collect();
            kept.reverse();
            *v = kept;
        }
        last_by(&mut self.labels, |l| l.id);
        last_by(&mut self.threads, |t| t.index);
        let mut seen = std::collections::HashSet::new();
        self.modules
            .retain(|m| seen.insert((m.start, m.end, m.file_offset, m.path.clone())));
    }
}

/// Decodes a zones file. Never panics; stops at the first damaged section
/// and keeps everything before it.
pub fn decode(bytes: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    let mut src = SliceSource(bytes);
    // Reading a slice cannot fail.
    let _ = walk(&mut src, &mut d, None);
    d.keep_last_entries();
    d
}

/// Where a chunk section lies in a file and what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRef {
    /// Recorder thread index.
    pub thread: u32,
    /// Sequence number among the thread's chunks.
    pub seq: u32,
    /// Section tag ([`section::CHUNK`] or [`section::CHUNK_PACKED`]).
    pub tag: u32,
    /// Offset of the payload in the file.
    pub offset: u64,
    /// Payload length.
    pub len: u64,
}

/// A file's tables and the place of each chunk: what [`decode`] gives,
/// without the events (read again chunk by chunk with [`read_chunk`]).
#[derive(Clone, Debug, Default)]
pub struct Index {
    /// Tables, info, completeness and error as [`decode`] has them; its
    /// `chunks` is empty.
    pub tables: Decoded,
    /// The chunks [`decode`] would keep, in file order.
    pub chunks: Vec<ChunkRef>,
}

/// Indexes a zones file of `size` bytes section by section: every
/// section is read and checked as [`decode`] checks it (checksum, contents;
/// events decoded and dropped), so the same file gives the same tables,
/// chunks and error. Memory: one section at a time and a [`ChunkRef`] per
/// chunk. Fails only on an I/O error.
pub fn index<R: std::io::Read + std::io::Seek>(r: &mut R, size: u64) -> std::io::Result<Index> {
    let mut ix = Index::default();
    let mut src = ReadSource {
        r,
        size,
        pos: None,
        buf: Vec::new(),
    };
    walk(&mut src, &mut ix.tables, Some(&mut ix.chunks))?;
    ix.tables.keep_last_entries();
    Ok(ix)
}

/// Reads and decodes the events of an indexed chunk (`payload` is a
/// buffer reused between calls). The file must be the one indexed.
pub fn read_chunk(
    file: &std::fs::File,
    c: &ChunkRef,
    payload: &mut Vec<u8>,
    events: &mut Vec<Event>,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    payload.resize(c.len as usize, 0);
    file.read_exact_at(payload, c.offset)?;
    decode_payload(&mut Decoded::default(), c.tag, payload, 0, events).map_err(|what| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "the chunk at byte {} changed since it was read: {what}",
                c.offset
            ),
        )
    })?;
    Ok(())
}

/// Bytes of a file, in memory or read through.
trait Source {
    fn size(&self) -> u64;
    /// `len` bytes at `off` (within `size`).
    fn get(&mut self, off: u64, len: usize) -> std::io::Result<&[u8]>;
}

struct SliceSource<'a>(&'a [u8]);

impl Source for SliceSource<'_> {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn get(&mut self, off: u64, len: usize) -> std::io::Result<&[u8]> {
        Ok(&self.0[off as usize..off as usize + len])
    }
}

struct ReadSource<'a, R> {
    r: &'a mut R,
    size: u64,
    /// Where the reader is (None: unknown, seek first).
    pos: Option<u64>,
    buf: Vec<u8>,
}

impl<R: std::io::Read + std::io::Seek> Source for ReadSource<'_, R> {
    fn size(&self) -> u64 {
        self.size
    }
    fn get(&mut self, off: u64, len: usize) -> std::io::Result<&[u8]> {
        if self.pos != Some(off) {
            self.r.seek(std::io::SeekFrom::Start(off))?;
        }
        self.pos = None;
        self.buf.resize(len, 0);
        self.r.read_exact(&mut self.buf)?;
        self.pos = Some(off + len as u64);
        Ok(&self.buf)
    }
}

/// Reads the sections of `src` into `d` (the rules of [`decode`]). With
/// `refs`, chunks are checked and recorded there instead of kept.
fn walk<S: Source>(
    src: &mut S,
    d: &mut Decoded,
    mut refs: Option<&mut Vec<ChunkRef>>,
) -> std::io::Result<()> {
    let size = src.size();
    let head = src.get(0, size.min(16) as usize)?;
    if head.len() < 8 || &head[..8] != MAGIC {
        d.error = Some(if head.len() < 8 && MAGIC.starts_with(head) {
            FormatError::Truncated {
                offset: head.len() as u64,
                what: "file header",
            }
        } else {
            FormatError::BadMagic
        });
        return Ok(());
    }
    if head.len() < 16 {
        d.error = Some(FormatError::Truncated {
            offset: head.len() as u64,
            what: "file header",
        });
        return Ok(());
    }
    let version = u32::from_le_bytes(head[8..12].try_into().unwrap());
    if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
        d.error = Some(FormatError::UnsupportedVersion(version));
        return Ok(());
    }
    let mut events = Vec::new();
    let mut chunks_read = 0usize;
    let mut pos = 16u64;
    while pos < size {
        let offset = pos;
        if size - pos < 12 {
            d.error = Some(FormatError::Truncated {
                offset,
                what: "section header",
            });
            return Ok(());
        }
        let h = src.get(pos, 12)?;
        let tag = u32::from_le_bytes(h[..4].try_into().unwrap());
        let len = u64::from_le_bytes(h[4..12].try_into().unwrap());
        let body = pos + 12;
        let left = size - body;
        if len > left || left - len < 4 {
            d.error = Some(FormatError::Truncated {
                offset,
                what: "section payload",
            });
            return Ok(());
        }
        let both = src.get(body, len as usize + 4)?;
        let (payload, crc) = both.split_at(len as usize);
        let stored = u32::from_le_bytes(crc.try_into().unwrap());
        let computed = crc32fast::hash(payload);
        if stored != computed {
            d.error = Some(FormatError::Checksum {
                offset,
                tag,
                stored,
                computed,
            });
            return Ok(());
        }
        match decode_payload(d, tag, payload, chunks_read, &mut events) {
            Err(what) => {
                d.error = Some(FormatError::BadSection { offset, tag, what });
                return Ok(());
            }
            Ok(Some((thread, seq))) => {
                chunks_read += 1;
                match refs.as_deref_mut() {
                    Some(r) => r.push(ChunkRef {
                        thread,
                        seq,
                        tag,
                        offset: body,
                        len,
                    }),
                    None => d.chunks.push(Chunk {
                        thread,
                        seq,
                        events: std::mem::take(&mut events),
                    }),
                }
            }
            Ok(None) => {}
        }
        pos = body + len + 4;
        if d.complete {
            break;
        }
    }
    Ok(())
}

/// The tables of a file and its event counts, without decoding events.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Tables and info (its `chunks` is empty).
    pub tables: Decoded,
    /// Chunk sections seen.
    pub chunks: u64,
    /// Events in them.
    pub events: u64,
}

/// Reads a file's tables and counts its events, seeking past event
/// payloads (a recording of hundreds of megabytes is summarized without
/// reading it all). Chunk checksums are not verified here.
pub fn summarize<R: std::io::Read + std::io::Seek>(r: &mut R) -> Result<Summary, FormatError> {
    let mut s = summarize_sections(r)?;
    s.tables.keep_last_entries();
    Ok(s)
}

fn summarize_sections<R: std::io::Read + std::io::Seek>(r: &mut R) -> Result<Summary, FormatError> {
    use std::io::SeekFrom;
    let mut s = Summary::default();
    let mut head = [0u8; 16];
    let got = read_full(r, &mut head);
    if got < 8 || &head[..8] != MAGIC {
        return Err(if got < 8 && MAGIC.starts_with(&head[..got]) {
            FormatError::Truncated {
                offset: got as u64,
                what: "file header",
            }
        } else {
            FormatError::BadMagic
        });
    }
    if got < 16 {
        return Err(FormatError::Truncated {
            offset: got as u64,
            what: "file header",
        });
    }
    let version = u32::from_le_bytes(head[8..12].try_into().unwrap());
    if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(FormatError::UnsupportedVersion(version));
    }
    let mut offset = 16u64;
    loop {
        let mut h = [0u8; 12];
        match read_full(r, &mut h) {
            0 => break,
            12 => {}
            _ => {
                return Err(FormatError::Truncated {
                    offset,
                    what: "section header",
                })
            }
        }
        let tag = u32::from_le_bytes(h[..4].try_into().unwrap());
        let len = u64::from_le_bytes(h[4..].try_into().unwrap());
        if tag == section::CHUNK || tag == section::CHUNK_PACKED {
            let mut c = [0u8; 12];
            if len < 12 || read_full(r, &mut c) != 12 {
                return Err(FormatError::Truncated {
                    offset,
                    what: "section payload",
                });
            }
            s.chunks += 1;
            s.events += u32::from_le_bytes(c[8..].try_into().unwrap()) as u64;
            let end = offset.saturating_add(16).saturating_add(len);
            let pos = r
                .seek(SeekFrom::Start(end))
                .map_err(|_| FormatError::Truncated {
                    offset,
                    what: "section payload",
                })?;
            if pos != end {
                return Err(FormatError::Truncated {
                    offset,
                    what: "section payload",
                });
            }
        } else {
            if len > 1 << 30 {
                return Err(FormatError::BadSection {
                    offset,
                    tag,
                    what: format!("table of {len} bytes"),
                });
            }
            // Read as the bytes come, not reserved from the length: a
            // damaged length must not allocate what the file does not hold
            // (a 755-byte file asked for 170 MB).
            let mut p = Vec::new();
            let want = len + 4;
            let got = std::io::Read::read_to_end(&mut std::io::Read::take(&mut *r, want), &mut p);
            if got.is_err() || p.len() as u64 != want {
                return Err(FormatError::Truncated {
                    offset,
                    what: "section payload",
                });
            }
            let (payload, crc) = p.split_at(len as usize);
            let stored = u32::from_le_bytes(crc.try_into().unwrap());
            let computed = crc32fast::hash(payload);
            if stored != computed {
                return Err(FormatError::Checksum {
                    offset,
                    tag,
                    stored,
                    computed,
                });
            }
            if tag == section::END {
                s.tables.complete = true;
                break;
            }
            decode_payload(&mut s.tables, tag, payload, 0, &mut Vec::new())
                .map_err(|what| FormatError::BadSection { offset, tag, what })?;
        }
        offset = offset.saturating_add(16).saturating_add(len);
    }
    Ok(s)
}

fn read_full<R: std::io::Read>(r: &mut R, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    n
}

impl fmt::Display for ZoneKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneKey::Label(id) => write!(f, "label#{id}"),
            ZoneKey::Function(a) => write!(f, "0x{a:x}"),
        }
    }
}
