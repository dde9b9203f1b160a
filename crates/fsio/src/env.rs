//! coldcache's settings from the environment, refused in a privileged
//! process.
//!
//! The preloaded library runs inside whatever program it is loaded in. In
//! a set-user-ID or set-group-ID program (the kernel sets `AT_SECURE` in
//! the auxiliary vector; the dynamic loader already drops `LD_PRELOAD`
//! outside the trusted directories, but a library installed there, or one
//! the program links, still loads) the environment belongs to the user who
//! started it, not to the user the program runs as: `COLDCACHE_ZONES_OUT`
//! or `COLDCACHE_PROGRESS_FILE` would let them write a file only root may.
//! [`var`] is `secure_getenv`'s rule for every `COLDCACHE_*` setting: in
//! such a process each is ignored (the constructor says so once,
//! [`secure`]).

/// Whether this process runs with privileges its environment's author may
/// not have (`getauxval(AT_SECURE)`: set-user-ID, set-group-ID or file
/// capabilities).
pub fn secure() -> bool {
    // SAFETY: getauxval reads the auxiliary vector; 0 when absent.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// The value of the setting `name`, when set, not empty and this process
/// is not [`secure`].
pub fn var(name: &str) -> Option<String> {
    if secure() {
        return None;
    }
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// [`var`], set or not (an empty value counts as set).
pub fn is_set(name: &str) -> bool {
    !secure() && std::env::var_os(name).is_some()
}
