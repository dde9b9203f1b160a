//! `to_toml` writes what `from_toml_str` reads: presets, the example files,
//! hand-built and random configurations survive a round trip unchanged.

mod common;

use std::path::{Path, PathBuf};

use coldcache_config::{cachelab, from_toml_str, load_file, to_toml};
use coldcache_sim::{
    presets, HierarchyConfig, Inclusion, LevelConfig, PrefetcherConfig, PrefetcherKind,
    ReplacementPolicy, Sharing, StraddleMode, WritePolicy,
};

fn round_trip(cfg: &HierarchyConfig) {
    let text = to_toml(cfg);
    let back = from_toml_str(&text, Path::new("round-trip.toml"))
        .unwrap_or_else(|e| panic!("{}: {e}\n{text}", cfg.name));
    assert_eq!(&back, cfg, "{text}");
    // Writing again gives the same text.
    assert_eq!(to_toml(&back), text);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

    /// Any valid configuration (names of any characters, every policy,
    /// sharing, prefetcher and limit) reads back as itself, and writing it
    /// again gives the same text.
    #[test]
    fn random_configs_round_trip(cfg in common::arb_config()) {
        proptest::prop_assert_eq!(cfg.validate(), Ok(()));
        let text = to_toml(&cfg);
        let back = from_toml_str(&text, Path::new("random.toml"));
        let back = match back {
            Ok(back) => back,
            Err(e) => return Err(proptest::test_runner::TestCaseError::fail(format!("{e}\n{text}"))),
        };
        proptest::prop_assert_eq!(&back, &cfg, "{}", text);
        proptest::prop_assert_eq!(to_toml(&back), text);
    }
}

#[test]
fn every_preset_round_trips() {
    for (name, _) in presets::NAMES {
        let cfg = presets::by_name(name).unwrap();
        round_trip(&cfg);
    }
}

#[test]
fn the_writer_spells_the_schema() {
    let text = to_toml(&presets::zen4());
    for want in [
        "name = \"zen4\"\n",
        "cores = 8\n",
        "straddle = \"per-line\"\n",
        "lookup = \"on-miss\"\n",
        "[[level]]\nname = \"L1i\"\nlevel = 1\nkind = \"instruction\"\nsize = \"32KiB\"\nline = 64\nassoc = 8\npolicy = \"tree-plru\"\nwrite = \"write-back\"\ninclusion = \"non-inclusive\"\nshared_by = \"core\"\nlatency = 4\n",
        "size = \"32MiB\"",
        "inclusion = \"exclusive\"\nshared_by = \"all\"",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert!(
        !text.contains("coherence_table"),
        "default coherence_table is left out"
    );
    let spr = to_toml(&presets::sapphire_rapids());
    assert!(
        spr.contains(
            "size = \"15MiB\"\nline = 64\nassoc = 15\npolicy = \"srrip\"\nrrpv_bits = 2\n"
        ),
        "{spr}"
    );
}

#[test]
fn cachelab_configs_round_trip() {
    for (s, e, b) in [(4, 1, 4), (0, 4, 0), (1, 1, 1), (5, 2, 3), (10, 3, 6)] {
        round_trip(&cachelab(s, e, b).unwrap());
    }
}

#[test]
fn every_field_round_trips() {
    let level = |name: &str, n: u8, size: u64, assoc: u32, line: u32| LevelConfig {
        name: name.into(),
        level: n,
        kind: coldcache_sim::CacheKind::Unified,
        size,
        line_size: line,
        assoc,
        policy: ReplacementPolicy::Lru,
        write: WritePolicy::WriteBack,
        inclusion: Inclusion::NonInclusive,
        sharing: Sharing::Core,
        latency: None,
    };
    let mut l1 = level("tiny \"quoted\" L1", 1, 1000, 5, 8);
    l1.policy = ReplacementPolicy::Random { seed: u64::MAX };
    l1.write = WritePolicy::WriteThrough;
    l1.latency = Some(0);
    let mut l2 = level("L2", 2, 3 * 4 * 128, 4, 128);
    l2.policy = ReplacementPolicy::Fifo;
    l2.sharing = Sharing::Group { cores: 2 };
    l2.inclusion = Inclusion::Inclusive;
    let mut l3 = level("L3", 3, 1_966_080, 15, 64);
    l3.policy = ReplacementPolicy::Srrip { bits: 7 };
    l3.sharing = Sharing::All;
    l3.inclusion = Inclusion::Exclusive;
    let cfg = HierarchyConfig {
        name: "every\\field\ttab".into(),
        cores: 4,
        levels: vec![l1, l2, l3],
        straddle: StraddleMode::Whole,
        lookup: coldcache_sim::LookupMode::AllLevels,
        coherence: false,
        prefetchers: vec![
            PrefetcherConfig {
                kind: PrefetcherKind::NextLine { degree: 3 },
                level: 1,
                cross_page: true,
            },
            PrefetcherConfig {
                kind: PrefetcherKind::IpStride {
                    entries: 256,
                    degree: 2,
                    distance: 0,
                },
                level: 2,
                cross_page: false,
            },
            PrefetcherConfig {
                kind: PrefetcherKind::Stream {
                    streams: 32,
                    degree: 4,
                    distance: 8,
                },
                level: 3,
                cross_page: true,
            },
        ],
        prefetch_lag: 0,
        classify_misses: true,
        coherence_table: 123,
    };
    cfg.validate().unwrap();
    round_trip(&cfg);
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/caches")
}

#[test]
fn example_files_parse_and_round_trip() {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let cfg = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
            round_trip(&cfg);
            found.push(cfg);
        }
    }
    assert!(
        found.len() >= 2,
        "expected the example files in {}",
        examples_dir().display()
    );
}

