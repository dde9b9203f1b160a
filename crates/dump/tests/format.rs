//! Dump format tests: round trip, and refusal of truncated or corrupted input.

use coldcache_dump::{counters, Dump, DumpError, Meta, Module, Record, StackNode, Thread};

fn sample() -> Dump {
    let levels = vec!["L1".to_string(), "L2".to_string()];
    let names = counters::names(&levels);
    let n = names.len();
    Dump {
        meta: Meta {
            program: vec!["./a.out".into(), "x".into()],
            pid: 42,
            cache_name: "jaguar".into(),
            levels,
            cores: 8,
            threads: "all".into(),
            trigger: "api".into(),
            counters: names,
            instructions: 10,
            ..Meta::default()
        },
        modules: vec![Module {
            path: "/bin/true".into(),
            build_id: vec![1, 2, 3],
            start: 0x5555_0000,
            end: 0x5556_0000,
            file_offset: 0x1000,
        }],
        threads: vec![Thread {
            tid: 42,
            name: "main".into(),
            core: 0,
        }],
        stacks: vec![
            StackNode::default(),
            StackNode {
                parent: 0,
                call_site: 0x5555_1234,
                callee: 0x5555_2000,
            },
        ],
        records: vec![
            Record {
                ip: 0x5555_2000,
                stack: 1,
                thread: 0,
                counters: (0..n as u64).collect(),
            },
            Record {
                ip: 0x5555_1000,
                stack: 0,
                thread: 0,
                counters: vec![u64::MAX; n],
            },
        ],
    }
}

#[test]
fn round_trip_keeps_everything() {
    let d = sample();
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back, d);
    // Counter layout: 2 + 3 sides x (2 levels + memory) + 4 = 15 counters.
    assert_eq!(d.meta.counters.len(), 15);
    assert_eq!(d.meta.counters[counters::side_base(2, 1)], "r_L1");
    assert_eq!(d.meta.counters[counters::tail_base(2)], "prefetch_issued");
}

#[test]
fn every_truncation_is_refused() {
    let bytes = sample().to_bytes();
    for len in 0..bytes.len() {
        let err = Dump::from_bytes(&bytes[..len]).unwrap_err();
        assert!(
            matches!(
                err,
                DumpError::Truncated(_) | DumpError::BadMagic | DumpError::Checksum { .. }
            ),
            "length {len}: {err}"
        );
    }
}

#[test]
fn every_flipped_bit_is_refused() {
    let bytes = sample().to_bytes();
    for i in 0..bytes.len() {
        for bit in [0, 3, 7] {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            assert!(Dump::from_bytes(&b).is_err(), "byte {i} bit {bit} accepted");
        }
    }
}

#[test]
fn newer_version_is_refused_by_number() {
    let mut b = sample().to_bytes();
    b[8] = 9;
    match Dump::from_bytes(&b) {
        Err(DumpError::UnsupportedVersion(9)) => {}
        other => panic!("{other:?}"),
    }
}

/// A dump written by format version 1, committed: every later coldcache
/// must keep reading it. Regenerate (only when adding a new version's
/// sample) with `COLDCACHE_WRITE_SAMPLES=1 cargo test -p coldcache-dump`.
#[test]
fn committed_version_1_sample_still_loads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1.ccdump");
    if std::env::var_os("COLDCACHE_WRITE_SAMPLES").is_some() {
        std::fs::write(&path, sample().to_bytes()).unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[8..12], &1u32.to_le_bytes(), "sample is version 1");
    assert_eq!(Dump::from_bytes(&bytes).unwrap(), sample());
}
