//! A span's attributes are stored under a code a name, each name kept once: what a
//! user sees, filters and reads back is the same as if stored by name.

use crate::common::on_both;
use crate::common::{close, open, run, with, write, TestStore};
use serde_json::json;

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

on_both!(tokio::test, |t| t;
    span_attributes_read_back_by_name_and_each_name_is_stored_once,
);
