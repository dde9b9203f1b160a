//! The symbol tables embedded in a dump (section `SYMS`, format version 2).
//!
//! [`Symbols`] maps every address a dump mentions (record instructions, call
//! sites, callee entries) to its function, source file, line and inlined
//! frames, and keeps the instruction bytes so disassembly works without the
//! binary. It is filled by the resolver (`crates/symbols`) and read by the
//! analysis (`crates/analysis`); this module only encodes and decodes it.

use crate::varint::{self, opt, unopt};
use crate::DumpError;

/// Sentinel for "no file" in [`Frame::file`] and [`Function::file`].
pub const NO_FILE: u32 = u32::MAX;
/// Sentinel for "no module" in [`Function::module`].
pub const NO_MODULE: u32 = u32::MAX;
/// Longest x86-64 instruction, the most bytes kept per [`Location`].
pub const MAX_CODE: usize = 15;

/// How a module's symbols were found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleStatus {
    /// Not looked at (no address of the dump falls in it, or not resolved yet).
    #[default]
    Unresolved,
    /// Function names, source files and lines (DWARF), inlined frames included.
    Lines,
    /// Function names from the symbol table only: no line information.
    SymbolsOnly,
    /// The file could not be read (deleted, unreadable, not an ELF file).
    NotFound,
    /// The file's build id differs from the one captured: it was rebuilt.
    Mismatch,
}

impl ModuleStatus {
    fn code(self) -> u64 {
        match self {
            ModuleStatus::Unresolved => 0,
            ModuleStatus::Lines => 1,
            ModuleStatus::SymbolsOnly => 2,
            ModuleStatus::NotFound => 3,
            ModuleStatus::Mismatch => 4,
        }
    }
    fn from_code(c: u64) -> Option<Self> {
        Some(match c {
            0 => ModuleStatus::Unresolved,
            1 => ModuleStatus::Lines,
            2 => ModuleStatus::SymbolsOnly,
            3 => ModuleStatus::NotFound,
            4 => ModuleStatus::Mismatch,
            _ => return None,
        })
    }
}

/// What the resolver found for one module (parallel to `Dump::modules`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleSymbols {
    /// How the module was resolved.
    pub status: ModuleStatus,
    /// A human-readable detail: the debug file used, or what went wrong.
    pub detail: String,
}

/// A function (a symbol, or an inlined subroutine's abstract origin).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Function {
    /// Demangled name.
    pub name: String,
    /// Index into `Dump::modules`, or [`NO_MODULE`].
    pub module: u32,
    /// Run-time address of its entry (0 for functions only seen inlined).
    pub entry: u64,
    /// Source file of its entry instruction (index into [`Symbols::files`]),
    /// or [`NO_FILE`] (unknown, or only seen inlined).
    pub file: u32,
    /// Line of its entry instruction, 0 when unknown.
    pub line: u32,
}

/// One frame of a [`Location`]: a function and the source position in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// Index into [`Symbols::functions`].
    pub function: u32,
    /// Index into [`Symbols::files`], or [`NO_FILE`].
    pub file: u32,
    /// Line, 0 when unknown.
    pub line: u32,
}

/// What one address resolves to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// Run-time address.
    pub addr: u64,
    /// Innermost first: `frames[0]` is the (possibly inlined) function whose
    /// code this is, with the address's own file and line; each next frame is
    /// the function it was inlined into, at the line of the inlined call; the
    /// last frame is the real function. Empty when nothing is known.
    pub frames: Vec<Frame>,
    /// The instruction's bytes (up to [`MAX_CODE`]), empty when unknown.
    pub code: Vec<u8>,
}

/// The symbol tables of a dump.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Symbols {
    /// Source file paths.
    pub files: Vec<String>,
    /// Functions.
    pub functions: Vec<Function>,
    /// Resolved addresses, sorted by address, no duplicates.
    pub locations: Vec<Location>,
    /// Per module of the dump, in the same order.
    pub modules: Vec<ModuleSymbols>,
}

impl Symbols {
    /// The location of `addr`, when the tables have it.
    pub fn location(&self, addr: u64) -> Option<&Location> {
        self.locations
            .binary_search_by_key(&addr, |l| l.addr)
            .ok()
            .map(|i| &self.locations[i])
    }

