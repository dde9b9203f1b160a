//! Fences on what makes this crate pure (its header): no unsafe code
//! (`#![forbid(unsafe_code)]`, held by the compiler), no statics or
//! thread-locals (every count lives in the accountant a caller owns), no
//! libc among its dependencies and no files, processes, threads, clocks or
//! environment from `std` (what touches the kernel is `coldcache-grow`'s
//! or the capture runtime's).

use std::path::Path;

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            ));
        }
    }
}

/// The lines of `code` that declare a static or a thread-local, outside
/// comments: `static NAME`, `static mut NAME`, `thread_local!`.
fn statics(code: &str) -> Vec<String> {
    code.lines()
        .map(|l| l.split("//").next().unwrap_or("").trim())
        .filter(|&l| {
            // Any visibility: `pub`, `pub(crate)`, `pub(in path)`, ...
            let l = match l.strip_prefix("pub(") {
                Some(r) => r.split_once(") ").map_or(l, |(_, rest)| rest),
                None => l.strip_prefix("pub ").unwrap_or(l),
            };
            (l.starts_with("static ") && !l.starts_with("static '")) || l.contains("thread_local!")
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn no_statics_or_thread_locals() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() >= 8, "read {} files", files.len());
    let found: Vec<String> = files
        .iter()
        .flat_map(|(f, code)| statics(code).into_iter().map(move |l| format!("{f}: {l}")))
        .collect();
    assert!(found.is_empty(), "statics in coldcache-account: {found:#?}");
}

#[test]
fn no_files_processes_threads_clocks_or_environment() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let os = [
        "std::fs",
        "std::process",
        "std::thread",
        "std::env",
        "std::time",
        "std::net",
    ];
    let found: Vec<String> = files
        .iter()
        .flat_map(|(f, code)| {
            code.lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .filter(|l| os.iter().any(|o| l.contains(o)))
                .map(move |l| format!("{f}: {}", l.trim()))
        })
        .collect();
    assert!(
        found.is_empty(),
        "OS calls in coldcache-account: {found:#?}"
    );
}

#[test]
fn unsafe_code_is_forbidden_at_the_root() {
    let root =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    assert!(root.contains("\n#![forbid(unsafe_code)]\n"));
}

#[test]
fn no_libc_among_the_dependencies() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table")
        .split("\n[")
        .next()
        .unwrap();
    let names: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split('=').next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    assert!(names.contains(&"coldcache-grow"), "{names:?}");
    assert!(!names.contains(&"libc"), "{names:?}");
}

#[test]
fn the_statics_reader_sees_each_form() {
    let code = "static A: u8 = 0;\npub static B: u8 = 0;\npub(crate) static mut C: u8 = 0;\n\
                thread_local! { static D: u8 = 0 }\n// static E: u8\nfn f() -> &'static str { \"\" }\n\
                let s: &'static [u8] = b\"\";\npub(in crate::a) static F: u8 = 0;\n\
                pub(self) static G: u8 = 0;\n";
    assert_eq!(statics(code).len(), 6, "{:?}", statics(code));
}
