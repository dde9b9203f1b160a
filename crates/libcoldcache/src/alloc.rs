//! The library's own memory allocator, backed by `mmap`.
//!
//! coldcache's tables are large and short-lived. Taking them from the
//! program's `malloc` would change the program's heap: glibc raises its
//! mmap threshold when a large mapped chunk is freed, after which the
//! program's own large `calloc`s come from the heap and get zeroed by hand,
//! and the heap top moves. A captured program would then run different
//! allocator code than it does alone. Everything the library allocates
//! therefore comes from here and never touches the program's heap.
//!
//! The mappings themselves go to a region of their own, far below where
//! the kernel places the program's mappings (top-down from under the
//! stack) and far from its executable and heap, so the tables of a capture
//! (whatever their size, whatever the mode) do not move the addresses the
//! program's own `mmap` and `malloc` return. (The library's own image, its
//! handler stacks and its writer thread's stack still take their place
//! among the program's mappings when it is loaded.)
//!
//! Small blocks (up to 1 MiB) are power-of-two size classes carved from
//! 4 MiB regions and recycled through free lists; larger blocks are their
//! own mappings. A spin lock guards the state; nothing here runs in a
//! signal handler (the handlers never allocate).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

const MIN_SHIFT: u32 = 4; // 16-byte blocks
const MAX_SHIFT: u32 = 20; // 1 MiB blocks
const CLASSES: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;
const REGION: usize = 4 << 20;
const PAGE: usize = 4096;

struct State {
    free: [*mut u8; CLASSES],
    cur: usize,
    end: usize,
}

/// An allocator that takes its memory from `mmap` only.
pub struct MmapAlloc {
    lock: AtomicBool,
    state: UnsafeCell<State>,
}

// SAFETY: `state` is only accessed with `lock` held.
unsafe impl Sync for MmapAlloc {}

impl MmapAlloc {
    /// An empty allocator.
    pub const fn new() -> Self {
        MmapAlloc {
            lock: AtomicBool::new(false),
            state: UnsafeCell::new(State {
                free: [std::ptr::null_mut(); CLASSES],
                cur: 0,
                end: 0,
            }),
        }
    }

    fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held, so this is the only reference.
        let r = f(unsafe { &mut *self.state.get() });
        self.lock.store(false, Ordering::Release);
        r
    }
}

impl Default for MmapAlloc {
    fn default() -> Self {
        Self::new()
    }
}

/// Maps `len` bytes in the allocator's region (`coldcache_capture::grow`'s
/// `heap_address`, which the capture also checks the program's mappings
/// against), or anywhere if the region is taken.
fn map(len: usize) -> *mut u8 {
    let len_aligned = (len + (2 << 20) - 1) & !((2 << 20) - 1);
    for _ in 0..64 {
        let at = coldcache_capture::grow::heap_address(len_aligned as u64) as usize;
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            continue;
        }
        if p as usize == at {
            return p as *mut u8;
        }
        // A kernel that took the address as a hint only.
        // SAFETY: unmapping the mapping just made elsewhere.
        unsafe { libc::munmap(p, len) };
        break;
    }
    // SAFETY: an anonymous private mapping has no preconditions.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p as *mut u8
    }
}

/// The block size used for `layout`, or `None` for a large block.
fn class_of(layout: Layout) -> Option<(usize, usize)> {
    let size = layout.size().max(layout.align()).max(1 << MIN_SHIFT);
    let block = size.checked_next_power_of_two()?;
    let shift = block.trailing_zeros();
    (shift <= MAX_SHIFT).then_some(((shift - MIN_SHIFT) as usize, block))
}

fn large_len(layout: Layout) -> usize {
    (layout.size() + PAGE - 1) & !(PAGE - 1)
}

