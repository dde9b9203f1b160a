//! Finding a function by the name a person types, before a capture: for
//! `coldcache record --function NAME`, in the program and the libraries it
//! links (the caller lists them; this module reads their symbol tables).
//!
//! A name is matched against every defined function symbol (`.symtab`,
//! else `.dynsym`) of the files, in tiers; the first tier with a match
//! decides, so a more literal reading always wins over a looser one:
//!
//! 1. [`MatchKind::Exact`]: the symbol's own (mangled) name, `cmp` or
//!    `_ZNK3geo4Vec23dotERKS0_`;
//! 2. [`MatchKind::Demangled`]: the demangled name as `coldcache report`
//!    prints it (the same [`crate::demangle`]), with or without its
//!    parameter list: `geo::Vec2::dot(geo::Vec2 const&) const` or
//!    `geo::Vec2::dot`; Rust names without their hash;
//! 3. [`MatchKind::Suffix`]: the end of the name without its parameters, on
//!    a `::` boundary: `Vec2::dot`, `bump` for `prog::ns::Counter::bump`;
//! 4. [`MatchKind::Wildcard`]: `*` (any run) and `?` (one character), as
//!    Callgrind's `--toggle-collect`, over the mangled name, the demangled
//!    name and the name without its parameters: `count_and_sort*`,
//!    `geo::total*`.
//!
//! Symbols at one address of one file (aliases, C++ complete and base
//! object constructors) are one candidate.
//!
//! GCC's clone parts of a function — `f.cold` (its unlikely blocks),
//! `f.part.N` (partial inlining), `f.isra.N`, `f.constprop.N`,
//! `f.lto_priv.N` and their combinations (`f.constprop.0.isra.0`,
//! `f.part.0.cold`; [`clone_parent`]) — are matched by `f`'s names too, and
//! belong to `f`: a clone matched by any name other than its own full symbol
//! name becomes the candidate of its nearest ancestor that has a symbol (the
//! entry of the hot part), so `count_and_sort` and `count_and_sort*` find
//! one function where its `.cold` part made two. A clone whose base has no
//! symbol (`reject.isra.0` when `reject` was never emitted whole) is its
//! own candidate; a `.cold` part left without an ancestor is dropped when
//! another candidate remains (it is never entered by a call). The resolver
//! counts every part under the same ancestor ([`clone_ancestor`]). [`choose`] takes a single
//! candidate, or the program's own when only one of them is the program's
//! (the definition the loader binds first); anything else is ambiguous:
//! a breakpoint watches one address, and a capture of the wrong function
//! is worse than a refusal naming the candidates.

use coldcache_dump::names::NameMatch;
pub use coldcache_dump::names::{wildcard_match, without_parameters, without_return_type};
use std::path::{Path, PathBuf};

/// A defined function symbol of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionSymbol {
    /// The symbol's own name (mangled for C++ and Rust).
    pub raw: String,
    /// Its demangled name ([`crate::demangle`]; `raw` for C).
    pub demangled: String,
    /// Its ELF address (`st_value`).
    pub address: u64,
}

/// The function symbols of one ELF file.
#[derive(Clone, Debug)]
pub struct FileFunctions {
    /// The file.
    pub path: PathBuf,
    /// Whether it has a full symbol table (`.symtab`); without one only
    /// its exported functions are known (a stripped binary).
    pub has_symtab: bool,
    /// Defined function symbols, `.symtab`'s and `.dynsym`'s.
    pub functions: Vec<FunctionSymbol>,
}

/// Why a file's functions could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum FunctionsError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not an object file `object` can parse.
    #[error("{path} is not an ELF file this tool can read: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
}

