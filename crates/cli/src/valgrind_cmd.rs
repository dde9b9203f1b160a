//! `coldcache valgrind [VALGRIND OPTIONS] PROG ARGS`, and the same when the
//! binary runs under the name `valgrind` (a symbolic link a benchmark
//! harness is pointed at: gungraun's `GUNGRAUN_VALGRIND_BIN`): Valgrind's
//! command line for Callgrind and Cachegrind over a `record` capture.
//!
//! [`parse`] turns Valgrind's options into [`VgOptions`] in one place,
//! refusing what coldcache cannot do (another tool, `--branch-sim=yes`,
//! client-request starts, unknown options) with a message naming the
//! option and exit status [`USAGE`]. [`run`] records the program as
//! `record --all --threads all` (from `main`; `--toggle-collect=FN` then
//! keeps the records Callgrind would collect, [`toggle_collect`]),
//! then writes Valgrind's files from the dump through `coldcache_export`
//! (Callgrind's format,
//! thread by thread with `--separate-threads=yes`; Cachegrind's format) and
//! Valgrind's `==PID==` lines to stderr or `--log-file`. The program's
//! stdout, stderr and exit status pass through (docs/valgrind.md). File
//! names expand as Valgrind's ([`expand`], [`file_names`]); a file that
//! cannot be created ends the run as Valgrind ends it (status
//! [`FILE_ERROR`] before the run or for Callgrind, the program's for
//! Cachegrind).

use anyhow::{bail, Context, Result};
use clap::Parser;
use coldcache_analysis::{Profile, ProfileOptions};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit status of a refused command line (coldcache's usage errors; Valgrind
/// itself exits with 1).
pub const USAGE: u8 = 2;

/// `coldcache valgrind`'s arguments: Valgrind's, taken raw.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct ValgrindArgs {
    /// Valgrind's options (`--tool=callgrind|cachegrind`, ...), then the
    /// program and its arguments (docs/valgrind.md).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "VALGRIND OPTIONS] [PROGRAM ARGS"
    )]
    pub(crate) args: Vec<OsString>,
}

/// Valgrind's two profiling tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// `--tool=callgrind`.
    Callgrind,
    /// `--tool=cachegrind`.
    Cachegrind,
}

/// Valgrind's options, as coldcache takes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VgOptions {
    /// The tool.
    pub tool: Tool,
    /// `--callgrind-out-file` / `--cachegrind-out-file` (with `%p`, `%n`, `%q{VAR}`).
    pub out_file: Option<String>,
    /// `--log-file` (with `%p`, `%n`, `%q{VAR}`; `-` a file of that name).
    pub log_file: Option<String>,
    /// `--toggle-collect=PATTERN`, each given.
    pub toggle_collect: Vec<String>,
    /// `--collect-atstart` (Callgrind; `--toggle-collect` makes it `no`).
    pub collect_atstart: bool,
    /// `--instr-atstart` (both tools; `no`: the program starts it with a
    /// client request).
    pub instr_atstart: bool,
    /// `--cache-sim`.
    pub cache_sim: bool,
    /// `--I1`, `--D1`, `--LL`.
    pub geometry: [Option<String>; 3],
    /// `--compress-strings`.
    pub compress_strings: bool,
    /// `--separate-threads` (Callgrind).
    pub separate_threads: bool,
    /// `--trace-children=yes` (child processes are not profiled).
    pub trace_children: bool,
    /// `-q`.
    pub quiet: bool,
    /// `--version`.
    pub version: bool,
    /// `-h`, `--help`.
    pub help: bool,
    /// The program and its arguments, as given (not necessarily UTF-8).
    pub program: Vec<OsString>,
}

fn yes_no(option: &str, value: &str) -> Result<bool> {
    match value {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => bail!("{option}={value}: expected yes or no"),
    }
}

