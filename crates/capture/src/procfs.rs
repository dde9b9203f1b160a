//! What the capture engine learns about its own process from `/proc` and
//! from the mapped ELF files: executable mappings (the module map), threads
//! and their names, an attached tracer, build ids, and function symbols for
//! the `--function` trigger.
//!
//! Most of it allocates and does file I/O: it runs when a capture is
//! prepared or finished, never in a signal handler. The exceptions say so
//! in their docs and are allocation-free and async-signal-safe (raw
//! system calls into stack buffers), for the handlers that use them:
//! `for_each_task` and `thread_named` (a `--function` window joining the
//! other selected threads), `for_each_self_mapping_file` (code a `dlopen` mapped
//! during a fast capture), `read_task_file` (seccomp's check, in the trap
//! handler, of whether a thread waits in `pause`).

use coldcache_dump::Module;
use object::{Object, ObjectSymbol};
use std::path::Path;

pub(crate) use crate::signal_state::procfs::ATTACHER;
pub use coldcache_fsio::maps::{parse_maps, Mapping};

/// The mappings of this process.
pub fn self_maps() -> Vec<Mapping> {
    std::fs::read_to_string("/proc/self/maps")
        .map(|t| parse_maps(&t))
        .unwrap_or_default()
}

/// The unwinder of this process's executable mappings now, the files'
/// unwind tables read through [`MappedFile`]. Not async-signal-safe.
pub fn self_unwinder() -> coldcache_account::unwind::StackUnwinder {
    coldcache_account::unwind::StackUnwinder::new(&self_maps(), |path| {
        MappedFile::open(Path::new(path))
    })
}

/// How the code cache's memfd shows in `/proc/self/maps`.
pub(crate) const CODE_CACHE_PATH: &str = "/memfd:coldcache-jit";

/// The executable mappings of this process as dump modules, with build ids.
pub fn modules() -> Vec<Module> {
    let mut out: Vec<Module> = Vec::new();
    let mut ids: std::collections::HashMap<String, Vec<u8>> = Default::default();
    for m in self_maps() {
        // Not the program's: fast mode's code cache (its translated copies
        // are attributed to the program's addresses, never their own).
        if !m.perms.contains('x') || m.path.starts_with(CODE_CACHE_PATH) {
            continue;
        }
        let build_id = if m.path.starts_with('/') {
            ids.entry(m.path.clone())
                .or_insert_with(|| build_id(Path::new(&m.path)).unwrap_or_default())
                .clone()
        } else {
            Vec::new()
        };
        out.push(Module {
            path: m.path,
            build_id,
            start: m.start,
            end: m.end,
            file_offset: m.offset,
        });
    }
    out
}

/// The GNU build id of an ELF file.
pub fn build_id(path: &Path) -> Option<Vec<u8>> {
    let data = MappedFile::open(path)?;
    let file = object::File::parse(data.bytes()).ok()?;
    file.build_id().ok().flatten().map(|b| b.to_vec())
}

/// A whole file mapped read-only, unmapped when dropped.
///
/// Reading a module to parse a few of its headers and sections copied the
/// whole file (22 MB for `libcoldcache.so` with its debug information)
/// into fresh pages, twice per capture start: most of what a start costs.
/// A mapping shares the page cache and touches only the pages parsed.
pub struct MappedFile {
    ptr: *mut libc::c_void,
    len: usize,
}

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl MappedFile {
    /// Maps `path`; `None` when it cannot be opened, is empty or cannot be
    /// mapped.
    pub fn open(path: &Path) -> Option<MappedFile> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).ok()?;
        let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh private read-only mapping of an open file, at an
        // address the kernel picks; nothing else refers to it. The files
        // mapped are modules of this process: one truncated while we read
        // it would fault (SIGBUS) as the program's own code would.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(MappedFile { ptr, len })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes until `self` is dropped.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `open` made; no slice of it
        // outlives `self`.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// Thread ids of this process.
///
/// Read with `getdents64` rather than `std::fs::read_dir`: glibc's
/// `opendir` allocates from the program's heap, and the engine keeps its
/// hands off that heap (see `libcoldcache`'s allocator).
pub fn tasks() -> Vec<u32> {
    let mut v = Vec::new();
    for_each_task(|tid| v.push(tid));
    v.sort_unstable();
    v
}

