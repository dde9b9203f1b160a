//! The settings `coldcache record` and `coldcache attach` hand the library:
//! one typed struct, [`Settings`], written as `NAME=VALUE` pairs
//! ([`Settings::pairs`]: `record` puts them in the program's environment,
//! `attach` sends them as lines to `coldcache_attach_start`) and read back
//! by one reader, `preload::options_from`, whichever way they came. The
//! names are spelled once, in [`names`]; a test reads every setting back
//! through the reader (`preload.rs`).
//!
//! Pure: no state, no system call.

use std::ffi::OsString;
use std::path::PathBuf;

/// The names of the settings.
pub mod names {
    /// Present (`1`): the library arms a capture.
    pub const RECORD: &str = "COLDCACHE_RECORD";
    /// The library prints nothing of its own (`record` and `attach` say it).
    pub const QUIET: &str = "COLDCACHE_QUIET";
    /// A file: the cache's name on its first line, its JSON after.
    pub const CACHE_FILE: &str = "COLDCACHE_CACHE_FILE";
    /// The cache's JSON (when there is no file).
    pub const CACHE_JSON: &str = "COLDCACHE_CACHE_JSON";
    /// The cache's name (with `CACHE_JSON`).
    pub const CACHE_NAME: &str = "COLDCACHE_CACHE_NAME";
    /// The dump's path.
    pub const OUTPUT: &str = "COLDCACHE_OUTPUT";
    /// The manifest the library lists what it writes in.
    pub const DUMPS: &str = "COLDCACHE_DUMPS";
    /// The thread selection (`all`, `caller`, ids, `name:...`).
    pub const THREADS: &str = "COLDCACHE_THREADS";
    /// The library's path (so it leaves `LD_PRELOAD` as it found it).
    pub const LIB: &str = "COLDCACHE_LIB";
    /// The program's arguments, separated by 0x1f.
    pub const ARGV: &str = "COLDCACHE_ARGV";
    /// The capture mode (`auto`, `trap`, `fast`, `verify`).
    pub const MODE: &str = "COLDCACHE_MODE";
    /// `--schedule`.
    pub const SCHEDULE: &str = "COLDCACHE_SCHEDULE";
    /// `--line-use` (`1` or `0`).
    pub const LINE_USE: &str = "COLDCACHE_LINE_USE";
    /// `--objects` (`1` or `0`).
    pub const OBJECTS: &str = "COLDCACHE_OBJECTS";
    /// `--timeline` (`1` or `0`).
    pub const TIMELINE: &str = "COLDCACHE_TIMELINE";
    /// Whether the kernel commits an rseq abort as the trap engine expects.
    pub const RSEQ_COMMIT: &str = "COLDCACHE_RSEQ_COMMIT";
    /// `--client-requests`.
    pub const CLIENT_REQUESTS: &str = "COLDCACHE_CLIENT_REQUESTS";
    /// `--thread-core TID=CORE`s, comma-separated.
    pub const CORES: &str = "COLDCACHE_CORES";
    /// `--allocator`s, resolved.
    pub const ALLOCATORS: &str = "COLDCACHE_ALLOCATORS";
    /// `--instructions`.
    pub const MAX_INSTRUCTIONS: &str = "COLDCACHE_MAX_INSTRUCTIONS";
    /// `--trace`'s path.
    pub const TRACE: &str = "COLDCACHE_TRACE";
    /// `--reserve`.
    pub const RESERVES: &str = "COLDCACHE_RESERVES";
    /// Where the library names its stop request signal.
    pub const STOP_FILE: &str = "COLDCACHE_STOP_FILE";
    /// Where the library publishes its progress.
    pub const PROGRESS_FILE: &str = "COLDCACHE_PROGRESS_FILE";
    /// `api`, `function` or `signal`.
    pub const TRIGGER: &str = "COLDCACHE_TRIGGER";
    /// The watched function's name.
    pub const FUNCTION: &str = "COLDCACHE_FUNCTION";
    /// The file that defines it.
    pub const FUNCTION_MODULE: &str = "COLDCACHE_FUNCTION_MODULE";
    /// Its address in that file (hexadecimal).
    pub const FUNCTION_ADDRESS: &str = "COLDCACHE_FUNCTION_ADDRESS";
    /// Present (`1`): the file is loaded later, by `dlopen`.
    pub const FUNCTION_DLOPEN: &str = "COLDCACHE_FUNCTION_DLOPEN";
    /// The first call of the window.
    pub const FIRST_CALL: &str = "COLDCACHE_FIRST_CALL";
    /// How many calls.
    pub const CALLS: &str = "COLDCACHE_CALLS";
    /// `--warm-calls` (a number or `all`).
    pub const WARM_CALLS: &str = "COLDCACHE_WARM_CALLS";
    /// The trigger signal.
    pub const SIGNAL: &str = "COLDCACHE_SIGNAL";
    /// The thread of `coldcache attach` that traces the process.
    pub const ATTACHER: &str = "COLDCACHE_ATTACHER";
}

