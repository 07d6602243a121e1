//! Requests from other sites are refused and write nothing; pages carry a script
//! policy with their own nonce.

use crate::common;
use crate::team::{cookie_of, team, Team, BOOT, ORIGIN};

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{json, Value};

async fn run_status(app: &Team, run: &str) -> (Value, Value) {
    let detail = app.get(&format!("/api/runs/{run}"), BOOT).await.json();
    (detail["status"].clone(), detail["trace_count"].clone())
}

#[tokio::test]
async fn cross_site_requests_are_refused_and_write_nothing() {
    // Keyless loopback: a page of any site can post to 127.0.0.1 without a
    // preflight only with a form's content types, and those are refused.
    let open = team(common::sqlite().await, &[]);
    let made = open
        .send("PUT", "/api/runs/r1", "", json!({"project": "p"}))
        .await;
    assert_eq!(made.status, StatusCode::CREATED);
    let events = json!({"events": [common::open("t", "s", None, "model", 1)]}).to_string();
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        for path in ["/api/runs/r1/traces/events", "/api/runs/r1/finish"] {
            let reply = open
                .call(
                    "POST",
                    path,
                    &[
                        ("content-type", content_type),
                        ("origin", "http://evil.example"),
                    ],
                    Body::from(events.clone()),
                )
                .await;
            assert_eq!(
                reply.status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{content_type} {path}"
            );
        }
    }
    let run = open
        .call("GET", "/api/runs/r1", &[], Body::empty())
        .await
        .json();
    assert_eq!(
        (run["status"].clone(), run["trace_count"].clone()),
        (json!("running"), json!(0))
    );
    let rebound = open
        .call(
            "GET",
            "/api/projects",
            &[("host", "attacker.example")],
            Body::empty(),
        )
        .await;
    assert_eq!(rebound.status, StatusCode::FORBIDDEN);

    // With a session cookie, a change must come from this site.
    let app = team(common::sqlite().await, &[BOOT]);
    app.seed("r1", "p").await;
    let cookie = cookie_of(&app.sign_in(BOOT, "/").await);
    let finish = json!({"status": "failed"}).to_string();
    for origin in [
        &[("origin", "http://evil.example")][..],
        &[("sec-fetch-site", "cross-site")][..],
        &[][..],
    ] {
        let mut headers = vec![
            ("cookie", cookie.as_str()),
            ("content-type", "application/json"),
        ];
        headers.extend_from_slice(origin);
        let reply = app
            .call(
                "POST",
                "/api/runs/r1/finish",
                &headers,
                Body::from(finish.clone()),
            )
            .await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{origin:?}: {}",
            reply.body
        );
        assert_eq!(reply.code(), "cross_site_request");
    }
    assert_eq!(run_status(&app, "r1").await.0, "running");
    let same = app
        .call(
            "POST",
            "/api/runs/r1/finish",
            &[
                ("cookie", &cookie),
                ("content-type", "application/json"),
                ("origin", ORIGIN),
            ],
            Body::from(finish),
        )
        .await;
    assert_eq!(same.status, StatusCode::OK, "{}", same.body);
    assert_eq!(run_status(&app, "r1").await.0, "failed");
}

#[tokio::test]
async fn pages_carry_a_script_policy_with_their_own_nonce() {
    let app = team(common::sqlite().await, &[]);
    let page = app.call("GET", "/", &[], Body::empty()).await;
    assert_eq!(page.status, StatusCode::OK);
    let policy = page.headers["content-security-policy"]
        .to_str()
        .expect("ascii");
    assert!(
        policy.contains("frame-ancestors 'none'") && policy.contains("'wasm-unsafe-eval'"),
        "{policy}"
    );
    let nonce = policy
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a nonce in the policy");
    assert!(nonce.len() >= 16, "{nonce}");
    assert!(
        page.body.contains(&format!(r#"nonce="{nonce}""#)),
        "the hydration script carries the nonce"
    );
    let second = app.call("GET", "/", &[], Body::empty()).await;
    assert!(!second.headers["content-security-policy"]
        .to_str()
        .expect("ascii")
        .contains(nonce));
    // Answers that are not pages allow no inline script at all.
    let api = app.call("GET", "/api/projects", &[], Body::empty()).await;
    let policy = api.headers["content-security-policy"]
        .to_str()
        .expect("ascii");
    assert!(
        !policy.contains("nonce") && policy.contains("script-src 'self'"),
        "{policy}"
    );
}
