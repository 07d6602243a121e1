//! A project's retention policy over HTTP: set, tried (`dry_run=true`) and cleared
//! by admin keys only; a bad policy is refused with the field named; the projects
//! list shows the policy in force.

use crate::common;
use crate::common::on_both;
use crate::team::{team, BOOT};

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::json;

const PATH: &str = "/api/projects/alpha/retention";

async fn policy_of(app: &crate::team::Team, key: &str, project: &str) -> serde_json::Value {
    let list = app.get("/api/projects", key).await.json();
    list["projects"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == project))
        .map(|p| p["retention"].clone())
        .unwrap_or_default()
}

async fn a_retention_policy_takes_an_admin_key_and_shows_in_the_projects_list(
    t: common::TestStore,
) {
    let app = team(t, &[BOOT]);
    let (_, write) = app.key("write", None).await;
    let (_, alpha_writer) = app.key("write", Some("alpha")).await;
    let (_, read) = app.key("read", None).await;
    let (_, admin) = app.key("admin", None).await;
    app.seed("r0", "alpha").await;
    let policy = json!({"traces_days": 30, "metrics": "drop"});

    for key in [&write, &alpha_writer] {
        let refused = app.send("PUT", PATH, key, policy.clone()).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
        assert!(refused.body.contains("admin key"), "{}", refused.body);
        let refused = app.send("DELETE", PATH, key, json!({})).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    }
    // A read key is refused at the door, as for every write.
    let refused = app.send("PUT", PATH, &read, policy.clone()).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    // Without credentials, nothing.
    let anonymous = app
        .call(
            "PUT",
            PATH,
            &[("content-type", "application/json")],
            Body::from(policy.to_string()),
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);

    for (bad, field) in [
        (json!({"traces_days": 0}), "traces_days"),
        (json!({"traces_days": 40_000}), "traces_days"),
        (json!({"traces_days": -3}), "traces_days"),
        (json!({"traces_days": 30, "metrics": "archive"}), "metrics"),
        (json!({"traces_day": 30}), "traces_day"),
    ] {
        let refused = app.send("PUT", PATH, &admin, bad.clone()).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(refused.body.contains(field), "{bad}: {}", refused.body);
    }
    let refused = app
        .send(
            "PUT",
            &format!("{PATH}?dry_run=maybe"),
            &admin,
            policy.clone(),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.body.contains("dry_run"), "{}", refused.body);

    // A dry run says what would go and saves nothing.
    let tried = app
        .send(
            "PUT",
            &format!("{PATH}?dry_run=true"),
            &admin,
            policy.clone(),
        )
        .await;
    assert_eq!(tried.status, StatusCode::OK, "{}", tried.body);
    assert_eq!(tried.json()["dry_run"], true);
    // The seeded trace is minutes old: inside any window.
    assert_eq!(tried.json()["preview"]["traces"], 0);
    assert!(policy_of(&app, &admin, "alpha").await.is_null());

    let set = app.send("PUT", PATH, &admin, policy.clone()).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    assert_eq!(set.json()["policy"], policy);
    // Every key that sees the project sees its policy.
    assert_eq!(policy_of(&app, &alpha_writer, "alpha").await, policy);

    let cleared = app.send("DELETE", PATH, &admin, json!({})).await;
    assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.body);
    assert!(policy_of(&app, &admin, "alpha").await.is_null());
}

on_both!(tokio::test, |t| t;
    a_retention_policy_takes_an_admin_key_and_shows_in_the_projects_list,
);

