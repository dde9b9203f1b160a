//! Reading cache configurations from TOML files. The schema is documented in
//! `docs/cache-config.md`; [`crate::to_toml`] writes the same schema.
//!
//! Reading happens in three passes over one parsed document, so that every
//! error can name the file, the key's path (`level[2].assoc`, indices from 0)
//! and the line:
//! 1. the spanned document is walked for unknown keys (with a "did you mean");
//! 2. serde, through `serde_path_to_error`, fills the raw structs below;
//! 3. the raw structs are turned into a [`HierarchyConfig`], which is then
//!    checked with [`HierarchyConfig::validate`]; its keys (`levels[1].line_size`)
//!    are translated back to this schema's (`level[1].line`).

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use coldcache_sim::{
    CacheKind, HierarchyConfig, Inclusion, LevelConfig, LookupMode, PrefetcherConfig,
    PrefetcherKind, ReplacementPolicy, Sharing, StraddleMode, WritePolicy,
};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::size::Size;
use crate::suggest::closest;

/// A problem in a cache-configuration file: which file, which line, which key.
///
/// Displays as `FILE[:LINE]: [KEY: ]PROBLEM`, e.g.
/// `caches/x.toml:7: level[1].size: "48Q" is not a size (expected bytes, or a
/// number with K, KiB, M, MiB, G, GiB, T, TiB)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    /// The file as it was named (for text parsed from memory, its label).
    pub file: PathBuf,
    /// 1-based line of the offending key or value, when known.
    pub line: Option<usize>,
    /// Path of the offending key in this schema (`level[1].size`), indices
    /// counting from 0; `None` for syntax errors and top-level problems.
    pub key: Option<String>,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.problem)
    }
}

/// Keys allowed at the top level of a file.
pub const TOP_KEYS: &[&str] = &[
    "name",
    "cores",
    "straddle",
    "lookup",
    "coherence",
    "classify_misses",
    "prefetch_lag",
    "coherence_table",
    "level",
    "prefetcher",
];
/// Keys allowed in a `[[level]]` table.
pub const LEVEL_KEYS: &[&str] = &[
    "name",
    "level",
    "kind",
    "size",
    "sets",
    "line",
    "assoc",
    "policy",
    "seed",
    "rrpv_bits",
    "write",
    "inclusion",
    "shared_by",
    "latency",
];
/// Keys allowed in a `[[prefetcher]]` table.
pub const PREFETCHER_KEYS: &[&str] = &[
    "kind",
    "level",
    "degree",
    "distance",
    "streams",
    "entries",
    "cross_page",
];

/// Defaults of the optional keys (documented in docs/cache-config.md).
pub(crate) const DEFAULT_LINE: u32 = 64;
pub(crate) const DEFAULT_SEED: u64 = 0;
pub(crate) const DEFAULT_RRPV_BITS: u8 = 2;
pub(crate) const DEFAULT_DEGREE: u32 = 1;
pub(crate) const DEFAULT_DISTANCE: u32 = 1;
pub(crate) const DEFAULT_STREAMS: u32 = 16;
pub(crate) const DEFAULT_ENTRIES: u32 = 64;

/// An enum spelled as a string in the file. Matching ignores case and treats
/// `_` as `-`, so `write_back`, `Write-Back` and `write-back` are the same.
macro_rules! str_enum {
    ($name:ident, $what:literal, [$($variant:ident = $spelling:literal $(| $alias:literal)*),+ $(,)?]) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum $name { $($variant),+ }

        impl $name {
            pub(crate) const SPELLINGS: &'static [&'static str] = &[$($spelling),+];

            fn parse(s: &str) -> Option<Self> {
                let n = s.trim().to_ascii_lowercase().replace('_', "-");
                $( if n == $spelling $(|| n == $alias)* { return Some(Self::$variant); } )+
                None
            }

            // Messages use it for some enums only (the writer spells the
            // schema in coldcache-config-slim).
            #[allow(dead_code)]
            pub(crate) fn spelling(self) -> &'static str {
                match self { $(Self::$variant => $spelling),+ }
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        write!(f, "{} ({})", $what, $name::SPELLINGS.join(", "))
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::parse(v).ok_or_else(|| {
                            let hint = closest(v, $name::SPELLINGS)
                                .map(|c| format!("; did you mean \"{c}\"?"))
                                .unwrap_or_default();
                            E::custom(format!(
                                "{v:?} is not a {} (expected one of {}{hint})",
                                $what,
                                $name::SPELLINGS.join(", ")
                            ))
                        })
                    }
                }
                d.deserialize_str(V)
            }
        }
    };
}

