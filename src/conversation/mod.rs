//! The neutral conversation every wire translates to and from: OpenAI-style
//! messages, the lingua franca callers already know, read once into typed
//! values. Checked here, before any request is sent, so a malformed
//! conversation is the caller's error at once rather than a provider's 400
//! after a retry or a failover.

use serde_json::Value;

/// The roles a message may have.
pub const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

/// One piece of a message's content.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text(String),
    /// An image by URL: `https://...` or `data:image/png;base64,...`, with
    /// OpenAI's `detail` (`"low"`, `"high"`, ...) when given: sent on
    /// Chat Completions wires, which read it, and nowhere else.
    Image {
        url: String,
        detail: Option<String>,
    },
}

/// `data:image/png;base64,AAAA` -> (`image/png`, `AAAA`).
pub fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    Some((media_type, data))
}

/// A tool call the model made (in a response) or made earlier (in history).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON text.
    pub arguments_json: String,
}

impl ToolCall {
    /// The arguments as a JSON object, for wires that send them parsed
    /// (checked as an object when the history was read).
    pub fn arguments_value(&self) -> Value {
        serde_json::from_str(&self.arguments_json)
            .unwrap_or_else(|_| Value::Object(serde_json::Map::new()))
    }
}

/// Each call's function name by its id, for results that must name the
/// function they answer (Gemini's `functionResponse`, Ollama's `tool_name`).
pub fn call_names(messages: &[Message]) -> std::collections::HashMap<&str, &str> {
    messages
        .iter()
        .flat_map(|m| m.tool_calls.iter())
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect()
}

#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
    /// An assistant's calls.
    pub tool_calls: Vec<ToolCall>,
    /// A tool message: the call it answers.
    pub tool_call_id: Option<String>,
    /// A participant's name (OpenAI's `name`), passed on where a wire has it.
    pub name: Option<String>,
    /// A tool message reporting that the call failed (`"is_error": true`),
    /// for wires that can say so (Anthropic's `tool_result.is_error`).
    pub is_error: bool,
    /// An assistant's opaque extras for the wire that wrote them (Anthropic's
    /// signed thinking blocks under `"anthropic"`): re-sent to that wire,
    /// dropped on others.
    pub provider_data: Option<Value>,
}

impl Message {
    /// The text parts, joined.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::Image { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// A JSON schema of the arguments.
    pub parameters: Value,
    /// Ask the provider to hold the arguments to the schema exactly.
    pub strict: Option<bool>,
}

