//! Restartable sequences (rseq) under the trap engine.
//!
//! A thread that enters an rseq critical section stores the address of its
//! descriptor (`struct rseq_cs`: start, length, abort address) in the
//! `rseq_cs` field of its registered `struct rseq`; whenever the kernel
//! preempts, migrates or signals the thread while its IP lies in the
//! section, it moves the IP to the abort address. Single-stepping delivers
//! a signal after every instruction, so a stepped section was aborted at
//! its first instruction, every time: the program spun for ever (a
//! per-CPU counter of `tests-programs/capture/rseq.c`, 2M instructions and
//! no progress in 60 s).
//!
//! So the trap engine keeps the descriptor itself: the store of a non-zero
//! `rseq_cs` (a 64-bit `mov` to the field, its address computed from the
//! live registers) is accounted for and then skipped, the value and the
//! section's addresses kept in the thread's own state ([`crate::tls`]: the
//! translator's static TLS: handlers may use it); the field stays 0, so the kernel never
//! aborts on our traps. While the thread's IP lies in the kept section,
//! each trap asks the kernel how many times the thread was switched out
//! (`getrusage(RUSAGE_THREAD)`): when that changed since the store, the
//! thread was preempted or migrated, and the trap engine aborts the
//! section as the kernel would have (IP to the abort address, descriptor
//! dropped). The section's last instruction (its commit), when it is a
//! plain store, is made by the trap engine itself ([`commit`]) inside a
//! critical section of its own, whose descriptor the kernel then holds:
//! a preemption between the program's descriptor store and the commit
//! aborts the program's section, wherever it falls, the trap handler's
//! last moments included. Another commit instruction runs with the
//! program's descriptor given back to the field ([`before_return`]),
//! unless the kernel checks rseq at every system call's exit
//! (`CONFIG_DEBUG_RSEQ`, which would kill the program at our handler's
//! `rt_sigreturn`): `record` and `attach` read the kernel's configuration
//! and allow it (`Options::rseq_commit`); not armed when it cannot be
//! read, nor under the C API alone; a preemption after that arming's
//! read-back goes unseen. An IP out of the section drops it (committed,
//! or left through the section's own branch).
//!
//! The commit relies on the kernel clearing `rseq_cs` when it resumes a
//! preempted thread outside the section the field names (every kernel
//! since 4.18, this one 6.18). The reworked rseq of Linux 6.19 looks at
//! the field only after an interrupt from user space: a preemption at the
//! exit of the switch count's own system call then goes unseen (not
//! checked here: no such kernel). Its debug mode (`rseq_debug`) clears the
//! field at every system call's exit instead: a commit that finds it
//! cleared with no switch is left to the program's own store, and after a
//! few the trap engine makes none in the capture (counted in the note).
//!
//! A thread whose tracing ends inside a section (a stop), and a program
//! signal delivered to it there, abort it, as the kernel does on a signal.
//!
//! The registered area is glibc's (`__rseq_offset` from the thread
//! pointer, `__rseq_size` non-zero), found at prepare time in the C
//! library's dynamic symbols. Left out: an area the program registers
//! itself with the `rseq` system call (glibc's tunable off), a program
//! signal delivered inside a section (the kernel would abort it; here the
//! section goes on).
//!
//! Fast mode: translated copies of a section run outside its addresses,
//! where the kernel never aborts them. The translator leaves a store it
//! recognises as a descriptor's ([`stores_descriptor`]) to the trap engine
//! from the start; the replay finds the others ([`replayed_store`]) and
//! retires them, after one buffer's worth ran translated (counted).

use crate::signal_state::rseq::{
    ABORTED, ABORTED_LATE, ARM, CLEARED, COMMITS_ARMED, COMMITS_MADE, COMMIT_OFF, ENTERED, LEARNED,
    LEARNED_LEN, OFFSET, RECOGNISED, TO_RETIRE, TRANSLATED,
};
use iced_x86::{Code, Instruction, OpKind, Register};
use std::sync::atomic::{AtomicU64, Ordering};

/// Offset of `rseq_cs` in `struct rseq`.
const RSEQ_CS: u64 = 8;

