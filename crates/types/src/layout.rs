//! DWARF types to [`DataType`] layouts, and the member path of a byte
//! range in a layout ([`path_of`]).
//!
//! [`Layouts`] owns a module's DWARF and interns, on request, a type and
//! the types of its members (transitively) into [`Layouts::types`], keyed
//! by [`TypeRef`]: typedefs and cv-qualifiers peeled, arrays folded to
//! their element type, a declaration (`struct S;` in one unit) replaced by
//! the definition of the same qualified name from another unit. Struct,
//! class and union layouts follow the conventions of `docs/data-view.md`
//! (members in memory order, base classes as members with `base`,
//! bit-fields at the byte holding their first bit, anonymous members with
//! empty names); base types, enumerations and pointers are scalars.
//!
//! Bad DWARF never panics: a type that cannot be read (a broken reference,
//! a reference cycle through typedefs, an absurd size) is skipped and
//! counted in [`Layouts::skipped`].

use crate::{Reader, TypeRef};
use coldcache_dump::data::NO_TYPE;
use coldcache_dump::{DataType, Member, TypeKind};
use gimli::{AttributeValue, DwTag, Reader as _, Unit, UnitOffset};
use std::cell::OnceCell;
use std::collections::HashMap;

/// Longest chain of typedefs, qualifiers and arrays followed, and deepest
/// nesting of members interned (guards against reference cycles).
const MAX_DEPTH: usize = 64;
/// Largest type size believed (1 TiB); larger ones are bad DWARF.
const MAX_SIZE: u64 = 1 << 40;
/// Most members read from one type.
const MAX_MEMBERS: usize = 1 << 16;

/// A type with its typedefs, cv-qualifiers and arrays peeled away.
#[derive(Clone, Copy, Debug)]
pub struct Peeled {
    /// The type left (never a typedef, qualifier or array).
    pub die: TypeRef,
    /// Its tag.
    pub tag: DwTag,
    /// Elements when arrays were peeled (the product of every dimension;
    /// 0 when a bound is unknown), else `None`.
    pub count: Option<u64>,
    /// The last typedef peeled: it names an anonymous struct (C's
    /// `typedef struct { ... } name;`).
    pub typedef: Option<TypeRef>,
}

/// A module's DWARF and the types interned from it so far.
pub struct Layouts {
    dwarf: gimli::Dwarf<Reader>,
    /// Units in `.debug_info` order, with their start offsets.
    units: Vec<Unit<Reader>>,
    starts: Vec<usize>,
    /// Qualified scope (`game::World`) of the C++ types nested in one.
    scopes: HashMap<usize, String>,
    /// Every struct, class, union and enum entry, for `definitions`.
    type_dies: Vec<TypeRef>,
    /// Definitions of named structs, classes, unions and enums by
    /// qualified name, for resolving declarations (made at the first
    /// declaration met).
    definitions: OnceCell<HashMap<String, TypeRef>>,
    /// Variables with a fixed address (`DW_OP_addr`), for `globals`.
    fixed: Vec<(TypeRef, u64)>,
    interned: HashMap<TypeRef, u32>,
    /// The types interned, each once.
    pub types: Vec<DataType>,
    /// Types (or members) that could not be read and were left out.
    pub skipped: usize,
}

impl Layouts {
    /// Reads the unit headers of `dwarf` and the names of its scopes and
    /// type definitions (one pass over `.debug_info`).
    pub fn new(dwarf: gimli::Dwarf<Reader>) -> Layouts {
        let mut l = Layouts {
            dwarf,
            units: Vec::new(),
            starts: Vec::new(),
            scopes: HashMap::new(),
            type_dies: Vec::new(),
            definitions: OnceCell::new(),
            fixed: Vec::new(),
            interned: HashMap::new(),
            types: Vec::new(),
            skipped: 0,
        };
        let mut headers = l.dwarf.units();
        while let Ok(Some(h)) = headers.next() {
            let Some(start) = h.offset().as_debug_info_offset() else {
                continue;
            };
            match l.dwarf.unit(h) {
                Ok(u) => {
                    l.starts.push(start.0);
                    l.units.push(u);
                }
                Err(_) => l.skipped += 1,
            }
        }
        for ui in 0..l.units.len() {
            if l.scan(ui).is_err() {
                l.skipped += 1;
            }
        }
        l
    }

    /// The DWARF read.
    pub fn dwarf(&self) -> &gimli::Dwarf<Reader> {
        &self.dwarf
    }

    /// The units, in `.debug_info` order.
    pub fn units(&self) -> &[Unit<Reader>] {
        &self.units
    }

