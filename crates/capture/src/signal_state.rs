//! The statics of the signal code (and of the trap front end's signal
//! shell, `engine.rs` and `sigfault.rs`), with those of the lowest files
//! that `state.rs` itself imports (`lock.rs`, `procfs.rs`, `objects.rs`)
//! and the system-call tables translated code reads (`jit/sys.rs`): one
//! module per file that uses them, each static saying who writes it and
//! from which context (a program thread, a handler, the dispatcher, the
//! writer thread).
//!
//! This file imports nothing of the crate, so every file may use it
//! without an import circle (`tests/layers.rs`); the types and constants
//! the statics' declarations need live here with them (their users import
//! them from here). The other homes of statics are `state.rs` (the life
//! cycle, the entry protocols, the output), `doorbell.rs` and `jit/state.rs`
//! (`tests/statics.rs` holds the list).

pub(crate) mod breakpoint {
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8};

    /// The planted breakpoint's address (0: none).
    ///
    /// Written by the program thread that arms a `--function` capture (`plant`)
    /// and by whichever thread clears the breakpoint (`clear`: the handler of
    /// the thread that hit it, or `finish`); read by the trap handlers and the
    /// dispatcher (atomic loads; its address is in the dispatcher's code).
    pub(crate) static BP_ADDR: AtomicU64 = AtomicU64::new(0);
    /// The last breakpoint address, never cleared: an `int3` of ours that a
    /// thread hits while another removes it is recognised by it.
    ///
    /// Written by `plant` (the program thread arming the capture); read by the
    /// SIGTRAP handler of any thread.
    pub(crate) static BP_LAST: AtomicU64 = AtomicU64::new(0);
    /// The byte the `int3` replaced.
    ///
    /// Written by `plant` (the program thread arming the capture); read when
    /// the byte is put back (`unplant`, `hit`: a handler or `finish`).
    pub(crate) static BP_ORIG: AtomicU8 = AtomicU8::new(0);
    /// Whether the `int3` is in the code now.
    ///
    /// Written by `plant` (program thread), by `replant` (the SIGTRAP handler
    /// of the thread that stepped over the original instruction) and by
    /// `unplant`/`hit` (a handler, or `finish`), whichever swaps it first.
    pub(crate) static BP_PLANTED: AtomicBool = AtomicBool::new(false);
    /// The thread stepping over the original instruction, which plants the
    /// breakpoint again at its next trap.
    ///
    /// Written by the breakpoint's SIGTRAP handler (`on_breakpoint`) of the
    /// thread that hit it, cleared by that thread's next SIGTRAP handler or by
    /// `clear` (`finish`).
    pub(crate) static REPLANT_TID: AtomicU32 = AtomicU32::new(0);
}

pub(crate) mod codewrite {
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

    /// A small fixed set of files, filled from handlers too: a file is added
    /// unless present; past the room the set is marked full (and callers
    /// then assume any file may be in it). Files are told apart by inode
    /// alone: `/proc/self/maps` and `stat` give different devices for one
    /// file on btrfs subvolumes and on overlayfs (containers); two files of
    /// one inode number on two devices only make more code checked.
    pub(crate) struct FileSet<const N: usize> {
        pub(crate) inodes: [AtomicU64; N],
        /// Files added, the ones past the room included.
        pub(crate) n: AtomicUsize,
        pub(crate) full: AtomicBool,
    }

    impl<const N: usize> FileSet<N> {
        /// An empty set.
        pub(crate) const fn new() -> Self {
            FileSet {
                inodes: [const { AtomicU64::new(0) }; N],
                n: AtomicUsize::new(0),
                full: AtomicBool::new(false),
            }
        }
    }

