//! The UI's HTTP/1.1 server, over `std::net`, written for its bounds (a
//! general server such as tiny_http reads headers without a limit and
//! spawns a thread per connection):
//!
//! - one thread (the caller of [`serve`]) owns every connection and moves
//!   bytes with non-blocking sockets and `poll(2)`; it never waits for one
//!   client. A fixed pool of [`crate::WORKERS`] threads only computes
//!   answers; a client that reads its answer slowly, or never, holds a
//!   connection slot until the write deadline, not a worker.
//! - at most [`MAX_CONNECTIONS`] connections are open; when full, a new
//!   one takes the slot of the oldest connection still sending its request
//!   (a client that sends its request at once is not displaced by slow
//!   ones). Beyond that the kernel's accept queue waits (bounded by the
//!   listen backlog).
//! - a request's line and headers are read into a buffer that may grow to
//!   [`MAX_HEAD`] bytes and no further: past that the answer is 431 and
//!   nothing more is kept. The whole head must arrive within the read
//!   timeout (408 otherwise), the whole answer leave within the write
//!   timeout (the connection is closed otherwise).
//! - `Host` must name the server (127.0.0.1 or localhost, and its port):
//!   the defence against DNS rebinding beside the token. Only `GET`.
//! - one request per connection (`Connection: close`); after the answer
//!   the write side is shut and what the client still sends is read and
//!   dropped for a moment, so that the close does not reset the answer.

use crate::api::{App, Reply};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The largest request line and headers read, in bytes (a browser sends
/// about one kilobyte; a long source-file path percent-encoded stays well
/// under).
pub const MAX_HEAD: usize = 32 << 10;

/// The most connections open at once.
pub const MAX_CONNECTIONS: usize = 256;

/// How long a closed-for-writing connection is drained of what the client
/// still sends, and how much of it is read (then dropped), at most.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 256 << 10;

/// How long the stop lets answers still being written finish.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How often the stop flag is looked at while nothing happens.
const TICK: Duration = Duration::from_millis(200);

/// The deadlines of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// From the connection's accept to the end of its request's head.
    pub read: Duration,
    /// From the answer being ready to its last byte sent.
    pub write: Duration,
}

/// A request as the workers need it.
struct Job {
    conn: u64,
    target: String,
    token: Option<String>,
}

/// The head of a request, parsed.
#[derive(Debug)]
struct ParsedHead {
    method: String,
    target: String,
    host: Option<String>,
    token: Option<String>,
}

enum State {
    /// The request's head is arriving.
    Reading(Vec<u8>),
    /// A worker computes the answer.
    Waiting,
    /// The answer is being sent.
    Writing { out: Vec<u8>, sent: usize },
    /// The answer was sent and the write side shut: what arrives is dropped
    /// until the client closes.
    Draining { dropped: usize },
}

struct Conn {
    stream: TcpStream,
    state: State,
    /// Accept order, for choosing which connection gives up its slot.
    serial: u64,
    deadline: Instant,
}

/// Where the request's head ends (the index after its blank line), looking
/// from `from` on.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.saturating_sub(3);
    let b = &buf[start..];
    (0..b.len()).find_map(|i| {
        if b[i..].starts_with(b"\r\n\r\n") {
            Some(start + i + 4)
        } else if b[i..].starts_with(b"\n\n") {
            Some(start + i + 2)
        } else {
            None
        }
    })
}

