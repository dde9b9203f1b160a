//! What a program's signal handler sees when its signal interrupted
//! translated code (issue 33): the program's context, not the code cache's.
//!
//! `crate::sigfault` runs the program's SIGSEGV, SIGBUS, SIGFPE and SIGILL
//! handlers from a handler of ours during a capture. In fast mode, before the
//! program's handler runs, [`to_program`] rewrites the signal context of a
//! thread interrupted inside a block's straight-line copies into the
//! program's own: RIP becomes the program address of the instruction about
//! to run (a fault: the faulting one), the block's scratch register S gets
//! back the program's value (`T.s`); every other register, the flags and
//! the vector state are the program's there already (translated code
//! writes nothing else, `translate.rs`). When the handler returns,
//! [`resume`] looks at what it left: the same RIP and general registers
//! (a guard page opened, a signal counted) go back to the very point in
//! the block, whose record then completes as usual; anything else (RIP
//! moved to a recovery label, a register changed) goes on through the
//! dispatcher at the handler's RIP, the instructions of the block that
//! completed before the interruption committed first as a *prefix* record
//! (the block's number with the count in the high 16 bits, replayed one
//! [`Accountant::step`](crate::account::Accountant::step) at a time), so
//! they count as in trap mode.
//!
//! Mapped: a fault (kernel-sent, `si_code > 0`) exactly at an instruction's
//! copy, and any other signal anywhere from after the previous copy up to
//! it (only the block's buffer was written meanwhile); in a `syscall`
//! block, its call's copy and the point right after it (RCX made the
//! program's: the kernel's return address). Not mapped: a point
//! in a block's head (its buffer check) or exit code, a `rep` block, the
//! rest of a `syscall` block, a retired block; there, and in the dispatcher and our own code
//! on the thread's way through it, an asynchronous signal is held back to
//! the next program instruction ([`hold_back`]), except in a `syscall`
//! block; what is neither mapped nor held is counted ([`UNMAPPED`]) and
//! left as before (a code-cache address). Handler context: no allocation; the
//! translator's lock is taken (a thread in translated code never holds
//! it; the dispatcher blocks signals while it does).

use super::state::{HANDLED, HELD_BACK, UNMAPPED};
use super::{in_dispatcher, Tls, TRAP_JMP};
use super::{in_translation, tls, with_jit};
use crate::state::tls::EPOCH;
use iced_x86::Register;
use std::sync::atomic::Ordering;

/// A record's first word: the block's number, and in the bits from
/// [`PREFIX_SHIFT`] up the number of its first instructions that ran (0:
/// the whole block).
pub(super) const PREFIX_SHIFT: u32 = 48;

/// The signal context's `REG_*` index of a general register other than
/// RSP (a scratch register's), -1 for none.
pub(super) fn greg_index(r: Register) -> i8 {
    match r {
        Register::RSP | Register::RIP => -1,
        r => crate::machine::greg_of(r).map_or(-1, |i| i as i8),
    }
}

/// Where a signal found the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interrupted {
    /// Not in this capture's translated code: the context is the
    /// program's already.
    Native,
    /// In a block: the context now is the program's ([`resume`] after the
    /// handler).
    Translated(InBlock),
    /// In translated code at a point not mapped back: left as it was.
    /// `in_call`: in a system call block (its call may be what the
    /// signal interrupts).
    Unmapped { in_call: bool },
}

/// What [`resume`] needs of an interrupted block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InBlock {
    /// Where the block writes its record (`T.cursor` then).
    record: u64,
    /// The record's first word for the instructions that ran (0: none).
    prefix: u64,
    /// Bytes of the block's record.
    size: u16,
    /// S's `REG_*` index and value, and RIP, in the code cache.
    s: i8,
    s_value: u64,
    rip: u64,
    /// The program's general registers as the handler got them.
    gregs: [i64; 18],
    /// Interrupted in a `syscall` block's call (`T.blocked` still set).
    call: bool,
}

impl InBlock {
    /// Whether the thread was at a `syscall` block's call (its copy, or
    /// right after it).
    pub(crate) fn at_call(&self) -> bool {
        self.call
    }
}

