//! `coldcache export DUMP --format FORMAT -o FILE`: a capture in the formats
//! of other tools (crate `coldcache-export`), written atomically.

use crate::report_cmd::load_for_views;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use coldcache_analysis::{Profile, ProfileOptions};
use std::path::PathBuf;

/// Export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Callgrind format, for callgrind_annotate and KCachegrind.
    Callgrind,
    /// Collapsed stacks (`a;b;c 123`), weighted by --weight.
    Folded,
    /// A flame graph SVG (inferno), weighted by --weight.
    Flamegraph,
    /// speedscope's JSON format, one profile per thread.
    Speedscope,
    /// The profile as JSON (docs/export.md).
    Json,
}

/// `coldcache export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The dump to export.
    dump: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    format: Format,
    /// Output file (`-`: standard output; a device or FIFO is written in
    /// place, a symbolic link followed).
    #[arg(short, long)]
    output: PathBuf,
    /// Column weighting folded stacks, flame graphs and speedscope (any
    /// count column; default `mem`, or `instructions` when nothing reached
    /// memory).
    #[arg(long)]
    weight: Option<String>,
    /// Count code inlined into a function to that function (for callgrind:
    /// what Valgrind itself does, with `fi=` lines for inlined files).
    #[arg(long)]
    no_inline: bool,
}

/// Runs `coldcache export`.
pub fn run(a: ExportArgs) -> Result<()> {
    if a.weight.is_some() && matches!(a.format, Format::Callgrind | Format::Json) {
        anyhow::bail!(
            "--weight applies to folded, flamegraph and speedscope; the {} export carries every column",
            if a.format == Format::Callgrind { "callgrind" } else { "json" }
        );
    }
    let dump = load_for_views(&a.dump)?;
    let p = Profile::new(
        dump,
        ProfileOptions {
            inline: !a.no_inline,
            threads: None,
        },
    );
    let ctx = || format!("exporting {}", a.dump.display());
    let bytes: Vec<u8> = match a.format {
        Format::Callgrind => {
            let opts = coldcache_export::CallgrindOptions {
                load_bias: crate::report_cmd::load_biases(p.dump()),
            };
            coldcache_export::callgrind_with(&p, &opts).into_bytes()
        }
        Format::Folded => coldcache_export::folded(&p, a.weight.as_deref())
            .with_context(ctx)?
            .into_bytes(),
        Format::Flamegraph => {
            coldcache_export::flamegraph(&p, a.weight.as_deref()).with_context(ctx)?
        }
        Format::Speedscope => serde_json::to_vec(
            &coldcache_export::speedscope(&p, a.weight.as_deref()).with_context(ctx)?,
        )?,
        Format::Json => serde_json::to_vec_pretty(&coldcache_export::json(&p))?,
    };
    crate::write_output(&a.output, &bytes)?;
    if a.output.as_os_str() != "-" {
        coldcache_fsio::say!(
            "coldcache: wrote {} ({} bytes)",
            a.output.display(),
            bytes.len()
        );
    }
    Ok(())
}
