//! The read side, written once for both databases over [`Dialect`].

use std::collections::HashMap;

use async_trait::async_trait;
use sqlx::Pool;
use treeline_wire::{
    MetricSeries, ProjectList, ProjectSummary, RunDetail, RunList, SpanDetail, SpanPage,
    StepActivity, StepTotals, StepsResponse, TraceList, TraceSummary, STEP_LIMIT,
};

use treeline_wire::annotations::AnnotationList;
use treeline_wire::changes::{Changes, ChangesQuery};
use treeline_wire::groups::{Groups, GroupsQuery};
use treeline_wire::retention::{RetentionPolicy, RetentionPreview};
use treeline_wire::run_list::RunFields;
use treeline_wire::stats::{Stats, StatsQuery};

use treeline_wire::filter::{
    AttributeKey, AttributeKeys, ValueCount, MAX_ATTRIBUTE_KEYS, MAX_LISTED_VALUE_CHARS, TOP_VALUES,
};

use super::children::{self, BodyDifferences, ChildNode};
use super::cursor::page_cursor;
use super::dialect::{Dialect, Sql};
use super::metric_series::SeriesWindow;
use super::rows::{self, DbRow, SPAN_NODE_COLUMNS, TRACE_COLUMNS};
use super::run_list::RunsAsked;
use super::sizes::DiskUsage;
use super::{Cursor, LevelStart, SpanLevel, StoreError, StoreResult, TraceQuery};

/// How deep a deep link's ancestor walk goes before it gives up.
pub const MAX_ANCESTORS: i64 = 100_000;

/// The spans whose attributes a run's span keys are read from: a sample, the run's
/// first spans in key order, so the answer costs the same in any run.
const SPAN_KEY_SAMPLE: i64 = 2_000;

