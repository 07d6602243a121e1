//! The index of span bodies' words (migration 18), written in the same transaction
//! as the spans and read by the trace lists' `text=` search. SQLite keeps it in FTS5
//! (`span_docs` names each document, `span_words` indexes its words), PostgreSQL in
//! a tsvector column under a GIN index. The server folds the words itself
//! (`treeline_wire::text`), so both databases hold exactly the same ones.

use std::fmt::Write as _;

use sqlx::{Pool, Postgres, Sqlite};
use treeline_wire::text::{indexed_text, BodyField, TextQuery};
use xxhash_rust::xxh3::xxh3_64;

use super::dialect::{Arg, Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::search::distinct_traces;
use super::statements::{push_rows, push_values};
use super::{StoreResult, TraceQuery};
use crate::ingest::SpanWrite;

/// One body's document: its span, which body, and its words (separated by spaces).
pub struct Doc<'a> {
    trace_id: &'a str,
    span_id: &'a str,
    field: BodyField,
    words: String,
}

/// Documents per statement (four arguments each).
pub(super) const DOC_CHUNK: usize = 500;

/// The documents of the bodies a batch brings that hold words. A body sent again
/// replaces its document; a span's other bodies keep theirs.
pub(super) fn docs(spans: &[SpanWrite]) -> Vec<Doc<'_>> {
    let mut out = Vec::new();
    for w in spans {
        for (field, body) in [
            (BodyField::Input, &w.input),
            (BodyField::Output, &w.output),
            (BodyField::Error, &w.error),
        ] {
            if let Some(body) = body {
                out.extend(doc(&w.state.trace_id, &w.state.span_id, field, &body.json));
            }
        }
    }
    // A trace's documents get neighbouring keys, so a search within one trace reads
    // a narrow range of the index (a batch's traces interleaved made it 2 ms a trace).
    out.sort_unstable_by(|a, b| {
        (a.trace_id, a.span_id, a.field.number()).cmp(&(b.trace_id, b.span_id, b.field.number()))
    });
    out
}

/// A body's document, if it holds words. A body without words (numbers, flags)
/// needs none: a body is written once, so there is no older one to replace.
fn doc<'a>(trace_id: &'a str, span_id: &'a str, field: BodyField, json: &str) -> Option<Doc<'a>> {
    let words = indexed_text(json);
    (!words.is_empty()).then_some(Doc {
        trace_id,
        span_id,
        field,
        words,
    })
}

/// The token a document's run (`r`) or project (`p`) is indexed under, so that a
/// search within one reads only its documents. Hashed: ids may hold anything.
fn scope_token(kind: char, id: &str) -> String {
    format!("{kind}{:016x}", xxh3_64(id.as_bytes()))
}

/// SQLite: each document's key (kept if it exists), then its words under that key.
pub(super) fn sqlite_upsert<'a>(
    q: &mut Sql<'a, Sqlite>,
    run_id: &'a str,
    project: &'a str,
    docs: &'a [Doc<'a>],
) {
    q.push("INSERT INTO span_docs (run_id, trace_id, span_id, field) ");
    push_values(q, docs, |d| {
        [
            run_id.into(),
            d.trace_id.into(),
            d.span_id.into(),
            d.field.number().into(),
        ]
    });
    q.push(" ON CONFLICT DO NOTHING;\nINSERT OR REPLACE INTO span_words (rowid, words, scope) SELECT d.doc, k.column3, ");
    q.bind(format!(
        "{} {}",
        scope_token('r', run_id),
        scope_token('p', project)
    ));
    q.push(" FROM (");
    push_values(q, docs, |d| {
        [
            d.trace_id.into(),
            d.span_id.into(),
            d.words.as_str().into(),
            d.field.number().into(),
        ]
    });
    q.push(") AS k CROSS JOIN span_docs d ON d.run_id = ");
    q.bind(run_id)
        .push(" AND d.trace_id = k.column1 AND d.span_id = k.column2 AND d.field = k.column4");
}

