//! The entry point `coldcache attach` calls in a running process once
//! `libcoldcache.so` is loaded there (by a remote `dlopen`, or preloaded
//! earlier): `coldcache_attach_start(settings)`.
//!
//! The settings are the channel of our own that replaces the environment
//! (fixed once a process runs): one `NAME=VALUE` a line, the names and
//! meanings of the variables `coldcache record` sets (`docs/capture.md`,
//! "Environment variables"), read by the same parser
//! ([`crate::preload::arm_from`]). One more name is ours:
//! `COLDCACHE_ATTACHER`, the thread id of the `coldcache attach` thread that
//! traces the calling thread during the call; the "already traced by a
//! debugger" refusal makes an exception for it (it detaches before any
//! instruction is captured).
//!
//! The call runs on a thread `coldcache attach` stopped with ptrace, with
//! the process's other threads running; it arms the capture (plants the
//! function's breakpoint, or installs the trigger signal's handler) and
//! returns: it never starts tracing the calling thread itself.
//!
//! That thread is left alone until the tracer lets it go
//! ([`crate::state::REMOTE_TID`]): a window another thread opens at once
//! (a busy process running the function) starts every other thread, and
//! one started in the middle of `coldcache attach`'s remote calls crashed
//! them ("the remote call of munmap crashed") and left the process hung.
//! The first window or sync signal that finds the thread's `TracerPid` 0
//! clears the mark and starts it ([`crate::state::remote_held`]).

use crate::state::attach::LAST_ERROR;
use crate::state::{STATE, STOPPING};
use std::ffi::{c_char, CStr, CString};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long an attach waits for the previous capture's finish to end.
const FINISH_WAIT: Duration = Duration::from_secs(10);

/// Parses `settings` (one `NAME=VALUE` a line, the value written by
/// [`crate::settings::to_line`]) into a lookup.
fn settings_map(settings: &str) -> Result<Vec<(String, String)>, String> {
    settings
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), crate::settings::line_value(v)))
                .ok_or_else(|| format!("attach settings: line `{l}` is not NAME=VALUE"))
        })
        .collect()
}

/// Arms the capture `settings` ask for (see the module doc).
pub fn start(settings: &str) -> Result<(), String> {
    let map = settings_map(settings)?;
    let get = |name: &str| {
        map.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let attacher = match get("COLDCACHE_ATTACHER") {
        Some(p) => p
            .parse::<u32>()
            .map_err(|_| format!("COLDCACHE_ATTACHER `{p}` is not a process id"))?,
        None => 0,
    };
    crate::lifecycle::set_test_finish_pause(
        coldcache_fsio::env::var("COLDCACHE_TEST_FINISH_PAUSE_MS")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    );
    // The last capture's dump is written (its manifest line is what the
    // last `attach` waited for), but the thread finishing it may not have
    // marked it over yet: under load it can be preempted right there. Wait
    // for it rather than refuse "a capture is already in progress" (a
    // finish needs nothing from this thread).
    let t0 = Instant::now();
    while STATE.load(Ordering::Acquire) == STOPPING && t0.elapsed() < FINISH_WAIT {
        std::thread::sleep(Duration::from_millis(1));
    }
    crate::procfs::ATTACHER.store(attacher, Ordering::Relaxed);
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() } as u32;
    crate::state::REMOTE_TID.store(me, Ordering::Release);
    let r = crate::preload::arm_from(&get);
    crate::procfs::ATTACHER.store(0, Ordering::Relaxed);
    if r.is_err() {
        crate::state::REMOTE_TID.store(0, Ordering::Release);
    }
    r
}

/// The entry point type of [`coldcache_attach_start`].
type AttachStart = unsafe extern "C" fn(*const c_char) -> *const c_char;

/// Where this copy of the library is shadowed by another file that comes
/// first in the program's symbol lookup (`state::preload::SHADOWED`: the
/// program links one copy and `record` preloaded another), that copy's
/// `coldcache_attach_start`: the capture must be armed there, in the copy
/// the program's calls of what the library interposes reach. `Err`
/// (naming that copy) when it has none. (`coldcache attach` calls the copy
/// the process's `LD_PRELOAD` names, else the one mapped lowest, which is
/// usually the linked one: arming that one made the program die of
/// SIGSEGV.)
fn shadowing_entry() -> Result<Option<AttachStart>, String> {
    if !crate::state::preload::SHADOWED.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let Some((found, _)) = crate::preload::in_another_copy(c"coldcache_attach_start") else {
        return Err(format!(
            "the program loads two copies of libcoldcache.so, and the one its calls \
             reach first ({}) has no coldcache_attach_start (another version): attach \
             cannot arm a capture in it",
            crate::preload::shadowing_copy().unwrap_or_else(|| "another file".into())
        ));
    };
    // SAFETY: the symbol `coldcache_attach_start` of another copy of this
    // library: a function of this type.
    Ok(Some(unsafe {
        std::mem::transmute::<*mut libc::c_void, AttachStart>(found)
    }))
}

/// `coldcache attach`'s entry point: arms the capture `settings` (a
/// NUL-terminated text, see the module doc) ask for. Returns NULL on
/// success, or a NUL-terminated message saying why not (valid until the
/// next call). In a copy of the library another copy shadows, the call
/// is handed to that copy ([`shadowing_entry`]).
///
/// # Safety
/// `settings` is NULL or a valid NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn coldcache_attach_start(settings: *const c_char) -> *const c_char {
    let result = match shadowing_entry() {
        // SAFETY: the other copy's entry, with the caller's settings.
        Ok(Some(first)) => return unsafe { first(settings) },
        Err(e) => Err(e),
        Ok(None) if settings.is_null() => Err("coldcache_attach_start: no settings".to_string()),
        Ok(None) => {
            // SAFETY: the caller passes a valid NUL-terminated string.
            let text = unsafe { CStr::from_ptr(settings) }.to_string_lossy();
            start(&text)
        }
    };
    let mut last = LAST_ERROR.lock().unwrap_or_else(|e| e.into_inner());
    match result {
        Ok(()) => {
            *last = None;
            std::ptr::null()
        }
        Err(e) => {
            let c = CString::new(e.replace('\0', " ")).unwrap_or_default();
            let p = c.as_ptr();
            *last = Some(c);
            p
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_name_value_lines_and_a_bad_line_is_named() {
        let m = settings_map("A=1\nB=x=y\n\n").unwrap();
        assert_eq!(
            m,
            vec![("A".into(), "1".into()), ("B".into(), "x=y".into())]
        );
        let e = settings_map("A=1\noops\n").unwrap_err();
        assert!(e.contains("`oops`"), "{e}");
    }
}
