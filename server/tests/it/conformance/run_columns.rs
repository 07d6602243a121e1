//! The runs list's summary columns: a metric's last, smallest and largest value as
//! writes add, replace and backfill points, config values, and sorting by either.

use crate::common::on_both;
use serde_json::{json, Value};
use treeline_server::store::{Cursor, RunsAsked, StoreError};
use treeline_wire::run_list::RunColumn;
use treeline_wire::{MetricPoint, RunUpsert};

use super::S;

fn column(text: &str) -> RunColumn {
    RunColumn::parse(text, "column").expect("column")
}

fn points(key: &str, steps: &[(i64, f64)]) -> Vec<MetricPoint> {
    steps
        .iter()
        .map(|&(step, value)| MetricPoint {
            key: key.into(),
            step,
            value,
            ts: None,
        })
        .collect()
}

async fn made(s: &S, run_id: &str, start_us: i64, config: Value) {
    let up = RunUpsert {
        project: "cols".into(),
        name: Some(run_id.into()),
        config: Some(config),
        start_us: Some(start_us),
    };
    s.upsert_run(run_id, &up, 1).await.expect("run");
}

/// Each run's values of `columns`, newest run first.
async fn values(s: &S, columns: &[RunColumn]) -> Vec<(String, Vec<Value>)> {
    s.reads()
        .list_runs(RunsAsked {
            columns,
            ..RunsAsked::newest(Some("cols"), 50, None)
        })
        .await
        .expect("runs")
        .runs
        .into_iter()
        .map(|r| (r.run_id, r.values))
        .collect()
}

async fn a_metrics_last_least_and_greatest_follow_every_write(s: S) {
    made(
        &s,
        "r1",
        10,
        json!({"lr": 0.001, "model": {"name": "qwen", "layers": 24}}),
    )
    .await;
    let cols = [
        column("last:loss"),
        column("min:loss"),
        column("max:loss"),
        column("last:absent"),
    ];
    assert_eq!(
        values(&s, &cols).await,
        [("r1".to_string(), vec![Value::Null; 4])],
        "a run without points has no values"
    );
    s.write_metrics("r1", &points("loss", &[(1, 3.0), (2, 1.0), (3, 2.0)]))
        .await
        .unwrap();
    assert_eq!(
        values(&s, &cols).await[0].1,
        [json!(2.0), json!(1.0), json!(3.0), Value::Null]
    );
    // Later steps merge in.
    s.write_metrics("r1", &points("loss", &[(4, 0.5), (5, 0.75)]))
        .await
        .unwrap();
    assert_eq!(
        values(&s, &cols).await[0].1[..3],
        [json!(0.75), json!(0.5), json!(3.0)]
    );
    // Replacing the smallest and the largest value sums the key up again.
    s.write_metrics("r1", &points("loss", &[(4, 1.5), (1, 2.5)]))
        .await
        .unwrap();
    assert_eq!(
        values(&s, &cols).await[0].1[..3],
        [json!(0.75), json!(0.75), json!(2.5)]
    );
    // A step logged late, before the last one, changes the extremes and not the last.
    s.write_metrics("r1", &points("loss", &[(0, -4.0)]))
        .await
        .unwrap();
    assert_eq!(
        values(&s, &cols).await[0].1[..3],
        [json!(0.75), json!(-4.0), json!(2.5)]
    );
    // Config values read as they were given, nested ones by a dotted path.
    let config = [
        column("config:lr"),
        column("config:model.layers"),
        column("config:model.name"),
        column("config:model"),
        column("config:missing.deep"),
    ];
    assert_eq!(
        values(&s, &config).await[0].1,
        [
            json!(0.001),
            json!(24),
            json!("qwen"),
            json!({"name": "qwen", "layers": 24}),
            Value::Null
        ]
    );
}

/// The run ids of the sorted list, read page by page `limit` at a time.
async fn sorted(s: &S, by: &str, ascending: bool, limit: usize) -> Vec<String> {
    let by = column(by);
    let mut ids = Vec::new();
    let mut cursor: Option<Cursor> = None;
    loop {
        let page = s
            .reads()
            .list_runs(RunsAsked {
                sort: Some((&by, ascending)),
                ..RunsAsked::newest(Some("cols"), limit, cursor.as_ref())
            })
            .await
            .expect("page");
        ids.extend(page.runs.into_iter().map(|r| r.run_id));
        match page.next_cursor {
            Some(next) => cursor = Some(Cursor::decode(&next).expect("cursor")),
            None => return ids,
        }
    }
}

async fn runs_sort_by_a_column_with_runs_lacking_it_last(s: S) {
    // Started in this order, so newest first is e, d, c, b, a.
    let runs = [
        ("a", json!({"lr": 0.01, "opt": "adam"}), Some(0.5)),
        ("b", json!({"lr": 0.001, "opt": "sgd"}), Some(0.9)),
        ("c", json!({"lr": "auto", "opt": "Adam"}), None),
        ("d", json!({"opt": true}), Some(0.1)),
        ("e", json!({"lr": 0.1}), Some(0.5)),
    ];
    for (i, (id, config, reward)) in runs.iter().enumerate() {
        made(&s, id, 100 + i as i64, config.clone()).await;
        if let Some(r) = reward {
            s.write_metrics(id, &points("reward", &[(7, *r)]))
                .await
                .unwrap();
        }
    }
    for limit in [1, 2, 50] {
        // Ties (a and e) keep the newest first; runs without a value come last.
        assert_eq!(
            sorted(&s, "last:reward", false, limit).await,
            ["b", "e", "a", "d", "c"]
        );
        assert_eq!(
            sorted(&s, "last:reward", true, limit).await,
            ["d", "e", "a", "b", "c"]
        );
        // Numbers first, then text (byte order), then nothing.
        assert_eq!(
            sorted(&s, "config:lr", true, limit).await,
            ["b", "a", "e", "c", "d"]
        );
        assert_eq!(
            sorted(&s, "config:lr", false, limit).await,
            ["e", "a", "b", "c", "d"]
        );
        assert_eq!(
            sorted(&s, "config:opt", true, limit).await,
            ["c", "a", "b", "d", "e"]
        );
    }
    // A cursor of one kind of list is refused by the other.
    let newest = s
        .reads()
        .list_runs(RunsAsked::newest(Some("cols"), 1, None))
        .await
        .unwrap();
    let keyset = Cursor::decode(&newest.next_cursor.unwrap()).unwrap();
    let by = column("last:reward");
    let refused = s
        .reads()
        .list_runs(RunsAsked {
            sort: Some((&by, false)),
            ..RunsAsked::newest(Some("cols"), 1, Some(&keyset))
        })
        .await;
    assert!(matches!(refused, Err(StoreError::BadCursor)), "{refused:?}");
}

on_both!(tokio::test, |t| t.store.clone();
    a_metrics_last_least_and_greatest_follow_every_write,
    runs_sort_by_a_column_with_runs_lacking_it_last,
);
