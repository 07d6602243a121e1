//! The embedded backend: one SQLite file in WAL mode, one writer connection (SQLite
//! allows one writer at a time anyway) and a pool of readers.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};
use tokio::sync::oneshot;
use treeline_wire::annotations::{Annotation, Author, NoteWrite, Source};
use treeline_wire::retention::RetentionPolicy;
use treeline_wire::{MetricPoint, RunFinish, RunUpsert};

use super::access::{Access, AccessStore};
use super::annotations;
use super::attribute_codes::{self, BatchCodes, Codes};
use super::body_text;
use super::checkpoint::{self, Kick};
use super::dialect::Sql;
use super::group::{GroupCommit, Refused};
use super::merge::{self, BatchJob};
use super::pipeline;
use super::reader::{Reader, Reads};
use super::rows;
use super::run_deletion;
use super::{
    retention, run_writes, statements, EventBatch, Expired, Idempotency, IdempotencyRecord, Ingest,
    Purged, Store, StoreError, StoreResult, Written,
};
use crate::ingest::{plan_batch, Loader, Plan, SpanState, TraceState};

/// Rows per multi-row statement, under SQLite's 32,766 bound parameters (a span
/// row binds 33).
const SPAN_CHUNK: usize = 900;

/// The writer's page cache. Small on purpose: a large one made each batch slower
/// to commit (measured: 64 MiB gave 75k events/s, 8 MiB 93k).
const WRITER_CACHE_KIB: i64 = 8 * 1024;
/// WAL pages between the writer's checkpoints (SQLite's default is 1,000). A page
/// that many commits touch is copied back once per checkpoint, so fewer checkpoints
/// copy less: on SDK traffic they took 7.7% of the server's CPU at 1,000 and 4.4% at
/// 10,000, for a WAL of up to 40 MB. Most of the copying is now done beside the
/// writer (`checkpoint`); this bounds the WAL and lets SQLite start it over.
const CHECKPOINT_PAGES: u32 = 10_000;
/// Each reader's page cache: long trace-list scans want it (project search p95 was
/// 52 ms with 8 MiB, 18 ms with 32 MiB, at 1M traces), and ingest does not mind.
const READER_CACHE_KIB: i64 = 32 * 1024;
/// Each reader maps this much of the file: a scan over a whole run (a distribution
/// of 100,000 traces) reads its pages in place instead of copying each one in.
const READER_MMAP_BYTES: i64 = 1 << 30;
/// Most events one group-commit transaction takes.
const GROUP_MAX_EVENTS: usize = 20_000;
/// Most events waiting for the writer; past it a batch answers 503 (Retry-After)
/// instead of queueing without bound. Ten full groups.
const QUEUE_MAX_EVENTS: usize = 200_000;

pub struct SqliteStore {
    writer: SqlitePool,
    reader: Reader<Sqlite>,
    access: AccessStore<Sqlite>,
    batches: GroupCommit<BatchJob>,
    checkpoints: Kick,
    codes: Arc<Codes>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `url` (`sqlite:PATH` or a path) and
    /// runs its migrations.
    pub async fn open(url: &str) -> StoreResult<Self> {
        let url = if url.starts_with("sqlite:") {
            url.to_string()
        } else {
            format!("sqlite:{url}")
        };
        let options = SqliteConnectOptions::from_str(&url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a commit is on disk before the batch is acknowledged.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .pragma("temp_store", "memory");
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            // An in-process connection has nothing to check, and each group of
            // batches would pay a round trip to the writer's thread for it.
            .test_before_acquire(false)
            .connect_with(
                options
                    .clone()
                    // Takes effect on a new file only (before its first table): space
                    // freed by a deleted run can then be given back (`reclaim_space`).
                    .auto_vacuum(SqliteAutoVacuum::Incremental)
                    .pragma("cache_size", format!("-{WRITER_CACHE_KIB}"))
                    .pragma("wal_autocheckpoint", CHECKPOINT_PAGES.to_string()),
            )
            .await?;
        super::migrations::sqlite().await?.run(&writer).await?;
        let checkpointer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(
                options
                    .read_only(true)
                    .pragma("cache_size", format!("-{READER_CACHE_KIB}"))
                    .pragma("mmap_size", READER_MMAP_BYTES.to_string()),
            )
            .await?;
        Ok(SqliteStore {
            access: AccessStore::new(reader.clone(), writer.clone()),
            writer,
            reader: Reader::new(reader),
            batches: GroupCommit::new(GROUP_MAX_EVENTS, QUEUE_MAX_EVENTS),
            checkpoints: checkpoint::start(checkpointer),
            codes: Arc::default(),
        })
    }

    /// The writer's `PRAGMA synchronous` (2 is FULL: a commit is on disk, WAL
    /// included, before it returns). For the test that keeps it so.
    pub async fn writer_synchronous(&self) -> StoreResult<i64> {
        let level: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&self.writer)
            .await?;
        Ok(level)
    }
}

