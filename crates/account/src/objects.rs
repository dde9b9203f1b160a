//! Objects (issue 32): which heap block, by allocation site, or which
//! mapping each data access of a capture touched. Opt-in (`record
//! --objects`, `COLDCACHE_OBJECTS=1`): [`crate::account::Accountant`]
//! owns an [`Objects`] only then.
//!
//! The allocator is observed, not wrapped: a wrapper's instructions would
//! be traced and counted like the program's. At the start the front end
//! resolves the entry points the program's calls reach
//! (`coldcache_capture::objects::resolve_allocators`: the global definitions of the mapped files, in
//! the dynamic linker's search order); then, per traced instruction the
//! accountant counts:
//! - at an allocator's first instruction, on a thread not already inside
//!   one (nested calls, `realloc` calling `malloc`, `new` calling
//!   `malloc`, `delete` calling `free`, count once, as the outermost),
//!   its arguments are noted (RDI, RSI, RDX: size, count, old block, out
//!   pointer) with RSP, which holds the return address, and the current
//!   call stack: the allocation site. A free (`free`, `operator delete`)
//!   removes its block there;
//! - at a `ret` executed with that same RSP (the one that returns to the
//!   allocator's caller, in whichever function a tail call left it), RAX is
//!   the block (`posix_memalign`: RAX = 0 and the block in its out
//!   pointer); `realloc` moves its block. A `ret` above it abandons the
//!   call (a `longjmp` out: counted in `unreturned`).
//!
//! Trap mode sees every register. Fast mode records only what each
//! instruction's plan reads, so the translator adds RDI/RSI/RDX to an
//! allocator entry's record and RAX to every `ret`'s (`coldcache_capture::objects::widen`; an
//! instruction whose record has no room for them is left to the trap
//! engine), and the replay sees the same values: both modes count the same.
//!
//! Live blocks are kept in a treap (start → end, site) in memory mapped
//! through [`crate::grow`] (allocation-free once built, within the
//! budget); a data access goes to the block containing its first byte
//! (a one-entry memo first: the last block found), else to a thread's
//! own stack frame, else to the mapping made in the capture that holds it
//! (below), else to the global that holds it (below), else to the mapping
//! of the start that holds it (sorted, binary search), else to
//! `unmapped`.
//!
//! Mappings: `mmap`, `munmap` and `mremap` are observed as the allocators
//! are, inside an allocator call too (a second pending call per thread);
//! each mapping made is a site of its `mmap`'s call stack, cut into pieces
//! by `munmap` (a sorted array in grow memory). When a window opens, the
//! anonymous memory and brk heap mapped since the start while nothing was
//! traced become two more sites ([`Objects::mapped_before_window`]).
//! Counts per site and per mapping: accesses per side at each serving
//! level, the dump's `OBJS` section (`coldcache_dump::Objects`). Naming
//! (functions of a site, which mapping is whose stack) is the views'.
//!
//! A site's accesses are also counted per (site, instruction) (section
//! `OBJI`), so that the views join each site with the type and field the
//! resolver gave its instructions: a direct-mapped memo by instruction
//! address (its last site and pair) in front of an open-addressing table
//! in grow memory (charged to the budget; an access whose pair cannot be
//! added is counted in `dropped`, shown by the views). So are a mapping's
//! (key [`REGION_PAIR`] | index), so that the heap allocated before the
//! window, anonymous arenas and the modules' globals are typed too. A
//! thread's access to its own stack is counted in the frame holding it
//! and in a pair of key [`LOCAL_PAIR`] | (its distance below the frame's
//! CFA) and "instruction" the frame function's pc (the accessing
//! instruction in the innermost frame, the call being made in the
//! others), from which the resolver names the local variable there.
//!
//! Globals: the data symbols of the mapped modules' symbol tables
//! ([`Objects::with_globals`], read by the front end when the capture is
//! prepared) are objects of their own. An access in a mapping that holds
//! any, outside every block, goes to the global containing its first byte
//! (a one-entry memo, then a binary search among the mapping's globals),
//! counted per instruction too; the mapping keeps only the accesses
//! outside its globals. Blocks come first: a pool of the program's own
//! in its `.bss` whose blocks are observed is counted by block.

use crate::grow::{Budget, GrowVec, Index};
use crate::model::Machine;
use coldcache_dump::{
    AllocSite, FrameCounts, Globals, ObjectCounts, ObjectGlobal, ObjectRegion, SiteInstruction,
    SiteInstructions, SlotCounts, StackFrames,
};
use coldcache_sim::{AccessKind, AccessResult, Side, MAX_LEVELS};
use iced_x86::Register;

/// What an allocator entry point does with its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Size in RDI (`malloc`, `valloc`, `pvalloc`).
    Malloc = 1,
    /// RDI × RSI.
    Calloc,
    /// Old block in RDI, size in RSI.
    Realloc,
    /// Old block in RDI, RSI × RDX.
    Reallocarray,
    /// Block in RDI (`free`, every `operator delete`).
    Free,
    /// Out pointer in RDI, size in RDX, result 0 on success.
    PosixMemalign,
    /// Size in RSI (`aligned_alloc`, `memalign`).
    Aligned,
    /// Size in RDI (`operator new`, every form).
    New,
    /// Size in RDI (`operator new[]`, every form).
    NewArray,
    /// CPython's object allocator (`PyObject_Malloc`, `PyMem_Malloc`: both
    /// pymalloc, which carves small blocks out of arenas it maps itself,
    /// never through `malloc`): size in RDI.
    PyMalloc,
    /// `PyObject_Calloc`, `PyMem_Calloc`: RDI × RSI.
    PyCalloc,
    /// `PyObject_Realloc`, `PyMem_Realloc`: old block in RDI, size in RSI.
    PyRealloc,
    /// Block in RSI (a pool's member function, `free(this, block)`: `record
    /// --allocator NAME=free2`).
    FreeSecond,
    /// A mapping (`mmap`): length in RSI, the mapping in RAX. Mapping
    /// calls are observed inside allocator calls too (see the module doc).
    Mmap,
    /// Address in RDI, length in RSI: the range is unmapped at the entry.
    Munmap,
    /// Old address in RDI, old length in RSI, new length in RDX, the
    /// mapping in RAX.
    Mremap,
    /// Not an entry point: the anonymous memory mapped after the capture's
    /// start and before a window opened (`--function`), when nothing was
    /// traced ([`Objects::mapped_before_window`]).
    Earlier,
    /// Not an entry point: the brk heap grown after the capture's start
    /// and before a window opened.
    EarlierHeap,
}

/// An allocator of the program's own (`record --allocator NAME=KIND`): a
/// pool, an arena, a game engine's allocator. The front end found `name`
/// at ELF address `address` of `module`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomAllocator {
    /// Its symbol, as the sites are named.
    pub name: String,
    /// What it does with its arguments.
    pub kind: Kind,
    /// The file defining it (a canonical path, as `/proc/self/maps` names
    /// files).
    pub module: String,
    /// Its ELF address in that file.
    pub address: u64,
}

/// The kinds a user may give an allocator of the program's own, and what
/// each means (`record --allocator NAME=KIND`).
pub const USER_KINDS: &[(&str, Kind, &str)] = &[
    ("malloc", Kind::Malloc, "size in the first argument"),
    (
        "calloc",
        Kind::Calloc,
        "count and size, their product allocated",
    ),
    ("realloc", Kind::Realloc, "old block, then size"),
    ("free", Kind::Free, "block in the first argument"),
    (
        "size2",
        Kind::Aligned,
        "size in the second argument (aligned_alloc, or a member function alloc(this, size))",
    ),
    (
        "free2",
        Kind::FreeSecond,
        "block in the second argument (a member function free(this, block))",
    ),
];

/// Parses `COLDCACHE_ALLOCATORS`: entries separated by `\x1e`, each
/// `NAME \x1f KIND \x1f MODULE \x1f HEXADDRESS`.
pub fn parse_custom(s: &str) -> Result<Vec<CustomAllocator>, String> {
    s.split('\x1e')
        .filter(|e| !e.is_empty())
        .map(|e| {
            let f: Vec<&str> = e.split('\x1f').collect();
            let [name, kind, module, address] = f[..] else {
                return Err(format!(
                    "COLDCACHE_ALLOCATORS entry {e:?} is not NAME, KIND, MODULE, ADDRESS"
                ));
            };
            let kind = USER_KINDS
                .iter()
                .find(|k| k.0 == kind)
                .map(|k| k.1)
                .ok_or_else(|| format!("COLDCACHE_ALLOCATORS: unknown kind {kind:?} for {name}"))?;
            let address = u64::from_str_radix(address.trim_start_matches("0x"), 16)
                .map_err(|_| format!("COLDCACHE_ALLOCATORS: address {address:?} of {name}"))?;
            Ok(CustomAllocator {
                name: name.to_string(),
                kind,
                module: module.to_string(),
                address,
            })
        })
        .collect()
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Malloc,
            2 => Kind::Calloc,
            3 => Kind::Realloc,
            4 => Kind::Reallocarray,
            5 => Kind::Free,
            6 => Kind::PosixMemalign,
            7 => Kind::Aligned,
            8 => Kind::New,
            9 => Kind::NewArray,
            10 => Kind::PyMalloc,
            11 => Kind::PyCalloc,
            12 => Kind::PyRealloc,
            13 => Kind::FreeSecond,
            14 => Kind::Mmap,
            15 => Kind::Munmap,
            16 => Kind::Mremap,
            17 => Kind::Earlier,
            18 => Kind::EarlierHeap,
            _ => return None,
        })
    }

    /// How a site allocated by this kind is named.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Malloc => "malloc",
            Kind::Calloc => "calloc",
            Kind::Realloc | Kind::Reallocarray => "realloc",
            Kind::Free | Kind::FreeSecond => "free",
            Kind::PosixMemalign => "posix_memalign",
            Kind::Aligned => "aligned_alloc",
            Kind::New => "new",
            Kind::NewArray => "new[]",
            Kind::PyMalloc => "PyObject_Malloc",
            Kind::PyCalloc => "PyObject_Calloc",
            Kind::PyRealloc => "PyObject_Realloc",
            Kind::Mmap => "mmap",
            Kind::Munmap => "munmap",
            Kind::Mremap => "mremap",
            Kind::Earlier => coldcache_dump::MAPPED_BEFORE_WINDOW,
            Kind::EarlierHeap => coldcache_dump::HEAP_BEFORE_WINDOW,
        }
    }

    /// Whether this kind makes or removes mappings, not blocks.
    pub fn is_mapping(self) -> bool {
        matches!(
            self,
            Kind::Mmap | Kind::Munmap | Kind::Mremap | Kind::Earlier | Kind::EarlierHeap
        )
    }
}

/// The entry points observed, by symbol name.
pub const ALLOCATORS: &[(&str, Kind)] = &[
    ("malloc", Kind::Malloc),
    ("calloc", Kind::Calloc),
    ("realloc", Kind::Realloc),
    ("reallocarray", Kind::Reallocarray),
    ("free", Kind::Free),
    ("posix_memalign", Kind::PosixMemalign),
    ("aligned_alloc", Kind::Aligned),
    ("memalign", Kind::Aligned),
    ("valloc", Kind::Malloc),
    ("pvalloc", Kind::Malloc),
    ("_Znwm", Kind::New),
    ("_ZnwmRKSt9nothrow_t", Kind::New),
    ("_ZnwmSt11align_val_t", Kind::New),
    ("_ZnwmSt11align_val_tRKSt9nothrow_t", Kind::New),
    ("_Znam", Kind::NewArray),
    ("_ZnamRKSt9nothrow_t", Kind::NewArray),
    ("_ZnamSt11align_val_t", Kind::NewArray),
    ("_ZnamSt11align_val_tRKSt9nothrow_t", Kind::NewArray),
    ("_ZdlPv", Kind::Free),
    ("_ZdlPvm", Kind::Free),
    ("_ZdlPvRKSt9nothrow_t", Kind::Free),
    ("_ZdlPvSt11align_val_t", Kind::Free),
    ("_ZdlPvmSt11align_val_t", Kind::Free),
    ("_ZdlPvSt11align_val_tRKSt9nothrow_t", Kind::Free),
    ("_ZdaPv", Kind::Free),
    ("_ZdaPvm", Kind::Free),
    ("_ZdaPvRKSt9nothrow_t", Kind::Free),
    ("_ZdaPvSt11align_val_t", Kind::Free),
    ("_ZdaPvmSt11align_val_t", Kind::Free),
    ("_ZdaPvSt11align_val_tRKSt9nothrow_t", Kind::Free),
    // CPython (libpython or a static interpreter): most of its objects
    // come from pymalloc's arenas, which `malloc` never sees.
    ("PyObject_Malloc", Kind::PyMalloc),
    ("PyObject_Calloc", Kind::PyCalloc),
    ("PyObject_Realloc", Kind::PyRealloc),
    ("PyObject_Free", Kind::Free),
    ("PyMem_Malloc", Kind::PyMalloc),
    ("PyMem_Calloc", Kind::PyCalloc),
    ("PyMem_Realloc", Kind::PyRealloc),
    ("PyMem_Free", Kind::Free),
    // Mappings made in the window: pymalloc's arenas, malloc's large
    // blocks and its arenas for threads, a program's own pools.
    ("mmap", Kind::Mmap),
    ("mmap64", Kind::Mmap),
    ("munmap", Kind::Munmap),
    ("mremap", Kind::Mremap),
];

