//! The `host` preset from sysfs: committed fixtures (one copied from a real
//! machine with tests/data/capture-sysfs.sh, one hand-made) and quirky trees
//! built on the fly.

use std::fs;
use std::path::{Path, PathBuf};

use coldcache_config::{host_from_sysfs, host_info_from_sysfs, HostInfo};
use coldcache_sim::{CacheKind, Inclusion, ReplacementPolicy, Sharing, StraddleMode};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// (name, level, kind, size, assoc, line, sharing) of each level.
fn summary(h: &HostInfo) -> Vec<(String, u8, CacheKind, u64, u32, u32, Sharing)> {
    h.config
        .levels
        .iter()
        .map(|l| {
            (
                l.name.clone(),
                l.level,
                l.kind,
                l.size,
                l.assoc,
                l.line_size,
                l.sharing,
            )
        })
        .collect()
}

#[test]
fn real_machine_fixture_epyc_kvm() {
    // Captured from a 2-vCPU AMD EPYC (Zen 4) KVM guest.
    let h = host_info_from_sysfs(&data("sysfs-epyc-kvm-2cpu")).unwrap();
    use CacheKind::*;
    assert_eq!(
        summary(&h),
        vec![
            ("L1i".into(), 1, Instruction, 32 << 10, 8, 64, Sharing::Core),
            ("L1d".into(), 1, Data, 32 << 10, 8, 64, Sharing::Core),
            ("L2".into(), 2, Unified, 1 << 20, 8, 64, Sharing::Core),
            ("L3".into(), 3, Unified, 32 << 20, 16, 64, Sharing::All),
        ]
    );
    assert_eq!(h.config.cores, 2);
    assert_eq!(h.config.name, "host");
    assert_eq!(h.cpus, vec![0, 1]);
    assert!(h.notes.is_empty(), "{:?}", h.notes);
    assert_eq!(h.config.straddle, StraddleMode::PerLine);
    for l in &h.config.levels {
        assert_eq!(l.policy, ReplacementPolicy::Lru);
        assert_eq!(l.inclusion, Inclusion::NonInclusive);
    }
    h.config.validate().unwrap();
    assert_eq!(
        host_from_sysfs(&data("sysfs-epyc-kvm-2cpu")).unwrap(),
        h.config
    );
}

#[test]
fn hand_made_fixture_l2_pairs_shared_l3() {
    let h = host_info_from_sysfs(&data("sysfs-quad-l2pairs")).unwrap();
    use CacheKind::*;
    assert_eq!(
        summary(&h),
        vec![
            ("L1i".into(), 1, Instruction, 32 << 10, 8, 64, Sharing::Core),
            ("L1d".into(), 1, Data, 32 << 10, 8, 64, Sharing::Core),
            (
                "L2".into(),
                2,
                Unified,
                1 << 20,
                16,
                64,
                Sharing::Group { cores: 2 }
            ),
            ("L3".into(), 3, Unified, 8 << 20, 16, 64, Sharing::All),
        ]
    );
    assert_eq!(h.config.cores, 4);
    assert_eq!(h.cpus, vec![0, 1, 2, 3]);
    assert!(h.notes.is_empty(), "{:?}", h.notes);
    coldcache_sim::Hierarchy::new(&h.config).unwrap();
}

/// A fake sysfs tree in a fresh temporary directory.
struct Fake {
    root: PathBuf,
}

impl Fake {
    fn new(name: &str) -> Fake {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("sysfs")
            .join(name);
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        Fake { root }
    }

    /// Writes cpu{cpu}/cache/index{idx}/ with the given files.
    fn cache(&self, cpu: u32, idx: u32, files: &[(&str, &str)]) -> &Self {
        let dir = self.root.join(format!("cpu{cpu}/cache/index{idx}"));
        fs::create_dir_all(&dir).unwrap();
        for (f, v) in files {
            fs::write(dir.join(f), format!("{v}\n")).unwrap();
        }
        self
    }

