//! Fatal signals during a capture: the dump is written before the program
//! dies, and the program dies exactly as it would have.
//!
//! While a capture is prepared, armed or running, every catchable signal
//! whose default action ends the process (SIGSEGV, SIGABRT, SIGTERM, ...)
//! and that the program leaves at `SIG_DFL` gets [`on_fatal`] as its
//! handler ([`arm`]); [`disarm`] gives them back `SIG_DFL` when the capture
//! is written. Signals the program handles (or ignores) are never touched,
//! and a handler the program installs later simply replaces ours: its
//! signals keep going to it unchanged. A traced thread's `rt_sigaction` on
//! one of them is performed by the trap handler ([`emulate_sigaction`]), so
//! reading the disposition back gives the program the `SIG_DFL` it had.
//!
//! `on_fatal` writes the dump (cut short "the program was killed by
//! SIGSEGV", ...) through the life cycle's finish (`doorbell::finish_here`) on a stack of
//! its own, then restores `SIG_DFL` and sends the signal to its thread
//! again: when the handler returns, the pending signal ends the process with
//! the same signal, and the same core dump, as natively.
//!
//! # Async-signal safety
//! The handler takes no lock the interrupted code can hold:
//! - a thread inside `finish` (recorded in [`FINISHING_TID`]) or `prepare`
//!   (state `PREPARING`) is not asked to write: it dies without a dump
//!   rather than wait for itself;
//! - the library's writer thread blocks these signals ([`block_in_own_thread`]);
//! - every other thread of the program holds none of the engine's locks
//!   (the spin lock is only held inside the engine's own handlers, which run
//!   with every signal blocked), and the library allocates from its own
//!   allocator (`libcoldcache`'s `MmapAlloc`), never the program's `malloc`;
//! - one thread writes ([`CLAIMED`]); another thread killed meanwhile waits
//!   for it, then dies.
//!
//! A `SIGKILL`, a stack overflow without an alternate stack (the kernel
//! cannot deliver the SIGSEGV; traced threads, in both modes, have one of the
//! engine's, `altstack.rs`) and a synchronous fatal signal (a fault) while
//! the library itself is finishing on that thread still lose the capture;
//! asynchronous ones (SIGTERM, SIGALRM, ...) wait until the dump is
//! written ([`Finishing`]).

use crate::memory::{read_word, write_word};
use crate::signal_state::fatal::{ARMED_SET, CLAIMED, FINISHING_TID, ORIGINAL, STACK_TOP, WRITTEN};
use crate::state::{gettid, with_session, ARMED, CAPTURE_PID, RUNNING, STATE, STOPPING};
use std::sync::atomic::Ordering;

/// The signals whose default action ends the process and that a program
/// can catch, with the reason the dump gives when one ends it. SIGTRAP and
/// the real-time signals are the engine's or left alone. SIGUSR1 and
/// SIGUSR2 are here: the trigger signal is never at its default under
/// `record` (its handler is installed first, in every mode, and `arm`
/// leaves a handled signal alone), and when it is — a C API capture run
/// without `record` — a signal queued by `coldcache trigger`
/// ([`REQUEST_TRIGGER`](crate::doorbell::REQUEST_TRIGGER)) stops the capture
/// instead of ending the program, while any other SIGUSR1/SIGUSR2 ends it
/// as natively, the dump kept.
const FATAL: &[(i32, &str)] = &[
    (libc::SIGHUP, "the program was killed by SIGHUP"),
    (libc::SIGINT, "interrupted (SIGINT)"),
    (libc::SIGQUIT, "the program was killed by SIGQUIT"),
    (libc::SIGILL, "the program was killed by SIGILL"),
    (libc::SIGABRT, "the program was killed by SIGABRT"),
    (libc::SIGUSR1, "the program was killed by SIGUSR1"),
    (libc::SIGUSR2, "the program was killed by SIGUSR2"),
    (libc::SIGBUS, "the program was killed by SIGBUS"),
    (libc::SIGFPE, "the program was killed by SIGFPE"),
    (libc::SIGSEGV, "the program was killed by SIGSEGV"),
    (libc::SIGPIPE, "the program was killed by SIGPIPE"),
    (libc::SIGALRM, "the program was killed by SIGALRM"),
    (libc::SIGTERM, "the program was killed by SIGTERM"),
    (libc::SIGSTKFLT, "the program was killed by SIGSTKFLT"),
    (libc::SIGXCPU, "the program was killed by SIGXCPU"),
    (libc::SIGXFSZ, "the program was killed by SIGXFSZ"),
    (libc::SIGVTALRM, "the program was killed by SIGVTALRM"),
    (libc::SIGPROF, "the program was killed by SIGPROF"),
    (libc::SIGIO, "the program was killed by SIGIO"),
    (libc::SIGPWR, "the program was killed by SIGPWR"),
    (libc::SIGSYS, "the program was killed by SIGSYS"),
];

