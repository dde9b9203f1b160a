//! Writing a file whole or not at all.
//!
//! [`write_atomically`] writes a temporary file next to the target
//! (`.NAME.RANDOM.tmp`, 64 random bits, created `O_EXCL|O_NOFOLLOW` so
//! nothing already there is followed or overwritten and nobody can plant
//! a link at the name in advance), fsyncs it, renames it over the target and
//! fsyncs the directory; on every error path (and if the filling closure
//! panics) the temporary file is removed, so a full disk or a file size
//! limit leaves the old target and nothing else. The error names the step
//! and the file, with the operating system's message.
//!
//! Temp-and-rename is for regular files only. An existing target that is
//! a character or block device or a FIFO (`/dev/null`, `/dev/stdout`, a
//! pipe) is written in place: renaming over `/dev/null` would turn it into
//! a regular file for every process on the machine. A symbolic link is
//! followed to its target, which is replaced (the link stays a link); a
//! link to nothing, a directory or a socket is refused. A regular target's
//! permission bits are kept.
//!
//! A link planted by another user is never followed ([`check_link`], the
//! kernel's `fs.protected_symlinks` rule, applied whatever the sysctl
//! says, since following by `canonicalize` and renaming over the result
//! bypasses the kernel's own check): a symbolic link in a sticky,
//! world-writable directory (`/tmp`) whose owner is neither the caller's
//! effective user nor the directory's owner is refused, with the path and
//! the reason. coldcache is often run as root; such a link would make it
//! overwrite a file elsewhere.
//!
//! A write in place holds `SIGPIPE` back ([`crate::NoSigpipe`]): a FIFO
//! whose reader has gone gives `EPIPE`, an error like any other, and no
//! signal. A target written in place is opened without blocking
//! ([`open_in_place`]): a FIFO nobody reads is waited for
//! [`READER_WAIT`] at most, then refused with `ENXIO` naming it (opening
//! it blocked, and the program the library runs in hung at its exit).
//!
//! [`write_output`] adds the command-line convention that `-` is standard
//! output.

use crate::read::describe;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Writes `bytes` to `path` whole or not at all (see the module doc).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_with(path, |f| f.write_all(bytes))
}

/// Writes `path` through `fill` whole or not at all (see the module doc):
/// for writers that stream (no copy of the whole file in memory). For a
/// target written in place, `fill` writes to it directly.
pub fn write_atomically_with(
    path: &Path,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    match target(path)? {
        Target::InPlace(p) => {
            // A FIFO whose reader has gone fails the write with EPIPE;
            // the signal must not reach the program the library runs in.
            let _held = crate::NoSigpipe::hold();
            let mut f = open_in_place(&p)?;
            fill(&mut f)?;
            f.flush()
        }
        Target::Replace { path, mode } => replace(&path, mode, fill),
    }
}

/// Moves the finished file `from` to `to` as [`write_atomically`] would
/// write it: a rename when `to` is a regular file (or new) on the same
/// file system, otherwise a copy through [`write_atomically_with`] and
/// the removal of `from`. `from` is removed on success only.
pub fn move_file(from: &Path, to: &Path) -> io::Result<()> {
    if let Target::Replace { path, mode } = target(to)? {
        if let Some(m) = mode {
            let _ = std::fs::set_permissions(from, std::fs::Permissions::from_mode(m));
        }
        if std::fs::rename(from, &path).is_ok() {
            return Ok(());
        }
    }
    let mut src = File::open(from).map_err(|e| step(e, "opening", from))?;
    write_atomically_with(to, |f| io::copy(&mut src, f).map(drop))?;
    std::fs::remove_file(from).map_err(|e| step(e, "removing", from))
}

/// [`write_atomically`], except that `-` is standard output.
pub fn write_output(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_output_parts(path, &[bytes])
}

