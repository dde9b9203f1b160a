//! The cctrace decoder [`crate::TraceReader`] uses (format in
//! `docs/trace-format.md`; the writer and the wire facts live in
//! `coldcache-cctrace`, which the preloaded library links).
//!
//! Layout: a 16-byte header (magic, version, flags, metadata length), the
//! metadata and a CRC32 of both, chunks of `payload length, record count, CRC32` + payload, and
//! an end marker (an all-zero chunk header followed by the total record
//! count). Inside a payload each record is a tag byte (kind, which fields
//! follow, how the ip is given) and LEB128 varints: the zigzag delta of the
//! address against the previous address of the same class (instruction or
//! data) in the same thread, the size when it changed, the ip delta when it
//! is not implied. Delta state is reset at every chunk start, so each chunk
//! decodes on its own. Versions 1 and 2 are read; version 2 adds stack
//! switches, the unmodelled mark and attachments.

use std::collections::{BTreeMap, HashMap};

use coldcache_cctrace::wire::*;

use crate::input::Input;
use crate::{BinaryError, TraceError};
use crate::{Record, RecordKind, MAX_ACCESS_SIZE};

/// Decoder of a cctrace stream whose header has been read.
pub(crate) struct BinaryDecoder {
    pub(crate) metadata: Vec<u8>,
    /// Format version of the file.
    pub(crate) version: u16,
    /// Attachments read so far, by kind (the last of a kind wins).
    pub(crate) attachments: BTreeMap<u64, Vec<u8>>,
    pub(crate) threads: BTreeMap<u32, u64>,
    payload: Vec<u8>,
    pos: usize,
    /// Index of the chunk in `payload` (meaningful once one is loaded).
    chunk: u64,
    /// Stream offset of that chunk's header.
    chunk_offset: u64,
    /// Records the chunk header announced and not yet decoded.
    chunk_left: u32,
    chunks_loaded: u64,
    decoded: u64,
    thread: u32,
    st: ThreadState,
    saved: HashMap<u32, ThreadState>,
    finished: bool,
    /// Decode through the checked path only (tests and benchmarks compare
    /// the fast path with it).
    pub(crate) reference: bool,
}

fn bin(name: &str, error: BinaryError) -> TraceError {
    TraceError::Binary {
        name: name.to_string(),
        error,
    }
}

fn io(name: &str, error: std::io::Error) -> TraceError {
    TraceError::Io {
        name: name.to_string(),
        error,
    }
}

#[inline]
fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

