//! `POST /v1/traces`: decode, map each span to an open and a close checked by the
//! native API's rules, and store them with `write_events`, exactly as native events are.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use treeline_wire::{check_id, SpanEvent};

use super::attributes::{flatten, hex};
use super::bound;
use super::decode::{self, Format};
use super::mapping::{micros, span_events};
use super::order::{parents_first, Pair};
use super::runs::{self, Runs};
use crate::http::auth::{self, Principal};
use crate::http::error::{error_response, ApiError, ApiResult};
use crate::http::{body, now_us, AppState};
use crate::store::StoreError;
use treeline_wire::limits::MAX_BATCH_ITEMS as MAX_ITEMS;

#[derive(Clone)]
struct OtlpState {
    app: AppState,
    runs: Arc<Runs>,
}

/// The OTLP/HTTP traces endpoint, behind the same write keys as `/api`.
pub fn router(state: AppState) -> Router {
    let otlp = OtlpState {
        app: state.clone(),
        runs: state.daily_runs.clone(),
    };
    Router::new()
        .route(
            treeline_wire::routes::OTLP_TRACES,
            post(export).fallback(|| async {
                error_response(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method_not_allowed",
                    "OTLP traces are sent with POST".into(),
                )
            }),
        )
        .route(
            treeline_wire::routes::OTLP_METRICS,
            any(|| not_traces("metrics")),
        )
        .route(treeline_wire::routes::OTLP_LOGS, any(|| not_traces("logs")))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            crate::http::shed::shed_writes,
        ))
        .route_layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            crate::http::body::BODY_TIMEOUT,
        ))
        .route_layer(middleware::from_fn_with_state(state, auth::api_door))
        .layer(DefaultBodyLimit::disable())
        .with_state(otlp)
}

/// An exporter of another OTLP signal, pointed here with the traces' endpoint: a
/// JSON error that says what Treeline takes, instead of the dashboard's 404 page.
async fn not_traces(signal: &str) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "signal_not_supported",
        format!(
            "Treeline takes OpenTelemetry traces only (POST /v1/traces); it does not store \
             {signal}. Turn that exporter off (OTEL_{}_EXPORTER=none) or send {signal} elsewhere",
            signal.to_ascii_uppercase()
        ),
    )
}

async fn export(
    State(state): State<OtlpState>,
    who: Principal,
    headers: HeaderMap,
    raw: Body,
) -> Response {
    let Some(format) = Format::of(&headers) else {
        return decode::unsupported(&headers);
    };
    match handle(&state, &who, &headers, raw, format).await {
        Ok(partial) => decode::response(format, partial),
        Err(e) => e.into_response(),
    }
}

async fn handle(
    state: &OtlpState,
    who: &Principal,
    headers: &HeaderMap,
    raw: Body,
    format: Format,
) -> ApiResult<Option<ExportTracePartialSuccess>> {
    let header_run = match headers.get(runs::RUN_ID_HEADER) {
        None => None,
        Some(v) => {
            let id = v.to_str().map_err(|_| {
                ApiError::bad("invalid_id", "Treeline-Run-Id must be visible ASCII")
            })?;
            check_id(id, "Treeline-Run-Id")?;
            Some(id.to_string())
        }
    };
    let bytes = body::read(headers, raw).await?;
    match format {
        Format::Protobuf => bound::charge_protobuf(&bytes)?,
        Format::Json => bound::charge_json(&bytes)?,
    }
    let request = decode::request(format, &bytes)?;
    drop(bytes);
    // The protobuf walk counted the spans already; OTLP/JSON's are counted decoded.
    let spans = || -> usize {
        request
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum()
    };
    if format == Format::Json && spans() > bound::MAX_OTLP_SPANS {
        return Err(bound::too_many_spans());
    }
    let now = now_us();
    let (batches, mut report) = plan(&state.runs, request, header_run.as_deref(), now);
    // A project key writes its project or nothing: all checked before anything is
    // stored. A run that does not exist yet is created in the key's project.
    if let Some(batch) = batches.values().find(|b| !who.sees(&b.project)) {
        return Err(ApiError::forbidden(
            "forbidden",
            format!(
                "this key writes only to project {:?}; the spans name project {:?}",
                who.project.as_deref().unwrap_or_default(),
                batch.project
            ),
        ));
    }
    // Every run is placed before any span is stored. Placing a run creates it in the
    // spans' project or answers the project it already has, in one step, so a run
    // made meanwhile by another project is seen here, never written into.
    let store = state.app.store.as_ref();
    let mut placed = Vec::with_capacity(batches.len());
    for (run_id, batch) in batches {
        let target = match &batch.name {
            Some(name) => {
                let daily = state
                    .runs
                    .daily(store, &run_id, &batch.project, name, now)
                    .await?;
                let Some(id) = daily else {
                    for [(index, _), _] in &batch.spans {
                        let span = report.span_ids.get(index / 2).cloned().unwrap_or_default();
                        report.reject(format!(
                            "span {span}: the daily run {run_id} and its alternates belong to \
                             other projects; name a run with {}",
                            runs::RUN_ID_ATTRIBUTE
                        ));
                    }
                    continue;
                };
                id
            }
            None => {
                let owner = state
                    .runs
                    .ensure(store, &run_id, &batch.project, None, now)
                    .await?;
                // To a project key, another project's run does not exist.
                if !who.sees(&owner) {
                    return Err(ApiError::run_not_found(&run_id));
                }
                run_id
            }
        };
        placed.push((target, batch));
    }
    for (run_id, batch) in placed {
        let mut events: Vec<(usize, SpanEvent)> =
            parents_first(batch.spans).into_iter().flatten().collect();
        // Transactions no bigger than a native request's; a span's two events stay
        // together so each span is stored whole.
        while !events.is_empty() {
            let rest = events.split_off(events.len().min(MAX_ITEMS));
            let written = state.app.store.write_events(&run_id, events, now).await;
            if let Err(StoreError::RunNotFound(_)) = &written {
                // Deleted since it was remembered (by `treeline runs delete`, say):
                // the exporter's retry asks the store again.
                state.runs.forget(&run_id);
            }
            let warnings = written?;
            for w in warnings {
                let span = report
                    .span_ids
                    .get(w.index / 2)
                    .cloned()
                    .unwrap_or_default();
                report.warn(format!("span {span}: {}", w.message));
            }
            events = rest;
        }
    }
    Ok(report.partial_success())
}

