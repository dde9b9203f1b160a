//! Property tests of the text parsers: well-formed lines written from
//! random records (with random but legal spacing) read back as those
//! records; arbitrary bytes never panic and every error names the input.

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

    #[test]
    fn arbitrary_bytes_never_panic(
        data in prop::collection::vec(
            prop::sample::select(&b" \t\n\r,0x2ILSM=-*4f9g\0\xc3\xa9\xff\x80#"[..]),
            0..400,
        ),
        format in prop::option::of(prop_oneof![Just(Format::Lackey), Just(Format::Dinero)]),
        skip in any::<bool>(),
    ) {
        match common::reader("a.trace", data, format) {
            Err(e) => prop_assert!(e.to_string().starts_with("a.trace"), "{}", e),
            Ok(mut r) => {
                r.set_skip_bad(skip);
                let mut buf = Vec::new();
                loop {
                    match r.read_batch(&mut buf, 7) {
                        Ok(0) => break,
                        Ok(_) => {
                            for rec in &buf {
                                prop_assert!(rec.size >= 1 && rec.size <= MAX_ACCESS_SIZE);
                            }
                        }
                        Err(e) => {
                            prop_assert!(e.to_string().starts_with("a.trace"), "{}", e);
                            break;
                        }
                    }
                }
            }
        }
    }
}
