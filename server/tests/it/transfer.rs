//! `treeline export` and `treeline import` between two real servers, from each
//! database: what goes out comes back the same.

use std::io::BufReader;
use std::path::Path;

use crate::common::on_both;
use crate::common::{self, close, open, with, TestStore};
use serde_json::{json, Value};
use treeline_client::Client;
use treeline_server::demo::spawn_api_server;
use treeline_server::failure::Outcome;
use treeline_server::transfer::{self, ExportArgs, ServerArgs};
use treeline_wire::SpanPage;

fn events() -> Vec<Value> {
    vec![
        with(
            open("t-ok", "root", None, "rollout", 1_000),
            json!({"step": 3, "attributes": {"zeta": 1, "alpha": "a", "reward": 0.75},
                   "input": {"prompt": "2+2"}}),
        ),
        // Siblings opened in one microsecond, numbered by the client.
        with(
            open("t-ok", "second", Some("root"), "model", 1_100),
            json!({"ordinal": 1}),
        ),
        with(
            open("t-ok", "first", Some("root"), "tool", 1_100),
            json!({"ordinal": 0}),
        ),
        with(
            close("t-ok", "second", "ok", 1_500),
            json!({"output": "four", "token_count": 12, "metrics": {"latency_ms": 4.5}}),
        ),
        with(
            close("t-ok", "first", "ok", 1_200),
            json!({"links": [{"trace_id": "t-bad", "span_id": "root"}]}),
        ),
        with(
            close("t-ok", "root", "ok", 2_000),
            json!({"output": {"answer": 4}}),
        ),
        open("t-bad", "root", None, "rollout", 3_000),
        open("t-bad", "step", Some("root"), "env_step", 3_100),
        with(
            close("t-bad", "step", "error", 3_200),
            json!({"error": {"type": "ValueError", "message": "bad obs"}}),
        ),
        // Still running when exported: only its open goes back in.
        open("t-bad", "late", Some("root"), "tool", 3_300),
        close("t-bad", "root", "error", 3_400),
    ]
}

async fn export_to(base: &str, run: &str, path: &Path, trace: Option<&str>, filter: &[&str]) {
    try_export(base, run, path, trace, filter)
        .await
        .expect("export");
}

async fn try_export(
    base: &str,
    run: &str,
    path: &Path,
    trace: Option<&str>,
    filter: &[&str],
) -> Outcome {
    transfer::export(ExportArgs {
        run_id: run.into(),
        trace_id: trace.map(str::to_string),
        filter: filter.iter().map(|f| f.to_string()).collect(),
        q: None,
        step: None,
        output: Some(path.to_path_buf()),
        server: ServerArgs {
            url: base.into(),
            api_key: None,
        },
    })
    .await
}

/// The span lines and the annotation lines of an export.
fn split(all: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    all.into_iter()
        .partition(|l| l["format"] == "treeline.span.v1")
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("the export");
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    lines.sort_by_key(|l| (l["trace_id"].to_string(), l["span_id"].to_string()));
    lines
}

