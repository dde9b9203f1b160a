//! [`TraceWriter`], the cctrace writer (format in `docs/trace-format.md`;
//! the reader is `coldcache-trace`'s).
//!
//! Layout: a 16-byte header (magic, version, flags, metadata length), the
//! metadata and a CRC32 of both, chunks of `payload length, record count, CRC32` + payload, and
//! an end marker (an all-zero chunk header followed by the total record
//! count). Inside a payload each record is a tag byte (kind, which fields
//! follow, how the ip is given) and LEB128 varints: the zigzag delta of the
//! address against the previous address of the same class (instruction or
//! data) in the same thread, the size when it changed, the ip delta when it
//! is not implied. Delta state is reset at every chunk start, so each chunk
//! decodes on its own. Version 2 adds a control item when a thread's stack
//! changes, a bit on instruction records whose accesses were not modelled,
//! and attachments (the capture's dump skeleton) in chunks of their own.

use std::collections::HashMap;
use std::io::Write;

use crate::error::TraceError;
use crate::wire::*;
use crate::{Record, RecordKind, MAX_ACCESS_SIZE};

/// The file header of format `version` with `metadata` (checked by the
/// caller): magic, version, flags, metadata length, metadata, CRC32.
pub(crate) fn file_header(metadata: &[u8], version: u16) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER_LEN + metadata.len() + 4);
    header.extend_from_slice(&MAGIC);
    header.extend_from_slice(&version.to_le_bytes());
    header.extend_from_slice(&0u16.to_le_bytes());
    header.extend_from_slice(&(metadata.len() as u32).to_le_bytes());
    header.extend_from_slice(metadata);
    let crc = crc32fast::hash(&header);
    header.extend_from_slice(&crc.to_le_bytes());
    header
}

/// Appends record `r` (valid: size `1..=MAX_ACCESS_SIZE`, an unmodelled
/// mark on a fetch only) of the current thread, whose delta state is `st`,
/// to `buf`: a stack switch when its stack changed, then the tag and the
/// varints. At most [`MAX_RECORD_BYTES`] bytes, thread switch included.
#[inline]
pub(crate) fn encode_record(buf: &mut Vec<u8>, st: &mut ThreadState, r: &Record) {
    if r.stack != st.stack {
        st.stack = r.stack;
        buf.push(CTRL_STACK);
        put_varint(buf, u64::from(r.stack));
    }
    let c = class(r.kind);
    let mut tag = r.kind as u8;
    if r.unmodelled {
        tag |= TAG_UNMODELLED;
    }
    if r.size != st.size[c] {
        tag |= TAG_SIZE;
    }
    let (ip_mode, ip_delta) = if r.ip == st.ip {
        (IP_SAME, 0)
    } else if r.ip == r.addr {
        (IP_ADDR, 0)
    } else if r.ip == 0 {
        (IP_UNKNOWN, 0)
    } else {
        (IP_DELTA, zigzag(r.ip.wrapping_sub(st.ip)))
    };
    tag |= ip_mode << TAG_IP_SHIFT;
    buf.push(tag);
    put_varint(buf, zigzag(r.addr.wrapping_sub(st.addr[c])));
    if tag & TAG_SIZE != 0 {
        put_varint(buf, r.size as u64);
    }
    if ip_mode == IP_DELTA {
        put_varint(buf, ip_delta);
    }
    st.addr[c] = r.addr;
    st.size[c] = r.size;
    st.ip = r.ip;
}

