//! coldcache: the library Rust programs depend on.
//!
//! A facade over the focused crates of the workspace:
//! - [`sim`]: the cache hierarchy simulator (pure, deterministic);
//! - [`trace`]: readers and writers of memory traces (lackey, Dinero IV, and
//!   coldcache's own binary format);
//! - [`config`]: cache configurations from presets, TOML files and the host.
//!
//! - [`zones`]: the zones profiler and spike detector; its macros are at the
//!   root: `coldcache::zone!("name")`, `coldcache::zone_bytes!("name", n)`,
//!   `coldcache::frame_mark()` (feature `zones-disabled` compiles them out).
//!
//! Later parts (capture, analysis) are re-exported here as they land.

pub use coldcache_config as config;
pub use coldcache_sim as sim;
pub use coldcache_trace as trace;
pub use coldcache_zones as zones;
pub use coldcache_zones::{frame_mark, zone, zone_bytes, zone_describe, zone_if, zone_message};
