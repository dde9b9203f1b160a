//! The one simulator driver: every front end (a capture's accountant,
//! `coldcache sim` over trace files) hands its accesses to a [`Driver`],
//! which maps threads to cores, runs the [`Hierarchy`], tallies every access
//! by kind and serving level, and, when asked, attributes it into a counter
//! row laid out by [`CounterLayout`].
//!
//! Keeping these in one place means one mapping of access kinds to
//! counters, one thread → core rule and one tally layout, whoever feeds the
//! simulator. Like the rest of the crate it does no I/O; once built (and
//! [`CoreMap::reserve`]d for the threads to come) it allocates nothing.
//! With line use ([`Driver::with_line_use`], `crate::lineuse`) it also
//! keeps, per first data level, which row fetched each line and the bytes
//! of it used, and hands the credits out as lines leave.
//!
//! Entries: [`Driver::attribute`] (one access into its row; on the lean
//! engine a first-level hit is told apart by `Hierarchy::access_or_l1_hit`
//! and counted in a few increments), and the batch entries
//! [`Driver::access_batch`] (a run of one core's accesses, tally only) and
//! [`Driver::attribute_batch`] (each access with its row of the caller's
//! `RowTable`). On the lean engine both hand the lean batch loop a sink of
//! their own (`TallySink`, `RowSink`): the hits the loop decides are
//! counted there, into dense cells for rows, and only the rest come back as
//! an `AccessResult`.

use crate::lean::BatchSink;
use crate::lineuse::{LineUse, NO_ROW};
use crate::rows::Dense;
use crate::{
    Access, AccessKind, AccessResult, ConfigError, CoreMap, CounterLayout, Hierarchy,
    HierarchyConfig, RowTable, ServedBy, MAX_LEVELS,
};

/// Accesses counted by kind and by the level that served their lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Accesses per [`AccessKind`] (indexed by `kind as usize`).
    pub accesses: [u64; 7],
    /// Lines per kind and [`crate::ServedBy::slot`]: an access counts once at
    /// the level that served it, or once per line where each line was found
    /// in [`crate::StraddleMode::PerLine`].
    pub served: [[u64; MAX_LEVELS + 1]; 7],
}

impl Tally {
    /// Counts one access of `kind` with result `r`.
    #[inline]
    pub fn add(&mut self, kind: AccessKind, r: &AccessResult) {
        let k = kind as usize;
        self.accesses[k] += 1;
        let row = &mut self.served[k];
        if r.is_single_line() {
            row[r.served_by.slot()] += 1;
        } else {
            for (s, c) in row.iter_mut().zip(r.per_slot()) {
                *s += u64::from(c);
            }
        }
    }

    /// Counts `n` accesses of `kind`, each a single-line first-level hit.
    #[inline(always)]
    pub fn add_l1_hits(&mut self, kind: AccessKind, n: u64) {
        let k = kind as usize;
        self.accesses[k] += n;
        self.served[k][ServedBy::L1.slot()] += n;
    }

    /// Accesses of `kind`.
    pub fn of(&self, kind: AccessKind) -> u64 {
        self.accesses[kind as usize]
    }

    /// Lines of `kind` served at `slot`.
    pub fn served_at(&self, kind: AccessKind, slot: usize) -> u64 {
        self.served[kind as usize][slot]
    }

    /// Lines of `kind` that missed the first level.
    pub fn first_level_misses(&self, kind: AccessKind) -> u64 {
        self.served[kind as usize][1..].iter().sum()
    }

    /// Lines of `kind` served by memory.
    pub fn memory(&self, kind: AccessKind) -> u64 {
        self.served[kind as usize][MAX_LEVELS]
    }
}

/// A hierarchy with its thread → core map, tally and counter layout.
pub struct Driver {
    hier: Hierarchy,
    cores: CoreMap,
    layout: CounterLayout,
    tally: Tally,
    /// The results of the batch under way ([`Driver::BATCH`] at a time).
    results: Vec<AccessResult>,
    /// Per demand kind and [`crate::ServedBy::slot`], the counter of the
    /// layout's row an access counts in (what
    /// [`CounterLayout::add_access`] adds to when there is no coherence
    /// traffic to add).
    cell: [[u8; MAX_LEVELS + 1]; 4],
    /// Line utilisation of the first data level, when asked for
    /// ([`Driver::with_line_use`]).
    line_use: Option<Box<LineUse>>,
    /// The row a fill by [`Driver::attribute`] is credited to.
    fill_row: u32,
}

