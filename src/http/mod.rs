//! The HTTP transport: reqwest with rustls behind a small trait, one
//! connection pool per transport (a client makes one per runtime it runs
//! on). Every failure becomes an engine [`Failure`].

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
    /// What a provider could echo back of the credentials this request
    /// carries, longest first: removed from anything shown to the caller.
    pub secrets: Vec<String>,
    /// Shared, so that a retry sends it again without copying it.
    pub body: bytes::Bytes,
    /// A `multipart/form-data` body instead of `body` (a transcription's
    /// recording): its parts shared, the form built again for each attempt.
    pub form: Option<std::sync::Arc<[FormPart]>>,
}

/// One part of a `multipart/form-data` body.
#[derive(Clone, Debug)]
pub struct FormPart {
    pub name: String,
    /// A file's name and media type; `None` for a plain field.
    pub file: Option<(String, String)>,
    pub data: bytes::Bytes,
}

/// `parts` as a reqwest form (each attempt sends its own; the bytes are
/// shared, not copied).
fn multipart_form(parts: &[FormPart]) -> Result<reqwest::multipart::Form, Failure> {
    let mut form = reqwest::multipart::Form::new();
    for part in parts {
        let body = reqwest::Body::from(part.data.clone());
        let mut piece = reqwest::multipart::Part::stream_with_length(body, part.data.len() as u64);
        if let Some((filename, media_type)) = &part.file {
            piece = piece
                .file_name(filename.clone())
                .mime_str(media_type)
                .map_err(|_| {
                    Failure::without_response(
                        ErrorKind::BadRequest,
                        format!("{media_type:?} is not a media type"),
                    )
                })?;
        }
        form = form.part(part.name.clone(), piece);
    }
    Ok(form)
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

/// The environment variables the transport reads a proxy from, when no
/// `proxy` is given (Python checks the same list when a client is built:
/// `_native.PROXY_VARIABLES`).
pub const PROXY_VARIABLES: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// How a client reaches providers.
#[derive(Clone, Debug)]
pub struct TransportOptions {
    pub connect_timeout: Duration,
    /// Every request goes through this proxy; `None`: the usual proxy
    /// environment variables (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`,
    /// `NO_PROXY`) decide.
    pub proxy: Option<String>,
    pub verify: Verify,
    /// Offer HTTP/2 (negotiated over TLS); `false`: HTTP/1.1 only.
    pub http2: bool,
    /// Idle connections kept per host; `None`: no limit.
    pub max_idle_connections: Option<usize>,
}

impl TransportOptions {
    /// The proxies requests may go through: the one given, or those the
    /// environment names (their credentials are redacted from what a
    /// provider echoes).
    pub fn proxy_urls(&self) -> Vec<String> {
        match &self.proxy {
            Some(url) => vec![url.clone()],
            None => PROXY_VARIABLES
                .iter()
                .filter_map(|name| std::env::var(name).ok())
                .collect(),
        }
    }
}

impl Default for TransportOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            proxy: None,
            verify: Verify::System,
            http2: true,
            max_idle_connections: None,
        }
    }
}

/// How server certificates are checked.
#[derive(Clone, Debug)]
pub enum Verify {
    /// Against the system's trusted roots.
    System,
    /// Not at all (local development only).
    Off,
    /// Against these PEM roots only (a CA bundle file's contents).
    CaBundle(Vec<u8>),
}

/// The reqwest transport.
#[derive(Clone, Debug)]
pub struct ReqwestTransport {
    client: reqwest::Client,
    connect_timeout: Duration,
    /// `host:port` of the explicit proxy, for messages.
    proxy_host: Option<String>,
}

