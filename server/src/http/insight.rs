//! A run's rollouts at once: a value's distribution over the steps, the group lens,
//! and what changed between two step ranges. Each takes the trace list's filters.

use axum::extract::{RawQuery, State};
use axum::Json;
use treeline_wire::changes::{Changes, ChangesQuery};
use treeline_wire::groups::{Groups, GroupsQuery};
use treeline_wire::query::ListQuery;
use treeline_wire::stats::{Stats, StatsQuery};

use super::error::ApiResult;
use super::extract::SeenRunId;
use super::params::trace_query;
use super::AppState;
use crate::store::TraceQuery;

/// The list part of a view's query, for the run of the path.
fn traces(list: &ListQuery, run: &SeenRunId) -> ApiResult<TraceQuery> {
    trace_query(
        ListQuery {
            cursor: None,
            ..list.clone()
        },
        Some(run.0.clone()),
    )
}

pub(super) async fn stats(
    State(state): State<AppState>,
    run: SeenRunId,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Stats>> {
    let query = StatsQuery::parse(raw.as_deref().unwrap_or_default())?;
    let traces = traces(&query.list, &run)?;
    Ok(Json(
        state.store.query_reads().stats(&traces, &query).await?,
    ))
}

pub(super) async fn groups(
    State(state): State<AppState>,
    run: SeenRunId,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Groups>> {
    let query = GroupsQuery::parse(raw.as_deref().unwrap_or_default())?;
    let traces = traces(&query.list, &run)?;
    Ok(Json(
        state.store.query_reads().groups(&traces, &query).await?,
    ))
}

pub(super) async fn changes(
    State(state): State<AppState>,
    run: SeenRunId,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Changes>> {
    let query = ChangesQuery::parse(raw.as_deref().unwrap_or_default())?;
    let traces = traces(&query.list, &run)?;
    Ok(Json(
        state.store.query_reads().changes(&traces, &query).await?,
    ))
}
