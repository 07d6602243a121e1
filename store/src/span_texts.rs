//! `span_texts`: each trace's short string span attributes, one row per (trace,
//! attribute code, value) however many of its spans carry it. A
//! `span.attr.NAME = "text"` (or `in`) filter starts from the traces listed there
//! instead of reading every span of the run: 270–410 ms on `bench rollouts`' run
//! of 100,000 traces for a value one group of 8 had, and under 1.5 ms since.
//!
//! Rows are added from each batch's attributes and never rewritten, so a value a
//! later batch overwrote keeps its row. Such a trace is named in
//! `span_attribute_overwrites` (`span_index`), and a list tests the spans of those
//! traces only: every other trace's rows are exact, so a single string filter
//! counts 12,800 matches of 100,000 traces from the rows alone instead of reading
//! each one's spans. Either way, every trace with such a span is listed.

use foldhash::HashSet;
use treeline_wire::filter::{Field, Op, SpanField, Test, TraceFilter, Value};

use super::attribute_codes::BatchCodes;
use super::dialect::{Dialect, Sql};
use super::ingest::SpanWrite;
use super::span_index;
use super::statements::{push_rows, TEXT_MAX_BYTES};

/// Rows bound in one insert: four columns each, far under SQLite's bound.
pub(super) const CHUNK: usize = 1_000;

/// A row: the trace, the attribute's code and its value.
pub(super) type TextRow<'a> = (&'a str, i64, &'a str);

/// Whether `text` is kept: short, and without NUL, which a PostgreSQL text cannot
/// hold. The same bound as `trace_texts`'.
pub(super) fn is_kept(text: &str) -> bool {
    text.len() <= TEXT_MAX_BYTES && !text.contains('\0')
}

/// The distinct rows that `spans`' short string attributes make, in no order.
/// A name without a code is skipped: the span upsert fails on it first.
pub(super) fn rows<'a>(spans: &'a [SpanWrite], codes: &BatchCodes) -> Vec<TextRow<'a>> {
    let mut rows: HashSet<TextRow<'a>> = HashSet::default();
    for w in spans {
        for (name, value) in &w.attributes {
            if let (Some(text), Some(code)) = (value.as_str(), codes.code(name)) {
                if is_kept(text) {
                    rows.insert((w.state.trace_id.as_str(), code, text));
                }
            }
        }
    }
    rows.into_iter().collect()
}

/// Adds `rows`, keeping the ones stored already.
pub(super) fn insert<'a, DB: Dialect>(q: &mut Sql<'a, DB>, run_id: &'a str, rows: &[TextRow<'a>]) {
    q.push("INSERT INTO span_texts (run_id, code, value, trace_id) ");
    push_rows(q, rows.iter().copied(), |(trace_id, code, value)| {
        [run_id.into(), code.into(), value.into(), trace_id.into()]
    });
    q.push(" ON CONFLICT (run_id, code, value, trace_id) DO NOTHING");
}

/// The values of a span filter that `span_texts` answers: `span.attr.NAME` equal
/// to a short string, or `in` a list of them. Its key and values, or `None`.
pub(super) fn looked_up(filter: &TraceFilter) -> Option<(&str, Vec<&str>)> {
    let Field::Span(SpanField::Attr(key)) = &filter.field else {
        return None;
    };
    let values = match &filter.test {
        Test::Compare(Op::Eq, value) => vec![short(value)?],
        // A number or boolean among the values is not listed: the spans are read.
        Test::In {
            negated: false,
            values,
        } => span_index::all(values, short)?,
        _ => return None,
    };
    Some((key.as_str(), values))
}

/// A string value.
fn text(value: &Value) -> Option<&str> {
    match value {
        Value::Text(text) => Some(text.as_str()),
        _ => None,
    }
}

/// A string value short enough to be listed.
fn short(value: &Value) -> Option<&str> {
    text(value).filter(|text| is_kept(text))
}

/// Pushes ` AND x.value IN (…)` for a filter [`looked_up`] answers, on the alias
/// `x` of `span_texts` (its code is tested by the caller).
pub(super) fn push_test<'a, DB: Dialect>(q: &mut Sql<'a, DB>, values: &[&'a str]) {
    q.push(" AND x.value IN (");
    for (i, value) in values.iter().enumerate() {
        q.push(if i == 0 { "" } else { ", " }).bind(*value);
    }
    q.push(")");
}

/// A span filter on strings that `span_texts` answers with the rows `span_ranges`
/// marks present (its third kind, for strings too long to list): `!=`, `not in`
/// or an order. A listed value passing proves its trace holds a passing span;
/// a long string's trace has its spans tested.
pub(super) enum Unlisted<'a> {
    /// `!=`, `<`, `<=`, `>` or `>=` a string.
    Compare(Op, &'a str),
    /// `not in` a list of strings.
    NotIn(Vec<&'a str>),
}

impl<'a> Unlisted<'a> {
    /// The key and test of `filter`, or `None`.
    pub(super) fn of(filter: &'a TraceFilter) -> Option<(&'a str, Self)> {
        let Field::Span(SpanField::Attr(key)) = &filter.field else {
            return None;
        };
        let test = match &filter.test {
            Test::Compare(Op::Eq, _) => return None,
            Test::Compare(op, Value::Text(text)) => Unlisted::Compare(*op, text),
            Test::In {
                negated: true,
                values,
            } => Unlisted::NotIn(span_index::all(values, text)?),
            _ => return None,
        };
        Some((key.as_str(), test))
    }

    /// Pushes ` AND` the test of the rows `x` of both tables (`span_index`): a
    /// listed value passing, or any string too long to list.
    pub(super) fn push<DB: Dialect>(&self, q: &mut Sql<'a, DB>) {
        q.push(" AND ((x.kind = -1 AND ");
        match self {
            Unlisted::Compare(op, text) => {
                let order = if *op == Op::Ne { "" } else { DB::BYTE_ORDER };
                q.push(format!("x.value{order} {} ", op.symbol()))
                    .bind(*text);
            }
            Unlisted::NotIn(values) => {
                q.push("x.value NOT IN (");
                for (i, value) in values.iter().enumerate() {
                    q.push(if i == 0 { "" } else { ", " }).bind(*value);
                }
                q.push(")");
            }
        }
        q.push(") OR x.kind = 2)");
    }
}
