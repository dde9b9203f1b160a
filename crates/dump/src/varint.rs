//! LEB128 variable-length integers and a bounds-checked section reader.

use crate::DumpError;

/// Appends `v` as unsigned LEB128.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Maps a signed value to an unsigned one with small magnitudes small.
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
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

    pub fn get(&mut self) -> Result<u64, DumpError> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(self.malformed(format!("ends inside a number at byte {}", self.pos)));
            };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(self.malformed(format!("number too large at byte {}", self.pos - 1)));
            }
            v |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(self.malformed(format!("number too long at byte {}", self.pos - 1)));
            }
        }
    }

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
