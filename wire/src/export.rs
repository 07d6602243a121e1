//! The export format: one span per line of JSON (docs/api.md §8.12), and the events
//! that write a line back (`treeline import`). Version 1 is stable: fields may be
//! added, none renamed or removed.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::annotations::Annotation;
use super::{SpanDetail, SpanKind, SpanLink, SpanStatus};

/// The `format` every span line carries.
pub const EXPORT_FORMAT: &str = "treeline.span.v1";
/// The `format` of an annotation line, which follows its trace's spans.
pub const ANNOTATION_FORMAT: &str = "treeline.annotation.v1";

/// One exported annotation: the annotation as listed, with its run and project.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportedAnnotation {
    pub format: String,
    pub run_id: String,
    pub project: String,
    #[serde(flatten)]
    pub annotation: Annotation,
}

impl ExportedAnnotation {
    pub fn new(annotation: Annotation, run_id: &str, project: &str) -> Self {
        ExportedAnnotation {
            format: ANNOTATION_FORMAT.to_string(),
            run_id: run_id.to_string(),
            project: project.to_string(),
            annotation,
        }
    }

    /// The `PUT …/annotations` body that writes it again. The importing key is its
    /// author there; its source, value and comment are kept.
    pub fn put_body(&self) -> Value {
        let a = &self.annotation;
        json!({
            "span_id": a.span_id,
            "name": a.name,
            "value": a.value,
            "comment": a.comment,
            "source": a.source,
        })
    }
}

/// One exported span: where it lives, what it is, and its bodies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportedSpan {
    pub format: String,
    pub run_id: String,
    pub project: String,
    pub trace_id: String,
    pub span_id: String,
    #[serde(default)]
    pub parent_span_id: Option<String>,
    #[serde(default)]
    pub ordinal: i64,
    pub name: String,
    pub kind: SpanKind,
    pub status: SpanStatus,
    pub start_us: i64,
    #[serde(default)]
    pub end_us: Option<i64>,
    #[serde(default)]
    pub step: Option<i64>,
    #[serde(default)]
    pub rank: Option<i64>,
    #[serde(default)]
    pub thread_id: Option<String>,
    #[serde(default)]
    pub token_count: Option<i64>,
    #[serde(default)]
    pub attributes: Map<String, Value>,
    #[serde(default)]
    pub metrics: Map<String, Value>,
    #[serde(default)]
    pub links: Vec<SpanLink>,
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub output: Option<Value>,
    #[serde(default)]
    pub error: Option<Value>,
}

impl ExportedSpan {
    pub fn from_detail(d: SpanDetail, project: &str) -> Self {
        ExportedSpan {
            format: EXPORT_FORMAT.to_string(),
            run_id: d.run_id,
            project: project.to_string(),
            trace_id: d.trace_id,
            span_id: d.node.span_id,
            parent_span_id: d.node.parent_span_id,
            ordinal: d.node.ordinal,
            name: d.node.name,
            kind: d.node.kind,
            status: d.node.status,
            start_us: d.node.start_us,
            end_us: d.node.end_us,
            step: d.node.step,
            rank: d.node.rank,
            thread_id: d.thread_id,
            token_count: d.node.token_count,
            attributes: d.attributes,
            metrics: d.metrics,
            links: d.links,
            input: d.input,
            output: d.output,
            error: d.error,
        }
    }

    /// The events that store this span again: its open, and its close unless it is
    /// still running. Attributes all ride the open.
    pub fn events(&self) -> Vec<Value> {
        let mut events = vec![json!({
            "op": "open",
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "ordinal": self.ordinal,
            "name": self.name,
            "kind": self.kind,
            "ts": self.start_us,
            "step": self.step,
            "rank": self.rank,
            "thread_id": self.thread_id,
            "attributes": self.attributes,
            "input": self.input,
        })];
        if self.status != SpanStatus::Running {
            events.push(json!({
                "op": "close",
                "trace_id": self.trace_id,
                "span_id": self.span_id,
                "ts": self.end_us.unwrap_or(self.start_us),
                "status": self.status,
                "output": self.output,
                "error": self.error,
                "metrics": self.metrics,
                "links": self.links,
                "token_count": self.token_count,
            }));
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_and_becomes_an_open_and_a_close() {
        let line = r#"{"format":"treeline.span.v1","run_id":"r","project":"p","trace_id":"t1",
            "span_id":"s1","parent_span_id":"s0","ordinal":3,"name":"policy","kind":"model",
            "status":"error","start_us":10,"end_us":25,"attributes":{"b":1,"a":2},
            "error":{"type":"ValueError"},"token_count":7}"#;
        let span: ExportedSpan = serde_json::from_str(line).expect("parses");
        let events = span.events();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0]["ordinal"], 3);
        assert_eq!(events[0]["ts"], 10);
        let names: Vec<&String> = events[0]["attributes"]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(names, ["b", "a"], "attributes keep their order");
        assert_eq!(events[1]["status"], "error");
        assert_eq!(events[1]["ts"], 25);
        assert_eq!(events[1]["token_count"], 7);
    }

    #[test]
    fn a_running_span_is_only_opened() {
        let mut span: ExportedSpan = serde_json::from_str(
            r#"{"format":"treeline.span.v1","run_id":"r","project":"p","trace_id":"t1",
                "span_id":"s1","name":"x","kind":"tool","status":"running","start_us":1}"#,
        )
        .expect("parses");
        assert_eq!(span.events().len(), 1);
        span.status = SpanStatus::Interrupted;
        assert_eq!(span.events().len(), 2);
    }
}