    /// A standard cache: level, type, size, ways, sets, 64-byte lines, sharing.
    #[allow(clippy::too_many_arguments)]
    fn std(
        &self,
        cpu: u32,
        idx: u32,
        level: &str,
        ty: &str,
        size: &str,
        ways: &str,
        sets: &str,
        shared: &str,
    ) -> &Self {
        self.cache(
            cpu,
            idx,
            &[
                ("level", level),
                ("type", ty),
                ("size", size),
                ("ways_of_associativity", ways),
                ("number_of_sets", sets),
                ("coherency_line_size", "64"),
                ("shared_cpu_list", shared),
            ],
        )
    }

    fn info(&self) -> Result<HostInfo, coldcache_config::SysfsError> {
        host_info_from_sysfs(&self.root)
    }
}

#[test]
fn smt_siblings_numbered_apart_become_consecutive_cores() {
    // Like Intel with SMT: cpu0 and cpu2 are the two threads of core 0.
    let f = Fake::new("smt");
    for cpu in 0..4u32 {
        let sib = if cpu % 2 == 0 { "0,2" } else { "1,3" };
        f.std(cpu, 0, "1", "Data", "48K", "12", "64", sib);
        f.std(cpu, 1, "1", "Instruction", "32K", "8", "64", sib);
        f.std(cpu, 2, "2", "Unified", "2048K", "16", "2048", sib);
        f.std(cpu, 3, "3", "Unified", "16384K", "16", "16384", "0-3");
    }
    let h = f.info().unwrap();
    assert_eq!(h.cpus, vec![0, 2, 1, 3]);
    assert_eq!(h.config.levels[0].sharing, Sharing::Group { cores: 2 });
    assert_eq!(h.config.levels[2].sharing, Sharing::Group { cores: 2 });
    assert_eq!(h.config.levels[3].sharing, Sharing::All);
    assert!(
        h.notes
            .iter()
            .any(|n| n.contains("simulated cores 0, 1, 2, ... are CPUs 0,2,1,3")),
        "{:?}",
        h.notes
    );
}

#[test]
fn vm_size_that_is_not_sets_times_ways_times_line() {
    let f = Fake::new("vm-size");
    f.std(0, 0, "1", "Data", "32K", "8", "64", "0");
    // 2048 sets x 16 ways x 64 bytes = 2 MiB, but size says 1 MiB.
    f.std(0, 1, "2", "Unified", "1024K", "16", "2048", "0");
    let h = f.info().unwrap();
    assert_eq!(h.config.levels[1].size, 2 << 20);
    assert!(
        h.notes
            .iter()
            .any(|n| n
                .contains("size is 1048576 bytes but 2048 sets x 16 ways x 64 bytes = 2097152")),
        "{:?}",
        h.notes
    );
}

#[test]
fn zero_ways_means_fully_associative() {
    let f = Fake::new("zero-ways");
    f.cache(
        0,
        0,
        &[
            ("level", "1"),
            ("type", "Data"),
            ("size", "4K"),
            ("ways_of_associativity", "0"),
            ("number_of_sets", "1"),
            ("coherency_line_size", "64"),
            ("shared_cpu_list", "0"),
        ],
    );
    // Missing ways and sets altogether: also fully associative.
    f.cache(
        0,
        1,
        &[
            ("level", "2"),
            ("type", "Unified"),
            ("size", "8K"),
            ("coherency_line_size", "64"),
            ("shared_cpu_list", "0"),
        ],
    );
    let h = f.info().unwrap();
    assert_eq!(
        (h.config.levels[0].assoc, h.config.levels[0].sets()),
        (64, 1)
    );
    assert_eq!(
        (h.config.levels[1].assoc, h.config.levels[1].sets()),
        (128, 1)
    );
    assert_eq!(
        h.notes
            .iter()
            .filter(|n| n.contains("fully associative"))
            .count(),
        2,
        "{:?}",
        h.notes
    );
}