/// Parses Valgrind's command line (options, then the program).
pub fn parse(raw: &[OsString]) -> Result<VgOptions> {
    // Options are matched as text; the program's arguments pass as given.
    let args: Vec<String> = raw
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut tool = None;
    let mut o = VgOptions {
        tool: Tool::Callgrind,
        out_file: None,
        log_file: None,
        toggle_collect: Vec::new(),
        collect_atstart: true,
        instr_atstart: true,
        cache_sim: false,
        geometry: [None, None, None],
        compress_strings: true,
        separate_threads: false,
        trace_children: false,
        quiet: false,
        version: false,
        help: false,
        program: Vec::new(),
    };
    // Per-tool options, checked once the tool is known.
    let mut cache_sim = None;
    let mut callgrind_only: Vec<String> = Vec::new();
    let cachegrind_only: Vec<String> = Vec::new();
    let mut out_files: Vec<(Tool, String)> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if !arg.starts_with('-') {
            break;
        }
        i += 1;
        if arg == "--" {
            break;
        }
        let (key, value) = match arg.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (arg, None),
        };
        let need = || value.with_context(|| format!("{key} needs a value ({key}=...)"));
        match key {
            "-q" | "--quiet" => o.quiet = true,
            "-v" | "--verbose" => o.quiet = false,
            "--version" => o.version = true,
            "-h" | "--help" => o.help = true,
            "--tool" => {
                tool = Some(match need()? {
                    "callgrind" => Tool::Callgrind,
                    "cachegrind" => Tool::Cachegrind,
                    other => bail!(
                        "--tool={other}: coldcache runs Valgrind's two profiling tools only \
                         (--tool=callgrind or --tool=cachegrind)"
                    ),
                })
            }
            "--callgrind-out-file" => out_files.push((Tool::Callgrind, need()?.to_string())),
            "--cachegrind-out-file" => out_files.push((Tool::Cachegrind, need()?.to_string())),
            "--log-file" => o.log_file = Some(need()?.to_string()),
            "--I1" | "--D1" | "--LL" => {
                let v = need()?;
                coldcache_config::parse_valgrind_option(key, v)?;
                let k = ["--I1", "--D1", "--LL"].iter().position(|x| *x == key);
                o.geometry[k.unwrap_or(0)] = Some(v.to_string());
            }
            "--cache-sim" => cache_sim = Some(yes_no(key, need()?)?),
            "--branch-sim" => {
                if yes_no(key, need()?)? {
                    bail!(
                        "--branch-sim=yes: coldcache does not simulate branch prediction \
                         (no Bc/Bcm/Bi/Bim events); leave it out or give --branch-sim=no"
                    );
                }
            }
            "--toggle-collect" => {
                let f = need()?.to_string();
                o.toggle_collect.push(f);
                // As Callgrind: naming a function turns collection off at start.
                o.collect_atstart = false;
                callgrind_only.push(key.into());
            }
            "--collect-atstart" => {
                o.collect_atstart = yes_no(key, need()?)?;
                callgrind_only.push(key.into());
            }
            "--instr-atstart" | "--instr-at-start" => {
                o.instr_atstart = yes_no(key, need()?)?;
            }
            "--dump-instr" | "--dump-line" | "--compress-pos" => {
                yes_no(key, need()?)?;
                callgrind_only.push(key.into());
            }
            "--compress-strings" => {
                o.compress_strings = yes_no(key, need()?)?;
                callgrind_only.push(key.into());
            }
            "--combine-dumps" => {
                if yes_no(key, need()?)? {
                    bail!("--combine-dumps=yes: coldcache writes one dump per file; give no");
                }
                callgrind_only.push(key.into());
            }
            "--separate-threads" => {
                o.separate_threads = yes_no(key, need()?)?;
                callgrind_only.push(key.into());
            }
            "--trace-children" => o.trace_children = yes_no(key, need()?)?,
            "--fair-sched" => {
                let v = need()?;
                if !matches!(v, "yes" | "no" | "try") {
                    bail!("--fair-sched={v}: expected yes, no or try");
                }
            }
            "--error-exitcode" => {
                need()?
                    .parse::<u8>()
                    .ok()
                    .with_context(|| format!("{arg}: expected a number"))?;
            }
            "--vgdb" => {
                if need()? != "no" {
                    bail!("{arg}: coldcache has no gdbserver; give --vgdb=no");
                }
            }
            _ => bail!("unknown option {arg} (docs/valgrind.md lists what is accepted)"),
        }
    }
    o.program = raw[i..].to_vec();
    if o.version || o.help {
        return Ok(o);
    }
    o.tool = tool.context(
        "no --tool: Valgrind's default tool is memcheck, which coldcache does not run; \
         give --tool=callgrind or --tool=cachegrind",
    )?;
    let (mine, other) = match o.tool {
        Tool::Callgrind => ("callgrind", &cachegrind_only),
        Tool::Cachegrind => ("cachegrind", &callgrind_only),
    };
    if let Some(k) = other.first() {
        bail!("unknown option {k} for --tool={mine} (Valgrind's {mine} has none)");
    }
    for (t, f) in out_files {
        if t != o.tool {
            bail!(
                "unknown option --{}-out-file={f} for --tool={mine}",
                tool_name(t)
            );
        }
        o.out_file = Some(f);
    }
    // Callgrind simulates no cache by default; Cachegrind 3.19 does.
    o.cache_sim = cache_sim.unwrap_or(o.tool == Tool::Cachegrind);
    if o.program.is_empty() {
        bail!("no program to run (valgrind [OPTIONS] PROGRAM [ARGS])");
    }
    Ok(o)
}

