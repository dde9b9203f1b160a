//! The cctrace binary format: randomized round trips, corruption and
//! truncation errors, version checks, and the committed v1 and v2 samples.

mod common;

use coldcache_trace::{
    Format, Record, RecordKind, TraceError, TraceWriter, ATTACH_DUMP_SKELETON, FORMAT_VERSION,
    MAGIC,
};
use proptest::prelude::*;

fn write(records: &[Record], chunk: Option<usize>) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    if let Some(c) = chunk {
        w.set_chunk_size(c);
    }
    w.write_all(records).unwrap();
    assert_eq!(w.records_written(), records.len() as u64);
    w.finish().unwrap()
}

fn read(name: &str, bytes: Vec<u8>) -> Result<Vec<Record>, TraceError> {
    let mut r = common::reader(name, bytes, None)?;
    assert_eq!(r.format(), Format::Binary);
    common::read_all(&mut r, 1000)
}

/// A few thousand records looking like a capture: instructions with
/// ip = addr, data accesses with the ip of their instruction, two threads.
fn capture_like(n: usize) -> Vec<Record> {
    let mut v = Vec::with_capacity(n);
    let mut pc = 0x40_1000u64;
    let mut sp = 0x7ffc_0000_1000u64;
    for i in 0..n {
        let thread = ((i / 500) % 2) as u32;
        if i % 3 == 0 {
            pc += 1 + (i as u64 % 7);
            v.push(
                Record::new(RecordKind::Instr, pc, 1 + (i as u32 % 15))
                    .with_ip(pc)
                    .with_thread(thread),
            );
        } else {
            sp = sp.wrapping_add((i as u64 % 5) * 8).wrapping_sub(16);
            let kind = RecordKind::ALL[1 + i % 6];
            v.push(Record::new(kind, sp, 8).with_ip(pc).with_thread(thread));
        }
    }
    v
}

#[test]
fn round_trip_capture_like() {
    let records = capture_like(100_000);
    let bytes = write(&records, None);
    // Compact: a few bytes a record.
    assert!(bytes.len() < records.len() * 4, "{} bytes", bytes.len());
    assert_eq!(read("t.cctrace", bytes.clone()).unwrap(), records);
    // Many small chunks.
    let small = write(&records, Some(100));
    assert_eq!(read("t.cctrace", small).unwrap(), records);
    // The iterator and odd batch sizes.
    let r = common::reader("t", bytes.clone(), None).unwrap();
    assert_eq!(r.map(|r| r.unwrap()).collect::<Vec<_>>(), records);
    let mut r = common::reader("t", bytes, None).unwrap();
    assert_eq!(common::read_all(&mut r, 1).unwrap(), records);
}

fn arb_record() -> impl Strategy<Value = Record> {
    let kind = (0..7usize).prop_map(|k| RecordKind::ALL[k]);
    let addr = prop_oneof![any::<u64>(), 0u64..0x1000, (0x7ff0_0000u64..0x7ff0_0100)];
    let size = prop_oneof![
        1u32..=64,
        Just(coldcache_trace::MAX_ACCESS_SIZE),
        1u32..=coldcache_trace::MAX_ACCESS_SIZE
    ];
    let ip = prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        any::<u64>(),
        0x40_0000u64..0x40_0100
    ];
    let thread = prop_oneof![0u32..3, any::<u32>()];
    let stack = prop_oneof![Just(0u32), 0u32..4, any::<u32>()];
    (
        kind,
        addr,
        size,
        ip,
        thread,
        any::<bool>(),
        stack,
        any::<bool>(),
    )
        .prop_map(
            |(kind, addr, size, ip, thread, ip_is_addr, stack, unmodelled)| Record {
                kind,
                addr,
                size,
                ip: if ip_is_addr { addr } else { ip },
                thread,
                stack,
                unmodelled: unmodelled && kind == RecordKind::Instr,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn round_trip_random(
        records in prop::collection::vec(arb_record(), 1..400),
        chunk in 16usize..2000,
        threads in prop::collection::btree_map(any::<u32>(), any::<u64>(), 0..5),
        metadata in prop::collection::vec(any::<u8>(), 0..100),
    ) {
        let mut w = TraceWriter::with_metadata(Vec::new(), &metadata).unwrap();
        w.set_chunk_size(chunk);
        for (&i, &tid) in &threads {
            w.define_thread(i, tid).unwrap();
        }
        w.write_all(&records).unwrap();
        let bytes = w.finish().unwrap();
        let mut r = common::reader("p.cctrace", bytes, None).unwrap();
        prop_assert_eq!(r.metadata(), Some(&metadata[..]));
        let back = common::read_all(&mut r, 97).unwrap();
        prop_assert_eq!(back, records);
        prop_assert_eq!(r.threads(), threads);
    }

    #[test]
    fn corruption_never_panics_and_is_reported(
        records in prop::collection::vec(arb_record(), 1..200),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
        cut in any::<bool>(),
    ) {
        let mut bytes = write(&records, Some(64));
        let i = at.index(bytes.len());
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] ^= xor;
        }
        // Every change must be an error (or, for a flipped bit in the
        // metadata length/flags/version, a header error); never the same
        // records silently, never a panic.
        match read("c.cctrace", bytes) {
            Ok(back) => prop_assert!(false, "corruption at byte {} not detected ({} records)", i, back.len()),
            Err(e) => prop_assert!(e.to_string().starts_with("c.cctrace"), "{}", e),
        }
    }
}

