//! The scale-out backend: PostgreSQL, shared by any number of stateless Treeline
//! servers. Writes to one run are serialized with a transaction-scoped advisory lock,
//! so the read-modify-write of counters never loses an update; event batches are
//! written in groups (`postgres_group`).

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres, Transaction};
use treeline_wire::annotations::{Annotation, Author, NoteWrite, Source};
use treeline_wire::retention::RetentionPolicy;
use treeline_wire::{MetricPoint, RunFinish, RunUpsert};

use super::access::{Access, AccessStore};
use super::annotations;
use super::attribute_codes::BatchCodes;
use super::body_text;
use super::dialect::Sql;
use super::pipeline;
use super::postgres_group::Groups;
use super::reader::{Reader, Reads};
use super::replica_health::ReplicaHealth;
use super::rows;
use super::run_deletion;
use super::{
    retention, run_writes, statements, EventBatch, Expired, Idempotency, IdempotencyRecord, Ingest,
    Purged, Store, StoreError, StoreResult, Written,
};
use crate::ingest::{Loader, Plan, SpanState, TraceState};

/// Rows per multi-row statement: a group's spans go in a few statements of bounded
/// size (and under PostgreSQL's 65,535 bound parameters, should one bind a value a
/// placeholder).
const SPAN_CHUNK: usize = 1_000;

/// Connections for writes. Writers of one run wait on its lock holding a
/// connection, so reads get a pool of their own and are never starved by them.
const WRITE_CONNECTIONS: u32 = 16;
/// The query routes' reads.
const READ_CONNECTIONS: u32 = 8;
/// The other reads: access checks, and the lookups of the write paths and of the
/// routes' prologues.
const WRITE_PATH_READ_CONNECTIONS: u32 = 8;

pub struct PostgresStore {
    pool: PgPool,
    reader: Reader<Postgres>,
    /// The query routes' reader: a replica's, or else `reader`'s pool again.
    query_reader: Reader<Postgres>,
    /// Whether the replica answers, when there is one: while it does not, the
    /// query routes read `reader`.
    replica: Option<ReplicaHealth>,
    access: AccessStore<Postgres>,
    groups: Groups,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://…`) and runs the migrations.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        Self::connect_with_replica(url, None).await
    }

    /// [`PostgresStore::connect`], with the query routes reading `read_url`, a
    /// streaming replica of `url`, when given. Writes, access checks and the reads
    /// of the write paths stay on the primary, which has every acknowledged write.
    pub async fn connect_with_replica(url: &str, read_url: Option<&str>) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)?;
        let pool = PgPoolOptions::new()
            .max_connections(WRITE_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await?;
        super::migrations::postgres().await?.run(&pool).await?;
        let reads = read_pool(options.clone(), WRITE_PATH_READ_CONNECTIONS).await?;
        // The query routes' reads: a replica's pool, or one of the primary's own, whose
        // connections in use tell the write groups that a dashboard waits
        // (`postgres_group::Yield`).
        let (query_reader, replica, queries) = match read_url {
            Some(read_url) => {
                let replica =
                    read_pool(PgConnectOptions::from_str(read_url)?, READ_CONNECTIONS).await?;
                let health = ReplicaHealth::watch(replica.clone());
                (Reader::replica(replica), Some(health), None)
            }
            None => {
                let queries = read_pool(options, READ_CONNECTIONS).await?;
                (Reader::new(queries.clone()), None, Some(queries))
            }
        };
        Ok(PostgresStore {
            access: AccessStore::new(reads.clone(), pool.clone()),
            pool,
            reader: Reader::new(reads),
            query_reader,
            replica,
            groups: Groups::new(queries),
        })
    }

    /// Creates the database `name` on the server of `url`; returns its URL. For tests
    /// and benchmarks that want a fresh database.
    pub async fn create_database(url: &str, name: &str) -> StoreResult<String> {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        sqlx::query(&format!("CREATE DATABASE \"{}\"", name.replace('"', "")))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        Ok(Self::database_url(url, name))
    }

    /// `url` with its database replaced by `name`, its options kept: the same
    /// database on another server of `url` (a replica's URL, say).
    pub fn database_url(url: &str, name: &str) -> String {
        let (head, query) = match url.split_once('?') {
            Some((h, q)) => (h, format!("?{q}")),
            None => (url, String::new()),
        };
        let scheme_end = head.find("://").map_or(0, |i| i + 3);
        let base = match head[scheme_end..].find('/') {
            Some(i) => &head[..scheme_end + i],
            None => head,
        };
        format!("{base}/{name}{query}")
    }
}