impl Tool {
    /// The tool as a JSON object, its schema under `schema_key` (the one
    /// field whose name the wires disagree on: `parameters`, `input_schema`).
    pub fn fields(&self, schema_key: &str) -> serde_json::Map<String, Value> {
        let mut fields = serde_json::Map::new();
        fields.insert("name".into(), Value::from(self.name.as_str()));
        if let Some(description) = &self.description {
            fields.insert("description".into(), Value::from(description.as_str()));
        }
        fields.insert(schema_key.into(), self.parameters.clone());
        if let Some(strict) = self.strict {
            fields.insert("strict".into(), Value::from(strict));
        }
        fields
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Named(String),
}

/// Reads and checks a conversation; the error says which message is wrong
/// and why.
pub fn parse_messages(messages: &[Value]) -> Result<Vec<Message>, String> {
    if messages.is_empty() {
        return Err("the conversation is empty: give a prompt or at least one message".into());
    }
    let parsed = messages
        .iter()
        .enumerate()
        .map(|(index, m)| parse_message(m).map_err(|why| format!("message {index}: {why}")))
        .collect::<Result<Vec<_>, _>>()?;
    check_conversation(&parsed)?;
    Ok(parsed)
}

/// What holds across messages: each tool result answers a call made before
/// it (every wire refuses an orphan, and Gemini names a result by its
/// call's function), each call is answered by the tool messages right after
/// its turn (Chat Completions and Anthropic refuse a call left open), and
/// there is something to answer.
fn check_conversation(messages: &[Message]) -> Result<(), String> {
    let mut calls: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (index, m) in messages.iter().enumerate() {
        calls.extend(m.tool_calls.iter().map(|c| c.id.as_str()));
        let answered = || {
            messages[index + 1..]
                .iter()
                .take_while(|next| next.role == Role::Tool)
                .filter_map(|next| next.tool_call_id.as_deref())
        };
        let open: Vec<&str> = m
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .filter(|id| !answered().any(|a| a == *id))
            .collect();
        if !open.is_empty() {
            return Err(format!(
                "message {index}: the tool calls {open:?} have no result in the tool messages \
                 right after it: give one for each (\"cancelled\" if the tool did not run)"
            ));
        }
        if let Some(id) = &m.tool_call_id {
            if !calls.contains(id.as_str()) {
                return Err(format!(
                    "message {index}: a tool result for call {id:?}, which no assistant \
                     message before it made (in 'tool_calls')"
                ));
            }
        }
    }
    let said = |m: &Message| {
        !m.tool_calls.is_empty()
            || m.role == Role::Tool
            || m.parts.iter().any(|p| match p {
                Part::Text(text) => !text.trim().is_empty(),
                Part::Image { .. } => true,
            })
    };
    let turns = messages
        .iter()
        .filter(|m| !matches!(m.role, Role::System | Role::Developer));
    if turns.clone().next().is_some() && !turns.clone().any(said) {
        return Err("the conversation has nothing to answer: every message is empty".into());
    }
    Ok(())
}

fn parse_message(message: &Value) -> Result<Message, String> {
    let Value::Object(fields) = message else {
        return Err("a message must be a dict with a 'role' and 'content'".into());
    };
    let role = match fields.get("role") {
        Some(Value::String(role)) => role.as_str(),
        Some(other) => return Err(format!("'role' must be a str, got {other}")),
        None => return Err("a message needs a 'role'".into()),
    };
    let role = match role {
        "system" => Role::System,
        "developer" => Role::Developer,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        other => {
            return Err(format!(
                "unknown role {other:?}; use one of {}",
                ROLES.join(", ")
            ))
        }
    };
    let tool_calls = match fields.get("tool_calls") {
        Some(Value::Array(calls)) if role == Role::Assistant => calls
            .iter()
            .enumerate()
            .map(|(i, c)| parse_history_call(c).map_err(|why| format!("tool call {i}: {why}")))
            .collect::<Result<Vec<_>, _>>()?,
        Some(Value::Null) | None => Vec::new(),
        Some(_) if role == Role::Assistant => return Err("'tool_calls' must be a list".into()),
        Some(_) => return Err("only an assistant message carries 'tool_calls'".into()),
    };
    let tool_call_id = match (role, fields.get("tool_call_id")) {
        (Role::Tool, Some(Value::String(id))) if !id.is_empty() => Some(id.clone()),
        (Role::Tool, _) => {
            return Err("a tool message needs 'tool_call_id': the id of the call it answers".into())
        }
        _ => None,
    };
    let role_name = ROLES[role as usize];
    let parts = match fields.get("content") {
        Some(Value::String(text)) => vec![Part::Text(text.clone())],
        Some(Value::Array(parts)) if !parts.is_empty() => parts
            .iter()
            .enumerate()
            .map(|(i, p)| parse_part(p).map_err(|why| format!("content part {i}: {why}")))
            .collect::<Result<Vec<_>, _>>()?,
        Some(Value::Array(_)) if !tool_calls.is_empty() => Vec::new(),
        Some(Value::Array(_)) => return Err("'content' is an empty list".into()),
        Some(Value::Null) | None if !tool_calls.is_empty() => Vec::new(),
        Some(Value::Null) | None => {
            return Err(format!(
                "a {role_name} message needs 'content' (a str or a list of parts)"
            ))
        }
        Some(other) => {
            return Err(format!(
                "'content' must be a str or a list of parts, got {other}"
            ))
        }
    };
    // No provider takes an image from its own side of the conversation
    // (Chat Completions' assistant content is text and refusals).
    if matches!(role, Role::System | Role::Developer | Role::Assistant)
        && parts.iter().any(|p| matches!(p, Part::Image { .. }))
    {
        let article = if role == Role::Assistant { "an" } else { "a" };
        return Err(format!(
            "{article} {role_name} message takes text only, not images"
        ));
    }
    let provider_data = match fields.get("provider_data") {
        Some(data @ Value::Object(_)) if role == Role::Assistant => Some(data.clone()),
        Some(Value::Null) | None => None,
        Some(_) => return Err("'provider_data' belongs on an assistant message, as a dict".into()),
    };
    let name = fields
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string);
    let is_error = match fields.get("is_error") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) if role == Role::Tool => *flag,
        Some(_) if role == Role::Tool => return Err("'is_error' must be True or False".into()),
        Some(_) => return Err("only a tool message carries 'is_error'".into()),
    };
    Ok(Message {
        role,
        parts,
        tool_calls,
        tool_call_id,
        name,
        is_error,
        provider_data,
    })
}

