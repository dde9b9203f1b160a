//! Text formats: Valgrind lackey (`--trace-mem=yes`, also CS:APP Cache Lab)
//! and Dinero "din". Lines are parsed in place in the input buffer, byte by
//! byte, with table-driven hex digits: no allocation per line.
//!
//! Lackey lines: `I  0400d7d4,8`, ` L 7ff0005c8,8`, ` S …`, ` M …`. Any
//! leading blanks, one or more blanks after the kind letter, blanks around
//! the ',' and at the end of the line (and a '\r' before the '\n') are
//! accepted; the fields themselves must be exact. Valgrind's own lines
//! (`==PID== …`, `--PID-- …`, `**PID** …`) and blank lines are skipped.
//!
//! Din lines: `LABEL ADDRESS [SIZE]`, label 0 read, 1 write, 2 instruction
//! fetch, 4 flush (label 3, an access of unknown type, is rejected); hex
//! address with or without `0x`; decimal size, 4 when absent.

use crate::{Format, Record, RecordKind, MAX_ACCESS_SIZE};
use coldcache_cctrace::{show, ParseError};

/// Longest line the parser buffers before declaring the input not a text
/// trace.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// Size assumed for a din record without a size field (Dinero IV assumes 4
/// for the traditional din format).
pub(crate) const DIN_DEFAULT_SIZE: u32 = 4;

const NOT_HEX: u8 = 0xff;

static HEX: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Outcome of parsing one line that starts at `buf[p]`.
pub(crate) enum Line {
    /// A record; the next line starts at the index given.
    Record(Record, usize),
    /// A banner or blank line.
    Skip(usize),
    /// A malformed line.
    Bad(ParseError, usize),
}

#[inline]
fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Index just past the '\n' ending the line that contains `buf[p]`.
/// `buf` must end with '\n'.
#[inline]
pub(crate) fn next_line(buf: &[u8], p: usize) -> usize {
    match buf[p..].iter().position(|&b| b == b'\n') {
        Some(i) => p + i + 1,
        None => buf.len(),
    }
}

/// The line at `p` without its line terminator.
pub(crate) fn line_text(buf: &[u8], p: usize) -> &[u8] {
    let end = next_line(buf, p);
    let mut line = &buf[p..end];
    while let [rest @ .., b'\n' | b'\r'] = line {
        line = rest;
    }
    line
}

/// True for lines Valgrind itself writes: `==PID==`, `--PID--`, `**PID**`.
#[inline]
pub(crate) fn is_valgrind_line(buf: &[u8], p: usize) -> bool {
    match buf[p] {
        b'=' => buf.get(p + 1) == Some(&b'='),
        c @ (b'-' | b'*') => {
            buf.get(p + 1) == Some(&c) && buf.get(p + 2).is_some_and(|d| d.is_ascii_digit())
        }
        _ => false,
    }
}

/// True if the line at `p` is empty or blanks only.
pub(crate) fn is_blank_line(buf: &[u8], p: usize) -> bool {
    line_text(buf, p).iter().all(|&b| is_blank(b) || b == b'\r')
}

/// The token starting at `p`: bytes up to a blank, ',' or line end.
fn token(buf: &[u8], p: usize) -> &[u8] {
    let len = buf[p..]
        .iter()
        .position(|&b| is_blank(b) || b == b',' || b == b'\n' || b == b'\r')
        .unwrap_or(buf.len() - p);
    &buf[p..p + len]
}

/// Parses a hex address at `p` (optional `0x`). Returns the value and the
/// index after it; the caller checks what follows.
#[inline]
fn parse_hex(buf: &[u8], p: usize, kind: &[u8]) -> Result<(u64, usize), ParseError> {
    let mut i = p;
    if buf[i] == b'0'
        && (buf[i + 1] == b'x' || buf[i + 1] == b'X')
        && HEX[buf[i + 2] as usize] != NOT_HEX
    {
        i += 2;
    }
    let first = i;
    let mut v: u64 = 0;
    loop {
        let d = HEX[buf[i] as usize];
        if d == NOT_HEX {
            break;
        }
        if v >> 60 != 0 {
            return Err(ParseError::AddressOverflow {
                token: show(token(buf, p)),
            });
        }
        v = (v << 4) | d as u64;
        i += 1;
    }
    if i == first {
        let b = buf[i];
        return Err(if b == b'\n' || b == b'\r' || b == b',' || is_blank(b) {
            ParseError::MissingAddress { kind: show(kind) }
        } else {
            ParseError::BadHexDigit {
                byte: b,
                token: show(token(buf, p)),
            }
        });
    }
    Ok((v, i))
}

