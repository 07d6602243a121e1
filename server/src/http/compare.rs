//! Comparing spans (docs/api.md §8.13–§8.15): `GET /runs/{run_id}/align` lines up
//! the children of two spans, `GET /runs/{run_id}/diff` compares two spans'
//! attributes and bodies, and `GET /runs/{run_id}/traces/{trace_id}/rollouts` finds
//! the traces of a run that share a trace's rollout id.

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use treeline_wire::{
    check_id, check_trace_id, Alignment, RolloutMatches, SpanDetail, SpanDiff,
    ALIGN_DURATION_THRESHOLD, ALIGN_MAX_CHILDREN, ROLLOUT_MATCHES_MAX,
};

use super::auth::Principal;
use super::error::{ApiError, ApiResult};
use super::params::{find_trace, params, span_not_found};
use super::AppState;
use crate::compare::{add_body_differences, align, diff_spans, Aligned};
use crate::store::ChildNode;
use treeline_wire::query::QueryParams;

/// The largest duration threshold a request may name (ten times the longer one).
const MAX_THRESHOLD: f64 = 10.0;

pub(super) async fn align_children(
    State(state): State<AppState>,
    who: Principal,
    Path(run_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Alignment>> {
    check_id(&run_id, "run_id")?;
    let p = params(raw);
    let a = side(&p, "a")?;
    let b = side(&p, "b")?;
    let threshold = match p.text("threshold") {
        None => ALIGN_DURATION_THRESHOLD,
        Some(text) => text
            .parse::<f64>()
            .ok()
            .filter(|t| (0.0..=MAX_THRESHOLD).contains(t))
            .ok_or_else(|| {
                ApiError::bad(
                    "invalid_parameter",
                    format!("threshold must be a number from 0 to {MAX_THRESHOLD}"),
                )
            })?,
    };
    let ((a_children, a_cut), (b_children, b_cut)) = tokio::try_join!(
        children(&state, &who, &run_id, &a),
        children(&state, &who, &run_id, &b)
    )?;
    let Aligned { mut rows, unsure } = align(a_children, b_children, threshold);
    // Pairs stored before body fingerprints: their bodies are compared in the
    // database, as stored text.
    if !unsure.is_empty() {
        let (at, ids): (Vec<usize>, Vec<_>) = unsure.into_iter().unzip();
        let found = state
            .store
            .query_reads()
            .body_differences(&run_id, &a.0, &b.0, &ids)
            .await?;
        add_body_differences(&mut rows, &at, found);
    }
    Ok(Json(Alignment {
        rows,
        truncated: a_cut || b_cut,
    }))
}

/// `a=TRACE:SPAN`: one side's span, its ids checked.
fn side(p: &QueryParams, name: &'static str) -> ApiResult<(String, String)> {
    let text = p
        .text(name)
        .ok_or_else(|| ApiError::bad("missing_parameter", format!("{name} is required")))?;
    let Some((trace, span)) = text.split_once(':') else {
        return Err(ApiError::bad(
            "invalid_parameter",
            format!("{name} must be TRACE_ID:SPAN_ID, got {text:?}"),
        ));
    };
    check_trace_id(trace, &format!("{name}'s trace_id"))?;
    check_id(span, &format!("{name}'s span_id"))?;
    Ok((trace.to_string(), span.to_string()))
}

/// The span's children with their attributes, at most [`ALIGN_MAX_CHILDREN`];
/// `true` when there were more.
async fn children(
    state: &AppState,
    who: &Principal,
    run_id: &str,
    (trace_id, span_id): &(String, String),
) -> ApiResult<(Vec<ChildNode>, bool)> {
    find_trace(state, who, run_id, trace_id).await?;
    let reads = state.store.query_reads();
    let mut children = reads
        .children_nodes(run_id, trace_id, span_id, ALIGN_MAX_CHILDREN + 1)
        .await?;
    // A span with children exists; only a childless one needs asking.
    if children.is_empty() && !reads.span_exists(run_id, trace_id, span_id).await? {
        return Err(span_not_found(span_id, trace_id));
    }
    let cut = children.len() > ALIGN_MAX_CHILDREN;
    children.truncate(ALIGN_MAX_CHILDREN);
    Ok((children, cut))
}

pub(super) async fn rollouts(
    State(state): State<AppState>,
    who: Principal,
    Path((run_id, trace_id)): Path<(String, String)>,
) -> ApiResult<Json<RolloutMatches>> {
    let trace = find_trace(&state, &who, &run_id, &trace_id).await?;
    let traces = match &trace.rollout_id {
        Some(rollout_id) => {
            state
                .store
                .query_reads()
                .rollout_traces(&run_id, rollout_id, ROLLOUT_MATCHES_MAX)
                .await?
        }
        None => Vec::new(),
    };
    Ok(Json(RolloutMatches {
        rollout_id: trace.rollout_id,
        traces,
    }))
}

pub(super) async fn diff(
    State(state): State<AppState>,
    who: Principal,
    Path(run_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<SpanDiff>> {
    check_id(&run_id, "run_id")?;
    let p = params(raw);
    let (a, b) = (side(&p, "a")?, side(&p, "b")?);
    let (a, b) = tokio::try_join!(
        span(&state, &who, &run_id, &a),
        span(&state, &who, &run_id, &b)
    )?;
    // Diffing long bodies is work for a core, not for the async threads.
    let diff = tokio::task::spawn_blocking(move || diff_spans(&a, &b))
        .await
        .map_err(|e| ApiError::Internal(Box::new(e)))?;
    Ok(Json(diff))
}

async fn span(
    state: &AppState,
    who: &Principal,
    run_id: &str,
    (trace_id, span_id): &(String, String),
) -> ApiResult<SpanDetail> {
    find_trace(state, who, run_id, trace_id).await?;
    state
        .store
        .query_reads()
        .get_span(run_id, trace_id, span_id)
        .await?
        .ok_or_else(|| span_not_found(span_id, trace_id))
}
