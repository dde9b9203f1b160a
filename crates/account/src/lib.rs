//! coldcache-account: the accountant and what it needs, pure.
//!
//! What an executed instruction costs, given its registers: the x86-64
//! access model ([`model`]: instruction + registers → accesses, the
//! [`model::Machine`] trait a register source implements), the tables the
//! counts live in ([`tables`]: decoded instructions, stacks, counter rows;
//! [`parts`], [`timeline`], [`objects`]), the unwinder that seeds a
//! thread's call stack from a module list ([`unwind`], [`maps`]), Valgrind's
//! client requests ([`requests`]), and the [`account::Accountant`] that
//! runs them: per instruction decode, model, simulate through the one
//! driver ([`coldcache_sim::Driver`]), count per (instruction, stack,
//! thread), keep the shadow stacks, and write the dump.
//!
//! No unsafe code (forbidden below), no statics, no libc: the capture
//! runtime (`coldcache-capture`) stops threads, reads their registers and
//! hands them in; what touches the kernel is there or in
//! [`coldcache_grow`] (the tables' memory, mapped with system calls within
//! the capture's budget). Nothing here allocates once built, so the
//! accountant runs inside signal handlers and traced threads.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The module list (`/proc/<pid>/maps` lines) the unwinder is built from.
pub use coldcache_fsio::maps;
/// The tables' memory (`coldcache-grow`), under the name the files use.
pub(crate) use coldcache_grow as grow;

pub mod account;
pub mod model;
pub mod objects;
pub mod parts;
pub mod requests;
pub mod tables;
pub mod timeline;
pub mod unwind;

pub use account::{Accountant, BlockSlot, Entry, FunctionCalls, Setup, Verdict};
