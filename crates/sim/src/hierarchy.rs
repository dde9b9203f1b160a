//! The hierarchy: cache instances wired into per-core paths, and the rules
//! that act across them (lookup order, inclusion, write policy, coherence,
//! prefetching, miss classification).
//!
//! Every access walks the accessing core's path (instruction or data side)
//! from the first level down. Victims evicted during a walk are queued and
//! handled after it (write-backs, fills of exclusive victim caches), so a
//! victim can never displace the line the walk is still looking for.
//!
//! Which engine runs demand accesses is one `Engine`, chosen here once:
//! a hierarchy of Cachegrind's shape ([`HierarchyConfig::lean_shape`])
//! runs on the lean engine (`lean.rs`), one of the `jaguar` preset's shape
//! ([`HierarchyConfig::jaguar_shape`]) on the Jaguar engine (`jaguar.rs`),
//! any other on the general caches (`cache.rs` and the walks here). An
//! engine runs until the first access of a kind it leaves to the general
//! caches (a software prefetch, non-temporal store or flush):
//! `leave_engine` hands them its state and the general caches run from
//! then on. [`Hierarchy::new_general`] builds on the general caches
//! whatever the shape, for comparisons. The instances, their counters and
//! their lines read the same either way. How a line finds its set, the
//! two engines' recency lists and the constants the three share are in
//! `sets.rs`.
//!
//! On the general caches, [`Hierarchy::access`] (inlined into the caller)
//! first tries a fast path that returns only what the full walk would:
//! `plain_hit` for configurations without coherence, all-levels lookup,
//! prefetchers or SRRIP first levels, `first_level_hit` otherwise,
//! `first_level_hit_lines` for accesses spanning lines; the rest goes to
//! `access_slow`, which walks the path. Demand walks of hierarchies without
//! miss classification, hardware prefetchers, exclusive levels or
//! all-levels lookup take `walk_simple`, the same rules without those
//! branches. [`Hierarchy::access_batch`] is `access` over one core's run
//! of accesses; configurations with coherence or all-levels lookup and no
//! prefetcher or SRRIP level take `batch_mru`, which holds the line found
//! last on each side so the next access to it is one compare.
//!
//! The user-sized state of a configuration is
//! [`HierarchyConfig::state_bytes`]; `new` reserves it fallibly and
//! refuses what cannot be allocated with a [`ConfigError`] giving the
//! figure.

use crate::cache::{flags, Cache, Evicted};
use crate::coherence::{LineTable, Owners};
use crate::config::*;
use crate::jaguar::{JagCache, Jaguar};
use crate::lean::{Lean, LeanCache};
use crate::prefetch::{Candidates, Prefetcher};
use crate::sets::{self, clamp_to_top, L1_HIT, TOP_REGION};
use crate::shadow::Shadow;
use crate::stats::*;
use crate::*;

/// Instance indices from the first level to the last, for one core and side.
#[derive(Clone, Copy, Debug, Default)]
struct Path {
    inst: [u16; MAX_LEVELS],
    len: u8,
}

impl Path {
    #[inline]
    fn get(&self, pos: usize) -> usize {
        usize::from(self.inst[pos])
    }
}

/// Public description of one cache instance.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct InstanceInfo {
    /// Level name with the instance number when there are several ("D1#3").
    pub name: String,
    /// Index of the [`LevelConfig`] in the configuration.
    pub level_index: usize,
    /// Level number, 1 for the first level ([`LevelConfig::level`]).
    pub level: u8,
    /// Instruction, data or unified, as configured.
    pub kind: CacheKind,
    /// First core and number of cores sharing this instance.
    pub first_core: usize,
    /// Cores sharing this instance: `first_core..first_core + cores`.
    pub cores: usize,
}

struct Instance {
    cache: Cache,
    info: InstanceInfo,
    write: WritePolicy,
    inclusion: Inclusion,
    private: bool,
    stats: LevelStats,
    shadow: Option<Shadow>,
    /// Instances above this one that feed into it (back-invalidation targets).
    above: Vec<usize>,
    /// Prefetchers observing this instance.
    prefetchers: Vec<usize>,
    /// A first level whose hits need no more than a fast path
    /// (`Hierarchy::plain_hit`, `first_level_hit`): no shadow, no
    /// prefetcher on it, write-back, and lower levels looked up only on a
    /// miss or, in all-levels mode, with no prefetcher anywhere.
    fast: bool,
    /// Hits counted by the fast path, by demand kind (ifetch, read, write,
    /// read-modify-write); folded into `stats` when read.
    hits_fast: [u64; 4],
}

impl Instance {
    /// The counters, with the fast path's hits folded in.
    fn stats(&self) -> LevelStats {
        let mut s = self.stats;
        s.ifetch += self.hits_fast[0];
        s.reads += self.hits_fast[1];
        s.writes += self.hits_fast[2] + self.hits_fast[3];
        s
    }
}

/// A first-level line held by [`Hierarchy::batch_mru`]: found by its look
/// and not changed since, with what its hits since would have written.
#[derive(Clone, Copy)]
struct Held {
    /// The line, or `u64::MAX` for none (no line of an address below
    /// `TOP_REGION` is).
    line: u64,
    /// Its index in the first level.
    idx: usize,
    /// The first-level instance.
    inst: u16,
    /// Flags to set (dirty, after a write).
    dirty: u8,
    /// Bytes touched to add.
    touched: u64,
}

impl Held {
    const NONE: Held = Held {
        line: u64::MAX,
        idx: 0,
        inst: 0,
        dirty: 0,
        touched: 0,
    };
}

/// A victim waiting to be handled after a walk: it left `path[pos]`.
#[derive(Clone, Copy)]
struct Pending {
    path: Path,
    pos: usize,
    ev: Evicted,
}

/// A hardware prefetch in flight, for lateness.
#[derive(Clone, Copy, Default)]
struct InFlight {
    instance: u32,
    line: u64,
    tick: u64,
}

const INFLIGHT: usize = 64;
const NO_FAST: u16 = u16::MAX;
const PENDING_CAPACITY: usize = 4096;

/// A simulated cache hierarchy. See the crate documentation.
pub struct Hierarchy {
    cfg: HierarchyConfig,
    inst: Vec<Instance>,
    ipath: Vec<Path>,
    dpath: Vec<Path>,
    /// Per core: instances off its data path that a write by it must
    /// invalidate (coherence), excluding its own private instances.
    snoop: Vec<Vec<u16>>,
    coherent: bool,
    lines: LineTable,
    coh: CoherenceStats,
    sw_pf: PrefetchStats,
    hw_pf: PrefetchStats,
    prefetchers: Vec<Prefetcher>,
    candidates: Candidates,
    inflight: Vec<[InFlight; INFLIGHT]>,
    inflight_next: Vec<usize>,
    tick: Vec<u64>,
    /// Whether `tick` is needed (hardware prefetchers measure lateness).
    count_ticks: bool,
    /// Per core and demand kind, the first-level instance for the fast path,
    /// or `NO_FAST`.
    fast: Vec<[u16; 4]>,
    /// Lines a core owns alone after its write (coherent hierarchies).
    owners: Owners,
    /// Line shift of the widest line of any level: a fill drops ownership of
    /// every first-level line in that span.
    widest_shift: u32,
    /// Per demand kind, the flags a fast-path hit sets (dirty for writes).
    fast_dirty: [u8; 4],
    per_line: bool,
    /// `LookupMode::AllLevels`: the fast path must look up every level.
    all_levels: bool,
    /// None of coherence, all-levels lookup, hardware prefetchers or SRRIP
    /// first levels: hits take `plain_hit`.
    plain: bool,
    /// Not plain, but no hardware prefetcher and no SRRIP level: the batch
    /// takes `batch_mru`.
    mru_batch: bool,
    /// No miss classification, hardware prefetcher, exclusive level or
    /// all-levels lookup: demand accesses take `walk_simple`.
    simple_walk: bool,
    /// Whether a walk can refill a line it evicted (hardware prefetchers,
    /// exclusive levels), so queued victims must be checked for staleness.
    refills: bool,
    pending: Vec<Pending>,
    /// Nesting of walks (a prefetch fill inside a demand walk).
    depth: u32,
    pf_events: Vec<PrefetchResolution>,
    pf_events_cap: usize,
    pf_events_dropped: u64,
    nt_stores: u64,
    flushes: u64,
    /// The engine that runs demand accesses: chosen once in `build`, and
    /// left for the general caches for good at the first access it leaves
    /// to them (`leave_engine`).
    engine: Engine,
}

/// The engine a [`Hierarchy`] runs demand accesses on. Whichever runs, the
/// instances, their counters and their lines read the same.
///
/// Two levels, each with a tag byte of its own (`repr(u8)`), so that the
/// test on every access for the lean engine, the engine of the
/// single-access hot path, is one compare of its byte with nothing else
/// reading it: in one flat enum the three-way test loads the tag into a
/// register for two compares (in the default layout it decodes a niche of
/// the lean engine's first vector). Measured with Callgrind on the
/// `replay` example, 2 M accesses of the `cachegrind` preset through
/// [`Hierarchy::access`]: 150.7 M instructions before the enum, 170.2 M
/// with one flat enum in the default layout, 154.2 M with a `repr(u8)`
/// flat one, 152.5 M like this (the compare is as before; what is left is
/// a register the caller's loop now spills).
#[repr(u8)]
enum Engine {
    /// The lean engine (`lean.rs`), for hierarchies of
    /// [`HierarchyConfig::lean_shape`].
    Lean(Lean),
    /// The Jaguar engine or the general caches.
    Other(Other),
}

/// [`Engine`] other than the lean engine.
#[repr(u8)]
enum Other {
    /// The Jaguar engine (`jaguar.rs`), for hierarchies of
    /// [`HierarchyConfig::jaguar_shape`] (boxed, as it was beside the
    /// lean engine: measured the cheaper layout for the hot paths).
    Jaguar(Box<Jaguar>),
    /// The general caches and walks (`cache.rs`, `Hierarchy::walk`): every
    /// configuration, and every access after an engine hands over.
    General,
}