/// The valid events of one run.
struct RunBatch {
    project: String,
    /// The name to create the run with (the daily runs'); None for named runs.
    name: Option<String>,
    spans: Vec<Pair>,
}

/// What to tell the exporter: rejections and warnings, the first few spelled out.
#[derive(Default)]
struct Report {
    rejected: i64,
    reasons: Vec<String>,
    warnings: usize,
    warning_texts: Vec<String>,
    /// The hex id of each span, by its position in the request.
    span_ids: Vec<String>,
}

const SPELLED_OUT: usize = 5;

impl Report {
    fn reject(&mut self, reason: String) {
        self.rejected += 1;
        if self.reasons.len() < SPELLED_OUT {
            self.reasons.push(reason);
        }
    }

    fn warn(&mut self, text: String) {
        self.warnings += 1;
        if self.warning_texts.len() < SPELLED_OUT {
            self.warning_texts.push(text);
        }
    }

    fn partial_success(&self) -> Option<ExportTracePartialSuccess> {
        if self.rejected == 0 && self.warnings == 0 {
            return None;
        }
        let mut parts = Vec::new();
        if self.rejected > 0 {
            parts.push(format!(
                "{} spans rejected: {}",
                self.rejected,
                summary(&self.reasons, self.rejected as usize)
            ));
        }
        if self.warnings > 0 {
            parts.push(format!(
                "{} warnings: {}",
                self.warnings,
                summary(&self.warning_texts, self.warnings)
            ));
        }
        Some(ExportTracePartialSuccess {
            rejected_spans: self.rejected,
            error_message: parts.join(". "),
        })
    }
}

fn summary(texts: &[String], total: usize) -> String {
    let mut text = texts.join("; ");
    if total > texts.len() {
        text.push_str(&format!("; and {} more", total - texts.len()));
    }
    text
}

/// Maps and validates every span, grouping the valid ones by run.
fn plan(
    runs: &Runs,
    request: ExportTraceServiceRequest,
    header_run: Option<&str>,
    now: i64,
) -> (HashMap<String, RunBatch>, Report) {
    let mut batches: HashMap<String, RunBatch> = HashMap::new();
    let mut report = Report::default();
    for resource_spans in &request.resource_spans {
        let spans: Vec<&Span> = resource_spans
            .scope_spans
            .iter()
            .flat_map(|scope| scope.spans.iter())
            .collect();
        let resource = resource_spans
            .resource
            .as_ref()
            .map(|r| flatten(&r.attributes))
            .unwrap_or_default();
        let target = match runs::target(&resource, header_run) {
            Ok(target) => target,
            Err(e) => {
                for span in spans {
                    report.span_ids.push(hex(&span.span_id));
                    report.reject(format!("span {}: {}", hex(&span.span_id), e.message));
                }
                continue;
            }
        };
        // Without a named run, a trace goes to the daily run of its earliest span.
        let mut earliest: HashMap<&[u8], i64> = HashMap::new();
        if target.run_id.is_none() {
            for span in &spans {
                let start = match span.start_time_unix_nano {
                    0 => now,
                    ns => micros(ns),
                };
                earliest
                    .entry(span.trace_id.as_slice())
                    .and_modify(|t| *t = (*t).min(start))
                    .or_insert(start);
            }
        }
        let mut days: HashMap<&[u8], (String, String)> = HashMap::new();
        for span in spans {
            let seq = report.span_ids.len();
            let span_id = hex(&span.span_id);
            report.span_ids.push(span_id.clone());
            let mapped = match span_events(span, now) {
                Ok(mapped) => mapped,
                Err(e) => {
                    report.reject(format!("span {span_id}: {}", e.message));
                    continue;
                }
            };
            for text in mapped.notes {
                report.warn(format!("span {span_id}: {text}"));
            }
            let (run_id, name) = match &target.run_id {
                Some(run_id) => (run_id.clone(), None),
                None => {
                    let (run_id, name) =
                        days.entry(span.trace_id.as_slice()).or_insert_with(|| {
                            let start = earliest
                                .get(span.trace_id.as_slice())
                                .copied()
                                .unwrap_or(now);
                            let day = runs.trace_day(&target.project, &hex(&span.trace_id), start);
                            (
                                runs::daily_run_id(&target.project, day),
                                runs::daily_run_name(&target.project, day),
                            )
                        });
                    (run_id.clone(), Some(name.clone()))
                }
            };
            let batch = batches.entry(run_id).or_insert_with(|| RunBatch {
                project: target.project.clone(),
                name,
                spans: Vec::new(),
            });
            let open = SpanEvent::Open(mapped.open);
            let close = SpanEvent::Close(mapped.close);
            batch.spans.push([(2 * seq, open), (2 * seq + 1, close)]);
        }
    }
    (batches, report)
}
