//! The objects a capture's data accesses touched (issue 32), section
//! `OBJS` of dump version 5: heap blocks grouped by allocation site (the
//! call stack of the allocator's outermost call: what a user fixes), and
//! the rest by the mapping the address lay in at the capture's start
//! (each thread's stack, the heap and anonymous mappings holding blocks
//! allocated before the window, modules' data, files, other). Counted by
//! the capture engine (`coldcache_capture::objects`); named and ranked by
//! the views (`coldcache_analysis::objects`).
//!
//! Every data access (reads and read-modify-writes on the read side,
//! writes and non-temporal stores on the write side; prefetches and
//! flushes are not data accesses here, as in the code views) is counted
//! once, in the row of its first byte's object, at the level that served
//! it: summed over every row the figures equal the code views' data-side
//! `served` counters of the capture.
//!
//! Version 7 adds section `OBJI` ([`SiteInstructions`]): the same accesses
//! of each allocation site split by the instruction that made them, so the
//! views can join a site with the `DATA` section's type and field of each
//! instruction (the site's type, its fields' accesses).
//!
//! Version 10 adds section `OBJG` ([`Globals`]): the modules' global and
//! static variables (data symbols of their symbol tables at the capture's
//! start) as objects of their own, each with its accesses and those per
//! instruction. A mapping's row then counts only the accesses outside
//! every global it holds: summed over sites, mappings, globals and
//! `unmapped`, the rows still equal the code views' data accesses.

use crate::varint;
use crate::DumpError;
use serde::{Deserialize, Serialize};

/// What a row's accesses were and where they were served.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectCounts {
    /// Per side (0: reads, 1: writes), accesses served at each level,
    /// `[level 1, level 2, .., memory]` (the dump's levels plus one).
    pub served: [Vec<u64>; 2],
    /// Coherence invalidations the accesses sent to other cores, and of
    /// those the false sharing ones (version 9; 0 in older dumps, which
    /// [`Objects::coherence`] tells apart).
    #[serde(default)]
    pub coherence: [u64; 2],
}

impl ObjectCounts {
    /// Accesses of a side (0 reads, 1 writes).
    pub fn side(&self, s: usize) -> u64 {
        self.served[s]
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Every access.
    pub fn accesses(&self) -> u64 {
        self.side(0).saturating_add(self.side(1))
    }

    /// Accesses that missed cache level `level` (1-based): served below it.
    pub fn misses(&self, level: usize) -> u64 {
        self.served
            .iter()
            .flat_map(|s| s.iter().skip(level))
            .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Invalidations sent.
    pub fn invalidations(&self) -> u64 {
        self.coherence[0]
    }

    /// Of those, false sharing.
    pub fn false_sharing(&self) -> u64 {
        self.coherence[1]
    }

    fn encode(&self, b: &mut Vec<u8>) {
        for side in &self.served {
            varint::put(b, side.len() as u64);
            for &v in side {
                varint::put(b, v);
            }
        }
        for &v in &self.coherence {
            varint::put(b, v);
        }
    }

    /// A row of a dump of `version` (its coherence counts from 9).
    fn decode(r: &mut varint::Reader<'_>, version: u32) -> Result<ObjectCounts, DumpError> {
        let mut c = ObjectCounts::default();
        for side in c.served.iter_mut() {
            let n = r.count(1)?;
            for _ in 0..n {
                side.push(r.get()?);
            }
        }
        if version >= 9 {
            c.coherence = [r.get()?, r.get()?];
        }
        Ok(c)
    }
}

/// The heap blocks of one allocation site, or the mappings made at one
/// call site of `mmap` ([`AllocSite::is_mapping`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocSite {
    /// The stack id at the allocator's first instruction (its innermost
    /// frame is the call of the allocator).
    pub stack: u32,
    /// The outermost allocator called (`malloc`, `calloc`, `realloc`,
    /// `posix_memalign`, `aligned_alloc`, `new`, `new[]`, CPython's, or an
    /// allocator of the program's own by name), or the mapping call
    /// ([`MAPPING_ALLOCATORS`]: then inside an allocator call or not).
    pub allocator: String,
    /// Blocks allocated there during the capture (mappings made).
    pub blocks: u64,
    /// Their bytes (as requested; mappings: whole pages, and what
    /// `mremap` added), summed.
    pub bytes: u64,
    /// Of those blocks, the ones freed during the capture (mappings:
    /// unmapped whole).
    pub freed: u64,
    /// Accesses to its blocks (mappings: the accesses in them outside
    /// every block).
    pub counts: ObjectCounts,
}

/// The `allocator` of a site of mappings made in the capture (dump
/// version 10 on; older captures did not observe mappings). An allocator
/// of the program's own may not take these names.
pub const MAPPING_ALLOCATORS: &[&str] =
    &["mmap", "mremap", MAPPED_BEFORE_WINDOW, HEAP_BEFORE_WINDOW];

/// The `allocator` of the one site (stack 0) of the anonymous memory
/// mapped after the capture's start and before a window opened, while
/// nothing was traced: not a call seen, the mappings of `/proc/self/maps`
/// at the window's start that no other object covers.
pub const MAPPED_BEFORE_WINDOW: &str = "mapped before the window";

/// The `allocator` of the one site (stack 0) of the brk heap made or
/// grown after the capture's start and before a window opened (with half
/// the gap above it, where the break grows).
pub const HEAP_BEFORE_WINDOW: &str = "heap grown before the window";

impl AllocSite {
    /// Whether the site's objects are mappings (made by `mmap`, or by an
    /// `mremap` of a mapping made before the capture), not blocks.
    pub fn is_mapping(&self) -> bool {
        MAPPING_ALLOCATORS.contains(&self.allocator.as_str())
    }
}

/// A mapping of the process at the capture's start, with the accesses
/// that fell in it outside every block the capture saw allocated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRegion {
    /// First address.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// `rw-p` and friends.
    pub perms: String,
    /// The file or pseudo-name (`[heap]`, `[stack]`), empty for anonymous.
    pub path: String,
    /// The dump's thread index (into `threads`) of a traced thread whose
    /// stack pointer was in it when its tracing started: its stack.
    pub thread: Option<u32>,
    /// The dump's thread index of a traced thread whose thread pointer
    /// (FS base) was in it when its tracing started (and not its stack):
    /// its static thread-local storage.
    pub tls: Option<u32>,
    /// Accesses.
    pub counts: ObjectCounts,
}

