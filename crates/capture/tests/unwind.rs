//! `StackUnwinder` against the truth of this test binary: a chain of
//! `#[inline(never)]` functions captures its registers with inline assembly
//! in the innermost one and unwinds. The return addresses must lie, in
//! order, inside the callers (ranges from this binary's own symbol table),
//! each slot must hold its return address, and unwinding must not allocate.
//!
//! Run with `--release` too: release builds omit frame pointers, so only
//! the CFI can find the callers there.

use coldcache_capture::memory::read_word;
use coldcache_capture::procfs;
use coldcache_capture::unwind::StackUnwinder;
use object::{Object, ObjectSymbol};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;

// ---------------------------------------------------------------------------
// A global allocator that counts this thread's allocations.

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the slot may be gone while the thread is torn down.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to the system allocator with the caller's
// arguments unchanged; counting touches only a const-initialised
// thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

// ---------------------------------------------------------------------------
// The chain. Each caller uses the callee's result after the call, so no
// call becomes a tail call.

const FRAMES: usize = 64;

/// What the innermost function saw and what the unwinder made of it.
struct Seen {
    rip: u64,
    rsp: u64,
    rbp: u64,
    frames: [(u64, u64); FRAMES],
    n: usize,
    /// Allocations counted during `unwind`.
    allocations: u64,
    /// The same unwind from the innermost function's entry: `rip` = its
    /// first instruction, `rsp` = the slot of its return address.
    at_entry: [(u64, u64); FRAMES],
    at_entry_n: usize,
    /// What the first slots held, read while their frames were live (0 for
    /// a slot outside the live frames).
    held: [u64; 3],
}

/// The outermost function whose range is checked (test functions may be
/// inlined into the harness's closures).
#[inline(never)]
fn unwind_chain_root(u: &mut StackUnwinder) -> Seen {
    // Every frame below this function's locals is live while the innermost
    // function runs: slots below `limit` may be read there.
    let here = 0u64;
    let limit = black_box(&here) as *const u64 as u64;
    let mut s = unwind_chain_outer(u, limit);
    s.n = black_box(s.n);
    s
}

#[inline(never)]
fn unwind_chain_outer(u: &mut StackUnwinder, limit: u64) -> Seen {
    let mut s = unwind_chain_middle(u, black_box(limit));
    s.n = black_box(s.n);
    s
}

#[inline(never)]
fn unwind_chain_middle(u: &mut StackUnwinder, limit: u64) -> Seen {
    let mut s = unwind_chain_inner(u, black_box(limit));
    s.n = black_box(s.n);
    s
}

#[inline(never)]
fn unwind_chain_inner(u: &mut StackUnwinder, limit: u64) -> Seen {
    let (rip, rsp, rbp): (u64, u64, u64);
    // SAFETY: reads RIP, RSP and RBP into registers; touches no memory and
    // changes no flags.
    unsafe {
        core::arch::asm!(
            "lea {rip}, [rip]",
            "mov {rsp}, rsp",
            "mov {rbp}, rbp",
            rip = out(reg) rip,
            rsp = out(reg) rsp,
            rbp = out(reg) rbp,
            options(nomem, nostack, preserves_flags),
        );
    }
    let mut s = Seen {
        rip,
        rsp,
        rbp,
        frames: [(0, 0); FRAMES],
        n: 0,
        allocations: 0,
        at_entry: [(0, 0); FRAMES],
        at_entry_n: 0,
        held: [0; 3],
    };
    let before = allocations();
    s.n = u.unwind(rip, rsp, rbp, &mut read_word, &mut s.frames);
    s.allocations = allocations() - before;
    if s.n > 0 {
        let entry = unwind_chain_inner as fn(&mut StackUnwinder, u64) -> Seen as usize as u64;
        s.at_entry_n = u.unwind(entry, s.frames[0].1, rbp, &mut read_word, &mut s.at_entry);
    }
    for (h, &(_, slot)) in s.held.iter_mut().zip(&s.frames[..s.n]) {
        if slot >= rsp && slot < limit && slot & 7 == 0 {
            // SAFETY: an aligned address between this function's RSP and a
            // local of `unwind_chain_root`, its caller's caller's caller:
            // inside the live frames of this thread's stack.
            *h = unsafe { std::ptr::read_volatile(slot as *const u64) };
        }
    }
    s
}

// ---------------------------------------------------------------------------
// The truth: function ranges from this binary's symbol table.

