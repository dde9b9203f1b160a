//! The fast decoding paths (whole-window cctrace records, canonical lackey
//! lines) against the checked reference path they sit in front of
//! (`TraceReader::set_reference_decoding`, the decoder as it was before
//! them): the same records, the same skipped lines and the same errors,
//! byte for byte, on real traces (`/work/traces`, when present) and on
//! random ones with every control record kind and random corruption.

mod common;

use coldcache_trace::{Format, Record, RecordKind, TraceReader, TraceWriter, ATTACH_DUMP_SKELETON};
use proptest::prelude::*;
use std::path::Path;

/// Everything a read gives: the records before the end or the first
/// error, that error's message, and the lines skipped.
#[derive(Debug, PartialEq)]
struct Outcome {
    records: Vec<Record>,
    error: Option<String>,
    skipped: u64,
}

fn outcome(mut r: TraceReader, reference: bool, batch: usize, skip_bad: bool) -> Outcome {
    r.set_reference_decoding(reference);
    r.set_skip_bad(skip_bad);
    let mut records = Vec::new();
    let mut buf = Vec::new();
    let error = loop {
        match r.read_batch(&mut buf, batch) {
            Ok(0) => break None,
            Ok(_) => records.extend_from_slice(&buf),
            Err(e) => break Some(e.to_string()),
        }
    };
    Outcome {
        records,
        error,
        skipped: r.skipped(),
    }
}

/// Reads `bytes` with both paths and checks they agree; returns the
/// outcome.
fn both(name: &str, bytes: &[u8], batch: usize, skip_bad: bool) -> Result<Outcome, TestCaseError> {
    let open = || common::reader(name, bytes.to_vec(), None);
    let (fast, reference) = match (open(), open()) {
        (Ok(a), Ok(b)) => (
            outcome(a, false, batch, skip_bad),
            outcome(b, true, batch, skip_bad),
        ),
        (Err(a), Err(b)) => {
            prop_assert_eq!(a.to_string(), b.to_string());
            return Ok(Outcome {
                records: Vec::new(),
                error: Some(a.to_string()),
                skipped: 0,
            });
        }
        (a, b) => {
            return Err(TestCaseError::fail(format!(
                "opening differs: {:?} / {:?}",
                a.err(),
                b.err()
            )))
        }
    };
    prop_assert_eq!(&fast, &reference);
    Ok(fast)
}

/// Streams two readers side by side and checks every record is equal;
/// returns how many.
fn same_stream(mut a: TraceReader, mut b: TraceReader) -> u64 {
    let (mut ba, mut bb) = (Vec::new(), Vec::new());
    let mut n = 0u64;
    loop {
        let got = a.read_batch(&mut ba, 1 << 16).unwrap();
        assert_eq!(b.read_batch(&mut bb, 1 << 16).unwrap(), got);
        if got == 0 {
            return n;
        }
        if ba != bb {
            let i = ba.iter().zip(&bb).position(|(x, y)| x != y).unwrap();
            panic!("record {} differs: {:?} / {:?}", n + i as u64, ba[i], bb[i]);
        }
        n += got as u64;
    }
}

fn open_file(path: &Path, reference: bool) -> TraceReader {
    let mut r = coldcache_trace::open(path, None).unwrap();
    r.set_reference_decoding(reference);
    r
}

/// The real traces of the benchmarks: `python3.11 -c pass` under lackey,
/// its first 2 M and 20 M records, as text and as cctrace.
fn real(name: &str) -> Option<std::path::PathBuf> {
    let p = Path::new("/work/traces").join(name);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("{} absent: not compared", p.display());
        None
    }
}

