//! coldcache-inject: loading `libcoldcache.so` into a running process
//! with ptrace, and calling its `coldcache_attach_start` there (what
//! `coldcache attach` does). All of coldcache's ptrace code is here; its
//! tests (`tests/inject.rs`) inject a stand-in library into children of
//! their own.
//!
//! What it changes in the process, in order:
//! - one thread (the main thread, or the first live one) is seized
//!   (`PTRACE_SEIZE`) and interrupted (`PTRACE_INTERRUPT`); the other
//!   threads keep running. A thread stopped in user code inside the C
//!   library or the dynamic loader (where it may hold their locks) is let
//!   go and interrupted again, a bounded number of times;
//! - its general registers, extended state (`NT_X86_XSTATE`: x87, SSE,
//!   AVX), signal mask and `errno` are saved;
//! - on it, remote calls of C library functions run, each on the thread's
//!   own stack below its red zone, 16-byte aligned, returning to address 0
//!   (the SIGSEGV that follows is caught by ptrace and never delivered):
//!   `__errno_location`, `mmap` (one page or more for the strings),
//!   `dlopen` (and `dlerror` if it fails) unless the library is already
//!   loaded, `coldcache_attach_start(settings)`, `munmap`. During the calls
//!   SIGSEGV is unblocked, and `orig_rax` is -1 so the kernel restarts no
//!   system call in between; signals that arrive are delivered;
//! - a thread stopped inside an rseq critical section (its registered
//!   area's `rseq_cs` names a section that holds its IP, read with
//!   `PTRACE_GET_RSEQ_CONFIGURATION`) is moved to the section's abort
//!   address, as the kernel moves a preempted one: the remote calls make
//!   the kernel clear `rseq_cs`, and the section's commit would otherwise
//!   run unguarded after a stop that let other threads run on its CPU;
//! - everything saved is put back, `errno` included, and the thread is
//!   detached. A thread interrupted inside a system call gets its original
//!   `orig_rax`, `rax` (`-ERESTARTSYS`, `-ERESTART_RESTARTBLOCK`, ...) and
//!   `rip` back, so the kernel restarts the call exactly as it does after
//!   any stop (a `nanosleep` sleeps the time left, a `read` still waits).
//!
//! What stays: the library's image and what its constructor and the armed
//! capture set up (signal handlers, a breakpoint, the library's own
//! memory). The stack below the red zone was written to (it is free
//! space by the ABI).

#![warn(missing_docs)]

use anyhow::{anyhow, bail, Context, Result};
use coldcache_fsio::maps::parse_maps;
pub use coldcache_fsio::maps::Mapping;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const NT_X86_XSTATE: libc::c_int = 0x202;
/// CAP_SYS_PTRACE (linux/capability.h).
const CAP_SYS_PTRACE: u32 = 19;
/// Room for the extended state (AVX-512 needs under 3 KiB; AMX 11 KiB).
const XSTATE_MAX: usize = 16 << 10;
/// How long a remote call may take before it is given up.
const CALL_DEADLINE: Duration = Duration::from_secs(30);
/// `PTRACE_GET_RSEQ_CONFIGURATION` (linux/ptrace.h, since 5.13).
const PTRACE_GET_RSEQ_CONFIGURATION: libc::c_uint = 0x420f;
/// How many times a thread stopped inside the C library or the loader is
/// let go and interrupted again before it is used as it is.
const RETRIES: u32 = 200;

/// Why an attach failed: the process ended meanwhile (nothing of ours
/// is left in it).
#[derive(Debug)]
pub struct Exited(pub i32);

impl std::fmt::Display for Exited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "process {} exited during the attach; nothing is left to undo in it",
            self.0
        )
    }
}

impl std::error::Error for Exited {}

/// What `/proc/PID` says about a process we may attach to.
#[derive(Debug)]
pub struct Target {
    /// The process id.
    pub pid: i32,
    /// `comm`, for messages.
    pub name: String,
    /// Its memory map.
    pub maps: Vec<Mapping>,
}

impl Target {
    /// `process 1234 (name)`.
    pub fn who(&self) -> String {
        format!("process {} ({})", self.pid, self.name)
    }
}

