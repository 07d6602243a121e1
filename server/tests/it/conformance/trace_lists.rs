//! Trace lists: filters, search, sorting, paging, match counts and attribute keys.

use std::collections::HashSet;

use crate::common::on_both;
use crate::common::{close, open, run, with, write};
use serde_json::{json, Value};
use treeline_server::store::{Cursor, TraceQuery, TraceSort};
use treeline_wire::annotations::{Author, NoteValue, NoteWrite, Source};
use treeline_wire::filter::TraceFilter;
use treeline_wire::{RunUpsert, SpanKind, SpanStatus};

use super::S;

async fn trace_lists_filter_search_and_page_without_duplicates(s: S) {
    run(&s, "r1").await;
    run(&s, "r2").await;
    for i in 0..30 {
        let t = format!("trace{i:02}");
        let name = if i % 3 == 0 {
            format!("rollout.step{i}.g2")
        } else {
            format!("eval {i}")
        };
        let kind = if i % 2 == 0 { "rollout" } else { "evaluator" };
        let o = with(
            open(&t, "root", None, kind, i),
            json!({"name": name, "step": i, "thread_id": format!("worker-{}", i % 4)}),
        );
        write(
            &s,
            "r1",
            &[
                o,
                close(
                    &t,
                    "root",
                    if i % 5 == 0 { "error" } else { "ok" },
                    100 + 2 * i,
                ),
            ],
        )
        .await;
    }
    write(&s, "r2", &[open("other", "root", None, "rollout", 0)]).await;
    let base = TraceQuery {
        run_id: Some("r1".into()),
        limit: 50,
        ..Default::default()
    };
    assert_eq!(s.reads().list_traces(&base).await.unwrap().traces.len(), 30);
    let errors = TraceQuery {
        statuses: vec![SpanStatus::Error],
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&errors).await.unwrap().traces.len(),
        6
    );
    let kinds = TraceQuery {
        kinds: SpanKind::bits_of(&[SpanKind::Evaluator]),
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&kinds).await.unwrap().traces.len(),
        15
    );
    let search = TraceQuery {
        terms: vec!["ROLLOUT".into(), "step".into()],
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&search).await.unwrap().traces.len(),
        10
    );
    let by_thread = TraceQuery {
        terms: vec!["worker-1".into()],
        ..base.clone()
    };
    assert_eq!(
        s.reads()
            .list_traces(&by_thread)
            .await
            .unwrap()
            .traces
            .len(),
        8
    );
    let by_id = TraceQuery {
        terms: vec!["trace2".into()],
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&by_id).await.unwrap().traces.len(),
        10
    );
    let pinned = TraceQuery {
        min_step: Some(7),
        max_step: Some(7),
        ..base.clone()
    };
    let pinned = s.reads().list_traces(&pinned).await.unwrap().traces;
    assert_eq!((pinned.len(), pinned[0].trace_id.as_str()), (1, "trace07"));
    let everywhere = TraceQuery {
        limit: 100,
        ..Default::default()
    };
    assert_eq!(
        s.reads()
            .list_traces(&everywhere)
            .await
            .unwrap()
            .traces
            .len(),
        31
    );

    for sort in [
        TraceSort::Updated,
        TraceSort::Duration,
        TraceSort::Spans,
        TraceSort::Errors,
        TraceSort::Iterations,
        TraceSort::Tokens,
    ] {
        // What the list sorts by, as the trace shows it; ties go by trace id.
        let value = |t: &treeline_wire::TraceSummary| match sort {
            TraceSort::Updated => t.updated_us,
            TraceSort::Duration => t.duration_us.unwrap_or(-1),
            TraceSort::Spans => t.span_count,
            TraceSort::Errors => t.error_count,
            TraceSort::Iterations => t.iteration_count,
            _ => t.token_count,
        };
        for ascending in [false, true] {
            let mut order = Vec::new();
            let mut seen = Vec::new();
            let mut query = TraceQuery {
                limit: 7,
                sort: sort.clone(),
                ascending,
                ..base.clone()
            };
            loop {
                let page = s.reads().list_traces(&query).await.unwrap();
                seen.extend(page.traces.iter().map(|t| t.trace_id.clone()));
                order.extend(page.traces.iter().map(|t| (value(t), t.trace_id.clone())));
                match page.next_cursor {
                    Some(c) => query.cursor = Some(Cursor::decode(&c).unwrap()),
                    None => break,
                }
            }
            let unique: HashSet<_> = seen.iter().collect();
            assert_eq!(
                (seen.len(), unique.len()),
                (30, 30),
                "{sort:?} ascending={ascending}"
            );
            let in_order = order
                .windows(2)
                .all(|w| if ascending { w[0] < w[1] } else { w[0] > w[1] });
            assert!(in_order, "{sort:?} ascending={ascending}: {order:?}");
        }
    }
    let by_duration = TraceQuery {
        sort: TraceSort::Duration,
        limit: 1,
        ..base.clone()
    };
    assert_eq!(
        s.reads().list_traces(&by_duration).await.unwrap().traces[0].trace_id,
        "trace29"
    );
}

