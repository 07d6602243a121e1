//! What the read handlers share: their query parameters, read leniently, and the
//! lookups of a run and a trace the caller may see.

use std::collections::HashMap;

use treeline_wire::filter::{TraceFilter, ATTR_PREFIX, MAX_FILTERS};
use treeline_wire::limits::{MAX_SEARCH_TERMS, TRACES_PAGE, TRACES_PAGE_MAX};
use treeline_wire::{check_id, check_trace_id, RunDetail, SpanKind, SpanStatus, TraceSummary};

use super::auth::Principal;
use super::error::{ApiError, ApiResult};
use super::AppState;
use crate::store::{Cursor, TraceQuery, TraceSort};

/// Query parameters, parsed leniently so that every problem is ours to word. A
/// repeated name keeps its last value, except where [`Params::all`] asks for each.
pub(super) struct Params {
    last: HashMap<String, String>,
    pairs: Vec<(String, String)>,
}

impl Params {
    pub(super) fn new(raw: Option<String>) -> Self {
        let pairs: Vec<(String, String)> =
            form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        Params {
            last: pairs.iter().cloned().collect(),
            pairs,
        }
    }

    /// Every value given for `name`, in order.
    pub(super) fn all<'p>(&'p self, name: &'p str) -> impl Iterator<Item = &'p str> + 'p {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn text(&self, name: &str) -> Option<&str> {
        self.last.get(name).map(String::as_str)
    }

    pub(super) fn int(&self, name: &str) -> ApiResult<Option<i64>> {
        self.text(name)
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    ApiError::bad("invalid_parameter", format!("{name} must be an integer"))
                })
            })
            .transpose()
    }

    pub(super) fn non_negative(&self, name: &str) -> ApiResult<Option<i64>> {
        match self.int(name)? {
            Some(v) if v < 0 => Err(ApiError::bad(
                "invalid_parameter",
                format!("{name} must be a non-negative integer"),
            )),
            other => Ok(other),
        }
    }

    pub(super) fn limit(&self, default: usize, max: usize) -> ApiResult<usize> {
        match self.int("limit")? {
            None => Ok(default),
            Some(n) if n >= 1 && n as usize <= max => Ok(n as usize),
            Some(_) => Err(ApiError::bad(
                "invalid_parameter",
                format!("limit must be between 1 and {max}"),
            )),
        }
    }

    pub(super) fn cursor(&self) -> ApiResult<Option<Cursor>> {
        self.text("cursor")
            .map(|c| Cursor::decode(c).map_err(ApiError::from))
            .transpose()
    }
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

/// Parses the list filters of docs/api.md into a [`TraceQuery`].
pub(super) fn trace_query(p: &Params, run_id: Option<String>) -> ApiResult<TraceQuery> {
    if let Some(id) = &run_id {
        check_id(id, "run_id")?;
    }
    let statuses = p
        .text("status")
        .map(|list| {
            list.split(',')
                .map(|s| SpanStatus::parse_field(s.trim(), "status"))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?
        .unwrap_or_default();
    let kinds = p
        .text("kind")
        .map(|list| {
            list.split(',')
                .map(|s| SpanKind::parse_field(s.trim(), "kind"))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?
        .map(|k| SpanKind::bits_of(&k))
        .unwrap_or(0);
    let terms: Vec<String> = p
        .text("q")
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if terms.len() > MAX_SEARCH_TERMS {
        return Err(ApiError::bad(
            "too_many_terms",
            format!(
                "q has {} terms; at most {MAX_SEARCH_TERMS} are allowed",
                terms.len()
            ),
        ));
    }
    let given = p.all("filter").count();
    if given > MAX_FILTERS {
        return Err(ApiError::bad(
            "bad_filter",
            format!("{given} filters given; at most {MAX_FILTERS} are allowed"),
        ));
    }
    let filters: Vec<TraceFilter> = p
        .all("filter")
        .map(TraceFilter::parse)
        .collect::<Result<_, _>>()?;
    let sort = match p.text("sort").unwrap_or("updated") {
        "updated" => TraceSort::Updated,
        "duration" => TraceSort::Duration,
        "spans" => TraceSort::Spans,
        "tokens" => TraceSort::Tokens,
        "errors" => TraceSort::Errors,
        other => match other.strip_prefix(ATTR_PREFIX) {
            Some(key) if !key.is_empty() && !key.contains('"') => TraceSort::Attr(key.to_string()),
            _ => {
                return Err(ApiError::bad(
                    "invalid_parameter",
                    format!(
                        "sort {other:?} is not valid; valid values are: updated, duration, \
                         spans, tokens, errors, or attr.NAME for a numeric root attribute"
                    ),
                ))
            }
        },
    };
    let ascending = match p.text("order").unwrap_or("desc") {
        "desc" => false,
        "asc" => true,
        other => {
            return Err(ApiError::bad(
                "invalid_parameter",
                format!("order {other:?} is not valid; use asc or desc"),
            ))
        }
    };
    Ok(TraceQuery {
        project: p.text("project").map(str::to_string),
        run_id,
        statuses,
        kinds,
        terms,
        filters,
        since_us: p.int("since_us")?,
        until_us: p.int("until_us")?,
        min_step: p.non_negative("min_step")?,
        max_step: p.non_negative("max_step")?,
        sort,
        ascending,
        limit: p.limit(TRACES_PAGE, TRACES_PAGE_MAX)?,
        cursor: p.cursor()?,
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