str_enum!(
    Kind,
    "cache kind",
    [
        Instruction = "instruction" | "instr" | "i",
        Data = "data" | "d",
        Unified = "unified" | "u",
    ]
);
str_enum!(
    Policy,
    "replacement policy",
    [
        Lru = "lru",
        TreePlru = "tree-plru" | "treeplru" | "plru" | "pseudo-lru",
        Fifo = "fifo",
        Random = "random",
        Srrip = "srrip",
    ]
);
str_enum!(
    Write,
    "write policy",
    [
        WriteBack = "write-back" | "writeback",
        WriteThrough = "write-through" | "writethrough",
    ]
);
str_enum!(
    Incl,
    "inclusion policy",
    [
        Inclusive = "inclusive",
        NonInclusive = "non-inclusive" | "noninclusive" | "nine",
        Exclusive = "exclusive" | "victim",
    ]
);
str_enum!(
    Straddle,
    "straddle mode",
    [
        PerLine = "per-line" | "perline" | "drcachesim",
        Whole = "whole" | "cachegrind",
    ]
);
str_enum!(
    Lookup,
    "lookup mode",
    [
        OnMiss = "on-miss" | "onmiss",
        AllLevels = "all-levels" | "alllevels" | "all",
    ]
);
str_enum!(
    PfKind,
    "prefetcher kind",
    [
        NextLine = "next-line" | "nextline",
        IpStride = "ip-stride" | "ipstride" | "stride",
        Stream = "stream" | "streamer",
    ]
);

impl From<Kind> for CacheKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Instruction => CacheKind::Instruction,
            Kind::Data => CacheKind::Data,
            Kind::Unified => CacheKind::Unified,
        }
    }
}
impl From<CacheKind> for Kind {
    fn from(k: CacheKind) -> Self {
        match k {
            CacheKind::Instruction => Kind::Instruction,
            CacheKind::Data => Kind::Data,
            CacheKind::Unified => Kind::Unified,
        }
    }
}
impl From<Write> for WritePolicy {
    fn from(w: Write) -> Self {
        match w {
            Write::WriteBack => WritePolicy::WriteBack,
            Write::WriteThrough => WritePolicy::WriteThrough,
        }
    }
}
impl From<WritePolicy> for Write {
    fn from(w: WritePolicy) -> Self {
        match w {
            WritePolicy::WriteBack => Write::WriteBack,
            WritePolicy::WriteThrough => Write::WriteThrough,
        }
    }
}
impl From<Incl> for Inclusion {
    fn from(i: Incl) -> Self {
        match i {
            Incl::Inclusive => Inclusion::Inclusive,
            Incl::NonInclusive => Inclusion::NonInclusive,
            Incl::Exclusive => Inclusion::Exclusive,
        }
    }
}
impl From<Inclusion> for Incl {
    fn from(i: Inclusion) -> Self {
        match i {
            Inclusion::Inclusive => Incl::Inclusive,
            Inclusion::NonInclusive => Incl::NonInclusive,
            Inclusion::Exclusive => Incl::Exclusive,
        }
    }
}
impl From<Straddle> for StraddleMode {
    fn from(s: Straddle) -> Self {
        match s {
            Straddle::PerLine => StraddleMode::PerLine,
            Straddle::Whole => StraddleMode::Whole,
        }
    }
}
impl From<StraddleMode> for Straddle {
    fn from(s: StraddleMode) -> Self {
        match s {
            StraddleMode::PerLine => Straddle::PerLine,
            StraddleMode::Whole => Straddle::Whole,
        }
    }
}
impl From<Lookup> for LookupMode {
    fn from(l: Lookup) -> Self {
        match l {
            Lookup::OnMiss => LookupMode::OnMiss,
            Lookup::AllLevels => LookupMode::AllLevels,
        }
    }
}
impl From<LookupMode> for Lookup {
    fn from(l: LookupMode) -> Self {
        match l {
            LookupMode::OnMiss => Lookup::OnMiss,
            LookupMode::AllLevels => Lookup::AllLevels,
        }
    }
}

