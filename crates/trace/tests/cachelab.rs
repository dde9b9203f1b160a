//! The CS:APP Cache Lab traces (shared/data/cachelab) parse completely,
//! with per-kind counts equal to counts made here independently with plain
//! string operations on the files, and with hand-checked records.

mod common;

use std::collections::BTreeMap;
use std::fs;

use coldcache_trace::{open, Format, Record, RecordKind};

/// Counts lines by their first two characters, the way `grep -c '^ L'`
/// would: "I " instruction, " L" load, " S" store, " M" modify.
fn independent_counts(text: &str) -> BTreeMap<RecordKind, usize> {
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let kind = if line.starts_with("I ") {
            RecordKind::Instr
        } else if line.starts_with(" L") {
            RecordKind::Load
        } else if line.starts_with(" S") {
            RecordKind::Store
        } else if line.starts_with(" M") {
            RecordKind::Modify
        } else {
            assert!(line.trim().is_empty(), "unexpected line {line:?}");
            continue;
        };
        *counts.entry(kind).or_insert(0) += 1;
    }
    counts
}

#[test]
fn all_cachelab_traces_match_independent_counts() {
    let Some(dir) = common::cachelab_dir() else {
        eprintln!("NOTE: shared/data/cachelab not found; Cache Lab trace test skipped");
        return;
    };
    let mut seen = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("trace") {
            continue;
        }
        seen += 1;
        let text = fs::read_to_string(&path).unwrap();
        let expected = independent_counts(&text);
        let mut r = open(&path, None).unwrap();
        assert_eq!(r.format(), Format::Lackey, "{}", path.display());
        assert_eq!(r.total_bytes(), Some(text.len() as u64));
        // A batch size that does not divide the counts.
        let records = common::read_all(&mut r, 777).unwrap();
        assert_eq!(r.bytes_read(), text.len() as u64);
        assert_eq!(r.records_read(), records.len() as u64);
        let mut got = BTreeMap::new();
        for rec in &records {
            *got.entry(rec.kind).or_insert(0) += 1;
            assert!(rec.size >= 1 && rec.size <= 8, "{rec:?}");
        }
        assert_eq!(got, expected, "{}", path.display());
        // The iterator gives the same records.
        let again: Vec<Record> = open(&path, None).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(again, records);
        // Forcing the format changes nothing.
        let forced = common::read_all(&mut open(&path, Some(Format::Lackey)).unwrap(), 1 << 20);
        assert_eq!(forced.unwrap(), records);
    }
    assert!(seen >= 5, "expected the 5 Cache Lab traces, found {seen}");
}

#[test]
fn hand_checked_records() {
    let Some(dir) = common::cachelab_dir() else {
        eprintln!("NOTE: shared/data/cachelab not found; Cache Lab trace test skipped");
        return;
    };
    // dave.trace (its first line ends with a blank: " L 10,4 ").
    let dave = common::read_all(&mut open(&dir.join("dave.trace"), None).unwrap(), 10).unwrap();
    use RecordKind::*;
    let want = [
        (Load, 0x10),
        (Store, 0x18),
        (Load, 0x20),
        (Store, 0x28),
        (Store, 0x50),
    ];
    assert_eq!(dave.len(), want.len());
    for (rec, (kind, addr)) in dave.iter().zip(want) {
        assert_eq!(*rec, Record::new(kind, addr, 4));
    }

    // yi.trace, with its two M records.
    let yi = common::read_all(&mut open(&dir.join("yi.trace"), None).unwrap(), 3).unwrap();
    assert_eq!(yi[1], Record::new(Modify, 0x20, 1));
    assert_eq!(yi[6], Record::new(Modify, 0x12, 1));
    assert_eq!(yi[4], Record::new(Load, 0x110, 1));

    // trans.trace: a store before any instruction (ip unknown), then
    // instructions, then data accesses attributed to the last instruction.
    let trans = common::read_all(&mut open(&dir.join("trans.trace"), None).unwrap(), 100).unwrap();
    assert_eq!(trans[0], Record::new(Store, 0x600aa0, 1));
    assert_eq!(trans[1], Record::new(Instr, 0x4005b6, 5).with_ip(0x4005b6));
    assert_eq!(trans[2], Record::new(Instr, 0x4005bb, 5).with_ip(0x4005bb));
    assert_eq!(trans[3], Record::new(Instr, 0x4005c0, 5).with_ip(0x4005c0));
    assert_eq!(
        trans[4],
        Record::new(Store, 0x7ff000398, 8).with_ip(0x4005c0)
    );

    // long.trace: 9-digit addresses, last record.
    let long = common::read_all(&mut open(&dir.join("long.trace"), None).unwrap(), 4096).unwrap();
    assert_eq!(long.len(), 267_988);
    assert_eq!(long[4], Record::new(Store, 0x7fefe05a8, 8));
    assert_eq!(*long.last().unwrap(), Record::new(Store, 0x602265, 1));
}
