//! Set-up of a capture from the environment, when `coldcache record` has
//! preloaded the library into a program (see `docs/capture.md` for the
//! variables). Runs from the library's constructor, before `main`
//! ([`init_from_env`]); `coldcache attach` hands the same variables as
//! `NAME=VALUE` lines to the same parser (`arm_from`, from `attach.rs`).
//!
//! What the library must not parse arrives parsed: the cache configuration
//! as the JSON of `HierarchyConfig` ([`cache_from_json`]), the
//! `--function` as the file and ELF address `record` resolved, turned into
//! a run-time address with the file's load bias here. With
//! `record --in-dlopen` the capture waits for a `dlopen`: [`after_dlopen`]
//! looks the exact symbol name up in the files mapped since and arms the
//! capture there, and [`around_dlclose`] takes its breakpoint out before
//! that library can be unmapped (`lifecycle::disarm`).

use crate::lifecycle;
use crate::options::{Options, Reserves, Threads, Trigger};
use crate::state::preload::{Later, AT_EXIT, LATER, LATER_HOLDER, SHADOWED};
pub use crate::state::preload::{WATCHING, WATCH_DLOPEN};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// Environment variables `coldcache record` sets, removed from the
/// environment once read so that programs the target starts are not
/// captured too.
pub const VARS: &[&str] = &[
    "COLDCACHE_RECORD",
    "COLDCACHE_CACHE_JSON",
    "COLDCACHE_CACHE_NAME",
    "COLDCACHE_CACHE_FILE",
    "COLDCACHE_OUTPUT",
    "COLDCACHE_TRIGGER",
    "COLDCACHE_FUNCTION",
    "COLDCACHE_FIRST_CALL",
    "COLDCACHE_CALLS",
    "COLDCACHE_WARM_CALLS",
    "COLDCACHE_SCHEDULE",
    "COLDCACHE_LINE_USE",
    "COLDCACHE_OBJECTS",
    "COLDCACHE_ALLOCATORS",
    "COLDCACHE_RSEQ_COMMIT",
    "COLDCACHE_CLIENT_REQUESTS",
    "COLDCACHE_TIMELINE",
    "COLDCACHE_TIMELINE_LIMIT",
    "COLDCACHE_THREADS",
    "COLDCACHE_CORES",
    "COLDCACHE_MAX_INSTRUCTIONS",
    "COLDCACHE_TRACE",
    "COLDCACHE_SIGNAL",
    "COLDCACHE_RESERVES",
    "COLDCACHE_ARGV",
    "COLDCACHE_LIB",
    "COLDCACHE_MODE",
    "COLDCACHE_DUMPS",
    "COLDCACHE_FUNCTION_MODULE",
    "COLDCACHE_FUNCTION_ADDRESS",
    "COLDCACHE_FUNCTION_DLOPEN",
    "COLDCACHE_PROGRESS_FILE",
    "COLDCACHE_STOP_FILE",
];

fn var(name: &str) -> Option<String> {
    coldcache_fsio::env::var(name)
}

/// `name` as the program's global symbol lookup finds it
/// (`dlsym(RTLD_DEFAULT, name)`), where that lies in another object than
/// this copy of the library: its address and that object's file. `None`
/// when the lookup finds nothing or finds ours. (Objects are compared,
/// not addresses with ours: an exported function's address taken in a
/// shared library is the interposed one.)
pub(crate) fn in_another_copy(name: &std::ffi::CStr) -> Option<(*mut libc::c_void, String)> {
    // SAFETY: `dlsym` with a NUL-terminated name; `dladdr` fills the
    // zeroed `Dl_info`, whose `dli_fname` is a NUL-terminated string the
    // loader keeps while the object is loaded (copied at once).
    unsafe {
        let found = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
        if found.is_null() {
            return None;
        }
        let object = |addr: *const libc::c_void| {
            let mut info: libc::Dl_info = std::mem::zeroed();
            (libc::dladdr(addr, &mut info) != 0).then_some(info)
        };
        let (theirs, ours) = (
            object(found)?,
            object(in_another_copy as *const libc::c_void)?,
        );
        if theirs.dli_fbase == ours.dli_fbase {
            return None;
        }
        let file = if theirs.dli_fname.is_null() {
            "another file".into()
        } else {
            std::ffi::CStr::from_ptr(theirs.dli_fname)
                .to_string_lossy()
                .into_owned()
        };
        Some((found, file))
    }
}

