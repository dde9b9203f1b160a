//! Files written as root in shared directories (issue 33): a symbolic
//! link another user planted in a sticky, world-writable directory at the
//! name coldcache is about to write is never followed (the kernel's
//! `fs.protected_symlinks` rule): the command fails naming the path, and
//! the file the link points at is unchanged. The preloaded library ignores
//! every `COLDCACHE_*` setting in a set-user-ID program, and a dump that
//! cannot be written where asked is kept under an unguessable name.
//!
//! The tests run as root (as the issue's users do); "another user" is
//! `nobody` (uid 65534), who owns the planted links (`lchown`). Each case
//! is skipped with a message when not root.

#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use library::{library, COLDCACHE};
use programs::{compile, gcc_or_skip, run_with_deadline, scratch_in};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const NOBODY: u32 = 65534;

fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("SKIP {test}: needs root (to give a link to another user)");
    }
    root
}

/// A scratch directory holding `shared/` (mode 1777, like `/tmp`) and a
/// victim file outside it, owned by the test, holding `precious`.
struct Setup {
    dir: PathBuf,
    shared: PathBuf,
    victim: PathBuf,
}

fn setup(name: &str) -> Setup {
    let dir = scratch_in("planted", name);
    let shared = dir.join("shared");
    let _ = std::fs::remove_dir_all(&shared);
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    Setup {
        dir,
        shared,
        victim,
    }
}

/// A symbolic link at `at` to `to`, owned by `nobody`.
fn plant(at: &Path, to: &Path) {
    std::os::unix::fs::symlink(to, at).unwrap();
    let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::lchown(c.as_ptr(), NOBODY, NOBODY) }, 0);
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The victim still holds `precious` and nothing was made beside it.
fn assert_untouched(s: &Setup) {
    assert_eq!(std::fs::read(&s.victim).unwrap(), b"precious");
    let mut old = s.victim.clone().into_os_string();
    old.push(".old");
    assert!(!Path::new(&old).exists(), "{old:?} was made");
}

fn sample_dump() -> PathBuf {
    library::repo().join("crates/dump/tests/data/v2-resolved-real.ccdump")
}

#[test]
fn export_refuses_a_link_planted_by_another_user() {
    if !root_or_skip("export_refuses_a_link_planted_by_another_user") {
        return;
    }
    let s = setup("export");
    let out = s.shared.join("report.json");
    plant(&out, &s.victim);
    let mut c = Command::new(COLDCACHE);
    c.args(["export", "--format", "callgrind"])
        .arg(sample_dump())
        .arg("-o")
        .arg(&out);
    let r = run_with_deadline(c, "export");
    let err = text(&r.stderr);
    assert!(!r.status.success(), "export succeeded: {err}");
    assert!(
        err.contains(&out.display().to_string()) && err.contains("protected_symlinks"),
        "{err}"
    );
    assert_untouched(&s);

    // A link of the caller's own in the same directory is followed.
    let mine = s.shared.join("mine.json");
    let target = s.dir.join("mine-target.json");
    std::os::unix::fs::symlink(&target, &mine).unwrap();
    std::fs::write(&target, b"").unwrap();
    let mut c = Command::new(COLDCACHE);
    c.args(["export", "--format", "callgrind"])
        .arg(sample_dump())
        .arg("-o")
        .arg(&mine);
    let r = run_with_deadline(c, "export through one's own link");
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert!(std::fs::metadata(&target).unwrap().len() > 0);
}

