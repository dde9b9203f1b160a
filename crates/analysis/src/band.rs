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
