//! coldcache-symbols: makes a capture dump self-contained by resolving every
//! address it mentions (`Dump::addresses`) to inlined frames, function names
//! (demangled), source files and lines, and by copying each instruction's
//! bytes, into the dump's [`Symbols`] tables.
//!
//! For each module holding an address, [`resolve`] opens the module's file
//! (remapped or searched for when it moved), refuses it when its GNU build id
//! differs from the captured one ([`ModuleStatus::Mismatch`]), finds DWARF in
//! it or in a separate debug file, and maps each run-time address to the
//! address the ELF file states: run-time → file offset (through the
//! mapping's `file_offset`) → virtual address (through the `PT_LOAD` segment
//! holding that offset). This is right for PIE and non-PIE executables and
//! shared libraries alike. `addr2line` (one context per module) gives the
//! inline chain; without DWARF the symbol table names the function
//! ([`ModuleStatus::SymbolsOnly`]).
//!
//! [`resolve_dump`] also types the memory operand of every record
//! instruction from the module's DWARF (`data`, with `coldcache-types`)
//! into the dump's `DATA` section.
//!
//! [`embed_sources`] (`sources`) then copies the text of the line tables'
//! source files into the dump.
//!
//! [`functions`] finds a function by the name a person types (mangled,
//! demangled, a `::` suffix, a wildcard) in a program and its libraries,
//! before a capture (`coldcache record --function`).
//!
//! The file I/O is in `elf`, `sources` and `functions::read_functions`; the interning of files and functions and the
//! per-module counts ([`summarize`]) are pure.

#![warn(missing_docs)]

mod data;
mod elf;
pub mod functions;
mod sources;

pub use elf::{hex, ModuleError};
pub use sources::{embed_sources, SourceLimits, SourcesSummary};

use coldcache_dump::symbols::{NO_FILE, NO_MODULE};
use coldcache_dump::{Dump, Frame, Function, Location, ModuleStatus, ModuleSymbols, Symbols};
use std::collections::HashMap;
use std::path::PathBuf;

/// Where the resolver looks for binaries and their debug information.
#[derive(Clone, Debug)]
pub struct ResolveOptions {
    /// Directories searched for a module's file by its file name, after its
    /// recorded path (for binaries moved or copied elsewhere). A file found
    /// is used only when its build id matches the captured one.
    pub search: Vec<PathBuf>,
    /// `(prefix, replacement)` pairs: a module recorded under `prefix` is
    /// first looked for under `replacement` (`/build/out` → `/home/me/out`).
    pub remap: Vec<(String, PathBuf)>,
    /// Roots of separate debug files (default `/usr/lib/debug`): both
    /// `ROOT/.build-id/xx/rest.debug` and `ROOT/DIR/NAME` for a
    /// `.gnu_debuglink` NAME of a binary in DIR.
    pub debug_dirs: Vec<PathBuf>,
}

impl Default for ResolveOptions {
    fn default() -> Self {
        ResolveOptions {
            search: Vec::new(),
            remap: Vec::new(),
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
        }
    }
}

/// Interns files and functions while building [`Symbols`] (pure).
#[derive(Default)]
struct Builder {
    symbols: Symbols,
    files: HashMap<String, u32>,
    functions: HashMap<(String, u32, u64), u32>,
}

impl Builder {
    fn file(&mut self, path: &str) -> u32 {
        if let Some(&i) = self.files.get(path) {
            return i;
        }
        let i = self.symbols.files.len() as u32;
        self.symbols.files.push(path.to_string());
        self.files.insert(path.to_string(), i);
        i
    }

