//! The translator: one basic block of the program at a time, copied into
//! the code cache with inline recording of what the access model needs.
//!
//! A block is a straight run of instructions ending at the first control
//! transfer (kept as the block's last instruction), before an instruction
//! it cannot handle, after an instruction that moves RSP by an amount not
//! known statically, or at a size cap. For every instruction the block
//! stores, right before the instruction runs, the registers its
//! [`Plan`](crate::model::Plan) reads ([`Plan::inputs`]: general registers,
//! and for masked and gather forms their opmask (`kmovq`) and mask or index
//! vector registers (`vmovdqu`, EVEX `vmovdqu64` for ZMM and XMM16-31/
//! YMM16-31, SSE `movdqu` for a legacy-encoded instruction's XMM), at their
//! width); the block's record starts with the block's number and RSP at
//! entry, from which the replay rebuilds RSP at every instruction. The
//! replay's `RecordedMachine` reads vector and opmask inputs from the record
//! in place; for an instruction with one plain memory operand the
//! accountant's block slot reads its base and index there itself
//! (`Quick::recorded`: the record's layout is [`Inputs`]'s, at
//! [`BlockInstr::offset`]). With object tracking on, an allocator entry also records
//! RDI/RSI/RDX and every `ret` RAX (`crate::objects::widen`; the scratch
//! register avoids them; an instruction they do not fit is left to the trap
//! engine).
//!
//! Translated code, per block (S is a register the block does not use;
//! `T` the thread's translator state, `fs`-relative):
//! ```text
//! mov T.s, S ; mov S, T.cursor          ; S = where this record goes
//! mov T.rcx, rcx ; mov rcx, [S + size]  ; the word after the record: 0 in
//! jrcxz body                            ; the buffer, not 0 past its end
//! (full) restore rcx, S ; T.next = pc ; jmp T.dispatch_full
//! body: restore rcx ; [S] = block ; [S+8] = rsp
//! per instruction: [S + k] = inputs (GPRs, k, vectors) ; the instruction, copied
//! lea S, [S + size] ; T.cursor = S      ; commit (no flag is touched)
//! the block's exit: direct (T.next = target ; jmp T.dispatch; a `jcc`,
//! `loop` or `jrcxz` copied with its target moved to a second one), indirect
//! (target computed into S), calls pushing the program's return address.
//! ```
//! Nothing in it writes RFLAGS, vector registers or the program's stack
//! beyond what the program's own instructions do, so flags and vector
//! state need no saving; `call` and `ret` push and pop the program's own
//! return addresses, so unwinders, exceptions and `longjmp` see the stack
//! they would natively.
//!
//! A `rep movs/stos/lods` or `repe`/`repne` `cmps/scas` with 64-bit
//! addressing is a block of its own, looped one iteration per record
//! (`Translator::emit_rep`), so a long `memcpy` or `memcmp` costs no trap.
//!
//! A `syscall` is a block of its own too (`Translator::emit_syscall`): its
//! record is committed before the call, and the call number, looked up at
//! run time without writing a flag, decides whether the block makes the
//! call itself (after the buffer is replayed, for a call that may block)
//! or hands the thread to the trap engine before it (`jit/sys.rs`). It
//! needs BMI2 (`shrx`); without it `syscall` is refused.
//!
//! Refused (the block ends before it; a block that would start with it runs
//! under the trap engine): `syscall` without BMI2, other system calls and
//! interrupts, `rep` strings with 32-bit addressing and port I/O, far and transactional control flow, invalid
//! instructions (`ud0`-`ud2` included) and `hlt`, near branches, calls
//! and returns with an operand-size prefix (Intel ignores it, AMD
//! truncates RIP to 16 bits), FS/GS base writes
//! (`wrfsbase`/`wrgsbase`, and loads of the FS or GS selector, which move
//! the base the translated code reaches its state through), instructions
//! whose plan needs what a record cannot hold (`maskmovq`: an MMX mask;
//! `xsave`/`xsavec`/`xrstor` forms: flags, XINUSE, memory; `xsaveopt` and
//! the other forms the model leaves unmodelled are translated, recording
//! nothing) or inputs whose store this processor lacks (AVX-512 forms with
//! a `{k}`-masked memory operand, gathers and scatters included, where
//! there is no AVX-512BW for `kmovq`; ZMM or XMM16-31 inputs without
//! AVX-512F/VL), RIP-relative operands out of reach of the code cache, the
//! function trigger's breakpoint, `xchg rbx, rbx` (Valgrind's client
//! request, `requests.rs`). `jit/difftest.rs` checks this list.

use super::cache::{CodeCache, CHUNK, REACH};
use super::emit::{at, fs, jmp_mem, lea, load, mov_imm64, store, store_imm32, store_simm32, Asm};
use crate::model::{Inputs, Model};
use crate::tls::off;
use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, InstructionInfoFactory, Mnemonic, OpAccess, OpKind,
    Register,
};

/// Instructions per block at most.
pub(crate) const MAX_INSTRUCTIONS: usize = 32;
/// Bytes of one block's record at most.
pub(crate) const MAX_RECORD: usize = 1024;
/// Bytes of code one block may take at most.
const MAX_CODE: u64 = 8192;

/// One instruction of a translated block, as the replay needs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockInstr {
    /// Its address.
    pub ip: u64,
    /// RSP before it, minus RSP at the block's entry.
    pub sp_delta: i64,
    /// The registers recorded for it, in record order.
    pub inputs: Inputs,
    /// Offset of its first input in the block's record.
    pub offset: u16,
    /// Offset from the block's code of the point where the live registers
    /// are the program's before it (its copy, or for the final control
    /// transfer the record's commit), and its record is at `T.cursor`:
    /// where verification checks it.
    pub check: u16,
}

