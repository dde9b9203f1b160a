//! The tables the accountant fills where nothing may allocate: decoded
//! instructions, interned call stacks and per-(instruction, stack, thread)
//! counters, with [`BlockRows`] in front of the counters: a translated
//! block's rows under one (stack, thread), found with one probe per block
//! execution instead of one per instruction.
//!
//! Each is a dense [`GrowVec`] of entries (addressed by index: an index
//! stays valid as the table grows) with an open-addressing [`Index`]
//! (linear probing, power-of-two slots, load at most one half) over it.
//! Both grow inside signal handlers by mapping memory with raw system
//! calls ([`crate::grow`]), charged to the capture's [`Budget`]; an
//! insertion the budget or the table's bound (`--reserve`) refuses returns
//! a [`Full`] naming the table, and the accountant then stops the capture
//! cleanly. No operation allocates, locks or panics.

pub use crate::grow::counters::CounterTable;
use crate::grow::counters::FREE;
use crate::grow::{mix, Budget, Full, GrowVec, Index, Refused};
use crate::model::Plan;
use iced_x86::Instruction;

/// How an instruction changes the flow, as far as the shadow stack cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Anything else.
    Other,
    /// A near call (the next instruction is the callee's first).
    Call,
    /// `syscall`: the instruction after it runs without a trap.
    Syscall,
    /// A 64-bit `mov` to memory: in fast mode its address is compared with
    /// the thread's rseq `rseq_cs` field (`crate::rseq`).
    Store64,
}

/// One decoded instruction, cached by address.
#[derive(Clone, Copy, Debug)]
pub struct Decoded {
    /// The instruction, decoded with its real address.
    pub instr: Instruction,
    /// Its access plan.
    pub plan: Plan,
    /// Its length in bytes.
    pub len: u8,
    /// How it changes the flow.
    pub flow: Flow,
    /// For a repeated string instruction: how the repetition ends.
    pub rep: Rep,
    /// The instruction's bytes as decoded (the first `len`), to check a
    /// decode of code that can change (JIT buffers) against the bytes there
    /// now.
    pub bytes: [u8; 15],
    /// Whether the code lies in a file-backed module mapped at the start,
    /// whose bytes are not checked again (decided once, at decode time).
    pub trusted: bool,
}

/// The repeat prefix of a string instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rep {
    /// Not a repeated string instruction.
    None,
    /// `rep`: ends when the count register reaches 0.
    Count,
    /// `repe`/`repz`: also ends when ZF is 0.
    WhileEqual,
    /// `repne`/`repnz`: also ends when ZF is 1.
    WhileNotEqual,
}

/// Decoded instructions keyed by address.
pub struct DecodeCache {
    index: Index,
    keys: GrowVec<u64>,
    values: GrowVec<Decoded>,
}

impl Default for DecodeCache {
    fn default() -> Self {
        DecodeCache::new(usize::MAX)
    }
}

/// The [`Full`] of a table from a refused growth.
fn full(table: &'static str, entries: usize, bytes: usize, r: Refused, b: &Budget) -> Full {
    r.full(table, entries, bytes, b)
}

impl DecodeCache {
    /// A cache holding up to `capacity` instructions (nothing mapped yet).
    pub fn new(capacity: usize) -> Self {
        DecodeCache {
            index: Index::new(),
            keys: GrowVec::new(capacity.max(1)),
            values: GrowVec::new(capacity.max(1)),
        }
    }

    /// Instructions cached.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Bytes mapped.
    pub fn bytes(&self) -> usize {
        self.index.bytes() + self.keys.bytes() + self.values.bytes()
    }

    #[inline]
    fn find(&self, ip: u64) -> Result<usize, usize> {
        if !self.index.ready() {
            return Err(0);
        }
        self.index.find(mix(ip), |r| *self.keys.at(r) == ip)
    }

    /// The index of the cached instruction at `ip` (see [`DecodeCache::at`]).
    #[inline]
    pub fn index(&self, ip: u64) -> Option<usize> {
        self.find(ip).ok()
    }

    /// The cached instruction with this index.
    #[inline]
    pub fn at(&self, index: usize) -> &Decoded {
        assert!(index < self.values.len());
        self.values.at(index)
    }

    /// Code in `start..end` may change: every instruction cached there
    /// (or reaching into it) is checked against the bytes in memory before
    /// it is used again, as code outside the modules always is.
    pub fn distrust(&mut self, start: u64, end: u64) {
        for (ip, d) in self.keys.as_slice().iter().zip(self.values.as_mut_slice()) {
            if *ip < end && ip + u64::from(d.len) > start {
                d.trusted = false;
            }
        }
    }

