//! The saved machine state of a trapped thread, read from the `ucontext_t`
//! the kernel hands a signal handler: general registers from `gregs`, vector
//! registers from the XSAVE area behind `fpregs`, FS/GS bases from the
//! running thread itself (the handler runs on the trapped thread).

use crate::model::{CpuFacts, Machine};
use iced_x86::Register;

/// Offsets of XSAVE components in the (standard-format) signal frame,
/// read from CPUID leaf 0xD at capture start.
#[derive(Clone, Copy, Debug, Default)]
pub struct XsaveLayout {
    /// Offset of the upper halves of YMM0-15 (component 2), 0 if absent.
    pub ymm_hi: u32,
    /// Offset of the opmask registers (component 5), 0 if absent.
    pub opmask: u32,
    /// Offset of the upper 256 bits of ZMM0-15 (component 6), 0 if absent.
    pub zmm_hi256: u32,
    /// Offset of ZMM16-31 (component 7), 0 if absent.
    pub hi16_zmm: u32,
    /// Whether `rdfsbase`/`rdgsbase` may be used (HWCAP2_FSGSBASE).
    pub fsgsbase: bool,
}

impl XsaveLayout {
    /// Reads the layout of this machine.
    pub fn detect() -> XsaveLayout {
        let mut l = XsaveLayout::default();
        #[allow(unused_unsafe)] // CPUID intrinsics became safe fns in newer Rust.
        {
            // SAFETY: CPUID leaf 0 exists on every x86-64 processor.
            let max = unsafe { core::arch::x86_64::__cpuid(0) }.eax;
            if max >= 0xD {
                let off = |i: u32| {
                    // SAFETY: leaf 0xD exists (checked above); sub-leaves
                    // of absent components return zeros.
                    let r = unsafe { core::arch::x86_64::__cpuid_count(0xD, i) };
                    if r.eax == 0 {
                        0
                    } else {
                        r.ebx
                    }
                };
                l.ymm_hi = off(2);
                l.opmask = off(5);
                l.zmm_hi256 = off(6);
                l.hi16_zmm = off(7);
            }
        }
        // SAFETY: getauxval has no preconditions.
        let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
        l.fsgsbase = hwcap2 & 2 != 0;
        l
    }
}

/// Magic in the software-reserved bytes of the FXSAVE area saying an XSAVE
/// header follows (Linux `FP_XSTATE_MAGIC1`).
const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;

/// The registers of a trapped thread.
pub struct ContextMachine<'a> {
    gregs: &'a [i64; 23],
    fpregs: *const u8,
    layout: &'a XsaveLayout,
}

impl<'a> ContextMachine<'a> {
    /// Wraps a signal handler's context.
    ///
    /// # Safety
    /// `uc` must be the `ucontext_t` the kernel passed to the running signal
    /// handler, alive for `'a`.
    pub unsafe fn new(uc: &'a libc::ucontext_t, layout: &'a XsaveLayout) -> Self {
        ContextMachine {
            gregs: &uc.uc_mcontext.gregs,
            fpregs: uc.uc_mcontext.fpregs as *const u8,
            layout,
        }
    }

    /// A saved general register by its `REG_*` index.
    #[inline]
    pub fn greg(&self, index: libc::c_int) -> u64 {
        self.gregs[index as usize] as u64
    }

    fn full(&self, reg: Register) -> Option<u64> {
        greg_of(reg).map(|i| self.greg(i))
    }

    /// Reads `N` bytes of the FP/XSAVE area at `offset`, if the area exists.
    fn fp_bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        if self.fpregs.is_null() {
            return None;
        }
        let mut out = [0u8; N];
        // SAFETY: `fpregs` points to the FXSAVE area of the signal frame,
        // which is at least 512 bytes; callers only read beyond 512 bytes
        // after `xstate_has` confirmed the XSAVE header and the component.
        unsafe { core::ptr::copy_nonoverlapping(self.fpregs.add(offset), out.as_mut_ptr(), N) };
        Some(out)
    }

    /// True when the frame's XSAVE area holds component `bit` (not in its
    /// initial state of all zeros).
    fn xstate_has(&self, bit: u32) -> Option<bool> {
        let magic: [u8; 4] = self.fp_bytes(464)?;
        if u32::from_le_bytes(magic) != FP_XSTATE_MAGIC1 {
            return None;
        }
        let bv: [u8; 8] = self.fp_bytes(512)?;
        Some(u64::from_le_bytes(bv) & (1 << bit) != 0)
    }
}

