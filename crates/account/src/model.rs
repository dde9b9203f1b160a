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
//! rather than guessed. The rules, case by case, are in `docs/access-model.md`.
//!
//! # Order of the accesses
//! [`Plan::eval`] appends one instruction's accesses in the order the engine
//! feeds them to the simulator: reads (and prefetches and flushes) first,
//! then read-modify-writes, then writes (plain and non-temporal); within each
//! group, the order the instruction makes them (element order for gathers,
//! scatters and masked moves; component order for `xsave`).

use coldcache_sim::AccessKind;
use iced_x86::{
    Code, CodeSize, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register,
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
/// (a 16-element gather or scatter plus its other operands fits, and so does
/// `xsave` with every component of today's processors).
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

    /// Number of accesses in the list.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the list holds no access.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The accesses, in the order the engine feeds them to the simulator
    /// (see the module documentation).
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

    /// Drops every access after the first `len`.
    #[inline]
    fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.len = len;
        }
    }

    /// Stable sort of the accesses from `start` on by [`order_rank`]
    /// (insertion sort: at most [`MAX_ACCESSES`] items, no allocation).
    fn sort_from(&mut self, start: usize) {
        let items = &mut self.items[start.min(self.len)..self.len];
        for i in 1..items.len() {
            let mut j = i;
            while j > 0 && order_rank(items[j - 1].kind) > order_rank(items[j].kind) {
                items.swap(j - 1, j);
                j -= 1;
            }
        }
    }
}

/// Position of an access kind in an instruction's access order: reads
/// first, then read-modify-writes, then writes.
fn order_rank(kind: AccessKind) -> u8 {
    match kind {
        AccessKind::InstrFetch => 0,
        AccessKind::Read | AccessKind::Prefetch | AccessKind::Flush => 1,
        AccessKind::ReadModifyWrite => 2,
        AccessKind::Write | AccessKind::NonTemporalStore => 3,
    }
}

/// The machine state an instruction reads its addresses from: the saved
/// registers of the trapped thread, before the instruction executes (after
/// it, for [`Plan::eval_after`]).
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
    /// Contents of an MMX register `MM0..MM7` (the low 64 bits of the x87
    /// register in the saved FXSAVE area), or `None`. Only `maskmovq` needs
    /// it; the default says the context does not hold it.
    fn mmx(&self, _reg: Register) -> Option<u64> {
        None
    }
    /// Reads 8 bytes of the traced program's memory, or `None` when the
    /// engine cannot (the default). Only `xrstor` needs it: which components
    /// it reads, and where, depends on the XSAVE header it is given
    /// (`XSTATE_BV` at +512 and `XCOMP_BV` at +520), which the instruction
    /// itself is about to read.
    fn read_u64(&self, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.read_memory(addr, &mut b)
            .then(|| u64::from_le_bytes(b))
    }
    /// Reads `buf.len()` bytes of the traced program's memory at `addr`;
    /// false when any of them cannot be read (the default: a source without
    /// memory). Never faults.
    fn read_memory(&self, _addr: u64, _buf: &mut [u8]) -> bool {
        false
    }
    /// Reads the bytes of the instruction the thread is about to execute at
    /// `addr` (at most up to the end of its page), as the CPU will fetch
    /// them. The default reads them as memory; a source that knows the page
    /// is mapped code may read them directly.
    fn read_code(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.read_memory(addr, buf)
    }
    /// XINUSE: the XSAVE state components that are not in their initial
    /// configuration, or `None` (the default). Only `xsavec` needs it: it
    /// skips components in their initial configuration. The engine can take
    /// it from `XSTATE_BV` of the XSAVE area the kernel saved in the signal
    /// frame (the kernel saves it with XSAVE, which sets `XSTATE_BV[i]` to
    /// `XINUSE[i]`, and sigreturn restores from it).
    fn xinuse(&self) -> Option<u64> {
        None
    }
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
    /// An AVX-512 `{k}`-masked memory operand with some elements masked off,
    /// on an instruction for which the model does not know whether the
    /// masked elements are still read (instructions without memory-fault
    /// suppression read them).
    PartialMask,
    /// The accesses depend on memory contents the engine did not provide
    /// ([`Machine::read_u64`]): `xrstor`'s XSAVE header.
    NeedsMemory,
    /// `xsave`-family size unknown: no CPUID leaf 0xD facts, or a requested
    /// component beyond the ones recorded in [`XsaveLayout`].
    UnknownXsaveLayout,
    /// The instruction after `syscall` ran untrapped, and it changed a
    /// register its addresses depend on (or it moves RSP, RSI, RDI or RCX),
    /// so the state after it does not give its addresses.
    NotExactAfter,
}

impl Unmodelled {
    /// Every reason, in declaration order (the engine counts each).
    pub const ALL: [Unmodelled; 7] = [
        Unmodelled::Unsupported,
        Unmodelled::TooManyAccesses,
        Unmodelled::MissingRegister,
        Unmodelled::PartialMask,
        Unmodelled::NeedsMemory,
        Unmodelled::UnknownXsaveLayout,
        Unmodelled::NotExactAfter,
    ];

    /// A short reason for reports.
    pub fn reason(self) -> &'static str {
        match self {
            Unmodelled::Unsupported => "memory use not covered by the model",
            Unmodelled::TooManyAccesses => "more accesses than one instruction may report",
            Unmodelled::MissingRegister => "a register the address needs is not saved",
            Unmodelled::PartialMask => "partially masked AVX-512 memory operand",
            Unmodelled::NeedsMemory => "depends on memory contents (xrstor header)",
            Unmodelled::UnknownXsaveLayout => "xsave component layout unknown",
            Unmodelled::NotExactAfter => {
                "untrapped instruction after syscall changed its own address inputs"
            }
        }
    }
}

/// Number of XSAVE state components whose standard-format place is kept
/// (components 2 to `XSAVE_COMPONENTS - 1`; 0 and 1 live in the legacy
/// region). Today's processors use up to component 19.
pub const XSAVE_COMPONENTS: usize = 24;

/// Where each XSAVE state component lives, from CPUID leaf 0xD, and the
/// enabled user components (XCR0). Stored compactly (`u16`) so a [`Plan`]
/// for an `xsave`-family instruction can carry it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XsaveLayout {
    /// XCR0: the user state components the OS enabled (0 when unknown).
    pub xcr0: u64,
    /// Standard-format offset of component `i` (CPUID 0xD.i EBX); entries 0
    /// and 1 unused.
    pub offset: [u16; XSAVE_COMPONENTS],
    /// Size of component `i` in bytes (CPUID 0xD.i EAX); entries 0 and 1
    /// unused.
    pub size: [u16; XSAVE_COMPONENTS],
    /// Bit `i` set: component `i` is 64-byte aligned in the compacted format
    /// (CPUID 0xD.i ECX bit 1).
    pub align64: u32,
}

impl XsaveLayout {
    /// True when the layout came from CPUID (XCR0 always has x87 enabled).
    pub fn is_known(&self) -> bool {
        self.xcr0 & 1 != 0
    }
}

/// Processor facts the model needs and cannot read from a signal handler
/// cheaply (CPUID is a VM exit under KVM). Gathered once at capture start
/// (`coldcache_capture::machine::cpu_facts`).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuFacts {
    /// Bytes written by `xsave` with every enabled feature (CPUID 0xD.0 EBX),
    /// 0 when unknown.
    pub xsave_size: u32,
    /// Per-component XSAVE layout and XCR0.
    pub xsave: XsaveLayout,
}

/// Maximum number of memory operand templates kept per instruction.
const MAX_TEMPLATES: usize = 4;

/// One memory operand: `segment:[base + index*scale + disp]`, with the kind
/// and size of the access it makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Template {
    disp: u64,
    size: u32,
    seg: Register,
    base: Register,
    index: Register,
    scale: u8,
    kind: AccessKind,
    /// Address-size override (0x67): the effective address wraps at 32 bits.
    addr32: bool,
}

const EMPTY_TEMPLATE: Template = Template {
    disp: 0,
    size: 0,
    seg: Register::None,
    base: Register::None,
    index: Register::None,
    scale: 1,
    kind: AccessKind::Read,
    addr32: false,
};

/// The `xsave`-family instruction a plan is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum XsaveForm {
    /// `xsave` (and 64-bit form): standard format, every requested
    /// component written.
    Standard,
    /// `xsavec` (and 64-bit form): compacted format, components in their
    /// initial configuration skipped.
    Compacted,
    /// `xrstor` (and 64-bit form): format given by the header in memory.
    Restore,
}

