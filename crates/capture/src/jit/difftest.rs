//! The translator's differential test: every instruction form of a corpus
//! runs natively and translated, from the same state, and must end in the
//! same state; the registers the translated block recorded must give,
//! through [`Plan::eval`](crate::model::Plan::eval), the accesses the model
//! gives on the live state before the instruction, and so must a plain
//! operand's address read from the record's words
//! ([`Quick::recorded`](crate::model::Quick::recorded), as the replay's
//! steady loop reads it).
//!
//! # The corpus
//! `tests/data/varied.txt` (the model's corpus), every instruction of
//! `tests/model.rs` (its `&[0x..]` byte arrays that decode as exactly one
//! instruction) and `tests/data/difftest.txt` (forms added for this test:
//! ALU with memory operands, push/pop, calls and returns, SSE/AVX loads and
//! stores, cmov/setcc, xchg/cmpxchg/lock, bt* with memory, string moves of
//! every width, RIP- and stack-relative forms, flag readers, x87 stores),
//! deduplicated by bytes. Each form is placed at the start of a page `P`
//! mapped below 4 GiB (so `addr32` forms reach the buffer), followed by a
//! `jmp` to a landing stub `S0`; a direct branch is re-encoded to reach
//! stub `S1`, a RIP-relative operand to point into the buffer.
//!
//! # One form
//! 1. The real [`Translator`] translates the block at `P` into a real
//!    [`CodeCache`] (mapped near `P`). When it refuses the form, the form is
//!    listed as refused and checked against what `translate.rs`'s header
//!    says it refuses ([`header_refuses`], written from the header's words,
//!    not from the code). Forms it accepts but this machine cannot run
//!    (CPUID features it lacks, privileged or I/O instructions, segment
//!    register loads that would move this thread's TLS, non-deterministic
//!    results) are listed with the reason.
//! 2. For several random states: general registers random, except memory
//!    bases (iced's used-memory list, implicit operands included) pointing
//!    into a 64 KiB patterned buffer, index registers and `bt` offsets
//!    small, RSP in the buffer; the arithmetic flags and DF random;
//!    XMM/YMM (and ZMM, k0-7 where XCR0 enables AVX-512) random through the
//!    XSAVE area; indirect branch targets, return addresses, `popf` images
//!    and valid `fxrstor`/`ldmxcsr` images written where the form reads
//!    them.
//! 3. The state goes through `coldcache_difftest_enter` (a `global_asm!`
//!    trampoline: host callee-saved registers and XSAVE state saved,
//!    `xrstor` of the form's vector state, `popfq`, every general register
//!    loaded, jump) to `P` natively, then again to the translated block.
//!    Every exit lands in `coldcache_difftest_land`, which saves RFLAGS,
//!    the general registers and the XSAVE state back and returns to Rust.
//!    The native stubs store their own address in the thread's `T.next` as
//!    a translated exit does, and the translated run's `T.dispatch` and
//!    `T.dispatch_full` are the landing itself, so both runs say where they
//!    were going the same way.
//! 4. Equal after both runs: the 16 general registers, RFLAGS' arithmetic
//!    bits and DF, MXCSR, the x87 registers and control/status/tag words,
//!    XMM/YMM (ZMM, k) registers (a component XSAVE reports in its initial
//!    configuration reads as its initial values), the buffer's bytes, and
//!    where the code was going (the translated exit `P+len` counts as
//!    `S0`, where the native `jmp` there goes); after a call, the return
//!    address on the stack is the program's own. The translated
//!    record: its header (block number, RSP at entry), its size (the cursor
//!    moved by exactly that much, nothing written past it), each recorded
//!    input (general, opmask and vector registers, read back through the
//!    replay's machine) equal to the register's value before the
//!    instruction, and
//!    [`Plan::eval`](crate::model::Plan::eval) over the record (the same
//!    [`RecordedMachine`](super::RecordedMachine) the replay uses) equal to
//!    `Plan::eval` over the live state.
//!
//! # Runs of forms in one block
//! Random runs of 2 to 6 forms (a branch, call or return only last) are
//! laid out and checked the same way, so records of several instructions, their
//! offsets, the scratch register's choice and the RSP deltas the replay
//! relies on are tested too. Runs are picked so that no form writes a
//! register a later form addresses with (RSP aside, moved by the stack
//! forms by known amounts): each instruction's recorded inputs must then
//! equal the initial registers, with RSP moved by the stack increments
//! (iced's) of the forms before it.
//!
//! # Also here
//! A full buffer: the block's check finds a non-zero word and goes to
//! `T.dispatch_full` with every register, flag, vector and byte as it
//! was. A run of 40 forms: the block stops at its instruction cap and
//! exits to the next form, and going on natively from there ends as the
//! native run does. Selector loads of FS/GS, near branches with an
//! operand-size prefix and RIP-relative operands the code cache cannot
//! reach are refused.
//!
//! # Limits
//! One known difference, not fixed: an x87 environment store (`fnstenv`,
//! `fnsave`, `fxsave`) after an x87 instruction writes that instruction's
//! address as the last instruction pointer (FIP), which in translated code
//! is the copy's address in the code cache (found by this test: `fld
//! qword ptr [rax]; fnsave [rax]` differ in byte 12 of the image). The x87
//! registers are compared without FIP, FDP and FOP, and runs never put such
//! a store after an x87 instruction.
//!
//! AVX-512 state (ZMM, k0-7) is randomised and compared only where XCR0
//! enables it; forms this CPU lacks are listed and not run, so a machine
//! without AVX-512 checks the refusal of `{k}`-masked memory forms (their
//! records need `kmovq`) but runs none of the EVEX ones; the AVX2 forms
//! with vector inputs (gathers, `vmaskmov*`/`vpmaskmov*`, `maskmovdqu`)
//! run on any AVX2 machine, with gather indexes set small, and their
//! recorded vector registers are compared with the live ones. How
//! AVX-512 inputs are stored (`kmovq`, EVEX `vmovdqu64`) and answered from
//! a record is checked without running them
//! (`avx512_inputs_are_stored_with_kmovq_and_vmovdqu64_...`). Forms with results that differ between two runs
//! (`rdtsc`, `rdrand`, `cpuid`) are not run.
//!
//! `COLDCACHE_DIFFTEST_VERBOSE=1` prints each form before it runs (a crash
//! then names it). The runs share process-wide slots (the host stack
//! pointer, the state), so they are serialised by a lock.

use super::cache::CodeCache;
use super::emit::{fs, store_imm32, Asm};
use super::translate::{BlockInstr, Translator, MAX_INSTRUCTIONS, MAX_RECORD};
use super::RecordedMachine;
use crate::model::{AccessList, CpuFacts, Inputs, Machine, Model};
use crate::tls::{self, off};
use iced_x86::{
    CpuidFeature, Decoder, DecoderOptions, Encoder, FlowControl, Formatter, Instruction,
    InstructionInfoFactory, IntelFormatter, MemorySize, Mnemonic, OpAccess, OpKind, Register,
};
use std::cell::UnsafeCell;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// Bytes reserved for an XSAVE area (the dispatcher reserves the same).
const XSAVE_BYTES: usize = 8192;
/// The XSAVE components the trampoline saves and loads: x87, SSE, AVX and
/// the AVX-512 opmask, ZMM_Hi256 and Hi16_ZMM (those XCR0 enables). Not
/// every enabled one: AMX tile data alone would not fit, and the forms
/// touch no other.
const RFBM: u32 = 0b1110_0111;
/// Offset of the XSAVE area in [`State`].
const XOFF: usize = 192;
/// Bytes of the patterned buffer.
const BUF: usize = 64 << 10;
/// Where memory bases point in the buffer (plus a multiple of 64 up to 4 KiB).
const DATA: usize = 0x4000;
/// Where RIP-relative operands point in the buffer.
const RIP_DATA: usize = 0x1000;
/// RSP in the buffer (minus a multiple of 16 up to 64).
const STACK: usize = 0xC000;
/// The arithmetic flags and DF, compared after the runs.
const FLAGS: u64 = 0x8D5 | 0x400;
/// Random states per form.
const TRIALS: u64 = 8;

/// Everything the trampoline loads and the landing saves.
#[repr(C, align(64))]
#[derive(Clone)]
struct State {
    /// General registers in iced's numbering (RAX, RCX, RDX, RBX, RSP, ...).
    regs: [u64; 16],
    rflags: u64,
    _pad: [u64; 7],
    /// XSAVE area (standard format).
    xsave: [u8; XSAVE_BYTES],
}

const _: () = assert!(core::mem::offset_of!(State, rflags) == 128);
const _: () = assert!(core::mem::offset_of!(State, xsave) == XOFF);

/// A process-wide word the trampoline reads and writes.
#[repr(C, align(64))]
struct Slot<T>(UnsafeCell<T>);
// SAFETY: only the trampoline touches these, with `RUN` held.
unsafe impl<T> Sync for Slot<T> {}

// Test-only statics: this file is compiled for the tests alone, so they
// stay here (`tests/statics.rs` exempts it).

/// The test's stack pointer. Written by the trampoline (a test thread,
/// [`RUN`] held).
static HOST_RSP: Slot<u64> = Slot(UnsafeCell::new(0));
/// The program's stack pointer. Written by the trampoline (a test thread,
/// [`RUN`] held).
static PROG_RSP: Slot<u64> = Slot(UnsafeCell::new(0));
/// The run's `State`. Written by the trampoline (a test thread, [`RUN`]
/// held).
static STATE_PTR: Slot<u64> = Slot(UnsafeCell::new(0));
/// The code the trampoline enters. Written by the trampoline (a test
/// thread, [`RUN`] held).
static ENTRY: Slot<u64> = Slot(UnsafeCell::new(0));
/// The test's XSAVE area. Written by the trampoline (a test thread,
/// [`RUN`] held).
static HOST_XSAVE: Slot<[u8; XSAVE_BYTES]> = Slot(UnsafeCell::new([0; XSAVE_BYTES]));
/// Serialises runs (the slots above are shared). Written (locked) by each
/// test thread that runs the trampoline.
static RUN: Mutex<()> = Mutex::new(());

core::arch::global_asm!(
    ".pushsection .text.coldcache_difftest,\"ax\",@progbits",
    ".balign 16",
    ".globl coldcache_difftest_enter",
    "coldcache_difftest_enter:",
    "push rbx",
    "push rbp",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "mov [rip + {host_rsp}], rsp",
    "mov [rip + {state}], rdi",
    "mov [rip + {entry}], rsi",
    "mov eax, {rfbm}",
    "xor edx, edx",
    "xsave64 [rip + {host_xsave}]",
    "mov eax, {rfbm}",
    "xor edx, edx",
    "xrstor64 [rdi + {xoff}]",
    "push qword ptr [rdi + 128]",
    "popfq",
    "mov rsp, rdi",
    "pop rax",
    "pop rcx",
    "pop rdx",
    "pop rbx",
    "lea rsp, [rsp + 8]",
    "pop rbp",
    "pop rsi",
    "pop rdi",
    "pop r8",
    "pop r9",
    "pop r10",
    "pop r11",
    "pop r12",
    "pop r13",
    "pop r14",
    "pop r15",
    "mov rsp, [rsp - 96]",
    "jmp qword ptr [rip + {entry}]",
    ".balign 16",
    ".globl coldcache_difftest_land",
    "coldcache_difftest_land:",
    "mov [rip + {prog_rsp}], rsp",
    "mov rsp, [rip + {state}]",
    "lea rsp, [rsp + 136]",
    "pushfq",
    "push r15",
    "push r14",
    "push r13",
    "push r12",
    "push r11",
    "push r10",
    "push r9",
    "push r8",
    "push rdi",
    "push rsi",
    "push rbp",
    "push qword ptr [rip + {prog_rsp}]",
    "push rbx",
    "push rdx",
    "push rcx",
    "push rax",
    "mov rbx, rsp",
    "mov eax, {rfbm}",
    "xor edx, edx",
    "xsave64 [rbx + {xoff}]",
    "xrstor64 [rip + {host_xsave}]",
    "cld",
    "mov rsp, [rip + {host_rsp}]",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbp",
    "pop rbx",
    "ret",
    ".popsection",
    host_rsp = sym HOST_RSP,
    prog_rsp = sym PROG_RSP,
    state = sym STATE_PTR,
    entry = sym ENTRY,
    host_xsave = sym HOST_XSAVE,
    xoff = const XOFF,
    rfbm = const RFBM,
);