struct SqliteLoader<'a, 't> {
    tx: &'a mut Transaction<'t, Sqlite>,
    run_id: &'a str,
}

impl Loader for SqliteLoader<'_, '_> {
    type Error = StoreError;

    async fn load_spans(&mut self, keys: &[(String, String)]) -> StoreResult<Vec<SpanState>> {
        let keys = serde_json::to_string(keys).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        // CROSS JOIN keeps the keys as the outer loop: one primary-key probe each.
        let rows = sqlx::query(&format!(
            "SELECT {} FROM json_each(?2) AS k CROSS JOIN spans s
               ON s.run_id = ?1 AND s.trace_id = k.value ->> 0 AND s.span_id = k.value ->> 1",
            rows::SPAN_STATE_COLUMNS
        ))
        .bind(self.run_id)
        .bind(keys)
        .fetch_all(&mut **self.tx)
        .await?;
        rows.iter().map(rows::span_state).collect()
    }

    async fn load_traces(&mut self, trace_ids: &[String]) -> StoreResult<Vec<TraceState>> {
        let ids =
            serde_json::to_string(trace_ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let rows = sqlx::query(&format!(
            "SELECT {} FROM json_each(?2) AS k CROSS JOIN traces t
               ON t.run_id = ?1 AND t.trace_id = k.value",
            rows::TRACE_STATE_COLUMNS
        ))
        .bind(self.run_id)
        .bind(ids)
        .fetch_all(&mut **self.tx)
        .await?;
        rows.iter().map(rows::trace_state).collect()
    }

    async fn load_attribute_names(
        &mut self,
        trace_id: &str,
        span_id: &str,
    ) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT n.name FROM spans s, json_each(s.attributes) AS a
               JOIN attribute_names n ON n.code = CAST(a.key AS INTEGER)
              WHERE s.run_id = ?1 AND s.trace_id = ?2 AND s.span_id = ?3",
        )
        .bind(self.run_id)
        .bind(trace_id)
        .bind(span_id)
        .fetch_all(&mut **self.tx)
        .await?)
    }
}

/// Upserts a plan's spans in multi-row statements of up to `SPAN_CHUNK` rows, then
/// their bodies' words. Groups of similar size repeat row counts, so these
/// statements stay prepared.
async fn insert_spans(
    tx: &mut Transaction<'_, Sqlite>,
    run_id: &str,
    project: &str,
    plan: &Plan,
    codes: &BatchCodes,
) -> StoreResult<()> {
    let derived = pipeline::Derived::default();
    let statements =
        pipeline::span_statements::<Sqlite>(run_id, project, plan, codes, SPAN_CHUNK, &derived);
    pipeline::execute_each(&mut **tx, statements).await
}

