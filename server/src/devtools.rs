//! This server as the [`Host`] that `treeline demo` and `treeline bench` feed and
//! measure (they live in the crate treeline-devtools, which cannot depend on us).

use std::net::SocketAddr;
use std::sync::Arc;

use treeline_devtools::{Host, NewKey};

use crate::failure::{Context, Outcome};
use crate::http::{now_us, secret, AppState};
use crate::store::{KeyRecord, Store};
use crate::{http, serve, site};

/// The server itself.
pub struct Server;

impl Host for Server {
    fn api(&self, store: Arc<dyn Store>) -> axum::Router {
        http::router(AppState::new(store))
    }

    fn app(&self, store: Arc<dyn Store>, addr: SocketAddr) -> axum::Router {
        serve::app(AppState::new(store), &site::default_site(), addr)
    }

    fn new_write_key(&self, name: &str) -> Outcome<NewKey> {
        let key = secret::new_key().context("the system gave no randomness")?;
        let record = KeyRecord {
            id: secret::new_key_id().context("the system gave no randomness")?,
            name: name.into(),
            scope: "write".into(),
            project: None,
            created_us: now_us(),
            last_used_us: None,
            revoked_us: None,
        };
        let digest = secret::digest(&key);
        Ok(NewKey {
            key,
            record,
            digest,
        })
    }
}
