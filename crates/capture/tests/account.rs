//! The accountant without a trap: hand-written machine code in a fake
//! memory, a fake register source, and counts computed by hand.
//!
//! Every case drives [`Accountant::step`] as a front end would, one call per
//! instruction about to execute, and checks the verdicts, the records (per
//! instruction and stack), the stack tree and the trace against what the
//! instructions do. The hierarchy is Cachegrind's (cold at the start), so
//! the first touch of a line goes to memory and the second hits L1.
//! A counting global allocator proves that stepping allocates nothing.

use coldcache_capture::account::{
    Accountant, BlockSlot, Entry, FunctionCalls, Reserves, Setup, TraceSink, Verdict,
};
use coldcache_capture::grow::TABLE_FULL;
use coldcache_capture::model::{Inputs, Machine};
use coldcache_capture::unwind::StackUnwinder;
use coldcache_dump::{Dump, Meta};
use coldcache_sim::{presets, CounterLayout, Side};
use coldcache_trace::RecordKind;
use iced_x86::Register;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) && MINE.with(std::cell::Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) && MINE.with(std::cell::Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

thread_local! {
    /// Whether this thread's allocations are counted: the test harness
    /// spawns and reports on other threads meanwhile.
    static MINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The tests share the allocation counter: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const TID: u32 = 4242;
/// The initial stack pointer of every case.
const SP: u64 = 0x7000_1000;

/// Registers and memory of a pretend thread.
#[derive(Clone)]
struct Fake {
    regs: [u64; 16],
    rflags: u64,
    memory: Vec<(u64, Vec<u8>)>,
}

impl Fake {
    fn new() -> Fake {
        Fake {
            regs: [0; 16],
            rflags: 0x202,
            memory: Vec::new(),
        }
    }

    fn code(mut self, at: u64, bytes: &[u8]) -> Fake {
        self.memory.push((at, bytes.to_vec()));
        self
    }

    fn set(&mut self, r: Register, v: u64) -> &mut Fake {
        self.regs[r.number()] = v;
        self
    }
}

impl Machine for Fake {
    fn gpr(&self, reg: Register) -> u64 {
        let v = self.regs[reg.full_register().number()];
        match reg.size() {
            1 => v & 0xFF,
            2 => v & 0xFFFF,
            4 => v & 0xFFFF_FFFF,
            _ => v,
        }
    }
    fn rflags(&self) -> u64 {
        self.rflags
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
        for (at, bytes) in &self.memory {
            if addr >= *at && addr + buf.len() as u64 <= at + bytes.len() as u64 {
                let o = (addr - at) as usize;
                buf.copy_from_slice(&bytes[o..o + buf.len()]);
                return true;
            }
        }
        false
    }
    fn read_code(&self, addr: u64, buf: &mut [u8]) -> bool {
        // Code regions are padded with `int3` up to the page end, as the
        // first read of a decode may ask for up to 15 bytes.
        for (at, bytes) in &self.memory {
            if addr >= *at && addr < at + bytes.len() as u64 {
                let o = (addr - at) as usize;
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = bytes.get(o + i).copied().unwrap_or(0xCC);
                }
                return true;
            }
        }
        false
    }
}

thread_local! {
    /// What the test thread's [`MemorySink`] was given.
    static STREAM: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A trace sink into [`STREAM`], reserved up front (writing allocates
/// nothing), failing after `chunks_left` chunks when set.
struct MemorySink {
    chunks_left: Option<usize>,
}

impl MemorySink {
    fn new(chunks_left: Option<usize>) -> Box<MemorySink> {
        STREAM.with(|s| {
            let mut s = s.borrow_mut();
            *s = Vec::with_capacity(16 << 20);
            s.extend_from_slice(&coldcache_cctrace::stream::stream_header());
        });
        Box::new(MemorySink { chunks_left })
    }
}

impl TraceSink for MemorySink {
    fn write(&mut self, bytes: &[u8]) -> Result<(), &'static str> {
        if let Some(n) = self.chunks_left.as_mut() {
            if *n == 0 {
                return Err("test disk full");
            }
            *n -= 1;
        }
        STREAM.with(|s| s.borrow_mut().extend_from_slice(bytes));
        Ok(())
    }
    fn offset(&self) -> u64 {
        STREAM.with(|s| s.borrow().len() as u64)
    }
    fn complete(self: Box<Self>) -> std::io::Result<Option<std::path::PathBuf>> {
        Ok(None)
    }
}

/// The records of the stream the test thread's sink holds, read back with
/// `coldcache-trace`'s reader, and the skeleton attached.
fn stream_records() -> (Vec<coldcache_trace::Record>, Vec<u8>) {
    let bytes = STREAM.with(|s| std::mem::take(&mut *s.borrow_mut()));
    let mut r = coldcache_trace::TraceReader::from_reader(
        "stream".into(),
        std::io::Cursor::new(bytes),
        None,
    )
    .unwrap();
    let mut all = Vec::new();
    let mut batch = Vec::new();
    while r.read_batch(&mut batch, 4096).unwrap() > 0 {
        all.extend_from_slice(&batch);
    }
    let skeleton = r
        .attachment(coldcache_trace::ATTACH_DUMP_SKELETON)
        .unwrap_or_default()
        .to_vec();
    (all, skeleton)
}

fn setup(reserves: Reserves, trace: bool, function: Option<FunctionCalls>) -> Setup {
    Setup {
        cache: presets::cachegrind_default(),
        reserves,
        core_map: Vec::new(),
        all_threads: false,
        max_instructions: 0,
        trace: trace.then(|| MemorySink::new(None) as Box<dyn TraceSink>),
        function,
        stop_entries: [0; 2],
        exec_ranges: Vec::new(),
        stable_code: Vec::new(),
        unwinder: StackUnwinder::empty(),
        cpu: coldcache_capture::machine::cpu_facts(),
        line_use: true,
        objects: None,
        timeline: None,
        client_requests: None,
    }
}

fn accountant(trace: bool) -> Accountant {
    let mut a = Accountant::new(setup(Reserves::default(), trace, None)).unwrap();
    a.claim(TID).unwrap();
    a
}

/// Steps `m` at `ip` with its own RSP and RBP.
fn step(a: &mut Accountant, ip: u64, m: &Fake) -> Verdict {
    let sp = m.gpr(Register::RSP);
    let fp = m.gpr(Register::RBP);
    a.step(TID, ip, sp, fp, m)
}

fn finish(a: Accountant) -> (Dump, Option<Vec<coldcache_trace::Record>>) {
    let f = a.finish(Meta::default(), Vec::new(), |_| "t".into());
    let trace = f.trace.map(|t| {
        t.complete(b"skeleton").unwrap();
        let (records, skeleton) = stream_records();
        assert_eq!(skeleton, b"skeleton");
        records
    });
    (f.dump, trace)
}

/// An accountant over code at `0x1000..end` (its decodes trusted, the
/// code stable), keeping a trace or not, with the test thread claimed.
fn code_accountant(end: u64, trace: bool) -> Accountant {
    let mut s = setup(Reserves::default(), trace, None);
    s.exec_ranges = vec![(0x1000, end)];
    s.stable_code = s.exec_ranges.clone();
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    a
}

/// The counters of the record at `ip` with call stack `stack`.
fn record(d: &Dump, ip: u64, stack: u32) -> Vec<u64> {
    d.records
        .iter()
        .find(|r| r.ip == ip && r.stack == stack)
        .unwrap_or_else(|| panic!("no record at {ip:#x} stack {stack}"))
        .counters
        .clone()
}

fn layout() -> CounterLayout {
    CounterLayout::with_line_use(2)
}

/// `call f; nop` with `f: ret`: the callee's instruction is counted under
/// a new stack (call site = the call's last byte, callee = f), the call
/// writes the return address (a cold miss), `ret` reads it back (an L1 hit),
/// and the frame is popped when RSP climbs above its slot.
#[test]
fn call_and_return() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 0x1000: call 0x2000 (e8 rel32 = 0x2000 - 0x1005); 0x1005: nop.
    let mut m = Fake::new()
        .code(0x1000, &[0xE8, 0xFB, 0x0F, 0x00, 0x00, 0x90])
        .code(0x2000, &[0xC3]);
    let mut a = accountant(true);
    m.set(Register::RSP, SP);
    assert_eq!(step(&mut a, 0x1000, &m), Verdict::Continue);
    m.set(Register::RSP, SP - 8);
    assert_eq!(step(&mut a, 0x2000, &m), Verdict::Continue);
    m.set(Register::RSP, SP);
    assert_eq!(step(&mut a, 0x1005, &m), Verdict::Continue);
    assert_eq!(a.instructions(), 3);
    let (d, trace) = finish(a);
    let l = layout();
    assert_eq!(d.stacks.len(), 2, "root and one call");
    assert_eq!(d.stacks[1].call_site, 0x1004);
    assert_eq!(d.stacks[1].callee, 0x2000);
    assert_eq!(d.stacks[1].parent, 0);
    let call = record(&d, 0x1000, 0);
    assert_eq!(call[CounterLayout::INSTRUCTIONS], 1);
    assert_eq!(call[l.memory(Side::Write)], 1, "the pushed return address");
    let ret = record(&d, 0x2000, 1);
    assert_eq!(
        ret[l.served(Side::Read, 0)],
        1,
        "the return address, just written"
    );
    let nop = record(&d, 0x1005, 0);
    assert_eq!(nop[CounterLayout::INSTRUCTIONS], 1);
    assert_eq!(d.records.len(), 3);
    let t = trace.unwrap();
    let kinds: Vec<(RecordKind, u64)> = t.iter().map(|r| (r.kind, r.addr)).collect();
    assert_eq!(
        kinds,
        [
            (RecordKind::Instr, 0x1000),
            (RecordKind::Store, SP - 8),
            (RecordKind::Instr, 0x2000),
            (RecordKind::Load, SP - 8),
            (RecordKind::Instr, 0x1005),
        ]
    );
}

/// `rep movsb` with RCX = 2 traps twice at its own address, one byte each;
/// the check that finds RCX = 0 (no trap on the hardware, one more
/// execution for Valgrind) is counted when the next instruction is stepped:
/// three executions, two reads, two writes.
#[test]
fn rep_movsb_counts_the_final_check() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (src, dst) = (0x50_0000u64, 0x60_0000u64);
    let mut m = Fake::new().code(0x1000, &[0xF3, 0xA4, 0x90]);
    let mut a = accountant(false);
    m.set(Register::RSP, SP);
    for (i, rcx) in [2u64, 1].into_iter().enumerate() {
        m.set(Register::RCX, rcx)
            .set(Register::RSI, src + i as u64)
            .set(Register::RDI, dst + i as u64);
        assert_eq!(step(&mut a, 0x1000, &m), Verdict::Continue);
    }
    m.set(Register::RCX, 0)
        .set(Register::RSI, src + 2)
        .set(Register::RDI, dst + 2);
    assert_eq!(step(&mut a, 0x1002, &m), Verdict::Continue);
    let (d, _) = finish(a);
    let l = layout();
    let rep = record(&d, 0x1000, 0);
    assert_eq!(rep[CounterLayout::INSTRUCTIONS], 3);
    let reads: u64 = l.served_from(Side::Read, 1).map(|i| rep[i]).sum();
    let writes: u64 = l.served_from(Side::Write, 1).map(|i| rep[i]).sum();
    assert_eq!((reads, writes), (2, 2));
    assert_eq!(
        rep[l.memory(Side::Read)],
        1,
        "the second byte is in the same line"
    );
    assert_eq!(rep[l.memory(Side::Write)], 1);
}