/// Finds glibc's registered area (prepare time: maps files, allocates).
/// `commit`: whether commits may be armed (the kernel does not check rseq
/// at every system call's exit; `Options::rseq_commit`).
pub(crate) fn init(commit: bool) {
    ENTERED.store(0, Ordering::Relaxed);
    ABORTED.store(0, Ordering::Relaxed);
    ABORTED_LATE.store(0, Ordering::Relaxed);
    COMMITS_ARMED.store(0, Ordering::Relaxed);
    COMMITS_MADE.store(0, Ordering::Relaxed);
    CLEARED.store(0, Ordering::Relaxed);
    COMMIT_OFF.store(false, Ordering::Relaxed);
    TRANSLATED.store(0, Ordering::Relaxed);
    ARM.store(commit, Ordering::Relaxed);
    if OFFSET.load(Ordering::Relaxed) != i64::MIN {
        return;
    }
    let (Some(off), Some(size)) = (
        crate::objects::global_data_symbol("__rseq_offset"),
        crate::objects::global_data_symbol("__rseq_size"),
    ) else {
        return;
    };
    let (Some(off), Some(size)) = (
        crate::memory::read_word(off),
        crate::memory::read_word(size),
    ) else {
        return;
    };
    if size as u32 != 0 {
        OFFSET.store(off as i64, Ordering::Relaxed);
    }
}

/// The calling thread's `rseq_cs` field, if glibc registered an area.
pub(crate) fn field() -> Option<u64> {
    let off = OFFSET.load(Ordering::Relaxed);
    (off != i64::MIN).then(|| crate::tls::thread_pointer().wrapping_add(off as u64) + RSEQ_CS)
}

/// Times the calling thread was switched out (voluntarily or not).
fn switches() -> u64 {
    // SAFETY: a zeroed rusage is a valid out-parameter; getrusage is
    // async-signal-safe.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) };
    (r.ru_nvcsw as u64).wrapping_add(r.ru_nivcsw as u64)
}

/// The kept state: descriptor, switch count, start, end, abort.
const CS: usize = 0;
const SEEN: usize = 1;
const START: usize = 2;
const END: usize = 3;
const ABORT: usize = 4;

/// The calling thread's kept section, if its IP `rip` lies in it.
fn kept_at(rip: u64) -> Option<[u64; 5]> {
    let k = kept();
    (k[CS] != 0 && rip >= k[START] && rip < k[END]).then_some(k)
}

fn rip_of(uc: &libc::ucontext_t) -> u64 {
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64
}

/// Aborts the kept section of the thread of `uc` (IP to its abort
/// address, descriptor dropped), as the kernel would have.
fn abort(uc: &mut libc::ucontext_t, k: [u64; 5], count: &AtomicU64) {
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] = k[ABORT] as i64;
    set_kept([0; 5]);
    count.fetch_add(1, Ordering::Relaxed);
}

/// Before a traced thread's instruction is accounted for (handler
/// context): drops a kept section the IP has left, and aborts one the
/// thread was switched out of, as the kernel would have.
pub(crate) fn before_step(uc: &mut libc::ucontext_t) {
    if kept()[CS] == 0 {
        return;
    }
    let Some(k) = kept_at(rip_of(uc)) else {
        set_kept([0; 5]);
        return;
    };
    if switches() != k[SEEN] {
        abort(uc, k, &ABORTED);
    }
}

/// After a traced thread's instruction `i` at the IP of `uc` was accounted
/// for, before it runs: when it stores to the thread's `rseq_cs`, keeps the
/// value instead and moves the IP past it (the caller accounts for the
/// next instruction, which runs before the next trap).
pub(crate) fn skip_store(
    uc: &mut libc::ucontext_t,
    i: &Instruction,
    layout: &crate::machine::XsaveLayout,
) -> bool {
    let Some(field) = field() else { return false };
    let (value, ea) = match i.code() {
        Code::Mov_rm64_r64 | Code::Mov_rm64_imm32 => match mov_store(uc, i, layout) {
            Some(v) => v,
            None => return false,
        },
        _ => return false,
    };
    if ea != field {
        return false;
    }
    let word = |o: u64| crate::memory::read_word(value.wrapping_add(o));
    let kept = match value {
        // The program clears `rseq_cs` (nothing to read there).
        0 => [0; 5],
        // No descriptor can lie on the null page: the store is made, as
        // natively.
        1..0x1000 => return false,
        cs => match (word(8), word(16), word(24)) {
            (Some(start), Some(len), Some(abort)) => {
                ENTERED.fetch_add(1, Ordering::Relaxed);
                [cs, switches(), start, start.wrapping_add(len), abort]
            }
            // A descriptor we cannot read: the store is made, as natively
            // (the kernel will find it unreadable too, and end the program).
            _ => return false,
        },
    };
    set_kept(kept);
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] = i.next_ip() as i64;
    true
}

