//! A span's attributes are stored under a code a name, each name kept once: what a
//! user sees, filters and reads back is the same as if stored by name.

use crate::common::on_both;
use crate::common::{close, open, run, with, write, TestStore};
use serde_json::json;
use treeline_server::store::TraceQuery;

/// The traces of `r1` that `filter` keeps.
async fn matching(t: &TestStore, filter: &str) -> Vec<String> {
    let query = TraceQuery {
        run_id: Some("r1".into()),
        filters: super::filters(&[filter]),
        limit: 100,
        ..Default::default()
    };
    let mut ids: Vec<String> = t
        .store
        .reads()
        .list_traces(&query)
        .await
        .expect("list")
        .traces
        .into_iter()
        .map(|t| t.trace_id)
        .collect();
    ids.sort();
    ids
}

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

    assert_eq!(
        matching(&t, "span.attr.gen_ai.request.model = large").await,
        ["t2"]
    );
    assert_eq!(
        matching(&t, "span.attr.gen_ai.usage.output_tokens > 800").await,
        ["t1", "t2"]
    );
    assert_eq!(matching(&t, "span.attr.ok = true").await, ["t1", "t2"]);
    // A name no span has ever carried has no code, and matches nothing.
    assert!(matching(&t, "span.attr.never.sent exists").await.is_empty());
    assert!(matching(&t, "span.attr.never.sent != 1").await.is_empty());
}

on_both!(tokio::test, |t| t;
    span_attributes_read_back_by_name_and_each_name_is_stored_once,
);