/// Search resolves its terms through the name list and the id-prefix indexes: a term
/// finds what a scan would, in the scope asked for, and one that matches nothing
/// anywhere answers an empty list.
async fn search_finds_names_and_id_prefixes_in_scope(s: S) {
    let in_project = |project: &str| RunUpsert {
        project: project.into(),
        ..Default::default()
    };
    s.upsert_run("r1", &in_project("alpha"), 1).await.unwrap();
    s.upsert_run("r2", &in_project("alpha"), 1).await.unwrap();
    s.upsert_run("r3", &in_project("beta"), 1).await.unwrap();
    let root = |trace: &str, name: &str, extra: serde_json::Value| {
        let named = with(
            open(trace, "root", None, "rollout", 10),
            json!({ "name": name }),
        );
        with(named, extra)
    };
    write(
        &s,
        "r1",
        &[
            root("ABCdef01", "Math rollout", json!({"thread_id": "Worker-7"})),
            root(
                "t-2",
                "math rollout",
                json!({"attributes": {"rollout_id": "Prompt-0042"}}),
            ),
            root("t-3", "100% done", json!({})),
        ],
    )
    .await;
    // A child first: the trace is listed under a placeholder name until its root
    // names it.
    write(&s, "r2", &[open("late", "c", Some("root"), "tool", 5)]).await;
    write(&s, "r2", &[root("late", "late root", json!({}))]).await;
    write(&s, "r3", &[root("t-9", "rare beta name", json!({}))]).await;

    let found = |project: Option<&str>, run: Option<&str>, terms: &[&str]| {
        let query = TraceQuery {
            project: project.map(Into::into),
            run_id: run.map(Into::into),
            terms: terms.iter().map(|t| t.to_string()).collect(),
            limit: 1,
            ..Default::default()
        };
        every_id_sorted(s.clone(), query)
    };
    let alpha = Some("alpha");
    assert_eq!(
        found(alpha, None, &["nothing-here"]).await,
        Vec::<String>::new()
    );
    assert_eq!(found(alpha, None, &["abcD"]).await, ["ABCdef01"]);
    assert_eq!(found(alpha, None, &["worker-"]).await, ["ABCdef01"]);
    assert_eq!(found(alpha, None, &["prompt-00"]).await, ["t-2"]);
    assert_eq!(found(alpha, None, &["ROLLOUT"]).await, ["ABCdef01", "t-2"]);
    assert_eq!(found(alpha, None, &["rollout", "t-"]).await, ["t-2"]);
    assert_eq!(found(alpha, None, &["late root"]).await, ["late"]);
    // Wildcards are literal: `%` only in a name that has one, `_` nowhere.
    assert_eq!(found(alpha, None, &["0%"]).await, ["t-3"]);
    assert_eq!(found(alpha, None, &["t_"]).await, Vec::<String>::new());
    // Scope: another project's name, another run's id.
    assert_eq!(found(alpha, None, &["rare"]).await, Vec::<String>::new());
    assert_eq!(found(None, None, &["rare"]).await, ["t-9"]);
    assert_eq!(found(Some("beta"), None, &["t-"]).await, ["t-9"]);
    assert_eq!(
        found(None, Some("r1"), &["late"]).await,
        Vec::<String>::new()
    );
    assert_eq!(found(None, Some("r2"), &["late"]).await, ["late"]);

    // More ids than the search lists: the term is matched trace by trace, and the
    // pages still hold each match once.
    let many: Vec<_> = (0..600)
        .map(|i| open(&format!("bulk-{i:03}"), "root", None, "rollout", i))
        .collect();
    write(&s, "r1", &many).await;
    let query = TraceQuery {
        project: Some("alpha".into()),
        terms: vec!["BULK-".into()],
        limit: 250,
        ..Default::default()
    };
    let ids = every_page(&s, query).await;
    assert_eq!(ids.len(), 600);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 600);
}

/// A term in more names than a search lists (`rollout`, in 520) beside one in a few
/// (`step12`): the few names all holding the first term answer alone; when one of
/// them does not, the first term is still tested on each trace, through its ids too.
async fn a_term_in_too_many_names_narrows_with_a_listed_one(s: S) {
    run(&s, "r1").await;
    let root = |trace: &str, name: &str| {
        with(
            open(trace, "root", None, "rollout", 10),
            json!({ "name": name }),
        )
    };
    let mut roots: Vec<Value> = (0..520)
        .map(|i| root(&format!("t{i}"), &format!("rollout.step{i}")))
        .collect();
    roots.push(root("rollout-x", "step77 other"));
    roots.push(root("plain", "step77 misc"));
    roots.push(root("upper", "ROLLOUT.STEP77 upper"));
    write(&s, "r1", &roots).await;
    let found = |terms: &[&str]| {
        let query = TraceQuery {
            run_id: Some("r1".into()),
            terms: terms.iter().map(|t| t.to_string()).collect(),
            limit: 4,
            ..Default::default()
        };
        every_id_sorted(s.clone(), query)
    };
    let step12: Vec<String> = ["t12", "t120", "t121", "t122", "t123", "t124"]
        .into_iter()
        .chain(["t125", "t126", "t127", "t128", "t129"])
        .map(Into::into)
        .collect();
    assert_eq!(found(&["rollout", "step12"]).await, step12);
    assert_eq!(found(&["ROLLOUT", "Step12"]).await, step12);
    assert_eq!(
        found(&["rollout", "step77"]).await,
        ["rollout-x", "t77", "upper"]
    );
    assert_eq!(found(&["rollout", "misc"]).await, Vec::<String>::new());
}

/// Twelve traces of one run with root attributes of every type, three of them with
/// a failed child under a root that recovered.
async fn attribute_run(s: &S) {
    run(s, "r1").await;
    for i in 0..12i64 {
        let t = format!("t{i:02}");
        let mut attributes = json!({
            "task": if i % 2 == 0 { "math word" } else { "code" },
            "solved": i % 3 == 0,
        });
        if i == 0 {
            // An integer, as a JSON encoder may write 0.0: it sorts among the reals.
            attributes["reward"] = json!(0);
        } else if i < 10 {
            attributes["reward"] = json!(i as f64 / 10.0);
        } else if i == 10 {
            attributes["reward"] = json!("high");
        }
        let mut events = vec![with(
            open(&t, "root", None, "rollout", i * 10),
            json!({"step": i, "attributes": attributes}),
        )];
        if i % 4 == 1 {
            events.push(open(&t, "tool", Some("root"), "tool", i * 10 + 1));
            events.push(close(&t, "tool", "error", i * 10 + 2));
        }
        events.push(close(&t, "root", "ok", i * 10 + 5));
        write(s, "r1", &events).await;
    }
}

/// The trace ids (their numbers) a list of run r1 with `filters` gives, in id order.
pub(super) async fn matching(s: &S, filters: &[&str]) -> Vec<i64> {
    let scope = TraceQuery {
        run_id: Some("r1".into()),
        ..Default::default()
    };
    matching_in(s, scope, filters).await
}

/// The same, in `scope` (a run or a project).
async fn matching_in(s: &S, scope: TraceQuery, filters: &[&str]) -> Vec<i64> {
    let query = TraceQuery {
        filters: super::filters(filters),
        limit: 100,
        ..scope
    };
    let mut ids: Vec<i64> = s
        .reads()
        .list_traces(&query)
        .await
        .expect("list")
        .traces
        .iter()
        .map(|t| t.trace_id[1..].parse().expect("a number"))
        .collect();
    ids.sort_unstable();
    ids
}

