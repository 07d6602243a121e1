use treeline_wire::{SpanKind, SpanStatus};

/// The columns of a span that the ingest rules read; bodies stay in the database.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanState {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    /// Where the tree lists the span: `Some("")` at the top (a root, or an orphan whose
    /// parent has not arrived), `Some(parent)` under its parent, `None` not yet
    /// listable (only a close, or a placeholder for a parent that children named).
    pub tree_parent: Option<String>,
    pub name: String,
    pub kind: Option<SpanKind>,
    pub status: SpanStatus,
    pub start_us: Option<i64>,
    pub end_us: Option<i64>,
    pub step: Option<i64>,
    pub rank: Option<i64>,
    /// Place among siblings: the client's, or the parent's child count on arrival.
    pub ordinal: i64,
    pub thread_id: Option<String>,
    pub has_open: bool,
    pub has_close: bool,
    pub child_count: i64,
    /// Spans beneath this one that ended in error.
    pub error_count: i64,
    pub token_count: Option<i64>,
    pub attr_count: i64,
}

impl SpanState {
    pub fn placeholder(trace_id: &str, span_id: &str) -> Self {
        SpanState {
            trace_id: trace_id.to_string(),
            span_id: span_id.to_string(),
            parent_span_id: None,
            tree_parent: None,
            name: String::new(),
            kind: None,
            status: SpanStatus::Running,
            start_us: None,
            end_us: None,
            step: None,
            rank: None,
            ordinal: 0,
            thread_id: None,
            has_open: false,
            has_close: false,
            child_count: 0,
            error_count: 0,
            token_count: None,
            attr_count: 0,
        }
    }

    pub fn is_root(&self) -> bool {
        self.has_open && self.parent_span_id.is_none()
    }
}

/// The per-trace summary row kept up to date at ingest, so lists never scan spans.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceState {
    pub trace_id: String,
    pub root_span_id: Option<String>,
    pub name: String,
    pub kind: Option<SpanKind>,
    /// The root's status; `running` until the root closes.
    pub status: SpanStatus,
    pub kinds: i64,
    pub span_count: i64,
    pub error_count: i64,
    /// Tokens of the spans other than the root.
    pub child_tokens: i64,
    /// Tokens the root reported itself; when set, it is the trace's count.
    pub root_tokens: Option<i64>,
    pub iteration_count: i64,
    pub step: Option<i64>,
    pub rank: Option<i64>,
    pub thread_id: Option<String>,
    pub rollout_id: Option<String>,
    pub start_us: Option<i64>,
    pub end_us: Option<i64>,
    pub updated_us: i64,
    /// What its rows weigh, as [`super::sizes`] counts it.
    pub bytes: i64,
}

impl TraceState {
    pub fn new(trace_id: &str, now: i64) -> Self {
        TraceState {
            trace_id: trace_id.to_string(),
            root_span_id: None,
            name: String::new(),
            kind: None,
            status: SpanStatus::Running,
            kinds: 0,
            span_count: 0,
            error_count: 0,
            child_tokens: 0,
            root_tokens: None,
            iteration_count: 0,
            step: None,
            rank: None,
            thread_id: None,
            rollout_id: None,
            start_us: None,
            end_us: None,
            updated_us: now,
            bytes: super::sizes::trace_row(trace_id),
        }
    }

    pub fn token_count(&self) -> i64 {
        self.root_tokens.unwrap_or(self.child_tokens)
    }

    pub fn activity(&self) -> Activity {
        Activity {
            step: self.step,
            errored: self.status == SpanStatus::Error || self.error_count > 0,
            failed: self.status == SpanStatus::Error,
            running: self.status == SpanStatus::Running,
        }
    }
}

/// How one trace counts in the per-step timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Activity {
    pub step: Option<i64>,
    /// Something in it failed (its root, or a span beneath).
    pub errored: bool,
    /// Its root failed.
    pub failed: bool,
    pub running: bool,
}
