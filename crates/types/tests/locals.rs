//! `locals::Locals` against the source it was compiled from
//! (tests-programs/data/locals.c): gcc builds it with -g at -O2 and -O0
//! (DWARF 5, and DWARF 4 for `.debug_loc`); instructions are found by the
//! symbol table and by decoding with iced-x86, never by address; the
//! variable and type each lookup returns must be what the source says.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use coldcache_types::locals::Locals;
use coldcache_types::operand::Variables;
use coldcache_types::{Reader, TypeRef};
use gimli::Reader as _;
use iced_x86::{Decoder, DecoderOptions, Instruction, MemorySize, OpKind, Register};
use object::{Object, ObjectSection, ObjectSymbol};

/// The workspace's root (two levels above this crate).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compiles a test program with gcc (g++ for .cc) and the given flags in
/// a fresh directory and loads it (the directory is removed then).
fn compile(src: &str, flags: &[&str], tag: &str) -> Program {
    let dir = std::env::temp_dir().join(format!(
        "coldcache-types-locals-{}-{tag}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("prog");
    let cc = if src.ends_with(".cc") || src.ends_with(".cpp") {
        "g++"
    } else {
        "gcc"
    };
    let status = Command::new(cc)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(root().join(src))
        .status()
        .expect("the compiler runs");
    assert!(status.success(), "{cc} {flags:?} {src} failed");
    let p = Program::load(&out);
    std::fs::remove_dir_all(&dir).unwrap();
    p
}

/// A compiled program: its bytes, its DWARF and its variables.
struct Program {
    data: Vec<u8>,
    dwarf: gimli::Dwarf<Reader>,
    locals: Locals,
}

impl Program {
    fn load(path: &Path) -> Program {
        let data = std::fs::read(path).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let dwarf = load_dwarf(&obj);
        let locals = Locals::read(&dwarf, &obj).unwrap();
        assert_eq!(locals.skipped, 0, "nothing unreadable in gcc's DWARF");
        Program {
            data,
            dwarf,
            locals,
        }
    }

    fn obj(&self) -> object::File<'_> {
        object::File::parse(&*self.data).unwrap()
    }

    /// The instructions of function `name` (by its symbol), decoded.
    fn function(&self, name: &str) -> Vec<Instruction> {
        let obj = self.obj();
        let sym = obj
            .symbols()
            .find(|s| s.name() == Ok(name))
            .unwrap_or_else(|| panic!("no symbol {name}"));
        let (addr, size) = (sym.address(), sym.size());
        assert!(size > 0, "{name} has a size");
        let sec = obj
            .sections()
            .find(|s| s.address() <= addr && addr + size <= s.address() + s.size())
            .unwrap();
        let bytes = sec.data().unwrap();
        let start = (addr - sec.address()) as usize;
        let code = &bytes[start..start + size as usize];
        let mut dec = Decoder::with_ip(64, code, addr, DecoderOptions::NONE);
        let mut out = Vec::new();
        while dec.can_decode() {
            out.push(dec.decode());
        }
        out
    }

    /// `ty` through cv-qualifiers (typedefs kept).
    fn peel(&self, ty: TypeRef) -> TypeRef {
        let mut ty = ty;
        for _ in 0..8 {
            let (unit, off) = unit_of(&self.dwarf, ty);
            let e = unit.entry(off).unwrap();
            if !matches!(
                e.tag(),
                gimli::DW_TAG_const_type | gimli::DW_TAG_volatile_type
            ) {
                return ty;
            }
            match e.attr_value(gimli::DW_AT_type).unwrap() {
                Some(gimli::AttributeValue::UnitRef(o)) => {
                    ty = o.to_debug_info_offset(&unit.header).unwrap()
                }
                other => panic!("qualifier of {other:?}"),
            }
        }
        panic!("qualifier chain too long")
    }

    /// The tag and name of the type at `ty`, through cv-qualifiers
    /// (typedefs kept: their name is the type's name).
    fn type_name(&self, ty: TypeRef) -> (gimli::DwTag, String) {
        let (unit, off) = unit_of(&self.dwarf, self.peel(ty));
        let e = unit.entry(off).unwrap();
        let name = match e.attr_value(gimli::DW_AT_name).unwrap() {
            Some(v) => self
                .dwarf
                .attr_string(&unit, v)
                .unwrap()
                .to_string_lossy()
                .unwrap()
                .into_owned(),
            None => String::new(),
        };
        (e.tag(), name)
    }

    /// The type `ty` points to, when it is a pointer type.
    fn pointee(&self, ty: TypeRef) -> Option<TypeRef> {
        let (unit, off) = unit_of(&self.dwarf, ty);
        let e = unit.entry(off).unwrap();
        if e.tag() != gimli::DW_TAG_pointer_type {
            return None;
        }
        match e.attr_value(gimli::DW_AT_type).unwrap() {
            Some(gimli::AttributeValue::UnitRef(o)) => o.to_debug_info_offset(&unit.header),
            _ => None,
        }
    }

    /// The unit and `DW_AT_location` of the parameter or variable `var`
    /// of subprogram `func` (the first DIE of that name below it).
    fn location_attr(
        &self,
        func: &str,
        var: &str,
    ) -> (gimli::Unit<Reader>, gimli::AttributeValue<Reader>) {
        let mut units = self.dwarf.units();
        while let Some(h) = units.next().unwrap() {
            let unit = self.dwarf.unit(h).unwrap();
            let mut cursor = unit.entries();
            let mut in_func: Option<isize> = None;
            let mut depth = 0isize;
            let mut found = None;
            while let Some((delta, e)) = cursor.next_dfs().unwrap() {
                depth += delta;
                if in_func.is_some_and(|d| depth <= d) {
                    in_func = None;
                }
                let name = match e.attr_value(gimli::DW_AT_name).unwrap() {
                    Some(v) => self
                        .dwarf
                        .attr_string(&unit, v)
                        .ok()
                        .map(|s| s.to_string_lossy().unwrap().into_owned()),
                    None => None,
                };
                if e.tag() == gimli::DW_TAG_subprogram && name.as_deref() == Some(func) {
                    in_func = Some(depth);
                } else if in_func.is_some() && name.as_deref() == Some(var) {
                    found = Some(e.attr_value(gimli::DW_AT_location).unwrap().unwrap());
                    break;
                }
            }
            if let Some(v) = found {
                return (unit, v);
            }
        }
        panic!("no {var} in {func}")
    }

    /// Independently of `Locals`: the register N when `var` of `func` is
    /// exactly DW_OP_regN at `pc` (a single expression counts as valid
    /// throughout the function).
    fn reg_at(&self, func: &str, var: &str, pc: u64) -> Option<u16> {
        let (unit, attr) = self.location_attr(func, var);
        let as_reg = |e: gimli::Expression<Reader>| {
            let mut ops = e.operations(unit.encoding());
            match (ops.next().unwrap(), ops.next().unwrap()) {
                (Some(gimli::Operation::Register { register }), None) => Some(register.0),
                _ => None,
            }
        };
        if let gimli::AttributeValue::Exprloc(e) = attr {
            return as_reg(e);
        }
        let mut list = self.dwarf.attr_locations(&unit, attr).unwrap().unwrap();
        while let Some(e) = list.next().unwrap() {
            if e.range.begin <= pc && pc < e.range.end {
                return as_reg(e.data);
            }
        }
        None
    }
}

fn load_dwarf(obj: &object::File) -> gimli::Dwarf<Reader> {
    let endian = gimli::RunTimeEndian::Little;
    gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
        let data = obj
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or_default();
        Ok(Reader::new(Rc::from(&*data), endian))
    })
    .unwrap()
}

