//! Typed pointers carried through a function's code: which general
//! register holds a pointer to which type, at which byte offset into one
//! element of it, at each instruction.
//!
//! Optimised code rarely keeps a pointer variable where DWARF says at the
//! instruction that dereferences it: `for (i..) if (e[i].flags & 1)`
//! becomes `add $0xa0,%rdi` before the loop and `movzwl (%rdi)` /
//! `add $0xc0,%rdi` in it, and in the loop DWARF describes `e` only as
//! the register's value on entry. Where DWARF does place a pointer
//! variable in a register (a *seed*: at the function's entry, or as
//! `DW_OP_bregN k; DW_OP_stack_value`), this pass follows the register
//! forward over the function's control-flow graph:
//!
//! - `add`/`sub`/`inc`/`dec` of an immediate, and `lea r, [b + disp]`,
//!   move the offset; a `lea` with an index whose scale is a multiple of
//!   the type's size keeps it (whole elements); `mov r, q` copies;
//! - `lea r, [rip + disp]` of an address inside a global variable gives
//!   the global's type (its element type, for an array);
//! - a 64-bit load `mov r, [b + disp]` through a typed pointer, of a
//!   member whose type is a pointer, gives `r` the type pointed to (a
//!   linked list's `n = n->next`, a vector's `_M_start`);
//! - any other write of the register (a 32-bit or partial write among
//!   them) forgets it; a `call` forgets the registers the System V ABI
//!   lets the callee change;
//! - offsets are kept modulo the type's size (one element: the index of
//!   an array of structs is folded away), so a loop that advances by whole
//!   elements reaches a fixed point at once;
//! - integers that are known multiples are followed too (`xor %eax,%eax`,
//!   `lea (%rsi,%rsi,2)` then `shl $6`, `imul $40`, `add $0x50`): an index
//!   register that only ever moves by whole elements folds into the
//!   element, in a `lea`, an `add` to a pointer, or a memory operand
//!   (`0x28(%rdi,%rax,1)` in rustc's unrolled loops);
//! - where two paths meet with different types or offsets, the register is
//!   forgotten (never guessed); multiples meet at their greatest common
//!   divisor.
//!
//! A seed is authoritative at its instruction: it replaces what the flow
//! carried. Pure: instruction bytes and two callbacks in, a table out.

use crate::TypeRef;
use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    OpKind, Register,
};
use std::collections::HashMap;

/// A register's value: a pointer into one element of a type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Typed {
    /// The type pointed into.
    pub ty: TypeRef,
    /// Byte offset of the pointer in one element of `ty` (`0..size`, or
    /// unfolded when the size is unknown).
    pub offset: i64,
    /// Which seed (index into the caller's list of variables) it came
    /// from, for the variable's name.
    pub var: u32,
    /// What kind of variable that is.
    pub origin: Origin,
}

/// Where a typed pointer's variable lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A pointer variable (parameter or local) DWARF places in a register.
    Pointer,
    /// A global or static variable whose address was taken.
    Global,
    /// A local variable in the stack frame whose address was taken.
    Frame,
}

/// What the pass knows of a register at a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lat {
    /// Not reached yet.
    Unreached,
    /// A typed pointer.
    Known(Typed),
    /// An integer that is a multiple of this (0: exactly zero): an index
    /// scaled by an element size (`imul $40`, `shl $6` of `lea (r,r,2)`).
    Stride(u64),
    /// Reached, nothing known.
    Unknown,
}

/// The 16 general registers in DWARF order (0 rax, 1 rdx, 2 rcx, 3 rbx,
/// 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15).
type State = [Lat; 16];

/// The DWARF number of a 64-bit general register.
pub fn dwarf_number(r: Register) -> Option<u16> {
    Some(match r {
        Register::RAX => 0,
        Register::RDX => 1,
        Register::RCX => 2,
        Register::RBX => 3,
        Register::RSI => 4,
        Register::RDI => 5,
        Register::RBP => 6,
        Register::RSP => 7,
        Register::R8 => 8,
        Register::R9 => 9,
        Register::R10 => 10,
        Register::R11 => 11,
        Register::R12 => 12,
        Register::R13 => 13,
        Register::R14 => 14,
        Register::R15 => 15,
        _ => return None,
    })
}

