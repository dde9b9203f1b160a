//! The program's fault and timer handlers during a capture (issue 33): in
//! fast mode a SIGSEGV, SIGBUS, SIGFPE or SIGILL handler of the program
//! that reads or moves the interrupted RIP (the "safe fetch" of the JVM
//! and of allocators, a crash handler's `dladdr`) sees the program's
//! context, not the code cache's; so does a SIGPROF, SIGVTALRM, SIGALRM
//! or SIGURG handler, which interrupts the program anywhere and reads
//! where (a sampling profiler's `setitimer`, gperftools, a runtime's
//! preemption); so does the C library's cancellation handler
//! ([`SIGCANCEL`]), which under `PTHREAD_CANCEL_ASYNCHRONOUS` unwinds the
//! thread from the interrupted context (from a code-cache address the
//! unwinder found no frame; from the dispatcher's Rust code it aborted the
//! program). An asynchronous signal is mapped where a fault would be,
//! and anywhere between two instruction copies of a block; in a block's
//! exit code, the dispatcher or the replay it is held back to the thread's
//! next program instruction ([`crate::jit::hold_back`]); in a system call
//! block its handler still sees a code-cache address (counted, the dump's
//! note says how many of each).
//!
//! While a capture is prepared or runs ([`arm`] to [`disarm`]; in both
//! modes, so that a `sigaction` the window counts runs the same library
//! code in both), the kernel's disposition of each of those signals the program handles
//! is [`on_fault`], with the program's flags (plus `SA_SIGINFO`), mask and
//! restorer; the program's disposition is kept here (the kernel's `struct
//! sigaction` words), as `sigvirt.rs` keeps the engine's own signals'. The
//! program's handler is called from `on_fault` after
//! [`crate::jit::to_program`] made the context the program's, and the
//! thread goes back to translated code when it returns
//! ([`crate::jit::resume`]: to the same point if the handler changed no
//! register, else through the dispatcher). A handler that `siglongjmp`s out, or
//! throws a C++ exception (`-fnon-call-exceptions`: `on_fault` is
//! `C-unwind`, and the unwinder goes on through the kernel's signal frame,
//! whose context is the program's), leaves as before: the thread continues
//! untraced. Outside translated code (and in trap mode) the program's
//! handler gets the context untouched.
//!
//! The program's disposition is read and set here for `sigaction`/`signal`
//! through the C library ([`program_sigaction`], `libcoldcache.so`
//! interposes them) and for a traced thread's own `rt_sigaction` system
//! call ([`emulate`], from the trap engine). Not seen: an untraced thread's
//! raw `rt_sigaction` (its handler then replaces ours and sees code-cache
//! addresses, as before; ours is not put back at [`disarm`]).

use crate::memory::{read_word, write_word};
use crate::signal_state::sigfault::{PROGRAM, SIGCANCEL, SIGNALS, WRAPPED, WRAPPING};
use crate::sigvirt::{libc_restorer, raw_rt_sigaction};
use std::sync::atomic::Ordering;

/// Of [`SIGNALS`], the first that is not a fault.
const FIRST_ASYNC: usize = 4;
const SA_RESTORER: u64 = 0x0400_0000;

/// The index of `sig` in [`SIGNALS`]; `None` for any other signal, and for
/// one the engine owns (`sigvirt.rs`) or triggers captures with (`record
/// --trigger-signal PROF`): their dispositions are virtualised there.
fn slot(sig: i32) -> Option<usize> {
    let i = SIGNALS.iter().position(|&s| s == sig)?;
    (i < FIRST_ASYNC
        || (crate::sigvirt::slot_of(sig).is_none() && crate::doorbell::trigger_signal() != sig))
        .then_some(i)
}

fn bit(sig: i32) -> u64 {
    1u64 << sig
}

fn is_wrapped(sig: i32) -> bool {
    WRAPPED.load(Ordering::Acquire) & bit(sig) != 0
}

fn program(i: usize) -> [u64; 4] {
    std::array::from_fn(|k| PROGRAM[i][k].load(Ordering::Acquire))
}

fn ours() -> u64 {
    on_fault as *const () as usize as u64
}

