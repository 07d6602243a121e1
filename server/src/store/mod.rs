//! Storage: one trait, one backend per database (each with its own migrations), and
//! one conformance suite (`tests/conformance.rs`) run against both.

mod cursor;
mod group;
mod merge;
mod postgres;
mod rows;
mod sqlite;

use async_trait::async_trait;
use treeline_app::wire::{
    BatchResponse, MetricPoint, ProjectList, RunDetail, RunFinish, RunList, RunUpsert, SpanDetail,
    SpanEvent, SpanPage, SpanStatus, StepsResponse, TraceList, TraceSummary, Warning,
};

pub use cursor::Cursor;
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run {0} not found")]
    RunNotFound(String),
    #[error("run {run_id} belongs to project {existing}")]
    ProjectConflict { run_id: String, existing: String },
    #[error("invalid cursor")]
    BadCursor,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data could not be read: {0}")]
    Corrupt(String),
    /// The transaction a batch shared with others failed; nothing of it was kept.
    #[error("the shared write transaction failed: {0}")]
    GroupFailed(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A response kept for an Idempotency-Key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub key: String,
    pub fingerprint: String,
    pub status: u16,
    pub response: String,
}

/// An Idempotency-Key and request fingerprint whose answer is stored in the same
/// transaction as the write it answers: a retry sees the answer exactly when the
/// write is durable, and a write costs one commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    pub key: String,
    pub fingerprint: String,
}

impl Receipt {
    /// The record that answers a retry of the request.
    pub fn record(&self, answer: &BatchResponse) -> StoreResult<IdempotencyRecord> {
        let response =
            serde_json::to_string(answer).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(self.answered(response))
    }

    /// The record of a successful request answered with `response` (JSON text).
    pub fn answered(&self, response: String) -> IdempotencyRecord {
        IdempotencyRecord {
            key: self.key.clone(),
            fingerprint: self.fingerprint.clone(),
            status: 200,
            response,
        }
    }
}

/// The valid events of a request (with their request indexes), what parsing already
/// had to say about the request, and the receipt to keep for its answer.
#[derive(Debug, Default)]
pub struct EventBatch {
    pub events: Vec<(usize, SpanEvent)>,
    pub parsed: BatchResponse,
    pub receipt: Option<Receipt>,
}

/// What `write_batch` did with a batch.
#[derive(Debug)]
pub enum Written {
    /// The batch was stored, and this is its answer.
    Stored(BatchResponse),
    /// The batch's Idempotency-Key already had an answer (from an earlier request,
    /// or one that shared the transaction), so nothing was written.
    Replay(IdempotencyRecord),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TraceSort {
    #[default]
    Updated,
    Duration,
    Spans,
    Tokens,
    Errors,
}

/// A parsed trace-list request.
#[derive(Clone, Debug, Default)]
pub struct TraceQuery {
    pub project: Option<String>,
    pub run_id: Option<String>,
    pub statuses: Vec<SpanStatus>,
    /// Bits of the kinds asked for; 0 for any.
    pub kinds: i64,
    pub terms: Vec<String>,
    pub since_us: Option<i64>,
    pub until_us: Option<i64>,
    pub min_step: Option<i64>,
    pub max_step: Option<i64>,
    pub sort: TraceSort,
    pub ascending: bool,
    pub limit: usize,
    pub cursor: Option<Cursor>,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates the run (true) or updates its name, config and start (false).
    async fn upsert_run(&self, run_id: &str, run: &RunUpsert, now: i64) -> StoreResult<bool>;
    /// Sets the run's status and turns its running spans into interrupted ones.
    async fn finish_run(&self, run_id: &str, finish: &RunFinish, now: i64) -> StoreResult<()>;
    async fn write_metrics(&self, run_id: &str, points: &[MetricPoint]) -> StoreResult<()>;
    /// Applies a batch in one transaction, with its receipt if any, and returns the
    /// answer. Returns only once the transaction is durable. A receipt whose key
    /// already has a record is answered with that record, in the same transaction,
    /// so two requests racing with one key write once.
    async fn write_batch(&self, run_id: &str, batch: EventBatch, now: i64) -> StoreResult<Written>;

    /// `write_batch` without a receipt: the warnings of storing `events`.
    async fn write_events(
        &self,
        run_id: &str,
        events: Vec<(usize, SpanEvent)>,
        now: i64,
    ) -> StoreResult<Vec<Warning>> {
        let batch = EventBatch {
            events,
            ..Default::default()
        };
        match self.write_batch(run_id, batch, now).await? {
            Written::Stored(answer) => Ok(answer.warnings),
            Written::Replay(_) => Ok(Vec::new()), // no receipt, so never
        }
    }

    async fn idempotency_get(&self, key: &str) -> StoreResult<Option<IdempotencyRecord>>;
    async fn idempotency_put(&self, record: &IdempotencyRecord, now: i64) -> StoreResult<()>;
    /// Forgets keys older than `before_us`.
    async fn idempotency_prune(&self, before_us: i64) -> StoreResult<u64>;

    async fn list_projects(&self) -> StoreResult<ProjectList>;
    async fn list_runs(
        &self,
        project: Option<&str>,
        limit: usize,
        cursor: Option<&Cursor>,
    ) -> StoreResult<RunList>;
    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunDetail>>;
    async fn metric_series(&self, run_id: &str, key: &str) -> StoreResult<Vec<(i64, f64)>>;
    async fn list_traces(&self, query: &TraceQuery) -> StoreResult<TraceList>;
    async fn get_trace(&self, run_id: &str, trace_id: &str) -> StoreResult<Option<TraceSummary>>;
    /// Direct children of `parent` (or the roots and orphans), in start order.
    async fn list_spans(
        &self,
        run_id: &str,
        trace_id: &str,
        parent: Option<&str>,
        limit: usize,
        cursor: Option<&Cursor>,
    ) -> StoreResult<SpanPage>;
    /// Whether the span has arrived (its open, not only a close or a child).
    async fn span_exists(&self, run_id: &str, trace_id: &str, span_id: &str) -> StoreResult<bool>;
    async fn get_span(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: &str,
    ) -> StoreResult<Option<SpanDetail>>;
    async fn steps(
        &self,
        run_id: &str,
        min_step: Option<i64>,
        max_step: Option<i64>,
    ) -> StoreResult<StepsResponse>;
}

/// Opens the store a `--database-url` names: `sqlite:PATH` or `postgres://…`.
pub async fn open(url: &str) -> StoreResult<std::sync::Arc<dyn Store>> {
    if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        Ok(std::sync::Arc::new(PostgresStore::connect(url).await?))
    } else {
        Ok(std::sync::Arc::new(SqliteStore::open(url).await?))
    }
}