/// A translated block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    /// The program address it starts at.
    pub pc: u64,
    /// Its code in the cache (0: it runs under the trap engine).
    pub code: u64,
    /// Index of its first instruction in the instruction table.
    pub first: u32,
    /// Instructions in it.
    pub count: u16,
    /// Bytes of its record.
    pub size: u16,
    /// A `rep` string looped one iteration per record ([`rep_loop`]).
    pub rep: bool,
    /// Bytes of its code.
    pub len: u16,
    /// Its scratch register S as a `REG_*` index of a signal context (-1:
    /// a `rep` or `syscall` block, whose interruption is not mapped back).
    pub scratch: i8,
    /// Offset in its code of the head's load that takes RCX ([`Head`]; 0:
    /// no head to map).
    pub head_rcx: u8,
    /// A `syscall` block's: offset in its code of the instruction right
    /// after its `syscall` (0: none), where a signal that interrupted the
    /// call finds every register the program's but RCX
    /// (`interrupted::to_program`).
    pub sys_ret: u16,
}

/// Where a block's head ([`record_head`]) takes the program's S and RCX:
/// S is the program's at the head's first instruction and in `T.s`
/// after it; RCX is the program's up to the load at `rcx` and in `T.rcx`
/// from the store before it (and again in RCX once reloaded). Nothing of
/// the program's is written before the first instruction's copy, so a
/// signal anywhere up to it maps to that instruction, not yet run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Head {
    /// Offset of the load that takes RCX (0: too far to say in a byte:
    /// not mapped).
    pub rcx: u8,
}

/// How a block ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exit {
    /// Falls through to the next instruction (cap reached or refused next).
    Next(u64),
    /// `jmp rel`.
    Jump(u64),
    /// `jcc rel`: (taken target, fall-through).
    Cond(u64, u64),
    /// `loop`/`loope`/`loopne`/`jrcxz`/`jecxz` (rel8 only): (taken target,
    /// fall-through).
    CondShort(u64, u64),
    /// `call rel`: (target, return address).
    Call(u64, u64),
    /// `call r/m`: return address.
    CallIndirect(u64),
    /// `jmp r/m`.
    JumpIndirect,
    /// `ret imm16`.
    Ret(u16),
}

/// Registers S may be, in order of preference.
const SCRATCH: [Register; 13] = [
    Register::R11,
    Register::R10,
    Register::R9,
    Register::R8,
    Register::RDI,
    Register::RSI,
    Register::RDX,
    Register::RBX,
    Register::RAX,
    Register::R12,
    Register::R13,
    Register::R14,
    Register::R15,
];

/// The translator's reusable parts, reserved once.
pub(crate) struct Translator {
    asm: Asm,
    model: Model,
    factory: InstructionInfoFactory,
    instrs: [iced_x86::Instruction; MAX_INSTRUCTIONS],
    bytes: [u8; MAX_INSTRUCTIONS * 16],
    /// `syscall` is translated ([`super::sys::supported`]).
    syscalls: bool,
    vec: VectorStores,
}

/// Which vector and opmask stores this processor (and OS) can run: the
/// translated code records a plan's vector and opmask inputs with them, so
/// an instruction whose inputs need a store the processor lacks is refused
/// (the recording would fault where the program does not).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct VectorStores {
    /// VEX `vmovdqu` of XMM0-15/YMM0-15.
    pub avx: bool,
    /// EVEX `vmovdqu64` of ZMM registers.
    pub avx512f: bool,
    /// EVEX `vmovdqu64` of XMM16-31/YMM16-31.
    pub avx512vl: bool,
    /// `kmovq` to memory.
    pub avx512bw: bool,
}

impl VectorStores {
    /// What this machine supports (`is_x86_feature_detected!` also checks
    /// that the OS enabled the state in XCR0).
    pub(crate) fn detect() -> VectorStores {
        VectorStores {
            avx: std::arch::is_x86_feature_detected!("avx"),
            avx512f: std::arch::is_x86_feature_detected!("avx512f"),
            avx512vl: std::arch::is_x86_feature_detected!("avx512vl"),
            avx512bw: std::arch::is_x86_feature_detected!("avx512bw"),
        }
    }

    /// Whether every input can be stored.
    pub(crate) fn can_record(&self, inputs: &Inputs) -> bool {
        (inputs.opmask == Register::None || self.avx512bw)
            && inputs
                .vector_list()
                .all(|r| vector_store(r, false).is_some_and(|(_, need)| self.has(need)))
    }

    fn has(&self, need: Need) -> bool {
        match need {
            Need::Sse => true,
            Need::Avx => self.avx,
            Need::Avx512f => self.avx512f,
            Need::Avx512vl => self.avx512f && self.avx512vl,
        }
    }
}

/// The feature a vector store needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    Sse,
    Avx,
    Avx512f,
    Avx512vl,
}

/// The store that records vector register `r` (`legacy`: the instruction
/// is legacy-SSE encoded, so XMM0-15 are stored with SSE `movdqu`, which
/// avoids an SSE/AVX transition). Every form writes no flag and no
/// register.
fn vector_store(r: Register, legacy: bool) -> Option<(Code, Need)> {
    let n = r.number();
    Some(if r.is_xmm() {
        if n < 16 && legacy {
            (Code::Movdqu_xmmm128_xmm, Need::Sse)
        } else if n < 16 {
            (Code::VEX_Vmovdqu_xmmm128_xmm, Need::Avx)
        } else {
            (Code::EVEX_Vmovdqu64_xmmm128_k1z_xmm, Need::Avx512vl)
        }
    } else if r.is_ymm() {
        if n < 16 {
            (Code::VEX_Vmovdqu_ymmm256_ymm, Need::Avx)
        } else {
            (Code::EVEX_Vmovdqu64_ymmm256_k1z_ymm, Need::Avx512vl)
        }
    } else if r.is_zmm() {
        (Code::EVEX_Vmovdqu64_zmmm512_k1z_zmm, Need::Avx512f)
    } else {
        return None;
    })
}

/// Emits the stores of `inputs` at `[s + o]` onwards (record order: see
/// [`Inputs`]). Flag-free, register-free.
fn store_inputs(a: &mut Asm, s: Register, o: i32, inputs: &Inputs, legacy: bool) {
    let mut q = o;
    for r in inputs.gpr_list() {
        a.emit(store(at(s, q), r));
        q += 8;
    }
    if inputs.opmask != Register::None {
        a.emit(iced_x86::Instruction::with2(
            Code::VEX_Kmovq_m64_kr,
            at(s, o + inputs.opmask_offset() as i32),
            inputs.opmask,
        ));
    }
    let offsets = inputs.vector_offsets();
    for (k, r) in inputs.vectors.iter().copied().enumerate() {
        if r == Register::None {
            continue;
        }
        match vector_store(r, legacy) {
            Some((code, _)) => a.emit(iced_x86::Instruction::with2(
                code,
                at(s, o + offsets[k] as i32),
                r,
            )),
            None => a.fail(),
        }
    }
}

