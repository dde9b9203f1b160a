//! `coldcache resolve`: embeds symbols in a dump (function names, inlined
//! frames, files, lines, instruction bytes; `coldcache-symbols`), so it
//! reads the same after the binaries are gone, and prints how each module
//! resolved. `coldcache record` calls [`resolve_file`] after the program
//! exits.

use anyhow::{bail, Context, Result};
use clap::Args;
use coldcache_dump::{Dump, ModuleStatus};
use coldcache_symbols::{ModuleSummary, ResolveOptions};
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
    let text = resolve_file(&args.dump, out, &opts)?;
    eprint!("{text}");
    Ok(())
}

/// Reads the dump at `input`, resolves it, writes it to `output`
/// atomically, and returns the per-module summary text.
pub fn resolve_file(input: &Path, output: &Path, opts: &ResolveOptions) -> Result<String> {
    let bytes = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    let mut dump =
        Dump::from_bytes(&bytes).with_context(|| format!("reading {}", input.display()))?;
    let t = std::time::Instant::now();
    coldcache_symbols::resolve_dump(&mut dump, opts);
    let took = t.elapsed();
    crate::probe_cmd::write_atomically(output, &dump.to_bytes())?;
    Ok(summary(&dump, output, took))
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
        path.display(),
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