/// The file of the copy of this library that comes before this one in the
/// program's global symbol lookup (its `coldcache_start` is found first),
/// if there is one.
pub(crate) fn shadowing_copy() -> Option<String> {
    in_another_copy(c"coldcache_start").map(|(_, file)| file)
}

/// Parses the thread selection syntax `all`, `caller`, `1,2,3`,
/// `name:a,b`.
pub fn parse_threads(s: &str) -> Result<Threads, String> {
    match s {
        "all" => Ok(Threads::All),
        "caller" | "main" => Ok(Threads::Caller),
        _ => {
            if let Some(names) = s.strip_prefix("name:") {
                return Ok(Threads::Names(names.split(',').map(String::from).collect()));
            }
            s.split(',')
                .map(|t| {
                    t.trim().parse::<u32>().map_err(|_| {
                        format!("thread selection `{s}`: expected all, caller, name:NAMES or thread ids")
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Threads::Tids)
        }
    }
}

/// The trigger `coldcache record` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TriggerSpec {
    Api,
    Function {
        name: String,
        /// Where `coldcache record` found it before the run: the file
        /// (canonical) and the symbol's ELF address.
        at: Option<(String, u64)>,
        /// `record --in-dlopen`: not found before the run, to be looked
        /// for in each library the program opens with `dlopen`.
        dlopen: bool,
        first: u64,
        count: u64,
        warm: u64,
    },
    Signal(i32),
}

/// Where the settings come from: the environment (`record`), or the
/// settings text `coldcache attach` hands to `coldcache_attach_start`
/// (`crate::attach`); same names, same meanings.
pub(crate) type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

fn number<T: std::str::FromStr>(var: Lookup, name: &str, default: T) -> Result<T, String> {
    match var(name) {
        None => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| format!("{name} `{v}` is not a number")),
    }
}

/// The configuration `coldcache record` resolved (presets, `host`, TOML
/// files and overrides are all read there), handed over as the JSON of
/// `HierarchyConfig` in `COLDCACHE_CACHE_JSON`, and validated again here:
/// the library links no configuration-file parser.
pub fn cache_from_json(json: &str) -> Result<coldcache_sim::HierarchyConfig, String> {
    let cfg: coldcache_sim::HierarchyConfig = serde_json::from_str(json)
        .map_err(|e| format!("COLDCACHE_CACHE_JSON is not a cache configuration: {e}"))?;
    cfg.validate()
        .map_err(|e| format!("COLDCACHE_CACHE_JSON: invalid cache configuration: {e}"))?;
    Ok(cfg)
}

fn options_from_env() -> Result<Option<(Options, TriggerSpec)>, String> {
    options_from(&var)
}

/// The capture the settings ask for (`None` when `COLDCACHE_RECORD` is
/// not set: no capture).
fn options_from(var: Lookup) -> Result<Option<(Options, TriggerSpec)>, String> {
    if var("COLDCACHE_RECORD").is_none() {
        return Ok(None);
    }
    // `record` hands the configuration over in a file (its name on the
    // first line, its JSON after), so that the environment, which sits at
    // the top of the program's stack, has the same size whatever the cache:
    // two captures with different caches see the same stack addresses.
    let (name, json) = match var("COLDCACHE_CACHE_FILE") {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("COLDCACHE_CACHE_FILE {path}: {e}"))?;
            let (name, json) = text.split_once('\n').ok_or_else(|| {
                format!("COLDCACHE_CACHE_FILE {path}: expected a name line, then the JSON")
            })?;
            (name.to_string(), json.to_string())
        }
        None => (
            var("COLDCACHE_CACHE_NAME").unwrap_or_else(|| "cache".into()),
            var("COLDCACHE_CACHE_JSON").ok_or("COLDCACHE_CACHE_JSON is not set")?,
        ),
    };
    let cfg = cache_from_json(&json)?;
    let mut o = Options::new(
        cfg,
        var("COLDCACHE_OUTPUT").unwrap_or_else(|| "coldcache.ccdump".into()),
    );
    o.cache_name = name;
    if let Some(t) = var("COLDCACHE_THREADS") {
        o.threads = parse_threads(&t)?;
    }
    if let Some(c) = var("COLDCACHE_CORES") {
        for part in c.split(',') {
            let (t, k) = part
                .split_once('=')
                .ok_or_else(|| format!("COLDCACHE_CORES entry `{part}` is not TID=CORE"))?;
            let t: u32 = t
                .parse()
                .map_err(|_| format!("COLDCACHE_CORES: bad thread id `{t}`"))?;
            let k: u32 = k
                .parse()
                .map_err(|_| format!("COLDCACHE_CORES: bad core `{k}`"))?;
            o.core_map.push((t, k));
        }
    }
    o.max_instructions = number(var, "COLDCACHE_MAX_INSTRUCTIONS", 0u64)?;
    o.trace = var("COLDCACHE_TRACE").map(PathBuf::from);
    crate::options::apply_settings(&mut o, var("COLDCACHE_MODE"), var)?;
    if let Some(r) = var("COLDCACHE_RESERVES") {
        o.reserves = crate::options::parse_reserves(&r, Reserves::default())?;
    }
    if let Some(a) = var("COLDCACHE_ARGV") {
        o.program = a.split('\x1f').map(String::from).collect();
    }
    let trigger = match var("COLDCACHE_TRIGGER").as_deref().unwrap_or("api") {
        "api" => TriggerSpec::Api,
        "function" => TriggerSpec::Function {
            name: var("COLDCACHE_FUNCTION").ok_or("COLDCACHE_FUNCTION is not set")?,
            at: match (
                var("COLDCACHE_FUNCTION_MODULE"),
                var("COLDCACHE_FUNCTION_ADDRESS"),
            ) {
                (Some(m), Some(a)) => Some((
                    m,
                    u64::from_str_radix(a.trim_start_matches("0x"), 16).map_err(|_| {
                        format!("COLDCACHE_FUNCTION_ADDRESS `{a}` is not a hexadecimal address")
                    })?,
                )),
                _ => None,
            },
            dlopen: var("COLDCACHE_FUNCTION_DLOPEN").is_some(),
            first: number(var, "COLDCACHE_FIRST_CALL", 1u64)?,
            count: number(var, "COLDCACHE_CALLS", 1u64)?,
            warm: match var("COLDCACHE_WARM_CALLS").as_deref() {
                Some("all") => u64::MAX,
                _ => number(var, "COLDCACHE_WARM_CALLS", 0u64)?,
            },
        },
        "signal" => TriggerSpec::Signal(number(var, "COLDCACHE_SIGNAL", libc::SIGUSR2)?),
        other => {
            return Err(format!(
                "COLDCACHE_TRIGGER `{other}` is not api, function or signal"
            ))
        }
    };
    Ok(Some((o, trigger)))
}

