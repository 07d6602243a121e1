//! Typed reads for the pages. In the browser they go to the REST API with gloo-net;
//! during server rendering they call the server's query layer in-process through
//! [`Backend`], so both transports share one implementation of every query.

use serde::{Deserialize, Serialize};

use crate::wire::RunList;

/// A failed read, as the page shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    pub message: String,
}

#[cfg(feature = "ssr")]
mod backend {
    use std::sync::Arc;

    use super::ApiError;
    use crate::wire::RunList;

    /// What server rendering needs from the server's storage.
    #[async_trait::async_trait]
    pub trait Backend: Send + Sync {
        async fn list_runs(&self, project: Option<String>) -> Result<RunList, ApiError>;
    }

    pub type SharedBackend = Arc<dyn Backend>;

    pub(super) fn backend() -> Result<SharedBackend, ApiError> {
        leptos::prelude::use_context::<SharedBackend>().ok_or_else(|| ApiError {
            message: "no backend in the render context".into(),
        })
    }
}
#[cfg(feature = "ssr")]
pub use backend::{Backend, SharedBackend};

#[cfg(all(feature = "hydrate", not(feature = "ssr")))]
async fn get_json<T: serde::de::DeserializeOwned>(url: String) -> Result<T, ApiError> {
    let fail = |e: &dyn std::fmt::Display| ApiError {
        message: e.to_string(),
    };
    let response = gloo_net::http::Request::get(&url)
        .send()
        .await
        .map_err(|e| fail(&e))?;
    if !response.ok() {
        let body: Result<crate::wire::ErrorBody, _> = response.json().await;
        return Err(match body {
            Ok(b) => ApiError {
                message: b.error.message,
            },
            Err(_) => ApiError {
                message: format!("the server answered {}", response.status()),
            },
        });
    }
    response.json().await.map_err(|e| fail(&e))
}

/// Percent-encodes a query value.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub async fn list_runs(project: Option<String>) -> Result<RunList, ApiError> {
    #[cfg(feature = "ssr")]
    {
        backend::backend()?.list_runs(project).await
    }
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    {
        let query = project
            .map(|p| format!("?project={}", encode(&p)))
            .unwrap_or_default();
        send_wrapper::SendWrapper::new(get_json(format!("/api/runs{query}"))).await
    }
}
