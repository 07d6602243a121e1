//! A run's rollouts at once: distributions over steps (exact counts, deciles,
//! histograms, a split and its links), both shapes of the group lens, and
//! what-changed ranking on a run with one injected change.

use crate::common::on_both;
use crate::common::{close, open, run, with, write};
use serde_json::json;
use treeline_server::store::{StoreError, TraceQuery};
use treeline_wire::changes::{ChangeKind, ChangesQuery};
use treeline_wire::groups::GroupsQuery;
use treeline_wire::stats::StatsQuery;

use super::S;

fn traces(filters: &[String]) -> TraceQuery {
    TraceQuery {
        run_id: Some("r1".into()),
        filters: super::filters(filters),
        limit: 500,
        ..Default::default()
    }
}

fn stats_query(raw: &str) -> StatsQuery {
    StatsQuery::parse(raw).expect("valid stats query")
}

/// How many traces a list with `filters` and a step range holds.
async fn listed(s: &S, filters: &[String], steps: (i64, i64)) -> i64 {
    let query = TraceQuery {
        min_step: Some(steps.0),
        max_step: Some(steps.1),
        ..traces(filters)
    };
    s.reads()
        .list_traces(&query)
        .await
        .expect("list")
        .traces
        .len() as i64
}

/// Twenty traces at steps 0–9 (two a step) with rewards 0–19, a family (a, b) and a
/// prompt of fourteen; one trace whose reward is text; one without a step.
async fn reward_run(s: &S) {
    run(s, "r1").await;
    for i in 0..20i64 {
        let t = format!("t{i:02}");
        let attributes = json!({"reward": i, "family": if i % 2 == 0 { "a" } else { "b" },
            "prompt": format!("p{}", i % 14)});
        write(
            s,
            "r1",
            &[
                with(
                    open(&t, "root", None, "rollout", i),
                    json!({"step": i / 2, "attributes": attributes}),
                ),
                close(&t, "root", "ok", i + 1),
            ],
        )
        .await;
    }
    let odd = [
        (
            "text",
            json!({"step": 3, "attributes": {"reward": "high", "family": "a"}}),
        ),
        (
            "stepless",
            json!({"attributes": {"reward": 5, "family": "a"}}),
        ),
    ];
    for (t, extra) in odd {
        write(
            s,
            "r1",
            &[
                with(open(t, "root", None, "rollout", 50), extra),
                close(t, "root", "ok", 51),
            ],
        )
        .await;
    }
}

async fn a_distribution_counts_deciles_and_bins_every_step_bucket(s: S) {
    reward_run(&s).await;
    let q = stats_query("value=attr.reward&buckets=5&bins=4");
    let stats = s.reads().stats(&traces(&[]), &q).await.expect("stats");
    assert_eq!(stats.value, "attr.reward");
    assert_eq!((stats.traces, stats.left_out), (20, 1));
    assert_eq!(stats.bucket_steps, 2);
    assert_eq!(stats.edges, [0.0, 5.0, 10.0, 15.0, 20.0]);
    let whole = &stats.series[0];
    assert_eq!((whole.label.as_deref(), whole.traces), (None, 20));
    assert_eq!(whole.buckets.len(), 5);
    for (b, bucket) in whole.buckets.iter().enumerate() {
        let lo = 4.0 * b as f64;
        assert_eq!(
            (bucket.first_step, bucket.last_step),
            (2 * b as i64, 2 * b as i64 + 1)
        );
        assert_eq!(bucket.count, 4);
        assert_eq!((bucket.min, bucket.max), (lo, lo + 3.0));
        assert!((bucket.mean - (lo + 1.5)).abs() < 1e-9);
        assert!((bucket.p50 - (lo + 1.5)).abs() < 1e-9);
        assert!((bucket.p10 - (lo + 0.3)).abs() < 1e-9);
        assert!((bucket.p90 - (lo + 2.7)).abs() < 1e-9);
        let counted: i64 = bucket.histogram.iter().map(|(_, n)| n).sum();
        assert_eq!(counted, 4);
    }
    assert_eq!(whole.buckets[1].histogram, [(0, 1), (1, 3)]);
    // Each cell opens as a list of exactly its traces.
    for bucket in &whole.buckets {
        for &(bin, n) in &bucket.histogram {
            let bin = bin as usize;
            let filters = vec![
                format!("attr.reward >= {}", stats.edges[bin]),
                format!("attr.reward < {}", stats.edges[bin + 1]),
            ];
            let steps = (bucket.first_step, bucket.last_step);
            assert_eq!(
                listed(&s, &filters, steps).await,
                n,
                "{filters:?} {steps:?}"
            );
        }
    }
    // The list's filters hold.
    let only_a = traces(&["attr.family = a".to_string()]);
    let stats = s.reads().stats(&only_a, &q).await.expect("stats");
    assert_eq!(stats.traces, 10);
}

