//! Parser, views and format against hand-computed cases: every expected
//! number below was worked out by hand from the event lists, not taken
//! from the code's output.

use coldcache_zones::export;
use coldcache_zones::format::{
    self, kind, Chunk, Decoded, Event, LabelInfo, RecordingInfo, ThreadInfo, ZoneKey,
};
use coldcache_zones::parse::parse;
use coldcache_zones::views::{self, percentile, stats, Unit};

fn ev(k: u64, payload: u64, tsc: u64) -> Event {
    Event {
        kind: k,
        payload,
        tsc,
    }
}
fn b(id: u64, t: u64) -> Event {
    ev(kind::BEGIN, id, t)
}
fn e(id: u64, t: u64) -> Event {
    ev(kind::END, id, t)
}

fn labels() -> Vec<LabelInfo> {
    ["frame", "update", "draw", "physics"]
        .iter()
        .enumerate()
        .map(|(i, n)| LabelInfo {
            id: i as u32 + 1,
            name: n.to_string(),
            file: "game.rs".into(),
            line: 10 * (i as u32 + 1),
        })
        .collect()
}

fn decoded(chunks: Vec<Chunk>) -> Decoded {
    Decoded {
        info: Some(RecordingInfo {
            tsc_hz: 1e9, // 1 tick = 1 ns: times below are in ns
            start_tsc: 1000,
            pid: 1,
            dropped_events: 0,
            arena_bytes: 0,
            exe: "game".into(),
        }),
        labels: labels(),
        threads: vec![ThreadInfo {
            index: 1,
            tid: 77,
            name: "main".into(),
        }],
        modules: vec![],
        chunks,
        complete: true,
        error: None,
    }
}

/// Two frames:
/// frame 1000..2000: update 1100..1500 (physics 1200..1400), draw 1600..1900
/// frame 2000..2600: update 2050..2150, draw 2200..2500
fn two_frames() -> Vec<Event> {
    vec![
        b(1, 1000),
        b(2, 1100),
        b(4, 1200),
        e(4, 1400),
        e(2, 1500),
        b(3, 1600),
        e(3, 1900),
        e(1, 2000),
        b(1, 2000),
        b(2, 2050),
        e(2, 2150),
        b(3, 2200),
        e(3, 2500),
        e(1, 2600),
    ]
}

#[test]
fn top_down_totals_self_and_calls_by_hand() {
    let rec = parse(&decoded(vec![Chunk {
        thread: 1,
        seq: 0,
        events: two_frames(),
    }]));
    assert!(rec.problems.is_empty(), "{:?}", rec.problems);
    let t = &rec.threads[0];
    assert_eq!((t.tid, t.name.as_str(), t.spans.len()), (77, "main", 7));
    let tree = views::top_down(&[t]);
    let frame = tree.find(0, ZoneKey::Label(1)).unwrap();
    let n = &tree.nodes[frame];
    // total 1000 + 600; children: update 400+100, draw 300+300 -> self 1600-1100
    assert_eq!((n.calls, n.total, n.self_ticks), (2, 1600, 500));
    let upd = &tree.nodes[tree.find(frame, ZoneKey::Label(2)).unwrap()];
    assert_eq!((upd.calls, upd.total, upd.self_ticks), (2, 500, 300));
    let draw = &tree.nodes[tree.find(frame, ZoneKey::Label(3)).unwrap()];
    assert_eq!((draw.calls, draw.total, draw.self_ticks), (2, 600, 600));
    let phys = &tree.nodes[tree
        .find(
            tree.find(frame, ZoneKey::Label(2)).unwrap(),
            ZoneKey::Label(4),
        )
        .unwrap()];
    assert_eq!((phys.calls, phys.total, phys.self_ticks), (1, 200, 200));
    let st = stats(&n.durations);
    assert_eq!((st.min, st.max, st.mean), (600, 1000, 800.0));
}

