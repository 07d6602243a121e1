//! Annotations: written in place per target, name and author; a name keeps one
//! type in a run; a missing target and a full one are refused with nothing kept.

use crate::common::on_both;
use crate::common::{close, open, run, write};
use serde_json::json;
use treeline_server::store::{StoreError, StoreResult, TraceQuery, TraceSort};
use treeline_wire::annotations::{
    Annotation, Author, NoteValue, NoteWrite, Source, MAX_PER_TARGET,
};
use treeline_wire::filter::TraceFilter;

use super::trace_lists::every_page;
use super::S;

fn note(span: Option<&str>, name: &str, value: NoteValue) -> NoteWrite {
    NoteWrite {
        span_id: span.map(str::to_string),
        name: name.into(),
        value,
        comment: None,
    }
}

/// `who`'s annotation `n` on trace `trace` of run r1, at time `at`.
async fn put(
    s: &S,
    trace: &str,
    n: &NoteWrite,
    who: &str,
    at: i64,
) -> StoreResult<(Annotation, bool)> {
    let author = Author {
        key_id: who.into(),
        name: format!("{who}'s key"),
    };
    s.annotate("r1", trace, n, &author, Source::Person, at)
        .await
}

async fn listed(s: &S, trace: &str, span: Option<&str>) -> Vec<Annotation> {
    s.reads()
        .annotations("r1", trace, span)
        .await
        .expect("annotations")
        .annotations
}

async fn two_traces(s: &S) {
    run(s, "r1").await;
    for t in ["t1", "t2"] {
        write(
            s,
            "r1",
            &[
                open(t, "root", None, "agent", 0),
                open(t, "tool", Some("root"), "tool", 1),
                close(t, "tool", "ok", 2),
                close(t, "root", "ok", 3),
            ],
        )
        .await;
    }
}

async fn an_annotation_is_updated_in_place_per_author(s: S) {
    two_traces(&s).await;
    let text = |t: &str| NoteValue::Text(t.into());
    let (first, created) = put(&s, "t1", &note(None, "label", text("hack")), "k1", 10)
        .await
        .unwrap();
    assert!(created);
    assert_eq!((first.created_us, first.updated_us), (10, 10));
    let mut changed = note(None, "label", text("fine"));
    changed.comment = Some("looked again".into());
    let (second, created) = put(&s, "t1", &changed, "k1", 20).await.unwrap();
    assert!(
        !created,
        "the same target, name and author is one annotation"
    );
    assert_eq!((second.created_us, second.updated_us), (10, 20));
    assert_eq!(
        (second.value.clone(), second.comment.as_deref()),
        (json!("fine"), Some("looked again"))
    );
    put(&s, "t1", &note(None, "label", text("hack")), "k2", 30)
        .await
        .unwrap();
    put(
        &s,
        "t1",
        &note(Some("tool"), "score", NoteValue::Number(0.25)),
        "k1",
        40,
    )
    .await
    .unwrap();
    put(
        &s,
        "t1",
        &note(Some("tool"), "ok", NoteValue::Bool(false)),
        "k1",
        50,
    )
    .await
    .unwrap();

    let got: Vec<_> = listed(&s, "t1", None)
        .await
        .into_iter()
        .map(|a| (a.span_id, a.name, a.author.key_id, a.value, a.kind))
        .collect();
    let row = |span: Option<&str>, name: &str, who: &str, value, kind: &str| {
        (
            span.map(String::from),
            name.to_string(),
            who.to_string(),
            value,
            kind.to_string(),
        )
    };
    assert_eq!(
        got,
        [
            row(None, "label", "k1", json!("fine"), "string"),
            row(None, "label", "k2", json!("hack"), "string"),
            row(Some("tool"), "ok", "k1", json!(false), "boolean"),
            row(Some("tool"), "score", "k1", json!(0.25), "number"),
        ]
    );
    assert_eq!(listed(&s, "t1", Some("tool")).await.len(), 2);
    assert!(listed(&s, "t2", None).await.is_empty());

    assert!(s.unannotate("r1", "t1", None, "label", "k1").await.unwrap());
    assert!(!s.unannotate("r1", "t1", None, "label", "k1").await.unwrap());
    assert_eq!(
        listed(&s, "t1", None).await.len(),
        3,
        "k2's label and the span's two stay"
    );
}

