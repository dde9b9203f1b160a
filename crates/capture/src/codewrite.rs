//! Code that may change without an `mprotect` or `munmap` (issue 33): the
//! program writes its own code through `/proc/self/mem`, or writes a file
//! it has mapped as code (`pwrite`, `write`, a second `MAP_SHARED`
//! writable mapping, ...). Both engines trust *stable code* (decodes kept,
//! blocks translated); this module keeps that trust on evidence that holds:
//!
//! - Stable code is a private, non-writable mapping of a file that no
//!   descriptor of the process may write, in a process holding no writable
//!   `/proc/<pid>/mem` descriptor. Every route that changes such a file
//!   from inside the process needs a descriptor opened for writing
//!   (`MAP_SHARED` writable mappings included), so the check is made where
//!   descriptors are opened, not at each write: the common `read`/`write`
//!   paths stay as fast as before.
//! - Before a traced thread's `open`, `openat`, `openat2`, `creat` or
//!   `truncate` asking for writing ([`before_syscall`] in the trap engine,
//!   [`before_call`] in fast mode's dispatcher for the `open`/`openat` it
//!   makes inline; the call not yet made): a `mem` file of procfs *demotes all
//!   code* (every translation retired, every decode checked against memory
//!   from then on, nothing mapped later trusted); any other file is
//!   remembered as writable ([`WRITABLE`]) and its stable mappings are
//!   demoted (retired, checked from then on).
//! - Before a traced thread's `mmap` of a file with execution (in the trap
//!   engine's handler, on its handler stack: fast mode hands `mmap` to
//!   it), a descriptor open for writing, or a shared writable view of the
//!   file (`rw-s` in `/proc/self/maps`: a view outlives its descriptor),
//!   marks the file writable: what it maps is not trusted.
//! - At capture start ([`start`], normal context) and when a `--function`
//!   window begins ([`window_start`], handler context: descriptors opened
//!   while no thread was traced) the descriptors open ([`examine_fd`]) and
//!   the shared writable views are examined the same way.
//!
//! What is not seen: a thread that is not traced opening the file, an open
//! made through `io_uring` or `open_by_handle_at`, a descriptor received
//! from another process (`SCM_RIGHTS`, `pidfd_getfd`),
//! and any change another process makes to the file. Counted for the
//! dump's notes ([`note`]).
//!
//! Handler parts are allocation-free and async-signal-safe (raw system
//! calls into stack buffers, atomics).

use crate::procfs::FileId;
use crate::signal_state::codewrite::{
    FileSet, ALL, CODE, CODE_FILE_OPENS, DEMOTED, MEM_OPENS, PROC_DEV, UNTRUSTED, WRITABLE,
};
use std::sync::atomic::Ordering;

// `FileSet`'s type and constructor live with its statics in
// `signal_state.rs`, which cannot name `procfs::FileId`; its methods here.
impl<const N: usize> FileSet<N> {
    /// Empties the set (a capture begins, no handler runs).
    fn clear(&self) {
        self.n.store(0, Ordering::Release);
        self.full.store(false, Ordering::Release);
    }

    /// Adds `f` unless present; marks the set full past its room.
    fn insert(&self, f: FileId) {
        if self.contains(f) {
            return;
        }
        let i = self.n.fetch_add(1, Ordering::AcqRel);
        if i >= N {
            self.full.store(true, Ordering::Release);
            return;
        }
        self.inodes[i].store(f.inode, Ordering::Release);
    }

    /// Whether `f` (its inode) was added and kept.
    fn contains(&self, f: FileId) -> bool {
        let n = self.n.load(Ordering::Acquire).min(N);
        self.inodes[..n]
            .iter()
            .any(|w| w.load(Ordering::Acquire) == f.inode)
    }

    /// Whether a file was added past the room.
    fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// Files added, the ones past the room included.
    fn count(&self) -> usize {
        self.n.load(Ordering::Relaxed)
    }
}