/// [`write_output`] of the file that `parts` make in order (a large part
/// is written where it lies, not copied into one buffer first).
pub fn write_output_parts(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    if path.as_os_str() == "-" {
        let mut out = io::stdout().lock();
        write_parts(&mut out, parts)?;
        return out.flush();
    }
    write_atomically_with(path, |f| write_parts(f, parts))
}

/// Writes `parts` to `w` in order.
pub fn write_parts(w: &mut impl Write, parts: &[&[u8]]) -> io::Result<()> {
    parts.iter().try_for_each(|p| w.write_all(p))
}

/// How long opening a FIFO waits for a process to open it for reading.
pub const READER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Opens the device or FIFO `path` for writing without ever blocking in
/// `open`: `O_NONBLOCK`, which fails with `ENXIO` at once on a FIFO that
/// nobody has open for reading; tried again every 10 ms for
/// [`READER_WAIT`] (a reader started at the same moment), then refused,
/// naming the file. The descriptor is made blocking again once open
/// (writes wait for a slow reader as usual). Normal context.
pub fn open_in_place(path: &Path) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    let start = std::time::Instant::now();
    let f = loop {
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if start.elapsed() >= READER_WAIT {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "opening {}: no process opened the FIFO for reading within {} s \
                             ({e})",
                            path.display(),
                            READER_WAIT.as_secs()
                        ),
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(step(e, "opening", path)),
        }
    };
    let fd = f.as_raw_fd();
    // SAFETY: `fd` is the open descriptor `f` owns; F_GETFL/F_SETFL take
    // and give plain flags.
    let ok = unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK) == 0
    };
    if !ok {
        return Err(step(io::Error::last_os_error(), "opening", path));
    }
    Ok(f)
}

enum Target {
    /// A device or FIFO: written through, never replaced.
    InPlace(PathBuf),
    /// A regular file (existing with `mode`, or new): replaced by rename.
    Replace { path: PathBuf, mode: Option<u32> },
}

fn invalid(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {what}", path.display()),
    )
}

/// An OS error with the step and the file it happened to.
fn step(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// What writing `path` means: see the module doc.
fn target(path: &Path) -> io::Result<Target> {
    if path.file_name().is_none() {
        return Err(invalid(path, "not a file name"));
    }
    let lmeta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Target::Replace {
                path: path.to_path_buf(),
                mode: None,
            })
        }
        Err(e) => return Err(step(e, "examining", path)),
    };
    let (path, meta) = if lmeta.file_type().is_symlink() {
        check_link(path)?;
        let real = std::fs::canonicalize(path).map_err(|e| {
            let to = std::fs::read_link(path).unwrap_or_default();
            invalid(
                path,
                format!(
                    "a symbolic link to {}, which cannot be followed ({e})",
                    to.display()
                ),
            )
        })?;
        let meta = std::fs::metadata(&real).map_err(|e| step(e, "examining", &real))?;
        (real, meta)
    } else {
        (path.to_path_buf(), lmeta)
    };
    let t = meta.file_type();
    if t.is_file() {
        Ok(Target::Replace {
            path,
            mode: Some(meta.permissions().mode() & 0o777),
        })
    } else if t.is_char_device() || t.is_block_device() || t.is_fifo() {
        Ok(Target::InPlace(path))
    } else {
        Err(invalid(
            &path,
            format!("is {}, not a file that can be written", describe(t)),
        ))
    }
}