    /// Caches `d` at `ip` (replacing what was there) and gives its index;
    /// `Err` when the table cannot grow.
    pub fn insert_index(&mut self, ip: u64, d: Decoded, b: &mut Budget) -> Result<usize, Full> {
        if let Ok(r) = self.find(ip) {
            *self.values.at_mut(r) = d;
            return Ok(r);
        }
        let n = self.values.len();
        let grown = (|| {
            if !self.index.fits(n) {
                let keys = &self.keys;
                self.index.grow(n, |e| mix(*keys.at(e)), b)?;
            }
            self.keys.reserve(1, b)?;
            self.values.reserve(1, b)
        })();
        if let Err(r) = grown {
            return Err(full("instructions", n, self.bytes(), r, b));
        }
        let Err(i) = self.find(ip) else {
            unreachable!("not cached before")
        };
        let e = self.keys.push(ip, b).expect("room made");
        self.values.push(d, b).expect("room made");
        self.index.fill(i, e, mix(ip));
        Ok(e)
    }
}

/// One interned stack: its parent plus one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackEntry {
    /// Parent stack id.
    pub parent: u32,
    /// Address of the call instruction.
    pub call_site: u64,
    /// Entry address of the callee (0 when unknown).
    pub callee: u64,
}

/// Interned call stacks: id 0 is the empty stack.
pub struct StackTable {
    nodes: GrowVec<StackEntry>,
    index: Index,
}

impl StackTable {
    /// A table for up to `capacity` distinct stacks (the root included),
    /// its first page (the root's) charged to `b`.
    pub fn new(capacity: usize, b: &mut Budget) -> Self {
        let mut t = StackTable {
            nodes: GrowVec::new(capacity.max(2)),
            index: Index::new(),
        };
        let mut first = Budget::new(usize::MAX);
        // The root needs one page; a kernel that refuses it leaves the
        // table empty, and the first intern tries again.
        let _ = t.nodes.push(StackEntry::default(), &mut first);
        b.charge(first.used());
        t
    }

    fn hash(e: &StackEntry) -> u64 {
        mix(e.call_site ^ mix(e.callee) ^ (u64::from(e.parent) << 40))
    }

    /// Bytes mapped.
    pub fn bytes(&self) -> usize {
        self.index.bytes() + self.nodes.bytes()
    }

    /// The id of `parent` extended by one call; `Err` when the table
    /// cannot grow.
    pub fn intern(
        &mut self,
        parent: u32,
        call_site: u64,
        callee: u64,
        b: &mut Budget,
    ) -> Result<u32, Full> {
        let e = StackEntry {
            parent,
            call_site,
            callee,
        };
        if self.nodes.is_empty() {
            if let Err(r) = self.nodes.push(StackEntry::default(), b) {
                return Err(full("stacks", 0, 0, r, b));
            }
        }
        // Entry 0 (the root) is never in the index: it is no call.
        let indexed = self.nodes.len() - 1;
        if !self.index.fits(indexed) {
            let nodes = &self.nodes;
            if let Err(r) = self.index.grow(indexed, |k| Self::hash(nodes.at(k + 1)), b) {
                return Err(full("stacks", self.nodes.len(), self.bytes(), r, b));
            }
        }
        // An index entry is a node's id less one (the root is not in it).
        let h = Self::hash(&e);
        let i = match self.index.find(h, |k| *self.nodes.at(k + 1) == e) {
            Ok(k) => return Ok(k as u32 + 1),
            Err(i) => i,
        };
        match self.nodes.push(e, b) {
            Ok(id) => {
                // The slot holds the node's id (its number in the index
                // plus one).
                self.index.fill(i, id - 1, h);
                Ok(id as u32)
            }
            Err(r) => Err(full("stacks", self.nodes.len(), self.bytes(), r, b)),
        }
    }

    /// Every stack, by id.
    pub fn nodes(&self) -> &[StackEntry] {
        self.nodes.as_slice()
    }
}

/// The counter rows of one translated block's instructions under one
/// (stack, thread): what [`BlockRows`] keeps per key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BlockKey {
    /// The number the accountant gave the block: one translated block's
    /// (its address and instruction count) for the whole capture.
    block: u32,
    stack: u32,
    thread: u32,
}

