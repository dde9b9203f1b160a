//! An instruction's memory operand (iced-x86) and the rules that pick its
//! type and field (see lib.rs and the rules in `docs/data-view.md`).
//!
//! [`memory_instruction`] decodes one instruction and keeps it when it has
//! an explicit memory operand; [`type_access`] applies the rules. `locals`
//! implements [`Variables`] (the register and stack rules ask it); without
//! it only the globals rule types anything.

use crate::TypeRef;

/// A variable found by its location at an instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    /// Its name as the source spells it.
    pub name: String,
    /// For [`Variables::pointer_in_register`]: the type pointed to (or
    /// referred to), typedefs and cv-qualifiers kept as DWARF has them.
    /// For [`Variables::stack_variable`]: the variable's own type.
    pub ty: TypeRef,
    /// For [`Variables::stack_variable`]: the byte offset of the operand
    /// inside the variable (0 for [`Variables::pointer_in_register`]).
    pub offset: u64,
}

/// Parameters and local variables by their location at an instruction
/// (implemented by `locals::Locals` from DWARF location expressions and
/// lists, and the call frame information for stack slots).
pub trait Variables {
    /// The parameter or local that, at file address `pc`, lives in DWARF
    /// register `reg` (DW_OP_regN: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi,
    /// 6 rbp, 7 rsp, 8-15 r8-r15) and whose type is a pointer or a
    /// reference; `ty` is the type it points to. The innermost scope wins
    /// (an inlined subroutine's parameter before its caller's variable).
    fn pointer_in_register(&self, pc: u64, reg: u16) -> Option<Variable>;

    /// The local variable or parameter that, at file address `pc`, is in
    /// the stack frame and covers the `size` bytes at `base + disp`, where
    /// `base` is DWARF register `reg` (7 rsp or 6 rbp) as it is at `pc`;
    /// `offset` is where the operand starts inside the variable.
    fn stack_variable(&self, pc: u64, reg: u16, disp: i64, size: u32) -> Option<Variable>;

    /// The local variable or parameter that, at file address `pc`, holds
    /// the stack byte `below` bytes under the frame's CFA (the address
    /// above its return address); `offset` is where that byte lies in it.
    /// `None` by default (no stack slots known).
    fn frame_slot(&self, pc: u64, below: u64) -> Option<Variable> {
        let _ = (pc, below);
        None
    }

    /// The register the frame saved (by the call frame information at
    /// file address `pc`) in the 8 bytes holding the stack byte `below`
    /// bytes under its CFA: DWARF register 16 is the return address.
    /// `None` by default.
    fn saved_register(&self, pc: u64, below: u64) -> Option<u16> {
        let _ = (pc, below);
        None
    }

    /// The CFA rule at file address `pc`: CFA = DWARF register + k.
    /// `None` by default.
    fn cfa_offset(&self, pc: u64) -> Option<(u16, i64)> {
        let _ = pc;
        None
    }

    /// [`Variables::pointer_in_register`], and also a pointer variable the
    /// register holds moved by a constant; the second value is the
    /// register's offset from the variable's value (the seeds of `flow`).
    fn pointer_seed(&self, pc: u64, reg: u16) -> Option<(Variable, i64)> {
        self.pointer_in_register(pc, reg).map(|v| (v, 0))
    }
}

use crate::globals::Globals;
use crate::layout::{path_of_kind, Layouts};
use coldcache_dump::{DataType, TypedAccess, Via};
use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};

/// The instruction at file address `vaddr` whose bytes start `code`, when
/// it has an explicit memory operand that touches memory: not `lea`, not
/// a multi-byte `nop`, not a string instruction's implicit operands (a
/// prefetch does touch memory and is kept).
pub fn memory_instruction(vaddr: u64, code: &[u8]) -> Option<Instruction> {
    let mut d = Decoder::with_ip(64, code, vaddr, DecoderOptions::NONE);
    let ins = d.decode();
    if ins.is_invalid()
        || matches!(ins.mnemonic(), Mnemonic::Lea | Mnemonic::Nop)
        || !ins.op_kinds().any(|k| k == OpKind::Memory)
    {
        return None;
    }
    Some(ins)
}

/// DWARF register number of a 64-bit general register (or of the 64-bit
/// register holding a smaller one).
fn dwarf_reg(r: Register) -> Option<u16> {
    crate::flow::dwarf_number(r.full_register())
}

