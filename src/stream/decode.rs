//! Framing: bytes as they arrive off the network -> whole SSE events or
//! NDJSON lines. Both split on bytes and decode UTF-8 only once a line is
//! whole, so a read that ends inside a multi-byte character is no problem.
//!
//! Written here rather than taken from eventsource-stream: that crate drops
//! comment lines without a trace, and a comment (OpenRouter's
//! `: OPENROUTER PROCESSING`) must reset the idle timeout like any event.

/// The longest line or event a stream may send: a gateway that never ends
/// one must not eat the process's memory.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One frame of a stream, in the order it arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// An SSE event: its `event:` type (empty when none) and its `data:`
    /// lines joined by `\n`.
    Event { event: String, data: String },
    /// One NDJSON line (never empty).
    Line(String),
    /// A sign of life that carries nothing: an SSE comment, or an event
    /// with no data.
    KeepAlive,
}

/// The framing a wire streams in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Sse,
    Ndjson,
}

/// Turns bytes into frames, keeping what is not yet a whole line.
#[derive(Debug)]
pub struct Decoder {
    framing: Framing,
    /// The bytes of a line not yet ended.
    partial: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` opening the next one
    /// belongs to that line end.
    after_cr: bool,
    /// The SSE event being built.
    event: String,
    data: String,
    has_data: bool,
    /// Nothing read yet: a byte-order mark there is dropped (WHATWG).
    at_start: bool,
}

impl Decoder {
    pub fn new(framing: Framing) -> Self {
        Self {
            framing,
            partial: Vec::new(),
            after_cr: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            at_start: true,
        }
    }

    /// The frames `bytes` completes. A line that is not UTF-8 is an error:
    /// an undecodable event is a failure of the stream, never dropped text.
    pub fn push(&mut self, bytes: &[u8], frames: &mut Vec<Frame>) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.at_start {
            // A BOM may itself arrive split: wait for three bytes to decide.
            let mut head = std::mem::take(&mut self.partial);
            head.extend_from_slice(bytes);
            if head.len() < 3 && b"\xef\xbb\xbf".starts_with(&head) {
                self.partial = head;
                return Ok(());
            }
            self.at_start = false;
            let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&head).to_vec();
            return self.push(&head, frames);
        }
        let mut start = 0;
        let mut i = 0;
        if self.after_cr && bytes[0] == b'\n' {
            start = 1;
            i = 1;
        }
        self.after_cr = false;
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'\n' || b == b'\r' {
                let line_end = i;
                if b == b'\r' {
                    if i + 1 == bytes.len() {
                        self.after_cr = true;
                    } else if bytes[i + 1] == b'\n' {
                        i += 1;
                    }
                }
                if self.partial.is_empty() {
                    self.line(&bytes[start..line_end], frames)?;
                } else {
                    let mut whole = std::mem::take(&mut self.partial);
                    whole.extend_from_slice(&bytes[start..line_end]);
                    self.line(&whole, frames)?;
                }
                start = i + 1;
            }
            i += 1;
        }
        self.partial.extend_from_slice(&bytes[start..]);
        if self.partial.len() + self.data.len() > MAX_EVENT_BYTES {
            return Err(format!("an event over {MAX_EVENT_BYTES} bytes"));
        }
        Ok(())
    }

    /// The end of the body: NDJSON's last line needs no newline; an SSE
    /// event not ended by a blank line is incomplete and not dispatched
    /// (WHATWG), and whether that was a cut is the wire's call (no end marker).
    pub fn finish(&mut self, frames: &mut Vec<Frame>) -> Result<(), String> {
        let rest = std::mem::take(&mut self.partial);
        if self.framing == Framing::Ndjson && !rest.is_empty() {
            self.line(&rest, frames)?;
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8], frames: &mut Vec<Frame>) -> Result<(), String> {
        let line = std::str::from_utf8(line)
            .map_err(|_| "the stream sent a line that is not UTF-8".to_string())?;
        match self.framing {
            Framing::Ndjson => {
                if !line.trim().is_empty() {
                    frames.push(Frame::Line(line.to_string()));
                }
            }
            Framing::Sse => self.sse_line(line, frames),
        }
        Ok(())
    }

    fn sse_line(&mut self, line: &str, frames: &mut Vec<Frame>) {
        if line.is_empty() {
            // Dispatch: an event without data is only a sign of life.
            if self.has_data {
                frames.push(Frame::Event {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
            } else {
                self.event.clear();
                frames.push(Frame::KeepAlive);
            }
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            frames.push(Frame::KeepAlive);
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
                if self.data.len() > MAX_EVENT_BYTES {
                    // Checked by `push` after the line; dropped here so it
                    // cannot grow past the bound one line at a time.
                    self.data.truncate(MAX_EVENT_BYTES + 1);
                }
            }
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            _ => {} // id, retry and unknown fields mean nothing to a one-shot stream
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(framing: Framing, pieces: &[&[u8]]) -> Result<Vec<Frame>, String> {
        let mut decoder = Decoder::new(framing);
        let mut out = Vec::new();
        for piece in pieces {
            decoder.push(piece, &mut out)?;
        }
        decoder.finish(&mut out)?;
        Ok(out)
    }

    fn event(event: &str, data: &str) -> Frame {
        Frame::Event {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn whatwg_lines_fields_and_comments() {
        let got = frames(
            Framing::Sse,
            &[b": OPENROUTER PROCESSING\n\nevent: message_start\ndata: {\"a\":\ndata:1}\r\n\r\ndata: x\r\rdata:[DONE]\n\n"],
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                Frame::KeepAlive,
                Frame::KeepAlive,
                event("message_start", "{\"a\":\n1}"),
                event("", "x"),
                event("", "[DONE]"),
            ]
        );
    }

    #[test]
    fn any_split_gives_the_same_frames_even_inside_a_character() {
        let body = "data: {\"t\":\"héllo wörld 日本\"}\r\n\r\nevent: e\ndata: ✓\n\n".as_bytes();
        let whole = frames(Framing::Sse, &[body]).unwrap();
        for cut in 0..body.len() {
            for second in cut..body.len() {
                let got = frames(
                    Framing::Sse,
                    &[&body[..cut], &body[cut..second], &body[second..]],
                )
                .unwrap();
                assert_eq!(got, whole, "split at {cut} and {second}");
            }
        }
    }

    #[test]
    fn an_event_without_its_blank_line_is_not_dispatched() {
        let got = frames(Framing::Sse, &[b"data: {\"a\":1}\n\ndata: {\"b\""]).unwrap();
        assert_eq!(got, vec![event("", "{\"a\":1}")]);
    }

    #[test]
    fn ndjson_lines_with_or_without_a_last_newline() {
        let got = frames(Framing::Ndjson, &[b"{\"a\":1}\n\n{\"b\"", b":2}"]).unwrap();
        assert_eq!(
            got,
            vec![
                Frame::Line("{\"a\":1}".into()),
                Frame::Line("{\"b\":2}".into())
            ]
        );
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        assert!(frames(Framing::Sse, &[b"data: \xff\xfe\n\n"]).is_err());
    }

    #[test]
    fn a_byte_order_mark_is_dropped_even_split() {
        let body = "\u{feff}data: x\n\n".as_bytes();
        for cut in 0..body.len() {
            let got = frames(Framing::Sse, &[&body[..cut], &body[cut..]]).unwrap();
            assert_eq!(got, vec![event("", "x")], "split at {cut}");
        }
    }

    #[test]
    fn an_endless_event_is_an_error() {
        let mut decoder = Decoder::new(Framing::Sse);
        let mut out = Vec::new();
        let piece = vec![b'a'; 1024 * 1024];
        decoder.push(b"data: ", &mut out).unwrap();
        let failed = (0..20).find_map(|_| decoder.push(&piece, &mut out).err());
        assert!(failed.unwrap().contains("over"));
    }
}
