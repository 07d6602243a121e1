//! The one error type of the HTTP layer, and the one place it becomes the JSON error
//! shape. Internal details go to the log, never to the client.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use treeline_wire::{ErrorBody, ErrorDetail, Invalid};

use crate::failure::chain;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("{0}")]
    Unauthorized(String),
    /// Credentials that may not do this (`forbidden`), or a cookie-borne change from
    /// another site (`cross_site_request`).
    #[error("{message}")]
    Forbidden { code: &'static str, message: String },
    #[error("{message}")]
    NotFound { code: &'static str, message: String },
    #[error("{0}")]
    Conflict(String),
    #[error("{message}")]
    TooLarge { code: &'static str, message: String },
    #[error("{0}")]
    UnsupportedEncoding(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    IdempotencyKeyReused(String),
    /// The request's body did not arrive in time.
    #[error("{0}")]
    Timeout(String),
    /// A failure that may pass; the client should retry after `retry_after_s`.
    #[error("{message}")]
    Unavailable { message: String, retry_after_s: u32 },
    /// Too many failed attempts from one client; it may try again after `retry_after_s`.
    #[error("{message}")]
    Throttled { message: String, retry_after_s: u32 },
    /// Our fault: the source goes to the log, a generic sentence to the client.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn bad(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            code,
            message: message.into(),
        }
    }

    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Forbidden {
            code,
            message: message.into(),
        }
    }

    pub fn run_not_found(run_id: &str) -> Self {
        ApiError::not_found("run_not_found", format!("run {run_id} not found"))
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::NotFound {
            code,
            message: message.into(),
        }
    }

    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, code),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden { code, .. } => (StatusCode::FORBIDDEN, code),
            ApiError::NotFound { code, .. } => (StatusCode::NOT_FOUND, code),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "run_project_conflict"),
            ApiError::TooLarge { code, .. } => (StatusCode::PAYLOAD_TOO_LARGE, code),
            ApiError::UnsupportedEncoding(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_encoding")
            }
            ApiError::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            ApiError::IdempotencyKeyReused(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
            }
            ApiError::Timeout(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            ApiError::Unavailable { .. } => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::Throttled { .. } => (StatusCode::TOO_MANY_REQUESTS, "too_many_attempts"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::BadRequest {
            code: e.code,
            message: e.message,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::RunNotFound(id) => ApiError::run_not_found(&id),
            // Never names the other project: the caller may not be allowed to see it.
            StoreError::ProjectConflict { run_id, .. } => ApiError::Conflict(format!(
                "run id {run_id} is taken by a run of another project; choose another"
            )),
            StoreError::BadCursor => ApiError::bad("invalid_cursor", "cursor is not valid"),
            StoreError::Invalid(e) => e.into(),
            StoreError::NotListed { span_id } => ApiError::not_found(
                "span_not_found",
                format!("around: span {span_id} is not among the children listed"),
            ),
            StoreError::NotFound { code, message } => ApiError::not_found(code, message),
            e @ StoreError::RunPurging(_) => ApiError::Unavailable {
                message: e.to_string(),
                retry_after_s: 5,
            },
            other if other.is_transient() => {
                tracing::warn!(error = %chain(&other), "storage unavailable");
                ApiError::Unavailable {
                    message: format!("{other}; retry shortly"),
                    retry_after_s: 1,
                }
            }
            other => ApiError::Internal(Box::new(other)),
        }
    }
}

/// The JSON error response for a status and code.
pub fn error_response(status: StatusCode, code: &str, message: String) -> Response {
    let body = ErrorBody {
        error: ErrorDetail {
            code: code.to_string(),
            message,
        },
    };
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        "no-store".parse().expect("static header"),
    );
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        let message = match &self {
            ApiError::Internal(source) => {
                tracing::error!(error = %chain(source.as_ref()), "request failed");
                "the server could not complete the request; the error was logged".to_string()
            }
            other => other.to_string(),
        };
        let mut response = error_response(status, code, message);
        if let ApiError::Unavailable { retry_after_s, .. }
        | ApiError::Throttled { retry_after_s, .. } = self
        {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
        }
        response
    }
}
