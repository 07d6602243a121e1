//! Retention, the same on both databases: each project's policy, and the bounded
//! steps that remove closed traces past its window. A step removes whole traces in
//! one transaction, under the run's lock, with the run's counts and its per-step
//! activity brought down in the same commit, so no read sees a trace half gone
//! or a count that disagrees with the list. A trace larger than a batch loses its
//! spans over several steps first (still listed meanwhile), then goes as a small
//! one. A trace still open (status `running`) is never removed.

use sqlx::Pool;
use treeline_wire::retention::{MetricsRule, RetentionPolicy, RetentionPreview};

use super::dialect::{Dialect, Sql};
use super::ingest::{Activity, Plan};
use super::rows;
use super::rows::DbRow;
use super::{run_deletion, span_index, statements, Expired, StoreResult};

/// Traces looked at in one step at most.
const TRACES_PER_STEP: i64 = 500;

/// The tables that hold a trace's rows besides `traces`, children first.
const TRACE_TABLES: [&str; 5] = [
    "annotations",
    "trace_numbers",
    "trace_texts",
    "span_ranges",
    "spans",
];

/// Sets (`Some`) or clears (`None`) the project's policy.
pub(super) async fn set_policy<DB: Dialect>(
    pool: &Pool<DB>,
    project: &str,
    policy: Option<&RetentionPolicy>,
    now: i64,
) -> StoreResult<()> {
    let mut conn = pool.acquire().await?;
    let Some(p) = policy else {
        let mut q = Sql::<DB>::new("DELETE FROM retention_policies WHERE project = ");
        q.bind(project);
        DB::execute(&mut conn, q).await?;
        return Ok(());
    };
    let mut q = Sql::<DB>::new(
        "INSERT INTO retention_policies (project, traces_days, drop_runs, updated_us) VALUES (",
    );
    q.bind(project)
        .push(", ")
        .bind(i64::from(p.traces_days))
        .push(", ")
        .bind(i64::from(p.metrics == MetricsRule::Drop))
        .push(", ")
        .bind(now)
        .push(
            ") ON CONFLICT (project) DO UPDATE SET traces_days = excluded.traces_days, \
             drop_runs = excluded.drop_runs, updated_us = excluded.updated_us",
        );
    DB::execute(&mut conn, q).await?;
    Ok(())
}

/// Every project's policy, by project.
pub(super) async fn policies<DB: Dialect>(
    pool: &Pool<DB>,
) -> StoreResult<Vec<(String, RetentionPolicy)>> {
    let q = Sql::<DB>::new(
        "SELECT project, traces_days, drop_runs FROM retention_policies ORDER BY project",
    );
    DB::fetch_all(pool, q)
        .await?
        .iter()
        .map(|r| {
            let days = r.req_int("traces_days")?;
            Ok((
                r.req_text("project")?,
                RetentionPolicy {
                    // Stored from a validated policy; a value out of range reads as
                    // the longest window, which removes the least.
                    traces_days: u32::try_from(days)
                        .unwrap_or(treeline_wire::retention::MAX_TRACES_DAYS),
                    metrics: if r.req_int("drop_runs")? != 0 {
                        MetricsRule::Drop
                    } else {
                        MetricsRule::Keep
                    },
                },
            ))
        })
        .collect()
}

/// Pushes the condition a trace of `project` past `cutoff` meets, open or not.
fn push_past<'a, DB: Dialect>(q: &mut Sql<'a, DB>, project: &'a str, cutoff: i64) {
    q.push(" WHERE project = ")
        .bind(project)
        .push(" AND updated_us < ")
        .bind(cutoff)
        .push(" AND run_id NOT IN (SELECT run_id FROM deleted_runs)");
}

