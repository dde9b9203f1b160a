//! Views and exports of a zones file too large to hold: the file is
//! indexed section by section ([`format::index`]), then each thread's
//! chunks are read again and replayed ([`parse::Replayer`]) as often as
//! the output needs, so memory is bounded by the nesting depth and the
//! number of threads (plus a small record per 4,095-event chunk), not by
//! the events. Reads the file and, for the Chrome export, writes two
//! unnamed temporary files; the output is the same, byte for byte, as
//! [`crate::export`] gives from a [`parse::parse`]d recording (tests
//! compare them).
//!
//! * [`ZonesFile::open`] indexes; [`ZonesFile::scan`] replays every
//!   thread once (the problems, the function addresses to name, each
//!   thread's first and last times), feeding any view on the way.
//! * [`chrome`] needs each zone's end when it writes the zone's begin (in
//!   begin order): its scan writes a 24-byte record per zone to a
//!   temporary file (in begin order, a few patched in place), which a
//!   second replay reads back in step.
//! * [`speedscope`] writes opens and closes as the second replay meets
//!   them; [`folded`] and the text views need only trees of distinct call
//!   paths (the percentiles of the text views keep one `u64` per zone
//!   instance).

use crate::format::{self, ChunkRef, Event, ZoneKey};
use crate::parse::{self, Open, Problem, Recording, ThreadTrace, Visitor};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::os::unix::fs::FileExt;

/// A zones file opened for streaming.
pub struct ZonesFile {
    file: File,
    /// Tables, info, completeness and error of the file.
    pub index: format::Index,
    /// The recording without its spans: clock, names, modules, problems,
    /// and its threads (those with events, by index) with their
    /// `events` counted once [`ZonesFile::scan`] has run.
    pub rec: Recording,
    /// Per thread of `rec.threads`, its chunks by sequence number.
    chunks: Vec<Vec<ChunkRef>>,
    /// Per thread: the first zone's begin, the last end (ticks).
    bounds: Vec<Option<(u64, u64)>>,
    /// Function addresses met by the scan.
    pub functions: HashSet<u64>,
    payload: Vec<u8>,
    events: Vec<Event>,
}

impl ZonesFile {
    /// Indexes `file` (of `size` bytes): the tables and where each chunk
    /// is; the file-level problems ([`parse::parse`]'s) are in `rec`.
    pub fn open(mut file: File, size: u64) -> io::Result<ZonesFile> {
        let index = {
            let mut r = BufReader::with_capacity(1 << 18, &mut file);
            format::index(&mut r, size)?
        };
        // The tables and header problems as `parse` makes them, from the
        // tables alone.
        let mut rec = parse::parse(&index.tables);
        let mut by_thread: HashMap<u32, Vec<ChunkRef>> = HashMap::new();
        for c in &index.chunks {
            by_thread.entry(c.thread).or_default().push(*c);
        }
        let mut indices: Vec<u32> = by_thread.keys().copied().collect();
        indices.sort_unstable();
        let mut chunks = Vec::new();
        for i in indices {
            let mut v = by_thread.remove(&i).unwrap_or_default();
            v.sort_by_key(|c| c.seq);
            let info = index.tables.threads.iter().find(|t| t.index == i);
            rec.threads.push(ThreadTrace {
                index: i,
                tid: info.map_or(0, |t| t.tid),
                name: info.map(|t| t.name.clone()).unwrap_or_default(),
                ..Default::default()
            });
            chunks.push(v);
        }
        let n = chunks.len();
        Ok(ZonesFile {
            file,
            index,
            rec,
            chunks,
            bounds: vec![None; n],
            functions: HashSet::new(),
            payload: Vec::new(),
            events: Vec::new(),
        })
    }

    /// Replays thread `pos` (of `rec.threads`) into `v`; its problems
    /// go to `problems`.
    fn replay_into(
        &mut self,
        pos: usize,
        v: &mut impl Visitor,
        problems: &mut Vec<Problem>,
    ) -> io::Result<u64> {
        // (`rec` may be lent out: the thread index from its chunks, of
        // which every listed thread has one.)
        let mut r = parse::Replayer::new(self.chunks[pos].first().map_or(0, |c| c.thread));
        for c in &self.chunks[pos] {
            if !r.chunk(c.seq, v, problems) {
                continue;
            }
            format::read_chunk(&self.file, c, &mut self.payload, &mut self.events)?;
            for e in &self.events {
                r.event(e, v, problems);
            }
        }
        r.finish(v, problems);
        Ok(r.events)
    }