    /// Interns a function by (name, module, entry); `decl` is called only
    /// when it is new, for its declaring file and line.
    fn function(
        &mut self,
        name: &str,
        module: u32,
        entry: u64,
        decl: impl FnOnce() -> Option<(String, u32)>,
    ) -> u32 {
        let key = (name.to_string(), module, entry);
        if let Some(&i) = self.functions.get(&key) {
            return i;
        }
        let (file, line) = match decl() {
            Some((f, l)) => (self.file(&f), l),
            None => (NO_FILE, 0),
        };
        let i = self.symbols.functions.len() as u32;
        self.symbols.functions.push(Function {
            name: key.0.clone(),
            module,
            entry,
            file,
            line,
        });
        self.functions.insert(key, i);
        i
    }

    /// Copies a location of earlier tables, re-interning what it refers to.
    fn copy_from(&mut self, old: &Symbols, loc: &Location) -> Location {
        let frames = loc
            .frames
            .iter()
            .map(|f| {
                let of = old.functions.get(f.function as usize);
                let function = match of {
                    Some(of) => {
                        let decl = old.file(of.file).map(|p| (p.to_string(), of.line));
                        self.function(&of.name, of.module, of.entry, || decl)
                    }
                    None => self.function("??", NO_MODULE, 0, || None),
                };
                let file = match old.file(f.file) {
                    Some(p) => self.file(p),
                    None => NO_FILE,
                };
                Frame {
                    function,
                    file,
                    line: f.line,
                }
            })
            .collect();
        Location {
            addr: loc.addr,
            frames,
            code: loc.code.clone(),
        }
    }
}

/// Resolves every address of `dump` (see the crate documentation).
///
/// Never fails as a whole: what goes wrong with a module (file missing,
/// rebuilt, unreadable) is recorded in its [`ModuleSymbols`], and its
/// addresses get no frames. When `dump` already holds symbols, modules that
/// can no longer be read keep what the dump had for them (their detail says
/// so), so resolving again after deleting a binary loses nothing.
pub fn resolve(dump: &Dump, opts: &ResolveOptions) -> Symbols {
    resolve_with(dump, opts, None)
}

/// [`resolve`], and with `data`, the types of the record instructions of
/// each module opened (`data::Typing`).
fn resolve_with(
    dump: &Dump,
    opts: &ResolveOptions,
    mut data: Option<&mut data::Typing>,
) -> Symbols {
    let addrs = dump.addresses();
    let search = elf::Search {
        remap: &opts.remap,
        dirs: &opts.search,
        debug_dirs: &opts.debug_dirs,
    };
    // Addresses grouped by module (in address order).
    let mut by_module: Vec<Vec<u64>> = vec![Vec::new(); dump.modules.len()];
    let mut outside = Vec::new();
    for &a in &addrs {
        match dump.module_of(a) {
            Some(m) => by_module[m].push(a),
            None => outside.push(a),
        }
    }
    let mut b = Builder::default();
    b.symbols.modules = vec![ModuleSymbols::default(); dump.modules.len()];
    let mut locations: Vec<Location> = outside
        .iter()
        .map(|&addr| Location {
            addr,
            ..Location::default()
        })
        .collect();
    // One binary per distinct (path, build id), shared by its mappings.
    let mut binaries: HashMap<(&str, &[u8]), Result<elf::Binary, ModuleError>> = HashMap::new();
    let previous = dump.symbols.as_ref();
    for (mi, m) in dump.modules.iter().enumerate() {
        if by_module[mi].is_empty() {
            continue;
        }
        let key = (m.path.as_str(), m.build_id.as_slice());
        let bin = binaries
            .entry(key)
            .or_insert_with(|| elf::open(&m.path, &m.build_id, &search));
        match bin {
            Err(e) => {
                let kept = previous.and_then(|old| {
                    let om = old.modules.get(mi)?;
                    matches!(om.status, ModuleStatus::Lines | ModuleStatus::SymbolsOnly)
                        .then_some((old, om))
                });
                if let Some((old, om)) = kept {
                    for &a in &by_module[mi] {
                        let loc = match old.location(a) {
                            Some(l) => b.copy_from(old, l),
                            None => Location {
                                addr: a,
                                ..Location::default()
                            },
                        };
                        locations.push(loc);
                    }
                    b.symbols.modules[mi] = ModuleSymbols {
                        status: om.status,
                        detail: format!(
                            "{} (kept from an earlier resolution; now: {e})",
                            om.detail
                        ),
                    };
                    if let Some(t) = data.as_deref_mut() {
                        t.keep(dump, mi, &e.to_string());
                    }
                } else {
                    if let Some(t) = data.as_deref_mut() {
                        t.keep(dump, mi, &e.to_string());
                    }
                    locations.extend(by_module[mi].iter().map(|&addr| Location {
                        addr,
                        ..Location::default()
                    }));
                    b.symbols.modules[mi] = ModuleSymbols {
                        status: e.status(),
                        detail: e.to_string(),
                    };
                }
            }
            Ok(bin) => {
                let (status, detail) = match &bin.dwarf {
                    Some((_, p)) => (ModuleStatus::Lines, format!("DWARF from {}", p.display())),
                    None => (
                        ModuleStatus::SymbolsOnly,
                        if bin.symbols.is_empty() {
                            format!(
                                "{}: no debug info and no symbol table: nothing names its functions",
                                bin.path.display()
                            )
                        } else {
                            format!("{} (names from the {})", bin.note, bin.symbols.source)
                        },
                    ),
                };
                b.symbols.modules[mi] = ModuleSymbols { status, detail };
                let first = locations.len();
                for &a in &by_module[mi] {
                    locations.push(resolve_one(&mut b, bin, mi as u32, m, a));
                }
                if let Some(t) = data.as_deref_mut() {
                    t.module(mi, m, bin, &locations[first..]);
                }
            }
        }
    }
    locations.sort_unstable_by_key(|l| l.addr);
    b.symbols.locations = locations;
    b.symbols
}

