//! LEB128 variable-length integers and zigzag signed mapping, as the dump
//! (`docs/dump-format.md`), cctrace (`docs/trace-format.md`) and zones
//! (`docs/zones.md`) formats write them: seven bits a byte, low group
//! first, the high bit set on every byte but the last; at most 10 bytes,
//! and the tenth may only hold the 64th bit.
//!
//! Pure and allocation-free apart from the caller's output vector; the
//! readers are `#[inline]` because the trace decoder calls them per field.

/// Why [`get`] read no number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarintError {
    /// The input ends inside the number.
    Truncated,
    /// The number does not fit in 64 bits (a tenth byte above 1, or more
    /// than ten bytes).
    TooLarge,
}

impl std::fmt::Display for VarintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VarintError::Truncated => "ends inside a number",
            VarintError::TooLarge => "number larger than 64 bits",
        })
    }
}

impl std::error::Error for VarintError {}

/// Largest encoded length of a `u64`.
pub const MAX_LEN: usize = 10;

/// Appends `v` as unsigned LEB128.
#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads an unsigned LEB128 number at `*pos` and advances `*pos` past it.
/// On error `*pos` is left after the last byte looked at.
#[inline(always)]
pub fn get(buf: &[u8], pos: &mut usize) -> Result<u64, VarintError> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let Some(&b) = buf.get(*pos) else {
            return Err(VarintError::Truncated);
        };
        *pos += 1;
        if shift == 63 && b > 1 {
            return Err(VarintError::TooLarge);
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
        shift += 7;
        // Never true (the tenth byte ended the number or was refused
        // above), but it bounds the loop for the optimizer: without it,
        // and without `inline(always)`, cctrace decoding was 10–20 %
        // slower than with the trace crate's own copy.
        if shift > 63 {
            return Err(VarintError::TooLarge);
        }
    }
}

/// Maps a signed value to an unsigned one with small magnitudes small
/// (0, -1, 1, -2, … → 0, 1, 2, 3, …).
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings from the LEB128 definition (DWARF 5, section 7.6, and
    /// its Figure 22 examples), written out by hand.
    #[test]
    fn encodings_match_the_dwarf_examples() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (2, &[0x02]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (129, &[0x81, 0x01]),
            (130, &[0x82, 0x01]),
            (12857, &[0xb9, 0x64]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for &(v, bytes) in cases {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!(b, bytes, "{v}");
            let mut pos = 0;
            assert_eq!(get(&b, &mut pos), Ok(v));
            assert_eq!(pos, b.len());
        }
    }

    #[test]
    fn truncated_and_oversized_numbers_are_refused() {
        let mut pos = 0;
        assert_eq!(get(&[0x80, 0x80], &mut pos), Err(VarintError::Truncated));
        let mut pos = 0;
        assert_eq!(get(&[], &mut pos), Err(VarintError::Truncated));
        // Ten bytes whose last holds bit 65: the zones reader used to drop
        // it silently; every reader now refuses it.
        let mut b = [0xffu8; 10];
        b[9] = 0x02;
        let mut pos = 0;
        assert_eq!(get(&b, &mut pos), Err(VarintError::TooLarge));
        let mut pos = 0;
        assert_eq!(get(&[0xff; 11], &mut pos), Err(VarintError::TooLarge));
        // A redundant but in-range encoding of 1 still reads.
        let mut pos = 0;
        assert_eq!(get(&[0x81, 0x80, 0x00], &mut pos), Ok(1));
    }

    #[test]
    fn zigzag_matches_the_protobuf_table() {
        // The table of the Protocol Buffers encoding guide.
        for (s, u) in [
            (0i64, 0u64),
            (-1, 1),
            (1, 2),
            (-2, 3),
            (2147483647, 4294967294),
        ] {
            assert_eq!(zigzag(s), u);
            assert_eq!(unzigzag(u), s);
        }
        assert_eq!(zigzag(i64::MIN), u64::MAX);
        assert_eq!(unzigzag(u64::MAX), i64::MIN);
    }
}
