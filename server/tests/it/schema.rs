//! The two databases' schemas, compared: the same tables, columns, primary keys and
//! indexes (by name and column order), so a migration added to one cannot be
//! forgotten in the other. Types differ by dialect (INTEGER against BIGINT) and are
//! not compared, nor is the index of body words, each engine's own (FTS5 tables
//! against a tsvector column): the text search conformance tests compare it.

use std::collections::BTreeSet;

use sqlx::{Connection, Row};
use treeline_server::store;

/// Whether `table` belongs to the body-words index (`store/src/body_text.rs`).
fn body_words(table: &str) -> bool {
    table == "span_docs" || table.starts_with("span_words")
}

/// Indexes only SQLite has, each read by a query written for SQLite alone:
/// `span_ranges_spread` by a span number's equality in two parts
/// (`Dialect::SPLIT_EQUALITY`).
const SQLITE_ONLY_INDEXES: [&str; 1] = ["span_ranges_spread"];

/// (table, column), (table, primary key columns) and (index, table, columns).
#[derive(Debug, Default, PartialEq)]
struct Schema {
    columns: BTreeSet<(String, String)>,
    primary_keys: BTreeSet<(String, String)>,
    indexes: BTreeSet<(String, String, String)>,
    /// The indexes of [`SQLITE_ONLY_INDEXES`] found, left out of `indexes`.
    sqlite_only: BTreeSet<String>,
}

async fn sqlite_schema() -> Schema {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("schema.db").display());
    drop(store::open(&url).await.expect("migrate sqlite"));
    let mut conn = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("connect");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table'
            AND name NOT LIKE 'sqlite_%' AND name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("tables");
    let mut schema = Schema::default();
    for table in tables.into_iter().filter(|t| !body_words(t)) {
        let columns = sqlx::query("SELECT name, pk FROM pragma_table_info(?) ORDER BY pk, cid")
            .bind(&table)
            .fetch_all(&mut conn)
            .await
            .expect("columns");
        let mut pk = Vec::new();
        for c in &columns {
            let name: String = c.get("name");
            if c.get::<i64, _>("pk") > 0 {
                pk.push(name.clone());
            }
            schema.columns.insert((table.clone(), name));
        }
        schema.primary_keys.insert((table.clone(), pk.join(",")));
        let indexes: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM pragma_index_list(?) WHERE origin = 'c' ORDER BY name",
        )
        .bind(&table)
        .fetch_all(&mut conn)
        .await
        .expect("indexes");
        for index in indexes {
            if SQLITE_ONLY_INDEXES.contains(&index.as_str()) {
                schema.sqlite_only.insert(index);
                continue;
            }
            let cols: Vec<String> =
                // An expression (`lower(trace_id)`) has no column name on either side.
                sqlx::query_scalar(
                    "SELECT COALESCE(name, '(expr)') FROM pragma_index_info(?) ORDER BY seqno",
                )
                    .bind(&index)
                    .fetch_all(&mut conn)
                    .await
                    .expect("index columns");
            schema
                .indexes
                .insert((index, table.clone(), cols.join(",")));
        }
    }
    schema
}

async fn postgres_schema() -> Schema {
    let base = std::env::var("TREELINE_TEST_POSTGRES_URL")
        .expect("TREELINE_TEST_POSTGRES_URL is not set: run `make test`, which starts PostgreSQL");
    let name = format!("schema_{}", std::process::id());
    let url = store::PostgresStore::create_database(&base, &name)
        .await
        .expect("create database");
    drop(store::open(&url).await.expect("migrate postgres"));
    let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
    let mut schema = Schema::default();
    let columns = sqlx::query(
        "SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("columns");
    for c in columns {
        let table: String = c.get("t");
        if !body_words(&table) {
            schema.columns.insert((table, c.get("c")));
        }
    }
    let indexes = sqlx::query(
        "SELECT i.relname::text AS index, t.relname::text AS tbl, x.indisprimary AS pk,
                string_agg(COALESCE(a.attname::text, '(expr)'), ',' ORDER BY k.ord) AS cols
           FROM pg_index x
           JOIN pg_class i ON i.oid = x.indexrelid
           JOIN pg_class t ON t.oid = x.indrelid
           JOIN pg_namespace n ON n.oid = t.relnamespace
           CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
           LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
          WHERE n.nspname = current_schema() AND t.relname <> '_sqlx_migrations'
            -- A primary key's columns, not what it carries (SQLite's without a
            -- rowid carries every column).
            AND (NOT x.indisprimary OR k.ord <= x.indnkeyatts)
            AND (x.indisprimary OR NOT EXISTS
                 (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid))
          GROUP BY i.relname, t.relname, x.indisprimary",
    )
    .fetch_all(&mut conn)
    .await
    .expect("indexes");
    for i in indexes {
        if body_words(&i.get::<String, _>("tbl")) {
            continue;
        }
        if i.get::<bool, _>("pk") {
            schema.primary_keys.insert((i.get("tbl"), i.get("cols")));
        } else {
            schema
                .indexes
                .insert((i.get("index"), i.get("tbl"), i.get("cols")));
        }
    }
    schema
}

#[tokio::test]
async fn sqlite_and_postgres_schemas_match() {
    let (lite, pg) = (sqlite_schema().await, postgres_schema().await);
    assert!(!lite.columns.is_empty() && !lite.indexes.is_empty());
    assert_eq!(lite.columns, pg.columns, "columns differ");
    assert_eq!(lite.primary_keys, pg.primary_keys, "primary keys differ");
    assert_eq!(lite.indexes, pg.indexes, "indexes differ");
    let sqlite_only: BTreeSet<String> = SQLITE_ONLY_INDEXES.map(String::from).into();
    assert_eq!(lite.sqlite_only, sqlite_only, "SQLite's own indexes");
}
