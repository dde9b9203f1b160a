//! Memory that grows where nothing may allocate: the accountant's tables
//! (decoded instructions, stacks, counter rows, shadow frames) run inside
//! signal handlers and traced threads, where malloc and its locks are off
//! limits, yet a real program needs more of them than anyone can guess at
//! the start.
//!
//! - [`GrowVec`]: a dense array of `Copy` entries in an anonymous mapping
//!   (`MAP_NORESERVE`: the kernel commits pages as they are touched) that
//!   doubles with `mremap(MREMAP_MAYMOVE | MREMAP_FIXED)` into a mapping
//!   twice the size: the kernel moves the pages, no copy, no allocation.
//!   Every mapping lies in the far region (`memory::far_address`), away
//!   from where the program's own mappings go. Entries are addressed by index (a pointer into
//!   it is not kept across a push).
//! - [`Index`]: open-addressing slots (an entry's number plus one, 0 =
//!   free, and in the bits above the number some bits of the entry's
//!   hash: a probe passes another key's slot without reading that key) in
//!   their own mapping; growing maps a region twice the size, rehashes the
//!   dense keys into it and unmaps the old one.
//! - [`counters::CounterTable`]: counters per (instruction, stack,
//!   thread) on those two, rows numbered in order of first appearance:
//!   the one numbering the accountant counts in and a re-simulation of its
//!   trace numbers with.
//! - [`Budget`]: every mapping's bytes are charged to one budget (the
//!   capture's `--memory`); a growth the budget, a per-table bound
//!   (`--reserve`) or the kernel refuses is a [`Full`], which the
//!   accountant turns into a cut naming the table and the figures.
//!
//! This crate is the OS part of the accounting tables (`coldcache-account`
//! has no unsafe code, no statics and no libc): everything here that
//! touches the kernel is here.
//!
//! Mappings are made with raw system calls (`mmap`, `mremap`, `munmap`
//! through `syscall` instructions): async-signal-safe, no lock, and the
//! interrupted program's `errno` untouched.

use std::marker::PhantomData;

/// Where the far region starts (16 TiB).
pub const FAR_BASE: u64 = 0x1000_0000_0000;

/// Where the next mapping of ours that need not be near code goes: far
/// below where the kernel places the program's own mappings (top-down
/// from just under the stack) and far above its heap, so that captures
/// leave the addresses the program's `mmap` and `malloc` return as they
/// are without them (a library the program loads where it closed another
/// stays there). Written by any thread or handler that maps (one atomic
/// add), never reset.
static FAR: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(FAR_BASE);

/// The start of `len` bytes of the far region no earlier call handed out
/// (whether they are free is for the caller's `MAP_FIXED_NOREPLACE` to
/// find out). Async-signal-safe.
pub fn far_address(len: u64) -> u64 {
    FAR.fetch_add(
        len.next_multiple_of(1 << 21),
        std::sync::atomic::Ordering::Relaxed,
    )
}

/// Where the preloaded library's own allocator (`libcoldcache`'s
/// `alloc.rs`) maps its heap (32 TiB), for the reasons of [`FAR`].
pub const HEAP_BASE: u64 = 0x2000_0000_0000;

/// Where the library's allocator maps next. Written by the allocating
/// thread (one atomic add, under the allocator's lock), never reset.
static HEAP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(HEAP_BASE);

/// The start of `len` bytes of the allocator's region no earlier call
/// handed out (whether they are free is for the caller's
/// `MAP_FIXED_NOREPLACE` to find out).
pub fn heap_address(len: u64) -> u64 {
    HEAP.fetch_add(len, std::sync::atomic::Ordering::Relaxed)
}

/// Whether `start..end` overlaps what the far region and the allocator's
/// region handed out so far: every table, buffer and stack of ours that
/// need not be near code, and the library's heap. Async-signal-safe.
pub fn in_own_regions(start: u64, end: u64) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    (start < FAR.load(Relaxed) && end > FAR_BASE) || (start < HEAP.load(Relaxed) && end > HEAP_BASE)
}

pub mod counters;

/// A [`GrowVec`] index past its length: a bug of the caller's. Out of line,
/// so that a check costs the hot paths a compare and a branch never taken.
#[cold]
#[inline(never)]
fn out_of_bounds() -> ! {
    panic!("GrowVec index out of bounds")
}

