//! `libcoldcache.so`: the shared library programs link, or that
//! `coldcache record` preloads. It is a thin shell: the C functions are
//! defined in `coldcache-capture` (`capi`, the engine's assembly entry
//! points) and exported from here; its constructor arms a capture when the
//! environment asks for one (`coldcache record`).

mod alloc;

/// Every allocation of the library bypasses the program's `malloc`.
#[global_allocator]
static ALLOC: alloc::MmapAlloc = alloc::MmapAlloc::new();

// Referencing the crate keeps its `#[no_mangle]` C API in this library.
pub use coldcache_capture::capi;

extern "C" fn init() {
    coldcache_capture::engine::set_own_allocator();
    coldcache_capture::preload::init_from_env();
}

/// Runs `init` when the library is loaded, before the program's `main`.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
