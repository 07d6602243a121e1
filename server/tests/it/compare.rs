//! Comparing spans through the HTTP API on each database: a GRPO-shaped group
//! aligned and diffed, and a rollout id found across steps.

use crate::common::on_both;
use crate::common::{self, close, open, with, TestStore};
use serde_json::{json, Value};
use treeline_client::ClientError;
use treeline_wire::{Alignment, Change, RolloutMatches, SpanDiff};

/// A prompt's group: two samples under one root, the winner with a verifier the
/// loser lacks, and rollouts of one eval prompt at steps 0, 50 and 100.
fn events() -> Vec<Value> {
    let mut e = vec![open("g", "root", None, "rollout", 0)];
    for (sample, (reward, answer)) in [(1.0, "42"), (0.0, "41")].into_iter().enumerate() {
        let s = format!("s{sample}");
        let t0 = 10 + sample as i64 * 1_000;
        e.push(with(
            open("g", &s, Some("root"), "agent", t0),
            json!({"name": format!("sample {sample}"), "attributes": {"sample": sample}}),
        ));
        e.push(with(
            open("g", &format!("{s}-llm"), Some(&s), "model", t0 + 1),
            json!({"name": "policy", "input": {"messages": [{"role": "user", "content": "6 times 7?"}]}}),
        ));
        e.push(with(
            close("g", &format!("{s}-llm"), "ok", t0 + 100),
            json!({"output": {"role": "assistant", "content": format!("The answer is {answer}")}}),
        ));
        if sample == 0 {
            e.push(with(
                open("g", "s0-verify", Some("s0"), "agent", t0 + 200),
                json!({"name": "verifier"}),
            ));
            e.push(close("g", "s0-verify", "ok", t0 + 300));
        }
        e.push(with(
            close("g", &s, "ok", t0 + 400),
            json!({"attributes": {"reward": reward}}),
        ));
    }
    e.push(close("g", "root", "ok", 5_000));
    // Started in the reverse of their steps, so the step order is the list's own.
    for step in [100, 0, 50] {
        let t = format!("eval-{step}");
        e.push(with(
            open(&t, "root", None, "evaluator", 10_000 - step),
            json!({"step": step, "attributes": {"rollout_id": "eval-p1"}}),
        ));
        e.push(close(&t, "root", "ok", 20_000 + step));
    }
    e.push(with(
        open("other", "root", None, "evaluator", 1),
        json!({"attributes": {"rollout_id": "eval-p2"}}),
    ));
    // Another rollout that differs only in case, and one with a non-ASCII capital.
    e.push(with(
        open("shout", "root", None, "evaluator", 2),
        json!({"step": 0, "attributes": {"rollout_id": "EVAL-P1"}}),
    ));
    e.push(with(
        open("umlaut", "root", None, "evaluator", 3),
        json!({"attributes": {"rollout_id": "Äpfel-1"}}),
    ));
    e
}

/// Children under each side's root in a level wide enough to be compared in parts:
/// B answers child 2,400 differently and sets child 100's attributes in another order.
const WIDE: usize = 2_500;

fn wide(trace: &str, b: bool) -> Vec<Value> {
    let mut e = vec![open(trace, "root", None, "rollout", 0)];
    for i in 0..WIDE {
        let id = format!("c{i}");
        let attributes = if b && i == 100 {
            json!({"turn": i, "model": "m"})
        } else {
            json!({"model": "m", "turn": i})
        };
        e.push(with(
            open(trace, &id, Some("root"), "model", 10 + i as i64),
            json!({"name": "policy", "attributes": attributes}),
        ));
        let answer = if b && i == 2_400 { i + 1 } else { i };
        e.push(with(
            close(trace, &id, "ok", 20 + i as i64),
            json!({"output": {"content": format!("answer {answer}")}}),
        ));
    }
    e
}