/// Counter rows looked up once per (block, stack, thread), not once per
/// instruction (issue 35's (c)): for each key, `count` consecutive cells,
/// cell `k` holding the [`CounterTable`] row of the block's instruction `k`
/// under that stack and thread, or [`BlockRows::NONE`] until that
/// instruction first runs there (so no counter row is made for an
/// instruction that never ran: the dump is the same as with lookups per
/// instruction). The rows themselves stay keyed by (instruction, stack,
/// thread) in the counter table; this is an index in front of it whose
/// one probe per block execution replaces one per instruction.
///
/// A cell also counts its instruction's *plain* executions not yet in its
/// row: executions that made no data access and whose fetch the first
/// level served, which add exactly one to the row's `instructions` and one
/// to its `i_L1` ([`BlockRows::defer`]). Counting them here, next to the
/// row's number, instead of in the row (a wide line elsewhere in memory)
/// is most of a replay's memory traffic on a program with many stacks;
/// [`BlockRows::settle`] adds them to the rows before anything reads the
/// counters.
///
/// A *run* goes further: consecutive instructions of a block, each only
/// fetched and each within the line the instruction before it ended in,
/// whose cells all have rows, marked at the run's first cell
/// ([`BlockRows::mark_run`]). One execution of the whole run is one count
/// in that cell ([`BlockRows::count_run`]), which `settle` adds as a plain
/// execution to each of the run's rows: nothing per instruction at all.
///
/// Per block number, the [`RECENT`] keys last found for it ([`Recent`]):
/// a block run in turn under a few stacks (a function called from a few
/// sites, recursion; SQLite's interpreter) finds its cells there, in one
/// 48-byte entry indexed by the block's number, not through the index
/// and the keys.
///
/// Like the other tables it grows by mapping memory ([`crate::grow`]),
/// charged to the budget; a growth refused is not a cut: the caller
/// looks rows up one by one, as before.
pub struct BlockRows {
    /// Each key with where its cells start in `cells` (one read finds
    /// both).
    keys: GrowVec<(BlockKey, u32)>,
    index: Index,
    cells: GrowVec<Cell>,
    /// Indexed by block number: its last keys found, the latest first
    /// (a block without any yet: none).
    recent: GrowVec<[Recent; RECENT]>,
}

/// Keys remembered per block number. SQLite querying 100k rows asks
/// [`BlockRows::start`] 45.8M times, each a block run under another stack
/// than its last run: two keys per block find 42% of them, four 94%.
const RECENT: usize = 4;

/// A (stack, thread) under which a block's cells were found, and where
/// they start ([`BlockRows::NONE`]: no entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Recent {
    stack: u32,
    thread: u32,
    start: u32,
}

impl Recent {
    const EMPTY: Recent = Recent {
        stack: 0,
        thread: 0,
        start: BlockRows::NONE,
    };
}

/// One instruction's row under one key, and its executions not yet added
/// to the row; where a run starts, the run and its executions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cell {
    row: u32,
    deferred: u32,
    /// A run marked here ([`BlockRows::mark_run`]): its length in the low
    /// 16 bits, the line shift it was found with above; 0: none.
    run: u32,
    /// Executions of the run not yet added to its rows.
    runs: u32,
}

impl Default for BlockRows {
    fn default() -> Self {
        BlockRows::new()
    }
}

impl BlockRows {
    /// A cell whose instruction has no row yet under its key.
    pub const NONE: u32 = u32::MAX;

    /// An empty table (nothing mapped yet).
    pub fn new() -> Self {
        BlockRows {
            keys: GrowVec::new(usize::MAX),
            index: Index::new(),
            cells: GrowVec::new(u32::MAX as usize),
            recent: GrowVec::new(u32::MAX as usize),
        }
    }

