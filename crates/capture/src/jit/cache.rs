//! The code cache's memory: chunks of one `memfd` mapped twice, writable at
//! one address and executable at another (W^X: no page is ever both), the
//! executable view placed within reach of a rel32 (±2 GiB) of the code it
//! translates, so copied RIP-relative operands and direct branches keep
//! working. Chunks are mapped with system calls only (no allocation), so
//! they can be made from the dispatcher or a signal handler.

/// Bytes per chunk.
pub(crate) const CHUNK: u64 = 4 << 20;
/// Chunks a process may map (the cache is bounded: a full cache makes new
/// blocks run under the trap engine).
const MAX_CHUNKS: usize = 64;
/// How far (either way) from the code it translates a chunk may lie.
pub(crate) const REACH: u64 = 1 << 30;

#[derive(Clone, Copy, Default)]
struct Chunk {
    rx: u64,
    rw: u64,
    used: u64,
    /// Bytes at the start that `clear` keeps (the dispatcher).
    kept: u64,
}

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
                let (rx, rw) = map_chunk(near)?;
                self.chunks[self.n] = Chunk {
                    rx,
                    rw,
                    used: 0,
                    kept: 0,
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

/// Maps a chunk twice; the executable view within reach of `near`.
fn map_chunk(near: u64) -> Option<(u64, u64)> {
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
    let done = |r: Option<(u64, u64)>| {
        // SAFETY: closing the fd we created; the mappings keep the file.
        unsafe { libc::close(fd) };
        r
    };
    // SAFETY: sizing the memfd we just created.
    if unsafe { libc::ftruncate(fd, CHUNK as libc::off_t) } != 0 {
        return done(None);
    }
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
        // As far from the code as reach allows first: the program's own
        // mappings grow down from below its libraries and its heap grows up
        // from its executable, and a chunk in their way would move them.
        let base = near & !((2 << 20) - 1);
        let mut found = None;
        'search: for k in (1..=14u64).rev() {
            for hint in [
                base.wrapping_sub(k * (64 << 20)),
                base.wrapping_add(k * (64 << 20)),
            ] {
                // User space ends below 0x7fff_ffff_f000 (47-bit).
                if hint < 0x10000 || hint.saturating_add(CHUNK) > 0x7fff_ffff_0000 {
                    continue;
                }
                if let Some(p) = rx_at(hint, true) {
                    if p.abs_diff(near) + CHUNK < REACH {
                        found = Some(p);
                        break 'search;
                    }
                    // SAFETY: unmapping the mapping just made, far away.
                    unsafe { libc::munmap(p as *mut libc::c_void, CHUNK as usize) };
                }
            }
        }
        found
    };
    match rx {
        Some(rx) => done(Some((rx, rw as u64))),
        None => {
            // SAFETY: unmapping the writable view made above.
            unsafe { libc::munmap(rw, CHUNK as usize) };
            done(None)
        }
    }
}
