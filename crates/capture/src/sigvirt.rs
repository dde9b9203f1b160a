//! The program's own view of the three signals the engine owns: SIGTRAP
//! (one per single-stepped instruction), the thread-directed *sync* signal
//! that starts tracing other threads (a real-time signal, `SIGRTMIN+6`
//! unless the program already uses that one) and the *stop request* signal
//! `coldcache record` queues when it is interrupted (`SIGRTMIN+7` unless
//! the program has that one handled, ignored or blocked at start; the
//! library tells `record` which, see `engine::take_stop_signal`).
//!
//! Once the engine has installed its handler for one of them, the
//! program's disposition lives here, in a *shadow* (the kernel's
//! `struct sigaction` words: handler, flags, restorer, mask), as Valgrind
//! keeps the client's dispositions:
//! - a traced thread's `rt_sigaction` on them is performed by the trap
//!   handler ([`emulate`]), as is its `rt_sigprocmask` (SIGTRAP can never
//!   really be blocked on a traced thread: the next trap would kill the
//!   process, so a per-thread *virtual* block is kept, read back as the
//!   program set it, with a program SIGTRAP that arrives meanwhile held
//!   pending and delivered when it unblocks) and its `rt_sigpending`;
//! - every thread's `sigaction`/`signal` through the C library goes to
//!   [`program_sigaction`], and its `syscall(SYS_rt_sigaction, …)` to
//!   [`syscall_sigaction`] (`libcoldcache.so` interposes all three);
//! - an `execve` gets the program's `SIG_IGN` of them back in the kernel
//!   just before it runs ([`before_exec`]), since an ignored signal stays
//!   ignored across `exec` and a handled one does not;
//! - a signal that is not the engine's own — an `int3` the program
//!   executes, a `kill`/`tgkill`/`raise` of SIGTRAP, a real-time signal the
//!   program sends — is handed to the program's disposition by
//!   [`deliver`]: its handler runs (with its mask, flags and alternate
//!   stack), `SIG_IGN` drops it, `SIG_DFL` ends the process with that
//!   signal (the dump is written first, as for any fatal signal).
//!
//! The engine's own signals are told apart by their origin: single-step
//! traps (`TRAP_TRACE`), its breakpoints (`SI_KERNEL` at a planted
//! address), and sync signals sent with `rt_tgsigqueueinfo` carrying a mark
//! ([`send_sync`]).
//!
//! What stays visible: a thread that is not traced and changes the
//! disposition with a `syscall` instruction of its own (not through the C
//! library) takes the signal from the engine, and traced threads' traps
//! reach the program until the engine looks ([`taken_over`]: at every
//! full fast-mode buffer, when the capture ends, at the next start): the
//! capture then stops with the reason [`TAKEN`] and the signal is taken
//! back ([`take_back`]), the program's disposition kept in the shadow.

use crate::memory::{read_word, write_word};
use crate::signal_state::sigvirt::{
    IN_USE, LIBC_RESTORER, OURS, OWNED, REAL_SIGACTION, SHADOW, SLOTS, THREADS, TIDS,
};
use crate::state::gettid;
use std::sync::atomic::{AtomicU64, Ordering};

/// Slot of SIGTRAP in the shadow.
pub(crate) const TRAP: usize = 0;
/// Slot of the sync signal.
pub(crate) const SYNC: usize = 1;
/// Slot of the stop request signal.
pub(crate) const STOP: usize = 2;

/// The mark of the engine's own sync signals (`si_value`, with
/// `si_errno` = [`MARK_ERRNO`]).
const MARK: u64 = 0x636f_6c64_6361_6368;
const MARK_ERRNO: i32 = 0x4343;

/// The thread asked for SIGTRAP to be blocked.
const BLOCKED: u64 = 1;
/// A program SIGTRAP arrived while blocked (its sender in the high bits).
const PENDING: u64 = 2;
/// The pending SIGTRAP is to be delivered when the handler's work is done.
const DELIVER: u64 = 4;

const SA_RESTORER: u64 = 0x0400_0000;

fn bit(sig: i32) -> u64 {
    1u64 << (sig - 1)
}