/// How the cache configuration is handed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheSetting {
    /// In a file (`record`: the environment, at the top of the program's
    /// stack, keeps one size whatever the cache, so two captures with
    /// different caches see the same stack addresses).
    File(PathBuf),
    /// Inline.
    Inline {
        /// The cache's name.
        name: String,
        /// Its configuration, as JSON.
        json: String,
    },
}

/// What starts the capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TriggerSetting {
    /// The program's own calls of the C API.
    Api,
    /// Calls of a function (`--function`; `--all` is `main`'s first call).
    Function {
        /// Its name.
        name: String,
        /// The file that defines it and its address there, when known.
        at: Option<(PathBuf, u64)>,
        /// The file is loaded later, by `dlopen`.
        dlopen: bool,
        /// The first call of the window (1-based).
        first: u64,
        /// How many calls.
        count: u64,
        /// `--warm-calls`, as given.
        warm: Option<String>,
    },
    /// The trigger signal starts and stops windows.
    Signal,
}

/// Everything `record` and `attach` tell the library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The cache configuration.
    pub cache: CacheSetting,
    /// The dump's path.
    pub output: PathBuf,
    /// The manifest's path.
    pub manifest: PathBuf,
    /// The thread selection.
    pub threads: String,
    /// The program's arguments.
    pub argv: Vec<String>,
    /// The capture mode.
    pub mode: String,
    /// `--schedule`.
    pub schedule: String,
    /// `--line-use`.
    pub line_use: bool,
    /// `--objects` (or any `--allocator`).
    pub objects: bool,
    /// `--timeline`.
    pub timeline: bool,
    /// `1` when the kernel commits an rseq abort as expected, else `0`.
    pub rseq_commit: String,
    /// `--client-requests`.
    pub client_requests: Option<String>,
    /// `--thread-core`s, `TID=CORE` each.
    pub cores: Vec<String>,
    /// `--allocator`s, resolved.
    pub allocators: Option<String>,
    /// `--instructions`.
    pub max_instructions: Option<u64>,
    /// `--trace`, absolute.
    pub trace: Option<PathBuf>,
    /// `--reserve`.
    pub reserves: Option<String>,
    /// Where the library names its stop request signal.
    pub stop_file: Option<PathBuf>,
    /// Where the library publishes its progress.
    pub progress_file: Option<PathBuf>,
    /// What starts the capture.
    pub trigger: TriggerSetting,
    /// The trigger signal (it also stops captures of the other kinds).
    pub signal: i32,
    /// The thread of `attach` that traces the process.
    pub attacher: Option<u32>,
}

