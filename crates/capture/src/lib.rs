//! coldcache-capture: the in-process capture engine.
//!
//! The signal code around one accounting core, the pure crate
//! `coldcache-account`, re-exported here under the paths the files use:
//! - [`account`]: the accountant — per executed instruction: decode,
//!   access model, simulation through the one driver
//!   ([`coldcache_sim::Driver`]), counters per (instruction, stack, thread),
//!   shadow stacks. It takes a register source and returns a verdict.
//! - [`model`]: the pure x86-64 access model (instruction + registers → accesses).
//! - [`tables`]: the tables the accountant fills, growing within the
//!   capture's memory budget ([`grow`], `coldcache-grow`: mappings made
//!   with system calls).
//! - The trap front end: `engine.rs` (the signal shell: handlers, trap
//!   flag, trampolines), run by `lifecycle.rs` (prepare, start, stop,
//!   finish), beside `writer.rs` (the writer thread, the one taker of the
//!   doorbell's commands), over `state.rs` (state machine, lock, session,
//!   what the entry protocols hand down), `signal_state.rs` (the signal
//!   code's statics; `tests/statics.rs` keeps statics in these few files)
//!   and [`doorbell`] (commands posted to the writer, what a queued signal
//!   asks for, what the life cycle registered for a thread that must act
//!   itself),
//!   `breakpoint.rs`, `sysemu.rs` (system calls that end tracing),
//!   [`sigvirt`] (the program's view of the engine's three signals:
//!   SIGTRAP, the sync signal and the stop request signal), `altstack.rs`
//!   (alternate signal stacks for traced threads) and `output.rs` (dump and
//!   trace files).
//! - The fast front end: `jit/` (dynamic binary translation: translated
//!   blocks record the model's inputs into per-thread buffers, replayed
//!   through the same accountant; the trap engine starts threads and runs
//!   what the translator refuses).
//! - [`machine`]: registers of a trapped thread, read from its `ucontext_t`;
//!   [`memory`]: reads and writes of this process that cannot fault.
//! - [`procfs`]: what the engine reads about its process (maps, threads, symbols).
//! - `schedule.rs`: `--schedule serial`, traced threads taking turns of a
//!   fixed quantum (a futex word of our own), for every front end.
//! - `fatal.rs` (the dump on fatal signals the program leaves at `SIG_DFL`)
//!   and `seccomp.rs` (stopping before a seccomp confinement, refusing a
//!   start after one), for every front end.
//! - [`unwind`] (the accountant's): DWARF CFI unwinding (framehop) that
//!   seeds a thread's call stack, built by [`procfs::self_unwinder`].
//! - [`capi`] and [`preload`]: the C ABI and the environment protocol of
//!   `coldcache record`; [`attach`]: `coldcache_attach_start`, the entry
//!   `coldcache attach` calls in a running process.
//!
//! The files' layers, and that imports only run down them with no circle,
//! are held by `tests/layers.rs` (or `python3
//! ../shared/tools/modgraph.py crates/capture/src`).
//!
//! The simulator and the dump format know nothing of this crate; this crate
//! is where the unsafe, OS-specific code lives.
//!
//! # Invariants
//! - The accountant knows nothing of signals, `ucontext`, statics or files
//!   and allocates nothing once built; only the front ends know how a
//!   thread is stopped. Both count through `step`/`step_block`, so their
//!   dumps are equal by construction (`crates/cli/tests/fast.rs`).
//! - Signal handlers and the dispatcher allocate nothing, take no lock the
//!   program can hold and never panic; tables grow by mapping memory with
//!   system calls within the capture's budget, and a table that cannot
//!   grow ends the capture cut short, naming it.
//! - Nothing of coldcache runs traced; translated code writes no flag,
//!   vector register or program memory the program's own instructions
//!   would not.
//! - The program keeps its own view of the engine's signals (`sigvirt.rs`;
//!   a traced thread never really blocks SIGTRAP), and a forked child never
//!   writes the parent's dump (`lifecycle::finish`).

#![warn(missing_docs)]

// Shared by every front end.
mod altstack;
mod fatal;
mod seccomp;
mod sigfault;
mod signal_state;
pub use sigfault::program_sigaction;

pub mod attach;
mod breakpoint;
pub mod capi;
mod codewrite;
pub mod doorbell;
pub mod engine;
mod errno;
mod jit;
mod lifecycle;
mod lock;
pub mod machine;
pub mod memory;
pub mod objects;
mod options;
mod output;
pub mod preload;
pub mod procfs;
mod rseq;
mod schedule;
pub mod settings;
pub mod sigvirt;
mod state;
mod sysemu;
mod tls;
mod writer;

// The pure accountant and the tables' memory, under the paths the files
// (and this crate's users) name them by.
pub use coldcache_account::{account, model, parts, requests, tables, timeline, unwind};
pub use coldcache_account::{Accountant, BlockSlot, Entry, FunctionCalls, Setup, Verdict};
pub use coldcache_grow as grow;
pub use lifecycle::{
    finish, finish_at_exit, instructions_traced, is_active, prepare, publish_progress, start, stop,
    Capture, PROGRESS_RUNNING,
};
pub use options::{
    check_reserves, memory_limit, reserve_costs, CaptureError, Mode, Options, Reserves, Schedule,
    Summary, Threads, Trigger,
};
pub use output::trace_write_failed;
