//! Deleting a run, the same on both databases. The run's row goes and a row in
//! `deleted_runs` comes in one transaction, so the run leaves every read at once
//! (a run's reads find its row first; project-wide lists skip `deleted_runs`, see
//! `trace_list::push_conditions`). Its data then goes a bounded batch at a time,
//! each batch a transaction of its own, so ingest into other runs waits at most one
//! batch; the `deleted_runs` row goes last, so a crash part-way resumes where it
//! stopped. Until then the run's id cannot be written to (`RunPurging`).

use sqlx::Pool;

use super::dialect::{Dialect, Sql};
use super::rows::DbRow;
use super::run_writes::select_project;
use super::{Purged, StoreError, StoreResult};

/// Each table that holds a run's rows, with its key: a batch is the rows whose
/// keys the first `limit` of the run's rows give. Children before their traces.
const TABLES: [(&str, &str); 12] = [
    ("annotations", "run_id, trace_id, span_id, name, author"),
    ("span_texts", "run_id, code, value, trace_id"),
    ("span_ranges", "run_id, trace_id, code, kind"),
    ("span_attribute_overwrites", "run_id, trace_id"),
    ("trace_numbers", "run_id, trace_id, key"),
    ("trace_texts", "run_id, trace_id, key"),
    ("spans", "run_id, trace_id, span_id"),
    ("traces", "run_id, trace_id"),
    ("step_activity", "run_id, step"),
    ("metric_blocks", "run_id, key, width, block"),
    ("metric_summaries", "run_id, key"),
    ("metric_points", "run_id, key, step"),
];

/// Deletes the run from every read, and queues its data for removal: its project,
/// or `None` when there is no such run.
pub(super) async fn delete_run<DB: Dialect>(
    pool: &Pool<DB>,
    run_id: &str,
    now: i64,
) -> StoreResult<Option<String>> {
    let mut tx = pool.begin().await?;
    // The run's writes hold this lock: none is half-way through when it goes.
    DB::lock_run(&mut tx, run_id).await?;
    let project = match select_project::<DB>(&mut tx, run_id, DB::FOR_UPDATE).await {
        Ok(project) => project,
        Err(StoreError::RunNotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    // Its weight goes with it: its rows take space until they are removed.
    let mut q = Sql::<DB>::new(
        "INSERT INTO deleted_runs (run_id, project, deleted_us, bytes) SELECT run_id, project, ",
    );
    q.bind(now)
        .push(", bytes FROM runs WHERE run_id = ")
        .bind(run_id)
        .push(" ON CONFLICT (run_id) DO NOTHING");
    DB::execute(&mut *tx, q).await?;
    // The answers of its writes go at once: a retry after this must write again,
    // not be told its data is stored. Two days' keyed requests at most (they
    // are pruned by age).
    for table in ["runs", "idempotency"] {
        let mut q = Sql::<DB>::new(format!("DELETE FROM {table} WHERE run_id = "));
        q.bind(run_id);
        DB::execute(&mut *tx, q).await?;
    }
    tx.commit().await?;
    Ok(Some(project))
}

/// The key of `table`'s rows, as [`TABLES`] lists it.
pub(super) fn key_of(table: &str) -> &'static str {
    TABLES
        .iter()
        .find(|(t, _)| *t == table)
        .map_or("run_id", |(_, key)| key)
}

/// `RunPurging` when the run's data is still being removed.
pub(super) async fn refuse_purging<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
) -> StoreResult<()> {
    let mut q = Sql::<DB>::new("SELECT 1 AS one FROM deleted_runs WHERE run_id = ");
    q.bind(run_id);
    if DB::fetch_all_in(conn, q).await?.is_empty() {
        Ok(())
    } else {
        Err(StoreError::RunPurging(run_id.to_string()))
    }
}

/// Removes at most `limit` rows of the oldest deleted run, or, when none are left,
/// the run's `deleted_runs` row. `None` when no run is being deleted.
pub(super) async fn purge_step<DB: Dialect>(
    pool: &Pool<DB>,
    limit: usize,
) -> StoreResult<Option<Purged>> {
    let q = Sql::<DB>::new("SELECT run_id FROM deleted_runs ORDER BY deleted_us, run_id LIMIT 1");
    let rows = DB::fetch_all(pool, q).await?;
    let Some(run_id) = rows.first().map(|r| r.req_text("run_id")).transpose()? else {
        return Ok(None);
    };
    let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
    for (table, key) in TABLES {
        let mut q = Sql::<DB>::new(format!(
            "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE run_id = "
        ));
        q.bind(run_id.as_str())
            .push(" LIMIT ")
            .bind(limit)
            .push(")");
        let removed = DB::execute(&mut *pool.acquire().await?, q).await?;
        if removed > 0 {
            return Ok(Some(Purged {
                run_id,
                table,
                rows: removed,
                done: false,
            }));
        }
    }
    let mut q = Sql::<DB>::new("DELETE FROM deleted_runs WHERE run_id = ");
    q.bind(run_id.as_str());
    DB::execute(&mut *pool.acquire().await?, q).await?;
    Ok(Some(Purged {
        run_id,
        table: "deleted_runs",
        rows: 1,
        done: true,
    }))
}