extern "C" {
    /// Loads `state`, jumps to `entry`; returns when the code reaches
    /// `coldcache_difftest_land`, with `state` holding what it left.
    fn coldcache_difftest_enter(state: *mut State, entry: u64);
    /// Where every run ends (never called from Rust).
    fn coldcache_difftest_land();
}

/// Runs `entry` from `state` until it lands; `state` then holds the result.
fn run(state: &mut State, entry: u64) {
    let _g = RUN.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: `entry` is code this test wrote (a form followed by a jump to
    // a landing stub, or its translation, whose exits go to the landing
    // through T.dispatch); every memory operand it uses points into the
    // test's buffer or code page; the trampoline restores the host's
    // callee-saved registers, stack and XSAVE state before returning.
    unsafe { coldcache_difftest_enter(state, entry) }
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The test's memory: one code page and the buffer, below 4 GiB.
struct Region {
    base: u64,
}

const REGION: usize = 0x20000;

impl Region {
    fn new() -> Region {
        Region::with_flags(libc::MAP_32BIT)
    }
    /// Where the kernel likes (high up, with room on both sides).
    fn anywhere() -> Region {
        Region::with_flags(0)
    }
    fn with_flags(flags: i32) -> Region {
        // SAFETY: a fresh private anonymous mapping.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                REGION,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap of the test region");
        Region { base: p as u64 }
    }
    fn code(&self) -> u64 {
        self.base
    }
    fn buf(&self) -> u64 {
        self.base + 0x10000
    }
    fn buf_mut(&mut self) -> &mut [u8] {
        // SAFETY: the buffer is the second half of our mapping, read-write.
        unsafe { core::slice::from_raw_parts_mut(self.buf() as *mut u8, BUF) }
    }
    /// Writes the code page (made writable, then executable again).
    fn set_code(&mut self, bytes: &[u8]) {
        let p = self.code() as *mut libc::c_void;
        // SAFETY: the first page of our mapping.
        unsafe {
            assert_eq!(
                libc::mprotect(p, 4096, libc::PROT_READ | libc::PROT_WRITE),
                0
            );
            core::ptr::write_bytes(p as *mut u8, 0xCC, 4096);
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), p as *mut u8, bytes.len());
            assert_eq!(
                libc::mprotect(p, 4096, libc::PROT_READ | libc::PROT_EXEC),
                0
            );
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.base as *mut libc::c_void, REGION) };
    }
}

/// The machine this test runs on.
struct Host {
    facts: CpuFacts,
    tls: i32,
    land: u64,
    /// An XSAVE image of a quiet state (the base of every form's state).
    xsave: Box<State>,
}

impl Host {
    fn new() -> Host {
        let facts = crate::machine::cpu_facts();
        assert!(facts.xsave.is_known(), "the test needs XSAVE");
        let l = facts.xsave;
        for c in 2..8 {
            if RFBM & (1 << c) != 0 && l.xcr0 & (1 << c) != 0 {
                let end = usize::from(l.offset[c]) + usize::from(l.size[c]);
                assert!(end <= XSAVE_BYTES, "XSAVE component {c} ends at {end}");
            }
        }
        let mut xsave = Box::new(State {
            regs: [0; 16],
            rflags: 0,
            _pad: [0; 7],
            xsave: [0; XSAVE_BYTES],
        });
        // SAFETY: XSAVE of the RFBM components into a 64-byte aligned area
        // of XSAVE_BYTES (checked above to hold them).
        unsafe {
            core::arch::asm!(
                "xsave64 [{}]",
                in(reg) xsave.xsave.as_mut_ptr(),
                in("eax") RFBM,
                in("edx") 0,
                options(nostack, preserves_flags)
            )
        };
        Host {
            facts,
            tls: tls::offset().expect("the translator's state is in static TLS"),
            land: coldcache_difftest_land as *const () as usize as u64,
            xsave,
        }
    }

    fn xcr0(&self) -> u64 {
        self.facts.xsave.xcr0
    }

    /// (offset, bytes) of XSAVE component `i` when XCR0 enables it.
    fn component(&self, i: usize) -> Option<(usize, usize)> {
        if i == 1 {
            return Some((160, 256));
        }
        (self.xcr0() & (1 << i) != 0).then(|| {
            (
                usize::from(self.facts.xsave.offset[i]),
                usize::from(self.facts.xsave.size[i]),
            )
        })
    }
}

/// The vector components compared: SSE, AVX, and the AVX-512 opmask,
/// ZMM_Hi256 and Hi16_ZMM.
const VECTOR_COMPONENTS: [usize; 5] = [1, 2, 5, 6, 7];

/// Component `i` of a saved state as the registers hold it: zeros when
/// XSAVE says the component is in its initial configuration.
fn component_bytes(h: &Host, s: &State, i: usize) -> Vec<u8> {
    let Some((o, n)) = h.component(i) else {
        return Vec::new();
    };
    let bv = u64::from_le_bytes(s.xsave[512..520].try_into().expect("8 bytes"));
    if bv & (1 << i) == 0 {
        vec![0; n]
    } else {
        s.xsave[o..o + n].to_vec()
    }
}

/// The x87 state as the program sees it: control, status and tag words
/// and ST0-ST7, initial values when XSAVE says so. The last instruction
/// and data pointers and opcode are left out: see `x87_env_store`.
fn x87_bytes(s: &State) -> Vec<u8> {
    let bv = u64::from_le_bytes(s.xsave[512..520].try_into().expect("8 bytes"));
    if bv & 1 == 0 {
        let mut v = vec![0u8; 5 + 128];
        v[..2].copy_from_slice(&0x037Fu16.to_le_bytes());
        v
    } else {
        [&s.xsave[..5], &s.xsave[32..160]].concat()
    }
}

/// `reg`'s value when its full register holds `v`.
fn sub_register(v: u64, reg: Register) -> u64 {
    match reg {
        Register::AH | Register::BH | Register::CH | Register::DH => (v >> 8) & 0xFF,
        _ => match reg.size() {
            1 => v & 0xFF,
            2 => v & 0xFFFF,
            4 => v & 0xFFFF_FFFF,
            _ => v,
        },
    }
}

/// The live state before an instruction, as the trap engine's context
/// would give it.
struct Live<'a> {
    host: &'a Host,
    state: &'a State,
    fs: u64,
    gs: u64,
}

impl Machine for Live<'_> {
    fn gpr(&self, reg: Register) -> u64 {
        let full = reg.full_register();
        if !full.is_gpr64() {
            return 0;
        }
        sub_register(self.state.regs[full.number()], reg)
    }
    fn rflags(&self) -> u64 {
        self.state.rflags
    }
    fn segment_base(&self, seg: Register) -> u64 {
        match seg {
            Register::FS => self.fs,
            Register::GS => self.gs,
            _ => 0,
        }
    }
    fn vector(&self, reg: Register) -> Option<[u8; 64]> {
        let (n, size) = if reg.is_xmm() {
            (reg.number() - Register::XMM0.number(), 16)
        } else if reg.is_ymm() {
            (reg.number() - Register::YMM0.number(), 32)
        } else if reg.is_zmm() {
            (reg.number() - Register::ZMM0.number(), 64)
        } else {
            return None;
        };
        let sse = component_bytes(self.host, self.state, 1);
        let avx = component_bytes(self.host, self.state, 2);
        let hi256 = component_bytes(self.host, self.state, 6);
        let hi16 = component_bytes(self.host, self.state, 7);
        let mut v = [0u8; 64];
        if n < 16 {
            v[..16].copy_from_slice(&sse[n * 16..n * 16 + 16]);
            if !avx.is_empty() {
                v[16..32].copy_from_slice(&avx[n * 16..n * 16 + 16]);
            }
            if !hi256.is_empty() {
                v[32..].copy_from_slice(&hi256[n * 32..n * 32 + 32]);
            }
        } else if !hi16.is_empty() {
            v.copy_from_slice(&hi16[(n - 16) * 64..(n - 15) * 64]);
        } else {
            return None;
        }
        v[size..].fill(0);
        Some(v)
    }
    fn opmask(&self, reg: Register) -> Option<u64> {
        let k = component_bytes(self.host, self.state, 5);
        let n = reg.number().checked_sub(Register::K0.number())?;
        (n < 8 && !k.is_empty())
            .then(|| u64::from_le_bytes(k[n * 8..n * 8 + 8].try_into().expect("8 bytes")))
    }
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> bool {
        crate::memory::read_bytes(addr, buf)
    }
}

/// Sets vector register `reg` (XMM/YMM/ZMM n, its width of `v`) in a
/// state's XSAVE image, marking the components written as in use.
fn set_vector(h: &Host, s: &mut State, reg: Register, v: &[u8; 64]) {
    let n = reg.number();
    let width = reg.size();
    let mut bv = u64::from_le_bytes(s.xsave[512..520].try_into().expect("8 bytes"));
    let mut put = |c: usize, at: usize, bytes: &[u8]| {
        if let Some((o, len)) = h.component(c) {
            assert!(at + bytes.len() <= len);
            s.xsave[o + at..o + at + bytes.len()].copy_from_slice(bytes);
            bv |= 1 << c;
        }
    };
    if n < 16 {
        put(1, 16 * n, &v[..16]);
        if width >= 32 {
            put(2, 16 * n, &v[16..32]);
        }
        if width == 64 {
            put(6, 32 * n, &v[32..]);
        }
    } else {
        put(7, 64 * (n - 16), &v[..width.min(64)]);
    }
    s.xsave[512..520].copy_from_slice(&bv.to_le_bytes());
}

/// One instruction form of the corpus.
struct Form {
    bytes: Vec<u8>,
    origin: &'static str,
}

/// The corpus: varied.txt, tests/model.rs's byte arrays, difftest.txt.
fn corpus() -> Vec<Form> {
    let mut out: Vec<Form> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut add = |bytes: Vec<u8>, origin: &'static str, out: &mut Vec<Form>| {
        if !bytes.is_empty() && seen.insert(bytes.clone()) {
            out.push(Form { bytes, origin });
        }
    };
    for (text, origin) in [
        (include_str!("../../tests/data/varied.txt"), "varied.txt"),
        (
            include_str!("../../tests/data/difftest.txt"),
            "difftest.txt",
        ),
    ] {
        for line in text.lines() {
            let hex = line.split('|').next().unwrap_or("");
            let bytes: Vec<u8> = hex
                .split_whitespace()
                .map(|b| u8::from_str_radix(b, 16).expect("hex byte"))
                .collect();
            add(bytes, origin, &mut out);
        }
    }
    let model = include_str!("../../tests/model.rs");
    let mut rest = model;
    while let Some(at) = rest.find("&[") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(']') else { break };
        let items: Option<Vec<u8>> = rest[..end]
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| match s.strip_prefix("0x") {
                Some(h) => u8::from_str_radix(h, 16).ok(),
                None => s.parse::<u8>().ok(),
            })
            .collect();
        if let Some(bytes) = items {
            let mut d = Decoder::new(64, &bytes, DecoderOptions::NONE);
            let i = d.decode();
            if !i.is_invalid() && i.len() == bytes.len() {
                add(bytes, "tests/model.rs", &mut out);
            }
        }
    }
    out
}

/// What `translate.rs`'s header says the translator refuses, from the
/// instruction alone: system calls (`syscall` only without BMI2) and
/// interrupts, `rep` strings, far and transactional control flow, invalid
/// instructions (`ud0`-`ud2`) and `hlt`, near branches with an
/// operand-size prefix, FS/GS base writes (selector
/// loads included), `maskmovq` (an MMX mask), `xsave`, `xsavec` and
/// `xrstor` forms, and, where the processor lacks AVX-512BW (`kmovq`),
/// AVX-512 forms with a `{k}`-masked memory operand (masked moves and
/// compares, gathers and scatters).
fn header_refuses(i: &Instruction, bytes: &[u8]) -> Option<&'static str> {
    header_refuses_on(i, bytes, std::arch::is_x86_feature_detected!("avx512bw"))
}

