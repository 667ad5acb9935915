//! HTTP/1.1 framing: parsing request heads, reading requests (`Content-Length`
//! bodies only), encoding responses and server-sent-event heads, reason phrases.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{RecordedRequest, ScriptedResponse};

/// Maximum size of a request head (request line plus headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Maximum number of request headers.
const MAX_HEADERS: usize = 128;
/// Maximum accepted request body size.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

// ---------------------------------------------------------------------------
// Request parsing

pub(super) enum Incoming {
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
pub(super) async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
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

pub(super) fn has_header(headers: &[(String, String)], name: &str) -> bool {
    headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
}

pub(super) fn wants_close(headers: &[(String, String)]) -> bool {
    header_has_token(headers, "connection", "close")
}

pub(super) async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Incoming {
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

pub(super) fn error_response(status: u16, message: &str, kind: &str) -> ScriptedResponse {
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
pub(super) fn body_len_sent(response: &ScriptedResponse, is_head: bool) -> usize {
    if is_head || bodiless_status(response.status) {
        0
    } else {
        response.body.len()
    }
}

pub(super) fn encode_head_and_body(
    response: &ScriptedResponse,
    is_head: bool,
    keep_alive: bool,
) -> Vec<u8> {
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

pub(super) fn encode_sse_head(response: &ScriptedResponse) -> Vec<u8> {
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
    use super::super::test_client::{
        connect, expect_no_bytes_then_end, json, read_response, roundtrip, sse,
    };
    use super::super::MockServer;
    use super::*;
    use tokio::runtime::Handle;

    #[tokio::test]
    async fn keep_alive_serves_several_requests() {
        let server = MockServer::start(&Handle::current()).unwrap();
        server.push(json(200, "{}")).unwrap();
        server.push(ScriptedResponse::new(529)).unwrap();
        server.push(json(201, "[]")).unwrap();
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
    async fn sse_streams_events_then_closes() {
        let server = MockServer::start(&Handle::current()).unwrap();
        server
            .push(sse(&["data: {\"a\":1}", "event: done\ndata: [DONE]"]))
            .unwrap();
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
}
