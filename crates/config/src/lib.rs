//! coldcache-config: cache configurations for the simulator, from named
//! presets, TOML files, the host's sysfs and Valgrind-style options.
//!
//! The simulator crate (`coldcache-sim`) is pure: it defines
//! [`HierarchyConfig`] and the fixed presets. This crate does the I/O:
//! - [`resolve`] turns a `--cache` argument (a preset name, `host`, or a
//!   path to a TOML file) into a validated configuration;
//! - [`from_toml_str`] / [`load_file`] read the TOML schema documented in
//!   `docs/cache-config.md`, and [`to_toml`] writes it;
//! - [`host`] / [`host_from_sysfs`] read `/sys/devices/system/cpu`;
//! - [`parse_valgrind_geometry`] and [`apply_cachegrind_overrides`] implement
//!   Cachegrind's `--I1`, `--D1`, `--LL`;
//! - [`cachelab`] builds CMU Cache Lab's `csim -s -E -b` cache.
//!
//! Every error names where the problem is: the file, key path and line for a
//! TOML file; the sysfs file; the command-line option.
//!
//! ```
//! let zen4 = coldcache_config::resolve("zen4").unwrap();
//! let text = coldcache_config::to_toml(&zen4);
//! let again = coldcache_config::from_toml_str(&text, "zen4.toml".as_ref()).unwrap();
//! assert_eq!(zen4, again);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::io;
use std::path::{Path, PathBuf};

pub use coldcache_sim::presets::Geometry;
use coldcache_sim::{presets, ConfigError, HierarchyConfig};

mod cachelab;
mod schema;
mod size;
mod suggest;
mod valgrind;

/// "Did you mean …?": the presets', the schema's and `record
/// --function`'s suggestions.
pub use suggest::{closest, closest_n};

pub use cachelab::{cachelab, cachelab_params, CacheLabError};
/// The writer, sizes and the sysfs reader live in `coldcache-config-slim`
/// (no TOML parser, so the preloaded library can link them).
pub use coldcache_config_slim::{
    format_size, host, host_from_sysfs, host_info_from_sysfs, parse_cpu_list, parse_cpu_map,
    parse_size, to_toml, HostInfo, SizeError, SysfsError, HOST, SIZE_UNITS, SYSFS_CPU_ROOT,
};
pub use schema::{from_toml_str, FileError, LEVEL_KEYS, PREFETCHER_KEYS, TOP_KEYS};
pub use valgrind::{
    apply_cachegrind_overrides, parse_valgrind_geometry, parse_valgrind_option, GeometryError,
    OptionError,
};

/// Any problem turning a `--cache` argument or option into a configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: io::Error,
    },
    /// A configuration file is not valid (names file, line and key).
    #[error(transparent)]
    File(#[from] FileError),
    /// The `host` preset could not be read from sysfs.
    #[error("cache preset \"host\": {0}")]
    Sysfs(#[from] SysfsError),
    /// A bad `--I1`, `--D1` or `--LL`.
    #[error(transparent)]
    Option(#[from] OptionError),
    /// Cache Lab parameters the simulator cannot take.
    #[error(transparent)]
    CacheLab(#[from] CacheLabError),
    /// A built-in preset failed validation (a bug in the preset).
    #[error("cache preset {name:?}: {source}")]
    Invalid {
        /// The preset.
        name: String,
        /// What is wrong.
        #[source]
        source: ConfigError,
    },
    /// Neither a preset, `host`, nor a file.
    #[error("{}", unknown_message(.spec, .suggestion.as_deref()))]
    Unknown {
        /// The argument as given.
        spec: String,
        /// The closest preset name, if the spec looks like a misspelling.
        suggestion: Option<String>,
    },
}

fn unknown_message(spec: &str, suggestion: Option<&str>) -> String {
    let hint = suggestion
        .map(|s| format!(" (did you mean {s:?}?)"))
        .unwrap_or_default();
    let presets: Vec<&str> = names().iter().map(|(n, _)| *n).collect();
    format!(
        "unknown cache configuration {spec:?}{hint}: expected a preset ({}) or a path to a .toml file",
        presets.join(", ")
    )
}

/// Every name [`resolve`] accepts as a preset, with a one-line description:
/// the simulator's presets, then `host`.
pub fn names() -> Vec<(&'static str, &'static str)> {
    let mut v: Vec<(&'static str, &'static str)> = presets::NAMES.to_vec();
    v.push((
        HOST,
        "this machine's caches, read from /sys/devices/system/cpu (LRU assumed)",
    ));
    v
}

/// Whether `spec` is to be read as a file path rather than a preset name:
/// it contains `/`, ends with `.toml`, or names an existing file.
fn looks_like_path(spec: &str) -> bool {
    spec.contains('/') || spec.ends_with(".toml") || Path::new(spec).is_file()
}

/// Resolves a `--cache` argument: a preset name (see [`names`]; the
/// simulator's presets win over a file of the same name, so write `./zen4`
/// for such a file), `host`, or a path to a TOML file. The result is
/// validated.
pub fn resolve(spec: &str) -> Result<HierarchyConfig, Error> {
    if spec == HOST {
        return Ok(host()?);
    }
    if let Some(cfg) = presets::by_name(spec) {
        cfg.validate().map_err(|source| Error::Invalid {
            name: spec.to_string(),
            source,
        })?;
        return Ok(cfg);
    }
    if looks_like_path(spec) {
        return load_file(Path::new(spec));
    }
    let presets: Vec<&str> = names().iter().map(|(n, _)| *n).collect();
    Err(Error::Unknown {
        spec: spec.to_string(),
        suggestion: suggest::closest(spec, &presets).map(str::to_string),
    })
}

/// Largest configuration file read, in bytes (the largest example is
/// about 2 KiB).
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

/// Reads and validates a TOML configuration file (schema in
/// `docs/cache-config.md`). Errors name `path` as given. Only a regular
/// file of at most [`MAX_CONFIG_FILE`] bytes is read (`/dev/zero` or a
/// FIFO is refused, never read).
pub fn load_file(path: &Path) -> Result<HierarchyConfig, Error> {
    let text =
        coldcache_fsio::read_regular_to_string(path, MAX_CONFIG_FILE).map_err(|e| Error::Io {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
    Ok(from_toml_str(&text, path)?)
}