/// Appends the rest of a plan's writes (trace summaries, adoptions, step activity,
/// the run's counts) to `q`, one statement after another, to run in one execution
/// after the span inserts: each is small, and a round trip to SQLite's thread costs
/// more than it does.
fn push_tail<'a>(
    q: &mut Sql<'a, Sqlite>,
    run_id: &'a str,
    project: &'a str,
    plan: &'a Plan,
    now: i64,
) {
    for chunk in plan.traces.chunks(SPAN_CHUNK) {
        statements::trace_upsert(q, run_id, project, chunk);
        q.push(";\n");
    }
    for chunk in statements::trace_names(&plan.traces).chunks(statements::NUMBER_CHUNK) {
        statements::trace_names_insert(q, project, chunk);
        q.push(";\n");
    }
    let values = statements::trace_values(&plan.traces);
    for chunk in values.numbers.chunks(statements::NUMBER_CHUNK) {
        statements::trace_numbers_upsert(q, run_id, project, chunk);
        q.push(";\n");
    }
    for chunk in values.texts.chunks(statements::NUMBER_CHUNK) {
        statements::trace_texts_upsert(q, run_id, chunk);
        q.push(";\n");
    }
    for (table, keys) in [
        ("trace_numbers", &values.not_numbers),
        ("trace_texts", &values.not_texts),
    ] {
        for chunk in keys.chunks(statements::NUMBER_CHUNK) {
            statements::trace_values_delete(q, table, run_id, chunk);
            q.push(";\n");
        }
    }
    // Every orphan hangs under its parent before any step descends, so a step
    // reaches a whole subtree that arrived in pieces (found by the order test).
    for a in &plan.adopt {
        statements::adopt(q, run_id, a);
        q.push(";\n");
    }
    for a in &plan.adopt {
        if let Some(step) = a.step {
            statements::step_descent(q, run_id, &a.trace_id, &a.parent, step);
            q.push(";\n");
        }
    }
    if !plan.steps.is_empty() {
        statements::step_activity(q, run_id, &plan.steps);
        q.push(";\n");
        if plan.steps.values().any(|d| d.traces < 0) {
            statements::drop_empty_steps(q, run_id);
            q.push(";\n");
        }
    }
    statements::run_counts(q, run_id, plan.run, now);
    q.push(";\n");
}

/// Appends keeping idempotency answers (a group's keyed batches, say) to `q`.
fn push_records<'a>(q: &mut Sql<'a, Sqlite>, records: &'a [IdempotencyRecord], now: i64) {
    for chunk in records.chunks(SPAN_CHUNK) {
        statements::idempotency_insert(q, chunk, now);
        q.push(";\n");
    }
}

/// Writes a group of event batches in one transaction and answers each. A batch
/// for an unknown run is answered alone; a failed transaction fails them all, and
/// none was acknowledged.
async fn write_group(
    writer: SqlitePool,
    checkpoints: Kick,
    codes: Arc<Codes>,
    jobs: Vec<BatchJob>,
) {
    let (replies, work) = merge::split(jobs);
    if merge::answer_group(replies, write_together(&writer, &codes, work).await) {
        checkpoints.committed();
    }
}

