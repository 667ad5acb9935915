//! The native half of `failover.Stream`: a streaming call, started on its
//! first read. The engine runs (once, or again after a cut when the caller
//! asked for restarts) until the first content chunk; the chunks after it
//! are read here, in batches, with the GIL released while Rust waits.

use std::sync::Arc;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tokio::sync::{watch, Mutex};

use super::call::{block_on_interruptibly, new_call_id, run_engine, used_configs, Call, Inner};
use super::convert::provider_error;
use super::errors::internal_error;
use super::runtime;
use super::seam::{attempts_list, ResponseData, ToolCallData};
use crate::conversation::ToolCall;
use crate::engine::{AttemptRecord, CallFailure, ProviderFailure, Resume, Success};
use crate::providers::streaming::LiveStream;
use crate::providers::{ChatResponse, ProviderConfig, Reply};
use crate::stream::Chunk;

/// One chunk for Python (`failover.Chunk` is built from it).
#[pyclass(frozen, get_all, module = "failover._native")]
pub struct ChunkData {
    /// `"text"`, `"reasoning"`, `"tool_call"` or `"restart"`.
    pub kind: &'static str,
    pub text: String,
    pub reasoning: String,
    pub tool_call: Option<Py<ToolCallData>>,
    pub discarded: String,
    pub discarded_tool_calls: Vec<Py<ToolCallData>>,
}

fn tool_call_data(py: Python<'_>, call: ToolCall) -> PyResult<Py<ToolCallData>> {
    Py::new(
        py,
        ToolCallData {
            id: call.id,
            name: call.name,
            arguments_json: call.arguments_json,
        },
    )
}

fn chunk_data(py: Python<'_>, chunk: Chunk) -> PyResult<ChunkData> {
    let mut data = ChunkData {
        kind: "text",
        text: String::new(),
        reasoning: String::new(),
        tool_call: None,
        discarded: String::new(),
        discarded_tool_calls: Vec::new(),
    };
    match chunk {
        Chunk::Text(text) => data.text = text,
        Chunk::Reasoning(text) => {
            data.kind = "reasoning";
            data.reasoning = text;
        }
        Chunk::ToolCall(call) => {
            data.kind = "tool_call";
            data.tool_call = Some(tool_call_data(py, call)?);
        }
        Chunk::Restart {
            discarded,
            discarded_tool_calls,
        } => {
            data.kind = "restart";
            data.discarded = discarded;
            data.discarded_tool_calls = discarded_tool_calls
                .into_iter()
                .map(|c| tool_call_data(py, c))
                .collect::<PyResult<_>>()?;
        }
    }
    Ok(data)
}

/// A stream past its start.
struct Live {
    stream: LiveStream,
    /// Index into the call's chain.
    provider: usize,
    /// Every attempt so far, the one being read last.
    attempts: Vec<AttemptRecord>,
    began: Instant,
}

enum State {
    /// Not sent yet.
    Fresh,
    Live(Box<Live>),
    /// Complete: the answer is in `Driver::response`.
    Finished,
    /// Closed by the caller, or failed: nothing more comes.
    Closed,
}

/// What one read gives.
enum Step {
    Chunks(Vec<Chunk>),
    End,
}

struct Driver {
    inner: Arc<Inner>,
    call: Call,
    call_id: String,
    restart: bool,
    state: State,
    started: Instant,
    time_to_first_token: Option<f64>,
    response: Option<Py<ResponseData>>,
    closed: watch::Receiver<bool>,
}

impl Driver {
    async fn next(&mut self) -> PyResult<Step> {
        let mut closed = self.closed.clone();
        if *closed.borrow() {
            self.state = State::Closed;
            return Ok(Step::End);
        }
        let step = tokio::select! {
            biased;
            _ = closed.changed() => {
                self.state = State::Closed;
                return Ok(Step::End);
            }
            step = self.read() => step,
        };
        if let Ok(Step::Chunks(chunks)) = &step {
            if self.time_to_first_token.is_none() && !chunks.is_empty() {
                self.time_to_first_token = Some(self.started.elapsed().as_secs_f64());
            }
        }
        if step.is_err() {
            self.state = State::Closed;
        }
        step
    }

