//! The trace list: conditions on `traces t`, and the orders it pages through. A
//! sort by a numeric root attribute walks `trace_numbers`' index (the traces that
//! have the number), then the traces that lack it, by last update, which come last
//! either way. A sort by an annotation does the same over the traces' greatest
//! number of that name.

use treeline_wire::filter::{Field, Op, SpanField, Test, Total, TraceFilter, Value};
use treeline_wire::{SpanStatus, TraceList, TraceSummary, MATCH_COUNT_LIMIT};

use super::body_text::BodySearch;
use super::dialect::{Dialect, JsonDoc, Sql};
use super::filter_terms::looked_up_span_filters;
use super::reader::{Keyset, Reader};
use super::rows::{self, DbRow, TRACE_COLUMNS};
use super::search::{push_driver, push_driver_join, push_terms, Term};
use super::span_index::Indexed;
use super::{Cursor, StoreResult, TraceQuery, TraceSort};

/// The sort value of the traces that lack the sort's attribute: past every number,
/// at the far end of either order.
fn missing_value(ascending: bool) -> f64 {
    if ascending {
        f64::MAX
    } else {
        f64::MIN
    }
}

impl<DB: Dialect> Reader<DB> {
    pub(super) async fn trace_list(&self, query: &TraceQuery) -> StoreResult<TraceList> {
        let Some(terms) = self.resolve_terms(query).await? else {
            return Ok(TraceList {
                matched: query.cursor.is_none().then_some(0),
                ..TraceList::default()
            });
        };
        // The page with its chips and text matches, which only it needs: these
        // reads go on while the count below is still being read.
        let page = async {
            let (mut traces, next_cursor) = match &query.sort {
                TraceSort::Attr(key) => self.by_number(query, &terms, Ranked::Attr(key)).await,
                TraceSort::Note(name) => self.by_number(query, &terms, Ranked::Note(name)).await,
                _ => self.by_column(query, &terms).await,
            }?;
            self.add_chips(&mut traces).await?;
            if let Some(text) = &query.text {
                self.add_text_matches(&mut traces, &BodySearch::new(query, text))
                    .await?;
            }
            Ok((traces, next_cursor))
        };
        // Counted once, with a run's first page: the count does not change with the
        // order. Across a project a count could read every trace of the window
        // (`bench query`: 17 ms p50 became 157 for a two-term search), so there is none.
        // Read beside the page, on another connection: after it, a span filter's first
        // page took both reads' time. A page that holds every match counts itself.
        // Nor for a body search most traces match: each trace counted would be
        // tested (0.4 s for a word most of 10,000 traces hold).
        let countable = !terms.iter().any(|t| matches!(t, Term::TextCommon(_)));
        let ((traces, next_cursor), count) = match (&query.cursor, &query.run_id) {
            (None, Some(_)) if countable => {
                let (page, n) =
                    futures::future::try_join(page, self.count_matching(query, &terms)).await?;
                (page, Some(n))
            }
            _ => (page.await?, None),
        };
        let counted = match &next_cursor {
            _ if query.cursor.is_some() => None,
            None => Some(traces.len() as i64),
            Some(_) => count,
        };
        Ok(TraceList {
            traces,
            next_cursor,
            window: None,
            matched: counted.map(|n| n.min(MATCH_COUNT_LIMIT)),
            matched_more: counted.is_some_and(|n| n > MATCH_COUNT_LIMIT),
        })
    }

