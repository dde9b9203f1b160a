//! No allocation after `Model::new`: a counting global allocator (per
//! thread, so parallel tests do not disturb each other) around `plan` and
//! `eval` over thousands of varied instructions, including every one in
//! `data/varied.txt` and pseudo-random byte strings. Also checks that
//! neither panics on any of them.

use super::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the thread-local counter is a `const`-initialised `Cell`, which
// never allocates, and `try_with` tolerates thread teardown.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(|n| n.get())
}

/// Every instruction of `data/varied.txt`, every opcode of the main maps
/// in a few forms, then `random` instructions
/// decoded from a deterministic xorshift byte stream, decoded at distinct IPs.
fn varied_instructions(random: usize) -> Vec<Instruction> {
    let text = include_str!("../data/varied.txt");
    let mut out = Vec::new();
    for line in text.lines() {
        let hex = line.split('|').next().unwrap_or("");
        let bytes: Vec<u8> = hex
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect();
        if bytes.is_empty() {
            continue;
        }
        out.push(decode(&bytes));
    }
    assert!(out.len() > 100);
    // Every opcode of the legacy maps under common prefixes, and of the
    // VEX and EVEX maps 1-3, with register and memory ModRM forms.
    let modrms: [&[u8]; 3] = [&[0x00], &[0xc0], &[0x04, 0x88]];
    let push = |bytes: Vec<u8>, out: &mut Vec<Instruction>| {
        let mut padded = bytes;
        padded.extend_from_slice(&[0x10; 6]);
        let mut decoder = Decoder::with_ip(64, &padded, IP, DecoderOptions::NONE);
        let instr = decoder.decode();
        if !instr.is_invalid() {
            out.push(instr);
        }
    };
    for prefix in [
        &[][..],
        &[0x66],
        &[0xf2],
        &[0xf3],
        &[0x48],
        &[0xf0],
        &[0x67],
    ] {
        for map in [&[][..], &[0x0f], &[0x0f, 0x38], &[0x0f, 0x3a]] {
            for op in 0..=255u8 {
                for modrm in modrms {
                    for reg in [0u8, 1, 4, 6, 7] {
                        let mut b = prefix.to_vec();
                        b.extend_from_slice(map);
                        b.push(op);
                        b.extend_from_slice(modrm);
                        b[prefix.len() + map.len() + 1] |= reg << 3;
                        push(b, &mut out);
                    }
                }
            }
        }
    }
    for map in 1..=3u8 {
        for pp in 0..4u8 {
            for w in 0..2u8 {
                for op in 0..=255u8 {
                    for modrm in modrms {
                        for l in 0..2u8 {
                            let mut b = vec![0xc4, 0xe0 | map, (w << 7) | 0x78 | (l << 2) | pp, op];
                            b.extend_from_slice(modrm);
                            push(b, &mut out);
                        }
                        for (ll, aaa, bcst) in [(2u8, 1u8, 0u8), (1, 0, 0), (2, 2, 1), (0, 1, 0)] {
                            let p2 = (ll << 5) | (bcst << 4) | 0x08 | aaa;
                            let mut b = vec![0x62, 0xf0 | map, (w << 7) | 0x7c | pp, p2, op];
                            b.extend_from_slice(modrm);
                            push(b, &mut out);
                        }
                    }
                }
            }
        }
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut buf = [0u8; 16];
    let mut produced = 0;
    while produced < random {
        for b in buf.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *b = state as u8;
        }
        // Bias towards vector encodings now and then.
        if produced % 5 == 0 {
            buf[0] = [0x62, 0xc4, 0xc5, 0x0f, 0x66][(state >> 40) as usize % 5];
        }
        let mut decoder =
            Decoder::with_ip(64, &buf, IP + produced as u64 * 16, DecoderOptions::NONE);
        let instr = decoder.decode();
        if !instr.is_invalid() {
            out.push(instr);
        }
        produced += 1;
    }
    out
}

/// A machine where every register the model may ask for exists.
fn full_machine() -> TestMachine {
    let mut m = TestMachine::new()
        .fs(0x7000_0000)
        .gs(0x7100_0000)
        .mem(0x1000 + 512, 0b111)
        .mem(0x1000 + 520, 0)
        .xinuse(0b1110_0111);
    for (i, reg) in [
        Register::RAX,
        Register::RBX,
        Register::RCX,
        Register::RDX,
        Register::RSI,
        Register::RDI,
        Register::RSP,
        Register::RBP,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
    ]
    .into_iter()
    .enumerate()
    {
        m = m.set(reg, 0x1000 + i as u64 * 0x10_0000);
    }
    for reg in all_zmm() {
        let elems: Vec<i32> = (0..16)
            .map(|e| (e * 37 - 100) * if e % 3 == 0 { -1 } else { 1 })
            .collect();
        m = m.vec32(reg, &elems);
    }
    for k in [
        Register::K0,
        Register::K1,
        Register::K2,
        Register::K3,
        Register::K4,
        Register::K5,
        Register::K6,
        Register::K7,
    ] {
        m = m.k(k, 0xa5a5);
    }
    for mm in [
        Register::MM0,
        Register::MM1,
        Register::MM2,
        Register::MM3,
        Register::MM4,
        Register::MM5,
        Register::MM6,
        Register::MM7,
    ] {
        m = m.mm(mm, 0x8000_8000_0080_0080);
    }
    m
}

fn all_zmm() -> [Register; 32] {
    use Register::*;
    [
        ZMM0, ZMM1, ZMM2, ZMM3, ZMM4, ZMM5, ZMM6, ZMM7, ZMM8, ZMM9, ZMM10, ZMM11, ZMM12, ZMM13,
        ZMM14, ZMM15, ZMM16, ZMM17, ZMM18, ZMM19, ZMM20, ZMM21, ZMM22, ZMM23, ZMM24, ZMM25, ZMM26,
        ZMM27, ZMM28, ZMM29, ZMM30, ZMM31,
    ]
}

#[test]
fn plan_and_eval_never_allocate_after_model_new() {
    let instrs = varied_instructions(20_000);
    let machine = full_machine();
    let empty = TestMachine::new();
    let mut facts = coldcache_capture::machine::cpu_facts();
    if !facts.xsave.is_known() {
        facts.xsave.xcr0 = 0b111;
        facts.xsave.offset[2] = 576;
        facts.xsave.size[2] = 256;
    }
    let mut model = Model::new(facts);
    let mut out = AccessList::default();
    let mut modelled = 0usize;
    // Instructions during which something allocated (reserved beforehand so
    // recording them does not allocate).
    let mut offenders: Vec<usize> = Vec::with_capacity(instrs.len());
    let before = allocations();
    for (i, instr) in instrs.iter().enumerate() {
        let start = allocations();
        let plan = model.plan(instr);
        for m in [&machine, &empty] {
            out.clear();
            if plan.eval(instr, m, &mut out).is_ok() {
                modelled += 1;
            }
            out.clear();
            let _ = plan.eval_after(instr, m, &mut out);
        }
        if allocations() != start {
            offenders.push(i);
        }
    }
    let after = allocations();
    let offenders: Vec<String> = offenders.iter().map(|&i| instrs[i].to_string()).collect();
    assert_eq!(
        after - before,
        0,
        "allocations while planning {} instructions, in: {offenders:?}",
        instrs.len()
    );
    assert!(instrs.len() > 50_000, "{}", instrs.len());
    assert!(
        modelled > instrs.len(),
        "{modelled} of {}",
        instrs.len() * 2
    );
}
