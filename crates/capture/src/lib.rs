//! coldcache-capture: the in-process capture engine.
//!
//! One accounting core, front ends around it:
//! - [`account`]: the sans-I/O accountant — per executed instruction:
//!   decode, access model, simulation through the one driver
//!   ([`coldcache_sim::Driver`]), counters per (instruction, stack, thread),
//!   shadow stacks. It takes a register source and returns a verdict.
//! - [`model`]: the pure x86-64 access model (instruction + registers → accesses).
//! - [`tables`]: the tables the accountant fills, growing within the
//!   capture's memory budget ([`grow`]: mappings made with system calls).
//! - The trap front end: `engine.rs` (the signal shell: handlers, trap
//!   flag, trampolines, writer thread) over `lifecycle.rs` (prepare, start,
//!   stop, finish), `state.rs` (state machine, lock, session),
//!   `breakpoint.rs`, `sysemu.rs` (system calls that end tracing),
//!   [`sigvirt`] (the program's view of SIGTRAP and the sync signal) and
//!   `output.rs` (dump and trace files).
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
//! - [`unwind`]: DWARF CFI unwinding (framehop) that seeds a thread's call stack.
//! - [`capi`] and [`preload`]: the C ABI and the environment protocol of
//!   `coldcache record`.
//!
//! The simulator and the dump format know nothing of this crate; this crate
//! is where the unsafe, OS-specific code lives.

#![warn(missing_docs)]

// Shared by every front end.
mod altstack;
mod fatal;
mod seccomp;

pub mod account;
pub mod attach;
mod breakpoint;
pub mod capi;
pub mod engine;
pub mod grow;
mod jit;
mod lifecycle;
pub mod machine;
pub mod memory;
pub mod model;
pub mod objects;
mod options;
mod output;
pub mod preload;
pub mod procfs;
mod schedule;
pub mod sigvirt;
mod state;
mod sysemu;
pub mod tables;
pub mod unwind;

pub use account::{Accountant, BlockSlot, Entry, FunctionCalls, Setup, Verdict};
pub use lifecycle::{
    finish, finish_at_exit, instructions_traced, is_active, prepare, publish_progress, start, stop,
    Capture, PROGRESS_RUNNING,
};
pub use options::{
    check_reserves, memory_limit, reserve_costs, CaptureError, Mode, Options, Reserves, Schedule,
    Summary, Threads, Trigger,
};
