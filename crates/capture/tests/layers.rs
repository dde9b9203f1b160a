//! Fences on the capture runtime's layers (ARCHITECTURE.md, "Capture"):
//! every file of `src/` has a layer, imports only run down or sideways
//! within a layer, the fast front end never calls the trap engine, no
//! files import each other in a circle, only the writer thread takes the
//! doorbell's commands, and only the life cycle calls `finish`.
//! A new file must be given its layer here.
//!
//! The imports are read from the source as `python3
//! ../shared/tools/modgraph.py crates/capture/src` reads them: `crate::`
//! paths (resolved to the longest module prefix that is a file, or through
//! the crate root's `pub use` to the module that defines the item), `use
//! crate::{...}` lists (nested groups too) and, in `jit/`, `super::` paths.
//! Line comments and `#[cfg(test)] mod tests` tails are left out. Not
//! counted, as modgraph does not count them: a module's use of its own
//! submodules (`jit/mod.rs`'s `use interrupted::...`: a parent and its
//! children are one unit); block comments and `//` inside a string literal
//! are not understood (none of them hides an import today).

mod sources;

use std::collections::{BTreeMap, BTreeSet};

/// The layers, lowest first. Within a layer imports may go either way (no
/// circle all the same); across layers only down.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "the process's facts, shared state and the doorbell (the accountant \
         itself is the crate coldcache-account, below them all)",
        &[
            "errno",
            "machine",
            "memory",
            "objects",
            "procfs",
            "lock",
            "options",
            "settings",
            "state",
            "signal_state",
            "doorbell",
            "tls",
            "jit::cache",
            "jit::emit",
            "jit::sys",
        ],
    ),
    (
        "signal code",
        &[
            "altstack",
            "breakpoint",
            "codewrite",
            "fatal",
            "rseq",
            "schedule",
            "seccomp",
            "sigvirt",
            "sysemu",
        ],
    ),
    (
        "the writer thread (it acts through what the life cycle registered)",
        &["writer"],
    ),
    (
        "the front ends (trap, and fast)",
        &[
            "engine",
            "sigfault",
            "jit",
            "jit::difftest",
            "jit::handed",
            "jit::interrupted",
            "jit::state",
            "jit::translate",
            "jit::verify",
        ],
    ),
    ("the life cycle and the output", &["lifecycle", "output"]),
    ("the entry protocols", &["capi", "preload", "attach"]),
];

/// The fast front end's modules: none imports the trap engine (trap hands
/// over to fast, never the reverse).
const FAST: &[&str] = &[
    "jit",
    "jit::difftest",
    "jit::handed",
    "jit::interrupted",
    "jit::translate",
    "jit::verify",
    "sigfault",
];

/// `text` without comments and without its `#[cfg(test)] mod tests` tail.
fn strip(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module of `src/`'s file `rel` (`jit/mod.rs` is `jit`, `lib.rs` is
/// the empty name).
fn module_of(rel: &str) -> String {
    let rel = rel.strip_suffix(".rs").unwrap_or(rel);
    let rel = rel.strip_suffix("/mod").unwrap_or(rel);
    let rel = if rel == "lib" { "" } else { rel };
    rel.replace('/', "::")
}

/// Every module of `src/`, with its stripped source.
fn sources() -> BTreeMap<String, String> {
    sources::rust_files()
        .into_iter()
        .map(|(rel, text)| (module_of(&rel), strip(&text)))
        .collect()
}

/// The longest prefix of `path` (segments) that is one of `modules`.
fn resolve(path: &[&str], modules: &BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|k| path[..k].join("::"))
        .find(|m| modules.contains(m))
}

/// The items the crate root re-exports (`pub use module::{a, b};`,
/// `pub use module::a;`), each with the module that defines it.
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let item = item.rsplit("::").next().unwrap_or(item);
            if !item.is_empty() {
                out.insert(item.to_string(), module.trim().to_string());
            }
        }
    }
    out
}

/// The paths of a `use` list's body (`a, b::c, d::{e, f}`), nested groups
/// expanded.
fn list_paths(body: &str) -> Vec<String> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&body[start..]);
    let mut out = Vec::new();
    for item in items {
        let item = item.trim();
        match item.split_once("::{") {
            Some((prefix, inner)) => {
                let inner = inner.strip_suffix('}').unwrap_or(inner);
                for p in list_paths(inner) {
                    out.push(format!("{prefix}::{p}"));
                }
            }
            None => out.push(item.to_string()),
        }
    }
    out
}

