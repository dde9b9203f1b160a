//! Placements: the addresses of a capture moved as an unrelated edit or
//! another run would move them, for the layout-noise band (issue 37,
//! `coldcache sim --placements K`, `docs/noise-band.md`).
//!
//! A placement shifts every address (instruction fetches and data, and
//! the instruction address the prefetchers see) before the simulator sees
//! it. The address space is cut at the boundaries of the regions a trace
//! knows ([`regions_of`]); at each boundary a placement inserts a random
//! padding, a multiple of the line size below a bound ([`max_offset`]; a
//! few lines, [`FUNCTION_PADDING_LINES`], before a function's entry), so
//! an address moves by the sum of the paddings at or below it. The shift
//! never decreases with the address, so two distinct lines never land on
//! one (adjacent regions cannot overlap), and the layout inside a region
//! is kept while any two regions move relative to each other by a sum of
//! independent paddings: as a function added before another, or a global
//! before an array, moves everything after it.
//!
//! Pure and deterministic: the same regions, seed and placement number
//! give the same shifts. Placement 0 is the measured one (no shift).

use coldcache_dump::Dump;
use coldcache_sim::{Access, HierarchyConfig};

/// A range of addresses that moves as one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// First address.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// What it is: `code`, `stack`, `heap`, `data` (a file's other
    /// mappings), `anonymous`.
    pub kind: &'static str,
}

/// The regions a capture's dump skeleton tells apart: every module's
/// executable mapping (`code`), cut at the entry of every function the
/// stack tree names as a callee (`function`: from its entry to the next
/// one; a function added before another moves it within its module), and,
/// when the capture tracked objects
/// (`record --objects`: the skeleton holds the mappings at the capture's
/// start), every other mapping: each traced thread's stack, `[heap]`, each
/// file's other mappings (a module's read-only data, data and bss),
/// anonymous mappings. Without object tracking a trace knows only the
/// modules: the addresses between two modules' code (the first one's
/// data and whatever lies up to the next, the heap after the program's
/// data, stacks) move as one region each.
pub fn regions_of(skeleton: &Dump) -> Vec<Region> {
    let mut out: Vec<Region> = skeleton
        .modules
        .iter()
        .filter(|m| m.end > m.start)
        .map(|m| Region {
            start: m.start,
            end: m.end,
            kind: "code",
        })
        .collect();
    if let Some(o) = &skeleton.objects {
        for r in o.regions.iter().filter(|r| r.end > r.start) {
            if out.iter().any(|c| c.start == r.start && c.end == r.end) {
                continue;
            }
            let kind = if r.thread.is_some() || r.path == "[stack]" {
                "stack"
            } else if r.path == "[heap]" {
                "heap"
            } else if r.perms.contains('x') {
                "code"
            } else if r.path.is_empty() {
                "anonymous"
            } else {
                "data"
            };
            out.push(Region {
                start: r.start,
                end: r.end,
                kind,
            });
        }
    }
    out.sort_by_key(|r| (r.start, r.end));
    // Code cut at the entries of the functions called.
    let mut entries: Vec<u64> = skeleton
        .stacks
        .iter()
        .map(|n| n.callee)
        .filter(|&c| c != 0)
        .collect();
    entries.sort_unstable();
    entries.dedup();
    let mut cut = Vec::with_capacity(out.len() + entries.len());
    for r in out {
        if r.kind != "code" {
            cut.push(r);
            continue;
        }
        let inside =
            entries.partition_point(|&e| e <= r.start)..entries.partition_point(|&e| e < r.end);
        let mut start = r.start;
        let mut kind = "code";
        for &e in &entries[inside] {
            cut.push(Region {
                start,
                end: e,
                kind,
            });
            (start, kind) = (e, "function");
        }
        cut.push(Region {
            start,
            end: r.end,
            kind,
        });
    }
    cut
}

/// The regions in words: `7 regions moved independently: 5 code, 1
/// stack, 1 heap` (and, without the mappings, what moves with what).
pub fn describe(regions: &[Region], with_mappings: bool) -> String {
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    for r in regions {
        match kinds.iter_mut().find(|(k, _)| *k == r.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((r.kind, 1)),
        }
    }
    let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let mut s = format!(
        "{} regions moved independently: {}",
        regions.len(),
        list.join(", ")
    );
    if !with_mappings {
        s.push_str(
            "; the capture did not keep its mappings (record --objects does), so the \
             addresses between two modules' code (the program's data and heap, stacks, \
             anonymous mappings) move with the gap they lie in",
        );
    }
    s
}