/// Removes our variables, and our library from `LD_PRELOAD`, without
/// calling `setenv` (which would allocate from the program's heap): the
/// variables are unset, and a remaining `LD_PRELOAD` list is rewritten in
/// place (it only gets shorter).
fn scrub_environment() {
    let lib = var("COLDCACHE_LIB");
    for v in VARS {
        std::env::remove_var(v);
    }
    let Some(lib) = lib else { return };
    // SAFETY: getenv returns NULL or the variable's NUL-terminated value in
    // the environment block; we only shorten it in place, before `main`
    // and before any other thread exists that could read it concurrently.
    unsafe {
        let p = libc::getenv(c"LD_PRELOAD".as_ptr());
        if p.is_null() {
            return;
        }
        let value = std::ffi::CStr::from_ptr(p).to_bytes();
        let rest: Vec<&[u8]> = value
            .split(|&c| c == b':' || c == b' ')
            .filter(|e| !e.is_empty() && *e != lib.as_bytes())
            .collect();
        if rest.is_empty() {
            std::env::remove_var("LD_PRELOAD");
            return;
        }
        let joined = rest.join(&b':');
        if joined.len() <= value.len() {
            std::ptr::copy_nonoverlapping(joined.as_ptr(), p as *mut u8, joined.len());
            *(p as *mut u8).add(joined.len()) = 0;
        }
    }
}