/// The length of the `{...}` group that opens `s`, its `}` included.
fn group_end(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// The modules of `modules` that `module`'s code (stripped) imports, itself
/// left out; `exports` are the crate root's re-exports ([`root_exports`]).
fn imports(
    module: &str,
    code: &str,
    modules: &BTreeSet<String>,
    exports: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let path_at = |s: &str| -> Vec<String> {
        // `a::b::c` at the start of `s`, lower-case segments only.
        let mut segs = Vec::new();
        let mut rest = s.trim_start();
        loop {
            let n = rest.find(|c: char| !ident(c)).unwrap_or(rest.len());
            let seg = &rest[..n];
            if seg.is_empty() || !seg.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
                break;
            }
            segs.push(seg.to_string());
            match rest[n..].strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        segs
    };
    let mut found = BTreeSet::new();
    let mut add = |path: Vec<String>| {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let m = resolve(&p, modules).or_else(|| {
            // An item of the crate root: the module it re-exports.
            exports.get(*p.first()?).cloned()
        });
        if let Some(m) = m {
            if m != module && !m.is_empty() {
                found.insert(m);
            }
        }
    };
    for (i, _) in code.match_indices("crate::") {
        if code[..i].ends_with(|c: char| ident(c) || c == '$') {
            continue; // `$crate::`, `other_crate::`
        }
        let after = &code[i + 7..];
        if after.starts_with('{') {
            let end = group_end(after);
            for p in list_paths(&after[1..end.saturating_sub(1)]) {
                add(path_at(&p));
            }
        } else {
            add(path_at(after));
        }
    }
    // `super::` of a file under `jit/` is `jit`.
    if let Some((parent, _)) = module.rsplit_once("::") {
        for (i, _) in code.match_indices("super::") {
            if i > 0 && code[..i].ends_with(|c: char| ident(c) || c == ':') {
                continue;
            }
            let after = &code[i + 7..];
            if after.starts_with('{') {
                let end = group_end(after);
                for p in list_paths(&after[1..end.saturating_sub(1)]) {
                    let mut q = vec![parent.to_string()];
                    q.extend(path_at(&p));
                    add(q);
                }
            } else {
                let mut q = vec![parent.to_string()];
                q.extend(path_at(after));
                add(q);
            }
        }
    }
    found
}

/// Every module's imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = sources();
    let modules: BTreeSet<String> = src.keys().cloned().collect();
    let exports = root_exports(&src[""]);
    src.iter()
        .map(|(m, code)| (m.clone(), imports(m, code, &modules, &exports)))
        .collect()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&module))
}

#[test]
fn every_file_has_a_layer() {
    let missing: Vec<String> = graph()
        .into_keys()
        .filter(|m| !m.is_empty() && layer_of(m).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "give these a layer in tests/layers.rs: {missing:?}"
    );
}

#[test]
fn every_layer_names_files_that_exist() {
    let src = sources();
    let stale: Vec<&str> = LAYERS
        .iter()
        .flat_map(|(_, ms)| ms.iter().copied())
        .filter(|m| !src.contains_key(*m))
        .collect();
    assert!(
        stale.is_empty(),
        "tests/layers.rs names modules that have no file: {stale:?}"
    );
}

