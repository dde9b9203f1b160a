//! `coldcache report DUMP` and `coldcache diff BEFORE AFTER`: the analysis
//! views as text tables or JSON. All aggregation is in `coldcache-analysis`;
//! this module parses arguments, loads dumps and reads source files.
//!
//! [`load_dump`] is the one whole-dump reader; [`load_for_views`] (on it,
//! for `report`, `diff`, `export` and the UI) resolves in memory a dump
//! that was never resolved; [`load_by_instruction`] is the lean reader
//! `resolve` and the summaries of `record` and `attach` use;
//! [`load_biases`] gives `report --asm`, `--by instruction`, `export` and
//! the UI their file addresses.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use coldcache_analysis::data::{self, DataQuery};
use coldcache_analysis::diff::{self, DiffQuery};
use coldcache_analysis::render;
use coldcache_analysis::views::{self, By, FlatQuery, TreeQuery};
use coldcache_analysis::{Profile, ProfileOptions};
use coldcache_dump::{Dump, SourceText, MAX_SOURCE_FILE};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Which view `report` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum View {
    /// One row per function, line or instruction.
    Flat,
    /// The call tree from the roots, inclusive and self costs.
    TopDown,
    /// From the functions where costs were spent up through their callers.
    BottomUp,
    /// Who called a function, with their shares of its costs (`--callers`).
    Callers,
    /// A function's source lines (or instructions with `--asm`).
    Annotate,
    /// Per thread and per simulated core.
    Threads,
    /// The data types and fields the memory accesses touched (needs a dump
    /// resolved with data types).
    Data,
    /// One data type's layout (TYPE after the dump) with each field's and
    /// cache line's accesses and misses.
    Layout,
}

/// Row granularity of the flat view and of `diff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ByArg {
    /// Functions.
    Function,
    /// Source lines.
    Line,
    /// Instructions (flat view only).
    Instruction,
}

impl From<ByArg> for By {
    fn from(b: ByArg) -> By {
        match b {
            ByArg::Function => By::Function,
            ByArg::Line => By::Line,
            ByArg::Instruction => By::Instruction,
        }
    }
}

/// Assembly syntax of `report --asm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SyntaxArg {
    /// AT&T (`mov 0x8(%rdi),%eax`).
    Att,
    /// Intel (`mov eax,[rdi+0x8]`).
    Intel,
}

/// Options shared by `report` and `diff`.
#[derive(Args, Debug)]
pub struct Common {
    /// Column to sort by (`--columns all` lists them; default `mem`, or
    /// `instructions` when nothing reached memory; diff: the "before"
    /// dump's).
    #[arg(long)]
    sort: Option<String>,
    /// Keep only rows whose label matches this regular expression.
    #[arg(long)]
    filter: Option<String>,
    /// Show at most N rows (default 30 in text, all with --json).
    #[arg(long)]
    limit: Option<usize>,
    /// Columns to show in text: `all`, or names separated by commas.
    #[arg(long)]
    columns: Option<String>,
    /// Print JSON (documented in docs/report.md) instead of a table.
    #[arg(long)]
    json: bool,
    /// Count code inlined into a function to that function instead of
    /// showing inlined functions as functions of their own.
    #[arg(long)]
    no_inline: bool,
    /// For a `--function` capture: show the whole stack above the captured
    /// function (the chain up to `_start`) instead of rooting the trees at
    /// the captured function.
    #[arg(long)]
    whole_stack: bool,
}

