//! The web UI's API, in-process and over a real socket: the token is
//! required, only the dump's source files are served, and every answer is
//! the analysis crate's view (one source of truth), checked on the
//! hand-computed dump of `crates/analysis/tests/hand.rs`.

#[path = "../../analysis/tests/common/hand_dump.rs"]
mod hand_dump;

use coldcache_analysis::flame::FlameQuery;
use coldcache_analysis::views::{self, FlatQuery};
use coldcache_analysis::{Profile, ProfileOptions};
use coldcache_ui::{App, Reply, ServeOptions, Server};
use serde_json::Value;
use std::io::{Read, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn profile(b_mem: u64, source: Option<&std::path::Path>) -> Profile {
    let mut d = hand_dump::dump(b_mem);
    if let Some(src) = source {
        d.symbols.as_mut().unwrap().files[1] = src.to_str().unwrap().to_string();
    }
    Profile::new(d, ProfileOptions::default())
}

fn app(source: Option<&std::path::Path>) -> App {
    App::new(
        vec![
            ("before.ccdump".into(), profile(8, source)),
            ("after.ccdump".into(), profile(0, source)),
        ],
        TOKEN.into(),
    )
}

fn get(app: &App, url: &str) -> Reply {
    let sep = if url.contains('?') { '&' } else { '?' };
    app.handle(&format!("{url}{sep}token={TOKEN}"), None)
}

fn json(r: &Reply) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

#[test]
fn requests_without_the_right_token_are_refused() {
    let a = app(None);
    for url in [
        "/",
        "/api/meta",
        "/api/flat",
        "/api/source?file=/etc/passwd",
    ] {
        assert_eq!(a.handle(url, None).status, 403, "{url}");
        assert_eq!(
            a.handle(
                &format!("{url}{}token=x", if url.contains('?') { "&" } else { "?" }),
                None
            )
            .status,
            403
        );
    }
    let wrong = format!("{}0", &TOKEN[..TOKEN.len() - 1]);
    assert_eq!(a.handle("/api/meta", Some(&wrong)).status, 403);
    assert_eq!(a.handle("/api/meta", Some(TOKEN)).status, 200);
    assert_eq!(get(&a, "/").status, 200);
    assert!(get(&a, "/").text().contains("<script>"));
}

#[test]
fn only_the_dumps_source_files_are_served() {
    let dir = std::env::temp_dir().join(format!("coldcache-ui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("u.c");
    std::fs::write(&src, "line 1\n").unwrap();
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    let a = app(Some(&src));
    let ok = get(&a, &format!("/api/source?file={}", src.display()));
    assert_eq!((ok.status, ok.text().as_str()), (200, "line 1\n"));
    for f in [
        secret.display().to_string(),
        "/etc/passwd".into(),
        format!("{}/../secret.txt", dir.join("x").display()),
        format!("{}/./u.c", dir.display()),
    ] {
        let r = get(&a, &format!("/api/source?file={f}"));
        assert_eq!(r.status, 403, "{f}: {}", r.text());
    }
    // The annotate view reads the file too.
    let v = json(&get(&a, "/api/annotate?fn=1"));
    assert_eq!(v["files"][0]["readable"], true);
    assert_eq!(v["files"][0]["embedded"], false);
}

#[test]
fn a_dump_naming_a_device_gets_an_error_not_a_read() {
    // A crafted dump may name /dev/zero as a source file: reading it would
    // fill the memory of the server (and a pipe would block a worker).
    let a = app(Some(std::path::Path::new("/dev/zero")));
    let r = get(&a, "/api/source?file=/dev/zero");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.text().contains("not a regular file"), "{}", r.text());
    let v = json(&get(&a, "/api/annotate?fn=1"));
    assert_eq!(v["files"][0]["path"], "/dev/zero");
    assert_eq!(v["files"][0]["readable"], false);

    // A regular file over 16 MiB is refused too.
    let dir = std::env::temp_dir().join(format!("coldcache-ui-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.c");
    std::fs::write(&big, vec![b'x'; (16 << 20) + 1]).unwrap();
    let a = app(Some(&big));
    let r = get(&a, &format!("/api/source?file={}", big.display()));
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(
        r.text().contains("larger than 16777216 bytes"),
        "{}",
        r.text()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sources_embedded_in_the_dump_are_served_without_the_disk() {
    // u.c exists only inside the dump.
    let mut d = hand_dump::dump(8);
    d.sources = vec![coldcache_dump::SourceText {
        path: "/s/u.c".into(),
        text: "// u.c as captured\n".repeat(25),
    }];
    let a = App::new(
        vec![("a".into(), Profile::new(d, ProfileOptions::default()))],
        TOKEN.into(),
    );
    let r = get(&a, "/api/source?file=/s/u.c");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().starts_with("// u.c as captured\n"));
    let v = json(&get(&a, "/api/annotate?fn=1"));
    let f = &v["files"][0];
    assert_eq!(
        (&f["path"], &f["embedded"]),
        (&"/s/u.c".into(), &true.into())
    );
    assert_eq!(f["lines"][0]["text"], "// u.c as captured");
    // Still only the dump's files.
    assert_eq!(get(&a, "/api/source?file=/etc/passwd").status, 403);
}

#[test]
fn answers_are_the_analysis_views() {
    let a = app(None);
    let p = profile(8, None);
    let v = json(&get(&a, "/api/flat?by=function&sort=mem&limit=200"));
    let want = serde_json::to_value(
        views::flat(
            &p,
            &FlatQuery {
                limit: Some(200),
                ..FlatQuery::default()
            },
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(v, want);
    let m = json(&get(&a, "/api/meta"));
    assert_eq!(m["compare"], true);
    assert_eq!(m["dumps"][1]["name"], "after.ccdump");
    // The hot path of the top-down tree: main → update → get_pos.
    let t = json(&get(&a, "/api/tree?kind=top_down&hot=1"));
    let names: Vec<&str> = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["main", "update", "render", "rec", "get_pos"]);
    // Callers of get_pos (function 2), one level: update 80 %, render 20 %.
    let c = json(&get(&a, "/api/tree?kind=callers&fn=2&path=2"));
    let shares: Vec<(String, f64)> = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["percent"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shares,
        [("update".to_string(), 80.0), ("render".to_string(), 20.0)]
    );
    assert_eq!(c["rows"][0]["key"], "2,1");
    // Reveal rec (function 4) in the top-down tree: main's children are listed.
    let r = json(&get(&a, "/api/tree?kind=top_down&reveal=4"));
    assert!(r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["name"] == "rec"));
    // The comparison: get_pos lost 8 misses.
    let d = json(&get(&a, "/api/diff?by=function"));
    assert_eq!(d["rows"][0]["label"], "get_pos (prog)");
    assert_eq!(d["rows"][0]["change"], -8.0);
    let f = json(&get(&a, "/api/function?fn=2"));
    assert_eq!(f["label"], "get_pos");
    assert_eq!(f["in_dumps"][1]["fn"], 2);
    // The flame graph: the analysis crate's layout, unchanged; zooming
    // into update (node of the top-down tree) keeps main above it.
    let fl = json(&get(&a, "/api/flame?weight=instructions"));
    let p = profile(8, None);
    let ins = views::column_index(&p, "instructions").unwrap();
    let expect = coldcache_analysis::flame::flame(&p, &FlameQuery::new(ins)).unwrap();
    assert_eq!(fl, serde_json::to_value(&expect).unwrap());
    assert_eq!(fl["root_value"], 30);
    let update = fl["frames"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| fl["names"][f["function"].to_string()] == "update")
        .unwrap()["node"]
        .clone();
    let z = json(&get(
        &a,
        &format!("/api/flame?weight=instructions&node={update}"),
    ));
    assert_eq!(z["root_value"], 15);
    assert_eq!(z["path"].as_array().unwrap().len(), 2);
    // Compared with the other dump: get_pos under update lost its 8 misses.
    let c = json(&get(&a, "/api/flame?weight=mem&compare=1"));
    assert_eq!(
        (c["total"].clone(), c["other_total"].clone()),
        (11.into(), 3.into())
    );
    let gp = c["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| c["names"][f["function"].to_string()] == "get_pos")
        .map(|f| (f["value"].as_u64().unwrap(), f["other"].as_u64().unwrap()))
        .collect::<Vec<_>>();
    assert_eq!(gp, [(2, 2), (8, 0)]);
    let c = json(&get(&a, "/api/flame?dump=1&weight=mem&compare=1"));
    assert_eq!(c["other_total"], 11);
    // Focus on get_pos (function 2): its heaviest node by mem is update's.
    let f = json(&get(&a, "/api/flame?weight=mem&focus=2"));
    let path: Vec<&str> = f["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| f["names"][x["function"].to_string()].as_str().unwrap())
        .collect();
    assert_eq!(path, ["main", "update", "get_pos"]);
    assert_eq!(f["root_value"], 8);
    let svg = get(&a, "/api/flame.svg?weight=instructions");
    assert_eq!(svg.content_type, "image/svg+xml");
    assert!(svg.text().contains("get_pos"));
}

#[test]
fn bad_requests_get_clear_errors() {
    let a = app(None);
    // Dump 0's flat profile in the cache must not answer a dump= that is
    // not a number.
    json(&get(&a, "/api/flat"));
    for (url, status, text) in [
        ("/api/flat?dump=abc", 400, "dump"),
        ("/api/flat?by=page", 400, "by=page"),
        ("/api/flat?sort=nope", 400, "no column named 'nope'"),
        ("/api/flat?filter=(", 400, "invalid regular expression"),
        ("/api/flat?dump=7", 404, "no dump 7"),
        ("/api/annotate?fn=999", 404, "no function 999"),
        ("/api/tree?kind=sideways", 400, "kind=sideways"),
        ("/api/tree?node=99999", 400, "no call-tree node"),
        ("/api/flame?weight=badness", 400, "ratio"),
        ("/api/flame.svg?weight=badness", 400, "ratio"),
        ("/api/flame?node=99999", 404, "no call-tree node"),
        ("/api/flame?node=4294967296", 400, "out of range"),
        ("/api/flame?focus=77", 404, "no function 77"),
        ("/nope", 404, "no such page"),
    ] {
        let r = get(&a, url);
        assert_eq!(r.status, status, "{url}: {}", r.text());
        assert!(r.text().contains(text), "{url}: {}", r.text());
    }
    let one = App::new(vec![("a".into(), profile(8, None))], TOKEN.into());
    assert!(get(&one, "/api/diff").text().contains("two dumps"));
    assert!(get(&one, "/api/flame?compare=1")
        .text()
        .contains("two dumps"));
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, out)
}

#[test]
fn the_server_listens_on_loopback_and_checks_the_token() {
    let server = Server::bind(
        vec![("a".into(), profile(8, None))],
        &ServeOptions::default(),
    )
    .unwrap();
    assert!(server.addr.ip().is_loopback());
    let url = server.url.clone();
    let token = url.split("token=").nth(1).unwrap().to_string();
    assert_eq!(token.len(), 32);
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let t = std::thread::spawn(move || server.run(&flag));
    assert_eq!(http_get(addr, "/api/meta").0, 403);
    let (status, body) = http_get(addr, &format!("/api/meta?token={token}"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("nosniff"));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    t.join().unwrap();
}

/// Starts `server.run` on a thread; the receiver gets a message when `run`
/// returns.
fn run_in_background(server: Server, stop: Arc<AtomicBool>) -> std::sync::mpsc::Receiver<()> {
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        server.run(&stop);
        let _ = done.send(());
    });
    ended
}

/// Waits for `run` to return; a generous bound turns a server that never
/// stops into a failure instead of a hung test (not a timing assertion).
fn wait_for_run(ended: std::sync::mpsc::Receiver<()>, how: &str) {
    ended
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("run did not return after {how}"));
}

/// One worker is held by an answer it cannot finish (a source file embedded
/// in the dump, larger than the kernel can buffer, sent to a client that
/// reads only its status line); a second request on another connection is
/// answered meanwhile.
///
/// (A client that sends only half a request would hold no worker: tiny_http
/// reads and parses requests on threads of its own and hands a worker only
/// complete ones, so that test passes with a single-threaded server too.)
#[test]
fn a_request_is_answered_while_a_worker_is_busy_with_another() {
    // 48 MiB: more than the socket buffers of both ends can hold (Linux
    // caps them at tcp_wmem and tcp_rmem, 4 and 32 MiB at most by default).
    let line = format!("{}\n", "x".repeat(1023));
    let mut d = hand_dump::dump(8);
    let big = d.symbols.as_ref().unwrap().files[1].clone();
    d.sources = vec![coldcache_dump::SourceText {
        path: big.clone(),
        text: line.repeat(48 << 10),
    }];
    let server = Server::bind(
        vec![("a".into(), Profile::new(d, ProfileOptions::default()))],
        &ServeOptions::default(),
    )
    .unwrap();
    let token = server.url.split("token=").nth(1).unwrap().to_string();
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let ended = run_in_background(server, Arc::clone(&stop));

    let mut busy = std::net::TcpStream::connect(addr).unwrap();
    write!(
        busy,
        "GET /api/source?file={big}&token={token} HTTP/1.0\r\nHost: localhost\r\n\r\n"
    )
    .unwrap();
    // The status line: a worker is writing this answer, and cannot finish
    // until the rest is read.
    let mut head = [0u8; 12];
    busy.read_exact(&mut head).unwrap();
    assert_eq!(&head[9..], b"200", "{}", String::from_utf8_lossy(&head));

    let mut other = std::net::TcpStream::connect(addr).unwrap();
    other
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(
        other,
        "GET /api/meta?token={token} HTTP/1.0\r\nHost: localhost\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    other
        .read_to_string(&mut out)
        .expect("an answer while another worker is busy");
    assert_eq!(out.split_whitespace().nth(1), Some("200"), "{out}");

    // The busy answer is still whole, then every worker stops on the flag.
    let mut rest = Vec::new();
    busy.read_to_end(&mut rest).unwrap();
    assert!(rest.ends_with(line.as_bytes()));
    assert!(rest.len() > 48 << 20);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    wait_for_run(ended, "the stop flag");
}

/// Regression: `stopper()` woke one `recv_timeout`, which returns "no
/// request" then, so `run` went on serving until its flag was set; it must
/// end `run` (every worker) without the flag.
#[test]
fn the_stopper_ends_run_without_the_flag() {
    let server = Server::bind(
        vec![("a".into(), profile(8, None))],
        &ServeOptions::default(),
    )
    .unwrap();
    let token = server.url.split("token=").nth(1).unwrap().to_string();
    let addr = server.addr;
    let stop_now = server.stopper();
    let ended = run_in_background(server, Arc::new(AtomicBool::new(false)));
    assert_eq!(http_get(addr, &format!("/api/meta?token={token}")).0, 200);
    stop_now();
    wait_for_run(ended, "the stopper");
}

#[test]
fn the_warm_up_answers_the_pages_own_requests() {
    let a = app(None);
    let page_urls = [
        "/api/flat?dump=0&by=line&sort=mem&inclusive=0&filter=&limit=300",
        "/api/flat?dump=1&by=instruction&sort=mem&inclusive=0&filter=&limit=300",
        "/api/diff?by=line&sort=mem&filter=&limit=300",
    ];
    for u in page_urls {
        assert!(!a.is_cached(u), "{u}");
    }
    a.warm();
    for u in page_urls {
        assert!(a.is_cached(u), "{u} not warmed");
    }
    // A different query is another answer.
    assert!(!a.is_cached("/api/flat?dump=0&by=line&sort=instructions&limit=300"));
    // Node ids beyond 32 bits are refused, not wrapped to the root.
    assert_eq!(get(&a, "/api/tree?node=4294967296").status, 400);
}

#[test]
fn the_same_function_in_the_other_dump_is_found_by_name_module_and_file() {
    let mut d = hand_dump::dump(0);
    d.modules[0].path = "/bin/prog-fixed".into();
    d.meta.program = vec!["/bin/prog-fixed".into()];
    let a = App::new(
        vec![
            ("before".into(), profile(8, None)),
            ("after".into(), Profile::new(d, ProfileOptions::default())),
        ],
        TOKEN.into(),
    );
    let f = json(&get(&a, "/api/function?fn=2"));
    assert_eq!(f["in_dumps"][1]["fn"], 2, "{f}");
}

/// The page takes its column facts from `/api/meta`: the default weight
/// (`mem` when non-zero, else instructions, as `coldcache report`), the
/// columns shown by default (the report's), and which columns are ratios.
/// A dump of another counter layout gets its raw columns only, all shown,
/// weighted by instructions.
#[test]
fn meta_gives_the_default_weight_and_columns_of_each_dump() {
    let mut foreign = hand_dump::dump(8);
    foreign.meta.counters[4] = "i_dram".into();
    let a = App::new(
        vec![
            ("std.ccdump".into(), profile(8, None)),
            (
                "foreign.ccdump".into(),
                Profile::new(foreign, ProfileOptions::default()),
            ),
        ],
        TOKEN.into(),
    );
    let m = json(&get(&a, "/api/meta"));
    let std = &m["dumps"][0];
    assert_eq!(std["default_weight"], "mem");
    assert_eq!(std["default_sort"], "mem");
    // The report's defaults, written out by hand for two levels.
    assert_eq!(
        std["default_columns"],
        serde_json::json!([
            "instructions",
            "d_refs",
            "d_miss_L1",
            "d_miss_L2",
            "i_miss_L1",
            "mem",
            "badness"
        ])
    );
    let ratios: Vec<&str> = std["columns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ratio"] == true)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(ratios, ["badness"]);
    let f = &m["dumps"][1];
    assert_eq!(f["default_weight"], "instructions");
    let cols = f["columns"].as_array().unwrap();
    assert_eq!(cols.len(), 15, "raw counters only");
    assert_eq!(f["default_columns"].as_array().unwrap().len(), 15);
    // The flame graph's default weight is the same.
    let fl = json(&get(&a, "/api/flame?dump=1"));
    let want = json(&get(&a, "/api/flame?dump=1&weight=instructions"));
    assert_eq!(fl, want);
}
