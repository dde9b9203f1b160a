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

/// The parameters and locals of `dwarf`, for the register and stack
/// rules, with the call frame information of `code` (the module itself);
/// `None` when they cannot be read at all (then only the globals rule
/// types anything).
fn variables_of(
    dwarf: &gimli::Dwarf<Reader>,
    code: &object::File,
    pcs: Option<&[u64]>,
) -> (Option<Box<dyn operand::Variables>>, u64) {
    match locals::Locals::read_at(dwarf, code, pcs) {
        Ok(l) => {
            let n = l.variables;
            (Some(Box::new(l) as Box<dyn operand::Variables>), n)
        }
        Err(_) => (None, 0),
    }
}

/// The module's functions and code, for the flow pass.
#[derive(Default)]
struct Code {
    /// Functions by (start, end) file address, sorted, from the symbol
    /// table.
    functions: Vec<(u64, u64)>,
    /// Executable sections: (address, bytes).
    sections: Vec<(u64, Vec<u8>)>,
}

impl Code {
    fn read(obj: &object::File) -> Code {
        use object::ObjectSymbol;
        let mut functions: Vec<(u64, u64)> = obj
            .symbols()
            .chain(obj.dynamic_symbols())
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect();
        functions.sort_unstable();
        functions.dedup();
        let sections = obj
            .sections()
            .filter(|s| s.kind() == object::SectionKind::Text)
            .filter_map(|s| Some((s.address(), s.data().ok()?.to_vec())))
            .collect();
        Code {
            functions,
            sections,
        }
    }

    /// The function holding `addr` and its bytes.
    fn function(&self, addr: u64) -> Option<(u64, &[u8])> {
        let i = self
            .functions
            .partition_point(|f| f.0 <= addr)
            .checked_sub(1)?;
        let (start, end) = self.functions[i];
        if addr >= end {
            return None;
        }
        let (at, bytes) = self
            .sections
            .iter()
            .find(|(a, b)| *a <= start && end <= a.saturating_add(b.len() as u64))?;
        let from = usize::try_from(start - at).ok()?;
        let to = usize::try_from(end - at).ok()?;
        Some((start, bytes.get(from..to)?))
    }
}

/// What the flow pass asks, answered from the module's DWARF.
struct FlowSeeds<'a> {
    layouts: &'a layout::Layouts,
    globals: &'a globals::Globals,
    vars: Option<&'a dyn operand::Variables>,
    names: &'a std::cell::RefCell<Names>,
}

/// Variable names interned for the flows (`Typed::var` indexes `list`).
#[derive(Default)]
struct Names {
    list: Vec<String>,
    index: std::collections::HashMap<String, u32>,
}

impl FlowSeeds<'_> {
    fn name(&self, n: &str) -> u32 {
        let mut names = self.names.borrow_mut();
        if let Some(&i) = names.index.get(n) {
            return i;
        }
        let i = names.list.len() as u32;
        names.list.push(n.to_string());
        names.index.insert(n.to_string(), i);
        i
    }
}

impl flow::Seeds for FlowSeeds<'_> {
    fn seed(&self, pc: u64, reg: u16) -> Option<(TypeRef, i64, u32)> {
        if reg == 7 {
            return None;
        }
        let (v, off) = self.vars?.pointer_seed(pc, reg)?;
        Some((v.ty, off, self.name(&v.name)))
    }
    fn size_of(&self, ty: TypeRef) -> Option<u64> {
        self.layouts.size_of(ty).filter(|&s| s > 0)
    }
    fn global(&self, addr: u64) -> Option<(TypeRef, i64, u32)> {
        let g = self.globals.find(addr)?;
        let p = self.layouts.peel(g.ty)?;
        // An array's element type: the flow folds offsets into one.
        let ty = if p.count.is_some() { p.die } else { g.ty };
        let off = i64::try_from(addr - g.addr).ok()?;
        Some((ty, off, self.name(&g.name)))
    }
    fn pointee_at(&self, ty: TypeRef, offset: i64) -> Option<TypeRef> {
        self.layouts.pointee_at(ty, offset)
    }
    fn frame(&self, pc: u64, reg: u16, disp: i64) -> Option<(TypeRef, i64, u32)> {
        let v = self.vars?.stack_variable(pc, reg, disp, 1)?;
        let p = self.layouts.peel(v.ty)?;
        let ty = if p.count.is_some() { p.die } else { v.ty };
        let off = i64::try_from(v.offset).ok()?;
        Some((ty, off, self.name(&v.name)))
    }
}