/// A group's batches, one merged batch per run, in one transaction. Each batch is
/// answered as if written alone: a key answered before, or earlier in the group,
/// replays that answer, and an unknown run fails only its own batch.
async fn write_together(
    writer: &SqlitePool,
    codes: &Codes,
    work: merge::Work,
) -> StoreResult<Vec<StoreResult<Written>>> {
    let codes = codes
        .resolve::<Sqlite>(writer, &attribute_codes::names_of(&work))
        .await?;
    let mut tx = writer.begin().await?;
    let mut sorted = merge::sort::<Sqlite>(&mut tx, work).await?;
    let mut records = Vec::new();
    let mut plans = Vec::with_capacity(sorted.runs.len());
    for mut run in std::mem::take(&mut sorted.runs) {
        let events = std::mem::take(&mut run.events);
        let mut plan = Plan::default();
        if !events.is_empty() {
            let loader = &mut SqliteLoader {
                tx: &mut tx,
                run_id: &run.run_id,
            };
            plan = plan_batch(loader, events, run.now).await?;
            insert_spans(&mut tx, &run.run_id, &run.project, &plan, &codes).await?;
        }
        let warnings = std::mem::take(&mut plan.warnings);
        sorted.answer_run(&mut run, warnings, &mut records)?;
        plans.push((run, plan));
    }
    let mut tail = Sql::<Sqlite>::new("");
    for (run, plan) in plans.iter().filter(|(_, plan)| !plan.spans.is_empty()) {
        push_tail(&mut tail, &run.run_id, &run.project, plan, run.now);
    }
    let latest = plans
        .iter()
        .map(|(run, _)| run.now)
        .max()
        .unwrap_or_default();
    push_records(&mut tail, &records, latest);
    if !tail.is_empty() {
        // Its shape changes with every group: prepared once, not kept.
        tail.query()?.persistent(false).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(sorted.finish())
}

#[async_trait]
impl Ingest for SqliteStore {
    async fn upsert_run(&self, run_id: &str, run: &RunUpsert, now: i64) -> StoreResult<bool> {
        run_writes::upsert_run(&self.writer, run_id, run, now).await
    }

    async fn ensure_run(&self, run_id: &str, run: &RunUpsert, now: i64) -> StoreResult<String> {
        run_writes::ensure_run(&self.writer, run_id, run, now).await
    }

    async fn finish_run(&self, run_id: &str, finish: &RunFinish, now: i64) -> StoreResult<()> {
        run_writes::finish_run(&self.writer, run_id, finish, now).await
    }

    async fn write_metrics(&self, run_id: &str, points: &[MetricPoint]) -> StoreResult<()> {
        run_writes::write_metrics(&self.writer, run_id, points).await
    }

    async fn annotate(
        &self,
        run_id: &str,
        trace_id: &str,
        note: &NoteWrite,
        author: &Author,
        source: Source,
        now: i64,
    ) -> StoreResult<(Annotation, bool)> {
        annotations::annotate(&self.writer, run_id, trace_id, note, author, source, now).await
    }

    async fn unannotate(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: Option<&str>,
        name: &str,
        author: &str,
    ) -> StoreResult<bool> {
        annotations::unannotate(&self.writer, run_id, trace_id, span_id, name, author).await
    }

    async fn delete_run(&self, run_id: &str, now: i64) -> StoreResult<Option<String>> {
        run_deletion::delete_run(&self.writer, run_id, now).await
    }

    async fn purge_step(&self, limit: usize) -> StoreResult<Option<Purged>> {
        run_deletion::purge_step(&self.writer, limit).await
    }

    async fn set_retention(
        &self,
        project: &str,
        policy: Option<&RetentionPolicy>,
        now: i64,
    ) -> StoreResult<()> {
        retention::set_policy(&self.writer, project, policy, now).await
    }

    async fn retention_step(&self, limit: usize, now: i64) -> StoreResult<Option<Expired>> {
        retention::step(&self.writer, limit, now).await
    }

    async fn text_backfill_step(&self) -> StoreResult<Option<u64>> {
        body_text::backfill_step(&self.writer).await
    }

    async fn reclaim_space(&self, pages: u32) -> StoreResult<u64> {
        let mut conn = self.writer.acquire().await?;
        let mode: i64 = sqlx::query_scalar("PRAGMA auto_vacuum")
            .fetch_one(&mut *conn)
            .await?;
        // 2 is INCREMENTAL; a file made before it was asked for keeps NONE.
        if mode != 2 {
            return Ok(0);
        }
        let free = || sqlx::query_scalar::<_, i64>("PRAGMA freelist_count");
        let before = free().fetch_one(&mut *conn).await?;
        if before == 0 {
            return Ok(0);
        }
        sqlx::query(&format!("PRAGMA incremental_vacuum({pages})"))
            .execute(&mut *conn)
            .await?;
        let after = free().fetch_one(&mut *conn).await?;
        let page_bytes: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(&mut *conn)
            .await?;
        Ok(u64::try_from(before.saturating_sub(after).saturating_mul(page_bytes)).unwrap_or(0))
    }

    async fn write_batch(&self, run_id: &str, batch: EventBatch, now: i64) -> StoreResult<Written> {
        let (reply, answer) = oneshot::channel();
        let job = BatchJob {
            run_id: run_id.to_string(),
            batch,
            now,
            reply,
        };
        let (writer, checkpoints) = (self.writer.clone(), self.checkpoints.clone());
        let codes = self.codes.clone();
        let write = move |jobs| write_group(writer, checkpoints, codes, jobs);
        let weight = |job: &BatchJob| job.batch.events.len().max(1);
        match self.batches.submit(job, answer, weight, write).await {
            Ok(answer) => answer,
            Err(Refused::Full) => Err(StoreError::Overloaded),
            Err(Refused::Unanswered) => Err(StoreError::WriterStopped),
        }
    }
}

#[async_trait]
impl Idempotency for SqliteStore {
    async fn idempotency_get(&self, key: &str) -> StoreResult<Option<IdempotencyRecord>> {
        // On the writer: a reader's page cache is dropped whole each time it sees a
        // commit, which costs more than the lookup itself.
        let mut conn = self.writer.acquire().await?;
        run_writes::idempotency_record::<Sqlite>(&mut conn, key).await
    }

    async fn idempotency_put(&self, record: &IdempotencyRecord, now: i64) -> StoreResult<()> {
        run_writes::put_idempotency(&self.writer, record, now).await
    }

    async fn idempotency_prune(&self, before_us: i64) -> StoreResult<u64> {
        run_writes::prune_idempotency(&self.writer, before_us).await
    }
}

impl Store for SqliteStore {
    fn reads(&self) -> &dyn Reads {
        &self.reader
    }

    fn access(&self) -> &dyn Access {
        &self.access
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Receipt;
    use treeline_wire::{parse_event, BatchResponse, RunUpsert};

    fn keyed(key: &str, span: &str) -> EventBatch {
        let event = serde_json::json!({"op": "open", "trace_id": "t1", "span_id": span,
            "name": "root", "kind": "rollout", "ts": 1});
        let (event, _) = parse_event(&event).expect("valid event");
        EventBatch {
            events: vec![(0, event)],
            parsed: BatchResponse {
                accepted: 1,
                ..Default::default()
            },
            receipt: Some(Receipt {
                key: key.into(),
                fingerprint: format!("of {span}"),
            }),
        }
    }

    /// A store in `dir` (file `t.db`) holding run `r1`.
    async fn store_with_run(dir: &std::path::Path) -> SqliteStore {
        let store = SqliteStore::open(&dir.join("t.db").display().to_string())
            .await
            .expect("open");
        let run = RunUpsert {
            project: "p".into(),
            ..Default::default()
        };
        store.upsert_run("r1", &run, 1).await.expect("run");
        store
    }

    #[tokio::test]
    async fn a_key_answered_earlier_in_the_same_group_is_replayed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store_with_run(dir.path()).await;
        let work = vec![
            ("r1".to_string(), keyed("k1", "a"), 2),
            ("nope".to_string(), keyed("k2", "b"), 2),
            ("r1".to_string(), keyed("k1", "c"), 2),
        ];
        let answers = write_together(&store.writer, &store.codes, work)
            .await
            .expect("group");
        assert!(matches!(&answers[0], Ok(Written::Stored(a)) if a.accepted == 1));
        assert!(matches!(&answers[1], Err(StoreError::RunNotFound(_))));
        // The third reuses k1 with another body: it gets k1's record (the HTTP layer
        // answers 422 on the fingerprint), and its span is not written.
        assert!(matches!(&answers[2], Ok(Written::Replay(r)) if r.fingerprint == "of a"));
        assert_eq!(
            store
                .reads()
                .get_trace("r1", "t1")
                .await
                .unwrap()
                .unwrap()
                .span_count,
            1
        );
    }

    /// What a commit adds reaches the database file soon after, by the checkpointer,
    /// long before the writer's own checkpoint would (10,000 pages): a copy of the
    /// file alone is then close to current, and the WAL stays short.
    #[tokio::test]
    async fn commits_reach_the_database_file_without_waiting_for_the_writer() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store_with_run(dir.path()).await;
        let path = dir.path().join("t.db");
        let before = std::fs::metadata(&path).expect("db file").len();
        let events = (0..2_000)
            .map(|i| {
                let event = serde_json::json!({"op": "open", "trace_id": format!("t{}", i / 50),
                    "span_id": format!("s{i}"), "name": "step", "kind": "env_step", "ts": i});
                (i, parse_event(&event).expect("valid event").0)
            })
            .collect();
        let batch = EventBatch {
            events,
            parsed: BatchResponse::default(),
            receipt: None,
        };
        store.write_batch("r1", batch, 2).await.expect("written");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let size = std::fs::metadata(&path).expect("db file").len();
            if size > before + 100_000 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the file stayed at {size} bytes"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