/// Reads the defined function symbols of the ELF file `path`.
pub fn read_functions(path: &Path) -> Result<FileFunctions, FunctionsError> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = crate::elf::read_binary(path).map_err(|source| FunctionsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file = object::File::parse(&*data).map_err(|e| FunctionsError::Parse {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let has_symtab = file
        .section_by_name(".symtab")
        .is_some_and(|s| s.size() > 0);
    let mut functions: Vec<FunctionSymbol> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for s in file.symbols().chain(file.dynamic_symbols()) {
        if !s.is_definition() || s.kind() != object::SymbolKind::Text {
            continue;
        }
        let Ok(raw) = s.name() else { continue };
        if raw.is_empty() || !seen.insert((raw.to_string(), s.address())) {
            continue;
        }
        functions.push(FunctionSymbol {
            raw: raw.to_string(),
            demangled: crate::demangle(raw),
            address: s.address(),
        });
    }
    Ok(FileFunctions {
        path: path.to_path_buf(),
        has_symtab,
        functions,
    })
}

/// How a name matched (see the module doc for the tiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MatchKind {
    /// The symbol's own name.
    Exact,
    /// The demangled name, with or without its parameters.
    Demangled,
    /// The end of the name on a `::` boundary.
    Suffix,
    /// A wildcard pattern.
    Wildcard,
}

/// One function matching a name: a file and an address, with every
/// symbol there that matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Index of its file in the list searched.
    pub file: usize,
    /// Its ELF address.
    pub address: u64,
    /// The symbol's own name (the first that matched at this address).
    pub raw: String,
    /// Its demangled name.
    pub demangled: String,
    /// How it matched.
    pub kind: MatchKind,
}

/// The name `raw` is a clone part of, without its last clone suffix:
/// `f.cold` (or `f.cold.N`), `f.part.N`, `f.isra.N`, `f.constprop.N`,
/// `f.lto_priv.N` → `f`; `f.part.0.cold` → `f.part.0`; `None` for a name
/// without one. GCC appends these to the symbol's own (mangled) name.
pub fn clone_parent(raw: &str) -> Option<&str> {
    const KINDS: [&str; 5] = ["cold", "part", "isra", "constprop", "lto_priv"];
    let (head, last) = raw.rsplit_once('.')?;
    let parent = if last == "cold" {
        head
    } else if !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()) {
        let (head2, kind) = head.rsplit_once('.')?;
        if !KINDS.contains(&kind) {
            return None;
        }
        head2
    } else {
        return None;
    };
    (!parent.is_empty()).then_some(parent)
}

/// `raw` without every clone suffix ([`clone_parent`] repeated):
/// `f.constprop.0.isra.0` → `f`; `raw` itself when it has none.
pub fn clone_base(raw: &str) -> &str {
    let mut base = raw;
    while let Some(p) = clone_parent(base) {
        base = p;
    }
    base
}

/// Whether `raw` is (a part of) a `.cold` part: never entered by a call.
pub fn is_cold_part(raw: &str) -> bool {
    let mut name = raw;
    while let Some(p) = clone_parent(name) {
        if name[p.len()..].starts_with(".cold") {
            return true;
        }
        name = p;
    }
    false
}

/// The function the clone part `raw` belongs to: its furthest ancestor
/// ([`clone_parent`] repeated) for which `exists` says there is a symbol
/// (`f.part.0.cold` → `f` when `f` has one, else `f.part.0` when it has);
/// `None` when `raw` is no clone or none of its ancestors exists. One rule
/// for [`find_function`] and the resolver, so a function's parts are one
/// function everywhere.
pub fn clone_ancestor(raw: &str, exists: impl Fn(&str) -> bool) -> Option<&str> {
    let mut found = None;
    let mut name = raw;
    while let Some(p) = clone_parent(name) {
        if exists(p) {
            found = Some(p);
        }
        name = p;
    }
    found
}

/// The clones of the function `raw` of `file` that callers may call
/// instead of `raw`'s own entry: `raw.part.N` (callers that inlined the
/// header call the part), `raw.isra.N`, `raw.constprop.N`,
/// `raw.lto_priv.N` and their clones — every clone whose ancestors lead to
/// `raw`, `.cold` parts (entered by jumps from their function, never
/// called) left out. In symbol order.
pub fn callable_clones<'a>(file: &'a FileFunctions, raw: &str) -> Vec<&'a FunctionSymbol> {
    let mut v: Vec<&FunctionSymbol> = file
        .functions
        .iter()
        .filter(|f| f.raw.len() > raw.len() && f.raw.starts_with(raw) && !is_cold_part(&f.raw))
        .filter(|f| {
            let mut name = f.raw.as_str();
            while let Some(p) = clone_parent(name) {
                if p == raw {
                    return true;
                }
                name = p;
            }
            false
        })
        .collect();
    v.sort_by_key(|f| f.address);
    v.dedup_by_key(|f| f.address);
    v
}

