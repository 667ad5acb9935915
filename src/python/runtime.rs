//! The runtimes calls run on, and the two ways Python code can end a call
//! from inside it.
//!
//! Async calls and streams run on the shared multi-thread runtime that
//! pyo3-async-runtimes owns. A sync whole call (`prompt`, `embed`) made from
//! plain Python code runs instead on the calling thread's own current-thread
//! runtime, with that thread's own connection pool of the client: no thread
//! hops (the shared runtime's workers own its sockets, so a call driven from
//! outside them wakes a worker for every read and is woken back), which was
//! about half of a sync call's CPU. A connection belongs to the runtime that
//! opened it, hence one pool per thread and runtime.

use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyDict, PyTuple};
use pyo3_async_runtimes::TaskLocals;
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use super::errors::failover_error;
use crate::call::{Interrupted, Interrupter};
use crate::http::{ReqwestTransport, TransportOptions};

/// The shared runtime has been started in this process.
static STARTED: AtomicBool = AtomicBool::new(false);
/// This process was forked after the shared runtime had started. A thread's
/// own runtime needs no check of its own: a thread has one only from its
/// second sync call, its first having started the shared runtime, so a
/// child that inherited one is refused like any other.
static FORKED_AFTER_START: AtomicBool = AtomicBool::new(false);

extern "C" fn after_fork_in_child() {
    if STARTED.load(Ordering::SeqCst) {
        FORKED_AFTER_START.store(true, Ordering::SeqCst);
    }
}

/// Sets up the shared runtime before its first use: one worker thread.
/// What runs there is async calls (one event loop's, usually) and streams,
/// whose Rust work is small beside the Python work their answers cost; a
/// second worker only adds hand-offs between the two (an async call in a
/// row measured 20-30 % more CPU with two, and no more throughput at 100 in
/// flight). `TOKIO_WORKER_THREADS` (a positive number) still sets the
/// number, as in any tokio program. Called once, when the module loads.
pub fn configure_shared_runtime() {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    // Read here, not by tokio at the first call: tokio panics on a value
    // that is not a positive number, and that panic would poison the
    // runtime for the process. Such a value counts as unset.
    let workers = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|n| n.trim().parse::<usize>().ok())
        .filter(|&n| n > 0);
    builder.worker_threads(workers.unwrap_or(1));
    pyo3_async_runtimes::tokio::init(builder);
}

/// Notes forks as they happen (instead of comparing process ids, a system
/// call, on every call). Called once, when the module loads.
pub fn watch_forks() {
    #[cfg(unix)]
    // SAFETY: registers a handler that only touches atomics, which is
    // async-signal-safe, as a child's fork handler must be.
    unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_in_child));
    }
}

fn refuse_if_forked() -> PyResult<()> {
    if FORKED_AFTER_START.load(Ordering::Relaxed) {
        return Err(failover_error(
            "this process was forked after failover had started its runtime in the parent \
             (a client's first call, or a MockServer), and that runtime's threads do not \
             survive fork(): start failover only after forking, in each worker process \
             (or use the 'spawn' start method)",
        ));
    }
    Ok(())
}

/// The runtime pyo3-async-runtimes owns, for this process only: its worker
/// threads do not survive `fork()`, and a call in a forked child would wait
/// forever on them.
pub fn runtime() -> PyResult<&'static Runtime> {
    refuse_if_forked()?;
    STARTED.store(true, Ordering::Relaxed);
    Ok(pyo3_async_runtimes::tokio::get_runtime())
}

/// Runs `f`, which blocks (Python code: a sleeper, a key callable), without
/// stalling other tasks: on a shared-runtime worker, after handing its tasks
/// to another thread; on a thread's own runtime, in place (nothing else
/// waits on that thread but its own call).
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// A client's connection pools: the shared runtime's, and each thread's
/// own (in that thread's [`LocalDriver`], found by this pool's address).
pub struct Pools {
    options: TransportOptions,
    /// The proxy environment when the shared pool was made. reqwest reads
    /// it when a pool is made, and a thread's own pool is made later: one
    /// made under another environment would send through other proxies
    /// than the shared one (whose credentials the client redacts), so a
    /// thread then keeps to the shared pool.
    proxy_environment: Vec<Option<String>>,
    /// `None` once the client is closed; calls in flight keep their clone.
    shared: RwLock<Option<ReqwestTransport>>,
}

