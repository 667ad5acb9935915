//! Image, speech and transcription calls, what every wire shares of them:
//! whether a provider can make one, its request (JSON or a multipart
//! form, with the headers and secrets every request carries), and its
//! answer read through the wire (audio as bytes, JSON as JSON, an error
//! as for chat).

use super::answer::{error_failure, malformed, read_answer, refused, request_id};
use super::secrets::redact_owned;
use super::types::{
    media_model, Media, MediaContent, MediaKind, MediaRequest, MediaResponse, ProviderConfig,
};
use super::wire_format::{MediaAnswer, MediaBody, MediaProblem};
use super::wires::format;
use crate::engine::{ErrorKind, Failure};
use crate::http::{HttpRequest, HttpResponse};

/// Why `provider` cannot make `request`, if it cannot: no API for its kind
/// (on its wire, or as its preset says), or a limit the API documents.
pub fn unable_media(provider: &ProviderConfig, request: &MediaRequest) -> Option<String> {
    let kind = request.kind();
    let name = &provider.name;
    let verb = kind.verb();
    let wire = format(provider.wire);
    if let Some(why) = wire.no_media(kind) {
        return Some(format!("{name} cannot {verb}: {why}"));
    }
    if !provider.media.contains(&kind) {
        return Some(format!("{name} cannot {verb}: its API has none"));
    }
    let own = match kind {
        MediaKind::Image => &provider.image_model,
        MediaKind::Speech => &provider.speech_model,
        MediaKind::Transcription => &provider.transcription_model,
    };
    if request.model.is_none() && own.is_none() {
        let option = kind.model_option();
        return Some(format!(
            "{name} cannot {verb}: it has no {option}= (and the call no model=)"
        ));
    }
    if let Media::Speech { voice, .. } = &request.media {
        if voice.for_provider(name).is_none() {
            return Some(format!(
                "{name} cannot {verb}: voice= names no voice for it"
            ));
        }
    }
    let model = media_model(provider, request);
    let why = wire.media_unable(provider, model, request)?;
    Some(format!("{name} cannot {verb} so: {why}"))
}

/// The media request for one call to `provider`, without its key.
/// `params` are not merged: they are chat fields.
pub fn build_media_request(provider: &ProviderConfig, request: &MediaRequest) -> HttpRequest {
    let model = media_model(provider, request);
    let (path, body) = format(provider.wire).build_media(provider, model, request);
    let (json, form) = match body {
        MediaBody::Json(json) => (json, None),
        MediaBody::Form(parts) => (serde_json::Value::Null, Some(parts)),
    };
    let mut sent =
        super::request::finish_request(provider, &path, &json, Vec::new(), &request.headers);
    for (name, value) in &mut sent.headers {
        if name.eq_ignore_ascii_case("accept") {
            // Audio comes as bytes, errors as JSON.
            *value = "*/*".into();
        }
    }
    if let Some(parts) = form {
        // reqwest writes the form's own content type, with its boundary.
        sent.headers
            .retain(|(name, _)| !name.eq_ignore_ascii_case("content-type"));
        sent.body = bytes::Bytes::new();
        sent.form = Some(parts.into());
    }
    sent
}

/// A media response -> its content, or the failure it describes: an error
/// status (its JSON body read as for chat, also where audio was asked
/// for), an error object inside a 2xx, a body the wire cannot read.
pub fn parse_media_response(
    provider: &ProviderConfig,
    request: &MediaRequest,
    sent: &HttpRequest,
    response: HttpResponse,
) -> Result<MediaResponse, Failure> {
    let content_type = response
        .headers
        .get("content-type")
        .unwrap_or("")
        .to_ascii_lowercase();
    // JSON by its type, or by its look where the type says nothing better
    // (a gateway's `text/plain` label; audio never starts with `{`).
    let is_json = content_type.starts_with("application/json")
        || (!content_type.starts_with("audio/") && response.body.first() == Some(&b'{'));
    let wire = format(provider.wire);
    let (parsed, answer) = if !(200..300).contains(&response.status) {
        let id = request_id(provider, &response.headers).map(|id| redact_owned(id, &sent.secrets));
        return Err(error_failure(provider, &sent.secrets, response, id));
    } else if is_json {
        let answer = read_answer(provider, sent, response)?;
        (
            wire.parse_media(request, MediaAnswer::Json(&answer.json)),
            answer,
        )
    } else {
        let parsed = wire.parse_media(
            request,
            MediaAnswer::Bytes {
                content_type: &content_type,
                body: &response.body,
            },
        );
        let id = request_id(provider, &response.headers).map(|id| redact_owned(id, &sent.secrets));
        (parsed, super::answer::JsonAnswer::of_bytes(response, id))
    };
    let checked = parsed.and_then(|media| match &media.content {
        MediaContent::Images(images) if images.is_empty() => Err("no image in the answer".into()),
        MediaContent::Audio { data, .. } if data.is_empty() => Err("no audio in the answer".into()),
        _ => Ok(media),
    });
    match checked {
        Ok(mut media) => {
            media.model = match media.model {
                Some(model) => Some(redact_owned(model, &sent.secrets)),
                None => Some(media_model(provider, request).to_string()),
            };
            media.request_id = answer.request_id;
            media.status = answer.response.status;
            media.headers = answer.response.headers;
            Ok(media)
        }
        Err(MediaProblem::Malformed(why)) => Err(malformed(provider, sent, answer, why)),
        Err(MediaProblem::Refused(why)) => Err(refused(provider, sent, answer, why)),
    }
}

