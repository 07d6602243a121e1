//! Keys: every route needs one when auth is on, scopes, project keys, revocation,
//! and the `keys` command.

use crate::common;
use crate::common::on_both;
use crate::team::{cookie_of, team, BOOT};

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{json, Value};
use treeline_server::http::secret;
use treeline_wire::routes;

/// A template's placeholders filled with `x`.
fn filled(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find(['{', ':']) {
        out.push_str(&rest[..open]);
        out.push('x');
        let after = &rest[open..];
        let end = after.find(['}', '/']).map_or(after.len(), |e| {
            e + usize::from(after.as_bytes()[e] == b'}')
        });
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[tokio::test]
async fn every_route_needs_credentials_when_auth_is_on() {
    let app = team(common::sqlite().await, &[BOOT]);
    let mut walked = 0;
    for (method, template) in routes::ALL {
        let path = format!("{}{}", routes::API_PREFIX, filled(template));
        let reply = app.call(method, &path, &[], Body::empty()).await;
        assert_eq!(
            reply.status,
            StatusCode::UNAUTHORIZED,
            "{method} {path}: {}",
            reply.body
        );
        assert_eq!(reply.code(), "unauthorized", "{method} {path}");
        walked += 1;
    }
    assert!(walked >= 15, "the route list shrank to {walked}");
    // The door stands before routing: a path no route has yet is refused too.
    for (method, path) in [
        ("GET", "/api/not-yet-a-route"),
        ("DELETE", "/api/projects/x"),
    ] {
        let reply = app.call(method, path, &[], Body::empty()).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    for path in [routes::OTLP_TRACES, routes::OTLP_METRICS, routes::OTLP_LOGS] {
        let reply = app.call("POST", path, &[], Body::empty()).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "OTLP {path}");
    }
    // With a key, OTLP's other signals get a JSON answer that says what Treeline takes.
    for path in [routes::OTLP_METRICS, routes::OTLP_LOGS] {
        let reply = app.send("POST", path, BOOT, serde_json::json!({})).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(reply.code(), "signal_not_supported", "{path}");
        assert!(reply.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/v1/traces")));
    }
    // Every page the dashboard has sends a signed-out browser to sign in.
    let pages = treeline_server::serve::page_routes();
    assert!(pages.len() >= 3);
    for page in pages {
        let path = filled(page.path());
        let reply = app.call("GET", &path, &[], Body::empty()).await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "page {path}");
        assert!(reply.location().starts_with("/login?next="), "page {path}");
    }
    // What stays open: health, the sign-in page, and the static bundle.
    assert_eq!(
        app.call("GET", "/healthz", &[], Body::empty()).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.call("GET", "/login", &[], Body::empty()).await.status,
        StatusCode::OK
    );
}

async fn scopes_read_write_admin(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    let (_, read) = app.key("read", None).await;
    let (_, write) = app.key("write", None).await;
    let (_, admin) = app.key("admin", None).await;
    app.seed("r0", "alpha").await;
    for key in [&read, &write, &admin] {
        assert_eq!(app.get("/api/runs/r0", key).await.status, StatusCode::OK);
        assert_eq!(app.get("/api/projects", key).await.status, StatusCode::OK);
    }
    let refused = app
        .send("PUT", "/api/runs/r1", &read, json!({"project": "alpha"}))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert_eq!(refused.code(), "forbidden");
    let refused = app
        .send(
            "POST",
            "/api/runs/r0/finish",
            &read,
            json!({"status": "finished"}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    for (run, key) in [("r2", &write), ("r3", &admin)] {
        let made = app
            .send(
                "PUT",
                &format!("/api/runs/{run}"),
                key,
                json!({"project": "beta"}),
            )
            .await;
        assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    }
    // Nothing the read key tried was written.
    assert_eq!(
        app.get("/api/runs/r1", &admin).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/api/runs/r0", &admin).await.json()["status"],
        "running"
    );
}

async fn a_project_key_sees_only_its_project(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    app.seed("ra", "alpha").await;
    app.seed("rb", "beta").await;
    let (_, key) = app.key("write", Some("alpha")).await;
    let projects = app.get("/api/projects", &key).await.json();
    let names: Vec<&str> = projects["projects"]
        .as_array()
        .expect("projects")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["alpha"]);
    let ids = |list: Value, field: &str| -> Vec<String> {
        list[field]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|r| r["run_id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(ids(app.get("/api/runs", &key).await.json(), "runs"), ["ra"]);
    assert!(ids(app.get("/api/runs?project=beta", &key).await.json(), "runs").is_empty());
    assert_eq!(
        ids(app.get("/api/traces", &key).await.json(), "traces"),
        ["ra"]
    );
    assert!(ids(
        app.get("/api/traces?project=beta", &key).await.json(),
        "traces"
    )
    .is_empty());
    // Search finds only this project's traces, though both match.
    assert_eq!(
        ids(app.get("/api/traces?q=agent", &key).await.json(), "traces"),
        ["ra"]
    );
    let (_, admin) = app.key("admin", None).await;
    assert_eq!(
        ids(
            app.get("/api/traces?q=agent", &admin).await.json(),
            "traces"
        )
        .len(),
        2
    );
    // The other project's run, trace and span answer exactly as absent ones do.
    for path in [
        "/api/runs/rb",
        "/api/runs/rb/metrics?key=reward",
        "/api/runs/rb/traces",
        "/api/traces?run_id=rb",
        "/api/runs/rb/traces/steps",
        "/api/runs/rb/traces/attributes",
        "/api/runs/rb/traces/t-rb",
        "/api/runs/rb/traces/t-rb/spans",
        "/api/runs/rb/traces/t-rb/spans/root",
        "/api/runs/rb/stats?value=span_count",
        "/api/runs/rb/groups?by=children&value=attr.reward",
        "/api/runs/rb/changes?min_step=1&max_step=2",
    ] {
        let hidden = app.get(path, &key).await;
        let absent = app.get(&path.replace("rb", "nope"), &key).await;
        assert_eq!(
            hidden.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            hidden.body
        );
        assert_eq!(hidden.code(), absent.code(), "{path}");
        assert_eq!(app.get(path, &admin).await.status, StatusCode::OK, "{path}");
    }
    // Writes: only into its project, and another project's run is not there.
    let refused = app
        .send("PUT", "/api/runs/rc", &key, json!({"project": "beta"}))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let hidden = app
        .send(
            "POST",
            "/api/runs/rb/traces/events",
            &key,
            json!({"events": []}),
        )
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{}", hidden.body);
    let hidden = app
        .send(
            "POST",
            "/api/runs/rb/finish",
            &key,
            json!({"status": "failed"}),
        )
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{}", hidden.body);
    let taken = app
        .send("PUT", "/api/runs/rb", &key, json!({"project": "alpha"}))
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert!(!taken.body.contains("beta"), "{}", taken.body);
    assert_eq!(
        app.get("/api/runs/rb", &admin).await.json()["status"],
        "running"
    );
    let made = app
        .send("PUT", "/api/runs/rc", &key, json!({"project": "alpha"}))
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    // OTLP: spans naming another project are refused whole.
    let otlp = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "treeline.project", "value": {"stringValue": "beta"}}]},
        "scopeSpans": [{"spans": [{"traceId": "0102030405060708090a0b0c0d0e0f10",
            "spanId": "0102030405060708", "name": "x",
            "startTimeUnixNano": "1000000000", "endTimeUnixNano": "2000000000"}]}]}]});
    let refused = app.send("POST", "/v1/traces", &key, otlp.clone()).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    // Its own project's spans go in, into a run created for them.
    let mut own = otlp;
    own["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"] = json!("alpha");
    let stored = app.send("POST", "/v1/traces", &key, own.clone()).await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.body);
    let runs = app.get("/api/runs?project=alpha", &key).await.json();
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(3), "{runs}");
    // Into a named run of another project: refused whole, as if it were not there.
    own["resourceSpans"][0]["resource"]["attributes"]
        .as_array_mut()
        .expect("attributes")
        .push(json!({"key": "treeline.run_id", "value": {"stringValue": "rb"}}));
    let hidden = app.send("POST", "/v1/traces", &key, own).await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{}", hidden.body);
}

