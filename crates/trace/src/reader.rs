//! [`TraceReader`]: opens a trace (plain, gzip or zstd; lackey, din or
//! cctrace), detects its format, and hands out records in batches.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::binary::BinaryDecoder;
use crate::input::{decompress, Compression, Counting, Input};
use crate::text::{self, Line, TextParser, MAX_LINE};
use crate::MAGIC;
use crate::{Format, Record};
use coldcache_cctrace::{show, ParseError, TraceError};

/// How much of a text input is looked at to tell text from binary data.
const SNIFF: usize = 64 * 1024;

/// Errors of skipped lines kept for [`TraceReader::skipped_errors`].
const KEEP_SKIPPED: usize = 10;

/// Records fetched at a time for the [`Iterator`] implementation.
const ITER_BATCH: usize = 4096;

/// Opens the trace file at `path`, decompressing gzip or zstd as its first
/// bytes call for, and detecting the format unless `format` forces one (a
/// file starting with the cctrace magic is read as cctrace whatever
/// `format` says). Errors name the file as `path` shows. Only regular
/// files are opened (a FIFO or device is refused at once).
pub fn open(path: &Path, format: Option<Format>) -> Result<TraceReader, TraceError> {
    let name = path.display().to_string();
    // Regular files only (`coldcache_fsio::open_regular`): a FIFO would
    // block the open and `/dev/zero` read forever. A pipe can still be
    // read through [`TraceReader::from_reader`].
    let (file, len) = coldcache_fsio::open_regular(path).map_err(|e| TraceError::Io {
        name: name.clone(),
        error: e.into(),
    })?;
    let mut r = TraceReader::from_reader(name, file, format)?;
    r.total = Some(len);
    // A streamed capture's skeleton lies at the end: read first, from
    // the index before the end marker (`crate::tail`).
    if let (Decoder::Binary(d), Compression::None) = (&mut r.decoder, &r.compression) {
        let skeleton = std::fs::File::open(path)
            .ok()
            .and_then(|mut f| crate::tail::read_skeleton(&mut f, len));
        if let Some(s) = skeleton {
            d.attachments.insert(crate::ATTACH_DUMP_SKELETON, s);
        }
    }
    Ok(r)
}

enum Decoder {
    Text(TextParser),
    Binary(Box<BinaryDecoder>),
}

/// A trace being read. See [`open`] and [`TraceReader::from_reader`].
///
/// After an error is returned, the reader is finished: later calls return
/// no records. Records decoded before an error in the same
/// [`read_batch`](TraceReader::read_batch) call are returned first and the
/// error by the next call.
pub struct TraceReader {
    name: String,
    input: Input,
    format: Format,
    compression: Compression,
    decoder: Decoder,
    raw_bytes: Arc<AtomicU64>,
    total: Option<u64>,
    /// Lines fully consumed (text formats).
    line: u64,
    skip_bad: bool,
    skipped: u64,
    skipped_errors: Vec<TraceError>,
    records: u64,
    pending: Option<TraceError>,
    done: bool,
    iter_buf: Vec<Record>,
    iter_pos: usize,
    /// Set by [`TraceReader::accept_cut`]: where a cut cctrace ended.
    cut: Option<Arc<std::sync::OnceLock<String>>>,
}

impl TraceReader {
    /// Reads a trace from any byte stream; `name` is used in error
    /// messages. Detection (compression, then format unless forced) happens
    /// here, so an input that is not a trace fails now.
    pub fn from_reader(
        name: String,
        reader: impl Read + Send + 'static,
        format: Option<Format>,
    ) -> Result<TraceReader, TraceError> {
        let raw_bytes = Arc::new(AtomicU64::new(0));
        let counted = Counting::new(reader, raw_bytes.clone());
        let (stream, compression) =
            decompress(Box::new(counted)).map_err(|error| TraceError::Io {
                name: name.clone(),
                error,
            })?;
        let mut input = Input::new(stream);
        let io = |error| TraceError::Io {
            name: name.clone(),
            error,
        };
        input.fill_to(MAGIC.len()).map_err(io)?;
        if input.available() == 0 {
            return Err(TraceError::Empty { name, skipped: 0 });
        }
        let head = &input.buf[input.start..input.end];
        let is_binary = head.len() >= MAGIC.len() && head[..MAGIC.len()] == MAGIC;
        let (format, decoder) = if is_binary || format == Some(Format::Binary) {
            let dec = BinaryDecoder::open(&mut input, &name)?;
            (Format::Binary, Decoder::Binary(Box::new(dec)))
        } else {
            input.fill_to(SNIFF).map_err(io)?;
            let detected = sniff_text(&input, &name, format)?;
            (detected, Decoder::Text(TextParser::new(detected)))
        };
        Ok(TraceReader {
            name,
            input,
            format,
            compression,
            decoder,
            raw_bytes,
            total: None,
            line: 0,
            skip_bad: false,
            skipped: 0,
            skipped_errors: Vec::new(),
            records: 0,
            pending: None,
            done: false,
            iter_buf: Vec::new(),
            iter_pos: 0,
            cut: None,
        })
    }