impl Driver {
    /// Accesses simulated at once by [`Driver::access_batch`] and
    /// [`Driver::attribute_batch`] (longer runs are cut into pieces of this
    /// many).
    pub const BATCH: usize = 256;

    /// A driver over a new hierarchy for `cfg`.
    pub fn new(cfg: &HierarchyConfig) -> Result<Driver, ConfigError> {
        Ok(Driver::with_hierarchy(Hierarchy::new(cfg)?))
    }

    /// A driver over `hier`.
    pub fn with_hierarchy(hier: Hierarchy) -> Driver {
        let cores = CoreMap::new(hier.config().cores.max(1));
        let layout = CounterLayout::new(hier.levels());
        let cell = std::array::from_fn(|k| {
            let side = crate::Side::of(AccessKind::ALL[k]).expect("a demand kind");
            std::array::from_fn(|slot| layout.served(side, slot) as u8)
        });
        Driver {
            cell,
            hier,
            cores,
            layout,
            tally: Tally::default(),
            results: vec![AccessResult::default(); Driver::BATCH],
            line_use: None,
            fill_row: NO_ROW,
        }
    }

    /// This driver measuring line utilisation (`crate::lineuse`): its
    /// layout gains `l1d_lines_fetched` and `l1d_bytes_used`, each line a
    /// demand access brings into the first data level is credited, when
    /// it leaves (or at [`Driver::finish_line_use`]), to the row of the
    /// access that fetched it. The lean engine's batch loop is then not
    /// used (every access goes through [`Hierarchy::access`]).
    pub fn with_line_use(mut self) -> Driver {
        self.layout = CounterLayout::with_line_use(self.hier.levels());
        self.line_use = Some(Box::new(LineUse::new(&self.hier)));
        self
    }

    /// Sets the row the fills of the next [`Driver::attribute`] calls are
    /// credited to (its index in the caller's table; [`u32::MAX`]: none).
    /// Credits are handed out by [`Driver::drain_line_use`].
    #[inline(always)]
    pub fn set_fill_row(&mut self, row: u32) {
        self.fill_row = row;
    }

    /// Hands each credit of the lines that left the first data level since
    /// the last call to `f(row, bytes_used)`: add 1 to the row's
    /// `l1d_lines_fetched` and `bytes_used` to its `l1d_bytes_used`. Call
    /// it after each instruction's accesses (room for 16,384 credits is
    /// kept; more are counted in [`Driver::line_use_lost`]).
    #[inline]
    pub fn drain_line_use(&mut self, f: impl FnMut(u32, u64)) {
        if let Some(lu) = self.line_use.as_deref_mut() {
            lu.drain(f);
        }
    }

    /// The end of the run: every line still in a first data level is
    /// credited, as by [`Driver::drain_line_use`].
    pub fn finish_line_use(&mut self, f: impl FnMut(u32, u64)) {
        if let Some(lu) = self.line_use.as_deref_mut() {
            lu.flush(f);
        }
    }

    /// Credits dropped because the queue was full (0 when drained as
    /// documented).
    pub fn line_use_lost(&self) -> u64 {
        self.line_use.as_ref().map_or(0, |l| l.lost())
    }

    /// The counter layout rows are attributed in.
    #[inline]
    pub fn layout(&self) -> CounterLayout {
        self.layout
    }

    /// The thread → core map (pin threads with [`CoreMap::assign`], reserve
    /// room with [`CoreMap::reserve`] before a run that must not allocate).
    pub fn cores_mut(&mut self) -> &mut CoreMap {
        &mut self.cores
    }

    /// The thread → core map.
    pub fn cores(&self) -> &CoreMap {
        &self.cores
    }

