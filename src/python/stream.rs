//! The native half of `failover.Stream`: a streaming call, started on its
//! first read. The engine runs (once, or again after a cut when the caller
//! asked for restarts) until the first content chunk; the chunks after it
//! are read here, in batches, with the GIL released while Rust waits.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tokio::sync::{watch, Mutex};

use super::call::{Call, CoreCall, Face, Inner};
use super::clock::CallClock;
use super::errors::internal_error;
use super::failures::provider_error;
use super::runtime;
use super::seam::{attempts_list, ResponseData, ToolCallData};
use crate::call::{Interruption, Step, StreamDriver, StreamEnd};
use crate::conversation::ToolCall;
use crate::engine::ProviderFailure;
use crate::stream::Chunk;

/// One chunk for Python (`failover.Chunk` is built from it).
#[pyclass(frozen, get_all, module = "failover._native")]
pub struct ChunkData {
    /// `"text"`, `"reasoning"`, `"tool_call"`, `"audio"` or `"restart"`.
    pub kind: &'static str,
    pub text: String,
    pub reasoning: String,
    pub tool_call: Option<Py<ToolCallData>>,
    pub discarded: String,
    pub discarded_tool_calls: Vec<Py<ToolCallData>>,
    /// A speech stream's bytes.
    pub audio: Option<Py<pyo3::types::PyBytes>>,
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
        audio: None,
    };
    match chunk {
        Chunk::Text(text) => data.text = text,
        Chunk::Reasoning(text) => {
            data.kind = "reasoning";
            data.reasoning = text;
        }
        Chunk::Audio(bytes) => {
            data.kind = "audio";
            data.audio = Some(pyo3::types::PyBytes::new(py, &bytes).unbind());
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

/// A streaming call's Python half: the core driver, the call's face, and
/// the close the in-flight read selects on.
struct Driver {
    inner: Arc<Inner>,
    core: StreamDriver<CallClock, PyErr>,
    face: Face,
    /// The whole answer, once the stream has ended.
    response: Option<Py<ResponseData>>,
    closed: watch::Receiver<bool>,
    /// Called once with the attempts of a stream closed while it was being
    /// read (the client's stats count them): set by `on_closed`.
    on_closed: Option<Py<PyAny>>,
}

impl Driver {
    async fn next(&mut self) -> PyResult<Step> {
        let mut closed = self.closed.clone();
        if *closed.borrow() {
            self.close();
            return Ok(Step::End);
        }
        let keys = self.face.keys(&self.inner);
        let step = tokio::select! {
            biased;
            _ = closed.changed() => {
                self.close();
                return Ok(Step::End);
            }
            step = self.core.next(&keys, &self.face.events) => step,
        };
        match step {
            Ok(step) => {
                self.take_response()?;
                Ok(step)
            }
            Err(end) => Err(self.raise(end)),
        }
    }

    /// Nothing more is read; a stream closed while it was being read hands
    /// its attempts to `on_closed`.
    fn close(&mut self) {
        self.core.close();
        let Some(attempts) = self.core.closed_attempts() else {
            return;
        };
        let Some(on_closed) = self.on_closed.take() else {
            return;
        };
        let configs = self.core.call.plan.configs();
        Python::attach(|py| {
            let called = attempts_list(py, attempts, &configs)
                .and_then(|attempts| on_closed.call1(py, (attempts,)));
            if let Err(error) = called {
                error.write_unraisable(py, None);
            }
        });
    }

    /// The whole answer as Python's, once the core has it.
    fn take_response(&mut self) -> PyResult<()> {
        let Some(done) = self.core.take_response() else {
            return Ok(());
        };
        let plan = &self.core.call.plan;
        let call_id = &self.core.call.call_id;
        let response = Python::attach(|py| {
            let configs = plan.configs();
            let attempts = attempts_list(py, &done.attempts, &configs)?;
            let name = &configs[done.provider].name;
            Py::new(
                py,
                ResponseData::new(py, done.chat, name, attempts, call_id)?,
            )
        })?;
        self.response = Some(response);
        Ok(())
    }

    /// The exception a stream that did not reach its end raises.
    fn raise(&mut self, end: StreamEnd<PyErr>) -> PyErr {
        let call = &mut self.core.call;
        match end {
            StreamEnd::Ended(error) => self.face.ended(error, &call.call_id),
            StreamEnd::Failed(failure) => Python::attach(|py| self.face.raise(py, &failure, call)),
            StreamEnd::Internal(what) => internal_error(what),
            StreamEnd::Interrupted(interruption) => {
                let error = stream_interrupted(call, *interruption, None);
                // The call ends here: its CallFailed event, as for any call.
                Python::attach(|py| {
                    let value = error.value(py).clone().into_any();
                    self.face.events.send_call_failed(
                        py,
                        &call.call_id,
                        &value,
                        "the stream broke after its first content; not retried \
                         (on_interrupt=\"raise\")",
                    );
                });
                error
            }
            StreamEnd::RestartFailed {
                interruption,
                restart,
            } => {
                let cause = Python::attach(|py| self.face.raise(py, &restart, call));
                stream_interrupted(call, *interruption, Some(cause))
            }
        }
    }
}

/// `StreamInterrupted` for a failure after the first content chunk.
fn stream_interrupted(call: &CoreCall, broken: Interruption, cause: Option<PyErr>) -> PyErr {
    let configs = call.plan.configs();
    Python::attach(|py| {
        let build = || -> PyResult<PyErr> {
            let attempts = attempts_list(py, &broken.attempts, &configs)?;
            let cause = match cause {
                Some(cause) => cause.into_value(py).into_any(),
                None => {
                    let failed = ProviderFailure {
                        provider: broken.provider,
                        failure: broken.failure,
                        retry_after: None,
                    };
                    provider_error(py, &failed, &configs, Some(attempts.clone_ref(py)), None)?
                }
            };
            let info = PyDict::new(py);
            info.set_item("cause", cause)?;
            info.set_item("partial_text", broken.partial_text)?;
            info.set_item("provider", &configs[broken.provider].name)?;
            let u = &broken.usage;
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
            info.set_item("call_id", &call.call_id)?;
            let make = py
                .import("failover._exceptions")?
                .getattr("_stream_interrupted")?;
            Ok(PyErr::from_value(make.call((), Some(&info))?))
        };
        build().unwrap_or_else(|e| e)
    })
}

/// A streaming call (`failover.Stream` and `failover.AsyncStream` wrap it).
#[pyclass(frozen, module = "failover._native")]
pub struct NativeStream {
    driver: Arc<Mutex<Driver>>,
    close: watch::Sender<bool>,
    locals: Option<pyo3_async_runtimes::TaskLocals>,
    /// The call's id, as its events carry (telemetry matches them by it).
    call_id: String,
}

impl NativeStream {
    pub(super) fn new(inner: Arc<Inner>, call: Call, restart: bool) -> Self {
        let (close, closed) = watch::channel(false);
        let call_id = call.core.call_id.clone();
        let driver = Driver {
            inner,
            core: StreamDriver::new(call.core, restart),
            face: call.face,
            response: None,
            closed,
            on_closed: None,
        };
        Self {
            driver: Arc::new(Mutex::new(driver)),
            close,
            locals: None,
            call_id,
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
        super::runtime::block_on_shared(py, read(Arc::clone(&self.driver)))?
    }

    /// The chunks that have already arrived, without waiting for anything
    /// (`None`: nothing ready, or the stream's end or failure, which
    /// `next_async` reports). An async stream asks this first, so a batch
    /// already in hand costs no trip through the event loop.
    fn try_next(&self, py: Python<'_>) -> PyResult<Option<Py<PyList>>> {
        let Ok(mut driver) = self.driver.try_lock() else {
            return Ok(None);
        };
        if *driver.closed.borrow() || !driver.core.is_live() {
            return Ok(None);
        }
        let runtime = super::runtime::runtime()?;
        let _context = runtime.enter();
        let Some(chunks) = driver.core.ready() else {
            // Nothing ready, or the end (its answer kept) or a failure, which
            // the next read reports.
            driver.take_response()?;
            return Ok(None);
        };
        let items = chunks
            .into_iter()
            .map(|c| chunk_data(py, c))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Some(PyList::new(py, items)?.unbind()))
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
        let driver = Arc::clone(&self.driver);
        runtime::awaitable(py, locals, async move {
            let read = read(driver).await;
            Box::new(move |py: Python<'_>| pyo3::IntoPyObjectExt::into_py_any(read?, py))
                as runtime::Finish
        })
    }

    /// Closes the connection at once (or, when a read holds the stream, as
    /// soon as it lets go); later reads end the stream.
    fn close(&self) -> PyResult<()> {
        let _ = self.close.send(true);
        if let Ok(mut driver) = self.driver.try_lock() {
            driver.close();
        } else {
            // A read in flight sees the close and ends, or is dropped (a
            // cancelled task's): either way the core closes once it can.
            let driver = Arc::clone(&self.driver);
            super::runtime::runtime()?.spawn(async move {
                driver.lock().await.close();
            });
        }
        Ok(())
    }

    /// The complete answer, once the stream has ended.
    #[getter]
    fn response(&self, py: Python<'_>) -> Option<Py<ResponseData>> {
        let driver = self.driver.try_lock().ok()?;
        driver.response.as_ref().map(|r| r.clone_ref(py))
    }

    /// Calls `callback` once with the attempts (a list of `AttemptData`)
    /// if the stream is closed while it is being read, the one cut by the
    /// close last: at `close()`, or, when a read holds the stream then (a
    /// cancelled task's, another thread's), as soon as it lets go.
    fn on_closed(&self, callback: Py<PyAny>) -> PyResult<()> {
        let Ok(mut driver) = self.driver.try_lock() else {
            return Err(super::errors::failover_error(
                "on_closed is set before the stream is read",
            ));
        };
        driver.on_closed = Some(callback);
        Ok(())
    }

    /// Seconds from the call to its first content chunk.
    #[getter]
    fn call_id(&self) -> &str {
        &self.call_id
    }

    #[getter]
    fn time_to_first_token(&self) -> Option<f64> {
        self.driver.try_lock().ok()?.core.time_to_first_token()
    }
}