/// What a translation produced.
pub(crate) struct Translation {
    /// Its code's address in the cache.
    pub code: u64,
    /// Instructions in it.
    pub count: usize,
    /// Bytes of its record.
    pub size: usize,
    /// A `rep` string looped one iteration per record.
    pub rep: bool,
    /// Bytes of its code.
    pub len: usize,
    /// The block's scratch register S, for a block of straight-line copies
    /// (`None`: a `rep` or `syscall` block), which a handler's view of an
    /// interrupted block needs (`super::program_context`).
    pub scratch: Option<Register>,
    /// Its head's layout (straight-line blocks).
    pub head: Head,
    /// See [`Block::sys_ret`].
    pub sys_ret: u16,
}

impl Translator {
    /// A translator for a processor with these facts.
    pub(crate) fn new(cpu: crate::model::CpuFacts) -> Translator {
        Translator {
            asm: Asm::new(MAX_CODE as usize * 2),
            model: Model::new(cpu),
            factory: InstructionInfoFactory::new(),
            instrs: [iced_x86::Instruction::default(); MAX_INSTRUCTIONS],
            bytes: [0; MAX_INSTRUCTIONS * 16],
            syscalls: super::sys::supported(),
            vec: VectorStores::detect(),
        }
    }

    /// A translator that assumes these vector stores (tests: translations
    /// for a processor this one is not).
    #[cfg(test)]
    pub(crate) fn with_vector_stores(cpu: crate::model::CpuFacts, vec: VectorStores) -> Translator {
        let mut t = Translator::new(cpu);
        t.vec = vec;
        t
    }

