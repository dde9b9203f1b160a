//! Malformed inputs: each gives an error naming the input, the line (text)
//! and what is wrong; skip-bad mode skips and counts malformed lines.

mod common;

use coldcache_trace::{open, Format, Record, RecordKind, TraceError};
use common::{error_of, parse, reader};

#[test]
fn truncated_lines() {
    assert_eq!(
        error_of("trace.txt", " L 10,4\n L 20\n"),
        "trace.txt:2: truncated record: missing ',' and size after address \"20\""
    );
    assert_eq!(
        error_of("trace.txt", " L 10,4\nI  400,3\n L 7ff0005c8,\n"),
        "trace.txt:3: truncated record: missing size after ','"
    );
    assert_eq!(
        error_of("trace.txt", "I  400,3\n S\n"),
        "trace.txt:2: truncated record: missing address after 'S'"
    );
    // The last line, without its '\n'.
    assert_eq!(
        error_of("trace.txt", " L 10,4\n L 20,"),
        "trace.txt:2: truncated record: missing size after ','"
    );
}

#[test]
fn bad_hex_and_sizes() {
    assert_eq!(
        error_of("trace.txt", "==1== banner\n\n L 10,4\n L 7ff0g,8\n"),
        "trace.txt:4: bad hex digit 'g' in address \"7ff0g\""
    );
    assert_eq!(
        error_of("t", " L 10,4\n L 12345678901234567,8\n"),
        "t:2: address \"12345678901234567\" does not fit in 64 bits (more than 16 hex digits)"
    );
    assert_eq!(error_of("t", " L 10,0\n"), "t:1: size 0 is not allowed");
    assert_eq!(
        error_of("t", " L 10,4\n L 10,2000000\n"),
        "t:2: size 2000000 is too large (at most 1048576 bytes)"
    );
    assert_eq!(
        error_of("t", " L 10,4\n L 10,4x\n"),
        "t:2: bad size \"4x\" (expected a decimal number)"
    );
    assert_eq!(
        error_of("t", " L 10,4\n L 10,4 # note\n"),
        "t:2: unexpected \"# note\" after the record"
    );
}

#[test]
fn unknown_kinds() {
    assert_eq!(
        error_of("trace.txt", " L 10,4\n L 20,4\n X 30,4\n"),
        "trace.txt:3: unknown record kind 'X' (expected I, L, S or M)"
    );
    assert_eq!(
        error_of("trace.din", "0 1000\n1 2000\n3 3000\n"),
        "trace.din:3: unknown record kind '3' (din escape record of unknown access type; not supported)"
    );
    assert_eq!(
        error_of("trace.din", "0 1000\n9 2000\n"),
        "trace.din:2: unknown record kind '9' (expected a din label 0, 1, 2 or 4)"
    );
    // A first line of neither format.
    assert_eq!(
        error_of("notes.txt", "==1== x\nhello world\n"),
        "notes.txt:2: cannot tell the trace format: \"hello world\" is neither a lackey record \
         (like ` L 7ff0005c8,8`) nor a Dinero din record (like `0 7ff0005c8`)"
    );
    // A format forced on the other one.
    assert_eq!(
        reader("t", " L 10,4\n", Some(Format::Dinero))
            .and_then(|mut r| common::read_all(&mut r, 10))
            .unwrap_err()
            .to_string(),
        "t:1: unknown record kind 'L' (expected a din label 0, 1, 2 or 4)"
    );
}

#[test]
fn empty_inputs() {
    for data in [
        &b""[..],
        b"\n\n  \n",
        b"==123== Lackey, an example Valgrind tool\n==123== \n",
        b"==123== no newline at the end",
    ] {
        assert_eq!(
            error_of("trace.txt", data),
            "trace.txt: empty file (no records)"
        );
    }
    // Empty after decompression, too.
    assert_eq!(
        error_of("t.gz", common::gzip(b"")),
        "t.gz: empty file (no records)"
    );
    // A forced format does not change that.
    let e = reader("t", "", Some(Format::Binary)).err().unwrap();
    assert_eq!(e.to_string(), "t: empty file (no records)");
}

