//! A scripted HTTP/1.1 test server bound to `127.0.0.1`.
//!
//! Tests push [`ScriptedResponse`]s into a FIFO shared by all connections;
//! every incoming request is recorded (see [`MockServer::requests`]) and
//! answered with the next scripted response, or with a `500` JSON error of
//! type `mock_unscripted` when the script is exhausted. Responses can be
//! delayed, streamed as server-sent events, or replaced by a [`Fault`]
//! (connection reset, hang, stream cut short).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Maximum size of a request head (request line plus headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Maximum number of request headers.
const MAX_HEADERS: usize = 128;
/// Maximum accepted request body size.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// How long a gracefully closed connection drains client bytes before dropping.
const LINGER_DRAIN: Duration = Duration::from_secs(1);

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
    /// Real time to wait before sending anything.
    pub delay: Duration,
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
            delay: Duration::ZERO,
            fault: None,
        }
    }
}

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
        handle.spawn(accept_loop(listener, Arc::clone(&shared), shutdown_rx));
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
    pub fn push(&self, response: ScriptedResponse) {
        lock(&self.shared).script.push_back(response);
    }

    /// All requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared).requests.clone()
    }

    /// Number of scripted responses not yet served.
    pub fn pending(&self) -> usize {
        lock(&self.shared).script.len()
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

/// Resolves once shutdown is requested (or the server handle is gone).
async fn shutdown_requested(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|closed| *closed).await;
}

async fn accept_loop(listener: TcpListener, shared: Shared, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            biased;
            _ = shutdown_requested(&mut shutdown) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let shared = Arc::clone(&shared);
                    let mut rx = shutdown.clone();
                    tokio::spawn(async move {
                        tokio::select! {
                            biased;
                            _ = shutdown_requested(&mut rx) => {}
                            _ = serve_connection(stream, shared) => {}
                        }
                    });
                }
                // E.g. EMFILE: back off briefly instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
}

/// What to do with the connection after a response.
enum After {
    /// Read the next request.
    KeepAlive,
    /// Graceful close (FIN, then drain).
    Close,
    /// Abortive close (RST).
    Reset,
    /// Just drop the socket.
    Drop,
}

async fn serve_connection(mut stream: TcpStream, shared: Shared) {
    let mut buf = Vec::new();
    loop {
        let (request, client_keep_alive) = match read_request(&mut stream, &mut buf).await {
            Incoming::Request(request, keep_alive) => (request, keep_alive),
            Incoming::Closed => return,
            Incoming::Bad(message) => {
                let response = error_response(400, &message, "mock_bad_request");
                let bytes = encode_head_and_body(&response, false, false);
                if stream.write_all(&bytes).await.is_ok() {
                    lingering_close(stream).await;
                }
                return;
            }
        };
        let is_head = request.method.eq_ignore_ascii_case("HEAD");
        let response = {
            let mut state = lock(&shared);
            let unscripted = format!(
                "MockServer: no scripted response for {} {}",
                request.method, request.path
            );
            state.requests.push(request);
            state
                .script
                .pop_front()
                .unwrap_or_else(|| error_response(500, &unscripted, "mock_unscripted"))
        };
        match respond(&mut stream, response, is_head, client_keep_alive).await {
            Ok(After::KeepAlive) => continue,
            Ok(After::Close) => {
                lingering_close(stream).await;
                return;
            }
            Ok(After::Reset) => {
                let _ = stream.set_zero_linger();
                return;
            }
            Ok(After::Drop) | Err(_) => return,
        }
    }
}

