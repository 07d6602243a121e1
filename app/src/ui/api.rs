//! Typed reads for the pages. In the browser they go to the REST API with gloo-net;
//! during server rendering the server answers the same paths in-process through
//! [`Backend`], so both transports share one implementation of every query.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use treeline_wire::annotations::{Annotation, AnnotationDeleted, AnnotationList};
use treeline_wire::changes::{Changes, ChangesQuery};
use treeline_wire::filter::AttributeKeys;
use treeline_wire::groups::{Groups, GroupsQuery};
use treeline_wire::query::ListQuery;
use treeline_wire::routes::{
    path, COMPARE_RUNS, PROJECTS, RUN, RUNS, RUN_ALIGN, RUN_CHANGES, RUN_DIFF, RUN_FIELDS,
    RUN_GROUPS, RUN_METRICS, RUN_STATS, RUN_TRACES, RUN_TRACE_ATTRIBUTES, RUN_TRACE_STEPS, SESSION,
    SPAN, SPANS, TRACE, TRACES, TRACE_ANNOTATIONS, TRACE_ROLLOUTS,
};
use treeline_wire::run_compare::{CompareRunsQuery, RunComparison};
use treeline_wire::run_list::{RunFields, RunListQuery};
use treeline_wire::stats::{Stats, StatsQuery};
use treeline_wire::{
    Alignment, Invalid, MetricSeries, ProjectList, RolloutMatches, RunDetail, RunList, SessionInfo,
    SpanDetail, SpanDiff, SpanPage, StepsResponse, TraceList, TraceSummary,
};

/// A failed read, as a page shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

/// A parameter the dashboard found bad before asking, worded as the server would.
impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError {
            status: 400,
            code: e.code.to_string(),
            message: e.message,
        }
    }
}

impl ApiError {
    pub fn other(message: impl Into<String>) -> Self {
        ApiError {
            status: 0,
            code: "unavailable".into(),
            message: message.into(),
        }
    }

    /// Turns a non-2xx answer into the error it carries.
    pub fn from_body(status: u16, body: &str) -> Self {
        match serde_json::from_str::<treeline_wire::ErrorBody>(body) {
            Ok(b) => ApiError {
                status,
                code: b.error.code,
                message: b.error.message,
            },
            Err(_) => ApiError {
                status,
                code: "http_error".into(),
                message: format!("the server answered {status}"),
            },
        }
    }
}

#[cfg(feature = "ssr")]
mod backend {
    use std::sync::Arc;

    use super::ApiError;

    /// What server rendering needs from the server: the API's own answer to a GET.
    #[async_trait::async_trait]
    pub trait Backend: Send + Sync {
        /// The body of a 2xx answer to `GET path_and_query`, or its error.
        async fn get(&self, path_and_query: &str) -> Result<String, ApiError>;
    }

    pub type SharedBackend = Arc<dyn Backend>;

    pub(super) fn backend() -> Result<SharedBackend, ApiError> {
        leptos::prelude::use_context::<SharedBackend>()
            .ok_or_else(|| ApiError::other("no backend in the render context"))
    }
}
#[cfg(feature = "ssr")]
pub use backend::{Backend, SharedBackend};

/// `GET path` and decode its JSON.
pub async fn get<T: DeserializeOwned>(path: String) -> Result<T, ApiError> {
    #[cfg(feature = "ssr")]
    {
        let body = backend::backend()?.get(&path).await?;
        serde_json::from_str(&body).map_err(|e| ApiError::other(e.to_string()))
    }
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    {
        send_wrapper::SendWrapper::new(fetch(path)).await
    }
}

#[cfg(all(feature = "hydrate", not(feature = "ssr")))]
async fn fetch<T: DeserializeOwned>(path: String) -> Result<T, ApiError> {
    let response = gloo_net::http::Request::get(&path)
        .send()
        .await
        .map_err(|e| ApiError::other(format!("the server could not be reached: {e}")))?;
    answer(response).await
}

/// A response's JSON, or the error it carries (after a 401, the way to sign in).
#[cfg(all(feature = "hydrate", not(feature = "ssr")))]
async fn answer<T: DeserializeOwned>(response: gloo_net::http::Response) -> Result<T, ApiError> {
    let status = response.status();
    if status == 401 {
        sign_in_again();
    }
    // As bytes: read as text, a page of spans was decoded to a JS string and
    // encoded back into the wasm's memory before it was parsed.
    let body = response
        .binary()
        .await
        .map_err(|e| ApiError::other(e.to_string()))?;
    if !(200..300).contains(&status) {
        return Err(ApiError::from_body(status, &String::from_utf8_lossy(&body)));
    }
    serde_json::from_slice(&body).map_err(|e| ApiError::other(e.to_string()))
}

