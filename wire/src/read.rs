//! Shapes of the read endpoints.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{SpanKind, SpanLink, SpanStatus};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    pub run_id: String,
    pub run_name: String,
    pub project: String,
    pub trace_id: String,
    pub root_span_id: Option<String>,
    pub name: String,
    pub kind: Option<SpanKind>,
    pub status: SpanStatus,
    pub kinds: Vec<SpanKind>,
    pub span_count: i64,
    pub error_count: i64,
    pub token_count: i64,
    pub iteration_count: i64,
    pub step: Option<i64>,
    pub rank: Option<i64>,
    pub thread_id: Option<String>,
    pub rollout_id: Option<String>,
    pub start_us: Option<i64>,
    pub end_us: Option<i64>,
    pub duration_us: Option<i64>,
    pub updated_us: i64,
    pub attributes: Map<String, Value>,
    /// Its annotations (on it and on its spans) as the trace list shows them; in
    /// lists only, and absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<crate::annotations::NoteChip>,
    /// Where its bodies matched a `text=` search; in such lists only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_match: Option<crate::text::TextMatch>,
}

/// The root attribute in which an SDK counts the spans of a trace it had to drop
/// (its queue was full), so that an incomplete trace says so.
pub const DROPPED_SPANS_ATTRIBUTE: &str = "treeline.dropped_spans";

/// How many spans an SDK dropped, read from a root's attributes: `None` for none.
pub fn dropped_spans(attributes: &Map<String, Value>) -> Option<i64> {
    attributes
        .get(DROPPED_SPANS_ATTRIBUTE)
        .and_then(Value::as_f64)
        .filter(|n| *n >= 1.0)
        .map(|n| n.min(i64::MAX as f64) as i64)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceWindow {
    pub since_us: Option<i64>,
    pub until_us: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceList {
    pub traces: Vec<TraceSummary>,
    pub next_cursor: Option<String>,
    pub window: Option<TraceWindow>,
    /// How many traces match, on a first page (none on a page after a cursor),
    /// counted up to [`MATCH_COUNT_LIMIT`]: `matched_more` says there are more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub matched_more: bool,
}

/// The most traces a list counts as matching; past it, "more than".
pub const MATCH_COUNT_LIMIT: i64 = 10_000;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SpanNode {
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: SpanKind,
    pub status: SpanStatus,
    pub start_us: i64,
    pub end_us: Option<i64>,
    pub duration_us: Option<i64>,
    pub step: Option<i64>,
    pub rank: Option<i64>,
    pub child_count: i64,
    pub error_count: i64,
    pub token_count: Option<i64>,
    pub orphan: bool,
    /// Creation order among siblings; children list by it.
    #[serde(default)]
    pub ordinal: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpanPage {
    pub spans: Vec<SpanNode>,
    pub next_cursor: Option<String>,
    /// The first span's place among those listed, counted from 0, for a page read
    /// at a place or around a span (an older server leaves it out).
    #[serde(default)]
    pub from: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpanDetail {
    #[serde(flatten)]
    pub node: SpanNode,
    pub run_id: String,
    pub trace_id: String,
    pub thread_id: Option<String>,
    pub attributes: Map<String, Value>,
    pub metrics: Map<String, Value>,
    pub links: Vec<SpanLink>,
    pub input: Option<Value>,
    pub output: Option<Value>,
    pub error: Option<Value>,
    pub input_truncated: bool,
    pub output_truncated: bool,
    pub path: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepActivity {
    pub step: i64,
    pub traces: i64,
    pub errored: i64,
    pub running: i64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepTotals {
    pub traces: i64,
    pub errored: i64,
    pub running: i64,
    pub unstepped: i64,
    pub min_step: Option<i64>,
    pub max_step: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepsResponse {
    pub steps: Vec<StepActivity>,
    pub totals: StepTotals,
    pub truncated: bool,
    pub limit: usize,
}

/// The first distinct steps the timeline covers.
pub const STEP_LIMIT: usize = 2_000;
