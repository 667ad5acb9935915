//! Gemini's images, speech and transcription: each is a `generateContent`
//! call. Images and speech ask for another response modality and come back
//! as `inlineData` parts (speech as headerless 16-bit PCM, wrapped here as
//! WAV); a transcription sends the recording as an `inlineData` part with
//! an instruction, and the answer's text is the transcript.

use base64::Engine;
use serde_json::{json, Map, Value};

use super::{filtered, first_candidate, resource, usage_of};
use crate::providers::json::string_at;
use crate::providers::media::{bytes_told, image_type, looks_like_text};
use crate::providers::types::{
    GeneratedImage, Media, MediaContent, MediaRequest, MediaResponse, Usage,
};
use crate::providers::wire_format::{MediaAnswer, MediaBody, MediaProblem};

/// The prebuilt voices of Gemini's speech models, as Google lists them.
const VOICES: [&str; 30] = [
    "Zephyr",
    "Puck",
    "Charon",
    "Kore",
    "Fenrir",
    "Leda",
    "Orus",
    "Aoede",
    "Callirrhoe",
    "Autonoe",
    "Enceladus",
    "Iapetus",
    "Umbriel",
    "Algieba",
    "Despina",
    "Erinome",
    "Algenib",
    "Rasalgethi",
    "Laomedeia",
    "Achernar",
    "Alnilam",
    "Schedar",
    "Gacrux",
    "Pulcherrima",
    "Achird",
    "Zubenelgenubi",
    "Vindemiatrix",
    "Sadachbia",
    "Sadaltager",
    "Sulafat",
];

/// The aspect ratios Gemini's image models take (`imageConfig.aspectRatio`).
const ASPECT_RATIOS: [&str; 10] = [
    "1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9",
];

/// The most a request with inline data may weigh, Google says (20 MB,
/// the prompt and the base64 of the data together); larger needs its Files
/// API, which this library does not use.
const MAX_INLINE_REQUEST_BYTES: usize = 20_000_000;

/// Room left in a request for everything but the recording's base64.
const REQUEST_OVERHEAD_BYTES: usize = 16 * 1024;

/// The sample rate of Gemini's speech when its media type names none.
const SPEECH_RATE: u32 = 24_000;

/// A voice's name as Gemini spells it, whatever its case.
fn voice(name: &str) -> Option<&'static str> {
    VOICES
        .iter()
        .copied()
        .find(|voice| voice.eq_ignore_ascii_case(name.trim()))
}

/// The aspect ratio a `WIDTHxHEIGHT` size asks for (`None`: `auto`, the
/// model's choice), or why Gemini has none like it.
fn aspect_ratio(size: &str) -> Result<Option<&'static str>, String> {
    if size == "auto" {
        return Ok(None);
    }
    let parsed = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u64>().ok()?, h.parse::<u64>().ok()?)))
        .filter(|&(w, h)| w > 0 && h > 0);
    let Some((width, height)) = parsed else {
        return Err(format!("a size of WIDTHxHEIGHT or 'auto', not {size:?}"));
    };
    let (mut a, mut b) = (width, height);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let ratio = format!("{}:{}", width / a, height / a);
    ASPECT_RATIOS
        .iter()
        .copied()
        .find(|r| *r == ratio)
        .map(Some)
        .ok_or_else(|| {
            format!(
                "a size of one of its aspect ratios ({}), and {size} is {ratio}",
                ASPECT_RATIOS.join(", ")
            )
        })
}

/// The media type Gemini knows a recording by, from its file name.
fn recording_type(filename: &str) -> Option<&'static str> {
    let extension = filename.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "wav" => "audio/wav",
        "mp3" | "mpeg" | "mpga" => "audio/mp3",
        "aiff" | "aif" => "audio/aiff",
        "aac" => "audio/aac",
        "ogg" | "oga" => "audio/ogg",
        "flac" => "audio/flac",
        _ => return None,
    })
}

