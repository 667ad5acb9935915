//! OpenAI's image and audio endpoints (`/images/generations`,
//! `/audio/speech`, `/audio/transcriptions`), which Azure and the
//! OpenAI-compatible family speak too: their bodies, the limits OpenAI
//! documents, and their answers.

use base64::Engine;
use serde_json::{Map, Value};

use super::json::{string_at, u64_at};
use super::media::{audio_type, bytes_told, image_type, looks_like_text};
use super::types::{
    GeneratedImage, Media, MediaContent, MediaRequest, MediaResponse, ProviderConfig, Segment,
    Usage,
};
use super::wire_format::{MediaAnswer, MediaBody, MediaProblem};
use crate::http::FormPart;

/// The most one upload may weigh (OpenAI, Azure and Groq say 25 MB).
pub const MAX_UPLOAD_BYTES: usize = 25 * 1024 * 1024;

/// The most characters a speech call speaks at once.
const MAX_SPEECH_CHARS: usize = 4096;

/// Whether `model` is one of OpenAI's GPT image models (which answer in
/// base64 only and refuse `response_format`).
fn gpt_image(model: &str) -> bool {
    model.starts_with("gpt-image")
}

/// Why OpenAI cannot take `request` for `model`, if it cannot (`mistral`:
/// Mistral's endpoint, which answers JSON only).
pub(super) fn unable(model: &str, request: &MediaRequest, mistral: bool) -> Option<String> {
    match &request.media {
        Media::Image {
            prompt, n, urls, ..
        } => {
            let longest = match model {
                "dall-e-2" => Some(1000),
                "dall-e-3" => Some(4000),
                m if gpt_image(m) => Some(32000),
                _ => None,
            };
            let chars = prompt.chars().count();
            if let Some(longest) = longest.filter(|&l| chars > l) {
                return Some(format!(
                    "{model} takes a prompt of at most {longest} characters, not {chars}"
                ));
            }
            if model == "dall-e-3" && *n > 1 {
                return Some("dall-e-3 makes one image per call (n=1)".into());
            }
            if *n > 10 {
                return Some(format!("at most 10 images per call, not {n}"));
            }
            if gpt_image(model) && *urls {
                return Some(format!("{model} answers with the image, never a URL"));
            }
            None
        }
        Media::Speech {
            text,
            speed,
            instructions,
            ..
        } => {
            let chars = text.chars().count();
            if chars > MAX_SPEECH_CHARS {
                return Some(format!(
                    "a text of at most {MAX_SPEECH_CHARS} characters, not {chars}"
                ));
            }
            if speed.is_some_and(|s| !(0.25..=4.0).contains(&s)) {
                return Some("a speed from 0.25 to 4.0".into());
            }
            if instructions.is_some() && model.starts_with("tts-1") {
                return Some(format!("{model} takes no instructions"));
            }
            None
        }
        Media::Transcription {
            audio,
            response_format,
            ..
        } => {
            if audio.len() > MAX_UPLOAD_BYTES {
                return Some(format!(
                    "a recording of at most 25 MB ({}), not {}",
                    bytes_told(MAX_UPLOAD_BYTES),
                    bytes_told(audio.len())
                ));
            }
            if mistral && !matches!(response_format.as_str(), "json" | "text") {
                return Some(format!(
                    "Mistral answers with the text only (response_format='json' or 'text'), \
                     not {response_format}"
                ));
            }
            if model.starts_with("gpt-4o") && !matches!(response_format.as_str(), "json" | "text") {
                return Some(format!(
                    "{model} answers in json or text, not {response_format}"
                ));
            }
            None
        }
    }
}