/// The unit holding a `.debug_info` offset, and the offset inside it.
fn unit_of(dwarf: &gimli::Dwarf<Reader>, off: TypeRef) -> (gimli::Unit<Reader>, gimli::UnitOffset) {
    let mut units = dwarf.units();
    while let Some(h) = units.next().unwrap() {
        if let Some(o) = off.to_unit_offset(&h) {
            return (dwarf.unit(h).unwrap(), o);
        }
    }
    panic!("no unit holds {off:?}")
}

/// DWARF's number of a 64-bit general register.
fn dwarf_reg(r: Register) -> Option<u16> {
    Some(match r {
        Register::RAX => 0,
        Register::RDX => 1,
        Register::RCX => 2,
        Register::RBX => 3,
        Register::RSI => 4,
        Register::RDI => 5,
        Register::RBP => 6,
        Register::RSP => 7,
        Register::R8 => 8,
        Register::R9 => 9,
        Register::R10 => 10,
        Register::R11 => 11,
        Register::R12 => 12,
        Register::R13 => 13,
        Register::R14 => 14,
        Register::R15 => 15,
        _ => return None,
    })
}

/// Bytes accessed, for the operand sizes this program's code uses.
fn access_size(m: MemorySize) -> Option<u32> {
    Some(match m {
        MemorySize::UInt8 | MemorySize::Int8 => 1,
        MemorySize::UInt16 | MemorySize::Int16 => 2,
        MemorySize::UInt32 | MemorySize::Int32 | MemorySize::Float32 => 4,
        MemorySize::UInt64 | MemorySize::Int64 | MemorySize::Float64 => 8,
        MemorySize::UInt128 | MemorySize::Packed128_Int32 | MemorySize::Packed128_UInt32 => 16,
        MemorySize::Packed128_Float32 | MemorySize::Packed128_Float64 => 16,
        _ => return None,
    })
}