/// What a system call about to run means for stable code.
pub(crate) enum Change {
    /// Nothing.
    None,
    /// All code: a `/proc/<pid>/mem` opened for writing.
    All,
    /// The stable mappings of a file opened for writing: given to `f`.
    File(FileId),
}

/// Remembers `f` as mapped as trusted code (handler context too).
pub(crate) fn code_file(f: FileId) {
    CODE.insert(f);
}

/// Whether a file mapped during the capture may be trusted as stable code
/// (not when the process may write it, nor after a mem file was opened).
/// Counts a refusal. Handler context.
pub(crate) fn may_trust(f: FileId) -> bool {
    let ok = !ALL.load(Ordering::Acquire) && !WRITABLE.is_full() && !WRITABLE.contains(f);
    if !ok {
        UNTRUSTED.fetch_add(1, Ordering::Relaxed);
    }
    ok
}

/// A capture begins (normal context, before any thread is traced): the
/// counters are reset and the descriptors already open examined. Returns
/// false when all code must be distrusted from the start (a writable mem
/// file is open); [`is_writable_now`] then answers for the files.
pub(crate) fn start() -> bool {
    WRITABLE.clear();
    CODE.clear();
    crate::procfs::for_each_self_mapping_file(|_, _, perms, path, f| {
        if crate::procfs::is_stable_code(perms, path) && f.inode != 0 {
            code_file(f);
        }
        // A shared writable view outlives its descriptor.
        if is_shared_writable(perms) && f.inode != 0 {
            WRITABLE.insert(f);
        }
    });
    ALL.store(false, Ordering::Release);
    for c in [&MEM_OPENS, &CODE_FILE_OPENS, &DEMOTED] {
        c.store(0, Ordering::Relaxed);
    }
    UNTRUSTED.store(0, Ordering::Relaxed);
    if let Ok(m) = std::fs::metadata("/proc/self") {
        use std::os::unix::fs::MetadataExt;
        let d = m.dev();
        PROC_DEV.store(
            u64::from(libc::major(d)) << 32 | u64::from(libc::minor(d)),
            Ordering::Relaxed,
        );
    }
    // Raw system calls, as in a handler: not `std::fs::read_dir`, whose
    // `opendir` takes memory from the program's `malloc` and so made its
    // heap before `main` (`record --all` then missed the first `malloc`'s
    // set-up: 1,568 instructions fewer than Callgrind).
    for_each_fd(|fd| match examine_fd(fd) {
        Change::All => {
            ALL.store(true, Ordering::Release);
            MEM_OPENS.fetch_add(1, Ordering::Relaxed);
        }
        Change::File(f) => WRITABLE.insert(f),
        Change::None => {}
    });
    !ALL.load(Ordering::Acquire)
}

/// Whether the file at `path` (mapped at capture start) may be written by
/// the process (found by [`start`]): its mappings are not stable code.
pub(crate) fn is_writable_now(path: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    if WRITABLE.is_full() {
        return true;
    }
    match std::fs::metadata(path) {
        Ok(m) => WRITABLE.contains(FileId {
            major: libc::major(m.dev()),
            minor: libc::minor(m.dev()),
            inode: m.ino(),
        }),
        Err(_) => false,
    }
}

fn is_proc(f: FileId) -> bool {
    (u64::from(f.major) << 32 | u64::from(f.minor)) == PROC_DEV.load(Ordering::Relaxed)
}

/// Copies the NUL-terminated string at `addr` of the program's memory into
/// `buf` (without the NUL); None when unreadable or longer than `buf`.
fn read_path(addr: u64, buf: &mut [u8; 4096]) -> Option<usize> {
    let mut len = 0;
    while len < buf.len() {
        let at = addr.checked_add(len as u64)?;
        let chunk = ((0x1000 - (at & 0xFFF)) as usize)
            .min(64)
            .min(buf.len() - len);
        if !crate::memory::read_bytes(at, &mut buf[len..len + chunk]) {
            return None;
        }
        if let Some(z) = buf[len..len + chunk].iter().position(|&c| c == 0) {
            return Some(len + z);
        }
        len += chunk;
    }
    None
}