fn parse_part(part: &Value) -> Result<Part, String> {
    match part.get("type").and_then(Value::as_str) {
        Some("text") => match part.get("text") {
            Some(Value::String(text)) => Ok(Part::Text(text.clone())),
            _ => Err("a text part needs 'text' (a str)".into()),
        },
        // A refusal the OpenAI SDK dumped into the history is its text.
        Some("refusal") => match part.get("refusal") {
            Some(Value::String(text)) => Ok(Part::Text(text.clone())),
            _ => Err("a refusal part needs 'refusal' (a str)".into()),
        },
        Some("image_url") => {
            let image = part.get("image_url");
            let url = image
                .and_then(|i| i.get("url").or(Some(i)))
                .and_then(Value::as_str);
            let detail = match image.and_then(|i| i.get("detail")) {
                None | Some(Value::Null) => None,
                // Passed on as given: OpenAI adds values ("original").
                Some(Value::String(d)) if !d.trim().is_empty() => Some(d.clone()),
                Some(other) => {
                    return Err(format!(
                        "an image's 'detail' is a str (\"auto\", \"low\", \"high\", \
                         \"original\"), got {other}"
                    ))
                }
            };
            let image = |url: &str| Part::Image {
                url: url.to_string(),
                detail: detail.clone(),
            };
            match url {
                Some(url) if url.starts_with("data:") => Ok(image(&normalized_data_url(url)?)),
                Some(url) if url.starts_with("https://") || url.starts_with("http://") => {
                    Ok(image(url))
                }
                _ => Err(
                    "an image_url part needs {'url': 'https://...' or 'data:image/...;base64,...'}"
                        .into(),
                ),
            }
        }
        Some(other) => Err(format!(
            "unsupported content part type {other:?}: use \"text\" or \"image_url\""
        )),
        None => Err("a part must be a dict with a 'type' (\"text\", \"image_url\")".into()),
    }
}

/// Why `name` cannot name a tool, or `None`: 1 to 64 letters, digits, `_`
/// or `-` (what the providers accept), and not a `tool_choice` word.
pub fn tool_name_problem(name: &str) -> Option<String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Some(format!(
            "tool name {name:?}: use 1 to 64 letters, digits, '_' or '-', as providers require"
        ));
    }
    if ["auto", "none", "required"].contains(&name) {
        return Some(format!(
            "a tool may not be named {name:?}: tool_choice={name:?} means something else"
        ));
    }
    None
}

