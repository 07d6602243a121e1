//! One OTLP span to the open and close events of the native API (docs/api.md), built
//! directly as typed events and checked by the native API's rules
//! ([`OpenDraft::check`]): kinds from OpenInference or the gen_ai conventions, bodies
//! as chat messages where there are messages, token counts, step and error. Pure: no
//! I/O, no clock.

use opentelemetry_proto::tonic::trace::v1::{status::StatusCode, Span};
use serde_json::{json, Map, Value};
use treeline_wire::{
    CloseDraft, CloseEvent, Invalid, OpenDraft, OpenEvent, SpanKind, SpanLink, SpanStatus,
    MAX_NAME_CHARS,
};

use super::attributes::{as_i64, fit, flatten, hex};
use super::messages;

/// The two checked events of one span, and notes on what had to be changed to fit.
#[derive(Debug)]
pub struct SpanEvents {
    pub open: OpenEvent,
    pub close: CloseEvent,
    pub notes: Vec<String>,
}

/// Nanoseconds since the epoch to the API's microseconds.
pub fn micros(nanos: u64) -> i64 {
    (nanos / 1_000) as i64
}

/// The span's events, checked as the native API checks an event; `now_us` stands in
/// for a missing start time.
pub fn span_events(span: &Span, now_us: i64) -> Result<SpanEvents, Invalid> {
    let (open, close, mut notes) = drafts(span, now_us);
    let (open, warnings) = open.check()?;
    notes.extend(warnings);
    Ok(SpanEvents {
        open,
        close: close.check()?,
        notes,
    })
}

/// The span's events before they are checked.
pub fn drafts(span: &Span, now_us: i64) -> (OpenDraft, CloseDraft, Vec<String>) {
    let trace_id = hex(&span.trace_id);
    let span_id = hex(&span.span_id);
    let mut attrs = flatten(&span.attributes);
    let kind = kind(&attrs);
    let step = take_step(&mut attrs);
    let token_count = token_count(&attrs);
    let (input, output) = bodies(&mut attrs);
    let notes = fit(&mut attrs);

    let start = match span.start_time_unix_nano {
        0 => now_us,
        ns => micros(ns),
    };
    let end = micros(span.end_time_unix_nano).max(start);
    let mut name: String = span.name.chars().take(MAX_NAME_CHARS).collect();
    if name.trim().is_empty() {
        name = "(unnamed span)".into();
    }
    let failed = span
        .status
        .as_ref()
        .is_some_and(|s| s.code == StatusCode::Error as i32);
    let links = span
        .links
        .iter()
        .filter(|l| !l.trace_id.is_empty() && !l.span_id.is_empty())
        .map(|l| SpanLink {
            trace_id: hex(&l.trace_id),
            span_id: hex(&l.span_id),
        })
        .collect();
    let open = OpenDraft {
        trace_id: trace_id.clone(),
        span_id: span_id.clone(),
        parent_span_id: (!span.parent_span_id.is_empty()).then(|| hex(&span.parent_span_id)),
        name,
        kind,
        ts: start,
        step,
        attributes: attrs,
        input,
    };
    let close = CloseDraft {
        trace_id,
        span_id,
        ts: end,
        status: if failed {
            SpanStatus::Error
        } else {
            SpanStatus::Ok
        },
        output,
        error: if failed { error_body(span) } else { None },
        links,
        token_count,
    };
    (open, close, notes)
}