    /// Files the process may write, this capture. Full: no file mapped later
    /// is trusted.
    ///
    /// Written by the program thread preparing a capture (`start` empties and
    /// fills it) and by the handlers and dispatcher of traced threads as they
    /// open or map files (`before_call`, `apply`, `window_start`: inserts only,
    /// atomic).
    pub(crate) static WRITABLE: FileSet<256> = FileSet::new();
    /// Files mapped as trusted code in this capture (at the start, and what
    /// fast mode trusts later): a writable open of another file costs no
    /// `maps` scan. Full: every writable open scans.
    ///
    /// Written by the program thread preparing a capture (`start` empties it)
    /// and by handlers and the dispatcher when code is trusted (`code_file`:
    /// inserts only, atomic).
    pub(crate) static CODE: FileSet<512> = FileSet::new();
    /// A writable `/proc/<pid>/mem` descriptor was opened: nothing is trusted.
    ///
    /// Written by the program thread preparing a capture (`start`) and by the
    /// handler or dispatcher of a traced thread that opens a writable mem file
    /// (`before_call`, `window_start`).
    pub(crate) static ALL: AtomicBool = AtomicBool::new(false);
    /// procfs's device (major << 32 | minor), found at
    /// [`start`](crate::codewrite::start).
    ///
    /// Written by the program thread preparing a capture (`start`); read by
    /// handlers.
    pub(crate) static PROC_DEV: AtomicU64 = AtomicU64::new(u64::MAX);
    /// For the notes: mem files opened for writing, writable opens of files
    /// mapped as code, stable ranges demoted, new mappings left untrusted.
    ///
    /// Written: counted by `start` (program thread) and by the handlers and
    /// dispatcher of traced threads (`before_call`, `window_start`); read when
    /// the dump's note is written.
    pub(crate) static MEM_OPENS: AtomicU64 = AtomicU64::new(0);
    /// Writable opens of files mapped as code. Written: counted by the handlers
    /// and dispatcher of traced threads (`before_call`); read when the dump's
    /// note is written.
    pub(crate) static CODE_FILE_OPENS: AtomicU64 = AtomicU64::new(0);
    /// Stable ranges demoted. Written: counted by handlers and the dispatcher
    /// (`apply`, the session's lock held); read when the dump's note is
    /// written.
    pub(crate) static DEMOTED: AtomicU64 = AtomicU64::new(0);
    /// New mappings left untrusted. Written: reset by `start` (program thread),
    /// counted by handlers (`may_trust`); read when the dump's note is written.
    pub(crate) static UNTRUSTED: AtomicU32 = AtomicU32::new(0);
}

pub(crate) mod engine {
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
    use std::sync::Mutex;

    /// Set when the trigger signal starts and stops `--signal` windows (it
    /// only stops captures of the other kinds).
    ///
    /// Written by the program thread that installs the trigger signal
    /// (`install_trigger_signal`); read by the trigger signal's handler.
    pub(crate) static SIGNAL_WINDOWS: AtomicBool = AtomicBool::new(false);
    /// A thread is on its way through
    /// [`coldcache_finish_trampoline`](crate::engine::coldcache_finish_trampoline)
    /// (whose finish stack and `RESUME_RIP` are shared). Written by the
    /// handler that redirects a thread to `finish`
    /// ([`redirect_to_finish`](crate::engine::redirect_to_finish), a swap);
    /// cleared by the trampoline's last instructions on that thread.
    pub(crate) static REDIRECTED: AtomicBool = AtomicBool::new(false);
    /// Where a thread redirected to
    /// [`coldcache_finish_trampoline`](crate::engine::coldcache_finish_trampoline)
    /// resumes.
    ///
    /// Written by the handler that redirects a thread (`redirect_to_finish`),
    /// after it won [`REDIRECTED`]; read by the trampoline on that thread.
    pub(crate) static RESUME_RIP: AtomicU64 = AtomicU64::new(0);
    /// Top of the stack the trap handler's work runs on (see `run_on_stack`).
    ///
    /// Written once by the program thread installing the handlers
    /// (`install_handlers` maps the stack); read by the trap handlers.
    pub(crate) static HANDLER_STACK_TOP: AtomicU64 = AtomicU64::new(0);
    /// Top of the stack `coldcache_finish_trampoline` runs `finish` on.
    ///
    /// Written once by the program thread installing the handlers
    /// (`install_handlers` maps the stack); read by `redirect_to_finish`
    /// (handler) and the trampoline.
    pub(crate) static TRAMPOLINE_STACK_TOP: AtomicU64 = AtomicU64::new(0);
    /// Executable range of the code this engine is part of: a thread stopped
    /// inside it is never redirected to `finish` (it may hold our locks).
    ///
    /// Written by the program thread installing the handlers
    /// (`install_handlers`); read by handlers.
    pub(crate) static OWN_TEXT: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