/// The general caches, as an [`Engine`].
const GENERAL: Engine = Engine::Other(Other::General);

impl Engine {
    /// The counters of instance `i`, if an engine other than the general
    /// caches keeps them.
    fn stats(&self, i: usize) -> Option<LevelStats> {
        match self {
            Engine::Other(Other::General) => None,
            Engine::Lean(l) => Some(l.stats(i)),
            Engine::Other(Other::Jaguar(j)) => Some(j.stats(i)),
        }
    }

    /// Whether instance `i` holds `addr`'s line, if an engine other than
    /// the general caches holds the lines.
    fn contains(&self, i: usize, addr: u64) -> Option<bool> {
        match self {
            Engine::Other(Other::General) => None,
            Engine::Lean(l) => Some(l.contains(i, addr)),
            Engine::Other(Other::Jaguar(j)) => Some(j.contains(i, addr)),
        }
    }

    /// Every line instance `i` holds, as byte addresses, if an engine other
    /// than the general caches holds the lines.
    fn lines(&self, i: usize) -> Option<Vec<u64>> {
        match self {
            Engine::Other(Other::General) => None,
            Engine::Lean(l) => Some(l.lines(i)),
            Engine::Other(Other::Jaguar(j)) => Some(j.lines(i)),
        }
    }
}

/// Whether a demand access of kind `k` to the first-level line at
/// `line_addr` is a coherent write by a core that does not own the line
/// alone: such a write must take the full walk to invalidate copies.
#[inline(always)]
fn write_needs_snoop(
    coherent: bool,
    owners: &Owners,
    k: usize,
    line_addr: u64,
    core: usize,
) -> bool {
    coherent && k >= AccessKind::Write as usize && !owners.owns(line_addr, core)
}

/// A per-access count, saturated to the `u16` of [`AccessResult`] (the
/// hierarchy's own counters keep the full value).
fn saturate(n: u32) -> u16 {
    n.min(u32::from(u16::MAX)) as u16
}

/// Byte mask of `[addr, addr + size)` within the line `line` of `1 << shift`
/// bytes, one bit per 1/64 of the line.
#[inline]
fn byte_mask(addr: u64, size: u64, line: u64, shift: u32) -> u64 {
    let start = line << shift;
    let line_last = start + ((1u64 << shift) - 1);
    let a = addr.max(start) - start;
    let b = (addr + (size - 1)).min(line_last) - start; // inclusive
    let gran_shift = shift.saturating_sub(6);
    let first = a >> gran_shift;
    let last = b >> gran_shift;
    let n = last - first + 1;
    let bits = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
    bits << first
}

/// `n` bytes for a message: the exact count and a rounded figure.
fn bytes_figure(n: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    if n >= 1 << 30 {
        format!("{n} bytes, {:.1} GiB", n as f64 / GIB)
    } else {
        format!("{n} bytes, {:.1} MiB", n as f64 / MIB)
    }
}

/// Cores sharing one instance of level `l`.
fn group_of(l: &LevelConfig, cores: usize) -> usize {
    match l.sharing {
        Sharing::Core => 1,
        Sharing::Group { cores } => cores,
        Sharing::All => cores,
    }
}

impl HierarchyConfig {
    /// Bytes of simulator state whose size the configuration chooses, which
    /// [`Hierarchy::new`] allocates before the first access: every cache
    /// instance's lines and replacement state, the miss-classification
    /// shadows (their preallocated part; the set of lines ever seen grows
    /// with the run), the per-line coherence table and the prefetcher
    /// tables. Saturates rather than overflows. Meaningful for a
    /// configuration that [`HierarchyConfig::validate`] accepts.
    pub fn state_bytes(&self) -> u64 {
        let coherent = self.coherence && self.cores > 1;
        let mut total = 0u64;
        for l in &self.levels {
            let instances = (self.cores / group_of(l, self.cores).max(1)) as u64;
            let first = l.level == 1 && l.kind != CacheKind::Instruction;
            let mut one = Cache::state_bytes(l.sets(), l.assoc, l.policy, coherent && first, first);
            if self.classify_misses {
                let lines = l.sets().saturating_mul(u64::from(l.assoc));
                one = one.saturating_add(Shadow::bytes_for(lines as usize));
            }
            total = total.saturating_add(one.saturating_mul(instances));
        }
        if coherent {
            total = total.saturating_add(LineTable::bytes_for(self.coherence_table));
        }
        if self.lean_shape() {
            for l in &self.levels {
                let instances = (self.cores / group_of(l, self.cores).max(1)) as u64;
                let lines = l.sets().saturating_mul(u64::from(l.assoc));
                total =
                    total.saturating_add(sets::tag_bytes(lines, false).saturating_mul(instances));
            }
        }
        if self.jaguar_shape() {
            for l in &self.levels {
                let instances = (self.cores / group_of(l, self.cores).max(1)) as u64;
                let lines = l.sets().saturating_mul(u64::from(l.assoc));
                let touched = coherent && l.kind == CacheKind::Data;
                total =
                    total.saturating_add(sets::tag_bytes(lines, touched).saturating_mul(instances));
            }
        }
        for p in &self.prefetchers {
            let instances = self
                .levels
                .iter()
                .filter(|l| l.level == p.level && l.kind != CacheKind::Instruction)
                .map(|l| (self.cores / group_of(l, self.cores).max(1)) as u64)
                .sum::<u64>();
            total = total.saturating_add(Prefetcher::table_bytes(p).saturating_mul(instances));
        }
        total
    }
}

impl HierarchyConfig {
    /// Whether a hierarchy for this configuration runs on the lean engine
    /// (`lean.rs`): a private first level per core, split or unified, and
    /// at most one unified, non-inclusive level below shared by every
    /// core; LRU, write-back, at most 32 ways and 2^24 lines per instance
    /// and lines of at least 4 bytes; no coherence,
    /// prefetchers, miss classification or all-levels lookup; an access
    /// straddling lines counting once.
    pub fn lean_shape(&self) -> bool {
        let coherent = self.coherence && self.cores > 1;
        if coherent
            || self.lookup != LookupMode::OnMiss
            || !self.prefetchers.is_empty()
            || self.classify_misses
            || self.straddle != StraddleMode::Whole
        {
            return false;
        }
        if self.levels.is_empty() {
            return false;
        }
        let each = self.levels.iter().all(|l| {
            l.policy == ReplacementPolicy::Lru
                && l.write == WritePolicy::WriteBack
                && l.assoc <= sets::MAX_WAYS
                && l.line_size >= 4
                && l.sets().saturating_mul(u64::from(l.assoc)) <= sets::MAX_LINES
                && (1..=2).contains(&l.level)
        });
        let kinds = |n: u8| {
            let mut k: Vec<CacheKind> = self
                .levels
                .iter()
                .filter(|l| l.level == n)
                .map(|l| l.kind)
                .collect();
            k.sort_by_key(|k| *k as u8);
            k
        };
        let firsts = kinds(1);
        let first_ok = (firsts == [CacheKind::Unified]
            || firsts == [CacheKind::Instruction, CacheKind::Data])
            && self
                .levels
                .iter()
                .filter(|l| l.level == 1)
                .all(|l| group_of(l, self.cores) == 1);
        let seconds: Vec<&LevelConfig> = self.levels.iter().filter(|l| l.level == 2).collect();
        let second_ok = match seconds.as_slice() {
            [] => true,
            [l] => {
                l.kind == CacheKind::Unified
                    && l.inclusion == Inclusion::NonInclusive
                    && group_of(l, self.cores) == self.cores
            }
            _ => false,
        };
        each && first_ok && second_ok
    }

    /// Whether a hierarchy for this configuration runs on the Jaguar
    /// engine (`jaguar.rs`): per core a private instruction and a private
    /// data first level, and one unified, inclusive second level per
    /// module of cores (a group dividing the cores, one core, or all);
    /// LRU, write-back, one line size of at least 4 bytes at every level,
    /// at most 32 ways and 2^24 lines per instance; an access straddling
    /// lines counting each line; coherence on or off, every level looked
    /// up on every access or the second on a first-level miss; no
    /// prefetchers or miss classification. The `jaguar` preset is of this
    /// shape.
    pub fn jaguar_shape(&self) -> bool {
        if !self.prefetchers.is_empty()
            || self.classify_misses
            || self.straddle != StraddleMode::PerLine
            || self.levels.len() != 3
        {
            return false;
        }
        let line = self.levels[0].line_size;
        let each = self.levels.iter().all(|l| {
            l.policy == ReplacementPolicy::Lru
                && l.write == WritePolicy::WriteBack
                && l.assoc <= sets::MAX_WAYS
                && l.line_size == line
                && l.line_size >= 4
                && l.sets().saturating_mul(u64::from(l.assoc)) <= sets::MAX_LINES
        });
        let first = |kind: CacheKind| {
            self.levels
                .iter()
                .filter(|l| l.level == 1 && l.kind == kind && group_of(l, self.cores) == 1)
                .count()
                == 1
        };
        let second = self.levels.iter().any(|l| {
            l.level == 2
                && l.kind == CacheKind::Unified
                && l.inclusion == Inclusion::Inclusive
                && group_of(l, self.cores) >= 1
                && self.cores.is_multiple_of(group_of(l, self.cores))
        });
        each && first(CacheKind::Instruction) && first(CacheKind::Data) && second
    }
}

impl Hierarchy {
    /// Builds a hierarchy; the configuration is validated first. The state
    /// it needs ([`HierarchyConfig::state_bytes`]) is allocated fallibly: a
    /// configuration too big for the memory available is refused with a
    /// [`ConfigError`] giving the figure, not an abort.
    pub fn new(cfg: &HierarchyConfig) -> Result<Hierarchy, ConfigError> {
        Hierarchy::build(cfg, true)
    }

    /// [`Hierarchy::new`] without the lean or Jaguar engine, whatever the
    /// shape: the general caches and walks only. Every result and counter
    /// is the same; this is what the engines are checked against.
    pub fn new_general(cfg: &HierarchyConfig) -> Result<Hierarchy, ConfigError> {
        Hierarchy::build(cfg, false)
    }