/// The exit hook: writes the dump of a capture still running or armed.
/// A traced thread that reaches it stops being traced first (it is one of
/// the accountant's stop entries).
pub(crate) extern "C" fn at_exit() {
    lifecycle::finish_at_exit();
    if !crate::output::quiet() {
        report_never_loaded();
    }
}

/// Reads the environment and arms the requested capture. Errors are
/// printed; the program then runs uncaptured.
pub fn init_from_env() {
    if let Some(other) = shadowing_copy() {
        // Two copies of the library in one process: the program links one
        // (its C API) and `record` preloaded another file. The program's
        // calls of the C API and of every function the library interposes
        // reach the first in lookup order, so the capture must be that
        // copy's: this one leaves the settings to it and stays idle. (Both
        // arming captures, each with its own handlers, crashed the
        // program.)
        SHADOWED.store(true, Ordering::Relaxed);
        if var("COLDCACHE_RECORD").is_some() {
            coldcache_fsio::say!(
                "coldcache: note: the program loads a second copy of libcoldcache.so ({}); \
                 the preloaded one ({}) captures",
                own_path().unwrap_or_else(|| "?".into()),
                other
            );
        }
        return;
    }
    if coldcache_fsio::env::secure()
        && std::env::vars_os().any(|(k, _)| k.as_encoded_bytes().starts_with(b"COLDCACHE_"))
    {
        // Said once, here in the constructor: every reader of a setting
        // (`coldcache_fsio::env::var`) ignores it in such a process.
        coldcache_fsio::say!(
            "coldcache: this program runs set-user-ID or set-group-ID (AT_SECURE): \
             every COLDCACHE_* setting is ignored"
        );
    }
    crate::state::set_env_mode(var("COLDCACHE_MODE"));
    let parsed = options_from_env();
    // The trigger signal, which also stops captures of the other kinds
    // (`coldcache trigger`, `record`'s Ctrl-C): read before the scrub.
    let stop_signal = var("COLDCACHE_SIGNAL").and_then(|v| v.parse::<i32>().ok());
    if let Some(p) = var("COLDCACHE_PROGRESS_FILE") {
        lifecycle::publish_progress(std::path::Path::new(&p));
    }
    if let Some(p) = var("COLDCACHE_STOP_FILE") {
        crate::engine::set_stop_file(PathBuf::from(p));
    }
    if let Some(m) = var("COLDCACHE_DUMPS") {
        crate::output::set_manifest(PathBuf::from(m));
    }
    scrub_environment();
    // Before `main`: a seccomp filter in place now was inherited.
    crate::seccomp::note_inherited();
    let parsed = match parsed {
        Ok(Some(x)) => x,
        Ok(None) => return,
        Err(e) => {
            coldcache_fsio::say!("coldcache: not capturing: {e}");
            return;
        }
    };
    if let Err(e) = arm(parsed, stop_signal) {
        coldcache_fsio::say!("coldcache: not capturing: {e}");
    }
}

