//! The recorder: the hot path that appends one 16-byte event (a tagged word
//! and an `rdtsc` value) to the calling thread's chunk, and everything that
//! keeps it cheap and safe.
//!
//! * One arena is reserved (`mmap`, `MAP_NORESERVE`: pages are committed as
//!   they are first written) on the first event, whoever makes it — a Rust
//!   zone, a C call, or a `__cyg_profile_func_enter` hook running before any
//!   constructor. It is cut into fixed chunks of [`CHUNK_WORDS`] words.
//! * A thread takes a chunk with one atomic add and writes its header
//!   (thread index and the chunk's sequence number for that thread) once;
//!   after that an event is two plain stores and a pointer bump: no lock, no
//!   allocation, no shared cache line.
//! * Events are written with non-temporal stores (`movnti`, as the seed
//!   suggests): recording does not pull arena lines into the caches this
//!   tool exists to measure, and a store to a new line does not wait for
//!   the line to be read first (measured: 24.2 ns -> 20.3 ns per zone,
//!   against 19.5 ns for two bare `rdtsc`; docs/zones.md).
//! * Non-temporal stores are weakly ordered, so a full chunk is sealed
//!   (`sfence`, then its event count stored with release ordering in its
//!   header) when its thread moves to the next chunk: a reader that sees
//!   the seal sees every event. The streaming writer only writes sealed
//!   chunks. The final write also reads partial chunks up to the first
//!   zero tag (tags are never 0); those of threads that have stopped or
//!   exited are complete (a system call or thread exit drains the
//!   write-combining buffers), and of a thread still recording at that
//!   moment only its last few events may be missing. Arena words are
//!   `AtomicU64` so these racy reads are defined behaviour.
//! * When the arena is exhausted, events are dropped and counted. A
//!   streaming writer hands the chunks it has written back (cleared) for
//!   reuse, so a streamed recording is bounded by the file, not the arena.
//!
//! Labels (name, file, line) are registered once per call site; the static
//! [`Label`] keeps its id. Threads get a small index on their first event.

use crate::format::{self, LabelInfo, ModuleInfo, RecordingInfo, ThreadInfo};
use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use std::sync::Mutex;

/// Words per chunk (64 KiB): two header words and 4095 events.
pub const CHUNK_WORDS: usize = 8192;
/// Default arena size (256 MiB of address space; 16.7 million events).
pub const DEFAULT_ARENA_BYTES: usize = 256 << 20;
/// Most distinct labels in one process.
pub const MAX_LABELS: usize = 1 << 16;
/// Most threads whose id and name are kept (more still record).
pub const MAX_THREADS: usize = 4096;

/// A static zone label: one per call site, registered on first use.
///
/// The layout is the C struct `coldcache_label` of `coldcache.h`, so the C
/// macros and the Rust macros build the same thing.
#[repr(C)]
pub struct Label {
    name: *const u8,
    name_len: usize,
    file: *const u8,
    file_len: usize,
    line: u32,
    id: AtomicU32,
}

// SAFETY: the pointers are to immutable static strings (Rust string
// literals, or C string literals per coldcache.h), and `id` is atomic.
unsafe impl Sync for Label {}

impl Label {
    /// A label for a call site (the macros pass `file!()` and `line!()`).
    pub const fn new(name: &'static str, file: &'static str, line: u32) -> Label {
        Label {
            name: name.as_ptr(),
            name_len: name.len(),
            file: file.as_ptr(),
            file_len: file.len(),
            line,
            id: AtomicU32::new(0),
        }
    }

    /// The label's id, registering it on first use.
    #[inline(always)]
    pub fn id(&'static self) -> u32 {
        let id = self.id.load(Relaxed);
        if id != 0 {
            id
        } else {
            register_label(self)
        }
    }

    /// Name, file and line (lossy for C strings that are not UTF-8).
    pub fn info(&self) -> (String, String, u32) {
        // SAFETY: `name`/`file` point to `name_len`/`file_len` readable bytes
        // that live for the whole program (constructor contract above).
        let (n, f) = unsafe {
            (
                std::slice::from_raw_parts(self.name, self.name_len),
                std::slice::from_raw_parts(self.file, self.file_len),
            )
        };
        (
            String::from_utf8_lossy(n).into_owned(),
            String::from_utf8_lossy(f).into_owned(),
            self.line,
        )
    }
}

static LABELS: [AtomicPtr<Label>; MAX_LABELS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_LABELS];
static NEXT_LABEL: AtomicU32 = AtomicU32::new(1);
static LABEL_LOCK: AtomicBool = AtomicBool::new(false);

#[cold]
fn register_label(label: &'static Label) -> u32 {
    while LABEL_LOCK
        .compare_exchange_weak(false, true, Acquire, Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    let mut id = label.id.load(Relaxed);
    if id == 0 {
        let next = NEXT_LABEL.load(Relaxed);
        if (next as usize) < MAX_LABELS {
            NEXT_LABEL.store(next + 1, Relaxed);
            LABELS[next as usize].store(label as *const Label as *mut Label, Release);
            id = next;
        } else {
            // Table full: the label shares the overflow id, shown as unknown.
            id = MAX_LABELS as u32;
        }
        label.id.store(id, Release);
    }
    LABEL_LOCK.store(false, Release);
    id
}

/// The registered label with this id, if any.
pub fn label_by_id(id: u32) -> Option<&'static Label> {
    let p = LABELS.get(id as usize)?.load(Acquire);
    // SAFETY: only `&'static Label`s are stored in the table.
    unsafe { p.as_ref() }
}

