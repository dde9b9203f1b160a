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
    // get_pos is inlined into update: the row says so, and its key (the
    // path to open below it) names the inlined row with bit 31.
    assert_eq!(c["rows"][0]["inlined"], true);
    assert_eq!(c["rows"][0]["key"], format!("2,{}", 1u32 | 1 << 31));
    let below = json(&get(
        &a,
        &format!("/api/tree?kind=callers&fn=2&path=2,{}", 1u32 | 1 << 31),
    ));
    assert_eq!(below["rows"][0]["name"], "main");
    let wrong = json(&get(&a, "/api/tree?kind=callers&fn=2&path=2,1"));
    assert_eq!(
        wrong["rows"].as_array().unwrap().len(),
        0,
        "no called update"
    );
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
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
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

/// An answer that cannot be sent whole (a source file embedded in the dump,
/// larger than the kernel can buffer, sent to a client that reads only its
/// status line) is still being sent while a second request on another
/// connection is answered, and arrives whole once read.
///
/// (A client that sends only half a request holds no worker either: the
/// connection thread reads requests and hands a worker only complete ones;
/// see `slow_connections_make_no_threads`.)
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
        "GET /api/source?file={big}&token={token} HTTP/1.0\r\nHost: {addr}\r\n\r\n"
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
        "GET /api/meta?token={token} HTTP/1.0\r\nHost: {addr}\r\n\r\n"
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

// ---- Issue 18: the first five minutes ----

const CACHE_TOML: &str = "name = \"test\"\ncores = 2\n\n\
    [[level]]\nname = \"L1\"\nlevel = 1\nsize = \"32K\"\nassoc = 8\n\n\
    [[level]]\nname = \"L2\"\nlevel = 2\nsize = \"2M\"\nassoc = 16\n";

#[test]
fn meta_summarises_each_dump_program_cache_window_and_misses_per_level() {
    // The hand-computed dump (tests/hand.rs): 30 instructions; every fetch
    // hits L1; reads served by memory 8 (update) + 2 (render), writes 1
    // (rec's second call): 11 data accesses miss L1, the same 11 miss L2
    // (nothing is served by L2), 11 served by memory.
    let mut d = hand_dump::dump(8);
    d.meta.trigger = "function:update".into();
    d.meta.threads = "caller".into();
    d.meta.duration_ns = 2_500_000;
    d.meta.cut_short = Some("the program exited".into());
    d.meta.notes = vec!["capture mode fast: 3 instructions ran under the trap engine".into()];
    let a = App::new(
        vec![(
            "a.ccdump".into(),
            Profile::new(d, ProfileOptions::default()),
        )],
        TOKEN.into(),
    );
    let m = json(&get(&a, "/api/meta"));
    let s = &m["dumps"][0]["summary"];
    assert_eq!(s["program"], serde_json::json!(["prog"]));
    assert_eq!(s["cache_name"], "test");
    assert_eq!(s["levels"], serde_json::json!(["L1", "L2"]));
    assert_eq!(s["cores"], 2);
    assert_eq!(s["instructions"], 30);
    assert_eq!(
        s["misses"],
        serde_json::json!([
            { "level": "L1", "instruction": 0, "data": 11 },
            { "level": "L2", "instruction": 0, "data": 11 },
        ])
    );
    assert_eq!(s["memory"], 11);
    let w = &s["window"];
    assert_eq!(w["trigger"], "function:update");
    assert_eq!(w["started"], "entry to update");
    assert_eq!(w["stopped"], "cut short: the program exited");
    assert_eq!(w["cut_short"], "the program exited");
    assert_eq!(w["mode"], "fast");
    assert_eq!(w["threads"], "caller");
    assert_eq!(w["duration_ns"], 2_500_000);
    // One dump: nothing to compare caches with.
    assert_eq!(m["cache_mismatch"], Value::Null);
}