thread_local! {
    /// Whether a request was dropped on this thread before its answer was
    /// all read (a deadline, a hedge's loser, Ctrl-C): its connection's task
    /// must still run to close the socket, which a runtime driven only
    /// during calls (the sync face's) does at once only if told.
    static ABANDONED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a request was abandoned on this thread since the last ask.
pub fn take_abandoned() -> bool {
    ABANDONED.with(|abandoned| abandoned.replace(false))
}

/// Armed while a request is in flight: dropped armed, it notes that the
/// request was abandoned.
struct InFlight(bool);

impl InFlight {
    fn done(mut self) {
        self.0 = false;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0 {
            ABANDONED.with(|abandoned| abandoned.set(true));
        }
    }
}

impl ReqwestTransport {
    /// Fails, with a message for the caller, on an option reqwest refuses.
    pub fn new(options: &TransportOptions) -> Result<Self, String> {
        // reqwest is built without a default crypto provider; ring is ours.
        // Installing twice is harmless (the second call reports it was set).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            // Following a redirect would carry the key to whatever host it names.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("failover/", env!("CARGO_PKG_VERSION")));
        if let Some(url) = &options.proxy {
            let proxy = reqwest::Proxy::all(url.as_str())
                .map_err(|e| format!("proxy is not a usable proxy URL: {}", describe(&e)))?;
            builder = builder.proxy(proxy);
        }
        builder = match &options.verify {
            Verify::System => builder,
            Verify::Off => builder.tls_danger_accept_invalid_certs(true),
            Verify::CaBundle(pem) => {
                let roots = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                    format!("verify: the CA bundle cannot be read: {}", describe(&e))
                })?;
                if roots.is_empty() {
                    return Err("verify: the CA bundle holds no PEM certificate".into());
                }
                builder.tls_certs_only(roots)
            }
        };
        if !options.http2 {
            builder = builder.http1_only();
        }
        if let Some(max) = options.max_idle_connections {
            builder = builder.pool_max_idle_per_host(max);
        }
        let client = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {}", describe(&e)))?;
        Ok(Self {
            client,
            connect_timeout: options.connect_timeout,
            proxy_host: options.proxy.as_deref().map(host_of),
        })
    }

    async fn send_inner(&self, request: &HttpRequest) -> Result<HttpResponse, Failure> {
        let in_flight = InFlight(true);
        let (response, status, headers) = self.start(request).await?;
        let read = read_body(response, status, headers, &request.url).await;
        in_flight.done();
        read
    }

    /// Sends the request and waits for the response head.
    async fn start(
        &self,
        request: &HttpRequest,
    ) -> Result<(reqwest::Response, u16, Headers), Failure> {
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
        builder = match &request.form {
            Some(parts) => builder.multipart(multipart_form(parts)?),
            None => builder.body(request.body.clone()),
        };
        let response = builder
            .send()
            .await
            .map_err(|e| self.send_failure(&e, &request.url))?;
        let status = response.status().as_u16();
        let mut headers = Headers::new();
        for (name, value) in response.headers() {
            headers.push(name.as_str(), &String::from_utf8_lossy(value.as_bytes()));
        }
        Ok((response, status, headers))
    }

    /// Sends a request whose answer is read as it arrives: the head within
    /// `timeout`; a 2xx body then piece by piece (the caller times each
    /// piece), any other status's body whole, for its error.
    pub async fn open(&self, request: &HttpRequest, timeout: Duration) -> Result<Opened, Failure> {
        let opened = async {
            let in_flight = InFlight(true);
            let started = self.start(request).await;
            in_flight.done();
            let (response, status, headers) = started?;
            if (200..300).contains(&status) {
                return Ok(Opened::Streaming {
                    status,
                    headers,
                    body: BodyStream {
                        response,
                        host: host_of(&request.url),
                    },
                });
            }
            read_body(response, status, headers, &request.url)
                .await
                .map(Opened::Whole)
        };
        match tokio::time::timeout(timeout, opened).await {
            Ok(result) => result,
            Err(_) => Err(no_response_within(request, timeout)),
        }
    }
}

/// An answer opened for streaming.
pub enum Opened {
    /// A 2xx: its body is read piece by piece.
    Streaming {
        status: u16,
        headers: Headers,
        body: BodyStream,
    },
    /// Any other status, read whole (an error to classify).
    Whole(HttpResponse),
}

/// A response body read as it arrives. Dropping it closes the connection.
pub struct BodyStream {
    response: reqwest::Response,
    host: String,
}

impl BodyStream {
    /// The next piece of the body; `None` at its end.
    pub async fn next(&mut self) -> Result<Option<bytes::Bytes>, Failure> {
        self.response.chunk().await.map_err(|e| {
            Failure::without_response(
                ErrorKind::Connection,
                format!("the stream from {} was cut: {}", self.host, describe(&e)),
            )
        })
    }