/// Resolves `dump` and stores the result in it ([`resolve`], then
/// `dump.symbols = Some(..)`), with the types and fields of its record
/// instructions' memory operands (`dump.data`, from DWARF: see `data`).
pub fn resolve_dump(dump: &mut Dump, opts: &ResolveOptions) {
    let mut typing = data::Typing::new(dump);
    let s = resolve_with(dump, opts, Some(&mut typing));
    dump.data = Some(typing.finish());
    dump.symbols = Some(s);
    // The globals' names as the symbol tables spell them, demangled (a
    // name that is not mangled is kept, so resolving again changes none).
    if let Some(g) = dump.objects.as_mut().and_then(|o| o.globals.as_mut()) {
        for row in &mut g.rows {
            if is_mangled(&row.name) {
                row.name = demangle(&row.name);
            }
        }
    }
}

/// Resolves one address of module `mi` (mapping `m`) in `bin`.
fn resolve_one(
    b: &mut Builder,
    bin: &elf::Binary,
    mi: u32,
    m: &coldcache_dump::Module,
    addr: u64,
) -> Location {
    let mut loc = Location {
        addr,
        ..Location::default()
    };
    let Some(off) = (addr - m.start).checked_add(m.file_offset) else {
        return loc;
    };
    let Some((vaddr, seg)) = bin.file_to_vaddr(off) else {
        return loc;
    };
    loc.code = instruction_bytes(&bin.data, off, seg.offset.saturating_add(seg.filesz), addr);
    // Run-time address of a stated address in the same segment.
    let runtime = |v: u64| addr.wrapping_sub(vaddr).wrapping_add(v);
    // A clone part (`f.cold`, `f.part.N`, `f.isra.N`, `f.constprop.N`,
    // `f.lto_priv.N` and combinations) belongs to `f`: its function is f's
    // (f's entry, f's name), the rule `--function` finds it by
    // (`functions::clone_ancestor`). `owner` is the symbol that names it.
    let sym = bin.symbols.find(vaddr).map(|s| {
        let owner = functions::clone_ancestor(&s.name, |p| bin.symbols.by_name(p).is_some())
            .and_then(|p| bin.symbols.by_name(p))
            .unwrap_or(s);
        (owner, owner.addr)
    });
    let decl = |entry_vaddr: u64| -> Option<(String, u32)> {
        let (l, _) = bin.dwarf.as_ref()?;
        let loc = l.find_location(entry_vaddr).ok()??;
        Some((loc.file?.to_string(), loc.line.unwrap_or(0)))
    };
    if let Some((loader, _)) = &bin.dwarf {
        // (name, file, line) innermost first.
        let mut raw: Vec<(Option<String>, Option<String>, u32)> = Vec::new();
        let mut outer_mangled = false;
        if let Ok(mut it) = loader.find_frames(vaddr) {
            while let Ok(Some(f)) = it.next() {
                outer_mangled = f
                    .function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok())
                    .is_some_and(|r| is_mangled(&r));
                let name = f.function.as_ref().map(|n| match n.demangle() {
                    Ok(s) if !is_mangled(&s) => s.into_owned(),
                    _ => demangle(&n.raw_name().unwrap_or_default()),
                });
                let (file, line) = match &f.location {
                    Some(l) => (l.file.map(str::to_string), l.line.unwrap_or(0)),
                    None => (None, 0),
                };
                raw.push((name, file, line));
            }
        }
        if raw.iter().any(|r| r.0.is_some()) {
            let n = raw.len();
            for (i, (name, file, line)) in raw.into_iter().enumerate() {
                let outermost = i + 1 == n;
                let entry_v = sym.map(|(_, e)| e).filter(|_| outermost);
                // Like binutils: when DWARF names the real function without
                // its linkage name (C++ functions in an anonymous namespace),
                // the symbol table's mangled name says more.
                let name = match (outermost && !outer_mangled, sym) {
                    (true, Some((s, _))) if is_mangled(&s.name) => demangle(&s.name),
                    _ => name.unwrap_or_else(|| "??".into()),
                };
                let function = match entry_v {
                    Some(ev) => b.function(&name, mi, runtime(ev), || decl(ev)),
                    None => b.function(&name, mi, 0, || None),
                };
                let file = file.map_or(NO_FILE, |f| b.file(&f));
                loc.frames.push(Frame {
                    function,
                    file,
                    line,
                });
            }
            return loc;
        }
        // DWARF has no function here (startup code, assembly, PLT): the
        // symbol names it, the line table may still place it.
        let named = sym
            .map(|(s, ev)| (demangle(&s.name), ev))
            .or_else(|| bin.plt.find(vaddr).map(|p| (p.name.clone(), p.addr)));
        if let Some((name, ev)) = named {
            let function = b.function(&name, mi, runtime(ev), || decl(ev));
            let (file, line) = match raw.first() {
                Some((_, Some(f), l)) => (b.file(f), *l),
                _ => (NO_FILE, 0),
            };
            loc.frames.push(Frame {
                function,
                file,
                line,
            });
        }
        return loc;
    }
    let named = sym
        .map(|(s, _)| (demangle(&s.name), s.addr))
        .or_else(|| bin.plt.find(vaddr).map(|p| (p.name.clone(), p.addr)));
    if let Some((name, ev)) = named {
        let function = b.function(&name, mi, runtime(ev), || None);
        loc.frames.push(Frame {
            function,
            file: NO_FILE,
            line: 0,
        });
    }
    loc
}

