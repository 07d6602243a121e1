//! The write endpoints. Each validates item by item, writes through the store in one
//! transaction, and answers only after the commit.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::{Json, Router};
use serde_json::Value;
use treeline_wire::limits::MAX_BATCH_ITEMS;
use treeline_wire::routes;
use treeline_wire::{
    check_id, parse_event, parse_fields, parse_metric_point, BatchResponse, EventFields, Rejection,
    RunFinish, RunUpsert, SpanEvent, Warning,
};
use xxhash_rust::xxh3::Xxh3;

use super::auth::{Principal, Scope};
use super::body;
use super::bounded::{self, ListError};
use super::error::{ApiError, ApiResult};
use super::extract::ScopedRunId;
use super::{now_us, AppState};
use crate::store::{EventBatch, IdempotencyRecord, Receipt, Written};

pub fn router() -> Router<AppState> {
    Router::new()
        .route(routes::RUN, put(upsert_run).delete(delete_run))
        .route(routes::RUN_FINISH, post(finish_run))
        .route(routes::RUN_METRICS, post(write_metrics))
        .route(routes::RUN_TRACE_EVENTS, post(write_events))
}

/// Deletes a run (admin keys only): it leaves every read at once, and its data is
/// removed in the background (`purge::spawn`). 404 for no such run.
async fn delete_run(
    State(state): State<AppState>,
    who: Principal,
    Path(run_id): Path<String>,
) -> ApiResult<Json<Value>> {
    check_id(&run_id, "run_id")?;
    if who.scope != Scope::Admin {
        return Err(ApiError::forbidden(
            "forbidden",
            "deleting a run takes an admin key",
        ));
    }
    let Some(project) = state.store.delete_run(&run_id, now_us()).await? else {
        return Err(ApiError::run_not_found(&run_id));
    };
    state.daily_runs.forget(&run_id);
    tracing::info!(run_id, project, by = who.name, "run deleted");
    Ok(Json(serde_json::json!({
        "run_id": run_id,
        "project": project,
        "deleted": true,
    })))
}

async fn upsert_run(
    State(state): State<AppState>,
    who: Principal,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    raw: Body,
) -> ApiResult<Response> {
    check_id(&run_id, "run_id")?;
    let bytes = body::read(&headers, raw).await?;
    let run: RunUpsert = serde_json::from_value(body::json(&bytes)?)
        .map_err(|e| ApiError::bad("invalid_body", format!("run: {e}")))?;
    run.validate()?;
    if !who.sees(&run.project) {
        return Err(ApiError::forbidden(
            "forbidden",
            format!(
                "this key writes only to project {:?}, not {:?}",
                who.project.as_deref().unwrap_or_default(),
                run.project
            ),
        ));
    }
    if who.project.is_some() {
        // The id is taken by a run this key cannot see: say so without naming it.
        if let Some(other) = state.store.reads().run_project(&run_id).await? {
            if !who.sees(&other) {
                return Err(ApiError::Conflict(format!(
                    "run id {run_id} is taken by a run of another project; choose another"
                )));
            }
        }
    }
    let created = state.store.upsert_run(&run_id, &run, now_us()).await?;
    let detail = state.store.reads().get_run(&run_id).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(detail)).into_response())
}

async fn finish_run(
    State(state): State<AppState>,
    ScopedRunId(run_id): ScopedRunId,
    headers: HeaderMap,
    raw: Body,
) -> ApiResult<Response> {
    let bytes = body::read(&headers, raw).await?;
    idempotent(
        &state,
        &headers,
        &run_id,
        &format!("finish/{run_id}"),
        &bytes,
        || async {
            let finish: RunFinish = serde_json::from_value(body::json(&bytes)?)
                .map_err(|e| ApiError::bad("invalid_body", format!("finish: {e}")))?;
            finish.validate()?;
            state.store.finish_run(&run_id, &finish, now_us()).await?;
            Ok(
                serde_json::to_value(state.store.reads().get_run(&run_id).await?)
                    .unwrap_or(Value::Null),
            )
        },
    )
    .await
}