/// The fatal signals that only ever come from outside the thread (another
/// process, a timer, the terminal): [`Finishing`] holds them back while
/// its thread writes the dump. SIGPIPE and SIGXFSZ are left out: the
/// dump's own write can raise them, and deferring one would deliver it to
/// a program that never caused it.
const ASYNC: &[i32] = &[
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGSTKFLT,
    libc::SIGXCPU,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
];

/// The reason the dump gives when signal `sig` ends the program.
pub(crate) fn reason(sig: i32) -> Option<&'static str> {
    FATAL.iter().find(|&&(s, _)| s == sig).map(|&(_, r)| r)
}

/// Whether signal `sig` goes to [`on_fatal`] now (the dump is then written
/// when it arrives).
pub(crate) fn catches(sig: i32) -> bool {
    (1..64).contains(&sig) && ARMED_SET.load(Ordering::Acquire) & (1 << sig) != 0
}

/// The cut-short reason of a capture stopped because `record` was
/// interrupted by `sig` (the program handles the signal itself).
pub(crate) fn interrupted(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "interrupted (SIGINT)",
        libc::SIGTERM => "interrupted (SIGTERM)",
        libc::SIGHUP => "interrupted (SIGHUP)",
        libc::SIGQUIT => "interrupted (SIGQUIT)",
        _ => "interrupted",
    }
}

/// Marks the calling thread as the one running `finish` for as long as the
/// guard lives: a fatal signal on that thread then dies without waiting
/// for the dump it is itself writing. The asynchronous fatal signals
/// ([`ASYNC`]) are blocked on it meanwhile, so a SIGTERM or SIGALRM that
/// arrives while the dump is written waits for it (another thread may take
/// it, or it stays pending) and ends the program once the dump is
/// complete, instead of killing it mid-write.
pub(crate) struct Finishing {
    mask: u64,
}

impl Finishing {
    /// Marks the calling thread and holds back [`ASYNC`].
    pub(crate) fn enter() -> Finishing {
        FINISHING_TID.store(gettid(), Ordering::Release);
        let set = ASYNC.iter().fold(0u64, |m, &s| m | 1 << (s - 1));
        let mut mask = 0u64;
        // SAFETY: rt_sigprocmask with 8-byte sets in live locals.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_BLOCK,
                &set,
                &mut mask,
                8,
            )
        };
        Finishing { mask }
    }
}

impl Drop for Finishing {
    fn drop(&mut self) {
        FINISHING_TID.store(0, Ordering::Release);
        // SAFETY: as in `enter`: the thread's mask as it was.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &self.mask,
                std::ptr::null_mut::<u64>(),
                8,
            )
        };
    }
}

