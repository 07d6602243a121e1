//! The ingest rules of docs/api.md §7: bodies, opens and closes in any order, steps,
//! statuses, token totals, orphans and attributes.

use crate::common::on_both;
use crate::common::{close, open, run, with, write};
use serde_json::json;
use treeline_server::store::{SpanLevel, TraceQuery, TraceSort};
use treeline_wire::{RunFinish, RunStatus, SpanKind, SpanStatus};

use super::S;

async fn bodies_ride_open_and_close_and_merge(s: S) {
    run(&s, "r1").await;
    let o = with(
        open("t1", "root", None, "rollout", 100),
        json!({
        "input": {"episode": 42}, "attributes": {"env": "CartPole", "rollout_id": "ep-42"}, "step": 7}),
    );
    let c = with(
        close("t1", "root", "ok", 300),
        json!({
        "output": "done", "attributes": {"hits": 3}, "metrics": {"reward": 1.5}, "token_count": 11}),
    );
    write(&s, "r1", &[o]).await;
    let running = s
        .reads()
        .get_span("r1", "t1", "root")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(running.node.status, SpanStatus::Running);
    write(&s, "r1", &[c]).await;
    let span = s
        .reads()
        .get_span("r1", "t1", "root")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(span.input, Some(json!({"episode": 42})));
    assert_eq!(span.output, Some(json!("done")));
    assert_eq!(span.attributes.get("env"), Some(&json!("CartPole")));
    assert_eq!(span.attributes.get("hits"), Some(&json!(3)));
    assert_eq!(span.metrics.get("reward"), Some(&json!(1.5)));
    assert_eq!(span.node.duration_us, Some(200));
    let trace = s.reads().get_trace("r1", "t1").await.unwrap().unwrap();
    assert_eq!(trace.status, SpanStatus::Ok);
    assert_eq!(trace.rollout_id.as_deref(), Some("ep-42"));
    assert_eq!(trace.step, Some(7));
    assert_eq!(trace.token_count, 11);
    assert_eq!(trace.attributes.get("hits"), Some(&json!(3)));

    // An input recorded after the open was sent rides the close.
    let late = with(
        close("t1", "tool", "ok", 290),
        json!({"input": {"query": "late"}}),
    );
    write(&s, "r1", &[open("t1", "tool", Some("root"), "tool", 250)]).await;
    write(&s, "r1", &[late]).await;
    let tool = s
        .reads()
        .get_span("r1", "t1", "tool")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tool.input, Some(json!({"query": "late"})));
}

async fn a_close_before_its_open_is_kept_and_merged(s: S) {
    run(&s, "r1").await;
    write(
        &s,
        "r1",
        &[with(
            close("t1", "a", "error", 50),
            json!({"error": {"type": "E", "message": "boom"}}),
        )],
    )
    .await;
    write(
        &s,
        "r1",
        &[
            open("t1", "root", None, "rollout", 0),
            open("t1", "a", Some("root"), "tool", 10),
        ],
    )
    .await;
    let a = s.reads().get_span("r1", "t1", "a").await.unwrap().unwrap();
    assert_eq!(a.node.status, SpanStatus::Error);
    assert_eq!(a.node.start_us, 10);
    assert_eq!(a.node.end_us, Some(50));
    assert_eq!(a.error, Some(json!({"type": "E", "message": "boom"})));
    let root = s
        .reads()
        .get_span("r1", "t1", "root")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        root.node.error_count, 1,
        "the error counts beneath the root"
    );
    assert_eq!(root.node.child_count, 1);
    let trace = s.reads().get_trace("r1", "t1").await.unwrap().unwrap();
    assert_eq!((trace.span_count, trace.error_count), (2, 1));
}

async fn a_second_open_or_close_is_ignored_with_a_warning(s: S) {
    run(&s, "r1").await;
    write(
        &s,
        "r1",
        &[
            open("t1", "root", None, "rollout", 0),
            close("t1", "root", "ok", 9),
        ],
    )
    .await;
    let warnings = write(
        &s,
        "r1",
        &[
            with(
                open("t1", "root", None, "model", 5),
                json!({"name": "other"}),
            ),
            close("t1", "root", "error", 10),
        ],
    )
    .await;
    assert_eq!(warnings.len(), 2);
    assert!(warnings[0].message.contains("already opened"));
    assert!(warnings[1].message.contains("already closed"));
    let root = s
        .reads()
        .get_span("r1", "t1", "root")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (root.node.kind, root.node.status, root.node.end_us),
        (SpanKind::Rollout, SpanStatus::Ok, Some(9))
    );
    let trace = s.reads().get_trace("r1", "t1").await.unwrap().unwrap();
    assert_eq!((trace.span_count, trace.error_count), (1, 0));
}

