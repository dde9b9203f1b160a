//! The web UI's requests, answered without any I/O but reading the source
//! files a dump names (pure otherwise, so it is tested without a network).
//!
//! Endpoints (all `GET`, all need the token; a parameter a path does not
//! take is refused with 400, so that junk neither fills the answer cache nor
//! passes unnoticed):
//!
//! | path | answer |
//! |---|---|
//! | `/` | the page (HTML with its CSS and JavaScript inlined; its Content-Security-Policy, [`App::page_policy`], allows those two by their SHA-256) |
//! | `/api/meta` | the dumps: capture settings, cache configuration, threads, modules, columns, the summary (`summary::summary`); with two dumps, `cache_mismatch` (`diff::cache_mismatch`, as `coldcache diff`) |
//! | `/api/flat?dump&by&sort&inclusive&filter&limit&syntax` | `views::flat`; by instruction, addresses and disassembly as `/api/asm` gives them (`syntax`, file addresses) |
//! | `/api/tree?dump&kind&fn&node&path&sort&min_percent&hot&reveal&fold` | one level of a tree below a node (`node` for top-down, `path` of function ids for bottom-up and callers, a row marked inlined with bit 31 set, `views::INLINED_BIT`); `hot=1` also opens the hottest path below it; `reveal=FN` (top-down) opens the tree down to FN's hottest node; `fold=1` (bottom-up, callers): a chain of single callers is one row (`views::takes_only_caller`, as `coldcache report`'s text), its callers in `chain`, its `key` and `has_children` those of the chain's last |
//! | `/api/function?dump&fn` | a function: its info, self and inclusive values, and the same function's id in the other dump |
//! | `/api/annotate?dump&fn` | `views::annotate` |
//! | `/api/asm?dump&fn&syntax` | `views::disassembly_with`: `syntax` `att` (the default, as `objdump -d` and `coldcache report --asm`) or `intel`; each row's `file_addr` is objdump's address when the dump's load biases were given ([`App::with_load_biases`]) |
//! | `/api/threads?dump` | `views::threads` |
//! | `/api/flame?dump&weight&node&focus&compare` | `flame::flame`: the flame graph's frames below a call-tree node (`focus=FN`: FN's heaviest node), laid out; `compare=1`: `flame::flame_compare` with the other dump |
//! | `/api/flame.svg?dump&weight` | the whole flame graph as an SVG file (`coldcache-export`, inferno), to save |
//! | `/api/diff?by&sort&filter&limit` | `diff::diff` of dump 0 → dump 1: `by` `function`, `line`, or the data view's `type`, `field`, `object` (`coldcache diff --by`) |
//! | `/api/source?dump&file` | a source file, only when the dump's line tables name it: its text embedded in the dump, else read from disk |
//! | `/api/data?dump&sort&filter&limit` | `data::data`: coverage, per-module lines, the types and fields tables, the objects (`objects::objects`, null with `objects_note` for a dump recorded without `--objects`) (`report --view data --json`) |
//! | `/api/layout?dump&type` | `data::layout`: one type's members, holes, cache lines and their accesses (`report --view layout TYPE --json`); an unknown or ambiguous name is 404 or 400 with `find_type`'s message listing the candidates |
//!
//! A dump without data types answers `/api/data` and `/api/layout` with 400
//! and the CLI's message (run `coldcache resolve` on it).

use coldcache_analysis::data::{self, DataQuery};
use coldcache_analysis::diff::{self, DataRows, DiffQuery};
use coldcache_analysis::flame::{self, FlameQuery};
use coldcache_analysis::summary;
use coldcache_analysis::views::{self, values, By, FlatQuery, TreeKind, TreeQuery};
use coldcache_analysis::{FnId, Profile};
use coldcache_dump::{SourceText, MAX_SOURCE_FILE};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Mutex;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// An answer.
#[derive(Clone, Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Content type.
    pub content_type: String,
    /// Body.
    pub body: Vec<u8>,
}

