//! Tenancy: one project's key never reaches another project's data, through OTLP's
//! daily runs, through a race between two requests, or through what an error says;
//! and the doors of a team server (pages on every path, sign-in throttled, the
//! secure cookie's name, the keys `serve` takes).

use crate::common;
use crate::common::on_both;
use crate::team::{cookie_of, team, Team, BOOT};

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{json, Value};
use treeline_server::http::AppState;
use treeline_server::otlp::runs::{daily_run_id, day_of};
use treeline_server::site::{Files, Site};

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// An OTLP/JSON export of one span of `service` (no run named: its daily run).
fn export(service: &str, trace: u8, start_us: i64) -> Value {
    json!({"resourceSpans": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
    "scopeSpans": [{"spans": [{
        "traceId": format!("{trace:032x}"), "spanId": format!("{trace:016x}"),
        "name": format!("{service} work"),
        "startTimeUnixNano": (start_us * 1000).to_string(),
        "endTimeUnixNano": ((start_us + 1000) * 1000).to_string(),
        "attributes": [{"key": "secret.prompt", "value": {"stringValue": format!("{service}'s prompt")}}]
    }]}]}]})
}

/// The trace ids a key lists in a run (404 and an empty list alike give none).
async fn traces_seen(app: &Team, run: &str, key: &str) -> Vec<String> {
    let reply = app.get(&format!("/api/runs/{run}/traces"), key).await;
    reply.json()["traces"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|t| t["trace_id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Takes `project`'s daily run id of `day` with `key`, a key of project beta: the
/// id, made a run of beta's.
async fn squat(app: &Team, key: &str, project: &str, day: i64) -> String {
    let squatted = daily_run_id(project, day);
    let made = app
        .send(
            "PUT",
            &format!("/api/runs/{squatted}"),
            key,
            json!({"project": "beta"}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    squatted
}

/// `POST /api/projects/{project}/daily-run` (`project` as it goes in the path) with `key`.
async fn ask_daily(app: &Team, project: &str, key: &str) -> crate::team::Reply {
    app.send(
        "POST",
        &format!("/api/projects/{project}/daily-run"),
        key,
        json!({}),
    )
    .await
}

async fn a_squatted_daily_run_captures_no_spans(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    let (_, beta) = app.key("write", Some("beta")).await;
    let (_, gamma) = app.key("write", Some("gamma")).await;
    let now = now_us();
    // beta takes gamma's predictable daily run id, in its own project.
    let squatted = squat(&app, &beta, "gamma", day_of(now)).await;
    // gamma's exporter, with an admin key and then with gamma's own key.
    for (key, trace) in [(BOOT, 1u8), (gamma.as_str(), 2u8)] {
        let sent = app
            .send("POST", "/v1/traces", key, export("gamma", trace, now))
            .await;
        assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
        assert_eq!(sent.json(), json!({}), "every span stored: {}", sent.body);
    }
    assert!(
        traces_seen(&app, &squatted, &beta).await.is_empty(),
        "beta reads none of gamma's spans"
    );
    // Both of gamma's traces are in one run of gamma's, beside the squatted id.
    let runs = app.get("/api/runs?project=gamma", &gamma).await.json();
    let runs = runs["runs"].as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let own = runs[0]["run_id"].as_str().unwrap_or_default().to_string();
    assert!(own.starts_with(&format!("{squatted}-")), "{own}");
    assert_eq!(traces_seen(&app, &own, &gamma).await.len(), 2);
    // The next export finds the same run again.
    let again = app
        .send("POST", "/v1/traces", &gamma, export("gamma", 3, now))
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(traces_seen(&app, &own, &gamma).await.len(), 3);
}

async fn a_project_tracer_gets_the_run_otlp_uses_and_no_other_projects(t: common::TestStore) {
    let app = team(t, &[BOOT]);
    let (_, beta) = app.key("write", Some("beta")).await;
    let (_, gamma) = app.key("write", Some("gamma")).await;
    let (_, gamma_reads) = app.key("read", Some("gamma")).await;
    let now = now_us();
    // beta squats gamma's daily id: gamma's tracer is given its alternate instead.
    let squatted = squat(&app, &beta, "gamma", day_of(now)).await;
    let asked = ask_daily(&app, "gamma", &gamma).await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.body);
    let placed = asked.json();
    let run = placed["run_id"].as_str().unwrap_or_default().to_string();
    assert!(run.starts_with(&format!("{squatted}-")), "{placed}");
    assert_eq!(placed["project"], "gamma");
    assert!(
        placed["name"].as_str().is_some_and(
            |n| n.starts_with("gamma ") && n.contains(placed["date"].as_str().unwrap_or("?"))
        ),
        "{placed}"
    );
    // Asked again, the same run; and gamma's OTLP spans without a run land in it too.
    let again = ask_daily(&app, "gamma", BOOT).await;
    assert_eq!(again.json()["run_id"], json!(run), "{}", again.body);
    let sent = app
        .send("POST", "/v1/traces", &gamma, export("gamma", 7, now))
        .await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let events = json!({"events": [
        {"op": "open", "trace_id": "a1", "span_id": "s1", "name": "serve request", "kind": "agent", "ts": now},
        {"op": "close", "trace_id": "a1", "span_id": "s1", "status": "ok", "ts": now + 5},
    ]});
    let wrote = app
        .send(
            "POST",
            &format!("/api/runs/{run}/traces/events"),
            &gamma,
            events,
        )
        .await;
    assert_eq!(wrote.status, StatusCode::OK, "{}", wrote.body);
    let mut seen = traces_seen(&app, &run, &gamma).await;
    seen.sort();
    assert_eq!(seen, [format!("{:032x}", 7), "a1".to_string()]);
    assert!(traces_seen(&app, &squatted, &beta).await.is_empty());

    // Another project's run of the day is not gamma's to ask for; a read key may
    // not ask at all; a project that breaks the rules is named.
    let other = ask_daily(&app, "beta", &gamma).await;
    assert_eq!(other.status, StatusCode::FORBIDDEN, "{}", other.body);
    let read = ask_daily(&app, "gamma", &gamma_reads).await;
    assert_eq!(read.status, StatusCode::FORBIDDEN, "{}", read.body);
    let bad = ask_daily(&app, "bad%0Aname", BOOT).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(bad.body.contains("project"), "{}", bad.body);
}

/// An OTLP export into the named run `run`, with `key`.
fn named_export(run: &str, project: &str, trace: u32) -> Value {
    let mut body = export(project, 9, now_us());
    body["resourceSpans"][0]["resource"]["attributes"] = json!([
        {"key": "treeline.project", "value": {"stringValue": project}},
        {"key": "treeline.run_id", "value": {"stringValue": run}}
    ]);
    body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] =
        json!(format!("{trace:032x}"));
    body
}

const TRIALS: u32 = 300;

async fn racing_requests_cross_no_projects(t: common::TestStore) {
    let app = Arc::new(team(t, &[BOOT]));
    let (_, alpha) = app.key("write", Some("alpha")).await;
    let (_, beta) = app.key("write", Some("beta")).await;
    let (mut crossed, mut named, mut beta_won) = (0, 0, 0);
    for trial in 0..TRIALS {
        let run = format!("race-{trial}");
        // alpha's OTLP batch into the run, beside beta's PUT of the same id.
        let spans = {
            let (app, key, run) = (app.clone(), alpha.clone(), run.clone());
            tokio::spawn(async move {
                app.send(
                    "POST",
                    "/v1/traces",
                    &key,
                    named_export(&run, "alpha", trial),
                )
                .await
            })
        };
        let put = {
            let (app, key, run) = (app.clone(), beta.clone(), run.clone());
            tokio::spawn(async move {
                app.send(
                    "PUT",
                    &format!("/api/runs/{run}"),
                    &key,
                    json!({"project": "beta"}),
                )
                .await
            })
        };
        let (spans, put) = (spans.await.expect("otlp"), put.await.expect("put"));
        assert!(
            matches!(spans.status, StatusCode::OK | StatusCode::NOT_FOUND),
            "{}",
            spans.body
        );
        assert!(
            matches!(put.status, StatusCode::CREATED | StatusCode::CONFLICT),
            "{}",
            put.body
        );
        named += usize::from(put.body.contains("alpha"));
        if put.status == StatusCode::CREATED {
            beta_won += 1;
            crossed += traces_seen(&app, &run, &beta).await.len();
        }
    }
    assert_eq!(crossed, 0, "spans that crossed into beta's runs");
    assert_eq!(named, 0, "409s that named the other project");
    assert!(beta_won > 0, "the race was run both ways");
    // Two project keys racing to create one run: one wins, and the other's 409
    // does not say whose it is.
    for trial in 0..TRIALS / 3 {
        let run = format!("put-race-{trial}");
        let mut tasks = Vec::new();
        for (key, project) in [(alpha.clone(), "alpha"), (beta.clone(), "beta")] {
            let (app, run) = (app.clone(), run.clone());
            tasks.push(tokio::spawn(async move {
                let reply = app
                    .send(
                        "PUT",
                        &format!("/api/runs/{run}"),
                        &key,
                        json!({"project": project}),
                    )
                    .await;
                (project, reply)
            }));
        }
        let mut created = 0;
        for task in tasks {
            let (project, reply) = task.await.expect("put");
            created += usize::from(reply.status == StatusCode::CREATED);
            if reply.status == StatusCode::CONFLICT {
                let other = if project == "alpha" { "beta" } else { "alpha" };
                assert!(!reply.body.contains(other), "{}", reply.body);
            }
        }
        assert_eq!(created, 1, "{run}");
    }
}

on_both!(tokio::test(flavor = "multi_thread", worker_threads = 2), |t| t;
    a_squatted_daily_run_captures_no_spans,
    a_project_tracer_gets_the_run_otlp_uses_and_no_other_projects,
    racing_requests_cross_no_projects,
);

/// The whole application with auth on, whose site holds the files of `public/`: in
/// a directory, or sealed into the binary.
async fn team_with_site(sealed: bool) -> (Team, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("site root");
    std::fs::write(dir.path().join("favicon.svg"), "<svg/>").expect("favicon");
    let site = if sealed {
        let mut files = treeline_server::site::sealed::Files::new();
        files.insert("favicon.svg".into(), b"<svg/>".to_vec());
        files.insert("pkg/treeline.js".into(), b"plain".to_vec());
        files.insert("pkg/treeline.js.br".into(), b"brotli".to_vec());
        files.insert("pkg/treeline.build".into(), b"b1\n".to_vec());
        Site::Sealed(Arc::new(Files::new(files, std::time::SystemTime::now())))
    } else {
        Site::Dir(dir.path().to_path_buf())
    };
    let t = common::sqlite().await;
    let mut state = AppState::new(t.store.clone());
    state.api_keys = Arc::new(vec![BOOT.to_string()]);
    let addr = crate::team::HOST.parse().expect("address");
    let app = treeline_server::serve::app(state, &site, addr);
    (Team { app, t }, dir)
}

#[tokio::test]
async fn every_page_path_needs_sign_in_but_the_sites_files_stay_open() {
    for sealed in [false, true] {
        let (app, _site) = team_with_site(sealed).await;
        for path in ["/runs/r1/", "/traces/", "/no/such/page", "/runs/r1/extra"] {
            let reply = app.call("GET", path, &[], Body::empty()).await;
            assert_eq!(reply.status, StatusCode::SEE_OTHER, "{path}");
            assert!(reply.location().starts_with("/login?next="), "{path}");
            assert!(!reply.body.contains("Not Found"), "{path}");
        }
        let icon = app.call("GET", "/favicon.svg", &[], Body::empty()).await;
        assert_eq!(icon.status, StatusCode::OK, "sealed: {sealed}");
        assert_eq!(icon.body, "<svg/>");
        // Signed in, an unknown path is the app's own 404 page.
        let cookie = cookie_of(&app.sign_in(BOOT, "/").await);
        let unknown = app
            .call(
                "GET",
                "/no/such/page",
                &[("cookie", &cookie)],
                Body::empty(),
            )
            .await;
        assert_eq!(unknown.status, StatusCode::NOT_FOUND, "sealed: {sealed}");
    }
}

/// A sealed bundle goes out as a directory's did: its brotli copy to a browser that
/// takes it, its build named, and nothing outside it reachable.
#[tokio::test]
async fn a_sealed_bundle_is_served_from_memory() {
    let (app, _site) = team_with_site(true).await;
    let br = [("accept-encoding", "gzip, br")];
    let js = app
        .call("GET", "/pkg/treeline.js", &br, Body::empty())
        .await;
    assert_eq!(js.status, StatusCode::OK);
    assert_eq!(js.body, "brotli");
    assert_eq!(js.headers["content-encoding"], "br");
    assert_eq!(js.headers["x-treeline-build"], "b1");
    assert_eq!(js.headers["vary"], "accept-encoding");
    let plain = app
        .call("GET", "/pkg/treeline.js", &[], Body::empty())
        .await;
    assert_eq!(plain.body, "plain");
    let tag = plain.headers["etag"].to_str().expect("etag").to_string();
    let again = app
        .call(
            "GET",
            "/pkg/treeline.js",
            &[("if-none-match", &tag)],
            Body::empty(),
        )
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    for path in [
        "/pkg/../favicon.svg",
        "/pkg/missing.js",
        "/pkg/%2e%2e/Cargo.toml",
    ] {
        let reply = app.call("GET", path, &[], Body::empty()).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
    }
}

#[tokio::test]
async fn failed_sign_ins_are_throttled_and_the_wait_passes() {
    let app = team(common::sqlite().await, &[BOOT]);
    let free = treeline_server::http::throttle::FREE_FAILURES;
    for attempt in 0..=free {
        let wrong = app.sign_in("not-the-key", "/").await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "attempt {attempt}");
    }
    // Now even the right key waits, and is told for how long.
    let held = app.sign_in(BOOT, "/").await;
    assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS, "{}", held.body);
    assert_eq!(held.headers["retry-after"], "1");
    assert!(held.body.contains("Try again in 1 s"), "{}", held.body);
    assert!(held.headers.get("set-cookie").is_none());
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let signed = app.sign_in(BOOT, "/").await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
    // The success cleared the count: the next failure is a plain 401 again.
    let wrong = app.sign_in("not-the-key", "/").await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_secure_session_cookie_is_a_host_cookie_and_only_it_is_read() {
    let app = team(common::sqlite().await, &[BOOT]);
    let https = ("x-forwarded-proto", "https");
    let signed = app
        .sign_in_with(BOOT, "/", &[("origin", "https://127.0.0.1:3000"), https])
        .await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
    let set = signed.headers["set-cookie"].to_str().unwrap_or_default();
    assert!(set.starts_with("__Host-treeline_session="), "{set}");
    assert!(
        set.contains("; Path=/;") && set.ends_with("; Secure"),
        "{set}"
    );
    let cookie = cookie_of(&signed);
    let page = app
        .call("GET", "/", &[("cookie", &cookie), https], Body::empty())
        .await;
    assert_eq!(page.status, StatusCode::OK);
    // Under the plain name, or over plain http, the token is no session.
    let token = cookie.split_once('=').map(|(_, v)| v).unwrap_or_default();
    let plain = format!("treeline_session={token}");
    for (cookie, headers) in [(&plain, vec![https]), (&cookie, vec![])] {
        let mut all = vec![("cookie", cookie.as_str())];
        all.extend(headers);
        let page = app.call("GET", "/", &all, Body::empty()).await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{cookie}");
    }
    // Signing out clears both names.
    let out = app
        .call(
            "POST",
            "/logout",
            &[
                ("cookie", &cookie),
                ("origin", "https://127.0.0.1:3000"),
                https,
            ],
            Body::empty(),
        )
        .await;
    let cleared: Vec<&str> = out
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(cleared.len(), 2, "{cleared:?}");
    assert!(
        cleared.iter().all(|c| c.contains("Max-Age=0")),
        "{cleared:?}"
    );
    assert!(cleared
        .iter()
        .any(|c| c.starts_with("__Host-treeline_session=;")));
    assert!(cleared.iter().any(|c| c.starts_with("treeline_session=;")));
}

#[test]
fn serve_refuses_a_short_key_and_says_how_to_make_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_treeline"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("TREELINE_API_KEYS", "short-key")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run treeline");
    // A server that took the key would serve on: stopped after a while, it fails here.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("its output");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("at least 20 characters") && said.contains("openssl rand"),
        "{said}"
    );
    assert!(!said.contains("short-key"), "the key is not echoed: {said}");
}
