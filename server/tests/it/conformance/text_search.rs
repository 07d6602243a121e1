//! Searching the words of span bodies (`text=`): words and quoted phrases, any case
//! and script, inputs, outputs and errors (chat contents included, keys not), long
//! bodies, other filters beside it, paging, scope, where each trace matched, and a
//! span's words gone with its run.

use crate::common::on_both;
use crate::common::{close, open, with, write, TestStore};
use serde_json::{json, Value};
use treeline_server::store::{TraceQuery, TraceSort};
use treeline_wire::text::{BodyField, TextQuery};
use treeline_wire::{RunUpsert, SpanStatus, MATCH_COUNT_LIMIT};

use super::trace_lists::every_page;
use super::S;

fn in_project(project: &str) -> RunUpsert {
    RunUpsert {
        project: project.into(),
        ..Default::default()
    }
}

/// A trace of a root and one `llm` child, `bodies` set on the child's open (input)
/// and close (output, error), the root closed with `status`.
fn trace(id: &str, input: Value, output: Value, status: &str) -> Vec<Value> {
    let mut close_child = close(id, "llm", status, 30);
    if !output.is_null() {
        close_child = with(close_child, json!({ "output": output }));
    }
    vec![
        with(open(id, "root", None, "rollout", 10), json!({"step": 1})),
        with(
            open(id, "llm", Some("root"), "model", 20),
            json!({ "input": input }),
        ),
        close_child,
        close(id, "root", status, 40),
    ]
}

async fn fill(s: &S) {
    s.upsert_run("r1", &in_project("alpha"), 1).await.unwrap();
    s.upsert_run("r2", &in_project("alpha"), 1).await.unwrap();
    s.upsert_run("r3", &in_project("beta"), 1).await.unwrap();
    let chat = json!({"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Solve for x"},
    ]});
    let long = format!("{} needle at the end", "filler ".repeat(3_000));
    let mut r1 = Vec::new();
    r1.extend(trace(
        "t1",
        chat,
        json!({"content": "Sorry, I CANNOT do that."}),
        "ok",
    ));
    r1.extend(trace(
        "t2",
        json!("plan"),
        json!("I can do it; cannot wait"),
        "error",
    ));
    r1.extend(trace(
        "t4",
        json!("Grüße aus München, Ελλάδα"),
        Value::Null,
        "ok",
    ));
    r1.extend(trace("t5", json!(long), Value::Null, "ok"));
    let mut t3 = trace("t3", json!("run the tool"), Value::Null, "error");
    t3[2] = with(
        close("t3", "llm", "error", 30),
        json!({"error": {"type": "KeyError", "message": "Traceback (most recent call last): boom"}}),
    );
    r1.extend(t3);
    write(s, "r1", &r1).await;
    write(
        s,
        "r2",
        &trace("t6", json!("x"), json!("no: i cannot"), "ok"),
    )
    .await;
    write(
        s,
        "r3",
        &trace("t7", json!("x"), json!("I cannot either"), "ok"),
    )
    .await;
}

fn query(run: Option<&str>, project: Option<&str>, text: &str) -> TraceQuery {
    TraceQuery {
        run_id: run.map(Into::into),
        project: project.map(Into::into),
        text: Some(TextQuery::parse(text).expect("a search")),
        limit: 50,
        ..Default::default()
    }
}

async fn found(s: &S, q: TraceQuery) -> Vec<String> {
    let mut ids: Vec<String> = s
        .reads()
        .list_traces(&q)
        .await
        .expect("list")
        .traces
        .into_iter()
        .map(|t| t.trace_id)
        .collect();
    ids.sort();
    ids
}

