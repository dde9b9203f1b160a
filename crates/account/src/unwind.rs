//! DWARF CFI stack unwinding for seeding a thread's shadow call stack, with
//! the frame-pointer rule as framehop's own fallback.
//!
//! [`StackUnwinder::new`] runs in normal context when a capture is
//! prepared: it reads the `.eh_frame` / `.eh_frame_hdr` sections of every
//! ELF file mapped executable into this process and hands them to
//! [`framehop`], whose unwinder and rule cache use the
//! [`MustNotAllocateDuringUnwind`] policy (gimli's evaluation stacks are
//! fixed-size arrays, allocated once with the cache).
//!
//! [`StackUnwinder::unwind`] runs inside the SIGTRAP handler. It allocates
//! nothing, reads stack memory only through the reader it is given (the
//! trap engine's is `process_vm_readv`, so a wild address is an error, not a
//! fault), and
//! accepts a frame only while the return-address slots climb the stack, each
//! slot holds the return address it reports, and each return address lies in
//! an executable mapping.

use crate::maps::Mapping;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::Unwinder;
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind};
use object::{Object, ObjectSection};
use std::cell::Cell;
use std::ops::Range;

/// How far above the first stack pointer a return-address slot may lie
/// (the frame-pointer walk in the engine uses the same bound).
const MAX_STACK_SPAN: u64 = 64 << 20;

/// Unwind tables of this process's executable ELF files, ready for
/// allocation-free unwinding from a signal handler.
///
/// Built at capture start (may allocate, reads ELF files).
pub struct StackUnwinder {
    unwinder: UnwinderX86_64<Vec<u8>, MustNotAllocateDuringUnwind>,
    cache: CacheX86_64<MustNotAllocateDuringUnwind>,
    /// Every executable mapping (files, `[vdso]`, anonymous code), sorted by
    /// start: a return address outside all of them ends the walk.
    exec_ranges: Vec<(u64, u64)>,
    /// Files whose unwind tables were loaded.
    modules: usize,
}

impl StackUnwinder {
    /// From the executable mappings of a process (`/proc/self/maps`
    /// entries with `x` permission and an absolute path): for each ELF file,
    /// its `.eh_frame` and `.eh_frame_hdr` data and the addresses of those
    /// sections and of `.text` and `.got`, and its load bias.
    ///
    /// framehop reads the bytes of `.text` only for Mach-O files (compact
    /// unwind info does not cover prologues); ELF CFI covers every
    /// instruction, so no copy of the code is kept.
    ///
    /// Files that cannot be read or parsed, or that have no `.eh_frame`, get
    /// no module: addresses in them unwind with framehop's frame-pointer
    /// rule.
    ///
    /// `open` gives a file's bytes by path (the capture runtime maps the
    /// file read-only); `None` when it cannot be read.
    pub fn new<B: AsRef<[u8]>>(
        maps: &[Mapping],
        mut open: impl FnMut(&str) -> Option<B>,
    ) -> StackUnwinder {
        let mut exec_ranges: Vec<(u64, u64)> = maps
            .iter()
            .filter(|m| m.perms.contains('x') && m.start < m.end)
            .map(|m| (m.start, m.end))
            .collect();
        exec_ranges.sort_unstable();

        // One module per (file, load bias): the hull of its executable
        // mappings.
        let mut files: Vec<(&str, u64, Range<u64>)> = Vec::new();
        let mut unwinder = UnwinderX86_64::new();
        let mut modules = 0;
        let mut seen: Vec<&str> = Vec::new();
        for m in maps {
            if !m.perms.contains('x') || !m.path.starts_with('/') || seen.contains(&&*m.path) {
                continue;
            }
            seen.push(&m.path);
            let Some(data) = open(&m.path) else {
                continue;
            };
            let Ok(file) = object::File::parse(data.as_ref()) else {
                continue;
            };
            if file.format() != object::BinaryFormat::Elf {
                continue;
            }
            let segments = coldcache_fsio::elf::LoadSegments::of(&file);
            files.clear();
            for x in maps
                .iter()
                .filter(|x| x.path == m.path && x.perms.contains('x'))
            {
                let Some(bias) = segments.load_bias(x.start, x.offset, true) else {
                    continue;
                };
                match files.iter_mut().find(|f| f.1 == bias) {
                    Some(f) => {
                        f.2.start = f.2.start.min(x.start);
                        f.2.end = f.2.end.max(x.end);
                    }
                    None => files.push((&m.path, bias, x.start..x.end)),
                }
            }
            for (path, bias, range) in &files {
                let Some(info) = section_info(&file) else {
                    continue;
                };
                unwinder.add_module(Module::new(path.to_string(), range.clone(), *bias, info));
                modules += 1;
            }
        }
        StackUnwinder {
            unwinder,
            cache: CacheX86_64::new_in(),
            exec_ranges,
            modules,
        }
    }

