//! PostgreSQL's event batches, written a group at a time. Batches whose runs hash to
//! the same shard queue at its gate; whoever gets the gate writes what has queued,
//! one merged batch per run, in one transaction. One run's batches took turns at its
//! lock anyway: together they pay for one lock, one probe of stored traces, one
//! statement a table and one commit, where each used to pay for its own. Runs of
//! other shards write at the same time, on other connections.

use sqlx::postgres::PgPool;
use sqlx::Postgres;
use xxhash_rust::xxh3::xxh3_64;

use super::dialect::Dialect;
use super::group::{GroupCommit, Refused};
use super::merge::{self, BatchJob};
use super::postgres::{run, write_plan, PgLoader};
use super::statements;
use super::{EventBatch, StoreError, StoreResult, Written};
use crate::ingest::plan_batch;

/// Gates: groups of different shards write at once. Under the write pool's size,
/// so the pool's other users always find a connection.
const SHARDS: usize = 8;
/// Most events one group writes, so one transaction stays short.
const GROUP_MAX_EVENTS: usize = 5_000;
/// Most events waiting at one gate; past it a batch is refused (503), not queued.
const QUEUE_MAX_EVENTS: usize = 50_000;

/// The gates, a shard each.
pub(super) struct Groups {
    shards: Vec<GroupCommit<BatchJob>>,
}

impl Groups {
    pub(super) fn new() -> Self {
        Groups {
            shards: (0..SHARDS)
                .map(|_| GroupCommit::new(GROUP_MAX_EVENTS, QUEUE_MAX_EVENTS))
                .collect(),
        }
    }

    /// Writes `batch` to `run_id` in whichever group takes it, and answers it.
    pub(super) async fn write(
        &self,
        pool: &PgPool,
        run_id: &str,
        batch: EventBatch,
        now: i64,
    ) -> StoreResult<Written> {
        let shard = usize::try_from(xxh3_64(run_id.as_bytes()) % SHARDS as u64).unwrap_or(0);
        let Some(gate) = self.shards.get(shard) else {
            return Err(StoreError::WriterStopped);
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = BatchJob {
            run_id: run_id.to_string(),
            batch,
            now,
            reply,
        };
        let pool = pool.clone();
        let write = move |jobs| write_group(pool, jobs);
        let weight = |job: &BatchJob| job.batch.events.len().max(1);
        match gate.submit(job, answer, weight, write).await {
            Ok(answer) => answer,
            Err(Refused::Full) => Err(StoreError::Overloaded),
            Err(Refused::Unanswered) => Err(StoreError::WriterStopped),
        }
    }
}

/// Writes a group in one transaction and answers each batch; a failed transaction
/// fails them all, and none was acknowledged.
async fn write_group(pool: PgPool, jobs: Vec<BatchJob>) {
    let (replies, work) = merge::split(jobs);
    merge::answer_group(replies, write_together(&pool, work).await);
}

/// A group's batches, one merged batch per run, in one transaction. Each batch is
/// answered as if written alone: a key answered before, or earlier in the group,
/// replays that answer, and an unknown run fails only its own batch.
async fn write_together(
    pool: &PgPool,
    work: merge::Work,
) -> StoreResult<Vec<StoreResult<Written>>> {
    let mut tx = pool.begin().await?;
    // Every run's lock first, in one order: two servers' groups that share runs then
    // never wait for each other in a circle.
    let mut run_ids: Vec<&str> = work.iter().map(|(run_id, _, _)| run_id.as_str()).collect();
    run_ids.sort_unstable();
    run_ids.dedup();
    for run_id in run_ids {
        Postgres::lock_run(&mut tx, run_id).await?;
    }
    // Under the runs' locks: a racing request with one of the group's keys has committed.
    let mut sorted = merge::sort::<Postgres>(&mut tx, work).await?;
    let mut records = Vec::new();
    let mut latest = i64::MIN;
    for mut run in std::mem::take(&mut sorted.runs) {
        latest = latest.max(run.now);
        let events = std::mem::take(&mut run.events);
        let mut warnings = Vec::new();
        if !events.is_empty() {
            let loader = &mut PgLoader {
                tx: &mut tx,
                run_id: &run.run_id,
            };
            let plan = plan_batch(loader, events, run.now).await?;
            write_plan(&mut tx, &run.run_id, &run.project, &plan, run.now).await?;
            warnings = plan.warnings;
        }
        sorted.answer_run(&mut run, warnings, &mut records)?;
    }
    for chunk in records.chunks(statements::NUMBER_CHUNK) {
        run(&mut tx, |q| {
            statements::idempotency_insert(q, chunk, latest)
        })
        .await?;
    }
    tx.commit().await?;
    Ok(sorted.finish())
}
