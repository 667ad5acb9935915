//! failover: a retry-after and failover engine for calls to LLM providers.
//!
//! The [`engine`] decides (no I/O types in it); [`http`] and [`providers`] speak
//! to the wire; [`testing`] is the scripted test server; `python` holds the pyo3
//! bindings, compiled only with the `python` feature that maturin enables.

pub mod call;
pub mod conversation;
pub mod engine;
pub mod fleet;
pub mod http;
#[cfg(test)]
mod layers;
pub mod providers;
pub mod stream;
pub mod testing;

#[cfg(feature = "python")]
mod python;