/// What the model does for an instruction beyond its operand templates.
/// Masked and special forms use template 0 as their memory operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Special {
    /// Evaluate the templates as they are.
    None,
    /// A `rep`-prefixed string instruction: no access when the count
    /// register (RCX, or ECX under 0x67) is 0.
    RepString { count: Register },
    /// `bt/bts/btr/btc [m], reg`: the operand moves by the signed bit offset.
    BitTest { offset: Register },
    /// `enter imm16, level` with level 1 to 31 (64-bit operand size).
    Enter { level: u8 },
    /// `maskmovdqu`/`maskmovq`: byte `i` written when the sign bit of byte
    /// `i` of the mask register is set.
    ByteMask { mask: Register },
    /// VEX `vmaskmov*`/`vpmaskmov*`: element `i` accessed when the sign bit
    /// of element `i` of the mask register is set.
    VectorMask { mask: Register, elem: u8 },
    /// AVX-512 masked move, or element-wise load+op with fault suppression
    /// ([`is_elementwise_load_op`]): element `i` accessed when bit `i` of
    /// `k` is set.
    OpmaskElements { mask: Register, elem: u8 },
    /// AVX-512 compress store / expand load: `popcount(k)` consecutive
    /// elements from the start of the operand.
    OpmaskPacked { mask: Register, elem: u8, lanes: u8 },
    /// AVX-512 masked broadcast: the element is read when any lane is enabled.
    OpmaskBroadcast { mask: Register, lanes: u8 },
    /// Other AVX-512 masked operands (permutes, shuffles, forms not known
    /// to suppress faults element by element): exact only with every lane
    /// enabled.
    OpmaskFull { mask: Register, elem: u8 },
    /// Gather or scatter: per element, `base + index[i]*scale + disp`.
    Gather {
        index: Register,
        /// `K1..K7` (AVX-512) or a vector register (AVX2: element sign bits).
        mask: Register,
        index_bytes: u8,
        elem: u8,
        count: u8,
    },
    /// `xsave` family: components selected by EDX:EAX & XCR0.
    Xsave {
        form: XsaveForm,
        layout: XsaveLayout,
    },
    /// Not modelled.
    Unmodelled(Unmodelled),
}

/// How the state before an instruction is recovered from the state after
/// it, for the untrapped instruction after `syscall`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AfterRule {
    /// It changes a register its addresses depend on in a way that cannot
    /// be undone.
    NotExact,
    /// It changes none of them: the state after gives the same addresses.
    Same,
    /// A stack instruction whose only change to its address registers is
    /// RSP moving by this many bytes (iced's stack-pointer increment).
    StackMoved(i32),
    /// A string instruction without `rep`: RSI and/or RDI (ESI/EDI under
    /// 0x67) moved by one element of this many bytes, down when DF is set.
    StringMoved { size: u8 },
}

/// The registers a translator records before an instruction so that
/// [`Plan::eval`] can run later over the record ([`Plan::inputs`]). `Copy`
/// and fixed-size. In a record they are laid out in this order: the
/// general registers (8 bytes each), the opmask (8 bytes), the vector
/// registers (their width: 16, 32 or 64 bytes each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inputs {
    /// General registers (full 64-bit names), unused entries
    /// [`Register::None`].
    pub gprs: [Register; 4],
    /// An opmask register `K1..K7`, or [`Register::None`].
    pub opmask: Register,
    /// Vector registers (XMM/YMM/ZMM as the plan names them), unused
    /// entries [`Register::None`]: a mask operand, a gather's index.
    pub vectors: [Register; 2],
}

impl Inputs {
    /// No register at all.
    pub const NONE: Inputs = Inputs {
        gprs: [Register::None; 4],
        opmask: Register::None,
        vectors: [Register::None; 2],
    };

    /// The general registers, in record order.
    pub fn gpr_list(&self) -> impl Iterator<Item = Register> + '_ {
        self.gprs.iter().copied().filter(|&r| r != Register::None)
    }

    /// The vector registers, in record order.
    pub fn vector_list(&self) -> impl Iterator<Item = Register> + '_ {
        self.vectors
            .iter()
            .copied()
            .filter(|&r| r != Register::None)
    }

    /// Bytes these inputs take in a record.
    pub fn bytes(&self) -> usize {
        8 * self.gpr_list().count()
            + if self.opmask == Register::None { 0 } else { 8 }
            + self.vector_list().map(|r| r.size()).sum::<usize>()
    }

    /// Offset of the opmask from the start of these inputs in a record.
    #[inline]
    pub fn opmask_offset(&self) -> usize {
        8 * self.gpr_list().count()
    }

    /// Offsets of the vector registers from the start of these inputs.
    #[inline]
    pub fn vector_offsets(&self) -> [usize; 2] {
        let first = self.opmask_offset() + if self.opmask == Register::None { 0 } else { 8 };
        [first, first + self.vectors[0].size()]
    }

    /// True when only general registers are recorded.
    #[inline]
    pub fn gprs_only(&self) -> bool {
        self.opmask == Register::None && self.vectors == [Register::None; 2]
    }
}

/// The per-instruction part of the model: computed once when an instruction
/// is first decoded, evaluated on every execution. `Copy` and fixed-size so
/// the engine's decode cache can hold it inline.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    templates: [Template; MAX_TEMPLATES],
    count: u8,
    /// How [`Plan::eval_after`] recovers the state before the instruction.
    after: AfterRule,
    special: Special,
}

/// A plan of the two commonest kinds, no memory access or one plain
/// operand, small enough to keep beside a translated block's instruction
/// (`account::BlockSlot`) so that a replay evaluates it without reading
/// the decode cache's entry (an instruction and its whole plan, about 300
/// bytes). [`Quick::eval`] gives exactly what [`Plan::eval`] gives for the
/// plan it came from ([`Plan::quick`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quick {
    one: bool,
    t: Template,
}

impl Quick {
    /// Whether [`Quick::eval`] reads the machine at all (a memory operand;
    /// a plan without one reads nothing).
    #[inline(always)]
    pub fn reads_registers(&self) -> bool {
        self.one
    }

    /// The one access [`Quick::eval`] gives, for a plan with a memory
    /// operand ([`Quick::reads_registers`]); `None` for one without.
    #[inline(always)]
    pub fn access<M: Machine + ?Sized>(&self, machine: &M) -> Option<MemAccess> {
        self.one.then(|| MemAccess {
            kind: self.t.kind,
            addr: address(&self.t, machine, 0),
            size: self.t.size,
        })
    }

    /// [`Plan::eval`] of the plan this came from.
    #[inline(always)]
    pub fn eval<M: Machine + ?Sized>(
        &self,
        machine: &M,
        out: &mut AccessList,
    ) -> Result<(), Unmodelled> {
        match self.access(machine) {
            Some(a) => out.push(a),
            None => Ok(()),
        }
    }
}

/// A [`Quick`] plan's one access with its address read straight from a
/// record of [`Inputs`] ([`Quick::recorded`]): the record words of its
/// base and index registers' values fixed once, so a replay computes the
/// address without loading a machine's registers or evaluating the plan.
/// [`RecordedAddress::access`] gives exactly what [`Quick::access`] gives
/// over a machine whose registers are the record's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedAddress {
    disp: u64,
    size: u32,
    /// The record words (8-byte units) of the base's and the index's
    /// value, each multiplied by its scale: 0 for a register the address
    /// has not (whatever word 0 holds).
    base: u8,
    index: u8,
    base_scale: u8,
    scale: u8,
    kind: AccessKind,
    /// FS or GS (their base is the machine's), or [`Register::None`].
    seg: Register,
}

impl RecordedAddress {
    /// The access, with the values the record `record` (its 64-bit
    /// words) holds where [`Quick::recorded`] found them and the FS/GS
    /// base from `m` (its only use of the machine). `None` when `record`
    /// is too short to hold them: the caller evaluates the plan its usual
    /// way.
    #[inline(always)]
    pub fn access<M: Machine + ?Sized>(&self, record: &[u64], m: &M) -> Option<MemAccess> {
        let base = *record.get(usize::from(self.base))?;
        let index = *record.get(usize::from(self.index))?;
        let mut addr = self
            .disp
            .wrapping_add(base.wrapping_mul(u64::from(self.base_scale)))
            .wrapping_add(index.wrapping_mul(u64::from(self.scale)));
        if self.seg != Register::None {
            addr = addr.wrapping_add(m.segment_base(self.seg));
        }
        Some(MemAccess {
            kind: self.kind,
            addr,
            size: self.size,
        })
    }
}