/// A `rep`-prefixed string instruction.
fn is_rep(i: &Instruction) -> bool {
    i.is_string_instruction() && (i.has_rep_prefix() || i.has_repe_prefix() || i.has_repne_prefix())
}

/// `rep movs/stos/lods` (F3, no F2) and `repe`/`repne` `cmps/scas` without an
/// address-size prefix.
fn rep_loop_by_header<'a>(i: &Instruction, mut prefixes: impl Iterator<Item = &'a u8>) -> bool {
    use Mnemonic::*;
    let (mut f3, mut f2, mut a32) = (false, false, false);
    for &b in &mut prefixes {
        f3 |= b == 0xF3;
        f2 |= b == 0xF2;
        a32 |= b == 0x67;
    }
    let zf = matches!(
        i.mnemonic(),
        Cmpsb | Cmpsw | Cmpsd | Cmpsq | Scasb | Scasw | Scasd | Scasq
    );
    if zf {
        return (f3 || f2) && !a32;
    }
    f3 && !f2
        && !a32
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
        )
}

/// [`header_refuses`] on a processor with (`bw`) or without AVX-512BW.
fn header_refuses_on(i: &Instruction, bytes: &[u8], bw: bool) -> Option<&'static str> {
    use Mnemonic::*;
    let m = i.mnemonic();
    // The legacy prefixes (and REX) before the opcode.
    let prefixes = bytes.iter().take_while(|&&b| {
        [
            0x66, 0x67, 0xF0, 0xF2, 0xF3, 0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65,
        ]
        .contains(&b)
            || b & 0xF0 == 0x40
    });
    let branch_66 = i.flow_control() != FlowControl::Next && prefixes.clone().any(|&b| b == 0x66);
    let far = matches!(m, Retf | Iret | Iretd | Iretq)
        || matches!(i.op0_kind(), OpKind::FarBranch16 | OpKind::FarBranch32)
        || (matches!(m, Call | Jmp)
            && i.op_count() > 0
            && i.op0_kind() == OpKind::Memory
            && matches!(
                i.memory_size(),
                MemorySize::SegPtr16 | MemorySize::SegPtr32 | MemorySize::SegPtr64
            ));
    let fs_gs_load = (i.op_count() > 0
        && i.op0_kind() == OpKind::Register
        && matches!(i.op0_register(), Register::FS | Register::GS)
        && m != Push)
        || matches!(m, Lfs | Lgs);
    let rep = i.is_string_instruction()
        && (i.has_rep_prefix() || i.has_repe_prefix() || i.has_repne_prefix());
    // The header: `rep` strings other than `rep movs/stos/lods` with 64-bit
    // addressing (those loop one iteration per record).
    let rep = rep && !rep_loop_by_header(i, prefixes.clone());
    let masked_memory = i.op_mask() != Register::None
        && (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory)
        && !bw;
    // The forms the model computes from EDX:EAX and memory; `xsaveopt`
    // and the supervisor forms are unmodelled (no input at all).
    let xsave = matches!(m, Xsave | Xsave64 | Xsavec | Xsavec64 | Xrstor | Xrstor64);
    Some(if i.is_invalid() {
        "invalid"
    } else if matches!(m, Sysenter | Sysexit | Sysret | Int | Int1 | Int3 | Into)
        || (m == Syscall && !std::arch::is_x86_feature_detected!("bmi2"))
    {
        "system call or interrupt"
    } else if rep {
        "rep string (32-bit addressing, port I/O, repne movs/stos/lods)"
    } else if m == Jcxz {
        "jcxz"
    } else if far {
        "far control flow"
    } else if matches!(m, Xbegin | Xabort | Xend) {
        "transactional control flow"
    } else if branch_66 {
        "near branch with an operand-size prefix"
    } else if matches!(m, Ud0 | Ud1 | Ud2 | Hlt) {
        "ud0-ud2, hlt"
    } else if matches!(m, Wrfsbase | Wrgsbase) {
        "FS/GS base write"
    } else if fs_gs_load {
        "FS/GS selector load"
    } else if m == Maskmovq {
        "maskmovq (MMX mask)"
    } else if masked_memory {
        "{k}-masked memory operand, no AVX-512BW here"
    } else if xsave {
        "xsave form"
    } else {
        return None;
    })
}

/// Whether a CPUID feature is present here (`None`: the harness does not
/// know how to check it, so a form needing it is not run).
fn has_feature(f: CpuidFeature) -> Option<bool> {
    use core::arch::x86_64::__cpuid_count;
    use CpuidFeature::*;
    #[allow(unused_unsafe)] // CPUID intrinsics became safe fns in newer Rust.
    let cpuid = |leaf: u32, sub: u32| {
        // SAFETY: CPUID exists on every x86-64 processor; a leaf beyond the
        // maximum returns data that reads as "absent" (or repeats the
        // highest leaf), which at worst skips a form or runs one that then
        // fails the test loudly.
        unsafe { __cpuid_count(leaf, sub) }
    };
    macro_rules! d {
        ($f:tt) => {
            std::arch::is_x86_feature_detected!($f)
        };
    }
    Some(match f {
        INTEL8086 | INTEL186 | INTEL286 | INTEL386 | INTEL486 | X64 | CPUID | FPU | FPU287
        | FPU387 | CMOV | CX8 | MULTIBYTENOP | PAUSE | TSC | MMX => true,
        // `endbr64` is a hint-space NOP where CET is absent or off.
        CET_IBT => true,
        SSE => d!("sse"),
        SSE2 => d!("sse2"),
        SSE3 => d!("sse3"),
        SSSE3 => d!("ssse3"),
        SSE4_1 => d!("sse4.1"),
        SSE4_2 => d!("sse4.2"),
        SSE4A => d!("sse4a"),
        AVX => d!("avx"),
        AVX2 => d!("avx2"),
        FMA => d!("fma"),
        F16C => d!("f16c"),
        BMI1 => d!("bmi1"),
        BMI2 => d!("bmi2"),
        ADX => d!("adx"),
        POPCNT => d!("popcnt"),
        LZCNT => d!("lzcnt"),
        MOVBE => d!("movbe"),
        AES => d!("aes"),
        PCLMULQDQ => d!("pclmulqdq"),
        SHA => d!("sha"),
        FXSR => d!("fxsr"),
        XSAVE => d!("xsave"),
        XSAVEOPT => d!("xsaveopt"),
        XSAVEC => d!("xsavec"),
        CMPXCHG16B => d!("cmpxchg16b"),
        RTM => d!("rtm"),
        AVX512F => d!("avx512f"),
        AVX512BW => d!("avx512bw"),
        AVX512VL => d!("avx512vl"),
        AVX512DQ => d!("avx512dq"),
        AVX512CD => d!("avx512cd"),
        CLFSH => cpuid(1, 0).edx & (1 << 19) != 0,
        // The kernel must have enabled it (HWCAP2_FSGSBASE), not only the CPU.
        // SAFETY: getauxval reads the auxiliary vector; 0 when absent.
        FSGSBASE => (unsafe { libc::getauxval(libc::AT_HWCAP2) } & 2) != 0,
        CLFLUSHOPT => cpuid(7, 0).ebx & (1 << 23) != 0,
        CLWB => cpuid(7, 0).ebx & (1 << 24) != 0,
        CLDEMOTE => cpuid(7, 0).ecx & (1 << 25) != 0,
        MOVDIRI => cpuid(7, 0).ecx & (1 << 27) != 0,
        MOVDIR64B => cpuid(7, 0).ecx & (1 << 28) != 0,
        PREFETCHW => cpuid(0x8000_0001, 0).ecx & (1 << 8) != 0,
        CLZERO => cpuid(0x8000_0008, 0).ebx & 1 != 0,
        _ => return None,
    })
}

/// Why this machine cannot run a form the translator accepts (at user
/// level, deterministically, without moving this thread's TLS), if so.
fn not_runnable(i: &Instruction, factory: &mut InstructionInfoFactory) -> Option<String> {
    use Mnemonic::*;
    let m = i.mnemonic();
    if i.is_privileged() {
        return Some("privileged".into());
    }
    if matches!(
        m,
        In | Out
            | Insb
            | Insw
            | Insd
            | Outsb
            | Outsw
            | Outsd
            | Monitor
            | Monitorx
            | Mwait
            | Mwaitx
            | Sgdt
            | Sidt
            | Sldt
            | Str
            | Smsw
    ) {
        return Some("I/O or system instruction (faults at user level)".into());
    }
    if m == Syscall {
        // Whatever call RAX names: the capture tests run real ones
        // (`tests-programs/capture/syscalls.c`).
        return Some("system call".into());
    }
    if matches!(
        m,
        Rdtsc | Rdtscp | Rdrand | Rdseed | Rdpid | Rdpmc | Cpuid | Rdpru
    ) {
        return Some("non-deterministic result".into());
    }
    let info = factory.info(i);
    if info.used_registers().iter().any(|u| {
        u.register().is_segment_register()
            && matches!(
                u.access(),
                OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite
            )
    }) {
        return Some("loads a segment register (would move this thread's TLS)".into());
    }
    for &f in i.cpuid_features() {
        match has_feature(f) {
            Some(true) => {}
            Some(false) => return Some(format!("this CPU lacks {f:?}")),
            None => return Some(format!("the harness does not check {f:?}")),
        }
    }
    None
}

/// The landing stubs' offsets in the code page.
const S0: u64 = 64;
const S1: u64 = 128;

/// The code page for `form`: the form (direct branches re-encoded to reach
/// S1, RIP-relative operands to point at the buffer's RIP_DATA), a `jmp`
/// to S0, and the stubs. Returns the page and the form as decoded at P.
fn code_page(h: &Host, form: &[u8], p: u64, buf: u64) -> Option<(Vec<u8>, Instruction)> {
    let (page, is) = code_page_seq(h, &[form], p, buf, S0, S1)?;
    Some((page, is[0]))
}

/// [`code_page`] for a run of forms, with the stubs at `s0` and `s1`
/// (a short branch that cannot reach `s1` becomes a near one).
fn code_page_seq(
    h: &Host,
    forms: &[&[u8]],
    p: u64,
    buf: u64,
    s0: u64,
    s1: u64,
) -> Option<(Vec<u8>, Vec<Instruction>)> {
    let mut page = vec![0xCCu8; s1 as usize + 64];
    let mut at = p;
    let mut decoded = Vec::with_capacity(forms.len());
    for form in forms {
        let mut d = Decoder::with_ip(64, form, at, DecoderOptions::NONE);
        let mut i = d.decode();
        let offsets = d.get_constant_offsets(&i);
        let mut bytes = form.to_vec();
        let near = i.op_count() > 0 && i.op0_kind() == OpKind::NearBranch64;
        // The branch displacement (an immediate for iced) or the RIP-relative
        // displacement patched in place, prefixes kept, when it fits.
        let (o, size, target) = if near {
            let o = offsets.immediate_offset();
            (o, offsets.immediate_size(), p + s1)
        } else {
            let o = offsets.displacement_offset();
            (o, offsets.displacement_size(), buf + RIP_DATA as u64)
        };
        let rel = target.wrapping_sub(i.next_ip()) as i64;
        let patched = (near || i.is_ip_rel_memory_operand())
            && match size {
                1 => i8::try_from(rel).is_ok_and(|r| {
                    bytes[o] = r as u8;
                    true
                }),
                4 => i32::try_from(rel).is_ok_and(|r| {
                    bytes[o..o + 4].copy_from_slice(&r.to_le_bytes());
                    true
                }),
                _ => false,
            };
        if patched {
            i = Decoder::with_ip(64, &bytes, at, DecoderOptions::NONE).decode();
        } else if near || i.is_ip_rel_memory_operand() {
            if near {
                i.set_near_branch64(p + s1);
            } else {
                i.set_memory_displacement64(buf + RIP_DATA as u64);
            }
            let mut e = Encoder::new(64);
            if e.encode(&i, at).is_err() {
                // A failed encoding leaves bytes behind: start afresh.
                e = Encoder::new(64);
                i.as_near_branch();
                e.encode(&i, at).ok()?;
            }
            bytes = e.take_buffer();
            let mut d = Decoder::with_ip(64, &bytes, at, DecoderOptions::NONE);
            i = d.decode();
        }
        let o = (at - p) as usize;
        page.get_mut(o..o + bytes.len())?.copy_from_slice(&bytes);
        at += bytes.len() as u64;
        decoded.push(i);
    }
    if at + 5 > p + s0 {
        return None;
    }
    let jmp = Instruction::with_branch(iced_x86::Code::Jmp_rel32_64, p + s0).ok()?;
    let mut e = Encoder::new(64);
    e.encode(&jmp, at).ok()?;
    let j = e.take_buffer();
    let o = (at - p) as usize;
    page.get_mut(o..o + j.len())?.copy_from_slice(&j);
    for s in [s0, s1] {
        let mut a = Asm::new(64);
        a.reset(p + s);
        let at = p + s;
        a.emit(store_imm32(fs(h.tls + off::NEXT), at as u32));
        a.emit(store_imm32(fs(h.tls + off::NEXT + 4), (at >> 32) as u32));
        a.bytes(&[0xFF, 0x25, 0, 0, 0, 0]);
        a.bytes(&h.land.to_le_bytes());
        assert!(a.ok());
        let code = a.take();
        page[s as usize..s as usize + code.len()].copy_from_slice(&code);
    }
    Some((page, decoded))
}

