//! OTLP attribute values to Treeline attribute values (bool, number, string, list of
//! strings): nested key-value lists become dotted names, anything deeper becomes JSON
//! text, so no attribute is lost to the native API's narrower value types.

use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use serde_json::{Map, Number, Value};
use treeline_wire::MAX_ATTRIBUTE_BYTES;

/// Every attribute of `attrs`, flattened. Later duplicates win, as in the OTel SDKs.
pub fn flatten(attrs: &[KeyValue]) -> Map<String, Value> {
    let mut out = Map::new();
    for kv in attrs {
        if let Some(value) = kv.value.as_ref() {
            flatten_into(&kv.key, value, &mut out);
        }
    }
    out
}

fn flatten_into(name: &str, value: &AnyValue, out: &mut Map<String, Value>) {
    match &value.value {
        Some(Any::KvlistValue(list)) => {
            for kv in &list.values {
                if let Some(inner) = kv.value.as_ref() {
                    flatten_into(&format!("{name}.{}", kv.key), inner, out);
                }
            }
        }
        Some(Any::ArrayValue(array)) => {
            let scalars: Option<Vec<Value>> = array
                .values
                .iter()
                .map(|v| scalar(v).map(|s| Value::String(text_of(&s))))
                .collect();
            let value = match scalars {
                Some(list) => Value::Array(list),
                // Arrays of objects (structured messages, say) are kept whole as JSON.
                None => Value::String(to_json(value).to_string()),
            };
            out.insert(name.to_string(), value);
        }
        _ => {
            if let Some(v) = scalar(value) {
                out.insert(name.to_string(), v);
            }
        }
    }
}

/// A scalar AnyValue as JSON; None for arrays, key-value lists and empty values.
fn scalar(value: &AnyValue) -> Option<Value> {
    match value.value.as_ref()? {
        Any::StringValue(s) => Some(Value::String(s.clone())),
        Any::BoolValue(b) => Some(Value::Bool(*b)),
        Any::IntValue(i) => Some(Value::from(*i)),
        Any::DoubleValue(d) => Some(
            Number::from_f64(*d)
                .map(Value::Number)
                // NaN and infinity have no JSON number: keep them readable.
                .unwrap_or_else(|| Value::String(d.to_string())),
        ),
        Any::BytesValue(b) => Some(Value::String(hex(b))),
        Any::ArrayValue(_) | Any::KvlistValue(_) | Any::StringValueStrindex(_) => None,
    }
}

/// Any AnyValue as plain JSON (objects for key-value lists).
pub fn to_json(value: &AnyValue) -> Value {
    match &value.value {
        Some(Any::ArrayValue(array)) => Value::Array(array.values.iter().map(to_json).collect()),
        Some(Any::KvlistValue(list)) => Value::Object(
            list.values
                .iter()
                .map(|kv| {
                    let v = kv.value.as_ref().map(to_json).unwrap_or(Value::Null);
                    (kv.key.clone(), v)
                })
                .collect(),
        ),
        _ => scalar(value).unwrap_or(Value::Null),
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// Makes the map fit the native attribute rules instead of losing the whole span to
/// one oversized value: names over 256 bytes are dropped, long strings are cut.
/// Returns what was changed, for the export's warnings.
pub fn fit(attrs: &mut Map<String, Value>) -> Vec<String> {
    let mut notes = Vec::new();
    attrs.retain(|name, _| {
        let keep = !name.is_empty() && name.len() <= 256;
        if !keep {
            notes.push(format!(
                "an attribute with a {}-byte name was dropped",
                name.len()
            ));
        }
        keep
    });
    for (name, value) in attrs.iter_mut() {
        match value {
            Value::String(s) if s.len() > MAX_ATTRIBUTE_BYTES => {
                cut(s, MAX_ATTRIBUTE_BYTES);
                notes.push(format!(
                    "attributes.{name} was cut to {MAX_ATTRIBUTE_BYTES} bytes"
                ));
            }
            Value::Array(items) => {
                let mut total = 0usize;
                let before = items.len();
                items.retain(|item| {
                    total += item.as_str().map_or(0, str::len);
                    total <= MAX_ATTRIBUTE_BYTES
                });
                if items.len() < before {
                    notes.push(format!(
                        "attributes.{name} was cut to its first {} items",
                        items.len()
                    ));
                }
            }
            _ => {}
        }
    }
    notes
}

/// Cuts `s` to at most `max` bytes on a character boundary.
pub fn cut(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
}

/// An integer attribute, also when sent as an integral double or a numeric string.
pub fn as_i64(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValueList};
    use serde_json::json;

    fn kv(key: &str, value: Any) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
            ..Default::default()
        }
    }

    fn s(text: &str) -> AnyValue {
        AnyValue {
            value: Some(Any::StringValue(text.into())),
        }
    }

    #[test]
    fn values_flatten_to_the_native_types() {
        let nested = KeyValueList {
            values: vec![kv("b", Any::IntValue(2)), kv("c", Any::BoolValue(true))],
        };
        let objects = ArrayValue {
            values: vec![AnyValue {
                value: Some(Any::KvlistValue(KeyValueList {
                    values: vec![kv("role", Any::StringValue("user".into()))],
                })),
            }],
        };
        let attrs = flatten(&[
            kv("s", Any::StringValue("x".into())),
            kv("i", Any::IntValue(-3)),
            kv("d", Any::DoubleValue(1.5)),
            kv("nan", Any::DoubleValue(f64::NAN)),
            kv("bytes", Any::BytesValue(vec![0xab, 0x01])),
            kv(
                "list",
                Any::ArrayValue(ArrayValue {
                    values: vec![
                        s("a"),
                        AnyValue {
                            value: Some(Any::IntValue(7)),
                        },
                    ],
                }),
            ),
            kv("a", Any::KvlistValue(nested)),
            kv("msgs", Any::ArrayValue(objects)),
            KeyValue {
                key: "empty".into(),
                value: None,
                ..Default::default()
            },
        ]);
        assert_eq!(attrs["s"], "x");
        assert_eq!(attrs["i"], -3);
        assert_eq!(attrs["d"], 1.5);
        assert_eq!(attrs["nan"], "NaN");
        assert_eq!(attrs["bytes"], "ab01");
        assert_eq!(attrs["list"], json!(["a", "7"]));
        assert_eq!(attrs["a.b"], 2);
        assert_eq!(attrs["a.c"], true);
        assert_eq!(attrs["msgs"], r#"[{"role":"user"}]"#);
        assert!(!attrs.contains_key("empty"));
    }

    #[test]
    fn oversized_attributes_are_cut_not_fatal() {
        let mut attrs = Map::new();
        attrs.insert("long".into(), json!("é".repeat(MAX_ATTRIBUTE_BYTES)));
        attrs.insert("n".repeat(300), json!(1));
        let notes = fit(&mut attrs);
        assert_eq!(notes.len(), 2);
        let long = attrs["long"].as_str().unwrap_or_default();
        assert!(long.len() <= MAX_ATTRIBUTE_BYTES && long.starts_with('é'));
        assert_eq!(attrs.len(), 1);
    }

    #[test]
    fn integers_are_read_from_any_encoding() {
        assert_eq!(as_i64(&json!(12)), Some(12));
        assert_eq!(as_i64(&json!(12.0)), Some(12));
        assert_eq!(as_i64(&json!("12")), Some(12));
        assert_eq!(as_i64(&json!(1.5)), None);
        assert_eq!(as_i64(&json!(true)), None);
    }
}