impl Quick {
    /// This plan's access as a [`RecordedAddress`] over a record whose
    /// inputs `inputs` start at byte `at` (laid out as [`Inputs`] says).
    /// `None` for a plan without a memory operand, one with 32-bit
    /// addressing, one whose registers `inputs` do not hold as full 64-bit
    /// values, or inputs not on a word's boundary or past word 255.
    pub fn recorded(&self, inputs: &Inputs, at: u16) -> Option<RecordedAddress> {
        let t = &self.t;
        if !self.one || t.addr32 || !at.is_multiple_of(8) {
            return None;
        }
        // (word, multiplier) of a register's value.
        let operand = |r: Register, scale: u8| -> Option<(u8, u8)> {
            if r == Register::None {
                return Some((0, 0));
            }
            if !r.is_gpr64() {
                return None;
            }
            // In record order, as the translator stores them.
            let k = inputs.gpr_list().position(|g| g == r)?;
            let word = u8::try_from(usize::from(at / 8) + k).ok()?;
            Some((word, scale))
        };
        let (base, base_scale) = operand(t.base, 1)?;
        let (index, scale) = operand(t.index, t.scale)?;
        Some(RecordedAddress {
            disp: t.disp,
            size: t.size,
            base,
            index,
            base_scale,
            scale,
            kind: t.kind,
            seg: match t.seg {
                Register::FS | Register::GS => t.seg,
                _ => Register::None,
            },
        })
    }
}

/// The access model. Create one per capture (it reserves what the decoder's
/// info factory needs) and reuse it.
pub struct Model {
    factory: InstructionInfoFactory,
    facts: CpuFacts,
}

