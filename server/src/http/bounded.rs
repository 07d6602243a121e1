//! JSON bodies decoded within bounds. A request's bytes say little about its decoded
//! size (`[{},{},…]` costs 3 bytes an item on the wire and a few hundred in memory),
//! so every JSON body is first counted without decoding it, and its decoded size is
//! taken from the write budget; a list field is then read no further than its limit.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::error::{ApiError, ApiResult};

/// The most JSON values (objects, lists, keys and scalars) one request may hold.
pub const MAX_JSON_VALUES: usize = 1_000_000;
/// What one decoded value may take in memory, at most: a `serde_json::Value` (80
/// bytes with ordered maps) or a map entry (120), twice over for a growing list's
/// spare room and its copy when it grows.
pub const VALUE_BYTES: usize = 256;

/// The values a JSON text holds, counted without decoding it: one, plus one for
/// every container opened and every `,` and `:` outside strings, each of which
/// starts another value. Stops counting past `limit`.
pub fn count_values(bytes: &[u8], limit: usize) -> usize {
    let mut count = 1usize;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => {
                at = string_end(bytes, at + 1);
                continue;
            }
            b'{' | b'[' | b',' | b':' => {
                count += 1;
                if count > limit {
                    return count;
                }
            }
            _ => {}
        }
        at += 1;
    }
    count
}

/// Where the string that starts at `at` (after its opening quote) ends: just past
/// its closing quote, or the end of the text.
fn string_end(bytes: &[u8], mut at: usize) -> usize {
    while let Some(rest) = bytes.get(at..) {
        match memchr::memchr2(b'"', b'\\', rest) {
            Some(i) if rest[i] == b'\\' => at += i + 2,
            Some(i) => return at + i + 1,
            None => break,
        }
    }
    bytes.len()
}

/// Counts the body's values and takes their decoded size from the write budget:
/// `413 too_many_values` past [`MAX_JSON_VALUES`], 503 when the budget has no room.
pub fn charge_json(bytes: &[u8]) -> ApiResult<()> {
    let decoded = decoded_size(bytes, VALUE_BYTES)?;
    super::budget::take(decoded)
}

/// The most a JSON body decodes to, its values counted without decoding it, each at
/// most `value_bytes` (at least [`VALUE_BYTES`]: types of their own, such as an OTLP
/// span decoded from `{}`, are larger); `413 too_many_values` past
/// [`MAX_JSON_VALUES`].
pub fn decoded_size(bytes: &[u8], value_bytes: usize) -> ApiResult<usize> {
    let values = count_values(bytes, MAX_JSON_VALUES);
    if values > MAX_JSON_VALUES {
        return Err(ApiError::TooLarge {
            code: "too_many_values",
            message: format!(
                "the body holds more than {MAX_JSON_VALUES} JSON values; send it in \
                 smaller requests"
            ),
        });
    }
    Ok(values.saturating_mul(value_bytes.max(VALUE_BYTES)))
}

/// Why a list body did not decode.
#[derive(Debug)]
pub enum ListError {
    /// Not JSON, or an item that is not a `T`.
    Json(serde_json::Error),
    NotObject,
    NotList,
    /// More items than the limit: decoding stopped at the first one past it.
    TooMany,
}

impl ListError {
    /// The answer for a body whose list field is `field`, at most `max` long.
    pub fn into_api(self, field: &str, max: usize) -> ApiError {
        match self {
            ListError::Json(e) => ApiError::bad(
                "invalid_json",
                format!("request body is not valid JSON: {e}"),
            ),
            ListError::NotObject => ApiError::bad(
                "invalid_body",
                format!("body must be an object with a {field} list"),
            ),
            ListError::NotList => ApiError::bad("invalid_body", format!("{field} must be a list")),
            ListError::TooMany => ApiError::TooLarge {
                code: "too_many_items",
                message: format!("{field} has more than {max} items; at most {max} per request"),
            },
        }
    }
}

/// The list under `field` of a JSON object body, decoded item by item and refused
/// as soon as it holds more than `max`. Other fields are skipped unread; a field
/// given twice counts its last value, as a JSON object's would.
pub fn decode_list<'de, T: Deserialize<'de>>(
    bytes: &'de [u8],
    field: &'static str,
    max: usize,
) -> Result<Vec<T>, ListError> {
    let problem = Cell::new(None::<Shape>);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = ObjectSeed::<T> {
        field,
        max,
        problem: &problem,
        item: PhantomData,
    };
    let decoded = seed.deserialize(&mut de).and_then(|list| {
        de.end()?;
        Ok(list)
    });
    match (decoded, problem.get()) {
        (Ok(list), _) => Ok(list),
        (Err(_), Some(Shape::TooMany)) => Err(ListError::TooMany),
        // A shape problem is named only for JSON: broken text is that first.
        (Err(e), Some(shape)) => match serde_json::from_slice::<IgnoredAny>(bytes) {
            Ok(_) => Err(shape.into()),
            Err(_) => Err(ListError::Json(e)),
        },
        (Err(e), None) => Err(ListError::Json(e)),
    }
}

