//! `coldcache trigger PID` and the signals of a capture: signal names
//! and numbers as `kill -l` spells them ([`trigger_signal`],
//! [`signal_name`]), the check that a process runs coldcache and catches
//! the signal, and [`queue`], which carries a request (start, stop) to the
//! library with `sigqueue`'s value. `record` and `attach` send their
//! requests through it.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::Path;

/// `sigqueue(pid, sig, value)`; 0 on success. Async-signal-safe.
pub(crate) fn queue(pid: i32, sig: i32, value: usize) -> i32 {
    // SAFETY: sigqueue(3) with a positive pid, a valid signal and a value
    // carried as a pointer-sized integer, never dereferenced.
    unsafe {
        libc::sigqueue(
            pid,
            sig,
            libc::sigval {
                sival_ptr: value as *mut libc::c_void,
            },
        )
    }
}

/// Arguments of `coldcache trigger`.
#[derive(Args, Debug)]
pub struct TriggerArgs {
    /// Process recorded with `coldcache record`: with `--signal` the
    /// trigger opens and closes a capture window; with `--function`,
    /// `--all` or the C API it stops the capture and its dump is written
    /// (a process without libcoldcache, or not catching the signal, is
    /// refused).
    pid: i32,
    /// The signal to send (must match `record --trigger-signal`): a name
    /// or a number.
    #[arg(long, default_value = "USR2")]
    signal: String,
}

/// The classic signals by name, as `kill -l` spells them.
const SIGNAL_NAMES: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// The name of signal `sig` (`SIGUSR2`, `SIGRTMIN+3`).
pub(crate) fn signal_name(sig: i32) -> String {
    match SIGNAL_NAMES.iter().find(|&&(_, n)| n == sig) {
        Some((name, _)) => format!("SIG{name}"),
        None if sig >= libc::SIGRTMIN() => format!("SIGRTMIN+{}", sig - libc::SIGRTMIN()),
        None => format!("signal {sig}"),
    }
}

/// Parses a trigger signal given by name (with or without `SIG`, any case;
/// `RTMIN+N`, `RTMAX-N`) or number, and refuses the signals a trigger must
/// not be: those that cannot be caught (KILL, STOP), the capture engine's
/// own (TRAP, RTMIN+6), and those that report the program's own faults
/// (SEGV, BUS, FPE, ILL, ABRT, SYS), whose handler would turn a crash into
/// a capture.
pub fn trigger_signal(text: &str) -> Result<i32> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    let sig = if let Ok(n) = t.parse::<i32>() {
        n
    } else if let Some(&(_, n)) = SIGNAL_NAMES.iter().find(|&&(s, _)| s == name) {
        n
    } else if let Some(k) = name.strip_prefix("RTMIN") {
        let off = if k.is_empty() {
            0
        } else {
            k.strip_prefix('+')
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("{t:?}: expected RTMIN+N"))?
        };
        min + off
    } else if let Some(k) = name.strip_prefix("RTMAX") {
        let off = if k.is_empty() {
            0
        } else {
            k.strip_prefix('-')
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("{t:?}: expected RTMAX-N"))?
        };
        max - off
    } else {
        bail!("{t:?} is not a signal name or number (for example USR2, SIGUSR1, RTMIN+3, 12)");
    };
    if sig <= 0 || sig > max {
        bail!("{t:?}: signals are numbered 1 to {max}");
    }
    let why = match sig {
        libc::SIGKILL | libc::SIGSTOP => Some("it cannot be caught"),
        libc::SIGTRAP => Some("the capture engine single-steps with it"),
        libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL | libc::SIGABRT | libc::SIGSYS => {
            Some("it reports the program's own faults, which would then start a capture instead of ending the program")
        }
        s if s == min + 6 => Some("the capture engine uses it to start tracing other threads"),
        s if s > libc::SIGSYS && s < min => Some("glibc reserves it for its threads"),
        _ => None,
    };
    if let Some(why) = why {
        bail!("{} ({sig}) cannot be the trigger: {why}; SIGUSR2 (the default) or SIGUSR1 are the usual choices", signal_name(sig));
    }
    Ok(sig)
}

