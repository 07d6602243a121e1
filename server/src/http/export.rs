//! `GET /runs/{run_id}/export`: a run's spans as JSON lines (docs/api.md §8.12),
//! streamed trace by trace so that a large run never sits in memory whole.

use std::io;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use treeline_wire::query::{ListQuery, QueryParams};
use treeline_wire::{ExportedAnnotation, ExportedSpan};

use super::auth::Principal;
use super::error::ApiResult;
use super::extract::SeenRun;
use super::params::{find_trace, trace_query};
use super::AppState;
use crate::store::{Cursor, Store, StoreResult, TraceQuery};

/// Traces listed per read, and spans read per page of a trace.
const TRACE_PAGE: usize = 200;
const SPAN_PAGE: usize = 500;
/// Chunks waiting for a slow reader: past this, the export waits for it.
const CHUNKS_IN_FLIGHT: usize = 8;

enum Traces {
    One(String),
    Matching(Box<TraceQuery>),
}

pub(super) async fn export(
    State(state): State<AppState>,
    who: Principal,
    SeenRun(run): SeenRun,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let run_id = run.summary.run_id.clone();
    let raw = raw.unwrap_or_default();
    let p = QueryParams::new(&raw);
    let traces = match p.text("trace_id") {
        Some(trace_id) => {
            find_trace(&state, &who, &run_id, trace_id).await?;
            Traces::One(trace_id.to_string())
        }
        None => {
            // One trace's export ignores the list's parameters, so they are read only here.
            let list = ListQuery::parse(&raw)?;
            let mut query = trace_query(list, Some(run_id.clone()))?;
            if let Some(step) = p.non_negative("step")? {
                query.min_step = Some(step);
                query.max_step = Some(step);
            }
            query.limit = TRACE_PAGE;
            query.cursor = None;
            Traces::Matching(Box::new(query))
        }
    };
    let (tx, rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
    let store = state.store.clone();
    let project = run.summary.project;
    tokio::spawn(async move {
        if let Err(e) = write_lines(store, &run_id, &project, traces, &tx).await {
            // The status line has gone out: cutting the body short is how the
            // reader learns the export is incomplete.
            tracing::error!(run_id, error = %e, "export stopped");
            let _ = tx.send(Err(io::Error::other("export stopped"))).await;
        }
    });
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    }));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

type Chunks = mpsc::Sender<io::Result<Bytes>>;

/// Sends each trace's spans; returns early, without error, when the reader has gone.
async fn write_lines(
    store: Arc<dyn Store>,
    run_id: &str,
    project: &str,
    traces: Traces,
    tx: &Chunks,
) -> StoreResult<()> {
    let mut query = match traces {
        Traces::One(trace_id) => {
            write_trace(store.as_ref(), run_id, project, &trace_id, tx).await?;
            return Ok(());
        }
        Traces::Matching(query) => *query,
    };
    loop {
        let page = store.query_reads().list_traces(&query).await?;
        for trace in &page.traces {
            if !write_trace(store.as_ref(), run_id, project, &trace.trace_id, tx).await? {
                return Ok(());
            }
        }
        match page.next_cursor {
            Some(next) => query.cursor = Some(Cursor::decode(&next)?),
            None => return Ok(()),
        }
    }
}

/// One trace's spans, a page per chunk, then its annotations. `false` when the
/// reader has gone.
async fn write_trace(
    store: &dyn Store,
    run_id: &str,
    project: &str,
    trace_id: &str,
    tx: &Chunks,
) -> StoreResult<bool> {
    let mut cursor: Option<Cursor> = None;
    loop {
        let (spans, next) = store
            .query_reads()
            .export_spans(run_id, trace_id, SPAN_PAGE, cursor.as_ref())
            .await?;
        let mut chunk = Vec::with_capacity(spans.len() * 512);
        for span in spans {
            let line = ExportedSpan::from_detail(span, project);
            // A span read back from the store always serialises.
            if serde_json::to_writer(&mut chunk, &line).is_ok() {
                chunk.push(b'\n');
            }
        }
        if next.is_none() {
            // After the spans, so an import writes each annotation after its target.
            let notes = store
                .query_reads()
                .annotations(run_id, trace_id, None)
                .await?;
            for a in notes.annotations {
                let line = ExportedAnnotation::new(a, run_id, project);
                if serde_json::to_writer(&mut chunk, &line).is_ok() {
                    chunk.push(b'\n');
                }
            }
        }
        if tx.send(Ok(Bytes::from(chunk))).await.is_err() {
            return Ok(false);
        }
        match next {
            Some(next) => cursor = Some(Cursor::decode(&next)?),
            None => return Ok(true),
        }
    }
}
