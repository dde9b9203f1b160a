//! The fast front end: in-process dynamic binary translation.
//!
//! A traced thread runs copies of the program's basic blocks from a code
//! cache ([`translate`]); each copy stores, before every instruction, the
//! registers the access model reads for it into a per-thread buffer. When a
//! buffer fills, when the thread leaves translated code, and when the
//! capture stops, the buffer is *replayed*: every recorded instruction goes
//! through the same [`Accountant::step`](crate::account::Accountant::step)
//! as in the trap engine, over a [`RecordedMachine`] that answers with the
//! recorded values. Same decoder, same model, same simulator, same
//! counters: both modes count the same accesses by construction.
//!
//! # How a thread moves between the engines
//! - The trap engine starts every capture and every thread exactly as in
//!   trap mode (the first step seeds the shadow stack from the live
//!   context). At a later trap, when the accountant has nothing pending for
//!   the thread ([`Accountant::hand_over_ready`]) and the next instruction
//!   lies in stable code mapped at the start, the SIGTRAP handler clears TF and
//!   sends the thread to the dispatcher instead of stepping it
//!   ([`try_hand_over`]).
//! - The dispatcher (generated code saving every register and the XSAVE
//!   state, then [`dispatch`] on a stack of ours) finds or translates the
//!   block at the program address and jumps to it. A block it cannot
//!   translate (system calls, `rep` strings, ...), the function trigger's
//!   entry and return, and the stop entries go back to the trap engine: the
//!   buffer is replayed, then the thread resumes natively with TF set; the
//!   first trap lands on the dispatcher's last instruction and is turned
//!   into a normal step of that program instruction.
//! - When the capture stops, each translated thread replays its buffer and
//!   resumes natively, untraced, at its next block boundary.
//!
//! # Code that changes
//! Only stable code is translated (files mapped privately without write
//! permission, the vDSO: `prepare`'s ranges). A traced thread's system call
//! that unmaps, remaps or makes writable part of it ([`invalidate`], from
//! the trap engine, before the call) retires the blocks there: their first
//! 8 bytes become a jump to a stub that re-enters the dispatcher, which
//! finds them retired; every thread's lookup table is emptied at once by
//! [`LOOKUP_GEN`]; the range is not translated again in this capture.
//!
//! # Invariants
//! - Translated code writes no flag, no vector register and no program
//!   memory beyond what the program's instructions write (return addresses
//!   are the program's own).
//! - The dispatcher never allocates: tables are reserved in [`prepare`],
//!   code memory and buffers are mapped with system calls.
//! - Locks: the session's (`state.rs`) before the translator's, never the
//!   other way round.

mod cache;
#[cfg(test)]
mod difftest;
mod emit;
mod handed;
mod interrupted;
mod state;
mod sys;
mod translate;
mod verify;

use interrupted::greg_index;
pub(crate) use interrupted::{call_flushed, delivered, hold_back, resume, to_program, Interrupted};
pub(crate) use state::{HANDLED, HELD_BACK, UNMAPPED};
pub(crate) use verify::{verify_trap, Verified};

use crate::account::{BlockSlot, Verdict};
use crate::breakpoint::{self, BP_ADDR};
use crate::grow::{Budget, GrowVec};
use crate::model::{CpuFacts, Machine};
use crate::state::{with_session, ARMED, INSTRUCTIONS, RUNNING, STATE, STOPPING};
use crate::tls::{self, off, Tls, EPOCH, FAST};
pub(crate) use crate::tls::{in_translation, is_on};
use cache::CodeCache;
use emit::{at, fs, jmp_mem, load, pop, push, store, store_simm32, Asm};
use iced_x86::{Code, Instruction, Register};
use state::{
    ACTIVE, DISPATCHES, DISPATCH_ENTRY, DISPATCH_FULL, DISPATCH_SYS, DISPATCH_TRAP, HANDED,
    HANDED_FULL, INTERLEAVE, JIT, JIT_LOCK, LOOKUP_GEN, MAPPED, NULL_CONSUMER, RETIRE_FAILED,
    RUNNERS, SHORT_REPLAYS, TAKEN, TLS_OFFSET, TRAPPED, TRAPPED_BY, TRAP_JMP,
};
use std::cell::UnsafeCell;
use std::sync::atomic::Ordering;
use translate::{Block, BlockInstr, Translator, MAX_INSTRUCTIONS, MAX_RECORD};

/// Why an instruction of a fast-mode capture ran under the trap engine
/// ([`try_hand_over`]'s reasons, in its order), as the dump's note and the
/// summary name them.
pub(crate) const TRAP_CAUSES: [&str; 8] = [
    "sent back for one step (after a block the dispatcher could not run, a system call it replayed, an old translation)",
    "not handed over yet (a thread's first instructions, after a system call, inside a rep string)",
    "in an rseq critical section",
    "at the trigger's breakpoint",
    "on a thread whose thread pointer the program changed",
    "in code outside the read-only file mappings (a JIT's, or code in writable memory)",
    "at the window's end points, or in blocks the translator refuses",
    "on a thread without a record buffer",
];

/// Bytes of a thread's record buffer, and of the non-zero tail after it.
const BUFFER: usize = 1 << 20;
const TAIL: usize = 4096;
/// Bytes of records a thread replays at a time while several threads run
/// translated code (`--schedule os`): each buffer is replayed after about
/// 800 instructions, so the simulator sees the threads' accesses in the
/// order their short buffers filled, under a thousand instructions apart,
/// close enough for coherence and false sharing to show. Each replay takes
/// the session lock, and each change of hands costs a futex wake and a
/// context switch: with 2 KiB (about 200 instructions) four threads of
/// `frame.c` on two cores spent 5.9 CPU s where one thread spent 2.0,
/// with 8 KiB 3.2 (issue 35); false sharing in `false_sharing.c` showed
/// about 14,000 invalidations with 2 KiB, 3,700 with 8 KiB, against 65 for
/// the padded layout in both (the trap engine, interleaving per
/// instruction, about 200,000). A buffer that fills while the lock is held
/// is handed over to the holder instead of waiting (`handed.rs`).
const SHORT: usize = 8192;
/// [`SHORT`] in KiB, for the dump's note.
pub(crate) const SHORT_KIB: usize = SHORT / 1024;
/// Bytes of non-zero words that end a short buffer: a block's full check
/// reads the word right after its record, at most [`MAX_RECORD`] bytes
/// past the cursor.
const MARK: usize = MAX_RECORD + 64;
/// Bytes of a thread's dispatcher stack mapping: its lookup table at the
/// bottom, the stack above.
const STACK: usize = 1 << 20;
/// Entries of a thread's lookup table (direct-mapped).
const LOOKUP: usize = 4096;

/// One entry of a thread's lookup table: the block code for a program
/// address, valid while [`LOOKUP_GEN`] is `gen`.
#[repr(C)]
#[derive(Clone, Copy)]
struct LookupEntry {
    pc: u64,
    code: u64,
    gen: u64,
}
/// Bytes reserved on that stack for the XSAVE area.
const XSAVE_AREA: i32 = 8192;
const TF: u64 = 0x100;

/// Blocks the translator keeps at most in one process: past them, code
/// not translated yet runs under the trap engine (and the summary counts
/// it as sent back). Its tables grow as blocks are made, by mappings
/// (`coldcache_grow`, no allocation in the dispatcher), within
/// [`JIT_MEMORY`]; a large program (rustc with LLVM: about 300,000
/// blocks in a small compile) once found them full at 262,144 blocks
/// and ran 12% of its instructions trapped.
const MAX_BLOCKS: usize = 1 << 24;
/// Bytes the translator's block tables may map (besides the code cache).
const JIT_MEMORY: usize = 4 << 30;
/// Map slots of the block map at first: it doubles as it fills.
const FIRST_KEYS: usize = 1 << 13;

/// Everything the translator keeps: made at the first [`prepare`] of the
/// process, its tables growing as blocks are made.
struct JitState {
    cache: CodeCache,
    translator: Translator,
    blocks: GrowVec<Block>,
    instrs: GrowVec<BlockInstr>,
    /// What the accountant remembers per instruction (parallel to `instrs`).
    slots: GrowVec<BlockSlot>,
    /// Open addressing: program address → block index (keys 0: empty),
    /// a power of two long, at most four fifths full.
    keys: GrowVec<u64>,
    vals: GrowVec<u32>,
    /// What the tables above may map ([`JIT_MEMORY`]).
    budget: Budget,
    /// A growth was refused: no more blocks are made (a refusal by the
    /// kernel is not asked again at every instruction, each try taking
    /// address space).
    full: bool,
    exec: Vec<(u64, u64)>,
    stop_entries: [u64; 2],
    scratch: [BlockInstr; MAX_INSTRUCTIONS],
    /// The allocator set the blocks were translated under
    /// (`objects::fingerprint`).
    allocators: u64,
}

struct JitCell(UnsafeCell<Option<Box<JitState>>>);
// SAFETY: only accessed with `JIT_LOCK` held (see `with_jit`).
unsafe impl Sync for JitCell {}

fn with_jit<R>(f: impl FnOnce(&mut Option<Box<JitState>>) -> R) -> R {
    JIT_LOCK.lock();
    // SAFETY: the lock is held: no other reference to the cell exists.
    let r = f(unsafe { &mut *JIT.0.get() });
    JIT_LOCK.unlock();
    r
}

/// Runs `f` on the translator's state, if there is one (the lock held).
fn with_state<R>(f: impl FnOnce(&JitState) -> R) -> Option<R> {
    with_jit(|j| j.as_deref().map(f))
}

fn mix(x: u64) -> usize {
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize
}

/// Puts `pc → block` in the map `keys`/`vals` (a power of two long, not
/// full).
fn insert_into(keys: &mut [u64], vals: &mut [u32], pc: u64, block: u32) {
    let mask = keys.len() - 1;
    let mut i = mix(pc) & mask;
    while keys[i] != 0 {
        i = (i + 1) & mask;
    }
    keys[i] = pc;
    vals[i] = block;
}

impl JitState {
    fn lookup(&self, pc: u64) -> Option<usize> {
        let (keys, vals) = (self.keys.as_slice(), self.vals.as_slice());
        let mask = keys.len().checked_sub(1)?;
        let mut i = mix(pc) & mask;
        loop {
            match keys[i] {
                0 => return None,
                k if k == pc => return Some(vals[i] as usize),
                _ => i = (i + 1) & mask,
            }
        }
    }

    fn insert(&mut self, pc: u64, block: usize) {
        insert_into(
            self.keys.as_mut_slice(),
            self.vals.as_mut_slice(),
            pc,
            block as u32,
        );
    }

    /// Room for one more block of up to [`MAX_INSTRUCTIONS`], the map
    /// doubled (its entries placed again) once four fifths full; false
    /// when [`MAX_BLOCKS`] or [`JIT_MEMORY`] leaves none.
    fn room_for_a_block(&mut self) -> bool {
        if self.full {
            return false;
        }
        let room = self.try_room_for_a_block();
        self.full = !room;
        room
    }

