//! coldcache-ui: `coldcache ui DUMP [DUMP2]`, a capture in the browser.
//!
//! - [`App`] (`api.rs`) is the pure part: it holds the profiles and answers
//!   requests (path and query in, status, type and body out). Every number
//!   comes from `coldcache-analysis`; the browser only renders what the API
//!   returns, so aggregation stays on the server and a million-record dump
//!   answers quickly.
//! - [`Server`] binds 127.0.0.1 (a free port unless one is asked for), makes
//!   the URL with its random token, and serves until stopped, on
//!   [`WORKERS`] threads: a slow answer (an uncached flame graph takes most
//!   of a second on a million records) holds one of them while the others
//!   go on answering. The [`App`] is shared by reference; its answer cache is
//!   locked only to look up and to store, never while an answer is computed.
//! - The front end (`assets/`) is one HTML page with its CSS and JavaScript,
//!   embedded in the binary: no CDN, works offline.
//!
//! Security: every request must carry the token (`?token=` or the
//! `X-Coldcache-Token` header); the source endpoint serves only files named
//! in a dump's line tables.

mod api;

pub use api::{App, Reply};

use coldcache_analysis::Profile;
use std::net::SocketAddr;
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
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    /// Port on 127.0.0.1; `None` picks a free one.
    pub port: Option<u16>,
}

/// A running server: its URL, and a way to stop it.
pub struct Server {
    http: Arc<tiny_http::Server>,
    app: Arc<App>,
    /// Set by the stopper: `recv_timeout` returns "no request" when
    /// unblocked, so the workers need a flag to tell a stop from a timeout.
    stopped: Arc<AtomicBool>,
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
        let http = tiny_http::Server::http(&addr).map_err(|e| UiError::Bind {
            addr: addr.clone(),
            message: e.to_string(),
        })?;
        let bound = match http.server_addr() {
            tiny_http::ListenAddr::IP(a) => a,
            #[allow(unreachable_patterns)]
            _ => {
                return Err(UiError::Bind {
                    addr,
                    message: "not an IP address".into(),
                })
            }
        };
        let url = format!("http://{bound}/?token={token}");
        Ok(Server {
            http: Arc::new(http),
            app: Arc::new(App::new(profiles, token)),
            stopped: Arc::new(AtomicBool::new(false)),
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

    /// A handle that makes [`Server::run`] return (once the requests being
    /// answered are answered).
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let http = Arc::clone(&self.http);
        let stopped = Arc::clone(&self.stopped);
        move || {
            stopped.store(true, Ordering::SeqCst);
            http.unblock();
        }
    }

    /// Serves requests on [`WORKERS`] threads until `stop` is set (checked
    /// every 200 ms), the stopper is called or the listener fails; returns
    /// when every worker has finished the request it was answering.
    pub fn run(&self, stop: &AtomicBool) {
        // Set when the listener fails: every worker ends, as the stop does.
        let failed = AtomicBool::new(false);
        let done = || {
            stop.load(Ordering::SeqCst)
                || self.stopped.load(Ordering::SeqCst)
                || failed.load(Ordering::SeqCst)
        };
        std::thread::scope(|s| {
            for _ in 0..WORKERS {
                s.spawn(|| {
                    while !done() {
                        match self.http.recv_timeout(Duration::from_millis(200)) {
                            Ok(Some(req)) => self.answer(req),
                            Ok(None) => continue,
                            Err(_) => failed.store(true, Ordering::SeqCst),
                        }
                    }
                    // `unblock` wakes one waiting worker: each one leaving
                    // wakes the next, so they all see the flag at once.
                    self.http.unblock();
                });
            }
        });
    }

    /// Answers one request.
    fn answer(&self, req: tiny_http::Request) {
        let token_header = req
            .headers()
            .iter()
            .find(|h| h.field.equiv("X-Coldcache-Token"))
            .map(|h| h.value.as_str().to_string());
        let reply = if *req.method() == tiny_http::Method::Get {
            self.app.handle(req.url(), token_header.as_deref())
        } else {
            Reply::error(405, "only GET requests are served")
        };
        let header =
            tiny_http::Header::from_bytes(&b"Content-Type"[..], reply.content_type.as_bytes())
                .expect("a valid header");
        let nosniff =
            tiny_http::Header::from_bytes(&b"X-Content-Type-Options"[..], &b"nosniff"[..])
                .expect("a valid header");
        let resp = tiny_http::Response::from_data(reply.body)
            .with_status_code(reply.status)
            .with_header(header)
            .with_header(nosniff);
        let _ = req.respond(resp);
    }
}
