//! CMU Cache Lab's cache (`csim -s S -E E -b B`): one cache of 2^S sets of E
//! ways of 2^B-byte blocks, LRU, on one core, each access counted once.
//!
//! Cache Lab allows any B >= 0, so lines of 1 or 2 bytes; the simulator takes
//! any power-of-two line size (1 included). What cannot be expressed is only
//! what does not fit the simulator's integer types: B > 31 (line sizes are
//! `u32`), S > 32 (at most 2^32 sets), and capacities of 2^64 bytes or more.

use coldcache_sim::{
    CacheKind, HierarchyConfig, Inclusion, LevelConfig, LookupMode, ReplacementPolicy, Sharing,
    StraddleMode, WritePolicy,
};

/// Cache Lab parameters the simulator cannot take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cache lab -s {s} -E {e} -b {b}: {problem}")]
pub struct CacheLabError {
    /// Set-index bits.
    pub s: u32,
    /// Lines per set.
    pub e: u32,
    /// Block-offset bits.
    pub b: u32,
    /// What is wrong.
    pub problem: String,
}

/// Checks Cache Lab parameters: E >= 1, B <= 31, S <= 32, S + B <= 63 and a
/// capacity 2^S x E x 2^B below 2^64 bytes. Returns the capacity in bytes.
pub fn cachelab_params(s: u32, e: u32, b: u32) -> Result<u64, CacheLabError> {
    let fail = |problem: String| CacheLabError { s, e, b, problem };
    if e == 0 {
        return Err(fail("E must be at least 1 line per set".into()));
    }
    if s.saturating_add(b) > 63 {
        return Err(fail(format!(
            "s + b = {} is more than 63",
            u64::from(s) + u64::from(b)
        )));
    }
    if b > 31 {
        return Err(fail(format!(
            "blocks of 2^{b} bytes are larger than the 2^31 supported"
        )));
    }
    if s > 32 {
        return Err(fail(format!("2^{s} sets are more than the 2^32 supported")));
    }
    (1u64 << (s + b))
        .checked_mul(u64::from(e))
        .ok_or_else(|| fail("the capacity 2^(s+b) x E does not fit in 64 bits".into()))
}

/// Cache Lab's cache: one level (named "L1", kind unified, so instruction
/// fetches go through it too; Cache Lab's traces leave them out) of 2^s sets,
/// e ways and 2^b-byte blocks; LRU; write-back; one core; no coherence; an
/// access counts once even if it straddles blocks; named
/// `cachelab-s{s}-E{e}-b{b}`.
pub fn cachelab(s: u32, e: u32, b: u32) -> Result<HierarchyConfig, CacheLabError> {
    let size = cachelab_params(s, e, b)?;
    let cfg = HierarchyConfig {
        name: format!("cachelab-s{s}-E{e}-b{b}"),
        cores: 1,
        levels: vec![LevelConfig {
            name: "L1".into(),
            level: 1,
            kind: CacheKind::Unified,
            size,
            line_size: 1 << b,
            assoc: e,
            policy: ReplacementPolicy::Lru,
            write: WritePolicy::WriteBack,
            inclusion: Inclusion::NonInclusive,
            sharing: Sharing::Core,
            latency: None,
        }],
        straddle: StraddleMode::Whole,
        lookup: LookupMode::OnMiss,
        coherence: false,
        prefetchers: Vec::new(),
        classify_misses: false,
        ..HierarchyConfig::default()
    };
    cfg.validate().map_err(|err| CacheLabError {
        s,
        e,
        b,
        problem: err.to_string(),
    })?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cachelab_geometry() {
        let c = cachelab(4, 1, 4).unwrap();
        assert_eq!(c.name, "cachelab-s4-E1-b4");
        assert_eq!(c.levels.len(), 1);
        let l = &c.levels[0];
        assert_eq!((l.sets(), l.assoc, l.line_size, l.size), (16, 1, 16, 256));
        assert_eq!(c.straddle, StraddleMode::Whole);
        assert!(!c.coherence);
        assert_eq!(c.cores, 1);
        // The handout's other examples.
        assert_eq!(cachelab(2, 4, 3).unwrap().levels[0].size, 4 * 4 * 8);
        assert_eq!(cachelab(5, 1, 5).unwrap().levels[0].size, 1024);
        // s = 0 (fully associative) and b = 0 (1-byte blocks) are legal.
        let l = &cachelab(0, 4, 0).unwrap().levels[0];
        assert_eq!((l.sets(), l.assoc, l.line_size), (1, 4, 1));
        assert_eq!(cachelab(1, 1, 1).unwrap().levels[0].line_size, 2);
    }

    #[test]
    fn cachelab_limits() {
        assert!(cachelab_params(32, 1, 31).is_ok());
        let e = |s, e, b| cachelab(s, e, b).unwrap_err().to_string();
        assert_eq!(
            e(4, 0, 4),
            "cache lab -s 4 -E 0 -b 4: E must be at least 1 line per set"
        );
        assert!(
            e(40, 1, 30).contains("s + b = 70 is more than 63"),
            "{}",
            e(40, 1, 30)
        );
        assert!(e(u32::MAX, 1, u32::MAX).contains("is more than 63"));
        assert!(e(0, 1, 32).contains("2^32 bytes are larger"));
        assert!(e(33, 1, 0).contains("2^33 sets"));
        assert!(e(32, 4, 31).contains("does not fit in 64 bits"));
    }
}
