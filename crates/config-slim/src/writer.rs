//! Writing a [`HierarchyConfig`] as a TOML file in the schema that
//! `coldcache_config::from_toml_str` reads (docs/cache-config.md): string
//! formatting only, no TOML library. The spellings written here are the
//! canonical ones of that schema; `coldcache-config`'s round-trip tests
//! read every preset and random configurations back.

use std::fmt::Write as _;

use coldcache_sim::{
    CacheKind, HierarchyConfig, Inclusion, LookupMode, PrefetcherKind, ReplacementPolicy, Sharing,
    StraddleMode, WritePolicy,
};

use crate::size::format_size;

fn straddle(s: StraddleMode) -> &'static str {
    match s {
        StraddleMode::PerLine => "per-line",
        StraddleMode::Whole => "whole",
    }
}

fn lookup(l: LookupMode) -> &'static str {
    match l {
        LookupMode::OnMiss => "on-miss",
        LookupMode::AllLevels => "all-levels",
    }
}

fn kind(k: CacheKind) -> &'static str {
    match k {
        CacheKind::Instruction => "instruction",
        CacheKind::Data => "data",
        CacheKind::Unified => "unified",
    }
}

fn write_policy(w: WritePolicy) -> &'static str {
    match w {
        WritePolicy::WriteBack => "write-back",
        WritePolicy::WriteThrough => "write-through",
    }
}

fn inclusion(i: Inclusion) -> &'static str {
    match i {
        Inclusion::Inclusive => "inclusive",
        Inclusion::NonInclusive => "non-inclusive",
        Inclusion::Exclusive => "exclusive",
    }
}

/// A TOML basic string, quoted and escaped.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Writes `cfg` as a cache-configuration file. Every key is written out
/// (defaults included) except `coherence_table` when it has its default and
/// `latency` when unknown, so the file documents itself; reading it back
/// with `coldcache_config::from_toml_str` gives a configuration equal to `cfg`.
pub fn to_toml(cfg: &HierarchyConfig) -> String {
    let mut s = String::new();
    let defaults = HierarchyConfig::default();
    // Writing to a String cannot fail.
    let _ = writeln!(
        s,
        "# coldcache cache configuration (schema: docs/cache-config.md)"
    );
    let _ = writeln!(s, "name = {}", quote(&cfg.name));
    let _ = writeln!(s, "cores = {}", cfg.cores);
    let _ = writeln!(s, "straddle = {}", quote(straddle(cfg.straddle)));
    let _ = writeln!(s, "lookup = {}", quote(lookup(cfg.lookup)));
    let _ = writeln!(s, "coherence = {}", cfg.coherence);
    let _ = writeln!(s, "classify_misses = {}", cfg.classify_misses);
    let _ = writeln!(s, "prefetch_lag = {}", cfg.prefetch_lag);
    if cfg.coherence_table != defaults.coherence_table {
        let _ = writeln!(s, "coherence_table = {}", cfg.coherence_table);
    }
    for l in &cfg.levels {
        let _ = writeln!(s, "\n[[level]]");
        let _ = writeln!(s, "name = {}", quote(&l.name));
        let _ = writeln!(s, "level = {}", l.level);
        let _ = writeln!(s, "kind = {}", quote(kind(l.kind)));
        let _ = writeln!(s, "size = {}", quote(&format_size(l.size)));
        let _ = writeln!(s, "line = {}", l.line_size);
        let _ = writeln!(s, "assoc = {}", l.assoc);
        let (policy, param) = match l.policy {
            ReplacementPolicy::Lru => ("lru", None),
            ReplacementPolicy::TreePlru => ("tree-plru", None),
            ReplacementPolicy::Fifo => ("fifo", None),
            ReplacementPolicy::Random { seed } => ("random", Some(format!("seed = {seed}"))),
            ReplacementPolicy::Srrip { bits } => ("srrip", Some(format!("rrpv_bits = {bits}"))),
        };
        let _ = writeln!(s, "policy = {}", quote(policy));
        if let Some(param) = param {
            let _ = writeln!(s, "{param}");
        }
        let _ = writeln!(s, "write = {}", quote(write_policy(l.write)));
        let _ = writeln!(s, "inclusion = {}", quote(inclusion(l.inclusion)));
        match l.sharing {
            Sharing::Core => {
                let _ = writeln!(s, "shared_by = \"core\"");
            }
            Sharing::All => {
                let _ = writeln!(s, "shared_by = \"all\"");
            }
            Sharing::Group { cores } => {
                let _ = writeln!(s, "shared_by = {cores}");
            }
        }
        if let Some(lat) = l.latency {
            let _ = writeln!(s, "latency = {lat}");
        }
    }
    for p in &cfg.prefetchers {
        let _ = writeln!(s, "\n[[prefetcher]]");
        let kind = match p.kind {
            PrefetcherKind::NextLine { .. } => "next-line",
            PrefetcherKind::IpStride { .. } => "ip-stride",
            PrefetcherKind::Stream { .. } => "stream",
        };
        let _ = writeln!(s, "kind = {}", quote(kind));
        let _ = writeln!(s, "level = {}", p.level);
        match p.kind {
            PrefetcherKind::NextLine { degree } => {
                let _ = writeln!(s, "degree = {degree}");
            }
            PrefetcherKind::IpStride {
                entries,
                degree,
                distance,
            } => {
                let _ = writeln!(
                    s,
                    "entries = {entries}\ndegree = {degree}\ndistance = {distance}"
                );
            }
            PrefetcherKind::Stream {
                streams,
                degree,
                distance,
            } => {
                let _ = writeln!(
                    s,
                    "streams = {streams}\ndegree = {degree}\ndistance = {distance}"
                );
            }
        }
        let _ = writeln!(s, "cross_page = {}", p.cross_page);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