/// Why Gemini cannot take `request` at `provider` (its name: the voice may
/// be its own), if it cannot: what its API has no field for, or documents
/// it refuses.
pub(super) fn unable(provider: &str, request: &MediaRequest) -> Option<String> {
    match &request.media {
        Media::Image {
            size,
            n,
            quality,
            urls,
            ..
        } => {
            if *n > 1 {
                return Some(format!("Gemini makes one image per call (n=1), not {n}"));
            }
            if *urls {
                return Some("Gemini answers with the image, never a URL".into());
            }
            if quality.is_some() {
                return Some("Gemini's image models take no quality=".into());
            }
            size.as_deref().and_then(|size| aspect_ratio(size).err())
        }
        Media::Speech {
            voice,
            format,
            speed,
            ..
        } => {
            let name = voice.for_provider(provider).unwrap_or_default();
            if !matches!(format.as_str(), "wav" | "pcm") {
                return Some(format!(
                    "Gemini speaks WAV or raw PCM (format='wav' or 'pcm'), not {format}"
                ));
            }
            if speed.is_some() {
                return Some("Gemini takes no speed= (ask for a pace in instructions=)".into());
            }
            if self::voice(name).is_none() {
                return Some(format!(
                    "Gemini has no voice {name:?} (its voices: {})",
                    VOICES.join(", ")
                ));
            }
            None
        }
        Media::Transcription {
            audio,
            filename,
            response_format,
            ..
        } => {
            if recording_type(filename).is_none() {
                return Some(format!(
                    "Gemini takes wav, mp3, aiff, aac, ogg or flac recordings, not {filename:?}"
                ));
            }
            if !matches!(response_format.as_str(), "json" | "text") {
                return Some(format!(
                    "Gemini answers with the text only (response_format='json' or 'text'), \
                     not {response_format}"
                ));
            }
            let packed = audio.len().div_ceil(3) * 4;
            if packed + REQUEST_OVERHEAD_BYTES > MAX_INLINE_REQUEST_BYTES {
                return Some(format!(
                    "a recording of at most {} inline (20 MB a request, in base64), not {}",
                    bytes_told((MAX_INLINE_REQUEST_BYTES - REQUEST_OVERHEAD_BYTES) / 4 * 3),
                    bytes_told(audio.len())
                ));
            }
            None
        }
    }
}

/// What a transcription asks the model, with the call's language and
/// prompt (names, spellings) as context.
fn transcription_instruction(language: Option<&str>, prompt: Option<&str>) -> String {
    let mut instruction = String::from(
        "Transcribe the speech in this recording, word for word. Answer with the \
         transcript only: no introduction, no notes, no timestamps.",
    );
    if let Some(language) = language {
        instruction.push_str(&format!(" The speech is in {language}."));
    }
    if let Some(prompt) = prompt {
        instruction.push_str(&format!(
            " Context for names and spellings (not to be transcribed): {prompt}"
        ));
    }
    instruction
}