/// `coldcache report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The dump (`.ccdump`) to read.
    dump: PathBuf,
    /// The function for `--view annotate` (a name, or a regex), or the
    /// type for `--view layout` (its name, or a unique last component:
    /// `Entity` for `game::Entity`).
    symbol: Option<String>,
    /// The view.
    #[arg(long, value_enum, default_value = "flat")]
    view: View,
    /// Show who called SYMBOL and their shares of its costs (the callers
    /// view).
    #[arg(long, value_name = "SYMBOL")]
    callers: Option<String>,
    /// Flat view rows: functions, source lines or instructions.
    #[arg(long, value_enum, default_value = "function")]
    by: ByArg,
    /// Flat view: sort by inclusive instead of self costs.
    #[arg(long)]
    inclusive: bool,
    /// Trees: leave out nodes under this percentage of the total.
    #[arg(long, default_value_t = 1.0)]
    min_percent: f64,
    /// Trees: leave out nodes deeper than this.
    #[arg(long)]
    max_depth: Option<u32>,
    /// Annotate: per-instruction disassembly instead of source lines, at
    /// the addresses `objdump -d` and `perf annotate` show (ELF file
    /// addresses).
    #[arg(long)]
    asm: bool,
    /// The syntax of `--asm` and `--by instruction`: `att` (objdump's and
    /// perf's default) or `intel` (`objdump -M intel`).
    #[arg(long, value_enum, default_value = "att", value_name = "att|intel")]
    syntax: SyntaxArg,
    /// Where to find source files whose recorded path moved: FROM=TO
    /// replaces a path prefix (repeatable).
    #[arg(long, value_name = "FROM=TO")]
    source_map: Vec<String>,
    /// Keep only these threads: kernel tids or thread names (every thread
    /// of that name), comma-separated; `--view threads` lists them.
    #[arg(long, value_delimiter = ',', value_name = "TID|NAME")]
    thread: Vec<String>,
    #[command(flatten)]
    common: Common,
}

/// `coldcache diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The dump before the change.
    before: PathBuf,
    /// The dump after the change.
    after: PathBuf,
    /// Compare per function, per source line, per data type or field (both
    /// dumps resolved with data types: `coldcache resolve`), or per object
    /// (allocation sites and mappings: both recorded with objects).
    #[arg(long, value_enum, default_value = "function")]
    by: DiffByArg,
    #[command(flatten)]
    common: Common,
}

/// Row granularity of `diff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiffByArg {
    /// Functions.
    Function,
    /// Source lines.
    Line,
    /// Data types (by name).
    Type,
    /// Fields of data types (`Type::member`).
    Field,
    /// Objects: allocation sites (matched by allocator and the functions of
    /// their stacks) and mappings (by kind and file).
    Object,
}

/// Largest dump read. The format states no limit; this one only keeps a
/// wrong file from exhausting memory (the largest dumps measured, 1M
/// records with symbols, are a few hundred megabytes).
pub const MAX_DUMP: u64 = 16 << 30;

/// Reads and decodes a dump, naming the file in any error. Only regular
/// files are read, the magic first and then no more than the sections
/// announce (`Dump::read_file`): a FIFO or a device (`/dev/urandom`) is
/// refused before anything is read, `/proc/self/pagemap` after 16 bytes.
pub fn load_dump(path: &Path) -> Result<Dump> {
    let bytes = Dump::read_file(path, MAX_DUMP)
        .with_context(|| format!("cannot read dump {}", path.display()))?;
    Dump::from_bytes(&bytes).with_context(|| format!("cannot load dump {}", path.display()))
}

/// Loads a dump with its records summed per instruction address and kept
/// encoded ([`coldcache_dump::ByInstruction`]): for resolving and
/// summaries, which need no more, at about the file's size in memory.
pub fn load_by_instruction(path: &Path) -> Result<coldcache_dump::ByInstruction> {
    let bytes = Dump::read_file(path, MAX_DUMP)
        .with_context(|| format!("cannot read dump {}", path.display()))?;
    coldcache_dump::ByInstruction::from_bytes(bytes)
        .with_context(|| format!("cannot load dump {}", path.display()))
}

/// Loads a dump for the views. A dump without embedded symbols (captured
/// through the API, never resolved) is resolved in memory when its binaries
/// are still there, with a note; the file is left as it is.
pub fn load_for_views(path: &Path) -> Result<Dump> {
    let mut dump = load_dump(path)?;
    if dump.symbols.is_none() {
        coldcache_symbols::resolve_dump(&mut dump, &coldcache_symbols::ResolveOptions::default());
        dump.meta.notes.push(format!(
            "symbols resolved now from the binaries on disk; run `coldcache resolve {}` to embed them",
            path.display()
        ));
    }
    Ok(dump)
}

fn profile(path: &Path, c: &Common, thread: &[String]) -> Result<Profile> {
    let dump = load_for_views(path)?;
    let threads = select_threads(&dump, thread)
        .map_err(|what| anyhow::anyhow!("dump {} has no thread {what}", path.display()))?;
    let root = window_root(&dump, c.whole_stack);
    Ok(Profile::new(
        dump,
        ProfileOptions {
            inline: !c.no_inline,
            threads: (!threads.is_empty()).then_some(threads),
            root,
        },
    ))
}

