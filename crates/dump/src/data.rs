//! The data types a dump's memory accesses touch (section `DATA`, format
//! version 4).
//!
//! [`DataTypes`] says, for each instruction whose memory operand the
//! resolver could type, which type and which field of it the operand
//! reads or writes ([`TypedAccess`]), and keeps the layout of every type
//! named ([`DataType`]: members in memory order, offsets, sizes,
//! bit-fields, base classes), so the data views (`report --view data`,
//! `--view layout TYPE`) work from the dump alone. It is filled by the
//! resolver (`crates/types`, from DWARF) and read by the analysis; this
//! module only encodes and decodes it.
//!
//! A typed instruction's counters (its rows in `RECS`) are the field's:
//! the data views add the same rows the code views add, so their totals
//! agree by construction.

use crate::varint::{self, opt, unopt};
use crate::DumpError;

/// Sentinel for "no type" in [`Member::ty`].
pub const NO_TYPE: u32 = u32::MAX;

/// What kind of type a [`DataType`] is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TypeKind {
    /// `struct`.
    #[default]
    Struct,
    /// `class`.
    Class,
    /// `union`.
    Union,
    /// A base type (`int`, `double`, ...), pointer, enumeration or
    /// anything without members.
    Scalar,
}

impl TypeKind {
    fn code(self) -> u64 {
        match self {
            TypeKind::Struct => 0,
            TypeKind::Class => 1,
            TypeKind::Union => 2,
            TypeKind::Scalar => 3,
        }
    }
    fn from_code(c: u64) -> Option<Self> {
        Some(match c {
            0 => TypeKind::Struct,
            1 => TypeKind::Class,
            2 => TypeKind::Union,
            3 => TypeKind::Scalar,
            _ => return None,
        })
    }
    /// `struct`, `class`, `union` or empty, as C++ spells it.
    pub fn keyword(self) -> &'static str {
        match self {
            TypeKind::Struct => "struct",
            TypeKind::Class => "class",
            TypeKind::Union => "union",
            TypeKind::Scalar => "",
        }
    }
}

/// One member of a [`DataType`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Member {
    /// Its name (a base class's is the class's name; an anonymous
    /// struct or union member's is empty).
    pub name: String,
    /// Byte offset in the enclosing type (a bit-field's: the byte holding
    /// its first bit).
    pub offset: u64,
    /// Size in bytes (a bit-field's: the bytes its bits span).
    pub size: u64,
    /// A bit-field's first bit within the byte at `offset` (0 otherwise).
    pub bit_offset: u32,
    /// A bit-field's width in bits; 0 for a member that is not one.
    pub bit_size: u32,
    /// The member's type as written (`float[3]`, `Vec3`, `uint16_t`).
    pub type_name: String,
    /// The member's type (or its array's element type) when that type has
    /// members of its own (index into [`DataTypes::types`]), else
    /// [`NO_TYPE`].
    pub ty: u32,
    /// Elements when the member is an array (of `ty` or of a scalar),
    /// else 0.
    pub count: u64,
    /// A base class (C++ inheritance), not a data member.
    pub base: bool,
}

/// A type with its layout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataType {
    /// Its name, qualified as the source spells it (`game::Entity`);
    /// anonymous types get `<anonymous struct>`.
    pub name: String,
    /// Struct, class, union or scalar.
    pub kind: TypeKind,
    /// `sizeof`, in bytes.
    pub size: u64,
    /// Members in memory order (by offset, then declaration order).
    pub members: Vec<Member>,
    /// Where it is declared (`file:line`), empty when unknown.
    pub decl: String,
}

/// How the type of an instruction's memory operand was learned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The operand's base register holds a variable (parameter or local)
    /// that points to the type, by the DWARF location at the instruction.
    #[default]
    Register,
    /// The operand's address is inside a global or static variable.
    Global,
    /// The operand is a local variable in the function's stack frame.
    Stack,
}

impl Via {
    fn code(self) -> u64 {
        match self {
            Via::Register => 0,
            Via::Global => 1,
            Via::Stack => 2,
        }
    }
    fn from_code(c: u64) -> Option<Self> {
        Some(match c {
            0 => Via::Register,
            1 => Via::Global,
            2 => Via::Stack,
            _ => return None,
        })
    }
}