/// A gather the CPU stops part-way (an interrupt between its elements)
/// traps again at its own address: the same execution, counted once. The
/// instruction after it, and the gather stepped again after it, count as
/// usual.
#[test]
fn a_gather_resumed_at_its_own_address_counts_once() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // vpgatherdd ymm0, [rax+ymm1*4], ymm2; nop; jmp back to the gather.
    let m = Fake::new().code(
        0x1000,
        &[0xC4, 0xE2, 0x6D, 0x90, 0x04, 0x88, 0x90, 0xEB, 0xF7],
    );
    let mut m = m;
    m.set(Register::RSP, SP);
    let mut a = accountant(false);
    for ip in [0x1000, 0x1000, 0x1000, 0x1006, 0x1007, 0x1000, 0x1006] {
        assert_eq!(step(&mut a, ip, &m), Verdict::Continue);
    }
    let (d, _) = finish(a);
    let ir = |ip| record(&d, ip, 0)[CounterLayout::INSTRUCTIONS];
    assert_eq!((ir(0x1000), ir(0x1006), ir(0x1007)), (2, 2, 1));
}

/// A `rep movsb` that ends because RCX was 0 from the start is stepped
/// once and has no final check to add (it did not repeat).
#[test]
fn rep_movsb_with_zero_count_runs_once() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut m = Fake::new().code(0x1000, &[0xF3, 0xA4, 0x90]);
    let mut a = accountant(false);
    m.set(Register::RSP, SP).set(Register::RCX, 0);
    step(&mut a, 0x1000, &m);
    step(&mut a, 0x1002, &m);
    let (d, _) = finish(a);
    assert_eq!(record(&d, 0x1000, 0)[CounterLayout::INSTRUCTIONS], 1);
}

/// `syscall; push rax; nop`: the push runs without a trap after the system
/// call, so it is counted at the next step from the state after it ran (its
/// store at the new RSP) and marked untrapped.
#[test]
fn the_instruction_after_a_syscall_is_counted_from_the_state_after_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut m = Fake::new().code(0x1000, &[0x0F, 0x05, 0x50, 0x90]);
    let mut a = accountant(true);
    m.set(Register::RSP, SP).set(Register::RAX, 39);
    assert_eq!(step(&mut a, 0x1000, &m), Verdict::Syscall { next: 0x1002 });
    // The push ran: RSP went down by 8.
    m.set(Register::RSP, SP - 8);
    assert_eq!(step(&mut a, 0x1003, &m), Verdict::Continue);
    assert_eq!(a.instructions(), 3);
    let (d, trace) = finish(a);
    assert_eq!(d.meta.untrapped, 1);
    let push = record(&d, 0x1002, 0);
    assert_eq!(push[layout().memory(Side::Write)], 1);
    let t = trace.unwrap();
    assert!(t
        .iter()
        .any(|r| r.kind == RecordKind::Store && r.addr == SP - 8 && r.ip == 0x1002));
}

/// When the front end emulates the system call and steps again at the next
/// instruction, nothing ran untraced: the push is counted once, from the
/// state before it.
#[test]
fn an_emulated_syscall_leaves_nothing_untraced() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut m = Fake::new().code(0x1000, &[0x0F, 0x05, 0x50, 0x90]);
    let mut a = accountant(false);
    m.set(Register::RSP, SP);
    step(&mut a, 0x1000, &m);
    step(&mut a, 0x1002, &m);
    m.set(Register::RSP, SP - 8);
    step(&mut a, 0x1003, &m);
    let (d, _) = finish(a);
    assert_eq!(d.meta.untrapped, 0);
    assert_eq!(record(&d, 0x1002, 0)[CounterLayout::INSTRUCTIONS], 1);
}

/// Two nested calls, then a `longjmp` straight back to the outer frame's
/// RSP: both shadow frames are popped, and the landing instruction is
/// counted at the root.
#[test]
fn a_longjmp_pops_every_frame_it_skips() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 0x1000: call 0x2000; 0x2000: call 0x3000; 0x3000: nop (then longjmp).
    let mut m = Fake::new()
        .code(0x1000, &[0xE8, 0xFB, 0x0F, 0x00, 0x00, 0x90])
        .code(0x2000, &[0xE8, 0xFB, 0x0F, 0x00, 0x00])
        .code(0x3000, &[0x90])
        .code(0x4000, &[0x90]);
    let mut a = accountant(false);
    m.set(Register::RSP, SP);
    step(&mut a, 0x1000, &m);
    m.set(Register::RSP, SP - 8);
    step(&mut a, 0x2000, &m);
    m.set(Register::RSP, SP - 16);
    step(&mut a, 0x3000, &m);
    // longjmp: RSP back above both slots, at a landing pad.
    m.set(Register::RSP, SP + 16);
    step(&mut a, 0x4000, &m);
    let (d, _) = finish(a);
    assert_eq!(d.stacks.len(), 3);
    assert_eq!(record(&d, 0x3000, 2)[CounterLayout::INSTRUCTIONS], 1);
    assert_eq!(d.stacks[2].parent, 1);
    assert_eq!(record(&d, 0x4000, 0)[CounterLayout::INSTRUCTIONS], 1);
}

/// With a bound of two records (`--reserve records=2`), the third
/// distinct instruction stops the capture naming the table, its figures and
/// the flag; the counted two are kept. (Without a bound the table grows.)
#[test]
fn a_full_record_reserve_stops_the_capture() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let reserves = Reserves {
        records: 2,
        ..Reserves::default()
    };
    let mut a = Accountant::new(setup(reserves, false, None)).unwrap();
    a.claim(TID).unwrap();
    let mut m = Fake::new().code(0x1000, &[0x90, 0x90, 0x90]);
    m.set(Register::RSP, SP);
    assert_eq!(step(&mut a, 0x1000, &m), Verdict::Continue);
    assert_eq!(step(&mut a, 0x1001, &m), Verdict::Continue);
    assert_eq!(step(&mut a, 0x1000, &m), Verdict::Continue);
    let v = step(&mut a, 0x1002, &m);
    assert_eq!(v, Verdict::StopCapture(TABLE_FULL));
    assert_eq!(a.cut_short(), Some(TABLE_FULL));
    let (d, _) = finish(a);
    assert_eq!(d.records.len(), 2);
    assert_eq!(record(&d, 0x1000, 0)[CounterLayout::INSTRUCTIONS], 2);
    let cut = d.meta.cut_short.unwrap();
    assert!(
        cut.starts_with("out of capture memory: the records table (2 entries, ")
            && cut.contains("reached its bound --reserve records=2")
            && cut.contains("run with a larger --reserve records"),
        "{cut}"
    );
}