    /// The core of `thread` (a caller-chosen key), assigned round-robin the
    /// first time unless pinned.
    #[inline]
    pub fn core_of(&mut self, thread: u64) -> usize {
        self.cores.core_of(thread)
    }

    /// Simulates `a` on `core` and tallies it.
    #[inline(always)]
    pub fn access(&mut self, core: usize, a: Access) -> AccessResult {
        let r = self.hier.access(core, a);
        self.tally.add(a.kind, &r);
        r
    }

    /// Simulates `a` on `core`, tallies it and attributes it into `row`
    /// (see [`CounterLayout::add_access`]).
    #[inline(always)]
    pub fn attribute(&mut self, core: usize, a: Access, row: &mut [u64]) -> AccessResult {
        // With line use, which lines of a straddling access were held
        // (nothing looked up for others).
        let held = match self.line_use.as_deref() {
            Some(lu) => lu.before(&self.hier, core, &a),
            None => 0,
        };
        // The lean engine's first-level hit is told apart so that the
        // bookkeeping below is inlined with its result known (a few
        // increments instead of computing slots from a result).
        let r = match self.hier.access_or_l1_hit(core, a) {
            None => {
                const L1_HIT: AccessResult = AccessResult::new(ServedBy::L1, 1);
                if let Some(lu) = self.line_use.as_deref_mut() {
                    lu.after(&self.hier, core, &a, &L1_HIT, held, self.fill_row);
                }
                self.tally.add(a.kind, &L1_HIT);
                self.layout.add_access(row, a.kind, &L1_HIT);
                return L1_HIT;
            }
            Some(r) => r,
        };
        if let Some(lu) = self.line_use.as_deref_mut() {
            lu.after(&self.hier, core, &a, &r, held, self.fill_row);
        }
        self.tally.add(a.kind, &r);
        self.layout.add_access(row, a.kind, &r);
        r
    }

    /// Simulates `a` on `core` and tallies it, as [`Driver::attribute`]
    /// does, and gives the result for the caller to count (fills credited
    /// to the row [`Driver::set_fill_row`] set): for a caller whose rows
    /// keep first-level hits apart
    /// ([`AccessResult::is_plain_first_level_hit`]).
    #[inline(always)]
    pub fn simulate(&mut self, core: usize, a: Access) -> AccessResult {
        const L1_HIT: AccessResult = AccessResult::new(ServedBy::L1, 1);
        let held = match self.line_use.as_deref() {
            Some(lu) => lu.before(&self.hier, core, &a),
            None => 0,
        };
        let r = self.hier.access_or_l1_hit(core, a).unwrap_or(L1_HIT);
        if let Some(lu) = self.line_use.as_deref_mut() {
            lu.after(&self.hier, core, &a, &r, held, self.fill_row);
        }
        self.tally.add(a.kind, &r);
        r
    }

    /// [`Driver::simulate`], with `None` where the access was a plain
    /// first-level hit that the lean engine's inlined check found (tallied
    /// as one), so that a caller counts that case without a result to
    /// look at; `Some` otherwise (which may still be a plain first-level
    /// hit, found by the walk or by another engine).
    #[inline(always)]
    pub fn simulate_or_hit(&mut self, core: usize, a: Access) -> Option<AccessResult> {
        if self.line_use.is_some() {
            return Some(self.simulate(core, a));
        }
        let r = self.hier.access_or_l1_hit(core, a);
        match &r {
            None => self.tally.add_l1_hits(a.kind, 1),
            Some(r) => self.tally.add(a.kind, r),
        }
        r
    }

    /// The line shift of `core`'s first-level instruction side in which
    /// [`Driver::fetch`] keeps `*last` (a line number: `addr >> shift`);
    /// `None` where it never keeps one.
    #[inline(always)]
    pub fn fetch_shift(&self, core: usize) -> Option<u32> {
        self.hier.fetch_shift(core)
    }

