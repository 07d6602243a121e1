//! Annotations, written and read the same way on both databases. A write is one
//! transaction that holds the run (its row locked on PostgreSQL; SQLite has one
//! writer): the target is checked, the name's type within the run is checked, and
//! the row is written, with nothing in between that another write could change.

use sqlx::Pool;
use treeline_wire::annotations::{
    Annotation, AnnotationList, Author, NoteChip, NoteValue, NoteWrite, Source, MAX_CHIPS,
    MAX_PER_TARGET,
};
use treeline_wire::filter::{AttributeKey, ValueCount, MAX_ATTRIBUTE_KEYS, TOP_VALUES};
use treeline_wire::{Invalid, TraceSummary};

use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::run_writes::select_project;
use super::statements::push_rows;
use super::{StoreError, StoreResult};

/// The columns an [`Annotation`] is read from.
const COLUMNS: &str = "trace_id, span_id, name, author, author_name, source, kind, number, \
                       text, comment, created_us, updated_us";

/// Creates or updates the annotation `note` of `author` on its target; answers it,
/// and whether it is new.
pub(super) async fn annotate<DB: Dialect>(
    pool: &Pool<DB>,
    run_id: &str,
    trace_id: &str,
    note: &NoteWrite,
    author: &Author,
    source: Source,
    now: i64,
) -> StoreResult<(Annotation, bool)> {
    let mut tx = pool.begin().await?;
    let project = select_project::<DB>(&mut tx, run_id, DB::FOR_UPDATE).await?;
    let span_id = note.span_id.as_deref().unwrap_or("");
    check_target::<DB>(&mut tx, run_id, trace_id, note.span_id.as_deref()).await?;

    // The name's type in the run, from any other annotation of it.
    let mut q = Sql::<DB>::new("SELECT kind FROM annotations WHERE run_id = ");
    q.bind(run_id).push(" AND name = ").bind(note.name.as_str());
    q.push(" AND NOT (trace_id = ").bind(trace_id);
    q.push(" AND span_id = ").bind(span_id);
    q.push(" AND author = ").bind(author.key_id.as_str());
    q.push(") LIMIT 1");
    if let Some(row) = DB::fetch_all_in(&mut tx, q).await?.first() {
        let kind = row.req_text("kind")?;
        if kind != note.value.kind() {
            return Err(StoreError::Invalid(Invalid::new(
                "invalid_annotation",
                format!(
                    "value is a {}, but {} is a {kind} on this run's other annotations",
                    note.value.kind(),
                    note.name
                ),
            )));
        }
    }

    let mut q = Sql::<DB>::new("SELECT COUNT(*) AS n, SUM(CASE WHEN name = ");
    q.bind(note.name.as_str())
        .push(" AND author = ")
        .bind(author.key_id.as_str());
    q.push(" THEN 1 ELSE 0 END) AS mine FROM annotations WHERE run_id = ")
        .bind(run_id)
        .push(" AND trace_id = ")
        .bind(trace_id)
        .push(" AND span_id = ")
        .bind(span_id);
    let rows = DB::fetch_all_in(&mut tx, q).await?;
    let (count, mine) = match rows.first() {
        Some(row) => (row.req_int("n")?, row.int("mine")?.unwrap_or(0)),
        None => (0, 0),
    };
    let created = mine == 0;
    if created && count >= MAX_PER_TARGET {
        return Err(StoreError::Invalid(Invalid::new(
            "too_many_annotations",
            format!(
                "{} has {count} annotations, the most one target keeps; delete one first",
                target_name(trace_id, note.span_id.as_deref())
            ),
        )));
    }

    let (number, text) = match &note.value {
        NoteValue::Number(n) => (Some(*n), None),
        NoteValue::Bool(b) => (Some(if *b { 1.0 } else { 0.0 }), None),
        NoteValue::Text(t) => (None, Some(t.as_str())),
    };
    let mut q = Sql::<DB>::new(
        "INSERT INTO annotations (run_id, trace_id, span_id, name, author, author_name, \
         project, source, kind, number, text, comment, created_us, updated_us) VALUES (",
    );
    q.bind(run_id)
        .push(", ")
        .bind(trace_id)
        .push(", ")
        .bind(span_id);
    q.push(", ")
        .bind(note.name.as_str())
        .push(", ")
        .bind(author.key_id.as_str());
    q.push(", ")
        .bind(author.name.as_str())
        .push(", ")
        .bind(project);
    q.push(", ")
        .bind(source.name())
        .push(", ")
        .bind(note.value.kind());
    q.push(", ").bind(number).push(", ").bind(text);
    q.push(", ").bind(note.comment.as_deref());
    q.push(", ").bind(now).push(", ").bind(now);
    q.push(
        ") ON CONFLICT (run_id, trace_id, span_id, name, author) DO UPDATE SET \
         author_name = excluded.author_name, source = excluded.source, kind = excluded.kind, \
         number = excluded.number, text = excluded.text, comment = excluded.comment, \
         updated_us = excluded.updated_us",
    );
    DB::execute(&mut tx, q).await?;

    let mut q = Sql::<DB>::new(format!("SELECT {COLUMNS} FROM annotations WHERE run_id = "));
    q.bind(run_id).push(" AND trace_id = ").bind(trace_id);
    q.push(" AND span_id = ").bind(span_id);
    q.push(" AND name = ").bind(note.name.as_str());
    q.push(" AND author = ").bind(author.key_id.as_str());
    let rows = DB::fetch_all_in(&mut tx, q).await?;
    let stored = rows
        .first()
        .map(annotation)
        .transpose()?
        .ok_or_else(|| StoreError::Corrupt("an annotation written is not there".into()))?;
    tx.commit().await?;
    Ok((stored, created))
}

