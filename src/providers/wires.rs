//! Every wire format, by its [`Wire`]: the one place a wire meets its
//! module. A new wire is its module (a [`WireFormat`]), its `Wire` variant
//! and name, and one line here.

use super::anthropic::Messages;
use super::azure::Azure;
use super::gemini::GenerateContent;
use super::ollama::Ollama;
use super::openai::ChatCompletions;
use super::types::Wire;
use super::wire_format::WireFormat;

/// The format `wire` speaks.
pub fn format(wire: Wire) -> &'static dyn WireFormat {
    match wire {
        Wire::OpenAI => &ChatCompletions,
        Wire::Azure => &Azure,
        Wire::Anthropic => &Messages,
        Wire::Gemini => &GenerateContent,
        Wire::Ollama => &Ollama,
    }
}
