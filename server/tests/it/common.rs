//! Helpers shared by the integration tests: real stores on a temporary SQLite file
//! and, when the test script started one, on a throwaway PostgreSQL database.

#![allow(
    dead_code,
    reason = "each test module uses a different part of the helpers"
)]

use std::sync::Arc;

use serde_json::{json, Value};
use treeline_devtools::process;
use treeline_server::store::{self, Store};
use treeline_wire::{parse_event, RunUpsert, SpanEvent, Warning};

pub(crate) struct TestStore {
    pub store: Arc<dyn Store>,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestStore {
    /// The store at `url`, left in place when dropped.
    pub(crate) async fn at(url: &str) -> TestStore {
        TestStore {
            store: store::open(url).await.expect("open store"),
            url: url.to_string(),
            _dir: None,
        }
    }

    /// Runs one SQL statement on the store's database, beside the store: what an
    /// older server left behind, say.
    pub(crate) async fn execute(&self, sql: &str) {
        use sqlx::Connection;
        if self.url.starts_with("sqlite:") {
            let mut conn = sqlx::SqliteConnection::connect(&self.url)
                .await
                .expect("connect sqlite");
            sqlx::query(sql).execute(&mut conn).await.expect(sql);
        } else {
            let mut conn = sqlx::PgConnection::connect(&self.url)
                .await
                .expect("connect postgres");
            sqlx::query(sql).execute(&mut conn).await.expect(sql);
        }
    }
}

impl TestStore {
    /// The one integer an SQL query answers, read beside the store.
    pub(crate) async fn count(&self, sql: &str) -> i64 {
        use sqlx::Connection;
        if self.url.starts_with("sqlite:") {
            let mut conn = sqlx::SqliteConnection::connect(&self.url)
                .await
                .expect("connect sqlite");
            sqlx::query_scalar(sql)
                .fetch_one(&mut conn)
                .await
                .expect(sql)
        } else {
            let mut conn = sqlx::PgConnection::connect(&self.url)
                .await
                .expect("connect postgres");
            sqlx::query_scalar(sql)
                .fetch_one(&mut conn)
                .await
                .expect(sql)
        }
    }
}

pub(crate) async fn sqlite() -> TestStore {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("treeline.db").display());
    TestStore {
        store: store::open(&url).await.expect("open sqlite"),
        url,
        _dir: Some(dir),
    }
}

/// A fresh database on the PostgreSQL server named by TREELINE_TEST_POSTGRES_URL.
/// `make test` always sets it; run alone without it, the PostgreSQL cases say so
/// and fail rather than pass without testing anything.
pub(crate) async fn postgres() -> TestStore {
    let url = postgres_url().await;
    TestStore {
        store: store::open(&url).await.expect("open postgres"),
        url,
        _dir: None,
    }
}

/// The URL of a fresh, empty database on that server.
pub(crate) async fn postgres_url() -> String {
    let base = std::env::var("TREELINE_TEST_POSTGRES_URL")
        .expect("TREELINE_TEST_POSTGRES_URL is not set: run `make test`, which starts PostgreSQL");
    let name = format!("t_{:016x}", rand_u64());
    store::PostgresStore::create_database(&base, &name)
        .await
        .expect("create test database")
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish()
}

pub(crate) async fn run(store: &Arc<dyn Store>, run_id: &str) {
    let run = RunUpsert {
        project: "proj".into(),
        name: Some(format!("{run_id} name")),
        ..Default::default()
    };
    store
        .upsert_run(run_id, &run, 1_000)
        .await
        .expect("upsert run");
}

/// Events given as JSON, parsed as the HTTP layer would, with their indexes.
pub(crate) fn parsed(events: &[Value]) -> Vec<(usize, SpanEvent)> {
    events
        .iter()
        .enumerate()
        .map(|(i, e)| (i, parse_event(e).expect("valid event").0))
        .collect()
}

