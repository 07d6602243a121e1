//! API keys: with keys configured, writes need `Authorization: Bearer <key>`.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;

use super::error::ApiError;
use super::AppState;

/// With API keys configured, writes need `Authorization: Bearer <key>`.
pub async fn require_key(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if state.api_keys.is_empty() {
        return Ok(next.run(request).await);
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer);
    match given {
        Some(key) if state.api_keys.iter().any(|k| same_key(k, key)) => Ok(next.run(request).await),
        Some(_) => Err(ApiError::Unauthorized("the API key is not valid".into())),
        None => Err(ApiError::Unauthorized(
            "this server needs an API key: send Authorization: Bearer <key>".into(),
        )),
    }
}

/// The credentials of an `Authorization: Bearer <key>` header; the scheme's case
/// does not matter (RFC 9110).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, key) = header.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| key.trim())
        .filter(|k| !k.is_empty())
}

/// Compares the keys' SHA-256 digests in constant time: neither the time nor an
/// early return tells how much of a guess, or its length, was right.
fn same_key(known: &str, given: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (
        Sha256::digest(known.as_bytes()),
        Sha256::digest(given.as_bytes()),
    );
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_is_case_insensitive_and_the_key_must_match_whole() {
        assert_eq!(bearer("Bearer k1"), Some("k1"));
        assert_eq!(bearer("bearer k1"), Some("k1"));
        assert_eq!(bearer("BEARER   k1 "), Some("k1"));
        assert_eq!(bearer("Basic k1"), None);
        assert_eq!(bearer("Bearer "), None);
        assert!(same_key("secret", "secret"));
        assert!(!same_key("secret", "secre"));
        assert!(!same_key("secret", "secret2"));
    }
}
