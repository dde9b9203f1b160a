//! The data views on a hand-made dump (`common/data_dump.rs`, its table):
//! every figure below is counted by hand from that table, and the data
//! view's totals are checked against the flat view's rows of the same
//! instructions.

#[path = "common/data_dump.rs"]
mod data_dump;

use coldcache_analysis::data::{self, Coverage, DataQuery};
use coldcache_analysis::views::{self, By, FlatQuery, Num};
use coldcache_analysis::{render, AnalysisError, Profile, ProfileOptions};
use coldcache_dump::Dump;

fn profile() -> Profile {
    Profile::new(data_dump::dump(), ProfileOptions::default())
}

fn col(v: &[views::ColumnHead], name: &str) -> usize {
    v.iter().position(|c| c.name == name).unwrap()
}

#[test]
fn coverage_counts_typed_field_and_untyped_accesses() {
    let p = profile();
    let c = data::coverage(&p).unwrap();
    // 8192 + 100 + 50 + 30 typed, 20 untyped; 0x1000 has no data access.
    assert_eq!(
        c,
        Coverage {
            accesses: 8392,
            typed: 8372,
            with_field: 8372,
            untyped: 20,
            via_register: 8192,
            via_global: 80,
            via_stack: 100,
            instructions: 4,
            typed_instructions: 3,
        }
    );
    assert_eq!(
        c.text(),
        "99.8% of 8392 data accesses typed, 99.8% with a field (3 of 4 instructions with data accesses typed)"
    );
    // The summary and the report's header carry it.
    let s = coldcache_analysis::summary::summary(&p);
    assert_eq!(s.data_types, Some(c.clone()));
    assert!(render::header(&p).contains(&format!("data:      {}", c.text())));
    // Only worker's thread: 50 reads of pos.y, all typed.
    let w = Profile::new(
        data_dump::dump(),
        ProfileOptions {
            threads: Some(vec![101]),
            ..ProfileOptions::default()
        },
    );
    let c = data::coverage(&w).unwrap();
    assert_eq!((c.accesses, c.typed, c.via_global), (50, 50, 50));
    // A dump without data types has none, and no summary line.
    let mut d = data_dump::dump();
    d.data = None;
    let p = Profile::new(d, ProfileOptions::default());
    assert_eq!(data::coverage(&p), None);
    assert_eq!(coldcache_analysis::summary::summary(&p).data_types, None);
    assert!(!render::header(&p).contains("data:"));
}