/// Parses a request's line and headers.
fn parse_head(buf: &[u8]) -> Result<ParsedHead, (u16, String)> {
    let text =
        std::str::from_utf8(buf).map_err(|_| (400, "the request is not UTF-8 text".to_string()))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err((400, "malformed request line".into()));
    };
    if !version.starts_with("HTTP/1.") {
        return Err((505, format!("{version} is not served: HTTP/1.x only")));
    }
    let mut head = ParsedHead {
        method: method.to_string(),
        target: target.to_string(),
        host: None,
        token: None,
    };
    for l in lines.take_while(|l| !l.is_empty()) {
        let Some((name, value)) = l.split_once(':') else {
            return Err((400, "malformed header line (no colon)".into()));
        };
        let value = value.trim().to_string();
        if name.eq_ignore_ascii_case("host") {
            if head.host.is_some() {
                return Err((400, "more than one Host header".into()));
            }
            head.host = Some(value);
        } else if name.eq_ignore_ascii_case("x-coldcache-token") {
            head.token = Some(value);
        }
    }
    Ok(head)
}

/// Whether a `Host` header names this server: 127.0.0.1 or localhost
/// (any case) with its port (no port: 80).
fn host_is_us(host: &str, addr: SocketAddr) -> bool {
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) => match p.parse::<u16>() {
            Ok(p) => (n, p),
            Err(_) => return false,
        },
        None => (host, 80),
    };
    port == addr.port() && (name == addr.ip().to_string() || name.eq_ignore_ascii_case("localhost"))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// The Content-Security-Policy of an answer that is not the page: nothing
/// in it may load or run anything, nor be framed.
const POLICY: &str =
    "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The bytes of an answer: status line, headers, body.
fn encode(reply: &Reply, app: &App) -> Vec<u8> {
    let policy = if reply.content_type.starts_with("text/html") {
        app.page_policy()
    } else {
        POLICY
    };
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
         X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\
         Content-Security-Policy: {policy}\r\nX-Frame-Options: DENY\r\n\
         Cache-Control: no-store\r\n\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type,
        reply.body.len(),
    )
    .into_bytes();
    out.extend_from_slice(&reply.body);
    out
}

/// Wakes the connection thread (a byte on its socket pair; a full socket
/// means it is woken already).
pub(crate) fn wake(waker: &UnixStream) {
    let _ = (&*waker).write(&[1]);
}

/// What is needed to serve, shared with [`serve`] by the `Server`.
pub(crate) struct Serving<'a> {
    /// The listening socket (non-blocking).
    pub listener: &'a TcpListener,
    /// The address bound.
    pub addr: SocketAddr,
    /// The application.
    pub app: &'a App,
    /// The read end of the wake-up socket pair (non-blocking).
    pub wakeup: &'a UnixStream,
    /// The write end (the workers wake the connection thread with it).
    pub waker: &'a UnixStream,
    /// The deadlines.
    pub timeouts: Timeouts,
}

/// Serves until `done()` (looked at when woken and every [`TICK`]); then
/// stops accepting, finishes the answers being computed and sent (within
/// [`STOP_GRACE`]) and returns once the workers have ended.
pub(crate) fn serve(s: &Serving, done: &dyn Fn() -> bool) {
    let (jobs_tx, jobs_rx) = mpsc::sync_channel::<Job>(MAX_CONNECTIONS);
    let jobs_rx = Mutex::new(jobs_rx);
    let (answers_tx, answers_rx) = mpsc::channel::<(u64, Vec<u8>)>();
    std::thread::scope(|scope| {
        for _ in 0..crate::WORKERS {
            let answers_tx = answers_tx.clone();
            let jobs_rx = &jobs_rx;
            scope.spawn(move || loop {
                let job = match jobs_rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                let Ok(job) = job else { return };
                // A panic answering one request answers it with 500 and
                // leaves the worker serving (the cache's lock is taken
                // with `ok()`, so a poisoned one is only a cache miss).
                let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    s.app.handle(&job.target, job.token.as_deref())
                }))
                .unwrap_or_else(|_| Reply::error(500, "internal error (see the server's log)"));
                if answers_tx.send((job.conn, encode(&reply, s.app))).is_err() {
                    return;
                }
                wake(s.waker);
            });
        }
        drop(answers_tx);
        event_loop(s, done, &jobs_tx, &answers_rx);
        // The workers end when the queue is closed, after the job each is
        // on.
        drop(jobs_tx);
    });
}

