//! A chat answer read as it streams: the HTTP body through the wire's
//! framing and event reader into the neutral [`Accumulator`].
//!
//! [`start`] is one attempt of a streaming call: it succeeds once the first
//! content chunk is in hand, so everything before it (an error status, a
//! cut, an idle stall, an error event inside the 200) is an ordinary failed
//! attempt the engine retries or fails over. After that, [`LiveStream::next`]
//! reads on; its failures are the caller's (`StreamInterrupted`, or a
//! restart the caller asked for).

use std::time::Duration;

use serde_json::{json, Value};

use super::answer::{error_failure, name_failure, parse_response, request_id, status_of_type};
use super::openai::error_detail;
use super::secrets::{redact, redact_owned};
use super::types::{ChatResponse, ProviderConfig};
use super::wire_format::WireFormat;
use super::wires::format;
use crate::engine::classify::{classify_status, ErrorBody};
use crate::engine::{ErrorKind, Failure, Headers};
use crate::http::{BodyStream, HttpRequest, Opened, ReqwestTransport};
use crate::stream::{Accumulator, Chunk, Decoder, Delta, Frame, Framing, StreamError};
use tokio::time::Instant;

/// The most chunks handed to the caller in one batch (more that has
/// already arrived waits for the next read).
const BATCH: usize = 512;

/// How long a stream is read on after its answer is complete (a finish
/// reason came) for what may trail it: the usage chunk and `[DONE]` after
/// Chat Completions' finish, Anthropic's `message_stop` after the
/// `message_delta` that holds the stop reason, a body's end. Servers send
/// these at once with the finish, so a second is ample for them; a server
/// that keeps the connection open with nothing more to say then ends the
/// stream (successfully, with what came) instead of holding the caller for
/// the whole idle `timeout`. Never past the call's deadline either.
const TRAILER_GRACE: Duration = Duration::from_secs(1);

/// A stream being read.
pub struct LiveStream {
    name: String,
    wire: &'static dyn WireFormat,
    overloaded_statuses: Vec<u16>,
    secrets: Vec<String>,
    status: u16,
    headers: Headers,
    pub request_id: Option<String>,
    /// `None` once the body has ended (or was dropped: the connection is closed).
    body: Option<BodyStream>,
    host: String,
    decoder: Decoder,
    pub acc: Accumulator,
    /// What a wire gathers across events for `provider_data`.
    extras: serde_json::Map<String, Value>,
    /// `provider_data` of a whole answer given instead of a stream.
    whole_provider_data: Option<Value>,
    /// A failure that came after chunks still to hand out: reported next.
    failed: Option<Failure>,
    /// The body reached its end (or the end marker came and reading stopped).
    done: bool,
    /// When the call's deadline falls (the attempt's `left` from its
    /// start): what trails the answer is not waited for past it.
    deadline: Option<Instant>,
    /// Once the answer is complete, when reading for what trails it stops
    /// ([`TRAILER_GRACE`] after the finish, or the deadline if sooner).
    trailers_until: Option<Instant>,
    /// A speech stream: the body's bytes are the audio, handed on as they
    /// arrive (no framing), and its end is the answer's.
    audio: bool,
}

impl std::fmt::Debug for LiveStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveStream")
            .field("provider", &self.name)
            .field("status", &self.status)
            .finish()
    }
}

/// A stream whose first content is in hand: what one successful streaming
/// attempt gives the engine.
#[derive(Debug)]
pub struct StartedStream {
    pub live: LiveStream,
    /// The chunks read so far, for the caller.
    pub first: Vec<Chunk>,
}

impl crate::engine::Answer for StartedStream {
    fn status(&self) -> u16 {
        self.live.status
    }
}

