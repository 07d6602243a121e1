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
//!
//! A third kind of row only says that a name is there, for the values that
//! `span_texts` does not list either (long strings, arrays, objects): with both
//! tables, `span.attr.NAME exists` lists its traces from rows too.

use foldhash::HashMap;
use serde_json::Value as Json;
use treeline_wire::filter::{Field, Op, SpanField, Test, TraceFilter, Value};

use super::attribute_codes::BatchCodes;
use super::dialect::{Dialect, Sql};
use super::ingest::SpanWrite;
use super::statements::push_rows;
use super::{span_index, span_texts};

/// Rows bound in one upsert: six columns each, far under SQLite's bound.
pub(super) const CHUNK: usize = 1_000;

/// The kind of a number's row.
const NUMBER: i64 = 0;
/// The kind of a boolean's row: false is 0, true 1.
const BOOLEAN: i64 = 1;
/// The kind of a row that only says the name is there (its least and greatest are
/// 0): for a value `span_texts` does not list, a long string, an array or an
/// object. With those two tables, a name's presence (`exists`) is found from rows.
const OTHER: i64 = 2;

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
                    None => (OTHER, 0.0),
                },
                Json::String(text) if span_texts::is_kept(text) => continue,
                Json::String(_) | Json::Array(_) | Json::Object(_) => (OTHER, 0.0),
                Json::Null => continue,
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

/// A span filter that `span_ranges` answers: `span.attr.NAME` compared with
/// numbers (`<`, `=`, `!=`, `in`, `not in`, …), or with booleans.
#[derive(Clone, Debug)]
pub(super) struct RangeTest<'a> {
    key: &'a str,
    test: RowTest,
}

/// What a row of a passing trace says, unless a later batch overwrote a value.
#[derive(Clone, Debug)]
enum RowTest {
    /// A number beyond a bound (`<`, `<=`, `>`, `>=`): exact.
    Bound(Op, f64),
    /// A number among these: a row whose range holds one may pass.
    Among(Vec<f64>),
    /// A number other than these: a row not of one listed number may pass.
    Besides(Vec<f64>),
    /// A boolean: whether true passes, whether false does. Exact.
    Boolean { truth: bool, falsity: bool },
}

impl<'a> RangeTest<'a> {
    /// The test `filter` makes of the rows, or `None`: for strings, for lists that
    /// mix kinds, and for `exists`.
    pub(super) fn of(filter: &'a TraceFilter) -> Option<Self> {
        let Field::Span(SpanField::Attr(key)) = &filter.field else {
            return None;
        };
        let test = match &filter.test {
            Test::Compare(op, Value::Number(n)) => match op {
                Op::Eq => RowTest::Among(vec![*n]),
                Op::Ne => RowTest::Besides(vec![*n]),
                _ => RowTest::Bound(*op, *n),
            },
            Test::Compare(op, Value::Bool(b)) => RowTest::boolean(&[*b], *op == Op::Ne),
            Test::In { negated, values } => {
                if let Some(numbers) = span_index::all(values, |v| match v {
                    Value::Number(n) => Some(*n),
                    _ => None,
                }) {
                    if *negated {
                        RowTest::Besides(numbers)
                    } else {
                        RowTest::Among(numbers)
                    }
                } else {
                    let booleans = span_index::all(values, |v| match v {
                        Value::Bool(b) => Some(*b),
                        _ => None,
                    })?;
                    RowTest::boolean(&booleans, *negated)
                }
            }
            Test::Compare(_, Value::Text(_)) | Test::Exists => return None,
        };
        Some(RangeTest {
            key: key.as_str(),
            test,
        })
    }

    /// Pushes the condition under which a passing row proves that its trace holds a
    /// passing span, unless a later batch overwrote one, then ` AND `. A row's least
    /// and greatest are values a span had, so a number's equality is proved by a row
    /// whose least or greatest is listed, and its inequality by one whose least or
    /// greatest is not. A bound and a boolean are proved by any passing row.
    pub(super) fn push_proof<DB: Dialect>(&self, q: &mut Sql<'a, DB>) {
        if self.split::<DB>().is_some() {
            // Said by each part of the rows (`push_table`).
            q.push("x.proved AND ");
            return;
        }
        let (numbers, join, negate) = match &self.test {
            RowTest::Among(numbers) => (numbers, " OR ", ""),
            RowTest::Besides(numbers) => (numbers, " OR ", "NOT "),
            RowTest::Bound(..) | RowTest::Boolean { .. } => return,
        };
        q.push("(");
        for (i, column) in ["x.lo", "x.hi"].into_iter().enumerate() {
            q.push(format!(
                "{}{column} {negate}IN (",
                if i == 0 { "" } else { join }
            ));
            push_numbers(q, numbers);
            q.push(")");
        }
        q.push(") AND ");
    }