/// Makes `uc` the program's context if it interrupted this thread's
/// translated code (see the module header); `fault`: the kernel sent the
/// signal for the instruction at RIP.
pub(crate) fn to_program(uc: &mut libc::ucontext_t, fault: bool) -> Interrupted {
    if !in_translation() {
        return Interrupted::Native;
    }
    let g = &mut uc.uc_mcontext.gregs;
    let rip = g[libc::REG_RIP as usize] as u64;
    // Where RIP is: `None` in no block (not translated code), `Some(None)`
    // in a block at a point not mapped, else (instruction index, its
    // program address, block number, the block's record bytes, S's REG_*
    // index, and where in the block's head RCX is taken when RIP is in the
    // head: its code address).
    // Signals blocked while the translator's lock is held, as everywhere
    // else it is taken: this handler runs with the program's mask, and a
    // signal whose handler stops the capture (a fatal one) or a second
    // fault here would wait for ever on the lock this frame holds.
    let mask = super::block_signals();
    let found =
        with_jit(|j| {
            let j = j.as_deref()?;
            let (id, b) =
                j.blocks.as_slice().iter().enumerate().find(|(_, b)| {
                    b.code != 0 && rip >= b.code && rip < b.code + u64::from(b.len)
                })?;
            Some((|| {
                if b.scratch < 0 && !b.rep && b.sys_ret >= 2 && !fault {
                    // A `syscall` block: mapped at its call's copy, where
                    // every register is the program's (the dispatcher
                    // sends signals pending before an inline call there,
                    // `jit::dispatch`), and right after it (a signal that
                    // interrupted a wait, or came as it returned), where
                    // all are but RCX (`translate::Block::sys_ret`).
                    let first = j.instrs.as_slice().get(b.first as usize).ok_or(true)?;
                    let after = b.code + u64::from(b.sys_ret);
                    return if rip == after {
                        Ok(Found::Call(first.ip, true))
                    } else if rip == after - 2 {
                        Ok(Found::Call(first.ip, false))
                    } else {
                        Err(true)
                    };
                }
                if b.scratch < 0 || b.rep {
                    return Err(!b.rep);
                }
                let instrs =
                    &j.instrs.as_slice()[b.first as usize..b.first as usize + usize::from(b.count)];
                let k = instrs
                    .iter()
                    .position(|i| rip <= b.code + u64::from(i.check))
                    .ok_or(false)?;
                let at = b.code + u64::from(instrs[k].check);
                // A fault is at the copy itself; another signal may come
                // anywhere after the previous copy, or, for the first, anywhere
                // in the block's head (`translate::Head`).
                if rip != at && (fault || (k == 0 && b.head_rcx == 0)) {
                    return Err(false);
                }
                let head = (k == 0 && rip != at).then(|| (b.code, b.code + u64::from(b.head_rcx)));
                Ok(Found::Copy(k, instrs[k].ip, id, b.size, b.scratch, head))
            })())
        });
    super::restore_signals(&mask);
    let (k, ip, id, size, s, head) = match found {
        None => return Interrupted::Native,
        Some(Err(in_call)) => return Interrupted::Unmapped { in_call },
        Some(Ok(Found::Call(pc, after))) => {
            // Before the call: RIP becomes the `syscall`'s. After it: RIP
            // and RCX (which `syscall` sets to the return address) become
            // the program's, `pc + 2`.
            let (rcx, back_at) = (g[libc::REG_RCX as usize] as u64, rip);
            // Also before it when the kernel restarted the call (RIP moved
            // back onto the copy, RCX still its return address).
            if after || rcx == rip + 2 {
                g[libc::REG_RCX as usize] = (pc + 2) as i64;
            }
            g[libc::REG_RIP as usize] = (pc + if after { 2 } else { 0 }) as i64;
            HANDLED.fetch_add(1, Ordering::Relaxed);
            let mut gregs = [0i64; 18];
            gregs.copy_from_slice(&g[..18]);
            // SAFETY: this thread's own state (as below).
            let t = unsafe { &*tls::this() };
            return Interrupted::Translated(InBlock {
                record: t.cursor,
                prefix: 0,
                size: 0,
                s: libc::REG_RCX as i8,
                s_value: rcx,
                rip: back_at,
                gregs,
                call: true,
            });
        }
        Some(Ok(Found::Copy(k, ip, id, size, s, head))) => (k, ip, id, size, s, head),
    };
    // SAFETY: this thread's own state; its translated code is interrupted
    // (by this handler), so nothing else of this thread touches it now.
    let t = unsafe { &mut *tls::this() };
    // The record the block writes, the first word of its instructions that
    // ran, S's value and RIP to go back to if the handler changes nothing.
    let (record, prefix, s_value, back_at) = match head {
        Some((code, rcx_load)) => {
            // In the head: the first instruction has not run, nothing is
            // committed. S and RCX are the program's, or in their spills
            // (`translate::Head`); the thread restarts the head from its
            // first instruction if the handler changes nothing.
            if rip != code {
                g[s as usize] = t.s_spill as i64;
            }
            if rip > rcx_load {
                g[libc::REG_RCX as usize] = t.rcx_spill as i64;
            }
            (t.cursor, 0, g[s as usize] as u64, code)
        }
        None => {
            let record = g[s as usize] as u64;
            if record != t.cursor {
                // Not the record this block writes: do not touch the buffer.
                return Interrupted::Unmapped { in_call: false };
            }
            g[s as usize] = t.s_spill as i64;
            let prefix = if k > 0 {
                id as u64 | ((k as u64) << PREFIX_SHIFT)
            } else {
                0
            };
            (record, prefix, record, rip)
        }
    };
    g[libc::REG_RIP as usize] = ip as i64;
    HANDLED.fetch_add(1, Ordering::Relaxed);
    let mut gregs = [0i64; 18];
    gregs.copy_from_slice(&g[..18]);
    Interrupted::Translated(InBlock {
        record,
        prefix,
        size,
        s,
        s_value,
        rip: back_at,
        gregs,
        call: false,
    })
}

