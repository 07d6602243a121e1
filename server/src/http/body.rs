//! Request bodies: size limits on the wire and after decompression (a zip bomb is cut
//! off as it inflates, never held whole), gzip and zstd, and JSON.

use std::io::Read;

use axum::body::{to_bytes, Body};
use axum::http::{header, HeaderMap};
use bytes::Bytes;
use serde_json::Value;

use super::bounded;
use super::error::{ApiError, ApiResult};

pub const MAX_WIRE_BYTES: usize = 32 * 1024 * 1024;
pub const MAX_INFLATED_BYTES: usize = 64 * 1024 * 1024;

/// How long a request body may take to arrive; a slower one is cut off, so a slow
/// client cannot hold a connection and its buffer open without end.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether reading a body failed on its size limit (rather than on time or a
/// dropped connection).
fn over_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

fn too_large(message: String) -> ApiError {
    ApiError::TooLarge {
        code: "payload_too_large",
        message,
    }
}

/// Reads the body, decompressing it as its Content-Encoding says.
pub async fn read(headers: &HeaderMap, body: Body) -> ApiResult<Bytes> {
    // The wire's share of the body budget: the declared length, or the limit for a
    // body of unknown length.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_WIRE_BYTES) {
        return Err(too_large(format!(
            "request body is over {} MiB",
            MAX_WIRE_BYTES >> 20
        )));
    }
    super::budget::take(declared.unwrap_or(MAX_WIRE_BYTES))?;
    let wire = to_bytes(body, MAX_WIRE_BYTES).await.map_err(|e| {
        if over_limit(&e) {
            too_large(format!("request body is over {} MiB", MAX_WIRE_BYTES >> 20))
        } else {
            // Cut off by the body timeout, or the client went away mid-body.
            ApiError::Timeout(format!(
                "the request body did not arrive whole within {} s",
                BODY_TIMEOUT.as_secs()
            ))
        }
    })?;
    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    match encoding.as_str() {
        "" | "identity" => Ok(wire),
        "gzip" | "x-gzip" => {
            // The trailer's size (mod 4 GiB, and a sender may lie): a hint only.
            let hint = wire
                .len()
                .checked_sub(4)
                .and_then(|at| wire.get(at..))
                .and_then(|tail| tail.try_into().ok())
                .map(|tail| u32::from_le_bytes(tail) as usize);
            inflate(
                flate2::read::GzDecoder::new(&wire[..]),
                "gzip",
                hint,
                wire.len(),
            )
        }
        "zstd" => {
            let decoder = zstd::stream::read::Decoder::new(&wire[..])
                .map_err(|e| ApiError::bad("invalid_body", format!("zstd body: {e}")))?;
            let hint = zstd::zstd_safe::get_frame_content_size(&wire)
                .ok()
                .flatten()
                .and_then(|size| usize::try_from(size).ok());
            inflate(decoder, "zstd", hint, wire.len())
        }
        other => Err(ApiError::UnsupportedEncoding(format!(
            "Content-Encoding {other:?} is not supported; use gzip or zstd"
        ))),
    }
}

/// The most one compressed byte inflates to (deflate's limit is about 1032), so a
/// size a small body claims cannot reserve more than it could fill.
const MAX_RATIO: usize = 1032;

/// Decompresses to at most [`MAX_INFLATED_BYTES`]; `hint` is the size the body
/// says it inflates to, taken as a first capacity (within the limit, and within
/// what `wire_len` bytes could inflate to) and no more.
fn inflate(
    mut reader: impl Read,
    name: &str,
    hint: Option<usize>,
    wire_len: usize,
) -> ApiResult<Bytes> {
    let broken = |e: std::io::Error| {
        ApiError::bad(
            "invalid_body",
            format!("{name} body could not be decompressed: {e}"),
        )
    };
    // Grown by hand, not by `read_to_end`: doubling past the limit would reserve
    // twice the limit for a bomb's last read.
    let first = hint
        .unwrap_or(0)
        .min(MAX_INFLATED_BYTES)
        .min(wire_len.saturating_mul(MAX_RATIO));
    super::budget::take(first)?;
    let mut out: Vec<u8> = Vec::with_capacity(first);
    let mut piece = [0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut piece).map_err(broken)?;
        if n == 0 {
            return Ok(Bytes::from(out));
        }
        if out.len() + n > MAX_INFLATED_BYTES {
            return Err(too_large(format!(
                "request body is over {} MiB once decompressed",
                MAX_INFLATED_BYTES >> 20
            )));
        }
        if out.capacity() - out.len() < n {
            let grown = (out.capacity() * 2).clamp(piece.len(), MAX_INFLATED_BYTES);
            super::budget::take(grown.saturating_sub(out.capacity()))?;
            out.reserve_exact(grown - out.len());
        }
        out.extend_from_slice(&piece[..n]);
    }
}

/// A JSON body, its decoded size taken from the write budget first
/// ([`bounded::charge_json`]).
pub fn json(bytes: &[u8]) -> ApiResult<Value> {
    bounded::charge_json(bytes)?;
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad(
            "invalid_json",
            format!("request body is not valid JSON: {e}"),
        )
    })
}

/// The list under `field` of a JSON object body, at most `max` long: refused as soon
/// as it holds more, before the rest is decoded. The body's decoded size is taken from
/// the write budget first.
pub fn list(bytes: &[u8], field: &'static str, max: usize) -> ApiResult<Vec<Value>> {
    bounded::charge_json(bytes)?;
    bounded::decode_list(bytes, field, max).map_err(|e| e.into_api(field, max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[tokio::test]
    async fn a_zip_bomb_is_refused_without_inflating_it_whole() {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..80 {
            enc.write_all(&zeros).unwrap();
        }
        let bomb = enc.finish().unwrap();
        assert!(bomb.len() < 1 << 20);
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_ENCODING, "gzip".parse().unwrap());
        let err = read(&headers, Body::from(bomb)).await.unwrap_err();
        assert!(matches!(err, ApiError::TooLarge { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn zstd_and_gzip_bodies_are_read() {
        let text = br#"{"events": []}"#;
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_ENCODING, "zstd".parse().unwrap());
        let packed = zstd::encode_all(&text[..], 3).unwrap();
        assert_eq!(&read(&headers, Body::from(packed)).await.unwrap()[..], text);
        headers.insert(header::CONTENT_ENCODING, "br".parse().unwrap());
        assert!(read(&headers, Body::from(text.to_vec())).await.is_err());
    }
}