/// How `f` matches `query`, if it does; a clone part also matches by its
/// base's names ([`clone_base`]).
fn matches(f: &FunctionSymbol, query: &str) -> Option<MatchKind> {
    let own = matches_own(f, query);
    if own.is_some() {
        return own;
    }
    let base = clone_base(&f.raw);
    if base.len() == f.raw.len() {
        return None;
    }
    let b = FunctionSymbol {
        raw: base.to_string(),
        demangled: crate::demangle(base),
        address: f.address,
    };
    matches_own(&b, query)
}

/// How `f`'s own names match `query`, if they do.
fn matches_own(f: &FunctionSymbol, query: &str) -> Option<MatchKind> {
    if f.raw == query {
        return Some(MatchKind::Exact);
    }
    // The demangled name's tiers are the views' (`coldcache_dump::names`);
    // a wildcard may also match the mangled name.
    match coldcache_dump::names::match_name(&f.demangled, query) {
        Some(NameMatch::Exact | NameMatch::Bare) => Some(MatchKind::Demangled),
        Some(NameMatch::Suffix) => Some(MatchKind::Suffix),
        Some(NameMatch::Wildcard) => Some(MatchKind::Wildcard),
        None if query.contains(['*', '?']) && wildcard_match(query, &f.raw) => {
            Some(MatchKind::Wildcard)
        }
        None => None,
    }
}

/// The functions of `files` that `query` names, in the best tier that has
/// any (see the module doc), one per (file, address), in file order.
pub fn find_function(files: &[FileFunctions], query: &str) -> Vec<Candidate> {
    let query = query.trim();
    let mut found: Vec<Candidate> = Vec::new();
    for (i, file) in files.iter().enumerate() {
        for f in &file.functions {
            let Some(kind) = matches(f, query) else {
                continue;
            };
            if let Some(best) = found.first() {
                if kind > best.kind {
                    continue;
                }
                if kind < best.kind {
                    found.clear();
                }
            }
            // A clone part named by anything but its own full name is its
            // function's candidate (the entry of the hot part).
            let f = match clone_ancestor(&f.raw, |p| file.functions.iter().any(|g| g.raw == p)) {
                Some(a) if f.raw != query => {
                    file.functions.iter().find(|g| g.raw == a).unwrap_or(f)
                }
                _ => f,
            };
            if found.iter().any(|c| c.file == i && c.address == f.address) {
                continue;
            }
            found.push(Candidate {
                file: i,
                address: f.address,
                raw: f.raw.clone(),
                demangled: f.demangled.clone(),
                kind,
            });
        }
    }
    // A `.cold` part with no ancestor is never called: not an entry to
    // watch while another candidate remains.
    if found.iter().any(|c| !is_cold_part(&c.raw)) {
        found.retain(|c| !is_cold_part(&c.raw) || c.raw == query);
    }
    found
}