/// Asks the CPU to bring the cache line holding `x` in ahead of its use: a
/// hint, nothing else (no effect where there is no such instruction). For
/// loops that visit rows in another order than they lie.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault;
    // `x` is a live reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (x as *const T).cast(),
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// A hash of 64 bits to an index, good enough for addresses.
#[inline]
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

const PAGE: usize = 4096;

/// A raw Linux system call with up to six arguments; the kernel's return
/// value (a negative errno on failure). No libc, no `errno`, and the
/// `syscall` instruction is in our own text (the dispatcher relies on it,
/// `jit::sigprocmask`).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub fn sys6(nr: i64, a: [u64; 6]) -> i64 {
    let ret: i64;
    // SAFETY: the `syscall` instruction with the Linux x86-64 convention;
    // the callers pass memory-management calls on mappings they own (or
    // new ones), which touch no memory of Rust's, or signal calls
    // (`rt_sigprocmask`, `rt_sigpending`, `rt_tgsigqueueinfo`) with their
    // sets and `siginfo` in their own live memory. RCX and R11 are
    // clobbered by the instruction.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub fn sys6(_nr: i64, _a: [u64; 6]) -> i64 {
    -(libc::ENOSYS as i64)
}

/// A fresh zeroed anonymous mapping of `bytes` (a page multiple), in the
/// far region (`memory::far_address`) so that the program's own mappings
/// land where they would without us (a table placed by the kernel took the
/// hole a `dlclose` left, and the library opened next went elsewhere);
/// anywhere when that fails.
fn map(bytes: usize) -> Option<*mut u8> {
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE) as u64;
    let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    for _ in 0..64 {
        let at = far_address(bytes as u64);
        let r = sys6(
            libc::SYS_mmap,
            [
                at,
                bytes as u64,
                rw,
                flags | libc::MAP_FIXED_NOREPLACE as u64,
                u64::MAX,
                0,
            ],
        );
        if r as u64 == at {
            return Some(at as *mut u8);
        }
        if !(-4095..0).contains(&r) {
            // An old kernel took the address as a hint only.
            unmap(r as *mut u8, bytes);
        }
    }
    let r = sys6(
        libc::SYS_mmap,
        [
            0,
            bytes as u64,
            (libc::PROT_READ | libc::PROT_WRITE) as u64,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE) as u64,
            u64::MAX, // fd -1
            0,        // offset
        ],
    );
    (!(-4095..0).contains(&r)).then_some(r as *mut u8)
}

/// `old` (of `old_bytes`) grown to `new_bytes`, moved: its pages move to
/// the start of a fresh mapping of `new_bytes` ([`map`], in the far
/// region), whose rest is zero. `None`: refused (the old one stays).
fn remap(old: *mut u8, old_bytes: usize, new_bytes: usize) -> Option<*mut u8> {
    let new = map(new_bytes)?;
    let r = sys6(
        libc::SYS_mremap,
        [
            old as u64,
            old_bytes as u64,
            old_bytes as u64,
            (libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED) as u64,
            new as u64,
            0,
        ],
    );
    if r as u64 != new as u64 {
        unmap(new, new_bytes);
        return None;
    }
    Some(new)
}

fn unmap(p: *mut u8, bytes: usize) {
    if bytes > 0 {
        sys6(libc::SYS_munmap, [p as u64, bytes as u64, 0, 0, 0, 0]);
    }
}

fn pages(bytes: usize) -> usize {
    bytes.div_ceil(PAGE).max(1) * PAGE
}

/// The memory every growing table of a capture draws on, in bytes of
/// mappings (an upper bound of what the kernel commits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    limit: usize,
    used: usize,
}

impl Budget {
    /// A budget of `limit` bytes (`usize::MAX`: unbounded).
    pub fn new(limit: usize) -> Budget {
        Budget { limit, used: 0 }
    }

    /// Bytes mapped now.
    #[inline]
    pub fn used(&self) -> usize {
        self.used
    }

    /// The bound.
    #[inline]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Charges `bytes` mapped outside a growth (a table's first page).
    #[inline]
    pub fn charge(&mut self, bytes: usize) {
        self.used = self.used.saturating_add(bytes);
    }

    fn room(&self) -> usize {
        self.limit.saturating_sub(self.used)
    }
}

/// What refused a table's growth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The memory budget (`--memory`) is spent.
    Budget,
    /// The table's own bound (`--reserve NAME=N`) is reached.
    Reserve,
    /// The kernel refused the mapping (address-space limit, no memory).
    System,
}

