//! The C ABI of `libcoldcache.so` (declared in `include/coldcache.h`) and
//! the `__cyg_profile_func_enter/exit` hooks that `-finstrument-functions`
//! code calls on every function entry and exit.
//!
//! glibc exports no-op hooks; a preloaded (or directly linked) library
//! overrides them. They can run before any constructor (instrumented
//! constructors of other libraries, `_init` code), so nothing here relies on
//! initialization having happened: the recorder initializes itself on the
//! first event. Each hook runs inside a per-thread re-entrancy guard, so
//! instrumented code that the recorder itself calls (an instrumented
//! `malloc`, say) is not recorded and cannot recurse. Threads created later
//! get their state on their first event.

use crate::format::{kind, pack, ZoneKey};
use crate::record::{self, Label};
use crate::spike;
use std::ffi::{c_char, c_double, c_int, c_void, CStr};

/// Called by `-finstrument-functions` code on entry to every function.
///
/// # Safety
/// Called by compiled code with the function's address; the address is
/// only recorded, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __cyg_profile_func_enter(this_fn: *mut c_void, _call_site: *mut c_void) {
    let addr = this_fn as u64;
    if !crate::ready() {
        // The first event initializes, which may turn spike detection on.
        record::guarded(|| {
            crate::ensure_init();
        });
    }
    if spike::on() {
        record::guarded(|| {
            // The thread's set-up before the start stamp (lib.rs `begin`).
            crate::prepare_thread();
            let tsc = record::rdtsc();
            spike::enter_at(ZoneKey::Function(addr), tsc);
            record::emit_at(pack(kind::FUNC_ENTER, addr), tsc);
        });
    } else {
        record::emit_unless_in_hook(pack(kind::FUNC_ENTER, addr));
    }
}

/// Called by `-finstrument-functions` code on exit from every function.
///
/// # Safety
/// As [`__cyg_profile_func_enter`].
#[no_mangle]
pub unsafe extern "C" fn __cyg_profile_func_exit(this_fn: *mut c_void, _call_site: *mut c_void) {
    let addr = this_fn as u64;
    if spike::on() {
        record::guarded(|| {
            let tsc = record::rdtsc();
            record::emit_at(pack(kind::FUNC_EXIT, addr), tsc);
            spike::exit_at(ZoneKey::Function(addr), tsc);
        });
    } else {
        record::emit_unless_in_hook(pack(kind::FUNC_EXIT, addr));
    }
}

/// Begins a zone (`COLDCACHE_ZONE` expands to this and its end).
///
/// # Safety
/// `label` must point to a `coldcache_label` with static storage whose
/// strings are static and `name_len`/`file_len` long (the macros of
/// `coldcache.h` make such a label).
#[no_mangle]
pub unsafe extern "C" fn coldcache_zone_begin(label: *const Label) {
    // SAFETY: the caller guarantees a static, valid label.
    let label: &'static Label = unsafe { &*label };
    record::guarded(|| {
        let id = label.id();
        crate::ensure_init();
        if spike::on() {
            // The thread's set-up before the start stamp (lib.rs `begin`).
            crate::prepare_thread();
            spike::enter(ZoneKey::Label(id));
        }
        record::emit(pack(kind::BEGIN, id as u64));
    });
}

/// Ends the zone begun with the same label.
///
/// # Safety
/// As [`coldcache_zone_begin`].
#[no_mangle]
pub unsafe extern "C" fn coldcache_zone_end(label: *const Label) {
    // SAFETY: the caller guarantees a static, valid label.
    let label: &'static Label = unsafe { &*label };
    record::guarded(|| {
        let id = label.id();
        record::emit(pack(kind::END, id as u64));
        if spike::on() {
            spike::exit(ZoneKey::Label(id));
        }
    });
}

/// The innermost open zone processes `bytes` bytes.
#[no_mangle]
pub extern "C" fn coldcache_zone_bytes(bytes: u64) {
    record::guarded(|| record::emit(pack(kind::BYTES, bytes)));
}

/// Marks the end of a frame.
#[no_mangle]
pub extern "C" fn coldcache_frame_mark() {
    record::guarded(crate::frame_mark);
}

/// Turns recording on (non-zero) or off.
#[no_mangle]
pub extern "C" fn coldcache_set_enabled(on: c_int) {
    record::set_enabled(on != 0);
}

