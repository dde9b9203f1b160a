//! Writing what a capture produced: the dump (with the modules mapped at
//! the end added to those mapped at the start) and, when asked, the trace of
//! every access, each atomically.
//!
//! The trace is streamed: [`TraceFile`] is opened before the capture starts
//! (as `TARGET.partial` beside the target, the header written), the
//! accountant writes each chunk as it fills (`write(2)`/`pwrite(2)` only,
//! async-signal-safe, no allocation), and the end of the capture appends
//! the dump's skeleton, the index naming its offset and the end marker,
//! then renames the file into place (`coldcache_fsio::move_file`). A
//! killed capture leaves the `.partial`, readable up to its last whole
//! chunk. A write that fails (disk full, quota, the file size limit) is
//! undone (`ftruncate` to the last whole chunk) and stops the capture with
//! the reason; the file size limit is checked before writing, so the
//! program never gets `SIGXFSZ` because of us, with room kept below it for
//! the skeleton. The trace is always uncompressed here: the library links
//! no compressor, and `record`/`attach` compress a trace named `.zst`
//! once the program has written it.
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

use crate::account::{Finished, TraceSink};
use crate::options::{CaptureError, Summary};
use crate::procfs;
pub(crate) use crate::state::output::QUIET;
use crate::state::output::{LAST_ERROR, MANIFEST, WRITTEN};
use coldcache_dump::EncodedRecords;
use coldcache_fsio::fdguard::GuardedFile;
use std::ffi::{c_char, CString};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Says `e` (unless quiet) and keeps it as the C API's last error.
pub(crate) fn set_error(e: impl std::fmt::Display) {
    let msg = format!("coldcache: {e}");
    if !quiet() {
        coldcache_fsio::say!("{msg}");
    }
    if let Ok(mut g) = LAST_ERROR.lock() {
        *g = CString::new(msg).ok();
    }
}

/// The C API's last error, or NULL (valid until the next failure).
pub(crate) fn last_error() -> *const c_char {
    LAST_ERROR
        .lock()
        .ok()
        .and_then(|g| g.as_ref().map(|c| c.as_ptr()))
        .unwrap_or(std::ptr::null())
}

/// Whether the library keeps quiet (`COLDCACHE_QUIET` in the environment,
/// or set by `coldcache attach`).
pub(crate) fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
        || coldcache_fsio::env::is_set("COLDCACHE_QUIET")
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
    if let Some(t) = finished.trace.take() {
        if let Some(why) = t.failed() {
            finished.dump.meta.notes.push(format!(
                "the trace stopped taking records ({why}): it holds the accesses up to its last \
                 whole chunk, {} records, a little less than this dump counts",
                t.records()
            ));
        }
        // The dump without its records rides in the trace, so that
        // `coldcache sim --output` can build a whole dump from it.
        let records = std::mem::take(&mut finished.dump.records);
        let skeleton = finished.dump.to_bytes();
        finished.dump.records = records;
        match t.complete(&skeleton) {
            Ok(Some(path)) => written(&path, "trace"),
            Ok(None) => {}
            Err(e) => {
                let kept = e
                    .kept
                    .as_ref()
                    .map_or_else(|| "nowhere".to_string(), |p| p.display().to_string());
                let note = format!(
                    "the trace could not be completed ({}): kept as {kept}, whole up to offset {}",
                    e.reason, e.offset
                );
                if !quiet() {
                    coldcache_fsio::say!("coldcache: {note}");
                }
                report(&serde_json::json!({
                    "partial_trace": e.kept,
                    "offset": e.offset,
                    "error": e.reason,
                }));
                finished.dump.meta.notes.push(note);
            }
        }
    }
    let _ = trace_path;
    let dump = &finished.dump;
    // Written from its parts: the records' payload is not copied.
    let encoded = match &finished.encoded {
        Some(records) => dump.to_parts_with_records(records),
        None => dump.to_parts(),
    };
    let bytes = encoded.parts();
    let records = finished
        .encoded
        .as_ref()
        .map_or(dump.records.len(), EncodedRecords::len);
    let (asked, prior) = claim(&output, "dump");
    // A regular file is placed without replacing one another capture put
    // there since the claim (two `record`s in one directory): this one
    // then goes beside it, numbered. Devices and FIFOs are written in
    // place, links followed.
    let placed = coldcache_fsio::write_claimed(&asked, &bytes, prior);
    let output = placed.as_ref().unwrap_or(&asked).clone();
    if let Err(source) = placed {
        // The capture is not lost: kept where a file can be written.
        let source = match write_fallback(&bytes) {
            Ok(kept) => {
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
                    "error": format!("{source}; and in the temporary directory: {e}"),
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
        records,
        threads: dump.threads.len(),
        cut_short: dump.meta.cut_short.clone(),
    })
}

