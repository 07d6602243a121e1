//! Retention: closed traces past a project's window go, whole, with the run's counts
//! and step activity brought down to match; open traces, traces inside the window
//! and other projects' traces stay; a run left empty goes only when its project
//! drops such runs.

use crate::common::on_both;
use crate::common::{close, open, parsed, with, TestStore};
use serde_json::json;
use treeline_server::store::TraceQuery;
use treeline_wire::annotations::{Author, NoteValue, NoteWrite, Source};
use treeline_wire::retention::{MetricsRule, RetentionPolicy, RetentionPreview};
use treeline_wire::{MetricPoint, RunFinish, RunStatus, RunUpsert};

const DAY: i64 = 86_400_000_000;
/// When retention runs: a one-day window keeps what was updated after day 9.
const NOW: i64 = 10 * DAY;

fn one_day(metrics: MetricsRule) -> RetentionPolicy {
    RetentionPolicy {
        traces_days: 1,
        metrics,
    }
}

async fn new_run(t: &TestStore, run_id: &str, project: &str) {
    let up = RunUpsert {
        project: project.into(),
        name: Some(run_id.into()),
        ..Default::default()
    };
    t.store.upsert_run(run_id, &up, DAY).await.unwrap();
}

/// A trace of `children` spans under a root, closed with `status` (`None`: open).
fn trace(
    id: &str,
    step: Option<i64>,
    children: usize,
    status: Option<&str>,
) -> Vec<serde_json::Value> {
    let mut events = vec![with(
        open(id, "root", None, "rollout", 10),
        json!({"step": step, "attributes": {"reward": 0.5, "family": "algebra"}}),
    )];
    for c in 0..children {
        let span = format!("c{c}");
        events.push(with(
            open(id, &span, Some("root"), "tool", 11),
            json!({"attributes": {"tool": "search"}}),
        ));
        let child_status = if c == 0 && status == Some("recovered") {
            "error"
        } else {
            "ok"
        };
        events.push(close(id, &span, child_status, 12));
    }
    match status {
        Some("recovered") => events.push(close(id, "root", "ok", 13)),
        Some(s) => events.push(close(id, "root", s, 13)),
        None => {}
    }
    events
}

async fn write_at(t: &TestStore, run_id: &str, events: &[serde_json::Value], now: i64) {
    t.store
        .write_events(run_id, parsed(events), now)
        .await
        .unwrap();
}

async fn note(t: &TestStore, run_id: &str, trace_id: &str) {
    let note = NoteWrite {
        span_id: Some("root".into()),
        name: "verdict".into(),
        value: NoteValue::Text("bad".into()),
        comment: None,
    };
    let author = Author {
        key_id: "k".into(),
        name: "k's key".into(),
    };
    t.store
        .annotate(run_id, trace_id, &note, &author, Source::Person, 9 * DAY)
        .await
        .unwrap();
}

/// r1 (proj): five closed traces from day 1 (one failed, one recovered from a
/// failed tool, one of 12 spans, one without a step), one still open from day 1,
/// and two closed traces from day 9.5. r2 (other, no policy): day-1 traces.
async fn fill(t: &TestStore) {
    new_run(t, "r1", "proj").await;
    new_run(t, "r2", "other").await;
    for (id, step, children, status) in [
        ("old-ok", Some(0), 2, Some("ok")),
        ("old-failed", Some(0), 1, Some("error")),
        ("old-recovered", Some(1), 2, Some("recovered")),
        ("old-big", Some(2), 11, Some("ok")),
        ("old-unstepped", None, 1, Some("ok")),
        ("old-open", Some(1), 1, None),
    ] {
        write_at(t, "r1", &trace(id, step, children, status), DAY).await;
        write_at(t, "r2", &trace(id, step, children, status), DAY).await;
    }
    for (id, step) in [("new-a", Some(2)), ("new-b", Some(3))] {
        write_at(t, "r1", &trace(id, step, 2, Some("ok")), 9 * DAY + DAY / 2).await;
    }
    note(t, "r1", "old-ok").await;
    note(t, "r1", "new-a").await;
}