/// Writes a cctrace file.
///
/// Records are encoded into an in-memory chunk that is written (one
/// `write_all` call) when it reaches about 256 KiB, so `W` need not be
/// buffered. [`TraceWriter::finish`] must be called: it writes the last
/// chunk and the end marker, without which readers report the file as
/// truncated.
///
/// ```
/// use coldcache_cctrace::{Record, RecordKind, TraceWriter, MAGIC};
/// let mut w = TraceWriter::new(Vec::new()).unwrap();
/// w.define_thread(1, 4242).unwrap();
/// w.write(&Record::new(RecordKind::Load, 0x1000, 8).with_ip(0x401000).with_thread(1)).unwrap();
/// assert_eq!(w.records_written(), 1);
/// let bytes = w.finish().unwrap();
/// assert_eq!(bytes[..8], MAGIC);
/// // The end marker: an all-zero chunk header, then the record count.
/// assert_eq!(bytes[bytes.len() - 20..bytes.len() - 8], [0u8; 12]);
/// assert_eq!(bytes[bytes.len() - 8..], 1u64.to_le_bytes());
/// ```
///
/// `coldcache_trace::TraceReader` reads what it writes.
pub struct TraceWriter<W: Write> {
    out: W,
    /// Chunk header space followed by the payload being built.
    buf: Vec<u8>,
    chunk_records: u32,
    total: u64,
    thread: u32,
    st: ThreadState,
    saved: HashMap<u32, ThreadState>,
    chunk_target: usize,
    version: u16,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the header (no metadata) and returns the writer.
    pub fn new(out: W) -> Result<TraceWriter<W>, TraceError> {
        TraceWriter::with_metadata(out, &[])
    }

    /// Writes the header with a metadata block (opaque bytes, by convention
    /// UTF-8 text such as the traced command line; at most 1 MiB), which
    /// `coldcache_trace::TraceReader::metadata` returns.
    pub fn with_metadata(out: W, metadata: &[u8]) -> Result<TraceWriter<W>, TraceError> {
        TraceWriter::with_version(out, metadata, FORMAT_VERSION)
    }