/// What the dashboard and the query API read. Every method sees committed data
/// only, and none writes.
#[async_trait]
pub trait Reads: Send + Sync {
    /// How far behind its primary this reader's database is, in milliseconds;
    /// `None` for a reader of the primary itself.
    async fn replica_lag_ms(&self) -> StoreResult<Option<i64>>;
    /// Every project with its run and trace counts, most recently updated first.
    async fn list_projects(&self) -> StoreResult<ProjectList>;
    /// What `policy` would remove from `project` at `now`, counted: closed traces
    /// past its window and their spans, the open ones it keeps, and (when it drops
    /// runs) the runs that would go whole.
    async fn retention_preview(
        &self,
        project: &str,
        policy: &RetentionPolicy,
        now: i64,
    ) -> StoreResult<RetentionPreview>;
    /// Runs (of `project`, or all; whose name or id contains `search`, if given),
    /// each with the summary columns asked for: newest start first, paged by a
    /// keyset cursor, or sorted by a column (runs without its value last), paged by
    /// position. A cursor of the other kind is `BadCursor`.
    async fn list_runs(&self, asked: RunsAsked<'_>) -> StoreResult<RunList>;
    /// The database's space, every project's estimated size and the `limit`
    /// largest runs (of `project`, if given); see [`crate::sizes`].
    async fn disk_usage(&self, project: Option<&str>, limit: usize) -> StoreResult<DiskUsage>;
    /// Each table's and index's bytes, largest first: what a row of each costs.
    /// On SQLite this reads every page of the file.
    async fn table_sizes(&self) -> StoreResult<Vec<(String, i64)>>;
    /// The metric keys of the runs (of `project`, or all) and the config paths of
    /// the newest of them, each in name order and capped: what a runs list can
    /// show as columns.
    async fn run_fields(&self, project: Option<&str>) -> StoreResult<RunFields>;
    /// The run with its config and metric keys; `None` when there is no such run.
    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunDetail>>;
    /// The run's project; `None` when there is no such run.
    async fn run_project(&self, run_id: &str) -> StoreResult<Option<String>>;
    /// The earliest run of `project` named `name` whose id starts with `id_prefix`:
    /// where a daily OTLP run went when its own id was taken.
    async fn find_named_run(
        &self,
        project: &str,
        name: &str,
        id_prefix: &str,
    ) -> StoreResult<Option<String>>;
    /// One metric of a run in `window`'s steps, by step: every point (with its time)
    /// when at most `window.max_points` are stored there, else each of about
    /// `max_points / 2` equal step buckets as its smallest and largest value. No
    /// such run or key reads as an empty series.
    async fn metric_series(
        &self,
        run_id: &str,
        key: &str,
        window: SeriesWindow,
    ) -> StoreResult<MetricSeries>;
    /// One page of trace summaries matching `query`, in its order, with the cursor
    /// of the next page.
    async fn list_traces(&self, query: &TraceQuery) -> StoreResult<TraceList>;
    async fn get_trace(&self, run_id: &str, trace_id: &str) -> StoreResult<Option<TraceSummary>>;
    /// One page of a level of the tree in sibling order (ordinal, start, id):
    /// `level.parent`'s direct children, or the roots and orphans, only those whose
    /// name contains `level.name` if given, from `level.start`. A page read at a
    /// place or around a child says where it starts (`from`). `NotListed` when the
    /// child to read around is not among those listed.
    async fn list_spans(
        &self,
        run_id: &str,
        trace_id: &str,
        level: &SpanLevel<'_>,
    ) -> StoreResult<SpanPage>;
    /// Whether the span has arrived (its open, not only a close or a child).
    async fn span_exists(&self, run_id: &str, trace_id: &str, span_id: &str) -> StoreResult<bool>;
    /// The span with its bodies and the ids of its ancestors, root first.
    async fn get_span(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: &str,
    ) -> StoreResult<Option<SpanDetail>>;
    /// One page of a trace's opened spans with their bodies, in start order (start
    /// time, then id), for export; the cursor of the next page if more follow.
    async fn export_spans(
        &self,
        run_id: &str,
        trace_id: &str,
        limit: usize,
        cursor: Option<&Cursor>,
    ) -> StoreResult<(Vec<SpanDetail>, Option<String>)>;
    /// Up to `limit` direct children of `parent` with their attributes, in sibling
    /// order (ordinal, start, id): one side of an alignment.
    async fn children_nodes(
        &self,
        run_id: &str,
        trace_id: &str,
        parent: &str,
        limit: usize,
    ) -> StoreResult<Vec<ChildNode>>;
    /// For each pair `(a_span, b_span)` (A's in `a_trace`, B's in `b_trace`) whose
    /// stored bodies are not the same text: its index and which of input, output and
    /// error differ. Pairs whose spans are missing are left out.
    async fn body_differences(
        &self,
        run_id: &str,
        a_trace: &str,
        b_trace: &str,
        pairs: &[(String, String)],
    ) -> StoreResult<Vec<BodyDifferences>>;
    /// Up to `limit` traces of the run whose rollout id is `rollout_id`, by step
    /// (unstepped last), then start.
    async fn rollout_traces(
        &self,
        run_id: &str,
        rollout_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<TraceSummary>>;
    /// The root-attribute keys of the run's traces, by type, most common first: at
    /// most `MAX_ATTRIBUTE_KEYS`, each with its range or its most common values.
    async fn attribute_keys(&self, run_id: &str) -> StoreResult<AttributeKeys>;
    /// The distribution of `stats.value` over the steps of `traces`' run, among the
    /// traces `traces` matches (its order and page ignored). `Invalid` when the
    /// value is a string attribute there, or the split a number one.
    async fn stats(&self, traces: &TraceQuery, stats: &StatsQuery) -> StoreResult<Stats>;
    /// The groups of samples among the traces `traces` matches, per step, with one
    /// step's groups listed.
    async fn groups(&self, traces: &TraceQuery, groups: &GroupsQuery) -> StoreResult<Groups>;
    /// What differs between `changes`' two step ranges among the traces `traces`
    /// matches (its own step bounds ignored).
    async fn changes(&self, traces: &TraceQuery, changes: &ChangesQuery) -> StoreResult<Changes>;
    /// The annotations of a trace and its spans, or of one span (`span_id`), by span,
    /// name and author; none for a trace that is not there.
    async fn annotations(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: Option<&str>,
    ) -> StoreResult<AnnotationList>;
    /// Per-step trace activity in `[min_step, max_step]`, at most `STEP_LIMIT` steps,
    /// with the run's totals. `RunNotFound` for an unknown run.
    async fn steps(
        &self,
        run_id: &str,
        min_step: Option<i64>,
        max_step: Option<i64>,
    ) -> StoreResult<StepsResponse>;
}

/// [`Reads`] over a pool of either database.
pub struct Reader<DB: Dialect> {
    pool: Pool<DB>,
    /// Reads a replica, which may lag its primary.
    replica: bool,
}

/// The order of a keyset page: its columns (a sort value, then ids that make each
/// row's position unique) and direction. A cursor holds one value per column.
pub(super) struct Keyset<'k> {
    pub columns: &'k [&'k str],
    pub descending: bool,
    /// The tail of an attribute sort: the cursor's `number` only marks it, and the
    /// columns hold its `value` (the update time), `a` and `b`.
    pub tail: bool,
    /// The first column holds the cursor's `lead`, ahead of its `value` and ids.
    pub lead: bool,
}

