//! Parameters and local variables by their location at an instruction
//! (issue 32): which pointer variable a register holds at a pc, and which
//! variable of the stack frame an rsp/rbp-based operand falls in.
//!
//! [`Locals::read`] walks every `DW_TAG_formal_parameter` and
//! `DW_TAG_variable` under a `DW_TAG_subprogram` (through lexical blocks
//! and inlined subroutines, `DW_AT_abstract_origin` followed for name and
//! type) and keeps, per address range where its location holds:
//! - `DW_OP_regN` alone, or as the first 8-byte piece, when its type,
//!   through typedefs and cv-qualifiers, is a pointer or reference, or a
//!   struct whose first 8 bytes are one (a C++ iterator, a Rust slice's
//!   `data_ptr`, `Box`, `NonNull`): the pointee's [`TypeRef`] as DWARF has
//!   it (typedefs not peeled); and `DW_OP_bregN k; DW_OP_stack_value` of
//!   such a variable (the code moved the pointer by a constant), for
//!   [`Variables::pointer_seed`] only;
//! - `DW_OP_fbreg(off)` (frame base from the subprogram's
//!   `DW_AT_frame_base`: `DW_OP_call_frame_cfa`, `DW_OP_reg6/7` or
//!   `DW_OP_breg6/7(k)`) or `DW_OP_breg6/7(off)` alone, when the size of
//!   its type is known: a stack slot.
//!
//! Lookups: the innermost scope wins (an inlined subroutine's parameter
//! over its caller's variable); candidates of the same depth that disagree
//! on the type (compared through typedefs and cv-qualifiers), or for a
//! stack slot on the offset, give no answer rather than a guess.
//!
//! Ranges come from the location list (DWARF 4 `.debug_loc`, DWARF 5
//! `.debug_loclists`) or, for a single expression, from the enclosing
//! scopes' pc ranges. Both kinds are indexed in an interval tree by pc
//! (sorted by start, with each subtree's greatest end), so a lookup costs
//! O(log n + hits). A stack slot relative to the CFA is compared with an
//! rsp/rbp operand through the call frame information (`.eh_frame`, else
//! `.debug_frame`): CFA = rsp + k or rbp + k at the pc.
//!
//! Nothing panics on bad DWARF: an entry, attribute or frame description
//! that cannot be read, and a type named through a type unit's signature
//! or a supplementary file (not followed), is skipped and counted in
//! [`Locals::skipped`]. Locations of other shapes (pieces, values computed
//! on the DWARF stack, memory through other registers, a frame base given
//! as a location list) are simply not kept: they answer no lookup.
//! Known limit: with a frame pointer, an rsp-based operand at a pc where
//! the CFA is rbp-based finds no CFA-relative slot (rsp's distance to the
//! CFA is not in the CFI there); rbp-based and rsp-described slots still
//! match directly.

use std::collections::HashMap;
use std::rc::Rc;

use gimli::Reader as _;
use gimli::{
    AttributeValue, BaseAddresses, DebugFrame, DebugInfoOffset, EhFrame, FrameDescriptionEntry,
    Operation, UnitOffset, UnwindContext, UnwindSection,
};
use object::{Object, ObjectSection};

use crate::operand::{Variable, Variables};
use crate::{Reader, TypeRef};

/// Why the variables of a file could not be read at all (anything less is
/// skipped and counted in [`Locals::skipped`]).
#[derive(Debug, thiserror::Error)]
pub enum LocalsError {
    /// The first unit header of `.debug_info` is unreadable, so no unit
    /// can be found.
    #[error("unreadable .debug_info unit headers: {0}")]
    UnitHeaders(gimli::Error),
}

/// DWARF register numbers of x86-64's frame registers.
const RBP: u16 = 6;
const RSP: u16 = 7;

/// Hops through typedefs, qualifiers or abstract origins before giving up
/// (a cycle in bad DWARF).
const MAX_HOPS: usize = 32;

/// Parameters and local variables of a file, indexed by pc (see the
/// module comment).
pub struct Locals {
    /// What the index entries point at.
    vars: Vec<Var>,
    /// Pointer variables held in a whole register, by pc range, one tree
    /// per DWARF register number (a lookup asks about one register: in a
    /// large function most variables' ranges hold the pc, and one tree
    /// made the lookups a fifth of a CPython resolution).
    regs: Vec<IntervalTree<RegSlot>>,
    /// Variables in the stack frame, by pc range.
    stack: IntervalTree<StackSlot>,
    /// Call frame information, for the CFA at a pc.
    cfi: Cfi,
    /// Entries, attributes, units and frame descriptions that could not
    /// be read and were skipped.
    pub skipped: u64,
    /// Parameters and variables found in a register (as a pointer) or a
    /// stack slot somewhere, each counted once.
    pub variables: u64,
}

/// A variable: its name, and the type the lookups answer with.
struct Var {
    name: String,
    /// For a register variable: the pointee. For a stack variable: its
    /// own type.
    ty: TypeRef,
    /// `ty` through typedefs and cv-qualifiers: two candidates agree when
    /// this is the same.
    peeled: TypeRef,
    /// Size in bytes of its type (stack variables; 0 for pointers).
    size: u64,
}

#[derive(Clone, Copy)]
struct RegSlot {
    reg: u16,
    depth: u32,
    var: u32,
    /// The register's value minus the variable's: 0 for `DW_OP_regN`,
    /// `-k` for `DW_OP_bregN k; DW_OP_stack_value`.
    off: i64,
}