#[test]
fn bottom_up_splits_self_time_by_caller() {
    // physics called from update (200 ns self) and directly from frame
    // (50 ns self): bottom-up root physics = 250, children update 200,
    // frame 50; under update, frame 200.
    let events = vec![
        b(1, 0),
        b(2, 10),
        b(4, 20),
        e(4, 220),
        e(2, 300),
        b(4, 400),
        e(4, 450),
        e(1, 500),
    ];
    let rec = parse(&decoded(vec![Chunk {
        thread: 1,
        seq: 0,
        events,
    }]));
    let t = &rec.threads[0];
    let bu = views::bottom_up(&[t]);
    let phys = bu.find(0, ZoneKey::Label(4)).unwrap();
    assert_eq!(bu.nodes[phys].total, 250);
    let via_update = bu.find(phys, ZoneKey::Label(2)).unwrap();
    assert_eq!(bu.nodes[via_update].total, 200);
    assert_eq!(
        bu.nodes[bu.find(via_update, ZoneKey::Label(1)).unwrap()].total,
        200
    );
    assert_eq!(
        bu.nodes[bu.find(phys, ZoneKey::Label(1)).unwrap()].total,
        50
    );
    // frame self = 500 - 290 (update) - 50 (physics) = 160
    assert_eq!(bu.nodes[bu.find(0, ZoneKey::Label(1)).unwrap()].total, 160);
    // update self = 290 - 200 = 90
    assert_eq!(bu.nodes[bu.find(0, ZoneKey::Label(2)).unwrap()].total, 90);
    assert_eq!(bu.nodes[0].total, 500);
}

#[test]
fn flat_counts_recursive_instances_once() {
    // update recursing into itself: outer 0..100, inner 10..60.
    let events = vec![b(2, 0), b(2, 10), e(2, 60), e(2, 100)];
    let rec = parse(&decoded(vec![Chunk {
        thread: 1,
        seq: 0,
        events,
    }]));
    let rows = views::flat(&[&rec.threads[0]]);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].total, rows[0].self_ticks, rows[0].stats.calls),
        (100, 100, 2)
    );
}

#[test]
fn percentiles_are_nearest_rank() {
    let v: Vec<u64> = (1..=10).collect();
    assert_eq!(percentile(&v, 50.0), 5);
    assert_eq!(percentile(&v, 90.0), 9);
    assert_eq!(percentile(&v, 99.0), 10);
    assert_eq!(percentile(&v, 0.0), 1);
    assert_eq!(percentile(&[], 50.0), 0);
}

#[test]
fn per_byte_and_units() {
    // decode: 2000 ticks over 1000 bytes at 2 GHz = 2 clk/B = 1 ns/B.
    let mut d = decoded(vec![Chunk {
        thread: 1,
        seq: 0,
        events: vec![b(2, 0), ev(kind::BYTES, 1000, 0), e(2, 2000)],
    }]);
    d.info.as_mut().unwrap().tsc_hz = 2e9;
    let rec = parse(&d);
    let mut out = String::new();
    views::render_flat(
        &views::flat(&[&rec.threads[0]]),
        &rec,
        Unit::Clocks,
        &mut out,
    );
    assert!(out.contains("2.000 clk/B"), "{out}");
    let mut out = String::new();
    views::render_flat(&views::flat(&[&rec.threads[0]]), &rec, Unit::Us, &mut out);
    assert!(out.contains("1.000 ns/B"), "{out}");
    assert!(out.contains("total us"), "{out}");
    assert_eq!(Unit::Ms.of(2e6, 2e9), 1.0);
}

#[test]
fn leaves_get_no_redundant_self_row() {
    let rec = parse(&decoded(vec![Chunk {
        thread: 1,
        seq: 0,
        events: two_frames(),
    }]));
    let mut out = String::new();
    views::render_tree(
        &views::top_down(&[&rec.threads[0]]),
        &rec,
        Unit::Clocks,
        &mut out,
    );
    // frame (500 self) and update (300 self) have children and self time:
    // one [self] row each; physics and draw are leaves: none.
    assert_eq!(out.matches("[self]").count(), 2, "{out}");
}

#[test]
fn unbalanced_recordings_are_reported_with_position_and_still_parsed() {
    let events = vec![
        b(1, 0),
        b(2, 10),
        e(3, 20), // #2: end of draw, never opened
        e(1, 30), // #3: ends frame while update is open
        b(1, 40),
        b(4, 50), // still open at the end
    ];
    let rec = parse(&decoded(vec![Chunk {
        thread: 1,
        seq: 0,
        events,
    }]));
    let p: Vec<(u64, &str)> = rec
        .problems
        .iter()
        .map(|p| (p.event, p.what.as_str()))
        .collect();
    assert_eq!(p.len(), 3, "{p:?}");
    assert_eq!(p[0].0, 2);
    assert!(p[0].1.contains("not open"));
    assert_eq!(p[1].0, 3);
    assert!(p[1].1.contains("still open"));
    assert_eq!(p[2].0, 6);
    assert!(p[2].1.contains("2 zone(s) still open"));
    let t = &rec.threads[0];
    assert_eq!(t.spans.len(), 4);
    // update closed with frame at 30; the second frame closed at 50.
    assert_eq!((t.spans[1].end, t.spans[1].closed_by_parser), (30, true));
    assert_eq!((t.spans[0].end, t.spans[0].closed_by_parser), (30, false));
    assert_eq!((t.spans[2].end, t.spans[2].closed_by_parser), (50, true));
}