async fn write_metrics(
    State(state): State<AppState>,
    ScopedRunId(run_id): ScopedRunId,
    headers: HeaderMap,
    raw: Body,
) -> ApiResult<Response> {
    let bytes = body::read(&headers, raw).await?;
    idempotent(
        &state,
        &headers,
        &run_id,
        &format!("metrics/{run_id}"),
        &bytes,
        || async {
            let items = body::list(&bytes, "points", MAX_BATCH_ITEMS)?;
            let mut response = BatchResponse::default();
            let mut points = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                match parse_metric_point(item) {
                    Ok(point) => points.push(point),
                    Err(e) => response.rejected.push(rejection(index, e)),
                }
            }
            state.store.write_metrics(&run_id, &points).await?;
            response.accepted = points.len();
            Ok(serde_json::to_value(response).unwrap_or(Value::Null))
        },
    )
    .await
}

async fn write_events(
    State(state): State<AppState>,
    ScopedRunId(run_id): ScopedRunId,
    headers: HeaderMap,
    raw: Body,
) -> ApiResult<Response> {
    let bytes = body::read(&headers, raw).await?;
    // Counted on this task, whose share of the write budget the decoded size is
    // taken from; decoding then stays within it.
    bounded::charge_json(&bytes)?;
    // Hashing and decoding a batch is long CPU work: off the async workers, which
    // also carry the store's writer from statement to statement. The key is looked
    // up in the write's own transaction (two requests racing with one key write
    // once), so a replay is decoded like any request first.
    let scope = format!("events/{run_id}");
    let batch = tokio::task::spawn_blocking(move || decode_events(&headers, &scope, &bytes))
        .await
        .map_err(|e| ApiError::Internal(Box::new(e)))??;
    let fingerprint = batch.receipt.as_ref().map(|r| r.fingerprint.clone());
    match state.store.write_batch(&run_id, batch, now_us()).await? {
        Written::Stored(answer) => Ok(Json(answer).into_response()),
        Written::Replay(record) => replayed(record, fingerprint.as_deref().unwrap_or_default()),
    }
}

/// The valid events of a request, what was wrong with the others, and the receipt
/// the answer is to be kept under (in the events' own transaction).
fn decode_events(headers: &HeaderMap, scope: &str, bytes: &[u8]) -> ApiResult<EventBatch> {
    let receipt = receipt(headers, scope, bytes)?;
    let (events, parsed) = match decode_valid_events(bytes)? {
        Some(decoded) => decoded,
        None => {
            let items = bounded::decode_list::<Value>(bytes, "events", MAX_BATCH_ITEMS)
                .map_err(|e| e.into_api("events", MAX_BATCH_ITEMS))?;
            parse_events(items.iter().map(parse_event))
        }
    };
    Ok(EventBatch {
        events,
        parsed,
        receipt,
    })
}

