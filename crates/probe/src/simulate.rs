//! Runs the probe's access patterns through the simulator
//! (`coldcache_sim::Hierarchy`) to predict, for a given configuration,
//! which fraction of accesses miss each level: next to the measured
//! latencies this shows whether the configuration models the machine.
//! Pure: the same patterns as the timed run (same seed), no timing.

use serde::Serialize;

use coldcache_sim::{Access, AccessKind, CacheKind, Hierarchy, HierarchyConfig, MAX_LEVELS};

use crate::patterns;
use crate::ProbeError;

/// Where the simulated buffer starts (2 MiB aligned, like the real one).
const BASE: u64 = 1 << 40;

/// What to simulate: the sweep's sizes and the associativity test's lines.
#[derive(Clone, Debug)]
pub struct SimPlan {
    /// Working sets of the sweep to replay, bytes.
    pub sizes: Vec<u64>,
    /// Distance between the sweep's nodes, bytes: the measured line size (64
    /// when none was detected).
    pub line: usize,
    /// Seed of the random permutations, as in the timed run.
    pub seed: u64,
    /// Distance between the associativity test's lines, bytes.
    pub assoc_stride: u64,
    /// Numbers of lines of the associativity test to replay.
    pub assoc_lines: Vec<u32>,
}

/// The predicted miss rates at one working set of the sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SimPoint {
    /// Working set, bytes.
    pub size: u64,
    /// Per level (index 0 = L1): the fraction of accesses that missed that
    /// level (and every level above it).
    pub miss_rate: Vec<f64>,
}

/// The simulator's predictions for the probe's patterns.
#[derive(Clone, Debug, Serialize)]
pub struct Simulation {
    /// The configuration's name (preset or file).
    pub config: String,
    /// The data-side level names, L1 first.
    pub levels: Vec<String>,
    /// Miss rates per working set, in the order of [`SimPlan::sizes`].
    pub sweep: Vec<SimPoint>,
    /// Working sets where the predicted miss rate of each level first
    /// exceeds one half (the simulated capacity), per level.
    pub capacity: Vec<Option<u64>>,
    /// L1 miss rate for the associativity test's lines.
    pub assoc_l1_miss_rate: Vec<f64>,
    /// Most lines that still hit L1 (miss rate below one half).
    pub assoc: Option<u32>,
}

/// Replays `offsets` cyclically: `warm` accesses, then `steps` counted
/// accesses continuing from there (as the timed chase does). Returns the
/// fraction of counted accesses served beyond each level.
fn replay(
    h: &mut Hierarchy,
    offsets: &[usize],
    warm: usize,
    steps: usize,
    levels: usize,
) -> Vec<f64> {
    let read = |h: &mut Hierarchy, o: usize| {
        h.access(0, Access::new(AccessKind::Read, BASE + o as u64, 8))
    };
    for k in 0..warm {
        read(h, offsets[k % offsets.len()]);
    }
    let mut served = [0u64; MAX_LEVELS + 1];
    for k in warm..warm + steps {
        let r = read(h, offsets[k % offsets.len()]);
        served[r.served_by.slot()] += 1;
    }
    (0..levels)
        .map(|l| {
            // Missed levels 1..=l+1: served by slot > l.
            let beyond: u64 = served[l + 1..].iter().sum();
            beyond as f64 / steps.max(1) as f64
        })
        .collect()
}