/// A random state for `i` at P, with the buffer's pattern written.
fn random_state(
    h: &Host,
    i: &Instruction,
    inputs: &Inputs,
    factory: &mut InstructionInfoFactory,
    rng: &mut Rng,
    region: &mut Region,
    p: u64,
) -> Box<State> {
    random_state_seq(
        h,
        core::slice::from_ref(i),
        core::slice::from_ref(inputs),
        factory,
        rng,
        region,
        p + S1,
    )
}

/// A random state for a run of instructions (`is`, with their plans'
/// inputs), with the buffer's pattern written; the last one's branch
/// target, return address or `popf` image is set up (`target`: the stub
/// an indirect branch or return goes to).
fn random_state_seq(
    h: &Host,
    is: &[Instruction],
    inputs: &[Inputs],
    factory: &mut InstructionInfoFactory,
    rng: &mut Rng,
    region: &mut Region,
    target: u64,
) -> Box<State> {
    let i = is.last().expect("an instruction");
    let buf = region.buf();
    let mut s = h.xsave.clone();
    for r in &mut s.regs {
        *r = rng.next();
    }
    s.rflags = 0x202 | (rng.next() & FLAGS);
    // Vector registers and masks through the XSAVE area.
    let mut bv = u64::from_le_bytes(s.xsave[512..520].try_into().expect("8 bytes"));
    for c in VECTOR_COMPONENTS {
        if let Some((o, n)) = h.component(c) {
            for b in &mut s.xsave[o..o + n] {
                *b = rng.next() as u8;
            }
            bv |= 1 << c;
        }
    }
    s.xsave[512..520].copy_from_slice(&bv.to_le_bytes());
    // Memory operands: bases into the buffer, indexes small (multiples of
    // 16, so aligned forms stay aligned), RSP in the buffer.
    let rsp = buf + STACK as u64 - 16 * rng.below(4);
    // (base register, segment base to take off), index registers; iced
    // leaves prefetches and hints out of its used-memory list.
    let mut bases = Vec::new();
    let mut indexes = Vec::new();
    let fs_base = tls::thread_pointer();
    let mut operand = |base: Register, index: Register, seg: Register| {
        if base.is_gpr() {
            let off = if seg == Register::FS { fs_base } else { 0 };
            bases.push((base.full_register(), off));
        }
        if index.is_gpr() {
            indexes.push(index.full_register());
        }
    };
    for i in is {
        for m in factory.info(i).used_memory() {
            operand(m.base(), m.index(), m.segment());
        }
        if (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory) {
            operand(i.memory_base(), i.memory_index(), i.memory_segment());
        }
        if i.mnemonic() == Mnemonic::Clzero {
            // Its line address is an implicit RAX iced lists as no memory.
            operand(Register::RAX, Register::None, Register::DS);
        }
    }
    for r in indexes {
        s.regs[r.number()] = 16 * rng.below(4);
    }
    // Gather and scatter indexes: small and signed (-32..32 elements of
    // up to 8 bytes around a base that is DATA or more into the buffer).
    for i in is {
        if i.is_vsib() {
            let idx = i.memory_index();
            let width = if i.vsib() == Some(true) { 8 } else { 4 };
            let mut v = [0u8; 64];
            for e in v.chunks_mut(width) {
                let x = rng.below(64) as i64 - 32;
                e.copy_from_slice(&x.to_le_bytes()[..width]);
            }
            set_vector(h, &mut s, idx, &v);
        }
    }
    for r in inputs.iter().flat_map(Inputs::gpr_list) {
        if !bases.iter().any(|&(b, _)| b == r) && r != Register::RSP {
            // Other address inputs (a `bt` bit offset): small and signed.
            s.regs[r.number()] = (rng.below(1024) as i64 - 512) as u64;
        }
    }
    for &(r, seg) in &bases {
        s.regs[r.number()] = (buf + DATA as u64 + 64 * rng.below(64)).wrapping_sub(seg);
    }
    if is_rep(i) {
        // A few iterations, none at all sometimes.
        s.regs[Register::RCX.number()] = rng.below(9);
    }
    s.regs[Register::RSP.number()] = rsp;
    // The pattern.
    let b = region.buf_mut();
    for x in b.iter_mut() {
        *x = rng.next() as u8;
    }
    let put = |b: &mut [u8], addr: u64, v: u64| {
        let o = addr.wrapping_sub(buf) as usize;
        assert!(o + 8 <= BUF, "{i}: {addr:#x} outside the buffer");
        b[o..o + 8].copy_from_slice(&v.to_le_bytes());
    };
    match i.flow_control() {
        FlowControl::IndirectBranch | FlowControl::IndirectCall => {
            if i.op0_kind() == OpKind::Register {
                s.regs[i.op0_register().full_register().number()] = target;
            } else {
                let regs = s.regs;
                let fs = tls::thread_pointer();
                let addr = i
                    .virtual_address(0, 0, |r, _, _| {
                        Some(match r {
                            Register::FS => fs,
                            r if r.is_segment_register() => 0,
                            r => sub_register(regs[r.full_register().number()], r),
                        })
                    })
                    .expect("address");
                put(b, addr, target);
            }
        }
        FlowControl::Return => put(b, rsp, target),
        _ => {}
    }
    if matches!(i.mnemonic(), Mnemonic::Popf | Mnemonic::Popfq) {
        put(b, rsp, 0x202 | (rng.next() & FLAGS));
    }
    // State loads that fault on reserved bits get a valid image.
    let operand = |s: &State| {
        let regs = s.regs;
        i.virtual_address(0, 0, |r, _, _| {
            Some(if r.is_segment_register() {
                0
            } else {
                sub_register(regs[r.full_register().number()], r)
            })
        })
        .expect("address")
    };
    match i.mnemonic() {
        Mnemonic::Fxrstor | Mnemonic::Fxrstor64 => {
            let o = operand(&s).wrapping_sub(buf) as usize;
            b[o..o + 512].copy_from_slice(&h.xsave.xsave[..512]);
        }
        Mnemonic::Ldmxcsr | Mnemonic::Vldmxcsr => {
            let o = operand(&s).wrapping_sub(buf) as usize;
            b[o..o + 4].copy_from_slice(&h.xsave.xsave[24..28]);
        }
        _ => {}
    }
    s
}

/// The result of one run.
struct Outcome {
    state: Box<State>,
    buf: Vec<u8>,
    next: u64,
}

/// Where a run was going, `P+len` (the `jmp` to S0) counted as S0.
fn resolve(next: u64, p: u64, len: u64) -> u64 {
    if next == p + len {
        p + S0
    } else {
        next
    }
}

/// Compares two runs; returns the differences.
fn compare(h: &Host, a: &Outcome, b: &Outcome) -> Vec<String> {
    let mut d = Vec::new();
    for (k, (x, y)) in a.state.regs.iter().zip(&b.state.regs).enumerate() {
        if x != y {
            d.push(format!(
                "{:?}: native {x:#x}, translated {y:#x}",
                gpr_name(k)
            ));
        }
    }
    let (fa, fb) = (a.state.rflags & FLAGS, b.state.rflags & FLAGS);
    if fa != fb {
        d.push(format!("RFLAGS: native {fa:#x}, translated {fb:#x}"));
    }
    if a.state.xsave[24..28] != b.state.xsave[24..28] {
        d.push("MXCSR differs".into());
    }
    if x87_bytes(&a.state) != x87_bytes(&b.state) {
        d.push("x87 state differs".into());
    }
    for c in VECTOR_COMPONENTS {
        let (x, y) = (
            component_bytes(h, &a.state, c),
            component_bytes(h, &b.state, c),
        );
        if x != y {
            d.push(format!("XSAVE component {c} differs"));
        }
    }
    if let Some(k) = a.buf.iter().zip(&b.buf).position(|(x, y)| x != y) {
        d.push(format!(
            "buffer byte {k:#x}: native {:#x}, translated {:#x}",
            a.buf[k], b.buf[k]
        ));
    }
    if a.next != b.next {
        d.push(format!(
            "going to: native {:#x}, translated {:#x}",
            a.next, b.next
        ));
    }
    d
}

/// Names a general register by iced number.
fn gpr_name(n: usize) -> Register {
    const R: [Register; 16] = [
        Register::RAX,
        Register::RCX,
        Register::RDX,
        Register::RBX,
        Register::RSP,
        Register::RBP,
        Register::RSI,
        Register::RDI,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
    ];
    R[n]
}

