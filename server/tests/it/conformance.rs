//! One storage conformance suite, run against SQLite and PostgreSQL: the ingest rules
//! and reads of docs/api.md, seen through the `Store` traits.

use std::collections::HashSet;
use std::sync::Arc;

use crate::common::on_both;
use crate::common::{close, open, parsed, run, with, write};
use serde_json::json;
use treeline_server::store::{
    Cursor, EventBatch, LevelStart, Receipt, SpanLevel, Store, StoreError, TraceQuery, TraceSort,
    Written,
};
use treeline_wire::filter::TraceFilter;
use treeline_wire::{
    BatchResponse, MetricPoint, RunFinish, RunStatus, RunUpsert, SpanKind, SpanPage, SpanStatus,
};

type S = Arc<dyn Store>;

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

async fn a_ten_thousand_span_trace_pages_its_children_in_arrival_order(s: S) {
    run(&s, "r1").await;
    let mut events = vec![open("big", "root", None, "rollout", 0)];
    for i in 0..10_000 {
        let id = format!("s{i:05}");
        // Out of order on purpose: later starts first in the batch.
        events.push(open("big", &id, Some("root"), "env_step", 20_000 - i));
        events.push(close(
            "big",
            &id,
            if i % 1000 == 0 { "error" } else { "ok" },
            30_000,
        ));
    }
    for chunk in events.chunks(5_000) {
        write(&s, "r1", chunk).await;
    }
    let trace = s.reads().get_trace("r1", "big").await.unwrap().unwrap();
    assert_eq!((trace.span_count, trace.error_count), (10_001, 10));
    let mut seen = HashSet::new();
    let mut cursor: Option<Cursor> = None;
    loop {
        let page = s
            .reads()
            .list_spans(
                "r1",
                "big",
                &SpanLevel::after(Some("root"), 1_000, cursor.as_ref()),
            )
            .await
            .unwrap();
        for n in &page.spans {
            // No ordinal was sent, so children come as they arrived, not by start.
            let at = seen.len();
            assert_eq!(
                n.span_id,
                format!("s{at:05}"),
                "children come in arrival order"
            );
            assert_eq!(n.ordinal, at as i64);
            assert!(seen.insert(n.span_id.clone()), "no span twice");
        }
        match page.next_cursor {
            Some(c) => cursor = Some(Cursor::decode(&c).unwrap()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 10_000);
    jumps_within_a_large_level(&s).await;
    let root = s
        .reads()
        .get_span("r1", "big", "root")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((root.node.child_count, root.node.error_count), (10_000, 10));
}

/// One page of `big`'s children of `root`.
async fn big_page(
    s: &S,
    start: LevelStart<'_>,
    name: Option<&str>,
    limit: usize,
) -> Result<SpanPage, StoreError> {
    let level = SpanLevel {
        parent: Some("root"),
        name,
        start,
        limit,
    };
    s.reads().list_spans("r1", "big", &level).await
}

/// A reader jumps to child N, to the page around a child, and to the children
/// whose name holds a few letters (`big`'s 10,000 children s00000…s09999).
async fn jumps_within_a_large_level(s: &S) {
    let ids =
        |page: &SpanPage| -> Vec<String> { page.spans.iter().map(|n| n.span_id.clone()).collect() };
    let at = big_page(s, LevelStart::At(9_990), None, 5).await.unwrap();
    assert_eq!(ids(&at), ["s09990", "s09991", "s09992", "s09993", "s09994"]);
    assert_eq!(at.from, Some(9_990));
    // The page's cursor goes on from there.
    let cursor = Cursor::decode(at.next_cursor.as_deref().unwrap()).unwrap();
    let next = big_page(s, LevelStart::After(Some(&cursor)), None, 100)
        .await
        .unwrap();
    assert_eq!(next.spans.len(), 5);
    assert_eq!(
        (next.spans[0].span_id.as_str(), next.from),
        ("s09995", None)
    );
    let past = big_page(s, LevelStart::At(20_000), None, 5).await.unwrap();
    assert!(past.spans.is_empty() && past.next_cursor.is_none());

    // Around a child: it sits mid-page, and the page says where it starts.
    let around = big_page(s, LevelStart::Around("s05000"), None, 10)
        .await
        .unwrap();
    assert_eq!(around.from, Some(4_995));
    assert_eq!(around.spans[5].span_id, "s05000");
    let first = big_page(s, LevelStart::Around("s00002"), None, 10)
        .await
        .unwrap();
    assert_eq!(
        (first.from, first.spans[2].span_id.as_str()),
        (Some(0), "s00002")
    );
    let missing = big_page(s, LevelStart::Around("root"), None, 10).await;
    assert!(
        matches!(missing, Err(StoreError::NotListed { ref span_id }) if span_id == "root"),
        "a span that is not a child: {missing:?}"
    );

    // By name, case ignored, with `%` and `_` taken literally.
    let named = big_page(s, LevelStart::After(None), Some("S0999"), 4)
        .await
        .unwrap();
    assert_eq!(ids(&named), ["s09990", "s09991", "s09992", "s09993"]);
    let cursor = Cursor::decode(named.next_cursor.as_deref().unwrap()).unwrap();
    let rest = big_page(s, LevelStart::After(Some(&cursor)), Some("s0999"), 100)
        .await
        .unwrap();
    assert_eq!(rest.spans.len(), 6);
    assert!(rest.next_cursor.is_none());
    let within = big_page(s, LevelStart::Around("s09995"), Some("s0999"), 4)
        .await
        .unwrap();
    assert_eq!(
        (within.from, within.spans[2].span_id.as_str()),
        (Some(3), "s09995")
    );
    for literal in ["s0%", "s_0001"] {
        let none = big_page(s, LevelStart::After(None), Some(literal), 10)
            .await
            .unwrap();
        assert!(none.spans.is_empty(), "{literal} is matched literally");
    }
}

async fn child_ids(s: &S, trace: &str, parent: Option<&str>, limit: usize) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    let mut cursor: Option<Cursor> = None;
    loop {
        let page = s
            .reads()
            .list_spans(
                "r1",
                trace,
                &SpanLevel::after(parent, limit, cursor.as_ref()),
            )
            .await
            .unwrap();
        out.extend(page.spans.into_iter().map(|n| (n.span_id, n.ordinal)));
        match page.next_cursor {
            Some(c) => cursor = Some(Cursor::decode(&c).unwrap()),
            None => return out,
        }
    }
}

async fn siblings_list_in_the_clients_order_or_else_in_arrival_order(s: S) {
    run(&s, "r1").await;
    // Five siblings opened in one microsecond, numbered by the client, arriving in
    // another order: they list as numbered, on every page size.
    let mut events = vec![open("t1", "root", None, "rollout", 100)];
    let created = ["d", "b", "e", "a", "c"];
    for (i, id) in created.iter().enumerate() {
        events.push(with(
            open("t1", id, Some("root"), "tool", 200),
            json!({"ordinal": i}),
        ));
    }
    events.swap(1, 4);
    events.swap(2, 5);
    write(&s, "r1", &events).await;
    for limit in [1, 2, 5] {
        let got = child_ids(&s, "t1", Some("root"), limit).await;
        let want: Vec<(String, i64)> = created
            .iter()
            .enumerate()
            .map(|(i, id)| (id.to_string(), i as i64))
            .collect();
        assert_eq!(got, want, "pages of {limit}");
    }

    // Without numbers, siblings take their order of arrival, across batches and
    // before their parent has arrived.
    for id in ["z", "y", "x"] {
        write(&s, "r1", &[open("t2", id, Some("root"), "tool", 50)]).await;
    }
    write(&s, "r1", &[open("t2", "root", None, "rollout", 10)]).await;
    let got = child_ids(&s, "t2", Some("root"), 2).await;
    assert_eq!(
        got,
        [
            ("z".to_string(), 0),
            ("y".to_string(), 1),
            ("x".to_string(), 2)
        ]
    );
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

/// Batches racing to several runs (SQLite folds them into shared transactions) are
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

async fn step_activity_counts_traces_per_step_and_the_unstepped(s: S) {
    run(&s, "r1").await;
    for (i, (step, status)) in [
        (Some(1), "ok"),
        (Some(1), "error"),
        (Some(2), "ok"),
        (None, "ok"),
    ]
    .iter()
    .enumerate()
    {
        let t = format!("t{i}");
        let mut o = open(&t, "root", None, "rollout", 0);
        if let Some(step) = step {
            o = with(o, json!({"step": step}));
        }
        write(&s, "r1", &[o, close(&t, "root", status, 1)]).await;
    }
    write(
        &s,
        "r1",
        &[with(
            open("t9", "root", None, "rollout", 0),
            json!({"step": 2}),
        )],
    )
    .await;
    let steps = s.reads().steps("r1", None, None).await.unwrap();
    let got: Vec<_> = steps
        .steps
        .iter()
        .map(|a| (a.step, a.traces, a.errored, a.running))
        .collect();
    assert_eq!(got, vec![(1, 2, 1, 0), (2, 2, 0, 1)]);
    assert_eq!(
        (
            steps.totals.traces,
            steps.totals.errored,
            steps.totals.running,
            steps.totals.unstepped
        ),
        (5, 1, 1, 1)
    );
    assert_eq!(
        (steps.totals.min_step, steps.totals.max_step),
        (Some(1), Some(2))
    );
    assert!(!steps.truncated);
    let only_two = s.reads().steps("r1", Some(2), Some(2)).await.unwrap();
    assert_eq!(only_two.steps.len(), 1);
}

async fn runs_are_created_once_and_keep_their_project(s: S) {
    let up = RunUpsert {
        project: "a".into(),
        name: Some("first".into()),
        config: Some(json!({"lr": 0.1})),
        start_us: Some(10),
    };
    assert!(s.upsert_run("r1", &up, 1).await.unwrap());
    assert!(!s
        .upsert_run(
            "r1",
            &RunUpsert {
                name: Some("renamed".into()),
                ..up.clone()
            },
            2
        )
        .await
        .unwrap());
    let conflict = s
        .upsert_run(
            "r1",
            &RunUpsert {
                project: "b".into(),
                ..up.clone()
            },
            3,
        )
        .await;
    assert!(matches!(conflict, Err(StoreError::ProjectConflict { .. })));
    let run = s.reads().get_run("r1").await.unwrap().unwrap();
    assert_eq!(
        (run.summary.name.as_str(), run.config.clone()),
        ("renamed", json!({"lr": 0.1}))
    );
    let missing = s.write_events("nope", vec![], 1).await;
    assert!(matches!(missing, Err(StoreError::RunNotFound(_))));
    assert!(s.reads().get_run("nope").await.unwrap().is_none());
}

async fn metrics_are_kept_by_step_and_read_in_order(s: S) {
    run(&s, "r1").await;
    let p = |step, value| MetricPoint {
        key: "train/loss".into(),
        step,
        value,
        ts: None,
    };
    s.write_metrics("r1", &[p(3, 0.3), p(1, 0.9), p(2, 0.5)])
        .await
        .unwrap();
    s.write_metrics("r1", &[p(2, 0.4)]).await.unwrap();
    assert_eq!(
        s.reads().metric_series("r1", "train/loss").await.unwrap(),
        vec![(1, 0.9), (2, 0.4), (3, 0.3)]
    );
    assert_eq!(
        s.reads().get_run("r1").await.unwrap().unwrap().metric_keys,
        vec!["train/loss".to_string()]
    );
}

async fn a_batch_repeating_a_key_and_step_keeps_the_last_value(s: S) {
    run(&s, "r1").await;
    let p = |step, value| MetricPoint {
        key: "reward".into(),
        step,
        value,
        ts: None,
    };
    // A loop that logs once per micro-batch repeats (key, step) in one request.
    s.write_metrics("r1", &[p(1, 0.1), p(2, 0.2), p(1, 0.3), p(1, 0.5)])
        .await
        .unwrap();
    assert_eq!(
        s.reads().metric_series("r1", "reward").await.unwrap(),
        vec![(1, 0.5), (2, 0.2)]
    );
}

async fn racing_creations_of_one_run_create_it_once(s: S) {
    let up = |project: &str| RunUpsert {
        project: project.into(),
        ..Default::default()
    };
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = s.clone();
        let project = if i % 2 == 0 { "a" } else { "b" };
        let run = up(project);
        tasks.push(tokio::spawn(async move {
            (project, s.upsert_run("r1", &run, 1).await)
        }));
    }
    let mut created = Vec::new();
    let mut conflicts = 0;
    let mut updated = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            (project, Ok(true)) => created.push(project),
            (project, Ok(false)) => updated.push(project),
            (_, Err(StoreError::ProjectConflict { .. })) => conflicts += 1,
            (_, Err(e)) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!(created.len(), 1, "exactly one request creates the run");
    let winner = created[0];
    let stored = s
        .reads()
        .get_run("r1")
        .await
        .unwrap()
        .unwrap()
        .summary
        .project;
    assert_eq!(stored, winner);
    // Every other request of the winner's project updates; the other project's
    // requests all answer a conflict.
    assert_eq!(updated.len(), 3);
    assert!(updated.iter().all(|p| *p == winner));
    assert_eq!(conflicts, 4);
}

async fn trace_lists_filter_search_and_page_without_duplicates(s: S) {
    run(&s, "r1").await;
    run(&s, "r2").await;
    for i in 0..30 {
        let t = format!("trace{i:02}");
        let name = if i % 3 == 0 {
            format!("rollout.step{i}.g2")
        } else {
            format!("eval {i}")
        };
        let kind = if i % 2 == 0 { "rollout" } else { "evaluator" };
        let o = with(
            open(&t, "root", None, kind, i),
            json!({"name": name, "step": i, "thread_id": format!("worker-{}", i % 4)}),
        );
        write(
            &s,
            "r1",
            &[
                o,
                close(
                    &t,
                    "root",
                    if i % 5 == 0 { "error" } else { "ok" },
                    100 + 2 * i,
                ),
            ],
        )
        .await;
    }
    write(&s, "r2", &[open("other", "root", None, "rollout", 0)]).await;
    let base = TraceQuery {
        run_id: Some("r1".into()),
        limit: 50,
        ..Default::default()
    };
    assert_eq!(s.reads().list_traces(&base).await.unwrap().traces.len(), 30);
    let errors = TraceQuery {
        statuses: vec![SpanStatus::Error],
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&errors).await.unwrap().traces.len(),
        6
    );
    let kinds = TraceQuery {
        kinds: SpanKind::bits_of(&[SpanKind::Evaluator]),
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&kinds).await.unwrap().traces.len(),
        15
    );
    let search = TraceQuery {
        terms: vec!["ROLLOUT".into(), "step".into()],
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&search).await.unwrap().traces.len(),
        10
    );
    let by_thread = TraceQuery {
        terms: vec!["worker-1".into()],
        ..base.clone()
    };
    assert_eq!(
        s.reads()
            .list_traces(&by_thread)
            .await
            .unwrap()
            .traces
            .len(),
        8
    );
    let by_id = TraceQuery {
        terms: vec!["trace2".into()],
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&by_id).await.unwrap().traces.len(),
        10
    );
    let pinned = TraceQuery {
        min_step: Some(7),
        max_step: Some(7),
        ..base.clone()
    };
    let pinned = s.reads().list_traces(&pinned).await.unwrap().traces;
    assert_eq!((pinned.len(), pinned[0].trace_id.as_str()), (1, "trace07"));
    let everywhere = TraceQuery {
        limit: 100,
        ..Default::default()
    };
    assert_eq!(
        s.reads()
            .list_traces(&everywhere)
            .await
            .unwrap()
            .traces
            .len(),
        31
    );

    for sort in [
        TraceSort::Updated,
        TraceSort::Duration,
        TraceSort::Spans,
        TraceSort::Errors,
    ] {
        for ascending in [false, true] {
            let mut seen = Vec::new();
            let mut query = TraceQuery {
                limit: 7,
                sort: sort.clone(),
                ascending,
                ..base.clone()
            };
            loop {
                let page = s.reads().list_traces(&query).await.unwrap();
                seen.extend(page.traces.iter().map(|t| t.trace_id.clone()));
                match page.next_cursor {
                    Some(c) => query.cursor = Some(Cursor::decode(&c).unwrap()),
                    None => break,
                }
            }
            let unique: HashSet<_> = seen.iter().collect();
            assert_eq!(
                (seen.len(), unique.len()),
                (30, 30),
                "{sort:?} ascending={ascending}"
            );
        }
    }
    let by_duration = TraceQuery {
        sort: TraceSort::Duration,
        limit: 1,
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&by_duration).await.unwrap().traces[0].trace_id,
        "trace29"
    );
}