/// Refuses to signal a process that would not take the signal as a
/// trigger (whose default action, for USR1/USR2, ends it): one without
/// `libcoldcache` mapped (`/proc/PID/maps`), or one that does not catch
/// `sig` (`SigCgt` in `/proc/PID/status`: recorded with another
/// `--trigger-signal`, or running no capture of its own). `proc` is `/proc` (a directory of
/// the same layout in tests).
pub(crate) fn check_trigger_target(pid: i32, sig: i32, proc: &Path) -> Result<()> {
    let dir = proc.join(pid.to_string());
    let maps = match std::fs::read_to_string(dir.join("maps")) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("there is no process {pid}")
        }
        Err(e) => {
            return Err(e).with_context(|| {
                format!("cannot tell whether process {pid} runs coldcache (reading its maps)")
            })
        }
    };
    let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
    let who = format!("process {pid} ({})", comm.trim());
    let has_library = maps.lines().any(|l| {
        let path = l.split_whitespace().skip(5).collect::<Vec<_>>().join(" ");
        Path::new(&path)
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libcoldcache"))
    });
    if !has_library {
        bail!(
            "{who} is not running coldcache (no libcoldcache.so in its memory map), \
             so {} would not start a capture{}; run it with `coldcache record --signal`",
            signal_name(sig),
            if sig == libc::SIGUSR1 || sig == libc::SIGUSR2 {
                " and would most likely end it"
            } else {
                ""
            }
        );
    }
    let status = std::fs::read_to_string(dir.join("status"))
        .with_context(|| format!("reading the status of process {pid}"))?;
    let caught = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|mask| (1..=64).contains(&sig) && mask & (1u64 << (sig - 1)) != 0);
    if !caught {
        bail!(
            "{who} runs coldcache but does not catch {}: it was recorded with another \
             --trigger-signal, or runs no capture, and the signal could end it",
            signal_name(sig)
        );
    }
    Ok(())
}

pub fn trigger(args: TriggerArgs) -> Result<()> {
    if args.pid <= 0 {
        bail!("pid {} is not a process id", args.pid);
    }
    let sig = trigger_signal(&args.signal).context("--signal")?;
    check_trigger_target(args.pid, sig, Path::new("/proc"))?;
    // Queued with a value, so the library tells a trigger from a plain
    // `kill` (a SIGUSR2 its fatal-signal handler catches stops the capture
    // instead of ending the program).
    if queue(args.pid, sig, coldcache_capture::doorbell::REQUEST_TRIGGER) != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("signalling process {}", args.pid));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names and numbers as `kill -l` spells them; the refused ones named.
    #[test]
    fn trigger_signals_by_name_and_number() {
        assert_eq!(trigger_signal("USR2").unwrap(), 12);
        assert_eq!(trigger_signal("sigusr1").unwrap(), 10);
        assert_eq!(trigger_signal("12").unwrap(), 12);
        assert_eq!(trigger_signal("RTMIN+3").unwrap(), libc::SIGRTMIN() + 3);
        assert_eq!(trigger_signal("SIGRTMAX-1").unwrap(), libc::SIGRTMAX() - 1);
        for (bad, says) in [
            ("0", "numbered 1 to"),
            ("99", "numbered 1 to"),
            ("9", "SIGKILL (9) cannot be the trigger"),
            ("11", "SIGSEGV (11) cannot be the trigger"),
            ("SEGV", "the program's own faults"),
            ("TRAP", "single-steps"),
            ("RTMIN+6", "start tracing other threads"),
            ("USR3", "not a signal name"),
        ] {
            let e = format!("{:#}", trigger_signal(bad).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// A fake `/proc`: the library mapped or not, the signal caught or not.
    #[test]
    fn trigger_targets_must_run_coldcache_and_catch_the_signal() {
        let proc = tempfile::tempdir().unwrap();
        let dir = proc.path().join("42");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("comm"), "prog\n").unwrap();
        let lib = "7f0000000000-7f0000001000 r-xp 00000000 08:01 1234 /opt/cc/libcoldcache.so\n";
        let plain = "55d000000000-55d000001000 r-xp 00000000 08:01 99 /usr/bin/prog\n";
        // SIGUSR2 is 12: bit 11 of SigCgt.
        let caught = "Name:\tprog\nSigCgt:\t0000000000000800\n";
        let not_caught = "Name:\tprog\nSigCgt:\t0000000000004000\n";
        let check = |maps: &str, status: &str| {
            std::fs::write(dir.join("maps"), maps).unwrap();
            std::fs::write(dir.join("status"), status).unwrap();
            check_trigger_target(42, libc::SIGUSR2, proc.path()).map_err(|e| format!("{e:#}"))
        };
        check(&format!("{plain}{lib}"), caught).unwrap();
        let e = check(plain, caught).unwrap_err();
        assert!(
            e.contains("process 42 (prog) is not running coldcache"),
            "{e}"
        );
        assert!(e.contains("would most likely end it"), "{e}");
        let e = check(&format!("{plain}{lib}"), not_caught).unwrap_err();
        assert!(e.contains("does not catch SIGUSR2"), "{e}");
        let e = check_trigger_target(43, libc::SIGUSR2, proc.path()).unwrap_err();
        assert_eq!(e.to_string(), "there is no process 43");
    }
}