/// The request for `model`: its path (under the base URL) and body.
pub(super) fn build(
    provider: &ProviderConfig,
    model: &str,
    request: &MediaRequest,
) -> (&'static str, MediaBody) {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    match &request.media {
        Media::Image {
            prompt,
            size,
            n,
            quality,
            urls,
        } => {
            body.insert("prompt".into(), Value::from(prompt.as_str()));
            body.insert("n".into(), Value::from(*n));
            if let Some(size) = size {
                body.insert("size".into(), Value::from(size.as_str()));
            }
            if let Some(quality) = quality {
                body.insert("quality".into(), Value::from(quality.as_str()));
            }
            if !gpt_image(model) {
                let format = if *urls { "url" } else { "b64_json" };
                body.insert("response_format".into(), Value::from(format));
            }
            ("/images/generations", MediaBody::Json(Value::Object(body)))
        }
        Media::Speech {
            text,
            voice,
            format,
            speed,
            instructions,
        } => {
            body.insert("input".into(), Value::from(text.as_str()));
            // (A provider without a voice was skipped: `unable_media`.)
            let voice = voice.for_provider(&provider.name).unwrap_or_default();
            body.insert("voice".into(), Value::from(voice));
            body.insert("response_format".into(), Value::from(format.as_str()));
            if let Some(speed) = speed {
                body.insert("speed".into(), Value::from(*speed));
            }
            if let Some(instructions) = instructions {
                body.insert("instructions".into(), Value::from(instructions.as_str()));
            }
            ("/audio/speech", MediaBody::Json(Value::Object(body)))
        }
        Media::Transcription {
            audio,
            filename,
            language,
            prompt,
            response_format,
        } => {
            let field = |name: &str, value: &str| FormPart {
                name: name.into(),
                file: None,
                data: bytes::Bytes::copy_from_slice(value.as_bytes()),
            };
            let mut parts = vec![
                field("model", model),
                FormPart {
                    name: "file".into(),
                    file: Some((filename.clone(), upload_type(filename).into())),
                    data: audio.clone(),
                },
            ];
            if let Some(language) = language {
                parts.push(field("language", language));
            }
            // Mistral's endpoint has no prompt and answers JSON only.
            if !provider.mistral_rules {
                if let Some(prompt) = prompt {
                    parts.push(field("prompt", prompt));
                }
                parts.push(field("response_format", response_format));
            }
            ("/audio/transcriptions", MediaBody::Form(parts))
        }
    }
}

/// The media type of an upload, by its name's extension.
fn upload_type(filename: &str) -> &'static str {
    let extension = filename
        .rsplit('.')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match extension.as_str() {
        "mp3" | "mpga" | "mpeg" => "audio/mpeg",
        "mp4" | "m4a" => "audio/mp4",
        "wav" => "audio/wav",
        "webm" => "audio/webm",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "flac" => "audio/flac",
        _ => "application/octet-stream",
    }
}

/// A 2xx answer -> its content.
pub(super) fn parse(
    request: &MediaRequest,
    answer: MediaAnswer<'_>,
) -> Result<MediaResponse, MediaProblem> {
    let (content, usage, model) = match (&request.media, answer) {
        (Media::Image { .. }, MediaAnswer::Json(json)) => {
            (images(json)?, image_usage(json), string_at(json, "model"))
        }
        (Media::Speech { .. }, MediaAnswer::Bytes { content_type, body })
            if content_type.starts_with("text/") || looks_like_text(body) =>
        {
            return Err(format!("a {content_type:?} body of text where audio was expected").into());
        }
        (Media::Speech { format, .. }, MediaAnswer::Bytes { content_type, body }) => {
            let media_type = match content_type.split(';').next().unwrap_or("").trim() {
                "" | "application/octet-stream" => audio_type(format).to_string(),
                given => given.to_string(),
            };
            let content = MediaContent::Audio {
                data: body.to_vec(),
                media_type,
            };
            (content, Usage::default(), None)
        }
        (Media::Speech { format, .. }, MediaAnswer::Json(json)) => {
            // Mistral's speech: the audio as base64 in a JSON body.
            let packed = json
                .get("audio_data")
                .and_then(Value::as_str)
                .ok_or("a JSON answer without audio where audio was asked for")?;
            let content = MediaContent::Audio {
                data: decode(packed)?,
                media_type: audio_type(format).to_string(),
            };
            (content, Usage::default(), string_at(json, "model"))
        }
        (Media::Transcription { .. }, MediaAnswer::Json(json)) => transcript(json)?,
        (
            Media::Transcription {
                response_format, ..
            },
            MediaAnswer::Bytes { content_type, .. },
        ) if response_format.ends_with("json") || content_type.starts_with("text/html") => {
            return Err(format!(
                "a {content_type:?} body where a {response_format} transcript was expected"
            )
            .into());
        }
        (Media::Transcription { .. }, MediaAnswer::Bytes { body, .. }) if html(body) => {
            return Err("an HTML page where a transcript was expected".into());
        }
        (Media::Transcription { .. }, MediaAnswer::Bytes { body, .. }) => {
            // `text`, `srt` or `vtt`: the transcript as it came.
            let text = std::str::from_utf8(body)
                .map_err(|_| "a transcript that is not UTF-8 text")?
                .to_string();
            let content = MediaContent::Transcript {
                text,
                language: None,
                duration: None,
                segments: Vec::new(),
            };
            (content, Usage::default(), None)
        }
        (Media::Image { .. }, MediaAnswer::Bytes { content_type, .. }) => {
            return Err(format!("a {content_type:?} body where JSON was expected").into())
        }
    };
    Ok(MediaResponse {
        content,
        model,
        usage,
        request_id: None,
        status: 200,
        headers: crate::engine::Headers::new(),
    })
}