    /// Whether this hierarchy runs on the lean engine (its configuration
    /// is of [`HierarchyConfig::lean_shape`], it was not built with
    /// [`Hierarchy::new_general`], and no software prefetch, non-temporal
    /// store or flush has come yet: those hand the state to the general
    /// caches for good).
    pub fn uses_lean_engine(&self) -> bool {
        matches!(self.engine, Engine::Lean(_))
    }

    fn build(cfg: &HierarchyConfig, engines: bool) -> Result<Hierarchy, ConfigError> {
        cfg.validate()?;
        // At most one engine's shape fits: the lean engine's counts an
        // access straddling lines once, the Jaguar engine's each line.
        debug_assert!(!(cfg.lean_shape() && cfg.jaguar_shape()));
        let need = cfg.state_bytes();
        let refuse = |key: String| {
            ConfigError {
            key,
            problem: format!(
                "the simulator state of this hierarchy needs {} in all, which could not be allocated",
                bytes_figure(need)
            ),
        }
        };
        let cores = cfg.cores;
        let coherent = cfg.coherence && cores > 1;
        let mut inst: Vec<Instance> = Vec::new();
        // Per level config index: instance index of each group.
        let mut ipath = vec![Path::default(); cores];
        let mut dpath = vec![Path::default(); cores];
        let max_level = cfg.levels.iter().map(|l| l.level).max().unwrap_or(0);
        for n in 1..=max_level {
            for (li, l) in cfg.levels.iter().enumerate().filter(|(_, l)| l.level == n) {
                let group = group_of(l, cores);
                let count = cores / group;
                for g in 0..count {
                    let idx = inst.len();
                    let name = if count > 1 {
                        format!("{}#{g}", l.name)
                    } else {
                        l.name.clone()
                    };
                    let track_touched = coherent && n == 1 && l.kind != CacheKind::Instruction;
                    let track_ip = n == 1 && l.kind != CacheKind::Instruction;
                    // On the lean or Jaguar engine the general caches wait,
                    // reserved but unwritten, for a hand-over that may never
                    // come.
                    let make = if engines && (cfg.lean_shape() || cfg.jaguar_shape()) {
                        Cache::try_new_deferred
                    } else {
                        Cache::try_new
                    };
                    let cache = make(
                        l.sets(),
                        l.assoc,
                        l.line_size.trailing_zeros(),
                        l.policy,
                        track_touched,
                        track_ip,
                    )
                    .map_err(|_| refuse(format!("levels[{li}]")))?;
                    let shadow = if cfg.classify_misses {
                        let lines = (l.sets() * u64::from(l.assoc)) as usize;
                        Some(Shadow::try_new(lines).map_err(|_| refuse(format!("levels[{li}]")))?)
                    } else {
                        None
                    };
                    inst.push(Instance {
                        cache,
                        info: InstanceInfo {
                            name,
                            level_index: li,
                            level: n,
                            kind: l.kind,
                            first_core: g * group,
                            cores: group,
                        },
                        write: l.write,
                        inclusion: if n == 1 {
                            Inclusion::NonInclusive
                        } else {
                            l.inclusion
                        },
                        private: group == 1,
                        stats: LevelStats::default(),
                        shadow,
                        above: Vec::new(),
                        prefetchers: Vec::new(),
                        hits_fast: [0; 4],
                        fast: n == 1
                            && !cfg.classify_misses
                            && l.write == WritePolicy::WriteBack
                            && (cfg.lookup == LookupMode::OnMiss || cfg.prefetchers.is_empty()),
                    });
                    for c in g * group..(g + 1) * group {
                        for (side, paths) in [
                            (CacheKind::Instruction, &mut ipath),
                            (CacheKind::Data, &mut dpath),
                        ] {
                            if l.kind == side || l.kind == CacheKind::Unified {
                                let p = &mut paths[c];
                                p.inst[p.len as usize] = idx as u16;
                                p.len += 1;
                            }
                        }
                    }
                }
            }
        }
        // Back-invalidation targets: every instance above on any path through.
        for c in 0..cores {
            for p in [ipath[c], dpath[c]] {
                for pos in 1..p.len as usize {
                    let below = p.get(pos);
                    for up in 0..pos {
                        let a = p.get(up);
                        if !inst[below].above.contains(&a) {
                            inst[below].above.push(a);
                        }
                    }
                }
            }
        }
        let mut snoop = vec![Vec::new(); cores];
        if coherent {
            for (c, s) in snoop.iter_mut().enumerate() {
                let d = dpath[c];
                let on_path = |i: usize| (0..d.len as usize).any(|p| d.get(p) == i);
                for (i, x) in inst.iter().enumerate() {
                    let own_private = x.private && x.info.first_core == c;
                    if !on_path(i) && !own_private {
                        s.push(i as u16);
                    }
                }
            }
        }
        let mut prefetchers = Vec::new();
        for (pi, p) in cfg.prefetchers.iter().enumerate() {
            for x in inst.iter_mut() {
                if x.info.level == p.level && x.info.kind != CacheKind::Instruction {
                    x.prefetchers.push(prefetchers.len());
                    x.fast = false;
                    prefetchers.push(
                        Prefetcher::try_new(*p)
                            .map_err(|_| refuse(format!("prefetchers[{pi}]")))?,
                    );
                }
            }
        }
        let pf_events_cap = 4096;
        let fast_of = |p: &Path| {
            if inst[p.get(0)].fast {
                p.inst[0]
            } else {
                NO_FAST
            }
        };
        let fast: Vec<[u16; 4]> = (0..cores)
            .map(|c| {
                let d = fast_of(&dpath[c]);
                [fast_of(&ipath[c]), d, d, d]
            })
            .collect();

        let lines = LineTable::try_new(if coherent { cfg.coherence_table } else { 0 })
            .map_err(|_| refuse("coherence_table".into()))?;
        let engine = if engines && cfg.lean_shape() {
            let mut caches = Vec::with_capacity(inst.len());
            for x in &inst {
                let l = &cfg.levels[x.info.level_index];
                caches.push(LeanCache::new(
                    l.sets(),
                    l.assoc,
                    l.line_size.trailing_zeros(),
                ));
            }
            let per_core = (0..cores)
                .map(|c| {
                    let below = if dpath[c].len > 1 {
                        dpath[c].inst[1]
                    } else {
                        crate::lean::NONE
                    };
                    [ipath[c].inst[0], dpath[c].inst[0], below]
                })
                .collect();
            Engine::Lean(Lean::try_new(caches, per_core).map_err(|_| refuse("levels".into()))?)
        } else if engines && cfg.jaguar_shape() {
            let shift = cfg.levels[0].line_size.trailing_zeros();
            let caches = inst
                .iter()
                .map(|x| {
                    let l = &cfg.levels[x.info.level_index];
                    JagCache::new(
                        l.sets(),
                        l.assoc,
                        coherent && l.kind == CacheKind::Data,
                        x.info.first_core,
                        x.info.cores,
                    )
                })
                .collect();
            let per_core = (0..cores)
                .map(|c| [ipath[c].inst[0], dpath[c].inst[0], dpath[c].inst[1]])
                .collect();
            Engine::Other(Other::Jaguar(Box::new(
                Jaguar::try_new(
                    caches,
                    per_core,
                    shift,
                    coherent,
                    cfg.lookup == LookupMode::AllLevels,
                )
                .map_err(|_| refuse("levels".into()))?,
            )))
        } else {
            GENERAL
        };
        Ok(Hierarchy {
            engine,
            coh: CoherenceStats {
                sent_by_core: vec![0; cores],
                received_by_core: vec![0; cores],
                ..CoherenceStats::default()
            },
            lines,
            cfg: cfg.clone(),
            inst,
            ipath,
            dpath,
            snoop,
            coherent,
            sw_pf: PrefetchStats::default(),
            hw_pf: PrefetchStats::default(),
            prefetchers,
            candidates: Candidates::new(),
            inflight: vec![[InFlight::default(); INFLIGHT]; cores],
            inflight_next: vec![0; cores],
            tick: vec![0; cores],
            count_ticks: !cfg.prefetchers.is_empty(),
            fast,
            owners: Owners::new(),
            widest_shift: cfg
                .levels
                .iter()
                .map(|l| l.line_size.trailing_zeros())
                .max()
                .unwrap_or(0),
            fast_dirty: [0, 0, flags::DIRTY, flags::DIRTY],
            per_line: cfg.straddle == StraddleMode::PerLine,
            all_levels: cfg.lookup == LookupMode::AllLevels,
            simple_walk: !cfg.classify_misses
                && cfg.prefetchers.is_empty()
                && cfg.lookup == LookupMode::OnMiss
                && !cfg
                    .levels
                    .iter()
                    .any(|l| l.level > 1 && l.inclusion == Inclusion::Exclusive),
            refills: !cfg.prefetchers.is_empty()
                || cfg
                    .levels
                    .iter()
                    .any(|l| l.inclusion == Inclusion::Exclusive),
            plain: !coherent
                && cfg.lookup == LookupMode::OnMiss
                && cfg.prefetchers.is_empty()
                && !cfg
                    .levels
                    .iter()
                    .any(|l| l.level == 1 && matches!(l.policy, ReplacementPolicy::Srrip { .. })),
            mru_batch: cfg.prefetchers.is_empty()
                && !cfg
                    .levels
                    .iter()
                    .any(|l| matches!(l.policy, ReplacementPolicy::Srrip { .. })),
            // Room for the victims of an access spanning 1024 lines on four
            // levels: wider ones may allocate.
            pending: Vec::with_capacity(PENDING_CAPACITY),
            depth: 0,
            pf_events: Vec::with_capacity(pf_events_cap),
            pf_events_cap,
            pf_events_dropped: 0,
            nt_stores: 0,
            flushes: 0,
        })
    }

    /// The configuration this hierarchy was built from.
    pub fn config(&self) -> &HierarchyConfig {
        &self.cfg
    }

