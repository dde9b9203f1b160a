//! `--mode verify`: fast mode whose translated code is single-stepped too,
//! each recorded instruction checked against the trap engine's model on
//! the live registers at the moment it runs.
//!
//! The thread keeps TF set when it is handed to the dispatcher, so every
//! instruction of the code cache traps. At the trap where a block's
//! instruction is about to run (its `check` point: the copy, or for a final
//! control transfer the record's commit), the block's record is at
//! `T.cursor` and holds that instruction's inputs: the model evaluates the
//! instruction's plan once on the live context (as the trap engine would)
//! and once on the recorded registers (as the replay will), and RSP is
//! compared with the block's entry RSP plus the instruction's offset (from
//! which the replay rebuilds the shadow stack). The first difference stops
//! the capture and is reported with the instruction, the block and both
//! access lists. Nondeterminism cannot cause a false difference: both sides
//! are read at the same instant of the same execution.
//!
//! Traps elsewhere in the code cache (instrumentation, exits, the
//! dispatcher's generated code) only keep TF; a trap in the dispatcher's
//! Rust code clears it (the saved flags bring it back when the dispatcher
//! returns), so the dispatcher never runs single-stepped with signals
//! blocked.

use super::state::{Message, CHECKED, FIRST, FOUND, ON};
use super::{tls, with_state, RecordedMachine, TF};
use crate::model::AccessList;
use crate::state::{with_session, RUNNING, STATE, STOPPING};
use core::fmt::Write;
use std::sync::atomic::Ordering;

/// What verification found in a capture.
pub(crate) struct Verified {
    /// Instructions checked.
    pub checked: u64,
    /// The first difference, if any.
    pub difference: Option<String>,
}

/// Whether the capture in progress verifies.
#[inline]
pub(super) fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A new fast-mode capture (normal context).
pub(super) fn reset(on: bool) {
    CHECKED.store(0, Ordering::Relaxed);
    FOUND.store(false, Ordering::Relaxed);
    // SAFETY: no capture runs: nothing writes the message.
    unsafe { (*FIRST.0.get()).len = 0 };
    ON.store(on, Ordering::Release);
}

/// The capture is over (normal context, its threads gone).
pub(super) fn take() -> Option<Verified> {
    if !ON.swap(false, Ordering::AcqRel) {
        return None;
    }
    let difference = FOUND.load(Ordering::Acquire).then(|| {
        // SAFETY: the writer finished before the capture ended.
        let m = unsafe { &*FIRST.0.get() };
        String::from_utf8_lossy(&m.buf[..m.len]).into_owned()
    });
    Some(Verified {
        checked: CHECKED.load(Ordering::Relaxed),
        difference,
    })
}

/// A SIGTRAP on a thread that runs translated code under `--mode verify`
/// (handler context): checks the instruction about to run, if the trap is
/// at one. True when the trap is handled here; false for any other trap
/// (the trap engine's own, a thread handed back to it).
///
/// Cheap when verification is off: the check's frame (a recorded machine,
/// some kilobytes) is only made when it is on. A trap's handler may run
/// on the program's own alternate stack (Rust's runtime arms 8 KiB on
/// every thread), where the kernel's frame already takes 3.5 KiB with
/// AVX-512 state: a frame of 4 KiB made on every trap overflowed it.
/// With verification on, that frame is still made there (the check runs
/// outside the engine's lock, so not on its handler stack): `--mode
/// verify` of a Rust program on an AVX-512 machine may overflow Rust's
/// alternate stack. A debugging mode; the other modes do not make it.
#[inline(always)]
pub(crate) fn verify_trap(uc: &mut libc::ucontext_t) -> bool {
    is_on() && verify_trap_on(uc)
}

