//! `libcoldcache.so`: the shared library C and C++ programs link, or that
//! `coldcache record` and `coldcache zones record` preload.
//!
//! A thin shell. The C functions are `#[no_mangle] pub extern "C"` items of
//! linked crates, exported from this cdylib:
//! - captures: `coldcache_capture::capi` and the engine's naked entry points
//!   (`coldcache_start`, `coldcache_stop`, ...);
//! - zones and spikes: `coldcache_zones::capi` (`COLDCACHE_ZONE`, ...) and
//!   the `__cyg_profile_func_enter/exit` hooks.
//!
//! It interposes the C library's `sigaction` and `signal` (`interpose.rs`):
//! the program reads and sets its own disposition of the two signals the
//! capture engine owns, SIGTRAP and the sync signal. It also interposes
//! `dlopen` and `dlclose`, for a `--function` capture whose function is in
//! a library the program opens later (`record --in-dlopen`).
//!
//! Its constructor arms a capture when the environment asks for one
//! (`coldcache record`), and every allocation of the library goes to its
//! own mmap-backed allocator so the program's heap is left as it would be.

mod alloc;
mod interpose;

/// Every allocation of the library bypasses the program's `malloc`.
#[global_allocator]
static ALLOC: alloc::MmapAlloc = alloc::MmapAlloc::new();

pub use coldcache_capture::capi as capture_capi;
pub use coldcache_zones::capi as zones_capi;

extern "C" fn init() {
    coldcache_capture::engine::set_own_allocator();
    interpose::resolve_dlopen();
    coldcache_capture::preload::init_from_env();
}

/// Runs `init` when the library is loaded, before the program's `main`.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