/// Unmodelled instructions (by class) and, in fast mode, trapped ones are
/// in the summary in words, the same sentences `report`'s header prints;
/// absent when there are none.
#[test]
fn meta_summary_says_unmodelled_and_trapped_instructions_in_words() {
    let mut d = hand_dump::dump(8);
    assert_eq!(
        coldcache_analysis::summary::summary(&Profile::new(d.clone(), ProfileOptions::default()))
            .unmodelled,
        None
    );
    d.meta.instructions = 30;
    d.meta.unmodelled = vec![
        ("partially masked AVX-512 memory operand".into(), 2),
        ("memory use not covered by the model".into(), 1),
    ];
    // The counter agrees with the classes, as a capture writes it.
    d.records[1].counters[1] = 2;
    d.records[2].counters[1] = 1;
    d.meta.notes = vec![
        "capture mode fast: 3 instructions ran under the trap engine (blocks...); 7 \
         dispatcher entries"
            .into(),
    ];
    let p = Profile::new(d, ProfileOptions::default());
    let header = coldcache_analysis::render::header(&p);
    let a = App::new(vec![("a.ccdump".into(), p)], TOKEN.into());
    let m = json(&get(&a, "/api/meta"));
    let s = &m["dumps"][0]["summary"];
    let un = "3 instructions unmodelled: 2 partially masked AVX-512 memory operand, \
              1 memory use not covered by the model";
    assert_eq!(s["unmodelled"]["count"], 3);
    assert_eq!(s["unmodelled"]["text"], un);
    assert!(s["unmodelled"]["advice"]
        .as_str()
        .unwrap()
        .contains("GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F"));
    let tr = "3 of 30 instructions (10.00%) ran under the trap engine";
    assert_eq!(s["trapped"]["count"], 3);
    assert_eq!(s["trapped"]["text"], tr);
    assert!(header.contains(&format!("unmodelled: {un}\n")), "{header}");
    assert!(header.contains(&format!("trapped:   {tr}\n")), "{header}");
}

#[test]
fn meta_says_when_the_two_dumps_caches_differ_as_coldcache_diff_does() {
    let with_cache = |toml: &str| {
        let mut d = hand_dump::dump(8);
        d.meta.cache_toml = toml.to_string();
        Profile::new(d, ProfileOptions::default())
    };
    let meta = |b: &str| {
        let a = App::new(
            vec![
                ("a".into(), with_cache(CACHE_TOML)),
                ("b".into(), with_cache(b)),
            ],
            TOKEN.into(),
        );
        let m = json(&get(&a, "/api/meta"));
        let d = json(&get(&a, "/api/diff"));
        // The comparison carries the same sentence.
        assert_eq!(m["cache_mismatch"], d["cache_mismatch"]);
        m["cache_mismatch"].clone()
    };
    assert_eq!(meta(CACHE_TOML), Value::Null);
    // Another name for the same configuration simulates the same.
    assert_eq!(
        meta(&CACHE_TOML.replace("\"test\"", "\"mine\"")),
        Value::Null
    );
    let w = meta(&CACHE_TOML.replace("32K", "64K"));
    let w = w.as_str().expect("a warning");
    assert!(
        w.starts_with("the two dumps were simulated with different caches"),
        "{w}"
    );
    assert!(w.contains("L1 size 32K → 64K"), "{w}");
}

// ---- Issue 17: the server's bounds, over real loopback sockets ----

