//! Truths from this processor: run an instruction (from the same bytes the
//! model decodes) over a buffer filled with 0xAA, then with 0x55, and compare
//! the bytes it changed with the model's writes: every changed byte must be
//! inside an access the model reports, and every byte of a plain or
//! non-temporal write the model reports must have changed under one of the
//! fills (a byte cannot equal both). Read-modify-writes may leave bytes as
//! they were, so only the first rule applies to them. Stack cases check the
//! values that `push [rsp+8]` and `pop [rsp]` move.
//!
//! Each test skips (passes without checking) when the processor lacks the
//! feature it needs.

use super::*;
use core::arch::asm;
use core::arch::x86_64::{__cpuid_count, __m128i, _mm_loadu_si128};

const SIZE: usize = 16384;

#[repr(C, align(64))]
struct Buf([u8; SIZE]);

/// Runs `exec` (which executes the instruction `code` at the given buffer
/// address and returns the machine state it ran with) under both fills and
/// checks the changed bytes against the model.
fn check_writes(code: &[u8], facts: CpuFacts, exec: impl FnMut(*mut u8) -> TestMachine) {
    check_writes_except(code, facts, 0..0, exec)
}

/// [`check_writes`], except that the bytes of `may_keep` (offsets in the
/// buffer: reserved bytes inside a state component) may be left unchanged
/// by a write the model reports.
fn check_writes_except(
    code: &[u8],
    facts: CpuFacts,
    may_keep: std::ops::Range<usize>,
    mut exec: impl FnMut(*mut u8) -> TestMachine,
) {
    let mut union = vec![false; SIZE];
    let mut exact_models = Vec::new();
    for fill in [0xAAu8, 0x55] {
        let mut buf = Box::new(Buf([0; SIZE]));
        let base = buf.0.as_mut_ptr();
        // Byte by byte: a vectorised fill would leave the pattern in vector
        // registers, and saving them would then look like no write at all.
        for i in 0..SIZE {
            // SAFETY: `i` < SIZE, inside the buffer.
            unsafe { base.add(i).write_volatile(fill) };
        }
        let machine = exec(base);
        let accesses = run_with(code, &machine, facts)
            .unwrap_or_else(|e| panic!("{code:02x?} unmodelled: {e:?}"));
        let mut may = vec![false; SIZE];
        let mut exact = vec![false; SIZE];
        for a in &accesses {
            let start = a.addr.wrapping_sub(base as u64) as usize;
            assert!(
                start + a.size as usize <= SIZE,
                "{code:02x?}: {a:?} outside the buffer"
            );
            for i in start..start + a.size as usize {
                match a.kind {
                    AccessKind::Write | AccessKind::NonTemporalStore => {
                        may[i] = true;
                        exact[i] = true;
                    }
                    AccessKind::ReadModifyWrite => may[i] = true,
                    _ => {}
                }
            }
        }
        for (i, &b) in buf.0.iter().enumerate() {
            if b != fill {
                assert!(may[i], "{code:02x?}: byte {i} written outside {accesses:?}");
                union[i] = true;
            }
        }
        exact_models.push(exact);
    }
    if exact_models[0] == exact_models[1] {
        for (i, &e) in exact_models[0].iter().enumerate() {
            assert!(
                !e || union[i] || may_keep.contains(&i),
                "{code:02x?}: byte {i} modelled as written but unchanged"
            );
        }
    }
}

