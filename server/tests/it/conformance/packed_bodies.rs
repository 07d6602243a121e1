//! Bodies kept compressed at rest: a large input or output is stored packed and
//! read back the same by the inspector, text search and its passages; a body sent
//! again replaces the stored one whichever way each is kept; small bodies and
//! errors stay text.

use crate::common::on_both;
use crate::common::{close, open, run, with, write, TestStore};
use serde_json::{json, Value};
use std::sync::Arc;
use treeline_server::store::{Store, TraceQuery};
use treeline_wire::text::{BodyField, TextQuery};

/// A chat prompt of several kilobytes, with a word of its own near the end.
fn prompt(word: &str) -> Value {
    json!({"messages": [
        {"role": "system", "content": "You are a careful agent. Think, then act. ".repeat(40)},
        {"role": "user", "content": format!("{} Then say {word}. Ünïcødé — 箱を左へ。",
            "Push the box to the left wall and report what you see. ".repeat(30))},
    ]})
}

/// How the span's input and output are stored: (text kept, frame kept) each.
async fn kept(t: &TestStore, span: &str) -> [(bool, bool); 2] {
    let mut out = [(false, false); 2];
    for (i, body) in ["input", "output"].into_iter().enumerate() {
        let sql = |col: &str| {
            format!("SELECT COUNT(*) FROM spans WHERE span_id = '{span}' AND {col} IS NOT NULL")
        };
        out[i] = (
            t.count(&sql(body)).await == 1,
            t.count(&sql(&format!("{body}_z"))).await == 1,
        );
    }
    out
}

async fn large_bodies_are_packed_and_read_back_the_same(t: TestStore) {
    let s = &t.store;
    run(s, "r1").await;
    let (input, output) = (
        prompt("zanzibar"),
        json!({"role": "assistant", "content": "Moved. ".repeat(200)}),
    );
    let error = json!({"type": "ToolError", "message": "the wall ".repeat(100)});
    write(
        s,
        "r1",
        &[
            with(open("t1", "big", None, "model", 1), json!({"input": input})),
            with(
                close("t1", "big", "error", 2),
                json!({"output": output, "error": error}),
            ),
            with(
                open("t1", "small", Some("big"), "tool", 3),
                json!({"input": {"q": "left?"}}),
            ),
            with(close("t1", "small", "ok", 4), json!({"output": "yes"})),
        ],
    )
    .await;
    assert_eq!(
        kept(&t, "big").await,
        [(false, true), (false, true)],
        "large: packed"
    );
    assert_eq!(
        kept(&t, "small").await,
        [(true, false), (true, false)],
        "small: text"
    );
    let sql = "SELECT COUNT(*) FROM spans WHERE span_id = 'big' AND error IS NOT NULL";
    assert_eq!(t.count(sql).await, 1, "errors stay text");

    let span = s
        .reads()
        .get_span("r1", "t1", "big")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(span.input, Some(input));
    assert_eq!(span.output, Some(output));
    assert_eq!(span.error, Some(error));
    let small = s
        .reads()
        .get_span("r1", "t1", "small")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(small.input, Some(json!({"q": "left?"})));

    // Text search finds a word of the packed prompt and shows its passage.
    let q = TraceQuery {
        run_id: Some("r1".into()),
        text: Some(TextQuery::parse("zanzibar").expect("a search")),
        limit: 50,
        ..Default::default()
    };
    let list = s.reads().list_traces(&q).await.unwrap();
    let found = list.traces.first().and_then(|t| t.text_match.clone());
    let found = found.expect("a match");
    assert_eq!(
        (found.span_id.as_str(), found.field),
        ("big", BodyField::Input)
    );
    assert!(
        found
            .snippet
            .iter()
            .any(|p| p.hit && p.text.to_lowercase() == "zanzibar"),
        "{:?}",
        found.snippet
    );
}

/// Sends `event` to run r1 with `input` on it.
async fn send(s: &Arc<dyn Store>, event: Value, input: Value) {
    write(s, "r1", &[with(event, json!({"input": input}))]).await;
}

/// The input the inspector shows for `span` of `trace` in run r1.
async fn input_of(s: &Arc<dyn Store>, trace: &str, span: &str) -> Option<Value> {
    let detail = s.reads().get_span("r1", trace, span).await.unwrap();
    detail.and_then(|d| d.input)
}

async fn a_body_sent_again_replaces_the_stored_one_whichever_way_each_is_kept(t: TestStore) {
    let s = &t.store;
    run(s, "r1").await;
    // Packed, then text: the text wins and the frame goes.
    send(s, open("t1", "a", None, "model", 1), prompt("first")).await;
    assert_eq!(kept(&t, "a").await[0], (false, true));
    send(s, close("t1", "a", "ok", 2), json!("short")).await;
    assert_eq!(kept(&t, "a").await[0], (true, false));
    assert_eq!(input_of(s, "t1", "a").await, Some(json!("short")));

    // Text, then packed: the frame wins and the text goes.
    send(s, open("t2", "b", None, "model", 1), json!("short")).await;
    send(s, close("t2", "b", "ok", 2), prompt("second")).await;
    assert_eq!(kept(&t, "b").await[0], (false, true));
    assert_eq!(input_of(s, "t2", "b").await, Some(prompt("second")));

    // A close without an input keeps the packed one.
    send(s, open("t3", "c", None, "model", 1), prompt("kept")).await;
    write(s, "r1", &[close("t3", "c", "ok", 2)]).await;
    assert_eq!(input_of(s, "t3", "c").await, Some(prompt("kept")));
}

on_both!(tokio::test, |t| t;
    large_bodies_are_packed_and_read_back_the_same,
    a_body_sent_again_replaces_the_stored_one_whichever_way_each_is_kept,
);