/// Simulates the plan on `cfg` (validated by the caller or here).
pub fn simulate(cfg: &HierarchyConfig, plan: &SimPlan) -> Result<Simulation, ProbeError> {
    let fresh = || {
        Hierarchy::new(cfg).map_err(|e| ProbeError::Config {
            name: cfg.name.clone(),
            problem: e.to_string(),
        })
    };
    let mut names: Vec<(u8, String)> = cfg
        .levels
        .iter()
        .filter(|l| l.kind != CacheKind::Instruction)
        .map(|l| (l.level, l.name.clone()))
        .collect();
    names.sort();
    names.dedup_by_key(|(l, _)| *l);
    let levels = names.len();

    // A working set beyond 1.25 times all the data caches together misses
    // every level once warm, whatever the policy lets stay: it is replayed
    // cold (its first accesses all miss) instead of warmed for a whole
    // pass, which the simulator takes about a microsecond per miss to do
    // on a 32 MiB cache.
    let total: u64 = cfg
        .levels
        .iter()
        .filter(|l| l.kind != CacheKind::Instruction)
        .map(|l| l.size)
        .sum();
    let mut sweep = Vec::new();
    for &size in &plan.sizes {
        let offsets = patterns::working_set(size as usize, plan.line, plan.seed);
        let warm = if size * 4 > total * 5 {
            0
        } else {
            offsets.len()
        };
        let steps = offsets.len().clamp(10_000, 20_000);
        let mut h = fresh()?;
        sweep.push(SimPoint {
            size,
            miss_rate: replay(&mut h, &offsets, warm, steps, levels),
        });
    }
    let capacity = (0..levels)
        .map(|l| {
            let first_over = sweep.iter().position(|p| p.miss_rate[l] > 0.5)?;
            first_over.checked_sub(1).map(|i| sweep[i].size)
        })
        .collect();

    let mut assoc_l1_miss_rate = Vec::new();
    for &k in &plan.assoc_lines {
        let offsets = patterns::same_set(k as usize, plan.assoc_stride as usize, plan.seed);
        let mut h = fresh()?;
        let r = replay(&mut h, &offsets, offsets.len(), 1000, levels.max(1));
        assoc_l1_miss_rate.push(r.first().copied().unwrap_or(0.0));
    }
    let assoc = plan
        .assoc_lines
        .iter()
        .zip(&assoc_l1_miss_rate)
        .take_while(|(_, &m)| m < 0.5)
        .last()
        .map(|(&k, _)| k);

    Ok(Simulation {
        config: cfg.name.clone(),
        levels: names.into_iter().map(|(_, n)| n).collect(),
        sweep,
        capacity,
        assoc_l1_miss_rate,
        assoc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent truth: an LRU cache of C bytes under a cyclic pattern of
    /// W > C bytes misses on every access, and never when W <= C; so the
    /// simulated capacities are the configured sizes exactly, and the
    /// associativity is the configured ways.
    #[test]
    fn simulated_capacities_are_the_configured_ones() {
        let cfg = coldcache_config::resolve("zen4").unwrap();
        let sizes: Vec<u64> = (12..22)
            .flat_map(|k| [4u64, 5, 6, 7].map(|m| (1u64 << k) * m / 4))
            .collect();
        let plan = SimPlan {
            sizes,
            line: 64,
            seed: 1,
            assoc_stride: 32 << 10,
            assoc_lines: (1..=12).collect(),
        };
        let sim = simulate(&cfg, &plan).unwrap();
        let l1 = cfg
            .levels
            .iter()
            .find(|l| l.level == 1 && l.kind == CacheKind::Data)
            .unwrap();
        let l2 = cfg.levels.iter().find(|l| l.level == 2).unwrap();
        assert_eq!(sim.capacity[0], Some(l1.size));
        assert_eq!(sim.capacity[1], Some(l2.size));
        assert_eq!(sim.assoc, Some(l1.assoc));
    }

    /// A quick run may measure a line shorter than the configuration's:
    /// the patterns then visit each line more than once per cycle, and a
    /// revisit can hit. The apparent capacity still lies between the
    /// configured size (everything that fits hits) and four times it (at
    /// most a quarter of the lines can be held, so most visits miss).
    #[test]
    fn a_short_measured_line_bounds_the_apparent_capacity() {
        let cfg = coldcache_config::resolve(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/caches/small-2level.toml"
        ))
        .unwrap();
        let sizes: Vec<u64> = (12..18)
            .flat_map(|k| [4u64, 5, 6, 7].map(|m| (1u64 << k) * m / 4))
            .collect();
        for line in [8usize, 16, 32] {
            let plan = SimPlan {
                sizes: sizes.clone(),
                line,
                seed: 7,
                assoc_stride: 1 << 10,
                assoc_lines: vec![1, 2],
            };
            let sim = simulate(&cfg, &plan).unwrap();
            let cap = sim.capacity[0].unwrap();
            assert!((4096..16384).contains(&cap), "line {line}: {cap}");
        }
    }
}