    /// The variables with a fixed address (`DW_OP_addr`, `DW_OP_addrx`
    /// alone), at any nesting: their entries and addresses.
    pub fn fixed_variables(&self) -> &[(TypeRef, u64)] {
        &self.fixed
    }

    /// Records the qualified scopes of the C++ types of unit `ui`, the
    /// struct, class, union and enum entries and the variables with a
    /// fixed address (one pass: `.debug_info` is read once, and subtrees
    /// that can hold neither, like a C struct's members, are skipped).
    fn scan(&mut self, ui: usize) -> gimli::Result<()> {
        let unit = &self.units[ui];
        let mut tree = unit.entries_tree(None)?;
        let root = tree.root()?;
        // C++ (98, 03, 11, 14, 17, 20) and Rust: types are named in scopes.
        let cpp = matches!(
            root.entry().attr_value(gimli::DW_AT_language)?,
            Some(AttributeValue::Language(l))
                if matches!(l.0, 0x04 | 0x19 | 0x1a | 0x21 | 0x2a | 0x2b | 0x1c)
        );
        let mut out = Scan::default();
        walk(&self.dwarf, unit, root, cpp, "", &mut out, 0)?;
        self.scopes.extend(out.scopes);
        self.fixed.extend(out.fixed);
        self.type_dies.extend(out.types);
        Ok(())
    }

    /// The unit holding `r` and `r`'s offset in it.
    pub fn locate(&self, r: TypeRef) -> Option<(&Unit<Reader>, UnitOffset<usize>)> {
        let i = self.starts.partition_point(|&s| s <= r.0).checked_sub(1)?;
        let unit = &self.units[i];
        Some((unit, r.to_unit_offset(&unit.header)?))
    }

    /// A reference attribute of the entry at `r`, as a [`TypeRef`].
    fn reference(&self, r: TypeRef, at: gimli::DwAt) -> Option<TypeRef> {
        let (unit, off) = self.locate(r)?;
        let e = unit.entry(off).ok()?;
        match e.attr_value(at).ok()?? {
            AttributeValue::UnitRef(o) => o.to_debug_info_offset(&unit.header),
            AttributeValue::DebugInfoRef(o) => Some(o),
            _ => None,
        }
    }

    /// The `DW_AT_type` of the entry at `r`.
    pub fn type_of(&self, r: TypeRef) -> Option<TypeRef> {
        self.reference(r, gimli::DW_AT_type)
    }

    fn tag(&self, r: TypeRef) -> Option<DwTag> {
        let (unit, off) = self.locate(r)?;
        Some(unit.entry(off).ok()?.tag())
    }

    fn udata(&self, r: TypeRef, at: gimli::DwAt) -> Option<u64> {
        let (unit, off) = self.locate(r)?;
        unit.entry(off).ok()?.attr_value(at).ok()??.udata_value()
    }

    fn flag(&self, r: TypeRef, at: gimli::DwAt) -> bool {
        self.locate(r)
            .and_then(|(unit, off)| unit.entry(off).ok()?.attr_value(at).ok()?)
            .is_some_and(|v| !matches!(v, AttributeValue::Flag(false)))
    }

    /// The `DW_AT_name` of the entry at `r` (unqualified).
    pub fn name(&self, r: TypeRef) -> Option<String> {
        let (unit, off) = self.locate(r)?;
        let v = unit.entry(off).ok()?.attr_value(gimli::DW_AT_name).ok()??;
        Some(
            self.dwarf
                .attr_string(unit, v)
                .ok()?
                .to_string_lossy()
                .ok()?
                .into_owned(),
        )
    }

    /// The name of the entry at `r` with its enclosing namespaces and
    /// classes (`game::Entity`).
    pub fn qualified_name(&self, r: TypeRef) -> Option<String> {
        let n = self.name(r)?;
        Some(match self.scopes.get(&r.0) {
            Some(p) => format!("{p}::{n}"),
            None => n,
        })
    }

    /// The definition a declaration stands for (itself when it is not a
    /// declaration, or when no definition of its name is known).
    fn definition(&self, r: TypeRef) -> TypeRef {
        if !self.flag(r, gimli::DW_AT_declaration) {
            return r;
        }
        let defs = self.definitions.get_or_init(|| {
            let mut m = HashMap::new();
            for &d in &self.type_dies {
                if self.flag(d, gimli::DW_AT_declaration)
                    || self.udata(d, gimli::DW_AT_byte_size).is_none()
                {
                    continue;
                }
                if let Some(n) = self.qualified_name(d) {
                    m.entry(n).or_insert(d);
                }
            }
            m
        });
        self.qualified_name(r)
            .and_then(|n| defs.get(&n).copied())
            .unwrap_or(r)
    }

