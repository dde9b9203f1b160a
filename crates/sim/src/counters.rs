//! The attributed counter layout: which counter of a row counts what.
//!
//! Every front end that attributes simulated accesses to something (an
//! instruction of a capture, a call stack, a thread) adds them into a row of
//! `u64` counters laid out by [`CounterLayout`]; a dump stores the rows and
//! the names [`CounterLayout::names`] gives; the views read the names back
//! with [`CounterLayout::from_names`]. This type is the one definition of
//! that protocol: nobody else computes an offset.
//!
//! The row, for a hierarchy of `n` levels:
//!
//! | index | name | counts |
//! |---|---|---|
//! | 0 | `instructions` | instructions executed |
//! | 1 | `unmodelled` | instructions whose data accesses could not be computed |
//! | 2 .. 2+n | `i_L1` .. `i_Ln` | instruction fetches served by level k |
//! | 2+n | `i_mem` | instruction fetches served by memory |
//! | … | `r_L1` .. `r_mem` | data reads (read-modify-writes included, as Cachegrind counts them) |
//! | … | `w_L1` .. `w_mem` | data writes (non-temporal stores included) |
//! | 2+3(n+1) | `prefetch_issued` | software prefetches issued |
//! | +1 | `prefetch_redundant` | of those, prefetches of a line already in L1 |
//! | +2 | `invalidations` | coherence invalidations the accesses sent |
//! | +3 | `false_sharing` | of those, false sharing |
//! | +4 | `l1d_lines_fetched` | lines this row's demand misses brought into the first data level (with line use only) |
//! | +5 | `l1d_bytes_used` | distinct bytes of those lines touched while they stayed there (with line use only) |
//!
//! The last two exist only in a layout [`with line use`](CounterLayout::with_line_use)
//! (`crate::lineuse`); a dump without them reads as before and says it has
//! no utilisation data.
//!
//! An access counts once, at the level that served it ([`AccessResult::served_by`],
//! the farthest level any of its lines came from), whatever the straddle
//! mode; flushes count nowhere.

use crate::{AccessKind, AccessResult, PrefetchIssue, MAX_LEVELS};

/// Which stream an access belongs to in the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// Instruction fetches (`i_*`).
    Instr = 0,
    /// Data reads and read-modify-writes (`r_*`).
    Read = 1,
    /// Data writes and non-temporal stores (`w_*`).
    Write = 2,
}

impl Side {
    /// The three sides in row order.
    pub const ALL: [Side; 3] = [Side::Instr, Side::Read, Side::Write];

    /// The prefix of the side's counter names.
    pub fn prefix(self) -> &'static str {
        match self {
            Side::Instr => "i",
            Side::Read => "r",
            Side::Write => "w",
        }
    }

    /// The side an access of `kind` is counted on, if any (prefetches and
    /// flushes have none).
    #[inline]
    pub const fn of(kind: AccessKind) -> Option<Side> {
        match kind {
            AccessKind::InstrFetch => Some(Side::Instr),
            AccessKind::Read | AccessKind::ReadModifyWrite => Some(Side::Read),
            AccessKind::Write | AccessKind::NonTemporalStore => Some(Side::Write),
            AccessKind::Prefetch | AccessKind::Flush => None,
        }
    }
}

/// Names of the counters after the three sides, in order.
const TAIL: [&str; 4] = [
    "prefetch_issued",
    "prefetch_redundant",
    "invalidations",
    "false_sharing",
];

/// The layout of an attributed counter row for a hierarchy of some number of
/// levels (1 ..= [`MAX_LEVELS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CounterLayout {
    levels: u8,
    line_use: bool,
}

/// Names of the line-use counters, after [`TAIL`].
const LINE_USE: [&str; 2] = ["l1d_lines_fetched", "l1d_bytes_used"];