/// A shape problem, kept beside the decoder: serde's own errors are text alone.
#[derive(Clone, Copy)]
enum Shape {
    NotObject,
    NotList,
    TooMany,
}

impl From<Shape> for ListError {
    fn from(shape: Shape) -> Self {
        match shape {
            Shape::NotObject => ListError::NotObject,
            Shape::NotList => ListError::NotList,
            Shape::TooMany => ListError::TooMany,
        }
    }
}

struct ObjectSeed<'p, T> {
    field: &'static str,
    max: usize,
    problem: &'p Cell<Option<Shape>>,
    item: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for ObjectSeed<'_, T> {
    type Value = Vec<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Deserialize<'de>> ObjectSeed<'_, T> {
    fn fail<E: serde::de::Error>(&self, shape: Shape) -> E {
        self.problem.set(Some(shape));
        E::custom("the body is not the expected shape")
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectSeed<'_, T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an object with a {} list", self.field)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<T>, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key != self.field {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let entered = Cell::new(false);
            let list = ListSeed::<T> {
                max: self.max,
                problem: self.problem,
                entered: &entered,
                item: PhantomData,
            };
            match map.next_value_seed(list) {
                Ok(items) => found = Some(items),
                // Failed before the list began: the field is not a list.
                Err(_) if !entered.get() && self.problem.get().is_none() => {
                    return Err(self.fail(Shape::NotList))
                }
                Err(e) => return Err(e),
            }
        }
        found.ok_or_else(|| self.fail(Shape::NotList))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Vec<T>, A::Error> {
        Err(self.fail(Shape::NotObject))
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Vec<T>, E> {
        Err(self.fail(Shape::NotObject))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Vec<T>, E> {
        Err(self.fail(Shape::NotObject))
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Vec<T>, E> {
        Err(self.fail(Shape::NotObject))
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Vec<T>, E> {
        Err(self.fail(Shape::NotObject))
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Vec<T>, E> {
        Err(self.fail(Shape::NotObject))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<T>, E> {
        Err(self.fail(Shape::NotObject))
    }
}

struct ListSeed<'p, T> {
    max: usize,
    problem: &'p Cell<Option<Shape>>,
    entered: &'p Cell<bool>,
    item: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for ListSeed<'_, T> {
    type Value = Vec<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for ListSeed<'_, T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list of at most {} items", self.max)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        self.entered.set(true);
        // Sized up front where the list says how long it is, never past the limit.
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max));
        while let Some(item) = seq.next_element()? {
            if items.len() == self.max {
                self.problem.set(Some(Shape::TooMany));
                return Err(serde::de::Error::custom("too many items"));
            }
            items.push(item);
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn values_are_counted_outside_strings_only() {
        assert_eq!(count_values(b"1", 100), 1);
        assert_eq!(count_values(b"[1,2,3]", 100), 4);
        assert_eq!(count_values(br#"{"a":1,"b":[2]}"#, 100), 6);
        assert_eq!(count_values(br#"{"a":"x,y:[{\"}"}"#, 100), 3);
        assert_eq!(count_values(br#""unterminated \"#, 100), 1);
        let many = format!("[{}0]", "0,".repeat(5_000));
        assert_eq!(
            count_values(many.as_bytes(), 100),
            101,
            "stops past the limit"
        );
    }

    fn list(text: &str, max: usize) -> Result<Vec<Value>, ListError> {
        decode_list(text.as_bytes(), "events", max)
    }

    #[test]
    fn a_list_is_read_within_its_limit_and_other_fields_skipped() {
        let items = list(r#"{"x": {"y": [1]}, "events": [{}, 2, "three"]}"#, 3);
        assert_eq!(items.map(|v| v.len()).ok(), Some(3));
        assert!(matches!(
            list(r#"{"events": [1, 2, 3, 4]}"#, 3),
            Err(ListError::TooMany)
        ));
        // Past the limit decoding stops, even if the rest is not JSON.
        assert!(matches!(
            list(r#"{"events": [1, 2, 3, 4, oops"#, 3),
            Err(ListError::TooMany)
        ));
    }

    #[test]
    fn each_shape_problem_is_told_apart_and_broken_text_comes_first() {
        assert!(matches!(list("[1]", 3), Err(ListError::NotObject)));
        assert!(matches!(list(r#""text""#, 3), Err(ListError::NotObject)));
        assert!(matches!(
            list(r#"{"events": 3}"#, 3),
            Err(ListError::NotList)
        ));
        assert!(matches!(
            list(r#"{"points": []}"#, 3),
            Err(ListError::NotList)
        ));
        assert!(matches!(
            list(r#"{"events": 3, oops"#, 3),
            Err(ListError::Json(_))
        ));
        assert!(matches!(
            list(r#"{"events": [1,"#, 3),
            Err(ListError::Json(_))
        ));
        assert!(matches!(
            list(r#"{"events": []} trailing"#, 3),
            Err(ListError::Json(_))
        ));
        let api = ListError::TooMany.into_api("events", 10_000);
        assert!(api.to_string().contains("more than 10000"), "{api}");
    }
}