impl BinaryDecoder {
    /// Reads and checks the header at the start of `input`.
    pub(crate) fn open(input: &mut Input, name: &str) -> Result<BinaryDecoder, TraceError> {
        input.ensure(HEADER_LEN).map_err(|e| io(name, e))?;
        let avail = input.available();
        let head = &input.buf[input.start..input.start + avail.min(HEADER_LEN)];
        if head.len() < MAGIC.len() || head[..MAGIC.len()] != MAGIC {
            let found = head[..head.len().min(MAGIC.len())].to_vec();
            return Err(bin(name, BinaryError::BadMagic { found }));
        }
        if head.len() < 10 {
            return Err(bin(
                name,
                BinaryError::BadHeader {
                    offset: head.len() as u64,
                    detail: format!("truncated header ({} of {HEADER_LEN} bytes)", head.len()),
                },
            ));
        }
        let version = u16::from_le_bytes([head[8], head[9]]);
        if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(bin(
                name,
                BinaryError::UnsupportedVersion {
                    version,
                    supported: FORMAT_VERSION,
                },
            ));
        }
        if head.len() < HEADER_LEN {
            return Err(bin(
                name,
                BinaryError::BadHeader {
                    offset: head.len() as u64,
                    detail: format!("truncated header ({} of {HEADER_LEN} bytes)", head.len()),
                },
            ));
        }
        let flags = u16::from_le_bytes([head[10], head[11]]);
        if flags != 0 {
            return Err(bin(name, BinaryError::UnsupportedFlags { flags }));
        }
        let meta_len = le32(&head[12..16]) as usize;
        if meta_len > MAX_METADATA {
            return Err(bin(
                name,
                BinaryError::BadHeader {
                    offset: 12,
                    detail: format!("metadata length {meta_len} over the limit of {MAX_METADATA}"),
                },
            ));
        }
        // Metadata and the header CRC.
        let whole = HEADER_LEN + meta_len + 4;
        if !input.ensure(whole).map_err(|e| io(name, e))? {
            return Err(bin(
                name,
                BinaryError::BadHeader {
                    offset: input.available() as u64,
                    detail: format!(
                        "truncated header ({} of {whole} bytes with metadata and CRC)",
                        input.available()
                    ),
                },
            ));
        }
        let h = &input.buf[input.start..input.start + whole];
        let stored = le32(&h[whole - 4..]);
        let computed = crc32fast::hash(&h[..whole - 4]);
        if stored != computed {
            return Err(bin(
                name,
                BinaryError::BadHeader {
                    offset: (whole - 4) as u64,
                    detail: format!(
                        "header CRC mismatch (stored {stored:#010x}, computed {computed:#010x}): corrupt data"
                    ),
                },
            ));
        }
        let metadata = h[HEADER_LEN..HEADER_LEN + meta_len].to_vec();
        input.start += whole;
        Ok(BinaryDecoder {
            metadata,
            version,
            attachments: BTreeMap::new(),
            threads: BTreeMap::new(),
            payload: Vec::new(),
            pos: 0,
            chunk: 0,
            chunk_offset: 0,
            chunk_left: 0,
            chunks_loaded: 0,
            decoded: 0,
            thread: 0,
            st: ThreadState::default(),
            saved: HashMap::new(),
            finished: false,
            reference: false,
        })
    }

    /// Appends records to `out` until it holds `max`; returns true at the
    /// end of the trace.
    pub(crate) fn read(
        &mut self,
        input: &mut Input,
        name: &str,
        out: &mut Vec<Record>,
        max: usize,
    ) -> Result<bool, TraceError> {
        while out.len() < max {
            if self.pos >= self.payload.len() {
                if self.chunk_left != 0 {
                    return Err(self.corrupt(
                        name,
                        format!(
                            "payload ends {} records short of the count in the chunk header",
                            self.chunk_left
                        ),
                    ));
                }
                if self.finished || !self.load_chunk(input, name)? {
                    return Ok(true);
                }
                continue;
            }
            self.decode(name, out, max)?;
        }
        Ok(false)
    }

    fn corrupt(&self, name: &str, detail: String) -> TraceError {
        bin(
            name,
            BinaryError::Corrupt {
                chunk: self.chunk,
                offset: self.chunk_offset,
                pos: self.pos as u64,
                detail,
            },
        )
    }

    /// Reads the next chunk into `payload`; false at the end marker.
    fn load_chunk(&mut self, input: &mut Input, name: &str) -> Result<bool, TraceError> {
        let chunk = self.chunks_loaded;
        let offset = input.offset_of(input.start);
        if !input.ensure(CHUNK_HEADER).map_err(|e| io(name, e))? {
            let got = input.available() as u64;
            return Err(bin(
                name,
                if got == 0 {
                    BinaryError::MissingEnd {
                        chunks: chunk,
                        offset,
                    }
                } else {
                    BinaryError::Truncated {
                        chunk,
                        offset,
                        what: "chunk header",
                        needed: CHUNK_HEADER as u64,
                        got,
                    }
                },
            ));
        }
        let h = &input.buf[input.start..input.start + CHUNK_HEADER];
        let (len, count, crc) = (le32(&h[0..4]), le32(&h[4..8]), le32(&h[8..12]));
        input.start += CHUNK_HEADER;
        if len == 0 {
            if count != 0 || crc != 0 {
                return Err(bin(
                    name,
                    BinaryError::Corrupt {
                        chunk,
                        offset,
                        pos: 0,
                        detail: format!(
                            "empty chunk with record count {count} and CRC {crc:#010x} \
                             (an end marker has both 0)"
                        ),
                    },
                ));
            }
            if !input.ensure(8).map_err(|e| io(name, e))? {
                return Err(bin(
                    name,
                    BinaryError::Truncated {
                        chunk,
                        offset,
                        what: "end marker",
                        needed: (CHUNK_HEADER + 8) as u64,
                        got: (CHUNK_HEADER + input.available()) as u64,
                    },
                ));
            }
            let b = &input.buf[input.start..input.start + 8];
            let stored = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
            input.start += 8;
            if stored != self.decoded {
                return Err(bin(
                    name,
                    BinaryError::CountMismatch {
                        offset,
                        stored,
                        counted: self.decoded,
                    },
                ));
            }
            if input.ensure(1).map_err(|e| io(name, e))? {
                return Err(bin(
                    name,
                    BinaryError::TrailingData {
                        offset: input.offset_of(input.start),
                    },
                ));
            }
            self.finished = true;
            return Ok(false);
        }
        let len = len as usize;
        if len > MAX_CHUNK {
            return Err(bin(
                name,
                BinaryError::ChunkTooLarge {
                    chunk,
                    offset,
                    len: len as u64,
                    max: MAX_CHUNK as u64,
                },
            ));
        }
        if !input.ensure(len).map_err(|e| io(name, e))? {
            return Err(bin(
                name,
                BinaryError::Truncated {
                    chunk,
                    offset,
                    what: "chunk payload",
                    needed: len as u64,
                    got: input.available() as u64,
                },
            ));
        }
        self.payload.clear();
        self.payload
            .extend_from_slice(&input.buf[input.start..input.start + len]);
        input.start += len;
        let computed = crc32fast::hash(&self.payload);
        if computed != crc {
            return Err(bin(
                name,
                BinaryError::CrcMismatch {
                    chunk,
                    offset,
                    stored: crc,
                    computed,
                },
            ));
        }
        self.chunk = chunk;
        self.chunk_offset = offset;
        self.chunk_left = count;
        self.chunks_loaded += 1;
        self.pos = 0;
        self.thread = 0;
        self.st = ThreadState::default();
        self.saved.clear();
        Ok(true)
    }

    /// Decodes from the current payload until it or `out` is full.
    #[inline]
    fn decode(&mut self, name: &str, out: &mut Vec<Record>, max: usize) -> Result<(), TraceError> {
        let p = &self.payload[..];
        let mut pos = self.pos;
        let mut st = self.st;
        let mut left = self.chunk_left;
        let start_len = out.len();
        let v2 = self.version >= 2;
        let result = loop {
            // The fast path: ordinary records whose longest encoding lies
            // inside the payload, decoded from a fixed window without
            // per-byte bounds checks or error plumbing. Anything else (a
            // control record, a record near the payload's end, anything
            // the fast path does not accept) goes through the checked
            // path below, one item at a time, which gives the errors.
            if !self.reference {
                let room = max.saturating_sub(out.len()).min(left as usize);
                let (next, n) = fast_run(p, pos, &mut st, v2, self.thread, out, room);
                pos = next;
                left -= n as u32;
            }
            if pos >= p.len() || out.len() >= max {
                break Ok(());
            }
            let item = pos;
            let tag = p[pos];
            pos += 1;
            let k = tag & TAG_KIND;
            if k == TAG_CONTROL {
                match tag {
                    CTRL_THREAD_SWITCH => {
                        let Some(t) = get_varint(p, &mut pos).and_then(|t| u32::try_from(t).ok())
                        else {
                            break Err((item, "bad thread index in thread switch".to_string()));
                        };
                        if t != self.thread {
                            self.saved.insert(self.thread, st);
                            st = self.saved.remove(&t).unwrap_or_default();
                            self.thread = t;
                        }
                    }
                    CTRL_THREAD_DEF => {
                        let idx = get_varint(p, &mut pos).and_then(|t| u32::try_from(t).ok());
                        let tid = get_varint(p, &mut pos);
                        let (Some(idx), Some(tid)) = (idx, tid) else {
                            break Err((item, "bad thread definition".to_string()));
                        };
                        self.threads.insert(idx, tid);
                    }
                    CTRL_STACK if self.version >= 2 => {
                        let Some(s) = get_varint(p, &mut pos).and_then(|s| u32::try_from(s).ok())
                        else {
                            break Err((item, "bad stack id in stack switch".to_string()));
                        };
                        st.stack = s;
                    }
                    CTRL_ATTACH if self.version >= 2 => {
                        let kind = get_varint(p, &mut pos);
                        let len = get_varint(p, &mut pos)
                            .and_then(|l| usize::try_from(l).ok())
                            .filter(|&l| l <= p.len() - pos);
                        let (Some(kind), Some(len)) = (kind, len) else {
                            break Err((item, "bad attachment header".to_string()));
                        };
                        self.attachments.insert(kind, p[pos..pos + len].to_vec());
                        pos += len;
                    }
                    _ => break Err((item, format!("unknown control tag {tag:#04x}"))),
                }
                continue;
            }
            let unmodelled = self.version >= 2 && k == 0 && tag & TAG_UNMODELLED != 0;
            if tag & TAG_RESERVED & !(if unmodelled { TAG_UNMODELLED } else { 0 }) != 0 {
                break Err((item, format!("tag {tag:#04x} has reserved bits set")));
            }
            if left == 0 {
                break Err((
                    item,
                    "more records than the count in the chunk header".into(),
                ));
            }
            let kind = RecordKind::ALL[k as usize];
            let c = class(kind);
            let Some(d) = get_varint(p, &mut pos) else {
                break Err((item, "bad address varint".into()));
            };
            let addr = st.addr[c].wrapping_add(unzigzag(d));
            let size = if tag & TAG_SIZE != 0 {
                match get_varint(p, &mut pos) {
                    Some(s) if (1..=MAX_ACCESS_SIZE as u64).contains(&s) => s as u32,
                    Some(s) => break Err((item, format!("size {s} out of range"))),
                    None => break Err((item, "bad size varint".into())),
                }
            } else if st.size[c] == 0 {
                break Err((item, "size omitted before any size was given".into()));
            } else {
                st.size[c]
            };
            let ip = match (tag >> TAG_IP_SHIFT) & 3 {
                IP_UNKNOWN => 0,
                IP_SAME => st.ip,
                IP_ADDR => addr,
                _ => match get_varint(p, &mut pos) {
                    Some(d) => st.ip.wrapping_add(unzigzag(d)),
                    None => break Err((item, "bad ip varint".into())),
                },
            };
            st.addr[c] = addr;
            st.size[c] = size;
            st.ip = ip;
            left -= 1;
            out.push(Record {
                kind,
                addr,
                size,
                ip,
                thread: self.thread,
                stack: st.stack,
                unmodelled,
            });
        };
        self.decoded += (out.len() - start_len) as u64;
        self.st = st;
        self.chunk_left = left;
        match result {
            Ok(()) => {
                self.pos = pos;
                Ok(())
            }
            Err((at, detail)) => {
                self.pos = at;
                Err(self.corrupt(name, detail))
            }
        }
    }
}