/// A pool for reads. Custom plans for every read: after five runs of a prepared
/// statement PostgreSQL may settle on a generic plan, blind to the bound run and
/// filter, that probed the spans of all 100,000 traces of a run (535 ms, not 81).
/// (The write pool keeps generic plans: a batch's upserts have one plan to choose,
/// and planning them afresh cost 2 ms a batch.) No JIT: a read whose estimate
/// passes `jit_above_cost` spent 15–17 ms compiling to save less. On `bench
/// rollouts`, a span string filter's first page took 46 / 50–51 ms p50 / p95 in a
/// run and 48–50 / 52–53 across the project with it, 30 / 32–40 and 22–24 / 28–29
/// without; the other cases stayed within their spread.
async fn read_pool(options: PgConnectOptions, connections: u32) -> StoreResult<PgPool> {
    Ok(PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options.options([("plan_cache_mode", "force_custom_plan"), ("jit", "off")]))
        .await?)
}

pub(super) struct PgLoader<'a, 't> {
    pub tx: &'a mut Transaction<'t, Postgres>,
    pub run_id: &'a str,
}

impl Loader for PgLoader<'_, '_> {
    type Error = StoreError;

    async fn load_spans(&mut self, keys: &[(String, String)]) -> StoreResult<Vec<SpanState>> {
        let (traces, spans): (Vec<&str>, Vec<&str>) =
            keys.iter().map(|(t, s)| (t.as_str(), s.as_str())).unzip();
        // A probe per key (LATERAL … LIMIT 1 keeps the keys the outer loop). As a
        // plain join, stale statistics chose a scan of the run's every span: 208 ms
        // a batch at 100,000 spans, growing with the run. Planned afresh each time
        // (not a prepared statement), as the trace probe below says why.
        let rows = sqlx::query(&format!(
            "SELECT {} FROM UNNEST($2::text[], $3::text[]) AS k(trace_id, span_id)
               CROSS JOIN LATERAL (SELECT * FROM spans s WHERE s.run_id = $1
                 AND s.trace_id = k.trace_id AND s.span_id = k.span_id LIMIT 1) s",
            rows::SPAN_STATE_COLUMNS
        ))
        .bind(self.run_id)
        .bind(traces)
        .bind(spans)
        .persistent(false)
        .fetch_all(&mut **self.tx)
        .await?;
        rows.iter().map(rows::span_state).collect()
    }

    async fn load_traces(&mut self, trace_ids: &[String]) -> StoreResult<Vec<TraceState>> {
        // A probe per id, as for spans: `trace_id = ANY($2)` was read as a filter
        // over the run's every trace. Planned afresh each time: a prepared plan made
        // while the run was empty walked the run's step index rather than the primary
        // key, 0.6 ms a trace at 8,000 traces and growing with the run.
        let rows = sqlx::query(&format!(
            "SELECT {} FROM UNNEST($2::text[]) AS k(trace_id)
               CROSS JOIN LATERAL (SELECT * FROM traces t WHERE t.run_id = $1
                 AND t.trace_id = k.trace_id LIMIT 1) t",
            rows::TRACE_STATE_COLUMNS
        ))
        .bind(self.run_id)
        .bind(trace_ids)
        .persistent(false)
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
            "SELECT n.name FROM spans s CROSS JOIN LATERAL jsonb_object_keys(s.attributes::jsonb) AS a(code)
               JOIN attribute_names n ON n.code = a.code::bigint
              WHERE s.run_id = $1 AND s.trace_id = $2 AND s.span_id = $3",
        )
        .bind(self.run_id)
        .bind(trace_id)
        .bind(span_id)
        .fetch_all(&mut **self.tx)
        .await?)
    }
}

/// Runs one statement that `push` writes.
pub(super) async fn run<'a>(
    tx: &mut Transaction<'_, Postgres>,
    push: impl FnOnce(&mut Sql<'a, Postgres>),
) -> StoreResult<()> {
    let mut q = Sql::new("");
    push(&mut q);
    q.query()?.execute(&mut **tx).await?;
    Ok(())
}

