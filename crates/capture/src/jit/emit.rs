//! A small assembler over iced-x86's encoder for the code the translator
//! writes: instructions are encoded at their final address into a buffer
//! reserved up front (no allocation per block), forward branches are
//! patched once their target is known.
//!
//! Every helper here emits only instructions that leave RFLAGS alone
//! (`mov`, `lea`, `jmp`, `jrcxz`; the translator's `kmovq`/`vmovdqu`
//! stores of recorded inputs), except where a doc says otherwise: the
//! translated code runs between the program's own instructions.

use iced_x86::{Code, Encoder, IcedError, Instruction, MemoryOperand, Register};

/// Code being assembled for one place in the code cache.
pub(crate) struct Asm {
    encoder: Encoder,
    /// Address the first byte will have.
    base: u64,
    /// Bytes emitted.
    len: usize,
    /// Whether an instruction could not be encoded.
    failed: bool,
}

impl Asm {
    /// An assembler whose buffer can hold `capacity` bytes without growing.
    pub(crate) fn new(capacity: usize) -> Asm {
        let mut encoder = Encoder::new(64);
        encoder.set_buffer(Vec::with_capacity(capacity));
        Asm {
            encoder,
            base: 0,
            len: 0,
            failed: false,
        }
    }

    /// Starts a new piece of code at address `base` (the buffer is emptied,
    /// its capacity kept).
    pub(crate) fn reset(&mut self, base: u64) {
        let mut buf = self.encoder.take_buffer();
        buf.clear();
        self.encoder.set_buffer(buf);
        self.base = base;
        self.len = 0;
        self.failed = false;
    }

    /// Bytes emitted so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Address of the next byte.
    pub(crate) fn ip(&self) -> u64 {
        self.base + self.len() as u64
    }

    /// Whether every instruction so far was encoded.
    pub(crate) fn ok(&self) -> bool {
        !self.failed
    }

    /// The code (call `take` back with `give_back`).
    pub(crate) fn take(&mut self) -> Vec<u8> {
        self.encoder.take_buffer()
    }

    /// Returns the buffer taken by `take`.
    pub(crate) fn give_back(&mut self, buf: Vec<u8>) {
        self.encoder.set_buffer(buf);
    }

    /// Encodes `instr` at the current address.
    pub(crate) fn emit(&mut self, instr: Result<Instruction, IcedError>) {
        match instr {
            Ok(i) => {
                let ip = self.ip();
                match self.encoder.encode(&i, ip) {
                    Ok(n) => self.len += n,
                    Err(e) => {
                        if cfg!(test) {
                            eprintln!("encode {i:?}: {e}");
                        }
                        self.failed = true
                    }
                }
            }
            Err(e) => {
                if cfg!(test) {
                    eprintln!("create: {e}");
                }
                self.failed = true
            }
        }
    }

    /// Marks the code as failed (something could not be emitted).
    pub(crate) fn fail(&mut self) {
        self.failed = true;
    }

    /// Appends raw bytes (a copied instruction).
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.encoder.write_u8(x);
        }
        self.len += b.len();
    }

    /// Overwrites the rel32 of a branch that ends at `end` (an offset) to
    /// reach `target`.
    pub(crate) fn patch_rel32(&mut self, end: usize, target: u64) {
        let rel = target.wrapping_sub(self.base + end as u64) as i64;
        let Ok(rel) = i32::try_from(rel) else {
            self.failed = true;
            return;
        };
        let mut buf = self.encoder.take_buffer();
        buf[end - 4..end].copy_from_slice(&rel.to_le_bytes());
        self.encoder.set_buffer(buf);
    }

    /// Overwrites the rel8 of a short branch that ends at `end`.
    pub(crate) fn patch_rel8(&mut self, end: usize, target_offset: usize) {
        let rel = target_offset as i64 - end as i64;
        let Ok(rel) = i8::try_from(rel) else {
            self.failed = true;
            return;
        };
        let mut buf = self.encoder.take_buffer();
        buf[end - 1] = rel as u8;
        self.encoder.set_buffer(buf);
    }
}

/// `fs:[off]`: a field of the running thread's translator state.
pub(crate) fn fs(off: i32) -> MemoryOperand {
    MemoryOperand::new(
        Register::None,
        Register::None,
        1,
        i64::from(off),
        8,
        false,
        Register::FS,
    )
}

/// `[base + disp]`.
pub(crate) fn at(base: Register, disp: i32) -> MemoryOperand {
    MemoryOperand::with_base_displ_size(base, i64::from(disp), if disp == 0 { 0 } else { 8 })
}

/// `mov qword [m], reg`.
pub(crate) fn store(m: MemoryOperand, reg: Register) -> Result<Instruction, IcedError> {
    Instruction::with2(Code::Mov_rm64_r64, m, reg)
}

/// `mov reg, qword [m]`.
pub(crate) fn load(reg: Register, m: MemoryOperand) -> Result<Instruction, IcedError> {
    Instruction::with2(Code::Mov_r64_rm64, reg, m)
}

/// `mov dword [m], imm32`.
pub(crate) fn store_imm32(m: MemoryOperand, v: u32) -> Result<Instruction, IcedError> {
    Instruction::with2(Code::Mov_rm32_imm32, m, v)
}

/// `mov qword [m], simm32`.
pub(crate) fn store_simm32(m: MemoryOperand, v: i32) -> Result<Instruction, IcedError> {
    Instruction::with2(Code::Mov_rm64_imm32, m, v)
}

/// `mov reg, imm64`.
pub(crate) fn mov_imm64(reg: Register, v: u64) -> Result<Instruction, IcedError> {
    Instruction::with2(Code::Mov_r64_imm64, reg, v)
}

/// `lea reg, [base + disp]`.
pub(crate) fn lea(reg: Register, base: Register, disp: i32) -> Result<Instruction, IcedError> {
    Instruction::with2(
        Code::Lea_r64_m,
        reg,
        MemoryOperand::with_base_displ_size(base, i64::from(disp), 8),
    )
}

/// `jmp qword [m]`.
pub(crate) fn jmp_mem(m: MemoryOperand) -> Result<Instruction, IcedError> {
    Instruction::with1(Code::Jmp_rm64, m)
}

/// `push reg` / `pop reg` (the dispatcher's own stack).
pub(crate) fn push(reg: Register) -> Result<Instruction, IcedError> {
    Instruction::with1(Code::Push_r64, reg)
}

/// `pop reg`.
pub(crate) fn pop(reg: Register) -> Result<Instruction, IcedError> {
    Instruction::with1(Code::Pop_r64, reg)
}
