//! Writing one trace's span events (docs/api.md's open/close objects) with deterministic ids.

use serde_json::{json, Map, Value};

use super::rng;

pub(super) const MS: i64 = 1_000;
pub(super) const SEC: i64 = 1_000_000;
pub(super) const MIN: i64 = 60 * SEC;
pub(super) const HOUR: i64 = 60 * MIN;

/// Events of one trace, appended in send order. Spans are numbered in open order, so
/// a span's id depends only on the trace and its position.
pub(super) struct TraceWriter {
    pub trace_id: String,
    salt: u64,
    opened: u64,
    events: Vec<Value>,
}

impl TraceWriter {
    pub(super) fn new(label: &str) -> TraceWriter {
        TraceWriter::with_id(rng::trace_id(label))
    }

    /// A trace whose id rises with `order`, as the SDK's do (see
    /// [`rng::ordered_trace_id`]).
    pub(super) fn ordered(order: u64, label: &str) -> TraceWriter {
        TraceWriter::with_id(rng::ordered_trace_id(order, label))
    }

    fn with_id(trace_id: String) -> TraceWriter {
        TraceWriter {
            salt: rng::hash(&trace_id),
            trace_id,
            opened: 0,
            events: Vec::new(),
        }
    }

    /// The id that the `n`th span (0 = first opened) of the trace named `label` gets.
    pub(super) fn id_at(label: &str, n: u64) -> String {
        rng::span_id(rng::hash(&rng::trace_id(label)), n)
    }

    /// Spans opened so far.
    pub(super) fn spans(&self) -> u64 {
        self.opened
    }

    pub(super) fn buffered(&self) -> usize {
        self.events.len()
    }

    /// The events written since the last call.
    pub(super) fn take(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.events)
    }

    /// Opens a span; `extra` (an object) adds fields such as step, attributes, input.
    pub(super) fn open(
        &mut self,
        parent: Option<&str>,
        kind: &str,
        name: &str,
        ts: i64,
        extra: Value,
    ) -> String {
        let span_id = rng::span_id(self.salt, self.opened);
        self.opened += 1;
        let mut event = json!({"op": "open", "trace_id": self.trace_id, "span_id": span_id,
            "parent_span_id": parent, "name": name, "kind": kind, "ts": ts});
        merge(&mut event, extra);
        self.events.push(event);
        span_id
    }

    /// Closes a span; `extra` adds output, error, attributes, metrics, token_count.
    pub(super) fn close(&mut self, span_id: &str, ts: i64, status: &str, extra: Value) {
        let mut event = json!({"op": "close", "trace_id": self.trace_id, "span_id": span_id,
            "ts": ts, "status": status});
        merge(&mut event, extra);
        self.events.push(event);
    }

    /// A leaf span: opened and closed at once.
    #[allow(
        clippy::too_many_arguments,
        reason = "a generator step takes each of its knobs by name"
    )]
    pub(super) fn leaf(
        &mut self,
        parent: &str,
        kind: &str,
        name: &str,
        start: i64,
        end: i64,
        status: &str,
        open_extra: Value,
        close_extra: Value,
    ) -> String {
        let id = self.open(Some(parent), kind, name, start, open_extra);
        self.close(&id, end, status, close_extra);
        id
    }
}

fn merge(event: &mut Value, extra: Value) {
    if let (Some(e), Value::Object(x)) = (event.as_object_mut(), extra) {
        e.extend(x);
    }
}

/// An `{"type", "message"}` error body.
pub(super) fn error(kind: &str, message: &str) -> Value {
    json!({"type": kind, "message": message})
}

/// An empty object, for spans with nothing extra.
pub(super) fn none() -> Value {
    Value::Object(Map::new())
}