/// The slot of `sig` if the engine owns it.
pub(crate) fn slot_of(sig: i32) -> Option<usize> {
    (0..SLOTS).find(|&i| sig > 0 && OWNED[i].load(Ordering::Acquire) == sig)
}

/// The restorer the C library gives handlers (0: not known yet).
pub(crate) fn libc_restorer() -> u64 {
    LIBC_RESTORER.load(Ordering::Relaxed)
}

/// The stop request signal the engine uses (0 before it is chosen).
pub(crate) fn stop_signal() -> i32 {
    OWNED[STOP].load(Ordering::Acquire)
}

/// The sync signal the engine uses (0 before it is chosen).
pub(crate) fn sync_signal() -> i32 {
    OWNED[SYNC].load(Ordering::Acquire)
}

/// `rt_sigaction` as the kernel takes it (`act`, `old`: 4 words each).
fn raw_sigaction(sig: i32, act: Option<&[u64; 4]>, old: Option<&mut [u64; 4]>) -> i64 {
    let a = act.map_or(0, |a| a.as_ptr() as u64);
    let o = old.map_or(0, |o| o.as_mut_ptr() as u64);
    // SAFETY: both pointers are null or point to 4 live words, the size the
    // kernel reads and writes for an 8-byte signal set.
    unsafe { raw_rt_sigaction(sig, a, o) }
}

/// The `rt_sigaction` system call itself, made with a `syscall`
/// instruction here (not through the C library's `syscall`, which
/// `libcoldcache.so` interposes); the kernel's result (`-errno` on error),
/// errno untouched.
///
/// # Safety
/// `act` and `old` are 0 or addresses of 4 words (the kernel checks them:
/// a bad one gives `-EFAULT`).
pub unsafe fn raw_rt_sigaction(sig: i32, act: u64, old: u64) -> i64 {
    let r: i64;
    // SAFETY: the caller's contract; the syscall instruction clobbers RCX
    // and R11 only.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_rt_sigaction => r,
            in("rdi") i64::from(sig),
            in("rsi") act,
            in("rdx") old,
            in("r10") 8u64,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        )
    };
    r
}

/// The C library's own `sigaction`, even where `libcoldcache.so`
/// interposes its own.
///
/// # Safety
/// As `sigaction(2)`: `act` and `old` are null or valid.
pub unsafe fn real_sigaction(
    sig: i32,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> i32 {
    let mut f = REAL_SIGACTION.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the
        // definition after the object this code is in (the C library's).
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"sigaction".as_ptr()) } as usize;
        if f == 0 {
            // SAFETY: as above, in the global scope.
            f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__sigaction".as_ptr()) } as usize;
        }
        REAL_SIGACTION.store(f, Ordering::Release);
    }
    if f == 0 {
        // SAFETY: errno of this thread.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return -1;
    }
    type Sigaction = unsafe extern "C" fn(i32, *const libc::sigaction, *mut libc::sigaction) -> i32;
    // SAFETY: `f` is the C library's sigaction, with this signature.
    unsafe { std::mem::transmute::<usize, Sigaction>(f)(sig, act, old) }
}

/// Chooses the sync signal: `SIGRTMIN+6` if the program leaves it at its
/// default, else the highest real-time signal it leaves at its default
/// (its handlers keep theirs; the chosen one is emulated anyway).
pub(crate) fn choose_sync() -> i32 {
    let preferred = libc::SIGRTMIN() + 6;
    let free = |sig: i32| {
        let mut old = [0u64; 4];
        raw_sigaction(sig, None, Some(&mut old)) == 0 && old[0] == libc::SIG_DFL as u64
    };
    if free(preferred) {
        return preferred;
    }
    (libc::SIGRTMIN() + 1..=libc::SIGRTMAX())
        .rev()
        .find(|&s| free(s))
        .unwrap_or(preferred)
}

