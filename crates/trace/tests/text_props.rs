//! Property tests of the text parsers: well-formed lines written from
//! random records (with random but legal spacing) read back as those
//! records; junk never panics, every error names the input, and the fast
//! lackey path agrees with the reference parser on it.

mod common;

use coldcache_trace::{Format, Record, RecordKind, MAX_ACCESS_SIZE};
use proptest::prelude::*;

fn blanks(min: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop_oneof![Just(' '), Just('\t')], min..min + 3)
        .prop_map(|v| v.into_iter().collect())
}

fn lackey_line() -> impl Strategy<Value = (Record, String)> {
    (
        0..4usize,
        any::<u64>(),
        1..=MAX_ACCESS_SIZE,
        blanks(0),
        blanks(1),
        blanks(0),
        blanks(0),
        blanks(0),
        any::<bool>(),
        any::<bool>(),
        0..3usize,
    )
        .prop_map(|(k, addr, size, b0, b1, b2, b3, b4, upper, crlf, zeros)| {
            let (letter, kind) = [
                ('I', RecordKind::Instr),
                ('L', RecordKind::Load),
                ('S', RecordKind::Store),
                ('M', RecordKind::Modify),
            ][k];
            let hex = if upper {
                format!("{addr:X}")
            } else {
                format!("{addr:x}")
            };
            let pad = "0".repeat(zeros);
            let end = if crlf { "\r\n" } else { "\n" };
            let line = format!("{b0}{letter}{b1}{pad}{hex}{b2},{b3}{size}{b4}{end}");
            (Record::new(kind, addr, size), line)
        })
}

fn din_line() -> impl Strategy<Value = (Record, String)> {
    (
        0..4usize,
        any::<u64>(),
        prop::option::of(1..=MAX_ACCESS_SIZE),
        blanks(0),
        blanks(1),
        blanks(1),
        any::<bool>(),
    )
        .prop_map(|(k, addr, size, b0, b1, b2, prefix)| {
            let (label, kind) = [
                ('0', RecordKind::Load),
                ('1', RecordKind::Store),
                ('2', RecordKind::Instr),
                ('4', RecordKind::Flush),
            ][k];
            let p = if prefix { "0x" } else { "" };
            let line = match size {
                Some(s) => format!("{b0}{label}{b1}{p}{addr:x}{b2}{s}\n"),
                None => format!("{b0}{label}{b1}{p}{addr:x}\n"),
            };
            let ip = if kind == RecordKind::Instr { addr } else { 0 };
            (Record::new(kind, addr, size.unwrap_or(4)).with_ip(ip), line)
        })
}

/// Pieces of text trace lines: fragments (kind letters, din labels, hex
/// with and without `0x`, 16 and 17 digits, sizes 0, at and over the
/// limit, separators, banners, line ends) and whole lines of both formats.
#[rustfmt::skip]
const PIECES: &[&str] = &[
    "I  ", " L ", " S ", " M ", "I", "L", "S", "M", "X", "0 ", "1 ", "2 ", "3 ", "4 ", "7 ",
    "0x", "0X", "ff", "4f9", "10", "00000000000000000", "ffffffffffffffff", "1ffffffffffffffff",
    "g", ",", ",4", ",8", ",0", ",1048576", ",1048577", "99999999999999999999", "-", "*", "=",
    "#", " ", "\t", "\n", "\n", "\n", "\r\n", "\r", "==1== x\n", "--1-- y\n", "**1** z\n",
    "\u{e9}", "I  4f9,4\n", " L ff,8\n", " S 10 , 1\n", " M 0x10,2\n", "I  0400d7d4,3\n",
    "0 10 4\n", "1 0x4f9\n", "2 ff 8\n", "4 10\n", "0 ffffffffffffffff 1048576\n",
];

fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(PIECES).prop_map(|s| s.as_bytes().to_vec())
}

