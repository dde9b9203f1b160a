//! `ByInstruction`: a dump read with its records summed per instruction
//! address. Checked against the whole dump read by `Dump::from_bytes` (the
//! truth): the sums per address computed here by hand from its records,
//! the totals and addresses, the record count, the bytes written back
//! (equal to the file's when nothing changed, and to the whole dump's
//! encoding when the rest changed), and the same refusals.

use coldcache_dump::{
    ByInstruction, CounterLayout, Dump, Meta, Record, StackNode, Symbols, Thread,
};
use std::collections::BTreeMap;

/// Six records over three addresses, two stacks and two threads, counters
/// of several sizes (one saturating when summed).
fn sample() -> Dump {
    let levels = vec!["L1".to_string(), "LL".to_string()];
    let names = CounterLayout::new(2).names(&levels);
    let n = names.len() as u64;
    let row = |k: u64| (0..n).map(|i| i * k + (k << 20)).collect::<Vec<u64>>();
    let rec = |ip, stack, thread, counters| Record {
        ip,
        stack,
        thread,
        counters,
    };
    Dump {
        meta: Meta {
            cache_name: "cachegrind".into(),
            levels,
            cores: 1,
            counters: names,
            instructions: 99,
            trigger: "all".into(),
            ..Meta::default()
        },
        threads: vec![
            Thread::default(),
            Thread {
                tid: 7,
                ..Thread::default()
            },
        ],
        stacks: vec![
            StackNode::default(),
            StackNode {
                parent: 0,
                call_site: 0x40_1000,
                callee: 0x40_2000,
            },
        ],
        records: vec![
            rec(0x40_1000, 0, 0, row(1)),
            rec(0x40_2000, 1, 0, row(3)),
            rec(0x40_2000, 1, 1, row(5)),
            rec(0x40_2004, 0, 1, vec![u64::MAX - 1; n as usize]),
            rec(0x40_2004, 1, 0, row(2)),
            rec(0x40_2000, 0, 0, row(1 << 40)),
        ],
        ..Dump::default()
    }
}

#[test]
fn records_are_summed_per_address_and_written_back_as_read() {
    let d = sample();
    let bytes = d.to_bytes();
    let b = ByInstruction::from_bytes(bytes.clone()).unwrap();
    assert_eq!(b.records(), 6);
    // By hand from the whole dump: one row per address, summed saturating.
    let mut want: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for r in &d.records {
        let s = want
            .entry(r.ip)
            .or_insert_with(|| vec![0; r.counters.len()]);
        for (a, c) in s.iter_mut().zip(&r.counters) {
            *a = a.saturating_add(*c);
        }
    }
    let got: BTreeMap<u64, Vec<u64>> = b
        .dump
        .records
        .iter()
        .map(|r| (r.ip, r.counters.clone()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(b.dump.records.len(), 3);
    assert!(b.dump.records.windows(2).all(|w| w[0].ip < w[1].ip));
    assert!(b.dump.records.iter().all(|r| r.stack == 0 && r.thread == 0));
    assert_eq!(b.dump.records[2].counters[0], u64::MAX, "saturated");
    assert_eq!(b.dump.addresses(), d.addresses());
    // Everything but the records is the dump's own.
    let mut rest = b.dump.clone();
    rest.records = d.records.clone();
    assert_eq!(rest, d);
    // Written back unchanged: the file's bytes; so are records in the
    // form versions before 12 wrote (`RECS`).
    assert_eq!(b.to_bytes(), bytes);
    let dense = d.to_bytes_dense();
    assert_eq!(
        ByInstruction::from_bytes(dense.clone()).unwrap().to_bytes(),
        dense
    );
    // With the rest changed (as the resolver does), the bytes are the
    // whole dump's with that change.
    let mut b = b;
    let mut whole = d.clone();
    for x in [&mut b.dump, &mut whole] {
        x.meta.notes.push("resolved".into());
        x.symbols = Some(Symbols::default());
    }
    assert_eq!(b.to_bytes(), whole.to_bytes());
    assert_eq!(Dump::from_bytes(&b.to_bytes()).unwrap(), whole);
}

#[test]
fn the_committed_samples_read_as_the_whole_dump_does() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    for v in ["v1", "v2", "v2-resolved-real", "v3", "v4", "v12-frames"] {
        let bytes = std::fs::read(format!("{dir}/{v}.ccdump")).unwrap();
        let whole = Dump::from_bytes(&bytes).unwrap();
        let b = ByInstruction::from_bytes(bytes).unwrap();
        assert_eq!(b.records(), whole.records.len(), "{v}");
        assert_eq!(b.dump.totals(), whole.totals(), "{v}");
        assert_eq!(b.dump.addresses(), whole.addresses(), "{v}");
        // Written back in the current version, the records as they were.
        assert_eq!(
            Dump::from_bytes(&b.to_bytes()).unwrap(),
            Dump::from_bytes(&whole.to_bytes()).unwrap(),
            "{v}"
        );
    }
}

#[test]
fn a_damaged_dump_is_refused_as_the_whole_reader_refuses_it() {
    let bytes = sample().to_bytes();
    for len in 0..bytes.len() {
        assert!(
            ByInstruction::from_bytes(bytes[..len].to_vec()).is_err(),
            "length {len}"
        );
    }
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        assert_eq!(
            ByInstruction::from_bytes(b.clone())
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Dump::from_bytes(&b).map(|_| ()).map_err(|e| e.to_string()),
            "byte {i}"
        );
    }
}