impl Reply {
    fn json(v: &Value) -> Reply {
        Reply {
            status: 200,
            content_type: "application/json".into(),
            body: serde_json::to_vec(v).unwrap_or_default(),
        }
    }

    fn of<T: serde::Serialize>(v: &T) -> Reply {
        Reply {
            status: 200,
            content_type: "application/json".into(),
            body: serde_json::to_vec(v).unwrap_or_default(),
        }
    }

    /// An error with a JSON body `{ "error": message }`.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply {
            status,
            content_type: "application/json".into(),
            body: serde_json::to_vec(&json!({ "error": message })).unwrap_or_default(),
        }
    }

    /// The body as text (tests).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The application: the profiles being shown, the token, and a cache of
/// answers (profiles never change, so an answer depends only on its URL).
pub struct App {
    profiles: Vec<(String, Profile)>,
    token: String,
    /// The page, its CSS and JavaScript inlined.
    page: String,
    /// The page's Content-Security-Policy.
    page_policy: String,
    /// The answers, and the bytes they take (see [`entry_bytes`]).
    cache: Mutex<(HashMap<String, Reply>, usize)>,
    cache_limit: usize,
    /// Per dump, per module, its load bias (run-time address minus ELF
    /// virtual address) where known: the caller reads the files.
    load_biases: Vec<Vec<Option<u64>>>,
}

/// Bytes of the answer cache (keys, answers and a per-entry overhead)
/// before it is emptied.
pub const CACHE_BYTES: usize = 256 << 20;

/// What an entry of the answer cache is counted for: its key, its answer
/// and the bookkeeping around them (the map's slot, the strings' and
/// vector's headers), rounded up.
fn entry_bytes(key: &str, r: &Reply) -> usize {
    key.len() + r.body.len() + r.content_type.len() + 128
}

/// The parameters each path reads (besides `token`); any other is refused,
/// so that junk parameters neither make cache entries nor pass unnoticed.
fn parameters(path: &str) -> Option<&'static [&'static str]> {
    Some(match path {
        "/" | "/index.html" | "/api/meta" => &[],
        "/api/flat" => &[
            "dump",
            "by",
            "sort",
            "inclusive",
            "filter",
            "limit",
            "syntax",
        ],
        "/api/tree" => &[
            "dump",
            "kind",
            "fn",
            "node",
            "path",
            "sort",
            "min_percent",
            "hot",
            "reveal",
            "fold",
        ],
        "/api/function" | "/api/annotate" => &["dump", "fn"],
        "/api/asm" => &["dump", "fn", "syntax"],
        "/api/threads" => &["dump"],
        "/api/flame" => &["dump", "weight", "node", "focus", "compare"],
        "/api/flame.svg" => &["dump", "weight"],
        "/api/diff" => &["by", "sort", "filter", "limit"],
        "/api/source" => &["dump", "file"],
        "/api/data" => &["dump", "sort", "filter", "limit"],
        "/api/layout" => &["dump", "type"],
        _ => return None,
    })
}

/// The SHA-256 of `text` as a CSP hash source.
fn csp_hash(text: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let h = sha2::Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(h)
    )
}

