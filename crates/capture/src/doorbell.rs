//! The controller's doorbell: how code that may not act (signal handlers,
//! the translator's exits, a thread about to park under a seccomp filter)
//! asks the writer thread to act, and what a queued signal asks for.
//!
//! The lowest layer of the capture runtime with `state.rs`: it imports no
//! front end, no life cycle and no entry protocol. Whoever rings [`post`]s
//! a [`Command`]; only the writer thread (`writer.rs`) takes them and acts
//! (`lifecycle::finish`, `lifecycle::prepare`, parking). Where there is no
//! writer ([`has_writer`] is false: none is started unless needed, since a
//! second thread switches glibc out of its single-threaded paths), the
//! poster's own front end acts later, at a point where that is safe.
//!
//! Where the poster's own thread must act (no writer thread, or a fatal
//! signal that ends the process before any writer could), it calls
//! [`finish_here`] or [`stop_by_signal`]: they run what the life cycle and
//! the trap front end registered ([`set_finisher`], [`set_stopper`]), so
//! code below them acts without importing them.
//!
//! Its statics are its own (one of the few files that hold statics,
//! `tests/statics.rs`); each says who writes it and from which context.

use crate::options::{CaptureError, Options};
use coldcache_fsio::fdguard;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::OnceLock;

/// What the writer thread is asked to do.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum Command {
    /// Write the dump of the capture that was stopped (`lifecycle::finish`).
    Finish = 1,
    /// The trigger signal came (`--signal` windows): stop the running
    /// capture, or start the pending one.
    Trigger = 2,
    /// Park in `pause` before a seccomp filter is installed on every thread
    /// (`seccomp.rs`).
    Park = 3,
}

impl Command {
    /// Every command, in the order the writer takes them.
    pub(crate) const ALL: [Command; 3] = [Command::Finish, Command::Trigger, Command::Park];
}

/// The writer thread's id (0: none). Written by the writer's start
/// (program thread, under `writer.rs`'s lock, [`set_writer`]); read by
/// handlers.
static WRITER_TID: AtomicU32 = AtomicU32::new(0);
/// The writer thread's doorbell, an eventfd: a post counts its command in
/// `WAKES`, then writes to it. -1 while there is no writer. Written by the
/// writer's start (program thread, under `writer.rs`'s lock) and by the
/// writer itself when it replaces a doorbell the program closed
/// ([`set_doorbell`]); read by handlers.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// Commands posted and not yet done, by `Command as usize`: counted before
/// the doorbell rings, so a ring that cannot reach the writer (the program
/// closed the eventfd) is only late, done at the writer's next look,
/// within a second. Written: incremented by any context ([`post`]: a
/// handler, the dispatcher, a program thread), swapped to zero by the
/// writer thread ([`take`]).
static WAKES: [AtomicU32; 4] = [const { AtomicU32::new(0) }; 4];
/// See [`trigger_signal`]. Written by the engine's installation of the
/// trigger signal (program thread, [`set_trigger_signal`]); read by
/// handlers.
static TRIGGER_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The outside trigger signal (`--signal`, `coldcache trigger`), 0 when
/// none is installed: its handler is the engine's.
pub(crate) fn trigger_signal() -> i32 {
    TRIGGER_SIGNAL.load(Ordering::Relaxed)
}

/// Records that the trigger signal is `sig` (its handler installed).
pub(crate) fn set_trigger_signal(sig: i32) {
    TRIGGER_SIGNAL.store(sig, Ordering::Relaxed);
}

/// The writer thread's id (0 when there is none).
pub(crate) fn writer_tid() -> u32 {
    WRITER_TID.load(Ordering::Acquire)
}

/// Whether a writer thread takes what is [`post`]ed.
pub(crate) fn has_writer() -> bool {
    WAKE_FD.load(Ordering::Acquire) >= 0
}

/// Publishes a running writer thread `tid` and its doorbell `fd` (the
/// writer's start, once the thread runs: until then posters act on their
/// own).
pub(crate) fn set_writer(tid: u32, fd: i32) {
    WRITER_TID.store(tid, Ordering::Release);
    WAKE_FD.store(fd, Ordering::Release);
}

/// Replaces the doorbell (the writer, when the program closed the old one).
pub(crate) fn set_doorbell(fd: i32) {
    WAKE_FD.store(fd, Ordering::Release);
}

/// A new doorbell: a non-blocking eventfd lifted out of the program's way
/// (`coldcache_fsio::fdguard`), and what it names. An eventfd, not a pipe:
/// a write to it never raises `SIGPIPE`, and never blocks.
pub(crate) fn new_doorbell() -> Option<(i32, fdguard::Identity)> {
    // SAFETY: eventfd with flags only; returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return None;
    }
    fdguard::adopt(fd).ok()
}

