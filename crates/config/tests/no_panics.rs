//! Bad input never panics: arbitrary sizes, geometry options, CPU lists, and
//! TOML files built from a template with arbitrary values.

use std::path::Path;

use coldcache_config::{
    format_size, from_toml_str, parse_cpu_list, parse_cpu_map, parse_size, parse_valgrind_geometry,
    to_toml, LEVEL_KEYS, PREFETCHER_KEYS, TOP_KEYS,
};
use proptest::prelude::*;

mod common;

/// Values that may appear on the right of `=`: numbers, sizes, words,
/// booleans, arrays, tables, and broken text.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        (0u64..5000).prop_map(|v| v.to_string()),
        Just("0".to_string()),
        Just("1".to_string()),
        Just("64".to_string()),
        Just("1.5".to_string()),
        Just("true".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("\"full\"".to_string()),
        Just("\"all\"".to_string()),
        Just("\"core\"".to_string()),
        Just("\"random\"".to_string()),
        Just("\"srrip\"".to_string()),
        Just("\"stream\"".to_string()),
        Just("\"exclusive\"".to_string()),
        Just("\"data\"".to_string()),
        Just("\"instruction\"".to_string()),
        "[0-9.]{1,6}[KMGkmgiB]{0,3}".prop_map(|s| format!("\"{s}\"")),
        "[a-z_-]{0,8}".prop_map(|s| format!("\"{s}\"")),
        "[^\n]{0,6}",
    ]
}

/// The schema's own keys (so this list cannot drift from it): top-level
/// scalar keys (not the table names nor `name`), every level key plus one
/// unknown key, every prefetcher key.
fn top_keys() -> Vec<&'static str> {
    TOP_KEYS
        .iter()
        .copied()
        .filter(|k| !matches!(*k, "name" | "level" | "prefetcher"))
        .collect()
}
fn level_keys() -> Vec<&'static str> {
    LEVEL_KEYS.iter().copied().chain(["bogus"]).collect()
}

fn assignments(keys: Vec<&'static str>, max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec((prop::sample::select(keys), value()), 0..max).prop_map(|kv| {
        let mut seen = std::collections::HashSet::new();
        kv.into_iter()
            .filter(|(k, _)| seen.insert(*k))
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect()
    })
}

fn file() -> impl Strategy<Value = String> {
    (
        assignments(top_keys(), 5),
        prop::collection::vec(assignments(level_keys(), 10), 0..4),
        prop::collection::vec(assignments(PREFETCHER_KEYS.to_vec(), 6), 0..2),
    )
        .prop_map(|(top, levels, pfs)| {
            let mut s = top;
            for l in levels {
                s.push_str("\n[[level]]\n");
                s.push_str(&l);
            }
            for p in pfs {
                s.push_str("\n[[prefetcher]]\n");
                s.push_str(&p);
            }
            s
        })
}

/// Reads `text` as a configuration file: anything accepted is valid and
/// round-trips; anything refused is an error naming the file, and the line
/// it gives is in the file.
fn read_anything(text: &str) -> Result<(), TestCaseError> {
    match from_toml_str(text, Path::new("fuzz.toml")) {
        Ok(cfg) => {
            prop_assert!(cfg.validate().is_ok());
            let again = from_toml_str(&to_toml(&cfg), Path::new("fuzz.toml"));
            prop_assert_eq!(again, Ok(cfg));
        }
        Err(e) => {
            let shown = e.to_string();
            prop_assert!(shown.starts_with("fuzz.toml"), "{}", shown);
            if let Some(line) = e.line {
                prop_assert!(
                    line >= 1 && line <= text.lines().count().max(1) + 1,
                    "{} in\n{}",
                    shown,
                    text
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn toml_files_never_panic(text in file()) {
        read_anything(&text)?;
    }

    /// Written configurations with a few lines damaged (a value replaced,
    /// a line dropped, an assignment added): about half are still valid,
    /// so the accepted branch of [`read_anything`] runs too (the files of
    /// [`file`] are almost never valid).
    #[test]
    fn damaged_written_files_never_panic(
        cfg in common::arb_config(),
        edits in prop::collection::vec(
            (any::<prop::sample::Index>(), 0u8..3, prop::sample::select(level_keys()), value()),
            0..3,
        ),
    ) {
        let mut lines: Vec<String> = to_toml(&cfg).lines().map(str::to_string).collect();
        for (at, op, key, value) in edits {
            let i = at.index(lines.len());
            match op {
                0 => {
                    if let Some((k, _)) = lines[i].split_once(" = ") {
                        lines[i] = format!("{k} = {value}");
                    }
                }
                1 => {
                    lines.remove(i);
                }
                _ => lines.insert(i + 1, format!("{key} = {value}")),
            }
        }
        read_anything(&(lines.join("\n") + "\n"))?;
    }

    /// Any printable text, and text from the alphabet of sizes, geometries,
    /// CPU lists and masks (digits, hex, units, `.`, `,`, `-`, blanks)
    /// where long numbers and many fields are likely.
    #[test]
    fn sizes_never_panic(
        text in prop_oneof!["\\PC{0,12}", "[0-9a-fA-FxKkMmGgiB., -]{0,40}", "([0-9]{1,11}[,-]?){0,5}"],
    ) {
        let _ = parse_size(&text);
        let _ = parse_valgrind_geometry(&text);
        let _ = parse_cpu_list(&text);
        let _ = parse_cpu_map(&text);
    }

    #[test]
    fn size_strings_never_panic(text in "[0-9.]{0,25} ?[KMGkmgiBb]{0,3}") {
        if let Ok(n) = parse_size(&text) {
            prop_assert_eq!(parse_size(&format_size(n)), Ok(n));
        }
    }

    #[test]
    fn format_size_round_trips(n in any::<u64>()) {
        prop_assert_eq!(parse_size(&format_size(n)), Ok(n));
    }
}
