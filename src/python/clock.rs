//! Sleepers from Python: the real clock, the virtual clock behind
//! `failover.testing.FakeSleeper`, or any callable.

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyTuple};
use pyo3_async_runtimes::TaskLocals;
use tokio::sync::oneshot;

use super::errors::configuration_error;
use super::runtime::Interrupt;
use crate::engine::clock::SleepFuture;
use crate::engine::{Clock, ManualCallClock, ManualClock, TokioClock};

/// A virtual clock: the deadline, HTTP-dates, reset times and cooldowns are
/// measured on it, and time moves only by sleeps. A sleep from Python
/// (`FakeSleeper(seconds)`) is recorded and moves it at once; the calls under
/// it wait for each other ([`ManualCallClock`]), so calls side by side, in
/// threads or tasks, wake together as under real sleeping.
#[pyclass(frozen, module = "failover._native")]
pub struct VirtualClock {
    pub(crate) clock: ManualClock,
    /// The thread that made it: the test's own.
    home: ThreadId,
}

/// How long, in real time, the virtual time stays put after a call starts,
/// so that calls started together all join before a sleep moves it: the
/// settle of [`ManualClock::for_call`]. An async call's lasts, besides, until
/// its event loop has run what was ready to run when the call started (the
/// first steps of the tasks gathered with it, each starting its call), so a
/// loaded machine cannot split them; the few milliseconds are for tasks
/// that start their calls a turn or two later.
const TASK_SETTLE: Duration = Duration::from_millis(5);
/// Threads start theirs further apart: each must take the GIL, and a thread
/// running Python code gives it up only every 5 ms (the switch interval),
/// so starts come several of those apart on a busy machine (up to 9 ms
/// measured with 40 threads on two loaded cores).
const THREAD_SETTLE: Duration = Duration::from_millis(50);

impl VirtualClock {
    /// The settle of a call started now on this thread. A sync call on the
    /// FakeSleeper's own thread has none: that thread is blocked in it, so
    /// no call can start there to join it, and tests that make calls one
    /// after another stay as fast as before.
    fn settle(&self, is_async: bool) -> Duration {
        if std::thread::current().id() != self.home {
            THREAD_SETTLE
        } else if is_async {
            TASK_SETTLE
        } else {
            Duration::ZERO
        }
    }
}

#[pymethods]
impl VirtualClock {
    #[new]
    fn new() -> Self {
        Self {
            clock: ManualClock::new(),
            home: std::thread::current().id(),
        }
    }

    /// Every sleep requested so far, in seconds.
    #[getter]
    fn sleeps(&self) -> Vec<f64> {
        self.clock
            .sleeps()
            .iter()
            .map(Duration::as_secs_f64)
            .collect()
    }

    /// The virtual wall time, in Unix seconds.
    fn time(&self) -> f64 {
        self.clock
            .wall()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }

    /// Records a sleep and moves the clock, at once (waking calls due by then).
    fn sleep(&self, seconds: f64) {
        let duration = crate::engine::hints::secs(seconds).unwrap_or(Duration::ZERO);
        drop(self.clock.sleep(duration));
    }

    fn clear(&self) {
        self.clock.clear();
    }

    /// Moves the clock without recording a sleep (time passing between calls).
    fn advance(&self, seconds: f64) {
        let duration = crate::engine::hints::secs(seconds).unwrap_or(Duration::ZERO);
        self.clock.advance(duration);
    }
}

/// A Python callable as the sleeper: `sleeper(seconds)`; on async calls an
/// awaitable it returns is awaited. Time itself is real.
pub struct CallableClock {
    callable: Arc<Py<PyAny>>,
    origin: Instant,
    /// The caller's event loop and context, on async calls.
    locals: Option<TaskLocals>,
    interrupt: Interrupt,
}

impl Clock for CallableClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep(&self, duration: Duration) -> SleepFuture {
        let callable = Arc::clone(&self.callable);
        let interrupt = self.interrupt.clone();
        let locals = self.locals.clone();
        Box::pin(async move {
            let call = || {
                Python::attach(|py| {
                    let result = callable
                        .call1(py, (duration.as_secs_f64(),))?
                        .into_bound(py);
                    if !result.hasattr("__await__")? {
                        return Ok(None);
                    }
                    if let Some(locals) = &locals {
                        let sleep = LoopSleep::start(py, result, locals)?;
                        return Ok(Some(Box::pin(sleep.wait()) as AwaitedSleep));
                    }
                    // Nothing can await it on a sync call: end the call and
                    // say so, rather than retry at once.
                    if result.hasattr("close")? {
                        result.call_method0("close")?;
                    }
                    interrupt.raise(configuration_error(
                        "the sleeper returned an awaitable on a sync call: use a plain function, \
                         or call prompt_async()",
                    ));
                    Ok(Some(
                        Box::pin(std::future::pending::<PyResult<()>>()) as AwaitedSleep
                    ))
                })
            };
            // A blocking sleeper must not stall the runtime worker it runs on.
            let outcome = match super::runtime::blocking(call) {
                Ok(Some(fut)) => fut.await,
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(error) = outcome {
                if Python::attach(|py| interrupt.report(py, error)) {
                    // The call is being ended by whoever holds the receiver.
                    std::future::pending::<()>().await;
                }
            }
        })
    }
}

