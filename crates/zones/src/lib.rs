//! coldcache-zones: zones and spikes.
//!
//! Two tools over one recording hook, after the seeds' ProfileParser and PET
//! profiler:
//!
//! * **Zones**, an instrumentation profiler whose recording does nothing but
//!   append a label id and an `rdtsc` time stamp to a per-thread chunk of one
//!   preallocated arena ([`record`]); the file ([`format`]) is parsed
//!   afterwards ([`parse`]) into per-thread hierarchies, top-down and
//!   bottom-up views with statistics ([`views`]) and exports ([`export`]:
//!   Chrome/Perfetto trace JSON, speedscope, folded stacks, flame graph SVG,
//!   graphviz).
//! * **Spikes**, a run-time detector ([`spike`]): zones over a threshold are
//!   logged with their full stack as they end.
//!
//! ```
//! fn decode_frame(data: &[u8]) {
//!     coldcache_zones::zone_bytes!("decode_frame", data.len());
//!     for chunk in data.chunks(64) {
//!         coldcache_zones::zone!("chunk");
//!         std::hint::black_box(chunk);
//!     }
//! }
//! decode_frame(&[0u8; 256]);
//! coldcache_zones::frame_mark();
//! ```
//!
//! C and C++ programs use the same recorder through `libcoldcache.so` and
//! `coldcache.h` (the [`capi`] module, feature `capi`), or with no source
//! change through `-finstrument-functions`.
//!
//! Layering: [`format`], [`parse`], [`views`] and [`export`] are pure (bytes
//! and values in, values out; `format::index` reads through `Read + Seek`);
//! [`record`], [`spike`] and [`capi`] touch the OS; [`symbols`] reads
//! binaries to name function addresses; [`stream`] reads a recording from
//! its file chunk by chunk for views and exports whose memory does not
//! grow with the events (what `coldcache zones` uses).
//!
//! With the feature `disabled`, every zone macro compiles to nothing.

#![warn(missing_docs)]

pub mod export;
pub mod format;
pub mod parse;
pub mod record;
pub mod spike;
#[cfg(feature = "analysis")]
pub mod stream;
#[cfg(feature = "analysis")]
pub mod symbols;
pub mod views;

#[cfg(feature = "capi")]
pub mod capi;

pub use format::ZoneKey;
pub use record::{set_enabled, write_to, Label};

use format::{kind, pack};

/// Starts the recorder, then the spike detector (which reads its
/// settings once the recorder's clock runs); true when the recorder is
/// ready. The recorder also starts itself on any first event, the
/// detector only here: every entry point that may begin a zone calls
/// this first. Neither module calls the other's start or end.
#[inline(always)]
pub(crate) fn ensure_init() -> bool {
    if !record::ensure_init() {
        return false;
    }
    spike::ensure_init();
    true
}

/// Names the calling thread in the recording (and the spike log),
/// starting both first.
pub fn set_thread_name(name: &str) {
    ensure_init();
    record::set_thread_name(name);
}

/// Whether both have started ([`ensure_init`]).
#[inline(always)]
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) fn ready() -> bool {
    record::ready() && spike::initialized()
}

/// Sets the calling thread up in the recorder and, the first time, in the
/// detector before a zone's start stamp is read.
#[inline(always)]
pub(crate) fn prepare_thread() {
    if record::prepare_thread() {
        spike::prepare_thread();
    }
}

/// An open zone; ends it when dropped. Made by [`begin`] and the macros.
#[must_use = "a zone ends when its guard is dropped"]
pub struct ZoneGuard {
    id: u32,
}

/// Begins a zone for a static label (the macros call this).
#[inline(always)]
pub fn begin(label: &'static Label) -> ZoneGuard {
    let id = label.id();
    // The first zone starts the recorder and the spike detector, whose
    // settings may turn it on: before asking whether it is on.
    ensure_init();
    if spike::on() {
        // The thread's set-up before the start stamp, not inside the zone.
        prepare_thread();
        let tsc = record::rdtsc();
        spike::enter_at(ZoneKey::Label(id), tsc);
        record::emit_at(pack(kind::BEGIN, id as u64), tsc);
    } else {
        record::emit(pack(kind::BEGIN, id as u64));
    }
    ZoneGuard { id }
}

