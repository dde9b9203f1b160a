//! The process side of object tracking (the accountant's side is
//! [`coldcache_account::objects`], re-exported here): the allocator entry
//! points of this process, found in the mapped ELF files when a capture is
//! prepared ([`resolve_allocators`]), published for the translator
//! ([`publish`]), which widens an entry's and a `ret`'s record with the
//! registers the accountant's [`Objects`] reads ([`widen`]).
//!
//! Its three statics (in `signal_state.rs`, which every file may import)
//! are written by a program thread preparing a capture ([`publish`],
//! before any engine starts) and read by the translator and the dispatcher
//! (any traced thread, handlers included: atomic loads only).

use crate::model::Inputs;
use crate::signal_state::objects::{ENTRIES, KINDS, ON};
pub use coldcache_account::objects::*;
use iced_x86::Register;
use std::sync::atomic::Ordering;

/// The allocator entry points of this process: (address, kind, name),
/// one per address (aliases folded, the first name kept). Each name is
/// looked up among the global definitions (`.dynsym`) of the mapped ELF
/// files, in the dynamic linker's search order as far as the mappings tell
/// it: the executable (the lowest file mapping), then the libraries from
/// the highest address down (glibc maps each library below the one loaded
/// before it), so a preloaded allocator comes before the C library. Not
/// with `dlsym`: a name a process lacks makes `dlsym` build its error
/// message with the program's `malloc`, which would make the program's
/// heap before its first allocation and change what that counts. Files are
/// mapped, never read with the program's allocator. Not async-signal-safe:
/// called when a capture is prepared.
pub fn resolve_allocators(custom: &[(u64, Kind, &'static str)]) -> Vec<(u64, Kind, &'static str)> {
    use object::ObjectSymbol;
    // The program's own first: where one is also a name of the list (a
    // `malloc` of its own), its kind is the one the user gave.
    let mut out: Vec<(u64, Kind, &'static str)> =
        custom.iter().take(MAX_ENTRIES / 2).copied().collect();
    let mut found = [false; ALLOCATORS.len()];
    for_each_mapped_elf(|file, bias| {
        use object::Object;
        for sym in file.dynamic_symbols() {
            if !sym.is_definition() || sym.kind() != object::SymbolKind::Text || !sym.is_global() {
                continue;
            }
            let Ok(name) = sym.name() else { continue };
            let Some(i) = ALLOCATORS.iter().position(|a| a.0 == name) else {
                continue;
            };
            if found[i] {
                continue;
            }
            found[i] = true;
            let (name, kind) = ALLOCATORS[i];
            let p = sym.address().wrapping_add(bias);
            if !out.iter().any(|e| e.0 == p) && out.len() < MAX_ENTRIES {
                out.push((p, kind, name));
            }
        }
        found.iter().all(|&f| f)
    });
    // In the table's order (first name of an alias kept, as listed), the
    // program's own first.
    let n = custom.len().min(MAX_ENTRIES / 2);
    out[n..].sort_by_key(|e| ALLOCATORS.iter().position(|a| a.0 == e.2));
    out
}

/// The run-time address of the global data definition `name` (`.dynsym`)
/// in the mapped ELF files, the first in [`resolve_allocators`]' search
/// order (e.g. glibc's `__rseq_offset`). Not async-signal-safe.
pub fn global_data_symbol(name: &str) -> Option<u64> {
    use object::ObjectSymbol;
    let mut at = None;
    for_each_mapped_elf(|file, bias| {
        use object::Object;
        at = file
            .dynamic_symbols()
            .find(|s| {
                s.is_definition()
                    && s.is_global()
                    && s.kind() == object::SymbolKind::Data
                    && s.name() == Ok(name)
            })
            .map(|s| s.address().wrapping_add(bias));
        at.is_some()
    });
    at
}

/// The process's mappings now, as [`Objects`] takes them. Not
/// async-signal-safe.
pub(crate) fn self_mappings() -> Vec<Mapping> {
    crate::procfs::self_maps()
        .into_iter()
        .map(|m| Mapping {
            start: m.start,
            end: m.end,
            perms: m.perms,
            path: m.path,
        })
        .collect()
}

/// The data symbols (`STT_OBJECT` of a size, defined) of every mapped
/// ELF file at their run-time addresses: the full symbol table where the
/// file has one (statics too), else `.dynsym`. Thread-local symbols are
/// not among them (their values are offsets, not addresses). The
/// sections `.got` and `.got.plt` are added under their names. What
/// [`Objects::with_globals`] takes. Not async-signal-safe: called when a
/// capture is prepared.
pub fn global_symbols() -> Vec<GlobalSymbol> {
    use object::{Object, ObjectSymbol};
    let mut out = Vec::new();
    for_each_mapped_elf(|file, bias| {
        let add = |out: &mut Vec<GlobalSymbol>, sym: object::Symbol<'_, '_>| {
            if sym.kind() != object::SymbolKind::Data || !sym.is_definition() || sym.size() == 0 {
                return;
            }
            let Ok(name) = sym.name() else { return };
            let start = sym.address().wrapping_add(bias);
            out.push(GlobalSymbol {
                start,
                end: start.saturating_add(sym.size()),
                name: name.to_string(),
            });
        };
        let before = out.len();
        file.symbols().for_each(|s| add(&mut out, s));
        if out.len() == before {
            file.dynamic_symbols().for_each(|s| add(&mut out, s));
        }
        // The global offset tables, which no data symbol covers: every
        // call through the PLT and every access to an exported variable
        // from position-independent code reads them.
        for sec in file.sections() {
            use object::ObjectSection;
            if let Ok(name @ (".got" | ".got.plt")) = sec.name() {
                if sec.size() > 0 && sec.address() != 0 {
                    let start = sec.address().wrapping_add(bias);
                    out.push(GlobalSymbol {
                        start,
                        end: start.saturating_add(sec.size()),
                        name: name.to_string(),
                    });
                }
            }
        }
        false
    });
    out
}

/// Calls `f` with each mapped ELF file and its load bias, in the dynamic
/// linker's search order as far as the mappings tell it (see
/// [`resolve_allocators`]), until it returns true. Files are mapped, never
/// read with the program's allocator.
fn for_each_mapped_elf(mut f: impl FnMut(&object::File<'_>, u64) -> bool) {
    let maps = crate::procfs::self_maps();
    let mut files: Vec<(u64, &str)> = Vec::new();
    for m in &maps {
        if m.path.starts_with('/') && !files.iter().any(|f| f.1 == m.path) {
            files.push((m.start, &m.path));
        }
    }
    files.sort_by_key(|f| f.0);
    if files.len() > 1 {
        files[1..].reverse();
    }
    for &(_, path) in &files {
        let Some(mapped) = crate::procfs::MappedFile::open(std::path::Path::new(path)) else {
            continue;
        };
        let Ok(file) = object::File::parse(mapped.bytes()) else {
            continue;
        };
        let segments = coldcache_fsio::elf::LoadSegments::of(&file);
        let Some(bias) = maps
            .iter()
            .filter(|x| x.path == path && x.perms.contains('x'))
            .find_map(|x| segments.load_bias(x.start, x.offset, true))
        else {
            continue;
        };
        if f(&file, bias) {
            break;
        }
    }
}

/// A function window opens (in its breakpoint's handler): the anonymous
/// writable mappings of the process that the objects' mappings of the
/// capture's start do not hold were made while nothing was traced (see
/// [`Objects::mapped_before_window`]); not ours (the tables, buffers and
/// stacks of the capture). Allocation-free and async-signal-safe
/// ([`crate::procfs::for_each_self_mapping_file`], grow memory).
pub(crate) fn window_start(acc: &mut crate::account::Accountant) {
    if !ON.load(Ordering::Acquire) {
        return;
    }
    // What lies between two lines is mapped by nothing. The heap's line
    // waits for the next one, where its reach past the break ends.
    let mut last = 0;
    let mut heap_line: Option<(u64, u64)> = None;
    let read = crate::procfs::for_each_self_mapping_file(|start, end, perms, path, _| {
        if let Some((s, e)) = heap_line.take() {
            acc.mapped_before_window(s, e, Some(start));
        }
        if start > last {
            acc.unmapped_before_window(last, start);
        }
        last = last.max(end);
        let heap = path == b"[heap]";
        let anonymous_private =
            (path.is_empty() || heap) && perms.starts_with(b"rw") && perms.ends_with(b"p");
        if anonymous_private && !coldcache_grow::in_own_regions(start, end) {
            if heap {
                heap_line = Some((start, end));
            } else {
                acc.mapped_before_window(start, end, None);
            }
        }
    });
    if let Some((s, e)) = heap_line {
        acc.mapped_before_window(s, e, Some(u64::MAX));
    }
    // A read that failed part way says nothing of what lies above.
    if read && last > 0 {
        acc.unmapped_before_window(last, u64::MAX);
    }
}

/// Makes `entries` the ones the translator widens records for (`None`:
/// object tracking off).
pub fn publish(entries: Option<&[(u64, Kind, &'static str)]>) {
    for (i, e) in ENTRIES.iter().enumerate() {
        let (a, k) = entries
            .and_then(|v| v.get(i))
            .map_or((0, 0), |&(a, k, _)| (a, k as u8));
        e.store(a, Ordering::Relaxed);
        KINDS[i].store(k, Ordering::Relaxed);
    }
    ON.store(entries.is_some(), Ordering::Release);
}

/// The registers an instruction at `ip` records for object tracking
/// besides its plan's: RDI, RSI and RDX at an allocator's entry, RAX at a
/// `ret`; false when `inputs` has no room for them (the instruction is
/// then left to the trap engine).
pub fn widen(ip: u64, is_ret: bool, inputs: &mut Inputs) -> bool {
    for &r in extra_registers(ip, is_ret) {
        if inputs.gprs.contains(&r) {
            continue;
        }
        match inputs.gprs.iter_mut().find(|g| **g == Register::None) {
            Some(slot) => *slot = r,
            None => return false,
        }
    }
    true
}

/// A digest of the published allocator set (tracking on or off, each
/// entry and its kind): translations made under another set record other
/// registers ([`widen`]), so kept ones are made anew when it changes
/// (`jit::prepare`).
pub fn fingerprint() -> u64 {
    let mut h = u64::from(ON.load(Ordering::Acquire));
    for (e, k) in ENTRIES.iter().zip(&KINDS) {
        let v = e.load(Ordering::Relaxed) ^ (u64::from(k.load(Ordering::Relaxed)) << 56);
        h = (h ^ v).wrapping_mul(0x100_0000_01b3).rotate_left(17);
    }
    h
}

/// Whether `ip` is the entry of a `posix_memalign` tracking observes: its
/// block comes back through its out pointer, which fast mode must read
/// before the caller runs (`jit::dispatch_slow`).
pub fn is_posix_memalign(ip: u64) -> bool {
    ON.load(Ordering::Acquire)
        && ENTRIES.iter().zip(&KINDS).any(|(e, k)| {
            e.load(Ordering::Relaxed) == ip
                && k.load(Ordering::Relaxed) == Kind::PosixMemalign as u8
        })
}

/// The registers [`widen`] adds for the instruction at `ip` (the
/// translator keeps its scratch register off them).
pub fn extra_registers(ip: u64, is_ret: bool) -> &'static [Register] {
    if !ON.load(Ordering::Acquire) {
        return &[];
    }
    if ENTRIES.iter().any(|e| e.load(Ordering::Relaxed) == ip) {
        &[Register::RDI, Register::RSI, Register::RDX]
    } else if is_ret {
        &[Register::RAX]
    } else {
        &[]
    }
}
