//! libcoldcache: the shared library (`libcoldcache.so`) that C and C++
//! programs link, or that `coldcache zones record` preloads.
//!
//! A thin re-export: the C API (`coldcache.h`) and the
//! `__cyg_profile_func_enter/exit` hooks live in `coldcache_zones::capi`
//! and are exported from this cdylib because they are `#[no_mangle] pub
//! extern "C"` items of a linked crate. The capture engine will join them
//! here.

pub use coldcache_zones::capi;