/// The end of a traced thread's trap handler, inside a kept section:
/// - a section the thread was switched out of while the handler ran (the
///   accountant's step takes microseconds, locks included) is aborted now,
///   so the instruction just accounted for does not run on a stale view
///   (it was counted as run, and the abort address's first instruction is
///   not: `ABORTED_LATE`);
/// - before the section's last instruction (its commit) the descriptor goes
///   back to the field: a preemption between here and the commit (the
///   return from this handler is where the scheduler most often acts) is
///   then the kernel's to abort, as natively. The trap after the commit
///   finds the IP past the section, which the kernel does not abort. The
///   switch count is read once more after arming, then the field (see the
///   comment there). Not closed: a timer interrupt in the handler's last
///   instructions, after that read-back.
pub(crate) fn before_return(uc: &mut libc::ucontext_t) {
    if kept()[CS] == 0 {
        return;
    }
    let rip = rip_of(uc);
    let Some(k) = kept_at(rip) else { return };
    if switches() != k[SEEN] {
        abort(uc, k, &ABORTED_LATE);
        return;
    }
    if !ARM.load(Ordering::Relaxed) || rip.wrapping_add(insn_len(rip)) != k[END] {
        return;
    }
    let Some(f) = field() else { return };
    let cs = k[CS];
    // SAFETY: the calling thread's own registered `struct rseq`, which glibc
    // keeps mapped for the thread's life; an aligned 8-byte store, as the
    // program's own would have been.
    unsafe { (f as *mut u64).write_volatile(cs) };
    // A switch at the first count's return (a system call's exit is where
    // the scheduler acts) shows in this count; one at this count's return
    // makes the kernel clear the field (it clears it when it resumes a
    // thread outside the section), which the read-back sees. No system
    // call after it.
    // SAFETY: as above; the kernel writes the field, hence volatile.
    if switches() != k[SEEN] || unsafe { (f as *const u64).read_volatile() } != cs {
        // SAFETY: as above.
        unsafe { (f as *mut u64).write_volatile(0) };
        abort(uc, k, &ABORTED_LATE);
        return;
    }
    COMMITS_ARMED.fetch_add(1, Ordering::Relaxed);
}

// The commits the trap engine makes itself ([`commit`]): one function per
// store width, each the whole critical section of a descriptor of ours
// (`coldcache_rseq_csN`) that glibc's area takes while the function runs.
// `coldcache_rseq_commitN(field, cs, dst, value)`: when the thread's
// `rseq_cs` (`field`) still holds `cs`, stores `value` to `dst` as the
// section's last instruction and returns 1; returns 2 when the field was
// cleared (the kernel clears it when it resumes a preempted thread outside
// any section), 0 when the kernel aborted the section (a preemption,
// migration or signal while in it). The abort address is preceded by glibc's
// signature (`RSEQ_SIG`), as the kernel requires.
macro_rules! commit_fn {
    ($n:literal, $store:literal) => {
        core::arch::global_asm!(
            ".pushsection .text.coldcache_rseq, \"ax\", @progbits",
            ".p2align 4",
            concat!(".globl coldcache_rseq_commit", $n),
            concat!(".hidden coldcache_rseq_commit", $n),
            concat!(".type coldcache_rseq_commit", $n, ", @function"),
            concat!("coldcache_rseq_commit", $n, ":"),
            concat!(".Lcc_rseq_start", $n, ":"),
            "cmp qword ptr [rdi], rsi",
            concat!("jne .Lcc_rseq_fail", $n),
            $store,
            concat!(".Lcc_rseq_end", $n, ":"),
            "mov eax, 1",
            "ret",
            concat!(".Lcc_rseq_fail", $n, ":"),
            "mov eax, 2",
            "ret",
            ".long 0x53053053",
            concat!(".Lcc_rseq_abort", $n, ":"),
            "xor eax, eax",
            "ret",
            concat!(
                ".size coldcache_rseq_commit",
                $n,
                ", . - coldcache_rseq_commit",
                $n
            ),
            ".popsection",
            ".pushsection .data.rel.ro.coldcache_rseq, \"aw\", @progbits",
            ".p2align 5",
            concat!(".globl coldcache_rseq_cs", $n),
            concat!(".hidden coldcache_rseq_cs", $n),
            concat!("coldcache_rseq_cs", $n, ":"),
            ".long 0, 0",
            concat!(".quad .Lcc_rseq_start", $n),
            concat!(".quad .Lcc_rseq_end", $n, " - .Lcc_rseq_start", $n),
            concat!(".quad .Lcc_rseq_abort", $n),
            ".popsection",
        );
    };
}
commit_fn!("1", "mov byte ptr [rdx], cl");
commit_fn!("2", "mov word ptr [rdx], cx");
commit_fn!("4", "mov dword ptr [rdx], ecx");
commit_fn!("8", "mov qword ptr [rdx], rcx");

