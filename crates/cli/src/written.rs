//! What a capture wrote, and saying so: the library's manifest (one JSON
//! object a line, written by `coldcache_capture`'s `output` module) read
//! into [`Written`]; each dump summarised ([`summary`]) and resolved, a
//! trace named `.zst` compressed ([`compress_if_zst`]), earlier files kept
//! as `.old` and dumps kept elsewhere said; the error of a run whose dumps
//! could not all be written ([`write_failure`]). `record` and `attach`
//! report through it, `sim -o` summarises with it.

use anyhow::{Context, Result};
use coldcache_dump::{Dump, Side};
use std::path::{Path, PathBuf};

/// What the library wrote during one run, from its manifest
/// (`COLDCACHE_DUMPS`, one JSON object a line; `coldcache_capture`'s
/// `output` module writes it).
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// Dumps in the order written (those kept elsewhere included).
    pub(crate) dumps: Vec<PathBuf>,
    /// Traces in the order written.
    traces: Vec<PathBuf>,
    /// Earlier files kept: (the path, its `.old` copy).
    kept: Vec<(PathBuf, PathBuf)>,
    /// This run's dumps that another capture has since replaced at their
    /// path, keeping them as `.old`: (the path, where the dump is now).
    replaced: Vec<(PathBuf, PathBuf)>,
    /// Dumps that could not be written where asked: (asked, kept in,
    /// why).
    pub(crate) failed: Vec<(PathBuf, PathBuf, String)>,
    /// Captures that could not be written anywhere: (asked, the error).
    pub(crate) lost: Vec<(PathBuf, String)>,
}

/// The error of a run whose dumps could not all be written where asked
/// (`record` and `attach` exit with it even when the program succeeded):
/// each file with the operating system's error, and where a capture was
/// kept instead; `None` when every dump was written.
pub(crate) fn write_failure(w: &Written) -> Option<anyhow::Error> {
    let mut why: Vec<String> = w
        .lost
        .iter()
        .map(|(asked, e)| format!("{} ({e}; lost)", asked.display()))
        .collect();
    why.extend(
        w.failed.iter().map(|(asked, kept, e)| {
            format!("{} ({e}; kept in {})", asked.display(), kept.display())
        }),
    );
    (!why.is_empty()).then(|| {
        anyhow::anyhow!(
            "the capture{} could not be written: {}",
            if why.len() == 1 { "" } else { "s" },
            why.join(", ")
        )
    })
}

/// A trace the capture did not finish (the program killed): the library
/// left it as `TRACE.partial` beside `asked`; says where and how to read
/// it.
pub(crate) fn report_partial_trace(asked: &Path, w: &Written) {
    let mut partial = std::path::absolute(asked)
        .unwrap_or_else(|_| asked.to_path_buf())
        .into_os_string();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    if w.traces.is_empty() && partial.is_file() {
        coldcache_fsio::say!(
            "coldcache: the capture did not finish: its trace is left as {0}, whole up to its \
             last chunk (`coldcache sim {0}` reads it up to the cut)",
            partial.display()
        );
    }
}

/// Where the dump the manifest line `v` lists is now: at `path`, or, when
/// another capture has since put its own dump there and kept this one as
/// `PATH.old` (two `record`s at once in one directory), at `PATH.old`
/// (added to `replaced`, so it is said). The line's `id` is the file's
/// identity when written.
fn moved_since(
    v: &serde_json::Value,
    path: PathBuf,
    replaced: &mut Vec<(PathBuf, PathBuf)>,
) -> PathBuf {
    let id = v.get("id").and_then(|i| {
        let i = i.as_array()?;
        Some((i.first()?.as_u64()?, i.get(1)?.as_u64()?))
    });
    let Some(id) = id else { return path };
    if coldcache_fsio::file_id(&path) == Some(id) {
        return path;
    }
    let mut old = path.clone().into_os_string();
    old.push(".old");
    let old = PathBuf::from(old);
    if coldcache_fsio::file_id(&old) == Some(id) {
        replaced.push((path, old.clone()));
        return old;
    }
    path
}