/// Search resolves its terms through the name list and the id-prefix indexes: a term
/// finds what a scan would, in the scope asked for, and one that matches nothing
/// anywhere answers an empty list.
async fn search_finds_names_and_id_prefixes_in_scope(s: S) {
    let in_project = |project: &str| RunUpsert {
        project: project.into(),
        ..Default::default()
    };
    s.upsert_run("r1", &in_project("alpha"), 1).await.unwrap();
    s.upsert_run("r2", &in_project("alpha"), 1).await.unwrap();
    s.upsert_run("r3", &in_project("beta"), 1).await.unwrap();
    let root = |trace: &str, name: &str, extra: serde_json::Value| {
        let named = with(
            open(trace, "root", None, "rollout", 10),
            json!({ "name": name }),
        );
        with(named, extra)
    };
    write(
        &s,
        "r1",
        &[
            root("ABCdef01", "Math rollout", json!({"thread_id": "Worker-7"})),
            root(
                "t-2",
                "math rollout",
                json!({"attributes": {"rollout_id": "Prompt-0042"}}),
            ),
            root("t-3", "100% done", json!({})),
        ],
    )
    .await;
    // A child first: the trace is listed under a placeholder name until its root
    // names it.
    write(&s, "r2", &[open("late", "c", Some("root"), "tool", 5)]).await;
    write(&s, "r2", &[root("late", "late root", json!({}))]).await;
    write(&s, "r3", &[root("t-9", "rare beta name", json!({}))]).await;

    let found = |project: Option<&str>, run: Option<&str>, terms: &[&str]| {
        let query = TraceQuery {
            project: project.map(Into::into),
            run_id: run.map(Into::into),
            terms: terms.iter().map(|t| t.to_string()).collect(),
            limit: 1,
            ..Default::default()
        };
        let s = s.clone();
        async move {
            let mut ids = every_page(&s, query).await;
            ids.sort();
            ids
        }
    };
    let alpha = Some("alpha");
    assert_eq!(
        found(alpha, None, &["nothing-here"]).await,
        Vec::<String>::new()
    );
    assert_eq!(found(alpha, None, &["abcD"]).await, ["ABCdef01"]);
    assert_eq!(found(alpha, None, &["worker-"]).await, ["ABCdef01"]);
    assert_eq!(found(alpha, None, &["prompt-00"]).await, ["t-2"]);
    assert_eq!(found(alpha, None, &["ROLLOUT"]).await, ["ABCdef01", "t-2"]);
    assert_eq!(found(alpha, None, &["rollout", "t-"]).await, ["t-2"]);
    assert_eq!(found(alpha, None, &["late root"]).await, ["late"]);
    // Wildcards are literal: `%` only in a name that has one, `_` nowhere.
    assert_eq!(found(alpha, None, &["0%"]).await, ["t-3"]);
    assert_eq!(found(alpha, None, &["t_"]).await, Vec::<String>::new());
    // Scope: another project's name, another run's id.
    assert_eq!(found(alpha, None, &["rare"]).await, Vec::<String>::new());
    assert_eq!(found(None, None, &["rare"]).await, ["t-9"]);
    assert_eq!(found(Some("beta"), None, &["t-"]).await, ["t-9"]);
    assert_eq!(
        found(None, Some("r1"), &["late"]).await,
        Vec::<String>::new()
    );
    assert_eq!(found(None, Some("r2"), &["late"]).await, ["late"]);

    // More ids than the search lists: the term is matched trace by trace, and the
    // pages still hold each match once.
    let many: Vec<_> = (0..600)
        .map(|i| open(&format!("bulk-{i:03}"), "root", None, "rollout", i))
        .collect();
    write(&s, "r1", &many).await;
    let query = TraceQuery {
        project: Some("alpha".into()),
        terms: vec!["BULK-".into()],
        limit: 250,
        ..Default::default()
    };
    let ids = every_page(&s, query).await;
    assert_eq!(ids.len(), 600);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 600);
}