/// Registers a callee may change (System V x86-64): rax, rdx, rcx, rsi,
/// rdi, r8-r11, in DWARF numbers.
const CALLER_SAVED: [usize; 9] = [0, 1, 2, 4, 5, 8, 9, 10, 11];

/// What the pass asks of DWARF.
pub trait Seeds {
    /// A pointer variable DWARF places at `pc` in register `reg` (DWARF
    /// number): the type pointed to, the register's offset from the
    /// variable's value (0 for `DW_OP_regN`, `-k` for `DW_OP_bregN k;
    /// DW_OP_stack_value`), and an id the caller names it by.
    fn seed(&self, pc: u64, reg: u16) -> Option<(TypeRef, i64, u32)>;
    /// `sizeof` the type, when known and not zero.
    fn size_of(&self, ty: TypeRef) -> Option<u64>;
    /// The global variable holding file address `addr`: its type (the
    /// element type for an array), the offset of `addr` in it, and an id.
    fn global(&self, addr: u64) -> Option<(TypeRef, i64, u32)>;
    /// The type pointed to by the pointer-typed member of `ty` that the
    /// 8 bytes at `offset` are exactly, if they are one.
    fn pointee_at(&self, ty: TypeRef, offset: i64) -> Option<TypeRef>;
    /// The local variable in the stack frame at `reg + disp` (reg 7 rsp or
    /// 6 rbp, as at `pc`): its type (the element type for an array), the
    /// offset in it and an id.
    fn frame(&self, _pc: u64, _reg: u16, _disp: i64) -> Option<(TypeRef, i64, u32)> {
        None
    }
}

/// A memory operand through a typed pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    /// The pointer's type and the operand's offset in one element of it
    /// (displacement and whole elements of index folded in).
    pub at: Typed,
    /// The scale of an index that is not a known number of whole
    /// elements (the operand is somewhere in an array inside the type, at
    /// or after `at.offset`); 0 when there is none.
    pub scale: u32,
}

/// The memory operands of one function that go through typed pointers.
#[derive(Debug, Default)]
pub struct Flow {
    /// Instruction addresses, ascending, with their operand.
    operands: Vec<(u64, Operand)>,
}

impl Flow {
    /// Runs the pass over the function whose code is `code`, starting at
    /// file address `start` (one contiguous range; a part elsewhere, like
    /// a `.cold` clone, is a function of its own).
    pub fn run(code: &[u8], start: u64, seeds: &dyn Seeds) -> Flow {
        let mut instrs: Vec<Instruction> = Vec::new();
        let mut d = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
        while d.can_decode() {
            instrs.push(d.decode());
        }
        let index: HashMap<u64, usize> = instrs
            .iter()
            .enumerate()
            .map(|(i, ins)| (ins.ip(), i))
            .collect();
        let n = instrs.len();
        let mut state_in: Vec<State> = vec![[Lat::Unreached; 16]; n];
        let mut queued = vec![false; n];
        let mut work: Vec<usize> = Vec::new();
        // Every instruction no branch of the function reaches (the entry,
        // a jump table's targets, code after a call that does not return
        // as far as the decoder can tell) starts from nothing known.
        let mut reached = vec![false; n];
        if n > 0 {
            reached[0] = true;
        }
        for (i, ins) in instrs.iter().enumerate() {
            for s in successors(ins, i, n, &index) {
                reached[s] = true;
            }
        }
        for i in 0..n {
            // Padding after a jump (nops, int3) flows into code that is
            // reached otherwise: it is no root.
            let padding = matches!(instrs[i].mnemonic(), Mnemonic::Nop | Mnemonic::Int3);
            if !reached[i] && !padding {
                state_in[i] = [Lat::Unknown; 16];
                queued[i] = true;
                work.push(i);
            }
        }
        if n > 0 {
            state_in[0] = [Lat::Unknown; 16];
            queued[0] = true;
            work.push(0);
        }
        let mut info = InstructionInfoFactory::new();
        // Each register's lattice has height 3 and a state only rises, so
        // every instruction is queued a bounded number of times.
        while let Some(i) = work.pop() {
            queued[i] = false;
            let ins = &instrs[i];
            let mut s = seeded(state_in[i], ins.ip(), seeds);
            transfer(ins, &mut s, seeds, &mut info);
            for succ in successors(ins, i, n, &index) {
                let merged = merge(&state_in[succ], &s, seeds);
                if merged != state_in[succ] {
                    state_in[succ] = merged;
                    if !queued[succ] {
                        queued[succ] = true;
                        work.push(succ);
                    }
                }
            }
        }
        let operands = instrs
            .iter()
            .zip(&state_in)
            .filter_map(|(ins, st)| {
                let st = seeded(*st, ins.ip(), seeds);
                operand(ins, &st, seeds).map(|o| (ins.ip(), o))
            })
            .collect();
        Flow { operands }
    }

