//! Each database's schema migrations, compiled into the binary. A source of our own
//! instead of sqlx's `migrate!` macro: that macro alone pulled a second build of
//! sqlx and SQLite (for the compiler's host) into every build. The checksums are
//! sqlx's own (`Migration::new`), so databases migrated by either agree.

use std::borrow::Cow;

use futures::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// One database's migrations: (version, description, SQL), oldest first.
#[derive(Debug, Clone, Copy)]
struct Embedded(&'static [(i64, &'static str, &'static str)]);

const SQLITE: Embedded = Embedded(&[
    (
        1,
        "initial",
        include_str!("../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "access",
        include_str!("../migrations/sqlite/0002_access.sql"),
    ),
    (
        3,
        "trace numbers",
        include_str!("../migrations/sqlite/0003_trace_numbers.sql"),
    ),
    (
        4,
        "search",
        include_str!("../migrations/sqlite/0004_search.sql"),
    ),
    (
        5,
        "sibling order",
        include_str!("../migrations/sqlite/0005_sibling_order.sql"),
    ),
    (
        6,
        "body fingerprints",
        include_str!("../migrations/sqlite/0006_body_fingerprints.sql"),
    ),
    (
        7,
        "failed roots",
        include_str!("../migrations/sqlite/0007_failed_roots.sql"),
    ),
    (
        8,
        "revoked keys",
        include_str!("../migrations/sqlite/0008_revoked_keys.sql"),
    ),
    (
        9,
        "span filters",
        include_str!("../migrations/sqlite/0009_span_filters.sql"),
    ),
    (
        10,
        "trace texts",
        include_str!("../migrations/sqlite/0010_trace_texts.sql"),
    ),
    (
        11,
        "annotations",
        include_str!("../migrations/sqlite/0011_annotations.sql"),
    ),
    (
        12,
        "annotation order",
        include_str!("../migrations/sqlite/0012_annotation_order.sql"),
    ),
    (
        13,
        "trace text values",
        include_str!("../migrations/sqlite/0013_trace_text_values.sql"),
    ),
    (
        14,
        "metric summaries",
        include_str!("../migrations/sqlite/0014_metric_summaries.sql"),
    ),
    (
        15,
        "metric blocks",
        include_str!("../migrations/sqlite/0015_metric_blocks.sql"),
    ),
    (
        16,
        "run deletion",
        include_str!("../migrations/sqlite/0016_run_deletion.sql"),
    ),
    (
        17,
        "retention",
        include_str!("../migrations/sqlite/0017_retention.sql"),
    ),
    (
        18,
        "text search",
        include_str!("../migrations/sqlite/0018_text_search.sql"),
    ),
    (
        19,
        "step values",
        include_str!("../migrations/sqlite/0019_step_values.sql"),
    ),
    (
        20,
        "sizes",
        include_str!("../migrations/sqlite/0020_sizes.sql"),
    ),
    (
        21,
        "packed bodies",
        include_str!("../migrations/sqlite/0021_packed_bodies.sql"),
    ),
    (
        22,
        "cjk words",
        include_str!("../migrations/sqlite/0022_cjk_words.sql"),
    ),
    (
        23,
        "failed span names",
        include_str!("../migrations/sqlite/0023_failed_span_names.sql"),
    ),
    (
        24,
        "failed span name index",
        include_str!("../migrations/sqlite/0024_failed_span_name_index.sql"),
    ),
    (
        25,
        "trace sort indexes",
        include_str!("../migrations/sqlite/0025_trace_sort_indexes.sql"),
    ),
    (
        26,
        "trace numbers without rowid",
        include_str!("../migrations/sqlite/0026_trace_numbers_without_rowid.sql"),
    ),
    (
        27,
        "attribute names",
        include_str!("../migrations/sqlite/0027_attribute_names.sql"),
    ),
    (
        28,
        "span texts",
        include_str!("../migrations/sqlite/0028_span_texts.sql"),
    ),
    (
        29,
        "span attribute ranges",
        include_str!("../migrations/sqlite/0029_span_attribute_ranges.sql"),
    ),
    (
        30,
        "span attribute presence",
        include_str!("../migrations/sqlite/0030_span_attribute_presence.sql"),
    ),
    (
        31,
        "span ranges spread",
        include_str!("../migrations/sqlite/0031_span_ranges_spread.sql"),
    ),
]);

const POSTGRES: Embedded = Embedded(&[
    (
        1,
        "initial",
        include_str!("../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        "access",
        include_str!("../migrations/postgres/0002_access.sql"),
    ),
    (
        3,
        "trace numbers",
        include_str!("../migrations/postgres/0003_trace_numbers.sql"),
    ),
    (
        4,
        "search",
        include_str!("../migrations/postgres/0004_search.sql"),
    ),
    (
        5,
        "sibling order",
        include_str!("../migrations/postgres/0005_sibling_order.sql"),
    ),
    (
        6,
        "body fingerprints",
        include_str!("../migrations/postgres/0006_body_fingerprints.sql"),
    ),
    (
        7,
        "failed roots",
        include_str!("../migrations/postgres/0007_failed_roots.sql"),
    ),
    (
        8,
        "revoked keys",
        include_str!("../migrations/postgres/0008_revoked_keys.sql"),
    ),
    (
        9,
        "span filters",
        include_str!("../migrations/postgres/0009_span_filters.sql"),
    ),
    (
        10,
        "trace texts",
        include_str!("../migrations/postgres/0010_trace_texts.sql"),
    ),
    (
        11,
        "annotations",
        include_str!("../migrations/postgres/0011_annotations.sql"),
    ),
    (
        12,
        "annotation order",
        include_str!("../migrations/postgres/0012_annotation_order.sql"),
    ),
    (
        13,
        "trace text values",
        include_str!("../migrations/postgres/0013_trace_text_values.sql"),
    ),
    (
        14,
        "metric summaries",
        include_str!("../migrations/postgres/0014_metric_summaries.sql"),
    ),
    (
        15,
        "metric blocks",
        include_str!("../migrations/postgres/0015_metric_blocks.sql"),
    ),
    (
        16,
        "run deletion",
        include_str!("../migrations/postgres/0016_run_deletion.sql"),
    ),
    (
        17,
        "retention",
        include_str!("../migrations/postgres/0017_retention.sql"),
    ),
    (
        18,
        "text search",
        include_str!("../migrations/postgres/0018_text_search.sql"),
    ),
    (
        19,
        "step values",
        include_str!("../migrations/postgres/0019_step_values.sql"),
    ),
    (
        20,
        "sizes",
        include_str!("../migrations/postgres/0020_sizes.sql"),
    ),
    (
        21,
        "packed bodies",
        include_str!("../migrations/postgres/0021_packed_bodies.sql"),
    ),
    (
        22,
        "deleted runs statistics",
        include_str!("../migrations/postgres/0022_deleted_runs_statistics.sql"),
    ),
    (
        23,
        "cjk words",
        include_str!("../migrations/postgres/0023_cjk_words.sql"),
    ),
    (
        24,
        "failed span names",
        include_str!("../migrations/postgres/0024_failed_span_names.sql"),
    ),
    (
        25,
        "failed span name index",
        include_str!("../migrations/postgres/0025_failed_span_name_index.sql"),
    ),
    (
        26,
        "trace sort indexes",
        include_str!("../migrations/postgres/0026_trace_sort_indexes.sql"),
    ),
    (
        27,
        "trace numbers key with value",
        include_str!("../migrations/postgres/0027_trace_numbers_key_with_value.sql"),
    ),
    (
        28,
        "attribute names",
        include_str!("../migrations/postgres/0028_attribute_names.sql"),
    ),
    (
        29,
        "span texts",
        include_str!("../migrations/postgres/0029_span_texts.sql"),
    ),
    (
        30,
        "span attribute ranges",
        include_str!("../migrations/postgres/0030_span_attribute_ranges.sql"),
    ),
    (
        31,
        "span attribute presence",
        include_str!("../migrations/postgres/0031_span_attribute_presence.sql"),
    ),
]);

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(self) -> BoxFuture<'s, Result<Vec<Migration>, BoxDynError>> {
        let migrations = self
            .0
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    Cow::Borrowed(sql),
                    false,
                )
            })
            .collect();
        Box::pin(async move { Ok(migrations) })
    }
}

