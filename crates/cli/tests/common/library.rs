//! `libcoldcache.so` for the tests that preload it: the one next to the
//! `coldcache` binary under test, brought up to date first (`cargo test`
//! does not build cdylib-only packages: a library left there by an earlier
//! `cargo build` was used as it was, older than the code under test).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `coldcache` binary under test.
pub const COLDCACHE: &str = env!("CARGO_BIN_EXE_coldcache");

/// The repository's root, canonical (tests compare paths a dump records).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `libcoldcache.so` next to the `coldcache` binary, built once per test
/// process (cargo does nothing when it is up to date).
pub fn library() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = Path::new(COLDCACHE).parent().unwrap().to_path_buf();
        let lib = dir.join("libcoldcache.so");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let target_dir = dir.parent().unwrap();
        let profile = dir.file_name().unwrap().to_str().unwrap();
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "libcoldcache", "--target-dir"])
            .arg(target_dir)
            .current_dir(repo());
        if profile == "release" {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("run cargo build -p libcoldcache");
        assert!(st.success(), "building libcoldcache failed");
        assert!(lib.exists(), "{} missing", lib.display());
        lib
    })
    .clone()
}

/// Whether `tool --version` runs.
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}