#[test]
fn imports_run_down_the_layers_and_fast_never_calls_trap() {
    let mut bad = Vec::new();
    for (m, to) in graph() {
        let Some(lm) = layer_of(&m) else { continue };
        for t in to {
            let lt = layer_of(&t).unwrap_or(0);
            if lt > lm {
                bad.push(format!(
                    "{m} ({}) imports {t} ({})",
                    LAYERS[lm].0, LAYERS[lt].0
                ));
            }
            if FAST.contains(&m.as_str()) && t == "engine" {
                bad.push(format!("{m} (fast) imports the trap engine"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A circle of `g`, if there is one (depth-first search).
fn circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for t in g.get(m).into_iter().flatten() {
            match state.get(t.as_str()) {
                Some(1) => {
                    let i = path.iter().position(|p| p == t).unwrap();
                    return Some(path[i..].to_vec());
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(t, g, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if !state.contains_key(m) {
            if let Some(c) = visit(m, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    assert_eq!(circle(&graph()), None);
}

#[test]
fn only_the_writer_takes_the_doorbells_commands() {
    let takers: Vec<String> = sources()
        .into_iter()
        .filter(|(m, code)| m != "doorbell" && code.contains("doorbell::take("))
        .map(|(m, _)| m)
        .collect();
    assert_eq!(takers, ["writer"]);
}

/// `lifecycle::finish` writes the dump: only the life cycle calls it (the
/// writer thread, the signal handlers, the finish trampoline and the
/// dispatcher post `Command::Finish` or run `doorbell::finish_here`, which
/// runs what the life cycle registered). It is named `finish` here in
/// every way it could be reached: a path, a `use` of it or of a list that
/// holds it, the crate root's re-export, or `lifecycle` under another name.
/// (The crate root re-exports it for the Rust API.)
#[test]
fn only_the_life_cycle_calls_finish() {
    assert_eq!(finish_callers(&sources()), Vec::<String>::new());
}

/// The modules of `sources` but the life cycle and the crate root that
/// reach `lifecycle::finish` (or `finish_and_report`).
fn finish_callers(sources: &BTreeMap<String, String>) -> Vec<String> {
    // A list's paths that name `finish` of the life cycle: `prefix` is the
    // path the list hangs from (`lifecycle::` or the crate root).
    let names = |list: &str, prefix: &str| -> bool {
        list_paths(list).iter().any(|p| {
            let p = format!("{prefix}{}", p.split(" as ").next().unwrap_or(p).trim());
            ["finish", "finish_and_report"]
                .iter()
                .any(|f| p == *f || p == format!("lifecycle::{f}"))
        })
    };
    let mut bad = Vec::new();
    for (m, code) in sources {
        if m == "lifecycle" || m.is_empty() {
            continue;
        }
        let listed = [("crate::lifecycle::{", "lifecycle::"), ("crate::{", "")]
            .iter()
            .any(|(open, prefix)| {
                code.match_indices(open).any(|(i, _)| {
                    let group = &code[i + open.len() - 1..];
                    let end = group_end(group);
                    names(&group[1..end.saturating_sub(1)], prefix)
                })
            });
        let direct = [
            "lifecycle::finish(",
            "lifecycle::finish;",
            "lifecycle::finish as",
            "lifecycle::finish_and_report",
            "crate::finish(",
            "crate::finish;",
            "crate::lifecycle as",
        ]
        .iter()
        .any(|s| code.contains(s));
        if listed || direct {
            bad.push(m.clone());
        }
    }
    bad
}

/// The fences read what they look for: imports written each way they
/// read, resolved to the longest module or through the crate root's
/// re-exports, and none in a comment, a test module or another crate's
/// path; a circle is found; every way of reaching `finish` is seen.
#[test]
fn the_import_reader_and_the_circle_finder_work() {
    let modules: BTreeSet<String> = [
        "doorbell",
        "engine",
        "jit",
        "jit::cache",
        "lock",
        "capi",
        "writer",
        "lifecycle",
        "state",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let exports =
        root_exports("pub use lifecycle::{finish, start};\npub use engine::coldcache_stop;\n");
    assert_eq!(exports["finish"], "lifecycle");
    assert_eq!(exports["coldcache_stop"], "engine");
    let code = strip(
        "use crate::{doorbell, engine::x, jit::{cache::Cache, y}};\n\
         fn f() { crate::jit::go(); crate::start(); }\n\
         use crate::lock as l;\n\
         macro_rules! m { () => { $crate::capi::x() } }\n\
         fn g() {} // crate::capi::no\n\
         #[cfg(test)]\nmod tests {\n use crate::writer::w;\n}\n",
    );
    let got: Vec<String> = imports("state", &code, &modules, &exports)
        .into_iter()
        .collect();
    assert_eq!(
        got,
        [
            "doorbell",
            "engine",
            "jit",
            "jit::cache",
            "lifecycle",
            "lock"
        ]
    );
    let sup = imports(
        "jit::verify",
        "use super::{Jit, cache::C};\n",
        &modules,
        &exports,
    );
    assert_eq!(sup.into_iter().collect::<Vec<_>>(), ["jit", "jit::cache"]);
    let g: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(x, y)| (x.to_string(), BTreeSet::from([y.to_string()])))
        .collect();
    assert_eq!(circle(&g).map(|c| c.len()), Some(3));
    let dag: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("d", "a")]
        .iter()
        .map(|(x, y)| (x.to_string(), BTreeSet::from([y.to_string()])))
        .collect();
    assert_eq!(circle(&dag), None);
    let callers: BTreeMap<String, String> = [
        ("a", "use crate::lifecycle::finish;"),
        ("b", "use crate::lifecycle::{prepare, finish as f};"),
        ("c", "use crate::lifecycle as lc;"),
        ("d", "fn x() { crate::finish(); }"),
        ("e", "use crate::{lifecycle::{finish_and_report}, state};"),
        ("f", "use crate::lifecycle::{finish_at_exit, prepare};"),
        ("g", "use crate::{jit::finish, state};"),
        ("lifecycle", "fn finish() {}"),
    ]
    .iter()
    .map(|(m, c)| (m.to_string(), strip(c)))
    .collect();
    assert_eq!(finish_callers(&callers), ["a", "b", "c", "d", "e"]);
}
