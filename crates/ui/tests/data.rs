//! The web UI's data endpoints (`/api/data`, `/api/layout`) on the
//! hand-counted dump with data types of `crates/analysis/tests/common/
//! data_dump.rs` (every figure counted by hand there), and on a dump
//! without data types: the same views as `coldcache report --view data |
//! layout --json`, the same parameters refused as the other endpoints, and
//! the CLI's messages for what cannot be answered. The objects (`record
//! --objects`) on that dump with a hand-built `OBJS` section added.

#[path = "../../analysis/tests/common/data_dump.rs"]
mod data_dump;

use coldcache_analysis::data::{self, DataQuery};
use coldcache_analysis::{Profile, ProfileOptions};
use coldcache_ui::{App, Reply};
use serde_json::Value;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn profile(with_data: bool) -> Profile {
    let mut d = data_dump::dump();
    if !with_data {
        d.data = None;
    }
    Profile::new(d, ProfileOptions::default())
}

fn app(with_data: bool) -> App {
    App::new(
        vec![("entities.ccdump".into(), profile(with_data))],
        TOKEN.into(),
    )
}

fn get(app: &App, url: &str) -> Reply {
    let sep = if url.contains('?') { '&' } else { '?' };
    app.handle(&format!("{url}{sep}token={TOKEN}"), None)
}

fn json(r: &Reply) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

#[test]
fn data_answers_the_data_view_with_hand_counted_figures() {
    let a = app(true);
    let v = json(&get(&a, "/api/data"));
    // The analysis crate's view, serialised as the CLI's --json (the UI's
    // limit by default).
    let want = data::data(
        &profile(true),
        &DataQuery {
            limit: Some(200),
            ..DataQuery::default()
        },
    )
    .unwrap();
    assert_eq!(v, serde_json::to_value(&want).unwrap());
    // By hand: 8392 data accesses, 8372 typed (all with a field), 20
    // untyped; 3 of 4 instructions typed.
    let c = &v["coverage"];
    assert_eq!(
        (&c["accesses"], &c["typed"], &c["with_field"], &c["untyped"]),
        (&8392.into(), &8372.into(), &8372.into(), &20.into())
    );
    assert_eq!(c["typed_instructions"], 3);
    assert_eq!(c["via_register"], 8192);
    assert_eq!(v["sort"], "mem");
    assert_eq!(
        v["modules"][0]["found"],
        "2 types, 3 of 4 memory instructions typed"
    );
    assert_eq!(v["types"][0]["label"], "game::Entity");
    assert_eq!(v["types"][0]["reads"], 8272);
    assert_eq!(v["types"][0]["writes"], 100);
    let fields: Vec<(&str, u64, u64)> = v["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["label"].as_str().unwrap(),
                f["reads"].as_u64().unwrap(),
                f["writes"].as_u64().unwrap(),
            )
        })
        .collect();
    // By memory fetches: flags 8192, pos.y 5, pos.x 0 (then by
    // instructions: 100 before none).
    assert_eq!(
        fields,
        vec![
            ("game::Entity::flags", 8192, 0),
            ("game::Entity::pos.y", 80, 0),
            ("game::Entity::pos.x", 0, 100),
        ]
    );
    // pos.y: the worker's 5 from L2 and 5 from memory missed L1, 5 missed L2.
    assert_eq!(v["fields"][1]["misses"], serde_json::json!([10, 5]));

    // sort, filter and limit as the other tables take them.
    let v = json(&get(&a, "/api/data?sort=instructions&filter=pos&limit=1"));
    assert_eq!(v["sort"], "instructions");
    assert_eq!(v["fields_matched"], 2);
    assert_eq!(v["fields"].as_array().unwrap().len(), 1);
    assert_eq!(v["fields"][0]["label"], "game::Entity::pos.x");
    assert_eq!(v["types_matched"], 0, "no type's label matches pos");
    // The default sort spelt out or not is one cache entry.
    assert!(a.is_cached(&format!("/api/data?sort=mem&token={TOKEN}")));
}

