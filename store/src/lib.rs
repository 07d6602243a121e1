//! Treeline's storage and ingest, with no HTTP or UI in reach: the compiler keeps
//! the layers apart. It needs only the contract crate and sqlx.
//!
//! Storage, split by role: [`Reads`] (written once, over a [`dialect::Dialect`]),
//! [`Ingest`], [`Idempotency`] and [`Access`] (keys and sessions). Each database has its own migrations and its
//! own write path where behaviour truly differs (SQLite's group commit,
//! PostgreSQL's run lock); one conformance suite (`tests/it/conformance.rs`) runs
//! against both.

pub mod failure;
pub mod ingest;

mod access;
mod annotations;
mod attribute_codes;
mod body_text;
mod changes;
mod checkpoint;
mod children;
mod columns;
mod cursor;
mod dialect;
mod distribution;
mod filter_terms;
mod group;
mod group_lens;
mod merge;
mod metric_blocks;
mod metric_series;
mod metric_summaries;
mod migrations;
mod packed;
mod pipeline;
mod postgres;
mod postgres_group;
mod reader;
mod replica_health;
mod retention;
mod rows;
mod run_deletion;
mod run_list;
mod run_writes;
mod search;
pub mod sizes;
mod span_index;
mod span_ranges;
mod span_texts;
mod sqlite;
mod statements;
mod stats;
mod step_halves;
mod step_values;
mod text_matches;
mod trace_list;

use async_trait::async_trait;
use treeline_wire::annotations::{Annotation, Author, NoteWrite, Source};
use treeline_wire::retention::RetentionPolicy;
use treeline_wire::{
    BatchResponse, MetricPoint, RunFinish, RunUpsert, SpanEvent, SpanStatus, Warning,
};

pub use access::{Access, AccessStore, KeyRecord, SessionRecord};
pub use children::{BodyDifferences, ChildNode};
pub use cursor::Cursor;
pub use metric_series::SeriesWindow;
pub use postgres::PostgresStore;
pub use reader::{Reader, Reads, MAX_ANCESTORS};
pub use run_list::RunsAsked;
pub use sizes::DiskUsage;
pub use sqlite::SqliteStore;

/// What can go wrong in the store, by who can fix it: the caller (`RunNotFound`,
/// `ProjectConflict`, `BadCursor`), time (`Unavailable`: retry later), or us
/// (everything else). Sources are kept for the log.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run {0} not found")]
    RunNotFound(String),
    /// The run was deleted and its data is still being removed: its id can be
    /// written to again once that is done.
    #[error("run {0} was deleted and its data is still being removed; write again shortly")]
    RunPurging(String),
    #[error("run {run_id} belongs to project {existing}")]
    ProjectConflict { run_id: String, existing: String },
    #[error("invalid cursor")]
    BadCursor,
    /// A request the data refuses, in the contract's words: a string attribute
    /// asked for as a number, say.
    #[error("{0}")]
    Invalid(treeline_wire::Invalid),
    /// A page asked to be read around a span that is not among the children listed.
    #[error("span {span_id} is not among the children listed")]
    NotListed { span_id: String },
    /// What a write names is not there (`code` says what: `trace_not_found`…).
    #[error("{message}")]
    NotFound { code: &'static str, message: String },
    /// A failure that may pass: the database busy, a pool exhausted, a connection
    /// lost, a serialization failure. Nothing of the request was kept.
    #[error("the database is unavailable")]
    Unavailable(#[source] sqlx::Error),
    #[error("database error")]
    Database(#[source] sqlx::Error),
    #[error("migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data could not be read: {0}")]
    Corrupt(String),
    /// The transaction a batch shared with others failed; nothing of it was kept.
    #[error("the shared write transaction failed")]
    GroupFailed(#[source] std::sync::Arc<StoreError>),
    /// Too much is waiting for the writer; nothing of the request was kept.
    #[error("the server is busy: too many writes are waiting")]
    Overloaded,
    /// The data directory could not be made.
    #[error("cannot create the data directory {0}")]
    DataDir(String, #[source] std::io::Error),
    /// A read replica was given for a database that has none (SQLite).
    #[error(
        "--read-database-url needs a PostgreSQL --database-url (postgres://…): it names a \
         streaming replica of that database"
    )]
    ReplicaNeedsPostgres,
    /// The group writer ended without answering (it panicked, say).
    #[error("the writer stopped before answering")]
    WriterStopped,
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if is_transient(&e) {
            StoreError::Unavailable(e)
        } else {
            StoreError::Database(e)
        }
    }
}

impl StoreError {
    /// Whether the same request may succeed later, unchanged.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Unavailable(_) | StoreError::Overloaded | StoreError::RunPurging(_) => true,
            StoreError::GroupFailed(inner) => inner.is_transient(),
            _ => false,
        }
    }
}