/// Where a stack slot's address is: `base + off`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Base {
    /// The canonical frame address.
    Cfa,
    /// A register's value (rbp or rsp) at the pc.
    Reg(u16),
}

#[derive(Clone, Copy)]
struct StackSlot {
    base: Base,
    off: i64,
    depth: u32,
    var: u32,
}

/// A location expression, reduced to what the lookups use.
#[derive(Clone, Copy)]
enum Loc {
    /// `DW_OP_regN` alone, or the first piece of 8 bytes (a slice's or
    /// an iterator's pointer).
    Reg(u16),
    /// `DW_OP_bregN k; DW_OP_stack_value`: the value is the register plus
    /// `k` (a pointer the code moved to a member before a loop).
    RegPlus(u16, i64),
    /// In memory at `base + off`.
    Mem(Base, i64),
    /// Anything else (pieces, computed values, other registers' memory).
    Other,
}

/// A subprogram's `DW_AT_frame_base`: the frame base is `base + off`.
#[derive(Clone, Copy)]
struct FrameBase {
    base: Base,
    off: i64,
}

impl Locals {
    /// Reads the parameters and locals of `dwarf` and the call frame
    /// information of `obj` (the file whose `.eh_frame`/`.debug_frame`
    /// has contents: the module itself when `dwarf` comes from a separate
    /// debug file). Addresses are the file's virtual addresses.
    pub fn read(dwarf: &gimli::Dwarf<Reader>, obj: &object::File) -> Result<Locals, LocalsError> {
        Locals::read_at(dwarf, obj, None)
    }

    /// [`Locals::read`], walking only the units whose code ranges hold one
    /// of `pcs` (sorted file addresses: the instructions to be typed;
    /// `None`: every unit). A lookup at another unit's pc answers nothing.
    /// Walking every unit of a C library's debug file was most of a
    /// resolution's time for the few units a capture touches. When the
    /// units walked hold no located variable, the others are walked too
    /// (so "no variables" still speaks of the whole file).
    pub fn read_at(
        dwarf: &gimli::Dwarf<Reader>,
        obj: &object::File,
        pcs: Option<&[u64]>,
    ) -> Result<Locals, LocalsError> {
        let mut b = Builder {
            dwarf,
            units: Vec::new(),
            vars: Vec::new(),
            var_of_die: HashMap::new(),
            pointee_of: HashMap::new(),
            size_of: HashMap::new(),
            regs: Vec::new(),
            stack: Vec::new(),
            skipped: 0,
        };
        let mut headers = dwarf.units();
        loop {
            match headers.next() {
                Ok(Some(header)) => match dwarf.unit(header) {
                    Ok(unit) => b.units.push(unit),
                    Err(_) => b.skipped += 1,
                },
                Ok(None) => break,
                Err(e) if b.units.is_empty() && b.skipped == 0 => {
                    return Err(LocalsError::UnitHeaders(e));
                }
                Err(_) => {
                    b.skipped += 1;
                    break;
                }
            }
        }
        let mut left = Vec::new();
        for u in 0..b.units.len() {
            if pcs.is_some_and(|pcs| !covers(dwarf, &b.units[u], pcs)) {
                left.push(u);
                continue;
            }
            b.walk_unit(u);
        }
        if !b.var_of_die.values().any(Option::is_some) {
            // The walked units added no variable: the others, as if all
            // had been walked in order.
            for u in left {
                b.walk_unit(u);
            }
        }
        let (cfi, cfi_skipped) = Cfi::read(obj);
        let mut dies: Vec<DebugInfoOffset> = b
            .var_of_die
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| k.0)
            .collect();
        dies.sort_unstable();
        dies.dedup();
        Ok(Locals {
            variables: dies.len() as u64,
            vars: b.vars,
            regs: {
                let mut by_reg: Vec<Vec<(u64, u64, RegSlot)>> = Vec::new();
                for item in b.regs {
                    let r = usize::from(item.2.reg);
                    if by_reg.len() <= r {
                        by_reg.resize_with(r + 1, Vec::new);
                    }
                    by_reg[r].push(item);
                }
                by_reg.into_iter().map(IntervalTree::new).collect()
            },
            stack: IntervalTree::new(b.stack),
            cfi,
            skipped: b.skipped + cfi_skipped,
        })
    }
}

/// Whether `unit`'s code ranges hold one of `pcs` (sorted); true when
/// its ranges cannot be read or it states none (it cannot be ruled out).
fn covers(dwarf: &gimli::Dwarf<Reader>, unit: &gimli::Unit<Reader>, pcs: &[u64]) -> bool {
    let Ok(mut ranges) = dwarf.unit_ranges(unit) else {
        return true;
    };
    let mut any = false;
    loop {
        match ranges.next() {
            Ok(Some(r)) => {
                any = true;
                let i = pcs.partition_point(|&p| p < r.begin);
                if pcs.get(i).is_some_and(|&p| p < r.end) {
                    return true;
                }
            }
            Ok(None) => return !any,
            Err(_) => return true,
        }
    }
}