/// The `OBJS` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Objects {
    /// Allocator entry points found at the start (`malloc`, `_Znwm`, ..).
    pub allocators: Vec<String>,
    /// Allocator calls seen returning a block (outermost calls).
    pub allocations: u64,
    /// Frees seen (`free`, `operator delete`, `realloc`'s old block) of a
    /// block the capture saw allocated.
    pub frees: u64,
    /// Frees of a block not seen allocated (allocated before the window,
    /// or by an allocator not observed): those addresses stayed attributed
    /// by mapping.
    pub unknown_frees: u64,
    /// Outermost allocator calls never seen returning (a `longjmp` or
    /// exception out of them, a thread that stopped inside one).
    pub unreturned: u64,
    /// Blocks allocated during the capture and still live at its end.
    pub live: u64,
    /// Allocations not tracked because a table could not grow (their
    /// accesses went by mapping).
    pub untracked: u64,
    /// Allocation sites, in order of first allocation.
    pub sites: Vec<AllocSite>,
    /// The mappings at the start, by address; then the mappings found
    /// at the capture's end holding accesses that no object held when
    /// they ran (a library's data, mapped by the dynamic linker).
    pub regions: Vec<ObjectRegion>,
    /// Accesses outside every block seen and every mapping of the start,
    /// at addresses no mapping held at the capture's end either (memory
    /// mapped and unmapped during the capture).
    pub unmapped: ObjectCounts,
    /// Whether the rows count coherence invalidations and false sharing
    /// (`ObjectCounts::coherence`): dumps of version 9 on.
    #[serde(default)]
    pub coherence: bool,
    /// Whether what no object held when accessed was named at the
    /// capture's end by the mappings then (`unmapped` holds only what no
    /// mapping held at the end): dumps of version 11 on.
    #[serde(default)]
    pub named_at_end: bool,
    /// The sites' accesses per instruction (version 7, section `OBJI`);
    /// `None` in older dumps.
    #[serde(default)]
    pub by_instruction: Option<SiteInstructions>,
    /// The modules' globals (version 10, section `OBJG`); `None` in older
    /// dumps, whose mappings' rows hold their globals' accesses.
    #[serde(default)]
    pub globals: Option<Globals>,
    /// The traced threads' stack frames (version 10, section `OBJF`);
    /// `None` in older dumps, whose stacks' rows hold every access.
    #[serde(default)]
    pub frames: Option<StackFrames>,
}