// SAFETY: blocks are disjoint, at least as large and as aligned as asked
// (a power-of-two block carved at a multiple of its size; mappings are
// page-aligned and larger alignments are refused), and freed blocks are only
// handed out again after `dealloc`.
unsafe impl GlobalAlloc for MmapAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some((class, block)) => self.with_state(|s| {
                let head = s.free[class];
                if !head.is_null() {
                    // SAFETY: a free block stores the next free block's
                    // address in its first word.
                    s.free[class] = unsafe { *(head as *mut *mut u8) };
                    return head;
                }
                let mut start = (s.cur + block - 1) & !(block - 1);
                if s.cur == 0 || start + block > s.end {
                    let len = REGION.max(block);
                    let p = map(len);
                    if p.is_null() {
                        return p;
                    }
                    s.cur = p as usize;
                    s.end = p as usize + len;
                    start = (s.cur + block - 1) & !(block - 1);
                    if start + block > s.end {
                        return std::ptr::null_mut();
                    }
                }
                s.cur = start + block;
                start as *mut u8
            }),
            None if layout.align() <= PAGE => map(large_len(layout)),
            None => std::ptr::null_mut(),
        }
    }

    /// A large block is a fresh mapping, already zero: it is returned as
    /// is, so its pages are only touched (and faulted in) when used. A
    /// capture's tables are mostly such blocks, and zeroing them by hand
    /// was most of what a start cost. Small blocks may be recycled: they
    /// are zeroed.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            None if layout.align() <= PAGE => map(large_len(layout)),
            None => std::ptr::null_mut(),
            Some(_) => {
                // SAFETY: the caller's layout, passed on.
                let p = unsafe { self.alloc(layout) };
                if !p.is_null() {
                    // SAFETY: the block has `layout.size()` writable bytes.
                    unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
                }
                p
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class_of(layout) {
            Some((class, _)) => self.with_state(|s| {
                // SAFETY: the block is ours and at least 16 bytes: its first
                // word links it into the free list.
                unsafe { *(ptr as *mut *mut u8) = s.free[class] };
                s.free[class] = ptr;
            }),
            None => {
                // SAFETY: a large block is exactly one mapping of this length.
                unsafe { libc::munmap(ptr as *mut libc::c_void, large_len(layout)) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_disjoint_and_recycled() {
        let a = MmapAlloc::new();
        let mut seen = Vec::new();
        for (size, align) in [
            (1, 1),
            (24, 8),
            (100, 64),
            (4096, 4096),
            (3 << 20, 8),
            (16, 16),
        ] {
            let l = Layout::from_size_align(size, align).unwrap();
            // SAFETY: valid layouts; the blocks are written then freed below.
            let p = unsafe { a.alloc(l) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0);
            // SAFETY: the block has `size` writable bytes.
            unsafe { std::ptr::write_bytes(p, 0xAB, size) };
            seen.push((p, l));
        }
        for w in seen.windows(2) {
            let (p, l) = w[0];
            let (q, _) = w[1];
            assert!(q as usize >= p as usize + l.size() || (q as usize) + 16 <= p as usize);
        }
        let (p, l) = seen[1];
        // SAFETY: freeing what was allocated with the same layout.
        unsafe { a.dealloc(p, l) };
        // SAFETY: as above.
        let again = unsafe { a.alloc(l) };
        assert_eq!(again, p, "the freed block is reused");
    }

    #[test]
    fn zeroed_blocks_read_zero_after_a_dirty_block_was_freed() {
        let a = MmapAlloc::new();
        for size in [24, 4096, 1 << 20, 3 << 20] {
            let l = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: a valid layout; the block is written then freed.
            let p = unsafe { a.alloc(l) };
            assert!(!p.is_null());
            // SAFETY: the block has `size` writable bytes.
            unsafe { std::ptr::write_bytes(p, 0xAB, size) };
            // SAFETY: freeing what was allocated with the same layout.
            unsafe { a.dealloc(p, l) };
            // SAFETY: as above; read back below, then freed.
            let z = unsafe { a.alloc_zeroed(l) };
            assert!(!z.is_null());
            // SAFETY: the block has `size` readable bytes.
            let bytes = unsafe { std::slice::from_raw_parts(z, size) };
            assert!(bytes.iter().all(|&b| b == 0), "{size} bytes");
            // SAFETY: freeing what was allocated with the same layout.
            unsafe { a.dealloc(z, l) };
        }
    }
}