    /// What `n` calls of [`Driver::fetch`] on `core` do (tallied as `n`
    /// first-level hits) when each fetch lies within the line `*last`
    /// names (not [`crate::NO_LINE`]; `addr >> shift` and the fetch's last
    /// byte `>> shift` both equal it, [`Driver::fetch_shift`]) and only
    /// `core`'s data accesses came since that was set: each is a hit
    /// without a look. For a caller that counts such a run at once.
    #[inline(always)]
    pub fn fetch_hits(&mut self, core: usize, n: u64) {
        self.hier.fetch_hits(core, n);
        self.tally.add_l1_hits(AccessKind::InstrFetch, n);
    }

    /// Simulates the instruction fetch `a` on `core` and tallies it, as
    /// [`Driver::attribute`] would: `None` when the first level served it
    /// (all [`Driver::attribute`] would add to a row is one to its `i_L1`:
    /// a fetch carries no coherence and line use does not watch it), else
    /// the result, for the caller to add with [`CounterLayout::add_access`].
    ///
    /// `last` is what this sets after each fetch: the line it ended in
    /// where the next fetch of that line can be counted a hit without a
    /// look. The caller passes it to the next fetch of `core` when only
    /// `core`'s data accesses (through this driver) came between, and sets
    /// it to [`crate::NO_LINE`] otherwise (another core's accesses, a
    /// prefetch, anything unknown): a translated block's instructions in
    /// order, for one.
    #[inline(always)]
    pub fn fetch(&mut self, core: usize, a: Access, last: &mut u64) -> Option<AccessResult> {
        debug_assert_eq!(a.kind, AccessKind::InstrFetch);
        match self.hier.fetch_or_l1_hit(core, a, last) {
            None => {
                self.tally.add_l1_hits(a.kind, 1);
                None
            }
            Some(r) => {
                self.tally.add(a.kind, &r);
                (r.served_by != ServedBy::L1).then_some(r)
            }
        }
    }

    /// Simulates `accesses` in order on `core` and tallies them: what
    /// [`Driver::access`] on each would do, through
    /// [`Hierarchy::access_batch`] (on the lean engine, first-level hits
    /// are decided in the batch loop). Allocates nothing.
    ///
    /// # Panics
    /// If `core` is out of range.
    pub fn access_batch(&mut self, core: usize, accesses: &[Access]) {
        // On the lean engine, straight into the tally (no results).
        let done = self
            .hier
            .lean_batch(core, accesses, &mut TallySink(&mut self.tally))
            .unwrap_or(0);
        for chunk in accesses[done..].chunks(Driver::BATCH) {
            let results = &mut self.results[..chunk.len()];
            self.hier.access_batch(core, chunk, results);
            for (a, r) in chunk.iter().zip(results.iter()) {
                self.tally.add(a.kind, r);
            }
        }
    }