    /// Whether `rip` lies in [`OWN_TEXT`].
    pub(crate) fn in_own_text(rip: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        rip >= OWN_TEXT[0].load(Relaxed) && rip < OWN_TEXT[1].load(Relaxed)
    }
    /// Whether the handlers are installed. Written (locked) by the program
    /// thread installing them (`install_handlers`), never by a handler.
    pub(crate) static HANDLERS: Mutex<bool> = Mutex::new(false);
    /// System calls the sync signal ended with EINTR.
    ///
    /// Written: counted by the sync signal's handler of any thread (`on_sync`);
    /// taken (swapped to 0) when the dump is written (`take_woken_early`).
    pub(crate) static SYNC_WOKE: AtomicU32 = AtomicU32::new(0);
    /// System calls the trigger signal (`--signal`, `attach` without a
    /// trigger: its start and its stop) ended with EINTR.
    ///
    /// Written: counted by the trigger signal's handler (`on_trigger_signal`);
    /// taken (swapped to 0) when the dump is written (`take_woken_early`).
    pub(crate) static TRIGGER_WOKE: AtomicU32 = AtomicU32::new(0);
    /// Where the library says which stop request signal it took (`record`'s
    /// `COLDCACHE_STOP_FILE`), set before `main`.
    ///
    /// Written (locked) by the program thread through `set_stop_file` (the
    /// preloaded library's constructor) and taken by `take_stop_signal`
    /// (program thread, when the stop request signal is chosen), never by a
    /// handler.
    pub(crate) static STOP_FILE: Mutex<Option<std::path::PathBuf>> = Mutex::new(None);
    /// The thread redirected to `finish` resumes at an `execve`.
    ///
    /// Written by the SIGTRAP handler of a traced thread that stops the capture
    /// at an `execve` (`step`); taken by the trampoline on that thread
    /// (`finish_from_trampoline`).
    pub(crate) static EXEC_NEXT: AtomicBool = AtomicBool::new(false);
}

pub(crate) mod fatal {
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

    /// Signals (bit n for signal n) whose handler is
    /// [`on_fatal`](crate::fatal::on_fatal) now.
    ///
    /// Written by the program thread preparing or ending a capture (`arm`,
    /// `disarm`) and by a traced thread's SIGTRAP handler emulating its
    /// `rt_sigaction` (`emulate_sigaction`).
    pub(crate) static ARMED_SET: AtomicU64 = AtomicU64::new(0);
    /// Set by the first thread that writes the dump from
    /// [`on_fatal`](crate::fatal::on_fatal).
    ///
    /// Written: reset by `arm` (program thread, preparing a capture); set by
    /// the fatal signal's handler (`die`) of the first thread there.
    pub(crate) static CLAIMED: AtomicBool = AtomicBool::new(false);
    /// Set once that thread is done (written or given up).
    ///
    /// Written: reset by `arm` (program thread); set by the fatal signal's
    /// handler (`die`) of the thread that claimed the dump.
    pub(crate) static WRITTEN: AtomicBool = AtomicBool::new(false);
    /// The thread running `finish` now (0: none); see
    /// [`Finishing`](crate::fatal::Finishing).
    ///
    /// Written by the thread running `finish` (a program thread, the writer
    /// thread or a handler), on entry and on leaving (`Finishing`).
    pub(crate) static FINISHING_TID: AtomicU32 = AtomicU32::new(0);
    /// Top of the stack `on_fatal` runs `finish` on.
    ///
    /// Written by `arm` (program thread, maps the stack); read by the fatal
    /// signal's handler.
    pub(crate) static STACK_TOP: AtomicU64 = AtomicU64::new(0);
    /// Per signal, the `SIG_DFL` disposition [`arm`](crate::fatal::arm)
    /// replaced, as the kernel's `struct sigaction` after its handler: flags,
    /// restorer, mask (signals 1..=64), so a traced thread reading it back gets
    /// exactly that.
    ///
    /// Written by `arm` (program thread) and by a traced thread's SIGTRAP
    /// handler emulating its `rt_sigaction` (`emulate_sigaction`); read by
    /// handlers.
    pub(crate) static ORIGINAL: [[AtomicU64; 3]; 65] =
        [const { [const { AtomicU64::new(0) }; 3] }; 65];
}