async fn a_child_without_a_step_inherits_its_parents(s: S) {
    run(&s, "r1").await;
    write(
        &s,
        "r1",
        &[
            with(open("t1", "root", None, "rollout", 0), json!({"step": 12})),
            open("t1", "env", Some("root"), "env_step", 1),
            with(
                open("t1", "own", Some("root"), "env_step", 2),
                json!({"step": 3}),
            ),
        ],
    )
    .await;
    write(
        &s,
        "r1",
        &[open("t1", "grandchild", Some("env"), "model", 3)],
    )
    .await;
    let step = |id: &'static str| {
        let s = s.clone();
        async move {
            s.reads()
                .get_span("r1", "t1", id)
                .await
                .unwrap()
                .unwrap()
                .node
                .step
        }
    };
    assert_eq!(step("env").await, Some(12));
    assert_eq!(step("own").await, Some(3));
    assert_eq!(step("grandchild").await, Some(12));
}

/// Exporters that send spans as they end deliver children before their parent.
async fn descendants_that_arrived_first_inherit_the_step_of_a_late_parent(s: S) {
    run(&s, "r1").await;
    write(
        &s,
        "r1",
        &[
            open("t1", "tool", Some("agent"), "tool", 2),
            open("t1", "leaf", Some("tool"), "model", 3),
            with(
                open("t1", "own", Some("agent"), "env_step", 4),
                json!({"step": 3}),
            ),
            open("t1", "under-own", Some("own"), "model", 5),
        ],
    )
    .await;
    write(
        &s,
        "r1",
        &[
            open("t1", "agent", Some("root"), "agent", 1),
            with(open("t1", "root", None, "rollout", 0), json!({"step": 9})),
        ],
    )
    .await;
    let step = |id: &'static str| {
        let s = s.clone();
        async move {
            s.reads()
                .get_span("r1", "t1", id)
                .await
                .unwrap()
                .unwrap()
                .node
                .step
        }
    };
    assert_eq!(step("agent").await, Some(9));
    assert_eq!(step("tool").await, Some(9));
    assert_eq!(step("leaf").await, Some(9));
    assert_eq!(step("own").await, Some(3));
    assert_eq!(step("under-own").await, Some(3));
    let trace = s.reads().get_trace("r1", "t1").await.unwrap().unwrap();
    assert_eq!(trace.step, Some(9));
}

async fn finishing_a_run_interrupts_running_spans_and_a_later_close_wins(s: S) {
    run(&s, "r1").await;
    write(
        &s,
        "r1",
        &[
            with(open("t1", "root", None, "rollout", 0), json!({"step": 1})),
            open("t1", "a", Some("root"), "tool", 1),
            open("t1", "b", Some("root"), "tool", 2),
            close("t1", "b", "ok", 3),
        ],
    )
    .await;
    assert_eq!(
        s.reads().steps("r1", None, None).await.unwrap().steps[0].running,
        1
    );
    s.finish_run(
        "r1",
        &RunFinish {
            status: RunStatus::Finished,
            end_us: Some(100),
        },
        100,
    )
    .await
    .unwrap();
    let get = |id: &'static str| {
        let s = s.clone();
        async move {
            s.reads()
                .get_span("r1", "t1", id)
                .await
                .unwrap()
                .unwrap()
                .node
                .status
        }
    };
    assert_eq!(get("a").await, SpanStatus::Interrupted);
    assert_eq!(get("b").await, SpanStatus::Ok);
    assert_eq!(
        s.reads()
            .get_trace("r1", "t1")
            .await
            .unwrap()
            .unwrap()
            .status,
        SpanStatus::Interrupted
    );
    let steps = s.reads().steps("r1", None, None).await.unwrap();
    assert_eq!((steps.steps[0].running, steps.totals.running), (0, 0));
    let run = s.reads().get_run("r1").await.unwrap().unwrap();
    assert_eq!(
        (run.summary.status, run.summary.end_us),
        (RunStatus::Finished, Some(100))
    );

    write(
        &s,
        "r1",
        &[close("t1", "a", "ok", 150), close("t1", "root", "ok", 160)],
    )
    .await;
    assert_eq!(get("a").await, SpanStatus::Ok);
    assert_eq!(
        s.reads()
            .get_trace("r1", "t1")
            .await
            .unwrap()
            .unwrap()
            .status,
        SpanStatus::Ok
    );
}

