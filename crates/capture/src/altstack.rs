//! Alternate signal stacks of the engine's own for traced threads (both
//! modes), so the signal frame of every single-step trap, and of any signal
//! that interrupts translated code, lands there, not on the program's
//! stack: a thread with a small stack (glibc allows
//! 16 KiB) can use as much of it under capture as natively, and a stack
//! overflow of a traced thread is still delivered (its SIGSEGV reaches the
//! engine's fatal handler, which writes the dump).
//!
//! A thread that has no alternate stack of its own gets one of a pool
//! (mapped once per process, pages touched only when used) while it is
//! traced. It is set and removed through the saved context's `uc_stack`,
//! which the kernel installs when the handler returns (a handler cannot
//! call `sigaltstack` on the stack it runs on). The program keeps its
//! view: a traced thread's `sigaltstack` is performed by the trap handler
//! ([`emulate`]) and reads back "disabled" while ours is in place; one the
//! program sets replaces ours. A slot stays with its thread until the
//! thread has exited (checked with `tgkill(…, 0)`), so a stack is never
//! handed to another thread while a handler may still run on it.
//!
//! Ours is set with `SS_AUTODISARM`: the kernel ignores a handler's
//! `uc_stack` when that handler runs on the current alternate stack
//! (checked on Linux 6.18), so only a disarmed stack can be replaced from
//! the handler running on it.
//!
//! A `sigaltstack` of a traced thread whose alternate stack is the
//! program's own, armed without `SS_AUTODISARM` (Rust's runtime arms one
//! before `main` on every thread, then disables and unmaps it at the
//! thread's end), is not emulated: the engine's handler runs on that stack,
//! where the kernel would ignore the change, so the call is made for real,
//! by the program, after the handler has returned (`emulate` answers
//! `None`). The program sees exactly what it would natively; the next trap
//! then finds no alternate stack and [`enter`] puts ours in place, so the
//! stack the program unmaps next is not the one traps are delivered on.
//!
//! What stays visible: a handler of the program's with `SA_ONSTACK`, for a
//! signal the kernel delivers to a traced thread that has no alternate
//! stack of its own, runs on ours rather than on the thread's stack; a
//! traced thread that unmaps its armed alternate stack without disabling
//! it first (which natively faults only if a signal comes) dies at the
//! next trap, as it would at the next signal.

use crate::memory::{read_word, write_word};
use crate::state::altstack::{BASE, OWNER, SLOTS};
use crate::state::gettid;
use std::sync::atomic::Ordering;

/// `SS_AUTODISARM` (Linux 4.7).
const SS_AUTODISARM: i32 = 1 << 31;

/// Bytes of one stack: the kernel's frame, the engine's handler up to its
/// switch to the handler stack, a program handler with `SA_ONSTACK`.
const SIZE: u64 = 256 << 10;

/// Maps the pool (normal context; once per process). Without it traced
/// threads simply keep their frames on their own stacks.
pub(crate) fn reserve() {
    if BASE.load(Ordering::Acquire) != 0 {
        return;
    }
    // SAFETY: an anonymous private mapping has no preconditions.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            (SIZE as usize) * SLOTS,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p != libc::MAP_FAILED {
        BASE.store(p as u64, Ordering::Release);
    }
}

fn slot_base(i: usize) -> u64 {
    BASE.load(Ordering::Acquire) + SIZE * i as u64
}

/// Whether `sp` (an `ss_sp`) is one of the pool's stacks.
fn is_ours(sp: u64) -> bool {
    let base = BASE.load(Ordering::Acquire);
    base != 0 && sp >= base && sp < base + SIZE * SLOTS as u64
}

fn alive(tid: u32) -> bool {
    // SAFETY: signal 0 to a thread of this process only checks it exists.
    unsafe { libc::syscall(libc::SYS_tgkill, std::process::id() as i32, tid as i32, 0) == 0 }
}

/// This thread's stack of the pool, claimed now if it has none.
fn claim(tid: u32) -> Option<usize> {
    if let Some(i) = OWNER.iter().position(|o| o.load(Ordering::Acquire) == tid) {
        return Some(i);
    }
    for (i, o) in OWNER.iter().enumerate() {
        let cur = o.load(Ordering::Acquire);
        if (cur == 0 || !alive(cur))
            && o.compare_exchange(cur, tid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return Some(i);
        }
    }
    None
}

/// Whether `ss` is an alternate stack in use (the kernel treats a size of
/// zero as none, whatever the flags: a process's first thread starts so).
pub(crate) fn is_set(ss: &libc::stack_t) -> bool {
    ss.ss_flags & libc::SS_DISABLE == 0 && ss.ss_size != 0
}

/// The thread of `uc` is traced: if it has no alternate stack, it gets
/// ours when the handler returns.
pub(crate) fn enter(uc: &mut libc::ucontext_t) {
    if is_set(&uc.uc_stack) || BASE.load(Ordering::Acquire) == 0 {
        return;
    }
    if let Some(i) = claim(gettid()) {
        uc.uc_stack.ss_sp = slot_base(i) as *mut libc::c_void;
        uc.uc_stack.ss_size = SIZE as usize;
        // Disarmed while a handler runs on it: the kernel refuses to
        // change the alternate stack a handler runs on (it ignores the
        // `uc_stack` of that handler's frame), so without this a stack the
        // program sets, or our removal, would not take.
        uc.uc_stack.ss_flags = SS_AUTODISARM;
    }
}

