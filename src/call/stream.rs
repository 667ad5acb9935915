//! A streaming call past its engine run: started on its first read, its
//! chunks read in batches (each read bounded by the call's timeout, the
//! idle wait), restarted after a cut when the caller asked for restarts,
//! and its whole answer assembled at the end.

use std::time::{Duration, Instant, SystemTime};

use super::keys::KeySource;
use super::run::{Call, CallEvents, Outcome};
use crate::engine::{AttemptRecord, CallFailure, Clock, Failure, Permit, Resume};
use crate::providers::streaming::LiveStream;
use crate::providers::{ChatResponse, Reply};
use crate::stream::{Chunk, Usage};

/// What one read gives.
pub enum Step {
    Chunks(Vec<Chunk>),
    End,
}

/// How a stream ended other than at its end, for its face to raise.
pub enum StreamEnd<E> {
    /// Code the call ran ended it (through its interrupter).
    Ended(E),
    /// The call failed before its first content.
    Failed(Box<CallFailure>),
    /// It broke after its first content and was not restarted.
    Interrupted(Box<Interruption>),
    /// It broke after its first content, and the restart failed too
    /// (`restart`, whose error is the interruption's cause).
    RestartFailed {
        interruption: Box<Interruption>,
        restart: Box<CallFailure>,
    },
    /// A whole answer came back for a stream (a bug).
    Internal(&'static str),
}

/// A stream that broke after its first content.
#[derive(Debug)]
pub struct Interruption {
    pub failure: Failure,
    /// The text handed out before the break.
    pub partial_text: String,
    /// Position in the chain of the provider that was streaming.
    pub provider: usize,
    pub usage: Usage,
    /// Every attempt, the broken one (or the restart's) last.
    pub attempts: Vec<AttemptRecord>,
}

/// The whole answer of a stream that reached its end.
#[derive(Debug)]
pub struct StreamResponse {
    pub chat: ChatResponse,
    /// Position in the chain of the provider that answered.
    pub provider: usize,
    pub attempts: Vec<AttemptRecord>,
}

/// A stream past its start.
struct Live {
    stream: LiveStream,
    /// Position in the call's chain.
    provider: usize,
    /// Every attempt so far, the one being read last.
    attempts: Vec<AttemptRecord>,
    began: Instant,
    /// Its share of the client's limits: its slot is held until the stream
    /// ends, breaks or is closed (when this is dropped with it).
    permit: Option<Permit>,
}

enum State {
    /// Not sent yet.
    Fresh,
    Live(Box<Live>),
    /// Complete, or closed by the caller, or failed: nothing more comes.
    Done,
}

/// A streaming call, read by its face.
pub struct StreamDriver<C, E> {
    pub call: Call<C, E>,
    /// After a failure past the first content, start again
    /// (`on_interrupt="restart"`) instead of ending in an [`Interruption`].
    restart: bool,
    state: State,
    started: Instant,
    time_to_first_token: Option<f64>,
    response: Option<StreamResponse>,
    /// Every attempt of a stream closed while it was being read, the one
    /// cut by the close last: what the call did, for the client's stats.
    closed: Option<Vec<AttemptRecord>>,
    /// While a restart runs: the attempts before it (a close then cuts the
    /// run, whose own are in the call's journal).
    restarting: Option<Vec<AttemptRecord>>,
}

impl<C: Clock, E> StreamDriver<C, E> {
    pub fn new(call: Call<C, E>, restart: bool) -> Self {
        Self {
            call,
            restart,
            state: State::Fresh,
            started: Instant::now(),
            time_to_first_token: None,
            response: None,
            closed: None,
            restarting: None,
        }
    }

    /// Seconds from the call to its first content chunk.
    pub fn time_to_first_token(&self) -> Option<f64> {
        self.time_to_first_token
    }

    /// The whole answer, once the stream has ended (taken once).
    pub fn take_response(&mut self) -> Option<StreamResponse> {
        self.response.take()
    }

    /// Whether the stream is past its start and not done.
    pub fn is_live(&self) -> bool {
        matches!(self.state, State::Live(_))
    }

