//! The accountant: everything a capture does per executed instruction, as
//! plain logic over a register source. Sans-I/O: it touches no `ucontext`,
//! no static, no signal and no file; a front end (the trap engine's signal
//! shell, `engine.rs`) calls [`Accountant::step`] once per instruction a
//! traced thread is about to execute and acts on the [`Verdict`]; the fast
//! front end (`jit/`) calls [`Accountant::step_block`] once per replayed
//! execution of a translated block, with each instruction's decode and row
//! remembered in the block's slot, and counts the same way.
//!
//! Per step, for the thread's slot:
//! 1. the instruction that ran *untraced* after a `syscall` (the kernel does
//!    not trap on it) is counted first, from the state after it ran
//!    ([`crate::model::Plan::eval_after`]);
//! 2. a repeated string instruction that stopped repeating is counted once
//!    more without data access when it ended on its count, as Valgrind
//!    counts the final check (`docs/capture.md`);
//! 3. a pending call pushes a shadow frame (call site, callee = this
//!    instruction); frames whose return-address slot lies below RSP are
//!    popped (returns, `longjmp`, exceptions); a thread's first step seeds
//!    its frames from DWARF CFI, else frame pointers;
//! 4. the watched function returning ends that thread's window;
//! 5. the instruction is decoded (once per address), its accesses computed
//!    by the model, the fetch and then the data accesses simulated through
//!    the [`Driver`] and added to the counters of (ip, stack, thread) (in a
//!    replayed block, [`Accountant::step_block`], each instruction's slot
//!    remembers its decode, its compact plan ([`Quick`]) and its last row;
//!    a slot whose row is for another stack finds it through the block's
//!    [`BlockRows`], one probe per block and stack, not per instruction;
//!    without a trace, an execution without data access whose fetch the
//!    first level served is counted in the cell, not the row, and added
//!    to the row by `settle` before the counters are read; a run of such
//!    instructions within one line is counted as one, in its first cell
//!    ([`BlockRows::count_run`]); and the instructions whose slots
//!    remember all they need take a loop of their own,
//!    `Accountant::step_steady`, the block's general loop only the rest)
//!    (with
//!    line use, `Setup::line_use`, the lines that left the first data level
//!    meanwhile are credited to the rows that fetched them), and
//!    appended to the trace when one is kept: encoded into a chunk buffer
//!    reserved up front ([`ChunkEncoder`]) that goes to the front end's
//!    [`TraceSink`] (the trace file) each time it fills, so a trace is
//!    bounded by the disk, not by memory;
//! 6. with object tracking on (`Setup::objects` built on), each data access
//!    is also added to its object (heap block's allocation site, and
//!    that site's row of the instruction, else mapping), and the
//!    allocator's entries and returns are observed
//!    ([`crate::objects`]); built off, the object state is kept unused;
//! 7. with a timeline (`Setup::timeline`, `record --timeline`), every
//!    counted instruction's increments also go into one running row, and
//!    each stack change, thread start and stop writes an event with the
//!    thread's deltas ([`crate::timeline`]): work at stack changes and one
//!    compare per step or replayed block, besides the running row.
//!
//! # Invariants
//! - Once built it never allocates, locks or panics: its tables grow by
//!   mapping memory with system calls ([`crate::grow`]) within the memory
//!   budget ([`Reserves::memory`]) and the per-table bounds; a table that
//!   cannot grow ends the capture with a reason ([`Verdict::StopCapture`],
//!   the dump's `cut_short` naming the table and its figures), as does a
//!   trace the sink cannot take (disk full). `tests/account.rs` counts
//!   allocations.
//! - Memory of the traced program is read only through the [`Machine`]
//!   (`read_code`, `read_memory`), so a wild address is an answer, not a
//!   fault.

use crate::grow::{Budget, Full, GrowVec, TABLE_FULL};
use crate::model::{
    AccessList, CpuFacts, Inputs, Machine, MemAccess, Model, Quick, RecordedAddress, Unmodelled,
};
use crate::objects::Objects;
use crate::tables::{BlockRows, CounterTable, DecodeCache, Decoded, Flow, Rep, StackTable};
use crate::timeline::Timeline;
use crate::unwind::StackUnwinder;
use coldcache_cctrace::stream::{attachment_chunk, end_marker, skeleton_index_chunk};
use coldcache_cctrace::{ChunkEncoder, Record as TraceRecord, RecordKind, ATTACH_DUMP_SKELETON};
use coldcache_dump::{Dump, EncodedRecords, Meta, Record, StackNode, Thread};
use coldcache_sim::{
    Access, AccessKind, AccessResult, ConfigError, CounterLayout, Driver, HierarchyConfig, Side,
    NO_LINE,
};
use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Mnemonic, OpKind, Register};

/// What the front end does after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Keep tracing this thread.
    Continue,
    /// Stop tracing this thread (it left the window, is not ours, or there
    /// is no slot for it); the capture goes on.
    StopThread,
    /// Stop the capture, cut short for this reason.
    StopCapture(&'static str),
    /// The instruction just counted is a `syscall`; the next instruction is
    /// at `next`. The front end lets it run (the instruction after it runs
    /// untraced and is counted at the next step) or emulates it, moves the
    /// thread to `next` and steps again.
    Syscall {
        /// Address of the instruction after the `syscall`.
        next: u64,
    },
    /// The watched function returned on this thread, whose tracing ends.
    /// `more`: further calls are to be captured (re-arm the breakpoint);
    /// otherwise the capture is over.
    FunctionReturned {
        /// Whether another call is to be captured.
        more: bool,
    },
}

/// What the front end does at the watched function's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// This call is captured: trace the thread from the entry (step it now).
    Capture,
    /// Not a call to capture: step over the entry and re-arm.
    Skip,
    /// A call to capture, but no thread slot is left.
    NoSlot,
}

/// One instruction of a translated block as [`Accountant::step_block`]
/// sees it: its address, its RSP relative to the block's entry, and where
/// its decode and its last counter row are (remembered between executions
/// of the block, within one capture).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSlot {
    /// The instruction's address.
    pub ip: u64,
    /// RSP before it, minus RSP at the block's entry.
    pub sp_delta: i64,
    decoded: u32,
    stack: u32,
    serial: u32,
    row: u32,
    /// With `row`: its cell in [`BlockRows`] ([`BlockSlot::NONE`]: none),
    /// where plain executions are counted.
    cell: u32,
    /// In a block's first slot: the number the accountant gave the block
    /// (its key in [`BlockRows`]).
    block: u32,
    /// With `decoded`: the instruction's length and flow and, for the
    /// commonest plans, the plan itself, so that a replay without a trace
    /// does not read the decode cache's entry.
    len: u8,
    flow: Flow,
    quick: Option<Quick>,
    /// With `decoded`: a plan that makes no access (`quick` reads no
    /// register) and a flow that asks nothing of the replay
    /// ([`Flow::Other`]): an instruction that is only fetched.
    fetch_only: bool,
    /// Where the block's record holds the registers recorded for this
    /// instruction ([`BlockSlot::recorded`]; `None`: a slot of no
    /// record, [`BlockSlot::new`]).
    record: Option<(u16, Inputs)>,
    /// With `quick` and `record`: its one access's address as the record
    /// holds it ([`Quick::recorded`]), read without filling the machine.
    address: Option<RecordedAddress>,
}

impl BlockSlot {
    const NONE: u32 = u32::MAX;

    /// A slot with nothing remembered.
    pub fn new(ip: u64, sp_delta: i64) -> BlockSlot {
        BlockSlot {
            ip,
            sp_delta,
            decoded: Self::NONE,
            stack: 0,
            serial: 0,
            row: Self::NONE,
            cell: Self::NONE,
            block: Self::NONE,
            len: 0,
            flow: Flow::Other,
            quick: None,
            fetch_only: false,
            record: None,
            address: None,
        }
    }

    /// A slot of an instruction whose registers `inputs` its block's
    /// record holds from offset `at` on (laid out as [`Inputs`] says): the
    /// replay then reads its one access's address from the record
    /// ([`Accountant::step_block_watching`]'s `record`).
    pub fn recorded(ip: u64, sp_delta: i64, inputs: Inputs, at: u16) -> BlockSlot {
        BlockSlot {
            record: Some((at, inputs)),
            ..BlockSlot::new(ip, sp_delta)
        }
    }

    /// Whether this instruction, decoded, is only fetched
    /// ([`BlockSlot::fetch_only`]) and can be counted as one of a run
    /// whose line is `last_fetch` (`addr >> shift`): its fetch lies in that
    /// line, and its RSP is not above `checked` (no frame to pop).
    #[inline(always)]
    fn fits_run(&self, checked: i64, last_fetch: u64, shift: u32) -> bool {
        let last_byte = self.ip.wrapping_add(u64::from(self.len).wrapping_sub(1));
        self.fetch_only
            && self.sp_delta <= checked
            && self.ip >> shift == last_fetch
            && last_byte >> shift == last_fetch
    }

    /// Forgets what was remembered (a new capture, a new accountant);
    /// where its record holds its registers stays (the block's
    /// translation is kept).
    pub fn forget(&mut self) {
        *self = BlockSlot {
            record: self.record,
            ..BlockSlot::new(self.ip, self.sp_delta)
        };
    }
}

/// How much memory the accountant may use. The tables grow as they fill
/// ([`crate::grow`]), all of them within `memory`; the per-table counts are
/// bounds a user may set (`--reserve`), unbounded by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reserves {
    /// Distinct instruction addresses (a bound; `usize::MAX`: none).
    pub instructions: usize,
    /// Distinct call stacks (a bound; `usize::MAX`: none).
    pub stacks: usize,
    /// Distinct (instruction, stack, thread) records (a bound;
    /// `usize::MAX`: none).
    pub records: usize,
    /// Threads traced at once (a slot is freed when its thread exits):
    /// slots made when the accountant is built, their frames growing.
    pub threads: usize,
    /// Call depth per thread (a bound; `usize::MAX`: none).
    pub depth: usize,
    /// Bytes every growing table together may map (`--memory`; 0: no
    /// bound here: `prepare` sets a share of the machine's memory).
    pub memory: usize,
    /// Trace records (instruction fetches and data accesses) per chunk of
    /// a trace, when one is asked for: the size of the buffer a chunk is
    /// encoded in before it is written, not a bound on the trace (at
    /// least [`MIN_TRACE_CHUNK`]).
    pub trace: usize,
}

impl Default for Reserves {
    fn default() -> Self {
        Reserves {
            instructions: usize::MAX,
            stacks: usize::MAX,
            records: usize::MAX,
            // The most thread ids a selection may name (`state`).
            threads: 256,
            depth: usize::MAX,
            memory: 0,
            trace: 1 << 16,
        }
    }
}

/// The calls a function trigger captures (1-based, `first..first + count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionCalls {
    /// Entry address of the function.
    pub address: u64,
    /// First call to capture (1 = the first call).
    pub first: u64,
    /// Number of calls to capture.
    pub count: u64,
    /// Calls right before `first` that warm the cache: they go through the
    /// simulator, traced as captured calls are, but count nowhere (`0`: a
    /// cold cache; `u64::MAX`: every earlier call).
    pub warm: u64,
}

impl FunctionCalls {
    /// One past the last call to capture.
    fn end(&self) -> u64 {
        self.first.saturating_add(self.count)
    }

    /// The first warming call (`first` when there is none).
    fn warm_start(&self) -> u64 {
        self.first.saturating_sub(self.warm).max(1)
    }
}

/// Everything an accountant is built from.
pub struct Setup {
    /// The simulated hierarchy.
    pub cache: HierarchyConfig,
    /// Memory reserves.
    pub reserves: Reserves,
    /// Explicit thread → core assignments; other threads round-robin.
    pub core_map: Vec<(u32, u32)>,
    /// Threads not yet claimed are claimed at their first step.
    pub all_threads: bool,
    /// Stop after this many instructions (0 = no limit).
    pub max_instructions: u64,
    /// Where every access goes when a trace is kept: the sink chunks are
    /// written to as they fill.
    pub trace: Option<Box<dyn TraceSink>>,
    /// The function trigger, if any.
    pub function: Option<FunctionCalls>,
    /// Addresses where a traced thread leaves the capture: the front end's
    /// own stop path, its exit hook. Reaching one stops tracing the thread.
    pub stop_entries: [u64; 2],
    /// Executable ranges of the process: a frame-pointer walk accepts only
    /// return addresses inside them.
    pub exec_ranges: Vec<(u64, u64)>,
    /// The executable ranges whose code cannot change without a system
    /// call (file-backed, not writable): an instruction decoded there is
    /// trusted until [`Accountant::code_changed`] says otherwise; anywhere
    /// else its bytes are checked at every execution.
    pub stable_code: Vec<(u64, u64)>,
    /// DWARF CFI of the mapped files, for seeding shadow stacks.
    pub unwinder: StackUnwinder,
    /// The CPU the model describes.
    pub cpu: CpuFacts,
    /// Measure line utilisation of the first data level (issue 32; the
    /// rows gain `l1d_lines_fetched` and `l1d_bytes_used`).
    pub line_use: bool,
    /// Object state (issue 32, `crate::objects`): with it built `on`, the
    /// allocator observed and each data access attributed to its block or
    /// mapping; built off, kept unused.
    pub objects: Option<Objects>,
    /// Record the order of the window (`crate::timeline`): `Some(limit)`,
    /// the bytes its events may take (0: a quarter of the memory budget).
    pub timeline: Option<usize>,
    /// Valgrind's client requests honoured from these states; `None`:
    /// only counted ([`crate::requests`]).
    pub client_requests: Option<crate::requests::Honour>,
}

use crate::objects::Frame;