    /// The name given at opening (the path for [`open`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The format read.
    pub fn format(&self) -> Format {
        self.format
    }

    /// "gzip", "zstd", or None for an uncompressed input.
    pub fn compression(&self) -> Option<&'static str> {
        match self.compression {
            Compression::None => None,
            Compression::Gzip => Some("gzip"),
            Compression::Zstd => Some("zstd"),
        }
    }

    /// A cctrace cut short — a capture killed before it finished leaves
    /// its trace as `NAME.partial`, whole up to its last chunk — is read
    /// up to the cut instead of ending in an error: a missing end marker or
    /// a truncated last chunk ends the records, and the returned cell then
    /// holds the error's text (file and offset) for the caller to say.
    pub fn accept_cut(&mut self) -> Arc<std::sync::OnceLock<String>> {
        let cell = Arc::new(std::sync::OnceLock::new());
        self.cut = Some(Arc::clone(&cell));
        cell
    }

    /// When on, malformed lines of a text trace are skipped and counted
    /// instead of ending the read with an error. (A cctrace file has no
    /// lines to skip; its errors always end the read.)
    pub fn set_skip_bad(&mut self, skip: bool) {
        self.skip_bad = skip;
    }

    /// For tests and benchmarks: when on, records are decoded by the
    /// checked, one-field-at-a-time path only (the decoder before the fast
    /// paths of cctrace records and canonical lackey lines), so the fast
    /// paths can be compared with it record for record. Same records and
    /// same errors either way; only the speed differs.
    #[doc(hidden)]
    pub fn set_reference_decoding(&mut self, on: bool) {
        match &mut self.decoder {
            Decoder::Binary(d) => d.reference = on,
            Decoder::Text(t) => t.reference = on,
        }
    }

    /// Malformed lines skipped so far.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The errors of the first few (up to 10) skipped lines.
    pub fn skipped_errors(&self) -> &[TraceError] {
        &self.skipped_errors
    }

    /// Records returned so far (by batches and the iterator).
    pub fn records_read(&self) -> u64 {
        self.records - (self.iter_buf.len() - self.iter_pos) as u64
    }

    /// Bytes read from the underlying input, before decompression: compare
    /// with [`total_bytes`](TraceReader::total_bytes) for a progress bar.
    /// Reading is buffered, so this runs up to a few hundred KiB ahead of
    /// the records returned.
    pub fn bytes_read(&self) -> u64 {
        self.raw_bytes.load(Ordering::Relaxed)
    }

    /// Size of the underlying input when known (a regular file opened with
    /// [`open`], or set with [`set_total_bytes`](TraceReader::set_total_bytes)).
    pub fn total_bytes(&self) -> Option<u64> {
        self.total
    }

    /// Sets the size reported by [`total_bytes`](TraceReader::total_bytes),
    /// for inputs given to [`from_reader`](TraceReader::from_reader).
    pub fn set_total_bytes(&mut self, total: Option<u64>) {
        self.total = total;
    }

    /// cctrace only: the metadata block of the header (empty if none).
    pub fn metadata(&self) -> Option<&[u8]> {
        match &self.decoder {
            Decoder::Binary(d) => Some(&d.metadata),
            Decoder::Text(_) => None,
        }
    }

    /// cctrace only: the OS thread id of thread index `thread`, once the
    /// reader has passed its definition (definitions come before the
    /// thread's first record in files [`crate::TraceWriter`] writes when
    /// the caller defines threads first).
    pub fn thread_os_id(&self, thread: u32) -> Option<u64> {
        match &self.decoder {
            Decoder::Binary(d) => d.threads.get(&thread).copied(),
            Decoder::Text(_) => None,
        }
    }

    /// cctrace only: the format version of the file.
    pub fn version(&self) -> Option<u16> {
        match &self.decoder {
            Decoder::Binary(d) => Some(d.version),
            Decoder::Text(_) => None,
        }
    }

    /// cctrace version 2: the attachment of `kind` (e.g.
    /// [`crate::ATTACH_DUMP_SKELETON`]), once the reader has passed it
    /// (captures write it after the records, so after the end), or from
    /// the start for a streamed capture's skeleton in a plain file
    /// [`open`]ed by path (found through the index at its end).
    pub fn attachment(&self, kind: u64) -> Option<&[u8]> {
        match &self.decoder {
            Decoder::Binary(d) => d.attachments.get(&kind).map(Vec::as_slice),
            Decoder::Text(_) => None,
        }
    }

    /// cctrace only: the thread table read so far (index → OS thread id).
    pub fn threads(&self) -> BTreeMap<u32, u64> {
        match &self.decoder {
            Decoder::Binary(d) => d.threads.clone(),
            Decoder::Text(_) => BTreeMap::new(),
        }
    }

    /// Clears `out` and fills it with up to `max` records. Returns how many;
    /// 0 means the end of the trace (and stays 0 after it).
    pub fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        if max == 0 {
            return Ok(0);
        }
        if self.iter_pos < self.iter_buf.len() {
            let n = (self.iter_buf.len() - self.iter_pos).min(max);
            out.extend_from_slice(&self.iter_buf[self.iter_pos..self.iter_pos + n]);
            self.iter_pos += n;
            return Ok(n);
        }
        if let Some(e) = self.pending.take() {
            self.done = true;
            return Err(e);
        }
        if self.done {
            return Ok(0);
        }
        out.reserve(max.min(1 << 16));
        let mut result = self.fill(out, max);
        if let (Err(e), Some(cell)) = (&result, &self.cut) {
            if matches!(
                e,
                TraceError::Binary {
                    error: crate::BinaryError::MissingEnd { .. }
                        | crate::BinaryError::Truncated { .. },
                    ..
                }
            ) {
                let _ = cell.set(e.to_string());
                result = Ok(true);
            }
        }
        let n = out.len();
        self.records += n as u64;
        match result {
            Ok(end) => {
                if end {
                    self.done = true;
                    if self.records == 0 {
                        return Err(TraceError::Empty {
                            name: self.name.clone(),
                            skipped: self.skipped,
                        });
                    }
                }
                Ok(n)
            }
            Err(e) if n > 0 => {
                self.pending = Some(e);
                Ok(n)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// Appends records to `out` until it holds `max` (returns false) or
    /// the trace ends (returns true).
    fn fill(&mut self, out: &mut Vec<Record>, max: usize) -> Result<bool, TraceError> {
        match &mut self.decoder {
            Decoder::Binary(d) => d.read(&mut self.input, &self.name, out, max),
            Decoder::Text(_) => self.fill_text(out, max),
        }
    }

    fn fill_text(&mut self, out: &mut Vec<Record>, max: usize) -> Result<bool, TraceError> {
        let Decoder::Text(parser) = &mut self.decoder else {
            unreachable!("text decoder")
        };
        let input = &mut self.input;
        loop {
            // Lines complete in the buffer: up to the last '\n'.
            let region = &input.buf[input.start..input.end];
            let limit = match region.iter().rposition(|&b| b == b'\n') {
                Some(i) => input.start + i + 1,
                None => {
                    if input.eof {
                        if input.start == input.end {
                            return Ok(true);
                        }
                        // A last line without '\n': terminate it.
                        if input.end == input.buf.len() {
                            input.buf.push(b'\n');
                        } else {
                            input.buf[input.end] = b'\n';
                        }
                        input.end += 1;
                        continue;
                    }
                    if !input.make_room(MAX_LINE) {
                        let region = &input.buf[input.start..input.end];
                        let error = if region.contains(&0) || std::str::from_utf8(region).is_err() {
                            ParseError::BinaryData
                        } else {
                            ParseError::LineTooLong(input.buf.len())
                        };
                        return Err(TraceError::Parse {
                            name: self.name.clone(),
                            line: self.line + 1,
                            error,
                        });
                    }
                    input.fill().map_err(|error| TraceError::Io {
                        name: self.name.clone(),
                        error,
                    })?;
                    continue;
                }
            };
            let buf = &input.buf[..limit];
            let mut p = input.start;
            // Each parse consumes exactly one line.
            let mut line = self.line;
            let fast = parser.fast();
            while p < limit {
                if out.len() >= max {
                    break;
                }
                line += 1;
                if fast {
                    if let Some((r, next)) = parser.fast_lackey(buf, p) {
                        out.push(r);
                        p = next;
                        continue;
                    }
                }
                match parser.parse_line(buf, p) {
                    Line::Record(r, next) => {
                        out.push(r);
                        p = next;
                    }
                    Line::Skip(next) => p = next,
                    Line::Bad(error, next) => {
                        p = next;
                        let e = TraceError::Parse {
                            name: self.name.clone(),
                            line,
                            error,
                        };
                        if !self.skip_bad {
                            input.start = p;
                            self.line = line;
                            return Err(e);
                        }
                        self.skipped += 1;
                        if self.skipped_errors.len() < KEEP_SKIPPED {
                            self.skipped_errors.push(e);
                        }
                    }
                }
            }
            input.start = p;
            self.line = line;
            if out.len() >= max {
                return Ok(false);
            }
            if input.start == input.end && !input.eof {
                input.fill().map_err(|error| TraceError::Io {
                    name: self.name.clone(),
                    error,
                })?;
            }
        }
    }
}

/// Checks the first bytes of a text input and finds its format: rejects
/// binary data, finds the first line that is not blank or Valgrind's, and
/// tells lackey from din by it.
fn sniff_text(input: &Input, name: &str, forced: Option<Format>) -> Result<Format, TraceError> {
    let head = &input.buf[input.start..input.end.min(input.start + SNIFF)];
    if head.is_empty() {
        return Err(TraceError::Empty {
            name: name.to_string(),
            skipped: 0,
        });
    }
    let binary = head.contains(&0)
        || match std::str::from_utf8(head) {
            Ok(_) => false,
            // An error at the very end may be a character cut by the window.
            Err(e) => e.error_len().is_some() || (input.eof && input.end <= input.start + SNIFF),
        };
    if binary {
        return Err(TraceError::NotATrace {
            name: name.to_string(),
        });
    }
    // Lines complete in the window (plus the last one at end of input).
    let mut lines = head.to_vec();
    let complete = input.eof && input.end <= input.start + SNIFF;
    if complete && lines.last() != Some(&b'\n') {
        lines.push(b'\n');
    }
    let limit = lines.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let lines = &lines[..limit];
    let mut p = 0;
    let mut line = 1u64;
    while p < lines.len() {
        if !(text::is_valgrind_line(lines, p) || text::is_blank_line(lines, p)) {
            if let Some(f) = forced {
                return Ok(f);
            }
            return match text::guess_format(lines, p) {
                Some(f) => Ok(f),
                None => Err(TraceError::UnknownFormat {
                    name: name.to_string(),
                    line,
                    text: format!("\"{}\"", show(text::line_text(lines, p))),
                }),
            };
        }
        p = text::next_line(lines, p);
        line += 1;
    }
    if complete {
        return Err(TraceError::Empty {
            name: name.to_string(),
            skipped: 0,
        });
    }
    // Only banner lines in the first 64 KiB (or one huge line): let the
    // parser decide with the forced format or lackey.
    Ok(forced.unwrap_or(Format::Lackey))
}

impl Iterator for TraceReader {
    type Item = Result<Record, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.iter_pos < self.iter_buf.len() {
            let r = self.iter_buf[self.iter_pos];
            self.iter_pos += 1;
            return Some(Ok(r));
        }
        let mut buf = std::mem::take(&mut self.iter_buf);
        let result = self.read_batch(&mut buf, ITER_BATCH);
        self.iter_buf = buf;
        self.iter_pos = 0;
        match result {
            Ok(0) => None,
            Ok(_) => {
                self.iter_pos = 1;
                Some(Ok(self.iter_buf[0]))
            }
            Err(e) => Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_is_send() {
        fn send<T: Send>() {}
        send::<TraceReader>();
        send::<crate::TraceWriter<std::fs::File>>();
    }
}