/// [`verify_trap`] with verification on.
#[inline(never)]
fn verify_trap_on(uc: &mut libc::ucontext_t) -> bool {
    // SAFETY: this thread's own state; the handler runs on the thread.
    let t = unsafe { &mut *tls::this() };
    if t.active == 0 {
        return false;
    }
    let g = &mut uc.uc_mcontext.gregs;
    let rip = g[libc::REG_RIP as usize] as u64;
    if t.trap_leave != 0 && rip == super::TRAP_JMP.load(Ordering::Relaxed) {
        // The dispatcher's trap for signals it held before a call
        // (`jit::dispatch`): `take_back` lets them through.
        return false;
    }
    if !with_state(|j| j.cache.contains(rip)).unwrap_or(false) {
        // The dispatcher's Rust code (it blocks signals: no trap may come
        // while it runs). Its saved flags restore TF when it returns.
        g[libc::REG_EFL as usize] &= !(TF as i64);
        return true;
    }
    if FOUND.load(Ordering::Relaxed) || STATE.load(Ordering::Acquire) != RUNNING {
        return true;
    }
    let record = t.cursor;
    if record < t.buf_start || record + 16 > t.buf_end {
        return true;
    }
    // SAFETY: `record` lies in the thread's buffer (checked above).
    let (id, entry_rsp) = unsafe { (*(record as *const u64), *((record + 8) as *const u64)) };
    // The instruction whose check point this is, if any.
    let Some((bi, block_pc)) = with_state(|j| {
        let b = j.blocks.as_slice().get(id as usize)?;
        if b.code == 0 || rip < b.code {
            return None;
        }
        let first = b.first as usize;
        j.instrs.as_slice()[first..first + usize::from(b.count)]
            .iter()
            .find(|i| b.code + u64::from(i.check) == rip)
            .map(|i| (*i, b.pc))
    })
    .flatten() else {
        return true;
    };
    // The same check point twice in a row: an instruction the CPU resumes
    // (`Accountant::verify` says which may be).
    let again = std::mem::replace(&mut t.verify_last, rip) == rip;
    CHECKED.fetch_add(1, Ordering::Relaxed);
    let mut recorded = RecordedMachine::of_this_thread();
    // SAFETY: the block is past its body's start (its id is at the cursor
    // and this is one of its check points): the instruction's inputs are
    // written.
    unsafe { recorded.fill(&bi, record) };
    let live_rsp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
    let rebuilt_rsp = entry_rsp.wrapping_add(bi.sp_delta as u64);
    let found = with_session(|cell| {
        let s = cell.as_mut()?;
        // SAFETY: `uc` is the live context of this handler.
        let live = unsafe { crate::machine::ContextMachine::new(uc, &s.layout) };
        let diff = s.acc.verify(bi.ip, again, &live, &recorded);
        let rsp_differs = live_rsp != rebuilt_rsp;
        if diff.is_none() && !rsp_differs {
            return None;
        }
        s.acc
            .set_cut_short("fast-mode verification found a difference (see the notes)");
        Some(diff)
    });
    let Some(diff) = found else { return true };
    if FOUND.swap(true, Ordering::AcqRel) {
        return true;
    }
    // SAFETY: this thread set FOUND first: it alone writes the message.
    let m = unsafe { &mut *FIRST.0.get() };
    let _ = write!(
        m,
        "instruction {:#x} (block at {:#x}, record offset {}): ",
        bi.ip, block_pc, bi.offset
    );
    match diff {
        Some((live, recorded)) => {
            let _ = write!(m, "trap model ");
            list(m, &live);
            let _ = write!(m, ", recorded ");
            list(m, &recorded);
        }
        None => {
            let _ = write!(
                m,
                "RSP {live_rsp:#x}, rebuilt from the record {rebuilt_rsp:#x}"
            );
        }
    }
    STATE.store(STOPPING, Ordering::Release);
    // The writer (if the library runs one) writes the dump; otherwise the
    // program's `coldcache_stop` or exit does.
    crate::doorbell::post(crate::doorbell::Command::Finish);
    true
}

fn list(m: &mut Message, l: &Result<AccessList, crate::model::Unmodelled>) {
    match l {
        Ok(l) => {
            let _ = write!(m, "[");
            for (k, a) in l.as_slice().iter().enumerate() {
                let sep = if k == 0 { "" } else { ", " };
                let _ = write!(m, "{sep}{:?} {:#x}+{}", a.kind, a.addr, a.size);
            }
            let _ = write!(m, "]");
        }
        Err(why) => {
            let _ = write!(m, "unmodelled ({why:?})");
        }
    }
}
