//! The trap engine's signal shell: the handlers that single-step traced
//! threads with the trap flag and hand every instruction to the
//! [`Accountant`](crate::account::Accountant), the naked entry points that
//! control exactly which of our instructions run with TF set, and the
//! trampoline that lets an interrupted thread write the dump (the writer
//! thread is `writer.rs`, its doorbell `doorbell.rs`).
//!
//! # How it works
//! - The calling thread starts stepping when `coldcache_arm_current_thread`
//!   (assembly) sets TF right before its `ret`: the first trap is at the
//!   caller's next instruction. Other threads get a thread-directed *sync*
//!   signal whose handler sets TF in the saved context.
//! - `on_sigtrap` runs after every instruction of a traced thread. RIP is
//!   the *next* instruction and the saved registers are its inputs, so the
//!   handler passes RIP, RSP, RBP and a [`ContextMachine`] over the saved
//!   context to [`Accountant::step`](crate::account::Accountant::step) and
//!   acts on its verdict (clear TF, stop, emulate `rt_sigprocmask`, re-arm
//!   the breakpoint). Returning keeps TF set in the saved flags.
//! - Stopping flips the state (`lifecycle.rs`); every traced thread clears
//!   TF at its next trap. Threads are not signalled to stop: a signal would
//!   cut a program's wait in `poll`, `nanosleep` or `epoll_wait` short
//!   with `EINTR`.
//!
//! # Invariants
//! - The signal handlers allocate nothing, take no lock the program could
//!   hold (only the session's spin lock, `state.rs`), and never panic on
//!   any input.
//! - Nothing of coldcache runs traced: TF is set by the last instructions of
//!   the start path and cleared before the first of the stop path.

use crate::account::Verdict;
use crate::breakpoint::{self, BP_ADDR, BP_LAST, REPLANT_TID};
use crate::doorbell::{self, request_of, Command, Request, TRIGGERED};
use crate::errno;
use crate::machine::ContextMachine;
use crate::memory::write_word;
use crate::options::{CaptureError, Options};
use crate::procfs;
use crate::signal_state::engine::{
    in_own_text, EXEC_NEXT, HANDLERS, HANDLER_STACK_TOP, OWN_TEXT, REDIRECTED, RESUME_RIP,
    SIGNAL_WINDOWS, STOP_FILE, SYNC_WOKE, TRAMPOLINE_STACK_TOP, TRIGGER_WOKE,
};
use crate::sigvirt;
use crate::state::{
    gettid, selected, try_with_session, with_session, Session, ARMED, CAPTURE_PID, FINISH_PENDING,
    IDLE, INSTRUCTIONS, IN_HANDLER, PENDING, RUNNING, STATE, STOPPING,
};
use crate::sysemu;
use std::sync::atomic::Ordering;

const TF: i64 = 0x100;

/// Sends the sync signal to thread `tid` of this process, so its handler
/// sets TF (a thread that has exited just makes it fail). A thread blocked
/// in a wait the kernel never restarts after a handler (`nanosleep`,
/// `poll`, `epoll_wait`, ...) sees it return EINTR, as for any signal:
/// counted ([`SYNC_WOKE`]) and said in the dump (`Meta::woken_early`).
pub(crate) fn signal_thread(tid: u32) {
    sigvirt::send_sync(tid);
}

/// Whether the signal whose handler sees `uc` ended a system call with
/// EINTR: RAX is `-EINTR` right after a `syscall` instruction (a call the
/// kernel restarts is back at its `syscall` with its number in RAX).
fn interrupted_a_wait(uc: &libc::ucontext_t) -> bool {
    let g = &uc.uc_mcontext.gregs;
    let mut before = [0u8; 2];
    let ended = g[libc::REG_RAX as usize] == -i64::from(libc::EINTR)
        && crate::memory::read_bytes(
            (g[libc::REG_RIP as usize] as u64).wrapping_sub(2),
            &mut before,
        )
        && before == [0x0F, 0x05];
    if !ended {
        return false;
    }
    // Two of our signals pending together (a start and a stop that found
    // the thread still asleep on a loaded machine) are delivered one after
    // the other on the same context: the second sees the first's EINTR at
    // the same place. Every register equal means the program has not run
    // since (a loop that sleeps again with every register the same would
    // be counted once: the rarer error).
    let digest = g.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &r| {
        (h ^ r as u64).wrapping_mul(0x0000_0100_0000_01b3)
    }) | 1;
    // SAFETY: this thread's own state, which only its own code touches
    // (a nested handler on this thread runs to its end before this one
    // goes on).
    let t = unsafe { &mut *crate::tls::this() };
    if t.woken_at == digest {
        return false;
    }
    t.woken_at = digest;
    true
}

/// The waits the capture's signals ended early (and forgets them).
pub(crate) fn take_woken_early() -> coldcache_dump::WokenEarly {
    coldcache_dump::WokenEarly {
        by_start: u64::from(SYNC_WOKE.swap(0, Ordering::Relaxed)),
        by_trigger: u64::from(TRIGGER_WOKE.swap(0, Ordering::Relaxed)),
    }
}

fn os(what: &'static str) -> CaptureError {
    CaptureError::Os {
        what,
        source: std::io::Error::last_os_error(),
    }
}

struct StepArgs<'a> {
    session: &'a mut Session,
    uc: &'a mut libc::ucontext_t,
}

