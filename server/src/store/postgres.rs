//! The scale-out backend: PostgreSQL, shared by any number of stateless Treeline
//! servers. Writes to one run are serialized with a transaction-scoped advisory lock,
//! so the read-modify-write of counters never loses an update.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres, QueryBuilder, Row, Transaction};
use treeline_app::wire::{
    MetricPoint, ProjectList, ProjectSummary, RunDetail, RunFinish, RunList, RunSummary, RunUpsert,
    SpanDetail, SpanKind, SpanNode, SpanPage, StepActivity, StepTotals, StepsResponse, TraceList,
    TraceSummary, STEP_LIMIT,
};

use super::cursor::page_cursor;
use super::rows::{self, SPAN_NODE_COLUMNS, TRACE_COLUMNS};
use super::{
    Cursor, EventBatch, IdempotencyRecord, Store, StoreError, StoreResult, TraceQuery, TraceSort,
    Written,
};
use crate::ingest::{plan_batch, Loader, Plan, SpanState, TraceState};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Rows per multi-row statement, under PostgreSQL's 65,535 bound parameters.
const SPAN_CHUNK: usize = 1_000;

pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://…`) and runs the migrations.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        MIGRATIONS.run(&pool).await?;
        Ok(PostgresStore { pool })
    }

    /// Creates the database `name` on the server of `url`; returns its URL. For tests
    /// and benchmarks that want a fresh database.
    pub async fn create_database(url: &str, name: &str) -> StoreResult<String> {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        sqlx::query(&format!("CREATE DATABASE \"{}\"", name.replace('"', "")))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        let (head, query) = match url.split_once('?') {
            Some((h, q)) => (h, format!("?{q}")),
            None => (url, String::new()),
        };
        let scheme_end = head.find("://").map_or(0, |i| i + 3);
        let base = match head[scheme_end..].find('/') {
            Some(i) => &head[..scheme_end + i],
            None => head,
        };
        Ok(format!("{base}/{name}{query}"))
    }
}

struct PgLoader<'a, 't> {
    tx: &'a mut Transaction<'t, Postgres>,
    run_id: &'a str,
}

impl Loader for PgLoader<'_, '_> {
    type Error = StoreError;

    async fn load_spans(&mut self, keys: &[(String, String)]) -> StoreResult<Vec<SpanState>> {
        let (traces, spans): (Vec<&str>, Vec<&str>) =
            keys.iter().map(|(t, s)| (t.as_str(), s.as_str())).unzip();
        let rows = sqlx::query(&format!(
            "SELECT {} FROM UNNEST($2::text[], $3::text[]) AS k(trace_id, span_id) JOIN spans s
               ON s.run_id = $1 AND s.trace_id = k.trace_id AND s.span_id = k.span_id",
            rows::SPAN_STATE_COLUMNS
        ))
        .bind(self.run_id)
        .bind(traces)
        .bind(spans)
        .fetch_all(&mut **self.tx)
        .await?;
        rows.iter().map(rows::span_state).collect()
    }

    async fn load_traces(&mut self, trace_ids: &[String]) -> StoreResult<Vec<TraceState>> {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM traces t WHERE t.run_id = $1 AND t.trace_id = ANY($2)",
            rows::TRACE_STATE_COLUMNS
        ))
        .bind(self.run_id)
        .bind(trace_ids)
        .fetch_all(&mut **self.tx)
        .await?;
        rows.iter().map(rows::trace_state).collect()
    }
}

