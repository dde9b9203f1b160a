//! The streaming reader and exports (`coldcache_zones::stream`, what
//! `coldcache zones` uses) against the in-memory ones (`format::decode`,
//! `parse::parse`, `export`, `views`), the oracle: same index, problems
//! and bytes out, on the committed samples and on recordings built here
//! with what a reader must survive (ends of zones deeper in the stack,
//! ends of nothing, bytes outside zones, missing and repeated chunks, no
//! clock, a damaged section, zones open at the end) and with more zones
//! than the Chrome export buffers (16,384) under one zone open
//! throughout, so its holes are filled in place.

#[path = "common/stream_check.rs"]
mod stream_check;

use coldcache_zones::format::{
    self, kind, Chunk, Decoded, Event, LabelInfo, RecordingInfo, ThreadInfo,
};
use std::path::Path;

fn data(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .unwrap()
}

fn ev(k: u64, payload: u64, tsc: u64) -> Event {
    Event {
        kind: k,
        payload,
        tsc,
    }
}

fn labels() -> Vec<LabelInfo> {
    (1..=4)
        .map(|id| LabelInfo {
            id,
            name: format!("zone{id}"),
            file: if id % 2 == 0 {
                "z.rs".into()
            } else {
                String::new()
            },
            line: id * 10,
        })
        .collect()
}

fn info() -> Option<RecordingInfo> {
    Some(RecordingInfo {
        tsc_hz: 3e9,
        start_tsc: 500,
        pid: 7,
        dropped_events: 0,
        arena_bytes: 1 << 20,
        exe: "/bin/x".into(),
    })
}

/// Cuts a thread's events into chunks of `per` events, numbered from 0.
fn chunks(thread: u32, events: Vec<Event>, per: usize) -> Vec<Chunk> {
    events
        .chunks(per)
        .enumerate()
        .map(|(i, c)| Chunk {
            thread,
            seq: i as u32,
            events: c.to_vec(),
        })
        .collect()
}

#[test]
fn committed_samples_read_the_same_streamed() {
    assert_eq!(stream_check::same_both_ways(&data("sample-v1.zones")), 2);
    assert_eq!(stream_check::same_both_ways(&data("sample-v2.zones")), 2);
}

#[test]
fn unbalanced_gapped_and_clockless_recordings_read_the_same_streamed() {
    let mut t = 1000u64;
    let mut tick = |d: u64| {
        t += d;
        t
    };
    // Thread 1: nesting with an end of an outer zone closing inner ones,
    // an end of nothing, bytes outside any zone, frame marks, time going
    // backwards, a zone left open.
    let mut a = vec![
        ev(kind::BEGIN, 1, tick(5)),
        ev(kind::BYTES, 4096, tick(1)),
        ev(kind::BEGIN, 2, tick(5)),
        ev(kind::FUNC_ENTER, 0x4000, tick(5)),
        ev(kind::END, 1, tick(7)), // closes 0x4000 and 2 as well
        ev(kind::END, 3, tick(1)), // nothing open
        ev(kind::BYTES, 9, tick(1)),
        ev(kind::FRAME, 1, tick(1)),
        ev(kind::BEGIN, 2, tick(3)),
        ev(kind::BEGIN, 2, 10), // before the previous time stamp
        ev(kind::END, 2, tick(4)),
        ev(kind::END, 2, tick(4)),
    ];
    for i in 0..50 {
        a.push(ev(kind::BEGIN, 3, tick(2)));
        a.push(ev(kind::FUNC_ENTER, 0x5000 + (i % 3), tick(2)));
        a.push(ev(kind::FUNC_EXIT, 0x5000 + (i % 3), tick(3)));
        a.push(ev(kind::END, 3, tick(1)));
    }
    a.push(ev(kind::BEGIN, 4, tick(2)));
    a.push(ev(kind::FRAME, 2, tick(2)));
    // Thread 2: a missing chunk and a repeated one.
    let mut b = Vec::new();
    for i in 0..40 {
        b.push(ev(kind::BEGIN, 1 + (i % 4), tick(1)));
        b.push(ev(kind::BEGIN, 2, tick(1)));
        b.push(ev(kind::END, 2, tick(1)));
        b.push(ev(kind::END, 1 + (i % 4), tick(1)));
    }
    let mut cb = chunks(2, b, 7);
    cb.remove(3);
    let again = cb[5].clone();
    cb.push(again);
    let mut all = chunks(1, a, 9);
    all.extend(cb);
    // Chunks in the file in another order than their sequence.
    all.swap(0, 4);
    let threads = vec![
        ThreadInfo {
            index: 1,
            tid: 11,
            name: "main".into(),
        },
        ThreadInfo {
            index: 2,
            tid: 0,
            name: String::new(),
        },
    ];
    let d = Decoded {
        info: info(),
        labels: labels(),
        threads: threads.clone(),
        chunks: all.clone(),
        ..Default::default()
    };
    let bytes = format::encode(&d);
    assert_eq!(stream_check::same_both_ways(&bytes), 2);
    // No clock: times from the first zone.
    let d = Decoded {
        info: None,
        labels: labels(),
        threads,
        chunks: all,
        ..Default::default()
    };
    let bytes = format::encode(&d);
    assert_eq!(stream_check::same_both_ways(&bytes), 2);
    // Damaged in the middle (a chunk's byte flipped: the checksum stops
    // reading there), and cut short.
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x55;
    stream_check::same_both_ways(&flipped);
    stream_check::same_both_ways(&bytes[..bytes.len() * 2 / 3]);
    stream_check::same_both_ways(&bytes[..10]);
}

#[test]
fn more_zones_than_the_chrome_buffer_under_one_open_zone() {
    // main open throughout; 30,000 inner zones two deep; another open
    // zone across the buffer's boundaries; then a second thread.
    let mut t = 0u64;
    let mut a = vec![ev(kind::BEGIN, 1, 1)];
    for i in 0..30_000u64 {
        if i % 7000 == 0 {
            a.push(ev(kind::BEGIN, 2, t));
        }
        t += 3;
        a.push(ev(kind::BEGIN, 3, t));
        a.push(ev(kind::FUNC_ENTER, 0x100 + i % 5, t + 1));
        a.push(ev(kind::FUNC_EXIT, 0x100 + i % 5, t + 2));
        a.push(ev(kind::END, 3, t + 2));
        if i % 7000 == 6999 {
            a.push(ev(kind::END, 2, t + 3));
        }
        if i % 1000 == 0 {
            a.push(ev(kind::FRAME, i / 1000, t + 3));
        }
    }
    a.push(ev(kind::END, 1, t + 10));
    let b: Vec<Event> = (0..2000u64)
        .flat_map(|i| [ev(kind::BEGIN, 4, i * 10), ev(kind::END, 4, i * 10 + 4)])
        .collect();
    let mut all = chunks(1, a, 4095);
    all.extend(chunks(5, b, 4095));
    let d = Decoded {
        info: info(),
        labels: labels(),
        chunks: all,
        ..Default::default()
    };
    assert_eq!(stream_check::same_both_ways(&format::encode(&d)), 2);
}
