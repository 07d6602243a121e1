//! The whole application router (pages, API, OTLP) as a browser meets it: the Host
//! check of a keyless server, and the headers every answer carries.

use crate::common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use tower::ServiceExt;
use treeline_server::http::AppState;
use treeline_server::site::Site;

async fn app(keys: Vec<String>, allowed: Vec<String>) -> (Router, common::TestStore) {
    let store = common::sqlite().await;
    let mut state = AppState::new(store.store.clone());
    state.api_keys = Arc::new(keys);
    state.allowed_hosts = Arc::new(allowed);
    let site = Site::Dir(std::env::temp_dir());
    let addr = "127.0.0.1:3000".parse().expect("address");
    (treeline_server::serve::app(state, &site, addr), store)
}

async fn get(app: &Router, path: &str, host: &str) -> (StatusCode, axum::http::HeaderMap, String) {
    let request = Request::get(path)
        .header("host", host)
        .body(Body::empty())
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("answer");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

#[tokio::test]
async fn a_keyless_server_answers_only_to_loopback_hosts() {
    let (app, _store) = app(vec![], vec!["dash.internal".into()]).await;
    for path in ["/healthz", "/api/projects", "/"] {
        let (status, headers, body) = get(&app, path, "attacker.example").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert!(body.contains("host_not_allowed"), "{path}: {body}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        let (status, _, _) = get(&app, path, "attacker.example:3000").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
    }
    for host in [
        "127.0.0.1:3000",
        "localhost:3000",
        "[::1]:3000",
        "dash.internal",
    ] {
        let (status, _, body) = get(&app, "/api/projects", host).await;
        assert_eq!(status, StatusCode::OK, "{host}: {body}");
    }
}

#[tokio::test]
async fn with_keys_any_host_is_answered() {
    let (app, _store) = app(vec!["k".into()], vec![]).await;
    // Not refused for its Host, but for its missing key.
    let (status, _, body) = get(&app, "/api/projects", "treeline.example.org").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
}

#[tokio::test]
async fn pages_and_api_answers_carry_the_security_headers() {
    let (app, _store) = app(vec![], vec![]).await;
    for path in ["/", "/api/projects", "/healthz"] {
        let (status, headers, _) = get(&app, path, "127.0.0.1:3000").await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{path}");
        let policy = headers["content-security-policy"].to_str().expect("ascii");
        assert!(
            policy.contains("frame-ancestors 'none'"),
            "{path}: {policy}"
        );
    }
}