/// Without bounds, tens of thousands of distinct instructions and stacks
/// (more than the old fixed reserves' 65,536 instructions) are all kept;
/// under a small memory budget the same run stops with the table named,
/// the budget's figures and `--memory`, keeping what it counted.
#[test]
fn tables_grow_until_the_memory_budget_is_spent() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 100,000 one-byte `nop`s, each a distinct instruction.
    let n = 100_000u64;
    let mut m = Fake::new().code(0x10_0000, &vec![0x90; n as usize]);
    m.set(Register::RSP, SP);
    let mut a = Accountant::new(setup(Reserves::default(), false, None)).unwrap();
    a.claim(TID).unwrap();
    for ip in 0x10_0000..0x10_0000 + n {
        assert_eq!(step(&mut a, ip, &m), Verdict::Continue);
    }
    let (used, limit) = a.memory();
    assert!(used > 0 && limit == usize::MAX, "{used} of {limit}");
    let (d, _) = finish(a);
    assert_eq!(d.meta.cut_short, None);
    assert_eq!(d.records.len(), n as usize);
    assert_eq!(d.meta.instructions, n);
    let budget = 4 << 20;
    let reserves = Reserves {
        memory: budget,
        ..Reserves::default()
    };
    let mut a = Accountant::new(setup(reserves, false, None)).unwrap();
    a.claim(TID).unwrap();
    let mut counted = 0;
    let v = loop {
        let v = step(&mut a, 0x10_0000 + counted, &m);
        if v != Verdict::Continue {
            break v;
        }
        counted += 1;
        assert!(counted < n, "4 MiB holds 100000 decoded instructions?");
    };
    assert_eq!(v, Verdict::StopCapture(TABLE_FULL));
    let (used, limit) = a.memory();
    assert!(used <= budget && limit == budget, "{used} of {limit}");
    let (d, _) = finish(a);
    assert_eq!(d.meta.instructions, counted);
    let cut = d.meta.cut_short.unwrap();
    assert!(
        cut.starts_with("out of capture memory: the ")
            && cut.contains("beyond the memory budget of 4.0 MiB")
            && cut.ends_with("run with a larger --memory"),
        "{cut}"
    );
}

/// `--instructions 2`: the second instruction is counted, then the
/// capture stops.
#[test]
fn the_instruction_limit_stops_after_the_last_counted() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = setup(Reserves::default(), false, None);
    s.max_instructions = 2;
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    let mut m = Fake::new().code(0x1000, &[0x90, 0x90, 0x90]);
    m.set(Register::RSP, SP);
    assert_eq!(step(&mut a, 0x1000, &m), Verdict::Continue);
    assert_eq!(
        step(&mut a, 0x1001, &m),
        Verdict::StopCapture("instruction limit reached")
    );
    assert_eq!(a.instructions(), 2);
}

/// A block of translated code stopped in the middle by the instruction
/// limit counts every access of the instructions before the stop, once,
/// in order, and none after it (the regression test for any buffering of
/// accesses between the accountant and the simulator). A five-instruction block at 0x1000 (`mov rax, [rbx]`;
/// `mov [rbx+0x40], rax`; `mov rcx, [rbx]`; `mov rdx, [rbx+0x80]`; `nop`),
/// RBX = 0x9000, run once whole (stepped: the thread is not seeded yet)
/// and once through the block path up to the limit of 7 instructions. By
/// hand, cold Cachegrind: the first fetch of line 0x1000 and the first
/// touch of lines 0x9000, 0x9040 and 0x9080 go to memory, everything
/// else hits L1.
#[test]
fn a_block_stopped_by_the_instruction_limit_counts_what_ran_before_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = setup(Reserves::default(), true, None);
    s.max_instructions = 7;
    s.exec_ranges = vec![(0x1000, 0x2000)];
    s.stable_code = s.exec_ranges.clone();
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    let code = [
        0x48, 0x8B, 0x03, 0x48, 0x89, 0x43, 0x40, 0x48, 0x8B, 0x0B, 0x48, 0x8B, 0x93, 0x80, 0x00,
        0x00, 0x00, 0x90,
    ];
    let ips = [0x1000, 0x1003, 0x1007, 0x100A, 0x1011];
    let mut m = Fake::new().code(0x1000, &code);
    m.set(Register::RSP, SP).set(Register::RBX, 0x9000);
    let mut slots: Vec<BlockSlot> = ips.iter().map(|&ip| BlockSlot::new(ip, 0)).collect();
    assert_eq!(
        a.step_block(TID, SP, &mut slots, &mut m, |_, _| {}),
        Verdict::Continue
    );
    assert_eq!(
        a.step_block(TID, SP, &mut slots, &mut m, |_, _| {}),
        Verdict::StopCapture("instruction limit reached")
    );
    assert_eq!(a.instructions(), 7);
    let (d, trace) = finish(a);
    let l = layout();
    let row = |n: u64, cells: &[(usize, u64)]| expected_row(l, n, cells);
    let (i_hit, i_mem) = (l.served(Side::Instr, 0), l.memory(Side::Instr));
    let (r_hit, r_mem) = (l.served(Side::Read, 0), l.memory(Side::Read));
    let (w_hit, w_mem) = (l.served(Side::Write, 0), l.memory(Side::Write));
    // Line use: each of lines 0x9000, 0x9040, 0x9080 fetched once, by the
    // first access to it, with the 8 bytes of its accesses used.
    let (lf, lb) = (l.lines_fetched().unwrap(), l.bytes_used().unwrap());
    let want = [
        (
            0x1000,
            row(
                2,
                &[
                    (i_mem, 1),
                    (i_hit, 1),
                    (r_mem, 1),
                    (r_hit, 1),
                    (lf, 1),
                    (lb, 8),
                ],
            ),
        ),
        (
            0x1003,
            row(2, &[(i_hit, 2), (w_mem, 1), (w_hit, 1), (lf, 1), (lb, 8)]),
        ),
        (0x1007, row(1, &[(i_hit, 1), (r_hit, 1)])),
        (0x100A, row(1, &[(i_hit, 1), (r_mem, 1), (lf, 1), (lb, 8)])),
        (0x1011, row(1, &[(i_hit, 1)])),
    ];
    assert_eq!(d.records.len(), want.len());
    for (ip, counters) in want {
        assert_eq!(record(&d, ip, 0), counters, "record of {ip:#x}");
    }
    // The trace holds the same accesses in the same order.
    let kinds: Vec<(RecordKind, u64)> = trace.unwrap().iter().map(|r| (r.kind, r.addr)).collect();
    let (i, ld, st) = (RecordKind::Instr, RecordKind::Load, RecordKind::Store);
    assert_eq!(
        kinds,
        [
            (i, 0x1000),
            (ld, 0x9000),
            (i, 0x1003),
            (st, 0x9040),
            (i, 0x1007),
            (ld, 0x9000),
            (i, 0x100A),
            (ld, 0x9080),
            (i, 0x1011),
            (i, 0x1000),
            (ld, 0x9000),
            (i, 0x1003),
            (st, 0x9040),
        ]
    );
}

/// One block called from two call sites in turn, so that each of its
/// slots remembers the other stack's row at every execution and finds its
/// row through the block's rows (`BlockRows`), with and without a trace:
/// 0x2000: `call f`, 0x2005: `call f`; f at 0x1000: `mov rax, [rbx]; nop`
/// as a replayed block, then `ret` stepped. Three rounds, by hand: every
/// instruction of f has one record per call site, each executed 3 times
/// (the load 3 times, its first a cold miss under the first call site
/// only), the calls 3 times each at the root; 8 records in all.
#[test]
fn a_block_replayed_under_alternating_stacks_counts_each_stack_apart() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for trace in [false, true] {
        let mut a = code_accountant(0x3000, trace);
        // e8 rel32: 0x1000 - 0x2005 and 0x1000 - 0x200A.
        let mut m = Fake::new()
            .code(
                0x2000,
                &[0xE8, 0xFB, 0xEF, 0xFF, 0xFF, 0xE8, 0xF6, 0xEF, 0xFF, 0xFF],
            )
            .code(0x1000, &[0x48, 0x8B, 0x03, 0x90, 0xC3]);
        m.set(Register::RBX, 0x9000);
        let mut slots = vec![BlockSlot::new(0x1000, 0), BlockSlot::new(0x1003, 0)];
        for _ in 0..3 {
            for call in [0x2000, 0x2005] {
                m.set(Register::RSP, SP);
                assert_eq!(step(&mut a, call, &m), Verdict::Continue);
                m.set(Register::RSP, SP - 8);
                assert_eq!(
                    a.step_block(TID, SP - 8, &mut slots, &mut m, |_, _| {}),
                    Verdict::Continue
                );
                assert_eq!(step(&mut a, 0x1004, &m), Verdict::Continue);
            }
        }
        assert_eq!(a.instructions(), 3 * 2 * 4);
        let (d, _) = finish(a);
        let l = layout();
        assert_eq!(d.stacks.len(), 3, "root and one per call site");
        assert_eq!(
            (d.stacks[1].call_site, d.stacks[2].call_site),
            (0x2004, 0x2009)
        );
        assert_eq!(d.records.len(), 8, "trace {trace}");
        for ip in [0x2000, 0x2005] {
            assert_eq!(record(&d, ip, 0)[CounterLayout::INSTRUCTIONS], 3);
        }
        let (r_hit, r_mem) = (l.served(Side::Read, 0), l.memory(Side::Read));
        for (stack, misses) in [(1, 1), (2, 0)] {
            let load = record(&d, 0x1000, stack);
            assert_eq!(load[CounterLayout::INSTRUCTIONS], 3, "trace {trace}");
            assert_eq!((load[r_hit], load[r_mem]), (3 - misses, misses));
            for ip in [0x1003, 0x1004] {
                assert_eq!(record(&d, ip, stack)[CounterLayout::INSTRUCTIONS], 3);
            }
        }
    }
}

