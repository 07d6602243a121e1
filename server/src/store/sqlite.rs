//! The embedded backend: one SQLite file in WAL mode, one writer connection (SQLite
//! allows one writer at a time anyway) and a pool of readers.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, Transaction};
use tokio::sync::oneshot;
use treeline_app::wire::{
    MetricPoint, ProjectList, ProjectSummary, RunDetail, RunFinish, RunList, RunSummary, RunUpsert,
    SpanDetail, SpanKind, SpanNode, SpanPage, StepActivity, StepTotals, StepsResponse, TraceList,
    TraceSummary, STEP_LIMIT,
};

use super::cursor::page_cursor;
use super::group::GroupCommit;
use super::merge::RunBatch;
use super::rows::{self, SPAN_NODE_COLUMNS, TRACE_COLUMNS};
use super::{
    Cursor, EventBatch, IdempotencyRecord, Store, StoreError, StoreResult, TraceQuery, TraceSort,
    Written,
};
use crate::ingest::{plan_batch, Loader, Plan, SpanState, TraceState};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// Rows per multi-row statement, under SQLite's 32,766 bound parameters.
const SPAN_CHUNK: usize = 1_000;

/// The writer's page cache. Small on purpose: a large one made each batch slower
/// to commit (measured: 64 MiB gave 75k events/s, 8 MiB 93k).
const WRITER_CACHE_KIB: i64 = 8 * 1024;
/// Each reader's page cache: long trace-list scans want it (project search p95 was
/// 52 ms with 8 MiB, 18 ms with 32 MiB, at 1M traces), and ingest does not mind.
const READER_CACHE_KIB: i64 = 32 * 1024;
/// Most events one group-commit transaction takes.
const GROUP_MAX_EVENTS: usize = 20_000;

pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    batches: GroupCommit<BatchJob>,
}

/// An event batch waiting for its group's transaction.
struct BatchJob {
    run_id: String,
    batch: EventBatch,
    now: i64,
    reply: oneshot::Sender<StoreResult<Written>>,
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
                    .pragma("cache_size", format!("-{WRITER_CACHE_KIB}")),
            )
            .await?;
        MIGRATIONS.run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(
                options
                    .read_only(true)
                    .pragma("cache_size", format!("-{READER_CACHE_KIB}")),
            )
            .await?;
        Ok(SqliteStore {
            writer,
            reader,
            batches: GroupCommit::new(GROUP_MAX_EVENTS),
        })
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
}

