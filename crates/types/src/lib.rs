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
//!
//! [`ModuleTypes`] puts them together for one ELF file: built once per
//! module (lazily, by the resolver, only for modules with records), it
//! types instructions one by one and hands the layouts it interned over.

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

use coldcache_dump::{DataType, TypedAccess};
use object::{Object, ObjectSection};
use std::rc::Rc;

/// Why a module's types cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TypesError {
    /// The bytes are not an object file `object` reads.
    #[error("not a readable ELF file: {0}")]
    Object(#[from] object::Error),
    /// The file has no `.debug_info`.
    #[error("no DWARF")]
    NoDwarf,
    /// Its DWARF sections could not be loaded.
    #[error("DWARF unreadable: {0}")]
    Dwarf(#[from] gimli::Error),
}

/// Loads the DWARF sections of `obj` (compressed ones inflated).
pub fn load_dwarf(obj: &object::File) -> Result<gimli::Dwarf<Reader>, TypesError> {
    let endian = if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let has_info = obj
        .section_by_name(".debug_info")
        .is_some_and(|s| s.kind() != object::SectionKind::UninitializedData && s.size() > 0);
    if !has_info {
        return Err(TypesError::NoDwarf);
    }
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let data = obj
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or_default();
        Ok(gimli::EndianRcSlice::new(Rc::from(&*data), endian))
    };
    Ok(gimli::Dwarf::load(load)?)
}

/// The parameters and locals of `obj`, for the register and stack rules;
/// `None` until `locals::Locals` is wired in (then only the globals rule
/// types anything).
fn variables_of(
    _dwarf: &gimli::Dwarf<Reader>,
    _obj: &object::File,
) -> Option<Box<dyn operand::Variables>> {
    None
}

/// One module's types, globals and variables, and the instructions typed
/// so far.
pub struct ModuleTypes {
    layouts: layout::Layouts,
    globals: globals::Globals,
    variables: Option<Box<dyn operand::Variables>>,
    /// Instructions looked at that have a memory operand.
    pub memory_instructions: usize,
    /// Of those, the ones typed.
    pub typed: usize,
}

impl ModuleTypes {
    /// Reads the DWARF of an ELF file (the module, or its separate debug
    /// file: addresses are the file's virtual addresses either way).
    pub fn from_elf(bytes: &[u8]) -> Result<ModuleTypes, TypesError> {
        let obj = object::File::parse(bytes)?;
        let dwarf = load_dwarf(&obj)?;
        let variables = variables_of(&dwarf, &obj);
        let mut mt = ModuleTypes::new(dwarf, variables);
        let loaded: Vec<(u64, u64)> = obj
            .sections()
            .filter(|s| match s.flags() {
                object::SectionFlags::Elf { sh_flags } => {
                    sh_flags & u64::from(object::elf::SHF_ALLOC) != 0
                }
                _ => true,
            })
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect();
        mt.globals.retain_loaded(&loaded);
        Ok(mt)
    }

    /// Types from loaded DWARF, with the variables the register and stack
    /// rules ask (`None`: only the globals rule applies).
    pub fn new(
        dwarf: gimli::Dwarf<Reader>,
        variables: Option<Box<dyn operand::Variables>>,
    ) -> ModuleTypes {
        let layouts = layout::Layouts::new(dwarf);
        let globals = globals::Globals::read(&layouts);
        ModuleTypes {
            layouts,
            globals,
            variables,
            memory_instructions: 0,
            typed: 0,
        }
    }

    /// Replaces the variables the register and stack rules ask.
    pub fn set_variables(&mut self, variables: Option<Box<dyn operand::Variables>>) {
        self.variables = variables;
    }

    /// The layouts (and the DWARF they read).
    pub fn layouts(&self) -> &layout::Layouts {
        &self.layouts
    }

    /// The layouts, to intern types by hand.
    pub fn layouts_mut(&mut self) -> &mut layout::Layouts {
        &mut self.layouts
    }

    /// The global and static variables.
    pub fn globals(&self) -> &globals::Globals {
        &self.globals
    }

    /// Types the instruction at file address `vaddr` whose bytes start
    /// `code` (see `operand`); its `ty` indexes [`ModuleTypes::types`].
    /// Counts it in [`ModuleTypes::memory_instructions`] when it has a
    /// memory operand and in [`ModuleTypes::typed`] when typed.
    pub fn type_instruction(&mut self, vaddr: u64, code: &[u8]) -> Option<TypedAccess> {
        let ins = operand::memory_instruction(vaddr, code)?;
        self.memory_instructions += 1;
        let a = operand::type_access(
            &mut self.layouts,
            &self.globals,
            self.variables.as_deref(),
            &ins,
        )?;
        self.typed += 1;
        Some(a)
    }

    /// The types interned so far.
    pub fn types(&self) -> &[DataType] {
        &self.layouts.types
    }

    /// Moves the interned types out (indices of the accesses returned so
    /// far refer to it).
    pub fn take_types(&mut self) -> Vec<DataType> {
        self.layouts.take_types()
    }

    /// What the reader found, for the dump's per-module line: `"N types,
    /// X of Y memory instructions typed"` (and the types it could not
    /// read, when any).
    pub fn summary(&self) -> String {
        self.summary_with(self.layouts.types.len())
    }

    /// [`ModuleTypes::summary`] with `types` for the number of types (those
    /// the typed accesses reach, once the caller has dropped the others).
    pub fn summary_with(&self, types: usize) -> String {
        let mut s = format!(
            "{} types, {} of {} memory instructions typed",
            types, self.typed, self.memory_instructions
        );
        if self.variables.is_none() {
            s.push_str(" (globals only: no variable locations)");
        }
        if self.layouts.skipped > 0 {
            s.push_str(&format!(
                ", {} types or members left out (unreadable or without a size)",
                self.layouts.skipped
            ));
        }
        s
    }
}