/// A block run twice with no trace kept (the block loop's inlined count):
/// `mov rax, [rbx]; mov [rbx+0x40], rax; maskmovdqu xmm1, xmm2; nop`, by
/// hand: the first fetch, the load and the store miss to memory the first
/// time and hit the second; `maskmovdqu` is fetched but its accesses are
/// not modelled (no vector registers here), counted unmodelled each time.
#[test]
fn a_block_without_a_trace_counts_fetches_accesses_and_unmodelled_by_hand() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = setup(Reserves::default(), false, None);
    s.exec_ranges = vec![(0x1000, 0x2000)];
    s.stable_code = s.exec_ranges.clone();
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    let code = [
        0x48, 0x8B, 0x03, 0x48, 0x89, 0x43, 0x40, 0x66, 0x0F, 0xF7, 0xCA, 0x90,
    ];
    let ips = [0x1000, 0x1003, 0x1007, 0x100B];
    let mut m = Fake::new().code(0x1000, &code);
    m.set(Register::RSP, SP).set(Register::RBX, 0x9000);
    let mut slots: Vec<BlockSlot> = ips.iter().map(|&ip| BlockSlot::new(ip, 0)).collect();
    for _ in 0..2 {
        assert_eq!(
            a.step_block(TID, SP, &mut slots, &mut m, |_, _| {}),
            Verdict::Continue
        );
    }
    assert_eq!(a.instructions(), 8);
    let f = a.finish(Meta::default(), Vec::new(), |_| "t".into());
    assert_eq!(f.unmodelled, 2);
    let l = layout();
    let row = |cells: &[(usize, u64)]| expected_row(l, 2, cells);
    let (i_hit, i_mem) = (l.served(Side::Instr, 0), l.memory(Side::Instr));
    let (r_hit, r_mem) = (l.served(Side::Read, 0), l.memory(Side::Read));
    let (w_hit, w_mem) = (l.served(Side::Write, 0), l.memory(Side::Write));
    // Line use: 0x9000 and 0x9040 fetched once each, 8 bytes used of each.
    let (lf, lb) = (l.lines_fetched().unwrap(), l.bytes_used().unwrap());
    let want = [
        (
            0x1000,
            row(&[
                (i_mem, 1),
                (i_hit, 1),
                (r_mem, 1),
                (r_hit, 1),
                (lf, 1),
                (lb, 8),
            ]),
        ),
        (
            0x1003,
            row(&[(i_hit, 2), (w_mem, 1), (w_hit, 1), (lf, 1), (lb, 8)]),
        ),
        (0x1007, row(&[(i_hit, 2), (CounterLayout::UNMODELLED, 2)])),
        (0x100B, row(&[(i_hit, 2)])),
    ];
    assert_eq!(f.dump.records.len(), want.len());
    for (ip, counters) in want {
        assert_eq!(record(&f.dump, ip, 0), counters, "record of {ip:#x}");
    }
}

/// A block whose slots know where its record holds their registers
/// (`BlockSlot::recorded`, as fast mode's replay makes them) counts what
/// the same block counts with its registers loaded into the machine
/// (`BlockSlot::new` and `fill`), and in the steady state loads none:
/// `mov rax, [rbx+rcx*8+0x10]; mov [rsp+8], rax; add rbx, 8;
/// mov rdx, [rbx]; nop`, run four times with RBX 64 bytes further each
/// time. By hand: each run's load at RBX+0x20 touches a new line (to
/// memory, four times), the load at RBX+8 after it that line again (a
/// hit, four times); the store misses once then hits.
#[test]
fn addresses_read_from_the_record_count_as_the_loaded_registers() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let code = [
        0x48, 0x8B, 0x44, 0xCB, 0x10, 0x48, 0x89, 0x44, 0x24, 0x08, 0x48, 0x83, 0xC3, 0x08, 0x48,
        0x8B, 0x13, 0x90,
    ];
    let ips = [0x1000, 0x1005, 0x100A, 0x100E, 0x1011];
    let gprs = |r: &[Register]| {
        let mut x = Inputs::NONE;
        x.gprs[..r.len()].copy_from_slice(r);
        x
    };
    // Each instruction's inputs and their byte offset in the record, laid
    // out as the translator lays them out: the block's number and RSP,
    // then each instruction's registers in turn.
    let inputs_at = [
        (gprs(&[Register::RBX, Register::RCX]), 16u16),
        (gprs(&[Register::RSP]), 32),
        (Inputs::NONE, 40),
        (gprs(&[Register::RBX]), 40),
        (Inputs::NONE, 48),
    ];
    let mut dumps = Vec::new();
    for recorded in [false, true] {
        let mut a = code_accountant(0x2000, false);
        let mut m = Fake::new().code(0x1000, &code);
        // What no instruction may read: every register comes from a
        // record, loaded by `fill` or read in place.
        m.set(Register::RSP, 0xDEAD_0000)
            .set(Register::RBX, 0xDEAD_0000);
        let mut slots: Vec<BlockSlot> = ips
            .iter()
            .zip(&inputs_at)
            .map(|(&ip, &(inputs, at))| match recorded {
                true => BlockSlot::recorded(ip, 0, inputs, at),
                false => BlockSlot::new(ip, 0),
            })
            .collect();
        let mut fills = Vec::new();
        for run in 0..4u64 {
            let rbx = 0x9000 + 64 * run;
            let record = [0, SP, rbx, 2, SP, rbx + 8];
            let mut filled = 0;
            let v = a.step_block_watching(
                TID,
                SP,
                &mut slots,
                &mut m,
                &record,
                |k, m: &mut Fake| {
                    filled += 1;
                    let (inputs, at) = inputs_at[k];
                    for (j, r) in inputs.gpr_list().enumerate() {
                        m.set(r, record[usize::from(at) / 8 + j]);
                    }
                },
                0,
                |_, _| {},
            );
            assert_eq!(v, Verdict::Continue);
            fills.push(filled);
        }
        if recorded {
            // The first run is stepped (the thread is not seeded yet), the
            // second decodes into the slots (its registers loaded for
            // that); the others read both addresses from the record.
            assert_eq!(&fills[2..], [0, 0], "fills per run: {fills:?}");
        } else {
            assert!(fills.iter().all(|&n| n >= 3), "fills per run: {fills:?}");
        }
        dumps.push(finish(a).0);
    }
    let l = layout();
    let (r_hit, r_mem) = (l.served(Side::Read, 0), l.memory(Side::Read));
    assert_eq!(record(&dumps[1], 0x1000, 0)[r_mem], 4);
    assert_eq!(record(&dumps[1], 0x100E, 0)[r_hit], 4);
    assert_eq!(dumps[0].records.len(), dumps[1].records.len());
    for (a, b) in dumps[0].records.iter().zip(&dumps[1].records) {
        assert_eq!((a.ip, a.stack, &a.counters), (b.ip, b.stack, &b.counters));
    }
}