    /// The typed memory operand of the instruction at `pc`.
    pub fn operand(&self, pc: u64) -> Option<Operand> {
        let i = self.operands.binary_search_by_key(&pc, |(a, _)| *a).ok()?;
        Some(self.operands[i].1)
    }

    /// How many of the function's instructions have one.
    pub fn len(&self) -> usize {
        self.operands.len()
    }

    /// Whether none has.
    pub fn is_empty(&self) -> bool {
        self.operands.is_empty()
    }
}

/// The typed memory operand of `ins` in state `s` (none for `lea`, nops,
/// string instructions, rip-relative and stack-pointer operands: other
/// rules type those).
fn operand(ins: &Instruction, s: &State, seeds: &dyn Seeds) -> Option<Operand> {
    let mem = (0..ins.op_count()).any(|i| ins.op_kind(i) == OpKind::Memory);
    if !mem
        || matches!(ins.mnemonic(), Mnemonic::Lea | Mnemonic::Nop)
        || ins.memory_base() == Register::RIP
        || ins.memory_base() == Register::RSP
    {
        return None;
    }
    let lat = |r: Register| match dwarf_number(r) {
        Some(n) => s[n as usize],
        None if r == Register::None => Lat::Stride(0),
        None => Lat::Unknown,
    };
    let (base, index, scale) = (
        lat(ins.memory_base()),
        lat(ins.memory_index()),
        u64::from(ins.memory_index_scale()),
    );
    // `(%rax,%rdi,1)` with the pointer as the index.
    let (t, other, scale) = match (base, index) {
        (Lat::Known(t), other) => (t, other, scale),
        (other, Lat::Known(t)) if scale == 1 => (t, other, 1),
        _ => return None,
    };
    let size = seeds.size_of(t.ty);
    let offset = fold(
        t.offset.wrapping_add(ins.memory_displacement64() as i64),
        size,
    );
    let whole = |g: u64| match size {
        Some(sz) => g.wrapping_mul(scale).is_multiple_of(sz),
        None => g == 0,
    };
    // An unknown index is still some whole number (a multiple of 1).
    let scale = match other {
        Lat::Stride(g) if whole(g) => 0,
        Lat::Unknown | Lat::Unreached if whole(1) => 0,
        _ => scale as u32,
    };
    Some(Operand {
        at: Typed { offset, ..t },
        scale,
    })
}

/// `s` with the seeds DWARF gives at `pc` in place.
fn seeded(mut s: State, pc: u64, seeds: &dyn Seeds) -> State {
    for (r, l) in s.iter_mut().enumerate() {
        if let Some((ty, off, var)) = seeds.seed(pc, r as u16) {
            *l = Lat::Known(Typed {
                ty,
                offset: fold(off, seeds.size_of(ty)),
                var,
                origin: Origin::Pointer,
            });
        }
    }
    s
}

fn fold(off: i64, size: Option<u64>) -> i64 {
    match size {
        Some(sz) if sz > 0 && sz <= i64::MAX as u64 => off.rem_euclid(sz as i64),
        _ => off,
    }
}

fn merge(a: &State, b: &State, seeds: &dyn Seeds) -> State {
    let mut out = *a;
    for (o, (&x, &y)) in out.iter_mut().zip(a.iter().zip(b)) {
        *o = match (x, y) {
            (Lat::Unreached, v) | (v, Lat::Unreached) => v,
            (Lat::Known(p), Lat::Known(q))
                if p.ty == q.ty
                    && fold(p.offset, seeds.size_of(p.ty))
                        == fold(q.offset, seeds.size_of(q.ty)) =>
            {
                Lat::Known(p)
            }
            (Lat::Stride(a), Lat::Stride(b)) => Lat::Stride(gcd(a, b)),
            _ => Lat::Unknown,
        };
    }
    out
}