/// One stack frame's accesses: a thread's accesses to its own stack at
/// addresses of the frame of stack id `stack` (the frame whose function
/// ends that call path), every thread together.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameCounts {
    /// The call path's stack id (its innermost frame is the frame's
    /// function).
    pub stack: u32,
    /// Accesses.
    pub counts: ObjectCounts,
}

/// The accesses of frames to one stack slot: the bytes at `below` under
/// the frame's CFA (the address above its return address), while its
/// function was at `pc` (the accessing instruction in the innermost
/// frame; the call site of the frame above in the others). Which local
/// variable that is, the resolver reads from DWARF at `pc`
/// ([`crate::DataTypes::slots`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotCounts {
    /// Run-time pc in the frame's function.
    pub pc: u64,
    /// CFA minus the address of the access's first byte (8 is the
    /// return address's first byte).
    pub below: u64,
    /// Accesses.
    pub counts: ObjectCounts,
}

/// Section `OBJF`: stack frames as objects. A thread's access to its own
/// stack goes to the frame holding the address (the innermost frame whose
/// return-address slot lies at or above it); the stack's mapping keeps
/// the rest (addresses above the outermost frame the capture knows,
/// other threads' accesses, and `dropped`). Version 11 adds section
/// `OBJL`: the same accesses by stack slot (`slots`), so that the views
/// split a frame into its local variables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackFrames {
    /// The frames with accesses, by stack id.
    pub rows: Vec<FrameCounts>,
    /// Accesses not kept per frame (the table could not grow): in their
    /// stack's mapping row.
    pub dropped: u64,
    /// The rows' accesses by (pc, slot) (version 11; empty before).
    #[serde(default)]
    pub slots: Vec<SlotCounts>,
    /// Of the rows' accesses, those not kept by slot (the table full, or
    /// a slot more than 1 GiB below its CFA).
    #[serde(default)]
    pub slots_dropped: ObjectCounts,
}

impl StackFrames {
    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        varint::put(b, self.dropped);
        varint::put(b, self.rows.len() as u64);
        for f in &self.rows {
            varint::put(b, f.stack.into());
            f.counts.encode(b);
        }
    }

    /// Section `OBJL` (version 11): `slots` and `slots_dropped`.
    pub(crate) fn encode_slots(&self, b: &mut Vec<u8>) {
        varint::put(b, self.slots.len() as u64);
        for s in &self.slots {
            varint::put(b, s.pc);
            varint::put(b, s.below);
            s.counts.encode(b);
        }
        self.slots_dropped.encode(b);
    }

    pub(crate) fn decode_slots(&mut self, buf: &[u8], version: u32) -> Result<(), DumpError> {
        let mut r = varint::Reader::new(buf, "OBJL");
        let n = r.count(3)?;
        for _ in 0..n {
            self.slots.push(SlotCounts {
                pc: r.get()?,
                below: r.get()?,
                counts: ObjectCounts::decode(&mut r, version)?,
            });
        }
        self.slots_dropped = ObjectCounts::decode(&mut r, version)?;
        r.finish()
    }

    pub(crate) fn decode(
        buf: &[u8],
        nstacks: usize,
        version: u32,
    ) -> Result<StackFrames, DumpError> {
        const S: &str = "OBJF";
        let mut r = varint::Reader::new(buf, S);
        let mut f = StackFrames {
            dropped: r.get()?,
            ..StackFrames::default()
        };
        let n = r.count(3)?;
        for i in 0..n {
            let stack = r.get_u32()?;
            if stack as usize >= nstacks {
                return Err(DumpError::Malformed {
                    section: S,
                    what: format!("frame {i} names stack {stack} of {nstacks}"),
                });
            }
            f.rows.push(FrameCounts {
                stack,
                counts: ObjectCounts::decode(&mut r, version)?,
            });
        }
        r.finish()?;
        Ok(f)
    }
}

/// A global or static variable of a module: a data symbol (`STT_OBJECT`,
/// of a size) of the module's symbol table, at its address in the
/// process, with the accesses whose first byte fell in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectGlobal {
    /// The mapping (index into [`Objects::regions`]) that holds its first
    /// byte.
    pub region: u32,
    /// Its symbol's name (as the symbol table spells it until the dump is
    /// resolved, demangled after).
    pub name: String,
    /// Its first address in the process.
    pub start: u64,
    /// Its size in bytes (the symbol's).
    pub size: u64,
    /// Accesses.
    pub counts: ObjectCounts,
}