/// A table that could not grow: which, how big it was, what it asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full {
    /// The table (`instructions`, `stacks`, `records`, `depth`).
    pub table: &'static str,
    /// Entries it held.
    pub entries: usize,
    /// Bytes it had mapped.
    pub bytes: usize,
    /// Bytes more its next growth asked for.
    pub wanted: usize,
    /// What refused it.
    pub limit: Limit,
    /// The budget's bound and use when it was refused.
    pub budget: Budget,
}

/// The start of every cut a full table makes (`Dump::meta.cut_short`):
/// `record` and `attach` exit with a failure when they see it.
pub const TABLE_FULL: &str = "out of capture memory";

/// Bytes in a human unit (`1.5 MiB`).
pub fn human(bytes: u128) -> String {
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

impl Full {
    /// The cut's text (normal context: it allocates), starting with
    /// [`TABLE_FULL`]: the table, its figures and the flag that gives more.
    pub fn describe(&self) -> String {
        let had = format!(
            "the {} table ({} entries, {})",
            self.table,
            self.entries,
            human(self.bytes as u128)
        );
        let wanted = human(self.wanted as u128);
        match self.limit {
            Limit::Budget => format!(
                "{TABLE_FULL}: {had} needed about {wanted} more, beyond the memory budget of {} \
                 ({} used by all tables): run with a larger --memory",
                human(self.budget.limit as u128),
                human(self.budget.used as u128)
            ),
            Limit::Reserve => format!(
                "{TABLE_FULL}: {had} reached its bound --reserve {}={}: run with a larger \
                 --reserve {} (or without it: the tables then grow within --memory)",
                self.table, self.entries, self.table
            ),
            Limit::System => format!(
                "{TABLE_FULL}: {had} needed about {wanted} more and the system refused the \
                 mapping ({} used by all tables): raise `ulimit -v` or free memory, or run \
                 with a smaller --memory",
                human(self.budget.used as u128)
            ),
        }
    }
}

/// Why a growth was refused, before the table names itself.
#[derive(Clone, Copy, Debug)]
pub struct Refused {
    pub wanted: usize,
    pub limit: Limit,
}

impl Refused {
    /// The [`Full`] of table `table` (holding `entries` in `bytes`).
    pub fn full(self, table: &'static str, entries: usize, bytes: usize, b: &Budget) -> Full {
        Full {
            table,
            entries,
            bytes,
            wanted: self.wanted,
            limit: self.limit,
            budget: *b,
        }
    }
}

/// A mapping charged to a budget: `bytes` long at `ptr` (none when 0).
struct Region {
    ptr: *mut u8,
    bytes: usize,
}

impl Region {
    const EMPTY: Region = Region {
        ptr: std::ptr::null_mut(),
        bytes: 0,
    };

    /// Grows to at least `want` bytes, less if the budget leaves less but
    /// still at least `need` bytes.
    fn grow(&mut self, need: usize, want: usize, b: &mut Budget) -> Result<(), Refused> {
        let need = pages(need);
        let full = pages(want.max(need));
        let room = b.room().saturating_add(self.bytes);
        let new = full.min(room / PAGE * PAGE);
        if new < need {
            return Err(Refused {
                wanted: full - self.bytes,
                limit: Limit::Budget,
            });
        }
        let p = if self.bytes == 0 {
            map(new)
        } else {
            remap(self.ptr, self.bytes, new)
        };
        let Some(p) = p else {
            return Err(Refused {
                wanted: new - self.bytes,
                limit: Limit::System,
            });
        };
        b.used += new - self.bytes;
        self.ptr = p;
        self.bytes = new;
        Ok(())
    }

    fn release(&mut self, b: Option<&mut Budget>) {
        unmap(self.ptr, self.bytes);
        if let Some(b) = b {
            b.used -= self.bytes;
        }
        *self = Region::EMPTY;
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        unmap(self.ptr, self.bytes);
    }
}

/// A dense, growing array of `Copy` entries; see the module doc.
pub struct GrowVec<T: Copy> {
    region: Region,
    len: usize,
    cap: usize,
    max: usize,
    _t: PhantomData<T>,
}

// SAFETY: a GrowVec owns its mapping as a Vec owns its buffer.
unsafe impl<T: Copy + Send> Send for GrowVec<T> {}
// SAFETY: shared access only reads.
unsafe impl<T: Copy + Sync> Sync for GrowVec<T> {}

impl<T: Copy> GrowVec<T> {
    /// An empty array of at most `max` entries (nothing mapped yet).
    pub fn new(max: usize) -> Self {
        GrowVec {
            region: Region::EMPTY,
            len: 0,
            cap: 0,
            max,
            _t: PhantomData,
        }
    }

    /// Entries held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes mapped.
    pub fn bytes(&self) -> usize {
        self.region.bytes
    }

    /// Room for `n` more entries, growing if needed.
    pub fn reserve(&mut self, n: usize, b: &mut Budget) -> Result<(), Refused> {
        let need = self.len.saturating_add(n);
        if need <= self.cap {
            return Ok(());
        }
        let size = std::mem::size_of::<T>().max(1);
        if need > self.max {
            return Err(Refused {
                wanted: n.saturating_mul(size),
                limit: Limit::Reserve,
            });
        }
        let want = self
            .cap
            .saturating_mul(2)
            .max(need)
            .max(PAGE / size)
            .min(self.max);
        self.region
            .grow(need.saturating_mul(size), want.saturating_mul(size), b)?;
        self.cap = (self.region.bytes / size).min(self.max);
        Ok(())
    }

    /// Appends `v`; gives its index.
    #[inline]
    pub fn push(&mut self, v: T, b: &mut Budget) -> Result<usize, Refused> {
        if self.len == self.cap {
            self.reserve(1, b)?;
        }
        // SAFETY: len < cap: the slot lies in the mapping, aligned (the
        // mapping is page-aligned and slots are size_of::<T>() apart).
        unsafe { self.ptr().add(self.len).write(v) };
        self.len += 1;
        Ok(self.len - 1)
    }

    /// Appends `n` copies of `v` (room made first); gives the first index.
    pub fn extend(&mut self, v: T, n: usize, b: &mut Budget) -> Result<usize, Refused> {
        self.reserve(n, b)?;
        let first = self.len;
        for i in 0..n {
            // SAFETY: first + i < len + n <= cap, within the mapping.
            unsafe { self.ptr().add(first + i).write(v) };
        }
        self.len += n;
        Ok(first)
    }

    /// Removes the last entry.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: the entry at the old len - 1 was written.
        Some(unsafe { self.ptr().add(self.len).read() })
    }

    /// Forgets every entry (the mapping stays, for reuse).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Unmaps everything, giving its bytes back to `b`.
    pub fn release(&mut self, b: &mut Budget) {
        self.region.release(Some(b));
        self.len = 0;
        self.cap = 0;
    }

    #[inline]
    fn ptr(&self) -> *mut T {
        self.region.ptr as *mut T
    }

    /// The entries.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `len` written entries at the start of the live mapping.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len) }
    }

    /// The entries, mutable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as `as_slice`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.len) }
    }

    /// Entry `i`; panics unless `i < len` (checked in every build: one
    /// compare, the panic out of line).
    #[inline(always)]
    pub fn at(&self, i: usize) -> &T {
        if i >= self.len {
            out_of_bounds();
        }
        // SAFETY: `i < len`, checked above.
        unsafe { self.at_unchecked(i) }
    }

    /// Entry `i` without the bound check, for the tables' own probe loops.
    ///
    /// # Safety
    /// `i < len`.
    #[inline(always)]
    pub unsafe fn at_unchecked(&self, i: usize) -> &T {
        debug_assert!(i < self.len);
        // SAFETY: the caller's `i < len`: entry `i` is mapped and written.
        unsafe { &*self.ptr().add(i) }
    }

    /// Entry `i`, mutable; panics unless `i < len`.
    #[inline(always)]
    pub fn at_mut(&mut self, i: usize) -> &mut T {
        if i >= self.len {
            out_of_bounds();
        }
        // SAFETY: `i < len`, checked above; borrowed mutably through `self`.
        unsafe { &mut *self.ptr().add(i) }
    }

    /// Entries `i..i + n`, mutable; panics unless `i + n <= len`.
    #[inline(always)]
    pub fn run_mut(&mut self, i: usize, n: usize) -> &mut [T] {
        if i > self.len || n > self.len - i {
            out_of_bounds();
        }
        // SAFETY: `i + n <= len`, checked above.
        unsafe { self.run_mut_unchecked(i, n) }
    }

    /// Entries `i..i + n`, mutable, without the bound check.
    ///
    /// # Safety
    /// `i + n <= len`.
    #[inline(always)]
    pub unsafe fn run_mut_unchecked(&mut self, i: usize, n: usize) -> &mut [T] {
        debug_assert!(i + n <= self.len);
        if n == 0 {
            // Nothing mapped yet, perhaps: no slice from a null pointer (a
            // counter table of stride 0 numbers keys only).
            return &mut [];
        }
        // SAFETY: the caller's `i + n <= len`: `n` consecutive entries,
        // mapped and written, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr().add(i), n) }
    }

    /// The last entry.
    #[inline]
    pub fn last(&self) -> Option<&T> {
        self.len.checked_sub(1).map(|i| self.at(i))
    }
}