/// The path to write `asked` to: absolute; numbered (`NAME.2.EXT`, …) when
/// this process already wrote `asked`; an earlier regular file there (not
/// ours) kept as `PATH.old` and reported as `kind`. A device or FIFO is
/// written through, as asked.
///
/// Also gives the regular file seen there (its identity), if any: what the
/// write may replace (`coldcache_fsio::write_claimed`).
fn claim(asked: &Path, kind: &str) -> (PathBuf, Option<coldcache_fsio::FileId>) {
    let abs = std::path::absolute(asked).unwrap_or_else(|_| asked.to_path_buf());
    let is_regular_or_new = std::fs::metadata(&abs).map_or(true, |m| m.is_file());
    if !is_regular_or_new {
        return (abs, None);
    }
    let path = {
        let done = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
        if done.contains(&abs) {
            (2u32..)
                .map(|n| coldcache_fsio::numbered(&abs, n))
                .find(|p| !done.contains(p))
                .unwrap_or(abs)
        } else {
            abs
        }
    };
    if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
        if let Some(old) = keep_old(&path) {
            if !quiet() {
                coldcache_fsio::say!(
                    "coldcache: the earlier {} is kept as {}",
                    path.display(),
                    old.display()
                );
            }
            report(&serde_json::json!({ "kept": old, "was": path, "kind": kind }));
        }
    }
    let seen = coldcache_fsio::file_id(&path);
    (path, seen)
}

/// Keeps the regular file at `path` (a link's target) as `TARGET.old`,
/// replacing an earlier `.old`: a second name for the same file (a hard
/// link), so the dump stays at `path` until the new one replaces it
/// atomically; a copy where hard links are not possible.
fn keep_old(path: &Path) -> Option<PathBuf> {
    // A link another user planted is not followed (the write refuses it
    // too, naming it).
    coldcache_fsio::check_link(path).ok()?;
    let real = std::fs::canonicalize(path).ok()?;
    let mut old = real.clone().into_os_string();
    old.push(".old");
    let old = PathBuf::from(old);
    let _ = std::fs::remove_file(&old);
    // A copy goes to a new file (`O_EXCL|O_NOFOLLOW`): a link planted at
    // the `.old` name since the removal is not written through.
    let copy = || -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&old)?;
        std::io::copy(&mut std::fs::File::open(&real)?, &mut to).map(drop)
    };
    if std::fs::hard_link(&real, &old).is_ok() || copy().is_ok() {
        Some(old)
    } else {
        None
    }
}

/// Keeps a dump that could not be written where asked in the temporary
/// directory, as a new file `coldcache.PID.RANDOM.ccdump` (64 random bits,
/// created `O_EXCL|O_NOFOLLOW`: in a shared `/tmp` another user cannot
/// have a link waiting at the name); returns where.
fn write_fallback(parts: &[&[u8]]) -> std::io::Result<PathBuf> {
    let prefix = format!("coldcache.{}", std::process::id());
    let (path, mut f) = coldcache_fsio::create_unique(&std::env::temp_dir(), &prefix, ".ccdump")?;
    match coldcache_fsio::write_parts(&mut f, parts).and_then(|()| f.sync_all()) {
        Ok(()) => Ok(path),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(std::io::Error::new(
                e.kind(),
                format!("writing {}: {e}", path.display()),
            ))
        }
    }
}

/// Notes `path` as written by this process and reports it as `kind`.
fn written(path: &Path, kind: &str) {
    WRITTEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path.to_path_buf());
    // The file's identity: a reader of the manifest can tell whether a
    // later capture has since moved it to `.old` (two `record`s at once).
    match coldcache_fsio::file_id(path) {
        Some((dev, ino)) => report(&serde_json::json!({ kind: path, "id": [dev, ino] })),
        None => report(&serde_json::json!({ kind: path })),
    }
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
    let file = coldcache_fsio::check_link(&manifest).and_then(|()| {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&manifest)
    });
    if let Err(e) = file.and_then(|mut f| f.write_all(line.as_bytes())) {
        coldcache_fsio::say!(
            "coldcache: cannot report {} to {}: {e}",
            entry,
            manifest.display()
        );
    }
}