async fn respond(
    stream: &mut TcpStream,
    response: ScriptedResponse,
    is_head: bool,
    client_keep_alive: bool,
) -> io::Result<After> {
    if response.fault == Some(Fault::Hang) {
        // Never answer; keep the socket until the client leaves or shutdown.
        let mut scratch = [0u8; 4096];
        loop {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => return Ok(After::Drop),
                Ok(_) => {}
            }
        }
    }
    if !response.delay.is_zero() {
        tokio::time::sleep(response.delay).await;
    }
    let cut = match response.fault {
        Some(Fault::Reset) => return Ok(After::Reset),
        Some(Fault::CutAfterEvents(n)) => Some(n),
        _ => None,
    };

    if let Some(events) = &response.sse {
        stream.write_all(&encode_sse_head(&response)).await?;
        stream.flush().await?;
        if !is_head {
            for event in events.iter().take(cut.unwrap_or(usize::MAX)) {
                let mut chunk = Vec::with_capacity(event.len() + 2);
                chunk.extend_from_slice(event.as_bytes());
                chunk.extend_from_slice(b"\n\n");
                stream.write_all(&chunk).await?;
                stream.flush().await?;
            }
        }
        return Ok(if cut.is_some() {
            After::Reset
        } else {
            After::Close
        });
    }

    let keep_alive = client_keep_alive && !wants_close(&response.headers);
    let mut bytes = encode_head_and_body(&response, is_head, keep_alive);
    if let Some(n) = cut {
        let head_len = bytes.len() - body_len_sent(&response, is_head);
        bytes.truncate(head_len + n.min(bytes.len() - head_len));
    }
    stream.write_all(&bytes).await?;
    stream.flush().await?;
    Ok(if cut.is_some() {
        After::Reset
    } else if keep_alive {
        After::KeepAlive
    } else {
        After::Close
    })
}

/// Half-closes, then drains what the client still sends (bounded), so that the
/// final drop does not turn into a reset that could discard the response.
async fn lingering_close(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut scratch = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER_DRAIN, async {
        loop {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------
// Request parsing

enum Incoming {
    /// A complete request, and whether the client allows keep-alive.
    Request(RecordedRequest, bool),
    /// The client closed (or errored) before a complete request.
    Closed,
    /// The request is malformed or unsupported; answer 400 and close.
    Bad(String),
}

struct Head {
    method: String,
    path: String,
    version: u8,
    headers: Vec<(String, String)>,
}

fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let head = Head {
                method: req.method.unwrap_or_default().to_string(),
                path: req.path.unwrap_or_default().to_string(),
                version: req.version.unwrap_or(1),
                headers: req
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect(),
            };
            Ok(Some((head, len)))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(format!("malformed request: {e}")),
    }
}

/// Reads more bytes into `buf`; `Ok(0)` means EOF.
async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

fn header_has_token(headers: &[(String, String)], name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

fn has_header(headers: &[(String, String)], name: &str) -> bool {
    headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
}

fn wants_close(headers: &[(String, String)]) -> bool {
    header_has_token(headers, "connection", "close")
}

async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Incoming {
    // Head.
    let head = loop {
        if !buf.is_empty() {
            match parse_head(buf) {
                Ok(Some((head, len))) => {
                    buf.drain(..len);
                    break head;
                }
                Ok(None) => {}
                Err(message) => return Incoming::Bad(message),
            }
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Incoming::Bad("request head too large".to_string());
        }
        match read_more(stream, buf).await {
            Ok(0) | Err(_) => return Incoming::Closed,
            Ok(_) => {}
        }
    };

    // Body framing: Content-Length only.
    if has_header(&head.headers, "transfer-encoding") {
        return Incoming::Bad("chunked request bodies are not supported".to_string());
    }
    let mut content_length: Option<usize> = None;
    for (_, value) in head.headers.iter().filter(|(n, _)| n == "content-length") {
        match value.trim().parse::<usize>() {
            Ok(len) if content_length.is_none_or(|prev| prev == len) => content_length = Some(len),
            _ => return Incoming::Bad("invalid content-length".to_string()),
        }
    }
    let content_length = content_length.unwrap_or(0);
    if content_length > MAX_BODY_BYTES {
        return Incoming::Bad("request body too large".to_string());
    }

    // Body.
    if buf.len() < content_length
        && header_has_token(&head.headers, "expect", "100-continue")
        && stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .is_err()
    {
        return Incoming::Closed;
    }
    while buf.len() < content_length {
        match read_more(stream, buf).await {
            Ok(0) | Err(_) => return Incoming::Closed,
            Ok(_) => {}
        }
    }
    let body: Vec<u8> = buf.drain(..content_length).collect();

    let keep_alive = if head.version >= 1 {
        !wants_close(&head.headers)
    } else {
        header_has_token(&head.headers, "connection", "keep-alive")
    };
    Incoming::Request(
        RecordedRequest {
            method: head.method,
            path: head.path,
            headers: head.headers,
            body,
        },
        keep_alive,
    )
}

// ---------------------------------------------------------------------------
// Response encoding

fn error_response(status: u16, message: &str, kind: &str) -> ScriptedResponse {
    let body = serde_json::json!({ "error": { "message": message, "type": kind } });
    let mut response = ScriptedResponse::new(status);
    response.headers = vec![("content-type".into(), "application/json".into())];
    response.body = body.to_string().into_bytes();
    response
}

/// Standard reason phrase for `status` (`"Unknown"` for unregistered codes).
fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        418 => "I'm a teapot",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        423 => "Locked",
        424 => "Failed Dependency",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        507 => "Insufficient Storage",
        508 => "Loop Detected",
        511 => "Network Authentication Required",
        520 => "Unknown Error",
        521 => "Web Server Is Down",
        522 => "Connection Timed Out",
        523 => "Origin Is Unreachable",
        524 => "A Timeout Occurred",
        529 => "Overloaded",
        _ => "Unknown",
    }
}