/// Installs [`on_fault`] for `sig` with the flags, mask and restorer of
/// the program's disposition `prog` (a handler), which is kept; the
/// kernel's result.
fn wrap(sig: i32, prog: [u64; 4]) -> i64 {
    let Some(i) = slot(sig) else {
        return -i64::from(libc::EINVAL);
    };
    if prog[0] == ours() {
        // Our own handler, read back by an untraced thread's raw system
        // call and set again: the program's stays (never ours, which
        // would call itself).
        return 0;
    }
    for (w, v) in PROGRAM[i].iter().zip(prog) {
        w.store(v, Ordering::Release);
    }
    let words = [ours(), prog[1] | libc::SA_SIGINFO as u64, prog[2], prog[3]];
    // SAFETY: 4 words in a live local, the kernel's layout.
    let r = unsafe { raw_rt_sigaction(sig, words.as_ptr() as u64, 0) };
    if r == 0 {
        WRAPPED.fetch_or(bit(sig), Ordering::AcqRel);
    }
    r
}

/// Gives `sig` the program's `SIG_DFL`/`SIG_IGN` disposition `prog`.
fn unwrap(sig: i32, prog: [u64; 4]) -> i64 {
    // SAFETY: 4 words in a live local, the kernel's layout.
    let r = unsafe { raw_rt_sigaction(sig, prog.as_ptr() as u64, 0) };
    if r == 0 {
        WRAPPED.fetch_and(!bit(sig), Ordering::AcqRel);
    }
    r
}

/// A capture is prepared (normal context): the handlers the program has
/// now for [`SIGNALS`] are wrapped, and those it installs
/// until [`disarm`].
pub(crate) fn arm() {
    if libc_restorer() == 0 {
        return;
    }
    WRAPPING.store(true, Ordering::Release);
    for sig in SIGNALS {
        if slot(sig).is_none() {
            continue;
        }
        let mut old = [0u64; 4];
        // SAFETY: a null new action; `old` is 4 live words.
        if unsafe { raw_rt_sigaction(sig, 0, old.as_mut_ptr() as u64) } != 0 {
            continue;
        }
        let handler = old[0];
        if handler <= 1 || handler == ours() || handler == crate::fatal::handler() {
            continue; // SIG_DFL, SIG_IGN, or ours
        }
        if old[1] & SA_RESTORER == 0 {
            continue; // would not return natively either: left alone
        }
        wrap(sig, old);
    }
}

/// The capture is over (normal context): the program's handlers go back to
/// the kernel (where ours is still there).
pub(crate) fn disarm() {
    WRAPPING.store(false, Ordering::Release);
    for (i, sig) in SIGNALS.into_iter().enumerate() {
        if !is_wrapped(sig) {
            continue;
        }
        let mut now = [0u64; 4];
        // SAFETY: a null new action; `now` is 4 live words.
        let read = unsafe { raw_rt_sigaction(sig, 0, now.as_mut_ptr() as u64) };
        if read == 0 && now[0] == ours() {
            let prog = program(i);
            // SAFETY: 4 words in a live local, the kernel's layout.
            unsafe { raw_rt_sigaction(sig, prog.as_ptr() as u64, 0) };
        }
        WRAPPED.fetch_and(!bit(sig), Ordering::AcqRel);
    }
}

/// What the dump's notes say about it (`None`: no handler interrupted
/// translated code).
pub(crate) fn note() -> Option<String> {
    let mapped = crate::jit::HANDLED.swap(0, Ordering::Relaxed);
    let held = crate::jit::HELD_BACK.swap(0, Ordering::Relaxed);
    let unmapped = crate::jit::UNMAPPED.swap(0, Ordering::Relaxed);
    (mapped + held + unmapped > 0).then(|| {
        format!(
            "fast mode: {mapped} program signal handler runs interrupted translated code and \
             saw the program's context; {held} signals came in the translator's own code and \
             were held back to the next program instruction; {unmapped} saw a code-cache or \
             coldcache address (interrupted in a system call block's own code, or a fault \
             outside a block's instruction copies)"
        )
    })
}