    /// Translates the block at `pc` (whose code lies in a mapped module
    /// ending at `end`) as block number `id`, into `cache`, describing its
    /// instructions in `out`. `None`: the block's first instruction is
    /// refused, the block runs under the trap engine. `avoid`: an address
    /// no block may contain past its start (the function breakpoint).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn translate(
        &mut self,
        pc: u64,
        end: u64,
        avoid: u64,
        id: u32,
        tls: i32,
        cache: &mut CodeCache,
        out: &mut [BlockInstr; MAX_INSTRUCTIONS],
    ) -> Option<Translation> {
        if pc == avoid {
            return None;
        }
        let avail = (end.saturating_sub(pc)).min(self.bytes.len() as u64) as usize;
        if avail == 0 || !crate::memory::read_bytes(pc, &mut self.bytes[..avail]) {
            return None;
        }
        let at_code = cache.reserve(pc, MAX_CODE)?;
        let mut n = self.scan(pc, avail, avoid, at_code);
        if n == 1 && self.is_syscall(&self.instrs[0]) {
            let t = self.emit_syscall(id, tls, at_code, cache, out);
            let used = if t.is_some() {
                self.asm.len() as u64
            } else {
                0
            };
            cache.trim(at_code, MAX_CODE, used);
            return t;
        }
        if n == 1 && rep_loop(&self.instrs[0]) {
            let t = self.emit_rep(id, tls, at_code, cache, out);
            let used = if t.is_some() {
                self.asm.len() as u64
            } else {
                0
            };
            cache.trim(at_code, MAX_CODE, used);
            return t;
        }
        while n > 0 {
            if let Some(t) = self.emit(n, id, tls, at_code, cache, out) {
                cache.trim(at_code, MAX_CODE, self.asm.len() as u64);
                return Some(t);
            }
            n -= 1;
        }
        cache.trim(at_code, MAX_CODE, 0);
        None
    }

    /// Decodes the block's instructions into `self.instrs`; returns how many
    /// it keeps.
    fn scan(&mut self, pc: u64, avail: usize, avoid: u64, code_at: u64) -> usize {
        let mut decoder = Decoder::with_ip(64, &self.bytes[..avail], pc, DecoderOptions::NONE);
        let mut n = 0;
        let mut record = 16usize;
        while n < MAX_INSTRUCTIONS && decoder.can_decode() {
            let instr = decoder.decode();
            if instr.is_invalid() || (instr.ip() == avoid && n > 0) {
                break;
            }
            if self.is_syscall(&instr) {
                // A block of its own (`emit_syscall`).
                if n == 0 {
                    self.instrs[0] = instr;
                    n = 1;
                }
                break;
            }
            let Some(exit) = classify(&instr) else { break };
            let prev = match n {
                0 => constant_before(pc),
                _ => Some(self.instrs[n - 1]),
            };
            if crate::rseq::stores_descriptor(prev.as_ref(), &instr) {
                // An rseq section's entry: the trap engine keeps its
                // descriptor (`rseq.rs`).
                break;
            }
            let at = (instr.ip() - pc) as usize;
            if instr.flow_control() != FlowControl::Next
                && operand_size_prefix(&self.bytes[at..at + instr.len()])
            {
                break;
            }
            let plan = self.model.plan(&instr);
            let Some(inputs) = widened(&instr, plan.inputs()) else {
                break;
            };
            if !self.vec.can_record(&inputs) {
                break;
            }
            let rep = instr.is_string_instruction()
                && (instr.has_rep_prefix() || instr.has_repe_prefix() || instr.has_repne_prefix());
            if rep && (n > 0 || !rep_loop(&instr)) {
                // A `rep` string starts a block of its own, or is refused.
                break;
            }
            if instr.is_ip_rel_memory_operand()
                && instr.ip_rel_memory_address().abs_diff(code_at) + CHUNK >= (REACH << 1) - CHUNK
            {
                break;
            }
            if record + inputs.bytes() > MAX_RECORD {
                break;
            }
            record += inputs.bytes();
            self.instrs[n] = instr;
            n += 1;
            if rep || exit.is_some() || rsp_delta(&instr, &mut self.factory).is_none() {
                break;
            }
        }
        n
    }

    /// Emits a block of one `rep` string instruction (see [`rep_loop`]) at
    /// `code_at`, as a loop of single iterations, each recorded as one
    /// execution of the block with the state before it:
    /// ```text
    /// head: the buffer check (full: back to the dispatcher at pc)
    ///       record: id, RSP, RCX, the string registers ; commit ; restore S
    ///       jrcxz exit                  ; RCX = 0: nothing (more) to do
    ///       the instruction without rep ; one iteration, flags untouched
    ///       lea rcx, [rcx - 1] ; jrcxz exit
    ///       (repe: jne exit ; repne: je exit) ; jmp head
    /// exit: direct exit to the next instruction
    /// ```
    /// `repe`/`repne` `cmps`/`scas` end on ZF as the CPU does: after an
    /// iteration, once RCX is not 0, the flags it set decide; their record
    /// ends with a word `sete` writes after the iteration, from which the
    /// replay knows ZF for the final check.
    /// The records reproduce the trap engine's steps exactly: one with the
    /// state before each iteration (one with RCX = 0 when there is none),
    /// then the next instruction. The replay knows RCX after the last
    /// iteration (one less than recorded), which the accountant's final
    /// check of the repetition reads.
    fn emit_rep(
        &mut self,
        id: u32,
        tls: i32,
        code_at: u64,
        cache: &mut CodeCache,
        out: &mut [BlockInstr; MAX_INSTRUCTIONS],
    ) -> Option<Translation> {
        let i = self.instrs[0];
        let s = self.scratch(&[i])?;
        let inputs = widened(&i, self.model.plan(&i).inputs())?;
        if !inputs.gprs_only() {
            return None;
        }
        let zf_exit = rep_zf(&i);
        // `cmps`/`scas`: a last word for ZF after the iteration.
        let size = 16 + inputs.bytes() as u16 + if zf_exit.is_some() { 8 } else { 0 };
        let t = |o: i32| fs(tls + o);
        let pc = i.ip();
        let mut one = i;
        one.set_has_rep_prefix(false);
        one.set_has_repe_prefix(false);
        one.set_has_repne_prefix(false);
        let a = &mut self.asm;
        a.reset(code_at);
        let head = a.ip();
        let _ = record_head(a, tls, s, size, id, pc);
        store_inputs(a, s, 16, &inputs, false);
        let check = (a.ip() - code_at) as u16;
        a.emit(lea(s, s, i32::from(size)));
        a.emit(store(t(off::CURSOR), s));
        a.emit(load(s, t(off::S_SPILL)));
        a.emit(iced_x86::Instruction::with_branch(
            Code::Jrcxz_rel8_64,
            a.ip() + 2,
        ));
        let first_exit = a.len();
        a.emit(Ok(one));
        if zf_exit.is_some() {
            // The record's last word takes ZF as the iteration left it
            // (S is the program's, unused by the instruction, still in
            // T.s): the replay's final check of the repetition reads it.
            a.emit(load(s, t(off::CURSOR)));
            a.emit(iced_x86::Instruction::with1(Code::Sete_rm8, at(s, -8)));
            a.emit(load(s, t(off::S_SPILL)));
        }
        a.emit(lea(Register::RCX, Register::RCX, -1));
        a.emit(iced_x86::Instruction::with_branch(
            Code::Jrcxz_rel8_64,
            a.ip() + 2,
        ));
        let second_exit = a.len();
        let third_exit = zf_exit.map(|jcc| {
            let here = a.ip();
            a.emit(iced_x86::Instruction::with_branch(jcc, here));
            a.len()
        });
        a.emit(iced_x86::Instruction::with_branch(Code::Jmp_rel32_64, head));
        align8(a);
        let exit = a.len();
        a.patch_rel8(first_exit, exit);
        a.patch_rel8(second_exit, exit);
        if let Some(end) = third_exit {
            let to = a.ip();
            a.patch_rel32(end, to);
        }
        direct_exit(a, tls, i.next_ip(), off::DISPATCH, true);
        if !a.ok() {
            return None;
        }
        out[0] = BlockInstr {
            ip: pc,
            sp_delta: 0,
            inputs,
            offset: 16,
            check,
        };
        let code = a.take();
        let len = code.len();
        let written = cache.write(code_at, &code);
        a.give_back(code);
        written.then_some(Translation {
            code: code_at,
            count: 1,
            size: usize::from(size),
            rep: true,
            len,
            scratch: None,
            head: Head::default(),
            sys_ret: 0,
        })
    }

    /// Emits the first `n` scanned instructions as a block at `code_at`.
    fn emit(
        &mut self,
        n: usize,
        id: u32,
        tls: i32,
        code_at: u64,
        cache: &mut CodeCache,
        out: &mut [BlockInstr; MAX_INSTRUCTIONS],
    ) -> Option<Translation> {
        let instrs = self.instrs;
        let instrs = &instrs[..n];
        let last = instrs[n - 1];
        let exit = classify(&last)
            .flatten()
            .unwrap_or(Exit::Next(last.next_ip()));
        let s = self.scratch(instrs)?;
        let t = |o: i32| fs(tls + o);
        let pc = instrs[0].ip();
        // Describe the instructions and size the record.
        let mut offset = 16u16;
        let mut sp = 0i64;
        for (k, i) in instrs.iter().enumerate() {
            let inputs = widened(i, self.model.plan(i).inputs())?;
            if !self.vec.can_record(&inputs) {
                return None;
            }
            out[k] = BlockInstr {
                ip: i.ip(),
                sp_delta: sp,
                inputs,
                offset,
                check: 0,
            };
            offset += inputs.bytes() as u16;
            sp += rsp_delta(i, &mut self.factory).unwrap_or(0);
        }
        let size = offset;
        let a = &mut self.asm;
        a.reset(code_at);
        let head = record_head(a, tls, s, size, id, pc);
        let mut copied = 0usize;
        for (k, i) in instrs.iter().enumerate() {
            let d = &out[k];
            let legacy = i.encoding() == iced_x86::EncodingKind::Legacy;
            store_inputs(a, s, i32::from(d.offset), &d.inputs, legacy);
            let len = i.len();
            out[k].check = (a.ip() - code_at) as u16;
            if k + 1 == n && classify(i).flatten().is_some() {
                // The control transfer is done by the exit code below.
            } else if i.is_ip_rel_memory_operand() {
                a.emit(Ok(*i));
            } else {
                a.bytes(&self.bytes[copied..copied + len]);
            }
            copied += len;
        }
        // Commit the record. For a final control transfer, the state here
        // is the program's before it.
        if classify(&last).flatten().is_some() {
            out[n - 1].check = (a.ip() - code_at) as u16;
        }
        a.emit(lea(s, s, i32::from(size)));
        a.emit(store(t(off::CURSOR), s));
        match exit {
            Exit::Next(to) | Exit::Jump(to) => {
                a.emit(load(s, t(off::S_SPILL)));
                direct_exit(a, tls, to, off::DISPATCH, true);
            }
            Exit::Cond(taken, fall) => {
                a.emit(load(s, t(off::S_SPILL)));
                let mut j = last;
                j.as_near_branch();
                j.set_near_branch64(a.ip());
                a.emit(Ok(j));
                let jcc_end = a.len();
                direct_exit(a, tls, fall, off::DISPATCH, true);
                align8(a);
                let taken_at = a.ip();
                a.patch_rel32(jcc_end, taken_at);
                direct_exit(a, tls, taken, off::DISPATCH, true);
            }
            Exit::CondShort(taken, fall) => {
                // The instruction itself (it reads RCX and perhaps ZF and
                // writes no flag), its rel8 reaching the taken exit.
                a.emit(load(s, t(off::S_SPILL)));
                let mut j = last;
                j.set_near_branch64(a.ip() + 2);
                a.emit(Ok(j));
                let short_end = a.len();
                direct_exit(a, tls, fall, off::DISPATCH, true);
                align8(a);
                let taken_at = a.len();
                a.patch_rel8(short_end, taken_at);
                direct_exit(a, tls, taken, off::DISPATCH, true);
            }
            Exit::Call(to, ret) => {
                push_return(a, s, ret);
                a.emit(load(s, t(off::S_SPILL)));
                direct_exit(a, tls, to, off::DISPATCH, true);
            }
            Exit::CallIndirect(ret) => {
                a.emit(target_into(&last, s));
                a.emit(store(t(off::NEXT), s));
                push_return(a, s, ret);
                a.emit(load(s, t(off::S_SPILL)));
                a.emit(jmp_mem(t(off::DISPATCH)));
            }
            Exit::JumpIndirect => {
                a.emit(target_into(&last, s));
                a.emit(store(t(off::NEXT), s));
                a.emit(load(s, t(off::S_SPILL)));
                a.emit(jmp_mem(t(off::DISPATCH)));
            }
            Exit::Ret(imm) => {
                a.emit(load(s, at(Register::RSP, 0)));
                a.emit(store(t(off::NEXT), s));
                a.emit(lea(Register::RSP, Register::RSP, 8 + i32::from(imm)));
                a.emit(load(s, t(off::S_SPILL)));
                a.emit(jmp_mem(t(off::DISPATCH)));
            }
        }
        if !a.ok() || a.len() as u64 > MAX_CODE {
            return None;
        }
        let code = a.take();
        let len = code.len();
        let written = cache.write(code_at, &code);
        a.give_back(code);
        written.then_some(Translation {
            code: code_at,
            count: n,
            size: usize::from(size),
            rep: false,
            len,
            scratch: Some(s),
            head,
            sys_ret: 0,
        })
    }

    /// Retires the block whose code starts at `code` (program address
    /// `pc`): its first 8 bytes become a jump to a new stub that sends the
    /// thread to the dispatcher for `pc`, so links into it and threads
    /// about to enter it go back to the dispatcher. False when no stub
    /// could be written.
    pub(crate) fn retire(&mut self, pc: u64, code: u64, tls: i32, cache: &mut CodeCache) -> bool {
        let Some(stub) = cache.reserve(code, 64) else {
            return false;
        };
        let a = &mut self.asm;
        a.reset(stub);
        direct_exit(a, tls, pc, off::DISPATCH, false);
        let rel = i32::try_from(stub.wrapping_sub(code + 5) as i64);
        if !a.ok() || rel.is_err() {
            cache.trim(stub, 64, 0);
            return false;
        }
        let bytes = a.take();
        let written = cache.write(stub, &bytes);
        cache.trim(stub, 64, bytes.len() as u64);
        a.give_back(bytes);
        let Ok(rel) = rel else { return false };
        // SAFETY: `code` is the start of a block of ours (16-byte aligned,
        // longer than 8 bytes), in a mapped chunk.
        let mut head = unsafe { *(code as *const [u8; 8]) };
        head[0] = 0xE9;
        head[1..5].copy_from_slice(&rel.to_le_bytes());
        written && cache.write8(code, head)
    }

    /// A register no instruction of the block reads or writes.
    fn scratch(&mut self, instrs: &[iced_x86::Instruction]) -> Option<Register> {
        let mut used = 0u32;
        for i in instrs {
            let is_ret = i.flow_control() == FlowControl::Return;
            for r in crate::objects::extra_registers(i.ip(), is_ret) {
                used |= 1 << r.number();
            }
            let info = self.factory.info(i);
            for u in info.used_registers() {
                let r = u.register();
                if r.is_gpr() {
                    used |= 1 << r.full_register().number();
                }
            }
            for m in info.used_memory() {
                for r in [m.base(), m.index()] {
                    if r.is_gpr() {
                        used |= 1 << r.full_register().number();
                    }
                }
            }
        }
        SCRATCH
            .iter()
            .copied()
            .find(|r| used & (1 << r.number()) == 0)
    }
}

