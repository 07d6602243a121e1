//! Annotations on a trace or a span: listed by anyone who sees the trace, written
//! and deleted by write keys and sessions, each under its own author.

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::put;
use axum::{Json, Router};
use serde_json::Value;
use treeline_wire::annotations::{
    AnnotationDeleted, AnnotationList, AnnotationPut, Author, Source,
};
use treeline_wire::{check_id, routes};

use super::auth::{Principal, Via};
use super::body;
use super::error::{ApiError, ApiResult};
use super::ingest::idempotent;
use super::params::{find_trace, params};
use super::{now_us, AppState};

/// What a server without keys calls the author of every annotation.
const KEYLESS_AUTHOR: &str = "anyone (this server has no keys)";

pub(super) fn writes() -> Router<AppState> {
    Router::new().route(
        routes::TRACE_ANNOTATIONS,
        put(put_annotation).delete(delete_annotation),
    )
}

/// `GET`: the trace's annotations and its spans', or one span's (`span_id=`).
pub(super) async fn list(
    State(state): State<AppState>,
    who: Principal,
    Path((run_id, trace_id)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<AnnotationList>> {
    find_trace(&state, &who, &run_id, &trace_id).await?;
    let p = params(raw);
    let span_id = p.text("span_id");
    if let Some(span_id) = span_id {
        check_id(span_id, "span_id")?;
    }
    Ok(Json(
        state
            .store
            .reads()
            .annotations(&run_id, &trace_id, span_id)
            .await?,
    ))
}

async fn put_annotation(
    State(state): State<AppState>,
    who: Principal,
    Path((run_id, trace_id)): Path<(String, String)>,
    headers: HeaderMap,
    raw: Body,
) -> ApiResult<Response> {
    find_trace(&state, &who, &run_id, &trace_id).await?;
    let bytes = body::read(&headers, raw).await?;
    let scope = format!("annotate/{run_id}/{trace_id}");
    idempotent(&state, &headers, &run_id, &scope, &bytes, || async {
        let asked = parse(&bytes)?;
        let note = asked.checked()?;
        // A session is a person at the dashboard; a key is a program, unless it says.
        let source = asked.source()?.unwrap_or(match who.via {
            Via::Session => Source::Person,
            Via::Key | Via::Open => Source::Code,
        });
        let (stored, _) = state
            .store
            .annotate(&run_id, &trace_id, &note, &author(&who), source, now_us())
            .await?;
        Ok(serde_json::to_value(stored).unwrap_or(Value::Null))
    })
    .await
}

async fn delete_annotation(
    State(state): State<AppState>,
    who: Principal,
    Path((run_id, trace_id)): Path<(String, String)>,
    headers: HeaderMap,
    raw: Body,
) -> ApiResult<Response> {
    find_trace(&state, &who, &run_id, &trace_id).await?;
    let bytes = body::read(&headers, raw).await?;
    let scope = format!("unannotate/{run_id}/{trace_id}");
    idempotent(&state, &headers, &run_id, &scope, &bytes, || async {
        let (span_id, name) = parse(&bytes)?.target()?;
        let deleted = state
            .store
            .unannotate(&run_id, &trace_id, span_id.as_deref(), &name, &who.key_id)
            .await?;
        Ok(serde_json::to_value(AnnotationDeleted { deleted }).unwrap_or(Value::Null))
    })
    .await
}

fn parse(bytes: &[u8]) -> ApiResult<AnnotationPut> {
    serde_json::from_value(body::json(bytes)?)
        .map_err(|e| ApiError::bad("invalid_body", format!("annotation: {e}")))
}

/// The caller as an author: its key's id and name.
fn author(who: &Principal) -> Author {
    Author {
        key_id: who.key_id.clone(),
        name: if who.key_id.is_empty() {
            KEYLESS_AUTHOR.into()
        } else {
            who.name.clone()
        },
    }
}