/// A memory operand: (pc, base register, index register, displacement,
/// bytes accessed).
struct Mem {
    pc: u64,
    base: Option<u16>,
    index: Option<u16>,
    disp: i64,
    size: Option<u32>,
}

/// The memory operands of the instructions that access memory (not `lea`,
/// not `nop`).
fn mem_operands(code: &[Instruction]) -> Vec<Mem> {
    code.iter()
        .filter(|i| {
            (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory)
                && !matches!(
                    i.mnemonic(),
                    iced_x86::Mnemonic::Lea | iced_x86::Mnemonic::Nop
                )
        })
        .map(|i| Mem {
            pc: i.ip(),
            base: dwarf_reg(i.memory_base()),
            index: dwarf_reg(i.memory_index()),
            disp: i.memory_displacement64() as i64,
            size: access_size(i.memory_size()),
        })
        .collect()
}

const SRC: &str = "tests-programs/data/locals.c";
/// offsetof(struct Entity, flags), asserted in the source.
const FLAGS: i64 = 160;

/// Asserts that `v` is the variable `name` pointing to `struct Entity`
/// (through const, as the source declares it).
fn assert_points_to_entity(
    p: &Program,
    v: Option<coldcache_types::operand::Variable>,
    name: &str,
    at: &str,
) {
    let v = v.unwrap_or_else(|| panic!("{at}: no pointer variable"));
    assert_eq!(v.name, name, "{at}");
    assert_eq!(v.offset, 0, "{at}");
    assert_eq!(
        p.type_name(v.ty),
        (gimli::DW_TAG_structure_type, "Entity".to_string()),
        "{at}"
    );
}

/// The accesses to `flags` (displacement 160, 2 bytes) in a function.
fn flag_reads(p: &Program, func: &str) -> Vec<Mem> {
    let m: Vec<Mem> = mem_operands(&p.function(func))
        .into_iter()
        .filter(|m| m.disp == FLAGS && m.size == Some(2) && m.index.is_none())
        .collect();
    assert!(!m.is_empty(), "{func} reads flags");
    m
}

#[test]
fn pointer_parameter_at_first_instruction() {
    for (flags, tag) in [
        (&["-g", "-O2"][..], "o2"),
        (&["-g", "-O2", "-gdwarf-4"][..], "o2d4"),
    ] {
        let p = compile(SRC, flags, &format!("first-{tag}"));
        let code = p.function("flags_of");
        let first = &code[0];
        // The source: `return e->flags;` is the first thing it does.
        let m = &mem_operands(&code[..1])[0];
        assert_eq!(
            (m.base, m.disp),
            (Some(5), FLAGS),
            "{tag}: e->flags through rdi"
        );
        assert_points_to_entity(&p, p.locals.pointer_in_register(first.ip(), 5), "e", tag);
        // No pointer variable lives in another register there.
        for reg in [0u16, 1, 2, 3, 4, 8] {
            assert_eq!(
                p.locals.pointer_in_register(first.ip(), reg),
                None,
                "{tag}: reg {reg}"
            );
        }
        // Outside any function that has e, nothing.
        let main_first = p.function("main")[0].ip();
        assert_eq!(
            p.locals.pointer_in_register(main_first, 5).map(|v| v.name),
            None,
            "{tag}"
        );
    }
}

