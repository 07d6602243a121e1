//! Runs and metrics: creation, projects, steps, metric series and finding runs.

use crate::common::on_both;
use crate::common::{close, open, run, with, write};
use serde_json::json;
use treeline_server::store::{RunsAsked, SeriesWindow, StoreError};
use treeline_wire::{MetricPoint, RunUpsert};

use super::S;

async fn step_activity_counts_traces_per_step_and_the_unstepped(s: S) {
    run(&s, "r1").await;
    for (i, (step, status)) in [
        (Some(1), "ok"),
        (Some(1), "error"),
        (Some(2), "ok"),
        (None, "ok"),
    ]
    .iter()
    .enumerate()
    {
        let t = format!("t{i}");
        let mut o = open(&t, "root", None, "rollout", 0);
        if let Some(step) = step {
            o = with(o, json!({"step": step}));
        }
        write(&s, "r1", &[o, close(&t, "root", status, 1)]).await;
    }
    write(
        &s,
        "r1",
        &[with(
            open("t9", "root", None, "rollout", 0),
            json!({"step": 2}),
        )],
    )
    .await;
    let steps = s.reads().steps("r1", None, None).await.unwrap();
    let got: Vec<_> = steps
        .steps
        .iter()
        .map(|a| (a.step, a.traces, a.errored, a.running))
        .collect();
    assert_eq!(got, vec![(1, 2, 1, 0), (2, 2, 0, 1)]);
    assert_eq!(
        (
            steps.totals.traces,
            steps.totals.errored,
            steps.totals.running,
            steps.totals.unstepped
        ),
        (5, 1, 1, 1)
    );
    assert_eq!(
        (steps.totals.min_step, steps.totals.max_step),
        (Some(1), Some(2))
    );
    assert!(!steps.truncated);
    let only_two = s.reads().steps("r1", Some(2), Some(2)).await.unwrap();
    assert_eq!(only_two.steps.len(), 1);
}

async fn runs_are_created_once_and_keep_their_project(s: S) {
    let up = RunUpsert {
        project: "a".into(),
        name: Some("first".into()),
        config: Some(json!({"lr": 0.1})),
        start_us: Some(10),
    };
    assert!(s.upsert_run("r1", &up, 1).await.unwrap());
    assert!(!s
        .upsert_run(
            "r1",
            &RunUpsert {
                name: Some("renamed".into()),
                ..up.clone()
            },
            2
        )
        .await
        .unwrap());
    let conflict = s
        .upsert_run(
            "r1",
            &RunUpsert {
                project: "b".into(),
                ..up.clone()
            },
            3,
        )
        .await;
    assert!(matches!(conflict, Err(StoreError::ProjectConflict { .. })));
    let run = s.reads().get_run("r1").await.unwrap().unwrap();
    assert_eq!(
        (run.summary.name.as_str(), run.config.clone()),
        ("renamed", json!({"lr": 0.1}))
    );
    let missing = s.write_events("nope", vec![], 1).await;
    assert!(matches!(missing, Err(StoreError::RunNotFound(_))));
    assert!(s.reads().get_run("nope").await.unwrap().is_none());
}

async fn metrics_are_kept_by_step_and_read_in_order(s: S) {
    run(&s, "r1").await;
    let p = |step, value| MetricPoint {
        key: "train/loss".into(),
        step,
        value,
        ts: None,
    };
    s.write_metrics("r1", &[p(3, 0.3), p(1, 0.9), p(2, 0.5)])
        .await
        .unwrap();
    s.write_metrics("r1", &[p(2, 0.4)]).await.unwrap();
    assert_eq!(
        s.reads()
            .metric_series("r1", "train/loss", SeriesWindow::points(100))
            .await
            .unwrap()
            .points,
        vec![(1, 0.9), (2, 0.4), (3, 0.3)]
    );
    assert_eq!(
        s.reads().get_run("r1").await.unwrap().unwrap().metric_keys,
        vec!["train/loss".to_string()]
    );
}

async fn a_batch_repeating_a_key_and_step_keeps_the_last_value(s: S) {
    run(&s, "r1").await;
    let p = |step, value| MetricPoint {
        key: "reward".into(),
        step,
        value,
        ts: None,
    };
    // A loop that logs once per micro-batch repeats (key, step) in one request.
    s.write_metrics("r1", &[p(1, 0.1), p(2, 0.2), p(1, 0.3), p(1, 0.5)])
        .await
        .unwrap();
    assert_eq!(
        s.reads()
            .metric_series("r1", "reward", SeriesWindow::points(100))
            .await
            .unwrap()
            .points,
        vec![(1, 0.5), (2, 0.2)]
    );
}

