//! Annotations: written in place per target, name and author; a name keeps one
//! type in a run; a missing target and a full one are refused with nothing kept.

use crate::common::on_both;
use crate::common::{close, open, run, write};
use serde_json::json;
use treeline_server::store::StoreError;
use treeline_wire::annotations::{Author, NoteValue, NoteWrite, Source, MAX_PER_TARGET};

use super::S;

fn note(span: Option<&str>, name: &str, value: NoteValue) -> NoteWrite {
    NoteWrite {
        span_id: span.map(str::to_string),
        name: name.into(),
        value,
        comment: None,
    }
}

fn author(id: &str) -> Author {
    Author {
        key_id: id.into(),
        name: format!("{id}'s key"),
    }
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
    let ann = |n: NoteWrite, who: &'static str, at: i64| {
        let s = s.clone();
        async move {
            s.annotate("r1", "t1", &n, &author(who), Source::Person, at)
                .await
        }
    };
    let (first, created) = ann(
        note(None, "label", NoteValue::Text("hack".into())),
        "k1",
        10,
    )
    .await
    .unwrap();
    assert!(created);
    assert_eq!((first.created_us, first.updated_us), (10, 10));
    let mut changed = note(None, "label", NoteValue::Text("fine".into()));
    changed.comment = Some("looked again".into());
    let (second, created) = ann(changed, "k1", 20).await.unwrap();
    assert!(
        !created,
        "the same target, name and author is one annotation"
    );
    assert_eq!((second.created_us, second.updated_us), (10, 20));
    assert_eq!(
        (second.value.clone(), second.comment.as_deref()),
        (json!("fine"), Some("looked again"))
    );
    ann(
        note(None, "label", NoteValue::Text("hack".into())),
        "k2",
        30,
    )
    .await
    .unwrap();
    ann(
        note(Some("tool"), "score", NoteValue::Number(0.25)),
        "k1",
        40,
    )
    .await
    .unwrap();
    ann(note(Some("tool"), "ok", NoteValue::Bool(false)), "k1", 50)
        .await
        .unwrap();

    let all = s
        .reads()
        .annotations("r1", "t1", None)
        .await
        .unwrap()
        .annotations;
    let got: Vec<_> = all
        .iter()
        .map(|a| {
            (
                a.span_id.as_deref(),
                a.name.as_str(),
                a.author.key_id.as_str(),
                a.value.clone(),
                a.kind.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (None, "label", "k1", json!("fine"), "string"),
            (None, "label", "k2", json!("hack"), "string"),
            (Some("tool"), "ok", "k1", json!(false), "boolean"),
            (Some("tool"), "score", "k1", json!(0.25), "number"),
        ]
    );
    let tool = s
        .reads()
        .annotations("r1", "t1", Some("tool"))
        .await
        .unwrap()
        .annotations;
    assert_eq!(tool.len(), 2);
    assert!(s
        .reads()
        .annotations("r1", "t2", None)
        .await
        .unwrap()
        .annotations
        .is_empty());

    assert!(s.unannotate("r1", "t1", None, "label", "k1").await.unwrap());
    assert!(!s.unannotate("r1", "t1", None, "label", "k1").await.unwrap());
    let left = s
        .reads()
        .annotations("r1", "t1", None)
        .await
        .unwrap()
        .annotations;
    assert_eq!(left.len(), 3, "k2's label and the span's two stay");
}

async fn a_name_keeps_its_type_and_targets_must_exist(s: S) {
    two_traces(&s).await;
    let k = author("k1");
    s.annotate(
        "r1",
        "t1",
        &note(None, "score", NoteValue::Number(1.0)),
        &k,
        Source::Code,
        1,
    )
    .await
    .unwrap();
    let e = s
        .annotate(
            "r1",
            "t2",
            &note(None, "score", NoteValue::Text("high".into())),
            &k,
            Source::Code,
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
    s.annotate(
        "r1",
        "t1",
        &note(None, "score", NoteValue::Bool(true)),
        &k,
        Source::Code,
        3,
    )
    .await
    .unwrap();

    for (trace, span, code) in [
        ("t1", Some("nope"), "span_not_found"),
        ("t9", None, "trace_not_found"),
    ] {
        match s
            .annotate(
                "r1",
                trace,
                &note(span, "x", NoteValue::Number(1.0)),
                &k,
                Source::Code,
                4,
            )
            .await
        {
            Err(StoreError::NotFound { code: c, .. }) => assert_eq!(c, code),
            other => panic!("{trace} {span:?}: {other:?}"),
        }
    }
    assert!(matches!(
        s.annotate(
            "nope",
            "t1",
            &note(None, "x", NoteValue::Number(1.0)),
            &k,
            Source::Code,
            4
        )
        .await,
        Err(StoreError::RunNotFound(_))
    ));
    assert_eq!(
        s.reads()
            .annotations("r1", "t1", None)
            .await
            .unwrap()
            .annotations
            .len(),
        1
    );
    assert!(s
        .reads()
        .annotations("r1", "t9", None)
        .await
        .unwrap()
        .annotations
        .is_empty());
}

async fn a_full_target_refuses_a_new_name_but_updates_an_old_one(s: S) {
    two_traces(&s).await;
    let k = author("k1");
    for i in 0..MAX_PER_TARGET {
        s.annotate(
            "r1",
            "t1",
            &note(Some("tool"), &format!("n{i}"), NoteValue::Number(1.0)),
            &k,
            Source::Code,
            i,
        )
        .await
        .unwrap();
    }
    match s
        .annotate(
            "r1",
            "t1",
            &note(Some("tool"), "one_more", NoteValue::Number(1.0)),
            &k,
            Source::Code,
            500,
        )
        .await
    {
        Err(StoreError::Invalid(e)) => assert_eq!(e.code, "too_many_annotations"),
        other => panic!("{other:?}"),
    }
    s.annotate(
        "r1",
        "t1",
        &note(Some("tool"), "n0", NoteValue::Number(2.0)),
        &k,
        Source::Code,
        501,
    )
    .await
    .expect("an update adds nothing");
    // The trace itself is another target.
    s.annotate(
        "r1",
        "t1",
        &note(None, "one_more", NoteValue::Number(1.0)),
        &k,
        Source::Code,
        502,
    )
    .await
    .unwrap();
    let all = s
        .reads()
        .annotations("r1", "t1", None)
        .await
        .unwrap()
        .annotations;
    assert_eq!(all.len() as i64, MAX_PER_TARGET + 1);
}

on_both!(tokio::test, |t| t.store.clone();
    an_annotation_is_updated_in_place_per_author,
    a_name_keeps_its_type_and_targets_must_exist,
    a_full_target_refuses_a_new_name_but_updates_an_old_one,
);