impl Machine for ContextMachine<'_> {
    fn gpr(&self, reg: Register) -> u64 {
        let full = reg.full_register();
        let v = self.full(full).unwrap_or(0);
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

    fn rflags(&self) -> u64 {
        self.greg(libc::REG_EFL)
    }

    fn segment_base(&self, seg: Register) -> u64 {
        match seg {
            Register::FS => fs_base(self.layout.fsgsbase),
            Register::GS => gs_base(self.layout.fsgsbase),
            _ => 0,
        }
    }

    fn vector(&self, reg: Register) -> Option<[u8; 64]> {
        let mut out = [0u8; 64];
        let (n, width) = if reg.is_xmm() {
            (reg.number(), 16)
        } else if reg.is_ymm() {
            (reg.number(), 32)
        } else if reg.is_zmm() {
            (reg.number(), 64)
        } else {
            return None;
        };
        if n < 16 {
            let x: [u8; 16] = self.fp_bytes(160 + 16 * n)?;
            out[..16].copy_from_slice(&x);
            if width >= 32 {
                if self.layout.ymm_hi == 0 {
                    return None;
                }
                if self.xstate_has(2)? {
                    let y: [u8; 16] = self.fp_bytes(self.layout.ymm_hi as usize + 16 * n)?;
                    out[16..32].copy_from_slice(&y);
                }
            }
            if width == 64 {
                if self.layout.zmm_hi256 == 0 {
                    return None;
                }
                if self.xstate_has(6)? {
                    let z: [u8; 32] = self.fp_bytes(self.layout.zmm_hi256 as usize + 32 * n)?;
                    out[32..].copy_from_slice(&z);
                }
            }
        } else {
            if self.layout.hi16_zmm == 0 {
                return None;
            }
            if self.xstate_has(7)? {
                let z: [u8; 64] = self.fp_bytes(self.layout.hi16_zmm as usize + 64 * (n - 16))?;
                out.copy_from_slice(&z[..]);
            }
            out[width..].fill(0);
        }
        Some(out)
    }

    fn mmx(&self, reg: Register) -> Option<u64> {
        if !reg.is_mm() {
            return None;
        }
        // MM0-7 alias the low 64 bits of ST0-7 at offset 32 + 16*i.
        let b: [u8; 8] = self.fp_bytes(32 + 16 * reg.number())?;
        Some(u64::from_le_bytes(b))
    }

    fn read_u64(&self, addr: u64) -> Option<u64> {
        crate::memory::read_word(addr)
    }

    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> bool {
        crate::memory::read_bytes(addr, buf)
    }

    fn read_code(&self, addr: u64, buf: &mut [u8]) -> bool {
        if buf.len() > (0x1000 - (addr & 0xFFF)) as usize {
            return crate::memory::read_bytes(addr, buf);
        }
        // SAFETY: the thread is about to execute the instruction at `addr`,
        // so the page of its first byte is mapped and readable code of this
        // process, and `buf` does not reach past that page (checked above).
        unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, buf.as_mut_ptr(), buf.len()) };
        true
    }

    fn xinuse(&self) -> Option<u64> {
        // The kernel saved the frame with XSAVE, so XSTATE_BV holds the
        // components that were not in their initial state.
        let magic: [u8; 4] = self.fp_bytes(464)?;
        if u32::from_le_bytes(magic) != FP_XSTATE_MAGIC1 {
            return None;
        }
        let bv: [u8; 8] = self.fp_bytes(512)?;
        Some(u64::from_le_bytes(bv))
    }

    fn opmask(&self, reg: Register) -> Option<u64> {
        if !reg.is_k() {
            return None;
        }
        let k = reg.number();
        if k >= 8 || self.layout.opmask == 0 {
            return None;
        }
        if !self.xstate_has(5)? {
            return Some(0);
        }
        let b: [u8; 8] = self.fp_bytes(self.layout.opmask as usize + 8 * k)?;
        Some(u64::from_le_bytes(b))
    }
}