struct ThreadState {
    tid: u32,
    /// The thread's number in the capture (an index into `seen`): records
    /// and trace records name it, so a slot can be reused by a thread
    /// created later.
    serial: u32,
    core: u32,
    active: bool,
    seeded: bool,
    at_entry: bool,
    /// The shadow stack, growing as calls nest (bounded by the depth
    /// reserve and the budget).
    frames: GrowVec<Frame>,
    pending_call: u64,
    after_syscall: u64,
    func_ret_slot: u64,
    /// A repeated string instruction that ran an iteration at the previous
    /// step (see `finish_rep`).
    rep_ip: u64,
    rep_kind: Rep,
    /// A gather or scatter counted at the previous step ([`resumable`]): a
    /// trap at its own address again is the CPU resuming it, not a new
    /// execution.
    resumable_ip: u64,
    /// The thread runs a warming call: its instructions go through the
    /// simulator and count nowhere.
    warming: bool,
    /// Its thread definition is in the trace.
    in_trace: bool,
    /// Its tracing ended at the exit hook (a stop entry): traced up to
    /// the program's exit.
    at_exit_hook: bool,
    /// The number of the function's call it is tracing (counted from the
    /// start, as `calls_seen`), 0 outside a function window's call.
    call: u64,
}

impl ThreadState {
    /// Whether RSP at `sp` pops a frame (its return-address slot lies
    /// below) or leaves the watched call (`func_ret_slot`): what
    /// [`Accountant::pop_returned`] then acts on.
    #[inline(always)]
    fn would_pop(&self, sp: u64) -> bool {
        self.frames.last().is_some_and(|f| f.ret_slot < sp)
            || (self.func_ret_slot != 0 && sp > self.func_ret_slot)
    }

    /// Starts tracing this thread afresh (its frames' memory is kept). At a
    /// function-entry breakpoint `at_entry` is set and `func_ret_slot` is the
    /// slot of the function's return address.
    fn restart(&mut self, at_entry: bool, func_ret_slot: u64) {
        self.active = true;
        self.seeded = false;
        self.at_entry = at_entry;
        self.frames.clear();
        self.pending_call = 0;
        self.after_syscall = 0;
        self.rep_ip = 0;
        self.resumable_ip = 0;
        self.func_ret_slot = func_ret_slot;
        self.warming = false;
        self.at_exit_hook = false;
        self.call = 0;
    }
}

/// Where the machine state of a counted instruction comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The state before it runs (the normal case).
    Before,
    /// The state after it ran (the instruction after a `syscall`).
    After,
    /// No data access: the final check of a repeated string instruction.
    NoData,
}

/// The fewest records a trace chunk holds: an instruction's records (its
/// fetch and up to `MAX_ACCESSES` data accesses) always fit an empty one.
pub const MIN_TRACE_CHUNK: usize = 64;

/// Where a streamed trace's bytes go: the trace file of a capture
/// (`output::TraceFile`), a buffer in tests. The header is the sink's
/// (written when it is made).
pub trait TraceSink: Send {
    /// Appends `bytes` (whole chunks). Called where the accountant runs (a
    /// signal handler, a traced thread): no allocation, no lock. `Err`
    /// says why the trace cannot go on; what was written before stays
    /// whole (a failed write is undone).
    fn write(&mut self, bytes: &[u8]) -> Result<(), &'static str>;
    /// The bytes the trace holds so far, header included.
    fn offset(&self) -> u64;
    /// The capture's last bytes follow (the skeleton, index and end
    /// marker): a sink that keeps room for them may use it now.
    fn ending(&mut self) {}
    /// After the last write (normal context): makes the trace whole where
    /// it was asked for (sync, rename); returns that path, if any.
    fn complete(self: Box<Self>) -> std::io::Result<Option<std::path::PathBuf>>;
    /// Where the trace is while it is written (a `.partial` beside the
    /// target), for messages.
    fn partial_path(&self) -> Option<std::path::PathBuf> {
        None
    }
}

/// A trace being streamed: the chunk under way and the sink.
struct TraceStream {
    enc: ChunkEncoder,
    sink: Box<dyn TraceSink>,
    /// Why the sink stopped taking chunks (sticky).
    failed: Option<&'static str>,
}

impl TraceStream {
    /// Writes the chunk under way, if any. No allocation.
    fn flush(&mut self) -> Result<(), &'static str> {
        if let Some(why) = self.failed {
            return Err(why);
        }
        if self.enc.is_empty() {
            return Ok(());
        }
        match self.sink.write(self.enc.seal()) {
            Ok(()) => {
                self.enc.clear();
                Ok(())
            }
            Err(why) => {
                self.enc.discard();
                self.failed = Some(why);
                Err(why)
            }
        }
    }
}

/// Every access of a capture in order, streamed to a trace file whose last
/// chunk and tail are still to be written ([`StreamedTrace::complete`]).
pub struct StreamedTrace {
    stream: TraceStream,
}

/// Why a streamed trace could not be completed.
#[derive(Debug)]
pub struct TraceIncomplete {
    /// Where what was written stays (a `.partial`), when known.
    pub kept: Option<std::path::PathBuf>,
    /// Bytes of whole chunks it holds.
    pub offset: u64,
    /// Why.
    pub reason: String,
}

impl StreamedTrace {
    /// Why the trace stopped taking records during the capture, if it did.
    pub fn failed(&self) -> Option<&'static str> {
        self.stream.failed
    }

    /// Records in the trace (those written and those still buffered).
    pub fn records(&self) -> u64 {
        self.stream.enc.total()
    }

    /// Writes the last chunk, the dump `skeleton` as an attachment, the
    /// index naming its offset and the end marker, then completes the
    /// sink. Returns the path written (None for a sink without one).
    pub fn complete(self, skeleton: &[u8]) -> Result<Option<std::path::PathBuf>, TraceIncomplete> {
        let mut s = self.stream;
        let incomplete = |s: &TraceStream, reason: String| TraceIncomplete {
            kept: s.sink.partial_path(),
            offset: s.sink.offset(),
            reason,
        };
        if let Err(why) = s.flush() {
            if s.failed.is_none() || !s.enc.is_empty() {
                return Err(incomplete(&s, why.to_string()));
            }
        }
        s.sink.ending();
        let at = s.sink.offset();
        let total = s.enc.total();
        for bytes in [
            attachment_chunk(ATTACH_DUMP_SKELETON, skeleton),
            skeleton_index_chunk(at).to_vec(),
            end_marker(total).to_vec(),
        ] {
            if let Err(why) = s.sink.write(&bytes) {
                return Err(incomplete(&s, why.to_string()));
            }
        }
        let kept = s.sink.partial_path();
        let offset = s.sink.offset();
        s.sink.complete().map_err(|e| TraceIncomplete {
            kept,
            offset,
            reason: e.to_string(),
        })
    }
}

/// What a finished capture's accounting produced.
pub struct Finished {
    /// The dump (symbols not resolved).
    pub dump: Dump,
    /// The dump's records, encoded, when finished by
    /// [`Accountant::finish_encoded`] (the dump's `records` is then empty).
    pub encoded: Option<EncodedRecords>,
    /// Every access in order, when a trace was kept (streamed; its end
    /// still to be written).
    pub trace: Option<StreamedTrace>,
    /// Instructions whose accesses were not modelled.
    pub unmodelled: u64,
    /// The parts `CALLGRIND_DUMP_STATS` requests set aside, in order, each
    /// to be written as a dump of its own before this one (`parts.rs`).
    pub parts: Vec<PartDump>,
}

/// A part of the profile a `CALLGRIND_DUMP_STATS` request set aside.
pub struct PartDump {
    /// `CALLGRIND_DUMP_STATS_AT`'s label, if any.
    pub label: Option<String>,
    /// Instructions it counted.
    pub instructions: u64,
    /// Its records, in key order.
    pub records: Vec<Record>,
}

/// The per-instruction accounting of a capture; see the module doc.
pub struct Accountant {
    driver: Driver,
    model: Model,
    decode: DecodeCache,
    stacks: StackTable,
    counters: CounterTable,
    /// The counter rows of each (block, stack, thread) a replay met
    /// (`step_block`): one probe per block execution.
    block_rows: BlockRows,
    /// What [`BlockRows`] may map (apart from `budget`: see `new`).
    block_budget: Budget,
    /// Blocks numbered so far (`BlockSlot::block`).
    blocks: u32,
    threads: Vec<ThreadState>,
    trace: Option<TraceStream>,
    accesses: AccessList,
    instructions: u64,
    untrapped: u64,
    /// Threads the selection left untraced (`Meta::untraced`).
    untraced: coldcache_dump::Untraced,
    /// Valgrind's client requests: their states and counts.
    requests: crate::requests::Requests,
    /// The parts `DUMP_STATS` requests set aside.
    parts: crate::parts::Parts,
    unmodelled: [u64; Unmodelled::ALL.len()],
    max_instructions: u64,
    cut_short: Option<&'static str>,
    /// The table that could not grow, when that cut the capture.
    full: Option<Full>,
    /// What the tables may map, and have.
    budget: Budget,
    exec_ranges: Vec<(u64, u64)>,
    stable_code: Vec<(u64, u64)>,
    /// Parts of `stable_code` whose code may have changed (reserved;
    /// `changed_all` once it is full).
    changed: Vec<(u64, u64)>,
    changed_all: bool,
    unwinder: StackUnwinder,
    func: Option<FunctionCalls>,
    calls_seen: u64,
    calls_done: u64,
    /// The number of the call the program's exit ended (it never returned:
    /// `exit()` in it, a `main` that ends in `exit`), 0 if none.
    exit_ended: u64,
    /// Warming calls that returned, and the instructions they simulated.
    warm_done: u64,
    warm_instructions: u64,
    all_threads: bool,
    stop_entries: [u64; 2],
    /// Every thread traced so far, in claim order: (thread id, core). Slots
    /// of `threads` are reused when a thread exits; this list is not.
    seen: Vec<(u32, u32)>,
    /// The name each thread of `seen` had when it exited (`comm`, NUL
    /// padded; empty while it runs): an exited thread is no longer in
    /// `/proc` when the dump is written.
    exit_names: Vec<[u8; 16]>,
    /// Object tracking, when on.
    objects: Option<Box<Objects>>,
    /// Object state built with tracking off, kept unused (see
    /// `Objects::is_on`).
    _objects_off: Option<Box<Objects>>,
    /// The order of the window, when recorded.
    timeline: Option<Box<Timeline>>,
}

/// The most threads one capture can trace over its life (threads alive at
/// once are bounded by [`Reserves::threads`]). 512 KiB reserved.
pub const MAX_THREADS_SEEN: usize = 1 << 16;

impl Accountant {
    /// Builds an accountant, reserving every table at its full size.
    pub fn new(setup: Setup) -> Result<Accountant, ConfigError> {
        // Line utilisation of the first data level (issue 32), unless
        // turned off: its fills are credited by `credit_line_use`.
        let mut driver = Driver::new(&setup.cache)?;
        if setup.line_use {
            driver = driver.with_line_use();
        }
        let layout = driver.layout();
        let cores = driver.cores().cores();
        let threads_max = setup.reserves.threads.max(1);
        driver
            .cores_mut()
            .reserve(threads_max + setup.core_map.len());
        for &(tid, core) in &setup.core_map {
            driver
                .cores_mut()
                .assign(u64::from(tid), core as usize % cores);
        }
        let depth = setup.reserves.depth.max(1);
        // The block index (fast mode's, [`BlockRows`]) has an eighth of
        // the budget to itself, charged up front in both modes, so that
        // the tables both engines feed alike run out at the same
        // instruction in both.
        let (mut budget, block_budget) = match setup.reserves.memory {
            0 => (Budget::new(usize::MAX), Budget::new(usize::MAX)),
            m => {
                let mut b = Budget::new(m);
                b.charge(m / 8);
                (b, Budget::new(m / 8))
            }
        };
        // Thread slots are made now (their frames map memory as calls
        // nest), so a thread that appears during the capture needs no
        // allocation.
        let threads = (0..threads_max)
            .map(|_| ThreadState {
                tid: 0,
                serial: 0,
                core: 0,
                active: false,
                seeded: false,
                at_entry: false,
                frames: GrowVec::new(depth),
                pending_call: 0,
                after_syscall: 0,
                func_ret_slot: 0,
                rep_ip: 0,
                resumable_ip: 0,
                rep_kind: Rep::None,
                warming: false,
                in_trace: false,
                at_exit_hook: false,
                call: 0,
            })
            .collect();
        let (objects_on, objects_off) = match setup.objects.map(Box::new) {
            Some(o) if o.is_on() => (Some(o), None),
            o => (None, o),
        };
        let timeline = setup.timeline.map(|limit| {
            let limit = match limit {
                0 => budget.limit() / 4,
                n => n,
            };
            let names: Vec<String> = (1..=layout.levels()).map(|l| format!("L{l}")).collect();
            Box::new(Timeline::new(
                layout,
                &layout.names(&names),
                threads_max,
                limit,
            ))
        });
        let func = setup.function.map(|f| FunctionCalls {
            address: f.address,
            first: f.first.max(1),
            count: f.count.max(1),
            warm: f.warm,
        });
        Ok(Accountant {
            driver,
            model: Model::new(setup.cpu),
            decode: DecodeCache::new(setup.reserves.instructions),
            stacks: StackTable::new(setup.reserves.stacks, &mut budget),
            counters: CounterTable::new(setup.reserves.records, layout.len(), hot_at(layout)),
            block_rows: BlockRows::new(),
            block_budget,
            blocks: 0,
            threads,
            trace: setup.trace.map(|sink| TraceStream {
                enc: ChunkEncoder::new(setup.reserves.trace.max(MIN_TRACE_CHUNK), threads_max),
                sink,
                failed: None,
            }),
            accesses: AccessList::default(),
            instructions: 0,
            untrapped: 0,
            untraced: coldcache_dump::Untraced::default(),
            requests: crate::requests::Requests::new(setup.client_requests),
            parts: crate::parts::Parts::new(),
            unmodelled: [0; Unmodelled::ALL.len()],
            max_instructions: setup.max_instructions,
            cut_short: None,
            full: None,
            budget,
            exec_ranges: with_room(setup.exec_ranges, MAPPED_LATER),
            stable_code: with_room(setup.stable_code, MAPPED_LATER),
            changed: Vec::with_capacity(256),
            changed_all: false,
            unwinder: setup.unwinder,
            func,
            calls_seen: 0,
            calls_done: 0,
            exit_ended: 0,
            warm_done: 0,
            warm_instructions: 0,
            all_threads: setup.all_threads,
            stop_entries: setup.stop_entries,
            seen: Vec::with_capacity(MAX_THREADS_SEEN),
            exit_names: Vec::with_capacity(MAX_THREADS_SEEN),
            objects: objects_on,
            _objects_off: objects_off,
            timeline,
        })
    }

