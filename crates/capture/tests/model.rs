//! Tests of the x86-64 access model against hand-computed truths.
//!
//! Each case gives raw instruction bytes (assembled with GNU `as` in Intel
//! syntax and read back with `objdump -d -M intel`; the source is in the
//! comment next to the bytes), a synthetic machine state, and the accesses
//! worked out by hand from the Intel SDM: kind, address, size and order
//! (reads, then read-modify-writes, then writes).

use coldcache_capture::model::{
    AccessList, CpuFacts, MemAccess, Model, Plan, Unmodelled, XsaveLayout, MAX_ACCESSES,
};
use coldcache_sim::AccessKind;
use iced_x86::{Decoder, DecoderOptions, Instruction, Register};
use std::collections::HashMap;

#[path = "model/alloc_count.rs"]
mod alloc_count;
#[cfg(target_arch = "x86_64")]
#[path = "model/hardware.rs"]
mod hardware;

/// Where test instructions are placed.
const IP: u64 = 0x40_1000;

/// A synthetic saved context.
#[derive(Clone, Default)]
struct TestMachine {
    gprs: HashMap<Register, u64>,
    rflags: u64,
    fs: u64,
    gs: u64,
    vectors: HashMap<Register, [u8; 64]>,
    opmasks: HashMap<Register, u64>,
    mmx: HashMap<Register, u64>,
    memory: HashMap<u64, u64>,
    xinuse: Option<u64>,
}

impl TestMachine {
    fn new() -> Self {
        TestMachine {
            rflags: 0x202,
            ..Default::default()
        }
    }
    fn set(mut self, reg: Register, value: u64) -> Self {
        self.gprs.insert(reg.full_register(), value);
        self
    }
    fn fs(mut self, base: u64) -> Self {
        self.fs = base;
        self
    }
    fn gs(mut self, base: u64) -> Self {
        self.gs = base;
        self
    }
    fn df(mut self) -> Self {
        self.rflags |= 1 << 10;
        self
    }
    /// Sets a vector register from 32-bit elements (element 0 first).
    fn vec32(mut self, reg: Register, elems: &[i32]) -> Self {
        let mut v = [0u8; 64];
        for (i, e) in elems.iter().enumerate() {
            v[i * 4..i * 4 + 4].copy_from_slice(&e.to_le_bytes());
        }
        self.vectors.insert(reg.full_register(), v);
        self
    }
    /// Sets a vector register from 64-bit elements (element 0 first).
    fn vec64(mut self, reg: Register, elems: &[i64]) -> Self {
        let mut v = [0u8; 64];
        for (i, e) in elems.iter().enumerate() {
            v[i * 8..i * 8 + 8].copy_from_slice(&e.to_le_bytes());
        }
        self.vectors.insert(reg.full_register(), v);
        self
    }
    fn vec8(mut self, reg: Register, bytes: &[u8]) -> Self {
        let mut v = [0u8; 64];
        v[..bytes.len()].copy_from_slice(bytes);
        self.vectors.insert(reg.full_register(), v);
        self
    }
    fn k(mut self, reg: Register, value: u64) -> Self {
        self.opmasks.insert(reg, value);
        self
    }
    fn mm(mut self, reg: Register, value: u64) -> Self {
        self.mmx.insert(reg, value);
        self
    }
    fn xinuse(mut self, value: u64) -> Self {
        self.xinuse = Some(value);
        self
    }
    fn mem(mut self, addr: u64, value: u64) -> Self {
        self.memory.insert(addr, value);
        self
    }
}

impl coldcache_capture::model::Machine for TestMachine {
    fn gpr(&self, reg: Register) -> u64 {
        let full = self.gprs.get(&reg.full_register()).copied().unwrap_or(0);
        match reg {
            Register::AH | Register::BH | Register::CH | Register::DH => (full >> 8) & 0xFF,
            r if r.is_gpr8() => full & 0xFF,
            r if r.is_gpr16() => full & 0xFFFF,
            r if r.is_gpr32() => full & 0xFFFF_FFFF,
            _ => full,
        }
    }
    fn rflags(&self) -> u64 {
        self.rflags
    }
    fn segment_base(&self, seg: Register) -> u64 {
        match seg {
            Register::FS => self.fs,
            Register::GS => self.gs,
            _ => 0,
        }
    }
    fn vector(&self, reg: Register) -> Option<[u8; 64]> {
        let full = self.vectors.get(&reg.full_register())?;
        let mut v = [0u8; 64];
        v[..reg.size()].copy_from_slice(&full[..reg.size()]);
        Some(v)
    }
    fn opmask(&self, reg: Register) -> Option<u64> {
        self.opmasks.get(&reg).copied()
    }
    fn mmx(&self, reg: Register) -> Option<u64> {
        self.mmx.get(&reg).copied()
    }
    fn read_u64(&self, addr: u64) -> Option<u64> {
        self.memory.get(&addr).copied()
    }
    fn xinuse(&self) -> Option<u64> {
        self.xinuse
    }
}

fn decode(bytes: &[u8]) -> Instruction {
    let mut decoder = Decoder::with_ip(64, bytes, IP, DecoderOptions::NONE);
    let instr = decoder.decode();
    assert!(!instr.is_invalid(), "invalid bytes {bytes:02x?}");
    assert_eq!(instr.len(), bytes.len(), "{bytes:02x?} decodes as {instr}");
    instr
}

fn plan_with(bytes: &[u8], facts: CpuFacts) -> (Instruction, Plan) {
    let instr = decode(bytes);
    let mut model = Model::new(facts);
    let plan = model.plan(&instr);
    (instr, plan)
}

/// The accesses of one execution, or why there are none.
fn run_with(bytes: &[u8], m: &TestMachine, facts: CpuFacts) -> Result<Vec<MemAccess>, Unmodelled> {
    let (instr, plan) = plan_with(bytes, facts);
    let mut out = AccessList::default();
    plan.eval(&instr, m, &mut out)?;
    Ok(out.as_slice().to_vec())
}

fn run(bytes: &[u8], m: &TestMachine) -> Result<Vec<MemAccess>, Unmodelled> {
    run_with(bytes, m, CpuFacts::default())
}

fn acc(kind: AccessKind, addr: u64, size: u32) -> MemAccess {
    MemAccess { kind, addr, size }
}
fn r(addr: u64, size: u32) -> MemAccess {
    acc(AccessKind::Read, addr, size)
}
fn w(addr: u64, size: u32) -> MemAccess {
    acc(AccessKind::Write, addr, size)
}
fn rmw(addr: u64, size: u32) -> MemAccess {
    acc(AccessKind::ReadModifyWrite, addr, size)
}
fn nt(addr: u64, size: u32) -> MemAccess {
    acc(AccessKind::NonTemporalStore, addr, size)
}
fn pf(addr: u64, size: u32) -> MemAccess {
    acc(AccessKind::Prefetch, addr, size)
}
fn fl(addr: u64, size: u32) -> MemAccess {
    acc(AccessKind::Flush, addr, size)
}

const RSP: u64 = 0x7fff_ffff_e000;
const RBP: u64 = 0x7fff_ffff_e100;

fn stack() -> TestMachine {
    TestMachine::new()
        .set(Register::RSP, RSP)
        .set(Register::RBP, RBP)
        .set(Register::RAX, 0x60_0000)
}

mod stack_traffic {
    use super::*;

    #[test]
    fn push_register_writes_below_rsp() {
        // push rax
        assert_eq!(run(&[0x50], &stack()), Ok(vec![w(RSP - 8, 8)]));
    }

    #[test]
    fn push_memory_reads_with_rsp_before_it_moves() {
        // push qword ptr [rsp+8]: the source address uses RSP before the
        // decrement (SDM, PUSH).
        assert_eq!(
            run(&[0xff, 0x74, 0x24, 0x08], &stack()),
            Ok(vec![r(RSP + 8, 8), w(RSP - 8, 8)])
        );
    }

    #[test]
    fn pop_to_rsp_based_memory_uses_rsp_after_increment() {
        // pop qword ptr [rsp]: "If the ESP register is used as a base register
        // for addressing a destination operand in memory, the POP
        // instruction computes the effective address of the operand after it
        // increments the ESP register" (SDM, POP). iced agrees.
        assert_eq!(
            run(&[0x8f, 0x04, 0x24], &stack()),
            Ok(vec![r(RSP, 8), w(RSP + 8, 8)])
        );
        // pop qword ptr [rsp+8]
        assert_eq!(
            run(&[0x8f, 0x44, 0x24, 0x08], &stack()),
            Ok(vec![r(RSP, 8), w(RSP + 16, 8)])
        );
        // pop word ptr [rsp]: 16-bit operand, RSP moves by 2.
        assert_eq!(
            run(&[0x66, 0x8f, 0x04, 0x24], &stack()),
            Ok(vec![r(RSP, 2), w(RSP + 2, 2)])
        );
    }

