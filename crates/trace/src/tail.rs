//! A streamed capture trace's skeleton, found from the file's end: a
//! capture writes its trace while it runs, so the dump skeleton (known at
//! the end) is its last attachment, followed by a fixed-size index chunk
//! naming the skeleton chunk's offset, then the end marker
//! (`coldcache_cctrace::stream`). [`skeleton_offset`] reads the index from
//! the file's last [`STREAM_TAIL`] bytes; [`read_skeleton`] then reads the
//! one chunk it names, so a reader of a seekable file has the skeleton
//! before the records without reading the file first. Anything that does
//! not check out (another layout, a cut file, a bad CRC) is `None`: the
//! skeleton is then met where it lies, as before.

use std::io::{Read, Seek, SeekFrom};

use coldcache_cctrace::stream::{ATTACH_SKELETON_INDEX, SKELETON_INDEX_CHUNK, STREAM_TAIL};
use coldcache_cctrace::wire::{get_varint, CHUNK_HEADER, CTRL_ATTACH, MAX_CHUNK};
use coldcache_cctrace::ATTACH_DUMP_SKELETON;

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The skeleton chunk's offset named by `tail`, a file's last
/// [`STREAM_TAIL`] bytes, when they are an index chunk and an end marker.
pub fn skeleton_offset(tail: &[u8]) -> Option<u64> {
    if tail.len() != STREAM_TAIL {
        return None;
    }
    let (index, end) = tail.split_at(SKELETON_INDEX_CHUNK);
    if end[..CHUNK_HEADER].iter().any(|&b| b != 0) {
        return None;
    }
    let payload = &index[CHUNK_HEADER..];
    let ok = le32(&index[0..4]) as usize == payload.len()
        && le32(&index[4..8]) == 0
        && le32(&index[8..12]) == crc32fast::hash(payload)
        && payload[..3] == [CTRL_ATTACH, ATTACH_SKELETON_INDEX as u8, 8];
    ok.then(|| u64::from_le_bytes(payload[3..11].try_into().unwrap_or([0; 8])))
}

/// The dump skeleton of the streamed trace `file` of `len` bytes, read
/// from the chunk its tail's index names; the file position is left
/// anywhere.
pub fn read_skeleton(file: &mut (impl Read + Seek), len: u64) -> Option<Vec<u8>> {
    if len < STREAM_TAIL as u64 {
        return None;
    }
    let mut tail = [0u8; STREAM_TAIL];
    file.seek(SeekFrom::Start(len - STREAM_TAIL as u64)).ok()?;
    file.read_exact(&mut tail).ok()?;
    let at = skeleton_offset(&tail)?;
    let mut head = [0u8; CHUNK_HEADER];
    file.seek(SeekFrom::Start(at)).ok()?;
    file.read_exact(&mut head).ok()?;
    let n = le32(&head[0..4]) as usize;
    if n == 0 || n > MAX_CHUNK || at + (CHUNK_HEADER + n) as u64 > len {
        return None;
    }
    let mut payload = vec![0u8; n];
    file.read_exact(&mut payload).ok()?;
    if le32(&head[8..12]) != crc32fast::hash(&payload) || payload[0] != CTRL_ATTACH {
        return None;
    }
    let mut pos = 1;
    let kind = get_varint(&payload, &mut pos)?;
    let size = usize::try_from(get_varint(&payload, &mut pos)?).ok()?;
    if kind != ATTACH_DUMP_SKELETON || size > payload.len() - pos {
        return None;
    }
    payload.truncate(pos + size);
    payload.drain(..pos);
    Some(payload)
}
