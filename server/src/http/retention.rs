//! A project's retention policy: set (or tried with `?dry_run=true`) and cleared,
//! by an admin. The server applies it in the background (`crate::purge`).

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::Json;
use treeline_wire::check_project;
use treeline_wire::retention::{RetentionAnswer, RetentionPolicy, RetentionPreview};

use super::auth::{Principal, Scope};
use super::error::{ApiError, ApiResult};
use super::params::params;
use super::{body, now_us, AppState};

fn admin_only(who: &Principal, project: &str) -> ApiResult<()> {
    check_project(project)?;
    if who.scope != Scope::Admin {
        return Err(ApiError::forbidden(
            "forbidden",
            "a project's retention policy takes an admin key",
        ));
    }
    Ok(())
}

pub(super) async fn set(
    State(state): State<AppState>,
    who: Principal,
    Path(project): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    raw_body: Body,
) -> ApiResult<Json<RetentionAnswer>> {
    admin_only(&who, &project)?;
    let dry_run = match params(raw).text("dry_run") {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(ApiError::bad(
                "invalid_parameter",
                "dry_run must be true or false",
            ))
        }
    };
    let bytes = body::read(&headers, raw_body).await?;
    let policy = RetentionPolicy::from_json(&body::json(&bytes)?)?;
    let now = now_us();
    let preview = state
        .store
        .reads()
        .retention_preview(&project, &policy, now)
        .await?;
    if !dry_run {
        state
            .store
            .set_retention(&project, Some(&policy), now)
            .await?;
        state.retention_changed.notify_one();
        tracing::info!(project, by = who.name, policy = %policy.describe(), "retention set");
    }
    Ok(Json(RetentionAnswer {
        project,
        policy: Some(policy),
        preview,
        dry_run,
    }))
}

pub(super) async fn clear(
    State(state): State<AppState>,
    who: Principal,
    Path(project): Path<String>,
) -> ApiResult<Json<RetentionAnswer>> {
    admin_only(&who, &project)?;
    state.store.set_retention(&project, None, now_us()).await?;
    tracing::info!(project, by = who.name, "retention cleared");
    Ok(Json(RetentionAnswer {
        project,
        policy: None,
        preview: RetentionPreview::default(),
        dry_run: false,
    }))
}