/// All registered labels.
pub fn labels() -> Vec<LabelInfo> {
    let n = NEXT_LABEL.load(Acquire) as usize;
    (1..n.min(MAX_LABELS))
        .filter_map(|id| {
            label_by_id(id as u32).map(|l| {
                let (name, file, line) = l.info();
                LabelInfo {
                    id: id as u32,
                    name,
                    file,
                    line,
                }
            })
        })
        .collect()
}

/// Reads the time stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` has no memory effects; x86-64 always has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

// ---- global state -------------------------------------------------------

const UNINIT: u8 = 0;
const BUSY: u8 = 1;
const READY: u8 = 2;
const FAILED: u8 = 3;

/// Recording on/off (the global switch). True until init decides.
static ENABLED: AtomicBool = AtomicBool::new(true);
static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static ARENA: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());
static N_CHUNKS: AtomicUsize = AtomicUsize::new(0);
static NEXT_CHUNK: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static NEXT_THREAD: AtomicU32 = AtomicU32::new(1);
static START_TSC: AtomicU64 = AtomicU64::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);
static TSC_HZ: AtomicU64 = AtomicU64::new(0); // f64 bits
static OWNER_PID: AtomicU32 = AtomicU32::new(0);
/// Chunks the streaming writer has written and cleared, ready for reuse
/// (taken under the lock once per chunk, never per event).
static FREE: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static FREE_LEN: AtomicUsize = AtomicUsize::new(0);
static CAL_SPAN_NS: AtomicU64 = AtomicU64::new(0);

struct ThreadSlot {
    tid: AtomicU32,
    name: [AtomicU8; 32],
}
static THREADS: [ThreadSlot; MAX_THREADS] = [const {
    ThreadSlot {
        tid: AtomicU32::new(0),
        name: [const { AtomicU8::new(0) }; 32],
    }
}; MAX_THREADS];

/// Per-thread recorder state. Const-initialized and without a destructor,
/// so it can be used at any time on any thread (before constructors, during
/// thread teardown) and its access compiles to a TLS offset.
struct ThreadState {
    ptr: Cell<*mut AtomicU64>,
    end: Cell<*mut AtomicU64>,
    chunk: Cell<*mut AtomicU64>,
    index: Cell<u32>,
    seq: Cell<u32>,
    in_hook: Cell<bool>,
}

thread_local! {
    static TLS: ThreadState = const {
        ThreadState {
            ptr: Cell::new(std::ptr::null_mut()),
            end: Cell::new(std::ptr::null_mut()),
            chunk: Cell::new(std::ptr::null_mut()),
            index: Cell::new(0),
            seq: Cell::new(0),
            in_hook: Cell::new(false),
        }
    };
}

/// Sentinel for "no space": never dereferenced, only compared.
const DEAD: *mut AtomicU64 = std::ptr::dangling_mut::<AtomicU64>();

/// Appends one event (`word` from [`format::pack`]) with the current time
/// stamp to the calling thread's chunk. The whole hot path.
#[inline(always)]
pub fn emit(word: u64) {
    emit_inner(word, None)
}

/// [`emit`] with a time stamp the caller has read (the spike detector and
/// the recording then share one `rdtsc`).
#[inline(always)]
pub fn emit_at(word: u64, tsc: u64) {
    emit_inner(word, Some(tsc))
}

#[inline(always)]
fn emit_inner(word: u64, tsc: Option<u64>) {
    if !ENABLED.load(Relaxed) {
        return;
    }
    TLS.with(|t| {
        let p = t.ptr.get();
        if p != t.end.get() {
            let tsc = tsc.unwrap_or_else(rdtsc);
            // SAFETY: `p < end` and both lie in this thread's chunk, which is
            // an even number of words past `p`, so `p` and `p + 1` are in
            // bounds and 8-byte aligned; no other thread writes this chunk.
            // Non-temporal stores: see the module doc for the ordering.
            unsafe {
                core::arch::x86_64::_mm_stream_si64(p.add(1) as *mut i64, tsc as i64);
                core::arch::x86_64::_mm_stream_si64(p as *mut i64, word as i64);
                t.ptr.set(p.add(2));
            }
        } else {
            emit_slow(t, word, tsc);
        }
    })
}

/// The `-finstrument-functions` fast path: [`emit`] unless the calling
/// thread is inside a hook already, with one thread-local access; the slow
/// path (new chunk, initialization) runs inside the re-entrancy guard.
#[inline(always)]
pub fn emit_unless_in_hook(word: u64) {
    if !ENABLED.load(Relaxed) {
        return;
    }
    TLS.with(|t| {
        if t.in_hook.get() {
            return;
        }
        let p = t.ptr.get();
        if p != t.end.get() {
            let tsc = rdtsc();
            // SAFETY: as in `emit`.
            unsafe {
                core::arch::x86_64::_mm_stream_si64(p.add(1) as *mut i64, tsc as i64);
                core::arch::x86_64::_mm_stream_si64(p as *mut i64, word as i64);
                t.ptr.set(p.add(2));
            }
        } else {
            t.in_hook.set(true);
            emit_slow(t, word, None);
            t.in_hook.set(false);
        }
    })
}

