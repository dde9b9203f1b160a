//! Input plumbing: a byte counter on the raw (possibly compressed) stream
//! for progress bars, transparent gzip / zstd decompression chosen from the
//! stream's first bytes, and [`Input`], the buffer the parsers read from.

use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

/// Compression of the raw stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Size of the buffer in front of a decompressor.
const RAW_BUF: usize = 256 * 1024;

/// Counts the bytes read through it into a shared counter, so that the
/// count stays visible after the reader is boxed inside a decompressor.
pub(crate) struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R> Counting<R> {
    pub(crate) fn new(inner: R, count: Arc<AtomicU64>) -> Counting<R> {
        Counting { inner, count }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Reads up to `N` bytes (fewer only at end of stream).
fn peek_prefix<const N: usize>(r: &mut dyn Read) -> io::Result<([u8; N], usize)> {
    let mut prefix = [0u8; N];
    let mut got = 0;
    while got < N {
        match r.read(&mut prefix[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((prefix, got))
}

/// Wraps `raw` in the decompressor its first bytes call for.
pub(crate) fn decompress(
    mut raw: Box<dyn Read + Send>,
) -> io::Result<(Box<dyn Read + Send>, Compression)> {
    let (prefix, got) = peek_prefix::<4>(&mut *raw)?;
    let head = &prefix[..got];
    let whole: Box<dyn Read + Send> = Box::new(io::Cursor::new(prefix).take(got as u64).chain(raw));
    if head.starts_with(&GZIP_MAGIC) {
        let buffered = BufReader::with_capacity(RAW_BUF, whole);
        // Multi-member: `cat a.gz b.gz` and pigz output decode whole.
        Ok((
            Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
            Compression::Gzip,
        ))
    } else if head == ZSTD_MAGIC {
        let buffered = BufReader::with_capacity(RAW_BUF, whole);
        Ok((Box::new(ZstdReader::new(buffered)), Compression::Zstd))
    } else {
        Ok((whole, Compression::None))
    }
}

/// A zstd stream of any number of frames (as `zstd` writes for
/// concatenated inputs, or pzstd with its skippable frames), decoded with
/// ruzstd's frame decoder; each frame's content checksum, when present, is
/// verified.
struct ZstdReader<R: BufRead> {
    source: R,
    frame: FrameDecoder,
    in_frame: bool,
}

impl<R: BufRead> ZstdReader<R> {
    fn new(source: R) -> ZstdReader<R> {
        ZstdReader {
            source,
            frame: FrameDecoder::new(),
            in_frame: false,
        }
    }

    /// Starts the next frame; false at the clean end of the stream.
    fn start_frame(&mut self) -> io::Result<bool> {
        loop {
            if self.source.fill_buf()?.is_empty() {
                return Ok(false);
            }
            match self.frame.init(&mut self.source) {
                Ok(()) => {
                    self.in_frame = true;
                    return Ok(true);
                }
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let skipped =
                        io::copy(&mut (&mut self.source).take(length as u64), &mut io::sink())?;
                    if skipped != length as u64 {
                        return Err(corrupt("truncated skippable frame"));
                    }
                }
                Err(e) => return Err(corrupt(e)),
            }
        }
    }
}

fn corrupt(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("corrupt zstd data: {e}"),
    )
}

impl<R: BufRead> Read for ZstdReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.in_frame {
                while self.frame.can_collect() == 0 && !self.frame.is_finished() {
                    self.frame
                        .decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBlocks(1))
                        .map_err(corrupt)?;
                }
                let n = self.frame.read(buf)?;
                if n > 0 {
                    return Ok(n);
                }
                if self.frame.can_collect() == 0 && self.frame.is_finished() {
                    if let (Some(stored), Some(computed)) = (
                        self.frame.get_checksum_from_data(),
                        self.frame.get_calculated_checksum(),
                    ) {
                        if stored != computed {
                            return Err(corrupt("content checksum mismatch"));
                        }
                    }
                    self.in_frame = false;
                }
                continue;
            }
            if !self.start_frame()? {
                return Ok(0);
            }
        }
    }
}

/// The decompressed stream with the buffer the parsers work in. Valid
/// bytes are `buf[start..end]`; `buf[0]` is at stream offset `base`.
pub(crate) struct Input {
    inner: Box<dyn Read + Send>,
    pub(crate) buf: Vec<u8>,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) eof: bool,
    base: u64,
}

/// Initial buffer size; the text parser grows it only for very long lines.
pub(crate) const INPUT_BUF: usize = 256 * 1024;