/// One streaming attempt: opens the request and reads until the first
/// content chunk (or a complete answer without any), waiting at most
/// `idle` for the head and for each read. The caller bounds the whole start
/// (keep-alives reset `idle`, never the deadline); `deadline`, when the
/// call's deadline falls, bounds what is read after the answer is complete.
pub async fn start(
    provider: &ProviderConfig,
    transport: &ReqwestTransport,
    sent: &HttpRequest,
    idle: Duration,
    deadline: Option<Instant>,
    audio: Option<&super::types::MediaRequest>,
) -> Result<StartedStream, Failure> {
    let opened = transport
        .open(sent, idle)
        .await
        .map_err(|failure| name_failure(provider, sent, failure))?;
    let (status, headers, body) = match opened {
        Opened::Whole(response) => {
            let request_id =
                request_id(provider, &response.headers).map(|id| redact_owned(id, &sent.secrets));
            return Err(error_failure(provider, &sent.secrets, response, request_id));
        }
        Opened::Streaming {
            status,
            headers,
            body,
        } => (status, headers, body),
    };
    let wire = format(provider.wire);
    // A JSON document where an SSE stream was asked for (an NDJSON stream's
    // lines are JSON documents themselves).
    let content_type = headers
        .get("content-type")
        .unwrap_or("")
        .to_ascii_lowercase();
    let json_answer = (audio.is_some() || wire.framing() == Framing::Sse)
        && content_type.starts_with("application/json");
    // Speech read whole, never handed on as it arrives: a wire whose audio
    // comes inside JSON (Gemini), or a body that is text, not audio (an
    // HTML page from a gateway): the wire's reader says what it is.
    let whole_audio = audio.is_some()
        && (json_answer || !wire.streams_audio_bytes() || content_type.starts_with("text/"));
    let mut live = LiveStream {
        name: provider.name.clone(),
        wire,
        overloaded_statuses: provider.overloaded_statuses.clone(),
        secrets: sent.secrets.clone(),
        request_id: request_id(provider, &headers).map(|id| redact_owned(id, &sent.secrets)),
        status,
        host: body.host().to_string(),
        headers,
        body: Some(body),
        decoder: Decoder::new(wire.framing()),
        acc: Accumulator::default(),
        extras: serde_json::Map::new(),
        whole_provider_data: None,
        failed: None,
        done: false,
        deadline,
        trailers_until: None,
        audio: audio.is_some(),
    };
    if let (true, Some(request)) = (whole_audio, audio) {
        // Audio as JSON (Mistral's base64 `audio_data`, Gemini's inline
        // data), an error in a 200, or a body that is no audio at all.
        let body = live.body.take();
        let bytes = whole_body(provider, body).await?;
        let response = crate::http::HttpResponse {
            status,
            headers: live.headers.clone(),
            body: bytes,
        };
        let media = super::media::parse_media_response(provider, request, sent, response)?;
        let mut first = Vec::new();
        if let Some(model) = media.model {
            live.acc.apply(Delta::Model(model), &mut first);
        }
        live.acc.apply(Delta::Usage(media.usage), &mut first);
        if let super::types::MediaContent::Audio { data, .. } = media.content {
            live.close();
            live.acc.apply(Delta::Audio(data), &mut first);
            live.acc.apply(Delta::End, &mut first);
        }
        return Ok(StartedStream { live, first });
    }
    if let Some(request) = audio {
        // The model asked for: the audio's bytes do not name one.
        let model = super::types::media_model(provider, request).to_string();
        live.acc.apply(Delta::Model(model), &mut Vec::new());
    }
    if json_answer {
        // A JSON document where a stream was asked for: an error, or a
        // server that does not stream, whose whole answer is the stream.
        let body = live.body.take();
        let chat = whole_answer(provider, sent, status, &live.headers, body).await?;
        let mut first = Vec::new();
        live.replay(chat, &mut first);
        return Ok(StartedStream { live, first });
    }
    let first = live.next(idle).await?.unwrap_or_default();
    Ok(StartedStream { live, first })
}

/// A 2xx JSON answer to a streaming request, read whole: the answer, or
/// the failure it describes (an error object, a malformed body).
async fn whole_answer(
    provider: &ProviderConfig,
    sent: &HttpRequest,
    status: u16,
    headers: &Headers,
    body: Option<BodyStream>,
) -> Result<ChatResponse, Failure> {
    let bytes = whole_body(provider, body).await?;
    let response = crate::http::HttpResponse {
        status,
        headers: headers.clone(),
        body: bytes,
    };
    parse_response(provider, sent, response)
}

