//! Embedding source files in a dump (section `SRCS`), so that the source
//! view shows the code as it was when the capture was made, on a machine
//! without the sources or after they changed.
//!
//! The files are those of the dump's line tables ([`Symbols::files`]), read
//! from the paths DWARF gives. Files that cannot be read (system library
//! sources are usually absent) are skipped and listed; so are files over
//! [`SourceLimits::max_file`] bytes, and files once the dump's budget
//! ([`SourceLimits::max_total`]) is spent, the most-referenced files first.

use coldcache_dump::symbols::NO_FILE;
use coldcache_dump::{Dump, SourceReadError, SourceText, Symbols, MAX_SOURCE_FILE};
use std::collections::HashMap;

/// How much source text a dump may carry.
#[derive(Clone, Copy, Debug)]
pub struct SourceLimits {
    /// Largest file embedded, in bytes.
    pub max_file: u64,
    /// Most bytes embedded in all.
    pub max_total: u64,
}

impl Default for SourceLimits {
    /// [`MAX_SOURCE_FILE`] (16 MiB) per file, 64 MiB in all.
    fn default() -> Self {
        SourceLimits {
            max_file: MAX_SOURCE_FILE,
            max_total: 64 << 20,
        }
    }
}

/// What [`embed_sources`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourcesSummary {
    /// Files embedded.
    pub embedded: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Files kept from the dump's earlier embedding because they cannot be
    /// read now.
    pub kept: usize,
    /// Files that could not be read (path, reason).
    pub unreadable: Vec<(String, String)>,
    /// Files over the per-file limit.
    pub too_large: Vec<String>,
    /// Files left out once the total was reached.
    pub over_budget: Vec<String>,
}

/// The line tables' files, most-referenced first (by the number of frames
/// naming them; ties in table order).
fn files_by_use(s: &Symbols) -> Vec<&str> {
    let mut uses: HashMap<u32, usize> = HashMap::new();
    for l in &s.locations {
        for f in &l.frames {
            if f.file != NO_FILE {
                *uses.entry(f.file).or_default() += 1;
            }
        }
    }
    for f in &s.functions {
        if f.file != NO_FILE {
            uses.entry(f.file).or_default();
        }
    }
    let mut v: Vec<(usize, u32)> = uses.into_iter().map(|(f, n)| (n, f)).collect();
    v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    v.into_iter()
        .filter_map(|(_, f)| s.files.get(f as usize).map(String::as_str))
        .collect()
}

/// Replaces `dump.sources` with the text of its line tables' files, read
/// from disk within `limits`. A file that cannot be read now but was
/// embedded before (re-resolving a dump) keeps its earlier text.
pub fn embed_sources(dump: &mut Dump, limits: &SourceLimits) -> SourcesSummary {
    let mut out = SourcesSummary::default();
    let Some(syms) = &dump.symbols else {
        dump.sources.clear();
        return out;
    };
    let old: HashMap<String, String> = std::mem::take(&mut dump.sources)
        .into_iter()
        .map(|s| (s.path, s.text))
        .collect();
    let mut sources = Vec::new();
    for path in files_by_use(syms) {
        let (text, kept) = match (SourceText::read(path, limits.max_file), old.get(path)) {
            (Ok(t), _) => (t.text, false),
            (Err(_), Some(t)) => (t.clone(), true),
            (Err(SourceReadError::TooLarge(_)), None) => {
                out.too_large.push(path.to_string());
                continue;
            }
            (Err(e), None) => {
                out.unreadable.push((path.to_string(), e.to_string()));
                continue;
            }
        };
        // The limit holds for the text too: replacing invalid UTF-8 may
        // make it larger than the bytes read, and text kept from an earlier
        // embedding was checked against another limit.
        if text.len() as u64 > limits.max_file {
            out.too_large.push(path.to_string());
            continue;
        }
        out.kept += usize::from(kept);
        if out.bytes + text.len() as u64 > limits.max_total {
            out.over_budget.push(path.to_string());
            continue;
        }
        out.bytes += text.len() as u64;
        out.embedded += 1;
        sources.push(SourceText {
            path: path.to_string(),
            text,
        });
    }
    dump.sources = sources;
    out
}