async fn missing_things_are_none_never_another(s: S) {
    run(&s, "r1").await;
    write(&s, "r1", &[open("t1", "root", None, "rollout", 0)]).await;
    assert!(s
        .reads()
        .get_span("r1", "t1", "nope")
        .await
        .unwrap()
        .is_none());
    assert!(s
        .reads()
        .get_span("r1", "t2", "root")
        .await
        .unwrap()
        .is_none());
    assert!(s.reads().get_trace("r1", "t2").await.unwrap().is_none());
    // A span named only as a parent is a placeholder, not a span.
    write(&s, "r1", &[open("t1", "kid", Some("ghost"), "tool", 1)]).await;
    assert!(s
        .reads()
        .get_span("r1", "t1", "ghost")
        .await
        .unwrap()
        .is_none());
}

/// Twelve traces of one run with root attributes of every type, three of them with
/// a failed child under a root that recovered.
async fn attribute_run(s: &S) {
    run(s, "r1").await;
    for i in 0..12i64 {
        let t = format!("t{i:02}");
        let mut attributes = json!({
            "task": if i % 2 == 0 { "math word" } else { "code" },
            "solved": i % 3 == 0,
        });
        if i == 0 {
            // An integer, as a JSON encoder may write 0.0: it sorts among the reals.
            attributes["reward"] = json!(0);
        } else if i < 10 {
            attributes["reward"] = json!(i as f64 / 10.0);
        } else if i == 10 {
            attributes["reward"] = json!("high");
        }
        let mut events = vec![with(
            open(&t, "root", None, "rollout", i * 10),
            json!({"step": i, "attributes": attributes}),
        )];
        if i % 4 == 1 {
            events.push(open(&t, "tool", Some("root"), "tool", i * 10 + 1));
            events.push(close(&t, "tool", "error", i * 10 + 2));
        }
        events.push(close(&t, "root", "ok", i * 10 + 5));
        write(s, "r1", &events).await;
    }
}