unsafe extern "C" {
    fn coldcache_rseq_commit1(field: *mut u64, cs: u64, dst: u64, value: u64) -> u64;
    fn coldcache_rseq_commit2(field: *mut u64, cs: u64, dst: u64, value: u64) -> u64;
    fn coldcache_rseq_commit4(field: *mut u64, cs: u64, dst: u64, value: u64) -> u64;
    fn coldcache_rseq_commit8(field: *mut u64, cs: u64, dst: u64, value: u64) -> u64;
}

/// The address of our descriptor for a commit of `size` bytes
/// (`coldcache_rseq_csN`, defined with its function above; taken in asm,
/// which reads nothing).
fn descriptor(size: usize) -> u64 {
    let cs: u64;
    // SAFETY: a RIP-relative `lea` of a hidden symbol of this library: no
    // memory is read or written.
    unsafe {
        match size {
            1 => core::arch::asm!("lea {}, [rip + coldcache_rseq_cs1]", out(reg) cs,
                options(nomem, nostack, pure, preserves_flags)),
            2 => core::arch::asm!("lea {}, [rip + coldcache_rseq_cs2]", out(reg) cs,
                options(nomem, nostack, pure, preserves_flags)),
            4 => core::arch::asm!("lea {}, [rip + coldcache_rseq_cs4]", out(reg) cs,
                options(nomem, nostack, pure, preserves_flags)),
            _ => core::arch::asm!("lea {}, [rip + coldcache_rseq_cs8]", out(reg) cs,
                options(nomem, nostack, pure, preserves_flags)),
        }
    }
    cs
}

/// What [`commit`] did.
pub(crate) enum Commit {
    /// The IP is not at a kept section's commit the trap engine can make.
    No,
    /// The commit was made: the program's next instruction is this one.
    Made(u64),
    /// The section was aborted (the IP moved to its abort address).
    Aborted,
}

