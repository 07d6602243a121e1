//! The HTTP API (docs/api.md): `router(state)` so tests can drive it with `oneshot`.

mod annotations;
pub mod auth;
pub mod body;
pub mod bounded;
pub mod budget;
mod compare;
mod daily;
pub mod error;
mod export;
mod extract;
pub mod guard;
pub mod ingest;
mod insight;
mod params;
pub mod query;
mod retention;
mod run_compare;
pub mod secret;
pub mod shed;
pub mod signin;
pub mod throttle;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post, put};
use axum::Router;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};
use treeline_wire::routes;

use crate::store::Store;

#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub api_keys: Arc<Vec<String>>,
    /// Host names a keyless server answers to besides loopback ones.
    pub allowed_hosts: Arc<Vec<String>>,
    /// How far back project-scoped trace browsing looks by default.
    pub window_us: i64,
    /// Credentials are needed even with no key at all (the server listens beyond
    /// loopback, where nobody may read without one).
    pub require_auth: bool,
    /// Session cookies are marked Secure (the dashboard is behind a TLS proxy).
    pub secure_cookies: bool,
    /// The slots of writes in flight (`shed::MAX_WRITES_IN_FLIGHT`).
    pub write_slots: Arc<tokio::sync::Semaphore>,
    /// The memory write bodies may hold together (`budget::BODY_BUDGET_MIB`).
    pub body_budget: Arc<tokio::sync::Semaphore>,
    /// Failed sign-ins per client address.
    pub signin_throttle: Arc<throttle::Throttle>,
    /// Whether auth was on at the last request (0 not known yet, 1 off, 2 on), so a
    /// change is logged once.
    pub auth_seen: Arc<std::sync::atomic::AtomicU8>,
    /// The runs OTLP and the daily-run route have placed, shared so both place a
    /// project's run of the day alike.
    pub daily_runs: Arc<crate::otlp::runs::Runs>,
    /// Wakes the background removal (`crate::purge`) when a retention policy is
    /// set, so the server applies it at once instead of at its next look.
    pub retention_changed: Arc<tokio::sync::Notify>,
}

pub const DEFAULT_WINDOW_US: i64 = 7 * 24 * 3600 * 1_000_000;

impl AppState {
    pub fn new(store: Arc<dyn Store>) -> Self {
        AppState {
            store,
            api_keys: Arc::new(Vec::new()),
            allowed_hosts: Arc::new(Vec::new()),
            window_us: DEFAULT_WINDOW_US,
            require_auth: false,
            secure_cookies: false,
            write_slots: shed::write_slots(),
            body_budget: budget::new_budget(),
            signin_throttle: Arc::default(),
            auth_seen: Arc::default(),
            retention_changed: Arc::default(),
            daily_runs: Arc::default(),
        }
    }
}

pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// The `/api` router. Its door (`auth::api_door`) stands before every route and
/// the fallback too, so a route added later needs credentials like the others.
pub fn router(state: AppState) -> Router {
    let writes = ingest::router()
        .merge(annotations::writes())
        .route(routes::PROJECT_DAILY_RUN, post(daily::daily_run))
        .route(
            routes::PROJECT_RETENTION,
            put(retention::set).delete(retention::clear),
        )
        .route_layer(middleware::from_fn(guard::require_json))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            shed::shed_writes,
        ))
        .route_layer(RequestBodyTimeoutLayer::new(body::BODY_TIMEOUT));
    // Every read route, in one place: the handlers share their parameters and
    // lookups through `params`, and none mounts another's.
    let reads = query::router()
        .route(routes::RUN_EXPORT, get(export::export))
        .route(routes::RUN_ALIGN, get(compare::align_children))
        .route(routes::RUN_DIFF, get(compare::diff))
        .route(routes::TRACE_ROLLOUTS, get(compare::rollouts))
        .route(routes::RUN_STATS, get(insight::stats))
        .route(routes::RUN_GROUPS, get(insight::groups))
        .route(routes::RUN_CHANGES, get(insight::changes))
        .route(routes::COMPARE_RUNS, get(run_compare::compare_runs))
        .route(routes::TRACE_ANNOTATIONS, get(annotations::list))
        .route_layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            shed::READ_TIMEOUT,
        ));
    Router::new()
        .merge(writes)
        .merge(reads)
        .fallback(|| async {
            error::error_response(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such API endpoint".into(),
            )
        })
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::api_door,
        ))
        // Here as well as around the whole app: pages call this router in-process.
        .layer(middleware::from_fn(guard::refuse_nul))
        .layer(middleware::from_fn(json_errors))
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

/// Rewrites the framework's own plain-text rejections (a wrong method, a malformed
/// path) into the JSON error shape, so every API error reads the same.
async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let code = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    };
    let message = status
        .canonical_reason()
        .unwrap_or("request failed")
        .to_lowercase();
    let mut response = error::error_response(status, code, message);
    if status == StatusCode::SERVICE_UNAVAILABLE {
        // A read that ran out of time: worth one more try, a little later.
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, axum::http::HeaderValue::from(1u32));
    }
    response
}