/// Deletes `author`'s annotation `name` on the target; answers whether there was one.
pub(super) async fn unannotate<DB: Dialect>(
    pool: &Pool<DB>,
    run_id: &str,
    trace_id: &str,
    span_id: Option<&str>,
    name: &str,
    author: &str,
) -> StoreResult<bool> {
    let mut tx = pool.begin().await?;
    select_project::<DB>(&mut tx, run_id, DB::FOR_UPDATE).await?;
    check_target::<DB>(&mut tx, run_id, trace_id, span_id).await?;
    let mut q = Sql::<DB>::new("DELETE FROM annotations WHERE run_id = ");
    q.bind(run_id).push(" AND trace_id = ").bind(trace_id);
    q.push(" AND span_id = ").bind(span_id.unwrap_or(""));
    q.push(" AND name = ")
        .bind(name)
        .push(" AND author = ")
        .bind(author);
    let deleted = DB::execute(&mut tx, q).await? > 0;
    tx.commit().await?;
    Ok(deleted)
}

/// A trace, or a span of it, that exists; `NotFound` naming it otherwise.
async fn check_target<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    trace_id: &str,
    span_id: Option<&str>,
) -> StoreResult<()> {
    let mut q = match span_id {
        Some(span_id) => {
            let mut q = Sql::<DB>::new("SELECT 1 AS one FROM spans WHERE run_id = ");
            q.bind(run_id).push(" AND trace_id = ").bind(trace_id);
            q.push(" AND span_id = ")
                .bind(span_id)
                .push(" AND has_open");
            q
        }
        None => {
            let mut q = Sql::<DB>::new("SELECT 1 AS one FROM traces WHERE run_id = ");
            q.bind(run_id).push(" AND trace_id = ").bind(trace_id);
            q
        }
    };
    q.push(" LIMIT 1");
    if DB::fetch_all_in(conn, q).await?.is_empty() {
        let code = if span_id.is_some() {
            "span_not_found"
        } else {
            "trace_not_found"
        };
        return Err(StoreError::NotFound {
            code,
            message: format!(
                "{} not found in run {run_id}",
                target_name(trace_id, span_id)
            ),
        });
    }
    Ok(())
}

fn target_name(trace_id: &str, span_id: Option<&str>) -> String {
    match span_id {
        Some(span_id) => format!("span {span_id} of trace {trace_id}"),
        None => format!("trace {trace_id}"),
    }
}

fn annotation(row: &impl DbRow) -> StoreResult<Annotation> {
    let kind = row.req_text("kind")?;
    let value = match kind.as_str() {
        "number" => NoteValue::Number(row.req_float("number")?),
        "boolean" => NoteValue::Bool(row.req_float("number")? != 0.0),
        "string" => NoteValue::Text(row.req_text("text")?),
        other => return Err(StoreError::Corrupt(format!("annotation kind {other:?}"))),
    };
    let source = row.req_text("source")?;
    Ok(Annotation {
        trace_id: row.req_text("trace_id")?,
        span_id: row
            .req_text("span_id")
            .map(|s| Some(s).filter(|s| !s.is_empty()))?,
        name: row.req_text("name")?,
        value: value.to_json(),
        kind,
        comment: row.text("comment")?,
        author: Author {
            key_id: row.req_text("author")?,
            name: row.req_text("author_name")?,
        },
        source: Source::parse(&source)
            .ok_or_else(|| StoreError::Corrupt(format!("annotation source {source:?}")))?,
        created_us: row.req_int("created_us")?,
        updated_us: row.req_int("updated_us")?,
    })
}