    #[test]
    fn pop_to_memory_reads_stack_first() {
        // pop qword ptr [rax]
        assert_eq!(
            run(&[0x8f, 0x00], &stack()),
            Ok(vec![r(RSP, 8), w(0x60_0000, 8)])
        );
    }

    #[test]
    fn pushf_popf() {
        // pushfq
        assert_eq!(run(&[0x9c], &stack()), Ok(vec![w(RSP - 8, 8)]));
        // popfq
        assert_eq!(run(&[0x9d], &stack()), Ok(vec![r(RSP, 8)]));
    }

    #[test]
    fn push_and_pop_rsp() {
        // push rsp
        assert_eq!(run(&[0x54], &stack()), Ok(vec![w(RSP - 8, 8)]));
        // pop rsp
        assert_eq!(run(&[0x5c], &stack()), Ok(vec![r(RSP, 8)]));
    }

    #[test]
    fn call_indirect_reads_target_then_pushes() {
        // call qword ptr [rax]
        assert_eq!(
            run(&[0xff, 0x10], &stack()),
            Ok(vec![r(0x60_0000, 8), w(RSP - 8, 8)])
        );
        // call rel32 (call .+5)
        assert_eq!(run(&[0xe8, 0, 0, 0, 0], &stack()), Ok(vec![w(RSP - 8, 8)]));
    }

    #[test]
    fn ret_and_ret_imm16_read_one_slot() {
        // ret
        assert_eq!(run(&[0xc3], &stack()), Ok(vec![r(RSP, 8)]));
        // ret 16: the immediate only moves RSP afterwards.
        assert_eq!(run(&[0xc2, 0x10, 0x00], &stack()), Ok(vec![r(RSP, 8)]));
        // rep ret (the AMD branch-predictor idiom) is a plain ret.
        assert_eq!(run(&[0xf3, 0xc3], &stack()), Ok(vec![r(RSP, 8)]));
    }

    #[test]
    fn enter_level_zero_pushes_rbp() {
        // enter 32, 0
        assert_eq!(
            run(&[0xc8, 0x20, 0x00, 0x00], &stack()),
            Ok(vec![w(RSP - 8, 8)])
        );
    }

    #[test]
    fn enter_with_nesting_copies_frame_pointers() {
        // enter 16, 3: push rbp; push [rbp-8]; push [rbp-16]; push frame.
        assert_eq!(
            run(&[0xc8, 0x10, 0x00, 0x03], &stack()),
            Ok(vec![
                r(RBP - 8, 8),
                r(RBP - 16, 8),
                w(RSP - 8, 8),
                w(RSP - 16, 8),
                w(RSP - 24, 8),
                w(RSP - 32, 8),
            ])
        );
        // enter 0, 1: push rbp; push frame.
        assert_eq!(
            run(&[0xc8, 0x00, 0x00, 0x01], &stack()),
            Ok(vec![w(RSP - 8, 8), w(RSP - 16, 8)])
        );
    }

    #[test]
    fn leave_reads_saved_rbp() {
        // leave: mov rsp, rbp; pop rbp.
        assert_eq!(run(&[0xc9], &stack()), Ok(vec![r(RBP, 8)]));
        // 66 leave: pop bp, 2 bytes.
        assert_eq!(run(&[0x66, 0xc9], &stack()), Ok(vec![r(RBP, 2)]));
    }

    #[test]
    fn far_transfers_and_segment_pushes_are_unmodelled() {
        for bytes in [
            &[0x48, 0xcb][..], // retfq
            &[0x48, 0xcf],     // iretq
            &[0xff, 0x18],     // call fword ptr [rax]
            &[0x0f, 0xa0],     // push fs
            &[0x0f, 0xa1],     // pop fs
        ] {
            assert_eq!(
                run(bytes, &stack()),
                Err(Unmodelled::Unsupported),
                "{bytes:02x?}"
            );
        }
    }
}

mod strings {
    use super::*;

    const RSI: u64 = 0x1000_0000;
    const RDI: u64 = 0x2000_0000;

    fn regs(rcx: u64) -> TestMachine {
        TestMachine::new()
            .set(Register::RSI, RSI)
            .set(Register::RDI, RDI)
            .set(Register::RCX, rcx)
            .set(Register::RAX, 0x4141)
            .set(Register::RDX, 0x80)
    }

    #[test]
    fn movs_reads_source_before_writing_destination() {
        // movsb
        assert_eq!(run(&[0xa4], &regs(0)), Ok(vec![r(RSI, 1), w(RDI, 1)]));
        // movsq
        assert_eq!(run(&[0x48, 0xa5], &regs(0)), Ok(vec![r(RSI, 8), w(RDI, 8)]));
    }

    #[test]
    fn rep_movs_is_one_iteration_per_trap() {
        // rep movsb, RCX = 5: this trap's iteration moves one byte at the
        // current RSI/RDI.
        assert_eq!(run(&[0xf3, 0xa4], &regs(5)), Ok(vec![r(RSI, 1), w(RDI, 1)]));
        // rep movsd
        assert_eq!(run(&[0xf3, 0xa5], &regs(1)), Ok(vec![r(RSI, 4), w(RDI, 4)]));
    }

    #[test]
    fn rep_with_rcx_zero_makes_no_access() {
        // rep movsb, rep stosq, repe cmpsb, repne scasw with RCX = 0.
        for bytes in [
            &[0xf3, 0xa4][..],
            &[0xf3, 0x48, 0xab],
            &[0xf3, 0xa6],
            &[0x66, 0xf2, 0xaf],
        ] {
            assert_eq!(run(bytes, &regs(0)), Ok(vec![]), "{bytes:02x?}");
        }
    }

    #[test]
    fn direction_flag_does_not_move_the_current_element() {
        // std; rep stosq with DF=1: the iteration writes [RDI], then RDI -= 8.
        assert_eq!(run(&[0xf3, 0x48, 0xab], &regs(3).df()), Ok(vec![w(RDI, 8)]));
        // movsq with DF=1.
        assert_eq!(
            run(&[0x48, 0xa5], &regs(0).df()),
            Ok(vec![r(RSI, 8), w(RDI, 8)])
        );
    }

    #[test]
    fn address_size_override_uses_esi_edi_ecx() {
        // addr32 rep movsb: ESI/EDI (upper halves ignored), count in ECX.
        let m = regs(0x1_0000_0000) // ECX = 0, RCX != 0
            .set(Register::RSI, 0xdead_0000_1234_5678)
            .set(Register::RDI, 0xbeef_0000_0000_1000);
        assert_eq!(run(&[0x67, 0xf3, 0xa4], &m), Ok(vec![]));
        let m = m.set(Register::RCX, 0xffff_ffff_0000_0002);
        assert_eq!(
            run(&[0x67, 0xf3, 0xa4], &m),
            Ok(vec![r(0x1234_5678, 1), w(0x1000, 1)])
        );
    }

    #[test]
    fn compare_and_scan_only_read() {
        // repe cmpsb: reads [RDI] and [RSI], in Valgrind's order (lackey
        // prints the ES:RDI load first; the order is not architectural).
        assert_eq!(run(&[0xf3, 0xa6], &regs(2)), Ok(vec![r(RDI, 1), r(RSI, 1)]));
        // repne scasw
        assert_eq!(run(&[0x66, 0xf2, 0xaf], &regs(2)), Ok(vec![r(RDI, 2)]));
        // lodsd
        assert_eq!(run(&[0xad], &regs(0)), Ok(vec![r(RSI, 4)]));
    }

    #[test]
    fn port_strings() {
        // insb: writes ES:[RDI]; outsb: reads DS:[RSI]; rep insd.
        assert_eq!(run(&[0x6c], &regs(0)), Ok(vec![w(RDI, 1)]));
        assert_eq!(run(&[0x6e], &regs(0)), Ok(vec![r(RSI, 1)]));
        assert_eq!(run(&[0xf3, 0x6d], &regs(4)), Ok(vec![w(RDI, 4)]));
    }

    #[test]
    fn segment_override_on_string_source() {
        // fs movsb: source is FS:[RSI]; the destination is always ES.
        let m = regs(0).fs(0x7000_0000);
        assert_eq!(
            run(&[0x64, 0xa4], &m),
            Ok(vec![r(0x7000_0000 + RSI, 1), w(RDI, 1)])
        );
    }
}

mod addressing {
    use super::*;