pub(crate) mod rseq {
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};

    /// glibc's `__rseq_offset` (the area's offset from the thread pointer), or
    /// `i64::MIN` when glibc registered no area.
    ///
    /// Written by `init` (program thread preparing a capture); read by handlers
    /// and the replay.
    pub(crate) static OFFSET: AtomicI64 = AtomicI64::new(i64::MIN);
    /// Critical sections entered under the trap engine in this capture, and
    /// those it aborted for a preemption.
    ///
    /// Written: reset by `init` (program thread preparing a capture), counted
    /// by the SIGTRAP handler of any traced thread (`skip_store`); read when
    /// the dump's note is written.
    pub(crate) static ENTERED: AtomicU64 = AtomicU64::new(0);
    /// Of those, the ones aborted for a preemption. Written: reset by `init`
    /// (program thread), counted by the SIGTRAP handler of any traced thread;
    /// read when the dump's note is written.
    pub(crate) static ABORTED: AtomicU64 = AtomicU64::new(0);
    /// Sections aborted at the end of a trap handler
    /// ([`before_return`](crate::rseq::before_return)).
    ///
    /// Written: reset by `init` (program thread), counted by the SIGTRAP
    /// handler of any traced thread (`before_return`); read when the dump's
    /// note is written.
    pub(crate) static ABORTED_LATE: AtomicU64 = AtomicU64::new(0);
    /// Commits run with the descriptor back in the field
    /// ([`before_return`](crate::rseq::before_return)).
    ///
    /// Written: reset by `init` (program thread), counted by the SIGTRAP
    /// handler of any traced thread (`before_return`); read when the dump's
    /// note is written.
    pub(crate) static COMMITS_ARMED: AtomicU64 = AtomicU64::new(0);
    /// Commits the trap engine made itself inside its own critical section
    /// ([`commit`](crate::rseq::commit)).
    ///
    /// Written: reset by `init` (program thread), counted by the SIGTRAP
    /// handler of any traced thread (`commit`); read when the dump's note is
    /// written.
    pub(crate) static COMMITS_MADE: AtomicU64 = AtomicU64::new(0);
    /// Commits left to the program because the kernel cleared the trap
    /// engine's own descriptor with no switch ([`commit`](crate::rseq::commit)).
    ///
    /// Written: reset by `init` (program thread), counted by the SIGTRAP
    /// handler of any traced thread (`commit`); read by `commit` and when
    /// the dump's note is written.
    pub(crate) static CLEARED: AtomicU64 = AtomicU64::new(0);
    /// Whether the trap engine has stopped making commits itself in this
    /// capture ([`CLEARED`] reached its limit).
    ///
    /// Written: reset by `init` (program thread), set by the SIGTRAP handler
    /// of any traced thread (`commit`); read by `commit`.
    pub(crate) static COMMIT_OFF: AtomicBool = AtomicBool::new(false);
    /// Stores of a descriptor found in replayed records of translated code
    /// (fast mode), and how many distinct store instructions they were.
    ///
    /// Written: reset by `init` (program thread), counted by the thread
    /// replaying a fast-mode buffer (`replayed_store`: a traced thread's
    /// dispatcher, or `finish`); read when the dump's note is written.
    pub(crate) static TRANSLATED: AtomicU64 = AtomicU64::new(0);
    /// Store instructions found so (address and length), retired from
    /// translation by the replay that found them
    /// ([`take_learned`](crate::rseq::take_learned)): their next executions go
    /// to the trap engine, which keeps the descriptor.
    ///
    /// Written by the thread replaying a fast-mode buffer (`replayed_store`,
    /// slots claimed atomically); read by `take_learned` (the translator, its
    /// lock held).
    pub(crate) static LEARNED: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];
    /// The length of each store of [`LEARNED`]. Written by the thread replaying
    /// a fast-mode buffer (`replayed_store`); read by `take_learned`.
    pub(crate) static LEARNED_LEN: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];
    /// Entries of [`LEARNED`] a replay has not retired yet.
    ///
    /// Written: counted by the thread replaying a fast-mode buffer
    /// (`replayed_store`); taken (swapped to 0) by `take_learned`.
    pub(crate) static TO_RETIRE: AtomicU64 = AtomicU64::new(0);
    /// Whether a commit may run with the descriptor back in the field (the
    /// kernel's configuration read, without `CONFIG_DEBUG_RSEQ`).
    ///
    /// Written by `init` (program thread preparing a capture); read by the
    /// SIGTRAP handlers.
    pub(crate) static ARM: AtomicBool = AtomicBool::new(false);
    /// Descriptor stores the translator recognised and left to the trap engine
    /// ([`stores_descriptor`](crate::rseq::stores_descriptor)).
    ///
    /// Written: counted by the translator (`stores_descriptor`: a traced
    /// thread's dispatcher or handler, the translator's lock held); read when
    /// the dump's note is written.
    pub(crate) static RECOGNISED: AtomicU64 = AtomicU64::new(0);
}

