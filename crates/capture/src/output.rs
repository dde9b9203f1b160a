//! Writing what a capture produced: the dump (with the modules mapped at
//! the end added to those mapped at the start) and, when asked, the trace of
//! every access (cctrace version 2 with the dump's skeleton attached, so
//! `coldcache sim -o` can rebuild a dump from it; always uncompressed here:
//! the library links no compressor, and `record`/`attach` compress a
//! trace named `.zst` once the program has written it), each atomically.
//!
//! A dump is never replaced silently (perf's habit): a file already at the
//! path that this process did not write is kept as `PATH.old` first, and a
//! second capture of the same process aimed at a path it already wrote
//! (several `--signal` windows, repeated C API captures) goes to
//! `NAME.2.EXT`, `NAME.3.EXT`, … beside it. A dump that cannot be written
//! where asked is written to the temporary directory instead, and the
//! error says where. Every file written is appended as one JSON line to
//! the manifest named by `COLDCACHE_DUMPS` (`coldcache record` reads it to
//! find, resolve and list every dump of the run; see `docs/capture.md`).

use crate::account::Finished;
use crate::options::{CaptureError, Summary};
use crate::procfs;
use coldcache_cctrace::Record as TraceRecord;
use coldcache_fsio::write_atomically;
use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The paths this process wrote (dumps and traces), absolute. A set: a
/// process that captures a thousand times looks a thousand numbered names
/// up for its next dump (a list made that cubic: 1,000 start/stop cycles
/// took 34 s instead of 14).
static WRITTEN: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// The manifest file `coldcache record` asked for (`COLDCACHE_DUMPS`).
/// Replaced by each `coldcache attach` (a process may be attached to many
/// times, each with a manifest of its own).
static MANIFEST: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Set by `coldcache attach` (the `COLDCACHE_QUIET` setting): the process
/// it attached to prints nothing of ours on its standard error.
pub(crate) static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the library keeps quiet (`COLDCACHE_QUIET` in the environment,
/// or set by `coldcache attach`).
pub(crate) fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
        || std::env::var_os("COLDCACHE_QUIET").is_some()
}

/// Sets the manifest every written file is reported to (from the
/// environment `coldcache record` sets, or `coldcache attach`'s settings).
pub(crate) fn set_manifest(path: PathBuf) {
    *MANIFEST.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
}

/// A new `coldcache attach`: a new run, whose first dump goes to the path
/// it asks for (an earlier file there kept as `PATH.old`), not to a
/// numbered name because an earlier attach wrote that path.
pub(crate) fn new_run() {
    WRITTEN.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Writes the trace (if one was kept) and the dump of a finished capture.
pub fn write(
    mut finished: Finished,
    output: PathBuf,
    trace_path: Option<&Path>,
) -> Result<Summary, CaptureError> {
    // Modules mapped since the start are added; those unmapped are kept.
    for m in procfs::modules() {
        if !finished
            .dump
            .modules
            .iter()
            .any(|x| x.start == m.start && x.path == m.path)
        {
            finished.dump.modules.push(m);
        }
    }
    if let (Some(path), Some(t)) = (trace_path, &finished.trace) {
        // The dump without its records rides in the trace, so that
        // `coldcache sim --output` can build a whole dump from it.
        let records = std::mem::take(&mut finished.dump.records);
        let skeleton = finished.dump.to_bytes();
        finished.dump.records = records;
        let path = claim(path, "trace");
        write_trace(&path, &t.records, &t.threads, &skeleton).map_err(|source| {
            CaptureError::Write {
                path: path.clone(),
                source,
            }
        })?;
        written(&path, "trace");
    }
    let dump = &finished.dump;
    let bytes = dump.to_bytes();
    let output = claim(&output, "dump");
    if let Err(source) = write_atomically(&output, &bytes) {
        // The capture is not lost: kept where a file can be written.
        let kept = fallback_path();
        let source = match write_atomically(&kept, &bytes) {
            Ok(()) => {
                report(&serde_json::json!({
                    "dump": kept,
                    "failed": output,
                    "error": source.to_string(),
                }));
                WRITTEN
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(kept.clone());
                std::io::Error::new(
                    source.kind(),
                    format!("{source}; the capture was kept in {}", kept.display()),
                )
            }
            Err(e) => {
                report(&serde_json::json!({
                    "lost": output,
                    "error": format!("{source}; and in {}: {e}", kept.display()),
                }));
                source
            }
        };
        return Err(CaptureError::Write {
            path: output,
            source,
        });
    }
    written(&output, "dump");
    Ok(Summary {
        path: output,
        instructions: dump.meta.instructions,
        unmodelled: finished.unmodelled,
        records: dump.records.len(),
        threads: dump.threads.len(),
        cut_short: dump.meta.cut_short.clone(),
    })
}

/// The path to write `asked` to: absolute; numbered (`NAME.2.EXT`, …) when
/// this process already wrote `asked`; an earlier regular file there (not
/// ours) kept as `PATH.old` and reported as `kind`. A device or FIFO is
/// written through, as asked.
fn claim(asked: &Path, kind: &str) -> PathBuf {
    let abs = std::path::absolute(asked).unwrap_or_else(|_| asked.to_path_buf());
    let is_regular_or_new = std::fs::metadata(&abs).map_or(true, |m| m.is_file());
    if !is_regular_or_new {
        return abs;
    }
    let path = {
        let done = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
        if done.contains(&abs) {
            (2u32..)
                .map(|n| numbered(&abs, n))
                .find(|p| !done.contains(p))
                .unwrap_or(abs)
        } else {
            abs
        }
    };
    if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
        if let Some(old) = keep_old(&path) {
            if !quiet() {
                eprintln!(
                    "coldcache: the earlier {} is kept as {}",
                    path.display(),
                    old.display()
                );
            }
            report(&serde_json::json!({ "kept": old, "was": path, "kind": kind }));
        }
    }
    path
}

