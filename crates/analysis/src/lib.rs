//! coldcache-analysis: turns a capture dump into the views a person reads.
//!
//! Pure: no file or network I/O (source text for the annotate view comes
//! through a caller-supplied function). One source of truth for every number
//! the CLI reports, the exports write and the web UI shows:
//!
//! - [`Profile::new`] indexes a [`coldcache_dump::Dump`]: every record is
//!   mapped to a path of functions (inlined frames included) in one call
//!   tree, and self and inclusive costs are summed per node and function.
//! - [`columns`]: raw counters and derived measures (misses per level,
//!   accesses served by memory, the badness factor).
//! - [`views`]: flat (per function, line or instruction), top-down,
//!   bottom-up, callers of a function, annotated source, disassembly,
//!   threads and cores; [`diff`] compares two profiles.
//! - [`data`]: the data views: types and fields ranked by their accesses
//!   and misses, one type's layout with its cache lines (from the dump's
//!   `DATA` section); [`objects`]: the heap blocks by allocation site and
//!   the mappings the data accesses touched (`OBJS`).
//! - [`flame`]: the flame graph's layout below any call-tree node.
//! - [`summary`]: what a capture was (program, cache, window) and its
//!   totals (instructions, misses per level), read first; [`band`]: each
//!   total's layout-noise band, and whether a diff's change is within it.
//! - [`render`]: the text tables of `coldcache report` and `coldcache diff`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod band;
pub mod columns;
pub mod data;
pub mod diff;
pub mod flame;
pub mod objects;
pub mod profile;
pub mod render;
pub mod summary;
pub mod synthetic;
pub mod views;

pub use columns::{Column, Formula};
pub use profile::{CallNode, FnId, FunctionInfo, NodeId, PathFrame, Profile, ProfileOptions};

/// Errors of the analysis (bad queries).
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// A column name that the dump does not have.
    #[error("no column named '{name}'; the columns are: {known}")]
    NoSuchColumn {
        /// The name asked for.
        name: String,
        /// The columns available.
        known: String,
    },
    /// No function matches.
    #[error("no function matches '{0}'")]
    NoSuchFunction(String),
    /// A tree node id that the profile does not have.
    #[error("no call-tree node {0}")]
    NoSuchNode(u32),
    /// The dump has no data types (no `DATA` section, or not coldcache's
    /// counter layout).
    #[error("the dump has no data types (no DATA section: it was written before dump format 4 or resolved without them)")]
    NoDataTypes,
    /// A dump has no object data (no `OBJS` section).
    #[error(
        "the dump has no object data (record with --objects to track heap blocks and mappings)"
    )]
    NoObjects,
    /// No type of the dump's data types has this name.
    #[error("no data type named '{name}'; the types are: {known}")]
    NoSuchType {
        /// The name asked for.
        name: String,
        /// The types with members.
        known: String,
    },
    /// Several types match a name.
    #[error("several data types match '{name}': {matches}; give the full name")]
    AmbiguousType {
        /// The name asked for.
        name: String,
        /// The types that match.
        matches: String,
    },
    /// A bad regular expression.
    #[error("invalid regular expression '{pattern}': {message}")]
    BadRegex {
        /// The pattern.
        pattern: String,
        /// What is wrong.
        message: String,
    },
}

pub(crate) fn regex(pattern: &str) -> Result<regex::Regex, AnalysisError> {
    regex::Regex::new(pattern).map_err(|e| AnalysisError::BadRegex {
        pattern: pattern.to_string(),
        message: e.to_string(),
    })
}