async fn a_split_lists_the_common_values_and_the_rest_as_links(s: S) {
    reward_run(&s).await;
    let q = stats_query("value=attr.reward&split=attr.prompt");
    let stats = s.reads().stats(&traces(&[]), &q).await.expect("stats");
    assert_eq!(stats.split.as_deref(), Some("attr.prompt"));
    // The whole list, twelve prompts, then the other two.
    assert_eq!(stats.series.len(), 14);
    let counted: i64 = stats.series[1..].iter().map(|x| x.traces).sum();
    assert_eq!(counted, 20);
    for series in &stats.series[1..] {
        let filter = series.filter.clone().expect("a filter");
        assert_eq!(
            listed(&s, std::slice::from_ref(&filter), (0, 9)).await,
            series.traces,
            "{filter}"
        );
    }
    let other = stats.series.last().expect("other");
    assert!(other.other && other.label.is_none());
    assert!(other
        .filter
        .as_deref()
        .is_some_and(|f| f.contains("not in")));
    let q = stats_query("value=attr.reward&split=attr.family");
    let stats = s.reads().stats(&traces(&[]), &q).await.expect("stats");
    let labels: Vec<Option<&str>> = stats.series.iter().map(|x| x.label.as_deref()).collect();
    assert_eq!(labels, [None, Some("a"), Some("b")]);
}

/// Labels and keys come from `trace_texts`, which the trace upsert keeps: a trace's
/// latest value counts, and a string past 256 bytes counts as none.
async fn split_labels_and_group_keys_follow_each_traces_latest_value(s: S) {
    run(&s, "r1").await;
    let long = "x".repeat(300);
    let traces_written = [
        ("t1", json!("a"), Some(json!(7))),
        ("t2", json!("b"), Some(json!("c"))),
        ("t3", json!(long), None),
        ("t4", json!("a"), None),
    ];
    for (i, (t, first, later)) in traces_written.into_iter().enumerate() {
        let mut closing = close(t, "root", "ok", 2);
        if let Some(later) = later {
            closing = with(closing, json!({"attributes": {"family": later}}));
        }
        write(
            &s,
            "r1",
            &[
                with(
                    open(t, "root", None, "rollout", 1),
                    json!({"step": 0, "attributes": {"family": first, "reward": i}}),
                ),
                closing,
            ],
        )
        .await;
    }
    let q = stats_query("value=attr.reward&split=attr.family");
    let stats = s.reads().stats(&traces(&[]), &q).await.expect("stats");
    let labels: Vec<(Option<&str>, i64)> = stats
        .series
        .iter()
        .map(|x| (x.label.as_deref(), x.traces))
        .collect();
    assert_eq!(labels, [(None, 4), (Some("a"), 1), (Some("c"), 1)]);
    assert_eq!(stats.unsplit, 2, "a number and a long string have no label");
    let q = GroupsQuery::parse("by=attr.family&value=attr.reward").expect("valid");
    let groups = s.reads().groups(&traces(&[]), &q).await.expect("groups");
    let mut keys: Vec<&str> = groups.groups.iter().map(|g| g.key.as_str()).collect();
    keys.sort_unstable();
    // The number 7 is written as each database writes a float ("7", "7.0").
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(keys[0].starts_with('7'), "{keys:?}");
    assert_eq!(keys[1..], ["a", "c"]);
}

async fn a_distribution_refuses_a_string_value_and_a_number_split(s: S) {
    reward_run(&s).await;
    for (raw, says) in [
        ("value=attr.family", "value attr.family is a string"),
        (
            "value=attr.reward&split=attr.reward",
            "split attr.reward is a number",
        ),
    ] {
        match s.reads().stats(&traces(&[]), &stats_query(raw)).await {
            Err(StoreError::Invalid(e)) => assert!(e.message.contains(says), "{}", e.message),
            other => panic!("{raw}: {other:?}"),
        }
    }
    // An attribute no trace carries, like a run with no traces: empty, saying so.
    let stats = s
        .reads()
        .stats(&traces(&[]), &stats_query("value=attr.nothing"))
        .await
        .expect("stats");
    assert!(stats.series.is_empty());
    assert!(stats.empty.is_some_and(|e| e.contains("attr.nothing")));
    run(&s, "empty").await;
    let none = TraceQuery {
        run_id: Some("empty".into()),
        ..traces(&[])
    };
    let stats = s
        .reads()
        .stats(&none, &stats_query("value=duration_us"))
        .await
        .expect("stats");
    assert!(stats.series.is_empty() && stats.empty.is_some());
}