    /// The counter layout of the records.
    pub fn layout(&self) -> CounterLayout {
        self.driver.layout()
    }

    /// Instructions counted so far.
    #[inline]
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// Why the capture was cut short, if it was.
    pub fn cut_short(&self) -> Option<&'static str> {
        self.cut_short
    }

    /// Records why the capture ends early (the first reason is kept).
    pub fn set_cut_short(&mut self, why: &'static str) {
        self.cut_short.get_or_insert(why);
    }

    /// A window began with `n` other threads of the process alive that the
    /// selection left out (the most over the windows is kept).
    pub fn untraced_at_start(&mut self, n: u64) {
        self.untraced.present = self.untraced.present.max(n);
    }

    /// Traced thread `tid` is starting a thread (`clone` of a thread): one
    /// the selection does not trace unless it is `all`. Calls of a
    /// warming window are not counted (no window is open yet).
    pub fn thread_started_by(&mut self, tid: u32) {
        if !self.all_threads && !self.warming(tid) {
            self.untraced.started += 1;
        }
    }

    /// The `xchg rbx, rbx` at `ip` is about to run: when Valgrind's
    /// preamble precedes it, it is a client request, whose code RAX points
    /// at; taken from the next instruction on ([`crate::requests`]).
    fn client_request<M: Machine + ?Sized>(&mut self, ip: u64, m: &M) {
        use crate::requests::{Effect, Request, PREAMBLE};
        let mut before = [0u8; PREAMBLE.len()];
        if ip < PREAMBLE.len() as u64
            || !m.read_memory(ip - PREAMBLE.len() as u64, &mut before)
            || before != PREAMBLE
        {
            return;
        }
        let args = m.gpr(Register::RAX);
        let code = m.read_u64(args);
        let request = code.map_or(Request::Other, Request::from_code);
        let zero = match self.requests.take(request) {
            Effect::None => false,
            Effect::Zero => true,
            Effect::Dump => {
                // DUMP_STATS_AT's label: a C string its first argument
                // points at, read up to the part's room.
                let mut label = [0u8; crate::parts::LABEL];
                let mut len = 0;
                if request == Request::DumpStatsAt {
                    let at = m.read_u64(args.wrapping_add(8)).unwrap_or(0);
                    let mut word = [0u8; 8];
                    while at != 0
                        && len < label.len()
                        && m.read_memory(at.wrapping_add(len as u64), &mut word)
                    {
                        let n = word.iter().position(|&b| b == 0).unwrap_or(8);
                        let n = n.min(label.len() - len);
                        label[len..len + n].copy_from_slice(&word[..n]);
                        len += n;
                        if n < 8 {
                            break;
                        }
                    }
                }
                self.settle();
                self.parts.set_aside(
                    &self.counters,
                    self.instructions,
                    &label[..len],
                    &mut self.budget,
                )
            }
        };
        if zero {
            self.block_rows.forget_deferred();
            self.counters.zero();
            self.instructions = 0;
            self.unmodelled = [0; Unmodelled::ALL.len()];
        }
    }

    /// The watched function, if the capture has a function trigger.
    pub fn function(&self) -> Option<FunctionCalls> {
        self.func
    }

    /// Claims (or finds) the slot of a thread and starts tracing it; `None`
    /// when the slots are full.
    pub fn claim(&mut self, tid: u32) -> Option<usize> {
        self.slot_of(tid).or_else(|| self.claim_new(tid))
    }

    #[inline]
    fn slot_of(&self, tid: u32) -> Option<usize> {
        self.threads.iter().position(|t| t.tid == tid)
    }

    fn claim_new(&mut self, tid: u32) -> Option<usize> {
        let i = self.threads.iter().position(|t| t.tid == 0)?;
        if self.seen.len() == self.seen.capacity() {
            return None;
        }
        let core = self.driver.cores_mut().next_core(u64::from(tid)) as u32;
        self.seen.push((tid, core));
        self.exit_names.push([0; 16]);
        let t = &mut self.threads[i];
        t.tid = tid;
        t.serial = (self.seen.len() - 1) as u32;
        t.core = core;
        t.in_trace = false;
        t.restart(false, 0);
        Some(i)
    }

    /// Thread `tid` is exiting with the name `name` (its `comm`, NUL
    /// padded, as `PR_GET_NAME` gives it): its slot is free for a thread
    /// created later (what it counted stays, under its own number, and
    /// the dump names it so).
    pub fn release(&mut self, tid: u32, name: [u8; 16]) {
        if let Some(i) = self.slot_of(tid) {
            self.tl_stop(i);
            let t = &mut self.threads[i];
            if let Some(n) = self.exit_names.get_mut(t.serial as usize) {
                *n = name;
            }
            t.tid = 0;
            t.active = false;
        }
    }

    /// Whether thread `tid` may leave the trap engine for translated code
    /// at its next instruction: it is traced, its shadow stack is seeded
    /// and nothing ran untraced since its last step (no `syscall`, no `rep`
    /// string mid-repetition, no gather or scatter the CPU may resume).
    /// Gives the RSP above which its window ends
    /// (the watched function returned; 0: no such limit).
    pub fn hand_over_ready(&self, tid: u32) -> Option<u64> {
        let t = &self.threads[self.slot_of(tid)?];
        (t.active && t.seeded && t.after_syscall == 0 && t.rep_ip == 0 && t.resumable_ip == 0)
            .then_some(t.func_ret_slot)
    }

    /// Whether thread `tid` runs a call that only warms the cache (its
    /// instructions are simulated and counted nowhere).
    pub fn warming(&self, tid: u32) -> bool {
        self.slot_of(tid)
            .is_some_and(|i| self.threads[i].active && self.threads[i].warming)
    }

    /// Whether `ip` lies in a file-backed module mapped when the capture
    /// started (code the accountant decodes once and trusts).
    pub fn trusted(&self, ip: u64) -> bool {
        self.in_module(ip)
    }

    /// The decoded instruction at `ip`, if the accountant has decoded it
    /// (every instruction it has just stepped).
    pub fn instruction_at(&self, ip: u64) -> Option<iced_x86::Instruction> {
        self.decode.index(ip).map(|i| self.decode.at(i).instr)
    }

    /// Calls of the watched function seen so far.
    pub fn calls_seen(&self) -> u64 {
        self.calls_seen
    }

    /// Whether a call of the window (or a warming call) was entered: the
    /// accountant holds something a dump must keep.
    pub fn window_entered(&self) -> bool {
        self.func
            .is_some_and(|calls| self.calls_seen >= calls.warm_start())
    }

    /// Continues the call count of an earlier arming of the same capture
    /// (the function's library was closed and opened again): `n` calls
    /// were already seen.
    pub fn resume_calls(&mut self, n: u64) {
        self.calls_seen = n;
    }

    /// Whether some data accesses went outside every object known when
    /// they ran (and were kept by address for
    /// [`Accountant::late_mappings`]).
    pub fn has_late_accesses(&self) -> bool {
        self.objects.as_deref().is_some_and(|o| o.has_late())
    }

    /// At the capture's end: see [`Objects::late_mappings`] (nothing
    /// without object tracking). Allocates.
    pub fn late_mappings(
        &mut self,
        maps: &[crate::objects::Mapping],
        symbols: Vec<crate::objects::GlobalSymbol>,
    ) {
        if let Some(o) = self.objects.as_deref_mut() {
            o.late_mappings(maps, symbols);
        }
    }

    /// A window opens and `[start, end)` is mapped by nothing: see
    /// [`Objects::unmapped_before_window`] (nothing without object
    /// tracking). Allocation-free.
    pub fn unmapped_before_window(&mut self, start: u64, end: u64) {
        if let Some(o) = self.objects.as_deref_mut() {
            o.unmapped_before_window(start, end, &mut self.budget);
        }
    }

    /// A window opens and `[start, end)` is an anonymous writable mapping
    /// of the process (`heap`: the brk heap, whose reach past the break
    /// ends at most there, where the next line of `maps` begins): see
    /// [`Objects::mapped_before_window`]. Allocation-free.
    pub fn mapped_before_window(&mut self, start: u64, end: u64, heap: Option<u64>) {
        if let Some(o) = self.objects.as_deref_mut() {
            o.mapped_before_window(start, end, heap, &mut self.budget);
        }
    }

    /// The watched function's entry was hit by thread `tid` with stack
    /// pointer `rsp` (pointing at the return address). Counts the call and
    /// says whether it is captured; a captured call restarts the thread's
    /// tracing at the entry, ending when `rsp` is popped.
    pub fn function_entered(&mut self, tid: u32, rsp: u64) -> Entry {
        let Some(calls) = self.func else {
            return Entry::Skip;
        };
        self.calls_seen += 1;
        let n = self.calls_seen;
        if n < calls.warm_start() || n >= calls.end() {
            return Entry::Skip;
        }
        let Some(i) = self.claim(tid) else {
            return Entry::NoSlot;
        };
        self.tl_stop(i);
        self.threads[i].restart(true, rsp);
        // A call before the window warms the cache: traced like the
        // window's calls, so the simulator sees its accesses, counted
        // nowhere.
        self.threads[i].warming = n < calls.first;
        self.threads[i].call = n;
        Entry::Capture
    }

    /// A function window started on another thread: thread `tid`, selected
    /// too, is traced afresh from its next step until the window ends
    /// (its shadow stack seeded again, nothing pending from an earlier
    /// window); `warming` as the caller's call. False when the slots are
    /// full (the capture is then marked cut short).
    pub fn join_window(&mut self, tid: u32, warming: bool) -> bool {
        let Some(i) = self.claim(tid) else {
            self.set_cut_short("more threads than reserved");
            return false;
        };
        self.tl_stop(i);
        self.threads[i].restart(false, 0);
        self.threads[i].warming = warming;
        true
    }

    /// The program is exiting on thread `tid`: `exit_group` seen traced
    /// (`at_exit_group`), else the exit hook running. When that thread is
    /// inside a captured call of the function window and was traced up to
    /// the exit (at the `exit_group`, or up to the exit hook, a stop
    /// entry), the exit ends the call as its return would: the call counts
    /// as captured and the capture is not cut short; `record --all` on a
    /// program whose `main` ends in `exit()` (half the programs installed
    /// on a Linux machine) is a whole capture. False otherwise (another
    /// thread exits, no call in progress, a warming call, a thread that
    /// went on untraced, as after a `siglongjmp` out of a signal handler):
    /// the caller marks the capture cut short.
    pub fn exit_ends_call(&mut self, tid: u32, at_exit_group: bool) -> bool {
        let Some(ti) = self.slot_of(tid) else {
            return false;
        };
        let t = &mut self.threads[ti];
        let traced_to_exit = if at_exit_group {
            t.active
        } else {
            t.at_exit_hook
        };
        if self.func.is_none() || t.func_ret_slot == 0 || t.warming || !traced_to_exit {
            return false;
        }
        t.func_ret_slot = 0;
        self.calls_done += 1;
        // The call this thread makes: other threads (or recursion) may
        // have entered the function since.
        self.exit_ended = t.call;
        true
    }

    /// One instruction of thread `tid` is about to execute at `ip`, with
    /// stack pointer `sp`, frame pointer `fp` and the rest of its state in
    /// `m`. Counts it (and what ran untraced since the previous step) and
    /// says what the front end does next.
    pub fn step<M: Machine + ?Sized>(
        &mut self,
        tid: u32,
        ip: u64,
        sp: u64,
        fp: u64,
        m: &M,
    ) -> Verdict {
        let ti = match self.slot_of(tid) {
            Some(i) => i,
            None if self.all_threads => match self.claim_new(tid) {
                Some(i) => i,
                None => {
                    self.set_cut_short("more threads than reserved");
                    return Verdict::StopThread;
                }
            },
            None => return Verdict::StopThread,
        };
        if !self.threads[ti].active || (ip != 0 && self.stop_entries.contains(&ip)) {
            let [stop, hook] = self.stop_entries;
            if self.threads[ti].active && ip == hook && hook != stop {
                self.threads[ti].at_exit_hook = true;
            }
            self.tl_stop(ti);
            self.threads[ti].active = false;
            return Verdict::StopThread;
        }
        if let Some(tl) = self.timeline.as_deref_mut() {
            tl.switch(ti);
        }
        // A gather or scatter stopped part-way (an interrupt) traps again
        // at its own address with the done elements' mask bits cleared:
        // the execution its first trap counted, going on.
        let resumed = self.threads[ti].resumable_ip;
        if resumed != 0 {
            if resumed == ip {
                return Verdict::Continue;
            }
            self.threads[ti].resumable_ip = 0;
        }
        // The instruction after a `syscall` ran without a trap.
        let after = std::mem::take(&mut self.threads[ti].after_syscall);
        if after != 0 && after != ip {
            self.untraced_after_syscall(ti, after, m);
        }
        // A repeated string instruction ended at the previous step.
        let rep_ip = std::mem::take(&mut self.threads[ti].rep_ip);
        if rep_ip != 0 && rep_ip != ip {
            self.finish_rep(ti, rep_ip, m);
        }
        // A call completed: the callee's first instruction is at `ip`.
        if let Some(v) = self.enter_pending_call(ti, ip, sp) {
            return v;
        }
        if !self.threads[ti].seeded {
            self.seed(ti, ip, sp, fp, m);
            if let Some(tl) = self.timeline.as_deref_mut() {
                let t = &self.threads[ti];
                if !t.warming {
                    tl.start(ti, t.serial, current_stack(t), &mut self.budget);
                }
            }
            if let Some(o) = self.objects.as_deref_mut() {
                let fs = m.segment_base(Register::FS);
                o.thread_stack(ti, sp, fs, self.threads[ti].serial);
            }
        }
        if let Some(v) = self.pop_returned(ti, sp) {
            return v;
        }
        let di = match self.decoded(ip, m) {
            Ok(di) => di,
            Err(f) => return self.stop_full(f),
        };
        let stack = current_stack(&self.threads[ti]);
        let counted = self.count(ti, ip, stack, di, m, Mode::Before);
        let d = self.decode.at(di);
        // `xchg rbx, rbx`: a client request when the preamble precedes it
        // (never translated: it always comes here, in both modes).
        let request = d.instr.code() == Code::Xchg_rm64_r64
            && d.instr.op0_register() == Register::RBX
            && d.instr.op1_register() == Register::RBX;
        if request {
            self.client_request(ip, m);
        }
        let d = self.decode.at(di);
        if resumable(&d.instr) {
            self.threads[ti].resumable_ip = ip;
        }
        if let Some(o) = self.objects.as_deref_mut() {
            let is_ret = || d.instr.flow_control() == FlowControl::Return;
            o.observe(ti, ip, sp, stack, is_ret, m, &mut self.budget);
        }
        let (rep, len, flow) = (d.rep, d.len, d.flow);
        let rep_live = rep != Rep::None && count_register(d, m) != 0;
        if !counted {
            return self.stop_count();
        }
        if rep_live {
            self.threads[ti].rep_ip = ip;
            self.threads[ti].rep_kind = rep;
        }
        let next = ip + u64::from(len);
        let syscall = match flow {
            Flow::Call => {
                self.threads[ti].pending_call = next - 1;
                false
            }
            Flow::Syscall => {
                self.threads[ti].after_syscall = next;
                true
            }
            Flow::Other | Flow::Store64 => false,
        };
        if self.max_instructions != 0 && self.instructions >= self.max_instructions {
            self.stop("instruction limit reached")
        } else if syscall {
            Verdict::Syscall { next }
        } else {
            Verdict::Continue
        }
    }

    /// The instructions of one execution of a translated block, in order:
    /// the same as [`Accountant::step`] on each (`fill(k, m)` loads the
    /// registers recorded for instruction `k` into `m`, called before
    /// anything reads them, and not at all for an instruction whose
    /// remembered plan makes no access, or, in the steady loop, whose
    /// access's address a slot made by [`BlockSlot::recorded`] reads from
    /// the record ([`Accountant::step_block_watching`]); RSP at instruction
    /// `k` is `rsp` plus its slot's delta), with the per-instruction lookups
    /// (thread slot, decode, counter row) done once and remembered in the
    /// slots. A block holds no `rep` string, a `syscall` only as its last
    /// instruction (the next record is the instruction after it, recorded
    /// before it ran: nothing ran untraced), and only starts where nothing
    /// is pending; otherwise, or for a thread not yet seeded, every
    /// instruction goes through [`Accountant::step`], whose `syscall`
    /// verdict the replay ignores (the instruction after it comes next,
    /// with its own record, and clears what the step expected).
    /// Stops at the first verdict other than `Continue`.
    pub fn step_block<M: Machine>(
        &mut self,
        tid: u32,
        rsp: u64,
        slots: &mut [BlockSlot],
        m: &mut M,
        fill: impl FnMut(usize, &mut M),
    ) -> Verdict {
        self.step_block_watching(tid, rsp, slots, m, &[], fill, 0, |_, _| {})
    }

    /// [`Accountant::step_block`] over the block's record `record`, from
    /// which slots made by [`BlockSlot::recorded`] read their one access's
    /// address without `fill` (empty: `fill` for every one), calling
    /// `on_store(ip, len)` for each 64-bit store (`Flow::Store64`) whose
    /// address is `watched` (0: none). Fast mode's replay watches the
    /// thread's rseq `rseq_cs` field (`rseq.rs`): the accountant itself
    /// knows nothing of rseq.
    #[allow(clippy::too_many_arguments)]
    pub fn step_block_watching<M: Machine>(
        &mut self,
        tid: u32,
        rsp: u64,
        slots: &mut [BlockSlot],
        m: &mut M,
        record: &[u64],
        fill: impl FnMut(usize, &mut M),
        watched: u64,
        on_store: impl FnMut(u64, u8),
    ) -> Verdict {
        // Two copies of the loop: without a timeline it is the code it was
        // before there was one (a copy choosing per instruction measured
        // slower in fast mode).
        if self.timeline.is_some() {
            self.step_block_as::<true, M>(tid, rsp, slots, m, record, fill, watched, on_store)
        } else {
            self.step_block_as::<false, M>(tid, rsp, slots, m, record, fill, watched, on_store)
        }
    }

    /// [`Accountant::step_block`], `TL`: a timeline is recorded. Not
    /// inlined: each copy is compiled as the one function was before.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn step_block_as<const TL: bool, M: Machine>(
        &mut self,
        tid: u32,
        rsp: u64,
        slots: &mut [BlockSlot],
        m: &mut M,
        record: &[u64],
        mut fill: impl FnMut(usize, &mut M),
        watched: u64,
        mut on_store: impl FnMut(u64, u8),
    ) -> Verdict {
        let fast = slots.first().and_then(|s0| {
            let ti = self.slot_of(tid)?;
            let t = &self.threads[ti];
            (t.active
                && t.seeded
                && t.after_syscall == 0
                && t.rep_ip == 0
                && !self.stop_entries.contains(&s0.ip))
            .then_some(ti)
        });
        let Some(ti) = fast else {
            for (k, s) in slots.iter().enumerate() {
                fill(k, m);
                let v = self.step(tid, s.ip, rsp.wrapping_add(s.sp_delta as u64), 0, m);
                if v != Verdict::Continue {
                    return v;
                }
            }
            return Verdict::Continue;
        };
        let (serial, core, warming) = {
            let t = &self.threads[ti];
            (t.serial, t.core as usize, self.counted_nowhere(ti))
        };
        if let Some(tl) = self.timeline.as_deref_mut().filter(|_| TL) {
            tl.switch(ti);
        }
        // Without a trace and outside a warming call (neither changes within
        // a block: a warming call ends where its thread stops), each
        // instruction takes `count_plain` (its copy with the timeline's
        // running row when one is recorded, so the other is as it was).
        let plain = self.trace.is_none() && !warming;
        let limited = self.max_instructions != 0
            && self.instructions + slots.len() as u64 >= self.max_instructions;
        // The block's number, given at its first replay in this capture.
        let block = match slots[0].block {
            BlockSlot::NONE if self.blocks < BlockSlot::NONE => {
                self.blocks += 1;
                slots[0].block = self.blocks - 1;
                self.blocks - 1
            }
            b => b,
        };
        let b = BlockCtx {
            ti,
            rsp,
            serial,
            core,
            warming,
            plain,
            block,
            count: slots.len() as u32,
            watched,
            fetch_shift: self.driver.fetch_shift(core).unwrap_or(0),
        };
        let mut st = BlockState {
            call_before: true,
            checked: i64::MIN,
            stack: 0,
            cells: None,
            cells_stack: u32::MAX,
            last_fetch: NO_LINE,
        };
        // Runs of instructions that are only fetched, each within the line
        // the fetch before it ended in, are counted together
        // (`count_fetch_run`) where each would take `count_fetch_only`'s
        // path one by one, and the instructions whose slots remember all
        // they need are counted by `step_steady`: no timeline, trace,
        // warming, object tracking or instruction limit.
        let runs = plain && !TL && self.objects.is_none() && !limited;
        let mut k = 0;
        while k < slots.len() {
            if st.call_before {
                // The block's first instruction (a block ends at a call):
                // the callee's frame, if a call came before, and the frames
                // it returned from.
                let s = &slots[k];
                let sp = rsp.wrapping_add(s.sp_delta as u64);
                // Nothing pending (a block not entered by a call): no frame.
                if self.threads[ti].pending_call != 0 {
                    if let Some(v) = self.enter_pending_call(ti, s.ip, sp) {
                        return v;
                    }
                }
                if let Some(v) = self.pop_returned(ti, sp) {
                    return v;
                }
                st.checked = s.sp_delta;
                st.stack = current_stack(&self.threads[ti]);
                st.call_before = false;
            }
            if runs {
                // The instructions from here on that need nothing but what
                // their slots remember, counted in a loop of their own.
                k = self.step_steady(slots, k, &b, &mut st, m, record, &mut fill, &mut on_store);
                if k == slots.len() {
                    break;
                }
            }
            if let Some(v) =
                self.step_slot::<TL, M>(slots, k, &b, &mut st, m, &mut fill, &mut on_store)
            {
                return v;
            }
            if limited && self.instructions >= self.max_instructions {
                return self.stop("instruction limit reached");
            }
            k += 1;
        }
        Verdict::Continue
    }

    /// One instruction of a block, slot `k`, the block loop's general way
    /// (all [`Accountant::step_steady`] leaves to it: an instruction met
    /// for the first time, or for the first time under this stack (its
    /// block cell has no row yet), with a plan that is not quick, a frame
    /// to pop, a trace, a timeline, object tracking, ...): the
    /// frames it returned from, its decode, its row, its count. `Some`:
    /// the verdict that ends the block here. Not inlined: the loop that
    /// calls it keeps its registers for the common case.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn step_slot<const TL: bool, M: Machine>(
        &mut self,
        slots: &mut [BlockSlot],
        k: usize,
        b: &BlockCtx,
        st: &mut BlockState,
        m: &mut M,
        fill: &mut impl FnMut(usize, &mut M),
        on_store: &mut impl FnMut(u64, u8),
    ) -> Option<Verdict> {
        let BlockCtx {
            ti,
            rsp,
            serial,
            core,
            warming,
            plain,
            block,
            watched,
            ..
        } = *b;
        let s = &mut slots[k];
        // The registers are loaded only where something reads them: not
        // for an instruction whose remembered plan makes no access.
        let mut filled = false;
        let (ip, sp) = (s.ip, rsp.wrapping_add(s.sp_delta as u64));
        if s.sp_delta > st.checked {
            if let Some(v) = self.pop_returned(ti, sp) {
                return Some(v);
            }
            st.checked = s.sp_delta;
            st.stack = current_stack(&self.threads[ti]);
        }
        let di = if s.decoded != BlockSlot::NONE {
            s.decoded as usize
        } else {
            fill(k, m);
            filled = true;
            let di = match self.decoded(ip, m) {
                Ok(di) => di,
                Err(f) => return Some(self.stop_full(f)),
            };
            let d = self.decode.at(di);
            if d.trusted {
                s.decoded = di as u32;
                (s.len, s.flow, s.quick) = (d.len, d.flow, d.plan.quick());
                s.address = s
                    .quick
                    .zip(s.record)
                    .and_then(|(q, (at, inputs))| q.recorded(&inputs, at));
                s.fetch_only =
                    s.flow == Flow::Other && s.quick.is_some_and(|q| !q.reads_registers());
            }
            di
        };
        let row = if warming {
            WARM_ROW
        } else if s.row != BlockSlot::NONE && s.stack == st.stack && s.serial == serial {
            s.row as usize
        } else {
            if st.cells_stack != st.stack && block != BlockSlot::NONE {
                self.block_cells(b, st);
            }
            let cell = match st.cells {
                Some(c) if st.cells_stack == st.stack => *self.block_rows.cell(c + k),
                _ => BlockRows::NONE,
            };
            let row = if cell != BlockRows::NONE {
                cell as usize
            } else {
                let row = match self
                    .counters
                    .row_index(ip, st.stack, serial, &mut self.budget)
                {
                    Ok(row) => row,
                    Err(f) => return Some(self.stop_full(f)),
                };
                if let Some(c) = st.cells.filter(|_| st.cells_stack == st.stack) {
                    *self.block_rows.cell(c + k) = row as u32;
                }
                row
            };
            s.cell = match st.cells {
                Some(c) if st.cells_stack == st.stack => (c + k) as u32,
                _ => BlockSlot::NONE,
            };
            (s.row, s.stack, s.serial) = (row as u32, st.stack, serial);
            row
        };
        let (len, flow) = if plain {
            match s.quick.filter(|_| s.decoded != BlockSlot::NONE) {
                Some(q) => {
                    if q.reads_registers() && !filled {
                        fill(k, m);
                        filled = true;
                    }
                    self.accesses.clear();
                    let modelled = q.eval(m, &mut self.accesses);
                    if !TL
                        && s.cell != BlockSlot::NONE
                        && modelled.is_ok()
                        && self.accesses.as_slice().is_empty()
                    {
                        self.count_fetch_only(
                            core,
                            ip,
                            row,
                            s.cell as usize,
                            s.len,
                            &mut st.last_fetch,
                        );
                    } else {
                        self.count_evaluated::<TL>(
                            ti,
                            core,
                            ip,
                            row,
                            s.len,
                            modelled,
                            &mut st.last_fetch,
                        );
                    }
                    (s.len, s.flow)
                }
                None => {
                    if !filled {
                        fill(k, m);
                        filled = true;
                    }
                    self.count_plain::<TL, M>(ti, core, ip, row, di, m, &mut st.last_fetch)
                }
            }
        } else {
            if !filled {
                fill(k, m);
                filled = true;
            }
            let counted = self.count_row(ti, ip, st.stack, row, di, m, Mode::Before);
            if !counted {
                return Some(self.stop_count());
            }
            st.last_fetch = NO_LINE;
            let d = self.decode.at(di);
            (d.len, d.flow)
        };
        if let Some(o) = self.objects.as_deref_mut() {
            // The allocator's arguments and results are registers an
            // instruction's own plan need not read (an `endbr64` at
            // malloc's entry reads none): loaded here if they were not.
            if !filled {
                fill(k, m);
            }
            let d = self.decode.at(di);
            let is_ret = || d.instr.flow_control() == FlowControl::Return;
            o.observe(ti, ip, sp, st.stack, is_ret, m, &mut self.budget);
        }
        st.call_before = flow == Flow::Call;
        if st.call_before {
            self.threads[ti].pending_call = ip + u64::from(len) - 1;
        } else if flow == Flow::Store64
            && watched != 0
            && self.accesses.as_slice().first().map(|a| a.addr) == Some(watched)
        {
            on_store(ip, len);
        }
        None
    }

    /// Counts the instructions of `slots` from `k` on for as long as each
    /// is one the block's loop would count in its plainest way (no
    /// timeline, trace, warming, object tracking or instruction limit,
    /// not right after a call: the caller's `runs` and prologue), and
    /// returns the index of the first it left to that loop (`slots.len()`
    /// when none). Such an instruction is in a run of instructions only
    /// fetched (a marked run, or [`Accountant::count_fetch_run`]'s), or its
    /// slot remembers its decode and a quick plan and its row under
    /// `st.stack` and the thread's serial (or the block's cell under them,
    /// `st.cells`, looked up here if it was not yet, has it), its RSP is
    /// not above `st.checked` or above it with no frame to pop (the check
    /// moves up), and its flow asks
    /// nothing ([`Flow::Other`]), is a 64-bit store (reported to
    /// `on_store` where it writes `watched`, as the block loop does) or a
    /// call (its callee's frame left pending, `st.call_before`, and the
    /// loop ends after it). One that makes no access is counted in its
    /// cell ([`Accountant::count_fetch_only`]), one that makes one by
    /// [`Accountant::count_one`]. What each costs and in what order is
    /// exactly the block loop's; this loop, a function of its own, keeps
    /// its few values in registers.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn step_steady<M: Machine>(
        &mut self,
        slots: &mut [BlockSlot],
        mut k: usize,
        b: &BlockCtx,
        st: &mut BlockState,
        m: &mut M,
        record: &[u64],
        fill: &mut impl FnMut(usize, &mut M),
        on_store: &mut impl FnMut(u64, u8),
    ) -> usize {
        let BlockCtx {
            ti,
            rsp,
            core,
            serial,
            fetch_shift,
            watched,
            ..
        } = *b;
        let stack = st.stack;
        let mut cells = st.cells.filter(|_| st.cells_stack == stack);
        let (mut checked, mut last_fetch) = (st.checked, st.last_fetch);
        'slots: while k < slots.len() {
            // Only an instruction that is only fetched starts a run (both
            // ways below ask `fits_run`, which asks `fetch_only` first).
            if last_fetch != NO_LINE && slots[k].fetch_only {
                // A run marked at this instruction's cell: counted as one.
                let s = &slots[k];
                if s.cell != BlockSlot::NONE
                    && s.stack == stack
                    && s.serial == serial
                    && s.fits_run(checked, last_fetch, fetch_shift)
                {
                    let n = self.block_rows.run_at(s.cell as usize, fetch_shift);
                    if n != 0 && n <= slots.len() - k {
                        let counters = &mut self.counters;
                        self.block_rows
                            .count_run(s.cell as usize, &mut |row, times| {
                                add_plain(counters, row as usize, times)
                            });
                        self.driver.fetch_hits(core, n as u64);
                        self.instructions += n as u64;
                        k += n;
                        continue;
                    }
                }
                let n = self.count_fetch_run(
                    &mut slots[k..],
                    core,
                    (stack, serial, checked),
                    last_fetch,
                    fetch_shift,
                );
                if n != 0 {
                    k += n;
                    continue;
                }
            }
            let s = &mut slots[k];
            if s.sp_delta > checked {
                // RSP rose above every RSP checked since the block began:
                // a frame may be popped. Where none is (what
                // `pop_returned` finds first) only the check moves up.
                if self.threads[ti].would_pop(rsp.wrapping_add(s.sp_delta as u64)) {
                    break 'slots;
                }
                checked = s.sp_delta;
            }
            let q = match s.quick {
                Some(q)
                    if s.decoded != BlockSlot::NONE
                        && matches!(s.flow, Flow::Other | Flow::Store64 | Flow::Call) =>
                {
                    q
                }
                _ => break 'slots,
            };
            if !(s.row != BlockSlot::NONE && s.stack == stack && s.serial == serial) {
                // The slot remembers its row under another stack: the
                // block's cells under this one have it, if it ran here
                // before (found as `step_slot` finds them).
                if cells.is_none() && st.cells_stack != stack && b.block != BlockSlot::NONE {
                    cells = self.block_cells(b, st);
                }
                let Some(c) = cells else {
                    break 'slots;
                };
                let row = *self.block_rows.cell(c + k);
                if row == BlockRows::NONE {
                    break 'slots;
                }
                s.cell = (c + k) as u32;
                (s.row, s.stack, s.serial) = (row, stack, serial);
            }
            let (ip, len, row, flow) = (s.ip, s.len, s.row as usize, s.flow);
            if q.reads_registers() {
                // The address as the record holds it, or (a slot of no
                // record) from the registers loaded into the machine.
                let a = match s.address.as_ref().and_then(|r| r.access(record, m)) {
                    Some(a) => a,
                    None => {
                        fill(k, m);
                        match q.access(m) {
                            Some(a) => a,
                            None => break 'slots,
                        }
                    }
                };
                self.count_one(core, ip, len, row, a, &mut last_fetch);
                if flow == Flow::Store64 && watched != 0 && a.addr == watched {
                    on_store(ip, len);
                } else if flow == Flow::Call {
                    // The callee's frame is entered at the next
                    // instruction (the block loop's prologue).
                    self.threads[ti].pending_call = ip + u64::from(len) - 1;
                    st.call_before = true;
                    k += 1;
                    break 'slots;
                }
            } else if s.cell != BlockSlot::NONE {
                let cell = s.cell as usize;
                self.count_fetch_only(core, ip, row, cell, len, &mut last_fetch);
            } else {
                break 'slots;
            }
            k += 1;
        }
        (st.checked, st.last_fetch) = (checked, last_fetch);
        k
    }

    /// The first cell of the block's rows under the current stack
    /// (`st.stack`), looked up in [`BlockRows`] and kept in `st` (`None`:
    /// the table could not grow).
    fn block_cells(&mut self, b: &BlockCtx, st: &mut BlockState) -> Option<usize> {
        st.cells =
            self.block_rows
                .start(b.block, b.count, st.stack, b.serial, &mut self.block_budget);
        st.cells_stack = st.stack;
        st.cells
    }

    /// [`Accountant::count_evaluated`] (no timeline) of an instruction of
    /// `len` bytes at `ip` that made the one access `a`, into row `row`,
    /// without object tracking: its fetch, then its access, each counted
    /// in the row's narrow part where the first level served it plainly.
    #[inline(always)]
    fn count_one(
        &mut self,
        core: usize,
        ip: u64,
        len: u8,
        row: usize,
        a: MemAccess,
        last_fetch: &mut u64,
    ) {
        debug_assert!(self.objects.is_none());
        self.driver.set_fill_row(row as u32);
        let layout = self.driver.layout();
        let fetch = self
            .driver
            .fetch(core, fetch_of(ip, len), last_fetch)
            .unwrap_or(AccessResult::L1_HIT);
        let mut hits = count_narrow(
            layout,
            &mut self.counters,
            row,
            AccessKind::InstrFetch,
            &fetch,
        );
        let access = Access::new(a.kind, a.addr, a.size).with_ip(ip);
        hits += match self.driver.simulate_or_hit(core, access) {
            // A plain first-level hit, of a demand kind (the only ones the
            // lean engine's check decides).
            None => 1 << (16 * Side::of(a.kind).map_or(0, |s| s as u32)),
            Some(r) => count_narrow(layout, &mut self.counters, row, a.kind, &r),
        };
        add_executed(&mut self.counters, row, hits);
        credit_line_use(&mut self.driver, &mut self.counters);
        self.instructions += 1;
    }

    /// Counts the longest run at the start of `slots` of instructions that
    /// are only fetched ([`BlockSlot::fetch_only`]), whose rows and cells
    /// are remembered for `stack` and `serial`, whose RSP is not above
    /// `checked` (no frame to pop), and whose fetches lie in the line
    /// `last_fetch` (`addr >> shift`): what `count_fetch_only` does for
    /// each, one plain execution deferred to its cell and a first-level
    /// fetch hit without a look ([`Driver::fetch_hits`]). Returns the
    /// run's length (0: the first slot is not such an instruction). A run
    /// of two or more whose cells are one key's, in order, none with RSP
    /// above the first's, is marked at its first cell
    /// ([`BlockRows::mark_run`]): the next time that slot starts a run,
    /// the block's loop counts the whole run as one, with only the first
    /// slot checked (the others' conditions do not change: they are
    /// decoded, fetched only and within the first's line, which a run
    /// starts only in the line the fetch before it ended in).
    #[inline(always)]
    fn count_fetch_run(
        &mut self,
        slots: &mut [BlockSlot],
        core: usize,
        (stack, serial, checked): (u32, u32, i64),
        last_fetch: u64,
        shift: u32,
    ) -> usize {
        let mut n = 0;
        // Whether the slots so far can be marked a run (`BlockRows`): cells
        // of one key in order, none with RSP above the first's (so the
        // first's check covers them).
        let mut run = true;
        let (cell0, sp0) = match slots.first() {
            Some(s) => (s.cell, s.sp_delta),
            None => return 0,
        };
        for s in slots.iter() {
            if !(s.row != BlockSlot::NONE
                && s.cell != BlockSlot::NONE
                && s.stack == stack
                && s.serial == serial
                && s.fits_run(checked, last_fetch, shift))
            {
                break;
            }
            if let Some((row, times)) = self.block_rows.defer(s.cell as usize) {
                add_plain(&mut self.counters, row as usize, times);
            }
            run &= s.cell == cell0.wrapping_add(n as u32) && s.sp_delta <= sp0;
            n += 1;
        }
        if n != 0 {
            self.driver.fetch_hits(core, n as u64);
            self.instructions += n as u64;
        }
        if run && (2..=0xffff).contains(&n) {
            self.block_rows.mark_run(cell0 as usize, n, shift);
        }
        n
    }

    /// A call completed at the previous step: pushes the shadow frame of
    /// its callee, whose first instruction is at `ip` (RSP `sp` points at
    /// the return address). `Some` when a reserve is exhausted.
    fn enter_pending_call(&mut self, ti: usize, ip: u64, sp: u64) -> Option<Verdict> {
        let site = std::mem::take(&mut self.threads[ti].pending_call);
        if site == 0 {
            return None;
        }
        let parent = current_stack(&self.threads[ti]);
        let id = match self.stacks.intern(parent, site, ip, &mut self.budget) {
            Ok(id) => id,
            Err(f) => return Some(self.stop_full(f)),
        };
        let frame = Frame {
            stack: id,
            ret_slot: sp,
            site,
        };
        let t = &mut self.threads[ti];
        if let Err(r) = t.frames.push(frame, &mut self.budget) {
            let f = r.full("depth", t.frames.len(), t.frames.bytes(), &self.budget);
            return Some(self.stop_full(f));
        }
        if let Some(tl) = self.timeline.as_deref_mut() {
            tl.moved(ti, t.serial, id, &mut self.budget);
        }
        None
    }

    /// Thread slot `ti` leaves the window: its timeline's stop event.
    fn tl_stop(&mut self, ti: usize) {
        if let Some(tl) = self.timeline.as_deref_mut() {
            let t = &self.threads[ti];
            tl.stop(ti, t.serial, current_stack(t), &mut self.budget);
        }
    }

    /// Pops the shadow frames whose return-address slot lies below `sp`
    /// (returns, `longjmp`, exceptions); `Some` when the watched function
    /// has returned, which ends this thread's window. Inlined, the common
    /// case: nothing popped, the window goes on (the replay asks at each
    /// block).
    #[inline]
    fn pop_returned(&mut self, ti: usize, sp: u64) -> Option<Verdict> {
        if !self.threads[ti].would_pop(sp) {
            return None;
        }
        self.pop_returned_now(ti, sp)
    }

    /// [`Accountant::pop_returned`] when a frame pops or the window ends.
    #[inline(never)]
    fn pop_returned_now(&mut self, ti: usize, sp: u64) -> Option<Verdict> {
        let t = &mut self.threads[ti];
        let depth = t.frames.len();
        while t.frames.last().is_some_and(|f| f.ret_slot < sp) {
            t.frames.pop();
        }
        if t.frames.len() != depth {
            if let Some(tl) = self.timeline.as_deref_mut() {
                tl.moved(ti, t.serial, current_stack(t), &mut self.budget);
            }
        }
        if t.func_ret_slot == 0 || sp <= t.func_ret_slot {
            return None;
        }
        if let Some(tl) = self.timeline.as_deref_mut() {
            tl.stop(ti, t.serial, current_stack(t), &mut self.budget);
        }
        t.func_ret_slot = 0;
        t.active = false;
        if std::mem::take(&mut t.warming) {
            self.warm_done += 1;
            let more = self.cut_short.is_none();
            return Some(Verdict::FunctionReturned { more });
        }
        self.calls_done += 1;
        let more = self
            .func
            .is_some_and(|calls| self.calls_seen < calls.end() - 1)
            && self.cut_short.is_none();
        Some(Verdict::FunctionReturned { more })
    }

    /// Whether `ip` lies in a file-backed module mapped at the start, whose
    /// code does not change under us (nothing unmapped, remapped or made
    /// writable there since).
    fn in_module(&self, ip: u64) -> bool {
        self.stable_code.iter().any(|&(s, e)| ip >= s && ip < e)
            && !self.changed_all
            && !self.changed.iter().any(|&(s, e)| ip >= s && ip < e)
    }

    /// The accesses of the instruction at `ip` evaluated on two machines
    /// at the same instant (`--mode verify`: the live context and the
    /// registers a translated block recorded); `None` when they agree (or
    /// the instruction cannot be decoded: the reserve is full), else both
    /// lists. Allocation-free.
    #[allow(clippy::type_complexity)]
    pub fn verify<L: Machine + ?Sized, R: Machine + ?Sized>(
        &mut self,
        ip: u64,
        again: bool,
        live: &L,
        recorded: &R,
    ) -> Option<(
        Result<AccessList, Unmodelled>,
        Result<AccessList, Unmodelled>,
    )> {
        let di = self.decoded(ip, live).ok()?;
        let d = self.decode.at(di);
        if again && resumable(&d.instr) {
            // The CPU resuming a gather or scatter it stopped part-way:
            // the live mask has lost the elements done; the record holds
            // them all, as the replay must.
            return None;
        }
        let eval = |m: &dyn Fn(&mut AccessList) -> Result<(), Unmodelled>| {
            let mut l = AccessList::default();
            m(&mut l).map(|()| l)
        };
        let a = eval(&|l| d.plan.eval(&d.instr, live, l));
        let b = eval(&|l| d.plan.eval(&d.instr, recorded, l));
        let same = match (&a, &b) {
            (Ok(x), Ok(y)) => x.as_slice() == y.as_slice(),
            (Err(x), Err(y)) => x == y,
            _ => false,
        };
        (!same).then_some((a, b))
    }

    /// Code in `start..end` is about to be unmapped, remapped or made
    /// writable (a system call of a traced thread: `munmap`, `mprotect`,
    /// `mremap`, a fixed `mmap`, as `dlclose` does): what was decoded there
    /// is checked against memory before it counts again, and so is anything
    /// decoded there later. Allocation-free (a signal handler calls it).
    pub fn code_changed(&mut self, start: u64, end: u64) {
        if !self.stable_code.iter().any(|&(s, e)| start < e && end > s) {
            return;
        }
        self.decode.distrust(start, end);
        if self.changed.len() < self.changed.capacity() {
            self.changed.push((start, end));
        } else {
            self.changed_all = true;
        }
    }

    /// Code mapped during the capture (a `dlopen`ed library's text, found
    /// in `/proc/self/maps` after a traced thread's `mmap`) becomes stable
    /// code, as if it had been mapped at the start: decoded once, its
    /// addresses in the unwinder's executable ranges. Refused (false) when
    /// the range overlaps stable code already known, or code that changed
    /// in this capture (that stays checked at every execution), or when
    /// the room reserved for such ranges is used up. Allocation-free.
    pub fn trust_code(&mut self, start: u64, end: u64) -> bool {
        let overlaps = |v: &[(u64, u64)]| v.iter().any(|&(s, e)| start < e && end > s);
        if start >= end
            || self.changed_all
            || overlaps(&self.changed)
            || overlaps(&self.stable_code)
            || self.stable_code.len() == self.stable_code.capacity()
        {
            return false;
        }
        self.stable_code.push((start, end));
        if self.exec_ranges.len() < self.exec_ranges.capacity() && !overlaps(&self.exec_ranges) {
            self.exec_ranges.push((start, end));
        }
        true
    }

    /// A count failed: the trace's sink stopped, or else a table could
    /// not grow (`full`, set by `count`).
    fn stop_count(&mut self) -> Verdict {
        match self.trace.as_ref().and_then(|t| t.failed) {
            Some(why) => self.stop(why),
            None => self.stop(TABLE_FULL),
        }
    }

    /// Table `f.table` could not grow: the capture stops, cut short with
    /// its figures (the first cut's reason is kept).
    fn stop_full(&mut self, f: Full) -> Verdict {
        if self.cut_short.is_none() {
            self.full = Some(f);
        }
        self.stop(TABLE_FULL)
    }

    /// Bytes the tables have mapped, and the budget's bound.
    /// (The block index's eighth counts as used from the start.)
    pub fn memory(&self) -> (usize, usize) {
        (self.budget.used(), self.budget.limit())
    }

    fn stop(&mut self, why: &'static str) -> Verdict {
        self.set_cut_short(why);
        Verdict::StopCapture(why)
    }

    /// Decodes (or finds) the instruction at `ip`. A decode of code outside
    /// the file-backed modules (a JIT's buffer, rewritten in place) is
    /// trusted only while the bytes there are the ones decoded.
    fn decoded<M: Machine + ?Sized>(&mut self, ip: u64, m: &M) -> Result<usize, Full> {
        if let Some(i) = self.decode.index(ip) {
            let d = self.decode.at(i);
            if d.trusted {
                return Ok(i);
            }
            let len = usize::from(d.len).min(15);
            let mut now = [0u8; 15];
            let to_page_end = (0x1000 - (ip & 0xFFF)) as usize;
            let first = len.min(to_page_end);
            let same = m.read_code(ip, &mut now[..first])
                && (first == len || m.read_memory(ip + first as u64, &mut now[first..len]))
                && now[..len] == d.bytes[..len];
            if same {
                return Ok(i);
            }
        }
        // Read up to 15 bytes without crossing into a page the instruction
        // does not use: a first read stops at the page end; an instruction
        // that continues on the next page proves that page is mapped.
        let mut bytes = [0u8; 15];
        let to_page_end = (0x1000 - (ip & 0xFFF)) as usize;
        let first = to_page_end.min(15);
        if !m.read_code(ip, &mut bytes[..first]) {
            bytes[..first].fill(0);
        }
        let mut decoder = Decoder::with_ip(64, &bytes[..first], ip, DecoderOptions::NONE);
        let mut instr = decoder.decode();
        if instr.is_invalid() && first < 15 {
            // The rest may lie on the next page, which need not be mapped
            // (an invalid instruction at a page end): unreadable bytes stay
            // zero and decoding fails as it would on the CPU.
            if !m.read_memory(ip + first as u64, &mut bytes[first..]) {
                bytes[first..].fill(0);
            }
            let mut decoder = Decoder::with_ip(64, &bytes, ip, DecoderOptions::NONE);
            instr = decoder.decode();
        }
        let flow = match instr.flow_control() {
            FlowControl::Call | FlowControl::IndirectCall if instr.mnemonic() == Mnemonic::Call => {
                Flow::Call
            }
            _ if instr.mnemonic() == Mnemonic::Syscall => Flow::Syscall,
            _ if matches!(instr.code(), Code::Mov_rm64_r64 | Code::Mov_rm64_imm32)
                && instr.op0_kind() == OpKind::Memory =>
            {
                Flow::Store64
            }
            _ => Flow::Other,
        };
        let plan = self.model.plan(&instr);
        let d = Decoded {
            instr,
            plan,
            len: instr.len().max(1) as u8,
            flow,
            rep: rep_kind(&instr),
            bytes,
            trusted: self.in_module(ip),
        };
        self.decode.insert_index(ip, d, &mut self.budget)
    }

    /// A repeated string instruction at `ip` stopped repeating. Valgrind
    /// (and so Callgrind's Ir) executes it once more when the repetition
    /// ends on the count (the check that finds RCX = 0); the hardware does
    /// not trap for that check. It is counted as one more execution without
    /// data access, so instruction counts agree with Valgrind's.
    fn finish_rep<M: Machine + ?Sized>(&mut self, ti: usize, ip: u64, m: &M) {
        let kind = self.threads[ti].rep_kind;
        let Some(di) = self.decode.index(ip) else {
            return;
        };
        let zf = m.rflags() & 0x40 != 0;
        let ended_on_count = count_register(self.decode.at(di), m) == 0
            && match kind {
                Rep::Count => true,
                Rep::WhileEqual => zf,
                Rep::WhileNotEqual => !zf,
                Rep::None => false,
            };
        if ended_on_count {
            let stack = current_stack(&self.threads[ti]);
            self.count(ti, ip, stack, di, m, Mode::NoData);
        }
    }

    /// Accounts for the instruction at `ip` that ran untraced after a
    /// `syscall`; the machine state is the one after it ran.
    fn untraced_after_syscall<M: Machine + ?Sized>(&mut self, ti: usize, ip: u64, m: &M) {
        let di = match self.decoded(ip, m) {
            Ok(di) => di,
            Err(f) => {
                self.stop_full(f);
                return;
            }
        };
        let stack = current_stack(&self.threads[ti]);
        if self.count(ti, ip, stack, di, m, Mode::After) && !self.threads[ti].warming {
            self.untrapped += 1;
        }
        let d = self.decode.at(di);
        if d.flow == Flow::Call {
            self.threads[ti].pending_call = ip + u64::from(d.len) - 1;
        }
    }

    /// Whether what thread slot `ti` runs now is simulated but counted
    /// nowhere (its row is [`WARM_ROW`]): a warming call before the
    /// window, or collection or instrumentation turned off by a client
    /// request.
    fn counted_nowhere(&self, ti: usize) -> bool {
        self.threads[ti].warming || !self.requests.counting()
    }

    /// Counts one execution of the instruction decoded at index `di` of the
    /// decode cache, at `ip`. Returns false when the record or trace
    /// reserve is exhausted.
    fn count<M: Machine + ?Sized>(
        &mut self,
        ti: usize,
        ip: u64,
        stack: u32,
        di: usize,
        m: &M,
        mode: Mode,
    ) -> bool {
        let serial = self.threads[ti].serial;
        let row = if self.counted_nowhere(ti) {
            WARM_ROW
        } else {
            match self.counters.row_index(ip, stack, serial, &mut self.budget) {
                Ok(row) => row,
                Err(f) => {
                    if self.cut_short.is_none() {
                        self.full = Some(f);
                    }
                    return false;
                }
            }
        };
        self.count_row(ti, ip, stack, row, di, m, mode)
    }

    /// [`Accountant::count_row`] of an instruction of a block, in its most
    /// common case, inlined into the block's loop: the state before it
    /// runs, no trace kept, not warming (`row` is a table row). Gives the
    /// instruction's length and flow. It cannot fail: only a trace can.
    /// `TL`: a timeline is recorded (its running row gets the increments).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn count_plain<const TL: bool, M: Machine + ?Sized>(
        &mut self,
        ti: usize,
        core: usize,
        ip: u64,
        row: usize,
        di: usize,
        m: &M,
        last_fetch: &mut u64,
    ) -> (u8, Flow) {
        let d = self.decode.at(di);
        self.accesses.clear();
        let modelled = d.plan.eval(&d.instr, m, &mut self.accesses);
        let (len, flow) = (d.len, d.flow);
        self.count_evaluated::<TL>(ti, core, ip, row, len, modelled, last_fetch);
        (len, flow)
    }

    /// The rest of [`Accountant::count_plain`], once the instruction's
    /// accesses are in `self.accesses` (or `modelled` says why not).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn count_evaluated<const TL: bool>(
        &mut self,
        ti: usize,
        core: usize,
        ip: u64,
        row: usize,
        len: u8,
        modelled: Result<(), Unmodelled>,
        last_fetch: &mut u64,
    ) {
        self.driver.set_fill_row(row as u32);
        attribute_narrow(
            &mut self.driver,
            core,
            ip,
            len,
            &self.accesses,
            modelled,
            &mut self.counters,
            row,
            self.objects.as_deref_mut(),
            (
                self.threads[ti].serial,
                ti,
                self.threads[ti].frames.as_slice(),
            ),
            &mut self.budget,
            match TL {
                true => self.timeline.as_deref_mut().map(|t| &mut t.run[..]),
                false => None,
            },
            last_fetch,
        );
        credit_line_use(&mut self.driver, &mut self.counters);
        if let Err(why) = modelled {
            if let Some(i) = Unmodelled::ALL.iter().position(|&u| u == why) {
                self.unmodelled[i] += 1;
            }
        }
        self.instructions += 1;
    }

    /// [`Accountant::count_evaluated`] for an instruction that made no data
    /// access, replayed in block cell `cell` (whose row is `row`): a fetch
    /// the first level served is counted in the cell
    /// ([`BlockRows::defer`]), to be added to the row when the counters are
    /// read ([`Accountant::settle`]); any other is counted in the row.
    #[inline(always)]
    fn count_fetch_only(
        &mut self,
        core: usize,
        ip: u64,
        row: usize,
        cell: usize,
        len: u8,
        last_fetch: &mut u64,
    ) {
        let fetch = fetch_of(ip, len);
        match self.driver.fetch(core, fetch, last_fetch) {
            None => {
                if let Some((row, n)) = self.block_rows.defer(cell) {
                    add_plain(&mut self.counters, row as usize, n);
                }
            }
            Some(r) => {
                let layout = self.driver.layout();
                self.counters.hot(row)[HOT_INSTRUCTIONS] += 1;
                layout.add_access(self.counters.row(row), AccessKind::InstrFetch, &r);
            }
        }
        self.instructions += 1;
    }

    /// Adds the plain executions the block cells counted to their rows:
    /// before anything reads the counters.
    fn settle(&mut self) {
        let counters = &mut self.counters;
        self.block_rows
            .settle(|row, n| add_plain(counters, row as usize, n));
    }

    /// [`Accountant::count`] into counter row `row` (of `stack`;
    /// [`WARM_ROW`]: a warming instruction, simulated and counted nowhere,
    /// not traced).
    #[allow(clippy::too_many_arguments)]
    fn count_row<M: Machine + ?Sized>(
        &mut self,
        ti: usize,
        ip: u64,
        stack: u32,
        row: usize,
        di: usize,
        m: &M,
        mode: Mode,
    ) -> bool {
        // A field borrow, not of `self`: the counting below mutates only
        // other fields.
        let d = self.decode.at(di);
        let core = self.threads[ti].core as usize;
        let serial = self.threads[ti].serial;
        self.accesses.clear();
        let modelled = match mode {
            Mode::Before => d.plan.eval(&d.instr, m, &mut self.accesses),
            Mode::NoData => Ok(()),
            Mode::After => d.plan.eval_after(&d.instr, m, &mut self.accesses),
        };
        let warm = row == WARM_ROW;
        // The trace's room is made before anything counts (a full chunk
        // written out), so a capture the sink stops holds in its dump what
        // the trace's written chunks hold, up to the chunk that failed.
        if let Some(trace) = self.trace.as_mut().filter(|_| !warm) {
            let undefined = !self.threads[ti].in_trace;
            let n = 1
                + usize::from(undefined)
                + if modelled.is_ok() {
                    self.accesses.as_slice().len()
                } else {
                    0
                };
            if (trace.failed.is_some() || !trace.enc.fits(n)) && trace.flush().is_err() {
                return false;
            }
            // A thread is defined before its first record.
            if undefined {
                let t = &mut self.threads[ti];
                trace.enc.define_thread(serial, u64::from(t.tid));
                t.in_trace = true;
            }
            let trace = &mut trace.enc;
            trace.push(&TraceRecord {
                kind: RecordKind::Instr,
                addr: ip,
                size: u32::from(d.len),
                ip,
                thread: serial,
                stack,
                unmodelled: modelled.is_err(),
            });
            if modelled.is_ok() {
                for a in self.accesses.as_slice() {
                    trace.push(&TraceRecord {
                        kind: record_kind(a.kind),
                        addr: a.addr,
                        size: a.size.clamp(1, coldcache_cctrace::MAX_ACCESS_SIZE),
                        ip,
                        thread: serial,
                        stack,
                        unmodelled: false,
                    });
                }
            }
        }
        // A warming instruction's fills are credited nowhere (WARM_ROW
        // is u32::MAX as a u32).
        self.driver.set_fill_row(row as u32);
        if !warm {
            // One instruction at a time: no fetch before it is known.
            let mut last_fetch = NO_LINE;
            attribute_narrow(
                &mut self.driver,
                core,
                ip,
                d.len,
                &self.accesses,
                modelled,
                &mut self.counters,
                row,
                self.objects.as_deref_mut(),
                (
                    self.threads[ti].serial,
                    ti,
                    self.threads[ti].frames.as_slice(),
                ),
                &mut self.budget,
                self.timeline.as_deref_mut().map(|t| &mut t.run[..]),
                &mut last_fetch,
            );
        } else if self.requests.simulating() {
            // A warming instruction is simulated (not with instrumentation
            // off, a client request) and counted nowhere.
            simulate_only(&mut self.driver, core, ip, d.len, &self.accesses, modelled);
        }
        credit_line_use(&mut self.driver, &mut self.counters);
        if let Err(why) = modelled {
            if let Some(i) = Unmodelled::ALL
                .iter()
                .position(|&u| u == why)
                .filter(|_| !warm)
            {
                self.unmodelled[i] += 1;
            }
        }
        if warm {
            self.warm_instructions += 1;
        } else {
            self.instructions += 1;
        }
        true
    }

    /// Seeds a thread's shadow stack from the state at its first step: with
    /// the DWARF CFI of the mapped files ([`crate::unwind`]), else, when that
    /// finds no frame, by walking frame pointers. Frames are accepted only
    /// while the chain climbs the stack and every return address lies in an
    /// executable mapping.
    fn seed<M: Machine + ?Sized>(&mut self, ti: usize, rip: u64, rsp: u64, rbp: u64, m: &M) {
        let mut chain = [(0u64, 0u64); 64];
        let mut read = |a: u64| m.read_u64(a);
        // At a function-entry breakpoint RIP is the entry, where the CFI
        // says the return address is at [RSP], as the frame-pointer walk
        // assumes. An entry without CFI (framehop's fallback there is the
        // frame-pointer rule, which would skip the direct caller) takes the
        // frame-pointer path.
        let mut n = self.unwinder.unwind(rip, rsp, rbp, &mut read, &mut chain);
        if self.threads[ti].at_entry && chain[0].1 != rsp {
            n = 0;
        }
        let walk_fp = n == 0;
        let exec = &self.exec_ranges;
        let in_exec = |a: u64| exec.iter().any(|&(s, e)| a >= s && a < e);
        if walk_fp && self.threads[ti].at_entry {
            if let Some(ret) = m.read_u64(rsp) {
                if in_exec(ret) {
                    chain[n] = (ret, rsp);
                    n += 1;
                }
            }
        }
        let mut fp = rbp;
        while walk_fp && n < chain.len() {
            if fp < rsp || fp & 7 != 0 || fp - rsp > (64 << 20) {
                break;
            }
            let (Some(next), Some(ret)) = (m.read_u64(fp), m.read_u64(fp + 8)) else {
                break;
            };
            if !in_exec(ret) {
                break;
            }
            chain[n] = (ret, fp + 8);
            n += 1;
            if next <= fp {
                break;
            }
            fp = next;
        }
        let entry = self.func.map(|f| f.address).unwrap_or(0);
        let at_entry = self.threads[ti].at_entry;
        let mut parent = 0;
        let t = &mut self.threads[ti];
        t.frames.clear();
        // A seed cut by a full table keeps its outer frames (the capture
        // goes on: the table's next growth, at a call, stops it if it must).
        for (k, &(ret, slot)) in chain[..n].iter().enumerate().rev() {
            let callee = if k == 0 && at_entry { entry } else { 0 };
            let Ok(id) = self
                .stacks
                .intern(parent, ret - 1, callee, &mut self.budget)
            else {
                break;
            };
            let frame = Frame {
                stack: id,
                ret_slot: slot,
                site: ret - 1,
            };
            if t.frames.push(frame, &mut self.budget).is_err() {
                break;
            }
            parent = id;
        }
        t.seeded = true;
    }

    /// Turns the accounting into a dump: `meta` gets the counts, notes and
    /// reasons; `modules` are the process's mappings; `thread_name` names a
    /// thread id. Records are sorted by (ip, stack, thread); threads are
    /// numbered in slot order, leaving out slots never used.
    pub fn finish(
        self,
        meta: Meta,
        modules: Vec<coldcache_dump::Module>,
        thread_name: impl Fn(u32) -> String,
    ) -> Finished {
        self.finish_as(meta, modules, thread_name, false)
    }

    /// [`finish`](Self::finish), the records left encoded in
    /// [`Finished::encoded`] (the dump's `records` empty): what the library
    /// writes. A capture of millions of records never holds them as
    /// [`Record`]s (about 180 bytes each, more than the counter table)
    /// beside the table: the records are encoded from the table directly,
    /// at about 8 to 20 bytes each (`RECZ`). The bytes written are the
    /// same.
    pub fn finish_encoded(
        self,
        meta: Meta,
        modules: Vec<coldcache_dump::Module>,
        thread_name: impl Fn(u32) -> String,
    ) -> Finished {
        self.finish_as(meta, modules, thread_name, true)
    }

    fn finish_as(
        self,
        mut meta: Meta,
        modules: Vec<coldcache_dump::Module>,
        thread_name: impl Fn(u32) -> String,
        encode: bool,
    ) -> Finished {
        // The lines still in a first data level are credited now.
        let mut this = self;
        this.settle();
        let layout = this.driver.layout();
        if let (Some(f), Some(u)) = (layout.lines_fetched(), layout.bytes_used()) {
            let counters = &mut this.counters;
            this.driver.finish_line_use(|row, bytes| {
                let c = counters.row(row as usize);
                c[f] += 1;
                c[u] += bytes;
            });
            // Nothing silent: credits that found the queue full (none
            // when it is drained after each instruction, as here).
            let lost = this.driver.line_use_lost();
            if lost > 0 {
                meta.notes.push(format!(
                    "line use: {lost} lines left the first data level uncredited (queue full)"
                ));
            }
        }
        // Threads still in the window stop at its end.
        for ti in 0..this.threads.len() {
            if this.threads[ti].tid != 0 {
                this.tl_stop(ti);
            }
        }
        // Settled, credited and stopped: the block cells, the decodes and
        // the counter rows' index are read no more. Unmapped before the
        // records are sorted and encoded, so that their memory (CPython:
        // 380, 71 and 134 MB of 1.45 GB) is not held at the capture's
        // peak.
        this.block_rows = BlockRows::new();
        this.decode = DecodeCache::new(0);
        this.counters.release_index(&mut this.budget);
        let timeline = this.timeline.take();
        let Accountant {
            stacks,
            counters: table,
            trace,
            seen,
            exit_names,
            instructions,
            untrapped,
            untraced,
            requests,
            parts,
            func,
            calls_seen,
            calls_done,
            exit_ended,
            warm_done,
            warm_instructions,
            unmodelled,
            cut_short,
            full,
            objects,
            ..
        } = this;
        meta.instructions = instructions;
        meta.untrapped = untrapped;
        meta.untraced = untraced;
        meta.client_requests = coldcache_dump::ClientRequests {
            honoured: requests.honoured(),
            made: requests.seen(),
        };
        if parts.merged() > 0 {
            meta.notes.push(format!(
                "{} DUMP_STATS requests set no part aside (more than {} parts, or the memory \
                 budget refused the copy): their counts are in the part after them",
                parts.merged(),
                crate::parts::MAX_PARTS
            ));
        }
        let meta_levels = layout.levels();
        meta.cut_short = match (cut_short, full) {
            (Some(TABLE_FULL), Some(f)) => Some(f.describe()),
            (c, _) => c.map(String::from),
        };
        meta.unmodelled = Unmodelled::ALL
            .iter()
            .zip(unmodelled.iter())
            .filter(|&(_, &n)| n > 0)
            .map(|(why, &n)| (why.reason().to_string(), n))
            .collect();
        if let Some(FunctionCalls { first, count, .. }) = func {
            meta.calls = match calls_done {
                0 => String::new(),
                1 => first.to_string(),
                n => format!("{first} to {}", first + n - 1),
            };
            meta.exit_ended = exit_ended;
            if calls_done < count {
                let note = format!(
                    "the function was called {calls_seen} times; calls {first} to {} were to be \
                     captured and {calls_done} were",
                    first + count - 1
                );
                if meta.cut_short.is_none() {
                    meta.cut_short = Some(if calls_done == 0 {
                        "the function was not called (often enough) before the program ended"
                            .to_string()
                    } else {
                        "the program ended before every requested call was captured".to_string()
                    });
                }
                meta.notes.push(note);
            }
        }
        if let Some(f) = func.filter(|f| f.warm > 0) {
            let start = f.warm_start();
            meta.warm = if warm_done == 0 {
                format!(
                    "cold: no call before call {} to warm the cache with",
                    f.first
                )
            } else {
                format!(
                    "by calls {start} to {} of the function ({warm_instructions} instructions \
                     simulated, not counted)",
                    start + warm_done - 1
                )
            };
        }
        if untrapped > 0 {
            meta.notes.push(format!(
                "{untrapped} instructions ran untrapped right after a syscall; their accesses \
                 were computed from the state after they ran, or counted unmodelled"
            ));
        }
        // A thread that exited is named as it was then (its id may since
        // name another thread, or nothing); one still running as it is now.
        let dump_threads: Vec<Thread> = seen
            .iter()
            .zip(&exit_names)
            .map(|(&(tid, core), exited)| {
                let len = exited.iter().position(|&b| b == 0).unwrap_or(16);
                Thread {
                    tid,
                    name: if len > 0 {
                        String::from_utf8_lossy(&exited[..len]).into_owned()
                    } else {
                        thread_name(tid)
                    },
                    core,
                }
            })
            .collect();
        // The rows in key order (keys are distinct: the order is total),
        // as row numbers (the table's index numbers them in a u32). Sorted
        // with their keys beside them: a sort comparing keys read through
        // row numbers misses the cache at every comparison (10% of a
        // CPython capture's CPU with 14.8M rows); the keys are dropped
        // before the records are encoded.
        // Rows a `CALLGRIND_ZERO_STATS` zeroed and nothing counted since
        // are left out (as Callgrind lists no function without cost).
        let zeroed = requests.zeroed();
        let kept = |r: usize| !zeroed || table.counter(r, CounterLayout::INSTRUCTIONS) != 0;
        let rows: Vec<u32> = match packed_keys(table.keys()) {
            // Keys of 48-bit addresses and 16-bit threads, with their row,
            // fit one u128 (16 bytes, against 24): less memory at the
            // capture's end, and a faster sort.
            true => {
                let mut keyed: Vec<u128> = (0..table.len())
                    .filter(|&r| kept(r))
                    .map(|r| pack_key(table.keys()[r], r as u32))
                    .collect();
                keyed.sort_unstable();
                keyed.iter().map(|&k| k as u32).collect()
            }
            false => {
                let mut keyed: Vec<((u64, u32, u32), u32)> = (0..table.len())
                    .filter(|&r| kept(r))
                    .map(|r| (table.keys()[r], r as u32))
                    .collect();
                keyed.sort_unstable_by_key(|&(k, _)| k);
                keyed.iter().map(|&(_, r)| r).collect()
            }
        };
        let (records, encoded) = if encode {
            let mut e = EncodedRecords::encoder(meta.counters.len(), rows.len());
            each_row(&table, &rows, |(ip, stack, thread), c| {
                e.push(ip, stack, thread, c)
            });
            (Vec::new(), Some(e.finish()))
        } else {
            let mut records = Vec::with_capacity(rows.len());
            each_row(&table, &rows, |(ip, stack, thread), c| {
                records.push(Record {
                    ip,
                    stack,
                    thread,
                    counters: c.to_vec(),
                })
            });
            (records, None)
        };
        drop(table);
        let timeline = timeline.map(|t| {
            let kept = t.finish(stacks.nodes().len(), dump_threads.len());
            if kept.dropped > 0 {
                meta.notes.push(format!(
                    "timeline: {} events kept, {} dropped at its limit of {} (the timeline \
                     ends early; COLDCACHE_TIMELINE_LIMIT or a larger --memory keeps more)",
                    kept.len(),
                    kept.dropped,
                    crate::grow::human(u128::from(kept.limit))
                ));
            }
            kept
        });
        let dump = Dump {
            meta,
            modules,
            threads: dump_threads,
            stacks: stacks
                .nodes()
                .iter()
                .map(|s| StackNode {
                    parent: s.parent,
                    call_site: s.call_site,
                    callee: s.callee,
                })
                .collect(),
            records,
            symbols: None,
            sources: Vec::new(),
            data: None,
            objects: objects.map(|o| o.finish(meta_levels)),
            timeline,
        };
        let stride = dump.meta.counters.len();
        let parts = (0..parts.count())
            .map(|k| {
                let p = parts.part(k, stride);
                let mut records: Vec<Record> = p
                    .rows
                    .iter()
                    .map(|&((ip, stack, thread), c)| Record {
                        ip,
                        stack,
                        thread,
                        counters: c.to_vec(),
                    })
                    .collect();
                records.sort_unstable_by_key(|r| (r.ip, r.stack, r.thread));
                PartDump {
                    label: p.label,
                    instructions: p.instructions,
                    records,
                }
            })
            .collect();
        Finished {
            dump,
            encoded,
            trace: trace.map(|stream| StreamedTrace { stream }),
            unmodelled: unmodelled.iter().sum(),
            parts,
        }
    }
}

