//! coldcache-ui: `coldcache ui DUMP [DUMP2]`, a capture in the browser.
//!
//! - [`App`] (`api.rs`) is the pure part: it holds the profiles and answers
//!   requests (path and query in, status, type and body out). Every number
//!   comes from `coldcache-analysis`; the browser only renders what the API
//!   returns, so aggregation stays on the server and a million-record dump
//!   answers quickly.
//! - [`Server`] binds 127.0.0.1 (a free port unless one is asked for), makes
//!   the URL with its random token, and serves until stopped (`http.rs`, a
//!   server of its own over `std::net`): one thread owns the connections
//!   and moves their bytes without ever waiting for one client, and
//!   [`WORKERS`] threads compute the answers: a slow answer (an uncached
//!   flame graph takes most of a second on a million records) holds one of
//!   them while the others go on answering, and a client that does not
//!   read its answer holds none. The [`App`] is shared by reference; its
//!   answer cache is locked only to look up and to store, never while an
//!   answer is computed.
//! - The front end (`assets/`) is one HTML page with its CSS and JavaScript,
//!   embedded in the binary: no CDN, works offline.
//!
//! Security: every request must carry the token (`?token=` or the
//! `X-Coldcache-Token` header) and name the server in `Host` (127.0.0.1 or
//! localhost and its port: DNS rebinding); every answer forbids a
//! `Referer` (the token is in the page's URL) and carries a
//! Content-Security-Policy (the page's script and style allowed by their
//! SHA-256, nothing else); the source endpoint serves only files named in a
//! dump's line tables. Bounds: [`MAX_HEAD`] bytes of request line and
//! headers, [`MAX_CONNECTIONS`] connections, read and write deadlines
//! ([`ServeOptions`]), a fixed number of threads, and an answer cache of
//! [`CACHE_BYTES`] counting its keys.

#![warn(missing_docs)]

mod api;
mod http;

pub use api::{App, Reply, CACHE_BYTES};
pub use http::{MAX_CONNECTIONS, MAX_HEAD};

use coldcache_analysis::Profile;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {message}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        message: String,
    },
    /// No random token could be made.
    #[error("cannot make a random token: {0}")]
    Random(String),
}

/// Threads answering requests in [`Server::run`].
pub const WORKERS: usize = 4;

// The workers share the application.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<App>();
};

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Port on 127.0.0.1; `None` picks a free one.
    pub port: Option<u16>,
    /// How long a connection may take to send its request line and
    /// headers, from its accept (then 408 and closed).
    pub read_timeout: Duration,
    /// How long an answer may take to be sent, from the moment it is ready
    /// (then the connection is closed).
    pub write_timeout: Duration,
    /// Per dump (same order as the profiles), per module, its load bias
    /// where known (see [`App::with_load_biases`]); empty: run-time
    /// addresses only.
    pub load_biases: Vec<Vec<Option<u64>>>,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            port: None,
            read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(60),
            load_biases: Vec::new(),
        }
    }
}

/// A running server: its URL, and a way to stop it.
pub struct Server {
    listener: TcpListener,
    app: Arc<App>,
    /// Set by the stopper, which then wakes the connection thread.
    stopped: Arc<AtomicBool>,
    /// The socket pair that wakes the connection thread: its read end...
    wakeup: UnixStream,
    /// ... and its write end (the workers' and the stopper's).
    waker: Arc<UnixStream>,
    timeouts: http::Timeouts,
    /// The address bound.
    pub addr: SocketAddr,
    /// The URL to open (with the token).
    pub url: String,
}

/// A fresh random token (128 bits, hex).
pub fn token() -> Result<String, UiError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| UiError::Random(e.to_string()))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Server {
    /// Binds the server for `profiles` (named by their file names).
    pub fn bind(profiles: Vec<(String, Profile)>, opts: &ServeOptions) -> Result<Server, UiError> {
        let token = token()?;
        let addr = format!("127.0.0.1:{}", opts.port.unwrap_or(0));
        let fail = |e: std::io::Error| UiError::Bind {
            addr: addr.clone(),
            message: e.to_string(),
        };
        let listener = TcpListener::bind(&addr).map_err(fail)?;
        listener.set_nonblocking(true).map_err(fail)?;
        let bound = listener.local_addr().map_err(fail)?;
        let (wakeup, waker) = UnixStream::pair().map_err(fail)?;
        wakeup.set_nonblocking(true).map_err(fail)?;
        waker.set_nonblocking(true).map_err(fail)?;
        let url = format!("http://{bound}/?token={token}");
        Ok(Server {
            listener,
            app: Arc::new(App::new(profiles, token).with_load_biases(opts.load_biases.clone())),
            stopped: Arc::new(AtomicBool::new(false)),
            wakeup,
            waker: Arc::new(waker),
            timeouts: http::Timeouts {
                read: opts.read_timeout,
                write: opts.write_timeout,
            },
            addr: bound,
            url,
        })
    }

    /// Computes the slowest answers on a thread of its own (see
    /// [`App::warm`]), so that the first clicks answer quickly too.
    pub fn warm_in_background(&self) {
        let app = Arc::clone(&self.app);
        std::thread::spawn(move || app.warm());
    }

    /// A handle that makes [`Server::run`] return (once the answers being
    /// computed and sent are done).
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let waker = Arc::clone(&self.waker);
        let stopped = Arc::clone(&self.stopped);
        move || {
            stopped.store(true, Ordering::SeqCst);
            http::wake(&waker);
        }
    }

    /// Serves until `stop` is set (checked every 200 ms) or the stopper is
    /// called: connections on this thread, answers computed on [`WORKERS`]
    /// threads (see the `http` module for the bounds). Returns when the
    /// answers being computed are computed and sent (those being sent get
    /// a few seconds).
    pub fn run(&self, stop: &AtomicBool) {
        let serving = http::Serving {
            listener: &self.listener,
            addr: self.addr,
            app: &self.app,
            wakeup: &self.wakeup,
            waker: &self.waker,
            timeouts: self.timeouts,
        };
        http::serve(&serving, &|| {
            stop.load(Ordering::SeqCst) || self.stopped.load(Ordering::SeqCst)
        });
    }
}
