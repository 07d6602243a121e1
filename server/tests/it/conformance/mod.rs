//! One storage conformance suite, run against SQLite and PostgreSQL: the ingest rules
//! and reads of docs/api.md, seen through the `Store` traits. Each theme is a module;
//! every case runs on both databases (`on_both!`).

use std::sync::Arc;

use treeline_server::store::Store;

type S = Arc<dyn Store>;

/// Each filter of a test's list, as a request's `filter=` parameters give them.
fn filters(raw: &[impl AsRef<str>]) -> Vec<treeline_wire::filter::TraceFilter> {
    raw.iter()
        .map(|f| treeline_wire::filter::TraceFilter::parse(f.as_ref()).expect("a valid filter"))
        .collect()
}

mod annotations;
mod attribute_codes;
mod batches;
mod ingest_rules;
mod invariance;
mod packed_bodies;
mod retention;
mod rollouts;
mod run_columns;
mod run_deletion;
mod runs;
mod sizes;
mod span_tree;
mod text_search;
mod trace_lists;
