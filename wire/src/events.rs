//! Span events: parsed one by one from JSON so that a bad event is rejected alone.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{check_id, check_trace_id, Invalid, SpanKind, SpanStatus};

/// Bodies longer than this are cut and flagged, never rejected.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
pub const MAX_ATTRIBUTES: usize = 256;
pub const MAX_ATTRIBUTE_BYTES: usize = 64 * 1024;
pub const MAX_NAME_CHARS: usize = 1024;
/// An attribute's name, in bytes.
pub const MAX_ATTRIBUTE_NAME_BYTES: usize = 256;

/// Attribute names that are a span's own fields: dropped with a warning.
pub const RESERVED_ATTRIBUTES: &[&str] = &[
    "run_id",
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "status",
    "step",
    "rank",
    "thread_id",
    "token_count",
    "start_us",
    "end_us",
    "duration_us",
    "input",
    "output",
    "error",
    "metrics",
    "links",
];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpanLink {
    pub trace_id: String,
    pub span_id: String,
}

/// A JSON body as stored: its serialized text, possibly cut.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    pub json: String,
    pub truncated: bool,
}

impl Body {
    pub fn from_value(value: &Value) -> Body {
        let json = value.to_string();
        if json.len() <= MAX_BODY_BYTES {
            return Body {
                json,
                truncated: false,
            };
        }
        // A cut document is no longer JSON: keep its head as text.
        let mut end = MAX_BODY_BYTES;
        while !json.is_char_boundary(end) {
            end -= 1;
        }
        Body {
            json: Value::String(json[..end].to_string()).to_string(),
            truncated: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct OpenEvent {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: SpanKind,
    pub ts: i64,
    pub step: Option<i64>,
    pub rank: Option<i64>,
    /// The span's place among its siblings, as the client created them; the server
    /// numbers spans in arrival order when it is absent.
    pub ordinal: Option<i64>,
    pub thread_id: Option<String>,
    pub attributes: Map<String, Value>,
    pub input: Option<Body>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CloseEvent {
    pub trace_id: String,
    pub span_id: String,
    pub ts: i64,
    pub status: SpanStatus,
    /// An input recorded after the open was sent.
    pub input: Option<Body>,
    pub output: Option<Body>,
    pub error: Option<Body>,
    pub attributes: Map<String, Value>,
    pub metrics: Map<String, Value>,
    pub links: Vec<SpanLink>,
    pub token_count: Option<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SpanEvent {
    Open(OpenEvent),
    Close(CloseEvent),
}

impl SpanEvent {
    pub fn trace_id(&self) -> &str {
        match self {
            SpanEvent::Open(e) => &e.trace_id,
            SpanEvent::Close(e) => &e.trace_id,
        }
    }

    pub fn span_id(&self) -> &str {
        match self {
            SpanEvent::Open(e) => &e.span_id,
            SpanEvent::Close(e) => &e.span_id,
        }
    }
}

/// An event accepted with something dropped, for the response's `warnings`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    pub index: usize,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub index: usize,
    pub code: String,
    pub message: String,
}

/// The answer to an event or metric batch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResponse {
    pub accepted: usize,
    pub rejected: Vec<Rejection>,
    pub warnings: Vec<Warning>,
}

impl BatchResponse {
    /// Adds the warnings found while storing, keeping them in request order.
    pub fn with_warnings(mut self, more: Vec<Warning>) -> Self {
        self.warnings.extend(more);
        self.warnings.sort_by_key(|w| w.index);
        self
    }
}

/// A text field as an event gives it.
enum Text<'a> {
    /// Not given, or JSON `null`.
    Absent,
    Given(&'a str),
    /// Given, but not a string.
    Other,
}

/// Where an event's fields are read from: a JSON object, or [`EventFields`].
trait Fields {
    /// A field that is not text.
    fn field(&self, name: &str) -> Option<&Value>;

    /// A field that must be text if given.
    fn text(&self, name: &str) -> Text<'_> {
        match self.field(name) {
            None | Some(Value::Null) => Text::Absent,
            Some(Value::String(s)) => Text::Given(s),
            Some(_) => Text::Other,
        }
    }
}

impl Fields for Map<String, Value> {
    fn field(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

/// Text that borrows from the request where it holds no escapes. (serde borrows a
/// bare `Cow<str>` field with `#[serde(borrow)]`, but not one inside an `Option`.)
#[derive(Debug, Default)]
struct Str<'a>(std::borrow::Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use std::borrow::Cow;
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_str(Visit).map(Str)
    }
}

/// [`EventFields`], with each field named once: the struct, the fields given, and
/// the lookups by name are all written from these lists.
macro_rules! event_fields {
    (texts: $($text:ident),* ; values: $($value:ident),* $(,)?) => {
        /// The fields of an event that the server reads, decoded straight from a
        /// batch's JSON. This skips building and hashing a map per event, and its
        /// text fields borrow from the request where they hold no escapes, so they
        /// are not allocated twice. An event with any other field, a field given
        /// twice, or a text field that is not a string fails to decode as this, and
        /// its batch then takes the map path of [`parse_event`], so that what is
        /// accepted, and every error, stays the same.
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct EventFields<'a> {
            $(#[serde(borrow)] $text: Option<Str<'a>>,)*
            $($value: Option<Value>,)*
        }

        impl EventFields<'_> {
            /// The fields, in the order both paths check them for NUL characters.
            const NAMES: &'static [&'static str] =
                &[$(stringify!($text),)* $(stringify!($value),)*];

            /// Checks that no field given holds a NUL character (JSON `null` counts
            /// as absent, as on the map path).
            fn check_no_nul(&self) -> Result<(), Invalid> {
                $(if let Some(Str(text)) = &self.$text {
                    crate::limits::check_text_no_nul(text, stringify!($text))?;
                })*
                $(if let Some(value) = &self.$value {
                    crate::limits::check_no_nul(value, stringify!($value))?;
                })*
                Ok(())
            }
        }

        impl Fields for EventFields<'_> {
            fn field(&self, name: &str) -> Option<&Value> {
                match name {
                    $(stringify!($value) => self.$value.as_ref(),)*
                    _ => None,
                }
            }

            fn text(&self, name: &str) -> Text<'_> {
                match name {
                    $(stringify!($text) => match &self.$text {
                        Some(Str(text)) => Text::Given(text),
                        None => Text::Absent,
                    },)*
                    _ => Text::Other,
                }
            }
        }
    };
}

