//! What the read handlers share: their query parameters, read leniently, and the
//! lookups of a run and a trace the caller may see.

use treeline_wire::limits::TRACES_PAGE;
use treeline_wire::query::{ListQuery, QueryParams};
use treeline_wire::{check_id, check_trace_id, RunDetail, SpanKind, TraceSummary};

use super::auth::Principal;
use super::error::{ApiError, ApiResult};
use super::AppState;
use crate::store::{Cursor, TraceQuery};

/// Query parameters, read leniently (wire's [`QueryParams`]).
pub(super) fn params(raw: Option<String>) -> QueryParams {
    QueryParams::new(raw.as_deref().unwrap_or_default())
}

/// A page's `cursor`, as the store wrote it.
pub(super) fn cursor(p: &QueryParams) -> ApiResult<Option<Cursor>> {
    p.text("cursor")
        .map(|c| Cursor::decode(c).map_err(ApiError::from))
        .transpose()
}

/// The run, if the caller sees it: 404 `run_not_found` otherwise.
pub(super) async fn find_run(
    state: &AppState,
    who: &Principal,
    run_id: &str,
) -> ApiResult<RunDetail> {
    state
        .store
        .reads()
        .get_run(run_id)
        .await?
        .filter(|run| who.sees(&run.summary.project))
        .ok_or_else(|| ApiError::run_not_found(run_id))
}

/// The store's query for a list: `run_id` is the path's (a run's own list) or the
/// query's (`GET /api/traces?run_id=`). Both are checked already: the path's by
/// its extractor, the query's by `ListQuery::parse`.
pub(super) fn trace_query(list: ListQuery, run_id: Option<String>) -> ApiResult<TraceQuery> {
    let run_id = run_id.or(list.run_id);
    Ok(TraceQuery {
        project: list.project,
        run_id,
        statuses: list.statuses,
        kinds: SpanKind::bits_of(&list.kinds),
        terms: list.terms,
        text: list.text,
        filters: list.filters,
        since_us: list.since_us,
        until_us: list.until_us,
        min_step: list.min_step,
        max_step: list.max_step,
        sort: list.sort,
        ascending: list.ascending,
        limit: list.limit.unwrap_or(TRACES_PAGE),
        cursor: list.cursor.map(|c| Cursor::decode(&c)).transpose()?,
    })
}

/// The trace, if the caller sees it: 404 `run_not_found` or `trace_not_found`.
pub(super) async fn find_trace(
    state: &AppState,
    who: &Principal,
    run_id: &str,
    trace_id: &str,
) -> ApiResult<TraceSummary> {
    check_id(run_id, "run_id")?;
    check_trace_id(trace_id, "trace_id")?;
    if let Some(trace) = state.store.reads().get_trace(run_id, trace_id).await? {
        if !who.sees(&trace.project) {
            return Err(ApiError::run_not_found(run_id));
        }
        return Ok(trace);
    }
    find_run(state, who, run_id).await?;
    Err(ApiError::not_found(
        "trace_not_found",
        format!("trace {trace_id} not found in run {run_id}"),
    ))
}

pub(super) fn span_not_found(span_id: &str, trace_id: &str) -> ApiError {
    ApiError::not_found(
        "span_not_found",
        format!("span {span_id} not found in trace {trace_id}"),
    )
}