/// Instructions run through the info factory by [`Model::new`] so that its
/// register and memory lists reach their largest capacity before tracing.
const RESERVE_SAMPLES: &[&[u8]] = &[
    // enter 0, 31: 62 stack memory locations.
    &[0xC8, 0x00, 0x00, 0x1F],
    // vp4dpwssd zmm1{k1}, zmm4+3, [rax]: a register group.
    &[0x62, 0xF2, 0x5F, 0x49, 0x52, 0x08],
    // vpgatherdd zmm1{k1}, [rax+zmm2*4]
    &[0x62, 0xF2, 0x7D, 0x49, 0x90, 0x0C, 0x90],
    // xsave [rax]
    &[0x0F, 0xAE, 0x20],
    // iretq
    &[0x48, 0xCF],
    // vzeroupper, vzeroall: 32 vector registers.
    &[0xC5, 0xF8, 0x77],
    &[0xC5, 0xFC, 0x77],
    // fnsave [rax+rcx*4], frstor [rax+rcx*4]: the x87 stack and more.
    &[0xDD, 0x34, 0x88],
    &[0xDD, 0x24, 0x88],
    // cpuid, rdtscp, syscall, xgetbv
    &[0x0F, 0xA2],
    &[0x0F, 0x01, 0xF9],
    &[0x0F, 0x05],
    &[0x0F, 0x01, 0xD0],
];

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
        for bytes in RESERVE_SAMPLES {
            let mut decoder = iced_x86::Decoder::new(64, bytes, iced_x86::DecoderOptions::NONE);
            let instr = decoder.decode();
            let _ = self.factory.info(&instr);
        }
    }

    /// The facts this model was built with.
    pub fn facts(&self) -> CpuFacts {
        self.facts
    }

    /// Computes the plan for an instruction (decoded in 64-bit mode with its
    /// real IP, so RIP-relative operands are already absolute).
    pub fn plan(&mut self, instr: &Instruction) -> Plan {
        let mut plan = Plan {
            templates: [EMPTY_TEMPLATE; MAX_TEMPLATES],
            count: 0,
            after: AfterRule::NotExact,
            special: Special::None,
        };
        let special = self.plan_into(instr, &mut plan);
        plan.special = special;
        if let Special::Unmodelled(_) = special {
            plan.count = 0;
        } else {
            plan.after = self.after_rule(instr, &plan);
        }
        plan
    }

    /// Fills the templates and returns the special handling.
    fn plan_into(&mut self, instr: &Instruction, plan: &mut Plan) -> Special {
        use Unmodelled::*;
        if instr.is_invalid() || !matches!(instr.code_size(), CodeSize::Code64 | CodeSize::Unknown)
        {
            return Special::Unmodelled(Unsupported);
        }
        let mnemonic = instr.mnemonic();
        if is_unsupported(instr) {
            return Special::Unmodelled(Unsupported);
        }

        // Hints and flushes that iced lists without (or with the wrong) kind.
        if let Some(kind) = explicit_operand_kind(mnemonic) {
            if !has_memory_operand(instr) {
                return Special::Unmodelled(Unsupported);
            }
            plan.templates[0] = explicit_template(instr, kind);
            plan.count = 1;
            return Special::None;
        }

        // enter with a nesting level: computed at evaluation.
        if instr.code() == Code::Enterq_imm16_imm8 {
            let level = instr.immediate8_2nd() & 31;
            if level > 0 {
                return Special::Enter { level };
            }
        } else if mnemonic == Mnemonic::Enter && (instr.immediate8_2nd() & 31) != 0 {
            return Special::Unmodelled(Unsupported);
        }

        let info = self.factory.info(instr);
        let mut any_memory = false;
        for mem in info.used_memory() {
            let kind = match mem.access() {
                OpAccess::Read | OpAccess::CondRead => AccessKind::Read,
                OpAccess::Write | OpAccess::CondWrite => AccessKind::Write,
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => AccessKind::ReadModifyWrite,
                OpAccess::None | OpAccess::NoMemAccess => continue,
            };
            any_memory = true;
            let mut size = mem.memory_size().size() as u32;
            if size == 0 && instr.is_string_instruction() {
                // iced gives rep forms an unknown size; each iteration moves
                // one element.
                size = instr.memory_size().size() as u32;
            }
            let xsave_form = match mnemonic {
                Mnemonic::Xsave | Mnemonic::Xsave64 => Some(XsaveForm::Standard),
                Mnemonic::Xsavec | Mnemonic::Xsavec64 => Some(XsaveForm::Compacted),
                Mnemonic::Xrstor | Mnemonic::Xrstor64 => Some(XsaveForm::Restore),
                _ => None,
            };
            if size == 0 && xsave_form.is_none() {
                return Special::Unmodelled(Unsupported);
            }
            if plan.count as usize == MAX_TEMPLATES {
                return Special::Unmodelled(TooManyAccesses);
            }
            let kind = if is_non_temporal_store(mnemonic) && kind == AccessKind::Write {
                AccessKind::NonTemporalStore
            } else {
                kind
            };
            plan.templates[plan.count as usize] = Template {
                disp: mem.displacement(),
                size,
                seg: mem.segment(),
                base: mem.base(),
                index: mem.index(),
                scale: mem.scale() as u8,
                kind,
                addr32: mem.address_size() == CodeSize::Code32,
            };
            plan.count += 1;
        }

        // Which of its two reads cmps makes first is not architectural; the
        // model follows Valgrind's order (ES:[RDI], then DS:[RSI]) so that
        // address streams compare equal. iced lists the RSI operand first.
        if matches!(
            mnemonic,
            Mnemonic::Cmpsb | Mnemonic::Cmpsw | Mnemonic::Cmpsd | Mnemonic::Cmpsq
        ) && plan.count == 2
            && matches!(plan.templates[0].base, Register::RSI | Register::ESI)
        {
            plan.templates.swap(0, 1);
        }

        if !any_memory {
            // iced lists no access: fine for LEA, NOP and the MPX bound
            // checks, which do not touch memory; anything else with a memory
            // operand is an instruction iced does not describe.
            if has_memory_operand(instr) && !is_no_access(mnemonic) {
                return Special::Unmodelled(Unsupported);
            }
            return Special::None;
        }

        // Rep string instructions trap once per iteration.
        if instr.is_string_instruction()
            && (instr.has_rep_prefix() || instr.has_repe_prefix() || instr.has_repne_prefix())
        {
            let count = if plan.templates[0].addr32 {
                Register::ECX
            } else {
                Register::RCX
            };
            return Special::RepString { count };
        }

        // FXSAVE writes the legacy region's state, bytes 0..416 (x87,
        // MXCSR, XMM0-15); bytes 416..512 are reserved or left to software
        // and are not written (measured), though iced says 512.
        if matches!(
            mnemonic,
            Mnemonic::Fxsave | Mnemonic::Fxsave64 | Mnemonic::Fxrstor | Mnemonic::Fxrstor64
        ) {
            plan.templates[0].size = FXSAVE_STATE_SIZE;
            return Special::None;
        }

        let t0 = plan.templates[0];
        let mem_size = instr.memory_size();
        let elem = mem_size.element_size() as u32;

        match mnemonic {
            Mnemonic::Bt | Mnemonic::Bts | Mnemonic::Btr | Mnemonic::Btc
                if instr.op0_kind() == OpKind::Memory && instr.op1_kind() == OpKind::Register =>
            {
                return Special::BitTest {
                    offset: instr.op1_register(),
                };
            }
            Mnemonic::Xsave
            | Mnemonic::Xsave64
            | Mnemonic::Xsavec
            | Mnemonic::Xsavec64
            | Mnemonic::Xrstor
            | Mnemonic::Xrstor64 => {
                if !self.facts.xsave.is_known() || plan.count != 1 {
                    return Special::Unmodelled(UnknownXsaveLayout);
                }
                let form = match mnemonic {
                    Mnemonic::Xsavec | Mnemonic::Xsavec64 => XsaveForm::Compacted,
                    Mnemonic::Xrstor | Mnemonic::Xrstor64 => XsaveForm::Restore,
                    _ => XsaveForm::Standard,
                };
                return Special::Xsave {
                    form,
                    layout: self.facts.xsave,
                };
            }
            Mnemonic::Maskmovdqu | Mnemonic::Vmaskmovdqu | Mnemonic::Maskmovq => {
                let mask = instr.op_register(instr.op_count() - 1);
                plan.templates[0].kind = AccessKind::NonTemporalStore;
                return Special::ByteMask { mask };
            }
            Mnemonic::Vmaskmovps
            | Mnemonic::Vmaskmovpd
            | Mnemonic::Vpmaskmovd
            | Mnemonic::Vpmaskmovq => {
                if plan.count != 1 || !(elem == 4 || elem == 8) {
                    return Special::Unmodelled(Unsupported);
                }
                return Special::VectorMask {
                    mask: instr.op1_register(),
                    elem: elem as u8,
                };
            }
            _ => {}
        }

        // Gathers and scatters.
        if t0.index.is_vector_register() {
            if plan.count != 1 || !(elem == 4 || elem == 8) {
                return Special::Unmodelled(Unsupported);
            }
            let index_bytes: u8 = match instr.vsib() {
                Some(true) => 8,
                Some(false) => 4,
                None => return Special::Unmodelled(Unsupported),
            };
            let data = if instr.op0_kind() == OpKind::Register {
                instr.op0_register()
            } else if instr.op1_kind() == OpKind::Register {
                instr.op1_register()
            } else {
                return Special::Unmodelled(Unsupported);
            };
            if !data.is_vector_register() {
                return Special::Unmodelled(Unsupported);
            }
            let mask = if instr.has_op_mask() {
                instr.op_mask()
            } else if instr.op2_kind() == OpKind::Register
                && instr.op2_register().is_vector_register()
            {
                instr.op2_register()
            } else {
                return Special::Unmodelled(Unsupported);
            };
            let count = (t0.index.size() / index_bytes as usize).min(data.size() / elem as usize);
            plan.templates[0].index = Register::None;
            return Special::Gather {
                index: t0.index,
                mask,
                index_bytes,
                elem: elem as u8,
                count: count as u8,
            };
        }

        // AVX-512 {k}-masked memory operands.
        if instr.has_op_mask() {
            if plan.count != 1 || elem == 0 || !t0.size.is_multiple_of(elem) {
                return Special::Unmodelled(Unsupported);
            }
            let mask = instr.op_mask();
            let lanes = t0.size / elem;
            if instr.is_broadcast() {
                let vector = (0..instr.op_count())
                    .filter(|&i| instr.op_kind(i) == OpKind::Register)
                    .map(|i| instr.op_register(i))
                    .filter(|r| r.is_vector_register())
                    .map(|r| r.size() as u32)
                    .max()
                    .unwrap_or(0);
                if vector == 0 {
                    return Special::Unmodelled(Unsupported);
                }
                return Special::OpmaskBroadcast {
                    mask,
                    lanes: (vector / elem) as u8,
                };
            }
            if is_compress_expand(mnemonic) {
                return Special::OpmaskPacked {
                    mask,
                    elem: elem as u8,
                    lanes: lanes as u8,
                };
            }
            if is_masked_move(mnemonic, instr) {
                return Special::OpmaskElements {
                    mask,
                    elem: elem as u8,
                };
            }
            if t0.kind == AccessKind::Read && is_elementwise_load_op(mnemonic, instr, t0.size) {
                return Special::OpmaskElements {
                    mask,
                    elem: elem as u8,
                };
            }
            return Special::OpmaskFull {
                mask,
                elem: elem as u8,
            };
        }
        Special::None
    }

    /// How [`Plan::eval_after`] can recover this instruction's addresses
    /// from the state after it ran.
    fn after_rule(&mut self, instr: &Instruction, plan: &Plan) -> AfterRule {
        let mut inputs = [Register::None; 2 * MAX_TEMPLATES + 4];
        let mut n = 0;
        let mut add = |r: Register| {
            if r != Register::None && n < inputs.len() {
                inputs[n] = r.full_register();
                n += 1;
            }
        };
        for t in &plan.templates[..plan.count as usize] {
            add(t.base);
            add(t.index);
        }
        match plan.special {
            Special::None => {}
            // Each iteration of a rep string moves RSI/RDI/RCX, and the
            // count after does not say how many ran; enter moves RSP and RBP.
            Special::RepString { .. } | Special::Enter { .. } => return AfterRule::NotExact,
            Special::BitTest { offset } => add(offset),
            Special::ByteMask { mask }
            | Special::VectorMask { mask, .. }
            | Special::OpmaskElements { mask, .. }
            | Special::OpmaskPacked { mask, .. }
            | Special::OpmaskBroadcast { mask, .. }
            | Special::OpmaskFull { mask, .. } => add(mask),
            Special::Gather { index, mask, .. } => {
                add(index);
                add(mask);
            }
            Special::Xsave { .. } => {
                add(Register::RAX);
                add(Register::RDX);
            }
            Special::Unmodelled(_) => return AfterRule::NotExact,
        }
        let spi = instr.stack_pointer_increment();
        let string = instr.is_string_instruction();
        // Registers that move by a known amount: RSP for stack instructions,
        // RSI/RDI for string instructions. Each may be written once, by that
        // implicit move; any other write to an input is fatal.
        let (moving, mut implicit_writes): ([Register; 2], [u8; 2]) = if string {
            ([Register::RSI, Register::RDI], [0, 0])
        } else if spi != 0 {
            ([Register::RSP, Register::None], [0, 0])
        } else {
            ([Register::None, Register::None], [0, 0])
        };
        let info = self.factory.info(instr);
        for used in info.used_registers() {
            let writes = matches!(
                used.access(),
                OpAccess::Write
                    | OpAccess::CondWrite
                    | OpAccess::ReadWrite
                    | OpAccess::ReadCondWrite
            );
            let reg = used.register().full_register();
            if !writes || !inputs[..n].contains(&reg) {
                continue;
            }
            match moving.iter().position(|&m| m == reg) {
                Some(i) if implicit_writes[i] == 0 => implicit_writes[i] = 1,
                _ => return AfterRule::NotExact,
            }
        }
        if string {
            match plan.templates[0].size {
                size @ (1 | 2 | 4 | 8) => AfterRule::StringMoved { size: size as u8 },
                _ => AfterRule::NotExact,
            }
        } else if spi != 0 {
            // `pop rsp` and the like also load RSP: iced lists a second write.
            if instr.op0_kind() == OpKind::Register
                && instr.op0_register().full_register() == Register::RSP
                && instr.mnemonic() == Mnemonic::Pop
            {
                return AfterRule::NotExact;
            }
            AfterRule::StackMoved(spi)
        } else {
            AfterRule::Same
        }
    }
}

