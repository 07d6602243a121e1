//! A list's filters that an index answers, looked up before the list reads a trace:
//! annotation filters (`annotations`' index by run and name), root-attribute
//! comparisons with a number (`trace_numbers`) or equality with a short string
//! (`trace_texts`), and, across runs, the `span.` filters when one of them is a span
//! name, a failure or an error type (the spans' indexes; a run's list already reads
//! its spans through them). A filter that only a few traces pass (a rare label, one user's
//! id, a value nobody wrote) becomes the list of those traces, which the list starts
//! from: probing each trace for it read every trace of the scope when few or none
//! passed (825 ms p50 on `bench query`'s million traces, for a label nobody wrote).
//! One that many traces pass stays a test of each trace read, since a page of them
//! is soon found.

use treeline_wire::filter::{Field, Op, SpanField, Test, TraceFilter, Value};

use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::search::{distinct_traces, Term};
use super::span_index::Indexed;
use super::statements::TEXT_MAX_BYTES;
use super::trace_list::{is_failed_span, push_note_test, push_span_filter};
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
        let indexed = Indexed::find::<DB>(&query.filters);
        let code = match &indexed {
            // A name no span carries: nothing passes a test of it.
            Some(indexed) => match self.attribute_code(indexed.key()).await? {
                Some(code) => Some(code),
                None => return Ok(None),
            },
            None => None,
        };
        terms.extend(code.map(Term::SpanCode));
        let span_attr = indexed
            .zip(code)
            .map(|(i, code)| span_attr_lookup(query, &i, code));
        let lookups = query
            .filters
            .iter()
            .filter_map(|filter| lookup::<DB>(query, filter).map(|q| (q, Some(filter))))
            .chain(span_lookup::<DB>(query).map(|q| (q, None)))
            .chain(span_attr.map(|q| (q, None)));
        for (mut q, answered) in lookups {
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
            let traces = distinct_traces(&rows)?;
            // A filter's lookup holds exactly the traces passing it; a span
            // filter's is one condition of several that must hold on one span.
            terms.push(Term::Listed {
                names: Vec::new(),
                traces,
                answers: answered.into_iter().collect(),
            });
        }
        Ok(Some(terms))
    }

    /// The code of the span attribute name `key`, or `None` when no span carries it.
    async fn attribute_code(&self, key: &str) -> StoreResult<Option<i64>> {
        let mut q = Sql::new("SELECT code FROM attribute_names WHERE name = ");
        q.bind(key);
        self.row(q).await?.map(|r| r.req_int("code")).transpose()
    }
}

/// The `(run_id, trace_id)` rows that can pass `filter`, through an index by run
/// and key, or None when no index holds every trace that passes it: a boolean, a
/// `!=`, a string compared by order or longer than `trace_texts` keeps.
fn lookup<'a, DB: Dialect>(query: &'a TraceQuery, filter: &'a TraceFilter) -> Option<Sql<'a, DB>> {
    match (&filter.field, &filter.test) {
        (Field::Note(name), test) => {
            let mut q = select("annotations", "a", query);
            q.push(" AND a.name = ").bind(name.as_str());
            push_note_test(&mut q, test);
            Some(q)
        }
        (Field::Attr(key), Test::Compare(op, Value::Number(n))) if *op != Op::Ne => {
            let mut q = select("trace_numbers", "x", query);
            q.push(" AND x.key = ")
                .bind(key.as_str())
                .push(format!(" AND x.value {} ", op.symbol()))
                .bind(*n);
            Some(q)
        }
        (Field::Attr(key), Test::Compare(Op::Eq, Value::Text(text)))
            if text.len() <= TEXT_MAX_BYTES && !text.contains('\0') =>
        {
            let mut q = select("trace_texts", "x", query);
            q.push(" AND x.key = ")
                .bind(key.as_str())
                .push(" AND x.value = ")
                .bind(text.as_str());
            Some(q)
        }
        _ => None,
    }
}

