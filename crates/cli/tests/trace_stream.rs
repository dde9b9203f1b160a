//! A capture's `--trace` streamed to disk while the program runs, in
//! bounded memory, against independent truths:
//! - the capture itself: a trace written out in many chunks (a chunk
//!   buffer of 64 records) re-simulates into the capture's dump, counter
//!   for counter, in trap and fast modes; its `.zst` form holds the
//!   skeleton right after the header;
//! - the file system: a program that kills itself halfway leaves
//!   `TRACE.partial`, which `coldcache sim` reads up to its cut, naming
//!   the file's length as the offset;
//! - the file size limit and a full tmpfs: the capture stops with the
//!   reason in its dump, the program's output equals its output without
//!   coldcache, and the trace that was written reads;
//! - the kernel's peak resident memory (`VmHWM`): a capture whose trace
//!   holds about fifteen million records costs a few MiB more than the
//!   same capture without a trace (the records alone would take 600 MB).
//!
//! Skipped with a message when gcc or setarch is missing.

use coldcache_dump::Dump;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use dumps::load;
use library::{repo, COLDCACHE};
use programs::{gcc_and_setarch_or_skip, run_with_deadline, scratch_in};

fn scratch(name: &str) -> PathBuf {
    scratch_in("stream", name)
}

fn ok(cmd: Command, what: &str) -> Output {
    let out = run_with_deadline(cmd, what);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs a `record` whose trace cannot be written to its end: it must fail
/// (exit 2: the capture asked for is not whole; it exited 0) saying the
/// capture was cut short and why (`why` in the reason), and name the
/// trace as cut short (or left as `.partial` when its end did not fit).
fn lost_trace(cmd: Command, what: &str, why: &str) -> Output {
    let out = run_with_deadline(cmd, what);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert!(
        err.lines()
            .any(|l| l.contains("the capture was cut short") && l.contains(why)),
        "{what}: {err}"
    );
    assert!(
        err.lines().any(|l| {
            (l.contains("coldcache: trace written to") && l.contains("cut short"))
                || l.contains("its trace is left as")
        }),
        "{what}: {err}"
    );
    out
}

/// `tests-programs/capture/stream.c`, built in `dir`.
fn stream_program(dir: &Path) -> PathBuf {
    programs::build_with("tests-programs/capture/stream.c", dir, false)
}

/// `coldcache record --no-resolve --mode MODE` with `args`, then the
/// program and its arguments, without address randomisation.
fn record(dir: &Path, mode: &str, args: &[&str], program: &[&str]) -> Command {
    let mut cmd = Command::new("setarch");
    cmd.args(["-R", "--"])
        .arg(COLDCACHE)
        .args(["record", "--no-resolve", "--no-progress", "--mode", mode])
        .args(args)
        .arg("--")
        .args(program)
        .current_dir(dir)
        .stdin(Stdio::null());
    cmd
}

fn sim(args: &[&str], trace: &Path) -> Output {
    let mut cmd = Command::new(COLDCACHE);
    cmd.args(["sim", "--no-progress", "--no-resolve"])
        .arg(trace)
        .args(args)
        .stdin(Stdio::null());
    run_with_deadline(cmd, "coldcache sim")
}

/// Chunks in a plain cctrace file, walked by their headers.
fn chunks(path: &Path) -> usize {
    let b = std::fs::read(path).unwrap();
    let meta = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    let mut at = 16 + meta + 4;
    let mut n = 0;
    while at + 12 <= b.len() {
        let len = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        at += 12 + len;
        n += 1;
    }
    n
}

/// What two dumps of the same accesses with the same configuration share.
fn assert_same_counts(ours: &Dump, theirs: &Dump, what: &str) {
    assert_eq!(ours.meta.instructions, theirs.meta.instructions, "{what}");
    assert_eq!(ours.stacks, theirs.stacks, "{what}: stack tree");
    assert_eq!(ours.threads, theirs.threads, "{what}: threads");
    assert_eq!(ours.records.len(), theirs.records.len(), "{what}: records");
    for (a, b) in ours.records.iter().zip(&theirs.records) {
        assert_eq!(a, b, "{what}: record of ip {:#x} stack {}", b.ip, b.stack);
    }
    assert_eq!(ours.totals(), theirs.totals(), "{what}: totals");
}

/// A trace written in hundreds of chunks (`--reserve trace=64`: a chunk
/// buffer with room for 64 records at their largest) re-simulates into
/// the capture's own dump, record for record, in trap and fast modes; the
/// `.zst` form (fast mode, jaguar) carries the skeleton right after the
/// header, so a stream reader has it before the first record.
#[test]
fn a_trace_of_many_chunks_resimulates_into_the_capture() {
    if !gcc_and_setarch_or_skip("a_trace_of_many_chunks_resimulates_into_the_capture") {
        return;
    }
    let dir = scratch("chunks");
    let bin = programs::compile(
        "examples/programs/pushbuffer.c",
        &dir.join("pushbuffer"),
        &["-O1", "-g", "-fno-pie", "-no-pie"],
        false,
    );
    let bin = bin.to_str().unwrap();
    for (mode, cache, name) in [
        ("trap", "cachegrind", "trap.cctrace"),
        ("fast", "jaguar", "fast.cctrace.zst"),
    ] {
        let dump = dir.join(format!("{mode}.ccdump"));
        let trace = dir.join(name);
        ok(
            record(
                &dir,
                mode,
                &[
                    "--cache",
                    cache,
                    "--function",
                    "run_frames",
                    "--reserve",
                    "trace=64",
                    "-o",
                    dump.to_str().unwrap(),
                    "--trace",
                    trace.to_str().unwrap(),
                ],
                &[bin],
            ),
            mode,
        );
        let cap = load(&dump);
        assert!(cap.meta.instructions > 50_000, "{}", cap.meta.instructions);
        assert_eq!(cap.meta.cut_short, None, "{mode}");
        let mut partial = trace.clone().into_os_string();
        partial.push(".partial");
        assert!(!Path::new(&partial).exists(), "the .partial was renamed");
        if mode == "trap" {
            let n = chunks(&trace);
            assert!(n > 100, "{mode}: {n} chunks");
        } else {
            // Compressed: the skeleton is met before the first record.
            let mut r = coldcache_trace::TraceReader::from_reader(
                name.into(),
                std::fs::File::open(&trace).unwrap(),
                None,
            )
            .unwrap();
            assert_eq!(r.compression(), Some("zstd"));
            let mut batch = Vec::new();
            assert!(r.read_batch(&mut batch, 1).unwrap() == 1);
            let sk = r.attachment(coldcache_trace::ATTACH_DUMP_SKELETON);
            let sk = Dump::from_bytes(sk.expect("skeleton before the records")).unwrap();
            assert_eq!(sk.stacks, cap.stacks);
        }
        let out = dir.join(format!("{mode}.resim.ccdump"));
        let o = sim(&["--cache", cache, "-o", out.to_str().unwrap()], &trace);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_same_counts(&load(&out), &cap, mode);
    }
}

/// A program that kills itself halfway through a capture leaves its trace
/// as `TRACE.partial` (never under the asked name); `coldcache sim` reads
/// it up to its cut and names the offset, the file's length, where the
/// last whole chunk ends; `sim -o` makes a dump of it without the
/// capture's modules and call stacks (the skeleton is written at the end).
#[test]
fn a_killed_capture_leaves_a_partial_trace_that_simulates_up_to_its_cut() {
    if !gcc_and_setarch_or_skip(
        "a_killed_capture_leaves_a_partial_trace_that_simulates_up_to_its_cut",
    ) {
        return;
    }
    let dir = scratch("killed");
    let bin = stream_program(&dir);
    let trace = dir.join("k.cctrace");
    let out = run_with_deadline(
        record(
            &dir,
            "fast",
            &["--all", "--trace", "k.cctrace", "-o", "k.ccdump"],
            &[bin.to_str().unwrap(), "100", "kill"],
        ),
        "record of a program that kills itself",
    );
    assert!(!out.status.success());
    let partial = dir.join("k.cctrace.partial");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("its trace is left as {}", partial.display())),
        "{said}"
    );
    assert!(!trace.exists(), "no trace under the asked name");
    let len = std::fs::metadata(&partial).expect("the .partial").len();
    assert!(len > 1 << 20, "{len} bytes");
    let o = sim(&["--cache", "cachegrind", "--json"], &partial);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("file ends at byte {len}")) && err.contains("did not finish"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let records = v["records"].as_u64().unwrap_or(0);
    assert!(records > 1_000_000, "{v}");
    // With -o (issue 33; refused before, for want of the skeleton): a
    // dump of what was captured, up to the cut, saying what it lacks.
    // Its instructions are the partial's instruction records, counted
    // here by the trace reader, and its accesses those `sim` counted.
    let x = dir.join("x.ccdump");
    let o = sim(
        &["--cache", "cachegrind", "-o", x.to_str().unwrap()],
        &partial,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("did not finish"), "{err}");
    let d = load(&x);
    let mut reader = coldcache_trace::open(&partial, None).unwrap();
    let _cut = reader.accept_cut();
    let instrs = reader
        .map(|r| r.unwrap())
        .filter(|r| r.kind == coldcache_trace::RecordKind::Instr)
        .count() as u64;
    assert_eq!(d.meta.instructions, instrs);
    let total: u64 = d.records.iter().map(|r| r.counters[0]).sum();
    assert_eq!(total, instrs);
    assert_eq!(d.stacks.len(), 1, "no stack tree: every access on the root");
    assert!(
        d.meta
            .cut_short
            .as_deref()
            .is_some_and(|c| c.contains("file ends at byte")),
        "{:?}",
        d.meta.cut_short
    );
    assert!(
        d.meta
            .notes
            .iter()
            .any(|n| n.contains("no dump skeleton") && n.contains("no modules")),
        "{:?}",
        d.meta.notes
    );
    assert_eq!(v["cachegrind"]["Ir"].as_u64(), Some(instrs), "{v}");
    // A cut trace under another name is still an error naming the offset.
    let other = dir.join("cut.cctrace");
    std::fs::copy(&partial, &other).unwrap();
    let o = sim(&["--cache", "cachegrind"], &other);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("file ends at byte {len}")),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The program's stdout without coldcache.
