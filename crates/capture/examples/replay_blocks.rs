//! The fast mode's consumer alone, for Callgrind:
//! `Accountant::step_block_watching` over the inner loop of
//! `tests-programs/capture/frame.c` (a dense matrix multiply), its record
//! made up as the translated code would write it, with the `cachegrind`
//! preset. No trap, no translation, no threads: the instruction count per
//! replayed instruction is what the accountant and the simulator cost
//! (deterministic, unlike a wall clock on a shared machine). Its figures
//! from before it passed a record (2026-12-03) set the registers by a
//! `fill` far cheaper than the replay's (two stores): not comparable.
//!
//! ```text
//! cargo build --release -p coldcache-capture --example replay_blocks
//! valgrind --tool=callgrind --toggle-collect='replay_blocks::replay' \
//!     target/release/examples/replay_blocks 100
//! ```
//!
//! `REPLAY_TIMELINE=1` records a timeline too (`--timeline`);
//! `REPLAY_LINE_USE=1` measures line use (`--line-use`).
//!
//! `N` (default 100) is the matrix side: N³ executions of the 7-instruction
//! block, 2 reads each. Prints the totals of the dump, to check that two
//! builds counted alike.

use coldcache_capture::account::{Accountant, BlockSlot, Reserves, Setup, Verdict};
use coldcache_capture::model::{Inputs, Machine};
use coldcache_capture::unwind::StackUnwinder;
use coldcache_dump::Meta;
use coldcache_sim::presets;
use iced_x86::Register;

/// The loop at `CODE`: `movsd xmm1, [rax]; mulsd xmm1, [rdx]; addsd xmm0,
/// xmm1; add rax, 8; add rdx, rcx; cmp rax, rsi; jne CODE`.
const LOOP: [u8; 24] = [
    0xF2, 0x0F, 0x10, 0x08, 0xF2, 0x0F, 0x59, 0x0A, 0xF2, 0x0F, 0x58, 0xC1, 0x48, 0x83, 0xC0, 0x08,
    0x48, 0x01, 0xCA, 0x48, 0x39, 0xF0, 0x75, 0xE8,
];
const CODE: u64 = 0x40_1000;
const IPS: [u64; 7] = [0, 4, 8, 12, 16, 19, 22];
const A: u64 = 0x1000_0000;
const B: u64 = 0x2000_0000;
const SP: u64 = 0x7FFF_0000;

/// The registers the plans read, set per instruction by the replay.
struct Regs {
    regs: [u64; 16],
}

/// The index of 64-bit register `r` in [`Regs::regs`] (RAX..R15 are
/// consecutive in iced's numbering).
const fn n(r: Register) -> usize {
    r as usize - Register::RAX as usize
}

impl Machine for Regs {
    /// As the replay's `RecordedMachine` reads them: a 64-bit register
    /// without iced's tables (the loop's addresses use no other).
    fn gpr(&self, reg: Register) -> u64 {
        let i = (reg as usize).wrapping_sub(Register::RAX as usize);
        if i < 16 {
            return self.regs[i];
        }
        self.regs[reg.full_register().number()]
    }
    fn rflags(&self) -> u64 {
        0x202
    }
    fn segment_base(&self, _seg: Register) -> u64 {
        0
    }
    fn vector(&self, _reg: Register) -> Option<[u8; 64]> {
        None
    }
    fn opmask(&self, _reg: Register) -> Option<u64> {
        None
    }
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.read_code(addr, buf)
    }
    fn read_code(&self, addr: u64, buf: &mut [u8]) -> bool {
        if !(CODE..CODE + 0x1000).contains(&addr) {
            return false;
        }
        for (i, b) in buf.iter_mut().enumerate() {
            let o = (addr - CODE) as usize + i;
            *b = LOOP.get(o).copied().unwrap_or(0xCC);
        }
        true
    }
}

/// Every execution of the block, in the order the matrix multiply runs
/// it: `rax` walks a row of A, `rdx` a column of B.
#[inline(never)]
fn replay(acc: &mut Accountant, size: u64) {
    // As the translator lays out the block's record: its number and RSP,
    // then RAX for the first instruction and RDX for the second (the
    // registers their plans read), nothing for the others.
    let one = |r: Register| Inputs {
        gprs: [r, Register::None, Register::None, Register::None],
        ..Inputs::NONE
    };
    let mut slots: Vec<BlockSlot> = IPS
        .iter()
        .enumerate()
        .map(|(k, &o)| match k {
            0 => BlockSlot::recorded(CODE + o, 0, one(Register::RAX), 16),
            1 => BlockSlot::recorded(CODE + o, 0, one(Register::RDX), 24),
            _ => BlockSlot::recorded(CODE + o, 0, Inputs::NONE, 32),
        })
        .collect();
    let mut record = [0u64, SP, 0, 0];
    let mut m = Regs { regs: [0; 16] };
    m.regs[n(Register::RCX)] = size * 8;
    m.regs[n(Register::RSP)] = SP;
    for i in 0..size {
        for j in 0..size {
            for k in 0..size {
                let rax = A + (i * size + k) * 8;
                let rdx = B + (k * size + j) * 8;
                m.regs[n(Register::RSI)] = A + (i * size + size) * 8;
                (record[2], record[3]) = (rax, rdx);
                let v = acc.step_block_watching(
                    1,
                    SP,
                    &mut slots,
                    &mut m,
                    &record,
                    |s, m| {
                        // After `add rax, 8` and `add rdx, rcx` the later
                        // instructions see the new values.
                        let after = s > 3;
                        m.regs[n(Register::RAX)] = rax + if after { 8 } else { 0 };
                        m.regs[n(Register::RDX)] = rdx + if s > 4 { size * 8 } else { 0 };
                    },
                    0,
                    |_, _| {},
                );
                assert_eq!(v, Verdict::Continue);
            }
        }
    }
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|v| v.parse().expect("N, a number"))
        .unwrap_or(100);
    let setup = Setup {
        cache: presets::cachegrind_default(),
        reserves: Reserves::default(),
        core_map: Vec::new(),
        all_threads: false,
        max_instructions: 0,
        trace: None,
        function: None,
        stop_entries: [0; 2],
        exec_ranges: vec![(CODE, CODE + 0x1000)],
        stable_code: vec![(CODE, CODE + 0x1000)],
        unwinder: StackUnwinder::empty(),
        cpu: coldcache_capture::machine::cpu_facts(),
        // `REPLAY_LINE_USE=1`: with line use (`record --line-use`); off,
        // as `record` is by default.
        line_use: std::env::var_os("REPLAY_LINE_USE").is_some(),
        objects: None,
        // `REPLAY_TIMELINE=1`: with a timeline (its cost, docs/performance-log.md).
        timeline: std::env::var_os("REPLAY_TIMELINE").map(|_| 0),
        client_requests: None,
    };
    let mut acc = Accountant::new(setup).expect("the cachegrind preset");
    acc.claim(1).expect("a thread slot");
    replay(&mut acc, n);
    let d = acc.finish(Meta::default(), Vec::new(), |_| "t".into()).dump;
    let mut totals = vec![0u64; acc_len(&d)];
    for r in &d.records {
        for (t, c) in totals.iter_mut().zip(&r.counters) {
            *t += c;
        }
    }
    println!("{} instructions, counters {totals:?}", d.meta.instructions);
}

/// The counters of a record of `d`.
fn acc_len(d: &coldcache_dump::Dump) -> usize {
    d.records.first().map_or(0, |r| r.counters.len())
}