/// One instruction counted three ways under one stack: in a block
/// entered at its start (`mov rax, [rbx]; nop; nop` at 0x1000), in a block
/// entered mid-way (`nop; nop` at 0x1003) and stepped by the trap engine
/// (0x1003). Without a trace each block's cell counts the instruction's
/// plain executions (`BlockRows::defer`) apart from its row; the dump must
/// hold one record per instruction with every execution, as with a
/// trace. By hand, over 5
/// rounds: 0x1000 5 times (its first fetch and load to memory), 0x1003 15
/// times, 0x1004 10 times, every other fetch from the first level.
#[test]
fn an_instruction_counted_by_two_blocks_and_a_step_has_one_record_of_every_execution() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut dumps = Vec::new();
    for trace in [false, true] {
        let mut a = code_accountant(0x2000, trace);
        let mut m = Fake::new().code(0x1000, &[0x48, 0x8B, 0x03, 0x90, 0x90]);
        m.set(Register::RSP, SP).set(Register::RBX, 0x9000);
        let mut whole: Vec<BlockSlot> = [0x1000, 0x1003, 0x1004]
            .iter()
            .map(|&ip| BlockSlot::new(ip, 0))
            .collect();
        let mut tail: Vec<BlockSlot> = [0x1003, 0x1004]
            .iter()
            .map(|&ip| BlockSlot::new(ip, 0))
            .collect();
        for _ in 0..5 {
            let go = |a: &mut Accountant, slots: &mut Vec<BlockSlot>, m: &mut Fake| {
                a.step_block(TID, SP, slots, m, |_, _| {})
            };
            assert_eq!(go(&mut a, &mut whole, &mut m), Verdict::Continue);
            assert_eq!(go(&mut a, &mut tail, &mut m), Verdict::Continue);
            assert_eq!(step(&mut a, 0x1003, &m), Verdict::Continue);
        }
        assert_eq!(a.instructions(), 30);
        let (d, _) = finish(a);
        let l = layout();
        let (i_hit, i_mem) = (l.served(Side::Instr, 0), l.memory(Side::Instr));
        let (r_hit, r_mem) = (l.served(Side::Read, 0), l.memory(Side::Read));
        assert_eq!(d.records.len(), 3, "trace {trace}");
        let first = record(&d, 0x1000, 0);
        assert_eq!(
            (
                first[CounterLayout::INSTRUCTIONS],
                first[i_mem],
                first[i_hit]
            ),
            (5, 1, 4)
        );
        assert_eq!((first[r_mem], first[r_hit]), (1, 4));
        for (ip, n) in [(0x1003, 15), (0x1004, 10)] {
            assert_eq!(
                record(&d, ip, 0),
                expected_row(l, n, &[(i_hit, n)]),
                "{ip:#x} trace {trace}"
            );
        }
        dumps.push(d.records);
    }
    assert_eq!(
        dumps[0], dumps[1],
        "the same records with and without a trace"
    );
}

/// A run of instructions that are only fetched, each within the line the
/// one before ended in, is counted as one from the block's third execution
/// on (`BlockRows::mark_run`, `count_run`): `mov rax, [rbx]` at 0x1038,
/// then eight `nop`s at 0x103B..=0x1042, the sixth the first in line
/// 0x1040, so two runs (0x103B..=0x103F and 0x1041..=0x1042). By hand,
/// over 7 executions: every instruction 7 times; the load's fetch and
/// read, and the fetch at 0x1040, from memory the first time and from the
/// first level after; every other fetch from the first level. A trace
/// turns the runs off (each instruction counted one by one): the same
/// records.
#[test]
fn a_run_of_fetched_instructions_counted_as_one_gives_each_its_executions() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut dumps = Vec::new();
    for trace in [false, true] {
        let mut a = code_accountant(0x2000, trace);
        let mut code = vec![0x48, 0x8B, 0x03];
        code.extend([0x90; 8]);
        let mut m = Fake::new().code(0x1038, &code);
        m.set(Register::RSP, SP).set(Register::RBX, 0x9000);
        let ips: Vec<u64> = std::iter::once(0x1038).chain(0x103B..=0x1042).collect();
        let mut slots: Vec<BlockSlot> = ips.iter().map(|&ip| BlockSlot::new(ip, 0)).collect();
        for _ in 0..7 {
            let v = a.step_block(TID, SP, &mut slots, &mut m, |_, _| {});
            assert_eq!(v, Verdict::Continue);
        }
        assert_eq!(a.instructions(), 7 * 9);
        let (d, _) = finish(a);
        let l = layout();
        let (i_hit, i_mem) = (l.served(Side::Instr, 0), l.memory(Side::Instr));
        let (r_hit, r_mem) = (l.served(Side::Read, 0), l.memory(Side::Read));
        assert_eq!(d.records.len(), 9, "trace {trace}");
        let load = record(&d, 0x1038, 0);
        let got = [CounterLayout::INSTRUCTIONS, i_mem, i_hit, r_mem, r_hit].map(|c| load[c]);
        assert_eq!(got, [7, 1, 6, 1, 6], "trace {trace}");
        for &ip in &ips[1..] {
            let want = match ip {
                0x1040 => expected_row(l, 7, &[(i_mem, 1), (i_hit, 6)]),
                _ => expected_row(l, 7, &[(i_hit, 7)]),
            };
            assert_eq!(record(&d, ip, 0), want, "{ip:#x} trace {trace}");
        }
        dumps.push(d.records);
    }
    assert_eq!(
        dumps[0], dumps[1],
        "the same records with and without a trace"
    );
}

/// One function called from two sites in turn, so its blocks run under
/// two stacks alternately: `mov rax, [rbx]; call f` at 0x1000 and at
/// 0x1010; `f` is replayed as two blocks, `push rdx` (0x2000), then
/// `pop rdx; nop; ret` (0x2001), whose `nop` has RSP above the block's
/// first instruction's with no frame to pop (it is the return address's
/// slot). The replay's steady loop counts the call, the instructions
/// whose slots remember their row under the other stack (found in the
/// block's cells under this one) and the rise of RSP; a trace turns that
/// loop off (each instruction counted the block loop's general way): the
/// same records. By hand, over 6 rounds: every instruction 6 times under
/// each of its stacks, `f`'s under two (one per call site).
#[test]
fn a_function_called_from_two_sites_in_turn_counts_as_the_general_way() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut dumps = Vec::new();
    for trace in [false, true] {
        let mut a = code_accountant(0x3000, trace);
        // call f: E8 rel32, from 0x1003 (next 0x1008) and 0x1013 (0x1018).
        let site = |next: u64| {
            let rel = (0x2000i64 - next as i64) as i32;
            let mut b = vec![0x48, 0x8B, 0x03, 0xE8];
            b.extend(rel.to_le_bytes());
            b
        };
        let mut m = Fake::new()
            .code(0x1000, &site(0x1008))
            .code(0x1010, &site(0x1018))
            .code(0x2000, &[0x52, 0x5A, 0x90, 0xC3]);
        m.set(Register::RBX, 0x9000).set(Register::RDX, 7);
        let block = |ips: &[(u64, i64)]| -> Vec<BlockSlot> {
            ips.iter().map(|&(ip, d)| BlockSlot::new(ip, d)).collect()
        };
        let mut callers = [
            block(&[(0x1000, 0), (0x1003, 0)]),
            block(&[(0x1010, 0), (0x1013, 0)]),
        ];
        let mut push = block(&[(0x2000, 0)]);
        let mut tail = block(&[(0x2001, 0), (0x2002, 8), (0x2003, 8)]);
        let run = |a: &mut Accountant, slots: &mut Vec<BlockSlot>, rsp: u64, m: &mut Fake| {
            let deltas: Vec<i64> = slots.iter().map(|s| s.sp_delta).collect();
            let v = a.step_block(TID, rsp, slots, m, |k, m| {
                m.set(Register::RSP, rsp.wrapping_add(deltas[k] as u64));
            });
            assert_eq!(v, Verdict::Continue);
        };
        for _ in 0..6 {
            for caller in callers.iter_mut() {
                run(&mut a, caller, SP, &mut m);
                run(&mut a, &mut push, SP - 8, &mut m);
                run(&mut a, &mut tail, SP - 16, &mut m);
            }
        }
        assert_eq!(a.instructions(), 6 * 2 * 6);
        let (d, _) = finish(a);
        let mut stacks: Vec<u32> = d
            .records
            .iter()
            .filter(|r| r.ip == 0x2002)
            .map(|r| r.stack)
            .collect();
        stacks.sort();
        stacks.dedup();
        assert_eq!(stacks.len(), 2, "f under two stacks, trace {trace}");
        assert_eq!(d.records.len(), 4 + 2 * 4, "trace {trace}");
        for r in &d.records {
            assert_eq!(
                r.counters[CounterLayout::INSTRUCTIONS],
                6,
                "{:#x} trace {trace}",
                r.ip
            );
        }
        dumps.push(d.records);
    }
    assert_eq!(
        dumps[0], dumps[1],
        "the same records with and without a trace"
    );
}