/// PostgreSQL: each document's row, its words a tsvector with their positions (from
/// 1) and the scope lexemes, which start with `_`, a character no word holds.
pub(super) fn postgres_upsert<'a>(
    q: &mut Sql<'a, Postgres>,
    run_id: &'a str,
    project: &'a str,
    docs: &'a [Doc<'a>],
) {
    q.push(
        "INSERT INTO span_words (run_id, trace_id, span_id, field, words) \
         SELECT ",
    );
    q.bind(run_id)
        .push(", k.column1, k.column2, k.column3::smallint, k.column4::tsvector FROM (");
    let scope = format!(
        "'_{}' '_{}'",
        scope_token('r', run_id),
        scope_token('p', project)
    );
    push_rows(q, docs, |d| {
        let mut vector = String::with_capacity(d.words.len() * 2 + scope.len());
        for (i, word) in d.words.split(' ').enumerate() {
            // Writing to a String cannot fail.
            let _ = write!(vector, "'{word}':{} ", i + 1);
        }
        vector.push_str(&scope);
        [
            d.trace_id.into(),
            d.span_id.into(),
            d.field.number().into(),
            Arg::Owned(vector),
        ]
    });
    q.push(
        ") AS k ON CONFLICT (run_id, trace_id, span_id, field) \
         DO UPDATE SET words = excluded.words",
    );
}

/// One trace, in a condition on a table with `run_id` and `trace_id`.
pub enum TraceKey<'a> {
    /// The trace of the row of this alias in the enclosing query.
    Of(&'static str),
    Value(&'a str, &'a str),
}

impl<'a> TraceKey<'a> {
    /// `{alias}.run_id = … AND {alias}.trace_id = …`.
    pub fn push<DB: Dialect>(&self, q: &mut Sql<'a, DB>, alias: &str) {
        match self {
            TraceKey::Of(outer) => q.push(format!(
                "{alias}.run_id = {outer}.run_id AND {alias}.trace_id = {outer}.trace_id"
            )),
            TraceKey::Value(run_id, trace_id) => q
                .push(format!("{alias}.run_id = "))
                .bind(*run_id)
                .push(format!(" AND {alias}.trace_id = "))
                .bind(*trace_id),
        };
    }
}

/// A body search as one database reads it: the query's parts, and the scope token
/// of the list's run or project when it has one.
#[derive(Debug)]
pub struct BodySearch<'q> {
    pub text: &'q TextQuery,
    pub scope: Option<String>,
    /// The list's run, which the documents found are held to (a token may collide).
    pub run_id: Option<String>,
}

impl<'q> BodySearch<'q> {
    pub fn new(query: &TraceQuery, text: &'q TextQuery) -> Self {
        let scope = match (&query.run_id, &query.project) {
            (Some(run_id), _) => Some(scope_token('r', run_id)),
            (None, Some(project)) => Some(scope_token('p', project)),
            (None, None) => None,
        };
        BodySearch {
            text,
            scope,
            run_id: query.run_id.clone(),
        }
    }

    /// `SELECT` of the (run, trace) of every matching document in the scope, read
    /// from the index.
    pub fn push_matching_traces<DB: Dialect>(&self, q: &mut Sql<'_, DB>) {
        q.push("SELECT d.run_id, d.trace_id ");
        DB::push_docs_matching(q, self);
        if let Some(run_id) = &self.run_id {
            q.push(" AND d.run_id = ").bind(run_id.clone());
        }
    }

    /// The FTS5 query of the parts in the `words` column, with the scope's token.
    pub fn fts5(&self, scoped: bool) -> String {
        let words = format!("words : ({})", self.text.fts5());
        match (&self.scope, scoped) {
            (Some(token), true) => format!("{words} AND scope : {token}"),
            _ => words,
        }
    }