    /// `r` with typedefs, cv-qualifiers and arrays peeled, declarations
    /// resolved; `None` for a broken reference, `void` or a cycle.
    pub fn peel(&self, r: TypeRef) -> Option<Peeled> {
        let mut r = r;
        let mut count: Option<u64> = None;
        let mut typedef = None;
        for _ in 0..MAX_DEPTH {
            let tag = self.tag(r)?;
            match tag {
                gimli::DW_TAG_typedef => {
                    typedef = Some(r);
                    r = self.type_of(r)?;
                }
                gimli::DW_TAG_const_type
                | gimli::DW_TAG_volatile_type
                | gimli::DW_TAG_restrict_type
                | gimli::DW_TAG_atomic_type
                | gimli::DW_TAG_immutable_type => r = self.type_of(r)?,
                gimli::DW_TAG_array_type => {
                    let n = self.array_count(r);
                    count = Some(count.unwrap_or(1).saturating_mul(n).min(MAX_SIZE));
                    r = self.type_of(r)?;
                }
                _ => {
                    let die = self.definition(r);
                    return Some(Peeled {
                        die,
                        tag: self.tag(die)?,
                        count,
                        typedef,
                    });
                }
            }
        }
        None
    }

    /// Elements of the array type at `r` (the product of its dimensions;
    /// 0 when a bound is unknown).
    fn array_count(&self, r: TypeRef) -> u64 {
        let Some((unit, off)) = self.locate(r) else {
            return 0;
        };
        let Ok(mut tree) = unit.entries_tree(Some(off)) else {
            return 0;
        };
        let Ok(root) = tree.root() else {
            return 0;
        };
        let mut children = root.children();
        let mut n: u64 = 1;
        let mut dims = 0;
        while let Ok(Some(c)) = children.next() {
            let e = c.entry();
            if e.tag() != gimli::DW_TAG_subrange_type && e.tag() != gimli::DW_TAG_enumeration_type {
                continue;
            }
            dims += 1;
            let get = |at| {
                e.attr_value(at)
                    .ok()
                    .flatten()
                    .and_then(|v: AttributeValue<Reader>| v.udata_value())
            };
            let d = match (get(gimli::DW_AT_count), get(gimli::DW_AT_upper_bound)) {
                (Some(c), _) => c,
                (None, Some(u)) => {
                    let lo = get(gimli::DW_AT_lower_bound).unwrap_or(0);
                    u.saturating_sub(lo).saturating_add(1)
                }
                _ => 0,
            };
            n = n.saturating_mul(d);
        }
        if dims == 0 {
            0
        } else {
            n
        }
    }

    /// `sizeof` the type at `r` (arrays: count × element), `None` when
    /// unknown or absurd.
    pub fn size_of(&self, r: TypeRef) -> Option<u64> {
        let p = self.peel(r)?;
        let one = match self.udata(p.die, gimli::DW_AT_byte_size) {
            Some(s) => s,
            None => match p.tag {
                gimli::DW_TAG_pointer_type
                | gimli::DW_TAG_reference_type
                | gimli::DW_TAG_rvalue_reference_type
                | gimli::DW_TAG_ptr_to_member_type => {
                    let (unit, _) = self.locate(p.die)?;
                    u64::from(unit.encoding().address_size)
                }
                _ => return None,
            },
        };
        let s = match p.count {
            Some(n) => one.checked_mul(n)?,
            None => one,
        };
        (s <= MAX_SIZE).then_some(s)
    }

    /// The type the pointer (or reference) that the 8 bytes at `offset`
    /// of one element of `r` exactly are points to: `r` itself when it is
    /// a pointer and `offset` is 0, else the pointer-typed member there,
    /// through nested members and arrays (`n->next`, a vector's
    /// `_M_start`). `None` for anything else and for `void *`.
    pub fn pointee_at(&self, r: TypeRef, offset: i64) -> Option<TypeRef> {
        let mut r = r;
        let mut off = u64::try_from(offset).ok()?;
        for _ in 0..MAX_DEPTH {
            let p = self.peel(r)?;
            if p.count.is_some() {
                let one = self.size_of(p.die).filter(|&s| s > 0)?;
                off %= one;
            }
            match p.tag {
                gimli::DW_TAG_pointer_type
                | gimli::DW_TAG_reference_type
                | gimli::DW_TAG_rvalue_reference_type => {
                    return (off == 0).then(|| self.type_of(p.die)).flatten();
                }
                gimli::DW_TAG_structure_type
                | gimli::DW_TAG_class_type
                | gimli::DW_TAG_union_type => {
                    let (m, at) = self.member_holding(p.die, off)?;
                    r = m;
                    off -= at;
                }
                _ => return None,
            }
        }
        None
    }

