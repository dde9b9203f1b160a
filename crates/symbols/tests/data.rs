//! `resolve_dump` fills the dump's `DATA` section: a synthetic dump whose
//! records are the instructions of probe functions of
//! `tests-programs/data/layouts.cpp` (built with g++ -g -O2), mapped at a
//! made-up base. Each probe's load is typed to the field the source reads
//! (computed by hand), at its run-time address; the section round-trips;
//! a module without DWARF says so; a module gone keeps what was typed.

use coldcache_dump::{Dump, Module, Record, StackNode, Thread, Via};
use coldcache_symbols::{resolve_dump, ResolveOptions};
use object::{Object, ObjectSection, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::process::Command;

const BASE: u64 = 0x5555_0000_0000;

/// layouts.cpp built with `flags` as `name`; `None` without g++.
fn build(name: &str, flags: &[&str]) -> Option<PathBuf> {
    if Command::new("g++").arg("--version").output().is_err() {
        eprintln!("SKIP {name}: g++ missing");
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests-programs/data/layouts.cpp");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("symbols-data-{name}"));
    let st = Command::new("g++")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(src)
        .status()
        .expect("run g++");
    assert!(st.success());
    Some(out)
}

/// A dump of `exe` mapped at `BASE` (file offset 0) whose records are
/// every instruction of `functions`; the run-time address of each
/// function's first instruction that reads memory (its only load).
fn dump_of(exe: &Path, functions: &[&str]) -> (Dump, Vec<u64>) {
    let data = std::fs::read(exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let mut ips = Vec::new();
    let mut loads = Vec::new();
    for f in functions {
        let sym = obj.symbols().find(|s| s.name() == Ok(f)).unwrap();
        let sec = obj.section_by_index(sym.section_index().unwrap()).unwrap();
        let (sec_off, _) = sec.file_range().unwrap();
        let off = sec_off + (sym.address() - sec.address());
        let bytes = &data[off as usize..(off + sym.size()) as usize];
        let mut d = iced_x86::Decoder::with_ip(64, bytes, BASE + off, 0);
        let mut first_load = None;
        while d.can_decode() {
            let ins = d.decode();
            ips.push(ins.ip());
            if first_load.is_none()
                && (0..ins.op_count()).any(|i| ins.op_kind(i) == iced_x86::OpKind::Memory)
            {
                first_load = Some(ins.ip());
            }
        }
        loads.push(first_load.unwrap());
    }
    let module = Module {
        path: exe.display().to_string(),
        build_id: obj.build_id().unwrap().unwrap_or_default().to_vec(),
        start: BASE,
        end: BASE + data.len() as u64,
        file_offset: 0,
    };
    let dump = Dump {
        modules: vec![module],
        threads: vec![Thread::default()],
        stacks: vec![StackNode::default()],
        records: ips
            .iter()
            .map(|&ip| Record {
                ip,
                stack: 0,
                thread: 0,
                counters: Vec::new(),
            })
            .collect(),
        ..Dump::default()
    };
    (dump, loads)
}

const PROBES: &[(&str, &str)] = &[
    ("read_flag5", "game::Entity::flags"),
    ("read_part", "Emitter::parts.p"),
    ("read_base_kind", "Derived::Base.kind"),
    ("read_tagged_f", "Tagged::<anonymous>.f"),
];

#[test]
fn resolving_types_each_probe_load_at_its_run_time_address() {
    let Some(exe) = build("o2", &["-g", "-O2"]) else {
        return;
    };
    let names: Vec<&str> = PROBES.iter().map(|p| p.0).collect();
    let (mut d, loads) = dump_of(&exe, &names);
    resolve_dump(&mut d, &ResolveOptions::default());
    let data = d.data.as_ref().expect("DATA filled");
    for (&(f, field), &at) in PROBES.iter().zip(&loads) {
        let a = data
            .access(at)
            .unwrap_or_else(|| panic!("{f}: no access at {at:#x}: {:?}", data.accesses));
        assert_eq!(data.field_name(a), field, "{f}");
        assert_eq!(a.via, Via::Global);
    }
    // Only the probes' loads have memory operands (the rest are `ret`
    // and padding nops); the line says so.
    assert_eq!(data.accesses.len(), PROBES.len(), "{:?}", data.accesses);
    assert_eq!(data.modules.len(), 1);
    assert!(
        data.modules[0].starts_with("8 types, 4 of 4 memory instructions typed"),
        "{}",
        data.modules[0]
    );
    // Only the types the accesses reach: Entity, Vec3, Emitter, Particle,
    // Derived, Base, Tagged, its anonymous union.
    let mut names: Vec<&str> = data.types.iter().map(|t| t.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "<anonymous union>",
            "Base",
            "Derived",
            "Emitter",
            "Particle",
            "Tagged",
            "game::Entity",
            "game::Vec3"
        ]
    );
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back.data, d.data);

    // The binary gone: what was typed is kept, and the line says why.
    let mut gone = d.clone();
    gone.modules[0].path = "/nonexistent/layouts".into();
    resolve_dump(&mut gone, &ResolveOptions::default());
    let kept = gone.data.as_ref().unwrap();
    assert_eq!(kept.accesses, data.accesses);
    assert_eq!(kept.types, data.types);
    assert!(
        kept.modules[0].contains("kept from an earlier resolution"),
        "{}",
        kept.modules[0]
    );
}

#[test]
fn a_module_without_dwarf_says_so() {
    let Some(exe) = build("nodebug", &["-O2"]) else {
        return;
    };
    let (mut d, _) = dump_of(&exe, &["read_flag5"]);
    resolve_dump(&mut d, &ResolveOptions::default());
    let data = d.data.as_ref().unwrap();
    assert!(data.accesses.is_empty());
    assert_eq!(data.modules, ["no DWARF"]);
}