    /// With no module: every frame unwinds with the frame-pointer rule,
    /// and no return address is accepted (no executable mapping is known).
    pub fn empty() -> StackUnwinder {
        StackUnwinder::new(&[], |_| None::<&[u8]>)
    }

    /// How many modules (file, load bias) have unwind tables.
    pub fn modules(&self) -> usize {
        self.modules
    }

    /// Whether `addr` lies in an executable mapping.
    fn in_exec(&self, addr: u64) -> bool {
        let i = self.exec_ranges.partition_point(|&(s, _)| s <= addr);
        i > 0 && addr < self.exec_ranges[i - 1].1
    }

    /// Unwinds from a thread's registers. Writes (return_address,
    /// slot_address) pairs, innermost caller first, where slot_address is
    /// the stack address holding that return address (the caller's CFA − 8)
    /// and returns how many were written, at most `out.len()`.
    ///
    /// At a function's first instruction (`rip` = its entry, `rsp` pointing
    /// at the return address) the first pair is (`[rsp]`, `rsp`), as the CFI
    /// of the entry says.
    ///
    /// Allocates nothing, never panics (in release builds; framehop's
    /// arithmetic on wild values could overflow-check in debug builds),
    /// never faults: stack memory is read through `read_word`. Stops at the
    /// first error or implausible frame: a slot that does not climb the
    /// stack, is misaligned, lies more than 64 MiB above `rsp`, or does not
    /// hold the return address; a return address outside the executable
    /// mappings.
    pub fn unwind(
        &mut self,
        rip: u64,
        rsp: u64,
        rbp: u64,
        read_word: &mut impl FnMut(u64) -> Option<u64>,
        out: &mut [(u64, u64)],
    ) -> usize {
        let mut regs = UnwindRegsX86_64::new(rip, rsp, rbp);
        // The last word read: framehop reads the return address last, so
        // checking that the slot holds it usually costs no extra read.
        let last_read = Cell::new((u64::MAX, 0u64));
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let v = read_word(addr).ok_or(())?;
            last_read.set((addr, v));
            Ok(v)
        };
        let mut address = FrameAddress::from_instruction_pointer(rip);
        let mut n = 0;
        let mut prev_slot: Option<u64> = None;
        while n < out.len() {
            let ret = match self.unwinder.unwind_frame(
                address,
                &mut regs,
                &mut self.cache,
                &mut read_stack,
            ) {
                Ok(Some(ret)) => ret,
                Ok(None) | Err(_) => break,
            };
            let Some(slot) = regs.sp().checked_sub(8) else {
                break;
            };
            let climbs = match prev_slot {
                None => slot >= rsp,
                Some(p) => slot > p,
            };
            if !climbs || slot & 7 != 0 || slot - rsp > MAX_STACK_SPAN || !self.in_exec(ret) {
                break;
            }
            let held = if last_read.get().0 == slot {
                last_read.get().1
            } else {
                match read_stack(slot) {
                    Ok(v) => v,
                    Err(()) => break,
                }
            };
            if held != ret {
                break;
            }
            out[n] = (ret, slot);
            n += 1;
            prev_slot = Some(slot);
            let Some(next) = FrameAddress::from_return_address(ret) else {
                break;
            };
            address = next;
        }
        n
    }
}

/// The sections framehop needs from an ELF file, or `None` without
/// `.eh_frame`.
fn section_info(file: &object::File<'_>) -> Option<ExplicitModuleSectionInfo<Vec<u8>>> {
    let range = |name: &str| {
        file.section_by_name(name)
            .map(|s| s.address()..s.address() + s.size())
    };
    let data = |name: &str| {
        file.section_by_name(name)
            .and_then(|s| s.data().ok())
            .filter(|d| !d.is_empty())
            .map(|d| d.to_vec())
    };
    let eh_frame = data(".eh_frame")?;
    Some(ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: range(".text"),
        got_svma: range(".got"),
        eh_frame_svma: range(".eh_frame"),
        eh_frame: Some(eh_frame),
        eh_frame_hdr_svma: range(".eh_frame_hdr"),
        eh_frame_hdr: data(".eh_frame_hdr"),
        ..Default::default()
    })
}
