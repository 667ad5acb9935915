//! The scripted HTTP/1.1 test server behind `failover.testing.MockServer`,
//! bound to `127.0.0.1`.
//!
//! Tests push [`ScriptedResponse`]s into a FIFO shared by all connections;
//! every incoming request is recorded (see [`MockServer::requests`]) and
//! answered with the next scripted response, or with a `500` JSON error of
//! type `mock_unscripted` when the script is exhausted. Responses can be
//! delayed, streamed as server-sent events, or replaced by a [`Fault`]
//! (connection reset, hang, stream cut short).
//!
//! This file holds the public API and the script shared by all connections;
//! `server` accepts and serves connections, `http1` parses requests and
//! encodes responses.

mod http1;
mod server;
#[cfg(test)]
mod test_client;

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

/// A failure injected instead of (or in the middle of) a normal response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Read the request, then reset the connection (`SO_LINGER` 0) without sending a byte.
    Reset,
    /// Read the request and never answer; the socket stays open until the client
    /// disconnects or the server is closed.
    Hang,
    /// SSE: send the head and only the first `n` events, then reset the connection.
    /// Non-SSE: send the head (with the full `Content-Length`) and only the first
    /// `n` body bytes, then reset the connection.
    CutAfterEvents(usize),
    /// A stream: send the head and the first `n` events (or chunks), then
    /// send nothing more and keep the connection open (an idle stall).
    StallAfterEvents(usize),
}

/// One scripted answer, served to exactly one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedResponse {
    /// HTTP status code.
    pub status: u16,
    /// Extra headers, sent as given. `Content-Length` is added unless present here
    /// (or unless this is an SSE response); `content-type` defaults to
    /// `application/json` for non-empty bodies.
    pub headers: Vec<(String, String)>,
    /// Raw body bytes (ignored when `sse` is set).
    pub body: Vec<u8>,
    /// If set, the response is `text/event-stream`: each item is one event's raw
    /// text, written followed by `"\n\n"` and flushed individually; the connection
    /// is closed afterwards to end the body.
    pub sse: Option<Vec<String>>,
    /// If set, a streamed body: each piece is written as it is (no
    /// separator) and flushed on its own, a few milliseconds apart, so the
    /// client reads them separately (a read may end inside a character);
    /// the connection is closed afterwards. `content-type` defaults to
    /// `text/event-stream`.
    pub chunks: Option<Vec<Vec<u8>>>,
    /// Real time to wait before sending anything.
    pub delay: Duration,
    /// Real time between one event (or piece) of a stream and the next: a
    /// server that keeps a connection alive for a while.
    pub interval: Duration,
    /// Optional fault injection.
    pub fault: Option<Fault>,
}

impl ScriptedResponse {
    /// A response with the given status, no extra headers, empty body, no delay, no fault.
    pub fn new(status: u16) -> Self {
        ScriptedResponse {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            sse: None,
            chunks: None,
            delay: Duration::ZERO,
            interval: Duration::ZERO,
            fault: None,
        }
    }
}

/// The statuses a [`ScriptedResponse`] may have.
pub const STATUS_RANGE: std::ops::RangeInclusive<u16> = 100..=599;

/// Why [`MockServer::push`] refused a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushError {
    /// The status is outside [`STATUS_RANGE`].
    InvalidStatus(u16),
    /// The server was closed: no request could take the response.
    Closed,
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::InvalidStatus(status) => write!(
                f,
                "status must be an HTTP status code from 100 to 599, got {status}"
            ),
            PushError::Closed => {
                f.write_str("the MockServer is closed: a response pushed now would never be served")
            }
        }
    }
}

impl std::error::Error for PushError {}

/// A request as received by the mock server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    /// Request method, e.g. `POST`.
    pub method: String,
    /// Request target as sent, including any query string.
    pub path: String,
    /// Headers in order received; names are lowercased.
    pub headers: Vec<(String, String)>,
    /// Full request body (per `Content-Length`).
    pub body: Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<ScriptedResponse>,
    requests: Vec<RecordedRequest>,
    /// Requests being answered now (received, their response not all sent),
    /// and the most there ever were at once.
    in_flight: usize,
    max_in_flight: usize,
    /// Requests whose client left while their answer was delayed (before
    /// any of it was sent).
    left_early: usize,
}

type Shared = Arc<Mutex<State>>;

fn lock(shared: &Mutex<State>) -> MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running mock server; closed on [`MockServer::close`] or drop.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    shared: Shared,
    shutdown: watch::Sender<bool>,
}

impl MockServer {
    /// Binds `127.0.0.1:0` and spawns the accept loop on `handle`.
    ///
    /// Works both from inside the runtime and from a thread outside it.
    pub fn start(handle: &tokio::runtime::Handle) -> io::Result<MockServer> {
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let listener = {
            let _guard = handle.enter();
            TcpListener::from_std(std_listener)?
        };
        let shared: Shared = Arc::new(Mutex::new(State::default()));
        let (shutdown, shutdown_rx) = watch::channel(false);
        handle.spawn(server::accept_loop(
            listener,
            Arc::clone(&shared),
            shutdown_rx,
        ));
        Ok(MockServer {
            addr,
            shared,
            shutdown,
        })
    }

    /// Base URL, e.g. `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends a response to the script (FIFO, shared across connections).
    ///
    /// A bad script fails at once: a status outside 100-599, or a push after
    /// [`MockServer::close`] (which no request could ever take).
    pub fn push(&self, response: ScriptedResponse) -> Result<(), PushError> {
        if !STATUS_RANGE.contains(&response.status) {
            return Err(PushError::InvalidStatus(response.status));
        }
        if *self.shutdown.borrow() {
            return Err(PushError::Closed);
        }
        lock(&self.shared).script.push_back(response);
        Ok(())
    }

