//! The cctrace wire facts shared by the writer here and the reader in
//! `coldcache-trace`: header and chunk sizes, tag bits, the per-thread
//! delta state and the varint helpers. Layout: `docs/trace-format.md`.

use crate::RecordKind;

/// The first 8 bytes of every cctrace file.
pub const MAGIC: [u8; 8] = *b"CCTRACE\0";

/// The version `TraceWriter` writes and the newest one the reader reads.
/// Version 2 adds stacks (`CTRL_STACK`), the unmodelled mark on
/// instruction records (`TAG_UNMODELLED`) and attachments
/// (`CTRL_ATTACH`); everything of version 1 is unchanged.
pub const FORMAT_VERSION: u16 = 2;

/// The oldest version the reader reads.
pub const OLDEST_VERSION: u16 = 1;

/// Bytes of the fixed header: magic, version u16, flags u16, metadata
/// length u32.
pub const HEADER_LEN: usize = 16;

/// Bytes of a chunk header: payload length, record count, CRC32 (u32 LE
/// each).
pub const CHUNK_HEADER: usize = 12;

/// Largest metadata block.
pub const MAX_METADATA: usize = 1 << 20;

/// Largest chunk payload a reader accepts (writers use far less).
pub const MAX_CHUNK: usize = 64 << 20;

/// Payload size after which `TraceWriter` ends a chunk.
pub const DEFAULT_CHUNK_TARGET: usize = 256 * 1024;

// Tag byte bits.
pub const TAG_KIND: u8 = 0x07;
pub const TAG_CONTROL: u8 = 0x07;
pub const TAG_SIZE: u8 = 0x08;
pub const TAG_IP_SHIFT: u8 = 4;
pub const TAG_RESERVED: u8 = 0xc0;
/// Version 2, instruction records only: the instruction's data accesses
/// were not modelled (none follow).
pub const TAG_UNMODELLED: u8 = 0x40;
pub const IP_UNKNOWN: u8 = 0;
pub const IP_SAME: u8 = 1;
pub const IP_DELTA: u8 = 2;
pub const IP_ADDR: u8 = 3;
pub const CTRL_THREAD_SWITCH: u8 = 0x07;
pub const CTRL_THREAD_DEF: u8 = 0x0f;
/// Version 2: the current thread's stack id changes (varint id).
pub const CTRL_STACK: u8 = 0x17;
/// Version 2: an attachment (varint kind, varint length, bytes).
pub const CTRL_ATTACH: u8 = 0x1f;
/// Attachment kind: the capture's dump without records (coldcache-dump
/// bytes), from which a re-simulation builds its dump.
pub const ATTACH_DUMP_SKELETON: u64 = 1;

/// Delta-coding state of one thread in one chunk.
#[derive(Clone, Copy, Default)]
pub struct ThreadState {
    /// Previous address per class: 0 instruction, 1 data.
    pub addr: [u64; 2],
    /// Previous size per class (0: none yet).
    pub size: [u32; 2],
    /// ip of the previous record.
    pub ip: u64,
    /// Current stack id (version 2; 0 at a chunk start).
    pub stack: u32,
}

#[inline]
pub fn class(kind: RecordKind) -> usize {
    (kind != RecordKind::Instr) as usize
}

/// Zigzag of a wrapping difference (the encoder's deltas are `u64`).
#[inline]
pub fn zigzag(v: u64) -> u64 {
    varint::zigzag(v as i64)
}

/// Inverse of [`zigzag`], as a wrapping difference.
#[inline]
pub fn unzigzag(v: u64) -> u64 {
    varint::unzigzag(v) as u64
}

use coldcache_fsio::varint;
pub use coldcache_fsio::varint::put as put_varint;

/// Reads a LEB128 varint; None if truncated or over 64 bits.
#[inline]
pub fn get_varint(p: &[u8], pos: &mut usize) -> Option<u64> {
    varint::get(p, pos).ok()
}