/// How long a test waits for an answer that should come in milliseconds:
/// a hang becomes a failure (not a timing assertion).
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Sends `head` (the request line and headers, without the blank line
/// that ends them) and returns the status and the whole answer.
fn raw_request(addr: std::net::SocketAddr, head: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(s, "{head}\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("no answer to {head:?}: {e}"));
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer to {head:?}: {out:?}"));
    (status, out)
}

/// A `GET` of `path` naming the server in `Host`, as a browser does.
fn get_from(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    raw_request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close"),
    )
}

/// The value of header `name` in an answer (case-insensitive name).
fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let head = answer.split("\r\n\r\n").next()?;
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A server of the hand dump on a thread of this process; stopped when
/// dropped.
struct Running {
    addr: std::net::SocketAddr,
    token: String,
    stop: Arc<AtomicBool>,
}

impl Running {
    fn start(profiles: Vec<(String, Profile)>) -> Running {
        let server = Server::bind(profiles, &ServeOptions::default()).unwrap();
        let token = server.url.split("token=").nth(1).unwrap().to_string();
        let addr = server.addr;
        let stop = Arc::new(AtomicBool::new(false));
        run_in_background(server, Arc::clone(&stop));
        Running { addr, token, stop }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// DNS rebinding: a page of attacker.example whose name was made to
/// resolve to 127.0.0.1 reaches the server with `Host: attacker.example`.
/// The server answers only requests naming it (127.0.0.1 or localhost,
/// and its port), token or not.
#[test]
fn a_request_naming_another_host_is_refused() {
    let s = Running::start(vec![("a".into(), profile(8, None))]);
    let (addr, port) = (s.addr, s.addr.port());
    let path = format!("/api/meta?token={}", s.token);
    for host in [
        "attacker.example".to_string(),
        format!("attacker.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("127.0.0.1.attacker.example:{port}"),
    ] {
        let (status, out) = raw_request(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close"),
        );
        assert_eq!(status, 403, "Host: {host}: {out}");
        assert!(out.contains("Host"), "the refusal names the header: {out}");
    }
    // No Host at all (HTTP/1.1 requires one; a browser always sends it).
    let (status, out) = raw_request(addr, &format!("GET {path} HTTP/1.1\r\nConnection: close"));
    assert_eq!(status, 400, "{out}");
    for host in [format!("127.0.0.1:{port}"), format!("LocalHost:{port}")] {
        let (status, out) = raw_request(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close"),
        );
        assert_eq!(status, 200, "Host: {host}: {out}");
    }
}

/// The token is in the page's URL: no request the page makes may carry it
/// to another site in a `Referer`, and no script but the page's own may
/// run. Every answer says so; the policy allows the page's one inline
/// script and style by their SHA-256 (computed here from the page as
/// served), and nothing inline otherwise.
#[test]
fn answers_carry_a_content_security_policy_and_no_referrer() {
    use base64::Engine;
    use sha2::Digest;
    let s = Running::start(vec![("a".into(), profile(8, None))]);
    let (status, page) = get_from(s.addr, &format!("/?token={}", s.token));
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        header(&page, "Referrer-Policy"),
        Some("no-referrer"),
        "{page}"
    );
    let csp = header(&page, "Content-Security-Policy").unwrap_or_else(|| panic!("{page}"));
    let directive = |name: &str| -> Vec<String> {
        csp.split(';')
            .map(str::trim)
            .find_map(|d| d.strip_prefix(name).filter(|r| r.starts_with(' ')))
            .unwrap_or_else(|| panic!("no {name} in {csp}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    assert_eq!(directive("default-src"), ["'none'"], "{csp}");
    let body = page.split("\r\n\r\n").nth(1).unwrap();
    for (tag, dir) in [("script", "script-src"), ("style", "style-src")] {
        let allowed = directive(dir);
        assert!(
            !allowed.iter().any(|a| a.contains("unsafe")),
            "{dir}: {allowed:?}"
        );
        let open = format!("<{tag}>");
        let blocks: Vec<&str> = body
            .split(open.as_str())
            .skip(1)
            .map(|b| b.split(&format!("</{tag}>")).next().unwrap())
            .collect();
        assert_eq!(blocks.len(), 1, "one inline {tag}");
        for b in blocks {
            let h = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(b));
            assert_eq!(allowed, [format!("'sha256-{h}'")], "{dir}");
        }
    }
    assert_eq!(directive("frame-ancestors"), ["'none'"], "{csp}");
    // The API's answers and the refusals too.
    for path in [
        format!("/api/meta?token={}", s.token),
        "/api/meta".to_string(),
    ] {
        let (_, out) = get_from(s.addr, &path);
        assert_eq!(
            header(&out, "Referrer-Policy"),
            Some("no-referrer"),
            "{out}"
        );
        assert!(
            header(&out, "Content-Security-Policy")
                .is_some_and(|c| c.contains("default-src 'none'")),
            "{out}"
        );
    }
}

/// A server in a process of its own (this test binary, running
/// `child_server`), so that its memory and threads are measured alone;
/// killed when dropped.
struct ChildServer {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    token: String,
}

impl ChildServer {
    fn start() -> ChildServer {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_server", "--ignored", "--nocapture"])
            .env("COLDCACHE_UI_CHILD", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let url = out
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("URL ").map(String::from))
            .expect("the child server's URL");
        let rest = url.strip_prefix("http://").unwrap();
        let (addr, token) = rest.split_once("/?token=").unwrap();
        let c = ChildServer {
            child,
            addr: addr.parse().unwrap(),
            token: token.to_string(),
        };
        // Every worker has started once an answer came.
        assert_eq!(c.get("/api/meta").0, 200);
        c
    }

    fn get(&self, path_and_query: &str) -> (u16, String) {
        let sep = if path_and_query.contains('?') {
            '&'
        } else {
            '?'
        };
        get_from(
            self.addr,
            &format!("{path_and_query}{sep}token={}", self.token),
        )
    }

    /// A field of /proc/PID/status (a number, the unit dropped).
    fn status(&self, field: &str) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim_start_matches(':').split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {s}"))
    }

    fn rss_kib(&self) -> u64 {
        self.status("VmRSS")
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child side of `ChildServer`: serves the hand dump on a free port,
/// prints its URL and serves until its standard input closes. It does
/// nothing unless started as that child.
#[test]
#[ignore = "the server process of the tests that measure one; they start it"]
fn child_server() {
    if std::env::var_os("COLDCACHE_UI_CHILD").is_none() {
        return;
    }
    let server = Server::bind(
        vec![("a".into(), profile(8, None))],
        &ServeOptions::default(),
    )
    .unwrap();
    println!("URL {}", server.url);
    std::io::stdout().flush().unwrap();
    let stop = server.stopper();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        stop();
    });
    server.run(&AtomicBool::new(false));
}

/// 40 MB of headers without the token: the server reads no more than its
/// limit of a request's head and drops the rest (it grew from 25 MB to
/// 600 MB, memory never returned). The server's resident memory is
/// measured before and after.
#[test]
fn forty_megabytes_of_headers_do_not_grow_the_server() {
    let c = ChildServer::start();
    let before = c.rss_kib();
    let mut s = std::net::TcpStream::connect(c.addr).unwrap();
    s.set_write_timeout(Some(PATIENCE)).unwrap();
    let line = format!("X-Junk: {}\r\n", "j".repeat(1014));
    let mut sent = 0usize;
    if s.write_all(b"GET /api/meta HTTP/1.1\r\n").is_ok() {
        for _ in 0..40 << 10 {
            // The server may refuse and close before the end: writes fail
            // then.
            if s.write_all(line.as_bytes()).is_err() {
                break;
            }
            sent += line.len();
        }
    }
    // Whatever happened to that connection, the server still answers...
    assert_eq!(c.get("/api/meta").0, 200);
    // ... and did not keep the headers.
    let grown = c.rss_kib().saturating_sub(before);
    eprintln!("{sent} bytes of headers sent: the server grew by {grown} KiB");
    assert!(
        grown < 16 << 10,
        "{sent} bytes of headers sent: the server grew by {grown} KiB"
    );
    drop(s);
}

/// 2,000 connections that never finish their request (the issue saw
/// 5,000 make 5,000 threads): the server's thread count stays what it was,
/// and a request on a new connection is answered meanwhile.
#[test]
fn slow_connections_make_no_threads() {
    let c = ChildServer::start();
    let before = c.status("Threads");
    let slow: Vec<std::net::TcpStream> = (0..2000)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(c.addr).unwrap();
            let _ = s.write_all(b"GET /api/meta?tok");
            s
        })
        .collect();
    assert_eq!(c.get("/api/meta").0, 200, "answered beside the slow ones");
    let after = c.status("Threads");
    eprintln!(
        "{} slow connections: {before} threads, then {after}",
        slow.len()
    );
    assert!(
        after <= before + 1,
        "{} slow connections: {before} threads became {after}",
        slow.len()
    );
}

/// As many clients as there are workers ask for an answer larger than the
/// socket buffers and read only its first bytes: they held every worker
/// (each blocked writing), so nobody else was served. Another client is
/// served meanwhile.
#[test]
fn clients_that_do_not_read_their_answers_hold_no_worker() {
    // 16 MiB: more than the server's send buffer (tcp_wmem caps it at
    // 4 MiB by default) and a receive buffer that never grows because
    // nothing is read.
    let mut d = hand_dump::dump(8);
    let big = d.symbols.as_ref().unwrap().files[1].clone();
    d.sources = vec![coldcache_dump::SourceText {
        path: big.clone(),
        text: format!("{}\n", "x".repeat(1023)).repeat(16 << 10),
    }];
    let s = Running::start(vec![(
        "a".into(),
        Profile::new(d, ProfileOptions::default()),
    )]);
    let stuck: Vec<std::net::TcpStream> = (0..coldcache_ui::WORKERS)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(s.addr).unwrap();
            c.set_read_timeout(Some(PATIENCE)).unwrap();
            write!(
                c,
                "GET /api/source?file={big}&token={} HTTP/1.1\r\nHost: {}\r\n\r\n",
                s.token, s.addr
            )
            .unwrap();
            let mut head = [0u8; 12];
            c.read_exact(&mut head).unwrap();
            assert_eq!(&head[9..], b"200");
            c
        })
        .collect();
    let (status, out) = get_from(s.addr, &format!("/api/meta?token={}", s.token));
    assert_eq!(status, 200, "{out}");
    drop(stuck);
}

