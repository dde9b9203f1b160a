//! Reads and writes of this process's memory that cannot fault: an
//! unreadable or unwritable address is an answer (`false`, `None`), never a
//! SIGSEGV inside a signal handler. All go through `process_vm_readv` /
//! `process_vm_writev` on our own pid, which are async-signal-safe.

pub(crate) use coldcache_grow::far_address;

/// Reads `buf.len()` bytes at `addr` into `buf`; false if any byte cannot
/// be read.
pub fn read_bytes(addr: u64, buf: &mut [u8]) -> bool {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: process_vm_readv on our own pid copies into `buf`, a live
    // buffer of the given length, and reports unreadable addresses as an
    // error instead of faulting.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n == buf.len() as isize
}

/// Reads the 8-byte word at `addr`.
pub fn read_word(addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    read_bytes(addr, &mut b).then(|| u64::from_ne_bytes(b))
}

/// Writes the 8-byte word `v` at `addr`; false if it cannot be written.
pub fn write_word(addr: u64, v: u64) -> bool {
    let local = libc::iovec {
        iov_base: &v as *const u64 as *mut libc::c_void,
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: process_vm_writev on our own pid copies from a live local and
    // reports unwritable addresses as an error instead of faulting.
    unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) == 8 }
}
