//! Writes a dump whose every string a page shows carries HTML, for the
//! browser test that the UI shows them as text and runs none of it
//! (`scripts/ui-tests.sh`, `ui-tests/hostile.mjs`). The dump is the hand
//! dump of the analysis tests with hostile names, paths, source text,
//! thread name, program, cache name, capture notes and configuration, and
//! data types (type, member and variable names, declarations, what the type
//! reader found) for the Data tab and its layouts.
//!
//!   cargo run -p coldcache-ui --example hostile_dump -- OUT.ccdump

#[path = "../../analysis/tests/common/hand_dump.rs"]
mod hand_dump;

/// Each payload, when parsed as HTML, bumps `window.__xss`.
const IMG: &str = r#"<img src=x onerror="window.__xss=(window.__xss||0)+1">"#;
const SCRIPT: &str = "<script>window.__xss=(window.__xss||0)+1</script>";
const ATTR: &str = r#""'><svg onload="window.__xss=(window.__xss||0)+1">"#;

fn main() {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: hostile_dump OUT.ccdump");
        std::process::exit(2);
    };
    let mut d = hand_dump::dump(8);
    let s = d.symbols.as_mut().expect("the hand dump is resolved");
    // Functions: main, update, get_pos, render, rec.
    s.functions[1].name = format!("update{IMG}");
    s.functions[2].name = format!("get_pos{SCRIPT}");
    s.functions[3].name = format!("render{ATTR}");
    s.files[1] = format!("/s/{IMG}u.c");
    s.files[3] = format!("/s/{ATTR}pos.h");
    let u_c = s.files[1].clone();
    d.sources = vec![coldcache_dump::SourceText {
        path: u_c,
        text: (1..=25)
            .map(|i| format!("line {i} {IMG} {SCRIPT} {ATTR}\n"))
            .collect(),
    }];
    d.modules[0].path = format!("/bin/{IMG}prog");
    d.threads[1].name = format!("worker{SCRIPT}");
    d.meta.program = vec![format!("/bin/{IMG}prog"), ATTR.to_string()];
    d.meta.cache_name = format!("cache{IMG}");
    d.meta.cache_toml = format!("name = \"{SCRIPT}\"\n");
    d.meta.trigger = format!("function:{ATTR}");
    d.meta.notes = vec![format!("note {IMG}")];
    d.data = Some(data_types(d.modules.len()));
    let tmp = format!("{out}.tmp");
    std::fs::write(&tmp, d.to_bytes())
        .and_then(|()| std::fs::rename(&tmp, &out))
        .unwrap_or_else(|e| {
            eprintln!("hostile_dump: cannot write {out}: {e}");
            std::process::exit(1);
        });
}

/// Data types for the hand dump's memory instructions, every name hostile:
/// a struct of 192 bytes (a member in its third cache line, a hole) with a
/// nested struct, typed at 0x2004, 0x2008, 0x3004 and 0x4004.
fn data_types(modules: usize) -> coldcache_dump::DataTypes {
    use coldcache_dump::data::NO_TYPE;
    use coldcache_dump::{DataType, DataTypes, Member, TypeKind, TypedAccess, Via};
    let m = |name: String, offset, size, type_name: String, ty| Member {
        name,
        offset,
        size,
        type_name,
        ty,
        ..Member::default()
    };
    let inner = DataType {
        name: format!("V{SCRIPT}"),
        kind: TypeKind::Struct,
        size: 12,
        members: vec![
            m(format!("x{IMG}"), 0, 4, format!("float{ATTR}"), NO_TYPE),
            m(format!("y{SCRIPT}"), 4, 4, "float".into(), NO_TYPE),
        ],
        decl: format!("/s/{IMG}v.h:3"),
    };
    let outer = DataType {
        name: format!("game::Ent{IMG}"),
        kind: TypeKind::Struct,
        size: 192,
        members: vec![
            m(format!("pos{SCRIPT}"), 0, 12, format!("V{SCRIPT}"), 0),
            m(format!("flags{ATTR}"), 160, 2, format!("u16{IMG}"), NO_TYPE),
        ],
        decl: format!("/s/{ATTR}e.h:9"),
    };
    let access = |addr, offset, size, path: Vec<u32>, via, variable: String| TypedAccess {
        addr,
        ty: 1,
        offset,
        size,
        path,
        straddles: false,
        via,
        variable,
    };
    DataTypes {
        types: vec![inner, outer],
        accesses: vec![
            access(0x2004, 0, 4, vec![0, 0], Via::Stack, format!("tmp{IMG}")),
            access(0x2008, 160, 2, vec![1], Via::Register, format!("e{SCRIPT}")),
            access(0x3004, 4, 4, vec![0, 1], Via::Global, format!("g{ATTR}")),
            access(0x4004, 0, 4, vec![0, 0], Via::Register, format!("p{IMG}")),
        ],
        modules: vec![format!("types {SCRIPT} {IMG}"); modules],
        slots: Vec::new(),
    }
}