/// Calls `f` with each thread id of this process, allocation-free and
/// async-signal-safe (raw `openat`, `getdents64` into a stack buffer,
/// `close`): the function trigger's breakpoint handler starts the other
/// selected threads of a window with it.
pub(crate) fn for_each_task(mut f: impl FnMut(u32)) {
    // SAFETY: opening a NUL-terminated path read-only as a directory.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self/task".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    } as i32;
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: getdents64 fills at most `buf.len()` bytes of `buf` from
        // an open directory descriptor.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            break;
        }
        let mut off = 0usize;
        while off + 19 <= n as usize {
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            if reclen == 0 || off + reclen > n as usize {
                break;
            }
            let mut tid = 0u32;
            let mut digits = 0;
            for &c in &buf[off + 19..off + reclen] {
                if !c.is_ascii_digit() {
                    break;
                }
                tid = tid.saturating_mul(10).saturating_add(u32::from(c - b'0'));
                digits += 1;
            }
            if digits > 0 {
                f(tid);
            }
            off += reclen;
        }
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// Whether a mapping holds code that changes only through a system call
/// the engines see: a file privately mapped executable without write
/// permission (the vDSO too). Anonymous, writable or shared executable
/// memory, and memfd or deleted files (a JIT's double mapping, like our
/// own code cache), are checked at every execution and never translated.
/// `perms` as `maps` writes them (`r-xp`), `path` the rest of the line.
pub(crate) fn is_stable_code(perms: &[u8], path: &[u8]) -> bool {
    perms.contains(&b'x')
        && !perms.contains(&b'w')
        && perms.contains(&b'p')
        && ((path.starts_with(b"/")
            && !path.starts_with(b"/memfd:")
            && !path.ends_with(b" (deleted)"))
            || path == b"[vdso]")
}

/// A mapped file as `maps` names it: device (major, minor) and inode.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct FileId {
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
}

impl FileId {
    /// The file a `stat` describes.
    pub(crate) fn of_stat(st: &libc::stat) -> FileId {
        FileId {
            major: libc::major(st.st_dev),
            minor: libc::minor(st.st_dev),
            inode: st.st_ino,
        }
    }
}

/// Calls `f(start, end, perms, path, file)` for each line of
/// `/proc/self/maps`, allocation-free and async-signal-safe (raw
/// `openat`, `read` into a stack buffer, `close`): a traced thread's trap
/// handler finds the code a `dlopen` mapped during a capture with it. A
/// line longer than the line buffer (a path of more than about 400 bytes)
/// is given with an empty path, which no caller takes for stable code.
/// Returns false when the file could not be opened or read to its end.
/// (`file`: the mapped file's identity, inode 0: none).
pub(crate) fn for_each_self_mapping_file(
    mut f: impl FnMut(u64, u64, &[u8], &[u8], FileId),
) -> bool {
    // SAFETY: opening a NUL-terminated path read-only.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    } as i32;
    if fd < 0 {
        return false;
    }
    let mut buf = [0u8; 2048];
    let mut line = [0u8; 512];
    let (mut len, mut long) = (0usize, false);
    let mut whole = true;
    loop {
        // SAFETY: reading at most `buf.len()` bytes into a live stack buffer.
        let n = unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) };
        if n == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if n < 0 {
            whole = false;
        }
        if n <= 0 {
            break;
        }
        for &c in &buf[..n as usize] {
            if c != b'\n' {
                if len < line.len() {
                    line[len] = c;
                    len += 1;
                } else {
                    long = true;
                }
                continue;
            }
            if let Some((start, end, perms, path, file)) = split_maps_line(&line[..len]) {
                f(start, end, perms, if long { b"" } else { path }, file);
            }
            (len, long) = (0, false);
        }
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    whole
}

/// One `maps` line: start, end, permissions, path, file.
type MapsLine<'a> = (u64, u64, &'a [u8], &'a [u8], FileId);

/// One `maps` line's range, permissions, path (the path may be empty) and
/// file.
fn split_maps_line(line: &[u8]) -> Option<MapsLine<'_>> {
    let mut fields = line.splitn(6, |&c| c == b' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let (_offset, dev, inode) = (fields.next()?, fields.next()?, fields.next()?);
    let path = fields.next().unwrap_or(b"").trim_ascii_start();
    let dash = range.iter().position(|&c| c == b'-')?;
    let hex = |s: &[u8]| -> Option<u64> {
        if s.is_empty() || s.len() > 16 {
            return None;
        }
        s.iter().try_fold(0u64, |v, &c| {
            Some(v << 4 | u64::from((c as char).to_digit(16)?))
        })
    };
    let colon = dev.iter().position(|&c| c == b':')?;
    let inode = inode.iter().try_fold(0u64, |v, &c| {
        Some(v.checked_mul(10)? + u64::from((c as char).to_digit(10)?))
    })?;
    let file = FileId {
        major: hex(&dev[..colon])? as u32,
        minor: hex(&dev[colon + 1..])? as u32,
        inode,
    };
    Some((
        hex(&range[..dash])?,
        hex(&range[dash + 1..])?,
        perms,
        path,
        file,
    ))
}

