//! The TOML schema: what it accepts, defaults, and every kind of error, each
//! naming the file, the line and the key.

use std::path::Path;

use coldcache_config::{from_toml_str, FileError};
use coldcache_sim::{
    CacheKind, HierarchyConfig, Inclusion, LookupMode, PrefetcherKind, ReplacementPolicy, Sharing,
    StraddleMode, WritePolicy,
};

const FILE: &str = "caches/x.toml";

fn parse(text: &str) -> Result<HierarchyConfig, FileError> {
    from_toml_str(text, Path::new(FILE))
}

fn error(text: &str) -> FileError {
    match parse(text) {
        Ok(c) => panic!("expected an error, parsed {c:?}"),
        Err(e) => e,
    }
}

const MINIMAL: &str = r#"
[[level]]
level = 1
size = "32K"
assoc = 8
"#;

#[test]
fn minimal_file_and_defaults() {
    let c = parse(MINIMAL).unwrap();
    let d = HierarchyConfig::default();
    assert_eq!(c.name, "x", "the name defaults to the file stem");
    assert_eq!(c.cores, 1);
    assert_eq!(c.straddle, d.straddle);
    assert_eq!(c.lookup, d.lookup);
    assert_eq!(c.coherence, d.coherence);
    assert_eq!(c.prefetch_lag, d.prefetch_lag);
    assert_eq!(c.classify_misses, d.classify_misses);
    assert_eq!(c.coherence_table, d.coherence_table);
    assert!(c.prefetchers.is_empty());
    let l = &c.levels[0];
    assert_eq!(l.name, "L1");
    assert_eq!(l.kind, CacheKind::Unified);
    assert_eq!(l.size, 32768);
    assert_eq!(l.line_size, 64);
    assert_eq!(l.assoc, 8);
    assert_eq!(l.policy, ReplacementPolicy::Lru);
    assert_eq!(l.write, WritePolicy::WriteBack);
    assert_eq!(l.inclusion, Inclusion::NonInclusive);
    assert_eq!(l.sharing, Sharing::Core);
    assert_eq!(l.latency, None);
}

#[test]
fn the_example_from_the_brief() {
    let c = parse(
        r#"
name = "my-machine"
cores = 8
straddle = "per-line"      # or "whole" (Cachegrind)
lookup = "on-miss"         # or "all-levels"
coherence = true
classify_misses = false
prefetch_lag = 8

[[level]]
name = "L1d"
level = 1
kind = "data"
size = "48K"
line = 64
assoc = 12
policy = "lru"
write = "write-back"
inclusion = "non-inclusive"
shared_by = "core"
latency = 5

[[level]]
name = "L1i"
level = 1
kind = "instruction"
size = 32768
assoc = 8

[[level]]
name = "L2"
level = 2
size = "2MiB"
assoc = 16
shared_by = 4

[[prefetcher]]
kind = "stream"
level = 2
degree = 2
distance = 4
streams = 16
cross_page = false
"#,
    )
    .unwrap();
    assert_eq!(c.name, "my-machine");
    assert_eq!(c.cores, 8);
    assert_eq!(c.straddle, StraddleMode::PerLine);
    assert_eq!(c.lookup, LookupMode::OnMiss);
    assert_eq!(c.levels[0].size, 48 << 10);
    assert_eq!(c.levels[0].latency, Some(5));
    assert_eq!(c.levels[1].size, 32768);
    assert_eq!(c.levels[2].sharing, Sharing::Group { cores: 4 });
    assert_eq!(
        c.prefetchers[0].kind,
        PrefetcherKind::Stream {
            streams: 16,
            degree: 2,
            distance: 4
        }
    );
    assert_eq!(c.prefetchers[0].level, 2);
}

#[test]
fn spellings_of_enum_values() {
    let c = parse(
        r#"
straddle = "per_line"
lookup = "all_levels"
cores = 2
[[level]]
level = 1
kind = "Data"
size = "32K"
assoc = 8
write = "write_through"
policy = "TREE_PLRU"
[[level]]
level = 1
kind = "instruction"
size = "32K"
assoc = 8
[[level]]
level = 2
size = "1M"
assoc = 16
inclusion = "non_inclusive"
shared_by = "all"
policy = "srrip"
[[prefetcher]]
kind = "ip_stride"
level = 1
"#,
    )
    .unwrap();
    assert_eq!(c.straddle, StraddleMode::PerLine);
    assert_eq!(c.lookup, LookupMode::AllLevels);
    assert_eq!(c.levels[0].kind, CacheKind::Data);
    assert_eq!(c.levels[0].write, WritePolicy::WriteThrough);
    assert_eq!(c.levels[0].policy, ReplacementPolicy::TreePlru);
    assert_eq!(c.levels[0].name, "L1d");
    assert_eq!(c.levels[1].name, "L1i");
    assert_eq!(c.levels[2].name, "L2");
    assert_eq!(c.levels[2].sharing, Sharing::All);
    assert_eq!(
        c.levels[2].policy,
        ReplacementPolicy::Srrip { bits: 2 },
        "rrpv_bits defaults to 2"
    );
    assert_eq!(
        c.prefetchers[0].kind,
        PrefetcherKind::IpStride {
            entries: 64,
            degree: 1,
            distance: 1
        }
    );
    assert!(!c.prefetchers[0].cross_page);
}