/// Asserts that each case's filters list its traces, in run r1 and across its
/// project `proj`.
async fn assert_in_run_and_project(s: &S, cases: &[(Vec<&str>, Vec<i64>)]) {
    for (filters, want) in cases {
        assert_eq!(&matching(s, filters).await, want, "{filters:?}");
        let project = TraceQuery {
            project: Some("proj".into()),
            ..Default::default()
        };
        let ids = matching_in(s, project, filters).await;
        assert_eq!(&ids, want, "project-wide {filters:?}");
    }
}

/// Four traces whose spans differ by name, kind, status, error type and attribute:
/// t0 and t1 both call `physics.integrate`, which fails only in t0; t1 fails in its
/// reward instead; t3's root fails with an error that is text, not an object.
async fn span_run(s: &S) {
    run(s, "r1").await;
    let root = |t: &str, task: &str| {
        with(
            open(t, "root", None, "rollout", 0),
            json!({"attributes": {"task": task}}),
        )
    };
    let span = |t: &str, id: &str, name: &str, kind: &str, attributes: Value| {
        with(
            open(t, id, Some("root"), kind, 1),
            json!({"name": name, "attributes": attributes}),
        )
    };
    let failed =
        |t: &str, id: &str, error: Value| with(close(t, id, "error", 2), json!({"error": error}));
    let events = [
        root("t0", "a"),
        span(
            "t0",
            "p",
            "physics.integrate",
            "env_step",
            json!({"dt": 0.02}),
        ),
        failed(
            "t0",
            "p",
            json!({"type": "FloatingPointError", "message": "overflow"}),
        ),
        close("t0", "root", "ok", 5),
        root("t1", "b"),
        span(
            "t1",
            "p",
            "physics.integrate",
            "env_step",
            json!({"dt": 0.01}),
        ),
        close("t1", "p", "ok", 2),
        span("t1", "r", "reward", "reward", json!({})),
        failed("t1", "r", json!({"type": "EpisodeAborted"})),
        close("t1", "root", "ok", 5),
        root("t2", "a"),
        span(
            "t2",
            "m",
            "llm",
            "model",
            json!({"model": "small", "cached": true}),
        ),
        close("t2", "m", "ok", 2),
        close("t2", "root", "ok", 5),
        root("t3", "b"),
        failed("t3", "root", json!("the simulator stopped")),
    ];
    write(s, "r1", &events).await;
}

async fn span_filters_hold_on_one_span(s: S) {
    span_run(&s).await;
    let cases: &[(&[&str], &[i64])] = &[
        (&["span.name = physics.integrate"], &[0, 1]),
        // Both on one span: t1's failure is in another span.
        (
            &["span.name = physics.integrate", "span.status = error"],
            &[0],
        ),
        (&["span.status = error"], &[0, 1, 3]),
        (&["span.kind = model"], &[2]),
        (&["span.kind in (model, reward)"], &[1, 2]),
        (&["span.kind != rollout"], &[0, 1, 2]),
        (&["span.name > physics"], &[0, 1, 2, 3]),
        (&["span.name < llm"], &[]),
        (&["span.name exists"], &[0, 1, 2, 3]),
        // The type of an error that is an object; t3's is text.
        (&["span.error_type = FloatingPointError"], &[0]),
        (&["span.error_type exists"], &[0, 1]),
        (&["span.error_type != FloatingPointError"], &[1]),
        (&["span.attr.dt < 0.015"], &[1]),
        (&["span.attr.dt >= 0.01"], &[0, 1]),
        (&["span.attr.dt exists"], &[0, 1]),
        (&["span.attr.dt = \"0.01\""], &[]),
        (&["span.attr.model = small"], &[2]),
        (&["span.attr.cached = true"], &[2]),
        (&["span.attr.cached != true"], &[]),
        // A name is text: against a number nothing matches.
        (&["span.name = 3"], &[]),
        (&["span.name in (llm, reward)"], &[1, 2]),
        (&["span.name in (llm, 3)"], &[2]),
        // A name with another filter: both on one span of the trace.
        (
            &["span.name = physics.integrate", "span.kind = env_step"],
            &[0, 1],
        ),
        (&["span.name = reward", "span.attr.dt exists"], &[]),
        (
            &["span.name = physics.integrate", "span.attr.dt < 0.015"],
            &[1],
        ),
        // With the root's filters and statuses: all hold.
        (&["span.status = error", "attr.task = a"], &[0]),
        (&["span.status = error", "error_count > 0"], &[0, 1, 3]),
    ];
    for (filters, want) in cases {
        assert_eq!(matching(&s, filters).await, *want, "{filters:?}");
        // Across the project (its indexed span filters looked up first), the same.
        let project = TraceQuery {
            project: Some("proj".into()),
            ..Default::default()
        };
        let across = matching_in(&s, project, filters).await;
        assert_eq!(across, *want, "project-wide {filters:?}");
    }
    // A status filter on the root and a span filter together.
    let query = TraceQuery {
        run_id: Some("r1".into()),
        statuses: vec![SpanStatus::Ok],
        filters: vec![TraceFilter::parse("span.status = error").expect("valid")],
        limit: 100,
        ..Default::default()
    };
    let list = s.reads().list_traces(&query).await.expect("list");
    let mut ids: Vec<&str> = list.traces.iter().map(|t| t.trace_id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["t0", "t1"]);
}