/// `openinference.span.kind` first, then `gen_ai.operation.name`; then, for
/// OpenLLMetry spans that carry neither, `llm.request.type` and
/// `traceloop.span.kind`. Anything else is `custom`.
pub fn kind(attrs: &Map<String, Value>) -> SpanKind {
    let get = |name: &str| attrs.get(name).and_then(Value::as_str).map(str::trim);
    let from_openinference = get("openinference.span.kind").and_then(|k| {
        Some(match k.to_ascii_uppercase().as_str() {
            "LLM" | "EMBEDDING" => SpanKind::Model,
            "TOOL" => SpanKind::Tool,
            "AGENT" => SpanKind::Agent,
            "RETRIEVER" | "RERANKER" => SpanKind::Retrieval,
            "EVALUATOR" | "GUARDRAIL" => SpanKind::Evaluator,
            "CHAIN" => SpanKind::Function,
            _ => return None,
        })
    });
    let from_gen_ai = || {
        get("gen_ai.operation.name").and_then(|op| {
            Some(match op.to_ascii_lowercase().as_str() {
                "chat" | "text_completion" | "generate_content" | "embeddings" => SpanKind::Model,
                "execute_tool" => SpanKind::Tool,
                "invoke_agent" | "create_agent" => SpanKind::Agent,
                _ => return None,
            })
        })
    };
    let from_openllmetry = || {
        let request = get("llm.request.type").and_then(|t| {
            matches!(
                t.to_ascii_lowercase().as_str(),
                "chat" | "completion" | "embedding"
            )
            .then_some(SpanKind::Model)
        });
        request.or_else(|| {
            get("traceloop.span.kind").and_then(|k| {
                Some(match k.to_ascii_lowercase().as_str() {
                    "agent" => SpanKind::Agent,
                    "tool" => SpanKind::Tool,
                    "workflow" | "task" => SpanKind::Function,
                    _ => return None,
                })
            })
        })
    };
    from_openinference
        .or_else(from_gen_ai)
        .or_else(from_openllmetry)
        .unwrap_or(SpanKind::Custom)
}

/// `treeline.step`, else `step`: a non-negative integer, taken out of the attributes.
pub fn take_step(attrs: &mut Map<String, Value>) -> Option<i64> {
    ["treeline.step", "step"].into_iter().find_map(|name| {
        let step = attrs.get(name).and_then(as_i64).filter(|s| *s >= 0)?;
        attrs.remove(name);
        Some(step)
    })
}

/// gen_ai input + output tokens, else OpenInference's total (or prompt +
/// completion), else OpenLLMetry's total.
pub fn token_count(attrs: &Map<String, Value>) -> Option<i64> {
    let get = |name: &str| attrs.get(name).and_then(as_i64).filter(|n| *n >= 0);
    let sum = |a: &str, b: &str| match (get(a), get(b)) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
    };
    sum("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
        .or_else(|| get("llm.token_count.total"))
        .or_else(|| sum("llm.token_count.prompt", "llm.token_count.completion"))
        .or_else(|| get("llm.usage.total_tokens"))
        .or_else(|| {
            sum(
                "gen_ai.usage.prompt_tokens",
                "gen_ai.usage.completion_tokens",
            )
        })
}

/// The input and output bodies, taken out of the attributes so they are stored once.
/// Messages (gen_ai, OpenInference, OpenLLMetry) win over the raw `input.value`,
/// which then is dropped as a duplicate of them.
pub fn bodies(attrs: &mut Map<String, Value>) -> (Option<Value>, Option<Value>) {
    let mut input = side(attrs, Side::INPUT);
    if let Some(system) = attrs.remove("gen_ai.system_instructions") {
        let text = system_text(&system);
        match input.as_mut().and_then(Value::as_array_mut) {
            Some(list) => list.insert(0, json!({"role": "system", "content": text})),
            None => {
                attrs.insert("gen_ai.system_instructions".into(), Value::String(text));
            }
        }
    }
    let output = side(attrs, Side::OUTPUT);
    (input, output)
}

struct Side {
    gen_ai: &'static str,
    openinference: &'static str,
    openllmetry: &'static str,
    value: &'static str,
    mime: &'static str,
    tool: &'static str,
    role: &'static str,
}

impl Side {
    const INPUT: Side = Side {
        gen_ai: "gen_ai.input.messages",
        openinference: "llm.input_messages.",
        openllmetry: "gen_ai.prompt.",
        value: "input.value",
        mime: "input.mime_type",
        tool: "gen_ai.tool.call.arguments",
        role: "user",
    };
    const OUTPUT: Side = Side {
        gen_ai: "gen_ai.output.messages",
        openinference: "llm.output_messages.",
        openllmetry: "gen_ai.completion.",
        value: "output.value",
        mime: "output.mime_type",
        tool: "gen_ai.tool.call.result",
        role: "assistant",
    };
}

