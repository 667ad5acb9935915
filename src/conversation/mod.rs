//! The neutral conversation every wire translates to and from: OpenAI-style
//! messages, the lingua franca callers already know. Checked here, before
//! any request is sent, so a malformed conversation is the caller's error
//! at once rather than a provider's 400 after a retry or a failover.

use serde_json::Value;

/// The roles a message may have.
pub const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// Checks a conversation; the error says which message is wrong and why.
pub fn check_messages(messages: &[Value]) -> Result<(), String> {
    if messages.is_empty() {
        return Err("the conversation is empty: give a prompt or at least one message".into());
    }
    for (index, message) in messages.iter().enumerate() {
        check_message(message).map_err(|why| format!("message {index}: {why}"))?;
    }
    Ok(())
}

fn check_message(message: &Value) -> Result<(), String> {
    let Value::Object(fields) = message else {
        return Err("a message must be a dict with a 'role' and 'content'".into());
    };
    let role = match fields.get("role") {
        Some(Value::String(role)) => role.as_str(),
        Some(other) => return Err(format!("'role' must be a str, got {other}")),
        None => return Err("a message needs a 'role'".into()),
    };
    if !ROLES.contains(&role) {
        return Err(format!(
            "unknown role {role:?}; use one of {}",
            ROLES.join(", ")
        ));
    }
    let has_tool_calls = role == "assistant"
        && fields
            .get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|calls| !calls.is_empty());
    match fields.get("content") {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) if !parts.is_empty() => {
            for (i, part) in parts.iter().enumerate() {
                check_part(part).map_err(|why| format!("content part {i}: {why}"))?;
            }
            Ok(())
        }
        Some(Value::Array(_)) if has_tool_calls => Ok(()),
        Some(Value::Array(_)) => Err("'content' is an empty list".into()),
        Some(Value::Null) | None if has_tool_calls => Ok(()),
        Some(Value::Null) | None => Err(format!(
            "a {role} message needs 'content' (a str or a list of parts)"
        )),
        Some(other) => Err(format!(
            "'content' must be a str or a list of parts, got {other}"
        )),
    }
}

fn check_part(part: &Value) -> Result<(), String> {
    match part.get("type").and_then(Value::as_str) {
        Some(_) => Ok(()),
        None => Err("a part must be a dict with a 'type' (\"text\", \"image_url\", ...)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(messages: Value) -> Result<(), String> {
        check_messages(messages.as_array().unwrap())
    }

    #[test]
    fn good_conversations_pass() {
        check(json!([{"role": "user", "content": "Hi"}])).unwrap();
        check(json!([
            {"role": "system", "content": "Be brief"},
            {"role": "developer", "content": "Be kind"},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
        ]))
        .unwrap();
    }

    #[test]
    fn bad_conversations_say_what_is_wrong() {
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
}
