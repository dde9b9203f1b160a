//! The `--cache` option as `sim`, `record` and `attach` all take it: the
//! default, a preset or file with Cachegrind's `--I1`/`--D1`/`--LL`
//! overrides, and the refusal of miss classes where a dump is made. Below
//! the verbs that use it (they import it, it imports none of them).

use anyhow::{bail, Result};
use coldcache_sim::HierarchyConfig;

/// The cache `sim` and `record` simulate when `--cache` is not given:
/// Valgrind's model, so that their numbers compare with Cachegrind's and
/// Callgrind's as they stand.
pub const DEFAULT_CACHE: &str = "cachegrind";

/// `--cache` with Cachegrind's `--I1`, `--D1` and `--LL` geometry
/// overrides, as `sim`, `record` and `attach` all take them.
pub fn cache_config(
    cache: &str,
    i1: &Option<String>,
    d1: &Option<String>,
    ll: &Option<String>,
) -> Result<HierarchyConfig> {
    let mut cfg = coldcache_config::resolve(cache)?;
    let geo = |opt: &str, v: &Option<String>| {
        v.as_deref()
            .map(|t| coldcache_config::parse_valgrind_option(opt, t))
            .transpose()
    };
    let (i1, d1, ll) = (geo("--I1", i1)?, geo("--D1", d1)?, geo("--LL", ll)?);
    if i1.is_some() || d1.is_some() || ll.is_some() {
        coldcache_config::apply_cachegrind_overrides(&mut cfg, i1, d1, ll)?;
    }
    Ok(cfg)
}

/// Where a capture's miss classes can be had ([`refuse_miss_classes`]'s
/// advice for `record` and `attach`).
pub const MISS_CLASSES_OF_A_CAPTURE: &str =
    "keep the trace (--trace) and run `coldcache sim --classify-misses` on it";

/// Refuses a configuration that classifies misses where a dump is made
/// (`sim -o`, `record`, `attach`): a dump has no counters for miss
/// classes, so the shadow caches would cost their time for nothing shown.
/// `instead` says where the classes can be had.
pub fn refuse_miss_classes(cfg: &HierarchyConfig, cache: &str, instead: &str) -> Result<()> {
    if cfg.classify_misses {
        bail!(
            "--cache {cache}: miss classification (--classify-misses, or classify_misses in \
             the configuration) is not kept in a dump; {instead}"
        );
    }
    Ok(())
}
