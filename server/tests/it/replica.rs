//! A server whose query routes read a streaming replica (`--read-database-url`), on
//! the replica `scripts/with-postgres.sh` starts beside its cluster: lists follow
//! the replica, writes never wait for it, and the dashboard says when it lags.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::Connection;
use treeline_devtools::process::{self, Storage};

use crate::common::{close, free_addr, open, postgres_url, treeline_in, wait_ready, ServerProcess};
use treeline_server::store;

/// The replica's URL for the database `primary` names.
fn replica_of(primary: &str) -> String {
    let base = std::env::var("TREELINE_TEST_POSTGRES_REPLICA_URL").expect(
        "TREELINE_TEST_POSTGRES_REPLICA_URL is not set: run `make test`, which starts \
         PostgreSQL with a replica",
    );
    let name = primary.rsplit('/').next().unwrap_or_default();
    store::PostgresStore::database_url(&base, name)
}

/// A fresh database's URL on the primary and on the replica, once the new database
/// has reached the replica by replication.
async fn database_with_replica() -> (String, String) {
    let primary = postgres_url().await;
    let replica = replica_of(&primary);
    let reachable = within_20s(|| async { sqlx::PgConnection::connect(&replica).await.is_ok() });
    assert!(reachable.await, "the replica never had the new database");
    (primary, replica)
}

/// Polls `check` every 100 ms for at most 20 s; whether it came true.
async fn within_20s<F: std::future::Future<Output = bool>>(mut check: impl FnMut() -> F) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

async fn replay(replica_admin: &str, what: &str) {
    let mut conn = sqlx::PgConnection::connect(replica_admin)
        .await
        .expect("connect to the replica");
    sqlx::query(&format!("SELECT pg_wal_replay_{what}()"))
        .execute(&mut conn)
        .await
        .expect("pause or resume replay");
}

#[tokio::test]
async fn lists_read_the_replica_and_the_dashboard_says_when_it_lags() {
    let (primary, replica) = database_with_replica().await;

    let dir = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let base = format!("http://{addr}");
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_treeline"));
    let storage = Storage::Replicated {
        primary: &primary,
        replica: &replica,
    };
    let child = process::spawn_serve(exe, &addr, storage, &dir.path().join("server.log"))
        .expect("treeline serve starts");
    let _server = ServerProcess(child);
    wait_ready(&base).await;

    // A write that waited for the replica would wait until replay resumes: the
    // timeout makes that a failure, not a hang.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let send = |trace: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let events = json!({"events": [
                open(trace, "root", None, "rollout", 10),
                close(trace, "root", "ok", 20),
            ]});
            http.post(format!("{base}/api/runs/r1/traces/events"))
                .json(&events)
                .send()
                .await
                .expect("send events")
                .status()
        }
    };
    let fetch = |path: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let answer = http.get(format!("{base}{path}")).send().await;
            answer.expect(path)
        }
    };
    let get = |path: &'static str| async move {
        let json = fetch(path).await.json::<Value>().await;
        json.expect("JSON")
    };
    let traces = || async {
        let page = get("/api/runs/r1/traces").await;
        page["traces"].as_array().map_or(0, Vec::len)
    };
    let lag = || async {
        let session = get("/api/session").await;
        session["replica_lag_ms"].as_i64().expect("a replica's lag")
    };
    let page = || async { fetch("/").await.text().await.expect("HTML") };
    let notice = "This dashboard reads a replica that is";

    let run = http
        .put(format!("{base}/api/runs/r1"))
        .json(&json!({"project": "p"}))
        .send()
        .await
        .expect("put run");
    assert!(run.status().is_success(), "{}", run.status());
    assert!(send("t1").await.is_success());
    assert!(
        within_20s(|| async { traces().await == 1 }).await,
        "the first trace never reached the list"
    );
    // Other tests write to the same cluster, so a replica busy replaying may trail
    // by a moment: caught up is asked for within a while, not at once.
    let caught_up = || async { lag().await < 1_000 && !page().await.contains(notice) };
    assert!(within_20s(caught_up).await, "a notice while caught up");

    // The replica stops replaying: writes are still acknowledged at once, from the
    // primary, and the lists show what the replica had.
    let admin = replica_of("/postgres");
    replay(&admin, "pause").await;
    let started = Instant::now();
    assert!(send("t2").await.is_success());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a write waited on the replica"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        traces().await,
        1,
        "the list read the primary, not the replica"
    );
    let behind = lag().await;
    assert!(
        behind >= 1_000,
        "the replica paused 1.5 s ago lags {behind} ms"
    );
    let html = page().await;
    assert!(html.contains(notice), "no notice while the replica lags");

    replay(&admin, "resume").await;
    assert!(
        within_20s(|| async { traces().await == 2 }).await,
        "the second trace never reached the list after replay resumed"
    );
    assert!(
        within_20s(caught_up).await,
        "still lagging after catching up"
    );
}

#[test]
fn a_replica_for_sqlite_is_refused_with_the_flag_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_string_lossy();
    let replica = "postgres://postgres@127.0.0.1:1/replica";
    let args = [
        "serve",
        "--addr",
        &free_addr(),
        "--read-database-url",
        replica,
    ];
    let (ok, _, err) = treeline_in(&data, &args);
    assert!(!ok);
    assert!(
        err.contains("--read-database-url needs a PostgreSQL --database-url"),
        "{err}"
    );
}

/// A TCP link to `upstream` on a free local port. Aborting the task closes the port
/// and every connection through it, as a replica that went away would.
async fn link_to(upstream: &str) -> (String, tokio::task::JoinHandle<()>) {
    let upstream = upstream.to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port");
    let addr = listener.local_addr().expect("its address").to_string();
    let task = tokio::spawn(async move {
        let mut links = tokio::task::JoinSet::new();
        while let Ok((mut inbound, _)) = listener.accept().await {
            let upstream = upstream.clone();
            links.spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (addr, task)
}

/// A replica that stops answering: within seconds the lists read the primary, and
/// show what was written after the replica went away.
#[tokio::test]
async fn lists_read_the_primary_while_the_replica_does_not_answer() {
    let (primary, replica) = database_with_replica().await;
    // postgres://user@host:port/db: the same database, through the link.
    let (head, db) = replica.rsplit_once('/').expect("a database in the URL");
    let (user, authority) = head.rsplit_once('@').expect("a user in the URL");
    let (addr, link) = link_to(authority).await;
    let linked = format!("{user}@{addr}/{db}");

    let (_, s) = store::open_in(std::path::Path::new("."), Some(&primary), Some(&linked))
        .await
        .expect("open with the linked replica");
    crate::common::run(&s, "r1").await;
    crate::common::write(&s, "r1", &[open("t1", "root", None, "rollout", 1)]).await;
    let listed = |n: usize| {
        let s = s.clone();
        async move {
            let query = store::TraceQuery {
                run_id: Some("r1".into()),
                limit: 10,
                ..Default::default()
            };
            // A read already sent to the replica waits for its pool (30 s): this
            // one gives up after a second and asks again.
            let list =
                tokio::time::timeout(Duration::from_secs(1), s.query_reads().list_traces(&query));
            matches!(list.await, Ok(Ok(l)) if l.traces.len() == n)
        }
    };
    assert!(
        within_20s(|| listed(1)).await,
        "the replica never listed t1"
    );

    link.abort();
    crate::common::write(&s, "r1", &[open("t2", "root", None, "rollout", 2)]).await;
    assert!(
        within_20s(|| listed(2)).await,
        "the lists did not turn to the primary"
    );
}