/// Upserts a plan's spans in multi-row statements of up to `SPAN_CHUNK` rows. Groups
/// of similar size repeat row counts, so these statements stay prepared.
async fn insert_spans(
    tx: &mut Transaction<'_, Sqlite>,
    run_id: &str,
    plan: &Plan,
) -> StoreResult<()> {
    for chunk in plan.spans.chunks(SPAN_CHUNK) {
        let mut q = QueryBuilder::<Sqlite>::new(
            "INSERT INTO spans (run_id, trace_id, span_id, parent_span_id, tree_parent, name, kind, \
             status, start_us, end_us, step, rank, thread_id, has_open, has_close, child_count, \
             error_count, token_count, attr_count, attributes, metrics, links, input_truncated, \
             output_truncated, input, output, error) ",
        );
        q.push_values(chunk, |mut b, w| {
            let s = &w.state;
            b.push_bind(run_id)
                .push_bind(&s.trace_id)
                .push_bind(&s.span_id)
                .push_bind(&s.parent_span_id)
                .push_bind(&s.tree_parent)
                .push_bind(&s.name)
                .push_bind(s.kind.map(SpanKind::as_str))
                .push_bind(s.status.as_str())
                .push_bind(s.start_us)
                .push_bind(s.end_us)
                .push_bind(s.step)
                .push_bind(s.rank)
                .push_bind(&s.thread_id)
                .push_bind(s.has_open)
                .push_bind(s.has_close)
                .push_bind(s.child_count)
                .push_bind(s.error_count)
                .push_bind(s.token_count)
                .push_bind(s.attr_count)
                .push_bind(rows::object_json(&w.attributes))
                .push_bind(rows::object_json(&w.metrics))
                .push_bind(rows::links_json(&w.links))
                .push_bind(w.input.as_ref().is_some_and(|b| b.truncated))
                .push_bind(w.output.as_ref().is_some_and(|b| b.truncated))
                .push_bind(w.input.as_ref().map(|b| b.json.as_str()))
                .push_bind(w.output.as_ref().map(|b| b.json.as_str()))
                .push_bind(w.error.as_ref().map(|b| b.json.as_str()));
        });
        q.push(
            " ON CONFLICT (run_id, trace_id, span_id) DO UPDATE SET \
             parent_span_id = excluded.parent_span_id, tree_parent = excluded.tree_parent, \
             name = excluded.name, kind = excluded.kind, status = excluded.status, \
             start_us = excluded.start_us, end_us = excluded.end_us, step = excluded.step, \
             rank = excluded.rank, thread_id = excluded.thread_id, has_open = excluded.has_open, \
             has_close = excluded.has_close, child_count = excluded.child_count, \
             error_count = excluded.error_count, token_count = excluded.token_count, \
             attr_count = excluded.attr_count, \
             attributes = json_patch(spans.attributes, excluded.attributes), \
             metrics = json_patch(spans.metrics, excluded.metrics), \
             links = CASE WHEN excluded.links = '[]' THEN spans.links ELSE excluded.links END, \
             input_truncated = CASE WHEN excluded.input IS NULL THEN spans.input_truncated ELSE excluded.input_truncated END, \
             output_truncated = CASE WHEN excluded.output IS NULL THEN spans.output_truncated ELSE excluded.output_truncated END, \
             input = COALESCE(excluded.input, spans.input), \
             output = COALESCE(excluded.output, spans.output), \
             error = COALESCE(excluded.error, spans.error)",
        );
        q.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// Appends the rest of a plan's writes (trace summaries, adoptions, step activity,
/// the run's counts) to `q`, one statement after another, to run in one execution
/// after the span inserts: each is small, and a round trip to SQLite's thread costs
/// more than it does.
fn push_tail<'a>(
    q: &mut QueryBuilder<'a, Sqlite>,
    run_id: &'a str,
    project: &'a str,
    plan: &'a Plan,
    now: i64,
) {
    for chunk in plan.traces.chunks(SPAN_CHUNK) {
        q.push(
            "INSERT INTO traces (run_id, trace_id, project, root_span_id, name, kind, status, kinds, \
             span_count, error_count, child_tokens, root_tokens, iteration_count, step, rank, \
             thread_id, rollout_id, start_us, end_us, updated_us, attributes) ",
        );
        q.push_values(chunk, |mut b, w| {
            let t = &w.state;
            b.push_bind(run_id)
                .push_bind(&t.trace_id)
                .push_bind(project)
                .push_bind(&t.root_span_id)
                .push_bind(&t.name)
                .push_bind(t.kind.map(SpanKind::as_str))
                .push_bind(t.status.as_str())
                .push_bind(t.kinds)
                .push_bind(t.span_count)
                .push_bind(t.error_count)
                .push_bind(t.child_tokens)
                .push_bind(t.root_tokens)
                .push_bind(t.iteration_count)
                .push_bind(t.step)
                .push_bind(t.rank)
                .push_bind(&t.thread_id)
                .push_bind(&t.rollout_id)
                .push_bind(t.start_us)
                .push_bind(t.end_us)
                .push_bind(t.updated_us)
                .push_bind(rows::object_json(&w.attributes));
        });
        q.push(
            " ON CONFLICT (run_id, trace_id) DO UPDATE SET root_span_id = excluded.root_span_id, \
             name = excluded.name, kind = excluded.kind, status = excluded.status, \
             kinds = excluded.kinds, span_count = excluded.span_count, \
             error_count = excluded.error_count, child_tokens = excluded.child_tokens, \
             root_tokens = excluded.root_tokens, iteration_count = excluded.iteration_count, \
             step = excluded.step, rank = excluded.rank, thread_id = excluded.thread_id, \
             rollout_id = excluded.rollout_id, start_us = excluded.start_us, \
             end_us = excluded.end_us, updated_us = excluded.updated_us, \
             attributes = json_patch(traces.attributes, excluded.attributes);\n",
        );
    }

    for a in &plan.adopt {
        q.push("UPDATE spans SET tree_parent = parent_span_id WHERE run_id = ")
            .push_bind(run_id)
            .push(" AND trace_id = ")
            .push_bind(&a.trace_id)
            .push(" AND tree_parent = '' AND parent_span_id = ")
            .push_bind(&a.parent)
            .push(";\n");
        if let Some(step) = a.step {
            // Down through the descendants that have no step of their own.
            q.push("WITH RECURSIVE sub(span_id) AS (SELECT span_id FROM spans WHERE run_id = ")
                .push_bind(run_id)
                .push(" AND trace_id = ")
                .push_bind(&a.trace_id)
                .push(" AND tree_parent = ")
                .push_bind(&a.parent)
                .push(
                    " AND step IS NULL UNION ALL SELECT s.span_id FROM spans s \
                     JOIN sub ON s.tree_parent = sub.span_id WHERE s.run_id = ",
                )
                .push_bind(run_id)
                .push(" AND s.trace_id = ")
                .push_bind(&a.trace_id)
                .push(" AND s.step IS NULL) UPDATE spans SET step = ")
                .push_bind(step)
                .push(" WHERE run_id = ")
                .push_bind(run_id)
                .push(" AND trace_id = ")
                .push_bind(&a.trace_id)
                .push(" AND span_id IN (SELECT span_id FROM sub);\n");
        }
    }

    if !plan.steps.is_empty() {
        q.push("INSERT INTO step_activity (run_id, step, traces, errored, running) ");
        q.push_values(&plan.steps, |mut b, (step, d)| {
            b.push_bind(run_id)
                .push_bind(*step)
                .push_bind(d.traces)
                .push_bind(d.errored)
                .push_bind(d.running);
        });
        q.push(
            " ON CONFLICT (run_id, step) DO UPDATE SET traces = traces + excluded.traces, \
             errored = errored + excluded.errored, running = running + excluded.running;\n",
        );
        if plan.steps.values().any(|d| d.traces < 0) {
            q.push("DELETE FROM step_activity WHERE run_id = ")
                .push_bind(run_id)
                .push(" AND traces <= 0;\n");
        }
    }

    let r = plan.run;
    q.push("UPDATE runs SET trace_count = trace_count + ")
        .push_bind(r.traces)
        .push(", errored_count = errored_count + ")
        .push_bind(r.errored)
        .push(", running_count = running_count + ")
        .push_bind(r.running)
        .push(", unstepped_count = unstepped_count + ")
        .push_bind(r.unstepped)
        .push(", updated_us = MAX(updated_us, ")
        .push_bind(now)
        .push(") WHERE run_id = ")
        .push_bind(run_id)
        .push(";\n");
}

/// Appends keeping idempotency answers (a group's keyed batches, say) to `q`.
fn push_records<'a>(q: &mut QueryBuilder<'a, Sqlite>, records: &'a [IdempotencyRecord], now: i64) {
    for chunk in records.chunks(SPAN_CHUNK) {
        q.push("INSERT INTO idempotency (key, fingerprint, status, response, created_us) ");
        q.push_values(chunk, |mut b, r| {
            b.push_bind(&r.key)
                .push_bind(&r.fingerprint)
                .push_bind(i64::from(r.status))
                .push_bind(&r.response)
                .push_bind(now);
        });
        q.push(" ON CONFLICT (key) DO NOTHING;\n");
    }
}