fn proc_status_field(pid: i32, field: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field).map(|v| v.trim().to_string()))
}

fn uid_of(pid: i32) -> Option<u32> {
    proc_status_field(pid, "Uid:")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What keeps this user from tracing `pid`, and how to allow it.
pub fn why_not_permitted(pid: i32) -> String {
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    let owner = uid_of(pid);
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let cap = proc_status_field(std::process::id() as i32, "CapEff:")
        .and_then(|h| u64::from_str_radix(&h, 16).ok())
        .is_some_and(|m| m & (1 << CAP_SYS_PTRACE) != 0);
    if let Some(o) = owner.filter(|&o| o != me && me != 0 && !cap) {
        return format!(
            "process {pid} belongs to user {o} and you are user {me}; run `coldcache attach` \
             as that user, or as root"
        );
    }
    match scope {
        Some(1) if !cap => "/proc/sys/kernel/yama/ptrace_scope is 1: only a parent may trace \
                            its children; run as root, or allow it with \
                            `sudo sysctl kernel.yama.ptrace_scope=0`"
            .to_string(),
        Some(2) if !cap => "/proc/sys/kernel/yama/ptrace_scope is 2: only processes with \
                            CAP_SYS_PTRACE may trace; run as root, or allow it with \
                            `sudo sysctl kernel.yama.ptrace_scope=0`"
            .to_string(),
        Some(3) => "/proc/sys/kernel/yama/ptrace_scope is 3: ptrace is disabled until reboot; \
                    set kernel.yama.ptrace_scope=0 or 1 at boot to allow it"
            .to_string(),
        _ if !cap && me == 0 => "this root lacks CAP_SYS_PTRACE (a container drops it): \
                                  start the container with --cap-add=SYS_PTRACE"
            .to_string(),
        _ => "ptrace is not permitted here (a security module such as SELinux or AppArmor, \
              or a container's seccomp profile, forbids it); allow ptrace for coldcache"
            .to_string(),
    }
}

/// Checks everything that can be checked from `/proc` before touching the
/// process, and refuses with the cause and the fix.
pub fn check(pid: i32) -> Result<Target> {
    if pid <= 0 {
        bail!("{pid} is not a process id");
    }
    if pid as u32 == std::process::id() {
        bail!("process {pid} is coldcache itself");
    }
    let dir = PathBuf::from(format!("/proc/{pid}"));
    if !dir.exists() {
        bail!("there is no process {pid}");
    }
    let name = std::fs::read_to_string(dir.join("comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let who = format!("process {pid} ({name})");
    let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.split_whitespace().next())
        .unwrap_or("?");
    // A kernel thread (`PF_KTHREAD` in the flags, the ninth field) runs
    // kernel code only: no executable, no user memory to load a library
    // into.
    const PF_KTHREAD: u64 = 0x0020_0000;
    let flags = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.split_whitespace().nth(6))
        .and_then(|f| f.parse::<u64>().ok())
        .unwrap_or(0);
    if flags & PF_KTHREAD != 0 {
        bail!(
            "{who} is a kernel thread: it runs only kernel code, with no program or user \
             memory, and cannot be attached to"
        );
    }
    match state {
        "Z" | "X" => bail!("{who} has exited (it is a zombie waiting for its parent)"),
        "T" => {
            bail!("{who} is stopped (by SIGSTOP or Ctrl-Z); continue it first (`kill -CONT {pid}`)")
        }
        _ => {}
    }
    if let Some(t) = proc_status_field(pid, "TracerPid:")
        .and_then(|t| t.parse::<i32>().ok())
        .filter(|&t| t != 0)
    {
        let by = std::fs::read_to_string(format!("/proc/{t}/comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        bail!(
            "{who} is already traced by process {t} ({by}), a debugger or tracer; \
             a process has one tracer at a time: detach it first"
        );
    }
    let header = {
        let mut h = [0u8; 20];
        match File::open(dir.join("exe")).and_then(|f| f.read_at(&mut h, 0)) {
            Ok(n) if n >= 20 => h,
            Ok(_) => bail!("{who}: its executable is not an ELF file"),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
                "cannot look into {who} (permission denied): {}",
                why_not_permitted(pid)
            ),
            Err(e) => bail!("{who}: reading its executable: {e}"),
        }
    };
    if &header[..4] != b"\x7fELF" {
        bail!("{who}: its executable is not an ELF file");
    }
    let machine = u16::from_le_bytes([header[18], header[19]]);
    if header[4] == 1 {
        bail!(
            "{who} is a 32-bit program; coldcache captures x86-64 programs only \
             (rebuild it for x86-64)"
        );
    }
    if machine != 62 {
        bail!("{who} is not an x86-64 program (ELF machine {machine})");
    }
    let maps = match std::fs::read_to_string(dir.join("maps")) {
        Ok(t) => parse_maps(&t),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
            "cannot read the memory map of {who} (permission denied): {}",
            why_not_permitted(pid)
        ),
        Err(e) => bail!("{who}: reading its memory map: {e}"),
    };
    let t = Target { pid, name, maps };
    if !t.maps.iter().any(|m| is_loader(&m.path)) {
        bail!(
            "{who} is statically linked: it has no dynamic loader to load libcoldcache.so \
             with; link it with -lcoldcache and call coldcache_start/coldcache_stop \
             (include/coldcache.h), or run it under `coldcache record`"
        );
    }
    check_seccomp(&t)?;
    let ignored = proc_status_field(pid, "SigIgn:")
        .and_then(|h| u64::from_str_radix(&h, 16).ok())
        .unwrap_or(0);
    if ignored & (1 << (libc::SIGSEGV - 1)) != 0 {
        bail!(
            "{who} ignores SIGSEGV, which the remote calls' return traps on (the kernel \
             would reset it to its default); capture it with `coldcache record`"
        );
    }
    Ok(t)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn is_loader(path: &str) -> bool {
    let n = file_name(path);
    n.starts_with("ld-linux") || n.starts_with("ld-musl") || n.starts_with("ld64.so")
}

fn is_libc(path: &str) -> bool {
    let n = file_name(path);
    n.starts_with("libc.so") || n.starts_with("libc-2.") || n.starts_with("ld-musl")
}

/// Refuses a process confined by seccomp beyond what this process is (a
/// filter it installed may kill the system calls `dlopen` makes).
fn check_seccomp(t: &Target) -> Result<()> {
    let num = |pid: i32, f: &str| {
        proc_status_field(pid, f)
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    };
    let me = std::process::id() as i32;
    match num(t.pid, "Seccomp:") {
        1 => bail!(
            "{} runs in seccomp strict mode: it may make no system call but read, write \
             and exit, so no library can be loaded into it",
            t.who()
        ),
        2 if num(t.pid, "Seccomp_filters:") > num(me, "Seccomp_filters:") => bail!(
            "{} installed a seccomp filter of its own ({} filters, coldcache runs under {}): \
             the system calls loading the library makes (openat, mmap, mprotect) could be \
             forbidden and kill it; capture it with `coldcache record` instead (the filter is \
             then installed after the library is loaded)",
            t.who(),
            num(t.pid, "Seccomp_filters:"),
            num(me, "Seccomp_filters:")
        ),
        _ => Ok(()),
    }
}

/// The run-time address of dynamic symbol `name` of the file mapped at
/// `path` in `maps`.
fn symbol_in(maps: &[Mapping], path: &str, name: &str) -> Option<u64> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(path).ok()?;
    let bias = maps
        .iter()
        .filter(|m| m.path == path && m.perms.contains('x'))
        .find_map(|m| coldcache_fsio::elf::load_bias(&data, m.start, m.offset, true))?;
    let file = object::File::parse(&*data).ok()?;
    file.dynamic_symbols()
        .find(|s| s.is_definition() && s.name() == Ok(name))
        .map(|s| s.address().wrapping_add(bias))
}