    #[test]
    fn lea_and_multibyte_nop_make_no_access() {
        let m = TestMachine::new()
            .set(Register::RBX, 0x1000)
            .set(Register::RAX, 0x2000);
        // lea rax, [rbx+rcx*4+0x10]
        let (_, plan) = plan_with(&[0x48, 0x8d, 0x44, 0x8b, 0x10], CpuFacts::default());
        assert!(plan.is_empty());
        assert_eq!(run(&[0x48, 0x8d, 0x44, 0x8b, 0x10], &m), Ok(vec![]));
        // nop dword ptr [rax+rax*1+0]
        assert_eq!(run(&[0x0f, 0x1f, 0x04, 0x00], &m), Ok(vec![]));
        // cs nop word ptr [rax+rax*1+0]
        assert_eq!(run(&[0x2e, 0x66, 0x0f, 0x1f, 0x04, 0x00], &m), Ok(vec![]));
    }

    #[test]
    fn rip_relative_is_relative_to_the_next_instruction() {
        // mov eax, dword ptr [rip+0x100], 6 bytes at IP: next IP + 0x100.
        assert_eq!(
            run(&[0x8b, 0x05, 0x00, 0x01, 0x00, 0x00], &TestMachine::new()),
            Ok(vec![r(IP + 6 + 0x100, 4)])
        );
        // mov eax, dword ptr [eip+0x100]: 7 bytes, address truncated to 32 bits.
        assert_eq!(
            run(
                &[0x67, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00],
                &TestMachine::new()
            ),
            Ok(vec![r((IP + 7 + 0x100) & 0xffff_ffff, 4)])
        );
    }

    #[test]
    fn fs_and_gs_add_the_segment_base() {
        let m = TestMachine::new()
            .fs(0x7fff_f7d8_a740)
            .gs(0x5555_0000)
            .set(Register::RBX, 0x100);
        // mov rax, qword ptr fs:[0x28] (the stack protector canary)
        assert_eq!(
            run(&[0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00], &m),
            Ok(vec![r(0x7fff_f7d8_a740 + 0x28, 8)])
        );
        // mov rax, qword ptr gs:[rbx+8]
        assert_eq!(
            run(&[0x65, 0x48, 0x8b, 0x43, 0x08], &m),
            Ok(vec![r(0x5555_0000 + 0x108, 8)])
        );
    }

    #[test]
    fn address_size_override_wraps_at_32_bits() {
        // mov byte ptr [eax+ebx*1], 1 with EAX+EBX overflowing 32 bits.
        let m = TestMachine::new()
            .set(Register::RAX, 0xffff_ffff_ffff_fff0)
            .set(Register::RBX, 0x20);
        assert_eq!(
            run(&[0x67, 0xc6, 0x04, 0x18, 0x01], &m),
            Ok(vec![w(0x10, 1)])
        );
    }

    #[test]
    fn xlat_reads_rbx_plus_al() {
        let m = TestMachine::new()
            .set(Register::RBX, 0x1_0000_1000)
            .set(Register::RAX, 0xffff_ff80); // AL = 0x80, zero-extended
                                              // xlat
        assert_eq!(run(&[0xd7], &m), Ok(vec![r(0x1_0000_1080, 1)]));
        // addr32 xlat: [EBX + AL]
        assert_eq!(run(&[0x67, 0xd7], &m), Ok(vec![r(0x1080, 1)]));
    }
}

mod bit_test {
    use super::*;

    fn m(offset: u64) -> TestMachine {
        TestMachine::new()
            .set(Register::RAX, 0x10_0000)
            .set(Register::RCX, offset)
            .set(Register::RDX, offset)
    }

    #[test]
    fn register_offset_moves_the_operand() {
        // bt dword ptr [rax], ecx with ECX = 100: 4 * (100 div 32) = 12.
        assert_eq!(
            run(&[0x0f, 0xa3, 0x08], &m(100)),
            Ok(vec![r(0x10_0000 + 12, 4)])
        );
        // bts qword ptr [rax], rcx with RCX = 1000: 8 * (1000 div 64) = 120.
        assert_eq!(
            run(&[0x48, 0x0f, 0xab, 0x08], &m(1000)),
            Ok(vec![rmw(0x10_0000 + 120, 8)])
        );
        // lock bts qword ptr [rax], rcx
        assert_eq!(
            run(&[0xf0, 0x48, 0x0f, 0xab, 0x08], &m(64)),
            Ok(vec![rmw(0x10_0000 + 8, 8)])
        );
    }

    #[test]
    fn negative_offsets_round_down() {
        // bt dword ptr [rax], ecx with ECX = -1: bit 31 of the dword at -4.
        assert_eq!(
            run(&[0x0f, 0xa3, 0x08], &m(0xffff_ffff)),
            Ok(vec![r(0x10_0000 - 4, 4)])
        );
        // btr word ptr [rax], cx with CX = -17 (0xffef): 2 * floor(-17/16) = -4.
        // Upper bits of RCX are ignored for a 16-bit operand.
        assert_eq!(
            run(&[0x66, 0x0f, 0xb3, 0x08], &m(0x1234_ffef)),
            Ok(vec![rmw(0x10_0000 - 4, 2)])
        );
        // btc dword ptr [rax+4], edx with EDX = -33: 4 * floor(-33/32) = -8.
        assert_eq!(
            run(&[0x0f, 0xbb, 0x50, 0x04], &m((-33i32) as u32 as u64)),
            Ok(vec![rmw(0x10_0000 + 4 - 8, 4)])
        );
        // bts qword ptr [rax], rcx with RCX = -64: one qword down.
        assert_eq!(
            run(&[0x48, 0x0f, 0xab, 0x08], &m((-64i64) as u64)),
            Ok(vec![rmw(0x10_0000 - 8, 8)])
        );
    }

    #[test]
    fn immediate_offset_is_taken_modulo_operand_size() {
        // bt dword ptr [rax], 37: bit 37 mod 32 = 5 of [rax]; the address
        // does not move (SDM, BT) and iced reports it so.
        assert_eq!(
            run(&[0x0f, 0xba, 0x20, 0x25], &m(0)),
            Ok(vec![r(0x10_0000, 4)])
        );
    }
}

mod hints_and_non_temporal {
    use super::*;

    fn m() -> TestMachine {
        TestMachine::new()
            .set(Register::RAX, 0x30_0040)
            .set(Register::RDI, 0x1_2345_6780)
    }

    #[test]
    fn software_prefetches_use_the_operand() {
        // prefetcht0/t1/t2/nta/w: one byte at the operand (the simulator acts
        // on the line).
        assert_eq!(run(&[0x0f, 0x18, 0x08], &m()), Ok(vec![pf(0x30_0040, 1)]));
        assert_eq!(
            run(&[0x0f, 0x18, 0x50, 0x40], &m()),
            Ok(vec![pf(0x30_0080, 1)])
        );
        assert_eq!(run(&[0x0f, 0x18, 0x18], &m()), Ok(vec![pf(0x30_0040, 1)]));
        assert_eq!(run(&[0x0f, 0x18, 0x00], &m()), Ok(vec![pf(0x30_0040, 1)]));
        assert_eq!(run(&[0x0f, 0x0d, 0x08], &m()), Ok(vec![pf(0x30_0040, 1)]));
        // prefetcht0 [rip+0x40]
        assert_eq!(
            run(&[0x0f, 0x18, 0x0d, 0x40, 0x00, 0x00, 0x00], &m()),
            Ok(vec![pf(IP + 7 + 0x40, 1)])
        );
    }

    #[test]
    fn non_temporal_stores() {
        // movnti qword ptr [rax], rbx
        assert_eq!(
            run(&[0x48, 0x0f, 0xc3, 0x18], &m()),
            Ok(vec![nt(0x30_0040, 8)])
        );
        // movntdq / movntps / movntpd xmmword ptr [rax]
        assert_eq!(
            run(&[0x66, 0x0f, 0xe7, 0x00], &m()),
            Ok(vec![nt(0x30_0040, 16)])
        );
        assert_eq!(run(&[0x0f, 0x2b, 0x08], &m()), Ok(vec![nt(0x30_0040, 16)]));
        assert_eq!(
            run(&[0x66, 0x0f, 0x2b, 0x08], &m()),
            Ok(vec![nt(0x30_0040, 16)])
        );
        // vmovntdq ymmword ptr [rax], ymm2
        assert_eq!(
            run(&[0xc5, 0xfd, 0xe7, 0x10], &m()),
            Ok(vec![nt(0x30_0040, 32)])
        );
        // vmovntps zmmword ptr [rax], zmm2
        assert_eq!(
            run(&[0x62, 0xf1, 0x7c, 0x48, 0x2b, 0x10], &m()),
            Ok(vec![nt(0x30_0040, 64)])
        );
        // movdir64b rax, [rbx]: 64-byte read, direct (non-temporal) store.
        let m2 = m().set(Register::RBX, 0x50_0000);
        assert_eq!(
            run(&[0x66, 0x0f, 0x38, 0xf8, 0x03], &m2),
            Ok(vec![r(0x50_0000, 64), nt(0x30_0040, 64)])
        );
    }