/// Whether a symbol name is mangled (C++ Itanium or Rust v0/legacy).
fn is_mangled(name: &str) -> bool {
    name.starts_with("_Z") || name.starts_with("_R")
}

/// Demangles a symbol name (C++ `_Z…`, Rust `_R…`/legacy), or returns it:
/// `rustc-demangle` and `cpp_demangle` (through addr2line), then, for the
/// C++ names `cpp_demangle` cannot parse (some template expressions,
/// `srSt…`), the C++ runtime's own `abi::__cxa_demangle`, which is what
/// `c++filt` uses.
pub fn demangle(name: &str) -> String {
    let d = addr2line::demangle_auto(std::borrow::Cow::Borrowed(name), None);
    if !d.starts_with("_Z") {
        return d.into_owned();
    }
    cxa::demangle(name).unwrap_or_else(|| name.to_string())
}

/// `abi::__cxa_demangle` from libstdc++.
mod cxa {
    use std::ffi::{c_char, c_int, c_void, CStr, CString};

    #[link(name = "stdc++")]
    unsafe extern "C" {
        fn __cxa_demangle(
            mangled: *const c_char,
            buf: *mut c_char,
            len: *mut usize,
            status: *mut c_int,
        ) -> *mut c_char;
    }
    unsafe extern "C" {
        fn free(p: *mut c_void);
    }