/// Writes events given as JSON, as the HTTP layer would after parsing them.
pub(crate) async fn write(store: &Arc<dyn Store>, run_id: &str, events: &[Value]) -> Vec<Warning> {
    store
        .write_events(run_id, parsed(events), 5_000)
        .await
        .expect("write events")
}

pub(crate) fn open(trace: &str, span: &str, parent: Option<&str>, kind: &str, ts: i64) -> Value {
    json!({"op": "open", "trace_id": trace, "span_id": span, "parent_span_id": parent,
           "name": format!("{kind} {span}"), "kind": kind, "ts": ts})
}

pub(crate) fn close(trace: &str, span: &str, status: &str, ts: i64) -> Value {
    json!({"op": "close", "trace_id": trace, "span_id": span, "status": status, "ts": ts})
}

pub(crate) fn with(mut event: Value, extra: Value) -> Value {
    if let (Some(e), Some(x)) = (event.as_object_mut(), extra.as_object()) {
        for (k, v) in x {
            e.insert(k.clone(), v.clone());
        }
    }
    event
}

/// Serves the API over `store` on a loopback port and writes `events` into run
/// `run_id` of `project` through it, as a client would: the server's address, a
/// client of it, and the server's task.
#[cfg(feature = "devtools")]
pub(crate) async fn served_run(
    store: &TestStore,
    run_id: &str,
    project: &str,
    events: &[Value],
) -> (String, treeline_client::Client, tokio::task::JoinHandle<()>) {
    let (base, server) = treeline_server::demo::spawn_api_server(
        &treeline_server::devtools::Server,
        store.store.clone(),
    )
    .await
    .expect("server");
    let client = treeline_client::Client::new(&base);
    let run = RunUpsert {
        project: project.into(),
        ..Default::default()
    };
    client.put_run(run_id, &run).await.expect("run");
    let answer = client.send_events(run_id, events).await.expect("events");
    assert!(answer.rejected.is_empty(), "{:?}", answer.rejected);
    (base, client, server)
}

/// `treeline ARGS --data-dir DATA` run to its end: whether it succeeded, and its
/// standard output and error.
pub(crate) fn treeline_in(data: &str, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_treeline"))
        .args(args)
        .args(["--data-dir", data])
        .output()
        .expect("run treeline");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A free loopback address for a server process.
pub(crate) fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").to_string()
}

/// The real `treeline serve` process on SQLite in `data_dir`, listening on `addr`,
/// its log appended to `server.log` there; killed when dropped, so a failed test
/// leaves no server behind.
pub(crate) struct ServerProcess(pub std::process::Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn serve(data_dir: &std::path::Path, addr: &str) -> ServerProcess {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_treeline"));
    let log = data_dir.join("server.log");
    let storage = process::Storage::DataDir(data_dir);
    ServerProcess(process::spawn_serve(exe, addr, storage, &log).expect("treeline serve starts"))
}

/// Waits until the server at `base` answers its health check. 30 s: `make test`
/// builds the browser bundle beside these tests, and a debug server once took over
/// 10 s to start on the 2-core machine then.
pub(crate) async fn wait_ready(base: &str) {
    let ready = process::wait_healthy(base, std::time::Duration::from_secs(30)).await;
    assert!(ready, "treeline serve did not answer /healthz at {base}");
}

/// Each case once on each database: `on_both!(ATTRIBUTE, |t| ARGUMENT; case, …)` makes
/// the tests `sqlite::case` and `postgres::case` (ATTRIBUTE is `tokio::test`, with a
/// flavor where a case needs two workers), each calling `case(ARGUMENT)` with `t` its
/// fresh [`TestStore`], which lives until the case ends.
macro_rules! on_both {
    ($test:meta, |$t:ident| $arg:expr; $($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[$test] async fn $name() {
                let $t = crate::common::sqlite().await;
                super::$name($arg).await;
            })*
        }
        mod postgres {
            $(#[$test] async fn $name() {
                let $t = crate::common::postgres().await;
                super::$name($arg).await;
            })*
        }
    };
}
pub(crate) use on_both;
