//! Layouts and the globals rule against hand-computed truth:
//! `tests-programs/data/layouts.cpp` built with g++ (`-g -O2` PIE, `-O0`,
//! `-O2 -fno-pie -no-pie`, and `-gdwarf-2 -gstrict-dwarf` for the old
//! bit-field form). Each layout is asserted member by member; each probe
//! function's rip-relative (or absolute) load is typed to the field the
//! source reads. The register and stack rules, with a fake `Variables`,
//! are in `operand.rs`.

mod common;

use coldcache_dump::data::NO_TYPE;
use coldcache_dump::{DataType, DataTypes, TypeKind, Via};
use coldcache_types::ModuleTypes;
use common::{build, build_sources, find_type, function_accesses, types_of};

/// (name, offset, size, bit offset, bit size, type as written, count,
/// base, name of the member's own layout or "").
type M = (
    &'static str,
    u64,
    u64,
    u32,
    u32,
    &'static str,
    u64,
    bool,
    &'static str,
);

fn check(types: &[DataType], name: &str, kind: TypeKind, size: u64, want: &[M]) {
    let t = find_type(types, name);
    assert_eq!(t.kind, kind, "{name}: kind");
    assert_eq!(t.size, size, "{name}: size");
    assert!(t.decl.contains("layouts.cpp:"), "{name}: decl {}", t.decl);
    let got: Vec<M> = t
        .members
        .iter()
        .map(|m| {
            let sub = if m.ty == NO_TYPE {
                ""
            } else {
                types[m.ty as usize].name.as_str()
            };
            (
                leak(&m.name),
                m.offset,
                m.size,
                m.bit_offset,
                m.bit_size,
                leak(&m.type_name),
                m.count,
                m.base,
                leak(sub),
            )
        })
        .collect();
    assert_eq!(got, want, "{name}: members");
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// `ns`: the namespace prefix of `game`'s types (strict DWARF 2 has no
/// namespaces).
fn check_layouts(types: &[DataType], ns: &str) {
    let vec3 = leak(&format!("{ns}Vec3"));
    check(
        types,
        &format!("{ns}Entity"),
        TypeKind::Struct,
        192,
        &[
            ("pos", 0, 12, 0, 0, vec3, 0, false, vec3),
            ("vel", 12, 12, 0, 0, vec3, 0, false, vec3),
            ("id", 24, 8, 0, 0, "uint64_t", 0, false, ""),
            ("name", 32, 128, 0, 0, "char[128]", 128, false, ""),
            ("flags", 160, 2, 0, 0, "uint16_t", 0, false, ""),
            ("spare", 162, 30, 0, 0, "uint8_t[30]", 30, false, ""),
        ],
    );
    check(
        types,
        vec3,
        TypeKind::Struct,
        12,
        &[
            ("x", 0, 4, 0, 0, "float", 0, false, ""),
            ("y", 4, 4, 0, 0, "float", 0, false, ""),
            ("z", 8, 4, 0, 0, "float", 0, false, ""),
        ],
    );
    check(
        types,
        "Emitter",
        TypeKind::Struct,
        80,
        &[
            ("count", 0, 4, 0, 0, "int", 0, false, ""),
            ("parts", 4, 64, 0, 0, "Particle[4]", 4, false, "Particle"),
            ("origin", 68, 12, 0, 0, vec3, 0, false, vec3),
        ],
    );
    check(
        types,
        "Particle",
        TypeKind::Struct,
        16,
        &[
            ("p", 0, 12, 0, 0, "float[3]", 3, false, ""),
            ("life", 12, 4, 0, 0, "int", 0, false, ""),
        ],
    );
    check(
        types,
        "Derived",
        TypeKind::Struct,
        24,
        &[
            ("Base", 0, 8, 0, 0, "Base", 0, true, "Base"),
            ("weight", 8, 8, 0, 0, "double", 0, false, ""),
            ("tags", 16, 8, 0, 0, "int[2]", 2, false, ""),
        ],
    );
    check(
        types,
        "Base",
        TypeKind::Struct,
        8,
        &[
            ("id", 0, 4, 0, 0, "int", 0, false, ""),
            ("kind", 4, 2, 0, 0, "short int", 0, false, ""),
        ],
    );
    check(
        types,
        "Value",
        TypeKind::Union,
        8,
        &[
            ("i", 0, 4, 0, 0, "int32_t", 0, false, ""),
            ("d", 0, 8, 0, 0, "double", 0, false, ""),
            ("bytes", 0, 8, 0, 0, "char[8]", 8, false, ""),
        ],
    );
    // a: bits 0-2; b: bits 3-9 (bytes 0-1); c: bits 10-19 (byte 1 bit 2,
    // bytes 1-2); tail: byte 3.
    check(
        types,
        "Flags",
        TypeKind::Struct,
        4,
        &[
            ("a", 0, 1, 0, 3, "unsigned int", 0, false, ""),
            ("b", 0, 2, 3, 7, "unsigned int", 0, false, ""),
            ("c", 1, 2, 2, 10, "unsigned int", 0, false, ""),
            ("tail", 3, 1, 0, 0, "unsigned char", 0, false, ""),
        ],
    );
    check(
        types,
        "Tagged",
        TypeKind::Struct,
        8,
        &[
            ("kind", 0, 4, 0, 0, "int", 0, false, ""),
            (
                "",
                4,
                4,
                0,
                0,
                "<anonymous union>",
                0,
                false,
                "<anonymous union>",
            ),
        ],
    );
    check(
        types,
        "<anonymous union>",
        TypeKind::Union,
        4,
        &[
            ("f", 0, 4, 0, 0, "float", 0, false, ""),
            ("n", 0, 4, 0, 0, "int", 0, false, ""),
        ],
    );
}

#[test]
fn layouts_member_by_member_dwarf5_and_dwarf2_bit_offsets() {
    let Some(new) = build("layouts-o2", &["-g", "-O2"]) else {
        return;
    };
    let types = types_of(&new);
    check_layouts(&types, "game::");
    // gcc's -gdwarf-2 -gstrict-dwarf writes DW_AT_bit_offset (from the
    // storage unit's high end) and DW_OP_plus_uconst member locations, and
    // no namespaces (a DWARF 3 tag).
    let Some(old) = build("layouts-dwarf2", &["-gdwarf-2", "-gstrict-dwarf", "-O2"]) else {
        return;
    };
    let old_types = types_of(&old);
    check_layouts(&old_types, "");
}

/// The probe functions and the field each one's load reads.
const PROBES: &[(&str, &str, u64, &str)] = &[
    ("read_flag5", "game::Entity::flags", 160, "entities"),
    ("read_part", "Emitter::parts.p", 40, "emitter"),
    ("read_origin_y", "Emitter::origin.y", 72, "emitter"),
    ("read_weight", "Derived::weight", 8, "derived"),
    ("read_base_kind", "Derived::Base.kind", 4, "derived"),
    ("read_value_d", "Value::d", 0, "value"),
    ("read_value_i", "Value::i", 0, "value"),
    ("read_tagged_f", "Tagged::<anonymous>.f", 4, "tagged"),
    ("read_flags_tail", "Flags::tail", 3, "flags_g"),
    ("read_lock_count", "Lock::count", 4, "lock_g"),
];

fn check_probes(name: &str, flags: &[&str], table_typed: bool) {
    let Some(bin) = build(name, flags) else {
        return;
    };
    for &(f, field, offset, var) in PROBES {
        let (types, accesses) = function_accesses(&bin, f);
        assert_eq!(
            accesses.len(),
            1,
            "{name} {f}: one typed access: {accesses:?}"
        );
        let a = &accesses[0];
        let d = DataTypes {
            types,
            accesses: accesses.clone(),
            modules: Vec::new(),
            slots: Vec::new(),
        };
        assert_eq!(d.field_name(a), field, "{name} {f}");
        assert_eq!(a.offset, offset, "{name} {f}: offset");
        assert_eq!(a.via, Via::Global, "{name} {f}");
        assert_eq!(a.variable, var, "{name} {f}");
        assert!(!a.straddles, "{name} {f}");
    }
    // table[i].life: `lea table(%rip)` then a base register (PIE: the
    // flow pass carries the global's element type from the `lea`), or
    // `table+12(%rdi)` (non-PIE: rdi holds i * 16, and the displacement is
    // inside a global array). At -O0 the loads of `i` from the frame are
    // typed too (stack): the table's is the one through `table`.
    let (types, accesses) = function_accesses(&bin, "read_table_life");
    let a = accesses
        .iter()
        .find(|a| a.variable == "table")
        .unwrap_or_else(|| panic!("{name}: table[i].life typed: {accesses:?}"));
    let d = DataTypes {
        types,
        accesses: accesses.clone(),
        modules: Vec::new(),
        slots: Vec::new(),
    };
    assert_eq!(d.field_name(a), "Particle::life");
    assert_eq!(a.offset, 12);
    // counts[i]: `counts(,%rdi,4)` without PIE, `lea counts(%rip)` then
    // `(%rax,%rdi,4)` with it: an index of one element.
    let (types, accesses) = function_accesses(&bin, "read_count");
    let a = accesses
        .iter()
        .find(|a| a.variable == "counts")
        .unwrap_or_else(|| panic!("{name}: counts[i] typed: {accesses:?}"));
    assert_eq!(types[a.ty as usize].name, "int");
    assert_eq!(types[a.ty as usize].kind, TypeKind::Scalar);
    assert_eq!((a.offset, a.size), (0, 4));
    assert!(a.path.is_empty());
    let _ = table_typed;
}

#[test]
fn rip_relative_loads_type_to_the_field_they_read_at_o2() {
    check_probes("probes-o2", &["-g", "-O2"], false);
}

#[test]
fn rip_relative_loads_type_to_the_field_they_read_at_o0() {
    check_probes("probes-o0", &["-g", "-O0"], false);
}

#[test]
fn absolute_indexed_loads_type_to_the_element_field_without_pie() {
    check_probes("probes-nopie", &["-g", "-O2", "-fno-pie", "-no-pie"], true);
}

#[test]
fn a_declaration_is_resolved_to_its_definition_in_another_unit() {
    let Some(bin) = build_sources(
        "gcc",
        "opaque",
        &["opaque_a.c", "opaque_b.c"],
        &["-g", "-O2"],
    ) else {
        return;
    };
    let mut mt = ModuleTypes::from_elf(&bin).unwrap();
    let head = mt
        .globals()
        .all()
        .iter()
        .find(|g| g.name == "head")
        .expect("global head")
        .clone();
    // head is `struct Node *` in opaque_a.c, where Node is only declared.
    let l = mt.layouts();
    assert_eq!(l.type_name(head.ty), "Node*");
    let decl = l.type_of(head.ty).expect("pointee");
    let p = l.peel(decl).unwrap();
    assert_ne!(p.die, decl, "the declaration is replaced by the definition");
    let i = mt.layouts_mut().intern(decl).expect("Node interned") as usize;
    let types = mt.take_types();
    let node = &types[i];
    assert_eq!((node.name.as_str(), node.size), ("Node", 16));
    assert!(node.decl.contains("opaque_b.c:"), "{}", node.decl);
    let members: Vec<(&str, u64, u64, &str)> = node
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.offset, m.size, m.type_name.as_str()))
        .collect();
    assert_eq!(members, [("value", 0, 4, "int"), ("next", 8, 8, "Node*")]);
}