async fn revoking_ends_api_use_and_sessions(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    let (id, key) = app.key("read", None).await;
    let signed = app.sign_in(&key, "/traces").await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
    let cookie = cookie_of(&signed);
    let with_cookie = [("cookie", cookie.as_str())];
    assert_eq!(app.get("/api/projects", &key).await.status, StatusCode::OK);
    let page = app.call("GET", "/", &with_cookie, Body::empty()).await;
    assert_eq!(page.status, StatusCode::OK);
    let api = app
        .call("GET", "/api/projects", &with_cookie, Body::empty())
        .await;
    assert_eq!(api.status, StatusCode::OK);
    assert!(app.revoke(&id, 1).await);
    assert_eq!(
        app.get("/api/projects", &key).await.status,
        StatusCode::UNAUTHORIZED
    );
    let page = app.call("GET", "/", &with_cookie, Body::empty()).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    let api = app
        .call("GET", "/api/projects", &with_cookie, Body::empty())
        .await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    assert!(!app.revoke(&id, 2).await);
}

/// Whether credentials are asked for follows the stored keys from one request to
/// the next, whatever a request carries: before the first key and after the last is
/// revoked, a request with a bad, unknown or revoked key is answered as one with
/// none is; in between, only the stored key answers.
async fn credentials_follow_the_stored_keys_request_by_request(t: common::TestStore) {
    let app = team(t, &[]);
    let every = |status: StatusCode| ASKS.map(|(name, _)| (name, status)).to_vec();
    assert_eq!(answers(&app).await, every(StatusCode::OK), "no keys yet");
    let (id, key) = app.key("read", None).await;
    assert_eq!(
        answers(&app).await,
        every(StatusCode::UNAUTHORIZED),
        "a key stored"
    );
    assert_eq!(app.get("/api/projects", &key).await.status, StatusCode::OK);
    assert!(app.revoke(&id, 1).await);
    assert_eq!(
        answers(&app).await,
        every(StatusCode::OK),
        "the last key revoked"
    );
    assert_eq!(app.get("/api/projects", &key).await.status, StatusCode::OK);
}