/// Names the calling thread.
///
/// # Safety
/// `name` is a NUL-terminated string (or null, which does nothing).
#[no_mangle]
pub unsafe extern "C" fn coldcache_set_thread_name(name: *const c_char) {
    if name.is_null() {
        return;
    }
    // SAFETY: a NUL-terminated string per the contract.
    let n = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    record::guarded(|| crate::set_thread_name(&n));
}

/// Writes the recording so far to `path`; 0 on success, -1 on error.
///
/// # Safety
/// `path` is a NUL-terminated string (or null: -1).
#[no_mangle]
pub unsafe extern "C" fn coldcache_write(path: *const c_char) -> c_int {
    if path.is_null() {
        return -1;
    }
    // SAFETY: a NUL-terminated string per the contract.
    let p = unsafe { CStr::from_ptr(path) }
        .to_string_lossy()
        .into_owned();
    let mut rc = -1;
    record::guarded(|| {
        rc = match record::write_to(std::path::Path::new(&p)) {
            Ok(()) => 0,
            Err(_) => -1,
        }
    });
    rc
}

/// Events dropped because the arena was full.
#[no_mangle]
pub extern "C" fn coldcache_dropped_events() -> u64 {
    record::dropped_events()
}

/// Sets the global spike threshold in milliseconds (turns the detector
/// on); a negative value turns it off.
#[no_mangle]
pub extern "C" fn coldcache_spike_set_global_threshold_ms(ms: c_double) {
    record::guarded(|| spike::set_global_threshold((ms >= 0.0).then_some(ms)));
}

/// Threshold of the innermost open zone.
#[no_mangle]
pub extern "C" fn coldcache_spike_set_zone_threshold_ms(ms: c_double) {
    record::guarded(|| spike::set_zone_threshold(ms));
}

/// Threshold of the innermost open zone's descendants.
#[no_mangle]
pub extern "C" fn coldcache_spike_set_children_threshold_ms(ms: c_double) {
    record::guarded(|| spike::set_children_threshold(ms));
}

/// Threshold of every zone enclosing the innermost one.
#[no_mangle]
pub extern "C" fn coldcache_spike_set_all_parents_threshold_ms(ms: c_double) {
    record::guarded(|| spike::set_all_parents_threshold(ms));
}

/// Pauses spike checking on this thread (nests).
#[no_mangle]
pub extern "C" fn coldcache_spike_pause() {
    record::guarded(spike::pause);
}

/// Ends one pause.
#[no_mangle]
pub extern "C" fn coldcache_spike_unpause() {
    record::guarded(spike::unpause);
}

/// Does not check the innermost open zone if `cond` is non-zero.
#[no_mangle]
pub extern "C" fn coldcache_spike_ignore_zone(cond: c_int) {
    record::guarded(|| spike::ignore_zone_if(cond != 0));
}

/// Does not check the innermost open zone's descendants if `cond` is
/// non-zero.
#[no_mangle]
pub extern "C" fn coldcache_spike_ignore_children(cond: c_int) {
    record::guarded(|| spike::ignore_children_if(cond != 0));
}

/// Turns checking on (non-zero) or off for the calling thread.
#[no_mangle]
pub extern "C" fn coldcache_spike_set_thread_active(active: c_int) {
    record::guarded(|| spike::set_thread_active(active != 0));
}

/// Non-zero when the innermost open zone is already over its threshold
/// (`COLDCACHE_ZONE_MSG` formats only then).
#[no_mangle]
pub extern "C" fn coldcache_spike_over_threshold() -> c_int {
    spike::over_threshold_now() as c_int
}

/// Attaches a message to the innermost open zone.
///
/// # Safety
/// `msg` is a NUL-terminated string (or null, which does nothing).
#[no_mangle]
pub unsafe extern "C" fn coldcache_zone_message(msg: *const c_char) {
    if msg.is_null() {
        return;
    }
    // SAFETY: a NUL-terminated string per the contract.
    let m = unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    record::guarded(|| spike::set_message(m));
}

/// Attaches a description to the innermost open zone.
///
/// # Safety
/// `desc` is a NUL-terminated string (or null, which does nothing).
#[no_mangle]
pub unsafe extern "C" fn coldcache_zone_describe(desc: *const c_char) {
    if desc.is_null() {
        return;
    }
    // SAFETY: a NUL-terminated string per the contract.
    let d = unsafe { CStr::from_ptr(desc) }
        .to_string_lossy()
        .into_owned();
    record::guarded(|| spike::set_description(d));
}