/// Reads the manifest; a missing file is a run that wrote nothing.
pub(crate) fn read_manifest(path: &Path) -> Result<Written> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Written::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut w = Written::default();
    let get = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(PathBuf::from);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}: a line is not JSON: {line}", path.display()))?;
        if let Some(d) = get(&v, "dump") {
            if let Some(asked) = get(&v, "failed") {
                let e = v.get("error").and_then(|x| x.as_str()).unwrap_or_default();
                w.failed.push((asked, d.clone(), e.to_string()));
            }
            w.dumps.push(moved_since(&v, d, &mut w.replaced));
        } else if let Some(t) = get(&v, "trace") {
            w.traces.push(t);
        } else if let (Some(old), Some(was)) = (get(&v, "kept"), get(&v, "was")) {
            w.kept.push((was, old));
        } else if let Some(lost) = get(&v, "lost") {
            let e = v.get("error").and_then(|x| x.as_str()).unwrap_or_default();
            w.lost.push((lost, e.to_string()));
        }
    }
    Ok(w)
}

/// Says what the run wrote: each dump's summary (resolved unless
/// `--no-resolve`), earlier files kept as `.old`, dumps kept elsewhere,
/// and the list when there are several. Returns whether any capture has
/// instructions (an armed capture that never started is written empty,
/// with the reason).
/// Reports what the library wrote; gives whether a capture holds any
/// instruction, and the cut of the first dump whose tables ran out of
/// memory (`coldcache_capture::grow::TABLE_FULL`) or whose trace could not
/// be written (`coldcache_capture::trace_write_failed`), if one was.
pub(crate) fn report_written(
    w: &Written,
    no_resolve: bool,
    no_sources: bool,
    quiet: bool,
) -> (bool, Option<String>) {
    for (was, old) in &w.kept {
        coldcache_fsio::say!(
            "coldcache: the earlier {} is kept as {}",
            was.display(),
            old.display()
        );
    }
    for (path, now) in &w.replaced {
        coldcache_fsio::say!(
            "coldcache: another capture has since written {}; this run's capture is {}",
            path.display(),
            now.display()
        );
    }
    for (asked, kept, why) in &w.failed {
        coldcache_fsio::say!(
            "coldcache: error: the capture could not be written to {} ({why}); it was kept in {}",
            asked.display(),
            kept.display()
        );
    }
    for (asked, e) in &w.lost {
        coldcache_fsio::say!(
            "coldcache: error: the capture could not be written to {}: {e}",
            asked.display()
        );
    }
    let mut captured = false;
    let mut failed_cut = None;
    for dump_path in &w.dumps {
        // A device or FIFO given as -o was written through: nothing to read.
        if !std::fs::metadata(dump_path).is_ok_and(|m| m.is_file()) {
            captured = true;
            continue;
        }
        // Read with its records summed per instruction (all the summary
        // and the resolver look at): a capture of millions of records
        // costs about its file's size here, not its records'.
        let loaded = match crate::report_cmd::load_by_instruction(dump_path) {
            Ok(d) => d,
            Err(e) => {
                coldcache_fsio::say!("coldcache: error: {e:#}");
                continue;
            }
        };
        if !quiet {
            coldcache_fsio::sigpipe::say(format_args!(
                "{}",
                summary_by_instruction(&loaded, dump_path)
            ));
        }
        let dump = &loaded.dump;
        // Quiet (`coldcache valgrind`): the warning goes to its log.
        if let Some(warning) = one_core_warning(dump).filter(|_| !quiet) {
            coldcache_fsio::say!("{warning}");
        }
        captured |= dump.meta.instructions > 0;
        // Cuts that lose what was asked for fail the run: the tables'
        // memory spent, or the trace not written (a full disk, a quota, a
        // size limit; not a trace reader that went away).
        if let Some(c) = dump.meta.cut_short.as_ref().filter(|c| {
            c.starts_with(coldcache_capture::grow::TABLE_FULL)
                || coldcache_capture::trace_write_failed(c)
        }) {
            failed_cut.get_or_insert_with(|| c.clone());
        }
        if !no_resolve {
            // The capture is written: a failure here loses nothing, so it
            // is reported and the program's own status still decides.
            match crate::resolve_cmd::resolve_loaded(
                loaded,
                dump_path,
                &coldcache_symbols::ResolveOptions::default(),
                !no_sources,
            ) {
                Ok(_) if quiet => {}
                Ok(text) => coldcache_fsio::sigpipe::say(format_args!("{text}")),
                Err(e) => coldcache_fsio::say!(
                    "coldcache: warning: the dump is left unresolved (run `coldcache resolve {}`): {e:#}",
                    dump_path.display()
                ),
            }
        }
    }
    for t in &w.traces {
        match compress_if_zst(t) {
            Ok(()) => match failed_cut
                .as_deref()
                .filter(|c| coldcache_capture::trace_write_failed(c))
            {
                Some(why) => coldcache_fsio::say!(
                    "coldcache: trace written to {}, cut short: {why}",
                    t.display()
                ),
                None => coldcache_fsio::say!("coldcache: trace written to {}", t.display()),
            },
            Err(e) => coldcache_fsio::say!(
                "coldcache: warning: the trace {} is left uncompressed: {e:#}",
                t.display()
            ),
        }
    }
    if w.dumps.len() > 1 && !quiet {
        coldcache_fsio::say!("coldcache: {} dumps written by this run:", w.dumps.len());
        for d in &w.dumps {
            coldcache_fsio::say!("  {}", d.display());
        }
    }
    (captured, failed_cut)
}