async fn words_phrases_case_and_scripts_match_inside_bodies(s: S) {
    fill(&s).await;
    let r1 = |text: &str| query(Some("r1"), None, text);
    assert_eq!(found(&s, r1(r#""i cannot""#)).await, ["t1"]);
    assert_eq!(found(&s, r1("cannot")).await, ["t1", "t2"]);
    assert_eq!(
        found(&s, r1("I cannot")).await,
        ["t1", "t2"],
        "words need not touch"
    );
    assert_eq!(found(&s, r1(r#""cannot i""#)).await, Vec::<String>::new());
    assert_eq!(found(&s, r1("TRACEBACK")).await, ["t3"], "error bodies");
    assert_eq!(found(&s, r1("münchen ΕΛΛΆΔΑ")).await, ["t4"]);
    assert_eq!(found(&s, r1("solve")).await, ["t1"], "chat contents");
    assert_eq!(found(&s, r1("user")).await, ["t1"], "string values");
    assert_eq!(
        found(&s, r1("messages role")).await,
        Vec::<String>::new(),
        "not keys"
    );
    assert_eq!(
        found(&s, r1("needle")).await,
        ["t5"],
        "past the first 8 KiB"
    );
    assert_eq!(found(&s, r1("absent")).await, Vec::<String>::new());
    // Scope: a project's runs, and nothing of another project.
    assert_eq!(
        found(&s, query(None, Some("alpha"), r#""i cannot""#)).await,
        ["t1", "t6"]
    );
    assert_eq!(
        found(&s, query(None, Some("beta"), r#""i cannot""#)).await,
        ["t7"]
    );
    assert_eq!(
        found(&s, query(Some("r2"), None, "sorry")).await,
        Vec::<String>::new()
    );
}

/// Scripts written without spaces: any part of a run is found, in its order only.
async fn chinese_japanese_and_korean_words_are_found_inside_a_run(s: S) {
    s.upsert_run("cjk", &in_project("alpha"), 1).await.unwrap();
    let mut events = trace("c1", json!("今天我们讨论东京タワー"), Value::Null, "ok");
    events.extend(trace(
        "c2",
        json!("东京很大"),
        json!("서울에서 만나요"),
        "ok",
    ));
    write(&s, "cjk", &events).await;
    let cjk = |text: &str| query(Some("cjk"), None, text);
    assert_eq!(found(&s, cjk("讨论")).await, ["c1"]);
    assert_eq!(found(&s, cjk("东京")).await, ["c1", "c2"]);
    // Each trace of a page shows a passage of its own body.
    let page = s.reads().list_traces(&cjk("东京")).await.expect("list");
    for t in &page.traces {
        let hit = t.text_match.as_ref().expect("a match");
        let shown: String = hit.snippet.iter().map(|p| p.text.as_str()).collect();
        let own = if t.trace_id == "c1" {
            "今天我们讨论东京タワー"
        } else {
            "东京很大"
        };
        assert_eq!(shown, own, "the passage of {}", t.trace_id);
    }
    assert_eq!(found(&s, cjk("京东")).await, Vec::<String>::new(), "order");
    assert_eq!(found(&s, cjk("タワー")).await, ["c1"], "katakana");
    assert_eq!(found(&s, cjk("东京 很大")).await, ["c2"], "two parts");
    assert_eq!(found(&s, cjk("서울")).await, ["c2"], "hangul");
    assert_eq!(
        found(&s, query(None, Some("alpha"), "讨论东京")).await,
        ["c1"]
    );
}

async fn a_search_combines_with_filters_and_pages_and_says_where_it_matched(s: S) {
    fill(&s).await;
    let errors = TraceQuery {
        statuses: vec![SpanStatus::Error],
        ..query(Some("r1"), None, "cannot")
    };
    assert_eq!(found(&s, errors).await, ["t2"]);
    let terms = TraceQuery {
        terms: vec!["t1".into()],
        ..query(Some("r1"), None, "cannot")
    };
    assert_eq!(found(&s, terms).await, ["t1"]);
    // One a page, by duration: each match once.
    let q = TraceQuery {
        limit: 1,
        sort: TraceSort::Duration,
        ..query(None, Some("alpha"), "cannot")
    };
    let mut seen = every_page(&s, q).await;
    seen.sort();
    assert_eq!(seen, ["t1", "t2", "t6"]);
    // Each trace says which span and body matched, and shows the words in place.
    let list = s
        .reads()
        .list_traces(&query(Some("r1"), None, r#""i cannot""#))
        .await
        .expect("list");
    let hit = list.traces[0].text_match.as_ref().expect("a match");
    assert_eq!(
        (hit.span_id.as_str(), hit.field),
        ("llm", BodyField::Output)
    );
    let shown: String = hit.snippet.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(shown, "Sorry, I CANNOT do that.");
    let marked: Vec<&str> = hit
        .snippet
        .iter()
        .filter(|p| p.hit)
        .map(|p| p.text.as_str())
        .collect();
    assert_eq!(marked, ["I CANNOT"]);
    let error = s
        .reads()
        .list_traces(&query(Some("r1"), None, "traceback"))
        .await
        .expect("list");
    let hit = error.traces[0].text_match.as_ref().expect("a match");
    assert_eq!(hit.field, BodyField::Error);
    // A list without `text` carries no match.
    let plain = TraceQuery {
        run_id: Some("r1".into()),
        limit: 50,
        ..Default::default()
    };
    let list = s.reads().list_traces(&plain).await.expect("list");
    assert!(list.traces.iter().all(|t| t.text_match.is_none()));
}

/// How many traces the pages of `q` hold (500 a page), none listed twice.
async fn all_pages(s: &S, q: TraceQuery) -> usize {
    let ids = every_page(s, TraceQuery { limit: 500, ..q }).await;
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "listed twice");
    ids.len()
}

/// More matching traces than a search lists from the index (5,000 on SQLite,
/// 10,000 on PostgreSQL): they are gathered in the list's own query, and counted
/// to the count's bound.
async fn a_search_past_the_listed_traces_gathers_them(s: S) {
    const TRACES: i64 = 10_010;
    s.upsert_run("big", &in_project("alpha"), 1).await.unwrap();
    let mut events = Vec::new();
    for i in 0..TRACES {
        let id = format!("t{i:05}");
        let said = if i % 1_000 == 7 {
            "rare ok"
        } else {
            "common ok"
        };
        events.push(with(
            open(&id, "root", None, "rollout", i),
            json!({"input": said}),
        ));
        let status = if i % 2 == 0 { "ok" } else { "error" };
        events.push(close(&id, "root", status, i + 1));
    }
    for chunk in events.chunks(2_000) {
        write(&s, "big", chunk).await;
    }
    let q = |text: &str| TraceQuery {
        limit: 20,
        ..query(Some("big"), None, text)
    };
    let page = s.reads().list_traces(&q("ok")).await.expect("list");
    assert_eq!(page.traces.len(), 20);
    assert!(page.traces.iter().all(|t| t.text_match.is_some()));
    assert_eq!(page.matched, Some(MATCH_COUNT_LIMIT));
    assert!(page.matched_more);
    assert_eq!(all_pages(&s, q("ok")).await as i64, TRACES);
    let errors = TraceQuery {
        statuses: vec![SpanStatus::Error],
        ..q("ok common")
    };
    // The odd traces failed, and the rare ones (7, 1,007 … 10,007) are all odd.
    assert_eq!(all_pages(&s, errors).await as i64, TRACES / 2 - 11);
    assert_eq!(found(&s, q("rare")).await.len(), 11);

    // Across the project, more of the newest traces match than the first page
    // holds, so it is tested trace by trace: the same page, newest first.
    let everywhere = TraceQuery {
        limit: 20,
        ..query(None, Some("alpha"), "ok")
    };
    let ids = |page: &treeline_wire::TraceList| {
        page.traces
            .iter()
            .map(|t| t.trace_id.clone())
            .collect::<Vec<_>>()
    };
    let across = s.reads().list_traces(&everywhere).await.expect("list");
    assert_eq!(ids(&across), ids(&page));
    assert!(across.traces.iter().all(|t| t.text_match.is_some()));
    assert_eq!(all_pages(&s, everywhere).await as i64, TRACES);
}

/// A word in more bodies than a list gathers (200,000) is tested trace by trace,
/// with the same answers, and no count. So, on PostgreSQL, is a word a quarter of
/// a large run's newest traces hold, whose matches are costly to count there.
async fn a_word_in_most_bodies_is_tested_trace_by_trace(t: TestStore) {
    let s = t.store.clone();
    s.upsert_run("huge", &in_project("alpha"), 1).await.unwrap();
    let bodies = |i: usize| {
        let said = if i % 10_000 == 3 { "lost" } else { "found" };
        let often = if i.is_multiple_of(3) { " often" } else { "" };
        json!({"input": format!("{said} a{often}"), "output": "found b", "error": "found c"})
    };
    let mut events = Vec::new();
    for i in 0..67_000 {
        let id = format!("t{i:05}");
        let mut opened = with(open(&id, "root", None, "rollout", i as i64), bodies(i));
        let shut = with(
            close(
                &id,
                "root",
                if i % 3 == 0 { "error" } else { "ok" },
                i as i64 + 1,
            ),
            json!({"output": bodies(i)["output"], "error": bodies(i)["error"]}),
        );
        if let Some(o) = opened.as_object_mut() {
            o.remove("output");
            o.remove("error");
        }
        events.push(opened);
        events.push(shut);
        if events.len() >= 9_000 {
            write(&s, "huge", &events).await;
            events.clear();
        }
    }
    write(&s, "huge", &events).await;
    let q = |text: &str| TraceQuery {
        limit: 50,
        statuses: vec![SpanStatus::Error],
        ..query(Some("huge"), None, text)
    };
    let page = s.reads().list_traces(&q("found")).await.expect("list");
    assert_eq!(page.traces.len(), 50);
    assert_eq!(page.matched, None, "not counted");
    assert!(page.traces.iter().all(|t| t.status == SpanStatus::Error));
    let hit = page.traces[0].text_match.as_ref().expect("a match");
    assert_eq!(hit.field, BodyField::Input);
    assert_eq!(all_pages(&s, q("found a")).await, 22_331);
    assert_eq!(found(&s, q("lost")).await, ["t00003", "t30003", "t60003"]);
    let often = s.reads().list_traces(&q("often")).await.expect("list");
    assert_eq!(often.traces.len(), 50);
    // SQLite counts the 22,334 to the count's bound; PostgreSQL does not count.
    let counted = t.url.starts_with("sqlite").then_some(MATCH_COUNT_LIMIT);
    assert_eq!(often.matched, counted, "counted on SQLite only");
    assert_eq!(often.matched_more, t.url.starts_with("sqlite"));
    assert_eq!(all_pages(&s, q("often")).await, 22_334);
}

/// A deleted run's words go with it: a run made again under its id finds only its
/// own.
async fn a_deleted_runs_words_go_with_it(t: TestStore) {
    let s = &t.store;
    s.upsert_run("r1", &in_project("alpha"), 1).await.unwrap();
    write(
        s,
        "r1",
        &trace("t1", json!("ephemeral words"), Value::Null, "ok"),
    )
    .await;
    s.delete_run("r1", 100).await.unwrap();
    while s.purge_step(1_000).await.unwrap().is_some() {}
    let docs = if t.url.starts_with("sqlite") {
        "SELECT COUNT(*) FROM span_docs"
    } else {
        "SELECT COUNT(*) FROM span_words"
    };
    assert_eq!(t.count(docs).await, 0);
    s.upsert_run("r1", &in_project("alpha"), 200).await.unwrap();
    write(
        s,
        "r1",
        &trace("t1", json!("fresh words"), Value::Null, "ok"),
    )
    .await;
    assert_eq!(
        found(s, query(Some("r1"), None, "ephemeral")).await,
        Vec::<String>::new()
    );
    assert_eq!(found(s, query(Some("r1"), None, "fresh")).await, ["t1"]);
}

/// Spans stored before the index (an upgraded database) are indexed in steps, from
/// the cursor the migration leaves, and found afterwards; the cursor then goes.
async fn bodies_stored_before_the_index_are_indexed_in_steps(t: TestStore) {
    let s = &t.store;
    s.upsert_run("r1", &in_project("alpha"), 1).await.unwrap();
    s.upsert_run("r2", &in_project("beta"), 1).await.unwrap();
    for (run, n) in [("r1", 700), ("r2", 300)] {
        let events: Vec<Value> = (0..n)
            .map(|i| {
                with(
                    open(&format!("{run}-t{i:04}"), "root", None, "rollout", i),
                    json!({"input": format!("older words {run}")}),
                )
            })
            .collect();
        write(s, run, &events).await;
    }
    // As a database from before the index: no words, and the cursor at the start.
    let docs = if t.url.starts_with("sqlite") {
        "span_docs"
    } else {
        "span_words"
    };
    t.execute(&format!("DELETE FROM {docs}")).await;
    t.execute("INSERT INTO text_backfill (id, run_id, trace_id, span_id) VALUES (1, '', '', '')")
        .await;
    assert!(found(s, query(Some("r1"), None, "older")).await.is_empty());
    let mut steps = Vec::new();
    while let Some(n) = s.text_backfill_step().await.expect("a step") {
        steps.push(n);
    }
    assert_eq!(steps, [500, 500, 0]);
    assert_eq!(t.count("SELECT COUNT(*) FROM text_backfill").await, 0);
    assert_eq!(all_pages(s, query(Some("r1"), None, "older r1")).await, 700);
    assert_eq!(all_pages(s, query(None, Some("beta"), "older")).await, 300);
    assert_eq!(s.text_backfill_step().await.expect("none left"), None);
}

on_both!(tokio::test, |t| t.store.clone();
    words_phrases_case_and_scripts_match_inside_bodies,
    chinese_japanese_and_korean_words_are_found_inside_a_run,
    a_search_combines_with_filters_and_pages_and_says_where_it_matched,
    a_search_past_the_listed_traces_gathers_them,
);

mod common_words {
    use super::*;
    on_both!(tokio::test, |t| t;
        a_word_in_most_bodies_is_tested_trace_by_trace,
    );
}

mod deletion {
    use super::*;
    on_both!(tokio::test, |t| t;
        a_deleted_runs_words_go_with_it,
        bodies_stored_before_the_index_are_indexed_in_steps,
    );
}
