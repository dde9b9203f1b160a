//! `coldcache resolve`: embeds symbols in a dump (function names, inlined
//! frames, files, lines, instruction bytes; `coldcache-symbols`) and the
//! source files' text, so it reads the same after the binaries and sources
//! are gone, and prints how each module
//! resolved. `coldcache record` calls [`resolve_file`] after the program
//! exits.

use anyhow::{bail, Result};
use clap::Args;
use coldcache_dump::{Dump, ModuleStatus};
use coldcache_symbols::{ModuleSummary, ResolveOptions, SourceLimits, SourcesSummary};
use std::path::{Path, PathBuf};

/// Arguments of `coldcache resolve`.
#[derive(Args, Debug)]
pub struct ResolveArgs {
    /// The dump to resolve.
    dump: PathBuf,
    /// Where to write the resolved dump (default: in place).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Also look for binaries by name in this directory (repeatable); a
    /// file is used only when its build id matches the captured one.
    #[arg(long, value_name = "DIR")]
    search: Vec<PathBuf>,
    /// Look for modules recorded under OLD in NEW first (repeatable).
    #[arg(long, value_name = "OLD=NEW")]
    remap: Vec<String>,
    /// Root of separate debug files (repeatable; default /usr/lib/debug).
    #[arg(long, value_name = "DIR")]
    debug_dir: Vec<PathBuf>,
    /// Do not embed the source files (by default the text of every source
    /// file the line tables name is copied into the dump, up to 4 MiB per
    /// file and 64 MiB in all; removes sources embedded before).
    #[arg(long)]
    no_sources: bool,
}

pub fn run(args: ResolveArgs) -> Result<()> {
    let mut opts = ResolveOptions {
        search: args.search,
        ..ResolveOptions::default()
    };
    if !args.debug_dir.is_empty() {
        opts.debug_dirs = args.debug_dir;
    }
    for r in &args.remap {
        let Some((old, new)) = r
            .split_once('=')
            .filter(|(o, n)| !o.is_empty() && !n.is_empty())
        else {
            bail!("--remap {r}: expected OLD=NEW");
        };
        opts.remap.push((old.to_string(), PathBuf::from(new)));
    }
    let out = args.output.as_deref().unwrap_or(&args.dump);
    let text = resolve_file(&args.dump, out, &opts, !args.no_sources)?;
    coldcache_fsio::sigpipe::say(format_args!("{text}"));
    Ok(())
}

/// Reads the dump at `input`, resolves it, embeds its source files when
/// `sources` (else removes any), writes it to `output` atomically, and
/// returns the per-module summary text.
pub fn resolve_file(
    input: &Path,
    output: &Path,
    opts: &ResolveOptions,
    sources: bool,
) -> Result<String> {
    let loaded = crate::report_cmd::load_by_instruction(input)?;
    resolve_loaded(loaded, output, opts, sources)
}

/// [`resolve_file`] of a dump already read. The resolver looks at the
/// records' addresses only, and the data types' coverage at their counts
/// per address: the dump is read with its records summed per address, and
/// written with the records it was read with.
pub fn resolve_loaded(
    mut loaded: coldcache_dump::ByInstruction,
    output: &Path,
    opts: &ResolveOptions,
    sources: bool,
) -> Result<String> {
    let dump = &mut loaded.dump;
    let t = std::time::Instant::now();
    coldcache_symbols::resolve_dump(dump, opts);
    let src = if sources {
        Some(coldcache_symbols::embed_sources(
            dump,
            &SourceLimits::default(),
        ))
    } else {
        dump.sources.clear();
        None
    };
    let took = t.elapsed();
    // Written from its parts: the records are not copied.
    crate::write_output_parts(output, &loaded.to_parts().parts())?;
    let dump = &loaded.dump;
    let mut text = summary(dump, output, took);
    text += &sources_text(dump, src.as_ref());
    // How many data accesses got a type (`report --view data`).
    if let Some(c) = coldcache_analysis::data::coverage_of(dump, &|_| true) {
        text += &format!(
            "  data types: {} (coldcache report {} --view data)\n",
            c.text(),
            output.display()
        );
    }
    Ok(text)
}

/// The line about embedded sources.
fn sources_text(dump: &Dump, s: Option<&SourcesSummary>) -> String {
    let files = dump.symbols.as_ref().map_or(0, |s| s.files.len());
    let Some(s) = s else {
        return format!(
            "  sources: not embedded (--no-sources); {files} files named by the line tables
"
        );
    };
    let mut t = format!(
        "  sources: {} of {files} files embedded ({} KiB){}
",
        s.embedded,
        s.bytes.div_ceil(1024),
        if s.kept > 0 {
            format!(", {} kept from before (not readable now)", s.kept)
        } else {
            String::new()
        }
    );
    let list = |v: &[String]| -> String {
        let mut l = v.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        if v.len() > 3 {
            l += &format!(", … ({} more)", v.len() - 3);
        }
        l
    };
    if !s.unreadable.is_empty() {
        let paths: Vec<String> = s.unreadable.iter().map(|(p, _)| p.clone()).collect();
        t += &format!(
            "      not readable here ({}): {}
",
            s.unreadable.len(),
            list(&paths)
        );
    }
    if !s.too_large.is_empty() {
        t += &format!(
            "      over 4 MiB, left out: {}
",
            list(&s.too_large)
        );
    }
    if !s.over_budget.is_empty() {
        t += &format!(
            "      left out, 64 MiB embedded already: {}
",
            list(&s.over_budget)
        );
    }
    t
}

fn status_name(s: ModuleStatus) -> &'static str {
    match s {
        ModuleStatus::Unresolved => "unresolved",
        ModuleStatus::Lines => "lines",
        ModuleStatus::SymbolsOnly => "names only",
        ModuleStatus::NotFound => "not found",
        ModuleStatus::Mismatch => "rebuilt, not used",
    }
}

/// The text printed after resolving: one line per module with addresses.
pub fn summary(dump: &Dump, path: &Path, took: std::time::Duration) -> String {
    let (mods, outside) = coldcache_symbols::summarize(dump);
    let n = dump.symbols.as_ref().map_or(0, |s| s.locations.len());
    let mut s = format!(
        "coldcache: symbols of {n} addresses embedded in {} ({:.2} s)\n",
        if path.as_os_str() == "-" {
            "the dump written to standard output".into()
        } else {
            path.display().to_string()
        },
        took.as_secs_f64()
    );
    for ModuleSummary {
        path,
        status,
        detail,
        lines,
        names_only,
        nothing,
        ..
    } in &mods
    {
        s += &format!(
            "  {path}: {}: {lines} with lines, {names_only} names only, {nothing} unresolved\n      {detail}\n",
            status_name(*status)
        );
        if *status == ModuleStatus::SymbolsOnly && !detail.contains("no debug info") {
            s += "      no debug info: function names only\n";
        }
    }
    if outside > 0 {
        s += &format!("  {outside} addresses outside every module (JIT code, vdso): unresolved\n");
    }
    s
}
