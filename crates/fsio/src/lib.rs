//! coldcache-fsio: the one home of facts about files that several crates
//! need, so that each is written once and behaves the same everywhere.
//!
//! - [`write`]: [`write_atomically`] (a temporary file in the target's
//!   directory, fsynced, then renamed over the target; removed on every
//!   error path; devices and FIFOs written in place; symbolic links
//!   followed, never replaced, unless planted by another user in a sticky
//!   directory: [`check_link`]) and [`write_output`] (the same, with `-`
//!   meaning standard output), for every file coldcache writes;
//!   [`move_file`] puts a finished file in place by the same rules;
//!   [`create_unique`] makes a new file under an unguessable name.
//! - [`read`]: [`read_regular`] and [`open_regular`], for every file
//!   coldcache reads whose name comes from a user or a dump: only regular
//!   files (after symbolic links), opened without blocking on a FIFO, and
//!   never more than a stated number of bytes, counted while reading;
//!   [`read_regular_with_magic`] checks a format's first bytes before
//!   reading on.
//! - [`sigpipe`]: [`NoSigpipe`], writing to a pipe or FIFO without a
//!   `SIGPIPE` reaching the program the preloaded library runs in, and
//!   [`say!`], its `eprintln!`.
//! - [`fdguard`]: the preloaded library's long-lived descriptors moved out
//!   of the program's way ([`fdguard::lift`]) and told from a number the
//!   program closed and reused ([`fdguard::Identity`]).
//! - [`env`]: the `COLDCACHE_*` settings, ignored in a set-user-ID or
//!   set-group-ID process (`AT_SECURE`).
//! - [`varint`]: LEB128 and zigzag, as the dump, trace and zones formats
//!   encode integers (pure; no I/O).
//! - [`maps`]: the lines of a `/proc/<pid>/maps` file, parsed (pure): the
//!   module list the unwinder is built from, what `attach` reads of a
//!   process.
//! - [`elf`] (feature `elf`): `PT_LOAD` segments of an ELF file, file
//!   offset → stated address, and the load bias of a mapping.
//!
//! The crate depends on `std` and `libc` only (and `object` with `elf`),
//! since the preloaded `libcoldcache.so` links it: it must stay small.

#[cfg(feature = "elf")]
pub mod elf;
pub mod env;
pub mod fdguard;
pub mod maps;
pub mod read;
pub mod sigpipe;
pub mod varint;
pub mod write;

/// The unit tests that close, reuse or count on descriptor numbers, or
/// change SIGPIPE's disposition (`fdguard`, `sigpipe`), run one at a
/// time: in one process, one's `close` or `pipe` lands in another's
/// numbers.
#[cfg(test)]
pub(crate) static FD_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub use read::{
    check_magic, open_regular, read_regular, read_regular_to_string, read_regular_with_magic,
    ReadError,
};
pub use sigpipe::NoSigpipe;
pub use write::{
    check_link, create_unique, file_id, move_file, numbered, open_in_place, write_atomically,
    write_atomically_with, write_claimed, write_output, write_output_parts, write_parts, FileId,
    READER_WAIT,
};