impl Locals {
    fn pointer(&self, pc: u64, reg: u16, moved: bool) -> Option<(Variable, i64)> {
        let mut best: Option<(u32, u32, i64)> = None; // (depth, var, off)
        let mut ambiguous = false;
        self.regs.get(usize::from(reg))?.query(pc, |s| {
            if s.off != 0 && !moved {
                return;
            }
            match best {
                Some((d, _, _)) if s.depth < d => {}
                Some((d, v, o)) if s.depth == d => {
                    if self.vars[v as usize].peeled != self.vars[s.var as usize].peeled
                        || o != s.off
                    {
                        ambiguous = true;
                    }
                }
                _ => {
                    best = Some((s.depth, s.var, s.off));
                    ambiguous = false;
                }
            }
        });
        if ambiguous {
            return None;
        }
        let (_, var, off) = best?;
        let v = &self.vars[var as usize];
        Some((
            Variable {
                name: v.name.clone(),
                ty: v.ty,
                offset: 0,
            },
            off,
        ))
    }
}

impl Variables for Locals {
    fn pointer_in_register(&self, pc: u64, reg: u16) -> Option<Variable> {
        self.pointer(pc, reg, false).map(|(v, _)| v)
    }

    /// Also where the register holds the pointer moved by a constant
    /// (`DW_OP_bregN k; DW_OP_stack_value`).
    fn pointer_seed(&self, pc: u64, reg: u16) -> Option<(Variable, i64)> {
        self.pointer(pc, reg, true)
    }

    fn saved_register(&self, pc: u64, below: u64) -> Option<u16> {
        let at = i64::try_from(below).ok()?.checked_neg()?;
        let rules = self.cfi.rules_at(pc)?;
        rules
            .saved
            .iter()
            .find(|&&(n, _)| n <= at && at < n.saturating_add(8))
            .map(|&(_, r)| r)
    }

    fn cfa_offset(&self, pc: u64) -> Option<(u16, i64)> {
        self.cfi.cfa_at(pc)
    }

    /// The CFA at `pc` is rsp or rbp plus k (the call frame information):
    /// the byte is that register plus `k - below`.
    fn frame_slot(&self, pc: u64, below: u64) -> Option<Variable> {
        let (reg, k) = self.cfi.cfa_at(pc)?;
        let disp = k.checked_sub(i64::try_from(below).ok()?)?;
        self.stack_variable(pc, reg, disp, 1)
    }

    fn stack_variable(&self, pc: u64, reg: u16, disp: i64, size: u32) -> Option<Variable> {
        if reg != RSP && reg != RBP {
            return None;
        }
        let size = i64::from(size.max(1));
        // The CFA rule, read once and only if a slot needs it.
        let mut cfa: Option<Option<(u16, i64)>> = None;
        let mut best: Option<(u32, u32, u64)> = None; // (depth, var, offset)
        let mut ambiguous = false;
        self.stack.query(pc, |s| {
            let var = &self.vars[s.var as usize];
            // The operand's start and the slot's start, in one frame of
            // reference: the register itself, else the CFA.
            let (op, start) = if s.base == Base::Reg(reg) {
                (disp, s.off)
            } else {
                let Some((cfa_reg, k)) = *cfa.get_or_insert_with(|| self.cfi.cfa_at(pc)) else {
                    return;
                };
                if cfa_reg != reg {
                    return;
                }
                let start = match s.base {
                    Base::Cfa => s.off,
                    Base::Reg(r) if r == cfa_reg => s.off.wrapping_sub(k),
                    Base::Reg(_) => return,
                };
                // reg = CFA - k.
                (disp.wrapping_sub(k), start)
            };
            let Ok(vsize) = i64::try_from(var.size) else {
                return;
            };
            let inside = op >= start
                && op
                    .checked_add(size)
                    .zip(start.checked_add(vsize))
                    .is_some_and(|(e, ve)| e <= ve);
            if !inside {
                return;
            }
            let offset = (op - start) as u64;
            match best {
                Some((d, _, _)) if s.depth < d => {}
                Some((d, v, o)) if s.depth == d => {
                    if v != s.var && (self.vars[v as usize].peeled != var.peeled || o != offset) {
                        ambiguous = true;
                    }
                }
                _ => {
                    best = Some((s.depth, s.var, offset));
                    ambiguous = false;
                }
            }
        });
        if ambiguous {
            return None;
        }
        let (_, v, offset) = best?;
        let v = &self.vars[v as usize];
        Some(Variable {
            name: v.name.clone(),
            ty: v.ty,
            offset,
        })
    }
}

/// The state of one [`Locals::read`].
struct Builder<'a> {
    dwarf: &'a gimli::Dwarf<Reader>,
    /// Every readable unit, in `.debug_info` order (for references across
    /// units).
    units: Vec<gimli::Unit<Reader>>,
    vars: Vec<Var>,
    /// Variable DIE -> index in `vars` (None: not usable), per use.
    var_of_die: HashMap<(DebugInfoOffset, bool), Option<u32>>,
    /// Type -> pointee when it is a pointer or reference (memo).
    pointee_of: HashMap<DebugInfoOffset, Option<TypeRef>>,
    /// Type -> size in bytes (memo).
    size_of: HashMap<DebugInfoOffset, Option<u64>>,
    regs: Vec<(u64, u64, RegSlot)>,
    stack: Vec<(u64, u64, StackSlot)>,
    skipped: u64,
}

/// The enclosing scope of the DIEs being walked.
#[derive(Clone)]
struct Scope {
    /// Nesting depth below the subprogram (0: the subprogram itself).
    depth: u32,
    /// The pc ranges of the innermost scope that has some.
    ranges: Rc<Vec<(u64, u64)>>,
    frame_base: Option<FrameBase>,
}