async fn run_project(tx: &mut Transaction<'_, Sqlite>, run_id: &str) -> StoreResult<String> {
    sqlx::query_scalar("SELECT project FROM runs WHERE run_id = ?")
        .bind(run_id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| StoreError::RunNotFound(run_id.to_string()))
}

/// Writes a group of event batches in one transaction and answers each. A batch
/// for an unknown run is answered alone; a failed transaction fails them all, and
/// none was acknowledged.
async fn write_group(writer: SqlitePool, jobs: Vec<BatchJob>) {
    let mut replies = Vec::with_capacity(jobs.len());
    let mut work = Vec::with_capacity(jobs.len());
    for job in jobs {
        replies.push(job.reply);
        work.push((job.run_id, job.batch, job.now));
    }
    match write_together(&writer, work).await {
        Ok(answers) => {
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(answer);
            }
        }
        Err(e) => {
            let message = e.to_string();
            for reply in replies {
                let _ = reply.send(Err(StoreError::GroupFailed(message.clone())));
            }
        }
    }
}

/// A group's batches, one merged batch per run, in one transaction. Each batch is
/// answered as if written alone: a key answered before, or earlier in the group,
/// replays that answer, and an unknown run fails only its own batch.
async fn write_together(
    writer: &SqlitePool,
    work: Vec<(String, EventBatch, i64)>,
) -> StoreResult<Vec<StoreResult<Written>>> {
    let mut tx = writer.begin().await?;
    let keys: Vec<&str> = work
        .iter()
        .filter_map(|(_, batch, _)| batch.receipt.as_ref().map(|r| r.key.as_str()))
        .collect();
    let mut answered = get_records(&mut tx, &keys).await?;
    let mut answers: Vec<Option<StoreResult<Written>>> = work.iter().map(|_| None).collect();
    let mut runs: Vec<RunBatch> = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    let mut replays_of_taken = Vec::new();
    for (job, (run_id, batch, now)) in work.into_iter().enumerate() {
        let key = batch.receipt.as_ref().map(|r| r.key.clone());
        if let Some(key) = key.as_ref() {
            if let Some(record) = answered.get(key) {
                answers[job] = Some(Ok(Written::Replay(record.clone())));
                continue;
            }
            if taken.contains(key) {
                replays_of_taken.push((job, key.clone()));
                continue;
            }
        }
        let run = match runs.iter().position(|r| r.run_id == run_id) {
            Some(i) => i,
            None => match run_project(&mut tx, &run_id).await {
                Ok(project) => {
                    runs.push(RunBatch::new(run_id, project));
                    runs.len() - 1
                }
                Err(e @ StoreError::RunNotFound(_)) => {
                    answers[job] = Some(Err(e));
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        taken.extend(key);
        runs[run].push(job, batch, now);
    }

    let mut records = Vec::new();
    let mut plans = Vec::with_capacity(runs.len());
    for mut run in runs {
        let events = std::mem::take(&mut run.events);
        let mut plan = Plan::default();
        if !events.is_empty() {
            let loader = &mut SqliteLoader {
                tx: &mut tx,
                run_id: &run.run_id,
            };
            plan = plan_batch(loader, events, run.now).await?;
            insert_spans(&mut tx, &run.run_id, &plan).await?;
        }
        for a in run.answers(std::mem::take(&mut plan.warnings)) {
            if let Some(receipt) = a.receipt {
                let record = receipt.record(&a.answer)?;
                answered.insert(record.key.clone(), record.clone());
                records.push(record);
            }
            answers[a.job] = Some(Ok(Written::Stored(a.answer)));
        }
        plans.push((run, plan));
    }
    for (job, key) in replays_of_taken {
        answers[job] = answered.get(&key).cloned().map(|r| Ok(Written::Replay(r)));
    }
    let mut tail = QueryBuilder::<Sqlite>::new("");
    for (run, plan) in plans.iter().filter(|(_, plan)| !plan.spans.is_empty()) {
        push_tail(&mut tail, &run.run_id, &run.project, plan, run.now);
    }
    let latest = plans
        .iter()
        .map(|(run, _)| run.now)
        .max()
        .unwrap_or_default();
    push_records(&mut tail, &records, latest);
    if !tail.sql().is_empty() {
        // Its shape changes with every group: prepared once, not kept.
        tail.build().persistent(false).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(StoreError::GroupFailed("batch left unanswered".into()))))
        .collect())
}

/// The stored records of `keys`, by key.
async fn get_records(
    tx: &mut Transaction<'_, Sqlite>,
    keys: &[&str],
) -> StoreResult<HashMap<String, IdempotencyRecord>> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let keys = serde_json::to_string(keys).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let rows = sqlx::query(
        "SELECT i.key, i.fingerprint, i.status, i.response
           FROM json_each(?1) AS k CROSS JOIN idempotency i ON i.key = k.value",
    )
    .bind(keys)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter()
        .map(|r| rows::idempotency(r).map(|record| (record.key.clone(), record)))
        .collect()
}