/// Parses a decimal size at `p`, then blanks up to the end of the line.
/// Returns the size and the index after the line.
#[inline]
fn parse_size_to_eol(buf: &[u8], p: usize) -> Result<(u32, usize), ParseError> {
    let mut i = p;
    let mut v: u64 = 0;
    while buf[i].is_ascii_digit() {
        v = (v * 10 + (buf[i] - b'0') as u64).min(u64::MAX / 100);
        i += 1;
    }
    if i == p {
        let b = buf[i];
        return Err(if b == b'\n' || b == b'\r' {
            ParseError::MissingSize
        } else {
            ParseError::BadSize {
                token: show(token(buf, p)),
            }
        });
    }
    if !(is_blank(buf[i]) || buf[i] == b'\n' || buf[i] == b'\r') {
        return Err(ParseError::BadSize {
            token: show(token(buf, p)),
        });
    }
    let end = i;
    while is_blank(buf[i]) || buf[i] == b'\r' {
        i += 1;
    }
    if buf[i] != b'\n' {
        return Err(ParseError::TrailingText {
            text: show(line_text(buf, i)),
        });
    }
    if v == 0 {
        return Err(ParseError::ZeroSize);
    }
    if v > MAX_ACCESS_SIZE as u64 {
        return Err(ParseError::SizeTooLarge {
            token: show(&buf[p..end]),
        });
    }
    Ok((v as u32, i + 1))
}

/// Parser state of a text trace.
pub(crate) struct TextParser {
    pub(crate) format: Format,
    /// Address of the last lackey `I` record: the ip of the data accesses
    /// that follow it (lackey prints each instruction before its accesses).
    last_instr: u64,
    /// Parse with [`TextParser::parse_line`] only, never the fast path
    /// (tests and benchmarks compare the two).
    pub(crate) reference: bool,
}

impl TextParser {
    pub(crate) fn new(format: Format) -> TextParser {
        debug_assert!(format != Format::Binary);
        TextParser {
            format,
            last_instr: 0,
            reference: false,
        }
    }

    /// True when [`TextParser::fast_lackey`] may be tried first.
    #[inline]
    pub(crate) fn fast(&self) -> bool {
        self.format == Format::Lackey && !self.reference
    }

    /// The fast path of lackey text: a line exactly as Valgrind writes it
    /// (`I  HEX,SIZE` or ` K HEX,SIZE` with K one of `L`, `S`, `M`; 1 to 16
    /// hex digits, 1 to 7 decimal digits, '\n' right after) gives its
    /// record and the start of the next line. Anything else — banners,
    /// blanks, '\r', other spacing, `0x`, a size of 0 or over the limit,
    /// a malformed line — gives None and leaves the state alone, for
    /// [`TextParser::parse_line`] to parse or report. `buf` ends with
    /// '\n', which stops every scan.
    #[inline(always)]
    pub(crate) fn fast_lackey(&mut self, buf: &[u8], p: usize) -> Option<(Record, usize)> {
        let head = buf.get(p..p + 3)?;
        let kind = match (head[0], head[1], head[2]) {
            (b'I', b' ', b' ') => RecordKind::Instr,
            (b' ', b'L', b' ') => RecordKind::Load,
            (b' ', b'S', b' ') => RecordKind::Store,
            (b' ', b'M', b' ') => RecordKind::Modify,
            _ => return None,
        };
        let start = p + 3;
        let mut i = start;
        let mut addr = 0u64;
        loop {
            let d = HEX[buf[i] as usize];
            if d == NOT_HEX {
                break;
            }
            addr = (addr << 4) | u64::from(d);
            i += 1;
        }
        // Over 16 digits the shifts lost bits: the checked path decides.
        if i == start || i - start > 16 || buf[i] != b',' {
            return None;
        }
        i += 1;
        let start = i;
        let mut size = 0u32;
        loop {
            let d = buf[i].wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            size = size.wrapping_mul(10).wrapping_add(u32::from(d));
            i += 1;
        }
        if i == start || i - start > 7 || buf[i] != b'\n' || !(1..=MAX_ACCESS_SIZE).contains(&size)
        {
            return None;
        }
        Some((self.record(kind, addr, size), i + 1))
    }

    /// The record of a lackey line: a data access takes the ip of the
    /// last instruction line (lackey prints each instruction first).
    #[inline(always)]
    fn record(&mut self, kind: RecordKind, addr: u64, size: u32) -> Record {
        let ip = if kind == RecordKind::Instr {
            self.last_instr = addr;
            addr
        } else {
            self.last_instr
        };
        Record {
            kind,
            addr,
            size,
            ip,
            thread: 0,
            stack: 0,
            unmodelled: false,
        }
    }