impl Builder<'_> {
    fn walk_unit(&mut self, u: usize) {
        let unit = &self.units[u];
        let mut tree = match unit.entries_tree(None) {
            Ok(t) => t,
            Err(_) => {
                self.skipped += 1;
                return;
            }
        };
        let root = match tree.root() {
            Ok(r) => r,
            Err(_) => {
                self.skipped += 1;
                return;
            }
        };
        // Collect the work first: the tree borrows the unit, and the
        // handlers need `&mut self`. Variables are recorded as (offset,
        // scope) and handled after the walk.
        let mut found: Vec<(UnitOffset, Scope)> = Vec::new();
        let mut skipped = 0;
        walk(self.dwarf, unit, root, None, &mut found, &mut skipped);
        self.skipped += skipped;
        for (off, scope) in found {
            self.variable(u, off, &scope);
        }
    }

    /// One parameter or variable DIE inside a subprogram.
    fn variable(&mut self, u: usize, off: UnitOffset, scope: &Scope) {
        let unit = &self.units[u];
        let Ok(entry) = unit.entry(off) else {
            self.skipped += 1;
            return;
        };
        let value = match entry.attr_value(gimli::DW_AT_location) {
            Ok(Some(v)) => v,
            Ok(None) => return,
            Err(_) => {
                self.skipped += 1;
                return;
            }
        };
        let encoding = unit.encoding();
        // (range, location) pairs.
        let mut pieces: Vec<((u64, u64), Loc)> = Vec::new();
        match value {
            AttributeValue::Exprloc(expr) => {
                let loc = parse_loc(expr, encoding, scope.frame_base);
                if matches!(loc, Loc::Other) {
                    return;
                }
                for &r in scope.ranges.iter() {
                    pieces.push((r, loc));
                }
            }
            v => match self.dwarf.attr_locations(unit, v) {
                Ok(Some(mut list)) => loop {
                    match list.next() {
                        Ok(Some(e)) => {
                            let loc = parse_loc(e.data, encoding, scope.frame_base);
                            if !matches!(loc, Loc::Other) {
                                pieces.push(((e.range.begin, e.range.end), loc));
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            self.skipped += 1;
                            break;
                        }
                    }
                },
                Ok(None) => return,
                Err(_) => {
                    self.skipped += 1;
                    return;
                }
            },
        }
        for ((lo, hi), loc) in pieces {
            if lo >= hi {
                continue;
            }
            match loc {
                Loc::Reg(_) | Loc::RegPlus(..) => {
                    let (reg, k) = match loc {
                        Loc::RegPlus(reg, k) => (reg, k),
                        Loc::Reg(reg) => (reg, 0),
                        _ => continue,
                    };
                    if let Some(var) = self.var_index(u, off, true) {
                        self.regs.push((
                            lo,
                            hi,
                            RegSlot {
                                reg,
                                depth: scope.depth,
                                var,
                                off: k.wrapping_neg(),
                            },
                        ));
                    }
                }
                Loc::Mem(base, o) => {
                    if let Some(var) = self.var_index(u, off, false) {
                        self.stack.push((
                            lo,
                            hi,
                            StackSlot {
                                base,
                                off: o,
                                depth: scope.depth,
                                var,
                            },
                        ));
                    }
                }
                Loc::Other => {}
            }
        }
    }

    /// The index in `vars` of the variable DIE as a pointer (`pointer`) or
    /// as a stack object; None when it has no usable name and type.
    fn var_index(&mut self, u: usize, off: UnitOffset, pointer: bool) -> Option<u32> {
        let key = (off.to_debug_info_offset(&self.units[u].header)?, pointer);
        if let Some(&v) = self.var_of_die.get(&key) {
            return v;
        }
        let v = self.make_var(u, off, pointer);
        self.var_of_die.insert(key, v);
        v
    }

    fn make_var(&mut self, u: usize, off: UnitOffset, pointer: bool) -> Option<u32> {
        let (name, ty) = self.name_and_type(u, off);
        let ty = ty?;
        let (ty, size) = if pointer {
            (self.pointee(ty)?, 0)
        } else {
            let size = self.type_size(ty)?;
            (ty, size)
        };
        let peeled = self.peel(ty);
        let i = u32::try_from(self.vars.len()).ok()?;
        self.vars.push(Var {
            name: name.unwrap_or_default(),
            ty,
            peeled,
            size,
        });
        Some(i)
    }

    /// The unit holding `.debug_info` offset `off`, and the offset in it.
    fn locate(&self, off: DebugInfoOffset) -> Option<(usize, UnitOffset)> {
        let i = self.units.partition_point(|u| {
            u.header
                .offset()
                .as_debug_info_offset()
                .is_some_and(|o| o <= off)
        });
        let u = i.checked_sub(1)?;
        Some((u, off.to_unit_offset(&self.units[u].header)?))
    }

    /// A reference attribute as a `.debug_info` offset.
    fn reference(&self, u: usize, v: AttributeValue<Reader>) -> Option<DebugInfoOffset> {
        match v {
            AttributeValue::UnitRef(o) => o.to_debug_info_offset(&self.units[u].header),
            AttributeValue::DebugInfoRef(o) => Some(o),
            _ => None,
        }
    }

    /// Name and type of a variable DIE, following abstract origins.
    fn name_and_type(&mut self, u: usize, off: UnitOffset) -> (Option<String>, Option<TypeRef>) {
        let (mut u, mut off) = (u, off);
        let (mut name, mut ty) = (None, None);
        for _ in 0..MAX_HOPS {
            let unit = &self.units[u];
            let Ok(entry) = unit.entry(off) else {
                self.skipped += 1;
                break;
            };
            if name.is_none() {
                if let Ok(Some(v)) = entry.attr_value(gimli::DW_AT_name) {
                    name = self
                        .dwarf
                        .attr_string(unit, v)
                        .ok()
                        .and_then(|s| s.to_string_lossy().ok().map(|s| s.into_owned()));
                }
            }
            if ty.is_none() {
                if let Ok(Some(v)) = entry.attr_value(gimli::DW_AT_type) {
                    ty = self.reference(u, v);
                    if ty.is_none() {
                        // A type unit's signature or a supplementary
                        // file's offset: not followed.
                        self.skipped += 1;
                        break;
                    }
                }
            }
            if name.is_some() && ty.is_some() {
                break;
            }
            let origin = match entry.attr_value(gimli::DW_AT_abstract_origin) {
                Ok(Some(v)) => self.reference(u, v),
                _ => None,
            };
            let Some(next) = origin.and_then(|o| self.locate(o)) else {
                break;
            };
            (u, off) = next;
        }
        (name, ty)
    }

    /// Reads the DIE at a `.debug_info` offset: its tag and its
    /// `DW_AT_type`.
    fn tag_and_type(
        &mut self,
        t: DebugInfoOffset,
    ) -> Option<(gimli::DwTag, Option<DebugInfoOffset>, usize, UnitOffset)> {
        let Some((u, off)) = self.locate(t) else {
            self.skipped += 1;
            return None;
        };
        let unit = &self.units[u];
        let Ok(entry) = unit.entry(off) else {
            self.skipped += 1;
            return None;
        };
        let tag = entry.tag();
        let inner = match entry.attr_value(gimli::DW_AT_type) {
            Ok(Some(v)) => self.reference(u, v),
            _ => None,
        };
        Some((tag, inner, u, off))
    }

    /// A type through typedefs and cv-qualifiers.
    fn peel(&mut self, t: TypeRef) -> TypeRef {
        let mut cur = t;
        for _ in 0..MAX_HOPS {
            match self.tag_and_type(cur) {
                Some((
                    gimli::DW_TAG_typedef
                    | gimli::DW_TAG_const_type
                    | gimli::DW_TAG_volatile_type
                    | gimli::DW_TAG_restrict_type
                    | gimli::DW_TAG_atomic_type,
                    Some(inner),
                    _,
                    _,
                )) => cur = inner,
                _ => break,
            }
        }
        cur
    }

    /// The pointee of a pointer or reference type (through typedefs and
    /// qualifiers), as DWARF names it; None for other types and `void *`.
    fn pointee(&mut self, t: TypeRef) -> Option<TypeRef> {
        if let Some(&p) = self.pointee_of.get(&t) {
            return p;
        }
        // None while this one is worked out: a struct that (in bad DWARF)
        // holds itself at offset 0 ends there.
        self.pointee_of.insert(t, None);
        let mut cur = t;
        let mut out = None;
        for _ in 0..MAX_HOPS {
            let Some((tag, inner, _, _)) = self.tag_and_type(cur) else {
                break;
            };
            match tag {
                gimli::DW_TAG_typedef
                | gimli::DW_TAG_const_type
                | gimli::DW_TAG_volatile_type
                | gimli::DW_TAG_restrict_type
                | gimli::DW_TAG_atomic_type => match inner {
                    Some(i) => cur = i,
                    None => break,
                },
                gimli::DW_TAG_pointer_type
                | gimli::DW_TAG_reference_type
                | gimli::DW_TAG_rvalue_reference_type => {
                    out = inner;
                    break;
                }
                // A struct whose first 8 bytes are a pointer is one where
                // a register holds it (a C++ iterator, a Rust slice's
                // `data_ptr`, `Box`, `NonNull`, a `Vec`'s buffer).
                gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type => {
                    out = self.member_at_zero(cur).and_then(|m| self.pointee(m));
                    break;
                }
                _ => break,
            }
        }
        self.pointee_of.insert(t, out);
        out
    }

    /// The type of the data member at offset 0 of a struct (its first),
    /// when the struct has one.
    fn member_at_zero(&mut self, t: TypeRef) -> Option<TypeRef> {
        let (u, off) = self.locate(t)?;
        let unit = &self.units[u];
        let mut tree = unit.entries_tree(Some(off)).ok()?;
        let root = tree.root().ok()?;
        let mut children = root.children();
        let mut found = None;
        while let Ok(Some(child)) = children.next() {
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_member {
                continue;
            }
            let at_zero = match e.attr_value(gimli::DW_AT_data_member_location) {
                Ok(Some(AttributeValue::Udata(0))) | Ok(None) => true,
                Ok(Some(v)) => v.udata_value() == Some(0),
                Err(_) => false,
            };
            if at_zero {
                found = e.attr_value(gimli::DW_AT_type).ok().flatten();
            }
            break;
        }
        let v = found?;
        self.reference(u, v)
    }

    /// The size in bytes of a type: `DW_AT_byte_size` through typedefs
    /// and qualifiers; arrays: element size times the element counts.
    fn type_size(&mut self, t: TypeRef) -> Option<u64> {
        if let Some(&s) = self.size_of.get(&t) {
            return s;
        }
        let s = self.type_size_uncached(t, 0);
        self.size_of.insert(t, s);
        s
    }

    fn type_size_uncached(&mut self, t: TypeRef, depth: usize) -> Option<u64> {
        if depth > MAX_HOPS {
            return None;
        }
        let (tag, inner, u, off) = self.tag_and_type(t)?;
        let unit = &self.units[u];
        let entry = unit.entry(off).ok()?;
        if let Ok(Some(v)) = entry.attr_value(gimli::DW_AT_byte_size) {
            if let Some(s) = v.udata_value() {
                return Some(s);
            }
        }
        match tag {
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type => self.type_size_uncached(inner?, depth + 1),
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => Some(u64::from(unit.header.address_size())),
            gimli::DW_TAG_array_type => {
                let count = array_count(unit, off)?;
                let elem = self.type_size_uncached(inner?, depth + 1)?;
                elem.checked_mul(count)
            }
            _ => None,
        }
    }
}

