//! The retry-after and failover engine: pure decisions plus one async loop,
//! generic over the transport (a closure) and the clock, so every rule is
//! tested under a manual clock with scripted outcomes.

pub mod classify;
pub mod clock;
pub mod failover;
pub mod hedge;
pub mod hints;
#[cfg(test)]
mod hints_props;
pub mod limit;
pub mod policy;
#[cfg(test)]
mod room_tests;
pub mod state;
pub mod usage;

pub use classify::{classify_status, ErrorKind, Failure, KindSet};
pub use clock::{Clock, ManualCallClock, ManualClock, TimeHold, TokioClock};
pub use failover::{
    passed_over, run_from, unserved, Answer, AttemptBounds, AttemptRecord, CallError, CallFailure,
    CallSpec, Event, ProviderFailure, ProviderSlot, Resume, Success,
};
pub use hedge::Hedge;
pub use hints::{Headers, Headroom};
pub use limit::{Blocked, FleetAnswer, FleetLimits, Limit, Limiter, Permit, Queued, FLEET_RECHECK};
pub use policy::{Backoff, Preset, RetryPolicy};
pub use state::{
    Cause, Cooling, EngineState, FleetState, Health, LocalState, RetryBudget, SharedState,
};
pub use usage::Usage;