    /// Simulates `accesses` in order on `core`, tallies them and attributes
    /// `accesses[i]` into row `rows[i]` of `table`: what
    /// [`Driver::attribute`] on each would do, through
    /// [`Hierarchy::access_batch`]. This is the entry for a caller holding a
    /// buffer of accesses with the counter row of each (a capture's
    /// consumer, a replay of a stream). Allocates nothing.
    ///
    /// A first-level hit with no coherence traffic, the common case, is one
    /// count in the row's dense cell of its side (see [`RowTable`]); on the
    /// lean engine the batch loop itself adds the hits it decides there
    /// (one index, no lookup) and counts them by kind for the tally, and
    /// the hits it leaves to the walk arrive with a result and go there
    /// too. Misses, coherence traffic and prefetches go into the wide
    /// rows. The table may grow between calls (rows added later): nothing
    /// is kept from one call to the next.
    ///
    /// # Panics
    /// If `core` is out of range, `rows` is shorter than `accesses`,
    /// `table` is of another layout, or a row lies outside `table`;
    /// accesses before the offending one are simulated and counted.
    pub fn attribute_batch(
        &mut self,
        core: usize,
        accesses: &[Access],
        rows: &[u32],
        table: &mut RowTable,
    ) {
        assert!(
            rows.len() >= accesses.len(),
            "{} rows for {} accesses",
            rows.len(),
            accesses.len()
        );
        assert_eq!(table.layout(), self.layout, "a table of another layout");
        // Both paths run up to the first row outside the table, then panic.
        let whole = table.rows();
        let rows_here = &rows[..accesses.len()];
        // Nearly always all of them: a loop without an early exit (which
        // the compiler vectorises) says so at a fraction of the search's
        // cost per access.
        let any_outside = u32::try_from(whole)
            .is_ok_and(|w| rows_here.iter().fold(false, |out, &r| out | (r >= w)));
        let valid = if !any_outside {
            accesses.len()
        } else {
            rows_here
                .iter()
                .position(|&r| r as usize >= whole)
                .unwrap_or(accesses.len())
        };
        let mut cells = table.cells();
        if self.line_use.is_some() {
            self.attribute_line_use(core, &accesses[..valid], &rows[..valid], &mut cells);
            if valid < accesses.len() {
                row_outside(rows[valid], valid, whole);
            }
            return;
        }
        let done = self.attribute_lean(core, &accesses[..valid], &rows[..valid], &mut cells);
        let (rest, rest_rows) = (&accesses[done..valid], &rows[done..valid]);
        for (chunk, rows) in rest
            .chunks(Driver::BATCH)
            .zip(rest_rows.chunks(Driver::BATCH))
        {
            let results = &mut self.results[..chunk.len()];
            self.hier.access_batch(core, chunk, results);
            for ((a, r), &row) in chunk.iter().zip(results.iter()).zip(rows) {
                self.tally.add(a.kind, r);
                count_in_table(&self.layout, &self.cell, &mut cells, row, a.kind, r);
            }
        }
        if valid < accesses.len() {
            row_outside(rows[valid], valid, whole);
        }
    }

    /// [`Driver::attribute_batch`] on the lean engine, rows known to be in
    /// the table: how many accesses were done (0 off the lean engine). A
    /// function of its own so that the batch loop is compiled alone:
    /// inlined into its caller it kept the hit count on the stack, a
    /// dependency through memory from one access to the next (measured:
    /// 1.15x slower in wall time with fewer instructions).
    #[inline(never)]
    fn attribute_lean(
        &mut self,
        core: usize,
        accesses: &[Access],
        rows: &[u32],
        cells: &mut Dense<'_>,
    ) -> usize {
        let mut sink = RowSink {
            tally: &mut self.tally,
            rows,
            cells,
            layout: self.layout,
            cell: &self.cell,
        };
        self.hier.lean_batch(core, accesses, &mut sink).unwrap_or(0)
    }

    /// [`Driver::attribute_batch`] with line use: one access at a time,
    /// each fill credited into the wide row of the access that made it.
    fn attribute_line_use(
        &mut self,
        core: usize,
        accesses: &[Access],
        rows: &[u32],
        cells: &mut Dense<'_>,
    ) {
        let Some(lu) = self.line_use.as_deref_mut() else {
            return;
        };
        let (fetched, used) = match (self.layout.lines_fetched(), self.layout.bytes_used()) {
            (Some(f), Some(u)) => (f, u),
            _ => return,
        };
        for (a, &row) in accesses.iter().zip(rows) {
            let held = lu.before(&self.hier, core, a);
            let r = self.hier.access(core, *a);
            lu.after(&self.hier, core, a, &r, held, row);
            self.tally.add(a.kind, &r);
            count_in_table(&self.layout, &self.cell, cells, row, a.kind, &r);
            lu.drain(|owner, bytes| {
                let w = cells.wide_row(owner);
                w[fetched] += 1;
                w[used] += bytes;
            });
        }
    }

    /// [`Driver::finish_line_use`] into `table` (the rows of
    /// [`Driver::attribute_batch`]).
    pub fn finish_line_use_into(&mut self, table: &mut RowTable) {
        let (Some(fetched), Some(used)) = (self.layout.lines_fetched(), self.layout.bytes_used())
        else {
            return;
        };
        self.finish_line_use(|row, bytes| {
            let w = table.wide_row_mut(row);
            w[fetched] += 1;
            w[used] += bytes;
        });
    }