async fn groups_of_traces_and_groups_of_children_are_measured(s: S) {
    run(&s, "r1").await;
    let samples = [
        ("g0", 1, [1.0, 1.0, 1.0].as_slice()),
        ("g1", 1, &[0.0, 1.0, 0.5]),
        ("g2", 2, &[0.0, 1.0]),
    ];
    for (g, step, rewards) in samples {
        for (i, r) in rewards.iter().enumerate() {
            let t = format!("{g}-{i}");
            write(
                &s,
                "r1",
                &[
                    with(
                        open(&t, "root", None, "rollout", 1),
                        json!({"step": step, "attributes": {"group_id": g, "reward": r}}),
                    ),
                    close(&t, "root", "ok", 2),
                ],
            )
            .await;
        }
    }
    let q = GroupsQuery::parse("by=attr.group_id&value=attr.reward").expect("valid");
    let groups = s.reads().groups(&traces(&[]), &q).await.expect("groups");
    let steps: Vec<(i64, i64, i64)> = groups
        .steps
        .iter()
        .map(|x| (x.step, x.groups, x.zero_spread))
        .collect();
    assert_eq!(steps, [(1, 2, 1), (2, 1, 0)]);
    assert_eq!(groups.step, Some(2));
    let g2 = &groups.groups[0];
    assert_eq!(
        (g2.key.as_str(), g2.size, g2.mean, g2.spread),
        ("g2", 2, 0.5, 0.5)
    );
    assert_eq!(g2.ranked[0].trace_id, "g2-1");
    assert_eq!(g2.ranked[0].span_id, "root");
    let q = GroupsQuery::parse("by=attr.group_id&value=attr.reward&step=1").expect("valid");
    let listed = s
        .reads()
        .groups(&traces(&[]), &q)
        .await
        .expect("groups")
        .groups;
    let keys: Vec<&str> = listed.iter().map(|g| g.key.as_str()).collect();
    assert_eq!(keys, ["g0", "g1"], "least spread first");

    // The other shape: each root's children are one group.
    let children = [("c0", [1.0, 1.0, 1.0].as_slice()), ("c1", &[0.0, 1.0])];
    for (t, rewards) in children {
        let mut events = vec![with(
            open(t, "root", None, "rollout", 1),
            json!({"step": 5}),
        )];
        for (i, r) in rewards.iter().enumerate() {
            let id = format!("s{i}");
            events.push(open(t, &id, Some("root"), "agent", 2));
            events.push(with(
                close(t, &id, "ok", 3),
                json!({"attributes": {"reward": r}}),
            ));
        }
        events.push(close(t, "root", "ok", 4));
        write(&s, "r1", &events).await;
    }
    let q = GroupsQuery::parse("by=children&value=attr.reward&step=5").expect("valid");
    let groups = s.reads().groups(&traces(&[]), &q).await.expect("groups");
    let five = groups.steps.iter().find(|x| x.step == 5).expect("step 5");
    assert_eq!((five.groups, five.zero_spread), (2, 1));
    let keys: Vec<(&str, i64)> = groups
        .groups
        .iter()
        .map(|g| (g.key.as_str(), g.size))
        .collect();
    assert_eq!(keys, [("c0", 3), ("c1", 2)]);
    assert_eq!(
        (
            groups.groups[1].ranked[0].span_id.as_str(),
            groups.groups[1].ranked[0].value
        ),
        ("s1", 1.0)
    );
}

/// Ten steps of healthy rollouts, then ten in which `physics.integrate` fails with a
/// FloatingPointError that climbs to the root; the seed follows the step.
async fn incident_run(s: &S) {
    run(s, "r1").await;
    for step in 0..20i64 {
        for k in 0..3 {
            let t = format!("s{step:02}k{k}");
            let bad = step >= 10;
            let mut events = vec![with(
                open(&t, "root", None, "rollout", 1),
                json!({"step": step, "name": "rollout", "attributes": {"seed": 1000 + step,
                    "score": if bad { 10.0 + k as f64 } else { 50.0 + k as f64 }}}),
            )];
            for i in 0..3 {
                let id = format!("e{i}");
                events.push(with(
                    open(&t, &id, Some("root"), "env_step", 2),
                    json!({"name": format!("sim.step t={i}")}),
                ));
                events.push(close(&t, &id, "ok", 3));
            }
            events.push(with(
                open(&t, "p", Some("e2"), "env_step", 3),
                json!({"name": "physics.integrate"}),
            ));
            if bad {
                let e = json!({"error": {"type": "FloatingPointError", "message": "nan"}});
                events.push(with(close(&t, "p", "error", 4), e.clone()));
                events.push(with(close(&t, "root", "error", 5), e));
            } else {
                events.push(close(&t, "p", "ok", 4));
                events.push(close(&t, "root", "ok", 5));
            }
            write(s, "r1", &events).await;
        }
    }
}