    /// Number of cache levels (the memory slot is [`MAX_LEVELS`]).
    pub fn levels(&self) -> usize {
        self.inst
            .iter()
            .map(|i| usize::from(i.info.level))
            .max()
            .unwrap_or(0)
    }

    /// Every cache instance, in the order of [`Stats::instances`].
    pub fn instances(&self) -> Vec<InstanceInfo> {
        self.inst.iter().map(|i| i.info.clone()).collect()
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> Stats {
        Stats {
            instances: (0..self.inst.len())
                .map(|i| self.instance_stats(i))
                .collect(),
            software_prefetch: self.sw_pf,
            hardware_prefetch: self.hw_pf,
            coherence: self.coh.clone(),
            nt_stores: self.nt_stores,
            flushes: self.flushes,
            prefetch_events_dropped: self.pf_events_dropped,
        }
    }

    /// Stats summed over the instances of each configured level, in
    /// `config().levels` order.
    pub fn level_totals(&self) -> Vec<LevelStats> {
        let mut out = vec![LevelStats::default(); self.cfg.levels.len()];
        for (n, i) in self.inst.iter().enumerate() {
            out[i.info.level_index].add(&self.instance_stats(n));
        }
        out
    }

    /// The counters of instance `i`, from whichever engine runs.
    fn instance_stats(&self, i: usize) -> LevelStats {
        self.engine.stats(i).unwrap_or_else(|| self.inst[i].stats())
    }

    /// Whether this hierarchy runs on the Jaguar engine (its configuration
    /// is of [`HierarchyConfig::jaguar_shape`], it was not built with
    /// [`Hierarchy::new_general`], and no software prefetch, non-temporal
    /// store or flush has come yet: those hand the state to the general
    /// caches for good).
    pub fn uses_jaguar_engine(&self) -> bool {
        matches!(self.engine, Engine::Other(Other::Jaguar(_)))
    }

    /// Hands the running engine's lines (with their dirty bits and, from
    /// the Jaguar engine, bytes touched), counters and owners to the
    /// general caches, which run every access from now on: the one
    /// transition, to [`Other::General`]. Nothing if they run already.
    #[cold]
    #[inline(never)]
    fn leave_engine(&mut self) {
        let engine = std::mem::replace(&mut self.engine, GENERAL);
        for (i, x) in self.inst.iter_mut().enumerate() {
            x.cache.fill_deferred();
            x.stats = match &engine {
                Engine::Other(Other::General) => return,
                Engine::Lean(l) => {
                    l.install(i, &mut x.cache);
                    l.stats(i)
                }
                Engine::Other(Other::Jaguar(j)) => {
                    j.install(i, &mut x.cache);
                    j.stats(i)
                }
            };
            x.hits_fast = [0; 4];
        }
        if let Engine::Other(Other::Jaguar(mut j)) = engine {
            self.owners = j.take_owners();
        }
    }

    /// Per-line coherence statistics, most invalidated lines first.
    pub fn line_sharing(&self) -> Vec<LineSharing> {
        self.lines.sorted()
    }

    /// Moves the software prefetch resolutions known so far into `out`.
    /// Up to 4096 are kept between drains; more are counted as dropped.
    pub fn drain_prefetch_outcomes(&mut self, out: &mut Vec<PrefetchResolution>) {
        out.append(&mut self.pf_events);
    }

    /// Whether `addr`'s line is present in instance `instance` (for tests and
    /// invariant checks).
    pub fn instance_contains(&self, instance: usize, addr: u64) -> bool {
        let c = &self.inst[instance].cache;
        self.engine
            .contains(instance, addr)
            .unwrap_or_else(|| c.contains(addr >> c.line_shift()))
    }

    /// The first-level instance on `core`'s data path (the first data or
    /// unified level).
    ///
    /// # Panics
    /// If `core` is out of range.
    pub fn first_data_instance(&self, core: usize) -> usize {
        self.dpath[core].get(0)
    }

    /// Every line address (byte address of the line) held by an instance.
    pub fn instance_lines(&self, instance: usize) -> Vec<u64> {
        let c = &self.inst[instance].cache;
        self.engine
            .lines(instance)
            .unwrap_or_else(|| c.lines().map(|l| l << c.line_shift()).collect())
    }

    /// The line shift [`Hierarchy::fetch_or_l1_hit`] sets `*last` in, on
    /// `core`'s instruction side (`None` on other engines, which never set
    /// it).
    #[inline(always)]
    pub(crate) fn fetch_shift(&self, core: usize) -> Option<u32> {
        match &self.engine {
            Engine::Lean(l) => Some(l.fetch_shift(core)),
            Engine::Other(_) => None,
        }
    }

    /// `n` fetches on `core`, each one [`Hierarchy::fetch_or_l1_hit`]
    /// would count a hit without a look (within the line `*last` names,
    /// which it leaves as it is).
    #[inline(always)]
    pub(crate) fn fetch_hits(&mut self, core: usize, n: u64) {
        if let Engine::Lean(l) = &mut self.engine {
            l.fetch_hits(core, n);
        }
    }

    /// [`Hierarchy::access_or_l1_hit`] for an instruction fetch that
    /// follows one which ended in first-level line `*last` (see
    /// [`crate::lean::NO_LINE`] and the lean engine's `fetch_or_hit`: a
    /// fetch in that line, with only this core's data accesses between, is
    /// a hit counted without a look where the engine proves it one); sets
    /// `*last` for the next fetch. Other engines take every fetch whole.
    #[inline(always)]
    pub(crate) fn fetch_or_l1_hit(
        &mut self,
        core: usize,
        a: Access,
        last: &mut u64,
    ) -> Option<AccessResult> {
        if let Engine::Lean(l) = &mut self.engine {
            return l.fetch_or_hit(core, a, last);
        }
        *last = crate::lean::NO_LINE;
        Some(self.access(core, a))
    }

    /// [`Hierarchy::access`], with `None` for a single-line first-level
    /// hit the lean engine found by its inlined check (the result
    /// `AccessResult::new(ServedBy::L1, 1)`), so that the caller's
    /// bookkeeping of that case is done with the result known.
    ///
    /// # Panics
    /// If `core` is out of range.
    #[inline(always)]
    pub(crate) fn access_or_l1_hit(&mut self, core: usize, a: Access) -> Option<AccessResult> {
        if let Engine::Lean(l) = &mut self.engine {
            if a.kind as usize <= AccessKind::ReadModifyWrite as usize {
                return l.access_or_hit(core, a);
            }
        }
        Some(self.access(core, a))
    }

    /// Simulates one access by `core` (0-based, below `config().cores`).
    ///
    /// # Panics
    /// If `core` is out of range.
    #[inline(always)]
    pub fn access(&mut self, core: usize, mut a: Access) -> AccessResult {
        let demand = a.kind as usize <= AccessKind::ReadModifyWrite as usize;
        let other = match &mut self.engine {
            Engine::Lean(l) if demand => return l.access(core, a),
            Engine::Lean(_) => None,
            Engine::Other(o) => Some(o),
        };
        match other {
            Some(Other::General) => {}
            Some(Other::Jaguar(j)) if demand => {
                return j.access(core, a, &mut self.coh, &mut self.lines)
            }
            // A kind the engine leaves to the general caches.
            _ => self.leave_engine(),
        }
        if a.addr >= TOP_REGION {
            (a.addr, a.size) = clamp_to_top(a.addr, a.size);
        }
        let k = a.kind as usize;
        if k <= AccessKind::ReadModifyWrite as usize {
            // Indexing `fast` also checks `core`.
            let fast = self.fast[core][k];
            if fast != NO_FAST {
                let hit = if self.plain {
                    self.plain_hit(fast, k, a.addr, a.size)
                } else {
                    self.first_level_hit(fast, core, k, a.addr, a.size)
                };
                if let Some(r) = hit {
                    return r;
                }
            }
        }
        self.access_slow(core, a.kind, a.addr, u64::from(a.size.max(1)), a.ip)
    }

    /// Simulates `accesses` in order, all by `core`, writing the result of
    /// `accesses[i]` to `results[i]`: exactly what calling
    /// [`Hierarchy::access`] on each would do and return, with the checks
    /// that depend only on the core and the configuration made once per
    /// batch. A caller with a buffer of accesses from several threads
    /// passes each run of one core's accesses (see [`CoreMap`]). The batch
    /// loops decide most first-level hits themselves (see
    /// `Lean::batch_into`, `Jaguar::batch`), the rest out of line.
    ///
    /// # Panics
    /// If `core` is out of range or `results` is shorter than `accesses`.
    pub fn access_batch(&mut self, core: usize, accesses: &[Access], results: &mut [AccessResult]) {
        assert!(core < self.cfg.cores, "core {core} out of range");
        let results = &mut results[..accesses.len()];
        let done = match &mut self.engine {
            Engine::Other(Other::General) => 0,
            Engine::Lean(l) => l.batch(core, accesses, results),
            Engine::Other(Other::Jaguar(j)) => {
                j.batch(core, accesses, results, &mut self.coh, &mut self.lines)
            }
        };
        if !matches!(self.engine, Engine::Other(Other::General)) {
            if done == accesses.len() {
                return;
            }
            // The engine stopped at a kind it leaves to the general caches.
            self.leave_engine();
        }
        let (accesses, results) = (&accesses[done..], &mut results[done..]);
        let fast = self.fast[core];
        if self.plain {
            self.batch_plain(core, fast, accesses, results);
        } else if self.mru_batch {
            self.batch_mru(core, fast, accesses, results);
        } else {
            self.batch_general(core, accesses, results);
        }
    }

    /// Runs `accesses` by `core` on the lean engine into `sink` (see
    /// `Lean::batch_into`), if the hierarchy runs on it: how many were
    /// done (up to the first access of a kind the engine leaves to the
    /// general caches; the caller passes the rest to
    /// [`Hierarchy::access_batch`]). `None`, with nothing done, otherwise.
    ///
    /// # Panics
    /// If `core` is out of range.
    #[inline]
    pub(crate) fn lean_batch<S: crate::lean::BatchSink>(
        &mut self,
        core: usize,
        accesses: &[Access],
        sink: &mut S,
    ) -> Option<usize> {
        assert!(core < self.cfg.cores, "core {core} out of range");
        let Engine::Lean(l) = &mut self.engine else {
            return None;
        };
        Some(l.batch_into(core, accesses, sink))
    }

    /// The batch loop of a configuration with coherence or all-levels
    /// lookup (the `jaguar` shape) but no hardware prefetcher and no SRRIP
    /// level. A demand access to one first-level line is decided here when
    /// that line is the one its first level touched last or its set's most
    /// recent, carries no prefetch mark, is owned alone by `core` if the
    /// access writes (so no copy elsewhere needs invalidating), and, in
    /// all-levels mode, is likewise the most recent line of its set at
    /// every level below (so no level's recency changes). The state change
    /// is [`Hierarchy::first_level_hit`]'s: the dirty bit for a write, the
    /// bytes touched for a data access of a coherent hierarchy, a hit
    /// counted at every level looked up. Anything else takes
    /// [`Hierarchy::access`], which that look leaves with nothing to undo.
    ///
    /// Such a hit changes no recency and no ownership anywhere, and within
    /// one core's batch nothing but a call to [`Hierarchy::access`] can
    /// (other cores do not run): so the line found last on each side
    /// (instruction, data) is *held*, and the next access to it is decided
    /// by one compare, its dirty bit and bytes touched gathered in the
    /// holder and its hits counted locally, all written back before any
    /// such call and at the end of the batch.
    fn batch_mru(
        &mut self,
        core: usize,
        fast: [u16; 4],
        accesses: &[Access],
        results: &mut [AccessResult],
    ) {
        // The levels below the first, per side, when every level is looked
        // up on every access.
        let below = |p: Path, all: bool| {
            let mut b = [0u16; MAX_LEVELS];
            let n = if all { p.len as usize - 1 } else { 0 };
            b[..n].copy_from_slice(&p.inst[1..=n]);
            (b, n)
        };
        let lower = [
            below(self.ipath[core], self.all_levels),
            below(self.dpath[core], self.all_levels),
        ];
        let coherent = self.coherent;
        // Per kind: the first level's line shift (`NO_FAST` sides are never
        // looked at).
        let shift_of = |f: u16| {
            if f == NO_FAST {
                0
            } else {
                self.inst[usize::from(f)].cache.line_shift()
            }
        };
        let (si, sd) = (shift_of(fast[0]), shift_of(fast[1]));
        let shift = [si, sd, sd, sd];
        // Bytes touched, as `byte_mask` for one line of the data side.
        let (gran, in_line) = (sd.saturating_sub(6), (1u64 << sd) - 1);
        // Per kind, the held line an access of that kind hits with one
        // compare: the instruction side's for fetches, the data side's for
        // reads, and for writes the data side's only if the core owns it
        // alone (or there is no coherence). `u64::MAX` for none (no line
        // of an address below `TOP_REGION` is).
        let mut key = [u64::MAX; 4];
        // The data side's held line: its index and what its hits since it
        // was found would have written.
        let mut held = Held::NONE;
        // Hits decided here, by kind, counted at every level looked up.
        let mut hits = [0u64; 4];
        for (a, r) in accesses.iter().zip(results.iter_mut()) {
            let k = a.kind as usize;
            if k <= AccessKind::ReadModifyWrite as usize && a.addr < TOP_REGION {
                let sh = shift[k];
                let line = a.addr >> sh;
                let end = a.addr + u64::from(a.size.saturating_sub(1));
                if end >> sh == line {
                    let mut hit = line == key[k];
                    if !hit {
                        if let Some((idx, owned)) = self.mru_look(
                            core,
                            fast[k],
                            &lower[usize::from(k != 0)],
                            k,
                            a.addr,
                            end,
                            sh,
                        ) {
                            hit = true;
                            if k == 0 {
                                key[0] = line;
                            } else {
                                self.put_back(held);
                                held = Held {
                                    line,
                                    idx,
                                    inst: fast[k],
                                    dirty: 0,
                                    touched: 0,
                                };
                                let w = if owned { line } else { u64::MAX };
                                key = [key[0], line, w, w];
                            }
                        }
                    }
                    if hit {
                        if k != 0 {
                            held.dirty |= self.fast_dirty[k];
                            if coherent {
                                let first = (a.addr & in_line) >> gran;
                                let last = (end & in_line) >> gran;
                                held.touched |= (u64::MAX >> (63 - (last - first))) << first;
                            }
                        }
                        hits[k] += 1;
                        *r = L1_HIT;
                        continue;
                    }
                }
            }
            self.put_back(std::mem::replace(&mut held, Held::NONE));
            key = [u64::MAX; 4];
            *r = self.access_outlined(core, *a);
        }
        self.put_back(held);
        for (k, n) in hits.into_iter().enumerate() {
            if n == 0 {
                continue;
            }
            let lk = usize::from(k != 0);
            self.inst[usize::from(fast[k])].hits_fast[k] += n;
            let (b, len) = lower[lk];
            for &y in &b[..len] {
                self.inst[usize::from(y)].hits_fast[lk] += n;
            }
        }
    }

    /// [`Hierarchy::batch_mru`]'s look at a one-line access of kind `k` by
    /// `core` to bytes `addr..=end` of first-level instance `f` (or
    /// `NO_FAST`): if the access is decided there (nothing changed but
    /// lookup memos), the line's index and whether a write to it needs no
    /// snoop; else `None`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn mru_look(
        &mut self,
        core: usize,
        f: u16,
        lower: &([u16; MAX_LEVELS], usize),
        k: usize,
        addr: u64,
        end: u64,
        shift: u32,
    ) -> Option<(usize, bool)> {
        if f == NO_FAST {
            return None;
        }
        let line = addr >> shift;
        let x = &mut self.inst[usize::from(f)];
        let idx = x.cache.lookup_mru(line)?;
        if x.cache.flags(idx) & flags::PREFETCHED != 0 {
            return None;
        }
        // Without coherence a write needs no ownership.
        let owned = !self.coherent || self.owners.owns(line << shift, core);
        if k >= AccessKind::Write as usize && !owned {
            return None;
        }
        let (b, n) = lower;
        for &y in &b[..*n] {
            let y = &mut self.inst[usize::from(y)];
            let sh = y.cache.line_shift();
            // One line below too (narrower lines below take the walk).
            if end >> sh != addr >> sh {
                return None;
            }
            y.cache.lookup_mru(addr >> sh)?;
        }
        Some((idx, owned))
    }