/// Bytes the fast path looks at: the longest record (tag, then address,
/// size and ip varints of at most 10 bytes each) fits.
const WINDOW: usize = 32;

/// Per tag byte, for versions 1 and 2: the tag itself when the fast path
/// takes it, or 0xff (a control kind) for a control tag or reserved bits
/// set (the unmodelled bit counts as reserved except on a version 2
/// instruction record).
static FAST_TAGS: [[u8; 256]; 2] = {
    let mut t = [[0xffu8; 256]; 2];
    let mut v = 0;
    while v < 2 {
        let mut tag = 0;
        while tag < 256 {
            let b = tag as u8;
            let k = b & TAG_KIND;
            let allowed = if v == 1 && k == 0 { TAG_UNMODELLED } else { 0 };
            if k != TAG_CONTROL && b & TAG_RESERVED & !allowed == 0 {
                t[v][tag] = b;
            }
            tag += 1;
        }
        v += 1;
    }
    t
};

/// [`RecordKind::ALL`] indexed by the 3 kind bits, padded to 8 (7, a
/// control tag, never reaches it).
const KINDS: [RecordKind; 8] = {
    let mut k = [RecordKind::Flush; 8];
    let mut i = 0;
    while i < RecordKind::ALL.len() {
        k[i] = RecordKind::ALL[i];
        i += 1;
    }
    k
};

