//! `span_ranges`: each trace's span numbers and booleans, one row per attribute
//! code and kind, with the least and greatest value its spans were written with.
//! A trace holds a span over a bound exactly when its greatest value is over it
//! (under: its least), so `span.attr.NAME > 5`, `<= 0.5` and `= true` list their
//! traces from an index instead of reading every span of the run (about 0.4 s on
//! `bench rollouts`' run of 100,000 traces). A row a trace, not a span: a trace of
//! 25 spans with a dozen attributes has one per name, whatever its values.
//!
//! A number's equality is proved by a row whose least or greatest value is the
//! number; a trace whose range only holds it has its spans tested. Rows only
//! widen: a value a later batch overwrote stays within them, and the trace is
//! named in `span_attribute_overwrites` (`span_index`).

use foldhash::HashMap;
use serde_json::Value as Json;
use treeline_wire::filter::{Field, Op, SpanField, Test, TraceFilter, Value};

use super::attribute_codes::BatchCodes;
use super::dialect::{Dialect, Sql};
use super::ingest::SpanWrite;
use super::statements::push_rows;

/// Rows bound in one upsert: six columns each, far under SQLite's bound.
pub(super) const CHUNK: usize = 1_000;

/// The kind of a number's row.
const NUMBER: i64 = 0;
/// The kind of a boolean's row: false is 0, true 1.
const BOOLEAN: i64 = 1;

/// A row: the trace, the attribute's code, its kind, and the least and greatest
/// value.
pub(super) type RangeRow<'a> = (&'a str, i64, i64, f64, f64);

/// The rows that `spans`' numbers and booleans make, a trace's spans folded into
/// one per code and kind, in no order. A name without a code is skipped: the
/// span upsert fails on it first.
pub(super) fn rows<'a>(spans: &'a [SpanWrite], codes: &BatchCodes) -> Vec<RangeRow<'a>> {
    let mut ranges: HashMap<(&'a str, i64, i64), (f64, f64)> = HashMap::default();
    for w in spans {
        for (name, value) in &w.attributes {
            let (kind, v) = match value {
                Json::Bool(b) => (BOOLEAN, f64::from(u8::from(*b))),
                Json::Number(n) => match n.as_f64() {
                    Some(v) => (NUMBER, v),
                    None => continue,
                },
                _ => continue,
            };
            let Some(code) = codes.code(name) else {
                continue;
            };
            ranges
                .entry((w.state.trace_id.as_str(), code, kind))
                .and_modify(|(lo, hi)| {
                    *lo = lo.min(v);
                    *hi = hi.max(v);
                })
                .or_insert((v, v));
        }
    }
    let rows = ranges.into_iter();
    rows.map(|((t, code, kind), (lo, hi))| (t, code, kind, lo, hi))
        .collect()
}

/// Adds `rows`, widening the ones stored already. A row the batch leaves as it
/// was is not written again.
pub(super) fn upsert<'a, DB: Dialect>(q: &mut Sql<'a, DB>, run_id: &'a str, rows: &[RangeRow<'a>]) {
    q.push("INSERT INTO span_ranges (run_id, trace_id, code, kind, lo, hi) ");
    push_rows(q, rows.iter().copied(), |(trace_id, code, kind, lo, hi)| {
        [
            run_id.into(),
            trace_id.into(),
            code.into(),
            kind.into(),
            lo.into(),
            hi.into(),
        ]
    });
    q.push(format!(
        " ON CONFLICT (run_id, trace_id, code, kind) DO UPDATE \
         SET lo = {least}(span_ranges.lo, excluded.lo), hi = {greatest}(span_ranges.hi, excluded.hi) \
         WHERE excluded.lo < span_ranges.lo OR excluded.hi > span_ranges.hi",
        least = DB::LEAST,
        greatest = DB::GREATEST,
    ));
}

/// A span filter that `span_ranges` answers: `span.attr.NAME` compared with a
/// number (not `!=`), or equal or unequal to a boolean.
#[derive(Clone, Copy, Debug)]
pub(super) struct RangeTest<'a> {
    key: &'a str,
    kind: i64,
    op: Op,
    bound: f64,
}

impl<'a> RangeTest<'a> {
    /// The test `filter` makes of the rows, or `None`.
    pub(super) fn of(filter: &'a TraceFilter) -> Option<Self> {
        let Field::Span(SpanField::Attr(key)) = &filter.field else {
            return None;
        };
        let Test::Compare(op, value) = &filter.test else {
            return None;
        };
        let (kind, op, bound) = match value {
            Value::Number(_) if *op == Op::Ne => return None,
            Value::Number(n) => (NUMBER, *op, *n),
            // `!= true` is `= false`: the grammar compares booleans with = and != only.
            Value::Bool(b) => (BOOLEAN, Op::Eq, f64::from(u8::from(*b != (*op == Op::Ne)))),
            Value::Text(_) => return None,
        };
        Some(RangeTest {
            key: key.as_str(),
            kind,
            op,
            bound,
        })
    }

    /// Pushes the condition under which a passing row proves that its trace holds a
    /// passing span, unless a later batch overwrote one, then ` AND `: a bound is
    /// proved by any passing row, a number's equality only by a row whose least or
    /// greatest value is the number (both are values a span had).
    pub(super) fn push_proof(&self, q: &mut Sql<'a, impl Dialect>) {
        if self.kind == NUMBER && self.op == Op::Eq {
            q.push("(x.lo = ")
                .bind(self.bound)
                .push(" OR x.hi = ")
                .bind(self.bound)
                .push(") AND ");
        }
    }

    /// Pushes ` AND` the test, on the alias `x` of `span_ranges`. A name no span
    /// carries has no code and matches nothing.
    pub(super) fn push(&self, q: &mut Sql<'a, impl Dialect>) {
        q.push(" AND x.code = (SELECT code FROM attribute_names WHERE name = ")
            .bind(self.key)
            .push(format!(") AND x.kind = {} AND ", self.kind));
        let bound = self.bound;
        match (self.kind, self.op) {
            (BOOLEAN, _) if bound > 0.0 => q.push("x.hi = 1"),
            (BOOLEAN, _) => q.push("x.lo = 0"),
            (_, Op::Gt) => q.push("x.hi > ").bind(bound),
            (_, Op::Ge) => q.push("x.hi >= ").bind(bound),
            (_, Op::Lt) => q.push("x.lo < ").bind(bound),
            (_, Op::Le) => q.push("x.lo <= ").bind(bound),
            (_, Op::Eq | Op::Ne) => q
                .push("x.hi >= ")
                .bind(bound)
                .push(" AND x.lo <= ")
                .bind(bound),
        };
    }
}