    fn try_room_for_a_block(&mut self) -> bool {
        let b = &mut self.budget;
        if self.blocks.reserve(1, b).is_err()
            || self.instrs.reserve(MAX_INSTRUCTIONS, b).is_err()
            || self.slots.reserve(MAX_INSTRUCTIONS, b).is_err()
        {
            return false;
        }
        if (self.blocks.len() + 1) * 5 < self.keys.len() * 4 {
            return true;
        }
        let n = (self.keys.len() * 2).max(FIRST_KEYS);
        let mut keys = GrowVec::new(n);
        let mut vals = GrowVec::new(n);
        if keys.extend(0u64, n, b).is_err() || vals.extend(0u32, n, b).is_err() {
            keys.release(b);
            vals.release(b);
            return false;
        }
        for (&k, &v) in self.keys.as_slice().iter().zip(self.vals.as_slice()) {
            if k != 0 {
                insert_into(keys.as_mut_slice(), vals.as_mut_slice(), k, v);
            }
        }
        self.keys.release(b);
        self.vals.release(b);
        self.keys = keys;
        self.vals = vals;
        true
    }

    fn module_end(&self, pc: u64) -> Option<u64> {
        self.exec
            .iter()
            .find(|&&(s, e)| pc >= s && pc < e)
            .map(|&(_, e)| e)
    }

    /// The code of the block at `pc`, translated now if needed; `None`
    /// when it runs under the trap engine.
    fn code_for(&mut self, pc: u64) -> Option<u64> {
        if let Some(b) = self.lookup(pc) {
            let code = self.blocks.at(b).code;
            return (code != 0).then_some(code);
        }
        let end = self.module_end(pc)?;
        if !self.room_for_a_block() {
            return None;
        }
        let id = self.blocks.len();
        let tls = TLS_OFFSET.load(Ordering::Relaxed) as i32;
        let avoid = BP_ADDR.load(Ordering::Acquire);
        let t = self.translator.translate(
            pc,
            end,
            avoid,
            id as u32,
            tls,
            &mut self.cache,
            &mut self.scratch,
        );
        let (code, count, size, rep, len, scratch, head, sys_ret) = match t {
            Some(t) => (
                t.code,
                t.count,
                t.size,
                t.rep,
                t.len as u16,
                t.scratch.map_or(-1, greg_index),
                t.head,
                t.sys_ret,
            ),
            None => (0, 0, 0, false, 0, -1, Default::default(), 0),
        };
        let first = self.instrs.len() as u32;
        let b = &mut self.budget;
        for i in &self.scratch[..count] {
            self.instrs.push(*i, b).expect("room made");
            self.slots
                .push(BlockSlot::recorded(i.ip, i.sp_delta, i.inputs, i.offset), b)
                .expect("room made");
        }
        self.blocks
            .push(
                Block {
                    pc,
                    code,
                    first,
                    count: count as u16,
                    size: size as u16,
                    rep,
                    len,
                    scratch,
                    head_rcx: head.rcx,
                    sys_ret,
                },
                b,
            )
            .expect("room made");
        self.insert(pc, id);
        (code != 0).then_some(code)
    }

    /// Makes the direct exit at `from` jump straight to `code`.
    fn link(&mut self, from: u64, code: u64) {
        let rel = code.wrapping_sub(from + 5) as i64;
        let Ok(rel) = i32::try_from(rel) else { return };
        // SAFETY: `from` is an 8-byte aligned exit stub of ours (it said so
        // in T.from), at least 8 bytes long, in a mapped chunk.
        let mut bytes = unsafe { *(from as *const [u8; 8]) };
        bytes[0] = 0xE9;
        bytes[1..5].copy_from_slice(&rel.to_le_bytes());
        self.cache.write8(from, bytes);
    }

    /// Code in `start..end` is about to change: blocks overlapping it are
    /// retired (their code sends threads back to the dispatcher, which
    /// finds them gone and hands the thread to the trap engine), and
    /// nothing there is translated again in this capture.
    fn retire(&mut self, start: u64, end: u64, tls: i32) {
        if !self.exec.iter().any(|&(s, e)| start < e && end > s) {
            return;
        }
        // The translatable ranges lose `start..end` (split in place; a
        // piece that finds no reserved room is dropped, which only means
        // more trapping).
        let mut i = 0;
        while i < self.exec.len() {
            let (s, e) = self.exec[i];
            if start >= e || end <= s {
                i += 1;
                continue;
            }
            self.exec.swap_remove(i);
            for piece in [(s, start.max(s)), (end.min(e), e)] {
                if piece.0 < piece.1 && self.exec.len() < self.exec.capacity() {
                    self.exec.push(piece);
                }
            }
        }
        for b in 0..self.blocks.len() {
            let Block {
                pc,
                code,
                first,
                count,
                ..
            } = *self.blocks.at(b);
            if code == 0 || count == 0 {
                continue;
            }
            let last = self.instrs.at(first as usize + usize::from(count) - 1).ip;
            if pc < end && last + 15 > start {
                if !self.translator.retire(pc, code, tls, &mut self.cache) {
                    RETIRE_FAILED.store(true, Ordering::Relaxed);
                }
                self.blocks.at_mut(b).code = 0;
            }
        }
    }

    /// Every block is made anew at its next use: its head sends threads to
    /// the dispatcher (as a retired block's), the map forgets it, and the
    /// dispatcher translates its code again (a thread still inside one
    /// finishes it; its records stay valid: blocks are never removed).
    fn retranslate_all(&mut self, tls: i32) {
        for b in 0..self.blocks.len() {
            let Block {
                pc, code, count, ..
            } = *self.blocks.at(b);
            if code == 0 || count == 0 {
                continue;
            }
            if !self.translator.retire(pc, code, tls, &mut self.cache) {
                RETIRE_FAILED.store(true, Ordering::Relaxed);
            }
            self.blocks.at_mut(b).code = 0;
        }
        self.keys.as_mut_slice().fill(0);
    }

    /// Whether the trap engine should keep stepping at `pc`.
    fn stays_trapped(&self, pc: u64) -> bool {
        debug_assert!(self.lookup(pc).is_none_or(|b| self.blocks.at(b).pc == pc));
        self.module_end(pc).is_none()
            || self.stop_entries.contains(&pc)
            || self.lookup(pc).is_some_and(|b| self.blocks.at(b).code == 0)
    }
}

/// Code in `start..end` is about to be unmapped, remapped or made writable
/// by a traced thread (handler context, RIP at the `syscall`): its
/// translations are retired and every thread's lookup table emptied.
pub(crate) fn invalidate(start: u64, end: u64) {
    let tls = TLS_OFFSET.load(Ordering::Relaxed);
    if tls == i64::MIN {
        return;
    }
    with_jit(|j| {
        if let Some(j) = j.as_mut() {
            j.retire(start, end, tls as i32);
            LOOKUP_GEN.fetch_add(1, Ordering::AcqRel);
        }
    });
}

/// Whether `start..end` overlaps the code cache (handler context).
pub(crate) fn in_code_cache(start: u64, end: u64) -> bool {
    with_jit(|j| j.as_ref().is_some_and(|j| j.cache.overlaps(start, end)))
}

/// A traced thread is about to replace, unmap or reprotect memory the
/// fast front end keeps from one capture to the next (chunks, buffers,
/// stacks): no later capture translates ([`TAKEN`]). Handler context.
pub(crate) fn memory_taken() {
    TAKEN.store(true, Ordering::Relaxed);
}

/// See [`MAPPED`] (handler context, before the call).
pub(crate) fn code_mapped() {
    MAPPED.store(true, Ordering::Release);
}

/// When a traced thread may have mapped code since the last look (a
/// `dlopen` during the capture), finds the new stable code in
/// `/proc/self/maps` and lets the translator and the accountant trust it,
/// as code mapped at the start is: without this, every instruction of a
/// library loaded in the window (CPython's C extensions) ran under the
/// trap engine. Handler context: allocation-free (the ranges' room is
/// reserved), the session's lock held.
pub(crate) fn trust_mapped_code(acc: &mut crate::account::Accountant) {
    if !MAPPED.swap(false, Ordering::AcqRel) {
        return;
    }
    with_jit(|j| {
        let Some(j) = j.as_mut() else { return };
        crate::procfs::for_each_self_mapping_file(|start, end, perms, path, file| {
            if crate::procfs::is_stable_code(perms, path)
                && j.exec.len() < j.exec.capacity()
                && !j.exec.iter().any(|&(s, e)| start < e && end > s)
                && (path == b"[vdso]" || crate::codewrite::may_trust(file))
                && acc.trust_code(start, end)
            {
                crate::codewrite::code_file(file);
                j.exec.push((start, end));
            }
        });
    });
}

/// Whether the calling thread is marked late-started (see
/// `Tls::late_start`): static TLS, so a signal handler may ask.
#[inline]
pub(crate) fn late_start() -> bool {
    // SAFETY: reading a field of this thread's own state.
    unsafe { (*tls::this()).late_start != 0 }
}

/// Marks or unmarks the calling thread late-started.
#[inline]
pub(crate) fn set_late_start(on: bool) {
    // SAFETY: writing a field of this thread's own state, which only this
    // thread (its code and its signal handlers, never at once) touches.
    unsafe { (*tls::this()).late_start = u64::from(on) };
}

/// Whether the calling thread, interrupted at `rip`, is in the translated
/// code (or the dispatcher) of an earlier capture: blocked in a system call
/// made there across that capture's stop. The sync signal must leave it
/// alone (stepping the code cache as the program's code would trace our
/// own code); its next dispatch hands it to the trap engine
/// (`dispatch_slow`).
pub(crate) fn in_old_translation(rip: u64) -> bool {
    // SAFETY: reading fields of this thread's own state.
    let t = unsafe { &*tls::this() };
    t.active != 0
        && t.epoch != EPOCH.load(Ordering::Acquire)
        && with_state(|j| j.cache.contains(rip)).unwrap_or(false)
}

