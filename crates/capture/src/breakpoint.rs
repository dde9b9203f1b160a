//! The function trigger's breakpoint: one `int3` planted at the watched
//! function's entry, removed when it is hit (the original instruction then
//! runs), planted again after the thread stepped over it.
//!
//! The byte is patched with `mprotect` around a one-byte store, which is
//! async-signal-safe, so handlers can plant and remove it.
//!
//! What a hit means is decided elsewhere: the trap engine's `on_breakpoint`
//! (`engine.rs`) asks the accountant (`Accountant::function_entered`:
//! capture this call, or skip it as a warming or uncounted call) and, for a
//! captured call, starts the window on the thread that hit it and, with
//! `--threads`, on every other selected thread (`engine.rs`'s
//! `join_window`, threads listed allocation-free by
//! `procfs::for_each_task`).

pub(crate) use crate::signal_state::breakpoint::{BP_ADDR, BP_LAST, REPLANT_TID};
use crate::signal_state::breakpoint::{BP_ORIG, BP_PLANTED};
use std::sync::atomic::Ordering;

/// Writes one byte of code (a breakpoint or the original byte back).
fn write_code_byte(addr: u64, byte: u8) {
    let page = addr & !0xFFF;
    let len = if (addr & 0xFFF) == 0xFFF {
        0x2000
    } else {
        0x1000
    };
    // SAFETY: the page holds mapped code of this process (the breakpoint
    // address was found in an executable mapping); it is made writable for
    // the one-byte store and then executable-only again. mprotect is
    // async-signal-safe.
    unsafe {
        libc::mprotect(
            page as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
        );
        core::ptr::write_volatile(addr as *mut u8, byte);
        libc::mprotect(
            page as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_EXEC,
        );
    }
}

/// Plants the breakpoint at `addr`, the entry of a function found in an
/// executable mapping of this process.
pub(crate) fn plant(addr: u64) {
    // SAFETY: `addr` is the entry of a function found in an executable
    // mapping of this process; reading one byte of it is valid.
    let orig = unsafe { core::ptr::read_volatile(addr as *const u8) };
    BP_ORIG.store(orig, Ordering::Release);
    BP_LAST.store(addr, Ordering::Release);
    BP_ADDR.store(addr, Ordering::Release);
    write_code_byte(addr, 0xCC);
    BP_PLANTED.store(true, Ordering::Release);
}

/// Plants the breakpoint again at its address, if there is one.
pub(crate) fn replant() {
    let addr = BP_ADDR.load(Ordering::Acquire);
    if addr != 0 {
        write_code_byte(addr, 0xCC);
        BP_PLANTED.store(true, Ordering::Release);
    }
}

/// Removes the breakpoint if it is planted (the address is kept).
pub(crate) fn unplant() {
    let addr = BP_ADDR.load(Ordering::Acquire);
    if addr != 0 && BP_PLANTED.swap(false, Ordering::AcqRel) {
        write_code_byte(addr, BP_ORIG.load(Ordering::Acquire));
    }
}

/// Removes the breakpoint for good (the capture is finishing).
pub(crate) fn clear() {
    unplant();
    BP_ADDR.store(0, Ordering::Release);
    REPLANT_TID.store(0, Ordering::Release);
}

/// A thread hit the breakpoint at `bp`: puts the original byte back so the
/// instruction can run. A thread that loses the race to remove it waits
/// until the winner has put the original byte back, or it would hit the
/// `int3` again.
pub(crate) fn hit(bp: u64) {
    if BP_PLANTED.swap(false, Ordering::AcqRel) {
        write_code_byte(bp, BP_ORIG.load(Ordering::Acquire));
    } else {
        for _ in 0..1_000_000 {
            // SAFETY: `bp` is an address of mapped code of this process.
            if unsafe { core::ptr::read_volatile(bp as *const u8) } != 0xCC {
                break;
            }
            std::hint::spin_loop();
        }
    }
}

/// Whether the byte at `addr` (an address of ours that held a breakpoint)
/// is no longer an `int3`.
pub(crate) fn removed_at(addr: u64) -> bool {
    // SAFETY: `addr` is an address of mapped code of this process.
    unsafe { core::ptr::read_volatile(addr as *const u8) != 0xCC }
}