#[test]
fn empty_trace_is_an_error() {
    let bytes = write(&[], None);
    assert_eq!(bytes.len(), 16 + 4 + 20);
    assert_eq!(
        read("e.cctrace", bytes).unwrap_err().to_string(),
        "e.cctrace: empty file (no records)"
    );
}

#[test]
fn header_errors() {
    let good = write(&capture_like(10), None);

    let mut bad = good.clone();
    bad[8..10].copy_from_slice(&3u16.to_le_bytes());
    assert_eq!(
        read("v.cctrace", bad).unwrap_err().to_string(),
        "v.cctrace: unsupported cctrace version 3 at byte 8 (this reader reads versions 1 to 2)"
    );
    let mut bad = good.clone();
    bad[8..10].copy_from_slice(&0u16.to_le_bytes());
    assert!(read("v.cctrace", bad)
        .unwrap_err()
        .to_string()
        .starts_with("v.cctrace: unsupported cctrace version 0 at byte 8"));
    assert_eq!(FORMAT_VERSION, 2);

    let mut bad = good.clone();
    bad[10] = 1;
    assert_eq!(
        read("f.cctrace", bad).unwrap_err().to_string(),
        "f.cctrace: unsupported cctrace header flags 0x0001 at byte 10"
    );

    // Forcing the binary format on something else.
    let e = common::reader("x.trace", " L 10,4\n", Some(Format::Binary))
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "x.trace: not a cctrace file: bad magic 20 4c 20 31 30 2c 34 0a at byte 0 (expected \"CCTRACE\\0\")"
    );

    // Cut inside the header.
    let e = read("h.cctrace", good[..12].to_vec()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "h.cctrace: bad header at byte 12: truncated header (12 of 16 bytes)"
    );
    let e = read("h.cctrace", good[..18].to_vec()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "h.cctrace: bad header at byte 18: truncated header (18 of 20 bytes with metadata and CRC)"
    );
    // A flipped bit in the metadata length.
    let mut bad = good.clone();
    bad[12] ^= 1;
    let msg = read("m.cctrace", bad).unwrap_err().to_string();
    assert!(
        msg.starts_with("m.cctrace: bad header at byte 17: header CRC mismatch"),
        "{msg}"
    );
    assert_eq!(&good[..8], &MAGIC);
}

#[test]
fn truncation_errors_name_chunk_and_offset() {
    let records = capture_like(3000);
    let bytes = write(&records, Some(1000));
    // Find chunk boundaries by walking the headers.
    let mut offsets = Vec::new();
    let mut pos = 20;
    loop {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        offsets.push(pos);
        pos += 12 + len;
    }
    assert!(offsets.len() > 3);
    let end_marker = pos;

    // Cut in the middle of chunk 2's payload.
    let c2 = offsets[2];
    let e = read("t.cctrace", bytes[..c2 + 12 + 10].to_vec()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "t.cctrace: chunk 2 at byte {c2}: truncated chunk payload (needs "
        )),
        "{msg}"
    );
    assert!(msg.ends_with("file ends after 10)"), "{msg}");
    // Cut inside chunk 3's header.
    let c3 = offsets[3];
    let msg = read("t.cctrace", bytes[..c3 + 5].to_vec())
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        format!("t.cctrace: chunk 3 at byte {c3}: truncated chunk header (needs 12 bytes, file ends after 5)")
    );
    // Cut exactly between chunks: the missing end marker tells.
    let msg = read("t.cctrace", bytes[..c3].to_vec())
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        format!("t.cctrace: truncated: no end-of-trace marker after chunk 3 (file ends at byte {c3}; cut short?)")
    );
    // Cut inside the end marker.
    let msg = read("t.cctrace", bytes[..end_marker + 15].to_vec())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("truncated end marker"), "{msg}");
    // Data after the end marker.
    let mut extra = bytes.clone();
    extra.push(0);
    let msg = read("t.cctrace", extra).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "t.cctrace: data after the end-of-trace marker at byte {}",
            bytes.len()
        )
    );

    // The records before the damage are delivered first.
    let mut r = common::reader("t", bytes[..c3].to_vec(), None).unwrap();
    let mut all = Vec::new();
    let mut buf = Vec::new();
    let err = loop {
        match r.read_batch(&mut buf, 100) {
            Ok(0) => panic!("no error"),
            Ok(_) => all.extend_from_slice(&buf),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, TraceError::Binary { .. }));
    assert!(!all.is_empty());
    assert_eq!(&records[..all.len()], &all[..]);
}