/// Junk query parameters made a new cache entry each (the cache counted
/// answers' bytes, not its keys'): 2,000 requests with 16 KiB of junk each
/// must not grow the server by their 32 MB.
#[test]
fn junk_query_parameters_do_not_grow_the_cache() {
    let c = ChildServer::start();
    let before = c.rss_kib();
    let junk = "j".repeat(16 << 10);
    for i in 0..2000 {
        let (status, out) = c.get(&format!("/api/meta?junk{i}={junk}"));
        assert!(status == 200 || status == 400, "{out}");
    }
    let grown = c.rss_kib().saturating_sub(before);
    eprintln!("2,000 requests with 16 KiB of junk: the server grew by {grown} KiB");
    assert!(grown < 16 << 10, "the server grew by {grown} KiB");
}

/// A parameter the path does not take is refused and named (it made a
/// cache entry of its own before), the page's own are taken.
#[test]
fn unknown_parameters_are_refused_and_named() {
    let a = app(None);
    let r = get(&a, "/api/flat?by=line&sotr=mem");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("unknown parameter 'sotr' for /api/flat"),
        "{}",
        r.text()
    );
    assert!(!a.is_cached("/api/flat?by=line&sotr=mem"));
    let r = get(&a, "/api/meta?x=1");
    assert!(r.text().contains("it takes: none"), "{}", r.text());
    // Every parameter the page sends (ui/src/assets/app.js) is taken.
    for url in [
        "/api/flat?dump=0&by=function&sort=mem&inclusive=0&filter=&limit=300",
        "/api/tree?dump=0&kind=callers&sort=mem&min_percent=0.5&fn=2&hot=1",
        "/api/tree?dump=0&kind=top_down&sort=mem&min_percent=0.5&reveal=2&node=0",
        "/api/tree?dump=0&kind=bottom_up&sort=mem&min_percent=0.5&path=2",
        "/api/flame?dump=0&weight=mem&node=0&compare=0",
        "/api/flame?dump=0&weight=mem&focus=2",
        "/api/flame.svg?dump=0&weight=mem",
        "/api/diff?by=line&sort=mem&filter=&limit=300",
        "/api/function?dump=0&fn=2",
        "/api/annotate?dump=0&fn=2",
        "/api/asm?dump=0&fn=2",
        "/api/threads?dump=0",
        "/api/meta",
        "/",
    ] {
        assert_eq!(get(&a, url).status, 200, "{url}: {}", get(&a, url).text());
    }
}