#[tokio::test]
async fn the_retention_command_says_what_would_go_then_removes_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_string_lossy().to_string();
    let treeline = |args: &[&str]| common::treeline_in(&data, args);
    let t = common::TestStore::at(&format!("sqlite:{data}/treeline.db")).await;
    common::run(&t.store, "r0").await;
    // Written long ago (the helper's clock): one closed trace, one still open.
    common::write(
        &t.store,
        "r0",
        &[
            common::open("done", "root", None, "agent", 1),
            common::open("done", "child", Some("root"), "tool", 2),
            common::close("done", "child", "ok", 3),
            common::close("done", "root", "ok", 4),
            common::open("open", "root", None, "agent", 1),
        ],
    )
    .await;

    let (ok, _, err) = treeline(&[
        "retention",
        "set",
        "--project",
        "proj",
        "--traces-days",
        "0",
    ]);
    assert!(!ok && err.contains("--traces-days"), "{err}");
    let set = [
        "retention",
        "set",
        "--project",
        "proj",
        "--traces-days",
        "30",
    ];
    let (ok, out, err) = treeline(&[&set[..], &["--dry-run"]].concat());
    assert!(ok, "{err}");
    assert!(
        out.contains("1 closed traces (2 spans) to remove")
            && out.contains("1 open traces kept")
            && out.contains("unchanged"),
        "{out}"
    );
    let (ok, out, _) = treeline(&["retention", "show"]);
    assert!(ok && out.contains("proj: keeps everything"), "{out}");

    let (ok, out, err) = treeline(&set);
    assert!(ok, "{err}");
    assert!(out.contains("traces kept 30 days, metrics kept"), "{out}");
    let (ok, out, _) = treeline(&["retention", "show"]);
    assert!(ok && out.contains("proj: traces kept 30 days"), "{out}");
    assert_eq!(t.count("SELECT COUNT(*) FROM traces").await, 2);

    let (ok, out, err) = treeline(&["retention", "apply"]);
    assert!(ok, "{err}");
    assert!(out.contains("Removed 1 traces (2 spans)"), "{out}");
    assert_eq!(t.count("SELECT COUNT(*) FROM traces").await, 1);
    assert_eq!(t.count("SELECT COUNT(*) FROM spans").await, 1);
    assert_eq!(t.count("SELECT trace_count FROM runs").await, 1);

    let (ok, out, _) = treeline(&["retention", "clear", "--project", "proj"]);
    assert!(ok && out.contains("keeps everything"), "{out}");
}

/// A running server applies a policy as soon as it is set over the API, while
/// ingest into the same project goes on: every trace acknowledged meanwhile stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_server_applies_a_policy_at_once_while_ingest_goes_on() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_string_lossy().to_string();
    let t = common::TestStore::at(&format!("sqlite:{data}/treeline.db")).await;
    common::run(&t.store, "old").await;
    // 300 traces of 20 spans written long ago (the helper's clock).
    for n in 0..300 {
        let trace = format!("t{n}");
        let mut events = vec![common::open(&trace, "root", None, "rollout", 1)];
        for c in 0..19 {
            let span = format!("s{c}");
            events.push(common::open(&trace, &span, Some("root"), "tool", 2));
            events.push(common::close(&trace, &span, "ok", 3));
        }
        events.push(common::close(&trace, "root", "ok", 4));
        common::write(&t.store, "old", &events).await;
    }
    drop(t);
    let addr = common::free_addr();
    let base = format!("http://{addr}");
    let _server = common::serve(dir.path(), &addr);
    common::wait_ready(&base).await;
    let client = treeline_client::Client::new(&base);
    let run = treeline_wire::RunUpsert {
        project: "proj".into(),
        ..Default::default()
    };
    client.put_run("new", &run).await.expect("run created");

    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (client, acknowledged, stop) = (client.clone(), acknowledged.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let trace = format!("n{n}");
                let events = vec![
                    common::open(&trace, "root", None, "rollout", 1),
                    common::close(&trace, "root", "ok", 2),
                ];
                client.send_events("new", &events).await.expect("events");
                acknowledged.lock().expect("lock").push(trace);
                n += 1;
            }
        })
    };
    let set = reqwest::Client::new()
        .put(format!("{base}/api/projects/proj/retention"))
        .json(&json!({"traces_days": 30}))
        .send()
        .await
        .expect("set");
    assert_eq!(set.status(), reqwest::StatusCode::OK);
    let answer: serde_json::Value = set.json().await.expect("json");
    assert_eq!(answer["preview"]["traces"], 300, "{answer}");

    let count = |sql: String| {
        let url = format!("sqlite:{data}/treeline.db");
        async move {
            use sqlx::Connection;
            let mut conn = sqlx::SqliteConnection::connect(&url)
                .await
                .expect("connect");
            sqlx::query_scalar::<_, i64>(&sql)
                .fetch_one(&mut conn)
                .await
                .expect("count")
        }
    };
    let started = std::time::Instant::now();
    while count("SELECT COUNT(*) FROM traces WHERE run_id = 'old'".into()).await > 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the server did not apply the policy"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.await.expect("writer");
    assert_eq!(
        count("SELECT COUNT(*) FROM spans WHERE run_id = 'old'".into()).await,
        0
    );
    let acknowledged = acknowledged.lock().expect("lock").clone();
    assert!(!acknowledged.is_empty());
    let stored = count("SELECT COUNT(*) FROM traces WHERE run_id = 'new'".into()).await;
    assert_eq!(
        stored,
        acknowledged.len() as i64,
        "acknowledged traces lost"
    );
}
