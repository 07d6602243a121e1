//! What an OTLP request decodes to, known before it is decoded. Protobuf packs an
//! empty span into two bytes and prost unpacks it into a few hundred, so the wire
//! format is walked first (no allocation): the spans are counted, refused past
//! [`MAX_OTLP_SPANS`], and every message and text is weighed at its decoded size.

use std::mem::size_of;

use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, EntityRef, InstrumentationScope, KeyValue, KeyValueList,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
pub use treeline_wire::limits::MAX_OTLP_SPANS;

use crate::http::error::{ApiError, ApiResult};

/// The most one request may decode to, as weighed below (the request and the events
/// its spans map to, held together until they are stored).
pub const MAX_DECODED_BYTES: usize = 256 << 20;
/// The decoded request and the native events mapped from it are held at once.
const MAPPED_COPIES: usize = 2;
/// A text, a byte string or a list entry: its header beside its bytes.
const ENTRY_BYTES: usize = 32;
/// prost's own limit on nesting; a body nested deeper does not decode.
const MAX_DEPTH: u32 = 100;

/// The messages of a trace export that hold other messages or lists.
#[derive(Clone, Copy)]
enum Message {
    Request,
    ResourceSpans,
    Resource,
    EntityRef,
    ScopeSpans,
    Scope,
    Span,
    Event,
    Link,
    Status,
    KeyValue,
    AnyValue,
    ArrayValue,
    KeyValueList,
}

impl Message {
    /// The message a length-delimited field of this one holds, if any.
    fn field(self, tag: u64) -> Option<Message> {
        use Message::*;
        Some(match (self, tag) {
            (Request, 1) => ResourceSpans,
            (ResourceSpans, 1) => Resource,
            (ResourceSpans, 2) => ScopeSpans,
            (Resource, 1) => KeyValue,
            (Resource, 3) => EntityRef,
            (ScopeSpans, 1) => Scope,
            (ScopeSpans, 2) => Span,
            (Scope, 3) => KeyValue,
            (Span, 9) => KeyValue,
            (Span, 11) => Event,
            (Span, 13) => Link,
            (Span, 15) => Status,
            (Event, 3) | (Link, 4) | (KeyValueList, 1) => KeyValue,
            (KeyValue, 2) | (ArrayValue, 1) => AnyValue,
            (AnyValue, 5) => ArrayValue,
            (AnyValue, 6) => KeyValueList,
            _ => return None,
        })
    }

    fn decoded_size(self) -> usize {
        match self {
            Message::Request => 0,
            Message::ResourceSpans => size_of::<ResourceSpans>(),
            Message::Resource => size_of::<Resource>(),
            Message::EntityRef => size_of::<EntityRef>(),
            Message::ScopeSpans => size_of::<ScopeSpans>(),
            Message::Scope => size_of::<InstrumentationScope>(),
            Message::Span => size_of::<Span>(),
            Message::Event => size_of::<Event>(),
            Message::Link => size_of::<Link>(),
            Message::Status => size_of::<Status>(),
            Message::KeyValue => size_of::<KeyValue>(),
            Message::AnyValue => size_of::<AnyValue>(),
            Message::ArrayValue => size_of::<ArrayValue>(),
            Message::KeyValueList => size_of::<KeyValueList>(),
        }
    }
}

/// Why a walk stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    TooManySpans,
    TooLarge,
    /// Not protobuf that prost would decode: said by prost itself, afterwards.
    Malformed,
}

#[derive(Default)]
struct Tally {
    spans: usize,
    bytes: usize,
}

/// Weighs a protobuf `ExportTraceServiceRequest`: its decoded size (with the events
/// mapped from it), refusing past [`MAX_OTLP_SPANS`] spans or [`MAX_DECODED_BYTES`].
pub fn weigh_protobuf(bytes: &[u8]) -> Result<usize, Refusal> {
    let (walked, weighed) = weigh(bytes);
    walked.map(|()| weighed)
}

/// The walk's outcome, and what it weighed up to where it stopped.
fn weigh(bytes: &[u8]) -> (Result<(), Refusal>, usize) {
    let mut tally = Tally::default();
    let walked = walk(bytes, Message::Request, 0, &mut tally);
    (walked, tally.bytes)
}

fn walk(mut bytes: &[u8], message: Message, depth: u32, tally: &mut Tally) -> Result<(), Refusal> {
    if depth > MAX_DEPTH {
        return Err(Refusal::Malformed);
    }
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        let (tag, wire_type) = (key >> 3, key & 7);
        match wire_type {
            0 => {
                varint(&mut bytes)?;
            }
            1 => bytes = bytes.get(8..).ok_or(Refusal::Malformed)?,
            5 => bytes = bytes.get(4..).ok_or(Refusal::Malformed)?,
            2 => {
                let len = usize::try_from(varint(&mut bytes)?).map_err(|_| Refusal::Malformed)?;
                let inner = bytes.get(..len).ok_or(Refusal::Malformed)?;
                bytes = &bytes[len..];
                tally.bytes = tally
                    .bytes
                    .saturating_add(MAPPED_COPIES * (ENTRY_BYTES + len));
                if let Some(child) = message.field(tag) {
                    if matches!(child, Message::Span) {
                        tally.spans += 1;
                        if tally.spans > MAX_OTLP_SPANS {
                            return Err(Refusal::TooManySpans);
                        }
                    }
                    tally.bytes = tally
                        .bytes
                        .saturating_add(MAPPED_COPIES * child.decoded_size());
                    walk(inner, child, depth + 1, tally)?;
                }
                if tally.bytes > MAX_DECODED_BYTES {
                    return Err(Refusal::TooLarge);
                }
            }
            // Groups (3, 4) are not in OTLP's messages; nothing else is a wire type.
            _ => return Err(Refusal::Malformed),
        }
    }
    Ok(())
}

