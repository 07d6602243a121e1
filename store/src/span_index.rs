//! Which `span.attr.` filter of a list an index answers: a short string's
//! equality through `span_texts`, a number's or boolean's comparison through
//! `span_ranges`, a name's presence and (on SQLite) a string's inequality or
//! order through both. And the traces whose rows there may be stale,
//! `span_attribute_overwrites`: those in which a batch set a name again on a
//! span an earlier batch stored with it. A list takes every other trace's rows
//! as exact.

use treeline_wire::filter::{Field, SpanField, Test, TraceFilter, Value};

use super::attribute_codes::BatchCodes;
use super::dialect::{Dialect, Sql};
use super::ingest::SpanWrite;
use super::span_ranges::RangeTest;
use super::span_texts::{self, Unlisted};
use super::statements::push_rows;

/// Rows bound in one statement: three columns each, far under SQLite's bound.
pub(super) const CHUNK: usize = 1_000;

/// A span filter an index answers.
pub(super) enum Indexed<'a> {
    /// `span.attr.NAME` equal to (or `in`) short strings: its key and values.
    Texts(&'a str, Vec<&'a str>),
    Ranges(RangeTest<'a>),
    /// `span.attr.NAME` other than, or ordered against, strings: its key and test.
    Unlisted(&'a str, Unlisted<'a>),
    /// `span.attr.NAME exists`: its key. A trace holds a span with the name
    /// exactly when `span_texts` or `span_ranges` has a row of its code, since
    /// between them they hold every value but null.
    Present(&'a str),
}

/// The rows of both tables, as `run_id, trace_id, code, kind, value`:
/// `span_texts`' as kind -1 with their value, `span_ranges`' with none. The parts
/// have no conditions of their own and the tables' column types, so PostgreSQL
/// reads them as one table and probes it a trace at a time when a page wants
/// that: with `-1` an `integer` beside a `bigint`, it scanned the whole of it for
/// each trace (2.2 s for a string's `<`).
const BOTH_TABLES: &str = "(SELECT run_id, trace_id, code, CAST(-1 AS BIGINT) AS kind, value \
     FROM span_texts UNION ALL SELECT run_id, trace_id, code, kind, CAST(NULL AS TEXT) AS value \
     FROM span_ranges)";

impl<'a> Indexed<'a> {
    /// The first of `filters` that `span_texts` answers, else the first that
    /// `span_ranges` does, else a string's inequality or order (where `DB` seeks
    /// them), else a name's presence: a string's equality is the narrower, a
    /// presence the widest.
    pub(super) fn find<DB: Dialect>(filters: &'a [TraceFilter]) -> Option<Self> {
        let texts = filters.iter().find_map(span_texts::looked_up);
        let texts = texts.map(|(key, values)| Indexed::Texts(key, values));
        texts
            .or_else(|| filters.iter().find_map(RangeTest::of).map(Indexed::Ranges))
            .or_else(|| {
                let unlisted = filters.iter().find_map(Unlisted::of);
                let unlisted = unlisted.filter(|_| DB::SEEK_UNLISTED_STRINGS);
                unlisted.map(|(key, test)| Indexed::Unlisted(key, test))
            })
            .or_else(|| filters.iter().find_map(present).map(Indexed::Present))
    }

    /// Pushes the table of the rows, to be read as `x`.
    pub(super) fn push_table<DB: Dialect>(&self, q: &mut Sql<'a, DB>) {
        match self {
            Indexed::Texts(..) => {
                q.push("span_texts");
            }
            Indexed::Ranges(test) => test.push_table(q),
            Indexed::Unlisted(..) | Indexed::Present(_) => {
                q.push(BOTH_TABLES);
            }
        }
    }

    /// The attribute name the filter tests.
    pub(super) fn key(&self) -> &'a str {
        match self {
            Indexed::Texts(key, _) | Indexed::Unlisted(key, _) | Indexed::Present(key) => key,
            Indexed::Ranges(test) => test.key(),
        }
    }

    /// Pushes ` AND` the filter's test of the rows `x`, whose name has `code`
    /// (read before the list: `Term::SpanCode`).
    pub(super) fn push_test<DB: Dialect>(&self, q: &mut Sql<'a, DB>, code: i64) {
        q.push(" AND x.code = ").bind(code);
        match self {
            Indexed::Texts(_, values) => span_texts::push_test(q, values),
            Indexed::Ranges(test) => test.push(q),
            Indexed::Unlisted(_, test) => test.push(q),
            Indexed::Present(_) => {}
        }
    }

    /// Pushes the condition under which a passing row `x` proves that its trace
    /// holds a passing span, unless the trace is named in
    /// `span_attribute_overwrites`, then ` AND `; nothing when every passing row
    /// does.
    pub(super) fn push_proof<DB: Dialect>(&self, q: &mut Sql<'a, DB>) {
        match self {
            Indexed::Ranges(test) => test.push_proof(q),
            // A long string's row says only that it is there.
            Indexed::Unlisted(..) => {
                q.push("x.kind = -1 AND ");
            }
            Indexed::Texts(..) | Indexed::Present(_) => {}
        }
    }
}