/// Two threads on two cores of a Cachegrind-shaped hierarchy (private
/// first levels, one shared last level), stepped in turn: A loads 0x9000,
/// then B, then A again. Each access is simulated on its own thread's
/// core in that order, so by hand: A's first fetch and load go to memory,
/// B finds both lines in the shared L2 (its own L1 is cold), A's second
/// finds them in its L1. Simulated on A's core (a batch of accesses not
/// cut where the core changes), B's would hit L1.
#[test]
fn queued_accesses_run_on_their_own_core_in_order() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const TID_B: u32 = TID + 1;
    let mut s = setup(Reserves::default(), false, None);
    s.cache.cores = 2;
    s.core_map = vec![(TID, 0), (TID_B, 1)];
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    a.claim(TID_B).unwrap();
    let mut m = Fake::new().code(0x1000, &[0x48, 0x8B, 0x03]);
    m.set(Register::RSP, SP).set(Register::RBX, 0x9000);
    for tid in [TID, TID_B, TID] {
        assert_eq!(a.step(tid, 0x1000, SP, 0, &m), Verdict::Continue);
    }
    let (d, _) = finish(a);
    let cores: Vec<u32> = d.threads.iter().map(|t| t.core).collect();
    assert_eq!(cores, [0, 1]);
    let l = layout();
    let of = |thread: u32| {
        d.records
            .iter()
            .find(|r| r.ip == 0x1000 && r.thread == thread)
            .unwrap_or_else(|| panic!("no record of thread {thread}"))
            .counters
            .clone()
    };
    let (a_row, b_row) = (of(0), of(1));
    assert_eq!(a_row[CounterLayout::INSTRUCTIONS], 2);
    assert_eq!(a_row[l.memory(Side::Instr)], 1);
    assert_eq!(a_row[l.served(Side::Instr, 0)], 1);
    assert_eq!(a_row[l.memory(Side::Read)], 1);
    assert_eq!(a_row[l.served(Side::Read, 0)], 1);
    assert_eq!(b_row[CounterLayout::INSTRUCTIONS], 1);
    assert_eq!(b_row[l.served(Side::Instr, 1)], 1, "B's fetch from L2");
    assert_eq!(b_row[l.served(Side::Read, 1)], 1, "B's load from L2");
    // Line use: line 0x9000 fetched into each core's L1 once, by each
    // thread's first load, 8 bytes used in each.
    let (lf, lb) = (l.lines_fetched().unwrap(), l.bytes_used().unwrap());
    assert_eq!((a_row[lf], a_row[lb]), (1, 8));
    assert_eq!((b_row[lf], b_row[lb]), (1, 8));
    assert_eq!(
        a_row.iter().sum::<u64>() + b_row.iter().sum::<u64>(),
        2 + 4 + 1 + 2 + 2 * (1 + 8),
        "nothing else counted"
    );
}

/// A function trigger for calls 2 and 3 of `f` (at 0x2000): the first call
/// is skipped; the second is traced from the entry (its stack names f as
/// the callee) until RSP climbs above the return-address slot, and the
/// verdict asks for one more call; after the third, none.
#[test]
fn the_watched_function_returning_ends_its_window() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = FunctionCalls {
        address: 0x2000,
        first: 2,
        count: 2,
        warm: 0,
    };
    let mut s = setup(Reserves::default(), false, Some(f));
    s.exec_ranges = vec![(0x1000, 0x5000)];
    s.stable_code = s.exec_ranges.clone();
    let mut a = Accountant::new(s).unwrap();
    let mut m = Fake::new()
        .code(0x1000, &[0xE8, 0xFB, 0x0F, 0x00, 0x00, 0x90])
        .code(0x2000, &[0x90, 0xC3]);
    // At the entry RSP points at the return address 0x1005.
    m.memory.push((SP - 8, 0x1005u64.to_le_bytes().to_vec()));
    m.set(Register::RSP, SP - 8);
    assert_eq!(a.function_entered(TID, SP - 8), Entry::Skip);
    for (call, more) in [(2, true), (3, false)] {
        assert_eq!(
            a.function_entered(TID, SP - 8),
            Entry::Capture,
            "call {call}"
        );
        m.set(Register::RSP, SP - 8);
        assert_eq!(step(&mut a, 0x2000, &m), Verdict::Continue);
        assert_eq!(step(&mut a, 0x2001, &m), Verdict::Continue);
        m.set(Register::RSP, SP);
        assert_eq!(step(&mut a, 0x1005, &m), Verdict::FunctionReturned { more });
        // The thread is no longer traced until the next captured call.
        assert_eq!(step(&mut a, 0x1005, &m), Verdict::StopThread);
    }
    let (d, _) = finish(a);
    // Without CFI the seed takes the caller's return address at [RSP] (it
    // lies in an executable range): one frame, call site 0x1004, callee f.
    // Both calls' instructions add up under it.
    assert_eq!(d.stacks.len(), 2);
    assert_eq!(
        (d.stacks[1].call_site, d.stacks[1].callee),
        (0x1004, 0x2000)
    );
    assert_eq!(record(&d, 0x2000, 1)[CounterLayout::INSTRUCTIONS], 2);
    assert_eq!(record(&d, 0x2001, 1)[CounterLayout::INSTRUCTIONS], 2);
    assert!(d.meta.cut_short.is_none());
    assert!(d.records.iter().all(|r| r.ip != 0x1005));
}

/// `--call 2 --warm-calls 1`: call 1 of `f: mov rax, [rbx]; ret` is
/// traced and simulated but counted nowhere (no record, no instruction,
/// nothing in the trace, no allocation); call 2 is counted on the cache
/// call 1 left. By hand, with Cachegrind's cold hierarchy: call 1's load of
/// 0x9000 and its fetch of line 0x2000 go to memory; call 2 finds both in
/// L1, and so does its `ret`'s read of the return-address slot (written by
/// no one traced, read by call 1). Cold, call 2's load goes to memory.
#[test]
fn a_warming_call_is_simulated_and_counted_nowhere() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run = |warm: u64| {
        let f = FunctionCalls {
            address: 0x2000,
            first: 2,
            count: 1,
            warm,
        };
        let mut s = setup(Reserves::default(), true, Some(f));
        s.exec_ranges = vec![(0x1000, 0x5000)];
        s.stable_code = s.exec_ranges.clone();
        let mut a = Accountant::new(s).unwrap();
        let mut m = Fake::new()
            .code(0x1000, &[0xE8, 0xFB, 0x0F, 0x00, 0x00, 0x90])
            .code(0x2000, &[0x48, 0x8B, 0x03, 0xC3]);
        m.memory.push((SP - 8, 0x1005u64.to_le_bytes().to_vec()));
        m.set(Register::RBX, 0x9000);
        let mut verdicts = Vec::with_capacity(2);
        COUNTING.store(true, Ordering::SeqCst);
        MINE.with(|m| m.set(true));
        ALLOCATIONS.store(0, Ordering::SeqCst);
        for call in 1..=2 {
            let entry = a.function_entered(TID, SP - 8);
            if entry == Entry::Skip {
                verdicts.push(None);
                continue;
            }
            assert_eq!(entry, Entry::Capture, "call {call}");
            assert_eq!(a.warming(TID), call == 1 && warm > 0);
            m.set(Register::RSP, SP - 8);
            assert_eq!(step(&mut a, 0x2000, &m), Verdict::Continue);
            assert_eq!(step(&mut a, 0x2003, &m), Verdict::Continue);
            m.set(Register::RSP, SP);
            verdicts.push(Some(step(&mut a, 0x1005, &m)));
            assert!(!a.warming(TID));
        }
        COUNTING.store(false, Ordering::SeqCst);
        assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "warm {warm}");
        assert_eq!(a.instructions(), 2, "warm {warm}: call 2's two");
        let (d, trace) = finish(a);
        (d, trace.unwrap(), verdicts)
    };
    let l = layout();
    let (cold, cold_trace, v) = run(0);
    assert_eq!(v[0], None);
    assert_eq!(v[1], Some(Verdict::FunctionReturned { more: false }));
    let (warm, warm_trace, v) = run(1);
    assert_eq!(v[0], Some(Verdict::FunctionReturned { more: true }));
    assert_eq!(v[1], Some(Verdict::FunctionReturned { more: false }));
    // Cold: the load and the fetch of line 0x2000 from memory.
    let load = record(&cold, 0x2000, 1);
    assert_eq!(load[l.memory(Side::Read)], 1);
    assert_eq!(load[l.memory(Side::Instr)], 1);
    // Line use, cold: the load fetched 0x9000 and `ret` the return
    // address's line, 8 bytes used of each.
    let (lf, lb) = (l.lines_fetched().unwrap(), l.bytes_used().unwrap());
    assert_eq!((load[lf], load[lb]), (1, 8));
    let ret = record(&cold, 0x2003, 1);
    assert_eq!((ret[lf], ret[lb]), (1, 8));
    // Warmed by call 1: everything of call 2 from L1.
    let load = record(&warm, 0x2000, 1);
    assert_eq!(load[l.served(Side::Read, 0)], 1);
    assert_eq!(load[l.served(Side::Instr, 0)], 1);
    let ret = record(&warm, 0x2003, 1);
    assert_eq!(ret[l.served(Side::Read, 0)], 1);
    // The warming call fetched both lines: credited nowhere.
    assert_eq!((load[lf], load[lb], ret[lf], ret[lb]), (0, 0, 0, 0));
    // The same records and instructions as cold, the same trace (call 2's
    // accesses alone), and the dump says how the cache was warmed.
    let key = |d: &Dump| -> Vec<(u64, u32, u64)> {
        d.records
            .iter()
            .map(|r| (r.ip, r.stack, r.counters[CounterLayout::INSTRUCTIONS]))
            .collect()
    };
    assert_eq!(key(&warm), key(&cold));
    assert_eq!(warm.meta.instructions, 2);
    assert_eq!(warm_trace, cold_trace);
    assert_eq!(
        warm.meta.warm,
        "by calls 1 to 1 of the function (2 instructions simulated, not counted)"
    );
    assert!(cold.meta.warm.is_empty());
}