/// FS base of the running thread.
fn fs_base(fsgsbase: bool) -> u64 {
    if fsgsbase {
        let v: u64;
        // SAFETY: HWCAP2_FSGSBASE says the kernel enabled user-mode
        // RDFSBASE; it only reads the FS base register.
        unsafe {
            core::arch::asm!("rdfsbase {}", out(reg) v, options(nomem, nostack, preserves_flags))
        };
        v
    } else {
        let mut v: u64 = 0;
        // SAFETY: ARCH_GET_FS writes the FS base to the given address,
        // which points to a live local.
        unsafe { libc::syscall(libc::SYS_arch_prctl, 0x1003, &mut v as *mut u64) };
        v
    }
}

/// GS base of the running thread.
pub(crate) fn gs_base(fsgsbase: bool) -> u64 {
    if fsgsbase {
        let v: u64;
        // SAFETY: as for `rdfsbase` above.
        unsafe {
            core::arch::asm!("rdgsbase {}", out(reg) v, options(nomem, nostack, preserves_flags))
        };
        v
    } else {
        let mut v: u64 = 0;
        // SAFETY: ARCH_GET_GS writes the GS base to a live local.
        unsafe { libc::syscall(libc::SYS_arch_prctl, 0x1004, &mut v as *mut u64) };
        v
    }
}

/// The signal context's `REG_*` index of a 64-bit general register, RSP
/// and RIP included; `None` for any other register.
pub(crate) fn greg_of(reg: Register) -> Option<libc::c_int> {
    use libc::*;
    Some(match reg {
        Register::RAX => REG_RAX,
        Register::RBX => REG_RBX,
        Register::RCX => REG_RCX,
        Register::RDX => REG_RDX,
        Register::RSI => REG_RSI,
        Register::RDI => REG_RDI,
        Register::RBP => REG_RBP,
        Register::RSP => REG_RSP,
        Register::R8 => REG_R8,
        Register::R9 => REG_R9,
        Register::R10 => REG_R10,
        Register::R11 => REG_R11,
        Register::R12 => REG_R12,
        Register::R13 => REG_R13,
        Register::R14 => REG_R14,
        Register::R15 => REG_R15,
        Register::RIP => REG_RIP,
        _ => return None,
    })
}

/// The processor facts the access model needs, read from CPUID (and
/// XCR0 with `xgetbv`) on this machine.
pub fn cpu_facts() -> CpuFacts {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)] // CPUID intrinsics became safe fns in newer Rust.
    {
        use core::arch::x86_64::{__cpuid, __cpuid_count};
        // SAFETY: CPUID is available on every x86-64 processor; leaf 0 is
        // always valid and tells whether leaf 0xD exists.
        let max_leaf = unsafe { __cpuid(0) }.eax;
        // SAFETY: leaf 1 exists on every x86-64 processor.
        let osxsave = unsafe { __cpuid(1) }.ecx & (1 << 27) != 0;
        if max_leaf >= 0xD && osxsave {
            // SAFETY: leaf 0xD exists (checked above).
            let d = unsafe { __cpuid_count(0xD, 0) };
            let mut facts = CpuFacts {
                xsave_size: d.ebx,
                xsave: crate::model::XsaveLayout::default(),
            };
            let (lo, hi): (u32, u32);
            // SAFETY: CPUID.1:ECX.OSXSAVE is set (checked above), so the
            // OS enabled XSAVE and `xgetbv` with ECX=0 (XCR0) is valid at
            // any privilege level; it only writes EAX and EDX.
            unsafe {
                core::arch::asm!(
                    "xgetbv",
                    in("ecx") 0u32,
                    out("eax") lo,
                    out("edx") hi,
                    options(nomem, nostack, preserves_flags),
                );
            }
            let xcr0 = (u64::from(hi) << 32) | u64::from(lo);
            facts.xsave.xcr0 = xcr0;
            for i in 2..crate::model::XSAVE_COMPONENTS {
                if xcr0 & (1 << i) == 0 {
                    continue;
                }
                // SAFETY: leaf 0xD exists; sub-leaves for enabled
                // components are defined.
                let c = unsafe { __cpuid_count(0xD, i as u32) };
                if c.eax > u32::from(u16::MAX) || c.ebx > u32::from(u16::MAX) {
                    // Cannot be stored: leave the layout unknown.
                    facts.xsave = crate::model::XsaveLayout::default();
                    break;
                }
                facts.xsave.size[i] = c.eax as u16;
                facts.xsave.offset[i] = c.ebx as u16;
                if c.ecx & 2 != 0 {
                    facts.xsave.align64 |= 1 << i;
                }
            }
            return facts;
        }
    }
    CpuFacts::default()
}