    /// How many traces match the list's conditions, counted to one past
    /// [`MATCH_COUNT_LIMIT`] at most, so a count costs no more than that many rows.
    async fn count_matching(&self, query: &TraceQuery, terms: &[Term<'_>]) -> StoreResult<i64> {
        let mut q = Sql::new("SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM ");
        push_driver(&mut q, terms);
        q.push("traces t JOIN runs r ON r.run_id = t.run_id WHERE 1 = 1");
        push_conditions(&mut q, query, terms);
        q.push(format!(" LIMIT {}) c", MATCH_COUNT_LIMIT + 1));
        self.count(q).await
    }

    /// Sorts by a column of the summary (last update, duration, spans…).
    async fn by_column(
        &self,
        query: &TraceQuery,
        terms: &[Term<'_>],
    ) -> StoreResult<(Vec<TraceSummary>, Option<String>)> {
        let sort = match &query.sort {
            TraceSort::Duration => "COALESCE(t.end_us - t.start_us, -1)",
            TraceSort::Spans => "t.span_count",
            TraceSort::Tokens => "COALESCE(t.root_tokens, t.child_tokens)",
            // An expression, which the filter `error_count > 0` does not name: as a
            // plain column its index drew that filter away from `traces_run_failed`
            // (2 ms → 12, sorting the run's failed traces itself).
            TraceSort::Errors => "COALESCE(t.error_count, 0)",
            TraceSort::Iterations => "t.iteration_count",
            TraceSort::Updated | TraceSort::Attr(_) | TraceSort::Note(_) => "t.updated_us",
        };
        let mut q = Sql::new(format!(
            "SELECT {TRACE_COLUMNS}, r.name AS run_name, {sort} AS sort_value FROM "
        ));
        push_driver(&mut q, terms);
        q.push("traces t JOIN runs r ON r.run_id = t.run_id WHERE 1 = 1");
        push_conditions(&mut q, query, terms);
        let order = Keyset {
            columns: &[sort, "t.run_id", "t.trace_id"],
            descending: !query.ascending,
            tail: false,
            lead: false,
        };
        let read = |r: &DB::Row| Ok((r.req_int("sort_value")?, rows::trace_summary(r)?));
        let (items, next) = self
            .page(
                q,
                order,
                (query.cursor.as_ref(), query.limit),
                read,
                |(v, t)| Cursor {
                    value: *v,
                    a: t.run_id.clone(),
                    b: t.trace_id.clone(),
                    number: None,
                    lead: None,
                },
            )
            .await?;
        Ok((items.into_iter().map(|(_, t)| t).collect(), next))
    }

    /// Sorts by a number: first the traces that have it, by value, then those that
    /// lack it. A page may span both parts; a cursor whose value is the
    /// missing-value mark continues in the second.
    async fn by_number(
        &self,
        query: &TraceQuery,
        terms: &[Term<'_>],
        key: Ranked<'_>,
    ) -> StoreResult<(Vec<TraceSummary>, Option<String>)> {
        let missing = missing_value(query.ascending);
        let in_tail = query
            .cursor
            .as_ref()
            .is_some_and(|c| c.number == Some(missing));
        let mut items = Vec::new();
        if !in_tail {
            let (found, next) = self.with_number(query, terms, key).await?;
            items = found;
            if next.is_some() {
                return Ok((summaries(items), next));
            }
        }
        let room = query.limit.saturating_sub(items.len());
        if room == 0 {
            // Exactly a page of numbers: the next page starts the tail.
            let next = items.last().map(|(v, t)| attr_cursor(*v, t).encode());
            return Ok((summaries(items), next));
        }
        let tail_cursor = if in_tail { query.cursor.as_ref() } else { None };
        let (tail, next) = self
            .without_number(query, terms, key, tail_cursor, room)
            .await?;
        items.extend(tail);
        Ok((summaries(items), next))
    }

    /// The traces that have the number, in its order.
    async fn with_number(
        &self,
        query: &TraceQuery,
        terms: &[Term<'_>],
        key: Ranked<'_>,
    ) -> StoreResult<(Vec<(f64, TraceSummary)>, Option<String>)> {
        let mut q = Sql::new(format!(
            "SELECT {TRACE_COLUMNS}, r.name AS run_name, n.value AS sort_value FROM "
        ));
        push_driver(&mut q, terms);
        match key {
            Ranked::Attr(_) => {
                q.push("trace_numbers n");
            }
            Ranked::Note(name) => push_note_numbers(&mut q, query, name),
        }
        // CROSS JOIN: SQLite then walks the numbers in order and stops at the page,
        // where it would read the window's traces and sort them (17 s on the
        // benchmark's million traces). PostgreSQL plans it as an inner join.
        q.push(
            " CROSS JOIN traces t CROSS JOIN runs r \
             WHERE t.run_id = n.run_id AND t.trace_id = n.trace_id AND r.run_id = t.run_id",
        );
        push_driver_join(&mut q, terms, "n");
        if let Ranked::Attr(key) = key {
            q.push(" AND n.key = ").bind(key.to_string());
            if let Some(run_id) = &query.run_id {
                q.push(" AND n.run_id = ").bind(run_id);
            }
            if let Some(project) = &query.project {
                q.push(" AND n.project = ").bind(project);
            }
            for filter in &query.filters {
                if let (Field::Attr(k), Test::Compare(op, Value::Number(n))) =
                    (&filter.field, &filter.test)
                {
                    if k == key && *op != Op::Ne {
                        q.push(format!(" AND n.value {} ", op.symbol())).bind(*n);
                    }
                }
            }
        }
        push_conditions(&mut q, query, terms);
        let order = Keyset {
            columns: &["n.value", "n.run_id", "n.trace_id"],
            descending: !query.ascending,
            tail: false,
            lead: false,
        };
        let read = |r: &DB::Row| Ok((r.req_float("sort_value")?, rows::trace_summary(r)?));
        self.page(
            q,
            order,
            (query.cursor.as_ref(), query.limit),
            read,
            |(v, t)| attr_cursor(*v, t),
        )
        .await
    }

    /// The traces that lack the number, by last update, each with the
    /// missing-value mark as its sort value.
    async fn without_number(
        &self,
        query: &TraceQuery,
        terms: &[Term<'_>],
        key: Ranked<'_>,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> StoreResult<(Vec<(f64, TraceSummary)>, Option<String>)> {
        let missing = missing_value(query.ascending);
        // By last update, as the default list: a walk of the update-time index, in
        // a run or a project, that stops at the page (ordered by ids, SQLite sorted
        // every trace of the project).
        let mut q = Sql::new(format!("SELECT {TRACE_COLUMNS}, r.name AS run_name FROM "));
        push_driver(&mut q, terms);
        q.push("traces t JOIN runs r ON r.run_id = t.run_id WHERE NOT EXISTS (");
        match key {
            Ranked::Attr(key) => q
                .push(
                    "SELECT 1 FROM trace_numbers n WHERE n.run_id = t.run_id \
                     AND n.trace_id = t.trace_id AND n.key = ",
                )
                .bind(key.to_string()),
            Ranked::Note(name) => q
                .push(
                    "SELECT 1 FROM annotations a WHERE a.run_id = t.run_id \
                     AND a.trace_id = t.trace_id AND a.kind <> 'string' AND a.name = ",
                )
                .bind(name.to_string()),
        };
        q.push(")");
        push_conditions(&mut q, query, terms);
        let order = Keyset {
            columns: &["t.updated_us", "t.run_id", "t.trace_id"],
            descending: !query.ascending,
            tail: true,
            lead: false,
        };
        let read = |r: &DB::Row| Ok((missing, rows::trace_summary(r)?));
        self.page(q, order, (cursor, limit), read, |(v, t)| attr_cursor(*v, t))
            .await
    }
}

/// What a numeric sort ranks traces by.
#[derive(Clone, Copy)]
enum Ranked<'a> {
    /// A numeric root attribute, one a trace.
    Attr(&'a str),
    /// A number or boolean annotation: a trace's greatest, on it or its spans.
    Note(&'a str),
}

/// `n`: a run's or a project's traces with their greatest number or boolean
/// annotation `name`, on the trace or its spans, whoever made it.
fn push_note_numbers<DB: Dialect>(q: &mut Sql<'_, DB>, query: &TraceQuery, name: &str) {
    match (&query.run_id, &query.project) {
        // A run's annotations of the name are few, so grouping them costs what
        // reading them does.
        (Some(_), _) | (None, None) => {
            q.push(
                "(SELECT a.run_id, a.trace_id, MAX(a.number) AS value FROM annotations a \
                 WHERE a.kind <> 'string' AND a.name = ",
            )
            .bind(name.to_string());
            if let Some(run_id) = &query.run_id {
                q.push(" AND a.run_id = ").bind(run_id.clone());
            }
            q.push(" GROUP BY a.run_id, a.trace_id) n");
        }
        // A project's may be a hundred thousand: its annotations are walked in value
        // order (`annotations_project_order`), each kept only where it is its
        // trace's greatest (ties to the greatest span and author), so each trace
        // comes once and the walk stops at the page. A string's number is NULL.
        (None, Some(project)) => {
            q.push(
                "(SELECT a.run_id, a.trace_id, a.number AS value FROM annotations a \
                 WHERE a.project = ",
            )
            .bind(project.clone())
            .push(" AND a.name = ")
            .bind(name.to_string())
            .push(format!(
                " AND a.number IS NOT NULL AND NOT EXISTS (SELECT 1 FROM annotations b{} \
                 WHERE b.run_id = a.run_id AND b.trace_id = a.trace_id AND b.name = a.name \
                 AND b.number IS NOT NULL AND (b.number > a.number OR (b.number = a.number \
                 AND (b.span_id > a.span_id OR (b.span_id = a.span_id AND b.author > a.author)))))) n",
                DB::use_index("sqlite_autoindex_annotations_1")
            ));
        }
    }
}

/// An attribute sort's cursor: the number (or the tail's mark) and, for the tail's
/// order, the update time.
fn attr_cursor(value: f64, t: &TraceSummary) -> Cursor {
    Cursor {
        value: t.updated_us,
        a: t.run_id.clone(),
        b: t.trace_id.clone(),
        number: Some(value),
        lead: None,
    }
}

fn summaries(items: Vec<(f64, TraceSummary)>) -> Vec<TraceSummary> {
    items.into_iter().map(|(_, t)| t).collect()
}

/// Pushes the query's conditions on `t` (run, project, status, kinds, window, steps,
/// its search `terms`, resolved, and filters), each as ` AND …`.
pub(super) fn push_conditions<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    query: &'a TraceQuery,
    terms: &'a [Term<'a>],
) {
    if let Some(run_id) = &query.run_id {
        q.push(" AND t.run_id = ").bind(run_id);
    }
    if let Some(project) = &query.project {
        q.push(" AND t.project = ").bind(project);
    }
    if query.run_id.is_none() {
        // A deleted run's traces, until they are removed (see run_deletion).
        q.push(" AND NOT EXISTS (SELECT 1 FROM deleted_runs d WHERE d.run_id = t.run_id)");
    }
    if !query.statuses.is_empty() {
        q.push(" AND t.status IN (");
        for (i, s) in query.statuses.iter().enumerate() {
            q.push(if i == 0 { "" } else { ", " }).bind(s.as_str());
        }
        q.push(")");
    }
    if query.kinds != 0 {
        q.push(" AND (t.kinds & ").bind(query.kinds).push(") <> 0");
    }
    for (condition, bound) in [
        (" AND t.updated_us >= ", query.since_us),
        (" AND t.updated_us <= ", query.until_us),
        (" AND t.step >= ", query.min_step),
        (" AND t.step <= ", query.max_step),
    ] {
        if let Some(v) = bound {
            q.push(condition).bind(v);
        }
    }
    push_driver_join(q, terms, "t");
    push_terms(q, terms);
    for filter in &query.filters {
        let answered = terms.iter().any(|term| term.answers(filter));
        if !matches!(filter.field, Field::Span(_)) && !answered {
            q.push(" AND ");
            push_filter(q, filter, query.run_id.is_none());
        }
    }
    push_span_conditions(q, query, terms);
}

/// ` AND` the list's `span.` filters.
fn push_span_conditions<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    query: &'a TraceQuery,
    terms: &[Term<'_>],
) {
    // A trace's `error_count` counts its spans as they fail (never back), so
    // it is above 0 exactly when a span of the trace failed. Said here, a list
    // walks only the failed traces (`traces_run_failed`, and `traces_project_failed`
    // of migrations 23 and 24) instead of probing each trace's spans: `bench query`
    // on PostgreSQL, a failed span named `tool 1` across the project 134 ms p50 →
    // 33, and a run whose every trace failed no longer gathers its 10,000 failed
    // spans to sort their traces (85 ms).
    let span_filters = query.filters.iter().filter_map(|f| match &f.field {
        Field::Span(field) => Some((field, &f.test)),
        _ => None,
    });
    if span_filters.clone().any(|(f, t)| is_failed_span(f, t)) {
        q.push(" AND t.error_count > 0");
    }
    if span_filters.clone().any(|(f, t)| !is_failed_span(f, t)) {
        // Across runs, when the span lookup tests every span filter (so it either
        // listed their traces or found too many to list), a probe for each trace
        // read, as written (`DB::PER_ROW`): a walk newest first soon fills a page.
        // PostgreSQL otherwise walked the project's failed traces in two workers
        // beside its own, each filling a page, and probed 8,214 traces for 51
        // (56 ms, against 19). With a filter the lookup did not test, the planner
        // chooses: a rare combination is best found from the spans.
        let per_row = query.run_id.is_none()
            && looked_up_span_filters(query).len() == span_filters.clone().count();
        q.push(" AND ");
        let code = terms.iter().find_map(|term| match term {
            Term::SpanCode(code) => Some(*code),
            _ => None,
        });
        let scope = SpanScope {
            run_id: query.run_id.as_deref(),
            code,
        };
        push_span_filters(q, scope, &query.filters, per_row);
    }
}

/// Where a list's span filters look: its run, if it has one, and the code of the
/// name its indexed `span.attr.` filter tests, when read before the list.
#[derive(Clone, Copy, Default)]
struct SpanScope<'a> {
    run_id: Option<&'a str>,
    code: Option<i64>,
}

/// `span.status = error`.
pub(super) fn is_failed_span(field: &SpanField, test: &Test) -> bool {
    matches!(
        (field, test),
        (SpanField::Status, Test::Compare(Op::Eq, Value::Text(text)))
            if SpanStatus::parse_field(text, "span.status").is_ok_and(|s| s == SpanStatus::Error)
    )
}

/// The `span.` filters of `filters` as one condition: a span of the trace on which
/// they all hold. In one run's list, the set of traces holding such a span, found
/// through the spans' name, failure and error-type indexes: probing each trace
/// instead read every span of the run when few or none matched (a match count, an
/// empty page). Across runs, a probe of each trace.
fn push_span_filters<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    scope: SpanScope<'a>,
    filters: &'a [TraceFilter],
    per_row: bool,
) {
    // The name's code is read with the list's terms whenever a filter is indexed.
    let indexed = Indexed::find::<DB>(filters).zip(scope.code);
    let mut per_row = per_row;
    let mut close = ")";
    match (scope.run_id, indexed) {
        // The traces `span_texts` or `span_ranges` lists, their spans tested:
        // reading every span of the run took 300–400 ms for a value 8 traces of
        // 100,000 had. PostgreSQL, given a join, read every span for a common
        // value too.
        (Some(run_id), Some((indexed, code))) => {
            q.push("t.trace_id IN (SELECT x.trace_id FROM ");
            indexed.push_table(q);
            q.push(" x WHERE x.run_id = ").bind(run_id);
            indexed.push_test(q, code);
            // Alone, the filter is what the rows say, except in a trace whose rows
            // a later batch may have made stale: testing every listed trace's
            // spans took 47–62 ms for a value 12,800 traces of 100,000 had.
            let spans = filters.iter().filter(|f| matches!(f.field, Field::Span(_)));
            if spans.count() == 1 {
                // A probe a row (18 ms of PostgreSQL's 70 ms count of 15,548), not
                // `NOT IN`, which read the names once (7.5 ms) but would scan them
                // for each row once they outgrew `work_mem`.
                q.push(" AND ((");
                indexed.push_proof(q);
                q.push(
                    "NOT EXISTS (SELECT 1 FROM span_attribute_overwrites o \
                     WHERE o.run_id = x.run_id AND o.trace_id = x.trace_id)) OR",
                );
                close = ")))";
            } else {
                q.push(" AND");
                close = "))";
            }
            q.push(
                " EXISTS (SELECT 1 FROM spans s \
                 WHERE s.run_id = x.run_id AND s.trace_id = x.trace_id",
            );
            per_row = true;
        }
        (Some(run_id), None) => {
            q.push("t.trace_id IN (SELECT s.trace_id FROM spans s WHERE s.run_id = ")
                .bind(run_id);
        }
        (None, _) => {
            q.push(
                "EXISTS (SELECT 1 FROM spans s \
                 WHERE s.run_id = t.run_id AND s.trace_id = t.trace_id",
            );
        }
    }
    for filter in filters {
        if let Field::Span(field) = &filter.field {
            q.push(" AND ");
            push_span_filter(q, field, &filter.test);
        }
    }
    q.push(if per_row { DB::PER_ROW } else { "" }).push(close);
}

/// Pushes the condition of one span filter, on `s`, a span of the trace.
pub(super) fn push_span_filter<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    field: &'a SpanField,
    test: &'a Test,
) {
    let column = match field {
        SpanField::Name => "s.name",
        SpanField::Kind => "s.kind",
        SpanField::Status => "s.status",
        SpanField::ErrorType => {
            return match test {
                // Written as the error-type index is, so a run's spans are found
                // through it rather than each error body read.
                Test::Compare(Op::Eq, Value::Text(text)) => DB::push_error_type_is(q, text),
                _ => push_member(q, JsonDoc::SpanError, "type", test),
            };
        }
        SpanField::Attr(key) => return push_member(q, JsonDoc::SpanAttributes, key, test),
    };
    match test {
        Test::Exists => {
            q.push(format!("{column} IS NOT NULL"));
        }
        // A status of the vocabulary, written out: the index of failed spans holds
        // `status = 'error'`, which a bound parameter would not be seen to match.
        Test::Compare(Op::Eq, Value::Text(text)) if *field == SpanField::Status => {
            match SpanStatus::parse_field(text, "span.status") {
                Ok(status) => q.push(format!("s.status = '{}'", status.as_str())),
                Err(_) => q.push("1 = 0"),
            };
        }
        Test::Compare(op, value) => push_column_compare(q, column, *op, value),
        Test::In { negated, values } => push_in(q, *negated, values, |q, op, value| {
            push_column_compare(q, column, op, value)
        }),
    }
}

fn push_column_compare<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    column: &'static str,
    op: Op,
    value: &'a Value,
) {
    match value {
        Value::Text(text) => {
            DB::push_bytewise(q, column);
            q.push(format!(" {} ", op.symbol())).bind(text);
        }
        // These fields are text: against a number or a boolean nothing matches.
        _ => {
            q.push("1 = 0");
        }
    }
}

