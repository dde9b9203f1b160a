//! The layout-noise band of a dump (issue 37, `docs/noise-band.md`): per
//! column, the measured total and the min, median and max over the
//! measured placement and the moved ones `coldcache sim --placements`
//! simulated ([`coldcache_dump::Band`], in the dump's meta); and, for
//! `diff`, whether a change of a total lies within layout noise.
//!
//! A column's value under a placement is the column computed from that
//! placement's counter totals, as every view computes it from a row
//! ([`crate::columns`]); ratio columns (`badness`) have no band.
//!
//! **Within layout noise** (`diff`): each side's range is its band's
//! [min, max] (the measured value included), or the measured value alone
//! for a dump without a band; a change is within layout noise when the
//! two ranges overlap. Equivalently, the after value lies in the before
//! band widened by the after band's spread on each side of its own value
//! ([before min − (after max − after), before max + (after − after min)]);
//! with one band only, the other value must lie inside it.

use crate::profile::Profile;
use coldcache_dump::band::min_median_max;
use serde::Serialize;

/// One column's band.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ColumnBand {
    /// The column.
    pub name: String,
    /// Its total in the measured placement (the dump's records).
    pub measured: u64,
    /// Over every placement, the measured one included.
    pub min: u64,
    /// The median (of an even count: the mean of the middle two, rounded
    /// down).
    pub median: u64,
    /// The max.
    pub max: u64,
}

/// A dump's band.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BandView {
    /// Moved placements (the measured one not counted).
    pub moved: usize,
    /// Their seed.
    pub seed: u64,
    /// The bound of each padding, in bytes.
    pub max_offset: u64,
    /// What moved, in words.
    pub regions: String,
    /// False when the view's totals are not the band's measured ones (a
    /// profile of some threads: the band is the whole dump's).
    pub whole_view: bool,
    /// Per column (ratio columns left out), in the profile's column order.
    pub columns: Vec<ColumnBand>,
}

/// The values of column `c` of `p` per placement, measured first.
fn per_placement(p: &Profile, c: usize) -> Option<Vec<u64>> {
    let band = p.dump().meta.band.as_ref()?;
    let col = &p.columns()[c];
    if col.is_ratio() {
        return None;
    }
    Some(band.totals.iter().map(|t| col.int_value(t)).collect())
}

/// The band of `p`'s dump, `None` without one.
pub fn band(p: &Profile) -> Option<BandView> {
    let band = p.dump().meta.band.as_ref()?;
    let columns = (0..p.columns().len())
        .filter_map(|c| {
            let values = per_placement(p, c)?;
            let (min, median, max) = min_median_max(&values)?;
            Some(ColumnBand {
                name: p.columns()[c].name.clone(),
                measured: values[0],
                min,
                median,
                max,
            })
        })
        .collect();
    Some(BandView {
        moved: band.moved(),
        seed: band.seed,
        max_offset: band.max_offset,
        regions: band.regions.clone(),
        whole_view: band.totals.first().map(Vec::as_slice) == Some(p.totals()),
        columns,
    })
}

/// The range of column `name` of `p`: its band's [min, max], or its total
/// alone without a band; `None` for a ratio or unknown column.
fn range(p: &Profile, name: &str) -> Option<(u64, u64, bool)> {
    let c = p.columns().iter().position(|c| c.name == name)?;
    if p.columns()[c].is_ratio() {
        return None;
    }
    match per_placement(p, c) {
        Some(v) => {
            let (min, _, max) = min_median_max(&v)?;
            Some((min, max, true))
        }
        None => {
            let v = p.columns()[c].int_value(p.totals());
            Some((v, v, false))
        }
    }
}

/// Whether a column's change lies within layout noise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Noise {
    /// The column.
    pub column: String,
    /// The before dump's range: its band's [min, max], or its total.
    pub before: [u64; 2],
    /// The after dump's range.
    pub after: [u64; 2],
    /// The ranges overlap: the change is within layout noise.
    pub within: bool,
}