fn native(bin: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new(bin).args(args).output().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// The file size limit (`ulimit -f`, 8 MiB) reached by a trace of about
/// 36 MB: the capture stops with the reason in the dump, the program runs
/// on and prints what it prints without coldcache, the trace is whole
/// (under the limit, with its skeleton) and re-simulates.
#[test]
fn the_file_size_limit_stops_the_capture_cleanly() {
    if !gcc_and_setarch_or_skip("the_file_size_limit_stops_the_capture_cleanly") {
        return;
    }
    let dir = scratch("fsize");
    let bin = stream_program(&dir);
    let limit: u64 = 8 << 20;
    let mut cmd = record(
        &dir,
        "fast",
        &["--all", "--trace", "f.cctrace", "-o", "f.ccdump"],
        &[bin.to_str().unwrap(), "100"],
    );
    use std::os::unix::process::CommandExt;
    // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = lost_trace(cmd, "record under a file size limit", "ulimit -f");
    assert_eq!(out.stdout, native(&bin, &["100"]), "the program's output");
    let d = load(&dir.join("f.ccdump"));
    assert_eq!(
        d.meta.cut_short.as_deref(),
        Some("the trace reached the file size limit (ulimit -f)")
    );
    let trace = dir.join("f.cctrace");
    let len = std::fs::metadata(&trace).unwrap().len();
    // Chunks of up to 2.3 MB (the default buffer), 1 MiB kept for the end.
    assert!(len <= limit && len > limit / 2, "{len}");
    let re = dir.join("re.ccdump");
    let o = sim(
        &["--cache", "cachegrind", "-o", re.to_str().unwrap()],
        &trace,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let re = load(&re);
    // The trace ends at its last whole chunk: at most a chunk short.
    assert!(re.meta.instructions <= d.meta.instructions);
    assert!(re.meta.instructions > d.meta.instructions / 2);
}

/// A full file system (a 6 MiB tmpfs; skipped when this process cannot
/// mount one): the write that fails with ENOSPC is undone and stops the
/// capture with its reason; the program's output is unchanged and the
/// trace written so far reads (completed when its end fits, else as
/// `.partial` up to its cut).
#[test]
fn a_full_disk_stops_the_capture_cleanly() {
    if !gcc_and_setarch_or_skip("a_full_disk_stops_the_capture_cleanly") {
        return;
    }
    let dir = scratch("enospc");
    let bin = stream_program(&dir);
    let mnt = dir.join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=6m", "tmpfs"])
        .arg(&mnt)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIP a_full_disk_stops_the_capture_cleanly: cannot mount a tmpfs");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(mnt.clone());
    let trace = mnt.join("d.cctrace");
    let out = lost_trace(
        record(
            &dir,
            "fast",
            &[
                "--all",
                "--trace",
                trace.to_str().unwrap(),
                "-o",
                "d.ccdump",
            ],
            &[bin.to_str().unwrap(), "100"],
        ),
        "record onto a full disk",
        "ENOSPC",
    );
    assert_eq!(out.stdout, native(&bin, &["100"]), "the program's output");
    let d = load(&dir.join("d.ccdump"));
    assert_eq!(
        d.meta.cut_short.as_deref(),
        Some("the trace's file system is full (ENOSPC)")
    );
    let read = if trace.exists() {
        trace
    } else {
        mnt.join("d.cctrace.partial")
    };
    let o = sim(&["--cache", "cachegrind", "--json"], &read);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["records"].as_u64().unwrap_or(0) > 1_000_000, "{v}");
}

/// Peak resident memory of the program (`VmHWM`, KiB, printed on stderr).
fn peak_kib(out: &Output) -> u64 {
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .find_map(|l| l.strip_prefix("VmHWM "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {err}"))
}

/// A capture with a trace of about fifteen million records (36 MB on
/// disk; 600 MB as records in memory) peaks at a few MiB more than the
/// same capture without a trace: the chunk buffer, not the trace.
#[test]
fn a_trace_far_larger_than_its_buffer_keeps_memory_bounded() {
    if !gcc_and_setarch_or_skip("a_trace_far_larger_than_its_buffer_keeps_memory_bounded") {
        return;
    }
    let dir = scratch("memory");
    let bin = stream_program(&dir);
    let bin = bin.to_str().unwrap();
    let without = ok(
        record(&dir, "fast", &["--all", "-o", "n.ccdump"], &[bin, "100"]),
        "record without a trace",
    );
    let with = ok(
        record(
            &dir,
            "fast",
            &["--all", "-o", "t.ccdump", "--trace", "t.cctrace"],
            &[bin, "100"],
        ),
        "record with a trace",
    );
    let len = std::fs::metadata(dir.join("t.cctrace")).unwrap().len();
    assert!(len > 30 << 20, "{len} bytes of trace");
    let d = load(&dir.join("t.ccdump"));
    assert!(d.meta.instructions > 10_000_000);
    let (a, b) = (peak_kib(&without), peak_kib(&with));
    // The default chunk buffer: room for 65,536 records of 36 bytes.
    assert!(
        b < a + 8 * 1024,
        "peak {b} KiB with the trace, {a} KiB without"
    );
    let _ = repo();
}
