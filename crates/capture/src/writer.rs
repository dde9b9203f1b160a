//! The writer thread: the one place that takes what the doorbell
//! (`doorbell.rs`) asks for — the dump of a capture stopped asynchronously,
//! the `--signal` trigger's start and stop, parking before a seccomp filter
//! reaches every thread — and the progress lines of `COLDCACHE_PROGRESS`.
//!
//! Its own layer, between the signal code and the front ends: the front
//! ends start it ([`ensure_writer`]), the signal code rings it, and it
//! acts through what the life cycle registered in the doorbell
//! (`doorbell::finish_here`, `doorbell::start_here`), so it imports
//! nothing above it. It is only started when needed: a second thread
//! switches glibc out of its single-threaded fast paths, which would change
//! the instructions the program runs.

use crate::doorbell::{self, Command};
use crate::options::CaptureError;
use crate::state::writer::STARTED;
use crate::state::{gettid, with_session, IDLE, INSTRUCTIONS, PENDING, RUNNING, STATE};
use coldcache_fsio::fdguard;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Starts the writer thread (dumps of asynchronous stops, progress, the
/// `--signal` trigger) if it is not running. It is only started when
/// needed: a second thread switches glibc out of its single-threaded fast
/// paths, which would change the instructions the program runs.
pub(crate) fn ensure_writer() -> Result<(), CaptureError> {
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    if *started {
        return Ok(());
    }
    let Some(bell) = doorbell::new_doorbell() else {
        return Err(CaptureError::Os {
            what: "creating the writer's eventfd",
            source: std::io::Error::last_os_error(),
        });
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("coldcache".into())
        .spawn(move || {
            crate::fatal::block_in_own_thread();
            let _ = tx.send(gettid());
            writer_loop(bell)
        })
        .map_err(|source| {
            // SAFETY: closing the eventfd made above, used by nothing.
            unsafe { libc::close(bell.0) };
            CaptureError::Os {
                what: "starting the writer thread",
                source,
            }
        })?;
    // Published once the writer runs: until then the callers of
    // `doorbell::post` act on their own.
    doorbell::set_writer(rx.recv().unwrap_or(0), bell.0);
    *started = true;
    Ok(())
}

/// Does every command asked for since the last look, each as many times
/// as it was asked.
fn take_wakes(progress: bool) {
    for command in Command::ALL {
        for _ in 0..doorbell::take(command) {
            on_wake(command, progress);
        }
    }
}

/// Does what `command` asks.
fn on_wake(command: Command, progress: bool) {
    match command {
        Command::Finish => doorbell::finish_here(),
        Command::Trigger => {
            if STATE.load(Ordering::Acquire) == RUNNING {
                doorbell::finish_here();
            } else if STATE.load(Ordering::Acquire) == IDLE {
                let opts = PENDING.lock().ok().and_then(|g| g.clone());
                if let Some(o) = opts {
                    if let Some(Err(e)) = doorbell::start_here(o) {
                        coldcache_fsio::say!("coldcache: capture not started: {e}");
                    } else if progress {
                        coldcache_fsio::say!("coldcache: capture started by signal");
                    }
                }
            }
        }
        Command::Park => crate::seccomp::park_writer_here(),
    }
}

fn writer_loop(bell: (i32, fdguard::Identity)) {
    let (mut fd, mut id) = bell;
    let progress = coldcache_fsio::env::is_set("COLDCACHE_PROGRESS");
    let mut last = (Instant::now(), 0u64);
    loop {
        // The program may have closed the doorbell (and opened a file of
        // its own at its number): a new one, the old number left alone.
        // Until one can be made (no descriptor free) the commands are
        // looked at every second.
        if !fdguard::still(fd, id) {
            match doorbell::new_doorbell() {
                Some((new, new_id)) => {
                    (fd, id) = (new, new_id);
                    doorbell::set_doorbell(fd);
                }
                None => {
                    take_wakes(progress);
                    std::thread::sleep(std::time::Duration::from_secs(1));
                    continue;
                }
            }
        }
        take_wakes(progress);
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polling one pollfd (a closed number gives POLLNVAL).
        let n = unsafe { libc::poll(&mut pfd, 1, 1000) };
        if n > 0 {
            if pfd.revents & libc::POLLIN != 0 && fdguard::still(fd, id) {
                let mut rings = 0u64;
                // SAFETY: reading the eventfd's counter into a live local.
                unsafe { libc::read(fd, &mut rings as *mut u64 as *mut libc::c_void, 8) };
            } else if pfd.revents & libc::POLLIN == 0 {
                // POLLNVAL or POLLERR: looked at again at the top.
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            take_wakes(progress);
        } else if progress && STATE.load(Ordering::Acquire) == RUNNING {
            let now = Instant::now();
            let n = INSTRUCTIONS.load(Ordering::Relaxed);
            let rate = (n.saturating_sub(last.1)) as f64 / now.duration_since(last.0).as_secs_f64();
            let elapsed = with_session(|c| c.as_ref().map(|s| s.started.elapsed().as_secs_f64()))
                .unwrap_or(0.0);
            coldcache_fsio::say!(
                "coldcache: {n} instructions traced, {rate:.0}/s, {elapsed:.1} s elapsed"
            );
            last = (now, n);
        }
    }
}
