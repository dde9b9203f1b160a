//! The x86-64 access model: given a decoded instruction and the machine state
//! *before* it executes, compute every memory access it will make.
//!
//! The model is pure: it reads registers through the [`Machine`] trait and
//! writes accesses into a fixed-capacity [`AccessList`]; it never allocates
//! once a [`Model`] exists, so the capture engine can call it from a signal
//! handler. Work that depends only on the instruction bytes is done once per
//! instruction by [`Model::plan`]; [`Plan::eval`] is what runs on every
//! execution.
//!
//! Anything the model cannot compute exactly is reported as [`Unmodelled`]
//! rather than guessed.

use coldcache_sim::AccessKind;
use iced_x86::{
    Code, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, Register, UsedMemory,
};

/// One memory access predicted for an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemAccess {
    /// What the access does (read, write, read-modify-write, prefetch, ...).
    pub kind: AccessKind,
    /// First byte touched (linear address: segment base included).
    pub addr: u64,
    /// Bytes touched.
    pub size: u32,
}

/// Maximum number of data accesses one instruction execution can produce
/// (a 16-element gather or scatter plus its other operands fits).
pub const MAX_ACCESSES: usize = 40;

/// A fixed-capacity list of accesses, reused across instructions.
#[derive(Clone, Debug)]
pub struct AccessList {
    items: [MemAccess; MAX_ACCESSES],
    len: usize,
}

impl Default for AccessList {
    fn default() -> Self {
        AccessList {
            items: [MemAccess {
                kind: AccessKind::Read,
                addr: 0,
                size: 0,
            }; MAX_ACCESSES],
            len: 0,
        }
    }
}

impl AccessList {
    /// Removes every access.
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The accesses, in the order the instruction makes them.
    #[inline]
    pub fn as_slice(&self) -> &[MemAccess] {
        &self.items[..self.len]
    }

    /// Appends an access; fails when the list is full.
    #[inline]
    pub fn push(&mut self, access: MemAccess) -> Result<(), Unmodelled> {
        if self.len == MAX_ACCESSES {
            return Err(Unmodelled::TooManyAccesses);
        }
        self.items[self.len] = access;
        self.len += 1;
        Ok(())
    }
}

/// The machine state an instruction reads its addresses from: the saved
/// registers of the trapped thread, before the instruction executes.
pub trait Machine {
    /// Value of a general-purpose register as the instruction sees it
    /// (sub-registers such as `EAX` or `AL` zero-extended; `RIP` is the
    /// address of the instruction itself).
    fn gpr(&self, reg: Register) -> u64;
    /// RFLAGS.
    fn rflags(&self) -> u64;
    /// Base of a segment register: FS and GS have one, the others are 0.
    fn segment_base(&self, seg: Register) -> u64;
    /// Contents of a vector register (XMM/YMM/ZMM, little-endian, zero-padded
    /// to 64 bytes), or `None` when the saved context does not hold it.
    fn vector(&self, reg: Register) -> Option<[u8; 64]>;
    /// Contents of an AVX-512 opmask register `K0..K7`, or `None`.
    fn opmask(&self, reg: Register) -> Option<u64>;
}

/// Why an instruction's accesses could not be computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unmodelled {
    /// The instruction's memory use is not covered by the model.
    Unsupported,
    /// The instruction would make more than [`MAX_ACCESSES`] accesses.
    TooManyAccesses,
    /// A register the address needs is not in the saved context.
    MissingRegister,
}

/// Processor facts the model needs and cannot read from a signal handler
/// cheaply (CPUID is a VM exit under KVM). Gathered once at capture start.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuFacts {
    /// Bytes written by `xsave` with every enabled feature (CPUID 0xD.0 EBX),
    /// 0 when unknown.
    pub xsave_size: u32,
}

impl CpuFacts {
    /// Reads the facts from CPUID on this machine.
    pub fn detect() -> CpuFacts {
        #[cfg(target_arch = "x86_64")]
        #[allow(unused_unsafe)] // CPUID intrinsics became safe fns in newer Rust.
        {
            // SAFETY: CPUID is available on every x86-64 processor; leaf 0 is
            // always valid and tells whether leaf 0xD exists.
            let max_leaf = unsafe { core::arch::x86_64::__cpuid(0) }.eax;
            if max_leaf >= 0xD {
                // SAFETY: leaf 0xD exists (checked above).
                let d = unsafe { core::arch::x86_64::__cpuid_count(0xD, 0) };
                return CpuFacts { xsave_size: d.ebx };
            }
        }
        CpuFacts::default()
    }
}

