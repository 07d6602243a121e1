//! PostgreSQL's event batches, written a group at a time. Batches whose runs hash to
//! the same shard queue at its gate; whoever gets the gate writes what has queued,
//! one merged batch per run, in one transaction. One run's batches took turns at its
//! lock anyway: together they pay for one lock, one probe of stored traces, one
//! statement a table and one commit, where each used to pay for its own. Runs of
//! other shards write at the same time, on other connections.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgPool;
use sqlx::Postgres;
use tokio::sync::Notify;
use xxhash_rust::xxh3::xxh3_64;

use super::attribute_codes::{self, Codes};
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

/// Groups writing at once while a dashboard's query waits on the same database.
const WRITERS_BESIDE_READS: usize = 2;
/// Longest a group holds back for reads before it writes anyway.
const MOST_YIELD: Duration = Duration::from_millis(50);

/// The gates, a shard each.
pub(super) struct Groups {
    shards: Vec<GroupCommit<BatchJob>>,
    yields: Arc<Yield>,
    codes: Arc<Codes>,
}

impl Groups {
    /// `queries`: the pool of the query routes' reads, when they read this
    /// database (not a replica).
    pub(super) fn new(queries: Option<PgPool>) -> Self {
        Groups {
            shards: (0..SHARDS)
                .map(|_| GroupCommit::new(GROUP_MAX_EVENTS, QUEUE_MAX_EVENTS))
                .collect(),
            yields: Arc::new(Yield::new(Box::new(move || {
                queries
                    .as_ref()
                    .is_some_and(|pool| usize::try_from(pool.size()).unwrap_or(0) > pool.num_idle())
            }))),
            codes: Arc::default(),
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
        let (pool, yields, codes) = (pool.clone(), self.yields.clone(), self.codes.clone());
        let write = move |jobs| async move {
            let _writing = yields.enter().await;
            write_group(pool, &codes, jobs).await;
        };
        let weight = |job: &BatchJob| job.batch.events.len().max(1);
        match gate.submit(job, answer, weight, write).await {
            Ok(answer) => answer,
            Err(Refused::Full) => Err(StoreError::Overloaded),
            Err(Refused::Unanswered) => Err(StoreError::WriterStopped),
        }
    }
}

/// Reads first. On two cores, eight groups writing at once left a trace list's
/// statements waiting their turn for a core (a list 4.5-6 ms alone took 35-41 ms at
/// the median under `bench soak`); with fewer groups at once, reads took half the
/// time and writes a fifth less. So while a query route's read is in flight on this
/// database, a group waits, up to [`MOST_YIELD`], until fewer than
/// [`WRITERS_BESIDE_READS`] groups write; with no read in flight, none waits.
struct Yield {
    /// Whether a query route's read holds a connection now.
    reads_waiting: Box<dyn Fn() -> bool + Send + Sync>,
    writing: AtomicUsize,
    done: Notify,
}

/// A group writing: counted until dropped.
struct Writing<'a>(&'a Yield);

impl Yield {
    fn new(reads_waiting: Box<dyn Fn() -> bool + Send + Sync>) -> Self {
        Yield {
            reads_waiting,
            writing: AtomicUsize::new(0),
            done: Notify::new(),
        }
    }

    async fn enter(&self) -> Writing<'_> {
        let deadline = tokio::time::Instant::now() + MOST_YIELD;
        loop {
            // Made before the test, so a group that ends after it still wakes us.
            let ended = self.done.notified();
            if !(self.reads_waiting)()
                || self.writing.load(Ordering::Relaxed) < WRITERS_BESIDE_READS
            {
                break;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                break;
            }
        }
        self.writing.fetch_add(1, Ordering::Relaxed);
        Writing(self)
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.writing.fetch_sub(1, Ordering::Relaxed);
        self.0.done.notify_waiters();
    }
}

/// Writes a group in one transaction and answers each batch; a failed transaction
/// fails them all, and none was acknowledged.
async fn write_group(pool: PgPool, codes: &Codes, jobs: Vec<BatchJob>) {
    let (replies, work) = merge::split(jobs);
    merge::answer_group(replies, write_together(&pool, codes, work).await);
}

/// A group's batches, one merged batch per run, in one transaction. Each batch is
/// answered as if written alone: a key answered before, or earlier in the group,
/// replays that answer, and an unknown run fails only its own batch.
async fn write_together(
    pool: &PgPool,
    codes: &Codes,
    work: merge::Work,
) -> StoreResult<Vec<StoreResult<Written>>> {
    let codes = codes
        .resolve::<Postgres>(pool, &attribute_codes::names_of(&work))
        .await?;
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
            write_plan(&mut tx, &run.run_id, &run.project, &plan, &codes, run.now).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    fn yields(reads: bool) -> Yield {
        Yield::new(Box::new(move || reads))
    }

    #[test]
    fn with_no_read_waiting_every_group_writes_at_once() {
        let y = yields(false);
        let held: Vec<Option<Writing<'_>>> = (0..5).map(|_| y.enter().now_or_never()).collect();
        assert!(held.iter().all(Option::is_some), "a group waited");
        assert_eq!(y.writing.load(Ordering::Relaxed), 5);
    }

    #[tokio::test]
    async fn while_a_read_waits_a_third_group_waits_for_one_to_end_or_its_bound() {
        let y = yields(true);
        let first = y.enter().await;
        let _second = y.enter().await;
        // A third waits until a group ends…
        let third = y.enter();
        tokio::pin!(third);
        assert!(
            (&mut third).now_or_never().is_none(),
            "a third group wrote beside a read"
        );
        drop(first);
        let entered = (&mut third).now_or_never();
        assert!(entered.is_some(), "a group ended and the third still waits");
        // …or, when none ends, writes anyway once its bound has passed.
        let started = tokio::time::Instant::now();
        let _fourth = y.enter().await;
        assert!(started.elapsed() >= MOST_YIELD, "{:?}", started.elapsed());
    }
}