/// A thread that was not claimed is not traced; with every thread
/// selected it is claimed at its first step; past the thread reserve the
/// capture is marked cut short but goes on.
#[test]
fn threads_are_claimed_up_to_the_reserve() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut m = Fake::new().code(0x1000, &[0x90]);
    m.set(Register::RSP, SP);
    let mut a = Accountant::new(setup(Reserves::default(), false, None)).unwrap();
    assert_eq!(a.step(7, 0x1000, SP, 0, &m), Verdict::StopThread);
    let mut s = setup(
        Reserves {
            threads: 1,
            ..Reserves::default()
        },
        false,
        None,
    );
    s.all_threads = true;
    let mut a = Accountant::new(s).unwrap();
    assert_eq!(a.step(7, 0x1000, SP, 0, &m), Verdict::Continue);
    assert_eq!(a.step(8, 0x1000, SP, 0, &m), Verdict::StopThread);
    assert_eq!(a.cut_short(), Some("more threads than reserved"));
    assert_eq!(a.step(7, 0x1000, SP, 0, &m), Verdict::Continue);
}

/// Once built, stepping allocates nothing: calls, returns, string
/// instructions, syscalls, a trace and a timeline, over thousands of
/// steps.
#[test]
fn stepping_allocates_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut m = Fake::new()
        .code(
            0x1000,
            &[0xE8, 0xFB, 0x0F, 0x00, 0x00, 0x0F, 0x05, 0x50, 0x90],
        )
        .code(0x2000, &[0xF3, 0xA4, 0xC3]);
    // A small chunk: the trace is written out many times over.
    let reserves = Reserves {
        trace: 64,
        ..Reserves::default()
    };
    let mut s = setup(reserves, true, None);
    s.timeline = Some(0);
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    COUNTING.store(true, Ordering::SeqCst);
    MINE.with(|m| m.set(true));
    ALLOCATIONS.store(0, Ordering::SeqCst);
    for i in 0..2000u64 {
        m.set(Register::RSP, SP);
        step(&mut a, 0x1000, &m);
        m.set(Register::RSP, SP - 8)
            .set(Register::RCX, 1)
            .set(Register::RSI, 0x50_0000 + i)
            .set(Register::RDI, 0x60_0000 + i);
        step(&mut a, 0x2000, &m);
        m.set(Register::RCX, 0);
        step(&mut a, 0x2002, &m);
        m.set(Register::RSP, SP);
        step(&mut a, 0x1005, &m);
        m.set(Register::RSP, SP - 8);
        step(&mut a, 0x1008, &m);
    }
    COUNTING.store(false, Ordering::SeqCst);
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0);
    // Per round: call, rep movsb, its final check, ret, syscall, the push
    // that ran untraced after it, nop.
    assert_eq!(a.instructions(), 2000 * 7);
    let chunks = STREAM.with(|s| s.borrow().len()) / 64;
    assert!(chunks > 100, "the trace went out in many chunks");
    let (d, trace) = finish(a);
    // Every instruction is in the trace once, as a fetch record.
    let fetches = trace
        .unwrap()
        .iter()
        .filter(|r| r.kind == RecordKind::Instr)
        .count() as u64;
    assert_eq!(fetches, d.meta.instructions);
    // The timeline: the start, a call and a return per round, the stop;
    // its instructions are the dump's.
    let t = d.timeline.as_ref().unwrap().events();
    assert_eq!(t.len(), 2 + 2 * 2000);
    let sum: u64 = t.iter().map(|e| e.1[0]).sum();
    assert_eq!(sum, d.meta.instructions);
}

/// A sink that stops taking chunks (a full disk) stops the capture with
/// its reason; the trace holds the chunks written before, a prefix of
/// what was counted, and is still completed with its skeleton.
#[test]
fn a_full_disk_stops_the_capture_with_its_reason() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let reserves = Reserves {
        trace: 64,
        ..Reserves::default()
    };
    let mut s = setup(reserves, false, None);
    s.trace = Some(MemorySink::new(Some(3)));
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    let mut m = Fake::new().code(0x1000, &[0x90]);
    m.set(Register::RSP, SP);
    let mut steps = 0u64;
    let v = loop {
        let v = step(&mut a, 0x1000, &m);
        if v != Verdict::Continue {
            break v;
        }
        steps += 1;
        assert!(steps < 1_000_000, "never stopped");
    };
    assert_eq!(v, Verdict::StopCapture("test disk full"));
    assert_eq!(a.cut_short(), Some("test disk full"));
    let f = a.finish(Meta::default(), Vec::new(), |_| "t".into());
    assert_eq!(f.dump.meta.instructions, steps);
    let t = f.trace.unwrap();
    assert_eq!(t.failed(), Some("test disk full"));
    // The sink takes nothing more: the end cannot be written either.
    let e = t.complete(b"skeleton").unwrap_err();
    assert_eq!(e.reason, "test disk full");
    let bytes = STREAM.with(|s| s.borrow().clone());
    assert_eq!(e.offset, bytes.len() as u64);
    // Three whole chunks of one-byte nops (no end marker): a prefix of the
    // counted instructions, short by less than one chunk.
    let mut r =
        coldcache_trace::TraceReader::from_reader("s".into(), std::io::Cursor::new(bytes), None)
            .unwrap();
    let mut all = Vec::new();
    let mut batch = Vec::new();
    let err = loop {
        match r.read_batch(&mut batch, 4096) {
            Ok(0) => panic!("a trace without its end reads as cut"),
            Ok(_) => all.extend_from_slice(&batch),
            Err(e) => break e,
        }
    };
    assert!(err.to_string().contains("end"), "{err}");
    assert!(all
        .iter()
        .all(|r| r.addr == 0x1000 && r.kind == RecordKind::Instr));
    let n = all.len() as u64;
    assert!(n < steps && steps - n <= 64 * 36, "{n} of {steps}");
    assert!(n >= 3 * 64, "{n}");
}

/// Code rewritten in place (a JIT reusing its buffer): the decode of an
/// address outside the file-backed modules is checked against the bytes
/// there now, so `mov eax, 39; syscall` rewritten as `mov eax, 14; inc
/// eax` is not taken for a `syscall` any more (the trap engine would
/// have emulated an `rt_sigprocmask` that was never made). Code of a
/// file-backed module is trusted.
#[test]
fn a_decode_is_checked_against_rewritten_code() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let first = [0xB8, 0x27, 0x00, 0x00, 0x00, 0x0F, 0x05, 0xC3];
    let second = [0xB8, 0x0E, 0x00, 0x00, 0x00, 0xFF, 0xC0, 0xC3];
    for (module, expected) in [
        (false, Verdict::Continue),
        (true, Verdict::Syscall { next: 0x1007 }),
    ] {
        let mut s = setup(Reserves::default(), false, None);
        if module {
            s.exec_ranges = vec![(0x1000, 0x2000)];
            s.stable_code = s.exec_ranges.clone();
        }
        let mut a = Accountant::new(s).unwrap();
        a.claim(TID).unwrap();
        let mut m = Fake::new().code(0x1000, &first);
        m.set(Register::RSP, SP);
        assert_eq!(step(&mut a, 0x1000, &m), Verdict::Continue);
        assert_eq!(step(&mut a, 0x1005, &m), Verdict::Syscall { next: 0x1007 });
        m.memory[0].1.copy_from_slice(&second);
        assert_eq!(step(&mut a, 0x1000, &m), Verdict::Continue);
        assert_eq!(step(&mut a, 0x1005, &m), expected, "module: {module}");
    }
}

/// A module's code that a traced thread unmaps, remaps or makes writable
/// (`code_changed`, called before the system call) is no longer trusted:
/// the decode made before is checked against the bytes there now, and so
/// is a decode made after, while the rest of the module stays trusted.
#[test]
fn code_changed_in_a_module_is_checked_again() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // mov eax, 39 ; syscall ; ret   then   mov eax, 14 ; inc eax ; ret
    let first = [0xB8, 0x27, 0x00, 0x00, 0x00, 0x0F, 0x05, 0xC3];
    let second = [0xB8, 0x0E, 0x00, 0x00, 0x00, 0xFF, 0xC0, 0xC3];
    let mut s = setup(Reserves::default(), false, None);
    s.exec_ranges = vec![(0x1000, 0x3000)];
    s.stable_code = s.exec_ranges.clone();
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    let mut m = Fake::new().code(0x1000, &first).code(0x2000, &first);
    m.set(Register::RSP, SP);
    for at in [0x1000, 0x2000] {
        assert_eq!(step(&mut a, at, &m), Verdict::Continue);
        assert_eq!(step(&mut a, at + 5, &m), Verdict::Syscall { next: at + 7 });
    }
    // The page at 0x1000 is about to change (outside the module: ignored).
    a.code_changed(0x8000, 0x9000);
    a.code_changed(0x1000, 0x2000);
    m.memory[0].1.copy_from_slice(&second);
    m.memory[1].1.copy_from_slice(&second);
    assert_eq!(step(&mut a, 0x1000, &m), Verdict::Continue);
    assert_eq!(step(&mut a, 0x1005, &m), Verdict::Continue, "rechecked");
    // Still trusted: the old decode stands for the untouched page.
    assert_eq!(step(&mut a, 0x2000, &m), Verdict::Continue);
    assert_eq!(
        step(&mut a, 0x2005, &m),
        Verdict::Syscall { next: 0x2007 },
        "trusted"
    );
}