impl<DB: Dialect> Reader<DB> {
    /// The trace's annotations (the trace's own and its spans'), or one span's.
    pub(super) async fn annotations_of(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: Option<&str>,
    ) -> StoreResult<AnnotationList> {
        let mut q = Sql::<DB>::new(format!("SELECT {COLUMNS} FROM annotations WHERE run_id = "));
        q.bind(run_id).push(" AND trace_id = ").bind(trace_id);
        if let Some(span_id) = span_id {
            q.push(" AND span_id = ").bind(span_id);
        }
        q.push(" ORDER BY span_id, name, author");
        let annotations = self
            .rows(q)
            .await?
            .iter()
            .map(annotation)
            .collect::<StoreResult<_>>()?;
        Ok(AnnotationList { annotations })
    }
}

impl<DB: Dialect> Reader<DB> {
    /// Gives each trace of a page its chips: its annotations grouped by name and
    /// value, the most said first, at most [`MAX_CHIPS`]. One query a page, that
    /// starts from the page's keys: as `(run_id, trace_id) IN (VALUES …)`, SQLite
    /// read every annotation of the store for each page (20 ms a list at 200,000).
    pub(super) async fn add_chips(&self, traces: &mut [TraceSummary]) -> StoreResult<()> {
        if traces.is_empty() {
            return Ok(());
        }
        let mut q = Sql::<DB>::new(
            "SELECT a.run_id AS run_id, a.trace_id AS trace_id, a.name AS name, \
             a.kind AS kind, a.number AS number, a.text AS text, COUNT(*) AS n FROM (",
        );
        push_rows(&mut q, traces.iter(), |t| {
            [t.run_id.as_str().into(), t.trace_id.as_str().into()]
        });
        q.push(
            ") AS k JOIN annotations a ON a.run_id = k.column1 AND a.trace_id = k.column2 \
             GROUP BY a.run_id, a.trace_id, a.name, a.kind, a.number, a.text",
        );
        let rows = self.rows(q).await?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut chips: std::collections::HashMap<(String, String), Vec<NoteChip>> =
            std::collections::HashMap::new();
        for row in &rows {
            let value = match row.req_text("kind")?.as_str() {
                "number" => NoteValue::Number(row.req_float("number")?),
                "boolean" => NoteValue::Bool(row.req_float("number")? != 0.0),
                _ => NoteValue::Text(row.req_text("text")?),
            };
            chips
                .entry((row.req_text("run_id")?, row.req_text("trace_id")?))
                .or_default()
                .push(NoteChip {
                    name: row.req_text("name")?,
                    value: value.to_json(),
                    count: row.req_int("n")?,
                });
        }
        for t in traces.iter_mut() {
            if let Some(mut mine) = chips.remove(&(t.run_id.clone(), t.trace_id.clone())) {
                mine.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
                mine.truncate(MAX_CHIPS);
                t.notes = mine;
            }
        }
        Ok(())
    }
}

impl<DB: Dialect> Reader<DB> {
    /// The run's annotation names with their type, how many traces hold one, a
    /// number's range and a string's or boolean's most common values.
    pub(super) async fn note_keys(&self, run_id: &str) -> StoreResult<Vec<AttributeKey>> {
        let mut q = Sql::<DB>::new(
            "SELECT name, kind, COUNT(DISTINCT trace_id) AS traces, MIN(number) AS min, \
             MAX(number) AS max FROM annotations WHERE run_id = ",
        );
        q.bind(run_id).push(format!(
            " GROUP BY name, kind ORDER BY traces DESC, name LIMIT {MAX_ATTRIBUTE_KEYS}"
        ));
        let mut keys = Vec::new();
        for r in self.rows(q).await? {
            let kind = r.req_text("kind")?;
            let number = kind == "number";
            keys.push(AttributeKey {
                key: r.req_text("name")?,
                traces: r.req_int("traces")?,
                min: if number { r.float("min")? } else { None },
                max: if number { r.float("max")? } else { None },
                kind,
                values: Vec::new(),
            });
        }
        // The common values, as a filter writes them (a boolean as true or false).
        let mut q = Sql::<DB>::new(
            "SELECT name, value, traces FROM (SELECT name, value, COUNT(DISTINCT trace_id) AS traces, \
                    ROW_NUMBER() OVER (PARTITION BY name ORDER BY COUNT(DISTINCT trace_id) DESC, value) AS n \
               FROM (SELECT name, trace_id, CASE WHEN kind = 'boolean' \
                            THEN CASE WHEN number = 0 THEN 'false' ELSE 'true' END ELSE text END AS value \
                       FROM annotations WHERE kind <> 'number' AND run_id = ",
        );
        q.bind(run_id).push(format!(
            ") a GROUP BY name, value) v WHERE n <= {TOP_VALUES} ORDER BY name, traces DESC, value"
        ));
        for r in self.rows(q).await? {
            let name = r.req_text("name")?;
            if let Some(k) = keys
                .iter_mut()
                .find(|k| k.key == name && k.kind != "number")
            {
                k.values.push(ValueCount {
                    value: r.req_text("value")?,
                    traces: r.req_int("traces")?,
                });
            }
        }
        Ok(keys)
    }
}