/// Bytes 7:4 of the PKRU state component (9), where `xsave` (standard
/// format) or `xsavec` (compacted, components of `rfbm` packed from byte
/// 576) puts it. The component is 8 bytes (CPUID 0xD.9) but PKRU is a 32-bit
/// register: the upper half is padding, which AMD EPYC Milan (family 25,
/// model 1) leaves as it was and other processors overwrite. The model
/// reports the whole component; the cache sees the same line either way.
fn pkru_padding(facts: CpuFacts, rfbm: u64, compacted: bool) -> std::ops::Range<usize> {
    const PKRU: usize = 9;
    let l = facts.xsave;
    let rfbm = rfbm & l.xcr0;
    if rfbm & (1 << PKRU) == 0 {
        return 0..0;
    }
    let start = if compacted {
        let mut next = 576usize;
        for i in 2..PKRU {
            if rfbm & (1 << i) != 0 {
                if l.align64 & (1 << i) != 0 {
                    next = next.next_multiple_of(64);
                }
                next += usize::from(l.size[i]);
            }
        }
        if l.align64 & (1 << PKRU) != 0 {
            next = next.next_multiple_of(64);
        }
        next
    } else {
        usize::from(l.offset[PKRU])
    };
    start + 4..start + 8
}

#[allow(unused_unsafe)] // CPUID intrinsics became safe fns in newer Rust.
fn xgetbv1_supported() -> bool {
    std::is_x86_feature_detected!("xsave")
        // SAFETY: leaf 0xD exists when XSAVE is supported.
        && unsafe { __cpuid_count(0xD, 1) }.eax & (1 << 2) != 0
}

#[test]
fn fxsave_writes_416_bytes() {
    // fxsave64 [rdi]
    let code = [0x48, 0x0f, 0xae, 0x07];
    check_writes(&code, CpuFacts::default(), |p| {
        // SAFETY: `p` points to a 64-byte-aligned buffer of SIZE bytes, more
        // than the 512 bytes FXSAVE may touch; it writes only memory.
        unsafe { asm!(".byte 0x48, 0x0f, 0xae, 0x07", in("rdi") p, options(nostack)) };
        TestMachine::new().set(Register::RDI, p as u64)
    });
}

#[test]
fn xsave_writes_every_requested_component() {
    let facts = coldcache_capture::machine::cpu_facts();
    if !facts.xsave.is_known() {
        return;
    }
    // xsave [rdi]
    let code = [0x0f, 0xae, 0x27];
    for rfbm in [1u64, 2, 4, 7, 0x20, u64::MAX] {
        check_writes_except(&code, facts, pkru_padding(facts, rfbm, false), |p| {
            // SAFETY: XSAVE is enabled (layout known); `p` is 64-byte
            // aligned with SIZE bytes, more than CPUID 0xD.0 EBX; XSAVE
            // writes only that memory and reads EDX:EAX.
            unsafe {
                asm!(
                    ".byte 0x0f, 0xae, 0x27",
                    in("rdi") p,
                    in("eax") rfbm as u32,
                    in("edx") (rfbm >> 32) as u32,
                    options(nostack),
                )
            };
            TestMachine::new()
                .set(Register::RDI, p as u64)
                .set(Register::RAX, rfbm & 0xffff_ffff)
                .set(Register::RDX, rfbm >> 32)
        });
    }
}

#[test]
fn xsavec_writes_requested_components_in_use() {
    let facts = coldcache_capture::machine::cpu_facts();
    if !facts.xsave.is_known() || !xgetbv1_supported() || !std::is_x86_feature_detected!("xsavec") {
        return;
    }
    // xsavec [rdi]
    let code = [0x0f, 0xc7, 0x27];
    for rfbm in [1u64, 2, 4, 0x26, 0xe0, u64::MAX] {
        check_writes_except(&code, facts, pkru_padding(facts, rfbm, true), |p| {
            let (lo, hi): (u32, u32);
            // SAFETY: XSAVEC and XGETBV with ECX=1 are supported (checked);
            // `p` is 64-byte aligned with SIZE bytes, more than the
            // compacted area; the block reads XINUSE, then saves, and writes
            // only the named registers and that memory.
            unsafe {
                asm!(
                    "mov ecx, 1",
                    ".byte 0x0f, 0x01, 0xd0",
                    "mov r10d, eax",
                    "mov r11d, edx",
                    "mov eax, r8d",
                    "mov edx, r9d",
                    ".byte 0x0f, 0xc7, 0x27",
                    in("rdi") p,
                    in("r8") rfbm & 0xffff_ffff,
                    in("r9") rfbm >> 32,
                    out("r10") lo,
                    out("r11") hi,
                    out("eax") _,
                    out("ecx") _,
                    out("edx") _,
                    options(nostack),
                )
            };
            let xinuse = (u64::from(hi) << 32) | u64::from(lo);
            TestMachine::new()
                .set(Register::RDI, p as u64)
                .set(Register::RAX, rfbm & 0xffff_ffff)
                .set(Register::RDX, rfbm >> 32)
                .xinuse(xinuse)
        });
    }
}

