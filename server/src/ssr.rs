//! The dashboard's data source during server rendering: the API router itself,
//! called in-process, so a page rendered on the server and the same page fetching in
//! the browser get byte-for-byte the same answers.

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use tower::ServiceExt;
use treeline_app::api::ApiError;
use treeline_app::Backend;

use crate::http::auth::Principal;

/// The API router, and the caller of the page being rendered: its calls are made
/// as that caller, so a page shows exactly what its viewer may see.
pub struct ApiBackend {
    pub api: Router,
    pub caller: Option<Principal>,
}

#[async_trait::async_trait]
impl Backend for ApiBackend {
    async fn get(&self, path_and_query: &str) -> Result<String, ApiError> {
        // The router is mounted under /api in the real server.
        let path = path_and_query
            .strip_prefix(treeline_wire::routes::API_PREFIX)
            .unwrap_or(path_and_query);
        let mut request = Request::get(path)
            .body(Body::empty())
            .map_err(|e| ApiError::other(e.to_string()))?;
        if let Some(caller) = &self.caller {
            request.extensions_mut().insert(caller.clone());
        }
        let response = self
            .api
            .clone()
            .oneshot(request)
            .await
            .map_err(|e| ApiError::other(e.to_string()))?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| ApiError::other(e.to_string()))?
            .to_bytes();
        let body = String::from_utf8_lossy(&bytes).into_owned();
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(ApiError::from_body(status, &body))
        }
    }
}

/// The longest a page may keep rendering after its reader has gone.
const RENDER_AFTER_LEAVING: std::time::Duration = std::time::Duration::from_secs(30);

/// Streams a page from a task of its own that renders it to the end even when the
/// browser leaves mid-stream (a tab closed, a link followed). Dropping a stream
/// half-way disposes the page's reactive owner while its suspended parts still
/// resolve in other tasks, which then read disposed signals and panic.
pub async fn render_to_the_end(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let (parts, body) = next.run(request).await.into_parts();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, axum::Error>>(8);
    tokio::spawn(async move {
        let mut body = body.into_data_stream();
        let mut reader = Some(tx);
        let deadline = tokio::time::sleep(RENDER_AFTER_LEAVING);
        tokio::pin!(deadline);
        loop {
            let chunk = tokio::select! {
                chunk = futures::StreamExt::next(&mut body) => chunk,
                // Only once the reader has gone: a slow reader is waited for.
                () = &mut deadline, if reader.is_none() => break,
            };
            let Some(chunk) = chunk else { break };
            if let Some(tx) = &reader {
                if tx.send(chunk).await.is_err() {
                    reader = None;
                    deadline
                        .as_mut()
                        .reset(tokio::time::Instant::now() + RENDER_AFTER_LEAVING);
                }
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    axum::response::Response::from_parts(parts, Body::from_stream(stream))
}