impl<DB: Dialect> Reader<DB> {
    /// The root-attribute keys of the run's traces, by type, most common first,
    /// with their ranges and common values, in one pass over the traces'
    /// attributes instead of two: each (key, type, listable value) counted in SQL,
    /// the rest added up here. A root has a key once, so a key's traces are the
    /// sum of its values'.
    async fn root_keys(&self, run_id: &str) -> StoreResult<Vec<AttributeKey>> {
        let mut q = Sql::<DB>::new(format!(
            "SELECT key, kind, CASE WHEN length(text) <= {MAX_LISTED_VALUE_CHARS} THEN text END \
             AS shown, COUNT(*) AS traces, MIN(num) AS min, MAX(num) AS max FROM "
        ));
        DB::push_attr_rows(&mut q, run_id);
        q.push(" a GROUP BY key, kind, shown");
        let mut keys: Vec<AttributeKey> = Vec::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        for r in self.rows(q).await? {
            let (key, kind) = (r.req_text("key")?, r.req_text("kind")?);
            let traces = r.req_int("traces")?;
            let at = *index.entry((key.clone(), kind.clone())).or_insert_with(|| {
                keys.push(AttributeKey {
                    key,
                    kind,
                    traces: 0,
                    min: None,
                    max: None,
                    values: Vec::new(),
                });
                keys.len() - 1
            });
            let k = &mut keys[at];
            k.traces = k.traces.saturating_add(traces);
            let (min, max) = (r.float("min")?, r.float("max")?);
            k.min = k.min.into_iter().chain(min).reduce(f64::min);
            k.max = k.max.into_iter().chain(max).reduce(f64::max);
            if let Some(value) = r.text("shown")? {
                k.values.push(ValueCount { value, traces });
            }
        }
        for k in &mut keys {
            k.values
                .sort_by(|a, b| b.traces.cmp(&a.traces).then_with(|| a.value.cmp(&b.value)));
            k.values.truncate(TOP_VALUES);
        }
        keys.sort_by(|a, b| {
            b.traces
                .cmp(&a.traces)
                .then_with(|| a.key.cmp(&b.key))
                .then_with(|| a.kind.cmp(&b.kind))
        });
        keys.truncate(MAX_ATTRIBUTE_KEYS);
        Ok(keys)
    }