/// `name` in the first mapped file `which` accepts that defines it.
fn find_symbol(maps: &[Mapping], which: impl Fn(&str) -> bool, name: &str) -> Option<u64> {
    let mut seen: Vec<&str> = Vec::new();
    for m in maps
        .iter()
        .filter(|m| m.perms.contains('x') && which(&m.path))
    {
        if seen.contains(&m.path.as_str()) {
            continue;
        }
        seen.push(&m.path);
        if let Some(a) = symbol_in(maps, &m.path, name) {
            return Some(a);
        }
    }
    None
}

/// The path of a `libcoldcache.so` already mapped in the process.
pub fn loaded_library(maps: &[Mapping]) -> Option<String> {
    maps.iter()
        .find(|m| file_name(&m.path).starts_with("libcoldcache") && m.perms.contains('x'))
        .map(|m| m.path.clone())
}

/// The `libcoldcache.so` to call in process `pid`: where several copies
/// are mapped (the program links one, `record` preloaded another), the
/// one its `LD_PRELOAD` names in `/proc/PID/environ`, which comes first in
/// its symbol lookup; else [`loaded_library`], the one mapped lowest. The
/// preloaded copy takes itself out of `LD_PRELOAD`: where the program had
/// nothing else there, the variable is unset and the block the process
/// started with still names it; with other entries, the value is
/// rewritten in place without it, and the copy mapped lowest (usually the
/// linked one) is called, whose `coldcache_attach_start` hands the call
/// to the copy first in lookup (an older build does not: see
/// `docs/capture.md`). Entries are compared with the maps' paths as they
/// are (`record` gives an absolute path).
fn library_to_call(pid: i32, maps: &[Mapping]) -> Option<String> {
    let first = loaded_library(maps)?;
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    // The loader reads the last of several.
    let preload = environ
        .split(|&b| b == 0)
        .rev()
        .find_map(|v| v.strip_prefix(b"LD_PRELOAD="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default();
    let preloaded = preload
        .split([':', ' '])
        .filter(|p| file_name(p).starts_with("libcoldcache"))
        .find(|p| maps.iter().any(|m| m.path == *p && m.perms.contains('x')));
    Some(preloaded.map_or(first, str::to_string))
}

/// `ptrace(req, tid, addr, data)`.
fn ptrace(req: libc::c_uint, tid: i32, addr: usize, data: usize) -> std::io::Result<libc::c_long> {
    // SAFETY: every request used here takes a tid and either plain
    // integers or a pointer to a live buffer of the size the request
    // writes or reads (user_regs_struct, iovec, a u64 signal mask), which
    // the callers pass.
    let r = unsafe {
        libc::ptrace(
            req,
            tid,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        )
    };
    if r == -1 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// How a traced thread stopped (or ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// `PTRACE_EVENT_STOP` (an interrupt or a group stop).
    Event,
    /// Signal-delivery stop with this signal.
    Signal(i32),
    /// The thread (or its process) is gone.
    Gone,
}

/// Waits for `tid`'s next stop, up to `deadline`.
fn wait_stop(tid: i32, deadline: Duration) -> Result<Option<Stop>> {
    let start = Instant::now();
    loop {
        let mut st = 0;
        // SAFETY: waitpid writes the status into the live local.
        let r = unsafe { libc::waitpid(tid, &mut st, libc::__WALL | libc::WNOHANG) };
        if r == -1 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            if e.raw_os_error() == Some(libc::ECHILD) {
                return Ok(Some(Stop::Gone));
            }
            return Err(e).context("waiting for the traced thread");
        }
        if r == tid {
            if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
                return Ok(Some(Stop::Gone));
            }
            if libc::WIFSTOPPED(st) {
                if st >> 16 == libc::PTRACE_EVENT_STOP {
                    return Ok(Some(Stop::Event));
                }
                if st >> 16 != 0 {
                    // Another event (exec, exit): let it go on.
                    return Ok(Some(Stop::Event));
                }
                return Ok(Some(Stop::Signal(libc::WSTOPSIG(st))));
            }
        }
        if start.elapsed() > deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// One seized thread, with what must be put back.
struct Tracee {
    pid: i32,
    tid: i32,
    mem: File,
}

/// The thread's state before the remote calls.
struct Saved {
    regs: libc::user_regs_struct,
    xstate: Vec<u8>,
    mask: u64,
}

impl Tracee {
    fn gone(&self) -> anyhow::Error {
        Exited(self.pid).into()
    }

    fn regs(&self) -> Result<libc::user_regs_struct> {
        // SAFETY: user_regs_struct is plain integers; zero is valid.
        let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        ptrace(libc::PTRACE_GETREGS, self.tid, 0, &mut r as *mut _ as usize)
            .map_err(|_| self.gone())?;
        Ok(r)
    }

    fn set_regs(&self, r: &libc::user_regs_struct) -> Result<()> {
        ptrace(libc::PTRACE_SETREGS, self.tid, 0, r as *const _ as usize)
            .map_err(|_| self.gone())?;
        Ok(())
    }

    fn save(&self) -> Result<Saved> {
        let regs = self.regs()?;
        let mut xstate = vec![0u8; XSTATE_MAX];
        let mut iov = libc::iovec {
            iov_base: xstate.as_mut_ptr() as *mut libc::c_void,
            iov_len: xstate.len(),
        };
        ptrace(
            libc::PTRACE_GETREGSET,
            self.tid,
            NT_X86_XSTATE as usize,
            &mut iov as *mut _ as usize,
        )
        .context("reading the thread's extended (FP/SSE/AVX) state")?;
        xstate.truncate(iov.iov_len);
        let mut mask = 0u64;
        ptrace(
            libc::PTRACE_GETSIGMASK,
            self.tid,
            8,
            &mut mask as *mut u64 as usize,
        )
        .context("reading the thread's signal mask")?;
        Ok(Saved { regs, xstate, mask })
    }

    fn set_mask(&self, mask: u64) -> Result<()> {
        ptrace(
            libc::PTRACE_SETSIGMASK,
            self.tid,
            8,
            &mask as *const u64 as usize,
        )
        .map_err(|_| self.gone())?;
        Ok(())
    }

    fn restore(&self, s: &Saved) -> Result<()> {
        self.set_regs(&s.regs)?;
        let mut iov = libc::iovec {
            iov_base: s.xstate.as_ptr() as *mut libc::c_void,
            iov_len: s.xstate.len(),
        };
        ptrace(
            libc::PTRACE_SETREGSET,
            self.tid,
            NT_X86_XSTATE as usize,
            &mut iov as *mut _ as usize,
        )
        .map_err(|_| self.gone())?;
        self.set_mask(s.mask)
    }

    fn write(&self, addr: u64, bytes: &[u8]) -> Result<()> {
        self.mem
            .write_all_at(bytes, addr)
            .with_context(|| format!("writing the process's memory at {addr:#x}"))
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.mem
            .read_exact_at(buf, addr)
            .with_context(|| format!("reading the process's memory at {addr:#x}"))
    }

    /// A NUL-terminated string of the process (at most 4 KiB).
    fn read_string(&self, addr: u64) -> String {
        let mut out = Vec::new();
        let mut chunk = [0u8; 256];
        while out.len() < 4096 {
            let at = addr + out.len() as u64;
            let Ok(n) = self.mem.read_at(&mut chunk, at) else {
                break;
            };
            if n == 0 {
                break;
            }
            match chunk[..n].iter().position(|&b| b == 0) {
                Some(z) => {
                    out.extend_from_slice(&chunk[..z]);
                    return String::from_utf8_lossy(&out).into_owned();
                }
                None => out.extend_from_slice(&chunk[..n]),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Calls `func(args...)` on the stopped thread and returns `rax`. The
    /// thread is stopped again on return (also after an error other than
    /// its end).
    fn call(&self, s: &Saved, what: &str, func: u64, args: &[u64]) -> Result<u64> {
        let mut r = s.regs;
        // Below the red zone (128 bytes), aligned, then the return address
        // 0: at the function's entry rsp + 8 is 16-byte aligned.
        let sp = (s.regs.rsp.wrapping_sub(256)) & !15;
        let sp = sp - 8;
        self.write(sp, &0u64.to_le_bytes())?;
        r.rsp = sp;
        r.rip = func;
        r.rax = 0;
        // No system call to restart while our code runs.
        r.orig_rax = u64::MAX;
        // The ABI's direction flag clear at calls; no single-step.
        r.eflags &= !(0x400 | 0x100);
        let regs = [
            &mut r.rdi, &mut r.rsi, &mut r.rdx, &mut r.rcx, &mut r.r8, &mut r.r9,
        ];
        for (slot, &a) in regs.into_iter().zip(args) {
            *slot = a;
        }
        self.set_regs(&r)?;
        self.set_mask(s.mask & !(1u64 << (libc::SIGSEGV - 1)))?;
        ptrace(libc::PTRACE_CONT, self.tid, 0, 0).map_err(|_| self.gone())?;
        let start = Instant::now();
        loop {
            let left = CALL_DEADLINE.saturating_sub(start.elapsed());
            match wait_stop(self.tid, left)? {
                Some(Stop::Gone) => return Err(self.gone()),
                Some(Stop::Signal(libc::SIGSEGV)) => {
                    let now = self.regs()?;
                    if now.rip == 0 {
                        return Ok(now.rax);
                    }
                    bail!(
                        "the remote call of {what} crashed (SIGSEGV at {:#x}); the process \
                         is left as it was",
                        now.rip
                    );
                }
                // Delivered as it would have been (its handler runs).
                Some(Stop::Signal(sig)) => {
                    ptrace(libc::PTRACE_CONT, self.tid, 0, sig as usize)
                        .map_err(|_| self.gone())?;
                }
                Some(Stop::Event) => {
                    ptrace(libc::PTRACE_CONT, self.tid, 0, 0).map_err(|_| self.gone())?;
                }
                None => {
                    // Stop it again so the registers can be put back.
                    let _ = ptrace(libc::PTRACE_INTERRUPT, self.tid, 0, 0);
                    let _ = wait_stop(self.tid, Duration::from_secs(5));
                    bail!(
                        "the remote call of {what} did not return within {}s (a lock it \
                         needs is held by a thread that does not release it?)",
                        CALL_DEADLINE.as_secs()
                    );
                }
            }
        }
    }

    /// A thread stopped inside an rseq critical section is aborted as the
    /// kernel would abort it on a preemption: `rseq_cs` cleared, the IP in
    /// `regs` moved to the section's abort address. Nothing is done where
    /// the kernel cannot say where the thread's area is (before 5.13), or
    /// no section holds the IP.
    fn abort_rseq(&self, regs: &mut libc::user_regs_struct) {
        // struct ptrace_rseq_configuration: rseq_abi_pointer (u64),
        // rseq_abi_size, signature, flags, pad (u32 each).
        let mut conf = [0u64; 3];
        if ptrace(
            PTRACE_GET_RSEQ_CONFIGURATION,
            self.tid,
            std::mem::size_of_val(&conf),
            conf.as_mut_ptr() as usize,
        )
        .is_err()
            || conf[0] == 0
        {
            return;
        }
        let field = conf[0] + 8;
        let mut word = [0u8; 8];
        if self.read(field, &mut word).is_err() {
            return;
        }
        let cs = u64::from_le_bytes(word);
        if cs == 0 {
            return;
        }
        // struct rseq_cs: version, flags (u32 each), start_ip,
        // post_commit_offset, abort_ip.
        let mut desc = [0u8; 32];
        if self.read(cs, &mut desc).is_err() {
            return;
        }
        let at = |o: usize| u64::from_le_bytes(desc[o..o + 8].try_into().unwrap_or_default());
        let (start, len, abort) = (at(8), at(16), at(24));
        let section = start..start.wrapping_add(len);
        if !section.contains(&regs.rip) || regs.orig_rax != u64::MAX || section.contains(&abort) {
            return;
        }
        // The kernel moves the IP only to an abort address preceded by the
        // signature the thread registered (else it kills the thread): the
        // same here, or nothing is done.
        let mut sig = [0u8; 4];
        if self.read(abort.wrapping_sub(4), &mut sig).is_err()
            || u64::from(u32::from_le_bytes(sig)) != conf[1] >> 32
        {
            return;
        }
        if self.write(field, &0u64.to_le_bytes()).is_err() {
            return;
        }
        regs.rip = abort;
    }

    /// Interrupts the thread and waits until it stops; passes on signals
    /// that arrive first.
    fn interrupt(&self) -> Result<()> {
        ptrace(libc::PTRACE_INTERRUPT, self.tid, 0, 0).map_err(|_| self.gone())?;
        loop {
            match wait_stop(self.tid, CALL_DEADLINE)? {
                Some(Stop::Event) => return Ok(()),
                Some(Stop::Signal(sig)) => {
                    ptrace(libc::PTRACE_CONT, self.tid, 0, sig as usize)
                        .map_err(|_| self.gone())?;
                }
                Some(Stop::Gone) => return Err(self.gone()),
                None => bail!("thread {} did not stop when interrupted", self.tid),
            }
        }
    }
}

/// What [`inject`] did.
#[derive(Debug)]
pub struct Injected {
    /// The library that runs the capture.
    pub library: String,
    /// Whether it was loaded now (else it was there already).
    pub loaded_now: bool,
}

/// The thread to run the calls on: the main thread, or the first live one.
fn choose_thread(pid: i32) -> i32 {
    let live = |tid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().next().map(String::from))
            })
            .is_some_and(|st| st != "Z" && st != "X")
    };
    if live(pid) {
        return pid;
    }
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|&t| live(t))
        .unwrap_or(pid)
}