/// Sets the calling thread up (its index, name and first chunk) if it has
/// not recorded yet, so that a zone's start stamp, read after this, does
/// not include our set-up (page faults, system calls): a thread's first
/// zone would otherwise hold it, and in the spike detector read as slow
/// code. One thread-local load once the thread is set up. True when this
/// call set the thread up (the caller's cue to set up what else a thread
/// needs once: `crate::prepare_thread`).
#[inline(always)]
pub fn prepare_thread() -> bool {
    if !ENABLED.load(Relaxed) {
        return false;
    }
    let fresh = TLS.with(|t| t.chunk.get().is_null() && t.ptr.get() != DEAD);
    if fresh {
        prepare_thread_slow();
    }
    fresh
}

#[cold]
#[inline(never)]
fn prepare_thread_slow() {
    if !ensure_init() {
        return;
    }
    TLS.with(|t| {
        if t.chunk.get().is_null() && t.ptr.get() != DEAD {
            take_chunk(t);
            let p = t.ptr.get();
            if p != DEAD && !p.is_null() {
                // The chunk's first page, faulted in now rather than by the
                // zone's first event. Zero is no event (tags are never 0).
                // SAFETY: `p` is this thread's fresh chunk's first event
                // slot, inside the arena, written by no one else.
                unsafe { (*p).store(0, Relaxed) };
            }
        }
    });
}

/// Whether this process initialized the recorder (not a forked child,
/// which has a copy of its state and must not write its files).
pub fn is_owner() -> bool {
    OWNER_PID.load(Relaxed) == std::process::id()
}

/// Whether the recorder has been initialized.
#[inline(always)]
pub fn ready() -> bool {
    STATE.load(Relaxed) == READY
}

/// Runs `f` unless the calling thread is already inside a hook (the
/// re-entrancy guard of the `-finstrument-functions` hooks: anything the
/// recorder calls that is itself instrumented is not recorded).
#[inline(always)]
pub fn guarded(f: impl FnOnce()) {
    TLS.with(|t| {
        if !t.in_hook.get() {
            t.in_hook.set(true);
            f();
            t.in_hook.set(false);
        }
    })
}

#[cold]
#[inline(never)]
fn emit_slow(t: &ThreadState, word: u64, tsc: Option<u64>) {
    if !ensure_init() || !ENABLED.load(Relaxed) {
        return;
    }
    if t.ptr.get() == DEAD && FREE_LEN.load(Acquire) == 0 {
        // Out of chunks, and the streaming writer (if any) has none back.
        DROPPED.fetch_add(1, Relaxed);
        return;
    }
    if !take_chunk(t) {
        DROPPED.fetch_add(1, Relaxed);
        return;
    }
    emit_inner(word, tsc);
}

/// Gives the calling thread a new chunk (sealing its full one); false when
/// none is left.
fn take_chunk(t: &ThreadState) -> bool {
    if t.index.get() == 0 {
        register_thread(t);
    }
    let base = ARENA.load(Acquire);
    // Seal the full chunk.
    let old = t.chunk.get();
    if !old.is_null() {
        // SAFETY: `old` is the start of this thread's previous chunk,
        // CHUNK_WORDS words inside the arena. The fence makes the chunk's
        // non-temporal event stores visible before the seal that tells
        // readers they are complete.
        unsafe {
            core::arch::x86_64::_mm_sfence();
            (*old.add(1)).store(((CHUNK_WORDS - 2) / 2 + 1) as u64, Release)
        };
    }
    let n = N_CHUNKS.load(Relaxed);
    let recycled = if FREE_LEN.load(Acquire) > 0 {
        let mut free = lock(&FREE);
        let c = free.pop();
        FREE_LEN.store(free.len(), Release);
        c
    } else {
        None
    };
    let i = match recycled {
        Some(i) => i,
        None if NEXT_CHUNK.load(Relaxed) < n => NEXT_CHUNK.fetch_add(1, AcqRel),
        None => n,
    };
    if i >= n {
        t.ptr.set(DEAD);
        t.end.set(DEAD);
        t.chunk.set(std::ptr::null_mut());
        return false;
    }
    // SAFETY: i < n_chunks, so the chunk lies inside the arena mapping.
    let chunk = unsafe { base.add(i * CHUNK_WORDS) };
    let header = t.index.get() as u64 | ((t.seq.get() as u64) << 32) | (1 << 63);
    // SAFETY: `chunk` is a fresh chunk only this thread owns (the atomic add
    // handed index i to it alone).
    unsafe { (*chunk).store(header, Release) };
    t.seq.set(t.seq.get().wrapping_add(1));
    t.chunk.set(chunk);
    // SAFETY: the chunk spans CHUNK_WORDS words from `chunk`.
    unsafe {
        t.ptr.set(chunk.add(2));
        t.end.set(chunk.add(CHUNK_WORDS));
    }
    true
}

fn register_thread(t: &ThreadState) {
    let index = NEXT_THREAD.fetch_add(1, Relaxed);
    t.index.set(index);
    if let Some(slot) = THREADS.get(index as usize) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        slot.tid.store(tid, Release);
        let mut buf = [0u8; 32];
        // SAFETY: buf is 32 writable bytes; pthread_self is always valid.
        let rc = unsafe {
            libc::pthread_getname_np(libc::pthread_self(), buf.as_mut_ptr().cast(), buf.len())
        };
        if rc == 0 {
            store_name(slot, &buf);
        }
    }
}

fn store_name(slot: &ThreadSlot, name: &[u8]) {
    for (i, cell) in slot.name.iter().enumerate() {
        cell.store(name.get(i).copied().unwrap_or(0), Relaxed);
    }
}

