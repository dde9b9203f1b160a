//! The C ABI of the capture engine (declared in `include/coldcache.h`):
//! `coldcache_options_init`, `coldcache_start`, `coldcache_stop`,
//! `coldcache_set_thread_core`, `coldcache_last_error`.
//!
//! `coldcache_start` is written in assembly so that TF is set by its very
//! last instructions: the first traced instruction is the caller's.

use crate::lifecycle;
pub use crate::options::{parse_reserves, parse_size};
use crate::options::{Mode, Options, Threads, Trigger};
use crate::output::set_error;
use crate::state::capi::CORE_MAP;
use crate::state::DEFAULTS;
use std::ffi::{c_char, CStr};
use std::path::PathBuf;

/// Trace only the thread calling `coldcache_start`.
pub const COLDCACHE_THREADS_CALLER: i32 = 0;
/// Trace every thread, including threads created during the capture.
pub const COLDCACHE_THREADS_ALL: i32 = 1;

/// Options of `coldcache_start` (the C struct `coldcache_options`).
#[repr(C)]
pub struct CaptureOptions {
    /// `sizeof(struct coldcache_options)`, set by `coldcache_options_init`.
    pub size: u32,
    /// `COLDCACHE_THREADS_CALLER` or `COLDCACHE_THREADS_ALL`; ignored when
    /// `tids` is set.
    pub threads: i32,
    /// Cache preset name or TOML file; NULL for the default.
    pub cache: *const c_char,
    /// Dump path; NULL for the default.
    pub output: *const c_char,
    /// Thread ids to trace, or NULL.
    pub tids: *const u32,
    /// Number of entries in `tids`.
    pub tid_count: usize,
    /// Stop after this many instructions; 0 for no limit.
    pub max_instructions: u64,
    /// Also write every access to this cctrace file; NULL for none.
    pub trace: *const c_char,
    /// `"auto"`, `"trap"`, `"fast"` or `"verify"`; NULL for the default
    /// (`auto`: fast where it can run, else trap). Absent from structs of
    /// programs built against an older header (their `size` ends before
    /// it): those get the default.
    pub mode: *const c_char,
}

/// The size of the struct before `mode` was added: programs built against
/// that header still work.
const SIZE_BEFORE_MODE: usize = std::mem::offset_of!(CaptureOptions, mode);

/// The options a capture uses when the caller gives none.
pub fn default_options() -> Result<Options, String> {
    if let Some(o) = DEFAULTS.lock().ok().and_then(|g| g.clone()) {
        return Ok(o);
    }
    let cache = coldcache_fsio::env::var("COLDCACHE_CACHE").unwrap_or_else(|| "jaguar".into());
    let cfg = resolve_cache(&cache).map_err(|e| format!("COLDCACHE_CACHE: {e}"))?;
    let mut o = Options::new(cfg, "coldcache.ccdump");
    o.cache_name = cache;
    // The mode as the library's constructor read it (the environment is
    // scrubbed of our variables after that).
    crate::options::apply_settings(&mut o, crate::state::env_mode(), &|name| {
        coldcache_fsio::env::var(name)
    })?;
    Ok(o)
}

/// Resolves the C API's `cache` string (and `COLDCACHE_CACHE`): a preset of
/// the simulator or `host` (sysfs). Configuration files are read by
/// `coldcache record --cache FILE` only: the library links no TOML parser,
/// so a file is refused with an error naming it.
pub fn resolve_cache(spec: &str) -> Result<coldcache_sim::HierarchyConfig, String> {
    use coldcache_sim::presets;
    if spec == coldcache_config_slim::HOST {
        return coldcache_config_slim::host().map_err(|e| format!("cache preset \"host\": {e}"));
    }
    if let Some(cfg) = presets::by_name(spec) {
        cfg.validate()
            .map_err(|e| format!("cache preset {spec:?}: {e}"))?;
        return Ok(cfg);
    }
    let mut names: Vec<&str> = presets::NAMES.iter().map(|(n, _)| *n).collect();
    names.push(coldcache_config_slim::HOST);
    if spec.contains('/') || spec.ends_with(".toml") || std::path::Path::new(spec).is_file() {
        return Err(format!(
            "cache {spec:?}: configuration files are read by `coldcache record --cache FILE`, \
             not by the library; give a preset ({})",
            names.join(", ")
        ));
    }
    Err(format!(
        "unknown cache preset {spec:?}: expected one of {}",
        names.join(", ")
    ))
}