/// Maximum number of memory operand templates kept per instruction.
const MAX_TEMPLATES: usize = 4;

/// What the model does for an instruction beyond its operand templates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Special {
    /// Evaluate the templates as they are.
    None,
    /// A `rep`-prefixed string instruction: no access when RCX is 0.
    RepString,
    /// Not modelled.
    Unmodelled(Unmodelled),
}

/// The per-instruction part of the model: computed once when an instruction
/// is first decoded, evaluated on every execution. `Copy` and fixed-size so
/// the engine's decode cache can hold it inline.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    templates: [(UsedMemory, AccessKind); MAX_TEMPLATES],
    count: u8,
    special: Special,
}

/// The access model. Create one per capture (it reserves what the decoder's
/// info factory needs) and reuse it.
pub struct Model {
    factory: InstructionInfoFactory,
    facts: CpuFacts,
}

impl Model {
    /// A model for a processor with the given facts.
    pub fn new(facts: CpuFacts) -> Model {
        let mut model = Model {
            factory: InstructionInfoFactory::new(),
            facts,
        };
        model.reserve();
        model
    }

    /// Runs the info factory over instructions with many operands so its
    /// internal buffers reach their largest size before tracing starts.
    fn reserve(&mut self) {
        // vpgatherdd zmm1{k1}, [rax+zmm2*4] (16 elements) and a pusha-like
        // load of registers; decoding them grows the factory's vectors.
        let samples: [&[u8]; 2] = [
            &[0x62, 0xF2, 0x7D, 0x49, 0x90, 0x0C, 0x90],
            &[0x0F, 0xAE, 0x20], // xsave [rax]
        ];
        for bytes in samples {
            let mut decoder = iced_x86::Decoder::new(64, bytes, iced_x86::DecoderOptions::NONE);
            let instr = decoder.decode();
            let _ = self.factory.info(&instr);
        }
    }

    /// The facts this model was built with.
    pub fn facts(&self) -> CpuFacts {
        self.facts
    }

    /// Computes the plan for an instruction (decoded with its real IP, so
    /// RIP-relative operands are already absolute).
    pub fn plan(&mut self, instr: &Instruction) -> Plan {
        let mut plan = Plan {
            templates: [(
                UsedMemory::new(
                    Register::None,
                    Register::None,
                    Register::None,
                    1,
                    0,
                    iced_x86::MemorySize::Unknown,
                    OpAccess::None,
                ),
                AccessKind::Read,
            ); MAX_TEMPLATES],
            count: 0,
            special: Special::None,
        };
        if instr.is_invalid() {
            plan.special = Special::Unmodelled(Unmodelled::Unsupported);
            return plan;
        }
        let mnemonic = instr.mnemonic();
        if is_unsupported(instr) {
            plan.special = Special::Unmodelled(Unmodelled::Unsupported);
            return plan;
        }
        if instr.has_rep_prefix() || instr.has_repe_prefix() || instr.has_repne_prefix() {
            if instr.is_string_instruction() {
                plan.special = Special::RepString;
            }
        }
        let kind_override = override_kind(mnemonic, instr.code());
        if let Some(kind) = kind_override {
            // Prefetch, flush and the like: iced reports no used memory for
            // some of them, so take the explicit memory operand.
            let mem = UsedMemory::new(
                instr.memory_segment(),
                instr.memory_base(),
                instr.memory_index(),
                instr.memory_index_scale(),
                instr.memory_displacement64(),
                instr.memory_size(),
                OpAccess::Read,
            );
            plan.templates[0] = (mem, kind);
            plan.count = 1;
            return plan;
        }
        let info = self.factory.info(instr);
        for mem in info.used_memory() {
            let kind = match mem.access() {
                OpAccess::Read | OpAccess::CondRead => AccessKind::Read,
                OpAccess::Write | OpAccess::CondWrite => AccessKind::Write,
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => AccessKind::ReadModifyWrite,
                OpAccess::None | OpAccess::NoMemAccess => continue,
            };
            if mem.memory_size().size() == 0 {
                plan.special = Special::Unmodelled(Unmodelled::Unsupported);
                return plan;
            }
            if plan.count as usize == MAX_TEMPLATES {
                plan.special = Special::Unmodelled(Unmodelled::TooManyAccesses);
                return plan;
            }
            plan.templates[plan.count as usize] = (*mem, kind);
            plan.count += 1;
        }
        plan
    }
}