fn tool_name(t: Tool) -> &'static str {
    match t {
        Tool::Callgrind => "callgrind",
        Tool::Cachegrind => "cachegrind",
    }
}

/// Valgrind's file-name expansion: `%p` the process id, `%n` a sequence
/// number of the process (`seq`, counted up before each use: one counter
/// for every name Valgrind expands, the log file's first, then the out
/// file's, [`file_names`]), `%q{VAR}` the environment variable VAR, `%%` a
/// `%`.
pub fn expand(
    name: &str,
    pid: u32,
    seq: &mut u32,
    var: impl Fn(&str) -> Option<String>,
) -> Result<String> {
    let mut out = String::new();
    let mut rest = name;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        if let Some(t) = tail.strip_prefix('p') {
            out.push_str(&pid.to_string());
            rest = t;
        } else if let Some(t) = tail.strip_prefix('n') {
            *seq += 1;
            out.push_str(&seq.to_string());
            rest = t;
        } else if let Some(t) = tail.strip_prefix('%') {
            out.push('%');
            rest = t;
        } else if let Some(t) = tail.strip_prefix("q{") {
            let end = t
                .find('}')
                .with_context(|| format!("{name}: %q{{ without its closing }}"))?;
            let v = &t[..end];
            out.push_str(&var(v).with_context(|| format!("{name}: %q{{{v}}}: {v} is not set"))?);
            rest = &t[end + 1..];
        } else {
            bail!("{name}: a % not followed by p, n, q{{VAR}} or %");
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The log file (when given) and the tool's out file for the program's
/// `pid`, expanded in Valgrind's order: the log file's at its start, then
/// the tool's (`%n` counts over both).
pub fn file_names(o: &VgOptions, pid: u32) -> Result<(Option<String>, String)> {
    let var = |v: &str| std::env::var(v).ok();
    let mut seq = 0;
    let log = o
        .log_file
        .as_deref()
        .map(|f| expand(f, pid, &mut seq, var))
        .transpose()?;
    let default_out = format!("{}.out.%p", tool_name(o.tool));
    let out = expand(
        o.out_file.as_deref().unwrap_or(&default_out),
        pid,
        &mut seq,
        var,
    )?;
    Ok((log, out))
}

/// The file an expanded name names: `-` is a file of that name, as
/// Valgrind's (not standard output, as `-` is to coldcache's own verbs).
fn file_path(name: &str) -> PathBuf {
    if name == "-" {
        PathBuf::from("./-")
    } else {
        PathBuf::from(name)
    }
}

/// An I/O error as Valgrind words it (`No such file or directory`, without
/// Rust's `(os error 2)`).
fn reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(at) => s[..at].to_string(),
        None => s,
    }
}

/// Exit status of Valgrind when its log file or Callgrind's out file
/// cannot be created.
pub const FILE_ERROR: u8 = 1;

/// What Valgrind finds out at its start, before the program runs: that
/// the log file and Callgrind's out file can be created (Cachegrind opens
/// its file at the end). A name that does not depend on the pid is
/// created now, as Valgrind creates it; one that does (`%p`, unknown
/// until the program starts) has its directory checked, when that does
/// not depend on the pid too. Returns Valgrind's message on failure.
fn check_files_at_start(o: &VgOptions) -> Result<std::result::Result<(), String>> {
    let (a, b) = (file_names(o, 1)?, file_names(o, 2)?);
    let mut files = Vec::new();
    if let (Some(x), Some(y)) = (a.0, b.0) {
        files.push((true, x, y));
    }
    if o.tool == Tool::Callgrind {
        files.push((false, a.1, b.1));
    }
    for (log, x, y) in files {
        let made = if x == y {
            std::fs::File::create(file_path(&x)).map(drop)
        } else {
            writable_parent(&x, &y)
        };
        if let Err(e) = made {
            return Ok(Err(if log {
                format!(
                    "valgrind: Cannot create log file '{}': {}",
                    o.log_file.as_deref().unwrap_or_default(),
                    reason(&e)
                )
            } else {
                format!(
                    "=={}== Error: can not open cache simulation output file `{}' ({})",
                    std::process::id(),
                    o.out_file.as_deref().unwrap_or("callgrind.out.%p"),
                    reason(&e)
                )
            }));
        }
    }
    Ok(Ok(()))
}