/// One module's types, globals and variables, and the instructions typed
/// so far.
pub struct ModuleTypes {
    layouts: layout::Layouts,
    globals: globals::Globals,
    variables: Option<Box<dyn operand::Variables>>,
    code: Code,
    /// The flow pass's result per function (by start address).
    flows: std::collections::HashMap<u64, flow::Flow>,
    /// Variable names the flows refer to.
    names: std::cell::RefCell<Names>,
    /// Parameters and locals with a location (`None`: not read here).
    located: Option<u64>,
    /// Instructions looked at that have a memory operand.
    pub memory_instructions: usize,
    /// Of those, the ones typed.
    pub typed: usize,
}

impl ModuleTypes {
    /// Reads the DWARF of an ELF file (the module, or its separate debug
    /// file: addresses are the file's virtual addresses either way).
    pub fn from_elf(bytes: &[u8]) -> Result<ModuleTypes, TypesError> {
        ModuleTypes::from_files(bytes, None)
    }

    /// [`ModuleTypes::from_elf`] with the DWARF from `dwarf` (a separate
    /// debug file, whose code sections are empty) and the code, symbols
    /// and call frame information from `code`, the module itself (`None`:
    /// the same file).
    pub fn from_files(dwarf: &[u8], code: Option<&[u8]>) -> Result<ModuleTypes, TypesError> {
        ModuleTypes::from_files_at(dwarf, code, None)
    }

