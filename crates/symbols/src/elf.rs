//! Opening one module's binary: finding the file (original path, remapped
//! prefixes, search directories), checking its GNU build id against the one
//! captured, finding its DWARF (in the file, or a separate debug file under
//! `.build-id` or named by `.gnu_debuglink`), its `PT_LOAD` segments and its
//! function symbols (`.symtab`, else `.dynsym`).
//!
//! Everything here reads files; the address arithmetic it offers
//! ([`Binary::file_to_vaddr`]) is plain.

use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget, SectionKind,
    SymbolKind,
};
use std::path::{Path, PathBuf};

/// Why a module's binary could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// The mapping is not a file (`[vdso]`, anonymous or JIT memory).
    #[error("{0} is not a file")]
    NotAFile(String),
    /// No candidate file could be opened.
    #[error("cannot read {path}: {source}{searched}")]
    Unreadable {
        /// The module's path as captured.
        path: String,
        /// The error opening it.
        source: std::io::Error,
        /// Other places looked at, already formatted (`" (also searched …)"`).
        searched: String,
    },
    /// The file is not an ELF file this tool can read.
    #[error("{path} is not a readable ELF file: {what}")]
    NotElf {
        /// The file.
        path: String,
        /// What the parser said.
        what: String,
    },
    /// The file on disk has another build id than the one captured.
    #[error(
        "{path} was rebuilt since the capture: build id {recorded} was captured, \
         {found} is on disk; names are not taken from it (pass --search DIR with \
         the original binary)"
    )]
    Mismatch {
        /// The file found.
        path: String,
        /// Build id captured, hex.
        recorded: String,
        /// Build id of the file, hex (`none` when it has none).
        found: String,
    },
}

impl ModuleError {
    /// The dump status this error stands for.
    pub fn status(&self) -> coldcache_dump::ModuleStatus {
        match self {
            ModuleError::Mismatch { .. } => coldcache_dump::ModuleStatus::Mismatch,
            _ => coldcache_dump::ModuleStatus::NotFound,
        }
    }
}

/// Reads a binary or debug file: a regular file only, at most
/// `coldcache_fsio::elf::MAX_ELF_FILE` bytes (a dump names its modules
/// itself, so a module's path may be `/dev/zero` or a FIFO).
pub(crate) fn read_binary(p: &Path) -> std::io::Result<Vec<u8>> {
    Ok(coldcache_fsio::read_regular(
        p,
        coldcache_fsio::elf::MAX_ELF_FILE,
    )?)
}

/// Lowercase hex of a byte string.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One loadable segment (`coldcache_fsio::elf`, the one home of the
/// `PT_LOAD` arithmetic).
pub use coldcache_fsio::elf::{LoadSegments, Segment};

/// One function symbol.
#[derive(Clone, Debug)]
pub struct Sym {
    /// Stated (ELF virtual) address.
    pub addr: u64,
    /// End (exclusive): `addr + size`; for symbols of size 0, the next
    /// symbol's address or the end of the symbol's section, whichever is first.
    pub end: u64,
    /// Whether the symbol table states a size.
    sized: bool,
    /// Name as stored (mangled).
    pub name: String,
    /// 0 global, 1 weak, 2 local: lower wins among aliases.
    rank: u8,
}

/// A function symbol table, sorted by address.
#[derive(Debug, Default)]
pub struct SymbolTable {
    syms: Vec<Sym>,
    by_name: std::collections::HashMap<String, usize>,
    /// Which table it came from, for messages (`.symtab of /bin/x`).
    pub source: String,
}

impl SymbolTable {
    fn new(mut syms: Vec<Sym>, source: String) -> SymbolTable {
        syms.sort_by(|a, b| (a.addr, a.rank, &a.name).cmp(&(b.addr, b.rank, &b.name)));
        syms.dedup_by(|a, b| a.addr == b.addr && a.name == b.name);
        // Size-0 symbols extend to the next symbol at a higher address.
        let n = syms.len();
        let mut next = u64::MAX;
        for i in (0..n).rev() {
            if !syms[i].sized {
                let limit = if next > syms[i].addr {
                    next
                } else {
                    syms[i].addr.saturating_add(1)
                };
                syms[i].end = syms[i].end.min(limit).max(syms[i].addr.saturating_add(1));
            }
            if i == 0 || syms[i - 1].addr != syms[i].addr {
                next = syms[i].addr;
            }
        }
        let mut by_name = std::collections::HashMap::new();
        for (i, s) in syms.iter().enumerate() {
            by_name.entry(s.name.clone()).or_insert(i);
        }
        SymbolTable {
            syms,
            by_name,
            source,
        }
    }