#[async_trait]
impl Store for SqliteStore {
    async fn upsert_run(&self, run_id: &str, run: &RunUpsert, now: i64) -> StoreResult<bool> {
        let mut tx = self.writer.begin().await?;
        let existing: Option<String> =
            sqlx::query_scalar("SELECT project FROM runs WHERE run_id = ?")
                .bind(run_id)
                .fetch_optional(&mut *tx)
                .await?;
        let config = run.config.as_ref().map(Value::to_string);
        let created = match existing {
            Some(project) if project != run.project => {
                return Err(StoreError::ProjectConflict {
                    run_id: run_id.into(),
                    existing: project,
                })
            }
            Some(_) => {
                sqlx::query(
                    "UPDATE runs SET name = COALESCE(?, name), config = COALESCE(?, config),
                            start_us = COALESCE(?, start_us), updated_us = ? WHERE run_id = ?",
                )
                .bind(&run.name)
                .bind(config)
                .bind(run.start_us)
                .bind(now)
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
                false
            }
            None => {
                sqlx::query(
                    "INSERT INTO runs (run_id, project, name, config, status, start_us, updated_us)
                     VALUES (?, ?, ?, ?, 'running', ?, ?)",
                )
                .bind(run_id)
                .bind(&run.project)
                .bind(run.name.as_deref().unwrap_or(run_id))
                .bind(config.unwrap_or_else(|| "null".into()))
                .bind(run.start_us.unwrap_or(now))
                .bind(now)
                .execute(&mut *tx)
                .await?;
                true
            }
        };
        tx.commit().await?;
        Ok(created)
    }