/// Open-addressing slots over a dense table's entries; see the module doc.
pub struct Index {
    region: Region,
    mask: usize,
}

// SAFETY: as GrowVec.
unsafe impl Send for Index {}
// SAFETY: shared access only reads.
unsafe impl Sync for Index {}

/// Slots of a new index.
const FIRST_SLOTS: usize = 1024;

impl Index {
    /// An index with no slots yet.
    pub fn new() -> Index {
        Index {
            region: Region::EMPTY,
            mask: 0,
        }
    }

    /// Bytes mapped.
    pub fn bytes(&self) -> usize {
        self.region.bytes
    }

    /// Slot `i`: an entry number plus one, 0 when free.
    #[inline(always)]
    pub fn slot(&self, i: usize) -> u32 {
        self.raw(i) & self.mask as u32
    }

    /// Slot `i` on a probe for a key whose hash is `hash`: 0 when free,
    /// [`Index::OTHER`] when it holds an entry whose hash differs from
    /// `hash` in the bits a slot keeps (so not the key's), else the entry's
    /// number plus one (whose key the caller compares).
    #[inline(always)]
    pub fn probe(&self, i: usize, hash: u64) -> u32 {
        let raw = self.raw(i);
        let low = self.mask as u32;
        if raw != 0 && (raw ^ Self::tag(hash)) & !low != 0 {
            return Self::OTHER;
        }
        raw & low
    }