    /// Whether there are no function symbols at all.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol whose range covers `vaddr`: among overlapping symbols the
    /// one starting nearest below, then global before weak before local.
    pub fn find(&self, vaddr: u64) -> Option<&Sym> {
        let idx = self.syms.partition_point(|s| s.addr <= vaddr);
        let mut best: Option<&Sym> = None;
        // Overlaps are rare and short: look back a bounded distance.
        for s in self.syms[..idx].iter().rev().take(64) {
            if s.end > vaddr {
                match best {
                    Some(b) if b.addr > s.addr || (b.addr == s.addr && b.rank <= s.rank) => {}
                    _ => best = Some(s),
                }
            }
        }
        best
    }

    /// The address of a symbol by exact name (used to find the parent of
    /// `f.cold` parts).
    pub fn by_name(&self, name: &str) -> Option<&Sym> {
        self.by_name.get(name).map(|&i| &self.syms[i])
    }
}

/// A module's binary, opened and checked.
pub struct Binary {
    /// The file opened (after remapping and searching).
    pub path: PathBuf,
    /// Its bytes (instruction bytes are read from here).
    pub data: Vec<u8>,
    /// Its `PT_LOAD` segments.
    pub segments: LoadSegments,
    /// Function symbols.
    pub symbols: SymbolTable,
    /// PLT stubs, named `NAME@plt` as objdump names them.
    pub plt: SymbolTable,
    /// DWARF reader and the file it reads, when there is debug information.
    pub dwarf: Option<(addr2line::Loader, PathBuf)>,
    /// Why there is no DWARF, or a note on the debug file, for messages.
    pub note: String,
}

impl Binary {
    /// The ELF virtual address of file offset `off`, through the `PT_LOAD`
    /// segment holding it.
    pub fn file_to_vaddr(&self, off: u64) -> Option<(u64, Segment)> {
        self.segments.file_to_vaddr(off)
    }
}

/// Where to look for binaries and debug files.
#[derive(Clone, Debug)]
pub struct Search<'a> {
    /// `(prefix, replacement)`: a module path starting with `prefix` is
    /// looked for with `replacement` instead, first.
    pub remap: &'a [(String, PathBuf)],
    /// Directories where a file of the same name is looked for.
    pub dirs: &'a [PathBuf],
    /// Roots of separate debug files (`/usr/lib/debug`).
    pub debug_dirs: &'a [PathBuf],
}