/// Chooses the stop request signal (normal context, once, before `main`):
/// `SIGRTMIN+7` if the program started with it at its default and not
/// blocked, else the highest real-time signal in that state (never the
/// sync signal, which is taken first). A program that inherited the signal
/// blocked may be waiting for it with `sigwaitinfo`: a stop request must
/// not land there.
pub(crate) fn choose_stop() -> i32 {
    let preferred = libc::SIGRTMIN() + 7;
    let mut mask = 0u64;
    // SAFETY: rt_sigprocmask reading the mask into a live 8-byte local.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            std::ptr::null::<u64>(),
            &mut mask,
            8,
        )
    };
    let free = |sig: i32| {
        let mut old = [0u64; 4];
        sig != sync_signal()
            && mask & bit(sig) == 0
            && raw_sigaction(sig, None, Some(&mut old)) == 0
            && old[0] == libc::SIG_DFL as u64
    };
    if free(preferred) {
        return preferred;
    }
    (libc::SIGRTMIN() + 1..=libc::SIGRTMAX())
        .rev()
        .find(|&s| free(s))
        .unwrap_or(preferred)
}

/// Installs `handler` (ours) for `sig` in `slot`; the disposition there
/// before, unless it is already ours, becomes the program's (normal
/// context, at every start: a program that took the signal back with a
/// raw system call gets its disposition kept and ours reinstalled).
pub(crate) fn take(slot: usize, sig: i32, handler: usize) -> Result<(), std::io::Error> {
    let mut old = [0u64; 4];
    let r = raw_sigaction(sig, None, Some(&mut old));
    if r != 0 {
        return Err(std::io::Error::from_raw_os_error(-r as i32));
    }
    if old[0] == handler as u64 && OWNED[slot].load(Ordering::Acquire) == sig {
        return Ok(());
    }
    for (w, v) in SHADOW[slot].iter().zip(old) {
        w.store(v, Ordering::Relaxed);
    }
    // SAFETY: a zeroed sigaction is a valid starting point; every field we
    // rely on is set below.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    // SA_ONSTACK: a traced thread's frames go to its alternate stack
    // (`altstack.rs`), not onto a program stack that may be small.
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
    sa.sa_mask = crate::state::all_signals();
    // SAFETY: a fully initialised sigaction in a live local.
    if unsafe { real_sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut now = [0u64; 4];
    if raw_sigaction(sig, None, Some(&mut now)) == 0 && now[1] & SA_RESTORER != 0 {
        LIBC_RESTORER.store(now[2], Ordering::Relaxed);
    }
    OURS[slot].store(handler, Ordering::Relaxed);
    OWNED[slot].store(sig, Ordering::Release);
    Ok(())
}

/// The cut-short reason of a capture during which the program took one of
/// the engine's signals with a `syscall` instruction of its own.
pub(crate) const TAKEN: &str =
    "the program took over SIGTRAP or the sync signal with a raw system call";

/// Whether SIGTRAP or the sync signal is no longer the engine's in the
/// kernel (a thread that is not traced changed it with a `syscall`
/// instruction of its own): a traced thread's next trap would go to the
/// program's disposition.
pub(crate) fn taken_over() -> bool {
    [TRAP, SYNC].into_iter().any(|slot| {
        let sig = OWNED[slot].load(Ordering::Acquire);
        let ours = OURS[slot].load(Ordering::Relaxed) as u64;
        let mut cur = [0u64; 4];
        sig != 0 && raw_sigaction(sig, None, Some(&mut cur)) == 0 && cur[0] != ours
    })
}

/// Takes back (normal context) the signals [`taken_over`] finds taken:
/// the program's disposition goes to the shadow, ours to the kernel, so
/// a thread still single-stepped stops at its next trap instead of
/// trapping into the program. Returns whether any was taken.
pub(crate) fn take_back() -> bool {
    if !taken_over() {
        return false;
    }
    for slot in [TRAP, SYNC] {
        let sig = OWNED[slot].load(Ordering::Acquire);
        let ours = OURS[slot].load(Ordering::Relaxed);
        if sig != 0 && ours != 0 {
            let _ = take(slot, sig, ours);
        }
    }
    true
}

/// Whether the thread runs with the trap flag set (single-stepped now).
fn stepping() -> bool {
    let flags: u64;
    // SAFETY: pushfq/pop on the current stack, nothing else touched.
    unsafe { core::arch::asm!("pushfq", "pop {}", out(reg) flags) };
    flags & 0x100 != 0
}

/// An `exec` is about to be made (normal context, or the finish
/// trampoline after the dump of a capture the exec ends): the signals the
/// program ignores become ignored in the kernel, so the new program
/// inherits that, as it would have. SIGTRAP is left to the engine while a
/// capture may still trap (`trap_too` false): an ignored SIGTRAP kills a
/// single-stepped thread. A traced thread's `execve` is left to the trap
/// engine, which sees the system call and calls this after the dump.
/// Returns the slots changed, for [`after_failed_exec`].
pub fn before_exec(trap_too: bool) -> u32 {
    if !trap_too && (stepping() || crate::tls::in_translation()) {
        return 0;
    }
    let idle = crate::state::STATE.load(Ordering::Acquire) == crate::state::IDLE;
    let mut changed = 0;
    for slot in 0..SLOTS {
        let sig = OWNED[slot].load(Ordering::Acquire);
        if sig == 0 || SHADOW[slot][0].load(Ordering::Relaxed) != libc::SIG_IGN as u64 {
            continue;
        }
        if slot == TRAP && !(trap_too || idle) {
            continue;
        }
        let ign = [libc::SIG_IGN as u64, 0, 0, 0];
        if raw_sigaction(sig, Some(&ign), None) == 0 {
            changed |= 1 << slot;
        }
    }
    changed
}

/// The `exec` [`before_exec`] prepared failed: the engine's handlers go
/// back on the signals it changed (the program's `SIG_IGN` stays in the
/// shadow).
pub fn after_failed_exec(changed: u32) {
    for slot in 0..SLOTS {
        let sig = OWNED[slot].load(Ordering::Acquire);
        let ours = OURS[slot].load(Ordering::Relaxed);
        if changed & (1 << slot) != 0 && sig != 0 && ours != 0 {
            let _ = take(slot, sig, ours);
        }
    }
}

/// The program's `syscall(SYS_rt_sigaction, sig, act, old, size)` through
/// the C library (`libcoldcache.so` interposes `syscall`), made by a thread
/// that is not single-stepped (a traced thread's is emulated by the trap
/// handler when it reaches the `syscall` instruction): `None` when `sig`
/// is not a signal the engine owns (the caller makes the system call),
/// else the result, the shadow read and written as the kernel would its
/// disposition (`act` and `old` in the kernel's layout).
pub fn syscall_sigaction(sig: i64, act: u64, old: u64, size: u64) -> Option<i64> {
    if stepping() || crate::tls::in_translation() {
        return None;
    }
    let slot = slot_of(i32::try_from(sig).ok()?)?;
    if size != 8 {
        return Some(-i64::from(libc::EINVAL));
    }
    Some(sigaction(slot, act, old))
}

fn shadow(slot: usize) -> [u64; 4] {
    std::array::from_fn(|i| SHADOW[slot][i].load(Ordering::Relaxed))
}

fn set_shadow(slot: usize, v: [u64; 4]) {
    for (w, x) in SHADOW[slot].iter().zip(v) {
        w.store(x, Ordering::Relaxed);
    }
    if slot == TRAP && v[0] == libc::SIG_IGN as u64 {
        // Setting SIG_IGN discards a pending signal, as the kernel does.
        set_bits(bits() & !(PENDING | DELIVER));
    }
}

/// The program's `sigaction` of one of the engine's own signals (through
/// `sigfault::program_sigaction`, which `libcoldcache.so`'s interposed
/// `sigaction` calls): `None` for a signal the engine does not own, else
/// the result, the shadow read and written as the C library would the
/// kernel's disposition.
///
/// # Safety
/// `act` and `old` are null or valid `struct sigaction` pointers, as for
/// `sigaction(2)`.
pub(crate) unsafe fn program_sigaction(
    sig: i32,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> Option<i32> {
    let slot = slot_of(sig)?;
    let was = shadow(slot);
    if !act.is_null() {
        // SAFETY: the caller's valid pointer.
        set_shadow(slot, kernel_words(unsafe { &*act }));
    }
    // SAFETY: the caller's pointer, null or valid.
    unsafe { write_old(old, was) };
    Some(0)
}

/// A program's `struct sigaction` as the kernel would keep it (handler,
/// flags with the C library's restorer, that restorer, the mask's first
/// word less SIGKILL and SIGSTOP): what a shadow holds.
pub(crate) fn kernel_words(a: &libc::sigaction) -> [u64; 4] {
    // SAFETY: sa_mask holds signals 1..=64 in its first word.
    let mask = unsafe { *(&a.sa_mask as *const libc::sigset_t as *const u64) };
    let never = bit(libc::SIGKILL) | bit(libc::SIGSTOP);
    [
        a.sa_sigaction as u64,
        a.sa_flags as u32 as u64 | SA_RESTORER,
        libc_restorer(),
        mask & !never,
    ]
}

/// Writes a shadowed disposition (kernel words) into a program's
/// `struct sigaction` as the C library would; nothing when `old` is null.
///
/// # Safety
/// `old` is null or valid for writes.
pub(crate) unsafe fn write_old(old: *mut libc::sigaction, was: [u64; 4]) {
    if old.is_null() {
        return;
    }
    // SAFETY: the caller's valid pointer; like the C library, only the
    // first word of the mask is written.
    unsafe {
        (*old).sa_sigaction = was[0] as usize;
        (*old).sa_flags = was[1] as i32;
        (*old).sa_restorer = std::mem::transmute::<usize, Option<extern "C" fn()>>(was[2] as usize);
        *(&mut (*old).sa_mask as *mut libc::sigset_t as *mut u64) = was[3];
    }
}

/// The calling thread's entry of [`THREADS`]: found by the thread
/// pointer, then confirmed by the thread id kept beside it (a `gettid`
/// only then: a thread with no entry makes no system call). Another
/// thread may share the pointer: a `vfork` child (glibc's `posix_spawn`)
/// runs on its parent's, and a fork child's new thread may get a thread
/// control block the parent's threads used.
fn entry() -> Option<&'static (AtomicU64, AtomicU64)> {
    let me = crate::tls::thread_pointer();
    let i = THREADS
        .iter()
        .position(|(t, _)| t.load(Ordering::Acquire) == me)?;
    (TIDS[i].load(Ordering::Relaxed) == gettid()).then_some(&THREADS[i])
}

/// The calling thread's bits (no system call unless it has an entry).
fn bits() -> u64 {
    if IN_USE.load(Ordering::Acquire) == 0 {
        return 0;
    }
    entry().map_or(0, |(_, b)| b.load(Ordering::Relaxed))
}

/// Sets the calling thread's bits.
fn set_bits(v: u64) {
    if let Some((t, b)) = entry() {
        b.store(v, Ordering::Relaxed);
        if v == 0 {
            t.store(0, Ordering::Release);
            IN_USE.fetch_sub(1, Ordering::AcqRel);
        }
        return;
    }
    if v == 0 {
        return;
    }
    let me = crate::tls::thread_pointer();
    for (i, (t, b)) in THREADS.iter().enumerate() {
        if t.compare_exchange(0, me, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            TIDS[i].store(gettid(), Ordering::Relaxed);
            b.store(v, Ordering::Relaxed);
            IN_USE.fetch_add(1, Ordering::AcqRel);
            return;
        }
    }
}

fn mask_word(uc: &libc::ucontext_t) -> u64 {
    // SAFETY: uc_sigmask is a sigset_t of at least 8 bytes, its first word
    // holding signals 1..=64.
    unsafe { *(&uc.uc_sigmask as *const libc::sigset_t as *const u64) }
}

fn set_mask_word(uc: &mut libc::ucontext_t, v: u64) {
    // SAFETY: as in `mask_word`.
    unsafe { *(&mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64) = v };
}

/// A thread is about to be traced from the context `uc` (the sync signal's
/// or the breakpoint's handler sets TF): SIGTRAP cannot stay blocked, so a
/// block the program asked for becomes virtual.
pub(crate) fn unblock_trap(uc: &mut libc::ucontext_t) {
    let m = mask_word(uc);
    if m & bit(libc::SIGTRAP) != 0 {
        set_mask_word(uc, m & !bit(libc::SIGTRAP));
        set_bits(bits() | BLOCKED);
    }
}

/// The thread of `uc` is no longer traced (TF clear, the capture over or
/// the thread out of it): a virtual block becomes real again, and a
/// SIGTRAP held pending becomes the kernel's, pending on the thread.
///
/// No system call unless a SIGTRAP is pending: this runs at a thread's
/// last trap, possibly under a seccomp filter another thread just
/// synchronised to every thread.
pub(crate) fn reblock_trap(uc: &mut libc::ucontext_t) {
    let b = bits();
    if b & BLOCKED == 0 {
        return;
    }
    set_mask_word(uc, mask_word(uc) | bit(libc::SIGTRAP));
    set_bits(0);
    if b & PENDING != 0 {
        let tid = gettid();
        // SAFETY: tgkill to this very thread; SIGTRAP is blocked in this
        // handler and in the mask it returns to: it stays pending.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                std::process::id() as i32,
                tid as i32,
                libc::SIGTRAP,
            )
        };
    }
}

