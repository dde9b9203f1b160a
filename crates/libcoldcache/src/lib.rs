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
//! It interposes the C library's `sigaction`, `signal`, `bsd_signal`,
//! `syscall` and `exec` functions (`interpose.rs`): the program reads and
//! sets its own disposition of the three signals the capture engine owns
//! (SIGTRAP, the sync signal and the stop request signal), and its
//! `SIG_IGN` of them survives an `exec`. It also interposes `dlopen` and
//! `dlclose`, for a `--function` capture whose function is in a library
//! the program opens later (`record --in-dlopen`).
//!
//! It carries only what capture and zones need at run time: no parser of
//! configuration or trace files, no decompressor, no DWARF reader of the
//! symbols or data views (`scripts/check-slim-library.sh`, run by CI).
//! Cargo unifies features across a build, so the crates capture and zones
//! depend on must not depend on those at all, not merely behind a feature.
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