/// A traced thread's trap at the last instruction of a kept section (its
/// commit), before that instruction is accounted for: when it is a plain
/// store (`mov` of a register or an immediate, 1 to 8 bytes), the trap
/// engine makes it itself, inside a critical section of its own
/// (`coldcache_rseq_commitN`) with that section's descriptor in the
/// thread's `rseq_cs`:
/// 1. the descriptor of ours goes to the field, the IP outside our section;
/// 2. the switch count is compared with the one kept at the program's
///    descriptor store: a preemption before this count shows in it;
/// 3. our section compares the field with our descriptor (a preemption
///    after the count, with the IP outside our section, made the kernel
///    clear it) and makes the store as its last instruction (a preemption,
///    migration or signal inside it makes the kernel abort it, before the
///    store).
///
/// So no preemption between the program's descriptor store and its commit
/// goes unseen, including one in the trap handler's last moments (which
/// [`before_return`]'s arming could not close: the kernel clears the field
/// when it resumes the thread in the handler, and the commit then ran
/// unguarded). On a failure the program's section is aborted as the kernel
/// would have, before the commit ran. Any other commit instruction is left
/// to [`before_return`].
pub(crate) fn commit(uc: &mut libc::ucontext_t, layout: &crate::machine::XsaveLayout) -> Commit {
    if kept()[CS] == 0 || COMMIT_OFF.load(Ordering::Relaxed) {
        return Commit::No;
    }
    let rip = rip_of(uc);
    let Some(k) = kept_at(rip) else {
        return Commit::No;
    };
    let Some(i) = decode(rip) else {
        return Commit::No;
    };
    if i.next_ip() != k[END] {
        return Commit::No;
    }
    let Some(f) = field() else { return Commit::No };
    let Some((value, dst)) = mov_store(uc, &i, layout) else {
        return Commit::No;
    };
    // A target that cannot be read is left to the program's own store,
    // which faults as it would natively (ours would fault in our code).
    let size = i.memory_size().size();
    let mut probe = [0u8; 8];
    if !matches!(size, 1 | 2 | 4 | 8) || !crate::memory::read_bytes(dst, &mut probe[..size]) {
        return Commit::No;
    }
    let cs = descriptor(size);
    let field = f as *mut u64;
    // SAFETY: the calling thread's own registered `struct rseq`, which glibc
    // keeps mapped for the thread's life; aligned 8-byte stores, as the
    // program's own descriptor store would have been.
    unsafe { field.write_volatile(cs) };
    let result = if switches() != k[SEEN] {
        0
    } else {
        // SAFETY: `field` as above; `dst` was readable just now and is the
        // target of the program's own store, which the kernel lets us make
        // in its place (a plain store of `size` bytes).
        unsafe {
            match size {
                1 => coldcache_rseq_commit1(field, cs, dst, value),
                2 => coldcache_rseq_commit2(field, cs, dst, value),
                4 => coldcache_rseq_commit4(field, cs, dst, value),
                _ => coldcache_rseq_commit8(field, cs, dst, value),
            }
        }
    };
    // SAFETY: as above (the kernel leaves a finished section's descriptor
    // in the field; the program's next section stores its own).
    unsafe { field.write_volatile(0) };
    match result {
        1 => {
            set_kept([0; 5]);
            COMMITS_MADE.fetch_add(1, Ordering::Relaxed);
            Commit::Made(i.next_ip())
        }
        2 if switches() == k[SEEN] => {
            // The field was cleared with no switch: a kernel that checks
            // rseq at every system call's exit and clears a descriptor
            // whose section does not hold the IP (the reworked rseq's
            // `rseq_debug`), here at `switches`' own call. Every commit
            // would fail so, and the section restart for ever: this one is
            // left to the program's own store (unguarded), and after a few
            // the trap engine makes none in this capture.
            if CLEARED.fetch_add(1, Ordering::Relaxed) + 1 >= CLEARED_LIMIT {
                COMMIT_OFF.store(true, Ordering::Relaxed);
            }
            Commit::No
        }
        _ => {
            abort(uc, k, &ABORTED);
            Commit::Aborted
        }
    }
}

/// The value a `mov` to memory `i` (from a register or an immediate, any
/// width) stores in the context `uc`, and its target address; `None` for
/// any other instruction.
fn mov_store(
    uc: &libc::ucontext_t,
    i: &Instruction,
    layout: &crate::machine::XsaveLayout,
) -> Option<(u64, u64)> {
    use crate::model::Machine;
    if i.op0_kind() != OpKind::Memory {
        return None;
    }
    let from_register = match i.code() {
        Code::Mov_rm8_r8 | Code::Mov_rm16_r16 | Code::Mov_rm32_r32 | Code::Mov_rm64_r64 => true,
        Code::Mov_rm8_imm8 | Code::Mov_rm16_imm16 | Code::Mov_rm32_imm32 | Code::Mov_rm64_imm32 => {
            false
        }
        _ => return None,
    };
    // SAFETY: `uc` is the live context of the calling handler.
    let m = unsafe { crate::machine::ContextMachine::new(uc, layout) };
    let value = if from_register {
        m.gpr(i.op1_register())
    } else {
        i.immediate(1)
    };
    let ea = i.virtual_address(0, 0, |reg, _, _| {
        Some(match reg {
            Register::FS | Register::GS => m.segment_base(reg),
            Register::ES | Register::CS | Register::SS | Register::DS => 0,
            Register::RIP => i.next_ip(),
            r => m.gpr(r),
        })
    })?;
    Some((value, ea))
}

