//! `treeline bench …`: benchmarks that print their figures.

mod ingest;
mod query;

pub use ingest::{ingest, IngestArgs};
pub use query::{query, QueryArgs};