/// Names the calling thread in the recording (and the spike log).
pub fn set_thread_name(name: &str) {
    TLS.with(|t| {
        if t.index.get() == 0 {
            if !ensure_init() {
                return;
            }
            register_thread(t);
        }
        if let Some(slot) = THREADS.get(t.index.get() as usize) {
            let mut b = name.as_bytes().to_vec();
            b.truncate(31);
            store_name(slot, &b);
        }
    })
}

/// The calling thread's recorder index and OS thread id (registering it).
pub fn current_thread() -> (u32, u32) {
    TLS.with(|t| {
        if t.index.get() == 0 {
            register_thread(t);
        }
        let tid = THREADS
            .get(t.index.get() as usize)
            .map(|s| s.tid.load(Relaxed))
            .unwrap_or(0);
        (t.index.get(), tid)
    })
}

/// The name recorded for a thread index.
pub fn thread_name(index: u32) -> String {
    let Some(slot) = THREADS.get(index as usize) else {
        return String::new();
    };
    let bytes: Vec<u8> = slot
        .name
        .iter()
        .map(|c| c.load(Relaxed))
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Turns recording on or off for all threads (spike detection is separate).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Relaxed);
}

/// Whether recording is on.
pub fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// Events dropped so far because the arena was full.
pub fn dropped_events() -> u64 {
    DROPPED.load(Relaxed)
}

// ---- initialization -----------------------------------------------------

/// Settings read from the environment at initialization.
struct EnvConfig {
    arena_bytes: usize,
    out: Option<PathBuf>,
    stream: bool,
    recording: bool,
    /// `COLDCACHE_ZONES_REPORT`: where a recording that cannot be written
    /// at exit says why (`coldcache zones record` reads it).
    report: Option<PathBuf>,
}

/// Parses a size such as `256M`, `4G`, `65536`.
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1usize << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mult)
}

/// Largest arena accepted (1 TiB of address space: far beyond any
/// recording's need, far below what x86-64's 47-bit user space holds).
pub const MAX_ARENA_BYTES: usize = 1 << 40;

/// Reads an arena size (`--arena`, `COLDCACHE_ZONES_ARENA`): a size of
/// at least one chunk and at most [`MAX_ARENA_BYTES`], rounded down to
/// whole chunks, that this process can reserve now (an `mmap` of address
/// space only, released at once: a `ulimit -v` below it is found here).
/// The error says what is wrong with `s`.
pub fn arena_size(s: &str) -> Result<usize, String> {
    let bytes = parse_size(s).ok_or_else(|| format!("{s:?} is not a size (e.g. 256M, 4G)"))?;
    let chunk = CHUNK_WORDS * 8;
    if bytes < chunk {
        return Err(format!(
            "{s:?} is smaller than one chunk of {} KiB, the least an arena holds",
            chunk >> 10
        ));
    }
    if bytes > MAX_ARENA_BYTES {
        return Err(format!(
            "{s:?} is more than the {} GiB an arena may reserve",
            MAX_ARENA_BYTES >> 30
        ));
    }
    let bytes = bytes / chunk * chunk;
    // SAFETY: an anonymous mapping without access, unmapped just below;
    // nothing else sees it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!(
            "{s:?} cannot be reserved in this process: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: p..p+bytes is the mapping just made.
    unsafe { libc::munmap(p, bytes) };
    Ok(bytes)
}

fn env_config() -> EnvConfig {
    let get = coldcache_fsio::env::var;
    let pid = std::process::id().to_string();
    EnvConfig {
        arena_bytes: match get("COLDCACHE_ZONES_ARENA").map(|v| arena_size(&v)) {
            None => DEFAULT_ARENA_BYTES,
            Some(Ok(n)) => n,
            Some(Err(e)) => {
                coldcache_fsio::say!(
                    "coldcache: COLDCACHE_ZONES_ARENA={e}; zones are not recorded"
                );
                0
            }
        },
        out: get("COLDCACHE_ZONES_OUT").map(|p| PathBuf::from(p.replace("%p", &pid))),
        stream: get("COLDCACHE_ZONES_STREAM").is_some_and(|v| v != "0"),
        recording: get("COLDCACHE_ZONES").is_none_or(|v| v != "0"),
        report: get("COLDCACHE_ZONES_REPORT").map(|p| PathBuf::from(p.replace("%p", &pid))),
    }
}

/// Initializes the recorder if nobody has; true when it is ready.
#[inline]
pub fn ensure_init() -> bool {
    match STATE.load(Acquire) {
        READY => true,
        FAILED => false,
        _ => init_slow(),
    }
}

#[cold]
fn init_slow() -> bool {
    if STATE
        .compare_exchange(UNINIT, BUSY, AcqRel, Acquire)
        .is_err()
    {
        // Someone else is initializing: wait for them.
        loop {
            match STATE.load(Acquire) {
                READY => return true,
                FAILED => return false,
                _ => std::hint::spin_loop(),
            }
        }
    }
    let cfg = env_config();
    let (tsc, ns) = clock_pair();
    START_TSC.store(tsc, Relaxed);
    START_NS.store(ns, Relaxed);
    OWNER_PID.store(std::process::id(), Relaxed);
    let chunks = cfg.arena_bytes / (CHUNK_WORDS * 8);
    let bytes = chunks * CHUNK_WORDS * 8;
    if chunks == 0 {
        // A bad COLDCACHE_ZONES_ARENA, already reported.
        ENABLED.store(false, Relaxed);
        STATE.store(FAILED, Release);
        return false;
    }
    // SAFETY: an anonymous private mapping; arguments are valid.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        coldcache_fsio::say!(
            "coldcache: cannot reserve the zones arena of {} MiB: {}; zones are not recorded",
            bytes >> 20,
            std::io::Error::last_os_error()
        );
        ENABLED.store(false, Relaxed);
        STATE.store(FAILED, Release);
        return false;
    }
    // Fewer page faults while the arena fills (2 MiB pages where the kernel
    // allows them); advice only, failure is harmless.
    // SAFETY: p..p+bytes is the mapping just made.
    unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
    ARENA.store(p.cast(), Release);
    N_CHUNKS.store(chunks, Relaxed);
    if !cfg.recording {
        ENABLED.store(false, Relaxed);
    }
    STATE.store(READY, Release);
    // SAFETY: registering plain extern "C" handlers.
    unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_child));
    }
    *lock(&REPORT_PATH) = cfg.report;
    // At exit the recording is written if there is a path (the spike
    // detector's summary before it: `crate::ensure_init` registers it after
    // this, so it runs first).
    // SAFETY: `write_at_exit` is an extern "C" fn with no arguments.
    unsafe { libc::atexit(write_at_exit) };
    if let Some(out) = cfg.out {
        *lock(&AT_EXIT_PATH) = Some(out.clone());
        if cfg.stream {
            start_streaming(out);
        }
    }
    true
}