#[test]
fn fast_paths_equal_reference_on_real_traces() {
    for name in ["py2.cctrace", "py2.lackey", "py20.cctrace", "py20.lackey"] {
        let Some(p) = real(name) else { continue };
        let n = same_stream(open_file(&p, false), open_file(&p, true));
        assert!(n >= 1_000_000, "{name}: {n} records");
    }
    // The same records as text and as cctrace, both fast.
    for (text, bin) in [
        ("py2.lackey", "py2.cctrace"),
        ("py20.lackey", "py20.cctrace"),
    ] {
        let (Some(t), Some(b)) = (real(text), real(bin)) else {
            continue;
        };
        same_stream(open_file(&t, false), open_file(&b, false));
    }
}

fn arb_record() -> impl Strategy<Value = Record> {
    let kind = (0..7usize).prop_map(|k| RecordKind::ALL[k]);
    let addr = prop_oneof![
        any::<u64>(),
        0u64..0x1000,
        0x7ff0_0000u64..0x7ff0_0100,
        0x40_0000u64..0x40_0400
    ];
    let size = prop_oneof![
        4 => 1u32..=64,
        1 => Just(coldcache_trace::MAX_ACCESS_SIZE),
        1 => 1u32..=coldcache_trace::MAX_ACCESS_SIZE
    ];
    let ip = prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        any::<u64>(),
        0x40_0000u64..0x40_0100
    ];
    let thread = prop_oneof![8 => 0u32..3, 1 => any::<u32>()];
    let stack = prop_oneof![4 => Just(0u32), 4 => 0u32..4, 1 => any::<u32>()];
    (kind, addr, size, ip, thread, 0u8..3, stack, any::<bool>()).prop_map(
        |(kind, addr, size, ip, thread, ip_mode, stack, unmodelled)| Record {
            kind,
            addr,
            size,
            // Equal to the address, to the previous ip (often), or any.
            ip: match ip_mode {
                0 => addr,
                1 => 0x40_0000,
                _ => ip,
            },
            thread,
            stack,
            unmodelled: unmodelled && kind == RecordKind::Instr,
        },
    )
}

/// What goes into a random stream: records, thread definitions and
/// attachments in any order (thread switches and stack switches come
/// from the records).
#[derive(Clone, Debug)]
enum Item {
    Record(Record),
    Thread(u32, u64),
    Attach(u64, Vec<u8>),
}

fn arb_item() -> impl Strategy<Value = Item> {
    prop_oneof![
        20 => arb_record().prop_map(Item::Record),
        1 => (0u32..4, any::<u64>()).prop_map(|(i, t)| Item::Thread(i, t)),
        1 => (prop_oneof![Just(ATTACH_DUMP_SKELETON), any::<u64>()],
              prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(k, b)| Item::Attach(k, b)),
    ]
}

/// Writes `items` as cctrace `version` (version 1 cannot hold stacks,
/// unmodelled marks or attachments: those are dropped); returns the bytes
/// and the records written.
fn write_items(items: &[Item], chunk: usize, version: u16) -> (Vec<u8>, Vec<Record>) {
    let mut w = TraceWriter::with_version(Vec::new(), b"meta", version).unwrap();
    w.set_chunk_size(chunk);
    let mut records = Vec::new();
    for item in items {
        match item {
            Item::Record(r) => {
                let mut r = *r;
                if version < 2 {
                    r.stack = 0;
                    r.unmodelled = false;
                }
                w.write(&r).unwrap();
                records.push(r);
            }
            Item::Thread(i, t) => w.define_thread(*i, *t).unwrap(),
            Item::Attach(k, b) if version >= 2 => w.attach(*k, b).unwrap(),
            Item::Attach(..) => {}
        }
    }
    (w.finish().unwrap(), records)
}

/// (payload start, payload length) of every chunk of a cctrace file.
fn chunks(bytes: &[u8]) -> Vec<(usize, usize)> {
    let le = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap()) as usize;
    let mut at = 16 + le(12) + 4;
    let mut out = Vec::new();
    loop {
        let len = le(at);
        if len == 0 {
            return out;
        }
        out.push((at + 12, len));
        at += 12 + len;
    }
}