/// Whether files can be created in the directory of `x`, a name expanded
/// with one pid, when `y` (the same with another) has the same directory.
fn writable_parent(x: &str, y: &str) -> std::io::Result<()> {
    let (px, py) = (Path::new(x).parent(), Path::new(y).parent());
    if px != py {
        return Ok(());
    }
    let dir = match px {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !std::fs::metadata(dir)?.is_dir() {
        return Err(std::io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call;
    // access reads it and nothing else.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `coldcache valgrind` (or `valgrind`) with these arguments.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let o = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            coldcache_fsio::say!("coldcache valgrind: error: {e:#}");
            return ExitCode::from(USAGE);
        }
    };
    if o.help {
        println!("{HELP}");
        return ExitCode::SUCCESS;
    }
    if o.version {
        println!(
            "valgrind-coldcache-{} (Valgrind's command line for callgrind and cachegrind)",
            env!("CARGO_PKG_VERSION")
        );
        return ExitCode::SUCCESS;
    }
    match run(&o) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            coldcache_fsio::say!("coldcache valgrind: error: {e:#}");
            ExitCode::from(USAGE)
        }
    }
}

const HELP: &str = "\
usage: coldcache valgrind --tool=callgrind|cachegrind [VALGRIND OPTIONS] PROGRAM [ARGS]
       (or this binary run under the name `valgrind`)

Runs PROGRAM under a coldcache capture (fast mode, from main; with
--toggle-collect=FN what Callgrind collects) and writes Valgrind's files:
Callgrind's or Cachegrind's format, Valgrind's event names, its ==PID==
summary lines on stderr or --log-file. The program's output and exit status
pass through. Accepted: --callgrind-out-file, --cachegrind-out-file and
--log-file (%p, %n, %q{VAR}), --toggle-collect, --collect-atstart,
--instr-atstart (client requests: callgrind.h, cachegrind.h), --cache-sim, --I1/--D1/--LL, --separate-threads,
--compress-strings, --compress-pos, --dump-line, --dump-instr,
--combine-dumps=no, --branch-sim=no, --fair-sched, --trace-children (children
are not profiled), --error-exitcode, --vgdb=no, -q, -v, --version. Anything
else is refused with exit status 2. See docs/valgrind.md.";

/// `record`'s wrapper for parsing its arguments from a built command line.
#[derive(Parser)]
struct Record {
    #[command(flatten)]
    args: crate::record_cmd::RecordArgs,
}

/// Records the program, writes Valgrind's outputs; the program's status.
fn run(o: &VgOptions) -> Result<u8> {
    // The file names are checked before the program runs (as Valgrind
    // expands them at its start): a `%q{VAR}` of an unset VAR is refused;
    // a log file or Callgrind out file that cannot be created ends the run
    // with Valgrind's message and status.
    if let Err(message) = check_files_at_start(o)? {
        coldcache_fsio::say!("{message}");
        return Ok(FILE_ERROR);
    }
    let dir = tempfile::Builder::new()
        .prefix("coldcache-valgrind")
        .tempdir()
        .context("creating a temporary directory")?;
    let dump_path = dir.path().join("capture.ccdump");
    let mut argv: Vec<OsString> = vec![
        "record".into(),
        "--no-progress".into(),
        "--threads".into(),
        "all".into(),
        "-o".into(),
        dump_path.clone().into_os_string(),
    ];
    for (opt, v) in ["--I1", "--D1", "--LL"].iter().zip(&o.geometry) {
        if let Some(v) = v {
            argv.push(format!("{opt}={v}").into());
        }
    }
    // The whole run, also for --toggle-collect (its records are chosen
    // after: any number of functions, the cache simulated throughout as
    // Callgrind's): from main, or, in a program without a symbol table
    // (stripped), from the C library's __libc_start_main, which calls it.
    match start_function(&o.program[0].to_string_lossy()) {
        START_MAIN => argv.push("--all".into()),
        f => argv.extend(["--function".into(), f.into()]),
    }
    argv.push("--no-sources".into());
    // The program's client requests (`callgrind.h`, `cachegrind.h`) take
    // effect from these states; with --toggle-collect, collection starts
    // on at capture time and the toggles are applied after.
    argv.push(
        format!(
            "--client-requests={}",
            coldcache_capture::requests::Honour {
                collect: o.collect_atstart || !o.toggle_collect.is_empty(),
                instr: o.instr_atstart,
                // Valgrind's tools ignore each other's requests.
                only: Some(match o.tool {
                    Tool::Callgrind => coldcache_capture::requests::Tool::Callgrind,
                    Tool::Cachegrind => coldcache_capture::requests::Tool::Cachegrind,
                }),
            }
            .describe()
        )
        .into(),
    );
    argv.push("--".into());
    argv.extend(o.program.iter().cloned());
    let mut rec = Record::try_parse_from(&argv)
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_end()))?
        .args;
    rec.quiet = true;
    let mut written = Vec::new();
    let status = match crate::record_cmd::run_listing(rec, &mut written) {
        Ok(()) => 0,
        Err(e) => match e.downcast_ref::<crate::record_cmd::ChildFailed>() {
            Some(c) => c.0,
            None => return Err(e),
        },
    };
    if !dump_path.is_file() {
        bail!("the capture wrote no dump (see the messages above)");
    }
    // One dump, or one per part of a profile its `CALLGRIND_DUMP_STATS`
    // requests cut (`capture.ccdump`, `capture.2.ccdump`, ...), as the
    // library's manifest lists them.
    let mut dumps = Vec::new();
    for path in &written {
        dumps.push(crate::report_cmd::load_for_views(path)?);
    }
    dumps.sort_by_key(|d| d.meta.part.as_ref().map_or(0, |p| p.number));
    let mut collected = None;
    if !o.toggle_collect.is_empty() {
        for d in &mut dumps {
            let (kept, names) = toggle_collect(d.clone(), &o.toggle_collect, o.collect_atstart);
            *d = kept;
            let all: &mut Vec<String> = collected.get_or_insert_with(Vec::new);
            for n in names {
                if !all.contains(&n) {
                    all.push(n);
                }
            }
        }
    }
    let failed = write_outputs(o, &dumps, collected.as_deref())?;
    Ok(failed.unwrap_or(status))
}