type Query = HashMap<String, String>;

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl App {
    /// An application over `profiles` (name, profile), protected by `token`.
    pub fn new(profiles: Vec<(String, Profile)>, token: String) -> App {
        // The page's one script and one style are allowed by their hashes:
        // nothing else inline runs or applies (an injected element or
        // attribute, were `esc()` ever forgotten), and no script is loaded
        // from anywhere. The page reaches only its own server (`fetch`).
        let page = INDEX_HTML
            .replace("/*APP_CSS*/", APP_CSS)
            .replace("/*APP_JS*/", APP_JS);
        let page_policy = format!(
            "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; \
             base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            csp_hash(APP_JS),
            csp_hash(APP_CSS)
        );
        App {
            profiles,
            token,
            page,
            page_policy,
            cache: Mutex::new((HashMap::new(), 0)),
            cache_limit: CACHE_BYTES,
            load_biases: Vec::new(),
        }
    }

    /// The same application knowing, for dump `i`, each module's load bias
    /// `biases[i][m]` (run-time address minus ELF virtual address, `None`
    /// when unknown), so that `/api/asm` gives objdump's addresses as
    /// `coldcache report --asm` does. The UI reads no ELF files itself.
    pub fn with_load_biases(mut self, biases: Vec<Vec<Option<u64>>>) -> App {
        self.load_biases = biases;
        self
    }

    /// The same application with an answer cache of at most `bytes`
    /// (counted by `entry_bytes`: keys, answers and overhead) instead of
    /// [`CACHE_BYTES`].
    pub fn with_cache_limit(mut self, bytes: usize) -> App {
        self.cache_limit = bytes;
        self
    }

    /// The Content-Security-Policy of the page (the server sends it with
    /// every HTML answer).
    pub fn page_policy(&self) -> &str {
        &self.page_policy
    }

    /// Computes the answers that take longest (flat by line and
    /// instruction, the comparison by line)
    /// ahead of the first click; `coldcache ui` runs it on a thread of its
    /// own at start-up.
    pub fn warm(&self) {
        let t = self.token.clone();
        let mut urls = Vec::new();
        for i in 0..self.profiles.len() {
            urls.push(format!("/api/flat?dump={i}&by=line&limit=300&token={t}"));
            urls.push(format!(
                "/api/flat?dump={i}&by=instruction&limit=300&token={t}"
            ));
        }
        if self.profiles.len() > 1 {
            urls.push(format!("/api/diff?by=line&limit=300&token={t}"));
        }
        for u in urls {
            let _ = self.handle(&u, None);
        }
    }

    /// The token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Answers `url` (path and query); `header_token` is the
    /// `X-Coldcache-Token` header, if any.
    pub fn handle(&self, url: &str, header_token: Option<&str>) -> Reply {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let q: Query = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let given = header_token
            .or(q.get("token").map(String::as_str))
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), self.token.as_bytes()) {
            return Reply::error(
                403,
                "missing or wrong token: open the URL coldcache ui printed",
            );
        }
        if let Some(known) = parameters(path) {
            if let Some(k) = q
                .keys()
                .find(|k| *k != "token" && !known.contains(&k.as_str()))
            {
                return Reply::error(
                    400,
                    &format!(
                        "unknown parameter '{k}' for {path} (it takes: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                );
            }
        }
        // Answers of the API are cached by URL without the token, except
        // those that read files (which may change).
        let cacheable =
            path.starts_with("/api/") && path != "/api/source" && path != "/api/annotate";
        let key = self.cache_key(path, &q);
        if cacheable {
            if let Some(r) = self.cache.lock().ok().and_then(|c| c.0.get(&key).cloned()) {
                return r;
            }
        }
        let reply = match self.route(path, &q) {
            Ok(r) => r,
            Err((status, msg)) => Reply::error(status, &msg),
        };
        let bytes = entry_bytes(&key, &reply);
        if cacheable && reply.status == 200 && bytes <= self.cache_limit {
            if let Ok(mut c) = self.cache.lock() {
                // Two workers may have computed the same answer: the second
                // replaces the first, whose bytes are no longer held.
                if let Some(old) = c.0.remove(&key) {
                    c.1 -= entry_bytes(&key, &old);
                }
                if c.1 + bytes > self.cache_limit {
                    c.0.clear();
                    c.1 = 0;
                }
                c.1 += bytes;
                c.0.insert(key, reply.clone());
            }
        }
        reply
    }

    /// The disassembly's options for the dump `q` names: `syntax` `att`
    /// (the default) or `intel`, and that dump's load biases.
    fn asm_options(&self, q: &Query) -> Result<views::AsmOptions, (u16, String)> {
        let syntax = match q.get("syntax").map(String::as_str) {
            None | Some("" | "att") => views::AsmSyntax::Att,
            Some("intel") => views::AsmSyntax::Intel,
            Some(other) => return Err((400, format!("syntax={other}: expected att or intel"))),
        };
        let load_bias = self
            .load_biases
            .get(num(q, "dump", 0)?)
            .cloned()
            .unwrap_or_default();
        Ok(views::AsmOptions { syntax, load_bias })
    }

    fn route(&self, path: &str, q: &Query) -> Result<Reply, (u16, String)> {
        match path {
            "/" | "/index.html" => Ok(Reply {
                status: 200,
                content_type: "text/html; charset=utf-8".into(),
                body: self.page.clone().into_bytes(),
            }),
            "/api/meta" => Ok(Reply::json(&self.meta())),
            "/api/flat" => {
                let p = self.profile(q)?;
                let v = views::flat(
                    p,
                    &FlatQuery {
                        by: by(q)?,
                        sort: q.get("sort").filter(|s| !s.is_empty()).cloned(),
                        inclusive: q.get("inclusive").is_some_and(|v| v == "1"),
                        filter: q.get("filter").filter(|s| !s.is_empty()).cloned(),
                        limit: Some(num(q, "limit", 200)?),
                        // Instructions as the disassembly shows them.
                        asm: Some(self.asm_options(q)?),
                    },
                )
                .map_err(bad)?;
                Ok(Reply::of(&v))
            }
            "/api/tree" => self.tree(q),
            "/api/function" => {
                let p = self.profile(q)?;
                let f = self.function(p, q)?;
                let info = p.function(f);
                let other = self
                    .profiles
                    .iter()
                    .enumerate()
                    .map(|(i, (_, o))| {
                        o.functions()
                            .iter()
                            .enumerate()
                            .position(|(x, g)| {
                                g.name == info.name
                                    && g.file == info.file
                                    && diff::module_key(o, x as FnId) == diff::module_key(p, f)
                            })
                            .map(|x| json!({ "dump": i, "fn": x }))
                            .unwrap_or(Value::Null)
                    })
                    .collect::<Vec<_>>();
                Ok(Reply::json(&json!({
                    "id": f,
                    "info": info,
                    "label": views::fn_label(p, f),
                    "self": values(p.columns(), p.fn_self(f)),
                    "incl": values(p.columns(), p.fn_incl(f)),
                    "in_dumps": other,
                })))
            }
            "/api/annotate" => {
                let p = self.profile(q)?;
                let f = self.function(p, q)?;
                let files = p.files();
                let read = |path: &str| -> Option<String> {
                    // Only files of this dump's line tables.
                    files
                        .iter()
                        .any(|x| x == path)
                        .then(|| SourceText::read(path, MAX_SOURCE_FILE).ok())
                        .flatten()
                        .map(|s| s.text)
                };
                Ok(Reply::of(&views::annotate(p, &[f], &read)))
            }
            "/api/asm" => {
                let p = self.profile(q)?;
                let f = self.function(p, q)?;
                let o = self.asm_options(q)?;
                Ok(Reply::of(&views::disassembly_with(p, &[f], &o)))
            }
            "/api/threads" => Ok(Reply::of(&views::threads(self.profile(q)?))),
            "/api/flame" => {
                let p = self.profile(q)?;
                let w = q
                    .get("weight")
                    .filter(|s| !s.is_empty())
                    .map(String::as_str);
                let col = coldcache_export::weight_column(p, w).map_err(bad)?;
                let mut fq = FlameQuery::new(views::column_index(p, &col.name).map_err(bad)?);
                fq.root = u32::try_from(num(q, "node", 0)?)
                    .map_err(|_| (400, "node= is out of range".to_string()))?;
                if fq.root as usize >= p.node_count() {
                    return Err((404, format!("no call-tree node {}", fq.root)));
                }
                if q.contains_key("focus") {
                    // Zoomed into the selected function's heaviest node.
                    let mut fnq = q.clone();
                    fnq.insert("fn".into(), q["focus"].clone());
                    let f = self.function(p, &fnq)?;
                    fq.root = hottest_node(p, f, fq.weight).unwrap_or(0);
                }
                if q.get("compare").is_some_and(|v| v == "1") {
                    // A differential flame graph: this dump's layout with
                    // the other dump's weight of each call path.
                    let i = num(q, "dump", 0)?;
                    let Some((_, other)) = self
                        .profiles
                        .get(1 - i.min(1))
                        .filter(|_| self.profiles.len() > 1)
                    else {
                        return Err((
                            400,
                            "comparison needs two dumps: coldcache ui BEFORE AFTER".into(),
                        ));
                    };
                    return Ok(Reply::of(
                        &flame::flame_compare(p, other, &fq).map_err(bad)?,
                    ));
                }
                Ok(Reply::of(&flame::flame(p, &fq).map_err(bad)?))
            }
            "/api/flame.svg" => {
                let p = self.profile(q)?;
                let w = q
                    .get("weight")
                    .filter(|s| !s.is_empty())
                    .map(String::as_str);
                let svg = coldcache_export::flamegraph(p, w).map_err(bad)?;
                Ok(Reply {
                    status: 200,
                    content_type: "image/svg+xml".into(),
                    body: svg,
                })
            }
            "/api/diff" => {
                if self.profiles.len() < 2 {
                    return Err((
                        400,
                        "comparison needs two dumps: coldcache ui BEFORE AFTER".into(),
                    ));
                }
                // Data types, fields and objects compare as `coldcache
                // diff --by type|field|object` does.
                let data = match q.get("by").map(String::as_str) {
                    Some("type") => Some(DataRows::Type),
                    Some("field") => Some(DataRows::Field),
                    Some("object") => Some(DataRows::Object),
                    _ => None,
                };
                let v = diff::diff(
                    &self.profiles[0].1,
                    &self.profiles[1].1,
                    &DiffQuery {
                        by: if data.is_some() { By::Function } else { by(q)? },
                        sort: q.get("sort").filter(|s| !s.is_empty()).cloned(),
                        filter: q.get("filter").filter(|s| !s.is_empty()).cloned(),
                        limit: Some(num(q, "limit", 200)?),
                        data,
                    },
                )
                .map_err(bad)?;
                Ok(Reply::of(&v))
            }
            "/api/data" => {
                let p = self.data_profile(q)?;
                let v = data::data(
                    p,
                    &DataQuery {
                        sort: q.get("sort").filter(|s| !s.is_empty()).cloned(),
                        filter: q.get("filter").filter(|s| !s.is_empty()).cloned(),
                        limit: Some(num(q, "limit", 200)?),
                    },
                )
                .map_err(bad)?;
                Ok(Reply::of(&v))
            }
            "/api/layout" => {
                let p = self.data_profile(q)?;
                let name = q.get("type").filter(|s| !s.is_empty()).ok_or((
                    400,
                    "type= is missing (the data view lists the types)".to_string(),
                ))?;
                let v = data::layout(p, name).map_err(|e| match e {
                    coldcache_analysis::AnalysisError::NoSuchType { .. } => (404, e.to_string()),
                    e => bad(e),
                })?;
                Ok(Reply::of(&v))
            }
            "/api/source" => {
                let p = self.profile(q)?;
                let file = q.get("file").ok_or((400, "file= is missing".to_string()))?;
                if !p.files().iter().any(|f| f == file) {
                    return Err((403, format!("{file} is not a source file of this dump")));
                }
                // The text embedded in the dump first, else the disk.
                let text = match p.dump().source(file) {
                    Some(t) => t.as_bytes().to_vec(),
                    None => SourceText::read(file, MAX_SOURCE_FILE)
                        .map_err(|e| (404, format!("{file}: {e}")))?
                        .text
                        .into_bytes(),
                };
                Ok(Reply {
                    status: 200,
                    content_type: "text/plain; charset=utf-8".into(),
                    body: text,
                })
            }
            _ => Err((404, format!("no such page: {path}"))),
        }
    }

    /// Whether the answer to `url` is in the cache (tests).
    pub fn is_cached(&self, url: &str) -> bool {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let q: Query = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let key = self.cache_key(path, &q);
        self.cache
            .lock()
            .map(|c| c.0.contains_key(&key))
            .unwrap_or(false)
    }

    /// The cache key of a request: its path and parameters without the
    /// token, empty values and defaults (`inclusive=0`, `hot=0`), with the
    /// default sort column and flame-graph weight spelt out, so that the
    /// page's requests and `warm`'s meet in the cache.
    fn cache_key(&self, path: &str, q: &Query) -> String {
        let mut m: std::collections::BTreeMap<&str, String> = q
            .iter()
            .filter(|(k, v)| k.as_str() != "token" && !v.is_empty())
            .filter(|(k, v)| {
                !((k.as_str() == "inclusive" || k.as_str() == "hot" || k.as_str() == "compare")
                    && v.as_str() == "0")
            })
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        // A `dump=` that is not a number stays as given (the request is
        // refused): it must not meet dump 0's answers.
        let dump = match m.get("dump").map(|d| d.parse::<usize>()) {
            None => Some(0),
            Some(Ok(d)) => Some(d),
            Some(Err(_)) => None,
        };
        if let Some((dump, (_, p))) = dump.and_then(|d| self.profiles.get(d).map(|e| (d, e))) {
            if path != "/api/diff" {
                m.insert("dump", dump.to_string());
            }
            if matches!(path, "/api/flat" | "/api/tree" | "/api/diff" | "/api/data")
                && !m.contains_key("sort")
            {
                m.insert("sort", views::default_sort(p));
            }
            if matches!(path, "/api/flat" | "/api/diff") && !m.contains_key("by") {
                m.insert("by", "function".into());
            }
            if path.starts_with("/api/flame") && !m.contains_key("weight") {
                if let Ok(c) = coldcache_export::weight_column(p, None) {
                    m.insert("weight", c.name.clone());
                }
            }
        }
        format!("{path}?{m:?}")
    }

    fn meta(&self) -> Value {
        let dumps: Vec<Value> = self
            .profiles
            .iter()
            .map(|(name, p)| {
                let d = p.dump();
                let m = &d.meta;
                let status: Vec<Value> = d
                    .modules
                    .iter()
                    .enumerate()
                    .map(|(i, mo)| {
                        let s = d.symbols.as_ref().and_then(|s| s.modules.get(i));
                        json!({
                            "path": mo.path,
                            "status": s.map(|s| s.status),
                            "detail": s.map(|s| s.detail.clone()),
                        })
                    })
                    .collect();
                json!({
                    "name": name,
                    "program": m.program,
                    "pid": m.pid,
                    "cache_name": m.cache_name,
                    "cache_toml": m.cache_toml,
                    "levels": m.levels,
                    "cores": m.cores,
                    "threads_selected": m.threads,
                    "trigger": m.trigger,
                    "duration_ns": m.duration_ns,
                    "instructions": m.instructions,
                    "cut_short": m.cut_short,
                    "warm": m.warm,
                    "schedule": m.schedule,
                    "unmodelled": m.unmodelled,
                    "untrapped": m.untrapped,
                    "notes": m.notes,
                    "threads": d.threads.iter().map(|t| json!({"tid": t.tid, "name": t.name, "core": t.core})).collect::<Vec<_>>(),
                    "modules": status,
                    "records": d.records.len(),
                    "resolved": d.symbols.is_some(),
                    "columns": p.columns().iter().map(|c| json!({"name": c.name, "description": c.description, "ratio": c.is_ratio()})).collect::<Vec<_>>(),
                    "default_sort": views::default_sort(p),
                    "default_weight": p.default_weight().name,
                    "default_columns": default_columns(p),
                    "totals": values(p.columns(), p.totals()),
                    "summary": summary::summary(p),
                })
            })
            .collect();
        // Two dumps simulated with different caches: the sentence `coldcache
        // diff` starts with, shown above both summaries.
        let cache_mismatch = match &self.profiles[..] {
            [(_, a), (_, b), ..] => diff::cache_mismatch(a, b),
            _ => None,
        };
        json!({
            "dumps": dumps,
            "compare": self.profiles.len() >= 2,
            "cache_mismatch": cache_mismatch,
        })
    }

    fn profile(&self, q: &Query) -> Result<&Profile, (u16, String)> {
        let i = num(q, "dump", 0)?;
        self.profiles.get(i).map(|p| &p.1).ok_or((
            404,
            format!("no dump {i} (there are {})", self.profiles.len()),
        ))
    }

    /// The profile `q` names, refused as `coldcache report --view data`
    /// refuses it when the dump has no data types.
    fn data_profile(&self, q: &Query) -> Result<&Profile, (u16, String)> {
        let p = self.profile(q)?;
        if p.dump().data.is_none() {
            let name = &self.profiles[num(q, "dump", 0)?].0;
            return Err((
                400,
                format!(
                    "dump {name} has no data types (no DATA section: it was written before dump format 4, \
                     or resolved without them); run `coldcache resolve {name}` while its binaries and \
                     their debug information exist to add them"
                ),
            ));
        }
        Ok(p)
    }

    fn function(&self, p: &Profile, q: &Query) -> Result<FnId, (u16, String)> {
        let f = num(q, "fn", usize::MAX)?;
        if f >= p.functions().len() {
            return Err((404, format!("no function {f} in this dump")));
        }
        Ok(f as FnId)
    }

    fn tree(&self, q: &Query) -> Result<Reply, (u16, String)> {
        let p = self.profile(q)?;
        let kind = match q.get("kind").map(String::as_str).unwrap_or("top_down") {
            "top_down" => TreeKind::TopDown,
            "bottom_up" => TreeKind::BottomUp,
            "callers" => TreeKind::Callers,
            k => {
                return Err((
                    400,
                    format!("kind={k}: expected top_down, bottom_up or callers"),
                ))
            }
        };
        let fs: Vec<FnId> = if kind == TreeKind::Callers {
            vec![self.function(p, q)?]
        } else {
            Vec::new()
        };
        let sort = q.get("sort").filter(|s| !s.is_empty()).cloned();
        let min_percent: f64 = q
            .get("min_percent")
            .map(|s| {
                s.parse()
                    .map_err(|_| (400, format!("min_percent={s} is not a number")))
            })
            .transpose()?
            .unwrap_or(0.0);
        // Where to start: a call-tree node, or a path of functions.
        let mut from: Vec<u32> = match kind {
            TreeKind::TopDown => vec![u32::try_from(num(q, "node", 0)?)
                .map_err(|_| (400, "node= is out of range".to_string()))?],
            _ => q
                .get("path")
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.split(',')
                        .map(|x| {
                            x.parse::<u32>().map_err(|_| {
                                (400, format!("path={s} is not a list of function ids"))
                            })
                        })
                        .collect::<Result<Vec<u32>, _>>()
                })
                .transpose()?
                .unwrap_or_default(),
        };
        let hot = q.get("hot").is_some_and(|v| v == "1");
        // `fold=1` (inverted trees): a chain of single callers is one row,
        // by `views::takes_only_caller`, the rule of `coldcache report`.
        let fold = kind != TreeKind::TopDown && q.get("fold").is_some_and(|v| v == "1");
        let query = |depth: u32| TreeQuery {
            sort: sort.clone(),
            min_percent,
            max_depth: Some(depth),
            fold,
        };
        // `reveal=FN` (top-down): open the tree down to the hottest node of
        // function FN, one level below each of its ancestors.
        let mut starts: Vec<Vec<u32>> = Vec::new();
        if let (TreeKind::TopDown, Some(r)) = (kind, q.get("reveal")) {
            let f: u32 = r
                .parse()
                .map_err(|_| (400, format!("reveal={r} is not a function id")))?;
            let sc =
                views::column_index(p, &sort.clone().unwrap_or_else(|| views::default_sort(p)))
                    .map_err(bad)?;
            if let Some(mut n) = hottest_node(p, f, sc) {
                let mut chain = Vec::new();
                while n != 0 {
                    n = p.node(n).parent;
                    chain.push(n);
                }
                chain.reverse();
                starts = chain.into_iter().map(|a| vec![a]).collect();
            }
        } else {
            starts.push(from.clone());
        }
        let mut rows: Vec<Value> = Vec::new();
        let mut totals = Value::Null;
        let mut columns = Value::Null;
        let mut sort_name = String::new();
        let mut level = 0;
        while let Some(start) = (level < starts.len()).then(|| starts[level].clone()) {
            level += 1;
            from = start;
            let depth = match kind {
                TreeKind::TopDown => p.node(from[0].min(p.node_count() as u32 - 1)).depth,
                _ => from.len() as u32,
            };
            let v = views::subtree(p, kind, Some(&fs), &from, &query(depth + 1)).map_err(bad)?;
            if level == 1 {
                totals = json!(v.totals);
                columns = json!(v.columns);
                sort_name = v.sort.clone();
            }
            let first = v.rows.first().map(|r| r.id);
            let mut first_end: Option<(Vec<u32>, bool, f64)> = None;
            let parent_key = match kind {
                TreeKind::TopDown => from[0].to_string(),
                _ => from
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            };
            // A path names a row marked inlined with views::INLINED_BIT.
            let step = |function: u32, inlined: bool| {
                if inlined {
                    function | views::INLINED_BIT
                } else {
                    function
                }
            };
            for r in &v.rows {
                // The path to the row, then along its folded chain.
                let path: Vec<u32> = from
                    .iter()
                    .copied()
                    .chain([step(r.function, r.inlined)])
                    .chain(r.chain.iter().map(|c| step(c.function, c.inlined)))
                    .collect();
                let key = match kind {
                    TreeKind::TopDown => r.id.to_string(),
                    _ => path
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                };
                if first == Some(r.id) {
                    first_end = Some((path.clone(), r.has_children, r.percent));
                }
                let mut row = serde_json::to_value(r).unwrap_or(Value::Null);
                row["key"] = json!(key);
                row["parent_key"] = json!(parent_key);
                rows.push(row);
            }
            // The hottest path: keep opening the first child (at most 12
            // levels, while it carries at least 1 %).
            if hot && level == starts.len() && level < 12 {
                if let Some((path, true, pct)) = first_end {
                    if pct >= 1.0 {
                        starts.push(match kind {
                            TreeKind::TopDown => vec![first.unwrap_or(0)],
                            _ => path,
                        });
                    }
                }
            }
        }
        Ok(Reply::json(&json!({
            "kind": kind,
            "sort": sort_name,
            "columns": columns,
            "totals": totals,
            "rows": rows,
        })))
    }
}