pub(super) async fn sqlite() -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(SQLITE).await
}

pub(super) async fn postgres() -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(POSTGRES).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A migration file added to a directory but not listed here would never run.
    #[test]
    fn every_migration_file_is_listed() {
        for (dir, listed) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/").to_owned() + dir;
            let mut files: Vec<String> = std::fs::read_dir(&path)
                .expect("migrations directory")
                .map(|entry| {
                    entry
                        .expect("entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            files.sort();
            let names: Vec<String> = listed
                .0
                .iter()
                .map(|(version, description, _)| {
                    format!("{version:04}_{}.sql", description.replace(' ', "_"))
                })
                .collect();
            assert_eq!(files, names, "{dir}: every file, in version order");
        }
    }

    /// A SQLite file in a new directory, migrated up to `version` only, as a store
    /// made by an older server would be.
    /// Writes spans of run r1 as an older store held them: (trace, span, its
    /// attributes keyed by code, as JSON text).
    async fn old_spans(pool: &sqlx::SqlitePool, spans: &[(&str, &str, &str)]) {
        for &(trace, span, attributes) in spans {
            let count =
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(attributes)
                    .expect("an object")
                    .len();
            sqlx::query(
                "INSERT INTO spans (run_id, trace_id, span_id, name, status, has_open, has_close, \
                 child_count, error_count, attr_count, attributes) \
                 VALUES ('r1', ?1, ?2, 'llm', 'ok', 1, 1, 0, 0, ?3, ?4)",
            )
            .bind(trace)
            .bind(span)
            .bind(i64::try_from(count).expect("few"))
            .bind(attributes)
            .execute(pool)
            .await
            .expect("an older store's span");
        }
    }

    async fn sqlite_at(version: usize) -> (tempfile::TempDir, sqlx::SqlitePool) {
        use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};

        let dir = tempfile::tempdir().expect("temp dir");
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("old.db"))
            .create_if_missing(true);
        let pool = SqlitePool::connect_with(options).await.expect("open");
        let before = Migrator::new(Embedded(&SQLITE.0[..version]))
            .await
            .expect("list");
        before
            .run(&pool)
            .await
            .expect("migrate to an older version");
        (dir, pool)
    }

    /// Runs every migration on `pool`, as a newer server opening it would.
    async fn upgrade(pool: &sqlx::SqlitePool) {
        sqlite()
            .await
            .expect("list")
            .run(pool)
            .await
            .expect("migrate");
    }

    /// A store from before `trace_numbers` lost its rowid (26) keeps every number
    /// through the rebuild, and a trace's later step still reaches its numbers.
    #[tokio::test]
    async fn a_roots_numbers_survive_the_rebuild_without_a_rowid() {
        use sqlx::Row;

        let (_dir, pool) = sqlite_at(25).await;
        sqlx::raw_sql(
            "INSERT INTO traces (run_id, trace_id, project, name, status, kinds, span_count, \
             error_count, child_tokens, iteration_count, step, updated_us) \
             VALUES ('r1', 't1', 'p', 'rollout', 'ok', 1, 1, 0, 0, 0, 3, 1); \
             INSERT INTO trace_numbers (run_id, trace_id, key, project, value, step) \
             VALUES ('r1', 't1', 'reward', 'p', 0.5, 3), ('r1', 't1', 'tokens', 'p', 812, 3), \
                    ('r2', 't9', 'reward', 'p', -1, NULL);",
        )
        .execute(&pool)
        .await
        .expect("an older store's rows");

        upgrade(&pool).await;
        let table: String =
            sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE name = 'trace_numbers'")
                .fetch_one(&pool)
                .await
                .expect("table");
        assert!(table.ends_with("WITHOUT ROWID"), "{table}");
        sqlx::query("UPDATE traces SET step = 4 WHERE trace_id = 't1'")
            .execute(&pool)
            .await
            .expect("a later step");
        let rows: Vec<(String, String, f64, Option<i64>)> = sqlx::query(
            "SELECT trace_id, key, value, step FROM trace_numbers ORDER BY run_id, trace_id, key",
        )
        .fetch_all(&pool)
        .await
        .expect("numbers")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
        assert_eq!(
            rows,
            [
                ("t1".into(), "reward".into(), 0.5, Some(4)),
                ("t1".into(), "tokens".into(), 812.0, Some(4)),
                ("t9".into(), "reward".into(), -1.0, None),
            ]
        );
    }

    /// A store from before attribute codes (27) keeps every span attribute, value
    /// for value, and reads them back by name.
    #[tokio::test]
    async fn span_attributes_keep_their_names_and_values_once_coded() {
        use sqlx::Sqlite;

        let (_dir, pool) = sqlite_at(26).await;
        let attributes = r#"{"user.id":"u\"42","p":0.30000000000000004,"n":12345678901234567890,"ok":true,"no":false,"nil":null,"o":{"k":[1,2]},"say \"hi\"":"ü","a\\b":[true],"":2.5}"#;
        sqlx::query(
            "INSERT INTO spans (run_id, trace_id, span_id, name, status, has_open, has_close, \
             child_count, error_count, attr_count, attributes) \
             VALUES ('r1', 't1', 's1', 'llm', 'ok', 1, 1, 0, 0, 10, ?1), \
                    ('r1', 't1', 's2', 'tool', 'ok', 1, 1, 0, 0, 0, '{}'), \
                    ('r1', 't1', 's3', 'env', 'ok', 1, 1, 0, 0, 1, '{\"p\":1}')",
        )
        .bind(attributes)
        .execute(&pool)
        .await
        .expect("an older store's spans");

        upgrade(&pool).await;
        let stored: Vec<String> =
            sqlx::query_scalar("SELECT attributes FROM spans ORDER BY span_id")
                .fetch_all(&pool)
                .await
                .expect("stored");
        assert!(!stored[0].contains("user.id"), "coded: {}", stored[0]);
        let named: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT {} FROM spans s ORDER BY span_id",
            <Sqlite as crate::dialect::Dialect>::named_attributes("s.attributes")
        ))
        .fetch_all(&pool)
        .await
        .expect("named");
        let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).expect("JSON");
        assert_eq!(parse(&named[0]), parse(attributes));
        assert!(named[0].contains("0.30000000000000004"), "{}", named[0]);
        assert!(named[0].contains("12345678901234567890"), "{}", named[0]);
        assert_eq!(named[1], "{}");
        assert_eq!(named[2], r#"{"p":1}"#);
    }

    /// A store from before `span_texts` (28) lists each trace's short string span
    /// attributes once, whatever number of its spans carry them.
    #[tokio::test]
    async fn span_strings_are_listed_once_a_trace() {
        let (_dir, pool) = sqlite_at(27).await;
        let long = format!(r#"{{"1":"small","3":"{}"}}"#, "x".repeat(300));
        let spans = [
            ("t1", "s1", r#"{"1":"small","2":0.5}"#),
            ("t1", "s2", long.as_str()),
            ("t2", "s1", r#"{"1":"large","4":true}"#),
        ];
        old_spans(&pool, &spans).await;

        upgrade(&pool).await;
        let rows: Vec<(i64, String, String)> =
            sqlx::query_as("SELECT code, value, trace_id FROM span_texts ORDER BY value")
                .fetch_all(&pool)
                .await
                .expect("listed");
        assert_eq!(
            rows,
            [
                (1, "large".into(), "t2".into()),
                (1, "small".into(), "t1".into())
            ]
        );
    }

    /// A store from before `span_attribute_overwrites` (29) may list a value a later
    /// batch overwrote: its rows are listed again from the spans, so they are exact.
    #[tokio::test]
    async fn span_strings_no_span_holds_are_no_longer_listed() {
        let (_dir, pool) = sqlite_at(28).await;
        old_spans(&pool, &[("t1", "s1", r#"{"1":"large"}"#)]).await;
        sqlx::query(
            "INSERT INTO span_texts (run_id, code, value, trace_id) \
             VALUES ('r1', 1, 'small', 't1'), ('r1', 1, 'large', 't1')",
        )
        .execute(&pool)
        .await
        .expect("its rows, one stale");

        upgrade(&pool).await;
        let rows: Vec<(i64, String, String)> =
            sqlx::query_as("SELECT code, value, trace_id FROM span_texts ORDER BY value")
                .fetch_all(&pool)
                .await
                .expect("listed");
        assert_eq!(rows, [(1, "large".into(), "t1".into())]);
    }

    /// A store from before `span_ranges` (29) ranges each trace's span numbers and
    /// booleans: a row a trace, code and kind, whatever number of spans carry it.
    #[tokio::test]
    async fn span_numbers_and_booleans_are_ranged_once_a_trace() {
        let (_dir, pool) = sqlite_at(28).await;
        let spans = [
            ("t1", "s1", r#"{"1":5,"2":true}"#),
            ("t1", "s2", r#"{"1":9.5,"2":false}"#),
            ("t1", "s3", r#"{"1":"x","3":null}"#),
            ("t2", "s1", r#"{"1":-3}"#),
        ];
        old_spans(&pool, &spans).await;

        upgrade(&pool).await;
        let rows: Vec<(String, i64, i64, f64, f64)> = sqlx::query_as(
            "SELECT trace_id, code, kind, lo, hi FROM span_ranges ORDER BY trace_id, code",
        )
        .fetch_all(&pool)
        .await
        .expect("ranged");
        assert_eq!(
            rows,
            [
                ("t1".into(), 1, 0, 5.0, 9.5),
                ("t1".into(), 2, 1, 0.0, 1.0),
                ("t2".into(), 1, 0, -3.0, -3.0)
            ]
        );
    }

    /// A store from before migration 30 gives a row of presence to each trace and
    /// name whose spans hold a value neither listed as a string nor ranged: so a
    /// name's `exists` finds it. Null, numbers and short strings get none.
    #[tokio::test]
    async fn values_neither_listed_nor_ranged_are_marked_present() {
        let (_dir, pool) = sqlite_at(29).await;
        let long = "x".repeat(257);
        let first = format!(r#"{{"1":[1],"2":{{"k":1}},"3":null,"4":"{long}"}}"#);
        let spans = [
            ("t1", "s1", first.as_str()),
            ("t1", "s2", r#"{"1":[2],"5":"short"}"#),
            ("t2", "s1", r#"{"6":7}"#),
        ];
        old_spans(&pool, &spans).await;

        upgrade(&pool).await;
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT trace_id, code, kind FROM span_ranges WHERE kind = 2 ORDER BY trace_id, code",
        )
        .fetch_all(&pool)
        .await
        .expect("marked");
        assert_eq!(
            rows,
            [
                ("t1".into(), 1, 2),
                ("t1".into(), 2, 2),
                ("t1".into(), 4, 2)
            ]
        );
    }
}