/// The product of an array type's subrange counts (`DW_AT_count`, or
/// `DW_AT_upper_bound` - `DW_AT_lower_bound` + 1, lower bound 0 by
/// default); None when one is unknown (a flexible array member).
fn array_count(unit: &gimli::Unit<Reader>, off: UnitOffset) -> Option<u64> {
    let mut tree = unit.entries_tree(Some(off)).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    let mut total: u64 = 1;
    let mut any = false;
    while let Ok(Some(child)) = children.next() {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_subrange_type {
            continue;
        }
        any = true;
        let count = match e.attr_value(gimli::DW_AT_count) {
            Ok(Some(v)) => v.udata_value()?,
            _ => {
                let upper = e
                    .attr_value(gimli::DW_AT_upper_bound)
                    .ok()??
                    .udata_value()?;
                let lower = match e.attr_value(gimli::DW_AT_lower_bound) {
                    Ok(Some(v)) => v.udata_value()?,
                    _ => 0,
                };
                upper.checked_sub(lower)?.checked_add(1)?
            }
        };
        total = total.checked_mul(count)?;
    }
    any.then_some(total)
}

/// Walks a DIE and its children, recording the parameters and variables
/// found inside subprograms with their scope.
fn walk(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    node: gimli::EntriesTreeNode<'_, '_, '_, Reader>,
    scope: Option<&Scope>,
    found: &mut Vec<(UnitOffset, Scope)>,
    skipped: &mut u64,
) {
    let entry = node.entry();
    let tag = entry.tag();
    let inner: Option<Scope> = match tag {
        gimli::DW_TAG_subprogram => Some(Scope {
            depth: 0,
            ranges: Rc::new(die_ranges(dwarf, unit, entry, skipped)),
            frame_base: frame_base(unit, entry),
        }),
        gimli::DW_TAG_lexical_block | gimli::DW_TAG_inlined_subroutine => scope.map(|s| {
            let ranges = die_ranges(dwarf, unit, entry, skipped);
            Scope {
                depth: s.depth + 1,
                ranges: if ranges.is_empty() {
                    s.ranges.clone()
                } else {
                    Rc::new(ranges)
                },
                frame_base: s.frame_base,
            }
        }),
        gimli::DW_TAG_formal_parameter | gimli::DW_TAG_variable => {
            if let Some(s) = scope {
                found.push((entry.offset(), s.clone()));
            }
            None
        }
        _ => None,
    };
    // Variables hold no scopes; other DIEs (namespaces, classes, the unit)
    // may hold subprograms.
    if matches!(tag, gimli::DW_TAG_formal_parameter | gimli::DW_TAG_variable) {
        return;
    }
    let child_scope = match tag {
        gimli::DW_TAG_subprogram
        | gimli::DW_TAG_lexical_block
        | gimli::DW_TAG_inlined_subroutine => inner.as_ref(),
        _ => scope,
    };
    let mut children = node.children();
    loop {
        match children.next() {
            Ok(Some(child)) => walk(dwarf, unit, child, child_scope, found, skipped),
            Ok(None) => break,
            Err(_) => {
                *skipped += 1;
                break;
            }
        }
    }
}