    /// Writes a held line's gathered dirty bit and bytes touched into its
    /// first level.
    #[inline(always)]
    fn put_back(&mut self, h: Held) {
        if h.line != Held::NONE.line && (h.dirty != 0 || h.touched != 0) {
            let c = &mut self.inst[usize::from(h.inst)].cache;
            c.set_flags(h.idx, h.dirty);
            if h.touched != 0 {
                c.add_touched(h.idx, h.touched);
            }
        }
    }

    /// The batch loop of any other configuration: [`Hierarchy::access`]
    /// on each access.
    #[inline(never)]
    fn batch_general(&mut self, core: usize, accesses: &[Access], results: &mut [AccessResult]) {
        for (a, r) in accesses.iter().zip(results.iter_mut()) {
            *r = self.access(core, *a);
        }
    }

    /// The batch loop of a plain configuration: a demand access to one or
    /// two first-level lines, each the line touched last or its set's most
    /// recently used way, with no prefetch mark, is decided here (the same
    /// state change as [`Hierarchy::plain_hit`]: the dirty bit for a write,
    /// the hits counted); anything else takes [`Hierarchy::access`], which
    /// that quick look leaves with nothing to undo.
    fn batch_plain(
        &mut self,
        core: usize,
        fast: [u16; 4],
        accesses: &[Access],
        results: &mut [AccessResult],
    ) {
        for (a, r) in accesses.iter().zip(results.iter_mut()) {
            let k = a.kind as usize;
            if a.addr < TOP_REGION && k <= AccessKind::ReadModifyWrite as usize {
                let f = fast[k];
                if f != NO_FAST {
                    let x = &mut self.inst[usize::from(f)];
                    let shift = x.cache.line_shift();
                    let line = a.addr >> shift;
                    let end = a.addr + u64::from(a.size.saturating_sub(1));
                    if end >> shift == line {
                        if let Some(idx) = x.cache.lookup_mru(line) {
                            let fl = x.cache.flags(idx);
                            if fl & flags::PREFETCHED == 0 {
                                x.cache.set_flags(idx, self.fast_dirty[k]);
                                x.hits_fast[k] += 1;
                                *r = L1_HIT;
                                continue;
                            }
                        }
                    } else if end >> shift == line + 1 {
                        // Two lines, each the most recent of its set once
                        // looked up (a set holding both leaves the second
                        // to the full path).
                        if let Some(i0) = x.cache.lookup_mru(line) {
                            if let Some(i1) = x.cache.lookup_mru(line + 1) {
                                let fl = x.cache.flags(i0) | x.cache.flags(i1);
                                if fl & flags::PREFETCHED == 0 {
                                    x.cache.set_flags(i0, self.fast_dirty[k]);
                                    x.cache.set_flags(i1, self.fast_dirty[k]);
                                    let n = if self.per_line { 2 } else { 1 };
                                    x.hits_fast[k] += n;
                                    *r = AccessResult::new(ServedBy::L1, n);
                                    continue;
                                }
                            }
                        }
                    }
                }
            }
            *r = self.access_outlined(core, *a);
        }
    }

    /// [`Hierarchy::access`] as a call, keeping the batch loop small.
    #[inline(never)]
    fn access_outlined(&mut self, core: usize, a: Access) -> AccessResult {
        self.access(core, a)
    }