/// Prepares a fast-mode capture (normal context): makes the translator's
/// state (or empties it for reuse), generates the dispatcher once per
/// process. `exec`: the file-backed
/// executable ranges; `stop_entries`: where a traced thread leaves.
pub(crate) fn prepare(
    exec: &[(u64, u64)],
    stop_entries: [u64; 2],
    cpu: CpuFacts,
    verify: bool,
    serial: bool,
) -> Result<(), &'static str> {
    let off = tls::offset().ok_or("the translator's thread state is not in static TLS")?;
    if RETIRE_FAILED.load(Ordering::Relaxed) {
        return Err("a translation could not be retired earlier in this process");
    }
    if TAKEN.load(Ordering::Relaxed) {
        return Err("the program mapped over the code cache earlier in this process");
    }
    let xsave_mask = dispatcher_xsave_mask(&cpu)?;
    with_jit(|cell| {
        let old = TLS_OFFSET.swap(i64::from(off), Ordering::Relaxed);
        if old != i64::MIN && old != i64::from(off) {
            return Err("the translator's thread state moved");
        }
        if cell.as_ref().is_some_and(|j| !j.cache.intact()) {
            // Claimed while nothing was traced (the trap engine sees a
            // traced thread's claims): the dispatcher and every
            // translation may be the program's bytes now. Fast mode stays
            // off, as after a claim during a capture.
            TAKEN.store(true, Ordering::Relaxed);
            return Err("the program mapped over the code cache between captures");
        }
        let reuse = ACTIVE.load(Ordering::Acquire) == 0;
        let j = match cell {
            Some(j) if reuse => {
                j.blocks.clear();
                j.instrs.clear();
                j.slots.clear();
                j.keys.as_mut_slice().fill(0);
                j.full = false;
                j.cache.clear();
                j
            }
            Some(j) => {
                // Blocks stay (a thread of the last capture may still run
                // one); what the last accountant remembered goes.
                j.slots
                    .as_mut_slice()
                    .iter_mut()
                    .for_each(BlockSlot::forget);
                if j.allocators != crate::objects::fingerprint() {
                    // Translated under another allocator set (object
                    // tracking switched, another `malloc` resolved): their
                    // records lack the registers tracking reads now.
                    j.retranslate_all(off);
                }
                j
            }
            None => {
                *cell = Some(Box::new(JitState {
                    cache: CodeCache::new(),
                    translator: Translator::new(cpu),
                    blocks: GrowVec::new(MAX_BLOCKS),
                    instrs: GrowVec::new(MAX_BLOCKS * MAX_INSTRUCTIONS),
                    slots: GrowVec::new(MAX_BLOCKS * MAX_INSTRUCTIONS),
                    keys: GrowVec::new(MAX_BLOCKS * 2),
                    vals: GrowVec::new(MAX_BLOCKS * 2),
                    budget: Budget::new(JIT_MEMORY),
                    full: false,
                    exec: Vec::new(),
                    stop_entries,
                    scratch: [BlockInstr {
                        ip: 0,
                        sp_delta: 0,
                        inputs: crate::model::Inputs::NONE,
                        offset: 0,
                        check: 0,
                    }; MAX_INSTRUCTIONS],
                    allocators: 0,
                }));
                cell.as_mut().expect("just set")
            }
        };
        j.allocators = crate::objects::fingerprint();
        j.exec.clear();
        j.exec.extend_from_slice(exec);
        // Room for the pieces `retire` splits ranges into and for code
        // mapped during the capture (handler context).
        j.exec.reserve(512);
        j.stop_entries = stop_entries;
        if DISPATCH_ENTRY.load(Ordering::Relaxed) == 0 {
            generate_dispatcher(&mut j.cache, off, xsave_mask)?;
        }
        Ok(())
    })?;
    NULL_CONSUMER.store(
        coldcache_fsio::env::is_set("COLDCACHE_FAST_NULL_CONSUMER"),
        Ordering::Relaxed,
    );
    EPOCH.fetch_add(1, Ordering::AcqRel);
    LOOKUP_GEN.fetch_add(1, Ordering::AcqRel);
    TRAPPED.store(0, Ordering::Relaxed);
    for c in &TRAPPED_BY {
        c.store(0, Ordering::Relaxed);
    }
    DISPATCHES.store(0, Ordering::Relaxed);
    INTERLEAVE.store(false, Ordering::Release);
    SHORT_REPLAYS.store(0, Ordering::Relaxed);
    HANDED.store(0, Ordering::Relaxed);
    HANDED_FULL.store(0, Ordering::Relaxed);
    handed::map();
    verify::reset(verify);
    sys::configure(serial);
    FAST.store(true, Ordering::Release);
    Ok(())
}

/// What a fast-mode capture reports at its end.
pub(crate) struct FastReport {
    /// Instructions the trap engine stepped.
    pub trapped: u64,
    /// Of those, by cause ([`TRAP_CAUSES`]).
    pub trapped_by: [u64; 8],
    /// Dispatcher entries.
    pub dispatches: u64,
    /// Buffers replayed short because several threads ran translated code
    /// (0: one thread at a time, or `--schedule serial`).
    pub short_replays: u64,
    /// Of those, buffers handed over to the session lock's holder
    /// (`handed.rs`), and the times a thread found its lane full.
    pub handed: u64,
    pub handed_full: u64,
    /// What verification found (`--mode verify`).
    pub verified: Option<Verified>,
}

/// The capture is over: waits (briefly) until every translated thread has
/// replayed its buffer and left, and says what fast mode did, when the
/// capture ran in fast mode.
pub(crate) fn finish() -> Option<FastReport> {
    if !FAST.load(Ordering::Acquire) {
        return None;
    }
    // Finishing from a handler that interrupted this thread's translated
    // code (a fatal signal, a redirect to `finish`): its records up to the
    // last completed block are replayed here, or they would be lost.
    if in_translation() {
        // SAFETY: this thread's own state; it is not in the dispatcher
        // (which blocks signals while it works).
        let t = unsafe { &mut *tls::this() };
        if t.epoch == EPOCH.load(Ordering::Acquire) {
            let mask = block_signals();
            flush(t);
            restore_signals(&mask);
        }
        // Should it return to translated code, its next dispatch finds the
        // capture over and leaves.
        deactivate(t);
    }
    call_back_runners();
    // Wait for this capture's translated threads (a thread an earlier
    // capture left marked active never comes back through the dispatcher),
    // but not for one blocked in a system call with its records replayed
    // (a futex wait may last for ever): what it runs once the call
    // returns comes after the stop; its next dispatch finds the capture
    // over and leaves.
    let running = || {
        this_captures_runners().any(|p| {
            crate::memory::read_word(p + core::mem::offset_of!(Tls, blocked) as u64) != Some(1)
        })
    };
    let t0 = std::time::Instant::now();
    while running() && t0.elapsed().as_millis() < 500 {
        std::thread::yield_now();
    }
    // Buffers handed over by threads that have not come back (blocked, or
    // gone): replayed before the dump is written.
    if handed::ready() {
        let mask = block_signals();
        let mut none = 0;
        crate::state::with_session(|cell| {
            replay_locked(
                cell,
                Owner::this_thread(0),
                EPOCH.load(Ordering::Acquire),
                0,
                0,
                &mut none,
            )
        });
        restore_signals(&mask);
    }
    FAST.store(false, Ordering::Release);
    Some(FastReport {
        trapped: TRAPPED.load(Ordering::Relaxed),
        trapped_by: std::array::from_fn(|i| TRAPPED_BY[i].load(Ordering::Relaxed)),
        dispatches: DISPATCHES.load(Ordering::Relaxed),
        short_replays: SHORT_REPLAYS.load(Ordering::Relaxed),
        handed: HANDED.load(Ordering::Relaxed),
        handed_full: HANDED_FULL.load(Ordering::Relaxed),
        verified: verify::take(),
    })
}

/// Sends this capture's threads in translated code to the dispatcher at
/// their next buffer check (the capture is finishing, or a function window
/// ended on another thread). Threads looping in linked blocks never reach
/// the dispatcher on their own: every word past the block in flight
/// (records start at the cursor, at most MAX_RECORD bytes) is made to read
/// non-zero, so the next check that reaches it goes to the dispatcher,
/// which replays the buffer and leaves. Allocation-free (a trap handler
/// calls it).
pub(crate) fn call_back_runners() {
    if !FAST.load(Ordering::Acquire) {
        return;
    }
    // Not the calling thread's own buffer: it is replaying it now (or is
    // not in translated code).
    let me = tls::this() as u64;
    for p in this_captures_runners().filter(|&p| p != me) {
        let field = |o: usize| crate::memory::read_word(p + o as u64);
        let (Some(cursor), Some(end)) = (
            field(core::mem::offset_of!(Tls, cursor)),
            field(core::mem::offset_of!(Tls, buf_end)),
        ) else {
            continue;
        };
        let from = (cursor + MAX_RECORD as u64 + 8).next_multiple_of(8);
        if cursor != 0 && from < end {
            // SAFETY: the buffer of a thread of this capture in translated
            // code: it stays mapped until that thread exits, which it does
            // through the trap engine, after leaving (and deregistering).
            unsafe { core::ptr::write_bytes(from as *mut u8, 0xFF, (end - from) as usize) };
        }
    }
}

/// Bytes [`fill_ahead`] makes read full: a record's length and a word, so
/// that no run of records from below it steps over it.
const FILL: u64 = MAX_RECORD as u64 + 16;

/// The calling thread, active in translated code, goes to the dispatcher
/// at its next buffer check past the block in flight: as
/// [`call_back_runners`] does it for other threads, but over [`FILL`]
/// bytes only (each check reads the word after its record, and records
/// are at most `MAX_RECORD` bytes, so the checks that follow cannot all
/// miss it); [`unfill`] clears them.
fn fill_ahead(t: &mut Tls) {
    let from = (t.cursor + MAX_RECORD as u64 + 8).next_multiple_of(8);
    if t.cursor == 0 || from >= t.buf_end {
        // Past the buffer's end the words read full already.
        return;
    }
    let len = FILL.min(t.buf_end - from);
    // SAFETY: within this thread's own buffer, mapped while it is active.
    unsafe { core::ptr::write_bytes(from as *mut u8, 0xFF, len as usize) };
    t.fill = from;
}

/// Clears what [`fill_ahead`] filled, once the buffer is replayed (the
/// records below it are zero again): the buffer is as [`wipe`] leaves it,
/// a short buffer's mark cleared too ([`fit`] sets it again).
fn unfill(t: &mut Tls) {
    let from = std::mem::take(&mut t.fill);
    if from == 0 || t.buf_start == 0 {
        return;
    }
    let len = FILL.min(t.buf_end.saturating_sub(from));
    // SAFETY: within this thread's own buffer, where `fill_ahead` wrote.
    unsafe { core::ptr::write_bytes(from as *mut u8, 0, len as usize) };
    if t.limit != t.buf_end {
        let short = t.buf_start + SHORT as u64;
        // SAFETY: as in `fit`.
        unsafe { core::ptr::write_bytes(short as *mut u8, 0, MARK) };
        t.limit = t.buf_end;
    }
}

/// The states of the threads in this capture's translated code. A thread
/// an earlier capture left marked (it jumped out of a handler) may have
/// exited untraced, its state freed: every state is read without faulting.
fn this_captures_runners() -> impl Iterator<Item = u64> {
    let epoch = EPOCH.load(Ordering::Acquire);
    RUNNERS
        .iter()
        .map(|r| r.load(Ordering::Acquire))
        .filter(move |&p| {
            p != 0
                && crate::memory::read_word(p + core::mem::offset_of!(Tls, epoch) as u64)
                    == Some(epoch)
        })
}

