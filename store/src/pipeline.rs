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
use super::{span_index, span_ranges, span_texts, statements, StoreResult};
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

/// What the statements of [`span_statements`] bind beyond the plan, made while
/// the spans before them are written, and kept for as long as the statements.
#[derive(Default)]
pub(super) struct Derived<'a> {
    texts: OnceLock<Vec<span_texts::TextRow<'a>>>,
    ranges: OnceLock<Vec<span_ranges::RangeRow<'a>>>,
    resets: OnceLock<Vec<span_index::ResetRow<'a>>>,
    docs: OnceLock<Vec<Doc<'a>>>,
}

/// The statements that name the traces whose stored spans' rows the plan may make
/// stale, write its spans, `span_chunk` rows each, then their short string
/// attributes (`span_texts`), their numbers' and booleans' ranges (`span_ranges`)
/// and their bodies' words, each found while the statement before runs.
pub(super) fn span_statements<'a, DB: Dialect>(
    run_id: &'a str,
    project: &'a str,
    plan: &'a Plan,
    codes: &'a BatchCodes,
    span_chunk: usize,
    derived: &'a Derived<'a>,
) -> impl Iterator<Item = StoreResult<Sql<'a, DB>>> + Send + 'a {
    let spans = plan.spans.chunks(span_chunk).map(move |chunk| {
        let mut q = Sql::new("");
        statements::span_upsert(&mut q, run_id, chunk, codes)?;
        Ok(q)
    });
    let texts = chunked(
        &derived.texts,
        move || span_texts::rows(&plan.spans, codes),
        span_texts::CHUNK,
        move |q, chunk| span_texts::insert(q, run_id, chunk),
    );
    let ranges = chunked(
        &derived.ranges,
        move || span_ranges::rows(&plan.spans, codes),
        span_ranges::CHUNK,
        move |q, chunk| span_ranges::upsert(q, run_id, chunk),
    );
    // Before the spans: it reads the names they had.
    let overwritten = chunked(
        &derived.resets,
        move || span_index::resets(&plan.spans, codes),
        span_index::CHUNK,
        move |q, chunk| span_index::insert_overwritten(q, run_id, chunk),
    );
    let words = chunked(
        &derived.docs,
        move || body_text::docs(&plan.spans),
        body_text::DOC_CHUNK,
        move |q, chunk| DB::push_docs_upsert(q, run_id, project, chunk),
    );
    overwritten
        .chain(spans)
        .chain(texts)
        .chain(ranges)
        .chain(words)
}

/// The statements that `write` rows in chunks of `chunk`: the rows are made by
/// `make` when the first is built (while the statement before runs), and kept in
/// `rows` for as long as the statements.
fn chunked<'a, T: Send + Sync, DB: Dialect>(
    rows: &'a OnceLock<Vec<T>>,
    make: impl Fn() -> Vec<T> + Send + 'a,
    chunk: usize,
    write: impl Fn(&mut Sql<'a, DB>, &'a [T]) + Send + 'a,
) -> impl Iterator<Item = StoreResult<Sql<'a, DB>>> + Send + 'a {
    std::iter::once(())
        .flat_map(move |()| rows.get_or_init(&make).chunks(chunk))
        .map(move |rows| {
            let mut q = Sql::new("");
            write(&mut q, rows);
            Ok(q)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreError;
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{Connection, Sqlite, SqliteConnection};

    fn insert(n: i64) -> StoreResult<Sql<'static, Sqlite>> {
        let mut q = Sql::new("INSERT INTO t (n) VALUES (");
        q.bind(n).push(")");
        Ok(q)
    }

    async fn rows(conn: &mut SqliteConnection) -> Vec<i64> {
        sqlx::query_scalar("SELECT n FROM t ORDER BY rowid")
            .fetch_all(conn)
            .await
            .expect("read")
    }

    #[tokio::test]
    async fn statements_run_in_order_and_stop_at_the_first_that_fails() {
        let options = SqliteConnectOptions::new().in_memory(true);
        let mut conn = SqliteConnection::connect_with(&options)
            .await
            .expect("open");
        sqlx::query("CREATE TABLE t (n INTEGER NOT NULL UNIQUE)")
            .execute(&mut conn)
            .await
            .expect("create");

        execute_each(&mut conn, (1..=4).map(insert))
            .await
            .expect("run");
        assert_eq!(rows(&mut conn).await, [1, 2, 3, 4]);

        // One that the database refuses: the ones after it are not run.
        let refused = [insert(5), insert(1), insert(6)].into_iter();
        assert!(execute_each(&mut conn, refused).await.is_err());
        assert_eq!(rows(&mut conn).await, [1, 2, 3, 4, 5]);

        // One that cannot be built: it and the ones after it are not run, though the
        // one before, already handed over when it was built, is.
        let unbuilt = [
            insert(7),
            Err(StoreError::Corrupt("unbuildable".into())),
            insert(8),
        ]
        .into_iter();
        assert!(execute_each(&mut conn, unbuilt).await.is_err());
        assert_eq!(rows(&mut conn).await, [1, 2, 3, 4, 5, 7]);
    }
}