    async fn read(&mut self) -> PyResult<Step> {
        loop {
            let live = match &mut self.state {
                State::Fresh => {
                    // The call starts on the first read, not when the stream was made.
                    self.started = Instant::now();
                    let used = used_configs(&self.inner, &self.call.chain, &self.call.job);
                    let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
                    let result =
                        run_engine(&self.inner, &mut self.call, &configs, &self.call_id, None)
                            .await?;
                    let first = self.started_from(result, Vec::new())?;
                    if !first.is_empty() {
                        return Ok(Step::Chunks(first));
                    }
                    continue;
                }
                State::Live(live) => live,
                State::Finished | State::Closed => return Ok(Step::End),
            };
            match live.stream.next(self.call.timeout).await {
                Ok(Some(chunks)) => return Ok(Step::Chunks(chunks)),
                Ok(None) => {
                    self.finish()?;
                    return Ok(Step::End);
                }
                Err(failure) if !self.restart => return Err(self.interrupted(failure, None)),
                Err(failure) => {
                    let State::Live(live) = std::mem::replace(&mut self.state, State::Closed)
                    else {
                        unreachable!()
                    };
                    let Live {
                        stream,
                        provider,
                        mut attempts,
                        began,
                    } = *live;
                    // The attempt read so far is replaced by its failure.
                    attempts.pop();
                    let retries_done = attempts
                        .iter()
                        .rev()
                        .take_while(|a| a.provider == provider && a.kind.is_some())
                        .count() as u32;
                    let resume = Resume {
                        provider,
                        failure: failure.clone(),
                        retries_done,
                        duration: began.elapsed(),
                    };
                    let discarded = Chunk::Restart {
                        discarded: stream.acc.text.clone(),
                        discarded_tool_calls: stream.acc.tool_calls.clone(),
                    };
                    let used = used_configs(&self.inner, &self.call.chain, &self.call.job);
                    let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
                    let result = run_engine(
                        &self.inner,
                        &mut self.call,
                        &configs,
                        &self.call_id,
                        Some(resume),
                    )
                    .await?;
                    let result = match result {
                        Ok(success) => Ok(success),
                        // The restart failed too: the stream stays broken.
                        Err(call_failure) => {
                            let partial = stream.acc.text.clone();
                            return Err(self.restart_failed(
                                failure,
                                partial,
                                provider,
                                attempts,
                                call_failure,
                            ));
                        }
                    };
                    let mut chunks = vec![discarded];
                    chunks.extend(self.started_from(result, attempts)?);
                    return Ok(Step::Chunks(chunks));
                }
            }
        }
    }

    /// A successful engine run: the stream is live, its first chunks in
    /// hand; `earlier` are the attempts of runs before it.
    fn started_from(
        &mut self,
        result: Result<Success<Reply>, CallFailure>,
        mut earlier: Vec<AttemptRecord>,
    ) -> PyResult<Vec<Chunk>> {
        let success = match result {
            Ok(success) => success,
            Err(failure) => {
                let inner = Arc::clone(&self.inner);
                let used = used_configs(&inner, &self.call.chain, &self.call.job);
                let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
                let call_id = self.call_id.clone();
                return Err(Python::attach(|py| {
                    self.call.raise(py, &failure, &configs, &call_id)
                }));
            }
        };
        let Reply::Stream(started) = success.value else {
            return Err(internal_error("a whole answer came back for a stream"));
        };
        earlier.extend(success.attempts);
        let started = *started;
        self.state = State::Live(Box::new(Live {
            stream: started.live,
            provider: success.provider,
            attempts: earlier,
            began: Instant::now(),
        }));
        Ok(started.first)
    }

    /// The complete answer, once the stream ended.
    fn finish(&mut self) -> PyResult<()> {
        let State::Live(live) = std::mem::replace(&mut self.state, State::Finished) else {
            return Ok(());
        };
        let provider_data = live.stream.provider_data();
        let headers = live.stream.headers().clone();
        let acc = live.stream.acc;
        let chat = ChatResponse {
            text: acc.text,
            tool_calls: acc.tool_calls,
            provider_data,
            model: acc.model,
            finish_reason: acc.finish_reason,
            usage: acc.usage,
            request_id: live.stream.request_id.clone(),
            raw: "null".to_string(),
            status: 200,
            headers,
        };
        let used = used_configs(&self.inner, &self.call.chain, &self.call.job);
        let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
        let response = Python::attach(|py| {
            let attempts = attempts_list(py, &live.attempts, &configs)?;
            let name = &configs[live.provider].name;
            Py::new(
                py,
                ResponseData::new(py, chat, name, attempts, &self.call_id)?,
            )
        })?;
        self.response = Some(response);
        Ok(())
    }