    /// What [`Index::probe`] gives for a slot of another key's.
    pub const OTHER: u32 = u32::MAX;

    /// The bits of `hash` a slot keeps above the entry's number: its high
    /// half (the slot's position takes its low bits), of which the slots'
    /// count leaves the bits above `mask` (2^k slots hold entries below
    /// 2^(k-1), so the number plus one takes k bits at most).
    #[inline(always)]
    fn tag(hash: u64) -> u32 {
        (hash >> 32) as u32
    }

    /// Slot `i` as stored.
    #[inline(always)]
    fn raw(&self, i: usize) -> u32 {
        // SAFETY: `i` is masked by the callers' probes to below the slot
        // count, all of which lie in the mapping.
        unsafe { *(self.region.ptr as *const u32).add(i & self.mask) }
    }

    /// Slot `i` itself (for [`crate::prefetch`]).
    #[inline(always)]
    fn slot_ref(&self, i: usize) -> &u32 {
        // SAFETY: as `slot`.
        unsafe { &*(self.region.ptr as *const u32).add(i & self.mask) }
    }

    #[inline(always)]
    fn set(&mut self, i: usize, v: u32) {
        // SAFETY: as `slot`.
        unsafe { *(self.region.ptr as *mut u32).add(i & self.mask) = v }
    }

    /// The probe sequence's start for `hash` (valid only once slots exist:
    /// see [`Index::ready`]).
    #[inline(always)]
    pub fn start(&self, hash: u64) -> usize {
        hash as usize & self.mask
    }

    /// The slot after `i`.
    #[inline(always)]
    pub fn next(&self, i: usize) -> usize {
        (i + 1) & self.mask
    }

    /// The entry whose hash is `hash` and for which `is(entry)` holds (the
    /// caller compares its key), asked only of entries whose slot keeps
    /// `hash`'s bits ([`Index::probe`]); `Err`: none, with the free slot
    /// that ended the probe (where [`Index::fill`] puts it). The index
    /// must have slots ([`Index::ready`]).
    #[inline(always)]
    pub fn find(&self, hash: u64, mut is: impl FnMut(usize) -> bool) -> Result<usize, usize> {
        let mut i = self.start(hash);
        loop {
            match self.probe(i, hash) {
                0 => return Err(i),
                Self::OTHER => {}
                e => {
                    if is(e as usize - 1) {
                        return Ok(e as usize - 1);
                    }
                }
            }
            i = self.next(i);
        }
    }