    /// The attribute keys of a sample of the run's spans
    /// ([`Dialect::push_span_attr_rows`]), by type, most common first, with their
    /// ranges and common values. A key can repeat in a trace: its traces are
    /// counted once each.
    async fn span_keys(&self, run_id: &str) -> StoreResult<Vec<AttributeKey>> {
        let count = "COUNT(DISTINCT trace)";
        let mut q = Sql::<DB>::new(format!(
            "SELECT key, kind, {count} AS traces, MIN(num) AS min, MAX(num) AS max FROM "
        ));
        DB::push_span_attr_rows(&mut q, run_id, SPAN_KEY_SAMPLE);
        q.push(format!(
            " a GROUP BY key, kind ORDER BY {count} DESC, key, kind LIMIT {MAX_ATTRIBUTE_KEYS}"
        ));
        let mut keys = self
            .rows(q)
            .await?
            .iter()
            .map(|r| {
                Ok(AttributeKey {
                    key: r.req_text("key")?,
                    kind: r.req_text("kind")?,
                    traces: r.req_int("traces")?,
                    min: r.float("min")?,
                    max: r.float("max")?,
                    values: Vec::new(),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        // The most common values of each string or boolean key, in one query.
        let mut q = Sql::<DB>::new(format!(
            "SELECT key, kind, text, traces FROM (SELECT key, kind, text, {count} AS traces,
                    ROW_NUMBER() OVER (PARTITION BY key, kind ORDER BY {count} DESC, text) AS n
               FROM "
        ));
        DB::push_span_attr_rows(&mut q, run_id, SPAN_KEY_SAMPLE);
        q.push(format!(
            " a WHERE text IS NOT NULL AND length(text) <= {MAX_LISTED_VALUE_CHARS}
              GROUP BY key, kind, text) v WHERE n <= {TOP_VALUES}
              ORDER BY key, kind, traces DESC, text"
        ));
        for r in self.rows(q).await?.iter() {
            let (key, kind) = (r.req_text("key")?, r.req_text("kind")?);
            if let Some(k) = keys.iter_mut().find(|k| k.key == key && k.kind == kind) {
                k.values.push(ValueCount {
                    value: r.req_text("text")?,
                    traces: r.req_int("traces")?,
                });
            }
        }
        Ok(keys)
    }

    pub fn new(pool: Pool<DB>) -> Self {
        Reader {
            pool,
            replica: false,
        }
    }

    /// A reader of a streaming replica of the primary the writes go to.
    pub fn replica(pool: Pool<DB>) -> Self {
        Reader {
            pool,
            replica: true,
        }
    }

    pub(super) async fn rows(&self, q: Sql<'_, DB>) -> StoreResult<Vec<DB::Row>> {
        Ok(DB::fetch_all(&self.pool, q).await?)
    }

    pub(super) async fn row(&self, q: Sql<'_, DB>) -> StoreResult<Option<DB::Row>> {
        Ok(self.rows(q).await?.into_iter().next())
    }

    /// The `n` of a `SELECT COUNT(*) AS n …` (or of any one-row total); 0 when it
    /// answers no row.
    pub(super) async fn count(&self, q: Sql<'_, DB>) -> StoreResult<i64> {
        match self.row(q).await? {
            Some(row) => row.req_int("n"),
            None => Ok(0),
        }
    }

    /// [`Self::count`] as a size.
    pub(super) async fn count_usize(&self, q: Sql<'_, DB>) -> StoreResult<usize> {
        Ok(usize::try_from(self.count(q).await?).unwrap_or(0))
    }

    /// A trace's opened spans with their bodies, for `rows::span_detail`; a caller
    /// may add conditions and an order.
    fn opened_spans<'a>(run_id: &'a str, trace_id: &'a str) -> Sql<'a, DB> {
        let mut q = Sql::new(format!(
            "SELECT {SPAN_NODE_COLUMNS}, {} FROM spans s WHERE s.run_id = ",
            rows::span_body_columns::<DB>()
        ));
        q.bind(run_id)
            .push(" AND s.trace_id = ")
            .bind(trace_id)
            .push(" AND s.has_open");
        q
    }

    /// The list that `q`'s one row holds as JSON text in `column`, read by `parse`.
    async fn json_value<T>(
        &self,
        q: Sql<'_, DB>,
        column: &str,
        parse: fn(&str) -> StoreResult<Vec<T>>,
    ) -> StoreResult<Vec<T>> {
        match self.row(q).await? {
            Some(row) => parse(&row.req_text(column)?),
            None => Ok(Vec::new()),
        }
    }

    /// `SELECT {columns}` of the spans a level of the tree lists.
    fn level<'a>(
        columns: &str,
        run_id: &'a str,
        trace_id: &'a str,
        level: &SpanLevel<'a>,
    ) -> Sql<'a, DB> {
        let mut q = Sql::new(format!("SELECT {columns} FROM spans s WHERE s.run_id = "));
        q.bind(run_id)
            .push(" AND s.trace_id = ")
            .bind(trace_id)
            .push(" AND s.tree_parent = ")
            .bind(level.parent.unwrap_or(""));
        if let Some(name) = level.name {
            q.push(format!(" AND s.name {} ", DB::LIKE_ANY_CASE))
                .bind(format!("%{}%", rows::escape_like(name)))
                .push(" ESCAPE '\\'");
        }
        q
    }

    /// Where `span_id` sits in the level: its cursor, and how many of the level's
    /// spans come before it; `None` when it is not among them.
    async fn listed_place(
        &self,
        run_id: &str,
        trace_id: &str,
        level: &SpanLevel<'_>,
        span_id: &str,
    ) -> StoreResult<Option<(Cursor, i64)>> {
        let mut q = Self::level("s.ordinal, s.start_us", run_id, trace_id, level);
        q.push(" AND s.span_id = ").bind(span_id);
        let Some(row) = self.row(q).await? else {
            return Ok(None);
        };
        let (ordinal, start_us) = (row.req_int("ordinal")?, row.req_int("start_us")?);
        let mut q = Self::level("COUNT(*) AS before", run_id, trace_id, level);
        q.push(" AND (s.ordinal, s.start_us, s.span_id) < (")
            .bind(ordinal)
            .push(", ")
            .bind(start_us)
            .push(", ")
            .bind(span_id)
            .push(")");
        let before = match self.row(q).await? {
            Some(row) => row.req_int("before")?,
            None => 0,
        };
        let key = Cursor {
            value: start_us,
            a: span_id.to_string(),
            b: String::new(),
            number: None,
            lead: Some(ordinal),
        };
        Ok(Some((key, before)))
    }

    /// The page of a level around `span_id`: up to half a page before it, read
    /// backwards from it, then the rest from it on; two index walks of a page each,
    /// however far along the level it sits (only the count of those before it
    /// walks that far).
    async fn spans_around(
        &self,
        run_id: &str,
        trace_id: &str,
        level: &SpanLevel<'_>,
        span_id: &str,
    ) -> StoreResult<SpanPage> {
        let (key, before) = self
            .listed_place(run_id, trace_id, level, span_id)
            .await?
            .ok_or_else(|| StoreError::NotListed {
                span_id: span_id.to_string(),
            })?;
        let half = level.limit / 2;
        // One more than half: the nearest tells where the rest starts, when half is 0.
        let q = Self::level(SPAN_NODE_COLUMNS, run_id, trace_id, level);
        let (nearest_first, _) = self
            .page(
                q,
                sibling_order(true),
                (Some(&key), half + 1),
                rows::span_node,
                sibling_cursor,
            )
            .await?;
        let rest_after = nearest_first.first().map(sibling_cursor);
        let mut spans: Vec<_> = nearest_first.into_iter().take(half).collect();
        spans.reverse();
        let q = Self::level(SPAN_NODE_COLUMNS, run_id, trace_id, level);
        let rest = (rest_after.as_ref(), level.limit - spans.len());
        let (tail, next_cursor) = self
            .page(
                q,
                sibling_order(false),
                rest,
                rows::span_node,
                sibling_cursor,
            )
            .await?;
        let from = before - spans.len() as i64;
        spans.extend(tail);
        Ok(SpanPage {
            spans,
            next_cursor,
            from: Some(from.max(0)),
        })
    }

    /// One page of `q` in `order`: the rows past `cursor`, and the cursor of the
    /// next page if more follow (`key` gives a row's cursor).
    pub(super) async fn page<'a, T>(
        &self,
        q: Sql<'a, DB>,
        order: Keyset<'_>,
        (cursor, limit): (Option<&'a Cursor>, usize),
        read: impl Fn(&DB::Row) -> StoreResult<T>,
        key: impl Fn(&T) -> Cursor,
    ) -> StoreResult<(Vec<T>, Option<String>)> {
        self.page_at(q, order, (cursor, limit, 0), read, key).await
    }

    /// [`Self::page`], skipping the first `skip` rows past the cursor.
    async fn page_at<'a, T>(
        &self,
        mut q: Sql<'a, DB>,
        order: Keyset<'_>,
        (cursor, limit, skip): (Option<&'a Cursor>, usize, i64),
        read: impl Fn(&DB::Row) -> StoreResult<T>,
        key: impl Fn(&T) -> Cursor,
    ) -> StoreResult<(Vec<T>, Option<String>)> {
        let (cmp, dir) = if order.descending {
            ("<", " DESC")
        } else {
            (">", "")
        };
        if let Some(c) = cursor {
            q.push(format!(" AND ({}) {cmp} (", order.columns.join(", ")));
            if order.lead {
                q.bind(c.lead.unwrap_or(0)).push(", ");
            }
            match c.number {
                Some(n) if !order.tail => q.bind(n),
                _ => q.bind(c.value),
            };
            q.push(", ").bind(&c.a);
            if order.columns.len() > 2 + usize::from(order.lead) {
                q.push(", ").bind(&c.b);
            }
            q.push(")");
        }
        let by: Vec<String> = order.columns.iter().map(|c| format!("{c}{dir}")).collect();
        q.push(format!(" ORDER BY {} LIMIT ", by.join(", ")))
            .bind(page_limit(limit));
        if skip > 0 {
            q.push(" OFFSET ").bind(skip);
        }
        let mut items = self
            .rows(q)
            .await?
            .iter()
            .map(read)
            .collect::<StoreResult<Vec<T>>>()?;
        let next_cursor = page_cursor(&mut items, limit, key);
        Ok((items, next_cursor))
    }
}

#[async_trait]
impl<DB: Dialect> Reads for Reader<DB> {
    async fn replica_lag_ms(&self) -> StoreResult<Option<i64>> {
        if !self.replica {
            return Ok(None);
        }
        let row = self.row(Sql::new(DB::REPLICA_LAG_MS)).await?;
        row.map(|r| r.req_int("lag_ms").map(|ms| ms.max(0)))
            .transpose()
    }