/// The cache's size counts its keys: with a 64 KiB cache, answers whose
/// keys alone are over 4 KiB (function 2 spelt with thousands of leading
/// zeros, a different number of them each time) cannot be more than 16 in
/// it at once, however small the answers. Counting answers' bytes only,
/// about a hundred were.
#[test]
fn the_cache_counts_its_keys_against_its_size() {
    let a = app(None).with_cache_limit(64 << 10);
    let urls: Vec<String> = (0..300)
        .map(|i| format!("/api/function?fn={}2", "0".repeat(4096 + i)))
        .collect();
    for u in &urls {
        let r = get(&a, u);
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.body.len() < 1024, "a small answer");
    }
    let held = urls.iter().filter(|u| a.is_cached(u)).count();
    assert!((1..=16).contains(&held), "{held} answers held");
    // The newest is held: the cache still works.
    assert!(a.is_cached(urls.last().unwrap()));
}

/// A client that sends half a request is told 408 and closed once the
/// read deadline has passed (the whole head must arrive in time, so one
/// byte now and then does not keep a connection open).
#[test]
fn a_request_that_does_not_arrive_in_time_gets_408() {
    let server = Server::bind(
        vec![("a".into(), profile(8, None))],
        &ServeOptions {
            read_timeout: std::time::Duration::from_secs(1),
            ..ServeOptions::default()
        },
    )
    .unwrap();
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let ended = run_in_background(server, Arc::clone(&stop));
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(b"GET /api/meta HTTP/1.1\r\nHost: ").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("closed by the server");
    assert!(out.starts_with("HTTP/1.1 408 "), "{out}");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    wait_for_run(ended, "the stop flag");
}

