//! The benchmark's floor (bench/README.md): what one chat call costs with nothing but reqwest
//! and tokio, and the loopback server every contender of `bench/run.py` talks to.
//!
//!     failover-bench-floor serve [--port P] [--max-seconds S]
//!     failover-bench-floor client --url URL [--wire openai|anthropic] [--runtime current|multi]
//!                                 [--n N] [--warmup W] [--concurrency C]
//!
//! `serve` prints its port on stdout and answers until its stdin closes (so it ends with the
//! process that started it) or `--max-seconds` pass. `client` prints one JSON object.

use std::collections::HashMap;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The answers MockServer.push_text("Hello") gives on each wire (python/failover/testing.py),
/// byte for byte the JSON `json.dumps` makes of them, so every table parses the same body.
const OPENAI_BODY: &str = concat!(
    r#"{"id": "chatcmpl-mock", "object": "chat.completion", "created": 1767967901, "#,
    r#""model": "gpt-4.1-mini-2025-04-14", "choices": [{"index": 0, "message": "#,
    r#"{"role": "assistant", "content": "Hello", "refusal": null}, "logprobs": null, "#,
    r#""finish_reason": "stop"}], "usage": {"prompt_tokens": 12, "completion_tokens": 1, "#,
    r#""total_tokens": 13, "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0}, "#,
    r#""completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}}"#
);
const ANTHROPIC_BODY: &str = concat!(
    r#"{"id": "msg_mock", "type": "message", "role": "assistant", "#,
    r#""model": "claude-haiku-4-5-20251001", "content": [{"type": "text", "text": "Hello"}], "#,
    r#""stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens": 12, "#,
    r#""output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}"#
);
const TEXT: &str = "Hello";

/// The largest request head the server reads before it gives up on a connection.
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("serve") => options(&args[1..]).and_then(|o| serve(&o)),
        Some("client") => options(&args[1..]).and_then(|o| client(&o)),
        _ => Err("usage: failover-bench-floor serve|client [--option value ...]".into()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("failover-bench-floor: {message}");
            ExitCode::FAILURE
        }
    }
}

type Options = HashMap<String, String>;

/// `--name value` pairs.
fn options(args: &[String]) -> Result<Options, String> {
    let mut found = Options::new();
    let mut rest = args.iter();
    while let Some(name) = rest.next() {
        let key = name
            .strip_prefix("--")
            .ok_or_else(|| format!("expected --option, got {name:?}"))?;
        let value = rest.next().ok_or_else(|| format!("{name} needs a value"))?;
        found.insert(key.to_owned(), value.clone());
    }
    Ok(found)
}

fn number<T: std::str::FromStr>(options: &Options, name: &str, default: T) -> Result<T, String> {
    match options.get(name) {
        None => Ok(default),
        Some(text) => text
            .parse()
            .map_err(|_| format!("--{name} must be a number, got {text:?}")),
    }
}

// ------------------------------------------------------------------------------------------
// The server

/// Requests answered and connections accepted, reported by `GET /__floor/stats` so the
/// benchmark can check that a contender made its calls, on kept-alive connections.
static REQUESTS: AtomicU64 = AtomicU64::new(0);
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// One thread: the server takes at most one core of the two, and an event loop answering
/// canned bytes is far faster (>100k requests/s) than any client it serves.
fn serve(options: &Options) -> Result<(), String> {
    let port: u16 = number(options, "port", 0)?;
    let lifetime = Duration::from_secs(number(options, "max-seconds", 3600)?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        let mut stdout = std::io::stdout();
        writeln!(stdout, "{}", bound.port())
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("cannot print the port: {e}"))?;
        let answers = Arc::new(Answers::new());
        let parent_gone = wait_for_stdin_eof();
        tokio::pin!(parent_gone);
        let deadline = tokio::time::sleep(lifetime);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    // A failed accept (too many open files, a reset) ends that one only.
                    if let Ok((stream, _)) = accepted {
                        CONNECTIONS.fetch_add(1, Ordering::Relaxed);
                        tokio::spawn(connection(stream, Arc::clone(&answers)));
                    }
                }
                () = &mut parent_gone => return Ok(()),
                () = &mut deadline => return Ok(()),
            }
        }
    })
}

/// Resolves when stdin reaches its end: the benchmark holds the write end of the pipe, so
/// this fires when it closes it or dies. A plain thread reads it (tokio's stdin would need
/// one more tokio feature, and so a second build of tokio next to the root crate's).
async fn wait_for_stdin_eof() {
    let (done, gone) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin();
        while let Ok(n) = std::io::Read::read(&mut stdin, &mut sink) {
            if n == 0 {
                break;
            }
        }
        let _ = done.send(());
    });
    let _ = gone.await;
}