pub(crate) mod schedule {
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

    /// Threads the rotation holds at once (more are traced unserialised, and
    /// the capture is marked not reproducible).
    pub(crate) const SLOTS: usize = 256;
    pub(crate) const FREE: u32 = 0;
    pub(crate) const WAITING: u32 = 1;
    pub(crate) const OUT: u32 = 2;
    /// Instructions per turn; 0 when threads are not serialised.
    ///
    /// Written by `configure` (program thread preparing a capture) and `off`
    /// (the thread ending it); read by traced threads' handlers and dispatcher.
    pub(crate) static QUANTUM: AtomicU64 = AtomicU64::new(0);
    /// The tid whose turn it is (0: nobody's; the first thread to ask takes
    /// it).
    ///
    /// Written by `configure`/`off` (program thread) and by the handler or
    /// dispatcher of the traced thread that takes or hands on the turn
    /// (`enter`, `hand_on`).
    pub(crate) static TURN: AtomicU32 = AtomicU32::new(0);
    /// Instructions of the current turn so far.
    ///
    /// Written by `configure` (program thread) and by the traced thread holding
    /// the turn (its handler or dispatcher: `enter`, `tick`, `hand_on`).
    pub(crate) static USED: AtomicU64 = AtomicU64::new(0);
    /// Threads cloned by a traced thread that have not yet asked for a turn.
    ///
    /// Written by `configure` (program thread), counted by the handler or
    /// dispatcher of a traced thread that clones (`syscall`) and of the new
    /// thread that arrives (`arrived`), cleared by `hand_on`.
    pub(crate) static PENDING: AtomicU32 = AtomicU32::new(0);
    /// A thread that gave up its turn to exit: the next holder waits until it
    /// is gone, so the kernel has cleared its tid word and woken its joiner
    /// (`pthread_join` then sees the same thing in every run).
    ///
    /// Written by the handler or dispatcher of a traced thread about to exit
    /// (`exiting`), cleared by the next holder (`settle`) or `configure`
    /// (program thread).
    pub(crate) static EXITING: AtomicU32 = AtomicU32::new(0);
    /// A wait ran out, or the table was full: this run's interleaving may
    /// differ from another's.
    ///
    /// Written by `configure` (program thread) and by any traced thread's
    /// handler or dispatcher whose wait ran out or found the table full; read
    /// when the dump is written.
    pub(crate) static STALLED: AtomicBool = AtomicBool::new(false);
    /// The thread of each slot of the rotation (0: free). Written by the
    /// handler or dispatcher of each traced thread, for its own slot (`claim`,
    /// `leave`).
    pub(crate) static TIDS: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];
    /// The state of each slot ([`FREE`], [`WAITING`], [`OUT`]). Written by the
    /// handler or dispatcher of the slot's thread (`enter`, `leave`) and by the
    /// thread handing the turn on (`hand_on`).
    pub(crate) static STATES: [AtomicU32; SLOTS] = [const { AtomicU32::new(FREE) }; SLOTS];
}

pub(crate) mod seccomp {
    use std::sync::atomic::{AtomicBool, AtomicI64};

    /// Mode and filter count when the library was loaded (-1: not noted yet).
    ///
    /// Written once by the preloaded library's constructor (`note_inherited`,
    /// program thread); read when a capture starts.
    pub(crate) static INHERITED_MODE: AtomicI64 = AtomicI64::new(-1);
    /// The filter count, as [`INHERITED_MODE`]. Written once by the preloaded
    /// library's constructor (`note_inherited`, program thread); read when a
    /// capture starts.
    pub(crate) static INHERITED_FILTERS: AtomicI64 = AtomicI64::new(-1);
    /// Set by the writer thread once it is parked for good.
    ///
    /// Written by the writer thread itself, once parked (`park_writer_here`);
    /// read by the handler that parks it (`park_writer`).
    pub(crate) static PARKED: AtomicBool = AtomicBool::new(false);
}

pub(crate) mod sigfault {
    use std::sync::atomic::{AtomicBool, AtomicU64};