/// `in` as one `=` per value joined by OR; `not in` as one `!=` per value joined
/// by AND, so a missing field matches neither, as with `=` and `!=`.
fn push_in<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    negated: bool,
    values: &'a [Value],
    mut compare: impl FnMut(&mut Sql<'a, DB>, Op, &'a Value),
) {
    let (op, join) = if negated {
        (Op::Ne, " AND ")
    } else {
        (Op::Eq, " OR ")
    };
    q.push("(");
    for (i, value) in values.iter().enumerate() {
        q.push(if i == 0 { "" } else { join });
        compare(q, op, value);
    }
    q.push(")");
}

/// Pushes a test of the member `key` of the JSON object in column `doc`.
fn push_member<'a, DB: Dialect>(q: &mut Sql<'a, DB>, doc: JsonDoc, key: &'a str, test: &'a Test) {
    match test {
        Test::Exists => DB::push_attr_exists(q, doc, key),
        Test::Compare(op, value) => push_member_compare(q, doc, key, *op, value),
        Test::In { negated, values } => push_in(q, *negated, values, |q, op, value| {
            push_member_compare(q, doc, key, op, value)
        }),
    }
}

fn push_member_compare<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    doc: JsonDoc,
    key: &'a str,
    op: Op,
    value: &'a Value,
) {
    match value {
        Value::Number(n) => {
            DB::push_attr_number(q, doc, key);
            q.push(format!(" {} ", op.symbol())).bind(*n);
        }
        Value::Text(text) => {
            DB::push_attr_text(q, doc, key);
            q.push(format!(" {} ", op.symbol())).bind(text);
        }
        Value::Bool(b) => {
            // Parsing allows only = and != with a boolean (in lists are = or !=).
            DB::push_attr_is(q, doc, key, if op == Op::Ne { !*b } else { *b });
        }
    }
}

