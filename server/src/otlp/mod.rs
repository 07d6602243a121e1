//! OTLP/HTTP trace ingest (`POST /v1/traces`), so applications instrumented with
//! OpenTelemetry (OpenInference, the gen_ai conventions, OpenLLMetry) can send their
//! traces to Treeline as they are. Every span becomes a native open and close event
//! and goes through the same validation and storage as the native API.

pub mod attributes;
pub mod bound;
pub mod decode;
pub mod mapping;
pub mod messages;
pub mod order;
mod router;
pub mod runs;

pub use router::router;
