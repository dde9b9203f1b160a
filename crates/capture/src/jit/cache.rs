//! The code cache's memory: chunks of one `memfd` mapped twice, writable at
//! one address and executable at another (W^X: no page is ever both), the
//! executable view placed within reach of a rel32 (±2 GiB) of the code it
//! translates, so copied RIP-relative operands and direct branches keep
//! working. Chunks are mapped with system calls only (no allocation), so
//! they can be made from the dispatcher or a signal handler.

use crate::procfs::FileId;

/// Bytes per chunk.
pub(crate) const CHUNK: u64 = 4 << 20;
/// Chunks a process may map (the cache is bounded: a full cache makes new
/// blocks run under the trap engine).
const MAX_CHUNKS: usize = 64;
/// How far (either way) from the code it translates a chunk may lie.
pub(crate) const REACH: u64 = 1 << 30;

#[derive(Clone, Copy)]
struct Chunk {
    rx: u64,
    rw: u64,
    used: u64,
    /// Bytes at the start that `clear` keeps (the dispatcher).
    kept: u64,
    /// The memfd both views map, as `/proc/self/maps` names it.
    file: FileId,
}

const NO_FILE: FileId = FileId {
    major: 0,
    minor: 0,
    inode: 0,
};

/// The chunks mapped so far.
pub(crate) struct CodeCache {
    chunks: [Chunk; MAX_CHUNKS],
    n: usize,
}

impl CodeCache {
    /// An empty cache (nothing mapped).
    pub(crate) const fn new() -> CodeCache {
        CodeCache {
            chunks: [Chunk {
                rx: 0,
                rw: 0,
                used: 0,
                kept: 0,
                file: NO_FILE,
            }; MAX_CHUNKS],
            n: 0,
        }
    }

    /// Forgets what the chunks hold (their memory is reused), except what
    /// [`CodeCache::keep`] kept.
    pub(crate) fn clear(&mut self) {
        for c in &mut self.chunks[..self.n] {
            c.used = c.kept;
        }
    }

    /// Makes everything written so far permanent (`clear` keeps it).
    pub(crate) fn keep(&mut self) {
        for c in &mut self.chunks[..self.n] {
            c.kept = c.used;
        }
    }

    /// Reserves `size` bytes of executable code within [`REACH`] of `near`
    /// (anywhere when `near` is 0); returns the executable address.
    pub(crate) fn reserve(&mut self, near: u64, size: u64) -> Option<u64> {
        let fits = |c: &Chunk| {
            c.used + size <= CHUNK && (near == 0 || c.rx.abs_diff(near) + CHUNK < REACH)
        };
        let i = match self.chunks[..self.n].iter().position(fits) {
            Some(i) => i,
            None => {
                if self.n == MAX_CHUNKS {
                    return None;
                }
                let (rx, rw, file) = map_chunk(near)?;
                self.chunks[self.n] = Chunk {
                    rx,
                    rw,
                    used: 0,
                    kept: 0,
                    file,
                };
                self.n += 1;
                self.n - 1
            }
        };
        let c = &mut self.chunks[i];
        let at = c.rx + c.used;
        c.used += size.next_multiple_of(16);
        Some(at)
    }

    /// Gives back the tail of the last reservation at `at` beyond `used`
    /// bytes (a block is reserved at its largest size, then trimmed).
    pub(crate) fn trim(&mut self, at: u64, reserved: u64, used: u64) {
        if let Some(c) = self.chunks[..self.n]
            .iter_mut()
            .find(|c| at >= c.rx && at < c.rx + CHUNK)
        {
            if c.rx + c.used == at + reserved.next_multiple_of(16) {
                c.used = at - c.rx + used.next_multiple_of(16);
            }
        }
    }

    /// Whether `start..end` overlaps a chunk's executable or writable view.
    pub(crate) fn overlaps(&self, start: u64, end: u64) -> bool {
        self.chunks[..self.n]
            .iter()
            .any(|c| (start < c.rx + CHUNK && end > c.rx) || (start < c.rw + CHUNK && end > c.rw))
    }

    /// Whether every chunk's two views are still this cache's own memfd
    /// mappings, whole, as `/proc/self/maps` shows them now: a program may
    /// map over them (`MAP_FIXED`) or unmap them while no thread is traced
    /// (between captures: the trap engine sees a traced thread's calls),
    /// claiming address space it found free before the code cache came.
    /// False also when the maps cannot be read.
    pub(crate) fn intact(&self) -> bool {
        let chunks = &self.chunks[..self.n];
        let mut covered = [0u64; 2 * MAX_CHUNKS];
        let read = crate::procfs::for_each_self_mapping_file(|start, end, _, _, file| {
            for (i, c) in chunks.iter().enumerate() {
                for (v, base) in [c.rx, c.rw].into_iter().enumerate() {
                    let (lo, hi) = (start.max(base), end.min(base + CHUNK));
                    if lo < hi && file == c.file {
                        covered[2 * i + v] += hi - lo;
                    }
                }
            }
        });
        read && covered[..2 * chunks.len()].iter().all(|&b| b == CHUNK)
    }

