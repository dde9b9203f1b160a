//! coldcache-export: a capture in the formats other tools read.
//!
//! Pure: each function takes a [`Profile`] and returns the file's bytes; the
//! caller writes them (atomically). Every number comes from the analysis
//! crate's profile, so exports agree with `coldcache report`:
//!
//! - [`callgrind`]: the Callgrind profile format (`callgrind_annotate`,
//!   KCachegrind): per-instruction self costs with their source lines, call
//!   arcs with inclusive costs, event names and descriptions; its totals are
//!   the profile's totals.
//! - [`cachegrind`]: Cachegrind's format (`cg_annotate`), per source line;
//!   [`summary_lines`]: Valgrind's `==PID== I   refs:` summary.
//! - [`folded`]: collapsed stacks (`main;update;get_pos 123`) weighted by a
//!   column; [`flamegraph`]: those drawn as an SVG by inferno.
//! - [`speedscope`]: speedscope's file format, one sampled profile per
//!   thread.
//! - [`json`]: the profile as documented JSON (docs/export.md).
//! - [`perfetto`]: the capture's timeline (dump section `TIME`) as Chrome
//!   trace-event JSON, per thread the functions entered and left and
//!   counter tracks, over instructions retired.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cachegrind;
mod callgrind;
mod perfetto;
mod stacks;

pub use cachegrind::{
    cachegrind, cachegrind_events, summary_lines, thousands, valgrind_totals, CachegrindOptions,
};
pub use callgrind::{callgrind, callgrind_with, CallgrindOptions, EventSet, VALGRIND_EVENTS};
pub use perfetto::{perfetto, perfetto_to};
pub use stacks::{flamegraph, folded, json, speedscope};

use coldcache_analysis::{Column, Formula, Profile};

/// Errors of an export.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The weight column does not exist.
    #[error("no column named '{name}' to weight by; the columns are: {known}")]
    NoSuchColumn {
        /// The name asked for.
        name: String,
        /// The columns.
        known: String,
    },
    /// The weight column is a ratio, which does not add up along stacks.
    #[error("column '{0}' is a ratio and cannot weight stacks; choose a count such as mem or instructions")]
    NotACount(String),
    /// Nothing has a non-zero weight.
    #[error("no stack has a non-zero '{0}': nothing to draw (choose another --weight)")]
    Empty(String),
    /// The dump has no timeline.
    #[error("the dump has no timeline (no TIME section): record it with `coldcache record --timeline` (dump format version 6)")]
    NoTimeline,
    /// The timeline's counters are not the dump's levels'.
    #[error("the dump's timeline does not carry the counters of its cache levels")]
    TimelineCounters,
    /// Writing the output failed.
    #[error("writing: {0}")]
    Write(#[from] std::io::Error),
    /// inferno failed.
    #[error("drawing the flame graph: {0}")]
    Flamegraph(String),
}

/// Resolves a weight column by name (`None`: [`Profile::default_weight`],
/// `mem` when it is non-zero in total, else `instructions`).
pub fn weight_column<'p>(p: &'p Profile, name: Option<&str>) -> Result<&'p Column, ExportError> {
    let name = match name {
        Some(n) => n.to_string(),
        None => p.default_weight().name.clone(),
    };
    let c = p.column(&name).ok_or_else(|| ExportError::NoSuchColumn {
        name: name.clone(),
        known: p
            .columns()
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    if matches!(c.formula, Formula::Badness(_)) {
        return Err(ExportError::NotACount(name));
    }
    Ok(c)
}