/// Indices of the instructions that may run after `ins` (the `i`-th) in
/// this function.
fn successors(ins: &Instruction, i: usize, n: usize, index: &HashMap<u64, usize>) -> Vec<usize> {
    let mut out = Vec::with_capacity(2);
    let next = (i + 1 < n).then_some(i + 1);
    let target = || index.get(&ins.near_branch_target()).copied();
    match ins.flow_control() {
        FlowControl::Next | FlowControl::Call | FlowControl::IndirectCall => out.extend(next),
        FlowControl::ConditionalBranch => {
            out.extend(next);
            out.extend(target());
        }
        FlowControl::UnconditionalBranch => out.extend(target()),
        // ret, indirect jumps (their targets start from nothing known),
        // interrupts, `ud2`, exceptions: nothing known follows.
        _ => {}
    }
    out
}

/// The effect of `ins` on the typed registers.
fn transfer(
    ins: &Instruction,
    s: &mut State,
    seeds: &dyn Seeds,
    info: &mut InstructionInfoFactory,
) {
    if let Some((r, v)) = arithmetic(ins, s, seeds) {
        s[r] = v;
        return;
    }
    if matches!(
        ins.flow_control(),
        FlowControl::Call | FlowControl::IndirectCall
    ) {
        for r in CALLER_SAVED {
            s[r] = Lat::Unknown;
        }
    }
    // Any other write of a general register (partial and 32-bit ones
    // included) forgets it.
    for u in info.info(ins).used_registers() {
        if matches!(
            u.access(),
            OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
        ) {
            if let Some(r) = dwarf_number(u.register().full_register()) {
                s[r as usize] = Lat::Unknown;
            }
        }
    }
}

/// A 64-bit register or the 32-bit half whose write zero-extends into it,
/// by DWARF number and whether it is the whole register.
fn gpr(r: Register) -> Option<(usize, bool)> {
    if r.is_gpr64() {
        dwarf_number(r).map(|n| (n as usize, true))
    } else if r.is_gpr32() {
        dwarf_number(r.full_register()).map(|n| (n as usize, false))
    } else {
        None
    }
}

