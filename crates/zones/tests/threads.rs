//! Eight threads record nested zones at the same time; the recording
//! parses into one consistent hierarchy per thread, and its Chrome/Perfetto
//! export passes a JSON Schema written from the Trace Event Format
//! document (tests/data/trace-event.schema.json). One test per process:
//! the recorder is process-global.

use coldcache_zones::format::{self, ZoneKey};
use coldcache_zones::parse::parse;
use coldcache_zones::{export, views, zone, zone_bytes};

const THREADS: usize = 8;
const FRAMES: usize = 300;

fn work(n: u64) -> u64 {
    (0..n).fold(0u64, |a, x| a.wrapping_mul(31).wrapping_add(x))
}

fn frame(i: usize) {
    zone!("frame");
    {
        zone!("update");
        for _ in 0..3 {
            zone!("physics");
            std::hint::black_box(work(50));
        }
    }
    {
        zone_bytes!("draw", 1024 + i);
        std::hint::black_box(work(100));
    }
}

#[test]
fn eight_threads_parse_into_consistent_hierarchies_and_valid_chrome_json() {
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn(move || {
                    for i in 0..FRAMES {
                        frame(i);
                    }
                })
                .unwrap()
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let bytes = coldcache_zones::record::snapshot();
    let d = format::decode(&bytes);
    assert!(d.error.is_none() && d.complete);
    let rec = parse(&d);
    assert!(rec.problems.is_empty(), "{:?}", rec.problems);
    let workers: Vec<_> = rec
        .threads
        .iter()
        .filter(|t| t.name.starts_with("worker-"))
        .collect();
    assert_eq!(
        workers.len(),
        THREADS,
        "{:?}",
        rec.threads.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    let mut tids: Vec<u32> = workers.iter().map(|t| t.tid).collect();
    tids.sort();
    tids.dedup();
    assert_eq!(tids.len(), THREADS);
    let id = |name: &str| *rec.names.iter().find(|(_, n)| n.name == name).unwrap().0;
    let (f, u, p, dr) = (id("frame"), id("update"), id("physics"), id("draw"));
    for t in &workers {
        // Each thread: FRAMES x (frame > (update > 3 physics), draw).
        assert_eq!(t.spans.len(), FRAMES * 6);
        let tree = views::top_down(&[t]);
        assert_eq!(tree.nodes[0].children.len(), 1);
        let nf = tree.find(0, f).unwrap();
        let nu = tree.find(nf, u).unwrap();
        let np = tree.find(nu, p).unwrap();
        let nd = tree.find(nf, dr).unwrap();
        assert_eq!(tree.nodes.len(), 5);
        assert_eq!(tree.nodes[nf].calls, FRAMES as u64);
        assert_eq!(tree.nodes[nu].calls, FRAMES as u64);
        assert_eq!(tree.nodes[np].calls, 3 * FRAMES as u64);
        assert_eq!(tree.nodes[nd].calls, FRAMES as u64);
        // Bytes: sum over i of 1024 + i.
        let bytes: u64 = (0..FRAMES as u64).map(|i| 1024 + i).sum();
        assert_eq!(tree.nodes[nd].bytes, bytes);
        // Every child lies within its parent, and siblings do not overlap.
        for (i, s) in t.spans.iter().enumerate() {
            assert!(s.start <= s.end);
            if let Some(pi) = s.parent {
                let par = &t.spans[pi as usize];
                assert!(par.start <= s.start && s.end <= par.end, "span {i}");
                assert_eq!(s.depth, par.depth + 1);
            } else {
                assert_eq!(s.key, f);
            }
        }
        assert!(tree.nodes[nf].total >= tree.nodes[nu].total + tree.nodes[nd].total);
    }
    assert!(matches!(f, ZoneKey::Label(_)));

    // The Chrome export validates against the schema.
    let chrome = export::chrome(&rec);
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("data/trace-event.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&chrome)
        .map(|e| format!("{e} at {}", e.instance_path))
        .take(5)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    // One complete event per span, one name per thread.
    let evs = chrome["traceEvents"].as_array().unwrap();
    let xs = evs.iter().filter(|e| e["ph"] == "X").count();
    let spans: usize = rec.threads.iter().map(|t| t.spans.len()).sum();
    assert_eq!(xs, spans);
    // The schema rejects what it should (it is not vacuous).
    let bad = serde_json::json!({"traceEvents": [{"name": "x", "ph": "X", "ts": 1.0, "pid": 1, "tid": 1}]});
    assert!(
        !validator.is_valid(&bad),
        "an X event without dur must be rejected"
    );
    let bad = serde_json::json!({"traceEvents": [{"name": "x", "ph": "Q", "ts": 1.0, "pid": 1, "tid": 1}]});
    assert!(
        !validator.is_valid(&bad),
        "an unknown phase must be rejected"
    );
}