/// A client that stops reading its answer is dropped once the write
/// deadline has passed: it gets what the socket buffers held, not the
/// whole answer. (It waits five times the deadline before reading.)
#[test]
fn an_answer_not_read_in_time_is_cut() {
    let mut d = hand_dump::dump(8);
    let big = d.symbols.as_ref().unwrap().files[1].clone();
    let text = format!("{}\n", "x".repeat(1023)).repeat(16 << 10);
    d.sources = vec![coldcache_dump::SourceText {
        path: big.clone(),
        text: text.clone(),
    }];
    let server = Server::bind(
        vec![("a".into(), Profile::new(d, ProfileOptions::default()))],
        &ServeOptions {
            write_timeout: std::time::Duration::from_secs(1),
            ..ServeOptions::default()
        },
    )
    .unwrap();
    let token = server.url.split("token=").nth(1).unwrap().to_string();
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let ended = run_in_background(server, Arc::clone(&stop));
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        s,
        "GET /api/source?file={big}&token={token} HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(5));
    let mut out = Vec::new();
    // The end is a close (EOF) or a reset, not a timeout.
    if let Err(e) = s.read_to_end(&mut out) {
        assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
    }
    assert!(out.starts_with(b"HTTP/1.1 200 "));
    assert!(
        out.len() < text.len(),
        "{} of {} bytes",
        out.len(),
        text.len()
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    wait_for_run(ended, "the stop flag");
}

/// `/api/asm` gives objdump's addresses where the caller told the module's
/// load bias (as `coldcache report --asm` prints them) and run-time ones
/// where not, in the syntax asked for; any other syntax is refused by name.
#[test]
fn the_disassembly_gives_objdumps_addresses_in_the_syntax_asked_for() {
    let a = app(None).with_load_biases(vec![vec![Some(0x1000)], vec![None]]);
    let p = profile(8, None);
    let f: coldcache_analysis::FnId = 2;
    for (syntax, want_syntax) in [
        ("", views::AsmSyntax::Att),
        ("att", views::AsmSyntax::Att),
        ("intel", views::AsmSyntax::Intel),
    ] {
        let v = json(&get(&a, &format!("/api/asm?dump=0&fn=2&syntax={syntax}")));
        let want = views::disassembly_with(
            &p,
            &[f],
            &views::AsmOptions {
                syntax: want_syntax,
                load_bias: vec![Some(0x1000)],
            },
        );
        assert_eq!(v, serde_json::to_value(&want).unwrap(), "syntax={syntax}");
        let rows = v["rows"].as_array().unwrap();
        assert!(!rows.is_empty());
        for r in rows {
            assert_eq!(
                r["file_addr"].as_u64().unwrap(),
                r["addr"].as_u64().unwrap() - 0x1000,
                "{r}"
            );
        }
    }
    // The second dump's bias is unknown: run-time addresses only.
    let v = json(&get(&a, "/api/asm?dump=1&fn=2"));
    for r in v["rows"].as_array().unwrap() {
        assert!(r["file_addr"].is_null(), "{r}");
    }
    let r = get(&a, "/api/asm?dump=0&fn=2&syntax=nasm");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("syntax=nasm"), "{}", r.text());
}