/// A `data:` image URL in the one form every wire takes,
/// `data:<type>/<subtype>;base64,<base64>`: RFC 2397 parameters
/// (`;charset=`, `;name=`) dropped, `;BASE64` in any case, the media type
/// in lower case, the line breaks `base64` tools wrap their output in
/// removed, and URL-safe base64 written in the standard alphabet, padded.
fn normalized_data_url(url: &str) -> Result<String, String> {
    const FORM: &str = "an image data URL is 'data:image/png;base64,<base64>'";
    let (head, payload) = url["data:".len()..]
        .split_once(',')
        .ok_or_else(|| format!("{FORM}; this one has no ','"))?;
    let mut params = head.split(';');
    let media_type = params.next().unwrap_or("").trim();
    if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err(format!("{FORM}; this one is not base64"));
    }
    let valid_type = media_type
        .split_once('/')
        .is_some_and(|(kind, sub)| !kind.is_empty() && !sub.is_empty());
    if !valid_type {
        return Err(format!(
            "{FORM}; its media type {media_type:?} is not type/subtype"
        ));
    }
    let payload: String = payload
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let digits = payload.trim_end_matches('=');
    let padding = payload.len() - digits.len();
    let is_base64 = !digits.is_empty()
        && padding <= 2
        && (if padding > 0 {
            payload.len() % 4 == 0
        } else {
            digits.len() % 4 != 1
        })
        && digits
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_'));
    if !is_base64 {
        return Err(format!("{FORM}; what follows ',' is not base64"));
    }
    let mut standard: String = digits
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while standard.len() % 4 != 0 {
        standard.push('=');
    }
    let media_type = media_type.to_ascii_lowercase();
    Ok(format!("data:{media_type};base64,{standard}"))
}

/// An assistant's earlier call, OpenAI-style: `{"id", "type": "function",
/// "function": {"name", "arguments": "<JSON text>"}}`.
fn parse_history_call(call: &Value) -> Result<ToolCall, String> {
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("a tool call needs an 'id'")?;
    let function = call
        .get("function")
        .ok_or("a tool call needs a 'function'")?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("a tool call's function needs a 'name'")?;
    let arguments_json = match function.get("arguments") {
        // Some servers write "" for a call without arguments.
        Some(Value::String(text)) if text.trim().is_empty() => "{}".to_string(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Object(map)) => Value::Object(map.clone()).to_string(),
        None | Some(Value::Null) => "{}".to_string(),
        Some(other) => return Err(format!("'arguments' must be JSON text, got {other}")),
    };
    match serde_json::from_str::<Value>(&arguments_json) {
        Ok(Value::Object(_)) => {}
        Ok(_) => {
            return Err(format!(
                "the arguments of call {id:?} must be a JSON object, got {arguments_json:?}"
            ))
        }
        Err(_) => {
            return Err(format!(
                "the arguments of call {id:?} are not JSON ({arguments_json:?}): repair or drop \
                 the call before sending the history again"
            ))
        }
    }
    Ok(ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        arguments_json,
    })
}

/// Reads the tools a call offers: `{"name", "description", "parameters"}`,
/// or OpenAI's `{"type": "function", "function": {...}}`.
pub fn parse_tools(tools: &[Value]) -> Result<Vec<Tool>, String> {
    let mut out: Vec<Tool> = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let spec = match tool.get("type").and_then(Value::as_str) {
            Some("function") => tool.get("function").unwrap_or(tool),
            _ => tool,
        };
        let name = spec
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("tool {i} needs a 'name'"))?;
        if out.iter().any(|t| t.name == name) {
            return Err(format!("two tools are named {name:?}"));
        }
        let parameters = match spec.get("parameters") {
            None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
            Some(schema @ Value::Object(_)) => schema.clone(),
            Some(other) => {
                return Err(format!(
                    "tool {name:?}: 'parameters' must be a JSON schema (a dict), got {other}"
                ))
            }
        };
        if let Some(problem) = tool_name_problem(name) {
            return Err(problem);
        }
        out.push(Tool {
            strict: spec.get("strict").and_then(Value::as_bool),
            name: name.to_string(),
            description: spec
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string),
            parameters,
        });
    }
    Ok(out)
}

/// `"auto"`, `"none"`, `"required"` or the name of an offered tool.
pub fn parse_tool_choice(choice: &str, tools: &[Tool]) -> Result<ToolChoice, String> {
    match choice {
        "auto" => Ok(ToolChoice::Auto),
        "none" => Ok(ToolChoice::None),
        "required" => Ok(ToolChoice::Required),
        name if tools.iter().any(|t| t.name == name) => Ok(ToolChoice::Named(name.to_string())),
        other => Err(format!(
            "tool_choice must be \"auto\", \"none\", \"required\" or the name of a tool given \
             in tools=, got {other:?}"
        )),
    }
}