async fn write_plan(
    tx: &mut Transaction<'_, Postgres>,
    run_id: &str,
    project: &str,
    plan: &Plan,
    now: i64,
) -> StoreResult<()> {
    for chunk in plan.spans.chunks(SPAN_CHUNK) {
        let mut q = QueryBuilder::<Postgres>::new(
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
             attributes = (spans.attributes::jsonb || excluded.attributes::jsonb)::text, \
             metrics = (spans.metrics::jsonb || excluded.metrics::jsonb)::text, \
             links = CASE WHEN excluded.links = '[]' THEN spans.links ELSE excluded.links END, \
             input_truncated = CASE WHEN excluded.input IS NULL THEN spans.input_truncated ELSE excluded.input_truncated END, \
             output_truncated = CASE WHEN excluded.output IS NULL THEN spans.output_truncated ELSE excluded.output_truncated END, \
             input = COALESCE(excluded.input, spans.input), \
             output = COALESCE(excluded.output, spans.output), \
             error = COALESCE(excluded.error, spans.error)",
        );
        q.build().execute(&mut **tx).await?;
    }

    for chunk in plan.traces.chunks(SPAN_CHUNK) {
        let mut q = QueryBuilder::<Postgres>::new(
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
             attributes = (traces.attributes::jsonb || excluded.attributes::jsonb)::text",
        );
        q.build().execute(&mut **tx).await?;
    }

    for a in &plan.adopt {
        sqlx::query(
            "UPDATE spans SET tree_parent = parent_span_id
              WHERE run_id = $1 AND trace_id = $2 AND tree_parent = '' AND parent_span_id = $3",
        )
        .bind(run_id)
        .bind(&a.trace_id)
        .bind(&a.parent)
        .execute(&mut **tx)
        .await?;
        if let Some(step) = a.step {
            // Down through the descendants that have no step of their own.
            sqlx::query(
                "WITH RECURSIVE sub(span_id) AS (
                   SELECT span_id FROM spans
                    WHERE run_id = $1 AND trace_id = $2 AND tree_parent = $3 AND step IS NULL
                   UNION ALL
                   SELECT s.span_id FROM sub CROSS JOIN LATERAL (
                       SELECT span_id FROM spans
                        WHERE run_id = $1 AND trace_id = $2 AND tree_parent = sub.span_id
                          AND step IS NULL
                       OFFSET 0) s)
                 UPDATE spans SET step = $4
                  WHERE run_id = $1 AND trace_id = $2 AND span_id IN (SELECT span_id FROM sub)",
            )
            .bind(run_id)
            .bind(&a.trace_id)
            .bind(&a.parent)
            .bind(step)
            .execute(&mut **tx)
            .await?;
        }
    }

    if !plan.steps.is_empty() {
        let mut q = QueryBuilder::<Postgres>::new(
            "INSERT INTO step_activity (run_id, step, traces, errored, running) ",
        );
        q.push_values(&plan.steps, |mut b, (step, d)| {
            b.push_bind(run_id)
                .push_bind(*step)
                .push_bind(d.traces)
                .push_bind(d.errored)
                .push_bind(d.running);
        });
        q.push(
            " ON CONFLICT (run_id, step) DO UPDATE SET traces = step_activity.traces + excluded.traces, \
             errored = step_activity.errored + excluded.errored, \
             running = step_activity.running + excluded.running",
        );
        q.build().execute(&mut **tx).await?;
        if plan.steps.values().any(|d| d.traces < 0) {
            sqlx::query("DELETE FROM step_activity WHERE run_id = $1 AND traces <= 0")
                .bind(run_id)
                .execute(&mut **tx)
                .await?;
        }
    }

    let r = plan.run;
    sqlx::query(
        "UPDATE runs SET trace_count = trace_count + $1, errored_count = errored_count + $2,
                running_count = running_count + $3, unstepped_count = unstepped_count + $4,
                updated_us = GREATEST(updated_us, $5)
          WHERE run_id = $6",
    )
    .bind(r.traces)
    .bind(r.errored)
    .bind(r.running)
    .bind(r.unstepped)
    .bind(now)
    .bind(run_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Serializes the writers of one run until the transaction ends.
async fn lock_run(tx: &mut Transaction<'_, Postgres>, run_id: &str) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
        .bind(run_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn get_record<'e>(
    db: impl sqlx::Executor<'e, Database = Postgres>,
    key: &str,
) -> StoreResult<Option<IdempotencyRecord>> {
    let row =
        sqlx::query("SELECT key, fingerprint, status, response FROM idempotency WHERE key = $1")
            .bind(key)
            .fetch_optional(db)
            .await?;
    row.map(|r| rows::idempotency(&r)).transpose()
}

async fn put_record<'e>(
    db: impl sqlx::Executor<'e, Database = Postgres>,
    record: &IdempotencyRecord,
    now: i64,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO idempotency (key, fingerprint, status, response, created_us)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING",
    )
    .bind(&record.key)
    .bind(&record.fingerprint)
    .bind(i64::from(record.status))
    .bind(&record.response)
    .bind(now)
    .execute(db)
    .await?;
    Ok(())
}

