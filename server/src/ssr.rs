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