/// A span whose children came first was stored without a name until its open;
/// a filter on its name then finds its trace, in the run and across the project.
async fn a_span_opened_after_its_children_is_found_by_its_name(s: S) {
    run(&s, "r1").await;
    let child = open("t5", "c", Some("p"), "tool", 1);
    write(&s, "r1", &[child, close("t5", "c", "ok", 2)]).await;
    let plan = ["span.name = plan"];
    let project = || TraceQuery {
        project: Some("proj".into()),
        ..Default::default()
    };
    assert_eq!(matching(&s, &plan).await, [0_i64; 0]);
    assert_eq!(matching_in(&s, project(), &plan).await, [0_i64; 0]);
    let parent = with(open("t5", "p", None, "rollout", 0), json!({"name": "plan"}));
    write(&s, "r1", &[parent, close("t5", "p", "ok", 3)]).await;
    assert_eq!(matching(&s, &plan).await, [5]);
    assert_eq!(matching_in(&s, project(), &plan).await, [5]);
    assert_eq!(matching(&s, &["span.name = \"tool c\""]).await, [5]);
    // A trace with spans of both names is listed once.
    let names = s
        .reads()
        .list_traces(&TraceQuery {
            run_id: Some("r1".into()),
            filters: super::filters(&["span.name in (plan, \"tool c\")"]),
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(names.traces.len(), 1);
}

/// A span string attribute filter starts from the traces `span_texts` lists: it
/// must still match what each span says now, on one span, in a run and across its
/// project, for a value overwritten by the close (in its batch and in a later
/// one), one too long to list, one sent in a later batch, and values compared
/// byte for byte.
async fn span_strings_found_through_their_index_match_each_spans_attributes(s: S) {
    span_run(&s).await;
    let long = "x".repeat(300);
    let span = |t: &str, id: &str, kind: &str, attributes: Value| {
        with(
            open(t, id, Some("root"), kind, 1),
            json!({ "attributes": attributes }),
        )
    };
    let closed = |t: &str, id: &str, attributes: Value| {
        with(close(t, id, "ok", 2), json!({ "attributes": attributes }))
    };
    let events = [
        open("t20", "root", None, "rollout", 0),
        // Written small, then large: only large matches now.
        span("t20", "m", "model", json!({"model": "small"})),
        closed("t20", "m", json!({"model": "large"})),
        open("t21", "root", None, "rollout", 0),
        span("t21", "m", "model", json!({ "model": long })),
        // Small on one span, the tool kind on another.
        open("t22", "root", None, "rollout", 0),
        span("t22", "m", "model", json!({"model": "small"})),
        span("t22", "k", "tool", json!({"model": 3})),
        open("t23", "root", None, "rollout", 0),
        span(
            "t23",
            "m",
            "model",
            json!({"model": "Small", "lang": "日本語"}),
        ),
        // Written small, then changed to tiny by a later batch; large written
        // twice, the second time beside a new name.
        open("t24", "root", None, "rollout", 0),
        span("t24", "m", "model", json!({"model": "small"})),
        open("t25", "root", None, "rollout", 0),
        span("t25", "m", "model", json!({"model": "large"})),
    ];
    write(&s, "r1", &events).await;
    // A value the close of an earlier batch brings.
    let later = [
        closed("t23", "root", json!({"route": "fast"})),
        closed("t24", "m", json!({"model": "tiny"})),
        closed("t25", "m", json!({"model": "large", "seed": "7"})),
    ];
    write(&s, "r1", &later).await;
    let long_filter = format!("span.attr.model = \"{long}\"");
    let cases: Vec<(Vec<&str>, Vec<i64>)> = vec![
        (vec!["span.attr.model = small"], vec![2, 22]),
        (vec!["span.attr.model = large"], vec![20, 25]),
        (vec!["span.attr.model = tiny"], vec![24]),
        (vec!["span.attr.seed = \"7\""], vec![25]),
        (vec!["span.attr.model = Small"], vec![23]),
        (vec![long_filter.as_str()], vec![21]),
        (
            vec!["span.attr.model in (small, large)"],
            vec![2, 20, 22, 25],
        ),
        (vec!["span.attr.model in (large, 3)"], vec![20, 22, 25]),
        (vec!["span.attr.model = 3"], vec![22]),
        (vec!["span.attr.lang = \"日本語\""], vec![23]),
        (vec!["span.attr.route = fast"], vec![23]),
        (vec!["span.attr.model = small", "span.kind = tool"], vec![]),
        (
            vec!["span.attr.model = small", "span.kind = model"],
            vec![2, 22],
        ),
        (vec!["span.attr.model = small", "attr.task = a"], vec![2]),
        // Other strings than one, or ordered after one: a short value's rows prove
        // it, a long one's trace has its spans tested. t24's small is stale.
        (vec!["span.attr.model != small"], vec![20, 21, 23, 24, 25]),
        (vec!["span.attr.model != large"], vec![2, 21, 22, 23, 24]),
        (vec!["span.attr.model != tiny"], vec![2, 20, 21, 22, 23, 25]),
        (
            vec!["span.attr.model not in (small, large)"],
            vec![21, 23, 24],
        ),
        (vec!["span.attr.model > small"], vec![21, 24]),
        (vec!["span.attr.model < b"], vec![23]),
        (vec!["span.attr.model >= tiny"], vec![21, 24]),
        (vec!["span.attr.lang != x"], vec![23]),
        (
            vec!["span.attr.model != small", "span.kind = model"],
            vec![20, 21, 23, 24, 25],
        ),
        (vec!["span.attr.model = medium"], vec![]),
        (vec!["span.attr.nobody = small"], vec![]),
    ];
    assert_in_run_and_project(&s, &cases).await;
    // A first page of one counts every match: the overwritten value is not among them.
    let small = TraceQuery {
        run_id: Some("r1".into()),
        filters: super::filters(&["span.attr.model = small"]),
        limit: 1,
        ..Default::default()
    };
    let first = s.reads().list_traces(&small).await.expect("list");
    assert_eq!((first.traces.len(), first.matched), (1, Some(2)));
    // The same from a trace whose rows are exact and one whose spans are tested.
    let large = TraceQuery {
        filters: super::filters(&["span.attr.model = large"]),
        ..small
    };
    let first = s.reads().list_traces(&large).await.expect("list");
    assert_eq!((first.traces.len(), first.matched), (1, Some(2)));
}

/// A span number or boolean filter starts from the traces `span_ranges` lists
/// (each trace's least and greatest value): it must still match what each span
/// says now, on one span, in a run and across its project, for a bound within a
/// trace's range that no span has, a value a later batch overwrote, and values of
/// other types under the same name; and for a name's presence (`exists`), also
/// through `span_texts`, for values of every type.
async fn span_numbers_found_through_their_ranges_match_each_spans_attributes(s: S) {
    span_run(&s).await;
    let span = |t: &str, id: &str, kind: &str, attributes: Value| {
        with(
            open(t, id, Some("root"), kind, 1),
            json!({ "attributes": attributes }),
        )
    };
    let events = [
        open("t30", "root", None, "rollout", 0),
        span("t30", "a", "model", json!({"tokens": 100})),
        span("t30", "b", "model", json!({"tokens": 900, "cached": true})),
        open("t31", "root", None, "rollout", 0),
        span("t31", "a", "model", json!({"tokens": 500, "cached": false})),
        // 50 at first, 2000 once a later batch closes the span.
        open("t32", "root", None, "rollout", 0),
        span("t32", "a", "model", json!({"tokens": 50})),
        open("t33", "root", None, "rollout", 0),
        span("t33", "a", "model", json!({"tokens": "many"})),
        span("t33", "b", "model", json!({"tokens": 700.5})),
        open("t34", "root", None, "rollout", 0),
        span("t34", "a", "model", json!({"flag": 1, "cached": "true"})),
        open("t35", "root", None, "rollout", 0),
        span("t35", "a", "tool", json!({"tokens": 300})),
        // Values neither listed as strings nor ranged: found by `exists` all the same.
        open("t36", "root", None, "rollout", 0),
        span(
            "t36",
            "a",
            "model",
            json!({"note": "x".repeat(300), "tags": ["a"], "cached": false}),
        ),
        span("t36", "b", "model", json!({"cached": true})),
        // A short note at first, a list once a later batch closes the span.
        open("t37", "root", None, "rollout", 0),
        span("t37", "a", "model", json!({"note": "short"})),
        open("t38", "root", None, "rollout", 0),
        span("t38", "a", "model", json!({"note": "kept"})),
    ];
    write(&s, "r1", &events).await;
    let later = |t: &str, attributes: Value| {
        with(close(t, "a", "ok", 2), json!({ "attributes": attributes }))
    };
    let later = [
        later("t32", json!({"tokens": 2000})),
        later("t37", json!({"note": ["b"]})),
    ];
    write(&s, "r1", &later).await;
    let cases: &[(&[&str], &[i64])] = &[
        (&["span.attr.tokens > 800"], &[30, 32]),
        (&["span.attr.tokens >= 900"], &[30, 32]),
        (&["span.attr.tokens < 100"], &[]),
        (&["span.attr.tokens <= 100"], &[30]),
        (&["span.attr.tokens = 500"], &[31]),
        (&["span.attr.tokens = 700.5"], &[33]),
        // t30's least and greatest, then within its range on none of its spans.
        (&["span.attr.tokens = 100"], &[30]),
        (&["span.attr.tokens = 900"], &[30]),
        (&["span.attr.tokens = 600"], &[]),
        // t32's least once, overwritten since; its greatest now.
        (&["span.attr.tokens = 50"], &[]),
        (&["span.attr.tokens = 2000"], &[32]),
        (&["span.attr.tokens = many"], &[33]),
        (&["span.attr.tokens != 500"], &[30, 32, 33, 35]),
        // t32's least is 50 no longer.
        (&["span.attr.tokens != 2000"], &[30, 31, 33, 35]),
        (&["span.attr.tokens in (100, 600)"], &[30]),
        (&["span.attr.tokens in (600, 50)"], &[]),
        (&["span.attr.tokens in (500, 2000)"], &[31, 32]),
        // t30's greatest, and within its range: listed once.
        (&["span.attr.tokens in (900, 500)"], &[30, 31]),
        (&["span.attr.tokens < 600"], &[30, 31, 35]),
        // Under t30's greatest by its least alone.
        (&["span.attr.tokens < 900"], &[30, 31, 33, 35]),
        (&["span.attr.tokens <= 300"], &[30, 35]),
        (&["span.attr.tokens in (700.5, many)"], &[33]),
        // t30's least and greatest both listed: its spans hold no other number.
        (&["span.attr.tokens not in (100, 900)"], &[31, 32, 33, 35]),
        (&["span.attr.tokens not in (500, 300, 2000)"], &[30, 33]),
        (&["span.attr.cached in (true, false)"], &[2, 30, 31, 36]),
        (&["span.attr.cached in (true)"], &[2, 30, 36]),
        (&["span.attr.cached not in (true)"], &[31, 36]),
        (&["span.attr.cached not in (true, false)"], &[]),
        (&["span.attr.tokens exists"], &[30, 31, 32, 33, 35]),
        (&["span.attr.cached exists"], &[2, 30, 31, 34, 36]),
        (&["span.attr.dt exists"], &[0, 1]),
        (&["span.attr.note exists"], &[36, 37, 38]),
        (&["span.attr.note = short"], &[]),
        (&["span.attr.tags exists"], &[36]),
        (&["span.attr.nobody exists"], &[]),
        (&["span.attr.tokens exists", "span.kind = tool"], &[35]),
        (&["span.attr.note exists", "span.attr.tags exists"], &[36]),
        (&["span.attr.cached = true"], &[2, 30, 36]),
        (&["span.attr.cached = false"], &[31, 36]),
        (&["span.attr.cached != true"], &[31, 36]),
        (&["span.attr.flag = 1"], &[34]),
        (&["span.attr.flag = true"], &[]),
        (&["span.attr.nobody > 0"], &[]),
        // Both on one span: t30's large count is on a model span, t35's on a tool.
        (&["span.attr.tokens > 200", "span.kind = tool"], &[35]),
        (
            &["span.attr.tokens > 200", "span.attr.cached = true"],
            &[30],
        ),
        (&["span.attr.tokens < 200", "span.attr.cached = true"], &[]),
        (&["span.attr.tokens > 200", "attr.task = a"], &[]),
    ];
    let cases: Vec<(Vec<&str>, Vec<i64>)> = cases
        .iter()
        .map(|(f, w)| (f.to_vec(), w.to_vec()))
        .collect();
    assert_in_run_and_project(&s, &cases).await;
    // A first page of one counts every match: the overwritten 50 is not among them.
    let under = TraceQuery {
        run_id: Some("r1".into()),
        filters: super::filters(&["span.attr.tokens < 1000"]),
        limit: 1,
        ..Default::default()
    };
    let first = s.reads().list_traces(&under).await.expect("list");
    assert_eq!((first.traces.len(), first.matched), (1, Some(4)));
    // The same for a name's presence, whatever the values' types.
    let noted = TraceQuery {
        filters: super::filters(&["span.attr.note exists"]),
        ..under
    };
    let first = s.reads().list_traces(&noted).await.expect("list");
    assert_eq!((first.traces.len(), first.matched), (1, Some(3)));
}

async fn filters_compare_totals_and_root_attributes_by_type(s: S) {
    attribute_run(&s).await;
    let cases: &[(&[&str], &[i64])] = &[
        (&["attr.reward < 0.5"], &[0, 1, 2, 3, 4]),
        (&["attr.reward >= 0.5"], &[5, 6, 7, 8, 9]),
        (&["attr.reward > 0.25", "attr.reward <= 0.4"], &[3, 4]),
        // A number never equals a string, either way round.
        (&["attr.reward != 0.3"], &[0, 1, 2, 4, 5, 6, 7, 8, 9]),
        (&["attr.reward = high"], &[10]),
        (&["attr.reward in (0.1, 0.2, high)"], &[1, 2, 10]),
        // As with !=: only numbers other than these; no string, none missing.
        (
            &["attr.reward not in (0.1, 0.2)"],
            &[0, 3, 4, 5, 6, 7, 8, 9],
        ),
        (
            &["attr.task in (\"math word\")", "attr.solved = true"],
            &[0, 6],
        ),
        (&["attr.reward > \"a\""], &[10]),
        (&["attr.reward exists"], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
        (&["attr.missing exists"], &[]),
        (&["attr.missing < 1"], &[]),
        (&["attr.task = \"math word\""], &[0, 2, 4, 6, 8, 10]),
        (&["attr.task < d"], &[1, 3, 5, 7, 9, 11]),
        (&["attr.task = 1"], &[]),
        (&["attr.solved = true"], &[0, 3, 6, 9]),
        (&["attr.solved != true"], &[1, 2, 4, 5, 7, 8, 10, 11]),
        (&["attr.solved = false", "attr.task = code"], &[1, 5, 7, 11]),
        // Failed beneath, though every root recovered.
        (&["error_count > 0"], &[1, 5, 9]),
        (&["error_count > 0", "attr.reward < 0.5"], &[1]),
        (&["span_count >= 2"], &[1, 5, 9]),
        (&["step >= 5", "step <= 8"], &[5, 6, 7, 8]),
        (&["step = 3"], &[3]),
        (
            &["duration_us = 5"],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        ),
        (&["rank exists"], &[]),
        (&["error_count = \"1\""], &[]),
        (&["error_count != true"], &[]),
    ];
    for (filters, want) in cases {
        assert_eq!(&matching(&s, filters).await, want, "{filters:?}");
    }
    // Filters combine with the other criteria and page without repeats or gaps.
    let mut query = TraceQuery {
        run_id: Some("r1".into()),
        statuses: vec![SpanStatus::Ok],
        filters: vec![TraceFilter::parse("attr.reward exists").expect("valid")],
        sort: TraceSort::Errors,
        limit: 3,
        ..Default::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = s.reads().list_traces(&query).await.expect("page");
        seen.extend(page.traces.iter().map(|t| t.trace_id.clone()));
        match page.next_cursor {
            Some(c) => query.cursor = Some(Cursor::decode(&c).expect("cursor")),
            None => break,
        }
    }
    assert_eq!(seen.len(), 11);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 11);
    assert_eq!(
        &seen[..3],
        ["t09", "t05", "t01"],
        "errors first, then ids descending"
    );
}

/// A filter a few traces pass starts from their list, found in `trace_numbers` or
/// `trace_texts`: it must match exactly what each trace's attributes say, in a run
/// and across its project, a value changed by the close and a string too long to
/// index included.
async fn attribute_filters_found_through_indexes_match_each_traces_attributes(s: S) {
    attribute_run(&s).await;
    let long = "x".repeat(300);
    let traced = |t: &str, at: i64, first: Value, last: Value| {
        [
            with(
                open(t, "root", None, "rollout", at),
                json!({ "attributes": first }),
            ),
            with(
                close(t, "root", "ok", at + 1),
                json!({ "attributes": last }),
            ),
        ]
    };
    let mut events = Vec::new();
    events.extend(traced("t12", 300, json!({"note": long}), json!({})));
    events.extend(traced("t13", 310, json!({"note": "short"}), json!({})));
    // t14's task was "code" and is now a number: no string row is left for it.
    events.extend(traced(
        "t14",
        320,
        json!({"task": "code"}),
        json!({"task": 7}),
    ));
    write(&s, "r1", &events).await;
    let long_filter = format!("attr.note = \"{long}\"");
    let cases: Vec<(Vec<&str>, Vec<i64>)> = vec![
        (vec![long_filter.as_str()], vec![12]),
        (vec!["attr.note = short"], vec![13]),
        (vec!["attr.task = code"], vec![1, 3, 5, 7, 9, 11]),
        (vec!["attr.task = 7"], vec![14]),
        (vec!["attr.reward = 0.5"], vec![5]),
        // t00's reward is the integer 0: found among the reals.
        (vec!["attr.reward = 0"], vec![0]),
        (vec!["attr.reward < 0.15"], vec![0, 1]),
        (vec!["attr.reward >= 0.8", "attr.task = code"], vec![9]),
        (vec!["attr.reward = 0.55"], vec![]),
        (vec!["attr.task = nobody"], vec![]),
    ];
    for (filters, want) in &cases {
        assert_eq!(&matching(&s, filters).await, want, "{filters:?}");
        // Across the project, the same traces.
        let project = TraceQuery {
            project: Some("proj".into()),
            ..Default::default()
        };
        let ids = matching_in(&s, project, filters).await;
        assert_eq!(&ids, want, "project-wide {filters:?}");
    }
    // A value nobody has answers at once, with its count of none.
    let none = TraceQuery {
        run_id: Some("r1".into()),
        filters: vec![TraceFilter::parse("attr.task = nobody").expect("valid")],
        ..Default::default()
    };
    assert_eq!(
        s.reads().list_traces(&none).await.expect("list").matched,
        Some(0)
    );
}

async fn traces_sort_by_a_numeric_attribute_and_page_without_gaps(s: S) {
    attribute_run(&s).await;
    // A reward that was a number and then is not: it sorts with the traces that lack one.
    let numbered = with(
        open("t12", "root", None, "rollout", 200),
        json!({"attributes": {"reward": 0.95}}),
    );
    write(&s, "r1", &[numbered]).await;
    let unnumbered = with(
        close("t12", "root", "ok", 205),
        json!({"attributes": {"reward": "n/a"}}),
    );
    write(&s, "r1", &[unnumbered]).await;
    let numbers = [
        "t00", "t01", "t02", "t03", "t04", "t05", "t06", "t07", "t08", "t09",
    ];
    for ascending in [false, true] {
        // Numbers in order, then the rest by last update, the same way round.
        let mut want: Vec<&str> = numbers.to_vec();
        let mut rest = vec!["t10", "t11", "t12"];
        if !ascending {
            want.reverse();
            rest.reverse();
        }
        want.extend(rest);
        // Pages that end inside the numbers, exactly at their end, and past it.
        for limit in [1, 3, 4, 5, 10, 11, 13, 50] {
            let query = TraceQuery {
                run_id: Some("r1".into()),
                sort: TraceSort::Attr("reward".into()),
                ascending,
                limit,
                ..Default::default()
            };
            let seen = every_page(&s, query).await;
            assert_eq!(seen, want, "ascending: {ascending}, limit {limit}");
        }
        // A range on the sort's own attribute, across every project.
        let query = TraceQuery {
            sort: TraceSort::Attr("reward".into()),
            filters: vec![TraceFilter::parse("attr.reward < 0.35").expect("valid")],
            ascending,
            limit: 2,
            ..Default::default()
        };
        let mut want = vec!["t00", "t01", "t02", "t03"];
        if !ascending {
            want.reverse();
        }
        assert_eq!(every_page(&s, query).await, want, "ascending: {ascending}");
    }
    // With a filter, and a key that no trace has: every trace, by id.
    let query = TraceQuery {
        run_id: Some("r1".into()),
        sort: TraceSort::Attr("nope".into()),
        filters: vec![TraceFilter::parse("error_count > 0").expect("valid")],
        limit: 10,
        ..Default::default()
    };
    let ids: Vec<String> = s
        .reads()
        .list_traces(&query)
        .await
        .expect("list")
        .traces
        .into_iter()
        .map(|t| t.trace_id)
        .collect();
    assert_eq!(ids, ["t09", "t05", "t01"]);
}

/// The trace ids of every page of `query`, following its cursors.
/// The ids of every page's traces, sorted.
/// Across a project, a failed span's name and a note that more traces pass than a
/// filter's lookup lists (2,000): the list walks the project's traces and probes
/// each, and its pages hold exactly the passing traces, each once.
async fn filters_too_common_to_list_page_through_every_match_across_a_project(s: S) {
    run(&s, "r1").await;
    run(&s, "r2").await;
    let traces = 4_200;
    let passing = |i: usize| i.is_multiple_of(2);
    for run_id in ["r1", "r2"] {
        let mut events = Vec::new();
        for i in (0..traces).filter(|i| (i % 4 < 2) == (run_id == "r1")) {
            let t = format!("t{i}");
            let at = i as i64;
            events.push(open(&t, "root", None, "rollout", at));
            events.push(with(
                open(&t, "call", Some("root"), "tool", at),
                json!({"name": "search"}),
            ));
            // A failed `search` in half the traces; the others fail elsewhere.
            let (search, root) = if passing(i) {
                ("error", "ok")
            } else {
                ("ok", "error")
            };
            events.push(close(&t, "call", search, at + 1));
            events.push(close(&t, "root", root, at + 2));
        }
        for chunk in events.chunks(2_000) {
            write(&s, run_id, chunk).await;
        }
    }
    let author = Author {
        key_id: "k1".into(),
        name: "k1's key".into(),
    };
    for i in (0..traces).filter(|i| passing(*i)) {
        let label = NoteWrite {
            span_id: None,
            name: "label".into(),
            value: NoteValue::Text("looped".into()),
            comment: None,
        };
        let run_id = if i % 4 < 2 { "r1" } else { "r2" };
        s.annotate(run_id, &format!("t{i}"), &label, &author, Source::Person, 1)
            .await
            .expect("annotate");
    }
    let mut want: Vec<String> = (0..traces)
        .filter(|i| passing(*i))
        .map(|i| format!("t{i}"))
        .collect();
    want.sort();
    for filters in [
        &["span.name = search", "span.status = error"][..],
        &["note.label = looped"],
        &[
            "note.label = looped",
            "span.name = search",
            "span.status = error",
        ],
    ] {
        let query = TraceQuery {
            project: Some("proj".into()),
            filters: super::filters(filters),
            limit: 500,
            ..Default::default()
        };
        let seen = every_id_sorted(s.clone(), query).await;
        assert_eq!(seen.len(), want.len(), "{filters:?}");
        assert!(seen == want, "{filters:?}: not the passing traces");
    }
}

async fn every_id_sorted(s: S, query: TraceQuery) -> Vec<String> {
    let mut ids = every_page(&s, query).await;
    ids.sort();
    ids
}

pub(super) async fn every_page(s: &S, mut query: TraceQuery) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let page = s.reads().list_traces(&query).await.expect("page");
        seen.extend(page.traces.into_iter().map(|t| t.trace_id));
        match page.next_cursor {
            Some(c) => query.cursor = Some(Cursor::decode(&c).expect("cursor")),
            None => return seen,
        }
    }
}