    /// Parses the line at `buf[p]`; `buf` ends with '\n'.
    #[inline]
    pub(crate) fn parse_line(&mut self, buf: &[u8], p: usize) -> Line {
        let r = match self.format {
            Format::Lackey => self.lackey(buf, p),
            _ => dinero(buf, p),
        };
        match r {
            Ok(line) => line,
            Err(e) => {
                let next = next_line(buf, p);
                let line = &buf[p..next];
                if line.contains(&0) || std::str::from_utf8(line).is_err() {
                    Line::Bad(ParseError::BinaryData, next)
                } else {
                    Line::Bad(e, next)
                }
            }
        }
    }

    #[inline]
    fn lackey(&mut self, buf: &[u8], p: usize) -> Result<Line, ParseError> {
        let mut i = p;
        while is_blank(buf[i]) {
            i += 1;
        }
        let kind = match buf[i] {
            b'I' => RecordKind::Instr,
            b'L' => RecordKind::Load,
            b'S' => RecordKind::Store,
            b'M' => RecordKind::Modify,
            b'\n' => return Ok(Line::Skip(i + 1)),
            _ if is_valgrind_line(buf, p) || is_blank_line(buf, p) => {
                return Ok(Line::Skip(next_line(buf, p)))
            }
            _ => return Err(unknown_lackey(buf, i)),
        };
        let k = i;
        i += 1;
        if !is_blank(buf[i]) {
            if buf[i] == b'\n' || buf[i] == b'\r' {
                return Err(ParseError::MissingAddress {
                    kind: show(&buf[k..i]),
                });
            }
            return Err(unknown_lackey(buf, k));
        }
        while is_blank(buf[i]) {
            i += 1;
        }
        let a_start = i;
        let (addr, a_end) = parse_hex(buf, i, &buf[k..k + 1])?;
        let mut i = a_end;
        let b = buf[i];
        if !(b == b',' || is_blank(b) || b == b'\n' || b == b'\r') {
            return Err(ParseError::BadHexDigit {
                byte: b,
                token: show(token(buf, a_start)),
            });
        }
        while is_blank(buf[i]) {
            i += 1;
        }
        if buf[i] != b',' {
            return Err(ParseError::MissingComma {
                addr: show(&buf[a_start..a_end]),
            });
        }
        i += 1;
        while is_blank(buf[i]) {
            i += 1;
        }
        let (size, next) = parse_size_to_eol(buf, i)?;
        Ok(Line::Record(self.record(kind, addr, size), next))
    }
}

fn unknown_lackey(buf: &[u8], i: usize) -> ParseError {
    ParseError::UnknownKind {
        found: show(token(buf, i)),
        expected: "I, L, S or M",
    }
}

#[inline]
fn dinero(buf: &[u8], p: usize) -> Result<Line, ParseError> {
    const EXPECTED: &str = "a din label 0, 1, 2 or 4";
    let mut i = p;
    while is_blank(buf[i]) {
        i += 1;
    }
    let label = buf[i];
    if label == b'\n' {
        return Ok(Line::Skip(i + 1));
    }
    if !label.is_ascii_digit() {
        if is_valgrind_line(buf, p) || is_blank_line(buf, p) {
            return Ok(Line::Skip(next_line(buf, p)));
        }
        return Err(ParseError::UnknownKind {
            found: show(token(buf, i)),
            expected: EXPECTED,
        });
    }
    let k = i;
    i += 1;
    if !is_blank(buf[i]) {
        if buf[i] == b'\n' || buf[i] == b'\r' {
            return Err(ParseError::MissingAddress {
                kind: show(&buf[k..i]),
            });
        }
        return Err(ParseError::UnknownKind {
            found: show(token(buf, k)),
            expected: EXPECTED,
        });
    }
    let kind = match label {
        b'0' => RecordKind::Load,
        b'1' => RecordKind::Store,
        b'2' => RecordKind::Instr,
        b'4' => RecordKind::Flush,
        b'3' => return Err(ParseError::DineroUnknownAccess),
        _ => {
            return Err(ParseError::UnknownKind {
                found: show(&buf[k..i]),
                expected: EXPECTED,
            })
        }
    };
    while is_blank(buf[i]) {
        i += 1;
    }
    let (addr, a_end) = parse_hex(buf, i, &buf[k..k + 1])?;
    let a_start = i;
    i = a_end;
    let b = buf[i];
    if !(is_blank(b) || b == b'\n' || b == b'\r') {
        return Err(ParseError::BadHexDigit {
            byte: b,
            token: show(token(buf, a_start)),
        });
    }
    while is_blank(buf[i]) || buf[i] == b'\r' {
        i += 1;
    }
    let (size, next) = if buf[i] == b'\n' {
        (DIN_DEFAULT_SIZE, i + 1)
    } else {
        parse_size_to_eol(buf, i)?
    };
    let ip = if kind == RecordKind::Instr { addr } else { 0 };
    Ok(Line::Record(
        Record {
            kind,
            addr,
            size,
            ip,
            thread: 0,
            stack: 0,
            unmodelled: false,
        },
        next,
    ))
}

