//! What a `text=` page says of each trace: which span's body matched and a passage
//! of it. The first few documents of each trace are read and matched here, by the
//! index's own rule; a trace of many documents or long bodies asks the index.

use std::collections::HashMap;

use treeline_wire::text::{indexed_words, BodyField, TextMatch};
use treeline_wire::TraceSummary;

use super::body_text::{BodySearch, TraceKey};
use super::dialect::{Dialect, Sql};
use super::packed;
use super::reader::Reader;
use super::rows::DbRow;
use super::statements::push_rows;
use super::StoreResult;

/// Documents of a trace whose bodies are read for its match, and the longest body
/// read, in characters.
const BODIES_READ: usize = 64;
const BODY_READ: usize = 1024 * 1024;

/// The characters of a matched body read for its passage: the words indexed lie
/// within them for all but the longest bodies.
const SNIPPET_READ: usize = 256 * 1024;

/// What a trace's first bodies say of a search.
enum Found {
    Match(TextMatch),
    None,
    /// A body too long to read here, or more documents than read: ask the index.
    Unsure,
}

impl<DB: Dialect> Reader<DB> {
    /// Says, on each trace of a `text=` page, which span's body matched (the first
    /// by span id, then input, output, error) and a passage of it.
    pub(super) async fn add_text_matches(
        &self,
        traces: &mut [TraceSummary],
        search: &BodySearch<'_>,
    ) -> StoreResult<()> {
        let mut bodies = self.first_bodies(traces).await?;
        for trace in traces.iter_mut() {
            let key = (trace.run_id.clone(), trace.trace_id.clone());
            let rows = bodies.remove(&key).unwrap_or_default();
            trace.text_match = match found_in(&rows, search)? {
                Found::Match(m) => Some(m),
                Found::None => None,
                Found::Unsure => self.match_in_index(trace, search).await?,
            };
        }
        Ok(())
    }

    /// The first [`BODIES_READ`] documents of each trace (by span id, then input,
    /// output, error) with their bodies, by trace. On PostgreSQL one statement reads
    /// them all (`LATERAL`): a statement a trace cost a round trip and a plan each,
    /// 20–30 ms a page of 50. SQLite, in the process, reads a trace at a time.
    async fn first_bodies(
        &self,
        traces: &[TraceSummary],
    ) -> StoreResult<HashMap<(String, String), Vec<DB::Row>>> {
        let mut by_trace: HashMap<(String, String), Vec<DB::Row>> = HashMap::new();
        if DB::LATERAL {
            if traces.is_empty() {
                return Ok(by_trace);
            }
            let mut q = Sql::new(format!("{} FROM (", body_columns::<DB>()));
            push_rows(&mut q, traces, |t| {
                [t.run_id.as_str().into(), t.trace_id.as_str().into()]
            });
            q.push(format!(
                ") AS k CROSS JOIN LATERAL (SELECT x.run_id, x.trace_id, x.span_id, x.field \
                 FROM {docs} x WHERE x.run_id = k.column1 AND x.trace_id = k.column2 \
                 ORDER BY x.span_id{order}, x.field LIMIT {BODIES_READ}) d {join} \
                 ORDER BY d.run_id, d.trace_id, d.span_id{order}, d.field",
                docs = DB::BODY_DOCS,
                order = DB::BYTE_ORDER,
                join = SPAN_OF_DOC,
            ));
            for row in self.rows(q).await? {
                let key = (row.req_text("run_id")?, row.req_text("trace_id")?);
                by_trace.entry(key).or_default().push(row);
            }
            return Ok(by_trace);
        }
        for trace in traces {
            let mut q = Sql::new(format!(
                "{} FROM {} d {SPAN_OF_DOC} WHERE ",
                body_columns::<DB>(),
                DB::BODY_DOCS
            ));
            TraceKey::Value(&trace.run_id, &trace.trace_id).push(&mut q, "d");
            q.push(format!(
                " ORDER BY d.span_id{}, d.field LIMIT {BODIES_READ}",
                DB::BYTE_ORDER
            ));
            let rows = self.rows(q).await?;
            by_trace.insert((trace.run_id.clone(), trace.trace_id.clone()), rows);
        }
        Ok(by_trace)
    }