#[test]
fn loop_over_an_array_of_structs() {
    let p = compile(SRC, &["-g", "-O2"], "loop");
    for m in flag_reads(&p, "count_active") {
        let reg = m.base.expect("a base register");
        // `p` (the loop's pointer, the inner scope) holds the element.
        assert_points_to_entity(
            &p,
            p.locals.pointer_in_register(m.pc, reg),
            "p",
            "count_active",
        );
    }
}

#[test]
fn inlined_parameter_wins_over_the_caller() {
    let p = compile(SRC, &["-g", "-O2"], "inline");
    let reads = flag_reads(&p, "twice_touched");
    // At the first read both the caller's `a` and the inlined touch's `x`
    // are in the register: `x`, the inner scope, named through its
    // abstract origin, wins.
    let first = &reads[0];
    assert_eq!(
        p.reg_at("twice_touched", "a", first.pc),
        first.base,
        "a is there too"
    );
    assert_points_to_entity(
        &p,
        p.locals.pointer_in_register(first.pc, first.base.unwrap()),
        "x",
        "first read",
    );
    for m in &reads[1..] {
        // Later, gcc may describe only the caller's `a` there.
        if let Some(v) = p.locals.pointer_in_register(m.pc, m.base.unwrap()) {
            assert!(v.name == "x" || v.name == "a", "{}", v.name);
            assert_points_to_entity(&p, Some(v.clone()), &v.name, "later read");
        }
    }
}

#[test]
fn pointer_to_pointers() {
    let p = compile(SRC, &["-g", "-O2"], "ptrptr");
    // The load of *q: q points to `struct Entity *const`.
    let code = p.function("any_active");
    let loads: Vec<Mem> = mem_operands(&code)
        .into_iter()
        .filter(|m| m.disp == 0 && m.size == Some(8) && m.index.is_none())
        .collect();
    assert!(!loads.is_empty(), "any_active loads *q");
    for m in loads {
        let v = p
            .locals
            .pointer_in_register(m.pc, m.base.unwrap())
            .expect("q");
        assert_eq!(v.name, "q");
        let (tag, _) = p.type_name(v.ty);
        assert_eq!(tag, gimli::DW_TAG_pointer_type, "q's pointee is a pointer");
        let inner = p.pointee(p.peel(v.ty)).expect("pointer to something");
        assert_eq!(
            p.type_name(inner),
            (gimli::DW_TAG_structure_type, "Entity".to_string())
        );
    }
}

#[test]
fn pointer_moving_between_registers_has_a_location_list() {
    for (flags, tag) in [
        (&["-g", "-O2"][..], "o2"),
        (&["-g", "-O2", "-gdwarf-4"][..], "o2d4"),
    ] {
        let p = compile(SRC, flags, &format!("moves-{tag}"));
        assert!(
            matches!(
                p.location_attr("visit", "e").1,
                gimli::AttributeValue::LocationListsRef(_)
                    | gimli::AttributeValue::DebugLocListsIndex(_)
            ),
            "{tag}: e's location is a list"
        );
        let reads = flag_reads(&p, "visit");
        let regs: Vec<u16> = reads.iter().map(|m| m.base.unwrap()).collect();
        assert!(
            regs.len() >= 2 && regs[0] != regs[regs.len() - 1],
            "{tag}: e moved ({regs:?})"
        );
        for m in &reads {
            let reg = m.base.unwrap();
            assert_points_to_entity(&p, p.locals.pointer_in_register(m.pc, reg), "e", tag);
        }
        // Before the move, the later register does not hold e yet.
        let (first, last) = (&reads[0], &reads[reads.len() - 1]);
        assert_eq!(
            p.locals.pointer_in_register(first.pc, last.base.unwrap()),
            None,
            "{tag}"
        );
    }
}

#[test]
fn same_depth_disagreeing_types_give_no_answer() {
    let p = compile(SRC, &["-g", "-O2"], "punned");
    let code = p.function("punned");
    let reads: Vec<Mem> = mem_operands(&code)
        .into_iter()
        .filter(|m| (m.disp == FLAGS || m.disp == FLAGS + 2) && m.size == Some(2))
        .collect();
    assert_eq!(reads.len(), 2, "o->more[79] and e->flags");
    for m in &reads {
        let reg = m.base.unwrap();
        // The DWARF has both e (struct Entity *) and o (struct Other *) in
        // that register there, both at the function's level.
        assert_eq!(p.reg_at("punned", "e", m.pc), Some(reg));
        assert_eq!(p.reg_at("punned", "o", m.pc), Some(reg));
        assert_eq!(
            p.locals.pointer_in_register(m.pc, reg),
            None,
            "ambiguous: no guess"
        );
    }
    // Two names that agree on the type (const aside) give it.
    let reads = flag_reads(&p, "aliased");
    for m in &reads {
        let reg = m.base.unwrap();
        assert_eq!(p.reg_at("aliased", "e", m.pc), Some(reg));
        assert_eq!(p.reg_at("aliased", "c", m.pc), Some(reg));
        let v = p.locals.pointer_in_register(m.pc, reg).expect("e or c");
        assert!(v.name == "e" || v.name == "c", "{}", v.name);
        assert_points_to_entity(&p, Some(v.clone()), &v.name, "aliased");
    }
}