async fn a_first_page_counts_its_matches(s: S) {
    attribute_run(&s).await;
    let page = |filters: &[&str], limit: usize, cursor: Option<Cursor>| TraceQuery {
        run_id: Some("r1".into()),
        filters: super::filters(filters),
        limit,
        cursor,
        ..Default::default()
    };
    // 12 traces, 6 of them "code": counted past the first page's 4.
    let first = s
        .reads()
        .list_traces(&page(&["attr.task = code"], 4, None))
        .await
        .expect("list");
    assert_eq!(
        (first.traces.len(), first.matched, first.matched_more),
        (4, Some(6), false)
    );
    let cursor = Cursor::decode(first.next_cursor.as_deref().expect("more")).expect("cursor");
    let second = s
        .reads()
        .list_traces(&page(&["attr.task = code"], 4, Some(cursor)))
        .await
        .expect("list");
    assert_eq!((second.traces.len(), second.matched), (2, None));
    let all = s
        .reads()
        .list_traces(&page(&[], 50, None))
        .await
        .expect("list");
    assert_eq!(all.matched, Some(12));
    // Across runs, only a first page that holds every match is counted.
    let mut across = page(&["attr.task = code"], 4, None);
    across.run_id = None;
    let across = s.reads().list_traces(&across).await.expect("list");
    assert_eq!((across.traces.len(), across.matched), (4, None));
    let none = s
        .reads()
        .list_traces(&page(&["attr.task = chess"], 4, None))
        .await
        .expect("list");
    assert_eq!(none.matched, Some(0));
}

