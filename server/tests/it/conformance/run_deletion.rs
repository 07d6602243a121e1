//! Deleting a run: it leaves every read at once; its rows then go in bounded
//! batches, resumed after a restart, and nothing of another run goes with them; its
//! id is refused to writes until then, and free after.

use crate::common::on_both;
use crate::common::{close, open, parsed, run, with, TestStore};
use serde_json::json;
use treeline_server::store::{EventBatch, Receipt, RunsAsked, StoreError, TraceQuery, Written};
use treeline_wire::annotations::{Author, NoteValue, NoteWrite, Source};
use treeline_wire::{BatchResponse, MetricPoint, RunUpsert};

/// Every table that holds a run's rows.
const TABLES: [&str; 14] = [
    "runs",
    "traces",
    "spans",
    "trace_numbers",
    "trace_texts",
    "span_texts",
    "span_ranges",
    "span_attribute_overwrites",
    "annotations",
    "step_activity",
    "metric_points",
    "metric_summaries",
    "metric_blocks",
    "idempotency",
];

async fn rows_of(t: &TestStore, run_id: &str) -> Vec<(&'static str, i64)> {
    let mut out = Vec::new();
    for table in TABLES {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE run_id = '{run_id}'");
        out.push((table, t.count(&sql).await));
    }
    out
}

/// A run with a bit of everything: traces with steps and root attributes, child
/// spans, an annotation, metrics, and an answer kept for an Idempotency-Key.
async fn fill(t: &TestStore, run_id: &str) {
    let s = &t.store;
    run(s, run_id).await;
    let mut events = Vec::new();
    for i in 0..6 {
        let trace = format!("{run_id}-t{i}");
        events.push(with(
            open(&trace, "root", None, "rollout", 10),
            json!({"step": i, "attributes": {"reward": i, "family": "algebra"}}),
        ));
        events.push(open(&trace, "child", Some("root"), "tool", 11));
        events.push(close(&trace, "child", "ok", 12));
        events.push(close(&trace, "root", "ok", 13));
    }
    let batch = EventBatch {
        events: parsed(&events),
        parsed: BatchResponse {
            accepted: events.len(),
            ..Default::default()
        },
        receipt: Some(Receipt {
            key: format!("key of {run_id}"),
            fingerprint: "f".into(),
        }),
    };
    assert!(matches!(
        s.write_batch(run_id, batch, 20).await.unwrap(),
        Written::Stored(_)
    ));
    // A span opened by one batch, whose close in the next changes its attributes.
    let trace = format!("{run_id}-t0");
    let opened = with(
        open(&trace, "late", Some("root"), "tool", 14),
        json!({"attributes": {"tries": 1}}),
    );
    let closed = with(
        close(&trace, "late", "ok", 15),
        json!({"attributes": {"tries": 2}}),
    );
    for (at, event) in [(21, opened), (22, closed)] {
        let events = [event];
        let batch = EventBatch {
            events: parsed(&events),
            parsed: BatchResponse {
                accepted: 1,
                ..Default::default()
            },
            receipt: None,
        };
        assert!(matches!(
            s.write_batch(run_id, batch, at).await.unwrap(),
            Written::Stored(_)
        ));
    }
    let points: Vec<MetricPoint> = (0..100)
        .map(|step| MetricPoint {
            key: "reward".into(),
            step,
            value: step as f64,
            ts: None,
        })
        .collect();
    s.write_metrics(run_id, &points).await.unwrap();
    let note = NoteWrite {
        span_id: None,
        name: "verdict".into(),
        value: NoteValue::Text("bad".into()),
        comment: None,
    };
    let author = Author {
        key_id: "k".into(),
        name: "k's key".into(),
    };
    s.annotate(
        run_id,
        &format!("{run_id}-t0"),
        &note,
        &author,
        Source::Person,
        30,
    )
    .await
    .unwrap();
}

fn project_wide() -> TraceQuery {
    TraceQuery {
        project: Some("proj".into()),
        limit: 100,
        ..Default::default()
    }
}