/// The thread is exiting: its virtual state goes.
pub(crate) fn forget_thread() {
    set_bits(0);
}

/// Performs, for a traced thread, the system call it is about to make
/// (RIP at its `syscall`, `next` the instruction after it) when it touches
/// a signal the engine owns: `rt_sigaction` of SIGTRAP or the sync signal
/// (the shadow), `rt_sigprocmask` (SIGTRAP blocked virtually, never
/// really), `rt_sigpending` (a held SIGTRAP shows), `sigaltstack` (the
/// engine's own alternate stack reads as none; one of the program's, armed,
/// is changed by the real call: `altstack.rs`). Returns false, changing
/// nothing, for any other call, which then runs normally.
pub(crate) fn emulate(uc: &mut libc::ucontext_t, next: u64) -> bool {
    let g = &uc.uc_mcontext.gregs;
    let (nr, a0, a1, a2, a3) = (
        g[libc::REG_RAX as usize],
        g[libc::REG_RDI as usize],
        g[libc::REG_RSI as usize] as u64,
        g[libc::REG_RDX as usize] as u64,
        g[libc::REG_R10 as usize],
    );
    let result = match nr {
        libc::SYS_rt_sigaction => match slot_of(a0 as i32) {
            Some(slot) if a3 == 8 => sigaction(slot, a1, a2),
            _ => return false,
        },
        libc::SYS_rt_sigprocmask if a3 == 8 => sigprocmask(uc, a0 as i32, a1, a2),
        libc::SYS_sigaltstack => match crate::altstack::emulate(uc, a0 as u64, a1) {
            Some(r) => r,
            None => return false,
        },
        libc::SYS_rt_sigpending if a1 == 8 && bits() & PENDING != 0 => {
            let mut set = 0u64;
            // SAFETY: rt_sigpending into a live 8-byte local.
            let r = unsafe { libc::syscall(libc::SYS_rt_sigpending, &mut set, 8) };
            if r != 0 {
                return false;
            }
            if write_word(a0 as u64, set | bit(libc::SIGTRAP)) {
                0
            } else {
                -i64::from(libc::EFAULT)
            }
        }
        _ => return false,
    };
    let g = &mut uc.uc_mcontext.gregs;
    g[libc::REG_RAX as usize] = result;
    g[libc::REG_RIP as usize] = next as i64;
    true
}