fn push_header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn push_status_and_headers(out: &mut Vec<u8>, response: &ScriptedResponse) {
    out.extend_from_slice(
        format!(
            "HTTP/1.1 {} {}\r\n",
            response.status,
            reason_phrase(response.status)
        )
        .as_bytes(),
    );
    for (name, value) in &response.headers {
        push_header(out, name, value);
    }
}

/// Whether the status forbids a body (and a `Content-Length`).
fn bodiless_status(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

/// Number of body bytes `encode_head_and_body` appends.
fn body_len_sent(response: &ScriptedResponse, is_head: bool) -> usize {
    if is_head || bodiless_status(response.status) {
        0
    } else {
        response.body.len()
    }
}

fn encode_head_and_body(response: &ScriptedResponse, is_head: bool, keep_alive: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + response.body.len());
    push_status_and_headers(&mut out, response);
    if !bodiless_status(response.status) {
        if !has_header(&response.headers, "content-length") {
            push_header(&mut out, "content-length", &response.body.len().to_string());
        }
        if !response.body.is_empty() && !has_header(&response.headers, "content-type") {
            push_header(&mut out, "content-type", "application/json");
        }
    }
    if !keep_alive && !has_header(&response.headers, "connection") {
        push_header(&mut out, "connection", "close");
    }
    out.extend_from_slice(b"\r\n");
    let body_len = body_len_sent(response, is_head);
    out.extend_from_slice(&response.body[..body_len]);
    out
}

