//! Streaming, independent of the wire: framing (`decode`), the neutral
//! pieces a wire's events are read into (`Delta`), and the `Accumulator`
//! that turns them into what the caller sees (`Chunk`) and, at the end, the
//! whole answer. No pyo3, no reqwest.

pub mod decode;
#[cfg(test)]
pub(crate) mod framing_props;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::conversation::ToolCall;

pub use decode::{Decoder, Frame, Framing};

pub use crate::engine::Usage;

/// An error a provider sent inside a stream (after its 200).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamError {
    /// The error object, as sent (classified by its code or type).
    pub error: Value,
}

/// One neutral piece of a stream, read from a wire's event.
#[derive(Clone, Debug, PartialEq)]
pub enum Delta {
    Text(String),
    /// A piece of a refusal (OpenAI's `delta.refusal`): text of the answer,
    /// which ends as a content filter's.
    Refusal(String),
    Reasoning(String),
    /// A piece of the tool call at `index`: its id and name when they
    /// first come, its argument text as it streams.
    ToolCallPart {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    /// The tool call at `index` is complete.
    ToolCallDone {
        index: usize,
    },
    /// A tool call that came whole (Gemini, Ollama).
    ToolCall(ToolCall),
    /// Bytes of audio, as they arrived (a speech stream).
    Audio(Vec<u8>),
    Usage(Usage),
    Model(String),
    /// The finish reason, in the one vocabulary: the answer is complete.
    Finish(String),
    /// The format's end marker without a reason (`[DONE]`, `message_stop`).
    End,
    Error(StreamError),
}

/// What the caller sees of a stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Chunk {
    Text(String),
    Reasoning(String),
    /// A tool call, once it is complete.
    ToolCall(ToolCall),
    /// Bytes of audio (a speech stream).
    Audio(Vec<u8>),
    /// Everything yielded before this is to be thrown away: the stream
    /// started again from the beginning.
    Restart {
        discarded: String,
        discarded_tool_calls: Vec<ToolCall>,
    },
}

#[derive(Debug, Default)]
struct PendingCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// Everything a stream has said so far, and whether it is complete.
#[derive(Debug, Default)]
pub struct Accumulator {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pending: BTreeMap<usize, PendingCall>,
    pub usage: Usage,
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    /// The end marker arrived: a cut from here on is no failure.
    pub ended: bool,
    /// A content chunk was handed out: from here on nothing is retried
    /// silently.
    pub content_started: bool,
    /// The answer is a refusal (its text is the answer's text).
    refused: bool,
}

impl Accumulator {
    /// Applies one piece; the chunks it completes go to `out`. An error
    /// piece is the caller's to handle, never applied.
    pub fn apply(&mut self, delta: Delta, out: &mut Vec<Chunk>) {
        match delta {
            Delta::Text(text) if !text.is_empty() => {
                self.text.push_str(&text);
                self.content(out, Chunk::Text(text));
            }
            Delta::Refusal(text) => {
                self.refused = true;
                self.apply(Delta::Text(text), out);
            }
            Delta::Reasoning(text) if !text.is_empty() => {
                self.content(out, Chunk::Reasoning(text));
            }
            Delta::Text(_) | Delta::Reasoning(_) => {}
            Delta::ToolCallPart {
                index,
                id,
                name,
                arguments,
            } => {
                // Calls may interleave (Chat Completions keys each piece by
                // its index): a call is complete only when its wire says so,
                // or at the end of the answer.
                let call = self.pending.entry(index).or_default();
                if id.is_some() {
                    call.id = id;
                }
                if name.is_some() {
                    call.name = name;
                }
                call.arguments.push_str(&arguments);
            }
            Delta::ToolCallDone { index } => self.complete(index, out),
            Delta::ToolCall(call) => {
                self.tool_calls.push(call.clone());
                self.content(out, Chunk::ToolCall(call));
            }
            Delta::Audio(data) if !data.is_empty() => self.content(out, Chunk::Audio(data)),
            Delta::Audio(_) => {}
            Delta::Usage(patch) => self.usage.apply(patch),
            Delta::Model(model) => self.model = Some(model),
            Delta::Finish(reason) => {
                self.finish_all(out);
                // Calls and a "stop": the answer is the calls; a refusal is
                // a content filter's answer, whatever the reason says.
                let reason = if self.refused {
                    "content_filter".to_string()
                } else if !self.tool_calls.is_empty()
                    && (reason == "stop" || !crate::conversation::is_end(&reason))
                    && reason != "pause_turn"
                {
                    // Calls, and a "stop" or a word that ends nothing (Gemini's
                    // OTHER in a later chunk): the answer is the calls.
                    "tool_calls".to_string()
                } else {
                    reason
                };
                self.finish_reason = Some(reason);
                self.ended = true;
            }
            Delta::End => {
                self.finish_all(out);
                self.ended = true;
            }
            Delta::Error(_) => {}
        }
    }

