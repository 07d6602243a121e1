//! One level of a span's children for an alignment, read as one JSON value (SQLite
//! hands each row of a plain SELECT across threads on its own, about 25 µs a row
//! here: most of a 10,000-span level's time), and, for spans stored before body
//! fingerprints, which bodies of matched pairs differ, compared as stored text
//! inside the database.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use treeline_wire::{SpanKind, SpanNode, SpanStatus};

use super::dialect::{Dialect, Sql};
use super::{StoreError, StoreResult};

/// A child span as an alignment needs it: its node, its attributes as stored JSON
/// text, parsed only when two spans' texts differ ([`ChildNode::same_attributes`]),
/// and its bodies' fingerprints.
#[derive(Clone, Debug)]
pub struct ChildNode {
    pub node: SpanNode,
    pub attributes: Box<RawValue>,
    /// Input, output and error: each body's fingerprint taken at ingest (0 for no
    /// body), or `None` for a span stored before fingerprints, whose bodies are
    /// compared as text.
    pub bodies: [Option<i64>; 3],
}

impl ChildNode {
    /// Whether the two spans have the same attributes: the same text, or, set in
    /// another order, the same names and values.
    pub fn same_attributes(&self, other: &ChildNode) -> bool {
        let (a, b) = (self.attributes.get(), other.attributes.get());
        if a == b {
            return true;
        }
        // Names borrowed from the text, values compared as text first (both were
        // written by the server, compactly): only a value whose text differs is parsed.
        type Flat<'t> = BTreeMap<&'t str, &'t RawValue>;
        let same_value = |x: &RawValue, y: &RawValue| {
            x.get() == y.get() || {
                let parse = |v: &RawValue| serde_json::from_str::<Value>(v.get()).ok();
                matches!((parse(x), parse(y)), (Some(x), Some(y)) if x == y)
            }
        };
        match (
            serde_json::from_str::<Flat>(a),
            serde_json::from_str::<Flat>(b),
        ) {
            (Ok(x), Ok(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .all(|(name, v)| y.get(name).is_some_and(|w| same_value(v, w)))
            }
            // A name with an escape cannot be borrowed: the whole objects are parsed.
            _ => {
                let parse = |text: &str| serde_json::from_str::<Map<String, Value>>(text).ok();
                matches!((parse(a), parse(b)), (Some(x), Some(y)) if x == y)
            }
        }
    }
}

/// Which bodies of a matched pair differ: the pair's index, then input, output and
/// error.
pub type BodyDifferences = (usize, [bool; 3]);

/// A child as the query's JSON spells it: an array of [`COLUMNS`]' values, in order
/// (an array, not an object: no names to write and read 10,000 times).
#[derive(Deserialize)]
struct Raw {
    span_id: String,
    parent_span_id: Option<String>,
    tree_parent: Option<String>,
    name: String,
    kind: Option<SpanKind>,
    status: SpanStatus,
    start_us: Option<i64>,
    end_us: Option<i64>,
    step: Option<i64>,
    rank: Option<i64>,
    ordinal: i64,
    child_count: i64,
    error_count: i64,
    token_count: Option<i64>,
    attributes: Box<RawValue>,
    input_hash: Option<i64>,
    output_hash: Option<i64>,
    error_hash: Option<i64>,
}

/// `(column, is_json)`: the fields of [`Raw`], in its order.
const COLUMNS: &[(&str, bool)] = &[
    ("s.span_id", false),
    ("s.parent_span_id", false),
    ("s.tree_parent", false),
    ("s.name", false),
    ("s.kind", false),
    ("s.status", false),
    ("s.start_us", false),
    ("s.end_us", false),
    ("s.step", false),
    ("s.rank", false),
    ("s.ordinal", false),
    ("s.child_count", false),
    ("s.error_count", false),
    ("s.token_count", false),
    ("s.attributes", true),
    ("s.input_hash", false),
    ("s.output_hash", false),
    ("s.error_hash", false),
];

/// Up to `limit` children of `parent`, in sibling order, as one JSON array in the
/// column `spans`.
pub(super) fn query<'a, DB: Dialect>(
    run_id: &'a str,
    trace_id: &'a str,
    parent: &'a str,
    limit: usize,
) -> Sql<'a, DB> {
    // The page of ids in a subquery, the arrays built in the aggregate itself: an
    // array passed up from a subquery is text that SQLite would parse again. (Writing
    // them by concatenation instead was 2.7 times slower in SQLite.)
    let mut q = Sql::new(format!(
        "SELECT {} AS spans FROM (SELECT span_id AS id, ordinal AS o1, start_us AS o2 \
         FROM spans WHERE run_id = ",
        DB::json_array_agg(&json_array::<DB>(), "k.o1, k.o2, k.id"),
    ));
    q.bind(run_id)
        .push(" AND trace_id = ")
        .bind(trace_id)
        .push(" AND tree_parent = ")
        .bind(parent)
        .push(" ORDER BY ordinal, start_us, span_id LIMIT ")
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .push(") k JOIN spans s ON s.run_id = ")
        .bind(run_id)
        .push(" AND s.trace_id = ")
        .bind(trace_id)
        .push(" AND s.span_id = k.id");
    q
}