    /// The type and offset of the data member (or base class) of the
    /// struct at `die` whose bytes hold byte `off`; the first such in a
    /// union.
    fn member_holding(&self, die: TypeRef, off: u64) -> Option<(TypeRef, u64)> {
        let (unit, uoff) = self.locate(die)?;
        let mut tree = unit.entries_tree(Some(uoff)).ok()?;
        let root = tree.root().ok()?;
        let mut ch = root.children();
        while let Ok(Some(c)) = ch.next() {
            let e = c.entry();
            if !matches!(e.tag(), gimli::DW_TAG_member | gimli::DW_TAG_inheritance) {
                continue;
            }
            let get = |at| e.attr_value(at).ok().flatten();
            if get(gimli::DW_AT_declaration).is_some() || get(gimli::DW_AT_bit_size).is_some() {
                continue;
            }
            let at = match get(gimli::DW_AT_data_member_location) {
                None => 0,
                Some(AttributeValue::Exprloc(x)) => match plus_uconst(x.0) {
                    Some(v) => v,
                    None => continue,
                },
                Some(v) => match v.udata_value() {
                    Some(v) => v,
                    None => continue,
                },
            };
            let Some(AttributeValue::UnitRef(t)) = get(gimli::DW_AT_type) else {
                continue;
            };
            let Some(t) = t.to_debug_info_offset(&unit.header) else {
                continue;
            };
            let size = self.size_of(t).unwrap_or(0);
            if at <= off && off < at.saturating_add(size) {
                return Some((t, at));
            }
        }
        None
    }

    /// The type at `r` as the source writes it (`float[3]`, `const char*`,
    /// `game::Entity`).
    pub fn type_name(&self, r: TypeRef) -> String {
        self.type_name_at(Some(r), 0)
    }

    fn type_name_at(&self, r: Option<TypeRef>, depth: usize) -> String {
        let Some(r) = r else {
            return "void".to_string();
        };
        if depth > MAX_DEPTH {
            return "?".to_string();
        }
        let Some(tag) = self.tag(r) else {
            return "?".to_string();
        };
        let inner = || self.type_name_at(self.type_of(r), depth + 1);
        match tag {
            gimli::DW_TAG_const_type => format!("const {}", inner()),
            gimli::DW_TAG_volatile_type => format!("volatile {}", inner()),
            gimli::DW_TAG_atomic_type => format!("_Atomic {}", inner()),
            gimli::DW_TAG_restrict_type => format!("{} restrict", inner()),
            gimli::DW_TAG_pointer_type => format!("{}*", inner()),
            gimli::DW_TAG_reference_type => format!("{}&", inner()),
            gimli::DW_TAG_rvalue_reference_type => format!("{}&&", inner()),
            gimli::DW_TAG_ptr_to_member_type => "<member pointer>".to_string(),
            gimli::DW_TAG_subroutine_type => "<function>".to_string(),
            gimli::DW_TAG_array_type => {
                // Dimensions in order: element name then `[n]` per subrange.
                let mut dims = String::new();
                if let Some((unit, off)) = self.locate(r) {
                    if let Ok(mut tree) = unit.entries_tree(Some(off)) {
                        if let Ok(root) = tree.root() {
                            let mut ch = root.children();
                            while let Ok(Some(c)) = ch.next() {
                                let e = c.entry();
                                if e.tag() != gimli::DW_TAG_subrange_type {
                                    continue;
                                }
                                let get = |at| {
                                    e.attr_value(at)
                                        .ok()
                                        .flatten()
                                        .and_then(|v: AttributeValue<Reader>| v.udata_value())
                                };
                                match (get(gimli::DW_AT_count), get(gimli::DW_AT_upper_bound)) {
                                    (Some(c), _) => dims.push_str(&format!("[{c}]")),
                                    (None, Some(u)) => dims.push_str(&format!(
                                        "[{}]",
                                        u.saturating_add(1).saturating_sub(
                                            get(gimli::DW_AT_lower_bound).unwrap_or(0)
                                        )
                                    )),
                                    _ => dims.push_str("[]"),
                                }
                            }
                        }
                    }
                }
                format!("{}{dims}", inner())
            }
            _ => self
                .qualified_name(r)
                .unwrap_or_else(|| anonymous(tag).to_string()),
        }
    }

    /// The index of the layout of the type at `r` (typedefs, qualifiers
    /// and arrays peeled), interning it and its members' types when new;
    /// `None` when it cannot be read (counted in [`Layouts::skipped`]) or
    /// has no size (`void`, an incomplete type, a function).
    pub fn intern(&mut self, r: TypeRef) -> Option<u32> {
        let p = self.peel(r);
        let i = p.and_then(|p| self.intern_peeled(p.die, p.typedef, 0));
        if i.is_none() {
            self.skipped += 1;
        }
        i
    }