    /// `StreamInterrupted` for a failure after the first content chunk.
    fn interrupted(&mut self, failure: crate::engine::Failure, cause: Option<PyErr>) -> PyErr {
        let State::Live(live) = std::mem::replace(&mut self.state, State::Closed) else {
            return internal_error("a stream failed before it started");
        };
        let partial = live.stream.acc.text.clone();
        let usage = live.stream.acc.usage.clone();
        // The attempt that was streaming ended in this failure.
        let mut attempts = live.attempts;
        if let Some(last) = attempts.last_mut() {
            last.kind = Some(failure.kind);
            last.status = failure.status.or(last.status);
        }
        let error =
            self.stream_interrupted(failure, partial, live.provider, &usage, &attempts, cause);
        // The call ends here: its CallFailed event, as for any call.
        Python::attach(|py| {
            let value = error.value(py).clone().into_any();
            self.call.events.send_call_failed(
                py,
                &self.call_id,
                &value,
                "the stream broke after its first content; not retried (on_interrupt=\"raise\")",
            );
        });
        error
    }

    fn restart_failed(
        &mut self,
        failure: crate::engine::Failure,
        partial: String,
        provider: usize,
        earlier: Vec<AttemptRecord>,
        call_failure: CallFailure,
    ) -> PyErr {
        let inner = Arc::clone(&self.inner);
        let used = used_configs(&inner, &self.call.chain, &self.call.job);
        let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
        let call_id = self.call_id.clone();
        let cause = Python::attach(|py| self.call.raise(py, &call_failure, &configs, &call_id));
        let usage = crate::stream::Usage::default();
        // Every attempt: those before the cut, then the restart's.
        let mut attempts = earlier;
        attempts.extend(call_failure.attempts.iter().cloned());
        self.stream_interrupted(failure, partial, provider, &usage, &attempts, Some(cause))
    }

    fn stream_interrupted(
        &self,
        failure: crate::engine::Failure,
        partial: String,
        provider: usize,
        usage: &crate::stream::Usage,
        attempts: &[AttemptRecord],
        cause: Option<PyErr>,
    ) -> PyErr {
        let used = used_configs(&self.inner, &self.call.chain, &self.call.job);
        let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
        Python::attach(|py| {
            let build = || -> PyResult<PyErr> {
                let attempts = attempts_list(py, attempts, &configs)?;
                let cause = match cause {
                    Some(cause) => cause.into_value(py).into_any(),
                    None => {
                        let failed = ProviderFailure {
                            provider,
                            failure,
                            retry_after: None,
                        };
                        provider_error(py, &failed, &configs, Some(attempts.clone_ref(py)))?
                    }
                };
                let info = PyDict::new(py);
                info.set_item("cause", cause)?;
                info.set_item("partial_text", partial)?;
                info.set_item("provider", &configs[provider].name)?;
                let u = usage;
                info.set_item(
                    "usage",
                    (
                        u.input_tokens,
                        u.output_tokens,
                        u.cache_read_tokens,
                        u.cache_write_tokens,
                        u.reasoning_tokens,
                    ),
                )?;
                info.set_item("attempts", attempts)?;
                info.set_item("call_id", &self.call_id)?;
                let make = py
                    .import("failover._exceptions")?
                    .getattr("_stream_interrupted")?;
                Ok(PyErr::from_value(make.call((), Some(&info))?))
            };
            build().unwrap_or_else(|e| e)
        })
    }
}

/// A streaming call (`failover.Stream` and `failover.AsyncStream` wrap it).
#[pyclass(frozen, module = "failover._native")]
pub struct NativeStream {
    driver: Arc<Mutex<Driver>>,
    close: watch::Sender<bool>,
    locals: Option<pyo3_async_runtimes::TaskLocals>,
}

impl NativeStream {
    pub(super) fn new(inner: Arc<Inner>, call: Call, restart: bool) -> Self {
        let (close, closed) = watch::channel(false);
        let driver = Driver {
            inner,
            call,
            call_id: new_call_id(),
            restart,
            state: State::Fresh,
            started: Instant::now(),
            time_to_first_token: None,
            response: None,
            closed,
        };
        Self {
            driver: Arc::new(Mutex::new(driver)),
            close,
            locals: None,
        }
    }