/// The images of an answer that came as URLs where bytes were asked for,
/// fetched (a GET without the key: the URL may be on any host), each within
/// `timeout`. A fetch that fails is a server error of the provider.
pub async fn fetch_images(
    provider: &ProviderConfig,
    request: &MediaRequest,
    transport: &crate::http::ReqwestTransport,
    media: &mut MediaResponse,
    timeout: std::time::Duration,
) -> Result<(), Failure> {
    let (Media::Image { urls: false, .. }, MediaContent::Images(images)) =
        (&request.media, &media.content)
    else {
        return Ok(());
    };
    let mut fetched_images = Vec::with_capacity(images.len());
    for (index, image) in images.iter().enumerate() {
        if image.data.is_some() {
            continue;
        }
        let Some(url) = image.url.as_deref() else {
            continue;
        };
        let host = crate::http::host_of(url);
        // The generation was answered (and may be billed) whatever the
        // fetch does: the failure keeps the answer's status and usage.
        let failed = |why: String| Failure {
            status: Some(media.status),
            usage: Some(Box::new(media.usage.clone())),
            billed: Some(true),
            ..Failure::without_response(
                ErrorKind::ServerError,
                format!(
                    "{}: the image at {host} could not be fetched: {why}",
                    provider.name
                ),
            )
        };
        let fetched = transport
            .fetch(url, timeout)
            .await
            .map_err(|failure| failed(failure.message))?;
        if !(200..300).contains(&fetched.status) || fetched.body.is_empty() {
            return Err(failed(format!("it answered {}", fetched.status)));
        }
        let labelled = fetched
            .headers
            .get("content-type")
            .unwrap_or("")
            .to_ascii_lowercase();
        if looks_like_text(&fetched.body)
            || labelled.starts_with("text/")
            || labelled.starts_with("application/json")
        {
            return Err(failed(format!(
                "it answered a {labelled:?} page, not an image"
            )));
        }
        let media_type = image.media_type.clone().or_else(|| {
            image_type(&fetched.body)
                .map(str::to_string)
                .or_else(|| labelled.starts_with("image/").then_some(labelled))
        });
        fetched_images.push((index, fetched.body, media_type));
    }
    if let MediaContent::Images(images) = &mut media.content {
        for (index, data, media_type) in fetched_images {
            images[index].data = Some(data);
            images[index].media_type = media_type;
        }
    }
    Ok(())
}

/// A size in bytes as a limit's message tells it (`26,214,400 bytes`):
/// exact, where MB would leave open which MB.
pub(super) fn bytes_told(bytes: usize) -> String {
    let digits = bytes.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    format!("{out} bytes")
}

/// Whether bytes that should be an image or audio read as text instead (an
/// HTML page, a JSON error, a sentence), whatever they are labelled: the
/// first bytes all printable ASCII. Audio and images begin with binary
/// magic (ID3 and RIFF are followed by binary sizes) or samples.
pub(super) fn looks_like_text(data: &[u8]) -> bool {
    let head = &data[..data.len().min(64)];
    !head.is_empty()
        && head
            .iter()
            .all(|b| b.is_ascii_graphic() || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// An image's media type from its first bytes (PNG, JPEG, WebP, GIF).
pub(super) fn image_type(data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if data.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        Some("image/webp")
    } else if data.starts_with(b"GIF8") {
        Some("image/gif")
    } else {
        None
    }
}

/// The media type of speech in `format`, as OpenAI's formats are named.
pub(super) fn audio_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "opus" => "audio/ogg",
        "aac" => "audio/aac",
        "flac" => "audio/flac",
        "wav" => "audio/wav",
        "pcm" => "audio/pcm",
        _ => "application/octet-stream",
    }
}