/// What the integer arithmetic the pass follows leaves in its destination
/// register: `None` for every other instruction (its writes forget).
/// 32-bit results are taken as the 64-bit ones (no index overflows 32
/// bits), except that a pointer is only carried in 64 bits.
fn arithmetic(ins: &Instruction, s: &State, seeds: &dyn Seeds) -> Option<(usize, Lat)> {
    if ins.op_count() == 0 || ins.op0_kind() != OpKind::Register {
        return None;
    }
    let (r, whole) = gpr(ins.op0_register())?;
    let imm = (ins.op_count() >= 2 && is_immediate(ins.op_kind(ins.op_count() - 1)))
        .then(|| ins.immediate(ins.op_count() - 1) as i64);
    let src = (ins.op_count() >= 2 && ins.op1_kind() == OpKind::Register)
        .then(|| gpr(ins.op1_register()))
        .flatten();
    let size = |t: &Typed| seeds.size_of(t.ty);
    let shift = |t: Typed, by: i64| -> Lat {
        if !whole {
            return Lat::Unknown;
        }
        Lat::Known(Typed {
            offset: fold(t.offset.wrapping_add(by), size(&t)),
            ..t
        })
    };
    // A pointer plus or minus a known number of whole elements.
    let plus = |t: Typed, g: u64| -> Lat {
        match size(&t) {
            Some(sz) if whole && g.is_multiple_of(sz) => Lat::Known(t),
            None if whole && g == 0 => Lat::Known(t),
            _ => Lat::Unknown,
        }
    };
    let int = |l: Lat| match l {
        Lat::Stride(g) => g,
        _ => 1,
    };
    let v = match ins.mnemonic() {
        Mnemonic::Add | Mnemonic::Sub if imm.is_some() => {
            let k = imm.unwrap_or(0);
            let k = if ins.mnemonic() == Mnemonic::Sub {
                k.wrapping_neg()
            } else {
                k
            };
            match s[r] {
                Lat::Known(t) => shift(t, k),
                Lat::Stride(g) => Lat::Stride(gcd(g, k.unsigned_abs())),
                other => other,
            }
        }
        Mnemonic::Inc | Mnemonic::Dec => {
            let k = if ins.mnemonic() == Mnemonic::Inc {
                1
            } else {
                -1
            };
            match s[r] {
                Lat::Known(t) => shift(t, k),
                Lat::Stride(_) => Lat::Stride(1),
                other => other,
            }
        }
        Mnemonic::Add | Mnemonic::Sub if src.is_some() => {
            let (q, _) = src?;
            match (s[r], s[q]) {
                _ if ins.mnemonic() == Mnemonic::Sub && q == r => Lat::Stride(0),
                (Lat::Known(t), Lat::Stride(g)) => plus(t, g),
                (Lat::Stride(g), Lat::Known(t)) if ins.mnemonic() == Mnemonic::Add => plus(t, g),
                (Lat::Stride(a), Lat::Stride(b)) => Lat::Stride(gcd(a, b)),
                _ => Lat::Unknown,
            }
        }
        Mnemonic::Xor if src.is_some_and(|(q, _)| q == r) => Lat::Stride(0),
        Mnemonic::Mov if imm.is_some() => Lat::Stride(imm.unwrap_or(0).unsigned_abs()),
        Mnemonic::Mov if src.is_some() => {
            let (q, _) = src?;
            match s[q] {
                Lat::Known(t) if whole => Lat::Known(t),
                Lat::Stride(g) => Lat::Stride(g),
                _ => Lat::Unknown,
            }
        }
        Mnemonic::Movsxd if src.is_some() => match s[src?.0] {
            Lat::Stride(g) => Lat::Stride(g),
            _ => Lat::Unknown,
        },
        Mnemonic::Shl if imm.is_some() => {
            let k = imm.unwrap_or(0);
            if !(0..64).contains(&k) {
                return Some((r, Lat::Unknown));
            }
            Lat::Stride(int(s[r]).wrapping_shl(k as u32))
        }
        Mnemonic::Imul if ins.op_count() == 3 && imm.is_some() => {
            let g = match ins.op1_kind() {
                OpKind::Register => gpr(ins.op1_register()).map_or(1, |(q, _)| int(s[q])),
                _ => 1,
            };
            Lat::Stride(g.wrapping_mul(imm.unwrap_or(0).unsigned_abs()))
        }
        Mnemonic::Imul if ins.op_count() == 2 && src.is_some() => {
            let (a, b) = (int(s[r]), int(s[src?.0]));
            Lat::Stride(a.wrapping_mul(b))
        }
        Mnemonic::Lea => lea(ins, s, seeds, whole),
        Mnemonic::Mov if whole && ins.op1_kind() == OpKind::Memory => load(ins, s, seeds),
        _ => return None,
    };
    Some((r, v))
}

/// `mov r, [base + disp]` through a typed base, of a pointer member.
fn load(ins: &Instruction, s: &State, seeds: &dyn Seeds) -> Lat {
    if ins.memory_index() != Register::None || ins.segment_prefix() != Register::None {
        return Lat::Unknown;
    }
    let Some(b) = dwarf_number(ins.memory_base()) else {
        return Lat::Unknown;
    };
    let Lat::Known(t) = s[b as usize] else {
        return Lat::Unknown;
    };
    let at = fold(
        t.offset.wrapping_add(ins.memory_displacement64() as i64),
        seeds.size_of(t.ty),
    );
    match seeds.pointee_at(t.ty, at) {
        Some(ty) => Lat::Known(Typed { ty, offset: 0, ..t }),
        None => Lat::Unknown,
    }
}