    /// The tsquery of the parts, with the scope's lexeme.
    pub fn tsquery(&self, scoped: bool) -> String {
        let words = self.text.tsquery();
        match (&self.scope, scoped) {
            (Some(token), true) => format!("{words} & '_{token}'"),
            _ => words,
        }
    }
}

/// The spans of one backfill step at most.
const BACKFILL_SPANS: i64 = 500;

/// Indexes the bodies of spans stored before the index existed (migration 18 left
/// a cursor when there were any), [`BACKFILL_SPANS`] in key order a step, in one
/// transaction with the cursor's move. Answers the spans read, or `None` when
/// nothing is left; the last step removes the cursor.
pub(super) async fn backfill_step<DB: Dialect>(pool: &Pool<DB>) -> StoreResult<Option<u64>> {
    let mut tx = pool.begin().await?;
    let q = Sql::<DB>::new(format!(
        "SELECT run_id, trace_id, span_id FROM text_backfill{}",
        DB::FOR_UPDATE
    ));
    let Some(at) = DB::fetch_all_in(&mut tx, q).await?.into_iter().next() else {
        return Ok(None);
    };
    let key = (
        at.req_text("run_id")?,
        at.req_text("trace_id")?,
        at.req_text("span_id")?,
    );
    let order = DB::BYTE_ORDER;
    let mut q = Sql::<DB>::new(
        "SELECT s.run_id, s.trace_id, s.span_id, r.project, s.input, s.input_z, s.output, \
         s.output_z, s.error \
         FROM spans s JOIN runs r ON r.run_id = s.run_id WHERE (s.run_id, s.trace_id, s.span_id) > (",
    );
    q.bind(key.0.as_str())
        .push(", ")
        .bind(key.1.as_str())
        .push(", ")
        .bind(key.2.as_str())
        .push(format!(
            ") ORDER BY s.run_id{order}, s.trace_id{order}, s.span_id{order} LIMIT {BACKFILL_SPANS}"
        ));
    let rows = DB::fetch_all_in(&mut tx, q).await?;
    let mut spans = Vec::with_capacity(rows.len());
    for r in &rows {
        spans.push((
            r.req_text("run_id")?,
            r.req_text("project")?,
            r.req_text("trace_id")?,
            r.req_text("span_id")?,
            [r.body("input")?, r.body("output")?, r.text("error")?],
        ));
    }
    for run in spans.chunk_by(|a, b| a.0 == b.0) {
        let (run_id, project) = (&run[0].0, &run[0].1);
        let docs: Vec<Doc<'_>> = run
            .iter()
            .flat_map(|(_, _, trace_id, span_id, bodies)| {
                BodyField::ALL
                    .into_iter()
                    .zip(bodies)
                    .filter_map(|(field, body)| {
                        body.as_deref()
                            .and_then(|json| doc(trace_id, span_id, field, json))
                    })
            })
            .collect();
        for chunk in docs.chunks(DOC_CHUNK) {
            let mut q = Sql::<DB>::new("");
            DB::push_docs_upsert(&mut q, run_id, project, chunk);
            DB::execute(&mut *tx, q).await?;
        }
    }
    let q = match spans.last() {
        Some((run_id, _, trace_id, span_id, _)) if rows.len() as i64 == BACKFILL_SPANS => {
            let mut q = Sql::<DB>::new("UPDATE text_backfill SET run_id = ");
            q.bind(run_id.as_str())
                .push(", trace_id = ")
                .bind(trace_id.as_str())
                .push(", span_id = ")
                .bind(span_id.as_str());
            q
        }
        _ => Sql::<DB>::new("DELETE FROM text_backfill"),
    };
    DB::execute(&mut *tx, q).await?;
    tx.commit().await?;
    Ok(Some(rows.len() as u64))
}

/// A search matching fewer documents than this in its scope reads their traces,
/// and lists them when they are at most [`max_text_listed`]: past either, the
/// traces are found in the list's own query.
const MAX_DOCS_READ: usize = 20_000;