    /// Replays thread `pos` again into `v` (after [`ZonesFile::scan`]).
    pub fn replay(&mut self, pos: usize, v: &mut impl Visitor) -> io::Result<()> {
        self.replay_into(pos, v, &mut Vec::new()).map(drop)
    }

    /// The scan of thread `pos`, feeding `extra` too: its problems into
    /// `rec.problems`, its function addresses, first and last times. Call
    /// it for every thread in order, then [`ZonesFile::finish_scan`].
    pub fn scan(&mut self, pos: usize, extra: &mut impl Visitor) -> io::Result<()> {
        let mut s = Scan {
            functions: std::mem::take(&mut self.functions),
            bounds: None,
        };
        let mut problems = std::mem::take(&mut self.rec.problems);
        let r = self.replay_into(pos, &mut (&mut s, extra), &mut problems);
        self.rec.problems = problems;
        self.functions = s.functions;
        self.bounds[pos] = s.bounds;
        self.rec.threads[pos].events = r?;
        Ok(())
    }

    /// After the scan: the recording's start where the file has no clock
    /// (the first zone's begin, as [`parse::parse`] takes it).
    pub fn finish_scan(&mut self) {
        let info = &self.index.tables.info;
        let mut st = match info {
            Some(i) if i.tsc_hz.is_finite() && i.tsc_hz > 0.0 => i.start_tsc,
            _ => u64::MAX,
        };
        for (first, _) in self.bounds.iter().flatten() {
            if st == u64::MAX || info.is_none() {
                st = st.min(*first);
            }
        }
        self.rec.start_tsc = if st == u64::MAX { 0 } else { st };
    }

    /// Names the function addresses the scan met (DWARF, symbols);
    /// returns the binaries that could not be read.
    #[cfg(feature = "analysis")]
    pub fn symbolize(&mut self) -> Vec<String> {
        let mut addrs: Vec<u64> = self.functions.iter().copied().collect();
        addrs.sort_unstable();
        crate::symbols::symbolize_addrs(&mut self.rec, addrs)
    }
}

/// What every scan gathers.
struct Scan {
    functions: HashSet<u64>,
    bounds: Option<(u64, u64)>,
}

impl Visitor for Scan {
    fn begin(&mut self, _index: u64, key: ZoneKey, start: u64, _stack: &[Open]) {
        if let ZoneKey::Function(a) = key {
            self.functions.insert(a);
        }
        if self.bounds.is_none() {
            self.bounds = Some((start, start));
        }
    }
    fn end(&mut self, _span: &Open, end: u64, _self_ticks: u64, _closed: bool, _stack: &[Open]) {
        if let Some(b) = &mut self.bounds {
            b.1 = b.1.max(end);
        }
    }
}

fn us(rec: &Recording, ticks: u64) -> f64 {
    ticks as f64 * 1e6 / rec.tsc_hz
}

/// A JSON number as `serde_json` writes it (`null` if not finite).
fn num(w: &mut impl Write, v: f64) -> io::Result<()> {
    serde_json::to_writer(w, &v).map_err(io::Error::from)
}

/// A JSON string as `serde_json` writes it.
fn string(w: &mut impl Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(w, s).map_err(io::Error::from)
}

/// One zone's end as the Chrome export's first pass keeps it.
const END_RECORD: usize = 24;
/// Zones kept in memory before they are written to the temporary file.
const END_BATCH: usize = 1 << 14;

/// First pass of [`chrome`]: per zone, in begin order, its end, bytes
/// and whether the parser closed it, to a temporary file. Zones are
/// buffered from their begin; a full buffer is written with the zones
/// still open (at most the depth) left as holes, filled in place when
/// they end.
struct EndWriter {
    file: File,
    /// Global number (over the selected threads) of `buf[0]`.
    base: u64,
    /// First global number of the thread being replayed.
    thread_base: u64,
    buf: Vec<[u64; 3]>,
    frames: BufWriter<File>,
    frame_count: u64,
    error: Option<io::Error>,
}