#[test]
fn layout_answers_the_layout_view_with_holes_lines_and_flags() {
    let a = app(true);
    let v = json(&get(&a, "/api/layout?type=Entity"));
    let want = data::layout(&profile(true), "Entity").unwrap();
    assert_eq!(v, serde_json::to_value(&want).unwrap());
    assert_eq!(v["name"], "game::Entity");
    assert_eq!(v["size"], 192);
    assert_eq!(v["line_size"], 64);
    assert_eq!(v["padding"], 29);
    let members: Vec<(&str, u64, u64, u64)> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["depth"] == 0)
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["offset"].as_u64().unwrap(),
                m["size"].as_u64().unwrap(),
                m["hole_after"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        members,
        vec![
            ("pos", 0, 12, 4),
            ("id", 16, 4, 0),
            ("name", 20, 40, 4),
            ("hp", 64, 4, 92),
            ("flags", 160, 2, 0),
            ("dirty", 162, 1, 0),
        ]
    );
    assert_eq!(v["lines"].as_array().unwrap().len(), 3);
    assert_eq!(v["lines"][2]["hot"]["field"], "flags");
    assert_eq!(v["lines"][2]["hot"]["misses"], 8192);
    assert_eq!(v["lines"][0]["false_sharing"].as_array().unwrap().len(), 3);
    // The full name answers the same.
    assert_eq!(json(&get(&a, "/api/layout?type=game::Entity")), v);
}

#[test]
fn unknown_ambiguous_and_missing_types_get_the_clis_messages() {
    let a = app(true);
    let r = get(&a, "/api/layout?type=Nope");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(
        r.text()
            .contains("no data type named 'Nope'; the types are: Vec3, game::Entity"),
        "{}",
        r.text()
    );
    let r = get(&a, "/api/layout");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("type= is missing"), "{}", r.text());
    // Two types ending in ::Entity: both listed, with where each is
    // declared.
    let mut d = data_dump::dump();
    let data = d.data.as_mut().unwrap();
    let mut other = data.types[1].clone();
    other.name = "ui::Entity".into();
    other.decl = "/s/ui.h:4".into();
    data.types.push(other);
    let two = App::new(
        vec![("x".into(), Profile::new(d, ProfileOptions::default()))],
        TOKEN.into(),
    );
    let r = get(&two, "/api/layout?type=Entity");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("game::Entity (/s/entity.h:9)")
            && r.text().contains("ui::Entity (/s/ui.h:4)"),
        "{}",
        r.text()
    );
    assert_eq!(
        json(&get(&two, "/api/layout?type=ui::Entity"))["name"],
        "ui::Entity"
    );
}

#[test]
fn bad_parameters_are_refused_as_elsewhere() {
    let a = app(true);
    for (url, status, text) in [
        ("/api/data?sort=nope", 400, "no column named 'nope'"),
        ("/api/data?filter=(", 400, "invalid regular expression"),
        ("/api/data?limit=ten", 400, "limit=ten is not a number"),
        ("/api/data?dump=3", 404, "no dump 3"),
        ("/api/data?type=Entity", 400, "unknown parameter 'type'"),
        (
            "/api/layout?type=Entity&sort=mem",
            400,
            "unknown parameter 'sort'",
        ),
        (
            "/api/layout?type=Entity&dump=x",
            400,
            "dump=x is not a number",
        ),
    ] {
        let r = get(&a, url);
        assert_eq!(r.status, status, "{url}: {}", r.text());
        assert!(r.text().contains(text), "{url}: {}", r.text());
    }
}

#[test]
fn a_dump_without_data_types_gets_the_clis_message_not_a_500() {
    let a = app(false);
    // /api/meta says so: the page shows no Data tab.
    let m = json(&get(&a, "/api/meta"));
    assert_eq!(m["dumps"][0]["summary"]["data_types"], Value::Null);
    let with = json(&get(&app(true), "/api/meta"));
    assert_eq!(with["dumps"][0]["summary"]["data_types"]["typed"], 8372);
    for url in ["/api/data", "/api/layout?type=Entity"] {
        let r = get(&a, url);
        assert_eq!(r.status, 400, "{url}: {}", r.text());
        let e: Value = serde_json::from_slice(&r.body).unwrap();
        let e = e["error"].as_str().unwrap();
        assert!(
            e.starts_with("dump entities.ccdump has no data types")
                && e.contains("run `coldcache resolve entities.ccdump`"),
            "{url}: {e}"
        );
    }
}