    /// Unmaps the slots, giving their bytes back to `b`: an index with no
    /// slots, as new (its next [`Index::grow`] re-inserts every entry).
    pub fn release(&mut self, b: &mut Budget) {
        self.region.release(Some(b));
        self.mask = 0;
    }

    /// Whether the index has slots.
    #[inline(always)]
    pub fn ready(&self) -> bool {
        self.region.bytes != 0
    }

    /// Whether one more than `len` entries keep the load at or under one
    /// half (else [`Index::grow`] first).
    #[inline(always)]
    pub fn fits(&self, len: usize) -> bool {
        self.ready() && (len + 1) * 2 <= self.mask + 1
    }

    /// Marks free slot `i` as holding entry `entry`, whose hash is `hash`.
    #[inline(always)]
    pub fn fill(&mut self, i: usize, entry: usize, hash: u64) {
        debug_assert!(entry < self.mask);
        let low = self.mask as u32;
        self.set(i, (entry as u32 + 1) | (Self::tag(hash) & !low));
    }

    /// Doubles the slots (or makes the first) and re-inserts entries
    /// `0..len`, entry `e` hashing to `hash(e)`. On refusal nothing
    /// changes.
    pub fn grow(
        &mut self,
        len: usize,
        hash: impl Fn(usize) -> u64,
        b: &mut Budget,
    ) -> Result<(), Refused> {
        let slots = if self.ready() {
            (self.mask + 1) * 2
        } else {
            FIRST_SLOTS
        };
        let slots = slots.max(((len + 1) * 2).next_power_of_two());
        // At most 2^31 - 1 entries, so at most 2^32 slots: an entry's
        // number plus one then stays below [`Index::OTHER`] (at 2^33 slots
        // entry 2^32 - 2 would read as another key's slot).
        if len >= (1 << 31) - 1 {
            return Err(Refused {
                wanted: slots * 4,
                limit: Limit::Reserve,
            });
        }
        let mut fresh = Region::EMPTY;
        // The old slots stay mapped while the new ones fill: both count.
        fresh.grow(slots * 4, slots * 4, b)?;
        if fresh.bytes < slots * 4 {
            fresh.release(Some(b));
            return Err(Refused {
                wanted: slots * 4,
                limit: Limit::Budget,
            });
        }
        let old = std::mem::replace(&mut self.region, fresh);
        self.mask = slots - 1;
        // Each entry's slot is brought in a few entries ahead of its
        // insertion (the hashes kept in a ring meanwhile): the slots are
        // scattered over the new mapping, a cache miss each otherwise
        // (CPython's counter table: 14.7M rows, 3% of the capture's CPU in
        // growing its index).
        const AHEAD: usize = 16;
        let mut ring = [0u64; AHEAD];
        for (e, h) in ring.iter_mut().enumerate().take(len) {
            *h = hash(e);
            crate::prefetch(self.slot_ref(self.start(*h)));
        }
        for e in 0..len {
            let h = ring[e % AHEAD];
            if e + AHEAD < len {
                let ahead = hash(e + AHEAD);
                crate::prefetch(self.slot_ref(self.start(ahead)));
                ring[e % AHEAD] = ahead;
            }
            let mut i = self.start(h);
            while self.slot(i) != 0 {
                i = self.next(i);
            }
            self.fill(i, e, h);
        }
        let mut old = old;
        old.release(Some(b));
        Ok(())
    }
}