/// A value as one line of `attach`'s settings text: a backslash, a line
/// feed and a carriage return are written `\\`, `\n` and `\r`, so a
/// value may hold any of them (a `python3 -c` script in the program's
/// arguments). [`line_value`] reads it back.
pub fn to_line(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// A value written by [`to_line`], as it was (a backslash before anything
/// else is kept as it is).
pub fn line_value(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

impl Settings {
    /// The settings as `NAME=VALUE` pairs: every one that is set, in a
    /// fixed order. Paths are kept as the OS gives them (a path that is
    /// not UTF-8 goes into the environment unchanged; `attach`, which
    /// sends text, refuses it by name).
    pub fn pairs(&self) -> Vec<(&'static str, OsString)> {
        use names::*;
        let flag = |on: bool| OsString::from(if on { "1" } else { "0" });
        let path = |p: &PathBuf| p.as_os_str().to_owned();
        let mut v: Vec<(&'static str, OsString)> = vec![(RECORD, "1".into()), (QUIET, "1".into())];
        match &self.cache {
            CacheSetting::File(p) => v.push((CACHE_FILE, path(p))),
            CacheSetting::Inline { name, json } => {
                v.push((CACHE_JSON, json.into()));
                v.push((CACHE_NAME, name.into()));
            }
        }
        v.extend([
            (OUTPUT, path(&self.output)),
            (DUMPS, path(&self.manifest)),
            (THREADS, (&self.threads).into()),
            (ARGV, self.argv.join("\x1f").into()),
            (MODE, (&self.mode).into()),
            (SCHEDULE, (&self.schedule).into()),
            (LINE_USE, flag(self.line_use)),
            (OBJECTS, flag(self.objects)),
            (TIMELINE, flag(self.timeline)),
            (RSEQ_COMMIT, (&self.rseq_commit).into()),
        ]);
        if let Some(c) = &self.client_requests {
            v.push((CLIENT_REQUESTS, c.into()));
        }
        if !self.cores.is_empty() {
            v.push((CORES, self.cores.join(",").into()));
        }
        if let Some(a) = &self.allocators {
            v.push((ALLOCATORS, a.into()));
        }
        if let Some(n) = self.max_instructions {
            v.push((MAX_INSTRUCTIONS, n.to_string().into()));
        }
        if let Some(t) = &self.trace {
            v.push((TRACE, path(t)));
        }
        if let Some(r) = &self.reserves {
            v.push((RESERVES, r.into()));
        }
        if let Some(p) = &self.stop_file {
            v.push((STOP_FILE, path(p)));
        }
        if let Some(p) = &self.progress_file {
            v.push((PROGRESS_FILE, path(p)));
        }
        let trigger = match &self.trigger {
            TriggerSetting::Api => "api",
            TriggerSetting::Function {
                name,
                at,
                dlopen,
                first,
                count,
                warm,
            } => {
                if let Some((module, address)) = at {
                    v.push((FUNCTION_MODULE, path(module)));
                    v.push((FUNCTION_ADDRESS, format!("{address:x}").into()));
                }
                if let Some(w) = warm {
                    v.push((WARM_CALLS, w.into()));
                }
                if *dlopen {
                    v.push((FUNCTION_DLOPEN, "1".into()));
                }
                v.push((FUNCTION, name.into()));
                v.push((FIRST_CALL, first.to_string().into()));
                v.push((CALLS, count.to_string().into()));
                "function"
            }
            TriggerSetting::Signal => "signal",
        };
        v.push((TRIGGER, trigger.into()));
        v.push((SIGNAL, self.signal.to_string().into()));
        if let Some(a) = self.attacher {
            v.push((ATTACHER, a.to_string().into()));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_with_line_breaks_and_backslashes_travels_as_one_line() {
        for v in [
            "",
            "plain",
            "import json\nprint(1)\r\n",
            "a\\nb (a backslash, then n)",
            "\\",
            "trailing\\",
        ] {
            let line = super::to_line(v);
            assert!(!line.contains('\n') && !line.contains('\r'), "{line:?}");
            assert_eq!(super::line_value(&line), v);
        }
    }
}