#[test]
fn sets_and_full_associativity() {
    let c = parse(
        r#"
[[level]]
level = 1
sets = 64
line = 32
assoc = 4
[[level]]
level = 2
size = "4K"
assoc = "full"
policy = "random"
seed = 7
"#,
    )
    .unwrap();
    assert_eq!(c.levels[0].size, 64 * 32 * 4);
    assert_eq!(c.levels[1].assoc, 64);
    assert_eq!(c.levels[1].sets(), 1);
    assert_eq!(c.levels[1].policy, ReplacementPolicy::Random { seed: 7 });
}

#[test]
fn one_byte_lines_for_cache_lab() {
    let c = parse("[[level]]\nlevel = 1\nsets = 16\nline = 1\nassoc = 2\n").unwrap();
    assert_eq!(c.levels[0].line_size, 1);
    assert_eq!(c.levels[0].size, 32);
}

/// `(file text, expected Display)`: every error names the file, the line and
/// the key.
#[test]
fn error_messages() {
    let cases: &[(&str, &str)] = &[
        // A size that is not one.
        (
            "[[level]]\nlevel = 1\nsize = \"48Q\"\nassoc = 8\n",
            r#"caches/x.toml:3: level[0].size: "48Q" is not a size (expected bytes, or a number with K, KiB, M, MiB, G, GiB, T, TiB)"#,
        ),
        (
            "[[level]]\nlevel = 1\nsize = \"1.3K\"\nassoc = 8\n",
            r#"caches/x.toml:3: level[0].size: "1.3K" is not a whole number of bytes"#,
        ),
        (
            "[[level]]\nlevel = 1\nsize = 1.5\nassoc = 8\n",
            r#"caches/x.toml:3: level[0].size: 1.5 is not a size (write fractions as a string with a unit, e.g. "1.25MiB")"#,
        ),
        (
            "[[level]]\nlevel = 1\nsize = -4096\nassoc = 8\n",
            "caches/x.toml:3: level[0].size: -4096 is not a size (a size cannot be negative)",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 0\nassoc = 8\n",
            "caches/x.toml:3: level[0].size: must be more than 0",
        ),
        // Unknown keys, with a suggestion.
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n\n[[level]]\nlevel = 2\nsize = 8192\nasoc = 8\n",
            r#"caches/x.toml:9: level[1].asoc: unknown key (did you mean "assoc"? expected one of name, level, kind, size, sets, line, assoc, policy, seed, rrpv_bits, write, inclusion, shared_by, latency)"#,
        ),
        (
            "cores = 2\nclassify-misses = true\n",
            r#"caches/x.toml:2: classify-misses: unknown key (did you mean "classify_misses"? expected one of name, cores, straddle, lookup, coherence, classify_misses, prefetch_lag, coherence_table, level, prefetcher)"#,
        ),
        (
            "[[prefetcher]]\nkind = \"stream\"\nlevel = 1\nwindow = 3\n",
            "caches/x.toml:4: prefetcher[0].window: unknown key (expected one of kind, level, degree, distance, streams, entries, cross_page)",
        ),
        // Not TOML at all.
        ("cores = 2\nname = \"unterminated\n", "caches/x.toml:2: not valid TOML: "),
        ("cores = 2\ncores = 3\n", "caches/x.toml:2: not valid TOML: "),
        // Types.
        (
            "cores = \"8\"\n",
            r#"caches/x.toml:1: cores: invalid type: string "8", expected a whole number from 0 to 18446744073709551615"#,
        ),
        (
            "[[level]]\nlevel = 300\nsize = 4096\nassoc = 8\n",
            "caches/x.toml:2: level[0].level: invalid value: integer `300`, expected a whole number from 0 to 255",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = \"eight\"\n",
            r#"caches/x.toml:4: level[0].assoc: "eight" is not an associativity (expected a number of ways, or "full")"#,
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = -2\n",
            r#"caches/x.toml:4: level[0].assoc: -2 is not an associativity (expected a number of ways from 1 to 4294967295, or "full")"#,
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\npolicy = \"lur\"\n",
            r#"caches/x.toml:5: level[0].policy: "lur" is not a replacement policy (expected one of lru, tree-plru, fifo, random, srrip; did you mean "lru"?)"#,
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\nkind = 3\n",
            "caches/x.toml:5: level[0].kind: invalid type: integer `3`, expected cache kind (instruction, data, unified)",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\nshared_by = \"socket\"\n",
            r#"caches/x.toml:5: level[0].shared_by: "socket" is not a sharing (expected "core", "all", or a number of cores per instance)"#,
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\nshared_by = 0\n",
            r#"caches/x.toml:5: level[0].shared_by: 0 is not a group size (expected "core", "all", or a number of cores of at least 1)"#,
        ),
        (
            "straddle = \"halves\"\n[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n",
            "caches/x.toml:1: straddle: \"halves\" is not a straddle mode (expected one of per-line, whole)",
        ),
        (
            "coherence = 1\n[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n",
            "caches/x.toml:1: coherence: invalid type: integer `1`, expected a boolean",
        ),
        // Missing and contradictory keys.
        (
            "cores = 1\n\n[[level]]\nlevel = 1\nsize = 4096\n",
            "caches/x.toml:3: level[0]: missing key \"assoc\"",
        ),
        (
            "[[level]]\nlevel = 1\nassoc = 8\n",
            "caches/x.toml:1: level[0]: missing key \"size\" (or \"sets\")",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nsets = 8\nassoc = 8\n",
            "caches/x.toml:4: level[0].sets: give either size or sets, not both",
        ),
        (
            "[[level]]\nlevel = 1\nsets = 8\nassoc = \"full\"\n",
            "caches/x.toml:4: level[0].assoc: \"full\" needs size, not sets",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\nseed = 3\n",
            "caches/x.toml:5: level[0].seed: only applies to policy = \"random\"",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\nrrpv_bits = 3\npolicy = \"lru\"\n",
            "caches/x.toml:5: level[0].rrpv_bits: only applies to policy = \"srrip\"",
        ),
        (
            "[level]\nlevel = 1\nsize = 4096\nassoc = 8\n",
            "caches/x.toml:1: level: must be an array of tables: write [[level]], not [level]",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n[[prefetcher]]\nkind = \"next-line\"\nlevel = 1\nstreams = 4\n",
            "caches/x.toml:8: prefetcher[0].streams: does not apply to kind = \"next-line\"",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n[[prefetcher]]\nkind = \"stream\"\nlevel = 1\nentries = 4\n",
            "caches/x.toml:8: prefetcher[0].entries: does not apply to kind = \"stream\"",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n[[prefetcher]]\nkind = \"next-line\"\nlevel = 1\ndistance = 4\n",
            "caches/x.toml:8: prefetcher[0].distance: does not apply to kind = \"next-line\"",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n[[prefetcher]]\nkind = \"prefetchall\"\nlevel = 1\n",
            "caches/x.toml:6: prefetcher[0].kind: \"prefetchall\" is not a prefetcher kind (expected one of next-line, ip-stride, stream)",
        ),
        // Errors found by the simulator's validate(), translated to this schema.
        ("cores = 2\n", "caches/x.toml: level: at least one [[level]] table is required"),
        (
            "cores = 0\n[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n",
            "caches/x.toml:1: cores: must be at least 1",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4608\nline = 48\nassoc = 8\n",
            "caches/x.toml:4: level[0].line: 48 is not a power of two",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n\n[[level]]\nlevel = 2\nsize = \"30000\"\nassoc = 8\n",
            "caches/x.toml:8: level[1].size: 30000 bytes is not a whole number of sets of 8 ways x 64 bytes",
        ),
        (
            "cores = 4\n[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\nshared_by = 3\n",
            "caches/x.toml:6: level[0].shared_by: group of 3 cores does not divide 4 cores",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\npolicy = \"srrip\"\nrrpv_bits = 9\n",
            "caches/x.toml:6: level[0].rrpv_bits: 9 is not in 1..=7",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\ninclusion = \"exclusive\"\n",
            "caches/x.toml:5: level[0].inclusion: a first level cannot be exclusive",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n[[prefetcher]]\nkind = \"stream\"\nlevel = 5\n",
            "caches/x.toml:7: prefetcher[0].level: no level 5 in this hierarchy",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n[[prefetcher]]\nkind = \"stream\"\nlevel = 1\nstreams = 0\n",
            "caches/x.toml:8: prefetcher[0].streams: the table needs 1..=1048576 entries",
        ),
        (
            "[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n[[prefetcher]]\nkind = \"next-line\"\nlevel = 1\ndegree = 0\n",
            "caches/x.toml:8: prefetcher[0].degree: 0 is not in 1..=64",
        ),
    ];
    let mut failures = Vec::new();
    for (text, want) in cases {
        let got = error(text).to_string();
        if !got.starts_with(want) {
            failures.push(format!("file:\n{text}\n  want: {want}\n  got:  {got}\n"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn error_fields() {
    let e = error("[[level]]\nlevel = 1\nsize = \"48Q\"\nassoc = 8\n");
    assert_eq!(e.file, Path::new(FILE));
    assert_eq!(e.line, Some(3));
    assert_eq!(e.key.as_deref(), Some("level[0].size"));
    assert!(e.problem.starts_with("\"48Q\" is not a size"));
}

#[test]
fn validate_errors_for_levels_without_keys_point_at_the_table() {
    // Two unified level-1 caches: validate() names "levels"; no key in the
    // file, so the line is that of the first [[level]].
    let e = error("cores = 1\n[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n[[level]]\nlevel = 1\nsize = 4096\nassoc = 8\n");
    assert_eq!(e.key.as_deref(), Some("level"));
    assert!(
        e.problem.contains("level 1 must hold one unified cache"),
        "{e}"
    );
    assert!(e.line.is_some(), "{e}");
}