#[test]
fn maskmovdqu_writes_the_selected_bytes() {
    let data = [0x11u8; 16];
    let mask: [u8; 16] = [
        0x80, 0xff, 0, 0x7f, 0x80, 0, 0, 0, 0x90, 0x90, 0x90, 0, 0, 0, 0, 0x81,
    ];
    // maskmovdqu xmm1, xmm2
    let code = [0x66, 0x0f, 0xf7, 0xca];
    check_writes(&code, CpuFacts::default(), |p| {
        let dest = p.wrapping_add(5);
        // SAFETY: SSE2 is baseline on x86-64; the loads read 16-byte arrays.
        let (x1, x2): (__m128i, __m128i) = unsafe {
            (
                _mm_loadu_si128(data.as_ptr().cast()),
                _mm_loadu_si128(mask.as_ptr().cast()),
            )
        };
        // SAFETY: MASKMOVDQU writes at most 16 bytes at RDI = p + 5, inside
        // the buffer; it reads only XMM1, XMM2 and RDI.
        unsafe {
            asm!(".byte 0x66, 0x0f, 0xf7, 0xca", in("rdi") dest, in("xmm1") x1, in("xmm2") x2, options(nostack))
        };
        TestMachine::new()
            .set(Register::RDI, dest as u64)
            .vec8(Register::XMM1, &data)
            .vec8(Register::XMM2, &mask)
    });
}

#[test]
fn vmaskmovps_store_writes_the_selected_elements() {
    if !std::is_x86_feature_detected!("avx") {
        return;
    }
    let mask: [i32; 8] = [-1, -2, 0, 1, 0, i32::MIN, -9, -1];
    // vmaskmovps [rdi], ymm1, ymm0
    let code = [0xc4, 0xe2, 0x75, 0x2e, 0x07];
    check_writes(&code, CpuFacts::default(), |p| {
        // SAFETY: AVX is supported (checked).
        unsafe { vmaskmovps_store(p, &mask) };
        TestMachine::new()
            .set(Register::RDI, p as u64)
            .vec32(Register::YMM1, &mask)
    });
}

/// # Safety
/// The processor must support AVX; `p` must have 32 writable bytes.
#[target_feature(enable = "avx")]
unsafe fn vmaskmovps_store(p: *mut u8, mask: &[i32; 8]) {
    let data = [0x1111_1111i32; 8];
    // SAFETY: AVX is enabled for this function; the loads read the two
    // 32-byte arrays; the store writes at most 32 bytes at `p`.
    unsafe {
        asm!(
            "vmovdqu ymm0, [{data}]",
            "vmovdqu ymm1, [{mask}]",
            ".byte 0xc4, 0xe2, 0x75, 0x2e, 0x07",
            data = in(reg) data.as_ptr(),
            mask = in(reg) mask.as_ptr(),
            in("rdi") p,
            out("ymm0") _,
            out("ymm1") _,
            options(nostack),
        )
    };
}

fn avx512() -> bool {
    std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
}