async fn a_deleted_run_leaves_every_read_at_once_and_its_rows_go_in_batches(t: TestStore) {
    fill(&t, "r1").await;
    fill(&t, "r2").await;
    let before = rows_of(&t, "r1").await;
    assert!(before.iter().all(|(_, n)| *n > 0), "{before:?}");
    let other = rows_of(&t, "r2").await;
    let s = &t.store;

    assert_eq!(
        s.delete_run("r1", 100).await.unwrap().as_deref(),
        Some("proj")
    );
    assert_eq!(s.delete_run("r1", 101).await.unwrap(), None);
    assert_eq!(s.delete_run("nope", 101).await.unwrap(), None);

    // Gone from every read at once, its rows still there.
    assert!(s.reads().get_run("r1").await.unwrap().is_none());
    let runs = s
        .reads()
        .list_runs(RunsAsked::newest(Some("proj"), 10, None))
        .await
        .unwrap();
    let ids: Vec<_> = runs.runs.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, vec!["r2"]);
    let listed = s.reads().list_traces(&project_wide()).await.unwrap();
    assert_eq!(listed.traces.len(), 6);
    assert!(listed.traces.iter().all(|t| t.run_id == "r2"));
    assert!(s.idempotency_get("key of r1").await.unwrap().is_none());
    assert!(s.idempotency_get("key of r2").await.unwrap().is_some());
    assert!(
        t.count("SELECT COUNT(*) FROM spans WHERE run_id = 'r1'")
            .await
            > 0
    );

    // Its id is refused to writes until its rows are gone.
    let up = RunUpsert {
        project: "proj".into(),
        ..Default::default()
    };
    assert!(matches!(
        s.ensure_run("r1", &up, 102).await,
        Err(StoreError::RunPurging(_))
    ));
    assert!(matches!(
        s.upsert_run("r1", &up, 102).await,
        Err(StoreError::RunPurging(_))
    ));

    // A few rows a step, and every row of r1, and none of r2.
    let mut steps = 0;
    loop {
        let step = s.purge_step(5).await.unwrap().expect("a run to purge");
        assert_eq!(step.run_id, "r1");
        assert!(step.rows <= 5 || step.done, "{step:?}");
        steps += 1;
        if step.done {
            break;
        }
    }
    let rows: i64 = before.iter().map(|(_, n)| n).sum();
    assert!(steps as i64 >= rows / 5, "{steps} steps for {rows} rows");
    assert!(rows_of(&t, "r1").await.iter().all(|(_, n)| *n == 0));
    assert_eq!(rows_of(&t, "r2").await, other);
    assert_eq!(s.purge_step(5).await.unwrap(), None);

    // Then the id is free: a new, empty run.
    assert_eq!(s.ensure_run("r1", &up, 103).await.unwrap(), "proj");
    let fresh = s.reads().get_run("r1").await.unwrap().expect("the new run");
    assert_eq!(fresh.summary.trace_count, 0);
}

async fn a_deletion_resumes_after_a_restart(t: TestStore) {
    fill(&t, "r1").await;
    t.store.delete_run("r1", 100).await.unwrap();
    for _ in 0..3 {
        t.store.purge_step(4).await.unwrap();
    }
    let left: i64 = rows_of(&t, "r1").await.iter().map(|(_, n)| n).sum();
    assert!(left > 0, "the deletion was done before the store closed");
    // The store closed part-way (as by a crash: each batch is committed or not)
    // and opened again.
    let url = t.url.clone();
    let reopened = TestStore::at(&url).await;
    assert!(reopened
        .store
        .reads()
        .get_run("r1")
        .await
        .unwrap()
        .is_none());
    while let Some(step) = reopened.store.purge_step(4).await.unwrap() {
        if step.done {
            break;
        }
    }
    assert!(rows_of(&reopened, "r1").await.iter().all(|(_, n)| *n == 0));
    assert_eq!(reopened.count("SELECT COUNT(*) FROM deleted_runs").await, 0);
}

on_both!(tokio::test, |t| t;
    a_deleted_run_leaves_every_read_at_once_and_its_rows_go_in_batches,
    a_deletion_resumes_after_a_restart,
);

/// On SQLite, a new database gives the space of a deleted run back to the file
/// system, not only to later writes.
#[tokio::test]
async fn a_deleted_runs_space_goes_back_to_the_file_system() {
    let t = crate::common::sqlite().await;
    let s = &t.store;
    run(s, "big").await;
    // Words that do not repeat, so the bodies take their size on disk packed too.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut body = || {
        (0..300)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("{:x}", x % 1_000_003)
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    for n in 0..40 {
        let trace = format!("t{n}");
        let mut events = vec![open(&trace, "root", None, "rollout", 1)];
        for c in 0..50 {
            let span = format!("s{c}");
            events.push(with(
                open(&trace, &span, Some("root"), "model", 2),
                json!({"input": format!("{}{n}-{c}", body())}),
            ));
            events.push(close(&trace, &span, "ok", 3));
        }
        events.push(close(&trace, "root", "ok", 4));
        crate::common::write(s, "big", &events).await;
    }
    let size = || async {
        t.execute("PRAGMA wal_checkpoint(TRUNCATE)").await;
        let path = t.url.trim_start_matches("sqlite:").to_string();
        std::fs::metadata(path).expect("the file").len()
    };
    assert_eq!(t.count("PRAGMA auto_vacuum").await, 2, "incremental");
    let full = size().await;
    assert!(full > 4_000_000, "{full} bytes");

    s.delete_run("big", 10).await.unwrap();
    while let Some(step) = s.purge_step(2_000).await.unwrap() {
        if step.done {
            break;
        }
    }
    let page_bytes = t.count("PRAGMA page_size").await as u64;
    let mut given_back = 0;
    loop {
        let given = s.reclaim_space(500).await.unwrap();
        if given == 0 {
            break;
        }
        assert!(given <= 500 * page_bytes, "{given} bytes for 500 pages");
        given_back += given;
    }
    assert!(given_back > 0);
    let emptied = size().await;
    assert!(emptied < full / 4, "{full} bytes before, {emptied} after");
}