/// The run's stored counts, and the same counted from its traces: retention
/// must keep them equal.
async fn counts(t: &TestStore, run_id: &str) -> (Vec<i64>, Vec<i64>) {
    let stored = [
        "trace_count",
        "errored_count",
        "failed_count",
        "unstepped_count",
        // The run's weight (the size it shows): its traces' and its metric points'.
        "bytes - COALESCE((SELECT SUM(40 + length(m.key)) FROM metric_points m \
          WHERE m.run_id = runs.run_id), 0)",
    ];
    let counted = [
        "COUNT(*)",
        "SUM(CASE WHEN status = 'error' OR error_count > 0 THEN 1 ELSE 0 END)",
        "SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END)",
        "SUM(CASE WHEN step IS NULL THEN 1 ELSE 0 END)",
        "CAST(SUM(bytes) AS BIGINT)",
    ];
    let mut a = Vec::new();
    let mut b = Vec::new();
    for (s, c) in stored.iter().zip(counted) {
        a.push(
            t.count(&format!("SELECT {s} FROM runs WHERE run_id = '{run_id}'"))
                .await,
        );
        b.push(
            t.count(&format!(
                "SELECT COALESCE({c}, 0) FROM traces WHERE run_id = '{run_id}'"
            ))
            .await,
        );
    }
    (a, b)
}

/// Per step: the stored activity and the same counted from the traces, as text.
async fn step_rows(t: &TestStore, run_id: &str) -> (String, String) {
    let steps = t
        .store
        .reads()
        .steps(run_id, None, None)
        .await
        .unwrap()
        .steps;
    let stored: Vec<String> = steps
        .iter()
        .map(|s| format!("{}:{}/{}", s.step, s.traces, s.errored))
        .collect();
    let mut counted = Vec::new();
    for s in &steps {
        let n = t
            .count(&format!(
                "SELECT COUNT(*) FROM traces WHERE run_id = '{run_id}' AND step = {}",
                s.step
            ))
            .await;
        let e = t
            .count(&format!(
                "SELECT COUNT(*) FROM traces WHERE run_id = '{run_id}' AND step = {} \
                 AND (status = 'error' OR error_count > 0)",
                s.step
            ))
            .await;
        counted.push(format!("{}:{n}/{e}", s.step));
    }
    (stored.join(" "), counted.join(" "))
}

async fn traces_of(t: &TestStore, run_id: &str) -> Vec<String> {
    let q = TraceQuery {
        run_id: Some(run_id.into()),
        limit: 100,
        ..Default::default()
    };
    let mut ids: Vec<String> = t
        .store
        .reads()
        .list_traces(&q)
        .await
        .unwrap()
        .traces
        .into_iter()
        .map(|t| t.trace_id)
        .collect();
    ids.sort();
    ids
}

async fn rows_of(t: &TestStore, run_id: &str, table: &str) -> i64 {
    t.count(&format!(
        "SELECT COUNT(*) FROM {table} WHERE run_id = '{run_id}'"
    ))
    .await
}

async fn closed_traces_past_the_window_go_whole_and_the_counts_follow(t: TestStore) {
    fill(&t).await;
    let s = &t.store;
    let policy = one_day(MetricsRule::Keep);
    // 5 closed traces past the window: 3 + 2 + 3 + 12 + 2 spans.
    assert_eq!(
        s.reads()
            .retention_preview("proj", &policy, NOW)
            .await
            .unwrap(),
        RetentionPreview {
            traces: 5,
            spans: 22,
            open_kept: 1,
            runs: 0,
        }
    );
    // Nothing happens without a policy.
    assert_eq!(s.retention_step(3, NOW).await.unwrap(), None);
    s.set_retention("proj", Some(&policy), NOW).await.unwrap();
    let other_spans = rows_of(&t, "r2", "spans").await;

    // Three spans a step: the small traces go whole, the big one over several
    // steps, its spans first; the counts agree with the list after every step.
    let mut steps = 0;
    while let Some(step) = s.retention_step(3, NOW).await.unwrap() {
        assert_eq!(
            (step.project.as_str(), step.run_id.as_str()),
            ("proj", "r1")
        );
        assert!(step.spans <= 3 || step.traces == 1, "{step:?}");
        let (stored, counted) = counts(&t, "r1").await;
        assert_eq!(stored, counted, "after {step:?}");
        let (stored, counted) = step_rows(&t, "r1").await;
        assert_eq!(stored, counted, "after {step:?}");
        steps += 1;
        assert!(steps < 50, "retention does not end");
    }
    assert!(steps >= 6, "{steps} steps");
    assert_eq!(traces_of(&t, "r1").await, ["new-a", "new-b", "old-open"]);
    assert_eq!(counts(&t, "r1").await.0[..4], [3, 0, 0, 0]);
    // Every row of a removed trace went; the kept ones keep theirs.
    assert_eq!(rows_of(&t, "r1", "spans").await, 3 + 3 + 2);
    assert_eq!(rows_of(&t, "r1", "annotations").await, 1);
    assert_eq!(rows_of(&t, "r1", "trace_numbers").await, 3);
    assert_eq!(rows_of(&t, "r1", "trace_texts").await, 3);
    // A kept trace's span strings (the root's family, its children's tool) stay.
    assert_eq!(rows_of(&t, "r1", "span_texts").await, 3 + 3);
    // And their roots' rewards' ranges.
    assert_eq!(rows_of(&t, "r1", "span_ranges").await, 3);
    let (stored, _) = step_rows(&t, "r1").await;
    assert_eq!(stored, "1:1/0 2:1/0 3:1/0");
    // Another project's old traces stay.
    assert_eq!(traces_of(&t, "r2").await.len(), 6);
    assert_eq!(rows_of(&t, "r2", "spans").await, other_spans);
    // The run stays, with its last update as it was.
    let run = s.reads().get_run("r1").await.unwrap().expect("r1 stays");
    assert_eq!(run.summary.updated_us, 9 * DAY + DAY / 2);
    assert_eq!(
        s.reads()
            .retention_preview("proj", &policy, NOW)
            .await
            .unwrap(),
        RetentionPreview {
            open_kept: 1,
            ..Default::default()
        }
    );
}