extern "C" fn after_fork_child() {
    // The child has a copy of the arena and of the exit handler: it must not
    // write the parent's recording over the parent's file.
    ENABLED.store(false, Relaxed);
    *lock(&AT_EXIT_PATH) = None;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static AT_EXIT_PATH: Mutex<Option<PathBuf>> = Mutex::new(None);
/// `COLDCACHE_ZONES_REPORT`, read at initialization.
static REPORT_PATH: Mutex<Option<PathBuf>> = Mutex::new(None);

extern "C" fn write_at_exit() {
    let path = lock(&AT_EXIT_PATH).take();
    if OWNER_PID.load(Relaxed) != std::process::id() {
        return;
    }
    if let Some(path) = path {
        ENABLED.store(false, Relaxed);
        if let Err(e) = write_to(&path) {
            coldcache_fsio::say!("coldcache: cannot write the zones recording: {e}");
            // Told to `zones record` too, which then fails instead of
            // passing the program's status on as if all were well.
            if let Some(report) = lock(&REPORT_PATH).take() {
                let line = format!("{}: {e}\n", path.display());
                let wrote = coldcache_fsio::check_link(&report).and_then(|()| {
                    std::fs::OpenOptions::new()
                        .append(true)
                        .create(true)
                        .open(&report)?
                        .write_all(line.as_bytes())
                });
                if let Err(e) = wrote {
                    coldcache_fsio::say!("coldcache: cannot write {}: {e}", report.display());
                }
            }
        }
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A time stamp and the monotonic clock read together: the clock read
/// between two counter reads, paired with their midpoint; the tightest of
/// a few tries (the first call of the clock in a process is slow).
fn clock_pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let a = rdtsc();
        let n = monotonic_ns();
        let b = rdtsc();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), a + (b.wrapping_sub(a)) / 2, n);
        }
    }
    (best.1, best.2)
}

/// Time stamp counter ticks per second, measured against the monotonic
/// clock since initialization (waiting until 2 ms have passed on the first
/// call; a later call refines the figure once the span has doubled, so the
/// figure written with a recording is measured over most of it).
pub fn tsc_hz() -> f64 {
    if !ensure_init() {
        return 1e9;
    }
    let t0 = START_TSC.load(Relaxed);
    let n0 = START_NS.load(Relaxed);
    let cached = f64::from_bits(TSC_HZ.load(Relaxed));
    let (mut t1, mut n1) = clock_pair();
    // Recompute only when the span has doubled since the last estimate.
    if cached > 0.0 && n1 - n0 < 2 * CAL_SPAN_NS.load(Relaxed) {
        return cached;
    }
    while n1 - n0 < 2_000_000 {
        std::hint::spin_loop();
        (t1, n1) = clock_pair();
    }
    let hz = (t1 - t0) as f64 * 1e9 / (n1 - n0) as f64;
    TSC_HZ.store(hz.to_bits(), Relaxed);
    CAL_SPAN_NS.store(n1 - n0, Relaxed);
    hz
}

// ---- reading the arena and writing files --------------------------------

/// What [`chunk_section`] read.
struct ChunkMeta {
    sealed: bool,
    events: u64,
}

/// Reads chunk `i` of the arena (its filled part) and writes it as a whole
/// `CHUNK` section into `buf` (cleared first). None for a chunk being
/// claimed, or an empty one. `words` is scratch space.
fn chunk_section(
    base: *mut AtomicU64,
    i: usize,
    words: &mut Vec<u64>,
    buf: &mut Vec<u8>,
) -> Option<ChunkMeta> {
    // SAFETY: callers pass i < NEXT_CHUNK.min(N_CHUNKS): inside the arena.
    let chunk = unsafe { std::slice::from_raw_parts(base.add(i * CHUNK_WORDS), CHUNK_WORDS) };
    let header = chunk[0].load(Acquire);
    if header == 0 {
        return None;
    }
    let sealed = chunk[1].load(Acquire);
    let n = if sealed > 0 {
        (sealed - 1) as usize
    } else {
        chunk[2..]
            .chunks_exact(2)
            .take_while(|e| e[0].load(Acquire) != 0)
            .count()
    };
    if n == 0 {
        return None;
    }
    let thread = (header & 0xffff_ffff) as u32;
    let seq = ((header >> 32) & 0x7fff_ffff) as u32;
    words.clear();
    if sealed > 0 {
        // A sealed chunk is no longer written (its seal was read with
        // acquire ordering after the owner's sfence): copy it plainly.
        words.resize(2 * n, 0);
        // SAFETY: the source is 2n initialized words inside the chunk that
        // no thread writes any more; the destination was just sized.
        unsafe {
            std::ptr::copy_nonoverlapping(
                chunk[2..].as_ptr() as *const u64,
                words.as_mut_ptr(),
                2 * n,
            )
        };
    } else {
        words.extend(chunk[2..2 + 2 * n].iter().map(|w| w.load(Relaxed)));
    }
    buf.clear();
    buf.extend_from_slice(&format::section::CHUNK_PACKED.to_le_bytes());
    buf.extend_from_slice(&0u64.to_le_bytes());
    format::packed_chunk_payload(thread, seq, words, buf);
    let len = (buf.len() - 12) as u64;
    buf[4..12].copy_from_slice(&len.to_le_bytes());
    let crc = crc32fast::hash(&buf[12..]);
    buf.extend_from_slice(&crc.to_le_bytes());
    Some(ChunkMeta {
        sealed: sealed > 0,
        events: n as u64,
    })
}