#[test]
fn binary_garbage() {
    let msg = "trace.bin: not a trace: binary data that is neither a cctrace file nor text";
    let mut x = 12345u32;
    let noise: Vec<u8> = (0..5000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect();
    assert_eq!(error_of("trace.bin", noise), msg);
    assert_eq!(error_of("trace.bin", b" L 10,4\n\0\0\0\0".to_vec()), msg);
    // Invalid UTF-8 without NUL bytes.
    assert_eq!(
        error_of("trace.bin", b" L 10,4\n\xff\xfe\xfd\n".to_vec()),
        msg
    );
    // An ELF executable.
    if let Ok(elf) = std::fs::read("/bin/true") {
        assert_eq!(error_of("trace.bin", elf), msg);
    }
    // Garbage after the first 64 KiB: found by the line parser.
    let mut data = common::synthetic_lackey(10_000).into_bytes();
    let lines = data.iter().filter(|&&b| b == b'\n').count();
    data.extend_from_slice(b" L 10\0\x01,4\n L 20,4\n");
    assert_eq!(
        error_of("trace.txt", data),
        format!(
            "trace.txt:{}: binary data (NUL or non-UTF-8 bytes) in a text trace",
            lines + 1
        )
    );
    // A huge line without '\n'.
    let mut data = b" L 10,4\n".to_vec();
    data.extend(std::iter::repeat_n(b'a', 1 << 20));
    let e = error_of("trace.txt", data);
    assert!(e.starts_with("trace.txt:2: line longer than"), "{e}");
}

#[test]
fn line_numbers_across_buffer_refills() {
    // Far more than one read buffer, with the error on the last line.
    let mut data = common::synthetic_lackey(300_000);
    let lines = data.lines().count();
    data.push_str(" L zz,4\n");
    for batch in [1, 1000, 1 << 20] {
        let mut r = reader("big.trace", data.clone(), None).unwrap();
        let e = common::read_all(&mut r, batch).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "big.trace:{}: bad hex digit 'z' in address \"zz\"",
                lines + 1
            )
        );
        assert_eq!(r.records_read(), 300_000);
    }
}

#[test]
fn records_before_an_error_come_first() {
    let mut r = reader("t", " L 10,4\n S 20,4\n X 30,4\n L 40,4\n", None).unwrap();
    let mut out = Vec::new();
    assert_eq!(r.read_batch(&mut out, 100).unwrap(), 2);
    let e = r.read_batch(&mut out, 100).unwrap_err();
    assert!(matches!(e, TraceError::Parse { line: 3, .. }), "{e}");
    assert_eq!(r.read_batch(&mut out, 100).unwrap(), 0);
    assert!(out.is_empty());

    let items: Vec<_> = reader("t", " L 10,4\n S 20,4\n X 30,4\n L 40,4\n", None)
        .unwrap()
        .collect();
    assert_eq!(items.len(), 3);
    assert_eq!(
        items[1].as_ref().unwrap(),
        &Record::new(RecordKind::Store, 0x20, 4)
    );
    assert_eq!(
        items[2].as_ref().unwrap_err().to_string(),
        "t:3: unknown record kind 'X' (expected I, L, S or M)"
    );
}

