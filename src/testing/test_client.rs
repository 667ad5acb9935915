//! A minimal raw-socket HTTP/1.1 client for the unit tests of this module.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::http1::read_more;
use super::{MockServer, ScriptedResponse};

pub(super) const READ_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) struct Response {
    pub(super) status: u16,
    pub(super) reason: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
}

impl Response {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub(super) async fn connect(server: &MockServer) -> TcpStream {
    TcpStream::connect(server.addr).await.expect("connect")
}

/// Reads one response framed by Content-Length, or to EOF if absent.
/// Leftover bytes stay in `buf`.
pub(super) async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Response {
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

pub(super) async fn roundtrip(stream: &mut TcpStream, raw: &str) -> Response {
    stream.write_all(raw.as_bytes()).await.expect("write");
    read_response(stream, &mut Vec::new()).await
}

pub(super) fn json(status: u16, body: &str) -> ScriptedResponse {
    let mut r = ScriptedResponse::new(status);
    r.body = body.as_bytes().to_vec();
    r
}

/// Expects the peer to end the connection with no further bytes (EOF or error).
pub(super) async fn expect_no_bytes_then_end(stream: &mut TcpStream) {
    let mut scratch = [0u8; 1024];
    let res = tokio::time::timeout(READ_TIMEOUT, stream.read(&mut scratch))
        .await
        .expect("connection should end in time");
    match res {
        Ok(0) | Err(_) => {}
        Ok(n) => panic!("unexpected {n} bytes: {:?}", &scratch[..n]),
    }
}

pub(super) fn sse(events: &[&str]) -> ScriptedResponse {
    let mut r = ScriptedResponse::new(200);
    r.sse = Some(events.iter().map(|e| e.to_string()).collect());
    r
}