/// What `policy` would remove from `project` at `now`, counted.
pub(super) async fn preview<DB: Dialect>(
    pool: &Pool<DB>,
    project: &str,
    policy: &RetentionPolicy,
    now: i64,
) -> StoreResult<RetentionPreview> {
    let cutoff = policy.cutoff_us(now);
    // CAST: PostgreSQL's SUM of a bigint is a numeric.
    let mut q = Sql::<DB>::new(
        "SELECT COALESCE(SUM(CASE WHEN status <> 'running' THEN 1 ELSE 0 END), 0) AS traces,
                CAST(COALESCE(SUM(CASE WHEN status <> 'running' THEN span_count ELSE 0 END), 0)
                     AS BIGINT) AS spans,
                COALESCE(SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END), 0) AS open_kept
           FROM traces",
    );
    push_past(&mut q, project, cutoff);
    let rows = DB::fetch_all(pool, q).await?;
    let mut out = RetentionPreview::default();
    if let Some(r) = rows.first() {
        out.traces = r.req_int("traces")?;
        out.spans = r.req_int("spans")?;
        out.open_kept = r.req_int("open_kept")?;
    }
    if policy.metrics == MetricsRule::Drop {
        let mut q = Sql::<DB>::new("SELECT COUNT(*) AS n FROM runs r WHERE r.project = ");
        q.bind(project)
            .push(" AND r.status <> 'running' AND r.updated_us < ")
            .bind(cutoff)
            .push(
                " AND NOT EXISTS (SELECT 1 FROM traces t WHERE t.run_id = r.run_id \
                 AND (t.status = 'running' OR t.updated_us >= ",
            )
            .bind(cutoff)
            .push("))");
        let rows = DB::fetch_all(pool, q).await?;
        out.runs = rows
            .first()
            .map(|r| r.req_int("n"))
            .transpose()?
            .unwrap_or(0);
    }
    Ok(out)
}

/// One bounded step of every project's policy at `now`: removes at most about
/// `limit` rows of one run, or deletes one run left empty (`metrics: drop`): a
/// finished one, as metrics do not move a run's `updated_us` and a run still
/// logging them must stay.
/// `None` when nothing is past any window.
pub(super) async fn step<DB: Dialect>(
    pool: &Pool<DB>,
    limit: usize,
    now: i64,
) -> StoreResult<Option<Expired>> {
    let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
    for (project, policy) in policies(pool).await? {
        let cutoff = policy.cutoff_us(now);
        let mut q = Sql::<DB>::new("SELECT run_id FROM traces");
        push_past(&mut q, &project, cutoff);
        q.push(" AND status <> 'running' ORDER BY updated_us LIMIT 1");
        let rows = DB::fetch_all(pool, q).await?;
        if let Some(run_id) = rows.first().map(|r| r.req_text("run_id")).transpose()? {
            let mut expired = expire_in_run(pool, &run_id, cutoff, limit).await?;
            expired.project = project;
            return Ok(Some(expired));
        }
        if policy.metrics == MetricsRule::Drop {
            let mut q = Sql::<DB>::new("SELECT run_id FROM runs WHERE project = ");
            q.bind(project.as_str())
                .push(" AND trace_count = 0 AND status <> 'running' AND updated_us < ")
                .bind(cutoff)
                .push(" ORDER BY updated_us LIMIT 1");
            let rows = DB::fetch_all(pool, q).await?;
            if let Some(run_id) = rows.first().map(|r| r.req_text("run_id")).transpose()? {
                run_deletion::delete_run(pool, &run_id, now).await?;
                return Ok(Some(Expired {
                    project,
                    run_id,
                    traces: 0,
                    spans: 0,
                    run_deleted: true,
                }));
            }
        }
    }
    Ok(None)
}

/// A trace past the window, as its counts know it.
struct Past {
    trace_id: String,
    spans: i64,
    activity: Activity,
    bytes: i64,
}

/// `DELETE` of the `span_texts` rows that the string attributes of spans `s`
/// make, up to the spans' condition and a closing `)`. A value that a later event
/// overwrote has no span left to find it from: its row stays until the run goes,
/// listing a trace that lists then find gone.
fn span_texts_delete<'a, DB: Dialect>() -> Sql<'a, DB> {
    Sql::new(format!(
        "DELETE FROM span_texts WHERE (run_id, code, value, trace_id) IN ({}",
        DB::SPAN_TEXT_ROWS
    ))
}

