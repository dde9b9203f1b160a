//! Everything the probe asks of the operating system (Linux), in one place:
//! page-aligned anonymous memory with or without transparent huge pages
//! (`mmap`, `madvise`), whether huge pages were granted
//! (`/proc/self/smaps`), and pinning the measuring thread to one CPU
//! (`sched_setaffinity`). The measurement kernels only see [`Buffer`].

use std::fs;
use std::ptr::NonNull;

use crate::ProbeError;

/// The size of a transparent huge page on x86-64.
pub const HUGE_PAGE: usize = 2 << 20;
/// The base page size on x86-64.
pub const PAGE: usize = 4096;

/// Which pages to ask the kernel for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pages {
    /// `MADV_HUGEPAGE` on a 2 MiB aligned range.
    Huge,
    /// `MADV_NOHUGEPAGE`: base 4 KiB pages only.
    Base,
}

/// A private anonymous mapping, zero-filled and already faulted in, seen as
/// `usize` words. Unmapped on drop.
pub struct Buffer {
    /// Start of the whole mapping (for `munmap`).
    map: NonNull<libc::c_void>,
    map_len: usize,
    /// Start of the usable, aligned part.
    data: NonNull<usize>,
    len: usize,
    /// Bytes of the usable part backed by huge pages, as the kernel reports.
    huge_bytes: u64,
}

// SAFETY: the mapping is owned by the `Buffer` alone (nothing else holds its
// address), so moving it to another thread moves sole ownership.
unsafe impl Send for Buffer {}

impl Buffer {
    /// Maps `len` bytes (rounded up to whole pages) with the given page
    /// policy, touches every page so later timing sees no page faults, and
    /// reads back how much of it got huge pages.
    pub fn new(len: usize, pages: Pages) -> Result<Buffer, ProbeError> {
        let align = match pages {
            Pages::Huge => HUGE_PAGE,
            Pages::Base => PAGE,
        };
        let len = len.div_ceil(align) * align;
        let map_len = len + align;
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing has no effect on existing memory; the result is checked.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(ProbeError::Memory {
                bytes: map_len,
                source: std::io::Error::last_os_error(),
            });
        }
        let map = NonNull::new(map).ok_or_else(|| ProbeError::Memory {
            bytes: map_len,
            source: std::io::Error::other("mmap returned null"),
        })?;
        let offset = (align - (map.as_ptr() as usize) % align) % align;
        // SAFETY: offset < align and the mapping is len + align bytes long,
        // so the aligned start and `len` bytes after it are inside it.
        let data = unsafe { map.as_ptr().cast::<u8>().add(offset) };
        let advice = match pages {
            Pages::Huge => libc::MADV_HUGEPAGE,
            Pages::Base => libc::MADV_NOHUGEPAGE,
        };
        // SAFETY: the range is inside our own mapping; madvise only changes
        // how the kernel backs it. Failure (no THP support) is not an error:
        // the report says how many huge pages were granted.
        unsafe {
            libc::madvise(data.cast(), len, advice);
        }
        let data = NonNull::new(data.cast::<usize>()).expect("inside a non-null mapping");
        let mut buf = Buffer {
            map,
            map_len,
            data,
            len,
            huge_bytes: 0,
        };
        // Fault every page in now (writing, so each gets its own frame).
        let words = buf.words_mut();
        let step = PAGE / std::mem::size_of::<usize>();
        for i in (0..words.len()).step_by(step) {
            words[i] = 0;
        }
        buf.huge_bytes = huge_bytes_of(buf.data.as_ptr() as usize, len);
        Ok(buf)
    }

    /// Length in bytes.
    pub fn bytes(&self) -> usize {
        self.len
    }

    /// Bytes backed by huge pages (from `/proc/self/smaps`; 0 when unknown).
    pub fn huge_bytes(&self) -> u64 {
        self.huge_bytes
    }

    /// The memory as words.
    pub fn words(&self) -> &[usize] {
        // SAFETY: `data` points to `len` bytes of our mapping, aligned to at
        // least a page, zero-initialised by the kernel, and borrowed through
        // `&self` for the slice's lifetime.
        unsafe {
            std::slice::from_raw_parts(self.data.as_ptr(), self.len / std::mem::size_of::<usize>())
        }
    }

    /// The memory as mutable words.
    pub fn words_mut(&mut self) -> &mut [usize] {
        // SAFETY: as in `words`, and `&mut self` makes the borrow unique.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.data.as_ptr(),
                self.len / std::mem::size_of::<usize>(),
            )
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `map`/`map_len` are exactly what mmap returned, and no
        // slice of the buffer outlives `self` (they borrow it).
        unsafe {
            libc::munmap(self.map.as_ptr(), self.map_len);
        }
    }
}

/// `AnonHugePages` of the smaps entry containing `addr` (kB → bytes), or 0.
fn huge_bytes_of(addr: usize, len: usize) -> u64 {
    let Ok(text) = fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    let mut inside = false;
    let mut total = 0u64;
    for line in text.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((lo, hi)) = range.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    // A mapping header line: does it overlap our range?
                    inside = lo < addr + len && addr < hi;
                    continue;
                }
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                let kb: u64 = rest
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .unwrap_or(0);
                total += kb * 1024;
            }
        }
    }
    total.min(len as u64)
}

/// Pins the calling thread to the CPU it is running on, so that a
/// measurement is not split between two cores' private caches. Returns the
/// CPU, or `None` when pinning failed (measurements still run).
pub fn pin_to_current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        return None;
    }
    // SAFETY: cpu_set_t is plain data for which all-zero is the empty set;
    // CPU_SET writes inside it (cpu < CPU_SETSIZE is checked), and
    // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return None;
        }
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return None;
        }
    }
    Some(cpu as u32)
}

/// The one-minute load average (`/proc/loadavg`), `None` when unreadable.
pub fn load_average() -> Option<f64> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Whether the kernel offers transparent huge pages at all, from
/// `/sys/kernel/mm/transparent_hugepage/enabled` (`always [madvise] never`).
pub fn thp_mode() -> Option<String> {
    let text = fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}
