//! Removes data in the background, a bounded batch at a time, for as long as the
//! server runs: deleted runs' data first, then each project's traces past its
//! retention window. A run deleted before a crash is picked up again here on the
//! next start (its `deleted_runs` row stays until the last batch); retention needs
//! no such care, as each of its steps is whole.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::http::now_us;
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

/// How often retention looks for traces past a window once it has found none.
const RETENTION_IDLE: Duration = Duration::from_secs(30);

/// What retention removed since it last said so.
#[derive(Default)]
struct Tally {
    traces: u64,
    spans: u64,
    runs: u64,
}

/// [`reclaim`] for a command: says how much came back.
pub async fn reclaim_saying(store: &dyn Store) -> crate::failure::Outcome {
    use crate::failure::Context;
    let bytes = reclaim(store)
        .await
        .context("cannot give the freed space back (it will be reused)")?;
    if bytes > 0 {
        println!("Gave {} MiB back to the file system.", bytes >> 20);
    }
    Ok(())
}

pub fn spawn(store: Arc<dyn Store>, retention_changed: Arc<tokio::sync::Notify>) {
    tokio::spawn(async move {
        let mut removed: u64 = 0;
        let mut tally = Tally::default();
        let mut next_retention = Instant::now();
        loop {
            // Deleted runs first: their ids wait on it.
            match store.purge_step(BATCH_ROWS).await {
                Ok(Some(step)) if step.done => {
                    tracing::info!(
                        run_id = step.run_id,
                        rows = removed,
                        "deleted run's data removed"
                    );
                    removed = 0;
                    give_back(store.as_ref()).await;
                    continue;
                }
                Ok(Some(step)) => {
                    removed = removed.saturating_add(step.rows);
                    tokio::time::sleep(BETWEEN_BATCHES).await;
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %crate::failure::chain(&e),
                        "a deleted run's data could not be removed; retrying");
                }
            }
            if Instant::now() >= next_retention {
                match store.retention_step(BATCH_ROWS, now_us()).await {
                    Ok(Some(step)) => {
                        tally.traces = tally.traces.saturating_add(step.traces);
                        tally.spans = tally.spans.saturating_add(step.spans);
                        tally.runs = tally.runs.saturating_add(u64::from(step.run_deleted));
                        tokio::time::sleep(BETWEEN_BATCHES).await;
                        continue;
                    }
                    Ok(None) => {
                        if tally.traces > 0 || tally.spans > 0 || tally.runs > 0 {
                            tracing::info!(
                                traces = tally.traces,
                                spans = tally.spans,
                                runs = tally.runs,
                                "retention removed what was past its window"
                            );
                            tally = Tally::default();
                            give_back(store.as_ref()).await;
                        }
                    }
                    Err(e) => tracing::warn!(error = %crate::failure::chain(&e),
                        "retention could not remove traces past their window; retrying"),
                }
                next_retention = Instant::now() + RETENTION_IDLE;
            }
            // A policy set over the API is applied at once.
            if tokio::time::timeout(IDLE, retention_changed.notified())
                .await
                .is_ok()
            {
                next_retention = Instant::now();
            }
        }
    });
}

/// Gives the freed space back, saying so.
async fn give_back(store: &dyn Store) {
    match reclaim(store).await {
        Ok(0) => {}
        Ok(bytes) => tracing::info!(bytes, "space given back to the file system"),
        Err(e) => tracing::warn!(error = %crate::failure::chain(&e),
            "the freed space could not be given back; it will be reused"),
    }
}