#[test]
fn data_view_ranks_types_and_fields_and_its_totals_are_the_flat_views() {
    let p = profile();
    let v = data::data(&p, &DataQuery::default()).unwrap();
    assert_eq!(v.sort, "mem");
    type Row<'a> = (&'a str, u64, u64, &'a [u64], f64, u64);
    let fields: Vec<Row> = v
        .fields
        .iter()
        .map(|r| {
            (
                r.label.as_str(),
                r.reads,
                r.writes,
                r.misses.as_slice(),
                r.percent,
                r.instructions,
            )
        })
        .collect();
    // mem: flags 8192, pos.y 5, pos.x 0 of the dump's 8207.
    assert_eq!(
        fields,
        vec![
            (
                "game::Entity::flags",
                8192,
                0,
                &[8192u64, 8192][..],
                99.82,
                1
            ),
            ("game::Entity::pos.y", 80, 0, &[10, 5][..], 0.06, 1),
            ("game::Entity::pos.x", 0, 100, &[10, 0][..], 0.0, 1),
        ]
    );
    assert_eq!(v.types.len(), 1);
    let t = &v.types[0];
    assert_eq!(
        (
            t.label.as_str(),
            t.reads,
            t.writes,
            t.misses.as_slice(),
            t.percent
        ),
        ("game::Entity", 8272, 100, &[8212u64, 8197][..], 99.88)
    );
    // The typed totals are the flat view's rows of the three typed
    // instructions, summed column by column; the totals are the flat
    // view's.
    let flat = views::flat(
        &p,
        &FlatQuery {
            by: By::Instruction,
            ..FlatQuery::default()
        },
    )
    .unwrap();
    let typed = [0x2000u64, 0x2004, 0x2008];
    for (c, head) in v.columns.iter().enumerate() {
        if matches!(v.typed_totals[c], Num::Float(_)) {
            continue;
        }
        let sum: f64 = flat
            .rows
            .iter()
            .filter(|r| typed.contains(&r.addr.unwrap()))
            .map(|r| r.self_[c].as_f64())
            .sum();
        assert_eq!(v.typed_totals[c].as_f64(), sum, "column {}", head.name);
        assert_eq!(v.types[0].costs[c].as_f64(), sum, "column {}", head.name);
        assert_eq!(v.totals[c], flat.totals[c], "column {}", head.name);
    }
    // Fields add up to the type.
    let refs = col(&v.columns, "d_refs");
    let fsum: f64 = v.fields.iter().map(|r| r.costs[refs].as_f64()).sum();
    assert_eq!(fsum, 8372.0);
    // The flat view's sort options: by writes, pos.x first; --limit; --filter.
    let v = data::data(
        &p,
        &DataQuery {
            sort: Some("w_L1".into()),
            limit: Some(1),
            filter: None,
        },
    )
    .unwrap();
    assert_eq!(v.fields.len(), 1);
    assert_eq!(v.fields_matched, 3);
    assert_eq!(v.fields[0].label, "game::Entity::pos.x");
    let v = data::data(
        &p,
        &DataQuery {
            filter: Some("pos".into()),
            ..DataQuery::default()
        },
    )
    .unwrap();
    assert_eq!(v.fields.len(), 2);
    assert!(matches!(
        data::data(
            &p,
            &DataQuery {
                sort: Some("nope".into()),
                ..DataQuery::default()
            }
        ),
        Err(AnalysisError::NoSuchColumn { .. })
    ));
    // The text: coverage header, both tables, the legend.
    let v = data::data(&p, &DataQuery::default()).unwrap();
    let cols = render::pick_columns(&v.columns, None).unwrap();
    let text = render::data(&v, &cols);
    assert!(
        text.contains(
            "data accesses: 8392; typed 8372 (99.8%), with a field 8372 (99.8%), untyped 20 (0.2%)"
        ),
        "{text}"
    );
    assert!(text.contains(
        "a register holding a pointer variable 8192, a global or static 80, the stack frame 100"
    ));
    assert!(text.contains("types of /bin/prog: 2 types, 3 of 4 memory instructions typed"));
    let flags = text
        .lines()
        .find(|l| l.ends_with("game::Entity::flags"))
        .unwrap();
    let nums: Vec<&str> = flags.split_whitespace().take(3).collect();
    assert_eq!(nums, ["99.8", "8192", "0"], "{flags}");
}

#[test]
fn padding_whole_objects_scalars_and_straddling_accesses_are_labelled() {
    let d = data_dump::data_types();
    let mut a = d.accesses[0].clone();
    assert_eq!(d.label(&a), "game::Entity::flags");
    a.straddles = true;
    assert_eq!(d.label(&a), "game::Entity::flags [straddles]");
    a.straddles = false;
    a.path.clear();
    a.offset = 100;
    assert_eq!(d.label(&a), "game::Entity::<padding>");
    a.offset = 0;
    a.size = 192;
    assert_eq!(d.label(&a), "game::Entity");
}

