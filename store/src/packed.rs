//! Bodies kept compressed at rest: an input or output of [`PACK_MIN_BYTES`] or more
//! is stored as a zstd frame in `input_z` / `output_z` (its text column left null)
//! when the frame is the smaller. Everything that reads a body (the span
//! inspector, export, diffs, text search passages, the index backfill) unpacks it
//! here; fingerprints and the text index are made from the text at ingest.

use treeline_wire::MAX_BODY_BYTES;

use super::{StoreError, StoreResult};

/// Smaller bodies are kept as text: a frame's own header and the lost chance to
/// read a prefix in SQL outweigh what they would save.
pub(crate) const PACK_MIN_BYTES: usize = 512;

/// zstd's fast end: a chat body packs in a few microseconds, inside the batch's
/// transaction.
const LEVEL: i32 = 1;

/// The largest text a frame may unpack to: a body is cut at [`MAX_BODY_BYTES`]
/// before it is stored, and a cut body ends with a marker.
const UNPACK_MAX: usize = MAX_BODY_BYTES + 1024;

/// `json` as a frame, when it is large enough and the frame is the smaller.
pub(crate) fn pack(json: &str) -> Option<Vec<u8>> {
    if json.len() < PACK_MIN_BYTES {
        return None;
    }
    let frame = zstd::bulk::compress(json.as_bytes(), LEVEL).ok()?;
    (frame.len() < json.len()).then_some(frame)
}

/// The text of a frame [`pack`] made.
pub(crate) fn unpack(frame: &[u8]) -> StoreResult<String> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("a packed body {what}"));
    let size = content_len(frame).ok_or_else(|| corrupt("does not say its size"))?;
    if size > UNPACK_MAX {
        return Err(corrupt("is larger than any body"));
    }
    let bytes = zstd::bulk::decompress(frame, size).map_err(|_| corrupt("does not unpack"))?;
    String::from_utf8(bytes).map_err(|_| corrupt("is not text"))
}

/// The length of a frame's text in bytes, as its header says.
pub(crate) fn content_len(frame: &[u8]) -> Option<usize> {
    zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
        .and_then(|n| usize::try_from(n).ok())
}

/// A body read back: its text column, or else its packed one.
pub(crate) fn body_text(
    text: Option<String>,
    packed: Option<Vec<u8>>,
) -> StoreResult<Option<String>> {
    match (text, packed) {
        (Some(text), _) => Ok(Some(text)),
        (None, Some(frame)) => unpack(&frame).map(Some),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_body_packs_and_comes_back_the_same() {
        let json = serde_json::json!({"messages": [
            {"role": "user", "content": "Move the box to the left wall, then report. ".repeat(40)},
            {"role": "assistant", "content": "Ünïcødé — 箱を左へ。".repeat(30)},
        ]})
        .to_string();
        let frame = pack(&json).expect("packed");
        assert!(
            frame.len() < json.len() / 4,
            "{} of {}",
            frame.len(),
            json.len()
        );
        assert_eq!(unpack(&frame).expect("unpacked"), json);
    }

    #[test]
    fn small_bodies_stay_text_and_dense_ones_still_come_back() {
        assert_eq!(pack(r#"{"text": "short"}"#), None);
        assert_eq!(pack(&"y".repeat(PACK_MIN_BYTES - 1)), None);
        // Base64 of noise, as an image in a body: it packs little, and comes back.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let dense: String = (0..3_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                    [(x % 64) as usize] as char
            })
            .collect();
        let json = format!("\"{dense}\"");
        let frame = pack(&json).expect("packed");
        assert!(
            frame.len() > json.len() / 2,
            "{} of {}",
            frame.len(),
            json.len()
        );
        assert_eq!(unpack(&frame).expect("unpacked"), json);
    }

    #[test]
    fn a_damaged_frame_is_an_error_not_a_panic() {
        let frame = pack(&"x".repeat(5_000)).expect("packed");
        assert!(unpack(&frame[..4]).is_err());
        assert!(unpack(b"not a frame").is_err());
        // A header that claims more than any body may hold is refused before any
        // memory is taken for it.
        let huge = zstd::bulk::compress(&vec![b' '; UNPACK_MAX + 1], 1).expect("frame");
        assert!(unpack(&huge).is_err());
    }
}