    /// The host it comes from, for messages.
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// Reads a whole body (up to [`MAX_RESPONSE_BYTES`]).
async fn read_body(
    mut response: reqwest::Response,
    status: u16,
    headers: Headers,
    url: &str,
) -> Result<HttpResponse, Failure> {
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
                let host = host_of(url);
                let message = format!("{host} stopped sending the response: {}", describe(&e));
                return Err(Failure::without_response(ErrorKind::Timeout, message));
            }
            Err(e) => {
                return Err(truncated(
                    status,
                    headers,
                    format!(
                        "the response body from {} was cut short: {}",
                        host_of(url),
                        describe(&e)
                    ),
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
        out_of_time: false,
        cut_short: true,
        usage: None,
        // Cut after the status line: what was generated cannot be known.
        billed: None,
    }
}

impl ReqwestTransport {
    /// A request that got no response, in words that name the host and
    /// never the URL's path or query (which may carry a key).
    fn send_failure(&self, error: &reqwest::Error, url: &str) -> Failure {
        let host = match &self.proxy_host {
            Some(proxy) => format!("{} via the proxy {proxy}", host_of(url)),
            None => host_of(url),
        };
        let (kind, message) = if error.is_timeout() && error.is_connect() {
            let secs = self.connect_timeout.as_secs_f64();
            let message = format!("no connection to {host} within {secs}s (connect_timeout)");
            (ErrorKind::Timeout, message)
        } else if error.is_timeout() {
            (ErrorKind::Timeout, format!("no response from {host}"))
        } else if describe(error).contains("proxy authorization required") {
            // The proxy answered a CONNECT with 407: every provider behind it
            // would get the same, so this is no outage to retry.
            let message = format!(
                "cannot connect to {host}: the proxy asked for credentials (407): check \
                 proxy= or the HTTPS_PROXY/HTTP_PROXY/ALL_PROXY variables"
            );
            (ErrorKind::BadRequest, message)
        } else if error.is_builder() {
            let message = format!("cannot send a request to {host}: {}", describe(error));
            (ErrorKind::BadRequest, message)
        } else if error.is_connect() {
            let message = format!("cannot connect to {host}: {}", root_cause(error));
            (ErrorKind::Connection, message)
        } else {
            let message = format!(
                "the connection to {host} failed before a response: {}",
                describe(error)
            );
            (ErrorKind::Connection, message)
        };
        // No connection made (a connect timeout included), a request that
        // could not be built, a proxy that refused: nothing reached the
        // provider, so nothing is billed; after that, it cannot be known.
        let sent = !(error.is_connect() || error.is_builder() || kind == ErrorKind::BadRequest);
        Failure {
            billed: (!sent).then_some(false),
            ..Failure::without_response(kind, message)
        }
    }
}

impl ReqwestTransport {
    /// A GET of `url` with no credential (a file a provider's answer
    /// links to, on whatever host), read whole within `timeout`.
    pub async fn fetch(&self, url: &str, timeout: Duration) -> Result<HttpResponse, Failure> {
        let fetched = async {
            let response = self
                .client
                .get(url)
                .send()
                .await
                .map_err(|e| self.send_failure(&e, url))?;
            let status = response.status().as_u16();
            let mut headers = Headers::new();
            for (name, value) in response.headers() {
                headers.push(name.as_str(), &String::from_utf8_lossy(value.as_bytes()));
            }
            read_body(response, status, headers, url).await
        };
        match tokio::time::timeout(timeout, fetched).await {
            Ok(result) => result,
            Err(_) => Err(Failure::without_response(
                ErrorKind::Timeout,
                format!(
                    "no response from {} within {:.3}s",
                    host_of(url),
                    timeout.as_secs_f64()
                ),
            )),
        }
    }
}

impl Transport for ReqwestTransport {
    fn send<'a>(&'a self, request: &'a HttpRequest, timeout: Duration) -> SendFuture<'a> {
        Box::pin(async move {
            match tokio::time::timeout(timeout, self.send_inner(request)).await {
                Ok(result) => result,
                Err(_) => Err(no_response_within(request, timeout)),
            }
        })
    }
}

/// The attempt's own timeout ran out: the provider's failure (the engine's
/// deadline is another bound, applied by the caller).
fn no_response_within(request: &HttpRequest, timeout: Duration) -> Failure {
    Failure::without_response(
        ErrorKind::Timeout,
        format!(
            "no response from {} within {:.3}s",
            host_of(&request.url),
            timeout.as_secs_f64()
        ),
    )
}

/// `host:port` of a URL, for messages: never its user part, path or query.
pub fn host_of(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => {
            let host = u.host_str().unwrap_or("?");
            match u.port_or_known_default() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_string(),
            }
        }
        Err(_) => "the provider's host".to_string(),
    }
}

/// The innermost cause, which says what happened ("Connection refused (os
/// error 111)", "invalid peer certificate: UnknownIssuer") without the
/// layers of wrapping; never the URL.
fn root_cause(error: &reqwest::Error) -> String {
    let mut source = std::error::Error::source(error);
    let mut innermost = None;
    while let Some(cause) = source {
        innermost = Some(cause);
        source = cause.source();
    }
    innermost.map_or_else(|| describe(error), ToString::to_string)
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