/// Runs one AVX-512 store `code` (given again as `.byte` text) with ZMM0 =
/// 0x11 bytes, ZMM1 = `index` dwords, K1 = `k`, RDI = `p`.
macro_rules! avx512_store {
    ($bytes:literal, $p:expr, $index:expr, $k:expr) => {{
        /// # Safety
        /// AVX-512 F and BW must be supported; the store must stay inside
        /// the buffer at `p`.
        #[target_feature(enable = "avx512f,avx512bw")]
        unsafe fn store(p: *mut u8, index: &[i32; 16], k: u64) {
            let data = [0x1111_1111i32; 16];
            // SAFETY: AVX-512 F/BW are enabled for this function; the loads
            // read two 64-byte arrays; the store writes inside the caller's
            // buffer (the caller chooses `p`, indices and mask for that).
            unsafe {
                asm!(
                    "vmovdqu64 zmm0, [{data}]",
                    "vmovdqu64 zmm1, [{index}]",
                    "kmovq k1, {k}",
                    $bytes,
                    data = in(reg) data.as_ptr(),
                    index = in(reg) index.as_ptr(),
                    k = in(reg) k,
                    in("rdi") p,
                    out("zmm0") _,
                    out("zmm1") _,
                    out("k1") _,
                    options(nostack),
                )
            };
        }
        // SAFETY: the caller checked AVX-512 F/BW.
        unsafe { store($p, $index, $k) }
    }};
}

#[test]
fn avx512_masked_stores_write_the_enabled_elements() {
    if !avx512() {
        return;
    }
    let index: [i32; 16] = [3, -2, 7, 100, 5, 6, 40, 8, 9, 10, -11, 12, 13, 14, 15, 16];
    let machine = |p: *mut u8, k: u64| {
        TestMachine::new()
            .set(Register::RDI, p as u64)
            .vec32(Register::ZMM0, &[0x1111_1111; 16])
            .vec32(Register::ZMM1, &index)
            .k(Register::K1, k)
    };
    for k in [0xf00f_u64, 0x8421, 0x1, 0xffff, 0x0f0f_0f0f_f0f0_f0f0] {
        // vmovdqu8 [rdi]{k1}, zmm0
        check_writes(
            &[0x62, 0xf1, 0x7f, 0x49, 0x7f, 0x07],
            CpuFacts::default(),
            |p| {
                let p = p.wrapping_add(1024);
                avx512_store!(".byte 0x62, 0xf1, 0x7f, 0x49, 0x7f, 0x07", p, &index, k);
                machine(p, k)
            },
        );
        // vmovups [rdi]{k1}, zmm0
        check_writes(
            &[0x62, 0xf1, 0x7c, 0x49, 0x11, 0x07],
            CpuFacts::default(),
            |p| {
                let p = p.wrapping_add(1024);
                avx512_store!(".byte 0x62, 0xf1, 0x7c, 0x49, 0x11, 0x07", p, &index, k);
                machine(p, k)
            },
        );
        // vpcompressd [rdi]{k1}, zmm0
        check_writes(
            &[0x62, 0xf2, 0x7d, 0x49, 0x8b, 0x07],
            CpuFacts::default(),
            |p| {
                let p = p.wrapping_add(1024);
                avx512_store!(".byte 0x62, 0xf2, 0x7d, 0x49, 0x8b, 0x07", p, &index, k);
                machine(p, k)
            },
        );
        // vpmovdb [rdi]{k1}, zmm0
        check_writes(
            &[0x62, 0xf2, 0x7e, 0x49, 0x31, 0x07],
            CpuFacts::default(),
            |p| {
                let p = p.wrapping_add(1024);
                avx512_store!(".byte 0x62, 0xf2, 0x7e, 0x49, 0x31, 0x07", p, &index, k);
                machine(p, k)
            },
        );
        // vpscatterdd [rdi+zmm1*4]{k1}, zmm0
        check_writes(
            &[0x62, 0xf2, 0x7d, 0x49, 0xa0, 0x04, 0x8f],
            CpuFacts::default(),
            |p| {
                let p = p.wrapping_add(1024);
                avx512_store!(
                    ".byte 0x62, 0xf2, 0x7d, 0x49, 0xa0, 0x04, 0x8f",
                    p,
                    &index,
                    k
                );
                machine(p, k)
            },
        );
    }
}