/// The trace ids (their numbers) a list with `filters` gives, in id order.
async fn matching(s: &S, filters: &[&str]) -> Vec<i64> {
    let query = TraceQuery {
        run_id: Some("r1".into()),
        filters: filters
            .iter()
            .map(|f| TraceFilter::parse(f).expect("a valid filter"))
            .collect(),
        limit: 100,
        ..Default::default()
    };
    let mut ids: Vec<i64> = s
        .reads()
        .list_traces(&query)
        .await
        .expect("list")
        .traces
        .iter()
        .map(|t| t.trace_id[1..].parse().expect("a number"))
        .collect();
    ids.sort_unstable();
    ids
}

async fn filters_compare_totals_and_root_attributes_by_type(s: S) {
    attribute_run(&s).await;
    let cases: &[(&[&str], &[i64])] = &[
        (&["attr.reward < 0.5"], &[0, 1, 2, 3, 4]),
        (&["attr.reward >= 0.5"], &[5, 6, 7, 8, 9]),
        (&["attr.reward > 0.25", "attr.reward <= 0.4"], &[3, 4]),
        // A number never equals a string, either way round.
        (&["attr.reward != 0.3"], &[0, 1, 2, 4, 5, 6, 7, 8, 9]),
        (&["attr.reward = high"], &[10]),
        (&["attr.reward > \"a\""], &[10]),
        (&["attr.reward exists"], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
        (&["attr.missing exists"], &[]),
        (&["attr.missing < 1"], &[]),
        (&["attr.task = \"math word\""], &[0, 2, 4, 6, 8, 10]),
        (&["attr.task < d"], &[1, 3, 5, 7, 9, 11]),
        (&["attr.task = 1"], &[]),
        (&["attr.solved = true"], &[0, 3, 6, 9]),
        (&["attr.solved != true"], &[1, 2, 4, 5, 7, 8, 10, 11]),
        (&["attr.solved = false", "attr.task = code"], &[1, 5, 7, 11]),
        // Failed beneath, though every root recovered.
        (&["error_count > 0"], &[1, 5, 9]),
        (&["error_count > 0", "attr.reward < 0.5"], &[1]),
        (&["span_count >= 2"], &[1, 5, 9]),
        (&["step >= 5", "step <= 8"], &[5, 6, 7, 8]),
        (&["step = 3"], &[3]),
        (
            &["duration_us = 5"],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        ),
        (&["rank exists"], &[]),
        (&["error_count = \"1\""], &[]),
        (&["error_count != true"], &[]),
    ];
    for (filters, want) in cases {
        assert_eq!(&matching(&s, filters).await, want, "{filters:?}");
    }
    // Filters combine with the other criteria and page without repeats or gaps.
    let mut query = TraceQuery {
        run_id: Some("r1".into()),
        statuses: vec![SpanStatus::Ok],
        filters: vec![TraceFilter::parse("attr.reward exists").expect("valid")],
        sort: TraceSort::Errors,
        limit: 3,
        ..Default::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = s.reads().list_traces(&query).await.expect("page");
        seen.extend(page.traces.iter().map(|t| t.trace_id.clone()));
        match page.next_cursor {
            Some(c) => query.cursor = Some(Cursor::decode(&c).expect("cursor")),
            None => break,
        }
    }
    assert_eq!(seen.len(), 11);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 11);
    assert_eq!(
        &seen[..3],
        ["t09", "t05", "t01"],
        "errors first, then ids descending"
    );
}