/// Loads `lib` into `target` (unless a libcoldcache is loaded there
/// already) and calls `coldcache_attach_start(settings)`; see the module
/// doc for what it changes.
pub fn inject(target: &Target, lib: &Path, settings: &str) -> Result<Injected> {
    let pid = target.pid;
    let who = target.who();
    let maps = &target.maps;
    let already = library_to_call(pid, maps);
    let libc_fn = |name: &str| {
        find_symbol(maps, is_libc, name)
            .ok_or_else(|| anyhow!("{who}: its C library has no `{name}`"))
    };
    let errno_location = libc_fn("__errno_location")?;
    let mmap = libc_fn("mmap")?;
    let munmap = libc_fn("munmap")?;
    // glibc >= 2.34 and musl: dlopen in the C library; before, in libdl
    // (if the program links it), or glibc's private __libc_dlopen_mode.
    let dl = if already.is_some() {
        None
    } else if let Some(a) = find_symbol(
        maps,
        |p| is_libc(p) || file_name(p).starts_with("libdl"),
        "dlopen",
    ) {
        Some((
            a,
            libc::RTLD_NOW as u64,
            find_symbol(
                maps,
                |p| is_libc(p) || file_name(p).starts_with("libdl"),
                "dlerror",
            ),
        ))
    } else if let Some(a) = find_symbol(maps, is_libc, "__libc_dlopen_mode") {
        Some((a, (libc::RTLD_NOW as u64) | 0x8000_0000, None))
    } else {
        bail!(
            "{who}: its C library exports no dlopen (glibc before 2.34 without libdl): \
             run it under `coldcache record` instead"
        );
    };

    let tid = choose_thread(pid);
    match ptrace(libc::PTRACE_SEIZE, tid, 0, 0) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Err(Exited(pid).into()),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            // The kernel refuses to trace a thread that is exiting with
            // EPERM too: a process that ended meanwhile is not a
            // permission problem.
            let state = proc_status_field(tid, "State:");
            if state
                .as_deref()
                .is_none_or(|s| s.starts_with('Z') || s.starts_with('X'))
            {
                return Err(Exited(pid).into());
            }
            if let Some(t) = proc_status_field(tid, "TracerPid:").filter(|t| t != "0") {
                bail!(
                    "{who} is already traced by process {t}, a debugger or tracer; \
                     detach it first"
                );
            }
            bail!(
                "ptrace is not permitted on {who}: {}",
                why_not_permitted(pid)
            );
        }
        Err(e) => return Err(e).with_context(|| format!("seizing {who} with ptrace")),
    }
    let mem = match File::options()
        .read(true)
        .write(true)
        .open(format!("/proc/{tid}/mem"))
    {
        Ok(f) => f,
        Err(e) => {
            let _ = ptrace(libc::PTRACE_DETACH, tid, 0, 0);
            return Err(e).with_context(|| format!("opening the memory of {who}"));
        }
    };
    let t = Tracee { pid, tid, mem };
    t.interrupt()?;
    // A thread stopped in user code of the C library or the loader may
    // hold one of their locks (malloc's, the loader's), which dlopen would
    // wait for forever: let it run on a little and try again.
    let in_runtime = |ip: u64| {
        maps.iter()
            .any(|m| m.start <= ip && ip < m.end && (is_libc(&m.path) || is_loader(&m.path)))
    };
    for _ in 0..RETRIES {
        let r = t.regs()?;
        if r.orig_rax != u64::MAX || !in_runtime(r.rip) {
            break;
        }
        ptrace(libc::PTRACE_CONT, tid, 0, 0).map_err(|_| t.gone())?;
        std::thread::sleep(Duration::from_micros(500));
        t.interrupt()?;
    }
    let mut saved = t.save()?;
    t.abort_rseq(&mut saved.regs);
    let result = remote_calls(
        &t,
        &saved,
        target,
        lib,
        settings,
        already,
        dl,
        [errno_location, mmap, munmap],
    );
    // Put everything back, whatever happened, unless the process is gone.
    match (t.restore(&saved), &result) {
        (Err(e), _) if e.downcast_ref::<Exited>().is_some() => return Err(e),
        (Err(e), _) => {
            let _ = ptrace(libc::PTRACE_DETACH, tid, 0, 0);
            return Err(e.context(format!("restoring the registers of {who}")));
        }
        (Ok(()), _) => {}
    }
    ptrace(libc::PTRACE_DETACH, tid, 0, 0).map_err(|_| t.gone())?;
    result
}

