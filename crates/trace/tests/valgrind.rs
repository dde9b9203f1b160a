//! A real lackey trace: when `valgrind` is installed, trace `/bin/true`
//! and parse the whole output (banner and summary lines skipped).

mod common;

use std::process::Command;

use coldcache_trace::{open, Format, RecordKind};

#[test]
fn real_lackey_trace_parses_fully() {
    let log = common::temp_path("true.lackey");
    let status = Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes"])
        .arg(format!("--log-file={}", log.display()))
        .arg("/bin/true")
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => {
            eprintln!("NOTE: valgrind not usable ({other:?}); real lackey test skipped");
            return;
        }
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("=="), "no Valgrind banner");
    // Independent count: lines that are not Valgrind's own.
    let expected: Vec<&str> = text.lines().filter(|l| !l.starts_with("==")).collect();
    let mut r = open(&log, None).unwrap();
    assert_eq!(r.format(), Format::Lackey);
    let records = common::read_all(&mut r, 10_000).unwrap();
    assert_eq!(records.len(), expected.len());
    assert!(records.len() > 10_000, "{} records", records.len());
    for kind in [
        RecordKind::Instr,
        RecordKind::Load,
        RecordKind::Store,
        RecordKind::Modify,
    ] {
        let want = expected
            .iter()
            .filter(|l| l.trim_start().starts_with(&kind_letter(kind)))
            .count();
        let got = records.iter().filter(|r| r.kind == kind).count();
        assert_eq!(got, want, "{kind}");
        assert!(got > 0, "no {kind} record");
    }
    // Every data access follows an instruction: its ip is known.
    let first_instr = records
        .iter()
        .position(|r| r.kind == RecordKind::Instr)
        .unwrap();
    assert!(records[first_instr..].iter().all(|r| r.ip != 0));
    // The same through gzip.
    let gz = common::gzip(text.as_bytes());
    let mut r = common::reader("true.lackey.gz", gz, None).unwrap();
    assert_eq!(common::read_all(&mut r, 4096).unwrap(), records);
    std::fs::remove_file(&log).unwrap();
}

fn kind_letter(kind: RecordKind) -> String {
    match kind {
        RecordKind::Instr => "I ",
        RecordKind::Load => "L ",
        RecordKind::Store => "S ",
        _ => "M ",
    }
    .to_string()
}