/// Busy, locked, out of connections or cut off: worth a retry.
fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => {
            if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                // The primary result code: BUSY or LOCKED, whatever the extended one.
                let primary = db
                    .code()
                    .and_then(|c| c.parse::<i32>().ok())
                    .map(|c| c & 0xff);
                matches!(primary, Some(5 | 6))
            } else if let Some(e) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                // Serialization failure, deadlock, too many connections, the server
                // shutting down or not yet accepting connections.
                matches!(
                    e.code(),
                    "40001" | "40P01" | "53300" | "57P01" | "57P02" | "57P03"
                )
            } else {
                false
            }
        }
        _ => false,
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A response kept for an Idempotency-Key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub key: String,
    pub fingerprint: String,
    pub status: u16,
    pub response: String,
    /// The run whose write it answers: the run's deletion forgets it.
    pub run_id: Option<String>,
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
    /// The record that answers a retry of the request, a write to `run_id`.
    pub fn record(&self, run_id: &str, answer: &BatchResponse) -> StoreResult<IdempotencyRecord> {
        let response = serde_json::to_string(answer)
            .map_err(|e| StoreError::Corrupt(format!("answer not serialisable: {e}")))?;
        Ok(self.answered(run_id, response))
    }

    /// The record of a successful write to `run_id` answered with `response` (JSON
    /// text).
    pub fn answered(&self, run_id: &str, response: String) -> IdempotencyRecord {
        IdempotencyRecord {
            key: self.key.clone(),
            fingerprint: self.fingerprint.clone(),
            status: 200,
            response,
            run_id: Some(run_id.to_string()),
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

pub use treeline_wire::query::TraceSort;

/// A parsed trace-list request.
#[derive(Clone, Debug, Default)]
pub struct TraceQuery {
    pub project: Option<String>,
    pub run_id: Option<String>,
    pub statuses: Vec<SpanStatus>,
    /// Bits of the kinds asked for; 0 for any.
    pub kinds: i64,
    pub terms: Vec<String>,
    /// Words and phrases that one of a trace's bodies must hold.
    pub text: Option<treeline_wire::text::TextQuery>,
    /// All must hold.
    pub filters: Vec<treeline_wire::filter::TraceFilter>,
    pub since_us: Option<i64>,
    pub until_us: Option<i64>,
    pub min_step: Option<i64>,
    pub max_step: Option<i64>,
    pub sort: TraceSort,
    pub ascending: bool,
    pub limit: usize,
    pub cursor: Option<Cursor>,
}

/// Which of a parent's children one read of the span tree lists (`GET …/spans`).
#[derive(Clone, Copy, Debug)]
pub struct SpanLevel<'a> {
    /// The parent; `None` for the trace's top level (roots and orphans).
    pub parent: Option<&'a str>,
    /// Only the children whose name contains this, ASCII case ignored.
    pub name: Option<&'a str>,
    pub start: LevelStart<'a>,
    pub limit: usize,
}

impl<'a> SpanLevel<'a> {
    /// The page of `parent`'s children after `cursor`.
    pub fn after(parent: Option<&'a str>, limit: usize, cursor: Option<&'a Cursor>) -> Self {
        SpanLevel {
            parent,
            name: None,
            start: LevelStart::After(cursor),
            limit,
        }
    }
}

/// Where a page of children starts.
#[derive(Clone, Copy, Debug)]
pub enum LevelStart<'a> {
    /// Past the cursor's child, or at the first.
    After(Option<&'a Cursor>),
    /// At the child in this place of the listing, counted from 0.
    At(i64),
    /// Up to half a page before this child, so that it sits mid-page.
    Around(&'a str),
}

/// One step of removing a deleted run's data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Purged {
    pub run_id: String,
    /// The table rows were removed from (`deleted_runs` for the last step).
    pub table: &'static str,
    pub rows: u64,
    /// The run's data is all gone, and its id may be written to again.
    pub done: bool,
}

/// One step of retention.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expired {
    pub project: String,
    pub run_id: String,
    /// Traces removed (0 while a large trace's spans go first).
    pub traces: u64,
    pub spans: u64,
    /// The run was left without traces and deleted (`metrics: drop`).
    pub run_deleted: bool,
}