/// The `span.` filters of a list across runs that its span lookup tests: one
/// indexed filter (a span name or error type matched, else a failure), and with a
/// name, a failure too, as one range of the failed spans' index by name. Each row
/// that index gives is then a match of all of them, and the lookup stops at its
/// limit: with a common name and a rare other filter, 200,000 spans were read for
/// 2,001 (51 ms on `bench query`). Empty in a run's list, whose spans are read
/// through the same indexes, and without an indexed filter.
pub(super) fn looked_up_span_filters(query: &TraceQuery) -> Vec<&TraceFilter> {
    if query.run_id.is_some() {
        return Vec::new();
    }
    let rank = |field: &SpanField, test: &Test| match (field, test) {
        (SpanField::Name, Test::Compare(Op::Eq, Value::Text(_))) => Some(0),
        (SpanField::ErrorType, Test::Compare(Op::Eq, Value::Text(_))) => Some(1),
        _ if is_failed_span(field, test) => Some(2),
        _ => None,
    };
    let span_filters = || {
        query.filters.iter().filter_map(|f| match &f.field {
            Field::Span(field) => Some((field, f)),
            _ => None,
        })
    };
    let Some((best, field)) = span_filters()
        .filter_map(|(field, f)| rank(field, &f.test).map(|r| (r, field, f)))
        .min_by_key(|(r, ..)| *r)
        .map(|(_, field, f)| (f, field))
    else {
        return Vec::new();
    };
    let failed = span_filters().find(|(field, f)| is_failed_span(field, &f.test));
    match failed {
        // A common name with a rare failure, looked up by name alone, passed the
        // limit and left every failed trace of the project to walk.
        Some((_, failed)) if *field == SpanField::Name => vec![best, failed],
        _ => vec![best],
    }
}

/// The traces of a list across runs that hold a span passing the filters of
/// [`looked_up_span_filters`]; the traces whose spans pass them all are among
/// these.
fn span_lookup<'a, DB: Dialect>(query: &'a TraceQuery) -> Option<Sql<'a, DB>> {
    let filters = looked_up_span_filters(query);
    if filters.is_empty() {
        return None;
    }
    let mut q = select("spans", "s", query);
    for filter in filters {
        if let Field::Span(field) = &filter.field {
            q.push(" AND ");
            push_span_filter(&mut q, field, &filter.test);
        }
    }
    Some(q)
}

/// The traces that hold a span once written with the value of the query's first
/// `span.attr.` filter an index answers ([`Indexed`]), whose name has `code`; the
/// traces whose spans pass every span filter are among these. A run's list looks
/// them up too, though its span filters read the same rows
/// (`trace_list::push_span_filters`): with a list to start from, one group of 8 in
/// 100,000 traces took 0.7 ms, and 12 ms without, walking the run's traces to test
/// each against that set.
fn span_attr_lookup<'a, DB: Dialect>(
    query: &'a TraceQuery,
    indexed: &Indexed<'a>,
    code: i64,
) -> Sql<'a, DB> {
    let mut q = Sql::new("SELECT x.run_id AS run_id, x.trace_id AS trace_id FROM ");
    indexed.push_table(&mut q);
    q.push(" x WHERE ");
    push_scope(&mut q, "x", query);
    indexed.push_test(&mut q, code);
    q
}

/// `SELECT run_id, trace_id FROM table alias WHERE` the query's run, or each run of
/// its project (or of every project): the indexes start with the run.
fn select<'a, DB: Dialect>(table: &str, alias: &str, query: &'a TraceQuery) -> Sql<'a, DB> {
    let mut q = Sql::new(format!(
        "SELECT {alias}.run_id AS run_id, {alias}.trace_id AS trace_id FROM {table} {alias} WHERE "
    ));
    push_scope(&mut q, alias, query);
    q
}

/// Pushes the condition that the rows `alias` are of the query's run, or of a run
/// of its project (or of any project).
fn push_scope<'a, DB: Dialect>(q: &mut Sql<'a, DB>, alias: &str, query: &'a TraceQuery) {
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
}