/// The request for `model` at `provider` (its name): its path (under the
/// base URL) and body.
pub(super) fn build(provider: &str, model: &str, request: &MediaRequest) -> (String, MediaBody) {
    let path = format!("/{}:generateContent", resource(model));
    let user = |parts: Value| json!([{"role": "user", "parts": parts}]);
    let body = match &request.media {
        Media::Image { prompt, size, .. } => {
            let mut config = json!({"responseModalities": ["TEXT", "IMAGE"]});
            if let Some(Ok(Some(ratio))) = size.as_deref().map(aspect_ratio) {
                config["imageConfig"] = json!({ "aspectRatio": ratio });
            }
            json!({"contents": user(json!([{"text": prompt}])), "generationConfig": config})
        }
        Media::Speech {
            text,
            voice,
            instructions,
            ..
        } => {
            let name = voice.for_provider(provider).unwrap_or_default();
            // Gemini's speech is steered by the prompt itself ("Say
            // cheerfully: ..."), not by a field.
            let spoken = match instructions {
                Some(how) => format!("{}: {text}", how.trim().trim_end_matches([':', '.'])),
                None => text.clone(),
            };
            let voice_name = self::voice(name).unwrap_or(name);
            json!({
                "contents": user(json!([{"text": spoken}])),
                "generationConfig": {
                    "responseModalities": ["AUDIO"],
                    "speechConfig": {
                        "voiceConfig": {"prebuiltVoiceConfig": {"voiceName": voice_name}}
                    },
                },
            })
        }
        Media::Transcription {
            audio,
            filename,
            language,
            prompt,
            ..
        } => {
            let mime_type = recording_type(filename).unwrap_or("audio/wav");
            let data = base64::engine::general_purpose::STANDARD.encode(audio);
            let instruction = transcription_instruction(language.as_deref(), prompt.as_deref());
            json!({
                "contents": user(json!([
                    {"text": instruction},
                    {"inlineData": {"mimeType": mime_type, "data": data}},
                ])),
                "generationConfig": {"responseMimeType": "text/plain"},
            })
        }
    };
    (path, MediaBody::Json(body))
}

/// A piece of inline data: its media type and its bytes.
fn inline_data(part: &Value) -> Result<Option<(String, Vec<u8>)>, String> {
    let Some(blob) = part.get("inlineData").or_else(|| part.get("inline_data")) else {
        return Ok(None);
    };
    let mime_type = blob
        .get("mimeType")
        .or_else(|| blob.get("mime_type"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let data = blob
        .get("data")
        .and_then(Value::as_str)
        .ok_or("inline data without its data")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| "inline data whose base64 does not decode")?;
    Ok(Some((mime_type, bytes)))
}

/// The reason an answer says its content was blocked, if it says one.
fn blocked(json: &Map<String, Value>, candidate: Option<&Map<String, Value>>) -> Option<String> {
    if let Some(reason) = json
        .get("promptFeedback")
        .and_then(|f| f.get("blockReason"))
        .and_then(Value::as_str)
    {
        return Some(format!("its safety filters blocked the prompt ({reason})"));
    }
    let reason = candidate?.get("finishReason")?.as_str()?;
    // NO_IMAGE: the model declined to draw, as its filters do.
    (filtered(reason) || reason == "NO_IMAGE").then(|| format!("it declined to make it ({reason})"))
}

/// `pcm` as a WAV file: one channel of 16-bit little-endian samples at
/// `rate` (what Gemini's `audio/L16;codec=pcm;rate=24000` holds, whatever
/// L16's byte order says elsewhere).
fn wav(pcm: &[u8], rate: u32) -> Result<Vec<u8>, String> {
    let size = u32::try_from(pcm.len())
        .ok()
        .filter(|size| *size <= u32::MAX - 36)
        .ok_or("audio too long for one WAV file")?;
    let mut out = Vec::with_capacity(44 + pcm.len());
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + size).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes()); // the fmt chunk's size
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // one channel
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes()); // bytes a second
    out.extend_from_slice(&2u16.to_le_bytes()); // bytes a sample
    out.extend_from_slice(&16u16.to_le_bytes()); // bits a sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(pcm);
    Ok(out)
}

/// Whether a media type is headerless PCM, and its sample rate.
fn pcm_rate(mime_type: &str) -> Option<u32> {
    let mut params = mime_type.split(';').map(str::trim);
    let essence = params.next()?;
    if !matches!(essence, "audio/l16" | "audio/pcm") {
        return None;
    }
    let rate = params
        .filter_map(|p| p.strip_prefix("rate="))
        .find_map(|r| r.parse::<u32>().ok())
        .filter(|r| (8_000..=192_000).contains(r));
    Some(rate.unwrap_or(SPEECH_RATE))
}