async fn traces_sort_by_a_numeric_attribute_and_page_without_gaps(s: S) {
    attribute_run(&s).await;
    // A reward that was a number and then is not: it sorts with the traces that lack one.
    let numbered = with(
        open("t12", "root", None, "rollout", 200),
        json!({"attributes": {"reward": 0.95}}),
    );
    write(&s, "r1", &[numbered]).await;
    let unnumbered = with(
        close("t12", "root", "ok", 205),
        json!({"attributes": {"reward": "n/a"}}),
    );
    write(&s, "r1", &[unnumbered]).await;
    let numbers = [
        "t00", "t01", "t02", "t03", "t04", "t05", "t06", "t07", "t08", "t09",
    ];
    for ascending in [false, true] {
        // Numbers in order, then the rest by last update, the same way round.
        let mut want: Vec<&str> = numbers.to_vec();
        let mut rest = vec!["t10", "t11", "t12"];
        if !ascending {
            want.reverse();
            rest.reverse();
        }
        want.extend(rest);
        // Pages that end inside the numbers, exactly at their end, and past it.
        for limit in [1, 3, 4, 5, 10, 11, 13, 50] {
            let query = TraceQuery {
                run_id: Some("r1".into()),
                sort: TraceSort::Attr("reward".into()),
                ascending,
                limit,
                ..Default::default()
            };
            let seen = every_page(&s, query).await;
            assert_eq!(seen, want, "ascending: {ascending}, limit {limit}");
        }
        // A range on the sort's own attribute, across every project.
        let query = TraceQuery {
            sort: TraceSort::Attr("reward".into()),
            filters: vec![TraceFilter::parse("attr.reward < 0.35").expect("valid")],
            ascending,
            limit: 2,
            ..Default::default()
        };
        let mut want = vec!["t00", "t01", "t02", "t03"];
        if !ascending {
            want.reverse();
        }
        assert_eq!(every_page(&s, query).await, want, "ascending: {ascending}");
    }
    // With a filter, and a key that no trace has: every trace, by id.
    let query = TraceQuery {
        run_id: Some("r1".into()),
        sort: TraceSort::Attr("nope".into()),
        filters: vec![TraceFilter::parse("error_count > 0").expect("valid")],
        limit: 10,
        ..Default::default()
    };
    let ids: Vec<String> = s
        .reads()
        .list_traces(&query)
        .await
        .expect("list")
        .traces
        .into_iter()
        .map(|t| t.trace_id)
        .collect();
    assert_eq!(ids, ["t09", "t05", "t01"]);
}

