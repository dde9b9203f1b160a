//! coldcache-types: which type and which field each instruction's memory
//! operand touches, from a module's DWARF (issue 32, the data view).
//!
//! Pure: it takes the bytes of an ELF file (the module, or its separate
//! debug file) and answers questions about addresses stated in that file;
//! opening files and mapping run-time addresses is the caller's
//! (`coldcache-symbols`, which fills the dump's `DATA` section with it).
//! It is never linked into the preloaded library
//! (`scripts/check-slim-library.sh` fails if it is).
//!
//! - `layout`: DWARF types to [`coldcache_dump::DataType`] layouts
//!   (members in memory order, nested types, arrays, bit-fields, base
//!   classes, unions), and the member path of a byte range in a type.
//! - `globals`: global and static variables by address.
//! - `locals`: parameters and local variables by their location at an
//!   instruction: the variable a register holds (a pointer or reference
//!   to a type), the variable at a stack-frame offset.
//! - `flow`: typed pointers carried through a function's code from where
//!   DWARF places them (optimised loops advance a pointer DWARF no longer
//!   names).
//! - `operand`: an instruction's memory operand (iced-x86) and the rules
//!   that pick its type and field from the above.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod flow;
pub mod globals;
pub mod layout;
pub mod locals;
pub mod operand;

/// The reader the crate parses DWARF with: owned, reference-counted
/// slices, so tables keep no borrow of the file's bytes.
pub type Reader = gimli::EndianRcSlice<gimli::RunTimeEndian>;

/// A type, by the offset of its debugging information entry in
/// `.debug_info` (the key `layout` and `locals` agree on).
pub type TypeRef = gimli::DebugInfoOffset<usize>;