/// 10,000 points read as 200 keep their spikes, their order and their times; a
/// window reads its steps only, whole when they fit.
async fn a_long_series_is_read_as_each_buckets_extremes(s: S) {
    run(&s, "r1").await;
    let points: Vec<MetricPoint> = (0..10_000)
        .map(|step| MetricPoint {
            key: "loss".into(),
            step,
            value: match step {
                5_000 => -100.0,
                7_001 => 100.0,
                _ => (step % 7) as f64,
            },
            // Every other point was logged without a time.
            ts: (step % 2 == 0).then_some(1_000_000 + step),
        })
        .collect();
    for chunk in points.chunks(2_000) {
        s.write_metrics("r1", chunk).await.unwrap();
    }
    let read = s
        .reads()
        .metric_series("r1", "loss", SeriesWindow::points(200))
        .await
        .unwrap();
    assert!(read.downsampled);
    assert_eq!(read.stored, 10_000);
    assert!(
        read.points.len() <= 200 && read.points.len() >= 190,
        "{}",
        read.points.len()
    );
    assert_eq!(read.ts.len(), read.points.len());
    assert!(read.points.windows(2).all(|w| w[0].0 < w[1].0));
    let values: Vec<f64> = read.points.iter().map(|p| p.1).collect();
    assert!(values.contains(&-100.0) && values.contains(&100.0));
    assert_eq!(read.points.first(), Some(&(0, 0.0)));
    assert_eq!(read.points.last().map(|p| p.0), Some(9_999));
    // A bucket's times are those logged at its first and last step (even steps
    // have one; the first bucket ends on an odd step).
    assert_eq!(read.ts[0], Some(1_000_000));
    assert_eq!(read.ts[1], None);

    let window = SeriesWindow {
        max_points: 200,
        min_step: Some(4_990),
        max_step: Some(5_010),
    };
    let zoomed = s.reads().metric_series("r1", "loss", window).await.unwrap();
    assert!(!zoomed.downsampled);
    assert_eq!(zoomed.stored, 21);
    assert_eq!(zoomed.points.len(), 21);
    assert_eq!(zoomed.points[10], (5_000, -100.0));
    assert_eq!((zoomed.ts[10], zoomed.ts[11]), (Some(1_005_000), None));

    // Few points far apart come back whole, and steps at the ends of the integers
    // bucket without overflowing.
    let sparse: Vec<MetricPoint> = [0, 1_000_000, i64::MAX / 2, i64::MAX - 1, i64::MAX]
        .into_iter()
        .enumerate()
        .map(|(i, step)| MetricPoint {
            key: "sparse".into(),
            step,
            value: i as f64,
            ts: None,
        })
        .collect();
    s.write_metrics("r1", &sparse).await.unwrap();
    let whole = s
        .reads()
        .metric_series("r1", "sparse", SeriesWindow::points(4))
        .await
        .unwrap();
    assert_eq!((whole.downsampled, whole.stored), (true, 5));
    assert_eq!(whole.points.first(), Some(&(0, 0.0)));
    assert_eq!(whole.points.last().map(|p| p.0), Some(i64::MAX));
    let fits = s
        .reads()
        .metric_series("r1", "sparse", SeriesWindow::points(200))
        .await
        .unwrap();
    assert_eq!((fits.downsampled, fits.stored), (false, 5));
    assert_eq!(
        fits.points,
        sparse.iter().map(|p| (p.step, p.value)).collect::<Vec<_>>()
    );

    let none = s
        .reads()
        .metric_series("r1", "no-such-key", SeriesWindow::points(200))
        .await
        .unwrap();
    assert_eq!(
        (none.points.len(), none.stored, none.downsampled),
        (0, 0, false)
    );
}