    #[test]
    fn non_temporal_load_is_a_read() {
        // movntdqa xmm0, xmmword ptr [rax]
        assert_eq!(
            run(&[0x66, 0x0f, 0x38, 0x2a, 0x00], &m()),
            Ok(vec![r(0x30_0040, 16)])
        );
    }

    #[test]
    fn masked_byte_stores_write_the_selected_runs() {
        // maskmovdqu xmm1, xmm2: mask is xmm2 (bytes 0-1, 4, 15 selected);
        // xmm1 is the data and its sign bits must not matter.
        let mask = [
            0x80, 0xff, 0, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81,
        ];
        let mm = m()
            .vec8(Register::XMM2, &mask)
            .vec8(Register::XMM1, &[0xff; 16]);
        let want = Ok(vec![
            nt(0x1_2345_6780, 2),
            nt(0x1_2345_6784, 1),
            nt(0x1_2345_678f, 1),
        ]);
        assert_eq!(run(&[0x66, 0x0f, 0xf7, 0xca], &mm), want);
        // vmaskmovdqu xmm1, xmm2
        assert_eq!(run(&[0xc5, 0xf9, 0xf7, 0xca], &mm), want);
        // addr32 maskmovdqu: DS:[EDI]
        assert_eq!(
            run(&[0x67, 0x66, 0x0f, 0xf7, 0xca], &mm),
            Ok(vec![
                nt(0x2345_6780, 2),
                nt(0x2345_6784, 1),
                nt(0x2345_678f, 1)
            ])
        );
        // All-zero mask: no write.
        let none = m()
            .vec8(Register::XMM2, &[0; 16])
            .vec8(Register::XMM1, &[0xff; 16]);
        assert_eq!(run(&[0x66, 0x0f, 0xf7, 0xca], &none), Ok(vec![]));
        // Mask register missing from the context.
        assert_eq!(
            run(&[0x66, 0x0f, 0xf7, 0xca], &m()),
            Err(Unmodelled::MissingRegister)
        );
    }

    #[test]
    fn maskmovq_uses_the_mmx_mask() {
        // maskmovq mm1, mm2: bytes 7 and 0..=2 of mm2 have their sign bit set.
        let mm = m()
            .mm(Register::MM2, 0x8000_0000_0080_8080)
            .mm(Register::MM1, !0);
        assert_eq!(
            run(&[0x0f, 0xf7, 0xca], &mm),
            Ok(vec![nt(0x1_2345_6780, 3), nt(0x1_2345_6787, 1)])
        );
        assert_eq!(
            run(&[0x0f, 0xf7, 0xca], &m()),
            Err(Unmodelled::MissingRegister)
        );
    }

    #[test]
    fn cache_line_flushes() {
        // clflush / clflushopt / clwb byte ptr [rax]
        assert_eq!(run(&[0x0f, 0xae, 0x38], &m()), Ok(vec![fl(0x30_0040, 1)]));
        assert_eq!(
            run(&[0x66, 0x0f, 0xae, 0x38], &m()),
            Ok(vec![fl(0x30_0040, 1)])
        );
        assert_eq!(
            run(&[0x66, 0x0f, 0xae, 0x30], &m()),
            Ok(vec![fl(0x30_0040, 1)])
        );
    }

    #[test]
    fn line_operations_without_a_kind_are_unmodelled() {
        // clzero, cldemote [rax], monitor, tileloadd tmm0, [rax+rbx]
        for bytes in [
            &[0x0f, 0x01, 0xfc][..],
            &[0x0f, 0x1c, 0x00],
            &[0x0f, 0x01, 0xc8],
            &[0xc4, 0xe2, 0x7b, 0x4b, 0x04, 0x18],
        ] {
            assert_eq!(
                run(bytes, &m()),
                Err(Unmodelled::Unsupported),
                "{bytes:02x?}"
            );
        }
    }
}

mod read_modify_write {
    use super::*;

    fn m() -> TestMachine {
        TestMachine::new().set(Register::RAX, 0x80_0000)
    }

    #[test]
    fn atomics_and_exchanges_are_rmw() {
        // Real processors always write the destination of cmpxchg (they
        // write back the old value on failure), so cmpxchg is an RMW.
        let cases: [(&[u8], u32); 8] = [
            (&[0x48, 0x0f, 0xb1, 0x18], 8),        // cmpxchg qword ptr [rax], rbx
            (&[0xf0, 0x0f, 0xb1, 0x18], 4),        // lock cmpxchg dword ptr [rax], ebx
            (&[0x0f, 0xc7, 0x08], 8),              // cmpxchg8b qword ptr [rax]
            (&[0xf0, 0x48, 0x0f, 0xc7, 0x08], 16), // lock cmpxchg16b [rax]
            (&[0x48, 0x0f, 0xc1, 0x18], 8),        // xadd qword ptr [rax], rbx
            (&[0x48, 0x87, 0x18], 8),              // xchg qword ptr [rax], rbx
            (&[0xf0, 0x83, 0x00, 0x01], 4),        // lock add dword ptr [rax], 1
            (&[0xf0, 0x48, 0xff, 0x00], 8),        // lock inc qword ptr [rax]
        ];
        for (bytes, size) in cases {
            assert_eq!(
                run(bytes, &m()),
                Ok(vec![rmw(0x80_0000, size)]),
                "{bytes:02x?}"
            );
        }
    }

    #[test]
    fn fxsave_and_fxrstor_move_the_416_state_bytes() {
        // fxsave [rax], fxrstor [rax], fxsave64 [rax]: x87 (0..24, 32..160),
        // MXCSR (24..32), XMM0-15 (160..416); bytes 416..512 are reserved or
        // free for software and not written (see hardware::fxsave_writes).
        assert_eq!(run(&[0x0f, 0xae, 0x00], &m()), Ok(vec![w(0x80_0000, 416)]));
        assert_eq!(run(&[0x0f, 0xae, 0x08], &m()), Ok(vec![r(0x80_0000, 416)]));
        assert_eq!(
            run(&[0x48, 0x0f, 0xae, 0x00], &m()),
            Ok(vec![w(0x80_0000, 416)])
        );
    }
}

mod xsave {
    use super::*;

    /// A hand-written layout: x87, SSE, AVX (576, 256), opmask (1088, 64),
    /// ZMM_Hi256 (1152, 512), Hi16_ZMM (1664, 1024), PKRU (2688, 8), with
    /// PKRU aligned to 64 in the compacted format (as on a Skylake server
    /// its offsets and sizes come from CPUID leaf 0xD).
    fn facts() -> CpuFacts {
        let mut layout = XsaveLayout {
            xcr0: 0b10_1110_0111,
            ..Default::default()
        };
        for (i, off, size) in [
            (2, 576, 256),
            (5, 1088, 64),
            (6, 1152, 512),
            (7, 1664, 1024),
            (9, 2688, 8),
        ] {
            layout.offset[i] = off;
            layout.size[i] = size;
        }
        layout.align64 = 1 << 9;
        CpuFacts {
            xsave_size: 2696,
            xsave: layout,
        }
    }

    const A: u64 = 0x90_0000;

    fn m(rfbm: u64) -> TestMachine {
        TestMachine::new()
            .set(Register::RCX, A)
            .set(Register::RAX, rfbm & 0xffff_ffff)
            .set(Register::RDX, rfbm >> 32)
    }

    #[test]
    fn xsave_partial_bitmap() {
        // xsave [rcx] with EDX:EAX = x87 | SSE | AVX: legacy region, header
        // XSTATE_BV (read-modify-write), AVX at its CPUID offset.
        assert_eq!(
            run_with(&[0x0f, 0xae, 0x21], &m(0b111), facts()),
            Ok(vec![
                rmw(A + 512, 8),
                w(A, 24),
                w(A + 32, 128),
                w(A + 24, 8),
                w(A + 160, 256),
                w(A + 576, 256),
            ])
        );
        // xsave64 [rcx] with only AVX and PKRU requested, and a bit XCR0 does
        // not enable (bit 3): MXCSR is saved with AVX state.
        assert_eq!(
            run_with(
                &[0x48, 0x0f, 0xae, 0x21],
                &m((1 << 2) | (1 << 3) | (1 << 9)),
                facts()
            ),
            Ok(vec![
                rmw(A + 512, 8),
                w(A + 24, 8),
                w(A + 576, 256),
                w(A + 2688, 8)
            ])
        );
    }