    /// A file path by index (`None` for [`NO_FILE`] or out of range).
    pub fn file(&self, i: u32) -> Option<&str> {
        self.files.get(i as usize).map(String::as_str)
    }

    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        varint::put(b, self.files.len() as u64);
        for f in &self.files {
            varint::put_bytes(b, f.as_bytes());
        }
        varint::put(b, self.functions.len() as u64);
        for f in &self.functions {
            varint::put_bytes(b, f.name.as_bytes());
            varint::put(b, opt(f.module));
            varint::put(b, f.entry);
            varint::put(b, opt(f.file));
            varint::put(b, f.line.into());
        }
        varint::put(b, self.modules.len() as u64);
        for m in &self.modules {
            varint::put(b, m.status.code());
            varint::put_bytes(b, m.detail.as_bytes());
        }
        varint::put(b, self.locations.len() as u64);
        let mut prev = 0u64;
        for l in &self.locations {
            varint::put(b, l.addr.wrapping_sub(prev));
            prev = l.addr;
            varint::put(b, l.frames.len() as u64);
            for f in &l.frames {
                varint::put(b, f.function.into());
                varint::put(b, opt(f.file));
                varint::put(b, f.line.into());
            }
            varint::put_bytes(b, &l.code);
        }
    }

    pub(crate) fn decode(buf: &[u8], nmodules: usize) -> Result<Symbols, DumpError> {
        const S: &str = "SYMS";
        let bad = |what: String| DumpError::Malformed { section: S, what };
        let mut r = varint::Reader::new(buf, S);
        let n = r.count(1)?;
        let mut files = Vec::with_capacity(n);
        for _ in 0..n {
            files.push(r.string()?);
        }
        let n = r.count(5)?;
        let mut functions = Vec::with_capacity(n);
        for i in 0..n {
            let f = Function {
                name: r.string()?,
                module: unopt(r.get_u32()?),
                entry: r.get()?,
                file: unopt(r.get_u32()?),
                line: r.get_u32()?,
            };
            if f.module != NO_MODULE && f.module as usize >= nmodules {
                return Err(bad(format!(
                    "function {i} is in module {} of {nmodules}",
                    f.module
                )));
            }
            if f.file != NO_FILE && f.file as usize >= files.len() {
                return Err(bad(format!(
                    "function {i} is in file {} of {}",
                    f.file,
                    files.len()
                )));
            }
            functions.push(f);
        }
        let n = r.count(2)?;
        if n != nmodules {
            return Err(bad(format!(
                "{n} module entries for {nmodules} modules in MODS"
            )));
        }
        let mut modules = Vec::with_capacity(n);
        for i in 0..n {
            let code = r.get()?;
            let status = ModuleStatus::from_code(code)
                .ok_or_else(|| bad(format!("module {i} has unknown status {code}")))?;
            modules.push(ModuleSymbols {
                status,
                detail: r.string()?,
            });
        }
        let n = r.count(3)?;
        let mut locations: Vec<Location> = Vec::with_capacity(n);
        let mut prev = 0u64;
        for i in 0..n {
            let delta = r.get()?;
            let addr = prev.wrapping_add(delta);
            if i > 0 && (delta == 0 || addr < prev) {
                return Err(bad(format!(
                    "location {i} at {addr:#x} is not after the previous one"
                )));
            }
            prev = addr;
            let nf = r.count(3)?;
            let mut frames = Vec::with_capacity(nf);
            for _ in 0..nf {
                let f = Frame {
                    function: r.get_u32()?,
                    file: unopt(r.get_u32()?),
                    line: r.get_u32()?,
                };
                if f.function as usize >= functions.len()
                    || (f.file != NO_FILE && f.file as usize >= files.len())
                {
                    return Err(bad(format!(
                        "location {addr:#x} refers to function {} of {} or file {} of {}",
                        f.function,
                        functions.len(),
                        f.file,
                        files.len()
                    )));
                }
                frames.push(f);
            }
            let code = r.bytes()?;
            if code.len() > MAX_CODE {
                return Err(bad(format!(
                    "location {addr:#x} has {} instruction bytes (at most {MAX_CODE})",
                    code.len()
                )));
            }
            locations.push(Location {
                addr,
                frames,
                code: code.to_vec(),
            });
        }
        r.finish()?;
        Ok(Symbols {
            files,
            functions,
            locations,
            modules,
        })
    }
}