    async fn finish_run(&self, run_id: &str, finish: &RunFinish, now: i64) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        run_project(&mut tx, run_id).await?;
        sqlx::query(
            "UPDATE runs SET status = ?, end_us = ?, running_count = 0, updated_us = ? WHERE run_id = ?",
        )
        .bind(finish.status.as_str())
        .bind(finish.end_us.unwrap_or(now))
        .bind(now)
        .bind(run_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE spans SET status = 'interrupted' WHERE run_id = ? AND status = 'running' AND has_open = 1")
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE traces SET status = 'interrupted', updated_us = ? WHERE run_id = ? AND status = 'running'")
            .bind(now)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE step_activity SET running = 0 WHERE run_id = ? AND running <> 0")
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn write_metrics(&self, run_id: &str, points: &[MetricPoint]) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        run_project(&mut tx, run_id).await?;
        for chunk in points.chunks(5_000) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO metric_points (run_id, key, step, value, ts) ",
            );
            q.push_values(chunk, |mut b, p| {
                b.push_bind(run_id)
                    .push_bind(&p.key)
                    .push_bind(p.step)
                    .push_bind(p.value)
                    .push_bind(p.ts);
            });
            q.push(" ON CONFLICT (run_id, key, step) DO UPDATE SET value = excluded.value, ts = excluded.ts");
            q.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn write_batch(&self, run_id: &str, batch: EventBatch, now: i64) -> StoreResult<Written> {
        let (reply, answer) = oneshot::channel();
        let job = BatchJob {
            run_id: run_id.to_string(),
            batch,
            now,
            reply,
        };
        let writer = self.writer.clone();
        let write = move |jobs| write_group(writer, jobs);
        let weight = |job: &BatchJob| job.batch.events.len().max(1);
        self.batches
            .submit(job, answer, weight, write)
            .await
            .unwrap_or_else(|_| Err(StoreError::GroupFailed("the writer stopped".into())))
    }

    async fn idempotency_get(&self, key: &str) -> StoreResult<Option<IdempotencyRecord>> {
        // On the writer: a reader's page cache is dropped whole each time it sees a
        // commit, which costs more than the lookup itself.
        let row =
            sqlx::query("SELECT key, fingerprint, status, response FROM idempotency WHERE key = ?")
                .bind(key)
                .fetch_optional(&self.writer)
                .await?;
        row.map(|r| rows::idempotency(&r)).transpose()
    }

    async fn idempotency_put(&self, record: &IdempotencyRecord, now: i64) -> StoreResult<()> {
        let mut q = QueryBuilder::<Sqlite>::new("");
        push_records(&mut q, std::slice::from_ref(record), now);
        q.build().execute(&self.writer).await?;
        Ok(())
    }