    fn intern_peeled(
        &mut self,
        die: TypeRef,
        typedef: Option<TypeRef>,
        depth: usize,
    ) -> Option<u32> {
        if let Some(&i) = self.interned.get(&die) {
            return Some(i);
        }
        if depth > MAX_DEPTH {
            return None;
        }
        let tag = self.tag(die)?;
        let kind = match tag {
            gimli::DW_TAG_structure_type => TypeKind::Struct,
            gimli::DW_TAG_class_type => TypeKind::Class,
            gimli::DW_TAG_union_type => TypeKind::Union,
            gimli::DW_TAG_subroutine_type | gimli::DW_TAG_unspecified_type => return None,
            _ => TypeKind::Scalar,
        };
        let size = self.size_of(die).filter(|&s| s > 0)?;
        let name = if kind == TypeKind::Scalar {
            self.type_name(die)
        } else {
            // An anonymous struct is called by the typedef that names it.
            self.qualified_name(die)
                .or_else(|| typedef.and_then(|t| self.qualified_name(t)))
                .unwrap_or_else(|| anonymous(tag).to_string())
        };
        let idx = u32::try_from(self.types.len()).ok()?;
        self.interned.insert(die, idx);
        self.types.push(DataType {
            name,
            kind,
            size,
            members: Vec::new(),
            decl: self.decl(die).unwrap_or_default(),
        });
        if kind != TypeKind::Scalar {
            let members = self.members(die, depth);
            self.types[idx as usize].members = members;
        }
        Some(idx)
    }

    /// `file:line` where the entry at `r` is declared.
    fn decl(&self, r: TypeRef) -> Option<String> {
        let (unit, off) = self.locate(r)?;
        let e = unit.entry(off).ok()?;
        let file = e.attr_value(gimli::DW_AT_decl_file).ok()??;
        let line = e.attr_value(gimli::DW_AT_decl_line).ok()??.udata_value()?;
        let idx = match file {
            AttributeValue::FileIndex(i) => i,
            v => v.udata_value()?,
        };
        let lp = unit.line_program.as_ref()?;
        let header = lp.header();
        let f = header.file(idx)?;
        let name = self
            .dwarf
            .attr_string(unit, f.path_name())
            .ok()?
            .to_string_lossy()
            .ok()?
            .into_owned();
        Some(format!("{name}:{line}"))
    }

