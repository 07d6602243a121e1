//! PostgreSQL backend (in progress).
use super::StoreResult;
pub struct PostgresStore;
impl PostgresStore {
    pub async fn connect(_url: &str) -> StoreResult<Self> {
        Err(super::StoreError::Corrupt("PostgreSQL support is not built yet".into()))
    }
}
