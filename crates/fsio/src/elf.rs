//! ELF `PT_LOAD` segments: where a file offset lands in the addresses the
//! file states, and the load bias of a mapping (run-time address minus
//! stated address). Used by the capture engine's unwinder and
//! `--function` lookup, the resolver, the Callgrind export and the zones
//! symbolizer, which each carried a slightly different copy.
//!
//! The rule: a mapping (`start`, file `offset`, as in `/proc/PID/maps`)
//! is placed by the segment whose page-rounded file range holds `offset`;
//! since the loader maps `p_offset` at `p_vaddr + bias` and a mapping
//! starts on a page boundary, `bias = start - (p_vaddr - p_offset +
//! offset)`. The first page of a mapping can also hold the end of the
//! segment before it (segments share pages in the file, and lld gives
//! consecutive segments different `p_vaddr - p_offset`), so the segment
//! with the mapping's own permission (executable or not) is preferred,
//! then the one that starts in that page (the loader maps each segment
//! from its first page; a mapping starting inside a segment is one that
//! `mprotect` split, such as the RELRO part of the data segment).

use object::{Object, ObjectSegment};

/// Largest binary or debug file read (`crate::read_regular`): a dump or a
/// zones recording names its modules itself, so the name may be a device.
pub const MAX_ELF_FILE: u64 = 4 << 30;

/// Page size the loader aligns mappings to (x86-64).
const PAGE_MASK: u64 = 0xfff;

/// One `PT_LOAD` segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// `p_offset`.
    pub offset: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `PF_X` is set.
    pub executable: bool,
}

/// The `PT_LOAD` segments of one ELF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadSegments {
    segments: Vec<Segment>,
}

impl LoadSegments {
    /// The segments of a parsed file (`object` lists `PT_LOAD` only).
    pub fn of(file: &object::File<'_>) -> LoadSegments {
        let segments = file
            .segments()
            .map(|s| {
                let (offset, filesz) = s.file_range();
                let executable = match s.flags() {
                    object::SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
                    _ => false,
                };
                Segment {
                    offset,
                    filesz,
                    vaddr: s.address(),
                    executable,
                }
            })
            .collect();
        LoadSegments { segments }
    }

    /// Segments given by hand (tests, or a caller with its own parser).
    pub fn new(segments: Vec<Segment>) -> LoadSegments {
        LoadSegments { segments }
    }

    /// The segments, in file order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The stated address of file offset `off`, through the segment whose
    /// file bytes hold it.
    pub fn file_to_vaddr(&self, off: u64) -> Option<(u64, Segment)> {
        self.segments
            .iter()
            .find(|s| s.offset <= off && off - s.offset < s.filesz)
            .map(|s| (s.vaddr.wrapping_add(off - s.offset), *s))
    }

    /// The load bias of a mapping at run-time address `start` of file
    /// offset `offset` (page-aligned, as mappings are), `executable` if the
    /// mapping is; `None` if no segment places it.
    pub fn load_bias(&self, start: u64, offset: u64, executable: bool) -> Option<u64> {
        let holds = |s: &&Segment| s.offset & !PAGE_MASK <= offset && offset < s.offset + s.filesz;
        // Permission first (lld's text segment starts in the read-only
        // segment's last page), then a segment starting in this page over
        // one ending in it (two writable segments sharing a page).
        let seg = self
            .segments
            .iter()
            .filter(holds)
            .max_by_key(|s| (s.executable == executable, s.offset & !PAGE_MASK == offset))?;
        Some(start.wrapping_sub(seg.vaddr.wrapping_sub(seg.offset).wrapping_add(offset)))
    }
}

/// The load bias of a mapping of the ELF file `data` (see
/// [`LoadSegments::load_bias`]); `None` if `data` is not an object file
/// or no segment places the mapping.
pub fn load_bias(data: &[u8], start: u64, offset: u64, executable: bool) -> Option<u64> {
    let file = object::File::parse(data).ok()?;
    LoadSegments::of(&file).load_bias(start, offset, executable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(offset: u64, filesz: u64, vaddr: u64, executable: bool) -> Segment {
        Segment {
            offset,
            filesz,
            vaddr,
            executable,
        }
    }

    /// lld's layout: the read-only segment at offset 0, the text segment
    /// right after it in the file (same page) but a page higher in memory.
    /// The text mapping (offset 0, since it is page-rounded) belongs to
    /// the text segment: bias = start - (0x15f0 - 0x5f0 + 0).
    #[test]
    fn an_lld_text_mapping_is_placed_by_the_text_segment() {
        let s = LoadSegments::new(vec![
            seg(0, 0x5f0, 0, false),
            seg(0x5f0, 0x2000, 0x15f0, true),
            seg(0x25f0, 0x100, 0x45f0, false),
        ]);
        let base = 0x5555_0000_0000u64;
        // The loader maps the text segment's page at base + 0x1000.
        assert_eq!(s.load_bias(base + 0x1000, 0, true), Some(base));
        // The read-only mapping of the same page is placed by its own.
        assert_eq!(s.load_bias(base, 0, false), Some(base));
        // The data mapping (page of offset 0x25f0 at base + 0x4000).
        assert_eq!(s.load_bias(base + 0x4000, 0x2000, false), Some(base));

        // Per address: offset 0x600 is text, stated address 0x1600.
        assert_eq!(s.file_to_vaddr(0x600).map(|v| v.0), Some(0x1600));
        assert_eq!(s.file_to_vaddr(0x10).map(|v| v.0), Some(0x10));
        assert_eq!(s.file_to_vaddr(0x2700), None);
    }

    /// lld's two writable segments (RELRO, then `.data`), from `readelf
    /// -l` of a Rust test binary: the `rw-p` mapping at file offset
    /// 0xd7000 is `.data`'s (its first page), not the end of the RELRO
    /// segment, whose `p_vaddr - p_offset` is 0x1000 smaller.
    #[test]
    fn a_mapping_belongs_to_the_segment_starting_in_its_page() {
        let s = LoadSegments::new(vec![
            seg(0, 0x324f8, 0, false),
            seg(0x32500, 0x9bfc0, 0x33500, true),
            seg(0xce4c0, 0x8f68, 0xd04c0, false),
            seg(0xd7428, 0x9d8, 0xda428, false),
        ]);
        let base = 0x55ca_048e_d000u64;
        assert_eq!(s.load_bias(base + 0xda000, 0xd7000, false), Some(base));
        assert_eq!(s.load_bias(base + 0xd0000, 0xce000, false), Some(base));
        assert_eq!(s.load_bias(base + 0x33000, 0x32000, true), Some(base));
    }

    /// A non-PIE executable: stated addresses are run-time addresses.
    #[test]
    fn a_fixed_address_executable_has_bias_zero() {
        let s = LoadSegments::new(vec![
            seg(0, 0x4e0, 0x400000, false),
            seg(0x1000, 0x1b5, 0x401000, true),
        ]);
        assert_eq!(s.load_bias(0x401000, 0x1000, true), Some(0));
        assert_eq!(s.load_bias(0x402000, 0x2000, true), None);
    }
}
