//! Embedding source files: which files, in which order, within which
//! limits, and what re-resolving keeps (hand-made files and tables).

use coldcache_dump::symbols::NO_MODULE;
use coldcache_dump::{Dump, Frame, Function, Location, StackNode, Symbols};
use coldcache_symbols::{embed_sources, SourceLimits};

fn frame(file: u32) -> Frame {
    Frame {
        function: 0,
        file,
        line: 1,
    }
}

#[test]
fn the_most_used_files_are_embedded_within_the_limits() {
    let dir = std::env::temp_dir().join(format!("coldcache-sources-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |n: &str| dir.join(n).to_str().unwrap().to_string();
    std::fs::write(path("a.c"), "int a;\n").unwrap(); // 7 bytes
    std::fs::write(path("b.c"), "int b; /* 20 bytes */").unwrap(); // 21 bytes
    std::fs::write(path("c.c"), "int c;\n").unwrap(); // 7 bytes
    std::fs::write(path("big.c"), "x".repeat(200)).unwrap();
    std::fs::write(path("bad.c"), b"int \xff;\n").unwrap();
    let files = ["a.c", "b.c", "c.c", "big.c", "missing.c", "bad.c"];
    // Uses: a.c 3, b.c 2, bad.c 2, big.c 1, missing.c 1, c.c 1.
    let uses: [(u32, usize); 6] = [(0, 3), (1, 2), (5, 2), (3, 1), (4, 1), (2, 1)];
    let mut locations = Vec::new();
    for (f, n) in uses {
        for _ in 0..n {
            locations.push(Location {
                addr: locations.len() as u64,
                frames: vec![frame(f)],
                code: vec![],
            });
        }
    }
    let mut d = Dump {
        symbols: Some(Symbols {
            files: files.iter().map(|f| path(f)).collect(),
            functions: vec![Function {
                name: "f".into(),
                module: NO_MODULE,
                entry: 0,
                file: 0,
                line: 1,
            }],
            locations,
            ..Symbols::default()
        }),
        stacks: vec![StackNode::default()],
        ..Dump::default()
    };
    // 7 + 21 + 9 = 37 bytes fit; c.c (7 more) does not.
    let limits = SourceLimits {
        max_file: 100,
        max_total: 40,
    };
    let s = embed_sources(&mut d, &limits);
    let embedded: Vec<&str> = d.sources.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(embedded, [path("a.c"), path("b.c"), path("bad.c")]);
    // bad.c: its invalid byte becomes U+FFFD (3 bytes): 9 bytes.
    assert_eq!((s.embedded, s.bytes), (3, 7 + 21 + 9));
    assert_eq!(d.source(&path("bad.c")), Some("int \u{fffd};\n"));
    assert_eq!(s.too_large, [path("big.c")]);
    assert_eq!(s.over_budget, [path("c.c")]);
    assert_eq!(s.unreadable.len(), 1);
    assert_eq!(s.unreadable[0].0, path("missing.c"));

    // Re-embedding after a.c is gone keeps its earlier text.
    std::fs::remove_file(path("a.c")).unwrap();
    let s = embed_sources(&mut d, &limits);
    assert_eq!(s.kept, 1);
    assert_eq!(d.source(&path("a.c")), Some("int a;\n"));
    // A round trip through the format keeps them.
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back.sources, d.sources);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unresolved_dump_embeds_nothing() {
    let mut d = Dump::default();
    let s = embed_sources(&mut d, &SourceLimits::default());
    assert_eq!(s.embedded, 0);
    assert!(d.sources.is_empty());
}