async fn a_roots_status_is_never_changed_by_children(s: S) {
    run(&s, "r1").await;
    write(
        &s,
        "r1",
        &[
            open("t1", "root", None, "rollout", 0),
            open("t1", "a", Some("root"), "agent", 1),
            open("t1", "b", Some("a"), "tool", 2),
            open("t1", "c", Some("b"), "tool", 3),
            close("t1", "c", "error", 4),
            close("t1", "b", "error", 5),
            close("t1", "a", "ok", 6),
            close("t1", "root", "ok", 7),
        ],
    )
    .await;
    let trace = s.reads().get_trace("r1", "t1").await.unwrap().unwrap();
    assert_eq!(trace.status, SpanStatus::Ok);
    assert_eq!(trace.error_count, 2);
    let count = |id: &'static str| {
        let s = s.clone();
        async move {
            s.reads()
                .get_span("r1", "t1", id)
                .await
                .unwrap()
                .unwrap()
                .node
                .error_count
        }
    };
    assert_eq!(count("root").await, 2);
    assert_eq!(count("a").await, 2);
    assert_eq!(count("b").await, 1);
    assert_eq!(count("c").await, 0);
    let run = s.reads().get_run("r1").await.unwrap().unwrap();
    assert_eq!(
        run.summary.error_trace_count, 1,
        "a trace with a failure beneath counts as errored"
    );
    assert_eq!(
        run.summary.failed_trace_count, 0,
        "but its root did not fail"
    );
    // A root that fails counts as failed, once, and a later close does not move it.
    write(
        &s,
        "r1",
        &[
            open("t2", "root", None, "agent", 10),
            close("t2", "root", "error", 11),
        ],
    )
    .await;
    write(&s, "r1", &[close("t2", "root", "error", 12)]).await;
    let run = s.reads().get_run("r1").await.unwrap().unwrap();
    assert_eq!(
        (
            run.summary.error_trace_count,
            run.summary.failed_trace_count
        ),
        (2, 1)
    );
}