/// A streamed body read to its end (up to `MAX_RESPONSE_BYTES`).
async fn whole_body(
    provider: &ProviderConfig,
    body: Option<BodyStream>,
) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    if let Some(mut body) = body {
        loop {
            match body.next().await {
                Ok(Some(piece)) if bytes.len() + piece.len() <= crate::http::MAX_RESPONSE_BYTES => {
                    bytes.extend_from_slice(&piece)
                }
                Ok(None) => break,
                Ok(Some(_)) | Err(_) => {
                    return Err(Failure::without_response(
                        ErrorKind::ServerError,
                        format!("{}: the answer was cut short or too large", provider.name),
                    ))
                }
            }
        }
    }
    Ok(bytes)
}

impl LiveStream {
    /// The next chunks for the caller; `None` when the answer is complete.
    /// Waits at most `idle` for each read of the body.
    pub async fn next(&mut self, idle: Duration) -> Result<Option<Vec<Chunk>>, Failure> {
        if let Some(failure) = self.failed.take() {
            return Err(failure);
        }
        let mut out = Vec::new();
        let mut frames = Vec::new();
        loop {
            if self.done {
                return Ok((!out.is_empty()).then_some(out));
            }
            let Some(body) = self.body.as_mut() else {
                self.done = true;
                continue;
            };
            let read = if out.is_empty() {
                // Once the answer is complete, what trails it gets only
                // what is left of its grace.
                let wait = self.trailers_until.map_or(idle, |until| {
                    idle.min(until.saturating_duration_since(Instant::now()))
                });
                tokio::time::timeout(wait, body.next()).await
            } else if out.len() >= BATCH {
                return Ok(Some(out));
            } else {
                // Chunks are in hand: take more only if it has already
                // arrived, so a batch crosses to Python at once and nothing
                // waits for it.
                match futures_util::FutureExt::now_or_never(body.next()) {
                    Some(read) => Ok(read),
                    None => return Ok(Some(out)),
                }
            };
            let piece = match read {
                Ok(Ok(Some(bytes))) => Some(bytes),
                Ok(Ok(None)) => None,
                // A stall (or the grace for what trails it running out) or
                // a cut after the end marker is no failure: the answer is
                // whole (only a trailing usage chunk is lost).
                _ if self.acc.ended => {
                    self.close();
                    continue;
                }
                Ok(Err(mut cut)) => {
                    cut.message = redact(&format!("{}: {}", self.name, cut.message), &self.secrets);
                    return self.fail_after(out, cut);
                }
                Err(_) => {
                    let failure = Failure::without_response(
                        ErrorKind::Timeout,
                        format!(
                            "{}: no event from {} for {:.3}s (timeout)",
                            self.name,
                            self.host,
                            idle.as_secs_f64()
                        ),
                    );
                    return self.fail_after(out, failure);
                }
            };
            if self.audio {
                match piece {
                    Some(bytes) => self.acc.apply(Delta::Audio(bytes.to_vec()), &mut out),
                    None => {
                        // The body's end is the audio's.
                        self.acc.apply(Delta::End, &mut out);
                        self.close();
                        if !self.acc.content_started {
                            return Err(self.server_error("the stream ended without audio"));
                        }
                    }
                }
                continue;
            }
            let decoded = match &piece {
                Some(bytes) => self.decoder.push(bytes, &mut frames),
                None => self.decoder.finish(&mut frames),
            };
            if let Err(why) = decoded {
                let failure = self.undecodable(why);
                return self.fail_after(out, failure);
            }
            for frame in frames.drain(..) {
                if let Err(failure) = self.frame(&frame, &mut out) {
                    return self.fail_after(out, failure);
                }
                if self.done {
                    break;
                }
            }
            if piece.is_none() && !self.done {
                // The body ended. Without the end marker (or with a tool
                // call half written) the answer was cut.
                self.close();
                if !self.acc.ended || self.acc.has_pending_calls() {
                    let failure = Failure::without_response(
                        ErrorKind::Connection,
                        format!(
                            "{}: the stream from {} ended before the answer did",
                            self.name, self.host
                        ),
                    );
                    return self.fail_after(out, failure);
                }
            }
        }
    }