/// The stack variables of stack_user: each rsp/rbp access that has a
/// known size must fall in `k`, `local`, `arr` or `i`, and the ones the
/// source pins down must say so.
fn check_stack_user(p: &Program, base: u16, tag: &str) {
    let code = p.function("stack_user");
    let ops: Vec<Mem> = mem_operands(&code)
        .into_iter()
        .filter(|m| m.base == Some(base) && m.index.is_none() && m.size.is_some())
        .collect();
    assert!(!ops.is_empty(), "{tag}: stack accesses");
    let mut saw_flags = false;
    let mut saw_arr3 = false;
    for m in &ops {
        let size = m.size.unwrap();
        let Some(v) = p.locals.stack_variable(m.pc, base, m.disp, size) else {
            continue; // saved registers, the return address's neighbours
        };
        let (tag_, name) = p.type_name(v.ty);
        match v.name.as_str() {
            "local" => {
                assert_eq!(
                    (tag_, name.as_str()),
                    (gimli::DW_TAG_structure_type, "Entity"),
                    "{tag}"
                );
                assert!(v.offset + u64::from(size) <= 192, "{tag}");
                if size == 2 {
                    assert_eq!(v.offset, FLAGS as u64, "{tag}: local.flags");
                    saw_flags = true;
                }
            }
            "arr" => {
                assert_eq!(tag_, gimli::DW_TAG_array_type, "{tag}");
                assert!(v.offset + u64::from(size) <= 32, "{tag}");
                if v.offset == 12 && size == 4 {
                    saw_arr3 = true;
                }
            }
            "k" | "i" => {
                assert_eq!(
                    (tag_, name.as_str()),
                    (gimli::DW_TAG_base_type, "int"),
                    "{tag}"
                );
                assert_eq!((v.offset, size), (0, 4), "{tag}");
            }
            other => panic!("{tag}: unexpected variable {other}"),
        }
    }
    assert!(
        saw_flags,
        "{tag}: the store to local.flags is found in local at 160"
    );
    assert!(saw_arr3, "{tag}: the read of arr[3] is found in arr at 12");
}

#[test]
fn stack_variables_via_rbp_at_o0() {
    let p = compile(SRC, &["-g", "-O0"], "stack-o0");
    check_stack_user(&p, 6, "O0");
    // The parameter spilled at -O0: `mov [rbp-N], edi` is k.
    let code = p.function("stack_user");
    let spill = mem_operands(&code)
        .into_iter()
        .find(|m| m.base == Some(6) && m.size == Some(4))
        .expect("k spilled");
    let v = p
        .locals
        .stack_variable(spill.pc, 6, spill.disp, 4)
        .expect("k");
    assert_eq!((v.name.as_str(), v.offset), ("k", 0));
    // One byte beyond the frame's variables: nothing.
    assert_eq!(p.locals.stack_variable(spill.pc, 6, 64, 4), None);
}

#[test]
fn stack_variables_via_rsp_at_o2() {
    for (flags, tag) in [
        (&["-g", "-O2"][..], "o2"),
        (&["-g", "-O2", "-gdwarf-4"][..], "o2d4"),
    ] {
        let p = compile(SRC, flags, &format!("stack-{tag}"));
        check_stack_user(&p, 7, tag);
    }
}

#[test]
fn stack_variables_with_cfi_in_debug_frame_only() {
    let flags = [
        "-g",
        "-O2",
        "-fno-asynchronous-unwind-tables",
        "-fno-unwind-tables",
    ];
    let p = compile(SRC, &flags, "stack-debug-frame");
    assert!(
        p.obj().section_by_name(".debug_frame").is_some(),
        "CFI in .debug_frame"
    );
    check_stack_user(&p, 7, "o2 .debug_frame");
}