#[test]
fn sets_derived_when_missing_and_map_used_without_list() {
    let f = Fake::new("no-sets");
    for cpu in 0..2u32 {
        f.cache(
            cpu,
            0,
            &[
                ("level", "1"),
                ("type", "Data"),
                ("size", "32K"),
                ("ways_of_associativity", "8"),
                ("coherency_line_size", "64"),
                ("shared_cpu_list", &cpu.to_string()),
            ],
        );
        f.cache(
            cpu,
            1,
            &[
                ("level", "2"),
                ("type", "Unified"),
                ("size", "512K"),
                ("ways_of_associativity", "8"),
                ("coherency_line_size", "64"),
                ("shared_cpu_map", "00000000,00000003"),
            ],
        );
        f.std(
            cpu,
            2,
            "1",
            "Instruction",
            "32K",
            "8",
            "64",
            &cpu.to_string(),
        );
    }
    let h = f.info().unwrap();
    assert_eq!(h.config.levels[1].name, "L1d");
    assert_eq!(h.config.levels[1].sets(), 64);
    assert_eq!(h.config.levels[2].sharing, Sharing::All);
    assert!(h.notes.is_empty(), "{:?}", h.notes);
}

#[test]
fn unknown_cache_types_and_offline_cpus_are_left_out_with_notes() {
    let f = Fake::new("offline");
    for cpu in [0u32, 1, 3] {
        f.std(cpu, 0, "1", "Data", "32K", "8", "64", &cpu.to_string());
        f.std(cpu, 1, "2", "Unified", "1024K", "8", "2048", "0-3");
    }
    f.std(0, 2, "1", "Trace", "12K", "8", "24", "0");
    fs::create_dir_all(f.root.join("cpu2")).unwrap(); // offline: no cache/
    let h = f.info().unwrap();
    assert_eq!(h.config.cores, 3);
    assert_eq!(h.cpus, vec![0, 1, 3]);
    assert_eq!(h.config.levels.len(), 2);
    assert_eq!(h.config.levels[1].sharing, Sharing::All);
    assert!(
        h.notes.iter().any(|n| n.contains("left out: 2")),
        "{:?}",
        h.notes
    );
    assert!(
        h.notes.iter().any(|n| n.contains("\"Trace\"")),
        "{:?}",
        h.notes
    );
}

#[test]
fn hybrid_cpus_keep_those_like_cpu0() {
    let f = Fake::new("hybrid");
    for cpu in 0..4u32 {
        let (l1, l2, l2sets, l2share) = if cpu < 2 {
            ("48K", "1280K", "2048", cpu.to_string())
        } else {
            ("32K", "2048K", "2048", "2-3".to_string())
        };
        f.std(
            cpu,
            0,
            "1",
            "Data",
            l1,
            if cpu < 2 { "12" } else { "8" },
            "64",
            &cpu.to_string(),
        );
        f.std(
            cpu,
            1,
            "2",
            "Unified",
            l2,
            if cpu < 2 { "10" } else { "16" },
            l2sets,
            &l2share,
        );
        f.std(cpu, 2, "3", "Unified", "12288K", "12", "16384", "0-3");
    }
    let h = f.info().unwrap();
    assert_eq!(h.cpus, vec![0, 1]);
    assert_eq!(h.config.levels[0].size, 48 << 10);
    assert_eq!(h.config.levels[2].sharing, Sharing::All);
    // Data-only L1 (this fake has no L1i): modelled as unified, with a note.
    assert_eq!(h.config.levels[0].kind, CacheKind::Unified);
    assert_eq!(h.config.levels[0].name, "L1");
    assert!(
        h.notes
            .iter()
            .any(|n| n.contains("level 1 has a data cache but no instruction cache")),
        "{:?}",
        h.notes
    );
    assert!(
        h.notes
            .iter()
            .any(|n| n.contains("hybrid") && n.contains("leaving out CPUs 2,3")),
        "{:?}",
        h.notes
    );
}

