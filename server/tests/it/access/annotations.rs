//! Annotations on a team server: who may write them, whose they are, and what a
//! project key reaches.

use crate::common;
use crate::common::on_both;
use crate::team::{cookie_of, team, BOOT, ORIGIN};

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{json, Value};

const NOTES: &str = "/api/runs/ra/traces/t-ra/annotations";

fn names_and_authors(list: &Value) -> Vec<(String, String, Value)> {
    list["annotations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|n| {
                    (
                        n["name"].as_str().unwrap_or_default().to_string(),
                        n["author"]["name"].as_str().unwrap_or_default().to_string(),
                        n["value"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn writers_annotate_as_themselves_and_readers_only_read(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    app.seed("ra", "alpha").await;
    app.seed("rb", "beta").await;
    let (_, read) = app.key("read", None).await;
    let (_, write) = app.key("write", None).await;
    let (_, admin) = app.key("admin", None).await;

    let refused = app
        .send(
            "PUT",
            NOTES,
            &read,
            json!({"name": "label", "value": "hack"}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);

    // Two authors, one name: two annotations, each its author's.
    for (key, value) in [(&write, "reward hacking"), (&admin, "fine")] {
        let made = app
            .send("PUT", NOTES, key, json!({"name": "label", "value": value}))
            .await;
        assert_eq!(made.status, StatusCode::OK, "{}", made.body);
        assert_eq!(
            made.json()["source"],
            "code",
            "a key is code unless it says"
        );
    }
    let listed = app.get(NOTES, &read).await;
    assert_eq!(listed.status, StatusCode::OK);
    let mut got = names_and_authors(&listed.json());
    got.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        got,
        [
            ("label".into(), "admin test key".into(), json!("fine")),
            (
                "label".into(),
                "write test key".into(),
                json!("reward hacking")
            ),
        ]
    );
    // A delete takes the caller's own annotation only.
    let gone = app
        .send("DELETE", NOTES, &write, json!({"name": "label"}))
        .await;
    assert_eq!(gone.json()["deleted"], true, "{}", gone.body);
    let again = app
        .send("DELETE", NOTES, &write, json!({"name": "label"}))
        .await;
    assert_eq!(again.json()["deleted"], false);
    let left = names_and_authors(&app.get(NOTES, &read).await.json());
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].1, "admin test key");

    // A key of project beta: alpha's trace answers as an absent one does, for
    // every method, and nothing is written.
    let (_, beta) = app.key("write", Some("beta")).await;
    for (method, body) in [
        ("PUT", json!({"name": "label", "value": "x"})),
        ("DELETE", json!({"name": "label"})),
    ] {
        let hidden = app.send(method, NOTES, &beta, body).await;
        assert_eq!(
            hidden.status,
            StatusCode::NOT_FOUND,
            "{method}: {}",
            hidden.body
        );
        assert_eq!(hidden.code(), "run_not_found");
    }
    assert_eq!(app.get(NOTES, &beta).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        names_and_authors(&app.get(NOTES, &admin).await.json()).len(),
        1
    );
    // Its own project's trace it annotates.
    let own = app
        .send(
            "PUT",
            "/api/runs/rb/traces/t-rb/annotations",
            &beta,
            json!({"span_id": "child", "name": "score", "value": 3, "source": "person"}),
        )
        .await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.body);
    assert_eq!(
        (own.json()["span_id"].clone(), own.json()["source"].clone()),
        (json!("child"), json!("person"))
    );
}

/// A signed-in person annotates from this site only, and as a person.
async fn a_session_annotates_from_this_site_only(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    app.seed("ra", "alpha").await;
    let cookie = cookie_of(&app.sign_in(BOOT, "/").await);
    let body = json!({"name": "label", "value": "hack"}).to_string();
    let put = |origin: &'static str| {
        let (cookie, body) = (cookie.clone(), body.clone());
        let app = &app;
        async move {
            let headers = [
                ("cookie", cookie.as_str()),
                ("content-type", "application/json"),
                ("origin", origin),
            ];
            app.call("PUT", NOTES, &headers, Body::from(body)).await
        }
    };
    let refused = put("http://evil.example").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert_eq!(refused.code(), "cross_site_request");
    assert!(names_and_authors(&app.get(NOTES, BOOT).await.json()).is_empty());
    let made = put(ORIGIN).await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.body);
    assert_eq!(
        (
            made.json()["source"].clone(),
            made.json()["author"]["name"].clone()
        ),
        (json!("person"), json!("server key"))
    );
}

on_both!(tokio::test, |t| t;
    writers_annotate_as_themselves_and_readers_only_read,
    a_session_annotates_from_this_site_only,
);
