//! coldcache-config-slim: the parts of cache configurations that need no
//! parser of configuration files, small enough for the slim preloaded
//! library (hence the name; `scripts/check-slim-library.sh` holds it):
//! - [`to_toml`] writes a [`coldcache_sim::HierarchyConfig`] in the TOML schema of
//!   `docs/cache-config.md` (string formatting; no TOML library);
//! - [`host`] / [`host_from_sysfs`] read the `host` preset from
//!   `/sys/devices/system/cpu`;
//! - [`parse_size`] / [`format_size`]: byte sizes as people write them.
//!
//! `coldcache-config` re-exports all of it and adds the TOML reader,
//! `resolve` and the Valgrind-style options; the capture engine depends on
//! this crate only, so `libcoldcache.so` links no TOML parser.
//!
//! ```
//! let zen4 = coldcache_sim::presets::by_name("zen4").unwrap();
//! let text = coldcache_config_slim::to_toml(&zen4);
//! assert!(text.contains("name = \"zen4\""), "{text}");
//! assert_eq!(coldcache_config_slim::format_size(48 << 10), "48KiB");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use coldcache_sim::CacheKind;

mod size;
mod sysfs;
mod writer;

pub use size::{format_size, parse_size, SizeError, SIZE_UNITS};
pub use sysfs::{
    host, host_from_sysfs, host_info_from_sysfs, parse_cpu_list, parse_cpu_map, HostInfo,
    SysfsError, SYSFS_CPU_ROOT,
};
pub use writer::to_toml;

/// The name of the preset read from sysfs.
pub const HOST: &str = "host";

/// Default level names: `L1d`, `L1i`, `L2` (what a configuration file or
/// sysfs level without a name is called).
pub fn default_level_name(level: u8, kind: CacheKind) -> String {
    match kind {
        CacheKind::Instruction => format!("L{level}i"),
        CacheKind::Data => format!("L{level}d"),
        CacheKind::Unified => format!("L{level}"),
    }
}