/// Per column of `columns` both profiles have (ratios left out), whether
/// the change is within layout noise; `None` when neither dump has a band.
pub fn noise(before: &Profile, after: &Profile, columns: &[String]) -> Option<Vec<Noise>> {
    if before.dump().meta.band.is_none() && after.dump().meta.band.is_none() {
        return None;
    }
    Some(
        columns
            .iter()
            .filter_map(|name| {
                let (bmin, bmax, _) = range(before, name)?;
                let (amin, amax, _) = range(after, name)?;
                Some(Noise {
                    column: name.clone(),
                    before: [bmin, bmax],
                    after: [amin, amax],
                    within: bmin <= amax && amin <= bmax,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ProfileOptions;
    use coldcache_dump::{Band, Dump, Meta, Record, StackNode, Thread};

    /// A dump of one record with counters `x` and `y` (raw columns only),
    /// and a band of these totals when given.
    fn profile(values: [u64; 2], band: Option<Vec<Vec<u64>>>) -> Profile {
        let dump = Dump {
            meta: Meta {
                counters: vec!["x".into(), "y".into()],
                band: band.map(|totals| Band {
                    seed: 1,
                    max_offset: 4096,
                    regions: "2 regions".into(),
                    totals,
                }),
                ..Meta::default()
            },
            threads: vec![Thread::default()],
            stacks: vec![StackNode::default()],
            records: vec![Record {
                ip: 0x1000,
                stack: 0,
                thread: 0,
                counters: values.to_vec(),
            }],
            ..Dump::default()
        };
        Profile::new(dump, ProfileOptions::default())
    }

    #[test]
    fn a_columns_band_by_hand() {
        let p = profile(
            [10, 5],
            Some(vec![vec![10, 5], vec![12, 5], vec![9, 7], vec![11, 4]]),
        );
        let b = band(&p).unwrap();
        assert_eq!(b.moved, 3);
        assert!(b.whole_view);
        let c = |name: &str| b.columns.iter().find(|c| c.name == name).unwrap().clone();
        // x: 10 12 9 11 → 9, (10 + 11) / 2, 12.
        assert_eq!(
            c("x"),
            ColumnBand {
                name: "x".into(),
                measured: 10,
                min: 9,
                median: 10,
                max: 12
            }
        );
        // y: 5 5 7 4 → 4, 5, 7.
        assert_eq!((c("y").min, c("y").median, c("y").max), (4, 5, 7));
        assert!(band(&profile([10, 5], None)).is_none());
    }

    #[test]
    fn within_layout_noise_when_the_ranges_overlap() {
        let names = ["x".to_string(), "y".to_string()];
        let before = profile(
            [10, 5],
            Some(vec![vec![10, 5], vec![12, 5], vec![9, 7], vec![11, 4]]),
        );
        // Neither has a band: no verdict.
        assert!(noise(&profile([1, 1], None), &profile([2, 2], None), &names).is_none());
        // After without a band: its value against the before band.
        let after = profile([13, 6], None);
        let n = noise(&before, &after, &names).unwrap();
        assert_eq!(
            n,
            [
                Noise {
                    column: "x".into(),
                    before: [9, 12],
                    after: [13, 13],
                    within: false
                },
                Noise {
                    column: "y".into(),
                    before: [4, 7],
                    after: [6, 6],
                    within: true
                },
            ]
        );
        // Both with bands: 9..12 and 12..15 touch (within), 4..7 and 8..9
        // do not.
        let after = profile([13, 8], Some(vec![vec![13, 8], vec![12, 9], vec![15, 8]]));
        let n = noise(&before, &after, &names).unwrap();
        assert_eq!(
            n.iter().map(|n| n.within).collect::<Vec<_>>(),
            [true, false]
        );
        // Symmetric: before without a band, after with one.
        let n = noise(&profile([8, 8], None), &before, &names).unwrap();
        assert_eq!(
            n.iter().map(|n| n.within).collect::<Vec<_>>(),
            [false, false]
        );
        let n = noise(&profile([11, 4], None), &before, &names).unwrap();
        assert_eq!(n.iter().map(|n| n.within).collect::<Vec<_>>(), [true, true]);
    }
}