/// Requests with no key, a malformed one and an unknown one.
const ASKS: [(&str, &[(&str, &str)]); 3] = [
    ("none", &[]),
    ("malformed", &[("authorization", "Basic a2V5")]),
    ("unknown", &[("authorization", "Bearer no-such-key")]),
];

/// How the server answers each of [`ASKS`].
async fn answers(app: &crate::team::Team) -> Vec<(&'static str, StatusCode)> {
    let mut answers = Vec::new();
    for (name, headers) in ASKS {
        let reply = app
            .call("GET", "/api/projects", headers, Body::empty())
            .await;
        answers.push((name, reply.status));
    }
    answers
}

on_both!(tokio::test, |t| t;
    scopes_read_write_admin,
    a_project_key_sees_only_its_project,
    revoking_ends_api_use_and_sessions,
    credentials_follow_the_stored_keys_request_by_request,
);

#[tokio::test]
async fn the_keys_command_creates_lists_and_revokes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_string_lossy().to_string();
    let treeline = |args: &[&str]| common::treeline_in(&data, args);
    // Where there is no database yet, nothing is made without --init.
    let (ok, _, err) = treeline(&["keys", "list"]);
    assert!(
        !ok && err.contains("no Treeline database") && err.contains("--init"),
        "{err}"
    );
    assert!(!dir.path().join("treeline.db").exists());
    let (ok, out, err) = treeline(&[
        "keys",
        "create",
        "--init",
        "--scope",
        "read",
        "--project",
        "alpha",
        "--name",
        "ci",
    ]);
    assert!(ok, "{err}");
    let key = out.lines().last().expect("the key, last").to_string();
    assert!(key.starts_with("tl_"), "{out}");
    let (ok, list, _) = treeline(&["keys", "list"]);
    assert!(ok);
    assert!(
        list.contains("ci")
            && list.contains("read")
            && list.contains("alpha")
            && list.contains("never"),
        "{list}"
    );
    assert!(!list.contains(&key), "a key is shown only once");
    let id = list
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .expect("an id")
        .to_string();
    let t = common::TestStore::at(&format!("sqlite:{data}/treeline.db")).await;
    assert!(t
        .store
        .access()
        .key_by_digest(&secret::digest(&key))
        .await
        .expect("lookup")
        .is_some());
    let (ok, _, err) = treeline(&["keys", "create", "--scope", "admin", "--project", "alpha"]);
    assert!(!ok && err.contains("every project"), "{err}");
    // The last key that works is revoked only when that is said twice.
    let (ok, _, err) = treeline(&["keys", "revoke", &id]);
    assert!(
        !ok && err.contains("last key") && err.contains("--last"),
        "{err}"
    );
    assert!(t.store.access().any_key().await.expect("any key"));
    let (ok, out, _) = treeline(&["keys", "revoke", &id, "--last"]);
    assert!(ok && out.contains("No key works now"), "{out}");
    assert!(!t.store.access().any_key().await.expect("any key"));
    assert!(t
        .store
        .access()
        .key_by_digest(&secret::digest(&key))
        .await
        .expect("lookup")
        .is_none());
    let (ok, _, err) = treeline(&["keys", "revoke", &id, "--last"]);
    assert!(!ok && err.contains("revoked already"), "{err}");
    // A revoked key stays listed, with when.
    let (ok, list, _) = treeline(&["keys", "list"]);
    let row = list
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_default();
    assert!(
        ok && row.ends_with("UTC"),
        "the revoked column has a time: {list}"
    );
    assert!(
        list.lines().next().is_some_and(|h| h.ends_with("REVOKED")),
        "{list}"
    );
    let (ok, _, err) = treeline(&["keys", "revoke", "key_000000000000"]);
    assert!(!ok && err.contains("no key"), "{err}");
}