    pub(super) fn with_locals(
        inner: Arc<Inner>,
        call: Call,
        restart: bool,
        locals: pyo3_async_runtimes::TaskLocals,
    ) -> Self {
        Self {
            locals: Some(locals),
            ..Self::new(inner, call, restart)
        }
    }
}

/// One read, with a panic inside turned into a `FailoverError`.
async fn read(driver: Arc<Mutex<Driver>>) -> PyResult<Option<Py<PyList>>> {
    use futures_util::FutureExt;
    let step = std::panic::AssertUnwindSafe(async move {
        let mut driver = driver.lock().await;
        driver.next().await
    })
    .catch_unwind()
    .await
    .unwrap_or_else(|_| Err(internal_error("a panic while reading a stream")))?;
    match step {
        Step::End => Ok(None),
        Step::Chunks(chunks) => Python::attach(|py| {
            let items = chunks
                .into_iter()
                .map(|c| chunk_data(py, c))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(Some(PyList::new(py, items)?.unbind()))
        }),
    }
}

#[pymethods]
impl NativeStream {
    /// The next chunks (a list), or `None` at the end; blocks with the GIL
    /// released, waking for Ctrl-C.
    fn next(&self, py: Python<'_>) -> PyResult<Option<Py<PyList>>> {
        block_on_interruptibly(py, read(Arc::clone(&self.driver)))?
    }

    /// The chunks that have already arrived, without waiting for anything
    /// (`None`: nothing ready, or the stream's end or failure, which
    /// `next_async` reports). An async stream asks this first, so a batch
    /// already in hand costs no trip through the event loop.
    fn try_next(&self, py: Python<'_>) -> PyResult<Option<Py<PyList>>> {
        let Ok(mut driver) = self.driver.try_lock() else {
            return Ok(None);
        };
        if *driver.closed.borrow() {
            return Ok(None);
        }
        let idle = driver.call.timeout;
        let State::Live(live) = &mut driver.state else {
            return Ok(None);
        };
        let runtime = super::runtime::runtime()?;
        let _context = runtime.enter();
        // Reading is cancel-safe at its waits: a read not ready is dropped
        // with nothing lost.
        let polled = futures_util::FutureExt::now_or_never(live.stream.next(idle));
        match polled {
            Some(Ok(Some(chunks))) => {
                let items = chunks
                    .into_iter()
                    .map(|c| chunk_data(py, c))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(Some(PyList::new(py, items)?.unbind()))
            }
            // The end, or a failure: the driver's to handle, on the next read.
            Some(Ok(None)) => {
                driver.finish()?;
                Ok(None)
            }
            Some(Err(failure)) => {
                live.stream.put_back(failure);
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// `next` as an awaitable.
    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let locals = match &self.locals {
            Some(locals) => locals.clone(),
            None => pyo3_async_runtimes::tokio::get_current_locals(py)?,
        };
        // The call's events, sleeps and reads belong to the loop that made
        // the stream: read in another (a second `asyncio.run`), its future
        // would be refused there and its result sent to a closed loop.
        if !pyo3_async_runtimes::get_running_loop(py)?.is(locals.event_loop(py)) {
            return Err(super::errors::failover_error(
                "this stream was made by stream_async() in another event loop: read it in the \
                 loop that made it (or make it again in this one)",
            ));
        }
        // Counted like an async call's future, so that an exit right after
        // the last read waits for its hand-over (see `runtime::quiesce`).
        let in_flight = runtime::AsyncCallGuard::new();
        let driver = Arc::clone(&self.driver);
        pyo3_async_runtimes::tokio::future_into_py_with_locals(py, locals, async move {
            let _in_flight = in_flight;
            read(driver).await
        })
    }

    /// Closes the connection at once; later reads end the stream.
    fn close(&self) {
        let _ = self.close.send(true);
        if let Ok(mut driver) = self.driver.try_lock() {
            driver.state = State::Closed;
        }
    }

    /// The complete answer, once the stream has ended.
    #[getter]
    fn response(&self, py: Python<'_>) -> Option<Py<ResponseData>> {
        let driver = self.driver.try_lock().ok()?;
        driver.response.as_ref().map(|r| r.clone_ref(py))
    }

    /// Seconds from the call to its first content chunk.
    #[getter]
    fn time_to_first_token(&self) -> Option<f64> {
        self.driver.try_lock().ok()?.time_to_first_token
    }
}