    pub fn demangle(name: &str) -> Option<String> {
        let c = CString::new(name).ok()?;
        let mut status: c_int = -1;
        // SAFETY: a NUL-terminated input, no caller buffer (the function
        // allocates with malloc), a valid status pointer; the result is
        // copied, then freed with free(3) as the ABI requires.
        unsafe {
            let p = __cxa_demangle(
                c.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut status,
            );
            if p.is_null() {
                return None;
            }
            let s = (status == 0).then(|| CStr::from_ptr(p).to_string_lossy().into_owned());
            free(p.cast());
            s
        }
    }
}

/// The bytes of the instruction at file offset `off` (run-time address
/// `addr`), not reading past `limit`: decoded as x86-64 to find its length;
/// empty when they do not decode.
fn instruction_bytes(data: &[u8], off: u64, limit: u64, addr: u64) -> Vec<u8> {
    let end = off
        .saturating_add(coldcache_dump::symbols::MAX_CODE as u64)
        .min(limit)
        .min(data.len() as u64);
    if off >= end {
        return Vec::new();
    }
    let bytes = &data[off as usize..end as usize];
    let mut d = iced_x86::Decoder::with_ip(64, bytes, addr, iced_x86::DecoderOptions::NONE);
    let ins = d.decode();
    if ins.is_invalid() {
        return Vec::new();
    }
    bytes[..ins.len()].to_vec()
}

/// How one module's addresses resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleSummary {
    /// Index into `Dump::modules`.
    pub module: usize,
    /// The module's path.
    pub path: String,
    /// Status and detail.
    pub status: ModuleStatus,
    /// The detail string.
    pub detail: String,
    /// Addresses with a source file and line.
    pub lines: usize,
    /// Addresses with a function name but no line.
    pub names_only: usize,
    /// Addresses with nothing.
    pub nothing: usize,
}

/// Per-module counts of a resolved dump (modules without addresses are
/// left out), and the number of addresses outside every module.
pub fn summarize(dump: &Dump) -> (Vec<ModuleSummary>, usize) {
    let Some(s) = &dump.symbols else {
        return (Vec::new(), 0);
    };
    let mut out: Vec<Option<ModuleSummary>> = vec![None; dump.modules.len()];
    let mut outside = 0;
    for l in &s.locations {
        let Some(mi) = dump.module_of(l.addr) else {
            outside += 1;
            continue;
        };
        let e = out[mi].get_or_insert_with(|| ModuleSummary {
            module: mi,
            path: dump.modules[mi].path.clone(),
            status: s.modules.get(mi).map(|m| m.status).unwrap_or_default(),
            detail: s
                .modules
                .get(mi)
                .map(|m| m.detail.clone())
                .unwrap_or_default(),
            lines: 0,
            names_only: 0,
            nothing: 0,
        });
        match l.frames.first() {
            Some(f) if f.file != NO_FILE && f.line != 0 => e.lines += 1,
            Some(_) => e.names_only += 1,
            None => e.nothing += 1,
        }
    }
    (out.into_iter().flatten().collect(), outside)
}