/// Installs [`on_fatal`] for every fatal signal the program leaves at
/// `SIG_DFL` (called by `prepare`). A signal that cannot be changed is left
/// as it is: the capture is then lost if it ends the program, nothing else.
pub(crate) fn arm() {
    if STACK_TOP.load(Ordering::Acquire) == 0 {
        const LEN: usize = 2 << 20;
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
            return;
        }
        STACK_TOP.store((p as u64 + LEN as u64) & !63, Ordering::Release);
    }
    CLAIMED.store(false, Ordering::Release);
    WRITTEN.store(false, Ordering::Release);
    let ours = on_fatal as *const () as usize;
    for &(sig, _) in FATAL {
        // SAFETY: a zeroed sigaction is a valid out-parameter.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the current one.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            continue;
        }
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != ours {
            continue; // the program's own handler, or ignored, or the trigger
        }
        if old.sa_sigaction == libc::SIG_DFL {
            let o = &ORIGINAL[sig as usize];
            o[0].store(old.sa_flags as u64, Ordering::Relaxed);
            o[1].store(
                old.sa_restorer.map_or(0, |f| f as usize as u64),
                Ordering::Relaxed,
            );
            // SAFETY: sa_mask is a sigset_t of at least 8 bytes, its first
            // word holding signals 1..=64.
            let mask = unsafe { *(&old.sa_mask as *const libc::sigset_t as *const u64) };
            o[2].store(mask, Ordering::Relaxed);
        }
        // SAFETY: a zeroed sigaction is a valid starting point; the fields
        // used are set below.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = ours;
        // SA_RESTART: until the signal is re-raised, a system call it
        // interrupted must not see EINTR (natively the process just dies).
        // SA_ONSTACK: a traced thread that overflows its stack gets its
        // SIGSEGV on the engine's alternate stack (`altstack.rs`).
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
        sa.sa_mask = crate::state::all_signals();
        // SAFETY: installing a handler with a fully initialised struct.
        if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } == 0 {
            ARMED_SET.fetch_or(1 << sig, Ordering::AcqRel);
        }
    }
}

/// Gives back `SIG_DFL` to every signal [`arm`] took, unless the program
/// has installed a handler of its own since (called when the capture is
/// written).
pub(crate) fn disarm() {
    let set = ARMED_SET.swap(0, Ordering::AcqRel);
    let ours = on_fatal as *const () as usize;
    for &(sig, _) in FATAL {
        if set & (1 << sig) == 0 {
            continue;
        }
        // SAFETY: a zeroed sigaction is a valid out-parameter.
        let mut cur: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the current one.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut cur) } == 0
            && cur.sa_sigaction == ours
        {
            default_action(sig);
        }
    }
}

/// Blocks every signal on the calling thread: the library's writer thread
/// calls it, so the program's signals (and their handlers) are never
/// delivered there, and a fatal one never interrupts it inside `finish`.
/// The C library's set, not [`crate::state::all_signals`]: glibc keeps
/// SIGSETXID (and SIGCANCEL) open, and must: `setuid` in a program with
/// threads signals every thread with SIGSETXID and waits for each, so a
/// writer that blocked it would hang the program's `setuid`.
pub(crate) fn block_in_own_thread() {
    // SAFETY: a sigset_t filled by sigfillset, then the thread's mask set
    // from it; SIGKILL and SIGSTOP are left out by the kernel.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// Performs, for a traced thread, the `rt_sigaction` it is about to make
/// (RIP at its `syscall`, `next` the instruction after it) when it names a
/// signal [`arm`] took: a thread that reads the disposition gets back the
/// `SIG_DFL` it had, not our handler; one that sets its own makes the
/// signal its own again (ours is not put back). Returns false, changing
/// nothing, for any other call, which then runs normally.
pub(crate) fn emulate_sigaction(uc: &mut libc::ucontext_t, next: u64) -> bool {
    let g = &uc.uc_mcontext.gregs;
    if g[libc::REG_RAX as usize] != libc::SYS_rt_sigaction || g[libc::REG_R10 as usize] != 8 {
        return false;
    }
    let sig = g[libc::REG_RDI as usize];
    if !(1..64).contains(&sig) || ARMED_SET.load(Ordering::Acquire) & (1 << sig) == 0 {
        return false;
    }
    let (act, old) = (g[libc::REG_RSI as usize], g[libc::REG_RDX as usize]);
    // SAFETY: errno is this thread's; it is put back below, so the program
    // sees only what the system call itself returns.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the program's own call, made here with its own arguments; a
    // bad pointer makes the kernel return EFAULT, as it would have.
    let r = unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, act, old, 8) };
    let result = if r == 0 {
        0
    } else {
        // SAFETY: as above.
        -i64::from(unsafe { *libc::__errno_location() })
    };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    if result == 0 {
        if act != 0 {
            ARMED_SET.fetch_and(!(1 << sig), Ordering::AcqRel);
        }
        let ours = on_fatal as *const () as usize as u64;
        if old != 0 && read_word(old as u64) == Some(ours) {
            let o = &ORIGINAL[sig as usize];
            let words = [
                libc::SIG_DFL as u64,
                o[0].load(Ordering::Relaxed),
                o[1].load(Ordering::Relaxed),
                o[2].load(Ordering::Relaxed),
            ];
            for (k, w) in words.into_iter().enumerate() {
                write_word(old as u64 + 8 * k as u64, w);
            }
        }
    }
    let g = &mut uc.uc_mcontext.gregs;
    g[libc::REG_RAX as usize] = result;
    g[libc::REG_RIP as usize] = next as i64;
    true
}