    /// The members of the struct, class or union at `die`, in memory
    /// order, their types interned.
    fn members(&mut self, die: TypeRef, depth: usize) -> Vec<Member> {
        // First the raw facts (the tree borrows the unit), then interning.
        struct Raw {
            name: String,
            ty: Option<TypeRef>,
            loc: Option<u64>,
            bit_offset: Option<u64>,
            data_bit_offset: Option<u64>,
            bit_size: Option<u64>,
            byte_size: Option<u64>,
            base: bool,
        }
        let mut raws = Vec::new();
        let mut bad = 0usize;
        if let Some((unit, off)) = self.locate(die) {
            if let Ok(mut tree) = unit.entries_tree(Some(off)) {
                if let Ok(root) = tree.root() {
                    let mut ch = root.children();
                    while let Ok(Some(c)) = ch.next() {
                        if raws.len() >= MAX_MEMBERS {
                            bad += 1;
                            break;
                        }
                        let e = c.entry();
                        let base = match e.tag() {
                            gimli::DW_TAG_member => false,
                            gimli::DW_TAG_inheritance => true,
                            _ => continue,
                        };
                        let get = |at| e.attr_value(at).ok().flatten();
                        // Static data members (DWARF 4: a declaration).
                        if get(gimli::DW_AT_declaration).is_some()
                            || get(gimli::DW_AT_external).is_some()
                        {
                            continue;
                        }
                        let loc = match get(gimli::DW_AT_data_member_location) {
                            None => None,
                            Some(AttributeValue::Exprloc(x)) => match plus_uconst(x.0) {
                                Some(v) => Some(v),
                                None => {
                                    // A virtual base: its place is read at
                                    // run time.
                                    bad += 1;
                                    continue;
                                }
                            },
                            Some(v) => match v.udata_value() {
                                Some(v) => Some(v),
                                None => {
                                    bad += 1;
                                    continue;
                                }
                            },
                        };
                        let name = get(gimli::DW_AT_name)
                            .and_then(|v| self.dwarf.attr_string(unit, v).ok())
                            .and_then(|s| s.to_string_lossy().ok().map(|s| s.into_owned()))
                            .unwrap_or_default();
                        let ty = match get(gimli::DW_AT_type) {
                            Some(AttributeValue::UnitRef(o)) => {
                                o.to_debug_info_offset(&unit.header)
                            }
                            Some(AttributeValue::DebugInfoRef(o)) => Some(o),
                            _ => None,
                        };
                        let u = |at| get(at).and_then(|v| v.udata_value());
                        raws.push(Raw {
                            name,
                            ty,
                            loc,
                            bit_offset: u(gimli::DW_AT_bit_offset),
                            data_bit_offset: u(gimli::DW_AT_data_bit_offset),
                            bit_size: u(gimli::DW_AT_bit_size),
                            byte_size: u(gimli::DW_AT_byte_size),
                            base,
                        });
                    }
                }
            }
        }
        self.skipped += bad;
        let mut out = Vec::with_capacity(raws.len());
        for r in raws {
            let Some(ty) = r.ty else {
                self.skipped += 1;
                continue;
            };
            let type_name = self.type_name(ty);
            let name = if r.base && r.name.is_empty() {
                type_name.clone()
            } else {
                r.name
            };
            let peeled = self.peel(ty);
            let count = peeled.and_then(|p| p.count).unwrap_or(0);
            let (offset, size, bit_offset, bit_size) = match r.bit_size {
                Some(bits) if bits > 0 => {
                    // The member's first bit, from the start of the type.
                    let first = match (r.data_bit_offset, r.bit_offset) {
                        (Some(d), _) => d,
                        (None, Some(bo)) => {
                            // DWARF 2/3: bit_offset counts from the most
                            // significant bit of a storage unit of
                            // byte_size bytes at data_member_location
                            // (little-endian: from its high end).
                            let unit_bytes = r.byte_size.or_else(|| self.size_of(ty)).unwrap_or(0);
                            let from_low = unit_bytes
                                .saturating_mul(8)
                                .saturating_sub(bo.saturating_add(bits));
                            r.loc
                                .unwrap_or(0)
                                .saturating_mul(8)
                                .saturating_add(from_low)
                        }
                        (None, None) => r.loc.unwrap_or(0).saturating_mul(8),
                    };
                    let bo = first % 8;
                    let bits = bits.min(MAX_SIZE);
                    (first / 8, (bo + bits).div_ceil(8), bo as u32, bits as u32)
                }
                _ => (r.loc.unwrap_or(0), self.size_of(ty).unwrap_or(0), 0, 0),
            };
            let mty = match peeled {
                Some(p)
                    if matches!(
                        p.tag,
                        gimli::DW_TAG_structure_type
                            | gimli::DW_TAG_class_type
                            | gimli::DW_TAG_union_type
                    ) =>
                {
                    self.intern_peeled(p.die, p.typedef, depth + 1)
                        .unwrap_or_else(|| {
                            self.skipped += 1;
                            NO_TYPE
                        })
                }
                _ => NO_TYPE,
            };
            out.push(Member {
                name,
                offset,
                size,
                bit_offset,
                bit_size,
                type_name,
                ty: mty,
                count,
                base: r.base,
            });
        }
        // Memory order; the sort is stable, so declaration order breaks ties.
        out.sort_by_key(|m| m.offset);
        out
    }

    /// Moves the interned types out (the interning starts afresh).
    pub fn take_types(&mut self) -> Vec<DataType> {
        self.interned.clear();
        std::mem::take(&mut self.types)
    }
}

/// What [`Layouts::scan`] gathers from one unit.
#[derive(Default)]
struct Scan {
    scopes: Vec<(usize, String)>,
    fixed: Vec<(TypeRef, u64)>,
    types: Vec<TypeRef>,
}