/// Where [`to_program`] found an interrupted thread in a block.
enum Found {
    /// Before instruction `k` at `ip` of block `id` (its record's bytes,
    /// its S, where in its head).
    Copy(usize, u64, usize, u16, i8, Option<(u64, u64)>),
    /// At the call's copy (false) or right after it (true), in the
    /// `syscall` block whose instruction is at this address.
    Call(u64, bool),
}

/// The program's handler returned to a context [`to_program`] made the
/// program's (`b`): unchanged (RIP, flags, general registers), the thread
/// goes back to its point in the block; else on at the RIP the handler
/// left, through the dispatcher, with the registers it left, the block's
/// completed instructions committed first.
pub(crate) fn resume(uc: &mut libc::ucontext_t, b: &InBlock) {
    // SAFETY: this thread's own state (see `to_program`).
    let t = unsafe { &mut *tls::this() };
    let g = &mut uc.uc_mcontext.gregs;
    if g[..18] == b.gregs {
        g[b.s as usize] = b.s_value as i64;
        g[libc::REG_RIP as usize] = b.rip as i64;
        return;
    }
    if b.call {
        // The block's clearing of `T.blocked` after its call is skipped.
        t.blocked = 0;
    }
    // Unless the handler stopped the capture (its buffer replayed then).
    if b.prefix != 0 && t.cursor == b.record {
        // SAFETY: `record` is where the block writes its record, in the
        // thread's buffer (it passed the full check: `size` bytes fit).
        unsafe { *(b.record as *mut u64) = b.prefix };
        t.cursor = b.record + u64::from(b.size);
    }
    t.next = g[libc::REG_RIP as usize] as u64;
    t.from = 0;
    g[libc::REG_RIP as usize] = t.dispatch as i64;
}