fn sigaction(slot: usize, act: u64, old: u64) -> i64 {
    let mut new = [0u64; 4];
    if act != 0 {
        for (k, w) in new.iter_mut().enumerate() {
            match read_word(act + 8 * k as u64) {
                Some(v) => *w = v,
                None => return -i64::from(libc::EFAULT),
            }
        }
    }
    let was = shadow(slot);
    if old != 0 {
        for (k, w) in was.into_iter().enumerate() {
            if !write_word(old + 8 * k as u64, w) {
                return -i64::from(libc::EFAULT);
            }
        }
    }
    if act != 0 {
        new[3] &= !(bit(libc::SIGKILL) | bit(libc::SIGSTOP));
        set_shadow(slot, new);
    }
    0
}

fn sigprocmask(uc: &mut libc::ucontext_t, how: i32, set: u64, old: u64) -> i64 {
    let b = bits();
    let trap = bit(libc::SIGTRAP);
    let current = mask_word(uc) | if b & BLOCKED != 0 { trap } else { 0 };
    let new = if set == 0 {
        current
    } else {
        let Some(s) = read_word(set) else {
            return -i64::from(libc::EFAULT);
        };
        match how {
            libc::SIG_BLOCK => current | s,
            libc::SIG_UNBLOCK => current & !s,
            libc::SIG_SETMASK => s,
            _ => return -i64::from(libc::EINVAL),
        }
    };
    if old != 0 && !write_word(old, current) {
        return -i64::from(libc::EFAULT);
    }
    let never = trap | bit(libc::SIGKILL) | bit(libc::SIGSTOP);
    set_mask_word(uc, new & !never);
    let mut nb = b & !BLOCKED;
    if new & trap != 0 {
        nb |= BLOCKED;
    } else if b & PENDING != 0 {
        // Unblocked with a SIGTRAP held: delivered once the handler's work
        // is done, as the kernel delivers a pending signal when the call
        // that unblocks it returns.
        nb |= DELIVER;
    }
    set_bits(nb);
    0
}

