//! Turning rows into wire types, shared by both backends through [`DbRow`]: the
//! column lists here are the same in both schemas.

use serde_json::{Map, Value};
use sqlx::Row;
use treeline_wire::{
    RunDetail, RunStatus, RunSummary, SpanDetail, SpanKind, SpanLink, SpanNode, TraceSummary,
};

use super::dialect::Dialect;
use super::sizes::SizeScale;
use super::{IdempotencyRecord, StoreError, StoreResult};
use crate::ingest::{SpanState, TraceState};

/// Typed column access that reads the same on SQLite and PostgreSQL.
pub trait DbRow {
    fn int(&self, col: &str) -> StoreResult<Option<i64>>;
    fn text(&self, col: &str) -> StoreResult<Option<String>>;
    fn flag(&self, col: &str) -> StoreResult<bool>;
    fn float(&self, col: &str) -> StoreResult<Option<f64>>;
    fn bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>>;

    /// A body: its text column, or its packed one (`COLUMN_z`) unpacked.
    fn body(&self, col: &str) -> StoreResult<Option<String>> {
        super::packed::body_text(self.text(col)?, self.bytes(&format!("{col}_z"))?)
    }

    fn req_int(&self, col: &str) -> StoreResult<i64> {
        self.int(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("{col} is null")))
    }
    fn req_text(&self, col: &str) -> StoreResult<String> {
        self.text(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("{col} is null")))
    }
    fn req_float(&self, col: &str) -> StoreResult<f64> {
        self.float(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("{col} is null")))
    }
}

impl DbRow for sqlx::sqlite::SqliteRow {
    fn int(&self, col: &str) -> StoreResult<Option<i64>> {
        Ok(self.try_get(col)?)
    }
    fn text(&self, col: &str) -> StoreResult<Option<String>> {
        Ok(self.try_get(col)?)
    }
    fn flag(&self, col: &str) -> StoreResult<bool> {
        Ok(self.try_get(col)?)
    }
    fn float(&self, col: &str) -> StoreResult<Option<f64>> {
        Ok(self.try_get(col)?)
    }
    fn bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.try_get(col)?)
    }
}

impl DbRow for sqlx::postgres::PgRow {
    fn int(&self, col: &str) -> StoreResult<Option<i64>> {
        Ok(self.try_get(col)?)
    }
    fn text(&self, col: &str) -> StoreResult<Option<String>> {
        Ok(self.try_get(col)?)
    }
    fn flag(&self, col: &str) -> StoreResult<bool> {
        Ok(self.try_get(col)?)
    }
    fn float(&self, col: &str) -> StoreResult<Option<f64>> {
        Ok(self.try_get(col)?)
    }
    fn bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.try_get(col)?)
    }
}

pub(super) const RUN_COLUMNS: &str =
    "run_id, project, name, status, start_us, end_us, trace_count, \
     errored_count, failed_count, updated_us, bytes";

pub(super) const SPAN_STATE_COLUMNS: &str =
    "s.trace_id, s.span_id, s.parent_span_id, s.tree_parent, \
     s.name, s.kind, s.status, s.start_us, s.end_us, s.step, s.rank, s.ordinal, s.thread_id, s.has_open, \
     s.has_close, s.child_count, s.error_count, s.token_count, s.attr_count";

pub(super) const SPAN_NODE_COLUMNS: &str =
    "s.span_id, s.parent_span_id, s.tree_parent, s.name, s.kind, \
     s.status, s.start_us, s.end_us, s.step, s.rank, s.ordinal, s.child_count, s.error_count, \
     s.token_count";

/// A span's columns past its node's, its attributes keyed by name again.
pub(super) fn span_body_columns<DB: Dialect>() -> String {
    format!(
        "s.thread_id, {} AS attributes, s.metrics, s.links, s.input, s.input_z, \
         s.output, s.output_z, s.error, s.input_truncated, s.output_truncated",
        DB::named_attributes("s.attributes")
    )
}

pub(super) const TRACE_STATE_COLUMNS: &str =
    "t.trace_id, t.root_span_id, t.name, t.kind, t.status, \
     t.kinds, t.span_count, t.error_count, t.child_tokens, t.root_tokens, t.iteration_count, \
     t.step, t.rank, t.thread_id, t.rollout_id, t.start_us, t.end_us, t.updated_us, t.bytes";