/// A varint of at most 9 bytes at `w[*i]` (`*i` stays under `WINDOW`
/// while a record's fields are read: at most 1 + 3 × 10 bytes); None
/// for a longer one, which the checked path reads or refuses.
#[inline(always)]
fn window_varint(w: &[u8; WINDOW], i: &mut usize) -> Option<u64> {
    // Up to 8 bytes at once, without a branch per byte: the first byte
    // with its top bit clear ends the number; the 7-bit groups before it
    // are packed by three shift-and-mask steps.
    let at = *i & (WINDOW - 1);
    let first = w[at];
    if first < 0x80 {
        *i += 1;
        return Some(u64::from(first));
    }
    if let Some(b) = w.get(at..at + 8).and_then(|b| b.first_chunk::<8>()) {
        let x = u64::from_le_bytes(*b);
        let ends = !x & 0x8080_8080_8080_8080;
        if ends != 0 {
            let bits = ends.trailing_zeros() + 1;
            let x = x & (u64::MAX >> (64 - bits)) & 0x7f7f_7f7f_7f7f_7f7f;
            let x = ((x & 0x7f00_7f00_7f00_7f00) >> 1) | (x & 0x007f_007f_007f_007f);
            let x = ((x & 0x3fff_0000_3fff_0000) >> 2) | (x & 0x0000_3fff_0000_3fff);
            let x = ((x & 0x0fff_ffff_0000_0000) >> 4) | (x & 0x0000_0000_0fff_ffff);
            *i += (bits / 8) as usize;
            return Some(x);
        }
    }
    let b = w[*i & (WINDOW - 1)];
    *i += 1;
    if b < 0x80 {
        return Some(u64::from(b));
    }
    let mut v = u64::from(b & 0x7f);
    let mut shift = 7;
    loop {
        let b = w[*i & (WINDOW - 1)];
        *i += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 56 {
            return None;
        }
    }
}

