//! Whether a read replica answers. The query routes read the replica while it does
//! and the primary while it does not, so a replica that is down or unreachable
//! costs the dashboard a few seconds at most, not every read until it returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::PgPool;

/// How often the replica is asked, and how long it has to answer.
const CHECK_EVERY: Duration = Duration::from_secs(2);
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// The replica's last answer, shared with the task that asks it.
#[derive(Debug)]
pub(super) struct ReplicaHealth {
    up: Arc<AtomicBool>,
}

impl ReplicaHealth {
    /// Starts asking `replica` (taken to answer at first: it just connected). The
    /// task ends once this is dropped.
    pub(super) fn watch(replica: PgPool) -> Self {
        let up = Arc::new(AtomicBool::new(true));
        tokio::spawn(ask(replica, Arc::downgrade(&up)));
        ReplicaHealth { up }
    }

    pub(super) fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }
}

async fn ask(replica: PgPool, up: Weak<AtomicBool>) {
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        let Some(flag) = up.upgrade() else { return };
        let answer =
            tokio::time::timeout(ANSWER_WITHIN, sqlx::query("SELECT 1").execute(&replica)).await;
        let answered = matches!(answer, Ok(Ok(_)));
        if flag.swap(answered, Ordering::Relaxed) != answered {
            match answered {
                true => tracing::info!("the read replica answers again: lists read it"),
                false => tracing::warn!("the read replica does not answer: lists read the primary"),
            }
        }
    }
}