    /// Whether `at` lies in the executable view of a chunk.
    pub(crate) fn contains(&self, at: u64) -> bool {
        self.chunks[..self.n]
            .iter()
            .any(|c| at >= c.rx && at < c.rx + CHUNK)
    }

    /// Replaces the 8 bytes at executable address `at` (8-byte aligned) in
    /// one store, so a thread running them sees the old or the new bytes.
    pub(crate) fn write8(&self, at: u64, bytes: [u8; 8]) -> bool {
        let Some(c) = self.chunks[..self.n]
            .iter()
            .find(|c| at >= c.rx && at + 8 <= c.rx + CHUNK)
        else {
            return false;
        };
        if !at.is_multiple_of(8) {
            return false;
        }
        let dst = (c.rw + (at - c.rx)) as *const std::sync::atomic::AtomicU64;
        // SAFETY: an aligned word of the writable view of a chunk we mapped.
        unsafe {
            (*dst).store(
                u64::from_le_bytes(bytes),
                std::sync::atomic::Ordering::Release,
            )
        };
        true
    }

    /// Writes `code` at executable address `at` through the writable view.
    pub(crate) fn write(&self, at: u64, code: &[u8]) -> bool {
        let Some(c) = self.chunks[..self.n]
            .iter()
            .find(|c| at >= c.rx && at + code.len() as u64 <= c.rx + CHUNK)
        else {
            return false;
        };
        let dst = c.rw + (at - c.rx);
        // SAFETY: `dst..dst + len` lies in the writable view of a chunk we
        // mapped (checked above); nothing executes bytes not yet published.
        unsafe { core::ptr::copy_nonoverlapping(code.as_ptr(), dst as *mut u8, code.len()) };
        true
    }
}

/// Maps `len` bytes (private anonymous, or `fd` shared when not negative)
/// in the far region; anywhere if that fails.
pub(crate) fn map_far(len: u64, prot: i32, fd: i32) -> Option<u64> {
    let len = len.next_multiple_of(1 << 21);
    let flags = if fd >= 0 {
        libc::MAP_SHARED
    } else {
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE
    };
    for _ in 0..64 {
        let at = crate::memory::far_address(len);
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                len as usize,
                prot,
                flags | libc::MAP_FIXED_NOREPLACE,
                fd,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            if p as u64 == at {
                return Some(at);
            }
            // An old kernel took the address as a hint only.
            // SAFETY: unmapping what was just mapped elsewhere.
            unsafe { libc::munmap(p, len as usize) };
        }
    }
    // SAFETY: a plain mapping at a kernel-chosen address.
    let p = unsafe { libc::mmap(core::ptr::null_mut(), len as usize, prot, flags, fd, 0) };
    (p != libc::MAP_FAILED).then_some(p as u64)
}

/// The program's break (the end of its `brk` heap, which grows up from
/// there): `brk(0)` sets nothing and returns it. A raw system call, so
/// glibc's cached break is untouched.
fn program_break() -> u64 {
    crate::grow::sys6(libc::SYS_brk, [0; 6]) as u64
}

/// Where a chunk executable near `near` is tried, best first (each hint
/// 2 MiB aligned; a hint taken by a mapping fails its
/// `MAP_FIXED_NOREPLACE` and the next is tried):
///
/// 1. below the code, as far as reach allows: the program's own mappings
///    grow down from below its libraries, so far below is the last place
///    they reach (a PIE executable and every library end here);
/// 2. between the code and the heap: `brk` starts at a random point up to
///    1 GiB above the executable (x86-64's brk randomisation) and grows
///    up, so the room under the current break (`brk`) is out of its way (a
///    non-PIE executable at 0x400000 has nothing below it);
/// 3. above the break, as far as reach allows (the heap has that much room
///    before it meets the chunk); never the 64 MiB just above the break.
///
/// A chunk placed in the heap's way made the program's `sbrk` fail and
/// glibc fall back to `mmap`: a different heap, other instructions.
fn chunk_hints(near: u64, brk: u64) -> impl Iterator<Item = u64> {
    const STEP: u64 = 64 << 20;
    const ALIGN: u64 = 2 << 20;
    let base = near & !(ALIGN - 1);
    let below = (1..=14u64).rev().map(move |k| base.wrapping_sub(k * STEP));
    let under_heap =
        (0..16u64).map(move |k| brk.wrapping_sub(CHUNK + ALIGN + k * STEP) & !(ALIGN - 1));
    let under_heap = under_heap.filter(move |&h| brk > near && h > near);
    let above = (1..=14u64).rev().map(move |k| base.wrapping_add(k * STEP));
    let above = above.filter(move |&h| h + CHUNK <= brk || h >= brk.saturating_add(STEP));
    below
        .chain(under_heap)
        .chain(above)
        // User space is above the first 64 KiB and below 0x7fff_ffff_f000
        // (47 bits).
        .filter(|&h| h >= 0x10000 && h.saturating_add(CHUNK) <= 0x7fff_ffff_0000)
}