/// A plan's writes, one statement at a time (PostgreSQL prepares one statement per
/// execution).
pub(super) async fn write_plan(
    tx: &mut Transaction<'_, Postgres>,
    run_id: &str,
    project: &str,
    plan: &Plan,
    codes: &BatchCodes,
    now: i64,
) -> StoreResult<()> {
    let derived = pipeline::Derived::default();
    let statements =
        pipeline::span_statements::<Postgres>(run_id, project, plan, codes, SPAN_CHUNK, &derived);
    pipeline::execute_each(&mut **tx, statements).await?;
    for chunk in plan.traces.chunks(SPAN_CHUNK) {
        run(tx, |q| statements::trace_upsert(q, run_id, project, chunk)).await?;
    }
    for chunk in statements::trace_names(&plan.traces).chunks(statements::NUMBER_CHUNK) {
        run(tx, |q| statements::trace_names_insert(q, project, chunk)).await?;
    }
    let values = statements::trace_values(&plan.traces);
    for chunk in values.numbers.chunks(statements::NUMBER_CHUNK) {
        run(tx, |q| {
            statements::trace_numbers_upsert(q, run_id, project, chunk)
        })
        .await?;
    }
    for chunk in values.texts.chunks(statements::NUMBER_CHUNK) {
        run(tx, |q| statements::trace_texts_upsert(q, run_id, chunk)).await?;
    }
    for (table, keys) in [
        ("trace_numbers", &values.not_numbers),
        ("trace_texts", &values.not_texts),
    ] {
        for chunk in keys.chunks(statements::NUMBER_CHUNK) {
            run(tx, |q| {
                statements::trace_values_delete(q, table, run_id, chunk)
            })
            .await?;
        }
    }
    // Every orphan hangs under its parent before any step descends, so a step
    // reaches a whole subtree that arrived in pieces (found by the order test).
    for a in &plan.adopt {
        run(tx, |q| statements::adopt(q, run_id, a)).await?;
    }
    for a in &plan.adopt {
        if let Some(step) = a.step {
            run(tx, |q| {
                statements::step_descent(q, run_id, &a.trace_id, &a.parent, step)
            })
            .await?;
        }
    }
    if !plan.steps.is_empty() {
        run(tx, |q| statements::step_activity(q, run_id, &plan.steps)).await?;
        if plan.steps.values().any(|d| d.traces < 0) {
            run(tx, |q| statements::drop_empty_steps(q, run_id)).await?;
        }
    }
    run(tx, |q| statements::run_counts(q, run_id, plan.run, now)).await
}

#[async_trait]
impl Ingest for PostgresStore {
    async fn upsert_run(&self, run_id: &str, run: &RunUpsert, now: i64) -> StoreResult<bool> {
        run_writes::upsert_run(&self.pool, run_id, run, now).await
    }

    async fn ensure_run(&self, run_id: &str, run: &RunUpsert, now: i64) -> StoreResult<String> {
        run_writes::ensure_run(&self.pool, run_id, run, now).await
    }

    async fn finish_run(&self, run_id: &str, finish: &RunFinish, now: i64) -> StoreResult<()> {
        run_writes::finish_run(&self.pool, run_id, finish, now).await
    }

    async fn write_metrics(&self, run_id: &str, points: &[MetricPoint]) -> StoreResult<()> {
        run_writes::write_metrics(&self.pool, run_id, points).await
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
        annotations::annotate(&self.pool, run_id, trace_id, note, author, source, now).await
    }

    async fn unannotate(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: Option<&str>,
        name: &str,
        author: &str,
    ) -> StoreResult<bool> {
        annotations::unannotate(&self.pool, run_id, trace_id, span_id, name, author).await
    }

    async fn delete_run(&self, run_id: &str, now: i64) -> StoreResult<Option<String>> {
        run_deletion::delete_run(&self.pool, run_id, now).await
    }

    async fn purge_step(&self, limit: usize) -> StoreResult<Option<Purged>> {
        run_deletion::purge_step(&self.pool, limit).await
    }

    async fn set_retention(
        &self,
        project: &str,
        policy: Option<&RetentionPolicy>,
        now: i64,
    ) -> StoreResult<()> {
        retention::set_policy(&self.pool, project, policy, now).await
    }

    async fn retention_step(&self, limit: usize, now: i64) -> StoreResult<Option<Expired>> {
        retention::step(&self.pool, limit, now).await
    }

    async fn text_backfill_step(&self) -> StoreResult<Option<u64>> {
        body_text::backfill_step(&self.pool).await
    }

    // Autovacuum marks the space for reuse; PostgreSQL gives none back by itself.
    async fn reclaim_space(&self, _pages: u32) -> StoreResult<u64> {
        Ok(0)
    }

    async fn write_batch(&self, run_id: &str, batch: EventBatch, now: i64) -> StoreResult<Written> {
        self.groups.write(&self.pool, run_id, batch, now).await
    }
}

#[async_trait]
impl Idempotency for PostgresStore {
    async fn idempotency_get(&self, key: &str) -> StoreResult<Option<IdempotencyRecord>> {
        let mut conn = self.pool.acquire().await?;
        run_writes::idempotency_record::<Postgres>(&mut conn, key).await
    }

    async fn idempotency_put(&self, record: &IdempotencyRecord, now: i64) -> StoreResult<()> {
        run_writes::put_idempotency(&self.pool, record, now).await
    }

    async fn idempotency_prune(&self, before_us: i64) -> StoreResult<u64> {
        run_writes::prune_idempotency(&self.pool, before_us).await
    }
}

impl Store for PostgresStore {
    fn reads(&self) -> &dyn Reads {
        &self.reader
    }

    fn query_reads(&self) -> &dyn Reads {
        match &self.replica {
            Some(health) if !health.is_up() => &self.reader,
            _ => &self.query_reader,
        }
    }

    fn access(&self) -> &dyn Access {
        &self.access
    }
}