extern "C" fn step_thunk(p: *mut libc::c_void) {
    // SAFETY: `p` is the `StepArgs` passed by `step_switched`, alive for
    // the call.
    let a = unsafe { &mut *(p as *mut StepArgs<'_>) };
    step(a.session, a.uc);
}

/// Bytes of the handler stack and of the finish stack.
const HANDLER_STACK_LEN: usize = 2 << 20;

/// Whether this thread runs on the handler stack now.
fn on_handler_stack() -> bool {
    let top = HANDLER_STACK_TOP.load(Ordering::Acquire);
    let here = 0u8;
    let sp = std::hint::black_box(&here) as *const u8 as u64;
    top != 0 && sp < top && sp >= top - HANDLER_STACK_LEN as u64
}

extern "C" fn switched_thunk(p: *mut libc::c_void) {
    // SAFETY: `p` is the closure reference passed by `switched`, alive for
    // the call.
    let f = unsafe { &mut *(p as *mut &mut dyn FnMut()) };
    f();
}

/// Runs `f` on the handler stack (the caller holds `LOCK`, so only one
/// thread uses that stack at a time), or where it is when it is there
/// already. A trap's handler may run on the program's own alternate
/// stack (Rust's runtime arms 8 KiB on every thread, and the kernel's
/// frame takes 3.5 KiB of it with AVX-512 state): only the handler's
/// first frames may live there.
fn switched(f: &mut dyn FnMut()) {
    let top = HANDLER_STACK_TOP.load(Ordering::Acquire);
    if top == 0 || on_handler_stack() {
        return f();
    }
    let mut f = f;
    // SAFETY: the handler stack is reserved for the process and only used
    // with `LOCK` held, which the caller holds; this thread is not on it.
    unsafe {
        crate::altstack::run_on_stack(
            &mut f as *mut &mut dyn FnMut() as *mut libc::c_void,
            switched_thunk,
            top,
        )
    };
}

/// [`step`] on the handler stack (the caller holds `LOCK`, so only one
/// thread uses that stack at a time).
fn step_switched(session: &mut Session, uc: &mut libc::ucontext_t) {
    let top = HANDLER_STACK_TOP.load(Ordering::Acquire);
    if top == 0 || on_handler_stack() {
        return step(session, uc);
    }
    let mut args = StepArgs { session, uc };
    // SAFETY: the handler stack is reserved for the process and only used
    // with `LOCK` held, which the caller holds.
    unsafe {
        crate::altstack::run_on_stack(
            &mut args as *mut StepArgs<'_> as *mut libc::c_void,
            step_thunk,
            top,
        )
    };
}

// ---------------------------------------------------------------------------
// Entry points in assembly: they control exactly which instructions of ours
// run with TF set.

/// Sets TF on the calling thread so tracing starts at the caller's next
/// instruction: the trap comes after the instruction following `popfq`,
/// the `ret`.
///
/// # Safety
/// Only to be called by [`start`] after a successful [`prepare`]: with no
/// capture running, the first trap clears TF again, harmlessly.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn coldcache_arm_current_thread() {
    core::arch::naked_asm!("pushfq", "or qword ptr [rsp], 0x100", "popfq", "ret")
}

pub(crate) fn install_handlers() -> Result<(), CaptureError> {
    let mut done = HANDLERS.lock().unwrap_or_else(|e| e.into_inner());
    // SIGTRAP and the sync signal are taken at every start: a program that
    // took one back with a raw system call keeps its disposition in the
    // shadow (`sigvirt.rs`), and ours is installed again.
    let trap = on_sigtrap as *const () as usize;
    sigvirt::take(sigvirt::TRAP, libc::SIGTRAP, trap).map_err(|source| CaptureError::Os {
        what: "installing the SIGTRAP handler",
        source,
    })?;
    let sync = match sigvirt::sync_signal() {
        0 => sigvirt::choose_sync(),
        s => s,
    };
    sigvirt::take(sigvirt::SYNC, sync, on_sync as *const () as usize).map_err(|source| {
        CaptureError::Os {
            what: "installing the sync signal's handler",
            source,
        }
    })?;
    doorbell::set_stopper(stop_by_signal);
    if *done {
        return Ok(());
    }
    crate::altstack::reserve();
    // The handler's work and `finish` after a redirect run on stacks of
    // their own, so a traced thread with a small stack (glibc allows 16 KiB)
    // only holds the signal frame. Both are used under the engine's lock or
    // by one redirected thread at a time, and live for the process.
    for (top, what) in [
        (&HANDLER_STACK_TOP, "reserving the handler stack"),
        (&TRAMPOLINE_STACK_TOP, "reserving the finish stack"),
    ] {
        const LEN: usize = HANDLER_STACK_LEN;
        // SAFETY: an anonymous private mapping has no preconditions.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os(what));
        }
        top.store((p as u64 + LEN as u64) & !63, Ordering::Release);
    }
    let own = on_sigtrap as *const () as usize as u64;
    if let Some(m) = procfs::self_maps()
        .into_iter()
        .find(|m| m.perms.contains('x') && (m.start..m.end).contains(&own))
    {
        OWN_TEXT[0].store(m.start, Ordering::Relaxed);
        OWN_TEXT[1].store(m.end, Ordering::Relaxed);
    }
    *done = true;
    drop(done);
    if coldcache_fsio::env::is_set("COLDCACHE_PROGRESS") {
        crate::writer::ensure_writer()?;
    }
    Ok(())
}

fn install(sig: i32, handler: usize) -> Result<(), CaptureError> {
    // SAFETY: a zeroed sigaction is a valid starting point; every field we
    // rely on is set below.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    sa.sa_mask = crate::state::all_signals();
    // SAFETY: installing a handler with a fully initialised struct.
    if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
        return Err(os("installing a signal handler"));
    }
    Ok(())
}