/// What the system call of the thread of `uc` (RIP at a `syscall`, not yet
/// made) may do to stable code. Handler context.
pub(crate) fn before_syscall(uc: &libc::ucontext_t) -> Change {
    let g = &uc.uc_mcontext.gregs;
    let r = |i: libc::c_int| g[i as usize] as u64;
    before_call(
        g[libc::REG_RAX as usize],
        [
            r(libc::REG_RDI),
            r(libc::REG_RSI),
            r(libc::REG_RDX),
            r(libc::REG_R10),
            r(libc::REG_R8),
        ],
    )
}

/// [`before_syscall`] for call `nr` with its first five arguments (fast
/// mode's dispatcher asks before an `open` it makes inline).
pub(crate) fn before_call(nr: i64, args: [u64; 5]) -> Change {
    let write_flags = |flags: u64| {
        let f = flags as i32;
        f & libc::O_ACCMODE != libc::O_RDONLY || f & libc::O_TRUNC != 0
    };
    // (directory descriptor, path, whether it asks for writing)
    let (dirfd, path, writes) = match nr {
        n if n == libc::SYS_open => (libc::AT_FDCWD, args[0], write_flags(args[1])),
        n if n == libc::SYS_creat || n == libc::SYS_truncate => (libc::AT_FDCWD, args[0], true),
        n if n == libc::SYS_openat => (args[0] as i32, args[1], write_flags(args[2])),
        n if n == libc::SYS_openat2 => {
            // `struct open_how` starts with the 64-bit flags.
            let flags = crate::memory::read_word(args[2]).unwrap_or(libc::O_RDWR as u64);
            (args[0] as i32, args[1], write_flags(flags))
        }
        n if n == libc::SYS_mmap => {
            // A file mapped with execution and without writing (what may
            // become stable code; `sysemu::maps_code`).
            let prot = args[2];
            let code = prot & libc::PROT_EXEC as u64 != 0
                && prot & libc::PROT_WRITE as u64 == 0
                && args[3] & libc::MAP_ANONYMOUS as u64 == 0
                && args[4] as i32 >= 0;
            if code {
                before_code_mmap(args[4] as i32);
            }
            return Change::None;
        }
        _ => return Change::None,
    };
    if !writes {
        return Change::None;
    }
    let mut buf = [0u8; 4096];
    let Some(len) = read_path(path, &mut buf) else {
        // The kernel will refuse it too (EFAULT, ENAMETOOLONG).
        return Change::None;
    };
    let name = &buf[..len];
    // SAFETY: a zeroed stat of ours, filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `buf` is NUL-terminated at `len` (read_path found the NUL
    // there); newfstatat only reads it and writes `st`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_newfstatat,
            dirfd,
            buf.as_ptr(),
            &mut st as *mut libc::stat,
            0,
        )
    };
    if r != 0 {
        // The file does not exist yet (O_CREAT): it is mapped nowhere. A
        // path of procfs that cannot be stat'ed is not a mem file.
        return Change::None;
    }
    let f = FileId::of_stat(&st);
    let base = name.rsplit(|&c| c == b'/').next().unwrap_or(name);
    // By name, or by its mode (a procfs file of mode 0600: reached
    // through a link, `/proc/self/fd/N` reopened writable, `/dev/fd/N`, a
    // symbolic link of the program's own; over-demotes at worst).
    if is_proc(f) && (base == b"mem" || st.st_mode & 0o777 == 0o600) {
        MEM_OPENS.fetch_add(1, Ordering::Relaxed);
        ALL.store(true, Ordering::Release);
        return Change::All;
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Change::None;
    }
    WRITABLE.insert(f);
    CODE_FILE_OPENS.fetch_add(1, Ordering::Relaxed);
    if CODE.contains(f) || CODE.is_full() {
        Change::File(f)
    } else {
        Change::None
    }
}

