//! Writing a cctrace file as it is produced, in bounded memory: the pieces
//! a capture streams to disk while the traced program runs.
//!
//! - [`ChunkEncoder`] encodes records into one chunk buffer reserved up
//!   front: after [`ChunkEncoder::new`] it never allocates (no map, no
//!   growth), so it runs where the capture runs, in a signal handler or a
//!   traced thread that may hold the program's allocator lock. The caller
//!   asks [`ChunkEncoder::fits`] before each instruction's records and
//!   writes the sealed chunk ([`ChunkEncoder::seal`]) when it does not.
//! - [`stream_header`], [`attachment_chunk`], [`skeleton_index_chunk`] and
//!   [`end_marker`] are the other byte runs of such a file.
//!
//! A streamed file is an ordinary cctrace version 2 file (any reader of
//! version 2 reads it): the dump skeleton, known only at the end, is the
//! last attachment, followed by a fixed-size *index* attachment
//! ([`ATTACH_SKELETON_INDEX`]: the skeleton chunk's byte offset) right
//! before the end marker. A reader of a seekable file reads the last
//! [`STREAM_TAIL`] bytes, finds the index there and reads the skeleton
//! before the records, without reading the file first. Layout:
//! `docs/trace-format.md`.

use crate::wire::*;
use crate::writer::{encode_record, file_header};
use crate::Record;

/// Most bytes one record takes in a chunk: a thread switch (1 + 5), a
/// stack switch (1 + 5), the tag, the address delta (10), the size (3)
/// and the ip delta (10).
pub const MAX_RECORD_BYTES: usize = 36;

/// Most bytes of a thread definition (tag, index, OS thread id).
const MAX_THREAD_DEF_BYTES: usize = 1 + 5 + 10;

/// Attachment kind: the byte offset (u64 LE) of the chunk holding the
/// [`ATTACH_DUMP_SKELETON`] attachment, written by a streaming capture in
/// a chunk of its own right before the end marker.
pub const ATTACH_SKELETON_INDEX: u64 = 2;

/// Bytes of the index chunk: chunk header, then `CTRL_ATTACH`, kind (one
/// varint byte), length 8 (one byte) and the offset.
pub const SKELETON_INDEX_CHUNK: usize = CHUNK_HEADER + 3 + 8;

/// The tail of a streamed file: the index chunk and the end marker.
pub const STREAM_TAIL: usize = SKELETON_INDEX_CHUNK + CHUNK_HEADER + 8;

/// The header of a streamed file (current version, no metadata).
pub fn stream_header() -> Vec<u8> {
    file_header(&[], FORMAT_VERSION)
}