    /// All requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared).requests.clone()
    }

    /// The most requests it was answering at once (from a request's
    /// arrival until its response was all sent, or its client left).
    pub fn max_in_flight(&self) -> usize {
        lock(&self.shared).max_in_flight
    }

    /// How many requests' clients closed their connection while the answer
    /// was delayed (a call cancelled, a hedge's loser).
    pub fn left_early(&self) -> usize {
        lock(&self.shared).left_early
    }

    /// Number of scripted responses not yet served.
    pub fn pending(&self) -> usize {
        lock(&self.shared).script.len()
    }

    /// The status of each scripted response not yet served, in script order.
    pub fn pending_statuses(&self) -> Vec<u16> {
        lock(&self.shared).script.iter().map(|r| r.status).collect()
    }

    /// Stops accepting and ends every connection, including hanging ones. Idempotent.
    pub fn close(&self) {
        self.shutdown.send_replace(true);
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::test_client::{connect, json, roundtrip, READ_TIMEOUT};
    use super::*;
    use tokio::runtime::Handle;

    #[tokio::test]
    async fn fifo_order_and_recording() {
        let server = MockServer::start(&Handle::current()).unwrap();
        assert!(server.url().starts_with("http://127.0.0.1:"));
        server.push(json(200, r#"{"n":1}"#)).unwrap();
        let mut second = json(429, r#"{"n":2}"#);
        second.headers = vec![
            ("retry-after".into(), "3".into()),
            ("Content-Type".into(), "application/problem+json".into()),
        ];
        server.push(second).unwrap();
        assert_eq!(server.pending(), 2);

        let mut c1 = connect(&server).await;
        let r1 = roundtrip(
            &mut c1,
            "POST /v1/chat?x=1 HTTP/1.1\r\nHost: a\r\nX-Api-Key: k\r\nContent-Length: 5\r\n\r\nhello",
        )
        .await;
        assert_eq!(r1.status, 200);
        assert_eq!(r1.reason, "OK");
        assert_eq!(r1.body, br#"{"n":1}"#);
        assert_eq!(r1.header("content-type"), Some("application/json"));
        assert_eq!(r1.header("content-length"), Some("7"));

        // FIFO is shared across connections.
        let mut c2 = connect(&server).await;
        let r2 = roundtrip(&mut c2, "GET /two HTTP/1.1\r\nHost: a\r\n\r\n").await;
        assert_eq!(r2.status, 429);
        assert_eq!(r2.reason, "Too Many Requests");
        assert_eq!(r2.header("retry-after"), Some("3"));
        assert_eq!(r2.header("content-type"), Some("application/problem+json"));
        assert_eq!(r2.body, br#"{"n":2}"#);
        assert_eq!(server.pending(), 0);

        let reqs = server.requests();
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].method, "POST");
        assert_eq!(reqs[0].path, "/v1/chat?x=1");
        assert_eq!(
            reqs[0].headers,
            vec![
                ("host".to_string(), "a".to_string()),
                ("x-api-key".to_string(), "k".to_string()),
                ("content-length".to_string(), "5".to_string()),
            ]
        );
        assert_eq!(reqs[0].body, b"hello");
        assert_eq!(reqs[1].method, "GET");
        assert_eq!(reqs[1].path, "/two");
        assert!(reqs[1].body.is_empty());
    }

    #[tokio::test]
    async fn push_refuses_a_status_outside_100_to_599() {
        let server = MockServer::start(&Handle::current()).unwrap();
        for status in [0, 42, 99, 600, 999, u16::MAX] {
            assert_eq!(
                server.push(ScriptedResponse::new(status)),
                Err(PushError::InvalidStatus(status))
            );
        }
        assert_eq!(server.pending(), 0);
        for status in [100, 200, 429, 599] {
            server.push(ScriptedResponse::new(status)).unwrap();
        }
        assert_eq!(server.pending_statuses(), [100, 200, 429, 599]);
        assert_eq!(
            PushError::InvalidStatus(42).to_string(),
            "status must be an HTTP status code from 100 to 599, got 42"
        );
    }

    #[tokio::test]
    async fn push_after_close_is_refused() {
        let server = MockServer::start(&Handle::current()).unwrap();
        server.push(json(200, "{}")).unwrap();
        server.close();
        assert_eq!(server.push(json(200, "{}")), Err(PushError::Closed));
        assert_eq!(server.pending(), 1);
        assert!(PushError::Closed.to_string().contains("closed"));
    }

    #[tokio::test]
    async fn pending_statuses_follow_the_script() {
        let server = MockServer::start(&Handle::current()).unwrap();
        server.push(json(429, "{}")).unwrap();
        server.push(json(200, "{}")).unwrap();
        server.push(ScriptedResponse::new(503)).unwrap();
        assert_eq!(server.pending_statuses(), [429, 200, 503]);
        let mut c = connect(&server).await;
        let r = roundtrip(&mut c, "GET / HTTP/1.1\r\n\r\n").await;
        assert_eq!(r.status, 429);
        assert_eq!(server.pending_statuses(), [200, 503]);
    }

    #[test]
    fn start_from_outside_the_runtime() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = MockServer::start(rt.handle()).unwrap();
        server.push(json(503, r#"{"e":1}"#)).unwrap();
        let mut c = std::net::TcpStream::connect(server.addr).unwrap();
        c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        std::io::Write::write_all(&mut c, b"GET /sync HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut c, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{text}"
        );
        assert!(text.ends_with("\r\n\r\n{\"e\":1}"), "{text}");
        assert_eq!(server.requests()[0].path, "/sync");
        drop(server);
    }
}
