//! A span's attributes are stored under a code a name, each name kept once: what a
//! user sees, filters and reads back is the same as if stored by name.

use crate::common::on_both;
use crate::common::{close, open, run, with, write, TestStore};
use serde_json::{json, Value};

use super::trace_lists::matching;

async fn span_attributes_read_back_by_name_and_each_name_is_stored_once(t: TestStore) {
    let s = &t.store;
    run(s, "r1").await;
    for (trace, model) in [("t1", "small"), ("t2", "large")] {
        let opened = json!({"attributes": {
            "gen_ai.request.model": model, "temperature": 0.30000000000000004,
            "say \"hi\"": "ü 箱", "seed": 12345678901234567890_u64}});
        let closed = json!({"attributes": {"gen_ai.usage.output_tokens": 812, "ok": true}});
        write(
            s,
            "r1",
            &[
                open(trace, "root", None, "rollout", 10),
                with(open(trace, "llm", Some("root"), "model", 20), opened),
            ],
        )
        .await;
        // The close's names arrive in a later batch and merge with the open's.
        write(
            s,
            "r1",
            &[
                with(close(trace, "llm", "ok", 30), closed),
                close(trace, "root", "ok", 40),
            ],
        )
        .await;
    }
    let span = s
        .reads()
        .get_span("r1", "t1", "llm")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::Value::Object(span.attributes),
        json!({"gen_ai.request.model": "small", "temperature": 0.30000000000000004,
               "say \"hi\"": "ü 箱", "seed": 12345678901234567890_u64,
               "gen_ai.usage.output_tokens": 812, "ok": true})
    );
    // Stored under codes: no span row spells a name, and each name is kept once.
    let spelled = "SELECT COUNT(*) FROM spans WHERE attributes LIKE '%gen_ai%'";
    assert_eq!(t.count(spelled).await, 0);
    let once = "SELECT COUNT(*) FROM attribute_names WHERE name LIKE 'gen_ai.%'";
    assert_eq!(t.count(once).await, 2);

    // Each filter and the traces it keeps, t1 and t2 by number. A name no span has
    // ever carried has no code, and matches nothing.
    let cases: [(&str, &[i64]); 5] = [
        ("span.attr.gen_ai.request.model = large", &[2]),
        ("span.attr.gen_ai.usage.output_tokens > 800", &[1, 2]),
        ("span.attr.ok = true", &[1, 2]),
        ("span.attr.never.sent exists", &[]),
        ("span.attr.never.sent != 1", &[]),
    ];
    for (filter, want) in cases {
        assert_eq!(matching(s, &[filter]).await, want, "{filter}");
    }
}

/// A trace is named as holding an overwritten span attribute only when a later
/// batch sets a name its span already had: a new name beside the stored ones, as
/// an SDK's close brings, leaves the trace's rows exact. Lists hold either way.
async fn only_a_name_set_again_marks_its_trace_overwritten(t: TestStore) {
    let s = &t.store;
    run(s, "r1").await;
    let opened = |t: &str, attributes: Value| {
        with(
            open(t, "m", None, "model", 1),
            json!({ "attributes": attributes }),
        )
    };
    let closed = |t: &str, attributes: Value| {
        with(close(t, "m", "ok", 2), json!({ "attributes": attributes }))
    };
    let first = [
        opened("t40", json!({"model": "small", "tokens": 5})),
        opened("t41", json!({"model": "small"})),
        opened("t42", json!({"tokens": 5})),
    ];
    write(s, "r1", &first).await;
    let later = [
        closed("t40", json!({"reward": 1})),
        closed("t41", json!({"model": "large"})),
        closed("t42", json!({"tokens": 9})),
    ];
    write(s, "r1", &later).await;
    let named = t
        .count("SELECT COUNT(*) FROM span_attribute_overwrites WHERE trace_id IN ('t41', 't42')")
        .await;
    let all = t
        .count("SELECT COUNT(*) FROM span_attribute_overwrites")
        .await;
    assert_eq!((named, all), (2, 2));
    assert_eq!(matching(s, &["span.attr.model = small"]).await, [40]);
    assert_eq!(matching(s, &["span.attr.tokens <= 5"]).await, [40]);
    assert_eq!(matching(s, &["span.attr.reward > 0"]).await, [40]);
}

on_both!(tokio::test, |t| t;
    span_attributes_read_back_by_name_and_each_name_is_stored_once,
    only_a_name_set_again_marks_its_trace_overwritten,
);