    async fn list_projects(&self) -> StoreResult<ProjectList> {
        // CAST: PostgreSQL's SUM of a bigint is a numeric.
        let rows = self
            .rows(Sql::new(
                "SELECT project, COUNT(*) AS runs, CAST(SUM(trace_count) AS BIGINT) AS traces,
                        MAX(updated_us) AS updated_us, CAST(SUM(bytes) AS BIGINT) AS bytes
                   FROM runs GROUP BY project ORDER BY MAX(updated_us) DESC",
            ))
            .await?;
        let scale = self.size_scale().await?;
        let policies: HashMap<String, RetentionPolicy> = super::retention::policies(&self.pool)
            .await?
            .into_iter()
            .collect();
        let projects = rows
            .iter()
            .map(|r| {
                let name = r.req_text("project")?;
                Ok(ProjectSummary {
                    retention: policies.get(&name).copied(),
                    name,
                    runs: r.req_int("runs")?,
                    traces: r.req_int("traces")?,
                    updated_us: r.req_int("updated_us")?,
                    size_bytes: scale.bytes(r.req_int("bytes")?),
                })
            })
            .collect::<StoreResult<_>>()?;
        Ok(ProjectList { projects })
    }

    async fn retention_preview(
        &self,
        project: &str,
        policy: &RetentionPolicy,
        now: i64,
    ) -> StoreResult<RetentionPreview> {
        super::retention::preview(&self.pool, project, policy, now).await
    }