/// Structured output: JSON, or JSON that follows a schema.
#[derive(Clone, Debug, PartialEq)]
pub enum ResponseFormat {
    JsonObject,
    JsonSchema {
        name: String,
        /// What the answer is for: read by the model where the wire sends it.
        description: Option<String>,
        schema: Value,
        strict: Option<bool>,
    },
}

/// Reads OpenAI's `response_format`: `{"type": "json_object"}` or
/// `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`
/// (`{"type": "text"}` asks for nothing).
pub fn parse_response_format(value: &Value) -> Result<Option<ResponseFormat>, String> {
    match value.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(ResponseFormat::JsonObject)),
        Some("json_schema") => {
            let spec = value
                .get("json_schema")
                .ok_or("a json_schema response_format needs 'json_schema': {'name', 'schema'}")?;
            let schema = match spec.get("schema") {
                Some(schema @ Value::Object(_)) => schema.clone(),
                _ => return Err("response_format: 'json_schema' needs a 'schema' (a dict)".into()),
            };
            Ok(Some(ResponseFormat::JsonSchema {
                name: spec
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("response")
                    .to_string(),
                description: spec
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                schema,
                strict: spec.get("strict").and_then(Value::as_bool),
            }))
        }
        _ => Err(
            "response_format must be {\"type\": \"json_object\"}, {\"type\": \"json_schema\", \
             \"json_schema\": {...}} or {\"type\": \"text\"} (the default: asks for nothing)"
                .into(),
        ),
    }
}

/// Whether `reason` (in the one vocabulary) is an answer's end.
pub fn is_end(reason: &str) -> bool {
    matches!(reason, "stop" | "length" | "tool_calls" | "content_filter")
}

/// Why an answer with no text and no calls, that ended for a reason outside
/// the vocabulary (Gemini's `OTHER`, `TOO_MANY_TOOL_CALLS`) or gave no
/// reason at all (nothing says it is even complete), is no answer: a server
/// error, retried and failed over, never an empty reply. Anthropic's
/// `pause_turn` is the caller's to continue; an empty answer that ended on
/// a word of the vocabulary (`stop`, `length`) is the model's.
pub fn abnormal_end_without_content(
    text: &str,
    has_calls: bool,
    reason: Option<&str>,
) -> Option<String> {
    if !text.is_empty() || has_calls {
        return None;
    }
    match reason {
        None => Some("the answer has no content and no finish reason".into()),
        Some(reason) if !is_end(reason) && reason != "pause_turn" => {
            Some(format!("the answer ended ({reason}) with no content"))
        }
        Some(_) => None,
    }
}

