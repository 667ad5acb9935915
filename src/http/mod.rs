//! The HTTP transport: reqwest with rustls behind a small trait, one
//! connection pool per client. Every failure becomes an engine [`Failure`].

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::engine::{ErrorKind, Failure, Headers};

/// Responses larger than this are refused: no provider answers a chat call
/// with more, and a runaway body must not eat the process's memory.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct HttpRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// Header values never shown in any message (API keys).
    pub secret_headers: Vec<(String, String)>,
    /// Shared, so that a retry sends it again without copying it.
    pub body: bytes::Bytes,
}

#[derive(Clone, Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Headers,
    pub body: Vec<u8>,
}

pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<HttpResponse, Failure>> + Send + 'a>>;

/// Sends one request and reads the whole response within `timeout`.
pub trait Transport: Send + Sync {
    fn send<'a>(&'a self, request: &'a HttpRequest, timeout: Duration) -> SendFuture<'a>;
}

/// The reqwest transport.
#[derive(Clone, Debug)]
pub struct ReqwestTransport {
    client: reqwest::Client,
}

impl ReqwestTransport {
    pub fn new(connect_timeout: Duration) -> Result<Self, String> {
        // reqwest is built without a default crypto provider; ring is ours.
        // Installing twice is harmless (the second call reports it was set).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            // Following a redirect would carry the key to whatever host it names.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("failover/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {}", describe(&e)))?;
        Ok(Self { client })
    }

    async fn send_inner(&self, request: &HttpRequest) -> Result<HttpResponse, Failure> {
        let mut builder = self.client.post(&request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        for (name, value) in &request.secret_headers {
            let mut value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                Failure::without_response(
                    ErrorKind::BadRequest,
                    format!("the {name} header holds characters HTTP cannot carry"),
                )
            })?;
            value.set_sensitive(true);
            builder = builder.header(name, value);
        }
        let mut response = builder
            .body(request.body.clone())
            .send()
            .await
            .map_err(|e| Failure::without_response(kind_of(&e), describe(&e)))?;
        let status = response.status().as_u16();
        let mut headers = Headers::new();
        for (name, value) in response.headers() {
            headers.push(name.as_str(), &String::from_utf8_lossy(value.as_bytes()));
        }
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                        return Err(truncated(
                            status,
                            headers,
                            format!("response body over {MAX_RESPONSE_BYTES} bytes"),
                        ));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) if e.is_timeout() => {
                    return Err(Failure::without_response(ErrorKind::Timeout, describe(&e)));
                }
                Err(e) => {
                    return Err(truncated(
                        status,
                        headers,
                        format!("response body cut short: {}", describe(&e)),
                    ));
                }
            }
        }
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }
}

/// A body that broke off after the status line arrived: nothing reached the
/// caller, so it is retried and failed over like a server error.
fn truncated(status: u16, headers: Headers, message: String) -> Failure {
    Failure {
        kind: ErrorKind::ServerError,
        status: Some(status),
        headers,
        body: None,
        message,
        request_id: None,
    }
}

impl Transport for ReqwestTransport {
    fn send<'a>(&'a self, request: &'a HttpRequest, timeout: Duration) -> SendFuture<'a> {
        Box::pin(async move {
            match tokio::time::timeout(timeout, self.send_inner(request)).await {
                Ok(result) => result,
                Err(_) => Err(Failure::without_response(
                    ErrorKind::Timeout,
                    format!("no response within {:.3}s", timeout.as_secs_f64()),
                )),
            }
        })
    }
}

fn kind_of(error: &reqwest::Error) -> ErrorKind {
    if error.is_timeout() && !error.is_connect() {
        ErrorKind::Timeout
    } else if error.is_builder() {
        ErrorKind::BadRequest
    } else {
        ErrorKind::Connection
    }
}

/// The error and its causes, without the URL (which may carry a key).
fn describe(error: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut text = error.to_string();
    if let Some(idx) = text.find(" for url (") {
        text.truncate(idx);
    }
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