fn allocated_chunks() -> usize {
    NEXT_CHUNK.load(Acquire).min(N_CHUNKS.load(Relaxed))
}

/// The executable mappings of this process, from `/proc/self/maps`.
pub fn modules() -> Vec<ModuleInfo> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    parse_maps(&maps)
}

/// Parses `/proc/PID/maps` text into executable file mappings.
pub fn parse_maps(maps: &str) -> Vec<ModuleInfo> {
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms), Some(off)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let path = f.nth(2).unwrap_or("");
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(file_offset)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(b, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        out.push(ModuleInfo {
            start,
            end,
            file_offset,
            path: path.to_string(),
        });
    }
    out
}

fn threads_now() -> Vec<ThreadInfo> {
    let n = (NEXT_THREAD.load(Acquire) as usize).min(MAX_THREADS);
    (1..n)
        .map(|i| {
            let tid = THREADS[i].tid.load(Acquire);
            let mut name = thread_name(i as u32);
            // Prefer the current name of a live thread (it may have been set
            // after its first event).
            if let Ok(comm) = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")) {
                let comm = comm.trim_end().to_string();
                if !comm.is_empty() && (name.is_empty() || !name.starts_with(&comm)) {
                    name = comm;
                }
            }
            ThreadInfo {
                index: i as u32,
                tid,
                name,
            }
        })
        .collect()
}

/// The recording's facts with the clock rate `tsc_hz`.
fn recording_info(tsc_hz: f64) -> RecordingInfo {
    RecordingInfo {
        tsc_hz,
        start_tsc: START_TSC.load(Relaxed),
        pid: std::process::id(),
        dropped_events: DROPPED.load(Relaxed),
        arena_bytes: (N_CHUNKS.load(Relaxed) * CHUNK_WORDS * 8) as u64,
        exe: std::fs::read_link("/proc/self/exe")
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    }
}

/// How often a streaming writer compares the modules with the mappings.
const MODULES_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// The sections that close a file: tables, info and END.
fn trailer(chunks: u32, events: u64) -> Vec<u8> {
    let mut out = Vec::new();
    format::write_section(
        &mut out,
        format::section::LABELS,
        &format::labels_payload(&labels()),
    );
    format::write_section(
        &mut out,
        format::section::THREADS,
        &format::threads_payload(&threads_now()),
    );
    format::write_section(
        &mut out,
        format::section::MODULES,
        &format::modules_payload(&modules()),
    );
    format::write_section(
        &mut out,
        format::section::INFO,
        &format::info_payload(&recording_info(tsc_hz())),
    );
    format::write_section(
        &mut out,
        format::section::END,
        &format::end_payload(chunks, events),
    );
    out
}

/// Writes the whole recording so far as a zones file to `w`, chunk by
/// chunk (no copy of the whole recording is made).
pub fn write_recording(w: &mut impl Write) -> std::io::Result<()> {
    // The calling thread's own non-temporal stores, in order before reads.
    // SAFETY: sfence has no preconditions.
    unsafe { core::arch::x86_64::_mm_sfence() };
    w.write_all(&format::header())?;
    let (mut chunks, mut events) = (0u32, 0u64);
    if ensure_init() {
        let base = ARENA.load(Acquire);
        let (mut words, mut buf) = (Vec::new(), Vec::new());
        for i in 0..allocated_chunks() {
            if let Some(c) = chunk_section(base, i, &mut words, &mut buf) {
                w.write_all(&buf)?;
                chunks += 1;
                events += c.events;
            }
        }
    }
    w.write_all(&trailer(chunks, events))
}

/// The whole recording so far as a zones file in memory.
pub fn snapshot() -> Vec<u8> {
    let mut out = Vec::new();
    write_recording(&mut out).expect("writing to a Vec cannot fail");
    out
}

/// Writes the recording to `path` atomically (`coldcache_fsio`: a
/// temporary file, then a rename; a device or FIFO written in place),
/// without holding the whole file in memory.
fn write_recording_to(path: &Path) -> std::io::Result<()> {
    coldcache_fsio::write_atomically_with(path, write_recording)
}

fn tmp_path(path: &Path, what: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{}.{what}", std::process::id()));
    PathBuf::from(s)
}