/// The trace ids of every page of `query`, following its cursors.
async fn every_page(s: &S, mut query: TraceQuery) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let page = s.reads().list_traces(&query).await.expect("page");
        seen.extend(page.traces.into_iter().map(|t| t.trace_id));
        match page.next_cursor {
            Some(c) => query.cursor = Some(Cursor::decode(&c).expect("cursor")),
            None => return seen,
        }
    }
}

async fn a_first_page_counts_its_matches(s: S) {
    attribute_run(&s).await;
    let page = |filters: &[&str], limit: usize, cursor: Option<Cursor>| TraceQuery {
        run_id: Some("r1".into()),
        filters: filters
            .iter()
            .map(|f| TraceFilter::parse(f).expect("a valid filter"))
            .collect(),
        limit,
        cursor,
        ..Default::default()
    };
    // 12 traces, 6 of them "code": counted past the first page's 4.
    let first = s
        .reads()
        .list_traces(&page(&["attr.task = code"], 4, None))
        .await
        .expect("list");
    assert_eq!(
        (first.traces.len(), first.matched, first.matched_more),
        (4, Some(6), false)
    );
    let cursor = Cursor::decode(first.next_cursor.as_deref().expect("more")).expect("cursor");
    let second = s
        .reads()
        .list_traces(&page(&["attr.task = code"], 4, Some(cursor)))
        .await
        .expect("list");
    assert_eq!((second.traces.len(), second.matched), (2, None));
    let all = s
        .reads()
        .list_traces(&page(&[], 50, None))
        .await
        .expect("list");
    assert_eq!(all.matched, Some(12));
    // Across runs, only a first page that holds every match is counted.
    let mut across = page(&["attr.task = code"], 4, None);
    across.run_id = None;
    let across = s.reads().list_traces(&across).await.expect("list");
    assert_eq!((across.traces.len(), across.matched), (4, None));
    let none = s
        .reads()
        .list_traces(&page(&["attr.task = chess"], 4, None))
        .await
        .expect("list");
    assert_eq!(none.matched, Some(0));
}

