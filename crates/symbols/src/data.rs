//! The data types of a dump's record instructions (section `DATA`): for
//! each module opened by the resolver that holds records, its DWARF (the
//! file `addr2line` reads: the module or its separate debug file) is read
//! once by `coldcache_types::ModuleTypes`, and every record instruction's
//! bytes (already copied into [`Location::code`]) are typed at the
//! instruction's file address, then moved to its run-time address. The
//! modules' types are appended into one vector (indices re-based), and
//! only the types reachable from a typed access are kept.
//!
//! A module that can no longer be opened keeps what an earlier resolution
//! typed in it. Each module gets a line saying what was found.

use crate::elf;
use coldcache_dump::data::NO_TYPE;
use coldcache_dump::{DataType, DataTypes, Dump, Location, Module, TypedAccess};
use coldcache_types::ModuleTypes;

/// Types being gathered while a dump resolves.
pub(crate) struct Typing {
    /// Record instruction addresses, sorted, distinct.
    records: Vec<u64>,
    /// The dump's data types before this resolution.
    previous: Option<DataTypes>,
    out: DataTypes,
}

impl Typing {
    pub(crate) fn new(dump: &Dump) -> Typing {
        let mut records: Vec<u64> = dump.records.iter().map(|r| r.ip).collect();
        records.sort_unstable();
        records.dedup();
        Typing {
            records,
            previous: dump.data.clone(),
            out: DataTypes {
                modules: vec![String::new(); dump.modules.len()],
                ..DataTypes::default()
            },
        }
    }

    fn is_record(&self, addr: u64) -> bool {
        self.records.binary_search(&addr).is_ok()
    }

    /// Types the record instructions among `locs`, the locations just
    /// resolved for module `mi` (mapping `m`) in `bin`.
    pub(crate) fn module(&mut self, mi: usize, m: &Module, bin: &elf::Binary, locs: &[Location]) {
        let todo: Vec<&Location> = locs.iter().filter(|l| self.is_record(l.addr)).collect();
        if todo.is_empty() {
            return;
        }
        let line = &mut self.out.modules[mi];
        let Some((_, path)) = &bin.dwarf else {
            *line = "no DWARF".to_string();
            return;
        };
        // The DWARF from the file addr2line reads; the code, symbols and
        // call frame information (for the flow pass and stack slots) from
        // the module itself.
        let separate = path != &bin.path;
        let bytes = if separate {
            match elf::read_binary(path) {
                Ok(b) => b,
                Err(e) => {
                    *line = format!("cannot read {}: {e}", path.display());
                    return;
                }
            }
        } else {
            Vec::new()
        };
        let typed = if separate {
            ModuleTypes::from_files(&bytes, Some(&bin.data))
        } else {
            ModuleTypes::from_files(&bin.data, None)
        };
        let mut mt = match typed {
            Ok(mt) => mt,
            Err(e) => {
                *line = format!("{}: {e}", path.display());
                return;
            }
        };
        let mut accesses = Vec::new();
        for l in todo {
            if l.code.is_empty() {
                continue;
            }
            let Some(off) = (l.addr - m.start).checked_add(m.file_offset) else {
                continue;
            };
            let Some((vaddr, _)) = bin.file_to_vaddr(off) else {
                continue;
            };
            if let Some(mut a) = mt.type_instruction(vaddr, &l.code) {
                a.addr = l.addr;
                accesses.push(a);
            }
        }
        let mut own = DataTypes {
            types: mt.take_types(),
            accesses,
            modules: Vec::new(),
        };
        prune(&mut own);
        *line = mt.summary_with(own.types.len());
        self.append(own.types, own.accesses);
    }

    /// Module `mi` could not be opened (`why`): keeps what an earlier
    /// resolution typed in it.
    pub(crate) fn keep(&mut self, dump: &Dump, mi: usize, why: &str) {
        let m = &dump.modules[mi];
        let Some(prev) = &self.previous else {
            self.out.modules[mi] = format!("not typed: {why}");
            return;
        };
        let kept: Vec<TypedAccess> = prev
            .accesses
            .iter()
            .filter(|a| m.start <= a.addr && a.addr < m.end)
            .cloned()
            .collect();
        if kept.is_empty() {
            self.out.modules[mi] = format!("not typed: {why}");
            return;
        }
        let was = prev.modules.get(mi).cloned().unwrap_or_default();
        let types = prev.types.clone();
        self.out.modules[mi] = format!("{was} (kept from an earlier resolution; now: {why})");
        self.append(types, kept);
    }

    /// Appends a module's types and its accesses (whose `ty` index
    /// `types`), re-basing the indices.
    fn append(&mut self, types: Vec<DataType>, accesses: Vec<TypedAccess>) {
        let base = self.out.types.len() as u32;
        self.out.types.extend(types.into_iter().map(|mut t| {
            for mem in &mut t.members {
                if mem.ty != NO_TYPE {
                    mem.ty += base;
                }
            }
            t
        }));
        self.out.accesses.extend(accesses.into_iter().map(|mut a| {
            a.ty += base;
            a
        }));
    }

    /// The dump's data types: accesses by address, only the types they
    /// reach.
    pub(crate) fn finish(self) -> DataTypes {
        let mut out = self.out;
        out.accesses.sort_by_key(|a| a.addr);
        out.accesses.dedup_by_key(|a| a.addr);
        prune(&mut out);
        out
    }
}

/// Drops the types no access reaches (through members), renumbering.
fn prune(d: &mut DataTypes) {
    let n = d.types.len();
    let mut keep = vec![false; n];
    let mut stack: Vec<u32> = d.accesses.iter().map(|a| a.ty).collect();
    while let Some(t) = stack.pop() {
        let Some(k) = keep.get_mut(t as usize) else {
            continue;
        };
        if *k {
            continue;
        }
        *k = true;
        stack.extend(
            d.types[t as usize]
                .members
                .iter()
                .map(|m| m.ty)
                .filter(|&ty| ty != NO_TYPE),
        );
    }
    let mut new_index = vec![NO_TYPE; n];
    let mut next = 0u32;
    for (i, k) in keep.iter().enumerate() {
        if *k {
            new_index[i] = next;
            next += 1;
        }
    }
    let types = std::mem::take(&mut d.types);
    d.types = types
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep[*i])
        .map(|(_, mut t)| {
            for m in &mut t.members {
                if m.ty != NO_TYPE {
                    m.ty = new_index.get(m.ty as usize).copied().unwrap_or(NO_TYPE);
                }
            }
            t
        })
        .collect();
    for a in &mut d.accesses {
        a.ty = new_index[a.ty as usize];
    }
}