/// Runtime address ranges of the functions whose (mangled) names contain
/// each of `names`, in that order.
fn ranges(names: &[&str]) -> Vec<(u64, u64)> {
    let exe = std::fs::read("/proc/self/exe").expect("read /proc/self/exe");
    let file = object::File::parse(&*exe).expect("parse the test binary");
    let find = |name: &str| {
        let matches: Vec<_> = file
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
            .filter(|s| s.name().is_ok_and(|n| n.contains(name)))
            .map(|s| (s.address(), s.size()))
            .collect();
        assert_eq!(matches.len(), 1, "symbols named like {name}: {matches:x?}");
        matches[0]
    };
    // Load bias from a function whose runtime address we know.
    let (inner, _) = find("unwind_chain_inner");
    let runtime = unwind_chain_inner as fn(&mut StackUnwinder, u64) -> Seen as usize as u64;
    let bias = runtime.wrapping_sub(inner);
    names
        .iter()
        .map(|n| {
            let (a, size) = find(n);
            (a.wrapping_add(bias), a.wrapping_add(bias) + size)
        })
        .collect()
}

fn check_against_symbols(s: &Seen) {
    let names = [
        "unwind_chain_middle",
        "unwind_chain_outer",
        "unwind_chain_root",
    ];
    let truth = ranges(&names);
    assert!(
        s.n >= names.len(),
        "only {} frames: {:x?}",
        s.n,
        &s.frames[..s.n]
    );
    for (k, (&(ret, slot), &(start, end))) in s.frames.iter().zip(&truth).enumerate() {
        assert!(
            ret > start && ret < end,
            "frame {k}: return address {ret:#x} outside {} {start:#x}..{end:#x}",
            names[k]
        );
        assert!(slot >= s.rsp && slot & 7 == 0, "frame {k}: slot {slot:#x}");
        let held = s.held[k];
        assert_eq!(held, ret, "frame {k}: slot {slot:#x} holds {held:#x}");
    }
    for w in s.frames[..s.n].windows(2) {
        assert!(w[1].1 > w[0].1, "slots do not climb: {w:x?}");
    }
}

#[test]
fn return_addresses_lie_in_the_callers_and_slots_hold_them() {
    let mut u = procfs::self_unwinder();
    assert!(u.modules() > 0);
    let s = unwind_chain_root(&mut u);
    check_against_symbols(&s);
    // Beyond the root the walk goes on into the test and the harness.
    assert!(s.n > 4, "{:x?}", &s.frames[..s.n]);
    let _ = (s.rip, s.rbp);
}

#[test]
fn unwinding_from_a_function_entry_starts_with_the_return_address_at_rsp() {
    let mut u = procfs::self_unwinder();
    let s = unwind_chain_root(&mut u);
    check_against_symbols(&s);
    // The chain up to the root is the same as from inside the function.
    // Beyond it they may part: the RBP given is the one inside
    // `unwind_chain_inner`, not the one at its entry, and frames that use
    // RBP as a frame pointer further up need the latter.
    assert!(s.at_entry_n >= 3, "{:x?}", &s.at_entry[..s.at_entry_n]);
    assert_eq!(&s.at_entry[..3], &s.frames[..3]);
}

#[test]
fn unwind_allocates_nothing_after_new() {
    let mut u = procfs::self_unwinder();
    // Cold rule cache, then warm.
    for _ in 0..3 {
        let s = unwind_chain_root(&mut u);
        assert!(s.n >= 3);
        assert_eq!(s.allocations, 0, "unwind allocated");
    }
}

#[test]
fn unwind_works_on_a_small_thread_stack() {
    // The SIGTRAP handler runs on the traced thread's own stack; 16 KiB is
    // glibc's PTHREAD_STACK_MIN on x86-64.
    let mut u = procfs::self_unwinder();
    let n = std::thread::Builder::new()
        .stack_size(16 << 10)
        .spawn(move || unwind_chain_root(&mut u).n)
        .expect("spawn")
        .join()
        .expect("join");
    assert!(n >= 3, "{n} frames");
}

#[test]
fn wild_registers_give_no_frames_and_no_fault() {
    let mut u = procfs::self_unwinder();
    let mut out = [(0, 0); 8];
    assert_eq!(u.unwind(0, 0, 0, &mut read_word, &mut out), 0);
    assert_eq!(u.unwind(0x1234, 0x10, 0x20, &mut read_word, &mut out), 0);
    assert_eq!(
        u.unwind(
            u64::MAX - 7,
            u64::MAX - 7,
            u64::MAX,
            &mut read_word,
            &mut out
        ),
        0
    );
    // A real code address with a stack pointer into unmapped memory.
    let code = unwind_chain_inner as fn(&mut StackUnwinder, u64) -> Seen as usize as u64;
    assert_eq!(u.unwind(code + 1, 0x8, 0x8, &mut read_word, &mut out), 0);
    // No room: nothing written.
    assert_eq!(u.unwind(code + 1, 0x8, 0x8, &mut read_word, &mut []), 0);
}
