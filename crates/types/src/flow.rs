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
//! - where two paths meet with different types or offsets, the register is
//!   forgotten (never guessed).
//!
//! A seed is authoritative at its instruction: it replaces what the flow
//! carried. Pure: instruction bytes and two callbacks in, a table out.

use crate::TypeRef;
use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic,
    OpAccess, OpKind, Register,
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
}

/// What the pass knows of a register at a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lat {
    /// Not reached yet.
    Unreached,
    Known(Typed),
    /// Reached, not a known typed pointer.
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
}

/// The typed registers at each instruction of one function.
#[derive(Debug, Default)]
pub struct Flow {
    /// Instruction addresses, ascending, and the state before each.
    at: Vec<(u64, [Option<Typed>; 16])>,
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
            if !reached[i] {
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
        let at = instrs
            .iter()
            .zip(&state_in)
            .map(|(ins, s)| {
                let s = seeded(*s, ins.ip(), seeds);
                let mut out = [None; 16];
                for (o, l) in out.iter_mut().zip(s) {
                    if let Lat::Known(t) = l {
                        *o = Some(t);
                    }
                }
                (ins.ip(), out)
            })
            .collect();
        Flow { at }
    }

    /// The typed pointer register `reg` (DWARF number) holds just before
    /// the instruction at `pc` executes.
    pub fn at(&self, pc: u64, reg: u16) -> Option<Typed> {
        let i = self.at.binary_search_by_key(&pc, |(a, _)| *a).ok()?;
        *self.at[i].1.get(reg as usize)?
    }
}