/// The hand-counted dump with an `OBJS` section (`record --objects`): two
/// allocation sites and three mappings, one of them never touched.
///
/// | object | counts (served at L1, L2, memory) | misses L1, L2 |
/// |---|---|---|
/// | `malloc` in update (u.c:21) ← main (m.c:9): 4 blocks, 512 bytes, 1 freed | reads 10, 5, 5; writes 2, 0, 0 | 10, 5 |
/// | `new` in main (m.c:9): 1 block, 64 bytes | reads 0, 0, 30 | 30, 30 |
/// | `[heap]` | reads 1, 1, 0 | 1, 0 |
/// | the main thread's stack | reads 5; writes 5, at L1 | 0, 0 |
/// | a file mapping | nothing: not listed | |
/// | unmapped | reads 0, 0, 2 | 2, 2 |
fn objects_profile() -> Profile {
    use coldcache_dump::{AllocSite, ObjectCounts, ObjectRegion, Objects, StackNode};
    let counts = |r: [u64; 3], w: [u64; 3]| ObjectCounts {
        served: [r.to_vec(), w.to_vec()],
        coherence: [0, 0],
    };
    let region = |start, end, perms: &str, path: &str, thread, c| ObjectRegion {
        start,
        end,
        perms: perms.into(),
        path: path.into(),
        thread,
        tls: None,
        counts: c,
    };
    let mut d = data_dump::dump();
    // Stack 1: main called update at 0x1000; stack 2: update called the
    // allocator at 0x2004.
    d.stacks.push(StackNode {
        parent: 0,
        call_site: 0x1000,
        callee: 0x2000,
    });
    d.stacks.push(StackNode {
        parent: 1,
        call_site: 0x2004,
        callee: 0,
    });
    d.objects = Some(Objects {
        coherence: true,
        named_at_end: true,
        allocators: vec!["malloc".into(), "_Znwm".into()],
        allocations: 5,
        frees: 1,
        unknown_frees: 2,
        unreturned: 0,
        live: 4,
        untracked: 0,
        sites: vec![
            AllocSite {
                stack: 2,
                allocator: "malloc".into(),
                blocks: 4,
                bytes: 512,
                freed: 1,
                counts: counts([10, 5, 5], [2, 0, 0]),
            },
            AllocSite {
                stack: 1,
                allocator: "new".into(),
                blocks: 1,
                bytes: 64,
                freed: 0,
                counts: counts([0, 0, 30], [0; 3]),
            },
        ],
        regions: vec![
            region(
                0x10_0000,
                0x20_0000,
                "rw-p",
                "[heap]",
                None,
                counts([1, 1, 0], [0; 3]),
            ),
            region(
                0x30_0000,
                0x30_1000,
                "r--p",
                "/lib/x.so",
                None,
                counts([0; 3], [0; 3]),
            ),
            region(
                0x7ff0_0000,
                0x7ff2_0000,
                "rw-p",
                "",
                Some(0),
                counts([5, 0, 0], [5, 0, 0]),
            ),
        ],
        unmapped: counts([0, 0, 2], [0; 3]),
        by_instruction: None,
        globals: None,
        frames: None,
    });
    Profile::new(d, ProfileOptions::default())
}