/// Opens the binary of a module captured at `path` with build id `build_id`.
pub fn open(path: &str, build_id: &[u8], search: &Search) -> Result<Binary, ModuleError> {
    if !path.starts_with('/') {
        return Err(ModuleError::NotAFile(if path.is_empty() {
            "an anonymous mapping".to_string()
        } else {
            path.to_string()
        }));
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    for (prefix, to) in search.remap {
        if let Some(rest) = path.strip_prefix(prefix.as_str()) {
            candidates.push(to.join(rest.trim_start_matches('/')));
        }
    }
    candidates.push(PathBuf::from(path));
    if let Some(name) = Path::new(path).file_name() {
        for d in search.dirs {
            candidates.push(d.join(name));
        }
    }
    let mut first_err: Option<std::io::Error> = None;
    let mut mismatch: Option<ModuleError> = None;
    let mut not_elf: Option<ModuleError> = None;
    for c in &candidates {
        let data = match read_binary(c) {
            Ok(d) => d,
            Err(e) => {
                first_err.get_or_insert(e);
                continue;
            }
        };
        let obj = match object::File::parse(&*data) {
            Ok(o) => o,
            Err(e) => {
                not_elf.get_or_insert(ModuleError::NotElf {
                    path: c.display().to_string(),
                    what: e.to_string(),
                });
                continue;
            }
        };
        let found = obj.build_id().ok().flatten().unwrap_or_default();
        if !build_id.is_empty() && found != build_id {
            mismatch.get_or_insert(ModuleError::Mismatch {
                path: c.display().to_string(),
                recorded: hex(build_id),
                found: if found.is_empty() {
                    "none".into()
                } else {
                    hex(found)
                },
            });
            continue;
        }
        let segments = LoadSegments::of(&obj);
        let debug = debug_file(c, &obj, search);
        let (dwarf_path, note) = match (&debug, has_dwarf(&obj)) {
            (_, true) => (Some(c.clone()), String::new()),
            (Some(d), false) => (Some(d.clone()), String::new()),
            (None, false) => (None, "no debug info: function names only".to_string()),
        };
        let mut dwarf = None;
        let mut note = note;
        if let Some(dp) = dwarf_path {
            match addr2line::Loader::new(&dp) {
                Ok(l) => dwarf = Some((l, dp)),
                Err(e) => {
                    note = format!(
                        "debug info in {} unreadable ({e}): function names only",
                        dp.display()
                    )
                }
            }
        }
        let mut symbols = symbol_table(&obj, c);
        if symbols.is_empty() || symbols.source.starts_with(".dynsym") {
            // A stripped binary's full symbol table may be in its debug file.
            if let Some(d) = &debug {
                if let Ok(dd) = read_binary(d) {
                    if let Ok(dobj) = object::File::parse(&*dd) {
                        let t = symbol_table(&dobj, d);
                        if !t.is_empty() && t.source.starts_with(".symtab") {
                            symbols = t;
                        }
                    }
                }
            }
        }
        let plt = plt_stubs(&obj);
        drop(obj);
        return Ok(Binary {
            path: c.clone(),
            data,
            segments,
            symbols,
            plt,
            dwarf,
            note,
        });
    }
    if let Some(m) = mismatch {
        return Err(m);
    }
    if let Some(n) = not_elf {
        return Err(n);
    }
    let searched = if candidates.len() > 1 {
        format!(
            " (also searched {})",
            candidates[..]
                .iter()
                .filter(|c| c.as_os_str() != path)
                .map(|c| c.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        String::new()
    };
    Err(ModuleError::Unreadable {
        path: path.to_string(),
        source: first_err.unwrap_or_else(|| std::io::Error::other("no candidate")),
        searched,
    })
}

/// Whether an object carries DWARF debugging information of its own (a
/// `.debug_info` section with contents, not the `NOBITS` placeholder of a
/// stripped file).
fn has_dwarf(obj: &object::File) -> bool {
    obj.section_by_name(".debug_info")
        .or_else(|| obj.section_by_name(".zdebug_info"))
        .is_some_and(|s| s.kind() != SectionKind::UninitializedData && s.size() > 0)
}

/// A separate debug file for `bin`: by build id under each debug root, then
/// by `.gnu_debuglink` (next to the binary, in its `.debug/`, under each
/// debug root), checked by build id or by the link's CRC.
fn debug_file(bin: &Path, obj: &object::File, search: &Search) -> Option<PathBuf> {
    let id = obj.build_id().ok().flatten().filter(|id| id.len() >= 2);
    let usable = |p: &Path| -> bool {
        let Ok(d) = read_binary(p) else {
            return false;
        };
        let Ok(o) = object::File::parse(&*d) else {
            return false;
        };
        has_dwarf(&o) && id.is_none_or(|id| o.build_id().ok().flatten() == Some(id))
    };
    if let Some(id) = id {
        let h = hex(id);
        for root in search.debug_dirs {
            let p = root
                .join(".build-id")
                .join(&h[..2])
                .join(format!("{}.debug", &h[2..]));
            if usable(&p) {
                return Some(p);
            }
        }
    }
    let (name, crc) = obj.gnu_debuglink().ok().flatten()?;
    let name = std::str::from_utf8(name).ok()?;
    let dir = bin.parent().unwrap_or(Path::new("/"));
    let mut cands = vec![dir.join(name), dir.join(".debug").join(name)];
    for root in search.debug_dirs {
        cands.push(root.join(dir.strip_prefix("/").unwrap_or(dir)).join(name));
    }
    cands.into_iter().find(|p| {
        p != bin
            && usable(p)
            && (id.is_some() || read_binary(p).is_ok_and(|d| crc32fast::hash(&d) == crc))
    })
}

/// The PLT stubs of an object, as sized symbols `NAME@plt` (NAME
/// demangled, as `objdump -C` names them): each
/// `jmp *SLOT(%rip)` in `.plt`, `.plt.sec` or `.plt.got` whose GOT slot a
/// dynamic relocation binds to symbol NAME starts a stub (at the `endbr64`
/// before it, when there is one) that runs to the next stub or the
/// section's end. The code of `.plt` before its first named stub — the
/// lazy-binding trampoline (PLT0), and with `.plt.sec` (`-fcf-protection`
/// with IBT) the whole section, whose entries only push an index — is
/// named `.plt`, as objdump labels it when there is a `.plt.sec` (without,
/// it labels PLT0 after the next stub, `free@plt-0x10`, which is no name:
/// it would change with the program's first import). A first call through
/// lazy binding runs there, and without a name it showed as the stub's
/// address (`0x55d0c1a3b0b0 in prog`), a different row in every run.
fn plt_stubs(obj: &object::File) -> SymbolTable {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};
    let mut slots: std::collections::HashMap<u64, String> = Default::default();
    if let (Some(relocs), Some(dynsym)) = (obj.dynamic_relocations(), obj.dynamic_symbol_table()) {
        for (slot, r) in relocs {
            match r.target() {
                RelocationTarget::Symbol(i) => {
                    if let Some(name) = dynsym
                        .symbol_by_index(i)
                        .ok()
                        .and_then(|s| s.name().ok().map(str::to_string))
                        .filter(|n| !n.is_empty())
                    {
                        slots.insert(slot, name);
                    }
                }
                // IRELATIVE: an IFUNC resolved at load time; objdump
                // names its stub after the resolver's address.
                RelocationTarget::Absolute => {
                    slots.insert(slot, format!("*ABS*+{:#x}", r.addend()));
                }
                _ => {}
            }
        }
    }
    let mut stubs: Vec<Sym> = Vec::new();
    for name in [".plt", ".plt.sec", ".plt.got"] {
        let Some(sec) = obj.section_by_name(name) else {
            continue;
        };
        let Ok(bytes) = sec.data() else { continue };
        let end = sec.address() + bytes.len() as u64;
        let first = stubs.len();
        let mut d = Decoder::with_ip(64, bytes, sec.address(), DecoderOptions::NONE);
        let mut prev_endbr = None;
        while d.can_decode() {
            let ins = d.decode();
            if ins.mnemonic() == Mnemonic::Endbr64 {
                prev_endbr = Some(ins.ip());
                continue;
            }
            if ins.mnemonic() == Mnemonic::Jmp && ins.is_ip_rel_memory_operand() {
                // Every jump through the GOT starts a stub (an unnamed one
                // still ends the previous stub).
                let name = slots.get(&ins.ip_rel_memory_address());
                stubs.push(Sym {
                    addr: prev_endbr.unwrap_or(ins.ip()),
                    end,
                    sized: true,
                    name: name.map_or(String::new(), |n| format!("{}@plt", crate::demangle(n))),
                    rank: 0,
                });
            }
            prev_endbr = None;
        }
        for i in first..stubs.len().saturating_sub(1) {
            stubs[i].end = stubs[i + 1].addr;
        }
        if name == ".plt" && !bytes.is_empty() {
            let named_at = stubs[first..]
                .iter()
                .find(|s| !s.name.is_empty())
                .map_or(end, |s| s.addr);
            if named_at > sec.address() {
                stubs.push(Sym {
                    addr: sec.address(),
                    end: named_at,
                    sized: true,
                    name: ".plt".into(),
                    rank: 0,
                });
            }
        }
    }
    stubs.retain(|s| !s.name.is_empty());
    SymbolTable::new(stubs, "PLT".into())
}

/// The function symbols of an object: `.symtab`, else `.dynsym`.
fn symbol_table(obj: &object::File, path: &Path) -> SymbolTable {
    let collect = |it: &mut dyn Iterator<Item = object::Symbol<'_, '_>>| -> Vec<Sym> {
        it.filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
            .filter_map(|s| {
                let name = s.name().ok()?.to_string();
                if name.is_empty() {
                    return None;
                }
                let section_end = s
                    .section_index()
                    .and_then(|i| obj.section_by_index(i).ok())
                    .map_or(0, |sec| sec.address().saturating_add(sec.size()));
                Some(Sym {
                    addr: s.address(),
                    end: if s.size() > 0 {
                        s.address().saturating_add(s.size())
                    } else {
                        section_end
                    },
                    sized: s.size() > 0,
                    rank: if s.is_weak() {
                        1
                    } else if s.is_global() {
                        0
                    } else {
                        2
                    },
                    name,
                })
            })
            .collect()
    };
    let v = collect(&mut obj.symbols());
    if !v.is_empty() {
        return SymbolTable::new(v, format!(".symtab of {}", path.display()));
    }
    let v = collect(&mut obj.dynamic_symbols());
    SymbolTable::new(v, format!(".dynsym of {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(addr: u64, size: u64, name: &str, rank: u8) -> Sym {
        Sym {
            addr,
            end: if size > 0 { addr + size } else { 0x3f0 },
            sized: size > 0,
            name: name.into(),
            rank,
        }
    }

    #[test]
    fn lookup_respects_sizes_and_prefers_globals() {
        let t = SymbolTable::new(
            vec![
                sym(0x100, 0x10, "a", 0),
                sym(0x200, 0x20, "b_local", 2),
                sym(0x200, 0x20, "b", 0),
                sym(0x300, 0, "c", 0),
                sym(0x400, 0x8, "d", 0),
            ],
            String::new(),
        );
        assert_eq!(t.find(0x105).unwrap().name, "a");
        assert!(t.find(0x110).is_none(), "past a's size");
        assert!(t.find(0xff).is_none());
        assert_eq!(t.find(0x21f).unwrap().name, "b");
        assert_eq!(
            t.find(0x3ef).unwrap().name,
            "c",
            "size 0 runs to its section's end"
        );
        assert!(t.find(0x3f0).is_none());
        assert_eq!(t.find(0x407).unwrap().name, "d");
        assert!(t.find(0x408).is_none());
    }
}