    /// [`TraceWriter::with_metadata`] writing format `version`
    /// ([`OLDEST_VERSION`]`..=`[`FORMAT_VERSION`]). Version 1 has no
    /// stacks, unmodelled marks or attachments: a record or attachment
    /// that needs them is refused. For tests and for tools that read
    /// only version 1.
    pub fn with_version(
        mut out: W,
        metadata: &[u8],
        version: u16,
    ) -> Result<TraceWriter<W>, TraceError> {
        if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(TraceError::InvalidInput(format!(
                "cctrace version {version} cannot be written (versions \
                 {OLDEST_VERSION} to {FORMAT_VERSION} can)"
            )));
        }
        if metadata.len() > MAX_METADATA {
            return Err(TraceError::InvalidInput(format!(
                "metadata of {} bytes is over the limit of {MAX_METADATA}",
                metadata.len()
            )));
        }
        out.write_all(&file_header(metadata, version))
            .map_err(TraceError::Write)?;
        let mut buf = Vec::with_capacity(CHUNK_HEADER + DEFAULT_CHUNK_TARGET + 64);
        buf.resize(CHUNK_HEADER, 0);
        Ok(TraceWriter {
            out,
            buf,
            chunk_records: 0,
            total: 0,
            thread: 0,
            st: ThreadState::default(),
            saved: HashMap::new(),
            chunk_target: DEFAULT_CHUNK_TARGET,
            version,
        })
    }

    /// Sets the payload size (bytes, at least 16) after which a chunk is
    /// ended. Small values are only useful to test multi-chunk files.
    pub fn set_chunk_size(&mut self, bytes: usize) {
        self.chunk_target = bytes.clamp(16, MAX_CHUNK / 2);
    }

    /// Records that thread index `index` (the [`Record::thread`] value) is
    /// the OS thread `os_tid`. Readers return the table from
    /// `coldcache_trace::TraceReader::thread_os_id` once they have read this point.
    pub fn define_thread(&mut self, index: u32, os_tid: u64) -> Result<(), TraceError> {
        self.buf.push(CTRL_THREAD_DEF);
        put_varint(&mut self.buf, index as u64);
        put_varint(&mut self.buf, os_tid);
        self.maybe_flush()
    }

    /// Appends one record. Its size must be `1..=MAX_ACCESS_SIZE`.
    #[inline]
    pub fn write(&mut self, r: &Record) -> Result<(), TraceError> {
        if r.size == 0 || r.size > MAX_ACCESS_SIZE {
            return Err(TraceError::InvalidInput(format!(
                "record {:?} at {:#x} has size {} (must be 1..={MAX_ACCESS_SIZE})",
                r.kind, r.addr, r.size
            )));
        }
        if (r.stack != 0 || r.unmodelled) && self.version < 2 {
            return Err(TraceError::InvalidInput(format!(
                "record {:?} at {:#x} has a stack or an unmodelled mark, which cctrace \
                 version {} cannot hold",
                r.kind, r.addr, self.version
            )));
        }
        if r.unmodelled && r.kind != RecordKind::Instr {
            return Err(TraceError::InvalidInput(format!(
                "record {:?} at {:#x} is marked unmodelled, which only an instruction \
                 fetch can be",
                r.kind, r.addr
            )));
        }
        if r.thread != self.thread {
            self.switch_thread(r.thread);
        }
        encode_record(&mut self.buf, &mut self.st, r);
        self.chunk_records += 1;
        self.total += 1;
        self.maybe_flush()
    }

    /// Appends records in order.
    pub fn write_all(&mut self, records: &[Record]) -> Result<(), TraceError> {
        records.iter().try_for_each(|r| self.write(r))
    }

    /// Appends an attachment of `kind` (e.g. [`ATTACH_DUMP_SKELETON`]) in
    /// a chunk of its own, which readers keep
    /// (`coldcache_trace::TraceReader::attachment`). Version 2.
    pub fn attach(&mut self, kind: u64, bytes: &[u8]) -> Result<(), TraceError> {
        if self.version < 2 {
            return Err(TraceError::InvalidInput(format!(
                "cctrace version {} cannot hold attachments",
                self.version
            )));
        }
        if bytes.len() + 32 > MAX_CHUNK {
            return Err(TraceError::InvalidInput(format!(
                "attachment of {} bytes is over the chunk limit of {MAX_CHUNK}",
                bytes.len()
            )));
        }
        self.flush_chunk()?;
        self.buf.push(CTRL_ATTACH);
        put_varint(&mut self.buf, kind);
        put_varint(&mut self.buf, bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
        self.flush_chunk()
    }

    /// Records written so far.
    pub fn records_written(&self) -> u64 {
        self.total
    }

    /// Writes the last chunk and the end marker, flushes, and returns the
    /// output.
    pub fn finish(mut self) -> Result<W, TraceError> {
        self.flush_chunk()?;
        let mut end = [0u8; CHUNK_HEADER + 8];
        end[CHUNK_HEADER..].copy_from_slice(&self.total.to_le_bytes());
        self.out.write_all(&end).map_err(TraceError::Write)?;
        self.out.flush().map_err(TraceError::Write)?;
        Ok(self.out)
    }

    fn switch_thread(&mut self, thread: u32) {
        self.saved.insert(self.thread, self.st);
        self.st = self.saved.remove(&thread).unwrap_or_default();
        self.thread = thread;
        self.buf.push(CTRL_THREAD_SWITCH);
        put_varint(&mut self.buf, thread as u64);
    }

    #[inline]
    fn maybe_flush(&mut self) -> Result<(), TraceError> {
        if self.buf.len() - CHUNK_HEADER >= self.chunk_target {
            self.flush_chunk()
        } else {
            Ok(())
        }
    }

    fn flush_chunk(&mut self) -> Result<(), TraceError> {
        let len = self.buf.len() - CHUNK_HEADER;
        if len == 0 {
            return Ok(());
        }
        let crc = crc32fast::hash(&self.buf[CHUNK_HEADER..]);
        self.buf[0..4].copy_from_slice(&(len as u32).to_le_bytes());
        self.buf[4..8].copy_from_slice(&self.chunk_records.to_le_bytes());
        self.buf[8..12].copy_from_slice(&crc.to_le_bytes());
        self.out.write_all(&self.buf).map_err(TraceError::Write)?;
        self.buf.truncate(CHUNK_HEADER);
        self.chunk_records = 0;
        self.thread = 0;
        self.st = ThreadState::default();
        self.saved.clear();
        Ok(())
    }
}