/// A series long enough to be read from its stored blocks: spikes, points replaced
/// later, and a zoomed window whose ends cut blocks in two.
async fn a_long_series_reads_from_its_blocks_as_from_its_points(s: S) {
    run(&s, "r1").await;
    let point = |step: i64, value: f64| MetricPoint {
        key: "reward".into(),
        step,
        value,
        ts: Some(1_000 + step),
    };
    let points: Vec<MetricPoint> = (0..60_000)
        .map(|step| {
            point(
                step,
                if step == 12_345 {
                    500.0
                } else {
                    (step % 11) as f64
                },
            )
        })
        .collect();
    for chunk in points.chunks(7_000) {
        s.write_metrics("r1", chunk).await.unwrap();
    }
    // Later writes reach back: a spike added up, one down, and the old one gone.
    s.write_metrics("r1", &[point(30_000, 1_000.0), point(45_000, -1_000.0)])
        .await
        .unwrap();
    s.write_metrics("r1", &[point(12_345, 3.0)]).await.unwrap();
    let read = s
        .reads()
        .metric_series("r1", "reward", SeriesWindow::points(200))
        .await
        .unwrap();
    assert!(read.downsampled);
    assert_eq!(read.stored, 60_000);
    assert!(
        read.points.len() <= 200 && read.points.len() >= 150,
        "{}",
        read.points.len()
    );
    assert!(read.points.windows(2).all(|w| w[0].0 < w[1].0));
    let values: Vec<f64> = read.points.iter().map(|p| p.1).collect();
    assert!(values.contains(&1_000.0) && values.contains(&-1_000.0));
    assert!(!values.contains(&500.0), "a replaced spike is gone");
    assert_eq!(read.points.first(), Some(&(0, 0.0)));
    assert_eq!(read.points.last().map(|p| p.0), Some(59_999));
    assert_eq!(
        (read.ts[0], read.ts.last()),
        (Some(1_000), Some(&Some(60_999)))
    );

    let window = SeriesWindow {
        max_points: 100,
        min_step: Some(10_100),
        max_step: Some(50_100),
    };
    let zoomed = s
        .reads()
        .metric_series("r1", "reward", window)
        .await
        .unwrap();
    assert!(zoomed.downsampled);
    assert_eq!(zoomed.stored, 40_001);
    assert!(zoomed.points.len() <= 100, "{}", zoomed.points.len());
    assert_eq!(zoomed.points.first().map(|p| p.0), Some(10_100));
    assert_eq!(zoomed.points.last().map(|p| p.0), Some(50_100));
    let values: Vec<f64> = zoomed.points.iter().map(|p| p.1).collect();
    assert!(values.contains(&1_000.0) && values.contains(&-1_000.0));

    // Zoomed closer: buckets of about 100 steps, read from the 32-step blocks.
    let window = SeriesWindow {
        max_points: 200,
        min_step: Some(20_005),
        max_step: Some(30_000),
    };
    let closer = s
        .reads()
        .metric_series("r1", "reward", window)
        .await
        .unwrap();
    assert!(closer.downsampled);
    assert_eq!(closer.stored, 9_996);
    assert!(closer.points.len() <= 200, "{}", closer.points.len());
    assert_eq!(closer.points.first().map(|p| p.0), Some(20_005));
    assert_eq!(closer.points.last().map(|p| p.0), Some(30_000));
    assert!(closer.points.iter().any(|p| p.1 == 1_000.0));
    assert!(closer.points.windows(2).all(|w| w[0].0 < w[1].0));
}

async fn racing_creations_of_one_run_create_it_once(s: S) {
    let up = |project: &str| RunUpsert {
        project: project.into(),
        ..Default::default()
    };
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = s.clone();
        let project = if i % 2 == 0 { "a" } else { "b" };
        let run = up(project);
        tasks.push(tokio::spawn(async move {
            (project, s.upsert_run("r1", &run, 1).await)
        }));
    }
    let mut created = Vec::new();
    let mut conflicts = 0;
    let mut updated = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            (project, Ok(true)) => created.push(project),
            (project, Ok(false)) => updated.push(project),
            (_, Err(StoreError::ProjectConflict { .. })) => conflicts += 1,
            (_, Err(e)) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!(created.len(), 1, "exactly one request creates the run");
    let winner = created[0];
    let stored = s
        .reads()
        .get_run("r1")
        .await
        .unwrap()
        .unwrap()
        .summary
        .project;
    assert_eq!(stored, winner);
    // Every other request of the winner's project updates; the other project's
    // requests all answer a conflict.
    assert_eq!(updated.len(), 3);
    assert!(updated.iter().all(|p| *p == winner));
    assert_eq!(conflicts, 4);
}

async fn runs_are_found_by_a_piece_of_their_name_or_id(s: S) {
    for (id, name) in [
        ("ppo-1", "PPO seed 1"),
        ("grpo-7", "grpo math"),
        ("x_100%", "odd"),
    ] {
        let upsert = RunUpsert {
            project: "p".into(),
            name: Some(name.into()),
            ..Default::default()
        };
        s.upsert_run(id, &upsert, 1).await.expect("run");
    }
    let found = |q: &'static str| {
        let s = s.clone();
        async move {
            let mut ids: Vec<String> = s
                .reads()
                .list_runs(RunsAsked {
                    search: Some(q),
                    ..RunsAsked::newest(None, 50, None)
                })
                .await
                .expect("runs")
                .runs
                .into_iter()
                .map(|r| r.run_id)
                .collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(found("po").await, ["grpo-7", "ppo-1"]);
    assert_eq!(found("PPO").await, ["ppo-1"]);
    assert_eq!(found("MATH").await, ["grpo-7"]);
    assert_eq!(
        found("%").await,
        ["x_100%"],
        "a % is a character, not a wildcard"
    );
    assert_eq!(found("_1").await, ["x_100%"]);
    assert!(found("nothing").await.is_empty());
}

on_both!(tokio::test, |t| t.store.clone();
    step_activity_counts_traces_per_step_and_the_unstepped,
    runs_are_created_once_and_keep_their_project,
    metrics_are_kept_by_step_and_read_in_order,
    a_batch_repeating_a_key_and_step_keeps_the_last_value,
    a_long_series_is_read_as_each_buckets_extremes,
    a_long_series_reads_from_its_blocks_as_from_its_points,
    racing_creations_of_one_run_create_it_once,
    runs_are_found_by_a_piece_of_their_name_or_id,
);