impl Pools {
    pub fn new(options: TransportOptions) -> Result<Self, String> {
        let shared = ReqwestTransport::new(&options)?;
        Ok(Self {
            options,
            proxy_environment: proxy_environment(),
            shared: RwLock::new(Some(shared)),
        })
    }

    /// The shared runtime's pool, unless the client is closed.
    pub fn shared(&self) -> PyResult<ReqwestTransport> {
        let guard = self.shared.read().unwrap_or_else(|e| e.into_inner());
        guard.clone().ok_or_else(closed)
    }

    pub fn is_closed(&self) -> bool {
        self.shared
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Releases every pool: the shared one at once, this thread's own at
    /// once too (its connections are closed before this returns), other
    /// threads' at their next sync call or when they end.
    pub fn close(self: &Arc<Self>) {
        *self.shared.write().unwrap_or_else(|e| e.into_inner()) = None;
        if Handle::try_current().is_ok() {
            return; // inside a call: the runtime is busy with it
        }
        let _ = LOCAL.try_with(|local| {
            if let Ok(mut local) = local.try_borrow_mut() {
                if let Some(driver) = local.as_mut() {
                    driver.prune();
                }
            }
        });
    }
}

/// What reqwest reads the proxies from (`http::PROXY_VARIABLES` and the
/// exceptions), as it is now.
fn proxy_environment() -> Vec<Option<String>> {
    crate::http::PROXY_VARIABLES
        .iter()
        .chain(&["NO_PROXY", "no_proxy"])
        .map(|name| std::env::var(name).ok())
        .collect()
}

fn closed() -> PyErr {
    failover_error("this Client is closed: make a new one to call providers again")
}

/// A thread's own runtime and its pools, one per client it has called.
struct LocalDriver {
    pools: Vec<(Weak<Pools>, ReqwestTransport)>,
    /// `None` only while it is dropped.
    runtime: Option<Runtime>,
}

impl Drop for LocalDriver {
    /// When its thread ends: the pools first, then the runtime, without
    /// waiting for its blocking threads (a name lookup stuck in
    /// `getaddrinfo` must not hold up the thread's end, or the process's).
    fn drop(&mut self) {
        self.pools.clear();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl LocalDriver {
    fn new() -> PyResult<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failover_error(format!("cannot start a runtime: {e}")))?;
        Ok(Self {
            pools: Vec::new(),
            runtime: Some(runtime),
        })
    }

    fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("taken only by drop")
    }

    /// Drops the pools of clients closed or gone, and lets their
    /// connections' tasks see it and close their sockets.
    fn prune(&mut self) {
        let before = self.pools.len();
        self.pools
            .retain(|(pools, _)| pools.upgrade().is_some_and(|p| !p.is_closed()));
        if self.pools.len() != before {
            self.runtime().block_on(async {
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            });
        }
    }

    /// This thread's pool of `pools`' client; `None`: keep to the shared one.
    fn transport(&mut self, pools: &Arc<Pools>) -> PyResult<Option<ReqwestTransport>> {
        // A client closed on another thread hangs up here at this thread's
        // next sync call.
        self.prune();
        let weak = Arc::downgrade(pools);
        if let Some((_, transport)) = self.pools.iter().find(|(p, _)| p.ptr_eq(&weak)) {
            return Ok(Some(transport.clone()));
        }
        if pools.options.proxy.is_none() && proxy_environment() != pools.proxy_environment {
            return Ok(None);
        }
        let _context = self.runtime().enter();
        let transport = ReqwestTransport::new(&pools.options).map_err(failover_error)?;
        self.pools.push((weak, transport.clone()));
        Ok(Some(transport))
    }
}

