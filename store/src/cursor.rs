use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::StoreError;

/// A keyset position: the sort value and the ids of the last row of a page.
/// Opaque to clients.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    pub value: i64,
    pub a: String,
    pub b: String,
    /// The sort value when it is a number that is not an integer (an attribute's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<f64>,
    /// An integer key sorted before `value` (a span's ordinal among its siblings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead: Option<i64>,
}

impl Cursor {
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    pub fn decode(text: &str) -> Result<Cursor, StoreError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| StoreError::BadCursor)?;
        serde_json::from_slice(&bytes).map_err(|_| StoreError::BadCursor)
    }
}

/// Trims the extra row a page query fetched and turns the last kept row into the
/// next page's cursor.
pub(super) fn page_cursor<T>(
    items: &mut Vec<T>,
    limit: usize,
    key: impl Fn(&T) -> Cursor,
) -> Option<String> {
    if items.len() <= limit {
        return None;
    }
    items.truncate(limit);
    items.last().map(|last| key(last).encode())
}