/// The address of [`on_fatal`] (`sigfault.rs` leaves it alone).
pub(crate) fn handler() -> u64 {
    on_fatal as *const () as usize as u64
}

fn default_action(sig: i32) {
    // The system call itself: `libcoldcache.so` interposes the C library's
    // `sigaction` and `syscall` for the signals the engine owns (SIGTRAP,
    // the sync and stop request signals), and this must reach the kernel.
    let sa = [libc::SIG_DFL as u64, 0, 0, 0];
    // SAFETY: rt_sigaction with a 4-word kernel sigaction in a live local;
    // async-signal-safe.
    unsafe { crate::sigvirt::raw_rt_sigaction(sig, sa.as_ptr() as u64, 0) };
}

extern "C" fn finish_thunk(_: *mut libc::c_void) {
    crate::doorbell::finish_here();
}

/// The handler of the fatal signals the program leaves at `SIG_DFL`.
extern "C" fn on_fatal(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let _errno = crate::errno::Kept::new();
    // SAFETY: the kernel passes a valid ucontext_t to an SA_SIGINFO handler.
    let uc = unsafe { &mut *(ctx as *mut libc::ucontext_t) };
    if matches!(sig, libc::SIGUSR1 | libc::SIGUSR2)
        && crate::doorbell::request_of(info) == crate::doorbell::Request::Trigger
    {
        // `coldcache trigger`: stop the capture, the program goes on.
        crate::doorbell::stop_by_signal(uc, crate::doorbell::TRIGGERED);
        return;
    }
    die(sig, uc, reason(sig));
}

/// Ends the process with signal `sig`, as its default action would,
/// after writing the dump of a capture in progress (cut short `why`):
/// called from the handler of `sig` on the thread it was delivered to
/// (`on_fatal`, or the engine's handlers of SIGTRAP and the sync signal
/// when the program's disposition of a signal it sent is `SIG_DFL`). The
/// caller is not counted in `IN_HANDLER` and holds no lock.
pub(crate) fn die(sig: i32, uc: &mut libc::ucontext_t, why: Option<&'static str>) {
    // Nothing of this thread is traced any more.
    uc.uc_mcontext.gregs[libc::REG_EFL as usize] &= !0x100;
    let me = gettid();
    let state = STATE.load(Ordering::Acquire);
    let ours = CAPTURE_PID.load(Ordering::Relaxed) == std::process::id();
    if ours
        && matches!(state, ARMED | RUNNING | STOPPING)
        && FINISHING_TID.load(Ordering::Acquire) != me
    {
        if CLAIMED.swap(true, Ordering::AcqRel) {
            // Another thread is writing the dump: wait for it (it ends the
            // process when done), then die the same way.
            while !WRITTEN.load(Ordering::Acquire) {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        } else {
            if state == RUNNING {
                if let Some(why) = why {
                    with_session(|cell| {
                        if let Some(s) = cell {
                            s.acc.set_cut_short(why);
                        }
                    });
                }
            }
            let top = STACK_TOP.load(Ordering::Acquire);
            if top != 0 {
                // SAFETY: the stack is reserved by `arm` and used by the one
                // thread that won `CLAIMED`.
                unsafe { crate::altstack::run_on_stack(std::ptr::null_mut(), finish_thunk, top) };
            }
            WRITTEN.store(true, Ordering::Release);
        }
    }
    // The signal again, with its default action: pending (it is blocked
    // while this handler runs), it ends the process when the handler
    // returns, as it would have without us.
    default_action(sig);
    // SAFETY: tgkill to this very thread with the signal being handled.
    unsafe { libc::syscall(libc::SYS_tgkill, std::process::id() as i32, me as i32, sig) };
}