/// Instructions with memory operands the model does not handle.
fn is_unsupported(instr: &Instruction) -> bool {
    // Far transfers load CS and read or push far pointers; `push fs` and
    // friends write 2 or 8 bytes depending on the processor.
    if instr.is_call_far()
        || instr.is_call_far_indirect()
        || instr.is_jmp_far()
        || instr.is_jmp_far_indirect()
    {
        return true;
    }
    let mnemonic = instr.mnemonic();
    if matches!(mnemonic, Mnemonic::Push | Mnemonic::Pop)
        && instr.op0_kind() == OpKind::Register
        && instr.op0_register().is_segment_register()
    {
        return true;
    }
    matches!(
        mnemonic,
        Mnemonic::Retf
            | Mnemonic::Iret
            | Mnemonic::Iretd
            | Mnemonic::Iretq
            // xsaveopt skips components not modified since the last xrstor
            // from the same address: not visible from a signal handler.
            | Mnemonic::Xsaveopt
            | Mnemonic::Xsaveopt64
            // Supervisor-only state (IA32_XSS is not readable in user mode).
            | Mnemonic::Xsaves
            | Mnemonic::Xsaves64
            | Mnemonic::Xrstors
            | Mnemonic::Xrstors64
            // Cache-line operations the simulator has no kind for, or whose
            // address is implicit and line-aligned.
            | Mnemonic::Clzero
            | Mnemonic::Cldemote
            | Mnemonic::Monitor
            | Mnemonic::Monitorx
            | Mnemonic::Umonitor
            // Code prefetches (instruction side).
            | Mnemonic::Prefetchit0
            | Mnemonic::Prefetchit1
            // Device stores and AMX tiles (strided rows).
            | Mnemonic::Enqcmd
            | Mnemonic::Enqcmds
            | Mnemonic::Tileloadd
            | Mnemonic::Tileloaddt1
            | Mnemonic::Tilestored
            // Xeon Phi gather/scatter prefetches.
            | Mnemonic::Vgatherpf0dpd
            | Mnemonic::Vgatherpf0dps
            | Mnemonic::Vgatherpf0qpd
            | Mnemonic::Vgatherpf0qps
            | Mnemonic::Vgatherpf1dpd
            | Mnemonic::Vgatherpf1dps
            | Mnemonic::Vgatherpf1qpd
            | Mnemonic::Vgatherpf1qps
            | Mnemonic::Vscatterpf0dpd
            | Mnemonic::Vscatterpf0dps
            | Mnemonic::Vscatterpf0qpd
            | Mnemonic::Vscatterpf0qps
            | Mnemonic::Vscatterpf1dpd
            | Mnemonic::Vscatterpf1dps
            | Mnemonic::Vscatterpf1qpd
            | Mnemonic::Vscatterpf1qps
    )
}

/// Instructions whose memory operand is only an address: no data access.
fn is_no_access(mnemonic: Mnemonic) -> bool {
    matches!(
        mnemonic,
        Mnemonic::Lea
            | Mnemonic::Nop
            | Mnemonic::Bndcl
            | Mnemonic::Bndcu
            | Mnemonic::Bndcn
            | Mnemonic::Bndmk
    )
}

/// An explicit `[mem]` operand (not the implicit string or stack ones).
fn has_memory_operand(instr: &Instruction) -> bool {
    (0..instr.op_count()).any(|i| instr.op_kind(i) == OpKind::Memory)
}

/// Kinds of instructions whose explicit operand is taken as it is, because
/// iced lists no used memory for them (prefetches) or lists a read (flushes).
/// The size is the operand's (1 byte for all of these): the simulator acts
/// on the whole line.
fn explicit_operand_kind(mnemonic: Mnemonic) -> Option<AccessKind> {
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
}

/// Stores that bypass the caches (their written operand becomes
/// [`AccessKind::NonTemporalStore`]).
fn is_non_temporal_store(mnemonic: Mnemonic) -> bool {
    matches!(
        mnemonic,
        Mnemonic::Movnti
            | Mnemonic::Movntdq
            | Mnemonic::Movntps
            | Mnemonic::Movntpd
            | Mnemonic::Movntq
            | Mnemonic::Movntss
            | Mnemonic::Movntsd
            | Mnemonic::Vmovntdq
            | Mnemonic::Vmovntps
            | Mnemonic::Vmovntpd
            | Mnemonic::Maskmovq
            | Mnemonic::Maskmovdqu
            | Mnemonic::Vmaskmovdqu
            | Mnemonic::Movdiri
            | Mnemonic::Movdir64b
    )
}

/// AVX-512 compress stores and expand loads.
fn is_compress_expand(mnemonic: Mnemonic) -> bool {
    matches!(
        mnemonic,
        Mnemonic::Vpcompressb
            | Mnemonic::Vpcompressw
            | Mnemonic::Vpcompressd
            | Mnemonic::Vpcompressq
            | Mnemonic::Vcompressps
            | Mnemonic::Vcompresspd
            | Mnemonic::Vpexpandb
            | Mnemonic::Vpexpandw
            | Mnemonic::Vpexpandd
            | Mnemonic::Vpexpandq
            | Mnemonic::Vexpandps
            | Mnemonic::Vexpandpd
    )
}

/// AVX-512 moves whose memory element `i` is accessed exactly when mask bit
/// `i` is set (memory-fault suppression; SDM "masked moves"): the plain
/// vector and scalar moves, and the down-converting stores `vpmov*` to memory.
fn is_masked_move(mnemonic: Mnemonic, instr: &Instruction) -> bool {
    let plain = matches!(
        mnemonic,
        Mnemonic::Vmovups
            | Mnemonic::Vmovaps
            | Mnemonic::Vmovupd
            | Mnemonic::Vmovapd
            | Mnemonic::Vmovdqu8
            | Mnemonic::Vmovdqu16
            | Mnemonic::Vmovdqu32
            | Mnemonic::Vmovdqu64
            | Mnemonic::Vmovdqa32
            | Mnemonic::Vmovdqa64
            | Mnemonic::Vmovss
            | Mnemonic::Vmovsd
            | Mnemonic::Vmovsh
    );
    let down_convert_store = instr.op0_kind() == OpKind::Memory
        && matches!(
            mnemonic,
            Mnemonic::Vpmovdb
                | Mnemonic::Vpmovsdb
                | Mnemonic::Vpmovusdb
                | Mnemonic::Vpmovdw
                | Mnemonic::Vpmovsdw
                | Mnemonic::Vpmovusdw
                | Mnemonic::Vpmovqb
                | Mnemonic::Vpmovsqb
                | Mnemonic::Vpmovusqb
                | Mnemonic::Vpmovqw
                | Mnemonic::Vpmovsqw
                | Mnemonic::Vpmovusqw
                | Mnemonic::Vpmovqd
                | Mnemonic::Vpmovsqd
                | Mnemonic::Vpmovusqd
                | Mnemonic::Vpmovwb
                | Mnemonic::Vpmovswb
                | Mnemonic::Vpmovuswb
        );
    plain || down_convert_store
}

