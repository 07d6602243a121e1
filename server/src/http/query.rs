//! The read endpoints.

use axum::extract::{Extension, Path, RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use treeline_wire::filter::AttributeKeys;
use treeline_wire::limits::{MAX_CHILD_NAME_FILTER, METRIC_POINTS, SPAN_PAGE, SPAN_PAGE_MAX};
use treeline_wire::query::ListQuery;
use treeline_wire::routes;
use treeline_wire::run_list::{RunFields, RunListQuery};
use treeline_wire::{
    check_id, MetricSeries, ProjectList, RunDetail, RunList, SessionInfo, SpanDetail, SpanPage,
    StepsResponse, TraceList, TraceSummary, TraceWindow,
};

use super::auth::{visible_run, Principal, Via};
use super::error::{ApiError, ApiResult};
use super::extract::{ListParams, ScopedRunId, SeenRun, SeenRunId};
use super::params::{cursor, find_run, find_trace, params, span_not_found, trace_query};
use super::{now_us, AppState};
use crate::store::{Cursor, LevelStart, RunsAsked, SeriesWindow, SpanLevel};
use treeline_wire::stats::check_steps;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(routes::PROJECTS, get(projects))
        .route(routes::RUNS, get(runs))
        .route(routes::RUN_FIELDS, get(run_fields))
        .route(routes::RUN, get(run))
        .route(routes::RUN_METRICS, get(metrics))
        .route(routes::TRACES, get(traces))
        .route(routes::RUN_TRACES, get(run_traces))
        .route(routes::RUN_TRACE_STEPS, get(steps))
        .route(routes::TRACE, get(trace))
        .route(routes::SPANS, get(spans))
        .route(routes::SPAN, get(span))
        .route(routes::RUN_TRACE_ATTRIBUTES, get(attributes))
        .route(routes::SESSION, get(session))
}

/// Who the dashboard is signed in as, so it can offer to sign out.
/// Also how far the replica the dashboard reads lags, if it reads one.
async fn session(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
) -> ApiResult<Json<SessionInfo>> {
    let known = who.via != Via::Open;
    Ok(Json(SessionInfo {
        auth: known,
        signed_in: who.via == Via::Session,
        name: known.then(|| who.name.clone()),
        scope: known.then(|| who.scope.as_str().to_string()),
        project: who.project.clone(),
        key_id: known.then(|| who.key_id.clone()),
        replica_lag_ms: state.store.query_reads().replica_lag_ms().await?,
    }))
}

async fn projects(State(state): State<AppState>, who: Principal) -> ApiResult<Json<ProjectList>> {
    let mut list = state.store.query_reads().list_projects().await?;
    list.projects.retain(|p| who.sees(&p.name));
    Ok(Json(list))
}

/// The project a list is limited to: the one asked for, and for a project key its
/// own. `Err(())` when the two differ, so the list is empty.
fn list_project<'a>(asked: Option<&'a str>, who: &'a Principal) -> Result<Option<&'a str>, ()> {
    match (asked, who.project.as_deref()) {
        (Some(a), Some(own)) if a != own => Err(()),
        (asked, own) => Ok(asked.or(own)),
    }
}