/// A 2xx answer -> its content.
pub(super) fn parse(
    request: &MediaRequest,
    answer: MediaAnswer<'_>,
) -> Result<MediaResponse, MediaProblem> {
    let MediaAnswer::Json(json) = answer else {
        return Err("a body that is not JSON where generateContent answers in JSON".into());
    };
    let usage = json
        .get("usageMetadata")
        .filter(|u| u.is_object())
        .map_or_else(Usage::default, usage_of);
    let candidate = first_candidate(json)?;
    let parts: &[Value] = candidate.map_or(&[], |(_, parts)| parts);
    // Thought parts (a Gemini 3 model's interim images) are not the answer.
    let answer_parts = parts
        .iter()
        .filter(|p| p.get("thought") != Some(&Value::Bool(true)));
    let refusal = blocked(json, candidate.map(|(c, _)| c));
    // Speech and a transcript are whole only when the model stopped of
    // itself: any other end (the output limit, OTHER, ...) cut them short.
    let finish = candidate.and_then(|(c, _)| c.get("finishReason")?.as_str());
    let cut = match finish {
        None | Some("STOP") => None,
        Some(other) => Some(other),
    };
    let content = match &request.media {
        Media::Image { .. } => {
            let mut images = Vec::new();
            let mut said = String::new();
            for part in answer_parts {
                if let Some((mime_type, data)) = inline_data(part)? {
                    let sniffed = image_type(&data);
                    // A type we know by its first bytes must have them; another
                    // image type must at least not be text.
                    let known = matches!(
                        mime_type.as_str(),
                        "image/png" | "image/jpeg" | "image/webp" | "image/gif"
                    );
                    let media_type = match sniffed {
                        Some(found) => Some(found.to_string()),
                        None if mime_type.starts_with("image/")
                            && !known
                            && !data.is_empty()
                            && !looks_like_text(&data) =>
                        {
                            Some(mime_type)
                        }
                        None => None,
                    };
                    if media_type.is_none() {
                        continue; // inline data that is no image
                    }
                    images.push(GeneratedImage {
                        data: Some(data),
                        url: None,
                        media_type,
                        revised_prompt: None,
                    });
                } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                    said.push_str(text);
                }
            }
            if images.is_empty() {
                return Err(no_content(refusal, "no image in the answer", &said));
            }
            MediaContent::Images(images)
        }
        Media::Speech { format, .. } => {
            let mut pcm = Vec::new();
            let mut whole = None;
            let mut rate = None;
            for part in answer_parts {
                let Some((mime_type, data)) = inline_data(part)? else {
                    continue;
                };
                match pcm_rate(&mime_type) {
                    Some(r) if rate.is_none_or(|seen| seen == r) => {
                        rate = Some(r);
                        pcm.extend_from_slice(&data);
                    }
                    Some(_) => return Err("speech in parts of different sample rates".into()),
                    // Audio in a container already (a WAV file): as it came.
                    None if mime_type.starts_with("audio/") && whole.is_none() => {
                        whole = Some((mime_type, data))
                    }
                    None => {
                        return Err(
                            format!("a {mime_type:?} part where speech was asked for").into()
                        )
                    }
                }
            }
            if let (None, Some(reason)) = (&refusal, cut) {
                return Err(format!("speech cut short ({reason})").into());
            }
            if rate.is_some() && pcm.is_empty() {
                return Err(no_content(refusal, "no audio in the answer", ""));
            }
            if pcm.len() % 2 != 0 {
                return Err("16-bit speech that ends inside a sample".into());
            }
            let (data, media_type) = match (rate, whole, format.as_str()) {
                (Some(rate), None, "wav") => (wav(&pcm, rate)?, "audio/wav".to_string()),
                (Some(rate), None, _) => (pcm, format!("audio/pcm;rate={rate}")),
                (None, Some((mime_type, data)), "wav")
                    if matches!(mime_type.as_str(), "audio/wav" | "audio/x-wav") =>
                {
                    (data, "audio/wav".to_string())
                }
                (None, Some((mime_type, _)), _) => {
                    return Err(
                        format!("speech as {mime_type:?} where {format} was asked for").into(),
                    )
                }
                _ => return Err(no_content(refusal, "no audio in the answer", "")),
            };
            MediaContent::Audio { data, media_type }
        }
        Media::Transcription { .. } => {
            let mut text = String::new();
            for part in answer_parts {
                if let Some(piece) = part.get("text") {
                    text.push_str(piece.as_str().ok_or("a text part that is not text")?);
                }
            }
            if let Some(why) = refusal {
                return Err(MediaProblem::Refused(why));
            }
            if cut == Some("MAX_TOKENS") {
                return Err("a transcript cut short at the output limit (MAX_TOKENS)".into());
            }
            if let Some(reason) = cut {
                return Err(format!("a transcript that ended with {reason}, not STOP").into());
            }
            if text.trim().is_empty() {
                return Err("no transcript in the answer".into());
            }
            MediaContent::Transcript {
                text: text.trim().to_string(),
                language: None,
                duration: None,
                segments: Vec::new(),
            }
        }
    };
    Ok(MediaResponse {
        content,
        model: string_at(json, "modelVersion"),
        usage,
        request_id: None,
        status: 200,
        headers: crate::engine::Headers::new(),
    })
}