impl CounterLayout {
    /// Index of `instructions`.
    pub const INSTRUCTIONS: usize = 0;
    /// Index of `unmodelled`.
    pub const UNMODELLED: usize = 1;
    /// Name of counter 0.
    pub const INSTRUCTIONS_NAME: &'static str = "instructions";
    /// Name of counter 1.
    pub const UNMODELLED_NAME: &'static str = "unmodelled";

    /// The layout for `levels` cache levels (clamped to 1 ..= [`MAX_LEVELS`]).
    pub fn new(levels: usize) -> CounterLayout {
        CounterLayout {
            levels: levels.clamp(1, MAX_LEVELS) as u8,
            line_use: false,
        }
    }

    /// The layout for `levels` cache levels with the two line-use counters
    /// at the end.
    pub fn with_line_use(levels: usize) -> CounterLayout {
        CounterLayout {
            line_use: true,
            ..CounterLayout::new(levels)
        }
    }

    /// Whether rows have the line-use counters.
    #[inline]
    pub fn has_line_use(self) -> bool {
        self.line_use
    }

    /// Index of `l1d_lines_fetched`, if the layout has it.
    #[inline]
    pub fn lines_fetched(self) -> Option<usize> {
        self.line_use.then(|| self.false_sharing() + 1)
    }

    /// Index of `l1d_bytes_used`, if the layout has it.
    #[inline]
    pub fn bytes_used(self) -> Option<usize> {
        self.line_use.then(|| self.false_sharing() + 2)
    }

    /// Cache levels of the layout.
    #[inline]
    pub fn levels(self) -> usize {
        usize::from(self.levels)
    }

    /// The most counters a layout has (`MAX_LEVELS` levels, line use).
    pub const MAX_LEN: usize = 2 + 3 * (MAX_LEVELS + 1) + TAIL.len() + LINE_USE.len();

    /// Counters in a row.
    #[inline]
    pub fn len(self) -> usize {
        2 + 3 * (self.levels() + 1) + TAIL.len() + if self.line_use { LINE_USE.len() } else { 0 }
    }

    /// A layout always has counters; provided for symmetry with `len`.
    pub fn is_empty(self) -> bool {
        false
    }

    /// Index of the counter of `side` accesses served at `slot`, a
    /// [`crate::ServedBy::slot`]-style index: `0..levels` for the levels,
    /// anything at or past `levels` for memory.
    #[inline]
    pub fn served(self, side: Side, slot: usize) -> usize {
        2 + side as usize * (self.levels() + 1) + slot.min(self.levels())
    }

    /// Index of the counter of `side` accesses served by memory.
    #[inline]
    pub fn memory(self, side: Side) -> usize {
        self.served(side, self.levels())
    }

    /// Indices of `side` accesses served by `level` (1-based) or farther:
    /// the misses of the levels above `level`. `level` 1 gives every access
    /// of the side.
    pub fn served_from(self, side: Side, level: usize) -> std::ops::Range<usize> {
        let first = level.clamp(1, self.levels() + 1) - 1;
        self.served(side, first)..self.memory(side) + 1
    }

    /// Index of `prefetch_issued`.
    #[inline]
    pub fn prefetch_issued(self) -> usize {
        2 + 3 * (self.levels() + 1)
    }

    /// Index of `prefetch_redundant`.
    #[inline]
    pub fn prefetch_redundant(self) -> usize {
        self.prefetch_issued() + 1
    }

    /// Index of `invalidations`.
    #[inline]
    pub fn invalidations(self) -> usize {
        self.prefetch_issued() + 2
    }

    /// Index of `false_sharing`.
    #[inline]
    pub fn false_sharing(self) -> usize {
        self.prefetch_issued() + 3
    }