/// The thread of `uc` is no longer traced: ours is removed when the
/// handler returns (the slot stays the thread's: the handler runs on it).
pub(crate) fn leave(uc: &mut libc::ucontext_t) {
    if is_set(&uc.uc_stack) && is_ours(uc.uc_stack.ss_sp as u64) {
        uc.uc_stack.ss_sp = std::ptr::null_mut();
        uc.uc_stack.ss_size = 0;
        uc.uc_stack.ss_flags = libc::SS_DISABLE;
    }
}

/// The calling thread leaves translated code untraced (fast mode's
/// dispatcher, normal context, on the dispatcher's stack): ours is
/// removed, as [`leave`] does from a handler.
pub(crate) fn leave_now() {
    // SAFETY: a zeroed stack_t is a valid out-parameter.
    let mut cur: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigaltstack reading into a live local.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut cur) } != 0 {
        return;
    }
    if is_set(&cur) && is_ours(cur.ss_sp as u64) && cur.ss_flags & libc::SS_ONSTACK == 0 {
        let off = libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: disabling the alternate stack, which this code does not
        // run on (SS_ONSTACK clear).
        unsafe { libc::sigaltstack(&off, std::ptr::null_mut()) };
    }
}

/// The program's view of the alternate stack at `uc`, as `sigaltstack`
/// reports it: ours reads as none; flags as the kernel computes them
/// (`SS_DISABLE` for none, `SS_ONSTACK` when the interrupted code runs on
/// it, and the `SS_AUTODISARM` the program set).
pub(crate) fn program_view(uc: &libc::ucontext_t) -> libc::stack_t {
    let ss = uc.uc_stack;
    if is_set(&ss) && is_ours(ss.ss_sp as u64) {
        return libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
    }
    let keep = ss.ss_flags & SS_AUTODISARM;
    let rsp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
    let flags = if ss.ss_size == 0 {
        libc::SS_DISABLE
    } else if rsp > ss.ss_sp as u64 && rsp - (ss.ss_sp as u64) <= ss.ss_size as u64 {
        libc::SS_ONSTACK
    } else {
        0
    };
    libc::stack_t {
        ss_sp: ss.ss_sp,
        ss_flags: flags | keep,
        ss_size: ss.ss_size,
    }
}

/// Whether the handler of `uc` runs on the program's own alternate stack,
/// armed without `SS_AUTODISARM`: the kernel ignores a change of the
/// alternate stack made through this handler's `uc_stack`.
fn on_program_stack(uc: &libc::ucontext_t) -> bool {
    let ss = &uc.uc_stack;
    is_set(ss) && !is_ours(ss.ss_sp as u64) && ss.ss_flags & SS_AUTODISARM == 0
}

/// Performs a traced thread's `sigaltstack(new, old)` (RIP at its
/// `syscall`) on the saved context: `old` gets the program's view, `new`
/// replaces the stack when the handler returns (disabling it puts ours
/// back). Returns the system call's result, or `None` when the thread's
/// alternate stack is its own and armed ([`on_program_stack`]): the call
/// is then left to run for real, where it takes effect as natively.
pub(crate) fn emulate(uc: &mut libc::ucontext_t, new: u64, old: u64) -> Option<i64> {
    if on_program_stack(uc) {
        return None;
    }
    Some(emulate_here(uc, new, old))
}

fn emulate_here(uc: &mut libc::ucontext_t, new: u64, old: u64) -> i64 {
    let mut want = None;
    if new != 0 {
        let (Some(sp), Some(fl), Some(size)) =
            (read_word(new), read_word(new + 8), read_word(new + 16))
        else {
            return -i64::from(libc::EFAULT);
        };
        let flags = fl as u32 as i32;
        let mode = flags & !SS_AUTODISARM;
        if mode != 0 && mode != libc::SS_DISABLE && mode != libc::SS_ONSTACK {
            return -i64::from(libc::EINVAL);
        }
        if mode != libc::SS_DISABLE && size < libc::MINSIGSTKSZ as u64 {
            return -i64::from(libc::ENOMEM);
        }
        want = Some((sp, flags, size, mode == libc::SS_DISABLE));
    }
    if old != 0 {
        let v = program_view(uc);
        let words = [v.ss_sp as u64, v.ss_flags as u32 as u64, v.ss_size as u64];
        if words
            .iter()
            .enumerate()
            .any(|(k, &w)| !write_word(old + 8 * k as u64, w))
        {
            return -i64::from(libc::EFAULT);
        }
    }
    if let Some((sp, flags, size, disable)) = want {
        if disable {
            uc.uc_stack.ss_flags = libc::SS_DISABLE;
            uc.uc_stack.ss_sp = std::ptr::null_mut();
            uc.uc_stack.ss_size = 0;
            enter(uc);
        } else {
            uc.uc_stack.ss_sp = sp as *mut libc::c_void;
            uc.uc_stack.ss_flags = flags & !libc::SS_ONSTACK;
            uc.uc_stack.ss_size = size as usize;
        }
    }
    0
}

/// Calls `f(arg)` with RSP switched to `top` (16-byte aligned by this
/// function), then switches back.
///
/// # Safety
/// `top` is the top of a mapped, writable stack nobody else uses during the
/// call, large enough for `f`.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn run_on_stack(
    arg: *mut libc::c_void,
    f: extern "C" fn(*mut libc::c_void),
    top: u64,
) {
    core::arch::naked_asm!(
        "push rbp",
        "mov rbp, rsp",
        "mov rsp, rdx",
        "and rsp, -16",
        "call rsi",
        "mov rsp, rbp",
        "pop rbp",
        "ret",
    )
}