#[test]
fn flipped_byte_is_a_crc_error() {
    let records = capture_like(3000);
    let bytes = write(&records, Some(1000));
    let first_len = u32::from_le_bytes(bytes[20..24].try_into().unwrap()) as usize;
    let c1 = 20 + 12 + first_len;
    let mut bad = bytes.clone();
    bad[c1 + 12 + 7] ^= 0x10;
    let msg = read("t.cctrace", bad).unwrap_err().to_string();
    assert!(
        msg.starts_with(&format!(
            "t.cctrace: chunk 1 at byte {c1}: CRC mismatch (stored 0x"
        )),
        "{msg}"
    );
    assert!(msg.ends_with("corrupt data"), "{msg}");
}

#[test]
fn compressed_cctrace_reads_the_same() {
    let records = capture_like(20_000);
    let bytes = write(&records, None);
    assert_eq!(read("t.cctrace.gz", common::gzip(&bytes)).unwrap(), records);
    assert_eq!(
        read("t.cctrace.zst", common::zstd(&bytes)).unwrap(),
        records
    );
}

/// The records of `tests/data/sample-v1.cctrace`, written out by hand:
/// every kind, two threads with OS ids, every ip encoding (unknown, same as
/// before, = addr, delta), size changes, 64-bit addresses, 3+ chunks.
fn sample_v1_records() -> Vec<Record> {
    use RecordKind::*;
    let mut v = vec![
        Record::new(Instr, 0x401000, 4).with_ip(0x401000),
        Record::new(Load, 0x7ffd_1234_5678, 8).with_ip(0x401000),
        Record::new(Instr, 0x401004, 3).with_ip(0x401004),
        Record::new(Store, 0x7ffd_1234_5670, 8).with_ip(0x401004),
        Record::new(Instr, 0x401007, 7).with_ip(0x401007),
        Record::new(Modify, 0x60_1040, 4).with_ip(0x401007),
        Record::new(Prefetch, 0x60_2000, 64).with_ip(0x40100e),
        Record::new(NtStore, 0x7f00_0000_0000, 32)
            .with_ip(0x401020)
            .with_thread(1),
        Record::new(Flush, 0x60_1040, 64)
            .with_ip(0x401030)
            .with_thread(1),
        Record::new(Load, 0xffff_ffff_ffff_fff8, 8)
            .with_ip(0xffff_ffff_8100_0000)
            .with_thread(1),
        Record::new(Load, 0x10, 1),
        Record::new(Store, 0x10, 1 << 20),
    ];
    for i in 0..40u64 {
        let t = (i % 3 == 0) as u32;
        v.push(
            Record::new(Instr, 0x402000 + 4 * i, 4)
                .with_ip(0x402000 + 4 * i)
                .with_thread(t),
        );
        v.push(
            Record::new(Load, 0x60_3000 + 8 * i, 8)
                .with_ip(0x402000 + 4 * i)
                .with_thread(t),
        );
    }
    v
}

const SAMPLE_V1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sample-v1.cctrace");
const SAMPLE_V1_METADATA: &[u8] = b"coldcache-trace sample v1: hand-written records";

fn write_sample_v1() -> Vec<u8> {
    let mut w = TraceWriter::with_version(Vec::new(), SAMPLE_V1_METADATA, 1).unwrap();
    w.set_chunk_size(128);
    w.define_thread(0, 1000).unwrap();
    w.define_thread(1, 1001).unwrap();
    w.write_all(&sample_v1_records()).unwrap();
    w.finish().unwrap()
}

