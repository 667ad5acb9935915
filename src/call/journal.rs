//! A call's attempts as they are sent and end, kept apart from the engine's
//! run: when the call is cut short (a task cancelled, Ctrl-C, a stream
//! closed before its first content, a key callable's `ConfigurationError`
//! partway), the run is dropped with its records, and what it had sent, and
//! may be billed for, is read from here instead (the client's stats count
//! it). A call the engine finishes reports its own records; this is not read.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use crate::engine::{AttemptRecord, Failure};
use crate::providers::Reply;

/// One call's attempts as they went (cheap to clone: shared).
#[derive(Clone, Default)]
pub struct Journal(Arc<Mutex<Entries>>);

#[derive(Default)]
struct Entries {
    /// Since the run began; `None` once taken (what comes later is not
    /// kept: the call is over for whoever took them).
    logged: Option<Vec<Logged>>,
}

/// One attempt, with the provider's name and model as the call asked it
/// (what a face shows once the call and its plan are gone).
pub struct Logged {
    /// Its provider is its position in the call's chain.
    pub record: AttemptRecord,
    pub name: String,
    pub model: String,
    /// In flight: the `Instant` it was sent.
    sent: Option<Instant>,
}

impl Journal {
    /// A run begins: the attempts of runs before it are in the call's
    /// hands already (a stream's restart).
    pub(super) fn clear(&self) {
        self.lock().logged = Some(Vec::new());
    }

    /// An attempt at chain member `position` is sent: its place in the
    /// journal.
    pub(super) fn sent(&self, position: usize, name: &str, model: &str) -> usize {
        let mut entries = self.lock();
        let Some(logged) = entries.logged.as_mut() else {
            return usize::MAX;
        };
        logged.push(Logged {
            record: AttemptRecord::cut(position, Duration::ZERO, SystemTime::now()),
            name: name.to_string(),
            model: model.to_string(),
            sent: Some(Instant::now()),
        });
        logged.len() - 1
    }

    /// The attempt at `entry` ended in `outcome`.
    pub(super) fn ended(&self, entry: usize, outcome: &Result<Reply, Failure>) {
        let mut entries = self.lock();
        let Some(logged) = entries.logged.as_mut().and_then(|l| l.get_mut(entry)) else {
            return;
        };
        let Some(sent) = logged.sent.take() else {
            return;
        };
        let (position, started) = (logged.record.provider, logged.record.started);
        let duration = sent.elapsed();
        logged.record = match outcome {
            Ok(reply) => {
                AttemptRecord::answered(position, reply, Duration::ZERO, duration, started)
            }
            Err(failure) => {
                AttemptRecord::failed(position, failure, Duration::ZERO, duration, started)
            }
        };
    }

    /// The run finished, and its own records tell what it did: nothing is
    /// kept.
    pub(super) fn discard(&self) {
        self.lock().logged = None;
    }

    /// What the run sent, in order, those still in flight as cut (no
    /// status, billed unknown); taken once: later calls get nothing.
    pub fn take(&self) -> Vec<Logged> {
        let mut logged = self.lock().logged.take().unwrap_or_default();
        for entry in &mut logged {
            if let Some(sent) = entry.sent.take() {
                entry.record.duration = sent.elapsed();
            }
        }
        logged
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