/// An instruction's plan inputs with what object tracking adds
/// ([`crate::objects::widen`]); `None` when they do not fit a record's
/// inputs (the instruction is left to the trap engine).
fn widened(i: &iced_x86::Instruction, inputs: Option<Inputs>) -> Option<Inputs> {
    let mut inputs = inputs?;
    let is_ret = i.flow_control() == FlowControl::Return;
    crate::objects::widen(i.ip(), is_ret, &mut inputs).then_some(inputs)
}

/// A block's start: S takes the cursor (its value spilled); when the word
/// after a record of `size` bytes is not 0 the buffer is full and the
/// thread goes back to the dispatcher, which hands the buffer over and
/// re-enters the block at `pc`; else the record's header is written: the
/// block's number and RSP at entry. Flag-free.
fn record_head(a: &mut Asm, tls: i32, s: Register, size: u16, id: u32, pc: u64) -> Head {
    let t = |o: i32| fs(tls + o);
    let start = a.ip();
    a.emit(store(t(off::S_SPILL), s));
    a.emit(load(s, t(off::CURSOR)));
    a.emit(store(t(off::RCX_SPILL), Register::RCX));
    let rcx = u8::try_from(a.ip() - start).unwrap_or(0);
    a.emit(load(Register::RCX, at(s, i32::from(size))));
    a.emit(iced_x86::Instruction::with_branch(
        Code::Jrcxz_rel8_64,
        a.ip() + 2,
    ));
    let jrcxz_end = a.len();
    a.emit(load(Register::RCX, t(off::RCX_SPILL)));
    a.emit(load(s, t(off::S_SPILL)));
    direct_exit(a, tls, pc, off::DISPATCH_FULL, false);
    let body = a.len();
    a.patch_rel8(jrcxz_end, body);
    a.emit(load(Register::RCX, t(off::RCX_SPILL)));
    a.emit(store_simm32(at(s, 0), id as i32));
    a.emit(store(at(s, 8), Register::RSP));
    Head { rcx }
}