/// Whether a body is an HTML page (a gateway's, whatever its label).
fn html(body: &[u8]) -> bool {
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(0);
    let head = String::from_utf8_lossy(&body[start..body.len().min(start + 15)]).to_lowercase();
    head.starts_with("<!doctype html") || head.starts_with("<html")
}

fn decode(packed: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(packed)
        .map_err(|_| "base64 data that does not decode".to_string())
}

/// `{"data": [{"b64_json" | "url", "revised_prompt"?}], "output_format"?}`.
fn images(json: &Map<String, Value>) -> Result<MediaContent, String> {
    let data = json
        .get("data")
        .and_then(Value::as_array)
        .ok_or("no data in the response")?;
    let declared = json
        .get("output_format")
        .and_then(Value::as_str)
        .map(|format| format!("image/{}", if format == "jpg" { "jpeg" } else { format }));
    let mut out = Vec::with_capacity(data.len());
    for item in data {
        let revised_prompt = item
            .get("revised_prompt")
            .and_then(Value::as_str)
            .map(str::to_string);
        let url = item.get("url").and_then(Value::as_str).map(str::to_string);
        let bytes = match item.get("b64_json").and_then(Value::as_str) {
            Some(packed) => Some(decode(packed)?),
            None if url.is_some() => None,
            None => return Err("an image with neither b64_json nor url".into()),
        };
        if bytes
            .as_deref()
            .is_some_and(|b| b.is_empty() || looks_like_text(b))
        {
            return Err("b64_json that holds no image (empty, or text)".into());
        }
        let media_type = bytes
            .as_deref()
            .and_then(image_type)
            .map(str::to_string)
            .or_else(|| declared.clone());
        out.push(GeneratedImage {
            data: bytes,
            url,
            media_type,
            revised_prompt,
        });
    }
    Ok(MediaContent::Images(out))
}

/// A GPT image model's token usage (DALL-E reports none).
fn image_usage(json: &Map<String, Value>) -> Usage {
    let usage = json.get("usage").cloned().unwrap_or(Value::Null);
    Usage {
        input_tokens: u64_at(&usage, &["input_tokens"]),
        output_tokens: u64_at(&usage, &["output_tokens"]),
        ..Usage::default()
    }
}