/// The function a `--function` capture's trees are rooted at: the
/// trigger's function, demangled as the dump's function names are; `None`
/// for other captures or with `whole_stack`.
pub fn window_root(dump: &Dump, whole_stack: bool) -> Option<String> {
    if whole_stack {
        return None;
    }
    let name = dump.meta.trigger.strip_prefix("function:")?;
    Some(coldcache_symbols::demangle(name))
}

/// The tids `--thread` selects: each item a kernel tid, or a thread name
/// (every thread of that name). Err: the first item that names no thread,
/// with the dump's threads listed.
fn select_threads(dump: &Dump, items: &[String]) -> std::result::Result<Vec<u32>, String> {
    let mut tids = Vec::new();
    for item in items {
        let found: Vec<u32> = dump
            .threads
            .iter()
            .filter(|t| item.parse::<u32>() == Ok(t.tid) || t.name == *item)
            .map(|t| t.tid)
            .collect();
        if found.is_empty() {
            let known: Vec<String> = dump
                .threads
                .iter()
                .map(|t| format!("{} ({})", t.tid, t.name))
                .collect();
            return Err(format!("'{item}' (its threads: {})", known.join(", ")));
        }
        for t in found {
            if !tids.contains(&t) {
                tids.push(t);
            }
        }
    }
    Ok(tids)
}

/// Prints JSON on standard output, flushed here: an error at the exit's
/// implicit flush (a full disk under `> file`) would go unreported.
fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out))
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
}

fn print_text(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
}