/// A wire's own stop word in the one vocabulary: `"stop"`, `"length"`,
/// `"tool_calls"`, `"content_filter"` (unknown words pass through).
pub fn finish_reason(raw: &str) -> String {
    match raw {
        // `pause_turn` is not an end: it passes through, so a loop goes on.
        // "eos": vLLM and TGI servers' end of sequence.
        "stop" | "end_turn" | "stop_sequence" | "STOP" | "eos" | "eos_token" => "stop",
        // Anthropic's `model_context_window_exceeded`: cut short by the
        // context window rather than `max_tokens`, a cut all the same.
        // Mistral's `model_length`: the context window was full.
        "length"
        | "max_tokens"
        | "MAX_TOKENS"
        | "model_context_window_exceeded"
        | "model_length" => "length",
        "tool_calls" | "function_call" | "tool_use" => "tool_calls",
        "content_filter" | "refusal" | "SAFETY" => "content_filter",
        other => other,
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_empty_answer_is_one_only_when_it_ended_as_the_vocabulary_says() {
        let why = |text, calls, reason| abnormal_end_without_content(text, calls, reason);
        assert_eq!(why("", false, Some("stop")), None);
        assert_eq!(why("", false, Some("length")), None);
        assert_eq!(why("", false, Some("pause_turn")), None);
        assert!(why("", false, Some("OTHER")).is_some());
        // Nothing says it ended: no answer either.
        assert!(why("", false, None).is_some());
        assert_eq!(why("hi", false, None), None);
        assert_eq!(why("", true, None), None);
    }

    fn check(messages: Value) -> Result<(), String> {
        parse_messages(messages.as_array().unwrap()).map(drop)
    }

    #[test]
    fn good_conversations_pass() {
        check(json!([{"role": "user", "content": "Hi"}])).unwrap();
        let parsed = parse_messages(
            json!([
                {"role": "system", "content": "Be brief"},
                {"role": "developer", "content": "Be kind"},
                {"role": "user", "content": [{"type": "text", "text": "Hi"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                {"role": "tool", "content": "42", "tool_call_id": "c1"},
            ])
            .as_array()
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            parsed[2].parts[1],
            Part::Image {
                url: "data:image/png;base64,AAAA".into(),
                detail: None
            }
        );
        assert_eq!(
            parsed[3].tool_calls,
            vec![ToolCall {
                id: "c1".into(),
                name: "f".into(),
                arguments_json: "{\"a\":1}".into()
            }]
        );
        assert_eq!(parsed[4].tool_call_id.as_deref(), Some("c1"));
    }

    #[test]
    fn bad_conversations_say_what_is_wrong() {
        let call = |args: &str| {
            json!([{"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]}])
        };
        let cases = [
            (json!([]), "empty"),
            (json!(["Hi"]), "message 0: a message must be a dict"),
            (json!([{"content": "Hi"}]), "needs a 'role'"),
            (
                json!([{"role": "robot", "content": "Hi"}]),
                "unknown role \"robot\"",
            ),
            (
                json!([{"role": 1, "content": "Hi"}]),
                "'role' must be a str",
            ),
            (json!([{"role": "user"}]), "a user message needs 'content'"),
            (
                json!([{"role": "user", "content": null}]),
                "needs 'content'",
            ),
            (json!([{"role": "user", "content": []}]), "empty list"),
            (
                json!([{"role": "user", "content": 5}]),
                "must be a str or a list",
            ),
            (
                json!([{"role": "user", "content": ["Hi"]}]),
                "content part 0",
            ),
            (
                json!([{"role": "user", "content": [{"type": "audio"}]}]),
                "unsupported content part",
            ),
            (
                json!([{"role": "tool", "content": "42"}]),
                "needs 'tool_call_id'",
            ),
            (
                json!([{"role": "tool", "content": "42", "tool_call_id": "c", "is_error": "yes"}]),
                "'is_error' must be",
            ),
            (call("{not json"), "are not JSON"),
            (
                json!([{"role": "assistant", "content": null, "tool_calls": []}]),
                "needs 'content'",
            ),
            (
                json!([{"role": "user", "content": "a"}, {"role": "user"}]),
                "message 1:",
            ),
        ];
        for (messages, expected) in cases {
            let error = check(messages.clone()).unwrap_err();
            assert!(error.contains(expected), "{messages}: {error}");
        }
    }

    #[test]
    fn tools_in_both_shapes_and_choices() {
        let tools = parse_tools(&[
            json!({"name": "a", "description": "A", "parameters": {"type": "object"}}),
            json!({"type": "function", "function": {"name": "b"}}),
        ])
        .unwrap();
        assert_eq!(
            tools[1].parameters,
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            parse_tool_choice("b", &tools),
            Ok(ToolChoice::Named("b".into()))
        );
        assert!(parse_tool_choice("c", &tools).is_err());
        assert!(parse_tools(&[json!({"name": "a"}), json!({"name": "a"})]).is_err());
        assert!(parse_tools(&[json!({"name": "a b!"})]).is_err());
        assert!(parse_tools(&[json!({"name": "x".repeat(65)})]).is_err());
        assert_eq!(finish_reason("end_turn"), "stop");
        assert_eq!(finish_reason("tool_use"), "tool_calls");
        assert_eq!(finish_reason("max_tokens"), "length");
    }
}