/// Everything one form's test produced.
#[derive(Default)]
struct Report {
    ran: Vec<String>,
    /// Forms among `ran` whose records hold vector or opmask registers.
    vector_ran: Vec<String>,
    refused: Vec<(String, Option<&'static str>)>,
    accepted_but_header_refuses: Vec<(String, &'static str)>,
    skipped: Vec<(String, String)>,
    failures: Vec<String>,
}

/// A record buffer: zeros, then a non-zero tail.
struct Record {
    words: Vec<u64>,
}

impl Record {
    const ZERO_WORDS: usize = (2 * MAX_RECORD) / 8;
    fn new() -> Record {
        let mut words = vec![0u64; Self::ZERO_WORDS + 64];
        words[Self::ZERO_WORDS..].fill(!0);
        Record { words }
    }
    fn start(&self) -> u64 {
        self.words.as_ptr() as u64
    }
}

/// Points the thread's translator state at the record and the landing.
fn arm_tls(h: &Host, rec: &Record) {
    // SAFETY: this thread's own state; nothing else uses it in this test
    // thread (no capture runs here).
    let t = unsafe { &mut *tls::this() };
    t.cursor = rec.start();
    t.dispatch = h.land;
    t.dispatch_full = h.land;
    t.next = 0;
    t.from = 0;
}

fn tls_next_cursor() -> (u64, u64) {
    // SAFETY: this thread's own state.
    let t = unsafe { &*tls::this() };
    (t.next, t.cursor)
}

/// Runs `entry` from a copy of `init` over a fresh copy of `pattern`.
fn run_once(init: &State, pattern: &[u8], region: &mut Region, entry: u64) -> (Box<State>, u64) {
    region.buf_mut().copy_from_slice(pattern);
    let mut s = Box::new(init.clone());
    // SAFETY: this thread's own state.
    unsafe { (*tls::this()).next = 0 };
    run(&mut s, entry);
    (s, tls_next_cursor().0)
}

/// Tests one form; appends to `report`.
#[allow(clippy::too_many_arguments)]
fn test_form(
    h: &Host,
    form: &Form,
    index: usize,
    tr: &mut Translator,
    cache: &mut CodeCache,
    model: &mut Model,
    factory: &mut InstructionInfoFactory,
    region: &mut Region,
    report: &mut Report,
) {
    let p = region.code();
    let mut fmt = IntelFormatter::new();
    let mut text = String::new();
    let Some((page, i)) = code_page(h, &form.bytes, p, region.buf()) else {
        report
            .failures
            .push(format!("{:02x?}: cannot be re-encoded", form.bytes));
        return;
    };
    fmt.format(&i, &mut text);
    let name = format!("{text} ({:02x?}, {})", &page[..i.len()], form.origin);
    region.set_code(&page);
    let id = 7 + index as u32;
    let mut out = [BlockInstr {
        ip: 0,
        sp_delta: 0,
        inputs: Inputs::NONE,
        offset: 0,
        check: 0,
    }; MAX_INSTRUCTIONS];
    let t = tr.translate(p, p + 4096, 0, id, h.tls, cache, &mut out);
    let header = header_refuses(&i, &page[..i.len()]);
    let Some(t) = t else {
        report.refused.push((name, header));
        return;
    };
    if let Some(why) = header {
        report.accepted_but_header_refuses.push((name.clone(), why));
    }
    if let Some(why) = not_runnable(&i, factory) {
        report.skipped.push((name, why));
        return;
    }
    let plan = model.plan(&i);
    let Some(inputs) = plan.inputs() else {
        report.failures.push(format!(
            "{name}: translated, but its plan has no recordable inputs"
        ));
        return;
    };
    let mut fail = |what: String| report.failures.push(format!("{name}: {what}"));
    if out[0].ip != p || out[0].inputs != inputs || out[0].sp_delta != 0 {
        fail(format!("block description {:?}", out[0]));
    }
    let len = i.len() as u64;
    let fs_base = tls::thread_pointer();
    let gs_base = crate::machine::gs_base(false);
    for trial in 0..TRIALS {
        let mut rng = Rng::new((index as u64) << 8 | trial);
        let init = random_state(h, &i, &inputs, factory, &mut rng, region, p);
        let pattern = region.buf_mut().to_vec();
        // The model over the live state, before anything runs.
        let mut live_acc = AccessList::default();
        let live = plan.eval(
            &i,
            &Live {
                host: h,
                state: &init,
                fs: fs_base,
                gs: gs_base,
            },
            &mut live_acc,
        );
        if std::env::var_os("COLDCACHE_DIFFTEST_VERBOSE").is_some() {
            eprintln!("{name} trial {trial}");
        }
        // A harness mistake must fail the test, not crash it.
        let buf = region.buf();
        if let Some(a) = live_acc.as_slice().iter().find(|a| {
            let mut probe = [0u8; 1];
            let inside = a.addr >= buf && a.addr + u64::from(a.size) <= buf + BUF as u64;
            !inside && !crate::memory::read_bytes(a.addr, &mut probe)
        }) {
            fail(format!(
                "trial {trial}: the harness let {a:?} out of memory"
            ));
            continue;
        }
        // Native.
        let (ns, nnext) = run_once(&init, &pattern, region, p);
        let native = Outcome {
            state: ns,
            buf: region.buf_mut().to_vec(),
            next: resolve(nnext, p, len),
        };
        // Translated.
        let rec = Record::new();
        arm_tls(h, &rec);
        if std::env::var_os("COLDCACHE_DIFFTEST_VERBOSE").is_some() {
            eprintln!("  translated at {:#x}", t.code);
        }
        let (xs, xnext) = run_once(&init, &pattern, region, t.code);
        let (_, cursor) = tls_next_cursor();
        let translated = Outcome {
            state: xs,
            buf: region.buf_mut().to_vec(),
            next: resolve(xnext, p, len),
        };
        for d in compare(h, &native, &translated) {
            fail(format!("trial {trial}: {d}"));
        }
        if matches!(
            i.flow_control(),
            FlowControl::Call | FlowControl::IndirectCall
        ) {
            // The return address on the stack is the program's own.
            let sp = init.regs[Register::RSP.number()] - 8;
            let o = (sp - region.buf()) as usize;
            let pushed = u64::from_le_bytes(translated.buf[o..o + 8].try_into().expect("8"));
            if pushed != p + len || translated.state.regs[Register::RSP.number()] != sp {
                fail(format!(
                    "trial {trial}: the call pushed {pushed:#x}, not {:#x}",
                    p + len
                ));
            }
        }
        if ![p + S0, p + S1].contains(&native.next) {
            fail(format!(
                "trial {trial}: native run went to {:#x}",
                native.next
            ));
        }
        // The record: one per execution of the block (a `rep` string: one
        // per iteration, one when there is none).
        let w = &rec.words;
        // (`repe`/`repne` `cmps`/`scas` may end before RCX does.)
        let rcx = Register::RCX.number();
        let executions = if t.rep {
            (init.regs[rcx] - translated.state.regs[rcx]).max(1) as usize
        } else {
            1
        };
        let zf_word = t.rep && t.size > 16 + inputs.bytes();
        if zf_word && init.regs[rcx] != 0 {
            // The last record's last word: ZF as its iteration left it.
            let last = rec.words[t.size * executions / 8 - 1];
            if (last != 0) != (translated.state.rflags & 0x40 != 0) {
                fail(format!(
                    "trial {trial}: recorded ZF word {last}, flags {:#x}",
                    translated.state.rflags
                ));
            }
        }
        if cursor != rec.start() + (t.size * executions) as u64 {
            fail(format!(
                "trial {trial}: cursor moved {} bytes, {executions} records of {}",
                cursor.wrapping_sub(rec.start()),
                t.size
            ));
            continue;
        }
        if w[0] != u64::from(id) || w[1] != init.regs[Register::RSP.number()] {
            fail(format!(
                "trial {trial}: record header {:#x} {:#x}",
                w[0], w[1]
            ));
        }
        if w[t.size * executions / 8..Record::ZERO_WORDS]
            .iter()
            .any(|&x| x != 0)
        {
            fail(format!("trial {trial}: written past the record"));
        }
        let mut m = RecordedMachine::with_bases(fs_base, gs_base);
        // SAFETY: the block's first record, complete (the cursor moved past
        // it), kept while `m` is used.
        unsafe { m.fill(&out[0], rec.start()) };
        let first = usize::from(out[0].offset) / 8;
        for (q, r) in (first..).zip(inputs.gpr_list()) {
            if w[q] != init.regs[r.number()] {
                fail(format!(
                    "trial {trial}: recorded {r:?} = {:#x}, was {:#x}",
                    w[q],
                    init.regs[r.number()]
                ));
            }
        }
        // Vector and opmask inputs: the replay's machine answers what the
        // live state held.
        let live_m = Live {
            host: h,
            state: &init,
            fs: fs_base,
            gs: gs_base,
        };
        if inputs.opmask != Register::None
            && m.opmask(inputs.opmask) != live_m.opmask(inputs.opmask)
        {
            fail(format!(
                "trial {trial}: recorded {:?} = {:x?}, was {:x?}",
                inputs.opmask,
                m.opmask(inputs.opmask),
                live_m.opmask(inputs.opmask)
            ));
        }
        for r in inputs.vector_list() {
            if m.vector(r) != live_m.vector(r) {
                fail(format!(
                    "trial {trial}: recorded {r:?} = {:x?}, was {:x?}",
                    m.vector(r),
                    live_m.vector(r)
                ));
            }
        }

        let mut rec_acc = AccessList::default();
        let recorded = plan.eval(&i, &m, &mut rec_acc);
        if live.map(|_| live_acc.as_slice()) != recorded.map(|_| rec_acc.as_slice()) {
            fail(format!(
                "trial {trial}: model over the record {:?} {:?}, over the live state {:?} {:?}",
                recorded,
                rec_acc.as_slice(),
                live,
                live_acc.as_slice()
            ));
        }
        // The replay's steady loop reads a plain operand's address from
        // the record's words (`Quick::recorded`): the live access too.
        let in_place = plan
            .quick()
            .and_then(|q| q.recorded(&out[0].inputs, out[0].offset))
            .map(|r| r.access(&w[..t.size / 8], &m));
        if let Some(a) = in_place {
            if live.is_err() || a.as_slice() != live_acc.as_slice() {
                fail(format!(
                    "trial {trial}: address read from the record {a:?}, over the live state {:?} {:?}",
                    live,
                    live_acc.as_slice()
                ));
            }
        }
    }
    if !inputs.gprs_only() {
        report.vector_ran.push(name.clone());
    }
    report.ran.push(name);
}

fn run_corpus() -> Report {
    let h = Host::new();
    let mut tr = Translator::new(h.facts);
    let mut cache = CodeCache::new();
    let mut model = Model::new(h.facts);
    let mut factory = InstructionInfoFactory::new();
    let mut region = Region::new();
    let mut report = Report::default();
    for (k, form) in corpus().iter().enumerate() {
        test_form(
            &h,
            form,
            k,
            &mut tr,
            &mut cache,
            &mut model,
            &mut factory,
            &mut region,
            &mut report,
        );
    }
    report
}

#[test]
fn translated_forms_end_as_native_ones_and_record_the_model_inputs() {
    let r = run_corpus();
    eprintln!(
        "difftest: {} forms run natively and translated, {} refused, {} not runnable here",
        r.ran.len(),
        r.refused.len(),
        r.skipped.len()
    );
    for (name, why) in &r.skipped {
        eprintln!("  not runnable here: {name}: {why}");
    }
    for (name, why) in &r.refused {
        eprintln!("  refused: {name}: {}", why.unwrap_or("NOT IN THE HEADER"));
    }
    assert!(
        r.failures.is_empty(),
        "{} differences:\n{}",
        r.failures.len(),
        r.failures.join("\n")
    );
    let unexplained: Vec<_> = r.refused.iter().filter(|(_, w)| w.is_none()).collect();
    assert!(
        unexplained.is_empty() && r.accepted_but_header_refuses.is_empty(),
        "the translator's refusals and its header disagree:\nrefused, header silent: {unexplained:?}\naccepted, header refuses: {:?}",
        r.accepted_but_header_refuses
    );
    assert!(r.ran.len() >= 200, "only {} forms ran", r.ran.len());
    eprintln!(
        "difftest: {} forms with vector or opmask inputs ran",
        r.vector_ran.len()
    );
    for name in &r.vector_ran {
        eprintln!("  vector inputs: {name}");
    }
    if std::arch::is_x86_feature_detected!("avx2") {
        // The AVX2 gathers and vmaskmov/vpmaskmov forms of the corpus.
        assert!(
            r.vector_ran.len() >= 8,
            "only {} forms with vector inputs ran",
            r.vector_ran.len()
        );
    }
    if !std::arch::is_x86_feature_detected!("avx512bw") {
        eprintln!(
            "difftest: this CPU lacks AVX-512 (BW): its masked, gather and scatter forms are \
             refused here (their records need kmovq/EVEX stores) and were not run"
        );
    }
}

/// Translates `bytes` at the region's code page; returns the translation,
/// the form as decoded there and the block's description.
fn translate_at(
    h: &Host,
    bytes: &[u8],
    region: &mut Region,
    cache: &mut CodeCache,
    id: u32,
) -> (
    super::translate::Translation,
    Instruction,
    [BlockInstr; MAX_INSTRUCTIONS],
) {
    let p = region.code();
    let (page, i) = code_page(h, bytes, p, region.buf()).expect("encodes");
    region.set_code(&page);
    let mut tr = Translator::new(h.facts);
    let mut out = [BlockInstr {
        ip: 0,
        sp_delta: 0,
        inputs: Inputs::NONE,
        offset: 0,
        check: 0,
    }; MAX_INSTRUCTIONS];
    let t = tr
        .translate(p, p + 4096, 0, id, h.tls, cache, &mut out)
        .expect("translated");
    (t, i, out)
}

#[test]
fn a_full_buffer_sends_the_block_to_dispatch_full_with_every_register_as_it_was() {
    let h = Host::new();
    let mut cache = CodeCache::new();
    let mut region = Region::new();
    let mut factory = InstructionInfoFactory::new();
    let mut model = Model::new(h.facts);
    // add qword ptr [rbx+rcx*8+16], rax: a memory form with two inputs.
    let (t, i, _) = translate_at(
        &h,
        &[0x48, 0x01, 0x44, 0xcb, 0x10],
        &mut region,
        &mut cache,
        3,
    );
    let inputs = model.plan(&i).inputs().expect("inputs");
    let p = region.code();
    for trial in 0..TRIALS {
        let mut rng = Rng::new(0xF011 + trial);
        let init = random_state(&h, &i, &inputs, &mut factory, &mut rng, &mut region, p);
        let pattern = region.buf_mut().to_vec();
        let mut rec = Record::new();
        // The word after this block's record is not 0: the buffer is full.
        rec.words[t.size / 8] = 1;
        arm_tls(&h, &rec);
        let (after, next) = run_once(&init, &pattern, &mut region, t.code);
        let (_, cursor) = tls_next_cursor();
        assert_eq!(next, p, "the full path asks for the block again");
        assert_eq!(cursor, rec.start(), "nothing committed");
        assert!(rec.words[..t.size / 8].iter().all(|&w| w == 0));
        let unchanged = Outcome {
            state: init.clone(),
            buf: pattern.clone(),
            next: p,
        };
        let ran = Outcome {
            state: after,
            buf: region.buf_mut().to_vec(),
            next,
        };
        let d = compare(&h, &unchanged, &ran);
        assert!(d.is_empty(), "trial {trial}: {d:?}");
    }
}

/// Asserts that the translator refuses each of `forms` (bytes, source).
fn assert_refused(forms: &[(&[u8], &str)]) {
    let h = Host::new();
    let mut cache = CodeCache::new();
    let mut region = Region::new();
    let mut tr = Translator::new(h.facts);
    let p = region.code();
    for &(bytes, what) in forms {
        let (page, i) = code_page(&h, bytes, p, region.buf()).expect("encodes");
        assert_eq!(i.len(), bytes.len(), "{what}");
        region.set_code(&page);
        let mut out = [BlockInstr {
            ip: 0,
            sp_delta: 0,
            inputs: Inputs::NONE,
            offset: 0,
            check: 0,
        }; MAX_INSTRUCTIONS];
        assert!(
            tr.translate(p, p + 4096, 0, 1, h.tls, &mut cache, &mut out)
                .is_none(),
            "{what} was translated"
        );
    }
}

#[test]
fn loads_of_the_fs_and_gs_selectors_are_refused() {
    // Translated code reaches its state through the FS base; a selector
    // load moves that base, so the block must run under the trap engine.
    assert_refused(&[
        (&[0x0f, 0xa1], "pop fs"),
        (&[0x0f, 0xa9], "pop gs"),
        (&[0x8e, 0xe0], "mov fs, eax"),
        (&[0x66, 0x8e, 0xe8], "mov gs, ax"),
        (&[0x8e, 0x23], "mov fs, word ptr [rbx]"),
        (&[0x0f, 0xb4, 0x03], "lfs eax, [rbx]"),
        (&[0x48, 0x0f, 0xb5, 0x03], "lgs rax, [rbx]"),
    ]);
}

#[test]
fn near_branches_with_an_operand_size_prefix_are_refused() {
    // Intel (and iced) ignore the prefix, AMD truncates RIP to 16 bits: a
    // translation cannot be right on both, the CPU itself is.
    assert_refused(&[
        (&[0x66, 0xc3], "retw"),
        (&[0x66, 0xc2, 0x08, 0x00], "retw 8"),
        (&[0x66, 0xeb, 0x10], "data16 jmp rel8"),
        (&[0x66, 0x74, 0x10], "data16 je rel8"),
        (&[0x66, 0x48, 0x74, 0x10], "data16 rex.W je rel8"),
        (
            &[0x66, 0x2e, 0x0f, 0x84, 0x10, 0, 0, 0],
            "data16 cs je rel32",
        ),
        (&[0x66, 0xe8, 0x10, 0, 0, 0], "data16 call rel32"),
    ]);
}

/// A form that may go into a run of forms in one block.
struct Candidate {
    bytes: Vec<u8>,
    /// Full general registers (bit = iced number) it writes, RSP left out
    /// (only forms moving RSP by a known amount are candidates).
    writes: u32,
    /// Registers its addresses read, as bases and as small values (indexes,
    /// bit offsets); RSP left out (it always points at the stack).
    bases: u32,
    smalls: u32,
    /// A direct branch (only last in a run).
    branch: bool,
    /// How it moves RSP, and whether it addresses memory through RSP (such
    /// a form may need RSP 16-byte aligned: it follows only runs that
    /// moved RSP by a multiple of 16).
    stack: i64,
    rsp_memory: bool,
    /// It reads something the harness writes for it (an indirect target, a
    /// return address, a `popf`/`fxrstor`/`ldmxcsr` image): only last, after
    /// forms that neither moved RSP nor wrote memory.
    setup: bool,
    /// It writes memory.
    mem_writes: bool,
    /// An x87 instruction, and an x87 environment store (`fnstenv`,
    /// `fnsave`, `fxsave`): the store never follows an x87 instruction in a
    /// run, since it writes the last x87 instruction's address, which is
    /// the code cache's in translated code (a known difference, see the
    /// module documentation).
    x87: bool,
    x87_env_store: bool,
}

fn bit(r: Register) -> u32 {
    if r.is_gpr() && r.full_register() != Register::RSP {
        1 << r.full_register().number()
    } else {
        0
    }
}

/// `form` as a [`Candidate`], when the corpus test runs it alone.
fn candidate(
    form: &[u8],
    model: &mut Model,
    factory: &mut InstructionInfoFactory,
) -> Option<Candidate> {
    use Mnemonic::*;
    let i = Decoder::with_ip(64, form, 0x1000, DecoderOptions::NONE).decode();
    if i.is_invalid() || header_refuses(&i, form).is_some() || not_runnable(&i, factory).is_some() {
        return None;
    }
    let (branch, mut setup) = match i.flow_control() {
        FlowControl::Next => (false, false),
        FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch | FlowControl::Call
            if i.op0_kind() == OpKind::NearBranch64 =>
        {
            (true, false)
        }
        FlowControl::IndirectBranch | FlowControl::IndirectCall | FlowControl::Return => {
            (true, true)
        }
        _ => return None,
    };
    // `loop`/`jrcxz` reach only rel8: a run's landing stubs are further
    // (the single forms test them).
    if matches!(
        i.mnemonic(),
        Clzero | Enter | Leave | Loop | Loope | Loopne | Jrcxz | Jecxz
    ) || is_rep(&i)
    {
        return None;
    }
    setup |= matches!(
        i.mnemonic(),
        Popf | Popfq | Fxrstor | Fxrstor64 | Ldmxcsr | Vldmxcsr
    );
    // Forms with vector or opmask inputs run alone only (a form before them
    // could write the vector registers they address with).
    let inputs = model.plan(&i).inputs().filter(Inputs::gprs_only)?;
    let info = factory.info(&i);
    let mut writes = 0;
    for u in info.used_registers() {
        let r = u.register();
        let w = matches!(
            u.access(),
            OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
        );
        if !w || !r.is_gpr() {
            continue;
        }
        if r.full_register() == Register::RSP {
            let known = i.is_stack_instruction()
                && i.stack_pointer_increment() != 0
                && !(i.op_count() > 0
                    && i.op0_kind() == OpKind::Register
                    && i.op0_register().full_register() == Register::RSP);
            if !known {
                return None;
            }
        }
        writes |= bit(r);
    }
    // An FS-relative base holds a different value than a plain one: such
    // forms run alone only.
    if info
        .used_memory()
        .iter()
        .any(|m| m.segment() == Register::FS && m.base().is_gpr())
    {
        return None;
    }
    let (mut bases, mut smalls) = (0, 0);
    if setup && i.op_count() > 0 && i.op0_kind() == OpKind::Register {
        // An indirect branch's target register: set up, never written before.
        bases |= bit(i.op0_register());
    }
    let mem_writes = info.used_memory().iter().any(|m| {
        matches!(
            m.access(),
            OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
        )
    });
    for m in info.used_memory() {
        bases |= bit(m.base());
        smalls |= bit(m.index());
    }
    if (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory) {
        bases |= bit(i.memory_base());
        smalls |= bit(i.memory_index());
    }
    for r in inputs.gpr_list() {
        if bit(r) & bases == 0 {
            smalls |= bit(r);
        }
    }
    if bases & smalls != 0 {
        return None;
    }
    let rsp_memory = info
        .used_memory()
        .iter()
        .any(|m| m.base().full_register() == Register::RSP)
        || ((0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory)
            && i.memory_base().full_register() == Register::RSP);
    Some(Candidate {
        bytes: form.to_vec(),
        writes,
        bases,
        smalls,
        branch,
        stack: i64::from(i.stack_pointer_increment()),
        rsp_memory,
        setup,
        mem_writes,
        x87: i.cpuid_features().iter().any(|f| {
            matches!(
                f,
                CpuidFeature::FPU | CpuidFeature::FPU287 | CpuidFeature::FPU387
            )
        }),
        x87_env_store: x87_env_store(&i),
    })
}

/// Whether `i` stores the x87 environment (with the last x87
/// instruction's address in it).
fn x87_env_store(i: &Instruction) -> bool {
    use Mnemonic::*;
    matches!(
        i.mnemonic(),
        Fnstenv | Fstenv | Fnsave | Fsave | Fxsave | Fxsave64
    )
}

/// Picks a run of 2 to 6 candidates in which no form writes a register a
/// later one addresses with, and no register is a base for one and a small
/// value for another; the last may be a branch, call or return.
fn pick_run<'a>(cands: &'a [Candidate], rng: &mut Rng) -> Vec<&'a Candidate> {
    let want = 2 + rng.below(5) as usize;
    let (mut writes, mut bases, mut smalls, mut sp) = (0u32, 0u32, 0u32, 0i64);
    let mut written = false;
    let mut x87 = false;
    // The last form: anything, a direct branch, or a set-up form.
    let last_kind = rng.below(3);
    let mut run: Vec<&Candidate> = Vec::new();
    for _ in 0..2000 {
        if run.len() == want {
            break;
        }
        let c = &cands[rng.below(cands.len() as u64) as usize];
        let last = run.len() + 1 == want;
        if (c.branch && !last)
            || (c.bases | c.smalls) & writes != 0
            || c.bases & smalls != 0
            || c.smalls & bases != 0
            || (c.rsp_memory && sp % 16 != 0)
            || (c.setup && (!last || sp != 0 || written))
            || (c.x87_env_store && x87)
            || (last && last_kind == 1 && (c.setup || !c.branch))
            || (last && last_kind == 2 && !c.setup)
        {
            continue;
        }
        writes |= c.writes;
        bases |= c.bases;
        smalls |= c.smalls;
        sp += c.stack;
        written |= c.mem_writes;
        x87 |= c.x87;
        run.push(c);
        if c.branch {
            break;
        }
    }
    run
}