#[test]
fn bit_test_writes_inside_the_modelled_operand() {
    let cases: [(&[u8], u64); 6] = [
        (&[0x48, 0x0f, 0xab, 0x0f], (-1i64) as u64), // bts [rdi], rcx
        (&[0x48, 0x0f, 0xb3, 0x0f], (-100i64) as u64), // btr [rdi], rcx
        (&[0x0f, 0xbb, 0x0f], (-33i32) as u32 as u64), // btc [rdi], ecx
        (&[0x0f, 0xab, 0x0f], 1000),                 // bts [rdi], ecx
        (&[0x66, 0x0f, 0xab, 0x0f], 0xffef),         // bts [rdi], cx (-17)
        (&[0x66, 0x0f, 0xbb, 0x0f], 0x1234_0100),    // btc [rdi], cx (256)
    ];
    for (code, offset) in cases {
        check_writes(code, CpuFacts::default(), |p| {
            let p = p.wrapping_add(SIZE / 2);
            // SAFETY: the bit addressed is within ±2^16 bits (8 KiB) of
            // `p`, the middle of the buffer; the instruction is one of the
            // bt* forms above, reading RDI and RCX and writing one operand.
            unsafe {
                match code {
                    [0x48, 0x0f, 0xab, 0x0f] => {
                        asm!(".byte 0x48, 0x0f, 0xab, 0x0f", in("rdi") p, in("rcx") offset, options(nostack))
                    }
                    [0x48, 0x0f, 0xb3, 0x0f] => {
                        asm!(".byte 0x48, 0x0f, 0xb3, 0x0f", in("rdi") p, in("rcx") offset, options(nostack))
                    }
                    [0x0f, 0xbb, 0x0f] => {
                        asm!(".byte 0x0f, 0xbb, 0x0f", in("rdi") p, in("rcx") offset, options(nostack))
                    }
                    [0x0f, 0xab, 0x0f] => {
                        asm!(".byte 0x0f, 0xab, 0x0f", in("rdi") p, in("rcx") offset, options(nostack))
                    }
                    [0x66, 0x0f, 0xab, 0x0f] => {
                        asm!(".byte 0x66, 0x0f, 0xab, 0x0f", in("rdi") p, in("rcx") offset, options(nostack))
                    }
                    [0x66, 0x0f, 0xbb, 0x0f] => {
                        asm!(".byte 0x66, 0x0f, 0xbb, 0x0f", in("rdi") p, in("rcx") offset, options(nostack))
                    }
                    _ => unreachable!(),
                }
            };
            TestMachine::new()
                .set(Register::RDI, p as u64)
                .set(Register::RCX, offset)
        });
    }
}

#[test]
fn push_memory_reads_before_rsp_moves() {
    let (a, b) = (0xaaaa_u64, 0xbbbb_u64);
    let pushed: u64;
    // SAFETY: balanced stack use below the red zone (no `nostack`), no
    // other memory touched: push b; push a; push [rsp+8]; pop; drop two.
    unsafe {
        asm!(
            "sub rsp, 128",
            "push {b}",
            "push {a}",
            ".byte 0xff, 0x74, 0x24, 0x08",
            "pop {res}",
            "add rsp, 144",
            a = in(reg) a,
            b = in(reg) b,
            res = lateout(reg) pushed,
        )
    };
    // [rsp+8] with RSP before the push holds b (the model's r(RSP + 8)).
    assert_eq!(pushed, b);
}

#[test]
fn pop_to_rsp_based_memory_writes_after_rsp_moves() {
    let (a, b) = (0xaaaa_u64, 0xbbbb_u64);
    let slot: u64;
    // SAFETY: balanced stack use below the red zone (no `nostack`):
    // push b; push a; pop [rsp]; pop.
    unsafe {
        asm!(
            "sub rsp, 128",
            "push {b}",
            "push {a}",
            ".byte 0x8f, 0x04, 0x24",
            "pop {res}",
            "add rsp, 128",
            a = in(reg) a,
            b = in(reg) b,
            res = lateout(reg) slot,
        )
    };
    // pop [rsp] read a at RSP and wrote it at RSP + 8 (where b was): the
    // model's w(RSP + 8).
    assert_eq!(slot, a);
}