type AwaitedSleep = std::pin::Pin<Box<dyn std::future::Future<Output = PyResult<()>> + Send>>;

/// An async sleeper's awaitable, running as a task on the caller's loop
/// (`failover._sleep._LoopSleep`). Dropping it (the call was cancelled)
/// cancels that task, so no sleeper outlives its call.
struct LoopSleep {
    handle: Option<Py<PyAny>>,
    done: oneshot::Receiver<Option<Py<PyAny>>>,
}

impl LoopSleep {
    fn start(py: Python<'_>, awaitable: Bound<'_, PyAny>, locals: &TaskLocals) -> PyResult<Self> {
        let (sender, done) = oneshot::channel();
        let sender = Mutex::new(Some(sender));
        let report = PyCFunction::new_closure(
            py,
            None,
            None,
            move |args: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| -> PyResult<()> {
                let exception = args.get_item(0)?;
                let exception = (!exception.is_none()).then(|| exception.unbind());
                if let Some(sender) = sender.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = sender.send(exception);
                }
                Ok(())
            },
        )?;
        let class = py.import("failover._sleep")?.getattr("_LoopSleep")?;
        let handle = class.call1((awaitable, locals.event_loop(py), locals.context(py), report))?;
        Ok(Self {
            handle: Some(handle.unbind()),
            done,
        })
    }

    async fn wait(mut self) -> PyResult<()> {
        let outcome = (&mut self.done).await;
        self.handle = None; // finished: nothing to cancel
        match outcome {
            Ok(Some(exception)) => Err(Python::attach(|py| {
                PyErr::from_value(exception.into_bound(py))
            })),
            Ok(None) | Err(_) => Ok(()),
        }
    }
}

impl Drop for LoopSleep {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            Python::attach(|py| {
                if let Err(e) = handle.call_method0(py, "cancel") {
                    e.write_unraisable(py, None);
                }
            });
        }
    }
}

/// The clock of one call.
pub enum CallClock {
    Real(TokioClock),
    /// This call's view of a FakeSleeper's shared clock.
    Virtual(ManualCallClock),
    Callable(CallableClock),
}

impl CallClock {
    pub fn from_sleeper(
        sleeper: Option<&Bound<'_, PyAny>>,
        locals: Option<&TaskLocals>,
        interrupt: &Interrupt,
    ) -> PyResult<Self> {
        let Some(sleeper) = sleeper else {
            return Ok(Self::Real(TokioClock::new()));
        };
        if let Ok(virtual_clock) = sleeper.cast::<VirtualClock>() {
            let virtual_clock = virtual_clock.get();
            let settle = virtual_clock.settle(locals.is_some());
            let call = virtual_clock.clock.for_call(settle);
            if let Some(locals) = locals {
                hold_for_a_loop_turn(sleeper.py(), &virtual_clock.clock, locals);
            }
            return Ok(Self::Virtual(call));
        }
        if !sleeper.is_callable() {
            return Err(configuration_error(
                "sleeper must be None, a FakeSleeper or a callable taking seconds",
            ));
        }
        Ok(Self::Callable(CallableClock {
            callable: Arc::new(sleeper.clone().unbind()),
            origin: Instant::now(),
            locals: locals.cloned(),
            interrupt: interrupt.clone(),
        }))
    }
}

/// Keeps `clock`'s time until `locals`' event loop has run the callbacks
/// ready now: asyncio runs those of one turn in order, and a callback
/// scheduled now runs after them.
fn hold_for_a_loop_turn(py: Python<'_>, clock: &ManualClock, locals: &TaskLocals) {
    let hold = Mutex::new(Some(clock.hold()));
    let release = PyCFunction::new_closure(
        py,
        None,
        None,
        move |_: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| {
            drop(hold.lock().unwrap_or_else(|e| e.into_inner()).take());
        },
    );
    // A loop that cannot take it (closing) ends the hold at once: the
    // closure, and the hold with it, is dropped.
    if let Ok(release) = release {
        let _ = locals.event_loop(py).call_method1("call_soon", (release,));
    }
}

impl Clock for CallClock {
    fn now(&self) -> Duration {
        match self {
            Self::Real(c) => c.now(),
            Self::Virtual(c) => c.now(),
            Self::Callable(c) => c.now(),
        }
    }

    fn wall(&self) -> SystemTime {
        match self {
            Self::Real(c) => c.wall(),
            Self::Virtual(c) => c.wall(),
            Self::Callable(c) => c.wall(),
        }
    }

    fn sleep(&self, duration: Duration) -> SleepFuture {
        match self {
            Self::Real(c) => c.sleep(duration),
            Self::Virtual(c) => c.sleep(duration),
            Self::Callable(c) => c.sleep(duration),
        }
    }

    fn virtual_time(&self) -> Option<ManualClock> {
        match self {
            Self::Virtual(c) => c.virtual_time(),
            _ => None,
        }
    }

    fn wait(&self, bound: Duration) -> SleepFuture {
        match self {
            Self::Real(c) => c.wait(bound),
            Self::Virtual(c) => c.wait(bound),
            // A callable's sleep cannot be cut short when the slot frees.
            Self::Callable(_) => Box::pin(tokio::time::sleep(bound)),
        }
    }

    fn end(&self) {
        if let Self::Virtual(c) = self {
            c.end();
        }
    }
}
