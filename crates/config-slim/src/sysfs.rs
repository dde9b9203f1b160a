//! The `host` preset: the caches of the machine we run on, read from Linux
//! sysfs (`/sys/devices/system/cpu/cpu*/cache/index*/`).
//!
//! What sysfs gives and what is assumed:
//! - per cache: `level`, `type` (Data, Instruction, Unified), `size` ("48K",
//!   K = 1024), `coherency_line_size`, `ways_of_associativity`,
//!   `number_of_sets`, `shared_cpu_list` ("0-1", "0,4"; `shared_cpu_map`, a
//!   hex mask, when the list is missing);
//! - geometry: when sets, ways and line are all known, the size is taken as
//!   their product (some hypervisors report a `size` that is not, which is
//!   noted); `ways_of_associativity` 0 or missing means fully associative
//!   (ways = size / line) unless `number_of_sets` says otherwise;
//! - not published by sysfs, and so assumed: LRU replacement, write-back,
//!   non-inclusive levels, no latency, no prefetchers; accesses straddling
//!   lines count per line and lower levels are looked up on a miss, as in
//!   hardware;
//! - cores: one simulated core per online logical CPU. The simulator shares
//!   a level among groups of *consecutive* cores, so the CPUs are put in an
//!   order where every cache's sharers are consecutive (SMT siblings 0 and 8
//!   become cores 0 and 1); [`HostInfo::cpus`] gives that order. Sharing that
//!   no order can express (groups of unequal size, overlapping groups) is an
//!   error;
//! - hybrid CPUs (cores with different caches): only the CPUs whose caches
//!   are those of the first CPU are modelled, which is noted;
//! - a level with a data cache but no instruction cache is modelled as one
//!   unified cache, which is noted (the simulator needs a unified cache or an
//!   instruction/data pair at each level).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use coldcache_sim::{
    CacheKind, HierarchyConfig, Inclusion, LevelConfig, LookupMode, ReplacementPolicy, Sharing,
    StraddleMode, WritePolicy,
};

use crate::default_level_name;
use crate::size::parse_size;

/// Where Linux publishes the CPUs' caches.
pub const SYSFS_CPU_ROOT: &str = "/sys/devices/system/cpu";

/// A problem reading or making sense of sysfs: the file or directory, and
/// what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct SysfsError {
    /// The sysfs file or directory.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: String,
}

fn err(path: impl Into<PathBuf>, problem: impl Into<String>) -> SysfsError {
    SysfsError {
        path: path.into(),
        problem: problem.into(),
    }
}

/// The host's caches as a configuration, with how it maps to the real CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostInfo {
    /// The configuration (named "host"); it passes `validate()`.
    pub config: HierarchyConfig,
    /// The OS CPU number of each simulated core: core `k` models CPU `cpus[k]`.
    pub cpus: Vec<u32>,
    /// Approximations and quirks met on the way, one sentence each; empty
    /// when the host is modelled as sysfs describes it.
    pub notes: Vec<String>,
}

/// The `host` preset from the running machine's sysfs.
pub fn host() -> Result<HierarchyConfig, SysfsError> {
    host_from_sysfs(Path::new(SYSFS_CPU_ROOT))
}

/// The `host` preset from a sysfs CPU directory (normally
/// `/sys/devices/system/cpu`; tests use copies).
pub fn host_from_sysfs(root: &Path) -> Result<HierarchyConfig, SysfsError> {
    host_info_from_sysfs(root).map(|h| h.config)
}

/// Like [`host_from_sysfs`], also returning the core-to-CPU order and notes.
pub fn host_info_from_sysfs(root: &Path) -> Result<HostInfo, SysfsError> {
    let mut notes = Vec::new();
    let cpus = read_cpus(root, &mut notes)?;
    if cpus.is_empty() {
        return Err(err(
            root,
            "no CPU with cache information (cpu*/cache/index*/); sysfs may not be mounted or may \
             not describe caches on this machine: use a preset or a TOML file instead",
        ));
    }
    build(root, cpus, notes)
}