/// `s` with the seeds DWARF gives at `pc` in place.
fn seeded(mut s: State, pc: u64, seeds: &dyn Seeds) -> State {
    for (r, l) in s.iter_mut().enumerate() {
        if let Some((ty, off, var)) = seeds.seed(pc, r as u16) {
            *l = Lat::Known(Typed {
                ty,
                offset: fold(off, seeds.size_of(ty)),
                var,
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
    let reg0 = (ins.op_count() > 0 && ins.op0_kind() == OpKind::Register)
        .then(|| dwarf_number(ins.op0_register()))
        .flatten()
        .map(usize::from);
    let imm = || -> Option<i64> {
        (ins.op_count() == 2 && is_immediate(ins.op1_kind())).then(|| ins.immediate(1) as i64)
    };
    let shift = |s: &mut State, r: usize, by: i64| {
        s[r] = match s[r] {
            Lat::Known(t) => Lat::Known(Typed {
                offset: fold(t.offset.wrapping_add(by), seeds.size_of(t.ty)),
                ..t
            }),
            other => other,
        };
    };
    match (ins.mnemonic(), reg0) {
        (Mnemonic::Add, Some(r)) if imm().is_some() => return shift(s, r, imm().unwrap_or(0)),
        (Mnemonic::Sub, Some(r)) if imm().is_some() => {
            return shift(s, r, imm().unwrap_or(0).wrapping_neg())
        }
        (Mnemonic::Inc, Some(r)) => return shift(s, r, 1),
        (Mnemonic::Dec, Some(r)) => return shift(s, r, -1),
        (Mnemonic::Mov, Some(r))
            if ins.op_count() == 2
                && ins.op1_kind() == OpKind::Register
                && dwarf_number(ins.op1_register()).is_some() =>
        {
            let q = dwarf_number(ins.op1_register())
                .map(usize::from)
                .unwrap_or(r);
            s[r] = s[q];
            return;
        }
        (Mnemonic::Lea, Some(r)) => {
            s[r] = lea(ins, s, seeds);
            return;
        }
        (Mnemonic::Mov, Some(r))
            if ins.code() == Code::Mov_r64_rm64 && ins.op1_kind() == OpKind::Memory =>
        {
            s[r] = load(ins, s, seeds);
            return;
        }
        _ => {}
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
        Some(ty) => Lat::Known(Typed {
            ty,
            offset: 0,
            var: t.var,
        }),
        None => Lat::Unknown,
    }
}

/// `lea r, [base + index*scale + disp]` over a typed base, or of an
/// address in a global.
fn lea(ins: &Instruction, s: &State, seeds: &dyn Seeds) -> Lat {
    if ins.code() != Code::Lea_r64_m {
        return Lat::Unknown;
    }
    if ins.memory_base() == Register::RIP {
        // iced gives the operand's absolute address for rip-relative forms.
        return match seeds.global(ins.memory_displacement64()) {
            Some((ty, offset, var)) => Lat::Known(Typed {
                ty,
                offset: fold(offset, seeds.size_of(ty)),
                var,
            }),
            None => Lat::Unknown,
        };
    }
    let Some(b) = dwarf_number(ins.memory_base()) else {
        return Lat::Unknown;
    };
    let Lat::Known(t) = s[b as usize] else {
        return Lat::Unknown;
    };
    if ins.memory_index() != Register::None {
        // An unknown number of whole elements keeps the offset.
        let scale = u64::from(ins.memory_index_scale());
        match seeds.size_of(t.ty) {
            Some(sz) if sz > 0 && scale % sz == 0 => {}
            _ => return Lat::Unknown,
        }
    }
    Lat::Known(Typed {
        offset: fold(
            t.offset.wrapping_add(ins.memory_displacement64() as i64),
            seeds.size_of(t.ty),
        ),
        ..t
    })
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

    #[test]
    fn a_pointer_advanced_by_whole_elements_in_a_loop_keeps_its_field_offset() {
        let f = Flow::run(
            CULL,
            0x12d0,
            &Entry {
                at: 0x12d0,
                size: 192,
            },
        );
        // The load in the loop: rdi points at +160 of an Entity.
        let t = f.at(0x12f0, 5).expect("rdi typed in the loop");
        assert_eq!((t.ty, t.offset), (ENTITY, 160));
        // After the loop's `add $0xc0`: still +160 (one element on).
        assert_eq!(f.at(0x1304, 5).map(|t| t.offset), Some(160));
        // rcx = rdi + rsi*192 (`add %rdi,%rcx`) is not followed.
        assert_eq!(f.at(0x12eb, 2), None);
        // rsi (an int) was never a pointer.
        assert_eq!(f.at(0x12f0, 4), None);
    }

    #[test]
    fn an_advance_that_is_not_whole_elements_forgets_the_register_at_the_loop_head() {
        // With a 200-byte type the loop's +192 lands elsewhere each turn:
        // the paths meet with different offsets and nothing is guessed.
        let f = Flow::run(
            CULL,
            0x12d0,
            &Entry {
                at: 0x12d0,
                size: 200,
            },
        );
        assert_eq!(f.at(0x12f0, 5), None);
        // Before the loop it is still known.
        assert_eq!(f.at(0x12de, 5).map(|t| t.offset), Some(160));
    }

    #[test]
    fn calls_forget_caller_saved_registers_and_keep_callee_saved_ones() {
        // mov %rdi,%rbx; call 0 (rel32 to itself+5); mov (%rbx),%eax;
        // mov (%rdi),%eax; ret
        let code = [
            0x48, 0x89, 0xfb, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x8b, 0x03, 0x8b, 0x07, 0xc3,
        ];
        let f = Flow::run(
            &code,
            0x1000,
            &Entry {
                at: 0x1000,
                size: 192,
            },
        );
        assert_eq!(f.at(0x1008, 3).map(|t| t.offset), Some(0));
        assert_eq!(f.at(0x1008, 5), None);
        // A 32-bit write of rbx forgets it: mov %rdi,%rbx; mov $1,%ebx; ret
        let code = [0x48, 0x89, 0xfb, 0xbb, 0x01, 0x00, 0x00, 0x00, 0xc3];
        let f = Flow::run(
            &code,
            0x1000,
            &Entry {
                at: 0x1000,
                size: 192,
            },
        );
        assert_eq!(f.at(0x1003, 3).map(|t| t.offset), Some(0));
        assert_eq!(f.at(0x1008, 3), None);
    }

    fn entry() -> Entry {
        Entry {
            at: 0x1000,
            size: 192,
        }
    }

    #[test]
    fn pointer_members_loaded_and_global_addresses_taken_are_typed() {
        // mov 0x8(%rdi),%rax (Entity's Node*); 1: mov (%rax),%rax
        // (n = n->next); test %rax,%rax; jne 1b; ret
        let code = [
            0x48, 0x8b, 0x47, 0x08, 0x48, 0x8b, 0x00, 0x48, 0x85, 0xc0, 0x75, 0xf8, 0xc3,
        ];
        let f = Flow::run(&code, 0x1000, &entry());
        assert_eq!(f.at(0x1004, 0).map(|t| (t.ty, t.offset)), Some((NODE, 0)));
        assert_eq!(f.at(0x1007, 0).map(|t| t.ty), Some(NODE));
        // A load of a member that is not a pointer forgets: mov 0x10(%rdi),%rax
        let code = [0x48, 0x8b, 0x47, 0x10, 0xc3];
        let f = Flow::run(&code, 0x1000, &entry());
        assert_eq!(f.at(0x1004, 0), None);
        // lea 0x90c(%rip),%rsi at 0x172d: kTable at 0x2040, element typed.
        let code = [0x48, 0x8d, 0x35, 0x0c, 0x09, 0x00, 0x00, 0xc3];
        let f = Flow::run(&code, 0x172d, &entry());
        assert_eq!(
            f.at(0x1734, 4).map(|t| (t.ty, t.offset, t.var)),
            Some((TABLE, 0, 7))
        );
    }
}