/// Decodes up to `room` ordinary records from `p[pos..]` into `out` and
/// stops before the first item the fast path does not take or within
/// [`WINDOW`] bytes of the payload's end: the position reached and the
/// records decoded. A function of its own (not inlined) so that its loop
/// keeps its state in registers, away from the checked path's.
#[inline(never)]
fn fast_run(
    p: &[u8],
    mut pos: usize,
    st: &mut ThreadState,
    v2: bool,
    thread: u32,
    out: &mut Vec<Record>,
    room: usize,
) -> (usize, usize) {
    let mut s = *st;
    let mut n = 0;
    while n < room {
        let Some(w) = p
            .get(pos..pos + WINDOW)
            .and_then(|w| w.first_chunk::<WINDOW>())
        else {
            break;
        };
        let Some(used) = fast_record(w, &mut s, v2, thread, out) else {
            break;
        };
        pos += used;
        n += 1;
    }
    *st = s;
    (pos, n)
}

/// Decodes the ordinary record at the start of `w` with the delta state
/// `st` of thread `thread` and appends it to `out`: its encoded length,
/// or None (state and `out` untouched) for a control record or anything
/// the checked path must look at (reserved bits, a size out of range or
/// omitted before any was given, a varint of 10 bytes or more).
#[inline(always)]
fn fast_record(
    w: &[u8; WINDOW],
    st: &mut ThreadState,
    v2: bool,
    thread: u32,
    out: &mut Vec<Record>,
) -> Option<usize> {
    let tag = w[0];
    let e = if v2 {
        FAST_TAGS[1][tag as usize]
    } else {
        FAST_TAGS[0][tag as usize]
    };
    let k = e & TAG_KIND;
    if k == TAG_CONTROL {
        return None;
    }
    let unmodelled = e & TAG_UNMODELLED != 0;
    let c = (k != 0) as usize;
    let mut i = 1;
    let addr = st.addr[c].wrapping_add(unzigzag(window_varint(w, &mut i)?));
    let size = if tag & TAG_SIZE != 0 {
        let s = window_varint(w, &mut i)?;
        if !(1..=MAX_ACCESS_SIZE as u64).contains(&s) {
            return None;
        }
        s as u32
    } else if st.size[c] == 0 {
        return None;
    } else {
        st.size[c]
    };
    let ip = match (tag >> TAG_IP_SHIFT) & 3 {
        IP_UNKNOWN => 0,
        IP_SAME => st.ip,
        IP_ADDR => addr,
        _ => st.ip.wrapping_add(unzigzag(window_varint(w, &mut i)?)),
    };
    st.addr[c] = addr;
    st.size[c] = size;
    st.ip = ip;
    out.push(Record {
        kind: KINDS[(k & 7) as usize],
        addr,
        size,
        ip,
        thread,
        stack: st.stack,
        unmodelled,
    });
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut pos = 0;
            assert_eq!(get_varint(&b, &mut pos), Some(v));
            assert_eq!(pos, b.len());
            assert!(b.len() <= 10);
        }
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80, 0x80], &mut pos), None);
        let mut pos = 0;
        assert_eq!(get_varint(&[0xff; 10], &mut pos), None);
        for v in [0i64, 1, -1, i64::MAX, i64::MIN, 12345, -12345] {
            assert_eq!(unzigzag(zigzag(v as u64)) as i64, v);
        }
        assert_eq!(zigzag(-1i64 as u64), 1);
        assert_eq!(zigzag(1), 2);
    }
}
