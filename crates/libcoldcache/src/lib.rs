//! `libcoldcache.so`: the shared library programs link, or that
//! `coldcache record` preloads. It is a thin shell: the C functions are
//! defined in `coldcache-capture` (`capi`, the engine's assembly entry
//! points) and exported from here; its constructor arms a capture when the
//! environment asks for one (`coldcache record`).

// Referencing the crate keeps its `#[no_mangle]` C API in this library.
pub use coldcache_capture::capi;

extern "C" fn init() {
    coldcache_capture::preload::init_from_env();
}

/// Runs `init` when the library is loaded, before the program's `main`.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