/// The call-tree node of function `f` with the largest value of column
/// `col` (the first such node on ties).
fn hottest_node(p: &Profile, f: FnId, col: usize) -> Option<u32> {
    let col = &p.columns()[col];
    (1..p.node_count() as u32)
        .filter(|&n| p.node(n).function == f)
        .max_by(|&a, &b| {
            col.value(p.node_incl(a))
                .total_cmp(&col.value(p.node_incl(b)))
                .then(b.cmp(&a))
        })
}

fn by(q: &Query) -> Result<By, (u16, String)> {
    match q.get("by").map(String::as_str).unwrap_or("function") {
        "function" => Ok(By::Function),
        "line" => Ok(By::Line),
        "instruction" => Ok(By::Instruction),
        b => Err((
            400,
            format!("by={b}: expected function, line or instruction"),
        )),
    }
}

/// The names of the columns shown by default
/// ([`coldcache_analysis::columns::default_shown`]), for the page.
fn default_columns(p: &Profile) -> Vec<&str> {
    let names: Vec<&str> = p.columns().iter().map(|c| c.name.as_str()).collect();
    coldcache_analysis::columns::default_shown(&names)
        .into_iter()
        .map(|i| names[i])
        .collect()
}

fn num(q: &Query, key: &str, default: usize) -> Result<usize, (u16, String)> {
    match q.get(key) {
        None => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| (400, format!("{key}={s} is not a number"))),
    }
}

fn bad(e: impl std::fmt::Display) -> (u16, String) {
    (400, e.to_string())
}