/// The bound on each padding for `config`: the largest set span (sets ×
/// line size) of its levels, between 4 KiB and 1 MiB. A shift by a
/// multiple of a level's span leaves every line in the set it had, so
/// only shifts below it matter to that level; uniform below the largest
/// span, paddings are uniform modulo every (power-of-two) smaller one:
/// every level's set mapping is randomised, the first levels' (4 KiB
/// for 64 sets of 64 bytes) as much as the last's.
pub fn max_offset(config: &HierarchyConfig) -> u64 {
    let span = config
        .levels
        .iter()
        .map(|l| l.sets().saturating_mul(u64::from(l.line_size)))
        .max()
        .unwrap_or(0);
    span.next_power_of_two().clamp(4096, 1 << 20)
}

/// The alignment of the paddings: the largest line size of `config`
/// (at least 64), so that a moved access straddles lines as it did.
pub fn line_alignment(config: &HierarchyConfig) -> u64 {
    config
        .levels
        .iter()
        .map(|l| u64::from(l.line_size))
        .max()
        .unwrap_or(64)
        .max(64)
        .next_power_of_two()
}

/// The padding before a function inside its module is below this many
/// lines: an edit moves the functions after it by a few lines, and code
/// laid out contiguously stays nearly so (paddings up to a whole set span
/// between every two functions would scatter it, and the band would be of
/// layouts no linker makes).
pub const FUNCTION_PADDING_LINES: u64 = 8;

/// One placement: the shift of every address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The region boundaries, sorted and distinct.
    bounds: Vec<u64>,
    /// Per boundary: the shift of the addresses from it to the next.
    shifts: Vec<u64>,
    /// The range [lo, hi) and shift of the last instruction and data
    /// lookups.
    last: [(u64, u64, u64); 2],
}