/// An asynchronous program signal (not a fault) whose handler
/// [`to_program`] could not give the program's context (`how`): in a
/// block's head or exit code, a `rep` block, the dispatcher, or our own
/// code on the thread's way through the dispatcher. Where the thread is
/// sure to reach the dispatcher's hand-back trap soon, the signal is held
/// back, as DynamoRIO delays a signal that arrives in its own code: it is
/// blocked in the context the handler returns to, queued again to this
/// thread with its `siginfo` (`rt_tgsigqueueinfo`), and the thread's next
/// buffer check sends it to the dispatcher, which hands it to the trap
/// engine for one instruction; the trap there ([`super::take_back`])
/// unblocks it in the program's own context, where it is delivered, before
/// that instruction runs. True: held back, the program's handler is not
/// run now. Else the point is counted ([`UNMAPPED`]) if it is not the
/// program's.
///
/// Not held back (`can_hold` false): a fault, which the kernel raises again
/// at its instruction; a handler installed with `SA_RESETHAND` (the
/// kernel has reset its disposition: a second delivery would find
/// `SIG_DFL`). Nor in a system call block, whose call the signal may be
/// interrupting, nor while the dispatcher prepares a call the block makes
/// itself (`T.blocked`): the program must run its handler before it sees
/// `EINTR`, and before a call the signal should be able to interrupt
/// (signals held earlier are let through there, `dispatch`). Our own
/// code counts only on the thread's dispatcher stack. A thread leaving
/// translated code untraced after its dispatcher has made its last
/// decision is left as before (counted).
pub(crate) fn hold_back(
    uc: &mut libc::ucontext_t,
    sig: i32,
    info: *const libc::siginfo_t,
    how: &Interrupted,
    can_hold: bool,
) -> bool {
    if !super::is_on() {
        return false;
    }
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    // SAFETY: this thread's own state; the handler runs on the thread.
    let t = unsafe { &mut *tls::this() };
    let current = t.epoch == EPOCH.load(Ordering::Acquire);
    // Our own code counts only on the dispatcher's stack: elsewhere (the
    // interposed `syscall`, a wrapper around a program handler) the thread
    // may never come to the dispatcher's final jump.
    let rsp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
    let on_dispatch_stack = t.stack_map != 0 && rsp >= t.stack_map && rsp < t.stack_top;
    let ours = in_dispatcher(rip)
        || rip == TRAP_JMP.load(Ordering::Relaxed)
        || (crate::signal_state::engine::in_own_text(rip) && on_dispatch_stack);
    let (unmapped, comes_back) = match *how {
        Interrupted::Translated(_) => return false,
        Interrupted::Unmapped { in_call } => (true, !in_call),
        Interrupted::Native => {
            let unmapped = ours && current && (t.active != 0 || t.leaving != 0 || t.trap_once != 0);
            // The dispatcher sends an active thread back to itself (below);
            // one handed to the trap engine, or leaving with TF for held
            // signals, traps at its final jump.
            (
                unmapped,
                unmapped && (t.active != 0 || t.trap_once != 0 || t.trap_leave != 0),
            )
        }
    };
    if !unmapped {
        return false;
    }
    // A thread about to make, or in, a call its block makes itself
    // (`T.blocked`): the signal must be able to interrupt that call, so
    // it is held only if the dispatcher has the thread trap before it
    // (`T.trap_leave`, set in `jit::dispatch`).
    let comes_back = comes_back && (t.blocked == 0 || t.trap_leave != 0);
    if !(can_hold && comes_back && (1..=64).contains(&sig) && queue_blocked(sig, info)) {
        UNMAPPED.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    let bit = 1u64 << (sig - 1);
    // The first word of the mask the handler's return restores holds
    // signals 1 to 64.
    // SAFETY: `uc_sigmask` is a kernel sigset of at least 8 bytes, in the
    // context this handler owns.
    unsafe { *(&mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64) |= bit };
    t.deferred |= bit;
    if t.active != 0 && current && t.fill == 0 && t.trap_leave == 0 && t.trap_once == 0 {
        // (With the final jump's trap to come, none is needed.)
        super::fill_ahead(t);
    }
    HELD_BACK.fetch_add(1, Ordering::Relaxed);
    true
}

/// Blocks `sig` on this thread now (a handler with `SA_NODEFER` would
/// otherwise take it again at once) and queues it to the thread again with
/// `info`; false, the mask as it was, if it cannot be queued.
fn queue_blocked(sig: i32, info: *const libc::siginfo_t) -> bool {
    let set = [1u64 << (sig - 1)];
    let mut old = [0u64];
    let mask = |how: i32, set: &[u64; 1], old: &mut [u64; 1]| {
        crate::grow::sys6(
            libc::SYS_rt_sigprocmask,
            [
                how as u64,
                set.as_ptr() as u64,
                old.as_mut_ptr() as u64,
                8,
                0,
                0,
            ],
        )
    };
    mask(libc::SIG_BLOCK, &set, &mut old);
    let queued = crate::grow::sys6(
        libc::SYS_rt_tgsigqueueinfo,
        [
            u64::from(std::process::id()),
            u64::from(crate::state::gettid()),
            sig as u64,
            info as u64,
            0,
            0,
        ],
    ) == 0;
    if !queued && old[0] & set[0] == 0 {
        mask(libc::SIG_UNBLOCK, &set, &mut old);
    }
    queued
}

/// Whether this thread is at a call its block made after replaying its
/// buffer (`T.blocked`: nothing of it is unreplayed).
pub(crate) fn call_flushed() -> bool {
    // SAFETY: this thread's own state.
    unsafe { (*tls::this()).blocked != 0 }
}

/// The program's handler of `sig` runs now (not held back): a hold of
/// the same signal still marked (it was delivered by another way, e.g.
/// a mask restored by `siglongjmp`) is forgotten, so that its bit is never
/// unblocked later in a mask the program set.
pub(crate) fn delivered(sig: i32) {
    if (1..=64).contains(&sig) {
        // SAFETY: this thread's own state.
        let t = unsafe { &mut *tls::this() };
        t.deferred &= !(1u64 << (sig - 1));
    }
}

/// At the dispatcher's hand-back trap, in the program's context `uc`:
/// the signals [`hold_back`] held are unblocked in the mask the handler's
/// return restores (the program's own, which did not block them when
/// they came), so they are delivered there.
pub(super) fn let_through(uc: &mut libc::ucontext_t, t: &mut Tls) {
    let held = std::mem::take(&mut t.deferred);
    if held != 0 {
        // SAFETY: as in `hold_back`.
        unsafe { *(&mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64) &= !held };
    }
}