async fn a_name_keeps_its_type_and_targets_must_exist(s: S) {
    two_traces(&s).await;
    put(
        &s,
        "t1",
        &note(None, "score", NoteValue::Number(1.0)),
        "k1",
        1,
    )
    .await
    .unwrap();
    let e = put(
        &s,
        "t2",
        &note(None, "score", NoteValue::Text("high".into())),
        "k1",
        2,
    )
    .await
    .expect_err("a string where the run's scores are numbers");
    let StoreError::Invalid(e) = e else {
        panic!("{e:?}")
    };
    assert!(
        e.message.contains("string") && e.message.contains("number"),
        "{}",
        e.message
    );
    // The only annotation of a name may change its type: nothing else disagrees.
    put(
        &s,
        "t1",
        &note(None, "score", NoteValue::Bool(true)),
        "k1",
        3,
    )
    .await
    .unwrap();

    let one = NoteValue::Number(1.0);
    for (trace, span, code) in [
        ("t1", Some("nope"), "span_not_found"),
        ("t9", None, "trace_not_found"),
    ] {
        match put(&s, trace, &note(span, "x", one.clone()), "k1", 4).await {
            Err(StoreError::NotFound { code: c, .. }) => assert_eq!(c, code),
            other => panic!("{trace} {span:?}: {other:?}"),
        }
    }
    let author = Author::default();
    assert!(matches!(
        s.annotate(
            "nope",
            "t1",
            &note(None, "x", one),
            &author,
            Source::Code,
            4
        )
        .await,
        Err(StoreError::RunNotFound(_))
    ));
    assert_eq!(listed(&s, "t1", None).await.len(), 1);
    assert!(listed(&s, "t9", None).await.is_empty());
}

async fn a_full_target_refuses_a_new_name_but_updates_an_old_one(s: S) {
    two_traces(&s).await;
    let on_tool = |name: &str, v: f64| note(Some("tool"), name, NoteValue::Number(v));
    for i in 0..MAX_PER_TARGET {
        put(&s, "t1", &on_tool(&format!("n{i}"), 1.0), "k1", i)
            .await
            .unwrap();
    }
    match put(&s, "t1", &on_tool("one_more", 1.0), "k1", 500).await {
        Err(StoreError::Invalid(e)) => assert_eq!(e.code, "too_many_annotations"),
        other => panic!("{other:?}"),
    }
    put(&s, "t1", &on_tool("n0", 2.0), "k1", 501)
        .await
        .expect("an update adds nothing");
    // The trace itself is another target.
    put(
        &s,
        "t1",
        &note(None, "one_more", NoteValue::Number(1.0)),
        "k1",
        502,
    )
    .await
    .unwrap();
    assert_eq!(
        listed(&s, "t1", None).await.len() as i64,
        MAX_PER_TARGET + 1
    );
}