#[test]
fn skip_bad_counts() {
    let data = "==1== banner\n L 10,4\n L 1g,4\n S 20,8\n Q 1,1\n M 30,2\n L 40,\n\n i  50,3\n";
    let mut r = reader("t.trace", data, None).unwrap();
    r.set_skip_bad(true);
    let records = common::read_all(&mut r, 2).unwrap();
    assert_eq!(
        records.iter().map(|r| r.addr).collect::<Vec<_>>(),
        [0x10, 0x20, 0x30]
    );
    assert_eq!(r.skipped(), 4);
    let msgs: Vec<String> = r.skipped_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(
        msgs,
        [
            "t.trace:3: bad hex digit 'g' in address \"1g\"",
            "t.trace:5: unknown record kind 'Q' (expected I, L, S or M)",
            "t.trace:7: truncated record: missing size after ','",
            "t.trace:9: unknown record kind 'i' (expected I, L, S or M)",
        ]
        .map(String::from)
    );
    // Without skip-bad the first one is an error.
    assert_eq!(
        error_of("t.trace", data),
        "t.trace:3: bad hex digit 'g' in address \"1g\""
    );
    // All lines bad.
    let mut r = reader("t.trace", " L x,1\n L y,1\n", None).unwrap();
    r.set_skip_bad(true);
    let e = common::read_all(&mut r, 10).unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.trace: no valid records (2 malformed lines skipped)"
    );
    // Only the first 10 errors are kept.
    let mut many = String::new();
    for _ in 0..25 {
        many.push_str(" L 10,4\n L 1x,4\n");
    }
    let mut r = reader("t", many, None).unwrap();
    r.set_skip_bad(true);
    assert_eq!(common::read_all(&mut r, 7).unwrap().len(), 25);
    assert_eq!(r.skipped(), 25);
    assert_eq!(r.skipped_errors().len(), 10);
}

#[test]
fn tolerant_spacing_and_line_ends() {
    let records = parse("t", "\tI \t 400,3 \r\n  L\t10 ,4\r\n S 20, 8\n M 0x30,1").unwrap();
    assert_eq!(
        records,
        [
            Record::new(RecordKind::Instr, 0x400, 3).with_ip(0x400),
            Record::new(RecordKind::Load, 0x10, 4).with_ip(0x400),
            Record::new(RecordKind::Store, 0x20, 8).with_ip(0x400),
            Record::new(RecordKind::Modify, 0x30, 1).with_ip(0x400),
        ]
    );
}

#[test]
fn dinero_records() {
    let mut r = reader(
        "t.din",
        "2 0\n0 1000\n0 70f60888\n2 2cb5\n1 0x70F60890 8\n4 0\n",
        None,
    )
    .unwrap();
    assert_eq!(r.format(), Format::Dinero);
    let records = common::read_all(&mut r, 4).unwrap();
    use RecordKind::*;
    assert_eq!(
        records,
        [
            Record::new(Instr, 0, 4),
            Record::new(Load, 0x1000, 4),
            Record::new(Load, 0x70f60888, 4),
            Record::new(Instr, 0x2cb5, 4).with_ip(0x2cb5),
            Record::new(Store, 0x70f60890, 8),
            Record::new(Flush, 0, 4),
        ]
    );
}

#[test]
fn io_errors_name_the_path() {
    let path = std::path::Path::new("/nonexistent/dir/trace.lackey");
    let e = open(path, None).err().unwrap();
    let msg = e.to_string();
    assert!(msg.starts_with("/nonexistent/dir/trace.lackey: "), "{msg}");
    assert!(matches!(e, TraceError::Io { .. }));
    // A directory.
    let e = open(std::path::Path::new("/"), None).err().unwrap();
    assert!(e.to_string().starts_with("/: "), "{e}");
}

#[test]
fn corrupt_compressed_data_is_an_io_error_with_the_name() {
    let mut gz = common::gzip(common::synthetic_lackey(20_000).as_bytes());
    let mid = gz.len() / 2;
    for b in &mut gz[mid..mid + 64] {
        *b ^= 0x5a;
    }
    // Garbled deflate data: either the decoder or the line parser (which
    // may see the garbled text first) reports it, naming the input.
    let e = parse("trace.gz", gz.clone()).unwrap_err();
    assert!(e.to_string().starts_with("trace.gz:"), "{e}");
    let e = parse("trace.gz", gz[..mid].to_vec()).unwrap_err();
    assert!(matches!(e, TraceError::Io { .. }), "{e}");
    assert!(e.to_string().starts_with("trace.gz: "), "{e}");

    let z = common::zstd(common::synthetic_lackey(20_000).as_bytes());
    let e = parse("trace.zst", z[..z.len() / 2].to_vec()).unwrap_err();
    assert!(e.to_string().starts_with("trace.zst: "), "{e}");
    assert!(e.to_string().contains("zstd"), "{e}");
}