    /// Nothing more is read (the connection closes as the stream drops).
    /// A stream closed while live, or while an engine run was starting or
    /// restarting it, keeps its attempts (`closed_attempts`).
    pub fn close(&mut self) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Live(live) => {
                let mut attempts = live.attempts;
                count_reading(&mut attempts, live.began);
                report_usage(&mut attempts, &live.stream.acc.usage, live.stream.acc.ended);
                self.closed = Some(attempts);
            }
            // A run cut short by the close (or none begun: nothing sent).
            State::Fresh | State::Done => {
                let earlier = self.restarting.take();
                let cut = self.call.journal.take();
                if earlier.is_some() || !cut.is_empty() {
                    let mut attempts = earlier.unwrap_or_default();
                    attempts.extend(cut.into_iter().map(|logged| logged.record));
                    self.closed = Some(attempts);
                }
            }
        }
        self.call.end();
    }

    /// Every attempt of a stream closed while it was being read (`None`:
    /// not closed, or closed before it started or after it ended).
    pub fn closed_attempts(&self) -> Option<&[AttemptRecord]> {
        self.closed.as_deref()
    }

    /// The next chunks, or the end. After an `Err`, the stream is done.
    pub async fn next(
        &mut self,
        keys: &dyn KeySource,
        events: &dyn CallEvents,
    ) -> Result<Step, StreamEnd<E>> {
        let step = self.read(keys, events).await;
        match &step {
            Ok(Step::Chunks(chunks))
                if self.time_to_first_token.is_none() && !chunks.is_empty() =>
            {
                self.time_to_first_token = Some(self.started.elapsed().as_secs_f64());
            }
            Err(_) => self.state = State::Done,
            _ => {}
        }
        if matches!(self.state, State::Done) {
            // At its end, failed or closed: the call is over as it returns.
            self.call.end();
        }
        step
    }

    /// The chunks already arrived, without waiting for anything (`None`:
    /// nothing ready, or the end or a failure, which the next `next`
    /// reports). Reading is cancel-safe at its waits: a read not ready is
    /// dropped with nothing lost. Called inside the runtime.
    pub fn ready(&mut self) -> Option<Vec<Chunk>> {
        let State::Live(live) = &mut self.state else {
            return None;
        };
        let polled = futures_util::FutureExt::now_or_never(live.stream.next(self.call.timeout));
        match polled? {
            Ok(Some(chunks)) => Some(chunks),
            Ok(None) => {
                self.finish();
                self.call.end();
                None
            }
            Err(failure) => {
                live.stream.put_back(failure);
                None
            }
        }
    }

    async fn read(
        &mut self,
        keys: &dyn KeySource,
        events: &dyn CallEvents,
    ) -> Result<Step, StreamEnd<E>> {
        loop {
            let live = match &mut self.state {
                State::Fresh => {
                    // The call starts on the first read, not when the stream was made.
                    self.started = Instant::now();
                    let outcome = self
                        .call
                        .run(keys, events, None)
                        .await
                        .map_err(StreamEnd::Ended)?;
                    let first = self.started_from(outcome, Vec::new())?;
                    if !first.is_empty() {
                        return Ok(Step::Chunks(first));
                    }
                    continue;
                }
                State::Live(live) => live,
                State::Done => return Ok(Step::End),
            };
            let failure = match live.stream.next(self.call.timeout).await {
                Ok(Some(chunks)) => return Ok(Step::Chunks(chunks)),
                Ok(None) => {
                    self.finish();
                    return Ok(Step::End);
                }
                Err(failure) => failure,
            };
            let State::Live(live) = std::mem::replace(&mut self.state, State::Done) else {
                unreachable!("the stream was live")
            };
            if !self.restart {
                return Err(StreamEnd::Interrupted(Box::new(interrupted(
                    *live, failure,
                ))));
            }
            let Live {
                stream,
                provider,
                mut attempts,
                began,
                permit,
            } = *live;
            // Its slot is given back before the restart asks for one.
            drop(permit);
            // The attempt read so far is replaced by its failure, with the
            // wait slept before it and the time it took.
            count_reading(&mut attempts, began);
            let broken = reading_at(&attempts).map(|at| attempts.remove(at));
            let resume = Resume {
                provider,
                failure: failure.clone(),
                retries_done: retries_done(&attempts, provider),
                waited: broken.as_ref().map_or(Duration::ZERO, |a| a.waited),
                started: broken.as_ref().map_or_else(SystemTime::now, |a| a.started),
                duration: broken.map_or(Duration::ZERO, |a| a.duration),
            };
            let discarded = Chunk::Restart {
                discarded: stream.acc.text.clone(),
                discarded_tool_calls: stream.acc.tool_calls.clone(),
            };
            self.restarting = Some(attempts.clone());
            let outcome = self.call.run(keys, events, Some(resume)).await;
            self.restarting = None;
            let outcome = outcome.map_err(StreamEnd::Ended)?;
            let success = match outcome {
                Ok(success) => Ok(success),
                // The restart failed too: the stream stays broken.
                Err(restart) => {
                    // Every attempt: those before the cut, then the restart's.
                    attempts.extend(restart.attempts.iter().cloned());
                    let interruption = Interruption {
                        failure,
                        partial_text: stream.acc.text.clone(),
                        provider,
                        usage: stream.acc.usage.clone(),
                        attempts,
                    };
                    return Err(StreamEnd::RestartFailed {
                        interruption: Box::new(interruption),
                        restart: Box::new(restart),
                    });
                }
            };
            let mut chunks = vec![discarded];
            chunks.extend(self.started_from(success, attempts)?);
            return Ok(Step::Chunks(chunks));
        }
    }

    /// A successful engine run: the stream is live, its first chunks in
    /// hand; `earlier` are the attempts of runs before it.
    fn started_from(
        &mut self,
        outcome: Outcome,
        mut earlier: Vec<AttemptRecord>,
    ) -> Result<Vec<Chunk>, StreamEnd<E>> {
        let success = outcome.map_err(|failure| StreamEnd::Failed(Box::new(failure)))?;
        let Reply::Stream(started) = success.value else {
            return Err(StreamEnd::Internal("a whole answer came back for a stream"));
        };
        earlier.extend(success.attempts);
        let started = *started;
        self.state = State::Live(Box::new(Live {
            stream: started.live,
            provider: success.provider,
            attempts: earlier,
            began: Instant::now(),
            permit: success.permit,
        }));
        Ok(started.first)
    }

    /// The whole answer, once the stream ended.
    fn finish(&mut self) {
        let State::Live(live) = std::mem::replace(&mut self.state, State::Done) else {
            return;
        };
        let mut attempts = live.attempts;
        count_reading(&mut attempts, live.began);
        report_usage(&mut attempts, &live.stream.acc.usage, live.stream.acc.ended);
        if let (Some(permit), Some(tokens)) = (&live.permit, live.stream.acc.usage.total()) {
            permit.correct(tokens);
        }
        let provider_data = live.stream.provider_data();
        let headers = live.stream.headers().clone();
        let request_id = live.stream.request_id.clone();
        let finish_reason = live.stream.told(live.stream.acc.finish_reason.clone());
        let model = live.stream.told(live.stream.acc.model.clone());
        let acc = live.stream.acc;
        let chat = ChatResponse {
            text: acc.text,
            tool_calls: acc.tool_calls,
            provider_data,
            model,
            finish_reason,
            usage: acc.usage,
            request_id,
            raw: "null".to_string(),
            status: 200,
            headers,
        };
        self.response = Some(StreamResponse {
            chat,
            provider: live.provider,
            attempts,
        });
    }
}

