//! The layout-noise band (issue 37): the counter totals of one capture
//! re-simulated under other placements of its code and data, kept in the
//! dump's `META` JSON as the optional field [`crate::Meta::band`].
//!
//! An unrelated edit moves code or data by a few cache lines and changes
//! first-level misses by several percent. `coldcache sim TRACE
//! --placements K -o DUMP` simulates the measured placement and K moved
//! ones (every region of the address space shifted by random
//! cache-line-aligned offsets, `coldcache_replay::placement`) and keeps
//! each placement's totals here; the views derive every column's band
//! (min, median, max) from them. An older coldcache reads the dump and
//! ignores the field (`Meta` does not deny unknown fields).

use serde::{Deserialize, Serialize};

/// Counter totals per placement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Band {
    /// The seed the moved placements were drawn from.
    pub seed: u64,
    /// Each padding inserted at a region boundary is a multiple of the
    /// line size below this many bytes.
    pub max_offset: u64,
    /// The regions moved, in words (`12 regions: 5 modules' code, ...`).
    pub regions: String,
    /// Per placement, the dump's counter totals in `Meta::counters`
    /// order: first the measured placement (the dump's own records), then
    /// the moved ones.
    pub totals: Vec<Vec<u64>>,
}

impl Band {
    /// Moved placements (the measured one not counted).
    pub fn moved(&self) -> usize {
        self.totals.len().saturating_sub(1)
    }
}

/// Min, median and max of `values` (`None` when empty). The median of an
/// even count is the mean of the two middle values, rounded down.
pub fn min_median_max(values: &[u64]) -> Option<(u64, u64, u64)> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let n = v.len();
    let (&min, &max) = (v.first()?, v.last()?);
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        let (a, b) = (v[n / 2 - 1], v[n / 2]);
        a / 2 + b / 2 + (a % 2 + b % 2) / 2
    };
    Some((min, median, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_median_max_by_hand() {
        assert_eq!(min_median_max(&[]), None);
        assert_eq!(min_median_max(&[7]), Some((7, 7, 7)));
        // Odd count: the middle of 3 5 9 12 40.
        assert_eq!(min_median_max(&[12, 3, 40, 5, 9]), Some((3, 9, 40)));
        // Even count: (5 + 8) / 2 rounded down.
        assert_eq!(min_median_max(&[8, 1, 20, 5]), Some((1, 6, 20)));
        // No overflow near the top.
        assert_eq!(
            min_median_max(&[u64::MAX, u64::MAX - 2]),
            Some((u64::MAX - 2, u64::MAX - 1, u64::MAX))
        );
    }

    #[test]
    fn an_older_meta_without_the_field_reads_and_a_newer_one_round_trips() {
        let old = r#"{"program":[],"pid":1,"cache_name":"c","cache_toml":"","levels":[],
            "cores":1,"threads":"all","trigger":"api","start_unix_ns":0,"duration_ns":0,
            "cut_short":null,"counters":[],"instructions":0,"unmodelled":[],"untrapped":0,
            "notes":[]}"#;
        let m: crate::Meta = serde_json::from_str(old).unwrap();
        assert_eq!(m.band, None);
        // Without a band the field is not written (older dumps byte for byte).
        assert!(!serde_json::to_string(&m).unwrap().contains("band"));
        let with = crate::Meta {
            band: Some(Band {
                seed: 3,
                max_offset: 16384,
                regions: "2 regions".into(),
                totals: vec![vec![1, 2], vec![1, 3]],
            }),
            ..m
        };
        let text = serde_json::to_string(&with).unwrap();
        assert_eq!(serde_json::from_str::<crate::Meta>(&text).unwrap(), with);
        // A reader that knows no band (a struct without the field, as an
        // older coldcache's Meta) ignores it.
        #[derive(Deserialize)]
        struct Older {
            pid: u32,
        }
        assert_eq!(serde_json::from_str::<Older>(&text).unwrap().pid, 1);
    }
}
