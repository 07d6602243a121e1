//! The Treeline server: ingest and query over HTTP, and the dashboard rendered on the
//! server and hydrated in the browser.

#[cfg(feature = "devtools")]
pub mod bench;
pub mod cli;
pub mod compare;
#[cfg(feature = "devtools")]
pub mod demo;
pub mod http;
pub mod keys;
pub mod otlp;
pub mod process;
pub mod serve;
pub mod ssr;
pub mod transfer;

// Storage and ingest live in their own crate; these names keep their paths.
pub use treeline_store::{self as store, failure, ingest};