/// `pollfd` events wanted for a connection in `state`.
fn interest(state: &State) -> libc::c_short {
    match state {
        State::Reading(_) | State::Draining { .. } => libc::POLLIN,
        State::Writing { .. } => libc::POLLOUT,
        State::Waiting => 0,
    }
}

fn event_loop(
    s: &Serving,
    done: &dyn Fn() -> bool,
    jobs: &mpsc::SyncSender<Job>,
    answers: &mpsc::Receiver<(u64, Vec<u8>)>,
) {
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut next_id: u64 = 0;
    let mut stopping = false;
    let mut fds: Vec<libc::pollfd> = Vec::new();
    let mut ids: Vec<u64> = Vec::new();
    loop {
        let now = Instant::now();
        if !stopping && done() {
            stopping = true;
            // Requests not yet read are dropped; answers being computed or
            // sent get a little time to finish.
            conns.retain(|_, c| matches!(c.state, State::Waiting | State::Writing { .. }));
            for c in conns.values_mut() {
                c.deadline = c.deadline.min(now + STOP_GRACE);
            }
        }
        if stopping
            && !conns
                .values()
                .any(|c| matches!(c.state, State::Waiting | State::Writing { .. }))
        {
            return;
        }

        // Wait for something to do.
        fds.clear();
        ids.clear();
        fds.push(libc::pollfd {
            fd: s.wakeup.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        let listening = !stopping
            && (conns.len() < MAX_CONNECTIONS
                || conns.values().any(|c| matches!(c.state, State::Reading(_))));
        fds.push(libc::pollfd {
            fd: if listening {
                s.listener.as_raw_fd()
            } else {
                -1
            },
            events: libc::POLLIN,
            revents: 0,
        });
        for (&id, c) in &conns {
            let events = interest(&c.state);
            if events != 0 {
                fds.push(libc::pollfd {
                    fd: c.stream.as_raw_fd(),
                    events,
                    revents: 0,
                });
                ids.push(id);
            }
        }
        let next_deadline = conns.values().map(|c| c.deadline).min();
        let wait = next_deadline
            .map(|d| d.saturating_duration_since(now))
            .unwrap_or(TICK)
            .min(TICK);
        // Rounded up, so that a deadline has passed when poll returns.
        let ms = wait.as_micros().div_ceil(1000) as libc::c_int;
        // SAFETY: `fds` is a live, initialised array of `fds.len()` pollfd
        // structs that poll may write `revents` into; its descriptors stay
        // open during the call (owned by `s` and `conns`, untouched here).
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 && std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
            // Not expected with valid arguments; do not spin.
            std::thread::sleep(Duration::from_millis(10));
        }
        let now = Instant::now();

        // Woken: drain the wake-up bytes, take the answers computed.
        if fds[0].revents != 0 {
            let mut sink = [0u8; 64];
            while matches!((&*s.wakeup).read(&mut sink), Ok(n) if n > 0) {}
        }
        while let Ok((id, out)) = answers.try_recv() {
            if let Some(c) = conns.get_mut(&id) {
                c.state = State::Writing { out, sent: 0 };
                c.deadline = if stopping {
                    now + STOP_GRACE
                } else {
                    now + s.timeouts.write
                };
            }
        }

        // Sockets ready.
        let ready: Vec<u64> = fds[2..]
            .iter()
            .zip(&ids)
            .filter(|(f, _)| f.revents != 0)
            .map(|(_, &id)| id)
            .collect();
        for id in ready {
            let Some(c) = conns.get_mut(&id) else {
                continue;
            };
            if !advance(c, id, s, jobs, now) {
                conns.remove(&id);
            }
        }

        // New connections.
        if listening && fds[1].revents != 0 {
            accept(s, &mut conns, &mut next_id, now);
        }

        // Deadlines.
        let late: Vec<u64> = conns
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            let Some(c) = conns.get_mut(&id) else {
                continue;
            };
            match c.state {
                State::Reading(_) => {
                    // One try at telling the client, then closed.
                    let r = Reply::error(408, "the request did not arrive in time");
                    let _ = c.stream.write(&encode(&r, s.app));
                    conns.remove(&id);
                }
                // The worker's answer will find the connection gone.
                State::Waiting if !stopping => {}
                _ => {
                    conns.remove(&id);
                }
            }
        }
    }
}