/// Reads `/proc/self/task/TID/FILE` (`file` a name of at most 16 bytes,
/// such as `comm`) into `buf`: the bytes read, None if the thread or the
/// file is gone. Allocation-free and async-signal-safe (the path is built
/// in a stack buffer; raw system calls).
pub(crate) fn read_task_file(tid: u32, file: &[u8], buf: &mut [u8]) -> Option<usize> {
    let mut path = [0u8; 64];
    let prefix = b"/proc/self/task/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 10];
    let mut k = 0;
    let mut t = tid;
    loop {
        digits[k] = b'0' + (t % 10) as u8;
        k += 1;
        t /= 10;
        if t == 0 {
            break;
        }
    }
    let mut at = prefix.len();
    for i in (0..k).rev() {
        path[at] = digits[i];
        at += 1;
    }
    path[at] = b'/';
    let file = &file[..file.len().min(16)];
    path[at + 1..at + 1 + file.len()].copy_from_slice(file);
    // The byte after the name is the terminating NUL (the buffer is zeroed:
    // 16 + 10 + 1 + 16 bytes at most).
    // SAFETY: opening a NUL-terminated path in a live stack buffer.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    } as i32;
    if fd < 0 {
        return None;
    }
    // SAFETY: reading at most `buf.len()` bytes into the caller's live
    // buffer, then closing the descriptor opened above.
    let n = unsafe {
        let n = libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len());
        libc::syscall(libc::SYS_close, fd);
        n
    };
    usize::try_from(n).ok()
}

/// Whether thread `tid`'s name (`comm`) is one of `names`, allocation-free
/// and async-signal-safe ([`read_task_file`]). False if the thread is gone.
pub(crate) fn thread_named(tid: u32, names: &[String]) -> bool {
    let mut name = [0u8; 32];
    let n = match read_task_file(tid, b"comm", &mut name) {
        Some(n) if n > 0 => n,
        _ => return false,
    };
    let mut name = &name[..n];
    if name.last() == Some(&b'\n') {
        name = &name[..name.len() - 1];
    }
    names.iter().any(|w| w.as_bytes() == name)
}

/// Whether thread `tid` is one of ours (the capture's writer `coldcache`,
/// the zones stream `coldcache-stream`): its name begins `coldcache`.
/// Async-signal-safe, no allocation.
pub(crate) fn thread_is_ours(tid: u32) -> bool {
    let mut name = [0u8; 32];
    matches!(read_task_file(tid, b"comm", &mut name), Some(n) if name[..n].starts_with(b"coldcache"))
}

/// Whether thread `tid` of this process exists and is traced (its
/// `TracerPid` is not 0). Allocation-free and async-signal-safe
/// ([`read_task_file`]): `TracerPid` is within the status file's first
/// lines.
pub(crate) fn traced_task(tid: u32) -> bool {
    let mut status = [0u8; 1024];
    let Some(n) = read_task_file(tid, b"status", &mut status) else {
        return false;
    };
    let key = b"\nTracerPid:";
    let status = &status[..n];
    let Some(at) = status.windows(key.len()).position(|w| w == key) else {
        return false;
    };
    status[at + key.len()..]
        .iter()
        .take_while(|&&b| b != b'\n')
        .any(|&b| b.is_ascii_digit() && b != b'0')
}

/// The name (`comm`) of a thread of this process, empty if it is gone.
pub fn thread_name(tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

/// The pid of a tracer attached to this process, if any.
pub fn tracer_pid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let attacher = ATTACHER.load(std::sync::atomic::Ordering::Relaxed);
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&p| p != 0 && p != attacher)
}

/// A function found by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundSymbol {
    /// Runtime address of its entry.
    pub address: u64,
    /// The module it is in.
    pub module: String,
}