    /// What has been simulated so far, by kind and serving level.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The hierarchy (statistics per level and instance).
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hier
    }

    /// The hierarchy, mutably (to drain prefetch outcomes, say).
    pub fn hierarchy_mut(&mut self) -> &mut Hierarchy {
        &mut self.hier
    }
}

/// Adds one access of `kind` with result `r` to `row`:
/// [`CounterLayout::add_access`], with the common case (a demand access
/// with no coherence traffic: one count) through the driver's `cell`
/// table.
#[inline(always)]
fn add_to_row(
    layout: &CounterLayout,
    cell: &[[u8; MAX_LEVELS + 1]; 4],
    row: &mut [u64],
    kind: AccessKind,
    r: &AccessResult,
) {
    let k = kind as usize;
    if k <= AccessKind::ReadModifyWrite as usize && r.invalidations == 0 && r.false_sharing == 0 {
        row[usize::from(cell[k][r.served_by.slot()])] += 1;
    } else {
        layout.add_access(row, kind, r);
    }
}

/// Counts one access of `kind` with result `r` in row `row`: a first-level
/// hit of a demand kind with no coherence traffic in its dense cell
/// ([`RowTable`]), anything else in its wide row ([`add_to_row`]).
#[inline(always)]
fn count_in_table(
    layout: &CounterLayout,
    cell: &[[u8; MAX_LEVELS + 1]; 4],
    cells: &mut Dense<'_>,
    row: u32,
    kind: AccessKind,
    r: &AccessResult,
) {
    let k = kind as usize;
    if k <= AccessKind::ReadModifyWrite as usize
        && r.served_by.slot() == 0
        && r.invalidations == 0
        && r.false_sharing == 0
    {
        cells.bump(row, usize::from(DENSE[k]));
    } else {
        add_to_row(layout, cell, cells.wide_row(row), kind, r);
    }
}

/// The lean batch loop's sink for [`Driver::access_batch`]: the rest into
/// the tally one by one, the hits by kind at the end of each run.
struct TallySink<'a>(&'a mut Tally);

impl BatchSink for TallySink<'_> {
    type Items = std::iter::Repeat<()>;
    #[inline(always)]
    fn start_run(&mut self, _len: usize) -> Self::Items {
        std::iter::repeat(())
    }
    #[inline(always)]
    fn hit(&mut self, _: (), _k: usize) {}
    #[inline(always)]
    fn rest(&mut self, _: (), _n: usize, k: usize, r: AccessResult) {
        self.0.add(AccessKind::ALL[k], &r);
    }
    fn hits(&mut self, by_kind: [u64; 4]) {
        add_hits(self.0, by_kind);
    }
}

/// Counts `by_kind` first-level hits in `tally`.
fn add_hits(tally: &mut Tally, by_kind: [u64; 4]) {
    for (k, n) in by_kind.into_iter().enumerate() {
        tally.accesses[k] += n;
        tally.served[k][0] += n;
    }
}

/// The dense cell ([`RowTable`]) of a first-level hit of each demand kind.
const DENSE: [u8; 4] = {
    let mut d = [0; 4];
    let mut k = 0;
    while k < 4 {
        d[k] = match crate::rows::dense_cell(AccessKind::ALL[k]) {
            Some(c) => c as u8,
            None => panic!("a demand kind without a side"),
        };
        k += 1;
    }
    d
};

/// The lean batch loop's sink for [`Driver::attribute_batch`]: a hit is
/// one count in its row's dense cell of its side; the rest as
/// [`count_in_table`] counts them.
struct RowSink<'a, 'b> {
    tally: &'a mut Tally,
    /// The rows of the accesses after the runs started so far; each is in
    /// the table.
    rows: &'a [u32],
    cells: &'a mut Dense<'b>,
    layout: CounterLayout,
    cell: &'a [[u8; MAX_LEVELS + 1]; 4],
}

