//! Building `tests-programs/data/layouts.cpp` and reading it back
//! (shared by the test files of this crate that include it).
#![allow(dead_code)]

use coldcache_dump::{DataType, TypedAccess};
use coldcache_types::ModuleTypes;
use object::{Object, ObjectSection, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `layouts.cpp` built with `flags` as `name`, its bytes; `None` (the
/// test says SKIP) without g++.
pub fn build(name: &str, flags: &[&str]) -> Option<Vec<u8>> {
    build_sources("g++", name, &["layouts.cpp"], flags)
}

/// `sources` (under `tests-programs/data/`) built by `compiler` with
/// `flags` as `name`, its bytes; `None` (the test says SKIP) without the
/// compiler.
pub fn build_sources(
    compiler: &str,
    name: &str,
    sources: &[&str],
    flags: &[&str],
) -> Option<Vec<u8>> {
    if Command::new(compiler).arg("--version").output().is_err() {
        eprintln!("SKIP {name}: {compiler} missing");
        return None;
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("types-{name}"));
    let st = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .args(
            sources
                .iter()
                .map(|s| repo().join("tests-programs/data").join(s)),
        )
        .status()
        .expect("run the compiler");
    assert!(st.success(), "g++ {flags:?} failed");
    Some(std::fs::read(&out).unwrap())
}

/// Every global's type interned, and the layouts.
pub fn types_of(bin: &[u8]) -> Vec<DataType> {
    let mut mt = ModuleTypes::from_elf(bin).unwrap();
    let tys: Vec<_> = mt.globals().all().iter().map(|g| g.ty).collect();
    for t in tys {
        mt.layouts_mut().intern(t);
    }
    mt.take_types()
}

/// The layout named `name`.
pub fn find_type<'a>(types: &'a [DataType], name: &str) -> &'a DataType {
    types.iter().find(|t| t.name == name).unwrap_or_else(|| {
        panic!(
            "no type {name} in {:?}",
            types.iter().map(|t| &t.name).collect::<Vec<_>>()
        )
    })
}

/// The file address and bytes of function `name`.
pub fn function_bytes(bin: &[u8], name: &str) -> (u64, Vec<u8>) {
    let obj = object::File::parse(bin).unwrap();
    let sym = obj
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("no symbol {name}"));
    let sec = obj.section_by_index(sym.section_index().unwrap()).unwrap();
    let data = sec.data().unwrap();
    let start = (sym.address() - sec.address()) as usize;
    (
        sym.address(),
        data[start..start + sym.size() as usize].to_vec(),
    )
}

/// Every instruction of function `name` typed (with `mt`'s variables);
/// the types they name.
pub fn accesses_with(mt: &mut ModuleTypes, bin: &[u8], name: &str) -> Vec<TypedAccess> {
    let (addr, bytes) = function_bytes(bin, name);
    let mut d = iced_x86::Decoder::with_ip(64, &bytes, addr, iced_x86::DecoderOptions::NONE);
    let mut out = Vec::new();
    while d.can_decode() {
        let ins = d.decode();
        let at = (ins.ip() - addr) as usize;
        if let Some(a) = mt.type_instruction(ins.ip(), &bytes[at..at + ins.len()]) {
            out.push(a);
        }
    }
    out
}

/// Every instruction of function `name` typed by the globals rule alone,
/// and the types they name.
pub fn function_accesses(bin: &[u8], name: &str) -> (Vec<DataType>, Vec<TypedAccess>) {
    let mut mt = ModuleTypes::from_elf(bin).unwrap();
    let a = accesses_with(&mut mt, bin, name);
    (mt.take_types(), a)
}