/// Recomputes the CRC of the chunk whose payload starts at `start`, so a
/// corruption reaches the decoder instead of the CRC check.
fn fix_crc(bytes: &mut [u8], start: usize, len: usize) {
    let crc = crc32fast::hash(&bytes[start..start + len]);
    bytes[start - 4..start].copy_from_slice(&crc.to_le_bytes());
}

/// A lackey line: mostly as Valgrind writes them, some in the other
/// spellings the parser accepts, some malformed.
fn arb_lackey_line() -> impl Strategy<Value = String> {
    let addr = prop_oneof![
        any::<u64>(),
        0u64..0x1000,
        0x001f_feff_f000_u64..0x001f_ff00_0000
    ];
    let size = prop_oneof![
        16 => 1u32..=32,
        1 => Just(0u32),
        2 => 0u32..=2_000_000,
        1 => Just(1 << 20),
        1 => Just((1 << 20) + 1)
    ];
    let canonical = (0..4usize, addr.clone(), size.clone()).prop_map(|(k, a, s)| {
        let lead = ["I  ", " L ", " S ", " M "][k];
        format!("{lead}{a:08x},{s}")
    });
    let odd = (
        0..4usize,
        addr,
        size,
        prop::sample::select(vec![
            "{k} {a:x},{s}",
            "  {k}   {a:x} , {s} ",
            "{k}\t0x{a:x},{s}",
            "{k}  {A},{s}\r",
            "{k}  0000000000000000000{a:x},{s}",
            "{k}  {a:x}{a:x},{s}",
            "{k}  {a:x},00000000{s}",
            "{k}  {a:x},{s}x",
            "{k}  {a:x};{s}",
            "{k}  ,{s}",
            "{k}  {a:x},",
            "{k}{a:x},{s}",
            "X  {a:x},{s}",
            "==12== banner",
            "--12-- banner",
            "",
            "   ",
        ]),
    )
        .prop_map(|(k, a, s, shape)| {
            shape
                .replace("{k}", ["I", "L", "S", "M"][k])
                .replace("{a:x}", &format!("{a:x}"))
                .replace("{A}", &format!("{a:X}"))
                .replace("{s}", &s.to_string())
        });
    prop_oneof![8 => canonical, 2 => odd]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random streams with every control record kind (thread switches
    /// and definitions, stack switches, attachments), both versions, any
    /// chunk and batch size: the fast path gives the records written, as
    /// the reference path does.
    #[test]
    fn cctrace_fast_equals_reference_random(
        items in prop::collection::vec(arb_item(), 1..600),
        chunk in prop_oneof![16usize..200, 200usize..5000],
        batch in prop_oneof![1usize..8, 8usize..2000],
        version in 1u16..=2,
    ) {
        let (bytes, records) = write_items(&items, chunk, version);
        let got = both("r.cctrace", &bytes, batch, false)?;
        // A stream of control records alone holds no access: both paths
        // refuse it as empty rather than give nothing silently.
        let expected = records
            .is_empty()
            .then(|| "r.cctrace: empty file (no records)".to_string());
        prop_assert_eq!(got.error, expected);
        prop_assert_eq!(got.records, records);
    }

    /// A payload byte changed (CRC fixed so the decoder sees it) or the
    /// file cut anywhere: both paths give the same records and the same
    /// error, which names the file.
    #[test]
    fn cctrace_corruption_same_outcome_both_paths(
        items in prop::collection::vec(arb_item(), 1..400),
        chunk in 64usize..4000,
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
        cut in any::<bool>(),
        version in 1u16..=2,
    ) {
        let (mut bytes, _) = write_items(&items, chunk, version);
        if cut {
            let i = at.index(bytes.len());
            bytes.truncate(i);
        } else {
            let cs = chunks(&bytes);
            prop_assume!(!cs.is_empty());
            let (start, len) = cs[at.index(cs.len())];
            let i = start + (at.index(usize::MAX) % len);
            bytes[i] ^= xor;
            fix_crc(&mut bytes, start, len);
        }
        let got = both("c.cctrace", &bytes, 333, false)?;
        if let Some(e) = &got.error {
            prop_assert!(e.starts_with("c.cctrace"), "{}", e);
        }
    }

    /// Random lackey text, canonical lines and others, with and without
    /// `--skip-bad`: the fast path gives the same records, skipped lines
    /// and errors (with line numbers) as the reference parser.
    #[test]
    fn lackey_fast_equals_reference_random(
        lines in prop::collection::vec(arb_lackey_line(), 1..300),
        skip_bad in any::<bool>(),
        batch in 1usize..500,
        last_newline in any::<bool>(),
    ) {
        let mut text = lines.join("\n");
        if last_newline {
            text.push('\n');
        }
        let got = both("r.lackey", text.as_bytes(), batch, skip_bad)?;
        if let Some(e) = &got.error {
            prop_assert!(e.starts_with("r.lackey"), "{}", e);
        }
    }
}

/// A varint cut by a corrupt byte in the middle of a large chunk (where
/// the fast path decodes) is reported with the file, the chunk's offset
/// and the position in the payload, as the checked path reports it.
#[test]
fn corrupt_record_in_fast_region_names_file_and_offset() {
    let records: Vec<Record> = (0..5000u64)
        .map(|i| Record::new(RecordKind::Load, 0x1000 + i * 8, 8).with_ip(0x40_0000 + i))
        .collect();
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    w.write_all(&records).unwrap();
    let mut bytes = w.finish().unwrap();
    let (start, len) = chunks(&bytes)[0];
    // Eight bytes in the middle with the top bit set: a tag among them
    // has reserved bits, or a varint runs past ten bytes.
    let i = start + len / 2;
    for b in &mut bytes[i..i + 8] {
        *b |= 0x80;
    }
    fix_crc(&mut bytes, start, len);
    let fast = outcome(
        common::reader("mid.cctrace", bytes.clone(), Some(Format::Binary)).unwrap(),
        false,
        1 << 16,
        false,
    );
    let reference = outcome(
        common::reader("mid.cctrace", bytes, Some(Format::Binary)).unwrap(),
        true,
        1 << 16,
        false,
    );
    assert_eq!(fast, reference);
    let e = fast.error.expect("an error");
    assert!(
        e.starts_with("mid.cctrace: chunk 0 at byte ") && e.contains("payload byte"),
        "{e}"
    );
    assert!(fast.records.len() > 1000, "{} records", fast.records.len());
    assert_eq!(fast.records[..], records[..fast.records.len()]);
}

/// The lackey fast path keeps the ip of data accesses: the address of
/// the last instruction line, across a banner and a line only the
/// reference parser takes.
#[test]
fn lackey_fast_path_keeps_instruction_ip() {
    let text = "I  04000000,3\n L 1ffefff000,8\n==1== x\n  S   00000010 , 4\nI  04000003,2\n M 0000abcd,1\n";
    let r = common::reader("ip.lackey", text, None).unwrap();
    let got = outcome(r, false, 100, false);
    let ip = |r: &Record| r.ip;
    assert_eq!(
        got.records.iter().map(ip).collect::<Vec<_>>(),
        [0x4000000, 0x4000000, 0x4000000, 0x4000003, 0x4000003]
    );
    assert_eq!(got.records[2].kind, RecordKind::Store);
    assert_eq!(got.records[2].size, 4);
    assert_eq!(got.error, None);
}

/// The reference switch exists on every reader: din text has no fast
/// path and reads the same either way.
#[test]
fn reference_switch_is_harmless_on_din() {
    let din = "0 1000 4\n2 400000\n";
    let read = |reference| {
        outcome(
            common::reader("x.din", din, None).unwrap(),
            reference,
            10,
            false,
        )
    };
    assert_eq!(read(false), read(true));
    assert_eq!(read(false).records.len(), 2);
}