/// A whole chunk (header and payload) holding one attachment of `kind`.
/// `bytes` must fit a chunk ([`MAX_CHUNK`] less a few bytes).
pub fn attachment_chunk(kind: u64, bytes: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(CHUNK_HEADER + 21 + bytes.len());
    buf.resize(CHUNK_HEADER, 0);
    buf.push(CTRL_ATTACH);
    put_varint(&mut buf, kind);
    put_varint(&mut buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
    seal_header(&mut buf, 0);
    buf
}

/// The index chunk naming the skeleton chunk's offset.
pub fn skeleton_index_chunk(skeleton_offset: u64) -> [u8; SKELETON_INDEX_CHUNK] {
    let chunk = attachment_chunk(ATTACH_SKELETON_INDEX, &skeleton_offset.to_le_bytes());
    let mut out = [0u8; SKELETON_INDEX_CHUNK];
    out.copy_from_slice(&chunk);
    out
}

/// The end marker: an all-zero chunk header and the total record count.
pub fn end_marker(total: u64) -> [u8; CHUNK_HEADER + 8] {
    let mut end = [0u8; CHUNK_HEADER + 8];
    end[CHUNK_HEADER..].copy_from_slice(&total.to_le_bytes());
    end
}

/// Fills the chunk header at the start of `buf` (payload after it).
fn seal_header(buf: &mut [u8], records: u32) {
    let len = (buf.len() - CHUNK_HEADER) as u32;
    let crc = crc32fast::hash(&buf[CHUNK_HEADER..]);
    buf[0..4].copy_from_slice(&len.to_le_bytes());
    buf[4..8].copy_from_slice(&records.to_le_bytes());
    buf[8..12].copy_from_slice(&crc.to_le_bytes());
}

/// One chunk being encoded, in memory reserved once; see the module doc.
pub struct ChunkEncoder {
    /// Chunk header space, then the payload.
    buf: Vec<u8>,
    records: u32,
    total: u64,
    thread: u32,
    st: ThreadState,
    /// Delta state of the other threads met in this chunk.
    saved: Vec<(u32, ThreadState)>,
}

/// The bytes of the buffer of a [`ChunkEncoder`] for `records` records a
/// chunk: their worst case, capped at the largest chunk.
pub fn chunk_buffer_bytes(records: usize) -> usize {
    records
        .max(16)
        .saturating_mul(MAX_RECORD_BYTES)
        .saturating_add(CHUNK_HEADER + 4 * MAX_THREAD_DEF_BYTES)
        .min(MAX_CHUNK)
}

impl ChunkEncoder {
    /// An encoder whose chunks hold up to `records` records (at least 16)
    /// of up to `threads` threads each (more threads end a chunk early).
    pub fn new(records: usize, threads: usize) -> ChunkEncoder {
        let bytes = chunk_buffer_bytes(records);
        let mut buf = Vec::with_capacity(bytes);
        buf.resize(CHUNK_HEADER, 0);
        ChunkEncoder {
            buf,
            records: 0,
            total: 0,
            thread: 0,
            st: ThreadState::default(),
            saved: Vec::with_capacity(threads.max(1)),
        }
    }

    /// Whether `n` more records of one thread (and a thread definition)
    /// fit the current chunk without growing it.
    #[inline]
    pub fn fits(&self, n: usize) -> bool {
        self.buf.len() + n * MAX_RECORD_BYTES + MAX_THREAD_DEF_BYTES <= self.buf.capacity()
            && self.saved.len() < self.saved.capacity()
    }

    /// Records that thread index `index` is the OS thread `os_tid` (room
    /// is checked by the caller, as for records: [`ChunkEncoder::fits`]).
    pub fn define_thread(&mut self, index: u32, os_tid: u64) {
        debug_assert!(self.buf.len() + MAX_THREAD_DEF_BYTES <= self.buf.capacity());
        self.buf.push(CTRL_THREAD_DEF);
        put_varint(&mut self.buf, u64::from(index));
        put_varint(&mut self.buf, os_tid);
    }

    /// Appends one valid record (size `1..=MAX_ACCESS_SIZE`, an unmodelled
    /// mark on an instruction fetch only) for which [`ChunkEncoder::fits`]
    /// said there was room.
    #[inline]
    pub fn push(&mut self, r: &Record) {
        debug_assert!(r.size >= 1 && r.size <= crate::MAX_ACCESS_SIZE);
        debug_assert!(self.buf.len() + MAX_RECORD_BYTES <= self.buf.capacity());
        if r.thread != self.thread {
            let old = (self.thread, self.st);
            match self.saved.iter().position(|s| s.0 == r.thread) {
                Some(i) => {
                    self.st = self.saved[i].1;
                    self.saved[i] = old;
                }
                None => {
                    self.st = ThreadState::default();
                    self.saved.push(old);
                }
            }
            self.thread = r.thread;
            self.buf.push(CTRL_THREAD_SWITCH);
            put_varint(&mut self.buf, u64::from(r.thread));
        }
        encode_record(&mut self.buf, &mut self.st, r);
        self.records += 1;
        self.total += 1;
    }

    /// Whether the current chunk holds nothing.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == CHUNK_HEADER
    }

    /// Records in the current chunk.
    pub fn records(&self) -> u32 {
        self.records
    }

    /// Records pushed over the encoder's life.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Ends the current chunk: the whole chunk's bytes (header and
    /// payload), to be written before [`ChunkEncoder::clear`].
    pub fn seal(&mut self) -> &[u8] {
        seal_header(&mut self.buf, self.records);
        &self.buf
    }

    /// Starts the next chunk (delta state reset, memory kept).
    pub fn clear(&mut self) {
        self.buf.truncate(CHUNK_HEADER);
        self.records = 0;
        self.thread = 0;
        self.st = ThreadState::default();
        self.saved.clear();
    }

    /// Forgets the records of the current chunk (the total too): the chunk
    /// could not be written.
    pub fn discard(&mut self) {
        self.total -= u64::from(self.records);
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RecordKind, TraceWriter};

    fn records() -> Vec<Record> {
        let mut v = Vec::new();
        for i in 0..1000u64 {
            let t = (i % 3) as u32;
            v.push(
                Record::new(RecordKind::Instr, 0x40_1000 + i * 3, 3)
                    .with_ip(0x40_1000 + i * 3)
                    .with_thread(t)
                    .with_stack((i / 100) as u32),
            );
            v.push(
                Record::new(RecordKind::Load, 0x7fff_0000 - i * 8, 8)
                    .with_ip(0x40_1000 + i * 3)
                    .with_thread(t)
                    .with_stack((i / 100) as u32),
            );
        }
        v
    }

    /// The encoder's chunks are byte for byte the chunks `TraceWriter`
    /// writes for the same records and chunk boundaries.
    #[test]
    fn chunks_equal_the_writers() {
        let rs = records();
        let mut enc = ChunkEncoder::new(16, 4);
        let mut streamed = stream_header();
        let cap = enc.buf.capacity();
        let mut chunks = 1;
        for r in &rs {
            if !enc.fits(1) {
                streamed.extend_from_slice(enc.seal());
                enc.clear();
                chunks += 1;
            }
            enc.push(r);
        }
        streamed.extend_from_slice(enc.seal());
        enc.clear();
        assert_eq!(enc.buf.capacity(), cap, "the chunk buffer never grew");
        streamed.extend_from_slice(&end_marker(enc.total()));
        // The writer, with the same chunk boundaries: one writer per chunk
        // (its chunks end on a size; ours on room).
        let mut expected = stream_header();
        let mut chunk = Vec::new();
        let mut enc2 = ChunkEncoder::new(16, 4);
        for r in &rs {
            if !enc2.fits(1) {
                expected.extend_from_slice(&writer_chunk(&chunk));
                chunk.clear();
                enc2.clear();
            }
            enc2.push(r);
            chunk.push(*r);
        }
        expected.extend_from_slice(&writer_chunk(&chunk));
        expected.extend_from_slice(&end_marker(rs.len() as u64));
        assert_eq!(streamed, expected);
        assert!(chunks > 5, "many chunks ({chunks})");
    }

    /// The chunk bytes `TraceWriter` writes for `rs` as one chunk.
    fn writer_chunk(rs: &[Record]) -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        w.set_chunk_size(usize::MAX);
        w.write_all(rs).unwrap();
        let bytes = w.finish().unwrap();
        let head = stream_header().len();
        bytes[head..bytes.len() - (CHUNK_HEADER + 8)].to_vec()
    }

    #[test]
    fn index_chunk_is_fixed_size_and_names_the_offset() {
        let c = skeleton_index_chunk(0x0102_0304_0506_0708);
        assert_eq!(c.len(), SKELETON_INDEX_CHUNK);
        assert_eq!(&c[0..4], &11u32.to_le_bytes());
        assert_eq!(c[CHUNK_HEADER], CTRL_ATTACH);
        assert_eq!(c[CHUNK_HEADER + 1], ATTACH_SKELETON_INDEX as u8);
        assert_eq!(c[CHUNK_HEADER + 2], 8);
        assert_eq!(
            &c[CHUNK_HEADER + 3..],
            &0x0102_0304_0506_0708u64.to_le_bytes()
        );
    }
}