#[test]
fn runs_of_forms_in_one_block_end_as_native_ones_and_record_each_instruction() {
    const RUNS: u64 = 1000;
    const SEQ_S0: u64 = 0x200;
    const SEQ_S1: u64 = 0x240;
    let h = Host::new();
    let mut cache = CodeCache::new();
    let mut region = Region::new();
    let mut factory = InstructionInfoFactory::new();
    let mut model = Model::new(h.facts);
    let mut tr = Translator::new(h.facts);
    let cands: Vec<Candidate> = corpus()
        .iter()
        .filter_map(|f| candidate(&f.bytes, &mut model, &mut factory))
        .collect();
    assert!(cands.len() >= 150, "only {} candidates", cands.len());
    let p = region.code();
    let mut failures = Vec::new();
    let mut instructions = 0usize;
    // Runs ending in: a plain form, a direct branch, a form set up by the
    // harness (indirect branch, return, popf, ...).
    let mut ending = [0usize; 3];
    for n in 0..RUNS {
        let mut rng = Rng::new(0x5E0 + n);
        let run = pick_run(&cands, &mut rng);
        let forms: Vec<&[u8]> = run.iter().map(|c| &c.bytes[..]).collect();
        let Some((page, is)) = code_page_seq(&h, &forms, p, region.buf(), SEQ_S0, SEQ_S1) else {
            failures.push(format!("run {n}: cannot be laid out"));
            continue;
        };
        let mut fmt = IntelFormatter::new();
        let mut name = format!("run {n}:");
        for i in &is {
            let mut t = String::new();
            fmt.format(i, &mut t);
            name += &format!(" {t};");
        }
        region.set_code(&page);
        let mut out = [BlockInstr {
            ip: 0,
            sp_delta: 0,
            inputs: Inputs::NONE,
            offset: 0,
            check: 0,
        }; MAX_INSTRUCTIONS];
        let id = 1000 + n as u32;
        let Some(t) = tr.translate(p, p + 4096, 0, id, h.tls, &mut cache, &mut out) else {
            failures.push(format!("{name} refused"));
            continue;
        };
        let ends_with_branch = run.last().is_some_and(|c| c.branch);
        let expect = is.len() + usize::from(!ends_with_branch);
        if t.count != expect {
            failures.push(format!("{name} block of {} instructions", t.count));
            continue;
        }
        let plans: Vec<_> = is.iter().map(|i| model.plan(i)).collect();
        let inputs: Vec<Inputs> = plans
            .iter()
            .map(|pl| pl.inputs().expect("candidate"))
            .collect();
        let end = is.last().map_or(p, |i| i.next_ip());
        let resolve = |next: u64| if next == end { p + SEQ_S0 } else { next };
        let fs_base = tls::thread_pointer();
        let gs_base = crate::machine::gs_base(false);
        instructions += is.len();
        ending[usize::from(run.last().is_some_and(|c| c.branch))
            + usize::from(run.last().is_some_and(|c| c.setup))] += 1;
        for trial in 0..2 {
            let mut rng = Rng::new((n << 8) | trial);
            let init = random_state_seq(
                &h,
                &is,
                &inputs,
                &mut factory,
                &mut rng,
                &mut region,
                p + SEQ_S1,
            );
            let pattern = region.buf_mut().to_vec();
            // Each instruction's state before it, as far as its addresses
            // go: the initial registers, RSP moved by the stack
            // instructions before it.
            let mut sp = 0i64;
            let mut before = Vec::with_capacity(is.len());
            let mut lives = Vec::with_capacity(is.len());
            let mut out_of_memory = None;
            for (k, i) in is.iter().enumerate() {
                let mut st = init.clone();
                st.regs[Register::RSP.number()] =
                    init.regs[Register::RSP.number()].wrapping_add(sp as u64);
                let mut acc = AccessList::default();
                let r = plans[k].eval(
                    i,
                    &Live {
                        host: &h,
                        state: &st,
                        fs: fs_base,
                        gs: gs_base,
                    },
                    &mut acc,
                );
                let buf = region.buf();
                if let Some(a) = acc.as_slice().iter().find(|a| {
                    let mut probe = [0u8; 1];
                    let inside = a.addr >= buf && a.addr + u64::from(a.size) <= buf + BUF as u64;
                    !inside && !crate::memory::read_bytes(a.addr, &mut probe)
                }) {
                    out_of_memory = Some(*a);
                }
                before.push((sp, st));
                lives.push((r, acc));
                sp += i64::from(i.stack_pointer_increment());
            }
            if let Some(a) = out_of_memory {
                failures.push(format!("{name} the harness let {a:?} out of memory"));
                continue;
            }
            if std::env::var_os("COLDCACHE_DIFFTEST_VERBOSE").is_some() {
                eprintln!("{name} trial {trial}");
            }
            let (ns, nnext) = run_once(&init, &pattern, &mut region, p);
            let native = Outcome {
                state: ns,
                buf: region.buf_mut().to_vec(),
                next: resolve(nnext),
            };
            let rec = Record::new();
            arm_tls(&h, &rec);
            let (xs, xnext) = run_once(&init, &pattern, &mut region, t.code);
            let (_, cursor) = tls_next_cursor();
            let translated = Outcome {
                state: xs,
                buf: region.buf_mut().to_vec(),
                next: resolve(xnext),
            };
            for d in compare(&h, &native, &translated) {
                failures.push(format!("{name} trial {trial}: {d}"));
            }
            let w = &rec.words;
            if cursor != rec.start() + t.size as u64
                || w[0] != u64::from(id)
                || w[1] != init.regs[Register::RSP.number()]
            {
                failures.push(format!("{name} trial {trial}: record header or size"));
                continue;
            }
            for (k, i) in is.iter().enumerate() {
                let (sp, st) = &before[k];
                let d = &out[k];
                if d.ip != i.ip() || d.sp_delta != *sp || d.inputs != inputs[k] {
                    failures.push(format!("{name} instruction {k}: description {d:?}"));
                    continue;
                }
                let mut m = RecordedMachine::with_bases(fs_base, gs_base);
                // SAFETY: the block's record, complete (the cursor moved
                // past it), kept while `m` is used.
                unsafe { m.fill(d, rec.start()) };
                let first = usize::from(d.offset) / 8;
                for (q, r) in (first..).zip(inputs[k].gpr_list()) {
                    if w[q] != st.regs[r.number()] {
                        failures.push(format!(
                            "{name} trial {trial} instruction {k}: recorded {r:?} = {:#x}, was {:#x}",
                            w[q],
                            st.regs[r.number()]
                        ));
                    }
                }
                let mut acc = AccessList::default();
                let r = plans[k].eval(i, &m, &mut acc);
                let (lr, la) = &lives[k];
                if r.map(|_| acc.as_slice()) != lr.map(|_| la.as_slice()) {
                    failures.push(format!(
                        "{name} trial {trial} instruction {k}: model over the record {:?}, over the live state {:?}",
                        acc.as_slice(),
                        la.as_slice()
                    ));
                }
            }
        }
    }
    eprintln!(
        "difftest: {RUNS} runs of forms, {instructions} instructions, in one block each; \
         ending in a plain form {}, a direct branch {}, a set-up form {}",
        ending[0], ending[1], ending[2]
    );
    assert!(ending.iter().all(|&n| n >= 10), "runs ending: {ending:?}");
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn rip_relative_operands_beyond_the_code_caches_reach_are_refused() {
    let h = Host::new();
    let mut cache = CodeCache::new();
    // High up, so that both sides of the code cache are addresses.
    let mut region = Region::anywhere();
    let mut tr = Translator::new(h.facts);
    let p = region.code();
    let mut out = [BlockInstr {
        ip: 0,
        sp_delta: 0,
        inputs: Inputs::NONE,
        offset: 0,
        check: 0,
    }; MAX_INSTRUCTIONS];
    // mov rax, qword ptr [rip + d], placed at P with its target at `to`.
    let mut at = |to: u64, cache: &mut CodeCache| {
        let mut i =
            Decoder::with_ip(64, &[0x48, 0x8b, 0x05, 0, 0, 0, 0], p, DecoderOptions::NONE).decode();
        i.set_memory_displacement64(to);
        let mut e = Encoder::new(64);
        e.encode(&i, p).expect("within reach of P");
        let mut page = e.take_buffer();
        page.extend_from_slice(&[0xCC; 16]);
        region.set_code(&page);
        tr.translate(p, p + 4096, 0, 1, h.tls, cache, &mut out)
    };
    // Near: translated (where the cache is tells how far is too far).
    let near = at(p + 0x1000, &mut cache).expect("a near operand is translated");
    let code = near.code;
    // As far from the cache as P allows, on the side away from it.
    let far = if code < p {
        code + (1 << 31) + (16 << 20)
    } else {
        code - (1 << 31) - (16 << 20)
    };
    assert!(far.abs_diff(p) < 1 << 31, "P reaches it");
    assert!(
        at(far, &mut cache).is_none(),
        "an operand {:#x} from the code cache was translated",
        far.abs_diff(code)
    );
}

#[test]
fn a_block_cut_at_its_size_cap_goes_on_where_it_stopped() {
    // 40 forms: the block takes the first MAX_INSTRUCTIONS and exits to the
    // next one; going on natively from there must end as the whole run
    // natively does, and every record must hold RBX and the RSP it had.
    const SEQ_S0: u64 = 0x200;
    const SEQ_S1: u64 = 0x240;
    let h = Host::new();
    let mut cache = CodeCache::new();
    let mut region = Region::new();
    let mut factory = InstructionInfoFactory::new();
    let mut model = Model::new(h.facts);
    let mut tr = Translator::new(h.facts);
    let p = region.code();
    let forms: Vec<Vec<u8>> = (0..40u8)
        .map(|k| match k % 4 {
            // add qword ptr [rbx + d], rcx, d the disp8 8k mod 256 (from
            // k = 16 on a negative one: both signs tested; wrapping, not
            // overflowing, in builds with overflow checks too)
            0 => vec![0x48, 0x01, 0x4b, 8u8.wrapping_mul(k)],
            // xor rax, qword ptr [rbx + d]
            1 => vec![0x48, 0x33, 0x43, 8u8.wrapping_mul(k)],
            // push rdx
            2 => vec![0x52],
            // pop rsi
            _ => vec![0x5e],
        })
        .collect();
    let refs: Vec<&[u8]> = forms.iter().map(|f| &f[..]).collect();
    let (page, is) = code_page_seq(&h, &refs, p, region.buf(), SEQ_S0, SEQ_S1).expect("laid out");
    region.set_code(&page);
    let mut out = [BlockInstr {
        ip: 0,
        sp_delta: 0,
        inputs: Inputs::NONE,
        offset: 0,
        check: 0,
    }; MAX_INSTRUCTIONS];
    let t = tr
        .translate(p, p + 4096, 0, 9, h.tls, &mut cache, &mut out)
        .expect("translated");
    assert_eq!(t.count, MAX_INSTRUCTIONS);
    let inputs: Vec<Inputs> = is
        .iter()
        .map(|i| model.plan(i).inputs().expect("inputs"))
        .collect();
    for trial in 0..TRIALS {
        let mut rng = Rng::new(0xCA9 + trial);
        let init = random_state_seq(
            &h,
            &is,
            &inputs,
            &mut factory,
            &mut rng,
            &mut region,
            p + SEQ_S1,
        );
        let pattern = region.buf_mut().to_vec();
        let (ns, nnext) = run_once(&init, &pattern, &mut region, p);
        let native = Outcome {
            state: ns,
            buf: region.buf_mut().to_vec(),
            next: nnext,
        };
        let rec = Record::new();
        arm_tls(&h, &rec);
        let (mut xs, xnext) = run_once(&init, &pattern, &mut region, t.code);
        assert_eq!(xnext, is[MAX_INSTRUCTIONS].ip(), "exit to the next form");
        // Go on natively from there, over the memory as the block left it.
        // SAFETY: this thread's own state.
        unsafe { (*tls::this()).next = 0 };
        run(&mut xs, xnext);
        let both = Outcome {
            state: xs,
            buf: region.buf_mut().to_vec(),
            next: tls_next_cursor().0,
        };
        let d = compare(&h, &native, &both);
        assert!(d.is_empty(), "trial {trial}: {d:?}");
        let mut sp = 0i64;
        for (k, i) in is[..MAX_INSTRUCTIONS].iter().enumerate() {
            let d = &out[k];
            assert_eq!((d.ip, d.sp_delta), (i.ip(), sp), "instruction {k}");
            let first = usize::from(d.offset) / 8;
            for (q, r) in (first..).zip(inputs[k].gpr_list()) {
                let want = if r == Register::RSP {
                    init.regs[r.number()].wrapping_add(sp as u64)
                } else {
                    init.regs[r.number()]
                };
                assert_eq!(rec.words[q], want, "instruction {k}: {r:?}");
            }
            sp += i64::from(i.stack_pointer_increment());
        }
    }
}

/// AVX-512 forms translated for a processor with AVX-512 (this one need
/// not have it: nothing AVX-512 runs here). The block stores each input
/// before the copied instruction, at the offset its description gives:
/// general registers with `mov`, the opmask with `kmovq`, ZMM and
/// XMM16-31/YMM16-31 with EVEX `vmovdqu64`. The replay's machine, filled
/// from a hand-built record laid out at those offsets, answers `opmask` and
/// `vector` with what the record holds (zero-extended to 64 bytes, nothing
/// for a register that is not an input), and the model over it gives the
/// hand-computed accesses.
#[test]
fn avx512_inputs_are_stored_with_kmovq_and_vmovdqu64_and_answered_from_the_record() {
    use super::translate::VectorStores;
    use crate::model::MemAccess;
    use coldcache_sim::AccessKind;
    use iced_x86::Code;
    let h = Host::new();
    let mut cache = CodeCache::new();
    let mut region = Region::new();
    let all = VectorStores {
        avx: true,
        avx512f: true,
        avx512vl: true,
        avx512bw: true,
    };
    let mut tr = Translator::with_vector_stores(h.facts, all);
    let mut model = Model::new(h.facts);
    let p = region.code();
    let read = |addr: u64, size: u32| MemAccess {
        kind: AccessKind::Read,
        addr,
        size,
    };
    const RAX: u64 = 0x10_0000;
    // (form, expected stores (code, register), k1, vector bytes, accesses).
    let mut zmm1 = [0u8; 64];
    for (k, b) in zmm1.chunks_mut(4).enumerate() {
        b.copy_from_slice(&(k as i32 - 3).to_le_bytes());
    }
    let mut ymm17 = [0u8; 64];
    for (k, b) in ymm17[..32].chunks_mut(4).enumerate() {
        b.copy_from_slice(&(2 * k as i32).to_le_bytes());
    }
    #[allow(clippy::type_complexity)]
    let cases: [(
        &[u8],
        &[(Code, Register)],
        u64,
        Option<(Register, [u8; 64])>,
        Vec<MemAccess>,
    ); 4] = [
        // vmovdqu8 zmm0{k1}, [rax]: bytes 0-3 and 8-9 enabled.
        (
            &[0x62, 0xf1, 0x7f, 0x49, 0x6f, 0x00],
            &[
                (Code::Mov_rm64_r64, Register::RAX),
                (Code::VEX_Kmovq_m64_kr, Register::K1),
            ],
            0x30f,
            None,
            vec![read(RAX, 4), read(RAX + 8, 2)],
        ),
        // vpcmpeqb k1{k2}, ymm17, [rax+0x20]: lanes 1 and 30-31 enabled
        // (k2; k1 is the destination and no input).
        (
            &[0x62, 0xf1, 0x75, 0x22, 0x74, 0x48, 0x01],
            &[
                (Code::Mov_rm64_r64, Register::RAX),
                (Code::VEX_Kmovq_m64_kr, Register::K2),
            ],
            0xc000_0002,
            None,
            vec![read(RAX + 0x21, 1), read(RAX + 0x3e, 2)],
        ),
        // vpgatherdd zmm0{k1}, [rax+zmm1*4]: indices -3.. (dwords), lanes
        // 0 and 4 enabled.
        (
            &[0x62, 0xf2, 0x7d, 0x49, 0x90, 0x04, 0x88],
            &[
                (Code::Mov_rm64_r64, Register::RAX),
                (Code::VEX_Kmovq_m64_kr, Register::K1),
                (Code::EVEX_Vmovdqu64_zmmm512_k1z_zmm, Register::ZMM1),
            ],
            0x11,
            Some((Register::ZMM1, zmm1)),
            vec![read(RAX - 12, 4), read(RAX + 4, 4)],
        ),
        // vpgatherdd ymm0{k1}, [rax+ymm17*4]: indices 0, 2, 4, ...; lanes
        // 1 and 7 enabled.
        (
            &[0x62, 0xf2, 0x7d, 0x21, 0x90, 0x04, 0x88],
            &[
                (Code::Mov_rm64_r64, Register::RAX),
                (Code::VEX_Kmovq_m64_kr, Register::K1),
                (Code::EVEX_Vmovdqu64_ymmm256_k1z_ymm, Register::YMM17),
            ],
            0x82,
            Some((Register::YMM17, ymm17)),
            vec![read(RAX + 8, 4), read(RAX + 56, 4)],
        ),
    ];
    for (n, (form, stores, k, vector, want)) in cases.iter().enumerate() {
        let (page, i) = code_page(&h, form, p, region.buf()).expect("encodes");
        region.set_code(&page);
        let mut out = [BlockInstr {
            ip: 0,
            sp_delta: 0,
            inputs: Inputs::NONE,
            offset: 0,
            check: 0,
        }; MAX_INSTRUCTIONS];
        let t = tr
            .translate(p, p + 4096, 0, 40 + n as u32, h.tls, &mut cache, &mut out)
            .unwrap_or_else(|| panic!("{i}: refused with AVX-512 stores"));
        let plan = model.plan(&i);
        let inputs = plan.inputs().expect("recordable");
        assert_eq!(out[0].inputs, inputs, "{i}");
        assert_eq!(t.size, 16 + inputs.bytes(), "{i}: record size");
        // The block's code, up to its copy of the form.
        let mut code = vec![0u8; 512];
        assert!(crate::memory::read_bytes(t.code, &mut code));
        let mut d = Decoder::with_ip(64, &code, t.code, DecoderOptions::NONE);
        let mut found = Vec::new();
        let mut copied = false;
        let mut scratch = Register::None;
        while d.can_decode() {
            let x = d.decode();
            if x.code() == i.code() && x.op_mask() == i.op_mask() {
                copied = true;
                assert_eq!(
                    x.ip() - t.code,
                    u64::from(out[0].check),
                    "{i}: the check point is the copy"
                );
                break;
            }
            if x.code() == Code::Mov_r64_rm64
                && scratch == Register::None
                && x.memory_base() == Register::None
            {
                // `mov S, T.cursor` (the spill before it stores S).
                scratch = x.op0_register();
            }
            if x.op0_kind() == OpKind::Memory
                && x.memory_base() == scratch
                && scratch != Register::None
                && x.memory_displacement64() >= u64::from(out[0].offset)
            {
                found.push((x.code(), x.op1_register(), x.memory_displacement64()));
            }
        }
        assert!(copied, "{i}: no copy of the form in its block");
        // Expected: in record order, at the inputs' offsets.
        let o = u64::from(out[0].offset);
        let mut expect = Vec::new();
        let mut g = 0;
        for &(c, r) in stores.iter() {
            let at = if r.is_gpr() {
                g += 8;
                o + g - 8
            } else if r.is_k() {
                o + inputs.opmask_offset() as u64
            } else {
                o + inputs.vector_offsets()[0] as u64
            };
            expect.push((c, r, at));
        }
        assert_eq!(found, expect, "{i}: the stores of its inputs");
        // The replay's machine over a hand-built record.
        let mut words = vec![0u64; t.size.div_ceil(8) + 8];
        let rec = words.as_mut_ptr() as *mut u8;
        let put = |at: u64, bytes: &[u8]| {
            // SAFETY: `at + bytes.len()` lies in `words` (the record's size
            // plus 64 bytes).
            unsafe {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), rec.add(at as usize), bytes.len())
            };
        };
        put(o, &RAX.to_le_bytes());
        put(o + inputs.opmask_offset() as u64, &k.to_le_bytes());
        if let Some((r, v)) = vector {
            assert_eq!(inputs.vectors[0], *r, "{i}");
            put(o + inputs.vector_offsets()[0] as u64, &v[..r.size()]);
        }
        let mut m = RecordedMachine::with_bases(0, 0);
        // SAFETY: `words` holds the whole record and outlives `m`'s use.
        unsafe { m.fill(&out[0], rec as u64) };
        assert_eq!(m.gpr(Register::RAX), RAX, "{i}");
        assert_eq!(m.opmask(inputs.opmask), Some(*k), "{i}");
        assert_eq!(m.opmask(Register::K7), None, "{i}: K7 is no input");
        if let Some((r, v)) = vector {
            assert_eq!(m.vector(*r), Some(*v), "{i}");
        } else {
            assert_eq!(m.vector(Register::ZMM1), None, "{i}: no vector input");
        }
        let mut acc = AccessList::default();
        plan.eval(&i, &m, &mut acc).expect("modelled");
        assert_eq!(acc.as_slice(), &want[..], "{i}");
    }
}

