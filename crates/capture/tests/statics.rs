//! Fences on where the capture runtime's statics live (ARCHITECTURE.md,
//! "The capture runtime"): every `static` of `src/` (in `thread_local!` too, and
//! inside functions) is declared in one of a handful of files, and each
//! says in its doc comment who writes it and from which context (a program
//! thread, a handler, the dispatcher, the writer thread), with the word
//! "Written".
//!
//! Read from the source, as `tests/layers.rs` reads it: a declaration is a
//! line that starts, after its indentation and an optional `pub` or
//! `pub(...)`, with `static ` (so `&'static` and `'static` lifetimes are
//! not declarations); its doc comment is the `///` lines right above it,
//! attributes (`#[...]`) allowed in between. `#[cfg(test)] mod tests`
//! tails are left out: a test's statics may stay with it.

mod sources;

use sources::rust_files as sources;

/// The files that may declare statics (paths under `src/`), and why.
const ALLOWED: &[(&str, &str)] = &[
    (
        "state.rs",
        "the life cycle, the session, the entry protocols, the output, the \
         writer thread and the thread-local offsets (lowest layer)",
    ),
    (
        "signal_state.rs",
        "the signal code, the trap front end's signal shell, and the lowest \
         files state.rs imports (lowest layer, imports nothing of the crate)",
    ),
    ("doorbell.rs", "the doorbell's own (lowest layer)"),
    (
        "jit/state.rs",
        "the fast front end's (a child of jit: it names the translator's types)",
    ),
];

/// Test-only files: compiled for the tests alone, their statics stay.
const TEST_ONLY: &[&str] = &["jit/difftest.rs"];

/// A `static` declaration: its line (1-based), its name and its doc comment.
#[derive(Debug, PartialEq)]
struct Static {
    line: usize,
    name: String,
    doc: String,
}

/// `text` without its `#[cfg(test)] mod tests` tail.
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// The name declared if `line` declares a static.
fn declared(line: &str) -> Option<String> {
    let mut rest = line.trim_start();
    if let Some(r) = rest.strip_prefix("pub") {
        let r = r.trim_start();
        rest = if let Some(r) = r.strip_prefix('(') {
            r.split_once(')')?.1.trim_start()
        } else {
            r
        };
    }
    let rest = rest.strip_prefix("static ")?.trim_start();
    let rest = rest.strip_prefix("mut ").unwrap_or(rest).trim_start();
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Every static `text` declares (its test tail left out), with its doc.
fn statics(text: &str) -> Vec<Static> {
    let lines: Vec<&str> = without_tests(text).lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = declared(l) else { continue };
        let mut doc = Vec::new();
        for above in lines[..i].iter().rev() {
            let t = above.trim_start();
            if let Some(d) = t.strip_prefix("///") {
                doc.push(d.trim());
            } else if !t.starts_with("#[") {
                break;
            }
        }
        doc.reverse();
        out.push(Static {
            line: i + 1,
            name,
            doc: doc.join(" "),
        });
    }
    out
}

#[test]
fn statics_live_in_a_handful_of_files() {
    assert!(ALLOWED.len() <= 5, "a handful is five at most");
    let bad: Vec<String> = sources()
        .iter()
        .filter(|(f, _)| !ALLOWED.iter().any(|(a, _)| a == f) && !TEST_ONLY.contains(&f.as_str()))
        .flat_map(|(f, text)| {
            statics(text)
                .into_iter()
                .map(move |s| format!("src/{f}:{} {}", s.line, s.name))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "statics outside the files tests/statics.rs allows (move them to \
         state.rs, signal_state.rs or jit/state.rs): {bad:#?}"
    );
}

#[test]
fn every_allowed_file_exists() {
    let src = sources();
    for f in ALLOWED
        .iter()
        .map(|(f, _)| *f)
        .chain(TEST_ONLY.iter().copied())
    {
        assert!(
            src.iter().any(|(g, _)| g == f),
            "tests/statics.rs names src/{f}, which does not exist"
        );
    }
}

#[test]
fn every_static_says_who_writes_it() {
    let bad: Vec<String> = sources()
        .iter()
        .flat_map(|(f, text)| {
            statics(text)
                .into_iter()
                .filter(|s| !s.doc.contains("Written"))
                .map(move |s| format!("src/{f}:{} {}", s.line, s.name))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "statics whose doc comment does not say who writes them and from \
         which context (\"Written by ...\"): {bad:#?}"
    );
}

/// The reader finds declarations of every form (visibility, `mut`, inside
/// `thread_local!` and functions), skips `'static` lifetimes, comments and
/// a test tail, and reads a doc comment across attributes only.
#[test]
fn the_declaration_reader_works() {
    let text = "\
/// The state. Written by the program thread.
pub(crate) static STATE: AtomicU8 = AtomicU8::new(0);
/// Not this one's.

static BARE: u8 = 0;
/// Written by a handler.
#[allow(clippy::type_complexity)]
pub static mut RAW: u8 = 0;
fn f(x: &'static str) -> &'static str {
    static LOCAL: u8 = 0;
    // static COMMENTED: u8 = 0;
    x
}
thread_local! {
    /// Written by each thread for itself.
    pub(crate) static CELL: Cell<u64> = const { Cell::new(0) };
}
const S: &str = \"in static TLS\";
#[cfg(test)]
mod tests {
    static IN_TEST: u8 = 0;
}
";
    let got = statics(text);
    let names: Vec<(&str, usize, bool)> = got
        .iter()
        .map(|s| (s.name.as_str(), s.line, s.doc.contains("Written")))
        .collect();
    assert_eq!(
        names,
        [
            ("STATE", 2, true),
            ("BARE", 5, false),
            ("RAW", 8, true),
            ("LOCAL", 10, false),
            ("CELL", 16, true),
        ]
    );
    assert_eq!(got[0].doc, "The state. Written by the program thread.");
    assert_eq!(
        declared("pub(in crate::jit) static X: u8 = 0;"),
        Some("X".into())
    );
    assert_eq!(declared("let s: &'static str = \"\";"), None);
    assert_eq!(declared("static"), None);
}