/// Old samples kept under test: the committed v1 file must keep loading,
/// with exactly the records it was written with.
#[test]
fn committed_v1_sample_loads() {
    let mut r = coldcache_trace::open(std::path::Path::new(SAMPLE_V1), None).unwrap();
    assert_eq!(r.format(), Format::Binary);
    assert_eq!(r.metadata(), Some(SAMPLE_V1_METADATA));
    let records = common::read_all(&mut r, 10).unwrap();
    assert_eq!(records, sample_v1_records());
    assert_eq!(r.thread_os_id(0), Some(1000));
    assert_eq!(r.thread_os_id(1), Some(1001));
    assert_eq!(r.thread_os_id(2), None);
    // A few records checked literally, independent of the list above.
    assert_eq!(records.len(), 92);
    assert_eq!(
        records[9],
        Record {
            kind: RecordKind::Load,
            addr: 0xffff_ffff_ffff_fff8,
            size: 8,
            ip: 0xffff_ffff_8100_0000,
            thread: 1,
            stack: 0,
            unmodelled: false,
        }
    );
    assert_eq!(records[11].size, 1 << 20);
    let bytes = std::fs::read(SAMPLE_V1).unwrap();
    assert_eq!(&bytes[..10], b"CCTRACE\0\x01\x00");
    // Several chunks.
    let first_len = u32::from_le_bytes(
        bytes[20 + SAMPLE_V1_METADATA.len()..][..4]
            .try_into()
            .unwrap(),
    );
    assert!((first_len as usize) < bytes.len() / 3);
}

/// The v1 writer is stable: it still writes the committed sample byte for
/// byte. If an encoding change is intended, it needs a new format version
/// (and the v1 sample stays, read by the v1 decoder).
#[test]
fn v1_writer_output_is_stable() {
    let committed = std::fs::read(SAMPLE_V1).unwrap();
    assert!(
        committed == write_sample_v1(),
        "the writer no longer writes the v1 sample byte for byte"
    );
}

/// Regenerates the sample (only when deliberately asked:
/// `COLDCACHE_WRITE_SAMPLE=1 cargo test -p coldcache-trace --test binary -- --ignored`).
#[test]
#[ignore]
fn regenerate_v1_sample() {
    if std::env::var_os("COLDCACHE_WRITE_SAMPLE").is_some() {
        std::fs::write(SAMPLE_V1, write_sample_v1()).unwrap();
    }
}

/// The records of `tests/data/sample-v2.cctrace`: the v1 sample's records
/// with stacks on two threads (switches within a chunk and across chunk
/// starts), instructions marked unmodelled, and a dump-skeleton
/// attachment after the records.
fn sample_v2_records() -> Vec<Record> {
    let mut v = sample_v1_records();
    for (i, r) in v.iter_mut().enumerate() {
        r.stack = [0, 1, 1, 2, 7, 300][(i / 3) % 6] + r.thread * 1000;
        r.unmodelled = r.kind == RecordKind::Instr && i % 5 == 0;
    }
    v
}

const SAMPLE_V2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sample-v2.cctrace");
const SAMPLE_V2_METADATA: &[u8] = b"coldcache-trace sample v2: hand-written records with stacks";
const SAMPLE_V2_ATTACHMENT: &[u8] = b"a dump skeleton stands here";

fn write_sample_v2() -> Vec<u8> {
    let mut w = TraceWriter::with_metadata(Vec::new(), SAMPLE_V2_METADATA).unwrap();
    w.set_chunk_size(128);
    w.define_thread(0, 1000).unwrap();
    w.define_thread(1, 1001).unwrap();
    w.write_all(&sample_v2_records()).unwrap();
    w.attach(ATTACH_DUMP_SKELETON, SAMPLE_V2_ATTACHMENT)
        .unwrap();
    w.finish().unwrap()
}

