//! Span events built in code (the OTLP mapping builds them from protobuf), checked by
//! the rules [`parse_event`](crate::parse_event) applies to JSON, without writing a
//! JSON document only to parse it again. An event accepted here is the event the
//! native API makes of the same fields, with the same warnings; a rejected one gets
//! the same error.

use serde_json::{Map, Value};

use crate::events::{check_close_status, check_name, check_parent, keep_attributes, non_negative};
use crate::limits::{check_map_no_nul, check_no_nul, check_text_no_nul, check_timestamp};
use crate::{
    check_id, check_trace_id, Body, CloseEvent, Invalid, OpenEvent, SpanKind, SpanLink, SpanStatus,
};

/// The fields of an open that a mapping fills; bodies are JSON values until checked.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenDraft {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: SpanKind,
    pub ts: i64,
    pub step: Option<i64>,
    pub attributes: Map<String, Value>,
    pub input: Option<Value>,
}

/// The fields of a close that a mapping fills.
#[derive(Clone, Debug, PartialEq)]
pub struct CloseDraft {
    pub trace_id: String,
    pub span_id: String,
    pub ts: i64,
    pub status: SpanStatus,
    pub output: Option<Value>,
    pub error: Option<Value>,
    pub links: Vec<SpanLink>,
    pub token_count: Option<i64>,
}

impl OpenDraft {
    /// The open event, and what was dropped from it, as `parse_event` gives them.
    pub fn check(self) -> Result<(OpenEvent, Vec<String>), Invalid> {
        // NULs first, in the order `parse_event` names fields.
        check_text_no_nul(&self.trace_id, "trace_id")?;
        check_text_no_nul(&self.span_id, "span_id")?;
        if let Some(parent) = &self.parent_span_id {
            check_text_no_nul(parent, "parent_span_id")?;
        }
        check_text_no_nul(&self.name, "name")?;
        check_map_no_nul(&self.attributes, "attributes")?;
        check_value_no_nul(self.input.as_ref(), "input")?;

        check_span(&self.trace_id, &self.span_id, self.ts)?;
        check_parent(&self.span_id, self.parent_span_id.as_deref())?;
        check_name(&self.name)?;
        let step = non_negative(self.step, "step")?;
        let mut warnings = Vec::new();
        let attributes = keep_attributes(self.attributes, &mut warnings)?;
        let event = OpenEvent {
            trace_id: self.trace_id,
            span_id: self.span_id,
            parent_span_id: self.parent_span_id,
            name: self.name,
            kind: self.kind,
            ts: self.ts,
            step,
            rank: None,
            ordinal: None,
            thread_id: None,
            attributes,
            input: self.input.as_ref().map(Body::from_value),
        };
        Ok((event, warnings))
    }
}

impl CloseDraft {
    /// The close event as `parse_event` gives it.
    pub fn check(self) -> Result<CloseEvent, Invalid> {
        check_text_no_nul(&self.trace_id, "trace_id")?;
        check_text_no_nul(&self.span_id, "span_id")?;
        check_value_no_nul(self.output.as_ref(), "output")?;
        check_value_no_nul(self.error.as_ref(), "error")?;

        check_span(&self.trace_id, &self.span_id, self.ts)?;
        check_close_status(self.status)?;
        for (i, link) in self.links.iter().enumerate() {
            check_id(&link.trace_id, &format!("links[{i}].trace_id"))?;
            check_id(&link.span_id, &format!("links[{i}].span_id"))?;
        }
        Ok(CloseEvent {
            token_count: non_negative(self.token_count, "token_count")?,
            trace_id: self.trace_id,
            span_id: self.span_id,
            ts: self.ts,
            status: self.status,
            input: None,
            output: self.output.as_ref().map(Body::from_value),
            error: self.error.as_ref().map(Body::from_value),
            attributes: Map::new(),
            metrics: Map::new(),
            links: self.links,
        })
    }
}

/// What every event carries, checked in `parse_event`'s order.
fn check_span(trace_id: &str, span_id: &str, ts: i64) -> Result<(), Invalid> {
    check_trace_id(trace_id, "trace_id")?;
    check_id(span_id, "span_id")?;
    check_timestamp(ts, "ts")
}

fn check_value_no_nul(value: Option<&Value>, field: &str) -> Result<(), Invalid> {
    value.map_or(Ok(()), |v| check_no_nul(v, field))
}