/// One cache as one CPU sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cache {
    level: u8,
    kind: CacheKind,
    size: u64,
    line: u32,
    assoc: u32,
    /// The CPUs sharing this instance (from shared_cpu_list).
    shared: BTreeSet<u32>,
}

impl Cache {
    fn geometry(&self) -> (u8, u8, u64, u32, u32) {
        (
            self.level,
            kind_rank(self.kind),
            self.size,
            self.line,
            self.assoc,
        )
    }
}

fn kind_rank(k: CacheKind) -> u8 {
    match k {
        CacheKind::Instruction => 0,
        CacheKind::Data => 1,
        CacheKind::Unified => 2,
    }
}

/// Numbered entries `prefix<N>` of a directory, sorted by N.
fn numbered(dir: &Path, prefix: &str) -> Result<Vec<(u32, PathBuf)>, SysfsError> {
    let rd = fs::read_dir(dir).map_err(|e| err(dir, format!("cannot read: {e}")))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| err(dir, format!("cannot read: {e}")))?;
        let name = entry.file_name();
        let Some(n) = name.to_str().and_then(|s| s.strip_prefix(prefix)) else {
            continue;
        };
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(n) = n.parse::<u32>() {
            out.push((n, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// A file's trimmed contents, or `None` if it does not exist.
fn read_opt(path: &Path) -> Result<Option<String>, SysfsError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(err(path, format!("cannot read: {e}"))),
    }
}

fn read_num<T: std::str::FromStr>(dir: &Path, file: &str) -> Result<Option<T>, SysfsError> {
    let path = dir.join(file);
    match read_opt(&path)? {
        None => Ok(None),
        Some(s) => s
            .parse::<T>()
            .map(Some)
            .map_err(|_| err(&path, format!("{s:?} is not a whole number"))),
    }
}

/// Parses a CPU list as the kernel prints it: `0-3,8-11`, `0,4`, `5`.
pub fn parse_cpu_list(text: &str) -> Result<BTreeSet<u32>, String> {
    let mut set = BTreeSet::new();
    let bad = || format!("{text:?} is not a CPU list (expected e.g. \"0-3,8\")");
    for part in text.trim().split(',') {
        let part = part.trim();
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let a: u32 = a.parse().map_err(|_| bad())?;
        let b: u32 = b.parse().map_err(|_| bad())?;
        if a > b || b - a > 65_535 {
            return Err(bad());
        }
        set.extend(a..=b);
    }
    Ok(set)
}

/// Parses a CPU mask as the kernel prints it: 32-bit hex words separated by
/// commas, most significant first (`00000000,00000003` is CPUs 0 and 1).
pub fn parse_cpu_map(text: &str) -> Result<BTreeSet<u32>, String> {
    let bad = || format!("{text:?} is not a CPU mask (expected hex words such as \"00000003\")");
    let words: Vec<&str> = text.trim().split(',').collect();
    let mut set = BTreeSet::new();
    for (i, w) in words.iter().rev().enumerate() {
        let w = w.trim();
        if w.is_empty() || w.len() > 8 {
            return Err(bad());
        }
        let v = u32::from_str_radix(w, 16).map_err(|_| bad())?;
        let base = u32::try_from(i * 32).map_err(|_| bad())?;
        for bit in 0..32 {
            if v & (1 << bit) != 0 {
                set.insert(base + bit);
            }
        }
    }
    Ok(set)
}

/// Every CPU that has cache information, with its caches.
fn read_cpus(
    root: &Path,
    notes: &mut Vec<String>,
) -> Result<BTreeMap<u32, Vec<Cache>>, SysfsError> {
    let mut cpus = BTreeMap::new();
    let mut without = Vec::new();
    for (cpu, dir) in numbered(root, "cpu")? {
        let cache_dir = dir.join("cache");
        if !cache_dir.is_dir() {
            without.push(cpu);
            continue;
        }
        let mut caches: Vec<Cache> = Vec::new();
        for (_, idx) in numbered(&cache_dir, "index")? {
            if let Some(c) = read_cache(cpu, &idx, notes)? {
                if let Some(dup) = caches
                    .iter()
                    .find(|d| d.level == c.level && d.kind == c.kind)
                {
                    return Err(err(
                        &idx,
                        format!(
                            "a second level-{} {:?} cache on cpu{cpu} (after one of {} bytes)",
                            c.level, c.kind, dup.size
                        ),
                    ));
                }
                caches.push(c);
            }
        }
        if caches.is_empty() {
            without.push(cpu);
            continue;
        }
        caches.sort_by_key(|c| (c.level, kind_rank(c.kind)));
        cpus.insert(cpu, caches);
    }
    if !without.is_empty() && !cpus.is_empty() {
        notes.push(format!(
            "CPUs without cache information (offline?) are left out: {}",
            list(&without)
        ));
    }
    Ok(cpus)
}

fn list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// One `index*` directory; `None` for caches the simulator has no kind for.
fn read_cache(cpu: u32, dir: &Path, notes: &mut Vec<String>) -> Result<Option<Cache>, SysfsError> {
    let here = || {
        format!(
            "cpu{cpu}/cache/{}",
            dir.file_name().unwrap_or_default().to_string_lossy()
        )
    };
    let kind = match read_opt(&dir.join("type"))?.as_deref() {
        Some("Data") => CacheKind::Data,
        Some("Instruction") => CacheKind::Instruction,
        Some("Unified") => CacheKind::Unified,
        Some(other) => {
            notes.push(format!("{}: a cache of type {other:?} is left out", here()));
            return Ok(None);
        }
        None => return Err(err(dir.join("type"), "missing")),
    };
    let level: u8 = read_num(dir, "level")?.ok_or_else(|| err(dir.join("level"), "missing"))?;
    if level == 0 {
        return Err(err(dir.join("level"), "level 0 is not a cache level"));
    }
    let size = match read_opt(&dir.join("size"))? {
        None => None,
        Some(s) => Some(parse_size(&s).map_err(|e| err(dir.join("size"), e.to_string()))?),
    };
    let line = match read_num::<u32>(dir, "coherency_line_size")? {
        Some(l) if l > 0 => l,
        _ => {
            notes.push(format!(
                "{}: no line size published; 64 bytes assumed",
                here()
            ));
            64
        }
    };
    if !line.is_power_of_two() {
        return Err(err(
            dir.join("coherency_line_size"),
            format!("{line} bytes is not a power of two"),
        ));
    }
    let ways = read_num::<u64>(dir, "ways_of_associativity")?.filter(|&w| w > 0);
    let sets = read_num::<u64>(dir, "number_of_sets")?.filter(|&s| s > 0);
    let line64 = u64::from(line);
    let (size, assoc) = match (size, ways, sets) {
        (size, Some(w), Some(s)) => {
            let derived = s
                .checked_mul(w)
                .and_then(|v| v.checked_mul(line64))
                .ok_or_else(|| err(dir, "number_of_sets x ways x line is too large"))?;
            if let Some(size) = size.filter(|&sz| sz != derived) {
                notes.push(format!(
                    "{}: size is {size} bytes but {s} sets x {w} ways x {line} bytes = {derived}; \
                     using {derived}",
                    here()
                ));
            }
            (derived, w)
        }
        (Some(size), Some(w), None) => {
            if size % (w * line64) != 0 {
                return Err(err(
                    dir,
                    format!("size {size} is not a whole number of sets of {w} ways x {line} bytes"),
                ));
            }
            (size, w)
        }
        (Some(size), None, sets) => {
            let sets = sets.unwrap_or(1);
            if size % (sets * line64) != 0 || size == 0 {
                return Err(err(
                    dir,
                    format!(
                        "size {size} is not a whole number of {sets} sets of {line}-byte lines"
                    ),
                ));
            }
            if sets == 1 {
                notes.push(format!(
                    "{}: no associativity published; taken as fully associative",
                    here()
                ));
            }
            (size, size / (sets * line64))
        }
        (None, _, _) => {
            return Err(err(dir, "neither size nor sets and ways are published"));
        }
    };
    let assoc = u32::try_from(assoc).map_err(|_| {
        err(
            dir,
            format!("{assoc} ways is more than the simulator supports"),
        )
    })?;
    let shared = match read_opt(&dir.join("shared_cpu_list"))? {
        Some(s) => parse_cpu_list(&s).map_err(|p| err(dir.join("shared_cpu_list"), p))?,
        None => match read_opt(&dir.join("shared_cpu_map"))? {
            Some(s) => parse_cpu_map(&s).map_err(|p| err(dir.join("shared_cpu_map"), p))?,
            None => {
                notes.push(format!(
                    "{}: no sharing published; taken as private",
                    here()
                ));
                BTreeSet::from([cpu])
            }
        },
    };
    Ok(Some(Cache {
        level,
        kind,
        size,
        line,
        assoc,
        shared,
    }))
}

fn build(
    root: &Path,
    cpus: BTreeMap<u32, Vec<Cache>>,
    mut notes: Vec<String>,
) -> Result<HostInfo, SysfsError> {
    // Hybrid CPUs: keep the CPUs whose caches look like the first CPU's.
    let geometry = |caches: &[Cache]| caches.iter().map(Cache::geometry).collect::<Vec<_>>();
    let (&first, first_caches) = cpus.iter().next().ok_or_else(|| err(root, "no CPU"))?;
    let reference = geometry(first_caches);
    let (kept, dropped): (Vec<u32>, Vec<u32>) = cpus
        .iter()
        .map(|(&c, _)| c)
        .partition(|c| geometry(&cpus[c]) == reference);
    if !dropped.is_empty() {
        notes.push(format!(
            "the CPUs do not all have the same caches (a hybrid CPU?): modelling the {} CPUs \
             whose caches are those of cpu{first} ({}), leaving out CPUs {}",
            kept.len(),
            list(&kept),
            list(&dropped)
        ));
    }
    let kept_set: BTreeSet<u32> = kept.iter().copied().collect();
    let n = kept.len();

    // For each cache (by position in the reference list): each CPU's group.
    let mut groups: Vec<BTreeMap<u32, BTreeSet<u32>>> = Vec::new();
    let mut group_size = Vec::new();
    for (i, c) in first_caches.iter().enumerate() {
        let name = default_level_name(c.level, c.kind);
        let mut g = BTreeMap::new();
        for &cpu in &kept {
            let mut set: BTreeSet<u32> = cpus[&cpu][i]
                .shared
                .intersection(&kept_set)
                .copied()
                .collect();
            set.insert(cpu);
            g.insert(cpu, set);
        }
        for (cpu, set) in &g {
            for other in set {
                if g[other] != *set {
                    return Err(err(
                        root,
                        format!(
                            "{name}: cpu{cpu} shares it with CPUs {} but cpu{other} with CPUs {}; \
                             such sharing cannot be simulated: describe the machine in a TOML file",
                            list(&set.iter().copied().collect::<Vec<_>>()),
                            list(&g[other].iter().copied().collect::<Vec<_>>())
                        ),
                    ));
                }
            }
        }
        let sizes: BTreeSet<usize> = g.values().map(BTreeSet::len).collect();
        if sizes.len() > 1 {
            let sizes: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
            return Err(err(
                root,
                format!(
                    "{name}: its instances are shared by different numbers of CPUs ({}); the \
                     simulator needs equal groups: describe the machine in a TOML file",
                    sizes.join(" and ")
                ),
            ));
        }
        group_size.push(sizes.into_iter().next().unwrap_or(1));
        groups.push(g);
    }

    // Order the CPUs so that every group is a run of consecutive cores:
    // sort by the group of the outermost cache first, the CPU number last.
    let mut order = kept.clone();
    let mut outer_first: Vec<usize> = (0..first_caches.len()).collect();
    outer_first.sort_by_key(|&i| {
        std::cmp::Reverse((first_caches[i].level, kind_rank(first_caches[i].kind)))
    });
    order.sort_by_key(|cpu| {
        let key: Vec<u32> = outer_first
            .iter()
            .map(|&i| groups[i][cpu].iter().next().copied().unwrap_or(*cpu))
            .collect();
        (key, *cpu)
    });
    for (i, g) in groups.iter().enumerate() {
        let size = group_size[i];
        for block in order.chunks(size) {
            let set: BTreeSet<u32> = block.iter().copied().collect();
            if g[&block[0]] != set {
                let name = default_level_name(first_caches[i].level, first_caches[i].kind);
                return Err(err(
                    root,
                    format!(
                        "{name}: its sharing does not nest within the other caches' sharing; \
                         describe the machine in a TOML file"
                    ),
                ));
            }
        }
    }
    if order != kept {
        notes.push(format!(
            "simulated cores 0, 1, 2, ... are CPUs {} (renumbered so that CPUs sharing a cache \
             are consecutive)",
            list(&order)
        ));
    }

    // A level with a data cache and no instruction cache (sysfs left it
    // out) cannot be simulated as such: its data cache serves both.
    let lone = |c: &Cache| {
        c.kind == CacheKind::Data
            && !first_caches
                .iter()
                .any(|o| o.level == c.level && o.kind == CacheKind::Instruction)
    };
    for c in first_caches.iter().filter(|c| lone(c)) {
        notes.push(format!(
            "level {} has a data cache but no instruction cache; it is modelled as unified",
            c.level
        ));
    }
    let levels = first_caches
        .iter()
        .zip(&group_size)
        .map(|(c, &g)| LevelConfig {
            name: if lone(c) {
                default_level_name(c.level, CacheKind::Unified)
            } else {
                default_level_name(c.level, c.kind)
            },
            level: c.level,
            kind: if lone(c) { CacheKind::Unified } else { c.kind },
            size: c.size,
            line_size: c.line,
            assoc: c.assoc,
            policy: ReplacementPolicy::Lru,
            write: WritePolicy::WriteBack,
            inclusion: Inclusion::NonInclusive,
            sharing: if g == 1 {
                Sharing::Core
            } else if g == n {
                Sharing::All
            } else {
                Sharing::Group { cores: g }
            },
            latency: None,
        })
        .collect();
    let config = HierarchyConfig {
        name: "host".into(),
        cores: n,
        levels,
        straddle: StraddleMode::PerLine,
        lookup: LookupMode::OnMiss,
        coherence: true,
        ..HierarchyConfig::default()
    };
    config.validate().map_err(|e| {
        err(
            root,
            format!("the caches found do not make a valid configuration: {e}"),
        )
    })?;
    Ok(HostInfo {
        config,
        cpus: order,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        let s = |v: &[u32]| v.iter().copied().collect::<BTreeSet<u32>>();
        assert_eq!(parse_cpu_list("0-1"), Ok(s(&[0, 1])));
        assert_eq!(parse_cpu_list("0,4\n"), Ok(s(&[0, 4])));
        assert_eq!(parse_cpu_list("0-2,8-9"), Ok(s(&[0, 1, 2, 8, 9])));
        assert_eq!(parse_cpu_list("7"), Ok(s(&[7])));
        for bad in ["", "a", "3-1", "1-", "0-99999999", "1,,2"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_cpu_map("3"), Ok(s(&[0, 1])));
        assert_eq!(parse_cpu_map("00000001,00000003"), Ok(s(&[0, 1, 32])));
        assert_eq!(parse_cpu_map("0000000f\n"), Ok(s(&[0, 1, 2, 3])));
        for bad in ["", "xyz", "123456789", "1,,2"] {
            assert!(parse_cpu_map(bad).is_err(), "{bad}");
        }
    }
}