/// Section `OBJG`: the globals with accesses, and their accesses per
/// instruction. With nothing `dropped`, a global's rows sum to its
/// [`ObjectGlobal::counts`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Globals {
    /// The globals the capture's accesses touched, by address.
    pub rows: Vec<ObjectGlobal>,
    /// (global, instruction) pairs (`site` an index into `rows`), in
    /// order of first access.
    pub by_instruction: Vec<SiteInstruction>,
    /// Accesses of globals not kept per instruction (the pair table could
    /// not grow).
    pub dropped: ObjectCounts,
}

impl Globals {
    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        varint::put(b, self.rows.len() as u64);
        for g in &self.rows {
            varint::put(b, g.region.into());
            varint::put_bytes(b, g.name.as_bytes());
            varint::put(b, g.start);
            varint::put(b, g.size);
            g.counts.encode(b);
        }
        self.dropped.encode(b);
        varint::put(b, self.by_instruction.len() as u64);
        for r in &self.by_instruction {
            varint::put(b, r.site.into());
            varint::put(b, r.ip);
            r.counts.encode(b);
        }
    }

    pub(crate) fn decode(buf: &[u8], nregions: usize, version: u32) -> Result<Globals, DumpError> {
        const S: &str = "OBJG";
        let bad = |what: String| DumpError::Malformed { section: S, what };
        let mut r = varint::Reader::new(buf, S);
        let mut g = Globals::default();
        let n = r.count(6)?;
        for i in 0..n {
            let region = r.get_u32()?;
            if region as usize >= nregions {
                return Err(bad(format!(
                    "global {i} names mapping {region} of {nregions}"
                )));
            }
            g.rows.push(ObjectGlobal {
                region,
                name: r.string()?,
                start: r.get()?,
                size: r.get()?,
                counts: ObjectCounts::decode(&mut r, version)?,
            });
        }
        g.dropped = ObjectCounts::decode(&mut r, version)?;
        let n = r.count(4)?;
        for i in 0..n {
            let site = r.get_u32()?;
            if site as usize >= g.rows.len() {
                return Err(bad(format!(
                    "row {i} names global {site} of {}",
                    g.rows.len()
                )));
            }
            g.by_instruction.push(SiteInstruction {
                site,
                ip: r.get()?,
                counts: ObjectCounts::decode(&mut r, version)?,
            });
        }
        r.finish()?;
        Ok(g)
    }
}

/// The accesses of one allocation site made by one instruction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteInstruction {
    /// The site (index into [`Objects::sites`]).
    pub site: u32,
    /// The instruction's address.
    pub ip: u64,
    /// Its accesses to the site's blocks.
    pub counts: ObjectCounts,
}

/// Section `OBJI`: every allocation site's accesses split by instruction.
/// With nothing `dropped`, a site's rows sum to its [`AllocSite::counts`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteInstructions {
    /// (site, instruction) pairs, in order of first access.
    pub rows: Vec<SiteInstruction>,
    /// Site accesses not kept per instruction (the pair table could not
    /// grow: the memory budget), every site together.
    pub dropped: ObjectCounts,
    /// (mapping, instruction) pairs of the mappings other than threads'
    /// stacks (`site` is an index into [`Objects::regions`]), in order of
    /// first access: what the views type the heap allocated earlier, the
    /// anonymous mappings and the modules' data by. Version 8: written
    /// after the site rows when there are any; a section without them (and
    /// every version 7 one) reads empty.
    pub regions: Vec<SiteInstruction>,
    /// Accesses of those mappings not kept per instruction (the pair
    /// table could not grow).
    pub regions_dropped: ObjectCounts,
}