#[test]
fn chunks_are_ordered_by_sequence_and_gaps_reported() {
    let ev = two_frames();
    let (a, rest) = ev.split_at(5);
    let (bb, c) = rest.split_at(4);
    // Chunks stored out of order (as the streaming writer may).
    let chunks = vec![
        Chunk {
            thread: 1,
            seq: 1,
            events: bb.to_vec(),
        },
        Chunk {
            thread: 1,
            seq: 0,
            events: a.to_vec(),
        },
        Chunk {
            thread: 1,
            seq: 2,
            events: c.to_vec(),
        },
    ];
    let rec = parse(&decoded(chunks.clone()));
    assert!(rec.problems.is_empty(), "{:?}", rec.problems);
    assert_eq!(rec.threads[0].spans.len(), 7);
    // Drop chunk 1: a gap.
    let rec = parse(&decoded(vec![chunks[1].clone(), chunks[2].clone()]));
    assert!(
        rec.problems
            .iter()
            .any(|p| p.what.contains("chunks 1..1 are missing")),
        "{:?}",
        rec.problems
    );
}

#[test]
fn file_round_trip_and_truncation_keep_what_was_read() {
    let d = decoded(vec![
        Chunk {
            thread: 1,
            seq: 0,
            events: two_frames(),
        },
        Chunk {
            thread: 2,
            seq: 0,
            events: vec![b(3, 5), e(3, 9)],
        },
    ]);
    let bytes = format::encode(&d);
    let back = format::decode(&bytes);
    assert!(back.error.is_none() && back.complete);
    assert_eq!(back.chunks, d.chunks);
    assert_eq!(back.labels, d.labels);
    // Cut inside the second chunk: the first is still there, the error
    // names the offset of the damaged section (the first section's length
    // is its header's length field plus 12 + 4).
    let first_len = 16 + 12 + u64::from_le_bytes(bytes[20..28].try_into().unwrap()) as usize + 4;
    let cut = &bytes[..first_len + 20];
    let back = format::decode(cut);
    assert_eq!(back.chunks.len(), 1);
    assert_eq!(
        back.error,
        Some(format::FormatError::Truncated {
            offset: first_len as u64,
            what: "section payload"
        })
    );
    assert!(!parse(&back).problems.is_empty());
    // A flipped payload byte is a checksum error at that section.
    let mut bad = bytes.clone();
    bad[16 + 12 + 20] ^= 0xff;
    assert!(matches!(
        format::decode(&bad).error,
        Some(format::FormatError::Checksum { offset: 16, .. })
    ));
    assert_eq!(
        format::decode(b"hello world, not zones").error,
        Some(format::FormatError::BadMagic)
    );
}

#[test]
fn damaged_files_never_panic() {
    let d = decoded(vec![Chunk {
        thread: 1,
        seq: 0,
        events: two_frames(),
    }]);
    let bytes = format::encode(&d);
    for cut in 0..bytes.len() {
        let _ = parse(&format::decode(&bytes[..cut]));
    }
    let mut x = 0x9e3779b97f4a7c15u64;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = bytes.clone();
        let i = (x as usize) % b.len();
        b[i] = (x >> 32) as u8;
        let _ = parse(&format::decode(&b));
    }
}