/// The hand dump plus a chain of single callers: `main` calls `a`, `a`
/// calls `b`, `b` calls `c`, and `c` spends 4 instructions reaching memory
/// 4 times (its only costs). Functions 5, 6, 7 are `a`, `b`, `c`.
fn chain_profile() -> Profile {
    use coldcache_dump::{Frame, Function, Location, Record, StackNode};
    let mut d = hand_dump::dump(8);
    let s = d.symbols.as_mut().unwrap();
    for (name, entry) in [("a", 0x5000), ("b", 0x6000), ("c", 0x7000)] {
        let function = s.functions.len() as u32;
        s.functions.push(Function {
            name: name.into(),
            module: 0,
            entry,
            file: 0,
            line: 50,
        });
        for addr in [entry, entry + 4] {
            s.locations.push(Location {
                addr,
                frames: vec![Frame {
                    function,
                    file: 0,
                    line: 51,
                }],
                code: vec![0x90],
            });
        }
    }
    // main's call site of `a`, between main's other addresses.
    s.locations.insert(
        4,
        Location {
            addr: 0x1040,
            frames: vec![Frame {
                function: 0,
                file: 0,
                line: 13,
            }],
            code: vec![0x90],
        },
    );
    let first = d.stacks.len() as u32;
    for (parent, call_site, callee) in [(0, 0x1040, 0x5000), (first, 0x5004, 0x6000)] {
        d.stacks.push(StackNode {
            parent,
            call_site,
            callee,
        });
    }
    d.stacks.push(StackNode {
        parent: first + 1,
        call_site: 0x6004,
        callee: 0x7000,
    });
    d.records.push(Record {
        ip: 0x7000,
        stack: first + 2,
        thread: 0,
        counters: hand_dump::counters(4, 0, 4, 0, 0),
    });
    Profile::new(d, ProfileOptions::default())
}