/// `record` with the default output name, run in the shared directory
/// where `coldcache.ccdump` is a planted link: neither the victim nor a
/// `victim.old` beside it is written, and the error names the path.
#[test]
fn record_refuses_a_planted_default_dump_name() {
    if !root_or_skip("record_refuses_a_planted_default_dump_name")
        || !gcc_or_skip("record_refuses_a_planted_default_dump_name")
    {
        return;
    }
    let s = setup("record");
    let prog = compile(
        "tests-programs/capture/shared.c",
        &s.dir.join("prog"),
        &["-O1", "-g"],
        false,
    );
    let dump = s.shared.join("coldcache.ccdump");
    plant(&dump, &s.victim);
    let tmp = s.dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = Command::new(COLDCACHE);
    c.env("COLDCACHE_LIB", library())
        .current_dir(&s.shared)
        .env("TMPDIR", &tmp)
        .arg("record")
        .arg("--all")
        .arg("--")
        .arg(&prog);
    let r = run_with_deadline(c, "record");
    let err = text(&r.stderr);
    assert!(!r.status.success(), "record succeeded: {err}");
    assert!(
        err.contains(&dump.display().to_string()) && err.contains("protected_symlinks"),
        "{err}"
    );
    assert_untouched(&s);
}

/// The library's own check (the dump written by a program that links it,
/// with no `record` to check `-o` first): the C API's default output,
/// `coldcache.ccdump` in the working directory, planted; the capture is
/// kept elsewhere with the reason, the victim and a `victim.old` beside it
/// untouched.
#[test]
fn the_library_refuses_a_planted_dump_name() {
    let test = "the_library_refuses_a_planted_dump_name";
    if !root_or_skip(test) || !gcc_or_skip(test) {
        return;
    }
    let s = setup("library");
    let prog = compile(
        "tests-programs/capture/shared.c",
        &s.dir.join("shared-api"),
        &["-O1"],
        true,
    );
    let dump = s.shared.join("coldcache.ccdump");
    plant(&dump, &s.victim);
    let tmp = s.dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = Command::new(&prog);
    c.arg("--capture")
        .current_dir(&s.shared)
        .env("TMPDIR", &tmp);
    let r = run_with_deadline(c, "the program linked with the library");
    let err = text(&r.stderr);
    assert!(text(&r.stdout).starts_with("done "), "{err}");
    assert!(
        err.contains(&dump.display().to_string()) && err.contains("protected_symlinks"),
        "{err}"
    );
    assert_untouched(&s);
}

/// `--trace t.cctrace` where `t.cctrace.partial` is a planted link: the
/// victim is not truncated.
#[test]
fn record_refuses_a_planted_trace_partial() {
    if !root_or_skip("record_refuses_a_planted_trace_partial")
        || !gcc_or_skip("record_refuses_a_planted_trace_partial")
    {
        return;
    }
    let s = setup("partial");
    let prog = compile(
        "tests-programs/capture/shared.c",
        &s.dir.join("prog"),
        &["-O1", "-g"],
        false,
    );
    let partial = s.shared.join("t.cctrace.partial");
    plant(&partial, &s.victim);
    let mut c = Command::new(COLDCACHE);
    c.env("COLDCACHE_LIB", library())
        .current_dir(&s.shared)
        .arg("record")
        .arg("--all")
        .args(["--trace", "t.cctrace", "-o"])
        .arg(s.dir.join("t.ccdump"))
        .arg("--")
        .arg(&prog);
    let r = run_with_deadline(c, "record --trace");
    let err = text(&r.stderr);
    assert!(
        err.contains(&partial.display().to_string()) && err.contains("protected_symlinks"),
        "{err}"
    );
    assert_untouched(&s);
}

