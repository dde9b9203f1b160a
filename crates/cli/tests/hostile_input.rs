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