impl<'a> BatchSink for RowSink<'a, '_> {
    type Items = std::iter::Copied<std::slice::Iter<'a, u32>>;
    #[inline(always)]
    fn start_run(&mut self, len: usize) -> Self::Items {
        let (run, next) = self.rows.split_at(len);
        self.rows = next;
        run.iter().copied()
    }
    #[inline(always)]
    fn hit(&mut self, row: u32, k: usize) {
        self.cells.bump(row, usize::from(DENSE[k]));
    }
    #[inline(always)]
    fn rest(&mut self, row: u32, _n: usize, k: usize, r: AccessResult) {
        let kind = AccessKind::ALL[k];
        self.tally.add(kind, &r);
        count_in_table(&self.layout, self.cell, self.cells, row, kind, &r);
    }
    fn hits(&mut self, by_kind: [u64; 4]) {
        add_hits(self.tally, by_kind);
    }
}

/// [`Driver::attribute_batch`]'s panic on a row outside its table.
#[cold]
#[inline(never)]
fn row_outside(row: u32, access: usize, rows: usize) -> ! {
    panic!("row {row} of access {access} lies outside a table of {rows} rows")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{presets, Side};

    /// Cachegrind's model by hand: a cold read misses to memory, the same
    /// line again hits L1; a write to a new line misses; the row and the
    /// tally agree.
    #[test]
    fn attribution_and_tally_by_hand() {
        let mut d = Driver::new(&presets::cachegrind_default()).unwrap();
        let l = d.layout();
        let mut row = vec![0u64; l.len()];
        let core = d.core_of(7);
        d.attribute(
            core,
            Access::new(AccessKind::InstrFetch, 0x1000, 4),
            &mut row,
        );
        d.attribute(core, Access::new(AccessKind::Read, 0x8000, 8), &mut row);
        d.attribute(
            core,
            Access::new(AccessKind::ReadModifyWrite, 0x8008, 8),
            &mut row,
        );
        d.attribute(core, Access::new(AccessKind::Write, 0x9000, 8), &mut row);
        d.attribute(core, Access::new(AccessKind::Flush, 0x9000, 1), &mut row);
        assert_eq!(row[l.memory(crate::Side::Instr)], 1);
        assert_eq!(row[l.memory(crate::Side::Read)], 1);
        assert_eq!(row[l.served(crate::Side::Read, 0)], 1);
        assert_eq!(row[l.memory(crate::Side::Write)], 1);
        assert_eq!(row.iter().sum::<u64>(), 4);
        let t = d.tally();
        assert_eq!(t.of(AccessKind::Read), 1);
        assert_eq!(t.of(AccessKind::ReadModifyWrite), 1);
        assert_eq!(t.memory(AccessKind::Read), 1);
        assert_eq!(t.first_level_misses(AccessKind::ReadModifyWrite), 0);
        assert_eq!(t.of(AccessKind::Flush), 1);
    }

    /// A row outside the table panics, as documented, after the accesses
    /// before it were simulated and counted, on the lean engine and the
    /// general one.
    #[test]
    fn a_row_outside_the_table_panics_after_counting_those_before_it() {
        for cfg in [presets::cachegrind_default(), presets::jaguar()] {
            let mut d = Driver::new(&cfg).unwrap();
            let len = d.layout().len();
            let mut table = RowTable::new(d.layout());
            table.grow_to(2);
            let accesses = [
                Access::new(AccessKind::InstrFetch, 0x1000, 4),
                Access::new(AccessKind::Read, 0x8000, 8),
                Access::new(AccessKind::Read, 0x8000, 8),
                Access::new(AccessKind::Write, 0x9000, 8),
            ];
            let rows = [0, 1, 2, 1];
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                d.attribute_batch(0, &accesses, &rows, &mut table)
            }));
            assert!(r.is_err(), "{}: row 2 of a 2-row table accepted", cfg.name);
            let t = d.tally();
            assert_eq!(t.of(AccessKind::InstrFetch), 1, "{}", cfg.name);
            assert_eq!(t.of(AccessKind::Read), 1, "{}", cfg.name);
            assert_eq!(t.of(AccessKind::Write), 0, "{}", cfg.name);
            let table = table.into_rows();
            assert_eq!(table[..len].iter().sum::<u64>(), 1, "{}", cfg.name);
            assert_eq!(table[len..].iter().sum::<u64>(), 1, "{}", cfg.name);
        }
    }

    /// A row past the range of its dense cells (more than 65,535 hits of
    /// one kind) counts exactly through `attribute_batch`: the carries,
    /// on the lean engine's batch loop and from results on the Jaguar
    /// engine, against `attribute` on each access.
    #[test]
    fn a_row_past_its_dense_cells_range_counts_exactly() {
        for cfg in [presets::cachegrind_default(), presets::jaguar()] {
            let mut one = Driver::new(&cfg).unwrap();
            let mut batched = Driver::new(&cfg).unwrap();
            let len = one.layout().len();
            let mut want = vec![0u64; 2 * len];
            let mut got = RowTable::new(one.layout());
            got.grow_to(2);
            let run: Vec<Access> = (0..256)
                .map(|i| match i % 4 {
                    0 => Access::new(AccessKind::InstrFetch, 0x1000, 4),
                    1 => Access::new(AccessKind::Read, 0x8000, 8),
                    2 => Access::new(AccessKind::Write, 0x9000, 8),
                    _ => Access::new(AccessKind::ReadModifyWrite, 0xa000, 8),
                })
                .collect();
            let rows: Vec<u32> = (0..256).map(|i| u32::from(i % 8 == 7)).collect();
            for _ in 0..1200 {
                for (a, &r) in run.iter().zip(&rows) {
                    let at = r as usize * len;
                    one.attribute(0, *a, &mut want[at..at + len]);
                }
                batched.attribute_batch(0, &run, &rows, &mut got);
            }
            // Row 0 took 1200 * 64 = 76,800 fetches: past 65,535.
            let l = one.layout();
            assert_eq!(want[l.served(Side::Instr, 0)], 76_799, "{}", cfg.name);
            assert_eq!(got.into_rows(), want, "{}", cfg.name);
        }
    }

    /// The batch entries do exactly what the per-access ones do: the same
    /// tally, the same rows, the same hierarchy counters, on the lean
    /// engine (`cachegrind`) and the general one (`jaguar`, four cores),
    /// over runs longer than one batch and a mix of kinds (a flush hands
    /// the lean engine over mid-run).
    #[test]
    fn batch_entries_equal_the_per_access_ones() {
        for (cfg, cores) in [(presets::cachegrind_default(), 1), (presets::jaguar(), 4)] {
            let mut one = Driver::new(&cfg).unwrap();
            let mut batched = Driver::new(&cfg).unwrap();
            let mut plain = Driver::new(&cfg).unwrap();
            let len = one.layout().len();
            let mut want = vec![0u64; 16 * len];
            let mut got = RowTable::new(one.layout());
            got.grow_to(16);
            let mut x = 0x2545_F491_4F6C_DD1Du64;
            for run in 0..40 {
                let core = run % cores;
                let n = if run % 7 == 0 { 600 } else { 1 + run * 3 };
                let mut accesses = Vec::new();
                let mut rows = Vec::new();
                for i in 0..n {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let kind = if run == 20 && i == 5 {
                        AccessKind::Flush
                    } else {
                        AccessKind::ALL[(x % 4) as usize]
                    };
                    let addr = (x >> 8) % (256 << 10);
                    accesses.push(Access::new(kind, addr, 1 + (x >> 40) as u32 % 16));
                    rows.push((x >> 50) as u32 % 16);
                }
                for (a, &r) in accesses.iter().zip(&rows) {
                    let at = r as usize * len;
                    one.attribute(core, *a, &mut want[at..at + len]);
                }
                batched.attribute_batch(core, &accesses, &rows, &mut got);
                plain.access_batch(core, &accesses);
            }
            assert_eq!(got.into_rows(), want, "{}", cfg.name);
            assert_eq!(batched.tally(), one.tally(), "{}", cfg.name);
            assert_eq!(plain.tally(), one.tally(), "{}", cfg.name);
            assert_eq!(batched.hierarchy().stats(), one.hierarchy().stats());
            assert_eq!(plain.hierarchy().stats(), one.hierarchy().stats());
            assert!(one.tally().of(AccessKind::Flush) == 1);
        }
    }
}