/// Fills `opts` with the defaults.
///
/// # Safety
/// `opts` must point to a writable `struct coldcache_options`.
#[no_mangle]
pub unsafe extern "C" fn coldcache_options_init(opts: *mut CaptureOptions) {
    if opts.is_null() {
        return;
    }
    // SAFETY: the caller passes a writable struct (see `# Safety`).
    unsafe {
        opts.write(CaptureOptions {
            size: std::mem::size_of::<CaptureOptions>() as u32,
            threads: COLDCACHE_THREADS_CALLER,
            cache: std::ptr::null(),
            output: std::ptr::null(),
            tids: std::ptr::null(),
            tid_count: 0,
            max_instructions: 0,
            trace: std::ptr::null(),
            mode: std::ptr::null(),
        })
    };
}

/// Maps a thread to a simulated core for the next captures.
#[no_mangle]
pub extern "C" fn coldcache_set_thread_core(tid: u32, core: u32) -> i32 {
    match CORE_MAP.lock() {
        Ok(mut m) => {
            m.retain(|&(t, _)| t != tid);
            m.push((tid, core));
            0
        }
        Err(_) => -1,
    }
}

/// The message of the last failed call, or NULL.
#[no_mangle]
pub extern "C" fn coldcache_last_error() -> *const c_char {
    crate::output::last_error()
}

fn c_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: callers pass NUL-terminated strings (documented in the header).
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Builds engine options from the C struct and prepares the capture.
/// Returns 1 when the caller must arm itself, 0 when not, -1 on error.
extern "C" fn prepare_from_c(opts: *const CaptureOptions) -> i32 {
    let r = (|| -> Result<bool, String> {
        if crate::state::preload::SHADOWED.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(
                "this copy of libcoldcache.so is not the one the program's calls \
                 reach (another file comes first in its symbol lookup): call \
                 coldcache_start through the program's own symbol"
                    .into(),
            );
        }
        let mut o = default_options()?;
        o.trigger = Trigger::Api;
        if !opts.is_null() {
            // SAFETY: a non-null pointer from the caller to an initialised
            // struct; `size` guards against an older, smaller layout.
            let c = unsafe { &*opts };
            if (c.size as usize) < SIZE_BEFORE_MODE {
                return Err(format!(
                    "coldcache_options.size is {}, expected {} (call coldcache_options_init)",
                    c.size,
                    std::mem::size_of::<CaptureOptions>()
                ));
            }
            if c.size as usize >= std::mem::size_of::<CaptureOptions>() {
                if let Some(m) = c_str(c.mode) {
                    o.mode = Mode::parse(&m).ok_or_else(|| {
                        format!("mode {m:?} is not \"auto\", \"trap\", \"fast\" or \"verify\"")
                    })?;
                }
            }
            if let Some(cache) = c_str(c.cache) {
                o.cache = resolve_cache(&cache)?;
                o.cache_name = cache;
            }
            if let Some(out) = c_str(c.output) {
                o.output = PathBuf::from(out);
            }
            if let Some(t) = c_str(c.trace) {
                o.trace = Some(PathBuf::from(t));
            }
            o.threads = if !c.tids.is_null() && c.tid_count > 0 {
                // SAFETY: the caller passes `tid_count` readable entries.
                Threads::Tids(unsafe { std::slice::from_raw_parts(c.tids, c.tid_count) }.to_vec())
            } else if c.threads == COLDCACHE_THREADS_ALL {
                Threads::All
            } else {
                Threads::Caller
            };
            if c.max_instructions != 0 {
                o.max_instructions = c.max_instructions;
            }
        }
        if let Ok(m) = CORE_MAP.lock() {
            for &(t, c) in m.iter() {
                o.core_map.retain(|&(x, _)| x != t);
                o.core_map.push((t, c));
            }
        }
        lifecycle::prepare(o).map_err(|e| e.to_string())
    })();
    match r {
        Ok(true) => 1,
        Ok(false) => 0,
        Err(e) => {
            set_error(e);
            -1
        }
    }
}

/// Starts a capture (see `coldcache.h`); tracing of the calling thread
/// begins at the caller's next instruction. Returns 0 or -1.
///
/// Naked so that TF is set by its very last instructions: the `popfq`
/// arms the trap, the `ret` runs untraced, and the first trap is at the
/// caller's next instruction.
///
/// # Safety
/// `options` is NULL or points to a `struct coldcache_options` initialised
/// by `coldcache_options_init`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn coldcache_start(options: *const CaptureOptions) -> i32 {
    core::arch::naked_asm!(
        "push rbx", // keeps the stack 16-byte aligned for the call
        "call {prepare}",
        "pop rbx",
        "cmp eax, 1",
        "jne 2f",
        "xor eax, eax",
        "pushfq",
        "or qword ptr [rsp], 0x100",
        "popfq",
        "2:",
        "ret",
        prepare = sym prepare_from_c,
    )
}
