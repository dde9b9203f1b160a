//! Parameters and locals read only from the units whose code holds the
//! instructions to type (`ModuleTypes::from_files_at`, what a resolution
//! does): `tests-programs/data/units_a.c` (`pair_sum`) and `opaque_b.c`
//! (`sum_nodes`), two units, each with a pointer parameter in a register.
//! The fields are the sources': `p->a`, `p->b`, `n->value`, `n->next`.

mod common;

use coldcache_dump::{DataTypes, Via};
use coldcache_types::ModuleTypes;
use common::{accesses_with, build_sources, function_bytes};

/// The label and rule of each typed instruction of function `f`.
fn labels(mt: &mut ModuleTypes, bin: &[u8], f: &str) -> Vec<(String, Via)> {
    let accesses = accesses_with(mt, bin, f);
    let d = DataTypes {
        types: mt.types().to_vec(),
        accesses: Vec::new(),
        modules: Vec::new(),
        slots: Vec::new(),
    };
    accesses.iter().map(|a| (d.label(a), a.via)).collect()
}

/// The file addresses of function `f`'s instructions.
fn pcs(bin: &[u8], f: &str) -> Vec<u64> {
    let (addr, bytes) = function_bytes(bin, f);
    let mut d = iced_x86::Decoder::with_ip(64, &bytes, addr, iced_x86::DecoderOptions::NONE);
    let mut out = Vec::new();
    while d.can_decode() {
        out.push(d.decode().ip());
    }
    out
}

fn has(labels: &[(String, Via)], field: &str) -> bool {
    labels
        .iter()
        .any(|(l, v)| l == field && *v == Via::Register)
}

#[test]
fn locals_come_from_the_units_of_the_instructions_typed() {
    let Some(bin) = build_sources("gcc", "units", &["units_a.c", "opaque_b.c"], &["-g", "-O2"])
    else {
        return;
    };
    // Every unit read: both functions typed through their parameters.
    let mut full = ModuleTypes::from_elf(&bin).unwrap();
    let sum_full = labels(&mut full, &bin, "sum_nodes");
    let pair_full = labels(&mut full, &bin, "pair_sum");
    assert!(has(&sum_full, "Node::value"), "{sum_full:?}");
    assert!(
        has(&pair_full, "Pair::a") && has(&pair_full, "Pair::b"),
        "{pair_full:?}"
    );

    // Only `pair_sum`'s unit: it is typed as before, `sum_nodes` (the
    // other unit) through no register.
    let mut at = ModuleTypes::from_files_at(&bin, None, Some(&pcs(&bin, "pair_sum"))).unwrap();
    assert_eq!(labels(&mut at, &bin, "pair_sum"), pair_full);
    let sum_at = labels(&mut at, &bin, "sum_nodes");
    assert!(
        sum_at.iter().all(|(_, v)| *v != Via::Register),
        "{sum_at:?}"
    );

    // Both units' instructions: both as with every unit read.
    let mut both_pcs = pcs(&bin, "pair_sum");
    both_pcs.extend(pcs(&bin, "sum_nodes"));
    both_pcs.sort_unstable();
    let mut both = ModuleTypes::from_files_at(&bin, None, Some(&both_pcs)).unwrap();
    assert_eq!(labels(&mut both, &bin, "sum_nodes"), sum_full);
    assert_eq!(labels(&mut both, &bin, "pair_sum"), pair_full);
}
