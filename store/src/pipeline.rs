//! Statements run back to back, each built while the one before runs.
//!
//! A group's writes are a few large statements. Building one (binding a chunk of
//! spans, finding a body's words) is work for the server's thread, running one is
//! work for SQLite's thread or PostgreSQL's process. Done in turn, each side waits
//! for the other; done this way, they share the two cores.

use std::sync::OnceLock;

use super::attribute_codes::BatchCodes;
use super::body_text::{self, Doc};
use super::dialect::{Dialect, Sql};
use super::{statements, StoreResult};
use crate::ingest::Plan;

/// Runs each of `statements` on `conn`, in order, and stops at the first error
/// (building or running), which the caller's transaction then rolls back.
pub(super) async fn execute_each<'e, DB: Dialect>(
    conn: &mut DB::Connection,
    mut statements: impl Iterator<Item = StoreResult<Sql<'e, DB>>> + Send,
) -> StoreResult<()> {
    let mut next = statements.next().transpose()?;
    while let Some(sql) = next {
        // `join` polls the statement first: its first poll hands it to the
        // database, and only then is the next one built.
        let (done, built) =
            futures::future::join(DB::execute(&mut *conn, sql), async { statements.next() }).await;
        done?;
        next = built.transpose()?;
    }
    Ok(())
}

/// The statements that write a plan's spans, `span_chunk` rows each, and then their
/// bodies' words, which are found while the last spans are written. `docs` holds
/// the words for as long as the statements that bind them.
pub(super) fn span_statements<'a, DB: Dialect>(
    run_id: &'a str,
    project: &'a str,
    plan: &'a Plan,
    codes: &'a BatchCodes,
    span_chunk: usize,
    docs: &'a OnceLock<Vec<Doc<'a>>>,
) -> impl Iterator<Item = StoreResult<Sql<'a, DB>>> + Send + 'a {
    let spans = plan.spans.chunks(span_chunk).map(move |chunk| {
        let mut q = Sql::new("");
        statements::span_upsert(&mut q, run_id, chunk, codes)?;
        Ok(q)
    });
    let words = std::iter::once(())
        .flat_map(move |()| {
            docs.get_or_init(|| body_text::docs(&plan.spans))
                .chunks(body_text::DOC_CHUNK)
        })
        .map(move |chunk| {
            let mut q = Sql::new("");
            DB::push_docs_upsert(&mut q, run_id, project, chunk);
            Ok(q)
        });
    spans.chain(words)
}