/// Instructions whose memory use the model does not handle yet.
fn is_unsupported(instr: &Instruction) -> bool {
    // Vector-indexed (gather/scatter) operands need per-element masks.
    if instr.op_count() > 0 {
        for i in 0..instr.op_count() {
            if instr.op_kind(i) == iced_x86::OpKind::Memory
                && instr.memory_index().is_vector_register()
            {
                return true;
            }
        }
    }
    matches!(
        instr.mnemonic(),
        Mnemonic::Xsave
            | Mnemonic::Xsave64
            | Mnemonic::Xsaveopt
            | Mnemonic::Xsaveopt64
            | Mnemonic::Xsavec
            | Mnemonic::Xsavec64
            | Mnemonic::Xsaves
            | Mnemonic::Xsaves64
            | Mnemonic::Xrstor
            | Mnemonic::Xrstor64
            | Mnemonic::Xrstors
            | Mnemonic::Xrstors64
            | Mnemonic::Bt
            | Mnemonic::Bts
            | Mnemonic::Btr
            | Mnemonic::Btc
    ) && has_memory_operand(instr)
}

fn has_memory_operand(instr: &Instruction) -> bool {
    (0..instr.op_count()).any(|i| instr.op_kind(i) == iced_x86::OpKind::Memory)
}

/// The access kind of instructions whose kind is not plain read/write.
fn override_kind(mnemonic: Mnemonic, _code: Code) -> Option<AccessKind> {
    match mnemonic {
        Mnemonic::Prefetch
        | Mnemonic::Prefetchw
        | Mnemonic::Prefetchwt1
        | Mnemonic::Prefetchnta
        | Mnemonic::Prefetcht0
        | Mnemonic::Prefetcht1
        | Mnemonic::Prefetcht2 => Some(AccessKind::Prefetch),
        Mnemonic::Clflush | Mnemonic::Clflushopt | Mnemonic::Clwb => Some(AccessKind::Flush),
        _ => None,
    }
    .or(match mnemonic {
        Mnemonic::Movnti
        | Mnemonic::Movntdq
        | Mnemonic::Movntps
        | Mnemonic::Movntpd
        | Mnemonic::Vmovntdq
        | Mnemonic::Vmovntps
        | Mnemonic::Vmovntpd => Some(AccessKind::NonTemporalStore),
        _ => None,
    })
}

impl Plan {
    /// True when the instruction makes no data access in any state.
    pub fn is_empty(&self) -> bool {
        self.count == 0 && self.special == Special::None
    }

    /// Computes the accesses of one execution of `instr` from the machine
    /// state before it runs, appending them to `out`.
    pub fn eval<M: Machine + ?Sized>(
        &self,
        _instr: &Instruction,
        machine: &M,
        out: &mut AccessList,
    ) -> Result<(), Unmodelled> {
        match self.special {
            Special::None => {}
            Special::RepString => {
                if machine.gpr(Register::RCX) == 0 {
                    return Ok(());
                }
            }
            Special::Unmodelled(why) => return Err(why),
        }
        for (mem, kind) in &self.templates[..self.count as usize] {
            let addr = mem
                .try_virtual_address(0, |reg, _, _| Some(register_value(machine, reg)))
                .ok_or(Unmodelled::MissingRegister)?;
            out.push(MemAccess {
                kind: *kind,
                addr,
                size: mem.memory_size().size() as u32,
            })?;
        }
        Ok(())
    }
}

fn register_value<M: Machine + ?Sized>(machine: &M, reg: Register) -> u64 {
    match reg {
        Register::ES | Register::CS | Register::SS | Register::DS | Register::FS | Register::GS => {
            machine.segment_base(reg)
        }
        _ => machine.gpr(reg),
    }
}