impl SiteInstructions {
    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        let rows = |b: &mut Vec<u8>, dropped: &ObjectCounts, rows: &[SiteInstruction]| {
            dropped.encode(b);
            varint::put(b, rows.len() as u64);
            for r in rows {
                varint::put(b, r.site.into());
                varint::put(b, r.ip);
                r.counts.encode(b);
            }
        };
        rows(b, &self.dropped, &self.rows);
        if self.regions.is_empty() && self.regions_dropped.accesses() == 0 {
            // What a capture without mapping pairs wrote before.
            return;
        }
        rows(b, &self.regions_dropped, &self.regions);
    }

    pub(crate) fn decode(
        buf: &[u8],
        nsites: usize,
        nregions: usize,
        version: u32,
    ) -> Result<SiteInstructions, DumpError> {
        const S: &str = "OBJI";
        let mut r = varint::Reader::new(buf, S);
        let mut o = SiteInstructions {
            dropped: ObjectCounts::decode(&mut r, version)?,
            ..SiteInstructions::default()
        };
        let rows = |r: &mut varint::Reader<'_>, n: usize, what: &str| {
            let count = r.count(4)?;
            let mut v = Vec::with_capacity(count);
            for i in 0..count {
                let site = r.get_u32()?;
                if site as usize >= n {
                    return Err(DumpError::Malformed {
                        section: S,
                        what: format!("{what} row {i} names {what} {site} of {n}"),
                    });
                }
                v.push(SiteInstruction {
                    site,
                    ip: r.get()?,
                    counts: ObjectCounts::decode(r, version)?,
                });
            }
            Ok(v)
        };
        o.rows = rows(&mut r, nsites, "site")?;
        if version >= 8 && r.position() < buf.len() {
            o.regions_dropped = ObjectCounts::decode(&mut r, version)?;
            o.regions = rows(&mut r, nregions, "mapping")?;
        }
        r.finish()?;
        Ok(o)
    }
}

impl Objects {
    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        varint::put(b, self.allocators.len() as u64);
        for a in &self.allocators {
            varint::put_bytes(b, a.as_bytes());
        }
        for v in [
            self.allocations,
            self.frees,
            self.unknown_frees,
            self.unreturned,
            self.live,
            self.untracked,
        ] {
            varint::put(b, v);
        }
        varint::put(b, self.sites.len() as u64);
        for s in &self.sites {
            varint::put(b, s.stack.into());
            varint::put_bytes(b, s.allocator.as_bytes());
            varint::put(b, s.blocks);
            varint::put(b, s.bytes);
            varint::put(b, s.freed);
            s.counts.encode(b);
        }
        varint::put(b, self.regions.len() as u64);
        for r in &self.regions {
            varint::put(b, r.start);
            varint::put(b, r.end);
            varint::put_bytes(b, r.perms.as_bytes());
            varint::put_bytes(b, r.path.as_bytes());
            varint::put(b, r.thread.map_or(0, |t| u64::from(t) + 1));
            varint::put(b, r.tls.map_or(0, |t| u64::from(t) + 1));
            r.counts.encode(b);
        }
        self.unmapped.encode(b);
    }

    pub(crate) fn decode(
        buf: &[u8],
        nstacks: usize,
        nthreads: usize,
        version: u32,
    ) -> Result<Objects, DumpError> {
        const S: &str = "OBJS";
        let bad = |what: String| DumpError::Malformed { section: S, what };
        let mut r = varint::Reader::new(buf, S);
        let n = r.count(1)?;
        let mut o = Objects {
            coherence: version >= 9,
            named_at_end: version >= 11,
            ..Objects::default()
        };
        for _ in 0..n {
            o.allocators.push(r.string()?);
        }
        o.allocations = r.get()?;
        o.frees = r.get()?;
        o.unknown_frees = r.get()?;
        o.unreturned = r.get()?;
        o.live = r.get()?;
        o.untracked = r.get()?;
        let n = r.count(7)?;
        for i in 0..n {
            let stack = r.get_u32()?;
            if stack as usize >= nstacks {
                return Err(bad(format!("site {i} names stack {stack} of {nstacks}")));
            }
            o.sites.push(AllocSite {
                stack,
                allocator: r.string()?,
                blocks: r.get()?,
                bytes: r.get()?,
                freed: r.get()?,
                counts: ObjectCounts::decode(&mut r, version)?,
            });
        }
        let n = r.count(8)?;
        for i in 0..n {
            let start = r.get()?;
            let end = r.get()?;
            let perms = r.string()?;
            let path = r.string()?;
            let mut thread_of = || -> Result<Option<u32>, DumpError> {
                Ok(match r.get_u32()? {
                    0 => None,
                    t if (t - 1) as usize >= nthreads => {
                        return Err(bad(format!(
                            "region {i} names thread {} of {nthreads}",
                            t - 1
                        )))
                    }
                    t => Some(t - 1),
                })
            };
            let thread = thread_of()?;
            let tls = thread_of()?;
            o.regions.push(ObjectRegion {
                start,
                end,
                perms,
                path,
                thread,
                tls,
                counts: ObjectCounts::decode(&mut r, version)?,
            });
        }
        o.unmapped = ObjectCounts::decode(&mut r, version)?;
        r.finish()?;
        // `by_instruction` is the separate section `OBJI`.
        Ok(o)
    }
}