    /// The first matching document through the index, for a trace of many documents
    /// or long bodies, and a passage of its body.
    async fn match_in_index(
        &self,
        trace: &TraceSummary,
        search: &BodySearch<'_>,
    ) -> StoreResult<Option<TextMatch>> {
        let order = DB::BYTE_ORDER;
        let mut q = Sql::new("SELECT d.span_id, CAST(d.field AS BIGINT) AS field ");
        DB::push_trace_docs_matching(
            &mut q,
            search,
            TraceKey::Value(&trace.run_id, &trace.trace_id),
        );
        q.push(format!(" ORDER BY d.span_id{order}, d.field LIMIT 1"));
        let Some(row) = self.rows(q).await?.into_iter().next() else {
            return Ok(None);
        };
        let span_id = row.req_text("span_id")?;
        let Some(field) = BodyField::from_number(row.req_int("field")?) else {
            return Ok(None);
        };
        let column = field.as_str();
        // Errors are never packed, and have no frame column.
        let packed = match field {
            BodyField::Error => String::new(),
            _ => format!(", {column}_z AS packed"),
        };
        let mut q = Sql::new(format!(
            "SELECT substr({column}, 1, {SNIPPET_READ}) AS body{packed} FROM spans WHERE run_id = "
        ));
        q.bind(&trace.run_id)
            .push(" AND trace_id = ")
            .bind(&trace.trace_id)
            .push(" AND span_id = ")
            .bind(&span_id);
        let body = match self.rows(q).await?.first() {
            Some(row) if field != BodyField::Error => match row.bytes("packed")? {
                Some(frame) => packed::unpack(&frame)?.chars().take(SNIPPET_READ).collect(),
                None => row.text("body")?.unwrap_or_default(),
            },
            Some(row) => row.text("body")?.unwrap_or_default(),
            None => String::new(),
        };
        Ok(Some(TextMatch {
            snippet: search.text.snippet(&body),
            span_id,
            field,
        }))
    }
}

/// Joins a document `d` to its span `s`.
const SPAN_OF_DOC: &str =
    "JOIN spans s ON s.run_id = d.run_id AND s.trace_id = d.trace_id AND s.span_id = d.span_id";

/// `SELECT` of a document `d` and its span's body `s`: its trace, span and field,
/// the body's first [`BODY_READ`] characters and its length, or its packed frame.
fn body_columns<DB: Dialect>() -> String {
    let of = |f: &str| {
        format!(
            "CASE d.field WHEN 0 THEN {f}(s.input{0}) WHEN 1 THEN {f}(s.output{0}) ELSE {f}(s.error{0}) END",
            if f == "substr" { format!(", 1, {BODY_READ}") } else { String::new() }
        )
    };
    format!(
        "SELECT d.run_id, d.trace_id, d.span_id, CAST(d.field AS BIGINT) AS field, {} AS body, \
         CAST({} AS BIGINT) AS chars, \
         CASE d.field WHEN 0 THEN s.input_z WHEN 1 THEN s.output_z END AS packed",
        of("substr"),
        of("length"),
    )
}

/// The first matching body among a trace's first documents (`rows`, in order),
/// matched by the index's own rule: a read of the index costs 0.1–0.4 ms on SQLite,
/// a small body's words a few microseconds.
fn found_in<R: DbRow>(rows: &[R], search: &BodySearch<'_>) -> StoreResult<Found> {
    for row in rows {
        let (body, chars) = match row.bytes("packed")? {
            // A frame says its size in bytes, no fewer than its characters: one far
            // past the read is not unpacked to learn it.
            Some(frame) if packed::content_len(&frame).is_none_or(|n| n > 4 * BODY_READ) => {
                return Ok(Found::Unsure);
            }
            Some(frame) => {
                let text = packed::unpack(&frame)?;
                let chars = text.chars().count();
                (text, i64::try_from(chars).unwrap_or(i64::MAX))
            }
            None => (
                row.text("body")?.unwrap_or_default(),
                row.int("chars")?.unwrap_or(0),
            ),
        };
        let field = BodyField::from_number(row.req_int("field")?);
        let (Some(field), true) = (field, chars <= BODY_READ as i64) else {
            return Ok(Found::Unsure);
        };
        if search.text.matches(&indexed_words(&body)) {
            return Ok(Found::Match(TextMatch {
                snippet: search.text.snippet(&body),
                span_id: row.req_text("span_id")?,
                field,
            }));
        }
    }
    Ok(if rows.len() < BODIES_READ {
        Found::None
    } else {
        Found::Unsure
    })
}
