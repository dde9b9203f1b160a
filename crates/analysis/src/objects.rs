//! The objects of `report --view data` (issue 32): the dump's `OBJS`
//! section (`coldcache_dump::Objects`, a capture made with `record
//! --objects`) named and ranked. Allocation sites are named by their call
//! stack's frames (innermost first); the other rows by the mapping they
//! lay in at the capture's start, classified here: a traced thread's stack
//! (the mapping its stack pointer was in when its tracing started), the
//! heap and anonymous mappings (blocks allocated before the window, or by
//! an allocator not observed), a module's writable data (`.data`, `.bss`,
//! and the anonymous mapping right after it, the rest of `.bss`),
//! read-only files, and the rest. A dump of version 10 on also has the
//! modules' globals (data symbols) as rows of their own, named by symbol
//! and module; their mappings' rows then hold the accesses outside them.
//!
//! A site's type and fields (dump version 7): its accesses per instruction
//! (section `OBJI`) joined with the `DATA` section's type and field of
//! each instruction (`DataTypes::access` and `DataTypes::label`, as the
//! data view looks them up; this module does not import `crate::data`,
//! whose view embeds this one). The site's type is the largest of its
//! types that holds the most frequent one at offset 0 and fits its blocks
//! ([`site_type`]); each field (of any type its instructions carry) gets
//! the accesses and misses of the instructions typed to it.

use crate::profile::Profile;
use coldcache_dump::{DataTypes, Dump, ObjectCounts, ObjectRegion, Objects};
use serde::Serialize;

/// One object row.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ObjectRow {
    /// `heap` (an allocation site), `mapping` (the mappings made by one
    /// call site of `mmap`, their accesses outside every block), `stack`,
    /// `thread-local`, `heap,
    /// allocated earlier`, `anonymous`, `module data`, `global` (a global
    /// or static variable of a module), `stack frame` (a function's frames
    /// on the traced threads' stacks, outside the locals named), `local`
    /// (a local variable or parameter of a function, all its frames
    /// together), `file`, `other`, `unmapped`.
    pub kind: String,
    /// What it is: the allocator and the site's innermost frame, or the
    /// mapping.
    pub label: String,
    /// An allocation site's allocator (`malloc`, `new`, ..); empty for
    /// other rows.
    pub allocator: String,
    /// An allocation site's frames, innermost first (`function
    /// (file:line)`); empty for other rows.
    pub frames: Vec<String>,
    /// The frame the label names: the first outside the runtime's
    /// allocation plumbing.
    pub user_frame: usize,
    /// Blocks allocated there (sites).
    pub blocks: u64,
    /// Their bytes, summed (sites); a global's size.
    pub bytes: u64,
    /// Of the blocks, those freed in the capture (sites).
    pub freed: u64,
    /// Data accesses.
    pub accesses: u64,
    /// Of those, reads (and read-modify-writes).
    pub reads: u64,
    /// Of those, writes.
    pub writes: u64,
    /// Accesses that missed each level, nearest first.
    pub misses: Vec<u64>,
    /// Coherence invalidations the accesses sent to other cores (0 in a
    /// dump without them: [`ObjectsView::coherence`]).
    pub invalidations: u64,
    /// Of those, false sharing: the other core had touched only other
    /// bytes of the line.
    pub false_sharing: u64,
    /// First address (mappings), 0 for sites.
    pub start: u64,
    /// One past the last (mappings).
    pub end: u64,
    /// An allocation site's type: the type most of its typed accesses
    /// carry; a mapping's (other than a stack): the type that more than
    /// half of them carry (empty: none typed, no such type, a stack, or no
    /// type data).
    #[serde(rename = "type")]
    pub ty: String,
    /// Of the row's accesses, those by instructions the resolver typed
    /// (sites, and mappings other than stacks).
    pub typed_accesses: u64,
    /// The row's accesses by field (the instructions' type and member
    /// path, `Type::a.b` as the data view labels it, or a global's name),
    /// most missed first.
    pub fields: Vec<FieldAccesses>,
    /// Line utilisation (a capture with `--line-use`,
    /// [`ObjectsView::line_use`]): the lines the row's accesses fetched
    /// into the first data level, over the instructions every one of
    /// whose data accesses is in this row (so that their rows' counters
    /// are the object's alone) ...
    pub lines_fetched: u64,
    /// ... the bytes of those lines used while they stayed, summed ...
    pub bytes_used: u64,
    /// ... and those instructions' accesses: the part of `accesses` the
    /// two figures cover (an instruction that touches several objects,
    /// `memcpy`'s, or a thread's stack, whose accesses are not kept per
    /// instruction, is left out of them).
    pub line_use_accesses: u64,
    /// What names the same object in another capture of the program
    /// (`diff --by object`): a site's allocator and the functions of its
    /// stack (not their lines, which move between builds); a mapping's kind
    /// and file, or its thread's index for a stack (addresses and thread ids
    /// change from run to run). Rows of one capture may share it (two sites
    /// in the same functions, several anonymous mappings).
    #[serde(skip)]
    pub identity: String,
}

/// The accesses of one allocation site by the instructions typed to one
/// field.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FieldAccesses {
    /// `Type::field` as the data view labels it.
    pub field: String,
    /// Data accesses.
    pub accesses: u64,
    /// Of those, reads (and read-modify-writes).
    pub reads: u64,
    /// Of those, writes.
    pub writes: u64,
    /// Accesses that missed each level, nearest first.
    pub misses: Vec<u64>,
}