/// Removes the run's oldest closed traces past `cutoff`, about `limit` spans' worth.
async fn expire_in_run<DB: Dialect>(
    pool: &Pool<DB>,
    run_id: &str,
    cutoff: i64,
    limit: i64,
) -> StoreResult<Expired> {
    let mut tx = pool.begin().await?;
    // Ingest into the run holds this lock: the traces read here stay as read.
    DB::lock_run(&mut tx, run_id).await?;
    // The trace's part in the counts is read as ingest reads it, so the two agree.
    let mut q = Sql::<DB>::new(format!(
        "SELECT {} FROM traces t WHERE t.run_id = ",
        rows::TRACE_STATE_COLUMNS
    ));
    q.bind(run_id)
        .push(" AND t.updated_us < ")
        .bind(cutoff)
        .push(" AND t.status <> 'running' ORDER BY t.updated_us, t.trace_id LIMIT ")
        .bind(TRACES_PER_STEP);
    let mut past = Vec::new();
    let mut spans: i64 = 0;
    for r in DB::fetch_all_in(&mut tx, q).await? {
        let trace = rows::trace_state(&r)?;
        let one = Past {
            spans: trace.span_count.max(1),
            activity: trace.activity(),
            bytes: trace.bytes,
            trace_id: trace.trace_id,
        };
        if !past.is_empty() && spans.saturating_add(one.spans) > limit {
            break;
        }
        spans = spans.saturating_add(one.spans);
        past.push(one);
    }
    let mut expired = Expired {
        project: String::new(),
        run_id: run_id.to_string(),
        traces: 0,
        spans: 0,
        run_deleted: false,
    };
    if let [big] = past.as_slice() {
        if big.spans > limit {
            // Too large for one step: its annotations and spans go a batch at a
            // time first; the trace goes as a small one once they are gone. Until
            // then its `span_ranges` rows may outreach its spans: lists test them.
            let mut q = Sql::<DB>::new("");
            span_index::name_overwritten(&mut q, run_id, &big.trace_id);
            DB::execute(&mut *tx, q).await?;
            for table in ["annotations", "spans"] {
                let key = run_deletion::key_of(table);
                // The step's spans, in key order: their string attributes' rows
                // go first, found from the same spans.
                let batch = |q: &mut Sql<'_, DB>| {
                    q.push(format!(
                        "({key}) IN (SELECT {key} FROM {table} WHERE run_id = "
                    ))
                    .bind(run_id.to_string())
                    .push(" AND trace_id = ")
                    .bind(big.trace_id.clone())
                    .push(format!(" ORDER BY {key} LIMIT "))
                    .bind(limit)
                    .push(")");
                };
                if table == "spans" {
                    let mut q = span_texts_delete::<DB>();
                    batch(&mut q);
                    q.push(")");
                    DB::execute(&mut *tx, q).await?;
                }
                let mut q = Sql::<DB>::new(format!("DELETE FROM {table} WHERE "));
                batch(&mut q);
                let removed = DB::execute(&mut *tx, q).await?;
                if removed > 0 {
                    expired.spans = if table == "spans" { removed } else { 0 };
                    tx.commit().await?;
                    return Ok(expired);
                }
            }
        }
    }
    let traces = |q: &mut Sql<'_, DB>, alias: &str| {
        q.push(format!("{alias}run_id = "))
            .bind(run_id.to_string())
            .push(format!(" AND {alias}trace_id IN ("));
        for (i, p) in past.iter().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            q.bind(p.trace_id.clone());
        }
        q.push(")");
    };
    // Found from the spans, so before them.
    let mut q = span_texts_delete::<DB>();
    traces(&mut q, "s.");
    q.push(")");
    DB::execute(&mut *tx, q).await?;
    for table in TRACE_TABLES.iter().chain(["traces"].iter()) {
        let mut q = Sql::<DB>::new(format!("DELETE FROM {table} WHERE "));
        traces(&mut q, "");
        let removed = DB::execute(&mut *tx, q).await?;
        match *table {
            "spans" => expired.spans = removed,
            "traces" => expired.traces = removed,
            _ => {}
        }
    }
    let mut counts = Plan::default();
    for p in &past {
        counts.count(p.activity, -1);
        counts.run.bytes = counts.run.bytes.saturating_sub(p.bytes);
    }
    if !counts.steps.is_empty() {
        let mut q = Sql::<DB>::new("");
        statements::step_activity(&mut q, run_id, &counts.steps);
        DB::execute(&mut *tx, q).await?;
        let mut q = Sql::<DB>::new("");
        statements::drop_empty_steps(&mut q, run_id);
        DB::execute(&mut *tx, q).await?;
    }
    // The run's counts come down; its `updated_us` stays, as nothing was written.
    let r = counts.run;
    let mut q = Sql::<DB>::new("UPDATE runs SET trace_count = trace_count + ");
    q.bind(r.traces)
        .push(", errored_count = errored_count + ")
        .bind(r.errored)
        .push(", failed_count = failed_count + ")
        .bind(r.failed)
        .push(", unstepped_count = unstepped_count + ")
        .bind(r.unstepped)
        .push(", bytes = bytes + ")
        .bind(r.bytes)
        .push(" WHERE run_id = ")
        .bind(run_id);
    DB::execute(&mut *tx, q).await?;
    tx.commit().await?;
    Ok(expired)
}
