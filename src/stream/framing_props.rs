//! Properties of SSE and NDJSON framing, over generated streams: any split
//! of a valid stream into reads gives the frames it was written from, and
//! any bytes at all, however split, give the same frames or the same error,
//! never a panic.
//!
//! `cargo test` runs each property on a few cases (`PROPTEST_CASES`, else
//! 64); `make fuzz` runs them on many more.

use proptest::prelude::*;

use super::decode::{Decoder, Frame, Framing};

/// Few cases unless `PROPTEST_CASES` asks for more: the suite stays quick.
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 64;
    }
    config
}

/// Text that fits on one line: anything but CR and LF.
fn line_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[^\r\n]{0,40}",
        "[ a-z:{}\"\\[\\],0-9]{0,40}",
        "[ éü日本✓\u{feff}]{0,8}",
    ]
}

/// One thing an SSE stream says.
#[derive(Clone, Debug)]
enum Said {
    Comment(String),
    /// `event:` (when given), `data:` lines, other fields, then a blank line.
    Event {
        event: Option<String>,
        data: Vec<String>,
        other: Vec<String>,
    },
}

fn said() -> impl Strategy<Value = Said> {
    prop_oneof![
        line_text().prop_map(Said::Comment),
        (
            prop::option::of(line_text()),
            prop::collection::vec(line_text(), 0..4),
            prop::collection::vec(
                prop::sample::select(vec!["id: 7", "retry: 100", "x-unknown: y", "id"]),
                0..2,
            ),
        )
            .prop_map(|(event, data, other)| Said::Event {
                event,
                data,
                other: other.into_iter().map(str::to_string).collect(),
            }),
    ]
}

/// Lines ended as a stream may end them: LF, CRLF or a lone CR.
const ENDINGS: [&str; 3] = ["\n", "\r\n", "\r"];

/// Writes `lines`, each with the ending `endings` picks (cycling). A line
/// ended by a lone CR followed by an empty line ended by LF would read as
/// one CRLF: that empty line's ending is made CRLF instead.
fn write_lines(lines: &[String], endings: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut after_cr = false;
    for (i, line) in lines.iter().enumerate() {
        let mut ending = ENDINGS[endings[i % endings.len()]];
        if after_cr && line.is_empty() && ending == "\n" {
            ending = "\r\n";
        }
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(ending.as_bytes());
        after_cr = ending == "\r";
    }
    out
}

/// An SSE stream's lines, and the frames it must decode to.
fn sse(said: &[Said]) -> (Vec<String>, Vec<Frame>) {
    let mut lines = Vec::new();
    let mut frames = Vec::new();
    for s in said {
        match s {
            Said::Comment(text) => {
                lines.push(format!(":{text}"));
                frames.push(Frame::KeepAlive);
            }
            Said::Event { event, data, other } => {
                if let Some(event) = event {
                    lines.push(format!("event: {event}"));
                }
                for (i, d) in data.iter().enumerate() {
                    // `data: x` and `data:x` say the same; one space is the
                    // separator, any more are the value's.
                    lines.push(if i % 2 == 1 && !d.starts_with(' ') {
                        format!("data:{d}")
                    } else {
                        format!("data: {d}")
                    });
                }
                lines.extend(other.iter().cloned());
                lines.push(String::new());
                frames.push(if data.is_empty() {
                    Frame::KeepAlive
                } else {
                    Frame::Event {
                        event: event.clone().unwrap_or_default(),
                        data: data.join("\n"),
                    }
                });
            }
        }
    }
    (lines, frames)
}

/// `bytes` cut at `cuts` (positions taken modulo the length), decoded
/// (the wires' stream properties read their streams through it too).
pub(crate) fn decode(
    framing: Framing,
    bytes: &[u8],
    cuts: &[usize],
) -> (Vec<Frame>, Result<(), String>) {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| c % (bytes.len() + 1))
        .chain([0, bytes.len()])
        .collect();
    at.sort_unstable();
    let mut decoder = Decoder::new(framing);
    let mut frames = Vec::new();
    for pair in at.windows(2) {
        if let Err(e) = decoder.push(&bytes[pair[0]..pair[1]], &mut frames) {
            return (frames, Err(e));
        }
    }
    let end = decoder.finish(&mut frames);
    (frames, end)
}

fn cuts() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(any::<usize>(), 0..12)
}

fn endings() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..ENDINGS.len(), 1..6)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_split_of_an_sse_stream_gives_its_events(
        said in prop::collection::vec(said(), 0..12),
        endings in endings(),
        bom: bool,
        cuts in cuts(),
    ) {
        let (lines, expected) = sse(&said);
        let mut bytes = if bom { "\u{feff}".as_bytes().to_vec() } else { Vec::new() };
        bytes.extend(write_lines(&lines, &endings));
        let (frames, end) = decode(Framing::Sse, &bytes, &cuts);
        prop_assert_eq!(end, Ok(()));
        prop_assert_eq!(frames, expected);
    }

    #[test]
    fn an_sse_event_without_its_blank_line_is_never_dispatched(
        said in prop::collection::vec(said(), 0..6),
        data in line_text(),
        endings in endings(),
        cuts in cuts(),
    ) {
        let (mut lines, expected) = sse(&said);
        lines.push(format!("data: {data}"));
        let bytes = write_lines(&lines, &endings);
        let (frames, end) = decode(Framing::Sse, &bytes, &cuts);
        prop_assert_eq!(end, Ok(()));
        prop_assert_eq!(frames, expected);
    }

    #[test]
    fn any_split_of_an_ndjson_stream_gives_its_lines(
        lines in prop::collection::vec(
            prop_oneof![
                3 => line_text().prop_filter("a line with content", |l| !l.trim().is_empty()),
                1 => "[ \t]{0,3}",
            ],
            0..12,
        ),
        endings in endings(),
        last_ended: bool,
        cuts in cuts(),
    ) {
        // A byte-order mark opening the stream is no part of its first line:
        // one there is moved off the start.
        let mut lines = lines;
        if let Some(first) = lines.first_mut().filter(|l| l.starts_with('\u{feff}')) {
            first.insert(0, 'x');
        }
        let mut bytes = write_lines(&lines, &endings);
        if !last_ended && !lines.is_empty() {
            while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                bytes.pop();
            }
        }
        let expected: Vec<Frame> = lines
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| Frame::Line(l.clone()))
            .collect();
        let (frames, end) = decode(Framing::Ndjson, &bytes, &cuts);
        prop_assert_eq!(end, Ok(()));
        prop_assert_eq!(frames, expected);
    }

    /// Any bytes: frames or an error, never a panic, and the same whatever
    /// the reads were (the frames before an error included).
    #[test]
    fn any_bytes_decode_the_same_however_split(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            // Mostly framing, with bytes that are not UTF-8 among it.
            prop::collection::vec(
                prop::sample::select(b"data: event:\r\n\n\r{}x\xef\xbb\xbf\xff\xc3\xa9".to_vec()),
                0..300,
            ),
        ],
        cuts in cuts(),
        ndjson: bool,
    ) {
        let framing = if ndjson { Framing::Ndjson } else { Framing::Sse };
        let whole = decode(framing, &bytes, &[]);
        let split = decode(framing, &bytes, &cuts);
        prop_assert_eq!(split, whole);
    }
}