/// The committed samples of every format version stay readable, with the
/// contents written down when they were made (tests/data/README.md).
fn check_sample(bytes: &[u8]) {
    let d = format::decode(bytes);
    assert!(d.error.is_none() && d.complete, "{:?}", d.error);
    let rec = parse(&d);
    assert!(rec.problems.is_empty(), "{:?}", rec.problems);
    assert_eq!(rec.threads.len(), 2);
    assert_eq!(rec.threads[0].name, "main");
    assert_eq!(rec.threads[1].name, "worker");
    assert_eq!(rec.name(ZoneKey::Label(1)), "frame");
    assert_eq!(rec.threads[0].spans.len(), 7);
    assert_eq!(rec.threads[0].frames, vec![(2000, 1), (2600, 2)]);
    assert_eq!(rec.threads[1].spans.len(), 1);
    assert_eq!(rec.threads[1].spans[0].bytes, 4096);
    let tree = views::top_down(&[&rec.threads[0]]);
    let frame = tree.find(0, ZoneKey::Label(1)).unwrap();
    assert_eq!(tree.nodes[frame].total, 1600);
    assert_eq!(d.modules[0].path, "/usr/bin/game");
    let s = format::summarize(&mut std::io::Cursor::new(bytes)).unwrap();
    assert_eq!((s.chunks, s.events, s.tables.threads.len()), (2, 19, 2));
    assert!(s.tables.complete);
}

#[test]
fn committed_v1_sample_still_reads() {
    let bytes = include_bytes!("data/sample-v1.zones");
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 1);
    check_sample(bytes);
}

#[test]
fn committed_v2_sample_still_reads() {
    let bytes = include_bytes!("data/sample-v2.zones");
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 2);
    check_sample(bytes);
}

#[test]
fn packed_chunk_bytes_by_hand() {
    // BEGIN label 1 at 100, END label 1 at 150:
    // event 1: zigzag(1 - 0) = 2, (2 << 3) | 1 = 0x11; zigzag(100) = 200 = 0xc8 0x01
    // event 2: zigzag(0) = 0, (0 << 3) | 2 = 0x02; zigzag(50) = 100 = 0x64
    let words = [
        format::pack(kind::BEGIN, 1),
        100,
        format::pack(kind::END, 1),
        150,
    ];
    let mut p = Vec::new();
    format::packed_chunk_payload(7, 3, &words, &mut p);
    let mut want = vec![7, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0];
    want.extend_from_slice(&[0x11, 0xc8, 0x01, 0x02, 0x64]);
    assert_eq!(p, want);
    // A time stamp going back (migration) and a large address still round trip.
    let words = [
        format::pack(kind::FUNC_ENTER, 0x7fff_1234_5678),
        1 << 40,
        format::pack(kind::FUNC_EXIT, 0x7fff_1234_5678),
        (1 << 40) - 5,
    ];
    let mut p = Vec::new();
    format::packed_chunk_payload(1, 0, &words, &mut p);
    let mut file = format::header();
    format::write_section(&mut file, format::section::CHUNK_PACKED, &p);
    let d = format::decode(&file);
    assert_eq!(d.error, None);
    assert_eq!(
        d.chunks[0].events[1],
        Event {
            kind: kind::FUNC_EXIT,
            payload: 0x7fff_1234_5678,
            tsc: (1 << 40) - 5
        }
    );
}

#[test]
fn summarize_reports_truncation() {
    let bytes = include_bytes!("data/sample-v2.zones");
    let cut = &bytes[..bytes.len() - 30];
    assert!(matches!(
        format::summarize(&mut std::io::Cursor::new(cut)),
        Err(format::FormatError::Truncated { .. })
    ));
    assert_eq!(
        format::summarize(&mut std::io::Cursor::new(b"nope")).unwrap_err(),
        format::FormatError::BadMagic
    );
}

#[test]
fn folded_and_dot_by_hand() {
    let rec = parse(&decoded(vec![Chunk {
        thread: 1,
        seq: 0,
        events: two_frames(),
    }]));
    let folded = export::folded(&rec, Unit::Clocks);
    let mut lines: Vec<&str> = folded.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "main;frame 500",
            "main;frame;draw 600",
            "main;frame;update 300",
            "main;frame;update;physics 200"
        ]
    );
    let dot = export::dot(&rec, Unit::Clocks);
    assert!(dot.starts_with("digraph zones {"));
    assert_eq!(dot.matches(" -> ").count(), 3);
    assert!(
        dot.contains("frame\\ntotal 1600.000 clk (100.0%)\\nself 500.000 clk\\n2 calls"),
        "{dot}"
    );
}

