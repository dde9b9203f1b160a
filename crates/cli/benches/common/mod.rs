//! What the capture benches share: the repository and `libcoldcache.so`
//! next to the `coldcache` binary they measure.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Cachegrind's options for the geometry of our `cachegrind` preset (its
/// defaults before it reads the host's caches): given to Cachegrind in
/// every comparison, so both simulate the same caches. Left to itself,
/// Cachegrind takes the host's (on a Xeon with a 480 MiB L3, a 480 MiB
/// last level and a 48 KiB first level), which makes a ratio depend on
/// the machine it was measured on.
#[allow(dead_code)] // not every bench compares with Cachegrind
pub const CACHEGRIND_GEOMETRY: [&str; 3] =
    ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64"];

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds `libcoldcache.so` beside `coldcache` (the binary at
/// `coldcache`) and returns its directory. Always asked (a no-op when up
/// to date): a library left from an older checkout would otherwise be
/// measured instead of this one.
pub fn library_dir(coldcache: &str) -> PathBuf {
    let lib_dir = Path::new(coldcache).parent().unwrap().to_path_buf();
    let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "-p", "libcoldcache"])
        .current_dir(repo())
        .status()
        .expect("cargo build -p libcoldcache");
    assert!(st.success());
    lib_dir
}

/// Builds the C program `tests-programs/capture/NAME.c` into `dir/NAME`,
/// linked with `libcoldcache.so` from `lib_dir` (for the C API).
pub fn build_with_library(name: &str, dir: &Path, lib_dir: &Path) -> PathBuf {
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-I"])
        .arg(repo().join("include"))
        .arg(repo().join(format!("tests-programs/capture/{name}.c")))
        .arg("-L")
        .arg(lib_dir)
        .args(["-Wl,--no-as-needed", "-lcoldcache"])
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run gcc");
    assert!(st.success(), "building {name}.c failed");
    out
}