/// A block of several instructions with vector inputs (AVX2: a masked
/// load, a gather, a masked store, a plain form between them) runs
/// natively and translated to the same state, and each instruction's
/// record, at the offset its description gives, holds its general and
/// vector registers as they were before it (no form writes a register a
/// later one reads), so the model over the record equals the model over
/// the live state.
#[test]
fn a_block_of_several_vector_input_forms_records_each_at_its_offset() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        eprintln!("skipped: this CPU lacks AVX2");
        return;
    }
    let h = Host::new();
    let mut cache = CodeCache::new();
    let mut region = Region::new();
    let mut factory = InstructionInfoFactory::new();
    let mut model = Model::new(h.facts);
    let mut tr = Translator::new(h.facts);
    let p = region.code();
    let forms: [&[u8]; 4] = [
        // vpmaskmovd ymm0, ymm1, [rax]
        &[0xc4, 0xe2, 0x75, 0x8c, 0x00],
        // vpgatherdd ymm3, [rbx+ymm4*4], ymm5
        &[0xc4, 0xe2, 0x55, 0x90, 0x1c, 0xa3],
        // add rcx, [rdx]
        &[0x48, 0x03, 0x0a],
        // vmaskmovps [rsi], ymm6, ymm7
        &[0xc4, 0xe2, 0x4d, 0x2e, 0x3e],
    ];
    const S0: u64 = 0x200;
    const S1: u64 = 0x240;
    let (page, is) = code_page_seq(&h, &forms, p, region.buf(), S0, S1).expect("laid out");
    region.set_code(&page);
    let mut out = [BlockInstr {
        ip: 0,
        sp_delta: 0,
        inputs: Inputs::NONE,
        offset: 0,
        check: 0,
    }; MAX_INSTRUCTIONS];
    let t = tr
        .translate(p, p + 4096, 0, 77, h.tls, &mut cache, &mut out)
        .expect("translated");
    // The forms and the `jmp` to S0 after them.
    assert_eq!(t.count, forms.len() + 1, "one block");
    let plans: Vec<_> = is.iter().map(|i| model.plan(i)).collect();
    let inputs: Vec<Inputs> = plans
        .iter()
        .map(|pl| pl.inputs().expect("inputs"))
        .collect();
    assert!(inputs.iter().filter(|x| !x.gprs_only()).count() == 3);
    let end = is.last().map_or(p, |i| i.next_ip());
    let fs_base = tls::thread_pointer();
    let gs_base = crate::machine::gs_base(false);
    for trial in 0..TRIALS {
        let mut rng = Rng::new(0x7EC + trial);
        let init = random_state_seq(
            &h,
            &is,
            &inputs,
            &mut factory,
            &mut rng,
            &mut region,
            p + S1,
        );
        let pattern = region.buf_mut().to_vec();
        let live = Live {
            host: &h,
            state: &init,
            fs: fs_base,
            gs: gs_base,
        };
        let lives: Vec<_> = is
            .iter()
            .zip(&plans)
            .map(|(i, pl)| {
                let mut acc = AccessList::default();
                let r = pl.eval(i, &live, &mut acc);
                (r, acc)
            })
            .collect();
        let (ns, nnext) = run_once(&init, &pattern, &mut region, p);
        let native = Outcome {
            state: ns,
            buf: region.buf_mut().to_vec(),
            next: if nnext == end { p + S0 } else { nnext },
        };
        let rec = Record::new();
        arm_tls(&h, &rec);
        let (xs, xnext) = run_once(&init, &pattern, &mut region, t.code);
        let (_, cursor) = tls_next_cursor();
        let translated = Outcome {
            state: xs,
            buf: region.buf_mut().to_vec(),
            next: if xnext == end { p + S0 } else { xnext },
        };
        let d = compare(&h, &native, &translated);
        assert!(d.is_empty(), "trial {trial}: {d:?}");
        assert_eq!(
            cursor,
            rec.start() + t.size as u64,
            "trial {trial}: record size"
        );
        let mut offset = 16;
        for (k, i) in is.iter().enumerate() {
            assert_eq!(out[k].inputs, inputs[k], "{i}");
            assert_eq!(usize::from(out[k].offset), offset, "{i}: offset");
            offset += inputs[k].bytes();
            let mut m = RecordedMachine::with_bases(fs_base, gs_base);
            // SAFETY: the block's record, complete, kept while `m` is used.
            unsafe { m.fill(&out[k], rec.start()) };
            for r in inputs[k].gpr_list() {
                assert_eq!(m.gpr(r), live.gpr(r), "trial {trial}: {i}: {r:?}");
            }
            for r in inputs[k].vector_list() {
                assert_eq!(m.vector(r), live.vector(r), "trial {trial}: {i}: {r:?}");
            }
            let mut acc = AccessList::default();
            let r = plans[k].eval(i, &m, &mut acc);
            let (lr, la) = &lives[k];
            assert_eq!(
                r.map(|_| acc.as_slice()),
                lr.map(|_| la.as_slice()),
                "trial {trial}: {i}: model over the record vs the live state"
            );
        }
        assert_eq!(offset, t.size, "record size");
    }
}