async fn attribute_keys_give_types_counts_ranges_and_common_values(s: S) {
    attribute_run(&s).await;
    let keys = s
        .reads()
        .attribute_keys("r1")
        .await
        .expect("keys")
        .attributes;
    let find = |key: &str, kind: &str| {
        keys.iter()
            .find(|k| k.key == key && k.kind == kind)
            .unwrap_or_else(|| panic!("{key} {kind} in {keys:?}"))
    };
    let reward = find("reward", "number");
    assert_eq!(
        (reward.traces, reward.min, reward.max),
        (10, Some(0.0), Some(0.9))
    );
    assert!(reward.values.is_empty());
    let high = find("reward", "string");
    assert_eq!(high.traces, 1);
    assert_eq!(high.values[0].value, "high");
    let task = find("task", "string");
    assert_eq!(task.traces, 12);
    let values: Vec<(&str, i64)> = task
        .values
        .iter()
        .map(|v| (v.value.as_str(), v.traces))
        .collect();
    assert_eq!(values, [("code", 6), ("math word", 6)]);
    let solved = find("solved", "boolean");
    let values: Vec<(&str, i64)> = solved
        .values
        .iter()
        .map(|v| (v.value.as_str(), v.traces))
        .collect();
    assert_eq!(values, [("false", 8), ("true", 4)]);
    assert_eq!(keys.len(), 4);
    // A value longer than a line (a cut prompt) is counted but never offered.
    let long = "p".repeat(treeline_wire::filter::MAX_LISTED_VALUE_CHARS + 1);
    for (i, prompt) in [long.as_str(), long.as_str(), "short"].iter().enumerate() {
        let t = format!("p{i}");
        let attributes = json!({"attributes": {"prompt": prompt}});
        write(
            &s,
            "r1",
            &[
                with(open(&t, "root", None, "rollout", 500), attributes),
                close(&t, "root", "ok", 501),
            ],
        )
        .await;
    }
    let keys = s
        .reads()
        .attribute_keys("r1")
        .await
        .expect("keys")
        .attributes;
    let prompt = keys.iter().find(|k| k.key == "prompt").expect("prompt");
    assert_eq!(prompt.traces, 3);
    let offered: Vec<&str> = prompt.values.iter().map(|v| v.value.as_str()).collect();
    assert_eq!(offered, ["short"]);
    assert!(s
        .reads()
        .attribute_keys("nope")
        .await
        .expect("none")
        .attributes
        .is_empty());
}

