//! Reading a trace's tree: levels paged in order, jumps within a large level, and
//! what is missing answering none.

use std::collections::HashSet;

use crate::common::on_both;
use crate::common::{close, open, run, with, write};
use serde_json::json;
use treeline_server::store::{Cursor, LevelStart, SpanLevel, StoreError};
use treeline_wire::SpanPage;

use super::S;

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

on_both!(tokio::test, |t| t.store.clone();
    a_ten_thousand_span_trace_pages_its_children_in_arrival_order,
    siblings_list_in_the_clients_order_or_else_in_arrival_order,
    missing_things_are_none_never_another,
);