/// `NAME.N.EXT` (or `NAME.N` without an extension) beside `path`.
fn numbered(path: &Path, n: u32) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    path.with_file_name(name)
}

/// Keeps the regular file at `path` (a link's target) as `TARGET.old`,
/// replacing an earlier `.old`: a second name for the same file (a hard
/// link), so the dump stays at `path` until the new one replaces it
/// atomically; a copy where hard links are not possible.
fn keep_old(path: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(path).ok()?;
    let mut old = real.clone().into_os_string();
    old.push(".old");
    let old = PathBuf::from(old);
    let _ = std::fs::remove_file(&old);
    if std::fs::hard_link(&real, &old).is_ok() || std::fs::copy(&real, &old).is_ok() {
        Some(old)
    } else {
        None
    }
}

/// Where a dump that could not be written where asked is kept:
/// `coldcache.PID.ccdump` (numbered as needed) in the temporary directory.
fn fallback_path() -> PathBuf {
    let first = std::env::temp_dir().join(format!("coldcache.{}.ccdump", std::process::id()));
    let done = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    std::iter::once(first.clone())
        .chain((2u32..).map(|n| numbered(&first, n)))
        .find(|p| !done.contains(p) && !p.exists())
        .unwrap_or(first)
}

/// Notes `path` as written by this process and reports it as `kind`.
fn written(path: &Path, kind: &str) {
    WRITTEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path.to_path_buf());
    report(&serde_json::json!({ kind: path }));
}

/// Appends one JSON line to the manifest, if there is one: a single
/// `write(2)` of an `O_APPEND` file, so lines of concurrent writers do not
/// interleave.
fn report(entry: &serde_json::Value) {
    let Some(manifest) = MANIFEST.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return;
    };
    let mut line = entry.to_string();
    line.push('\n');
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&manifest);
    if let Err(e) = file.and_then(|mut f| f.write_all(line.as_bytes())) {
        eprintln!(
            "coldcache: cannot report {} to {}: {e}",
            entry,
            manifest.display()
        );
    }
}

fn write_trace(
    path: &Path,
    records: &[TraceRecord],
    slots: &[(u32, u32)],
    skeleton: &[u8],
) -> std::io::Result<()> {
    let mut w = coldcache_cctrace::TraceWriter::new(Vec::new()).map_err(std::io::Error::other)?;
    for &(slot, tid) in slots {
        w.define_thread(slot, u64::from(tid))
            .map_err(std::io::Error::other)?;
    }
    // The skeleton first: a re-simulation knows the threads' cores before
    // their first records.
    w.attach(coldcache_cctrace::ATTACH_DUMP_SKELETON, skeleton)
        .map_err(std::io::Error::other)?;
    w.write_all(records).map_err(std::io::Error::other)?;
    let bytes = w.finish().map_err(std::io::Error::other)?;
    write_atomically(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names_keep_the_extension() {
        assert_eq!(
            numbered(Path::new("/d/coldcache.ccdump"), 2),
            Path::new("/d/coldcache.2.ccdump")
        );
        assert_eq!(numbered(Path::new("/d/out"), 3), Path::new("/d/out.3"));
        assert_eq!(
            numbered(Path::new("/d/a.b.ccdump"), 2),
            Path::new("/d/a.b.2.ccdump")
        );
    }

    /// A second write of the same path in one process goes beside it; a
    /// file this process did not write is kept as `.old`, through a link.
    #[test]
    fn dumps_are_never_replaced_silently() {
        let dir = std::env::temp_dir().join(format!("coldcache-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.ccdump");
        std::fs::write(&p, b"earlier run").unwrap();
        let link = dir.join("link.ccdump");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let first = claim(&link, "dump");
        assert_eq!(first, link);
        assert_eq!(
            std::fs::read(dir.join("x.ccdump.old")).unwrap(),
            b"earlier run"
        );
        write_atomically(&first, b"one").unwrap();
        written(&first, "dump");
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        let second = claim(&link, "dump");
        assert_eq!(second, dir.join("link.2.ccdump"));
        assert_eq!(
            std::fs::read(dir.join("x.ccdump.old")).unwrap(),
            b"earlier run"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
