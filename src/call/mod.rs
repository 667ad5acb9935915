//! One call run over the engine, with no pyo3: what a client holds for its
//! calls ([`Client`]), one call ([`Call`]) and its [`Plan`] (made once per
//! call), the one place the engine is run ([`Call::run`]) and a stream's
//! driver ([`StreamDriver`]: start, restart, final answer).
//!
//! A face (the Python bindings) converts its values into these, adapts its
//! key callables ([`KeySource`]), sleepers (an engine `Clock`) and event
//! callbacks ([`CallEvents`]) behind small traits, ends a call through an
//! [`Interrupter`], and raises exceptions from the values that come back.
//!
//! Inside, each file uses only those below it: `state_key`, `interrupt`,
//! `keys` and `journal` stand alone; `client` uses `state_key`; `plan` uses
//! `client`; `run` uses `plan`, `keys`, `interrupt` and `journal`; `stream`
//! uses `run` and `journal`.

mod client;
mod interrupt;
mod journal;
mod keys;
mod plan;
mod run;
mod state_key;
mod stream;
#[cfg(test)]
mod tests;

pub use client::{Client, Limits, ProviderLimits, Reservation};
pub use interrupt::{interrupt, Interrupted, Interrupter};
pub use journal::{Journal, Logged};
pub use keys::{FixedKeys, KeyAsk, KeyErrors, KeySource, NoKey, RecentKeys};
pub use plan::{Plan, Pool, Strategy};
pub use run::{new_call_id, Call, CallEvents, Outcome};
pub use state_key::StateKey;
pub use stream::{Interruption, Step, StreamDriver, StreamEnd, StreamResponse};
