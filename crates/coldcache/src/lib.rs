//! coldcache: the library Rust programs depend on.
//!
//! A facade over the focused crates of the workspace:
//! - [`sim`]: the cache hierarchy simulator (pure, deterministic);
//! - [`trace`]: readers and writers of memory traces (lackey, Dinero IV, and
//!   coldcache's own binary format);
//! - [`config`]: cache configurations from presets, TOML files and the host.
//!
//! Later parts (capture, analysis, zones) are re-exported here as they land.

pub use coldcache_config as config;
pub use coldcache_sim as sim;
pub use coldcache_trace as trace;