thread_local! {
    static LOCAL: RefCell<Option<LocalDriver>> = const { RefCell::new(None) };
    /// Sync calls this thread has made: its first goes through the shared
    /// pool, so a thread that lives for one call (a thread per request or
    /// job) reuses the shared pool's connections instead of opening one
    /// (and shaking hands over TLS) of its own that nobody reuses.
    static SYNC_CALLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// How a sync whole call is driven.
pub enum SyncDriver {
    /// On this thread's own runtime, with this thread's pool.
    Local(ReqwestTransport),
    /// On the shared runtime: a thread already inside a runtime (Python
    /// code a call runs, making a call of its own), or a client whose state
    /// lives on Redis (its connection is the shared runtime's).
    Shared(ReqwestTransport),
}

impl SyncDriver {
    pub fn for_call(pools: &Arc<Pools>, shared_only: bool) -> PyResult<Self> {
        refuse_if_forked()?;
        if pools.is_closed() {
            return Err(closed());
        }
        let first_here = SYNC_CALLS
            .try_with(|calls| {
                let made = calls.get();
                calls.set(made.saturating_add(1));
                made == 0
            })
            .unwrap_or(true);
        if shared_only || first_here || Handle::try_current().is_ok() {
            return pools.shared().map(Self::Shared);
        }
        let local = LOCAL.try_with(|local| -> PyResult<Option<ReqwestTransport>> {
            let Ok(mut local) = local.try_borrow_mut() else {
                return Ok(None);
            };
            if local.is_none() {
                *local = Some(LocalDriver::new()?);
            }
            let driver = local.as_mut().expect("made above");
            driver.transport(pools)
        });
        match local {
            Ok(Ok(Some(transport))) => Ok(Self::Local(transport)),
            Ok(Err(error)) => Err(error),
            // The thread is ending, its runtime is busy, or the proxy
            // environment changed since the client was made: the shared one.
            _ => pools.shared().map(Self::Shared),
        }
    }

    pub fn transport(&self) -> ReqwestTransport {
        match self {
            Self::Local(transport) | Self::Shared(transport) => transport.clone(),
        }
    }

    /// Drives `future` to completion with the GIL released, checking for
    /// Ctrl-C between slices (dropping the future on an interrupt cancels
    /// its HTTP request).
    pub fn run<T: Send + 'static>(
        self,
        py: Python<'_>,
        future: impl Future<Output = T> + Send + 'static,
    ) -> PyResult<T> {
        match self {
            Self::Local(_) => {
                let mut future = std::pin::pin!(future);
                let mut first_slice = true;
                loop {
                    let slice = LOCAL.with(|local| {
                        let local = local.borrow();
                        let driver = local.as_ref().ok_or_else(|| {
                            failover_error("internal error: this thread's runtime is gone")
                        })?;
                        PyResult::Ok(py.detach(|| {
                            driver.runtime().block_on(async {
                                if first_slice {
                                    // The runtime has not run since this
                                    // thread's last call: let it read what
                                    // came meanwhile (a server closing an
                                    // idle connection), so the pool never
                                    // hands out a connection already closed.
                                    // `yield_now` wakes after the I/O
                                    // driver is polled; the second lets the
                                    // connection's task act on it.
                                    tokio::task::yield_now().await;
                                    tokio::task::yield_now().await;
                                }
                                tokio::time::timeout(SIGNAL_CHECK_INTERVAL, &mut future).await
                            })
                        }))
                    });
                    first_slice = false;
                    match slice? {
                        Ok(value) => {
                            if crate::http::take_abandoned() {
                                // A request it dropped (a deadline, a
                                // hedge's loser): its connection's task
                                // closes the socket now, not at this
                                // thread's next call.
                                LOCAL.with(|local| {
                                    if let Some(driver) = local.borrow().as_ref() {
                                        py.detach(|| {
                                            driver.runtime().block_on(async {
                                                for _ in 0..4 {
                                                    tokio::task::yield_now().await;
                                                }
                                            })
                                        });
                                    }
                                });
                            }
                            return Ok(value);
                        }
                        Err(_) => py.check_signals()?,
                    }
                }
            }
            Self::Shared(_) => block_on_shared(py, future),
        }
    }
}

