//! Comparing spans: two subtrees aligned level by level (docs/api.md §8.13), the
//! traces that share a rollout id (§8.14), and two spans' bodies diffed (§8.15).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{SpanNode, TraceSummary};

/// The children aligned per request, on each side; past it the answer is cut.
pub const ALIGN_MAX_CHILDREN: usize = 10_000;
/// A duration counts as changed when the two differ by more than this share of the
/// longer one, unless the request names another.
pub const ALIGN_DURATION_THRESHOLD: f64 = 0.2;
/// Traces listed per rollout id.
pub const ROLLOUT_MATCHES_MAX: usize = 500;

/// How an aligned row's two spans relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Same,
    Changed,
    OnlyA,
    OnlyB,
}

/// One row of an alignment: a span of A, of B, or a matched pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlignedRow {
    pub a: Option<SpanNode>,
    pub b: Option<SpanNode>,
    pub change: Change,
    /// For a changed pair, what differs: `status`, `duration`, `tokens`, `children`,
    /// `errors`, `attributes`, `input`, `output`, `error`.
    pub differences: Vec<String>,
}

/// The children of A's span and of B's span, aligned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alignment {
    pub rows: Vec<AlignedRow>,
    /// A side had more than [`ALIGN_MAX_CHILDREN`] children; the rest are left out.
    pub truncated: bool,
}

/// The traces of a run that share a trace's rollout id, by step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutMatches {
    pub rollout_id: Option<String>,
    pub traces: Vec<TraceSummary>,
}

/// How a piece of a text diff reads on each side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffTag {
    Equal,
    Delete,
    Insert,
}

/// A run of text that is in both bodies, only in A's (`delete`) or only in B's
/// (`insert`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffPiece {
    pub tag: DiffTag,
    pub text: String,
}

/// A value that differs at a JSON path (`$.messages[2].content`): absent on a side
/// where it is `null` here and `missing` names the side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JsonChange {
    pub path: String,
    pub a: Option<Value>,
    pub b: Option<Value>,
}

/// One body of two spans compared: as text (a string, or a transcript as
/// `role: content` lines) or, for other JSON, as the paths whose values differ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BodyDiff {
    /// `input`, `output` or `error`.
    pub body: String,
    pub same: bool,
    /// `text` or `json`: which of the two lists below holds the differences.
    pub mode: String,
    pub text: Vec<DiffPiece>,
    pub changes: Vec<JsonChange>,
    /// A side was longer than the diff reads, or the changes ran past their limit.
    pub cut: bool,
}

/// The answer of `GET /runs/{run_id}/diff`: two spans' attributes and bodies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpanDiff {
    pub attributes: Vec<JsonChange>,
    pub bodies: Vec<BodyDiff>,
}