/// Fields found cleared with no switch after which [`commit`] stops.
const CLEARED_LIMIT: u64 = 3;

/// The instruction at `ip`, if it can be read and decoded.
fn decode(ip: u64) -> Option<Instruction> {
    let mut bytes = [0u8; 15];
    let first = ((0x1000 - (ip & 0xFFF)) as usize).min(15);
    if !crate::memory::read_bytes(ip, &mut bytes[..first]) {
        return None;
    }
    if first < 15 && !crate::memory::read_bytes(ip + first as u64, &mut bytes[first..]) {
        bytes[first..].fill(0);
    }
    let i = iced_x86::Decoder::with_ip(64, &bytes, ip, iced_x86::DecoderOptions::NONE).decode();
    (!i.is_invalid()).then_some(i)
}

/// The length of the instruction at `ip` (0 when it cannot be read).
fn insn_len(ip: u64) -> u64 {
    decode(ip).map_or(0, |i| i.len() as u64)
}

/// The thread of `uc` is no longer traced (its last trap, or a stop), or
/// a program signal is delivered to it: a kept section it is inside is
/// aborted, as the kernel aborts one on a signal (always legal: the
/// section starts again, natively protected). No system call (this may run
/// under a seccomp filter).
pub(crate) fn leave(uc: &mut libc::ucontext_t) {
    if kept()[CS] == 0 {
        return;
    }
    match kept_at(rip_of(uc)) {
        Some(k) => abort(uc, k, &ABORTED),
        None => set_kept([0; 5]),
    }
}

/// The dump's note on the rseq critical sections of this capture, if any
/// ran under the trap engine.
pub(crate) fn note() -> Option<String> {
    let entered = ENTERED.load(Ordering::Relaxed);
    if entered == 0 && TRANSLATED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let (aborted, late) = (
        ABORTED.load(Ordering::Relaxed),
        ABORTED_LATE.load(Ordering::Relaxed),
    );
    let translated = TRANSLATED.load(Ordering::Relaxed);
    let cleared = match CLEARED.load(Ordering::Relaxed) {
        0 => String::new(),
        n => format!(
            "; {n} commits ran unguarded: the kernel cleared the trap engine's own descriptor at \
             a system call's exit with no switch (an rseq debug mode), and after {CLEARED_LIMIT} \
             it made no more commits itself"
        ),
    };
    let fast = if translated > 0 {
        format!(
            "; {translated} ran as translated code before their descriptor's store was found \
             in its records (the kernel cannot restart those; the store is then left to the \
             trap engine)"
        )
    } else {
        String::new()
    };
    Some(format!(
        "rseq: {entered} critical sections ran under the trap engine, which kept their \
         descriptors, aborted {} of them for a preemption as the kernel would have ({late} at \
         the end of a trap: one instruction counted that did not run), made {} commits itself \
         inside a restartable section of its own and ran {} commits under the kernel's own \
         restart{cleared}{fast}",
        aborted + late,
        COMMITS_MADE.load(Ordering::Relaxed),
        COMMITS_ARMED.load(Ordering::Relaxed)
    ))
}

/// The calling thread's kept state (descriptor, switch count, start, end,
/// abort): static TLS ([`crate::tls`]), so a handler may ask.
#[inline]
fn kept() -> [u64; 5] {
    // SAFETY: reading a field of this thread's own state.
    unsafe { (*crate::tls::this()).rseq }
}

/// Sets the calling thread's kept state.
#[inline]
fn set_kept(v: [u64; 5]) {
    // SAFETY: writing a field of this thread's own state, which only this
    // thread (its code and its signal handlers, never at once) touches.
    unsafe { (*crate::tls::this()).rseq = v };
}

/// The signature the kernel requires in the 4 bytes before an x86 abort
/// handler (`RSEQ_SIG`).
const SIG: u32 = 0x5305_3053;