/// The write side. Every write is acknowledged only once it is durable, and every
/// write can be repeated without changing what is stored.
#[async_trait]
pub trait Ingest: Send + Sync {
    /// Creates the run (true) or updates its name, config and start (false).
    /// `ProjectConflict` when the run exists under another project.
    async fn upsert_run(&self, run_id: &str, run: &RunUpsert, now: i64) -> StoreResult<bool>;
    /// Creates the run in `run.project` unless it exists, and answers the project it
    /// belongs to, in one transaction: no other request can create it in between, and
    /// a run's project never changes, so the answer holds for every later write.
    async fn ensure_run(&self, run_id: &str, run: &RunUpsert, now: i64) -> StoreResult<String>;
    /// Sets the run's status and turns its running spans into interrupted ones.
    async fn finish_run(&self, run_id: &str, finish: &RunFinish, now: i64) -> StoreResult<()>;
    /// Stores metric points; a repeated (key, step) keeps the last value.
    async fn write_metrics(&self, run_id: &str, points: &[MetricPoint]) -> StoreResult<()>;
    /// Applies a batch in one transaction, with its receipt if any, and returns the
    /// answer. Returns only once the transaction is durable. A receipt whose key
    /// already has a record is answered with that record, in the same transaction,
    /// so two requests racing with one key write once.
    async fn write_batch(&self, run_id: &str, batch: EventBatch, now: i64) -> StoreResult<Written>;
    /// Creates or updates `author`'s annotation `note.name` on the trace or span
    /// `note` names; answers it and whether it is new. `NotFound` when the target is
    /// not there; `Invalid` when the name has another type in the run or the target
    /// has its most annotations.
    async fn annotate(
        &self,
        run_id: &str,
        trace_id: &str,
        note: &NoteWrite,
        author: &Author,
        source: Source,
        now: i64,
    ) -> StoreResult<(Annotation, bool)>;
    /// Deletes `author`'s annotation `name` on the trace or span; answers whether
    /// there was one. `NotFound` when the target is not there.
    async fn unannotate(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: Option<&str>,
        name: &str,
        author: &str,
    ) -> StoreResult<bool>;