async fn a_run_left_empty_goes_only_when_its_project_drops_runs(t: TestStore) {
    for (run_id, project) in [("kept", "keeps"), ("dropped", "drops"), ("fresh", "drops")] {
        new_run(&t, run_id, project).await;
        write_at(&t, run_id, &trace("t", Some(0), 1, Some("ok")), DAY).await;
        let points = [MetricPoint {
            key: "reward".into(),
            step: 0,
            value: 1.0,
            ts: None,
        }];
        t.store.write_metrics(run_id, &points).await.unwrap();
        let finish = RunFinish {
            status: RunStatus::Finished,
            end_us: None,
        };
        t.store.finish_run(run_id, &finish, DAY).await.unwrap();
    }
    // Still running, and only logging metrics: never dropped.
    new_run(&t, "logging", "drops").await;
    // A run written to inside the window stays, its old trace gone.
    write_at(
        &t,
        "fresh",
        &trace("u", Some(1), 1, Some("ok")),
        9 * DAY + DAY / 2,
    )
    .await;
    let s = &t.store;
    s.set_retention("keeps", Some(&one_day(MetricsRule::Keep)), NOW)
        .await
        .unwrap();
    let drops = one_day(MetricsRule::Drop);
    s.set_retention("drops", Some(&drops), NOW).await.unwrap();
    let preview = s
        .reads()
        .retention_preview("drops", &drops, NOW)
        .await
        .unwrap();
    assert_eq!((preview.traces, preview.open_kept, preview.runs), (2, 0, 1));

    let mut deleted = Vec::new();
    while let Some(step) = s.retention_step(2_000, NOW).await.unwrap() {
        if step.run_deleted {
            deleted.push(step.run_id);
        }
    }
    while s.purge_step(2_000).await.unwrap().is_some() {}
    assert_eq!(deleted, ["dropped"]);
    assert!(s.reads().get_run("dropped").await.unwrap().is_none());
    assert_eq!(rows_of(&t, "dropped", "metric_points").await, 0);
    let kept = s.reads().get_run("kept").await.unwrap().expect("kept");
    assert_eq!(kept.summary.trace_count, 0);
    assert_eq!(rows_of(&t, "kept", "metric_points").await, 1);
    assert_eq!(traces_of(&t, "fresh").await, ["u"]);
    assert!(s.reads().get_run("logging").await.unwrap().is_some());

    // Cleared, a policy removes nothing more.
    s.set_retention("keeps", None, NOW).await.unwrap();
    let projects = s.reads().list_projects().await.unwrap().projects;
    let policies: Vec<_> = projects
        .iter()
        .map(|p| (p.name.as_str(), p.retention.map(|r| r.metrics)))
        .collect();
    assert!(policies.contains(&("keeps", None)), "{policies:?}");
    assert!(
        policies.contains(&("drops", Some(MetricsRule::Drop))),
        "{policies:?}"
    );
}

on_both!(tokio::test, |t| t;
    closed_traces_past_the_window_go_whole_and_the_counts_follow,
    a_run_left_empty_goes_only_when_its_project_drops_runs,
);
