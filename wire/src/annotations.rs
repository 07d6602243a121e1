//! Annotations: what a person or a program found about a trace or a span (a label,
//! a score, a verdict), kept beside it. One per target, name and author.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{check_id, Invalid};

/// An annotation's name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// A string value, in bytes: a label or a short verdict, not a document.
pub const MAX_TEXT_BYTES: usize = 1024;
/// A comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 4000;
/// Annotations on one trace or span, all authors together.
pub const MAX_PER_TARGET: i64 = 100;

/// Who made an annotation: what the caller says, or else a session is a person and
/// a key is code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Person,
    Code,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Person => "person",
            Source::Code => "code",
        }
    }

    pub fn parse(text: &str) -> Option<Source> {
        match text {
            "person" => Some(Source::Person),
            "code" => Some(Source::Code),
            _ => None,
        }
    }
}

/// An annotation's value. A name keeps one type within a run, so that filters and
/// sorts by it compare like with like.
#[derive(Clone, Debug, PartialEq)]
pub enum NoteValue {
    Number(f64),
    Text(String),
    Bool(bool),
}

impl NoteValue {
    /// The type's name, as errors and the listing say it.
    pub fn kind(&self) -> &'static str {
        match self {
            NoteValue::Number(_) => "number",
            NoteValue::Text(_) => "string",
            NoteValue::Bool(_) => "boolean",
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            NoteValue::Number(n) => {
                serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number)
            }
            NoteValue::Text(t) => Value::String(t.clone()),
            NoteValue::Bool(b) => Value::Bool(*b),
        }
    }

    fn from_json(value: &Value) -> Result<NoteValue, Invalid> {
        match value {
            Value::Bool(b) => Ok(NoteValue::Bool(*b)),
            Value::Number(n) => match n.as_f64().filter(|f| f.is_finite()) {
                Some(f) => Ok(NoteValue::Number(f)),
                None => Err(invalid("value must be a finite number")),
            },
            Value::String(t) if t.len() > MAX_TEXT_BYTES => Err(invalid(format!(
                "value is a string of {} bytes; at most {MAX_TEXT_BYTES}",
                t.len()
            ))),
            Value::String(t) if t.contains('\0') => Err(invalid("value must not contain NUL")),
            Value::String(t) => Ok(NoteValue::Text(t.clone())),
            _ => Err(invalid("value must be a number, a string or a boolean")),
        }
    }
}

/// The body of `PUT …/annotations`, and (without `value`) of `DELETE`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AnnotationPut {
    /// The span annotated; none for the trace itself.
    #[serde(default)]
    pub span_id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub value: Value,
    #[serde(default)]
    pub comment: Option<String>,
    /// `person` or `code`: read by [`AnnotationPut::source`], which names the field
    /// when it is neither.
    #[serde(default)]
    pub source: Option<String>,
}

/// An annotation as the store writes it, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct NoteWrite {
    pub span_id: Option<String>,
    pub name: String,
    pub value: NoteValue,
    pub comment: Option<String>,
}

impl AnnotationPut {
    /// The write this body asks for, or the first field that is wrong.
    pub fn checked(&self) -> Result<NoteWrite, Invalid> {
        let target = self.target()?;
        if self.value.is_null() {
            return Err(invalid("value is missing: a number, a string or a boolean"));
        }
        let value = NoteValue::from_json(&self.value)?;
        let comment = match self.comment.as_deref() {
            Some(c) if c.chars().count() > MAX_COMMENT_CHARS => {
                return Err(Invalid::new(
                    "invalid_annotation",
                    format!("comment is longer than {MAX_COMMENT_CHARS} characters"),
                ))
            }
            Some(c) if c.contains('\0') => {
                return Err(Invalid::new(
                    "invalid_annotation",
                    "comment must not contain NUL",
                ))
            }
            Some("") | None => None,
            Some(c) => Some(c.to_string()),
        };
        Ok(NoteWrite {
            span_id: target.0,
            name: target.1,
            value,
            comment,
        })
    }