/// The committed v2 sample keeps loading with its stacks, unmodelled
/// marks and attachment; today's writer still writes it byte for byte.
#[test]
fn committed_v2_sample_loads_and_writer_is_stable() {
    let mut r = coldcache_trace::open(std::path::Path::new(SAMPLE_V2), None).unwrap();
    assert_eq!(r.version(), Some(2));
    assert_eq!(r.metadata(), Some(SAMPLE_V2_METADATA));
    assert_eq!(r.attachment(ATTACH_DUMP_SKELETON), None);
    let records = common::read_all(&mut r, 10).unwrap();
    assert_eq!(records, sample_v2_records());
    assert_eq!(
        r.attachment(ATTACH_DUMP_SKELETON),
        Some(SAMPLE_V2_ATTACHMENT)
    );
    // Literally, independent of the list above: (kind, thread, stack,
    // unmodelled) of a few records.
    let at = |i: usize| {
        let r = &records[i];
        (r.kind, r.thread, r.stack, r.unmodelled)
    };
    assert_eq!(at(9), (RecordKind::Load, 1, 1002, false));
    assert_eq!(at(12), (RecordKind::Instr, 1, 1007, false));
    assert_eq!(at(20), (RecordKind::Instr, 0, 0, true));
    assert_eq!(at(30), (RecordKind::Instr, 1, 1007, true));
    let bytes = std::fs::read(SAMPLE_V2).unwrap();
    assert_eq!(&bytes[..10], b"CCTRACE\0\x02\x00");
    assert!(
        bytes == write_sample_v2(),
        "the writer no longer writes the v2 sample byte for byte"
    );
}

/// Regenerates the v2 sample (only when deliberately asked, as for v1).
#[test]
#[ignore]
fn regenerate_v2_sample() {
    if std::env::var_os("COLDCACHE_WRITE_SAMPLE").is_some() {
        std::fs::write(SAMPLE_V2, write_sample_v2()).unwrap();
    }
}

/// Version 1 cannot hold stacks, unmodelled marks or attachments: the
/// writer refuses them rather than dropping them; a v1 reader-compatible
/// file of plain records is still written on request.
#[test]
fn v1_writer_refuses_what_v1_cannot_hold() {
    use RecordKind::*;
    let mut w = TraceWriter::with_version(Vec::new(), b"", 1).unwrap();
    let e = w.write(&Record::new(Load, 8, 8).with_stack(3)).unwrap_err();
    assert!(
        e.to_string().contains("cctrace version 1 cannot hold"),
        "{e}"
    );
    assert!(w.attach(ATTACH_DUMP_SKELETON, b"x").is_err());
    w.write(&Record::new(Load, 8, 8)).unwrap();
    let bytes = w.finish().unwrap();
    assert_eq!(&bytes[8..10], &[1, 0]);
    assert_eq!(
        read("v1.cctrace", bytes).unwrap(),
        [Record::new(Load, 8, 8)]
    );
    assert!(TraceWriter::with_version(Vec::new(), b"", 3).is_err());
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    let mut bad = Record::new(Load, 8, 8);
    bad.unmodelled = true;
    assert!(w.write(&bad).is_err(), "only an instruction is unmodelled");
}

/// A v1 file whose tag has bit 6 set is corrupt (the bit means
/// unmodelled only in version 2), and a stack switch in a v1 file is an
/// unknown control tag.
#[test]
fn v2_items_in_a_v1_file_are_corrupt() {
    use RecordKind::*;
    let mut w = TraceWriter::with_version(Vec::new(), b"", 1).unwrap();
    w.write(&Record::new(Instr, 0x40, 4).with_ip(0x40)).unwrap();
    let good = w.finish().unwrap();
    // Header 16 + CRC 4, chunk header 12: the tag is at byte 32.
    for (tag, want) in [
        (0x78u8, "reserved bits"),
        (0x17, "unknown control tag 0x17"),
    ] {
        let mut bad = good.clone();
        bad[32] = tag;
        let crc = crc32fast::hash(&bad[32..bad.len() - 20]);
        bad[28..32].copy_from_slice(&crc.to_le_bytes());
        let e = read("old.cctrace", bad).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

/// The worked example of docs/trace-format.md, byte for byte (CRCs
/// recomputed here).
#[test]
fn doc_example_bytes() {
    use RecordKind::*;
    let records = [
        Record::new(Instr, 0x401000, 4).with_ip(0x401000),
        Record::new(Load, 0x7ffd_1234_5678, 8).with_ip(0x401000),
    ];
    let bytes = write(&records, None);
    let payload: &[u8] = &[
        0x38, 0x80, 0xc0, 0x80, 0x04, 0x04, 0x19, 0xf0, 0xd9, 0xa2, 0xa3, 0xa2, 0xff, 0x3f, 0x08,
    ];
    let mut want = b"CCTRACE\0\x02\x00\x00\x00\x00\x00\x00\x00".to_vec();
    let header_crc = crc32fast::hash(&want);
    want.extend_from_slice(&header_crc.to_le_bytes());
    want.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    want.extend_from_slice(&2u32.to_le_bytes());
    want.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    want.extend_from_slice(payload);
    want.extend_from_slice(&[0; 12]);
    want.extend_from_slice(&2u64.to_le_bytes());
    assert_eq!(bytes, want);
}