/// The traces of r1 that `filters` keep, by id.
async fn matching(s: &S, filters: &[&str]) -> Vec<String> {
    let query = TraceQuery {
        run_id: Some("r1".into()),
        limit: 50,
        filters: super::filters(filters),
        ..Default::default()
    };
    let mut ids: Vec<String> = s
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

async fn traces_are_found_and_listed_by_their_annotations(s: S) {
    run(&s, "r1").await;
    for t in ["t1", "t2", "t3", "t4"] {
        write(
            &s,
            "r1",
            &[
                open(t, "root", None, "agent", 0),
                open(t, "tool", Some("root"), "tool", 1),
            ],
        )
        .await;
    }
    let text = |t: &str| NoteValue::Text(t.into());
    put(&s, "t1", &note(None, "label", text("hack")), "k1", 1)
        .await
        .unwrap();
    put(
        &s,
        "t1",
        &note(Some("tool"), "score", NoteValue::Number(3.0)),
        "k1",
        2,
    )
    .await
    .unwrap();
    put(
        &s,
        "t1",
        &note(Some("tool"), "label", text("hack")),
        "k2",
        3,
    )
    .await
    .unwrap();
    put(&s, "t2", &note(None, "label", text("fine")), "k2", 4)
        .await
        .unwrap();
    put(
        &s,
        "t2",
        &note(Some("tool"), "score", NoteValue::Number(1.0)),
        "k2",
        5,
    )
    .await
    .unwrap();
    put(
        &s,
        "t3",
        &note(None, "verdict", NoteValue::Bool(true)),
        "k1",
        6,
    )
    .await
    .unwrap();

    let cases: &[(&[&str], &[&str])] = &[
        (&["note.label = hack"], &["t1"]),
        (&["note.label exists"], &["t1", "t2"]),
        (&["note.score > 2"], &["t1"]),
        (&["note.score >= 1"], &["t1", "t2"]),
        (&["note.label != hack"], &["t2"]),
        (&["note.label in (hack, fine)"], &["t1", "t2"]),
        (&["note.label not in (hack)"], &["t2"]),
        (&["note.verdict = true"], &["t3"]),
        (&["note.verdict = false"], &[]),
        (&["note.verdict != false"], &["t3"]),
        // A number against a string annotation matches nothing, as with attributes.
        (&["note.score = hack"], &[]),
        (&["note.label = 3"], &[]),
        (&["note.nobody exists"], &[]),
        // With other filters: each must hold.
        (&["note.score exists", "note.label = fine"], &["t2"]),
        (&["note.label exists", "span_count >= 2"], &["t1", "t2"]),
    ];
    for (filters, want) in cases {
        assert_eq!(matching(&s, filters).await, *want, "{filters:?}");
    }

    // The list's rows carry chips: by name and value, the most said first.
    let page = s
        .reads()
        .list_traces(&TraceQuery {
            run_id: Some("r1".into()),
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap();
    let chips = |id: &str| -> Vec<(String, serde_json::Value, i64)> {
        page.traces
            .iter()
            .find(|t| t.trace_id == id)
            .map(|t| {
                t.notes
                    .iter()
                    .map(|c| (c.name.clone(), c.value.clone(), c.count))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        chips("t1"),
        [
            ("label".into(), json!("hack"), 2),
            ("score".into(), json!(3.0), 1)
        ]
    );
    assert_eq!(chips("t3"), [("verdict".into(), json!(true), 1)]);
    assert!(chips("t4").is_empty());

    // The names offered to the filter builder, with types, ranges and values.
    let keys = s.reads().attribute_keys("r1").await.unwrap().notes;
    let got: Vec<_> = keys
        .iter()
        .map(|k| {
            let values: Vec<_> = k
                .values
                .iter()
                .map(|v| (v.value.as_str(), v.traces))
                .collect();
            (
                k.key.as_str(),
                k.kind.as_str(),
                k.traces,
                k.min,
                k.max,
                values,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "label",
                "string",
                2,
                None,
                None,
                vec![("fine", 1), ("hack", 1)]
            ),
            ("score", "number", 2, Some(1.0), Some(3.0), vec![]),
            ("verdict", "boolean", 1, None, None, vec![("true", 1)]),
        ]
    );
}

async fn traces_sort_by_a_number_annotation_and_page_without_gaps(s: S) {
    run(&s, "r1").await;
    for (i, t) in ["t1", "t2", "t3", "t4", "t5", "t6"].iter().enumerate() {
        let at = 10 * i as i64;
        write(
            &s,
            "r1",
            &[
                open(t, "root", None, "agent", at),
                open(t, "tool", Some("root"), "tool", at + 1),
            ],
        )
        .await;
    }
    let score = |n: f64| NoteValue::Number(n);
    // t1: 3 by k1 on the trace, 5 by k2 on a span: it sorts by the greater.
    put(&s, "t1", &note(None, "score", score(3.0)), "k1", 1)
        .await
        .unwrap();
    put(&s, "t1", &note(Some("tool"), "score", score(5.0)), "k2", 2)
        .await
        .unwrap();
    put(&s, "t2", &note(None, "score", score(1.0)), "k1", 3)
        .await
        .unwrap();
    put(&s, "t3", &note(None, "score", score(4.0)), "k1", 4)
        .await
        .unwrap();
    // t3's greatest twice, by two authors on two targets: it is listed once.
    put(&s, "t3", &note(Some("tool"), "score", score(4.0)), "k2", 4)
        .await
        .unwrap();
    // t4 and t6 have a verdict only, t5 nothing.
    put(
        &s,
        "t4",
        &note(None, "verdict", NoteValue::Bool(true)),
        "k1",
        5,
    )
    .await
    .unwrap();
    put(
        &s,
        "t6",
        &note(None, "verdict", NoteValue::Bool(false)),
        "k1",
        6,
    )
    .await
    .unwrap();
    for ascending in [false, true] {
        let mut want = vec!["t2", "t3", "t1"];
        if !ascending {
            want.reverse();
        }
        // A run's list groups its annotations; a project's walks them in order.
        let scopes = [
            (Some("r1".to_string()), None),
            (None, Some("proj".to_string())),
        ];
        for ((run_id, project), limit) in scopes
            .into_iter()
            .flat_map(|scope| [1, 2, 3, 4, 50].map(|limit| (scope.clone(), limit)))
        {
            let seen = every_page(
                &s,
                TraceQuery {
                    run_id: run_id.clone(),
                    project: project.clone(),
                    sort: TraceSort::Note("score".into()),
                    ascending,
                    limit,
                    ..Default::default()
                },
            )
            .await;
            let scope = run_id.or(project);
            assert_eq!(
                seen.len(),
                6,
                "every trace once, {scope:?}, limit {limit}: {seen:?}"
            );
            assert_eq!(
                seen[..3],
                want,
                "ascending: {ascending}, {scope:?}, limit {limit}"
            );
            let mut rest = seen[3..].to_vec();
            rest.sort();
            assert_eq!(rest, ["t4", "t5", "t6"], "the rest, after the scores");
        }
        // A boolean sorts as 0 and 1; across the project, with a filter.
        let seen = every_page(
            &s,
            TraceQuery {
                project: Some("proj".into()),
                sort: TraceSort::Note("verdict".into()),
                filters: vec![TraceFilter::parse("note.verdict exists").expect("valid")],
                ascending,
                limit: 1,
                ..Default::default()
            },
        )
        .await;
        let want = if ascending {
            ["t6", "t4"]
        } else {
            ["t4", "t6"]
        };
        assert_eq!(seen, want, "ascending: {ascending}");
    }
}

on_both!(tokio::test, |t| t.store.clone();
    traces_sort_by_a_number_annotation_and_page_without_gaps,
    traces_are_found_and_listed_by_their_annotations,
    an_annotation_is_updated_in_place_per_author,
    a_name_keeps_its_type_and_targets_must_exist,
    a_full_target_refuses_a_new_name_but_updates_an_old_one,
);