    /// Deletes the run: it leaves every read at once, its id is refused to writes
    /// (`RunPurging`) until [`Ingest::purge_step`] has removed its data, and the
    /// answers kept for its Idempotency-Keys are forgotten. Answers its project, or
    /// `None` when there is no such run.
    async fn delete_run(&self, run_id: &str, now: i64) -> StoreResult<Option<String>>;
    /// Removes at most `limit` rows of a deleted run's data, in a transaction of
    /// its own; `None` when no run is waiting. Resumes after a crash.
    async fn purge_step(&self, limit: usize) -> StoreResult<Option<Purged>>;
    /// Gives back to the file system at most `pages` of the space removed rows left
    /// free: on SQLite, a database made with incremental auto-vacuum (every one since
    /// migration 16) shrinks; elsewhere, and on older SQLite files, the space is reused
    /// by later writes and this does nothing. Answers the bytes given back.
    async fn reclaim_space(&self, pages: u32) -> StoreResult<u64>;
    /// Sets (`Some`) or clears the project's retention policy.
    async fn set_retention(
        &self,
        project: &str,
        policy: Option<&RetentionPolicy>,
        now: i64,
    ) -> StoreResult<()>;
    /// One bounded step of every project's retention at `now`: about `limit` rows
    /// of one run's closed traces past the window, each trace removed whole in one
    /// transaction with the run's counts, or one run left empty deleted (as
    /// [`Ingest::delete_run`] does) when its project drops such runs. `None` when
    /// nothing is past any window. Open traces are never removed.
    async fn retention_step(&self, limit: usize, now: i64) -> StoreResult<Option<Expired>>;
    /// Indexes the words of a batch of spans stored before body search existed, in
    /// key order, resumed after a restart: the spans read, or `None` when none are
    /// left.
    async fn text_backfill_step(&self) -> StoreResult<Option<u64>>;

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
}

/// The answers kept for Idempotency-Keys (those of event batches are kept by
/// `write_batch` itself, in the batch's transaction).
#[async_trait]
pub trait Idempotency: Send + Sync {
    async fn idempotency_get(&self, key: &str) -> StoreResult<Option<IdempotencyRecord>>;
    /// Keeps `record` unless its key already has one.
    async fn idempotency_put(&self, record: &IdempotencyRecord, now: i64) -> StoreResult<()>;
    /// Forgets keys older than `before_us`; answers how many.
    async fn idempotency_prune(&self, before_us: i64) -> StoreResult<u64>;
}

/// A whole backend: its writes, its idempotency records, its reader, and its keys
/// and sessions.
pub trait Store: Ingest + Idempotency + 'static {
    /// Reads of the primary: what a write path or an access check reads, which must
    /// see every acknowledged write.
    fn reads(&self) -> &dyn Reads;
    /// Reads for the query routes: a read replica's when the server was given one
    /// (`--read-database-url`), which may lag the primary; else [`Store::reads`].
    fn query_reads(&self) -> &dyn Reads {
        self.reads()
    }
    fn access(&self) -> &dyn Access;
}

/// The SQLite database's file name in a data directory.
pub const SQLITE_FILE: &str = "treeline.db";

/// Opens the store `database_url` names, or else the SQLite file in `data_dir`
/// (created, with the directory, if need be); answers its URL too. Query routes
/// read `read_url`, a PostgreSQL replica of `database_url`, when one is given.
pub async fn open_in(
    data_dir: &std::path::Path,
    database_url: Option<&str>,
    read_url: Option<&str>,
) -> StoreResult<(String, std::sync::Arc<dyn Store>)> {
    let url = match database_url {
        Some(url) => url.to_string(),
        None => {
            std::fs::create_dir_all(data_dir)
                .map_err(|e| StoreError::DataDir(data_dir.display().to_string(), e))?;
            format!("sqlite:{}", data_dir.join(SQLITE_FILE).to_string_lossy())
        }
    };
    let store = match read_url {
        None => open(&url).await?,
        Some(_) if !is_postgres(&url) => return Err(StoreError::ReplicaNeedsPostgres),
        Some(read_url) => {
            std::sync::Arc::new(PostgresStore::connect_with_replica(&url, Some(read_url)).await?)
        }
    };
    Ok((url, store))
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres:") || url.starts_with("postgresql:")
}

/// Opens the store a `--database-url` names: `sqlite:PATH` or `postgres://…`.
pub async fn open(url: &str) -> StoreResult<std::sync::Arc<dyn Store>> {
    if is_postgres(url) {
        Ok(std::sync::Arc::new(PostgresStore::connect(url).await?))
    } else {
        Ok(std::sync::Arc::new(SqliteStore::open(url).await?))
    }
}