event_fields!(
    texts: op, trace_id, span_id, parent_span_id, name, kind, thread_id, status;
    values: ts, step, rank, ordinal, attributes, input, output, error, metrics, links,
        token_count, input_truncated, output_truncated,
);

/// Parses one event. Problems that lose only part of it come back as warning texts.
pub fn parse_event(value: &Value) -> Result<(SpanEvent, Vec<String>), Invalid> {
    let obj = value
        .as_object()
        .ok_or_else(|| Invalid::new("invalid_event", "event must be a JSON object"))?;
    if crate::limits::check_no_nul(value, "").is_err() {
        // Rare: name the first field in the decoded path's order, so that an event
        // gets one answer whichever path its batch took. A NUL elsewhere (in a field
        // the server does not read, or in a key) is named where it was found.
        for name in EventFields::NAMES {
            if let Some(field) = obj.get(*name) {
                crate::limits::check_no_nul(field, name)?;
            }
        }
        crate::limits::check_no_nul(value, "")?;
    }
    event_from(obj)
}

/// [`parse_event`] for fields decoded as [`EventFields`]: the same checks, the same
/// event.
pub fn parse_fields(fields: &EventFields) -> Result<(SpanEvent, Vec<String>), Invalid> {
    fields.check_no_nul()?;
    event_from(fields)
}