/// A dump that cannot be written where asked goes to `$TMPDIR` under a
/// name nobody can guess: dangling links another user left at every
/// `coldcache.PID.ccdump` the program could get do not lose the capture.
#[test]
fn the_fallback_dump_name_cannot_be_taken_in_advance() {
    if !root_or_skip("the_fallback_dump_name_cannot_be_taken_in_advance")
        || !gcc_or_skip("the_fallback_dump_name_cannot_be_taken_in_advance")
    {
        return;
    }
    let s = setup("fallback");
    let prog = compile(
        "tests-programs/capture/shared.c",
        &s.dir.join("prog"),
        &["-O1", "-g"],
        false,
    );
    // The program removes this directory before it exits: the dump
    // cannot be written where asked.
    let gone = s.dir.join("gone");
    std::fs::create_dir_all(&gone).unwrap();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for pid in last..last + 3000 {
        plant(
            &s.shared.join(format!("coldcache.{pid}.ccdump")),
            &s.dir.join("nothing-here"),
        );
    }
    let mut c = Command::new(COLDCACHE);
    c.env("COLDCACHE_LIB", library())
        .env("TMPDIR", &s.shared)
        .arg("record")
        .arg("--all")
        .arg("-o")
        .arg(gone.join("x.ccdump"))
        .arg("--")
        .arg(&prog)
        .arg(&gone);
    let r = run_with_deadline(c, "record to a directory that does not exist");
    let err = text(&r.stderr);
    let kept = err
        .split("kept in ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .map(|p| PathBuf::from(p.trim_end_matches([';', ',', '.', ')'])))
        .unwrap_or_else(|| panic!("no `kept in` in: {err}"));
    assert!(kept.starts_with(&s.shared), "{err}");
    let bytes = std::fs::read(&kept).unwrap_or_else(|e| panic!("{}: {e}: {err}", kept.display()));
    coldcache_dump::Dump::from_bytes(&bytes).expect("the kept dump reads");
}

/// A set-user-ID root program linked with the library, started by
/// `nobody` with `COLDCACHE_PROGRESS_FILE` and `COLDCACHE_ZONES_OUT` naming
/// root-only files: both unchanged, the program's output as without the
/// library's settings, and one line saying the settings are ignored.
#[test]
fn a_set_user_id_program_ignores_coldcache_settings() {
    let test = "a_set_user_id_program_ignores_coldcache_settings";
    if !root_or_skip(test) || !gcc_or_skip(test) {
        return;
    }
    let Some(runner) = ["setpriv", "runuser"]
        .into_iter()
        .find(|t| Command::new(t).arg("--version").output().is_ok())
    else {
        eprintln!("SKIP {test}: neither setpriv nor runuser to run as nobody");
        return;
    };
    // Under /tmp: every directory on the way must be open to nobody.
    let dir = std::env::temp_dir().join(format!("coldcache-planted-suid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let lib = library();
    let reachable = Command::new(runner)
        .args(as_nobody(runner))
        .arg("test")
        .arg("-r")
        .arg(&lib)
        .status()
        .is_ok_and(|s| s.success());
    if !reachable {
        eprintln!(
            "SKIP {test}: nobody cannot read {} (the program links it)",
            lib.display()
        );
        return;
    }
    let prog = compile(
        "tests-programs/capture/shared.c",
        &dir.join("suid"),
        &["-O1"],
        true,
    );
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let secret = dir.join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    let progress = secret.join("progress");
    let zones = secret.join("zones");
    for f in [&progress, &zones] {
        std::fs::write(f, b"precious").unwrap();
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut c = Command::new(runner);
    c.args(as_nobody(runner))
        .arg(&prog)
        .env("COLDCACHE_PROGRESS_FILE", &progress)
        .env("COLDCACHE_ZONES_OUT", &zones);
    let r = run_with_deadline(c, "the set-user-ID program");
    let err = text(&r.stderr);
    assert!(r.status.success(), "{err}");
    let out = text(&r.stdout);
    assert!(out.starts_with("done "), "{out}");
    if !out.trim_end().ends_with("euid 0") {
        // No privilege gained (a nosuid mount, no_new_privs): the case
        // cannot be shown here.
        eprintln!("SKIP {test}: the program did not run set-user-ID here: {out}");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    assert_eq!(std::fs::read(&progress).unwrap(), b"precious", "{err}");
    assert_eq!(std::fs::read(&zones).unwrap(), b"precious", "{err}");
    assert!(
        err.contains("every COLDCACHE_* setting is ignored"),
        "{err}"
    );
    let names: Vec<_> = std::fs::read_dir(&secret)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The arguments that make `runner` run a command as nobody.
fn as_nobody(runner: &str) -> Vec<String> {
    if runner == "setpriv" {
        vec![
            format!("--reuid={NOBODY}"),
            format!("--regid={NOBODY}"),
            "--clear-groups".into(),
        ]
    } else {
        vec!["-u".into(), "nobody".into(), "--".into()]
    }
}