#[test]
fn layout_shows_members_holes_cache_lines_and_flags() {
    let p = profile();
    let v = data::layout(&p, "Entity").unwrap();
    assert_eq!(
        (v.name.as_str(), v.size, v.line_size),
        ("game::Entity", 192, 64)
    );
    assert!(v.line_size_from.contains("L1"), "{}", v.line_size_from);
    let rows: Vec<(u32, &str, u64, u64, u64, u64, u64)> = v
        .members
        .iter()
        .map(|m| {
            (
                m.depth,
                m.path.as_str(),
                m.offset,
                m.size,
                m.hole_after,
                m.reads,
                m.writes,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (0, "pos", 0, 12, 4, 80, 100),
            (1, "pos.x", 0, 4, 0, 0, 100),
            (1, "pos.y", 4, 4, 0, 80, 0),
            (1, "pos.z", 8, 4, 0, 0, 0),
            (0, "id", 16, 4, 0, 0, 0),
            (0, "name", 20, 40, 4, 0, 0),
            (0, "hp", 64, 4, 92, 0, 0),
            (0, "flags", 160, 2, 0, 8192, 0),
            (0, "dirty", 162, 1, 0, 0, 0),
        ]
    );
    assert_eq!(v.padding, 29);
    assert_eq!(v.members[0].misses, vec![20, 5]);
    assert_eq!(v.members[0].threads, vec![100, 101]);
    let code: Vec<(&str, u32, u64, u64)> = v.members[0]
        .code
        .iter()
        .map(|c| (c.function.as_str(), c.line, c.accesses, c.misses))
        .collect();
    assert_eq!(code, vec![("update", 21, 180, 20)]);
    assert_eq!((v.total.reads, v.total.writes), (8272, 100));
    assert_eq!(v.other.reads + v.other.writes, 0);
    // Lines: 0 shared by two threads, 2 holds the hot flag alone.
    assert_eq!(v.lines.len(), 3);
    let l0 = &v.lines[0];
    assert_eq!(l0.members, vec!["pos", "id", "name"]);
    assert_eq!(
        (l0.reads, l0.writes, l0.misses.clone()),
        (80, 100, vec![20, 5])
    );
    assert!(l0.hot.is_none(), "pos.x has 100 of 180: not hot");
    let fs: Vec<(u32, &str, u64, u64)> = l0
        .false_sharing
        .iter()
        .map(|f| (f.tid, f.field.as_str(), f.reads, f.writes))
        .collect();
    assert_eq!(
        fs,
        vec![
            (100, "pos.x", 0, 100),
            (100, "pos.y", 30, 0),
            (101, "pos.y", 50, 0)
        ]
    );
    assert!(v.lines[1].false_sharing.is_empty() && v.lines[1].hot.is_none());
    let l2 = &v.lines[2];
    let hot = l2.hot.as_ref().unwrap();
    assert_eq!(
        (
            hot.field.as_str(),
            hot.share,
            hot.accesses,
            hot.misses,
            hot.bytes
        ),
        ("flags", 100.0, 8192, 8192, 2)
    );
    assert!(l2.false_sharing.is_empty());
    // pahole's text.
    let t = render::layout(&v);
    for want in [
        "struct game::Entity {  /* /s/entity.h:9 */",
        "Vec3 pos;",
        "/*     0    12 */",
        "float x;",
        "/* XXX 4 bytes hole, try to pack */",
        "/* --- cacheline 1 boundary (64 bytes) --- */",
        "/* XXX 92 bytes hole, try to pack */",
        "/* --- cacheline 2 boundary (128 bytes) was 32 bytes ago --- */",
        "unsigned int dirty:1;",
        "/*   162: 3     1 */",
        "/* size: 192, cachelines: 3, members: 6 */",
        "/* sum members: 63, holes: 3, sum holes: 100 */",
        "/* padding: 29 */",
        "/* update s/u.c:20: 8192 accesses, 8192 L1 misses */",
        "HOT FIELD IN A COLD LINE: flags",
        "FALSE SHARING? threads 100, 101",
        "line 2: flags gets 100.0% of the line's 8192 accesses and misses L1 on 8192 of its 8192; it uses 2 of the line's 64 bytes",
        "line 0: thread 100 (main) pos.x 0r/100w; thread 100 (main) pos.y 30r/0w; thread 101 (worker) pos.y 50r/0w",
    ] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
    // The hole line comes right after the member before it (after its
    // nested members), the boundary right before hp.
    let lines: Vec<&str> = t.lines().collect();
    let id = lines.iter().position(|l| l.contains("int id;")).unwrap();
    assert!(lines[id - 1].contains("XXX 4 bytes hole"), "{t}");
    assert!(lines[id - 2].contains("float z;"), "{t}");
    let hp = lines.iter().position(|l| l.contains("int hp;")).unwrap();
    assert!(lines[hp - 1].contains("cacheline 1 boundary"), "{t}");
    assert!(lines[hp - 2].contains("XXX 4 bytes hole"), "{t}");
    // flags' row: 8192 reads, 0 writes, 8192 misses of each level.
    let flags = lines
        .iter()
        .find(|l| l.contains("uint16_t flags;"))
        .unwrap();
    let nums: Vec<&str> = flags.split_whitespace().take(4).collect();
    assert_eq!(nums, ["8192", "0", "8192", "8192"], "{flags}");
}

#[test]
fn layout_finds_types_by_exact_name_or_unique_suffix() {
    let p = profile();
    assert_eq!(data::layout(&p, "game::Entity").unwrap().size, 192);
    // Vec3 through Entity::pos: the rest of the path from Vec3.
    let v = data::layout(&p, "Vec3").unwrap();
    let rows: Vec<(&str, u64, u64)> = v
        .members
        .iter()
        .map(|m| (m.path.as_str(), m.reads, m.writes))
        .collect();
    assert_eq!(rows, vec![("x", 0, 100), ("y", 80, 0), ("z", 0, 0)]);
    assert_eq!(v.lines.len(), 1);
    assert!(matches!(
        data::layout(&p, "Nope"),
        Err(AnalysisError::NoSuchType { .. })
    ));
    // Two types ending in ::Entity: both listed.
    let mut d = data_dump::dump();
    let data = d.data.as_mut().unwrap();
    let mut other = data.types[1].clone();
    other.name = "ui::Entity".into();
    other.decl = "/s/ui.h:4".into();
    data.types.push(other);
    let p = Profile::new(d, ProfileOptions::default());
    let e = data::layout(&p, "Entity").unwrap_err().to_string();
    assert!(
        e.contains("game::Entity (/s/entity.h:9)") && e.contains("ui::Entity (/s/ui.h:4)"),
        "{e}"
    );
    assert_eq!(data::layout(&p, "ui::Entity").unwrap().name, "ui::Entity");
}

#[test]
fn line_size_comes_from_the_cache_configuration_or_defaults_to_64_and_says_so() {
    let mut d = data_dump::dump();
    assert_eq!(data::line_size(&d).0, 64);
    d.meta.cache_toml = data_dump::CACHE_TOML.replace("line = 64", "line = 32");
    let (l, from) = data::line_size(&d);
    assert_eq!(
        (l, from.as_str()),
        (32, "the line size of L1 in the dump's cache configuration")
    );
    let p = Profile::new(d.clone(), ProfileOptions::default());
    let v = data::layout(&p, "Entity").unwrap();
    assert_eq!(v.lines.len(), 6);
    assert!(
        v.lines[5].hot.is_some(),
        "flags at 160 is in line 5 of 32 bytes"
    );
    // An instruction cache first is skipped.
    d.meta.cache_toml = format!(
        "[[level]]\nname = \"L1i\"\nkind = \"instruction\"\nline = 128\n{}",
        data_dump::CACHE_TOML
    );
    assert_eq!(data::line_size(&d).0, 64);
    // A type of more than 64 lines lists only the lines with accesses.
    let mut big = data_dump::dump();
    big.data.as_mut().unwrap().types[1].size = 64 * 1000;
    let p = Profile::new(big, ProfileOptions::default());
    let v = data::layout(&p, "Entity").unwrap();
    let idx: Vec<u64> = v.lines.iter().map(|l| l.index).collect();
    assert_eq!(idx, vec![0, 2]);
    assert_eq!(v.padding, 64 * 1000 - 163);
    d.meta.cache_toml.clear();
    let (l, from) = data::line_size(&d);
    assert_eq!(l, 64);
    assert!(from.contains("default"), "{from}");
}

#[test]
fn annotate_and_disassembly_name_the_field_missed() {
    let p = profile();
    let update = p.find_functions("update").unwrap();
    let v = views::annotate(&p, &update, &|_| None);
    let fields = |line: u32| {
        v.files[0]
            .lines
            .iter()
            .find(|l| l.line == line)
            .unwrap()
            .fields
            .clone()
    };
    assert_eq!(fields(20), vec!["game::Entity::flags"]);
    // 10 L1 misses each: by name.
    assert_eq!(
        fields(21),
        vec!["game::Entity::pos.x", "game::Entity::pos.y"]
    );
    // Untyped, though it missed.
    assert!(fields(22).is_empty());
    let cols = render::pick_columns(&v.columns, None).unwrap();
    let t = render::annotate(&v, &cols);
    assert!(t.contains("; game::Entity::flags"), "{t}");
    let a = views::disassembly(&p, &update);
    let f: Vec<(u64, Option<&str>)> = a
        .rows
        .iter()
        .map(|r| (r.addr, r.field.as_deref()))
        .collect();
    assert_eq!(
        f,
        vec![
            (0x2000, Some("game::Entity::flags")),
            (0x2004, Some("game::Entity::pos.x")),
            (0x2008, Some("game::Entity::pos.y")),
            (0x200c, None)
        ]
    );
    let cols = render::pick_columns(&a.columns, None).unwrap();
    assert!(render::asm(&a, &cols).contains("; game::Entity::pos.y"));
    // Without data types: no marker.
    let mut d = data_dump::dump();
    d.data = None;
    let p = Profile::new(d, ProfileOptions::default());
    let v = views::annotate(&p, &update, &|_| None);
    assert!(v.files[0].lines.iter().all(|l| l.fields.is_empty()));
}

#[test]
fn a_dump_without_data_types_is_an_error_of_its_own() {
    let mut d = data_dump::dump();
    d.data = None;
    let p = Profile::new(d, ProfileOptions::default());
    assert!(matches!(
        data::data(&p, &DataQuery::default()),
        Err(AnalysisError::NoDataTypes)
    ));
    assert!(matches!(
        data::layout(&p, "Entity"),
        Err(AnalysisError::NoDataTypes)
    ));
    // The committed v3 sample has none either.
    let v3 = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../dump/tests/data/v3.ccdump"
    ))
    .unwrap();
    let p = Profile::new(Dump::from_bytes(&v3).unwrap(), ProfileOptions::default());
    assert!(matches!(
        data::data(&p, &DataQuery::default()),
        Err(AnalysisError::NoDataTypes)
    ));
}

