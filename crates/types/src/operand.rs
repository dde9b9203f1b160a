//! An instruction's memory operand (iced-x86) and the rules that pick its
//! type and field (see lib.rs and the rules in `docs/data-view.md`).
//!
//! (Being written. The interface below is fixed: `locals` implements
//! [`Variables`]; the rules call it.)

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
}