async fn run_project(tx: &mut Transaction<'_, Postgres>, run_id: &str) -> StoreResult<String> {
    sqlx::query_scalar("SELECT project FROM runs WHERE run_id = $1")
        .bind(run_id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| StoreError::RunNotFound(run_id.to_string()))
}

#[async_trait]
impl Store for PostgresStore {
    async fn upsert_run(&self, run_id: &str, run: &RunUpsert, now: i64) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let existing: Option<String> =
            sqlx::query_scalar("SELECT project FROM runs WHERE run_id = $1 FOR UPDATE")
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
                    "UPDATE runs SET name = COALESCE($1, name), config = COALESCE($2, config),
                            start_us = COALESCE($3, start_us), updated_us = $4 WHERE run_id = $5",
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
                     VALUES ($1, $2, $3, $4, 'running', $5, $6) ON CONFLICT (run_id) DO NOTHING",
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
        let mut tx = self.pool.begin().await?;
        lock_run(&mut tx, run_id).await?;
        run_project(&mut tx, run_id).await?;
        sqlx::query(
            "UPDATE runs SET status = $1, end_us = $2, running_count = 0, updated_us = $3 WHERE run_id = $4",
        )
        .bind(finish.status.as_str())
        .bind(finish.end_us.unwrap_or(now))
        .bind(now)
        .bind(run_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE spans SET status = 'interrupted' WHERE run_id = $1 AND status = 'running' AND has_open")
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE traces SET status = 'interrupted', updated_us = $1 WHERE run_id = $2 AND status = 'running'")
            .bind(now)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE step_activity SET running = 0 WHERE run_id = $1 AND running <> 0")
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn write_metrics(&self, run_id: &str, points: &[MetricPoint]) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        run_project(&mut tx, run_id).await?;
        for chunk in points.chunks(5_000) {
            let mut q = QueryBuilder::<Postgres>::new(
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
        let mut tx = self.pool.begin().await?;
        lock_run(&mut tx, run_id).await?;
        let project = run_project(&mut tx, run_id).await?;
        if let Some(receipt) = &batch.receipt {
            // Under the run's lock: a racing request with this key has committed.
            if let Some(record) = get_record(&mut *tx, &receipt.key).await? {
                return Ok(Written::Replay(record));
            }
        }
        let mut warnings = Vec::new();
        if !batch.events.is_empty() {
            let plan = plan_batch(
                &mut PgLoader {
                    tx: &mut tx,
                    run_id,
                },
                batch.events,
                now,
            )
            .await?;
            write_plan(&mut tx, run_id, &project, &plan, now).await?;
            warnings = plan.warnings;
        }
        let answer = batch.parsed.with_warnings(warnings);
        if let Some(receipt) = &batch.receipt {
            put_record(&mut *tx, &receipt.record(&answer)?, now).await?;
        }
        tx.commit().await?;
        Ok(Written::Stored(answer))
    }

    async fn idempotency_get(&self, key: &str) -> StoreResult<Option<IdempotencyRecord>> {
        get_record(&self.pool, key).await
    }

    async fn idempotency_put(&self, record: &IdempotencyRecord, now: i64) -> StoreResult<()> {
        put_record(&self.pool, record, now).await
    }

    async fn idempotency_prune(&self, before_us: i64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM idempotency WHERE created_us < $1")
            .bind(before_us)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn list_projects(&self) -> StoreResult<ProjectList> {
        let rows = sqlx::query(
            "SELECT project, COUNT(*) AS runs, SUM(trace_count)::bigint AS traces, MAX(updated_us) AS updated_us
               FROM runs GROUP BY project ORDER BY MAX(updated_us) DESC",
        )
        .fetch_all(&self.pool)
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
        let mut q = QueryBuilder::<Postgres>::new(format!(
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
        let rows = q.build().fetch_all(&self.pool).await?;
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
            "SELECT {}, config FROM runs WHERE run_id = $1",
            rows::RUN_COLUMNS
        ))
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let metric_keys: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT key FROM metric_points WHERE run_id = $1 ORDER BY key",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(Some(rows::run_detail(&row, metric_keys)?))
    }

    async fn metric_series(&self, run_id: &str, key: &str) -> StoreResult<Vec<(i64, f64)>> {
        let rows: Vec<(i64, f64)> = sqlx::query_as(
            "SELECT step, value FROM metric_points WHERE run_id = $1 AND key = $2 ORDER BY step",
        )
        .bind(run_id)
        .bind(key)
        .fetch_all(&self.pool)
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
        let mut q = QueryBuilder::<Postgres>::new(format!(
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
            q.push(" AND (t.name ILIKE ")
                .push_bind(format!("%{escaped}%"))
                .push(" ESCAPE '\\'");
            for column in ["t.trace_id", "t.rollout_id", "t.thread_id"] {
                q.push(format!(" OR {column} ILIKE "))
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
        let rows = q.build().fetch_all(&self.pool).await?;
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
              WHERE t.run_id = $1 AND t.trace_id = $2"
        ))
        .bind(run_id)
        .bind(trace_id)
        .fetch_optional(&self.pool)
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
        let mut q = QueryBuilder::<Postgres>::new(format!(
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
        let rows = q.build().fetch_all(&self.pool).await?;
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
            "SELECT 1 FROM spans WHERE run_id = $1 AND trace_id = $2 AND span_id = $3 AND has_open",
        )
        .bind(run_id)
        .bind(trace_id)
        .bind(span_id)
        .fetch_optional(&self.pool)
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
              WHERE s.run_id = $1 AND s.trace_id = $2 AND s.span_id = $3 AND s.has_open",
            rows::SPAN_BODY_COLUMNS
        ))
        .bind(run_id)
        .bind(trace_id)
        .bind(span_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        // The ancestors the tree must open, root first; an orphan's path is empty.
        let path: Vec<String> = sqlx::query_scalar(
            "WITH RECURSIVE up(span_id, tree_parent, depth) AS (
                 SELECT span_id, tree_parent, 0 FROM spans
                  WHERE run_id = $1 AND trace_id = $2 AND span_id = $3
                 UNION ALL
                 -- OFFSET 0 keeps the lookup a key probe per level; flattened into
                 -- a join, a generic plan walked the whole trace at each level.
                 SELECT s.span_id, s.tree_parent, up.depth + 1 FROM up CROSS JOIN LATERAL (
                     SELECT span_id, tree_parent FROM spans
                      WHERE run_id = $1 AND trace_id = $2 AND span_id = up.tree_parent
                     OFFSET 0) s
                  WHERE up.tree_parent <> '' AND up.depth < 100000)
             SELECT span_id FROM up WHERE depth > 0 ORDER BY depth DESC",
        )
        .bind(run_id)
        .bind(trace_id)
        .bind(span_id)
        .fetch_all(&self.pool)
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
            "SELECT trace_count, errored_count, running_count, unstepped_count FROM runs WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::RunNotFound(run_id.to_string()))?;
        let (min, max): (Option<i64>, Option<i64>) =
            sqlx::query_as("SELECT MIN(step), MAX(step) FROM step_activity WHERE run_id = $1")
                .bind(run_id)
                .fetch_one(&self.pool)
                .await?;
        let mut steps: Vec<StepActivity> = sqlx::query_as::<_, (i64, i64, i64, i64)>(
            "SELECT step, traces, errored, running FROM step_activity
              WHERE run_id = $1 AND step >= $2 AND step <= $3 ORDER BY step LIMIT $4",
        )
        .bind(run_id)
        .bind(min_step.unwrap_or(0))
        .bind(max_step.unwrap_or(i64::MAX))
        .bind(STEP_LIMIT as i64 + 1)
        .fetch_all(&self.pool)
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
