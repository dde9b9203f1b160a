//! A small resolved dump with data types whose data views are computed by
//! hand (`tests/data.rs`; the CLI's `tests/data_views.rs` writes it to a
//! file through `#[path]`).
//!
//! `Entity` (192 bytes): `pos` (Vec3, 0..12), hole 4, `id` (16..20),
//! `name` (char[40], 20..60), hole 4, `hp` (64..68), hole 92, `flags`
//! (uint16_t, 160..162), `dirty` (bit-field, bit 3 of byte 162), tail
//! padding 29. Line size 64 (the cache configuration's L1).
//!
//! | ip | line | thread | field | counts |
//! |---|---|---|---|---|
//! | 0x2000 | u.c:20 | main (100) | Entity::flags (register `e`) | 8192 reads, all from memory |
//! | 0x2004 | u.c:21 | main | Entity::pos.x (stack `tmp`) | 100 writes, 90 L1, 10 L2 |
//! | 0x2008 | u.c:21 | worker (101) | Entity::pos.y (global `world`) | 50 reads: 40 L1, 5 L2, 5 memory |
//! | 0x2008 | u.c:21 | main | Entity::pos.y | 30 reads, L1 |
//! | 0x200c | u.c:22 | main | untyped | 20 reads: 10 L1, 10 memory |
//! | 0x1000 | m.c:9 | main | (no data access) | 5 instructions |

use coldcache_dump::data::NO_TYPE;
use coldcache_dump::*;

pub const NC: usize = 15; // 2 levels

/// A counter row: instructions (every fetch an L1 hit), reads and writes
/// served by L1, L2 and memory.
pub fn row(instr: u64, r: [u64; 3], w: [u64; 3]) -> Vec<u64> {
    let mut c = vec![0u64; NC];
    c[0] = instr;
    c[2] = instr;
    c[5..8].copy_from_slice(&r);
    c[8..11].copy_from_slice(&w);
    c
}

fn m(name: &str, offset: u64, size: u64, type_name: &str) -> Member {
    Member {
        name: name.into(),
        offset,
        size,
        type_name: type_name.into(),
        ty: NO_TYPE,
        ..Member::default()
    }
}

pub fn data_types() -> DataTypes {
    let vec3 = DataType {
        name: "Vec3".into(),
        kind: TypeKind::Struct,
        size: 12,
        members: vec![
            m("x", 0, 4, "float"),
            m("y", 4, 4, "float"),
            m("z", 8, 4, "float"),
        ],
        decl: "/s/vec.h:3".into(),
    };
    let entity = DataType {
        name: "game::Entity".into(),
        kind: TypeKind::Struct,
        size: 192,
        members: vec![
            Member {
                ty: 0,
                ..m("pos", 0, 12, "Vec3")
            },
            m("id", 16, 4, "int"),
            Member {
                count: 40,
                ..m("name", 20, 40, "char[40]")
            },
            m("hp", 64, 4, "int"),
            m("flags", 160, 2, "uint16_t"),
            Member {
                bit_offset: 3,
                bit_size: 1,
                ..m("dirty", 162, 1, "unsigned int")
            },
        ],
        decl: "/s/entity.h:9".into(),
    };
    let access = |addr, offset, size, path: Vec<u32>, via, variable: &str| TypedAccess {
        addr,
        ty: 1,
        offset,
        size,
        path,
        straddles: false,
        via,
        variable: variable.into(),
    };
    DataTypes {
        types: vec![vec3, entity],
        accesses: vec![
            access(0x2000, 160, 2, vec![4], Via::Register, "e"),
            access(0x2004, 0, 4, vec![0, 0], Via::Stack, "tmp"),
            access(0x2008, 4, 4, vec![0, 1], Via::Global, "world"),
        ],
        modules: vec!["2 types, 3 of 4 memory instructions typed".into()],
        slots: Vec::new(),
    }
}

pub const CACHE_TOML: &str = "name = \"test\"\ncores = 2\n\n[[level]]\nname = \"L1\"\nlevel = 1\nkind = \"data\"\nsize = \"32K\"\nline = 64\nassoc = 8\n\n[[level]]\nname = \"L2\"\nlevel = 2\nkind = \"unified\"\nsize = \"1M\"\nline = 64\nassoc = 16\n";

pub fn dump() -> Dump {
    let levels = vec!["L1".to_string(), "L2".to_string()];
    let names = CounterLayout::new(levels.len()).names(&levels);
    assert_eq!(names.len(), NC);
    let f = |name: &str, entry, file, line| Function {
        name: name.into(),
        module: 0,
        entry,
        file,
        line,
    };
    let loc = |addr, function, file, line| Location {
        addr,
        frames: vec![Frame {
            function,
            file,
            line,
        }],
        code: vec![0x90],
    };
    let symbols = Symbols {
        files: vec!["/s/m.c".into(), "/s/u.c".into()],
        functions: vec![f("main", 0x1000, 0, 8), f("update", 0x2000, 1, 19)],
        locations: vec![
            loc(0x1000, 0, 0, 9),
            loc(0x2000, 1, 1, 20),
            loc(0x2004, 1, 1, 21),
            loc(0x2008, 1, 1, 21),
            loc(0x200c, 1, 1, 22),
        ],
        modules: vec![ModuleSymbols {
            status: ModuleStatus::Lines,
            detail: String::new(),
        }],
    };
    let rec = |ip, thread, counters| Record {
        ip,
        stack: 0,
        thread,
        counters,
    };
    Dump {
        meta: Meta {
            program: vec!["prog".into()],
            cache_name: "test".into(),
            cache_toml: CACHE_TOML.into(),
            levels,
            cores: 2,
            counters: names,
            ..Meta::default()
        },
        modules: vec![Module {
            path: "/bin/prog".into(),
            build_id: vec![],
            start: 0,
            end: 0x10000,
            file_offset: 0,
        }],
        threads: vec![
            Thread {
                tid: 100,
                name: "main".into(),
                core: 0,
            },
            Thread {
                tid: 101,
                name: "worker".into(),
                core: 1,
            },
        ],
        stacks: vec![StackNode::default()],
        records: vec![
            rec(0x1000, 0, row(5, [0; 3], [0; 3])),
            rec(0x2000, 0, row(8192, [0, 0, 8192], [0; 3])),
            rec(0x2004, 0, row(100, [0; 3], [90, 10, 0])),
            rec(0x2008, 1, row(50, [40, 5, 5], [0; 3])),
            rec(0x2008, 0, row(30, [30, 0, 0], [0; 3])),
            rec(0x200c, 0, row(20, [10, 0, 10], [0; 3])),
        ],
        symbols: Some(symbols),
        sources: Vec::new(),
        data: Some(data_types()),
        objects: None,
        timeline: None,
    }
}
