//! Durability: the real `treeline serve` process is killed with SIGKILL while four
//! writers are sending batches. After a restart on the same SQLite file, every batch
//! that was acknowledged is there in full.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use treeline_client::Client;
use treeline_wire::{RunUpsert, TraceSummary};

use crate::common::{free_addr, serve, wait_ready};

const SPANS_PER_BATCH: usize = 100;

/// A batch of one whole trace: a root and its children, opened and closed.
fn batch(trace_id: &str) -> Vec<serde_json::Value> {
    let mut events = vec![
        json!({"op": "open", "trace_id": trace_id, "span_id": "root",
        "name": "rollout", "kind": "rollout", "ts": 1}),
    ];
    for c in 1..SPANS_PER_BATCH {
        events.push(
            json!({"op": "open", "trace_id": trace_id, "span_id": format!("s{c}"),
            "parent_span_id": "root", "name": "env step", "kind": "env_step", "ts": 2 + c}),
        );
        events.push(
            json!({"op": "close", "trace_id": trace_id, "span_id": format!("s{c}"),
            "status": "ok", "ts": 3 + c}),
        );
    }
    events.push(
        json!({"op": "close", "trace_id": trace_id, "span_id": "root", "status": "ok", "ts": 500}),
    );
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_batch_survives_a_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = free_addr();
    let base = format!("http://{addr}");
    let mut server = serve(dir.path(), &addr);
    wait_ready(&base).await;
    let mut client = Client::new(&base);
    client.attempts = 1; // an unanswered batch is simply not acknowledged
    let run = RunUpsert {
        project: "crash".into(),
        ..Default::default()
    };
    client
        .put_run("crash-run", &run)
        .await
        .expect("run created");

    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (client, acknowledged) = (client.clone(), acknowledged.clone());
        writers.push(tokio::spawn(async move {
            for n in 0.. {
                let trace_id = format!("w{w}-t{n}");
                match client.send_events("crash-run", &batch(&trace_id)).await {
                    Ok(_) => acknowledged.lock().expect("lock").push(trace_id),
                    Err(_) => break, // the server is gone
                }
            }
        }));
    }
    // Kill it mid-stream, once some batches are in.
    while acknowledged.lock().expect("lock").len() < 40 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.0.kill().expect("SIGKILL");
    server.0.wait().expect("reaped");
    for w in writers {
        w.await.expect("writer");
    }
    let acknowledged = acknowledged.lock().expect("lock").clone();

    let server = serve(dir.path(), &addr);
    wait_ready(&base).await;
    for trace_id in &acknowledged {
        let trace: TraceSummary = client
            .get(&format!("/api/runs/crash-run/traces/{trace_id}"))
            .await
            .unwrap_or_else(|e| panic!("acknowledged trace {trace_id} lost: {e}"));
        assert_eq!(trace.span_count, SPANS_PER_BATCH as i64, "{trace_id}");
    }
    drop(server);
}

/// What makes an acknowledged batch survive a power cut, not only a killed
/// process (whose written pages the OS keeps): the writer runs WAL with
/// `synchronous=FULL`, which syncs the WAL on every commit. The kill -9 test above
/// would pass with `synchronous=OFF` too, so this one keeps the setting.
#[tokio::test]
async fn the_writer_syncs_every_commit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("treeline.db").display());
    let store = treeline_server::store::SqliteStore::open(&url)
        .await
        .expect("open");
    assert_eq!(store.writer_synchronous().await.expect("pragma"), 2, "FULL");
    let mode: String = {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&url)
            .await
            .expect("connect");
        sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut conn)
            .await
            .expect("journal mode")
    };
    assert_eq!(mode, "wal");
}

/// A run's deletion killed part-way (SIGKILL, once some of its rows are gone) goes
/// on after the restart until every row is gone, and what was acknowledged to
/// another run meanwhile is all there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_killed_part_way_finishes_after_the_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("treeline.db").display());
    let addr = free_addr();
    let base = format!("http://{addr}");
    let mut server = serve(dir.path(), &addr);
    wait_ready(&base).await;
    let mut client = Client::new(&base);
    client.attempts = 1;
    let run = RunUpsert {
        project: "crash".into(),
        ..Default::default()
    };
    for id in ["doomed", "kept"] {
        client.put_run(id, &run).await.expect("run created");
    }
    // 200 traces of 100 spans: about ten batches of the purge.
    for n in 0..200 {
        client
            .send_events("doomed", &batch(&format!("d{n}")))
            .await
            .expect("events");
    }
    let count = |sql: &'static str| {
        let url = url.clone();
        async move {
            use sqlx::Connection;
            let mut conn = sqlx::SqliteConnection::connect(&url)
                .await
                .expect("connect");
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&mut conn)
                .await
                .expect(sql)
        }
    };
    const DOOMED_SPANS: &str = "SELECT COUNT(*) FROM spans WHERE run_id = 'doomed'";
    assert_eq!(count(DOOMED_SPANS).await, 20_000);

    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let writer = {
        let (client, acknowledged) = (client.clone(), acknowledged.clone());
        tokio::spawn(async move {
            for n in 0.. {
                let trace_id = format!("k{n}");
                match client.send_events("kept", &batch(&trace_id)).await {
                    Ok(_) => acknowledged.lock().expect("lock").push(trace_id),
                    Err(_) => break, // the server is gone
                }
            }
        })
    };
    let deleted = reqwest::Client::new()
        .delete(format!("{base}/api/runs/doomed"))
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), reqwest::StatusCode::OK);
    // Part-way: some of its spans gone, not all.
    let mut left = count(DOOMED_SPANS).await;
    while left == 20_000 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        left = count(DOOMED_SPANS).await;
    }
    server.0.kill().expect("SIGKILL");
    server.0.wait().expect("reaped");
    writer.await.expect("writer");
    assert!(
        left > 0,
        "the purge ended before the kill; nothing was resumed"
    );

    let server = serve(dir.path(), &addr);
    wait_ready(&base).await;
    let gone = client.get::<serde_json::Value>("/api/runs/doomed").await;
    assert!(gone.is_err(), "the deleted run is back after the restart");
    let started = std::time::Instant::now();
    while count("SELECT COUNT(*) FROM deleted_runs").await > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the deletion did not finish"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for table in ["runs", "traces", "spans", "step_activity"] {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE run_id = 'doomed'");
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&url)
            .await
            .expect("connect");
        let n: i64 = sqlx::query_scalar(&sql)
            .fetch_one(&mut conn)
            .await
            .expect("count");
        assert_eq!(n, 0, "{table}");
    }
    let acknowledged = acknowledged.lock().expect("lock").clone();
    assert!(!acknowledged.is_empty());
    for trace_id in &acknowledged {
        let trace: TraceSummary = client
            .get(&format!("/api/runs/kept/traces/{trace_id}"))
            .await
            .unwrap_or_else(|e| panic!("acknowledged trace {trace_id} lost: {e}"));
        assert_eq!(trace.span_count, SPANS_PER_BATCH as i64, "{trace_id}");
    }
    drop(server);
}