/// The most traces a body search lists by key. PostgreSQL binds the keys as two
/// arrays: `traceback` across 1M traces (5,069 of them) took 304–315 ms p95
/// gathered in the list's query, 168 listed. SQLite binds each key, and there
/// 10,000 were slower than gathering (131–149 → 164–218 ms).
fn max_text_listed<DB: Dialect>() -> usize {
    if DB::ROWS_AS_ARRAYS {
        10_000
    } else {
        5_000
    }
}

/// The most matching documents a list's query gathers once, as a set, before it
/// reads traces. Past it the search is tested on each trace read instead: a word
/// that common fills a page within a few traces, while each test costs as much as
/// gathering a few hundred matches (SQLite: 0.1–0.4 ms against 1–2 µs a match).
const MAX_DOCS_GATHERED: usize = 200_000;

/// What a body search matches in a list's run or project.
pub(super) enum TextTraces {
    /// Every trace with a matching body: at most [`max_text_listed`].
    Listed(Vec<(String, String)>),
    /// Too many to list, few enough to gather in the list's query: the matching
    /// traces, or documents when those were only counted (a trace has one or more).
    Gathered(usize),
    /// So many that most traces hold one.
    Common,
}

/// The list's run or project, as a condition on a table with both columns (named
/// after `alias`).
fn push_scope<'a, DB: Dialect>(q: &mut Sql<'a, DB>, query: &'a TraceQuery, alias: &str) {
    match (&query.run_id, &query.project) {
        (Some(run_id), _) => {
            q.push(format!(" WHERE {alias}run_id = "))
                .bind(run_id.as_str());
        }
        (None, Some(project)) => {
            q.push(format!(" WHERE {alias}project = "))
                .bind(project.as_str());
        }
        (None, None) => {}
    }
}

/// Traces a probe tests, newest first, and how many of them must match for the
/// search to count as common; scopes of fewer traces are not probed (their
/// matches are counted quickly, and a list shows the count).
const PROBED: usize = 64;
const PROBED_COMMON: usize = 16;
const PROBED_FROM_TRACES: i64 = 50_000;
/// Across runs (where a list shows no count), the newest traces a search that
/// gathers many documents is tested on: when a first page's worth of them match,
/// the page is filled by testing traces one by one, within these. On PostgreSQL,
/// `"I cannot"` (1 trace in 50 of 1M) gathered 20,000 documents, each checked
/// against its row, then looked up each trace: 430 ms p50, against 22 ms for the
/// page tested trace by trace.
const PROBED_WIDE: usize = 3_000;

impl<DB: Dialect> Reader<DB> {
    /// How the list finds the traces a body search matches in its scope. On
    /// PostgreSQL (`PROBE_COMMON_TEXT`), a search common among the newest traces is
    /// tested trace by trace rather than gathered from the index first.
    pub(super) async fn text_traces(
        &self,
        query: &TraceQuery,
        search: &BodySearch<'_>,
    ) -> StoreResult<TextTraces> {
        let scope = match DB::PROBE_COMMON_TEXT {
            true => self.scope_traces(query).await?,
            false => 0,
        };
        if DB::PROBE_COMMON_TEXT && self.mostly_matching(query, search, scope).await? {
            return Ok(TextTraces::Common);
        }
        Ok(match self.indexed_traces(search).await? {
            TextTraces::Gathered(matches)
                if DB::PROBE_COMMON_TEXT
                    && self
                        .first_page_among_newest(query, search, scope, matches)
                        .await? =>
            {
                TextTraces::Common
            }
            found => found,
        })
    }