/// Whether every key's address fits 48 bits and its thread 16 (then a key
/// and its row number pack into a u128 whose order is the keys').
fn packed_keys(keys: &[(u64, u32, u32)]) -> bool {
    keys.iter()
        .all(|&(ip, _, thread)| ip >> 48 == 0 && thread >> 16 == 0)
}

/// A key that fits ([`packed_keys`]) and its row `r`, in one u128: the
/// address, the stack, the thread, the row, from the top bits down.
fn pack_key((ip, stack, thread): (u64, u32, u32), r: u32) -> u128 {
    u128::from(ip) << 80 | u128::from(stack) << 48 | u128::from(thread) << 32 | u128::from(r)
}

/// Calls `f(key, counters)` for each of `rows` in turn, its two parts
/// summed into one buffer on the stack (nothing allocated, zeroed or moved
/// per row), the rows a few places ahead brought in meanwhile: the rows
/// lie in the order they were made, not in `rows`' order, so each is a few
/// cache misses otherwise (CPython: 14.7M rows, 7% of the capture's CPU).
/// The keys are read from the table again, not kept beside `rows`: that
/// would hold 16 bytes more a row while the records are encoded.
fn each_row(table: &CounterTable, rows: &[u32], mut f: impl FnMut((u64, u32, u32), &[u64])) {
    const AHEAD: usize = 16;
    let mut c = [0u64; CounterLayout::MAX_LEN];
    let c = &mut c[..table.stride()];
    for (i, &r) in rows.iter().enumerate() {
        if let Some(&ahead) = rows.get(i + AHEAD) {
            table.prefetch(ahead as usize);
        }
        table.counters_into(r as usize, c);
        f(table.keys()[r as usize], c);
    }
}

