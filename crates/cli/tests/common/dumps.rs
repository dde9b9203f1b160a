//! Reading back what the binary under test wrote: a dump by path, and a
//! process's output bytes as text. Shared by the test files that include
//! it; not every file uses both helpers.
#![allow(dead_code)]

use coldcache_dump::Dump;
use std::path::Path;

/// The dump at `path`; panics naming the path if it is missing or does
/// not decode.
pub fn load(path: &Path) -> Dump {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Dump::from_bytes(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Output bytes as text (invalid UTF-8 replaced).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