/// An annotation of the trace or of one of its spans, named `name`, by anyone, that
/// passes `test`: a lookup in the trace's annotations (its key's first columns).
/// Across runs, one lookup for each trace read, as written (`DB::PER_ROW`): the
/// filter's own lookup found too many traces to list, so a walk newest first soon
/// fills a page. PostgreSQL, guessing few, otherwise gathered every matching
/// annotation first (25,000 of them, 456 ms on `bench query`'s million traces,
/// against 11 ms for the walk).
fn push_note<'a, DB: Dialect>(q: &mut Sql<'a, DB>, name: &'a str, test: &'a Test, per_row: bool) {
    // By the primary key (run, trace, …): SQLite otherwise took the index by run and
    // name, and read every annotation of the name in the run for each trace (1.1 s
    // for a run's count on `bench query`, 26 ms by the key).
    q.push(format!(
        "EXISTS (SELECT 1 FROM annotations a{} WHERE a.run_id = t.run_id \
         AND a.trace_id = t.trace_id AND a.name = ",
        DB::use_index("sqlite_autoindex_annotations_1")
    ))
    .bind(name);
    push_note_test(q, test);
    q.push(if per_row { DB::PER_ROW } else { "" }).push(")");
}

/// ` AND` the test of annotation `a`'s value, when there is one (not for `exists`).
pub(super) fn push_note_test<'a, DB: Dialect>(q: &mut Sql<'a, DB>, test: &'a Test) {
    match test {
        Test::Exists => {}
        Test::Compare(op, value) => {
            q.push(" AND ");
            push_note_compare(q, *op, value);
        }
        Test::In { negated, values } => {
            q.push(" AND ");
            push_in(q, *negated, values, push_note_compare);
        }
    }
}

