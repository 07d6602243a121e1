//! Load shedding and time limits: a bounded number of writes in flight (past it,
//! 503 with Retry-After and nothing read or stored), a time limit on reads, and a
//! time limit on request bodies (`body::BODY_TIMEOUT`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::error::ApiError;
use super::AppState;

/// Write requests (native and OTLP) handled at once. Their bodies' memory is
/// bounded together by `budget::BODY_BUDGET_MIB`.
pub const MAX_WRITES_IN_FLIGHT: usize = 64;
/// The longest a read may take before it answers 503 (and is dropped).
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The write slots every write request takes one of.
pub fn write_slots() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(MAX_WRITES_IN_FLIGHT))
}

/// Takes a write slot for the request, or answers 503 when none is free.
pub async fn shed_writes(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match state.write_slots.clone().try_acquire_owned() {
        Ok(_slot) => {
            let share = super::budget::Share::new(state.body_budget.clone());
            share.scope(next.run(request)).await
        }
        Err(_) => ApiError::Unavailable {
            message: format!(
                "{MAX_WRITES_IN_FLIGHT} writes are already in flight; nothing of this one was \
                 stored, retry shortly"
            ),
            retry_after_s: 1,
        }
        .into_response(),
    }
}