#[test]
fn irregular_sharing_is_an_error() {
    // An L2 shared by cpus 0-2 and another private to cpu3.
    let f = Fake::new("unequal");
    for cpu in 0..4u32 {
        f.std(cpu, 0, "1", "Data", "32K", "8", "64", &cpu.to_string());
        f.std(
            cpu,
            1,
            "2",
            "Unified",
            "1024K",
            "16",
            "1024",
            if cpu < 3 { "0-2" } else { "3" },
        );
    }
    let e = f.info().unwrap_err().to_string();
    assert!(
        e.contains("L2: its instances are shared by different numbers of CPUs (1 and 3)"),
        "{e}"
    );
    assert!(e.contains("TOML file"), "{e}");

    // Overlapping groups.
    let f = Fake::new("overlap");
    for (cpu, shared) in [(0u32, "0-1"), (1, "1-2"), (2, "1-2"), (3, "3")] {
        f.std(cpu, 0, "1", "Data", "32K", "8", "64", shared);
    }
    let e = f.info().unwrap_err().to_string();
    assert!(
        e.contains("L1d: cpu0 shares it with CPUs 0,1 but cpu1 with CPUs 1,2"),
        "{e}"
    );

    // Groups that do not nest: L1 pairs {0,1},{2,3}; L2 pairs {1,2},{0,3}.
    let f = Fake::new("no-nest");
    for cpu in 0..4u32 {
        f.std(
            cpu,
            0,
            "1",
            "Data",
            "32K",
            "8",
            "64",
            if cpu < 2 { "0-1" } else { "2-3" },
        );
        f.std(
            cpu,
            1,
            "2",
            "Unified",
            "1024K",
            "16",
            "1024",
            if cpu == 1 || cpu == 2 { "1-2" } else { "0,3" },
        );
    }
    let e = f.info().unwrap_err().to_string();
    assert!(
        e.contains("L1d: its sharing does not nest within the other caches' sharing"),
        "{e}"
    );
}

#[test]
fn bad_or_missing_sysfs_is_an_error_naming_the_path() {
    let f = Fake::new("empty");
    let e = f.info().unwrap_err();
    assert_eq!(e.path, f.root);
    assert!(e.problem.contains("no CPU with cache information"), "{e}");

    let e = host_info_from_sysfs(Path::new("/nonexistent/sysfs")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/sysfs: cannot read:"),
        "{e}"
    );

    let f = Fake::new("bad-level");
    f.std(0, 0, "one", "Data", "32K", "8", "64", "0");
    let e = f.info().unwrap_err();
    assert_eq!(e.path, f.root.join("cpu0/cache/index0/level"));
    assert_eq!(e.problem, "\"one\" is not a whole number");

    let f = Fake::new("bad-size");
    f.cache(
        0,
        0,
        &[
            ("level", "1"),
            ("type", "Data"),
            ("size", "32Q"),
            ("ways_of_associativity", "8"),
            ("coherency_line_size", "64"),
            ("shared_cpu_list", "0"),
        ],
    );
    let e = f.info().unwrap_err();
    assert_eq!(e.path, f.root.join("cpu0/cache/index0/size"));

    let f = Fake::new("bad-list");
    f.std(0, 0, "1", "Data", "32K", "8", "64", "zero");
    let e = f.info().unwrap_err();
    assert_eq!(e.path, f.root.join("cpu0/cache/index0/shared_cpu_list"));

    let f = Fake::new("bad-line");
    f.cache(
        0,
        0,
        &[
            ("level", "1"),
            ("type", "Data"),
            ("size", "30K"),
            ("ways_of_associativity", "8"),
            ("coherency_line_size", "48"),
            ("shared_cpu_list", "0"),
        ],
    );
    let e = f.info().unwrap_err().to_string();
    assert!(e.contains("48 bytes is not a power of two"), "{e}");

    let f = Fake::new("no-type");
    f.cache(0, 0, &[("level", "1"), ("size", "32K")]);
    let e = f.info().unwrap_err();
    assert_eq!(e.path, f.root.join("cpu0/cache/index0/type"));

    // Two L1 data caches on one CPU.
    let f = Fake::new("dup");
    f.std(0, 0, "1", "Data", "32K", "8", "64", "0");
    f.std(0, 1, "1", "Data", "32K", "8", "64", "0");
    let e = f.info().unwrap_err().to_string();
    assert!(e.contains("a second level-1 Data cache"), "{e}");
}

#[test]
fn this_machine() {
    // Runs wherever sysfs describes caches; elsewhere `host` must fail cleanly.
    match coldcache_config::host() {
        Ok(c) => {
            c.validate().unwrap();
            assert!(c.cores >= 1);
            coldcache_sim::Hierarchy::new(&c).unwrap();
        }
        Err(e) => {
            assert!(
                !Path::new("/sys/devices/system/cpu/cpu0/cache/index0").exists(),
                "{e}"
            );
        }
    }
}