/// Begins a zone that processes `bytes` bytes (for clocks per byte).
#[inline(always)]
pub fn begin_bytes(label: &'static Label, bytes: u64) -> ZoneGuard {
    let g = begin(label);
    record::emit(pack(kind::BYTES, bytes));
    g
}

impl Drop for ZoneGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if spike::on() {
            let tsc = record::rdtsc();
            record::emit_at(pack(kind::END, self.id as u64), tsc);
            spike::exit_at(ZoneKey::Label(self.id), tsc);
        } else {
            record::emit(pack(kind::END, self.id as u64));
        }
    }
}

/// Marks the end of a frame: recorded as an event, and the frame number
/// the spike log reports.
#[inline]
pub fn frame_mark() {
    #[cfg(not(feature = "disabled"))]
    {
        ensure_init();
        let n = spike::next_frame();
        record::emit(pack(kind::FRAME, n));
    }
}

/// Opens a zone named by a string literal until the end of the scope.
#[cfg(not(feature = "disabled"))]
#[macro_export]
macro_rules! zone {
    ($name:expr) => {
        let _coldcache_zone = {
            static LABEL: $crate::Label = $crate::Label::new($name, file!(), line!());
            $crate::begin(&LABEL)
        };
    };
}

/// Opens a zone that processes `bytes` bytes (any integer expression).
#[cfg(not(feature = "disabled"))]
#[macro_export]
macro_rules! zone_bytes {
    ($name:expr, $bytes:expr) => {
        let _coldcache_zone = {
            static LABEL: $crate::Label = $crate::Label::new($name, file!(), line!());
            $crate::begin_bytes(&LABEL, ($bytes) as u64)
        };
    };
}

/// Opens a zone only if `cond` is true (PET's conditional zones).
#[cfg(not(feature = "disabled"))]
#[macro_export]
macro_rules! zone_if {
    ($cond:expr, $name:expr) => {
        let _coldcache_zone = if $cond {
            static LABEL: $crate::Label = $crate::Label::new($name, file!(), line!());
            Some($crate::begin(&LABEL))
        } else {
            None
        };
    };
}

/// Attaches a message to the innermost zone, formatted only if that zone
/// is already over its spike threshold (PET's `OTMessagef`).
#[cfg(not(feature = "disabled"))]
#[macro_export]
macro_rules! zone_message {
    ($($arg:tt)*) => {
        if $crate::spike::over_threshold_now() {
            $crate::spike::set_message(format!($($arg)*));
        }
    };
}

/// Attaches a description to the innermost zone, formatted now and printed
/// if the zone spikes (PET's `SetFunctionDescf`); only formats when the
/// spike detector is on.
#[cfg(not(feature = "disabled"))]
#[macro_export]
macro_rules! zone_describe {
    ($($arg:tt)*) => {
        if $crate::spike::on() {
            $crate::spike::set_description(format!($($arg)*));
        }
    };
}

/// Compiled out (feature `disabled`).
#[cfg(feature = "disabled")]
#[macro_export]
macro_rules! zone {
    ($name:expr) => {};
}
/// Compiled out (feature `disabled`).
#[cfg(feature = "disabled")]
#[macro_export]
macro_rules! zone_bytes {
    ($name:expr, $bytes:expr) => {};
}
/// Compiled out (feature `disabled`).
#[cfg(feature = "disabled")]
#[macro_export]
macro_rules! zone_if {
    ($cond:expr, $name:expr) => {};
}
/// Compiled out (feature `disabled`).
#[cfg(feature = "disabled")]
#[macro_export]
macro_rules! zone_message {
    ($($arg:tt)*) => {};
}
/// Compiled out (feature `disabled`).
#[cfg(feature = "disabled")]
#[macro_export]
macro_rules! zone_describe {
    ($($arg:tt)*) => {};
}
