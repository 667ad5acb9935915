//! Reading and writing the JSON every wire speaks: fields of an answer,
//! tool calls in the function form, stream event data, and stable ids.

use serde_json::{Map, Value};

use crate::conversation::ToolCall;

/// A 64-bit FNV-1a digest of `text`: the same in every process and
/// release, for ids a wire needs rewritten (Anthropic's, Mistral's).
pub(super) fn stable_digest(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

pub(super) fn u64_at(value: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(value, |v, key| v.get(key))?.as_u64()
}

/// A tool-call id for a call its wire made without one (Gemini, Ollama):
/// unique, so the history's results pair with their calls on every wire.
pub(super) fn new_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}

/// A `{"id"?, "function": {"name", "arguments"}}` tool call, as Chat
/// Completions and Ollama write them; `id` is what to use when it has none
/// (`None`: an id is required).
pub(super) fn function_call(call: &Value, id: Option<fn() -> String>) -> Result<ToolCall, String> {
    let function = call
        .get("function")
        .ok_or("a tool call without a function")?;
    let given = call
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty());
    let id = match (given, id) {
        (Some(id), _) => id.to_string(),
        (None, Some(make)) => make(),
        (None, None) => return Err("a tool call without an id".into()),
    };
    Ok(ToolCall {
        id,
        name: function
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a tool call without a name")?
            .to_string(),
        // As the model wrote them: not always valid JSON (Ollama sends an object).
        arguments_json: match function.get("arguments") {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => "{}".to_string(),
        },
    })
}

/// The `tool_calls` of a message in the function form (Chat Completions,
/// Ollama): a list, or none when absent or null; anything else is not what
/// the wire promises.
pub(super) fn calls_of(message: &Map<String, Value>) -> Result<&[Value], String> {
    match message.get("tool_calls") {
        Some(Value::Array(calls)) => Ok(calls),
        None | Some(Value::Null) => Ok(&[]),
        Some(other) => Err(format!("tool calls that are not a list: {other}")),
    }
}

/// A stream event's data as a JSON object: anything else is an event that
/// cannot be decoded, a failure of the stream.
pub(super) fn event_json(data: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(data) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("a stream event that is not a JSON object".into()),
        Err(e) => Err(format!("a stream event that is not JSON: {e}")),
    }
}

/// A string field of an answer, owned.
pub(super) fn string_at(json: &Map<String, Value>, key: &str) -> Option<String> {
    json.get(key).and_then(Value::as_str).map(str::to_string)
}

/// A JSON array of numbers as a vector.
pub(super) fn floats(value: &Value) -> Result<Vec<f64>, String> {
    let items = value.as_array().ok_or("an embedding that is not a list")?;
    items
        .iter()
        .map(|x| {
            x.as_f64()
                .ok_or_else(|| format!("an embedding value that is not a number: {x}"))
        })
        .collect()
}