    /// Bytes mapped.
    pub fn bytes(&self) -> usize {
        self.index.bytes() + self.keys.bytes() + self.cells.bytes() + self.recent.bytes()
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Sixteen blocks numbered together (numbers are given at a block's
    /// first replay: a function's blocks mostly get neighbouring ones)
    /// under one stack and thread hash to one run of 16 slots, a cache
    /// line of the index, and their keys are mostly made together (the
    /// function's first run under that stack): the blocks of one call
    /// find their cells with about one cache miss in the index and one in
    /// the keys, not two each (CPython: 362,652 stacks).
    #[inline(always)]
    fn hash(k: &BlockKey) -> u64 {
        let run = mix(u64::from(k.block >> 4)) ^ (u64::from(k.stack) << 32 | u64::from(k.thread));
        mix(run).wrapping_add(u64::from(k.block & 15))
    }

    /// The first cell of the key (block number `block` starting at `ip`,
    /// `count` instructions, under `stack` and `thread`), its `count`
    /// cells made [`BlockRows::NONE`] on first use; `None` when the table
    /// cannot grow (the caller then looks rows up one by one). A block
    /// number is one block's (its address and `count`) for the whole
    /// capture, so the key holds neither: the block's [`Recent`] keys are
    /// looked at first.
    #[inline]
    pub fn start(
        &mut self,
        block: u32,
        count: u32,
        stack: u32,
        thread: u32,
        b: &mut Budget,
    ) -> Option<usize> {
        let key = BlockKey {
            block,
            stack,
            thread,
        };
        let at = block as usize;
        if at < self.recent.len() {
            let r = self.recent.at_mut(at);
            for i in 0..RECENT {
                if r[i].start != Self::NONE && (r[i].stack, r[i].thread) == (stack, thread) {
                    let hit = r[i];
                    r.copy_within(0..i, 1);
                    r[0] = hit;
                    // A block number is one block's: the index agrees.
                    debug_assert_eq!(
                        self.find(key, count, b),
                        Some(hit.start as usize),
                        "block {block}"
                    );
                    return Some(hit.start as usize);
                }
            }
        }
        let start = self.find(key, count, b)?;
        if at >= self.recent.len() {
            let more = at + 1 - self.recent.len();
            if self
                .recent
                .extend([Recent::EMPTY; RECENT], more, b)
                .is_err()
            {
                return Some(start);
            }
        }
        let r = self.recent.at_mut(at);
        r.copy_within(0..RECENT - 1, 1);
        r[0] = Recent {
            stack,
            thread,
            start: start as u32,
        };
        Some(start)
    }

    /// [`BlockRows::start`] through the index and the keys.
    #[inline]
    fn find(&mut self, key: BlockKey, count: u32, b: &mut Budget) -> Option<usize> {
        let h = Self::hash(&key);
        if self.index.ready() {
            if let Ok(e) = self.index.find(h, |e| self.keys.at(e).0 == key) {
                // The key holds no length: a block number given to two
                // blocks would mix their cells. Keys take their cells in
                // order, so a key's are up to the next key's.
                debug_assert_eq!(
                    self.span(e),
                    count as usize,
                    "block {} asked for with {count} instructions",
                    key.block
                );
                return Some(self.keys.at(e).1 as usize);
            }
        }
        self.insert(key, h, count, b)
    }

    /// The number of cells of key `e` (keys take their cells one after
    /// the other, in the order they are made).
    fn span(&self, e: usize) -> usize {
        let end = if e + 1 < self.keys.len() {
            self.keys.at(e + 1).1 as usize
        } else {
            self.cells.len()
        };
        end - self.keys.at(e).1 as usize
    }

    #[cold]
    fn insert(&mut self, key: BlockKey, h: u64, count: u32, b: &mut Budget) -> Option<usize> {
        let n = self.keys.len();
        let count = count as usize;
        let grown = (|| {
            if !self.index.fits(n) {
                let keys = &self.keys;
                self.index.grow(n, |e| Self::hash(&keys.at(e).0), b)?;
            }
            self.keys.reserve(1, b)?;
            self.cells.reserve(count, b)
        })();
        grown.ok()?;
        let mut i = self.index.start(h);
        while self.index.slot(i) != FREE {
            i = self.index.next(i);
        }
        let empty = Cell {
            row: Self::NONE,
            deferred: 0,
            run: 0,
            runs: 0,
        };
        let start = self.cells.extend(empty, count, b).expect("room made");
        let e = self.keys.push((key, start as u32), b).expect("room made");
        self.index.fill(i, e, h);
        Some(start)
    }

    /// The row of cell `i` (a key's start plus an instruction's number in
    /// its block).
    #[inline(always)]
    pub fn cell(&mut self, i: usize) -> &mut u32 {
        assert!(i < self.cells.len());
        &mut self.cells.at_mut(i).row
    }

    /// One more plain execution of cell `i`'s instruction (its row set):
    /// `Some((row, n))` when the cell's count is full, to be added to the
    /// row now (`n` executions), else `None`.
    #[inline(always)]
    pub fn defer(&mut self, i: usize) -> Option<(u32, u64)> {
        assert!(i < self.cells.len());
        let c = self.cells.at_mut(i);
        c.deferred += 1;
        if c.deferred == u32::MAX {
            c.deferred = 0;
            return Some((c.row, u64::from(u32::MAX)));
        }
        None
    }

    /// Marks the run of `n` cells (2 to `u16::MAX`) from cell `i`, all
    /// under one key and all with rows: their instructions, in a row, are
    /// each only fetched, each within the line (of `1 << shift` bytes)
    /// the one before ended in. A run marked there before is replaced
    /// unless executions of it are still to be settled (then nothing
    /// changes).
    pub fn mark_run(&mut self, i: usize, n: usize, shift: u32) {
        assert!(i + n <= self.cells.len() && (2..=0xffff).contains(&n) && shift < 0x1_0000);
        debug_assert!((i..i + n).all(|j| self.cells.at(j).row != Self::NONE));
        let c = self.cells.at_mut(i);
        if c.runs == 0 {
            c.run = n as u32 | shift << 16;
        }
    }

    /// The run marked at cell `i` for line shift `shift`: its length, or 0.
    #[inline(always)]
    pub fn run_at(&self, i: usize, shift: u32) -> usize {
        assert!(i < self.cells.len());
        let run = self.cells.at(i).run;
        if run >> 16 == shift {
            (run & 0xffff) as usize
        } else {
            0
        }
    }

    /// One more execution of the run marked at cell `i`: when its count is
    /// full, `f(row, n)` for each of its rows (`n` executions) now.
    #[inline(always)]
    pub fn count_run(&mut self, i: usize, f: &mut impl FnMut(u32, u64)) {
        assert!(i < self.cells.len());
        let c = self.cells.at_mut(i);
        c.runs += 1;
        if c.runs == u32::MAX {
            let (run, runs) = (c.run, c.runs);
            c.runs = 0;
            self.add_run(i, run, runs, f);
        }
    }

    /// `f(row, runs)` for each row of the run `run` marked at cell `i`.
    #[cold]
    fn add_run(&self, i: usize, run: u32, runs: u32, f: &mut impl FnMut(u32, u64)) {
        for j in i..i + (run & 0xffff) as usize {
            f(self.cells.at(j).row, u64::from(runs));
        }
    }

    /// Hands every cell's plain executions, its own and its runs', to
    /// `f(row, n)` and forgets them.
    pub fn settle(&mut self, mut f: impl FnMut(u32, u64)) {
        for i in 0..self.cells.len() {
            let c = self.cells.at_mut(i);
            if c.deferred != 0 {
                // `defer` is called only on a cell whose row is set.
                debug_assert_ne!(c.row, Self::NONE);
                f(c.row, u64::from(c.deferred));
                c.deferred = 0;
            }
            if c.runs != 0 {
                let (run, runs) = (c.run, c.runs);
                c.runs = 0;
                self.add_run(i, run, runs, &mut f);
            }
        }
    }

    /// Forgets every cell's plain executions (the counters were zeroed).
    pub fn forget_deferred(&mut self) {
        self.settle(|_, _| {});
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grow::Limit;

    #[test]
    fn stack_interning_is_stable_and_bounded() {
        let mut b = Budget::new(usize::MAX);
        let mut t = StackTable::new(3, &mut b);
        let a = t.intern(0, 0x10, 0x100, &mut b).unwrap();
        let c = t.intern(a, 0x20, 0x200, &mut b).unwrap();
        assert_eq!((a, c), (1, 2));
        assert_eq!(t.intern(0, 0x10, 0x100, &mut b), Ok(1));
        let e = t.intern(0, 0x30, 0x300, &mut b).unwrap_err();
        assert_eq!(
            (e.table, e.entries, e.limit),
            ("stacks", 3, Limit::Reserve),
            "capacity 3 includes the root"
        );
        assert_eq!(t.nodes()[2].parent, 1);
    }

    /// By hand: a counter's value is its narrow part plus its wide part,
    /// the wide part made only for a row that asks for it; a third key
    /// past the table's bound is refused.
    #[test]
    fn counters_accumulate_per_key_in_both_parts_and_stop_when_full() {
        let mut b = Budget::new(usize::MAX);
        let mut t = CounterTable::new(2, 5, [0, 2, 3, 4]);
        let a = t.row_index(1, 0, 0, &mut b).unwrap();
        t.hot(a)[0] += 5;
        t.row(a)[1] += 1;
        t.row(a)[0] += 2;
        let c = t.row_index(1, 1, 0, &mut b).unwrap();
        t.hot(c)[3] += 4;
        assert_eq!(t.row_index(1, 0, 0, &mut b), Ok(a));
        let e = t.row_index(2, 0, 0, &mut b).unwrap_err();
        assert_eq!((e.table, e.entries), ("records", 2));
        let v: Vec<_> = t.iter().collect();
        assert_eq!(
            v,
            vec![
                ((1, 0, 0), vec![7, 1, 0, 0, 0]),
                ((1, 1, 0), vec![0, 0, 0, 0, 4])
            ]
        );
        assert_eq!(
            (t.counter(a, 0), t.counter(a, 1), t.counter(c, 4)),
            (7, 1, 4)
        );
        t.zero();
        assert!(t.iter().all(|(_, c)| c == [0; 5]));
    }

    /// Far more rows than the first mappings hold: every growth (index
    /// rehashed, arrays moved by mremap) keeps every row, its counters and
    /// its number; the budget is charged what is mapped.
    #[test]
    fn growth_keeps_every_row_and_its_counters() {
        let mut b = Budget::new(usize::MAX);
        let mut t = CounterTable::new(usize::MAX, 4, [0, 1, 2, 3]);
        let n = 300_000u64;
        let mut rows = Vec::new();
        for i in 0..n {
            let r = t
                .row_index(0x40_0000 + i * 3, (i % 7) as u32, (i % 3) as u32, &mut b)
                .unwrap();
            assert_eq!(r, i as usize);
            t.row(r)[1] = i * 11;
            rows.push(r);
        }
        assert_eq!(t.len(), n as usize);
        for i in 0..n {
            let r = t
                .row_index(0x40_0000 + i * 3, (i % 7) as u32, (i % 3) as u32, &mut b)
                .unwrap();
            assert_eq!(r, rows[i as usize]);
            assert_eq!(t.row(r), &[0, i * 11, 0, 0]);
        }
        assert_eq!(t.len(), n as usize, "lookups added nothing");
        assert_eq!(b.used(), t.bytes());
        let mut c = DecodeCache::new(usize::MAX);
        assert_eq!(c.index(0x1000), None);
        let mut s = StackTable::new(usize::MAX, &mut b);
        let mut parent = 0;
        for i in 0..100_000u64 {
            parent = s.intern(parent, 0x1000 + i, 0x2000 + i, &mut b).unwrap();
        }
        let mut p = 0;
        for i in 0..100_000u64 {
            p = s.intern(p, 0x1000 + i, 0x2000 + i, &mut b).unwrap();
        }
        assert_eq!((p, s.nodes().len()), (parent, 100_001));
        assert_eq!(b.used(), t.bytes() + s.bytes() + c.bytes());
        c.distrust(0, 1);
    }

    /// A table whose index was released (the capture's finish) gives its
    /// bytes back and still reads every row; a lookup after it rebuilds
    /// the index from the keys: the same rows for the keys it holds, with
    /// nothing else mapped (256 keys fill the first mappings: room for a
    /// new row would be more), a new one for a new key, none twice.
    #[test]
    fn a_released_index_is_rebuilt_from_the_keys() {
        let mut b = Budget::new(usize::MAX);
        let mut t = CounterTable::new(usize::MAX, 4, [0, 1, 2, 3]);
        let key = |i: u64| (0x40_0000 + i * 5, (i % 5) as u32, (i % 2) as u32);
        let n = 256;
        for i in 0..n {
            let (ip, stack, thread) = key(i);
            let r = t.row_index(ip, stack, thread, &mut b).unwrap();
            t.row(r)[2] = i + 1;
        }
        let before = b.used();
        t.release_index(&mut b);
        assert!(b.used() < before, "the index's bytes given back");
        assert_eq!(b.used(), t.bytes());
        assert_eq!(t.keys()[201], key(201));
        assert_eq!(t.counter(201, 2), 202);
        for i in (0..n).rev() {
            let (ip, stack, thread) = key(i);
            assert_eq!(t.row_index(ip, stack, thread, &mut b), Ok(i as usize));
        }
        assert_eq!((b.used(), t.bytes()), (before, before), "only the index");
        let (ip, stack, thread) = key(n);
        assert_eq!(t.row_index(ip, stack, thread, &mut b), Ok(n as usize));
        assert_eq!(t.len(), n as usize + 1);
    }

    /// A block's key made where its memo of recent keys cannot grow (a
    /// block number far beyond the others, a budget with room for the
    /// key's cells only) is still found, through the index, at the same
    /// cells; the budget is charged what is mapped.
    #[test]
    fn block_rows_without_room_for_the_memo_find_keys_through_the_index() {
        let mut b = Budget::new(64 << 10);
        let mut t = BlockRows::new();
        let far = 1 << 20;
        let first = t.start(far, 3, 7, 0, &mut b);
        assert_eq!(first, Some(0));
        assert_eq!(t.start(far, 3, 7, 0, &mut b), first);
        assert_eq!(t.start(far, 3, 8, 0, &mut b), Some(3));
        assert_eq!(t.len(), 2);
        assert_eq!(b.used(), t.bytes());
    }

    /// Hand-computed: keys differing in any part get their own cells, laid
    /// out one key after another in order of first use, each cell empty
    /// until set; the same key finds the same cells again.
    #[test]
    fn block_rows_give_each_key_its_own_cells_in_order_of_first_use() {
        let mut b = Budget::new(usize::MAX);
        let mut t = BlockRows::new();
        assert_eq!(t.start(0, 3, 0, 0, &mut b), Some(0));
        assert_eq!(t.start(0, 3, 5, 0, &mut b), Some(3), "another stack");
        assert_eq!(t.start(0, 3, 0, 1, &mut b), Some(6), "another thread");
        assert_eq!(t.start(1, 2, 0, 0, &mut b), Some(9), "another block");
        assert_eq!(t.start(0, 3, 5, 0, &mut b), Some(3), "found again");
        assert_eq!(t.len(), 4);
        assert!((0..11).all(|i| *t.cell(i) == BlockRows::NONE));
        *t.cell(4) = 17;
        assert_eq!(t.start(0, 3, 5, 0, &mut b), Some(3));
        assert_eq!(*t.cell(4), 17);
        assert_eq!(b.used(), t.bytes());
    }

    /// Against a model (a key's cells start where the cells of the keys
    /// first used before it end): keys found again in any order, among
    /// more stacks than a block remembers ([`RECENT`]), with the same
    /// stack on two threads, get their own cells, whether found among the
    /// block's recent keys or through the index.
    #[test]
    fn block_rows_find_keys_again_among_recent_ones_and_beyond() {
        let mut b = Budget::new(usize::MAX);
        let mut t = BlockRows::new();
        // Instructions per block number.
        let counts = [3, 5];
        let mut model: Vec<((u32, u32, u32), usize)> = Vec::new();
        let mut next = 0;
        let mut x: u32 = 2463534242;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            // Mostly a few stacks (found among the recent keys), at times
            // any of 2 * RECENT + 1 (through the index).
            let stack = if x.is_multiple_of(4) {
                x % (2 * RECENT as u32 + 1)
            } else {
                x % 3
            };
            let (block, thread) = ((x >> 8) % 2, (x >> 12) % 2);
            let count = counts[block as usize];
            let key = (block, stack, thread);
            let want = match model.iter().find(|(k, _)| *k == key) {
                Some(&(_, start)) => start,
                None => {
                    model.push((key, next));
                    next += count as usize;
                    next - count as usize
                }
            };
            assert_eq!(
                t.start(block, count, stack, thread, &mut b),
                Some(want),
                "{key:?}"
            );
        }
        assert_eq!(t.len(), model.len());
        assert_eq!(model.len(), 2 * 2 * (2 * RECENT + 1));
        assert_eq!(b.used(), t.bytes());
    }

    /// A block number asked for with another length than its cells'
    /// (two blocks given one number) is caught in a debug build.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "block 0 asked for with 4 instructions")]
    fn a_block_number_asked_for_with_another_length_is_caught() {
        let mut b = Budget::new(usize::MAX);
        let mut t = BlockRows::new();
        assert_eq!(t.start(0, 3, 0, 0, &mut b), Some(0));
        assert_eq!(t.start(1, 2, 0, 0, &mut b), Some(3));
        t.start(0, 4, 0, 0, &mut b);
    }

    /// Hand-computed: plain executions counted in cells are handed to
    /// their rows once each by `settle`, cell by cell, and forgotten.
    #[test]
    fn block_rows_settle_each_cells_plain_executions_once() {
        let mut b = Budget::new(usize::MAX);
        let mut t = BlockRows::new();
        let a = t.start(0, 2, 0, 0, &mut b).unwrap();
        let c = t.start(0, 2, 7, 0, &mut b).unwrap();
        for (cell, row) in [(a, 10), (a + 1, 11), (c, 20), (c + 1, 21)] {
            *t.cell(cell) = row;
        }
        for _ in 0..3 {
            assert_eq!(t.defer(a), None);
        }
        assert_eq!(t.defer(c + 1), None);
        let mut got = Vec::new();
        t.settle(|row, n| got.push((row, n)));
        assert_eq!(got, [(10, 3), (21, 1)]);
        got.clear();
        t.settle(|row, n| got.push((row, n)));
        assert!(got.is_empty(), "settled once");
        assert_eq!(t.defer(a + 1), None);
        t.forget_deferred();
        t.settle(|row, n| got.push((row, n)));
        assert!(got.is_empty(), "forgotten");
        assert_eq!(*t.cell(c), 20, "rows kept");
    }

    /// Hand-computed: a run marked at a cell is found only for its line
    /// shift; each count of it is settled as one plain execution of every
    /// row in it, beside the cells' own deferred ones, once; a run with
    /// counts not yet settled is not replaced.
    #[test]
    fn block_rows_settle_a_runs_executions_into_each_of_its_rows() {
        let mut b = Budget::new(usize::MAX);
        let mut t = BlockRows::new();
        let a = t.start(0, 4, 0, 0, &mut b).unwrap();
        for (k, row) in [10, 11, 12, 13].into_iter().enumerate() {
            *t.cell(a + k) = row;
        }
        assert_eq!(t.run_at(a + 1, 6), 0, "nothing marked");
        t.mark_run(a + 1, 3, 6);
        assert_eq!((t.run_at(a + 1, 6), t.run_at(a + 1, 7)), (3, 0));
        let mut got = Vec::new();
        for _ in 0..4 {
            t.count_run(a + 1, &mut |row, n| got.push((row, n)));
        }
        assert!(got.is_empty(), "nothing handed before the count is full");
        assert_eq!(t.defer(a + 2), None);
        t.mark_run(a + 1, 2, 6);
        assert_eq!(t.run_at(a + 1, 6), 3, "counted: kept");
        t.settle(|row, n| got.push((row, n)));
        got.sort();
        assert_eq!(got, [(11, 4), (12, 1), (12, 4), (13, 4)]);
        got.clear();
        t.settle(|row, n| got.push((row, n)));
        assert!(got.is_empty(), "settled once");
        t.mark_run(a + 1, 2, 6);
        assert_eq!(t.run_at(a + 1, 6), 2, "settled: replaced");
    }

    /// A budget that cannot take the table's first growth: no cells, and
    /// nothing charged beyond the budget (the caller looks rows up one by
    /// one).
    #[test]
    fn block_rows_refused_by_the_budget_answer_none() {
        let mut b = Budget::new(1024);
        let mut t = BlockRows::new();
        assert_eq!(t.start(0, 3, 0, 0, &mut b), None);
        assert!(t.is_empty());
        assert!(b.used() <= 1024);
    }

    /// Randomized: blocks of random lengths (some sharing instructions, as
    /// blocks entered mid-way do) run under random stacks and threads,
    /// sometimes cut short; each instruction's row through the block rows
    /// (filled lazily) is the row a plain lookup of (ip, stack, thread)
    /// gives, and no row exists for an instruction that never ran.
    #[test]
    fn block_rows_give_the_rows_plain_lookups_give() {
        let mut b = Budget::new(usize::MAX);
        let mut via = CounterTable::new(usize::MAX, 4, [0, 1, 2, 3]);
        let mut plain = CounterTable::new(usize::MAX, 4, [0, 1, 2, 3]);
        let mut t = BlockRows::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // 300 blocks: a start, a length; block i+1 may start inside block i.
        let blocks: Vec<(u64, u32)> = (0..300u64)
            .map(|i| (0x40_0000 + i * 16 + (i % 3) * 4, 1 + (i % 7) as u32))
            .collect();
        for _ in 0..200_000 {
            let r = next();
            let bi = (r % blocks.len() as u64) as usize;
            let (ip0, count) = blocks[bi];
            let stack = ((r >> 20) % 50) as u32;
            let thread = ((r >> 30) % 3) as u32;
            let ran = if (r >> 40) % 10 == 0 {
                1 + ((r >> 44) % u64::from(count)) as u32
            } else {
                count
            };
            let start = t.start(bi as u32, count, stack, thread, &mut b).unwrap();
            for k in 0..ran {
                let ip = ip0 + u64::from(k) * 4;
                let cell = t.cell(start + k as usize);
                if *cell == BlockRows::NONE {
                    *cell = via.row_index(ip, stack, thread, &mut b).unwrap() as u32;
                }
                let row = *cell as usize;
                via.row(row)[0] += 1;
                let p = plain.row_index(ip, stack, thread, &mut b).unwrap();
                plain.row(p)[0] += 1;
                assert_eq!(via.keys()[row], (ip, stack, thread));
            }
        }
        let mut a: Vec<_> = via.iter().collect();
        let mut p: Vec<_> = plain.iter().collect();
        a.sort();
        p.sort();
        assert_eq!(a, p);
    }

    /// A table without counters (re-simulation's numbering of keys) gives
    /// its keys with no counters, and narrow positions that repeat are
    /// refused where there are counters.
    #[test]
    fn a_table_without_counters_lists_keys_and_repeated_narrow_positions_are_refused() {
        let mut b = Budget::new(usize::MAX);
        let mut t = CounterTable::new(usize::MAX, 0, [0; 4]);
        assert_eq!(t.row_index(0x40, 1, 2, &mut b), Ok(0));
        assert_eq!(t.row_index(0x44, 1, 2, &mut b), Ok(1));
        let rows: Vec<_> = t.iter().collect();
        assert_eq!(rows, vec![((0x40, 1, 2), vec![]), ((0x44, 1, 2), vec![])]);
        let repeated = std::panic::catch_unwind(|| CounterTable::new(8, 4, [0, 1, 1, 3]));
        assert!(repeated.is_err());
    }

    /// A budget too small for the next growth: the row that needs it is
    /// refused with the table's figures; the rows before stay.
    #[test]
    fn a_spent_budget_refuses_with_the_figures() {
        let mut b = Budget::new(64 * 1024);
        let mut t = CounterTable::new(usize::MAX, 4, [0, 1, 2, 3]);
        let mut n = 0u64;
        let e = loop {
            match t.row_index(n, 0, 0, &mut b) {
                Ok(_) => n += 1,
                Err(e) => break e,
            }
        };
        assert!(n > 100, "{n} rows fit");
        assert_eq!(
            (e.table, e.entries, e.limit),
            ("records", n as usize, Limit::Budget)
        );
        assert_eq!(e.bytes, t.bytes());
        assert!(e.wanted > 0 && b.used() <= 64 * 1024);
        assert!(e.describe().starts_with(crate::grow::TABLE_FULL));
        assert!(e.describe().contains("--memory"), "{}", e.describe());
        for i in 0..n {
            assert_eq!(t.row_index(i, 0, 0, &mut b), Ok(i as usize));
        }
    }
}