impl Default for Index {
    fn default() -> Self {
        Index::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The safe accessors check their bound in every build: an index past
    /// the length is a panic, not a read of whatever lies there.
    #[test]
    fn an_index_past_the_length_panics_in_release_too() {
        let mut b = Budget::new(usize::MAX);
        let mut v: GrowVec<u64> = GrowVec::new(1 << 20);
        for i in 0..3 {
            v.push(i, &mut b).unwrap();
        }
        assert_eq!(*v.at(2), 2);
        assert_eq!(v.run_mut(1, 2), &mut [1, 2]);
        assert!(std::panic::catch_unwind(|| *v.at(3)).is_err());
        let mut w = v;
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            w.run_mut(2, 2).len()
        }))
        .is_err());
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            w.run_mut(usize::MAX, 2).len()
        }))
        .is_err());
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| *w.at_mut(5))).is_err());
    }

    #[test]
    fn a_growvec_keeps_every_entry_across_growth_and_charges_the_budget() {
        let mut b = Budget::new(usize::MAX);
        let mut v = GrowVec::<u64>::new(usize::MAX);
        for i in 0..1_000_000u64 {
            assert_eq!(v.push(i * 3, &mut b).unwrap(), i as usize);
        }
        assert!(v
            .as_slice()
            .iter()
            .enumerate()
            .all(|(i, &x)| x == i as u64 * 3));
        assert_eq!(b.used(), v.bytes());
        assert!(v.bytes() >= 8_000_000 && v.bytes() <= 16_000_000 + PAGE);
        v.release(&mut b);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn a_growvec_stops_at_its_bound_and_at_the_budget() {
        let mut b = Budget::new(usize::MAX);
        let mut v = GrowVec::<u64>::new(3);
        for i in 0..3 {
            v.push(i, &mut b).unwrap();
        }
        let r = v.push(9, &mut b).unwrap_err();
        assert_eq!(r.limit, Limit::Reserve);
        assert_eq!(v.as_slice(), &[0, 1, 2]);
        // 3 pages of budget: 1536 entries, then the budget refuses.
        let mut b = Budget::new(3 * PAGE);
        let mut v = GrowVec::<u64>::new(usize::MAX);
        let mut n = 0;
        let r = loop {
            match v.push(n, &mut b) {
                Ok(_) => n += 1,
                Err(r) => break r,
            }
        };
        assert_eq!((n, r.limit), (3 * PAGE as u64 / 8, Limit::Budget));
        assert!(r.wanted > 0);
        assert_eq!(b.used(), 3 * PAGE);
    }

    /// An index holds at most 2^31 - 1 entries (2^32 slots), so that an
    /// entry's number plus one never reads as [`Index::OTHER`]: a growth
    /// for more is refused before anything is mapped.
    #[test]
    fn an_index_of_more_than_two_billion_entries_is_refused() {
        let mut b = Budget::new(usize::MAX);
        let mut idx = Index::new();
        let r = idx.grow((1 << 31) - 1, |_| 0, &mut b).unwrap_err();
        assert_eq!(r.limit, Limit::Reserve);
        assert!(!idx.ready());
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn an_index_grows_and_finds_every_entry_again() {
        let mut b = Budget::new(usize::MAX);
        let mut keys = GrowVec::<u64>::new(usize::MAX);
        let mut idx = Index::new();
        let h = |k: u64| k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for k in 0..200_000u64 {
            let key = k * 64 + 7;
            if !idx.fits(keys.len()) {
                let ks = &keys;
                idx.grow(ks.len(), |e| h(*ks.at(e)), &mut b).unwrap();
            }
            let mut i = idx.start(h(key));
            while idx.slot(i) != 0 {
                i = idx.next(i);
            }
            let e = keys.push(key, &mut b).unwrap();
            idx.fill(i, e, h(key));
        }
        assert!(idx.bytes() >= 200_000 * 2 * 4);
        // Every key is found by the plain walk (`slot`: numbers without
        // the hash bits) and by `probe`, which reads a key only where the
        // slot's hash bits match: with 2^19 slots, 13 bits, so nearly
        // only the key's own slot.
        let (mut passed, mut read) = (0, 0);
        for k in 0..200_000u64 {
            let key = k * 64 + 7;
            let mut i = idx.start(h(key));
            loop {
                let s = idx.slot(i);
                assert_ne!(s, 0, "key {key} lost");
                if *keys.at(s as usize - 1) == key {
                    assert_eq!(s as u64 - 1, k);
                    break;
                }
                i = idx.next(i);
            }
            let mut i = idx.start(h(key));
            loop {
                match idx.probe(i, h(key)) {
                    0 => panic!("key {key} lost by probe"),
                    Index::OTHER => passed += 1,
                    s => {
                        read += 1;
                        if *keys.at(s as usize - 1) == key {
                            assert_eq!(s as u64 - 1, k);
                            break;
                        }
                    }
                }
                i = idx.next(i);
            }
        }
        assert!(passed > 10_000, "{passed} slots of other keys passed");
        assert!(read < 200_000 + 100, "{read} keys read for 200,000");
        assert_eq!(b.used(), keys.bytes() + idx.bytes());
    }
}