/// How often a blocking call wakes to let Python handle Ctrl-C.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);
/// How long an interrupted call spawned on the shared runtime is waited
/// for to end (it ends at its next await, unless Python code it runs holds
/// it longer).
const ABORT_GRACE: Duration = Duration::from_secs(1);

/// Makes a call's answer or exception; a panic while making it (a bug) is a
/// `FailoverError`, never a PanicException, on either face.
pub fn finish_safely(py: Python<'_>, finish: Finish) -> PyResult<Py<PyAny>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| finish(py)))
        .unwrap_or_else(|panic| Err(super::errors::internal_error(panic_text(&*panic))))
}

/// What a panic said.
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Drives `future` on the shared runtime for a synchronous caller.
/// `block_in_place` lets this work on a shared-runtime worker too (an event
/// hook or a sleeper of an async call making a sync call hands its worker's
/// tasks to another thread first); on a thread's own runtime (the same, in
/// a sync call) the future is spawned and waited for.
pub fn block_on_shared<T: Send + 'static>(
    py: Python<'_>,
    future: impl Future<Output = T> + Send + 'static,
) -> PyResult<T> {
    let runtime = runtime()?;
    let nested_in_local = Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::CurrentThread);
    if nested_in_local {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        // Shared with the thread that waits with the GIL released.
        let receiver = Mutex::new(receiver);
        let task = runtime.spawn(async move {
            let _ = sender.send(future.await);
        });
        loop {
            let received = py.detach(|| {
                let receiver = receiver.lock().unwrap_or_else(|e| e.into_inner());
                receiver.recv_timeout(SIGNAL_CHECK_INTERVAL)
            });
            match received {
                Ok(value) => return Ok(value),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(error) = py.check_signals() {
                        // The call ends before the interrupt is raised, as it
                        // does when its future is dropped in place: an abort
                        // takes effect at the task's next await, and until
                        // then it may still be running Python code (a hook).
                        task.abort();
                        py.detach(|| {
                            let receiver = receiver.lock().unwrap_or_else(|e| e.into_inner());
                            let _ = receiver.recv_timeout(ABORT_GRACE);
                        });
                        return Err(error);
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(failover_error("the call ended without an answer"));
                }
            }
        }
    }
    let mut future = Box::pin(future);
    loop {
        let slice = py.detach(|| {
            tokio::task::block_in_place(|| {
                runtime.block_on(async {
                    tokio::time::timeout(SIGNAL_CHECK_INTERVAL, &mut future).await
                })
            })
        });
        match slice {
            Ok(value) => return Ok(value),
            Err(_) => py.check_signals()?,
        }
    }
}

/// Ends a call from inside it. Python code the call runs (a sleeper, an event
/// hook) may raise a BaseException such as KeyboardInterrupt or SystemExit:
/// that is not the engine's to swallow, so it ends the call and is raised.
#[derive(Clone)]
pub struct Interrupt(Interrupter<PyErr>);

impl Interrupt {
    pub fn new() -> (Self, Interrupted<PyErr>) {
        let (interrupter, interrupted) = crate::call::interrupt();
        (Self(interrupter), interrupted)
    }

    /// Ends the call with `error` (the first one wins).
    pub fn raise(&self, error: PyErr) {
        self.0.raise(error);
    }

    /// An error from user code: an ordinary exception is reported to
    /// `sys.unraisablehook` and the call goes on (`false`); anything else
    /// ends the call (`true`).
    pub fn report(&self, py: Python<'_>, error: PyErr) -> bool {
        if error.is_instance_of::<PyException>(py) {
            error.write_unraisable(py, None);
            false
        } else {
            self.raise(error);
            true
        }
    }
}

