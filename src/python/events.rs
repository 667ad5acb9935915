//! Where a call's events go: straight to the Python emitter on sync calls,
//! and onto the caller's asyncio loop (in the caller's context) on async
//! calls, so hooks and log handlers never run on a tokio worker thread.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_async_runtimes::TaskLocals;

use super::failures::provider_error;
use super::runtime::Interrupt;
use crate::call::{CallEvents, Plan};
use crate::engine::Event;

pub struct EventTarget {
    /// `failover._events._emitter(on_event)`: `emit(kind, payload)`.
    emit: Py<PyAny>,
    /// The caller's event loop and context, on async calls.
    locals: Option<TaskLocals>,
    interrupt: Interrupt,
}

impl EventTarget {
    pub fn new(emit: Py<PyAny>, locals: Option<TaskLocals>, interrupt: Interrupt) -> Self {
        Self {
            emit,
            locals,
            interrupt,
        }
    }

    /// Hands one event to Python. The emitter logs a hook's ordinary
    /// exception itself; what reaches here is a BaseException (Ctrl-C in a
    /// hook) or an event loop that closed under the call: both end the call.
    pub fn send(&self, py: Python<'_>, kind: &str, payload: Bound<'_, PyAny>) {
        let delivered = match &self.locals {
            None => self.emit.call1(py, (kind, payload)).map(drop),
            Some(locals) => {
                let kwargs = PyDict::new(py);
                kwargs
                    .set_item("context", locals.context(py))
                    .and_then(|_| {
                        let args = (self.emit.bind(py), kind, payload);
                        locals
                            .event_loop(py)
                            .call_method("call_soon_threadsafe", args, Some(&kwargs))
                            .map(drop)
                    })
            }
        };
        let Err(error) = delivered else { return };
        let loop_closed = self.locals.as_ref().is_some_and(|locals| {
            let closed = locals.event_loop(py).call_method0("is_closed");
            closed.and_then(|c| c.is_truthy()).unwrap_or(true)
        });
        if loop_closed {
            self.interrupt.raise(error);
        } else {
            self.interrupt.report(py, error);
        }
    }

    /// An engine event -> the Python event's fields, by name.
    pub fn send_engine_event(&self, py: Python<'_>, event: &Event, plan: &Plan) {
        let name = |index: usize| plan.config(index).name.as_str();
        let fields = PyDict::new(py);
        let built: PyResult<&str> = (|| match event {
            Event::RetryScheduled {
                call_id,
                provider,
                attempt,
                delay,
                kind,
                status,
                reason,
            } => {
                fields.set_item("call_id", call_id)?;
                fields.set_item("provider", name(*provider))?;
                fields.set_item("attempt", *attempt)?;
                fields.set_item("delay", delay.as_secs_f64())?;
                fields.set_item("kind", kind.as_str())?;
                fields.set_item("status", *status)?;
                fields.set_item("reason", reason)?;
                Ok("RetryScheduled")
            }
            Event::FailedOver {
                call_id,
                left,
                to_provider,
                reason,
            } => {
                fields.set_item("call_id", call_id)?;
                fields.set_item("from_provider", name(left.provider))?;
                fields.set_item("to_provider", name(*to_provider))?;
                fields.set_item(
                    "error",
                    provider_error(py, left, &plan.configs(), None, None)?,
                )?;
                fields.set_item("reason", reason)?;
                Ok("FailedOver")
            }
            Event::Skipped {
                call_id,
                provider,
                reason,
            } => {
                fields.set_item("call_id", call_id)?;
                fields.set_item("provider", name(*provider))?;
                fields.set_item("reason", reason)?;
                Ok("Skipped")
            }
            Event::HedgeStarted {
                call_id,
                provider,
                to_provider,
                after,
            } => {
                fields.set_item("call_id", call_id)?;
                fields.set_item("provider", name(*provider))?;
                fields.set_item("to_provider", name(*to_provider))?;
                fields.set_item("after", after.as_secs_f64())?;
                Ok("HedgeStarted")
            }
            Event::HedgeFailed {
                call_id,
                left,
                other,
                other_failed,
            } => {
                fields.set_item("call_id", call_id)?;
                fields.set_item("provider", name(left.provider))?;
                fields.set_item("other", name(*other))?;
                fields.set_item("other_failed", *other_failed)?;
                fields.set_item(
                    "error",
                    provider_error(py, left, &plan.configs(), None, None)?,
                )?;
                Ok("HedgeFailed")
            }
            Event::HedgeWon {
                call_id,
                winner,
                loser,
            } => {
                fields.set_item("call_id", call_id)?;
                fields.set_item("winner", name(*winner))?;
                fields.set_item("loser", name(*loser))?;
                Ok("HedgeWon")
            }
        })();
        match built {
            Ok(kind) => self.send(py, kind, fields.into_any()),
            Err(e) => e.write_unraisable(py, None),
        }
    }

    /// A notice for the log only (a fleet-wide state lost or back).
    pub fn send_notice(&self, py: Python<'_>, text: &str) {
        let fields = pyo3::types::PyDict::new(py);
        match fields.set_item("text", text) {
            Ok(()) => self.send(py, "Notice", fields.into_any()),
            Err(e) => e.write_unraisable(py, None),
        }
    }

    /// A note for the DEBUG log only (a hint a provider is not sent).
    pub fn send_debug(&self, py: Python<'_>, call_id: &str, text: &str) {
        let fields = PyDict::new(py);
        let built = fields
            .set_item("call_id", call_id)
            .and_then(|_| fields.set_item("text", text));
        match built {
            Ok(()) => self.send(py, "Debug", fields.into_any()),
            Err(e) => e.write_unraisable(py, None),
        }
    }

    /// `CallFailed`, once, when a call ends in `error`.
    pub fn send_call_failed(
        &self,
        py: Python<'_>,
        call_id: &str,
        error: &Bound<'_, PyAny>,
        reason: &str,
    ) {
        let fields = PyDict::new(py);
        let built = fields
            .set_item("call_id", call_id)
            .and_then(|_| fields.set_item("error", error))
            .and_then(|_| fields.set_item("reason", reason));
        match built {
            Ok(()) => self.send(py, "CallFailed", fields.into_any()),
            Err(e) => e.write_unraisable(py, None),
        }
    }
}

/// The engine's events, notes and notices, handed to Python.
impl CallEvents for EventTarget {
    fn engine(&self, event: &Event, plan: &Plan) {
        Python::attach(|py| self.send_engine_event(py, event, plan));
    }

    fn debug(&self, call_id: &str, text: &str) {
        Python::attach(|py| self.send_debug(py, call_id, text));
    }

    fn notice(&self, text: &str) {
        Python::attach(|py| self.send_notice(py, text));
    }
}