/// The trap engine is about to step the thread at `uc`'s RIP. In fast
/// mode, when the thread can leave for translated code there, sends it to
/// the dispatcher instead (TF cleared) and returns true.
pub(crate) fn try_hand_over(
    uc: &mut libc::ucontext_t,
    tid: u32,
    acc: &crate::account::Accountant,
) -> bool {
    // SAFETY: this thread's own state; the handler runs on the thread.
    let t = unsafe { &mut *tls::this() };
    // The note counts the window's instructions only, as the dump does: a
    // warming call's are simulated, counted nowhere.
    let counted = u64::from(!acc.warming(tid));
    let trapped = |cause: usize| {
        TRAPPED.fetch_add(counted, Ordering::Relaxed);
        TRAPPED_BY[cause].fetch_add(counted, Ordering::Relaxed);
        false
    };
    if std::mem::take(&mut t.trap_once) != 0 {
        return trapped(0);
    }
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    let ready = acc.hand_over_ready(tid);
    let stays = if ready.is_none() {
        Some(1)
    } else if crate::rseq::in_section() {
        Some(2)
    } else if rip == BP_ADDR.load(Ordering::Acquire) {
        Some(3)
    } else if i64::from(tls::offset().unwrap_or(i32::MIN)) != TLS_OFFSET.load(Ordering::Relaxed) {
        Some(4)
    } else {
        with_jit(|j| match j.as_ref() {
            None => Some(6),
            Some(j) if j.module_end(rip).is_none() => Some(5),
            Some(j) if j.stays_trapped(rip) => Some(6),
            Some(_) => None,
        })
    };
    if let Some(cause) = stays {
        return trapped(cause);
    }
    if !thread_resources(t) {
        return trapped(7);
    }
    // Still marked active by an earlier capture (it left translated code
    // through a `siglongjmp`, never through the dispatcher): that
    // capture's stop may have filled its buffer past the cursor.
    if t.active != 0 {
        deactivate(t);
        wipe(t);
    }
    unfill(t);
    // Held back by an earlier run of translated code the thread left
    // without the dispatcher (a `longjmp` out of a handler): still blocked
    // by us, so let through now (a bit delivered since is already gone,
    // `interrupted::delivered`).
    interrupted::let_through(uc, t);
    t.trap_leave = 0;
    t.cursor = t.buf_start;
    t.from = 0;
    t.blocked = 0;
    t.leaving = 0;
    t.next = rip;
    t.window = ready.unwrap_or(0);
    t.epoch = EPOCH.load(Ordering::Acquire);
    t.dispatch = DISPATCH_ENTRY.load(Ordering::Relaxed);
    t.dispatch_full = DISPATCH_FULL.load(Ordering::Relaxed);
    t.dispatch_trap = DISPATCH_TRAP.load(Ordering::Relaxed);
    t.dispatch_sys = DISPATCH_SYS.load(Ordering::Relaxed);
    t.tid = u64::from(tid);
    t.active = 1;
    if ACTIVE.fetch_add(1, Ordering::AcqRel) >= 1 && !crate::schedule::on() {
        INTERLEAVE.store(true, Ordering::Release);
    }
    fit(t);
    register(t);
    let g = &mut uc.uc_mcontext.gregs;
    g[libc::REG_RIP as usize] = t.dispatch as i64;
    if !verify::is_on() {
        g[libc::REG_EFL as usize] &= !(TF as i64);
    }
    true
}

/// What [`take_back`] found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Back {
    /// Not a trap at the dispatcher's final jump.
    No,
    /// A thread handed back: step the program instruction at RIP.
    Step,
    /// A thread leaving untraced, trapped only to let its held-back
    /// signals through: TF is cleared, nothing is stepped.
    Left,
}

/// A trap at the dispatcher's final jump (a thread handed back with TF
/// set): moves RIP to the program instruction it was jumping to and says
/// so; the caller then steps that instruction as usual. The context is
/// the program's now: program signals held back on the way
/// ([`interrupted::hold_back`]) are unblocked in it, and are delivered as
/// the handler returns, before that instruction, as natively.
pub(crate) fn take_back(uc: &mut libc::ucontext_t) -> Back {
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    let at = TRAP_JMP.load(Ordering::Relaxed);
    if at == 0 || rip != at {
        return Back::No;
    }
    // SAFETY: this thread's own state.
    let t = unsafe { &mut *tls::this() };
    t.leaving = 0;
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] = t.target as i64;
    interrupted::let_through(uc, t);
    if std::mem::take(&mut t.trap_leave) != 0 && (t.late_start == 0 || t.active != 0) {
        if !(t.active != 0 && verify::is_on()) {
            // (`--mode verify` single-steps an active thread's translated
            // code: its TF stays.)
            uc.uc_mcontext.gregs[libc::REG_EFL as usize] &= !(TF as i64);
        }
        return Back::Left;
    }
    // (A thread the sync signal started on its way out, `late_start`, is
    // stepped on: its tracing starts here.)
    Back::Step
}

/// Whether `rip` lies in the dispatcher before its final jump: a thread
/// that has just left translated code (its state no longer active) runs
/// its way out there, instructions of ours, not the program's. The sync
/// signal may start such a thread: it is stepped on, uncounted, to the
/// final jump ([`take_back`]), never handed over from there (it would
/// then translate our own way out and jump to the dispatcher itself,
/// forever).
pub(crate) fn in_dispatcher(rip: u64) -> bool {
    let entry = DISPATCH_ENTRY.load(Ordering::Relaxed);
    entry != 0 && rip >= entry && rip < TRAP_JMP.load(Ordering::Relaxed)
}

/// The calling thread is exiting: its buffer and dispatcher stack go.
pub(crate) fn release_thread() {
    // SAFETY: this thread's own state.
    let t = unsafe { &mut *tls::this() };
    deactivate(t);
    handed::release(t.tid as u32);
    for (map, len) in [
        (&mut t.stack_map, STACK.next_multiple_of(1 << 21)),
        (&mut t.buf_map, (BUFFER + TAIL).next_multiple_of(1 << 21)),
    ] {
        if *map != 0 {
            // SAFETY: unmapping a mapping this thread made and no longer
            // uses (it is in the trap engine's handler, on another stack).
            unsafe { libc::munmap(*map as *mut libc::c_void, len) };
            *map = 0;
        }
    }
    t.buf_start = 0;
    t.buf_end = 0;
    t.limit = 0;
    t.stack_top = 0;
    t.lookup = 0;
}

/// Maps the thread's dispatcher stack and record buffer if it has none.
fn thread_resources(t: &mut Tls) -> bool {
    // mmap is async-signal-safe; the far region keeps the program's own
    // mappings where they would be without us.
    let map = |len: usize| cache::map_far(len as u64, libc::PROT_READ | libc::PROT_WRITE, -1);
    if t.stack_map == 0 {
        let Some(p) = map(STACK) else { return false };
        t.stack_map = p;
        t.stack_top = (p + STACK as u64) & !63;
        t.lookup = p;
    }
    if t.buf_map == 0 {
        let Some(p) = map(BUFFER + TAIL) else {
            return false;
        };
        t.buf_map = p;
        t.buf_start = p;
        t.buf_end = p + BUFFER as u64;
        t.limit = t.buf_end;
        // SAFETY: the tail lies inside the mapping just made.
        unsafe { core::ptr::write_bytes((p + BUFFER as u64) as *mut u8, 0xFF, TAIL) };
    }
    true
}

/// The general registers and flags the dispatcher saved, as it pushed them.
#[repr(C)]
struct Frame {
    r15: u64,
    r14: u64,
    r13: u64,
    r12: u64,
    r11: u64,
    r10: u64,
    r9: u64,
    r8: u64,
    rdi: u64,
    rsi: u64,
    rbp: u64,
    rbx: u64,
    rdx: u64,
    rcx: u64,
    rax: u64,
    rflags: u64,
}

/// What replaying a buffer decided for the thread.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Replayed {
    /// Keep tracing.
    Go,
    /// This thread is no longer traced.
    Leave,
    /// The capture stops.
    Stop,
}

/// The dispatcher's work, on the thread's dispatcher stack with every
/// register saved in `frame` (general, flags) and the XSAVE area.
extern "C" fn dispatch(frame: *mut Frame) {
    // SAFETY: the generated dispatcher passes the frame it pushed on this
    // thread's dispatcher stack; this thread's own state.
    let (frame, t) = unsafe { (&mut *frame, &mut *tls::this()) };
    let next = t.next;
    let state = STATE.load(Ordering::Acquire);
    let epoch = EPOCH.load(Ordering::Acquire);
    // The common case, an indirect branch or return to a block this thread
    // went to before: its own table, no lock, no system call.
    if t.reason == 0
        && t.from == 0
        && state == RUNNING
        && t.epoch == epoch
        && (t.window == 0 || t.app_rsp <= t.window)
        && next != BP_ADDR.load(Ordering::Acquire)
        && !wants_short(t)
        && t.deferred == 0
    {
        let e = lookup_slot(t, next);
        if e.pc == next && e.gen == LOOKUP_GEN.load(Ordering::Acquire) {
            t.target = e.code;
            return;
        }
    }
    DISPATCHES.fetch_add(1, Ordering::Relaxed);
    let errno = crate::errno::Kept::new();
    // The rest takes locks: a signal handler of the program must not run
    // (and perhaps `siglongjmp` away) while they are held.
    let mut mask = block_signals();
    dispatch_slow(frame, t, next, state);
    if t.blocked != 0 {
        // The block makes a call that may block next (`system_call`): a
        // signal held back, or one that came while signals were blocked
        // here, must come before it and be able to interrupt it. They
        // stay blocked through our way out; one trap at the final jump
        // unblocks them (`take_back`, which steps nothing), and the kernel
        // delivers them at the call's copy, which `to_program` maps to the
        // program's `syscall`.
        // (Never SIGTRAP: blocked, the trap itself would kill the
        // process.)
        let pending = pending_set() & !mask[0] & !(1u64 << (libc::SIGTRAP - 1));
        if t.deferred != 0 || pending != 0 {
            HELD_BACK.fetch_add(u64::from(pending.count_ones()), Ordering::Relaxed);
            t.deferred |= pending;
            mask[0] |= pending;
            t.trap_leave = 1;
            frame.rflags |= TF;
            if t.fill != 0 {
                // The buffer was just replayed (`system_call`): empty.
                unfill(t);
                fit(t);
            }
        }
    }
    if t.leaving != 0 && t.trap_leave == 0 && pending_set() & !mask[0] != 0 {
        // A program signal came while signals were blocked here and is
        // delivered as they are restored, in our code: it is held back
        // (`interrupted::hold_back`) and let through by one trap at the
        // final jump, in the program's context.
        t.trap_leave = 1;
        frame.rflags |= TF;
    }
    // errno first: a signal pending now runs the program's handler.
    drop(errno);
    restore_signals(&mask);
}