/// Where a whole run is captured from when the program has `main`.
const START_MAIN: &str = "main";

/// The function a whole run is captured from: `main` when the program
/// names it (its symbol table), else `__libc_start_main` (a stripped
/// program; the C library exports it, and it runs the program's
/// constructors and `main`). A program that cannot be read is left to
/// `record` to refuse.
fn start_function(program: &str) -> &'static str {
    let Ok(path) = crate::record_cmd::find_program(program) else {
        return START_MAIN;
    };
    match crate::record_function::resolve_in_files(&[path], START_MAIN, "--all") {
        Err(e) if format!("{e:#}").contains("no symbol table") => "__libc_start_main",
        _ => START_MAIN,
    }
}

/// Callgrind's `--toggle-collect=PATTERN` (each of `patterns`) over a
/// whole-run dump: a function a pattern names is a toggle; Callgrind flips
/// collection on entering a toggle (not again on its recursive calls) and
/// back on its return, so a record is collected when the number of
/// distinct toggles on its stack is odd (even with `atstart`). Returns the
/// dump of the collected records and the toggles' names (demangled; none
/// when none ran). A name matches as `record --function` matches it: exact,
/// without parameters, its end after `::`, or a wildcard.
pub fn toggle_collect(
    dump: coldcache_dump::Dump,
    patterns: &[String],
    atstart: bool,
) -> (coldcache_dump::Dump, Vec<String>) {
    let p = Profile::new(
        dump,
        ProfileOptions {
            inline: false,
            threads: None,
            root: None,
        },
    );
    let toggles: Vec<bool> = p
        .functions()
        .iter()
        .map(|f| {
            patterns
                .iter()
                .any(|q| coldcache_dump::names::match_name(&f.name, q).is_some())
        })
        .collect();
    let mut names: Vec<String> = Vec::new();
    let mut on: Vec<u32> = Vec::new();
    let keep: Vec<bool> = (0..p.record_count())
        .map(|i| {
            on.clear();
            for fr in p.record_path(i) {
                if toggles.get(fr.function as usize).copied().unwrap_or(false)
                    && !on.contains(&fr.function)
                {
                    on.push(fr.function);
                    let n = &p.function(fr.function).name;
                    if !names.contains(n) {
                        names.push(n.clone());
                    }
                }
            }
            (on.len() % 2 == 1) != atstart
        })
        .collect();
    let mut dump = p.dump().clone();
    let mut k = keep.iter();
    dump.records.retain(|_| k.next().copied().unwrap_or(false));
    names.sort();
    (dump, names)
}

/// The `(name, size, line, assoc)` of I1, D1 and LL for the `desc:` lines.
fn caches(o: &VgOptions) -> Vec<(String, u64, u32, u32)> {
    let defaults = ["32768,8,64", "32768,8,64", "8388608,16,64"];
    ["I1", "D1", "LL"]
        .iter()
        .zip(&o.geometry)
        .zip(defaults)
        .filter_map(|((name, g), d)| {
            let g = coldcache_config::parse_valgrind_geometry(g.as_deref().unwrap_or(d)).ok()?;
            Some((name.to_string(), g.size, g.line, g.assoc))
        })
        .collect()
}