/// The objects part of the data view.
#[derive(Clone, Debug, Serialize)]
pub struct ObjectsView {
    /// The levels, nearest first (the misses' order).
    pub levels: Vec<String>,
    /// Allocator entry points observed.
    pub allocators: usize,
    /// Allocations seen.
    pub allocations: u64,
    /// Frees seen of blocks seen allocated.
    pub frees: u64,
    /// Frees of blocks not seen allocated.
    pub unknown_frees: u64,
    /// Allocator calls never seen returning.
    pub unreturned: u64,
    /// Blocks still live at the end.
    pub live: u64,
    /// Allocations not tracked (a table full).
    pub untracked: u64,
    /// Whether the rows count coherence invalidations and false sharing
    /// (dumps of version 9 on; older ones say 0).
    pub coherence: bool,
    /// Data accesses in every row.
    pub accesses: u64,
    /// Of those, in heap blocks allocated in the capture (not counting
    /// the mappings made in it, also listed among `sites`).
    pub in_blocks: u64,
    /// Of those, in mappings made in the capture outside every block.
    pub in_mappings: u64,
    /// Allocation sites, and sites of mappings (kind `mapping`), by misses
    /// (nearest level first, then the last level, then accesses).
    pub sites: Vec<ObjectRow>,
    /// The other objects (mappings) with accesses, ranked the same way.
    pub others: Vec<ObjectRow>,
    /// Accesses the capture could not keep per instruction (its pair
    /// table full), of sites and mappings: in no row's `typed_accesses`
    /// nor fields.
    pub not_per_instruction: u64,
    /// Accesses of stack frames the capture could not keep by slot (its
    /// limit on slots reached, or a slot more than 1 GiB below its CFA):
    /// in their frames' rows, none of their locals'.
    pub not_per_slot: u64,
    /// Why the sites have no types (empty when they can have them).
    pub types_note: String,
    /// Whether the rows have line utilisation (a capture with
    /// `--line-use`).
    pub line_use: bool,
}

/// Why a dump's sites cannot be typed (empty when they can).
fn types_note(dump: &Dump, o: &Objects) -> String {
    if o.by_instruction.is_none() {
        "no per-instruction object data (a capture by an older coldcache): sites are not typed"
            .to_string()
    } else if dump.data.is_none() {
        "no data types (resolve the dump): sites are not typed".to_string()
    } else {
        String::new()
    }
}

/// Types and fields of each row ([`ObjectRow::ty`], `typed_accesses`,
/// `fields`) from its accesses per instruction `pairs` (`site`: the row's
/// index). Sites (`sites`): the type by [`site_type`]; a mapping holds
/// objects of many types, so it is given one only when a single type
/// carries most of its typed accesses (the heap allocated earlier, full of
/// one kind of node: that node).
fn type_rows(
    data: &DataTypes,
    pairs: &[coldcache_dump::SiteInstruction],
    rows: &mut [ObjectRow],
    sites: bool,
    levels: usize,
) {
    use std::collections::HashMap;
    // Per row: accesses per type, per field label.
    let mut types: Vec<HashMap<u32, u64>> = vec![HashMap::new(); rows.len()];
    let mut fields: Vec<HashMap<String, FieldAccesses>> = vec![HashMap::new(); rows.len()];
    for p in pairs {
        let Some(a) = data.access(p.ip) else {
            continue;
        };
        let s = p.site as usize;
        let n = p.counts.accesses();
        rows[s].typed_accesses += n;
        *types[s].entry(a.ty).or_default() += n;
        let label = data.label(a);
        let f = fields[s]
            .entry(label.clone())
            .or_insert_with(|| FieldAccesses {
                field: label,
                accesses: 0,
                reads: 0,
                writes: 0,
                misses: vec![0; levels],
            });
        f.accesses += n;
        f.reads += p.counts.side(0);
        f.writes += p.counts.side(1);
        for (l, m) in f.misses.iter_mut().enumerate() {
            *m += p.counts.misses(l + 1);
        }
    }
    for (s, r) in rows.iter_mut().enumerate() {
        let block = (r.blocks > 0).then(|| r.bytes.div_ceil(r.blocks));
        // The rows of memory mapped or grown before the window are not
        // sites: typed as mappings are.
        let before = [
            coldcache_dump::MAPPED_BEFORE_WINDOW,
            coldcache_dump::HEAP_BEFORE_WINDOW,
        ]
        .contains(&r.allocator.as_str());
        let ty = if sites && !before {
            site_type(data, &types[s], block)
        } else {
            types[s]
                .iter()
                .find(|(_, &n)| 2 * n > r.typed_accesses)
                .map(|(&t, _)| t)
        };
        r.ty = ty
            .and_then(|t| data.types.get(t as usize))
            .map_or_else(String::new, |t| t.name.clone());
        let mut f: Vec<FieldAccesses> = fields[s].drain().map(|(_, f)| f).collect();
        f.sort_by(|a, b| {
            b.misses
                .first()
                .cmp(&a.misses.first())
                .then(b.accesses.cmp(&a.accesses))
                .then_with(|| a.field.cmp(&b.field))
        });
        r.fields = f;
    }
}

/// A site's type from its typed accesses per type (`counts`): the type most
/// of them carry (then the name: one answer for equal counts), or, where
/// another of its types holds that one at offset 0 (a C++ class around its
/// base, a C struct whose first member is its "base": CPython's
/// `PyListObject` around its `_object` header) and fits in the site's
/// blocks (`block`: their mean size), the largest such one. Generic code
/// reaches the header through the base's pointer; the block is the
/// derived object.
fn site_type(
    data: &DataTypes,
    counts: &std::collections::HashMap<u32, u64>,
    block: Option<u64>,
) -> Option<u32> {
    let name = |t: u32| data.types.get(t as usize).map_or("", |d| d.name.as_str());
    let most = counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| name(*b.0).cmp(name(*a.0))))
        .map(|(&t, _)| t)?;
    let size = |t: u32| data.types.get(t as usize).map_or(0, |d| d.size);
    counts
        .keys()
        .copied()
        .filter(|&t| t != most && embeds_at_zero(data, t, most))
        .filter(|&t| block.is_none_or(|b| size(t) <= b))
        .max_by(|&a, &b| size(a).cmp(&size(b)).then_with(|| name(b).cmp(name(a))))
        .or(Some(most))
}

