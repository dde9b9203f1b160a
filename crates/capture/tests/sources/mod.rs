//! The crate's own source, for the tests that fence its structure
//! (`layers.rs`, `statics.rs`): one reader of `src/`.

use std::path::Path;

/// Every `.rs` file of `src/` (path under `src/`, `/`-separated), with its
/// text, sorted by path.
pub fn rust_files() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(&src).unwrap().to_string_lossy();
                let text = std::fs::read_to_string(&p)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
                out.push((rel.replace('\\', "/"), text));
            }
        }
    }
    out.sort();
    out
}