/// Whole responses, head and body, built once.
struct Answers {
    openai: Vec<u8>,
    anthropic: Vec<u8>,
}

impl Answers {
    fn new() -> Self {
        Self {
            openai: response(200, OPENAI_BODY, false),
            anthropic: response(200, ANTHROPIC_BODY, false),
        }
    }
}

fn response(status: u16, body: &str, close: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        501 => "Not Implemented",
        _ => "Bad Request",
    };
    let connection = if close { "connection: close\r\n" } else { "" };
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n{connection}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// What one complete request in the buffer asks for.
struct Request {
    /// Bytes of head and body.
    length: usize,
    answer: Answer,
    close: bool,
}

enum Answer {
    OpenAI,
    Anthropic,
    Stats,
    NotFound,
    /// A request the floor cannot frame (a chunked body, a bad head): answered, then closed.
    Refused(&'static str),
}

/// The first complete request in `buffer`, or None while it is still partial.
fn parse(buffer: &[u8]) -> Option<Request> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let head = match request.parse(buffer) {
        Ok(httparse::Status::Complete(head)) => head,
        Ok(httparse::Status::Partial) if buffer.len() < MAX_HEAD => return None,
        _ => {
            return Some(Request {
                length: buffer.len(),
                answer: Answer::Refused("bad request head"),
                close: true,
            })
        }
    };
    let mut body = 0usize;
    let mut close = request.version == Some(0);
    for header in request.headers.iter() {
        let value = std::str::from_utf8(header.value).unwrap_or("").trim();
        if header.name.eq_ignore_ascii_case("content-length") {
            body = value.parse().unwrap_or(usize::MAX);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            body = usize::MAX;
        } else if header.name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        }
    }
    if body == usize::MAX {
        let reason = "the floor reads content-length bodies only";
        return Some(Request {
            length: buffer.len(),
            answer: Answer::Refused(reason),
            close: true,
        });
    }
    if buffer.len() < head + body {
        return None;
    }
    let path = request.path.unwrap_or("");
    let path = path.split('?').next().unwrap_or(path);
    let answer = match (request.method, path) {
        (Some("GET"), "/__floor/stats") => Answer::Stats,
        (Some("POST"), p) if p.ends_with("/chat/completions") => Answer::OpenAI,
        (Some("POST"), p) if p.ends_with("/messages") => Answer::Anthropic,
        _ => Answer::NotFound,
    };
    Some(Request {
        length: head + body,
        answer,
        close,
    })
}