/// Whether following the symbolic link at `path` (if it is one) is
/// allowed by the kernel's `fs.protected_symlinks` rule: not when the link
/// is in a sticky, world-writable directory and owned by neither the
/// caller's effective user nor the directory's owner. `Ok` for anything
/// that is not a symbolic link (or does not exist); the error names the
/// path, the link's owner and the rule.
pub fn check_link(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(l) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !l.file_type().is_symlink() {
        return Ok(());
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let d = std::fs::metadata(dir).map_err(|e| step(e, "examining", dir))?;
    let sticky_shared = d.mode() & 0o1002 == 0o1002;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if sticky_shared && l.uid() != euid && l.uid() != d.uid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{}: not followed: a symbolic link owned by another user (uid {}) in the \
                 sticky, world-writable directory {} (the kernel's fs.protected_symlinks rule; \
                 remove the link or choose another name)",
                path.display(),
                l.uid(),
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// 64 random bits from the kernel (`getrandom(2)`, no allocation); the
/// clock and a counter if it is unavailable, which still leaves the
/// exclusive creation as the guard.
pub fn random_u64() -> u64 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let mut r = 0u64;
    // SAFETY: `r` is 8 writable bytes for the call's duration.
    let n = unsafe { libc::getrandom((&mut r as *mut u64).cast(), 8, libc::GRND_NONBLOCK) };
    if n != 8 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        r = t
            ^ (u64::from(std::process::id()) << 32)
            ^ u64::from(NEXT.fetch_add(1, Ordering::Relaxed));
    }
    r
}

/// Creates a new file `PREFIX.RANDOM.SUFFIX` in `dir` (`O_EXCL|O_NOFOLLOW`,
/// mode 0600, 64 random bits: a name nobody can guess in advance in a
/// shared directory); returns its path and the open file.
pub fn create_unique(dir: &Path, prefix: &str, suffix: &str) -> io::Result<(PathBuf, File)> {
    for _ in 0..64 {
        let p = dir.join(format!("{prefix}.{:016x}{suffix}", random_u64()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o600)
            .open(&p)
        {
            Ok(f) => return Ok((p, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(step(e, "creating", &p)),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "creating a new file in {}: every name tried exists",
            dir.display()
        ),
    ))
}

fn replace(
    path: &Path,
    mode: Option<u32>,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let (tmp, mut guard) = write_temp(path, mode, fill)?;
    std::fs::rename(&tmp, path)
        .map_err(|e| step(e, &format!("renaming {} to", tmp.display()), path))?;
    guard.0 = None;
    sync_dir(path);
    Ok(())
}

/// The directory `path` is in (`.` for a bare name).
fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A rename is durable once the directory is synced; a directory that
/// cannot be opened or synced leaves the file written.
fn sync_dir(path: &Path) {
    if let Ok(d) = File::open(dir_of(path)) {
        let _ = d.sync_all();
    }
}

/// The identity of a file (device, inode), as [`write_claimed`] compares
/// what is at a path with what the caller saw there.
pub type FileId = (u64, u64);

/// The identity of the regular file at `path` (a link followed), if any.
pub fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| (m.dev(), m.ino()))
}

/// Writes `parts`, in order, to the regular file `path` whole or not at all, never
/// replacing a file another writer put there since the caller looked:
/// `prior` is what the caller saw at `path` (and kept, e.g. as `.old`).
/// The finished temporary file is renamed to `path` without replacing
/// (`RENAME_NOREPLACE`); if a file is there and it is `prior`, the two are
/// exchanged (`RENAME_EXCHANGE`) and what came out is checked to be
/// `prior` before it is removed (if not, another program's file arrived
/// first: exchanged back); otherwise the next free name
/// `NAME.2.EXT`, `NAME.3.EXT`, … beside it is taken the same way. Two
/// captures finishing at once in one directory both keep their files.
/// Returns the path written (`path` itself when placed there). Devices,
/// FIFOs and symbolic links are as for [`write_atomically`]: written in
/// place, or followed (the link's target is the file claimed).
pub fn write_claimed(asked: &Path, parts: &[&[u8]], prior: Option<FileId>) -> io::Result<PathBuf> {
    let (path, mode) = match target(asked)? {
        Target::InPlace(_) => {
            write_atomically_with(asked, |f| write_parts(f, parts))?;
            return Ok(asked.to_path_buf());
        }
        Target::Replace { path, mode } => (path, mode),
    };
    let path = path.as_path();
    let (tmp, mut guard) = write_temp(path, mode, |f| write_parts(f, parts))?;
    for n in 1u32..=10_000 {
        let to = if n == 1 {
            path.to_path_buf()
        } else {
            numbered(path, n)
        };
        match rename2(&tmp, &to, libc::RENAME_NOREPLACE) {
            Ok(()) => {
                guard.0 = None;
                sync_dir(path);
                return Ok(if n == 1 { asked.to_path_buf() } else { to });
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(e) => return Err(step(e, &format!("renaming {} to", tmp.display()), &to)),
        }
        if n != 1 || prior.is_none() {
            continue;
        }
        // Writers that saw the same `prior` take turns: without the
        // lock, a third writer's exchange between another's exchange and
        // its exchange back would hand that one a file not its own.
        let Some(_turn) = lock_prior(&to, prior) else {
            continue;
        };
        if file_id(&to) == prior {
            rename2(&tmp, &to, libc::RENAME_EXCHANGE)
                .map_err(|e| step(e, &format!("exchanging {} with", tmp.display()), &to))?;
            // `tmp` now names what was at `to`.
            if file_id(&tmp) == prior {
                let _ = std::fs::remove_file(&tmp);
                guard.0 = None;
                sync_dir(path);
                return Ok(asked.to_path_buf());
            }
            // Another program had replaced `prior` (our writers take
            // turns): its file goes back.
            rename2(&tmp, &to, libc::RENAME_EXCHANGE)
                .map_err(|e| step(e, &format!("exchanging {} back with", tmp.display()), &to))?;
        }
    }
    Err(step(
        io::Error::from(io::ErrorKind::AlreadyExists),
        "finding a free name beside",
        path,
    ))
}

/// How long [`write_claimed`] waits for its turn at a claimed file
/// before it takes the next free name instead.
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The file at `to`, opened and locked (`flock`, exclusive) if it is
/// still `prior`: the turn of one writer among those that saw `prior`.
/// `None` when it is another file, or when the lock is not had within
/// [`TURN_WAIT`] (someone else holds it: never waited on for ever). The
/// lock is released when the file is closed.
fn lock_prior(to: &Path, prior: Option<FileId>) -> Option<File> {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(to)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || Some((m.dev(), m.ino())) != prior {
        return None;
    }
    let start = std::time::Instant::now();
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Some(f);
        }
        let e = io::Error::last_os_error().raw_os_error();
        if e != Some(libc::EWOULDBLOCK) && e != Some(libc::EINTR) || start.elapsed() > TURN_WAIT {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// `NAME.N.EXT` (or `NAME.N` without an extension) beside `path`.
pub fn numbered(path: &Path, n: u32) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    path.with_file_name(name)
}

/// `renameat2(2)` with `flags`, both paths relative to the working
/// directory.
fn rename2(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| invalid(p, "a NUL byte in the path"))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths that live across the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            flags,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Writes a new temporary file beside `path` through `fill` and syncs it;
/// the guard removes it unless disarmed.
fn write_temp(
    path: &Path,
    mode: Option<u32>,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<(PathBuf, TempGuard)> {
    let dir = dir_of(path);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut tries = 0;
    let (tmp, mut file) = loop {
        tries += 1;
        let tmp = dir.join(format!(".{name}.{:016x}.tmp", random_u64()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(mode.unwrap_or(0o666))
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 64 => continue,
            Err(e) => return Err(step(e, "creating temporary file", &tmp)),
        }
    };
    let guard = TempGuard(Some(tmp.clone()));
    if let Some(m) = mode {
        // The umask applied at creation: give the target's bits back.
        file.set_permissions(std::fs::Permissions::from_mode(m))
            .map_err(|e| step(e, "setting the permissions of", &tmp))?;
    }
    fill(&mut file).map_err(|e| step(e, "writing", &tmp))?;
    file.sync_all().map_err(|e| step(e, "flushing", &tmp))?;
    drop(file);
    Ok((tmp, guard))
}

/// Removes the temporary file it names when dropped (every early return
/// and a panic in the filling closure), unless its name was taken out
/// (the file renamed into place).
struct TempGuard(Option<PathBuf>);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}