#[test]
fn speedscope_events_open_and_close_in_order() {
    let rec = parse(&decoded(vec![Chunk {
        thread: 1,
        seq: 0,
        events: two_frames(),
    }]));
    let v = export::speedscope(&rec, "x");
    let evs = v["profiles"][0]["events"].as_array().unwrap();
    assert_eq!(evs.len(), 14);
    // frame opens at 0 ns (start_tsc 1000), physics closes at 400 ns.
    assert_eq!(evs[0]["type"], "O");
    assert_eq!(evs[0]["at"], 0.0);
    assert_eq!(evs[3]["type"], "C");
    assert_eq!(evs[3]["at"], 400.0);
    let mut depth = 0i32;
    for e in evs {
        depth += if e["type"] == "O" { 1 } else { -1 };
        assert!(depth >= 0);
    }
    assert_eq!(depth, 0);
}

/// Regression: the packed-chunk reader took a ten-byte varint whose last
/// byte held bits past the 64th and dropped them silently; it now uses
/// the one LEB128 reader (`coldcache_fsio::varint`), which refuses it.
#[test]
fn a_packed_time_stamp_over_64_bits_is_a_damaged_section() {
    let mut p = Vec::new();
    p.extend_from_slice(&0u32.to_le_bytes()); // thread
    p.extend_from_slice(&0u32.to_le_bytes()); // seq
    p.extend_from_slice(&1u32.to_le_bytes()); // one event
                                              // Tag: zigzag(payload 1 - 0) = 2, shifted past the 3 kind bits.
    p.push(2 << 3 | kind::BEGIN as u8);
    p.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]);
    let mut file = format::header();
    format::write_section(&mut file, format::section::CHUNK_PACKED, &p);
    let d = format::decode(&file);
    let e = d.error.expect("a damaged section").to_string();
    assert!(e.contains("varint") && e.contains("64 bits"), "{e}");
    assert!(d.chunks.is_empty());
    // With the tenth byte 0x01 the number is u64::MAX, read: zigzag
    // decodes it to i64::MIN, a time stamp of 2^63 after 0.
    *p.last_mut().unwrap() = 0x01;
    let mut file = format::header();
    format::write_section(&mut file, format::section::CHUNK_PACKED, &p);
    let d = format::decode(&file);
    assert!(d.error.is_none(), "{:?}", d.error);
    assert_eq!(d.chunks[0].events[0].tsc, 1u64 << 63);
}

/// A streamed file repeats its tables (sections appended as labels and
/// threads appear, then the trailer's whole tables): the reader keeps one
/// entry per label id and thread index, the last one written, and each
/// module once — in `decode` and in `summarize` alike.
#[test]
fn repeated_table_sections_keep_the_last_entry_of_each_id() {
    let label = |id, name: &str| LabelInfo {
        id,
        name: name.into(),
        file: "f.c".into(),
        line: id,
    };
    let thread = |index, name: &str| ThreadInfo {
        index,
        tid: 100 + index,
        name: name.into(),
    };
    let module = format::ModuleInfo {
        start: 0x1000,
        end: 0x2000,
        file_offset: 0,
        path: "/bin/x".into(),
    };
    let mut f = format::header();
    let sec = |f: &mut Vec<u8>, tag, p: Vec<u8>| format::write_section(f, tag, &p);
    sec(
        &mut f,
        format::section::LABELS,
        format::labels_payload(&[label(1, "old")]),
    );
    sec(
        &mut f,
        format::section::THREADS,
        format::threads_payload(&[thread(1, "")]),
    );
    sec(
        &mut f,
        format::section::MODULES,
        format::modules_payload(std::slice::from_ref(&module)),
    );
    sec(
        &mut f,
        format::section::LABELS,
        format::labels_payload(&[label(1, "new"), label(2, "two")]),
    );
    sec(
        &mut f,
        format::section::THREADS,
        format::threads_payload(&[thread(1, "main")]),
    );
    sec(
        &mut f,
        format::section::MODULES,
        format::modules_payload(std::slice::from_ref(&module)),
    );
    let d = format::decode(&f);
    assert!(d.error.is_none(), "{:?}", d.error);
    let names: Vec<(u32, &str)> = d.labels.iter().map(|l| (l.id, l.name.as_str())).collect();
    assert_eq!(names, [(1, "new"), (2, "two")]);
    assert_eq!(d.threads, [thread(1, "main")]);
    assert_eq!(d.modules, std::slice::from_ref(&module));
    let s = format::summarize(&mut std::io::Cursor::new(&f)).unwrap();
    assert_eq!(s.tables.labels, d.labels);
    assert_eq!(s.tables.threads, d.threads);
    assert_eq!(s.tables.modules, d.modules);
}