/// Guesses the text format from the first record line at `buf[p]`.
pub(crate) fn guess_format(buf: &[u8], p: usize) -> Option<Format> {
    let line = line_text(buf, p);
    let first = line.iter().position(|&b| !is_blank(b))?;
    let rest = &line[first..];
    let second_blank = rest.get(1).is_some_and(|&b| is_blank(b));
    match rest[0] {
        b'I' | b'L' | b'S' | b'M' if second_blank => Some(Format::Lackey),
        b'0'..=b'9' if second_blank => Some(Format::Dinero),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(format: Format, line: &str) -> Result<Option<Record>, ParseError> {
        let mut p = TextParser::new(format);
        let mut buf = line.as_bytes().to_vec();
        buf.push(b'\n');
        match p.parse_line(&buf, 0) {
            Line::Record(r, next) => {
                assert_eq!(next, buf.len());
                Ok(Some(r))
            }
            Line::Skip(next) => {
                assert_eq!(next, buf.len());
                Ok(None)
            }
            Line::Bad(e, next) => {
                assert_eq!(next, buf.len());
                Err(e)
            }
        }
    }

    fn lackey(line: &str) -> Result<Option<Record>, ParseError> {
        parse(Format::Lackey, line)
    }

    fn din(line: &str) -> Result<Option<Record>, ParseError> {
        parse(Format::Dinero, line)
    }

    #[test]
    fn lackey_records() {
        let r = lackey("I  0400d7d4,8").unwrap().unwrap();
        assert_eq!(
            r,
            Record::new(RecordKind::Instr, 0x400d7d4, 8).with_ip(0x400d7d4)
        );
        let r = lackey(" L 7ff0005c8,8").unwrap().unwrap();
        assert_eq!(r, Record::new(RecordKind::Load, 0x7ff0005c8, 8));
        let r = lackey(" S 1fff000778,8").unwrap().unwrap();
        assert_eq!(r.kind, RecordKind::Store);
        let r = lackey(" M 0421c7f0,4").unwrap().unwrap();
        assert_eq!(r, Record::new(RecordKind::Modify, 0x421c7f0, 4));
        // Tolerated spacing, CRLF, upper-case hex, 16 digits.
        let r = lackey("\t L\t10 , 4 \r").unwrap().unwrap();
        assert_eq!(r, Record::new(RecordKind::Load, 0x10, 4));
        let r = lackey(" L FFFFFFFFFFFFFFFF,1").unwrap().unwrap();
        assert_eq!(r.addr, u64::MAX);
        let r = lackey(" L 0000000000000000000010,1").unwrap().unwrap();
        assert_eq!(r.addr, 16);
        assert_eq!(lackey(" L 10,1048576").unwrap().unwrap().size, 1 << 20);
    }

    #[test]
    fn lackey_ip_follows_instr() {
        let mut p = TextParser::new(Format::Lackey);
        let buf = b" L 8,4\nI  400,3\n S 10,8\n";
        let Line::Record(a, n) = p.parse_line(buf, 0) else {
            panic!()
        };
        let Line::Record(b, n) = p.parse_line(buf, n) else {
            panic!()
        };
        let Line::Record(c, _) = p.parse_line(buf, n) else {
            panic!()
        };
        assert_eq!((a.ip, b.ip, c.ip), (0, 0x400, 0x400));
    }

    #[test]
    fn lackey_skips() {
        for l in [
            "",
            "   ",
            "\r",
            "==12345== Lackey, an example Valgrind tool",
            "==12345== ",
            "--12345-- WARNING: something",
            "**12345** internal",
        ] {
            assert_eq!(lackey(l), Ok(None), "{l:?}");
        }
    }

    #[test]
    fn lackey_errors() {
        let msg = |l: &str| lackey(l).unwrap_err().to_string();
        assert_eq!(msg(" L 7ff0g,8"), "bad hex digit 'g' in address \"7ff0g\"");
        assert_eq!(
            msg(" X 10,4"),
            "unknown record kind 'X' (expected I, L, S or M)"
        );
        assert_eq!(
            msg(" LX 10,4"),
            "unknown record kind 'LX' (expected I, L, S or M)"
        );
        assert_eq!(
            msg("hello"),
            "unknown record kind 'hello' (expected I, L, S or M)"
        );
        assert_eq!(msg(" L 10,"), "truncated record: missing size after ','");
        assert_eq!(
            msg(" L 10"),
            "truncated record: missing ',' and size after address \"10\""
        );
        assert_eq!(
            msg(" L 10 4"),
            "truncated record: missing ',' and size after address \"10\""
        );
        assert_eq!(msg(" L"), "truncated record: missing address after 'L'");
        assert_eq!(msg(" L  "), "truncated record: missing address after 'L'");
        assert_eq!(msg(" L ,4"), "truncated record: missing address after 'L'");
        assert_eq!(msg(" L 10,x"), "bad size \"x\" (expected a decimal number)");
        assert_eq!(
            msg(" L 10,8x"),
            "bad size \"8x\" (expected a decimal number)"
        );
        assert_eq!(
            msg(" L 10,-8"),
            "bad size \"-8\" (expected a decimal number)"
        );
        assert_eq!(msg(" L 10,0"), "size 0 is not allowed");
        assert_eq!(
            msg(" L 10,1048577"),
            "size 1048577 is too large (at most 1048576 bytes)"
        );
        assert!(msg(" L 10,99999999999999999999999999").contains("too large"));
        assert_eq!(
            msg(" L 10,4 extra"),
            "unexpected \"extra\" after the record"
        );
        assert_eq!(
            msg(" L 10000000000000000,4"),
            "address \"10000000000000000\" does not fit in 64 bits (more than 16 hex digits)"
        );
        assert_eq!(
            msg(" L 1\0,4"),
            "binary data (NUL or non-UTF-8 bytes) in a text trace"
        );
        assert_eq!(
            msg(" L 10,4 \u{e9}"),
            "unexpected \"\\xc3\\xa9\" after the record"
        );
    }

    #[test]
    fn din_records() {
        assert_eq!(
            din("0 1000").unwrap().unwrap(),
            Record::new(RecordKind::Load, 0x1000, 4)
        );
        assert_eq!(
            din("1 0x70f60890 8").unwrap().unwrap(),
            Record::new(RecordKind::Store, 0x70f60890, 8)
        );
        assert_eq!(
            din("2 2cb5").unwrap().unwrap(),
            Record::new(RecordKind::Instr, 0x2cb5, 4).with_ip(0x2cb5)
        );
        assert_eq!(din("4 0").unwrap().unwrap().kind, RecordKind::Flush);
        assert_eq!(din("  0\t1000 \t16\r").unwrap().unwrap().size, 16);
        assert_eq!(din(""), Ok(None));
    }

    #[test]
    fn din_errors() {
        let msg = |l: &str| din(l).unwrap_err().to_string();
        assert!(msg("3 1000").starts_with("unknown record kind '3'"));
        assert_eq!(
            msg("7 1000"),
            "unknown record kind '7' (expected a din label 0, 1, 2 or 4)"
        );
        assert_eq!(
            msg("r 1000"),
            "unknown record kind 'r' (expected a din label 0, 1, 2 or 4)"
        );
        assert_eq!(
            msg("10 1000"),
            "unknown record kind '10' (expected a din label 0, 1, 2 or 4)"
        );
        assert_eq!(msg("0"), "truncated record: missing address after '0'");
        assert_eq!(msg("0 10g0"), "bad hex digit 'g' in address \"10g0\"");
        assert_eq!(msg("0 1000 4 x"), "unexpected \"x\" after the record");
        assert_eq!(
            msg("0 1000 four"),
            "bad size \"four\" (expected a decimal number)"
        );
        assert_eq!(msg("0 1000 0"), "size 0 is not allowed");
    }

    #[test]
    fn guesses() {
        assert_eq!(guess_format(b" L 10,4\n", 0), Some(Format::Lackey));
        assert_eq!(guess_format(b"I  10,4\n", 0), Some(Format::Lackey));
        assert_eq!(guess_format(b"0 1000\n", 0), Some(Format::Dinero));
        assert_eq!(guess_format(b"hello\n", 0), None);
        assert_eq!(guess_format(b"L\n", 0), None);
    }
}