/// Walks the children of `node` (whose qualified scope is `prefix`).
fn walk(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &Unit<Reader>,
    node: gimli::EntriesTreeNode<Reader>,
    cpp: bool,
    prefix: &str,
    out: &mut Scan,
    depth: usize,
) -> gimli::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut children = node.children();
    while let Some(child) = children.next()? {
        let e = child.entry();
        let tag = e.tag();
        let Some(off) = e.offset().to_debug_info_offset(&unit.header) else {
            continue;
        };
        let name = |e: &gimli::DebuggingInformationEntry<Reader>| -> gimli::Result<Option<String>> {
            Ok(match e.attr_value(gimli::DW_AT_name)? {
                Some(v) => Some(dwarf.attr_string(unit, v)?.to_string_lossy()?.into_owned()),
                None => None,
            })
        };
        let join = |n: &str| {
            if prefix.is_empty() {
                n.to_string()
            } else {
                format!("{prefix}::{n}")
            }
        };
        match tag {
            gimli::DW_TAG_variable => {
                if let Some(addr) = fixed_address(dwarf, unit, e) {
                    out.fixed.push((off, addr));
                }
            }
            gimli::DW_TAG_structure_type
            | gimli::DW_TAG_class_type
            | gimli::DW_TAG_union_type
            | gimli::DW_TAG_enumeration_type => {
                out.types.push(off);
                if cpp {
                    if !prefix.is_empty() {
                        out.scopes.push((off.0, prefix.to_string()));
                    }
                    if tag != gimli::DW_TAG_enumeration_type {
                        // Nested types are named in this one.
                        let inner = join(&name(e)?.unwrap_or_else(|| "<anonymous>".into()));
                        walk(dwarf, unit, child, cpp, &inner, out, depth + 1)?;
                    }
                }
                // C: members hold no variable and no scope.
            }
            gimli::DW_TAG_typedef if cpp && !prefix.is_empty() => {
                out.scopes.push((off.0, prefix.to_string()));
            }
            gimli::DW_TAG_namespace => {
                let inner = join(&name(e)?.unwrap_or_else(|| "(anonymous namespace)".into()));
                walk(dwarf, unit, child, cpp, &inner, out, depth + 1)?;
            }
            // Function statics and local types (named in the function's
            // enclosing scope).
            gimli::DW_TAG_subprogram
            | gimli::DW_TAG_lexical_block
            | gimli::DW_TAG_inlined_subroutine
            | gimli::DW_TAG_module => walk(dwarf, unit, child, cpp, prefix, out, depth + 1)?,
            _ => {}
        }
    }
    Ok(())
}

/// The address of a variable whose location is a fixed address alone
/// (not `DW_OP_addr; DW_OP_stack_value`, nor TLS's
/// `DW_OP_GNU_push_tls_address`).
fn fixed_address(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &Unit<Reader>,
    e: &gimli::DebuggingInformationEntry<Reader>,
) -> Option<u64> {
    let Ok(Some(AttributeValue::Exprloc(x))) = e.attr_value(gimli::DW_AT_location) else {
        return None;
    };
    let mut ops = x.operations(unit.encoding());
    let addr = match ops.next() {
        Ok(Some(gimli::Operation::Address { address })) => address,
        Ok(Some(gimli::Operation::AddressIndex { index })) => dwarf.address(unit, index).ok()?,
        _ => return None,
    };
    matches!(ops.next(), Ok(None)).then_some(addr)
}

/// The name given to an anonymous type of tag `tag`.
fn anonymous(tag: DwTag) -> &'static str {
    match tag {
        gimli::DW_TAG_class_type => "<anonymous class>",
        gimli::DW_TAG_union_type => "<anonymous union>",
        gimli::DW_TAG_enumeration_type => "<anonymous enum>",
        _ => "<anonymous struct>",
    }
}

/// The constant of a `DW_OP_plus_uconst N` expression (DWARF 2's
/// `DW_AT_data_member_location`); `None` for anything else.
fn plus_uconst(mut x: Reader) -> Option<u64> {
    if x.read_u8().ok()? != gimli::DW_OP_plus_uconst.0 {
        return None;
    }
    let v = x.read_uleb128().ok()?;
    x.is_empty().then_some(v)
}

/// The member path of the `size` bytes at `offset` in one element of type
/// `ty` (see `docs/data-view.md`): at the top level the member whose bytes
/// hold the access's first byte (in a union, the first member covering
/// the whole access, else the first holding its first byte); below it,
/// only members that hold the whole access, descending into struct
/// members and into one element of arrays of structs (so an 8-byte load
/// of `pos.x` and `pos.y` is `pos`). The flag says the access ends past
/// the field the path names (or past the type, when the path is empty).
pub fn path_of(types: &[DataType], ty: u32, offset: u64, size: u64) -> (Vec<u32>, bool) {
    path_of_kind(types, ty, offset, size, None)
}

/// Whether a member's type, as written, is a floating-point scalar.
fn is_float(type_name: &str) -> bool {
    matches!(
        type_name,
        "float" | "double" | "long double" | "f32" | "f64" | "_Float32" | "_Float64" | "__float128"
    )
}