async fn runs(
    State(state): State<AppState>,
    who: Principal,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<RunList>> {
    let asked = RunListQuery::parse(raw.as_deref().unwrap_or(""))?;
    let cursor = asked.cursor.as_deref().map(Cursor::decode).transpose()?;
    let Ok(project) = list_project(asked.project.as_deref(), &who) else {
        return Ok(Json(RunList::default()));
    };
    Ok(Json(
        state
            .store
            .query_reads()
            .list_runs(RunsAsked {
                project,
                search: asked.q.as_deref(),
                columns: &asked.columns,
                sort: asked.sort.as_ref().map(|c| (c, asked.ascending)),
                limit: asked.limit,
                cursor: cursor.as_ref(),
            })
            .await?,
    ))
}

/// What the runs list (of `project`, or all the caller sees) can show as columns.
async fn run_fields(
    State(state): State<AppState>,
    who: Principal,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<RunFields>> {
    let p = params(raw);
    let Ok(project) = list_project(p.text("project"), &who) else {
        return Ok(Json(RunFields::default()));
    };
    Ok(Json(state.store.query_reads().run_fields(project).await?))
}

async fn run(SeenRun(run): SeenRun) -> Json<RunDetail> {
    Json(run)
}

async fn metrics(
    State(state): State<AppState>,
    who: Principal,
    Path(run_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<MetricSeries>> {
    check_id(&run_id, "run_id")?;
    let p = params(raw);
    let key = p
        .text("key")
        .ok_or_else(|| ApiError::bad("missing_parameter", "key is required"))?
        .to_string();
    let max_points = p.max_points(METRIC_POINTS)?;
    let (min_step, max_step) = (p.non_negative("min_step")?, p.non_negative("max_step")?);
    check_steps(min_step, max_step, ("min_step", "max_step"))?;
    find_run(&state, &who, &run_id).await?;
    let window = SeriesWindow {
        max_points,
        min_step,
        max_step,
    };
    Ok(Json(
        state
            .store
            .query_reads()
            .metric_series(&run_id, &key, window)
            .await?,
    ))
}

async fn traces(
    State(state): State<AppState>,
    who: Principal,
    ListParams(list): ListParams,
) -> ApiResult<Json<TraceList>> {
    // A run named in the query string is checked here; the run route's `SeenRun`
    // has checked its own.
    if let Some(run_id) = &list.run_id {
        visible_run(&state, &who, run_id).await?;
    }
    list_traces(&state, &who, list, None).await
}

async fn run_traces(
    State(state): State<AppState>,
    who: Principal,
    SeenRunId(run_id): SeenRunId,
    ListParams(list): ListParams,
) -> ApiResult<Json<TraceList>> {
    list_traces(&state, &who, list, Some(run_id)).await
}

async fn list_traces(
    state: &AppState,
    who: &Principal,
    list: ListQuery,
    run_id: Option<String>,
) -> ApiResult<Json<TraceList>> {
    let mut query = trace_query(list, run_id)?;
    match list_project(query.project.as_deref(), who) {
        Ok(project) => query.project = project.map(str::to_string),
        Err(()) => return Ok(Json(TraceList::default())),
    }
    // Browsing without a run covers a recent window only, and says so.
    let window = if query.run_id.is_none() && query.since_us.is_none() && query.until_us.is_none() {
        query.since_us = Some(now_us() - state.window_us);
        Some(TraceWindow {
            since_us: query.since_us,
            until_us: None,
        })
    } else if query.since_us.is_some() || query.until_us.is_some() {
        Some(TraceWindow {
            since_us: query.since_us,
            until_us: query.until_us,
        })
    } else {
        None
    };
    let mut list = state.store.query_reads().list_traces(&query).await?;
    list.window = window;
    Ok(Json(list))
}

async fn attributes(
    State(state): State<AppState>,
    SeenRunId(run_id): SeenRunId,
) -> ApiResult<Json<AttributeKeys>> {
    let keys = state.store.query_reads().attribute_keys(&run_id);
    Ok(Json(keys.await?))
}

async fn steps(
    State(state): State<AppState>,
    ScopedRunId(run_id): ScopedRunId,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<StepsResponse>> {
    let p = params(raw);
    Ok(Json(
        state
            .store
            .query_reads()
            .steps(
                &run_id,
                p.non_negative("min_step")?,
                p.non_negative("max_step")?,
            )
            .await?,
    ))
}

async fn trace(
    State(state): State<AppState>,
    who: Principal,
    Path((run_id, trace_id)): Path<(String, String)>,
) -> ApiResult<Json<TraceSummary>> {
    Ok(Json(find_trace(&state, &who, &run_id, &trace_id).await?))
}

async fn spans(
    State(state): State<AppState>,
    who: Principal,
    Path((run_id, trace_id)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<SpanPage>> {
    let p = params(raw);
    let limit = p.limit(SPAN_PAGE, SPAN_PAGE_MAX)?;
    let cursor = cursor(&p)?;
    let from = p.non_negative("from")?;
    let around = p.text("around");
    if let Some(around) = around {
        check_id(around, "around")?;
    }
    let name = p.text("name");
    if name.is_some_and(|n| n.chars().count() > MAX_CHILD_NAME_FILTER) {
        return Err(ApiError::bad(
            "invalid_parameter",
            format!("name must be at most {MAX_CHILD_NAME_FILTER} characters"),
        ));
    }
    let start = match (cursor.as_ref(), from, around) {
        (cursor, None, None) => LevelStart::After(cursor),
        (None, Some(place), None) => LevelStart::At(place),
        (None, None, Some(span_id)) => LevelStart::Around(span_id),
        _ => {
            return Err(ApiError::bad(
                "invalid_parameter",
                "cursor, from and around each say where the page starts: give one",
            ))
        }
    };
    find_trace(&state, &who, &run_id, &trace_id).await?;
    let parent = p.text("parent_span_id");
    if let Some(parent) = parent {
        check_id(parent, "parent_span_id")?;
        if !state
            .store
            .query_reads()
            .span_exists(&run_id, &trace_id, parent)
            .await?
        {
            return Err(span_not_found(parent, &trace_id));
        }
    }
    Ok(Json(
        state
            .store
            .query_reads()
            .list_spans(
                &run_id,
                &trace_id,
                &SpanLevel {
                    parent,
                    name,
                    start,
                    limit,
                },
            )
            .await?,
    ))
}

async fn span(
    State(state): State<AppState>,
    who: Principal,
    Path((run_id, trace_id, span_id)): Path<(String, String, String)>,
) -> ApiResult<Json<SpanDetail>> {
    check_id(&span_id, "span_id")?;
    find_trace(&state, &who, &run_id, &trace_id).await?;
    state
        .store
        .query_reads()
        .get_span(&run_id, &trace_id, &span_id)
        .await?
        .map(Json)
        .ok_or_else(|| span_not_found(&span_id, &trace_id))
}