/// Carries out `change` on the accountant and, through `invalidate`
/// (`jit::invalidate`: passed down so this file stays below the
/// translator), on the translations (handler or dispatcher context, the
/// session's lock held).
pub(crate) fn apply(
    change: Change,
    acc: &mut crate::account::Accountant,
    mut invalidate: impl FnMut(u64, u64),
) {
    match change {
        Change::None => {}
        Change::All => {
            acc.code_changed(0, u64::MAX);
            invalidate(0, u64::MAX);
        }
        Change::File(f) => mappings_of(f, |start, end| {
            // Counted where it was trusted (trap mode trusts only code
            // mapped at the start).
            if acc.trusted(start) {
                DEMOTED.fetch_add(1, Ordering::Relaxed);
            }
            acc.code_changed(start, end);
            invalidate(start, end);
        }),
    }
}

/// `mmap` of a file with execution: when any descriptor of the process
/// may write that file (the one mapped or another, opened before the
/// capture or created during it), the file is writable and what is mapped
/// is not trusted.
fn before_code_mmap(fd: i32) {
    let Some(file) = fd_file(fd) else {
        return;
    };
    if WRITABLE.contains(file) {
        return;
    }
    for_each_fd(|other| {
        // SAFETY: fcntl(F_GETFL) only reads the descriptor's flags.
        let fl = unsafe { libc::syscall(libc::SYS_fcntl, other, libc::F_GETFL) } as i32;
        if fl >= 0 && fl & libc::O_ACCMODE != libc::O_RDONLY && fd_file(other) == Some(file) {
            WRITABLE.insert(file);
        }
    });
    // A shared writable view of the file whose descriptor is closed (a
    // file created during the capture was not marked when opened).
    crate::procfs::for_each_self_mapping_file(|_, _, perms, _, id| {
        if is_shared_writable(perms) && id.inode == file.inode {
            WRITABLE.insert(file);
        }
    });
}

/// A `/proc/self/maps` permission field of a shared writable mapping
/// (`rw-s`).
fn is_shared_writable(perms: &[u8]) -> bool {
    perms.get(1) == Some(&b'w') && perms.get(3) == Some(&b's')
}

/// A `--function` window begins (handler context, the session's lock
/// held): descriptors opened since the capture was prepared, while no
/// thread was traced, are examined as [`start`] examines them, and what
/// they may write is demoted.
pub(crate) fn window_start(
    acc: &mut crate::account::Accountant,
    mut invalidate: impl FnMut(u64, u64),
) {
    for_each_fd(|fd| match examine_fd(fd) {
        Change::All if !ALL.load(Ordering::Acquire) => {
            MEM_OPENS.fetch_add(1, Ordering::Relaxed);
            ALL.store(true, Ordering::Release);
            apply(Change::All, acc, &mut invalidate);
        }
        Change::File(f) if !WRITABLE.contains(f) => {
            WRITABLE.insert(f);
            if CODE.contains(f) || CODE.is_full() {
                apply(Change::File(f), acc, &mut invalidate);
            }
        }
        _ => {}
    });
    // Shared writable views made while nothing was traced, their
    // descriptors closed (a few per window; more are seen at the next).
    let mut views = [None::<FileId>; 8];
    let mut n = 0;
    crate::procfs::for_each_self_mapping_file(|_, _, perms, _, f| {
        if is_shared_writable(perms) && f.inode != 0 && !WRITABLE.contains(f) && n < views.len() {
            WRITABLE.insert(f);
            views[n] = Some(f);
            n += 1;
        }
    });
    for f in views.into_iter().flatten() {
        if CODE.contains(f) || CODE.is_full() {
            apply(Change::File(f), acc, &mut invalidate);
        }
    }
}

/// What descriptor `fd`, already open, means for stable code ([`start`]
/// and [`window_start`] examine each): a `/proc/<pid>/mem` file open for
/// writing is [`Change::All`], a regular file open for writing is
/// [`Change::File`]; the caller records it. Raw system calls into stack
/// buffers (handler context too).
fn examine_fd(fd: i32) -> Change {
    // SAFETY: fcntl(F_GETFL) only reads the descriptor's flags.
    let fl = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) } as i32;
    if fl < 0 || fl & libc::O_ACCMODE == libc::O_RDONLY {
        return Change::None;
    }
    // SAFETY: a zeroed stat of ours, filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes `st` only; a closed descriptor is an error, not
    // a fault.
    if unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) } != 0 {
        return Change::None;
    }
    let f = FileId::of_stat(&st);
    if is_proc(f) {
        if fd_is_mem(fd) {
            Change::All
        } else {
            Change::None
        }
    } else if st.st_mode & libc::S_IFMT == libc::S_IFREG {
        Change::File(f)
    } else {
        Change::None
    }
}

