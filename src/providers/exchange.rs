//! One attempt at a job: the request sent and its answer read, whole or
//! (for a stream) up to its first content, within the attempt's bounds.

use super::answer::{name_failure, parse_embed_response, parse_response};
use super::media::{fetch_images, parse_media_response};
use super::streaming;
use super::types::{ChatResponse, EmbedResponse, Job, MediaResponse, ProviderConfig};
use crate::engine::{ErrorKind, Failure};
use crate::http::HttpRequest;

/// A provider's answer to a [`Job`].
#[derive(Debug)]
pub enum Reply {
    Chat(ChatResponse),
    Embed(EmbedResponse),
    Media(Box<MediaResponse>),
    /// A stream whose first content is in hand (boxed: it carries a whole
    /// decoder and accumulator).
    Stream(Box<streaming::StartedStream>),
}

impl crate::engine::Answer for Reply {
    fn status(&self) -> u16 {
        match self {
            Self::Chat(chat) => chat.status,
            Self::Embed(embed) => embed.status,
            Self::Media(media) => media.status,
            Self::Stream(stream) => crate::engine::Answer::status(stream.as_ref()),
        }
    }

    fn usage(&self) -> Option<crate::stream::Usage> {
        let usage = match self {
            Self::Chat(chat) => &chat.usage,
            Self::Embed(embed) => &embed.usage,
            Self::Media(media) => &media.usage,
            Self::Stream(stream) => &stream.live.acc.usage,
        };
        usage.is_known().then(|| usage.clone())
    }

    fn settled_usage(&self) -> Option<crate::stream::Usage> {
        match self {
            // Known at its end (the stream driver corrects the charge then).
            Self::Stream(_) => None,
            _ => self.usage(),
        }
    }

    fn exhausted_for(&self, now: std::time::SystemTime) -> Option<std::time::Duration> {
        crate::engine::hints::exhausted_reset(self.headers(), now)
    }

    fn headroom(&self, now: std::time::SystemTime) -> Option<crate::engine::Headroom> {
        crate::engine::hints::headroom(self.headers(), now)
    }
}

impl Reply {
    /// The headers the answer came with.
    fn headers(&self) -> &crate::engine::Headers {
        match self {
            Self::Chat(chat) => &chat.headers,
            Self::Embed(embed) => &embed.headers,
            Self::Media(media) => &media.headers,
            Self::Stream(stream) => stream.live.headers(),
        }
    }
}

/// One attempt at `job`: sends `sent` and reads the answer, whole or (for
/// a stream) up to its first content. Each wait ends after
/// `bounds.timeout`; the whole attempt, whatever arrives before its answer
/// (keep-alives, pings, empty deltas), by `bounds.left`, the deadline.
pub async fn exchange(
    provider: &ProviderConfig,
    job: &Job,
    transport: &crate::http::ReqwestTransport,
    sent: &HttpRequest,
    bounds: crate::engine::AttemptBounds,
) -> Result<Reply, Failure> {
    use crate::http::Transport;
    let attempt = async {
        match job {
            Job::Stream(_) | Job::MediaStream(_) => {
                let deadline = bounds
                    .left
                    .and_then(|left| tokio::time::Instant::now().checked_add(left));
                let audio = match job {
                    Job::MediaStream(request) => Some(request),
                    _ => None,
                };
                streaming::start(provider, transport, sent, bounds.timeout, deadline, audio)
                    .await
                    .map(|started| Reply::Stream(Box::new(started)))
            }
            Job::Chat(_) | Job::Embed(_) | Job::Media(_) => {
                let response = transport
                    .send(sent, bounds.timeout)
                    .await
                    .map_err(|failure| name_failure(provider, sent, failure))?;
                match job {
                    Job::Embed(request) => {
                        parse_embed_response(provider, request, sent, response).map(Reply::Embed)
                    }
                    Job::Media(request) => {
                        let mut media = parse_media_response(provider, request, sent, response)?;
                        fetch_images(provider, request, transport, &mut media, bounds.timeout)
                            .await?;
                        Ok(Reply::Media(Box::new(media)))
                    }
                    _ => parse_response(provider, sent, response).map(Reply::Chat),
                }
            }
        }
    };
    let Some(left) = bounds.left else {
        return attempt.await;
    };
    let out_of_time = || {
        let what = match job {
            Job::Stream(_) | Job::MediaStream(_) => "the stream did not start",
            Job::Chat(_) | Job::Embed(_) | Job::Media(_) => "no answer came",
        };
        Failure::out_of_time(format!(
            "{}: {what} within the {:.3}s left before the deadline",
            provider.name,
            left.as_secs_f64()
        ))
    };
    if left.is_zero() {
        // Nothing is sent once the time is gone (a key callable used it up):
        // a fast server must not answer a call past its deadline.
        return Err(out_of_time());
    }
    let started = tokio::time::Instant::now();
    match tokio::time::timeout(left, attempt).await {
        // A wait inside the attempt was cut to the time left too, and may
        // end first: the deadline, not the provider, ended it (a connect
        // timeout ends sooner; a 408 has a body).
        Ok(Err(failure))
            if failure.kind == ErrorKind::Timeout
                && failure.body.is_none()
                && started.elapsed() >= left =>
        {
            Err(out_of_time())
        }
        Ok(result) => result,
        Err(_) => Err(out_of_time()),
    }
}
