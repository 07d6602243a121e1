//! A list's filters that an index answers, looked up before the list reads a trace:
//! annotation filters (`annotations`' index by run and name), and root-attribute
//! comparisons with a number (`trace_numbers`) or equality with a short string
//! (`trace_texts`). A filter that only a few traces pass (a rare label, one user's
//! id, a value nobody wrote) becomes the list of those traces, which the list starts
//! from: probing each trace for it read every trace of the scope when few or none
//! passed (825 ms p50 on `bench query`'s million traces, for a label nobody wrote).
//! One that many traces pass stays a test of each trace read, since a page of them
//! is soon found.

use treeline_wire::filter::{Field, Op, Test, TraceFilter, Value};

use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::search::Term;
use super::statements::TEXT_MAX_BYTES;
use super::trace_list::push_note_test;
use super::{StoreResult, TraceQuery};

/// Traces listed per filter at most. More than a search term's: a filter's list is
/// read through one index, and a value one trace in a thousand has (2,000 at a million
/// traces across a project) is still best started from. Even 1,000 listed in a run of
/// 10,000 (`attr.reward < 0.1` on `bench query`) cost what walking the run does: the
/// first page's count reads them all either way.
const MAX_LISTED: usize = 2_000;

impl<DB: Dialect> Reader<DB> {
    /// A term for each filter of the query that an index answers and few traces
    /// pass (its traces), or `None` when one of them matches no trace in the
    /// query's scope.
    pub(super) async fn resolve_filters<'q>(
        &self,
        query: &'q TraceQuery,
    ) -> StoreResult<Option<Vec<Term<'q>>>> {
        let mut terms = Vec::new();
        for filter in &query.filters {
            let Some(mut q) = lookup::<DB>(query, filter) else {
                continue;
            };
            q.push(" LIMIT ")
                .bind(i64::try_from(MAX_LISTED + 1).unwrap_or(i64::MAX));
            let rows = self.rows(q).await?;
            if rows.is_empty() {
                return Ok(None);
            }
            // Rows, not traces: one trace's several annotations count each.
            if rows.len() > MAX_LISTED {
                continue;
            }
            let mut traces = rows
                .iter()
                .map(|r| Ok((r.req_text("run_id")?, r.req_text("trace_id")?)))
                .collect::<StoreResult<Vec<_>>>()?;
            traces.sort_unstable();
            traces.dedup();
            terms.push(Term::Listed {
                names: Vec::new(),
                traces,
            });
        }
        Ok(Some(terms))
    }
}

/// The `(run_id, trace_id)` rows that can pass `filter`, through an index by run
/// and key, or None when no index holds every trace that passes it: a boolean, a
/// `!=`, a string compared by order or longer than `trace_texts` keeps.
fn lookup<'a, DB: Dialect>(query: &'a TraceQuery, filter: &'a TraceFilter) -> Option<Sql<'a, DB>> {
    let (table, key) = match (&filter.field, &filter.test) {
        (Field::Note(name), _) => ("annotations", name),
        (Field::Attr(key), Test::Compare(op, Value::Number(_))) if *op != Op::Ne => {
            ("trace_numbers", key)
        }
        (Field::Attr(key), Test::Compare(Op::Eq, Value::Text(text)))
            if text.len() <= TEXT_MAX_BYTES && !text.contains('\0') =>
        {
            ("trace_texts", key)
        }
        _ => return None,
    };
    let alias = if table == "annotations" { "a" } else { "x" };
    let mut q = Sql::new(format!(
        "SELECT {alias}.run_id AS run_id, {alias}.trace_id AS trace_id FROM {table} {alias} WHERE "
    ));
    // Of the one run, or of each run of the project (or of every project): the
    // indexes start with the run.
    match (&query.run_id, &query.project) {
        (Some(run_id), _) => {
            q.push(format!("{alias}.run_id = ")).bind(run_id);
        }
        (None, Some(project)) => {
            q.push(format!(
                "{alias}.run_id IN (SELECT run_id FROM runs WHERE project = "
            ))
            .bind(project)
            .push(")");
        }
        (None, None) => {
            q.push(format!("{alias}.run_id IN (SELECT run_id FROM runs)"));
        }
    }
    match (&filter.field, &filter.test) {
        (Field::Note(_), test) => {
            q.push(" AND a.name = ").bind(key.as_str());
            push_note_test(&mut q, test);
        }
        (_, Test::Compare(op, Value::Number(n))) => {
            q.push(" AND x.key = ")
                .bind(key.as_str())
                .push(format!(" AND x.value {} ", op.symbol()))
                .bind(*n);
        }
        (_, Test::Compare(_, Value::Text(text))) => {
            q.push(" AND x.key = ")
                .bind(key.as_str())
                .push(" AND x.value = ")
                .bind(text.as_str());
        }
        _ => return None,
    }
    Some(q)
}