/// The counter row index that stands for "a warming instruction: count
/// nowhere" (no table row has it).
const WARM_ROW: usize = usize::MAX;

/// Code ranges mapped during a capture that may become stable code
/// ([`Accountant::trust_code`]), reserved beside those of the start.
const MAPPED_LATER: usize = 256;

/// `v` with room for `more` entries pushed later without allocating.
fn with_room(mut v: Vec<(u64, u64)>, more: usize) -> Vec<(u64, u64)> {
    v.reserve_exact(more);
    v
}

/// Adds the line-use credits of the lines that left the first data level
/// (during the last instruction) to the rows that fetched them.
#[inline(always)]
fn credit_line_use(driver: &mut Driver, counters: &mut CounterTable) {
    let layout = driver.layout();
    let (Some(f), Some(u)) = (layout.lines_fetched(), layout.bytes_used()) else {
        return;
    };
    driver.drain_line_use(|row, bytes| {
        let c = counters.row(row as usize);
        c[f] += 1;
        c[u] += bytes;
    });
}

/// Where a row's narrow part ([`CounterTable::hot`]) keeps each of its
/// counters: instructions, then first-level fetches, reads and writes.
const HOT_INSTRUCTIONS: usize = 0;

/// The narrow part's counter of `side`'s first-level hits.
#[inline(always)]
const fn hot_side(side: Side) -> usize {
    1 + side as usize
}