/// The type and field `ins`'s memory operand touches, by the rules of
/// `docs/data-view.md`: a rip-relative or absolute address in a global
/// or static variable; a base register holding a pointer variable
/// (`vars`); a stack slot of a local variable (`vars`). Types named are
/// interned in `layouts`; the access's `addr` is the instruction's file
/// address and `ty` an index into `layouts.types`.
pub fn type_access(
    layouts: &mut Layouts,
    globals: &Globals,
    vars: Option<&dyn Variables>,
    flowed: Option<Flowed>,
    ins: &Instruction,
) -> Option<TypedAccess> {
    // Thread-local storage (fs:/gs:) is not in the globals.
    if matches!(ins.segment_prefix(), Register::FS | Register::GS) {
        return None;
    }
    let size = (ins.memory_size().size() as u32).max(1);
    let pc = ins.ip();
    let base = ins.memory_base();
    let index = ins.memory_index();
    let scale = u64::from(ins.memory_index_scale());
    let disp = ins.memory_displacement64() as i64;
    let indexed = index != Register::None;
    // A global or static variable at `addr`: its type, the offset in one
    // element (arrays folded), whether it is an array.
    let global = |layouts: &mut Layouts, addr: u64| {
        let g = globals.find(addr)?;
        let ty = layouts.intern(g.ty)?;
        let folded = layouts.peel(g.ty)?.count.is_some();
        let off = addr - g.addr;
        let off = if folded {
            off % layouts.types[ty as usize].size
        } else {
            off
        };
        Some((ty, off, folded, g.name.clone()))
    };
    let (ty, offset, via, variable) = if base == Register::RIP || base == Register::None {
        // rip-relative (iced gives the target) or absolute.
        let addr = if ins.is_ip_rel_memory_operand() {
            ins.ip_rel_memory_address()
        } else {
            disp as u64
        };
        let (ty, off, _, name) = global(layouts, addr)?;
        (ty, off, Via::Global, name)
    } else if let Some(f) = flowed.filter(|_| base != Register::RSP) {
        // A pointer the flow pass carried to this instruction: its offset
        // has the displacement and whole elements of index folded in.
        let ty = layouts.intern(f.ty)?;
        let (path, straddles) = path_of_kind(
            &layouts.types,
            ty,
            f.offset,
            u64::from(size),
            float_kind(ins),
        );
        if f.scale != 0 && !index_fits(&layouts.types, ty, &path, u64::from(f.scale)) {
            return None;
        }
        return Some(TypedAccess {
            addr: pc,
            ty,
            offset: f.offset,
            size,
            path,
            straddles,
            via: f.via,
            variable: f.variable,
        });
    } else {
        let reg = dwarf_reg(base)?;
        let found = match vars {
            Some(v) if reg != 7 => v.pointer_in_register(pc, reg),
            _ => None,
        };
        match found {
            Some(v) => {
                let ty = layouts.intern(v.ty)?;
                let tsize = layouts.types[ty as usize].size as i64;
                let off = disp.rem_euclid(tsize) as u64;
                (ty, off, Via::Register, v.name)
            }
            None if reg == 6 || reg == 7 => {
                let v = vars?.stack_variable(pc, reg, disp, size)?;
                let ty = layouts.intern(v.ty)?;
                let folded = layouts.peel(v.ty)?.count.is_some();
                let off = if folded {
                    v.offset % layouts.types[ty as usize].size
                } else {
                    v.offset
                };
                (ty, off, Via::Stack, v.name)
            }
            None => {
                // Non-PIE code indexing a global array of structs:
                // `table+12(%rdi)` with rdi = i * sizeof(element) (no
                // scale fits 16 or 192). Only a global array, entered by
                // its address (not a small offset), is believed.
                if disp < 4096 {
                    return None;
                }
                let (ty, off, folded, name) = global(layouts, disp as u64)?;
                if !folded || indexed {
                    return None;
                }
                (ty, off, Via::Global, name)
            }
        }
    };
    let types = &layouts.types;
    let (path, straddles) = path_of_kind(types, ty, offset, u64::from(size), float_kind(ins));
    if indexed && !index_fits(types, ty, &path, scale) {
        return None;
    }
    Some(TypedAccess {
        addr: pc,
        ty,
        offset,
        size,
        path,
        straddles,
        via,
        variable,
    })
}

/// Whether `ins` moves floating-point data (an SSE/AVX register operand, or
/// x87) or integer data (a general register), when it says.
fn float_kind(ins: &Instruction) -> Option<bool> {
    if ins.is_stack_instruction() {
        return Some(false);
    }
    let mut kind = None;
    for i in 0..ins.op_count() {
        if ins.op_kind(i) == OpKind::Register {
            let r = ins.op_register(i);
            if r.is_xmm() || r.is_ymm() || r.is_zmm() || r.is_st() {
                return Some(true);
            }
            if r.is_gpr() {
                kind = Some(false);
            }
        }
    }
    // x87 loads and stores of memory (`fld`, `fstp`, `fadd m64`).
    if kind.is_none() && format!("{:?}", ins.mnemonic()).starts_with('F') {
        return Some(true);
    }
    kind
}

/// What the flow pass (`crate::flow`) found for an instruction's memory
/// operand: the type pointed into, the operand's offset in one element of
/// it, an index scale left unfolded (0: none), the variable's name.
#[derive(Clone, Debug)]
pub struct Flowed {
    /// The type pointed into.
    pub ty: crate::TypeRef,
    /// The operand's offset in one element of `ty`.
    pub offset: u64,
    /// An index scale that is not whole elements of `ty` (0: none).
    pub scale: u32,
    /// The kind of variable the pointer came from.
    pub via: Via,
    /// The variable the pointer came from.
    pub variable: String,
}

/// Whether an index register scaled by `scale` stays in the field found:
/// a member on the path is an array whose elements are `scale` bytes
/// (`e->items[i]`), or `scale` is a whole number of elements of `ty`
/// (`e[i].field`).
fn index_fits(types: &[DataType], ty: u32, path: &[u32], scale: u64) -> bool {
    let mut t = ty;
    for &i in path {
        let Some(m) = types
            .get(t as usize)
            .and_then(|d| d.members.get(i as usize))
        else {
            break;
        };
        if m.count > 0 && m.size / m.count == scale {
            return true;
        }
        t = m.ty;
    }
    let tsize = types.get(ty as usize).map_or(0, |d| d.size);
    tsize > 0 && scale.is_multiple_of(tsize)
}