/// Writes the tool's output file(s) and Valgrind's `==PID==` lines; the
/// status that replaces the program's when a file could not be written,
/// as Valgrind's: Callgrind ends with [`FILE_ERROR`] and no summary,
/// Cachegrind says the results are missing and ends with the program's
/// status; a log file that cannot be written ends with [`FILE_ERROR`].
fn write_outputs(
    o: &VgOptions,
    dumps: &[coldcache_dump::Dump],
    collected: Option<&[String]>,
) -> Result<Option<u8>> {
    let last = dumps.last().context("the capture wrote no dump")?;
    let pid = last.meta.pid;
    let (log_file, out) = file_names(o, pid)?;
    let ir_only = !o.cache_sim;
    // The files to write, in order; the first that fails ends the writing.
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut totals = [0u64; 9];
    for (k, dump) in dumps.iter().enumerate() {
        // As Callgrind: the parts a DUMP_STATS ended are FILE.1, FILE.2,
        // ...; the last (the program's end) is FILE.
        let name = if k + 1 == dumps.len() {
            out.clone()
        } else {
            format!("{out}.{}", k + 1)
        };
        let t = part_files(o, dump, &name, &mut files)?;
        for (sum, v) in totals.iter_mut().zip(t) {
            *sum += v;
        }
    }
    let dump = last;
    let failed = files
        .iter()
        .find_map(|(name, bytes)| Some(name).zip(write_file(name, bytes).err()));
    let mut log = String::new();
    if !o.quiet {
        log.push_str(&log_head(o, dump, collected));
    }
    let mut status = None;
    match (failed, o.tool) {
        (Some((name, e)), Tool::Callgrind) => {
            // Callgrind stops at once: no summary.
            log.push_str(&format!(
                "=={pid}== Error: can not open cache simulation output file `{name}'\n\
                 --{pid}-- coldcache: {}\n",
                reason(&e)
            ));
            status = Some(FILE_ERROR);
        }
        (failed, _) => {
            if let Some((name, e)) = failed {
                log.push_str(&format!(
                    "=={pid}== error: can't open cache simulation output file '{name}'\n\
                     =={pid}==        ... so simulation results will be missing.\n\
                     --{pid}-- coldcache: {}\n",
                    reason(&e)
                ));
            }
            if !o.quiet {
                log.push_str(&log_summary(o, pid, &totals, ir_only));
            }
        }
    }
    match &log_file {
        // Written also when empty (-q), as Valgrind creates it at its start.
        Some(f) => {
            if let Err(e) = write_file(f, log.as_bytes()) {
                coldcache_fsio::say!("valgrind: Cannot create log file '{f}': {}", reason(&e));
                status = Some(FILE_ERROR);
            }
        }
        None if !log.is_empty() => coldcache_fsio::say!("{}", log.trim_end_matches('\n')),
        None => {}
    }
    Ok(status)
}

/// The files of one dump (a part of the profile, or the whole) under the
/// name `out`, appended to `files`; gives its totals of Valgrind's nine
/// events.
fn part_files(
    o: &VgOptions,
    dump: &coldcache_dump::Dump,
    out: &str,
    files: &mut Vec<(String, Vec<u8>)>,
) -> Result<[u64; 9]> {
    let pid = dump.meta.pid;
    let out = out.to_string();
    let options = |threads: Option<Vec<u32>>| ProfileOptions {
        inline: false,
        threads,
        root: None,
    };
    let mut threads: Vec<u32> = dump.threads.iter().map(|t| t.tid).collect();
    threads.sort_by_key(|&t| (t != pid, t));
    let ir_only = !o.cache_sim;
    let whole = Profile::new(dump.clone(), options(None));
    let totals = coldcache_export::valgrind_totals(&whole)
        .context("the capture's counters are not coldcache's layout")?;
    match o.tool {
        Tool::Callgrind => {
            let opts = |thread| coldcache_export::CallgrindOptions {
                load_bias: crate::report_cmd::load_biases(dump),
                events: if ir_only {
                    coldcache_export::EventSet::Ir
                } else {
                    coldcache_export::EventSet::Valgrind
                },
                plain_names: !o.compress_strings,
                summary: true,
                thread,
            };
            if o.separate_threads {
                // As Callgrind: the base name empty, FILE-01, FILE-02, ...
                files.push((out.clone(), Vec::new()));
                for (k, &tid) in threads.iter().enumerate() {
                    let n = k as u32 + 1;
                    let p = Profile::new(dump.clone(), options(Some(vec![tid])));
                    let text = coldcache_export::callgrind_with(&p, &opts(Some(n)));
                    files.push((format!("{out}-{n:02}"), text.into_bytes()));
                }
            } else {
                let text = coldcache_export::callgrind_with(&whole, &opts(None));
                files.push((out.clone(), text.into_bytes()));
            }
        }
        Tool::Cachegrind => {
            let opts = coldcache_export::CachegrindOptions {
                ir_only,
                // Cachegrind writes the caches also with --cache-sim=no.
                caches: caches(o),
            };
            let text = coldcache_export::cachegrind(&whole, &opts)
                .context("the capture's counters are not coldcache's layout")?;
            files.push((out.clone(), text.into_bytes()));
        }
    }
    Ok(totals)
}

