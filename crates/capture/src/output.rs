//! Writing what a capture produced: the dump (with the modules mapped at
//! the end added to those mapped at the start) and, when asked, the trace of
//! every access, each atomically.

use crate::account::Finished;
use crate::options::{CaptureError, Summary};
use crate::procfs;
use coldcache_cctrace::Record as TraceRecord;
use coldcache_fsio::write_atomically;
use std::path::{Path, PathBuf};

/// Writes the trace (if one was kept) and the dump of a finished capture.
pub fn write(
    mut finished: Finished,
    output: PathBuf,
    trace_path: Option<&Path>,
) -> Result<Summary, CaptureError> {
    if let (Some(path), Some(t)) = (trace_path, &finished.trace) {
        write_trace(path, &t.records, &t.threads).map_err(|source| CaptureError::Write {
            path: path.to_path_buf(),
            source,
        })?;
    }
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
    let dump = &finished.dump;
    let bytes = dump.to_bytes();
    write_atomically(&output, &bytes).map_err(|source| CaptureError::Write {
        path: output.clone(),
        source,
    })?;
    Ok(Summary {
        path: output,
        instructions: dump.meta.instructions,
        unmodelled: finished.unmodelled,
        records: dump.records.len(),
        threads: dump.threads.len(),
        cut_short: dump.meta.cut_short.clone(),
    })
}

fn write_trace(path: &Path, records: &[TraceRecord], slots: &[(u32, u32)]) -> std::io::Result<()> {
    let mut w = coldcache_cctrace::TraceWriter::new(Vec::new()).map_err(std::io::Error::other)?;
    for &(slot, tid) in slots {
        w.define_thread(slot, u64::from(tid))
            .map_err(std::io::Error::other)?;
    }
    w.write_all(records).map_err(std::io::Error::other)?;
    let bytes = w.finish().map_err(std::io::Error::other)?;
    write_atomically(path, &bytes)
}