#[test]
fn json_of_the_data_views_round_trips_through_serde_json() {
    let p = profile();
    let v = data::data(&p, &DataQuery::default()).unwrap();
    let j: serde_json::Value = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
    assert_eq!(j["sort"], "mem");
    assert_eq!(j["coverage"]["typed"], 8372);
    assert_eq!(j["coverage"]["via_stack"], 100);
    assert_eq!(j["fields"][0]["label"], "game::Entity::flags");
    assert_eq!(j["fields"][0]["misses"], serde_json::json!([8192, 8192]));
    let mem = col(&v.columns, "mem");
    assert_eq!(j["types"][0]["costs"][mem], 8197);
    assert_eq!(j["modules"][0]["module"], "/bin/prog");
    let l = data::layout(&p, "Entity").unwrap();
    let j: serde_json::Value = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
    assert_eq!(j["kind"], "struct");
    assert_eq!(j["members"][7]["path"], "flags");
    assert_eq!(j["members"][7]["offset"], 160);
    assert_eq!(j["lines"][2]["hot"]["field"], "flags");
    assert_eq!(j["lines"][0]["false_sharing"][2]["tid"], 101);
    assert_eq!(j["padding"], 29);
}

#[test]
fn layout_of_a_class_with_a_base_class_and_a_union() {
    use coldcache_dump::data::NO_TYPE;
    use coldcache_dump::{DataType, Member, TypeKind, TypedAccess, Via};
    let m = |name: &str, offset, size, type_name: &str, ty| Member {
        name: name.into(),
        offset,
        size,
        type_name: type_name.into(),
        ty,
        ..Member::default()
    };
    let mut d = data_dump::dump();
    let data = d.data.as_mut().unwrap();
    // 2 Base { long x; }, 3 union U { int i; double d; },
    // 4 Derived : Base { U u; char c; } (24 bytes, 7 of tail padding).
    data.types.push(DataType {
        name: "Base".into(),
        kind: TypeKind::Class,
        size: 8,
        members: vec![m("x", 0, 8, "long", NO_TYPE)],
        decl: String::new(),
    });
    data.types.push(DataType {
        name: "U".into(),
        kind: TypeKind::Union,
        size: 8,
        members: vec![
            m("i", 0, 4, "int", NO_TYPE),
            m("d", 0, 8, "double", NO_TYPE),
        ],
        decl: String::new(),
    });
    data.types.push(DataType {
        name: "Derived".into(),
        kind: TypeKind::Class,
        size: 24,
        members: vec![
            Member {
                base: true,
                ..m("Base", 0, 8, "Base", 2)
            },
            m("u", 8, 8, "U", 3),
            m("c", 16, 1, "char", NO_TYPE),
        ],
        decl: String::new(),
    });
    // 0x2000 (8192 reads) now reads Derived::u.d, 0x2004 (100 writes)
    // writes Derived::Base.x.
    data.accesses[0] = TypedAccess {
        addr: 0x2000,
        ty: 4,
        offset: 8,
        size: 8,
        path: vec![1, 1],
        straddles: false,
        via: Via::Register,
        variable: "p".into(),
    };
    data.accesses[1] = TypedAccess {
        addr: 0x2004,
        ty: 4,
        offset: 0,
        size: 8,
        path: vec![0, 0],
        straddles: false,
        via: Via::Register,
        variable: "p".into(),
    };
    assert_eq!(data.label(&data.accesses[0]), "Derived::u.d");
    let p = Profile::new(d, ProfileOptions::default());
    let v = data::layout(&p, "Derived").unwrap();
    let rows: Vec<(u32, &str, u64, bool, u64, u64)> = v
        .members
        .iter()
        .map(|m| {
            (
                m.depth,
                m.path.as_str(),
                m.offset,
                m.base,
                m.reads,
                m.writes,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (0, "Base", 0, true, 0, 100),
            (1, "Base.x", 0, false, 0, 100),
            (0, "u", 8, false, 8192, 0),
            (1, "u.i", 8, false, 0, 0),
            (1, "u.d", 8, false, 8192, 0),
            (0, "c", 16, false, 0, 0),
        ]
    );
    assert!(v.members.iter().all(|m| m.hole_after == 0));
    assert_eq!(v.padding, 7);
    let t = render::layout(&v);
    for want in [
        "class Derived {",
        "Base <ancestor>;",
        "double d;",
        "/*     8     8 */",
        "/* size: 24, cachelines: 1, members: 3 */",
        "/* padding: 7 */",
    ] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
    assert!(!t.contains("hole"), "{t}");
    // U on its own: the union's members from there.
    let u = data::layout(&p, "U").unwrap();
    assert_eq!(u.members[1].reads, 8192);
    assert_eq!(u.padding, 0);
}