/// Writes the recording so far to `path` (on demand; recording goes on).
/// If a streaming writer is running for `path`, it is finished instead.
pub fn write_to(path: &Path) -> std::io::Result<()> {
    let mut stream = lock(&STREAM);
    if let Some(s) = stream.as_mut() {
        if s.path == path {
            let r = s.finish();
            *stream = None;
            return r;
        }
    }
    drop(stream);
    write_recording_to(path)
}

// ---- streaming ----------------------------------------------------------

struct Stream {
    path: PathBuf,
    partial: PathBuf,
    /// Opened again by `partial`'s path if the program closes its
    /// descriptor, closed only while it is still ours
    /// (`coldcache_fsio::fdguard`).
    file: coldcache_fsio::fdguard::GuardedFile,
    written: Vec<bool>,
    words: Vec<u64>,
    buf: Vec<u8>,
    out: Vec<u8>,
    chunks: u32,
    events: u64,
    /// What of the tables the partial file already holds, so a recording
    /// cut short (a crash, `SIGKILL`) still names its zones and threads and
    /// keeps its clock: see [`Stream::tables`].
    tables: StreamedTables,
}

/// The tables a streaming writer has appended so far.
#[derive(Default)]
struct StreamedTables {
    /// Labels with ids below this are in the file.
    labels: u32,
    /// Threads registered when the file's thread table was last updated.
    threads: u32,
    /// The threads as last written.
    thread_list: Vec<ThreadInfo>,
    /// The clock rate of the last INFO section written (0: none yet).
    tsc_hz: f64,
    /// Dropped events in the last INFO section written.
    dropped: u64,
    /// The modules last written.
    modules: Vec<ModuleInfo>,
    /// When the modules were last compared with `/proc/self/maps`.
    modules_at: Option<std::time::Instant>,
}

impl Stream {
    /// Appends the chunks that are sealed (or all, at the end) and not yet
    /// written.
    fn flush(&mut self, all: bool) -> std::io::Result<()> {
        if all {
            // SAFETY: sfence has no preconditions.
            unsafe { core::arch::x86_64::_mm_sfence() };
        }
        let base = ARENA.load(Acquire);
        let n = allocated_chunks();
        if self.written.len() < n {
            self.written.resize(n, false);
        }
        for i in 0..n {
            if self.written[i] {
                continue;
            }
            // Unsealed chunks are still being filled: leave them for later
            // (peek at the seal before copying anything).
            // SAFETY: i < allocated chunks: inside the arena.
            let sealed = unsafe { (*base.add(i * CHUNK_WORDS + 1)).load(Acquire) } > 0;
            if !sealed && !all {
                continue;
            }
            let Some(c) = chunk_section(base, i, &mut self.words, &mut self.buf) else {
                continue;
            };
            // Batch sections into ~1 MiB writes (one system call per
            // ~300 chunks instead of one each).
            self.out.extend_from_slice(&self.buf);
            if self.out.len() >= 1 << 20 {
                self.file.write_all(&self.out)?;
                self.out.clear();
            }
            self.chunks += 1;
            self.events += c.events;
            if c.sealed && !all {
                // Written: clear it and hand it back for reuse, so a
                // streamed recording needs only as much arena as the writer
                // lags behind (and touches no new memory).
                // SAFETY: chunk i is sealed: its thread has moved on and no
                // one else writes it until it is taken from FREE again.
                let words =
                    unsafe { std::slice::from_raw_parts(base.add(i * CHUNK_WORDS), CHUNK_WORDS) };
                // SAFETY: as above; the events are 2n words after the header.
                unsafe {
                    std::ptr::write_bytes(
                        words[2..].as_ptr() as *mut AtomicU64,
                        0,
                        2 * c.events as usize,
                    )
                };
                words[1].store(0, Relaxed);
                words[0].store(0, Release);
                let mut free = lock(&FREE);
                free.push(i);
                FREE_LEN.store(free.len(), Release);
            } else {
                self.written[i] = true;
            }
        }
        self.tables(all);
        self.file.write_all(&self.out)?;
        self.out.clear();
        Ok(())
    }