/// Whether `info` is one of the engine's own sync signals.
pub(crate) fn is_own_sync(info: &libc::siginfo_t) -> bool {
    // SAFETY: si_value is read as the 8 bytes it occupies for SI_QUEUE.
    let value = unsafe { info.si_value().sival_ptr } as u64;
    info.si_code == libc::SI_QUEUE && info.si_errno == MARK_ERRNO && value == MARK
}

/// Sends the engine's sync signal to thread `tid` of this process, marked
/// as the engine's ([`is_own_sync`]).
pub(crate) fn send_sync(tid: u32) {
    let sig = sync_signal();
    if sig == 0 {
        return;
    }
    // SAFETY: a zeroed siginfo_t, filled as sigqueue(3) fills it, with the
    // mark; rt_tgsigqueueinfo to a thread of our own process.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let words = &mut info as *mut libc::siginfo_t as *mut u32;
        *words = sig as u32; // si_signo
        *words.add(1) = MARK_ERRNO as u32; // si_errno
        *words.add(2) = libc::SI_QUEUE as u32; // si_code
        *words.add(4) = std::process::id(); // si_pid
        *words.add(5) = libc::getuid(); // si_uid
        *(words.add(6) as *mut u64) = MARK; // si_value
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            std::process::id() as i32,
            tid as i32,
            sig,
            &info,
        );
    }
}

