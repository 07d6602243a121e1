//! Order invariance: any split, order or repetition of a trace's events stores the
//! same trace.

use crate::common::on_both;
use crate::common::{close, open, run, with, write};
use serde_json::json;
use treeline_server::store::SpanLevel;

use super::S;

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
    any_order_and_split_and_repeat_stores_the_same_trace,
);