/// Whether type `outer` holds type `inner` at offset 0, through first
/// members (a base class, a struct's first field), at any depth.
fn embeds_at_zero(data: &DataTypes, outer: u32, inner: u32) -> bool {
    let mut t = outer;
    for _ in 0..32 {
        let Some(first) = data
            .types
            .get(t as usize)
            .and_then(|d| d.members.iter().find(|m| m.offset == 0 && m.bit_size == 0))
        else {
            return false;
        };
        if first.ty == inner {
            return true;
        }
        if first.ty == coldcache_dump::data::NO_TYPE || first.ty == t {
            return false;
        }
        t = first.ty;
    }
    false
}

/// Why a dump has no objects (empty when it has them).
pub fn objects_note(dump: &Dump) -> String {
    if dump.objects.is_some() {
        String::new()
    } else {
        "this dump has no object data (record with --objects to track heap blocks and mappings)"
            .to_string()
    }
}

/// Adds `b` to `a`.
fn add_counts(a: &mut ObjectCounts, b: &ObjectCounts) {
    for side in 0..2 {
        let (x, y) = (&mut a.served[side], &b.served[side]);
        if x.len() < y.len() {
            x.resize(y.len(), 0);
        }
        for (x, y) in x.iter_mut().zip(y) {
            *x += y;
        }
    }
    for k in 0..2 {
        a.coherence[k] += b.coherence[k];
    }
}

/// Takes `b`, a part of `a`, out of it, as far as `a` holds it; returns
/// what was taken.
fn sub_counts(a: &mut ObjectCounts, b: &ObjectCounts) -> ObjectCounts {
    let mut taken = ObjectCounts::default();
    for side in 0..2 {
        for (x, y) in a.served[side].iter_mut().zip(&b.served[side]) {
            let t = (*x).min(*y);
            *x -= t;
            taken.served[side].push(t);
        }
    }
    for k in 0..2 {
        let t = a.coherence[k].min(b.coherence[k]);
        a.coherence[k] -= t;
        taken.coherence[k] = t;
    }
    taken
}

fn row(kind: &str, label: String, c: &ObjectCounts, levels: usize) -> ObjectRow {
    ObjectRow {
        kind: kind.to_string(),
        label,
        allocator: String::new(),
        frames: Vec::new(),
        user_frame: 0,
        blocks: 0,
        bytes: 0,
        freed: 0,
        accesses: c.accesses(),
        reads: c.side(0),
        writes: c.side(1),
        misses: (1..=levels).map(|l| c.misses(l)).collect(),
        invalidations: c.invalidations(),
        false_sharing: c.false_sharing(),
        start: 0,
        end: 0,
        ty: String::new(),
        typed_accesses: 0,
        fields: Vec::new(),
        lines_fetched: 0,
        bytes_used: 0,
        line_use_accesses: 0,
        identity: String::new(),
    }
}

/// Per instruction address with data accesses: (data accesses, lines
/// fetched into the first data level, bytes of them used), summed over
/// its records; `None` for a dump without line utilisation counters.
type IpLineUse = rustc_hash::FxHashMap<u64, (u64, u64, u64)>;

fn line_use_by_ip(dump: &Dump) -> Option<IpLineUse> {
    let l = dump.layout()?;
    let (fi, ui) = (l.lines_fetched()?, l.bytes_used()?);
    let mut m = IpLineUse::default();
    for r in &dump.records {
        let n: u64 = [coldcache_dump::Side::Read, coldcache_dump::Side::Write]
            .into_iter()
            .flat_map(|side| l.served_from(side, 1))
            .map(|i| r.counters.get(i).copied().unwrap_or(0))
            .fold(0, u64::saturating_add);
        if n == 0 {
            continue;
        }
        let e = m.entry(r.ip).or_default();
        e.0 += n;
        e.1 += r.counters.get(fi).copied().unwrap_or(0);
        e.2 += r.counters.get(ui).copied().unwrap_or(0);
    }
    Some(m)
}

/// Each row's line utilisation ([`ObjectRow::lines_fetched`]) from its
/// accesses per instruction (`pairs`, rows by `site`): an instruction
/// counts for a row when all its data accesses are the row's.
fn line_use_rows(
    by_ip: &IpLineUse,
    pairs: &[coldcache_dump::SiteInstruction],
    rows: &mut [ObjectRow],
) {
    for p in pairs {
        let Some(&(n, fetched, used)) = by_ip.get(&p.ip) else {
            continue;
        };
        let Some(r) = rows.get_mut(p.site as usize) else {
            continue;
        };
        if p.counts.accesses() == n {
            r.lines_fetched += fetched;
            r.bytes_used += used;
            r.line_use_accesses += n;
        }
    }
}

