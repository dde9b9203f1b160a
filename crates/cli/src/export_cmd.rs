//! `coldcache export DUMP --format FORMAT [-o FILE]`: a capture in the
//! formats of other tools (crate `coldcache-export`), written atomically (by
//! default to a name made from the dump's, in the current directory).

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
    /// The timeline (a capture made with `record --timeline`) as Chrome
    /// trace-event JSON, for Perfetto UI and chrome://tracing.
    Perfetto,
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
    /// place, a symbolic link followed). Default: a name made from the
    /// dump's, in the current directory (`callgrind.out.NAME`, `NAME.folded`,
    /// `NAME.svg`, `NAME.speedscope.json`, `NAME.json`, `NAME.perfetto.json`).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Column weighting folded stacks, flame graphs and speedscope (any
    /// count column; default `mem`, or `instructions` when nothing reached
    /// memory).
    #[arg(long)]
    weight: Option<String>,
    /// Count code inlined into a function to that function (for callgrind:
    /// what Valgrind itself does, with `fi=` lines for inlined files).
    #[arg(long)]
    no_inline: bool,
    /// For a `--function` capture: keep the whole stack above the captured
    /// function (the chain up to `_start`) instead of rooting the paths at
    /// the captured function.
    #[arg(long)]
    whole_stack: bool,
}

/// Runs `coldcache export`.
pub fn run(a: ExportArgs) -> Result<()> {
    if a.weight.is_some()
        && matches!(
            a.format,
            Format::Callgrind | Format::Json | Format::Perfetto
        )
    {
        anyhow::bail!(
            "--weight applies to folded, flamegraph and speedscope; the {} export carries every column",
            match a.format {
                Format::Callgrind => "callgrind",
                Format::Json => "json",
                _ => "perfetto",
            }
        );
    }
    let dump = load_for_views(&a.dump)?;
    let root = crate::report_cmd::window_root(&dump, a.whole_stack);
    let p = Profile::new(
        dump,
        ProfileOptions {
            inline: !a.no_inline,
            threads: None,
            root,
        },
    );
    let ctx = || format!("exporting {}", a.dump.display());
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| default_output(&a.dump, a.format));
    if a.format == Format::Perfetto {
        return perfetto(&a, &p, &output);
    }
    let bytes: Vec<u8> = match a.format {
        Format::Callgrind => {
            let opts = coldcache_export::CallgrindOptions {
                load_bias: crate::report_cmd::load_biases(p.dump()),
                ..Default::default()
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
        Format::Perfetto => unreachable!("streamed above"),
    };
    crate::write_output(&output, &bytes)?;
    if output.as_os_str() != "-" {
        coldcache_fsio::say!(
            "coldcache: wrote {} ({} bytes)",
            output.display(),
            bytes.len()
        );
    }
    Ok(())
}

/// The perfetto export, streamed to `output` (written whole or not at
/// all, as the others; `-`: standard output).
fn perfetto(a: &ExportArgs, p: &Profile, output: &std::path::Path) -> Result<()> {
    use std::io::Write;
    let ctx = || format!("exporting {}", a.dump.display());
    let Some(t) = p.dump().timeline.as_ref() else {
        return Err(coldcache_export::ExportError::NoTimeline).with_context(ctx);
    };
    if t.dropped > 0 {
        coldcache_fsio::say!(
            "coldcache: note: {}'s timeline ends early: {} events kept, {} dropped at its limit \
             of {} bytes (the trace says so at its end)",
            a.dump.display(),
            t.len(),
            t.dropped,
            t.limit
        );
    }
    /// Counts what goes through.
    struct Counting<W>(W, u64);
    impl<W: Write> Write for Counting<W> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let n = self.0.write(b)?;
            self.1 += n as u64;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.0.flush()
        }
    }
    let fill = |w: &mut dyn Write| -> std::io::Result<u64> {
        let mut c = Counting(std::io::BufWriter::with_capacity(1 << 20, w), 0);
        coldcache_export::perfetto_to(p, &mut c).map_err(|e| match e {
            coldcache_export::ExportError::Write(e) => e,
            e => std::io::Error::other(e),
        })?;
        c.flush()?;
        Ok(c.1)
    };
    if output.as_os_str() == "-" {
        fill(&mut std::io::stdout().lock())
            .context("cannot write to standard output")
            .with_context(ctx)?;
    } else {
        let mut n = 0;
        coldcache_fsio::write_atomically_with(output, |f| {
            n = fill(f)?;
            Ok(())
        })
        .with_context(|| format!("cannot write {}", output.display()))?;
        coldcache_fsio::say!("coldcache: wrote {} ({} bytes)", output.display(), n);
    }
    Ok(())
}

/// The output's name when `-o` is not given: the dump's file name without
/// `.ccdump`, in the current directory, named as each format's readers
/// expect (KCachegrind recognises `callgrind.out.*`).
fn default_output(dump: &std::path::Path, format: Format) -> PathBuf {
    let file = dump
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "coldcache".to_string());
    let stem = file.strip_suffix(".ccdump").unwrap_or(&file);
    PathBuf::from(match format {
        Format::Callgrind => format!("callgrind.out.{stem}"),
        Format::Folded => format!("{stem}.folded"),
        Format::Flamegraph => format!("{stem}.svg"),
        Format::Speedscope => format!("{stem}.speedscope.json"),
        Format::Json => format!("{stem}.json"),
        Format::Perfetto => format!("{stem}.perfetto.json"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_default_output_is_named_after_the_dump_in_the_current_directory() {
        let d = Path::new("/some/dir/frame.ccdump");
        let name = |f| default_output(d, f).display().to_string();
        assert_eq!(name(Format::Callgrind), "callgrind.out.frame");
        assert_eq!(name(Format::Folded), "frame.folded");
        assert_eq!(name(Format::Flamegraph), "frame.svg");
        assert_eq!(name(Format::Speedscope), "frame.speedscope.json");
        assert_eq!(name(Format::Json), "frame.json");
        assert_eq!(name(Format::Perfetto), "frame.perfetto.json");
        assert_eq!(
            default_output(Path::new("odd.name"), Format::Json)
                .display()
                .to_string(),
            "odd.name.json"
        );
    }
}
