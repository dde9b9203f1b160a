//! Hostile inputs (issue 33, "Input"): a file is refused by name, quickly
//! and in bounded memory, never by an abort or by reading without end.
//!
//! - A cctrace whose records name an absurd thread index (`0xffffffff`,
//!   which sized per-thread tables: `sim -o` aborted on a 64 GiB
//!   allocation).
//! - Files that are not dumps or zones recordings, above all ones whose
//!   size `stat` does not tell (`/proc/self/pagemap`: size 0, reads 16 GiB
//!   and more): every command that opens a dump reads the magic first and
//!   never more than the header announces.
//!
//! Every command runs under a deadline and a memory limit (`ulimit -v`),
//! so a hang or a huge allocation fails the test instead of the machine.

#[path = "../../trace/tests/common/mutate.rs"]
mod fuzz;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use library::COLDCACHE;
use programs::{run_within, scratch_in};

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `coldcache ARGS` under a 2 GiB address-space limit and a 20 s deadline.
fn coldcache(dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new("sh");
    c.current_dir(dir)
        .arg("-c")
        .arg("ulimit -v 2097152; exec \"$0\" \"$@\"")
        .arg(COLDCACHE)
        .args(args);
    run_within(c, &args.join(" "), Duration::from_secs(20))
}

#[test]
fn an_absurd_thread_index_in_a_cctrace_is_refused_by_name() {
    use coldcache_trace::{Record, RecordKind, TraceWriter};
    let dir = scratch_in("hostile-input", "threads");
    let path = dir.join("t.cctrace");
    let mut w = TraceWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    w.define_thread(u32::MAX, 100).unwrap();
    w.write(&Record::new(RecordKind::Instr, 0x401000, 4).with_thread(u32::MAX))
        .unwrap();
    w.write(&Record::new(RecordKind::Load, 0x1000, 8).with_thread(u32::MAX))
        .unwrap();
    w.finish().unwrap();
    let r = coldcache(
        &dir,
        &[
            "sim",
            "--no-resolve",
            "--no-progress",
            "t.cctrace",
            "--cache",
            "cachegrind",
            "-o",
            "out.ccdump",
        ],
    );
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("t.cctrace") && err.contains("thread"), "{err}");
    assert!(!dir.join("out.ccdump").exists());
}

/// `/proc/self/pagemap` is a regular file for `stat` (size 0) that reads
/// 16 GiB and more: every command that opens a dump or a zones recording
/// refuses it by name after its first bytes, within the deadline and the
/// memory limit (it took 45 s and 16.8 GB before). So does a large file
/// of zeros, and a dump's first bytes followed by a section announcing
/// more than the limit is refused before it is read.
#[test]
fn a_file_that_is_not_a_dump_is_refused_by_its_first_bytes() {
    let dir = scratch_in("hostile-input", "pagemap");
    let dump = library::repo().join("crates/dump/tests/data/v2-resolved-real.ccdump");
    let dump = dump.to_str().unwrap();
    let pagemap = "/proc/self/pagemap";
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let cases: [&[&str]; 7] = [
        &["report", pagemap],
        &["diff", pagemap, dump],
        &["diff", dump, pagemap],
        &["export", "--format", "callgrind", pagemap, "-o", out],
        &["resolve", pagemap, "-o", out],
        &["ui", pagemap, "--port", "0"],
        &["zones", pagemap],
    ];
    for args in cases {
        let t = std::time::Instant::now();
        let r = coldcache(&dir, args);
        let err = text(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(pagemap) && err.contains("first bytes"),
            "{args:?}: {err}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{args:?} took {:?}",
            t.elapsed()
        );
    }
    assert!(!Path::new(out).exists());
}

/// A dump's header followed by a section header announcing 1 EiB: refused
/// as too large before anything of it is read or allocated.
#[test]
fn a_section_announcing_more_than_the_limit_is_refused_before_it_is_read() {
    let dir = scratch_in("hostile-input", "section");
    let mut b = coldcache_dump::MAGIC.to_vec();
    b.extend_from_slice(&4u32.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(b"META");
    b.extend_from_slice(&(1u64 << 60).to_le_bytes());
    b.extend_from_slice(&[b'{'; 64]);
    let p = dir.join("huge.ccdump");
    std::fs::write(&p, &b).unwrap();
    let r = coldcache(&dir, &["report", "huge.ccdump"]);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("huge.ccdump") && err.contains("larger than"),
        "{err}"
    );
    // The same bytes cut short are a truncated dump, said so.
    let mut short = b.clone();
    short[20..28].copy_from_slice(&1000u64.to_le_bytes());
    std::fs::write(&p, &short).unwrap();
    let r = coldcache(&dir, &["report", "huge.ccdump"]);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("truncated"), "{err}");
}

/// Damaged dumps and zones recordings as a user meets them (issue 33): a
/// few dozen fixed-seed mutations (`fuzz::mutate`) of a real resolved dump
/// and of the zones samples, each given to `coldcache report` or
/// `coldcache zones` under the deadline and the memory limit: each is
/// shown (status 0) or refused with status 2 and an error naming the file,
/// never a panic (101), an abort or a signal. The readers themselves take
/// far more mutations in `crates/dump/tests/mutate.rs` and
/// `crates/zones/tests/fuzz.rs`; this checks the names the commands add.
#[test]
fn damaged_dumps_and_zones_files_are_refused_by_name() {
    let dir = scratch_in("hostile-input", "damaged");
    let repo = library::repo();
    let dump = std::fs::read(repo.join("crates/dump/tests/data/v2-resolved-real.ccdump")).unwrap();
    let zones = std::fs::read(repo.join("crates/zones/tests/data/sample-v2.zones")).unwrap();
    let mut rng = fuzz::Rng(0x0033_d0d0);
    let n = fuzz::iterations(100).min(1000);
    let (mut shown, mut refused) = (0, 0);
    for i in 0..2 * n {
        let (name, args, base, other) = if i % 2 == 0 {
            ("d.ccdump", vec!["report", "d.ccdump"], &dump, &zones)
        } else {
            (
                "z.zones",
                vec!["zones", "z.zones", "--no-symbols"],
                &zones,
                &dump,
            )
        };
        let mut v = base.clone();
        fuzz::mutate(&mut rng, &mut v, other);
        std::fs::write(dir.join(name), &v).unwrap();
        let r = coldcache(&dir, &args);
        let err = text(&r.stderr);
        match r.status.code() {
            Some(0) => shown += 1,
            Some(2) => {
                assert!(err.contains(name), "mutation {i}: {err}");
                refused += 1;
            }
            c => panic!("mutation {i} of {name}: exit {c:?}: {err}"),
        }
    }
    eprintln!("damaged inputs: {shown} shown, {refused} refused by name");
    assert!(refused > 0);
}
