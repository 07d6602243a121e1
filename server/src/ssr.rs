//! The dashboard's in-process data source during server rendering: the same store
//! the REST API reads, so both transports share one query layer.

use std::sync::Arc;

use treeline_app::api::ApiError;
use treeline_app::wire::RunList;
use treeline_app::Backend;

use crate::store::Store;

pub struct StoreBackend(pub Arc<dyn Store>);

fn failed(e: crate::store::StoreError) -> ApiError {
    tracing::error!(error = %e, "server-side render read failed");
    ApiError {
        message: "the server could not read its data; the error was logged".into(),
    }
}

#[async_trait::async_trait]
impl Backend for StoreBackend {
    async fn list_runs(&self, project: Option<String>) -> Result<RunList, ApiError> {
        self.0
            .list_runs(project.as_deref(), 200, None)
            .await
            .map_err(failed)
    }
}
