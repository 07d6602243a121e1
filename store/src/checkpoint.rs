//! SQLite's WAL checkpoints on a connection of their own, beside the writer. A
//! checkpoint run by the writer's commit (SQLite's default) holds up every batch
//! queued behind it: on SDK traffic it was 5% of the server's CPU, all of it on the
//! one thread that writes. Here it runs on the other core while the writer goes on.
//!
//! The writer keeps its own auto-checkpoint as the bound: SQLite starts the WAL
//! over only once every frame is copied back, which a checkpoint running beside a
//! busy writer seldom sees, so under steady load the writer's checkpoint still
//! comes at `CHECKPOINT_PAGES`, and finds little left to copy.

use std::time::Duration;

use sqlx::SqlitePool;
use tokio::sync::mpsc;

/// How long after a commit the checkpoint runs: commits in that time share it.
const DELAY: Duration = Duration::from_millis(250);

/// Tells the checkpointer that a commit added to the WAL. Dropping the last one
/// stops it.
#[derive(Clone)]
pub(super) struct Kick(mpsc::Sender<()>);

impl Kick {
    pub(super) fn committed(&self) {
        // Full means a checkpoint is already due.
        let _ = self.0.try_send(());
    }
}

/// Starts the checkpointer on `pool` (one connection that may write).
pub(super) fn start(pool: SqlitePool) -> Kick {
    let (tx, mut rx) = mpsc::channel(1);
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            tokio::time::sleep(DELAY).await;
            // PASSIVE copies what it can without waiting for readers or the writer.
            if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&pool)
                .await
            {
                // The writer's own checkpoint still bounds the WAL.
                tracing::warn!(error = %e, "a WAL checkpoint failed");
            }
        }
    });
    Kick(tx)
}
