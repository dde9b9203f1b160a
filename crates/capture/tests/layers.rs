//! Fences on the capture runtime's layers (ARCHITECTURE.md, "Capture"):
//! every file of `src/` has a layer, imports only run down or sideways
//! within a layer, the fast front end never calls the trap engine, no
//! files import each other in a circle, and only the writer thread takes
//! the doorbell's commands and only it and the life cycle call `finish`.
//! A new file must be given its layer here.
//!
//! The imports are read from the source as `python3
//! ../shared/tools/modgraph.py crates/capture/src` reads them: `crate::`
//! paths (resolved to the longest module prefix that is a file), `use
//! crate::{...}` lists and, in `jit/`, `super::` paths; comments and
//! `#[cfg(test)] mod tests` tails are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first. Within a layer imports may go either way (no
/// circle all the same); across layers only down.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "the accounting core, shared state and the doorbell",
        &[
            "account",
            "grow",
            "machine",
            "memory",
            "model",
            "objects",
            "parts",
            "procfs",
            "requests",
            "tables",
            "timeline",
            "unwind",
            "lock",
            "options",
            "settings",
            "state",
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
        "the front ends (trap, and fast)",
        &[
            "engine",
            "sigfault",
            "jit",
            "jit::difftest",
            "jit::interrupted",
            "jit::translate",
            "jit::verify",
        ],
    ),
    (
        "the life cycle and the writer",
        &["lifecycle", "output", "writer"],
    ),
    ("the entry protocols", &["capi", "preload", "attach"]),
];

/// The fast front end's modules: none imports the trap engine (trap hands
/// over to fast, never the reverse).
const FAST: &[&str] = &[
    "jit",
    "jit::difftest",
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
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&p)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
                out.insert(module_of(&rel), strip(&text));
            }
        }
    }
    out
}

/// The longest prefix of `path` (segments) that is one of `modules`.
fn resolve(path: &[&str], modules: &BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|k| path[..k].join("::"))
        .find(|m| modules.contains(m))
}

/// The modules of `modules` that `module`'s code (stripped) imports, itself
/// left out.
fn imports(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let path_at = |s: &str| -> Vec<String> {
        // `a::b::c` at the start of `s`, lower-case segments only.
        let mut segs = Vec::new();
        let mut rest = s;
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
        if let Some(m) = resolve(&p, modules) {
            if m != module && !m.is_empty() {
                found.insert(m);
            }
        }
    };
    for (i, _) in code.match_indices("crate::") {
        let after = &code[i + 7..];
        if let Some(list) = after.strip_prefix('{') {
            let list = &list[..list.find("};").unwrap_or(list.len())];
            for item in list.split(',') {
                add(path_at(item.trim()));
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
            let mut p = vec![parent.to_string()];
            p.extend(path_at(&code[i + 7..]));
            add(p);
        }
    }
    found
}

/// Every module's imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = sources();
    let modules: BTreeSet<String> = src.keys().cloned().collect();
    src.iter()
        .map(|(m, code)| (m.clone(), imports(m, code, &modules)))
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

/// `lifecycle::finish` writes the dump: only the life cycle and the writer
/// thread call it. Signal handlers, the finish trampoline and the
/// dispatcher post `Command::Finish` or run `doorbell::finish_here`, which
/// runs what the life cycle registered. (The crate root re-exports it for
/// the Rust API.)
#[test]
fn only_the_life_cycle_and_the_writer_call_finish() {
    let mut bad = Vec::new();
    for (m, code) in sources() {
        if ["lifecycle", "writer", ""].contains(&m.as_str()) {
            continue;
        }
        let listed = code.match_indices("crate::lifecycle::{").any(|(i, _)| {
            let list = &code[i..];
            let list = &list[..list.find("};").unwrap_or(list.len())];
            list.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == "finish" || w == "finish_and_report")
        });
        if listed
            || code.contains("lifecycle::finish(")
            || code.contains("lifecycle::finish_and_report")
        {
            bad.push(m);
        }
    }
    assert!(bad.is_empty(), "these call lifecycle::finish: {bad:?}");
}

/// The fences read what they look for: imports written each way they
/// read, resolved to the longest module, and none in a comment or a test
/// module; a circle is found.
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
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let code = strip(
        "use crate::{doorbell, engine::x};\n\
         fn f() { crate::jit::go(); crate::jit::cache::Cache::new(); }\n\
         use crate::lock as l;\n\
         fn g() {} // crate::capi::no\n\
         #[cfg(test)]\nmod tests {\n use crate::writer::w;\n}\n",
    );
    let got: Vec<String> = imports("state", &code, &modules).into_iter().collect();
    assert_eq!(got, ["doorbell", "engine", "jit", "jit::cache", "lock"]);
    let sup = imports("jit::verify", "use super::{Jit, with_jit};\n", &modules);
    assert_eq!(sup.into_iter().collect::<Vec<_>>(), ["jit"]);
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
}