    /// The C library's cancellation signal (glibc's `SIGCANCEL`, its first
    /// real-time signal, hidden from the program's `sigaction`): its
    /// handler unwinds the thread from the interrupted context when
    /// cancellation is asynchronous.
    pub(crate) const SIGCANCEL: i32 = 32;

    /// The signals whose handlers are run from
    /// [`on_fault`](crate::sigfault::on_fault): the faults, then the
    /// timers' and the C library's cancellation.
    pub(crate) const SIGNALS: [i32; 9] = [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGPROF,
        libc::SIGVTALRM,
        libc::SIGALRM,
        libc::SIGURG,
        SIGCANCEL,
    ];
    /// A capture is prepared or runs: handlers the program installs are
    /// wrapped.
    ///
    /// Written by the program thread preparing and ending a capture (`arm`,
    /// `disarm`); read by the interposed `sigaction` and by handlers.
    pub(crate) static WRAPPING: AtomicBool = AtomicBool::new(false);
    /// Bit `sig`: the kernel's disposition of `sig` is
    /// [`on_fault`](crate::sigfault::on_fault) and the program's is in
    /// [`PROGRAM`].
    ///
    /// Written by `arm`/`disarm` (program thread), by the program's `sigaction`
    /// (the interposer on a program thread, or a traced thread's SIGTRAP
    /// handler emulating it: `wrap`, `unwrap`) and by the fault handler
    /// (`note`).
    pub(crate) static WRAPPED: AtomicU64 = AtomicU64::new(0);
    /// The program's disposition of each of [`SIGNALS`] (handler, flags,
    /// restorer, mask of signals 1..=64) while wrapped.
    ///
    /// Written by `wrap` (a program thread's `sigaction`, or a traced thread's
    /// SIGTRAP handler emulating it); read by the fault handler (`on_fault`).
    pub(crate) static PROGRAM: [[AtomicU64; 4]; SIGNALS.len()] =
        [const { [const { AtomicU64::new(0) }; 4] }; SIGNALS.len()];
}

pub(crate) mod sigvirt {
    use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize};

    pub(crate) const SLOTS: usize = 3;
    /// The signal each slot stands for, once the engine owns it (0: not yet).
    ///
    /// Written by the program thread installing the engine's handlers (`take`,
    /// at every start); read by handlers and the interposed `sigaction`.
    pub(crate) static OWNED: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
    /// The engine's handler of each owned signal.
    ///
    /// Written by the program thread installing the engine's handlers (`take`,
    /// at every start); read by handlers.
    pub(crate) static OURS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
    /// The program's disposition of each owned signal, as the kernel's
    /// `struct sigaction` (handler, flags, restorer, mask of signals 1..=64).
    ///
    /// Written by `take` (program thread, at every start), by the program's
    /// `sigaction` (the interposer on a program thread, or a traced thread's
    /// SIGTRAP handler emulating `rt_sigaction`: `set_shadow`) and by a handler
    /// delivering a one-shot signal (`deliver`).
    pub(crate) static SHADOW: [[AtomicU64; 4]; SLOTS] =
        [const { [const { AtomicU64::new(0) }; 4] }; SLOTS];
    /// The restorer the C library gives handlers (`__restore_rt`), for
    /// dispositions set through
    /// [`program_sigaction`](crate::sigvirt::program_sigaction).
    ///
    /// Written by `take` (program thread installing the handlers, at every
    /// start); read by `program_sigaction`.
    pub(crate) static LIBC_RESTORER: AtomicU64 = AtomicU64::new(0);
    /// The C library's `sigaction` (the one after ours in the lookup order).
    ///
    /// Written by `real_sigaction` when it finds it 0 (a program thread: the
    /// engine taking its signals, or the interposed `sigaction`; the same
    /// value each time); read there.
    pub(crate) static REAL_SIGACTION: AtomicUsize = AtomicUsize::new(0);
    /// Per-thread virtual SIGTRAP state of traced threads: the thread's
    /// pointer (`fs:0`, read without a system call) and its bits, its thread
    /// id in [`TIDS`]. Each thread only reads and changes its own entry.
    /// Looked up by the thread pointer first: a thread's last trap after the
    /// program confined itself with a seccomp filter synchronised to every
    /// thread must make no system call, and `gettid` for every thread's last
    /// trap killed the program with SIGSYS; now only a thread that blocked
    /// SIGTRAP (it has an entry) asks for its id.
    ///
    /// Written by each traced thread for its own entry only (`set_bits`: its
    /// SIGTRAP or sync handler, or the interposed `sigprocmask` on that
    /// thread).
    pub(crate) static THREADS: [(AtomicU64, AtomicU64); 256] =
        [const { (AtomicU64::new(0), AtomicU64::new(0)) }; 256];
    /// The thread id of each entry of [`THREADS`] (see
    /// [`entry`](crate::sigvirt::entry)).
    ///
    /// Written by each thread for its own entry only (`set_bits`, in the
    /// contexts of [`THREADS`]).
    pub(crate) static TIDS: [AtomicU32; 256] = [const { AtomicU32::new(0) }; 256];
    /// Entries of [`THREADS`] in use: zero almost always, so a trap pays one
    /// load, not a scan.
    ///
    /// Written: counted by `set_bits` on any thread as it takes or frees an
    /// entry of [`THREADS`]; read by every trap handler.
    pub(crate) static IN_USE: AtomicU32 = AtomicU32::new(0);
}