/// The span attribute keys a run's answer offers: every span's, by name, its
/// traces counted once however many of its spans carry the key.
async fn span_attribute_keys_come_with_types_ranges_and_values(s: S) {
    span_run(&s).await;
    // A second span with the same model in t2: its trace still counts once.
    let again = with(
        open("t2", "m2", Some("root"), "model", 3),
        json!({"attributes": {"model": "small"}}),
    );
    write(&s, "r1", &[again]).await;
    let keys = s.reads().attribute_keys("r1").await.expect("keys");
    let listed: Vec<(&str, &str, i64)> = keys
        .span_attributes
        .iter()
        .map(|k| (k.key.as_str(), k.kind.as_str(), k.traces))
        .collect();
    assert_eq!(
        listed,
        [
            ("task", "string", 4),
            ("dt", "number", 2),
            ("cached", "boolean", 1),
            ("model", "string", 1)
        ]
    );
    let dt = &keys.span_attributes[1];
    assert_eq!((dt.min, dt.max), (Some(0.01), Some(0.02)));
    let values = |i: usize| -> Vec<(String, i64)> {
        keys.span_attributes[i]
            .values
            .iter()
            .map(|v| (v.value.clone(), v.traces))
            .collect()
    };
    assert_eq!(values(0), [("a".to_string(), 2), ("b".to_string(), 2)]);
    assert_eq!(values(2), [("true".to_string(), 1)]);
    assert_eq!(values(3), [("small".to_string(), 1)]);
    // The root attributes' own list is the traces', as before.
    let roots: Vec<&str> = keys.attributes.iter().map(|k| k.key.as_str()).collect();
    assert_eq!(roots, ["task"]);
    // A run with no spans offers none.
    run(&s, "r2").await;
    let none = s.reads().attribute_keys("r2").await.expect("keys");
    assert!(none.span_attributes.is_empty());
}