    #[test]
    fn xsavec_packs_components_and_skips_initial_ones() {
        // xsavec [rcx] with SSE | AVX | opmask | PKRU, all in use: compacted
        // offsets are 576 (AVX), 832 (opmask), then PKRU aligned to 64: 896.
        // The header's XSTATE_BV and XCOMP_BV are written (16 bytes).
        let rfbm = (1 << 1) | (1 << 2) | (1 << 5) | (1 << 9);
        assert_eq!(
            run_with(&[0x0f, 0xc7, 0x21], &m(rfbm).xinuse(!0), facts()),
            Ok(vec![
                w(A + 24, 8),
                w(A + 160, 256),
                w(A + 512, 16),
                w(A + 576, 256),
                w(A + 832, 64),
                w(A + 896, 8),
            ])
        );
        // Same request, with AVX and opmask state in their initial
        // configuration (XINUSE clear): not written, but PKRU keeps its
        // place. x87 in use but not requested.
        assert_eq!(
            run_with(
                &[0x0f, 0xc7, 0x21],
                &m(rfbm).xinuse(0b10_0000_0011),
                facts()
            ),
            Ok(vec![
                w(A + 24, 8),
                w(A + 160, 256),
                w(A + 512, 16),
                w(A + 896, 8)
            ])
        );
        // AVX only, in use: MXCSR is not written in the compacted format.
        assert_eq!(
            run_with(&[0x0f, 0xc7, 0x21], &m(1 << 2).xinuse(!0), facts()),
            Ok(vec![w(A + 512, 16), w(A + 576, 256)])
        );
        // XINUSE unknown.
        assert_eq!(
            run_with(&[0x0f, 0xc7, 0x21], &m(rfbm), facts()),
            Err(Unmodelled::MissingRegister)
        );
    }

    #[test]
    fn xrstor_reads_what_the_header_says() {
        // xrstor [rcx], standard format (XCOMP_BV = 0), RFBM = all, and
        // XSTATE_BV = SSE | AVX | opmask: x87 and ZMM state are initialised
        // without reading; MXCSR is read (RFBM has SSE).
        let mm = m(!0).mem(A + 512, 0b10_0110).mem(A + 520, 0);
        assert_eq!(
            run_with(&[0x0f, 0xae, 0x29], &mm, facts()),
            Ok(vec![
                r(A + 512, 64),
                r(A + 24, 8),
                r(A + 160, 256),
                r(A + 576, 256),
                r(A + 1088, 64),
            ])
        );
        // Compacted format: XCOMP_BV = bit 63 | AVX | opmask | ZMM_Hi256,
        // XSTATE_BV = opmask | ZMM_Hi256: opmask at 576+256 = 832,
        // ZMM_Hi256 at 896.
        let mm = m(!0)
            .mem(A + 512, (1 << 5) | (1 << 6))
            .mem(A + 520, (1 << 63) | (1 << 2) | (1 << 5) | (1 << 6));
        assert_eq!(
            run_with(&[0x0f, 0xae, 0x29], &mm, facts()),
            Ok(vec![r(A + 512, 64), r(A + 832, 64), r(A + 896, 512)])
        );
        // Without the memory hook the header is unknown.
        assert_eq!(
            run_with(&[0x0f, 0xae, 0x29], &m(!0), facts()),
            Err(Unmodelled::NeedsMemory)
        );
    }

    #[test]
    fn unknown_layout_and_supervisor_forms_are_unmodelled() {
        assert_eq!(
            run_with(&[0x0f, 0xae, 0x21], &m(0b111), CpuFacts::default()),
            Err(Unmodelled::UnknownXsaveLayout)
        );
        // xsaveopt [rcx]: skips components unmodified since the last xrstor.
        assert_eq!(
            run_with(&[0x0f, 0xae, 0x31], &m(0b111), facts()),
            Err(Unmodelled::Unsupported)
        );
        // xsaves [rcx], xrstors [rcx]
        assert_eq!(
            run_with(&[0x0f, 0xc7, 0x29], &m(0b111), facts()),
            Err(Unmodelled::Unsupported)
        );
        assert_eq!(
            run_with(&[0x0f, 0xc7, 0x19], &m(0b111), facts()),
            Err(Unmodelled::Unsupported)
        );
    }

    #[test]
    fn detected_layout_matches_cpuid_total() {
        // On this machine: the standard-format end of the last enabled
        // component is CPUID 0xD.0 EBX.
        let facts = coldcache_capture::machine::cpu_facts();
        if !facts.xsave.is_known() {
            return;
        }
        let end = (2..coldcache_capture::model::XSAVE_COMPONENTS)
            .filter(|&i| facts.xsave.xcr0 & (1 << i) != 0)
            .map(|i| u32::from(facts.xsave.offset[i]) + u32::from(facts.xsave.size[i]))
            .max()
            .unwrap_or(576);
        assert_eq!(end, facts.xsave_size);
    }
}

mod gathers {
    use super::*;

    const BASE: u64 = 0xa0_0000;

    fn m() -> TestMachine {
        TestMachine::new().set(Register::RAX, BASE)
    }

    #[test]
    fn avx2_gather_honours_the_vector_mask() {
        // vpgatherdd ymm0, [rax+ymm1*4], ymm2: indices 0..8 with a negative
        // one, mask sign bits on elements 0, 2, 3, 7.
        let mm = m()
            .vec32(Register::YMM1, &[0, 10, -3, 100, 5, 6, 7, 1000])
            .vec32(
                Register::YMM2,
                &[-1, 0, i32::MIN, -5, 0x7fff_ffff, 0, 0, -1],
            );
        assert_eq!(
            run(&[0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88], &mm),
            Ok(vec![
                r(BASE, 4),
                r(BASE - 12, 4),
                r(BASE + 400, 4),
                r(BASE + 4000, 4)
            ])
        );
        // vgatherdps xmm0, [rax+xmm1*4+16], xmm2: 4 elements, displacement.
        let mm = m()
            .vec32(Register::XMM1, &[1, 2, 3, 4])
            .vec32(Register::XMM2, &[0, -1, 0, -1]);
        assert_eq!(
            run(&[0xc4, 0xe2, 0x69, 0x92, 0x44, 0x88, 0x10], &mm),
            Ok(vec![r(BASE + 16 + 8, 4), r(BASE + 16 + 16, 4)])
        );
    }

    #[test]
    fn avx2_gather_index_and_data_widths() {
        // vpgatherqq ymm0, [rax+ymm1*8], ymm2: 4 qword indices, qword mask.
        let mm = m()
            .vec64(Register::YMM1, &[1, -1, 2, 3])
            .vec64(Register::YMM2, &[-1, -1, 0, i64::MIN]);
        assert_eq!(
            run(&[0xc4, 0xe2, 0xed, 0x91, 0x04, 0xc8], &mm),
            Ok(vec![r(BASE + 8, 8), r(BASE - 8, 8), r(BASE + 24, 8)])
        );
        // vpgatherdq ymm0, [rax+xmm1*8], ymm2: 4 dword indices, qword data
        // and mask.
        let mm = m()
            .vec32(Register::XMM1, &[1, 2, 3, 4])
            .vec64(Register::YMM2, &[0, -1, 0, -1]);
        assert_eq!(
            run(&[0xc4, 0xe2, 0xed, 0x90, 0x04, 0xc8], &mm),
            Ok(vec![r(BASE + 16, 8), r(BASE + 32, 8)])
        );
        // vpgatherqd xmm0, [rax+ymm1*4], xmm2: 4 qword indices, dword data
        // and mask (xmm2).
        let mm = m()
            .vec64(Register::YMM1, &[1, 2, 3, 4])
            .vec32(Register::XMM2, &[-1, 0, 0, -1]);
        assert_eq!(
            run(&[0xc4, 0xe2, 0x6d, 0x91, 0x04, 0x88], &mm),
            Ok(vec![r(BASE + 4, 4), r(BASE + 16, 4)])
        );
    }