fn event_from<F: Fields>(obj: &F) -> Result<(SpanEvent, Vec<String>), Invalid> {
    let mut warnings = Vec::new();
    let op = req_str(obj, "op")?;
    let trace_id = req_str(obj, "trace_id")?;
    check_trace_id(trace_id, "trace_id")?;
    let span_id = req_str(obj, "span_id")?;
    check_id(span_id, "span_id")?;
    let ts = req_int(obj, "ts")?;
    crate::limits::check_timestamp(ts, "ts")?;
    match op {
        "open" => {
            let parent_span_id = opt_str(obj, "parent_span_id")?;
            check_parent(span_id, parent_span_id)?;
            let name = req_str(obj, "name")?;
            check_name(name)?;
            let kind = SpanKind::parse_field(req_str(obj, "kind")?, "kind")?;
            let thread_id = opt_str(obj, "thread_id")?.map(str::to_string);
            if thread_id.as_ref().is_some_and(|t| t.len() > 256) {
                return Err(Invalid::new(
                    "invalid_thread_id",
                    "thread_id must be at most 256 bytes",
                ));
            }
            Ok((
                SpanEvent::Open(OpenEvent {
                    trace_id: trace_id.to_string(),
                    span_id: span_id.to_string(),
                    parent_span_id: parent_span_id.map(str::to_string),
                    name: name.to_string(),
                    kind,
                    ts,
                    step: opt_non_negative(obj, "step")?,
                    rank: opt_non_negative(obj, "rank")?,
                    ordinal: opt_non_negative(obj, "ordinal")?,
                    thread_id,
                    attributes: attributes(obj, &mut warnings)?,
                    input: body(obj, "input")?,
                }),
                warnings,
            ))
        }
        "close" => {
            let status = SpanStatus::parse_field(req_str(obj, "status")?, "status")?;
            check_close_status(status)?;
            Ok((
                SpanEvent::Close(CloseEvent {
                    trace_id: trace_id.to_string(),
                    span_id: span_id.to_string(),
                    ts,
                    status,
                    input: body(obj, "input")?,
                    output: body(obj, "output")?,
                    error: obj
                        .field("error")
                        .filter(|v| !v.is_null())
                        .map(Body::from_value),
                    attributes: attributes(obj, &mut warnings)?,
                    metrics: metrics(obj)?,
                    links: links(obj)?,
                    token_count: opt_non_negative(obj, "token_count")?,
                }),
                warnings,
            ))
        }
        other => Err(Invalid::new(
            "invalid_op",
            format!("op {other:?} is not valid; valid values are: open, close"),
        )),
    }
}

fn req_str<'a, F: Fields>(obj: &'a F, field: &str) -> Result<&'a str, Invalid> {
    opt_str(obj, field)?
        .ok_or_else(|| Invalid::new("missing_field", format!("{field} is required")))
}

fn opt_str<'a, F: Fields>(obj: &'a F, field: &str) -> Result<Option<&'a str>, Invalid> {
    match obj.text(field) {
        Text::Absent => Ok(None),
        Text::Given(s) => Ok(Some(s)),
        Text::Other => Err(Invalid::new(
            "invalid_field",
            format!("{field} must be a string"),
        )),
    }
}

fn req_int<F: Fields>(obj: &F, field: &str) -> Result<i64, Invalid> {
    match obj.field(field) {
        None | Some(Value::Null) => Err(Invalid::new(
            "missing_field",
            format!("{field} is required"),
        )),
        Some(v) => v.as_i64().ok_or_else(|| {
            Invalid::new(
                "invalid_field",
                format!("{field} must be an integer (microseconds)"),
            )
        }),
    }
}

fn opt_non_negative<F: Fields>(obj: &F, field: &str) -> Result<Option<i64>, Invalid> {
    match obj.field(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) => non_negative(Some(n), field),
            None => Err(not_non_negative(field)),
        },
    }
}

pub(crate) fn non_negative(value: Option<i64>, field: &str) -> Result<Option<i64>, Invalid> {
    match value {
        Some(n) if n < 0 => Err(not_non_negative(field)),
        _ => Ok(value),
    }
}

fn not_non_negative(field: &str) -> Invalid {
    Invalid::new(
        "invalid_field",
        format!("{field} must be a non-negative integer"),
    )
}

/// A parent, when given, is a valid id other than the span's own.
pub(crate) fn check_parent(span_id: &str, parent: Option<&str>) -> Result<(), Invalid> {
    let Some(parent) = parent else { return Ok(()) };
    check_id(parent, "parent_span_id")?;
    if parent == span_id {
        return Err(Invalid::new(
            "invalid_parent",
            "parent_span_id must not be the span's own span_id",
        ));
    }
    Ok(())
}

pub(crate) fn check_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(Invalid::new(
            "invalid_name",
            format!("name must be 1-{MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(())
}

/// A close ends the span: it cannot say it is still running.
pub(crate) fn check_close_status(status: SpanStatus) -> Result<(), Invalid> {
    if status == SpanStatus::Running {
        return Err(Invalid::new(
            "invalid_status",
            "status of a close must not be \"running\"",
        ));
    }
    Ok(())
}

/// The body under `field`, flagged as truncated when the server cuts it or when the
/// client says it already did (`<field>_truncated: true`: an SDK's preview).
fn body<F: Fields>(obj: &F, field: &str) -> Result<Option<Body>, Invalid> {
    let flag = format!("{field}_truncated");
    let cut_by_client = match obj.field(&flag) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(cut)) => *cut,
        Some(_) => {
            return Err(Invalid::new(
                "invalid_field",
                format!("{flag} must be true or false"),
            ))
        }
    };
    Ok(obj.field(field).filter(|v| !v.is_null()).map(|value| {
        let mut body = Body::from_value(value);
        body.truncated |= cut_by_client;
        body
    }))
}