/// A scope's pc ranges (low/high pc or `DW_AT_ranges`), empty ones left
/// out.
fn die_ranges(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, Reader>,
    skipped: &mut u64,
) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    match dwarf.die_ranges(unit, entry) {
        Ok(mut it) => loop {
            match it.next() {
                Ok(Some(r)) if r.begin < r.end => out.push((r.begin, r.end)),
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    *skipped += 1;
                    break;
                }
            }
        },
        Err(_) => *skipped += 1,
    }
    out
}

/// A subprogram's `DW_AT_frame_base`, when it is the CFA or rbp/rsp
/// (plus a constant).
fn frame_base(
    unit: &gimli::Unit<Reader>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, Reader>,
) -> Option<FrameBase> {
    let Ok(Some(AttributeValue::Exprloc(expr))) = entry.attr_value(gimli::DW_AT_frame_base) else {
        return None;
    };
    let mut ops = expr.operations(unit.encoding());
    let first = ops.next().ok()??;
    if !matches!(ops.next(), Ok(None)) {
        return None;
    }
    match first {
        Operation::CallFrameCFA => Some(FrameBase {
            base: Base::Cfa,
            off: 0,
        }),
        Operation::Register { register } if matches!(register.0, RBP | RSP) => Some(FrameBase {
            base: Base::Reg(register.0),
            off: 0,
        }),
        Operation::RegisterOffset {
            register,
            offset,
            base_type,
        } if matches!(register.0, RBP | RSP) && base_type.0 == 0 => Some(FrameBase {
            base: Base::Reg(register.0),
            off: offset,
        }),
        _ => None,
    }
}