    #[test]
    fn avx512_gather_honours_the_opmask() {
        // vpgatherdd zmm0{k1}, [rax+zmm1*4]: 16 dword indices, k1 = 0x8005.
        let idx: Vec<i32> = (0..16).map(|i| i * 16 - 8).collect();
        let mm = m().vec32(Register::ZMM1, &idx).k(Register::K1, 0x8005);
        assert_eq!(
            run(&[0x62, 0xf2, 0x7d, 0x49, 0x90, 0x04, 0x88], &mm),
            Ok(vec![
                r(BASE - 32, 4),
                r(BASE + 4 * 24, 4),
                r(BASE + 4 * 232, 4)
            ])
        );
        // vpgatherqd ymm0{k1}, [rax+zmm1*4]: 8 qword indices, dword data;
        // only 8 mask bits count.
        let mm = m()
            .vec64(Register::ZMM1, &[0, 1, 2, 3, 4, 5, 6, -7])
            .k(Register::K1, 0xff81);
        assert_eq!(
            run(&[0x62, 0xf2, 0x7d, 0x49, 0x91, 0x04, 0x88], &mm),
            Ok(vec![r(BASE, 4), r(BASE - 28, 4)])
        );
        // vpgatherdq zmm0{k1}, [rax+ymm1*8]: 8 dword indices, qword data.
        let mm = m()
            .vec32(Register::YMM1, &[0, 1, 2, 3, 4, 5, 6, 7])
            .k(Register::K1, 0b0100_0010);
        assert_eq!(
            run(&[0x62, 0xf2, 0xfd, 0x49, 0x90, 0x04, 0xc8], &mm),
            Ok(vec![r(BASE + 8, 8), r(BASE + 48, 8)])
        );
    }

    #[test]
    fn avx512_scatter_writes_enabled_elements_in_order() {
        // vpscatterdd [rax+zmm1*4]{k1}, zmm0
        let idx: Vec<i32> = (0..16).rev().collect();
        let mm = m().vec32(Register::ZMM1, &idx).k(Register::K1, 0b11);
        assert_eq!(
            run(&[0x62, 0xf2, 0x7d, 0x49, 0xa0, 0x04, 0x88], &mm),
            Ok(vec![w(BASE + 60, 4), w(BASE + 56, 4)])
        );
        // vscatterqpd [rax+zmm1*8]{k1}, zmm0
        let mm = m()
            .vec64(Register::ZMM1, &[-1, 0, 0, 0, 0, 0, 0, 9])
            .k(Register::K1, 0x81);
        assert_eq!(
            run(&[0x62, 0xf2, 0xfd, 0x49, 0xa3, 0x04, 0xc8], &mm),
            Ok(vec![w(BASE - 8, 8), w(BASE + 72, 8)])
        );
    }

    #[test]
    fn missing_registers_are_reported() {
        // vpgatherdd ymm0, [rax+ymm1*4], ymm2 without ymm1 / without ymm2.
        let only_mask = m().vec32(Register::YMM2, &[-1; 8]);
        assert_eq!(
            run(&[0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88], &only_mask),
            Err(Unmodelled::MissingRegister)
        );
        let only_index = m().vec32(Register::YMM1, &[0; 8]);
        assert_eq!(
            run(&[0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88], &only_index),
            Err(Unmodelled::MissingRegister)
        );
        // vpgatherdd zmm0{k1}, [rax+zmm1*4] without k1.
        let no_k = m().vec32(Register::ZMM1, &[0; 16]);
        assert_eq!(
            run(&[0x62, 0xf2, 0x7d, 0x49, 0x90, 0x04, 0x88], &no_k),
            Err(Unmodelled::MissingRegister)
        );
    }
}

mod masked_moves {
    use super::*;

    const BASE: u64 = 0xb0_0000;

    fn m() -> TestMachine {
        TestMachine::new().set(Register::RAX, BASE)
    }

    #[test]
    fn vex_maskmov_uses_element_sign_bits() {
        // vmaskmovps ymm0, ymm1, [rax]: mask ymm1 elements 0, 1, 5, 6, 7.
        let mm = m().vec32(Register::YMM1, &[-1, -2, 0, 1, 0, i32::MIN, -9, -1]);
        assert_eq!(
            run(&[0xc4, 0xe2, 0x75, 0x2c, 0x00], &mm),
            Ok(vec![r(BASE, 8), r(BASE + 20, 12)])
        );
        // vmaskmovps [rax], ymm1, ymm0: same mask, stores.
        assert_eq!(
            run(&[0xc4, 0xe2, 0x75, 0x2e, 0x00], &mm),
            Ok(vec![w(BASE, 8), w(BASE + 20, 12)])
        );
        // vpmaskmovq xmm0, xmm1, [rax]: qword elements, only element 1.
        let mm = m().vec64(Register::XMM1, &[1, -1]);
        assert_eq!(
            run(&[0xc4, 0xe2, 0xf1, 0x8c, 0x00], &mm),
            Ok(vec![r(BASE + 8, 8)])
        );
        // vpmaskmovd [rax], ymm1, ymm0 with a zero mask: nothing.
        let mm = m().vec32(Register::YMM1, &[0; 8]);
        assert_eq!(run(&[0xc4, 0xe2, 0x75, 0x8e, 0x00], &mm), Ok(vec![]));
    }

    #[test]
    fn avx512_masked_moves_use_k() {
        let mm = m().k(Register::K1, 0xf00f).k(Register::K2, 0b1010);
        // vmovups zmm0{k1}, [rax] (merge) and {z}: dwords 0-3 and 12-15.
        let want = Ok(vec![r(BASE, 16), r(BASE + 48, 16)]);
        assert_eq!(run(&[0x62, 0xf1, 0x7c, 0x49, 0x10, 0x00], &mm), want);
        assert_eq!(run(&[0x62, 0xf1, 0x7c, 0xc9, 0x10, 0x00], &mm), want);
        // vmovups [rax]{k1}, zmm0
        assert_eq!(
            run(&[0x62, 0xf1, 0x7c, 0x49, 0x11, 0x00], &mm),
            Ok(vec![w(BASE, 16), w(BASE + 48, 16)])
        );
        // vmovdqu8 [rax]{k1}, zmm0: byte elements 0-3, 12-15.
        assert_eq!(
            run(&[0x62, 0xf1, 0x7f, 0x49, 0x7f, 0x00], &mm),
            Ok(vec![w(BASE, 4), w(BASE + 12, 4)])
        );
        // vmovdqu64 ymm0{k2}, [rax]: qwords 1 and 3.
        assert_eq!(
            run(&[0x62, 0xf1, 0xfe, 0x2a, 0x6f, 0x00], &mm),
            Ok(vec![r(BASE + 8, 8), r(BASE + 24, 8)])
        );
        // vmovss xmm0{k1}, [rax]: bit 0 set, one dword; with k1 = 0xfffe none.
        assert_eq!(
            run(&[0x62, 0xf1, 0x7e, 0x09, 0x10, 0x00], &mm),
            Ok(vec![r(BASE, 4)])
        );
        let off = m().k(Register::K1, 0xfffe);
        assert_eq!(run(&[0x62, 0xf1, 0x7e, 0x09, 0x10, 0x00], &off), Ok(vec![]));
        // vpmovdb [rax]{k1}, zmm0: 16 bytes, bytes 0-3 and 12-15.
        assert_eq!(
            run(&[0x62, 0xf2, 0x7e, 0x49, 0x31, 0x00], &mm),
            Ok(vec![w(BASE, 4), w(BASE + 12, 4)])
        );
    }

    #[test]
    fn compress_and_expand_use_popcount() {
        let mm = m().k(Register::K1, 0x1111_0f0f); // 8 of the 16 lanes
                                                   // vpcompressd [rax]{k1}, zmm0: 8 dwords from the start.
        assert_eq!(
            run(&[0x62, 0xf2, 0x7d, 0x49, 0x8b, 0x00], &mm),
            Ok(vec![w(BASE, 32)])
        );
        // vpexpandd zmm0{k1}, [rax]
        assert_eq!(
            run(&[0x62, 0xf2, 0x7d, 0x49, 0x89, 0x00], &mm),
            Ok(vec![r(BASE, 32)])
        );
    }

