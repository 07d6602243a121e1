//! Run, metric and idempotency writes, the same on both databases. Each public
//! write is one transaction of its own; the lookups run on the caller's connection.

use serde_json::Value;
use sqlx::Pool;
use treeline_wire::{MetricPoint, RunFinish, RunUpsert};

use super::dialect::{Dialect, Sql};
use super::ingest::sizes;
use super::rows::DbRow;
use super::statements;
use super::{metric_blocks, metric_summaries, run_deletion};
use super::{IdempotencyRecord, StoreError, StoreResult};

/// Points per metrics statement, under both databases' bound-parameter limits.
const METRIC_CHUNK: usize = 5_000;

/// The run's project; `RunNotFound` when there is no such run.
pub(super) async fn run_project<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
) -> StoreResult<String> {
    select_project::<DB>(conn, run_id, "").await
}

pub(super) async fn select_project<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    lock: &str,
) -> StoreResult<String> {
    let mut q = Sql::<DB>::new("SELECT project FROM runs WHERE run_id = ");
    q.bind(run_id);
    q.push(lock);
    let rows = DB::fetch_all_in(conn, q).await?;
    match rows.first() {
        Some(row) => row.req_text("project"),
        None => Err(StoreError::RunNotFound(run_id.to_string())),
    }
}

/// Creates the run (true) or updates its name, config and start (false). The
/// insert comes first so that two requests creating one run meet on its key: one
/// creates it, the other sees it (and its project) once the first commits.
pub(super) async fn upsert_run<DB: Dialect>(
    pool: &Pool<DB>,
    run_id: &str,
    run: &RunUpsert,
    now: i64,
) -> StoreResult<bool> {
    let mut tx = pool.begin().await?;
    let created = upsert_in::<DB>(&mut tx, run_id, run, now).await?;
    tx.commit().await?;
    Ok(created)
}

/// The run's project, creating the run first when there is none (see
/// `Ingest::ensure_run`).
pub(super) async fn ensure_run<DB: Dialect>(
    pool: &Pool<DB>,
    run_id: &str,
    run: &RunUpsert,
    now: i64,
) -> StoreResult<String> {
    let mut tx = pool.begin().await?;
    let project = match insert_run::<DB>(&mut tx, run_id, run, now).await? {
        true => run.project.clone(),
        false => select_project::<DB>(&mut tx, run_id, "").await?,
    };
    tx.commit().await?;
    Ok(project)
}

/// Inserts the run unless its id exists: true when it did not.
async fn insert_run<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    run: &RunUpsert,
    now: i64,
) -> StoreResult<bool> {
    // Under the run's lock, which a deletion takes: a run being deleted is not
    // created again, nor written to, until its data is gone.
    DB::lock_run(&mut *conn, run_id).await?;
    run_deletion::refuse_purging::<DB>(&mut *conn, run_id).await?;
    let config = run.config.as_ref().map(Value::to_string);
    let mut q = Sql::<DB>::new(
        "INSERT INTO runs (run_id, project, name, config, status, start_us, updated_us) VALUES (",
    );
    q.bind(run_id);
    q.push(", ");
    q.bind(run.project.as_str());
    q.push(", ");
    q.bind(run.name.as_deref().unwrap_or(run_id));
    q.push(", ");
    q.bind(config.as_deref().unwrap_or("null"));
    q.push(", 'running', ");
    q.bind(run.start_us.unwrap_or(now));
    q.push(", ");
    q.bind(now);
    q.push(") ON CONFLICT (run_id) DO NOTHING");
    Ok(DB::execute(&mut *conn, q).await? == 1)
}

async fn upsert_in<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    run: &RunUpsert,
    now: i64,
) -> StoreResult<bool> {
    if insert_run::<DB>(&mut *conn, run_id, run, now).await? {
        return Ok(true);
    }
    let config = run.config.as_ref().map(Value::to_string);
    let project = select_project::<DB>(&mut *conn, run_id, DB::FOR_UPDATE).await?;
    if project != run.project {
        return Err(StoreError::ProjectConflict {
            run_id: run_id.into(),
            existing: project,
        });
    }
    let mut q = Sql::<DB>::new("UPDATE runs SET name = COALESCE(");
    q.bind(run.name.as_deref());
    q.push(", name), config = COALESCE(");
    q.bind(config.as_deref());
    q.push(", config), start_us = COALESCE(");
    q.bind(run.start_us);
    q.push(", start_us), updated_us = ");
    q.bind(now);
    q.push(" WHERE run_id = ");
    q.bind(run_id);
    DB::execute(conn, q).await?;
    Ok(false)
}

/// Sets the run's status and turns its running spans and traces into interrupted
/// ones.
pub(super) async fn finish_run<DB: Dialect>(
    pool: &Pool<DB>,
    run_id: &str,
    finish: &RunFinish,
    now: i64,
) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    DB::lock_run(&mut tx, run_id).await?;
    finish_in::<DB>(&mut tx, run_id, finish, now).await?;
    tx.commit().await?;
    Ok(())
}

