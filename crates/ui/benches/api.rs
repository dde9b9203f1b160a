//! Response times of the web UI's API on a one-million-record dump (goal:
//! every interaction under 100 ms), measured over a real socket as the
//! browser sees them.
//!
//! `cargo bench -p coldcache-ui --bench api [-- RECORDS]`
//!
//! Two synthetic resolved dumps (crate `coldcache-analysis`, module
//! `synthetic`) of RECORDS records each are served, without the start-up
//! warm-up; each request the page makes is sent 5 times: the first answer
//! is computed, the next four come from the server's answer cache. The
//! first time and the median of the repeats are printed, with the time to
//! build the profiles and to warm up (`App::warm`, what `coldcache ui`
//! does on a thread at start-up).

use coldcache_analysis::synthetic::{self, Shape};
use coldcache_analysis::{Profile, ProfileOptions};
use coldcache_ui::{ServeOptions, Server};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn get(addr: std::net::SocketAddr, path: &str) -> (u16, usize) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read");
    let text = String::from_utf8_lossy(&out[..out.len().min(64)]).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    (status, out.len())
}

fn main() {
    let records = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<u32>().ok())
        .unwrap_or(1_000_000);
    let t = Instant::now();
    let shape = Shape {
        records,
        ..Shape::default()
    };
    let a = Profile::new(synthetic::dump(shape), ProfileOptions::default());
    let b = Profile::new(synthetic::dump(shape), ProfileOptions::default());
    println!(
        "two synthetic dumps of {} records indexed in {:.0} ms (once, at start-up)",
        a.record_count(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    let warm = coldcache_ui::App::new(
        vec![
            (
                "a".into(),
                Profile::new(synthetic::dump(shape), ProfileOptions::default()),
            ),
            (
                "b".into(),
                Profile::new(synthetic::dump(shape), ProfileOptions::default()),
            ),
        ],
        "t".into(),
    );
    let built = t.elapsed();
    let t = Instant::now();
    warm.warm();
    println!(
        "warm-up (flat by line and instruction, compare by line): {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let _ = built;
    drop(warm);
    let server = Server::bind(
        vec![("a".into(), a), ("b".into(), b)],
        &ServeOptions::default(),
    )
    .expect("bind");
    let token = server
        .url
        .split("token=")
        .nth(1)
        .expect("token")
        .to_string();
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let th = std::thread::spawn(move || server.run(&flag));
    let f = "7"; // ns::function_7(int)
    let requests = [
        ("page", "/".to_string()),
        ("meta", "/api/meta".to_string()),
        (
            "flat by function",
            "/api/flat?by=function&limit=300".to_string(),
        ),
        (
            "flat sorted by instructions",
            "/api/flat?by=function&sort=instructions&limit=300".to_string(),
        ),
        (
            "flat filtered",
            "/api/flat?by=function&filter=function_1%5B0-9%5D%2B&limit=300".to_string(),
        ),
        ("flat by line", "/api/flat?by=line&limit=300".to_string()),
        (
            "flat by instruction",
            "/api/flat?by=instruction&limit=300".to_string(),
        ),
        // Another sort column of the same granularities: a new answer
        // (not in the answer cache), as when a column header is clicked.
        (
            "flat by line, new sort",
            "/api/flat?by=line&sort=instructions&limit=300".to_string(),
        ),
        (
            "flat by instruction, new sort",
            "/api/flat?by=instruction&sort=instructions&limit=300".to_string(),
        ),
        (
            "top-down, hot path",
            "/api/tree?kind=top_down&hot=1&min_percent=0.5".to_string(),
        ),
        (
            "top-down, expand a node",
            "/api/tree?kind=top_down&node=1".to_string(),
        ),
        (
            "bottom-up, hot path",
            "/api/tree?kind=bottom_up&hot=1&min_percent=0.5".to_string(),
        ),
        (
            "bottom-up, expand a node",
            format!("/api/tree?kind=bottom_up&path={f}"),
        ),
        (
            "callers, hot path",
            format!("/api/tree?kind=callers&fn={f}&hot=1&min_percent=0.5"),
        ),
        // What the page asks by default (issue 36): chains of single
        // callers folded, each chain step one more level computed.
        (
            "bottom-up, hot path, folded",
            "/api/tree?kind=bottom_up&hot=1&min_percent=0.5&fold=1".to_string(),
        ),
        (
            "bottom-up, expand, folded",
            format!("/api/tree?kind=bottom_up&path={f}&fold=1"),
        ),
        (
            "callers, hot path, folded",
            format!("/api/tree?kind=callers&fn={f}&hot=1&min_percent=0.5&fold=1"),
        ),
        (
            "reveal in top-down",
            format!("/api/tree?kind=top_down&reveal={f}&min_percent=0.5"),
        ),
        ("function", format!("/api/function?fn={f}")),
        ("source view", format!("/api/annotate?fn={f}")),
        ("disassembly", format!("/api/asm?fn={f}")),
        ("threads", "/api/threads".to_string()),
        ("flame graph (mem)", "/api/flame?weight=mem".to_string()),
        (
            "flame graph (instructions)",
            "/api/flame?weight=instructions".to_string(),
        ),
        (
            "flame graph, zoomed",
            "/api/flame?weight=mem&node=1".to_string(),
        ),
        (
            "flame graph compared with B",
            "/api/flame?weight=mem&compare=1".to_string(),
        ),
        (
            "compare by function",
            "/api/diff?by=function&limit=300".to_string(),
        ),
        ("compare by line", "/api/diff?by=line&limit=300".to_string()),
    ];
    println!(
        "{:<30} {:>10} {:>10} {:>10}",
        "request", "first ms", "again ms", "bytes"
    );
    let mut worst = (0.0f64, "");
    for (name, path) in &requests {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = format!("{path}{sep}token={token}");
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..5 {
            let t = Instant::now();
            let (status, n) = get(addr, &url);
            times.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(status, 200, "{name}: {url}");
            size = n;
        }
        let first = times[0];
        let mut again = times[1..].to_vec();
        again.sort_by(f64::total_cmp);
        if first > worst.0 {
            worst = (first, name);
        }
        println!(
            "{name:<30} {first:>10.1} {:>10.1} {size:>10}",
            again[again.len() / 2]
        );
    }
    println!("slowest first answer: {} ({:.1} ms)", worst.1, worst.0);
    // Not an interaction: the SVG file the page offers to save.
    let t = Instant::now();
    let (status, n) = get(addr, &format!("/api/flame.svg?weight=mem&token={token}"));
    assert_eq!(status, 200);
    println!(
        "flame graph SVG to save (inferno): {:.0} ms, {n} bytes",
        t.elapsed().as_secs_f64() * 1e3
    );
    stop.store(true, Ordering::SeqCst);
    let _ = th.join();
}