/// Reduces a location expression to a whole register, a stack slot, or
/// other.
fn parse_loc(
    expr: gimli::Expression<Reader>,
    encoding: gimli::Encoding,
    fb: Option<FrameBase>,
) -> Loc {
    let mut ops = expr.operations(encoding);
    let Ok(Some(first)) = ops.next() else {
        return Loc::Other;
    };
    match (&first, ops.next()) {
        (_, Ok(None)) => {}
        // The first 8 bytes in a register (a Rust slice's `data_ptr`).
        (
            &Operation::Register { register },
            Ok(Some(Operation::Piece {
                size_in_bits: 64,
                bit_offset: None,
            })),
        ) => return Loc::Reg(register.0),
        (
            &Operation::RegisterOffset {
                register,
                offset,
                base_type,
            },
            Ok(Some(Operation::StackValue)),
        ) if base_type.0 == 0 && matches!(ops.next(), Ok(None)) => {
            return Loc::RegPlus(register.0, offset);
        }
        _ => return Loc::Other, // other pieces and computations
    }
    match first {
        Operation::Register { register } => Loc::Reg(register.0),
        Operation::FrameOffset { offset } => match fb {
            Some(fb) => match fb.off.checked_add(offset) {
                Some(o) => Loc::Mem(fb.base, o),
                None => Loc::Other,
            },
            None => Loc::Other,
        },
        Operation::RegisterOffset {
            register,
            offset,
            base_type,
        } if matches!(register.0, RBP | RSP) && base_type.0 == 0 => {
            Loc::Mem(Base::Reg(register.0), offset)
        }
        _ => Loc::Other,
    }
}

/// The call frame information of a file: its frame description entries
/// sorted by start address.
struct Cfi {
    eh: Option<(
        EhFrame<Reader>,
        BaseAddresses,
        Vec<FrameDescriptionEntry<Reader>>,
    )>,
    debug: Option<(
        DebugFrame<Reader>,
        BaseAddresses,
        Vec<FrameDescriptionEntry<Reader>>,
    )>,
}

impl Cfi {
    /// Reads `.eh_frame` and `.debug_frame`; returns how many entries
    /// could not be read.
    fn read(obj: &object::File) -> (Cfi, u64) {
        let endian = if obj.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let mut skipped = 0;
        let section = |name: &str| {
            let s = obj.section_by_name(name)?;
            let data = s.uncompressed_data().ok()?;
            (!data.is_empty()).then(|| (s.address(), Reader::new(Rc::from(&*data), endian)))
        };
        let text = obj
            .section_by_name(".text")
            .map(|s| s.address())
            .unwrap_or(0);
        let eh = section(".eh_frame").map(|(addr, data)| {
            let mut bases = BaseAddresses::default().set_eh_frame(addr).set_text(text);
            if let Some(hdr) = obj.section_by_name(".eh_frame_hdr") {
                bases = bases.set_eh_frame_hdr(hdr.address());
            }
            if let Some(got) = obj.section_by_name(".got") {
                bases = bases.set_got(got.address());
            }
            let mut sec = EhFrame::from(data);
            sec.set_address_size(8);
            let fdes = fdes(&sec, &bases, &mut skipped);
            (sec, bases, fdes)
        });
        let debug = section(".debug_frame").map(|(_, data)| {
            let bases = BaseAddresses::default();
            let mut sec = DebugFrame::from(data);
            sec.set_address_size(8);
            let fdes = fdes(&sec, &bases, &mut skipped);
            (sec, bases, fdes)
        });
        (Cfi { eh, debug }, skipped)
    }

    /// The CFA rule at `pc` as (register, k): CFA = register + k.
    fn cfa_at(&self, pc: u64) -> Option<(u16, i64)> {
        self.rules_at(pc).map(|r| r.cfa)
    }

    /// The frame's rules at `pc`.
    fn rules_at(&self, pc: u64) -> Option<Rules> {
        if let Some((sec, bases, fdes)) = &self.eh {
            if let Some(r) = rules_in(sec, bases, fdes, pc) {
                return Some(r);
            }
        }
        let (sec, bases, fdes) = self.debug.as_ref()?;
        rules_in(sec, bases, fdes, pc)
    }
}

/// A frame's rules at a pc: the CFA as (register, k), CFA = register +
/// k, and the registers saved in the frame as (n, register): saved at
/// CFA + n (the return address, DWARF register 16, among them).
struct Rules {
    cfa: (u16, i64),
    saved: Vec<(i64, u16)>,
}

/// Every frame description entry of a section, sorted by start address.
fn fdes<S: UnwindSection<Reader>>(
    sec: &S,
    bases: &BaseAddresses,
    skipped: &mut u64,
) -> Vec<FrameDescriptionEntry<Reader>>
where
    S::Offset: gimli::UnwindOffset<usize>,
{
    let mut out = Vec::new();
    let mut entries = sec.entries(bases);
    loop {
        match entries.next() {
            Ok(Some(gimli::CieOrFde::Fde(partial))) => match partial.parse(S::cie_from_offset) {
                Ok(fde) => out.push(fde),
                Err(_) => *skipped += 1,
            },
            Ok(Some(gimli::CieOrFde::Cie(_))) => {}
            Ok(None) => break,
            Err(_) => {
                *skipped += 1;
                break;
            }
        }
    }
    out.sort_by_key(|f| f.initial_address());
    out
}