    #[test]
    fn elementwise_load_ops_read_only_their_enabled_elements() {
        // SDM exception classes E2/E4 (fault suppression; measured in
        // tests/data/fault-suppression.c for vaddps, vpaddd, vpmovzxbd):
        // element i of memory is read only when bit i of k is set.
        // vaddps zmm0{k1}, zmm1, [rax]
        let full = m().k(Register::K1, 0xffff);
        assert_eq!(
            run(&[0x62, 0xf1, 0x74, 0x49, 0x58, 0x00], &full),
            Ok(vec![r(BASE, 64)])
        );
        let part = m().k(Register::K1, 0x00ff);
        assert_eq!(
            run(&[0x62, 0xf1, 0x74, 0x49, 0x58, 0x00], &part),
            Ok(vec![r(BASE, 32)])
        );
        // vpcmpeqb k1{k2}, zmm1, [rax]: bytes 0-2, 8 and 63.
        let k2 = m().k(Register::K2, 0x8000_0000_0000_0107);
        assert_eq!(
            run(&[0x62, 0xf1, 0x75, 0x4a, 0x74, 0x08], &k2),
            Ok(vec![r(BASE, 3), r(BASE + 8, 1), r(BASE + 63, 1)])
        );
        // vpcmpnequb k1{k2}, zmm1, [rax] (vpcmpub, imm 4): same rule.
        assert_eq!(
            run(&[0x62, 0xf3, 0x75, 0x4a, 0x3e, 0x08, 0x04], &k2),
            Ok(vec![r(BASE, 3), r(BASE + 8, 1), r(BASE + 63, 1)])
        );
        // vptestnmb k1{k2}, ymm17, [rax]: 32 lanes; bit 63 is beyond them.
        assert_eq!(
            run(&[0x62, 0xf2, 0x76, 0x22, 0x26, 0x08], &k2),
            Ok(vec![r(BASE, 3), r(BASE + 8, 1)])
        );
        // vpcmpeqb k1{k2}, ymm17, [rax+0x20]: a fully masked compare
        // reads nothing.
        let none = m().k(Register::K2, 0);
        assert_eq!(
            run(&[0x62, 0xf1, 0x75, 0x22, 0x74, 0x48, 0x01], &none),
            Ok(vec![])
        );
        // vpminub zmm0{k1}, zmm1, [rax]: bytes 0-7 of 64.
        assert_eq!(
            run(&[0x62, 0xf1, 0x75, 0x49, 0xda, 0x00], &part),
            Ok(vec![r(BASE, 8)])
        );
        // vpmovzxbd zmm0{k1}, [rax]: 16 source bytes, one per dword lane;
        // lanes 0-7 enabled: bytes 0-7.
        assert_eq!(
            run(&[0x62, 0xf2, 0x7d, 0x49, 0x31, 0x00], &part),
            Ok(vec![r(BASE, 8)])
        );
    }

    #[test]
    fn permutes_and_shuffles_stay_exact_only_when_fully_enabled() {
        // No fault suppression (E4NF; measured: vpermd and vpshufb fault on
        // a masked-off element in an unreadable page).
        let part = m().k(Register::K1, 0x00ff);
        // vpermd zmm0{k1}, zmm1, [rax]
        assert_eq!(
            run(&[0x62, 0xf2, 0x75, 0x49, 0x36, 0x00], &part),
            Err(Unmodelled::PartialMask)
        );
        // vpshufb zmm0{k1}, zmm1, [rax]
        assert_eq!(
            run(&[0x62, 0xf2, 0x75, 0x49, 0x00, 0x00], &part),
            Err(Unmodelled::PartialMask)
        );
        let full = m().k(Register::K1, u64::MAX);
        assert_eq!(
            run(&[0x62, 0xf2, 0x75, 0x49, 0x00, 0x00], &full),
            Ok(vec![r(BASE, 64)])
        );
        // vaddps zmm0{k1}, zmm1, dword bcst [rax]: the element is read when
        // any lane is enabled.
        assert_eq!(
            run(&[0x62, 0xf1, 0x74, 0x59, 0x58, 0x00], &part),
            Ok(vec![r(BASE, 4)])
        );
        let none = m().k(Register::K1, 0);
        assert_eq!(
            run(&[0x62, 0xf1, 0x74, 0x59, 0x58, 0x00], &none),
            Err(Unmodelled::PartialMask)
        );
    }
}

mod inputs {
    use super::*;
    use coldcache_capture::model::Inputs;

    fn inputs(bytes: &[u8]) -> Option<Inputs> {
        plan_with(bytes, CpuFacts::default()).1.inputs()
    }

    fn i(gprs: &[Register], opmask: Register, vectors: &[Register]) -> Inputs {
        let mut x = Inputs::NONE;
        x.gprs[..gprs.len()].copy_from_slice(gprs);
        x.opmask = opmask;
        x.vectors[..vectors.len()].copy_from_slice(vectors);
        x
    }

    #[test]
    fn plain_forms_need_general_registers_only() {
        // add qword ptr [rbx+rcx*8+16], rax
        let x = inputs(&[0x48, 0x01, 0x44, 0xcb, 0x10]).expect("recordable");
        assert_eq!(x, i(&[Register::RBX, Register::RCX], Register::None, &[]));
        assert!(x.gprs_only());
        assert_eq!(x.bytes(), 16);
    }

    #[test]
    fn masked_and_gather_forms_add_their_mask_and_index_registers() {
        // vpgatherdd ymm0, [rax+ymm1*4], ymm2: index ymm1, mask ymm2.
        let x = inputs(&[0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88]).expect("recordable");
        assert_eq!(
            x,
            i(
                &[Register::RAX],
                Register::None,
                &[Register::YMM1, Register::YMM2]
            )
        );
        assert_eq!(x.bytes(), 8 + 32 + 32);
        assert_eq!(x.vector_offsets(), [8, 40]);
        // vmaskmovps ymm0, ymm1, [rax]: mask ymm1.
        let x = inputs(&[0xc4, 0xe2, 0x75, 0x2c, 0x00]).expect("recordable");
        assert_eq!(x, i(&[Register::RAX], Register::None, &[Register::YMM1]));
        // maskmovdqu xmm1, xmm2: [rdi], mask xmm2.
        let x = inputs(&[0x66, 0x0f, 0xf7, 0xca]).expect("recordable");
        assert_eq!(x, i(&[Register::RDI], Register::None, &[Register::XMM2]));
        assert_eq!(x.bytes(), 24);
        // vpgatherdd zmm0{k1}, [rax+zmm1*4]: k1 and zmm1.
        let x = inputs(&[0x62, 0xf2, 0x7d, 0x49, 0x90, 0x04, 0x88]).expect("recordable");
        assert_eq!(x, i(&[Register::RAX], Register::K1, &[Register::ZMM1]));
        assert_eq!((x.opmask_offset(), x.vector_offsets()[0]), (8, 16));
        assert_eq!(x.bytes(), 8 + 8 + 64);
        // vpcmpeqb k1{k2}, ymm17, [rax+0x20]: k2 (k1 is written, not read).
        let x = inputs(&[0x62, 0xf1, 0x75, 0x22, 0x74, 0x48, 0x01]).expect("recordable");
        assert_eq!(x, i(&[Register::RAX], Register::K2, &[]));
        // vmovdqu8 ymm16{k1}{z}, [rax]
        let x = inputs(&[0x62, 0xe1, 0x7f, 0xa9, 0x6f, 0x00]).expect("recordable");
        assert_eq!(x, i(&[Register::RAX], Register::K1, &[]));
    }

    /// A quick plan's address read from a record (`Quick::recorded`) is
    /// the address its evaluation over the machine whose registers the
    /// record holds gives, at any offset of the inputs in the record.
    #[test]
    fn addresses_read_from_a_record_are_the_evaluated_ones() {
        let values = [
            (Register::RAX, 0x1000_0000),
            (Register::RBX, 0x2000_0010),
            (Register::RCX, 0xFFFF_FFFF_FFFF_FFF8),
            (Register::RSP, RSP),
            (Register::R9, 0x7F00_1234_5678),
            (Register::R13, 3),
        ];
        let mut machine = TestMachine::new().fs(0x7F55_0000_0000).gs(0x100);
        for (r, v) in values {
            machine = machine.set(r, v);
        }
        let cases: &[(&[u8], bool)] = &[
            // mov rax, qword ptr [rax]
            (&[0x48, 0x8b, 0x00], true),
            // add qword ptr [rbx+rcx*8+16], rax: a negative index wraps.
            (&[0x48, 0x01, 0x44, 0xcb, 0x10], true),
            // mov dword ptr [rsp+8], 5
            (&[0xc7, 0x44, 0x24, 0x08, 0x05, 0x00, 0x00, 0x00], true),
            // mov r8, qword ptr [r9+r13*4-0x80]
            (&[0x4f, 0x8b, 0x44, 0xa9, 0x80], true),
            // mov rax, qword ptr fs:[0x28]: FS's base added.
            (
                &[0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00],
                true,
            ),
            // mov rax, qword ptr gs:[rbx]
            (&[0x65, 0x48, 0x8b, 0x03], true),
            // mov eax, dword ptr [rip+0x100]: absolute, no register.
            (&[0x8b, 0x05, 0x00, 0x01, 0x00, 0x00], true),
            // prefetcht0 [rbx+rax]
            (&[0x0f, 0x18, 0x0c, 0x03], true),
            // mov eax, dword ptr [ebx+ecx*2]: 32-bit addressing, left to
            // the machine.
            (&[0x67, 0x8b, 0x04, 0x4b], false),
            // add rax, rbx: no access.
            (&[0x48, 0x01, 0xd8], false),
        ];
        for &(bytes, readable) in cases {
            let (_, plan) = plan_with(bytes, CpuFacts::default());
            let q = plan.quick().expect("a quick plan");
            let inputs = plan.inputs().expect("recordable");
            for at in [16u16, 40, 1000] {
                // The record's 64-bit words, the inputs from byte `at` on.
                let first = usize::from(at / 8);
                let mut record = vec![0xEEEE_EEEE_EEEE_EEEE; first + inputs.bytes() / 8];
                for (k, r) in inputs.gpr_list().enumerate() {
                    record[first + k] = values.iter().find(|(g, _)| *g == r).map_or(0, |&(_, v)| v);
                }
                let recorded = q.recorded(&inputs, at);
                assert_eq!(recorded.is_some(), readable, "{bytes:02x?}");
                let Some(recorded) = recorded else { continue };
                assert_eq!(
                    recorded.access(&record, &machine),
                    q.access(&machine),
                    "{bytes:02x?} at {at}"
                );
                // A record cut short of its inputs: not read.
                if inputs.bytes() != 0 {
                    assert_eq!(recorded.access(&record[..record.len() - 1], &machine), None);
                }
            }
            // Inputs off a word's boundary, or past the 256th word: the
            // machine's way.
            if readable && inputs.bytes() != 0 {
                assert_eq!(q.recorded(&inputs, 20), None, "{bytes:02x?}");
                assert_eq!(q.recorded(&inputs, 2048), None, "{bytes:02x?}");
            }
        }
    }