/// EVEX load+op instructions whose memory source is read element by
/// element with memory-fault suppression (Intel SDM Vol. 2, 2.8, exception
/// classes E2 and E4 (and E5 for the widening moves), as opposed to E4NF and
/// the other "NF" classes): with `{k}`, memory element `i` is read only
/// when mask bit `i` is set, like a masked move. Element-wise compares and
/// tests into a mask, arithmetic, logic, min/max, blends, and the
/// zero/sign-extending loads; the memory operand must be a whole vector of
/// the same width as the widest vector operand (or, for the widening
/// moves, its element count equal to the destination's), so that element
/// `i` of memory is lane `i`. Permutes and shuffles (`vperm*`, `vpshufb`,
/// E4NF) read every element and stay [`Unmodelled::PartialMask`]
/// (`tests/data/fault-suppression.c` measures both kinds).
fn is_elementwise_load_op(mnemonic: Mnemonic, instr: &Instruction, mem_size: u32) -> bool {
    use Mnemonic::*;
    if instr.encoding() != iced_x86::EncodingKind::EVEX || instr.is_broadcast() {
        return false;
    }
    let widest = (0..instr.op_count())
        .filter(|&i| instr.op_kind(i) == OpKind::Register)
        .map(|i| instr.op_register(i))
        .filter(|r| r.is_vector_register())
        .map(|r| r.size() as u32)
        .max()
        .unwrap_or(0);
    let widening = matches!(
        mnemonic,
        Vpmovzxbw
            | Vpmovzxbd
            | Vpmovzxbq
            | Vpmovzxwd
            | Vpmovzxwq
            | Vpmovzxdq
            | Vpmovsxbw
            | Vpmovsxbd
            | Vpmovsxbq
            | Vpmovsxwd
            | Vpmovsxwq
            | Vpmovsxdq
    );
    if widening {
        // One memory element per destination lane.
        let mem_elem = instr.memory_size().element_size() as u32;
        let dest = instr.op0_register();
        let lane = match mnemonic {
            Vpmovzxbw | Vpmovsxbw => 2,
            Vpmovzxbd | Vpmovzxwd | Vpmovsxbd | Vpmovsxwd => 4,
            _ => 8,
        };
        return instr.op0_kind() == OpKind::Register
            && dest.is_vector_register()
            && mem_elem != 0
            && mem_size / mem_elem == dest.size() as u32 / lane;
    }
    let elementwise = matches!(
        mnemonic,
        // Compares and tests into a mask register (E4; vcmpps/pd E2).
        Vpcmpb
            | Vpcmpub
            | Vpcmpw
            | Vpcmpuw
            | Vpcmpd
            | Vpcmpud
            | Vpcmpq
            | Vpcmpuq
            | Vpcmpeqb
            | Vpcmpeqw
            | Vpcmpeqd
            | Vpcmpeqq
            | Vpcmpgtb
            | Vpcmpgtw
            | Vpcmpgtd
            | Vpcmpgtq
            | Vptestmb
            | Vptestmw
            | Vptestmd
            | Vptestmq
            | Vptestnmb
            | Vptestnmw
            | Vptestnmd
            | Vptestnmq
            | Vcmpps
            | Vcmppd
            // Integer element-wise arithmetic, logic, min/max, blends (E4).
            | Vpaddb
            | Vpaddw
            | Vpaddd
            | Vpaddq
            | Vpaddsb
            | Vpaddsw
            | Vpaddusb
            | Vpaddusw
            | Vpsubb
            | Vpsubw
            | Vpsubd
            | Vpsubq
            | Vpsubsb
            | Vpsubsw
            | Vpsubusb
            | Vpsubusw
            | Vpminub
            | Vpminuw
            | Vpminud
            | Vpminuq
            | Vpminsb
            | Vpminsw
            | Vpminsd
            | Vpminsq
            | Vpmaxub
            | Vpmaxuw
            | Vpmaxud
            | Vpmaxuq
            | Vpmaxsb
            | Vpmaxsw
            | Vpmaxsd
            | Vpmaxsq
            | Vpavgb
            | Vpavgw
            | Vpabsb
            | Vpabsw
            | Vpabsd
            | Vpabsq
            | Vpandd
            | Vpandq
            | Vpandnd
            | Vpandnq
            | Vpord
            | Vporq
            | Vpxord
            | Vpxorq
            | Vpternlogd
            | Vpternlogq
            | Vpmulld
            | Vpmullq
            | Vpmullw
            | Vpblendmb
            | Vpblendmw
            | Vpblendmd
            | Vpblendmq
            // FP element-wise arithmetic (E2).
            | Vaddps
            | Vaddpd
            | Vsubps
            | Vsubpd
            | Vmulps
            | Vmulpd
            | Vdivps
            | Vdivpd
            | Vminps
            | Vminpd
            | Vmaxps
            | Vmaxpd
            | Vsqrtps
            | Vsqrtpd
            | Vblendmps
            | Vblendmpd
    );
    elementwise && widest != 0 && mem_size == widest
}

/// The template of an instruction's explicit `[mem]` operand.
fn explicit_template(instr: &Instruction, kind: AccessKind) -> Template {
    let base = instr.memory_base();
    let index = instr.memory_index();
    let (base, addr32) = match base {
        // Decoded with the real IP: the displacement is the absolute target.
        Register::RIP => (Register::None, false),
        Register::EIP => (Register::None, true),
        _ => (base, base.is_gpr32() || index.is_gpr32()),
    };
    Template {
        disp: if addr32 {
            u64::from(instr.memory_displacement32())
        } else {
            instr.memory_displacement64()
        },
        size: (instr.memory_size().size() as u32).max(1),
        seg: instr.memory_segment(),
        base,
        index,
        scale: instr.memory_index_scale() as u8,
        kind,
        addr32,
    }
}