    /// Who the body says made it, if it says.
    pub fn source(&self) -> Result<Option<Source>, Invalid> {
        match self.source.as_deref() {
            None => Ok(None),
            Some(text) => Source::parse(text)
                .map(Some)
                .ok_or_else(|| invalid(format!("source {text:?} must be \"person\" or \"code\""))),
        }
    }

    /// The span (if any) and name this body names, checked: all a delete needs.
    pub fn target(&self) -> Result<(Option<String>, String), Invalid> {
        if let Some(span_id) = &self.span_id {
            check_id(span_id, "span_id")?;
        }
        check_name(&self.name)?;
        Ok((self.span_id.clone(), self.name.clone()))
    }
}

/// An annotation name: what the filter grammar reads as one field after `note.`.
pub fn check_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(Invalid::new(
            "invalid_annotation",
            format!("name must be 1-{MAX_NAME_BYTES} bytes"),
        ));
    }
    if name.contains(|c: char| c.is_whitespace() || c.is_control() || "=!<>\"'(),".contains(c)) {
        return Err(Invalid::new(
            "invalid_annotation",
            format!("name {name:?} must have no spaces, quotes, brackets, commas or operators"),
        ));
    }
    Ok(())
}

fn invalid(message: impl Into<String>) -> Invalid {
    Invalid::new("invalid_annotation", message)
}

/// Who made an annotation: the id of the key (or of the key that opened the
/// session), with its name. A server without keys has no authors: its annotations
/// all have the empty id, so each name is one annotation per target there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Author {
    pub key_id: String,
    pub name: String,
}

/// An annotation as stored and listed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Annotation {
    pub trace_id: String,
    /// None for the trace itself.
    pub span_id: Option<String>,
    pub name: String,
    pub value: Value,
    /// `number`, `string` or `boolean`.
    pub kind: String,
    pub comment: Option<String>,
    pub author: Author,
    pub source: Source,
    pub created_us: i64,
    pub updated_us: i64,
}

/// Most chips a trace of a list carries, the most said first.
pub const MAX_CHIPS: usize = 6;

/// Annotations of a trace as its row in a list shows them: one name and value,
/// with how many annotations (on the trace or its spans, by anyone) say it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoteChip {
    pub name: String,
    pub value: Value,
    pub count: i64,
}

/// `GET …/annotations`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnnotationList {
    pub annotations: Vec<Annotation>,
}

/// `DELETE …/annotations`: whether there was one to delete.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnnotationDeleted {
    pub deleted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(body: Value) -> Result<NoteWrite, Invalid> {
        let put = serde_json::from_value::<AnnotationPut>(body)
            .map_err(|e| Invalid::new("invalid_body", e.to_string()))?;
        put.source()?;
        put.checked()
    }

    #[test]
    fn each_field_is_named_when_wrong() {
        let cases = [
            (json!({"name": "has space", "value": 1}), "name"),
            (json!({"name": "a=b", "value": 1}), "name"),
            (json!({"name": "", "value": 1}), "name"),
            (json!({"name": "ok"}), "value"),
            (json!({"name": "ok", "value": [1]}), "value"),
            (json!({"name": "ok", "value": "x".repeat(2000)}), "value"),
            (
                json!({"name": "ok", "value": 1, "comment": "c".repeat(5000)}),
                "comment",
            ),
            (
                json!({"name": "ok", "value": 1, "span_id": "no spaces"}),
                "span_id",
            ),
            (
                json!({"name": "ok", "value": 1, "source": "robot"}),
                "source",
            ),
        ];
        for (body, field) in cases {
            let e = put(body.clone()).expect_err("refused");
            assert!(e.message.contains(field), "{body}: {}", e.message);
        }
    }

    #[test]
    fn values_keep_their_type() {
        assert_eq!(
            put(json!({"name": "score", "value": 0.5})).map(|w| w.value),
            Ok(NoteValue::Number(0.5))
        );
        assert_eq!(
            put(json!({"name": "hack", "value": true})).map(|w| w.value),
            Ok(NoteValue::Bool(true))
        );
        let w =
            put(json!({"name": "label", "value": "reward hacking", "comment": ""})).expect("ok");
        assert_eq!(w.value.kind(), "string");
        assert_eq!(w.comment, None);
    }
}
