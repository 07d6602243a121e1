//! A team server for the tests: the whole application router (pages, API, OTLP)
//! with a key given to `serve`, stored keys, sign-in, and replies read as a client
//! would.

use crate::common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;
use treeline_server::http::{secret, AppState};
use treeline_server::site::Site;
use treeline_server::store::KeyRecord;

pub(crate) const HOST: &str = "127.0.0.1:3000";
pub(crate) const ORIGIN: &str = "http://127.0.0.1:3000";
pub(crate) const BOOT: &str = "boot-key";

pub(crate) struct Team {
    pub(crate) app: Router,
    pub(crate) t: common::TestStore,
}

pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    pub(crate) fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub(crate) fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

/// The whole application on `t`, with one key given to `serve` (auth on).
pub(crate) fn team(t: common::TestStore, configured: &[&str]) -> Team {
    let mut state = AppState::new(t.store.clone());
    state.api_keys = Arc::new(configured.iter().map(|k| k.to_string()).collect());
    let addr = HOST.parse().expect("address");
    Team {
        app: treeline_server::serve::app(state, &Site::Dir(std::env::temp_dir()), addr),
        t,
    }
}

impl Team {
    pub(crate) async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Body,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        if !headers.iter().any(|(k, _)| *k == "host") {
            request = request.header("host", HOST);
        }
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        // A hang fails here, naming the request, rather than stalling the suite.
        let answer = async {
            let response = self
                .app
                .clone()
                .oneshot(request.body(body).expect("request"))
                .await
                .expect("answer");
            let (parts, body) = response.into_parts();
            (parts, body.collect().await.expect("body").to_bytes())
        };
        let (parts, bytes) = tokio::time::timeout(std::time::Duration::from_secs(60), answer)
            .await
            .unwrap_or_else(|_| panic!("{method} {path} did not answer within 60 s"));
        let (status, headers) = (parts.status, parts.headers);
        Reply {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    pub(crate) async fn get(&self, path: &str, key: &str) -> Reply {
        let auth = format!("Bearer {key}");
        self.call("GET", path, &[("authorization", &auth)], Body::empty())
            .await
    }

    pub(crate) async fn send(&self, method: &str, path: &str, key: &str, body: Value) -> Reply {
        let auth = format!("Bearer {key}");
        let headers = [
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ];
        self.call(method, path, &headers, Body::from(body.to_string()))
            .await
    }

    /// Stores a key and answers its secret.
    pub(crate) async fn key(&self, scope: &str, project: Option<&str>) -> (String, String) {
        let secret = secret::new_key().expect("randomness");
        let id = secret::new_key_id().expect("randomness");
        let record = KeyRecord {
            id: id.clone(),
            name: format!("{scope} test key"),
            scope: scope.into(),
            project: project.map(str::to_string),
            created_us: 1,
            last_used_us: None,
            revoked_us: None,
        };
        self.t
            .store
            .access()
            .create_key(&record, &secret::digest(&secret))
            .await
            .expect("create key");
        (id, secret)
    }

    /// Revokes the stored key `id` at time `at`; whether it was in use until then.
    pub(crate) async fn revoke(&self, id: &str, at: i64) -> bool {
        self.t
            .store
            .access()
            .revoke_key(id, at)
            .await
            .expect("revoke")
    }

    /// Signs in with `key`; answers the session cookie (`name=value`).
    pub(crate) async fn sign_in(&self, key: &str, next: &str) -> Reply {
        self.sign_in_with(key, next, &[("origin", ORIGIN)]).await
    }

    /// Signs in with `key` and these headers besides the form's type (an Origin, a
    /// proxy's X-Forwarded-Proto).
    pub(crate) async fn sign_in_with(
        &self,
        key: &str,
        next: &str,
        headers: &[(&str, &str)],
    ) -> Reply {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("key", key)
            .append_pair("next", next)
            .finish();
        let mut all = vec![("content-type", "application/x-www-form-urlencoded")];
        all.extend_from_slice(headers);
        self.call("POST", "/login", &all, Body::from(form)).await
    }

    /// A run in `project` with one trace of a root and a child span.
    pub(crate) async fn seed(&self, run: &str, project: &str) {
        let reply = self
            .send(
                "PUT",
                &format!("/api/runs/{run}"),
                BOOT,
                json!({"project": project}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        let events = json!({"events": [
            common::open(&format!("t-{run}"), "root", None, "agent", 1_000),
            common::open(&format!("t-{run}"), "child", Some("root"), "model", 1_100),
            common::close(&format!("t-{run}"), "child", "ok", 1_200),
            common::close(&format!("t-{run}"), "root", "ok", 1_300),
        ]});
        let reply = self
            .send(
                "POST",
                &format!("/api/runs/{run}/traces/events"),
                BOOT,
                events,
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let points = json!({"points": [{"key": "reward", "step": 1, "value": 0.5}]});
        let reply = self
            .send("POST", &format!("/api/runs/{run}/metrics"), BOOT, points)
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
}

pub(crate) fn cookie_of(reply: &Reply) -> String {
    let set = reply
        .headers
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a session cookie");
    set.split(';').next().unwrap_or_default().to_string()
}