/// The signals pending for this thread (1 to 64; none if it cannot be
/// read).
fn pending_set() -> u64 {
    let mut set = [0u64];
    // 8 bytes in a live local: the kernel writes them.
    let r = crate::grow::sys6(
        libc::SYS_rt_sigpending,
        [set.as_mut_ptr() as u64, 8, 0, 0, 0, 0],
    );
    if r == 0 {
        set[0]
    } else {
        0
    }
}

/// The slot of `pc` in the thread's lookup table.
fn lookup_slot(t: &mut Tls, pc: u64) -> &mut LookupEntry {
    let i = (pc ^ (pc >> 12)) as usize & (LOOKUP - 1);
    // SAFETY: `t.lookup` is the bottom of this thread's dispatcher stack
    // mapping, which holds LOOKUP entries below the stack's reach.
    unsafe { &mut *(t.lookup as *mut LookupEntry).add(i) }
}

/// Blocks every signal on this thread (raw system call: glibc's wrapper
/// would leave its own signals open); returns the previous mask.
fn block_signals() -> [u64; 1] {
    let all = [!0u64];
    let mut old = [0u64];
    sigprocmask(libc::SIG_BLOCK, &all, &mut old);
    old
}

fn restore_signals(old: &[u64; 1]) {
    sigprocmask(libc::SIG_SETMASK, old, &mut [0u64]);
}

/// `rt_sigprocmask` with a `syscall` instruction of our own text, not the
/// C library's `syscall` function: a thread leaving translated code
/// unblocks signals here, and a sync signal delivered as the call returns
/// must find it in our code, on its way out (`engine::on_way_out`). At
/// the return into the C library's `syscall`, the program's code as far as
/// the trap engine knew, it was handed over there, and the translated
/// `syscall` returned into `dispatch`: our own code translated, the thread
/// looping in the dispatcher for ever (issue 33: `attach --threads all`
/// of a busy program in fast mode, 7 runs of 10).
fn sigprocmask(how: i32, set: &[u64; 1], old: &mut [u64; 1]) {
    // 8-byte sets in live locals: the kernel reads `set`, writes `old`.
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
    );
}

/// The dispatcher's work when its table does not answer: replays, stops,
/// translations, links (signals blocked).
fn dispatch_slow(frame: &mut Frame, t: &mut Tls, next: u64, state: u8) {
    if t.epoch == EPOCH.load(Ordering::Acquire) && state == ARMED {
        // A function window ended on another thread (`--threads` with
        // `--function`, more calls to come): what this thread ran in it
        // counts, then it leaves until the next window starts it.
        flush(t);
        wipe(t);
        return leave(t, frame, next);
    }
    if t.epoch != EPOCH.load(Ordering::Acquire) && state == RUNNING {
        // A thread of an earlier capture, back from a system call it was
        // blocked in across that capture's stop (the sync signal of this
        // one left it alone in translated code, see `in_old_translation`):
        // the trap engine takes it, and traces it if this capture selects
        // it.
        wipe(t);
        trap_once(t, frame, next);
        return;
    }
    if t.epoch != EPOCH.load(Ordering::Acquire) || !(state == RUNNING || state == STOPPING) {
        wipe(t);
        return leave(t, frame, next);
    }
    if state == STOPPING {
        flush(t);
        wipe(t);
        if crate::state::FINISH_PENDING.swap(false, Ordering::AcqRel) {
            return stop(t, frame, next);
        }
        return leave(t, frame, next);
    }
    if t.deferred != 0 && t.reason != 3 && !crate::objects::is_posix_memalign(next) {
        // A program signal held back (`interrupted::hold_back`): the
        // buffer is replayed and the trap engine takes the next
        // instruction (a system call the trap engine makes too: the
        // signal comes before it), whose trap lets the signal through in
        // the program's context. Not before a call the block makes itself
        // (reason 3: its record is in the buffer, the trap engine would
        // count it twice): `dispatch` lets the signal through before it.
        // (At `posix_memalign`'s entry, which must come here, the call's
        // return does it.)
        let r = flush(t);
        unfill(t);
        return match r {
            Replayed::Go => {
                trap_once(t, frame, next);
            }
            Replayed::Leave => leave(t, frame, next),
            Replayed::Stop => stop(t, frame, next),
        };
    }
    if t.reason == 2 || t.reason == 3 {
        return system_call(frame, t, next);
    }
    if t.flush_ret != 0 && next == t.flush_ret {
        // Back from `posix_memalign` (below): its records replayed now,
        // so the replay reads its out pointer before the caller can
        // overwrite it.
        t.flush_ret = 0;
        match flush(t) {
            Replayed::Go => {}
            Replayed::Leave => return leave(t, frame, next),
            Replayed::Stop => return stop(t, frame, next),
        }
    }
    // A `posix_memalign` call (object tracking on): never in the lookup
    // table nor linked, so every call comes here; its return address is
    // taken out of the table so that the return comes here too.
    let memalign = crate::objects::is_posix_memalign(next);
    if memalign {
        if let Some(ret) = crate::memory::read_word(t.app_rsp) {
            t.flush_ret = ret;
            *lookup_slot(t, ret) = LookupEntry {
                pc: 0,
                code: 0,
                gen: 0,
            };
        }
    }
    if t.reason == 1 && crate::sigvirt::taken_over() {
        // Checked at every full buffer: a thread not traced took SIGTRAP
        // or the sync signal with a `syscall` of its own, so the next trap
        // would go to the program. The capture stops; `finish` takes them
        // back.
        with_session(|cell| {
            if let Some(s) = cell {
                s.acc.set_cut_short(crate::sigvirt::TAKEN);
            }
        });
        STATE.store(STOPPING, Ordering::Release);
        flush(t);
        wipe(t);
        return stop(t, frame, next);
    }
    if wants_short(t) {
        // Another thread started running translated code: what this one
        // recorded so far goes to the simulator now, and its buffer is
        // short from here on.
        match flush(t) {
            Replayed::Go => fit(t),
            Replayed::Leave => return leave(t, frame, next),
            Replayed::Stop => return stop(t, frame, next),
        }
    }
    if t.reason == 1 {
        match flush_or_hand(t) {
            Replayed::Go => {
                // The buffer was full: a point of the thread's own stream,
                // the same in every run, where a turn that reached its
                // quantum (`--schedule serial`) is handed on and waited for.
                crate::schedule::enter(t.tid as u32, || STATE.load(Ordering::Acquire) == RUNNING);
            }
            Replayed::Leave => return leave(t, frame, next),
            Replayed::Stop => return stop(t, frame, next),
        }
    }
    let window_over = t.window != 0 && t.app_rsp > t.window;
    if t.reason == 1
        && t.from == 0
        && !window_over
        && !memalign
        && next != BP_ADDR.load(Ordering::Acquire)
        && STATE.load(Ordering::Acquire) == RUNNING
    {
        // A full buffer, replayed or handed over: the thread's own table
        // first, as `dispatch` looks it up (the translator's lock may be
        // held for a while by a thread replaying handed buffers).
        let e = *lookup_slot(t, next);
        if e.pc == next && e.gen == LOOKUP_GEN.load(Ordering::Acquire) {
            t.target = e.code;
            return;
        }
    }
    let code = if window_over || next == BP_ADDR.load(Ordering::Acquire) {
        None
    } else {
        let from = std::mem::take(&mut t.from);
        with_jit(|j| match j.as_mut() {
            Some(j) if !j.stop_entries.contains(&next) => {
                // Read under the lock that retiring takes: an entry made
                // now is invalid once anything is retired after.
                let gen = LOOKUP_GEN.load(Ordering::Acquire);
                let code = j.code_for(next);
                if let (Some(code), true) = (code, from != 0 && !memalign) {
                    j.link(from, code);
                }
                code.map(|c| (c, gen))
            }
            _ => None,
        })
    };
    match code {
        Some((code, _)) if memalign => t.target = code,
        Some((code, gen)) => {
            t.target = code;
            *lookup_slot(t, next) = LookupEntry {
                pc: next,
                code,
                gen,
            };
        }
        None => match flush(t) {
            Replayed::Go => {
                // Back to the trap engine for this instruction.
                trap_once(t, frame, next);
            }
            Replayed::Leave => leave(t, frame, next),
            Replayed::Stop => stop(t, frame, next),
        },
    }
}

/// A system call block sent the thread here before its `syscall` (at
/// `next`; `jit/sys.rs`). Reason 3, a call that may block: the buffer,
/// the call's record included, is replayed now, so a thread blocked in the
/// call holds nothing unreplayed; under `--schedule serial` the turn is
/// handed on as the trap engine does; the block then makes the call
/// (`T.resume`). Reason 2, a call the trap engine must see (nothing of it
/// recorded): the buffer is replayed and the engine steps the call.
fn system_call(frame: &mut Frame, t: &mut Tls, next: u64) {
    let inline = t.reason == 3;
    match flush(t) {
        Replayed::Go if inline => {
            // An `open` made inline may demote code (`codewrite.rs`): the
            // check the trap engine makes before the calls it steps.
            let change = crate::codewrite::before_call(
                frame.rax as i64,
                [frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8],
            );
            if !matches!(change, crate::codewrite::Change::None) {
                with_session(|cell| {
                    if let Some(s) = cell {
                        crate::codewrite::apply(change, &mut s.acc, invalidate);
                    }
                });
            }
            crate::schedule::syscall(
                t.tid as u32,
                frame.rax,
                frame.rdi,
                frame.rsi,
                crate::memory::read_word,
            );
            t.target = t.resume;
            // Until the call returns (the block clears it), a stop need
            // not wait for this thread: its records are all replayed.
            t.blocked = 1;
        }
        Replayed::Go => {
            trap_once(t, frame, next);
        }
        Replayed::Leave => leave(t, frame, next),
        Replayed::Stop => stop(t, frame, next),
    }
}

/// The trap engine takes the thread for the instruction at `next` (TF on
/// at the dispatcher's final jump, `take_back`); it is handed over again
/// at the trap after that one.
fn trap_once(t: &mut Tls, frame: &mut Frame, next: u64) {
    t.target = next;
    t.trap_once = 1;
    frame.rflags |= TF;
    deactivate(t);
}

/// The thread goes on natively, untraced (without the engine's
/// alternate stack).
fn leave(t: &mut Tls, frame: &mut Frame, next: u64) {
    t.target = next;
    t.leaving = 1;
    if t.deferred != 0 {
        // Program signals held back: one trap at the final jump lets
        // them through in the program's context ([`take_back`]).
        t.trap_leave = 1;
        frame.rflags |= TF;
    } else {
        frame.rflags &= !TF;
    }
    deactivate(t);
    crate::altstack::leave_now();
}