    /// Reads one frame into chunks; an error event is a failure.
    fn frame(&mut self, frame: &Frame, out: &mut Vec<Chunk>) -> Result<(), Failure> {
        let mut deltas = Vec::new();
        self.wire
            .stream_event(frame, &mut deltas, &mut self.extras)
            .map_err(|why| self.undecodable(why))?;
        for delta in deltas {
            match delta {
                Delta::Error(error) => return Err(self.error_event(&error)),
                Delta::End => {
                    // An end marker with nothing before it (`data: [DONE]`
                    // alone, a usage chunk with no choice) is no answer: a
                    // server error, retried and failed over like an empty
                    // `choices` in a whole answer.
                    let nothing = !self.acc.content_started
                        && self.acc.tool_calls.is_empty()
                        && !self.acc.has_pending_calls()
                        && self.acc.finish_reason.is_none()
                        && out.is_empty();
                    if nothing {
                        return Err(self.server_error(
                            "the stream ended without an answer (no content, no finish reason)",
                        ));
                    }
                    self.acc.apply(Delta::End, out);
                    // Nothing follows the end marker: stop reading.
                    self.close();
                }
                Delta::Finish(reason) => {
                    let nothing_yet = !self.acc.content_started && out.is_empty();
                    let has_calls = !self.acc.tool_calls.is_empty() || self.acc.has_pending_calls();
                    if nothing_yet {
                        if let Some(why) = crate::conversation::abnormal_end_without_content(
                            "",
                            has_calls,
                            Some(&reason),
                        ) {
                            return Err(self.server_error(&why));
                        }
                    }
                    self.acc.apply(Delta::Finish(reason), out);
                    if self.trailers_until.is_none() {
                        let grace = Instant::now() + TRAILER_GRACE;
                        self.trailers_until =
                            Some(self.deadline.map_or(grace, |deadline| grace.min(deadline)));
                    }
                }
                delta => self.acc.apply(delta, out),
            }
        }
        Ok(())
    }

    /// A whole answer, as if it had streamed: its chunks to `out`, and the
    /// stream complete.
    fn replay(&mut self, chat: ChatResponse, out: &mut Vec<Chunk>) {
        self.close();
        self.acc.apply(Delta::Text(chat.text), out);
        for call in chat.tool_calls {
            self.acc.apply(Delta::ToolCall(call), out);
        }
        self.acc.apply(Delta::Usage(chat.usage), out);
        if let Some(model) = chat.model {
            self.acc.apply(Delta::Model(model), out);
        }
        let finish = chat.finish_reason.unwrap_or_else(|| "stop".into());
        self.acc.apply(Delta::Finish(finish), out);
        if let Some(data) = chat.provider_data {
            self.whole_provider_data = Some(data);
        }
    }

    /// The wire's opaque extras for the history (signed thinking blocks,
    /// thought signatures), as `ChatResponse::provider_data`.
    pub fn provider_data(&self) -> Option<Value> {
        if let Some(data) = &self.whole_provider_data {
            return Some(data.clone());
        }
        self.wire.stream_provider_data(&self.extras)
    }

    /// Puts a failure back, to be reported by the next `next` (a caller
    /// that only looked without waiting must not lose it).
    pub fn put_back(&mut self, failure: Failure) {
        self.failed = Some(failure);
    }

    /// What the stream said of itself (its finish reason, its model), with
    /// any secret the request carried removed: it reaches the response,
    /// spans and OUT.
    pub fn told(&self, said: Option<String>) -> Option<String> {
        said.map(|text| redact_owned(text, &self.secrets))
    }

    /// The response headers.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// Closes the connection: nothing more is read.
    pub fn close(&mut self) {
        self.body = None;
        self.done = true;
    }