/// Whether a `rep` string instruction is translated as a loop: `movs`,
/// `stos` and `lods` with `rep` (they end on the count alone) and 64-bit
/// addressing (the loop counts RCX). `repe`/`repne` (`cmps`, `scas`, which
/// also end on ZF), 32-bit addressing and port I/O run under the trap
/// engine.
fn rep_loop(i: &iced_x86::Instruction) -> bool {
    use Mnemonic::*;
    let counted = i.has_rep_prefix()
        && !i.has_repne_prefix()
        && matches!(
            i.mnemonic(),
            Movsb
                | Movsw
                | Movsd
                | Movsq
                | Stosb
                | Stosw
                | Stosd
                | Stosq
                | Lodsb
                | Lodsw
                | Lodsd
                | Lodsq
        );
    i.is_string_instruction()
        && (counted || rep_zf(i).is_some())
        && (0..i.op_count()).all(|k| {
            !matches!(
                i.op_kind(k),
                OpKind::MemoryESEDI | OpKind::MemorySegESI | OpKind::MemorySegEDI
            )
        })
}

/// For `repe`/`repne` `cmps`/`scas`, which also end on ZF: the branch that
/// leaves the loop after an iteration (`jne` for `repe`, `je` for
/// `repne`: it reads the flags the iteration set, writes none).
fn rep_zf(i: &iced_x86::Instruction) -> Option<Code> {
    use Mnemonic::*;
    if !matches!(
        i.mnemonic(),
        Cmpsb | Cmpsw | Cmpsd | Cmpsq | Scasb | Scasw | Scasd | Scasq
    ) {
        return None;
    }
    if i.has_repne_prefix() {
        Some(Code::Je_rel32_64)
    } else if i.has_repe_prefix() {
        Some(Code::Jne_rel32_64)
    } else {
        None
    }
}

/// `T.next = to ; jmp T.<via>`. A linkable exit also says where it is
/// (`T.from`) and starts 8-byte aligned, so the dispatcher can replace its
/// first 8 bytes with a `jmp rel32` to the target's code in one store.
fn direct_exit(a: &mut Asm, tls: i32, to: u64, via: i32, link: bool) {
    if link {
        align8(a);
        let here = a.ip();
        a.emit(store_imm32(fs(tls + off::NEXT), to as u32));
        a.emit(store_imm32(fs(tls + off::NEXT + 4), (to >> 32) as u32));
        a.emit(store_imm32(fs(tls + off::FROM), here as u32));
        a.emit(store_imm32(fs(tls + off::FROM + 4), (here >> 32) as u32));
    } else {
        a.emit(store_imm32(fs(tls + off::NEXT), to as u32));
        a.emit(store_imm32(fs(tls + off::NEXT + 4), (to >> 32) as u32));
    }
    a.emit(jmp_mem(fs(tls + via)));
}

/// Pads with `nop`s to an 8-byte boundary.
fn align8(a: &mut Asm) {
    while !a.ip().is_multiple_of(8) {
        a.bytes(&[0x90]);
    }
}

/// Pushes the program's return address `ret` with S as scratch.
fn push_return(a: &mut Asm, s: Register, ret: u64) {
    a.emit(mov_imm64(s, ret));
    a.emit(lea(Register::RSP, Register::RSP, -8));
    a.emit(store(at(Register::RSP, 0), s));
}

/// `mov S, <operand 0 of an indirect jmp/call>`.
fn target_into(
    i: &iced_x86::Instruction,
    s: Register,
) -> Result<iced_x86::Instruction, iced_x86::IcedError> {
    if i.op0_kind() == OpKind::Register {
        return iced_x86::Instruction::with2(Code::Mov_r64_rm64, s, i.op0_register());
    }
    let mut m = iced_x86::Instruction::with2(
        Code::Mov_r64_rm64,
        s,
        iced_x86::MemoryOperand::with_base(Register::RAX),
    )?;
    m.set_memory_base(i.memory_base());
    m.set_memory_index(i.memory_index());
    m.set_memory_index_scale(i.memory_index_scale());
    m.set_memory_displacement64(i.memory_displacement64());
    m.set_memory_displ_size(i.memory_displ_size());
    m.set_segment_prefix(i.segment_prefix());
    Ok(m)
}

/// The instruction ending at `pc` when it is one that loads a constant
/// into a register (a RIP-relative `lea`, 7 bytes, or a `mov` of an
/// immediate, 7 or 10 bytes), for [`crate::rseq::stores_descriptor`] at a
/// block's first instruction (the block before it may have ended between
/// the two). Decoding backwards is a guess; a wrong one only costs a
/// store left to the trap engine where the descriptor check also passed.
fn constant_before(pc: u64) -> Option<iced_x86::Instruction> {
    let mut bytes = [0u8; 10];
    if !crate::memory::read_bytes(pc.wrapping_sub(10), &mut bytes) {
        return None;
    }
    [3usize, 0].into_iter().find_map(|at| {
        let i =
            Decoder::with_ip(64, &bytes[at..], pc - 10 + at as u64, DecoderOptions::NONE).decode();
        (i.next_ip() == pc
            && matches!(
                i.code(),
                Code::Lea_r64_m | Code::Mov_r64_imm64 | Code::Mov_rm64_imm32
            ))
        .then_some(i)
    })
}