/// The counters a row's narrow part keeps, as positions in `layout`'s row.
fn hot_at(layout: CounterLayout) -> [usize; crate::grow::counters::HOT] {
    [
        CounterLayout::INSTRUCTIONS,
        layout.served(Side::Instr, 0),
        layout.served(Side::Read, 0),
        layout.served(Side::Write, 0),
    ]
}

/// What a replayed block's instructions share: its thread and the state
/// that does not change within it (besides what [`BlockState`] holds).
#[derive(Clone, Copy)]
struct BlockCtx {
    /// The thread's slot.
    ti: usize,
    /// RSP at the block's entry.
    rsp: u64,
    serial: u32,
    core: usize,
    /// Counted nowhere (a warming call, or counting off).
    warming: bool,
    /// No trace and not warming: each instruction takes `count_plain`.
    plain: bool,
    /// The block's number (its key in [`BlockRows`], with the stack and
    /// thread) and its length.
    block: u32,
    count: u32,
    /// The rseq field whose 64-bit stores are reported (0: none).
    watched: u64,
    /// The first level's line shift of the instruction side (runs lie in
    /// one line of it).
    fetch_shift: u32,
}

/// What the block loop's instructions change as they are counted.
struct BlockState {
    /// The instruction before was a call (or none came yet): a frame may
    /// be entered.
    call_before: bool,
    /// Within a block RSP moves by amounts known at translation: a frame
    /// can be entered only after a call (which ends a block) and popped
    /// only where RSP rises above every RSP checked since (`checked`,
    /// relative to the block's), so those checks, and the current `stack`,
    /// are redone only there.
    checked: i64,
    stack: u32,
    /// The first cell of the block's rows under `cells_stack` (found at
    /// the first instruction whose slot does not remember its row).
    cells: Option<usize>,
    cells_stack: u32,
    /// The line the previous instruction's fetch ended in, where the
    /// driver says a fetch in it needs no look (`Driver::fetch`): between
    /// two instructions of a block only the first one's data accesses
    /// reach the simulator (and a path that fetches otherwise forgets it).
    last_fetch: u64,
}