fn rules_in<S: UnwindSection<Reader>>(
    sec: &S,
    bases: &BaseAddresses,
    fdes: &[FrameDescriptionEntry<Reader>],
    pc: u64,
) -> Option<Rules> {
    let i = fdes
        .partition_point(|f| f.initial_address() <= pc)
        .checked_sub(1)?;
    let fde = &fdes[i];
    if !fde.contains(pc) {
        return None;
    }
    let mut ctx = Box::new(UnwindContext::new());
    let row = fde.unwind_info_for_address(sec, bases, &mut ctx, pc).ok()?;
    let cfa = match row.cfa() {
        gimli::CfaRule::RegisterAndOffset { register, offset } => (register.0, *offset),
        gimli::CfaRule::Expression(_) => return None,
    };
    let saved = row
        .registers()
        .filter_map(|(r, rule)| match rule {
            gimli::RegisterRule::Offset(n) => Some((*n, r.0)),
            _ => None,
        })
        .collect();
    Some(Rules { cfa, saved })
}

/// Intervals [lo, hi) with a payload, queried by a point: sorted by `lo`,
/// read as an implicit balanced binary tree whose node i keeps the
/// greatest `hi` of its subtree (the layout of Heng Li's cgranges).
struct IntervalTree<T> {
    items: Vec<(u64, u64, T)>,
    max: Vec<u64>,
    levels: i32,
}

impl<T> IntervalTree<T> {
    fn new(mut items: Vec<(u64, u64, T)>) -> Self {
        items.retain(|i| i.0 < i.1);
        items.sort_by_key(|i| (i.0, i.1));
        let n = items.len();
        let mut max: Vec<u64> = items.iter().map(|i| i.1).collect();
        if n == 0 {
            return IntervalTree {
                items,
                max,
                levels: -1,
            };
        }
        let mut last_i = 0usize;
        let mut last = 0u64;
        let mut i = 0;
        while i < n {
            last_i = i;
            last = items[i].1;
            i += 2;
        }
        let mut k = 1u32;
        while (1usize << k) <= n {
            let x = 1usize << (k - 1);
            let i0 = (x << 1) - 1;
            let step = x << 2;
            let mut i = i0;
            while i < n {
                let el = max[i - x];
                let er = if i + x < n { max[i + x] } else { last };
                max[i] = items[i].1.max(el).max(er);
                i += step;
            }
            last_i = if (last_i >> k) & 1 == 1 {
                last_i - x
            } else {
                last_i + x
            };
            if last_i < n && max[last_i] > last {
                last = max[last_i];
            }
            k += 1;
        }
        IntervalTree {
            items,
            max,
            levels: k as i32 - 1,
        }
    }

    /// Calls `f` for every interval holding `pc`.
    fn query(&self, pc: u64, mut f: impl FnMut(&T)) {
        if self.levels < 0 {
            return;
        }
        self.visit((1usize << self.levels) - 1, self.levels as u32, pc, &mut f);
    }

    /// [`IntervalTree::query`] below node `x` of level `k`: the left
    /// subtree, the node, the right subtree (recursion: its depth is the
    /// tree's, and it allocates nothing per lookup).
    fn visit(&self, x: usize, k: u32, pc: u64, f: &mut impl FnMut(&T)) {
        let n = self.items.len();
        let (st, en) = (pc, pc.saturating_add(1));
        if k <= 3 {
            let i0 = (x >> k) << k;
            let i1 = (i0 + (1usize << (k + 1)) - 1).min(n);
            let mut i = i0;
            while i < i1 && self.items[i].0 < en {
                if st < self.items[i].1 {
                    f(&self.items[i].2);
                }
                i += 1;
            }
            return;
        }
        let y = x - (1usize << (k - 1));
        if y >= n || self.max[y] > st {
            self.visit(y, k - 1, pc, f);
        }
        if x < n && self.items[x].0 < en {
            if st < self.items[x].1 {
                f(&self.items[x].2);
            }
            self.visit(x + (1usize << (k - 1)), k - 1, pc, f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IntervalTree;

    /// The tree finds exactly what a scan of every interval finds.
    #[test]
    fn interval_tree_matches_a_scan() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for n in [0usize, 1, 2, 3, 7, 8, 9, 16, 17, 31, 100, 1000] {
            let items: Vec<(u64, u64, usize)> = (0..n)
                .map(|i| {
                    let lo = rnd(2000);
                    let len = if i % 5 == 0 { rnd(1500) } else { rnd(30) };
                    (lo, lo + len, i)
                })
                .collect();
            let tree = IntervalTree::new(items.clone());
            for pc in 0..3600 {
                let mut got = Vec::new();
                tree.query(pc, |&i| got.push(i));
                got.sort_unstable();
                let mut want: Vec<usize> = items
                    .iter()
                    .filter(|&&(lo, hi, _)| lo <= pc && pc < hi)
                    .map(|&(_, _, i)| i)
                    .collect();
                want.sort_unstable();
                assert_eq!(got, want, "n {n} pc {pc}");
            }
        }
    }
}