/// What one instruction's memory operand touches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypedAccess {
    /// Run-time address of the instruction.
    pub addr: u64,
    /// The outermost type the operand was found in (index into
    /// [`DataTypes::types`]).
    pub ty: u32,
    /// Byte offset of the operand in one element of `ty` (an array's
    /// element index is folded away).
    pub offset: u64,
    /// Operand size in bytes.
    pub size: u32,
    /// The member chosen at each nesting level, outermost first: index
    /// into the members of `ty`, then of that member's `ty`, and so on
    /// (arrays of structs folded). Empty when the operand is the whole of
    /// `ty` or falls in padding.
    pub path: Vec<u32>,
    /// The operand spans bytes of more than the field `path` names.
    pub straddles: bool,
    /// How the type was learned.
    pub via: Via,
    /// The variable through which it was learned (`e`, `entities`).
    pub variable: String,
}

/// The data types of a dump.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataTypes {
    /// Types, each once.
    pub types: Vec<DataType>,
    /// Typed instructions, sorted by address, no duplicates.
    pub accesses: Vec<TypedAccess>,
    /// Per module of the dump, in the same order: what the type reader
    /// found (`"312 types, 41 of 60 memory instructions typed"`, `"no
    /// DWARF"`), empty when it was not looked at.
    pub modules: Vec<String>,
    /// The local variables of the stack slots the objects' frames touched
    /// (`StackFrames::slots`), sorted by (pc, below), no duplicates
    /// (version 11, section `LOCL`; empty before).
    pub slots: Vec<TypedSlot>,
}

/// The local variable (or parameter) at one stack slot of a frame, as
/// DWARF places it at the frame's pc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypedSlot {
    /// Run-time pc in the frame's function.
    pub pc: u64,
    /// The slot's distance below the frame's CFA.
    pub below: u64,
    /// The variable's name; for a word of the frame's own, which no
    /// variable is, its kind in brackets: `[return address]`, `[saved
    /// rbx]`, `[return address of a call]`.
    pub variable: String,
    /// Its type (index into [`DataTypes::types`]); [`NO_TYPE`] for a word
    /// of the frame's own.
    pub ty: u32,
    /// Where the slot lies in the variable (bytes from its start).
    pub offset: u64,
}

impl DataTypes {
    /// The variable of the stack slot `below` its frame's CFA at `pc`.
    pub fn slot(&self, pc: u64, below: u64) -> Option<&TypedSlot> {
        self.slots
            .binary_search_by_key(&(pc, below), |s| (s.pc, s.below))
            .ok()
            .map(|i| &self.slots[i])
    }

    /// The typed access of the instruction at `addr`, when there is one.
    pub fn access(&self, addr: u64) -> Option<&TypedAccess> {
        self.accesses
            .binary_search_by_key(&addr, |a| a.addr)
            .ok()
            .map(|i| &self.accesses[i])
    }