/// How many allocator entry points a capture observes at most.
pub const MAX_ENTRIES: usize = 64;

/// A site's naming byte for an allocator of the program's own: this bit
/// plus the entry's index.
pub const OWN: u8 = 0x80;

/// Adds `b` to `a`.
fn add(a: &mut Counts, b: &Counts) {
    for (x, y) in a.served.iter_mut().flatten().zip(b.served.iter().flatten()) {
        *x += y;
    }
    for (x, y) in a.coherence.iter_mut().zip(&b.coherence) {
        *x += y;
    }
}

/// Takes `b`, a part of `a`, out of it.
fn sub(a: &mut Counts, b: &Counts) {
    for (x, y) in a.served.iter_mut().flatten().zip(b.served.iter().flatten()) {
        *x = x.saturating_sub(*y);
    }
    for (x, y) in a.coherence.iter_mut().zip(&b.coherence) {
        *x = x.saturating_sub(*y);
    }
}

/// Accesses of one object per side and serving level, and the coherence
/// invalidations they sent (of those, false sharing).
#[derive(Clone, Copy, Default)]
struct Counts {
    served: [[u64; MAX_LEVELS + 1]; 2],
    coherence: [u64; 2],
}

impl Counts {
    #[inline(always)]
    fn add(&mut self, side: usize, r: &AccessResult) {
        self.served[side][r.served_by.slot()] += 1;
        self.coherence[0] += u64::from(r.invalidations);
        self.coherence[1] += u64::from(r.false_sharing);
    }

    fn to_dump(self, levels: usize) -> ObjectCounts {
        let side = |s: &[u64; MAX_LEVELS + 1]| {
            let mut v: Vec<u64> = s[..levels].to_vec();
            v.push(s[MAX_LEVELS]);
            v
        };
        ObjectCounts {
            served: [side(&self.served[0]), side(&self.served[1])],
            coherence: self.coherence,
        }
    }
}

#[derive(Clone, Copy)]
struct SiteRow {
    stack: u32,
    kind: u8,
    blocks: u64,
    bytes: u64,
    freed: u64,
    counts: Counts,
}

/// A mapping of the start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// Permissions as `/proc/self/maps` gives them.
    pub perms: String,
    /// Path or pseudo-name.
    pub path: String,
}

struct Region {
    map: Mapping,
    may_hold_blocks: bool,
    /// A block or a mapping made in the capture lies in it: it may hold
    /// blocks for good, even when a thread's stack is found there.
    claimed: bool,
    thread: u32,
    tls: u32,
    /// The globals it overlaps: `globals[lo..hi]`.
    globals: (u32, u32),
    counts: Counts,
}

/// Entries of the per-instruction memo (direct-mapped by address).
const IP_MEMO: usize = 1024;

#[inline(always)]
fn ip_slot(ip: u64) -> usize {
    ((ip ^ (ip >> 10)) as usize) & (IP_MEMO - 1)
}

/// The block an instruction touched last: valid while its node's `gen`
/// is still `gen` (a node freed gets 0, reused a new one).
#[derive(Clone, Copy, Default)]
struct IpMemo {
    start: u64,
    end: u64,
    site: u32,
    node: u32,
    gen: u32,
}

/// A pair's key for a mapping (not a site): the mapping's index with this
/// bit.
const REGION_PAIR: u32 = 1 << 31;

/// A pair's key for a global: its index with this bit and
/// [`REGION_PAIR`]. In `region_memo`'s key (never a pair's) the same bit
/// says that the mapping holds globals.
const GLOBAL_PAIR: u32 = 1 << 30;

/// The index part of a key.
const INDEX: u32 = GLOBAL_PAIR - 1;

/// A pair's key for a stack slot: [`GLOBAL_PAIR`] alone, with the slot's
/// distance below its frame's CFA in the index part; the pair's `ip` is
/// the pc of the frame's function (see [`frame_of`]). Slots further than
/// this below the CFA are not kept per slot.
const LOCAL_PAIR: u32 = GLOBAL_PAIR;

/// Most stack-slot pairs kept (one per (pc, slot): a loop over a large
/// stack buffer makes one per element), so that they never take the
/// budget the capture's own tables need; the rest are counted in
/// `locals_dropped`.
const MAX_LOCAL_PAIRS: u32 = 1 << 17;

/// Most (address, instruction) entries kept of what no object held
/// ([`Objects::late_mappings`]); the rest stay `unmapped`.
const MAX_LATE: usize = 1 << 16;

/// A shadow frame of a traced thread (the accountant's call stack): its
/// call stack's id, the address of its return address and the call that
/// made it.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    /// The stack id of the path ending in this frame's function.
    pub stack: u32,
    /// Where its return address lies (RSP at its entry).
    pub ret_slot: u64,
    /// The call site in its caller's code (its return address minus 1):
    /// the caller's pc while this frame is live, at which the resolver
    /// reads the caller's locals.
    pub site: u64,
}

/// The thread making an access: its number in the dump (serial), its
/// slot, and its shadow frames, outermost first.
pub type Thread<'a> = (u32, usize, &'a [Frame]);

/// The frame of `frames` (outermost first) whose stack space holds `addr`:
/// the innermost whose return-address slot lies at or above `addr` (a
/// frame owns its return address and everything below it down to its
/// callee's). `None` above the outermost (frames entered before what the
/// capture's unwinding found). With it: the pc its function is at (`ip`,
/// the instruction making the access, for the innermost; the call site of
/// the frame above it for the others) and its CFA (the return address
/// slot plus 8).
#[inline(always)]
fn frame_of(frames: &[Frame], addr: u64, ip: u64) -> Option<(u32, u64, u64)> {
    let last = frames.last()?;
    if addr < last.ret_slot.wrapping_add(8) {
        return Some((last.stack, ip, last.ret_slot.wrapping_add(8)));
    }
    let k = frames.partition_point(|f| addr < f.ret_slot.wrapping_add(8));
    let f = frames[k.checked_sub(1)?];
    Some((f.stack, frames[k].site, f.ret_slot.wrapping_add(8)))
}

/// A data symbol of a module, at its address in the process: what
/// [`Objects::with_globals`] takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalSymbol {
    /// First address.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// The symbol's name.
    pub name: String,
}

/// A global of the capture: its range, its mapping, its accesses.
#[derive(Clone, Copy)]
struct Global {
    start: u64,
    end: u64,
    /// Index into `Objects::global_names`.
    name: u32,
    /// The mapping that holds its first byte (or the first it overlaps).
    region: u32,
    counts: Counts,
}

/// The accesses of one site (or one mapping, [`REGION_PAIR`], or one
/// global, [`REGION_PAIR`] | [`GLOBAL_PAIR`]) by one instruction.
#[derive(Clone, Copy)]
struct Pair {
    ip: u64,
    site: u32,
    counts: Counts,
}

/// The pair an instruction found last (`site` `u32::MAX`: none).
#[derive(Clone, Copy)]
struct PairMemo {
    ip: u64,
    site: u32,
    pair: u32,
}

const NO_PAIR: PairMemo = PairMemo {
    ip: 0,
    site: u32::MAX,
    pair: 0,
};