pub(super) const TRACE_COLUMNS: &str =
    "t.run_id, t.project, t.trace_id, t.root_span_id, t.name, t.kind, \
     t.status, t.kinds, t.span_count, t.error_count, t.child_tokens, t.root_tokens, \
     t.iteration_count, t.step, t.rank, t.thread_id, t.rollout_id, t.start_us, t.end_us, \
     t.updated_us, t.bytes, t.attributes";

fn parse<T: std::str::FromStr>(text: &str, what: &str) -> StoreResult<T> {
    text.parse()
        .map_err(|_| StoreError::Corrupt(format!("unknown {what} {text:?}")))
}

fn kind(r: &impl DbRow, col: &str) -> StoreResult<Option<SpanKind>> {
    r.text(col)?.map(|k| parse(&k, "kind")).transpose()
}

fn json_map(r: &impl DbRow, col: &str) -> StoreResult<Map<String, Value>> {
    match r.text(col)? {
        Some(text) => serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(e.to_string())),
        None => Ok(Map::new()),
    }
}

fn json_value(r: &impl DbRow, col: &str) -> StoreResult<Option<Value>> {
    parse_json(r.text(col)?)
}

/// A body as JSON, unpacked if it was packed.
fn body_value(r: &impl DbRow, col: &str) -> StoreResult<Option<Value>> {
    parse_json(r.body(col)?)
}

fn parse_json(text: Option<String>) -> StoreResult<Option<Value>> {
    text.map(|text| serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(e.to_string())))
        .transpose()
}

pub(super) fn links_json(links: &[SpanLink]) -> String {
    serde_json::to_string(links).unwrap_or_else(|_| "[]".into())
}

/// An attribute or metric map as stored, written straight from the map (no copy).
pub(super) fn object_json(map: &serde_json::Map<String, serde_json::Value>) -> String {
    serde_json::to_string(map).unwrap_or_else(|_| "{}".into())
}

pub(super) fn span_state(r: &impl DbRow) -> StoreResult<SpanState> {
    Ok(SpanState {
        trace_id: r.req_text("trace_id")?,
        span_id: r.req_text("span_id")?,
        parent_span_id: r.text("parent_span_id")?,
        tree_parent: r.text("tree_parent")?,
        name: r.req_text("name")?,
        kind: kind(r, "kind")?,
        status: parse(&r.req_text("status")?, "status")?,
        start_us: r.int("start_us")?,
        end_us: r.int("end_us")?,
        step: r.int("step")?,
        rank: r.int("rank")?,
        ordinal: r.req_int("ordinal")?,
        thread_id: r.text("thread_id")?,
        has_open: r.flag("has_open")?,
        has_close: r.flag("has_close")?,
        child_count: r.req_int("child_count")?,
        error_count: r.req_int("error_count")?,
        token_count: r.int("token_count")?,
        attr_count: r.req_int("attr_count")?,
    })
}

pub(super) fn trace_state(r: &impl DbRow) -> StoreResult<TraceState> {
    Ok(TraceState {
        trace_id: r.req_text("trace_id")?,
        root_span_id: r.text("root_span_id")?,
        name: r.req_text("name")?,
        kind: kind(r, "kind")?,
        status: parse(&r.req_text("status")?, "status")?,
        kinds: r.req_int("kinds")?,
        span_count: r.req_int("span_count")?,
        error_count: r.req_int("error_count")?,
        child_tokens: r.req_int("child_tokens")?,
        root_tokens: r.int("root_tokens")?,
        iteration_count: r.req_int("iteration_count")?,
        step: r.int("step")?,
        rank: r.int("rank")?,
        thread_id: r.text("thread_id")?,
        rollout_id: r.text("rollout_id")?,
        start_us: r.int("start_us")?,
        end_us: r.int("end_us")?,
        updated_us: r.req_int("updated_us")?,
        bytes: r.req_int("bytes")?,
    })
}