/// Room kept below the file size limit for the end of a trace (its
/// skeleton, index and end marker), which chunks may not use.
const TAIL_ROOM: u64 = 1 << 20;

/// A capture's trace file while the capture runs; see the module doc.
pub struct TraceFile {
    /// Opened again by `partial`'s path if the program closes its
    /// descriptor (never for a device or FIFO), and closed only while it
    /// is still ours (`coldcache_fsio::fdguard`).
    file: GuardedFile,
    /// Where the trace goes in the end.
    target: PathBuf,
    /// Where it is written meanwhile (`None`: a device or FIFO, written in
    /// place).
    partial: Option<PathBuf>,
    offset: u64,
    ending: bool,
    completed: bool,
}

impl TraceFile {
    /// Opens the trace for `asked` (numbered or keeping an earlier file as
    /// `.old` as dumps are, see [`write`]) and writes its header. Normal
    /// context, before the capture starts.
    pub fn create(asked: &Path) -> Result<TraceFile, CaptureError> {
        // Refused now rather than when the capture ends.
        coldcache_fsio::check_link(asked).map_err(|source| CaptureError::TraceOpen {
            path: asked.to_path_buf(),
            source,
        })?;
        let target = claim(asked, "trace").0;
        let regular = std::fs::metadata(&target).map_or(true, |m| m.is_file());
        let partial = regular.then(|| {
            let mut p = target.clone().into_os_string();
            p.push(".partial");
            PathBuf::from(p)
        });
        let path = partial.clone().unwrap_or_else(|| target.clone());
        let file = GuardedFile::open(&path, regular).map_err(|source| CaptureError::TraceOpen {
            path: path.clone(),
            source,
        })?;
        let mut t = TraceFile {
            file,
            target,
            partial,
            offset: 0,
            ending: false,
            completed: false,
        };
        t.write(&coldcache_cctrace::stream::stream_header())
            .map_err(|why| CaptureError::TraceOpen {
                path,
                source: std::io::Error::other(why),
            })?;
        Ok(t)
    }

    /// `bytes` written at `at` (a regular file) or at the end (a device or
    /// FIFO): `Err(errno)` on failure. Short writes go on, `EINTR` retries.
    fn write_at(&mut self, bytes: &[u8], at: u64) -> Result<(), i32> {
        let mut fd = self.file.fd()?;
        // A FIFO whose reader has gone gives EPIPE (the capture stops with
        // that reason), never a SIGPIPE in the program.
        let _held = self.partial.is_none().then(coldcache_fsio::NoSigpipe::hold);
        let mut done = 0usize;
        // The program may close our descriptor between the check and a
        // write: opened again once, and the write goes on.
        let mut reopened = false;
        while done < bytes.len() {
            let rest = &bytes[done..];
            // SAFETY: `rest` is a live slice of `rest.len()` bytes and `fd`
            // an open descriptor we own; neither call keeps the pointer.
            let n = unsafe {
                if self.partial.is_some() {
                    libc::pwrite(
                        fd,
                        rest.as_ptr().cast(),
                        rest.len(),
                        (at + done as u64) as libc::off_t,
                    )
                } else {
                    libc::write(fd, rest.as_ptr().cast(), rest.len())
                }
            };
            if n > 0 {
                done += n as usize;
                continue;
            }
            let errno = if n == 0 {
                libc::ENOSPC
            } else {
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO)
            };
            if errno == libc::EBADF && !reopened {
                reopened = true;
                fd = self.file.fd()?;
                continue;
            }
            if errno != libc::EINTR {
                return Err(errno);
            }
        }
        Ok(())
    }
}

/// The file size limit (`ulimit -f`), if there is one. A system call, no
/// allocation.
fn file_size_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit the call fills.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