    /// Whether a quarter or more of the newest traces in the list's scope (of
    /// [`PROBED_FROM_TRACES`] or more, `scope`) match: a word that common fills a
    /// page within a few traces tested one by one, and on PostgreSQL counting its
    /// matches first cost most of a second on 1M traces (the index yields them all,
    /// and each is checked against its row).
    async fn mostly_matching(
        &self,
        query: &TraceQuery,
        search: &BodySearch<'_>,
        scope: i64,
    ) -> StoreResult<bool> {
        if scope < PROBED_FROM_TRACES {
            return Ok(false);
        }
        Ok(self.newest_matching(query, search, PROBED).await? >= PROBED_COMMON)
    }

    /// The traces of the list's run or project (or of every project).
    async fn scope_traces(&self, query: &TraceQuery) -> StoreResult<i64> {
        let mut q = Sql::new("SELECT CAST(COALESCE(SUM(trace_count), 0) AS BIGINT) AS n FROM runs");
        push_scope(&mut q, query, "");
        self.count(q).await
    }

    /// Whether, across runs, the first page of a search that gathers many
    /// documents fills within the [`PROBED_WIDE`] newest traces: more of them match
    /// than the page holds. (Only a bound this firm: a phrase new in the last hour
    /// would otherwise have the list test every older trace of the project.)
    /// `matches` (traces or documents, from the index) over the `scope`'s traces
    /// first says whether enough could be among the newest: `traceback`, 1 trace in
    /// 200, is not tested.
    async fn first_page_among_newest(
        &self,
        query: &TraceQuery,
        search: &BodySearch<'_>,
        scope: i64,
        matches: usize,
    ) -> StoreResult<bool> {
        if query.run_id.is_some() || query.cursor.is_some() {
            return Ok(false);
        }
        let scope = u128::try_from(scope).unwrap_or(0);
        let expected = (matches as u128 * PROBED_WIDE as u128)
            .checked_div(scope)
            .unwrap_or(0);
        if expected <= query.limit as u128 {
            return Ok(false);
        }
        Ok(self.newest_matching(query, search, PROBED_WIDE).await? > query.limit)
    }

    /// How many of the `newest` traces of the list's scope the search matches.
    async fn newest_matching(
        &self,
        query: &TraceQuery,
        search: &BodySearch<'_>,
        newest: usize,
    ) -> StoreResult<usize> {
        let mut q =
            Sql::new("SELECT COUNT(*) AS n FROM (SELECT t.run_id, t.trace_id FROM traces t");
        push_scope(&mut q, query, "t.");
        q.push(format!(
            " ORDER BY t.updated_us DESC LIMIT {newest}) t WHERE EXISTS (SELECT 1 "
        ));
        DB::push_trace_docs_matching(&mut q, search, TraceKey::Of("t"));
        // Tested on each of the few traces, not joined to every matching document
        // (PostgreSQL's choice: 52 ms for 64 traces, `"I cannot"` over 1M).
        q.push(DB::PER_ROW).push(")");
        self.count_usize(q).await
    }

    /// The traces whose bodies match, read from the index within the list's scope.
    async fn indexed_traces(&self, search: &BodySearch<'_>) -> StoreResult<TextTraces> {
        // First counted in the index alone, to a bound (its scope token, a hash, is
        // all that holds it to the scope: a collision only counts a few more).
        let mut q = Sql::new("SELECT COUNT(*) AS n FROM (SELECT 1 AS one ");
        DB::push_index_matching(&mut q, search);
        q.push(format!(" LIMIT {}) c", MAX_DOCS_GATHERED + 1));
        let matching = self.count_usize(q).await?;
        if matching > MAX_DOCS_GATHERED {
            return Ok(TextTraces::Common);
        }
        if matching >= MAX_DOCS_READ {
            return Ok(TextTraces::Gathered(matching));
        }
        let mut q = Sql::new("");
        search.push_matching_traces(&mut q);
        let traces = distinct_traces(&self.rows(q).await?)?;
        Ok(if traces.len() <= max_text_listed::<DB>() {
            TextTraces::Listed(traces)
        } else {
            TextTraces::Gathered(traces.len())
        })
    }
}
