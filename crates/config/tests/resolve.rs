//! `resolve`: preset names, `host`, TOML paths, and the unknown-name error.

use std::fs;
use std::path::Path;

use coldcache_config::{load_file, names, resolve, Error};
use coldcache_sim::presets;

#[test]
fn every_preset_resolves() {
    for (name, _) in presets::NAMES {
        assert_eq!(resolve(name).unwrap(), presets::by_name(name).unwrap());
    }
    // The simulator's alias too.
    assert_eq!(resolve("spr").unwrap(), presets::sapphire_rapids());
}

#[test]
fn names_lists_presets_and_host() {
    let n: Vec<&str> = names().iter().map(|(n, _)| *n).collect();
    for (p, _) in presets::NAMES {
        assert!(n.contains(p));
    }
    assert_eq!(n.last(), Some(&"host"));
}

#[test]
fn unknown_name_lists_the_presets() {
    let e = resolve("zen5").unwrap_err();
    assert!(
        matches!(&e, Error::Unknown { suggestion: Some(s), .. } if s == "zen4"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "unknown cache configuration \"zen5\" (did you mean \"zen4\"?): expected a preset \
         (jaguar, cachegrind, sapphire-rapids, zen4, host) or a path to a .toml file"
    );
    let e = resolve("pentium").unwrap_err().to_string();
    assert!(
        e.starts_with("unknown cache configuration \"pentium\": expected a preset (jaguar"),
        "{e}"
    );
}

#[test]
fn paths_are_files() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("resolve");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mine.toml");
    fs::write(
        &file,
        "cores = 2\n[[level]]\nlevel = 1\nsize = \"8K\"\nassoc = 2\nshared_by = \"all\"\n",
    )
    .unwrap();
    let c = resolve(file.to_str().unwrap()).unwrap();
    assert_eq!(c.name, "mine");
    assert_eq!(c.cores, 2);
    assert_eq!(c, load_file(&file).unwrap());

    // Missing files: an I/O error naming the path.
    let e = resolve("caches/missing.toml").unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("caches/missing.toml: cannot read:"),
        "{e}"
    );
    let e = resolve("no-dir-but.toml").unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");

    // Bad files: the file error, naming file, line and key.
    let bad = dir.join("bad.toml");
    fs::write(&bad, "[[level]]\nlevel = 1\nsize = \"48Q\"\nassoc = 8\n").unwrap();
    let e = resolve(bad.to_str().unwrap()).unwrap_err();
    assert!(matches!(e, Error::File(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}:3: level[0].size: \"48Q\" is not a size (expected bytes, or a number with K, KiB, M, MiB, G, GiB, T, TiB)",
            bad.display()
        )
    );
}

#[test]
fn example_files_resolve_by_path() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/caches/small-2level.toml");
    assert_eq!(resolve(p.to_str().unwrap()).unwrap().name, "small-2level");
}

#[test]
fn host_resolves_or_fails_cleanly() {
    match resolve("host") {
        Ok(c) => c.validate().unwrap(),
        Err(e) => {
            assert!(matches!(e, Error::Sysfs(_)), "{e:?}");
            assert!(e.to_string().starts_with("cache preset \"host\": "), "{e}");
        }
    }
}
