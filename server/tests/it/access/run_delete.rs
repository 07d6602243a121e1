//! Deleting a run over HTTP: admin keys only; the run is gone from the API at once;
//! a write to its id waits (503 with Retry-After) until its data is removed, and a
//! retried request whose Idempotency-Key was answered before writes again after.

use crate::common;
use crate::common::on_both;
use crate::team::{team, BOOT};

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::json;

async fn delete(app: &crate::team::Team, run: &str, key: &str) -> crate::team::Reply {
    let auth = format!("Bearer {key}");
    app.call(
        "DELETE",
        &format!("/api/runs/{run}"),
        &[("authorization", &auth)],
        Body::empty(),
    )
    .await
}

async fn deleting_a_run_takes_an_admin_key_and_frees_its_id_after(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    let (_, write) = app.key("write", None).await;
    let (_, alpha_writer) = app.key("write", Some("alpha")).await;
    let (_, admin) = app.key("admin", None).await;
    app.seed("r0", "alpha").await;
    app.seed("r1", "alpha").await;
    // A write answered under an Idempotency-Key before the delete.
    let points = json!({"points": [{"key": "loss", "step": 2, "value": 0.1}]});
    let keyed = |key: &str| {
        let auth = format!("Bearer {key}");
        (auth, points.to_string())
    };
    let (auth, body) = keyed(BOOT);
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("idempotency-key", "once"),
    ];
    let first = app
        .call(
            "POST",
            "/api/runs/r0/metrics",
            &headers,
            Body::from(body.clone()),
        )
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);

    for key in [&write, &alpha_writer] {
        let refused = delete(&app, "r0", key).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
        assert_eq!(refused.code(), "forbidden");
    }
    assert_eq!(app.get("/api/runs/r0", &admin).await.status, StatusCode::OK);
    assert_eq!(
        delete(&app, "nope", &admin).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        delete(&app, "bad%20id", &admin).await.status,
        StatusCode::BAD_REQUEST
    );

    let done = delete(&app, "r0", &admin).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert_eq!(done.json()["project"], "alpha");
    // Gone from the API at once; the other run stays.
    for path in [
        "/api/runs/r0",
        "/api/runs/r0/traces",
        "/api/runs/r0/metrics?key=reward",
    ] {
        assert_eq!(
            app.get(path, &admin).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    let listed = app.get("/api/traces?project=alpha", &admin).await.json();
    let runs: Vec<_> = listed["traces"]
        .as_array()
        .expect("traces")
        .iter()
        .map(|t| t["run_id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(runs, vec!["r1"]);
    assert_eq!(
        delete(&app, "r0", &admin).await.status,
        StatusCode::NOT_FOUND
    );

    // Its id waits while its data is removed.
    let early = app
        .send("PUT", "/api/runs/r0", &admin, json!({"project": "alpha"}))
        .await;
    assert_eq!(
        early.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        early.body
    );
    assert!(early.headers.get("retry-after").is_some());

    // (The server's purge runs beside `serve`; here the store's steps stand in.)
    while let Some(step) = app.t.store.purge_step(100).await.expect("purge") {
        if step.done {
            break;
        }
    }
    let made = app
        .send("PUT", "/api/runs/r0", &admin, json!({"project": "alpha"}))
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    // The retry is written, not replayed: the new run has the point.
    let again = app
        .call("POST", "/api/runs/r0/metrics", &headers, Body::from(body))
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert!(again.headers.get("idempotent-replayed").is_none());
    let series = app
        .get("/api/runs/r0/metrics?key=loss", &admin)
        .await
        .json();
    assert_eq!(
        series["points"].as_array().map(Vec::len),
        Some(1),
        "{series}"
    );
}

on_both!(tokio::test, |t| t;
    deleting_a_run_takes_an_admin_key_and_frees_its_id_after,
);

#[tokio::test]
async fn the_runs_command_deletes_a_run_and_removes_its_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_string_lossy().to_string();
    let treeline = |args: &[&str]| common::treeline_in(&data, args);
    let (ok, _, err) = treeline(&["runs", "delete", "r0"]);
    assert!(!ok && err.contains("no Treeline database"), "{err}");
    let t = common::TestStore::at(&format!("sqlite:{data}/treeline.db")).await;
    let app = team(t, &[BOOT]);
    app.seed("r0", "alpha").await;
    app.seed("r1", "alpha").await;
    let (ok, _, err) = treeline(&["runs", "delete", "nope"]);
    assert!(!ok && err.contains("no run \"nope\""), "{err}");
    let (ok, out, err) = treeline(&["runs", "delete", "r0"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("Deleted run r0") && out.contains("Removed run r0's data"),
        "{out}"
    );
    for table in ["runs", "traces", "spans", "metric_points"] {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE run_id = 'r0'");
        assert_eq!(app.t.count(&sql).await, 0, "{table}");
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE run_id = 'r1'");
        assert!(app.t.count(&sql).await > 0, "{table} of r1");
    }
    assert_eq!(app.t.count("SELECT COUNT(*) FROM deleted_runs").await, 0);
}