/// Serves one connection: every complete request in what arrived is answered, in order, with
/// one write (so pipelined requests cost one syscall), until the client closes it.
async fn connection(mut stream: TcpStream, answers: Arc<Answers>) {
    let _ = stream.set_nodelay(true);
    let mut buffer: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    let mut out: Vec<u8> = Vec::with_capacity(4 * 1024);
    loop {
        let mut closing = false;
        while let Some(request) = parse(&buffer) {
            buffer.drain(..request.length);
            REQUESTS.fetch_add(1, Ordering::Relaxed);
            match request.answer {
                Answer::OpenAI => out.extend_from_slice(&answers.openai),
                Answer::Anthropic => out.extend_from_slice(&answers.anthropic),
                Answer::Stats => {
                    let stats = format!(
                        r#"{{"requests": {}, "connections": {}}}"#,
                        REQUESTS.load(Ordering::Relaxed),
                        CONNECTIONS.load(Ordering::Relaxed)
                    );
                    out.extend(response(200, &stats, request.close));
                }
                Answer::NotFound => {
                    let body = r#"{"error": {"message": "the floor serves /chat/completions and /messages"}}"#;
                    out.extend(response(404, body, request.close));
                }
                Answer::Refused(reason) => {
                    out.extend(response(501, &format!(r#"{{"error": "{reason}"}}"#), true));
                }
            }
            if request.close {
                closing = true;
                break;
            }
        }
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if closing {
            let _ = stream.shutdown().await;
            return;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

// ------------------------------------------------------------------------------------------
// The client

/// One wire's request: where it goes, its headers and its body.
struct Wire {
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: fn() -> serde_json::Value,
    text: fn(&serde_json::Value) -> Option<&str>,
}

const OPENAI: Wire = Wire {
    path: "/chat/completions",
    headers: &[("authorization", "Bearer sk-bench")],
    body: || {
        serde_json::json!({
            "model": "gpt-4.1-mini",
            "messages": [{"role": "user", "content": "Hi"}],
        })
    },
    text: |answer| answer["choices"][0]["message"]["content"].as_str(),
};

const ANTHROPIC: Wire = Wire {
    path: "/v1/messages",
    headers: &[
        ("x-api-key", "sk-bench"),
        ("anthropic-version", "2023-06-01"),
    ],
    body: || {
        serde_json::json!({
            "model": "claude-haiku-4-5",
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": "Hi"}],
        })
    },
    text: |answer| answer["content"][0]["text"].as_str(),
};

/// One chat call as a client library makes it: build the JSON body, POST it, read the whole
/// answer, parse it and take the text out.
async fn call(http: &reqwest::Client, url: &str, wire: &Wire) -> Result<String, String> {
    let body = serde_json::to_vec(&(wire.body)()).map_err(|e| e.to_string())?;
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in wire.headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.map_err(|e| format!("send: {e}"))?;
    let status = response.status();
    let bytes = response.bytes().await.map_err(|e| format!("body: {e}"))?;
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    let answer: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("JSON: {e}"))?;
    match (wire.text)(&answer) {
        Some(text) => Ok(text.to_owned()),
        None => Err("no text in the answer".into()),
    }
}

/// User plus system CPU time of the whole process, every thread included.
fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes into the struct it is given, which is ours and zeroed.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

fn client(options: &Options) -> Result<(), String> {
    let base = options.get("url").ok_or("client needs --url")?;
    let wire_name = options.get("wire").map_or("openai", String::as_str);
    let wire = match wire_name {
        "openai" => &OPENAI,
        "anthropic" => &ANTHROPIC,
        other => return Err(format!("--wire is openai or anthropic, not {other:?}")),
    };
    let runtime_name = options.get("runtime").map_or("current", String::as_str);
    let mut builder = match runtime_name {
        "current" => tokio::runtime::Builder::new_current_thread(),
        // As pyo3-async-runtimes builds failover's: one worker per core.
        "multi" => tokio::runtime::Builder::new_multi_thread(),
        other => return Err(format!("--runtime is current or multi, not {other:?}")),
    };
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let n: usize = number(options, "n", 1000)?;
    let warmup: usize = number(options, "warmup", 50)?;
    let concurrency: usize = number(options, "concurrency", 1)?;
    if n == 0 || concurrency == 0 {
        return Err("--n and --concurrency must be at least 1".into());
    }

    // reqwest is built without a default crypto provider (as in the root crate); the floor
    // speaks plain HTTP, but building a client needs one installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let url = format!("{}{}", base.trim_end_matches('/'), wire.path);

    let check = |text: String| {
        if text == TEXT {
            Ok(())
        } else {
            Err(format!("unexpected answer {text:?}"))
        }
    };
    // Sequential calls are each driven by their own block_on, as a synchronous `prompt()`
    // drives its call; concurrent ones run as `concurrency` tasks inside one block_on.
    let run = |count: usize| -> Result<(), String> {
        if concurrency == 1 {
            for _ in 0..count {
                check(runtime.block_on(call(&http, &url, wire))?)?;
            }
            return Ok(());
        }
        let next = Arc::new(AtomicUsize::new(0));
        runtime.block_on(async {
            let workers: Vec<_> = (0..concurrency)
                .map(|_| {
                    let (http, url, next) = (http.clone(), url.clone(), Arc::clone(&next));
                    tokio::spawn(async move {
                        while next.fetch_add(1, Ordering::Relaxed) < count {
                            check(call(&http, &url, wire).await?)?;
                        }
                        Ok::<(), String>(())
                    })
                })
                .collect();
            for worker in workers {
                worker.await.map_err(|e| format!("worker: {e}"))??;
            }
            Ok(())
        })
    };

    run(warmup)?;
    let (cpu0, wall0) = (process_cpu(), Instant::now());
    run(n)?;
    let (cpu, wall) = (process_cpu() - cpu0, wall0.elapsed());
    let per_call = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    println!(
        "{}",
        serde_json::json!({
            "wire": wire_name,
            "runtime": runtime_name,
            "calls": n,
            "warmup": warmup,
            "concurrency": concurrency,
            "cpu_us_per_call": per_call(cpu),
            "wall_us_per_call": per_call(wall),
            "requests_per_s": n as f64 / wall.as_secs_f64(),
        })
    );
    Ok(())
}
