//! The check every command that writes a capture's file makes before the
//! program runs (`record`, `attach`, `sim -o`, `zones record`): the whole
//! run is lost if the file cannot be written at its end.

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// Refuses an output path the capture could not be written to, naming
/// the path and the reason: a link planted by another user in a sticky
/// directory, a directory, a link to nothing, a missing
/// parent directory, a parent that is not a directory or where no file can
/// be created (permissions, a read-only file system). A device or FIFO is
/// written through and accepted. The check creates (and removes) a
/// temporary file next to the target, as the atomic write at the end does.
pub fn check_output(path: &Path) -> Result<()> {
    // A link another user planted in a sticky directory is not followed
    // (`coldcache_fsio::check_link`): refused before the program runs.
    coldcache_fsio::check_link(path)?;
    let meta = std::fs::metadata(path);
    if let Ok(m) = &meta {
        if m.is_dir() {
            bail!("{} is a directory, not a file to write", path.display());
        }
        if !m.is_file() {
            return Ok(()); // a device or FIFO: written in place
        }
    } else if std::fs::symlink_metadata(path).is_ok() {
        bail!(
            "{} is a symbolic link to nothing ({})",
            path.display(),
            std::fs::read_link(path).unwrap_or_default().display()
        );
    }
    // The file that will be replaced: a link's target.
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = match real.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "cannot write {}: the directory {} does not exist",
                path.display(),
                dir.display()
            )
        }
        Err(e) => bail!("cannot write {}: {}: {e}", path.display(), dir.display()),
        Ok(m) if !m.is_dir() => bail!(
            "cannot write {}: {} is not a directory",
            path.display(),
            dir.display()
        ),
        Ok(_) => {}
    }
    tempfile::Builder::new()
        .prefix(".coldcache-check")
        .tempfile_in(&dir)
        .map(drop)
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot write {}: no file can be created in {}: {}",
                path.display(),
                dir.display(),
                e.raw_os_error().map_or_else(
                    || std::io::Error::from(e.kind()),
                    std::io::Error::from_raw_os_error
                )
            )
        })
}
