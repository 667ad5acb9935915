//! The accept loop, connection serving, and fault injection.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::http1::{
    body_len_sent, encode_head_and_body, encode_sse_head, error_response, read_request,
    wants_close, Incoming,
};
use super::{lock, Fault, ScriptedResponse, Shared};

/// How long a gracefully closed connection drains client bytes before dropping.
const LINGER_DRAIN: Duration = Duration::from_secs(1);

/// Resolves once shutdown is requested (or the server handle is gone).
async fn shutdown_requested(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|closed| *closed).await;
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Shared,
    mut shutdown: watch::Receiver<bool>,
) {
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
            state.in_flight += 1;
            state.max_in_flight = state.max_in_flight.max(state.in_flight);
            state
                .script
                .pop_front()
                .unwrap_or_else(|| error_response(500, &unscripted, "mock_unscripted"))
        };
        let answering = Answering(Arc::clone(&shared));
        let after = respond(&mut stream, response, is_head, client_keep_alive, &shared).await;
        drop(answering);
        match after {
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

/// A request being answered: counted in flight until dropped (its
/// response sent, or its connection gone).
struct Answering(Shared);

impl Drop for Answering {
    fn drop(&mut self) {
        let mut state = lock(&self.0);
        state.in_flight = state.in_flight.saturating_sub(1);
    }
}

async fn respond(
    stream: &mut TcpStream,
    response: ScriptedResponse,
    is_head: bool,
    client_keep_alive: bool,
    shared: &Shared,
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
        // Waiting, it listens: a client that closes its connection meanwhile
        // (a call cancelled) is seen leaving, and nothing is sent to it.
        let delay = tokio::time::sleep(response.delay);
        tokio::pin!(delay);
        let mut scratch = [0u8; 4096];
        loop {
            tokio::select! {
                () = &mut delay => break,
                read = stream.read(&mut scratch) => match read {
                    Ok(0) | Err(_) => {
                        lock(shared).left_early += 1;
                        return Ok(After::Drop);
                    }
                    // (An HTTP/1.1 client sends nothing while it waits.)
                    Ok(_) => {}
                },
            }
        }
    }
    let (cut, stall) = match response.fault {
        Some(Fault::Reset) => return Ok(After::Reset),
        Some(Fault::CutAfterEvents(n)) => (Some(n), None),
        Some(Fault::StallAfterEvents(n)) => (None, Some(n)),
        _ => (None, None),
    };

    // A stream: SSE events (each followed by a blank line) or raw pieces.
    let pieces: Option<Vec<Vec<u8>>> = match (&response.sse, &response.chunks) {
        (Some(events), _) => Some(
            events
                .iter()
                .map(|e| [e.as_bytes(), b"\n\n"].concat())
                .collect(),
        ),
        (None, Some(chunks)) => Some(chunks.clone()),
        (None, None) => None,
    };
    if let Some(pieces) = pieces {
        let raw = response.chunks.is_some() && response.sse.is_none();
        stream.write_all(&encode_sse_head(&response)).await?;
        stream.flush().await?;
        if !is_head {
            let limit = cut.or(stall).unwrap_or(usize::MAX);
            for (i, piece) in pieces.iter().take(limit).enumerate() {
                if i > 0 && !response.interval.is_zero() {
                    tokio::time::sleep(response.interval).await;
                } else if raw && i > 0 {
                    // Apart in time, so each is a read of its own.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                stream.write_all(piece).await?;
                stream.flush().await?;
            }
        }
        if stall.is_some() {
            // Send nothing more; keep the socket until the client leaves.
            let mut scratch = [0u8; 4096];
            loop {
                match stream.read(&mut scratch).await {
                    Ok(0) | Err(_) => return Ok(After::Drop),
                    Ok(_) => {}
                }
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

#[cfg(test)]
mod tests {
    use super::super::test_client::{
        connect, expect_no_bytes_then_end, json, roundtrip, sse, READ_TIMEOUT,
    };
    use super::super::MockServer;
    use super::*;
    use std::time::Instant;
    use tokio::runtime::Handle;

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
    async fn delay_is_applied() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = json(200, "{}");
        r.delay = Duration::from_millis(150);
        server.push(r).unwrap();
        let mut c = connect(&server).await;
        let start = Instant::now();
        let r = roundtrip(&mut c, "GET / HTTP/1.1\r\n\r\n").await;
        assert_eq!(r.status, 200);
        assert!(start.elapsed() >= Duration::from_millis(150));
    }

    #[tokio::test]
    async fn a_client_leaving_during_a_delay_is_counted() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = json(200, "{}");
        r.delay = Duration::from_secs(30);
        server.push(r).unwrap();
        let mut c = connect(&server).await;
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        while server.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(server.left_early(), 0);
        drop(c);
        let start = Instant::now();
        while server.left_early() == 0 {
            assert!(start.elapsed() < Duration::from_secs(5), "not seen leaving");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(server.left_early(), 1);
    }

    #[tokio::test]
    async fn reset_fault_sends_nothing() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = ScriptedResponse::new(200);
        r.fault = Some(Fault::Reset);
        server.push(r).unwrap();
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
        server.push(r).unwrap();
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
        server.push(r).unwrap();
        let mut c = connect(&server).await;
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(server);
        expect_no_bytes_then_end(&mut c).await;
    }

    #[tokio::test]
    async fn sse_cut_after_events_resets() {
        let server = MockServer::start(&Handle::current()).unwrap();
        let mut r = sse(&["data: 1", "data: 2", "data: 3"]);
        r.fault = Some(Fault::CutAfterEvents(2));
        server.push(r).unwrap();
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
        server.push(r).unwrap();
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
}