/// Installs the handler of the outside trigger signal (`--signal`): each
/// delivery starts a capture with `options` (the writer thread calls
/// `start`, the life cycle's `prepare`), or stops the running one.
pub fn install_trigger_signal(
    sig: i32,
    options: Options,
    start: fn(Options) -> Result<bool, CaptureError>,
) -> Result<(), CaptureError> {
    install_handlers()?;
    crate::writer::ensure_writer()?;
    doorbell::set_starter(start);
    *PENDING.lock().unwrap_or_else(|e| e.into_inner()) = Some(options);
    doorbell::set_trigger_signal(sig);
    SIGNAL_WINDOWS.store(true, Ordering::Release);
    install(sig, on_trigger_signal as *const () as usize)?;
    take_stop_signal()
}

/// The signal `coldcache record` queues its [`REQUEST_STOP`](doorbell::REQUEST_STOP) on when it is
/// interrupted: a real-time signal of the library's own, not the trigger
/// signal, so a program that uses SIGUSR2 itself never gets one it did not
/// ask for on Ctrl-C. `SIGRTMIN+7` (the sync signal is `SIGRTMIN+6`) unless
/// the program started with it handled, ignored or blocked: the library
/// then takes another ([`take_stop_signal`]) and writes which to the file
/// `record` names (`COLDCACHE_STOP_FILE`). In this process: the one taken,
/// or `SIGRTMIN+7` before that.
pub fn stop_request_signal() -> i32 {
    match sigvirt::stop_signal() {
        0 => libc::SIGRTMIN() + 7,
        s => s,
    }
}

/// Asks the library to write `PID SIGNAL` to `path` (atomically) once it
/// has taken its stop request signal, for `coldcache record`.
pub fn set_stop_file(path: std::path::PathBuf) {
    *STOP_FILE.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
}

/// Takes the stop request signal (chosen once, among the real-time
/// signals the program leaves alone): its disposition becomes the
/// program's own in the shadow (`sigvirt.rs`), as for the sync signal, so
/// a program that uses it keeps its handler, its `SIG_IGN` or its default
/// action, and `record` is told which signal to send.
fn take_stop_signal() -> Result<(), CaptureError> {
    let sig = match sigvirt::stop_signal() {
        0 => sigvirt::choose_stop(),
        s => s,
    };
    sigvirt::take(sigvirt::STOP, sig, on_trigger_signal as *const () as usize).map_err(
        |source| CaptureError::Os {
            what: "installing the stop request signal's handler",
            source,
        },
    )?;
    if let Some(path) = STOP_FILE.lock().unwrap_or_else(|e| e.into_inner()).take() {
        // Atomically, under an unguessable temporary name: a `.tmp` name
        // known in advance could be a link planted by another user.
        let text = format!("{} {sig}\n", std::process::id());
        let _ = coldcache_fsio::write_atomically(&path, text.as_bytes());
    }
    Ok(())
}

/// Installs the handler of the trigger signal for a capture started
/// otherwise (`--function`, `--all`, the C API under `record`): the signal
/// then stops the capture, armed or running, and its dump is written, cut
/// short "stopped by `coldcache trigger`" (or "interrupted (SIGINT)" for a
/// [`REQUEST_STOP`](doorbell::REQUEST_STOP)). No writer thread is started for it (it would change
/// the instructions the program runs): the interrupted thread writes the
/// dump (see [`stop_by_signal`]).
pub fn install_stop_signal(sig: i32) -> Result<(), CaptureError> {
    install_handlers()?;
    doorbell::set_trigger_signal(sig);
    install(sig, on_trigger_signal as *const () as usize)?;
    take_stop_signal()
}

extern "C" fn on_trigger_signal(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let _errno = errno::Kept::new();
    // SAFETY: the kernel passes a valid ucontext_t to an SA_SIGINFO handler.
    let uc = unsafe { &mut *(ctx as *mut libc::ucontext_t) };
    let request = request_of(info);
    if sig == sigvirt::stop_signal() && !matches!(request, Request::Stop(_)) {
        // The program's own use of the stop request signal: its
        // disposition decides.
        if let sigvirt::Delivered::Fatal = sigvirt::deliver(sigvirt::STOP, sig, info, uc, false) {
            crate::fatal::die(
                sig,
                uc,
                Some("the program was killed by a real-time signal"),
            );
        }
        return;
    }
    if interrupted_a_wait(uc) {
        TRIGGER_WOKE.fetch_add(1, Ordering::Relaxed);
    }
    match request {
        Request::Stop(sig) => {
            // A signal the fatal handler catches writes the dump itself when
            // it arrives (and ends the program): two writers would race.
            if !crate::fatal::catches(sig) {
                stop_by_signal(uc, crate::fatal::interrupted(sig));
            }
        }
        _ if SIGNAL_WINDOWS.load(Ordering::Acquire) => doorbell::post(Command::Trigger),
        _ => stop_by_signal(uc, TRIGGERED),
    }
}