/// Asks the writer thread for `command`; nothing when there is no writer
/// (see [`has_writer`]). Async-signal-safe: an atomic add and one
/// `write(2)`, the one system call (a program's seccomp filter may allow
/// no other), with the interrupted code's `errno` kept. If the program
/// closed the doorbell, the write fails and the writer does the command at
/// its next look.
pub(crate) fn post(command: Command) {
    let fd = WAKE_FD.load(Ordering::Acquire);
    if fd < 0 {
        return;
    }
    WAKES[command as usize].fetch_add(1, Ordering::AcqRel);
    // SAFETY: this thread's errno, always valid.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved = unsafe { *errno };
    let one = 1u64;
    // SAFETY: write(2) of 8 bytes from a live local.
    unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// How many times `command` was posted since the last look (and forgets
/// them): the writer's side of [`post`].
pub(crate) fn take(command: Command) -> u32 {
    WAKES[command as usize].swap(0, Ordering::AcqRel)
}

/// `si_value` of the signal `coldcache trigger` queues (`sigqueue`), so
/// the library tells it from a plain `kill`: a trigger signal the fatal
/// handler catches (SIGUSR1/SIGUSR2 left at their default) stops the
/// capture instead of ending the program.
pub const REQUEST_TRIGGER: usize = 0x0cc0_0000;
/// `si_value` (`REQUEST_STOP | signal`) of the stop request signal
/// (`engine::stop_request_signal`) `coldcache record` queues when it is
/// interrupted (Ctrl-C): stop the capture, cut short "interrupted
/// (SIGINT)", and start none. `signal` itself reaches the program as it
/// would have.
pub const REQUEST_STOP: usize = 0x0cc1_0000;

/// What a queued trigger signal asks for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Request {
    /// A plain signal (`kill`), or one queued by something else.
    Plain,
    /// `coldcache trigger`.
    Trigger,
    /// `record` was interrupted by this signal.
    Stop(i32),
}

/// The request a signal carries (`info` as given to an `SA_SIGINFO`
/// handler).
pub(crate) fn request_of(info: *const libc::siginfo_t) -> Request {
    if info.is_null() {
        return Request::Plain;
    }
    // SAFETY: the kernel passes a valid siginfo_t; si_value is meaningful
    // for SI_QUEUE, checked first.
    let (code, value) = unsafe { ((*info).si_code, (*info).si_value().sival_ptr as usize) };
    if code != libc::SI_QUEUE {
        return Request::Plain;
    }
    match value & !0xff {
        REQUEST_TRIGGER if value == REQUEST_TRIGGER => Request::Trigger,
        REQUEST_STOP => Request::Stop((value & 0xff) as i32),
        _ => Request::Plain,
    }
}

/// The cut-short reason of a capture stopped by `coldcache trigger`.
pub(crate) const TRIGGERED: &str = "stopped by `coldcache trigger`";

/// The life cycle's finish (`lifecycle::finish`, its result reported).
/// Written (set once) by `lifecycle::prepare` (program thread, before any
/// handler or writer that reads it can run); read by handlers and the
/// writer thread.
static FINISHER: OnceLock<fn()> = OnceLock::new();
/// The trap front end's stop from a signal handler (`engine`'s). Written
/// (set once) by the engine's handler installation (program thread, before
/// any handler that reads it can run); read by handlers.
#[allow(clippy::type_complexity)]
static STOPPER: OnceLock<fn(&mut libc::ucontext_t, &'static str)> = OnceLock::new();

/// The life cycle's start of a capture (`lifecycle::prepare`), for the
/// writer's `--signal` windows. Written (set once) by the trigger signal's
/// installation (program thread, before the writer can read it); read by
/// the writer thread.
#[allow(clippy::type_complexity)]
static STARTER: OnceLock<fn(Options) -> Result<bool, CaptureError>> = OnceLock::new();

/// Registers what [`start_here`] runs (the trigger signal's installation,
/// once, with the start its caller gives).
pub(crate) fn set_starter(f: fn(Options) -> Result<bool, CaptureError>) {
    let _ = STARTER.set(f);
}

/// Starts a capture with `options` on this thread (the writer, at a
/// `--signal` window's start): `None` before a start was registered.
pub(crate) fn start_here(options: Options) -> Option<Result<bool, CaptureError>> {
    STARTER.get().map(|f| f(options))
}

/// Registers what [`finish_here`] runs (the life cycle, once).
pub(crate) fn set_finisher(f: fn()) {
    let _ = FINISHER.set(f);
}

/// Registers what [`stop_by_signal`] runs (the trap front end, once).
pub(crate) fn set_stopper(f: fn(&mut libc::ucontext_t, &'static str)) {
    let _ = STOPPER.set(f);
}

/// Carries out [`Command::Finish`] on this thread: the life cycle writes
/// the dump here (a fatal signal's handler on its own stack, the finish
/// trampoline, the dispatcher when the library runs on its own
/// allocator). Nothing before the life cycle registered itself.
pub(crate) fn finish_here() {
    if let Some(f) = FINISHER.get() {
        f();
    }
}

/// A stop asked for by the dispatcher of translated code (outside any
/// handler, on the thread's dispatcher stack): the writer writes the dump;
/// without a writer this thread does when `here` (the library runs on its
/// own allocator, so nothing the program holds can block it); otherwise
/// the next `coldcache_stop` or the exit hook.
pub(crate) fn finish_by_writer_or_here(here: bool) {
    if has_writer() {
        post(Command::Finish);
    } else if here {
        finish_here();
    }
}

/// Stops the armed or running capture from a signal handler that
/// interrupted the program (context `uc`), cut short `why`: the trap front
/// end's `stop_by_signal`. Nothing before the handlers were installed.
pub(crate) fn stop_by_signal(uc: &mut libc::ucontext_t, why: &'static str) {
    if let Some(f) = STOPPER.get() {
        f(uc, why);
    }
}
