//! Symbol resolution (`coldcache resolve`, and `record`'s automatic one)
//! against binutils as the independent truth: programs from
//! `tests-programs/symbols/` are built with gcc/g++ and captured with
//! `coldcache record --function`, then every resolved address is compared
//! with `addr2line -a -f -i -C -e BIN`, names with `c++filt` and `nm`.
//! Also: a stripped binary (names only), a deleted binary (the dump keeps
//! its symbols), a rebuilt binary (reported, not used), libc.
//!
//! Skipped with a message when gcc, g++ or binutils are missing.

use coldcache_dump::symbols::NO_FILE;
use coldcache_dump::{Dump, ModuleStatus, Symbols};
use object::{Object, ObjectSegment};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use dumps::load;
use library::{have, library, COLDCACHE};
use programs::succeed;

fn tools_or_skip(test: &str) -> bool {
    let ok = [
        "gcc",
        "g++",
        "addr2line",
        "nm",
        "c++filt",
        "strip",
        "objdump",
    ]
    .iter()
    .all(|t| have(t));
    if !ok {
        eprintln!("SKIP {test}: gcc, g++ or binutils missing");
    }
    ok
}

/// A fresh directory per test.
fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("coldcache-resolve-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `source` (`.cpp` with g++, else gcc) built with `flags` into `out`.
fn build(source: &str, flags: &[&str], out: &Path) {
    programs::compile(source, out, flags, false);
}

/// `coldcache record --function FUNCTION [extra] -- BIN`; returns the dump
/// path and the command's stderr.
fn record(bin: &Path, function: &str, extra: &[&str]) -> (PathBuf, String) {
    let dir = bin.parent().unwrap();
    let dump = dir.join(format!(
        "{}.ccdump",
        bin.file_name().unwrap().to_str().unwrap()
    ));
    let mut cmd = Command::new(COLDCACHE);
    cmd.env("COLDCACHE_LIB", library())
        .current_dir(dir)
        .args(["record", "--function", function, "-o"])
        .arg(&dump)
        .args(extra)
        .arg("--")
        .arg(bin);
    let out = succeed(cmd);
    (dump, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn resolve(dump: &Path, extra: &[&str]) -> String {
    let mut cmd = Command::new(COLDCACHE);
    cmd.arg("resolve").arg(dump).args(extra);
    String::from_utf8_lossy(&succeed(cmd).stderr).into_owned()
}

/// Index of the module whose path is `bin`.
fn module(d: &Dump, bin: &Path) -> usize {
    let want = bin.canonicalize().unwrap();
    d.modules
        .iter()
        .position(|m| Path::new(&m.path).canonicalize().ok().as_deref() == Some(&want))
        .unwrap_or_else(|| panic!("no module {} in {:?}", bin.display(), d.modules))
}

/// The ELF virtual address (what binutils takes) of run-time `addr` in
/// module `mi`, computed independently from the file's program headers.
fn file_address(d: &Dump, mi: usize, data: &[u8], addr: u64) -> Option<u64> {
    let m = &d.modules[mi];
    let off = addr - m.start + m.file_offset;
    let obj = object::File::parse(data).unwrap();
    obj.segments().find_map(|s| {
        let (o, size) = s.file_range();
        (o <= off && off < o + size).then(|| s.address() + off - o)
    })
}

/// Frames of a location as (function, file, line), innermost first.
fn frames(s: &Symbols, addr: u64) -> Vec<(String, String, u32)> {
    s.location(addr)
        .unwrap_or_else(|| panic!("{addr:#x} not resolved"))
        .frames
        .iter()
        .map(|f| {
            (
                s.functions[f.function as usize].name.clone(),
                if f.file == NO_FILE {
                    "??".to_string()
                } else {
                    s.files[f.file as usize].clone()
                },
                f.line,
            )
        })
        .collect()
}

/// `objdump -d -C`'s labels of PLT stubs (`getenv@plt`), by address.
fn objdump_plt_labels(bin: &Path) -> Vec<(u64, String)> {
    let mut cmd = Command::new("objdump");
    cmd.args(["-d", "-C", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got"])
        .arg(bin);
    let text = String::from_utf8(succeed(cmd).stdout).unwrap();
    let mut v: Vec<(u64, String)> = text
        .lines()
        .filter_map(|l| {
            let (addr, rest) = l.split_once(" <")?;
            let name = rest.strip_suffix(">:")?;
            Some((u64::from_str_radix(addr, 16).ok()?, name.to_string()))
        })
        .collect();
    v.sort();
    v
}

/// binutils: `addr2line -a -f -i -C -e BIN` frames of each address.
fn binutils_frames(bin: &Path, addrs: &[u64]) -> HashMap<u64, Vec<(String, String, u32)>> {
    let mut cmd = Command::new("addr2line");
    cmd.args(["-a", "-f", "-i", "-C", "-e"]).arg(bin);
    for a in addrs {
        cmd.arg(format!("{a:#x}"));
    }
    let text = String::from_utf8(succeed(cmd).stdout).unwrap();
    let mut out: HashMap<u64, Vec<(String, String, u32)>> = HashMap::new();
    let mut lines = text.lines();
    let mut cur = 0u64;
    while let Some(l) = lines.next() {
        if let Some(hex) = l.strip_prefix("0x") {
            cur = u64::from_str_radix(hex, 16).unwrap();
            out.entry(cur).or_default();
            continue;
        }
        let func = l.to_string();
        let loc = lines.next().expect("a location after a function");
        let loc = loc.split(" (discriminator").next().unwrap();
        let (file, line) = loc.rsplit_once(':').unwrap();
        let line = line.parse().unwrap_or(0);
        out.get_mut(&cur)
            .unwrap()
            .push((func, file.to_string(), line));
    }
    out
}

fn inline_program(dir: &Path) -> PathBuf {
    let bin = dir.join("inline");
    build("tests-programs/symbols/inline.c", &["-O2", "-g"], &bin);
    bin
}

/// Compares the frames of every address of module `mi` with binutils'
/// `addr2line -f -i -C` on `bin` (which follows build-id and debuglink
/// debug files as we do). Returns (addresses compared, most frames of a
/// record address). With `files` false, source files are left out of the
/// comparison (see the libc test).
fn compare_with_binutils(d: &Dump, mi: usize, bin: &Path, files: bool) -> (usize, usize) {
    let s = d.symbols.as_ref().expect("symbols embedded");
    let data = std::fs::read(bin).unwrap();
    let addrs: Vec<u64> = d
        .addresses()
        .into_iter()
        .filter(|&a| d.module_of(a) == Some(mi))
        .collect();
    let record_ips: std::collections::HashSet<u64> = d.records.iter().map(|r| r.ip).collect();
    let fa: Vec<u64> = addrs
        .iter()
        .map(|&a| file_address(d, mi, &data, a).unwrap())
        .collect();
    let truth = binutils_frames(bin, &fa);
    let plt = objdump_plt_labels(bin);
    let mut deepest = 0;
    let mut compared = 0;
    for (&a, f) in addrs.iter().zip(&fa) {
        let mut ours = frames(s, a);
        let mut theirs = truth[f].clone();
        if !files {
            for f in ours.iter_mut().chain(theirs.iter_mut()) {
                f.1.clear();
            }
        }
        if let [(name, file, 0)] = ours.as_slice() {
            if name == ".plt" {
                // The lazy-binding trampoline: objdump labels it `.plt`
                // (with .plt.sec) or after the next stub (`free@plt-0x10`).
                assert_eq!(theirs[0].0, "??", "{a:#x}");
                let label = plt.iter().rev().find(|(at, _)| at <= f).map(|l| &l.1);
                assert!(
                    label.is_some_and(|l| l == ".plt" || l.contains("@plt-0x")),
                    "{a:#x} ({f:#x}) in PLT0: objdump {label:?}"
                );
                compared += 1;
                continue;
            }
            if name.ends_with("@plt") {
                // PLT stubs: binutils addr2line has no name, objdump has.
                assert!(!files || file == "??");
                assert_eq!(theirs[0].0, "??", "{a:#x}");
                let label = plt.iter().rev().find(|(at, _)| at <= f).map(|l| &l.1);
                assert_eq!(label, Some(name), "{a:#x} ({f:#x}) in the PLT");
                compared += 1;
                continue;
            }
        }
        if ours.is_empty() {
            // Only code no symbol covers (the PLT): binutils has no name either.
            assert_eq!(theirs.len(), 1, "{a:#x}");
            assert_eq!(
                theirs[0].0, "??",
                "{a:#x} ({f:#x}): we found nothing, binutils {theirs:?}"
            );
            continue;
        }
        assert_eq!(
            ours,
            theirs,
            "address {a:#x} (file address {f:#x}) of {}",
            bin.display()
        );
        if record_ips.contains(&a) {
            deepest = deepest.max(ours.len());
        }
        compared += 1;
    }
    (compared, deepest)
}

#[test]
fn inlined_frames_equal_binutils_addr2line() {
    if !tools_or_skip("inlined_frames_equal_binutils_addr2line") {
        return;
    }
    let dir = scratch("inline");
    let bin = inline_program(&dir);
    let (dump, err) = record(&bin, "work", &[]);
    assert!(err.contains("symbols of"), "record resolves: {err}");
    let d = load(&dump);
    let s = d.symbols.as_ref().expect("record embedded symbols");
    let mi = module(&d, &bin);
    assert_eq!(
        s.modules[mi].status,
        ModuleStatus::Lines,
        "{:?}",
        s.modules[mi]
    );
    let (compared, deepest) = compare_with_binutils(&d, mi, &bin, true);
    assert!(compared > 30, "only {compared} addresses compared");
    assert!(
        deepest >= 3,
        "square() inlined into sum_squares() inlined into work() should give 3 frames"
    );
    let data = std::fs::read(&bin).unwrap();
    // work is an out-of-line function with its symbol's address as entry.
    let work = s
        .functions
        .iter()
        .find(|f| f.name == "work" && f.entry != 0)
        .expect("work is an out-of-line function");
    assert_eq!(
        file_address(&d, mi, &data, work.entry),
        Some(nm_symbols(&bin, false)["work"].0)
    );
    // Instruction bytes are the file's.
    let m = &d.modules[mi];
    let mut with_code = 0;
    for r in d.records.iter().filter(|r| d.module_of(r.ip) == Some(mi)) {
        let l = s.location(r.ip).unwrap();
        let off = (r.ip - m.start + m.file_offset) as usize;
        assert!(!l.code.is_empty(), "{:#x} has no bytes", l.addr);
        assert_eq!(&data[off..off + l.code.len()], &l.code[..]);
        with_code += 1;
    }
    assert!(with_code > 30);
}

/// `nm` (or `nm -D`) of a binary: name → (address, size).
fn nm_symbols(bin: &Path, dynamic: bool) -> HashMap<String, (u64, u64)> {
    let mut cmd = Command::new("nm");
    cmd.args(["-S", "--defined-only"]);
    if dynamic {
        cmd.arg("-D");
    }
    cmd.arg(bin);
    let text = String::from_utf8(succeed(cmd).stdout).unwrap();
    let mut m = HashMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 4 && "TtWwi".contains(f[2]) {
            let name = f[3].split('@').next().unwrap().to_string();
            let addr = u64::from_str_radix(f[0], 16).unwrap();
            let size = u64::from_str_radix(f[1], 16).unwrap();
            m.insert(name, (addr, size));
        } else if f.len() == 3 && "TtWwi".contains(f[1]) {
            let addr = u64::from_str_radix(f[0], 16).unwrap();
            m.entry(f[2].to_string()).or_insert((addr, 0));
        }
    }
    m
}

#[test]
fn cpp_names_equal_cxxfilt() {
    if !tools_or_skip("cpp_names_equal_cxxfilt") {
        return;
    }
    let dir = scratch("cpp");
    let bin = dir.join("names");
    build("tests-programs/symbols/names.cpp", &["-O2", "-g"], &bin);
    let (dump, _) = record(&bin, "run", &[]);
    let d = load(&dump);
    let s = d.symbols.as_ref().unwrap();
    let mi = module(&d, &bin);
    assert_eq!(s.modules[mi].status, ModuleStatus::Lines);
    let (compared, _) = compare_with_binutils(&d, mi, &bin, true);
    assert!(compared > 30, "only {compared} addresses compared");
    let data = std::fs::read(&bin).unwrap();
    // Mangled names by address, from nm; demangled by c++filt.
    let nm = nm_symbols(&bin, false);
    let mut by_addr: HashMap<u64, Vec<String>> = HashMap::new();
    for (n, (a, _)) in &nm {
        by_addr.entry(*a).or_default().push(n.clone());
    }
    let mangled: Vec<&String> = nm.keys().collect();
    let mut child = Command::new("c++filt")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = mangled.iter().map(|m| format!("{m}\n")).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
    let demangled: HashMap<&str, &str> = mangled
        .iter()
        .map(|m| m.as_str())
        .zip(out.lines())
        .collect();
    let mut checked = Vec::new();
    for f in s.functions.iter().filter(|f| {
        f.entry != 0 && f.module as usize == mi && !f.name.ends_with("@plt") && f.name != ".plt"
    }) {
        let fa = file_address(&d, mi, &data, f.entry).unwrap();
        let names: Vec<&str> = by_addr
            .get(&fa)
            .map(|v| v.iter().map(|m| demangled[m.as_str()]).collect())
            .unwrap_or_default();
        assert!(
            names.contains(&f.name.as_str()),
            "{} at {fa:#x}: c++filt says {names:?}",
            f.name
        );
        checked.push(f.name.clone());
    }
    for want in [
        "geo::Vec2::operator+(geo::Vec2 const&) const",
        "geo::Vec2::dot(geo::Vec2 const&) const",
        "geo::(anonymous namespace)::scale(int, int)",
        "geo::(anonymous namespace)::scale(long)",
        "run",
    ] {
        assert!(
            checked.iter().any(|n| n == want),
            "{want} not among {checked:?}"
        );
    }
    assert!(
        checked.iter().any(|n| n.contains("geo::total<geo::Vec2>")),
        "template instance missing from {checked:?}"
    );
}

#[test]
fn stripped_binary_gives_names_from_the_symbol_table() {
    if !tools_or_skip("stripped_binary_gives_names_from_the_symbol_table") {
        return;
    }
    let dir = scratch("stripped");
    let bin = inline_program(&dir);
    succeed({
        let mut c = Command::new("strip");
        c.arg("--strip-debug").arg(&bin);
        c
    });
    let (dump, err) = record(&bin, "work", &[]);
    assert!(
        err.contains("no debug info: function names only"),
        "the CLI must say line info is missing: {err}"
    );
    let d = load(&dump);
    let s = d.symbols.as_ref().unwrap();
    let mi = module(&d, &bin);
    assert_eq!(
        s.modules[mi].status,
        ModuleStatus::SymbolsOnly,
        "{:?}",
        s.modules[mi]
    );
    let data = std::fs::read(&bin).unwrap();
    let nm = nm_symbols(&bin, false);
    let plt = objdump_plt_labels(&bin);
    let mut named = 0;
    for l in s
        .locations
        .iter()
        .filter(|l| d.module_of(l.addr) == Some(mi))
    {
        let fa = file_address(&d, mi, &data, l.addr).unwrap();
        let covering: Vec<&String> = nm
            .iter()
            .filter(|(_, &(a, size))| a <= fa && fa < a + size.max(1))
            .map(|(n, _)| n)
            .collect();
        match l.frames.as_slice() {
            [] => assert!(
                covering.is_empty(),
                "{fa:#x}: nm has {covering:?}, we have nothing"
            ),
            [f] => {
                assert_eq!(f.file, NO_FILE);
                assert_eq!(f.line, 0);
                let name = &s.functions[f.function as usize].name;
                if name.ends_with("@plt") {
                    let label = plt.iter().rev().find(|(at, _)| *at <= fa).map(|l| &l.1);
                    assert_eq!(label, Some(name), "{fa:#x} in the PLT");
                    continue;
                }
                if name == ".plt" {
                    // PLT0: objdump's `.plt`, or `free@plt-0x10`.
                    let label = plt.iter().rev().find(|(at, _)| *at <= fa).map(|l| &l.1);
                    assert!(
                        label.is_some_and(|l| l == ".plt" || l.contains("@plt-0x")),
                        "{fa:#x} in PLT0: objdump {label:?}"
                    );
                    continue;
                }
                assert!(
                    covering.contains(&name),
                    "{fa:#x}: we say {name}, nm says {covering:?}"
                );
                named += 1;
            }
            more => panic!("{fa:#x}: {} frames without debug info", more.len()),
        }
    }
    assert!(named > 20);
    assert!(d
        .records
        .iter()
        .any(|r| frames(s, r.ip).iter().any(|f| f.0 == "work")));
}

#[test]
fn symbols_survive_the_binary_being_deleted() {
    if !tools_or_skip("symbols_survive_the_binary_being_deleted") {
        return;
    }
    let dir = scratch("deleted");
    let bin = inline_program(&dir);
    let (dump, _) = record(&bin, "work", &[]);
    let mi = module(&load(&dump), &bin);
    std::fs::remove_file(&bin).unwrap();
    let check = |d: &Dump| {
        let s = d.symbols.as_ref().unwrap();
        assert_eq!(
            s.modules[mi].status,
            ModuleStatus::Lines,
            "{:?}",
            s.modules[mi]
        );
        let work: Vec<_> = d
            .records
            .iter()
            .filter(|r| d.module_of(r.ip) == Some(mi))
            .map(|r| frames(s, r.ip))
            .filter(|f| f.last().is_some_and(|f| f.0 == "work"))
            .collect();
        assert!(work.len() > 10);
        assert!(work
            .iter()
            .all(|f| f.last().unwrap().1.ends_with("inline.c") && f.last().unwrap().2 > 0));
    };
    check(&load(&dump));
    // Resolving again without the binary keeps what the dump had.
    let err = resolve(&dump, &[]);
    assert!(err.contains("kept from an earlier resolution"), "{err}");
    check(&load(&dump));
}

#[test]
fn a_rebuilt_binary_is_reported_not_used() {
    if !tools_or_skip("a_rebuilt_binary_is_reported_not_used") {
        return;
    }
    let dir = scratch("rebuilt");
    let bin = inline_program(&dir);
    let (dump, _) = record(&bin, "work", &["--no-resolve"]);
    assert!(
        load(&dump).symbols.is_none(),
        "--no-resolve leaves it unresolved"
    );
    let keep = dir.join("original");
    std::fs::create_dir(&keep).unwrap();
    std::fs::copy(&bin, keep.join("inline")).unwrap();
    // Same source, other flags: another build id.
    build("tests-programs/symbols/inline.c", &["-O1", "-g"], &bin);
    let err = resolve(&dump, &[]);
    assert!(err.contains("was rebuilt since the capture"), "{err}");
    let d = load(&dump);
    let s = d.symbols.as_ref().unwrap();
    let mi = module(&d, &bin);
    assert_eq!(s.modules[mi].status, ModuleStatus::Mismatch);
    for l in s
        .locations
        .iter()
        .filter(|l| d.module_of(l.addr) == Some(mi))
    {
        assert!(
            l.frames.is_empty() && l.code.is_empty(),
            "{:#x} named from the wrong binary",
            l.addr
        );
    }
    // With the original found by --search, it resolves.
    let out = dir.join("resolved.ccdump");
    let err = resolve(
        &dump,
        &[
            "--search",
            keep.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    let d = load(&out);
    let s = d.symbols.as_ref().unwrap();
    assert_eq!(s.modules[mi].status, ModuleStatus::Lines, "{err}");
    assert!(s.modules[mi].detail.contains("original"), "{err}");
    // And with the directory remapped.
    let out = dir.join("remapped.ccdump");
    let remap = format!("{}={}", dir.display(), keep.display());
    let err = resolve(&dump, &["--remap", &remap, "-o", out.to_str().unwrap()]);
    let d = load(&out);
    let s = d.symbols.as_ref().unwrap();
    assert_eq!(s.modules[mi].status, ModuleStatus::Lines, "{err}");
    assert!(s.modules[mi].detail.contains("original"), "{err}");
}

#[test]
fn libc_addresses_resolve_to_libc_symbols() {
    if !tools_or_skip("libc_addresses_resolve_to_libc_symbols") {
        return;
    }
    let dir = scratch("libc");
    let bin = inline_program(&dir);
    let (dump, _) = record(&bin, "work", &["--no-resolve"]);
    let d = load(&dump);
    let li = d
        .modules
        .iter()
        .position(|m| m.path.contains("/libc.so"))
        .expect("libc mapped");
    let libc = PathBuf::from(&d.modules[li].path);
    let data = std::fs::read(&libc).unwrap();
    let nm = nm_symbols(&libc, true);
    let plt = objdump_plt_labels(&libc);
    // Twice: with whatever debug files the system has, and with none
    // (names from .dynsym only).
    for extra in [&[][..], &["--debug-dir", "/nonexistent"][..]] {
        let out = dir.join("libc.ccdump");
        let mut args = extra.to_vec();
        args.extend(["-o", out.to_str().unwrap()]);
        let err = resolve(&dump, &args);
        let d = load(&out);
        let s = d.symbols.as_ref().unwrap();
        assert!(
            matches!(
                s.modules[li].status,
                ModuleStatus::Lines | ModuleStatus::SymbolsOnly
            ),
            "{err}"
        );
        if s.modules[li].status == ModuleStatus::Lines {
            // Files left out: for some functions defined in headers,
            // binutils 2.40 names the including .c file where the line
            // table (`objdump --dwarf=decodedline`) says the header
            // (__libc_start_call_main, libc_start_call_main.h:58).
            let (compared, _) = compare_with_binutils(&d, li, &libc, false);
            assert!(compared > 30, "only {compared} libc addresses compared");
        }
        let mut getenv = 0;
        for l in s
            .locations
            .iter()
            .filter(|l| d.module_of(l.addr) == Some(li))
        {
            let Some(last) = l.frames.last() else {
                continue;
            };
            let name = &s.functions[last.function as usize].name;
            let fa = file_address(&d, li, &data, l.addr).unwrap();
            if name == "getenv" || name == "__GI_getenv" {
                let (a, size) = nm["getenv"];
                assert!(a <= fa && fa < a + size, "{fa:#x} is not in nm's getenv");
                getenv += 1;
            }
            if name.ends_with("@plt") {
                let label = plt.iter().rev().find(|(at, _)| *at <= fa).map(|l| &l.1);
                assert_eq!(label, Some(name), "{fa:#x} in libc's PLT");
            } else if s.modules[li].status == ModuleStatus::SymbolsOnly {
                let (a, size) = *nm
                    .get(name)
                    .unwrap_or_else(|| panic!("{name} is not a dynamic symbol of libc"));
                assert!(
                    a <= fa && fa < a + size.max(1),
                    "{name} does not cover {fa:#x}"
                );
            }
        }
        assert!(getenv > 0, "no getenv address in libc:\n{err}");
    }
}

#[test]
fn separate_debug_files_by_debuglink_and_build_id() {
    if !tools_or_skip("separate_debug_files_by_debuglink_and_build_id") || !have("objcopy") {
        return;
    }
    let dir = scratch("debugfile");
    let full = inline_program(&dir);
    let dbg = dir.join("inline.debug");
    let tool = |args: &[&str]| {
        let mut c = Command::new(args[0]);
        c.args(&args[1..]).current_dir(&dir);
        succeed(c);
    };
    tool(&["objcopy", "--only-keep-debug", "inline", "inline.debug"]);
    tool(&["strip", "--strip-debug", "inline"]);
    tool(&["objcopy", "--add-gnu-debuglink=inline.debug", "inline"]);
    let (dump, err) = record(&full, "work", &[]);
    let d = load(&dump);
    let mi = module(&d, &full);
    let s = d.symbols.as_ref().unwrap();
    assert_eq!(s.modules[mi].status, ModuleStatus::Lines, "{err}");
    assert!(s.modules[mi].detail.ends_with("inline.debug"), "{err}");
    // binutils follows the debuglink too.
    let (compared, deepest) = compare_with_binutils(&d, mi, &full, true);
    assert!(compared > 30 && deepest >= 3);

    // By build id under a debug root, the debuglink's file gone.
    let id = coldcache_symbols::hex(&d.modules[mi].build_id);
    let root = dir.join("debugroot");
    let at = root.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::rename(&dbg, at.join(format!("{}.debug", &id[2..]))).unwrap();
    let out = dir.join("byid.ccdump");
    let err = resolve(
        &dump,
        &[
            "--debug-dir",
            root.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    let d2 = load(&out);
    let s2 = d2.symbols.as_ref().unwrap();
    assert_eq!(s2.modules[mi].status, ModuleStatus::Lines, "{err}");
    assert!(s2.modules[mi].detail.contains(".build-id"), "{err}");
    for l in s
        .locations
        .iter()
        .filter(|l| d.module_of(l.addr) == Some(mi))
    {
        assert_eq!(
            frames(s2, l.addr),
            frames(s, l.addr),
            "same frames from the same debug info"
        );
        assert_eq!(s2.location(l.addr).unwrap().code, l.code);
    }
}