    /// The fast path of a plain configuration (no coherence, no all-levels
    /// lookup, no hardware prefetcher, no SRRIP first level): a one-line
    /// access that hits the first level with no prefetch mark on its line.
    #[inline(always)]
    fn plain_hit(&mut self, fast: u16, k: usize, addr: u64, size: u32) -> Option<AccessResult> {
        let x = &mut self.inst[usize::from(fast)];
        let shift = x.cache.line_shift();
        let line = addr >> shift;
        let end = addr + u64::from(size.saturating_sub(1));
        if end >> shift != line {
            // No tick is counted in a plain configuration: any core will do.
            return self.first_level_hit_lines(fast, 0, k, addr, end);
        }
        let idx = x.cache.lookup_not_srrip(line)?;
        if x.cache.flags(idx) & flags::PREFETCHED != 0 {
            return None;
        }
        x.cache.set_flags(idx, self.fast_dirty[k]);
        x.hits_fast[k] += 1;
        Some(AccessResult::new(ServedBy::L1, 1))
    }

    /// The fast path: a demand access that hits the first level, where no
    /// shadow, prefetcher, write-through or coherence action is due. Returns
    /// `None` to fall through to the full walk, which is exact: a lookup miss
    /// changes no state, and touching a line again leaves every policy's
    /// order as it was.
    #[inline(always)]
    fn first_level_hit(
        &mut self,
        fast: u16,
        core: usize,
        k: usize,
        addr: u64,
        size: u32,
    ) -> Option<AccessResult> {
        let x = &mut self.inst[usize::from(fast)];
        let shift = x.cache.line_shift();
        let line = addr >> shift;
        let end = addr + u64::from(size.max(1)) - 1;
        if end >> shift != line {
            return self.first_level_hit_lines(fast, core, k, addr, end);
        }
        let idx = x.cache.lookup(line)?;
        // No pending prefetch mark; a coherent write needs sole ownership.
        if x.cache.flags(idx) & flags::PREFETCHED != 0 {
            return None;
        }
        if write_needs_snoop(self.coherent, &self.owners, k, line << shift, core) {
            return None;
        }
        if self.all_levels && !self.lower_levels_hit(core, k, addr, end, 1) {
            return None;
        }
        let x = &mut self.inst[usize::from(fast)];
        x.cache.set_flags(idx, self.fast_dirty[k]);
        if self.coherent && k != 0 {
            x.cache
                .add_touched(idx, byte_mask(addr, end - addr + 1, line, shift));
        }
        x.hits_fast[k] += 1;
        if self.count_ticks {
            self.tick[core] += 1;
        }
        Some(AccessResult::new(ServedBy::L1, 1))
    }

    /// With every level looked up on every access (the talk's Jaguar
    /// model): whether the levels below the first all hit too, counting
    /// them as the full walk does (after the first level took a write, the
    /// levels below see a read).
    /// `count` is the lookups to count at each level: 1, or in
    /// [`StraddleMode::PerLine`] one per first-level line.
    #[inline(always)]
    fn lower_levels_hit(&mut self, core: usize, k: usize, addr: u64, end: u64, count: u64) -> bool {
        let path = if k == 0 {
            self.ipath[core]
        } else {
            self.dpath[core]
        };
        let len = path.len as usize;
        for pos in 1..len {
            let y = &mut self.inst[path.get(pos)];
            let sh = y.cache.line_shift();
            let (mut line, last) = (addr >> sh, end >> sh);
            loop {
                if y.cache.lookup(line).is_none() {
                    return false;
                }
                if line == last {
                    break;
                }
                line += 1;
            }
        }
        let lk = usize::from(k != 0);
        for pos in 1..len {
            self.inst[path.get(pos)].hits_fast[lk] += count;
        }
        true
    }

    /// The fast path for an access spanning several first-level lines
    /// (at most four; wider ones take the full walk).
    #[inline(never)]
    fn first_level_hit_lines(
        &mut self,
        fast: u16,
        core: usize,
        k: usize,
        addr: u64,
        end: u64,
    ) -> Option<AccessResult> {
        let x = &mut self.inst[usize::from(fast)];
        let shift = x.cache.line_shift();
        let (first, last) = (addr >> shift, end >> shift);
        let n = last - first + 1;
        if n > 4 {
            return None;
        }
        let mut idx = [0usize; 4];
        for (i, line) in (first..=last).enumerate() {
            idx[i] = x.cache.lookup(line)?;
            if x.cache.flags(idx[i]) & flags::PREFETCHED != 0 {
                return None;
            }
            if write_needs_snoop(self.coherent, &self.owners, k, line << shift, core) {
                return None;
            }
        }
        let count = if self.per_line { n } else { 1 };
        if self.all_levels && !self.lower_levels_hit(core, k, addr, end, count) {
            return None;
        }
        let x = &mut self.inst[usize::from(fast)];
        // All hit: only now mark them, so a fall-through leaves no marks.
        for (i, line) in (first..=last).enumerate() {
            x.cache.set_flags(idx[i], self.fast_dirty[k]);
            if self.coherent && k != 0 {
                x.cache
                    .add_touched(idx[i], byte_mask(addr, end - addr + 1, line, shift));
            }
        }
        let n = if self.per_line { n } else { 1 };
        x.hits_fast[k] += n;
        if self.count_ticks {
            self.tick[core] += 1;
        }
        Some(AccessResult::new(ServedBy::L1, n))
    }

    #[inline(never)]
    fn access_slow(
        &mut self,
        core: usize,
        kind: AccessKind,
        addr: u64,
        size: u64,
        ip: u64,
    ) -> AccessResult {
        assert!(core < self.cfg.cores, "core {core} out of range");
        match kind {
            AccessKind::InstrFetch
            | AccessKind::Read
            | AccessKind::Write
            | AccessKind::ReadModifyWrite => self.demand(core, kind, addr, size, ip),
            AccessKind::Prefetch => self.software_prefetch(core, addr, ip),
            AccessKind::NonTemporalStore => self.remove_everywhere(core, addr, size, true),
            AccessKind::Flush => self.remove_everywhere(core, addr, size, false),
        }
    }

    fn demand(
        &mut self,
        core: usize,
        kind: AccessKind,
        addr: u64,
        size: u64,
        ip: u64,
    ) -> AccessResult {
        let path = if kind == AccessKind::InstrFetch {
            self.ipath[core]
        } else {
            self.dpath[core]
        };
        let mut r = AccessResult::new(ServedBy::L1, 0);
        if self.count_ticks {
            self.tick[core] += 1;
        }
        match self.cfg.straddle {
            StraddleMode::Whole => {
                let s = if self.simple_walk {
                    self.walk_simple(core, path, kind, addr, size)
                } else {
                    self.walk(core, path, 0, kind, addr, size, ip, 0, true)
                };
                r = AccessResult::new(s, 1);
                if kind != AccessKind::InstrFetch {
                    self.after_data_access(core, kind, addr, size, &mut r);
                }
            }
            StraddleMode::PerLine => {
                let shift = self.inst[path.get(0)].cache.line_shift();
                let last = addr + (size - 1);
                let mut worst = ServedBy::level_n(1);
                for line in (addr >> shift)..=(last >> shift) {
                    let at = addr.max(line << shift);
                    let seg = last.min((line << shift) + ((1 << shift) - 1)) - at + 1;
                    let s = if self.simple_walk {
                        self.walk_simple(core, path, kind, at, seg)
                    } else {
                        self.walk(core, path, 0, kind, at, seg, ip, 0, true)
                    };
                    r.add_line(s);
                    if s.slot() > worst.slot() {
                        worst = s;
                    }
                    if kind != AccessKind::InstrFetch {
                        self.after_data_access(core, kind, at, seg, &mut r);
                    }
                }
                r.served_by = worst;
            }
        }
        r
    }

    /// Coherence and prefetch training after a demand data access.
    #[inline]
    fn after_data_access(
        &mut self,
        core: usize,
        kind: AccessKind,
        addr: u64,
        size: u64,
        r: &mut AccessResult,
    ) {
        if self.coherent {
            let l1 = self.dpath[core].get(0);
            let shift = self.inst[l1].cache.line_shift();
            for line in (addr >> shift)..=((addr + size - 1) >> shift) {
                let mask = byte_mask(addr, size, line, shift);
                if let Some(idx) = self.inst[l1].cache.find(line) {
                    self.inst[l1].cache.add_touched(idx, mask);
                }
                if kind.writes() {
                    let (sent, fs) = self.invalidate_others(core, line << shift, 1 << shift, mask);
                    r.invalidations = r.invalidations.saturating_add(sent);
                    r.false_sharing = r.false_sharing.saturating_add(fs);
                }
            }
        }
    }

    /// The demand walk of a hierarchy without the rules that make
    /// [`Hierarchy::walk`] general: no miss classification, no hardware
    /// prefetcher, no exclusive level, lower levels looked up only on a
    /// miss (`simple_walk`). The same rules otherwise, in the same order;
    /// `tests/properties.rs` checks the two agree.
    #[inline(never)]
    fn walk_simple(
        &mut self,
        core: usize,
        path: Path,
        kind: AccessKind,
        addr: u64,
        size: u64,
    ) -> ServedBy {
        let mut write_pending = kind.writes();
        let mut filled = false;
        let last_byte = addr + (size - 1);
        let len = path.len as usize;
        let mut served = ServedBy::MEMORY;
        for pos in 0..len {
            let ii = path.get(pos);
            let x = &mut self.inst[ii];
            let shift = x.cache.line_shift();
            let write_back = x.write == WritePolicy::WriteBack;
            let inclusive = x.inclusion == Inclusion::Inclusive;
            let as_write = write_pending;
            let dirty = if as_write && write_back {
                flags::DIRTY
            } else {
                0
            };
            let allocate = write_back || !as_write;
            let (first, last) = (addr >> shift, last_byte >> shift);
            let mut miss = false;
            let mut line = first;
            loop {
                let x = &mut self.inst[ii];
                match x.cache.lookup(line) {
                    Some(idx) => {
                        let f = x.cache.flags(idx);
                        x.cache.set_flags(idx, dirty);
                        if f & flags::PREFETCHED != 0 {
                            self.prefetched_line_used(core, ii, idx, line, f);
                        }
                    }
                    None => {
                        miss = true;
                        if allocate {
                            if let (_, Some(mut ev)) = x.cache.insert(line, dirty) {
                                x.stats.evictions += 1;
                                if inclusive && self.back_invalidate(ii, ev) {
                                    ev.flags |= flags::DIRTY;
                                }
                                self.pending.push(Pending { path, pos, ev });
                            }
                        }
                    }
                }
                if line == last {
                    break;
                }
                line += 1;
            }
            let st = &mut self.inst[ii].stats;
            let m = u64::from(miss);
            match kind {
                AccessKind::InstrFetch => {
                    st.ifetch += 1;
                    st.ifetch_misses += m;
                }
                _ if as_write => {
                    st.writes += 1;
                    st.write_misses += m;
                }
                _ => {
                    st.reads += 1;
                    st.read_misses += m;
                }
            }
            filled |= miss;
            if as_write {
                if write_back {
                    write_pending = false;
                } else if pos + 1 < len {
                    st.write_throughs += 1;
                }
            }
            if !miss && served.is_memory() {
                served = ServedBy::level_n(self.inst[ii].info.level);
            }
            if !served.is_memory() && !write_pending {
                break;
            }
        }
        if !self.pending.is_empty() {
            self.handle_victims();
        }
        if filled && self.coherent {
            self.drop_ownership_of_others(core, addr, size);
        }
        served
    }

