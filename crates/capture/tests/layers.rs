//! Fences on the capture runtime's layers (ARCHITECTURE.md, "Capture"):
//! imports may only run down. The layers are not all clean yet (issue 34:
//! seven files around the engine and the life cycle still import each
//! other, `python3 ../shared/tools/modgraph.py crates/capture/src`); what
//! is clean is held here, so it stays so:
//! - the bottom layer (shared state, the doorbell, the lock, the options)
//!   imports no signal code, front end, life cycle or entry protocol;
//! - `seccomp.rs` and `sysemu.rs` import no front end, life cycle or entry
//!   protocol;
//! - the entry protocols (`capi`, `preload`, `attach`) are imported by
//!   nothing but each other;
//! - only the writer thread (`writer.rs`) takes the doorbell's commands.

use std::path::{Path, PathBuf};

/// The source of `file` (relative to `src/`) without comments and without
/// its `#[cfg(test)] mod tests` tail.
fn code(file: &str) -> String {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    strip(&text)
}

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

/// Every `.rs` file under `src/`, relative to it.
fn files() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p.strip_prefix(&src).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

/// The modules of `names` that `file`'s code refers to through `crate::`
/// (a path, or an item of a `use crate::{...}` list).
fn refers_to(file: &str, names: &[&str]) -> Vec<String> {
    refers_in(&code(file), names)
}

/// The modules of `names` that code `c` (stripped) refers to.
fn refers_in(c: &str, names: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for n in names {
        let path = [
            format!("crate::{n}::"),
            format!("crate::{n};"),
            format!("crate::{n} as"),
        ];
        let mut hit = path.iter().any(|p| c.contains(p.as_str()));
        // `use crate::{a, b::c, ...};`
        for (i, _) in c.match_indices("crate::{") {
            let list = &c[i + 8..];
            let list = &list[..list.find("};").unwrap_or(list.len())];
            if list
                .split(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                .any(|w| w == *n)
            {
                hit = true;
            }
        }
        if hit {
            found.push(n.to_string());
        }
    }
    found
}

const ABOVE_STATE: &[&str] = &[
    "engine",
    "jit",
    "lifecycle",
    "writer",
    "capi",
    "preload",
    "attach",
    "sigvirt",
    "sigfault",
    "fatal",
    "seccomp",
    "sysemu",
    "breakpoint",
    "schedule",
];

#[test]
fn the_bottom_layer_imports_nothing_above_it() {
    let mut bad = Vec::new();
    for f in ["state.rs", "doorbell.rs", "lock.rs", "options.rs"] {
        let up = refers_to(f, ABOVE_STATE);
        if !up.is_empty() {
            bad.push(format!("{f} imports {up:?}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn seccomp_and_system_call_code_import_no_front_end_life_cycle_or_entry() {
    let above = [
        "engine",
        "jit",
        "lifecycle",
        "writer",
        "capi",
        "preload",
        "attach",
    ];
    let mut bad = Vec::new();
    for f in ["seccomp.rs", "sysemu.rs"] {
        let up = refers_to(f, &above);
        if !up.is_empty() {
            bad.push(format!("{f} imports {up:?}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn entry_protocols_are_imported_only_by_each_other() {
    let entries = ["capi", "preload", "attach"];
    let mut bad = Vec::new();
    for f in files() {
        if ["capi.rs", "preload.rs", "attach.rs", "lib.rs"].contains(&f.as_str()) {
            continue;
        }
        let up = refers_to(&f, &entries);
        if !up.is_empty() {
            bad.push(format!("{f} imports {up:?}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn only_the_writer_takes_the_doorbells_commands() {
    let takers: Vec<String> = files()
        .into_iter()
        .filter(|f| f != "doorbell.rs" && code(f).contains("doorbell::take("))
        .collect();
    assert_eq!(takers, ["writer.rs"]);
}

/// The fences above find what they look for: an import written in each
/// of the ways they read, and not one in a comment or a test module.
#[test]
fn the_import_reader_sees_paths_and_use_lists_not_comments() {
    let sample = "use crate::{doorbell, engine::x};\n\
                  fn f() { crate::jit::go(); }\n\
                  use crate::lock as l;\n\
                  use crate::state;\n\
                  fn g() {} // crate::capi::no\n\
                  #[cfg(test)]\nmod tests {\n use crate::writer::w;\n}\n";
    assert_eq!(
        refers_in(
            &strip(sample),
            &["doorbell", "engine", "jit", "lock", "state", "capi", "writer", "preload"]
        ),
        ["doorbell", "engine", "jit", "lock", "state"]
    );
}