/// The session ended (expired, signed out elsewhere, key revoked): back to the
/// sign-in page, which returns here afterwards.
#[cfg(all(feature = "hydrate", not(feature = "ssr")))]
fn sign_in_again() {
    if let Some(location) = web_sys::window().map(|w| w.location()) {
        let here = format!(
            "{}{}",
            location.pathname().unwrap_or_default(),
            location.search().unwrap_or_default()
        );
        let _ = location.assign(&format!("/login?next={}", encode(&here)));
    }
}

pub use treeline_wire::routes::encode;

/// `a=1&b=2` from the pairs that have a value.
pub fn query_string(pairs: &[(&str, Option<String>)]) -> String {
    pairs
        .iter()
        .filter_map(|(k, v)| {
            v.as_ref()
                .filter(|v| !v.is_empty())
                .map(|v| format!("{k}={}", encode(v)))
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The root-attribute keys of a run's traces, for the filter builder.
pub async fn attribute_keys(run_id: String) -> Result<AttributeKeys, ApiError> {
    get(path(RUN_TRACE_ATTRIBUTES, &[&run_id])).await
}

/// Who the dashboard is signed in as.
pub async fn session() -> Result<SessionInfo, ApiError> {
    get(path(SESSION, &[])).await
}

pub async fn projects() -> Result<ProjectList, ApiError> {
    get(path(PROJECTS, &[])).await
}

pub async fn runs(query: RunListQuery) -> Result<RunList, ApiError> {
    get(format!("{}?{}", path(RUNS, &[]), query.to_query())).await
}

/// The metric keys and config paths the runs list can show as columns.
pub async fn run_fields(project: Option<String>) -> Result<RunFields, ApiError> {
    get(format!(
        "{}?{}",
        path(RUN_FIELDS, &[]),
        query_string(&[("project", project)])
    ))
    .await
}

/// Runs whose name or id contains `text`, newest first.
pub async fn find_runs(text: String) -> Result<RunList, ApiError> {
    get(format!(
        "{}?limit=20&{}",
        path(RUNS, &[]),
        query_string(&[("q", Some(text))])
    ))
    .await
}

pub async fn run(run_id: String) -> Result<RunDetail, ApiError> {
    get(path(RUN, &[&run_id])).await
}

pub async fn metric(
    run_id: String,
    key: String,
    max_points: usize,
) -> Result<MetricSeries, ApiError> {
    get(format!(
        "{}?key={}&max_points={max_points}",
        path(RUN_METRICS, &[&run_id]),
        encode(&key)
    ))
    .await
}

/// Several runs' configs and metrics, for the compare-runs page.
pub async fn compare_runs(query: CompareRunsQuery) -> Result<RunComparison, ApiError> {
    get(format!("{}?{}", path(COMPARE_RUNS, &[]), query.to_query())).await
}

pub async fn steps(run_id: String) -> Result<StepsResponse, ApiError> {
    get(path(RUN_TRACE_STEPS, &[&run_id])).await
}

/// A trace list; `query` is the list's query string (filters, cursor).
/// A page of a trace list: one run's (`run_id`), or across runs.
pub async fn traces(run_id: Option<String>, query: ListQuery) -> Result<TraceList, ApiError> {
    let query = query.to_query();
    match run_id {
        Some(run) => get(format!("{}?{query}", path(RUN_TRACES, &[&run]))).await,
        None => get(format!("{}?{query}", path(TRACES, &[]))).await,
    }
}

/// A value's distribution over the run's steps.
pub async fn stats(run_id: String, query: StatsQuery) -> Result<Stats, ApiError> {
    get(format!(
        "{}?{}",
        path(RUN_STATS, &[&run_id]),
        query.to_query()
    ))
    .await
}

/// The run's groups of samples, with one step's listed.
pub async fn groups(run_id: String, query: GroupsQuery) -> Result<Groups, ApiError> {
    get(format!(
        "{}?{}",
        path(RUN_GROUPS, &[&run_id]),
        query.to_query()
    ))
    .await
}

/// What changed between two step ranges of the run.
pub async fn changes(run_id: String, query: ChangesQuery) -> Result<Changes, ApiError> {
    get(format!(
        "{}?{}",
        path(RUN_CHANGES, &[&run_id]),
        query.to_query()
    ))
    .await
}

pub async fn trace(run_id: String, trace_id: String) -> Result<TraceSummary, ApiError> {
    get(path(TRACE, &[&run_id, &trace_id])).await
}

pub use treeline_wire::limits::{SPAN_PAGE, SPAN_PAGE_MAX};

pub async fn span_page(
    run_id: String,
    trace_id: String,
    parent: Option<String>,
    cursor: Option<String>,
    limit: usize,
) -> Result<SpanPage, ApiError> {
    let level = LevelQuery {
        parent,
        cursor,
        limit,
        ..LevelQuery::default()
    };
    span_level(run_id, trace_id, level).await
}

/// Which page of a level of the span tree to read (`GET …/spans`): where it starts
/// (`cursor`, `from` or `around`, at most one) and which children (`name`).
#[derive(Clone, Debug, Default)]
pub struct LevelQuery {
    pub parent: Option<String>,
    pub cursor: Option<String>,
    pub from: Option<i64>,
    pub around: Option<String>,
    pub name: Option<String>,
    pub limit: usize,
}

pub async fn span_level(
    run_id: String,
    trace_id: String,
    level: LevelQuery,
) -> Result<SpanPage, ApiError> {
    let query = query_string(&[
        ("parent_span_id", level.parent),
        ("cursor", level.cursor),
        ("from", level.from.map(|n| n.to_string())),
        ("around", level.around),
        ("name", level.name),
    ]);
    get(format!(
        "{}?limit={}&{query}",
        path(SPANS, &[&run_id, &trace_id]),
        level.limit.max(1)
    ))
    .await
}

pub async fn span(
    run_id: String,
    trace_id: String,
    span_id: String,
) -> Result<SpanDetail, ApiError> {
    get(path(SPAN, &[&run_id, &trace_id, &span_id])).await
}

/// The children of two spans of a run, aligned (`a` and `b` as `TRACE:SPAN`).
pub async fn align(run_id: String, a: String, b: String) -> Result<Alignment, ApiError> {
    let query = query_string(&[("a", Some(a)), ("b", Some(b))]);
    get(format!("{}?{query}", path(RUN_ALIGN, &[&run_id]))).await
}

/// Two spans' attributes and bodies, diffed.
pub async fn diff(run_id: String, a: String, b: String) -> Result<SpanDiff, ApiError> {
    let query = query_string(&[("a", Some(a)), ("b", Some(b))]);
    get(format!("{}?{query}", path(RUN_DIFF, &[&run_id]))).await
}

/// The traces of a run that share a trace's rollout id, by step.
pub async fn rollouts(run_id: String, trace_id: String) -> Result<RolloutMatches, ApiError> {
    get(path(TRACE_ROLLOUTS, &[&run_id, &trace_id])).await
}

/// The annotations of a trace and its spans.
pub async fn annotations(run_id: String, trace_id: String) -> Result<AnnotationList, ApiError> {
    get(path(TRACE_ANNOTATIONS, &[&run_id, &trace_id])).await
}

/// Creates or updates the caller's annotation that `body` describes.
pub async fn annotate(
    run_id: String,
    trace_id: String,
    body: serde_json::Value,
) -> Result<Annotation, ApiError> {
    send("PUT", path(TRACE_ANNOTATIONS, &[&run_id, &trace_id]), body).await
}

/// Deletes the caller's annotation that `body` names.
pub async fn unannotate(
    run_id: String,
    trace_id: String,
    body: serde_json::Value,
) -> Result<AnnotationDeleted, ApiError> {
    send(
        "DELETE",
        path(TRACE_ANNOTATIONS, &[&run_id, &trace_id]),
        body,
    )
    .await
}

/// Deletes the run (an admin's key or session only).
pub async fn delete_run(run_id: String) -> Result<(), ApiError> {
    send::<serde_json::Value>("DELETE", path(RUN, &[&run_id]), serde_json::json!({}))
        .await
        .map(|_| ())
}

/// `method path` with a JSON body, and its JSON answer. Only the browser writes:
/// a page rendered on the server only reads.
pub async fn send<T: DeserializeOwned>(
    method: &'static str,
    path: String,
    body: serde_json::Value,
) -> Result<T, ApiError> {
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    {
        send_wrapper::SendWrapper::new(fetch_with(method, path, body)).await
    }
    #[cfg(feature = "ssr")]
    {
        let _ = (method, path, body);
        Err(ApiError::other("writes are sent from the browser"))
    }
}

#[cfg(all(feature = "hydrate", not(feature = "ssr")))]
async fn fetch_with<T: DeserializeOwned>(
    method: &'static str,
    path: String,
    body: serde_json::Value,
) -> Result<T, ApiError> {
    let request = match method {
        "PUT" => gloo_net::http::Request::put(&path),
        "DELETE" => gloo_net::http::Request::delete(&path),
        _ => gloo_net::http::Request::post(&path),
    };
    let response = request
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .map_err(|e| ApiError::other(e.to_string()))?
        .send()
        .await
        .map_err(|e| ApiError::other(format!("the server could not be reached: {e}")))?;
    answer(response).await
}