#[test]
fn data_serves_the_objects_as_the_analysis_crate_ranks_them() {
    let a = App::new(
        vec![("objects.ccdump".into(), objects_profile())],
        TOKEN.into(),
    );
    let v = json(&get(&a, "/api/data"));
    // The analysis crate's objects, as `report --view data --json` gives
    // them (the UI's limit by default).
    let want = coldcache_analysis::objects::objects(&objects_profile(), Some(200)).unwrap();
    assert_eq!(v["objects"], serde_json::to_value(&want).unwrap());
    assert_eq!(v["objects_note"], "");
    let o = &v["objects"];
    // By hand: 22 + 30 accesses in blocks, 2 + 10 + 2 in mappings.
    assert_eq!(
        (o["accesses"].as_u64(), o["in_blocks"].as_u64()),
        (Some(66), Some(52))
    );
    assert_eq!(o["levels"], serde_json::json!(["L1", "L2"]));
    assert_eq!(
        (
            o["allocations"].as_u64(),
            o["frees"].as_u64(),
            o["unknown_frees"].as_u64(),
            o["live"].as_u64(),
            o["allocators"].as_u64()
        ),
        (Some(5), Some(1), Some(2), Some(4), Some(2))
    );
    // Sites by first-level misses: new's 30 before malloc's 10.
    let s = &o["sites"];
    assert_eq!(s.as_array().unwrap().len(), 2);
    let row = |r: &Value| {
        (
            r["allocator"].as_str().unwrap().to_string(),
            r["blocks"].as_u64().unwrap(),
            r["bytes"].as_u64().unwrap(),
            r["accesses"].as_u64().unwrap(),
            r["reads"].as_u64().unwrap(),
            r["writes"].as_u64().unwrap(),
            r["misses"].clone(),
        )
    };
    assert_eq!(
        row(&s[0]),
        ("new".into(), 1, 64, 30, 30, 0, serde_json::json!([30, 30]))
    );
    assert_eq!(
        row(&s[1]),
        (
            "malloc".into(),
            4,
            512,
            22,
            20,
            2,
            serde_json::json!([10, 5])
        )
    );
    assert_eq!(s[1]["freed"], 1);
    // The whole allocation stack, innermost first.
    assert_eq!(
        s[1]["frames"],
        serde_json::json!(["update (u.c:21)", "main (m.c:9)"])
    );
    assert_eq!(s[1]["label"], "malloc in update (u.c:21)");
    // The others: the untouched file mapping left out; unmapped (2 L1
    // misses), the heap (1), the main thread's stack (0).
    let kinds: Vec<(&str, u64, Value)> = o["others"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap(),
                r["accesses"].as_u64().unwrap(),
                r["misses"].clone(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("unmapped", 2, serde_json::json!([2, 2])),
            ("heap, allocated earlier", 2, serde_json::json!([1, 0])),
            ("stack", 10, serde_json::json!([0, 0])),
        ]
    );
    assert_eq!(o["others"][2]["label"], "stack of thread 100 (main)");
    // limit= cuts each list, as the CLI's --limit.
    let one = json(&get(&a, "/api/data?limit=1"));
    assert_eq!(one["objects"]["sites"].as_array().unwrap().len(), 1);
    assert_eq!(one["objects"]["others"].as_array().unwrap().len(), 1);
    assert_eq!(one["objects"]["sites"][0]["allocator"], "new");
}

#[test]
fn a_dump_without_objects_says_how_to_get_them() {
    let v = json(&get(&app(true), "/api/data"));
    assert_eq!(v["objects"], Value::Null);
    assert_eq!(
        v["objects_note"],
        "this dump has no object data (record with --objects to track heap blocks and mappings)"
    );
}

/// The comparison by data type, field and object (`/api/diff?by=type|
/// field|object`) answers what `coldcache diff --by` answers: the
/// analysis crate's comparison of the two dumps, its own columns.
#[test]
fn the_comparison_by_type_field_and_object_is_the_analysis_crates() {
    use coldcache_analysis::diff::{self, DataRows, DiffQuery};
    let two = App::new(
        vec![
            ("a.ccdump".into(), objects_profile()),
            ("b.ccdump".into(), objects_profile()),
        ],
        TOKEN.into(),
    );
    for (by, rows) in [
        ("type", DataRows::Type),
        ("field", DataRows::Field),
        ("object", DataRows::Object),
    ] {
        let v = json(&get(&two, &format!("/api/diff?by={by}")));
        let want = diff::diff(
            &objects_profile(),
            &objects_profile(),
            &DiffQuery {
                limit: Some(200),
                data: Some(rows),
                ..DiffQuery::default()
            },
        )
        .unwrap();
        assert_eq!(v, serde_json::to_value(&want).unwrap(), "by={by}");
        assert_eq!(v["data"], by);
        assert!(!v["rows"].as_array().unwrap().is_empty(), "by={by}: {v}");
    }
    // The objects' own columns, ordered by the first level's misses.
    let v = json(&get(&two, "/api/diff?by=object"));
    let names: Vec<&str> = v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"accesses") && names.contains(&"blocks"),
        "{names:?}"
    );
    assert_eq!(v["sort"], "miss:L1");
    assert_eq!(get(&two, "/api/diff?by=bogus").status, 400);
}