/// (name, chain names, key, has_children) of each row of a tree answer.
fn folded(v: &Value) -> Vec<(String, Vec<String>, String, bool)> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["chain"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .map(|x| x["name"].as_str().unwrap().to_string())
                            .collect()
                    })
                    .unwrap_or_default(),
                r["key"].as_str().unwrap().to_string(),
                r["has_children"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn row(name: &str, chain: &[&str], key: &str, kids: bool) -> (String, Vec<String>, String, bool) {
    (
        name.to_string(),
        chain.iter().map(|s| s.to_string()).collect(),
        key.to_string(),
        kids,
    )
}

#[test]
fn fold_makes_a_chain_of_single_callers_one_row_as_the_cli_does() {
    let a = App::new(vec![("chain.ccdump".into(), chain_profile())], TOKEN.into());
    // update and render, get_pos inlined into each.
    let (upd, ren) = (1u32 | 1 << 31, 3u32 | 1 << 31);
    // By hand: c's only cost came through b ← a ← main, one path: one row
    // `b` carrying a and main, opened below main (nothing: main is a root).
    let c = json(&get(&a, "/api/tree?kind=bottom_up&sort=mem&path=7&fold=1"));
    assert_eq!(folded(&c), [row("b", &["a", "main"], "7,6,5,0", false)]);
    // Without fold, one level: b alone, opened below b.
    let c = json(&get(&a, "/api/tree?kind=bottom_up&sort=mem&path=7"));
    assert_eq!(folded(&c), [row("b", &[], "7,6", true)]);
    // The hot path of the bottom-up tree by mem (get_pos 10, c 4, rec 1,
    // update 0, main 0): get_pos's callers are update (8, inlined there)
    // and render (2), get_pos inlined into both, each with main as its only
    // caller: folded, and the
    // hot path stops at the chain's end (main has no caller).
    let h = json(&get(&a, "/api/tree?kind=bottom_up&sort=mem&hot=1&fold=1"));
    assert_eq!(
        folded(&h),
        [
            row("get_pos", &[], "2", true),
            row("c", &[], "7", true),
            row("rec", &[], "4", true),
            row("update", &[], "1", true),
            row("main", &[], "0", false),
            row("update", &["main"], &format!("2,{upd},0"), false),
            row("render", &["main"], &format!("2,{ren},0"), false),
        ]
    );
    assert_eq!(h["rows"][5]["inlined"], true);
    assert_eq!(h["rows"][5]["chain"][0]["inlined"], false);
    // The first level never folds (a function where cost was spent, then
    // its caller), as in the CLI: c's row at depth 1 keeps its one caller.
    // Callers of c: c, then the folded chain, opened by hot=1.
    let k = json(&get(
        &a,
        "/api/tree?kind=callers&fn=7&sort=mem&hot=1&fold=1",
    ));
    assert_eq!(
        folded(&k),
        [
            row("c", &[], "7", true),
            row("b", &["a", "main"], "7,6,5,0", false)
        ]
    );
    assert_eq!(k["rows"][1]["percent"], 100.0);
    // The CLI's text of the same tree (render::tree over the whole view,
    // one rule: views::takes_only_caller) shows the same chains.
    let p = chain_profile();
    let v = views::bottom_up(
        &p,
        &views::TreeQuery {
            sort: Some("mem".into()),
            ..views::TreeQuery::default()
        },
    )
    .unwrap();
    let text = coldcache_analysis::render::tree(&v, &[0]);
    for line in [
        "b ← a ← main",
        "update [inlined here] ← main",
        "render [inlined here] ← main",
    ] {
        assert!(
            text.lines()
                .any(|l| l.trim_end().ends_with(&format!("  {line}"))),
            "{line} in\n{text}"
        );
    }
    // Top-down rows never fold: fold=1 answers as without it.
    assert_eq!(
        json(&get(&a, "/api/tree?kind=top_down&sort=mem&hot=1&fold=1")),
        json(&get(&a, "/api/tree?kind=top_down&sort=mem&hot=1"))
    );
}