    /// The members `a.path` names, outermost first, with the type each is
    /// a member of. Stops at an index that does not exist (never in a
    /// decoded dump: [`DataTypes::decode`] checks every path).
    pub fn members<'a>(&'a self, a: &TypedAccess) -> Vec<(&'a DataType, &'a Member)> {
        let mut out = Vec::with_capacity(a.path.len());
        let mut ty = a.ty;
        for &i in &a.path {
            let Some(t) = self.types.get(ty as usize) else {
                break;
            };
            let Some(m) = t.members.get(i as usize) else {
                break;
            };
            out.push((t, m));
            ty = m.ty;
        }
        out
    }

    /// The field an access names, as a person reads it: `Entity::flags`,
    /// `Entity::pos.y`, `Entity::<padding>` or `Entity` for the whole.
    pub fn field_name(&self, a: &TypedAccess) -> String {
        let mut s = self
            .types
            .get(a.ty as usize)
            .map(|t| t.name.clone())
            .unwrap_or_default();
        let members = self.members(a);
        if members.is_empty() && !a.path.is_empty() {
            return s;
        }
        for (i, (_, m)) in members.iter().enumerate() {
            s.push_str(if i == 0 { "::" } else { "." });
            if m.name.is_empty() {
                s.push_str("<anonymous>");
            } else {
                s.push_str(&m.name);
            }
        }
        s
    }

    /// The label of an access's field as the data views show it:
    /// [`DataTypes::field_name`] (`Entity::pos.y`) for a member path,
    /// `Entity::<padding>` for bytes of no member, `Entity` for the whole
    /// object; a scalar type with the variable it was reached through
    /// (`kTable (unsigned int)` for a global or a local, `*bytes (unsigned
    /// char)` through a pointer); `[straddles]` appended when the operand
    /// spans more than the field.
    pub fn label(&self, a: &TypedAccess) -> String {
        let mut s = match self.types.get(a.ty as usize) {
            Some(t) if t.kind == TypeKind::Scalar && !a.variable.is_empty() => match a.via {
                Via::Register => format!("*{} ({})", a.variable, t.name),
                _ => format!("{} ({})", a.variable, t.name),
            },
            Some(t) if a.path.is_empty() && t.kind != TypeKind::Scalar => {
                if a.offset == 0 && u64::from(a.size) >= t.size {
                    t.name.clone()
                } else {
                    format!("{}::<padding>", t.name)
                }
            }
            _ => self.field_name(a),
        };
        if a.straddles {
            s.push_str(" [straddles]");
        }
        s
    }

    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        varint::put(b, self.types.len() as u64);
        for t in &self.types {
            varint::put_bytes(b, t.name.as_bytes());
            varint::put(b, t.kind.code());
            varint::put(b, t.size);
            varint::put_bytes(b, t.decl.as_bytes());
            varint::put(b, t.members.len() as u64);
            for m in &t.members {
                varint::put_bytes(b, m.name.as_bytes());
                varint::put(b, m.offset);
                varint::put(b, m.size);
                varint::put(b, m.bit_offset.into());
                varint::put(b, m.bit_size.into());
                varint::put_bytes(b, m.type_name.as_bytes());
                varint::put(b, opt(m.ty));
                varint::put(b, m.count);
                varint::put(b, m.base.into());
            }
        }
        varint::put(b, self.accesses.len() as u64);
        let mut prev = 0u64;
        for a in &self.accesses {
            varint::put(b, a.addr.wrapping_sub(prev));
            prev = a.addr;
            varint::put(b, a.ty.into());
            varint::put(b, a.offset);
            varint::put(b, a.size.into());
            varint::put(b, a.path.len() as u64);
            for &i in &a.path {
                varint::put(b, i.into());
            }
            varint::put(b, a.straddles.into());
            varint::put(b, a.via.code());
            varint::put_bytes(b, a.variable.as_bytes());
        }
        varint::put(b, self.modules.len() as u64);
        for m in &self.modules {
            varint::put_bytes(b, m.as_bytes());
        }
    }

    /// Section `LOCL` (version 11): `slots`.
    pub(crate) fn encode_slots(&self, b: &mut Vec<u8>) {
        varint::put(b, self.slots.len() as u64);
        for s in &self.slots {
            varint::put(b, s.pc);
            varint::put(b, s.below);
            varint::put_bytes(b, s.variable.as_bytes());
            varint::put(b, s.ty.into());
            varint::put(b, s.offset);
        }
    }

    pub(crate) fn decode_slots(&mut self, buf: &[u8]) -> Result<(), DumpError> {
        const S: &str = "LOCL";
        let bad = |what: String| DumpError::Malformed { section: S, what };
        let mut r = varint::Reader::new(buf, S);
        let n = r.count(5)?;
        let mut slots: Vec<TypedSlot> = Vec::with_capacity(n);
        for i in 0..n {
            let s = TypedSlot {
                pc: r.get()?,
                below: r.get()?,
                variable: r.string()?,
                ty: r.get_u32()?,
                offset: r.get()?,
            };
            if s.ty != NO_TYPE && s.ty as usize >= self.types.len() {
                return Err(bad(format!(
                    "stack slot {i} refers to type {} of {}",
                    s.ty,
                    self.types.len()
                )));
            }
            if slots
                .last()
                .is_some_and(|p| (p.pc, p.below) >= (s.pc, s.below))
            {
                return Err(bad(format!(
                    "stack slot {i} ({:#x}, {}) is not after the previous one",
                    s.pc, s.below
                )));
            }
            slots.push(s);
        }
        r.finish()?;
        self.slots = slots;
        Ok(())
    }

    pub(crate) fn decode(buf: &[u8], nmodules: usize) -> Result<DataTypes, DumpError> {
        const S: &str = "DATA";
        let bad = |what: String| DumpError::Malformed { section: S, what };
        let mut r = varint::Reader::new(buf, S);
        let n = r.count(5)?;
        let mut types = Vec::with_capacity(n);
        for i in 0..n {
            let name = r.string()?;
            let code = r.get()?;
            let kind = TypeKind::from_code(code)
                .ok_or_else(|| bad(format!("type {i} has unknown kind {code}")))?;
            let size = r.get()?;
            let decl = r.string()?;
            let nm = r.count(9)?;
            let mut members = Vec::with_capacity(nm);
            for _ in 0..nm {
                members.push(Member {
                    name: r.string()?,
                    offset: r.get()?,
                    size: r.get()?,
                    bit_offset: r.get_u32()?,
                    bit_size: r.get_u32()?,
                    type_name: r.string()?,
                    ty: unopt(r.get_u32()?),
                    count: r.get()?,
                    base: r.get()? != 0,
                });
            }
            types.push(DataType {
                name,
                kind,
                size,
                members,
                decl,
            });
        }
        for (i, t) in types.iter().enumerate() {
            for m in &t.members {
                if m.ty != NO_TYPE && m.ty as usize >= types.len() {
                    return Err(bad(format!(
                        "member {} of type {i} refers to type {} of {}",
                        m.name,
                        m.ty,
                        types.len()
                    )));
                }
            }
        }
        let n = r.count(8)?;
        let mut accesses: Vec<TypedAccess> = Vec::with_capacity(n);
        let mut prev = 0u64;
        for i in 0..n {
            let delta = r.get()?;
            let addr = prev.wrapping_add(delta);
            if i > 0 && (delta == 0 || addr < prev) {
                return Err(bad(format!(
                    "typed access {i} at {addr:#x} is not after the previous one"
                )));
            }
            prev = addr;
            let ty = r.get_u32()?;
            let offset = r.get()?;
            let size = r.get_u32()?;
            let np = r.count(1)?;
            let mut path = Vec::with_capacity(np);
            for _ in 0..np {
                path.push(r.get_u32()?);
            }
            let straddles = r.get()? != 0;
            let code = r.get()?;
            let via = Via::from_code(code)
                .ok_or_else(|| bad(format!("typed access {addr:#x} has unknown origin {code}")))?;
            let variable = r.string()?;
            // Every level of the path must name a member that exists.
            let mut t = ty;
            for &m in &path {
                let member = types
                    .get(t as usize)
                    .and_then(|t| t.members.get(m as usize))
                    .ok_or_else(|| {
                        bad(format!(
                            "typed access {addr:#x} names member {m} of type {t}, which has none such"
                        ))
                    })?;
                t = member.ty;
            }
            if ty as usize >= types.len() {
                return Err(bad(format!(
                    "typed access {addr:#x} refers to type {ty} of {}",
                    types.len()
                )));
            }
            accesses.push(TypedAccess {
                addr,
                ty,
                offset,
                size,
                path,
                straddles,
                via,
                variable,
            });
        }
        let n = r.count(1)?;
        if n != nmodules {
            return Err(bad(format!(
                "{n} module entries for {nmodules} modules in MODS"
            )));
        }
        let mut modules = Vec::with_capacity(n);
        for _ in 0..n {
            modules.push(r.string()?);
        }
        r.finish()?;
        Ok(DataTypes {
            types,
            accesses,
            modules,
            slots: Vec::new(),
        })
    }
}