/// [`ObjectRow::identity`] of mapping `i` of the start, of kind `kind`
/// ([`classify`]'s); a file named `program` (the executable's base name) is
/// `<program>`, as `diff` names the program's functions' module (two builds
/// compared are often two files).
fn region_identity(
    regions: &[ObjectRegion],
    i: usize,
    kind: &str,
    program: Option<&str>,
) -> String {
    let file = |path: &str| -> String {
        let b = base(path);
        if Some(b) == program {
            "<program>".to_string()
        } else {
            b.to_string()
        }
    };
    let r = &regions[i];
    if let Some(t) = r.thread {
        return format!("stack\0thread {t}");
    }
    if let Some(t) = r.tls {
        return format!("thread-local\0thread {t}");
    }
    match (kind, r.path.as_str()) {
        // The rest of a module's `.bss`: named by the module before it.
        ("module data", "") => {
            let module = preceding(regions, i).map_or(String::new(), |p| file(&p.path));
            format!("module data\0{module}\0.bss")
        }
        (_, "") => kind.to_string(),
        (_, p) if p.starts_with('/') => format!("{kind}\0{}\0{}", file(p), r.perms),
        (_, p) => format!("{kind}\0{p}"),
    }
}

/// The mapping that ends where mapping `i` begins: the one before it,
/// else (the mappings found at the capture's end follow the start's) any.
fn preceding(regions: &[ObjectRegion], i: usize) -> Option<&ObjectRegion> {
    let r = regions.get(i)?;
    match i.checked_sub(1).map(|j| &regions[j]) {
        Some(p) if p.end == r.start => Some(p),
        _ => regions
            .iter()
            .find(|p| p.end == r.start && p.start < r.start),
    }
}

/// The module whose data mapping `i` is (its file's base name; for the
/// anonymous rest of a `.bss`, the file mapped right before it), with the
/// executable (base name `program`) as `<program>` when given.
fn module_of(regions: &[ObjectRegion], i: usize, program: Option<&str>) -> String {
    let path = match regions.get(i) {
        Some(r) if r.path.is_empty() => preceding(regions, i)
            .filter(|p| p.path.starts_with('/'))
            .map_or("", |p| p.path.as_str()),
        Some(r) => r.path.as_str(),
        None => "",
    };
    match base(path) {
        "" => "?".to_string(),
        b if Some(b) == program => "<program>".to_string(),
        b => b.to_string(),
    }
}

/// Whether a frame is allocation plumbing of a language runtime.
fn is_plumbing(frame: &str) -> bool {
    let f = frame.trim_start_matches('<');
    [
        "alloc::",
        "core::",
        "std::",
        "__rust",
        "__rdl",
        "__gnu_cxx::new_allocator",
        "std::allocator",
        "std::__new_allocator",
        "hashbrown::",
        "T as alloc::",
        "T as core::",
        // CPython's object allocation: the type's constructor is the site.
        "PyObject_Malloc",
        "PyObject_Calloc",
        "PyObject_Realloc",
        "_PyObject_Malloc",
        "_PyObject_Calloc",
        "_PyObject_Realloc",
        "PyMem_",
        "_PyMem_",
        "gc_alloc",
        "_PyObject_GC_New",
        "_PyObject_GC_Resize",
        "PyType_GenericAlloc",
        "_PyType_AllocNoTrack",
        "PyObject_GC_",
    ]
    .iter()
    .any(|p| f.starts_with(p))
}

/// The allocators' entry points a mapping made inside one is named by
/// (`mmap by malloc in f`).
const ALLOCATOR_ENTRIES: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "operator new",
    "operator new[]",
    "operator delete",
    "PyObject_Malloc",
    "PyObject_Calloc",
    "PyObject_Realloc",
    "PyMem_Malloc",
    "PyMem_Calloc",
    "PyMem_Realloc",
];

/// Whether a frame is inside an allocator that maps memory for its own
/// use: glibc's malloc (large blocks, arenas for threads, `realloc`'s
/// `mremap`) and CPython's pymalloc (its arenas). By function name, as
/// their symbols name them.
fn maps_for_allocator(frame: &str) -> bool {
    let f = function_of(frame);
    ALLOCATOR_ENTRIES.contains(&f)
        || [
            "__libc_malloc",
            "__libc_calloc",
            "__libc_realloc",
            "__libc_free",
            "__libc_memalign",
            "_int_malloc",
            "_int_realloc",
            "_int_memalign",
            "_mid_memalign",
            "_int_free",
            "sysmalloc",
            "sysmalloc_mmap",
            "sysmalloc_mmap_fallback",
            "mremap_chunk",
            "munmap_chunk",
            "tcache_init",
            "new_heap",
            "alloc_new_heap",
            "_int_new_arena",
            "arena_get2",
            "_PyObject_ArenaMmap",
            "new_arena",
            "allocate_from_new_pool",
            "pymalloc_alloc",
            "_PyObject_Malloc",
            "_PyObject_Calloc",
            "_PyObject_Realloc",
            "_PyMem_RawMalloc",
            "_PyMem_RawRealloc",
            "_PyMem_RawCalloc",
        ]
        .contains(&f)
}

/// The function of a frame as [`objects`] labels it (`name (file:line)`),
/// with glibc's internal prefixes off (`__GI___libc_malloc` is `malloc`).
fn function_of(frame: &str) -> &str {
    // `operator new(unsigned long) (new_op.cc:50)`: the name before its
    // arguments.
    let f = frame.split(" (").next().unwrap_or(frame);
    let f = match f.find('(') {
        Some(i) if i > 0 => &f[..i],
        _ => f,
    };
    let f = f.strip_prefix("__GI_").unwrap_or(f);
    f.strip_prefix("__libc_").unwrap_or(f)
}

fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// How a mapping of the start is named: (kind, label).
fn classify(dump: &Dump, regions: &[ObjectRegion], i: usize) -> (&'static str, String) {
    let r = &regions[i];
    if let Some(t) = r.thread.and_then(|t| dump.threads.get(t as usize)) {
        return ("stack", format!("stack of thread {} ({})", t.tid, t.name));
    }
    if let Some(t) = r.tls.and_then(|t| dump.threads.get(t as usize)) {
        return (
            "thread-local",
            format!(
                "static TLS of thread {} ({}), with its mapping",
                t.tid, t.name
            ),
        );
    }
    let range = format!("{:#x}-{:#x}", r.start, r.end);
    match r.path.as_str() {
        "[stack]" => ("stack", "[stack] (main thread)".to_string()),
        "[heap]" => (
            "heap, allocated earlier",
            format!(
                "[heap] from {:#x} (blocks not seen allocated, the allocator's own words)",
                r.start
            ),
        ),
        "" => {
            // The rest of a module's `.bss` follows its last file-backed
            // writable mapping.
            if let Some(p) = preceding(regions, i) {
                if p.path.starts_with('/') && p.perms.contains('w') {
                    return ("module data", format!("{} .bss {range}", base(&p.path)));
                }
            }
            (
                "anonymous",
                format!("anonymous {range} (heap allocated earlier, or mmap)"),
            )
        }
        p if p.starts_with('/') && r.perms.contains('w') => {
            ("module data", format!("{} .data/.bss {range}", base(p)))
        }
        p if p.starts_with('/') => ("file", format!("{} ({}) {range}", base(p), r.perms)),
        p => ("other", format!("{p} {range}")),
    }
}

fn rank(rows: &mut [ObjectRow]) {
    rows.sort_by(|a, b| {
        let key = |r: &ObjectRow| {
            (
                r.misses.first().copied().unwrap_or(0),
                r.misses.last().copied().unwrap_or(0),
                r.accesses,
            )
        };
        key(b).cmp(&key(a)).then_with(|| a.label.cmp(&b.label))
    });
}