fn record_bytes(r: &[u64; 3]) -> [u8; END_RECORD] {
    let mut b = [0u8; END_RECORD];
    for (i, w) in r.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    b
}

impl EndWriter {
    fn flush(&mut self) {
        let mut bytes = Vec::with_capacity(self.buf.len() * END_RECORD);
        for r in &self.buf {
            bytes.extend_from_slice(&record_bytes(r));
        }
        if let Err(e) = self
            .file
            .write_all_at(&bytes, self.base * END_RECORD as u64)
        {
            self.error.get_or_insert(e);
        }
        self.base += self.buf.len() as u64;
        self.buf.clear();
    }
}

impl Visitor for EndWriter {
    fn begin(&mut self, _index: u64, _key: ZoneKey, _start: u64, _stack: &[Open]) {
        if self.buf.len() >= END_BATCH {
            self.flush();
        }
        self.buf.push([0; 3]);
    }
    fn end(&mut self, span: &Open, end: u64, _self_ticks: u64, closed: bool, _stack: &[Open]) {
        let g = self.thread_base + span.index;
        let r = [end, span.bytes, closed as u64];
        if g >= self.base {
            self.buf[(g - self.base) as usize] = r;
        } else if let Err(e) = self
            .file
            .write_all_at(&record_bytes(&r), g * END_RECORD as u64)
        {
            self.error.get_or_insert(e);
        }
    }
    fn frame(&mut self, tsc: u64, n: u64) {
        self.frame_count += 1;
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&tsc.to_le_bytes());
        b[8..].copy_from_slice(&n.to_le_bytes());
        if let Err(e) = self.frames.write_all(&b) {
            self.error.get_or_insert(e);
        }
    }
}

/// An error of the temporary files, naming where they are (a full `/tmp`
/// is not the output's fault).
fn temp_error(e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "the Chrome export's temporary file in {} (24 bytes a zone; TMPDIR chooses the directory): {e}",
            std::env::temp_dir().display()
        ),
    )
}

/// Second pass of [`chrome`]: writes each zone at its begin.
struct ChromeWriter<'a, W: Write> {
    out: &'a mut W,
    ends: &'a mut BufReader<File>,
    rec: &'a Recording,
    tid: u32,
    error: Option<io::Error>,
}

impl<W: Write> ChromeWriter<'_, W> {
    fn span(&mut self, key: ZoneKey, start: u64) -> io::Result<()> {
        let mut b = [0u8; END_RECORD];
        self.ends.read_exact(&mut b)?;
        let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        let (end, bytes, closed) = (word(0), word(1), word(2) != 0);
        let rec = self.rec;
        let w = &mut *self.out;
        w.write_all(b",\n    {\n      \"args\": {")?;
        let mut first = true;
        let mut field = |w: &mut W, name: &str| -> io::Result<()> {
            w.write_all(if first { b"\n" } else { b",\n" })?;
            first = false;
            write!(w, "        \"{name}\": ")
        };
        if bytes > 0 {
            field(w, "bytes")?;
            write!(w, "{bytes}")?;
        }
        if closed {
            field(w, "end_not_recorded")?;
            w.write_all(b"true")?;
        }
        if let Some(n) = rec.names.get(&key) {
            if !n.file.is_empty() {
                field(w, "file")?;
                string(w, &n.file)?;
                field(w, "line")?;
                write!(w, "{}", n.line)?;
            }
        }
        if !first {
            w.write_all(b"\n      ")?;
        }
        let cat = match key {
            ZoneKey::Label(_) => "zone",
            ZoneKey::Function(_) => "function",
        };
        write!(w, "}},\n      \"cat\": \"{cat}\",\n      \"dur\": ")?;
        num(w, us(rec, end - start))?;
        w.write_all(b",\n      \"name\": ")?;
        string(w, &rec.name(key))?;
        write!(
            w,
            ",\n      \"ph\": \"X\",\n      \"pid\": 1,\n      \"tid\": {},\n      \"ts\": ",
            self.tid
        )?;
        num(w, us(rec, start.saturating_sub(rec.start_tsc)))?;
        w.write_all(b"\n    }")
    }
}

