//! The command-line tool's integration tests: one test binary, one module
//! per file (`cargo test -p coldcache-cli --test suite -- fast::` runs one
//! file's tests). One binary instead of one per file: the shared helpers
//! and the link are built once, and libtest spreads every test over the
//! cores instead of waiting for each file's slowest test (CI's time).
//! The helpers under `common/` (and two of other crates' tests) are
//! modules of this crate, used by the files as `crate::NAME`. A new file
//! under `tests/` is added below as a module (the test at the end fails
//! until it is).

#[path = "common/callgrind_totals.rs"]
mod callgrind_totals;
#[path = "../../analysis/tests/common/data_dump.rs"]
mod data_dump;
#[path = "common/dumps.rs"]
mod dumps;
#[path = "../../trace/tests/common/mutate.rs"]
mod fuzz;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;

mod abnormal;
mod analysis;
mod attach;
mod band;
mod cachelab;
mod capture;
mod cli;
mod cpython;
mod data_objects;
mod data_view;
mod data_views;
mod export;
mod fast;
mod files;
mod grow;
mod hostile;
mod hostile_input;
mod interleave;
mod names;
mod oracle;
mod planted;
mod probe;
mod resim;
mod resolve;
mod rust_program;
mod timeline;
mod trace_stream;
mod valgrind;
mod windows;
mod workflow;
mod zones;

/// The fence of `autotests = false`: a file under `tests/` that is not a
/// module above would never be compiled, its tests silently never run.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = include_str!("main.rs");
    let mut missing = Vec::new();
    for e in std::fs::read_dir(&here).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        if stem != "main" && !main.lines().any(|l| l == format!("mod {stem};")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "not modules of tests/main.rs: {missing:?}"
    );
}