async fn what_changed_puts_the_injected_failure_first(s: S) {
    incident_run(&s).await;
    let q = ChangesQuery::parse("min_step=10&max_step=19").expect("valid");
    assert_eq!(q.baseline, (0, 9));
    let changes = s.reads().changes(&traces(&[]), &q).await.expect("changes");
    assert_eq!((changes.traces, changes.baseline_traces), (30, 30));
    let first = &changes.rows[0];
    assert_eq!(
        (
            first.kind,
            first.subject.as_str(),
            first.before,
            first.after
        ),
        (ChangeKind::Failures, "physics.integrate", 0.0, 1.0)
    );
    assert!(changes
        .rows
        .iter()
        .any(|r| r.kind == ChangeKind::ErrorType && r.subject == "FloatingPointError"));
    let score = changes
        .rows
        .iter()
        .find(|r| r.subject == "attr.score")
        .expect("the score moved");
    assert_eq!((score.before, score.after), (51.0, 11.0));
    assert!(score.shift.is_some_and(|d| d < -10.0));
    assert_eq!(changes.follow_step, ["attr.seed"]);
    // Names that differ only in their numbers are one name, unchanged here.
    assert!(!changes
        .rows
        .iter()
        .any(|r| r.subject.starts_with("sim.step")));
    // The first row's link lists the failing traces of the pinned range.
    assert_eq!(listed(&s, &first.filters, (10, 19)).await, 30);
    assert_eq!(listed(&s, &first.filters, (0, 9)).await, 0);
}

/// A view over a whole run reads the values' indexes by step; a filter every trace
/// passes makes it read the traces. Both say the same, also of a trace whose step
/// changed after its attributes were stored (a second top-level span) and of one
/// without a step.
async fn a_whole_run_reads_the_same_by_step_as_through_its_traces(s: S) {
    reward_run(&s).await;
    write(
        &s,
        "r1",
        &[
            with(
                open("t00", "again", None, "rollout", 60),
                json!({"step": 9}),
            ),
            close("t00", "again", "ok", 61),
        ],
    )
    .await;
    let whole = traces(&[]);
    let every = traces(&["attr.family exists".to_string()]);
    let q = stats_query("value=attr.reward&split=attr.family&buckets=5&bins=4");
    let by_step = s.reads().stats(&whole, &q).await.expect("stats");
    let through = s.reads().stats(&every, &q).await.expect("stats");
    assert_eq!(
        serde_json::to_value(&by_step).expect("json"),
        serde_json::to_value(&through).expect("json")
    );
    assert_eq!((by_step.traces, by_step.left_out), (20, 1));
    // t00 (reward 0) now counts at step 9: steps 8–9 hold 0, 16, 17, 18 and 19.
    let last = by_step.series[0].buckets.last().expect("a bucket");
    assert_eq!((last.first_step, last.count, last.min), (8, 5, 0.0));
    let q = GroupsQuery::parse("by=attr.family&value=attr.reward").expect("valid");
    let by_step = s.reads().groups(&whole, &q).await.expect("groups");
    let through = s.reads().groups(&every, &q).await.expect("groups");
    assert_eq!(
        serde_json::to_value(&by_step).expect("json"),
        serde_json::to_value(&through).expect("json")
    );
    // The lens lists the groups that start at the last first step: family a, at step 1
    // now that t00 is at step 9. Its trace without a step is not at a step.
    let sizes: Vec<(&str, i64)> = by_step
        .groups
        .iter()
        .map(|g| (g.key.as_str(), g.size))
        .collect();
    assert_eq!(sizes, [("a", 10)]);
    assert!(by_step
        .groups
        .iter()
        .flat_map(|g| &g.ranked)
        .all(|s| !s.span_id.is_empty()));
}

on_both!(tokio::test, |t| t.store.clone();
    a_whole_run_reads_the_same_by_step_as_through_its_traces,
    a_distribution_counts_deciles_and_bins_every_step_bucket,
    a_split_lists_the_common_values_and_the_rest_as_links,
    a_distribution_refuses_a_string_value_and_a_number_split,
    split_labels_and_group_keys_follow_each_traces_latest_value,
    groups_of_traces_and_groups_of_children_are_measured,
    what_changed_puts_the_injected_failure_first,
);