async fn token_count_sums_the_tree_unless_the_root_sets_its_own(s: S) {
    run(&s, "r1").await;
    let tokens = |id: &str, n: i64| with(close("t1", id, "ok", 9), json!({"token_count": n}));
    write(
        &s,
        "r1",
        &[
            open("t1", "root", None, "agent", 0),
            open("t1", "m1", Some("root"), "model", 1),
            open("t1", "m2", Some("root"), "model", 2),
            tokens("m1", 10),
            tokens("m2", 32),
        ],
    )
    .await;
    assert_eq!(
        s.reads()
            .get_trace("r1", "t1")
            .await
            .unwrap()
            .unwrap()
            .token_count,
        42
    );
    write(
        &s,
        "r1",
        &[
            open("t2", "root", None, "agent", 0),
            open("t2", "m", Some("root"), "model", 1),
            with(close("t2", "m", "ok", 2), json!({"token_count": 5})),
            with(close("t2", "root", "ok", 3), json!({"token_count": 100})),
        ],
    )
    .await;
    assert_eq!(
        s.reads()
            .get_trace("r1", "t2")
            .await
            .unwrap()
            .unwrap()
            .token_count,
        100
    );
    // Counts a client sends can be as large as an i64: the sum saturates instead
    // of wrapping (or failing the group), and sorting by tokens still works.
    write(
        &s,
        "r1",
        &[
            open("t3", "root", None, "agent", 0),
            open("t3", "m1", Some("root"), "model", 1),
            open("t3", "m2", Some("root"), "model", 2),
            with(close("t3", "m1", "ok", 9), json!({"token_count": i64::MAX})),
            with(close("t3", "m2", "ok", 9), json!({"token_count": i64::MAX})),
        ],
    )
    .await;
    let by_tokens = s
        .reads()
        .list_traces(&TraceQuery {
            run_id: Some("r1".into()),
            sort: TraceSort::Tokens,
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let tokens: Vec<i64> = by_tokens.traces.iter().map(|t| t.token_count).collect();
    assert_eq!(tokens, vec![i64::MAX, 100, 42]);
}

async fn children_out_of_order_are_orphans_until_their_parent_arrives(s: S) {
    run(&s, "r1").await;
    write(
        &s,
        "r1",
        &[
            open("t1", "root", None, "rollout", 0),
            open("t1", "c", Some("mid"), "tool", 5),
        ],
    )
    .await;
    let roots = s
        .reads()
        .list_spans("r1", "t1", &SpanLevel::after(None, 100, None))
        .await
        .unwrap();
    let ids: Vec<_> = roots
        .spans
        .iter()
        .map(|n| (n.span_id.as_str(), n.orphan))
        .collect();
    assert_eq!(ids, vec![("root", false), ("c", true)]);
    write(&s, "r1", &[open("t1", "mid", Some("root"), "agent", 1)]).await;
    let roots = s
        .reads()
        .list_spans("r1", "t1", &SpanLevel::after(None, 100, None))
        .await
        .unwrap();
    assert_eq!(roots.spans.len(), 1);
    let under_mid = s
        .reads()
        .list_spans("r1", "t1", &SpanLevel::after(Some("mid"), 100, None))
        .await
        .unwrap();
    assert_eq!(under_mid.spans[0].span_id, "c");
    assert!(!under_mid.spans[0].orphan);
    let c = s.reads().get_span("r1", "t1", "c").await.unwrap().unwrap();
    assert_eq!(c.path, vec!["root".to_string(), "mid".to_string()]);
    let root = s
        .reads()
        .list_spans("r1", "t1", &SpanLevel::after(None, 100, None))
        .await
        .unwrap()
        .spans
        .remove(0);
    assert_eq!(root.child_count, 1);
}

async fn attributes_keep_the_first_256_in_the_order_set_and_count_a_name_once(s: S) {
    run(&s, "r1").await;
    // The open sets 200 names, in reverse alphabetical order.
    let opened: serde_json::Map<String, serde_json::Value> = (0..200)
        .map(|i| (format!("n{:03}", 299 - i), json!(i)))
        .collect();
    let o = with(
        open("t1", "s", None, "tool", 10),
        json!({ "attributes": opened }),
    );
    write(&s, "r1", &[o]).await;
    // The close, in a later batch, sets 100 new names and 100 of the open's again:
    // 56 of the new fit, the first given.
    let mut closed = serde_json::Map::new();
    for i in 0..100 {
        closed.insert(format!("z{i:03}"), json!(i));
    }
    for i in 0..100 {
        closed.insert(format!("n{:03}", 299 - i), json!(-i));
    }
    let c = with(close("t1", "s", "ok", 20), json!({ "attributes": closed }));
    let warnings = write(&s, "r1", &[c]).await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .message
            .contains("44 attributes past the first 256"),
        "{warnings:?}"
    );
    let span = s.reads().get_span("r1", "t1", "s").await.unwrap().unwrap();
    assert_eq!(span.attributes.len(), 256);
    assert_eq!(
        span.attributes.get("n298"),
        Some(&json!(-1)),
        "the close's value wins"
    );
    assert_eq!(span.attributes.get("n100"), Some(&json!(199)));
    assert!(span.attributes.contains_key("z055") && !span.attributes.contains_key("z056"));

    // In one batch too, a name set on the open and again on the close counts once.
    let all: serde_json::Map<String, serde_json::Value> =
        (0..256).map(|i| (format!("k{i:03}"), json!(i))).collect();
    let o = with(
        open("t2", "s", None, "tool", 10),
        json!({ "attributes": all.clone() }),
    );
    let c = with(close("t2", "s", "ok", 20), json!({ "attributes": all }));
    assert!(write(&s, "r1", &[o, c]).await.is_empty());
    let span = s.reads().get_span("r1", "t2", "s").await.unwrap().unwrap();
    assert_eq!(span.attributes.len(), 256);
}

on_both!(tokio::test, |t| t.store.clone();
    bodies_ride_open_and_close_and_merge,
    a_close_before_its_open_is_kept_and_merged,
    a_second_open_or_close_is_ignored_with_a_warning,
    a_child_without_a_step_inherits_its_parents,
    descendants_that_arrived_first_inherit_the_step_of_a_late_parent,
    finishing_a_run_interrupts_running_spans_and_a_later_close_wins,
    a_roots_status_is_never_changed_by_children,
    token_count_sums_the_tree_unless_the_root_sets_its_own,
    children_out_of_order_are_orphans_until_their_parent_arrives,
    attributes_keep_the_first_256_in_the_order_set_and_count_a_name_once,
);
