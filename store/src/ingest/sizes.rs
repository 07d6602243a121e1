//! What a write adds to its trace's and run's `bytes`: an estimate of the bytes it
//! stores, counted as events arrive so no read ever measures rows. The weights
//! only need to be right relative to each other: a run's size on disk is its share
//! of the database's measured size in proportion to these counts (see
//! `Reader::size_scale`). Migration 20 counts stored rows with the same weights.

use serde_json::{Map, Value};

/// A new span row before its text: the fixed columns, the row's header and its
/// two index entries, which repeat the run and both ids.
pub const SPAN_ROW: i64 = 160;

/// A new trace summary row before its text, with its four index entries.
pub const TRACE_ROW: i64 = 200;

/// A metric point, before its key: the row and its primary key.
pub const METRIC_POINT: i64 = 40;

/// A new span row: what it costs before any event's text.
pub fn span_row(trace_id: &str, span_id: &str) -> i64 {
    SPAN_ROW + 3 * (len(trace_id) + len(span_id))
}

/// A new trace row.
pub fn trace_row(trace_id: &str) -> i64 {
    TRACE_ROW + 3 * len(trace_id)
}

/// A map's JSON text, estimated without writing it.
pub fn map_bytes(map: &Map<String, Value>) -> i64 {
    map.iter().fold(2, |n, (k, v)| {
        n.saturating_add(len(k) + 4).saturating_add(value_bytes(v))
    })
}

/// A span's attributes as stored, each name written as its code
/// (`crate::attribute_codes`): a few digits, counted as two.
pub fn coded_map_bytes(map: &Map<String, Value>) -> i64 {
    map.values().fold(2, |n, v| {
        n.saturating_add(2 + 4).saturating_add(value_bytes(v))
    })
}

/// A value's JSON text, estimated: strings and containers by their contents,
/// integers by their digits, other numbers as eight bytes.
pub fn value_bytes(v: &Value) -> i64 {
    match v {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => i64::from(u.checked_ilog10().unwrap_or(0)) + 1,
            (None, Some(i)) => i64::from(i.unsigned_abs().checked_ilog10().unwrap_or(0)) + 2,
            _ => 8,
        },
        Value::String(s) => len(s) + 2,
        Value::Array(items) => items
            .iter()
            .fold(2, |n, v| n.saturating_add(value_bytes(v) + 1)),
        Value::Object(map) => map_bytes(map),
    }
}

/// A body's stored bytes, and its text index's: about half its length, for text
/// whose words repeat as prose and chat do. A packed body's trace is weighed again
/// for what packing saved (`Batch::finish`).
pub fn body_bytes(json: &str) -> i64 {
    let n = len(json);
    n.saturating_add(n / 2)
}

pub fn len(s: &str) -> i64 {
    len_bytes(s.as_bytes())
}

pub fn len_bytes(b: &[u8]) -> i64 {
    i64::try_from(b.len()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_maps_estimate_is_near_its_json_text() {
        let v = json!({"model": "policy-7b", "temperature": 0.7, "tags": ["a", "bc"],
                       "nested": {"ok": true, "n": null}});
        let Value::Object(map) = &v else {
            unreachable!()
        };
        let real = i64::try_from(v.to_string().len()).unwrap_or(0);
        let estimate = map_bytes(map);
        assert!((estimate - real).abs() * 5 <= real, "{estimate} vs {real}");
    }
}