    fn content(&mut self, out: &mut Vec<Chunk>, chunk: Chunk) {
        self.content_started = true;
        out.push(chunk);
    }

    fn complete(&mut self, index: usize, out: &mut Vec<Chunk>) {
        if let Some(call) = self.pending.remove(&index) {
            let call = ToolCall {
                id: call.id.unwrap_or_else(|| format!("call_{index}")),
                name: call.name.unwrap_or_default(),
                arguments_json: if call.arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    call.arguments
                },
            };
            self.tool_calls.push(call.clone());
            self.content(out, Chunk::ToolCall(call));
        }
    }

    fn finish_all(&mut self, out: &mut Vec<Chunk>) {
        let all: Vec<usize> = self.pending.keys().copied().collect();
        for i in all {
            self.complete(i, out);
        }
    }

    /// Tool calls begun but not complete: a stream that ends with one is cut.
    pub fn has_pending_calls(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_calls_usage_and_the_end() {
        let mut acc = Accumulator::default();
        let mut out = Vec::new();
        acc.apply(
            Delta::Usage(Usage {
                input_tokens: Some(9),
                output_tokens: Some(1),
                ..Default::default()
            }),
            &mut out,
        );
        assert!(!acc.content_started);
        acc.apply(Delta::Text("Hel".into()), &mut out);
        acc.apply(Delta::Text("lo".into()), &mut out);
        acc.apply(
            Delta::ToolCallPart {
                index: 0,
                id: Some("c1".into()),
                name: Some("f".into()),
                arguments: "{\"a\"".into(),
            },
            &mut out,
        );
        acc.apply(
            Delta::ToolCallPart {
                index: 0,
                id: None,
                name: None,
                arguments: ":1}".into(),
            },
            &mut out,
        );
        acc.apply(
            Delta::ToolCallPart {
                index: 1,
                id: Some("c2".into()),
                name: Some("g".into()),
                arguments: String::new(),
            },
            &mut out,
        );
        acc.apply(
            Delta::Usage(Usage {
                output_tokens: Some(7),
                ..Default::default()
            }),
            &mut out,
        );
        acc.apply(Delta::Finish("stop".into()), &mut out);
        assert_eq!(
            out,
            vec![
                Chunk::Text("Hel".into()),
                Chunk::Text("lo".into()),
                Chunk::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments_json: "{\"a\":1}".into()
                }),
                Chunk::ToolCall(ToolCall {
                    id: "c2".into(),
                    name: "g".into(),
                    arguments_json: "{}".into()
                }),
            ]
        );
        assert_eq!(acc.text, "Hello");
        assert_eq!(acc.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            (acc.usage.input_tokens, acc.usage.output_tokens),
            (Some(9), Some(7))
        );
        assert!(acc.ended && acc.content_started && !acc.has_pending_calls());
    }
}