/// `{"text", "language"?, "duration"?, "segments"?, "usage"?}`: the
/// duration from `usage.seconds` when the body has none (whisper-1's json).
fn transcript(json: &Map<String, Value>) -> Result<(MediaContent, Usage, Option<String>), String> {
    let text = json
        .get("text")
        .and_then(Value::as_str)
        .ok_or("no text in the transcript")?
        .to_string();
    let usage_json = json.get("usage").cloned().unwrap_or(Value::Null);
    let seconds = |v: &Value| v.as_f64().filter(|s| s.is_finite() && *s >= 0.0);
    let duration = json
        .get("duration")
        .and_then(seconds)
        .or_else(|| usage_json.get("seconds").and_then(seconds))
        .or_else(|| usage_json.get("prompt_audio_seconds").and_then(seconds));
    let mut segments = Vec::new();
    for segment in json
        .get("segments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(start), Some(end), Some(text)) = (
            segment.get("start").and_then(seconds),
            segment.get("end").and_then(seconds),
            segment.get("text").and_then(Value::as_str),
        ) else {
            return Err("a segment without start, end and text".into());
        };
        segments.push(Segment {
            start,
            end,
            text: text.to_string(),
        });
    }
    let usage = Usage {
        input_tokens: u64_at(&usage_json, &["input_tokens"])
            .or_else(|| u64_at(&usage_json, &["prompt_tokens"])),
        output_tokens: u64_at(&usage_json, &["output_tokens"])
            .or_else(|| u64_at(&usage_json, &["completion_tokens"])),
        ..Usage::default()
    };
    let content = MediaContent::Transcript {
        text,
        language: string_at(json, "language"),
        duration,
        segments,
    };
    Ok((content, usage, string_at(json, "model")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(n: u32, urls: bool, prompt: &str) -> MediaRequest {
        MediaRequest {
            media: Media::Image {
                prompt: prompt.into(),
                size: None,
                n,
                quality: None,
                urls,
            },
            model: None,
            headers: Vec::new(),
        }
    }

    #[test]
    fn what_a_model_documents_it_cannot_take_is_said() {
        assert_eq!(
            unable("dall-e-3", &image(2, false, "fox"), false).as_deref(),
            Some("dall-e-3 makes one image per call (n=1)")
        );
        assert!(
            unable("dall-e-2", &image(1, false, &"x".repeat(1001)), false)
                .unwrap()
                .contains("at most 1000 characters, not 1001")
        );
        assert!(unable("gpt-image-1", &image(1, true, "fox"), false)
            .unwrap()
            .contains("never a URL"));
        // An unknown model (a compatible server's) is not second-guessed.
        assert_eq!(
            unable("flux-dev", &image(4, true, &"x".repeat(5000)), false),
            None
        );
    }

    #[test]
    fn images_are_read_from_base64_or_left_as_urls() {
        let png = b"\x89PNG\r\n\x1a\nrest";
        let packed = base64::engine::general_purpose::STANDARD.encode(png);
        let json = serde_json::json!({
            "data": [{"b64_json": packed, "revised_prompt": "a fox"}, {"url": "https://x/y.png"}],
            "usage": {"input_tokens": 7, "output_tokens": 9},
        });
        let parsed = parse(
            &image(2, false, "fox"),
            MediaAnswer::Json(json.as_object().unwrap()),
        );
        let parsed = parsed.unwrap();
        let MediaContent::Images(images) = parsed.content else {
            panic!("not images")
        };
        assert_eq!(images[0].data.as_deref(), Some(&png[..]));
        assert_eq!(images[0].media_type.as_deref(), Some("image/png"));
        assert_eq!(images[0].revised_prompt.as_deref(), Some("a fox"));
        assert_eq!(images[1].data, None);
        assert_eq!(images[1].url.as_deref(), Some("https://x/y.png"));
        assert_eq!(parsed.usage.output_tokens, Some(9));
        let broken = serde_json::json!({"data": [{"b64_json": "not base64!"}]});
        let broken = parse(
            &image(1, false, "f"),
            MediaAnswer::Json(broken.as_object().unwrap()),
        );
        assert!(broken.unwrap_err().why().contains("does not decode"));
    }

    #[test]
    fn a_transcript_takes_its_duration_from_usage_and_checks_its_segments() {
        let request = MediaRequest {
            media: Media::Transcription {
                audio: bytes::Bytes::from_static(b"RIFF"),
                filename: "a.wav".into(),
                language: None,
                prompt: None,
                response_format: "json".into(),
            },
            model: None,
            headers: Vec::new(),
        };
        let json = serde_json::json!({"text": "hi", "usage": {"type": "duration", "seconds": 4}});
        let parsed = parse(&request, MediaAnswer::Json(json.as_object().unwrap())).unwrap();
        assert_eq!(
            parsed.content,
            MediaContent::Transcript {
                text: "hi".into(),
                language: None,
                duration: Some(4.0),
                segments: Vec::new(),
            }
        );
        let bad = serde_json::json!({"text": "hi", "segments": [{"start": 0.0, "text": "hi"}]});
        let bad = parse(&request, MediaAnswer::Json(bad.as_object().unwrap()));
        assert!(bad.unwrap_err().why().contains("segment"));
        let bytes = MediaAnswer::Bytes {
            content_type: "text/plain",
            body: b"\xff\xfe",
        };
        // Where JSON was asked for, text is no answer; where text was, it
        // must be UTF-8.
        assert!(parse(&request, bytes)
            .unwrap_err()
            .why()
            .contains("json transcript"));
        let mut srt = request.clone();
        if let Media::Transcription {
            response_format, ..
        } = &mut srt.media
        {
            *response_format = "srt".into();
        }
        let not_utf8 = parse(
            &srt,
            MediaAnswer::Bytes {
                content_type: "text/plain",
                body: b"\xff\xfe",
            },
        );
        assert!(not_utf8.unwrap_err().why().contains("not UTF-8"));
    }

    #[test]
    fn uploads_are_typed_by_their_extension() {
        assert_eq!(upload_type("call.WAV"), "audio/wav");
        assert_eq!(upload_type("a.b.mp3"), "audio/mpeg");
        assert_eq!(upload_type("voice.m4a"), "audio/mp4");
        assert_eq!(upload_type("noextension"), "application/octet-stream");
    }
}
