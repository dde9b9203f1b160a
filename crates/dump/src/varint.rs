//! The dump's bounds-checked section reader over LEB128 numbers (the
//! numbers themselves are coded by `coldcache_fsio::varint`).

use crate::DumpError;
use coldcache_fsio::varint::VarintError;

pub use coldcache_fsio::varint::{put, unzigzag, zigzag};

/// Encodes an index with a sentinel as `index + 1`, 0 for the sentinel.
pub fn opt(i: u32) -> u64 {
    if i == u32::MAX {
        0
    } else {
        u64::from(i) + 1
    }
}

/// The index [`opt`] encoded (`u32::MAX` for 0).
pub fn unopt(v: u32) -> u32 {
    if v == 0 {
        u32::MAX
    } else {
        v - 1
    }
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Reads one section's payload.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    section: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], section: &'static str) -> Self {
        Reader {
            buf,
            pos: 0,
            section,
        }
    }

    fn malformed(&self, what: impl Into<String>) -> DumpError {
        DumpError::Malformed {
            section: self.section,
            what: what.into(),
        }
    }

    /// One number. Inlined with a path for a number of one byte (most of
    /// a record's counters): decoding a dump's records was a call per
    /// number (CPython's 14.7M records: 8% of `record`'s CPU).
    #[inline(always)]
    pub fn get(&mut self) -> Result<u64, DumpError> {
        match self.buf.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => self.get_long(),
        }
    }

    /// [`Reader::get`] of a number of more than one byte, or at the end.
    #[inline(never)]
    fn get_long(&mut self) -> Result<u64, DumpError> {
        coldcache_fsio::varint::get(self.buf, &mut self.pos).map_err(|e| match e {
            VarintError::Truncated => {
                self.malformed(format!("ends inside a number at byte {}", self.pos))
            }
            VarintError::TooLarge => {
                self.malformed(format!("number too large at byte {}", self.pos - 1))
            }
        })
    }

    #[inline]
    pub fn get_u32(&mut self) -> Result<u32, DumpError> {
        let at = self.pos;
        let v = self.get()?;
        u32::try_from(v)
            .map_err(|_| self.malformed(format!("value {v} at byte {at} exceeds 32 bits")))
    }

    /// Reads an element count, refusing counts the remaining bytes cannot
    /// hold (each element takes at least `min_bytes`), so a corrupted count
    /// cannot make the reader reserve huge amounts of memory.
    pub fn count(&mut self, min_bytes: usize) -> Result<usize, DumpError> {
        let at = self.pos;
        let n = self.get()?;
        let left = (self.buf.len() - self.pos) as u64;
        if min_bytes > 0 && n > left / min_bytes as u64 {
            return Err(self.malformed(format!(
                "count {n} at byte {at} is more than the {left} remaining bytes can hold"
            )));
        }
        if min_bytes == 0 && n > 4096 {
            return Err(self.malformed(format!("count {n} at byte {at} is implausibly large")));
        }
        Ok(n as usize)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8], DumpError> {
        let n = self.count(1)?;
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn string(&mut self) -> Result<String, DumpError> {
        let at = self.pos;
        let b = self.bytes()?;
        String::from_utf8(b.to_vec())
            .map_err(|_| self.malformed(format!("string at byte {at} is not UTF-8")))
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn finish(self) -> Result<(), DumpError> {
        if self.pos != self.buf.len() {
            return Err(self.malformed(format!(
                "{} bytes left over after the last entry",
                self.buf.len() - self.pos
            )));
        }
        Ok(())
    }
}