/// An answer without what was asked for: refused where the answer says its
/// filters blocked it, else malformed (quoting what the model said instead).
fn no_content(refusal: Option<String>, missing: &str, said: &str) -> MediaProblem {
    if let Some(why) = refusal {
        return MediaProblem::Refused(why);
    }
    let said = said.trim();
    if said.is_empty() {
        return MediaProblem::Malformed(missing.to_string());
    }
    let quoted: String = said.chars().take(200).collect();
    let more = if quoted.len() < said.len() { "..." } else { "" };
    MediaProblem::Malformed(format!("{missing} (it said: {quoted:?}{more})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::types::Voice;

    fn request(media: Media) -> MediaRequest {
        MediaRequest {
            media,
            model: None,
            headers: Vec::new(),
        }
    }

    fn image(size: Option<&str>, n: u32) -> MediaRequest {
        request(Media::Image {
            prompt: "a fox".into(),
            size: size.map(str::to_string),
            n,
            quality: None,
            urls: false,
        })
    }

    fn speech(voice: &str, format: &str) -> MediaRequest {
        request(Media::Speech {
            text: "Hello".into(),
            voice: Voice::Every(voice.into()),
            format: format.into(),
            speed: None,
            instructions: Some("Say cheerfully.".into()),
        })
    }

    fn parsed(request: &MediaRequest, json: Value) -> Result<MediaResponse, MediaProblem> {
        parse(request, MediaAnswer::Json(json.as_object().unwrap()))
    }

    #[test]
    fn a_size_picks_an_aspect_ratio_gemini_has() {
        assert_eq!(aspect_ratio("1024x1024"), Ok(Some("1:1")));
        assert_eq!(aspect_ratio("1536x1024"), Ok(Some("3:2")));
        assert_eq!(aspect_ratio("1920x1080"), Ok(Some("16:9")));
        assert_eq!(aspect_ratio("auto"), Ok(None));
        assert!(aspect_ratio("1000x999").unwrap_err().contains("1000:999"));
        assert!(aspect_ratio("0x5").is_err());
        let (_, MediaBody::Json(body)) =
            build("g", "gemini-2.5-flash-image", &image(Some("1920x1080"), 1))
        else {
            panic!("not JSON")
        };
        assert_eq!(
            body["generationConfig"]["imageConfig"]["aspectRatio"],
            "16:9"
        );
    }

    #[test]
    fn what_gemini_has_no_field_for_is_refused_before_sending() {
        assert!(unable("g", &image(None, 2))
            .unwrap()
            .contains("one image per call"));
        assert!(unable("g", &image(Some("1000x999"), 1)).is_some());
        assert_eq!(unable("g", &image(Some("1024x1024"), 1)), None);
        assert!(unable("g", &speech("Kore", "mp3"))
            .unwrap()
            .contains("not mp3"));
        assert!(unable("g", &speech("alloy", "wav"))
            .unwrap()
            .contains("no voice \"alloy\""));
        assert_eq!(unable("g", &speech("kore", "wav")), None);
        let big = request(Media::Transcription {
            audio: bytes::Bytes::from(vec![0u8; 15_000_000]),
            filename: "a.wav".into(),
            language: None,
            prompt: None,
            response_format: "json".into(),
        });
        assert!(unable("g", &big).unwrap().contains(
            "at most 14,987,712 bytes inline (20 MB a request, in base64), \
                 not 15,000,000 bytes"
        ));
    }

    #[test]
    fn speech_is_asked_for_with_its_voice_and_instructions() {
        let (path, MediaBody::Json(body)) =
            build("g", "gemini-2.5-flash-preview-tts", &speech("kore", "wav"))
        else {
            panic!("not JSON")
        };
        assert_eq!(path, "/models/gemini-2.5-flash-preview-tts:generateContent");
        assert_eq!(
            body,
            json!({
                "contents": [{"role": "user", "parts": [{"text": "Say cheerfully: Hello"}]}],
                "generationConfig": {
                    "responseModalities": ["AUDIO"],
                    "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}},
                },
            })
        );
    }

    #[test]
    fn a_voice_by_provider_asks_each_for_its_own() {
        let mut request = speech("", "wav");
        if let Media::Speech { voice, .. } = &mut request.media {
            *voice = Voice::ByProvider(vec![
                ("o".into(), "alloy".into()),
                ("g".into(), "puck".into()),
            ]);
        }
        // OpenAI's "alloy" is not Gemini's, and is not asked of it.
        assert_eq!(unable("g", &request), None);
        let (_, MediaBody::Json(body)) = build("g", "gemini-2.5-flash-preview-tts", &request)
        else {
            panic!("not JSON")
        };
        assert_eq!(
            body["generationConfig"]["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]
                ["voiceName"],
            "Puck"
        );
    }

    #[test]
    fn speech_comes_back_as_wav_or_as_its_pcm() {
        let pcm: Vec<u8> = (0u8..=99).collect();
        let packed = base64::engine::general_purpose::STANDARD.encode(&pcm);
        let answer = json!({"candidates": [{"content": {"parts": [
            {"inlineData": {"mimeType": "audio/L16;codec=pcm;rate=24000", "data": packed}}
        ]}, "finishReason": "STOP"}], "modelVersion": "gemini-2.5-flash-preview-tts"});
        let wave = parsed(&speech("Kore", "wav"), answer.clone()).unwrap();
        let MediaContent::Audio { data, media_type } = wave.content else {
            panic!("no audio")
        };
        assert_eq!(media_type, "audio/wav");
        assert_eq!(&data[..4], b"RIFF");
        assert_eq!(u32::from_le_bytes(data[24..28].try_into().unwrap()), 24_000);
        assert_eq!(u32::from_le_bytes(data[40..44].try_into().unwrap()), 100);
        assert_eq!(&data[44..], &pcm[..]);
        let silent = json!({"candidates": [{"content": {"parts": [
            {"inlineData": {"mimeType": "audio/L16;codec=pcm;rate=24000", "data": ""}}
        ]}}]});
        assert!(parsed(&speech("Kore", "wav"), silent).is_err());
        let odd = json!({"candidates": [{"content": {"parts": [
            {"inlineData": {"mimeType": "audio/L16;codec=pcm;rate=24000", "data": "AQAC"}}
        ]}}]});
        assert!(parsed(&speech("Kore", "wav"), odd)
            .unwrap_err()
            .why()
            .contains("inside a sample"));
        let raw = parsed(&speech("Kore", "pcm"), answer).unwrap();
        assert_eq!(
            raw.content,
            MediaContent::Audio {
                data: pcm,
                media_type: "audio/pcm;rate=24000".into()
            }
        );
        assert_eq!(raw.model.as_deref(), Some("gemini-2.5-flash-preview-tts"));
    }

    #[test]
    fn an_answer_blocked_by_its_filters_is_refused_and_a_text_only_one_is_malformed() {
        let blocked = json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}});
        assert!(matches!(
            parsed(&image(None, 1), blocked),
            Err(MediaProblem::Refused(why)) if why.contains("PROHIBITED_CONTENT")
        ));
        let declined = json!({"candidates": [{"finishReason": "IMAGE_SAFETY"}]});
        assert!(matches!(
            parsed(&image(None, 1), declined),
            Err(MediaProblem::Refused(_))
        ));
        let chatty = json!({"candidates": [{"content": {"parts": [{"text": "Which fox?"}]},
            "finishReason": "STOP"}]});
        assert_eq!(
            parsed(&image(None, 1), chatty).unwrap_err(),
            MediaProblem::Malformed("no image in the answer (it said: \"Which fox?\")".into())
        );
        let truncated = json!({"candidates": [{"content": {"parts": [
            {"inlineData": {"mimeType": "image/png", "data": "__BINARY_TRUNCATED__:len=5"}}
        ]}}]});
        let text_blob = json!({"candidates": [{"content": {"parts": [
            {"inlineData": {"mimeType": "text/plain", "data": "aGVsbG8="}}
        ]}}]});
        assert!(parsed(&image(None, 1), text_blob)
            .unwrap_err()
            .why()
            .contains("no image"));
        assert!(parsed(&image(None, 1), truncated)
            .unwrap_err()
            .why()
            .contains("does not decode"));
    }

    #[test]
    fn a_transcript_is_the_answers_text_and_the_recording_goes_inline() {
        let request = request(Media::Transcription {
            audio: bytes::Bytes::from_static(b"RIFFxxxxWAVE"),
            filename: "call.WAV".into(),
            language: Some("en".into()),
            prompt: Some("Ruby".into()),
            response_format: "json".into(),
        });
        let (_, MediaBody::Json(body)) = build("g", "gemini-2.5-flash", &request) else {
            panic!("not JSON")
        };
        let parts = &body["contents"][0]["parts"];
        assert!(parts[0]["text"].as_str().unwrap().contains("in en."));
        assert_eq!(parts[1]["inlineData"]["mimeType"], "audio/wav");
        assert_eq!(parts[1]["inlineData"]["data"], "UklGRnh4eHhXQVZF");
        let answer = json!({"candidates": [{"content": {"parts": [{"text": " Hello there.\n"}]}}],
            "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 4}});
        let transcript = parsed(&request, answer).unwrap();
        assert_eq!(
            transcript.content,
            MediaContent::Transcript {
                text: "Hello there.".into(),
                language: None,
                duration: None,
                segments: Vec::new()
            }
        );
        assert_eq!(transcript.usage.input_tokens, Some(120));
        assert!(parsed(&request, json!({})).is_err());
        let cut = json!({"candidates": [{"content": {"parts": [{"text": "Hello th"}]},
            "finishReason": "MAX_TOKENS"}]});
        assert!(parsed(&request, cut)
            .unwrap_err()
            .why()
            .contains("MAX_TOKENS"));
        let empty = json!({"candidates": [{"content": {}, "finishReason": "STOP"}]});
        assert!(parsed(&request, empty).is_err());
        let recited = json!({"candidates": [{"content": {"parts": [{"text": "Hel"}]},
            "finishReason": "RECITATION"}]});
        assert!(matches!(
            parsed(&request, recited),
            Err(MediaProblem::Refused(_))
        ));
    }
}