/// A test of annotation `a`'s value: of the value's type only (a number against a
/// string annotation matches nothing, as with attributes).
fn push_note_compare<'a, DB: Dialect>(q: &mut Sql<'a, DB>, op: Op, value: &'a Value) {
    // A string's number is NULL: said, so the index by run, name, number and text
    // is searched down to the text.
    let (kind, column) = match value {
        Value::Number(_) => ("number", "a.number"),
        Value::Bool(_) => ("boolean", "a.number"),
        Value::Text(_) => ("string", "a.number IS NULL AND a.text"),
    };
    q.push(format!("(a.kind = '{kind}' AND {column} {} ", op.symbol()));
    match value {
        Value::Number(n) => q.bind(*n),
        Value::Bool(b) => q.bind(if *b { 1.0 } else { 0.0 }),
        Value::Text(t) => q.bind(t.as_str()),
    };
    q.push(")");
}

/// A trace total as an expression on `t`.
pub(super) fn total(t: Total) -> &'static str {
    match t {
        Total::Errors => "t.error_count",
        Total::Spans => "t.span_count",
        Total::Tokens => "COALESCE(t.root_tokens, t.child_tokens)",
        Total::Iterations => "t.iteration_count",
        Total::Duration => "(t.end_us - t.start_us)",
        Total::Step => "t.step",
        Total::Rank => "t.rank",
    }
}