async fn runs_are_found_by_a_piece_of_their_name_or_id(s: S) {
    for (id, name) in [
        ("ppo-1", "PPO seed 1"),
        ("grpo-7", "grpo math"),
        ("x_100%", "odd"),
    ] {
        let upsert = RunUpsert {
            project: "p".into(),
            name: Some(name.into()),
            ..Default::default()
        };
        s.upsert_run(id, &upsert, 1).await.expect("run");
    }
    let found = |q: &'static str| {
        let s = s.clone();
        async move {
            let mut ids: Vec<String> = s
                .reads()
                .list_runs(None, Some(q), 50, None)
                .await
                .expect("runs")
                .runs
                .into_iter()
                .map(|r| r.run_id)
                .collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(found("po").await, ["grpo-7", "ppo-1"]);
    assert_eq!(found("PPO").await, ["ppo-1"]);
    assert_eq!(found("MATH").await, ["grpo-7"]);
    assert_eq!(
        found("%").await,
        ["x_100%"],
        "a % is a character, not a wildcard"
    );
    assert_eq!(found("_1").await, ["x_100%"]);
    assert!(found("nothing").await.is_empty());
}

/// A tree of 13 spans with every kind of fact the ingest rules derive: statuses
/// (one failure deep down), tokens, steps given only at the root, attributes,
/// bodies, and closes that carry their own fields.
fn invariance_events() -> Vec<serde_json::Value> {
    let parents = [
        ("root", None),
        ("a", Some("root")),
        ("b", Some("root")),
        ("c", Some("root")),
        ("a1", Some("a")),
        ("a2", Some("a")),
        ("b1", Some("b")),
        ("b2", Some("b")),
        ("b2x", Some("b2")),
        ("b2y", Some("b2")),
        ("c1", Some("c")),
        ("c1x", Some("c1")),
        ("c1y", Some("c1")),
    ];
    let mut events = Vec::new();
    for (i, (span, parent)) in parents.iter().enumerate() {
        // The SDK numbers siblings, so the order of arrival cannot change the tree.
        let ordinal = parents[..i].iter().filter(|(_, p)| p == parent).count();
        let i = i as i64;
        let kind = match *span {
            "root" => "rollout",
            s if s.ends_with('x') => "model",
            s if s.len() == 2 => "iteration",
            _ => "tool",
        };
        let mut o = with(
            open("inv", span, *parent, kind, 1_000 + i * 10),
            json!({"attributes": {"i": i}, "input": {"n": i}, "ordinal": ordinal}),
        );
        if *span == "root" {
            o = with(o, json!({"step": 7, "attributes": {"reward": 0.25}}));
        }
        events.push(o);
        let status = if *span == "b2y" { "error" } else { "ok" };
        let mut c = with(
            close("inv", span, status, 2_000 + (12 - i) * 10),
            json!({"output": {"done": span}}),
        );
        if kind == "model" {
            c = with(c, json!({"token_count": 10 + i}));
        }
        events.push(c);
    }
    events
}

/// What a stored trace is, without the times of its writing: its summary and every
/// span of its tree, depth first.
async fn stored_tree(s: &S, run: &str) -> (serde_json::Value, Vec<serde_json::Value>) {
    let mut trace = serde_json::to_value(
        s.reads()
            .get_trace(run, "inv")
            .await
            .unwrap()
            .expect("the trace"),
    )
    .unwrap();
    for field in ["updated_us", "run_id", "run_name"] {
        trace.as_object_mut().unwrap().remove(field);
    }
    let mut spans = Vec::new();
    let mut stack = vec![None::<String>];
    while let Some(parent) = stack.pop() {
        let page = s
            .reads()
            .list_spans(
                run,
                "inv",
                &SpanLevel::after(parent.as_deref(), 1_000, None),
            )
            .await
            .unwrap();
        for node in page.spans {
            let mut detail =
                serde_json::to_value(s.reads().get_span(run, "inv", &node.span_id).await.unwrap())
                    .unwrap();
            detail.as_object_mut().map(|d| d.remove("run_id"));
            stack.push(Some(node.span_id.clone()));
            spans.push(json!({"node": node, "detail": detail}));
        }
    }
    (trace, spans)
}

/// Any splitting of a trace's events into batches, in any order, with any events
/// sent twice, stores the same trace as sending them once in order.
async fn any_order_and_split_and_repeat_stores_the_same_trace(s: S) {
    let events = invariance_events();
    run(&s, "base").await;
    write(&s, "base", &events).await;
    let want = stored_tree(&s, "base").await;
    assert_eq!(want.1.len(), 13);
    assert_eq!(want.0["error_count"], 1);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for case in 0..40 {
        let mut shuffled = events.clone();
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, next(i + 1));
        }
        // Some events sent twice, as a retry after a lost answer would.
        for _ in 0..next(6) {
            let again = shuffled[next(shuffled.len())].clone();
            let at = next(shuffled.len() + 1);
            shuffled.insert(at, again);
        }
        let run_id = format!("case{case}");
        run(&s, &run_id).await;
        let mut rest = &shuffled[..];
        while !rest.is_empty() {
            let take = 1 + next(rest.len().min(8));
            write(&s, &run_id, &rest[..take]).await;
            rest = &rest[take..];
        }
        let got = stored_tree(&s, &run_id).await;
        assert_eq!(got.0, want.0, "case {case}: the trace summary");
        assert_eq!(got.1.len(), want.1.len(), "case {case}: how many spans");
        for (g, w) in got.1.iter().zip(&want.1) {
            for part in ["node", "detail"] {
                let (g, w) = (&g[part], &w[part]);
                let differ: Vec<String> = w
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, v)| g.get(k.as_str()) != Some(v))
                    .map(|(k, v)| format!("{k}: stored {} where in order {v}", g[k.as_str()]))
                    .collect();
                assert!(
                    differ.is_empty(),
                    "case {case}: span {} {part}: {differ:?}",
                    w["span_id"]
                );
            }
        }
    }
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
    a_ten_thousand_span_trace_pages_its_children_in_arrival_order,
    siblings_list_in_the_clients_order_or_else_in_arrival_order,
    attributes_keep_the_first_256_in_the_order_set_and_count_a_name_once,
    a_replayed_batch_stores_nothing_twice,
    batches_racing_with_one_key_write_once,
    racing_batches_to_several_runs_each_get_their_own_answer,
    a_batch_for_an_unknown_run_fails_alone,
    step_activity_counts_traces_per_step_and_the_unstepped,
    runs_are_created_once_and_keep_their_project,
    metrics_are_kept_by_step_and_read_in_order,
    a_batch_repeating_a_key_and_step_keeps_the_last_value,
    racing_creations_of_one_run_create_it_once,
    trace_lists_filter_search_and_page_without_duplicates,
    search_finds_names_and_id_prefixes_in_scope,
    missing_things_are_none_never_another,
    filters_compare_totals_and_root_attributes_by_type,
    attribute_keys_give_types_counts_ranges_and_common_values,
    a_first_page_counts_its_matches,
    traces_sort_by_a_numeric_attribute_and_page_without_gaps,
    runs_are_found_by_a_piece_of_their_name_or_id,
    any_order_and_split_and_repeat_stores_the_same_trace,
);