/// Writes `bytes` to the file an expanded name names ([`file_path`]).
fn write_file(name: &str, bytes: &[u8]) -> std::io::Result<()> {
    coldcache_fsio::write_output(&file_path(name), bytes)
}

/// Valgrind's lines about the run before the tool's summary (banner,
/// `Command:`), and coldcache's own notes as Valgrind's `--PID--` lines.
fn log_head(o: &VgOptions, d: &coldcache_dump::Dump, collected: Option<&[String]>) -> String {
    let pid = d.meta.pid;
    let mut s = String::new();
    let mut line = |t: &str| s.push_str(&format!("=={pid}== {t}\n"));
    line(match o.tool {
        Tool::Callgrind => "Callgrind, a call-graph generating cache profiler",
        Tool::Cachegrind => "Cachegrind, a cache and branch-prediction profiler",
    });
    line(&format!(
        "coldcache {}: Valgrind's command line over a fast-mode capture (docs/valgrind.md)",
        env!("CARGO_PKG_VERSION")
    ));
    line(&format!("Command: {}", d.meta.program.join(" ")));
    // SAFETY: getppid has no preconditions.
    line(&format!("Parent PID: {}", unsafe { libc::getppid() }));
    line("");
    let mut notes = vec![match d.meta.trigger.strip_prefix("function:") {
        Some(f) if f != START_MAIN => format!(
            "captured: from {f} (the program has no symbol table, so no main), \
             not the loader before it"
        ),
        _ => {
            "captured: from main to its return, not the loader before it (record --all)".to_string()
        }
    }];
    if let Some(names) = collected {
        let f = o.toggle_collect.join(" ");
        notes.push(match names {
            [] => format!("--toggle-collect {f}: no function of that name ran"),
            _ => format!("--toggle-collect {f}: toggled by {}", names.join(", ")),
        });
    }
    let unmodelled: u64 = d.meta.unmodelled.iter().map(|(_, n)| n).sum();
    if unmodelled > 0 {
        notes.push(format!(
            "{unmodelled} instructions' accesses not modelled (coldcache report lists them)"
        ));
    }
    if o.trace_children {
        notes.push("--trace-children=yes: child processes run, not profiled".into());
    }
    if crate::written::one_core_warning(d).is_some() {
        notes.push(format!(
            "{} threads traced, run as the OS ran them, on one simulated core (as \
             Valgrind's caches: no coherence traffic)",
            d.threads.len()
        ));
    }
    if let Some(r) = coldcache_analysis::summary::client_requests(&d.meta) {
        notes.push(format!("{} ({})", r.text, r.advice));
        let toggled = d
            .meta
            .client_requests
            .made
            .iter()
            .any(|(what, _)| what == "CALLGRIND_TOGGLE_COLLECT");
        if toggled && collected.is_some() {
            notes.push(
                "TOGGLE_COLLECT requests with --toggle-collect: the requests were applied \
                 during the run and the toggles after, not interleaved as Callgrind does"
                    .into(),
            );
        }
    }
    if let Some(c) = &d.meta.cut_short {
        notes.push(format!("cut short: {c}"));
    }
    let mut s2 = String::new();
    for n in notes {
        s2.push_str(&format!("--{pid}-- coldcache: {n}\n"));
    }
    s.push_str(&s2);
    s
}

