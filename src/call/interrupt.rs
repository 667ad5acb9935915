//! Ending a call from inside it: code the call runs (a sleeper, an event
//! hook, a key source) may need to end it with its own error, which wins
//! over whatever the engine does next.

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// A new call's interrupt: the side that ends it, and the side it watches.
pub fn interrupt<E>() -> (Interrupter<E>, Interrupted<E>) {
    let (sender, receiver) = oneshot::channel();
    (
        Interrupter(Arc::new(Mutex::new(Some(sender)))),
        Interrupted {
            receiver,
            closed: false,
        },
    )
}

/// Ends a call (cloned into whatever the call runs).
pub struct Interrupter<E>(Arc<Mutex<Option<oneshot::Sender<E>>>>);

impl<E> Clone for Interrupter<E> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<E> Interrupter<E> {
    /// Ends the call with `error` (the first one wins).
    pub fn raise(&self, error: E) {
        let sender = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(sender) = sender {
            let _ = sender.send(error);
        }
    }
}

/// What a call watches for its end.
pub struct Interrupted<E> {
    receiver: oneshot::Receiver<E>,
    /// Every interrupter is gone: nothing can end the call any more.
    closed: bool,
}

impl<E> Interrupted<E> {
    /// Resolves with the error the call was ended with; never, when
    /// nothing can end it.
    pub async fn ended(&mut self) -> E {
        if !self.closed {
            match (&mut self.receiver).await {
                Ok(error) => return error,
                Err(_) => self.closed = true,
            }
        }
        std::future::pending().await
    }

    /// The error the call was ended with, if it was (taken once).
    pub fn take(&mut self) -> Option<E> {
        self.receiver.try_recv().ok()
    }
}