/// The engine's handler of [`SIGNALS`] while wrapped: the program's
/// handler, run on the program's context (see the module header).
extern "C-unwind" fn on_fault(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(i) = slot(sig) else { return };
    let prog = program(i);
    if prog[0] <= 1 {
        // Raced with a change to SIG_DFL/SIG_IGN: that disposition takes
        // over; the instruction runs again (or the signal is lost, as an
        // ignored one would be).
        unwrap(sig, prog);
        return;
    }
    if prog[1] & libc::SA_RESETHAND as u64 != 0 {
        // The kernel has reset the disposition to SIG_DFL.
        WRAPPED.fetch_and(!bit(sig), Ordering::AcqRel);
    }
    // SAFETY: the kernel passes a valid siginfo and ucontext to an
    // SA_SIGINFO handler; this thread is the only user of both.
    let (code, uc) = unsafe { ((*info).si_code, &mut *(ctx as *mut libc::ucontext_t)) };
    // A fault the kernel sent is exactly at its instruction; a timer's
    // signal (`SI_KERNEL`, also > 0) comes anywhere.
    // Our work before and after the program's handler keeps the errno the
    // handler sees and the one it leaves (it may also `siglongjmp` away).
    let fault = i < FIRST_ASYNC && code > 0;
    let can_hold = !fault && prog[1] & libc::SA_RESETHAND as u64 == 0;
    let (state, held) = {
        let _errno = crate::errno::Kept::new();
        let state = crate::jit::to_program(uc, fault);
        match state {
            crate::jit::Interrupted::Translated(b)
                if sig == SIGCANCEL && can_hold && !(b.at_call() && crate::jit::call_flushed()) =>
            {
                // The cancellation handler may unwind the thread out of its
                // block, leaving it marked as running translated code: held
                // back to the trap engine instead, which it leaves cleanly
                // (the context first given back to the block). Not at a
                // call whose block replayed its buffer first (`T.blocked`),
                // which the signal must interrupt: glibc acts on a
                // cancellation there by the program's address (an unwind
                // from there leaves the thread marked, as a `siglongjmp`
                // out of a handler does, with nothing unreplayed).
                crate::jit::resume(uc, &b);
                let how = crate::jit::Interrupted::Unmapped { in_call: false };
                if crate::jit::hold_back(uc, sig, info, &how, true) {
                    (how, true)
                } else {
                    (crate::jit::to_program(uc, fault), false)
                }
            }
            _ => (
                state,
                crate::jit::hold_back(uc, sig, info, &state, can_hold),
            ),
        }
    };
    if held {
        // Delivered again at the thread's next program instruction.
        return;
    }
    crate::jit::delivered(sig);
    if prog[1] & libc::SA_SIGINFO as u64 != 0 {
        type Action = extern "C-unwind" fn(i32, *mut libc::siginfo_t, *mut libc::c_void);
        // SAFETY: the program's handler, installed with SA_SIGINFO.
        let f = unsafe { std::mem::transmute::<usize, Action>(prog[0] as usize) };
        f(sig, info, ctx);
    } else {
        type Handler = extern "C-unwind" fn(i32);
        // SAFETY: the program's handler, installed without SA_SIGINFO.
        let f = unsafe { std::mem::transmute::<usize, Handler>(prog[0] as usize) };
        f(sig);
    }
    if let crate::jit::Interrupted::Translated(b) = state {
        let _errno = crate::errno::Kept::new();
        // SAFETY: as above.
        crate::jit::resume(unsafe { &mut *(ctx as *mut libc::ucontext_t) }, &b);
    }
}