/// Pushes the condition of one trace filter (on `t`, the traces table).
/// `across_runs`: the list walks a project's (or every project's) traces, and
/// probes of other tables are made for each trace it reads (see [`push_note`]).
fn push_filter<'a, DB: Dialect>(q: &mut Sql<'a, DB>, filter: &'a TraceFilter, across_runs: bool) {
    match (&filter.field, &filter.test) {
        (Field::Total(t), Test::Exists) => {
            q.push(format!("{} IS NOT NULL", total(*t)));
        }
        // Written as the partial index `traces_run_failed` is, not bound: a planner
        // that sees only a parameter cannot know the index holds every match.
        (Field::Total(Total::Errors), Test::Compare(Op::Gt, Value::Number(n))) if *n == 0.0 => {
            q.push("t.error_count > 0");
        }
        (Field::Total(t), Test::Compare(op, value)) => push_total_compare(q, total(*t), *op, value),
        (Field::Total(t), Test::In { negated, values }) => {
            push_in(q, *negated, values, |q, op, value| {
                push_total_compare(q, total(*t), op, value)
            })
        }
        (Field::Attr(key), test) => push_member(q, JsonDoc::RootAttributes, key, test),
        (Field::Note(name), test) => push_note(q, name, test, across_runs),
        // `push_conditions` puts a list's span filters in one condition.
        (Field::Span(_), _) => {
            push_span_filters(q, SpanScope::default(), std::slice::from_ref(filter), false)
        }
    }
}

fn push_total_compare<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    total: &'static str,
    op: Op,
    value: &'a Value,
) {
    match value {
        Value::Number(n) => {
            q.push(format!("{total} {} ", op.symbol())).bind(*n);
        }
        // A total is a number: against a string or a boolean nothing matches.
        _ => {
            q.push("1 = 0");
        }
    }
}
