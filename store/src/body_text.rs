//! The index of span bodies' words (migration 18), written in the same transaction
//! as the spans and read by the trace lists' `text=` search. SQLite keeps it in FTS5
//! (`span_docs` names each document, `span_words` indexes its words), PostgreSQL in
//! a tsvector column under a GIN index. The server folds the words itself
//! (`treeline_wire::text`), so both databases hold exactly the same ones.

use sqlx::{Postgres, Sqlite};
use treeline_wire::text::{indexed_words, BodyField, TextMatch, TextQuery};
use treeline_wire::TraceSummary;
use xxhash_rust::xxh3::xxh3_64;

use super::dialect::{Arg, Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::statements::push_values;
use super::{StoreResult, TraceQuery};
use crate::ingest::SpanWrite;

/// One body's document: its span, which body, and its words.
pub(super) struct Doc<'a> {
    trace_id: &'a str,
    span_id: &'a str,
    field: BodyField,
    words: Vec<String>,
}

/// Documents per statement (four arguments each).
pub(super) const DOC_CHUNK: usize = 500;

/// The documents of the bodies a batch brings. A body sent again replaces its
/// document; a span's other bodies keep theirs.
pub(super) fn docs(spans: &[SpanWrite]) -> Vec<Doc<'_>> {
    let mut out = Vec::new();
    for w in spans {
        for (field, body) in [
            (BodyField::Input, &w.input),
            (BodyField::Output, &w.output),
            (BodyField::Error, &w.error),
        ] {
            if let Some(body) = body {
                out.push(Doc {
                    trace_id: &w.state.trace_id,
                    span_id: &w.state.span_id,
                    field,
                    words: indexed_words(&body.json),
                });
            }
        }
    }
    out
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
            Arg::Owned(d.words.join(" ")),
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
    push_values(q, docs, |d| {
        let mut vector = String::with_capacity(d.words.iter().map(|w| w.len() + 10).sum());
        for (i, word) in d.words.iter().enumerate() {
            vector.push_str(&format!("'{word}':{} ", i + 1));
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

/// A body search as one database reads it: the query's parts, and the scope token
/// of the list's run or project when it has one.
#[derive(Debug)]
pub struct BodySearch<'q> {
    pub text: &'q TextQuery,
    pub scope: Option<String>,
}

impl<'q> BodySearch<'q> {
    pub fn new(query: &TraceQuery, text: &'q TextQuery) -> Self {
        let scope = match (&query.run_id, &query.project) {
            (Some(run_id), _) => Some(scope_token('r', run_id)),
            (None, Some(project)) => Some(scope_token('p', project)),
            (None, None) => None,
        };
        BodySearch { text, scope }
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

/// Matching documents read per search at most, and the most traces listed from
/// them: past either, the search is tested on each trace the list reads.
const MAX_DOCS_READ: usize = 20_000;
pub(super) const MAX_TEXT_LISTED: usize = 5_000;

/// What a body search matches in a list's run or project.
pub(super) enum TextTraces {
    /// Every trace with a matching body: at most [`MAX_TEXT_LISTED`].
    Listed(Vec<(String, String)>),
    /// Too many to list.
    Many,
}

impl<DB: Dialect> Reader<DB> {
    /// The traces whose bodies match, read from the index within the list's scope.
    pub(super) async fn text_traces(
        &self,
        search: &BodySearch<'_>,
        query: &TraceQuery,
    ) -> StoreResult<TextTraces> {
        let mut q = Sql::new("SELECT d.run_id, d.trace_id ");
        DB::push_docs_matching(&mut q, search);
        if let Some(run_id) = &query.run_id {
            q.push(" AND d.run_id = ").bind(run_id);
        }
        q.push(" LIMIT ")
            .bind(i64::try_from(MAX_DOCS_READ).unwrap_or(i64::MAX));
        let rows = self.rows(q).await?;
        if rows.len() >= MAX_DOCS_READ {
            return Ok(TextTraces::Many);
        }
        let mut traces = rows
            .iter()
            .map(|r| Ok((r.req_text("run_id")?, r.req_text("trace_id")?)))
            .collect::<StoreResult<Vec<_>>>()?;
        traces.sort_unstable();
        traces.dedup();
        if traces.len() > MAX_TEXT_LISTED {
            return Ok(TextTraces::Many);
        }
        Ok(TextTraces::Listed(traces))
    }

    /// Says, on each trace of a `text=` page, which span's body matched (the first
    /// by span id, then input, output, error) and a passage of it.
    pub(super) async fn add_text_matches(
        &self,
        traces: &mut [TraceSummary],
        search: &BodySearch<'_>,
    ) -> StoreResult<()> {
        let order = DB::BYTE_ORDER;
        for trace in traces.iter_mut() {
            let mut q = Sql::new("SELECT d.span_id, CAST(d.field AS BIGINT) AS field FROM ");
            DB::push_doc_table(&mut q);
            q.push(" WHERE d.run_id = ")
                .bind(&trace.run_id)
                .push(" AND d.trace_id = ")
                .bind(&trace.trace_id)
                .push(" AND ");
            DB::push_doc_matches(&mut q, search);
            q.push(format!(" ORDER BY d.span_id{order}, d.field LIMIT 1"));
            let Some(row) = self.rows(q).await?.into_iter().next() else {
                continue;
            };
            let span_id = row.req_text("span_id")?;
            let Some(field) = BodyField::from_number(row.req_int("field")?) else {
                continue;
            };
            let column = field.as_str();
            let mut q = Sql::new(format!(
                "SELECT substr({column}, 1, {SNIPPET_READ}) AS body FROM spans \
                 WHERE run_id = "
            ));
            q.bind(&trace.run_id)
                .push(" AND trace_id = ")
                .bind(&trace.trace_id)
                .push(" AND span_id = ")
                .bind(&span_id);
            let body = match self.rows(q).await?.first() {
                Some(row) => row.text("body")?.unwrap_or_default(),
                None => String::new(),
            };
            trace.text_match = Some(TextMatch {
                snippet: search.text.snippet(&body),
                span_id,
                field,
            });
        }
        Ok(())
    }
}

/// The characters of a matched body read for its passage: the words indexed lie
/// within them for all but the longest bodies.
const SNIPPET_READ: usize = 256 * 1024;
