//! The web UI's data endpoints (`/api/data`, `/api/layout`) on the
//! hand-counted dump with data types of `crates/analysis/tests/common/
//! data_dump.rs` (every figure counted by hand there), and on a dump
//! without data types: the same views as `coldcache report --view data |
//! layout --json`, the same parameters refused as the other endpoints, and
//! the CLI's messages for what cannot be answered.

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