/// The remote calls themselves (see the module doc).
#[allow(clippy::too_many_arguments)]
fn remote_calls(
    t: &Tracee,
    saved: &Saved,
    target: &Target,
    lib: &Path,
    settings: &str,
    already: Option<String>,
    dl: Option<(u64, u64, Option<u64>)>,
    [errno_location, mmap, munmap]: [u64; 3],
) -> Result<Injected> {
    let who = target.who();
    let errno_at = t.call(saved, "__errno_location", errno_location, &[])?;
    let mut errno = [0u8; 4];
    t.read(errno_at, &mut errno)?;
    let lib_path = lib.to_string_lossy();
    let size = (lib_path.len() + settings.len() + 2).next_multiple_of(4096) as u64;
    let area = t.call(
        saved,
        "mmap",
        mmap,
        &[
            0,
            size,
            (libc::PROT_READ | libc::PROT_WRITE) as u64,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64,
            u64::MAX,
            0,
        ],
    )?;
    if (area as i64) <= 0 {
        bail!("{who}: mmap of {size} bytes failed in the process");
    }
    let result = (|| {
        let mut strings = Vec::with_capacity(size as usize);
        strings.extend_from_slice(lib_path.as_bytes());
        strings.push(0);
        let settings_at = area + strings.len() as u64;
        strings.extend_from_slice(settings.as_bytes());
        strings.push(0);
        t.write(area, &strings)?;
        let (library, loaded_now) = match (&already, dl) {
            (Some(path), _) => (path.clone(), false),
            (None, Some((dlopen, mode, dlerror))) => {
                let h = t.call(saved, "dlopen", dlopen, &[area, mode])?;
                if h == 0 {
                    let why = match dlerror {
                        Some(f) => {
                            let p = t.call(saved, "dlerror", f, &[])?;
                            if p == 0 {
                                String::new()
                            } else {
                                t.read_string(p)
                            }
                        }
                        None => String::new(),
                    };
                    bail!("{who}: dlopen({lib_path}) failed in the process: {why}");
                }
                (lib_path.to_string(), true)
            }
            (None, None) => unreachable!("dlopen was found or refused"),
        };
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", t.pid))
            .map(|m| parse_maps(&m))
            .map_err(|_| t.gone())?;
        let start = symbol_in(&maps, &library, "coldcache_attach_start").ok_or_else(|| {
            anyhow!(
                "the libcoldcache.so loaded in {who} ({library}) has no coldcache_attach_start: \
                 it is older than this coldcache; restart the program to capture it"
            )
        })?;
        let msg = t.call(saved, "coldcache_attach_start", start, &[settings_at])?;
        if msg != 0 {
            bail!(
                "the capture could not be armed in {who}: {}",
                t.read_string(msg)
            );
        }
        Ok(Injected {
            library,
            loaded_now,
        })
    })();
    t.call(saved, "munmap", munmap, &[area, size])?;
    t.write(errno_at, &errno)?;
    result
}