/// Runs `coldcache report`.
pub fn report(a: ReportArgs) -> Result<()> {
    let p = profile(&a.dump, &a.common, &a.thread)?;
    let c = &a.common;
    let limit = c.limit.or((!c.json).then_some(30));
    let tree_q = TreeQuery {
        sort: c.sort.clone(),
        min_percent: a.min_percent,
        max_depth: a.max_depth,
        fold: false,
    };
    let view = if a.callers.is_some() {
        View::Callers
    } else {
        a.view
    };
    let header = render::header(&p);
    let function = |what: &str| -> Result<Vec<u32>> {
        let Some(name) = a.callers.as_deref().or(a.symbol.as_deref()) else {
            bail!("the {what} view needs a function: give its name (or a regex) after the dump");
        };
        p.find_functions(name)
            .with_context(|| format!("in dump {}", a.dump.display()))
    };
    match view {
        View::Flat => {
            let v = views::flat(
                &p,
                &FlatQuery {
                    by: a.by.into(),
                    sort: c.sort.clone(),
                    inclusive: a.inclusive,
                    filter: c.filter.clone(),
                    limit,
                    // Instructions as `--asm` shows them: objdump's
                    // addresses, in `--syntax`.
                    asm: (a.by == ByArg::Instruction).then(|| views::AsmOptions {
                        syntax: match a.syntax {
                            SyntaxArg::Att => views::AsmSyntax::Att,
                            SyntaxArg::Intel => views::AsmSyntax::Intel,
                        },
                        load_bias: load_biases(p.dump()),
                    }),
                },
            )?;
            if c.json {
                return print_json(&v);
            }
            let cols = render::pick_columns(&v.columns, c.columns.as_deref())?;
            print_text(&format!("{header}\n{}", render::flat(&v, &cols)))
        }
        View::TopDown | View::BottomUp | View::Callers => {
            let v = match view {
                View::TopDown => views::top_down(&p, &tree_q)?,
                View::BottomUp => views::bottom_up(&p, &tree_q)?,
                _ => views::callers(&p, &function("callers")?, &tree_q)?,
            };
            let all = v.rows.len();
            let tree_limit = c.limit.or((!c.json).then_some(100));
            let v = filter_tree(v, c.filter.as_deref(), tree_limit)?;
            if c.json {
                return print_json(&v);
            }
            let cols = render::pick_columns(&v.columns, c.columns.as_deref())?;
            let cut = if v.rows.len() < all && c.filter.is_none() {
                format!(
                    "({} of {all} rows shown; --limit N, --min-percent P)\n",
                    v.rows.len()
                )
            } else {
                String::new()
            };
            print_text(&format!("{header}\n{}{cut}", render::tree(&v, &cols)))
        }
        View::Annotate => {
            let fs = function("annotate")?;
            // One function a view: several (overloads, a loose regex)
            // would be shown under the first one's header.
            let mut names: Vec<&str> = fs.iter().map(|&f| p.function(f).name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            if names.len() > 1 {
                let shown = names.len().min(20);
                bail!(
                    "{} functions match '{}' in dump {}: {}{}; give one's full name",
                    names.len(),
                    a.symbol.as_deref().unwrap_or_default(),
                    a.dump.display(),
                    names[..shown].join(", "),
                    if names.len() > shown { ", …" } else { "" }
                );
            }
            if a.asm {
                let v = views::disassembly_with(
                    &p,
                    &fs,
                    &views::AsmOptions {
                        syntax: match a.syntax {
                            SyntaxArg::Att => views::AsmSyntax::Att,
                            SyntaxArg::Intel => views::AsmSyntax::Intel,
                        },
                        load_bias: load_biases(p.dump()),
                    },
                );
                if c.json {
                    return print_json(&v);
                }
                let cols = render::pick_columns(&v.columns, c.columns.as_deref())?;
                return print_text(&format!("{header}\n{}", render::asm(&v, &cols)));
            }
            let maps: Vec<(String, String)> = a
                .source_map
                .iter()
                .map(|m| {
                    m.split_once('=')
                        .map(|(f, t)| (f.to_string(), t.to_string()))
                        .with_context(|| format!("--source-map '{m}' is not FROM=TO"))
                })
                .collect::<Result<_>>()?;
            // Regular files only, at most MAX_SOURCE_FILE bytes: the paths
            // come from the dump.
            let read_file =
                |path: &str| SourceText::read(path, MAX_SOURCE_FILE).ok().map(|s| s.text);
            let read = |path: &str| -> Option<String> {
                for (from, to) in &maps {
                    if let Some(rest) = path.strip_prefix(from.as_str()) {
                        if let Some(t) = read_file(&format!("{to}{rest}")) {
                            return Some(t);
                        }
                    }
                }
                read_file(path)
            };
            let v = views::annotate(&p, &fs, &read);
            if c.json {
                return print_json(&v);
            }
            let cols = render::pick_columns(&v.columns, c.columns.as_deref())?;
            print_text(&format!("{header}\n{}", render::annotate(&v, &cols)))
        }
        View::Data | View::Layout => {
            if p.dump().data.is_none() {
                bail!(
                    "dump {} has no data types (no DATA section: it was written before dump format 4, \
                     or resolved without them); run `coldcache resolve {}` while its binaries and \
                     their debug information exist to add them",
                    a.dump.display(),
                    a.dump.display()
                );
            }
            let in_dump = || format!("in dump {}", a.dump.display());
            if view == View::Data {
                let v = data::data(
                    &p,
                    &DataQuery {
                        sort: c.sort.clone(),
                        filter: c.filter.clone(),
                        limit,
                    },
                )
                .with_context(in_dump)?;
                if c.json {
                    return print_json(&v);
                }
                let cols = render::pick_columns(&v.columns, c.columns.as_deref())?;
                return print_text(&format!("{header}\n{}", render::data(&v, &cols)));
            }
            let Some(name) = a.symbol.as_deref() else {
                bail!("the layout view needs a type: give its name after the dump (`--view data` lists them)");
            };
            let v = data::layout(&p, name).with_context(in_dump)?;
            if c.json {
                return print_json(&v);
            }
            print_text(&format!("{header}\n{}", render::layout(&v)))
        }
        View::Threads => {
            let v = views::threads(&p);
            if c.json {
                return print_json(&v);
            }
            let cols = render::pick_columns(&v.columns, c.columns.as_deref())?;
            print_text(&format!("{header}\n{}", render::threads(&v, &cols)))
        }
    }
}

/// The load bias of every module of `dump` (run-time address minus ELF
/// virtual address), from its file's `PT_LOAD` segments
/// (`coldcache_fsio::elf`); `None` for a module whose file is gone,
/// unreadable, not ELF, or of another build.
pub fn load_biases(dump: &Dump) -> Vec<Option<u64>> {
    dump.modules.iter().map(load_bias).collect()
}

fn load_bias(m: &coldcache_dump::Module) -> Option<u64> {
    use object::Object;
    if !m.path.starts_with('/') {
        return None;
    }
    let data = coldcache_fsio::read_regular(&m.path, coldcache_fsio::elf::MAX_ELF_FILE).ok()?;
    let file = object::File::parse(&*data).ok()?;
    if !m.build_id.is_empty() && file.build_id().ok()?? != m.build_id.as_slice() {
        return None;
    }
    // Dump modules are the executable mappings.
    coldcache_fsio::elf::LoadSegments::of(&file).load_bias(m.start, m.file_offset, true)
}

/// Applies `--filter` (keeps rows matching and their ancestors) and
/// `--limit` (the first N rows in pre-order) to a tree.
fn filter_tree(
    mut v: views::TreeView,
    filter: Option<&str>,
    limit: Option<usize>,
) -> Result<views::TreeView> {
    if let Some(f) = filter {
        let re = regex_lite(f)?;
        let mut keep = vec![false; v.rows.len()];
        // Pre-order: a row's ancestors are the nearest earlier rows of
        // smaller depth.
        let mut path: Vec<usize> = Vec::new();
        for i in 0..v.rows.len() {
            while path
                .last()
                .is_some_and(|&j| v.rows[j].depth >= v.rows[i].depth)
            {
                path.pop();
            }
            path.push(i);
            if re.is_match(&v.rows[i].name) {
                for &j in &path {
                    keep[j] = true;
                }
            }
        }
        let mut k = keep.into_iter();
        v.rows.retain(|_| k.next().unwrap_or(false));
    }
    if let Some(n) = limit {
        v.rows.truncate(n);
    }
    Ok(v)
}

fn regex_lite(p: &str) -> Result<regex::Regex> {
    regex::Regex::new(p)
        .with_context(|| format!("--filter '{p}' is not a valid regular expression"))
}

/// Runs `coldcache diff`.
pub fn diff(a: DiffArgs) -> Result<()> {
    let before = profile(&a.before, &a.common, &[])?;
    let after = profile(&a.after, &a.common, &[])?;
    let c = &a.common;
    let (by, data) = match a.by {
        DiffByArg::Function => (By::Function, None),
        DiffByArg::Line => (By::Line, None),
        DiffByArg::Type => (By::Function, Some(diff::DataRows::Type)),
        DiffByArg::Field => (By::Function, Some(diff::DataRows::Field)),
        DiffByArg::Object => (By::Function, Some(diff::DataRows::Object)),
    };
    if data == Some(diff::DataRows::Object) {
        for (p, path) in [(&before, &a.before), (&after, &a.after)] {
            if p.dump().objects.is_none() {
                anyhow::bail!(
                    "{} has no object data: record it with --objects",
                    path.display()
                );
            }
        }
    }
    let v = diff::diff(
        &before,
        &after,
        &DiffQuery {
            by,
            sort: c.sort.clone(),
            filter: c.filter.clone(),
            limit: c.limit.or((!c.json).then_some(30)),
            data,
        },
    )
    .map_err(|e| match e {
        coldcache_analysis::AnalysisError::NoDataTypes => anyhow::anyhow!(
            "{} or {} has no data types: run `coldcache resolve` on it (a dump resolved before data types existed, or with a coldcache that has none)",
            a.before.display(),
            a.after.display()
        ),
        e => e.into(),
    })?;
    if c.json {
        return print_json(&v);
    }
    let cols = render::pick_columns(&v.columns, c.columns.as_deref())?;
    let warning = v
        .cache_mismatch
        .as_ref()
        .map(|w| format!("warning: {w}\n\n"))
        .unwrap_or_default();
    print_text(&format!(
        "{warning}before: {}\nafter:  {}\n\n{}",
        a.before.display(),
        a.after.display(),
        render::diff(&v, &cols)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump_with_threads() -> Dump {
        let bytes = include_bytes!("../../dump/tests/data/v2-resolved-real.ccdump");
        let mut d = Dump::from_bytes(bytes).unwrap();
        d.threads = [(10, "main"), (11, "worker"), (12, "worker"), (13, "io")]
            .iter()
            .map(|&(tid, name)| coldcache_dump::Thread {
                tid,
                name: name.into(),
                core: 0,
            })
            .collect();
        d
    }

    #[test]
    fn threads_are_selected_by_tid_or_by_name() {
        let d = dump_with_threads();
        let sel = |items: &[&str]| {
            select_threads(&d, &items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(sel(&[]), Ok(vec![]));
        assert_eq!(sel(&["13"]), Ok(vec![13]));
        assert_eq!(sel(&["worker"]), Ok(vec![11, 12]));
        assert_eq!(sel(&["main", "11", "worker"]), Ok(vec![10, 11, 12]));
        let e = sel(&["io", "nope"]).unwrap_err();
        assert!(e.starts_with("'nope'") && e.contains("12 (worker)"), "{e}");
    }
}