#[inline(always)]
fn pair_hash(ip: u64, site: u32) -> u64 {
    let mut x = ip ^ u64::from(site).rotate_left(40);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

/// The accesses of one instruction to one address outside every object
/// known when they ran (`unmapped`), named at the capture's end
/// ([`Objects::late_mappings`]): a library's data, mapped by the dynamic
/// linker during the capture.
#[derive(Clone, Copy)]
struct LateAccess {
    addr: u64,
    ip: u64,
    counts: Counts,
}

#[inline(always)]
fn late_hash(addr: u64, ip: u64) -> u64 {
    pair_hash(addr ^ ip.rotate_left(17), 0x5ee1)
}

/// A treap node: a live block.
#[derive(Clone, Copy)]
struct Node {
    /// Which allocation the node holds now (0: none).
    gen: u32,
    start: u64,
    end: u64,
    site: u32,
    prio: u32,
    left: u32,
    right: u32,
}

const NIL: u32 = u32::MAX;

/// An allocator call in progress on a thread (`kind` 0: none).
#[derive(Clone, Copy, Default)]
struct Pending {
    kind: u8,
    /// How its site is named: the kind's number, or [`OWN`] plus the
    /// entry's index for an allocator of the program's own.
    naming: u8,
    rsp: u64,
    size: u64,
    old: u64,
    out: u64,
    stack: u32,
    /// A mapping call in progress (`map.kind` 0: none), inside an
    /// allocator call or not.
    map: MapCall,
}

/// A mapping call in progress on a thread (`mmap`, `mremap`).
#[derive(Clone, Copy, Default)]
struct MapCall {
    kind: u8,
    rsp: u64,
    /// The old mapping (`mremap`).
    old: u64,
    old_len: u64,
    len: u64,
    stack: u32,
}

/// A range of a mapping made in the capture, still mapped: its site and
/// the mapping it is part of (an `munmap` in its middle leaves two).
#[derive(Clone, Copy)]
struct Piece {
    start: u64,
    end: u64,
    site: u32,
    mapping: u32,
}

/// A length as the kernel maps it: whole pages.
fn pages(len: u64) -> u64 {
    len.saturating_add(4095) & !4095
}

/// The object state of a capture; see the module doc.
pub struct Objects {
    on: bool,
    /// Address, kind, naming (see [`Pending::naming`]).
    entries: [(u64, u8, u8); MAX_ENTRIES],
    names: Vec<&'static str>,
    /// A 1024-bit filter of the entries' addresses, so that an instruction
    /// that is none is told apart with one load.
    filter: [u64; 16],
    /// The same of the mapping entries alone: inside an allocator call
    /// only they count.
    map_filter: [u64; 16],
    pending: Vec<Pending>,
    nodes: GrowVec<Node>,
    free_node: u32,
    root: u32,
    seed: u32,
    /// Stack id → site index + 1.
    site_of: GrowVec<u32>,
    /// The same for sites of mappings (a block's site and a mapping's are
    /// never one row).
    map_site_of: GrowVec<u32>,
    /// The mapped ranges of the mappings made in the capture, by address,
    /// none overlapping.
    pieces: GrowVec<Piece>,
    /// Per mapping made in the capture, its pieces still mapped.
    mapping_pieces: GrowVec<u32>,
    /// The last piece found: start, end, site.
    piece_memo: (u64, u64, u32),
    /// Per thread slot, the stack of a thread whose stack is no mapping of
    /// the start (made after it: a pool's workers), taken from the mapping
    /// made in the capture or before its window that held its stack
    /// pointer when its tracing started (`(0, 0)`: none).
    late_stacks: Vec<(u64, u64)>,
    /// The site of the anonymous memory mapped before a window
    /// ([`NIL`]: none yet).
    earlier_site: [u32; 2],
    sites: GrowVec<SiteRow>,
    regions: Vec<Region>,
    unmapped: Counts,
    /// Of `unmapped`, by (address, instruction), for
    /// [`Objects::late_mappings`] (in grow memory, charged to the budget;
    /// what does not fit stays in `unmapped` only).
    late: GrowVec<LateAccess>,
    late_index: Index,
    /// The last block found: start, end, site.
    memo: (u64, u64, u32),
    /// Per instruction (by address), the block it touched last.
    ip_memo: Vec<IpMemo>,
    /// The last `Node::gen` given.
    gen: u32,
    /// Accesses per (site, instruction), in order of first access.
    pairs: GrowVec<Pair>,
    pair_index: Index,
    /// Per instruction (by address), its last pair.
    pair_memo: Vec<PairMemo>,
    /// Site accesses not kept per instruction (the pair table full).
    pairs_dropped: Counts,
    /// Mapping accesses not kept per instruction.
    regions_dropped: Counts,
    /// The modules' globals, by address, none overlapping.
    globals: Vec<Global>,
    global_names: Vec<String>,
    /// The last global found: start, end, index.
    global_memo: (u64, u64, u32),
    /// Global accesses not kept per instruction.
    globals_dropped: Counts,
    /// Accesses of a thread to its own stack, by the stack id of the frame
    /// that holds the address.
    frames: GrowVec<Counts>,
    /// Of those, accesses not kept per frame (the table could not grow):
    /// counted in the stack's mapping.
    frames_dropped: u64,
    /// Frame accesses not kept per stack slot (the pair table full, or
    /// further than [`INDEX`] below the CFA): in their frame's row only.
    locals_dropped: Counts,
    /// Stack-slot pairs made (at most [`MAX_LOCAL_PAIRS`]).
    local_pairs: u32,
    /// The last mapping found that holds no block (a stack, a file):
    /// start, end, index, with [`REGION_PAIR`] set when its accesses are
    /// counted per instruction too (every mapping but a thread's stack),
    /// and [`GLOBAL_PAIR`] when it holds globals.
    /// Looked at after `memo`, before the blocks, so stack accesses cost a
    /// compare.
    region_memo: (u64, u64, u32),
    allocations: u64,
    frees: u64,
    unknown_frees: u64,
    unreturned: u64,
    live: u64,
    untracked: u64,
}

#[inline(always)]
fn filter_bit(ip: u64) -> usize {
    ((ip ^ (ip >> 10)) & 1023) as usize
}

impl Objects {
    /// Object state for `threads` thread slots, observing `allocators`
    /// (from `coldcache_capture::objects::resolve_allocators`), attributing the rest by `maps` (the
    /// process's mappings at the start); used only when `on`.
    pub fn new(
        on: bool,
        threads: usize,
        allocators: &[(u64, Kind, &'static str)],
        mut maps: Vec<Mapping>,
    ) -> Objects {
        let mut entries = [(0u64, 0u8, 0u8); MAX_ENTRIES];
        let mut filter = [0u64; 16];
        let mut map_filter = [0u64; 16];
        for (i, (slot, &(a, k, name))) in entries.iter_mut().zip(allocators).enumerate() {
            let own = !ALLOCATORS.iter().any(|e| e.0 == name);
            *slot = (a, k as u8, if own { OWN | i as u8 } else { k as u8 });
            let b = filter_bit(a);
            filter[b >> 6] |= 1 << (b & 63);
            if k.is_mapping() {
                map_filter[b >> 6] |= 1 << (b & 63);
            }
        }
        maps.sort_by_key(|m| m.start);
        // The brk heap grows up towards the next mapping: blocks allocated
        // there during the capture, and the allocator's own words, are
        // the heap's. Up to half the gap only: the kernel places new
        // mappings (`mmap`, and malloc's large blocks) top-down, just
        // below the lowest one, so the upper part of the gap is theirs
        // (counted as mapped during the capture, not as the heap).
        // The main thread's stack grows down as the program recurses:
        // its line reaches 8 MiB below its top (the usual RLIMIT_STACK;
        // the kernel keeps at least 128 MiB there free of `mmap`s), but
        // not below half the gap to the mapping under it.
        for i in 0..maps.len() {
            if maps[i].path == "[heap]" {
                let end = maps[i].end;
                maps[i].end = maps
                    .get(i + 1)
                    .map_or(u64::MAX, |n| end + (n.start.saturating_sub(end)) / 2);
            } else if maps[i].path == "[stack]" {
                let start = maps[i].start;
                let floor = i.checked_sub(1).map_or(0, |p| {
                    let below = maps[p].end;
                    below + start.saturating_sub(below) / 2
                });
                maps[i].start = start.min(maps[i].end.saturating_sub(8 << 20).max(floor));
            }
        }
        Objects {
            on,
            entries,
            names: allocators.iter().map(|e| e.2).collect(),
            filter,
            map_filter,
            pending: vec![Pending::default(); threads],
            nodes: GrowVec::new(usize::MAX),
            free_node: NIL,
            root: NIL,
            seed: 0x9E37_79B9,
            site_of: GrowVec::new(usize::MAX),
            map_site_of: GrowVec::new(usize::MAX),
            pieces: GrowVec::new(usize::MAX),
            mapping_pieces: GrowVec::new(usize::MAX),
            piece_memo: (0, 0, 0),
            earlier_site: [NIL; 2],
            late_stacks: vec![(0, 0); threads],
            sites: GrowVec::new(usize::MAX),
            regions: maps
                .into_iter()
                .map(|map| Region {
                    // Where the allocator may put blocks: the heap and
                    // anonymous mappings (arenas; a thread's stack is
                    // told apart when its thread starts).
                    may_hold_blocks: map.path.is_empty() || map.path == "[heap]",
                    claimed: false,
                    map,
                    thread: u32::MAX,
                    tls: u32::MAX,
                    globals: (0, 0),
                    counts: Counts::default(),
                })
                .collect(),
            unmapped: Counts::default(),
            late: GrowVec::new(u32::MAX as usize),
            late_index: Index::new(),
            memo: (0, 0, 0),
            // A node 0 with gen 0 stands for "none" until the first block:
            // the memo's empty entries never match (start = end = 0).
            ip_memo: vec![IpMemo::default(); IP_MEMO],
            gen: 0,
            pairs: GrowVec::new(u32::MAX as usize - 1),
            pair_index: Index::new(),
            pair_memo: vec![NO_PAIR; IP_MEMO],
            pairs_dropped: Counts::default(),
            regions_dropped: Counts::default(),
            globals: Vec::new(),
            global_names: Vec::new(),
            global_memo: (0, 0, 0),
            globals_dropped: Counts::default(),
            frames: GrowVec::new(u32::MAX as usize),
            frames_dropped: 0,
            locals_dropped: Counts::default(),
            local_pairs: 0,
            region_memo: (0, 0, 0),
            allocations: 0,
            frees: 0,
            unknown_frees: 0,
            unreturned: 0,
            live: 0,
            untracked: 0,
        }
    }

    /// These objects with the modules' globals `symbols` as objects of
    /// their own (see the module doc). Of symbols at one address the
    /// largest is kept (the first given of equal sizes); a symbol that
    /// overlaps one kept before it (by address) is left out, its bytes
    /// counted by the one kept or by the mapping.
    pub fn with_globals(mut self, mut symbols: Vec<GlobalSymbol>) -> Objects {
        symbols.retain(|g| g.start < g.end);
        symbols.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
        let mut globals: Vec<Global> = Vec::with_capacity(symbols.len());
        let mut names = Vec::with_capacity(symbols.len());
        for g in symbols {
            if globals.last().is_some_and(|l| g.start < l.end) {
                continue;
            }
            let Some(region) = self.region_overlapping(g.start, g.end) else {
                continue;
            };
            if globals.len() >= INDEX as usize {
                break;
            }
            globals.push(Global {
                start: g.start,
                end: g.end,
                name: names.len() as u32,
                region: region as u32,
                counts: Counts::default(),
            });
            names.push(g.name);
        }
        for r in &mut self.regions {
            let lo = globals.partition_point(|g| g.end <= r.map.start);
            let hi = globals.partition_point(|g| g.start < r.map.end);
            r.globals = (lo as u32, hi.max(lo) as u32);
        }
        self.globals = globals;
        self.global_names = names;
        self.region_memo = (0, 0, 0);
        self
    }

    /// The first mapping that overlaps [`start`, `end`).
    fn region_overlapping(&self, start: u64, end: u64) -> Option<usize> {
        let i = self.regions.partition_point(|r| r.map.end <= start);
        (i < self.regions.len() && self.regions[i].map.start < end).then_some(i)
    }

    /// Whether objects are tracked (built with `on`): an accountant given
    /// object state that is not keeps it, unused.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// A traced thread (dump index `serial`, slot `ti`) starts, or starts
    /// again (a new window, a slot reused), with RSP `sp` and its thread
    /// pointer (FS base) `fs`: the mapping holding `sp` is its stack, the
    /// one holding `fs` its static thread-local storage (unless that is
    /// its stack too, as for threads glibc creates). An allocator call it
    /// was inside when its tracing last ended is abandoned (`unreturned`):
    /// kept, it would hide the thread's next allocations as nested calls
    /// until a `ret` reached its old RSP.
    pub fn thread_stack(&mut self, ti: usize, sp: u64, fs: u64, serial: u32) {
        if let Some(p) = self.pending.get_mut(ti) {
            self.unreturned += u64::from(p.kind != 0) + u64::from(p.map.kind != 0);
            p.kind = 0;
            p.map.kind = 0;
        }
        // A thread whose stack is no mapping of the start (made after it)
        // has its stack in a mapping made in the capture (`pthread_create`'s
        // `mmap`) or before its window: its frames are told apart there as
        // in a stack of the start; the rest of it (glibc's thread control
        // block and static TLS at its top) stays the mapping's.
        if let Some(slot) = self.late_stacks.get_mut(ti) {
            *slot = (0, 0);
        }
        if self.region_of(sp).is_none() {
            let heap = self.earlier_site[1];
            if let Some(p) = self.piece_holding(sp).filter(|p| p.site != heap) {
                if let Some(slot) = self.late_stacks.get_mut(ti) {
                    *slot = (p.start, p.end);
                }
            }
        }
        let stack = self.region_of(sp);
        if let Some(i) = stack {
            // A stack glibc reuses for a later thread is that thread's.
            if self.regions[i].thread != serial {
                self.regions[i].thread = serial;
                if !self.regions[i].claimed {
                    self.regions[i].may_hold_blocks = false;
                }
                // The memo may hold it from before, counted per
                // instruction as a mapping that is not a stack, or as an
                // earlier thread's.
                if self.region_memo.2 & INDEX == i as u32 {
                    self.region_memo = (0, 0, 0);
                }
            }
        }
        if let Some(i) = self.region_of(fs).filter(|&i| Some(i) != stack) {
            if self.regions[i].tls == u32::MAX {
                self.regions[i].tls = serial;
            }
        }
    }

    fn region_of(&self, a: u64) -> Option<usize> {
        let i = self.regions.partition_point(|r| r.map.start <= a);
        (i > 0 && a < self.regions[i - 1].map.end).then(|| i - 1)
    }

    /// Attributes one access (of any kind: only data accesses count) of
    /// the instruction at `ip`, served as `r`, made by the thread `thread`
    /// (its number and shadow frames, outermost first); a block's site
    /// counts it per instruction too (a new pair charged to `budget`).
    #[inline(always)]
    pub fn access(
        &mut self,
        kind: AccessKind,
        addr: u64,
        ip: u64,
        r: &AccessResult,
        budget: &mut Budget,
        thread: Thread<'_>,
    ) {
        let side = match Side::of(kind) {
            Some(Side::Read) => 0,
            Some(Side::Write) => 1,
            _ => return,
        };
        let (s, e, site) = self.memo;
        if addr.wrapping_sub(s) < e.wrapping_sub(s) {
            self.site_access(site, ip, side, r, budget);
            return;
        }
        let (s, e, region) = self.region_memo;
        if addr.wrapping_sub(s) < e.wrapping_sub(s) {
            self.region_access(region, addr, ip, side, r, budget, thread);
            return;
        }
        // The block this instruction touched last, if still live.
        let slot = ip_slot(ip);
        let m = self.ip_memo[slot];
        if addr.wrapping_sub(m.start) < m.end.wrapping_sub(m.start)
            && self.nodes.at(m.node as usize).gen == m.gen
        {
            self.memo = (m.start, m.end, m.site);
            self.site_access(m.site, ip, side, r, budget);
            return;
        }
        self.access_slow(side, addr, ip, slot, r, budget, thread);
    }

    /// An access outside every block in the mapping of `key` (its index,
    /// [`REGION_PAIR`] when counted per instruction, [`GLOBAL_PAIR`] when
    /// it holds globals): the global holding `addr`, else the mapping.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn region_access(
        &mut self,
        key: u32,
        addr: u64,
        ip: u64,
        side: usize,
        r: &AccessResult,
        b: &mut Budget,
        thread: Thread<'_>,
    ) {
        let i = (key & INDEX) as usize;
        if key & REGION_PAIR == 0 && self.regions[i].thread == thread.0 {
            // The thread's own stack: the frame holding the address.
            if let Some(f) = frame_of(thread.2, addr, ip) {
                if self.frame_access(f, addr, side, r, b) {
                    return;
                }
            }
        }
        if key & GLOBAL_PAIR != 0 {
            let (s, e, g) = self.global_memo;
            let g = if addr.wrapping_sub(s) < e.wrapping_sub(s) {
                Some(g)
            } else {
                self.global_of(i, addr)
            };
            if let Some(g) = g {
                self.globals[g as usize].counts.add(side, r);
                self.pair_access(g | GLOBAL_PAIR | REGION_PAIR, ip, side, r, b);
                return;
            }
        }
        self.regions[i].counts.add(side, r);
        if key & REGION_PAIR != 0 {
            self.pair_access(key & (REGION_PAIR | INDEX), ip, side, r, b);
        }
    }

    /// An access at `addr` to the frame `(stack id, pc, CFA)` of
    /// [`frame_of`]: its frame's row and its slot's pair (pc, distance
    /// below the CFA); false when the frame's row cannot be made (counted
    /// in `frames_dropped`, left to the mapping).
    #[inline(always)]
    fn frame_access(
        &mut self,
        (stack, pc, cfa): (u32, u64, u64),
        addr: u64,
        side: usize,
        r: &AccessResult,
        b: &mut Budget,
    ) -> bool {
        let k = stack as usize;
        if k >= self.frames.len() && !self.frames_reach(k, b) {
            self.frames_dropped += 1;
            return false;
        }
        self.frames.at_mut(k).add(side, r);
        let below = cfa.wrapping_sub(addr);
        if below <= u64::from(INDEX) {
            self.pair_access(LOCAL_PAIR | below as u32, pc, side, r, b);
        } else {
            self.locals_dropped.add(side, r);
        }
        true
    }

    /// Makes rows up to stack id `k`.
    #[inline(never)]
    fn frames_reach(&mut self, k: usize, b: &mut Budget) -> bool {
        let n = (k + 1).max(self.frames.len() * 2).max(1024) - self.frames.len();
        self.frames.extend(Counts::default(), n, b).is_ok()
            || self
                .frames
                .extend(Counts::default(), k + 1 - self.frames.len(), b)
                .is_ok()
    }

    /// The global of mapping `i` that holds `addr`, remembered.
    #[inline(never)]
    fn global_of(&mut self, i: usize, addr: u64) -> Option<u32> {
        let (lo, hi) = self.regions[i].globals;
        let within = &self.globals[lo as usize..hi as usize];
        let j = within.partition_point(|g| g.start <= addr);
        let g = within.get(j.checked_sub(1)?)?;
        if addr >= g.end {
            return None;
        }
        let k = lo + j as u32 - 1;
        self.global_memo = (g.start, g.end, k);
        Some(k)
    }

    /// An access of site `site` by the instruction at `ip`: the site's
    /// counts and the pair's.
    #[inline(always)]
    fn site_access(&mut self, site: u32, ip: u64, side: usize, r: &AccessResult, b: &mut Budget) {
        self.sites.at_mut(site as usize).counts.add(side, r);
        self.pair_access(site, ip, side, r, b);
    }

    /// An access by the instruction at `ip` counted in the pair of `key`
    /// (a site, a mapping with [`REGION_PAIR`], a global with both bits).
    #[inline(always)]
    fn pair_access(&mut self, key: u32, ip: u64, side: usize, r: &AccessResult, b: &mut Budget) {
        let m = self.pair_memo[ip_slot(ip)];
        if m.ip == ip && m.site == key {
            self.pairs.at_mut(m.pair as usize).counts.add(side, r);
        } else {
            self.pair_slow(key, ip, side, r, b);
        }
    }

    /// The pair of (`site`, `ip`) found in the table, or added to it (when
    /// it cannot grow: counted in `pairs_dropped`), then remembered.
    #[inline(never)]
    fn pair_slow(&mut self, site: u32, ip: u64, side: usize, r: &AccessResult, b: &mut Budget) {
        let h = pair_hash(ip, site);
        let found = self.find_pair(site, ip, h);
        let local = site & !INDEX == LOCAL_PAIR;
        let pair = match found {
            Some(p) => p,
            None => match (!local || self.local_pairs < MAX_LOCAL_PAIRS)
                .then(|| self.add_pair(site, ip, h, b))
                .flatten()
            {
                Some(p) => {
                    self.local_pairs += u32::from(local);
                    p
                }
                None => {
                    if local {
                        self.locals_dropped.add(side, r);
                    } else if site & GLOBAL_PAIR != 0 {
                        self.globals_dropped.add(side, r);
                    } else if site & REGION_PAIR != 0 {
                        self.regions_dropped.add(side, r);
                    } else {
                        self.pairs_dropped.add(side, r);
                    }
                    return;
                }
            },
        };
        self.pair_memo[ip_slot(ip)] = PairMemo { ip, site, pair };
        self.pairs.at_mut(pair as usize).counts.add(side, r);
    }

    /// The pair of (`site`, `ip`), whose hash is `h`, when the table has
    /// it.
    fn find_pair(&self, site: u32, ip: u64, h: u64) -> Option<u32> {
        if !self.pair_index.ready() {
            return None;
        }
        let mut i = self.pair_index.start(h);
        loop {
            let e = self.pair_index.slot(i);
            if e == 0 {
                return None;
            }
            let p = self.pairs.at(e as usize - 1);
            if p.ip == ip && p.site == site {
                return Some(e - 1);
            }
            i = self.pair_index.next(i);
        }
    }

    /// A new pair (not in the table); `None` when the table cannot grow.
    fn add_pair(&mut self, site: u32, ip: u64, h: u64, b: &mut Budget) -> Option<u32> {
        let n = self.pairs.len();
        if !self.pair_index.fits(n) {
            let pairs = &self.pairs;
            self.pair_index
                .grow(
                    n,
                    |e| {
                        let p = pairs.at(e);
                        pair_hash(p.ip, p.site)
                    },
                    b,
                )
                .ok()?;
        }
        let row = Pair {
            ip,
            site,
            counts: Counts::default(),
        };
        let e = self.pairs.push(row, b).ok()?;
        let mut i = self.pair_index.start(h);
        while self.pair_index.slot(i) != 0 {
            i = self.pair_index.next(i);
        }
        self.pair_index.fill(i, e, h);
        Some(e as u32)
    }

    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn access_slow(
        &mut self,
        side: usize,
        addr: u64,
        ip: u64,
        slot: usize,
        r: &AccessResult,
        budget: &mut Budget,
        thread: Thread<'_>,
    ) {
        if let Some(i) = self.find(addr) {
            let n = *self.nodes.at(i as usize);
            self.memo = (n.start, n.end, n.site);
            self.ip_memo[slot] = IpMemo {
                start: n.start,
                end: n.end,
                site: n.site,
                node: i,
                gen: n.gen,
            };
            self.site_access(n.site, ip, side, r, budget);
            return;
        }
        // The thread's own stack when it is no mapping of the start (after
        // the blocks: a stack may lie in memory that holds some).
        let (s, e) = self.late_stacks.get(thread.1).copied().unwrap_or((0, 0));
        if addr.wrapping_sub(s) < e.wrapping_sub(s) {
            if let Some(f) = frame_of(thread.2, addr, ip) {
                if self.frame_access(f, addr, side, r, budget) {
                    return;
                }
            }
        }
        if let Some(site) = self.piece_of(addr) {
            self.site_access(site, ip, side, r, budget);
            return;
        }
        match self.region_of(addr) {
            Some(i) => {
                let reg = &self.regions[i];
                // A thread's stack is not counted per instruction: its
                // accesses are most of a program's, and the data view's
                // locals are typed without objects.
                let mut key = if reg.thread == u32::MAX {
                    i as u32 | REGION_PAIR
                } else {
                    i as u32
                };
                // A stack in a global (a green thread's, in `.bss`) stays
                // the thread's stack.
                if reg.globals.0 < reg.globals.1 && reg.thread == u32::MAX {
                    key |= GLOBAL_PAIR;
                }
                if !reg.may_hold_blocks {
                    self.region_memo = (reg.map.start, reg.map.end, key);
                }
                self.region_access(key, addr, ip, side, r, budget, thread);
            }
            None => {
                self.unmapped.add(side, r);
                self.late_access(addr, ip, side, r, budget);
            }
        }
    }

    /// Whether accesses outside every object were kept by address.
    pub fn has_late(&self) -> bool {
        !self.late.is_empty()
    }

    /// An access outside every object known now, kept by (address,
    /// instruction) when the table can hold it.
    #[inline(never)]
    fn late_access(&mut self, addr: u64, ip: u64, side: usize, r: &AccessResult, b: &mut Budget) {
        let h = late_hash(addr, ip);
        if self.late_index.ready() {
            let mut i = self.late_index.start(h);
            loop {
                let e = self.late_index.slot(i);
                if e == 0 {
                    break;
                }
                let l = self.late.at_mut(e as usize - 1);
                if l.addr == addr && l.ip == ip {
                    l.counts.add(side, r);
                    return;
                }
                i = self.late_index.next(i);
            }
        }
        let n = self.late.len();
        if n >= MAX_LATE {
            return;
        }
        if !self.late_index.fits(n) {
            let late = &self.late;
            let grown = self.late_index.grow(
                n,
                |e| {
                    let l = late.at(e);
                    late_hash(l.addr, l.ip)
                },
                b,
            );
            if grown.is_err() {
                return;
            }
        }
        let mut counts = Counts::default();
        counts.add(side, r);
        let Ok(e) = self.late.push(LateAccess { addr, ip, counts }, b) else {
            return;
        };
        let mut i = self.late_index.start(h);
        while self.late_index.slot(i) != 0 {
            i = self.late_index.next(i);
        }
        self.late_index.fill(i, e, h);
    }

    /// At the capture's end: the accesses outside every object known
    /// when they ran go to what holds them now, `maps` (the process's
    /// mappings now) and `symbols` (the data symbols of the files mapped
    /// since the start, as [`Objects::with_globals`] takes them): a new
    /// mapping row per mapping they fall in, and a global of their own
    /// where a symbol holds them, counted per instruction as the start's
    /// are. What no mapping holds now (unmapped again) stays `unmapped`.
    /// Not for the hot path: it allocates.
    pub fn late_mappings(&mut self, maps: &[Mapping], mut symbols: Vec<GlobalSymbol>) {
        if self.late.is_empty() {
            return;
        }
        symbols.retain(|g| g.start < g.end);
        symbols.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
        // The mappings holding a late access, each made a row once.
        // By (line of `maps`, the start's mappings below the address).
        let mut row_of: std::collections::HashMap<(usize, usize), usize> = Default::default();
        let mut global_of: std::collections::HashMap<usize, u32> = Default::default();
        let late: Vec<LateAccess> = self.late.as_slice().to_vec();
        // The start's mappings (sorted; the rows made here follow them).
        let known = self.regions.len();
        for l in late {
            let k = maps.partition_point(|m| m.start <= l.addr);
            let Some(k) = k.checked_sub(1).filter(|&k| l.addr < maps[k].end) else {
                continue;
            };
            // The line as far as no mapping of the start holds it (the
            // kernel merges adjacent anonymous mappings into one line).
            let mut m = maps[k].clone();
            let starts = &self.regions[..known];
            let i = starts.partition_point(|r| r.map.start <= l.addr);
            if let Some(below) = i.checked_sub(1).map(|i| &starts[i].map) {
                if l.addr < below.end {
                    continue; // the start's (never counted unmapped)
                }
                m.start = m.start.max(below.end);
            }
            if let Some(above) = starts.get(i) {
                m.end = m.end.min(above.map.start);
            }
            let new_row = |map: Mapping| Region {
                map,
                may_hold_blocks: false,
                claimed: false,
                thread: u32::MAX,
                tls: u32::MAX,
                globals: (0, 0),
                counts: Counts::default(),
            };
            if !row_of.contains_key(&(k, i)) && m.path.is_empty() && m.start == maps[k].start {
                // A library's `.bss` past its file: its file-backed
                // mapping below is a row too (maybe of no access), so
                // that the views name the module.
                if let Some(p) = k
                    .checked_sub(1)
                    .filter(|&p| maps[p].end == m.start && maps[p].path.starts_with('/'))
                {
                    if !row_of.contains_key(&(p, i))
                        && starts
                            .get(i.wrapping_sub(1))
                            .is_none_or(|b| b.map.end <= maps[p].start)
                    {
                        self.regions.push(new_row(maps[p].clone()));
                        row_of.insert((p, i), self.regions.len() - 1);
                    }
                }
            }
            let region = *row_of.entry((k, i)).or_insert_with(|| {
                self.regions.push(new_row(m));
                self.regions.len() - 1
            });
            sub(&mut self.unmapped, &l.counts);
            let s = symbols.partition_point(|g| g.start <= l.addr);
            let held = s
                .checked_sub(1)
                .filter(|&s| l.addr < symbols[s].end && self.globals.len() < INDEX as usize);
            let (key, counts) = match held {
                Some(s) => {
                    let g = *global_of.entry(s).or_insert_with(|| {
                        self.globals.push(Global {
                            start: symbols[s].start,
                            end: symbols[s].end,
                            name: self.global_names.len() as u32,
                            region: region as u32,
                            counts: Counts::default(),
                        });
                        self.global_names.push(symbols[s].name.clone());
                        self.globals.len() as u32 - 1
                    });
                    (
                        g | GLOBAL_PAIR | REGION_PAIR,
                        &mut self.globals[g as usize].counts,
                    )
                }
                None => (
                    region as u32 | REGION_PAIR,
                    &mut self.regions[region].counts,
                ),
            };
            add(counts, &l.counts);
            self.late_pair(key, l.ip, &l.counts);
        }
    }

    /// Adds `c` to the pair (`key`, `ip`), made when new (outside the
    /// budget: the capture has ended).
    fn late_pair(&mut self, key: u32, ip: u64, c: &Counts) {
        let h = pair_hash(ip, key);
        let mut b = Budget::new(usize::MAX);
        match self
            .find_pair(key, ip, h)
            .or_else(|| self.add_pair(key, ip, h, &mut b))
        {
            Some(p) => add(&mut self.pairs.at_mut(p as usize).counts, c),
            None => {
                let dropped = if key & GLOBAL_PAIR != 0 {
                    &mut self.globals_dropped
                } else {
                    &mut self.regions_dropped
                };
                add(dropped, c);
            }
        }
    }

    /// Observes the allocator for the instruction at `ip` of thread slot
    /// `ti` about to run with RSP `sp` and the registers of `m`, on call
    /// stack `stack`; `is_ret` tells whether it is a `ret`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn observe<M: Machine + ?Sized>(
        &mut self,
        ti: usize,
        ip: u64,
        sp: u64,
        stack: u32,
        is_ret: impl FnOnce() -> bool,
        m: &M,
        budget: &mut Budget,
    ) {
        let p = &self.pending[ti];
        let (call, map) = (p.kind != 0, p.map.kind != 0);
        let b = filter_bit(ip);
        let filter = if call { &self.map_filter } else { &self.filter };
        let maybe_entry = filter[b >> 6] >> (b & 63) & 1 != 0;
        if maybe_entry && !map {
            self.entered(ti, ip, sp, stack, m, call, budget);
            let p = &self.pending[ti];
            if p.kind == 0 && p.map.kind == 0 {
                return;
            }
        } else if !call && !map {
            return;
        }
        // Inside an allocator (an entry may itself be its `ret`).
        if is_ret() {
            self.returned(ti, sp, m, budget);
        }
    }

    /// An entry point's first instruction, maybe; `inside` tells whether
    /// the thread is inside an allocator call, where only mapping calls
    /// count.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn entered<M: Machine + ?Sized>(
        &mut self,
        ti: usize,
        ip: u64,
        sp: u64,
        stack: u32,
        m: &M,
        inside: bool,
        budget: &mut Budget,
    ) {
        let Some(&(_, k, naming)) = self.entries.iter().find(|e| e.0 == ip && e.1 != 0) else {
            return;
        };
        let Some(kind) = Kind::from_u8(k) else { return };
        let (rdi, rsi, rdx) = (
            m.gpr(Register::RDI),
            m.gpr(Register::RSI),
            m.gpr(Register::RDX),
        );
        if kind.is_mapping() {
            if kind == Kind::Munmap {
                self.unmap(rdi, rdi.saturating_add(pages(rsi)), budget);
            } else {
                self.pending[ti].map = MapCall {
                    kind: k,
                    rsp: sp,
                    old: rdi,
                    old_len: pages(rsi),
                    len: pages(if kind == Kind::Mmap { rsi } else { rdx }),
                    stack,
                };
            }
            return;
        }
        if inside {
            return;
        }
        let mut p = Pending {
            kind: k,
            naming,
            rsp: sp,
            size: 0,
            old: 0,
            out: 0,
            stack,
            map: MapCall::default(),
        };
        match kind {
            Kind::Malloc | Kind::New | Kind::NewArray | Kind::PyMalloc => p.size = rdi,
            Kind::Calloc | Kind::PyCalloc => p.size = rdi.saturating_mul(rsi),
            Kind::Realloc | Kind::PyRealloc => (p.old, p.size) = (rdi, rsi),
            Kind::Reallocarray => (p.old, p.size) = (rdi, rsi.saturating_mul(rdx)),
            Kind::Free => {
                if rdi != 0 {
                    self.free(rdi);
                }
            }
            Kind::FreeSecond => {
                if rsi != 0 {
                    self.free(rsi);
                }
            }
            Kind::PosixMemalign => (p.out, p.size) = (rdi, rdx),
            Kind::Aligned => p.size = rsi,
            Kind::Mmap | Kind::Munmap | Kind::Mremap | Kind::Earlier | Kind::EarlierHeap => {
                unreachable!("handled above")
            }
        }
        p.map = self.pending[ti].map;
        self.pending[ti] = p;
    }

    #[inline(never)]
    fn returned<M: Machine + ?Sized>(&mut self, ti: usize, sp: u64, m: &M, budget: &mut Budget) {
        let p = self.pending[ti];
        if p.map.kind != 0 && sp >= p.map.rsp {
            self.pending[ti].map.kind = 0;
            if sp > p.map.rsp {
                self.unreturned += 1;
            } else {
                self.mapped(p.map, m.gpr(Register::RAX), budget);
            }
        }
        if p.kind == 0 || sp < p.rsp {
            return; // a return inside the allocator
        }
        self.pending[ti].kind = 0;
        if sp > p.rsp {
            self.unreturned += 1;
            return;
        }
        let Some(kind) = Kind::from_u8(p.kind) else {
            return;
        };
        let rax = m.gpr(Register::RAX);
        let block = match kind {
            Kind::Free
            | Kind::FreeSecond
            | Kind::Mmap
            | Kind::Munmap
            | Kind::Mremap
            | Kind::Earlier
            | Kind::EarlierHeap => return,
            Kind::PosixMemalign => {
                if rax != 0 {
                    return;
                }
                m.read_u64(p.out).unwrap_or(0)
            }
            Kind::Realloc | Kind::Reallocarray | Kind::PyRealloc => {
                // realloc(p, 0) frees and gives NULL; a failed realloc
                // gives NULL and keeps the old block.
                if p.old != 0 && (rax != 0 || p.size == 0) {
                    self.free(p.old);
                }
                rax
            }
            _ => rax,
        };
        if block != 0 {
            self.allocated(block, p.size, p.stack, p.naming, budget);
        }
    }

    /// A block the program frees (or `realloc` moves).
    fn free(&mut self, start: u64) {
        let Some(n) = self.remove(start) else {
            self.unknown_frees += 1;
            return;
        };
        self.frees += 1;
        self.live -= 1;
        let site = self.nodes.at(n as usize).site;
        self.sites.at_mut(site as usize).freed += 1;
        self.release(n, start);
    }

    /// Node `n`, out of the tree, of the block that started at `start`:
    /// forgotten by the memos, kept for reuse.
    fn release(&mut self, n: u32, start: u64) {
        if self.memo.0 == start {
            self.memo = (0, 0, 0);
        }
        let node = self.nodes.at_mut(n as usize);
        node.left = self.free_node;
        node.gen = 0;
        self.free_node = n;
    }

    fn allocated(&mut self, start: u64, size: u64, stack: u32, kind: u8, budget: &mut Budget) {
        self.allocations += 1;
        // A block at the same start still live: its free was not seen.
        if let Some(n) = self.remove(start) {
            self.live -= 1;
            self.release(n, start);
        }
        // A block where no block was expected (a pool of the program's
        // own in its `.bss`, a block on a stack): its mapping is no longer
        // taken whole by the region memo.
        if let Some(i) = self.region_of(start) {
            self.regions[i].claimed = true;
            if !self.regions[i].may_hold_blocks {
                self.regions[i].may_hold_blocks = true;
                if self.region_memo.2 & INDEX == i as u32 {
                    self.region_memo = (0, 0, 0);
                }
            }
        }
        let Some(site) = self.site(stack, kind, budget) else {
            self.untracked += 1;
            return;
        };
        let row = self.sites.at_mut(site as usize);
        row.blocks += 1;
        row.bytes = row.bytes.saturating_add(size);
        self.gen = self.gen.wrapping_add(1).max(1);
        let node = Node {
            gen: self.gen,
            start,
            end: start.saturating_add(size.max(1)),
            site,
            prio: self.next_prio(),
            left: NIL,
            right: NIL,
        };
        let n = if self.free_node != NIL {
            let n = self.free_node;
            self.free_node = self.nodes.at(n as usize).left;
            *self.nodes.at_mut(n as usize) = node;
            n
        } else {
            match self.nodes.push(node, budget) {
                Ok(n) => n as u32,
                Err(_) => {
                    self.untracked += 1;
                    return;
                }
            }
        };
        let (l, r) = self.split(self.root, start);
        let l = self.merge(l, n);
        self.root = self.merge(l, r);
        self.live += 1;
    }

    /// The site of the blocks allocated on call stack `stack` (made, named
    /// by `kind`, at its first block).
    fn site(&mut self, stack: u32, kind: u8, budget: &mut Budget) -> Option<u32> {
        Self::site_in(&mut self.site_of, &mut self.sites, stack, kind, budget)
    }

    /// The site of the mappings made on call stack `stack`.
    fn map_site(&mut self, stack: u32, kind: u8, budget: &mut Budget) -> Option<u32> {
        Self::site_in(&mut self.map_site_of, &mut self.sites, stack, kind, budget)
    }

    fn site_in(
        site_of: &mut GrowVec<u32>,
        sites: &mut GrowVec<SiteRow>,
        stack: u32,
        kind: u8,
        budget: &mut Budget,
    ) -> Option<u32> {
        let s = stack as usize;
        if s >= site_of.len() {
            let more = s + 1 - site_of.len();
            site_of.extend(0, more, budget).ok()?;
        }
        let v = *site_of.at(s);
        if v != 0 {
            return Some(v - 1);
        }
        let row = SiteRow {
            stack,
            kind,
            blocks: 0,
            bytes: 0,
            freed: 0,
            counts: Counts::default(),
        };
        let i = sites.push(row, budget).ok()? as u32;
        *site_of.at_mut(s) = i + 1;
        Some(i)
    }

    /// The piece of a mapping made in the capture that holds `a`.
    fn piece_holding(&self, a: u64) -> Option<Piece> {
        let pieces = self.pieces.as_slice();
        let i = pieces.partition_point(|p| p.start <= a);
        pieces.get(i.checked_sub(1)?).filter(|p| a < p.end).copied()
    }

    /// The site of the mapping made in the capture that holds `a`.
    #[inline(always)]
    fn piece_of(&mut self, a: u64) -> Option<u32> {
        if self.pieces.is_empty() {
            return None;
        }
        let (s, e, site) = self.piece_memo;
        if a.wrapping_sub(s) < e.wrapping_sub(s) {
            return Some(site);
        }
        let p = self.piece_holding(a)?;
        self.piece_memo = (p.start, p.end, p.site);
        Some(p.site)
    }

    /// A mapping call `call` returned `rax`: a new mapping of its site
    /// (`mremap`: the old one's, moved or resized).
    fn mapped(&mut self, call: MapCall, rax: u64, budget: &mut Budget) {
        // MAP_FAILED, or an error number from a raw call.
        if rax > u64::MAX - 4096 || call.len == 0 {
            return;
        }
        let kind = Kind::from_u8(call.kind);
        let mut grown = call.len;
        let mut old = None;
        if kind == Some(Kind::Mremap) {
            old = self.piece_holding(call.old).map(|p| (p.site, p.mapping));
            self.unmap(call.old, call.old.saturating_add(call.old_len), budget);
            if old.is_some() {
                grown = call.len.saturating_sub(call.old_len);
            }
        }
        let (start, end) = (rax, rax.saturating_add(call.len));
        // MAP_FIXED over mappings made in the capture replaces them; a
        // mapping of the start it lies over is no longer taken whole by the
        // region memo (the pieces come after it). Done first: whatever the
        // budget allows below.
        self.unmap(start, end, budget);
        let mut i = self.regions.partition_point(|r| r.map.end <= start);
        while i < self.regions.len() && self.regions[i].map.start < end {
            self.regions[i].may_hold_blocks = true;
            self.regions[i].claimed = true;
            if self.region_memo.2 & INDEX == i as u32 {
                self.region_memo = (0, 0, 0);
            }
            i += 1;
        }
        let (site, mapping) = match old {
            Some((site, mapping)) => {
                // The pieces left of the old mapping, and the new one.
                let n = self.mapping_pieces.at_mut(mapping as usize);
                if *n == 0 {
                    self.sites.at_mut(site as usize).freed -= 1;
                }
                *n += 1;
                (site, mapping)
            }
            None => {
                let Some(site) = self.map_site(call.stack, call.kind, budget) else {
                    self.untracked += 1;
                    return;
                };
                let Ok(m) = self.mapping_pieces.push(1, budget) else {
                    self.untracked += 1;
                    return;
                };
                self.sites.at_mut(site as usize).blocks += 1;
                (site, m as u32)
            }
        };
        let row = self.sites.at_mut(site as usize);
        row.bytes = row.bytes.saturating_add(grown);
        let piece = Piece {
            start,
            end,
            site,
            mapping,
        };
        if self.insert_piece(piece, budget).is_err() {
            self.untracked += 1;
            self.drop_piece(mapping, site);
        }
    }

    /// A window opens: `[start, end)` is an anonymous writable mapping of
    /// the process now. What of it neither a mapping of the start nor one
    /// made in the capture covers was mapped after the capture's start,
    /// while nothing was traced (a `--function` window's program made it
    /// before the call: pymalloc's arenas, malloc's arenas): a mapping of
    /// its own, of the site [`Kind::Earlier`]. Allocation-free (grow
    /// memory within `budget`): called in the window's signal handler.
    /// `heap`: the range is the brk heap (`[heap]`), which made after the
    /// start (a program's first `malloc` after the library's constructor)
    /// is a row of its own, [`Kind::EarlierHeap`], reaching up to half the
    /// gap to what lies above it (the next mapping of the start, piece, or
    /// the limit given: where `maps` shows the next line), as the start's
    /// heap does (where a grown break goes).
    pub fn mapped_before_window(
        &mut self,
        start: u64,
        mut end: u64,
        heap: Option<u64>,
        budget: &mut Budget,
    ) {
        if !self.on {
            return;
        }
        if let Some(limit) = heap {
            let next_region = self
                .regions
                .get(self.regions.partition_point(|r| r.map.start < end))
                .map_or(u64::MAX, |r| r.map.start);
            let pieces = self.pieces.as_slice();
            let next_piece = pieces
                .get(pieces.partition_point(|p| p.start < end))
                .map_or(u64::MAX, |p| p.start);
            let next = next_region.min(next_piece).min(limit);
            if next > end {
                end += (next - end) / 2;
            }
        }
        let mut a = start;
        while a < end {
            // Skip what is covered; find where the next cover begins.
            let covered = self
                .region_of(a)
                .map(|i| self.regions[i].map.end)
                .or_else(|| self.piece_holding(a).map(|p| p.end));
            if let Some(e) = covered {
                a = e;
                continue;
            }
            let next_region = self
                .regions
                .get(self.regions.partition_point(|r| r.map.start <= a))
                .map_or(u64::MAX, |r| r.map.start);
            let pieces = self.pieces.as_slice();
            let next_piece = pieces
                .get(pieces.partition_point(|p| p.start <= a))
                .map_or(u64::MAX, |p| p.start);
            let b = end.min(next_region).min(next_piece);
            self.earlier_piece(a, b, usize::from(heap.is_some()), budget);
            a = b;
        }
    }

    /// A window opens and `[start, end)` is mapped by nothing: what the
    /// mappings made in the capture had there was unmapped while nothing
    /// was traced (between two windows). Allocation-free.
    /// The heap's piece is left as it is: it reaches past the break on
    /// purpose (where the break grows), and `maps` shows no line there.
    pub fn unmapped_before_window(&mut self, start: u64, end: u64, budget: &mut Budget) {
        let heap = self.earlier_site[1];
        let mut a = start;
        while a < end {
            let pieces = self.pieces.as_slice();
            let i = pieces.partition_point(|p| p.end <= a);
            let Some(p) = pieces[i..]
                .iter()
                .take_while(|p| p.start < end)
                .find(|p| p.site != heap)
                .copied()
            else {
                return;
            };
            let (s, e) = (p.start.max(a), p.end.min(end));
            self.unmap(s, e, budget);
            a = e;
        }
    }

    /// A piece of the site of memory mapped before the window (`k` 0) or
    /// of the heap grown before it (1).
    fn earlier_piece(&mut self, start: u64, end: u64, k: usize, budget: &mut Budget) {
        if self.earlier_site[k] == NIL {
            let row = SiteRow {
                stack: 0,
                kind: if k == 0 {
                    Kind::Earlier
                } else {
                    Kind::EarlierHeap
                } as u8,
                blocks: 0,
                bytes: 0,
                freed: 0,
                counts: Counts::default(),
            };
            let Ok(i) = self.sites.push(row, budget) else {
                self.untracked += 1;
                return;
            };
            self.earlier_site[k] = i as u32;
        }
        let site = self.earlier_site[k];
        let Ok(mapping) = self.mapping_pieces.push(1, budget) else {
            self.untracked += 1;
            return;
        };
        let piece = Piece {
            start,
            end,
            site,
            mapping: mapping as u32,
        };
        if self.insert_piece(piece, budget).is_err() {
            self.untracked += 1;
            return;
        }
        let row = self.sites.at_mut(site as usize);
        row.blocks += 1;
        row.bytes = row.bytes.saturating_add(end - start);
    }

    /// Adds `p` (overlapping no piece) in address order.
    fn insert_piece(&mut self, p: Piece, budget: &mut Budget) -> Result<(), ()> {
        let i = self
            .pieces
            .as_slice()
            .partition_point(|q| q.start < p.start);
        self.pieces.push(p, budget).map_err(|_| ())?;
        let v = self.pieces.as_mut_slice();
        v[i..].rotate_right(1);
        v[i] = p;
        self.piece_memo = (0, 0, 0);
        Ok(())
    }

    /// One piece of `mapping` (of `site`) is gone: a mapping with none
    /// left is counted unmapped.
    fn drop_piece(&mut self, mapping: u32, site: u32) {
        let n = self.mapping_pieces.at_mut(mapping as usize);
        *n -= 1;
        if *n == 0 {
            self.sites.at_mut(site as usize).freed += 1;
        }
    }

    /// `[start, end)` is unmapped: the pieces of mappings made in the
    /// capture lose what they had there.
    fn unmap(&mut self, start: u64, end: u64, budget: &mut Budget) {
        if self.pieces.is_empty() || start >= end {
            return;
        }
        self.piece_memo = (0, 0, 0);
        let mut i = self.pieces.as_slice().partition_point(|p| p.end <= start);
        while i < self.pieces.len() {
            let p = *self.pieces.at(i);
            if p.start >= end {
                break;
            }
            if start <= p.start && p.end <= end {
                // Wholly unmapped.
                self.pieces.as_mut_slice()[i..].rotate_left(1);
                self.pieces.pop();
                self.drop_piece(p.mapping, p.site);
                continue;
            }
            if p.start < start && end < p.end {
                // A hole in its middle: two pieces. Without room for the
                // second, its right part is forgotten (counted).
                self.pieces.at_mut(i).end = start;
                let right = Piece { start: end, ..p };
                match self.insert_piece(right, budget) {
                    Ok(()) => *self.mapping_pieces.at_mut(p.mapping as usize) += 1,
                    Err(()) => self.untracked += 1,
                }
                break;
            }
            if p.start < start {
                self.pieces.at_mut(i).end = start;
            } else {
                self.pieces.at_mut(i).start = end;
            }
            i += 1;
        }
    }

    fn next_prio(&mut self) -> u32 {
        // xorshift32
        let mut x = self.seed;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.seed = x;
        x
    }

    /// The node of the block holding `a`.
    fn find(&self, a: u64) -> Option<u32> {
        let mut t = self.root;
        let mut best = NIL;
        while t != NIL {
            let n = self.nodes.at(t as usize);
            if n.start <= a {
                best = t;
                t = n.right;
            } else {
                t = n.left;
            }
        }
        (best != NIL && a < self.nodes.at(best as usize).end).then_some(best)
    }

    /// Removes the block starting at `start`; gives its node.
    fn remove(&mut self, start: u64) -> Option<u32> {
        let (l, r) = self.split(self.root, start);
        let (m, r) = self.split(r, start.wrapping_add(1));
        let lr = self.merge(l, r);
        if m == NIL {
            self.root = lr;
            return None;
        }
        // `m` holds exactly the node starting at `start` (starts are
        // distinct).
        self.root = lr;
        Some(m)
    }

    /// Splits tree `t` into the nodes starting below `key` and the rest.
    fn split(&mut self, t: u32, key: u64) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let n = *self.nodes.at(t as usize);
        if n.start < key {
            let (a, b) = self.split(n.right, key);
            self.nodes.at_mut(t as usize).right = a;
            (t, b)
        } else {
            let (a, b) = self.split(n.left, key);
            self.nodes.at_mut(t as usize).left = b;
            (a, t)
        }
    }

    /// Joins two trees, every start of `a` below every start of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        let (na, nb) = (*self.nodes.at(a as usize), *self.nodes.at(b as usize));
        if na.prio > nb.prio {
            let r = self.merge(na.right, b);
            self.nodes.at_mut(a as usize).right = r;
            a
        } else {
            let l = self.merge(a, nb.left);
            self.nodes.at_mut(b as usize).left = l;
            b
        }
    }

    /// The dump's `OBJS` section, for a hierarchy of `levels` levels.
    pub fn finish(self, levels: usize) -> coldcache_dump::Objects {
        let unreturned =
            self.unreturned + self.pending.iter().filter(|p| p.kind != 0).count() as u64;
        let pairs = |kind: u32| -> Vec<SiteInstruction> {
            self.pairs
                .as_slice()
                .iter()
                .filter(|p| p.site & !INDEX == kind)
                .map(|p| SiteInstruction {
                    site: p.site & INDEX,
                    ip: p.ip,
                    counts: p.counts.to_dump(levels),
                })
                .collect()
        };
        // The globals with accesses, numbered anew.
        let mut row_of = vec![u32::MAX; self.globals.len()];
        let mut rows = Vec::new();
        for (k, g) in self.globals.iter().enumerate() {
            let c = &g.counts;
            if c.served.iter().flatten().any(|&n| n != 0) {
                row_of[k] = rows.len() as u32;
                rows.push(ObjectGlobal {
                    region: g.region,
                    name: self.global_names[g.name as usize].clone(),
                    start: g.start,
                    size: g.end - g.start,
                    counts: c.to_dump(levels),
                });
            }
        }
        let globals = (!self.globals.is_empty()).then(|| Globals {
            rows,
            by_instruction: pairs(REGION_PAIR | GLOBAL_PAIR)
                .into_iter()
                .map(|mut p| {
                    p.site = row_of[p.site as usize];
                    p
                })
                .collect(),
            dropped: self.globals_dropped.to_dump(levels),
        });
        coldcache_dump::Objects {
            coherence: true,
            named_at_end: true,
            allocators: self.names.iter().map(|s| s.to_string()).collect(),
            allocations: self.allocations,
            frees: self.frees,
            unknown_frees: self.unknown_frees,
            unreturned,
            live: self.live,
            untracked: self.untracked,
            sites: self
                .sites
                .as_slice()
                .iter()
                .map(|s| AllocSite {
                    stack: s.stack,
                    allocator: if s.kind & OWN != 0 {
                        self.names
                            .get((s.kind & !OWN) as usize)
                            .copied()
                            .unwrap_or("?")
                    } else {
                        Kind::from_u8(s.kind).map_or("?", Kind::name)
                    }
                    .to_string(),
                    blocks: s.blocks,
                    bytes: s.bytes,
                    freed: s.freed,
                    counts: s.counts.to_dump(levels),
                })
                .collect(),
            regions: self
                .regions
                .into_iter()
                .map(|r| ObjectRegion {
                    start: r.map.start,
                    end: r.map.end,
                    perms: r.map.perms,
                    path: r.map.path,
                    thread: (r.thread != u32::MAX).then_some(r.thread),
                    tls: (r.tls != u32::MAX).then_some(r.tls),
                    counts: r.counts.to_dump(levels),
                })
                .collect(),
            unmapped: self.unmapped.to_dump(levels),
            frames: Some(StackFrames {
                rows: self
                    .frames
                    .as_slice()
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.served.iter().flatten().any(|&n| n != 0))
                    .map(|(k, c)| FrameCounts {
                        stack: k as u32,
                        counts: c.to_dump(levels),
                    })
                    .collect(),
                dropped: self.frames_dropped,
                slots: pairs(LOCAL_PAIR)
                    .into_iter()
                    .map(|p| SlotCounts {
                        pc: p.ip,
                        below: u64::from(p.site),
                        counts: p.counts,
                    })
                    .collect(),
                slots_dropped: self.locals_dropped.to_dump(levels),
            }),
            by_instruction: Some(SiteInstructions {
                rows: pairs(0),
                dropped: self.pairs_dropped.to_dump(levels),
                regions: pairs(REGION_PAIR),
                regions_dropped: self.regions_dropped.to_dump(levels),
            }),
            globals,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldcache_sim::ServedBy;

    /// No traced thread's stack in these tests.
    const NO_THREAD: Thread<'static> = (u32::MAX - 1, 0, &[]);

    fn served(s: ServedBy) -> AccessResult {
        let mut r = AccessResult::default();
        r.served_by = s;
        r
    }

    /// Objects with one block of 64 bytes at 0x10000 (site 0) and
    /// `ips` instructions touching it: instruction k reads it k % 3 + 1
    /// times (served by L1) and writes it once (served by memory),
    /// interleaved, so that the memo by instruction is replaced and
    /// aliased (ips 1024 apart share a memo slot).
    fn run(ips: u64, pairs: &mut Budget) -> coldcache_dump::Objects {
        let mut o = Objects::new(true, 1, &[], Vec::new());
        let mut b = Budget::new(usize::MAX);
        o.allocated(0x10000, 64, 5, Kind::Malloc as u8, &mut b);
        let ip = |k: u64| 0x40_0000 + k * 1024;
        for round in 0..3 {
            for k in 0..ips {
                if round <= k % 3 {
                    o.access(
                        AccessKind::Read,
                        0x10008,
                        ip(k),
                        &served(ServedBy::L1),
                        pairs,
                        NO_THREAD,
                    );
                }
            }
        }
        for k in 0..ips {
            let r = served(ServedBy::MEMORY);
            o.access(AccessKind::Write, 0x10030, ip(k), &r, pairs, NO_THREAD);
        }
        o.finish(1)
    }

    /// The heap's region reaches half the gap to the next mapping (where
    /// a grown break goes); the upper half is where the kernel puts new
    /// mappings, counted as mapped during the capture. Heap
    /// [0x10000, 0x20000), next mapping at 0x120000: the heap's region
    /// ends at 0x20000 + 0x100000 / 2 = 0xA0000.
    /// Registers for [`Objects::observe`]: RDI, RSI, RDX, RAX.
    struct Regs([u64; 4]);

    impl Machine for Regs {
        fn gpr(&self, reg: Register) -> u64 {
            match reg {
                Register::RDI => self.0[0],
                Register::RSI => self.0[1],
                Register::RDX => self.0[2],
                Register::RAX => self.0[3],
                _ => 0,
            }
        }
        fn rflags(&self) -> u64 {
            0
        }
        fn segment_base(&self, _: Register) -> u64 {
            0
        }
        fn vector(&self, _: Register) -> Option<[u8; 64]> {
            None
        }
        fn opmask(&self, _: Register) -> Option<u64> {
            None
        }
    }

    /// Mappings made in the capture, by hand: mmap, a hole unmapped in
    /// the middle, a MAP_FIXED mapping over one of the start, an mmap
    /// inside malloc (the block its own site, the header the mapping's),
    /// mremap moving a mapping with its site, a failed mmap, unmapping.
    #[test]
    fn mappings_made_in_the_capture_are_objects_of_their_sites() {
        let (mmap, munmap, mremap, malloc) = (0x1000, 0x2000, 0x3000, 0x4000);
        let mut o = Objects::new(
            true,
            1,
            &[
                (mmap, Kind::Mmap, "mmap"),
                (munmap, Kind::Munmap, "munmap"),
                (mremap, Kind::Mremap, "mremap"),
                (malloc, Kind::Malloc, "malloc"),
            ],
            vec![Mapping {
                start: 0x10000,
                end: 0x20000,
                perms: "rw-p".into(),
                path: String::new(),
            }],
        );
        let mut b = Budget::new(usize::MAX);
        let r = served(ServedBy::L1);
        let mut call = |o: &mut Objects, ip: u64, sp: u64, stack: u32, regs: [u64; 4]| {
            o.observe(0, ip, sp, stack, || false, &Regs(regs), &mut b);
        };
        let mut b2 = Budget::new(usize::MAX);
        let mut ret = |o: &mut Objects, sp: u64, rax: u64| {
            o.observe(0, 0x9999, sp, 0, || true, &Regs([0, 0, 0, rax]), &mut b2);
        };
        let mut b3 = Budget::new(usize::MAX);
        let mut touch = |o: &mut Objects, a: u64| {
            o.access(AccessKind::Read, a, 0x40_0000, &r, &mut b3, NO_THREAD);
        };
        // Three pages (the length rounded up), a hole in the middle.
        call(&mut o, mmap, 0x7000, 3, [0, 0x2F00, 3, 0]);
        ret(&mut o, 0x7000, 0x50000);
        touch(&mut o, 0x50010);
        call(&mut o, munmap, 0x7000, 9, [0x51000, 0x1000, 0, 0]);
        touch(&mut o, 0x51000); // the hole: unmapped
        touch(&mut o, 0x52008);
        // Over the start's mapping, which keeps the rest of itself.
        call(&mut o, mmap, 0x7000, 4, [0x18000, 0x1000, 3, 0]);
        ret(&mut o, 0x7000, 0x18000);
        touch(&mut o, 0x18000);
        touch(&mut o, 0x10000);
        // malloc maps its block: the block is malloc's site's, the rest
        // of the mapping the mapping's.
        call(&mut o, malloc, 0x6000, 5, [0x10_0000, 0, 0, 0]);
        call(&mut o, mmap, 0x5000, 6, [0, 0x10_1000, 3, 0]);
        ret(&mut o, 0x5000, 0x80000);
        ret(&mut o, 0x6000, 0x80010);
        touch(&mut o, 0x80010);
        touch(&mut o, 0x80008);
        // mremap moves the first mapping (both its pieces go), 3 pages
        // to 5: the same site, 2 pages more.
        call(&mut o, mremap, 0x7000, 7, [0x50000, 0x3000, 0x5000, 0]);
        ret(&mut o, 0x7000, 0x30_0000);
        touch(&mut o, 0x52008); // unmapped now
        touch(&mut o, 0x30_4FF8);
        // A failed mmap makes nothing.
        call(&mut o, mmap, 0x7000, 8, [0, 0x1000, 3, 0]);
        ret(&mut o, 0x7000, u64::MAX);
        // The moved mapping unmapped whole.
        call(&mut o, munmap, 0x7000, 9, [0x30_0000, 0x5000, 0, 0]);
        touch(&mut o, 0x30_0000);
        let d = o.finish(1);
        let sites: Vec<(u32, &str, u64, u64, u64, u64)> = d
            .sites
            .iter()
            .map(|s| {
                let a = s.counts.accesses();
                (s.stack, s.allocator.as_str(), s.blocks, s.bytes, s.freed, a)
            })
            .collect();
        assert_eq!(
            sites,
            [
                (3, "mmap", 1, 0x5000, 1, 3),
                (4, "mmap", 1, 0x1000, 0, 1),
                (6, "mmap", 1, 0x10_1000, 0, 1),
                (5, "malloc", 1, 0x10_0000, 0, 1),
            ]
        );
        assert_eq!(d.regions[0].counts.accesses(), 1);
        assert_eq!(d.unmapped.accesses(), 3);
        assert_eq!(d.unreturned, 0);
    }

    /// One page mapped at `at` by a call of the `mmap` at 0x1000 (stack 3).
    fn mmap_page(o: &mut Objects, at: u64, b: &mut Budget) {
        o.observe(0, 0x1000, 0x7000, 3, || false, &Regs([0, 0x1000, 3, 0]), b);
        o.observe(0, 0x9999, 0x7000, 3, || true, &Regs([0, 0, 0, at]), b);
    }

    /// Memory mapped before a window: what the start's mappings and the
    /// capture's own mappings leave of each anonymous mapping, one site; a
    /// thread's stack among it keeps there what is outside its frames.
    #[test]
    fn memory_mapped_before_the_window_is_what_no_other_object_holds() {
        let mut o = Objects::new(
            true,
            1,
            &[(0x1000, Kind::Mmap, "mmap")],
            vec![Mapping {
                start: 0x10000,
                end: 0x20000,
                perms: "rw-p".into(),
                path: String::new(),
            }],
        );
        let mut b = Budget::new(usize::MAX);
        mmap_page(&mut o, 0x30000, &mut b);
        o.mapped_before_window(0x8000, 0x40000, None, &mut b);
        // A second window sees the same mappings: nothing new.
        o.mapped_before_window(0x8000, 0x40000, None, &mut b);
        // A thread whose stack is in [0x20000, 0x30000).
        o.thread_stack(0, 0x2F000, 0, 0);
        let r = served(ServedBy::L1);
        for a in [0x9000, 0x3F000, 0x30008, 0x10008, 0x20008] {
            o.access(AccessKind::Read, a, 0x40_0000, &r, &mut b, NO_THREAD);
        }
        // The thread's own accesses in a frame of its stack are the
        // frame's (the one whose return address is at 0x2F000).
        let frames = [Frame {
            stack: 7,
            ret_slot: 0x2F000,
            site: 0,
        }];
        o.access(
            AccessKind::Read,
            0x2EF00,
            0x40_0000,
            &r,
            &mut b,
            (0, 0, &frames),
        );
        let d = o.finish(1);
        let f = d.frames.as_ref().expect("frames");
        assert_eq!(
            f.rows
                .iter()
                .map(|r| (r.stack, r.counts.accesses()))
                .collect::<Vec<_>>(),
            [(7, 1)]
        );
        let sites: Vec<(&str, u64, u64, u64)> = d
            .sites
            .iter()
            .map(|s| (s.allocator.as_str(), s.blocks, s.bytes, s.counts.accesses()))
            .collect();
        assert_eq!(
            sites,
            [
                ("mmap", 1, 0x1000, 1),
                (
                    coldcache_dump::MAPPED_BEFORE_WINDOW,
                    3,
                    0x8000 + 0x10000 + 0xF000,
                    3
                ),
            ]
        );
        assert_eq!(d.regions[0].counts.accesses(), 1);
        assert_eq!(d.unmapped.accesses(), 0);
    }

    /// The heap grown before the window reaches half the gap above it,
    /// and keeps it when a window finds that gap mapped by nothing; a
    /// mapping made in the capture that lies in such a gap is cut out.
    #[test]
    fn the_heap_grown_before_the_window_keeps_its_reach_and_gaps_cut_mappings() {
        let map = |start, end| Mapping {
            start,
            end,
            perms: "rw-p".into(),
            path: String::new(),
        };
        let mut o = Objects::new(
            true,
            1,
            &[(0x1000, Kind::Mmap, "mmap")],
            vec![map(0x10000, 0x20000), map(0x100000, 0x110000)],
        );
        let mut b = Budget::new(usize::MAX);
        mmap_page(&mut o, 0xC0000, &mut b);
        // The heap [0x30000, 0x40000): up to half the gap to the mmap.
        o.mapped_before_window(0x30000, 0x40000, Some(u64::MAX), &mut b);
        // The next window: the gaps around the heap line are mapped by
        // nothing, the mmap too.
        o.unmapped_before_window(0x20000, 0x30000, &mut b);
        o.unmapped_before_window(0x40000, 0x100000, &mut b);
        let r = served(ServedBy::L1);
        for a in [0x30008, 0x7FFF8, 0x80008, 0xC0008] {
            o.access(AccessKind::Read, a, 0x40_0000, &r, &mut b, NO_THREAD);
        }
        let d = o.finish(1);
        let sites: Vec<(&str, u64)> = d
            .sites
            .iter()
            .map(|s| (s.allocator.as_str(), s.counts.accesses()))
            .collect();
        assert_eq!(
            sites,
            [("mmap", 0), (coldcache_dump::HEAP_BEFORE_WINDOW, 2)]
        );
        assert_eq!(d.sites[0].freed, 1);
        assert_eq!(d.unmapped.accesses(), 2);
    }

    #[test]
    fn the_heap_reaches_half_the_gap_to_the_next_mapping() {
        let map = |start: u64, end: u64, path: &str| Mapping {
            start,
            end,
            perms: "rw-p".into(),
            path: path.into(),
        };
        let mut o = Objects::new(
            true,
            1,
            &[],
            vec![map(0x10000, 0x20000, "[heap]"), map(0x120000, 0x130000, "")],
        );
        let mut pairs = Budget::new(usize::MAX);
        let r = served(ServedBy::L1);
        // In the heap, in the grown break, just past it, in the mapping.
        for a in [0x10008, 0x9FFF8, 0xA0000, 0x120008] {
            o.access(AccessKind::Read, a, 0x40_0000, &r, &mut pairs, NO_THREAD);
        }
        let d = o.finish(1);
        let counts: Vec<u64> = d.regions.iter().map(|g| g.counts.accesses()).collect();
        assert_eq!(counts, [2, 1]);
        assert_eq!(d.unmapped.accesses(), 1);
    }

    /// Globals by address: a module's `.data` [0x10000, 0x11000) and its
    /// anonymous rest of `.bss` [0x11000, 0x13000); globals `a` (16
    /// bytes at 0x10100), `span` (0x10F00..0x11100, across both
    /// mappings), `b` (8 bytes at 0x12000) with an alias at its address
    /// and a symbol overlapping it (both left out), and a pool block
    /// allocated inside `span`. Accesses, by hand: `a` 3 (two
    /// instructions), `span` 2 (one in each mapping), `b` 1, the block 1,
    /// the mappings 1 each (between globals), nothing lost.
    #[test]
    fn globals_are_objects_of_their_own_by_address() {
        let map = |start: u64, end: u64, perms: &str, path: &str| Mapping {
            start,
            end,
            perms: perms.into(),
            path: path.into(),
        };
        let sym = |start: u64, size: u64, name: &str| GlobalSymbol {
            start,
            end: start + size,
            name: name.into(),
        };
        let mut o = Objects::new(
            true,
            1,
            &[],
            vec![
                map(0x10000, 0x11000, "rw-p", "/m"),
                map(0x11000, 0x13000, "rw-p", ""),
            ],
        )
        .with_globals(vec![
            sym(0x12000, 8, "b"),
            sym(0x10100, 16, "a"),
            sym(0x12000, 8, "b_alias"),
            sym(0x12004, 8, "overlaps_b"),
            sym(0x10F00, 0x200, "span"),
            // In no mapping: left out.
            sym(0x90000, 8, "nowhere"),
        ]);
        let mut b = Budget::new(usize::MAX);
        o.allocated(0x10F80, 16, 7, Kind::Malloc as u8, &mut b);
        let hit = served(ServedBy::L1);
        let miss = served(ServedBy::MEMORY);
        let ip = 0x40_0000;
        for (addr, ip, r) in [
            (0x10100, ip, &miss),    // a
            (0x1010F, ip, &hit),     // a, last byte
            (0x10108, ip + 4, &hit), // a, another instruction
            (0x10110, ip, &hit),     // .data, past a
            (0x10F00, ip, &hit),     // span in .data
            (0x10F84, ip, &hit),     // the block inside span
            (0x110FF, ip, &miss),    // span in .bss
            (0x12006, ip + 8, &hit), // b
            (0x12008, ip + 8, &hit), // .bss, past b (overlaps_b left out)
        ] {
            o.access(AccessKind::Read, addr, ip, r, &mut b, NO_THREAD);
        }
        let d = o.finish(1);
        let g = d.globals.as_ref().expect("globals");
        let rows: Vec<(&str, u64, u64, u32)> = g
            .rows
            .iter()
            .map(|r| (r.name.as_str(), r.start, r.counts.accesses(), r.region))
            .collect();
        assert_eq!(
            rows,
            [
                ("a", 0x10100, 3, 0),
                ("span", 0x10F00, 2, 0),
                ("b", 0x12000, 1, 1)
            ]
        );
        assert_eq!(g.rows[0].counts.misses(1), 1);
        assert_eq!(g.rows[1].counts.misses(1), 1);
        assert_eq!(g.rows[1].size, 0x200);
        let regions: Vec<u64> = d.regions.iter().map(|r| r.counts.accesses()).collect();
        assert_eq!(regions, [1, 1]);
        assert_eq!(d.sites[0].counts.accesses(), 1);
        // Per instruction: a by two instructions, each global's pairs
        // summing to its accesses; the mappings' own pairs apart.
        assert_eq!(g.dropped.accesses(), 0);
        for (k, row) in g.rows.iter().enumerate() {
            let sum: u64 = g
                .by_instruction
                .iter()
                .filter(|p| p.site as usize == k)
                .map(|p| p.counts.accesses())
                .sum();
            assert_eq!(sum, row.counts.accesses(), "{}", row.name);
        }
        let a: Vec<(u64, u64)> = g
            .by_instruction
            .iter()
            .filter(|p| p.site == 0)
            .map(|p| (p.ip, p.counts.accesses()))
            .collect();
        assert_eq!(a, [(ip, 2), (ip + 4, 1)]);
        let by = d.by_instruction.as_ref().unwrap();
        let mapped: u64 = by.regions.iter().map(|p| p.counts.accesses()).sum();
        assert_eq!(mapped, 2);
    }

    /// A thread's accesses to its own stack go to the frame holding the
    /// address: frames (stack 1, return address at 0x7fff_8000) and its
    /// callee (stack 2, at 0x7fff_7000, called from 0x40_1234). By hand:
    /// 0x7fff_6ff0 and the callee's return address 0x7fff_7000..8 are
    /// stack 2's, 0x7fff_7008 stack 1's; 0x7fff_8010 (above the outermost
    /// frame) and another thread's access stay in the mapping. By slot:
    /// the callee's at the accessing instruction 0x40_0000, 0x18 and 8
    /// below its CFA 0x7fff_7008; the caller's at its call 0x40_1234,
    /// 0x1000 below its CFA 0x7fff_8008.
    #[test]
    fn stack_accesses_go_to_the_frame_holding_the_address() {
        let mut o = Objects::new(
            true,
            2,
            &[],
            vec![Mapping {
                start: 0x7ffe_0000,
                end: 0x8000_0000,
                perms: "rw-p".into(),
                path: "[stack]".into(),
            }],
        );
        o.thread_stack(0, 0x7fff_6000, 0, 0);
        let frames = [
            Frame {
                stack: 1,
                ret_slot: 0x7fff_8000,
                site: 0x40_0ff0,
            },
            Frame {
                stack: 2,
                ret_slot: 0x7fff_7000,
                site: 0x40_1234,
            },
        ];
        let mut b = Budget::new(usize::MAX);
        let r = served(ServedBy::L1);
        for (addr, thread) in [
            (0x7fff_6ff0, 0),
            (0x7fff_7000, 0),
            (0x7fff_7008, 0),
            (0x7fff_8010, 0),
            (0x7fff_6ff0, 1),
            (0x7fff_6ff0, 0),
        ] {
            o.access(
                AccessKind::Read,
                addr,
                0x40_0000,
                &r,
                &mut b,
                (thread, 0, &frames),
            );
        }
        let d = o.finish(1);
        let f = d.frames.as_ref().expect("frames");
        let rows: Vec<(u32, u64)> = f
            .rows
            .iter()
            .map(|r| (r.stack, r.counts.accesses()))
            .collect();
        assert_eq!(rows, [(1, 1), (2, 3)]);
        assert_eq!(f.dropped, 0);
        let mut slots: Vec<(u64, u64, u64)> = f
            .slots
            .iter()
            .map(|s| (s.pc, s.below, s.counts.accesses()))
            .collect();
        slots.sort_unstable();
        assert_eq!(
            slots,
            [
                (0x40_0000, 8, 1),
                (0x40_0000, 0x18, 2),
                (0x40_1234, 0x1000, 1)
            ]
        );
        assert_eq!(f.slots_dropped.accesses(), 0);
        assert_eq!(d.regions[0].counts.accesses(), 2);
        // No frames known: the mapping's.
        assert_eq!(frame_of(&[], 0x7fff_6ff0, 0), None);
    }

    /// Accesses outside every object known when they ran are named at
    /// the end by what holds them then: a library mapped during the
    /// capture (its `.data` line at 0x50_0000, the global `table` at
    /// 0x50_0100..0x50_0200) gets a row, `table` its 2 reads (one per
    /// instruction, each its pair) and the line the rest (1 write); the
    /// line of `maps` merged with the start's mapping below it is cut at
    /// that mapping's end; an address no mapping holds at the end stays
    /// unmapped; a second library's `.bss` (anonymous, after its file's
    /// line at 0x60_0000, which nothing touched) comes with that line as a
    /// row of no access, so the views name its module.
    #[test]
    fn accesses_outside_every_object_are_named_by_the_mappings_at_the_end() {
        let mapping = |start: u64, end: u64, path: &str| Mapping {
            start,
            end,
            perms: "rw-p".into(),
            path: path.into(),
        };
        let mut o = Objects::new(true, 1, &[], vec![mapping(0x40_0000, 0x40_1000, "/bin/p")]);
        let mut b = Budget::new(usize::MAX);
        let r = served(ServedBy::L1);
        for (kind, addr, ip) in [
            (AccessKind::Read, 0x50_0100, 0x1000),
            (AccessKind::Read, 0x50_01f0, 0x1004),
            (AccessKind::Write, 0x50_0800, 0x1008),
            (AccessKind::Read, 0x40_2000, 0x100c),
            (AccessKind::Read, 0x90_0000, 0x1010),
            (AccessKind::Write, 0x60_1800, 0x1014),
        ] {
            o.access(kind, addr, ip, &r, &mut b, NO_THREAD);
        }
        assert!(o.has_late());
        let maps = [
            // The start's mapping merged with what follows it.
            mapping(0x40_0000, 0x40_3000, ""),
            mapping(0x50_0000, 0x50_1000, "/lib/libl.so"),
            mapping(0x60_0000, 0x60_1000, "/lib/libm.so"),
            mapping(0x60_1000, 0x60_2000, ""),
        ];
        let symbols = vec![GlobalSymbol {
            start: 0x50_0100,
            end: 0x50_0200,
            name: "table".into(),
        }];
        o.late_mappings(&maps, symbols);
        let d = o.finish(1);
        assert_eq!(d.unmapped.accesses(), 1, "0x90_0000: mapped by nothing");
        let rows: Vec<(u64, u64, &str, u64)> = d
            .regions
            .iter()
            .map(|r| (r.start, r.end, r.path.as_str(), r.counts.accesses()))
            .collect();
        assert_eq!(
            rows,
            [
                (0x40_0000, 0x40_1000, "/bin/p", 0),
                (0x50_0000, 0x50_1000, "/lib/libl.so", 1),
                (0x40_1000, 0x40_3000, "", 1),
                (0x60_0000, 0x60_1000, "/lib/libm.so", 0),
                (0x60_1000, 0x60_2000, "", 1),
            ]
        );
        let g = d.globals.as_ref().expect("globals");
        assert_eq!(g.rows.len(), 1);
        assert_eq!((g.rows[0].name.as_str(), g.rows[0].region), ("table", 1));
        assert_eq!(g.rows[0].counts.side(0), 2);
        let mut pairs: Vec<(u64, u64)> = g
            .by_instruction
            .iter()
            .map(|p| (p.ip, p.counts.accesses()))
            .collect();
        pairs.sort_unstable();
        assert_eq!(pairs, [(0x1000, 1), (0x1004, 1)]);
        let by = d.by_instruction.as_ref().unwrap();
        let mut regions: Vec<(u32, u64)> = by.regions.iter().map(|p| (p.site, p.ip)).collect();
        regions.sort_unstable();
        assert_eq!(regions, [(1, 0x1008), (2, 0x100c), (4, 0x1014)]);
    }

    /// A frame access more than 1 GiB below its CFA (a huge `alloca`) is
    /// its frame's but kept by no slot: counted as not kept by slot.
    #[test]
    fn a_slot_too_far_below_its_cfa_is_counted_not_kept() {
        let mut o = Objects::new(
            true,
            1,
            &[],
            vec![Mapping {
                start: 0x1000_0000,
                end: 0x9000_0000,
                perms: "rw-p".into(),
                path: "[stack]".into(),
            }],
        );
        o.thread_stack(0, 0x8fff_0000, 0, 0);
        let frames = [Frame {
            stack: 1,
            ret_slot: 0x8fff_f000,
            site: 0,
        }];
        let mut b = Budget::new(usize::MAX);
        let r = served(ServedBy::L1);
        for addr in [0x8fff_eff8, 0x1000_1000] {
            o.access(
                AccessKind::Write,
                addr,
                0x40_0000,
                &r,
                &mut b,
                (0, 0, &frames),
            );
        }
        let d = o.finish(1);
        let f = d.frames.as_ref().expect("frames");
        assert_eq!(f.rows[0].counts.accesses(), 2);
        assert_eq!(f.slots.len(), 1);
        assert_eq!((f.slots[0].below, f.slots[0].counts.accesses()), (0x10, 1));
        assert_eq!(f.slots_dropped.accesses(), 1);
    }

    #[test]
    fn a_sites_accesses_are_counted_per_instruction_exactly() {
        let d = run(100, &mut Budget::new(usize::MAX));
        let by = d.by_instruction.as_ref().unwrap();
        assert_eq!(by.dropped.accesses(), 0);
        assert_eq!(by.rows.len(), 100);
        for (k, r) in by.rows.iter().enumerate() {
            let k = k as u64;
            assert_eq!((r.site, r.ip), (0, 0x40_0000 + k * 1024));
            // [L1, memory] per side.
            assert_eq!(r.counts.served, [vec![k % 3 + 1, 0], vec![0, 1]]);
        }
        let sum: u64 = by.rows.iter().map(|r| r.counts.accesses()).sum();
        assert_eq!(sum, d.sites[0].counts.accesses());
        assert_eq!(sum, 100 + (34 + 33 * 2 + 33 * 3));
    }

    #[test]
    fn pairs_the_budget_refuses_are_counted_not_lost() {
        // Room for the index's first page and one page of pairs.
        let mut tight = Budget::new(2 * 4096);
        let d = run(100, &mut tight);
        let by = d.by_instruction.as_ref().unwrap();
        let kept = by.rows.len();
        assert!(kept > 0 && kept < 100, "{kept}");
        assert_eq!(kept, 4096 / std::mem::size_of::<Pair>());
        assert!(by.dropped.accesses() > 0);
        let sum: u64 = by.rows.iter().map(|r| r.counts.accesses()).sum();
        assert_eq!(sum + by.dropped.accesses(), d.sites[0].counts.accesses());
        // The instructions kept are counted exactly still.
        for r in &by.rows {
            let k = (r.ip - 0x40_0000) / 1024;
            assert_eq!(r.counts.served, [vec![k % 3 + 1, 0], vec![0, 1]]);
        }
    }
}
