//! `record`'s progress line: instructions traced, rate, elapsed time (and,
//! with `--instructions N`, the share done and the time left), read from
//! outside the program.
//!
//! The library publishes, once before `main`, the addresses of its
//! instruction counter and capture state (`coldcache_capture::
//! publish_progress`, file `COLDCACHE_PROGRESS_FILE`); a thread of
//! `record` reads the two words every second with `process_vm_readv`
//! (allowed to the parent process). The program runs nothing for it: no
//! writer thread (whose mere existence switches glibc out of its
//! single-threaded paths and so changes the instructions a capture
//! counts), no extra store. Where the read is refused (a ptrace policy
//! that forbids even the parent), progress says so once and stops.

use coldcache_dump::thousands;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The running progress thread.
pub struct Progress {
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Progress {
    /// Starts printing the progress of the capture whose addresses the
    /// library writes to `file`; `window` is the capture's size when known
    /// (`--instructions`); `tty`: rewrite one line, else a line a second.
    pub fn start(file: PathBuf, window: Option<u64>, tty: bool) -> Progress {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let thread = std::thread::spawn(move || run(&file, window, tty, &d));
        Progress { done, thread }
    }

    /// Stops the thread (the program has ended) and clears the line.
    pub fn stop(self) {
        self.done.store(true, Ordering::Release);
        let _ = self.thread.join();
    }
}

/// What the library published: pid, counter and state addresses.
fn read_addresses(file: &PathBuf) -> Option<(i32, usize, usize)> {
    let text = std::fs::read_to_string(file).ok()?;
    let mut it = text.split_whitespace();
    let pid = it.next()?.parse().ok()?;
    let n = usize::from_str_radix(it.next()?, 16).ok()?;
    let s = usize::from_str_radix(it.next()?, 16).ok()?;
    Some((pid, n, s))
}

/// Reads the counter and the state of process `pid`.
fn read_words(pid: i32, counter: usize, state: usize) -> std::io::Result<(u64, u8)> {
    let mut n = 0u64;
    let mut s = 0u8;
    let local = [
        libc::iovec {
            iov_base: &mut n as *mut u64 as *mut libc::c_void,
            iov_len: 8,
        },
        libc::iovec {
            iov_base: &mut s as *mut u8 as *mut libc::c_void,
            iov_len: 1,
        },
    ];
    let remote = [
        libc::iovec {
            iov_base: counter as *mut libc::c_void,
            iov_len: 8,
        },
        libc::iovec {
            iov_base: state as *mut libc::c_void,
            iov_len: 1,
        },
    ];
    // SAFETY: the local iovecs point at two live locals of the stated
    // sizes; the remote ones are only read by the kernel, in the other
    // process, which checks them.
    let r = unsafe { libc::process_vm_readv(pid, local.as_ptr(), 2, remote.as_ptr(), 2, 0) };
    if r != 9 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((n, s))
}

/// A duration for people: `42 s`, `3 min 5 s`, `2 h 10 min`.
fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// The progress line of a capture at `n` instructions, `elapsed` seconds
/// after it started, running at `rate` instructions a second.
pub fn line(n: u64, rate: f64, elapsed: f64, window: Option<u64>) -> String {
    let mut l = format!(
        "coldcache: {} instructions, {}/s, {} elapsed",
        thousands(n),
        thousands(rate.max(0.0).round() as u64),
        duration(elapsed)
    );
    if let Some(w) = window.filter(|&w| w > 0) {
        let left = w.saturating_sub(n);
        l.push_str(&format!(
            " ({}% of {}{})",
            (n.min(w) as f64 / w as f64 * 100.0).floor(),
            thousands(w),
            if rate > 0.0 {
                format!(", about {} left", duration(left as f64 / rate))
            } else {
                String::new()
            }
        ));
    }
    l
}

fn run(file: &PathBuf, window: Option<u64>, tty: bool, done: &AtomicBool) {
    let mut err = std::io::stderr();
    let mut shown = false;
    // (start of the window, instructions and time at the last sample)
    let mut window_state: Option<(Instant, u64, Instant)> = None;
    // A first sample after half a second; lines from the second on (a
    // rate needs two).
    let mut next = Instant::now() + Duration::from_millis(500);
    while !done.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(50));
        if Instant::now() < next {
            continue;
        }
        next += Duration::from_secs(1);
        let Some((pid, counter, state)) = read_addresses(file) else {
            continue;
        };
        let (n, s) = match read_words(pid, counter, state) {
            Ok(x) => x,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return,
            Err(e) => {
                let _ = writeln!(
                    err,
                    "coldcache: no progress: reading the capture's counter: {e}"
                );
                return;
            }
        };
        let now = Instant::now();
        if s != coldcache_capture::PROGRESS_RUNNING {
            window_state = None;
            if shown && tty {
                let _ = write!(err, "\r\x1b[K");
                shown = false;
            }
            continue;
        }
        let (start, last_n, last_t) = match window_state {
            Some(w) if n >= w.1 => w,
            _ => {
                // A new capture (or its counter started again).
                window_state = Some((now, n, now));
                continue;
            }
        };
        let dt = now.duration_since(last_t).as_secs_f64();
        let rate = n.saturating_sub(last_n) as f64 / dt.max(1e-3);
        window_state = Some((start, n, now));
        let text = line(n, rate, now.duration_since(start).as_secs_f64(), window);
        let _ = if tty {
            write!(err, "\r{text}\x1b[K")
        } else {
            writeln!(err, "{text}")
        };
        shown = true;
    }
    if shown && tty {
        let _ = write!(err, "\r\x1b[K");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_reads_as_written_by_hand() {
        assert_eq!(
            line(1_500_000, 60_000.0, 25.0, None),
            "coldcache: 1,500,000 instructions, 60,000/s, 25 s elapsed"
        );
        // 2,500,000 left at 50,000/s: 50 s.
        assert_eq!(
            line(7_500_000, 50_000.0, 150.0, Some(10_000_000)),
            "coldcache: 7,500,000 instructions, 50,000/s, 2 min 30 s elapsed \
             (75% of 10,000,000, about 50 s left)"
        );
    }
}