/// Where in `attempts` the attempt being read is: the last one sent that
/// did not lose a hedge's race (what a hedge passed over, and its cancelled
/// request, may be recorded after it).
fn reading_at(attempts: &[AttemptRecord]) -> Option<usize> {
    attempts
        .iter()
        .rposition(|a| a.skipped.is_none() && !a.hedged)
}

/// The attempt being read.
fn reading(attempts: &mut [AttemptRecord]) -> Option<&mut AttemptRecord> {
    let at = reading_at(attempts)?;
    attempts.get_mut(at)
}

/// The time of the attempt being read (whose record holds its start up to
/// the first content) counts what was read of it since `began`: an
/// attempt's duration is all of it.
fn count_reading(attempts: &mut [AttemptRecord], began: Instant) {
    if let Some(last) = reading(attempts) {
        last.duration += began.elapsed();
    }
}

/// The attempt being read used what its stream reported, up to its end or
/// its cut; it delivered content, so it is billed.
/// Before the answer's end (`ended`), an output figure is only what was
/// reported so far (Anthropic's `message_start` says 1): not the bill, so
/// only the input is kept.
fn report_usage(attempts: &mut [AttemptRecord], usage: &Usage, ended: bool) {
    if let Some(last) = reading(attempts) {
        let usage = if ended {
            usage.clone()
        } else {
            usage.input_only()
        };
        if usage.is_known() {
            last.usage = Some(usage);
        }
        last.billed = Some(true);
    }
}

/// Retries already spent at `provider`: the failed attempts at it in a row
/// at the end of `attempts` (a restart counts them, and the broken one).
fn retries_done(attempts: &[AttemptRecord], provider: usize) -> u32 {
    attempts
        .iter()
        .rev()
        .filter(|a| a.skipped.is_none() && !a.hedged)
        .take_while(|a| a.provider == provider && a.kind.is_some())
        .count() as u32
}

/// A live stream broken by `failure`, not restarted: the attempt that was
/// streaming ended in it.
fn interrupted(live: Live, failure: Failure) -> Interruption {
    let mut attempts = live.attempts;
    count_reading(&mut attempts, live.began);
    report_usage(&mut attempts, &live.stream.acc.usage, live.stream.acc.ended);
    if let Some(last) = reading(&mut attempts) {
        last.kind = Some(failure.kind);
        last.status = failure.status.or(last.status);
    }
    Interruption {
        partial_text: live.stream.acc.text.clone(),
        usage: live.stream.acc.usage.clone(),
        failure,
        provider: live.provider,
        attempts,
    }
}