/// Whether descriptor `fd` names a `/proc/.../mem` file (its link read
/// into a stack buffer).
fn fd_is_mem(fd: i32) -> bool {
    let mut path = [0u8; 40];
    let prefix = b"/proc/self/fd/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 12];
    let (mut n, mut v) = (0, fd as u32);
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for k in 0..n {
        path[prefix.len() + k] = digits[n - 1 - k];
    }
    let mut link = [0u8; 256];
    // SAFETY: `path` is NUL-terminated (zeroed past the digits); the
    // kernel writes at most `link.len()` bytes into `link`.
    let len = unsafe {
        libc::syscall(
            libc::SYS_readlinkat,
            libc::AT_FDCWD,
            path.as_ptr(),
            link.as_mut_ptr(),
            link.len(),
        )
    };
    len > 0 && link[..len as usize].ends_with(b"/mem")
}

/// The regular file open as `fd`.
fn fd_file(fd: i32) -> Option<FileId> {
    // SAFETY: a zeroed stat of ours, filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes `st` only; a bad descriptor is an error.
    if unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) } != 0 {
        return None;
    }
    (st.st_mode & libc::S_IFMT == libc::S_IFREG).then(|| FileId::of_stat(&st))
}

/// Calls `f(fd)` for each descriptor of the process (`/proc/self/fd` read
/// with raw `getdents64` into a stack buffer; allocation-free).
fn for_each_fd(mut f: impl FnMut(i32)) {
    // SAFETY: opening a NUL-terminated path read-only.
    let dir = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self/fd".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    } as i32;
    if dir < 0 {
        return;
    }
    let mut buf = [0u8; 2048];
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes into it.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            break;
        }
        let mut at = 0usize;
        while at + 19 < n as usize {
            // linux_dirent64: ino u64, off i64, reclen u16, type u8, name.
            let reclen = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
            if reclen == 0 || at + reclen > n as usize {
                break;
            }
            let name = &buf[at + 19..at + reclen];
            let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
            let fd = name.iter().try_fold(0i32, |v, &c| {
                v.checked_mul(10)?
                    .checked_add(i32::from((c as char).to_digit(10)? as u8))
            });
            if let Some(fd) = fd.filter(|&fd| fd != dir && !name.is_empty()) {
                f(fd);
            }
            at += reclen;
        }
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::syscall(libc::SYS_close, dir) };
}

/// Calls `f(start, end)` for each stable-code mapping of file `file`
/// (handler context).
fn mappings_of(file: FileId, mut f: impl FnMut(u64, u64)) {
    crate::procfs::for_each_self_mapping_file(|start, end, perms, path, id| {
        // By inode alone, as [`FileSet`].
        if id.inode == file.inode && crate::procfs::is_stable_code(perms, path) {
            f(start, end);
        }
    });
}