/// The tool's summary: Callgrind's `Events :`/`Collected :`, then
/// Valgrind's `I   refs:` ... lines.
fn log_summary(o: &VgOptions, pid: u32, totals: &[u64; 9], ir_only: bool) -> String {
    let mut s = String::new();
    if o.tool == Tool::Callgrind {
        let n = if ir_only { 1 } else { 9 };
        s.push_str(&format!(
            "=={pid}== \n=={pid}== Events    : {}\n=={pid}== Collected : {}\n",
            coldcache_export::VALGRIND_EVENTS[..n].join(" "),
            totals[..n]
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    s.push_str(&format!("=={pid}== \n"));
    s.push_str(&coldcache_export::summary_lines(pid, totals, ir_only));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &str) -> Result<VgOptions> {
        parse(
            &args
                .split_whitespace()
                .map(OsString::from)
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn file_names_expand_as_valgrinds() {
        let var = |v: &str| (v == "JOB").then(|| "7".to_string());
        let mut n = 0;
        assert_eq!(expand("cg.out.%p", 42, &mut n, var).unwrap(), "cg.out.42");
        assert_eq!(
            expand("a.#%p.%q{JOB}.%%", 42, &mut n, var).unwrap(),
            "a.#42.7.%"
        );
        assert!(expand("x.%q{NOPE}", 1, &mut n, var).is_err());
        assert!(expand("x.%z", 1, &mut n, var).is_err());
        // %n counts on over the names, from 1.
        assert_eq!(n, 0);
        assert_eq!(expand("l.%n", 1, &mut n, var).unwrap(), "l.1");
        assert_eq!(expand("c.%n.%n", 1, &mut n, var).unwrap(), "c.2.3");
    }

    #[test]
    fn the_log_files_name_is_expanded_before_the_out_files() {
        // As Valgrind 3.19 names them: `--log-file=l.%n
        // --callgrind-out-file=c.%n.%n` writes l.1 and c.2.3.
        let o = p("--tool=callgrind --callgrind-out-file=c.%n.%n --log-file=l.%n ./a").unwrap();
        assert_eq!(
            file_names(&o, 9).unwrap(),
            (Some("l.1".to_string()), "c.2.3".to_string())
        );
        let o = p("--tool=cachegrind ./a").unwrap();
        assert_eq!(
            file_names(&o, 9).unwrap(),
            (None, "cachegrind.out.9".to_string())
        );
        assert_eq!(file_path("-"), Path::new("./-"));
    }

    #[test]
    fn gungrauns_command_line_is_taken() {
        let o = p(
            "--tool=callgrind --error-exitcode=0 --trace-children=yes --fair-sched=try \
                   --vgdb=no --I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64 --cache-sim=yes \
                   --compress-strings=no --compress-pos=no --dump-line=yes --dump-instr=no \
                   --combine-dumps=no --separate-threads=yes --toggle-collect=*::bench::* \
                   --callgrind-out-file=x.#%p.out --log-file=x.#%p.log ./bench --gungraun-run a",
        )
        .unwrap();
        assert_eq!(o.tool, Tool::Callgrind);
        assert!(o.cache_sim && o.separate_threads && !o.compress_strings && !o.collect_atstart);
        assert_eq!(o.toggle_collect, ["*::bench::*"]);
        assert_eq!(o.program, ["./bench", "--gungraun-run", "a"]);
        assert_eq!(o.out_file.as_deref(), Some("x.#%p.out"));
        // Callgrind simulates no cache unless asked; Cachegrind 3.19 does.
        assert!(!p("--tool=callgrind ./a").unwrap().cache_sim);
        assert!(p("--tool=cachegrind ./a").unwrap().cache_sim);
    }

    #[test]
    fn what_cannot_be_done_is_refused_by_name() {
        for (args, says) in [
            ("--tool=memcheck ./a", "--tool=memcheck"),
            ("./a", "no --tool"),
            ("--tool=cachegrind --branch-sim=yes ./a", "--branch-sim=yes"),
            ("--tool=callgrind --bogus=1 ./a", "unknown option --bogus=1"),
            (
                "--tool=cachegrind --toggle-collect=f ./a",
                "--toggle-collect",
            ),
            (
                "--tool=callgrind --cachegrind-out-file=x ./a",
                "--cachegrind-out-file",
            ),
            ("--tool=callgrind", "no program"),
        ] {
            let e = format!("{:#}", p(args).unwrap_err());
            assert!(e.contains(says), "{args}: {e}");
        }
        assert!(p("--tool=cachegrind --branch-sim=no -q ./a").is_ok());
        // The program starts them with client requests.
        assert!(
            !p("--tool=callgrind --collect-atstart=no ./a")
                .unwrap()
                .collect_atstart
        );
        assert!(
            !p("--tool=cachegrind --instr-at-start=no ./a")
                .unwrap()
                .instr_atstart
        );
        // Several toggles; everything but them (--collect-atstart=yes after).
        let o = p("--tool=callgrind --toggle-collect=f --toggle-collect=g* \
                   --collect-atstart=yes ./a")
        .unwrap();
        assert_eq!(o.toggle_collect, ["f", "g*"]);
        assert!(o.collect_atstart);
        // --help and --version need neither a tool nor a program.
        assert!(p("--help").unwrap().help);
        assert!(p("--version").unwrap().version);
    }
}