/// A frame's stack byte by its distance below the CFA, at an instruction
/// and at the call the frame is making (what the capture keeps for the
/// frames of callers): with a frame pointer the CFA is rbp + 16 over the
/// whole body (`push %rbp; mov %rsp,%rbp`), so the operand `disp(%rbp)`
/// is `16 - disp` below the CFA and must name the variable the operand
/// names; the return address (8 below) and above the CFA name none.
#[test]
fn frame_slots_by_distance_below_the_cfa() {
    for (flags, tag) in [
        (&["-g", "-O0"][..], "slot-o0"),
        (&["-g", "-O2", "-fno-omit-frame-pointer"][..], "slot-fp"),
    ] {
        let p = compile(SRC, flags, tag);
        let code = p.function("stack_user");
        let call = code
            .iter()
            .find(|i| i.mnemonic() == iced_x86::Mnemonic::Call)
            .expect("stack_user calls consume")
            .ip();
        let mut named = 0;
        for m in mem_operands(&code)
            .into_iter()
            .filter(|m| m.base == Some(6) && m.index.is_none() && m.size.is_some())
        {
            let Some(v) = p.locals.stack_variable(m.pc, 6, m.disp, 1) else {
                continue;
            };
            let below = u64::try_from(16 - m.disp).expect("below the CFA");
            for pc in [m.pc, call] {
                // `i` lives in the loop only; the others over the body.
                if pc == call && v.name == "i" {
                    continue;
                }
                let s = p.locals.frame_slot(pc, below);
                assert_eq!(
                    s.as_ref().map(|s| (s.name.as_str(), s.offset)),
                    Some((v.name.as_str(), v.offset)),
                    "{tag}: {below} below the CFA at {pc:#x}"
                );
            }
            if v.name == "arr" || v.name == "local" {
                named += 1;
            }
        }
        assert!(named >= 2, "{tag}: arr and local seen through rbp");
        for below in [8, 0] {
            assert_eq!(p.locals.frame_slot(call, below), None, "{tag}: {below}");
        }
        // The frame's own words at the call, by the CFI: the return
        // address (DWARF register 16) 1..=8 below the CFA, the caller's
        // rbp pushed by the prologue 9..=16 below; none at the CFA.
        for (below, reg) in [
            (1, Some(16)),
            (8, Some(16)),
            (9, Some(6)),
            (16, Some(6)),
            (0, None),
        ] {
            assert_eq!(p.locals.saved_register(call, below), reg, "{tag}: {below}");
        }
    }
}

#[test]
fn stack_variables_via_rbp_with_frame_pointer_at_o2() {
    let p = compile(SRC, &["-g", "-O2", "-fno-omit-frame-pointer"], "stack-fp");
    check_stack_user(&p, 6, "o2 frame pointer");
}

#[test]
fn cpp_this_and_reference() {
    let p = compile("tests-programs/data/locals.cc", &["-g", "-O2"], "cpp");
    for (func, var) in [
        ("_ZNK4game6Entity6activeEv", "this"),
        ("_ZN4game12flags_by_refERKNS_6EntityE", "r"),
    ] {
        for m in flag_reads(&p, func) {
            // `this` is `const game::Entity *const`, r `const game::Entity &`.
            assert_points_to_entity(
                &p,
                p.locals.pointer_in_register(m.pc, m.base.unwrap()),
                var,
                func,
            );
        }
    }
}

