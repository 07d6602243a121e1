//! The Treeline server: ingest and query over HTTP, and the dashboard rendered on the
//! server and hydrated in the browser.

pub mod cli;
pub mod compare;
pub mod database_args;
#[cfg(feature = "devtools")]
pub mod devtools;
pub mod disk_usage;
pub mod http;
pub mod keys;
pub mod otlp;
pub mod purge;
pub mod retention_admin;
pub mod run_admin;
pub mod serve;
pub mod site;
pub mod ssr;
pub mod text_backfill;
pub mod transfer;

// Storage and ingest live in their own crate; these names keep their paths.
#[cfg(feature = "devtools")]
pub use treeline_devtools::{bench, demo};
pub use treeline_store::{self as store, failure, ingest};