/// What an async call's future ends with: how to make its result, run in
/// the one hold of the GIL that also hands it to the event loop.
pub type Finish = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// An awaitable (an asyncio future of `locals`' loop) for `future`, run as
/// one task on the shared runtime. When it ends, its result is made and
/// scheduled on the loop (`failover._loop.complete`) from that task, in one
/// hold of the GIL: no second task, no blocking-pool thread, no second GIL
/// hold, each of which cost an async call a thread hop. Cancelling the
/// asyncio future drops `future` (and with it the HTTP request). Counted in
/// `ASYNC_IN_FLIGHT` until the result is handed over (see [`quiesce`]).
pub fn awaitable<'py>(
    py: Python<'py>,
    locals: TaskLocals,
    future: impl Future<Output = Finish> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    static COMPLETE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let complete = COMPLETE
        .get_or_try_init(py, || {
            PyResult::Ok(py.import("failover._loop")?.getattr("complete")?.unbind())
        })?
        .clone_ref(py);
    let runtime = runtime()?;
    let event_loop = locals.event_loop(py);
    let asyncio_future = event_loop.call_method0(pyo3::intern!(py, "create_future"))?;
    let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
    let cancel = Mutex::new(Some(cancel));
    let on_done = PyCFunction::new_closure(
        py,
        None,
        None,
        move |args: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| -> PyResult<()> {
            let done = args.get_item(0)?;
            if done.call_method0("cancelled")?.is_truthy()? {
                if let Some(cancel) = cancel.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = cancel.send(());
                }
            }
            Ok(())
        },
    )?;
    asyncio_future.call_method1(pyo3::intern!(py, "add_done_callback"), (on_done,))?;
    let target = asyncio_future.clone().unbind();
    let event_loop = event_loop.unbind();
    let in_flight = AsyncCallGuard::new();
    runtime.spawn(async move {
        let _in_flight = in_flight;
        let mut cancelled = cancelled;
        let future = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(future));
        let finish = tokio::select! {
            finish = future => finish.unwrap_or_else(|panic| {
                let error = super::errors::internal_error(panic_text(&*panic));
                Box::new(move |_| Err(error))
            }),
            // Only a cancel ends it early; a dropped sender (the future
            // done otherwise) leaves it running.
            Ok(()) = &mut cancelled => return,
        };
        Python::attach(|py| {
            let (value, error) = match finish_safely(py, finish) {
                Ok(value) => (value, None),
                Err(error) => (py.None(), Some(error.into_value(py))),
            };
            // A loop already closed has nobody left to hand it to.
            let _ = event_loop.call_method1(
                py,
                pyo3::intern!(py, "call_soon_threadsafe"),
                (complete, target, value, error),
            );
        });
    });
    Ok(asyncio_future)
}

/// Async calls whose engine future has not ended yet.
static ASYNC_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// When the last async call's engine future ended.
static LAST_ASYNC_END: Mutex<Option<Instant>> = Mutex::new(None);

/// Held by an async call's future while it runs (dropped when it ends or
/// is cancelled).
pub struct AsyncCallGuard(());

impl AsyncCallGuard {
    pub fn new() -> Self {
        ASYNC_IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        Self(())
    }
}

impl Drop for AsyncCallGuard {
    fn drop(&mut self) {
        *LAST_ASYNC_END.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        ASYNC_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Registered with `atexit` on the first async call. After an async call's
/// future ends, a runtime thread still hands the result to the event loop
/// (`call_soon_threadsafe`, which briefly releases the GIL); if the
/// interpreter finalizes meanwhile, that thread is stopped inside Rust code
/// and the process aborts. Waiting here, with the GIL released, until no
/// call is in flight and the last hand-over has had time to finish keeps
/// the exit clean. Bounded: never more than about a second.
#[pyfunction]
pub fn quiesce(py: Python<'_>) {
    const HAND_OVER: Duration = Duration::from_millis(100);
    const LONGEST: Duration = Duration::from_secs(1);
    py.detach(|| {
        let started = Instant::now();
        while ASYNC_IN_FLIGHT.load(Ordering::SeqCst) > 0 && started.elapsed() < LONGEST {
            std::thread::sleep(Duration::from_millis(5));
        }
        let last = *LAST_ASYNC_END.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(wait) = last.and_then(|end| HAND_OVER.checked_sub(end.elapsed())) {
            std::thread::sleep(wait);
        }
    });
}