async fn a_run_exported_and_imported_elsewhere_exports_the_same(source: TestStore) {
    let target = common::sqlite().await;
    let (from, _, a) = common::served_run(&source, "r1", "transfer", &events()).await;
    let (to, b) = spawn_api_server(&treeline_server::devtools::Server, target.store.clone())
        .await
        .expect("b");

    // Annotations travel too: on the trace and on a span of it.
    let source_client = Client::new(&from);
    for body in [
        json!({"name": "label", "value": "clean", "comment": "checked", "source": "person"}),
        json!({"span_id": "first", "name": "score", "value": 4}),
    ] {
        let _: Value = source_client
            .put_json("/api/runs/r1/traces/t-ok/annotations", &body)
            .await
            .expect("annotate");
    }

    let dir = tempfile::tempdir().expect("tmp");
    let first = dir.path().join("first.jsonl");
    export_to(&from, "r1", &first, None, &[]).await;
    let (exported, notes) = split(lines(&first));
    assert_eq!(exported.len(), 6, "every opened span, one a line");
    // Sorted by `lines`: the span's before the trace's own.
    let listed: Vec<_> = notes
        .iter()
        .map(|n| {
            (
                n["trace_id"].clone(),
                n["span_id"].clone(),
                n["name"].clone(),
                n["value"].clone(),
                n["source"].clone(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (
                json!("t-ok"),
                json!("first"),
                json!("score"),
                json!(4.0),
                json!("code")
            ),
            (
                json!("t-ok"),
                json!(null),
                json!("label"),
                json!("clean"),
                json!("person")
            ),
        ]
    );
    let root = &exported[4];
    assert_eq!(
        (root["trace_id"].as_str(), root["span_id"].as_str()),
        (Some("t-ok"), Some("root"))
    );
    assert_eq!(root["format"], "treeline.span.v1");
    assert_eq!(root["project"], "transfer");
    assert_eq!(root["input"], json!({"prompt": "2+2"}));
    let names: Vec<&String> = root["attributes"].as_object().unwrap().keys().collect();
    assert_eq!(names.len(), 3);

    let file = std::fs::File::open(&first).expect("open");
    let summary = transfer::import_lines(&Client::new(&to), BufReader::new(file), None)
        .await
        .expect("import");
    assert_eq!(
        (summary.spans, summary.annotations, summary.runs),
        (6, 2, 1)
    );
    assert!(summary.problems.is_empty(), "{:?}", summary.problems);

    let second = dir.path().join("second.jsonl");
    export_to(&to, "r1", &second, None, &[]).await;
    let (again, notes_again) = split(lines(&second));
    assert_eq!(again, exported, "the same spans come back");
    // The same annotations, written anew (their times are the import's).
    let without_times = |ns: &[Value]| -> Vec<Value> {
        ns.iter()
            .map(|n| {
                let mut n = n.clone();
                for k in ["created_us", "updated_us"] {
                    n.as_object_mut().map(|o| o.remove(k));
                }
                n
            })
            .collect()
    };
    assert_eq!(without_times(&notes_again), without_times(&notes));

    // The client's sibling order survives the trip.
    let target_client = Client::new(&to);
    let page: SpanPage = target_client
        .get("/api/runs/r1/traces/t-ok/spans?parent_span_id=root")
        .await
        .expect("children");
    let ids: Vec<&str> = page.spans.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids, ["first", "second"]);

    // One trace, and the traces with a failure beneath.
    let one = dir.path().join("one.jsonl");
    export_to(&from, "r1", &one, Some("t-ok"), &[]).await;
    let (spans, notes) = split(lines(&one));
    assert_eq!(
        (spans.len(), notes.len()),
        (3, 2),
        "its spans, then its annotations"
    );
    let failed = dir.path().join("failed.jsonl");
    export_to(&from, "r1", &failed, None, &["error_count > 0"]).await;
    let failed = lines(&failed);
    assert_eq!(failed.len(), 3);
    assert!(failed.iter().all(|l| l["trace_id"] == "t-bad"));

    // An unknown run is an error that names it, and writes nothing.
    let none = dir.path().join("none.jsonl");
    let missing = try_export(&from, "nope", &none, None, &[])
        .await
        .expect_err("no such run");
    assert!(missing.report().contains("nope"), "{}", missing.report());
    assert!(!none.exists());
    a.abort();
    b.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_reports_bad_lines_by_number_and_keeps_the_rest() {
    let target = common::sqlite().await;
    let (to, server) = spawn_api_server(&treeline_server::devtools::Server, target.store.clone())
        .await
        .expect("server");
    let good = |span: &str, parent: Value| {
        json!({"format": "treeline.span.v1", "run_id": "r9", "project": "p", "trace_id": "t1",
               "span_id": span, "parent_span_id": parent, "name": span, "kind": "tool",
               "status": "ok", "start_us": 10, "end_us": 20})
        .to_string()
    };
    let text = [
        good("root", Value::Null),
        "{not json".to_string(),
        json!({"run_id": "r9", "trace_id": "t1", "span_id": "x"}).to_string(),
        String::new(),
        good("child", json!("root")),
        good("bad id!", json!("root")),
    ]
    .join("\n");
    let summary = transfer::import_lines(&Client::new(&to), BufReader::new(text.as_bytes()), None)
        .await
        .expect("import");
    assert_eq!(summary.spans, 3);
    assert_eq!(summary.skipped_lines, 2);
    assert_eq!(summary.rejected_events, 2, "the bad id's open and close");
    let problems = summary.problems.join("\n");
    assert!(problems.contains("line 2:"), "{problems}");
    assert!(
        problems.contains("line 3:") && problems.contains("format"),
        "{problems}"
    );
    assert!(problems.contains("line 6: invalid_id"), "{problems}");
    let page: SpanPage = Client::new(&to)
        .get("/api/runs/r9/traces/t1/spans?parent_span_id=root")
        .await
        .expect("children");
    assert_eq!(page.spans.len(), 1, "the good lines are in");
    server.abort();
}

on_both!(
    tokio::test(flavor = "multi_thread", worker_threads = 2), |t| t;
    a_run_exported_and_imported_elsewhere_exports_the_same,
);