async fn finish_in<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    finish: &RunFinish,
    now: i64,
) -> StoreResult<()> {
    run_project::<DB>(&mut *conn, run_id).await?;
    let mut q = Sql::<DB>::new("UPDATE runs SET status = ");
    q.bind(finish.status.as_str());
    q.push(", end_us = ");
    q.bind(finish.end_us.unwrap_or(now));
    q.push(", running_count = 0, updated_us = ");
    q.bind(now);
    q.push(" WHERE run_id = ");
    q.bind(run_id);
    DB::execute(&mut *conn, q).await?;

    let mut q = Sql::<DB>::new("UPDATE spans SET status = 'interrupted' WHERE run_id = ");
    q.bind(run_id);
    q.push(" AND status = 'running' AND has_open");
    DB::execute(&mut *conn, q).await?;

    let mut q = Sql::<DB>::new("UPDATE traces SET status = 'interrupted', updated_us = ");
    q.bind(now);
    q.push(" WHERE run_id = ");
    q.bind(run_id);
    q.push(" AND status = 'running'");
    DB::execute(&mut *conn, q).await?;

    let mut q = Sql::<DB>::new("UPDATE step_activity SET running = 0 WHERE run_id = ");
    q.bind(run_id);
    q.push(" AND running <> 0");
    DB::execute(conn, q).await?;
    Ok(())
}

/// Stores metric points; a repeated (key, step), in the batch or against stored
/// points, keeps the last value on both databases.
pub(super) async fn write_metrics<DB: Dialect>(
    pool: &Pool<DB>,
    run_id: &str,
    points: &[MetricPoint],
) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    // Held to the commit: the run's summaries are read and then written below.
    select_project::<DB>(&mut tx, run_id, DB::FOR_UPDATE).await?;
    let points = statements::last_per_step(points);
    // A point written again at its step is counted again: rare, and an estimate.
    let bytes = points.iter().fold(0_i64, |n, p| {
        n.saturating_add(sizes::METRIC_POINT + sizes::len(&p.key))
    });
    let mut q = Sql::<DB>::new("UPDATE runs SET bytes = bytes + ");
    q.bind(bytes).push(" WHERE run_id = ").bind(run_id);
    DB::execute(&mut tx, q).await?;
    for chunk in points.chunks(METRIC_CHUNK) {
        let mut q = Sql::<DB>::new("");
        statements::metrics_upsert(&mut q, run_id, chunk);
        DB::execute(&mut tx, q).await?;
    }
    let reached = metric_summaries::merge::<DB>(&mut tx, run_id, &points).await?;
    metric_blocks::keep::<DB>(&mut tx, run_id, &points, &reached).await?;
    for key in &reached {
        metric_summaries::recount::<DB>(&mut tx, run_id, key).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Keeps `record` unless its key already has one.
pub(super) async fn put_idempotency<DB: Dialect>(
    pool: &Pool<DB>,
    record: &IdempotencyRecord,
    now: i64,
) -> StoreResult<()> {
    let mut q = Sql::<DB>::new("");
    statements::idempotency_insert(&mut q, std::slice::from_ref(record), now);
    DB::execute(&mut *pool.acquire().await?, q).await?;
    Ok(())
}

/// Forgets idempotency answers older than `before_us`.
pub(super) async fn prune_idempotency<DB: Dialect>(
    pool: &Pool<DB>,
    before_us: i64,
) -> StoreResult<u64> {
    let mut q = Sql::<DB>::new("DELETE FROM idempotency WHERE created_us < ");
    q.bind(before_us);
    Ok(DB::execute(&mut *pool.acquire().await?, q).await?)
}

/// The stored records of `keys`, by key, in one query.
pub(super) async fn idempotency_records<DB: Dialect>(
    conn: &mut DB::Connection,
    keys: &[&str],
) -> StoreResult<std::collections::HashMap<String, IdempotencyRecord>> {
    if keys.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    let mut q = Sql::<DB>::new(
        "SELECT key, fingerprint, status, response, run_id FROM idempotency WHERE key IN (",
    );
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        q.bind(*key);
    }
    q.push(")");
    let rows = DB::fetch_all_in(conn, q).await?;
    rows.iter()
        .map(|r| super::rows::idempotency(r).map(|record| (record.key.clone(), record)))
        .collect()
}

/// The answer kept for `key`, if any.
pub(super) async fn idempotency_record<DB: Dialect>(
    conn: &mut DB::Connection,
    key: &str,
) -> StoreResult<Option<IdempotencyRecord>> {
    Ok(idempotency_records::<DB>(conn, &[key]).await?.remove(key))
}