    /// The counter names in row order, for level names `level_names`
    /// (`["L1", "L2"]`; one per level of the layout).
    pub fn names(self, level_names: &[String]) -> Vec<String> {
        let mut v = vec![
            Self::INSTRUCTIONS_NAME.to_string(),
            Self::UNMODELLED_NAME.to_string(),
        ];
        for side in Side::ALL {
            for l in level_names.iter().take(self.levels()) {
                v.push(format!("{}_{l}", side.prefix()));
            }
            v.push(format!("{}_mem", side.prefix()));
        }
        v.extend(TAIL.iter().map(|s| s.to_string()));
        if self.line_use {
            v.extend(LINE_USE.iter().map(|s| s.to_string()));
        }
        v
    }

    /// The layout whose [`names`](Self::names) for `level_names` are exactly
    /// `names`, if there is one: a dump written by another tool, or by a
    /// future version with other counters, has none.
    pub fn from_names(names: &[String], level_names: &[String]) -> Option<CounterLayout> {
        if level_names.is_empty() || level_names.len() > MAX_LEVELS {
            return None;
        }
        let l = CounterLayout::new(level_names.len());
        let u = CounterLayout::with_line_use(level_names.len());
        [l, u].into_iter().find(|l| l.names(level_names) == names)
    }

    /// Adds one access of `kind` with result `r` to `row` (at least
    /// [`len`](Self::len) long): one count on its side at the level that
    /// served it; software prefetches count as issued (and redundant when
    /// the line was in L1); invalidations and false sharing add up.
    #[inline(always)]
    pub fn add_access(self, row: &mut [u64], kind: AccessKind, r: &AccessResult) {
        match Side::of(kind) {
            Some(side) => {
                let slot = match r.served_by.level() {
                    Some(l) => usize::from(l) - 1,
                    None => self.levels(),
                };
                row[self.served(side, slot)] += 1;
            }
            None if kind == AccessKind::Prefetch => match r.prefetch {
                PrefetchIssue::Issued => row[self.prefetch_issued()] += 1,
                PrefetchIssue::Redundant => {
                    row[self.prefetch_issued()] += 1;
                    row[self.prefetch_redundant()] += 1;
                }
                PrefetchIssue::NotPrefetch => {}
            },
            None => {}
        }
        if kind != AccessKind::InstrFetch {
            row[self.invalidations()] += u64::from(r.invalidations);
            row[self.false_sharing()] += u64::from(r.false_sharing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|l| format!("L{l}")).collect()
    }

    #[test]
    fn two_levels_by_hand() {
        let l = CounterLayout::new(2);
        let n = l.names(&names(2));
        assert_eq!(
            n,
            [
                "instructions",
                "unmodelled",
                "i_L1",
                "i_L2",
                "i_mem",
                "r_L1",
                "r_L2",
                "r_mem",
                "w_L1",
                "w_L2",
                "w_mem",
                "prefetch_issued",
                "prefetch_redundant",
                "invalidations",
                "false_sharing"
            ]
        );
        assert_eq!(l.len(), 15);
        assert_eq!(l.served(Side::Read, 1), 6);
        assert_eq!(l.memory(Side::Write), 10);
        assert_eq!(l.served_from(Side::Instr, 2), 3..5);
        assert_eq!(l.served_from(Side::Read, 1), 5..8);
        assert_eq!(l.false_sharing(), 14);
        assert_eq!(CounterLayout::from_names(&n, &names(2)), Some(l));
        assert_eq!(CounterLayout::from_names(&n[1..], &names(2)), None);
        assert_eq!(CounterLayout::from_names(&n, &names(3)), None);
        let u = CounterLayout::with_line_use(2);
        let un = u.names(&names(2));
        assert_eq!(un.len(), 17);
        assert_eq!(&un[15..], ["l1d_lines_fetched", "l1d_bytes_used"]);
        assert_eq!((u.lines_fetched(), u.bytes_used()), (Some(15), Some(16)));
        assert_eq!((l.lines_fetched(), l.bytes_used()), (None, None));
        assert_eq!(CounterLayout::from_names(&un, &names(2)), Some(u));
    }
}