/// Settings handed over by `coldcache attach` (see `crate::attach`): the
/// same names and meanings as the environment `record` sets, read by the
/// same code. Arms the capture they ask for.
pub(crate) fn arm_from(var: Lookup) -> Result<(), String> {
    let parsed = options_from(var)?.ok_or("COLDCACHE_RECORD is not set")?;
    if let Some(p) = var("COLDCACHE_PROGRESS_FILE") {
        lifecycle::publish_progress(std::path::Path::new(&p));
    }
    crate::output::new_run();
    if let Some(m) = var("COLDCACHE_DUMPS") {
        crate::output::set_manifest(PathBuf::from(m));
    }
    if var("COLDCACHE_QUIET").is_some() {
        crate::output::QUIET.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let stop_signal = var("COLDCACHE_SIGNAL").and_then(|v| v.parse::<i32>().ok());
    arm(parsed, stop_signal)
}

/// Arms the capture `(o, trigger)`; `stop_signal` is the signal
/// `coldcache trigger` sends (it stops captures of the other kinds).
fn arm((mut o, trigger): (Options, TriggerSpec), stop_signal: Option<i32>) -> Result<(), String> {
    AT_EXIT.call_once(|| {
        // A stop entry of every capture (`lifecycle::prepare`): a traced
        // thread that reaches it stops being traced.
        crate::state::set_exit_hook(at_exit as *const () as usize as u64);
        // SAFETY: registering an `extern "C" fn()` that lives as long as the process.
        unsafe { libc::atexit(at_exit) };
    });
    if !matches!(trigger, TriggerSpec::Signal(_)) {
        if let Some(sig) = stop_signal {
            // Before `prepare`, so the fatal-signal handlers leave it alone.
            if let Err(e) = crate::engine::install_stop_signal(sig) {
                coldcache_fsio::say!(
                    "coldcache: `coldcache trigger` cannot stop this capture: {e}"
                );
            }
        }
    }
    let result = match trigger {
        TriggerSpec::Api => {
            if let Ok(mut d) = crate::state::DEFAULTS.lock() {
                *d = Some(o);
            }
            Ok(())
        }
        TriggerSpec::Function {
            name,
            at,
            dlopen,
            first,
            count,
            warm,
        } => (|| {
            if dlopen && at.is_none() {
                let mut searched = std::collections::HashSet::new();
                // The library itself never holds the program's function.
                if let Some(me) = own_path() {
                    searched.insert(me);
                }
                let Some(mut g) = lock_later() else {
                    return Err("arming a capture from inside another".to_string());
                };
                *g.0 = Some(Later {
                    options: o,
                    name,
                    first,
                    count,
                    warm,
                    searched,
                    armed_in: None,
                    calls_seen: 0,
                    pid: std::process::id(),
                });
                WATCHING.store(true, Ordering::Release);
                WATCH_DLOPEN.store(true, Ordering::Release);
                return Ok(());
            }
            let address = match &at {
                Some((module, addr)) => crate::procfs::runtime_address(module, *addr)?,
                None => crate::procfs::find_function(&name)?.address,
            };
            o.trigger = Trigger::Function {
                name,
                address,
                first,
                count,
                warm,
            };
            lifecycle::prepare(o).map(|_| ()).map_err(|e| e.to_string())
        })(),
        TriggerSpec::Signal(sig) => {
            o.trigger = Trigger::Signal;
            if o.threads == Threads::Caller {
                o.threads = Threads::All;
            }
            crate::engine::install_trigger_signal(sig, o, lifecycle::prepare)
                .map_err(|e| e.to_string())
        }
    };
    result
}

/// [`LATER`], locked; released (and its holder cleared) when dropped.
struct LaterGuard(std::sync::MutexGuard<'static, Option<Later>>);

impl Drop for LaterGuard {
    fn drop(&mut self) {
        LATER_HOLDER.store(0, Ordering::Release);
    }
}

/// Locks [`LATER`], or `None` when this thread holds it already.
fn lock_later() -> Option<LaterGuard> {
    let me = crate::state::gettid();
    if LATER_HOLDER.load(Ordering::Acquire) == me {
        return None;
    }
    let g = LATER.lock().unwrap_or_else(|e| e.into_inner());
    LATER_HOLDER.store(me, Ordering::Release);
    Some(LaterGuard(g))
}

/// The canonical path of this library's own file.
fn own_path() -> Option<String> {
    let me = own_path as *const () as usize as u64;
    crate::procfs::self_maps()
        .into_iter()
        .find(|m| m.start <= me && me < m.end && m.path.starts_with('/'))
        .map(|m| m.path)
}

/// Called by the `dlopen` interposer after a successful `dlopen` while
/// [`WATCH_DLOPEN`] is set: looks the waiting capture's function up (its
/// exact symbol name, `.symtab` then `.dynsym`) in the files mapped since
/// the last search, and arms the capture there.
pub fn after_dlopen() {
    let Some(mut g) = lock_later() else { return };
    let Some(later) = g.0.as_mut() else {
        WATCH_DLOPEN.store(false, Ordering::Release);
        return;
    };
    if later.armed_in.is_some() || later.pid != std::process::id() {
        return;
    }
    let Some(found) = crate::procfs::find_function_skipping(&later.name, &mut later.searched)
    else {
        return;
    };
    let mut o = later.options.clone();
    o.trigger = Trigger::Function {
        name: later.name.clone(),
        address: found.address,
        first: later.first,
        count: later.count,
        warm: later.warm,
    };
    match lifecycle::prepare(o) {
        Ok(_) => {
            lifecycle::resume_calls(later.calls_seen);
            later.armed_in = Some(found.module);
            WATCH_DLOPEN.store(false, Ordering::Release);
        }
        Err(e) => {
            coldcache_fsio::say!(
                "coldcache: not capturing {} in {}: {e}",
                later.name,
                found.module
            );
            *g.0 = None;
            WATCH_DLOPEN.store(false, Ordering::Release);
        }
    }
}

/// Whether the `dlclose` interposer must go through [`around_dlclose`].
pub fn dlclose_watched() -> bool {
    if !WATCHING.load(Ordering::Acquire) {
        return false;
    }
    lock_later().is_some_and(|g| g.0.as_ref().is_some_and(|l| l.armed_in.is_some()))
}

/// Runs the C library's `dlclose` (`call`) for a program whose capture is
/// armed in a library it opened: the breakpoint is taken out first, while
/// the code is mapped; if the library is still mapped after the call (it
/// was opened more than once, or is needed by another), the capture is
/// armed there again, else it waits for the next `dlopen` that brings the
/// function back. Calls seen before count on. A capture between calls of
/// its window (or warming) ends there instead, cut short, its dump kept.
pub fn around_dlclose(call: impl FnOnce() -> i32) -> i32 {
    let Some(mut g) = lock_later() else {
        return call();
    };
    let Some(later) = g.0.as_mut() else {
        drop(g);
        return call();
    };
    let Some(module) = later.armed_in.clone() else {
        drop(g);
        return call();
    };
    let seen = match lifecycle::disarm("the function's library was closed (dlclose)") {
        lifecycle::Disarmed::Dropped(seen) => seen,
        // The window ran, runs, or was ended here with its dump: nothing
        // is armed any more.
        lifecycle::Disarmed::Ended | lifecycle::Disarmed::Nothing => {
            *g.0 = None;
            drop(g);
            return call();
        }
    };
    later.calls_seen = seen;
    later.armed_in = None;
    later.searched.remove(&module);
    let r = call();
    // SAFETY: errno of this thread, kept across the lookup.
    let e = unsafe { *libc::__errno_location() };
    drop(g);
    WATCH_DLOPEN.store(true, Ordering::Release);
    // Still mapped: armed again at once; else at a later dlopen.
    after_dlopen();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
    r
}

/// At exit, a capture still waiting for its function's library (never
/// loaded) says so on standard error (`record` says it itself).
fn report_never_loaded() {
    let Some(g) = lock_later() else { return };
    if let Some(l) = g.0.as_ref().filter(|l| l.armed_in.is_none()) {
        coldcache_fsio::say!(
            "coldcache: --function {}: no library the program opened with dlopen defines it \
             (it was never loaded); no capture was made",
            l.name
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{Mode, Schedule};
    use crate::settings::{CacheSetting, Settings, TriggerSetting};
    use std::collections::HashMap;

    /// Settings as `record` or `attach` would write them.
    fn settings(cache: CacheSetting, trigger: TriggerSetting) -> Settings {
        Settings {
            cache,
            output: "/tmp/out.ccdump".into(),
            manifest: "/tmp/dumps.jsonl".into(),
            threads: "1,2".into(),
            argv: vec!["prog".into(), "an arg".into()],
            mode: "trap".into(),
            schedule: "serial=500".into(),
            line_use: true,
            objects: true,
            timeline: false,
            rseq_commit: "1".into(),
            client_requests: None,
            cores: vec!["1=0".into(), "2=1".into()],
            allocators: None,
            max_instructions: Some(12345),
            trace: Some("/tmp/t.cctrace".into()),
            reserves: Some("instructions=777".into()),
            stop_file: None,
            progress_file: None,
            trigger,
            signal: 12,
            attacher: None,
        }
    }

    /// [`options_from`] over the settings' pairs, as the library reads them.
    fn read(s: &Settings) -> (Options, TriggerSpec) {
        let pairs: HashMap<&str, String> = s
            .pairs()
            .into_iter()
            .map(|(k, v)| (k, v.to_string_lossy().into_owned()))
            .collect();
        let lookup = |name: &str| pairs.get(name).cloned();
        options_from(&lookup).unwrap().unwrap()
    }

    fn jaguar_json() -> String {
        serde_json::to_string(&crate::capi::resolve_cache("jaguar").unwrap()).unwrap()
    }

    /// Every setting `record` and `attach` write comes back through the
    /// one reader as the options and trigger they meant: the names and the
    /// value syntax of the writer ([`Settings::pairs`]) and the reader
    /// agree.
    #[test]
    fn every_setting_reads_back_as_written() {
        let s = settings(
            CacheSetting::Inline {
                name: "jaguar".into(),
                json: jaguar_json(),
            },
            TriggerSetting::Function {
                name: "work".into(),
                at: Some(("/usr/lib/libx.so".into(), 0x1234)),
                dlopen: true,
                first: 3,
                count: 2,
                warm: Some("1".into()),
            },
        );
        let (o, t) = read(&s);
        assert_eq!(o.cache_name, "jaguar");
        assert_eq!(o.cache, crate::capi::resolve_cache("jaguar").unwrap());
        assert_eq!(o.output, PathBuf::from("/tmp/out.ccdump"));
        assert_eq!(o.threads, parse_threads("1,2").unwrap());
        assert_eq!(o.core_map, [(1, 0), (2, 1)]);
        assert_eq!(o.max_instructions, 12345);
        assert_eq!(o.trace, Some(PathBuf::from("/tmp/t.cctrace")));
        assert_eq!(o.reserves.instructions, 777);
        assert_eq!(o.program, ["prog", "an arg"]);
        assert_eq!(o.mode, Mode::Trap);
        assert_eq!(o.schedule, Schedule::Serial { quantum: 500 });
        assert!(o.line_use && o.objects && o.timeline.is_none() && o.rseq_commit);
        assert_eq!(
            t,
            TriggerSpec::Function {
                name: "work".into(),
                at: Some(("/usr/lib/libx.so".into(), 0x1234)),
                dlopen: true,
                first: 3,
                count: 2,
                warm: 1,
            }
        );
    }

    #[test]
    fn the_cache_file_and_the_other_triggers_read_back() {
        let dir = std::env::temp_dir().join(format!("coldcache-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("cache");
        std::fs::write(&file, format!("my cache\n{}", jaguar_json())).unwrap();
        let (o, t) = read(&settings(CacheSetting::File(file), TriggerSetting::Signal));
        assert_eq!(o.cache_name, "my cache");
        assert_eq!(t, TriggerSpec::Signal(12));
        let (_, t) = read(&settings(
            CacheSetting::Inline {
                name: "jaguar".into(),
                json: jaguar_json(),
            },
            TriggerSetting::Api,
        ));
        assert_eq!(t, TriggerSpec::Api);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What the library removes from the program's environment covers
    /// every setting `record` writes there but `COLDCACHE_QUIET` (read
    /// later, by the library's messages).
    #[test]
    fn every_setting_is_scrubbed_from_the_environment() {
        let mut s = settings(
            CacheSetting::File("/x".into()),
            TriggerSetting::Function {
                name: "f".into(),
                at: Some(("/m".into(), 1)),
                dlopen: true,
                first: 1,
                count: 1,
                warm: Some("all".into()),
            },
        );
        s.client_requests = Some("all".into());
        s.allocators = Some("a".into());
        s.stop_file = Some("/s".into());
        s.progress_file = Some("/p".into());
        let missing: Vec<&str> = s
            .pairs()
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| !VARS.contains(k) && *k != crate::settings::names::QUIET)
            .collect();
        assert!(missing.is_empty(), "{missing:?}");
    }
}