impl<W: Write> Visitor for ChromeWriter<'_, W> {
    fn begin(&mut self, _index: u64, key: ZoneKey, start: u64, _stack: &[Open]) {
        if self.error.is_none() {
            if let Err(e) = self.span(key, start) {
                self.error = Some(e);
            }
        }
    }
    fn end(&mut self, _: &Open, _: u64, _: u64, _: bool, _: &[Open]) {}
}

/// The selected threads' scan and their Chrome trace (as
/// `serde_json::to_vec_pretty(&export::chrome(rec))` writes it), to `out`.
/// `threads`: positions in `z.rec.threads`, in order. Every thread is
/// scanned (the problems of all), then [`ZonesFile::finish_scan`] and
/// `name` (symbolization) run before anything is written.
pub fn chrome(
    z: &mut ZonesFile,
    threads: &[usize],
    name: impl FnOnce(&mut ZonesFile),
    out: &mut impl Write,
) -> io::Result<()> {
    let mut ends = EndWriter {
        file: tempfile::tempfile().map_err(temp_error)?,
        base: 0,
        thread_base: 0,
        buf: Vec::new(),
        frames: BufWriter::new(tempfile::tempfile().map_err(temp_error)?),
        frame_count: 0,
        error: None,
    };
    // Per selected thread: its zones and frames.
    let mut counts = Vec::new();
    for pos in 0..z.rec.threads.len() {
        if threads.contains(&pos) {
            ends.thread_base = ends.base + ends.buf.len() as u64;
            let frames0 = ends.frame_count;
            z.scan(pos, &mut ends)?;
            counts.push(ends.frame_count - frames0);
        } else {
            z.scan(pos, &mut ())?;
        }
    }
    ends.flush();
    if let Some(e) = ends.error.take() {
        return Err(temp_error(e));
    }
    z.finish_scan();
    name(z);
    let mut frames = ends
        .frames
        .into_inner()
        .map_err(|e| temp_error(e.into_error()))?;
    frames.rewind()?;
    let mut frames = BufReader::new(frames);
    let mut end_file = ends.file;
    end_file.rewind()?;
    let mut end_reader = BufReader::with_capacity(1 << 16, end_file);
    out.write_all(
        b"{\n  \"displayTimeUnit\": \"ns\",\n  \"otherData\": {\n    \"exporter\": \"coldcache zones\"\n  },\n  \"traceEvents\": [",
    )?;
    let mut any = false;
    for (&pos, &nframes) in threads.iter().zip(&counts) {
        let t = &z.rec.threads[pos];
        let tid = if t.tid != 0 { t.tid } else { t.index };
        // The first event has no comma before it.
        out.write_all(if any { b",\n" } else { b"\n" })?;
        any = true;
        out.write_all(b"    {\n      \"args\": {\n        \"name\": ")?;
        string(out, &t.label())?;
        write!(
            out,
            "\n      }},\n      \"name\": \"thread_name\",\n      \"ph\": \"M\",\n      \"pid\": 1,\n      \"tid\": {tid}\n    }}"
        )?;
        let rec = std::mem::take(&mut z.rec);
        let mut w = ChromeWriter {
            out: &mut *out,
            ends: &mut end_reader,
            rec: &rec,
            tid,
            error: None,
        };
        let r = z.replay(pos, &mut w);
        let err = w.error.take();
        z.rec = rec;
        r?;
        if let Some(e) = err {
            return Err(e);
        }
        for _ in 0..nframes {
            let mut b = [0u8; 16];
            frames.read_exact(&mut b)?;
            let tsc = u64::from_le_bytes(b[..8].try_into().unwrap());
            let n = u64::from_le_bytes(b[8..].try_into().unwrap());
            out.write_all(b",\n    {\n      \"name\": ")?;
            string(out, &format!("frame {n}"))?;
            out.write_all(b",\n      \"ph\": \"i\",\n      \"pid\": 1,\n      \"s\": \"t\",\n")?;
            write!(out, "      \"tid\": {tid},\n      \"ts\": ")?;
            num(out, us(&z.rec, tsc.saturating_sub(z.rec.start_tsc)))?;
            out.write_all(b"\n    }")?;
        }
    }
    out.write_all(if any { b"\n  ]\n}" } else { b"]\n}" })?;
    Ok(())
}

