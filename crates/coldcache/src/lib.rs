//! coldcache: the library Rust programs depend on.
//!
//! A facade over the focused crates of the workspace:
//! - [`sim`]: the cache hierarchy simulator (pure, deterministic);
//! - [`trace`]: readers and writers of memory traces (lackey, Dinero IV, and
//!   coldcache's own binary format);
//! - [`config`]: cache configurations from presets, TOML files and the host;
//! - [`capture`]: single-step chosen threads of this process and write a
//!   dump (`capture::start(options)` returns a guard that stops on drop);
//! - [`dump`]: the dump format; [`symbols`]: resolving a dump's addresses
//!   to functions, lines and inlined frames;
//! - [`replay`]: simulating recorded traces (what `coldcache sim` runs),
//!   several inputs interleaved over one hierarchy;
//! - [`analysis`]: a dump's views (flat, trees, callers, annotate, diff),
//!   the numbers `coldcache report` and the web UI show; [`export`]: other
//!   tools' formats (Callgrind, folded stacks, flame graphs, speedscope);
//! - [`zones`]: the zones profiler and spike detector; its macros are at the
//!   root: `coldcache::zone!("name")`, `coldcache::zone_bytes!("name", n)`,
//!   `coldcache::frame_mark()` (feature `zones-disabled` compiles them out).
//!
//! ```no_run
//! let cfg = coldcache::config::resolve("jaguar").unwrap();
//! let cap = coldcache::capture::start(coldcache::capture::Options::new(cfg, "frame.ccdump")).unwrap();
//! // ... the work to look at ...
//! let summary = cap.stop().unwrap();
//! println!("{} instructions", summary.instructions);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use coldcache_analysis as analysis;
/// Capturing this process: start and stop a capture of chosen threads
/// (the engine's internals — accountant, tables, signal shell — stay in
/// `coldcache-capture`).
pub mod capture {
    pub use coldcache_capture::{
        finish, instructions_traced, is_active, prepare, start, stop, Capture, CaptureError,
        Options, Reserves, Summary, Threads, Trigger,
    };
}
pub use coldcache_config as config;
pub use coldcache_dump as dump;
pub use coldcache_export as export;
pub use coldcache_replay as replay;
pub use coldcache_sim as sim;
pub use coldcache_symbols as symbols;
pub use coldcache_trace as trace;
pub use coldcache_zones as zones;
pub use coldcache_zones::{frame_mark, zone, zone_bytes, zone_describe, zone_if, zone_message};