fn encode_sse_head(response: &ScriptedResponse) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    push_status_and_headers(&mut out, response);
    if !has_header(&response.headers, "content-type") {
        push_header(&mut out, "content-type", "text/event-stream");
    }
    if !has_header(&response.headers, "cache-control") {
        push_header(&mut out, "cache-control", "no-cache");
    }
    if !has_header(&response.headers, "connection") {
        push_header(&mut out, "connection", "close");
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tokio::runtime::Handle;

    const READ_TIMEOUT: Duration = Duration::from_secs(2);

    struct Response {
        status: u16,
        reason: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Response {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    async fn connect(server: &MockServer) -> TcpStream {
        TcpStream::connect(server.addr).await.expect("connect")
    }

    /// Reads one response framed by Content-Length, or to EOF if absent.
    /// Leftover bytes stay in `buf`.
    async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Response {
        tokio::time::timeout(READ_TIMEOUT, async {
            loop {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut resp = httparse::Response::new(&mut headers);
                if let httparse::Status::Complete(len) = resp.parse(buf).expect("valid response") {
                    let status = resp.code.expect("code");
                    let reason = resp.reason.unwrap_or_default().to_string();
                    let headers: Vec<(String, String)> = resp
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_ascii_lowercase(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect();
                    buf.drain(..len);
                    let content_length = headers
                        .iter()
                        .find(|(n, _)| n == "content-length")
                        .map(|(_, v)| v.parse::<usize>().expect("content-length"));
                    match content_length {
                        Some(cl) => {
                            while buf.len() < cl {
                                let n = read_more(stream, buf).await.expect("read body");
                                assert!(n > 0, "EOF in body");
                            }
                        }
                        None => while read_more(stream, buf).await.expect("read body") > 0 {},
                    }
                    let cl = content_length.unwrap_or(buf.len());
                    let body = buf.drain(..cl).collect();
                    return Response {
                        status,
                        reason,
                        headers,
                        body,
                    };
                }
                let n = read_more(stream, buf).await.expect("read head");
                assert!(n > 0, "EOF before response head");
            }
        })
        .await
        .expect("response in time")
    }

    async fn roundtrip(stream: &mut TcpStream, raw: &str) -> Response {
        stream.write_all(raw.as_bytes()).await.expect("write");
        read_response(stream, &mut Vec::new()).await
    }

    fn json(status: u16, body: &str) -> ScriptedResponse {
        let mut r = ScriptedResponse::new(status);
        r.body = body.as_bytes().to_vec();
        r
    }

    /// Expects the peer to end the connection with no further bytes (EOF or error).
    async fn expect_no_bytes_then_end(stream: &mut TcpStream) {
        let mut scratch = [0u8; 1024];
        let res = tokio::time::timeout(READ_TIMEOUT, stream.read(&mut scratch))
            .await
            .expect("connection should end in time");
        match res {
            Ok(0) | Err(_) => {}
            Ok(n) => panic!("unexpected {n} bytes: {:?}", &scratch[..n]),
        }
    }

    #[tokio::test]
    async fn fifo_order_and_recording() {
        let server = MockServer::start(&Handle::current()).unwrap();
        assert!(server.url().starts_with("http://127.0.0.1:"));
        server.push(json(200, r#"{"n":1}"#));
        let mut second = json(429, r#"{"n":2}"#);
        second.headers = vec![
            ("retry-after".into(), "3".into()),
            ("Content-Type".into(), "application/problem+json".into()),
        ];
        server.push(second);
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
    async fn keep_alive_serves_several_requests() {
        let server = MockServer::start(&Handle::current()).unwrap();
        server.push(json(200, "{}"));
        server.push(ScriptedResponse::new(529));
        server.push(json(201, "[]"));
        let mut c = connect(&server).await;
        let mut buf = Vec::new();
        c.write_all(b"POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nab")
            .await
            .unwrap();
        let r = read_response(&mut c, &mut buf).await;
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        c.write_all(b"GET /b HTTP/1.1\r\n\r\n").await.unwrap();
        let r = read_response(&mut c, &mut buf).await;
        assert_eq!(r.status, 529);
        assert!(!r.reason.is_empty());
        assert_eq!(r.header("content-length"), Some("0"));
        assert_eq!(r.header("content-type"), None);
        // Pipelined in a single write, with the last one asking to close.
        c.write_all(b"GET /c HTTP/1.1\r\n\r\nGET /d HTTP/1.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let r = read_response(&mut c, &mut buf).await;
        assert_eq!(r.status, 201);
        let r = read_response(&mut c, &mut buf).await;
        assert_eq!(r.status, 500);
        assert_eq!(r.header("connection"), Some("close"));
        expect_no_bytes_then_end(&mut c).await;
        let paths: Vec<_> = server.requests().into_iter().map(|r| r.path).collect();
        assert_eq!(paths, ["/a", "/b", "/c", "/d"]);
    }

    #[tokio::test]
    async fn unscripted_request_gets_500() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut c = connect(&server).await;
        let r = roundtrip(&mut c, "DELETE /x?y=z HTTP/1.1\r\n\r\n").await;
        assert_eq!(r.status, 500);
        assert_eq!(r.reason, "Internal Server Error");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": {
                "message": "MockServer: no scripted response for DELETE /x?y=z",
                "type": "mock_unscripted"
            }})
        );
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn malformed_and_chunked_requests_get_400() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut c = connect(&server).await;
        let r = roundtrip(&mut c, "NOT HTTP AT ALL\r\n\r\n").await;
        assert_eq!(r.status, 400);
        expect_no_bytes_then_end(&mut c).await;

        let mut c = connect(&server).await;
        let r = roundtrip(
            &mut c,
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        )
        .await;
        assert_eq!(r.status, 400);
        expect_no_bytes_then_end(&mut c).await;
        assert!(server.requests().is_empty());
    }

    #[tokio::test]
    async fn delay_is_applied() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = json(200, "{}");
        r.delay = Duration::from_millis(150);
        server.push(r);
        let mut c = connect(&server).await;
        let start = Instant::now();
        let r = roundtrip(&mut c, "GET / HTTP/1.1\r\n\r\n").await;
        assert_eq!(r.status, 200);
        assert!(start.elapsed() >= Duration::from_millis(150));
    }

    #[tokio::test]
    async fn reset_fault_sends_nothing() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = ScriptedResponse::new(200);
        r.fault = Some(Fault::Reset);
        server.push(r);
        let mut c = connect(&server).await;
        c.write_all(b"POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx")
            .await
            .unwrap();
        expect_no_bytes_then_end(&mut c).await;
        assert_eq!(server.requests().len(), 1);
        assert_eq!(server.pending(), 0);
    }

    #[tokio::test]
    async fn hang_fault_until_close() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = json(200, "{}");
        r.fault = Some(Fault::Hang);
        server.push(r);
        let mut c = connect(&server).await;
        c.write_all(b"GET /hang HTTP/1.1\r\n\r\n").await.unwrap();
        let mut scratch = [0u8; 64];
        let waited = tokio::time::timeout(Duration::from_millis(200), c.read(&mut scratch)).await;
        assert!(waited.is_err(), "hanging request must not be answered");
        assert_eq!(server.requests().len(), 1);
        server.close();
        server.close(); // idempotent
        expect_no_bytes_then_end(&mut c).await;
        // No longer accepting: connecting fails or the connection is closed at once.
        if let Ok(mut c) = TcpStream::connect(server.addr).await {
            let _ = c.write_all(b"GET / HTTP/1.1\r\n\r\n").await;
            expect_no_bytes_then_end(&mut c).await;
        }
    }

    #[tokio::test]
    async fn drop_ends_hanging_connection() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = ScriptedResponse::new(200);
        r.fault = Some(Fault::Hang);
        server.push(r);
        let mut c = connect(&server).await;
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(server);
        expect_no_bytes_then_end(&mut c).await;
    }

    fn sse(events: &[&str]) -> ScriptedResponse {
        let mut r = ScriptedResponse::new(200);
        r.sse = Some(events.iter().map(|e| e.to_string()).collect());
        r
    }

    #[tokio::test]
    async fn sse_streams_events_then_closes() {
        let server = MockServer::start(&Handle::current()).unwrap();
        server.push(sse(&["data: {\"a\":1}", "event: done\ndata: [DONE]"]));
        let mut c = connect(&server).await;
        let r = roundtrip(&mut c, "POST /stream HTTP/1.1\r\nContent-Length: 0\r\n\r\n").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        assert_eq!(r.header("connection"), Some("close"));
        assert_eq!(r.header("content-length"), None);
        assert_eq!(
            String::from_utf8(r.body).unwrap(),
            "data: {\"a\":1}\n\nevent: done\ndata: [DONE]\n\n"
        );
    }

    #[tokio::test]
    async fn sse_cut_after_events_resets() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = sse(&["data: 1", "data: 2", "data: 3"]);
        r.fault = Some(Fault::CutAfterEvents(2));
        server.push(r);
        let mut c = connect(&server).await;
        c.write_all(b"GET /s HTTP/1.1\r\n\r\n").await.unwrap();
        // Let the reset arrive before reading: delivered data must stay readable.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut got = Vec::new();
        let mut scratch = [0u8; 1024];
        let ended_abruptly = tokio::time::timeout(READ_TIMEOUT, async {
            loop {
                match c.read(&mut scratch).await {
                    Ok(0) => return false,
                    Ok(n) => got.extend_from_slice(&scratch[..n]),
                    Err(_) => return true,
                }
            }
        })
        .await
        .expect("stream should end in time");
        assert!(ended_abruptly, "expected a reset, not a clean EOF");
        let text = String::from_utf8(got).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\ndata: 1\n\ndata: 2\n\n"), "{text}");
    }

    #[tokio::test]
    async fn non_sse_cut_truncates_body() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = json(200, "0123456789");
        r.fault = Some(Fault::CutAfterEvents(4));
        server.push(r);
        let mut c = connect(&server).await;
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut got = Vec::new();
        let mut scratch = [0u8; 1024];
        tokio::time::timeout(READ_TIMEOUT, async {
            while let Ok(n @ 1..) = c.read(&mut scratch).await {
                got.extend_from_slice(&scratch[..n]);
            }
        })
        .await
        .expect("stream should end in time");
        let text = String::from_utf8(got).unwrap();
        assert!(text.contains("content-length: 10\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n0123"), "{text}");
    }

    #[test]
    fn start_from_outside_the_runtime() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = MockServer::start(rt.handle()).unwrap();
        server.push(json(503, r#"{"e":1}"#));
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
