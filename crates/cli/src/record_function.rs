//! `record --function NAME` (and `--all`, which is `main`) resolved before
//! the program runs: the files searched are the program and the libraries
//! it links, as its dynamic loader lists them (`ld.so --list PROGRAM`: the
//! program's own interpreter, so `DT_NEEDED`, `RPATH`/`RUNPATH`,
//! `LD_LIBRARY_PATH`, `LD_PRELOAD` and the loader cache count exactly as
//! they will in the run); the name is matched by
//! `coldcache_symbols::functions` (mangled, demangled with or without the
//! signature, a `::` suffix, a wildcard). An unknown name is refused with
//! "did you mean" suggestions (`coldcache_config::closest_n`, the presets'
//! helper), an ambiguous one with the candidates. The library then plants
//! its breakpoint at the function found here (file and ELF address), not
//! at whatever a second lookup by name would find.
//!
//! A function of a library the program opens later with `dlopen` is not
//! among these: the refusal names `--in-dlopen`, with which a name found
//! nowhere here is handed to the library, which looks it up (its exact
//! symbol name) in each library the program opens ([`resolve`] returns
//! `None` then, and `record` warns).

use anyhow::{bail, Context, Result};
use coldcache_symbols::functions::{
    callable_clones, choose, find_function, read_functions, without_parameters,
    without_return_type, Candidate, FileFunctions, MatchKind,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The function to capture.
#[derive(Debug)]
pub struct Resolved {
    /// Its symbol's own name (what the dump's trigger records).
    pub raw: String,
    /// The file defining it, canonical (as `/proc/PID/maps` names it).
    pub module: PathBuf,
    /// Its ELF address in that file.
    pub address: u64,
    /// What to tell the user about the choice, if anything.
    pub note: Option<String>,
}

/// Candidates listed in a refusal at most.
const LISTED: usize = 12;

/// The program's ELF interpreter (`PT_INTERP`), if it has one.
fn interpreter(data: &[u8]) -> Option<PathBuf> {
    use object::read::elf::{ElfFile64, ProgramHeader};
    let elf = ElfFile64::<object::Endianness>::parse(data).ok()?;
    let endian = elf.endian();
    elf.elf_program_headers()
        .iter()
        .find(|ph| ph.p_type(endian) == object::elf::PT_INTERP)
        .and_then(|ph| ph.data(endian, data).ok())
        .map(|bytes| {
            let bytes = bytes.split(|&b| b == 0).next().unwrap_or_default();
            PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
        })
}

/// The program and the libraries it links, program first, in the
/// loader's order, each canonical. Libraries the loader cannot find are
/// left out (the run itself will fail and say so).
pub fn linked_files(program: &Path) -> Result<Vec<PathBuf>> {
    let data = std::fs::read(program).with_context(|| format!("reading {}", program.display()))?;
    let prog = program
        .canonicalize()
        .with_context(|| format!("locating {}", program.display()))?;
    let mut files = vec![prog];
    let Some(interp) = interpreter(&data) else {
        return Ok(files);
    };
    let out = Command::new(&interp)
        .arg("--list")
        .arg(program)
        .output()
        .with_context(|| format!("running {} --list {}", interp.display(), program.display()))?;
    if !out.status.success() {
        bail!(
            "{} cannot be loaded, so it would not run either: {} (from `{} --list`)",
            program.display(),
            String::from_utf8_lossy(&out.stderr).trim(),
            interp.display()
        );
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // `libc.so.6 => /lib/…/libc.so.6 (0x…)`, `/lib64/ld-linux….so.2
        // (0x…)`, `linux-vdso.so.1 (0x…)`, `libx.so => not found`.
        let line = line.trim();
        let path = match line.split_once(" => ") {
            Some((_, rest)) => rest,
            None => line,
        };
        let path = path.rsplit_once(" (0x").map_or(path, |(p, _)| p).trim();
        // A relative path (an `LD_LIBRARY_PATH` of `.`) is relative to
        // the working directory, which the loader shared with us.
        if !path.contains('/') {
            continue;
        }
        if let Ok(p) = Path::new(path).canonicalize() {
            if !files.contains(&p) {
                files.push(p);
            }
        }
    }
    Ok(files)
}

/// Resolves `query` in `program` and the libraries it links but
/// `libcoldcache` (the capture's own code, never a function to capture).
/// With `in_dlopen`, a name found nowhere there is `Ok(None)`: it is to be
/// looked for in the libraries the program opens with `dlopen`, by its
/// exact symbol name, so a wildcard or a demangled name is refused.
pub fn resolve(
    program: &Path,
    query: &str,
    option: &str,
    libcoldcache: &Path,
    in_dlopen: bool,
) -> Result<Option<Resolved>> {
    let files: Vec<FileFunctions> = linked_files(program)?
        .iter()
        .filter(|p| p.as_path() != libcoldcache)
        .enumerate()
        .filter_map(|(i, p)| match read_functions(p) {
            Ok(f) => Some(Ok(f)),
            // The program must be readable; a library that is not is
            // searched no further (it cannot hold the breakpoint either).
            Err(e) if i == 0 => Some(Err(e)),
            Err(_) => None,
        })
        .collect::<Result<_, _>>()?;
    if in_dlopen && find_function(&files, query).is_empty() {
        if query.contains(['*', '?', '(', ' ']) || query.contains("::") {
            bail!(
                "{option} {query} --in-dlopen: no function of that name in {} or the libraries \
                 it links, and a function of a library opened later is looked up by its exact \
                 symbol name (a C name, or a C++/Rust mangled name): no wildcard, no demangled name",
                program.display()
            );
        }
        return Ok(None);
    }
    decide(&files, query, option, true).map(Some)
}

/// `record --all`: `main`, found as [`resolve`] finds a function; in a
/// program whose symbol table was stripped (most system binaries), read
/// from its entry code instead (`coldcache_symbols::functions::
/// main_from_entry`). A stripped program whose entry code is not the C
/// library's is refused as before.
pub fn resolve_main(program: &Path, libcoldcache: &Path) -> Result<Option<Resolved>> {
    let named = resolve(program, "main", "--all", libcoldcache, false);
    let Err(e) = named else { return named };
    // Only a `main` missing from a stripped program's tables is looked
    // for elsewhere (a program the loader cannot load is refused as is).
    let stripped = read_functions(program).is_ok_and(|f| !f.has_symtab)
        && format!("{e:#}").contains("no function of that name");
    if !stripped {
        return Err(e);
    }
    let found = coldcache_symbols::functions::main_from_entry(program);
    let (Some(address), Ok(module)) = (found, program.canonicalize()) else {
        return Err(e.context(
            "its entry code does not show where main is either (not the C library's _start)",
        ));
    };
    Ok(Some(Resolved {
        raw: "main".into(),
        module,
        address,
        note: Some(format!(
            "--all: main found at {address:#x} through the entry code of {} (its symbol table \
             was stripped, so functions will be named by their addresses where it exports no \
             symbol)",
            program.display()
        )),
    }))
}

/// `attach --function`: the function named `query` among `files`, the
/// program first and then the libraries mapped in the running process
/// (`/proc/PID/maps`, those it opened with `dlopen` included).
pub fn resolve_in_files(files: &[PathBuf], query: &str, option: &str) -> Result<Resolved> {
    let files: Vec<FileFunctions> = files
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match read_functions(p) {
            Ok(f) => Some(Ok(f)),
            Err(e) if i == 0 => Some(Err(e)),
            Err(_) => None,
        })
        .collect::<Result<_, _>>()?;
    decide(&files, query, option, false)
}