/// A program SIGTRAP that is not a trap (sent by `kill`, `tgkill`,
/// `raise`, ...) reached a traced thread that blocks SIGTRAP virtually:
/// held pending. Returns false when the thread does not block it.
pub(crate) fn hold_if_blocked() -> bool {
    let b = bits();
    if b & BLOCKED == 0 {
        return false;
    }
    set_bits(b | PENDING);
    true
}

/// Whether a held SIGTRAP is to be delivered now (its thread unblocked
/// it); clears the request.
pub(crate) fn take_deliver() -> bool {
    if IN_USE.load(Ordering::Acquire) == 0 {
        return false;
    }
    let b = bits();
    if b & DELIVER == 0 {
        return false;
    }
    set_bits(b & !(DELIVER | PENDING));
    true
}

struct Call {
    handler: u64,
    sig: i32,
    info: *mut libc::siginfo_t,
    uc: *mut libc::c_void,
}

extern "C" fn call_thunk(p: *mut libc::c_void) {
    // SAFETY: `p` is the `Call` passed by `deliver`, alive for the call.
    let c = unsafe { &*(p as *const Call) };
    type Handler = extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void);
    // SAFETY: the program's handler; a plain one-argument handler ignores
    // the two extra arguments (SysV calling convention).
    let f = unsafe { std::mem::transmute::<u64, Handler>(c.handler) };
    f(c.sig, c.info, c.uc);
}

/// What [`deliver`] did.
pub(crate) enum Delivered {
    /// The program's handler ran (or the signal was ignored).
    Done,
    /// The program's disposition is the default action (or a synchronous
    /// trap it ignores or blocks, which the kernel makes fatal): the
    /// caller ends the process with the signal.
    Fatal,
}

