//! Removes deleted runs' data in the background, a bounded batch at a time, for as
//! long as the server runs. A run deleted before a crash is picked up again here on
//! the next start (its `deleted_runs` row stays until the last batch).

use std::sync::Arc;
use std::time::Duration;

use crate::store::Store;

/// Rows a batch removes at most: one short transaction, so a write of another run
/// waits for at most one batch.
pub const BATCH_ROWS: usize = 2_000;
/// A pause between batches, which leaves the writer to ingest.
const BETWEEN_BATCHES: Duration = Duration::from_millis(5);
/// How often the queue is looked at when it is empty.
const IDLE: Duration = Duration::from_secs(1);

pub fn spawn(store: Arc<dyn Store>) {
    tokio::spawn(async move {
        let mut removed: u64 = 0;
        loop {
            match store.purge_step(BATCH_ROWS).await {
                Ok(Some(step)) if step.done => {
                    tracing::info!(
                        run_id = step.run_id,
                        rows = removed,
                        "deleted run's data removed"
                    );
                    removed = 0;
                }
                Ok(Some(step)) => {
                    removed = removed.saturating_add(step.rows);
                    tokio::time::sleep(BETWEEN_BATCHES).await;
                }
                Ok(None) => tokio::time::sleep(IDLE).await,
                Err(e) => {
                    tracing::warn!(error = %crate::failure::chain(&e),
                        "a deleted run's data could not be removed; retrying");
                    tokio::time::sleep(IDLE).await;
                }
            }
        }
    });
}