/// SplitMix64: the stream the paddings are drawn from.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Placement {
    /// Placement `index` of `regions` for `seed`: a padding at every
    /// region boundary, a multiple of `align` in `[0, max_offset)`
    /// (`max_offset` a multiple of `align`), in `[0,
    /// FUNCTION_PADDING_LINES × align)` at the entry of a `function`
    /// region. Index 0 is the measured placement: no shift.
    pub fn new(regions: &[Region], seed: u64, index: u32, align: u64, max_offset: u64) -> Self {
        let align = align.max(1);
        // (boundary, padding bound): a function's entry inside its module
        // gets a few lines, every other boundary up to `max_offset`.
        let mut marks: Vec<(u64, u64)> = regions
            .iter()
            .flat_map(|r| {
                let start = if r.kind == "function" {
                    FUNCTION_PADDING_LINES * align
                } else {
                    max_offset
                };
                [(r.start, start), (r.end, max_offset)]
            })
            .collect();
        // One mark per address, with its smallest bound.
        marks.sort_unstable();
        marks.dedup_by_key(|m| m.0);
        let bounds: Vec<u64> = marks.iter().map(|m| m.0).collect();
        let mut state = seed ^ u64::from(index).wrapping_mul(0xd1b5_4a32_d192_ed03);
        let mut shift = 0u64;
        let shifts = marks
            .iter()
            .map(|&(_, bound)| {
                if index != 0 {
                    let steps = (bound / align).max(1);
                    shift = shift.wrapping_add(splitmix(&mut state) % steps * align);
                }
                shift
            })
            .collect();
        Placement {
            bounds,
            shifts,
            last: [(0, 0, 0); 2],
        }
    }

    /// The shift of `addr`.
    pub fn shift(&self, addr: u64) -> u64 {
        match self.bounds.partition_point(|&b| b <= addr) {
            0 => 0,
            i => self.shifts[i - 1],
        }
    }

    /// `addr` moved, through the one-range cache `which` (0 instructions,
    /// 1 data).
    #[inline]
    fn moved(&mut self, addr: u64, which: usize) -> u64 {
        let (lo, hi, s) = self.last[which];
        if addr >= lo && addr < hi {
            return addr.wrapping_add(s);
        }
        let i = self.bounds.partition_point(|&b| b <= addr);
        let lo = if i == 0 { 0 } else { self.bounds[i - 1] };
        let hi = self.bounds.get(i).copied().unwrap_or(u64::MAX);
        let s = if i == 0 { 0 } else { self.shifts[i - 1] };
        self.last[which] = (lo, hi, s);
        addr.wrapping_add(s)
    }

    /// `accesses` moved into `out` (emptied first): every address and
    /// instruction address shifted.
    pub fn apply(&mut self, accesses: &[Access], out: &mut Vec<Access>) {
        out.clear();
        out.reserve(accesses.len());
        for a in accesses {
            let data = usize::from(a.kind != coldcache_sim::AccessKind::InstrFetch);
            let addr = self.moved(a.addr, data);
            let ip = if a.ip == 0 { 0 } else { self.moved(a.ip, 0) };
            out.push(Access { addr, ip, ..*a });
        }
    }

    /// Whether no address moves (the measured placement, or no region).
    pub fn is_identity(&self) -> bool {
        self.shifts.iter().all(|&s| s == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldcache_sim::AccessKind;

    fn regions() -> Vec<Region> {
        vec![
            Region {
                start: 0x40_0000,
                end: 0x40_3000,
                kind: "code",
            },
            Region {
                start: 0x40_3000,
                end: 0x40_5000,
                kind: "data",
            },
            Region {
                start: 0x7ff0_0000,
                end: 0x7ff2_0000,
                kind: "stack",
            },
        ]
    }

    #[test]
    fn shifts_are_line_aligned_bounded_and_cumulative() {
        let r = regions();
        for index in 1..50 {
            let p = Placement::new(&r, 7, index, 64, 4096);
            // Below the first region nothing moves.
            assert_eq!(p.shift(0x1000), 0);
            let code = p.shift(0x40_0000);
            let data = p.shift(0x40_3000);
            let after_data = p.shift(0x40_5000);
            let stack = p.shift(0x7ff0_0000);
            let above = p.shift(0x8000_0000);
            // Inside a region the shift is one.
            assert_eq!(p.shift(0x40_2fff), code);
            assert_eq!(p.shift(0x7ff1_ffff), stack);
            // Each boundary adds a padding: a multiple of 64 below 4096.
            for (lo, hi) in [
                (0, code),
                (code, data),
                (data, after_data),
                (after_data, stack),
                (stack, above),
            ] {
                assert!(hi >= lo, "shifts never decrease");
                assert_eq!((hi - lo) % 64, 0);
                assert!(hi - lo < 4096);
            }
        }
    }

    #[test]
    fn by_hand_with_one_step() {
        // Paddings of 0 or 64 only (2 steps): every shift is a sum of 64s,
        // and the last line of the code and the first of the data, one
        // line apart, never land on one line.
        let r = regions();
        let mut seen_move = false;
        for index in 1..40 {
            let mut p = Placement::new(&r, 1, index, 64, 128);
            assert!(p.shift(0x40_0000) <= 64);
            assert!(p.shift(0x40_3000) <= 128);
            let a = [
                Access {
                    kind: AccessKind::InstrFetch,
                    addr: 0x40_2fc0,
                    size: 4,
                    ip: 0x40_2fc0,
                },
                Access {
                    kind: AccessKind::Read,
                    addr: 0x40_3000,
                    size: 8,
                    ip: 0x40_2fc0,
                },
            ];
            let mut out = Vec::new();
            p.apply(&a, &mut out);
            assert_eq!(out[0].addr, 0x40_2fc0 + p.shift(0x40_0000));
            assert_eq!(out[0].ip, out[0].addr);
            assert_eq!(
                out[1].ip, out[0].addr,
                "the data access's instruction moves with it"
            );
            assert!(
                out[1].addr / 64 > out[0].addr / 64,
                "distinct lines stay distinct"
            );
            seen_move |= out[1].addr != 0x40_3000;
        }
        assert!(seen_move);
    }

    #[test]
    fn same_seed_same_placement_and_the_measured_one_does_not_move() {
        let r = regions();
        assert_eq!(
            Placement::new(&r, 5, 3, 64, 16384),
            Placement::new(&r, 5, 3, 64, 16384)
        );
        assert_ne!(
            Placement::new(&r, 5, 3, 64, 16384),
            Placement::new(&r, 6, 3, 64, 16384)
        );
        assert_ne!(
            Placement::new(&r, 5, 3, 64, 16384),
            Placement::new(&r, 5, 4, 64, 16384)
        );
        assert!(Placement::new(&r, 5, 0, 64, 16384).is_identity());
        assert!(!Placement::new(&r, 5, 1, 64, 16384).is_identity());
    }

    #[test]
    fn regions_move_independently() {
        // Over placements, the code's and the data's shifts differ (the
        // data's padding is drawn on its own), and so do data and stack:
        // modulo a 4 KiB set span each relative offset takes many values.
        let r = regions();
        let mut code_data = std::collections::HashSet::new();
        let mut data_stack = std::collections::HashSet::new();
        for index in 1..200 {
            let p = Placement::new(&r, 11, index, 64, 16384);
            code_data.insert((p.shift(0x40_3000) - p.shift(0x40_0000)) % 4096);
            data_stack.insert((p.shift(0x7ff0_0000) - p.shift(0x40_3000)) % 4096);
        }
        assert!(code_data.len() > 40, "{}", code_data.len());
        assert!(data_stack.len() > 40, "{}", data_stack.len());
    }

    #[test]
    fn the_bound_is_the_largest_set_span() {
        use coldcache_sim::presets::{cachegrind, Geometry};
        let g = Geometry::new;
        // I1 and D1 32 KiB 8-way: 64 sets of 64 bytes, 4 KiB; LL 8 MiB
        // 16-way: 8192 sets, 512 KiB.
        let c = cachegrind(g(32 << 10, 8, 64), g(32 << 10, 8, 64), g(8 << 20, 16, 64));
        assert_eq!(max_offset(&c), 512 << 10);
        assert_eq!(line_alignment(&c), 64);
        // A small LL of 16 KiB 2-way (128 sets, 8 KiB) and 1 KiB L1s: 8 KiB.
        let c = cachegrind(g(1 << 10, 2, 64), g(1 << 10, 2, 64), g(16 << 10, 2, 64));
        assert_eq!(max_offset(&c), 8192);
        // Never under a page.
        let c = cachegrind(g(1 << 10, 2, 64), g(1 << 10, 2, 64), g(2 << 10, 2, 64));
        assert_eq!(max_offset(&c), 4096);
        // 128-byte lines: paddings of whole 128-byte lines.
        let c = cachegrind(g(32 << 10, 8, 64), g(32 << 10, 8, 128), g(8 << 20, 16, 128));
        assert_eq!(line_alignment(&c), 128);
    }

    #[test]
    fn regions_of_a_skeleton_by_hand() {
        use coldcache_dump::{Module, ObjectRegion, Objects, StackNode};
        let mut d = Dump {
            modules: vec![Module {
                path: "/bin/p".into(),
                start: 0x40_1000,
                end: 0x40_2000,
                ..Module::default()
            }],
            stacks: vec![
                StackNode::default(),
                StackNode {
                    parent: 0,
                    call_site: 0x40_1010,
                    callee: 0x40_1400,
                },
                StackNode {
                    parent: 1,
                    call_site: 0x40_1410,
                    callee: 0x40_1800,
                },
                // A callee outside every module (the vDSO unknown) cuts nothing.
                StackNode {
                    parent: 1,
                    call_site: 0x40_1420,
                    callee: 0x9000,
                },
            ],
            ..Dump::default()
        };
        let r = regions_of(&d);
        let spans: Vec<(u64, u64, &str)> = r.iter().map(|r| (r.start, r.end, r.kind)).collect();
        assert_eq!(
            spans,
            [
                (0x40_1000, 0x40_1400, "code"),
                (0x40_1400, 0x40_1800, "function"),
                (0x40_1800, 0x40_2000, "function"),
            ]
        );
        assert!(
            describe(&r, false).starts_with("3 regions moved independently: 1 code, 2 function;")
        );
        let region = |start, end, perms: &str, path: &str, thread| ObjectRegion {
            start,
            end,
            perms: perms.into(),
            path: path.into(),
            thread,
            tls: None,
            counts: Default::default(),
        };
        d.objects = Some(Objects {
            regions: vec![
                region(0x40_1000, 0x40_2000, "r-xp", "/bin/p", None),
                region(0x40_3000, 0x40_4000, "rw-p", "/bin/p", None),
                region(0x50_0000, 0x52_0000, "rw-p", "[heap]", None),
                region(0x7f00_0000, 0x7f10_0000, "rw-p", "", Some(1)),
                region(0x7f10_0000, 0x7f20_0000, "rw-p", "", None),
            ],
            ..Objects::default()
        });
        let kinds: Vec<&str> = regions_of(&d).iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            [
                "code",
                "function",
                "function",
                "data",
                "heap",
                "stack",
                "anonymous"
            ]
        );
    }
}