/// `None`: refused. `Some(None)`: an ordinary instruction. `Some(Some(e))`:
/// a control transfer the block ends with.
fn classify(i: &iced_x86::Instruction) -> Option<Option<Exit>> {
    use Mnemonic::*;
    if matches!(
        i.mnemonic(),
        Syscall
            | Sysenter
            | Sysexit
            | Sysret
            | Int
            | Int1
            | Int3
            | Into
            | Iret
            | Iretd
            | Iretq
            | Ud0
            | Ud1
            | Ud2
            | Hlt
            | Xbegin
            | Xabort
            | Xend
            | Wrfsbase
            | Wrgsbase
            | Jcxz
    ) {
        return None;
    }
    if matches!(i.mnemonic(), Loop | Loope | Loopne | Jrcxz | Jecxz) {
        return (i.op0_kind() == OpKind::NearBranch64)
            .then(|| Some(Exit::CondShort(i.near_branch64(), i.next_ip())));
    }
    // `mov fs, r/m`, `pop fs`, `lfs` (and GS): a selector load moves the
    // segment's base.
    let loads_fs_gs = (matches!(i.mnemonic(), Mov | Pop)
        && i.op0_kind() == OpKind::Register
        && matches!(i.op0_register(), Register::FS | Register::GS))
        || matches!(i.mnemonic(), Lfs | Lgs);
    if loads_fs_gs {
        return None;
    }
    // `xchg rbx, rbx`: Valgrind's client request (`requests.rs`), run under
    // the trap engine with its live registers and memory.
    if i.code() == Code::Xchg_rm64_r64
        && i.op0_kind() == OpKind::Register
        && i.op0_register() == Register::RBX
        && i.op1_register() == Register::RBX
    {
        return None;
    }
    let near = |k: OpKind| k == OpKind::NearBranch64;
    match i.flow_control() {
        FlowControl::Next => Some(None),
        FlowControl::UnconditionalBranch if near(i.op0_kind()) => {
            Some(Some(Exit::Jump(i.near_branch64())))
        }
        FlowControl::ConditionalBranch if near(i.op0_kind()) && i.mnemonic() != Jmpe => {
            Some(Some(Exit::Cond(i.near_branch64(), i.next_ip())))
        }
        FlowControl::Call if near(i.op0_kind()) && i.mnemonic() == Call => {
            Some(Some(Exit::Call(i.near_branch64(), i.next_ip())))
        }
        FlowControl::IndirectCall if i.mnemonic() == Call && i.code() == Code::Call_rm64 => {
            Some(Some(Exit::CallIndirect(i.next_ip())))
        }
        FlowControl::IndirectBranch if i.mnemonic() == Jmp && i.code() == Code::Jmp_rm64 => {
            Some(Some(Exit::JumpIndirect))
        }
        FlowControl::Return if i.code() == Code::Retnq => Some(Some(Exit::Ret(0))),
        FlowControl::Return if i.code() == Code::Retnq_imm16 => {
            Some(Some(Exit::Ret(i.immediate16())))
        }
        _ => None,
    }
}

/// Whether an instruction's legacy prefixes include the operand-size
/// prefix (0x66). On a near branch, call or return Intel processors (and
/// iced, which decodes as Intel does) ignore it; AMD processors honour it
/// and truncate RIP to 16 bits, so no translation is right on both.
fn operand_size_prefix(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .take_while(|&&b| {
            matches!(
                b,
                0x66 | 0x67 | 0xF0 | 0xF2 | 0xF3 | 0x26 | 0x2E | 0x36 | 0x3E | 0x64 | 0x65
            ) || (0x40..=0x4F).contains(&b)
        })
        .any(|&b| b == 0x66)
}

/// How an instruction moves RSP, when that is known statically; `None`
/// when it writes RSP otherwise (the block ends after it).
fn rsp_delta(i: &iced_x86::Instruction, factory: &mut InstructionInfoFactory) -> Option<i64> {
    let writes_rsp = factory.info(i).used_registers().iter().any(|u| {
        u.register().is_gpr()
            && u.register().full_register() == Register::RSP
            && matches!(
                u.access(),
                OpAccess::Write
                    | OpAccess::ReadWrite
                    | OpAccess::CondWrite
                    | OpAccess::ReadCondWrite
            )
    });
    if !writes_rsp {
        return Some(0);
    }
    let rsp_op0 =
        i.op_count() > 0 && i.op0_kind() == OpKind::Register && i.op0_register() == Register::RSP;
    match i.mnemonic() {
        Mnemonic::Enter | Mnemonic::Leave => None,
        Mnemonic::Pop if rsp_op0 => None,
        Mnemonic::Add | Mnemonic::Sub if rsp_op0 && is_immediate(i.op1_kind()) => {
            let v = i.immediate(1) as i64;
            Some(if i.mnemonic() == Mnemonic::Add { v } else { -v })
        }
        Mnemonic::Lea
            if rsp_op0
                && i.memory_base() == Register::RSP
                && i.memory_index() == Register::None =>
        {
            Some(i.memory_displacement64() as i64)
        }
        Mnemonic::Add | Mnemonic::Sub | Mnemonic::Lea | Mnemonic::Mov | Mnemonic::And => None,
        _ if i.stack_pointer_increment() != 0 && !rsp_op0 => {
            Some(i64::from(i.stack_pointer_increment()))
        }
        _ => None,
    }
}

fn is_immediate(k: OpKind) -> bool {
    matches!(
        k,
        OpKind::Immediate8
            | OpKind::Immediate8to64
            | OpKind::Immediate32to64
            | OpKind::Immediate32
            | OpKind::Immediate16
    )
}

/// System calls (see `sys.rs` for which are made inline).
impl Translator {
    /// Whether `i` is a `syscall` translated as a block of its own.
    fn is_syscall(&self, i: &iced_x86::Instruction) -> bool {
        self.syscalls && i.code() == Code::Syscall
    }

