//! The register and stack rules with a fake `Variables` (the real one,
//! `locals::Locals`, is tested on its own): hand-encoded instructions
//! against the layouts of `tests-programs/data/layouts.cpp`, whose
//! expected fields are computed by hand from the source.

mod common;

use coldcache_dump::{DataTypes, TypedAccess, Via};
use coldcache_types::operand::{Variable, Variables};
use coldcache_types::{ModuleTypes, TypeRef};
use common::build;

/// rdi points to a `game::Entity` (`e`); the stack slot rsp+0x20..0x70
/// is an `Emitter` (`em`).
struct Fake {
    entity: TypeRef,
    emitter: TypeRef,
}

impl Variables for Fake {
    fn pointer_in_register(&self, _pc: u64, reg: u16) -> Option<Variable> {
        (reg == 5).then(|| Variable {
            name: "e".into(),
            ty: self.entity,
            offset: 0,
        })
    }
    fn stack_variable(&self, _pc: u64, reg: u16, disp: i64, _size: u32) -> Option<Variable> {
        (reg == 7 && (0x20..0x70).contains(&disp)).then(|| Variable {
            name: "em".into(),
            ty: self.emitter,
            offset: (disp - 0x20) as u64,
        })
    }
}

/// (bytes, field or "" for untyped, offset, straddles, via, variable)
type Case = (&'static [u8], &'static str, u64, bool, Via, &'static str);

fn element_type(mt: &ModuleTypes, global: &str) -> TypeRef {
    let g = mt
        .globals()
        .all()
        .iter()
        .find(|g| g.name == global)
        .unwrap_or_else(|| panic!("no global {global}"));
    mt.layouts().peel(g.ty).unwrap().die
}

#[test]
fn register_and_stack_rules_fold_index_and_straddle() {
    let Some(bin) = build("operand-o2", &["-g", "-O2"]) else {
        return;
    };
    let mut mt = ModuleTypes::from_elf(&bin).unwrap();
    let fake = Fake {
        entity: element_type(&mt, "entities"),
        emitter: element_type(&mt, "emitter"),
    };
    mt.set_variables(Some(Box::new(fake)));
    // (bytes, field or "" for untyped, offset, straddles, via, variable)
    let cases: &[Case] = &[
        // movzx eax, word [rdi+0xa0]: the flag at +160.
        (
            &[0x0f, 0xb7, 0x87, 0xa0, 0, 0, 0],
            "game::Entity::flags",
            160,
            false,
            Via::Register,
            "e",
        ),
        // movzx eax, word [rdi-0x20]: one element back, -32 mod 192 = 160.
        (
            &[0x0f, 0xb7, 0x47, 0xe0],
            "game::Entity::flags",
            160,
            false,
            Via::Register,
            "e",
        ),
        // mov al, [rdi+rax+0x20]: name[i], the index steps one char.
        (
            &[0x8a, 0x44, 0x07, 0x20],
            "game::Entity::name",
            32,
            false,
            Via::Register,
            "e",
        ),
        // mov rax, [rdi+rax*8+0x18]: id is no array and 8 no whole Entity.
        (
            &[0x48, 0x8b, 0x44, 0xc7, 0x18],
            "",
            0,
            false,
            Via::Register,
            "",
        ),
        // prefetcht0 [rdi+0xa0]: a prefetch touches the flag's line.
        (
            &[0x0f, 0x18, 0x8f, 0xa0, 0, 0, 0],
            "game::Entity::flags",
            160,
            false,
            Via::Register,
            "e",
        ),
        // mov rax, [rdi+0xc]: 8 bytes of vel (vel.x and vel.y).
        (
            &[0x48, 0x8b, 0x47, 0x0c],
            "game::Entity::vel",
            12,
            false,
            Via::Register,
            "e",
        ),
        // mov rax, [rsi+0x10]: rsi holds no variable.
        (&[0x48, 0x8b, 0x46, 0x10], "", 0, false, Via::Register, ""),
        // mov eax, [rsp+0x28]: em at rsp+0x20, +8 = parts[0].p[1].
        (
            &[0x8b, 0x44, 0x24, 0x28],
            "Emitter::parts.p",
            8,
            false,
            Via::Stack,
            "em",
        ),
        // mov eax, [rsp+0x70]: past em.
        (&[0x8b, 0x44, 0x24, 0x70], "", 0, false, Via::Stack, ""),
    ];
    let mut typed: Vec<TypedAccess> = Vec::new();
    for (i, &(code, field, offset, straddles, via, var)) in cases.iter().enumerate() {
        let pc = 0x1000 + 16 * i as u64;
        let a = mt.type_instruction(pc, code);
        if field.is_empty() {
            assert!(a.is_none(), "case {i}: {a:?}");
            continue;
        }
        let a = a.unwrap_or_else(|| panic!("case {i} untyped"));
        assert_eq!(a.addr, pc);
        assert_eq!(
            (a.offset, a.straddles, a.via),
            (offset, straddles, via),
            "case {i}"
        );
        assert_eq!(a.variable, var, "case {i}");
        typed.push(a);
    }
    // Without memory operands: not counted.
    for code in [
        &[0x48, 0x8d, 0x47, 0x08][..],
        &[0x66, 0x0f, 0x1f, 0x44, 0, 0],
        &[0x90],
    ] {
        assert!(mt.type_instruction(0x2000, code).is_none());
    }
    assert_eq!(mt.memory_instructions, cases.len());
    assert_eq!(mt.typed, typed.len());
    let d = DataTypes {
        types: mt.take_types(),
        accesses: Vec::new(),
        modules: Vec::new(),
        slots: Vec::new(),
    };
    let names: Vec<String> = typed.iter().map(|a| d.field_name(a)).collect();
    let want: Vec<&str> = cases
        .iter()
        .map(|c| c.1)
        .filter(|f| !f.is_empty())
        .collect();
    assert_eq!(names, want);
}