    /// `failure`, after the chunks already read are handed out.
    fn fail_after(
        &mut self,
        out: Vec<Chunk>,
        mut failure: Failure,
    ) -> Result<Option<Vec<Chunk>>, Failure> {
        self.close();
        if self.acc.ended && !self.acc.has_pending_calls() {
            // The answer is whole: what goes wrong in what trails its finish
            // (an error event, an event that cannot be decoded) costs at most
            // a usage chunk, never the answer, and is never a reason to
            // generate it again.
            return Ok((!out.is_empty()).then_some(out));
        }
        // The stream's own status: the attempt was answered with it.
        failure.status = failure.status.or(Some(self.status));
        // What the attempt used so far (usage events before the failure),
        // and whether it is billed: surely once it delivered content; before
        // that, it cannot be known (the provider may have generated what
        // never arrived, or counted the input and refused).
        // (Its output so far is not what the provider bills: input only.)
        if failure.usage.is_none() && self.acc.usage.is_known() {
            failure.usage = Some(Box::new(self.acc.usage.input_only()));
        }
        let delivered = !self.acc.text.is_empty() || !self.acc.tool_calls.is_empty();
        failure.billed = delivered.then_some(true);
        if out.is_empty() {
            Err(failure)
        } else {
            self.failed = Some(failure);
            Ok(Some(out))
        }
    }

    fn undecodable(&self, why: String) -> Failure {
        self.server_error(&format!("an event that cannot be decoded: {why}"))
    }

    /// A stream that is not what the wire promises: a server error (another
    /// attempt, or another provider, may well answer properly).
    fn server_error(&self, what: &str) -> Failure {
        Failure {
            kind: ErrorKind::ServerError,
            status: Some(self.status),
            headers: self.headers.clone(),
            body: None,
            message: redact(&format!("{}: {what}", self.name), &self.secrets),
            request_id: self.request_id.clone(),
            out_of_time: false,
            cut_short: false,
            // What it used and cost so far: `fail_after` says.
            usage: None,
            billed: None,
        }
    }

    /// An error event inside the 200, classified as its code would be as a
    /// status for this provider; string types by name.
    fn error_event(&self, error: &StreamError) -> Failure {
        // Wrapped as an error body, so the wait hints a body can carry
        // (Gemini's `RetryInfo.retryDelay`) are read as for any error.
        let wrapped = json!({ "error": error.error });
        let text = redact(&wrapped.to_string(), &self.secrets);
        let parsed = ErrorBody::from_json(&wrapped);
        // The status the event names: its numeric code, or the HTTP status
        // it carries (Groq's `status_code`, Google's numeric `code`).
        let code = ["code", "status_code", "status"]
            .iter()
            .find_map(|key| error.error.get(*key).and_then(Value::as_u64))
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| (400..600).contains(c));
        let kind_name = error
            .error
            .get("type")
            .or_else(|| error.error.get("code"))
            .and_then(Value::as_str)
            .unwrap_or("");
        // A type name stands for the status it has as an HTTP error
        // (Anthropic's error types); else the status the event carries.
        let status = status_of_type(kind_name).or(code);
        let kind = match (kind_name, status) {
            ("overloaded_error", _) => ErrorKind::Overloaded,
            (_, Some(status)) => classify_status(status, &parsed, &self.overloaded_statuses),
            (_, None) => classify_status(500, &parsed, &self.overloaded_statuses),
        };
        let detail = error_detail(&wrapped);
        let message = match (parsed.message, detail) {
            (Some(m), Some(d)) => format!("{}: error event in the stream: {m} ({d})", self.name),
            (Some(m), None) => format!("{}: error event in the stream: {m}", self.name),
            (None, _) => format!("{}: error event in the stream", self.name),
        };
        Failure {
            kind,
            status: Some(code.unwrap_or(self.status)),
            headers: self.headers.clone(),
            body: Some(text),
            message: redact(&message, &self.secrets),
            request_id: self.request_id.clone(),
            out_of_time: false,
            cut_short: false,
            // What it used and cost so far: `fail_after` says.
            usage: None,
            billed: None,
        }
    }
}
