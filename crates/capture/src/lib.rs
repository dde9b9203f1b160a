//! coldcache-capture: the in-process capture engine.
//!
//! - [`model`]: the pure x86-64 access model (instruction + registers → accesses).
pub mod model;
