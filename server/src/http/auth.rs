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
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(key)
            if state
                .api_keys
                .iter()
                .any(|k| constant_time_eq(k.as_bytes(), key.as_bytes())) =>
        {
            Ok(next.run(request).await)
        }
        Some(_) => Err(ApiError::Unauthorized("the API key is not valid".into())),
        None => Err(ApiError::Unauthorized(
            "this server needs an API key: send Authorization: Bearer <key>".into(),
        )),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