impl Input {
    pub(crate) fn new(inner: Box<dyn Read + Send>) -> Input {
        Input {
            inner,
            buf: vec![0; INPUT_BUF],
            start: 0,
            end: 0,
            eof: false,
            base: 0,
        }
    }

    /// Stream offset of `buf[i]`.
    #[inline]
    pub(crate) fn offset_of(&self, i: usize) -> u64 {
        self.base + i as u64
    }

    /// Bytes buffered and not consumed.
    #[inline]
    pub(crate) fn available(&self) -> usize {
        self.end - self.start
    }

    /// Moves the unconsumed bytes to the front of the buffer.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// One read call into the free space (compacting or growing the buffer
    /// first if it is full). Returns the bytes read; 0 means end of stream.
    pub(crate) fn fill(&mut self) -> io::Result<usize> {
        if self.eof {
            return Ok(0);
        }
        if self.start == self.end && self.start > 0 {
            self.compact();
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.compact();
            } else {
                let len = self.buf.len();
                self.buf.resize(len * 2, 0);
            }
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Makes `n` unconsumed bytes available if the stream has them; false if
    /// it ends first (then `available()` tells how many there are).
    pub(crate) fn ensure(&mut self, n: usize) -> io::Result<bool> {
        if self.available() >= n {
            return Ok(true);
        }
        if self.buf.len() - self.start < n {
            self.compact();
            if self.buf.len() < n {
                self.buf.resize(n.next_power_of_two(), 0);
            }
        }
        while self.available() < n {
            if self.fill()? == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Makes room to read more when the buffer holds only a partial line
    /// (compacting, and growing up to `max_len` bytes); false when a single
    /// line fills `max_len`.
    pub(crate) fn make_room(&mut self, max_len: usize) -> bool {
        if self.start > 0 {
            self.compact();
            return true;
        }
        if self.end < self.buf.len() {
            return true;
        }
        if self.buf.len() >= max_len {
            return false;
        }
        let len = (self.buf.len() * 2).min(max_len);
        self.buf.resize(len, 0);
        true
    }

    /// Reads until `n` bytes are buffered or the stream ends (for sniffing).
    pub(crate) fn fill_to(&mut self, n: usize) -> io::Result<()> {
        while self.available() < n && !self.eof {
            if self.end == self.buf.len() && !self.make_room(n.max(INPUT_BUF)) {
                break;
            }
            self.fill()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(data: Vec<u8>) -> (Vec<u8>, Compression) {
        let (mut r, c) = decompress(Box::new(io::Cursor::new(data))).unwrap();
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        (out, c)
    }

    #[test]
    fn plain_short_inputs_pass_through() {
        for data in [&b""[..], b"a", b"\x1f", b"abcd", b"abcdefgh"] {
            let (out, c) = read_all(data.to_vec());
            assert_eq!(out, data);
            assert_eq!(c, Compression::None);
        }
    }

    #[test]
    fn zstd_multi_frame_and_skippable() {
        let a = ruzstd::encoding::compress_to_vec(
            &b"hello "[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let b = ruzstd::encoding::compress_to_vec(
            &b"world"[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let mut data = a.clone();
        // A skippable frame between the two: magic 0x184D2A50, length 3.
        data.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 9, 9, 9]);
        data.extend_from_slice(&b);
        let (out, c) = read_all(data);
        assert_eq!(c, Compression::Zstd);
        assert_eq!(out, b"hello world");
    }

    #[test]
    fn truncated_zstd_is_an_error() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let z = ruzstd::encoding::compress_to_vec(
            &data[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let cut = z[..z.len() / 2].to_vec();
        let (mut r, _) = decompress(Box::new(io::Cursor::new(cut))).unwrap();
        let mut out = Vec::new();
        assert!(r.read_to_end(&mut out).is_err());
    }

    #[test]
    fn input_ensure_and_offsets() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1_000_000).collect();
        let mut inp = Input::new(Box::new(io::Cursor::new(data.clone())));
        assert!(inp.ensure(10).unwrap());
        inp.start += 10;
        assert!(inp.ensure(600_000).unwrap());
        assert_eq!(inp.offset_of(inp.start), 10);
        assert_eq!(inp.buf[inp.start], data[10]);
        inp.start += 600_000;
        assert!(!inp.ensure(500_000).unwrap());
        assert_eq!(inp.available(), 1_000_000 - 600_010);
        assert_eq!(inp.buf[inp.start], data[600_010]);
    }
}
