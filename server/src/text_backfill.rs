//! Indexes, in the background, the body words of spans stored before body search
//! existed (an upgraded database), a short transaction at a time, saying how far
//! it got; it stops when none are left. A restart resumes where it was.

use std::sync::Arc;
use std::time::Duration;

use crate::store::Store;

/// A pause between batches, which leaves the writer to ingest.
const BETWEEN_BATCHES: Duration = Duration::from_millis(5);
/// How long a failed batch waits before it is tried again.
const AFTER_FAILURE: Duration = Duration::from_secs(5);
/// Spans between two progress lines.
const SAY_EVERY: u64 = 50_000;

pub fn spawn(store: Arc<dyn Store>) {
    tokio::spawn(async move {
        let mut spans: u64 = 0;
        loop {
            match store.text_backfill_step().await {
                Ok(Some(n)) => {
                    let before = spans;
                    spans = spans.saturating_add(n);
                    if spans / SAY_EVERY > before / SAY_EVERY {
                        tracing::info!(
                            spans,
                            "indexing the words of bodies stored before body search"
                        );
                    }
                    tokio::time::sleep(BETWEEN_BATCHES).await;
                }
                Ok(None) => {
                    if spans > 0 {
                        tracing::info!(spans, "the words of every stored body are indexed");
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %crate::failure::chain(&e),
                        "bodies stored before body search could not be indexed; retrying");
                    tokio::time::sleep(AFTER_FAILURE).await;
                }
            }
        }
    });
}
