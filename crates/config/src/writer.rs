//! Writing a [`HierarchyConfig`] as a TOML file in the schema that
//! [`crate::from_toml_str`] reads (docs/cache-config.md).

use std::fmt::Write as _;

use coldcache_sim::{HierarchyConfig, PrefetcherKind, ReplacementPolicy, Sharing};

use crate::schema::{Incl, Kind, Lookup, PfKind, Policy, Straddle, Write};
use crate::size::format_size;

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
/// with [`crate::from_toml_str`] gives a configuration equal to `cfg`.
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
    let _ = writeln!(
        s,
        "straddle = {}",
        quote(Straddle::from(cfg.straddle).spelling())
    );
    let _ = writeln!(s, "lookup = {}", quote(Lookup::from(cfg.lookup).spelling()));
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
        let _ = writeln!(s, "kind = {}", quote(Kind::from(l.kind).spelling()));
        let _ = writeln!(s, "size = {}", quote(&format_size(l.size)));
        let _ = writeln!(s, "line = {}", l.line_size);
        let _ = writeln!(s, "assoc = {}", l.assoc);
        let (policy, param) = match l.policy {
            ReplacementPolicy::Lru => (Policy::Lru, None),
            ReplacementPolicy::TreePlru => (Policy::TreePlru, None),
            ReplacementPolicy::Fifo => (Policy::Fifo, None),
            ReplacementPolicy::Random { seed } => (Policy::Random, Some(format!("seed = {seed}"))),
            ReplacementPolicy::Srrip { bits } => {
                (Policy::Srrip, Some(format!("rrpv_bits = {bits}")))
            }
        };
        let _ = writeln!(s, "policy = {}", quote(policy.spelling()));
        if let Some(param) = param {
            let _ = writeln!(s, "{param}");
        }
        let _ = writeln!(s, "write = {}", quote(Write::from(l.write).spelling()));
        let _ = writeln!(
            s,
            "inclusion = {}",
            quote(Incl::from(l.inclusion).spelling())
        );
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
            PrefetcherKind::NextLine { .. } => PfKind::NextLine,
            PrefetcherKind::IpStride { .. } => PfKind::IpStride,
            PrefetcherKind::Stream { .. } => PfKind::Stream,
        };
        let _ = writeln!(s, "kind = {}", quote(kind.spelling()));
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