/// Bad DWARF is skipped, never a panic: bytes of `.debug_info` (and of
/// `.debug_abbrev`) overwritten, one place at a time, then every global
/// interned and every probe typed.
#[test]
fn corrupted_dwarf_never_panics() {
    use object::{Object, ObjectSection};
    let Some(bin) = build("corrupt", &["-g", "-O2"]) else {
        return;
    };
    let obj = object::File::parse(&*bin).unwrap();
    let ranges: Vec<(u64, u64)> = [".debug_info", ".debug_abbrev"]
        .iter()
        .map(|n| obj.section_by_name(n).unwrap().file_range().unwrap())
        .collect();
    drop(obj);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..150 {
        let mut b = bin.clone();
        let (off, len) = ranges[round % ranges.len()];
        for _ in 0..4 {
            let at = off + next() % len;
            b[at as usize] = next() as u8;
        }
        let Ok(mut mt) = ModuleTypes::from_elf(&b) else {
            continue;
        };
        let tys: Vec<_> = mt.globals().all().iter().map(|g| g.ty).collect();
        for t in tys {
            if let Some(i) = mt.layouts_mut().intern(t) {
                let types = &mt.types();
                let size = types[i as usize].size;
                for o in [0, size / 2, size.saturating_sub(1)] {
                    coldcache_types::layout::path_of(types, i, o, 8);
                }
            }
        }
        for &(f, ..) in PROBES {
            common::accesses_with(&mut mt, &bin, f);
        }
    }
}