/// The candidate to capture: the only one, or the only one in the program
/// (file 0) — the definition the loader binds first; `None` when that
/// leaves several (ambiguous) or there is none.
pub fn choose(candidates: &[Candidate]) -> Option<&Candidate> {
    match candidates {
        [] => None,
        [one] => Some(one),
        _ => {
            let mut own = candidates.iter().filter(|c| c.file == 0);
            match (own.next(), own.next()) {
                (Some(c), None) => Some(c),
                _ => None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_cut_where_the_list_starts() {
        for (name, base) in [
            ("geo::Vec2::dot(geo::Vec2 const&) const", "geo::Vec2::dot"),
            ("count_and_sort", "count_and_sort"),
            (
                "geo::(anonymous namespace)::scale(int, int)",
                "geo::(anonymous namespace)::scale",
            ),
            (
                "geo::Vec2::operator+(geo::Vec2 const&) const",
                "geo::Vec2::operator+",
            ),
            ("Functor::operator()(int)", "Functor::operator()"),
            ("a::operator<<(std::ostream&)", "a::operator<<"),
            ("a::operator<(a const&)", "a::operator<"),
            ("a::operator->()", "a::operator->"),
            (
                "void std::__sort<int*>(int*, int*, std::function<void (int)>)",
                "void std::__sort<int*>",
            ),
            (
                "geo::total<double>(std::vector<double, std::allocator<double> > const&)",
                "geo::total<double>",
            ),
            (
                "main::{lambda(int)#1}::operator()(int) const",
                "main::{lambda(int)#1}::operator()",
            ),
        ] {
            assert_eq!(without_parameters(name), base, "{name}");
        }
    }

    #[test]
    fn return_types_are_cut_before_the_name() {
        assert_eq!(
            without_return_type("int geo::total<int>"),
            "geo::total<int>"
        );
        assert_eq!(
            without_return_type("unsigned long f<unsigned long>"),
            "f<unsigned long>"
        );
        assert_eq!(
            without_return_type("geo::(anonymous namespace)::scale"),
            "geo::(anonymous namespace)::scale"
        );
    }

    #[test]
    fn wildcards_as_callgrind_takes_them() {
        assert!(wildcard_match("count_and_sort*", "count_and_sort"));
        assert!(wildcard_match("count_and_sort*", "count_and_sort_v2"));
        assert!(!wildcard_match("count_and_sort*", "xcount_and_sort"));
        assert!(wildcard_match("*sort*", "count_and_sort_v2"));
        assert!(wildcard_match("c?p", "cmp"));
        assert!(!wildcard_match("c?p", "cp"));
        assert!(wildcard_match("a*b*c", "aXbYbZc"));
        assert!(!wildcard_match("a*b*c", "aXbYbZ"));
        assert!(wildcard_match("*", ""));
    }

    fn file(path: &str, names: &[(&str, &str, u64)]) -> FileFunctions {
        FileFunctions {
            path: path.into(),
            has_symtab: true,
            functions: names
                .iter()
                .map(|&(raw, demangled, address)| FunctionSymbol {
                    raw: raw.into(),
                    demangled: demangled.into(),
                    address,
                })
                .collect(),
        }
    }

    /// The tiers by hand: the most literal match wins; aliases are one
    /// candidate; the program's own definition beats a library's; two in
    /// the program are ambiguous.
    #[test]
    fn names_resolve_by_tier_and_ambiguity_is_refused() {
        let files = [
            file(
                "prog",
                &[
                    ("count_and_sort", "count_and_sort", 0x10),
                    ("count_and_sort_v2", "count_and_sort_v2", 0x20),
                    (
                        "_ZN3geo4Vec23dotERKS0_",
                        "geo::Vec2::dot(geo::Vec2 const&)",
                        0x30,
                    ),
                    ("_ZN3geo5totalIiEET_v", "int geo::total<int>()", 0x40),
                    ("_ZN3geo5totalIdEET_v", "double geo::total<double>()", 0x50),
                    ("_ZN3geo1CC1Ev", "geo::C::C()", 0x60),
                    ("_ZN3geo1CC2Ev", "geo::C::C()", 0x60),
                    (
                        "_ZN4prog2ns7Counter4bump17h0123456789abcdefE",
                        "prog::ns::Counter::bump",
                        0x70,
                    ),
                    ("qsort", "qsort", 0x80),
                ],
            ),
            file(
                "libc.so.6",
                &[("qsort", "qsort", 0x1000), ("cmp", "cmp", 0x2000)],
            ),
        ];
        let one = |q: &str| {
            let c = find_function(&files, q);
            choose(&c).map(|c| (c.file, c.address, c.kind))
        };
        assert_eq!(one("count_and_sort"), Some((0, 0x10, MatchKind::Exact)));
        assert_eq!(one("count_and_sort*"), None, "two match: ambiguous");
        assert_eq!(find_function(&files, "count_and_sort*").len(), 2);
        assert_eq!(
            one("count_and_sort_v*"),
            Some((0, 0x20, MatchKind::Wildcard))
        );
        assert_eq!(one("geo::Vec2::dot"), Some((0, 0x30, MatchKind::Demangled)));
        assert_eq!(
            one("geo::Vec2::dot(geo::Vec2 const&)"),
            Some((0, 0x30, MatchKind::Demangled))
        );
        assert_eq!(one("Vec2::dot"), Some((0, 0x30, MatchKind::Suffix)));
        assert_eq!(
            one("_ZN3geo4Vec23dotERKS0_"),
            Some((0, 0x30, MatchKind::Exact))
        );
        assert_eq!(one("geo::total*"), None);
        assert_eq!(
            one("geo::total<int>"),
            Some((0, 0x40, MatchKind::Demangled))
        );
        assert_eq!(one("total<double>"), Some((0, 0x50, MatchKind::Suffix)));
        assert_eq!(one("geo::C::C"), Some((0, 0x60, MatchKind::Demangled)));
        assert_eq!(one("ns::Counter::bump"), Some((0, 0x70, MatchKind::Suffix)));
        assert_eq!(one("bump"), Some((0, 0x70, MatchKind::Suffix)));
        assert_eq!(
            one("qsort"),
            Some((0, 0x80, MatchKind::Exact)),
            "the program's"
        );
        assert_eq!(one("cmp"), Some((1, 0x2000, MatchKind::Exact)));
        assert_eq!(one("Counter::bum"), None);
        assert!(find_function(&files, "nothing").is_empty());
    }

    #[test]
    fn clone_suffixes_are_parsed_as_gcc_writes_them() {
        for (raw, parent, base) in [
            ("f.cold", Some("f"), "f"),
            ("f.cold.3", Some("f"), "f"),
            ("f.part.0", Some("f"), "f"),
            ("f.isra.12", Some("f"), "f"),
            ("f.constprop.0.isra.0", Some("f.constprop.0"), "f"),
            ("f.part.0.cold", Some("f.part.0"), "f"),
            ("_Z3fooi.lto_priv.0", Some("_Z3fooi"), "_Z3fooi"),
            ("f", None, "f"),
            ("f.7", None, "f.7"),
            ("f.part", None, "f.part"),
            ("f.coldx", None, "f.coldx"),
            (".cold", None, ".cold"),
        ] {
            assert_eq!(clone_parent(raw), parent, "{raw}");
            assert_eq!(clone_base(raw), base, "{raw}");
        }
        assert!(is_cold_part("f.part.0.cold"));
        assert!(is_cold_part("f.cold.1"));
        assert!(!is_cold_part("f.constprop.0"));
        let have = ["f", "f.part.0"];
        let exists = |n: &str| have.contains(&n);
        assert_eq!(clone_ancestor("f.part.0.cold", exists), Some("f"));
        assert_eq!(clone_ancestor("g.part.0.cold", exists), None);
        assert_eq!(clone_ancestor("f", exists), None);
    }

    /// A function with clone parts is one candidate, at its hot entry, by
    /// its plain name, a wildcard or its demangled name; a part named in
    /// full is itself; a clone without its base is its own candidate.
    #[test]
    fn clone_parts_belong_to_their_function() {
        let files = [
            file(
                "prog",
                &[
                    ("count_and_sort", "count_and_sort", 0x100),
                    ("count_and_sort.cold", "count_and_sort.cold", 0x10),
                    ("count_and_sort.part.0", "count_and_sort.part.0", 0x180),
                    (
                        "count_and_sort.part.0.cold",
                        "count_and_sort.part.0.cold",
                        0x18,
                    ),
                    ("_Z5countv", "count()", 0x200),
                    ("_Z5countv.cold", "count() [clone .cold]", 0x20),
                    ("reject.isra.0", "reject.isra.0", 0x300),
                    ("scan.constprop.0.isra.0", "scan.constprop.0.isra.0", 0x400),
                    ("scan.constprop.1", "scan.constprop.1", 0x480),
                    ("lonely.cold", "lonely.cold", 0x40),
                    ("lonely.part.0", "lonely.part.0", 0x500),
                ],
            ),
            file("libc.so.6", &[("count_and_sort", "count_and_sort", 0x1000)]),
        ];
        let all = |q: &str| -> Vec<(usize, u64, MatchKind)> {
            find_function(&files, q)
                .iter()
                .map(|c| (c.file, c.address, c.kind))
                .collect()
        };
        let one = |q: &str| {
            let c = find_function(&files, q);
            choose(&c).map(|c| (c.file, c.address, c.raw.clone()))
        };
        assert_eq!(
            all("count_and_sort"),
            [(0, 0x100, MatchKind::Exact), (1, 0x1000, MatchKind::Exact)]
        );
        assert_eq!(
            one("count_and_sort"),
            Some((0, 0x100, "count_and_sort".into()))
        );
        assert_eq!(
            one("count_and_sort*"),
            Some((0, 0x100, "count_and_sort".into()))
        );
        assert_eq!(one("count()"), Some((0, 0x200, "_Z5countv".into())));
        assert_eq!(one("count"), Some((0, 0x200, "_Z5countv".into())));
        assert_eq!(one("cou?t"), Some((0, 0x200, "_Z5countv".into())));
        assert_eq!(
            one("count_and_sort.cold"),
            Some((0, 0x10, "count_and_sort.cold".into())),
            "named in full, the part itself"
        );
        assert_eq!(
            one("count_and_sort.part.0"),
            Some((0, 0x180, "count_and_sort.part.0".into()))
        );
        assert_eq!(one("reject"), Some((0, 0x300, "reject.isra.0".into())));
        assert_eq!(all("scan").len(), 2, "two specialised copies, no base");
        assert_eq!(one("scan"), None);
        assert_eq!(
            one("lonely"),
            Some((0, 0x500, "lonely.part.0".into())),
            "the cold part is no entry"
        );
        let clones: Vec<&str> = callable_clones(&files[0], "count_and_sort")
            .iter()
            .map(|f| f.raw.as_str())
            .collect();
        assert_eq!(clones, ["count_and_sort.part.0"], "no .cold part");
        assert!(callable_clones(&files[0], "_Z5countv").is_empty());
        assert!(
            callable_clones(&files[0], "count").is_empty(),
            "not a prefix match"
        );
    }
}

/// The address of `main` in a program whose symbol table was stripped,
/// read from its entry code: the C library's `_start` (glibc's
/// `sysdeps/x86_64/start.S`, as GCC and Clang link it) hands `main` to
/// `__libc_start_main` in RDI, set before its one `call` by
/// `lea rdi, [rip+main]` (position-independent), `mov rdi, [rip+GOT]`
/// (glibc 2.34's PIE, the slot's `R_X86_64_RELATIVE` addend or its bytes
/// in the file) or `mov edi/rdi, main` (fixed address). `None` when the
/// entry code is none of these or the address found is not in executable
/// code (a program with its own `_start`, another C library): the caller
/// then says so instead of guessing.
pub fn main_from_entry(path: &Path) -> Option<u64> {
    let data = crate::elf::read_binary(path).ok()?;
    main_from_entry_in(&data)
}

/// [`main_from_entry`] of an ELF file's bytes.
pub fn main_from_entry_in(data: &[u8]) -> Option<u64> {
    use iced_x86::{Code, Decoder, DecoderOptions, Mnemonic, OpKind, Register};
    use object::{Object, ObjectSection, SectionFlags};
    let file = object::File::parse(data).ok()?;
    if file.architecture() != object::Architecture::X86_64 {
        return None;
    }
    let entry = file.entry();
    let exec = |s: &object::Section| match s.flags() {
        SectionFlags::Elf { sh_flags } => sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0,
        _ => false,
    };
    let text = file
        .sections()
        .find(|s| exec(s) && (s.address()..s.address() + s.size()).contains(&entry))?;
    let bytes = text.data().ok()?;
    let from = (entry - text.address()) as usize;
    let code = bytes.get(from..bytes.len().min(from + 128))?;
    let in_code = |a: u64| {
        file.sections()
            .any(|s| exec(&s) && (s.address()..s.address() + s.size()).contains(&a))
    };
    // The 8 bytes a GOT slot holds once relocated: a RELATIVE relocation's
    // addend, else the file's bytes there.
    let slot = |at: u64| -> Option<u64> {
        if let Some(relocs) = file.dynamic_relocations() {
            for (offset, r) in relocs {
                if offset == at {
                    if let object::RelocationFlags::Elf { r_type } = r.flags() {
                        if r_type == object::elf::R_X86_64_RELATIVE {
                            return u64::try_from(r.addend()).ok();
                        }
                    }
                    return None;
                }
            }
        }
        file.sections().find_map(|s| {
            let range = s.address()..s.address() + s.size();
            if !range.contains(&at) {
                return None;
            }
            let d = s.data().ok()?;
            let o = (at - s.address()) as usize;
            let b: [u8; 8] = d.get(o..o + 8)?.try_into().ok()?;
            Some(u64::from_le_bytes(b))
        })
    };
    let mut decoder = Decoder::with_ip(64, code, entry, DecoderOptions::NONE);
    let mut rdi = None;
    for _ in 0..32 {
        if !decoder.can_decode() {
            return None;
        }
        let i = decoder.decode();
        if i.is_invalid() {
            return None;
        }
        if i.mnemonic() == Mnemonic::Call {
            return rdi.filter(|&a| in_code(a));
        }
        if i.flow_control() != iced_x86::FlowControl::Next {
            // A jump, return or halt before the call: another entry code
            // (Go's, a program's own `_start`), not read further.
            return None;
        }
        if i.op_count() == 0
            || i.op0_kind() != OpKind::Register
            || !matches!(i.op0_register(), Register::RDI | Register::EDI)
        {
            continue;
        }
        rdi = match i.code() {
            Code::Lea_r64_m if i.is_ip_rel_memory_operand() => Some(i.ip_rel_memory_address()),
            Code::Mov_r64_rm64 if i.is_ip_rel_memory_operand() => slot(i.ip_rel_memory_address()),
            Code::Mov_rm64_imm32 | Code::Mov_r32_imm32 | Code::Mov_r64_imm64 => {
                Some(i.immediate(1))
            }
            // Anything else written to RDI: not the pattern.
            _ => None,
        };
    }
    None
}

#[cfg(test)]
mod main_from_entry_tests {
    use super::*;

    /// A program built here, and built again stripped: the address read
    /// from the stripped one's entry code is the symbol table's `main`.
    fn check(flags: &[&str]) {
        let dir = std::env::temp_dir().join(format!(
            "coldcache-main-entry-{}-{}",
            std::process::id(),
            flags.join("")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("m.c");
        std::fs::write(&src, "int helper(int x) { return x * 3; }\nint main(int argc, char **argv) { (void)argv; return helper(argc) - 3; }\n").unwrap();
        let bin = dir.join("m");
        let ok = std::process::Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("SKIP: no C compiler");
            return;
        }
        let symbols = read_functions(&bin).unwrap();
        let main = symbols
            .functions
            .iter()
            .find(|f| f.raw == "main")
            .expect("main in the symbol table")
            .address;
        assert_eq!(main_from_entry(&bin), Some(main), "{flags:?}");
        let stripped = dir.join("m.stripped");
        let ok = std::process::Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&bin)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            assert!(!read_functions(&stripped).unwrap().has_symtab);
            assert_eq!(main_from_entry(&stripped), Some(main), "{flags:?} stripped");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn main_is_found_from_the_entry_code_of_pie_and_fixed_address_programs() {
        check(&["-O1", "-pie", "-fPIE"]);
        check(&["-O1", "-no-pie", "-fno-pie"]);
        // The linker left `mov rdi, [rip+GOT slot]` as glibc's start.S
        // writes it (a relaxing linker makes it a `lea`).
        check(&["-O1", "-pie", "-fPIE", "-Wl,--no-relax"]);
    }

    /// An entry code that jumps before its call (Go's, a program's own
    /// `_start`) is not read past the jump: no `main` is made up from what
    /// follows.
    #[test]
    fn an_entry_that_jumps_first_gives_no_main() {
        let dir = std::env::temp_dir().join(format!("coldcache-entry-jmp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("e.c");
        std::fs::write(
            &src,
            "void helper(void) {}\nvoid run(void (*f)(void)) { f(); for (;;) {} }\n\
             __asm__(\".globl _start\\n_start:\\n jmp go\\n go:\\n \
             lea helper(%rip), %rdi\\n call run\\n hlt\\n\");\n",
        )
        .unwrap();
        let bin = dir.join("e");
        let ok = std::process::Command::new("cc")
            .args(["-O1", "-nostdlib", "-static", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            assert_eq!(main_from_entry(&bin), None);
        } else {
            eprintln!("SKIP: no C compiler for a static program");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_that_is_no_program_has_no_main_from_entry() {
        assert_eq!(main_from_entry_in(b"not an ELF file"), None);
        assert_eq!(main_from_entry_in(&[]), None);
    }
}
