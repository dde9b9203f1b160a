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
use coldcache_dump::{DataType, DataTypes, Dump, Location, Module, TypedAccess, TypedSlot};
use coldcache_types::ModuleTypes;

/// Types being gathered while a dump resolves.
pub(crate) struct Typing {
    /// Record instruction addresses, sorted, distinct.
    records: Vec<u64>,
    /// The objects' stack slots (pc, below), sorted, distinct.
    slots: Vec<(u64, u64)>,
    /// The dump's data types before this resolution.
    previous: Option<DataTypes>,
    out: DataTypes,
}

impl Typing {
    pub(crate) fn new(dump: &Dump) -> Typing {
        let mut records: Vec<u64> = dump.records.iter().map(|r| r.ip).collect();
        records.sort_unstable();
        records.dedup();
        let mut slots: Vec<(u64, u64)> = dump
            .objects
            .iter()
            .filter_map(|o| o.frames.as_ref())
            .flat_map(|f| f.slots.iter().map(|s| (s.pc, s.below)))
            .collect();
        slots.sort_unstable();
        slots.dedup();
        Typing {
            records,
            slots,
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
        // Stack slots whose pc is in the module (a frame found by
        // unwinding at the start may be all a module ran of the window).
        let has_slots = {
            let lo = self.slots.partition_point(|&(pc, _)| pc < m.start);
            self.slots.get(lo).is_some_and(|&(pc, _)| pc < m.end)
        };
        if todo.is_empty() && !has_slots {
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
        // The file addresses of the instructions to type: parameters and
        // locals are read from their units only.
        let vaddr_of = |l: &Location| {
            let off = (l.addr - m.start).checked_add(m.file_offset)?;
            bin.file_to_vaddr(off).map(|(v, _)| v)
        };
        let todo: Vec<(&Location, u64)> = todo
            .into_iter()
            .filter(|l| !l.code.is_empty())
            .filter_map(|l| Some((l, vaddr_of(l)?)))
            .collect();
        // The stack slots in the module, at their pcs' file addresses.
        let lo = self.slots.partition_point(|&(pc, _)| pc < m.start);
        let hi = self.slots.partition_point(|&(pc, _)| pc < m.end);
        // (pc, below, file address, whether the pc is an instruction's).
        let slots: Vec<(u64, u64, u64, bool)> = self.slots[lo..hi]
            .iter()
            .filter_map(|&(pc, below)| {
                let off = (pc - m.start).checked_add(m.file_offset)?;
                Some((
                    pc,
                    below,
                    bin.file_to_vaddr(off)?.0,
                    self.records.binary_search(&pc).is_ok(),
                ))
            })
            .collect();
        let mut pcs: Vec<u64> = todo.iter().map(|&(_, v)| v).collect();
        pcs.extend(slots.iter().map(|&(_, _, v, _)| v));
        pcs.sort_unstable();
        pcs.dedup();
        let typed = if separate {
            ModuleTypes::from_files_at(&bytes, Some(&bin.data), Some(&pcs))
        } else {
            ModuleTypes::from_files_at(&bin.data, None, Some(&pcs))
        };
        let mut mt = match typed {
            Ok(mt) => mt,
            Err(e) => {
                *line = format!("{}: {e}", path.display());
                return;
            }
        };
        let mut accesses = Vec::new();
        for (l, vaddr) in todo {
            if let Some(mut a) = mt.type_instruction(vaddr, &l.code) {
                a.addr = l.addr;
                accesses.push(a);
            }
        }
        let mut typed_slots = Vec::new();
        for (pc, below, vaddr, instruction) in slots {
            if let Some((variable, ty, offset)) = mt.type_slot(vaddr, below) {
                typed_slots.push(TypedSlot {
                    pc,
                    below,
                    variable,
                    ty,
                    offset,
                });
            } else if let Some(word) = mt.frame_word(vaddr, below, instruction) {
                // No variable: the frame's own word (a saved register,
                // a return address), typed by nothing.
                typed_slots.push(TypedSlot {
                    pc,
                    below,
                    variable: word.to_string(),
                    ty: NO_TYPE,
                    offset: 0,
                });
            }
        }
        let mut own = DataTypes {
            types: mt.take_types(),
            accesses,
            modules: Vec::new(),
            slots: typed_slots,
        };
        prune(&mut own);
        *line = mt.summary_with(own.types.len());
        self.append(own.types, own.accesses, own.slots);
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
        let kept_slots: Vec<TypedSlot> = prev
            .slots
            .iter()
            .filter(|s| m.start <= s.pc && s.pc < m.end)
            .cloned()
            .collect();
        if kept.is_empty() && kept_slots.is_empty() {
            self.out.modules[mi] = format!("not typed: {why}");
            return;
        }
        let was = prev.modules.get(mi).cloned().unwrap_or_default();
        let types = prev.types.clone();
        self.out.modules[mi] = format!("{was} (kept from an earlier resolution; now: {why})");
        self.append(types, kept, kept_slots);
    }

    /// Appends a module's types, its accesses and its stack slots (whose
    /// `ty` index `types`), re-basing the indices.
    fn append(&mut self, types: Vec<DataType>, accesses: Vec<TypedAccess>, slots: Vec<TypedSlot>) {
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
        self.out.slots.extend(slots.into_iter().map(|mut s| {
            if s.ty != NO_TYPE {
                s.ty += base;
            }
            s
        }));
    }

    /// The dump's data types: accesses by address, only the types they
    /// reach.
    pub(crate) fn finish(self) -> DataTypes {
        let mut out = self.out;
        out.accesses.sort_by_key(|a| a.addr);
        out.accesses.dedup_by_key(|a| a.addr);
        out.slots.sort_by_key(|s| (s.pc, s.below));
        out.slots.dedup_by_key(|s| (s.pc, s.below));
        merge_duplicates(&mut out);
        prune(&mut out);
        out
    }
}

/// Makes one type of the copies DWARF gives of it: a C++ type defined in
/// a header has an entry in every compilation unit that uses it (and a
/// program and its libraries may share one), and `report --view layout
/// Entity` must find one `Entity`, with every access to it. Copies are
/// types of the same name, kind, size, declaration and members (names,
/// offsets, sizes, bit-fields, types as written); accesses and members
/// are pointed at the first copy, and `prune` drops the others. Types of
/// one name that differ (two C files each with its own `struct node`) stay
/// apart.
fn merge_duplicates(d: &mut DataTypes) {
    use std::collections::HashMap;
    type Key<'a> = (
        &'a str,
        coldcache_dump::TypeKind,
        u64,
        &'a str,
        Vec<(&'a str, u64, u64, u32, u32, &'a str, u64, bool)>,
    );
    let mut first: HashMap<Key, u32> = HashMap::new();
    let mut canon: Vec<u32> = Vec::with_capacity(d.types.len());
    for (i, t) in d.types.iter().enumerate() {
        let key: Key = (
            &t.name,
            t.kind,
            t.size,
            &t.decl,
            t.members
                .iter()
                .map(|m| {
                    (
                        m.name.as_str(),
                        m.offset,
                        m.size,
                        m.bit_offset,
                        m.bit_size,
                        m.type_name.as_str(),
                        m.count,
                        m.base,
                    )
                })
                .collect(),
        );
        canon.push(*first.entry(key).or_insert(i as u32));
    }
    for a in &mut d.accesses {
        a.ty = canon[a.ty as usize];
    }
    for s in d.slots.iter_mut().filter(|s| s.ty != NO_TYPE) {
        s.ty = canon[s.ty as usize];
    }
    for t in &mut d.types {
        for m in &mut t.members {
            if m.ty != NO_TYPE {
                m.ty = canon[m.ty as usize];
            }
        }
    }
}

/// Drops the types no access or stack slot reaches (through members),
/// renumbering.
fn prune(d: &mut DataTypes) {
    let n = d.types.len();
    let mut keep = vec![false; n];
    let mut stack: Vec<u32> = d.accesses.iter().map(|a| a.ty).collect();
    stack.extend(d.slots.iter().map(|s| s.ty).filter(|&t| t != NO_TYPE));
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
    for s in d.slots.iter_mut().filter(|s| s.ty != NO_TYPE) {
        s.ty = new_index[s.ty as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldcache_dump::{Member, TypeKind, Via};

    fn entity(decl: &str, flags_at: u64) -> DataType {
        DataType {
            name: "game::Entity".into(),
            kind: TypeKind::Struct,
            size: 192,
            members: vec![Member {
                name: "flags".into(),
                offset: flags_at,
                size: 2,
                type_name: "uint16_t".into(),
                ty: NO_TYPE,
                ..Member::default()
            }],
            decl: decl.into(),
        }
    }

    fn access(addr: u64, ty: u32) -> TypedAccess {
        TypedAccess {
            addr,
            ty,
            offset: 160,
            size: 2,
            path: vec![0],
            straddles: false,
            via: Via::Register,
            variable: "e".into(),
        }
    }

    /// Two compilation units' copies of one header's type become one; a
    /// different type of the same name stays apart.
    #[test]
    fn copies_of_a_type_from_several_units_are_one_type() {
        let mut d = DataTypes {
            types: vec![
                entity("a.h:3", 160),
                entity("a.h:3", 160),
                entity("other.c:9", 24),
            ],
            accesses: vec![access(0x10, 0), access(0x20, 1), access(0x30, 2)],
            modules: Vec::new(),
            slots: Vec::new(),
        };
        merge_duplicates(&mut d);
        prune(&mut d);
        assert_eq!(d.types.len(), 2);
        assert_eq!(d.accesses[0].ty, d.accesses[1].ty);
        assert_ne!(d.accesses[0].ty, d.accesses[2].ty);
        assert_eq!(d.types[d.accesses[2].ty as usize].decl, "other.c:9");
    }
}