fn varint(bytes: &mut &[u8]) -> Result<u64, Refusal> {
    let mut value = 0u64;
    for shift in 0..10 {
        let (&byte, rest) = bytes.split_first().ok_or(Refusal::Malformed)?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << (7 * shift);
        if byte < 0x80 {
            return Ok(value);
        }
    }
    Err(Refusal::Malformed)
}

/// The answer for a request refused before decoding.
pub fn too_many_spans() -> ApiError {
    ApiError::TooLarge {
        code: "too_many_items",
        message: format!(
            "the request holds more than {MAX_OTLP_SPANS} spans; at most {MAX_OTLP_SPANS} per \
             request (set the exporter's batch size lower, for example \
             OTEL_BSP_MAX_EXPORT_BATCH_SIZE)"
        ),
    }
}

pub fn too_large() -> ApiError {
    ApiError::TooLarge {
        code: "payload_too_large",
        message: format!(
            "the request decodes to more than {} MiB; send its spans in smaller requests",
            MAX_DECODED_BYTES >> 20
        ),
    }
}

/// Refuses an OTLP/JSON request that would decode to more than [`MAX_DECODED_BYTES`],
/// and takes its decoded size from the write budget. Any value of it may decode to a
/// span (`{}` in a list of spans), so each is weighed as one, with its mapped events.
pub fn charge_json(bytes: &[u8]) -> ApiResult<()> {
    let decoded = crate::http::bounded::decoded_size(bytes, MAPPED_COPIES * size_of::<Span>())?;
    if decoded > MAX_DECODED_BYTES {
        return Err(too_large());
    }
    crate::http::budget::take(decoded)
}

/// Refuses a protobuf request past its bounds and takes its decoded size from the
/// write budget. A body that does not walk is left for prost to name its fault, its
/// share taken for what prost decodes before it.
pub fn charge_protobuf(bytes: &[u8]) -> ApiResult<()> {
    match weigh(bytes) {
        // prost decodes a broken body up to its fault: no more than was weighed.
        (Ok(()) | Err(Refusal::Malformed), weighed) => crate::http::budget::take(weighed),
        (Err(Refusal::TooManySpans), _) => Err(too_many_spans()),
        (Err(Refusal::TooLarge), _) => Err(too_large()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;

    fn request(spans: usize, attributes: usize) -> Vec<u8> {
        let span = Span {
            name: "s".into(),
            attributes: (0..attributes)
                .map(|i| KeyValue {
                    key: format!("k{i}"),
                    value: Some(AnyValue::default()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span; spans],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
        .encode_to_vec()
    }

    #[test]
    fn spans_are_counted_and_weighed_at_their_decoded_size() {
        let weight = weigh_protobuf(&request(10, 3)).unwrap_or(0);
        let per_span = size_of::<Span>() + 3 * (size_of::<KeyValue>() + size_of::<AnyValue>());
        assert!(weight >= 2 * 10 * per_span, "{weight} < {}", 20 * per_span);
        assert_eq!(
            weigh_protobuf(&request(MAX_OTLP_SPANS + 1, 0)),
            Err(Refusal::TooManySpans)
        );
        assert!(weigh_protobuf(&request(MAX_OTLP_SPANS, 0)).is_ok());
    }

    #[test]
    fn otlp_json_weighs_each_value_as_a_span() {
        let spans = |n: usize| {
            let items = vec!["{}"; n].join(",");
            format!(r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{items}]}}]}}]}}"#)
        };
        assert!(charge_json(spans(1_000).as_bytes()).is_ok());
        let per_value = MAPPED_COPIES * size_of::<Span>();
        let over = MAX_DECODED_BYTES / per_value / 2 + 1_000;
        let err = charge_json(spans(over).as_bytes()).map_err(|e| e.to_string());
        assert!(
            err.is_err_and(|e| e.contains("decodes to more than")),
            "{over}"
        );
    }

    #[test]
    fn a_body_that_is_not_protobuf_is_left_to_prost() {
        assert_eq!(weigh_protobuf(b"\xff\xff\xff"), Err(Refusal::Malformed));
        assert_eq!(weigh_protobuf(b"\x0a\x05ab"), Err(Refusal::Malformed));
        assert_eq!(weigh_protobuf(b""), Ok(0));
    }

    #[test]
    fn many_attributes_weigh_past_the_bound() {
        // One span whose attributes are each two bytes on the wire.
        let mut span = Vec::new();
        for _ in 0..3_000_000 {
            span.extend_from_slice(b"\x4a\x00");
        }
        let mut scope = vec![0x12];
        put_len(&mut scope, span.len());
        scope.extend_from_slice(&span);
        let mut resource = vec![0x12];
        put_len(&mut resource, scope.len());
        resource.extend_from_slice(&scope);
        let mut body = vec![0x0a];
        put_len(&mut body, resource.len());
        body.extend_from_slice(&resource);
        assert_eq!(weigh_protobuf(&body), Err(Refusal::TooLarge));
    }

    fn put_len(out: &mut Vec<u8>, mut len: usize) {
        while len >= 0x80 {
            out.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
    }
}