/// Hands signal `sig` (slot `slot`) to the program's disposition, from
/// inside the engine's handler of it, as the kernel would have: its
/// handler runs with the interrupted context's mask plus its own `sa_mask`
/// (and the signal, without `SA_NODEFER`), on its alternate stack with
/// `SA_ONSTACK`, and `SA_RESETHAND` resets it. `forced`: a synchronous trap
/// (an `int3`), which the kernel makes fatal when ignored or blocked.
///
/// The caller holds no lock and is not counted in `IN_HANDLER`: the
/// program's handler may `siglongjmp` away.
pub(crate) fn deliver(
    slot: usize,
    sig: i32,
    info: *mut libc::siginfo_t,
    uc: &mut libc::ucontext_t,
    forced: bool,
) -> Delivered {
    let [handler, flags, _, mask] = shadow(slot);
    let blocked = slot == TRAP && bits() & BLOCKED != 0 || mask_word(uc) & bit(sig) != 0;
    if handler == libc::SIG_DFL as u64 || forced && (handler == libc::SIG_IGN as u64 || blocked) {
        return Delivered::Fatal;
    }
    if handler == libc::SIG_IGN as u64 {
        return Delivered::Done;
    }
    // A signal delivered inside a kept rseq section aborts it, as the
    // kernel's delivery would (`rseq.rs`).
    crate::rseq::leave(uc);
    if flags & libc::SA_RESETHAND as u64 != 0 {
        SHADOW[slot][0].store(libc::SIG_DFL as u64, Ordering::Relaxed);
    }
    let mut during = mask_word(uc) | mask;
    if bits() & BLOCKED != 0 {
        // The program's handler sees the block it asked for.
        during |= bit(libc::SIGTRAP);
    }
    if flags & libc::SA_NODEFER as u64 == 0 {
        during |= bit(sig);
    }
    during &= !(bit(libc::SIGKILL) | bit(libc::SIGSTOP));
    let mut ours = 0u64;
    // SAFETY: rt_sigprocmask with 8-byte sets in live locals.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &during,
            &mut ours,
            8,
        )
    };
    let mut call = Call {
        handler,
        sig,
        info,
        uc: uc as *mut libc::ucontext_t as *mut libc::c_void,
    };
    match handler_stack(uc, flags & libc::SA_ONSTACK as u64 != 0) {
        // SAFETY: the stack the kernel would have run the handler on: the
        // program's alternate stack, or the interrupted stack below its
        // red zone; this handler does not run on it.
        Some(top) => unsafe {
            crate::altstack::run_on_stack(
                &mut call as *mut Call as *mut libc::c_void,
                call_thunk,
                top,
            )
        },
        None => call_thunk(&mut call as *mut Call as *mut libc::c_void),
    }
    // SAFETY: as above: back to the engine handler's own mask.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &ours,
            std::ptr::null_mut::<u64>(),
            8,
        )
    };
    Delivered::Done
}

/// Where the program's handler must run, when that is not where this
/// handler runs: on the program's alternate stack (`onstack`, one set,
/// the interrupted code not on it), or, when this handler runs on an
/// alternate stack the program's handler would not use (the engine's, or
/// the program's for a handler without `SA_ONSTACK`), on the interrupted
/// stack below its red zone. `None`: right here.
fn handler_stack(uc: &libc::ucontext_t, onstack: bool) -> Option<u64> {
    let here = &uc as *const &libc::ucontext_t as u64;
    let rsp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
    let alt = uc.uc_stack;
    let set = crate::altstack::is_set(&alt);
    let (lo, hi) = (alt.ss_sp as u64, alt.ss_sp as u64 + alt.ss_size as u64);
    let on_alt = |a: u64| set && a >= lo && a < hi;
    let program_alt = crate::altstack::is_set(&crate::altstack::program_view(uc));
    if onstack && program_alt && !on_alt(rsp) {
        return (!on_alt(here)).then_some(hi);
    }
    (on_alt(here) && !on_alt(rsp)).then_some(rsp - 128)
}