/// The dump's note, when anything was seen.
pub(crate) fn note() -> Option<String> {
    let mem = MEM_OPENS.load(Ordering::Relaxed);
    let files = CODE_FILE_OPENS.load(Ordering::Relaxed);
    let demoted = DEMOTED.load(Ordering::Relaxed);
    let untrusted = UNTRUSTED.load(Ordering::Relaxed);
    let writable = WRITABLE.count();
    if mem == 0 && demoted == 0 && untrusted == 0 {
        return None;
    }
    let mut s = String::from("code that may change without mprotect: ");
    if mem > 0 {
        s += &format!(
            "/proc/<pid>/mem opened for writing {mem} time(s): all code ran checked against \
             memory from then on (no translation, no trusted decode); "
        );
    }
    s += &format!(
        "{files} open(s) for writing of existing files, {writable} file(s) writable by the \
         program, {demoted} code mapping(s) of such files demoted, {untrusted} mapping(s) of \
         them not trusted (run checked against memory); changes made by another process are \
         not seen"
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::fs::MetadataExt;

    fn id_of(path: &std::path::Path) -> FileId {
        let m = std::fs::metadata(path).unwrap();
        FileId {
            major: libc::major(m.dev()),
            minor: libc::minor(m.dev()),
            inode: m.ino(),
        }
    }

    fn open_at(dirfd: i32, path: &CString, flags: i32) -> Change {
        before_call(
            libc::SYS_openat,
            [dirfd as u64, path.as_ptr() as u64, flags as u64, 0, 0],
        )
    }

    /// The opens the check must see, and the ones it must let be: each
    /// answer against the file it names (the test binary is mapped as
    /// code; a file of our own is not).
    #[test]
    fn writable_opens_of_proc_mem_and_of_code_files_are_seen() {
        start();
        let mem = CString::new("/proc/self/mem").unwrap();
        assert!(matches!(
            open_at(libc::AT_FDCWD, &mem, libc::O_RDONLY),
            Change::None
        ));
        assert!(!ALL.load(Ordering::Relaxed));
        // Relative to a directory descriptor of /proc/self.
        let dir = std::fs::File::open("/proc/self").unwrap();
        use std::os::fd::AsRawFd;
        let rel = CString::new("mem").unwrap();
        assert!(matches!(
            open_at(dir.as_raw_fd(), &rel, libc::O_RDWR),
            Change::All
        ));
        start();
        let thread = CString::new("/proc/thread-self/mem").unwrap();
        let c = before_call(
            libc::SYS_open,
            [thread.as_ptr() as u64, libc::O_WRONLY as u64, 0, 0, 0],
        );
        assert!(matches!(c, Change::All));
        assert!(!may_trust(id_of(&std::env::current_exe().unwrap())));
        start();
        // Another procfs file is not a mem file.
        let maps = CString::new("/proc/self/maps").unwrap();
        assert!(matches!(
            open_at(libc::AT_FDCWD, &maps, libc::O_RDWR),
            Change::None
        ));
        assert!(!ALL.load(Ordering::Relaxed));
        // The test binary, mapped as code: its mappings are demoted.
        let exe = std::env::current_exe().unwrap();
        let exe_c = CString::new(exe.to_str().unwrap()).unwrap();
        match open_at(libc::AT_FDCWD, &exe_c, libc::O_RDWR) {
            Change::File(f) => assert_eq!(f, id_of(&exe)),
            _ => panic!("a writable open of the mapped executable was not seen"),
        }
        let mut mapped = 0;
        mappings_of(id_of(&exe), |_, _| mapped += 1);
        assert!(mapped > 0, "no code mapping of the test binary found");
        // A file of our own, not mapped: remembered, nothing to demote; an
        // executable mapping of it through a writable descriptor is then
        // not trusted.
        let path = std::env::temp_dir().join(format!("codewrite-{}", std::process::id()));
        std::fs::write(&path, [0xC3u8; 64]).unwrap();
        let own = id_of(&path);
        let path_c = CString::new(path.to_str().unwrap()).unwrap();
        assert!(matches!(
            open_at(libc::AT_FDCWD, &path_c, libc::O_RDONLY),
            Change::None
        ));
        assert!(may_trust(own));
        start();
        let rw = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let ro = std::fs::File::open(&path).unwrap();
        assert!(may_trust(own));
        // Mapped through the read-only descriptor: the other one can write.
        let prot = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        let c = before_call(
            libc::SYS_mmap,
            [
                0,
                4096,
                prot,
                libc::MAP_PRIVATE as u64,
                ro.as_raw_fd() as u64,
            ],
        );
        assert!(matches!(c, Change::None));
        assert!(!may_trust(own));
        drop((rw, ro));
        let _ = std::fs::remove_file(&path);
        start();
    }
}