impl TraceSink for TraceFile {
    fn write(&mut self, bytes: &[u8]) -> Result<(), &'static str> {
        // The write may run in a signal handler that interrupted the
        // program anywhere: its `errno` is left as it was.
        // SAFETY: `__errno_location` is this thread's errno, always valid.
        let errno = unsafe { libc::__errno_location() };
        // SAFETY: as above.
        let saved = unsafe { *errno };
        let r = self.write_chunk(bytes);
        // SAFETY: as above.
        unsafe { *errno = saved };
        r
    }

    fn offset(&self) -> u64 {
        self.offset
    }

    fn ending(&mut self) {
        self.ending = true;
    }

    fn complete(mut self: Box<Self>) -> std::io::Result<Option<PathBuf>> {
        self.completed = true;
        let Some(partial) = self.partial.clone() else {
            return Ok(Some(self.target.clone()));
        };
        let fd = self
            .file
            .fd()
            .map_err(|_| std::io::Error::other("the program closed the trace's descriptor"))?;
        // SAFETY: a plain system call on our descriptor.
        if unsafe { libc::fsync(fd) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        coldcache_fsio::move_file(&partial, &self.target)?;
        Ok(Some(self.target.clone()))
    }

    fn partial_path(&self) -> Option<PathBuf> {
        self.partial.clone()
    }
}

/// Why a trace write failed, as the capture's `cut_short` then says.
const TRACE_SIZE_LIMIT: &str = "the trace reached the file size limit (ulimit -f)";
const TRACE_NO_SPACE: &str = "the trace's file system is full (ENOSPC)";
const TRACE_QUOTA: &str = "the trace's disk quota is exceeded (EDQUOT)";
const TRACE_TOO_BIG: &str = "the trace reached the largest file size (EFBIG)";
const TRACE_READER_LEFT: &str = "the trace's reader went away (EPIPE)";
const TRACE_CLOSED: &str =
    "the program closed the trace's descriptor, and the trace could not be opened again";
const TRACE_IO: &str = "the trace could not be written (an I/O error)";

/// Whether a capture cut short for `reason` lost the trace the user asked
/// for: a full disk, a quota, a size limit, an I/O error, its descriptor
/// gone. `record` and `attach` then fail (the dump holds the instructions
/// before the cut, the trace what was written). Not when the trace's
/// reader went away (a FIFO's reader closing, as `| head` does): that is
/// the reader's choice.
pub fn trace_write_failed(reason: &str) -> bool {
    [
        TRACE_SIZE_LIMIT,
        TRACE_NO_SPACE,
        TRACE_QUOTA,
        TRACE_TOO_BIG,
        TRACE_CLOSED,
        TRACE_IO,
    ]
    .contains(&reason)
}

impl TraceFile {
    /// [`TraceSink::write`] without the `errno` care.
    fn write_chunk(&mut self, bytes: &[u8]) -> Result<(), &'static str> {
        if self.partial.is_some() {
            if let Some(limit) = file_size_limit() {
                let room = if self.ending { 0 } else { TAIL_ROOM };
                if self.offset + bytes.len() as u64 + room > limit {
                    return Err(TRACE_SIZE_LIMIT);
                }
            }
        }
        match self.write_at(bytes, self.offset) {
            Ok(()) => {
                self.offset += bytes.len() as u64;
                Ok(())
            }
            Err(errno) => {
                if self.partial.is_some() && self.file.is_ours() {
                    // What was written of this chunk is undone, so the file
                    // ends on a whole chunk. SAFETY: a plain system call on
                    // our descriptor.
                    unsafe { libc::ftruncate(self.file.last_fd(), self.offset as libc::off_t) };
                }
                Err(match errno {
                    libc::ENOSPC => TRACE_NO_SPACE,
                    libc::EDQUOT => TRACE_QUOTA,
                    libc::EFBIG => TRACE_TOO_BIG,
                    libc::EPIPE => TRACE_READER_LEFT,
                    libc::EBADF => TRACE_CLOSED,
                    _ => TRACE_IO,
                })
            }
        }
    }
}

impl Drop for TraceFile {
    /// A trace that holds no chunk and was not completed (the capture did
    /// not start) is removed; one that holds chunks stays as `.partial`.
    fn drop(&mut self) {
        let header = coldcache_cctrace::stream::stream_header().len() as u64;
        if !self.completed && self.offset <= header {
            if let Some(p) = &self.partial {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldcache_fsio::{numbered, write_atomically};

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
        let first = claim(&link, "dump").0;
        assert_eq!(first, link);
        assert_eq!(
            std::fs::read(dir.join("x.ccdump.old")).unwrap(),
            b"earlier run"
        );
        write_atomically(&first, b"one").unwrap();
        written(&first, "dump");
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        let second = claim(&link, "dump").0;
        assert_eq!(second, dir.join("link.2.ccdump"));
        assert_eq!(
            std::fs::read(dir.join("x.ccdump.old")).unwrap(),
            b"earlier run"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