/// The program's `sigaction` through the C library (`libcoldcache.so`
/// interposes it): the shadow of one of [`SIGNALS`] while wrapping, else
/// of one of the engine's own signals (`sigvirt::program_sigaction`);
/// `None` for any other signal (the caller passes it on to the C library).
///
/// # Safety
/// `act` and `old` are null or valid, as for `sigaction(2)`.
pub unsafe fn program_sigaction(
    sig: i32,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> Option<i32> {
    // SAFETY: the caller's pointers, as sigaction(2) takes them.
    match unsafe { fault_sigaction(sig, act, old) } {
        r @ Some(_) => r,
        // SAFETY: as above.
        None => unsafe { crate::sigvirt::program_sigaction(sig, act, old) },
    }
}

/// The program's `sigaction` for one of [`SIGNALS`] while wrapping:
/// `None` leaves it to the caller.
///
/// # Safety
/// `act` and `old` are null or valid, as for `sigaction(2)`.
unsafe fn fault_sigaction(
    sig: i32,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> Option<i32> {
    let i = slot(sig)?;
    if !WRAPPING.load(Ordering::Acquire) || sig == SIGCANCEL {
        // The C library refuses its own signal to the program.
        return None;
    }
    // SAFETY: the caller's valid pointer.
    let new = (!act.is_null()).then(|| crate::sigvirt::kernel_words(unsafe { &*act }));
    let fail = |r: i64| {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = -r as i32 };
        Some(-1)
    };
    if !is_wrapped(sig) {
        let w = new.filter(|w| w[0] > 1)?;
        if !old.is_null() {
            // SAFETY: the caller's valid pointer; a read only.
            if unsafe { crate::sigvirt::real_sigaction(sig, std::ptr::null(), old) } != 0 {
                return Some(-1);
            }
        }
        let r = wrap(sig, w);
        return if r == 0 { Some(0) } else { fail(r) };
    }
    let was = program(i);
    if let Some(w) = new {
        let r = if w[0] <= 1 {
            unwrap(sig, w)
        } else {
            wrap(sig, w)
        };
        if r != 0 {
            return fail(r);
        }
    }
    // SAFETY: the caller's pointer, null or valid.
    unsafe { crate::sigvirt::write_old(old, was) };
    Some(0)
}

/// Performs, for a traced thread, the `rt_sigaction` it is about to make
/// (RIP at its `syscall`, `next` the instruction after it) on a wrapped
/// signal: the program's disposition is read and set here. False, changing
/// nothing, for any other call (and for the installs of [`wrap`] itself).
pub(crate) fn emulate(uc: &mut libc::ucontext_t, next: u64) -> bool {
    let g = &uc.uc_mcontext.gregs;
    if g[libc::REG_RAX as usize] != libc::SYS_rt_sigaction || g[libc::REG_R10 as usize] != 8 {
        return false;
    }
    let sig = g[libc::REG_RDI as usize];
    let Some(i) = i32::try_from(sig).ok().and_then(slot) else {
        return false;
    };
    let sig = sig as i32;
    let (act, old) = (
        g[libc::REG_RSI as usize] as u64,
        g[libc::REG_RDX as usize] as u64,
    );
    if !is_wrapped(sig) {
        // The C library installs its cancellation handler with its own
        // system call, never through `sigaction`: wrapped here when it
        // comes (other signals' first handlers come through the interposed
        // `sigaction`, as the program asks for them).
        if sig != SIGCANCEL || act == 0 || !WRAPPING.load(Ordering::Acquire) {
            return false;
        }
        let Some(handler) = read_word(act) else {
            return false;
        };
        if handler <= 1 || handler == ours() {
            return false;
        }
        let mut was = [0u64; 4];
        // SAFETY: a null new action; `was` is 4 live words.
        if unsafe { raw_rt_sigaction(sig, 0, was.as_mut_ptr() as u64) } != 0 {
            return false;
        }
        let words: [Option<u64>; 4] = std::array::from_fn(|k| read_word(act + 8 * k as u64));
        if words.iter().any(Option::is_none) {
            return false;
        }
        let mut result = wrap(sig, words.map(Option::unwrap_or_default));
        if result == 0 && old != 0 {
            for (k, v) in was.into_iter().enumerate() {
                if !write_word(old + 8 * k as u64, v) {
                    result = -i64::from(libc::EFAULT);
                }
            }
        }
        let g = &mut uc.uc_mcontext.gregs;
        g[libc::REG_RAX as usize] = result;
        g[libc::REG_RIP as usize] = next as i64;
        return true;
    }
    let mut new = None;
    if act != 0 {
        let words: [Option<u64>; 4] = std::array::from_fn(|k| read_word(act + 8 * k as u64));
        if words[0] == Some(ours()) {
            return false;
        }
        new = Some(words);
    }
    let was = program(i);
    let result = match new {
        Some(w) if w.iter().any(Option::is_none) => -i64::from(libc::EFAULT),
        Some(w) => {
            let w = w.map(Option::unwrap_or_default);
            if w[0] <= 1 {
                unwrap(sig, w)
            } else {
                wrap(sig, w)
            }
        }
        None => 0,
    };
    let result = if result == 0 && old != 0 {
        let mut ok = true;
        for (k, v) in was.into_iter().enumerate() {
            ok &= write_word(old + 8 * k as u64, v);
        }
        if ok {
            0
        } else {
            -i64::from(libc::EFAULT)
        }
    } else {
        result
    };
    let g = &mut uc.uc_mcontext.gregs;
    g[libc::REG_RAX as usize] = result;
    g[libc::REG_RIP as usize] = next as i64;
    true
}