/// Each of `values` as `pick` reads it, or `None` if one is not of its kind (or
/// there are none): the values of an `in` list that one index answers.
pub(super) fn all<'v, T>(
    values: &'v [Value],
    pick: impl Fn(&'v Value) -> Option<T>,
) -> Option<Vec<T>> {
    let picked = values.iter().map(pick).collect::<Option<Vec<T>>>()?;
    (!picked.is_empty()).then_some(picked)
}

/// The key of `span.attr.NAME exists`, or `None`.
fn present(filter: &TraceFilter) -> Option<&str> {
    match (&filter.field, &filter.test) {
        (Field::Span(SpanField::Attr(key)), Test::Exists) => Some(key.as_str()),
        _ => None,
    }
}

/// A row for each attribute `spans` set on a span that an earlier batch stored
/// with attributes: the trace, the span and the name's code. Written before the
/// spans ([`insert_overwritten`]), such a row names its trace when the span
/// already has the name, whose `span_texts` or `span_ranges` rows may then no
/// longer hold. A name without a code is skipped: the span upsert fails on it.
pub(super) fn resets<'a>(spans: &'a [SpanWrite], codes: &BatchCodes) -> Vec<ResetRow<'a>> {
    let stored = spans.iter().filter(|w| w.stored_attrs > 0);
    stored
        .flat_map(|w| {
            let names = w.attributes.keys().filter_map(|name| codes.code(name));
            names.map(|code| (w.state.trace_id.as_str(), w.state.span_id.as_str(), code))
        })
        .collect()
}

/// A row of [`resets`]: trace, span, code.
pub(super) type ResetRow<'a> = (&'a str, &'a str, i64);

/// Names in `span_attribute_overwrites` the traces of `rows` whose span has the
/// row's name stored already, keeping the ones named already. Run before the
/// spans' upsert, which merges the new values in.
pub(super) fn insert_overwritten<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    rows: &[ResetRow<'a>],
) {
    q.push(
        "INSERT INTO span_attribute_overwrites (run_id, trace_id) \
         SELECT DISTINCT s.run_id, s.trace_id FROM (",
    );
    push_rows(q, rows.iter().copied(), |(trace_id, span_id, code)| {
        [trace_id.into(), span_id.into(), code.into()]
    });
    // CROSS JOIN: SQLite otherwise took the run's spans as the outer loop once the
    // rows were many, and scanned them for each row (45 s for 500 rows in a run of
    // 433,567 spans, 1.3 ms so).
    q.push(") c CROSS JOIN spans s WHERE s.run_id = ")
        .bind(run_id)
        .push(" AND s.trace_id = c.column1 AND s.span_id = c.column2 AND ");
    DB::push_has_member(q, "s.attributes", "c.column3");
    q.push(" ON CONFLICT (run_id, trace_id) DO NOTHING");
}

/// Names the trace `trace_id` in `span_attribute_overwrites` outright: for a trace
/// whose spans go while its rows stay (retention of a big trace, a batch at a time).
pub(super) fn name_overwritten<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    trace_id: &'a str,
) {
    q.push("INSERT INTO span_attribute_overwrites (run_id, trace_id) VALUES (")
        .bind(run_id)
        .push(", ")
        .bind(trace_id)
        .push(") ON CONFLICT (run_id, trace_id) DO NOTHING");
}