pub(crate) mod lock {
    use std::sync::atomic::AtomicBool;

    /// Set for good when the program is about to install a seccomp filter.
    ///
    /// Written by the SIGTRAP handler of the traced thread about to install a
    /// seccomp filter (`seccomp::confines` calls `forbid_system_calls`); read
    /// by every lock's `unlock`.
    pub(crate) static NO_SYSCALLS: AtomicBool = AtomicBool::new(false);
}

pub(crate) mod objects {
    use coldcache_account::objects::MAX_ENTRIES;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};

    /// The entry points of the capture running now, for the translator
    /// ([`widen`](crate::objects::widen)); set by
    /// [`publish`](crate::objects::publish) before the engines start.
    ///
    /// Written by `publish` (the program thread preparing a capture, before the
    /// engines start); read by the translator and the dispatcher of any traced
    /// thread (atomic loads).
    pub(crate) static ENTRIES: [AtomicU64; MAX_ENTRIES] =
        [const { AtomicU64::new(0) }; MAX_ENTRIES];
    /// The kind of each of [`ENTRIES`]. Written by `publish` (program thread
    /// preparing a capture); read by the translator and the dispatcher.
    pub(crate) static KINDS: [AtomicU8; MAX_ENTRIES] = [const { AtomicU8::new(0) }; MAX_ENTRIES];
    /// Whether [`ENTRIES`] holds this capture's entry points. Written by
    /// `publish` (program thread preparing or ending a capture); read by the
    /// translator and the dispatcher.
    pub(crate) static ON: AtomicBool = AtomicBool::new(false);
}

pub(crate) mod procfs {
    /// The `coldcache attach` thread that traces one thread of ours while it
    /// arms a capture (`crate::attach`; 0 otherwise): it detaches before the
    /// capture runs, so it is not the debugger
    /// [`tracer_pid`](crate::procfs::tracer_pid) looks for.
    ///
    /// Written by `attach::start` (the program thread `coldcache attach` runs
    /// its remote calls on), before and after it arms the capture; read by
    /// `tracer_pid`.
    pub(crate) static ATTACHER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
}

pub(crate) mod jit_sys {
    use std::sync::atomic::AtomicU8;

    /// The trap engine steps the call.
    pub(crate) const ENGINE: u8 = 0;
    /// Made inline.
    pub(crate) const INLINE: u8 = 1;
    /// Made inline after the buffer is replayed.
    pub(crate) const FLUSH: u8 = 2;
    /// Classed by [`FUTEX_CLASS`].
    pub(crate) const FUTEX: u8 = 3;
    /// Numbers at or above this go to the trap engine (x32 calls included).
    pub(crate) const NUMBERS: usize = 512;
    /// Class of each call number.
    ///
    /// Written by `configure` (the program thread preparing a fast-mode
    /// capture, before any thread runs translated code); read by translated
    /// code (its address is in the code).
    pub(crate) static CLASS: [AtomicU8; NUMBERS] = [const { AtomicU8::new(ENGINE) }; NUMBERS];
    /// Class of a `futex` by the low byte of its operation (never [`ENGINE`]).
    ///
    /// Written by `configure` (the program thread preparing a fast-mode
    /// capture); read by translated code (its address is in the code).
    pub(crate) static FUTEX_CLASS: [AtomicU8; 256] = [const { AtomicU8::new(FLUSH) }; 256];
}