impl Plan {
    /// True when the instruction makes no data access in any state.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0 && self.special == Special::None
    }

    /// Why the instruction is not modelled, when it is not (the same for
    /// every execution).
    pub fn unmodelled(&self) -> Option<Unmodelled> {
        match self.special {
            Special::Unmodelled(why) => Some(why),
            _ => None,
        }
    }

    /// The registers [`Plan::eval`] reads, when the translator can record
    /// them: the general registers of its addresses (with the FS/GS bases),
    /// and for masked and gather forms their opmask and up to two vector
    /// registers (mask and index). `None` when evaluation also needs
    /// flags, MMX registers or memory (`maskmovq`, `xsave` forms), or more
    /// registers than [`Inputs`] holds: only a trapped context has those.
    /// A `rep` string's inputs are those of one iteration, its count
    /// register first. General registers are given as full registers;
    /// vector registers as the plan names them (their width is what is
    /// recorded).
    pub fn inputs(&self) -> Option<Inputs> {
        let mut inputs = Inputs::NONE;
        let mut n = 0;
        let mut add = |r: Register| {
            if r == Register::None || r == Register::RIP || r == Register::EIP {
                return true;
            }
            let regs = &mut inputs.gprs;
            let full = r.full_register();
            if regs[..n].contains(&full) {
                return true;
            }
            if n == regs.len() || !full.is_gpr64() {
                return false;
            }
            regs[n] = full;
            n += 1;
            true
        };
        let mut opmask = Register::None;
        let mut vectors = [Register::None; 2];
        match self.special {
            Special::None => {}
            Special::Unmodelled(_) => return Some(Inputs::NONE),
            Special::BitTest { offset } => {
                if !add(offset) {
                    return None;
                }
            }
            Special::Enter { .. } => {
                add(Register::RSP);
                add(Register::RBP);
                return Some(inputs);
            }
            // One iteration: the count register (no access when it is 0)
            // and the string registers of the templates.
            Special::RepString { count } => {
                if !add(count) {
                    return None;
                }
            }
            Special::ByteMask { mask } | Special::VectorMask { mask, .. } => {
                if !mask.is_vector_register() {
                    return None;
                }
                vectors[0] = mask;
            }
            Special::OpmaskElements { mask, .. }
            | Special::OpmaskPacked { mask, .. }
            | Special::OpmaskBroadcast { mask, .. }
            | Special::OpmaskFull { mask, .. } => opmask = mask,
            Special::Gather { index, mask, .. } => {
                vectors[0] = index;
                if mask.is_k() {
                    opmask = mask;
                } else {
                    vectors[1] = mask;
                }
            }
            Special::Xsave { .. } => return None,
        }
        for t in &self.templates[..self.count as usize] {
            if !add(t.base) || !add(t.index) {
                return None;
            }
        }
        inputs.opmask = opmask;
        inputs.vectors = vectors;
        Some(inputs)
    }

    /// True when [`Plan::eval_after`] can give this instruction's accesses
    /// from the state after it ran.
    pub fn is_exact_after(&self) -> bool {
        self.after != AfterRule::NotExact
    }

    /// Computes the accesses of one execution of `instr` from the machine
    /// state before it runs, appending them to `out` (reads, then
    /// read-modify-writes, then writes). On error `out` is left as it was.
    ///
    /// A plan with no access at all (most instructions: register
    /// arithmetic, branches) or with one plain memory operand is answered
    /// here, inlined into the caller.
    #[inline(always)]
    pub fn eval<M: Machine + ?Sized>(
        &self,
        instr: &Instruction,
        machine: &M,
        out: &mut AccessList,
    ) -> Result<(), Unmodelled> {
        if self.special == Special::None {
            match self.count {
                0 => return Ok(()),
                1 => {
                    let t = &self.templates[0];
                    return out.push(MemAccess {
                        kind: t.kind,
                        addr: address(t, machine, 0),
                        size: t.size,
                    });
                }
                _ => {}
            }
        }
        self.eval_accesses(instr, machine, out)
    }

    /// The plan in its compact form ([`Quick`]) when it is one of the two
    /// cases [`Plan::eval`] answers inline (no special form, at most one
    /// memory operand); `None` otherwise.
    pub fn quick(&self) -> Option<Quick> {
        (self.special == Special::None && self.count <= 1).then_some(Quick {
            one: self.count == 1,
            t: self.templates[0],
        })
    }

    /// [`Plan::eval`] of a plan with templates or a special form.
    fn eval_accesses<M: Machine + ?Sized>(
        &self,
        instr: &Instruction,
        machine: &M,
        out: &mut AccessList,
    ) -> Result<(), Unmodelled> {
        let start = out.len;
        match self.eval_inner(instr, machine, out) {
            Ok(()) => {
                // One access is already in order.
                if out.len - start.min(out.len) > 1 {
                    out.sort_from(start);
                }
                Ok(())
            }
            Err(why) => {
                out.truncate(start);
                Err(why)
            }
        }
    }

    /// Computes the accesses of the instruction right after `syscall`, which
    /// runs without a trap, from the state *after* it ran. Exact when the
    /// instruction writes none of the registers its addresses depend on, or
    /// only moves RSP (stack instructions) or RSI/RDI by one element (string
    /// instructions without `rep`), which is taken back; otherwise
    /// [`Unmodelled::NotExactAfter`] (or the instruction's own reason when it
    /// is not modelled at all).
    pub fn eval_after<M: Machine + ?Sized>(
        &self,
        instr: &Instruction,
        machine_after: &M,
        out: &mut AccessList,
    ) -> Result<(), Unmodelled> {
        if let Special::Unmodelled(why) = self.special {
            return Err(why);
        }
        match self.after {
            AfterRule::NotExact => Err(Unmodelled::NotExactAfter),
            AfterRule::Same => self.eval(instr, machine_after, out),
            AfterRule::StackMoved(spi) => {
                let before = Rewound {
                    inner: machine_after,
                    regs: [Register::RSP, Register::None],
                    moved: [spi as i64 as u64, 0],
                };
                self.eval(instr, &before, out)
            }
            AfterRule::StringMoved { size } => {
                let step = if machine_after.rflags() & DF != 0 {
                    (u64::from(size)).wrapping_neg()
                } else {
                    u64::from(size)
                };
                let before = Rewound {
                    inner: machine_after,
                    regs: [Register::RSI, Register::RDI],
                    moved: [step, step],
                };
                self.eval(instr, &before, out)
            }
        }
    }

    fn eval_inner<M: Machine + ?Sized>(
        &self,
        _instr: &Instruction,
        m: &M,
        out: &mut AccessList,
    ) -> Result<(), Unmodelled> {
        let templates = &self.templates[..self.count as usize];
        match self.special {
            Special::None => {}
            Special::Unmodelled(why) => return Err(why),
            Special::RepString { count } => {
                if m.gpr(count) == 0 {
                    return Ok(());
                }
            }
            Special::BitTest { offset } => {
                let t = &templates[0];
                let bits = u64::from(t.size) * 8;
                let raw = m.gpr(offset);
                let signed: i64 = match t.size {
                    2 => raw as u16 as i16 as i64,
                    4 => raw as u32 as i32 as i64,
                    8 => raw as i64,
                    _ => return Err(Unmodelled::Unsupported),
                };
                // Floor division by the operand's bit count, times its bytes.
                let delta = (signed >> bits.trailing_zeros()).wrapping_mul(i64::from(t.size));
                let addr = address(t, m, delta as u64);
                return out.push(MemAccess {
                    kind: t.kind,
                    addr,
                    size: t.size,
                });
            }
            Special::Enter { level } => return enter(level, m, out),
            Special::ByteMask { mask } => {
                let t = &templates[0];
                let bits = if mask.is_vector_register() {
                    let v = m.vector(mask).ok_or(Unmodelled::MissingRegister)?;
                    let mut bits = 0u64;
                    for (i, b) in v.iter().take(t.size as usize).enumerate() {
                        bits |= u64::from(b >> 7) << i;
                    }
                    bits
                } else {
                    let v = m.mmx(mask).ok_or(Unmodelled::MissingRegister)?;
                    let mut bits = 0u64;
                    for i in 0..8 {
                        bits |= ((v >> (i * 8 + 7)) & 1) << i;
                    }
                    bits
                };
                return runs(address(t, m, 0), 1, t.size, bits, t.kind, out);
            }
            Special::VectorMask { mask, elem } => {
                let t = &templates[0];
                let bits = sign_bits(&m.vector(mask).ok_or(Unmodelled::MissingRegister)?, elem);
                let elem = u32::from(elem);
                return runs(address(t, m, 0), elem, t.size / elem, bits, t.kind, out);
            }
            Special::OpmaskElements { mask, elem } => {
                let t = &templates[0];
                let bits = m.opmask(mask).ok_or(Unmodelled::MissingRegister)?;
                let elem = u32::from(elem);
                return runs(address(t, m, 0), elem, t.size / elem, bits, t.kind, out);
            }
            Special::OpmaskPacked { mask, elem, lanes } => {
                let t = &templates[0];
                let bits = m.opmask(mask).ok_or(Unmodelled::MissingRegister)?;
                let n = (bits & lane_mask(u32::from(lanes))).count_ones();
                if n == 0 {
                    return Ok(());
                }
                return out.push(MemAccess {
                    kind: t.kind,
                    addr: address(t, m, 0),
                    size: n * u32::from(elem),
                });
            }
            Special::OpmaskBroadcast { mask, lanes } => {
                let t = &templates[0];
                let bits = m.opmask(mask).ok_or(Unmodelled::MissingRegister)?;
                if bits & lane_mask(u32::from(lanes)) == 0 {
                    // Whether a fully masked broadcast still reads depends on
                    // the instruction's fault-suppression class.
                    return Err(Unmodelled::PartialMask);
                }
                return out.push(MemAccess {
                    kind: t.kind,
                    addr: address(t, m, 0),
                    size: t.size,
                });
            }
            Special::OpmaskFull { mask, elem } => {
                let t = &templates[0];
                let bits = m.opmask(mask).ok_or(Unmodelled::MissingRegister)?;
                let lanes = lane_mask(t.size / u32::from(elem));
                if bits & lanes != lanes {
                    return Err(Unmodelled::PartialMask);
                }
            }
            Special::Gather {
                index,
                mask,
                index_bytes,
                elem,
                count,
            } => {
                let t = &templates[0];
                let indices = m.vector(index).ok_or(Unmodelled::MissingRegister)?;
                let bits = if mask.is_k() {
                    m.opmask(mask).ok_or(Unmodelled::MissingRegister)?
                } else {
                    sign_bits(&m.vector(mask).ok_or(Unmodelled::MissingRegister)?, elem)
                };
                for i in 0..usize::from(count) {
                    if bits & (1 << i) == 0 {
                        continue;
                    }
                    let width = usize::from(index_bytes);
                    let Some(bytes) = indices.get(i * width..(i + 1) * width) else {
                        return Err(Unmodelled::Unsupported);
                    };
                    let mut b = [0u8; 8];
                    b[..width].copy_from_slice(bytes);
                    let idx: i64 = if width == 8 {
                        i64::from_le_bytes(b)
                    } else {
                        // 32-bit indices are sign-extended.
                        i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    };
                    let delta = (idx as u64).wrapping_mul(u64::from(t.scale));
                    out.push(MemAccess {
                        kind: t.kind,
                        addr: address(t, m, delta),
                        size: u32::from(elem),
                    })?;
                }
                return Ok(());
            }
            Special::Xsave { form, layout } => {
                return xsave(form, &layout, &templates[0], m, out);
            }
        }
        for t in templates {
            out.push(MemAccess {
                kind: t.kind,
                addr: address(t, m, 0),
                size: t.size,
            })?;
        }
        Ok(())
    }
}

/// The linear address of a template, with `extra` added to the effective
/// address (bit-test offsets, gather indices) before it wraps to the address
/// size and the FS/GS base is added.
#[inline(always)]
fn address<M: Machine + ?Sized>(t: &Template, m: &M, extra: u64) -> u64 {
    let mut ea = t.disp.wrapping_add(extra);
    if t.base != Register::None {
        ea = ea.wrapping_add(m.gpr(t.base));
    }
    if t.index != Register::None {
        ea = ea.wrapping_add(m.gpr(t.index).wrapping_mul(u64::from(t.scale)));
    }
    if t.addr32 {
        ea &= 0xFFFF_FFFF;
    }
    match t.seg {
        // In 64-bit mode only FS and GS have a base.
        Register::FS | Register::GS => ea.wrapping_add(m.segment_base(t.seg)),
        _ => ea,
    }
}

/// RFLAGS.DF, the direction flag.
const DF: u64 = 1 << 10;

/// The state before an instruction, rebuilt from the state after it: the
/// given full registers moved by the given amounts (wrapping), which are
/// taken back.
struct Rewound<'a, M: Machine + ?Sized> {
    inner: &'a M,
    regs: [Register; 2],
    moved: [u64; 2],
}