pub(super) fn trace_summary(r: &impl DbRow) -> StoreResult<TraceSummary> {
    let t = trace_state(r)?;
    let duration_us = match (t.start_us, t.end_us) {
        (Some(s), Some(e)) => Some(e.saturating_sub(s)),
        _ => None,
    };
    Ok(TraceSummary {
        run_id: r.req_text("run_id")?,
        run_name: r.req_text("run_name")?,
        project: r.req_text("project")?,
        token_count: t.token_count(),
        kinds: SpanKind::from_bits(t.kinds),
        attributes: json_map(r, "attributes")?,
        trace_id: t.trace_id,
        root_span_id: t.root_span_id,
        name: t.name,
        kind: t.kind,
        status: t.status,
        span_count: t.span_count,
        error_count: t.error_count,
        iteration_count: t.iteration_count,
        step: t.step,
        rank: t.rank,
        thread_id: t.thread_id,
        rollout_id: t.rollout_id,
        start_us: t.start_us,
        end_us: t.end_us,
        duration_us,
        updated_us: t.updated_us,
        notes: Vec::new(),
        text_match: None,
    })
}

pub(super) fn span_node(r: &impl DbRow) -> StoreResult<SpanNode> {
    let start_us = r.int("start_us")?.unwrap_or(0);
    let end_us = r.int("end_us")?;
    let parent_span_id = r.text("parent_span_id")?;
    let orphan = parent_span_id.is_some() && r.text("tree_parent")?.as_deref() == Some("");
    Ok(SpanNode {
        span_id: r.req_text("span_id")?,
        parent_span_id,
        name: r.req_text("name")?,
        kind: kind(r, "kind")?.unwrap_or(SpanKind::Custom),
        status: parse(&r.req_text("status")?, "status")?,
        start_us,
        end_us,
        duration_us: end_us.map(|e| e.saturating_sub(start_us)),
        step: r.int("step")?,
        rank: r.int("rank")?,
        child_count: r.req_int("child_count")?,
        error_count: r.req_int("error_count")?,
        token_count: r.int("token_count")?,
        orphan,
        ordinal: r.req_int("ordinal")?,
    })
}

pub(super) fn span_detail(
    r: &impl DbRow,
    run_id: &str,
    trace_id: &str,
    path: Vec<String>,
) -> StoreResult<SpanDetail> {
    let links = match r.text("links")? {
        Some(text) => {
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(e.to_string()))?
        }
        None => Vec::new(),
    };
    Ok(SpanDetail {
        node: span_node(r)?,
        run_id: run_id.to_string(),
        trace_id: trace_id.to_string(),
        thread_id: r.text("thread_id")?,
        attributes: json_map(r, "attributes")?,
        metrics: json_map(r, "metrics")?,
        links,
        input: body_value(r, "input")?,
        output: body_value(r, "output")?,
        error: json_value(r, "error")?,
        input_truncated: r.flag("input_truncated")?,
        output_truncated: r.flag("output_truncated")?,
        path,
    })
}

/// A run's summary; its counted weight becomes bytes on disk by `scale`.
pub(super) fn run_summary(r: &impl DbRow, scale: &SizeScale) -> StoreResult<RunSummary> {
    Ok(RunSummary {
        run_id: r.req_text("run_id")?,
        project: r.req_text("project")?,
        name: r.req_text("name")?,
        status: parse::<RunStatus>(&r.req_text("status")?, "run status")?,
        start_us: r.req_int("start_us")?,
        end_us: r.int("end_us")?,
        trace_count: r.req_int("trace_count")?,
        error_trace_count: r.req_int("errored_count")?,
        failed_trace_count: r.req_int("failed_count")?,
        updated_us: r.req_int("updated_us")?,
        size_bytes: scale.bytes(r.req_int("bytes")?),
        values: Vec::new(),
    })
}

pub(super) fn run_detail(
    r: &impl DbRow,
    metric_keys: Vec<String>,
    scale: &SizeScale,
) -> StoreResult<RunDetail> {
    Ok(RunDetail {
        summary: run_summary(r, scale)?,
        config: json_value(r, "config")?.unwrap_or(Value::Null),
        metric_keys,
    })
}

pub(super) fn idempotency(r: &impl DbRow) -> StoreResult<IdempotencyRecord> {
    Ok(IdempotencyRecord {
        key: r.req_text("key")?,
        fingerprint: r.req_text("fingerprint")?,
        status: u16::try_from(r.req_int("status")?).unwrap_or(200),
        response: r.req_text("response")?,
        run_id: r.text("run_id")?,
    })
}

/// Escapes `%`, `_` and `\` for a LIKE pattern with `ESCAPE '\'`.
pub(super) fn escape_like(term: &str) -> String {
    let mut out = String::with_capacity(term.len());
    for c in term.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