/// The translator's check of a 64-bit store `i` (after `prev` in the same
/// block, if any): whether it stores the address of an rseq descriptor,
/// recognised by its contents (version 0, an abort address preceded by
/// the kernel's signature, a short section), the value being a constant:
/// an immediate, or a RIP-relative `lea` or `mov`-immediate into the
/// stored register just before (librseq's and tcmalloc's
/// `lea desc(%rip), %rax; mov %rax, 8(%rbx)`). Such a store is left to the
/// trap engine from its first execution, so no section runs translated
/// before the replay would find the store ([`replayed_store`], which
/// stays for the stores this misses: a value loaded from memory, a `lea`
/// in an earlier block). Only while glibc registered an area.
pub(crate) fn stores_descriptor(prev: Option<&Instruction>, i: &Instruction) -> bool {
    if OFFSET.load(Ordering::Relaxed) == i64::MIN || i.op0_kind() != OpKind::Memory {
        return false;
    }
    let value = match i.code() {
        Code::Mov_rm64_imm32 => i.immediate(1),
        Code::Mov_rm64_r64 => {
            let r = i.op1_register();
            match prev {
                Some(p) if p.code() == Code::Lea_r64_m && p.op0_register() == r => {
                    if !p.is_ip_rel_memory_operand() {
                        return false;
                    }
                    p.ip_rel_memory_address()
                }
                Some(p)
                    if matches!(p.code(), Code::Mov_r64_imm64 | Code::Mov_rm64_imm32)
                        && p.op0_kind() == OpKind::Register
                        && p.op0_register() == r =>
                {
                    p.immediate(1)
                }
                _ => return false,
            }
        }
        _ => return false,
    };
    if value < 0x1000 {
        // Not a pointer (a store of 0 clears `rseq_cs`): nothing to read,
        // and no failed read per such store.
        return false;
    }
    let word = |o: u64| crate::memory::read_word(value.wrapping_add(o));
    let (Some(head), Some(start), Some(len), Some(abort)) = (word(0), word(8), word(16), word(24))
    else {
        return false;
    };
    let mut sig = [0u8; 4];
    let found = head as u32 == 0
        && len < 1 << 20
        && !(start..start.wrapping_add(len)).contains(&abort)
        && crate::memory::read_bytes(abort.wrapping_sub(4), &mut sig)
        && u32::from_le_bytes(sig) == SIG;
    if found {
        RECOGNISED.fetch_add(1, Ordering::Relaxed);
    }
    found
}

/// Fast mode's replay of a 64-bit store at `ip` (`len` bytes) to the
/// replaying thread's `rseq_cs` (the caller compares the address): a
/// section ran translated, where the kernel cannot restart it. Counted,
/// and the instruction noted for retirement.
pub(crate) fn replayed_store(ip: u64, len: u8) {
    // A store of the constant 0 clears the field (glibc's thread start):
    // no section.
    let mut bytes = [0u8; 15];
    let n = usize::from(len).min(15);
    if crate::memory::read_bytes(ip, &mut bytes[..n]) {
        let i = iced_x86::Decoder::with_ip(64, &bytes[..n], ip, iced_x86::DecoderOptions::NONE)
            .decode();
        if i.code() == Code::Mov_rm64_imm32 && i.immediate(1) == 0 {
            return;
        }
    }
    TRANSLATED.fetch_add(1, Ordering::Relaxed);
    if LEARNED.iter().any(|l| l.load(Ordering::Relaxed) == ip) {
        return;
    }
    for (l, n) in LEARNED.iter().zip(&LEARNED_LEN) {
        if l.compare_exchange(0, ip, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            n.store(u64::from(len), Ordering::Relaxed);
            TO_RETIRE.fetch_add(1, Ordering::Release);
            return;
        }
    }
}

/// Calls `retire(start, end)` for each store instruction found since the
/// last call (the translator's state is the caller's).
pub(crate) fn take_learned(mut retire: impl FnMut(u64, u64)) {
    if TO_RETIRE.swap(0, Ordering::AcqRel) == 0 {
        return;
    }
    for (l, n) in LEARNED.iter().zip(&LEARNED_LEN) {
        let ip = l.load(Ordering::Acquire);
        let len = n.load(Ordering::Relaxed);
        if ip != 0 && len != 0 {
            retire(ip, ip + len);
        }
    }
}

/// Whether the calling thread holds a kept descriptor (it stays with the
/// trap engine until its section ends).
pub(crate) fn in_section() -> bool {
    kept()[CS] != 0
}