/// `shared_by`: `"core"`, `"all"`, or a group size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SharedBy {
    Core,
    All,
    Group(u64),
}

impl<'de> Deserialize<'de> for SharedBy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SharedBy;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"core\", \"all\", or a number of cores per instance")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SharedBy, E> {
                match u64::try_from(v) {
                    Ok(n) if n > 0 => Ok(SharedBy::Group(n)),
                    _ => Err(E::custom(format!(
                        "{v} is not a group size (expected \"core\", \"all\", or a number of cores of at least 1)"
                    ))),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SharedBy, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SharedBy, E> {
                match v.trim().to_ascii_lowercase().replace('_', "-").as_str() {
                    "core" | "per-core" | "private" => Ok(SharedBy::Core),
                    "all" | "all-cores" | "shared" => Ok(SharedBy::All),
                    _ => Err(E::custom(format!(
                        "{v:?} is not a sharing (expected \"core\", \"all\", or a number of cores per instance)"
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// `assoc`: a number of ways, or `"full"` for a fully associative cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Assoc {
    Ways(u32),
    Full,
}

impl<'de> Deserialize<'de> for Assoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Assoc;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number of ways, or \"full\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Assoc, E> {
                match u32::try_from(v) {
                    Ok(n) if n > 0 => Ok(Assoc::Ways(n)),
                    _ => Err(E::custom(format!(
                        "{v} is not an associativity (expected a number of ways from 1 to {}, or \"full\")",
                        u32::MAX
                    ))),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Assoc, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Assoc, E> {
                match v.trim().to_ascii_lowercase().replace('_', "-").as_str() {
                    "full" | "fully-associative" => Ok(Assoc::Full),
                    _ => Err(E::custom(format!(
                        "{v:?} is not an associativity (expected a number of ways, or \"full\")"
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: Option<String>,
    cores: Option<usize>,
    straddle: Option<Straddle>,
    lookup: Option<Lookup>,
    coherence: Option<bool>,
    classify_misses: Option<bool>,
    prefetch_lag: Option<u32>,
    coherence_table: Option<usize>,
    #[serde(default)]
    level: Vec<RawLevel>,
    #[serde(default)]
    prefetcher: Vec<RawPrefetcher>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLevel {
    name: Option<String>,
    level: u8,
    kind: Option<Kind>,
    size: Option<Size>,
    sets: Option<u64>,
    line: Option<u32>,
    assoc: Assoc,
    policy: Option<Policy>,
    seed: Option<u64>,
    rrpv_bits: Option<u8>,
    write: Option<Write>,
    inclusion: Option<Incl>,
    shared_by: Option<SharedBy>,
    latency: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrefetcher {
    kind: PfKind,
    level: u8,
    degree: Option<u32>,
    distance: Option<u32>,
    streams: Option<u32>,
    entries: Option<u32>,
    cross_page: Option<bool>,
}

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn key(k: &str) -> Seg {
    Seg::Key(k.to_string())
}

fn path_string(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The parsed document, kept for locating keys by path.
struct Doc<'a> {
    file: &'a Path,
    src: &'a str,
    root: Spanned<DeTable<'a>>,
}

impl Doc<'_> {
    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.src.len());
        self.src.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// The span of the value at `path`, or of the deepest table on the path
    /// that exists (for a key left out, the table that should hold it).
    fn locate(&self, path: &[Seg]) -> Option<Range<usize>> {
        let mut span = None;
        let mut table: Option<&DeTable<'_>> = Some(self.root.get_ref());
        let mut value: Option<&Spanned<DeValue<'_>>> = None;
        for seg in path {
            let next = match (seg, table, value) {
                (Seg::Key(k), Some(t), _) => t.get(k.as_str()),
                (Seg::Index(i), _, Some(v)) => match v.get_ref() {
                    DeValue::Array(a) => a.get(*i),
                    _ => None,
                },
                _ => None,
            };
            let Some(v) = next else { break };
            span = Some(v.span());
            value = Some(v);
            table = match v.get_ref() {
                DeValue::Table(t) => Some(t),
                _ => None,
            };
        }
        span
    }

    fn error(&self, path: &[Seg], problem: impl Into<String>) -> FileError {
        let line = self.locate(path).map(|s| self.line_of(s.start));
        self.error_at(line, path, problem)
    }

    fn error_at(&self, line: Option<usize>, path: &[Seg], problem: impl Into<String>) -> FileError {
        let key = path_string(path);
        FileError {
            file: self.file.to_path_buf(),
            line,
            key: (!key.is_empty()).then_some(key),
            problem: problem.into(),
        }
    }
}

/// Reads a cache configuration from TOML text. `file` names the text in
/// errors and, when the text has no `name`, gives the configuration's name
/// (its file stem). The result has passed [`HierarchyConfig::validate`].
pub fn from_toml_str(text: &str, file: &Path) -> Result<HierarchyConfig, FileError> {
    let root = DeTable::parse(text).map_err(|e| {
        let line = e.span().map(|s| {
            let end = s.start.min(text.len());
            text.as_bytes()[..end]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        });
        let at = e
            .span()
            .and_then(|s| text.get(s))
            .filter(|t| !t.trim().is_empty() && t.len() <= 40 && !t.contains('\n'))
            .map(|t| format!(" at {t:?}"))
            .unwrap_or_default();
        FileError {
            file: file.to_path_buf(),
            line,
            key: None,
            problem: format!("not valid TOML: {}{at}", e.message()),
        }
    })?;
    let doc = Doc {
        file,
        src: text,
        root,
    };
    check_keys(&doc)?;
    let de = toml::de::Deserializer::from(doc.root.clone());
    let raw: RawFile = serde_path_to_error::deserialize(de).map_err(|e| serde_error(&doc, e))?;
    let cfg = build(&doc, raw)?;
    cfg.validate().map_err(|e| {
        let (path, problem) = translate_sim_key(&e.key, &e.problem, &cfg);
        doc.error(&path, problem)
    })?;
    Ok(cfg)
}

/// Pass 1: unknown keys, and `[level]` written for `[[level]]`.
fn check_keys(doc: &Doc<'_>) -> Result<(), FileError> {
    let unknown = |mut path: Vec<Seg>, k: &Spanned<std::borrow::Cow<'_, str>>, allowed: &[&str]| {
        let hint = closest(k.get_ref(), allowed)
            .map(|c| format!("did you mean \"{c}\"? "))
            .unwrap_or_default();
        let problem = format!("unknown key ({hint}expected one of {})", allowed.join(", "));
        path.push(key(k.get_ref()));
        let line = Some(doc.line_of(k.span().start));
        doc.error_at(line, &path, problem)
    };
    for (k, v) in doc.root.get_ref().iter() {
        let (allowed, array) = match k.get_ref().as_ref() {
            "level" => (LEVEL_KEYS, "level"),
            "prefetcher" => (PREFETCHER_KEYS, "prefetcher"),
            other if TOP_KEYS.contains(&other) => continue,
            _ => return Err(unknown(Vec::new(), k, TOP_KEYS)),
        };
        match v.get_ref() {
            DeValue::Table(_) => {
                return Err(doc.error(
                    &[key(array)],
                    format!("must be an array of tables: write [[{array}]], not [{array}]"),
                ))
            }
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let DeValue::Table(t) = item.get_ref() {
                        for (k, _) in t.iter() {
                            if !allowed.contains(&k.get_ref().as_ref()) {
                                return Err(unknown(vec![key(array), Seg::Index(i)], k, allowed));
                            }
                        }
                    }
                }
            }
            _ => {} // a type error, reported by serde
        }
    }
    Ok(())
}

/// Pass 2 errors: serde's message, reworded a little, at serde's path.
fn serde_error(doc: &Doc<'_>, e: serde_path_to_error::Error<toml::de::Error>) -> FileError {
    let path: Vec<Seg> = e
        .path()
        .iter()
        .filter_map(|s| match s {
            serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
            serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
            _ => None,
        })
        .collect();
    let inner = e.inner();
    let mut problem = inner.message().trim().to_string();
    if let Some(field) = problem
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        problem = format!("missing key {field:?}");
    }
    for int in ["u8", "u32", "u64", "usize"] {
        let max = match int {
            "u8" => u64::from(u8::MAX),
            "u32" => u64::from(u32::MAX),
            _ => u64::MAX,
        };
        problem = problem.replace(
            &format!("expected {int}"),
            &format!("expected a whole number from 0 to {max}"),
        );
    }
    // The span toml gives is the value's (or, for a missing key, its table's).
    let line = inner
        .span()
        .map(|s| doc.line_of(s.start))
        .or_else(|| doc.locate(&path).map(|s| doc.line_of(s.start)));
    doc.error_at(line, &path, problem)
}

pub(crate) use coldcache_config_slim::default_level_name;

/// Pass 3: raw structs to the simulator's configuration.
fn build(doc: &Doc<'_>, raw: RawFile) -> Result<HierarchyConfig, FileError> {
    let defaults = HierarchyConfig::default();
    let name = match raw.name {
        Some(n) => n,
        None => doc
            .file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "config".to_string()),
    };
    let mut levels = Vec::with_capacity(raw.level.len());
    for (i, l) in raw.level.into_iter().enumerate() {
        levels.push(build_level(doc, i, l)?);
    }
    let mut prefetchers = Vec::with_capacity(raw.prefetcher.len());
    for (i, p) in raw.prefetcher.into_iter().enumerate() {
        prefetchers.push(build_prefetcher(doc, i, p)?);
    }
    Ok(HierarchyConfig {
        name,
        cores: raw.cores.unwrap_or(defaults.cores),
        levels,
        straddle: raw.straddle.map_or(defaults.straddle, Into::into),
        lookup: raw.lookup.map_or(defaults.lookup, Into::into),
        coherence: raw.coherence.unwrap_or(defaults.coherence),
        prefetchers,
        prefetch_lag: raw.prefetch_lag.unwrap_or(defaults.prefetch_lag),
        classify_misses: raw.classify_misses.unwrap_or(defaults.classify_misses),
        coherence_table: raw.coherence_table.unwrap_or(defaults.coherence_table),
    })
}

fn build_level(doc: &Doc<'_>, i: usize, l: RawLevel) -> Result<LevelConfig, FileError> {
    let at = |k: &str| vec![key("level"), Seg::Index(i), key(k)];
    let kind: CacheKind = l.kind.map_or(CacheKind::Unified, Into::into);
    let line = l.line.unwrap_or(DEFAULT_LINE);
    if line == 0 {
        return Err(doc.error(&at("line"), "must be at least 1 byte"));
    }
    let (size, assoc) = match (l.size, l.sets, l.assoc) {
        (Some(_), Some(_), _) => {
            return Err(doc.error(&at("sets"), "give either size or sets, not both"));
        }
        (None, None, _) => {
            return Err(doc.error(
                &[key("level"), Seg::Index(i)],
                "missing key \"size\" (or \"sets\")",
            ));
        }
        (Some(Size(0)), None, _) => return Err(doc.error(&at("size"), "must be more than 0")),
        (Some(Size(size)), None, Assoc::Ways(a)) => (size, a),
        (Some(Size(size)), None, Assoc::Full) => {
            let ways = size / u64::from(line);
            if size % u64::from(line) != 0 {
                return Err(doc.error(
                    &at("size"),
                    format!("{size} bytes is not a whole number of {line}-byte lines"),
                ));
            }
            let ways = u32::try_from(ways).map_err(|_| {
                doc.error(
                    &at("assoc"),
                    format!("a fully associative cache of {ways} lines has too many ways"),
                )
            })?;
            (size, ways)
        }
        (None, Some(_), Assoc::Full) => {
            return Err(doc.error(&at("assoc"), "\"full\" needs size, not sets"));
        }
        (None, Some(sets), Assoc::Ways(a)) => {
            if sets == 0 {
                return Err(doc.error(&at("sets"), "must be at least 1"));
            }
            let size = sets
                .checked_mul(u64::from(a))
                .and_then(|v| v.checked_mul(u64::from(line)))
                .ok_or_else(|| doc.error(&at("sets"), "sets x assoc x line is too large"))?;
            (size, a)
        }
    };
    let policy = l.policy.unwrap_or(Policy::Lru);
    if l.seed.is_some() && policy != Policy::Random {
        return Err(doc.error(&at("seed"), "only applies to policy = \"random\""));
    }
    if l.rrpv_bits.is_some() && policy != Policy::Srrip {
        return Err(doc.error(&at("rrpv_bits"), "only applies to policy = \"srrip\""));
    }
    let policy = match policy {
        Policy::Lru => ReplacementPolicy::Lru,
        Policy::TreePlru => ReplacementPolicy::TreePlru,
        Policy::Fifo => ReplacementPolicy::Fifo,
        Policy::Random => ReplacementPolicy::Random {
            seed: l.seed.unwrap_or(DEFAULT_SEED),
        },
        Policy::Srrip => ReplacementPolicy::Srrip {
            bits: l.rrpv_bits.unwrap_or(DEFAULT_RRPV_BITS),
        },
    };
    let sharing = match l.shared_by.unwrap_or(SharedBy::Core) {
        SharedBy::Core => Sharing::Core,
        SharedBy::All => Sharing::All,
        SharedBy::Group(n) => Sharing::Group {
            cores: usize::try_from(n).map_err(|_| doc.error(&at("shared_by"), "too large"))?,
        },
    };
    Ok(LevelConfig {
        name: l.name.unwrap_or_else(|| default_level_name(l.level, kind)),
        level: l.level,
        kind,
        size,
        line_size: line,
        assoc,
        policy,
        write: l.write.map_or(WritePolicy::WriteBack, Into::into),
        inclusion: l.inclusion.map_or(Inclusion::NonInclusive, Into::into),
        sharing,
        latency: l.latency,
    })
}

fn build_prefetcher(
    doc: &Doc<'_>,
    i: usize,
    p: RawPrefetcher,
) -> Result<PrefetcherConfig, FileError> {
    let at = |k: &str| vec![key("prefetcher"), Seg::Index(i), key(k)];
    let not_for = |k: &str| {
        doc.error(
            &at(k),
            format!("does not apply to kind = \"{}\"", p.kind.spelling()),
        )
    };
    if p.kind != PfKind::Stream && p.streams.is_some() {
        return Err(not_for("streams"));
    }
    if p.kind != PfKind::IpStride && p.entries.is_some() {
        return Err(not_for("entries"));
    }
    if p.kind == PfKind::NextLine && p.distance.is_some() {
        return Err(not_for("distance"));
    }
    let degree = p.degree.unwrap_or(DEFAULT_DEGREE);
    let distance = p.distance.unwrap_or(DEFAULT_DISTANCE);
    let kind = match p.kind {
        PfKind::NextLine => PrefetcherKind::NextLine { degree },
        PfKind::IpStride => PrefetcherKind::IpStride {
            entries: p.entries.unwrap_or(DEFAULT_ENTRIES),
            degree,
            distance,
        },
        PfKind::Stream => PrefetcherKind::Stream {
            streams: p.streams.unwrap_or(DEFAULT_STREAMS),
            degree,
            distance,
        },
    };
    Ok(PrefetcherConfig {
        kind,
        level: p.level,
        cross_page: p.cross_page.unwrap_or(false),
    })
}

/// Translates a key of [`HierarchyConfig::validate`] (`levels[1].line_size`)
/// into this schema's path (`level[1].line`), rewording the problem where
/// the simulator's field names show through.
fn translate_sim_key(sim_key: &str, problem: &str, cfg: &HierarchyConfig) -> (Vec<Seg>, String) {
    let mut path = Vec::new();
    let mut problem = problem.to_string();
    let mut parts = sim_key.split('.');
    let head = parts.next().unwrap_or("");
    let (head_name, index) = match head.split_once('[') {
        Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().ok()),
        None => (head, None),
    };
    let rest: Vec<&str> = parts.collect();
    match head_name {
        "levels" => {
            path.push(key("level"));
            if let Some(i) = index {
                path.push(Seg::Index(i));
                let field = match rest.as_slice() {
                    ["line_size"] => "line",
                    ["sharing"] | ["sharing", "cores"] => "shared_by",
                    ["policy", "bits"] => "rrpv_bits",
                    [f, ..] => f,
                    [] => "",
                };
                if !field.is_empty() {
                    path.push(key(field));
                }
            } else if problem == "at least one level is required" {
                problem = "at least one [[level]] table is required".to_string();
            }
        }
        "prefetchers" => {
            path.push(key("prefetcher"));
            if let Some(i) = index {
                path.push(Seg::Index(i));
                let field = match (rest.as_slice(), cfg.prefetchers.get(i).map(|p| p.kind)) {
                    (["entries"], Some(PrefetcherKind::Stream { .. })) => "streams",
                    ([f, ..], _) => f,
                    ([], _) => "",
                };
                if !field.is_empty() {
                    path.push(key(field));
                }
            }
        }
        other => {
            path.push(key(other));
            path.extend(rest.iter().map(|f| key(f)));
        }
    }
    (path, problem)
}
