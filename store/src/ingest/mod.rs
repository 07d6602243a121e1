//! Applying a batch of span events: the rules of docs/api.md in one place, independent of
//! the database. A backend loads the rows a batch touches through [`Loader`], gets a
//! [`Plan`] of full new states and counter deltas back, and writes it in the same
//! transaction.

mod plan;
#[cfg(test)]
mod plan_tests;
pub mod sizes;
mod state;

pub use plan::{plan_batch, Adoption, Loader, Plan, RunDelta, SpanWrite, StepDelta, TraceWrite};
pub use state::{Activity, SpanState, TraceState};