    /// Emits a block of one `syscall` at `code_at` (R11 as S; RCX and R11
    /// are the program's again before every exit and before the call):
    /// ```text
    ///       spill R11, RCX ; r11d = 9 ; shrx ecx, eax, r11d
    ///       jrcxz known                   ; EAX < 512
    /// trap: restore ; T.next = pc ; jmp T.dispatch_trap   ; the trap engine
    /// known: r11d = eax ; ecx = CLASS[r11] ; jrcxz trap   ; ENGINE
    ///       T.sys_flush = class - 1 ; FUTEX: T.sys_flush = FUTEX_CLASS[sil] - 1
    ///       restore ; the buffer check and record (the block, RSP) ; commit
    ///       rcx = T.sys_flush ; jrcxz inline
    ///       restore ; T.resume = call ; T.next = pc ; jmp T.dispatch_sys
    /// inline: restore
    /// call: syscall ; T.blocked = 0 ; mov rcx, <next> ; direct exit to <next>
    /// ```
    /// The record is committed before the call, so a thread blocked in it
    /// holds nothing in flight; a call that may block (`FLUSH`) has the
    /// buffer replayed first, in the dispatcher, which returns to `call`
    /// with every register as the program left it. RCX after the call is
    /// the program's return address, as natively (the kernel leaves the
    /// code cache's there). The trap engine's way is taken before anything
    /// is recorded: it steps the `syscall` as in trap mode.
    fn emit_syscall(
        &mut self,
        id: u32,
        tls: i32,
        code_at: u64,
        cache: &mut CodeCache,
        out: &mut [BlockInstr; MAX_INSTRUCTIONS],
    ) -> Option<Translation> {
        use iced_x86::{Instruction, MemoryOperand};
        let i = self.instrs[0];
        let pc = i.ip();
        let (s, s32, rcx) = (Register::R11, Register::R11D, Register::RCX);
        let t = |o: i32| fs(tls + o);
        let jrcxz = |a: &mut Asm, to: u64| {
            a.emit(Instruction::with_branch(Code::Jrcxz_rel8_64, to));
            a.len()
        };
        let restore = |a: &mut Asm| {
            a.emit(load(rcx, t(off::RCX_SPILL)));
            a.emit(load(s, t(off::S_SPILL)));
        };
        let a = &mut self.asm;
        a.reset(code_at);
        a.emit(store(t(off::S_SPILL), s));
        a.emit(store(t(off::RCX_SPILL), rcx));
        a.emit(Instruction::with2(Code::Mov_r32_imm32, s32, 9i32));
        a.emit(Instruction::with3(
            Code::VEX_Shrx_r32_rm32_r32,
            Register::ECX,
            Register::EAX,
            s32,
        ));
        let ahead = a.ip() + 2;
        let to_known = jrcxz(a, ahead);
        let trap = a.ip();
        restore(a);
        direct_exit(a, tls, pc, off::DISPATCH_TRAP, false);
        let known = a.len();
        a.patch_rel8(to_known, known);
        a.emit(Instruction::with2(Code::Mov_r32_rm32, s32, Register::EAX));
        a.emit(mov_imm64(rcx, super::sys::CLASS.as_ptr() as u64));
        a.emit(Instruction::with2(
            Code::Movzx_r32_rm8,
            Register::ECX,
            MemoryOperand::with_base_index(rcx, s),
        ));
        jrcxz(a, trap);
        a.emit(lea(rcx, rcx, -1));
        a.emit(store(t(off::SYS_FLUSH), rcx));
        a.emit(lea(rcx, rcx, -i32::from(super::sys::FUTEX - 1)));
        let ahead = a.ip() + 2;
        let to_futex = jrcxz(a, ahead);
        a.emit(Instruction::with_branch(Code::Jmp_rel32_64, a.ip()));
        let to_record = a.len();
        let futex = a.len();
        a.patch_rel8(to_futex, futex);
        a.emit(Instruction::with2(
            Code::Movzx_r32_rm8,
            Register::ECX,
            Register::SIL,
        ));
        a.emit(mov_imm64(s, super::sys::FUTEX_CLASS.as_ptr() as u64));
        a.emit(Instruction::with2(
            Code::Movzx_r32_rm8,
            Register::ECX,
            MemoryOperand::with_base_index(s, rcx),
        ));
        a.emit(lea(rcx, rcx, -1));
        a.emit(store(t(off::SYS_FLUSH), rcx));
        let record = a.ip();
        a.patch_rel32(to_record, record);
        restore(a);
        let _ = record_head(a, tls, s, 16, id, pc);
        let check = (a.ip() - code_at) as u16;
        a.emit(lea(s, s, 16));
        a.emit(store(t(off::CURSOR), s));
        a.emit(load(rcx, t(off::SYS_FLUSH)));
        let ahead = a.ip() + 2;
        let to_inline = jrcxz(a, ahead);
        restore(a);
        let here = a.ip() as i64;
        a.emit(Instruction::with2(
            Code::Lea_r64_m,
            s,
            MemoryOperand::with_base_displ(Register::RIP, here),
        ));
        let resume_rel = a.len();
        a.emit(store(t(off::RESUME), s));
        a.emit(load(s, t(off::S_SPILL)));
        direct_exit(a, tls, pc, off::DISPATCH_SYS, false);
        let inline = a.len();
        a.patch_rel8(to_inline, inline);
        restore(a);
        let call = a.ip();
        a.patch_rel32(resume_rel, call);
        a.emit(Ok(Instruction::with(Code::Syscall)));
        // Here RCX is the kernel's return address (the cache's); every
        // other register is the program's, R11 the flags as natively.
        let sys_ret = (a.ip() - code_at) as u16;
        a.emit(store_simm32(t(off::BLOCKED), 0));
        a.emit(mov_imm64(rcx, i.next_ip()));
        direct_exit(a, tls, i.next_ip(), off::DISPATCH, true);
        if !a.ok() || a.len() as u64 > MAX_CODE {
            return None;
        }
        out[0] = BlockInstr {
            ip: pc,
            sp_delta: 0,
            inputs: Inputs::NONE,
            offset: 16,
            check,
        };
        let code = a.take();
        let len = code.len();
        let written = cache.write(code_at, &code);
        a.give_back(code);
        written.then_some(Translation {
            code: code_at,
            count: 1,
            size: 16,
            rep: false,
            len,
            scratch: None,
            head: Head::default(),
            sys_ret,
        })
    }
}