    /// The attribute name tested.
    pub(super) fn key(&self) -> &'a str {
        self.key
    }

    /// The numbers of an equality that `DB` reads in two parts (`push_table`).
    fn split<DB: Dialect>(&self) -> Option<&[f64]> {
        match &self.test {
            RowTest::Among(numbers) if DB::SPLIT_EQUALITY => Some(numbers),
            _ => None,
        }
    }

    /// Pushes the rows to test, as a table read as `x`: `span_ranges`, or on
    /// SQLite for a number's equality, its rows in two parts that share none.
    /// First those whose greatest value is listed (`span_ranges_hi`), then those
    /// whose values differ with a listed number within them (`span_ranges_spread`,
    /// which holds only those). A trace's row is most often one value, and a
    /// read by least and greatest together scanned most of the name's rows: 61–67
    /// ms p95 on `bench rollouts`. Each part says whether its row proves its
    /// trace passes (`proved`, see [`RangeTest::push_proof`]), from the columns
    /// of its index: reading a row's least for the proof made SQLite scan the
    /// run's rows instead.
    pub(super) fn push_table<DB: Dialect>(&self, q: &mut Sql<'a, DB>) {
        let Some(numbers) = self.split::<DB>() else {
            q.push("span_ranges");
            return;
        };
        let columns = "SELECT run_id, trace_id, code, kind";
        q.push(format!(
            "({columns}, TRUE AS proved FROM span_ranges WHERE hi IN ("
        ));
        push_numbers(q, numbers);
        q.push(format!(") UNION ALL {columns}, lo IN ("));
        push_numbers(q, numbers);
        // The least and greatest listed bound the index's range, which the
        // numbers' OR alone did not (the run's rows were read).
        let least = numbers.iter().copied().fold(f64::INFINITY, f64::min);
        let greatest = numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        q.push(") AS proved FROM span_ranges WHERE lo < hi AND lo <= ")
            .bind(greatest)
            .push(" AND hi > ")
            .bind(least)
            .push(" AND hi NOT IN (");
        push_numbers(q, numbers);
        q.push(") AND ");
        push_any_within(q, numbers, ("lo", "hi > "));
        q.push(")");
    }

    /// Pushes ` AND` the test but for the name's code, on the alias `x` of
    /// `span_ranges`.
    pub(super) fn push<DB: Dialect>(&self, q: &mut Sql<'a, DB>) {
        let kind = match self.test {
            RowTest::Boolean { .. } => BOOLEAN,
            _ => NUMBER,
        };
        q.push(format!(" AND x.kind = {kind}"));
        if self.split::<DB>().is_some() {
            // Said by each part of the rows (`push_table`).
            return;
        }
        q.push(" AND ");
        match &self.test {
            RowTest::Boolean {
                truth: true,
                falsity: true,
            } => q.push("1 = 1"),
            RowTest::Boolean { truth: true, .. } => q.push("x.hi = 1"),
            RowTest::Boolean { falsity: true, .. } => q.push("x.lo = 0"),
            RowTest::Boolean { .. } => q.push("1 = 0"),
            RowTest::Bound(op, bound) => {
                let column = if matches!(op, Op::Gt | Op::Ge) {
                    "x.hi"
                } else {
                    "x.lo"
                };
                q.push(format!("{column} {} ", op.symbol())).bind(*bound)
            }
            RowTest::Among(numbers) => push_any_within(q, numbers, ("x.lo", "x.hi >= ")),
            // Only a row of one number, listed, holds no other.
            RowTest::Besides(numbers) => {
                q.push("NOT (x.lo = x.hi AND x.lo IN (");
                push_numbers(q, numbers);
                q.push("))")
            }
        };
    }
}

impl RowTest {
    /// A boolean's test: equal to one of `values`, or with `negated`, to none.
    fn boolean(values: &[bool], negated: bool) -> Self {
        let holds = |b: bool| values.contains(&b) != negated;
        RowTest::Boolean {
            truth: holds(true),
            falsity: holds(false),
        }
    }
}

/// Pushes `(lo <= n AND hi > n OR …)` for each of `numbers`, given the least's
/// column and the greatest's with its comparison (`hi > `, `x.hi >= `).
fn push_any_within<'a, 'q, DB: Dialect>(
    q: &'q mut Sql<'a, DB>,
    numbers: &[f64],
    (lo, hi_over): (&str, &str),
) -> &'q mut Sql<'a, DB> {
    q.push("(");
    for (i, n) in numbers.iter().enumerate() {
        q.push(format!("{}{lo} <= ", if i == 0 { "" } else { " OR " }))
            .bind(*n)
            .push(format!(" AND {hi_over}"))
            .bind(*n);
    }
    q.push(")")
}

fn push_numbers<'a>(q: &mut Sql<'a, impl Dialect>, numbers: &[f64]) {
    for (i, n) in numbers.iter().enumerate() {
        q.push(if i == 0 { "" } else { ", " }).bind(*n);
    }
}