    async fn idempotency_prune(&self, before_us: i64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM idempotency WHERE created_us < ?")
            .bind(before_us)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected())
    }

    async fn list_projects(&self) -> StoreResult<ProjectList> {
        let rows = sqlx::query(
            "SELECT project, COUNT(*) AS runs, SUM(trace_count) AS traces, MAX(updated_us) AS updated_us
               FROM runs GROUP BY project ORDER BY MAX(updated_us) DESC",
        )
        .fetch_all(&self.reader)
        .await?;
        let projects = rows
            .iter()
            .map(|r| {
                Ok(ProjectSummary {
                    name: r.try_get("project")?,
                    runs: r.try_get("runs")?,
                    traces: r.try_get("traces")?,
                    updated_us: r.try_get("updated_us")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?;
        Ok(ProjectList { projects })
    }

    async fn list_runs(
        &self,
        project: Option<&str>,
        limit: usize,
        cursor: Option<&Cursor>,
    ) -> StoreResult<RunList> {
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {} FROM runs WHERE 1 = 1",
            rows::RUN_COLUMNS
        ));
        if let Some(p) = project {
            q.push(" AND project = ").push_bind(p);
        }
        if let Some(c) = cursor {
            q.push(" AND (start_us, run_id) < (")
                .push_bind(c.value)
                .push(", ")
                .push_bind(&c.a)
                .push(")");
        }
        q.push(" ORDER BY start_us DESC, run_id DESC LIMIT ")
            .push_bind(limit as i64 + 1);
        let rows = q.build().fetch_all(&self.reader).await?;
        let mut runs: Vec<RunSummary> = rows
            .iter()
            .map(rows::run_summary)
            .collect::<StoreResult<_>>()?;
        let next_cursor = page_cursor(&mut runs, limit, |r| Cursor {
            value: r.start_us,
            a: r.run_id.clone(),
            b: String::new(),
        });
        Ok(RunList { runs, next_cursor })
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunDetail>> {
        let row = sqlx::query(&format!(
            "SELECT {}, config FROM runs WHERE run_id = ?",
            rows::RUN_COLUMNS
        ))
        .bind(run_id)
        .fetch_optional(&self.reader)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let metric_keys: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT key FROM metric_points WHERE run_id = ? ORDER BY key",
        )
        .bind(run_id)
        .fetch_all(&self.reader)
        .await?;
        Ok(Some(rows::run_detail(&row, metric_keys)?))
    }

    async fn metric_series(&self, run_id: &str, key: &str) -> StoreResult<Vec<(i64, f64)>> {
        let rows: Vec<(i64, f64)> = sqlx::query_as(
            "SELECT step, value FROM metric_points WHERE run_id = ? AND key = ? ORDER BY step",
        )
        .bind(run_id)
        .bind(key)
        .fetch_all(&self.reader)
        .await?;
        Ok(rows)
    }

    async fn list_traces(&self, query: &TraceQuery) -> StoreResult<TraceList> {
        let sort = match query.sort {
            TraceSort::Updated => "t.updated_us",
            TraceSort::Duration => "COALESCE(t.end_us - t.start_us, -1)",
            TraceSort::Spans => "t.span_count",
            TraceSort::Tokens => "COALESCE(t.root_tokens, t.child_tokens)",
            TraceSort::Errors => "t.error_count",
        };
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {TRACE_COLUMNS}, r.name AS run_name, {sort} AS sort_value
               FROM traces t JOIN runs r ON r.run_id = t.run_id WHERE 1 = 1"
        ));
        if let Some(run_id) = &query.run_id {
            q.push(" AND t.run_id = ").push_bind(run_id);
        }
        if let Some(project) = &query.project {
            q.push(" AND t.project = ").push_bind(project);
        }
        if !query.statuses.is_empty() {
            q.push(" AND t.status IN (");
            let mut list = q.separated(", ");
            for s in &query.statuses {
                list.push_bind(s.as_str());
            }
            q.push(")");
        }
        if query.kinds != 0 {
            q.push(" AND (t.kinds & ")
                .push_bind(query.kinds)
                .push(") <> 0");
        }
        if let Some(v) = query.since_us {
            q.push(" AND t.updated_us >= ").push_bind(v);
        }
        if let Some(v) = query.until_us {
            q.push(" AND t.updated_us <= ").push_bind(v);
        }
        if let Some(v) = query.min_step {
            q.push(" AND t.step >= ").push_bind(v);
        }
        if let Some(v) = query.max_step {
            q.push(" AND t.step <= ").push_bind(v);
        }
        for term in &query.terms {
            let escaped = rows::escape_like(term);
            q.push(" AND (t.name LIKE ")
                .push_bind(format!("%{escaped}%"))
                .push(" ESCAPE '\\'");
            for column in ["t.trace_id", "t.rollout_id", "t.thread_id"] {
                q.push(format!(" OR {column} LIKE "))
                    .push_bind(format!("{escaped}%"))
                    .push(" ESCAPE '\\'");
            }
            q.push(")");
        }
        let (cmp, dir) = if query.ascending {
            (">", "ASC")
        } else {
            ("<", "DESC")
        };
        if let Some(c) = &query.cursor {
            q.push(format!(" AND ({sort}, t.run_id, t.trace_id) {cmp} ("))
                .push_bind(c.value)
                .push(", ")
                .push_bind(&c.a)
                .push(", ")
                .push_bind(&c.b)
                .push(")");
        }
        q.push(format!(
            " ORDER BY {sort} {dir}, t.run_id {dir}, t.trace_id {dir} LIMIT "
        ))
        .push_bind(query.limit as i64 + 1);
        let rows = q.build().fetch_all(&self.reader).await?;
        let mut items: Vec<(i64, TraceSummary)> = rows
            .iter()
            .map(|r| Ok((r.try_get("sort_value")?, rows::trace_summary(r)?)))
            .collect::<StoreResult<_>>()?;
        let next_cursor = page_cursor(&mut items, query.limit, |(v, t)| Cursor {
            value: *v,
            a: t.run_id.clone(),
            b: t.trace_id.clone(),
        });
        Ok(TraceList {
            traces: items.into_iter().map(|(_, t)| t).collect(),
            next_cursor,
            window: None,
        })
    }

    async fn get_trace(&self, run_id: &str, trace_id: &str) -> StoreResult<Option<TraceSummary>> {
        let row = sqlx::query(&format!(
            "SELECT {TRACE_COLUMNS}, r.name AS run_name FROM traces t JOIN runs r ON r.run_id = t.run_id
              WHERE t.run_id = ? AND t.trace_id = ?"
        ))
        .bind(run_id)
        .bind(trace_id)
        .fetch_optional(&self.reader)
        .await?;
        row.map(|r| rows::trace_summary(&r)).transpose()
    }

    async fn list_spans(
        &self,
        run_id: &str,
        trace_id: &str,
        parent: Option<&str>,
        limit: usize,
        cursor: Option<&Cursor>,
    ) -> StoreResult<SpanPage> {
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {SPAN_NODE_COLUMNS} FROM spans s WHERE s.run_id = "
        ));
        q.push_bind(run_id)
            .push(" AND s.trace_id = ")
            .push_bind(trace_id);
        q.push(" AND s.tree_parent = ")
            .push_bind(parent.unwrap_or(""));
        if let Some(c) = cursor {
            q.push(" AND (s.start_us, s.span_id) > (")
                .push_bind(c.value)
                .push(", ")
                .push_bind(&c.a)
                .push(")");
        }
        q.push(" ORDER BY s.start_us, s.span_id LIMIT ")
            .push_bind(limit as i64 + 1);
        let rows = q.build().fetch_all(&self.reader).await?;
        let mut spans: Vec<SpanNode> = rows
            .iter()
            .map(rows::span_node)
            .collect::<StoreResult<_>>()?;
        let next_cursor = page_cursor(&mut spans, limit, |s| Cursor {
            value: s.start_us,
            a: s.span_id.clone(),
            b: String::new(),
        });
        Ok(SpanPage { spans, next_cursor })
    }

    async fn span_exists(&self, run_id: &str, trace_id: &str, span_id: &str) -> StoreResult<bool> {
        let found: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM spans WHERE run_id = ? AND trace_id = ? AND span_id = ? AND has_open",
        )
        .bind(run_id)
        .bind(trace_id)
        .bind(span_id)
        .fetch_optional(&self.reader)
        .await?;
        Ok(found.is_some())
    }

    async fn get_span(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: &str,
    ) -> StoreResult<Option<SpanDetail>> {
        let row = sqlx::query(&format!(
            "SELECT {SPAN_NODE_COLUMNS}, {} FROM spans s
              WHERE s.run_id = ? AND s.trace_id = ? AND s.span_id = ? AND s.has_open = 1",
            rows::SPAN_BODY_COLUMNS
        ))
        .bind(run_id)
        .bind(trace_id)
        .bind(span_id)
        .fetch_optional(&self.reader)
        .await?;
        let Some(row) = row else { return Ok(None) };
        // The ancestors the tree must open, root first; an orphan's path is empty.
        let path: Vec<String> = sqlx::query_scalar(
            "WITH RECURSIVE up(span_id, tree_parent, depth) AS (
                 SELECT span_id, tree_parent, 0 FROM spans
                  WHERE run_id = ?1 AND trace_id = ?2 AND span_id = ?3
                 UNION ALL
                 SELECT s.span_id, s.tree_parent, up.depth + 1 FROM spans s JOIN up
                     ON s.run_id = ?1 AND s.trace_id = ?2 AND s.span_id = up.tree_parent
                  WHERE up.tree_parent <> '' AND up.depth < 100000)
             SELECT span_id FROM up WHERE depth > 0 ORDER BY depth DESC",
        )
        .bind(run_id)
        .bind(trace_id)
        .bind(span_id)
        .fetch_all(&self.reader)
        .await?;
        Ok(Some(rows::span_detail(&row, run_id, trace_id, path)?))
    }

    async fn steps(
        &self,
        run_id: &str,
        min_step: Option<i64>,
        max_step: Option<i64>,
    ) -> StoreResult<StepsResponse> {
        let run = sqlx::query(
            "SELECT trace_count, errored_count, running_count, unstepped_count FROM runs WHERE run_id = ?",
        )
        .bind(run_id)
        .fetch_optional(&self.reader)
        .await?
        .ok_or_else(|| StoreError::RunNotFound(run_id.to_string()))?;
        let (min, max): (Option<i64>, Option<i64>) =
            sqlx::query_as("SELECT MIN(step), MAX(step) FROM step_activity WHERE run_id = ?")
                .bind(run_id)
                .fetch_one(&self.reader)
                .await?;
        let mut steps: Vec<StepActivity> = sqlx::query_as::<_, (i64, i64, i64, i64)>(
            "SELECT step, traces, errored, running FROM step_activity
              WHERE run_id = ? AND step >= ? AND step <= ? ORDER BY step LIMIT ?",
        )
        .bind(run_id)
        .bind(min_step.unwrap_or(0))
        .bind(max_step.unwrap_or(i64::MAX))
        .bind(STEP_LIMIT as i64 + 1)
        .fetch_all(&self.reader)
        .await?
        .into_iter()
        .map(|(step, traces, errored, running)| StepActivity {
            step,
            traces,
            errored,
            running,
        })
        .collect();
        let truncated = steps.len() > STEP_LIMIT;
        steps.truncate(STEP_LIMIT);
        Ok(StepsResponse {
            steps,
            totals: StepTotals {
                traces: run.try_get("trace_count")?,
                errored: run.try_get("errored_count")?,
                running: run.try_get("running_count")?,
                unstepped: run.try_get("unstepped_count")?,
                min_step: min,
                max_step: max,
            },
            truncated,
            limit: STEP_LIMIT,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Receipt;
    use treeline_app::wire::{parse_event, BatchResponse, RunUpsert};

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

    #[tokio::test]
    async fn a_key_answered_earlier_in_the_same_group_is_replayed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .expect("open");
        let run = RunUpsert {
            project: "p".into(),
            ..Default::default()
        };
        store.upsert_run("r1", &run, 1).await.expect("run");
        let work = vec![
            ("r1".to_string(), keyed("k1", "a"), 2),
            ("nope".to_string(), keyed("k2", "b"), 2),
            ("r1".to_string(), keyed("k1", "c"), 2),
        ];
        let answers = write_together(&store.writer, work).await.expect("group");
        assert!(matches!(&answers[0], Ok(Written::Stored(a)) if a.accepted == 1));
        assert!(matches!(&answers[1], Err(StoreError::RunNotFound(_))));
        // The third reuses k1 with another body: it gets k1's record (the HTTP layer
        // answers 422 on the fingerprint), and its span is not written.
        assert!(matches!(&answers[2], Ok(Written::Replay(r)) if r.fingerprint == "of a"));
        assert_eq!(
            store
                .get_trace("r1", "t1")
                .await
                .unwrap()
                .unwrap()
                .span_count,
            1
        );
    }
}