/// [`path_of`] for an access known to be a floating-point one
/// (`Some(true)`: an SSE or x87 load) or an integer one (`Some(false)`):
/// in a union, a member of that kind covering the whole access is chosen
/// first (`movsd` of `union { int64_t i; double d; }` is `d`).
pub fn path_of_kind(
    types: &[DataType],
    ty: u32,
    offset: u64,
    size: u64,
    float: Option<bool>,
) -> (Vec<u32>, bool) {
    let mut path = Vec::new();
    let mut t = ty;
    let mut off = offset;
    let size = size.max(1);
    // The bytes, from `off`, of the innermost thing chosen so far.
    let mut extent = types.get(ty as usize).map_or(0, |d| d.size);
    for _ in 0..MAX_DEPTH {
        let Some(d) = types.get(t as usize) else {
            break;
        };
        let end = |m: &Member| m.offset.saturating_add(m.size);
        let holds = |m: &Member| m.size > 0 && m.offset <= off && off < end(m);
        let covers = |m: &Member| holds(m) && off.saturating_add(size) <= end(m);
        let chosen = if d.kind == TypeKind::Union {
            float
                .and_then(|f| {
                    d.members
                        .iter()
                        .position(|m| covers(m) && m.ty == NO_TYPE && is_float(&m.type_name) == f)
                })
                .or_else(|| d.members.iter().position(covers))
                .or_else(|| d.members.iter().position(holds))
        } else {
            d.members.iter().position(holds)
        };
        let Some(i) = chosen else {
            break;
        };
        let m = &d.members[i];
        // Inside a member, descend only into one that holds the whole
        // access: an 8-byte load of `pos.x` and `pos.y` is `pos`.
        if !path.is_empty() && off.saturating_add(size) > end(m) {
            break;
        }
        path.push(i as u32);
        off -= m.offset;
        extent = m.size;
        if m.ty == NO_TYPE {
            break;
        }
        let Some(sub) = types.get(m.ty as usize) else {
            break;
        };
        if m.count > 0 && sub.size > 0 {
            off %= sub.size;
            extent = sub.size;
        }
        t = m.ty;
    }
    (path, off.saturating_add(size) > extent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, offset: u64, size: u64, ty: u32, count: u64) -> Member {
        Member {
            name: name.into(),
            offset,
            size,
            ty,
            count,
            ..Member::default()
        }
    }

    /// 0: struct S { int a; /* 4 bytes padding */ double b; U u; P ps[2]; }
    /// 1: union U { int i; double d; }   2: struct P { short x, y; }
    fn types() -> Vec<DataType> {
        vec![
            DataType {
                name: "S".into(),
                size: 32,
                members: vec![
                    m("a", 0, 4, NO_TYPE, 0),
                    m("b", 8, 8, NO_TYPE, 0),
                    m("u", 16, 8, 1, 0),
                    m("ps", 24, 8, 2, 2),
                ],
                ..DataType::default()
            },
            DataType {
                name: "U".into(),
                kind: TypeKind::Union,
                size: 8,
                members: vec![m("i", 0, 4, NO_TYPE, 0), m("d", 0, 8, NO_TYPE, 0)],
                ..DataType::default()
            },
            DataType {
                name: "P".into(),
                size: 4,
                members: vec![m("x", 0, 2, NO_TYPE, 0), m("y", 2, 2, NO_TYPE, 0)],
                ..DataType::default()
            },
        ]
    }

    #[test]
    fn paths_by_hand() {
        let t = types();
        assert_eq!(path_of(&t, 0, 0, 4), (vec![0], false));
        // 8 bytes from a: over the padding.
        assert_eq!(path_of(&t, 0, 0, 8), (vec![0], true));
        // The padding itself.
        assert_eq!(path_of(&t, 0, 4, 4), (vec![], false));
        assert_eq!(path_of(&t, 0, 4, 8), (vec![], false));
        // A union: the first member covering the access, else the first
        // holding its first byte.
        assert_eq!(path_of(&t, 0, 16, 4), (vec![2, 0], false));
        assert_eq!(path_of(&t, 0, 16, 8), (vec![2, 1], false));
        assert_eq!(path_of(&t, 0, 20, 2), (vec![2, 1], false));
        // ps[1].y: 24 + 4 + 2, the element folded.
        assert_eq!(path_of(&t, 0, 30, 2), (vec![3, 1], false));
        // An 8-byte union member of each kind: the access's kind chooses.
        let mut t = t;
        let mut v = DataType {
            name: "V".into(),
            kind: TypeKind::Union,
            size: 8,
            members: vec![m("l", 0, 8, NO_TYPE, 0), m("d", 0, 8, NO_TYPE, 0)],
            ..DataType::default()
        };
        v.members[0].type_name = "long".into();
        v.members[1].type_name = "double".into();
        t.push(v);
        assert_eq!(path_of_kind(&t, 3, 0, 8, Some(true)), (vec![1], false));
        assert_eq!(path_of_kind(&t, 3, 0, 8, Some(false)), (vec![0], false));
        assert_eq!(path_of(&t, 3, 0, 8), (vec![0], false));
        // 4 bytes at ps[0].y run into ps[1].x: the array, straddling.
        assert_eq!(path_of(&t, 0, 26, 4), (vec![3], true));
        // Past the type.
        assert_eq!(path_of(&t, 2, 2, 4), (vec![1], true));
    }
}