/// Stops the armed or running capture from a signal handler that
/// interrupted the program (context `uc`), the dump cut short `why`: it is
/// written by the writer thread if there is one, else by the interrupted
/// thread when the handler returns (`finish_soon`); a thread in translated
/// code writes it at its next dispatch; else — the thread was inside the
/// library — a traced thread's next safe point ([`FINISH_PENDING`]: its
/// next trap or breakpoint hit), or the next `coldcache_stop`, or exit.
pub(crate) fn stop_by_signal(uc: &mut libc::ucontext_t, why: &'static str) {
    let state = STATE.load(Ordering::Acquire);
    if !matches!(state, ARMED | RUNNING)
        || CAPTURE_PID.load(Ordering::Relaxed) != std::process::id()
    {
        return;
    }
    try_with_session(|cell| {
        if let Some(s) = cell {
            s.acc.set_cut_short(why);
        }
    });
    if STATE
        .compare_exchange(state, STOPPING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    if crate::jit::in_translation() {
        // The thread's next dispatch sees STOPPING (at the latest when its
        // buffer fills): it replays, leaves and writes the dump there.
        FINISH_PENDING.store(true, Ordering::Release);
        return;
    }
    set_tf(uc, false);
    finish_soon(uc, false);
}

// ---------------------------------------------------------------------------
// Signal handlers.

#[inline]
fn set_tf(uc: &mut libc::ucontext_t, on: bool) {
    let f = &mut uc.uc_mcontext.gregs[libc::REG_EFL as usize];
    if on {
        *f |= TF;
    } else {
        *f &= !TF;
    }
}

extern "C" fn on_sync(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let _errno = errno::Kept::new();
    // SAFETY: the kernel passes a valid ucontext_t and siginfo_t to an
    // SA_SIGINFO handler; they live until the handler returns.
    let (uc, own) = unsafe {
        (
            &mut *(ctx as *mut libc::ucontext_t),
            sigvirt::is_own_sync(&*info),
        )
    };
    if !own {
        // The program's own use of the signal: its disposition decides.
        if let sigvirt::Delivered::Fatal = sigvirt::deliver(sigvirt::SYNC, sig, info, uc, false) {
            crate::fatal::die(
                sig,
                uc,
                Some("the program was killed by a real-time signal"),
            );
        }
        return;
    }
    if interrupted_a_wait(uc) {
        SYNC_WOKE.fetch_add(1, Ordering::Relaxed);
    }
    if crate::jit::in_translation()
        || crate::jit::in_old_translation(uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64)
    {
        // Translated code is traced without TF (an earlier capture's is
        // handed to the trap engine at its next dispatch).
        return;
    }
    let tid = gettid();
    let on =
        STATE.load(Ordering::Acquire) == RUNNING && tid != doorbell::writer_tid() && selected(tid);
    let was_on = uc.uc_mcontext.gregs[libc::REG_EFL as usize] & TF != 0;
    set_tf(uc, on);
    if on {
        // The interrupted code may have SIGTRAP blocked (a program signal
        // handler's mask, its own sigprocmask): the first trap would then
        // kill the process. The block becomes virtual.
        sigvirt::unblock_trap(uc);
    }
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    if on && !was_on && on_way_out(rip) {
        // It is in our code on its way out (the end of `dispatch`, the
        // dispatcher's restore): its traps step on, uncounted, to the
        // program's next instruction, where its tracing starts (handing it
        // over from our code would translate our own way out and loop
        // there forever). Not only a thread leaving translated code: one
        // the dispatcher sends back to the trap engine for one
        // instruction (`trap_once`: TF in its saved flags, not yet in
        // this context) is on the same way out.
        crate::jit::set_late_start(true);
    } else if on && !was_on {
        // The trap comes after the interrupted instruction runs: account
        // for it now, from the state before it. The lock is only tried: a
        // thread interrupted while holding it (never expected) skips this
        // one instruction rather than deadlocking.
        IN_HANDLER.fetch_add(1, Ordering::SeqCst);
        crate::schedule::enter(tid, running);
        try_with_session(|cell| match cell {
            Some(s) if STATE.load(Ordering::Acquire) == RUNNING => step_switched(s, uc),
            _ => {}
        });
        IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The calling thread's name (`comm`, NUL padded): `prctl(PR_GET_NAME)`,
/// async-signal-safe, no allocation.
fn own_thread_name() -> [u8; 16] {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes (NUL included) to the
    // buffer, which is 16 bytes long and lives across the call.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    name
}

/// Whether `rip` is on a thread's way out of translated code: the
/// dispatcher before its final jump, or the library's own code.
fn on_way_out(rip: u64) -> bool {
    crate::jit::in_dispatcher(rip) || in_own_text(rip)
}

/// Whether the capture runs (a stop ends every wait for a turn).
fn running() -> bool {
    STATE.load(Ordering::Acquire) == RUNNING
}

/// Whether a SIGTRAP is the engine's own: a single-step trap, or an `int3`
/// of the function breakpoint (planted now, or just removed).
fn is_own_trap(code: i32, rip: u64) -> bool {
    let bp = BP_ADDR.load(Ordering::Acquire);
    let last = BP_LAST.load(Ordering::Acquire);
    code == libc::TRAP_TRACE
        || code == libc::TRAP_BRKPT
        || code == 4 // TRAP_HWBKPT
        || code == libc::SI_KERNEL
            && ((bp != 0 && rip == bp.wrapping_add(1)) || (last != 0 && rip == last.wrapping_add(1)))
}

extern "C" fn on_sigtrap(_sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let _errno = errno::Kept::new();
    // SAFETY: the kernel passes a valid ucontext_t and siginfo_t to an
    // SA_SIGINFO handler; they live until the handler returns.
    let (uc, code) = unsafe { (&mut *(ctx as *mut libc::ucontext_t), (*info).si_code) };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    if !is_own_trap(code, rip) {
        // An int3 of the program, a kill/tgkill/raise of SIGTRAP.
        program_trap(info, uc, code == libc::SI_KERNEL);
        after_trap(uc);
        return;
    }
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    let bp = BP_ADDR.load(Ordering::Acquire);
    let last = BP_LAST.load(Ordering::Acquire);
    if bp != 0 && rip == bp.wrapping_add(1) && code == libc::SI_KERNEL {
        on_breakpoint(uc, bp);
    } else if last != 0 && rip == last.wrapping_add(1) && code == libc::SI_KERNEL {
        // Our int3, removed by another thread (or by `finish`) between the
        // hit and now: run the original instruction.
        if breakpoint::removed_at(last) {
            uc.uc_mcontext.gregs[libc::REG_RIP as usize] = last as i64;
        }
    } else {
        if crate::jit::is_on() && crate::jit::verify_trap(uc) {
            // Translated code single-stepped by `--mode verify`.
            IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        // A thread the dispatcher handed back: step the program
        // instruction it was jumping to. (Asked also once fast mode is
        // off: a thread that left with signals held back traps there.)
        if crate::jit::take_back(uc) == crate::jit::Back::Left {
            IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
            after_trap(uc);
            return;
        }
        if crate::jit::late_start() {
            let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
            if on_way_out(rip) {
                // Started by the sync signal on its way out of translated
                // code: step on, uncounted, to the program's instruction.
                set_tf(uc, STATE.load(Ordering::Acquire) == RUNNING);
                IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
                after_trap(uc);
                return;
            }
            crate::jit::set_late_start(false);
        }
        let replant = REPLANT_TID.load(Ordering::Acquire);
        let state = STATE.load(Ordering::Acquire);
        if replant == 0 && (state == IDLE || state == STOPPING) {
            // No system call on this path: after a seccomp stop, a thread's
            // last trap must not make one.
            set_tf(uc, false);
            if state == STOPPING {
                finish_if_pending(uc);
            }
        } else if CAPTURE_PID.load(Ordering::Relaxed) != std::process::id() {
            // A child forked (or vforked: it shares our memory, so no state
            // is written) during the capture inherited TF: it is not traced.
            set_tf(uc, false);
        } else if replant != 0 && replant == gettid() {
            REPLANT_TID.store(0, Ordering::Release);
            set_tf(uc, false);
            with_session(|_| {
                if STATE.load(Ordering::Acquire) == ARMED {
                    breakpoint::replant();
                }
            });
        } else if STATE.load(Ordering::Acquire) != RUNNING {
            set_tf(uc, false);
        } else {
            // `--schedule serial`: the turn first, outside every lock.
            crate::schedule::enter(gettid(), running);
            with_session(|cell| match cell {
                Some(s) if STATE.load(Ordering::Acquire) == RUNNING => step_switched(s, uc),
                _ => set_tf(uc, false),
            });
        }
    }
    IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    after_trap(uc);
}

/// A SIGTRAP that is not the engine's goes to the program's disposition
/// (`sigvirt.rs`); `forced`: an `int3` it executed, which is fatal when
/// ignored or blocked, as natively. After an `int3` on a traced thread the
/// instruction it resumes at runs before the next trap: it is accounted
/// for now, as after an emulated system call.
#[inline(never)]
fn program_trap(info: *mut libc::siginfo_t, uc: &mut libc::ucontext_t, forced: bool) {
    if !forced && sigvirt::hold_if_blocked() {
        return;
    }
    match sigvirt::deliver(sigvirt::TRAP, libc::SIGTRAP, info, uc, forced) {
        sigvirt::Delivered::Fatal => {
            crate::fatal::die(libc::SIGTRAP, uc, Some("the program was killed by SIGTRAP"));
        }
        sigvirt::Delivered::Done => {
            let traced = uc.uc_mcontext.gregs[libc::REG_EFL as usize] & TF != 0;
            if forced && traced && STATE.load(Ordering::Acquire) == RUNNING {
                IN_HANDLER.fetch_add(1, Ordering::SeqCst);
                with_session(|cell| match cell {
                    Some(s) if STATE.load(Ordering::Acquire) == RUNNING => step_switched(s, uc),
                    _ => set_tf(uc, false),
                });
                IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// The end of every SIGTRAP handler run: a SIGTRAP the program held
/// blocked and just unblocked is delivered; a thread no longer traced gets
/// its SIGTRAP block back.
fn after_trap(uc: &mut libc::ucontext_t) {
    if sigvirt::take_deliver() {
        // SAFETY: a zeroed siginfo_t filled as tgkill(2) fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; the first words are signo, errno, code, pid, uid.
        unsafe {
            let w = &mut info as *mut libc::siginfo_t as *mut u32;
            *w = libc::SIGTRAP as u32;
            *w.add(2) = libc::SI_TKILL as u32;
            *w.add(4) = std::process::id();
            *w.add(5) = libc::getuid();
        }
        program_trap(&mut info, uc, false);
    }
    let traced = uc.uc_mcontext.gregs[libc::REG_EFL as usize] & TF != 0;
    let still = traced
        || crate::jit::in_translation()
        || STATE.load(Ordering::Acquire) == RUNNING && selected(gettid());
    if !still {
        sigvirt::reblock_trap(uc);
        crate::altstack::leave(uc);
    }
    // A kept rseq section (`rseq.rs`): aborted when the thread's tracing
    // ends inside it, its commit armed otherwise.
    if traced {
        crate::rseq::before_return(uc);
    } else {
        crate::rseq::leave(uc);
    }
}

#[inline(never)]
fn on_breakpoint(uc: &mut libc::ucontext_t, bp: u64) {
    // Re-execute the original instruction in every case.
    breakpoint::hit(bp);
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] = bp as i64;
    match STATE.load(Ordering::Acquire) {
        ARMED => {}
        STOPPING => return finish_if_pending(uc),
        _ => return,
    }
    let tid = gettid();
    with_session(|cell| {
        let Some(s) = cell.as_mut() else { return };
        switched(&mut || function_entered(s, uc, tid));
    });
}

/// The watched function entered on thread `tid` (the engine's lock held):
/// a window starts, or the entry is skipped.
fn function_entered(s: &mut Session, uc: &mut libc::ucontext_t, tid: u32) {
    if STATE.load(Ordering::Acquire) != ARMED {
        return;
    }
    let rsp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
    match s.acc.function_entered(tid, rsp) {
        crate::account::Entry::Capture => {
            // Descriptors opened while nothing was traced
            // (`codewrite.rs`).
            crate::codewrite::window_start(&mut s.acc, crate::jit::invalidate);
            crate::objects::window_start(&mut s.acc);
            let joined = join_window(s, tid);
            STATE.store(RUNNING, Ordering::Release);
            set_tf(uc, true);
            sigvirt::unblock_trap(uc);
            // The other selected threads start as a C-API start with
            // threads=all starts them: the sync signal sets their TF.
            for x in crate::state::SELECTED.iter().take(joined).skip(1) {
                signal_thread(x.load(Ordering::Relaxed));
            }
            // The trap comes after the instruction at the entry runs:
            // account for it now, from the state before it.
            step_switched(s, uc);
        }
        crate::account::Entry::Skip => {
            // Step over the original instruction, then plant again.
            REPLANT_TID.store(tid, Ordering::Release);
            set_tf(uc, true);
            sigvirt::unblock_trap(uc);
        }
        crate::account::Entry::NoSlot => {}
    }
}

/// A function window starts on thread `caller`: the selection becomes the
/// caller first, then every other thread the capture's `--threads` names
/// (all, ids, names; the writer never), each traced afresh
/// ([`Accountant::join_window`](crate::account::Accountant::join_window)).
/// Returns how many entries of `SELECTED` are set. Allocation-free: the
/// threads are listed with raw system calls.
fn join_window(s: &mut Session, caller: u32) -> usize {
    use crate::options::Threads;
    use crate::state::{MAX_SELECTED, SELECTED};
    let writer = doorbell::writer_tid();
    let warming = s.acc.warming(caller);
    SELECTED[0].store(caller, Ordering::Relaxed);
    let mut n = 1;
    let mut untraced = 0u64;
    if s.window != Threads::Caller {
        let (acc, window) = (&mut s.acc, &s.window);
        procfs::for_each_task(|t| {
            // The thread `coldcache attach` runs its remote calls on is
            // left alone until the tracer lets it go (`attach.rs`).
            if t == caller || t == writer || n >= MAX_SELECTED || crate::state::remote_held(t) {
                return;
            }
            // Our other threads (the zones stream) are
            // never the program's.
            if *window == Threads::All && procfs::thread_is_ours(t) {
                return;
            }
            let wanted = match window {
                Threads::Caller => false,
                Threads::All => true,
                Threads::Tids(ids) => ids.contains(&t),
                Threads::Names(names) => procfs::thread_named(t, names),
            };
            if wanted && acc.join_window(t, warming) {
                SELECTED[n].store(t, Ordering::Relaxed);
                n += 1;
            } else if !wanted && !procfs::thread_is_ours(t) {
                untraced += 1;
            }
        });
    }
    if s.window != Threads::All && !warming {
        if s.window == Threads::Caller {
            // Every other thread but ours.
            procfs::for_each_task(|t| {
                if t != caller
                    && t != writer
                    && !crate::state::remote_held(t)
                    && !procfs::thread_is_ours(t)
                {
                    untraced += 1;
                }
            });
        }
        s.acc.untraced_at_start(untraced);
    }
    for x in SELECTED.iter().skip(n) {
        x.store(0, Ordering::Relaxed);
    }
    n
}

/// Gets the dump of a capture that stopped inside a handler written: by the
/// writer thread if there is one; else by this thread, redirected through
/// [`coldcache_finish_trampoline`] when that is safe (at a safe point — the
/// triggering function just returned — or anywhere when the library runs on
/// its own allocator, so `finish` cannot wait for a lock the interrupted
/// code holds); else at the next `coldcache_stop` or at exit.
fn finish_soon(uc: &mut libc::ucontext_t, safe_point: bool) {
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    let in_own_code = in_own_text(rip);
    if doorbell::has_writer() {
        doorbell::post(Command::Finish);
    } else if safe_point || (crate::state::own_allocator() && !in_own_code) {
        redirect_to_finish(uc);
    } else if crate::state::own_allocator() {
        // In the library's own code (e.g. the dispatcher, signals just
        // unblocked, handing the thread to the trap engine): its next
        // safe point writes the dump.
        FINISH_PENDING.store(true, Ordering::Release);
    }
}

/// Why the capture must end before the system call of the thread of `uc`
/// (RIP at a `syscall`): it replaces, unmaps, moves, reprotects or empties
/// memory of ours, the code cache of a fast-mode capture, the far
/// region's tables, buffers and stacks, or the library's heap (either way
/// fast mode is off for the rest of the process). A program
/// may do so when it believes a range free (a JIT or an allocator that
/// scanned the address space before, or reserves with `MAP_FIXED`).
/// Mappings of ours elsewhere (the alternate signal stacks, the library's
/// own allocator) are not checked.
fn takes_own_memory(uc: &libc::ucontext_t) -> Option<&'static str> {
    sysemu::replaced_ranges(uc)
        .into_iter()
        .flatten()
        .find_map(|(start, end)| {
            let code = crate::jit::in_code_cache(start, end);
            let far = crate::grow::in_own_regions(start, end);
            if code || far {
                // The fast front end keeps chunks, buffers and stacks there
                // from one capture to the next.
                crate::jit::memory_taken();
            }
            if code && crate::jit::is_on() {
                Some(
                    "the program mapped over coldcache's code cache (MAP_FIXED, munmap, mremap, \
                     mprotect or madvise on its range): the capture stopped before that call, \
                     and fast mode is off in this process from there on",
                )
            } else if far {
                Some(
                    "the program mapped over coldcache's own memory (MAP_FIXED, munmap, mremap, \
                     mprotect or madvise on the ranges from 16 and 32 TiB where coldcache keeps \
                     its tables and heap): the capture stopped before that call",
                )
            } else {
                None
            }
        })
}

/// At a safe point of a traced thread (a trap or breakpoint hit at a
/// program instruction, the state STOPPING): has the dump written that a
/// handler could not have written where it interrupted
/// ([`FINISH_PENDING`]), as [`finish_soon`] would at a safe point: by the
/// writer thread if there is one, else by this thread, when the library's
/// allocator is its own (a program instruction may be inside the
/// program's `malloc`). Never in a forked child (the capture is the
/// parent's; a vforked one shares the flag).
fn finish_if_pending(uc: &mut libc::ucontext_t) {
    if CAPTURE_PID.load(Ordering::Relaxed) != std::process::id() {
        return;
    }
    if doorbell::has_writer() {
        if FINISH_PENDING.swap(false, Ordering::AcqRel) {
            doorbell::post(Command::Finish);
        }
    } else if crate::state::own_allocator() && FINISH_PENDING.swap(false, Ordering::AcqRel) {
        redirect_to_finish(uc);
    }
}

/// Makes the thread call `finish` when the handler returns, then resume
/// exactly where it was: RIP goes to the trampoline, which finds the
/// original RSP on its stack (256 bytes below, past the red zone) and the
/// original RIP in `RESUME_RIP`.
fn redirect_to_finish(uc: &mut libc::ucontext_t) {
    if TRAMPOLINE_STACK_TOP.load(Ordering::Acquire) == 0 || REDIRECTED.swap(true, Ordering::AcqRel)
    {
        return;
    }
    let g = &mut uc.uc_mcontext.gregs;
    let rsp = g[libc::REG_RSP as usize] as u64;
    let rip = g[libc::REG_RIP as usize] as u64;
    let new = ((rsp - 256) & !15) - 16;
    if !write_word(new, rsp) {
        REDIRECTED.store(false, Ordering::Release);
        return;
    }
    RESUME_RIP.store(rip, Ordering::Release);
    g[libc::REG_RSP as usize] = new as i64;
    g[libc::REG_RIP as usize] = coldcache_finish_trampoline as *const () as usize as i64;
}

/// Declares that this process's Rust allocator is the library's own (not
/// the program's `malloc`), so a capture stopped anywhere may be finished
/// by the interrupted thread itself. Called by `libcoldcache.so`.
pub fn set_own_allocator() {
    crate::state::set_own_allocator();
}

extern "C" fn finish_from_trampoline() {
    let _errno = errno::Kept::new();
    doorbell::finish_here();
    if EXEC_NEXT.swap(false, Ordering::AcqRel) {
        // The capture is written and nothing traps any more: the program's
        // SIG_IGN of the engine's signals is inherited by the new program.
        sigvirt::before_exec(true);
    }
    // `REDIRECTED` is cleared by the trampoline itself, once it has read
    // back everything it left on the shared finish stack.
}

/// Saves every register (flags, general registers, the whole XSAVE state),
/// calls `finish`, restores everything and jumps back to `RESUME_RIP` with
/// the original RSP. Entered only through [`redirect_to_finish`].
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn coldcache_finish_trampoline() {
    core::arch::naked_asm!(
        "pushfq",
        "push rax",
        "push rcx",
        "push rdx",
        "push rbx",
        "push rbp",
        "push rsi",
        "push rdi",
        "push r8",
        "push r9",
        "push r10",
        "push r11",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "mov rbp, rsp",
        // `finish` and the XSAVE area go on the finish stack, not on the
        // interrupted thread's (which may be small).
        "mov rsp, qword ptr [rip + {stack}]",
        "sub rsp, 16384",
        "and rsp, -64",
        // XRSTOR needs the header's reserved bytes zero.
        "xor eax, eax",
        "mov [rsp + 512], rax",
        "mov [rsp + 520], rax",
        "mov [rsp + 528], rax",
        "mov [rsp + 536], rax",
        "mov [rsp + 544], rax",
        "mov [rsp + 552], rax",
        "mov [rsp + 560], rax",
        "mov [rsp + 568], rax",
        "mov eax, -1",
        "mov edx, -1",
        "xsave64 [rsp]",
        "cld",
        "call {finish}",
        "mov eax, -1",
        "mov edx, -1",
        "xrstor64 [rsp]",
        "mov rsp, rbp",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop r11",
        "pop r10",
        "pop r9",
        "pop r8",
        "pop rdi",
        "pop rsi",
        "pop rbp",
        "pop rbx",
        "pop rdx",
        "pop rcx",
        "pop rax",
        "popfq",
        // [rsp] holds the original RSP; neither mov nor jmp touches flags.
        "mov rsp, [rsp]",
        // Only now may another thread be redirected: the XSAVE area on the
        // shared finish stack has been read back (x86 keeps this store
        // after those loads). What remains shared is `RESUME_RIP`, read by
        // the very next instruction.
        "mov byte ptr [rip + {redirected}], 0",
        "jmp qword ptr [rip + {resume}]",
        finish = sym finish_from_trampoline,
        redirected = sym REDIRECTED,
        resume = sym RESUME_RIP,
        stack = sym TRAMPOLINE_STACK_TOP,
    )
}

/// One trap of a traced thread: the accountant's step, then its verdict
/// carried out on the saved context.
fn step(s: &mut Session, uc: &mut libc::ucontext_t) {
    let tid = gettid();
    // The next signal frames (traps, a fault of translated code) go to a
    // stack of ours.
    crate::altstack::enter(uc);
    if crate::jit::is_on() {
        crate::jit::trust_mapped_code(&mut s.acc);
    }
    // Never handed over from our own code (the dispatcher, the library's
    // text): translating `dispatch` itself sends the thread back to the
    // dispatcher's restore path as "the program's next instruction".
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    if crate::jit::is_on() && !on_way_out(rip) && crate::jit::try_hand_over(uc, tid, &s.acc) {
        return;
    }
    // An rseq critical section the thread was switched out of is aborted
    // here, as the kernel would have (`rseq.rs`).
    crate::rseq::before_step(uc);
    // Its commit is made here, inside a section of ours, or the section is
    // aborted (the IP moves to its abort address, accounted for below).
    let committed = match crate::rseq::commit(uc, &s.layout) {
        crate::rseq::Commit::Made(next) => Some(next),
        crate::rseq::Commit::No | crate::rseq::Commit::Aborted => None,
    };
    let g = &uc.uc_mcontext.gregs;
    let (rip, rsp, rbp) = (
        g[libc::REG_RIP as usize] as u64,
        g[libc::REG_RSP as usize] as u64,
        g[libc::REG_RBP as usize] as u64,
    );
    let verdict = {
        // SAFETY: `uc` is the live context of this handler.
        let machine = unsafe { ContextMachine::new(uc, &s.layout) };
        s.acc.step(tid, rip, rsp, rbp, &machine)
    };
    INSTRUCTIONS.store(s.acc.instructions(), Ordering::Relaxed);
    if let Some(next) = committed {
        // The commit accounted for has been made: the program goes on after
        // it, whatever the verdict.
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] = next as i64;
    }
    match verdict {
        Verdict::Continue => {
            crate::schedule::tick(tid, 1);
            // A store of an rseq descriptor is kept, not made, and a commit
            // made here (`rseq.rs`): the instruction after it runs before
            // the next trap.
            if committed.is_some() {
                step(s, uc);
            } else if let Some(i) = s.acc.instruction_at(rip) {
                if crate::rseq::skip_store(uc, &i, &s.layout) {
                    step(s, uc);
                }
            }
        }
        Verdict::StopThread => {
            crate::schedule::leave(tid);
            set_tf(uc, false)
        }
        Verdict::StopCapture(_) => {
            STATE.store(STOPPING, Ordering::Release);
            set_tf(uc, false);
            finish_soon(uc, false);
        }
        Verdict::Syscall { .. } if takes_own_memory(uc).is_some() => {
            // The program claims address space that holds ours (issue 33):
            // the capture is written now, on this thread, before the call
            // runs; the program then makes it, untraced.
            s.acc
                .set_cut_short(takes_own_memory(uc).unwrap_or_default());
            STATE.store(STOPPING, Ordering::Release);
            set_tf(uc, false);
            if crate::state::own_allocator() {
                redirect_to_finish(uc);
            } else {
                // The call may come from inside the program's `malloc`.
                finish_soon(uc, false);
            }
        }
        Verdict::Syscall { next } => {
            if let Some((start, end)) = sysemu::code_range_changed(uc) {
                // Before the call: what was decoded or translated there
                // must not be trusted once it has run.
                s.acc.code_changed(start, end);
                crate::jit::invalidate(start, end);
            }
            // Code that may change without mprotect (`codewrite.rs`): a
            // writable /proc/<pid>/mem demotes all code, a writable open of
            // a file mapped as code demotes its mappings.
            crate::codewrite::apply(
                crate::codewrite::before_syscall(uc),
                &mut s.acc,
                crate::jit::invalidate,
            );
            if crate::jit::is_on() && sysemu::maps_code(uc) {
                // After the call: what it mapped may be translated.
                crate::jit::code_mapped();
            }
            if sigvirt::emulate(uc, next)
                || crate::sigfault::emulate(uc, next)
                || crate::fatal::emulate_sigaction(uc, next)
            {
                // The syscall was done here and RIP moved past it: the
                // instruction there runs before the next trap, so account
                // for it now.
                step(s, uc);
            } else if sysemu::ends_thread(uc) {
                // Its slot is free for a thread created later: a pool that
                // churns is traced for as long as asked, bounded by the
                // threads alive at once, not the threads ever created.
                crate::schedule::exiting(tid);
                s.acc.release(tid, own_thread_name());
                crate::jit::release_thread();
                sigvirt::forget_thread();
            } else if let Some(why) = sysemu::ends_process(uc) {
                // `_exit` or `exec`: no exit hook will run. The dump is
                // written now, on this thread, before the call is made
                // (with the library's own allocator nothing the program
                // holds can block it); otherwise by the writer, if there
                // is time.
                let exits = uc.uc_mcontext.gregs[libc::REG_RAX as usize] == libc::SYS_exit_group;
                if !(exits && s.acc.exit_ends_call(tid, true)) {
                    s.acc.set_cut_short(why);
                }
                STATE.store(STOPPING, Ordering::Release);
                set_tf(uc, false);
                if crate::state::own_allocator() {
                    let nr = uc.uc_mcontext.gregs[libc::REG_RAX as usize];
                    EXEC_NEXT.store(
                        nr == libc::SYS_execve || nr == libc::SYS_execveat,
                        Ordering::Release,
                    );
                    redirect_to_finish(uc);
                } else {
                    finish_soon(uc, false);
                }
            } else {
                // The call runs natively: one that may block gives up the
                // thread's turn (`--schedule serial`) first.
                crate::schedule::tick(tid, 1);
                let g = &uc.uc_mcontext.gregs;
                if crate::schedule::clones_thread(
                    g[libc::REG_RAX as usize] as u64,
                    g[libc::REG_RDI as usize] as u64,
                    crate::memory::read_word,
                ) {
                    s.acc.thread_started_by(tid);
                }
                crate::schedule::syscall(
                    tid,
                    g[libc::REG_RAX as usize] as u64,
                    g[libc::REG_RDI as usize] as u64,
                    g[libc::REG_RSI as usize] as u64,
                    crate::memory::read_word,
                );
            }
        }
        Verdict::FunctionReturned { more } => {
            crate::schedule::leave(tid);
            set_tf(uc, false);
            // `finish` may have begun: only a running capture re-arms.
            if more
                && STATE
                    .compare_exchange(RUNNING, ARMED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                breakpoint::replant();
                // Other threads of the window (`--threads`) leave
                // translated code at their next buffer check.
                crate::jit::call_back_runners();
            } else if !more {
                STATE.store(STOPPING, Ordering::Release);
                finish_soon(uc, true);
            }
        }
    }
}