    /// [`ModuleTypes::from_files`] for the instructions at `pcs` (sorted
    /// file addresses): parameters and locals are read only from the
    /// units whose code holds one of them ([`locals::Locals::read_at`]);
    /// types, scopes and globals from every unit.
    pub fn from_files_at(
        dwarf: &[u8],
        code: Option<&[u8]>,
        pcs: Option<&[u64]>,
    ) -> Result<ModuleTypes, TypesError> {
        let obj = object::File::parse(dwarf)?;
        let code_obj = match code {
            Some(c) => object::File::parse(c)?,
            None => object::File::parse(dwarf)?,
        };
        let dwarf = load_dwarf(&obj)?;
        let (variables, located) = variables_of(&dwarf, &code_obj, pcs);
        let mut mt = ModuleTypes::new(dwarf, variables);
        mt.code = Code::read(&code_obj);
        mt.located = Some(located);
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
            code: Code::default(),
            flows: std::collections::HashMap::new(),
            names: std::cell::RefCell::new(Names::default()),
            located: None,
            memory_instructions: 0,
            typed: 0,
        }
    }

    /// Replaces the variables the register and stack rules ask.
    pub fn set_variables(&mut self, variables: Option<Box<dyn operand::Variables>>) {
        self.variables = variables;
        self.flows.clear();
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
        let flowed = self.flowed(vaddr);
        let a = operand::type_access(
            &mut self.layouts,
            &self.globals,
            self.variables.as_deref(),
            flowed,
            &ins,
        )?;
        self.typed += 1;
        Some(a)
    }

    /// What the flow pass over the function holding `vaddr` found for
    /// its memory operand (the pass runs once per function).
    fn flowed(&mut self, vaddr: u64) -> Option<operand::Flowed> {
        let (start, bytes) = self.code.function(vaddr)?;
        let seeds = FlowSeeds {
            layouts: &self.layouts,
            globals: &self.globals,
            vars: self.variables.as_deref(),
            names: &self.names,
        };
        let f = self
            .flows
            .entry(start)
            .or_insert_with(|| flow::Flow::run(bytes, start, &seeds));
        let o = f.operand(vaddr)?;
        Some(operand::Flowed {
            ty: o.at.ty,
            offset: u64::try_from(o.at.offset).ok()?,
            scale: o.scale,
            via: match o.at.origin {
                flow::Origin::Pointer => coldcache_dump::Via::Register,
                flow::Origin::Global => coldcache_dump::Via::Global,
                flow::Origin::Frame => coldcache_dump::Via::Stack,
            },
            variable: self
                .names
                .borrow()
                .list
                .get(o.at.var as usize)
                .cloned()
                .unwrap_or_default(),
        })
    }

    /// The local variable holding the stack byte `below` bytes under the
    /// CFA of a frame whose function is at file address `vaddr` (the
    /// accessing instruction, or the call the frame is making): its name,
    /// its type (index into [`ModuleTypes::types`]; an array's element
    /// type) and the byte's offset in it.
    pub fn type_slot(&mut self, vaddr: u64, below: u64) -> Option<(String, u32, u64)> {
        let v = self.variables.as_deref()?.frame_slot(vaddr, below)?;
        let ty = self.layouts.intern(v.ty)?;
        Some((v.name, ty, v.offset))
    }

    /// What the frame keeps in the stack byte `below` bytes under the CFA
    /// of a frame whose function is at file address `vaddr`, when it is
    /// no variable: `"[return address]"`, `"[saved rbx]"` (the call frame
    /// information's rules; at a `push` the rules after it, which save
    /// what it pushes), or `"[return address of a call]"` for the slot a
    /// `call` at `vaddr` pushes. `instruction`: `vaddr` starts an
    /// instruction (the accessing one; a frame's call site is inside its
    /// call, and only the rules are read there).
    pub fn frame_word(&self, vaddr: u64, below: u64, instruction: bool) -> Option<&'static str> {
        let vars = self.variables.as_deref()?;
        let named = |reg: u16| -> Option<&'static str> {
            const SAVED: [&str; 16] = [
                "[saved rax]",
                "[saved rdx]",
                "[saved rcx]",
                "[saved rbx]",
                "[saved rsi]",
                "[saved rdi]",
                "[saved rbp]",
                "[saved rsp]",
                "[saved r8]",
                "[saved r9]",
                "[saved r10]",
                "[saved r11]",
                "[saved r12]",
                "[saved r13]",
                "[saved r14]",
                "[saved r15]",
            ];
            match reg {
                16 => Some("[return address]"),
                r => SAVED.get(usize::from(r)).copied(),
            }
        };
        if let Some(r) = vars.saved_register(vaddr, below) {
            return named(r);
        }
        if !instruction {
            return None;
        }
        // The instruction at `vaddr`: a push saves what the rules after
        // it say; a call pushes its callee's return address at rsp - 8.
        let (start, bytes) = self.code.function(vaddr)?;
        let at = usize::try_from(vaddr - start).ok()?;
        let mut d =
            iced_x86::Decoder::with_ip(64, bytes.get(at..)?, vaddr, iced_x86::DecoderOptions::NONE);
        let ins = d.decode();
        match ins.mnemonic() {
            iced_x86::Mnemonic::Push => named(vars.saved_register(ins.next_ip(), below)?),
            // A call with no memory operand makes one access, its push;
            // a `call [mem]` also reads: its push is at rsp - 8, told
            // apart where the CFA is rsp-based.
            iced_x86::Mnemonic::Call
                if !(0..ins.op_count()).any(|k| ins.op_kind(k) == iced_x86::OpKind::Memory) =>
            {
                Some("[return address of a call]")
            }
            iced_x86::Mnemonic::Call => {
                let (reg, k) = vars.cfa_offset(vaddr)?;
                (reg == 7 && k.checked_add(8) == i64::try_from(below).ok())
                    .then_some("[return address of a call]")
            }
            _ => None,
        }
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
        } else if self.located == Some(0) && self.globals.all().is_empty() {
            // Line tables only: `-g1`, Cargo's `debug = 1` or
            // `"line-tables-only"`.
            s.push_str(
                " (its DWARF has no variables: built with line tables only, e.g. -g1 or Cargo's \
                 debug = 1; rebuild with -g or debug = 2 to type its accesses)",
            );
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