/// The choice among `files` (program first) for `query`, or the refusal;
/// `before_run`: `record`'s (whose refusal names `--in-dlopen`).
fn decide(
    files: &[FileFunctions],
    query: &str,
    option: &str,
    before_run: bool,
) -> Result<Resolved> {
    let candidates = find_function(files, query);
    let name = |c: &Candidate| files[c.file].path.display().to_string();
    let describe = |c: &Candidate| {
        if c.raw == c.demangled {
            format!("{} in {}", c.raw, name(c))
        } else {
            format!("{} [{}] in {}", c.demangled, c.raw, name(c))
        }
    };
    let Some(chosen) = choose(&candidates) else {
        if candidates.is_empty() {
            bail!("{}", not_found(files, query, option, before_run));
        }
        let mut list: Vec<String> = candidates
            .iter()
            .take(LISTED)
            .map(|c| format!("  {}", describe(c)))
            .collect();
        if candidates.len() > LISTED {
            list.push(format!("  … and {} more", candidates.len() - LISTED));
        }
        bail!(
            "{option} {query}: {} functions match, and a capture watches one:\n{}\n\
             give one of these names exactly (with its signature, or the mangled name in brackets)",
            candidates.len(),
            list.join("\n")
        );
    };
    let others: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| !std::ptr::eq(*c, chosen))
        .collect();
    let mut note = Vec::new();
    if chosen.kind != MatchKind::Exact || !others.is_empty() {
        note.push(format!("{option} {query}: capturing {}", describe(chosen)));
    }
    if !others.is_empty() {
        note.push(format!(
            "  (the program's own definition, which the loader binds first; also matched: {})",
            others
                .iter()
                .take(LISTED)
                .map(|c| describe(c))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    // Callers may call a specialised copy instead of the function's own
    // entry (partial inlining's `f.part.N`, `f.isra.N`, `f.constprop.N`):
    // the capture starts at f's entry only, so say which copies exist.
    let clones = callable_clones(&files[chosen.file], &chosen.raw);
    if !clones.is_empty() {
        let names: Vec<&str> = clones.iter().take(LISTED).map(|f| f.raw.as_str()).collect();
        note.push(format!(
            "{option} {query}: note: the compiler also made {} of {} that callers may call \
             instead of its own entry ({}); the capture starts at its own entry only: if it \
             finds no call, name a copy: {option} {}",
            if clones.len() == 1 {
                "a copy"
            } else {
                "copies"
            },
            chosen.raw,
            names.join(", "),
            names[0]
        ));
    }
    Ok(Resolved {
        raw: chosen.raw.clone(),
        module: files[chosen.file].path.clone(),
        address: chosen.address,
        note: (!note.is_empty()).then(|| note.join("\n")),
    })
}

/// The refusal of a name nothing matches: where it was looked for, why
/// a stripped program hides it, suggestions, and (`before_run`) the
/// dlopen case.
fn not_found(files: &[FileFunctions], query: &str, option: &str, before_run: bool) -> String {
    let program = &files[0];
    let mut msg = format!(
        "{option} {query}: no function of that name in {} or the {} libraries it links",
        program.path.display(),
        files.len() - 1
    );
    if !program.has_symtab {
        msg += &format!(
            " ({} has no symbol table: it was stripped, so only its exported functions \
             can be named; rebuild it without -s or strip)",
            program.path.display()
        );
    }
    // Suggestions: full names without parameters, and, for a name typed
    // without `::`, their last component (mapped back to the full name).
    let short = !query.contains("::");
    let mut keys: Vec<(String, String)> = Vec::new();
    for f in files.iter().flat_map(|f| &f.functions) {
        let bare = without_return_type(without_parameters(&f.demangled)).to_string();
        if short {
            if let Some((_, last)) = bare.rsplit_once("::") {
                keys.push((last.to_string(), bare.clone()));
            }
        }
        keys.push((bare.clone(), bare));
    }
    let close = coldcache_config::closest_n(query, keys.iter().map(|(k, _)| k.as_str()), 8);
    let mut shown: Vec<&str> = Vec::new();
    for k in close {
        for (key, full) in &keys {
            if key == k && !shown.contains(&full.as_str()) && shown.len() < 5 {
                shown.push(full);
            }
        }
    }
    if !shown.is_empty() {
        msg += &format!(
            "; did you mean {}?",
            shown
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !msg.ends_with('?') {
        msg.push('.');
    }
    if before_run {
        msg += &format!(
            " If {query} is in a library the program opens later with dlopen, add \
             --in-dlopen: it is then looked for (its exact symbol name) in each library \
             the program opens"
        );
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldcache_symbols::functions::FunctionSymbol;

    fn file(path: &str, symtab: bool, names: &[(&str, &str, u64)]) -> FileFunctions {
        FileFunctions {
            path: path.into(),
            has_symtab: symtab,
            functions: names
                .iter()
                .map(|&(raw, demangled, address)| FunctionSymbol {
                    raw: raw.into(),
                    demangled: demangled.into(),
                    address,
                })
                .collect(),
        }
    }

    #[test]
    fn refusals_explain_and_suggest() {
        let files = [
            file(
                "/p/prog",
                false,
                &[
                    ("count_and_sort", "count_and_sort", 0x10),
                    (
                        "_ZN3geo4Vec23dotERKS0_",
                        "geo::Vec2::dot(geo::Vec2 const&)",
                        0x30,
                    ),
                ],
            ),
            file("/lib/libc.so.6", true, &[("qsort", "qsort", 0x1000)]),
        ];
        let e = decide(&files, "count_and_srot", "--function", true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("did you mean `count_and_sort`? If count_and_srot is in a library"),
            "{e}"
        );
        assert!(e.contains("/p/prog has no symbol table"), "{e}");
        assert!(e.contains("the 1 libraries it links"), "{e}");
        assert!(e.contains("add --in-dlopen"), "{e}");
        let e = decide(&files, "dto", "--function", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `geo::Vec2::dot`?"), "{e}");
        let r = decide(&files, "Vec2::dot", "--function", true).unwrap();
        assert_eq!(
            (r.raw.as_str(), r.address),
            ("_ZN3geo4Vec23dotERKS0_", 0x30)
        );
        assert_eq!(
            r.note.as_deref(),
            Some(
                "--function Vec2::dot: capturing geo::Vec2::dot(geo::Vec2 const&) \
                 [_ZN3geo4Vec23dotERKS0_] in /p/prog"
            )
        );
        assert!(decide(&files, "qsort", "--function", true)
            .unwrap()
            .note
            .is_none());
        let e = decide(&files, "*o*", "--function", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("3 functions match"), "{e}");
    }
}