/// Compresses the trace at `path` with zstd (fastest level) when its name
/// ends in `.zst` and it is not compressed yet: the library, which links no
/// compressor, writes every trace plain, and readers tell by the first
/// bytes, so a plain trace under that name still reads. Traces repeat
/// themselves (loops): this shrinks a capture's trace many times over.
///
/// A pass after the program ends rather than chunk by chunk during the
/// capture: compressing in the traced process would slow it and link a
/// compressor into the preloaded library, and a writer thread of ours
/// would compete with the program for the cores. Streamed in bounded
/// memory (file → compressor → temporary file → rename). A streamed
/// capture's skeleton, last in the plain file, is moved first (a
/// compressed stream cannot seek to its end): header, skeleton chunk, the
/// record chunks, an index naming the new offset, the end marker.
pub(crate) fn compress_if_zst(path: &Path) -> Result<()> {
    use coldcache_trace::stream::{skeleton_index_chunk, STREAM_TAIL};
    use std::io::{Read, Seek, SeekFrom};
    if path.extension().is_none_or(|e| e != "zst") {
        return Ok(());
    }
    let (mut file, len) = coldcache_fsio::open_regular(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let mut head = [0u8; 16];
    let got = file
        .read(&mut head)
        .with_context(|| format!("reading {}", path.display()))?;
    if head[..got].starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Ok(());
    }
    // Where the skeleton is, when the file is a streamed capture's.
    let mut tail = vec![0u8; STREAM_TAIL];
    let layout = (got == 16 && head[..8] == coldcache_trace::MAGIC && len > STREAM_TAIL as u64)
        .then(|| -> Option<(u64, u64)> {
            let header = 16 + u64::from(u32::from_le_bytes(head[12..16].try_into().ok()?)) + 4;
            file.seek(SeekFrom::Start(len - STREAM_TAIL as u64)).ok()?;
            file.read_exact(&mut tail).ok()?;
            let at = coldcache_trace::tail::skeleton_offset(&tail)?;
            (header <= at && at < len - STREAM_TAIL as u64).then_some((header, at))
        })
        .flatten();
    let open = || std::fs::File::open(path).with_context(|| format!("reading {}", path.display()));
    let source: Box<dyn Read> = match layout {
        Some((header, at)) => {
            let range = |from: u64, to: u64| -> Result<Box<dyn Read>> {
                let mut f = open()?;
                f.seek(SeekFrom::Start(from))?;
                Ok(Box::new(f.take(to - from)))
            };
            let mut end = skeleton_index_chunk(header).to_vec();
            end.extend_from_slice(&tail[coldcache_trace::stream::SKELETON_INDEX_CHUNK..]);
            Box::new(
                range(0, header)?
                    .chain(range(at, len - STREAM_TAIL as u64)?)
                    .chain(range(header, at)?)
                    .chain(std::io::Cursor::new(end)),
            )
        }
        None => Box::new(open()?),
    };
    // The compressor panics on an I/O error: errors are kept aside and
    // checked after.
    struct Keep<T>(T, Option<std::io::Error>);
    impl<R: Read> Read for Keep<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.1.is_some() {
                return Ok(0);
            }
            self.0.read(buf).or_else(|e| {
                self.1 = Some(e);
                Ok(0)
            })
        }
    }
    impl<W: std::io::Write> std::io::Write for Keep<W> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.1.is_none() {
                if let Err(e) = self.0.write_all(buf) {
                    self.1 = Some(e);
                }
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut source = Keep(source, None);
    coldcache_fsio::write_atomically_with(path, |f| {
        let mut drain = Keep(std::io::BufWriter::with_capacity(1 << 20, f), None);
        ruzstd::encoding::compress(
            &mut source,
            &mut drain,
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        if let Some(e) = source.1.take().or(drain.1.take()) {
            return Err(e);
        }
        std::io::Write::flush(&mut drain.0)
    })
    .with_context(|| format!("cannot write {}", path.display()))
}

/// A few lines about a dump: totals per level and where it is.
pub fn summary(d: &Dump, path: &Path) -> String {
    summary_with(d, d.records.len(), path)
}

/// [`summary`] of a dump read with its records summed per instruction:
/// the same text (the totals, the coverage of data types and the counts
/// need no more).
pub(crate) fn summary_by_instruction(d: &coldcache_dump::ByInstruction, path: &Path) -> String {
    summary_with(&d.dump, d.records(), path)
}

/// [`summary`] of `d`, which holds `records` records in its file.
fn summary_with(d: &Dump, records: usize, path: &Path) -> String {
    let t = d.totals();
    let levels = d.meta.levels.len();
    let mut s = format!(
        "coldcache: capture written to {}\n  {} instructions, {} threads, {} records, {} stacks ({} cache, trigger {})\n",
        path.display(),
        d.meta.instructions,
        d.threads.len(),
        records,
        d.stacks.len(),
        d.meta.cache_name,
        d.meta.trigger
    );
    // A dump of another layout (not written by this version) has no
    // per-level lines.
    if let Some(l) = d.layout() {
        for (side, name) in
            Side::ALL
                .into_iter()
                .zip(["instruction fetches", "data reads", "data writes"])
        {
            let parts: Vec<String> = (0..=levels)
                .map(|k| {
                    let label = d.meta.levels.get(k).map(String::as_str).unwrap_or("memory");
                    format!("{label} {}", t.get(l.served(side, k)).copied().unwrap_or(0))
                })
                .collect();
            s += &format!("  {name:<20} served by {}\n", parts.join(", "));
        }
    }
    let un = t
        .get(coldcache_dump::CounterLayout::UNMODELLED)
        .copied()
        .unwrap_or(0);
    // In words, as `report`'s header and the web UI say them.
    if let Some(f) = coldcache_analysis::summary::unmodelled(&d.meta, un) {
        s += &format!("  {}\n    ({})\n", f.text, f.advice);
    }
    // How many data accesses got a type, when the dump has data types.
    if let Some(c) = coldcache_analysis::data::coverage_of(d, &|_| true) {
        s += &format!("  data types: {}\n", c.text());
    }
    // Which mode ran, and how much of a fast capture the trap engine did
    // (none for a dump re-simulated from a trace no capture wrote).
    if d.meta.trigger == "trace" {
        s += &format!(
            "  mode: {}\n",
            coldcache_analysis::summary::capture_mode(&d.meta)
        );
    } else {
        match coldcache_analysis::summary::fast_trapped(&d.meta) {
            Some(_) => match coldcache_analysis::summary::trapped(&d.meta) {
                Some(f) => s += &format!("  mode fast: {}\n    ({})\n", f.text, f.advice),
                None => s += "  mode fast: no instruction ran under the trap engine\n",
            },
            None => match coldcache_analysis::summary::trap_fallback(&d.meta) {
                Some(why) => s += &format!("  mode trap: {why}\n"),
                None => s += "  mode trap\n",
            },
        }
    }
    if let Some(v) = d
        .meta
        .notes
        .iter()
        .find_map(|n| n.strip_prefix("fast-mode verification: "))
    {
        s += &format!("  verify: {v}\n");
    }
    if !d.meta.warm.is_empty() {
        s += &format!("  warmed {}\n", d.meta.warm);
    }
    if !d.meta.schedule.is_empty() {
        s += &format!("  schedule {}\n", d.meta.schedule);
    }
    if let Some(c) = &d.meta.cut_short {
        s += &format!("  cut short: {c}\n");
    }
    // Threads `--threads` left out (`record --all` traces main alone).
    if let Some(u) = coldcache_analysis::summary::untraced(&d.meta) {
        s += &format!("  untraced: {}\n    ({})\n", u.text, u.advice);
    }
    if let Some(w) = coldcache_analysis::summary::woken_early(&d.meta) {
        s += &format!("  woken: {}\n    ({})\n", w.text, w.advice);
    }
    if let Some(r) = coldcache_analysis::summary::client_requests(&d.meta) {
        s += &format!("  requests: {}\n    ({})\n", r.text, r.advice);
    }
    if let Some(p) = &d.meta.part {
        s += &format!("  part {} of {}: ended by {}\n", p.number, p.of, p.trigger);
    }
    s
}

/// A warning for a capture that traced several threads on a cache
/// configuration of one core: every thread then shares every level, so no
/// invalidation or false sharing can show. Names the presets with several
/// cores (`coldcache presets`). `None` otherwise.
pub(crate) fn one_core_warning(d: &Dump) -> Option<String> {
    if d.threads.len() < 2 || d.meta.cores != 1 {
        return None;
    }
    let several: Vec<String> = coldcache_config::names()
        .iter()
        .filter(|(name, _)| *name != "host")
        .filter_map(|(name, _)| {
            let c = coldcache_config::resolve(name).ok()?;
            (c.cores > 1).then(|| format!("{name} ({} cores)", c.cores))
        })
        .collect();
    Some(format!(
        "coldcache: warning: {} threads were traced on a one-core cache ({}): they share its \
         every level as one core would, so no coherence traffic (invalidations) or false \
         sharing can show; for those, capture with a cache of several cores: --cache {}",
        d.threads.len(),
        d.meta.cache_name,
        several.join(", --cache ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary says unmodelled instructions by class in words (not as
    /// a Debug tuple) and the fast-mode trapped count with its share; the
    /// one-core warning only for several threads on one core.
    #[test]
    fn the_summary_says_unmodelled_and_trapped_in_words() {
        use coldcache_dump::{CounterLayout, Meta, Record, Thread};
        let levels = vec!["L1".to_string(), "L2".to_string()];
        let counters = CounterLayout::new(2).names(&levels);
        let mut row = vec![0u64; counters.len()];
        row[0] = 1_000;
        row[CounterLayout::UNMODELLED] = 405;
        let mut d = Dump {
            meta: Meta {
                cache_name: "cachegrind".into(),
                levels,
                cores: 1,
                counters,
                instructions: 1_000,
                trigger: "all".into(),
                unmodelled: vec![("partially masked AVX-512 memory operand".into(), 405)],
                mode: coldcache_dump::Mode {
                    engine: "fast".into(),
                    trapped: 12,
                    ..Default::default()
                },
                ..Meta::default()
            },
            threads: vec![Thread::default()],
            records: vec![Record {
                ip: 0x1000,
                stack: 0,
                thread: 0,
                counters: row,
            }],
            ..Dump::default()
        };
        let s = summary(&d, Path::new("x.ccdump"));
        assert!(
            s.contains(
                "  405 instructions unmodelled: 405 partially masked AVX-512 memory operand\n    ("
            ),
            "{s}"
        );
        assert!(!s.contains("(\""), "no Debug tuple: {s}");
        assert!(
            s.contains("  mode fast: 12 of 1,000 instructions (1.20%) ran under the trap engine\n"),
            "{s}"
        );
        assert_eq!(one_core_warning(&d), None, "one thread");
        d.threads.push(Thread::default());
        let w = one_core_warning(&d).unwrap();
        assert!(
            w.contains("2 threads were traced on a one-core cache (cachegrind)"),
            "{w}"
        );
        assert!(w.contains("--cache jaguar (8 cores)"), "{w}");
        d.meta.cores = 8;
        assert_eq!(one_core_warning(&d), None, "eight cores");
        // The data-type coverage only for a dump with data types: 30 reads
        // of the one record's instruction, typed to a field.
        assert!(!s.contains("data types:"), "{s}");
        let l = CounterLayout::new(2);
        d.records[0].counters[l.served(coldcache_dump::Side::Read, 0)] = 30;
        d.data = Some(coldcache_dump::DataTypes {
            types: vec![coldcache_dump::DataType {
                name: "S".into(),
                size: 8,
                members: vec![coldcache_dump::Member {
                    name: "a".into(),
                    size: 8,
                    ty: coldcache_dump::data::NO_TYPE,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            accesses: vec![coldcache_dump::TypedAccess {
                addr: 0x1000,
                size: 8,
                path: vec![0],
                ..Default::default()
            }],
            modules: vec![],
            slots: vec![],
        });
        let s = summary(&d, Path::new("x.ccdump"));
        assert!(
            s.contains("  data types: 100.0% of 30 data accesses typed, 100.0% with a field (1 of 1 instructions with data accesses typed)\n"),
            "{s}"
        );
    }

    /// The summary of a dump read with its records summed per instruction
    /// (`record`'s and `attach`'s way) is the text of the whole dump's:
    /// several records per address, on two stacks and two threads, with a
    /// data type on one address.
    #[test]
    fn the_summary_read_per_instruction_is_the_whole_dumps() {
        use coldcache_dump::{ByInstruction, CounterLayout, Meta, Record, StackNode, Thread};
        let levels = vec!["L1".to_string(), "L2".to_string()];
        let counters = CounterLayout::new(2).names(&levels);
        let l = CounterLayout::new(2);
        let row = |k: u64| {
            let mut r = vec![0u64; counters.len()];
            r[0] = 10 * k;
            r[l.served(coldcache_dump::Side::Read, 0)] = 3 * k;
            r[l.served(coldcache_dump::Side::Write, 2)] = k;
            r
        };
        let rec = |ip, stack, thread, counters| Record {
            ip,
            stack,
            thread,
            counters,
        };
        let d = Dump {
            meta: Meta {
                cache_name: "jaguar".into(),
                levels: levels.clone(),
                cores: 8,
                counters: counters.clone(),
                instructions: 70,
                trigger: "all".into(),
                ..Meta::default()
            },
            threads: vec![Thread::default(), Thread::default()],
            stacks: vec![
                StackNode::default(),
                StackNode {
                    parent: 0,
                    call_site: 0x1004,
                    callee: 0x2000,
                },
            ],
            records: vec![
                rec(0x1000, 0, 0, row(1)),
                rec(0x1000, 1, 1, row(2)),
                rec(0x2000, 1, 0, row(4)),
            ],
            data: Some(coldcache_dump::DataTypes {
                types: vec![coldcache_dump::DataType {
                    name: "S".into(),
                    size: 8,
                    ..Default::default()
                }],
                accesses: vec![coldcache_dump::TypedAccess {
                    addr: 0x1000,
                    size: 8,
                    ..Default::default()
                }],
                modules: vec![],
                slots: vec![],
            }),
            ..Dump::default()
        };
        let b = ByInstruction::from_bytes(d.to_bytes()).unwrap();
        let path = Path::new("x.ccdump");
        let whole = summary(&d, path);
        assert!(
            whole.contains("70 instructions, 2 threads, 3 records, 2 stacks"),
            "{whole}"
        );
        assert!(
            whole.contains("data types: 42.9% of 28 data accesses typed"),
            "{whole}"
        );
        assert_eq!(summary_by_instruction(&b, path), whole);
    }
}