/// Adds `n` plain executions (no data access, fetched from the first
/// level) to row `row` of `counters`: a block cell's count, when it is full
/// or settled.
#[cold]
fn add_plain(counters: &mut CounterTable, row: usize, n: u64) {
    let c = counters.hot(row);
    c[HOT_INSTRUCTIONS] += n;
    c[hot_side(Side::Instr)] += n;
}

/// The instruction fetch of an instruction of `len` bytes at `ip`.
#[inline(always)]
fn fetch_of(ip: u64, len: u8) -> Access {
    Access::new(AccessKind::InstrFetch, ip, u32::from(len)).with_ip(ip)
}

/// Simulates one execution of an instruction of `len` bytes at `ip` on
/// `core` (its fetch, then its data accesses when `modelled`, else one more
/// unmodelled execution) and attributes it into row `row` of `table`: one
/// more execution and each first-level hit in the row's narrow part,
/// anything else in its wide part; each data access also to its object
/// when `objects` is given (`thread`: the thread's number and shadow
/// frames, whose stack frames are objects), and to the timeline's running
/// row.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attribute_narrow(
    driver: &mut Driver,
    core: usize,
    ip: u64,
    len: u8,
    accesses: &AccessList,
    modelled: Result<(), Unmodelled>,
    table: &mut CounterTable,
    row: usize,
    mut objects: Option<&mut Objects>,
    thread: crate::objects::Thread<'_>,
    budget: &mut Budget,
    mut timeline: Option<&mut [u64]>,
    last_fetch: &mut u64,
) {
    let layout = driver.layout();
    // The first-level hits of each side, 16 bits a side in one register,
    // added to the narrow part once at the end. (An array indexed by side
    // lived on the stack, and reading it back as a vector stalled on its
    // scalar stores.) An instruction makes at most `MAX_ACCESSES` data
    // accesses, far below 2^16.
    const _: () = assert!(crate::model::MAX_ACCESSES < 0xffff);
    let mut hits = 0u64;
    let fetch = fetch_of(ip, len);
    let r = driver
        .fetch(core, fetch, last_fetch)
        .unwrap_or(AccessResult::L1_HIT);
    hits += count_narrow(layout, table, row, AccessKind::InstrFetch, &r);
    if let Some(t) = timeline.as_deref_mut() {
        t[CounterLayout::INSTRUCTIONS] += 1;
        layout.add_access(t, AccessKind::InstrFetch, &r);
    }
    match modelled {
        Ok(()) => {
            for a in accesses.as_slice() {
                let access = Access::new(a.kind, a.addr, a.size).with_ip(ip);
                let r = driver.simulate(core, access);
                hits += count_narrow(layout, table, row, a.kind, &r);
                if let Some(o) = objects.as_deref_mut() {
                    o.access(a.kind, a.addr, ip, &r, budget, thread);
                }
                if let Some(t) = timeline.as_deref_mut() {
                    layout.add_access(t, a.kind, &r);
                }
            }
        }
        Err(_) => {
            table.row(row)[CounterLayout::UNMODELLED] += 1;
            if let Some(t) = timeline {
                t[CounterLayout::UNMODELLED] += 1;
            }
        }
    }
    add_executed(table, row, hits);
}

