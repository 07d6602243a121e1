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
/// Database pages (4 KiB unless the file says otherwise) given back at a time.
const RECLAIM_PAGES: u32 = 2_000;

/// Gives back the space a deleted run's rows left, a few MiB at a time; the bytes
/// given back.
pub async fn reclaim(store: &dyn Store) -> crate::store::StoreResult<u64> {
    let mut total: u64 = 0;
    loop {
        let bytes = store.reclaim_space(RECLAIM_PAGES).await?;
        if bytes == 0 {
            return Ok(total);
        }
        total = total.saturating_add(bytes);
        tokio::time::sleep(BETWEEN_BATCHES).await;
    }
}

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
                    match reclaim(store.as_ref()).await {
                        Ok(0) => {}
                        Ok(bytes) => tracing::info!(bytes, "space given back to the file system"),
                        Err(e) => tracing::warn!(error = %crate::failure::chain(&e),
                            "the freed space could not be given back; it will be reused"),
                    }
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