/// Second pass of [`speedscope`]: opens and closes as they come.
struct SpeedscopeWriter<'a, W: Write> {
    out: &'a mut W,
    rec: &'a Recording,
    frame_ix: &'a mut HashMap<ZoneKey, usize>,
    frames: &'a mut Vec<u8>,
    first: bool,
    error: Option<io::Error>,
}

impl<W: Write> SpeedscopeWriter<'_, W> {
    fn event(&mut self, kind: &str, key: ZoneKey, at: u64) -> io::Result<()> {
        let rec = self.rec;
        let n = self.frame_ix.len();
        let f = *self.frame_ix.entry(key).or_insert(n);
        if f == n {
            let fr = &mut *self.frames;
            if n > 0 {
                fr.push(b',');
            }
            fr.push(b'{');
            if let Some(z) = rec.names.get(&key).filter(|z| !z.file.is_empty()) {
                fr.extend_from_slice(b"\"file\":");
                string(fr, &z.file)?;
                write!(fr, ",\"line\":{},", z.line)?;
            }
            fr.extend_from_slice(b"\"name\":");
            string(fr, &rec.name(key))?;
            fr.push(b'}');
        }
        let w = &mut *self.out;
        if !self.first {
            w.write_all(b",")?;
        }
        self.first = false;
        w.write_all(b"{\"at\":")?;
        num(w, at as f64 * 1e9 / rec.tsc_hz)?;
        write!(w, ",\"frame\":{f},\"type\":\"{kind}\"}}")
    }
}

impl<W: Write> Visitor for SpeedscopeWriter<'_, W> {
    fn begin(&mut self, _index: u64, key: ZoneKey, start: u64, _stack: &[Open]) {
        if self.error.is_none() {
            let at = start.saturating_sub(self.rec.start_tsc);
            if let Err(e) = self.event("O", key, at) {
                self.error = Some(e);
            }
        }
    }
    fn end(&mut self, span: &Open, end: u64, _: u64, _: bool, _: &[Open]) {
        if self.error.is_none() {
            let at = end.saturating_sub(self.rec.start_tsc);
            if let Err(e) = self.event("C", span.key, at) {
                self.error = Some(e);
            }
        }
    }
}

/// The scan and speedscope's file of the selected threads (as
/// `serde_json::to_vec(&export::speedscope(rec, name))` writes it).
pub fn speedscope(
    z: &mut ZonesFile,
    threads: &[usize],
    file_name: &str,
    name: impl FnOnce(&mut ZonesFile),
    out: &mut impl Write,
) -> io::Result<()> {
    for pos in 0..z.rec.threads.len() {
        z.scan(pos, &mut ())?;
    }
    z.finish_scan();
    name(z);
    out.write_all(b"{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"activeProfileIndex\":0,\"exporter\":\"coldcache zones\",\"name\":")?;
    string(out, file_name)?;
    out.write_all(b",\"profiles\":[")?;
    let mut frame_ix = HashMap::new();
    let mut frames = Vec::new();
    let ns = |rec: &Recording, ticks: u64| ticks as f64 * 1e9 / rec.tsc_hz;
    for (i, &pos) in threads.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let (start, end) = match z.bounds[pos] {
            Some((s, e)) => (
                ns(&z.rec, s.saturating_sub(z.rec.start_tsc)),
                ns(&z.rec, e.saturating_sub(z.rec.start_tsc)),
            ),
            None => (0.0, 0.0),
        };
        out.write_all(b"{\"endValue\":")?;
        num(out, end.max(start))?;
        out.write_all(b",\"events\":[")?;
        let rec = std::mem::take(&mut z.rec);
        let mut w = SpeedscopeWriter {
            out: &mut *out,
            rec: &rec,
            frame_ix: &mut frame_ix,
            frames: &mut frames,
            first: true,
            error: None,
        };
        let r = z.replay(pos, &mut w);
        let err = w.error.take();
        z.rec = rec;
        r?;
        if let Some(e) = err {
            return Err(e);
        }
        out.write_all(b"],\"name\":")?;
        string(out, &z.rec.threads[pos].label())?;
        out.write_all(b",\"startValue\":")?;
        num(out, start)?;
        out.write_all(b",\"type\":\"evented\",\"unit\":\"nanoseconds\"}")?;
    }
    out.write_all(b"],\"shared\":{\"frames\":[")?;
    out.write_all(&frames)?;
    out.write_all(b"]}}")?;
    Ok(())
}
