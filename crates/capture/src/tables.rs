//! Fixed-capacity tables the trap handler fills: decoded instructions,
//! interned call stacks and per-(instruction, stack, thread) counters.
//!
//! Every table reserves all its memory when it is created (at capture
//! start, outside any signal handler) and never grows: an insertion into a
//! full table returns `None`, and the engine then stops the capture cleanly.
//! Lookups are open addressing with linear probing over power-of-two
//! capacities, so no operation allocates, locks or panics.

use crate::model::Plan;
use iced_x86::Instruction;

/// A hash of 64 bits to an index, good enough for addresses.
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// How an instruction changes the flow, as far as the shadow stack cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Anything else.
    Other,
    /// A near call (the next instruction is the callee's first).
    Call,
    /// `syscall`: the instruction after it runs without a trap.
    Syscall,
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
#[derive(Default)]
pub struct DecodeCache {
    slot_of: Vec<u32>,
    keys: Vec<u64>,
    values: Vec<Decoded>,
    mask: usize,
    limit: usize,
}

impl DecodeCache {
    /// A cache holding up to `capacity` instructions.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(4);
        let slots = (capacity * 2).next_power_of_two();
        DecodeCache {
            slot_of: vec![FREE; slots],
            keys: Vec::with_capacity(capacity),
            values: Vec::with_capacity(capacity),
            mask: slots - 1,
            limit: capacity,
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

    #[inline]
    fn find(&self, ip: u64) -> Result<usize, usize> {
        let mut i = mix(ip) as usize & self.mask;
        loop {
            let r = self.slot_of[i];
            if r == FREE {
                return Err(i);
            }
            let r = r as usize - 1;
            if self.keys[r] == ip {
                return Ok(r);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The index of the cached instruction at `ip` (see [`DecodeCache::at`]).
    #[inline]
    pub fn index(&self, ip: u64) -> Option<usize> {
        self.find(ip).ok()
    }

    /// The cached instruction with this index.
    #[inline]
    pub fn at(&self, index: usize) -> &Decoded {
        &self.values[index]
    }

    /// Code in `start..end` may change: every instruction cached there
    /// (or reaching into it) is checked against the bytes in memory before
    /// it is used again, as code outside the modules always is.
    pub fn distrust(&mut self, start: u64, end: u64) {
        for (ip, d) in self.keys.iter().zip(&mut self.values) {
            if *ip < end && ip + u64::from(d.len) > start {
                d.trusted = false;
            }
        }
    }

    /// Caches `d` at `ip` (replacing what was there) and gives its index;
    /// `None` when full.
    pub fn insert_index(&mut self, ip: u64, d: Decoded) -> Option<usize> {
        match self.find(ip) {
            Ok(r) => {
                self.values[r] = d;
                Some(r)
            }
            Err(i) => {
                if self.values.len() >= self.limit {
                    return None;
                }
                self.slot_of[i] = self.values.len() as u32 + 1;
                self.keys.push(ip);
                self.values.push(d);
                Some(self.values.len() - 1)
            }
        }
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
    nodes: Vec<StackEntry>,
    index: Vec<u32>,
    mask: usize,
    limit: usize,
}

impl StackTable {
    /// A table for up to `capacity` distinct stacks.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(2);
        let slots = (capacity * 2).next_power_of_two();
        let mut nodes = Vec::with_capacity(capacity);
        nodes.push(StackEntry::default());
        StackTable {
            nodes,
            index: vec![FREE; slots],
            mask: slots - 1,
            limit: capacity,
        }
    }

    fn hash(e: &StackEntry) -> usize {
        mix(e.call_site ^ mix(e.callee) ^ (u64::from(e.parent) << 40)) as usize
    }

    /// The id of `parent` extended by one call; `None` when the table is full.
    pub fn intern(&mut self, parent: u32, call_site: u64, callee: u64) -> Option<u32> {
        let e = StackEntry {
            parent,
            call_site,
            callee,
        };
        let mut i = Self::hash(&e) & self.mask;
        loop {
            let id = self.index[i];
            if id == FREE {
                break;
            }
            if self.nodes[id as usize - 1] == e {
                return Some(id - 1);
            }
            i = (i + 1) & self.mask;
        }
        if self.nodes.len() >= self.limit {
            return None;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(e);
        self.index[i] = id + 1;
        Some(id)
    }

    /// Every stack, by id.
    pub fn nodes(&self) -> &[StackEntry] {
        &self.nodes
    }
}

/// Counters per (instruction, stack, thread).
pub struct CounterTable {
    keys: Vec<(u64, u32, u32)>,
    slot_of: Vec<u32>,
    values: Vec<u64>,
    stride: usize,
    mask: usize,
    len: usize,
    limit: usize,
}

/// An empty slot of an index. Slots hold an entry's number plus one, so
/// that an index starts as zeroed memory: a fresh mapping the kernel fills
/// with zeros page by page as it is used, instead of being written whole
/// when the capture starts (it is megabytes: most of what a start cost).
const FREE: u32 = 0;

impl CounterTable {
    /// A table for up to `capacity` records of `stride` counters each.
    pub fn new(capacity: usize, stride: usize) -> Self {
        let capacity = capacity.max(1);
        let slots = (capacity * 2).next_power_of_two();
        CounterTable {
            keys: Vec::with_capacity(capacity),
            slot_of: vec![FREE; slots],
            values: Vec::with_capacity(capacity * stride),
            stride,
            mask: slots - 1,
            len: 0,
            limit: capacity,
        }
    }

    /// The counters of a key, created zeroed on first use; `None` when the
    /// table is full.
    #[inline]
    pub fn counters(&mut self, ip: u64, stack: u32, thread: u32) -> Option<&mut [u64]> {
        let r = self.row_index(ip, stack, thread)?;
        Some(self.row(r))
    }

    /// The counters of row `r` (an index [`CounterTable::row_index`] gave;
    /// rows never move).
    #[inline]
    pub fn row(&mut self, r: usize) -> &mut [u64] {
        let s = r * self.stride;
        &mut self.values[s..s + self.stride]
    }

    /// The row of a key, created zeroed on first use; `None` when the table
    /// is full.
    #[inline]
    pub fn row_index(&mut self, ip: u64, stack: u32, thread: u32) -> Option<usize> {
        let key = (ip, stack, thread);
        let mut i = mix(ip ^ (u64::from(stack) << 32) ^ u64::from(thread).rotate_left(17)) as usize
            & self.mask;
        loop {
            let r = self.slot_of[i];
            if r == FREE {
                break;
            }
            let r = r as usize - 1;
            if self.keys[r] == key {
                return Some(r);
            }
            i = (i + 1) & self.mask;
        }
        if self.len >= self.limit {
            return None;
        }
        let r = self.len;
        self.len += 1;
        self.slot_of[i] = r as u32 + 1;
        self.keys.push(key);
        self.values.extend(std::iter::repeat_n(0, self.stride));
        Some(r)
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no record exists.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every record: key and counters.
    pub fn iter(&self) -> impl Iterator<Item = ((u64, u32, u32), &[u64])> {
        self.keys
            .iter()
            .copied()
            .zip(self.values.chunks_exact(self.stride.max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_interning_is_stable_and_bounded() {
        let mut t = StackTable::new(3);
        let a = t.intern(0, 0x10, 0x100).unwrap();
        let b = t.intern(a, 0x20, 0x200).unwrap();
        assert_eq!((a, b), (1, 2));
        assert_eq!(t.intern(0, 0x10, 0x100), Some(1));
        assert_eq!(
            t.intern(0, 0x30, 0x300),
            None,
            "capacity 3 includes the root"
        );
        assert_eq!(t.nodes()[2].parent, 1);
    }

    #[test]
    fn counters_accumulate_per_key_and_stop_when_full() {
        let mut t = CounterTable::new(2, 3);
        t.counters(1, 0, 0).unwrap()[0] += 5;
        t.counters(1, 1, 0).unwrap()[1] += 1;
        t.counters(1, 0, 0).unwrap()[0] += 2;
        assert!(t.counters(2, 0, 0).is_none());
        let v: Vec<_> = t.iter().map(|(k, c)| (k, c.to_vec())).collect();
        assert_eq!(
            v,
            vec![((1, 0, 0), vec![7, 0, 0]), ((1, 1, 0), vec![0, 1, 0])]
        );
    }

    #[test]
    fn the_counter_table_allocates_nothing_after_creation() {
        let mut t = CounterTable::new(100, 4);
        let (kp, vp) = (t.keys.as_ptr(), t.values.as_ptr());
        for i in 0..100u64 {
            t.counters(i * 64, (i % 3) as u32, 0).unwrap()[0] += 1;
        }
        assert_eq!((kp, vp), (t.keys.as_ptr(), t.values.as_ptr()));
    }
}