/// The JSON array of a child's [`COLUMNS`], in the database's words.
fn json_array<DB: Dialect>() -> String {
    let (function, as_json) = DB::JSON_ARRAY;
    let args: Vec<String> = COLUMNS
        .iter()
        .map(|(column, is_json)| match is_json {
            true => as_json.replace("{}", column),
            false => column.to_string(),
        })
        .collect();
    format!("{function}({})", args.join(", "))
}

/// For each pair of `pairs` (a JSON array of `[a_span, b_span]`) whose stored bodies
/// are not the same text: one row whose column `differ` is a JSON array of
/// `[index, input, output, error]`, each flag saying whether that body differs.
pub(super) fn differences_query<'a, DB: Dialect>(
    run_id: &'a str,
    a_trace: &'a str,
    b_trace: &'a str,
    pairs: String,
) -> Sql<'a, DB> {
    let p = DB::JSON_PAIRS;
    // A packed body is compared as its frame: the same text packs the same way.
    let differs = |body: &str| match body {
        "error" => format!("a.{body} {} b.{body}", p.differs),
        _ => format!(
            "(a.{body} {d} b.{body} OR a.{body}_z {d} b.{body}_z)",
            d = p.differs
        ),
    };
    let mut q = Sql::new(format!(
        "SELECT {} AS differ FROM {}",
        DB::json_array_agg(
            &format!(
                "{}({}, {}, {}, {})",
                p.array,
                p.index,
                differs("input"),
                differs("output"),
                differs("error")
            ),
            p.index
        ),
        p.before
    ));
    q.bind(pairs)
        .push(format!("{} {} spans a ON a.run_id = ", p.after, p.join))
        .bind(run_id)
        .push(" AND a.trace_id = ")
        .bind(a_trace)
        .push(format!(
            " AND a.span_id = {} {} spans b ON b.run_id = ",
            p.first, p.join
        ))
        .bind(run_id)
        .push(" AND b.trace_id = ")
        .bind(b_trace)
        .push(format!(
            " AND b.span_id = {} WHERE {} OR {} OR {}",
            p.second,
            differs("input"),
            differs("output"),
            differs("error")
        ));
    q
}

/// The children from the query's JSON.
pub(super) fn parse(text: &str) -> StoreResult<Vec<ChildNode>> {
    let raw: Vec<Raw> =
        serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(raw
        .into_iter()
        .map(|r| {
            let start_us = r.start_us.unwrap_or(0);
            let orphan = r.parent_span_id.is_some() && r.tree_parent.as_deref() == Some("");
            ChildNode {
                node: SpanNode {
                    span_id: r.span_id,
                    parent_span_id: r.parent_span_id,
                    name: r.name,
                    kind: r.kind.unwrap_or(SpanKind::Custom),
                    status: r.status,
                    start_us,
                    end_us: r.end_us,
                    duration_us: r.end_us.map(|e| e.saturating_sub(start_us)),
                    step: r.step,
                    rank: r.rank,
                    child_count: r.child_count,
                    error_count: r.error_count,
                    token_count: r.token_count,
                    orphan,
                    ordinal: r.ordinal,
                },
                attributes: r.attributes,
                bodies: [r.input_hash, r.output_hash, r.error_hash],
            }
        })
        .collect())
}

/// The differing pairs from their query's JSON: `[index, input, output, error]`,
/// the flags as booleans (PostgreSQL) or 0 and 1 (SQLite).
pub(super) fn parse_differences(text: &str) -> StoreResult<Vec<BodyDifferences>> {
    let raw: Vec<(usize, Value, Value, Value)> =
        serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let set = |v: &Value| v.as_bool().unwrap_or_else(|| v.as_i64() == Some(1));
    Ok(raw
        .into_iter()
        .map(|(i, input, output, error)| (i, [set(&input), set(&output), set(&error)]))
        .collect())
}
