//! Names, files and lines for the runtime function addresses that
//! `-finstrument-functions` recordings contain.
//!
//! The recorder stores the process's executable mappings (as in
//! `/proc/PID/maps`: start, end, file offset, path). A runtime address is
//! turned into a file offset through its mapping, then into the address
//! the ELF file states (through the `PT_LOAD` segment holding that offset),
//! which is what the DWARF line tables and the symbol table use; this is
//! right for position-independent executables and shared libraries loaded
//! anywhere. `addr2line` reads the debug information.

use crate::format::{ModuleInfo, ZoneKey};
use crate::parse::{Recording, ZoneName};
use coldcache_fsio::elf::LoadSegments;
use std::collections::HashMap;

struct Binary {
    loader: addr2line::Loader,
    /// Its `PT_LOAD` segments (`coldcache_fsio::elf`).
    segments: LoadSegments,
}

/// Resolves addresses against a set of mappings, loading each binary once.
pub struct Symbolizer {
    modules: Vec<ModuleInfo>,
    binaries: HashMap<String, Option<Binary>>,
    /// Binaries that could not be read, with why.
    pub failures: Vec<String>,
}

impl Symbolizer {
    /// A symbolizer over the recorded mappings.
    pub fn new(modules: Vec<ModuleInfo>) -> Symbolizer {
        Symbolizer {
            modules,
            binaries: HashMap::new(),
            failures: Vec::new(),
        }
    }

    fn binary(&mut self, path: &str) -> Option<&Binary> {
        if !self.binaries.contains_key(path) {
            let b = match load(path) {
                Ok(b) => Some(b),
                Err(e) => {
                    self.failures.push(format!("{path}: {e}"));
                    None
                }
            };
            self.binaries.insert(path.to_string(), b);
        }
        self.binaries.get(path).and_then(|b| b.as_ref())
    }

    /// Name, file and line of the function at runtime address `addr`.
    pub fn resolve(&mut self, addr: u64) -> Option<ZoneName> {
        let m = self
            .modules
            .iter()
            .find(|m| m.start <= addr && addr < m.end)?
            .clone();
        let file_off = addr - m.start + m.file_offset;
        let b = self.binary(&m.path)?;
        let (probe, _) = b.segments.file_to_vaddr(file_off)?;
        let mut name = None;
        let mut file = String::new();
        let mut line = 0;
        if let Ok(mut frames) = b.loader.find_frames(probe) {
            // The last frame is the outermost: the function itself.
            let mut last = None;
            while let Ok(Some(f)) = frames.next() {
                last = Some((
                    f.function
                        .as_ref()
                        .and_then(|n| n.demangle().ok().map(|s| s.into_owned())),
                    f.location.as_ref().and_then(|l| l.file.map(str::to_string)),
                    f.location.as_ref().and_then(|l| l.line),
                ));
            }
            if let Some((n, f, l)) = last {
                name = n;
                file = f.unwrap_or_default();
                line = l.unwrap_or(0);
            }
        }
        if name.is_none() {
            name = b.loader.find_symbol(probe).map(str::to_string);
        }
        if file.is_empty() {
            if let Ok(Some(loc)) = b.loader.find_location(probe) {
                file = loc.file.unwrap_or_default().to_string();
                line = loc.line.unwrap_or(0);
            }
        }
        Some(ZoneName {
            name: name.unwrap_or_else(|| {
                let base = m.path.rsplit('/').next().unwrap_or(&m.path).to_string();
                format!("{base}+0x{probe:x}")
            }),
            file,
            line,
        })
    }
}

fn load(path: &str) -> Result<Binary, String> {
    let data = coldcache_fsio::read_regular(path, coldcache_fsio::elf::MAX_ELF_FILE)
        .map_err(|e| e.to_string())?;
    let obj = object::File::parse(&*data).map_err(|e| e.to_string())?;
    let segments = LoadSegments::of(&obj);
    let loader = addr2line::Loader::new(path).map_err(|e| e.to_string())?;
    Ok(Binary { loader, segments })
}

/// Names every function address of a recording (those that resolve).
/// Returns the binaries that could not be read.
pub fn symbolize(rec: &mut Recording) -> Vec<String> {
    let mut addrs: Vec<u64> = rec
        .threads
        .iter()
        .flat_map(|t| t.spans.iter())
        .filter_map(|sp| match sp.key {
            ZoneKey::Function(a) => Some(a),
            _ => None,
        })
        .collect();
    addrs.sort_unstable();
    addrs.dedup();
    symbolize_addrs(rec, addrs)
}

/// Names the function addresses `addrs` of a recording (those that
/// resolve). Returns the binaries that could not be read.
pub fn symbolize_addrs(rec: &mut Recording, addrs: impl IntoIterator<Item = u64>) -> Vec<String> {
    let mut s = Symbolizer::new(rec.modules.clone());
    for a in addrs {
        if let Some(n) = s.resolve(a) {
            rec.names.insert(ZoneKey::Function(a), n);
        }
    }
    s.failures
}