fn side(attrs: &mut Map<String, Value>, side: Side) -> Option<Value> {
    let messages = match attrs.remove(side.gen_ai) {
        Some(raw) => Some(messages::from_gen_ai(&raw, side.role).unwrap_or(raw)),
        None => messages::from_flat(attrs, side.openinference)
            .or_else(|| messages::from_flat(attrs, side.openllmetry)),
    };
    let mime = attrs.remove(side.mime);
    let value = attrs.remove(side.value);
    if messages.is_some() {
        return messages;
    }
    if let Some(value) = value {
        let is_json = mime
            .as_ref()
            .and_then(Value::as_str)
            .is_some_and(|m| m.starts_with("application/json"));
        return Some(match (&value, is_json) {
            (Value::String(text), true) => serde_json::from_str(text).unwrap_or(value),
            _ => value,
        });
    }
    attrs.remove(side.tool).map(|v| match &v {
        Value::String(text) => serde_json::from_str(text).unwrap_or(v),
        _ => v,
    })
}

/// `gen_ai.system_instructions`: JSON parts or plain text, as one text.
fn system_text(value: &Value) -> String {
    let text = value.as_str().unwrap_or_default();
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("content").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => text.to_string(),
    }
}

/// `{"type", "message", "stacktrace"}` from the first exception event, the message
/// falling back to the status description.
pub fn error_body(span: &Span) -> Option<Value> {
    let mut error = Map::new();
    if let Some(event) = span.events.iter().find(|e| e.name == "exception") {
        let attrs = flatten(&event.attributes);
        for (from, to) in [
            ("exception.type", "type"),
            ("exception.message", "message"),
            ("exception.stacktrace", "stacktrace"),
        ] {
            if let Some(Value::String(v)) = attrs.get(from) {
                error.insert(to.into(), Value::String(v.clone()));
            }
        }
    }
    if !error.contains_key("message") {
        if let Some(status) = span.status.as_ref().filter(|s| !s.message.is_empty()) {
            error.insert("message".into(), Value::String(status.message.clone()));
        }
    }
    (!error.is_empty()).then_some(Value::Object(error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::{span::Event, span::Link, Status};
    use treeline_wire::{parse_event, SpanEvent};

    fn attrs(pairs: &[(&str, Value)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn kv(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(Any::StringValue(value.into())),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn kinds_follow_openinference_then_gen_ai() {
        let cases = [
            ("openinference.span.kind", "LLM", SpanKind::Model),
            ("openinference.span.kind", "TOOL", SpanKind::Tool),
            ("openinference.span.kind", "AGENT", SpanKind::Agent),
            ("openinference.span.kind", "RETRIEVER", SpanKind::Retrieval),
            ("openinference.span.kind", "RERANKER", SpanKind::Retrieval),
            ("openinference.span.kind", "EVALUATOR", SpanKind::Evaluator),
            ("openinference.span.kind", "GUARDRAIL", SpanKind::Evaluator),
            ("openinference.span.kind", "CHAIN", SpanKind::Function),
            ("openinference.span.kind", "EMBEDDING", SpanKind::Model),
            ("openinference.span.kind", "UNKNOWN", SpanKind::Custom),
            ("gen_ai.operation.name", "chat", SpanKind::Model),
            ("gen_ai.operation.name", "text_completion", SpanKind::Model),
            ("gen_ai.operation.name", "generate_content", SpanKind::Model),
            ("gen_ai.operation.name", "embeddings", SpanKind::Model),
            ("gen_ai.operation.name", "execute_tool", SpanKind::Tool),
            ("gen_ai.operation.name", "invoke_agent", SpanKind::Agent),
            ("gen_ai.operation.name", "create_agent", SpanKind::Agent),
            ("gen_ai.operation.name", "dance", SpanKind::Custom),
            ("http.method", "GET", SpanKind::Custom),
        ];
        for (name, value, want) in cases {
            assert_eq!(
                kind(&attrs(&[(name, json!(value))])),
                want,
                "{name}={value}"
            );
        }
        let both = attrs(&[
            ("openinference.span.kind", json!("TOOL")),
            ("gen_ai.operation.name", json!("chat")),
        ]);
        assert_eq!(kind(&both), SpanKind::Tool);
    }

    #[test]
    fn tokens_come_from_either_convention() {
        let gen_ai = attrs(&[
            ("gen_ai.usage.input_tokens", json!(12)),
            ("gen_ai.usage.output_tokens", json!("30")),
        ]);
        assert_eq!(token_count(&gen_ai), Some(42));
        let oi = attrs(&[
            ("llm.token_count.total", json!(7)),
            ("llm.token_count.prompt", json!(5)),
        ]);
        assert_eq!(token_count(&oi), Some(7));
        let only_input = attrs(&[("gen_ai.usage.input_tokens", json!(3))]);
        assert_eq!(token_count(&only_input), Some(3));
        assert_eq!(token_count(&attrs(&[("x", json!(1))])), None);
    }

    #[test]
    fn the_step_is_taken_from_treeline_step_or_step() {
        let mut a = attrs(&[("treeline.step", json!(4)), ("step", json!(9))]);
        assert_eq!(take_step(&mut a), Some(4));
        assert!(!a.contains_key("treeline.step") && a.contains_key("step"));
        let mut b = attrs(&[("step", json!("5"))]);
        assert_eq!(take_step(&mut b), Some(5));
        assert!(b.is_empty());
        let mut c = attrs(&[("step", json!(-1))]);
        assert_eq!(take_step(&mut c), None);
    }

    #[test]
    fn bodies_prefer_messages_and_drop_their_raw_duplicate() {
        let mut a = attrs(&[
            ("input.value", json!("{\"raw\": true}")),
            ("input.mime_type", json!("application/json")),
            ("llm.input_messages.0.message.role", json!("user")),
            ("llm.input_messages.0.message.content", json!("hi")),
            ("output.value", json!("{\"answer\": 1}")),
            ("output.mime_type", json!("application/json")),
            ("llm.model_name", json!("m")),
        ]);
        let (input, output) = bodies(&mut a);
        assert_eq!(input, Some(json!([{"role": "user", "content": "hi"}])));
        assert_eq!(output, Some(json!({"answer": 1})));
        assert_eq!(a, attrs(&[("llm.model_name", json!("m"))]));

        let mut g = attrs(&[
            (
                "gen_ai.input.messages",
                json!(r#"[{"role":"user","parts":[{"type":"text","content":"q"}]}]"#),
            ),
            (
                "gen_ai.system_instructions",
                json!(r#"[{"type":"text","content":"sys"}]"#),
            ),
            (
                "gen_ai.output.messages",
                json!(
                    r#"[{"role":"assistant","parts":[{"type":"text","content":"a"}],"finish_reason":"stop"}]"#
                ),
            ),
        ]);
        let (input, output) = bodies(&mut g);
        assert_eq!(
            input,
            Some(json!([{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}]))
        );
        assert_eq!(
            output,
            Some(json!([{"role": "assistant", "content": "a", "finish_reason": "stop"}]))
        );
        assert!(g.is_empty());

        let mut plain = attrs(&[("input.value", json!("just text"))]);
        assert_eq!(bodies(&mut plain), (Some(json!("just text")), None));
    }

    fn span() -> Span {
        Span {
            trace_id: vec![0xab; 16],
            span_id: vec![0x01; 8],
            parent_span_id: vec![0x02; 8],
            name: "llm call".into(),
            start_time_unix_nano: 1_764_420_000_123_456_789,
            end_time_unix_nano: 1_764_420_001_000_000_000,
            attributes: vec![
                kv("openinference.span.kind", "LLM"),
                kv("input.value", "question"),
                kv("output.value", "answer"),
                kv("step", "3"),
            ],
            ..Default::default()
        }
    }

    fn checked(span: &Span, now: i64) -> (OpenEvent, CloseEvent, Vec<String>) {
        let events = span_events(span, now).expect("a valid span");
        (events.open, events.close, events.notes)
    }

    #[test]
    fn a_span_becomes_a_valid_open_and_close() {
        let (open, close, notes) = checked(&span(), 0);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(open.trace_id, "ab".repeat(16));
        assert_eq!(open.span_id, "0101010101010101");
        assert_eq!(open.parent_span_id.as_deref(), Some("0202020202020202"));
        assert_eq!(open.kind, SpanKind::Model);
        assert_eq!(open.ts, 1_764_420_000_123_456);
        assert_eq!(open.step, Some(3));
        assert_eq!(open.input.map(|b| b.json), Some("\"question\"".into()));
        assert_eq!(close.ts, 1_764_420_001_000_000);
        assert_eq!(close.status, SpanStatus::Ok);
        assert_eq!(close.output.map(|b| b.json), Some("\"answer\"".into()));
        assert_eq!(close.error, None);
    }

    #[test]
    fn an_error_status_carries_the_exception() {
        let mut s = span();
        s.parent_span_id.clear();
        s.status = Some(Status {
            message: "status text".into(),
            code: StatusCode::Error as i32,
        });
        s.events.push(Event {
            name: "exception".into(),
            attributes: vec![
                kv("exception.type", "ValueError"),
                kv("exception.message", "bad input"),
            ],
            ..Default::default()
        });
        let (open, close, _) = checked(&s, 0);
        assert_eq!(open.parent_span_id, None);
        assert_eq!(close.status, SpanStatus::Error);
        let error = |close: CloseEvent| -> Value {
            serde_json::from_str(&close.error.expect("an error").json).expect("JSON")
        };
        assert_eq!(
            error(close),
            json!({"type": "ValueError", "message": "bad input"})
        );
        s.events.clear();
        assert_eq!(error(checked(&s, 0).1), json!({"message": "status text"}));
    }

    #[test]
    fn missing_times_and_names_are_filled() {
        let mut s = span();
        s.start_time_unix_nano = 0;
        s.end_time_unix_nano = 0;
        s.name.clear();
        let (open, close, _) = checked(&s, 77);
        assert_eq!((open.ts, close.ts), (77, 77));
        assert_eq!(open.name, "(unnamed span)");
    }

    /// The drafts as the native API's JSON, for `parse_event` to judge.
    fn as_json(open: &OpenDraft, close: &CloseDraft) -> (Value, Value) {
        let open = json!({
            "op": "open", "trace_id": open.trace_id, "span_id": open.span_id,
            "parent_span_id": open.parent_span_id, "name": open.name,
            "kind": open.kind.as_str(), "ts": open.ts, "step": open.step,
            "attributes": open.attributes, "input": open.input,
        });
        let close = json!({
            "op": "close", "trace_id": close.trace_id, "span_id": close.span_id,
            "ts": close.ts, "status": close.status.as_str(), "output": close.output,
            "error": close.error, "links": close.links, "token_count": close.token_count,
        });
        (open, close)
    }

    /// The typed path must accept, change and refuse exactly what the native API
    /// does with the same span as JSON: the same events, warnings and errors.
    #[test]
    fn direct_events_are_what_the_native_api_makes_of_the_same_json() {
        let mut many = span();
        many.attributes
            .extend((0..300).map(|i| kv(&format!("a{i}"), "v")));
        let mut reserved = span();
        reserved.attributes.push(kv("status", "x"));
        reserved.attributes.push(kv("thread_id", "t"));
        let mut nul_name = span();
        nul_name.name = "a\0b".into();
        let mut nul_attribute = span();
        nul_attribute.attributes.push(kv("user", "u\0"));
        let mut nul_input = span();
        nul_input.attributes.push(kv("input.value", "q\0"));
        let mut nul_output = span();
        nul_output.attributes.push(kv("output.value", "\0"));
        let mut own_parent = span();
        own_parent.parent_span_id = own_parent.span_id.clone();
        let mut no_span_id = span();
        no_span_id.span_id.clear();
        let mut no_trace_id = span();
        no_trace_id.trace_id.clear();
        let mut far_future = span();
        far_future.start_time_unix_nano = u64::MAX;
        far_future.end_time_unix_nano = u64::MAX;
        let mut long_id = span();
        long_id.span_id = vec![7; 40];
        let mut linked = span();
        linked.links.push(Link {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            ..Default::default()
        });
        let mut failed = span();
        failed.status = Some(Status {
            message: "boom\0".into(),
            code: StatusCode::Error as i32,
        });
        let cases = [
            ("plain", span()),
            ("300 attributes", many),
            ("reserved names", reserved),
            ("NUL in the name", nul_name),
            ("NUL in an attribute", nul_attribute),
            ("NUL in the input", nul_input),
            ("NUL in the output", nul_output),
            ("its own parent", own_parent),
            ("no span id", no_span_id),
            ("no trace id", no_trace_id),
            ("far future", far_future),
            ("a 40-byte span id", long_id),
            ("a link", linked),
            ("NUL in the error", failed),
        ];
        for (what, span) in cases {
            let direct = span_events(&span, 5)
                .map(|e| (SpanEvent::Open(e.open), SpanEvent::Close(e.close), e.notes));
            let (open, close, notes) = drafts(&span, 5);
            let (open, close) = as_json(&open, &close);
            let native = parse_event(&open).and_then(|(open, mut warnings)| {
                let (close, more) = parse_event(&close)?;
                warnings.extend(more);
                Ok((open, close, notes.into_iter().chain(warnings).collect()))
            });
            assert_eq!(direct, native, "{what}");
        }
    }
}
