//! The memory that write requests' bodies may hold together, on the wire and
//! inflated. Each write takes its share as its body arrives and inflates, and gives
//! it back when it has been answered; past the budget it answers 503 with
//! Retry-After, nothing stored, instead of the server running out of memory.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;

/// What all write bodies may hold at once. One body may hold up to 32 MiB on the
/// wire plus 64 MiB inflated, so this admits five worst cases at a time and any
/// number of ordinary batches.
pub const BODY_BUDGET_MIB: usize = 512;
const MIB: usize = 1 << 20;

/// The budget every write request draws on.
pub fn new_budget() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(BODY_BUDGET_MIB))
}

/// One request's share of the budget, given back when it is dropped.
pub struct Share {
    budget: Arc<Semaphore>,
    /// The bytes taken so far, and the whole MiB of the budget held for them.
    held: Mutex<(usize, Option<OwnedSemaphorePermit>)>,
}

tokio::task_local! {
    /// The share of the write request this task is handling.
    static SHARE: Arc<Share>;
}

impl Share {
    pub fn new(budget: Arc<Semaphore>) -> Arc<Share> {
        Arc::new(Share {
            budget,
            held: Mutex::new((0, None)),
        })
    }

    /// Runs `handler` with this share as the one [`take`] draws on.
    pub async fn scope<F: std::future::Future>(self: Arc<Self>, handler: F) -> F::Output {
        SHARE.scope(self, handler).await
    }

    fn grow(&self, bytes: usize) -> Result<(), ApiError> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let total = held.0.saturating_add(bytes);
        let have = held.1.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
        let more = total.div_ceil(MIB).saturating_sub(have);
        if more > 0 {
            let permit = u32::try_from(more)
                .ok()
                .and_then(|n| self.budget.clone().try_acquire_many_owned(n).ok())
                .ok_or_else(|| ApiError::Unavailable {
                    message: format!(
                        "the server is holding its limit of {BODY_BUDGET_MIB} MiB of request \
                         bodies; nothing of this one was stored, retry shortly"
                    ),
                    retry_after_s: 1,
                })?;
            match held.1.as_mut() {
                Some(all) => all.merge(permit),
                None => held.1 = Some(permit),
            }
        }
        held.0 = total;
        Ok(())
    }
}

/// Takes `bytes` more for the current write request (held in whole MiB), or
/// answers 503 when the budget has no room. Outside a write request (a test
/// calling the body reader itself) there is nothing to take.
pub fn take(bytes: usize) -> Result<(), ApiError> {
    SHARE
        .try_with(|share| share.clone())
        .map_or(Ok(()), |share| share.grow(bytes))
}