/// A line of either format with each field right or wrong: kind or label,
/// address, separator, size, line end (none: it runs into the next).
fn junk_line() -> impl Strategy<Value = Vec<u8>> {
    #[rustfmt::skip]
    let fields: [&[&str]; 5] = [
        &["I  ", " L ", " S ", " M ", "I ", "\tL\t", "0 ", "1 ", "2 ", "4 ", "3 ", "X ", "", "==1== "],
        &["4f9", "ff", "0x10", "0400d7d4", "ffffffffffffffff", "1ffffffffffffffff",
          "00000000000000000010", "g1", ""],
        &[",", " , ", " ", ";", ""],
        &["4", "8", "0", "1048576", "1048577", "99999999999999999999", "x", "", "1 extra"],
        &["\n", "\n", "\r\n", " \n", ""],
    ];
    fields
        .map(prop::sample::select)
        .prop_map(|parts| parts.concat().into_bytes())
}

/// A byte that makes text binary (NUL, invalid UTF-8).
fn binary_byte() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(vec![0u8, 0x80, 0xc3, 0xff]).prop_map(|b| vec![b])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn lackey_lines_read_back(lines in prop::collection::vec(lackey_line(), 1..200)) {
        let text: String = lines.iter().map(|(_, l)| l.as_str()).collect();
        let mut r = common::reader("p.trace", text, Some(Format::Lackey)).unwrap();
        let got = common::read_all(&mut r, 64).unwrap();
        // Expected ip: the address of the last instruction before.
        let mut last_instr = 0;
        let want: Vec<Record> = lines
            .iter()
            .map(|(rec, _)| {
                if rec.kind == RecordKind::Instr {
                    last_instr = rec.addr;
                }
                rec.with_ip(last_instr)
            })
            .collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn din_lines_read_back(lines in prop::collection::vec(din_line(), 1..200)) {
        let text: String = lines.iter().map(|(_, l)| l.as_str()).collect();
        let mut r = common::reader("p.din", text, None).unwrap();
        prop_assert_eq!(r.format(), Format::Dinero);
        let got = common::read_all(&mut r, 64).unwrap();
        let want: Vec<Record> = lines.iter().map(|(rec, _)| *rec).collect();
        prop_assert_eq!(got, want);
    }

    /// Junk made of lines with each field right or wrong and of pieces of
    /// lines (kind letters, labels, hex, sizes at and over the limits,
    /// separators, banners, line ends),
    /// sometimes with a NUL or invalid UTF-8 byte, in either format or
    /// detected, with and without `--skip-bad`: no panic, every error
    /// names the input, every record's size is legal, and the fast lackey
    /// path gives what the reference parser gives.
    #[test]
    fn arbitrary_bytes_never_panic(
        data in prop_oneof![
            4 => prop::collection::vec(prop_oneof![2 => junk_line(), 1 => piece()], 0..60),
            1 => prop::collection::vec(
                prop_oneof![10 => junk_line(), 10 => piece(), 1 => binary_byte()],
                0..60,
            ),
        ]
        .prop_map(|pieces| pieces.concat()),
        format in prop::option::of(prop_oneof![Just(Format::Lackey), Just(Format::Dinero)]),
        skip in any::<bool>(),
    ) {
        let read = |reference: bool| -> Result<(Vec<Record>, Option<String>, u64), TestCaseError> {
            let mut r = match common::reader("a.trace", data.clone(), format) {
                Err(e) => {
                    prop_assert!(e.to_string().starts_with("a.trace"), "{}", e);
                    return Ok((Vec::new(), Some(e.to_string()), 0));
                }
                Ok(r) => r,
            };
            r.set_skip_bad(skip);
            r.set_reference_decoding(reference);
            let (mut all, mut buf) = (Vec::new(), Vec::new());
            let error = loop {
                match r.read_batch(&mut buf, 7) {
                    Ok(0) => break None,
                    Ok(_) => {
                        for rec in &buf {
                            prop_assert!(rec.size >= 1 && rec.size <= MAX_ACCESS_SIZE);
                        }
                        all.extend_from_slice(&buf);
                    }
                    Err(e) => {
                        prop_assert!(e.to_string().starts_with("a.trace"), "{}", e);
                        break Some(e.to_string());
                    }
                }
            };
            Ok((all, error, r.skipped()))
        };
        prop_assert_eq!(read(false)?, read(true)?);
    }
}