    #[test]
    fn mmx_masks_and_xsave_forms_cannot_be_recorded() {
        // maskmovq mm1, mm2
        assert_eq!(inputs(&[0x0f, 0xf7, 0xca]), None);
        // xsave [rax] (with this machine's layout; without one it is
        // unmodelled and records nothing)
        let facts = coldcache_capture::machine::cpu_facts();
        if facts.xsave.is_known() {
            assert_eq!(plan_with(&[0x0f, 0xae, 0x20], facts).1.inputs(), None);
        }
        assert_eq!(inputs(&[0x0f, 0xae, 0x20]), Some(Inputs::NONE));
    }
}

mod after_syscall {
    use super::*;

    fn eval_after(bytes: &[u8], m: &TestMachine) -> Result<Vec<MemAccess>, Unmodelled> {
        let (instr, plan) = plan_with(bytes, CpuFacts::default());
        let mut out = AccessList::default();
        plan.eval_after(&instr, m, &mut out)?;
        Ok(out.as_slice().to_vec())
    }

    #[test]
    fn exact_when_address_registers_survive() {
        // syscall; mov rax, qword ptr [rbx]: RAX (the syscall result) is
        // written, RBX is not; the state after gives [RBX].
        let after = TestMachine::new()
            .set(Register::RBX, 0x1234_0000)
            .set(Register::RAX, 7);
        assert_eq!(
            eval_after(&[0x48, 0x8b, 0x03], &after),
            Ok(vec![r(0x1234_0000, 8)])
        );
        // cmp rax, -4095 style: mov [rbx+8], rax (a store): exact.
        assert_eq!(
            eval_after(&[0x48, 0x89, 0x43, 0x08], &after),
            Ok(vec![w(0x1234_0008, 8)])
        );
        // No memory operand at all: exact, nothing.
        assert_eq!(eval_after(&[0x48, 0x89, 0xc7], &after), Ok(vec![]));
    }

    #[test]
    fn not_exact_when_the_instruction_moves_its_inputs() {
        let after = TestMachine::new()
            .set(Register::RAX, 0x1000)
            .set(Register::RSP, RSP)
            .set(Register::RBX, 0x2000)
            .set(Register::RCX, 8);
        for bytes in [
            &[0x48, 0x8b, 0x00][..],               // mov rax, qword ptr [rax]
            &[0x48, 0x03, 0x1c, 0x0b],             // add rbx, qword ptr [rbx+rcx]
            &[0xf3, 0xa4],                         // rep movsb
            &[0xc9],                               // leave
            &[0x5c],                               // pop rsp
            &[0xc8, 0x10, 0x00, 0x02],             // enter 16, 2
            &[0xd7],                               // xlat (AL is written)
            &[0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88], // vpgatherdd (clears its mask)
        ] {
            assert_eq!(
                eval_after(bytes, &after),
                Err(Unmodelled::NotExactAfter),
                "{bytes:02x?}"
            );
        }
        // An unmodelled instruction keeps its own reason.
        assert_eq!(
            eval_after(&[0x48, 0xcb], &after),
            Err(Unmodelled::Unsupported)
        );
    }
}

mod after_syscall_rewound {
    use super::*;

    fn eval_after(bytes: &[u8], m: &TestMachine) -> Result<Vec<MemAccess>, Unmodelled> {
        let (instr, plan) = plan_with(bytes, CpuFacts::default());
        assert!(plan.is_exact_after());
        let mut out = AccessList::default();
        plan.eval_after(&instr, m, &mut out)?;
        Ok(out.as_slice().to_vec())
    }

    #[test]
    fn stack_instructions_take_back_the_rsp_move() {
        // State after the instruction: RSP = X.
        const X: u64 = RSP;
        let after = stack().set(Register::RSP, X);
        // ret: RSP was X-8, read there.
        assert_eq!(eval_after(&[0xc3], &after), Ok(vec![r(X - 8, 8)]));
        // ret 16: RSP was X-24.
        assert_eq!(
            eval_after(&[0xc2, 0x10, 0x00], &after),
            Ok(vec![r(X - 24, 8)])
        );
        // push rax: RSP was X+8, the write went to X.
        assert_eq!(eval_after(&[0x50], &after), Ok(vec![w(X, 8)]));
        // pop qword ptr [rsp]: RSP was X-8: read X-8, write X.
        assert_eq!(
            eval_after(&[0x8f, 0x04, 0x24], &after),
            Ok(vec![r(X - 8, 8), w(X, 8)])
        );
        // push qword ptr [rsp+8]: RSP was X+8: read X+16, write X.
        assert_eq!(
            eval_after(&[0xff, 0x74, 0x24, 0x08], &after),
            Ok(vec![r(X + 16, 8), w(X, 8)])
        );
        // enter 32, 0: RSP was X+40, push rbp at X+32.
        assert_eq!(
            eval_after(&[0xc8, 0x20, 0x00, 0x00], &after),
            Ok(vec![w(X + 32, 8)])
        );
    }

    #[test]
    fn single_string_instructions_take_back_the_element_step() {
        let after = TestMachine::new()
            .set(Register::RSI, 0x1000_0010)
            .set(Register::RDI, 0x2000_0010);
        // movsq, DF=0: RSI/RDI were 8 lower.
        assert_eq!(
            eval_after(&[0x48, 0xa5], &after),
            Ok(vec![r(0x1000_0008, 8), w(0x2000_0008, 8)])
        );
        // movsb, DF=1: they were 1 higher.
        assert_eq!(
            eval_after(&[0xa4], &after.clone().df()),
            Ok(vec![r(0x1000_0011, 1), w(0x2000_0011, 1)])
        );
        // lodsd: RSI was 4 lower.
        assert_eq!(eval_after(&[0xad], &after), Ok(vec![r(0x1000_000c, 4)]));
        // addr32 movsb with ESI = 0 after (it wrapped from 0xffffffff).
        let wrapped = TestMachine::new()
            .set(Register::RSI, 0)
            .set(Register::RDI, 5);
        assert_eq!(
            eval_after(&[0x67, 0xa4], &wrapped),
            Ok(vec![r(0xffff_ffff, 1), w(4, 1)])
        );
    }
}

mod plan_properties {
    use super::*;

    #[test]
    fn plan_is_small_and_copy() {
        fn is_copy<T: Copy>() {}
        is_copy::<Plan>();
        let size = std::mem::size_of::<Plan>();
        eprintln!("size_of::<Plan>() = {size}");
        assert!(size <= 256, "{size}");
    }

    #[test]
    fn errors_leave_the_list_unchanged() {
        // A gather whose mask is missing after the list already holds an
        // access from an earlier instruction.
        let mut out = AccessList::default();
        out.push(r(1, 1)).unwrap();
        let (instr, plan) = plan_with(&[0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88], CpuFacts::default());
        let m = TestMachine::new().vec32(Register::YMM1, &[0; 8]);
        assert_eq!(
            plan.eval(&instr, &m, &mut out),
            Err(Unmodelled::MissingRegister)
        );
        assert_eq!(out.as_slice(), &[r(1, 1)]);
    }

    #[test]
    fn full_list_reports_too_many_accesses() {
        let mut out = AccessList::default();
        for _ in 0..MAX_ACCESSES {
            out.push(r(0, 1)).unwrap();
        }
        let (instr, plan) = plan_with(&[0x50], CpuFacts::default());
        assert_eq!(
            plan.eval(&instr, &stack(), &mut out),
            Err(Unmodelled::TooManyAccesses)
        );
        assert_eq!(out.len(), MAX_ACCESSES);
    }
}