async fn attribute_keys_give_types_counts_ranges_and_common_values(s: S) {
    attribute_run(&s).await;
    let keys = s
        .reads()
        .attribute_keys("r1")
        .await
        .expect("keys")
        .attributes;
    let find = |key: &str, kind: &str| {
        keys.iter()
            .find(|k| k.key == key && k.kind == kind)
            .unwrap_or_else(|| panic!("{key} {kind} in {keys:?}"))
    };
    let reward = find("reward", "number");
    assert_eq!(
        (reward.traces, reward.min, reward.max),
        (10, Some(0.0), Some(0.9))
    );
    assert!(reward.values.is_empty());
    let high = find("reward", "string");
    assert_eq!(high.traces, 1);
    assert_eq!(high.values[0].value, "high");
    let task = find("task", "string");
    assert_eq!(task.traces, 12);
    let values: Vec<(&str, i64)> = task
        .values
        .iter()
        .map(|v| (v.value.as_str(), v.traces))
        .collect();
    assert_eq!(values, [("code", 6), ("math word", 6)]);
    let solved = find("solved", "boolean");
    let values: Vec<(&str, i64)> = solved
        .values
        .iter()
        .map(|v| (v.value.as_str(), v.traces))
        .collect();
    assert_eq!(values, [("false", 8), ("true", 4)]);
    assert_eq!(keys.len(), 4);
    // A value longer than a line (a cut prompt) is counted but never offered.
    let long = "p".repeat(treeline_wire::filter::MAX_LISTED_VALUE_CHARS + 1);
    for (i, prompt) in [long.as_str(), long.as_str(), "short"].iter().enumerate() {
        let t = format!("p{i}");
        let attributes = json!({"attributes": {"prompt": prompt}});
        write(
            &s,
            "r1",
            &[
                with(open(&t, "root", None, "rollout", 500), attributes),
                close(&t, "root", "ok", 501),
            ],
        )
        .await;
    }
    let keys = s
        .reads()
        .attribute_keys("r1")
        .await
        .expect("keys")
        .attributes;
    let prompt = keys.iter().find(|k| k.key == "prompt").expect("prompt");
    assert_eq!(prompt.traces, 3);
    let offered: Vec<&str> = prompt.values.iter().map(|v| v.value.as_str()).collect();
    assert_eq!(offered, ["short"]);
    assert!(s
        .reads()
        .attribute_keys("nope")
        .await
        .expect("none")
        .attributes
        .is_empty());
}

on_both!(tokio::test, |t| t.store.clone();
    trace_lists_filter_search_and_page_without_duplicates,
    search_finds_names_and_id_prefixes_in_scope,
    a_term_in_too_many_names_narrows_with_a_listed_one,
    filters_compare_totals_and_root_attributes_by_type,
    attribute_filters_found_through_indexes_match_each_traces_attributes,
    span_filters_hold_on_one_span,
    span_strings_found_through_their_index_match_each_spans_attributes,
    span_numbers_found_through_their_ranges_match_each_spans_attributes,
    a_span_opened_after_its_children_is_found_by_its_name,
    attribute_keys_give_types_counts_ranges_and_common_values,
    span_attribute_keys_come_with_types_ranges_and_values,
    a_first_page_counts_its_matches,
    traces_sort_by_a_numeric_attribute_and_page_without_gaps,
    filters_too_common_to_list_page_through_every_match_across_a_project,
);