/// A counter row of layout `l` as a test expects it: `n` instructions and
/// each (counter, value) of `cells` added.
fn expected_row(l: CounterLayout, n: u64, cells: &[(usize, u64)]) -> Vec<u64> {
    let mut r = vec![0u64; l.len()];
    r[CounterLayout::INSTRUCTIONS] = n;
    for &(c, v) in cells {
        r[c] += v;
    }
    r
}

/// `finish_encoded` (what the library writes) gives the bytes `finish`'s
/// dump encodes to, its records never built: the block above run twice by
/// two accountants alike, one finished each way.
#[test]
fn the_records_finished_encoded_are_the_bytes_of_the_records_finished_whole() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run = || {
        let mut s = setup(Reserves::default(), false, None);
        s.exec_ranges = vec![(0x1000, 0x2000)];
        s.stable_code = s.exec_ranges.clone();
        let mut a = Accountant::new(s).unwrap();
        a.claim(TID).unwrap();
        let code = [
            0x48, 0x8B, 0x03, 0x48, 0x89, 0x43, 0x40, 0x66, 0x0F, 0xF7, 0xCA, 0x90,
        ];
        let ips = [0x1000, 0x1003, 0x1007, 0x100B];
        let mut m = Fake::new().code(0x1000, &code);
        m.set(Register::RSP, SP).set(Register::RBX, 0x9000);
        let mut slots: Vec<BlockSlot> = ips.iter().map(|&ip| BlockSlot::new(ip, 0)).collect();
        for _ in 0..2 {
            a.step_block(TID, SP, &mut slots, &mut m, |_, _| {});
        }
        a
    };
    let meta = Meta {
        counters: (0..layout().len()).map(|i| format!("c{i}")).collect(),
        ..Meta::default()
    };
    let whole = run().finish(meta.clone(), Vec::new(), |_| "t".into());
    let enc = run().finish_encoded(meta, Vec::new(), |_| "t".into());
    assert_eq!(whole.encoded, None);
    assert_eq!(whole.dump.records.len(), 4);
    assert!(enc.dump.records.is_empty());
    let records = enc.encoded.as_ref().expect("encoded records");
    assert_eq!(records.len(), 4);
    let bytes = enc.dump.to_bytes_with_records(records);
    assert_eq!(bytes, whole.dump.to_bytes());
    assert_eq!(Dump::from_bytes(&bytes).unwrap(), whole.dump);
}

/// Objects by hand: `call malloc` (RDI = 100) whose entry calls an inner
/// allocator (nested: not counted) and returns RAX = 0x9000; a write into
/// the block (its site's), one past its 100 bytes (no mapping: unmapped),
/// `call free` (RDI = 0x9000), the same write again (the block is gone:
/// unmapped). One allocation, one free, one site of one block of 100
/// bytes with one write, a cold miss in both levels.
#[test]
fn the_allocator_is_observed_and_accesses_go_to_their_block() {
    use coldcache_capture::objects::{Kind, Objects};
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut m = Fake::new()
        // 0x1000: call 0x2000; 0x1005: movl $1, 4(%rax);
        // 0x100c: movl $1, 0xc8(%rax); 0x1016: call 0x3000;
        // 0x101b: movl $1, 4(%rax).
        .code(
            0x1000,
            &[
                0xE8, 0xFB, 0x0F, 0x00, 0x00, //
                0xC7, 0x40, 0x04, 0x01, 0x00, 0x00, 0x00, //
                0xC7, 0x80, 0xC8, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, //
                0xE8, 0xE5, 0x1F, 0x00, 0x00, //
                0xC7, 0x40, 0x04, 0x01, 0x00, 0x00, 0x00,
            ],
        )
        // malloc: call 0x2100 (an inner allocator: ret); ret.
        .code(0x2000, &[0xE8, 0xFB, 0x00, 0x00, 0x00, 0xC3])
        .code(0x2100, &[0xC3])
        // free: ret.
        .code(0x3000, &[0xC3]);
    let allocators = [
        (0x2000, Kind::Malloc, "malloc"),
        (0x2100, Kind::Malloc, "inner"),
        (0x3000, Kind::Free, "free"),
    ];
    let mut s = setup(Reserves::default(), false, None);
    s.objects = Some(Objects::new(true, 4, &allocators, Vec::new()));
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    let at = |a: &mut Accountant, ip: u64, sp: u64, m: &mut Fake| {
        m.set(Register::RSP, sp);
        assert_eq!(step(a, ip, m), Verdict::Continue, "at {ip:#x}");
    };
    at(&mut a, 0x1000, SP, &mut m);
    m.set(Register::RDI, 100);
    at(&mut a, 0x2000, SP - 8, &mut m);
    m.set(Register::RDI, 7);
    at(&mut a, 0x2100, SP - 16, &mut m);
    m.set(Register::RAX, 0x9000);
    at(&mut a, 0x2005, SP - 8, &mut m);
    at(&mut a, 0x1005, SP, &mut m);
    at(&mut a, 0x100c, SP, &mut m);
    at(&mut a, 0x1016, SP, &mut m);
    m.set(Register::RDI, 0x9000);
    at(&mut a, 0x3000, SP - 8, &mut m);
    at(&mut a, 0x101b, SP, &mut m);
    let (d, _) = finish(a);
    let o = d.objects.expect("objects");
    assert_eq!(o.allocators, ["malloc", "inner", "free"]);
    assert_eq!((o.allocations, o.frees, o.unknown_frees), (1, 1, 0));
    assert_eq!((o.unreturned, o.live, o.untracked), (0, 0, 0));
    assert_eq!(o.sites.len(), 1);
    let site = &o.sites[0];
    // The stack at malloc's entry: the call at 0x1000.
    assert_eq!(d.stacks[site.stack as usize].call_site, 0x1004);
    assert_eq!(site.allocator, "malloc");
    assert_eq!((site.blocks, site.bytes, site.freed), (1, 100, 1));
    assert_eq!(site.counts.served[0], [0, 0, 0], "no read");
    assert_eq!(site.counts.served[1], [0, 0, 1], "one write, from memory");
    // Everything else (no mapping given): the stack's return addresses
    // (three calls, three rets) and the two writes outside the block.
    assert_eq!(o.unmapped.side(1), 3 + 2);
    assert_eq!(o.unmapped.side(0), 3);
}

/// An allocator call under way when a thread's tracing ends (a window
/// ended while the thread was inside `malloc`) is abandoned when its
/// tracing starts again: kept, the next window's `malloc` was taken for a
/// call nested in it and its block lost (0 allocations). By hand: `malloc`
/// entered deep in the stack, tracing restarted (`join_window`), then a
/// whole `call malloc` returning 0xA000 and a write into the block.
#[test]
fn an_allocator_call_left_by_an_earlier_window_is_abandoned() {
    use coldcache_capture::objects::{Kind, Objects};
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut m = Fake::new()
        // 0x1000: call 0x2000; 0x1005: movl $1, 4(%rax).
        .code(
            0x1000,
            &[
                0xE8, 0xFB, 0x0F, 0x00, 0x00, //
                0xC7, 0x40, 0x04, 0x01, 0x00, 0x00, 0x00,
            ],
        )
        // malloc: nop; ret.
        .code(0x2000, &[0x90, 0xC3]);
    let allocators = [(0x2000, Kind::Malloc, "malloc")];
    let mut s = setup(Reserves::default(), false, None);
    s.objects = Some(Objects::new(true, 4, &allocators, Vec::new()));
    let mut a = Accountant::new(s).unwrap();
    a.claim(TID).unwrap();
    let at = |a: &mut Accountant, ip: u64, sp: u64, m: &mut Fake| {
        m.set(Register::RSP, sp);
        assert_eq!(step(a, ip, m), Verdict::Continue, "at {ip:#x}");
    };
    // The earlier window: malloc entered 0x100 bytes deeper, never returns
    // while traced.
    m.set(Register::RDI, 32);
    at(&mut a, 0x2000, SP - 0x108, &mut m);
    assert!(a.join_window(TID, false));
    at(&mut a, 0x1000, SP, &mut m);
    m.set(Register::RDI, 64);
    at(&mut a, 0x2000, SP - 8, &mut m);
    m.set(Register::RAX, 0xA000);
    at(&mut a, 0x2001, SP - 8, &mut m);
    at(&mut a, 0x1005, SP, &mut m);
    let (d, _) = finish(a);
    let o = d.objects.expect("objects");
    assert_eq!((o.allocations, o.unreturned), (1, 1));
    assert_eq!(o.sites.len(), 1);
    let site = &o.sites[0];
    assert_eq!((site.blocks, site.bytes), (1, 64));
    assert_eq!(
        site.counts.served[1],
        [0, 0, 1],
        "the write, into the block"
    );
}