/// The objects of `p`'s dump, `None` when it has none. `limit` rows of
/// each list at most.
pub fn objects(p: &Profile, limit: Option<usize>) -> Option<ObjectsView> {
    let dump = p.dump();
    let o = dump.objects.as_ref()?;
    let levels = dump.meta.levels.len();
    let mut sites: Vec<ObjectRow> = o
        .sites
        .iter()
        .map(|s| {
            let frames: Vec<String> = p
                .stack_path(s.stack)
                .iter()
                .rev()
                .map(|f| {
                    let name = &p.function(f.function).name;
                    match p.file(f.file) {
                        Some(file) if f.line > 0 => {
                            format!("{name} ({}:{})", base(file), f.line)
                        }
                        _ => name.clone(),
                    }
                })
                .collect();
            // The site is named by its first frame outside the language
            // runtime's allocation plumbing (Rust's `alloc::`, a
            // `Vec`'s `RawVec`, C++'s allocators); a mapping's also
            // outside the allocators that map (malloc's large blocks,
            // pymalloc's arenas), the outermost of which it names.
            let mapping = s.is_mapping();
            // A mapping made inside an allocator: the frames up to the
            // outermost of its functions are the allocator's (named or
            // not: a stripped C library's internals have no names).
            let inside = frames
                .iter()
                .rposition(|f| maps_for_allocator(f))
                .filter(|_| mapping);
            let from = inside.map_or(0, |k| k + 1);
            let user = frames[from..]
                .iter()
                .position(|f| !is_plumbing(f))
                .map_or(0, |i| from + i);
            let by = inside.map_or(String::new(), |k| {
                format!(" by {}", function_of(&frames[k]))
            });
            let label = format!(
                "{}{by} in {}",
                s.allocator,
                frames.get(user).map_or("?", String::as_str)
            );
            let kind = if mapping { "mapping" } else { "heap" };
            let mut r = row(kind, label, &s.counts, levels);
            r.identity = std::iter::once(format!("{kind}\0{}", s.allocator))
                .chain(
                    p.stack_path(s.stack)
                        .iter()
                        .rev()
                        .map(|f| p.function(f.function).name.clone()),
                )
                .collect::<Vec<_>>()
                .join("\0");
            r.user_frame = user;
            r.allocator = s.allocator.clone();
            r.frames = frames;
            r.blocks = s.blocks;
            r.bytes = s.bytes;
            r.freed = s.freed;
            r
        })
        .collect();
    let program = dump.meta.program.first().map(|s| base(s));
    let mut others: Vec<ObjectRow> = (0..o.regions.len())
        .map(|i| {
            let (kind, label) = classify(dump, &o.regions, i);
            let mut r = row(kind, label, &o.regions[i].counts, levels);
            r.identity = region_identity(&o.regions, i, kind, program);
            r.start = o.regions[i].start;
            r.end = o.regions[i].end;
            r
        })
        .collect();
    if let (Some(data), Some(by)) = (dump.data.as_ref(), o.by_instruction.as_ref()) {
        type_rows(data, &by.rows, &mut sites, true, levels);
        type_rows(data, &by.regions, &mut others, false, levels);
    }
    let by_ip = line_use_by_ip(dump);
    if let (Some(by_ip), Some(by)) = (&by_ip, o.by_instruction.as_ref()) {
        line_use_rows(by_ip, &by.rows, &mut sites);
        line_use_rows(by_ip, &by.regions, &mut others);
    }
    others.retain(|r| r.accesses > 0);
    // The modules' globals (version 10): rows of their own, whose accesses
    // their mappings' rows leave out.
    if let Some(g) = &o.globals {
        // Statics of one name in several files of a module (two `static
        // int count;`): told apart by address.
        let mut seen: std::collections::HashMap<(String, &str), usize> = Default::default();
        for g in &g.rows {
            *seen
                .entry((
                    module_of(&o.regions, g.region as usize, None),
                    g.name.as_str(),
                ))
                .or_default() += 1;
        }
        let mut globals: Vec<ObjectRow> = g
            .rows
            .iter()
            .map(|g| {
                let i = g.region as usize;
                let module = module_of(&o.regions, i, None);
                let label = if seen[&(module.clone(), g.name.as_str())] > 1 {
                    format!("{} ({module} {:#x})", g.name, g.start)
                } else {
                    format!("{} ({module})", g.name)
                };
                let mut r = row("global", label, &g.counts, levels);
                r.identity = format!("global\0{}\0{}", module_of(&o.regions, i, program), g.name);
                r.start = g.start;
                r.end = g.start.saturating_add(g.size);
                r.bytes = g.size;
                r
            })
            .collect();
        if let Some(data) = dump.data.as_ref() {
            type_rows(data, &g.by_instruction, &mut globals, false, levels);
        }
        if let Some(by_ip) = &by_ip {
            line_use_rows(by_ip, &g.by_instruction, &mut globals);
        }
        others.extend(globals);
    }
    // The traced threads' stack frames (version 10): a row per function,
    // its frames on every call path and thread together.
    if let Some(f) = &o.frames {
        // A frame's function: its stack's callee, or, for frames found by
        // unwinding at the start (callee unknown), the function whose
        // frame makes the call of any stack called from it.
        let mut caller_of: std::collections::HashMap<u32, crate::profile::FnId> =
            Default::default();
        for (c, node) in dump.stacks.iter().enumerate() {
            if node.parent as usize == c {
                continue;
            }
            if let Some(fr) = p.stack_frames(c as u32).iter().rev().find(|f| !f.inlined) {
                caller_of.entry(node.parent).or_insert(fr.function);
            }
        }
        let mut by_fn: std::collections::BTreeMap<String, ObjectCounts> = Default::default();
        for r in &f.rows {
            // A call through the PLT has the stub as its callee: the
            // function that made the frame's own calls, else the stub's
            // target by name.
            let callee = p.stack_callee(r.stack);
            let stub = callee != crate::profile::NO_FN && p.function(callee).name.ends_with("@plt");
            let fid = match caller_of.get(&r.stack) {
                Some(&f) if stub || callee == crate::profile::NO_FN => Some(f),
                _ if callee != crate::profile::NO_FN => Some(callee),
                _ => None,
            };
            let name = fid.map_or_else(
                || "an unknown function".to_string(),
                |f| p.function(f).name.trim_end_matches("@plt").to_string(),
            );
            add_counts(by_fn.entry(name).or_default(), &r.counts);
        }
        // The frames' local variables (version 11): each slot's accesses
        // go to the variable DWARF places there at the slot's pc, taken
        // out of its function's frames.
        let mut split: std::collections::BTreeSet<String> = Default::default();
        // Per function, its frames' own words by kind (`[saved rbx]`,
        // `[return address]`): the rest of its frames, by field.
        let mut words: std::collections::HashMap<
            String,
            std::collections::BTreeMap<String, ObjectCounts>,
        > = Default::default();
        if let (Some(data), Some(syms)) = (dump.data.as_ref(), dump.symbols.as_ref()) {
            let mut locals: std::collections::BTreeMap<(String, String), (ObjectCounts, u32)> =
                Default::default();
            // Per (instruction, local): its accesses there, for line use
            // (an instruction all of whose accesses are one local's).
            let mut at_ip: std::collections::HashMap<(u64, (String, String)), u64> =
                Default::default();
            for sl in &f.slots {
                let Some(t) = data.slot(sl.pc, sl.below) else {
                    continue;
                };
                let Some(func) = syms
                    .location(sl.pc)
                    .and_then(|l| l.frames.last())
                    .and_then(|fr| syms.functions.get(fr.function as usize))
                else {
                    continue;
                };
                if t.ty == coldcache_dump::data::NO_TYPE {
                    add_counts(
                        words
                            .entry(func.name.clone())
                            .or_default()
                            .entry(t.variable.clone())
                            .or_default(),
                        &sl.counts,
                    );
                    continue;
                }
                let Some(frame) = by_fn.get_mut(&func.name) else {
                    continue;
                };
                // What the function's frames hold of it (all, but for a
                // tail call's: its frame is its caller's, by name).
                let taken = sub_counts(frame, &sl.counts);
                let key = (func.name.clone(), t.variable.clone());
                if by_ip.is_some() {
                    *at_ip.entry((sl.pc, key.clone())).or_default() += taken.accesses();
                }
                let l = locals
                    .entry(key)
                    .or_insert_with(|| (ObjectCounts::default(), t.ty));
                add_counts(&mut l.0, &taken);
                split.insert(func.name.clone());
            }
            let mut rows: Vec<ObjectRow> = Vec::with_capacity(locals.len());
            let mut row_of: std::collections::HashMap<(String, String), usize> = Default::default();
            for (key, (c, ty)) in locals {
                // All of it in a tail caller's frames: nothing here.
                if c.accesses() == 0 {
                    continue;
                }
                let (func, var) = &key;
                let mut r = row("local", format!("{var} in {func}"), &c, levels);
                r.identity = format!("local\0{func}\0{var}");
                if let Some(t) = data.types.get(ty as usize) {
                    r.ty = t.name.clone();
                    r.typed_accesses = r.accesses;
                }
                row_of.insert(key, rows.len());
                rows.push(r);
            }
            // Line use: the accessing instruction is the slot's pc in
            // the innermost frame (a call site is no record's address).
            if let Some(by_ip) = &by_ip {
                for ((pc, key), n) in at_ip {
                    let Some(&(all, fetched, used)) = by_ip.get(&pc) else {
                        continue;
                    };
                    if n == all {
                        let r = &mut rows[row_of[&key]];
                        r.lines_fetched += fetched;
                        r.bytes_used += used;
                        r.line_use_accesses += n;
                    }
                }
            }
            others.extend(rows);
        }
        others.extend(by_fn.into_iter().map(|(name, c)| {
            let label = if split.contains(&name) {
                format!("frames of {name}, outside its locals")
            } else {
                format!("frames of {name}")
            };
            let mut r = row("stack frame", label, &c, levels);
            r.identity = format!("stack frame\0{name}");
            // Its accesses by word: saved registers, return addresses
            // (as far as its frames hold them: a tail call's are its
            // caller's), and the rest.
            if let Some(w) = words.get(&name) {
                let mut rest = c.clone();
                let field = |label: &str, c: &ObjectCounts| FieldAccesses {
                    field: label.to_string(),
                    accesses: c.accesses(),
                    reads: c.side(0),
                    writes: c.side(1),
                    misses: (1..=levels).map(|l| c.misses(l)).collect(),
                };
                for (word, counts) in w {
                    let taken = sub_counts(&mut rest, counts);
                    if taken.accesses() > 0 {
                        r.fields.push(field(word, &taken));
                    }
                }
                if rest.accesses() > 0 && !r.fields.is_empty() {
                    r.fields.push(field(
                        "[other: spills, arguments, slots no variable names]",
                        &rest,
                    ));
                }
                r.fields.sort_by(|a, b| {
                    b.misses
                        .first()
                        .cmp(&a.misses.first())
                        .then(b.accesses.cmp(&a.accesses))
                });
            }
            r
        }));
    }
    // The anonymous memory mapped before the window (no call seen): a
    // mapping of the rest, not a site.
    for (name, kind, label) in [
        (
            coldcache_dump::MAPPED_BEFORE_WINDOW,
            "anonymous",
            "anonymous, mapped after the capture's start and before the window",
        ),
        (
            coldcache_dump::HEAP_BEFORE_WINDOW,
            "heap, allocated earlier",
            "[heap] grown after the capture's start and before the window (blocks not seen allocated, the allocator's own words)",
        ),
    ] {
        let Some(k) = sites.iter().position(|r| r.allocator == name) else {
            continue;
        };
        let mut r = sites.remove(k);
        if r.accesses > 0 {
            r.kind = kind.to_string();
            // Its mappings and bytes would count the capture's writer
            // thread's stack too: not shown.
            r.label = label.to_string();
            (r.blocks, r.bytes, r.freed) = (0, 0, 0);
            r.identity = format!("{kind}\0before the window");
            r.frames.clear();
            r.allocator.clear();
            others.push(r);
        }
    }
    let in_blocks = sites
        .iter()
        .filter(|r| r.kind == "heap")
        .map(|r| r.accesses)
        .sum();
    let in_mappings = sites
        .iter()
        .filter(|r| r.kind == "mapping")
        .map(|r| r.accesses)
        .sum();
    if o.unmapped.accesses() > 0 {
        let mut r = row(
            "unmapped",
            if o.named_at_end {
                "mapped during the capture and unmapped by its end (outside every block seen)"
            } else {
                "mapped during the capture (outside every block seen)"
            }
            .to_string(),
            &o.unmapped,
            levels,
        );
        r.identity = "unmapped".to_string();
        others.push(r);
    }
    let accesses = in_blocks + in_mappings + others.iter().map(|r| r.accesses).sum::<u64>();
    rank(&mut sites);
    rank(&mut others);
    if let Some(n) = limit {
        sites.truncate(n);
        others.truncate(n);
    }
    Some(ObjectsView {
        levels: dump.meta.levels.clone(),
        allocators: o.allocators.len(),
        allocations: o.allocations,
        frees: o.frees,
        unknown_frees: o.unknown_frees,
        unreturned: o.unreturned,
        live: o.live,
        untracked: o.untracked,
        coherence: o.coherence,
        accesses,
        in_blocks,
        in_mappings,
        sites,
        others,
        not_per_slot: o.frames.as_ref().map_or(0, |f| f.slots_dropped.accesses()),
        not_per_instruction: o
            .by_instruction
            .as_ref()
            .map_or(0, |b| b.dropped.accesses() + b.regions_dropped.accesses())
            + o.globals.as_ref().map_or(0, |g| g.dropped.accesses()),
        types_note: types_note(dump, o),
        line_use: by_ip.is_some() && o.by_instruction.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldcache_dump::data::{DataType, Member, NO_TYPE};
    use std::collections::HashMap;

    fn member(name: &str, offset: u64, size: u64, ty: u32) -> Member {
        Member {
            name: name.into(),
            offset,
            size,
            type_name: name.into(),
            ty,
            ..Member::default()
        }
    }

    fn ty(name: &str, size: u64, members: Vec<Member>) -> DataType {
        DataType {
            name: name.into(),
            size,
            members,
            ..DataType::default()
        }
    }

    /// `base` (8 bytes), `derived` holding it first (40), `derived2`
    /// holding `derived` first (48), `other` holding `base` second (16).
    fn types() -> DataTypes {
        DataTypes {
            types: vec![
                ty(
                    "base",
                    8,
                    vec![member("kind", 0, 4, NO_TYPE), member("refs", 4, 4, NO_TYPE)],
                ),
                ty(
                    "derived",
                    40,
                    vec![member("b", 0, 8, 0), member("x", 8, 32, NO_TYPE)],
                ),
                ty(
                    "derived2",
                    48,
                    vec![member("d", 0, 40, 1), member("y", 40, 8, NO_TYPE)],
                ),
                ty(
                    "other",
                    16,
                    vec![member("n", 0, 8, NO_TYPE), member("b", 8, 8, 0)],
                ),
            ],
            ..DataTypes::default()
        }
    }

    /// What `diff --by object` matches mappings by: no address, no thread
    /// id; a module's `.bss` rest by the module before it.
    #[test]
    fn globals_are_rows_named_by_module_and_told_apart_by_address_when_names_repeat() {
        use coldcache_dump::{Globals, ObjectGlobal, Objects};
        let counts = |n: u64| ObjectCounts {
            served: [vec![n, 1], vec![0, 0]],
            coherence: [0, 0],
        };
        let region = |start: u64, end: u64, path: &str, n: u64| ObjectRegion {
            start,
            end,
            perms: "rw-p".into(),
            path: path.into(),
            thread: None,
            tls: None,
            counts: counts(n),
        };
        let global = |region: u32, name: &str, start: u64, n: u64| ObjectGlobal {
            region,
            name: name.into(),
            start,
            size: 8,
            counts: counts(n),
        };
        let mut d = Dump::default();
        d.meta.levels = vec!["L1".into()];
        d.meta.program = vec!["/opt/game/bin/game".into()];
        d.objects = Some(Objects {
            regions: vec![
                region(0x60_0000, 0x60_1000, "/opt/game/bin/game", 3),
                region(0x60_1000, 0x60_3000, "", 0),
            ],
            globals: Some(Globals {
                rows: vec![
                    global(0, "count", 0x60_0010, 5),
                    global(0, "table", 0x60_0100, 7),
                    global(1, "count", 0x60_1020, 9),
                ],
                ..Globals::default()
            }),
            ..Objects::default()
        });
        let p = Profile::new(d, crate::ProfileOptions::default());
        let v = objects(&p, None).unwrap();
        let mut rows: Vec<(&str, &str, u64, u64)> = v
            .others
            .iter()
            .map(|r| (r.kind.as_str(), r.label.as_str(), r.accesses, r.bytes))
            .collect();
        rows.sort();
        assert_eq!(
            rows,
            [
                ("global", "count (game 0x600010)", 6, 8),
                ("global", "count (game 0x601020)", 10, 8),
                ("global", "table (game)", 8, 8),
                ("module data", "game .bss 0x601000-0x603000", 1, 0),
                ("module data", "game .data/.bss 0x600000-0x601000", 4, 0),
            ]
        );
        // Every access in one row: 4 + 1 + 6 + 8 + 10.
        assert_eq!(v.accesses, 29);
        let ids: Vec<&str> = v.others.iter().map(|r| r.identity.as_str()).collect();
        assert!(ids.contains(&"global\0<program>\0table"), "{ids:?}");
    }

    #[test]
    fn mappings_are_identified_without_their_addresses() {
        let region = |start: u64, end: u64, perms: &str, path: &str| ObjectRegion {
            start,
            end,
            perms: perms.into(),
            path: path.into(),
            thread: None,
            tls: None,
            counts: ObjectCounts::default(),
        };
        let mut regions = vec![
            region(0x40_0000, 0x40_1000, "r-xp", "/opt/game/bin/game"),
            region(0x60_0000, 0x60_1000, "rw-p", "/opt/game/bin/game"),
            region(0x60_1000, 0x60_3000, "rw-p", ""),
            region(0x7000_0000, 0x7000_8000, "rw-p", ""),
            region(0x7100_0000, 0x7100_1000, "rw-p", "/usr/lib/libz.so.1"),
            region(0x7ff0_0000, 0x7ff2_0000, "rw-p", "[stack]"),
            region(0x7ff3_0000, 0x7ff4_0000, "rw-p", ""),
            region(0x7ff5_0000, 0x7ff5_2000, "r-xp", "[vdso]"),
        ];
        regions[6].thread = Some(2);
        let d = Dump::default();
        let ids: Vec<String> = (0..regions.len())
            .map(|i| {
                let (kind, _) = classify(&d, &regions, i);
                region_identity(&regions, i, kind, Some("game"))
            })
            .collect();
        assert_eq!(
            ids,
            [
                "file\0<program>\0r-xp",
                "module data\0<program>\0rw-p",
                "module data\0<program>\0.bss",
                "anonymous",
                "module data\0libz.so.1\0rw-p",
                "stack\0[stack]",
                "stack\0thread 2",
                "other\0[vdso]",
            ]
        );
    }

    #[test]
    fn a_site_is_typed_by_the_largest_type_holding_its_most_frequent_one_first() {
        let d = types();
        let counts = |v: &[(u32, u64)]| v.iter().copied().collect::<HashMap<u32, u64>>();
        // Generic code through `base*` makes most accesses; the block is a
        // `derived`.
        assert_eq!(
            site_type(&d, &counts(&[(0, 100), (1, 10)]), Some(40)),
            Some(1)
        );
        // Two levels: `derived2` holds `derived`, which holds `base`.
        assert_eq!(
            site_type(&d, &counts(&[(0, 100), (1, 5), (2, 1)]), Some(48)),
            Some(2)
        );
        // A type larger than the blocks is not theirs.
        assert_eq!(
            site_type(&d, &counts(&[(0, 100), (1, 10)]), Some(32)),
            Some(0)
        );
        // `other` holds `base` at offset 8, not 0: not a derived type.
        assert_eq!(
            site_type(&d, &counts(&[(0, 100), (3, 10)]), Some(64)),
            Some(0)
        );
        // The most frequent is already the outer one.
        assert_eq!(
            site_type(&d, &counts(&[(0, 10), (1, 100)]), Some(40)),
            Some(1)
        );
        // Equal counts, unrelated types: the name decides, every time.
        assert_eq!(site_type(&d, &counts(&[(3, 7), (1, 7)]), None), Some(1));
        assert_eq!(site_type(&d, &HashMap::new(), None), None);
    }
}
