//! The oracle for the streaming reader (`coldcache_zones::stream`): a
//! recording's bytes read whole (`format::decode`, `parse::parse`, the
//! in-memory views and exports) and read from a file chunk by chunk must
//! give the same index, problems and output, byte for byte.

use coldcache_zones::stream::{self, ZonesFile};
use coldcache_zones::{export, format, parse, views};
use std::io::Write;

fn open(file: &std::fs::File, len: u64) -> ZonesFile {
    ZonesFile::open(file.try_clone().unwrap(), len).unwrap()
}

fn scan_all(z: &mut ZonesFile) {
    for pos in 0..z.rec.threads.len() {
        z.scan(pos, &mut ()).unwrap();
    }
    z.finish_scan();
}

/// Checks `bytes` read both ways; returns the number of threads.
pub fn same_both_ways(bytes: &[u8]) -> usize {
    let d = format::decode(bytes);
    let rec = parse::parse(&d);
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(bytes).unwrap();
    let len = bytes.len() as u64;

    // The index: same tables and error, the same chunks.
    let mut z = open(&file, len);
    let t = &z.index.tables;
    assert_eq!(
        format!("{:?}", (&t.info, &t.labels, &t.threads, &t.modules)),
        format!("{:?}", (&d.info, &d.labels, &d.threads, &d.modules))
    );
    assert_eq!((t.complete, &t.error), (d.complete, &d.error));
    assert_eq!(z.index.chunks.len(), d.chunks.len());
    let (mut payload, mut events) = (Vec::new(), Vec::new());
    for (r, c) in z.index.chunks.iter().zip(&d.chunks) {
        format::read_chunk(&file, r, &mut payload, &mut events).unwrap();
        assert_eq!((r.thread, r.seq), (c.thread, c.seq));
        assert_eq!(events, c.events);
    }

    // Chrome, with the scan: same problems and start.
    let all: Vec<usize> = (0..rec.threads.len()).collect();
    let mut out = Vec::new();
    stream::chrome(&mut z, &all, |_| {}, &mut out).unwrap();
    assert_eq!(z.rec.problems, rec.problems);
    assert_eq!(z.rec.start_tsc, rec.start_tsc);
    let counts: Vec<u64> = z.rec.threads.iter().map(|t| t.events).collect();
    let want: Vec<u64> = rec.threads.iter().map(|t| t.events).collect();
    assert_eq!(counts, want);
    let chrome = serde_json::to_vec_pretty(&export::chrome(&rec)).unwrap();
    assert!(
        out == chrome,
        "chrome differs:\n{}\n---\n{}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&chrome)
    );
    // One thread alone (the last).
    if let Some(last) = all.last() {
        let mut z = open(&file, len);
        let mut out = Vec::new();
        stream::chrome(&mut z, &[*last], |_| {}, &mut out).unwrap();
        let mut one = rec.clone();
        one.threads = vec![rec.threads[*last].clone()];
        assert_eq!(
            out,
            serde_json::to_vec_pretty(&export::chrome(&one)).unwrap()
        );
    }

    // speedscope.
    let mut z = open(&file, len);
    let mut out = Vec::new();
    stream::speedscope(&mut z, &all, "x.zones", |_| {}, &mut out).unwrap();
    let ss = serde_json::to_vec(&export::speedscope(&rec, "x.zones")).unwrap();
    assert!(
        out == ss,
        "speedscope differs:\n{}\n---\n{}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&ss)
    );

    // Folded stacks and the text views, from feeds.
    let unit = views::Unit::Us;
    let threads: Vec<&parse::ThreadTrace> = rec.threads.iter().collect();
    let mut z = open(&file, len);
    let (mut td, mut bu, mut fl) = (
        views::Tree::new(),
        views::Tree::new(),
        views::FlatFeed::default(),
    );
    let mut per_thread = Vec::new();
    for pos in 0..z.rec.threads.len() {
        let mut own = views::Tree::new();
        let mut tl = views::TimelineFeed::new(5);
        let mut feeds = (
            (
                views::TopDownFeed::new(&mut td, true),
                views::BottomUpFeed::new(&mut bu),
            ),
            ((&mut fl, views::TopDownFeed::new(&mut own, false)), &mut tl),
        );
        z.scan(pos, &mut feeds).unwrap();
        per_thread.push((own, tl));
    }
    z.finish_scan();
    views::finish_tree(&mut td);
    views::finish_tree(&mut bu);
    let render = |t: &views::Tree| {
        let mut s = String::new();
        views::render_tree(t, &rec, unit, &mut s);
        s
    };
    assert_eq!(render(&td), render(&views::top_down(&threads)));
    assert_eq!(render(&bu), render(&views::bottom_up(&threads)));
    let (mut a, mut b) = (String::new(), String::new());
    views::render_flat(&fl.rows(), &rec, unit, &mut a);
    views::render_flat(&views::flat(&threads), &rec, unit, &mut b);
    assert_eq!(a, b);
    let mut folded = String::new();
    for (i, (own, tl)) in per_thread.iter().enumerate() {
        let t = &rec.threads[i];
        export::folded_tree(own, &rec, unit, &t.label(), &mut folded);
        let (mut a, mut b) = (String::new(), String::new());
        views::render_timeline_spans(&tl.spans, tl.count, &rec, unit, &mut a);
        views::render_timeline(t, &rec, unit, 5, &mut b);
        assert_eq!(a, b);
    }
    assert_eq!(folded, export::folded(&rec, unit));
    let mut z = open(&file, len);
    scan_all(&mut z);
    assert_eq!(z.rec.problems, rec.problems);
    rec.threads.len()
}
