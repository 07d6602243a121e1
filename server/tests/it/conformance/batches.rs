//! Batches: idempotent replays, racing writers, and a batch that fails alone.

use crate::common::on_both;
use crate::common::{close, open, parsed, run, with, write};
use serde_json::json;
use treeline_server::store::{EventBatch, Receipt, StoreError, Written};
use treeline_wire::BatchResponse;

use super::S;

async fn a_replayed_batch_stores_nothing_twice(s: S) {
    run(&s, "r1").await;
    let batch = [
        with(open("t1", "root", None, "rollout", 0), json!({"step": 2})),
        open("t1", "a", Some("root"), "tool", 1),
        close("t1", "a", "error", 2),
        close("t1", "root", "ok", 3),
    ];
    write(&s, "r1", &batch).await;
    let before = (
        s.reads().get_trace("r1", "t1").await.unwrap(),
        s.reads().steps("r1", None, None).await.unwrap(),
    );
    let warnings = write(&s, "r1", &batch).await;
    assert_eq!(warnings.len(), 4);
    let after = (
        s.reads().get_trace("r1", "t1").await.unwrap(),
        s.reads().steps("r1", None, None).await.unwrap(),
    );
    assert_eq!(
        before.0.as_ref().map(|t| (t.span_count, t.error_count)),
        after.0.as_ref().map(|t| (t.span_count, t.error_count))
    );
    assert_eq!(before.1, after.1);
    assert_eq!(
        s.reads()
            .get_span("r1", "t1", "root")
            .await
            .unwrap()
            .unwrap()
            .node
            .child_count,
        1
    );
}

/// A batch as the HTTP layer hands it over, under an Idempotency-Key.
fn keyed_batch(events: &[serde_json::Value], key: &str) -> EventBatch {
    let events = parsed(events);
    EventBatch {
        parsed: BatchResponse {
            accepted: events.len(),
            ..Default::default()
        },
        events,
        receipt: Some(Receipt {
            key: key.into(),
            fingerprint: format!("fingerprint of {key}"),
        }),
    }
}

async fn batches_racing_with_one_key_write_once(s: S) {
    run(&s, "r1").await;
    let events = [
        open("t1", "root", None, "rollout", 0),
        open("t1", "a", Some("root"), "tool", 1),
    ];
    let racing = (0..8).map(|_| s.write_batch("r1", keyed_batch(&events, "k1"), 5_000));
    let written = futures::future::join_all(racing).await;
    let mut stored = Vec::new();
    let mut replays = Vec::new();
    for w in written {
        match w.expect("written") {
            Written::Stored(answer) => stored.push(answer),
            Written::Replay(record) => replays.push(record),
        }
    }
    assert_eq!(stored.len(), 1, "{replays:?}");
    assert_eq!((stored[0].accepted, stored[0].warnings.len()), (2, 0));
    assert_eq!(replays.len(), 7);
    let first = serde_json::to_string(&stored[0]).unwrap();
    assert!(replays.iter().all(|r| r.response == first && r.key == "k1"));
    let trace = s.reads().get_trace("r1", "t1").await.unwrap().unwrap();
    assert_eq!(trace.span_count, 2);
}

/// Batches racing to several runs (both stores fold them into shared transactions) are
/// each stored, and answered with their own warnings at their own indexes.
async fn racing_batches_to_several_runs_each_get_their_own_answer(s: S) {
    const RUNS: [&str; 3] = ["g1", "g2", "g3"];
    for r in RUNS {
        run(&s, r).await;
    }
    let writes = (0..12).map(|i| {
        let run_id = RUNS[i % 3];
        let trace = format!("t{i}");
        let mut events = vec![
            open(&trace, "root", None, "rollout", 0),
            open(&trace, "a", Some("root"), "tool", 1),
        ];
        // One or two more opens of the root: warnings at this batch's 2 (and 3).
        for _ in 0..=(i % 2) {
            events.push(open(&trace, "root", None, "rollout", 0));
        }
        let batch = keyed_batch(&events, &format!("g-{i}"));
        let s = s.clone();
        async move { (i, run_id, trace, s.write_batch(run_id, batch, 5_000).await) }
    });
    for (i, run_id, trace, written) in futures::future::join_all(writes).await {
        let Written::Stored(answer) = written.expect("written") else {
            panic!("batch {i} was answered as a replay")
        };
        let indexes: Vec<usize> = answer.warnings.iter().map(|w| w.index).collect();
        assert_eq!(indexes, (2..3 + i % 2).collect::<Vec<_>>(), "batch {i}");
        let stored = s.reads().get_trace(run_id, &trace).await.unwrap().unwrap();
        assert_eq!(stored.span_count, 2, "{run_id}/{trace}");
    }
}

async fn a_batch_for_an_unknown_run_fails_alone(s: S) {
    run(&s, "r1").await;
    let events = [open("t1", "root", None, "rollout", 0)];
    let (known, unknown) = futures::join!(
        s.write_batch("r1", keyed_batch(&events, "k1"), 5_000),
        s.write_batch("nope", keyed_batch(&events, "k2"), 5_000),
    );
    assert!(matches!(known, Ok(Written::Stored(_))), "{known:?}");
    assert!(
        matches!(unknown, Err(StoreError::RunNotFound(_))),
        "{unknown:?}"
    );
    assert_eq!(
        s.reads()
            .get_trace("r1", "t1")
            .await
            .unwrap()
            .unwrap()
            .span_count,
        1
    );
    // The failed batch kept no answer: its key is still free.
    assert!(s.idempotency_get("k2").await.unwrap().is_none());
}

on_both!(tokio::test, |t| t.store.clone();
    a_replayed_batch_stores_nothing_twice,
    batches_racing_with_one_key_write_once,
    racing_batches_to_several_runs_each_get_their_own_answer,
    a_batch_for_an_unknown_run_fails_alone,
);
