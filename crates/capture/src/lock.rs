//! The capture's two locks (the session's, `state.rs`, and the translator's,
//! `jit/mod.rs`): spin a little, then sleep on a futex until the holder
//! leaves, and the futex calls they and the serial schedule share.
//!
//! A pure spin lock was measured here: four traced threads of a mutex and
//! condvar program on two cores spent 86% of their CPU spinning in
//! `jit::flush` for the session lock (whose holder replays a whole buffer,
//! up to milliseconds, and was often descheduled), at 1 M instructions a
//! second instead of tens (issue 35's "66% of the samples spinning on the
//! session and translator locks").
//!
//! The lock is the three-state futex mutex of Drepper's "Futexes Are
//! Tricky" (0 free, 1 held, 2 held with sleepers). It stays
//! async-signal-safe: its slow path is two system calls (`futex` wait and
//! wake, private), no allocation, no glibc lock. Callers hold it only with
//! every signal blocked (inside an engine handler, `prepare` or `finish`),
//! so a handler of the same thread never waits on it. A wait has a
//! timeout: a lost wake (none is known) costs a millisecond, not a hang.
//! Once the program confines itself with seccomp (`seccomp.rs` sees the
//! call coming, [`forbid_system_calls`]) a filter may kill it for a
//! `futex`: from then on the lock only spins, as it did before.

use crate::signal_state::lock::NO_SYSCALLS;
use std::sync::atomic::{AtomicU32, Ordering};

/// Free.
const FREE: u32 = 0;
/// Held, nobody sleeping on it.
const HELD: u32 = 1;
/// Held, and a thread may be sleeping on it (the unlock wakes one).
const CONTENDED: u32 = 2;

/// Checks of the word before sleeping: a holder on another core usually
/// leaves within them (a dispatcher lookup, one trap-engine step).
const SPINS: u32 = 200;

/// The longest sleep of one wait, in nanoseconds.
const WAIT_NS: u64 = 1_000_000;

/// From now on the locks make no system call: they spin (a seccomp filter
/// is about to be installed, and may kill the program for a `futex`).
pub(crate) fn forbid_system_calls() {
    NO_SYSCALLS.store(true, Ordering::SeqCst);
}

/// Checks of the lock's grants, at most, that [`Lock::lock_in_turn`] makes
/// before taking the lock anyway (tens of microseconds), with a
/// `sched_yield` every [`TURN_YIELD`] of them so that a waiter on this
/// core can run.
const TURN_SPINS: u32 = 1000;
const TURN_YIELD: u32 = 100;

/// A lock word ([`Lock::lock`], [`Lock::unlock`]), with what
/// [`Lock::lock_in_turn`] needs: how many threads wait for it, how many
/// times it was taken, and who took it last in turn.
pub(crate) struct Lock {
    word: AtomicU32,
    waiting: AtomicU32,
    grants: AtomicU32,
    last: AtomicU32,
}

impl Lock {
    pub(crate) const fn new() -> Self {
        Lock {
            word: AtomicU32::new(FREE),
            waiting: AtomicU32::new(0),
            grants: AtomicU32::new(0),
            last: AtomicU32::new(0),
        }
    }

    /// Takes the lock once, without waiting.
    pub(crate) fn try_lock(&self) -> bool {
        self.word
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// [`Lock::try_lock`], counted as a grant (a thread waiting its turn in
    /// [`Lock::lock_in_turn`] sees it taken).
    pub(crate) fn try_lock_granted(&self) -> bool {
        let ok = self.try_lock();
        if ok {
            self.grants.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Takes the lock: spins [`SPINS`] times, then sleeps until it is free.
    pub(crate) fn lock(&self) {
        if self.try_lock() {
            self.grants.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        self.lock_waiting();
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        self.grants.fetch_add(1, Ordering::Relaxed);
    }

    fn lock_waiting(&self) {
        for _ in 0..SPINS {
            std::hint::spin_loop();
            if self.word.load(Ordering::Relaxed) == FREE && self.try_lock() {
                return;
            }
        }
        // Mark it contended; whoever held it wakes a sleeper when leaving.
        while self.word.swap(CONTENDED, Ordering::Acquire) != FREE {
            if NO_SYSCALLS.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            } else {
                futex_wait(&self.word, CONTENDED, WAIT_NS);
            }
        }
    }

    /// Takes the lock for thread `me` in turn: when `me` took it last this
    /// way and other threads wait for it, lets one of them take it first,
    /// waiting at most [`TURN_SPINS`] checks. The lock is unfair (the
    /// thread that leaves it, running, takes it again before a waiter
    /// wakes): fast mode's short replays (`jit::flush`) take it in turn so
    /// that the simulator sees the threads' buffers alternate as the
    /// threads ran, not one thread's for as long as it keeps the lock.
    pub(crate) fn lock_in_turn(&self, me: u32) {
        if self.last.load(Ordering::Relaxed) == me && self.waiting.load(Ordering::Relaxed) > 0 {
            let granted = self.grants.load(Ordering::Relaxed);
            for i in 1..=TURN_SPINS {
                if self.grants.load(Ordering::Relaxed) != granted
                    || self.waiting.load(Ordering::Relaxed) == 0
                {
                    break;
                }
                if i % TURN_YIELD == 0 && !NO_SYSCALLS.load(Ordering::Relaxed) {
                    // SAFETY: sched_yield has no arguments and no effect
                    // on memory.
                    unsafe { libc::sched_yield() };
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        self.lock();
        self.last.store(me, Ordering::Relaxed);
    }

    /// Leaves the lock (held by the caller), waking one sleeper if any.
    pub(crate) fn unlock(&self) {
        if self.word.swap(FREE, Ordering::Release) == CONTENDED
            && !NO_SYSCALLS.load(Ordering::Relaxed)
        {
            // (With system calls forbidden, a sleeper wakes at its timeout.)
            futex_wake(&self.word, 1);
        }
    }
}

/// Sleeps while `word` holds `expected`, at most `timeout_ns` (or until a
/// wake, a signal, or at once if the word differs).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a futex wait on a word of ours, with a live timespec.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        )
    };
}

/// Wakes up to `n` threads sleeping on `word`.
pub(crate) fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: a futex wake on a word of ours.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Eight threads on (usually) fewer cores add to a counter under the
    /// lock: no increment is lost, and the lock ends free.
    #[test]
    fn threads_contending_lose_no_update() {
        struct Shared {
            lock: Lock,
            n: std::cell::UnsafeCell<u64>,
        }
        // SAFETY: `n` is only touched with `lock` held.
        unsafe impl Sync for Shared {}
        let s = Arc::new(Shared {
            lock: Lock::new(),
            n: std::cell::UnsafeCell::new(0),
        });
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    for i in 0..20_000u32 {
                        s.lock.lock();
                        // SAFETY: the lock is held.
                        unsafe { *s.n.get() += 1 };
                        if i % 1000 == 0 {
                            // A holder that sleeps: the others must wait.
                            std::thread::sleep(std::time::Duration::from_micros(50));
                        }
                        s.lock.unlock();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // SAFETY: every thread has ended.
        assert_eq!(unsafe { *s.n.get() }, 8 * 20_000);
        assert_eq!(s.lock.word.load(Ordering::Relaxed), FREE);
        assert!(s.lock.try_lock());
        assert!(!s.lock.try_lock());
        s.lock.unlock();
    }
}