/// The thread no longer runs translated code.
fn deactivate(t: &mut Tls) {
    if t.active != 0 {
        t.active = 0;
        let me = t as *mut Tls as u64;
        if let Some(r) = RUNNERS.iter().find(|r| r.load(Ordering::Relaxed) == me) {
            r.store(0, Ordering::Release);
        }
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Lists the thread among those in translated code.
fn register(t: &mut Tls) {
    let me = t as *mut Tls as u64;
    for r in &RUNNERS {
        if r.compare_exchange(0, me, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// Zeroes the whole buffer (a stop may have filled its free part).
fn wipe(t: &mut Tls) {
    // SAFETY: the thread's own buffer.
    unsafe {
        core::ptr::write_bytes(
            t.buf_start as *mut u8,
            0,
            (t.buf_end - t.buf_start) as usize,
        )
    };
    t.cursor = t.buf_start;
    // The mark of a short buffer is gone with the rest; the tail after
    // `buf_end` is not part of the buffer and stays.
    t.limit = t.buf_end;
    t.fill = 0;
}

/// Whether the thread's buffer should be short now and is not (several
/// threads run translated code, see [`SHORT`]).
#[inline]
fn wants_short(t: &Tls) -> bool {
    t.limit == t.buf_end && INTERLEAVE.load(Ordering::Relaxed)
}

/// Makes the thread's buffer short or whole, as [`INTERLEAVE`] says: moves
/// the non-zero words that end it. Only with the buffer empty (every word
/// before the limit 0).
fn fit(t: &mut Tls) {
    debug_assert_eq!(t.cursor, t.buf_start);
    let short = t.buf_start + SHORT as u64;
    let want = if INTERLEAVE.load(Ordering::Acquire) {
        short
    } else {
        t.buf_end
    };
    if t.buf_start == 0 || t.limit == want {
        return;
    }
    // SAFETY: the thread's own buffer: `short + MARK` lies well inside it
    // (SHORT + MARK < BUFFER), and nothing else writes it while the thread
    // is in the dispatcher or the trap engine.
    unsafe { core::ptr::write_bytes(short as *mut u8, if want == short { 0xFF } else { 0 }, MARK) };
    t.limit = want;
}

/// The capture stopped while replaying this thread's buffer: the thread
/// goes on untraced and the dump is written (as the trap engine does).
fn stop(t: &mut Tls, frame: &mut Frame, next: u64) {
    leave(t, frame, next);
    crate::doorbell::finish_by_writer_or_here(crate::state::own_allocator());
}

/// Forgets the thread's records.
fn discard(t: &mut Tls) {
    let (start, end) = (t.buf_start, t.cursor);
    if end > start {
        // SAFETY: the thread's own buffer, written up to the cursor.
        unsafe { core::ptr::write_bytes(start as *mut u8, 0, (end - start) as usize) };
    }
    t.cursor = start;
}

/// Replays the thread's records through the accountant, then empties the
/// buffer (its words back to 0, which the blocks' full check relies on).
/// Buffers other threads handed over (`handed.rs`) are replayed first.
fn flush(t: &mut Tls) -> Replayed {
    let (start, end) = (t.buf_start, t.cursor);
    if end <= start && !handed::ready() {
        return Replayed::Go;
    }
    if NULL_CONSUMER.load(Ordering::Relaxed) {
        discard(t);
        return Replayed::Go;
    }
    let tid = t.tid as u32;
    let epoch = t.epoch;
    let mut replayed = 0;
    // A short buffer (several threads in translated code) waits its turn.
    let short = t.limit != t.buf_end;
    let r = crate::state::with_session_in_turn(short.then_some(tid), |cell| {
        replay_locked(
            cell,
            Owner::this_thread(tid),
            epoch,
            start,
            end,
            &mut replayed,
        )
    });
    let r = settled(worse(r, recheck(tid)));
    discard(t);
    if short && end > start {
        SHORT_REPLAYS.fetch_add(1, Ordering::Relaxed);
    }
    match r {
        Replayed::Go => crate::schedule::tick(tid, replayed),
        Replayed::Leave | Replayed::Stop => crate::schedule::leave(tid),
    }
    r
}

/// With the session lock held: replays the handed-over buffers (all of
/// them, in turns), then `owner`'s records `start..end` of capture
/// `epoch`, adding to `replayed` the instructions counted.
fn replay_locked(
    cell: &mut Option<Box<crate::state::Session>>,
    owner: Owner,
    epoch: u64,
    start: u64,
    end: u64,
    replayed: &mut u64,
) -> Replayed {
    let Some(s) = cell else {
        handed::drain(None, owner.tid);
        return Replayed::Leave;
    };
    with_jit(|j| {
        let Some(j) = j else {
            handed::drain(None, owner.tid);
            return Replayed::Leave;
        };
        // Other threads' slots count whatever this thread's epoch.
        let before = s.acc.instructions();
        let handed = handed::drain(Some((&mut s.acc, &mut **j)), owner.tid);
        let r = if epoch != EPOCH.load(Ordering::Acquire) {
            Replayed::Leave
        } else if end > start && handed == Replayed::Go {
            replay(&mut s.acc, j, owner, start, end)
        } else {
            Replayed::Go
        };
        *replayed = s.acc.instructions() - before;
        worse(handed, r)
    })
}

/// What a replay decided, once the lock is left: a window that ended in
/// another thread's handed buffer (the state is ARMED now) sends this
/// thread out of translated code too, as `call_back_runners` sends the
/// others (it skips the thread that calls it).
fn settled(r: Replayed) -> Replayed {
    if r == Replayed::Go && STATE.load(Ordering::Acquire) == ARMED {
        Replayed::Leave
    } else {
        r
    }
}

/// After leaving the session lock: buffers handed over while it was held,
/// by a thread that found it taken, are replayed now if the lock is free
/// (whoever holds it otherwise replays them). Says whether they stopped
/// the capture. A few rounds at most: threads that keep handing buffers
/// meanwhile take the lock themselves when it is free (`flush_or_hand`),
/// so the calling thread does not replay theirs for ever.
fn recheck(me: u32) -> Replayed {
    let mut out = Replayed::Go;
    // The lock was left before the lanes are looked at (`handed.rs`).
    std::sync::atomic::fence(Ordering::SeqCst);
    for _ in 0..4 {
        if !handed::ready() {
            break;
        }
        let r = crate::state::with_session_if_free(|cell| match cell {
            Some(s) => with_jit(|j| match j {
                Some(j) => handed::drain(Some((&mut s.acc, &mut **j)), me),
                None => handed::drain(None, me),
            }),
            None => handed::drain(None, me),
        });
        match r {
            None => break,
            Some(Replayed::Stop) => out = Replayed::Stop,
            Some(Replayed::Leave) if out == Replayed::Go => out = Replayed::Leave,
            Some(_) => {}
        }
    }
    out
}

/// The graver of two replays' decisions (a stop of the capture, then of
/// the thread).
fn worse(a: Replayed, b: Replayed) -> Replayed {
    match (a, b) {
        (Replayed::Stop, _) | (_, Replayed::Stop) => Replayed::Stop,
        (Replayed::Leave, _) | (_, Replayed::Leave) => Replayed::Leave,
        _ => Replayed::Go,
    }
}

/// A full short buffer (several threads in translated code): replayed now
/// if the session lock is free; otherwise copied into the thread's lane of
/// handed buffers, which the lock's holder replays (`handed.rs`), and the
/// thread goes on without waiting. Where it may not be handed (a signal
/// held back, `--schedule serial`, no lane free) or its lane stays full,
/// [`flush`]. (A handed buffer that ends its thread's window stops the
/// thread in the accountant: its records after that count nowhere, as if
/// it had left.) Never under `--schedule serial`, so the schedule's
/// bookkeeping (`schedule::tick`, `leave`) has nothing to do here.
fn flush_or_hand(t: &mut Tls) -> Replayed {
    let handable = t.limit != t.buf_end
        && t.cursor > t.buf_start
        && t.fill == 0
        && t.deferred == 0
        && t.epoch == EPOCH.load(Ordering::Acquire)
        && !crate::schedule::on()
        && !NULL_CONSUMER.load(Ordering::Relaxed);
    if !handable {
        return flush(t);
    }
    let tid = t.tid as u32;
    let owner = Owner::this_thread(tid);
    let (start, end, epoch) = (t.buf_start, t.cursor, t.epoch);
    // SAFETY: `start..end` is the thread's own buffer, written up to the
    // cursor, and stays so until `discard` below.
    let records =
        unsafe { core::slice::from_raw_parts(start as *const u8, (end - start) as usize) };
    for _ in 0..3 {
        let mut replayed = 0;
        let r = match crate::state::with_session_if_free(|cell| {
            replay_locked(cell, owner, epoch, start, end, &mut replayed)
        }) {
            Some(r) => worse(r, recheck(tid)),
            None => match handed::push(owner, epoch, records) {
                // Published, then the lock tried: a holder that left it
                // meanwhile may have missed these records.
                handed::Pushed::Yes => recheck(tid),
                handed::Pushed::Full => {
                    handed::wait_for_space(tid);
                    continue;
                }
                handed::Pushed::No => break,
            },
        };
        discard(t);
        SHORT_REPLAYS.fetch_add(1, Ordering::Relaxed);
        return settled(r);
    }
    flush(t)
}

/// Steps every instruction recorded in `start..end`.
fn replay(
    acc: &mut crate::account::Accountant,
    j: &mut JitState,
    owner: Owner,
    start: u64,
    end: u64,
) -> Replayed {
    let tid = owner.tid;
    let mut m = RecordedMachine::with_bases(owner.fs, owner.gs);
    let mut p = start;
    let mut out = Replayed::Go;
    // The recording thread's rseq `rseq_cs` field (0: none), whose 64-bit
    // stores the accountant reports (`rseq.rs`).
    let rseq_field = owner.rseq_field;
    'records: while p + 16 <= end {
        // SAFETY: `p..p + size` lies in the thread's buffer below the
        // cursor, written by a block whose record starts there.
        let (word, rsp) = unsafe { (*(p as *const u64), *((p + 8) as *const u64)) };
        let (id, prefix) = (
            word & 0xffff_ffff,
            (word >> interrupted::PREFIX_SHIFT) as usize,
        );
        let Some(b) = j.blocks.as_slice().get(id as usize) else {
            break;
        };
        let range = b.first as usize..b.first as usize + usize::from(b.count);
        let instrs = &j.instrs.as_slice()[range.clone()];
        let verdict = if prefix != 0 {
            // The instructions that ran before a signal handler took the
            // thread out of the block (`interrupted.rs`), stepped one by
            // one as the trap engine steps them.
            let mut v = Verdict::Continue;
            for bi in &instrs[..prefix.min(instrs.len())] {
                // SAFETY: `p` starts this block's record, written up to
                // the inputs of the instructions before the interruption.
                unsafe { m.fill(bi, p) };
                v = acc.step(tid, bi.ip, rsp.wrapping_add(bi.sp_delta as u64), 0, &m);
                if v != Verdict::Continue && !matches!(v, Verdict::Syscall { .. }) {
                    break;
                }
            }
            v
        } else if b.rep {
            // One iteration of a `rep` string: stepped as the trap engine
            // steps it (the accountant follows the repetition), then RCX
            // as the iteration left it, for the repetition's final check
            // at the next instruction.
            // SAFETY: `p` starts a complete record of this block.
            unsafe { m.fill(&instrs[0], p) };
            let v = acc.step(tid, instrs[0].ip, rsp, 0, &m);
            let rcx = &mut m.regs[Register::RCX.number()];
            *rcx = rcx.saturating_sub(1);
            // `cmps`/`scas` (a record longer than its inputs): ZF after
            // the iteration, in the record's last word.
            if usize::from(b.size) > 16 + instrs[0].inputs.bytes() {
                // SAFETY: the last word of the complete record at `p`.
                let zf = unsafe { *((p + u64::from(b.size) - 8) as *const u64) };
                m.rflags = if zf != 0 { 0x40 } else { 0 };
            }
            v
        } else {
            // The record's words below the cursor (all of them: a record
            // is committed whole), from which slots read their addresses
            // (none where it is not on a word's boundary: records are
            // multiples of 8 bytes, in a page-aligned buffer or a handed
            // lane's 8-aligned `Slot`).
            let record: &[u64] = if p.is_multiple_of(8) {
                let words = (u64::from(b.size).min(end - p) / 8) as usize;
                // SAFETY: `p..p + 8 * words` lies in the records below the
                // cursor, aligned (just checked), unchanged until they are
                // discarded after this replay.
                unsafe { core::slice::from_raw_parts(p as *const u64, words) }
            } else {
                debug_assert!(false, "a record off a word's boundary");
                &[]
            };
            acc.step_block_watching(
                tid,
                rsp,
                &mut j.slots.as_mut_slice()[range],
                &mut m,
                record,
                |k, m| {
                    // SAFETY: `p` starts a complete record of this block.
                    unsafe { m.fill(&instrs[k], p) }
                },
                rseq_field,
                // An rseq descriptor stored by translated code: its
                // section ran where the kernel cannot restart it.
                crate::rseq::replayed_store,
            )
        };
        {
            match verdict {
                Verdict::Continue | Verdict::Syscall { .. } => {}
                Verdict::StopThread => {
                    out = Replayed::Leave;
                    break 'records;
                }
                Verdict::StopCapture(_) => {
                    STATE.store(STOPPING, Ordering::Release);
                    out = Replayed::Stop;
                    break 'records;
                }
                Verdict::FunctionReturned { more } => {
                    if more
                        && STATE
                            .compare_exchange(RUNNING, ARMED, Ordering::AcqRel, Ordering::Acquire)
                            .is_ok()
                    {
                        breakpoint::replant();
                        call_back_runners();
                        out = Replayed::Leave;
                    } else if more {
                        out = Replayed::Leave;
                    } else {
                        STATE.store(STOPPING, Ordering::Release);
                        out = Replayed::Stop;
                    }
                    break 'records;
                }
            }
        }
        p += u64::from(b.size);
        if b.size == 0 || p > end {
            debug_assert!(false, "a record overran the buffer");
            break;
        }
    }
    INSTRUCTIONS.store(acc.instructions(), Ordering::Relaxed);
    // Stores of rseq descriptors found in these records: never translated
    // again, so the trap engine keeps the descriptor (`rseq.rs`).
    let tls = TLS_OFFSET.load(Ordering::Relaxed);
    if tls != i64::MIN {
        let mut retired = false;
        crate::rseq::take_learned(|a, b| {
            j.retire(a, b, tls as i32);
            retired = true;
        });
        if retired {
            LOOKUP_GEN.fetch_add(1, Ordering::AcqRel);
        }
    }
    out
}

/// The registers an instruction's plan reads, as its block recorded them.
/// Small on purpose (it lives on a signal handler's stack, which may be the
/// program's small alternate stack): vector and opmask inputs are not
/// copied, only where they lie in the record is kept, and they are read
/// from there when the model asks.
pub(crate) struct RecordedMachine {
    regs: [u64; 16],
    /// ZF as a `repe`/`repne` iteration left it (nothing else reads flags).
    rflags: u64,
    fs: u64,
    gs: u64,
    /// The recorded opmask: its register and its address in the record.
    opmask: (Register, u64),
    /// The recorded vector registers (as the plan names them) and their
    /// addresses in the record.
    vectors: [(Register, u64); 2],
}

/// Whose records a replay steps: the thread that recorded them, and what
/// of its live state the records do not hold. Taken on that thread, which
/// may not be the one replaying (`handed.rs`).
#[derive(Clone, Copy)]
#[repr(C)]
struct Owner {
    tid: u32,
    /// FS and GS bases.
    fs: u64,
    gs: u64,
    /// Its rseq `rseq_cs` field's address (0: none).
    rseq_field: u64,
}

impl Owner {
    /// The calling thread, `tid`.
    fn this_thread(tid: u32) -> Owner {
        Owner {
            tid,
            fs: tls::thread_pointer(),
            gs: crate::machine::gs_base(false),
            rseq_field: crate::rseq::field().unwrap_or(0),
        }
    }
}

impl RecordedMachine {
    /// The machine of this thread (FS and GS bases live), no register set.
    fn of_this_thread() -> RecordedMachine {
        RecordedMachine::with_bases(tls::thread_pointer(), crate::machine::gs_base(false))
    }

    /// A machine with these FS and GS bases, no register set.
    fn with_bases(fs: u64, gs: u64) -> RecordedMachine {
        RecordedMachine {
            regs: [0; 16],
            rflags: 0,
            fs,
            gs,
            opmask: (Register::None, 0),
            vectors: [(Register::None, 0); 2],
        }
    }

    /// Loads the registers recorded for `bi` in the record at `record`
    /// (vector and opmask inputs: where they lie).
    ///
    /// # Safety
    /// `record` starts a record of the block `bi` belongs to, written at
    /// least up to `bi`'s inputs, and stays there, unchanged, as long as
    /// the model evaluates over this machine (until the next `fill`).
    unsafe fn fill(&mut self, bi: &BlockInstr, record: u64) {
        let base = record + u64::from(bi.offset);
        let mut q = base;
        let inputs = &bi.inputs;
        for &r in &inputs.gprs {
            // Full 64-bit names (`Inputs`): RAX..R15 are consecutive in
            // iced's numbering, in `Register::number`'s order.
            let n = (r as usize).wrapping_sub(Register::RAX as usize);
            if n < 16 {
                // SAFETY: inside the record (offsets fixed at translation).
                self.regs[n] = unsafe { *(q as *const u64) };
                q += 8;
            }
        }
        if inputs.gprs_only() {
            // Nothing of an earlier instruction's vector inputs is read.
            self.opmask.0 = Register::None;
            self.vectors = [(Register::None, 0); 2];
            return;
        }
        self.opmask = (inputs.opmask, base + inputs.opmask_offset() as u64);
        let offsets = inputs.vector_offsets();
        for (slot, (&r, &o)) in self
            .vectors
            .iter_mut()
            .zip(inputs.vectors.iter().zip(&offsets))
        {
            *slot = (r, base + o as u64);
        }
    }
}

impl Machine for RecordedMachine {
    #[inline]
    fn gpr(&self, reg: Register) -> u64 {
        // A 64-bit register, the common case: no table lookups.
        let n = (reg as usize).wrapping_sub(Register::RAX as usize);
        if n < 16 {
            return self.regs[n];
        }
        let full = reg.full_register();
        if !full.is_gpr64() {
            return 0;
        }
        let v = self.regs[full.number()];
        match reg {
            Register::AH | Register::BH | Register::CH | Register::DH => (v >> 8) & 0xFF,
            _ => match reg.size() {
                1 => v & 0xFF,
                2 => v & 0xFFFF,
                4 => v & 0xFFFF_FFFF,
                _ => v,
            },
        }
    }
    fn rflags(&self) -> u64 {
        self.rflags
    }
    fn segment_base(&self, seg: Register) -> u64 {
        match seg {
            Register::FS => self.fs,
            Register::GS => self.gs,
            _ => 0,
        }
    }
    fn vector(&self, reg: Register) -> Option<[u8; 64]> {
        let &(r, addr) = self
            .vectors
            .iter()
            .find(|(r, _)| *r != Register::None && *r == reg)?;
        let mut v = [0u8; 64];
        let width = r.size().min(64);
        // SAFETY: `fill` found this register's `width` bytes at `addr`, in
        // the record it was given, which its caller keeps in place while
        // the model evaluates.
        unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, v.as_mut_ptr(), width) };
        Some(v)
    }
    fn opmask(&self, reg: Register) -> Option<u64> {
        let (r, addr) = self.opmask;
        if r == Register::None || r != reg {
            return None;
        }
        // SAFETY: as in `vector`: 8 bytes `kmovq` stored in the record.
        Some(unsafe { core::ptr::read_unaligned(addr as *const u64) })
    }
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> bool {
        crate::memory::read_bytes(addr, buf)
    }
}

/// The state components the dispatcher saves and restores around
/// coldcache's own code (XSAVE's EDX:EAX): those compiled Rust code can
/// change, x87, SSE, and where the OS enabled them AVX and AVX-512's mask
/// and upper registers (components 2, 5, 6, 7). The rest keep their
/// values in the processor untouched: PKRU, MPX, and on a processor with
/// AMX the tile configuration and data (components 17 and 18; with them
/// XSAVE's area is 11,008 bytes, past [`XSAVE_AREA`], and fast mode once
/// refused to run there). An error when a saved component would not fit.
fn dispatcher_xsave_mask(cpu: &CpuFacts) -> Result<u64, &'static str> {
    let l = &cpu.xsave;
    if !l.is_known() {
        return Err("this processor's XSAVE layout is unknown (no CPUID leaf 0xD)");
    }
    let mut mask = 0b11;
    for i in [2, 5, 6, 7] {
        if l.xcr0 & (1 << i) == 0 {
            continue;
        }
        let end = u32::from(l.offset[i]) + u32::from(l.size[i]);
        if end > XSAVE_AREA as u32 - 64 {
            return Err("this processor's vector state is larger than the dispatcher reserves");
        }
        mask |= 1 << i;
    }
    Ok(mask)
}

/// The dispatcher's first part, on its stack with the program's registers
/// still live: a return or indirect branch to a block the thread's table
/// knows jumps there after saving and restoring only RFLAGS, RAX and RCX
/// (the same conditions as the top of [`dispatch`]); anything else falls
/// through to the full save, with the stack as it found it.
fn fast_lookup(a: &mut Asm, tls: i32) {
    use core::mem::offset_of;
    use iced_x86::MemoryOperand;
    let t = |o: usize| fs(tls + o as i32);
    let (rax, rcx, eax) = (Register::RAX, Register::RCX, Register::EAX);
    let mut to_slow = Vec::with_capacity(8);
    let branch = |a: &mut Asm, code: Code, to_slow: &mut Vec<usize>| {
        a.emit(Instruction::with_branch(code, a.ip()));
        to_slow.push(a.len());
    };
    a.emit(Ok(Instruction::with(Code::Pushfq)));
    a.emit(push(rax));
    a.emit(push(rcx));
    // A direct exit to link or a full buffer: the full path.
    a.emit(load(rax, t(offset_of!(Tls, reason))));
    a.emit(Instruction::with2(
        Code::Or_r64_rm64,
        rax,
        t(offset_of!(Tls, from)),
    ));
    branch(a, Code::Jne_rel32_64, &mut to_slow);
    // The capture runs.
    a.emit(emit::mov_imm64(rax, STATE.as_ptr() as u64));
    a.emit(Instruction::with2(
        Code::Movzx_r32_rm8,
        eax,
        MemoryOperand::with_base(rax),
    ));
    a.emit(Instruction::with2(
        Code::Cmp_rm32_imm8,
        eax,
        i32::from(RUNNING),
    ));
    branch(a, Code::Jne_rel32_64, &mut to_slow);
    // The watched function has not returned (RSP at or below its slot).
    a.emit(load(rax, t(offset_of!(Tls, window))));
    a.emit(Instruction::with2(Code::Test_rm64_r64, rax, rax));
    a.emit(Instruction::with_branch(Code::Je_rel32_64, a.ip()));
    let window_ok = a.len();
    a.emit(Instruction::with2(
        Code::Cmp_rm64_r64,
        t(off::APP_RSP as usize),
        rax,
    ));
    branch(a, Code::Ja_rel32_64, &mut to_slow);
    let here = a.ip();
    a.patch_rel32(window_ok, here);
    // Not the function trigger's entry.
    a.emit(load(rcx, t(off::NEXT as usize)));
    a.emit(emit::mov_imm64(rax, BP_ADDR.as_ptr() as u64));
    a.emit(Instruction::with2(
        Code::Cmp_r64_rm64,
        rcx,
        MemoryOperand::with_base(rax),
    ));
    branch(a, Code::Je_rel32_64, &mut to_slow);
    // The entry of `next` (as `lookup_slot` computes it).
    a.emit(Instruction::with2(Code::Mov_r64_rm64, rax, rcx));
    a.emit(Instruction::with2(Code::Shr_rm64_imm8, rax, 12i32));
    a.emit(Instruction::with2(Code::Xor_r64_rm64, rax, rcx));
    a.emit(Instruction::with2(
        Code::And_rm32_imm32,
        eax,
        (LOOKUP - 1) as i32,
    ));
    a.emit(Instruction::with2(
        Code::Lea_r64_m,
        rax,
        MemoryOperand::with_base_index_scale(rax, rax, 2),
    ));
    a.emit(Instruction::with2(Code::Shl_rm64_imm8, rax, 3i32));
    a.emit(Instruction::with2(
        Code::Add_r64_rm64,
        rax,
        t(offset_of!(Tls, lookup)),
    ));
    a.emit(Instruction::with2(
        Code::Cmp_r64_rm64,
        rcx,
        MemoryOperand::with_base(rax),
    ));
    branch(a, Code::Jne_rel32_64, &mut to_slow);
    // Made since the last retirement (and in this capture), and this
    // thread's records belong to the current capture.
    a.emit(emit::mov_imm64(rcx, LOOKUP_GEN.as_ptr() as u64));
    a.emit(load(rcx, at(rcx, 0)));
    a.emit(Instruction::with2(Code::Cmp_r64_rm64, rcx, at(rax, 16)));
    branch(a, Code::Jne_rel32_64, &mut to_slow);
    a.emit(load(rcx, at(rax, 8)));
    a.emit(emit::mov_imm64(rax, EPOCH.as_ptr() as u64));
    a.emit(load(rax, at(rax, 0)));
    a.emit(Instruction::with2(
        Code::Cmp_r64_rm64,
        rax,
        t(offset_of!(Tls, epoch)),
    ));
    branch(a, Code::Jne_rel32_64, &mut to_slow);
    a.emit(store(t(off::TARGET as usize), rcx));
    a.emit(pop(rcx));
    a.emit(pop(rax));
    a.emit(Ok(Instruction::with(Code::Popfq)));
    a.emit(load(Register::RSP, t(off::APP_RSP as usize)));
    a.emit(jmp_mem(t(off::TARGET as usize)));
    let slow = a.ip();
    for end in to_slow {
        a.patch_rel32(end, slow);
    }
    a.emit(pop(rcx));
    a.emit(pop(rax));
    a.emit(Ok(Instruction::with(Code::Popfq)));
}

/// Generates the dispatcher (once per process): entries that save the
/// program's registers on the thread's dispatcher stack, call [`dispatch`],
/// restore them and jump to `T.target`.
fn generate_dispatcher(
    cache: &mut CodeCache,
    tls: i32,
    xsave_mask: u64,
) -> Result<(), &'static str> {
    const SIZE: u64 = 2048;
    let base = cache
        .reserve(0, SIZE)
        .ok_or("no memory for the translator's code cache")?;
    let t = |o: i32| fs(tls + o);
    let mut a = Asm::new(SIZE as usize);
    a.reset(base);
    // One entry per reason (`off::REASON`), the last falling through.
    let mut entries = [0u64; 4];
    let mut to_common = Vec::with_capacity(3);
    for (reason, e) in entries.iter_mut().enumerate() {
        *e = a.ip();
        a.emit(store_simm32(t(off::REASON), reason as i32));
        if reason < 3 {
            a.emit(Instruction::with_branch(Code::Jmp_rel32_64, a.ip()));
            to_common.push(a.len());
        }
    }
    let [entry, full, trap, sys] = entries;
    let common = a.ip();
    for end in to_common {
        a.patch_rel32(end, common);
    }
    a.emit(store(t(off::APP_RSP), Register::RSP));
    a.emit(load(Register::RSP, t(off::STACK_TOP)));
    fast_lookup(&mut a, tls);
    a.emit(Ok(Instruction::with(Code::Pushfq)));
    const SAVED: [Register; 15] = [
        Register::RAX,
        Register::RCX,
        Register::RDX,
        Register::RBX,
        Register::RBP,
        Register::RSI,
        Register::RDI,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
    ];
    for r in SAVED {
        a.emit(push(r));
    }
    a.emit(Instruction::with2(
        Code::Mov_r64_rm64,
        Register::RBP,
        Register::RSP,
    ));
    a.emit(emit::lea(Register::RSP, Register::RSP, -XSAVE_AREA));
    a.emit(Instruction::with2(
        Code::And_rm64_imm8,
        Register::RSP,
        -64i32,
    ));
    a.emit(Instruction::with2(
        Code::Xor_r32_rm32,
        Register::EAX,
        Register::EAX,
    ));
    for k in 0..8 {
        a.emit(store(at(Register::RSP, 512 + 8 * k), Register::RAX));
    }
    let mask = |a: &mut Asm| {
        a.emit(Instruction::with2(
            Code::Mov_r32_imm32,
            Register::EAX,
            xsave_mask as u32,
        ));
        a.emit(Instruction::with2(
            Code::Mov_r32_imm32,
            Register::EDX,
            (xsave_mask >> 32) as u32,
        ));
    };
    mask(&mut a);
    a.emit(Instruction::with1(
        Code::Xsave64_mem,
        iced_x86::MemoryOperand::with_base(Register::RSP),
    ));
    a.emit(Ok(Instruction::with(Code::Cld)));
    a.emit(Instruction::with2(
        Code::Mov_r64_rm64,
        Register::RDI,
        Register::RBP,
    ));
    a.emit(emit::mov_imm64(
        Register::RAX,
        dispatch as extern "C" fn(*mut Frame) as usize as u64,
    ));
    a.emit(Instruction::with1(Code::Call_rm64, Register::RAX));
    mask(&mut a);
    a.emit(Instruction::with1(
        Code::Xrstor64_mem,
        iced_x86::MemoryOperand::with_base(Register::RSP),
    ));
    a.emit(Instruction::with2(
        Code::Mov_r64_rm64,
        Register::RSP,
        Register::RBP,
    ));
    for r in SAVED.iter().rev() {
        a.emit(pop(*r));
    }
    a.emit(Ok(Instruction::with(Code::Popfq)));
    a.emit(load(Register::RSP, t(off::APP_RSP)));
    let trap_jmp = a.ip();
    a.emit(jmp_mem(t(off::TARGET)));
    if !a.ok() {
        return Err("the dispatcher could not be assembled");
    }
    let code = a.take();
    if !cache.write(base, &code) {
        return Err("the dispatcher could not be written");
    }
    cache.keep();
    DISPATCH_ENTRY.store(entry, Ordering::Release);
    DISPATCH_FULL.store(full, Ordering::Release);
    DISPATCH_TRAP.store(trap, Ordering::Release);
    DISPATCH_SYS.store(sys, Ordering::Release);
    TRAP_JMP.store(trap_jmp, Ordering::Release);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Sapphire Rapids' layout (CPUID 0xD, Linux enabling AMX in XCR0):
    /// the tile components (17, 18, ending at 11,008 bytes, past the area)
    /// and PKRU are left out; the vector state is saved.
    #[test]
    fn the_dispatcher_leaves_amx_tiles_out_of_its_xsave() {
        let mut cpu = CpuFacts::default();
        let l = &mut cpu.xsave;
        l.xcr0 = 0x602e7;
        for (i, offset, size) in [
            (2, 576, 256),
            (5, 1088, 64),
            (6, 1152, 512),
            (7, 1664, 1024),
            (9, 2688, 8),
            (17, 2752, 64),
            (18, 2816, 8192),
        ] {
            (l.offset[i], l.size[i]) = (offset, size);
        }
        assert_eq!(dispatcher_xsave_mask(&cpu), Ok(0xe7));
        // The same vector state past the area is refused, not cut.
        cpu.xsave.offset[7] = 7200;
        assert!(dispatcher_xsave_mask(&cpu).is_err());
        assert!(dispatcher_xsave_mask(&CpuFacts::default()).is_err());
    }

    #[test]
    fn the_dispatcher_assembles() {
        let mut cache = CodeCache::new();
        // (x87 and SSE alone where the layout cannot be read.)
        let mask = dispatcher_xsave_mask(&crate::machine::cpu_facts()).unwrap_or(0b11);
        generate_dispatcher(&mut cache, -0x1000, mask).expect("assembles");
    }
}