impl<M: Machine + ?Sized> Machine for Rewound<'_, M> {
    fn gpr(&self, reg: Register) -> u64 {
        let full = reg.full_register();
        for (r, moved) in self.regs.iter().zip(self.moved) {
            if *r == full && full != Register::None {
                let value = self.inner.gpr(full).wrapping_sub(moved);
                return if reg.is_gpr32() {
                    value & 0xFFFF_FFFF
                } else if reg.is_gpr16() {
                    value & 0xFFFF
                } else if reg.is_gpr8() {
                    value & 0xFF
                } else {
                    value
                };
            }
        }
        self.inner.gpr(reg)
    }
    fn rflags(&self) -> u64 {
        self.inner.rflags()
    }
    fn segment_base(&self, seg: Register) -> u64 {
        self.inner.segment_base(seg)
    }
    fn vector(&self, reg: Register) -> Option<[u8; 64]> {
        self.inner.vector(reg)
    }
    fn opmask(&self, reg: Register) -> Option<u64> {
        self.inner.opmask(reg)
    }
    fn mmx(&self, reg: Register) -> Option<u64> {
        self.inner.mmx(reg)
    }
    fn read_u64(&self, addr: u64) -> Option<u64> {
        self.inner.read_u64(addr)
    }
    fn xinuse(&self) -> Option<u64> {
        self.inner.xinuse()
    }
}

/// A mask with the low `lanes` bits set.
#[inline]
fn lane_mask(lanes: u32) -> u64 {
    if lanes >= 64 {
        u64::MAX
    } else {
        (1u64 << lanes) - 1
    }
}

/// The sign bits of a vector register's `elem`-byte elements, element `i`
/// in bit `i`.
fn sign_bits(v: &[u8; 64], elem: u8) -> u64 {
    let elem = usize::from(elem.max(1));
    let mut bits = 0u64;
    for i in 0..64 / elem {
        bits |= u64::from(v[i * elem + elem - 1] >> 7) << i;
    }
    bits
}

/// Accesses for the enabled elements of a contiguous operand: each run of
/// consecutive enabled elements becomes one access.
fn runs(
    base: u64,
    elem: u32,
    count: u32,
    bits: u64,
    kind: AccessKind,
    out: &mut AccessList,
) -> Result<(), Unmodelled> {
    let mut i = 0;
    while i < count.min(64) {
        if bits & (1 << i) == 0 {
            i += 1;
            continue;
        }
        let first = i;
        while i < count.min(64) && bits & (1 << i) != 0 {
            i += 1;
        }
        out.push(MemAccess {
            kind,
            addr: base.wrapping_add(u64::from(first * elem)),
            size: (i - first) * elem,
        })?;
    }
    Ok(())
}

/// `enter imm16, level` (64-bit operand size, level 1 to 31): push RBP, copy
/// `level - 1` frame pointers from `[RBP - 8i]` to the new frame, push the
/// new frame pointer (SDM, ENTER).
fn enter<M: Machine + ?Sized>(level: u8, m: &M, out: &mut AccessList) -> Result<(), Unmodelled> {
    let rsp = m.gpr(Register::RSP);
    let rbp = m.gpr(Register::RBP);
    let push = |k: u64| MemAccess {
        kind: AccessKind::Write,
        addr: rsp.wrapping_sub(8 * k),
        size: 8,
    };
    out.push(push(1))?;
    for i in 1..u64::from(level) {
        out.push(MemAccess {
            kind: AccessKind::Read,
            addr: rbp.wrapping_sub(8 * i),
            size: 8,
        })?;
        out.push(push(i + 1))?;
    }
    out.push(push(u64::from(level) + 1))
}

/// Bytes of an FXSAVE area that hold state (x87, MXCSR, XMM0-15).
const FXSAVE_STATE_SIZE: u32 = 416;

/// Legacy-region pieces of the XSAVE area: x87 state (component 0) is bytes
/// 0..24 and 32..160, MXCSR and MXCSR_MASK bytes 24..32 (saved with
/// component 1 or 2), the 16 XMM registers (component 1) bytes 160..416.
const X87_SPANS: [(u64, u32); 2] = [(0, 24), (32, 128)];
const MXCSR_SPAN: (u64, u32) = (24, 8);
const XMM_SPAN: (u64, u32) = (160, 256);
/// The XSAVE header: XSTATE_BV at 512, XCOMP_BV at 520, 64 bytes in all.
const HEADER: u64 = 512;
const HEADER_SIZE: u32 = 64;

/// The `xsave`-family accesses; see `docs/access-model.md`.
fn xsave<M: Machine + ?Sized>(
    form: XsaveForm,
    layout: &XsaveLayout,
    t: &Template,
    m: &M,
    out: &mut AccessList,
) -> Result<(), Unmodelled> {
    let base = address(t, m, 0);
    let requested = (m.gpr(Register::EDX) << 32) | m.gpr(Register::EAX);
    let rfbm = requested & layout.xcr0;
    if rfbm >> XSAVE_COMPONENTS != 0 {
        return Err(Unmodelled::UnknownXsaveLayout);
    }
    let at = |kind: AccessKind, (off, size): (u64, u32)| MemAccess {
        kind,
        addr: base.wrapping_add(off),
        size,
    };
    let (kind, saved, compacted) = match form {
        XsaveForm::Standard => (AccessKind::Write, rfbm, false),
        XsaveForm::Compacted => {
            let xinuse = m.xinuse().ok_or(Unmodelled::MissingRegister)?;
            (AccessKind::Write, rfbm & xinuse, true)
        }
        XsaveForm::Restore => {
            let xstate_bv = m
                .read_u64(base.wrapping_add(HEADER))
                .ok_or(Unmodelled::NeedsMemory)?;
            let xcomp_bv = m
                .read_u64(base.wrapping_add(HEADER + 8))
                .ok_or(Unmodelled::NeedsMemory)?;
            let compacted = xcomp_bv >> 63 != 0;
            if compacted && (xcomp_bv & !(1 << 63)) >> XSAVE_COMPONENTS != 0 {
                return Err(Unmodelled::UnknownXsaveLayout);
            }
            // The header is read first, whole.
            out.push(at(AccessKind::Read, (HEADER, HEADER_SIZE)))?;
            // Components whose XSTATE_BV bit is clear are initialised, not
            // read.
            (AccessKind::Read, rfbm & xstate_bv, compacted)
        }
    };
    if saved & 1 != 0 {
        for span in X87_SPANS {
            out.push(at(kind, span))?;
        }
    }
    // MXCSR: the standard format saves and restores it whenever SSE or AVX
    // state is requested; the compacted format only with SSE state.
    let mxcsr = if compacted {
        saved & 2 != 0
    } else {
        rfbm & 6 != 0
    };
    if mxcsr {
        out.push(at(kind, MXCSR_SPAN))?;
    }
    if saved & 2 != 0 {
        out.push(at(kind, XMM_SPAN))?;
    }
    match form {
        // XSAVE writes XSTATE_BV bits of requested components and keeps the
        // others: a read-modify-write of the first 8 header bytes.
        XsaveForm::Standard => out.push(at(AccessKind::ReadModifyWrite, (HEADER, 8)))?,
        // XSAVEC writes XSTATE_BV and XCOMP_BV (16 bytes; measured: the
        // rest of the header is left as it was).
        XsaveForm::Compacted => out.push(at(AccessKind::Write, (HEADER, 16)))?,
        XsaveForm::Restore => {}
    }
    // Components 2 and up: the standard format puts each at its CPUID
    // offset; the compacted format packs the components of XCOMP_BV (RFBM
    // for xsavec) in order from byte 576, 64-byte aligned where CPUID says.
    let layout_bits = match form {
        XsaveForm::Compacted => rfbm,
        XsaveForm::Restore if compacted => {
            let xcomp_bv = m
                .read_u64(base.wrapping_add(HEADER + 8))
                .ok_or(Unmodelled::NeedsMemory)?;
            xcomp_bv & !(1 << 63)
        }
        _ => 0,
    };
    let mut next = HEADER + u64::from(HEADER_SIZE);
    for i in 2..XSAVE_COMPONENTS {
        let bit = 1u64 << i;
        let size = u32::from(layout.size[i]);
        let offset = if compacted {
            if layout_bits & bit == 0 {
                continue;
            }
            if size == 0 {
                // A component XCR0 does not enable: its place is unknown
                // (and the processor would fault).
                return Err(Unmodelled::UnknownXsaveLayout);
            }
            if layout.align64 & (1 << i) != 0 {
                next = (next + 63) & !63;
            }
            let here = next;
            next += u64::from(size);
            here
        } else {
            u64::from(layout.offset[i])
        };
        if saved & bit == 0 {
            continue;
        }
        if size == 0 {
            return Err(Unmodelled::UnknownXsaveLayout);
        }
        out.push(at(kind, (offset, size)))?;
    }
    Ok(())
}