/// `lea r, [base + index*scale + disp]`: a typed base moved, an address
/// in a global, or integer arithmetic (`lea (%rsi,%rsi,2)` is 3 x rsi).
fn lea(ins: &Instruction, s: &State, seeds: &dyn Seeds, whole: bool) -> Lat {
    let disp = ins.memory_displacement64() as i64;
    if ins.memory_base() == Register::RIP {
        // iced gives the operand's absolute address for rip-relative forms.
        return match seeds.global(ins.memory_displacement64()) {
            Some((ty, offset, var)) if whole => Lat::Known(Typed {
                ty,
                offset: fold(offset, seeds.size_of(ty)),
                var,
                origin: Origin::Global,
            }),
            _ => Lat::Unknown,
        };
    }
    // The address of a local in the frame: `lea -0x78(%rsp),%rsi`.
    if matches!(ins.memory_base(), Register::RSP | Register::RBP)
        && ins.memory_index() == Register::None
        && whole
    {
        let reg = if ins.memory_base() == Register::RSP {
            7
        } else {
            6
        };
        let known = matches!(s[reg as usize], Lat::Known(_));
        if !known {
            return match seeds.frame(ins.ip(), reg, disp) {
                Some((ty, offset, var)) => Lat::Known(Typed {
                    ty,
                    offset: fold(offset, seeds.size_of(ty)),
                    var,
                    origin: Origin::Frame,
                }),
                None => Lat::Unknown,
            };
        }
    }
    let lat = |r: Register| match gpr(r) {
        Some((n, true)) => s[n],
        None if r == Register::None => Lat::Stride(0),
        _ => Lat::Unknown,
    };
    let (base, index) = (lat(ins.memory_base()), lat(ins.memory_index()));
    let scale = u64::from(ins.memory_index_scale());
    let int = |l: Lat| match l {
        Lat::Stride(g) => Some(g),
        _ => None,
    };
    match (base, index) {
        (Lat::Known(t), i) | (i, Lat::Known(t)) if whole => {
            if matches!(index, Lat::Known(_)) && scale != 1 {
                return Lat::Unknown;
            }
            let g = match int(i) {
                Some(g) => g.wrapping_mul(if matches!(base, Lat::Known(_)) {
                    scale
                } else {
                    1
                }),
                None => return Lat::Unknown,
            };
            let size = seeds.size_of(t.ty);
            let elements = match size {
                Some(sz) => g.is_multiple_of(sz),
                None => g == 0,
            };
            if !elements {
                return Lat::Unknown;
            }
            Lat::Known(Typed {
                offset: fold(t.offset.wrapping_add(disp), size),
                ..t
            })
        }
        _ => {
            // Integers: the same register as base and index is (1 + scale)
            // times it.
            let g =
                if ins.memory_base() == ins.memory_index() && ins.memory_base() != Register::None {
                    int(base).unwrap_or(1).wrapping_mul(1 + scale)
                } else {
                    let (Some(b), i) = (int(base), int(index).unwrap_or(1)) else {
                        return Lat::Unknown;
                    };
                    gcd(b, i.wrapping_mul(scale))
                };
            Lat::Stride(gcd(g, disp.unsigned_abs()))
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn is_immediate(k: OpKind) -> bool {
    matches!(
        k,
        OpKind::Immediate8
            | OpKind::Immediate16
            | OpKind::Immediate32
            | OpKind::Immediate64
            | OpKind::Immediate8to16
            | OpKind::Immediate8to32
            | OpKind::Immediate8to64
            | OpKind::Immediate32to64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pointer type of 192 bytes, seeded in rdi at the entry.
    #[derive(Clone, Copy)]
    struct Entry {
        at: u64,
        size: u64,
    }
    const ENTITY: TypeRef = gimli::DebugInfoOffset(0x100);
    impl Seeds for Entry {
        fn seed(&self, pc: u64, reg: u16) -> Option<(TypeRef, i64, u32)> {
            (pc == self.at && reg == 5).then_some((ENTITY, 0, 0))
        }
        fn size_of(&self, ty: TypeRef) -> Option<u64> {
            match ty {
                ENTITY => Some(self.size),
                NODE => Some(16),
                TABLE => Some(4),
                _ => None,
            }
        }
        /// A `uint32_t[256]` at 0x2040: its element type.
        fn global(&self, addr: u64) -> Option<(TypeRef, i64, u32)> {
            (0x2040..0x2440)
                .contains(&addr)
                .then(|| (TABLE, (addr - 0x2040) as i64 % 4, 7))
        }
        /// `struct Node { Node *next; long v; }` and Entity's `+8` a `Node*`.
        fn pointee_at(&self, ty: TypeRef, offset: i64) -> Option<TypeRef> {
            match (ty, offset) {
                (NODE, 0) | (ENTITY, 8) => Some(NODE),
                _ => None,
            }
        }
    }
    const NODE: TypeRef = gimli::DebugInfoOffset(0x200);
    const TABLE: TypeRef = gimli::DebugInfoOffset(0x300);

    /// g++ 12 -O2's `cull(const Entity*, int)` (192-byte Entity, flags at
    /// +160): `add $0xa0,%rdi` before the loop, `movzwl (%rdi),%eax` and
    /// `add $0xc0,%rdi` in it.
    const CULL: &[u8] = &[
        0x85, 0xf6, 0x7e, 0x3c, 0x48, 0x63, 0xf6, 0x48, 0x81, 0xc7, 0xa0, 0x00, 0x00, 0x00, 0x31,
        0xd2, 0x48, 0x8d, 0x0c, 0x76, 0x48, 0xc1, 0xe1, 0x06, 0x48, 0x01, 0xf9, 0x0f, 0x1f, 0x44,
        0x00, 0x00, 0x0f, 0xb7, 0x07, 0x83, 0xe0, 0x01, 0x66, 0x83, 0xf8, 0x01, 0x83, 0xda, 0xff,
        0x48, 0x81, 0xc7, 0xc0, 0x00, 0x00, 0x00, 0x48, 0x39, 0xcf, 0x75, 0xe7, 0x89, 0xd0, 0xc3,
        0x0f, 0x1f, 0x40, 0x00, 0x31, 0xd2, 0x89, 0xd0, 0xc3,
    ];

    fn entry() -> Entry {
        Entry {
            at: 0x1000,
            size: 192,
        }
    }

    /// The operand at `pc` as (type, offset, unfolded index scale).
    fn op(f: &Flow, pc: u64) -> Option<(TypeRef, i64, u32)> {
        f.operand(pc).map(|o| (o.at.ty, o.at.offset, o.scale))
    }

    #[test]
    fn a_pointer_advanced_by_whole_elements_in_a_loop_keeps_its_field_offset() {
        let seeds = Entry {
            at: 0x12d0,
            size: 192,
        };
        let f = Flow::run(CULL, 0x12d0, &seeds);
        // The load in the loop: rdi points at +160 of an Entity.
        assert_eq!(op(&f, 0x12f0), Some((ENTITY, 160, 0)));
        assert_eq!(f.len(), 1, "the loop's load is the only memory operand");
        // With a 200-byte type the loop's +192 lands elsewhere each turn:
        // the paths meet with different offsets and nothing is guessed.
        let f = Flow::run(CULL, 0x12d0, &Entry { size: 200, ..seeds });
        assert_eq!(op(&f, 0x12f0), None);
    }

    #[test]
    fn calls_forget_caller_saved_registers_and_keep_callee_saved_ones() {
        // mov %rdi,%rbx; call 0 (rel32 to itself+5); mov (%rbx),%eax;
        // mov (%rdi),%eax; ret
        let code = [
            0x48, 0x89, 0xfb, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x8b, 0x03, 0x8b, 0x07, 0xc3,
        ];
        let f = Flow::run(&code, 0x1000, &entry());
        assert_eq!(op(&f, 0x1008), Some((ENTITY, 0, 0)));
        assert_eq!(op(&f, 0x100a), None);
        // A 32-bit write of rbx forgets it: mov %rdi,%rbx; mov $1,%ebx;
        // mov (%rbx),%eax; ret
        let code = [
            0x48, 0x89, 0xfb, 0xbb, 0x01, 0x00, 0x00, 0x00, 0x8b, 0x03, 0xc3,
        ];
        let f = Flow::run(&code, 0x1000, &entry());
        assert_eq!(op(&f, 0x1008), None);
    }

    #[test]
    fn pointer_members_loaded_and_global_addresses_taken_are_typed() {
        // mov 0x8(%rdi),%rax (Entity's Node*); 1: mov (%rax),%rax
        // (n = n->next); test %rax,%rax; jne 1b; ret
        let code = [
            0x48, 0x8b, 0x47, 0x08, 0x48, 0x8b, 0x00, 0x48, 0x85, 0xc0, 0x75, 0xf8, 0xc3,
        ];
        let f = Flow::run(&code, 0x1000, &entry());
        assert_eq!(op(&f, 0x1000), Some((ENTITY, 8, 0)));
        assert_eq!(op(&f, 0x1004), Some((NODE, 0, 0)));
        // A member that is not a pointer types nothing loaded from it:
        // mov 0x10(%rdi),%rax; mov (%rax),%eax; ret
        let code = [0x48, 0x8b, 0x47, 0x10, 0x8b, 0x00, 0xc3];
        let f = Flow::run(&code, 0x1000, &entry());
        assert_eq!(op(&f, 0x1004), None);
        // lea 0x90c(%rip),%rsi at 0x172d (kTable at 0x2040, uint32_t
        // elements); xor (%rsi,%rax,4),%edx with an unknown index: whole
        // elements.
        let code = [
            0x48, 0x8d, 0x35, 0x0c, 0x09, 0x00, 0x00, 0x33, 0x14, 0x86, 0xc3,
        ];
        let f = Flow::run(&code, 0x172d, &entry());
        assert_eq!(f.operand(0x1734).map(|o| o.at.var), Some(7));
        assert_eq!(op(&f, 0x1734), Some((TABLE, 0, 0)));
    }

    /// rustc -O's `step(&mut [Particle])` (40-byte Particle, `mass` first):
    /// `xor %eax,%eax`, loads `(%rdi,%rax,1)` and `0x28(%rdi,%rax,1)` in a
    /// loop unrolled twice (`add $0x50,%rax`).
    const STEP: &[u8] = &[
        0x31, 0xc0, 0x66, 0x0f, 0x57, 0xc0, 0x0f, 0x28, 0x0d, 0x23, 0x01, 0xff, 0xff, 0xeb, 0x0d,
        0x90, 0x48, 0x83, 0xc0, 0x50, 0x48, 0x3d, 0x00, 0x80, 0x02, 0x00, 0x74, 0x60, 0xf2, 0x0f,
        0x10, 0x14, 0x07, 0x66, 0x0f, 0x2e, 0xd0, 0x77, 0x19, 0xf2, 0x0f, 0x10, 0x54, 0x07, 0x28,
        0x66, 0x0f, 0x2e, 0xd0, 0x76, 0xdd, 0xeb, 0x2e, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00,
        0x00, 0x00, 0x00, 0x00, 0xf2, 0x0f, 0x10, 0x54, 0x07, 0x08, 0xf2, 0x0f, 0x10, 0x5c, 0x07,
        0x14, 0x0f, 0x59, 0xd9, 0x0f, 0x58, 0xda, 0x0f, 0x13, 0x5c, 0x07, 0x08, 0xf2, 0x0f, 0x10,
        0x54, 0x07, 0x28, 0x66, 0x0f, 0x2e, 0xd0, 0x76, 0xad, 0xf2, 0x0f, 0x10, 0x54, 0x07, 0x30,
        0xf2, 0x0f, 0x10, 0x5c, 0x07, 0x3c, 0x0f, 0x59, 0xd9, 0x0f, 0x58, 0xda, 0x0f, 0x13, 0x5c,
        0x07, 0x30, 0xeb, 0x94, 0xc3,
    ];

    #[test]
    fn an_index_advanced_by_whole_elements_folds_into_the_element() {
        let seeds = Entry {
            at: 0x15370,
            size: 40,
        };
        let f = Flow::run(STEP, 0x15370, &seeds);
        // mass of the first and of the second particle of the pair.
        assert_eq!(op(&f, 0x1538c), Some((ENTITY, 0, 0)));
        assert_eq!(op(&f, 0x15397), Some((ENTITY, 0, 0)));
        // pos (+8) read and written, vel (+0x14) read; the second
        // particle's pos at 0x30 = 40 + 8.
        assert_eq!(op(&f, 0x153b0), Some((ENTITY, 8, 0)));
        assert_eq!(op(&f, 0x153b6), Some((ENTITY, 20, 0)));
        assert_eq!(op(&f, 0x153c2), Some((ENTITY, 8, 0)));
        assert_eq!(op(&f, 0x153d3), Some((ENTITY, 8, 0)));
        // A stride that is not whole elements (a 48-byte type) leaves the
        // index unfolded.
        let f = Flow::run(STEP, 0x15370, &Entry { size: 48, ..seeds });
        assert_eq!(op(&f, 0x1538c), Some((ENTITY, 0, 1)));
    }
}
