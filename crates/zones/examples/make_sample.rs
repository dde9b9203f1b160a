//! Writes the committed sample of the current zones format version
//! (`tests/data/sample-vN.zones`; run once when a version is made; the
//! files are kept, not regenerated, so that tests prove old files stay
//! readable):
//! `cargo run -p coldcache-zones --example make_sample -- crates/zones/tests/data/sample-v2.zones`
//! (`sample-v1.zones` was written by this program before version 2, with
//! plain `CHUNK` sections.)

use coldcache_zones::format::{
    self, kind, Chunk, Decoded, Event, LabelInfo, ModuleInfo, RecordingInfo, ThreadInfo,
};

fn main() {
    let path = std::env::args().nth(1).expect("usage: make_sample OUT");
    let ev = |k, payload, tsc| Event {
        kind: k,
        payload,
        tsc,
    };
    let (b, e) = (kind::BEGIN, kind::END);
    let main_events = vec![
        ev(b, 1, 1000),
        ev(b, 2, 1100),
        ev(b, 4, 1200),
        ev(e, 4, 1400),
        ev(e, 2, 1500),
        ev(b, 3, 1600),
        ev(e, 3, 1900),
        ev(e, 1, 2000),
        ev(kind::FRAME, 1, 2000),
        ev(b, 1, 2000),
        ev(b, 2, 2050),
        ev(e, 2, 2150),
        ev(b, 3, 2200),
        ev(e, 3, 2500),
        ev(e, 1, 2600),
        ev(kind::FRAME, 2, 2600),
    ];
    let d = Decoded {
        info: Some(RecordingInfo {
            tsc_hz: 1e9,
            start_tsc: 1000,
            pid: 4242,
            dropped_events: 0,
            arena_bytes: 1 << 20,
            exe: "/usr/bin/game".into(),
        }),
        labels: ["frame", "update", "draw", "physics"]
            .iter()
            .enumerate()
            .map(|(i, n)| LabelInfo {
                id: i as u32 + 1,
                name: n.to_string(),
                file: "game.rs".into(),
                line: 10 * (i as u32 + 1),
            })
            .collect(),
        threads: vec![
            ThreadInfo {
                index: 1,
                tid: 4242,
                name: "main".into(),
            },
            ThreadInfo {
                index: 2,
                tid: 4243,
                name: "worker".into(),
            },
        ],
        modules: vec![ModuleInfo {
            start: 0x5555_5555_4000,
            end: 0x5555_5555_8000,
            file_offset: 0x1000,
            path: "/usr/bin/game".into(),
        }],
        chunks: vec![
            Chunk {
                thread: 1,
                seq: 0,
                events: main_events,
            },
            Chunk {
                thread: 2,
                seq: 0,
                events: vec![ev(b, 3, 1300), ev(kind::BYTES, 4096, 1300), ev(e, 3, 1700)],
            },
        ],
        complete: true,
        error: None,
    };
    std::fs::write(&path, format::encode(&d)).expect("write");
}