async fn spans_align_diff_and_find_their_rollouts(store: TestStore) {
    let (_, client, server) = common::served_run(&store, "r1", "cmp", &events()).await;
    for (trace, b) in [("wa", false), ("wb", true)] {
        let answer = client.send_events("r1", &wide(trace, b)).await;
        assert!(answer.expect("events").rejected.is_empty());
    }

    // The two samples' children: the model calls pair up and differ in output;
    // the verifier is only in A.
    let level: Alignment = client
        .get("/api/runs/r1/align?a=g:s0&b=g:s1")
        .await
        .expect("align");
    let shape: Vec<(Option<&str>, Option<&str>, Change)> = level
        .rows
        .iter()
        .map(|r| {
            (
                r.a.as_ref().map(|n| n.span_id.as_str()),
                r.b.as_ref().map(|n| n.span_id.as_str()),
                r.change,
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (Some("s0-llm"), Some("s1-llm"), Change::Changed),
            (Some("s0-verify"), None, Change::OnlyA),
        ]
    );
    assert_eq!(level.rows[0].differences, ["output"]);
    assert!(!level.truncated);

    // A wide level: only the pair whose answer differs is changed, found at its own
    // row; another attribute order is no change.
    let wide_changes = || async {
        let level: Alignment = client
            .get("/api/runs/r1/align?a=wa:root&b=wb:root")
            .await
            .expect("align a wide level");
        assert_eq!(level.rows.len(), WIDE);
        level
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.change != Change::Same)
            .map(|(i, r)| {
                let id = r.a.as_ref().map_or("", |n| n.span_id.as_str());
                (i, id.to_string(), r.differences.clone())
            })
            .collect::<Vec<_>>()
    };
    let expected = [(2_400, "c2400".to_string(), vec!["output".to_string()])];
    assert_eq!(wide_changes().await, expected);

    // Spans stored by a server before body fingerprints (A's side here, and half of
    // B's): their pairs' bodies are compared as text, in two parts at once, and
    // find the same differences.
    store
        .execute(
            "UPDATE spans SET input_hash = NULL, output_hash = NULL, error_hash = NULL \
             WHERE trace_id IN ('g', 'wa') OR (trace_id = 'wb' AND start_us % 2 = 0)",
        )
        .await;
    assert_eq!(wide_changes().await, expected);
    let level: Alignment = client
        .get("/api/runs/r1/align?a=g:s0&b=g:s1")
        .await
        .expect("align");
    assert_eq!(level.rows[0].differences, ["output"]);

    // The pair's bodies: the answers differ by a word, the prompts not at all.
    let diff: SpanDiff = client
        .get("/api/runs/r1/diff?a=g:s0-llm&b=g:s1-llm")
        .await
        .expect("diff");
    let output = &diff.bodies[1];
    assert_eq!((output.body.as_str(), output.same), ("output", false));
    let text: Vec<(String, String)> = output
        .text
        .iter()
        .map(|p| (format!("{:?}", p.tag), p.text.clone()))
        .collect();
    assert!(text.contains(&("Delete".into(), "42".into())), "{text:?}");
    assert!(text.contains(&("Insert".into(), "41".into())), "{text:?}");
    assert!(diff.bodies[0].same);
    // The samples themselves differ in their reward.
    let roots: SpanDiff = client
        .get("/api/runs/r1/diff?a=g:s0&b=g:s1")
        .await
        .expect("diff");
    let paths: Vec<&str> = roots.attributes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["$.sample", "$.reward"]);

    // One eval prompt across steps, in step order.
    let matches: RolloutMatches = client
        .get("/api/runs/r1/traces/eval-50/rollouts")
        .await
        .expect("rollouts");
    assert_eq!(matches.rollout_id.as_deref(), Some("eval-p1"));
    let ids: Vec<&str> = matches.traces.iter().map(|t| t.trace_id.as_str()).collect();
    assert_eq!(ids, ["eval-0", "eval-50", "eval-100"]);
    let umlaut: RolloutMatches = client
        .get("/api/runs/r1/traces/umlaut/rollouts")
        .await
        .expect("rollouts");
    let ids: Vec<&str> = umlaut.traces.iter().map(|t| t.trace_id.as_str()).collect();
    assert_eq!(
        ids,
        ["umlaut"],
        "a rollout id with a non-ASCII capital finds itself"
    );
    let none: RolloutMatches = client
        .get("/api/runs/r1/traces/g/rollouts")
        .await
        .expect("rollouts");
    assert_eq!((none.rollout_id, none.traces.len()), (None, 0));

    // Bad sides are named; a missing span is never replaced by another.
    for (query, code) in [
        ("a=g:s0", "missing_parameter"),
        ("a=g&b=g:s1", "invalid_parameter"),
        ("a=g:s0&b=g:nope", "span_not_found"),
        ("a=g:s0&b=nope:s1", "trace_not_found"),
        ("a=g:s0&b=g:s1&threshold=-1", "invalid_parameter"),
    ] {
        match client
            .get::<Alignment>(&format!("/api/runs/r1/align?{query}"))
            .await
        {
            Err(ClientError::Api { code: got, .. }) => assert_eq!(got, code, "{query}"),
            other => panic!("{query}: {other:?}"),
        }
    }
    server.abort();
}

on_both!(
    tokio::test(flavor = "multi_thread", worker_threads = 2), |t| t;
    spans_align_diff_and_find_their_rollouts,
);
