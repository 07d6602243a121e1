//! Comparing runs over HTTP, on both databases, with a project key kept to its
//! project: `GET /api/compare-runs` (configs and metrics in one answer) and the
//! runs list's summary columns and sorting.

use crate::common;
use crate::common::on_both;
use crate::team::{team, Team, BOOT};

use axum::http::StatusCode;
use serde_json::json;

/// Run `run` of `project` with config `config` and `points` of `key` (step, value).
async fn logged(
    app: &Team,
    run: &str,
    project: &str,
    config: serde_json::Value,
    key: &str,
    points: &[(i64, f64)],
) {
    let reply = app
        .send(
            "PUT",
            &format!("/api/runs/{run}"),
            BOOT,
            json!({"project": project, "config": config}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    let points: Vec<_> = points
        .iter()
        .map(|&(step, value)| json!({"key": key, "step": step, "value": value, "ts": 1_000_000 + step}))
        .collect();
    let reply = app
        .send(
            "POST",
            &format!("/api/runs/{run}/metrics"),
            BOOT,
            json!({"points": points}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

async fn runs_compare_side_by_side_within_the_callers_reach(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    logged(
        &app,
        "seed0",
        "alpha",
        json!({"lr": 0.1, "seed": 0}),
        "reward",
        &[(1, 0.1), (2, 0.2)],
    )
    .await;
    logged(
        &app,
        "seed1",
        "alpha",
        json!({"lr": 0.1, "seed": 1}),
        "reward",
        &[(1, 0.3)],
    )
    .await;
    logged(&app, "other", "alpha", json!({}), "loss", &[(1, 2.0)]).await;
    logged(&app, "theirs", "beta", json!({}), "reward", &[(1, 9.0)]).await;

    let both = app
        .get("/api/compare-runs?run=seed0&run=seed1&run=other", BOOT)
        .await;
    assert_eq!(both.status, StatusCode::OK, "{}", both.body);
    let body = both.json();
    let ids: Vec<_> = body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("seed0"), json!("seed1"), json!("other")]);
    assert_eq!(body["runs"][1]["config"]["seed"], 1);
    // The most shared metric first; each line names its run, with its times.
    assert_eq!(
        body["keys"],
        json!([{"key": "reward", "runs": 2}, {"key": "loss", "runs": 1}])
    );
    assert_eq!(body["metrics"][0]["key"], "reward");
    let lines = &body["metrics"][0]["series"];
    assert_eq!(lines.as_array().map(Vec::len), Some(2));
    assert_eq!(lines[0]["run_id"], "seed0");
    assert_eq!(lines[0]["points"], json!([[1, 0.1], [2, 0.2]]));
    assert_eq!(lines[0]["ts"], json!([1_000_001, 1_000_002]));
    assert_eq!(body["metrics"][1]["series"][0]["run_id"], "other");

    // One key asked for, in a step range.
    let one = app
        .get(
            "/api/compare-runs?run=seed0&run=seed1&key=reward&min_step=2",
            BOOT,
        )
        .await
        .json();
    assert_eq!(one["metrics"].as_array().map(Vec::len), Some(1));
    assert_eq!(one["metrics"][0]["series"][0]["points"], json!([[2, 0.2]]));
    assert_eq!(one["metrics"][0]["series"][1]["points"], json!([]));

    // Errors name what is wrong.
    let unknown = app.get("/api/compare-runs?run=seed0&run=nope", BOOT).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(unknown.body.contains("nope"), "{}", unknown.body);
    let many: Vec<String> = (0..21).map(|i| format!("run=r{i}")).collect();
    let too_many = app
        .get(&format!("/api/compare-runs?{}", many.join("&")), BOOT)
        .await;
    assert_eq!(
        (too_many.status, too_many.code()),
        (StatusCode::BAD_REQUEST, "too_many_runs".into())
    );
    let none = app.get("/api/compare-runs", BOOT).await;
    assert_eq!(none.code(), "missing_parameter");

    // A project key compares its project's runs, and another project's run is
    // unknown to it (not a 403 that confirms it exists).
    let (_, alpha) = app.key("read", Some("alpha")).await;
    let own = app
        .get("/api/compare-runs?run=seed0&run=seed1", &alpha)
        .await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.body);
    let crossing = app
        .get("/api/compare-runs?run=seed0&run=theirs", &alpha)
        .await;
    assert_eq!(crossing.status, StatusCode::NOT_FOUND);
    assert!(!crossing.body.contains("9.0"), "{}", crossing.body);
}

async fn the_runs_list_carries_and_sorts_by_the_columns_asked_for(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    let rewards = [("low", 0.2, 0.001), ("high", 0.9, 0.01), ("mid", 0.5, 0.1)];
    for (run, reward, lr) in rewards {
        let config = json!({"lr": lr, "model": {"layers": 24}});
        logged(
            &app,
            run,
            "sweep",
            config,
            "reward",
            &[(1, 0.0), (2, reward)],
        )
        .await;
    }
    logged(
        &app,
        "theirs",
        "beta",
        json!({"lr": 1}),
        "reward",
        &[(1, 5.0)],
    )
    .await;

    let url = "/api/runs?project=sweep&column=last:reward&column=config:model.layers\
               &column=max:reward&sort=last:reward&limit=2";
    let first = app.get(url, BOOT).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let body = first.json();
    assert_eq!(
        body["columns"],
        json!(["last:reward", "config:model.layers", "max:reward"])
    );
    assert_eq!(body["runs"][0]["run_id"], "high");
    assert_eq!(body["runs"][0]["values"], json!([0.9, 24, 0.9]));
    assert_eq!(body["runs"][1]["run_id"], "mid");
    let cursor = body["next_cursor"].as_str().expect("a second page");
    let rest = app
        .get(&format!("{url}&cursor={cursor}"), BOOT)
        .await
        .json();
    assert_eq!(rest["runs"][0]["run_id"], "low");
    assert!(rest["next_cursor"].is_null());
    let ascending = app
        .get("/api/runs?project=sweep&sort=config:lr&order=asc", BOOT)
        .await
        .json();
    let ids: Vec<_> = ascending["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("low"), json!("high"), json!("mid")]);
    // Without columns, the answer is as it always was.
    let plain = app.get("/api/runs?project=sweep", BOOT).await.json();
    assert!(plain.get("columns").is_none() && plain["runs"][0].get("values").is_none());

    // Bad columns are named; a project key sorts its own runs only.
    for (query, field) in [
        ("column=mean:reward", "column"),
        ("sort=config:a..b", "sort"),
        ("sort=last:reward&order=up", "order"),
    ] {
        let bad = app.get(&format!("/api/runs?{query}"), BOOT).await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{query}");
        assert!(bad.body.contains(field), "{query}: {}", bad.body);
    }
    let (_, sweep) = app.key("read", Some("sweep")).await;
    let own = app.get("/api/runs?sort=last:reward", &sweep).await.json();
    assert_eq!(own["runs"].as_array().map(Vec::len), Some(3));
    assert!(!own.to_string().contains("theirs"));

    // What the list can show as columns: the project's metric keys and config paths.
    let fields = app.get("/api/run-fields?project=sweep", BOOT).await;
    assert_eq!(fields.status, StatusCode::OK, "{}", fields.body);
    assert_eq!(
        fields.json(),
        json!({"metric_keys": ["reward"], "config_paths": ["lr", "model.layers"]})
    );
    let elsewhere = app.get("/api/run-fields?project=beta", &sweep).await.json();
    assert_eq!(elsewhere, json!({"metric_keys": [], "config_paths": []}));
}

on_both!(tokio::test, |t| t;
    runs_compare_side_by_side_within_the_callers_reach,
    the_runs_list_carries_and_sorts_by_the_columns_asked_for,
);