/// Maps a chunk twice; the executable view within reach of `near`.
/// Returns both views and the memfd's identity.
fn map_chunk(near: u64) -> Option<(u64, u64, FileId)> {
    // SAFETY: memfd_create with a static name and flags; returns a new fd
    // or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_memfd_create,
            c"coldcache-jit".as_ptr(),
            libc::MFD_CLOEXEC,
        )
    } as i32;
    if fd < 0 {
        return None;
    }
    let done = |r: Option<(u64, u64, FileId)>| {
        // SAFETY: closing the fd we created; the mappings keep the file.
        unsafe { libc::close(fd) };
        r
    };
    // SAFETY: sizing the memfd we just created.
    if unsafe { libc::ftruncate(fd, CHUNK as libc::off_t) } != 0 {
        return done(None);
    }
    // SAFETY: a zeroed stat is valid; fstat fills it for our descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return done(None);
    }
    let file = FileId::of_stat(&st);
    let Some(rw) = map_far(CHUNK, libc::PROT_READ | libc::PROT_WRITE, fd) else {
        return done(None);
    };
    let rw = rw as *mut libc::c_void;
    let rx_at = |hint: u64, fixed: bool| -> Option<u64> {
        let flags = libc::MAP_SHARED | if fixed { libc::MAP_FIXED_NOREPLACE } else { 0 };
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping;
        // without it the hint is only a hint.
        let p = unsafe {
            libc::mmap(
                hint as *mut libc::c_void,
                CHUNK as usize,
                libc::PROT_READ | libc::PROT_EXEC,
                flags,
                fd,
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some(p as u64)
    };
    let rx = if near == 0 {
        map_far(CHUNK, libc::PROT_READ | libc::PROT_EXEC, fd)
    } else {
        chunk_hints(near, program_break()).find_map(|hint| {
            let p = rx_at(hint, true)?;
            if p.abs_diff(near) + CHUNK < REACH {
                return Some(p);
            }
            // SAFETY: unmapping the mapping just made, out of reach.
            unsafe { libc::munmap(p as *mut libc::c_void, CHUNK as usize) };
            None
        })
    };
    match rx {
        Some(rx) => done(Some((rx, rw as u64, file))),
        None => {
            // SAFETY: unmapping the writable view made above.
            unsafe { libc::munmap(rw, CHUNK as usize) };
            done(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order of `chunk_hints` for the three layouts, by hand: a
    /// non-PIE executable at 0x400000 whose heap starts 900 MiB above it
    /// (the case that made the program's `sbrk` fail: the old first hint,
    /// 896 MiB above, lay 4 MiB under the break, in the heap's way), the
    /// same with the heap right after the executable, and a library above
    /// the heap.
    #[test]
    fn chunks_go_below_the_code_then_under_the_heap_then_far_above_it() {
        const MIB: u64 = 1 << 20;
        let near = 0x401234;
        let brk = 0x400000 + 900 * MIB + 0x3000;
        let hints: Vec<u64> = chunk_hints(near, brk).collect();
        // Nothing fits below 0x400000; the first hint ends 2 MiB (or a
        // little more) under the break.
        let top_under = (brk - CHUNK - 2 * MIB) & !(2 * MIB - 1);
        assert_eq!(hints[0], top_under);
        assert_eq!(hints[1], top_under - 64 * MIB);
        // No hint lies across the break or in the 64 MiB above it.
        for &h in &hints {
            assert!(h + CHUNK <= brk || h >= brk + 64 * MIB, "{h:#x}");
            assert!(h >= 0x10000);
        }
        // The heap right after the executable: no room under it, so the
        // farthest hint above (896 MiB up), leaving the heap 891 MiB.
        let brk = 0x400000 + 5 * MIB;
        let hints: Vec<u64> = chunk_hints(near, brk).collect();
        assert_eq!(hints[0], 0x400000 + 14 * 64 * MIB);
        assert!(hints.iter().all(|&h| h >= brk + 64 * MIB));
        // A library at 0x7f00_0000_0000, the heap far below: below it
        // first, 896 MiB down, then upward.
        let lib = 0x7f00_0012_3456;
        let hints: Vec<u64> = chunk_hints(lib, 0x5555_6000_0000).collect();
        assert_eq!(hints[0], 0x7f00_0000_0000 - 14 * 64 * MIB);
        assert_eq!(hints[13], 0x7f00_0000_0000 - 64 * MIB);
        assert_eq!(hints[14], 0x7f00_0000_0000 + 14 * 64 * MIB);
        assert_eq!(hints.len(), 28);
    }
}