fn attributes<F: Fields>(
    obj: &F,
    warnings: &mut Vec<String>,
) -> Result<Map<String, Value>, Invalid> {
    let Some(raw) = obj.field("attributes").filter(|v| !v.is_null()) else {
        return Ok(Map::new());
    };
    let raw = raw
        .as_object()
        .ok_or_else(|| Invalid::new("invalid_attributes", "attributes must be an object"))?;
    keep_attributes(raw.clone(), warnings)
}

/// The attributes an event keeps: every value checked, span fields and those past
/// the first [`MAX_ATTRIBUTES`] dropped with a warning.
pub(crate) fn keep_attributes(
    raw: Map<String, Value>,
    warnings: &mut Vec<String>,
) -> Result<Map<String, Value>, Invalid> {
    let mut kept = Map::new();
    let mut over = 0usize;
    for (name, value) in raw {
        check_attribute(&name, &value)?;
        if RESERVED_ATTRIBUTES.contains(&name.as_str()) {
            warnings.push(format!(
                "attributes.{name} was dropped: {name} is a span field, not an attribute"
            ));
        } else if kept.len() == MAX_ATTRIBUTES {
            over += 1;
        } else {
            kept.insert(name, value);
        }
    }
    if over > 0 {
        warnings.push(format!(
            "{over} attributes past the first {MAX_ATTRIBUTES} were dropped"
        ));
    }
    Ok(kept)
}

/// Attribute values are a bool, a number, a string or a list of strings, each at most
/// 64 KiB.
pub fn check_attribute(name: &str, value: &Value) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > MAX_ATTRIBUTE_NAME_BYTES {
        return Err(Invalid::new(
            "invalid_attribute",
            format!("attribute names must be 1-{MAX_ATTRIBUTE_NAME_BYTES} bytes"),
        ));
    }
    let size = match value {
        Value::Bool(_) | Value::Number(_) => 0,
        Value::String(s) => s.len(),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            items.iter().map(|s| s.as_str().map_or(0, str::len)).sum()
        }
        _ => {
            return Err(Invalid::new(
                "invalid_attribute",
                format!(
                    "attributes.{name} must be a bool, integer, float, string or list of strings"
                ),
            ))
        }
    };
    if size > MAX_ATTRIBUTE_BYTES {
        return Err(Invalid::new(
            "invalid_attribute",
            format!("attributes.{name} is {size} bytes; the limit is {MAX_ATTRIBUTE_BYTES}"),
        ));
    }
    Ok(())
}

fn metrics<F: Fields>(obj: &F) -> Result<Map<String, Value>, Invalid> {
    use crate::limits::{MAX_METRIC_NAME_BYTES, MAX_SPAN_METRICS};
    let Some(raw) = obj.field("metrics").filter(|v| !v.is_null()) else {
        return Ok(Map::new());
    };
    let raw = raw
        .as_object()
        .ok_or_else(|| Invalid::new("invalid_metrics", "metrics must be an object"))?;
    if raw.len() > MAX_SPAN_METRICS {
        return Err(Invalid::new(
            "invalid_metrics",
            format!(
                "metrics has {} keys; at most {MAX_SPAN_METRICS} are allowed",
                raw.len()
            ),
        ));
    }
    for (name, value) in raw {
        if name.is_empty() || name.len() > MAX_METRIC_NAME_BYTES {
            return Err(Invalid::new(
                "invalid_metrics",
                format!("metric names must be 1-{MAX_METRIC_NAME_BYTES} bytes"),
            ));
        }
        if !value.as_f64().is_some_and(f64::is_finite) {
            return Err(Invalid::new(
                "invalid_metrics",
                format!("metrics.{name} must be a finite number"),
            ));
        }
    }
    Ok(raw.clone())
}