    /// Appends what changed in the tables since the last call: labels and
    /// threads registered since (a reader keeps the last entry of an id),
    /// the clock once its calibration moved, the modules when the mappings
    /// changed (looked at most every [`MODULES_EVERY`]). The closing
    /// trailer repeats every table whole, so a complete file does not
    /// depend on these; they are for a file cut short.
    fn tables(&mut self, all: bool) {
        if all {
            return; // the trailer follows
        }
        let t = &mut self.tables;
        let labels = NEXT_LABEL.load(Acquire).min(MAX_LABELS as u32);
        if labels > t.labels.max(1) {
            let new: Vec<LabelInfo> = (t.labels.max(1)..labels)
                .filter_map(|id| {
                    label_by_id(id).map(|l| {
                        let (name, file, line) = l.info();
                        LabelInfo {
                            id,
                            name,
                            file,
                            line,
                        }
                    })
                })
                .collect();
            // A label whose id is taken but not yet stored is written
            // next time.
            let done = new.len() as u32 == labels - t.labels.max(1);
            if !new.is_empty() {
                format::write_section(
                    &mut self.out,
                    format::section::LABELS,
                    &format::labels_payload(&new),
                );
            }
            if done {
                t.labels = labels;
            }
        }
        // Threads: when one was added, and with the modules' look (names
        // may be set after a thread's first event); only changed entries.
        let now = std::time::Instant::now();
        let tick = t.modules_at.is_none_or(|at| now - at >= MODULES_EVERY);
        let threads = NEXT_THREAD.load(Acquire).min(MAX_THREADS as u32);
        if threads > t.threads || tick {
            let cur = threads_now();
            let changed: Vec<ThreadInfo> = cur
                .iter()
                .filter(|th| th.tid != 0 && !t.thread_list.contains(th))
                .cloned()
                .collect();
            if !changed.is_empty() {
                format::write_section(
                    &mut self.out,
                    format::section::THREADS,
                    &format::threads_payload(&changed),
                );
            }
            t.thread_list = cur;
            t.threads = threads;
        }
        if tick {
            t.modules_at = Some(now);
            let m = modules();
            if m != t.modules {
                format::write_section(
                    &mut self.out,
                    format::section::MODULES,
                    &format::modules_payload(&m),
                );
                t.modules = m;
            }
        }
        let hz = tsc_hz();
        let dropped = DROPPED.load(Relaxed);
        if hz != t.tsc_hz || (tick && dropped != t.dropped) {
            t.tsc_hz = hz;
            t.dropped = dropped;
            format::write_section(
                &mut self.out,
                format::section::INFO,
                &format::info_payload(&recording_info(hz)),
            );
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.flush(true)?;
        let t = trailer(self.chunks, self.events);
        self.file.write_all(&t)?;
        std::fs::rename(&self.partial, &self.path)
    }
}

static STREAM: Mutex<Option<Stream>> = Mutex::new(None);

/// Starts a background thread that appends full chunks to `path` as they
/// fill (to `path` plus `.partial` until the recording is written at exit
/// or by [`write_to`] with the same path, which renames it).
pub fn start_streaming(path: PathBuf) {
    let partial = tmp_path(&path, "partial");
    let Ok(mut file) = coldcache_fsio::fdguard::GuardedFile::open(&partial, true) else {
        coldcache_fsio::say!(
            "coldcache: cannot create {}: streaming is off",
            partial.display()
        );
        return;
    };
    if file.write_all(&format::header()).is_err() {
        return;
    }
    *lock(&STREAM) = Some(Stream {
        path,
        partial,
        file,
        written: Vec::new(),
        words: Vec::new(),
        buf: Vec::new(),
        out: Vec::new(),
        chunks: 0,
        events: 0,
        tables: StreamedTables::default(),
    });
    let spawned = std::thread::Builder::new()
        .name("coldcache-stream".into())
        .spawn(|| {
            // Its own descriptor table first (see `private_files`).
            let keep = lock(&STREAM).as_mut().map(|st| st.file.fd());
            if let Some(Ok(keep)) = keep {
                private_files(keep);
            }
            loop {
                let mut s = lock(&STREAM);
                let before = match s.as_mut() {
                    Some(st) => {
                        let before = st.chunks;
                        if st.flush(false).is_err() {
                            *s = None;
                            return;
                        }
                        st.chunks - before
                    }
                    None => return,
                };
                drop(s);
                // Keep going while there is work; otherwise look again soon.
                if before == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
        });
    if spawned.is_err() {
        *lock(&STREAM) = None;
    }
}

/// The stream thread's descriptors become its own (`unshare(CLONE_FILES)`,
/// at its start), holding only the stream's file `keep`: a program that
/// closes every descriptor (a daemon's start) no longer closes the
/// stream's, and the stream never opens its file again in the program's
/// table, where the opening took the lowest free number for a moment and
/// a file the program opened then got the next one (`fd 4` instead of
/// `fd 3`: zones.rs's closefds test, once in CI). The copies of the
/// program's other descriptors are closed at once: a pipe's end kept open
/// here would keep its reader from ever seeing the end. Where `unshare` is
/// refused (a seccomp filter), the table stays shared and the file is
/// opened again by path when needed (`coldcache_fsio::fdguard`).
fn private_files(keep: i32) {
    // SAFETY: unshare takes flags only; CLONE_FILES gives this thread a
    // private copy of the descriptor table.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return;
    }
    let close_range = |lo: u32, hi: u32| {
        // SAFETY: closes descriptors of this thread's private table only.
        unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0u32) }
    };
    let keep = keep as u32;
    let below = if keep > 0 {
        close_range(0, keep - 1)
    } else {
        0
    };
    if below != 0 || close_range(keep + 1, u32::MAX) != 0 {
        // No close_range (before Linux 5.9): one by one, up to the limit.
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the live local.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        for fd in 0..lim.rlim_cur.min(1 << 20) as i32 {
            if fd != keep as i32 {
                // SAFETY: a descriptor of this thread's private table.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// Benchmark hook: hands the whole arena back for reuse, so that a
/// benchmark can record more events than the arena holds without reaching
/// the dropping path. Only for a process where the calling thread is the
/// only one recording; earlier events are overwritten.
#[doc(hidden)]
pub fn rewind_for_benchmark() {
    TLS.with(|t| {
        t.ptr.set(std::ptr::null_mut());
        t.end.set(std::ptr::null_mut());
        t.chunk.set(std::ptr::null_mut());
    });
    let base = ARENA.load(Acquire);
    for i in 0..allocated_chunks() {
        // SAFETY: chunk i is inside the arena; the caller guarantees no
        // other thread writes it. Clearing the header and seal is enough
        // for readers; event words are overwritten before being read again
        // only up to the new fill point, so clear the first event too.
        unsafe {
            let c = base.add(i * CHUNK_WORDS);
            (*c).store(0, Relaxed);
            (*c.add(1)).store(0, Relaxed);
        }
    }
    NEXT_CHUNK.store(0, Release);
}

/// Test hook: the number of chunks handed out so far.
#[doc(hidden)]
pub fn chunks_in_use() -> usize {
    allocated_chunks()
}
