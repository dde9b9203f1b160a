//! coldcache-capture: the in-process capture engine.
//!
//! - [`model`]: the pure x86-64 access model (instruction + registers → accesses).
//! - [`tables`]: fixed-capacity tables the trap handler fills.
//! - [`machine`]: registers of a trapped thread, read from its `ucontext_t`.
//! - [`engine`]: trap-flag single-stepping, the signal handlers, start/stop.
//! - [`procfs`]: what the engine reads about its process (maps, threads, symbols).
//! - [`unwind`]: DWARF CFI unwinding (framehop) that seeds a thread's call stack.
//!
//! The simulator and the dump format know nothing of this crate; this crate
//! is where the unsafe, OS-specific code lives.

pub mod engine;
pub mod machine;
pub mod model;
pub mod procfs;
pub mod tables;
pub mod unwind;

pub use engine::{
    finish, is_active, prepare, start, stop, Capture, CaptureError, Options, Reserves, Summary,
    Threads, Trigger,
};
pub mod capi;
pub mod preload;