/// The common case: a batch of valid events, decoded without a map per event. None
/// when anything is off, for the map path to name it (both parse alike); a list
/// over the limit is refused here, decoded no further and not again.
fn decode_valid_events(bytes: &[u8]) -> ApiResult<Option<Parsed>> {
    let decoded: Vec<Box<EventFields>> =
        match bounded::decode_list(bytes, "events", MAX_BATCH_ITEMS) {
            Ok(list) => list,
            Err(ListError::TooMany) => {
                return Err(ListError::TooMany.into_api("events", MAX_BATCH_ITEMS))
            }
            Err(_) => return Ok(None),
        };
    // Sized up front: collecting through `Option` knows no length, and each doubling
    // of a batch's list moved it whole into freshly zeroed pages.
    let mut all = Vec::with_capacity(decoded.len());
    for fields in &decoded {
        match parse_fields(fields) {
            Ok(parsed) => all.push(parsed),
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(parse_events(all.into_iter().map(Ok))))
}

/// A batch's accepted events by their index, and its answer so far.
type Parsed = (Vec<(usize, SpanEvent)>, BatchResponse);

/// Sorts parsed events into the accepted, with their warnings, and the rejected.
fn parse_events(
    items: impl Iterator<Item = Result<(SpanEvent, Vec<String>), treeline_wire::Invalid>>,
) -> Parsed {
    let mut parsed = BatchResponse::default();
    let mut events = Vec::with_capacity(items.size_hint().0);
    for (index, item) in items.enumerate() {
        match item {
            Ok((event, warnings)) => {
                parsed.warnings.extend(
                    warnings
                        .into_iter()
                        .map(|message| Warning { index, message }),
                );
                events.push((index, event));
            }
            Err(e) => parsed.rejected.push(rejection(index, e)),
        }
    }
    parsed.accepted = events.len();
    (events, parsed)
}

fn rejection(index: usize, e: treeline_wire::Invalid) -> Rejection {
    Rejection {
        index,
        code: e.code.to_string(),
        message: e.message,
    }
}

/// Runs `write` once per Idempotency-Key: a retry with the same body gets the first
/// answer back (with `Idempotent-Replayed: true`); another body under the key is 422.
pub(super) async fn idempotent<F, Fut>(
    state: &AppState,
    headers: &HeaderMap,
    run_id: &str,
    scope: &str,
    bytes: &[u8],
    write: F,
) -> ApiResult<Response>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ApiResult<Value>>,
{
    let receipt = receipt(headers, scope, bytes)?;
    if let Some(replayed) = replay(state, receipt.as_ref()).await? {
        return Ok(replayed);
    }
    let value = write().await?;
    if let Some(receipt) = receipt {
        let record = receipt.answered(run_id, value.to_string());
        state.store.idempotency_put(&record, now_us()).await?;
    }
    Ok(Json(value).into_response())
}

/// The request's Idempotency-Key with a fingerprint of what it asks, if it has one.
fn receipt(headers: &HeaderMap, scope: &str, bytes: &[u8]) -> ApiResult<Option<Receipt>> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= 255)
        .ok_or_else(|| {
            ApiError::bad(
                "invalid_idempotency_key",
                "Idempotency-Key must be 1-255 visible characters",
            )
        })?
        .to_string();
    // Tells a retry from another request under the same key, not a secret: the body
    // is the client's own, so a fast non-cryptographic 128-bit hash is enough.
    let mut hasher = Xxh3::new();
    hasher.update(scope.as_bytes());
    hasher.update(&[0]);
    hasher.update(bytes);
    let fingerprint = format!("x3:{:032x}", hasher.digest128());
    Ok(Some(Receipt { key, fingerprint }))
}

/// The answer kept under the receipt's key, replayed (or 422 for another body), if
/// the key has one.
async fn replay(state: &AppState, receipt: Option<&Receipt>) -> ApiResult<Option<Response>> {
    let Some(receipt) = receipt else {
        return Ok(None);
    };
    match state.store.idempotency_get(&receipt.key).await? {
        Some(record) => replayed(record, &receipt.fingerprint).map(Some),
        None => Ok(None),
    }
}

/// The first answer under a key, marked as replayed; 422 when the key was used for
/// another request.
fn replayed(record: IdempotencyRecord, fingerprint: &str) -> ApiResult<Response> {
    if record.fingerprint != fingerprint {
        return Err(ApiError::IdempotencyKeyReused(format!(
            "Idempotency-Key {:?} was already used with a different request",
            record.key
        )));
    }
    let status = StatusCode::from_u16(record.status).unwrap_or(StatusCode::OK);
    let mut response = (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        record.response,
    )
        .into_response();
    response.headers_mut().insert(
        "idempotent-replayed",
        "true".parse().expect("static header"),
    );
    Ok(response)
}
