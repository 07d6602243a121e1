//! Typed extractors: a handler's signature says what it needs (the caller, a run
//! the caller may see, a list's parameters), and the prologue that finds each is
//! written once, here.

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use treeline_wire::query::ListQuery;
use treeline_wire::{check_id, RunDetail};

use super::auth::{seen_run, visible_run, Principal};
use super::error::ApiError;
use super::params::find_run;
use super::AppState;

/// The caller, as the door the request came through found them.
impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| ApiError::Internal("a route outside the auth layer".into()))
    }
}

/// The path's `run_id`, checked (400 naming it).
async fn path_run_id(parts: &mut Parts, state: &AppState) -> Result<String, ApiError> {
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiError::Internal(Box::new(e)))?;
    let run_id = params
        .iter()
        .find(|(name, _)| *name == "run_id")
        .map(|(_, value)| value.to_string())
        .ok_or_else(|| ApiError::Internal("a route without {run_id}".into()))?;
    check_id(&run_id, "run_id")?;
    Ok(run_id)
}

/// The run named by the path, which exists and the caller sees: 404
/// `run_not_found` otherwise, the same for a run of another project as for none.
pub(super) struct SeenRun(pub RunDetail);

impl FromRequestParts<AppState> for SeenRun {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let run_id = path_run_id(parts, state).await?;
        let who = Principal::from_request_parts(parts, state).await?;
        Ok(SeenRun(find_run(state, &who, &run_id).await?))
    }
}

/// The id of the run named by the path, which exists and the caller sees, as
/// [`SeenRun`] finds it but by one key lookup: for the routes that read the run's
/// traces and not its detail (whose metric keys and size are further reads).
pub(super) struct SeenRunId(pub String);

impl FromRequestParts<AppState> for SeenRunId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let run_id = path_run_id(parts, state).await?;
        let who = Principal::from_request_parts(parts, state).await?;
        seen_run(state, &who, &run_id).await?;
        Ok(SeenRunId(run_id))
    }
}

/// The path's `run_id`, within the caller's reach: a run that need not exist yet
/// (a write may create it), but never one of another project, or an absent one,
/// when the caller's key has a project (404 `run_not_found`).
pub(super) struct ScopedRunId(pub String);

impl FromRequestParts<AppState> for ScopedRunId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let run_id = path_run_id(parts, state).await?;
        let who = Principal::from_request_parts(parts, state).await?;
        visible_run(state, &who, &run_id).await?;
        Ok(ScopedRunId(run_id))
    }
}

/// The trace list's parameters: 400 naming the first bad one.
pub(super) struct ListParams(pub ListQuery);

impl<S: Send + Sync> FromRequestParts<S> for ListParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Ok(ListParams(ListQuery::parse(
            parts.uri.query().unwrap_or_default(),
        )?))
    }
}
