//! The configuration handed to the preloaded library: `coldcache record`
//! resolves it (presets, `host`, TOML files) with `coldcache-config` and
//! passes its JSON in `COLDCACHE_CACHE_JSON`; the library, which links no
//! TOML parser, must rebuild exactly that configuration and refuse what is
//! not one. `coldcache-config` (the parser the library no longer links) is
//! the truth here.

use std::path::Path;

use coldcache_capture::capi::resolve_cache;
use coldcache_capture::preload::cache_from_json;
use coldcache_sim::presets;

fn examples() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/caches");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    assert!(
        !v.is_empty(),
        "no example configurations in {}",
        dir.display()
    );
    v
}

#[test]
fn json_handover_rebuilds_every_preset_and_example_file() {
    let mut specs: Vec<String> = presets::NAMES.iter().map(|(n, _)| n.to_string()).collect();
    specs.extend(examples().iter().map(|p| p.display().to_string()));
    for spec in specs {
        let cfg = coldcache_config::resolve(&spec).unwrap();
        let json = serde_json::to_string(&cfg).unwrap();
        let back = cache_from_json(&json).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(back, cfg, "{spec}");
        // The dump's `meta.cache_toml` is written by the library from this
        // configuration: it must read back (with the real parser) as the
        // configuration the user chose.
        let text = coldcache_config_slim::to_toml(&back);
        let reread = coldcache_config::from_toml_str(&text, Path::new("meta.toml")).unwrap();
        assert_eq!(reread, cfg, "{spec}\n{text}");
    }
}

#[test]
fn json_handover_refuses_bad_json_and_invalid_configurations_naming_the_variable() {
    let e = cache_from_json("{\"name\": ").unwrap_err();
    assert!(e.contains("COLDCACHE_CACHE_JSON"), "{e}");
    let mut cfg = presets::by_name("jaguar").unwrap();
    cfg.levels[0].line_size = 48; // not a power of two
    let e = cache_from_json(&serde_json::to_string(&cfg).unwrap()).unwrap_err();
    assert!(e.contains("COLDCACHE_CACHE_JSON"), "{e}");
    assert!(e.contains("invalid"), "{e}");
}

#[test]
fn c_api_cache_resolves_presets_and_host_like_the_cli() {
    for (name, _) in presets::NAMES {
        assert_eq!(
            resolve_cache(name).unwrap(),
            coldcache_config::resolve(name).unwrap(),
            "{name}"
        );
    }
    // `host` reads sysfs: the same answer as the CLI's reader, or an error
    // on both (a machine without sysfs caches).
    match (resolve_cache("host"), coldcache_config::resolve("host")) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert!(a.contains("host"), "{a} / {b}"),
        (a, b) => panic!("library {a:?}, CLI {b:?}"),
    }
}

#[test]
fn c_api_cache_file_is_refused_naming_the_file_and_coldcache_record() {
    let file = examples()[0].display().to_string();
    let e = resolve_cache(&file).unwrap_err();
    assert!(e.contains(&file), "{e}");
    assert!(e.contains("coldcache record --cache FILE"), "{e}");
    let e = resolve_cache("jaguarr").unwrap_err();
    assert!(e.contains("\"jaguarr\"") && e.contains("jaguar"), "{e}");
}