fn links<F: Fields>(obj: &F) -> Result<Vec<SpanLink>, Invalid> {
    let Some(raw) = obj.field("links").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let bad = || {
        Invalid::new(
            "invalid_links",
            "links must be a list of {trace_id, span_id}",
        )
    };
    let list = raw.as_array().ok_or_else(bad)?;
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let link: SpanLink = serde_json::from_value(item.clone()).map_err(|_| bad())?;
            check_id(&link.trace_id, &format!("links[{i}].trace_id"))?;
            check_id(&link.span_id, &format!("links[{i}].span_id"))?;
            Ok(link)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn open() -> Value {
        json!({"op": "open", "trace_id": "t1", "span_id": "s1", "name": "rollout", "kind": "rollout", "ts": 10})
    }

    #[test]
    fn a_span_metrics_map_is_bounded_in_keys_and_names() {
        let close = |metrics: Value| json!({"op": "close", "trace_id": "t1", "span_id": "s1", "ts": 20, "status": "ok", "metrics": metrics});
        let many: Map<String, Value> = (0..257).map(|i| (format!("m{i}"), json!(1.0))).collect();
        let e = parse_event(&close(Value::Object(many))).expect_err("too many keys");
        assert!(e.message.contains("257 keys"), "{}", e.message);
        let long = json!({"x".repeat(257): 1.0});
        let e = parse_event(&close(long)).expect_err("too long a name");
        assert!(e.message.contains("1-256 bytes"), "{}", e.message);
        let fine: Map<String, Value> = (0..256).map(|i| (format!("m{i}"), json!(1.0))).collect();
        assert!(parse_event(&close(Value::Object(fine))).is_ok());
    }

    #[test]
    fn a_valid_open_and_close_parse() {
        let (event, warnings) = parse_event(&open()).unwrap();
        assert!(warnings.is_empty());
        assert!(matches!(event, SpanEvent::Open(ref o) if o.kind == SpanKind::Rollout));
        let close = json!({"op": "close", "trace_id": "t1", "span_id": "s1", "ts": 20,
            "status": "error", "error": {"type": "ValueError", "message": "bad"}, "token_count": 3});
        let (event, _) = parse_event(&close).unwrap();
        let SpanEvent::Close(close) = event else {
            panic!("expected a close")
        };
        assert_eq!(close.status, SpanStatus::Error);
        assert_eq!(close.token_count, Some(3));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("kind", json!("llm"), "invalid_kind", "kind \"llm\""),
            (
                "step",
                json!(-1),
                "invalid_field",
                "step must be a non-negative integer",
            ),
            ("rank", json!(1.5), "invalid_field", "rank must be"),
            (
                "trace_id",
                json!("steps"),
                "invalid_id",
                "trace_id \"steps\"",
            ),
            ("ts", json!("now"), "invalid_field", "ts must be an integer"),
            ("ts", json!(-1), "invalid_field", "ts must be between 0 and"),
            (
                "ts",
                json!(crate::limits::MAX_TIMESTAMP_US + 1),
                "invalid_field",
                "ts must be between 0 and",
            ),
            (
                "attributes",
                json!({"x": {"nested": 1}}),
                "invalid_attribute",
                "attributes.x",
            ),
        ];
        for (field, value, code, text) in cases {
            let mut event = open();
            event[field] = value;
            let err = parse_event(&event).unwrap_err();
            assert_eq!(err.code, code, "{field}");
            assert!(err.message.contains(text), "{field}: {}", err.message);
        }
        let mut event = open();
        event.as_object_mut().unwrap().remove("name");
        assert_eq!(parse_event(&event).unwrap_err().message, "name is required");
    }

    #[test]
    fn reserved_attributes_are_dropped_with_a_warning() {
        let mut event = open();
        event["attributes"] = json!({"status": "ok", "env": "CartPole"});
        let (SpanEvent::Open(o), warnings) = parse_event(&event).unwrap() else {
            panic!("expected an open")
        };
        assert_eq!(o.attributes.len(), 1);
        assert!(warnings[0].contains("attributes.status"));
    }

    #[test]
    fn only_the_first_256_attributes_are_kept() {
        let mut attrs = Map::new();
        for i in 0..300 {
            attrs.insert(format!("a{i:03}"), json!(i));
        }
        let mut event = open();
        event["attributes"] = Value::Object(attrs);
        let (SpanEvent::Open(o), warnings) = parse_event(&event).unwrap() else {
            panic!("expected an open")
        };
        assert_eq!(o.attributes.len(), MAX_ATTRIBUTES);
        assert!(o.attributes.contains_key("a000") && !o.attributes.contains_key("a299"));
        assert!(warnings[0].contains("44 attributes"));
    }

    #[test]
    fn decoded_fields_parse_as_the_map_does() {
        let events = [
            open(),
            json!({"op": "open", "trace_id": "t1", "span_id": "s2", "parent_span_id": "s1",
                "name": "call \"x\"", "kind": "model", "ts": 11, "step": 3, "rank": 1,
                "ordinal": 0, "thread_id": "th", "input": {"q": [1, "two"]},
                "attributes": {"z": 1, "a": "b", "status": "dropped", "l": ["x"]}}),
            json!({"op": "close", "trace_id": "t1", "span_id": "s2", "ts": 12,
                "status": "error", "output": "text", "error": {"type": "E"},
                "metrics": {"m": 0.5}, "links": [{"trace_id": "t0", "span_id": "s0"}],
                "token_count": 7, "input": null}),
            json!({"op": "open", "trace_id": "t1", "span_id": "s3", "name": "x", "kind": "tool", "ts": 1.5}),
            json!({"op": "open", "trace_id": "t1", "span_id": "s3", "name": "x\0", "kind": "tool", "ts": 1}),
            json!({"op": "open", "trace_id": "t1", "span_id": "s3", "name": "x", "kind": "tool", "ts": 1,
                "attributes": {"k\0": 1}}),
            // Two fields hold a NUL: both paths name the same one, whatever the order.
            json!({"op": "open", "trace_id": "t1", "span_id": "s3", "kind": "tool", "ts": 1,
                "attributes": {"k": "v\0"}, "name": "x\0"}),
            json!({"op": "shut", "trace_id": "t1", "span_id": "s3", "ts": 1}),
            json!({"op": "close", "trace_id": "t1", "span_id": "s3", "ts": 1, "status": "running"}),
            json!({"op": "close", "span_id": "s3", "ts": 1, "status": "ok"}),
        ];
        for event in events {
            let fields = EventFields::deserialize(&event).expect("decodes");
            let by_map = parse_event(&event);
            let by_fields = parse_fields(&fields);
            assert_eq!(by_map, by_fields, "{event}");
        }
        // What the map path alone decides: the batch falls back to it.
        for other in [
            json!({"op": "open", "extra": 1}),
            json!({"op": "open", "name": 5}),
            json!([1]),
            json!("open"),
        ] {
            assert!(EventFields::deserialize(&other).is_err(), "{other}");
        }
        // Text without escapes is borrowed from the request, not copied.
        let text = r#"{"op": "open", "name": "plain", "kind": "tool\u0041"}"#;
        let fields: EventFields = serde_json::from_str(text).expect("decodes");
        assert!(matches!(
            fields.name,
            Some(Str(std::borrow::Cow::Borrowed("plain")))
        ));
        assert!(matches!(fields.kind, Some(Str(std::borrow::Cow::Owned(ref k))) if k == "toolA"));
        let twice = r#"{"op": "open", "op": "close"}"#;
        assert!(serde_json::from_str::<EventFields>(twice).is_err());
    }

    #[test]
    fn an_oversized_body_is_cut_and_flagged() {
        let big = "x".repeat(MAX_BODY_BYTES + 10);
        let body = Body::from_value(&Value::String(big));
        assert!(body.truncated);
        let text: String = serde_json::from_str(&body.json).unwrap();
        assert!(text.len() <= MAX_BODY_BYTES);
        assert!(!Body::from_value(&json!({"a": 1})).truncated);
    }

    #[test]
    fn a_body_the_client_cut_is_flagged_on_both_paths() {
        let close = json!({"op": "close", "trace_id": "t1", "span_id": "s1", "ts": 5,
            "status": "ok", "output": "the first 8 KiB…", "output_truncated": true,
            "input": "short", "input_truncated": false});
        let text = close.to_string();
        let fields: EventFields = serde_json::from_str(&text).expect("decodes");
        for (event, _) in [parse_event(&close), parse_fields(&fields)]
            .into_iter()
            .flatten()
        {
            let SpanEvent::Close(close) = event else {
                panic!("a close");
            };
            assert!(close.output.is_some_and(|b| b.truncated));
            assert!(close.input.is_some_and(|b| !b.truncated));
        }
        let bad = json!({"op": "open", "trace_id": "t1", "span_id": "s1", "ts": 5,
            "name": "n", "kind": "tool", "input": "x", "input_truncated": "yes"});
        let err = parse_event(&bad).expect_err("a flag that is not a bool");
        assert!(err.message.contains("input_truncated"), "{}", err.message);
    }
}