    async fn list_runs(&self, asked: RunsAsked<'_>) -> StoreResult<RunList> {
        self.read_runs(asked).await
    }

    async fn disk_usage(&self, project: Option<&str>, limit: usize) -> StoreResult<DiskUsage> {
        self.read_disk_usage(project, limit).await
    }

    async fn table_sizes(&self) -> StoreResult<Vec<(String, i64)>> {
        self.read_table_sizes().await
    }

    async fn run_fields(&self, project: Option<&str>) -> StoreResult<RunFields> {
        self.read_run_fields(project).await
    }

    async fn run_project(&self, run_id: &str) -> StoreResult<Option<String>> {
        let mut q = Sql::new("SELECT project FROM runs WHERE run_id = ");
        q.bind(run_id);
        self.row(q)
            .await?
            .map(|r| r.req_text("project"))
            .transpose()
    }

    async fn find_named_run(
        &self,
        project: &str,
        name: &str,
        id_prefix: &str,
    ) -> StoreResult<Option<String>> {
        let mut q = Sql::new("SELECT run_id FROM runs WHERE project = ");
        q.bind(project).push(" AND name = ");
        // The length is ours, not the caller's: a literal needs no cast on either side.
        q.bind(name).push(format!(
            " AND substr(run_id, 1, {}) = ",
            id_prefix.chars().count()
        ));
        q.bind(id_prefix).push(" ORDER BY start_us, run_id LIMIT 1");
        self.row(q).await?.map(|r| r.req_text("run_id")).transpose()
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunDetail>> {
        let mut q = Sql::new(format!(
            "SELECT {}, config FROM runs WHERE run_id = ",
            rows::RUN_COLUMNS
        ));
        q.bind(run_id);
        // One row per key: a DISTINCT over the points read every point of the run.
        let mut keys = Sql::new("SELECT key FROM metric_summaries WHERE run_id = ");
        keys.bind(run_id).push(" ORDER BY key");
        // Three reads at once: under write load each round trip waits its turn
        // for a core, so one after another they took three turns.
        let (row, keys, scale) =
            futures::future::try_join3(self.row(q), self.rows(keys), self.size_scale()).await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let metric_keys = keys
            .iter()
            .map(|r| r.req_text("key"))
            .collect::<StoreResult<_>>()?;
        Ok(Some(rows::run_detail(&row, metric_keys, &scale)?))
    }

    async fn metric_series(
        &self,
        run_id: &str,
        key: &str,
        window: SeriesWindow,
    ) -> StoreResult<MetricSeries> {
        self.read_metric_series(run_id, key, window).await
    }

    async fn list_traces(&self, query: &TraceQuery) -> StoreResult<TraceList> {
        self.trace_list(query).await
    }

    async fn stats(&self, traces: &TraceQuery, stats: &StatsQuery) -> StoreResult<Stats> {
        self.distribution(traces, stats).await
    }

    async fn groups(&self, traces: &TraceQuery, groups: &GroupsQuery) -> StoreResult<Groups> {
        self.group_lens(traces, groups).await
    }

    async fn changes(&self, traces: &TraceQuery, changes: &ChangesQuery) -> StoreResult<Changes> {
        Reader::changes(self, traces, changes).await
    }

    async fn attribute_keys(&self, run_id: &str) -> StoreResult<AttributeKeys> {
        Ok(AttributeKeys {
            attributes: self.root_keys(run_id).await?,
            notes: self.note_keys(run_id).await?,
            span_attributes: self.span_keys(run_id).await?,
        })
    }

    async fn get_trace(&self, run_id: &str, trace_id: &str) -> StoreResult<Option<TraceSummary>> {
        let mut q = Sql::new(format!(
            "SELECT {TRACE_COLUMNS}, r.name AS run_name
               FROM traces t JOIN runs r ON r.run_id = t.run_id WHERE t.run_id = "
        ));
        q.bind(run_id).push(" AND t.trace_id = ").bind(trace_id);
        self.row(q)
            .await?
            .map(|r| rows::trace_summary(&r))
            .transpose()
    }

    async fn list_spans(
        &self,
        run_id: &str,
        trace_id: &str,
        level: &SpanLevel<'_>,
    ) -> StoreResult<SpanPage> {
        let (cursor, from) = match level.start {
            LevelStart::After(cursor) => (cursor, None),
            LevelStart::At(place) => (None, Some(place.max(0))),
            LevelStart::Around(span_id) => {
                return self.spans_around(run_id, trace_id, level, span_id).await
            }
        };
        let q = Self::level(SPAN_NODE_COLUMNS, run_id, trace_id, level);
        let at = (cursor, level.limit, from.unwrap_or(0));
        let (spans, next_cursor) = self
            .page_at(q, sibling_order(false), at, rows::span_node, sibling_cursor)
            .await?;
        Ok(SpanPage {
            spans,
            next_cursor,
            from,
        })
    }

    async fn export_spans(
        &self,
        run_id: &str,
        trace_id: &str,
        limit: usize,
        cursor: Option<&Cursor>,
    ) -> StoreResult<(Vec<SpanDetail>, Option<String>)> {
        let q = Self::opened_spans(run_id, trace_id);
        let order = Keyset {
            columns: &["s.start_us", "s.span_id"],
            descending: false,
            tail: false,
            lead: false,
        };
        let read = |r: &DB::Row| rows::span_detail(r, run_id, trace_id, Vec::new());
        self.page(q, order, (cursor, limit), read, |s| Cursor {
            value: s.node.start_us,
            a: s.node.span_id.clone(),
            b: String::new(),
            number: None,
            lead: None,
        })
        .await
    }

    async fn children_nodes(
        &self,
        run_id: &str,
        trace_id: &str,
        parent: &str,
        limit: usize,
    ) -> StoreResult<Vec<ChildNode>> {
        let q = children::query::<DB>(run_id, trace_id, parent, limit);
        self.json_value(q, "spans", children::parse).await
    }

    async fn body_differences(
        &self,
        run_id: &str,
        a_trace: &str,
        b_trace: &str,
        pairs: &[(String, String)],
    ) -> StoreResult<Vec<BodyDifferences>> {
        // A long level is read in two halves at once, on two connections: the
        // comparisons are key probes and text compares, bound by one core each.
        let half = if pairs.len() >= 2_000 {
            pairs.len().div_ceil(2)
        } else {
            pairs.len()
        };
        let chunk = |from: usize| async move {
            let part = &pairs[from..pairs.len().min(from + half)];
            if part.is_empty() {
                return Ok(Vec::new());
            }
            let text =
                serde_json::to_string(part).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let q = children::differences_query::<DB>(run_id, a_trace, b_trace, text);
            let found = self
                .json_value(q, "differ", children::parse_differences)
                .await?;
            StoreResult::Ok(found.into_iter().map(|(i, f)| (i + from, f)).collect())
        };
        let (mut first, second): (Vec<BodyDifferences>, Vec<BodyDifferences>) =
            tokio::try_join!(chunk(0), chunk(half))?;
        first.extend(second);
        Ok(first)
    }

    async fn rollout_traces(
        &self,
        run_id: &str,
        rollout_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<TraceSummary>> {
        // A point in the rollout prefix index: its expression as written there (SQLite
        // matches `lower(rollout_id)`, not `lower(t.rollout_id)`), with the partial
        // index's condition spelled out.
        let mut q = Sql::new(format!(
            "SELECT {TRACE_COLUMNS}, r.name AS run_name
               FROM traces t JOIN runs r ON r.run_id = t.run_id
              WHERE rollout_id IS NOT NULL AND lower(rollout_id){} = ",
            DB::BYTE_ORDER
        ));
        q.bind(DB::fold_case(rollout_id))
            .push(" AND t.rollout_id = ")
            .bind(rollout_id)
            .push(" AND t.run_id = ")
            .bind(run_id)
            .push(" ORDER BY t.step IS NULL, t.step, t.start_us, t.trace_id LIMIT ")
            .bind(i64::try_from(limit).unwrap_or(i64::MAX));
        self.rows(q)
            .await?
            .iter()
            .map(rows::trace_summary)
            .collect()
    }

    async fn annotations(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: Option<&str>,
    ) -> StoreResult<AnnotationList> {
        self.annotations_of(run_id, trace_id, span_id).await
    }

    async fn span_exists(&self, run_id: &str, trace_id: &str, span_id: &str) -> StoreResult<bool> {
        let mut q = Sql::new("SELECT 1 AS found FROM spans WHERE run_id = ");
        q.bind(run_id)
            .push(" AND trace_id = ")
            .bind(trace_id)
            .push(" AND span_id = ")
            .bind(span_id)
            .push(" AND has_open");
        Ok(self.row(q).await?.is_some())
    }

    async fn get_span(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: &str,
    ) -> StoreResult<Option<SpanDetail>> {
        let mut q = Self::opened_spans(run_id, trace_id);
        q.push(" AND s.span_id = ").bind(span_id);
        let Some(row) = self.row(q).await? else {
            return Ok(None);
        };
        // The ancestors the tree must open, root first; an orphan's path is empty.
        let mut q = Sql::new(
            "WITH RECURSIVE up(span_id, tree_parent, depth) AS (
                 SELECT span_id, tree_parent, 0 FROM spans WHERE run_id = ",
        );
        q.bind(run_id)
            .push(" AND trace_id = ")
            .bind(trace_id)
            .push(" AND span_id = ")
            .bind(span_id)
            .push(" UNION ALL SELECT s.span_id, s.tree_parent, up.depth + 1 FROM ");
        DB::push_each_span(
            &mut q,
            "up",
            "s.span_id, s.tree_parent",
            run_id,
            trace_id,
            "s.span_id = up.tree_parent",
        );
        q.push(" WHERE up.tree_parent <> '' AND up.depth < ")
            .bind(MAX_ANCESTORS)
            .push(") SELECT span_id FROM up WHERE depth > 0 ORDER BY depth DESC");
        let path = self
            .rows(q)
            .await?
            .iter()
            .map(|r| r.req_text("span_id"))
            .collect::<StoreResult<_>>()?;
        Ok(Some(rows::span_detail(&row, run_id, trace_id, path)?))
    }

    async fn steps(
        &self,
        run_id: &str,
        min_step: Option<i64>,
        max_step: Option<i64>,
    ) -> StoreResult<StepsResponse> {
        let mut q = Sql::new(
            "SELECT trace_count, errored_count, running_count, unstepped_count,
                    (SELECT MIN(step) FROM step_activity a WHERE a.run_id = runs.run_id) AS min_step,
                    (SELECT MAX(step) FROM step_activity a WHERE a.run_id = runs.run_id) AS max_step
               FROM runs WHERE run_id = ",
        );
        q.bind(run_id);
        let run = self
            .row(q)
            .await?
            .ok_or_else(|| StoreError::RunNotFound(run_id.to_string()))?;
        let mut q =
            Sql::new("SELECT step, traces, errored, running FROM step_activity WHERE run_id = ");
        q.bind(run_id)
            .push(" AND step >= ")
            .bind(min_step.unwrap_or(0))
            .push(" AND step <= ")
            .bind(max_step.unwrap_or(i64::MAX))
            .push(" ORDER BY step LIMIT ")
            .bind(page_limit(STEP_LIMIT));
        let mut steps: Vec<StepActivity> = self
            .rows(q)
            .await?
            .iter()
            .map(|r| {
                Ok(StepActivity {
                    step: r.req_int("step")?,
                    traces: r.req_int("traces")?,
                    errored: r.req_int("errored")?,
                    running: r.req_int("running")?,
                })
            })
            .collect::<StoreResult<_>>()?;
        let truncated = steps.len() > STEP_LIMIT;
        steps.truncate(STEP_LIMIT);
        Ok(StepsResponse {
            steps,
            totals: StepTotals {
                traces: run.req_int("trace_count")?,
                errored: run.req_int("errored_count")?,
                running: run.req_int("running_count")?,
                unstepped: run.req_int("unstepped_count")?,
                min_step: run.int("min_step")?,
                max_step: run.int("max_step")?,
            },
            truncated,
            limit: STEP_LIMIT,
        })
    }
}

/// Sibling order: creation order, and spans without one (ordinal 0) by start.
fn sibling_order(descending: bool) -> Keyset<'static> {
    Keyset {
        columns: &["s.ordinal", "s.start_us", "s.span_id"],
        descending,
        tail: false,
        lead: true,
    }
}

fn sibling_cursor(s: &treeline_wire::SpanNode) -> Cursor {
    Cursor {
        value: s.start_us,
        a: s.span_id.clone(),
        b: String::new(),
        number: None,
        lead: Some(s.ordinal),
    }
}

/// The LIMIT of a page query: one row past the page, to know whether more follow.
fn page_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1)
}