#[test]
fn small_two_level_example() {
    let c = load_file(&examples_dir().join("small-2level.toml")).unwrap();
    assert_eq!(c.name, "small-2level");
    assert_eq!(c.cores, 2);
    assert_eq!(c.levels.len(), 3);
    let l2 = &c.levels[2];
    assert_eq!((l2.size, l2.assoc, l2.line_size), (64 << 10, 8, 64));
    assert_eq!(l2.sharing, Sharing::All);
    assert_eq!(l2.inclusion, Inclusion::Inclusive);
    assert_eq!(l2.latency, Some(12));
}

#[test]
fn prefetch_and_classify_example() {
    let c = load_file(&examples_dir().join("prefetch-classify.toml")).unwrap();
    assert_eq!(c.name, "cluster-prefetch");
    assert!(c.classify_misses);
    assert_eq!(c.levels[0].name, "L1i");
    assert_eq!(c.levels[1].name, "L1d");
    assert_eq!(c.levels[2].size, 1280 << 10);
    assert_eq!(c.levels[2].sets(), 1024);
    assert_eq!(c.levels[2].sharing, Sharing::Group { cores: 2 });
    assert_eq!(c.levels[3].policy, ReplacementPolicy::Random { seed: 42 });
    assert_eq!(c.prefetchers.len(), 3);
    assert_eq!(
        c.prefetchers[1].kind,
        PrefetcherKind::Stream {
            streams: 16,
            degree: 2,
            distance: 4
        }
    );
    // The simulator accepts it.
    coldcache_sim::Hierarchy::new(&c).unwrap();
}

/// The TOML blocks of docs/cache-config.md parse; the Cache Lab one is
/// exactly `cachelab(4, 1, 4)`.
#[test]
fn documentation_examples_parse() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cache-config.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let mut blocks = Vec::new();
    let mut rest = doc.as_str();
    while let Some(start) = rest.find("```toml\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").unwrap();
        blocks.push(&body[..end]);
        rest = &body[end + 3..];
    }
    assert!(blocks.len() >= 2, "found {} toml blocks", blocks.len());
    let mut parsed = Vec::new();
    for (i, text) in blocks.iter().enumerate() {
        let cfg = from_toml_str(text, Path::new(&format!("docs-block-{i}.toml")))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        coldcache_sim::Hierarchy::new(&cfg).unwrap();
        round_trip(&cfg);
        parsed.push(cfg);
    }
    assert_eq!(parsed[0].name, "my-machine");
    assert_eq!(parsed.last().unwrap(), &cachelab(4, 1, 4).unwrap());
}