/// The resident set size of this process, from /proc (kB).
fn rss_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Time and memory to read a big library's variables, and to look up
/// every memory operand of its code (run by hand:
/// `cargo test --release -p coldcache-types --test locals big -- --ignored --nocapture`;
/// COLDCACHE_BIG_ELF names the file, libpython 3.11 by default).
#[test]
#[ignore]
fn big_library_read_and_lookups() {
    let path = std::env::var("COLDCACHE_BIG_ELF")
        .unwrap_or_else(|_| "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0".into());
    let Ok(data) = std::fs::read(&path) else {
        eprintln!("{path} not present");
        return;
    };
    let obj = object::File::parse(&*data).unwrap();
    let before = rss_kb("VmRSS:");
    let t = std::time::Instant::now();
    let dwarf = load_dwarf(&obj);
    let locals = Locals::read(&dwarf, &obj).unwrap();
    let read = t.elapsed();
    let after = rss_kb("VmRSS:");
    eprintln!(
        "{path}: read in {:.2?}, RSS +{} MB (peak {} MB), {} variables, {} skipped",
        read,
        (after.saturating_sub(before)) / 1024,
        rss_kb("VmHWM:") / 1024,
        locals.variables,
        locals.skipped
    );
    assert!(
        locals.variables > 0,
        "{path}: no variable locations (line tables only?)"
    );
    // Every memory operand of .text, looked up as the operand rules would.
    let text = obj.section_by_name(".text").unwrap();
    let code = text.data().unwrap();
    let mut dec = Decoder::with_ip(64, code, text.address(), DecoderOptions::NONE);
    let ops: Vec<Mem> = {
        let mut v = Vec::new();
        while dec.can_decode() {
            let i = dec.decode();
            v.extend(mem_operands(std::slice::from_ref(&i)));
        }
        v
    };
    let t = std::time::Instant::now();
    let (mut ptr, mut stack) = (0u64, 0u64);
    for m in &ops {
        match m.base {
            Some(r @ (6 | 7)) => {
                stack += u64::from(
                    locals
                        .stack_variable(m.pc, r, m.disp, m.size.unwrap_or(1))
                        .is_some(),
                );
            }
            Some(r) => ptr += u64::from(locals.pointer_in_register(m.pc, r).is_some()),
            None => {}
        }
    }
    eprintln!(
        "{} memory operands looked up in {:.2?}: {} through a pointer variable, {} in a stack variable",
        ops.len(),
        t.elapsed(),
        ptr,
        stack
    );
}

/// g++ -O2 moves `e` to its `flags` member before `cull`'s loop (`add
/// $0xa0,%rdi`) and says so with `DW_OP_breg5 -160; DW_OP_stack_value`:
/// `pointer_seed` gives `e` with the register 160 bytes on; the plain
/// lookup (a whole register only) gives nothing there.
#[test]
fn a_pointer_moved_by_a_constant_is_a_seed_with_its_offset() {
    let p = compile(
        "tests-programs/data/entities.cpp",
        &["-g", "-O2"],
        "entities",
    );
    let code = p.function("_ZN4game4cullEPKNS_6EntityEi");
    let add = code
        .iter()
        .position(|i| {
            i.mnemonic() == iced_x86::Mnemonic::Add
                && i.op0_register() == Register::RDI
                && i.op_count() == 2
                && i.op1_kind() != OpKind::Register
                && i.immediate(1) == 160
        })
        .expect("g++ -O2's cull adds 160 to rdi before its loop");
    let after = code[add + 1].ip();
    let (v, off) = p
        .locals
        .pointer_seed(after, 5)
        .expect("e, moved by 160, in rdi");
    assert_eq!(off, 160);
    assert_eq!(v.name, "e");
    assert_eq!(
        p.type_name(v.ty),
        (gimli::DW_TAG_structure_type, "Entity".to_string())
    );
    assert!(p.locals.pointer_in_register(after, 5).is_none());
    // At the entry it is the register itself.
    let (v, off) = p.locals.pointer_seed(code[0].ip(), 5).unwrap();
    assert_eq!((v.name.as_str(), off), ("e", 0));
}

/// rustc passes a slice `&mut [Particle]` as two pieces (rdi: data_ptr,
/// rsi: length, or a constant): the first piece is a pointer to Particle.
#[test]
fn a_rust_slices_data_pointer_piece_is_a_pointer_to_its_elements() {
    let dir = std::env::temp_dir().join(format!("coldcache-types-slice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("particles");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let status = Command::new(&rustc)
        .args(["-O", "-g", "-o"])
        .arg(&out)
        .arg(root().join("tests-programs/data/particles.rs"))
        .status()
        .expect("rustc runs");
    assert!(status.success());
    let p = Program::load(&out);
    std::fs::remove_dir_all(&dir).unwrap();
    let obj = p.obj();
    let step = obj
        .symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains("9particles4step")))
        .expect("particles::step");
    let (v, off) = p
        .locals
        .pointer_seed(step.address(), 5)
        .expect("ps's data_ptr in rdi");
    assert_eq!((v.name.as_str(), off), ("ps", 0));
    assert_eq!(
        p.type_name(v.ty),
        (gimli::DW_TAG_structure_type, "Particle".to_string())
    );
}