/// Finds a function by (mangled or plain) name in the mapped ELF files,
/// main executable first. Returns its runtime address.
pub fn find_function(name: &str) -> Result<FoundSymbol, String> {
    find_function_skipping(name, &mut std::collections::HashSet::new()).ok_or_else(|| {
        format!(
            "no function named `{name}` in the symbol tables of the program or its libraries \
             (a stripped binary, or a C++/Rust name that needs its mangled form?)"
        )
    })
}

/// Finds a function by its exact symbol name (`.symtab`, so static
/// functions too, then `.dynsym`) in the mapped ELF files not in
/// `searched`; every file searched without a match is added to it, so a
/// later call (after a `dlopen`) reads only the files mapped since.
pub fn find_function_skipping(
    name: &str,
    searched: &mut std::collections::HashSet<String>,
) -> Option<FoundSymbol> {
    let maps = self_maps();
    let mut seen = std::collections::HashSet::new();
    for m in &maps {
        if !m.path.starts_with('/') || searched.contains(&m.path) || !seen.insert(m.path.clone()) {
            continue;
        }
        let Ok(data) = std::fs::read(&m.path) else {
            searched.insert(m.path.clone());
            continue;
        };
        let Ok(file) = object::File::parse(&*data) else {
            searched.insert(m.path.clone());
            continue;
        };
        let found = file.symbols().chain(file.dynamic_symbols()).find(|s| {
            s.is_definition() && s.kind() == object::SymbolKind::Text && s.name() == Ok(name)
        });
        let Some(sym) = found else {
            searched.insert(m.path.clone());
            continue;
        };
        // Load bias (`coldcache_fsio::elf`) from the file's executable
        // mapping, where a text symbol is.
        let segments = coldcache_fsio::elf::LoadSegments::of(&file);
        let Some(bias) = maps
            .iter()
            .filter(|x| x.path == m.path && x.perms.contains('x'))
            .find_map(|x| segments.load_bias(x.start, x.offset, true))
        else {
            continue;
        };
        return Some(FoundSymbol {
            address: sym.address().wrapping_add(bias),
            module: m.path.clone(),
        });
    }
    None
}

/// The run-time address of ELF address `addr` of `module` (a canonical
/// path, as `/proc/self/maps` names files), from the load bias of its
/// executable mapping (`coldcache_fsio::elf`).
pub(crate) fn runtime_address(module: &str, addr: u64) -> Result<u64, String> {
    let maps = self_maps();
    let data = std::fs::read(module).map_err(|e| format!("reading {module}: {e}"))?;
    maps.iter()
        .filter(|m| m.path == module && m.perms.contains('x'))
        .find_map(|m| coldcache_fsio::elf::load_bias(&data, m.start, m.offset, true))
        .map(|bias| addr.wrapping_add(bias))
        .ok_or_else(|| format!("{module} is not mapped executable in the program"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--in-dlopen`'s lookup reads only files not searched before: a
    /// file without the name is remembered, one with it is not.
    #[test]
    fn lookup_after_dlopen_skips_files_already_searched() {
        let mut searched = std::collections::HashSet::new();
        let found = find_function_skipping("malloc", &mut searched).expect("malloc");
        assert!(!searched.contains(&found.module), "{found:?}");
        assert!(find_function_skipping("no_such_function_anywhere", &mut searched).is_none());
        // Every mapped file is now searched, the one with malloc included.
        assert!(searched.contains(&found.module));
        assert!(find_function_skipping("malloc", &mut searched).is_none());
    }

    #[test]
    fn maps_lines_parse_including_paths_with_spaces() {
        let t = "55d0c0a00000-55d0c0a21000 r-xp 00002000 fd:01 123 /usr/bin/my prog\n\
                 7ffd1b2f0000-7ffd1b311000 rw-p 00000000 00:00 0                          [stack]\n\
                 garbage\n";
        let m = parse_maps(t);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].start, 0x55d0c0a00000);
        assert_eq!(m[0].offset, 0x2000);
        assert_eq!(m[0].path, "/usr/bin/my prog");
        assert_eq!(m[1].path, "[stack]");
    }

    #[test]
    fn finds_a_function_of_this_test_binary() {
        // `coldcache_stop` is an unmangled function of this crate: the
        // address found in the symbol table must be the one Rust calls.
        let f = find_function("coldcache_stop").unwrap();
        let expected = crate::lifecycle::coldcache_stop as *const () as usize as u64;
        assert_eq!(f.address, expected, "{f:?}");
        let maps = self_maps();
        assert!(maps
            .iter()
            .any(|m| m.perms.contains('x') && (m.start..m.end).contains(&f.address)));
    }
}
