//! The OTLP/HTTP encodings: an ExportTraceServiceRequest as binary protobuf or as
//! OTLP/JSON (hex ids, camelCase names), and the response in the request's encoding.

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

use crate::http::error::{error_response, ApiError, ApiResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Protobuf,
    Json,
}

impl Format {
    /// From the Content-Type; None for anything else.
    pub fn of(headers: &HeaderMap) -> Option<Format> {
        match media_type(headers).to_ascii_lowercase().as_str() {
            "application/x-protobuf" | "application/protobuf" => Some(Format::Protobuf),
            "application/json" => Some(Format::Json),
            _ => None,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Protobuf => "application/x-protobuf",
            Format::Json => "application/json",
        }
    }
}

fn media_type(headers: &HeaderMap) -> &str {
    let raw = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    raw.split(';').next().unwrap_or("").trim()
}

/// 415 for a Content-Type that is neither, as OTLP/HTTP asks.
pub fn unsupported(headers: &HeaderMap) -> Response {
    error_response(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!(
            "Content-Type {:?} is not supported: send application/x-protobuf or application/json",
            media_type(headers)
        ),
    )
}

pub fn request(format: Format, bytes: &[u8]) -> ApiResult<ExportTraceServiceRequest> {
    match format {
        Format::Protobuf => ExportTraceServiceRequest::decode(bytes).map_err(|e| {
            ApiError::bad(
                "invalid_protobuf",
                format!("body is not an OTLP ExportTraceServiceRequest: {e}"),
            )
        }),
        Format::Json => serde_json::from_slice(bytes).map_err(|e| {
            ApiError::bad(
                "invalid_json",
                format!("body is not an OTLP/JSON ExportTraceServiceRequest: {e}"),
            )
        }),
    }
}

/// 200 with an empty response when everything was accepted, else with
/// `partial_success` saying how many spans were rejected and why.
pub fn response(format: Format, partial: Option<ExportTracePartialSuccess>) -> Response {
    let body = match format {
        Format::Protobuf => ExportTraceServiceResponse {
            partial_success: partial,
        }
        .encode_to_vec(),
        Format::Json => match partial {
            None => b"{}".to_vec(),
            Some(p) => {
                serde_json::to_vec(&serde_json::json!({ "partialSuccess": p })).unwrap_or_default()
            }
        },
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, format.content_type())],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_content_type_chooses_the_encoding() {
        let mut headers = HeaderMap::new();
        assert_eq!(Format::of(&headers), None);
        for (value, want) in [
            ("application/x-protobuf", Format::Protobuf),
            ("application/json; charset=utf-8", Format::Json),
        ] {
            headers.insert(header::CONTENT_TYPE, value.parse().expect("header"));
            assert_eq!(Format::of(&headers), Some(want));
        }
        headers.insert(header::CONTENT_TYPE, "text/plain".parse().expect("header"));
        assert_eq!(Format::of(&headers), None);
        assert_eq!(
            unsupported(&headers).status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
    }

    #[test]
    fn otlp_json_with_hex_ids_and_string_integers_decodes() {
        let json = br#"{"resourceSpans": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "svc"}}]},
          "scopeSpans": [{"scope": {"name": "x"}, "spans": [{
            "traceId": "7e84134672487f74184bfeff223a979a", "spanId": "d316279360885ae0",
            "name": "root", "kind": 1, "startTimeUnixNano": "1795965688909196950",
            "endTimeUnixNano": "1795965688910018355",
            "attributes": [{"key": "i", "value": {"intValue": "5"}}],
            "status": {"message": "boom", "code": 2}}]}]}]}"#;
        let request = request(Format::Json, json).unwrap_or_default();
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(
            span.span_id,
            vec![0xd3, 0x16, 0x27, 0x93, 0x60, 0x88, 0x5a, 0xe0]
        );
        assert_eq!(span.start_time_unix_nano, 1_795_965_688_909_196_950);
        assert_eq!(span.status.as_ref().map(|s| s.code), Some(2));
        assert!(super::request(Format::Json, b"{\"resourceSpans\": 3}").is_err());
        assert!(super::request(Format::Protobuf, b"\xff\xff\xff").is_err());
    }
}