/// One execution into row `row`'s narrow part, with its first-level hits
/// `hits` packed as [`attribute_narrow`] packs them (16 bits a side).
#[inline(always)]
fn add_executed(table: &mut CounterTable, row: usize, hits: u64) {
    let hot = table.hot(row);
    hot[HOT_INSTRUCTIONS] += 1;
    for side in [Side::Instr, Side::Read, Side::Write] {
        hot[hot_side(side)] += (hits >> (16 * side as u32)) & 0xffff;
    }
}

/// Counts access result `r` of kind `kind` into row `row` of `table`: in
/// its wide part, unless it is a plain first-level hit; then nothing is
/// added, and the result is the hit's increment of [`attribute_narrow`]'s
/// packed hits (one in its side's 16 bits).
#[inline(always)]
fn count_narrow(
    layout: CounterLayout,
    table: &mut CounterTable,
    row: usize,
    kind: AccessKind,
    r: &AccessResult,
) -> u64 {
    match Side::of(kind) {
        Some(side) if r.is_plain_first_level_hit() => 1 << (16 * side as u32),
        _ => {
            layout.add_access(table.row(row), kind, r);
            0
        }
    }
}

/// Simulates one execution of an instruction of `len` bytes at `ip` on
/// `core`, its fetch and then, when `modelled`, its data accesses, and
/// counts it nowhere (a warming instruction).
fn simulate_only(
    driver: &mut Driver,
    core: usize,
    ip: u64,
    len: u8,
    accesses: &AccessList,
    modelled: Result<(), Unmodelled>,
) {
    let fetch = fetch_of(ip, len);
    driver.simulate(core, fetch);
    if modelled.is_ok() {
        for a in accesses.as_slice() {
            let access = Access::new(a.kind, a.addr, a.size).with_ip(ip);
            driver.simulate(core, access);
        }
    }
}

/// Whether the CPU may stop `instr` part-way, an interrupt or a fault
/// between its elements, and trap at it again under TF with the mask bits
/// of the elements done cleared (seen once, a `--mode verify` run on a
/// loaded machine: its trap model read one element of an AVX2 gather whose
/// record had two). Gathers and scatters, AVX2 and AVX-512.
fn resumable(instr: &iced_x86::Instruction) -> bool {
    matches!(
        instr.mnemonic(),
        Mnemonic::Vgatherdps
            | Mnemonic::Vgatherdpd
            | Mnemonic::Vgatherqps
            | Mnemonic::Vgatherqpd
            | Mnemonic::Vpgatherdd
            | Mnemonic::Vpgatherdq
            | Mnemonic::Vpgatherqd
            | Mnemonic::Vpgatherqq
            | Mnemonic::Vscatterdps
            | Mnemonic::Vscatterdpd
            | Mnemonic::Vscatterqps
            | Mnemonic::Vscatterqpd
            | Mnemonic::Vpscatterdd
            | Mnemonic::Vpscatterdq
            | Mnemonic::Vpscatterqd
            | Mnemonic::Vpscatterqq
    )
}

#[inline]
fn current_stack(t: &ThreadState) -> u32 {
    t.frames.last().map(|f| f.stack).unwrap_or(0)
}

/// How a string instruction's repetition ends.
fn rep_kind(instr: &iced_x86::Instruction) -> Rep {
    if !instr.is_string_instruction() {
        Rep::None
    } else if instr.has_repe_prefix()
        && matches!(
            instr.mnemonic(),
            Mnemonic::Cmpsb
                | Mnemonic::Cmpsw
                | Mnemonic::Cmpsd
                | Mnemonic::Cmpsq
                | Mnemonic::Scasb
                | Mnemonic::Scasw
                | Mnemonic::Scasd
                | Mnemonic::Scasq
        )
    {
        Rep::WhileEqual
    } else if instr.has_repne_prefix() {
        Rep::WhileNotEqual
    } else if instr.has_rep_prefix() || instr.has_repe_prefix() {
        Rep::Count
    } else {
        Rep::None
    }
}

/// The count register of a string instruction (RCX, or ECX with an
/// address-size prefix).
fn count_register<M: Machine + ?Sized>(d: &Decoded, m: &M) -> u64 {
    let rcx = m.gpr(Register::RCX);
    let ecx_only = (0..d.instr.op_count()).any(|i| {
        matches!(
            d.instr.op_kind(i),
            OpKind::MemoryESEDI | OpKind::MemorySegESI
        )
    });
    if ecx_only {
        rcx & 0xFFFF_FFFF
    } else {
        rcx
    }
}

/// The trace record kind of an access kind.
fn record_kind(k: AccessKind) -> RecordKind {
    match k {
        AccessKind::Read => RecordKind::Load,
        AccessKind::Write => RecordKind::Store,
        AccessKind::ReadModifyWrite => RecordKind::Modify,
        AccessKind::Prefetch => RecordKind::Prefetch,
        AccessKind::NonTemporalStore => RecordKind::NtStore,
        AccessKind::Flush => RecordKind::Flush,
        AccessKind::InstrFetch => RecordKind::Instr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys pack into a u128 (48-bit address, 32-bit stack, 16-bit
    /// thread, then the row) only when they fit, and the packed order is
    /// the keys' order.
    #[test]
    fn keys_pack_only_when_they_fit_and_keep_their_order() {
        let keys = [
            (0x7fff_ffff_f000, 7, 1),
            (0x40_1000, 9, 0),
            (0x40_1000, 2, 3),
        ];
        assert!(packed_keys(&keys));
        assert!(!packed_keys(&[(0xffff_ffff_ff60_0000, 0, 0)]), "vsyscall");
        assert!(!packed_keys(&[(0x1000, 0, 1 << 16)]));
        let mut packed: Vec<u128> = keys
            .iter()
            .enumerate()
            .map(|(r, &k)| pack_key(k, r as u32))
            .collect();
        packed.sort_unstable();
        let order: Vec<u32> = packed.iter().map(|&k| k as u32).collect();
        assert_eq!(order, [2, 1, 0]);
    }
}