    /// Walks `path` from `start`: looks the access up level by level, fills
    /// missing levels, and returns the level that served it. `fill_flags`
    /// are set on the line filled into `path[start]` (prefetch marks).
    /// `count` is false for prefetch fills, which do not count as demand.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &mut self,
        core: usize,
        path: Path,
        start: usize,
        kind: AccessKind,
        addr: u64,
        size: u64,
        ip: u64,
        fill_flags: u8,
        count: bool,
    ) -> ServedBy {
        let mut served: Option<ServedBy> = None;
        let mut write_pending = kind.writes();
        let all_levels = self.cfg.lookup == LookupMode::AllLevels;
        let mut filled = false;
        let mut pos = start;
        let len = path.len as usize;
        while pos < len {
            let ii = path.get(pos);
            let level = self.inst[ii].info.level;
            let shift = self.inst[ii].cache.line_shift();
            let write_back = self.inst[ii].write == WritePolicy::WriteBack;
            let exclusive = self.inst[ii].inclusion == Inclusion::Exclusive;
            let first = addr >> shift;
            let last = (addr + size - 1) >> shift;
            // What this level sees: the access itself, or only the write
            // passed through from a write-through level above.
            let as_write = write_pending;
            let mut miss = false;
            let mut pf_hit = false;
            let mut line = first;
            loop {
                let found = self.inst[ii].cache.lookup(line);
                if let Some(sh) = self.inst[ii].shadow.as_mut() {
                    let s = sh.access(line);
                    // One class per lookup: a straddling access that misses
                    // two lines is one miss, classified by its first line.
                    if found.is_none() && count && !miss {
                        let m = &mut self.inst[ii].stats.misses;
                        if s.first_reference {
                            m.compulsory += 1;
                        } else if s.hit {
                            m.conflict += 1;
                        } else {
                            m.capacity += 1;
                        }
                    }
                }
                match found {
                    Some(idx) => {
                        let f = self.inst[ii].cache.flags(idx);
                        if f & flags::PREFETCHED != 0 && count {
                            self.prefetched_line_used(core, ii, idx, line, f);
                            pf_hit |= f & flags::HW_PREFETCHED != 0;
                        }
                        // Victim cache hit: the line moves up to the level
                        // above that filled it, taking its dirty bit along,
                        // and leaves this level. (No level above filled it
                        // after a write-through no-allocate miss: then it
                        // stays here and takes the write.)
                        let holder = if exclusive && served.is_none() && pos > start {
                            (start..pos).rev().find_map(|p| {
                                let up = path.get(p);
                                let shift = self.inst[up].cache.line_shift();
                                self.inst[up]
                                    .cache
                                    .find((line << self.inst[ii].cache.line_shift()) >> shift)
                                    .map(|ui| (up, ui))
                            })
                        } else {
                            None
                        };
                        if let Some((up, ui)) = holder {
                            let ev = self.inst[ii].cache.invalidate(line).expect("just found");
                            if ev.flags & flags::DIRTY != 0 {
                                self.inst[up].cache.set_flags(ui, flags::DIRTY);
                            }
                        } else if as_write && write_back {
                            self.inst[ii].cache.set_flags(idx, flags::DIRTY);
                        }
                    }
                    None => {
                        miss = true;
                        // A prefetch fills its own level even when that
                        // level is exclusive of the ones above.
                        let prefetch_target = pos == start && fill_flags != 0;
                        let allocate = prefetch_target || (!exclusive && (write_back || !as_write));
                        if allocate {
                            let mut f = if pos == start { fill_flags } else { 0 };
                            if as_write && write_back {
                                f |= flags::DIRTY;
                            }
                            let (idx, ev) = self.inst[ii].cache.insert(line, f);
                            if f & flags::SW_PREFETCHED != 0 {
                                self.inst[ii].cache.set_prefetch_ip(idx, ip);
                            }
                            if let Some(ev) = ev {
                                self.inst[ii].stats.evictions += 1;
                                let mut ev = ev;
                                if self.inst[ii].inclusion == Inclusion::Inclusive
                                    && self.back_invalidate(ii, ev)
                                {
                                    ev.flags |= flags::DIRTY;
                                }
                                self.pending.push(Pending { path, pos, ev });
                            }
                        }
                    }
                }
                if line == last {
                    break;
                }
                line += 1;
            }
            if count {
                let st = &mut self.inst[ii].stats;
                match kind {
                    AccessKind::InstrFetch => {
                        st.ifetch += 1;
                        st.ifetch_misses += u64::from(miss);
                    }
                    _ if as_write => {
                        st.writes += 1;
                        st.write_misses += u64::from(miss);
                    }
                    _ => {
                        st.reads += 1;
                        st.read_misses += u64::from(miss);
                    }
                }
            }
            filled |= miss;
            if count && !self.inst[ii].prefetchers.is_empty() {
                self.train_prefetchers(core, path, pos, ii, addr, ip, miss, pf_hit);
            }
            if !miss && served.is_none() {
                served = Some(ServedBy::level_n(level));
            }
            if as_write && write_back && (!miss || !exclusive) {
                write_pending = false;
            }
            if as_write && !write_back && pos + 1 < len {
                self.inst[ii].stats.write_throughs += 1;
            }
            pos += 1;
            let go_on = served.is_none() || all_levels || write_pending;
            if !go_on {
                break;
            }
        }
        // A prefetch walk nested in a demand walk leaves the victims to the
        // outer walk, which may still be looking for its line below.
        if self.depth == 0 && !self.pending.is_empty() {
            self.handle_victims();
        }
        if filled && self.coherent {
            self.drop_ownership_of_others(core, addr, size);
        }
        served.unwrap_or(ServedBy::MEMORY)
    }

    /// A demand access used a line marked as prefetched.
    fn prefetched_line_used(&mut self, core: usize, ii: usize, idx: usize, line: u64, f: u8) {
        if f & flags::SW_PREFETCHED != 0 {
            self.sw_pf.useful += 1;
            let pip = self.inst[ii].cache.prefetch_ip(idx);
            self.push_pf_event(PrefetchResolution {
                ip: pip,
                core: core as u16,
                outcome: PrefetchOutcome::Useful,
            });
        }
        if f & flags::HW_PREFETCHED != 0 {
            let now = self.tick[core];
            let lag = u64::from(self.cfg.prefetch_lag);
            let late = self.inflight[core]
                .iter()
                .any(|x| x.instance as usize == ii && x.line == line && now - x.tick < lag);
            if late {
                self.hw_pf.late += 1;
            } else {
                self.hw_pf.useful += 1;
            }
        }
        self.inst[ii]
            .cache
            .clear_flags(idx, flags::SW_PREFETCHED | flags::HW_PREFETCHED);
    }

    fn push_pf_event(&mut self, e: PrefetchResolution) {
        if self.pf_events.len() < self.pf_events_cap {
            self.pf_events.push(e);
        } else {
            self.pf_events_dropped += 1;
        }
    }

    /// Accounts a line leaving a cache unused after a prefetch.
    fn prefetched_line_lost(&mut self, core: usize, ev: &Evicted) {
        if ev.flags & flags::SW_PREFETCHED != 0 {
            self.sw_pf.wasted += 1;
            self.push_pf_event(PrefetchResolution {
                ip: ev.prefetch_ip,
                core: core as u16,
                outcome: PrefetchOutcome::Wasted,
            });
        }
        if ev.flags & flags::HW_PREFETCHED != 0 {
            self.hw_pf.wasted += 1;
        }
    }

    /// Removes `ev`'s line from every instance above inclusive instance `ii`.
    /// Returns whether a removed copy was dirty: its data leaves with the
    /// victim, which is then dirty too.
    fn back_invalidate(&mut self, ii: usize, ev: Evicted) -> bool {
        let mut dirty = false;
        let shift = self.inst[ii].cache.line_shift();
        let addr = ev.line << shift;
        for k in 0..self.inst[ii].above.len() {
            let up = self.inst[ii].above[k];
            let ushift = self.inst[up].cache.line_shift();
            let first = addr >> ushift;
            let last = (addr + ((1 << shift) - 1)) >> ushift;
            for l in first..=last {
                if let Some(uev) = self.inst[up].cache.invalidate(l) {
                    self.inst[up].stats.back_invalidations += 1;
                    if let Some(sh) = self.inst[up].shadow.as_mut() {
                        sh.remove(l);
                    }
                    if uev.flags & flags::DIRTY != 0 {
                        // The dirty data joins the victim on its way down.
                        self.inst[up].stats.writebacks += 1;
                        dirty = true;
                    }
                    let owner = self.inst[up].info.first_core;
                    self.prefetched_line_lost(owner, &uev);
                }
            }
        }
        dirty
    }

    /// Handles queued victims: fills exclusive victim caches, writes dirty
    /// lines back to the first level below that holds them.
    fn handle_victims(&mut self) {
        let mut i = 0;
        while i < self.pending.len() {
            let Pending { path, pos, ev } = self.pending[i];
            i += 1;
            let src = path.get(pos);
            // A victim whose line came back into its level while queued (a
            // prefetch fill or an exclusive victim fill in the same walk) is
            // stale: merge, do not sink it.
            if let Some(idx) = self
                .refills
                .then(|| self.inst[src].cache.find(ev.line))
                .flatten()
            {
                self.inst[src].cache.set_flags(idx, ev.flags & flags::DIRTY);
                continue;
            }
            let owner = self.inst[src].info.first_core;
            self.prefetched_line_lost(owner, &ev);
            let dirty = ev.flags & flags::DIRTY != 0;
            let addr = ev.line << self.inst[src].cache.line_shift();
            let next = pos + 1;
            if next < path.len as usize
                && self.inst[path.get(next)].inclusion == Inclusion::Exclusive
            {
                let nx = path.get(next);
                let line = addr >> self.inst[nx].cache.line_shift();
                if dirty {
                    self.inst[src].stats.writebacks += 1;
                }
                match self.inst[nx].cache.find(line) {
                    Some(idx) => {
                        if dirty {
                            self.inst[nx].cache.set_flags(idx, flags::DIRTY);
                        }
                    }
                    None => {
                        // The line may have sunk further already (another
                        // upper copy was evicted first, e.g. from the other
                        // side of a split L1): keep a single exclusive copy.
                        let mut f = ev.flags & flags::DIRTY;
                        for p in next + 1..path.len as usize {
                            let low = path.get(p);
                            if self.inst[low].inclusion != Inclusion::Exclusive {
                                break;
                            }
                            let l = addr >> self.inst[low].cache.line_shift();
                            if let Some(old) = self.inst[low].cache.invalidate(l) {
                                f |= old.flags & flags::DIRTY;
                            }
                        }
                        let (_, v) = self.inst[nx].cache.insert(line, f);
                        if let Some(v) = v {
                            self.inst[nx].stats.evictions += 1;
                            self.pending.push(Pending {
                                path,
                                pos: next,
                                ev: v,
                            });
                        }
                    }
                }
            } else if dirty && self.inst[src].write == WritePolicy::WriteBack {
                self.inst[src].stats.writebacks += 1;
                for p in next..path.len as usize {
                    let nx = path.get(p);
                    let line = addr >> self.inst[nx].cache.line_shift();
                    if let Some(idx) = self.inst[nx].cache.find(line) {
                        if self.inst[nx].write == WritePolicy::WriteBack {
                            self.inst[nx].cache.set_flags(idx, flags::DIRTY);
                            break;
                        }
                    }
                }
            }
        }
        self.pending.clear();
    }

    /// `core` filled the lines of `[addr, addr + size)` somewhere: no other
    /// core owns them alone any more (nor the first-level lines sharing a
    /// wider line of some level with them).
    fn drop_ownership_of_others(&mut self, core: usize, addr: u64, size: u64) {
        let shift = self.inst[self.dpath[core].get(0)].cache.line_shift();
        let w = self.widest_shift.max(shift);
        let (first, last) = (
            (addr >> w) << w,
            ((addr + size - 1) >> w) << w | ((1 << w) - 1),
        );
        for line in (first >> shift)..=(last >> shift) {
            self.owners.filled_by(line << shift, core);
        }
    }

    /// A write by `core` to line `line_addr` (`line_size` bytes at the first
    /// level) invalidates every copy off the writer's path. Returns
    /// (copies invalidated, of which false sharing).
    fn invalidate_others(
        &mut self,
        core: usize,
        line_addr: u64,
        line_size: u64,
        wmask: u64,
    ) -> (u16, u16) {
        let l1 = self.dpath[core].get(0);
        let l1_line = line_addr >> self.inst[l1].cache.line_shift();
        if self.owners.owns(line_addr, core) {
            return (0, 0);
        }
        let mut writer_mask = wmask;
        if let Some(idx) = self.inst[l1].cache.find(l1_line) {
            writer_mask |= self.inst[l1].cache.touched(idx);
        }
        let mut sent = 0u32;
        let mut fs = 0u32;
        for k in 0..self.snoop[core].len() {
            let t = usize::from(self.snoop[core][k]);
            let tshift = self.inst[t].cache.line_shift();
            let first = line_addr >> tshift;
            let last = (line_addr + (line_size - 1)) >> tshift;
            for l in first..=last {
                if let Some(ev) = self.inst[t].cache.invalidate(l) {
                    sent += 1;
                    let x = &mut self.inst[t];
                    x.stats.invalidations_received += 1;
                    if let Some(sh) = x.shadow.as_mut() {
                        sh.remove(l);
                    }
                    if ev.flags & flags::DIRTY != 0 {
                        x.stats.writebacks += 1;
                    }
                    let owner = x.info.first_core;
                    if x.private {
                        self.coh.received_by_core[owner] += 1;
                    }
                    if ev.touched != 0 && ev.touched & writer_mask == 0 {
                        fs += 1;
                    }
                    self.prefetched_line_lost(owner, &ev);
                }
            }
        }
        self.owners.claim(line_addr, core);
        if sent > 0 {
            self.coh.sent_by_core[core] += 1;
            self.coh.invalidations += u64::from(sent);
            self.coh.false_sharing += u64::from(fs);
            match self.lines.entry(line_addr) {
                Some(e) => {
                    e.sent += 1;
                    e.received += u64::from(sent);
                    e.false_sharing += u64::from(fs);
                }
                None => self.coh.untracked += 1,
            }
        }
        (saturate(sent), saturate(fs))
    }

    #[allow(clippy::too_many_arguments)]
    fn train_prefetchers(
        &mut self,
        core: usize,
        path: Path,
        pos: usize,
        ii: usize,
        addr: u64,
        ip: u64,
        miss: bool,
        prefetched_hit: bool,
    ) {
        let shift = self.inst[ii].cache.line_shift();
        for k in 0..self.inst[ii].prefetchers.len() {
            let pi = self.inst[ii].prefetchers[k];
            let mut cands = std::mem::replace(&mut self.candidates, Candidates::new());
            self.prefetchers[pi].observe(ip, addr, shift, miss, prefetched_hit, &mut cands);
            for j in 0..cands.len {
                let line = cands.lines[j];
                if self.inst[ii].cache.find(line).is_some() {
                    self.hw_pf.redundant += 1;
                    continue;
                }
                self.hw_pf.issued += 1;
                let slot = self.inflight_next[core] % INFLIGHT;
                self.inflight[core][slot] = InFlight {
                    instance: ii as u32,
                    line,
                    tick: self.tick[core],
                };
                self.inflight_next[core] += 1;
                // Fill from this level down, without counting demand traffic;
                // victims wait for the enclosing demand walk.
                self.depth += 1;
                self.walk(
                    core,
                    path,
                    pos,
                    AccessKind::Read,
                    line << shift,
                    1,
                    0,
                    flags::HW_PREFETCHED,
                    false,
                );
                self.depth -= 1;
            }
            self.candidates = cands;
        }
    }

    fn software_prefetch(&mut self, core: usize, addr: u64, ip: u64) -> AccessResult {
        let path = self.dpath[core];
        let l1 = path.get(0);
        let shift = self.inst[l1].cache.line_shift();
        // A prefetch instruction fetches the one line holding `addr`.
        let line = addr >> shift;
        if self.inst[l1].cache.lookup(line).is_some() {
            self.sw_pf.redundant += 1;
            let mut r = AccessResult::new(ServedBy::L1, 1);
            r.prefetch = PrefetchIssue::Redundant;
            r
        } else {
            self.sw_pf.issued += 1;
            // Not a demand access: it counts in no level's accesses, uses
            // no prefetched line and trains no prefetcher.
            let s = self.walk(
                core,
                path,
                0,
                AccessKind::Read,
                line << shift,
                1,
                ip,
                flags::SW_PREFETCHED,
                false,
            );
            let mut r = AccessResult::new(s, 1);
            r.prefetch = PrefetchIssue::Issued;
            r
        }
    }

    /// Non-temporal store (`nt`) or flush: the line leaves every cache.
    fn remove_everywhere(&mut self, core: usize, addr: u64, size: u64, nt: bool) -> AccessResult {
        let d = self.dpath[core];
        let on_path = |i: usize| (0..d.len as usize).any(|p| d.get(p) == i);
        let mut sent = 0u32;
        for t in 0..self.inst.len() {
            let shift = self.inst[t].cache.line_shift();
            for l in (addr >> shift)..=((addr + size - 1) >> shift) {
                if let Some(ev) = self.inst[t].cache.invalidate(l) {
                    let x = &mut self.inst[t];
                    if let Some(sh) = x.shadow.as_mut() {
                        sh.remove(l);
                    }
                    if ev.flags & flags::DIRTY != 0 {
                        x.stats.writebacks += 1;
                    }
                    let owner = x.info.first_core;
                    let other = !(on_path(t) || (x.private && owner == core));
                    if nt && other && self.coherent {
                        x.stats.invalidations_received += 1;
                        if x.private {
                            self.coh.received_by_core[owner] += 1;
                        }
                        sent += 1;
                    } else {
                        x.stats.flushed += 1;
                    }
                    self.prefetched_line_lost(owner, &ev);
                }
            }
        }
        if nt {
            self.nt_stores += 1;
            if sent > 0 {
                self.coh.sent_by_core[core] += 1;
                self.coh.invalidations += u64::from(sent);
                let l1 = d.get(0);
                let line_addr =
                    (addr >> self.inst[l1].cache.line_shift()) << self.inst[l1].cache.line_shift();
                match self.lines.entry(line_addr) {
                    Some(e) => {
                        e.sent += 1;
                        e.received += u64::from(sent);
                    }
                    None => self.coh.untracked += 1,
                }
            }
        } else {
            self.flushes += 1;
        }
        let mut r = AccessResult::new(ServedBy::MEMORY, 1);
        r.invalidations = saturate(sent);
        r
    }
}