/// Accepts what the listener has, while there is room (making room by
/// closing the oldest connection still sending its request).
fn accept(s: &Serving, conns: &mut HashMap<u64, Conn>, next_id: &mut u64, now: Instant) {
    loop {
        if conns.len() >= MAX_CONNECTIONS {
            let oldest = conns
                .iter()
                .filter(|(_, c)| matches!(c.state, State::Reading(_)))
                .min_by_key(|(_, c)| c.serial)
                .map(|(&id, _)| id);
            match oldest {
                Some(id) => {
                    conns.remove(&id);
                }
                None => return,
            }
        }
        match s.listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                let _ = stream.set_nodelay(true);
                *next_id += 1;
                conns.insert(
                    *next_id,
                    Conn {
                        stream,
                        state: State::Reading(Vec::new()),
                        serial: *next_id,
                        deadline: now + s.timeouts.read,
                    },
                );
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // WouldBlock: nothing more; other errors (a connection reset
            // before its accept, no descriptors left): try again later.
            Err(_) => return,
        }
    }
}

/// Moves a ready connection on; false when it is to be closed.
fn advance(c: &mut Conn, id: u64, s: &Serving, jobs: &mpsc::SyncSender<Job>, now: Instant) -> bool {
    match &mut c.state {
        State::Reading(buf) => match read_head(&mut c.stream, buf) {
            Head::More => true,
            Head::Closed => false,
            Head::TooLong => {
                let r = Reply::error(
                    431,
                    &format!("the request line and headers exceed {MAX_HEAD} bytes"),
                );
                respond(c, &r, s, now);
                true
            }
            Head::Complete(end) => {
                let head = std::mem::take(buf);
                match request(&head[..end], s) {
                    Ok(job) => {
                        if jobs.try_send(Job { conn: id, ..job }).is_err() {
                            // Not expected: the queue holds a job per
                            // connection.
                            respond(c, &Reply::error(503, "too many requests"), s, now);
                        } else {
                            c.state = State::Waiting;
                            // The answer takes as long as it takes; the
                            // write deadline starts when it is ready.
                            c.deadline = now + Duration::from_secs(24 * 3600);
                        }
                    }
                    Err(r) => respond(c, &r, s, now),
                }
                true
            }
        },
        State::Writing { out, sent } => {
            while *sent < out.len() {
                match c.stream.write(&out[*sent..]) {
                    Ok(0) => return false,
                    Ok(n) => *sent += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => return false,
                }
            }
            // All sent: shut the write side, drop what the client still
            // sends until it closes.
            let _ = c.stream.shutdown(std::net::Shutdown::Write);
            c.state = State::Draining { dropped: 0 };
            c.deadline = now + LINGER;
            true
        }
        State::Draining { dropped } => {
            let mut chunk = [0u8; 4096];
            loop {
                match c.stream.read(&mut chunk) {
                    Ok(0) => return false,
                    Ok(n) => {
                        *dropped += n;
                        if *dropped > LINGER_BYTES {
                            return false;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => return false,
                }
            }
        }
        State::Waiting => true,
    }
}

/// What reading a request's head gave.
enum Head {
    /// Not whole yet.
    More,
    /// The client closed or failed.
    Closed,
    /// Over [`MAX_HEAD`] bytes without its end.
    TooLong,
    /// Whole: the head is the buffer's first bytes, up to this index.
    Complete(usize),
}

/// Reads what `stream` has into `buf`, never keeping more than
/// [`MAX_HEAD`] + 1 bytes.
fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Head {
    let mut chunk = [0u8; 4096];
    loop {
        let room = (MAX_HEAD + 1 - buf.len()).min(chunk.len());
        match stream.read(&mut chunk[..room]) {
            Ok(0) => return Head::Closed,
            Ok(n) => {
                let from = buf.len();
                buf.extend_from_slice(&chunk[..n]);
                match head_end(buf, from) {
                    Some(end) if end <= MAX_HEAD => return Head::Complete(end),
                    _ if buf.len() > MAX_HEAD => return Head::TooLong,
                    _ => {}
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Head::More,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Head::Closed,
        }
    }
}

/// Starts sending `reply` (an answer of the connection thread itself).
fn respond(c: &mut Conn, reply: &Reply, s: &Serving, now: Instant) {
    c.state = State::Writing {
        out: encode(reply, s.app),
        sent: 0,
    };
    c.deadline = now + s.timeouts.write;
}

/// A request's head checked: a job for the workers (its `conn` set by the
/// caller), or the refusal.
fn request(head: &[u8], s: &Serving) -> Result<Job, Reply> {
    let h = parse_head(head).map_err(|(status, m)| Reply::error(status, &m))?;
    match &h.host {
        None => return Err(Reply::error(400, "the Host header is missing")),
        Some(host) if !host_is_us(host, s.addr) => {
            return Err(Reply::error(
                403,
                &format!(
                    "Host: {host} is not this server ({}): open the URL coldcache ui printed",
                    s.addr
                ),
            ))
        }
        Some(_) => {}
    }
    if h.method != "GET" {
        return Err(Reply::error(405, "only GET requests are served"));
    }
    if !h.target.starts_with('/') {
        return Err(Reply::error(400, "the request target must be a path"));
    }
    Ok(Job {
        conn: 0,
        target: h.target,
        token: h.token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_of_a_head_is_found_across_reads() {
        let b = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody";
        assert_eq!(head_end(b, 0), Some(b.len() - 4));
        // The blank line split between two reads.
        assert_eq!(head_end(b, 26), Some(b.len() - 4));
        assert_eq!(head_end(b"GET / HTTP/1.0\n\n", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    }

    #[test]
    fn heads_are_parsed_and_malformed_ones_named() {
        let h =
            parse_head(b"GET /a?b HTTP/1.1\r\nhost: 127.0.0.1:9\r\nX-Coldcache-Token:  t \r\n\r\n")
                .unwrap();
        assert_eq!(
            (
                h.method.as_str(),
                h.target.as_str(),
                h.host.as_deref(),
                h.token.as_deref()
            ),
            ("GET", "/a?b", Some("127.0.0.1:9"), Some("t"))
        );
        for (bad, what) in [
            (&b"GET /\r\n\r\n"[..], "malformed request line"),
            (b"GET / HTTP/2\r\n\r\n", "HTTP/1.x only"),
            (b"GET / HTTP/1.1\r\nnocolon\r\n\r\n", "no colon"),
            (
                b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                "more than one Host",
            ),
            (b"GET /\xff HTTP/1.1\r\n\r\n", "not UTF-8"),
        ] {
            let e = parse_head(bad).unwrap_err();
            assert!(e.1.contains(what), "{e:?}");
        }
    }

    #[test]
    fn only_hosts_naming_the_server_are_us() {
        let a: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        for h in ["127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080"] {
            assert!(host_is_us(h, a), "{h}");
        }
        for h in [
            "127.0.0.1",
            "localhost",
            "127.0.0.1:8081",
            "evil.example:8080",
            "localhost.evil.example:8080",
            "[::1]:8080",
            "127.0.0.1:8080:8080",
            "",
        ] {
            assert!(!host_is_us(h, a), "{h}");
        }
        let a80: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(host_is_us("localhost", a80));
    }
}
