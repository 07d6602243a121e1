//! The HTTP contract through the real router, on a real SQLite file and on
//! PostgreSQL: every case runs on both.

use crate::common;
use crate::common::{on_both, TestStore};

use std::io::Write;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;
use treeline_server::http::{router, AppState};

struct Api {
    router: Router,
    _store: common::TestStore,
}

async fn api(t: TestStore) -> Api {
    api_with_keys(t, vec![]).await
}

/// A server with run r1 and one span, `root` of trace t1.
async fn api_with_root(t: TestStore) -> Api {
    let api = api(t).await.with_run().await;
    api.send(
        "POST",
        "/runs/r1/traces/events",
        json!({"events": [event("open", "t1", "root")]}),
    )
    .await;
    api
}

async fn api_with_keys(store: TestStore, keys: Vec<String>) -> Api {
    let mut state = AppState::new(store.store.clone());
    state.api_keys = Arc::new(keys);
    Api {
        router: router(state),
        _store: store,
    }
}

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Value,
}

impl Api {
    async fn call(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("{status}: not JSON: {}", String::from_utf8_lossy(&bytes)));
        Reply {
            status,
            headers,
            body,
        }
    }

    async fn send(&self, method: &str, path: &str, body: Value) -> Reply {
        self.call(json_request(method, path, body, &[])).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.call(Request::get(path).body(Body::empty()).unwrap())
            .await
    }

    async fn with_run(self) -> Self {
        let reply = self
            .send(
                "PUT",
                "/runs/r1",
                json!({"project": "cartpole", "name": "ppo"}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED);
        self
    }
}

fn json_request(method: &str, path: &str, body: Value, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    builder.body(Body::from(body.to_string())).unwrap()
}

fn assert_error(reply: &Reply, status: StatusCode, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], code, "{}", reply.body);
    assert!(reply.body["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
}

fn event(op: &str, trace: &str, span: &str) -> Value {
    match op {
        "open" => {
            json!({"op": "open", "trace_id": trace, "span_id": span, "name": "root", "kind": "rollout", "ts": 1})
        }
        _ => json!({"op": "close", "trace_id": trace, "span_id": span, "status": "ok", "ts": 2}),
    }
}

async fn runs_are_created_then_updated_and_keep_their_project(t: TestStore) {
    let api = api(t).await.with_run().await;
    let again = api
        .send(
            "PUT",
            "/runs/r1",
            json!({"project": "cartpole", "name": "renamed"}),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["name"], "renamed");
    let conflict = api
        .send("PUT", "/runs/r1", json!({"project": "other"}))
        .await;
    assert_error(&conflict, StatusCode::CONFLICT, "run_project_conflict");
    let bad = api
        .send("PUT", "/runs/has%20space", json!({"project": "p"}))
        .await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "invalid_id");
    assert!(bad.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("run_id"));
    let missing = api.send("PUT", "/runs/r2", json!({"name": "x"})).await;
    assert_error(&missing, StatusCode::BAD_REQUEST, "invalid_body");
    assert!(missing.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("project"));
}

async fn an_invalid_event_is_rejected_alone(t: TestStore) {
    let api = api(t).await.with_run().await;
    let mut bad = event("open", "t1", "b");
    bad["kind"] = json!("llm");
    let reply = api
        .send(
            "POST",
            "/runs/r1/traces/events",
            json!({"events": [event("open", "t1", "a"), bad, event("close", "t1", "a")]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body["accepted"], 2);
    assert_eq!(reply.body["rejected"][0]["index"], 1);
    assert_eq!(reply.body["rejected"][0]["code"], "invalid_kind");
    assert!(reply.body["rejected"][0]["message"]
        .as_str()
        .unwrap()
        .contains("rollout, env_step"));
    let trace = api.get("/runs/r1/traces/t1").await;
    assert_eq!(trace.body["status"], "ok");
}

async fn an_idempotency_key_replays_the_first_answer_and_stores_nothing_twice(t: TestStore) {
    let api = api(t).await.with_run().await;
    let body = json!({"events": [event("open", "t1", "a"), event("close", "t1", "a")]});
    let key = [("idempotency-key", "batch-1")];
    let first = api
        .call(json_request(
            "POST",
            "/runs/r1/traces/events",
            body.clone(),
            &key,
        ))
        .await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let replay = api
        .call(json_request(
            "POST",
            "/runs/r1/traces/events",
            body.clone(),
            &key,
        ))
        .await;
    assert_eq!(replay.status, StatusCode::OK);
    assert_eq!(replay.headers.get("idempotent-replayed").unwrap(), "true");
    assert_eq!(replay.body, first.body);
    assert_eq!(api.get("/runs/r1").await.body["trace_count"], 1);
    let spans = api.get("/runs/r1/traces/t1").await;
    assert_eq!(spans.body["span_count"], 1);
    let other = json!({"events": [event("open", "t2", "a")]});
    let reused = api
        .call(json_request("POST", "/runs/r1/traces/events", other, &key))
        .await;
    assert_error(
        &reused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
    );
}

async fn gzip_and_zstd_bodies_are_accepted(t: TestStore) {
    let api = api(t).await.with_run().await;
    let body = json!({"events": [event("open", "t1", "a")]}).to_string();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(body.as_bytes()).unwrap();
    for (encoding, bytes) in [
        ("gzip", gz.finish().unwrap()),
        ("zstd", zstd::encode_all(body.as_bytes(), 3).unwrap()),
    ] {
        let request = Request::post("/runs/r1/traces/events")
            .header("content-type", "application/json")
            .header("content-encoding", encoding)
            .body(Body::from(bytes))
            .unwrap();
        let reply = api.call(request).await;
        assert_eq!(reply.status, StatusCode::OK, "{encoding}: {}", reply.body);
    }
    assert_eq!(api.get("/runs/r1/traces/t1").await.body["span_count"], 1);
}

async fn oversized_requests_are_413(t: TestStore) {
    let api = api(t).await.with_run().await;
    let many: Vec<Value> = (0..10_001)
        .map(|i| event("open", "t", &format!("s{i}")))
        .collect();
    let reply = api
        .send("POST", "/runs/r1/traces/events", json!({"events": many}))
        .await;
    assert_error(&reply, StatusCode::PAYLOAD_TOO_LARGE, "too_many_items");
    let huge = "x".repeat(33 * 1024 * 1024);
    let reply = api
        .call(
            Request::post("/runs/r1/traces/events")
                .header("content-type", "application/json")
                .body(Body::from(huge))
                .unwrap(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(api.get("/runs/r1").await.body["trace_count"], 0);
}

async fn an_unknown_run_is_404_and_bad_json_is_400(t: TestStore) {
    let api = api(t).await;
    let reply = api
        .send(
            "POST",
            "/runs/nope/traces/events",
            json!({"events": [event("open", "t", "s")]}),
        )
        .await;
    assert_error(&reply, StatusCode::NOT_FOUND, "run_not_found");
    let request = Request::post("/runs/nope/metrics")
        .header("content-type", "application/json; charset=utf-8")
        .body(Body::from("{not json"))
        .unwrap();
    assert_error(
        &api.call(request).await,
        StatusCode::BAD_REQUEST,
        "invalid_json",
    );
    assert_error(
        &api.get("/runs/nope").await,
        StatusCode::NOT_FOUND,
        "run_not_found",
    );
    assert_error(
        &api.get("/nowhere").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let wrong_method = api
        .call(Request::patch("/runs/nope").body(Body::empty()).unwrap())
        .await;
    assert_error(
        &wrong_method,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
}

async fn metric_points_are_checked_one_by_one(t: TestStore) {
    let api = api(t).await.with_run().await;
    let points = json!({"points": [
        {"key": "train/loss", "step": 1, "value": 0.5},
        {"key": "train/loss", "step": -2, "value": 0.5},
        {"key": "train/loss", "step": 2, "value": null},
        {"key": "train/loss", "step": 3, "value": 0.25},
    ]});
    let reply = api.send("POST", "/runs/r1/metrics", points).await;
    assert_eq!(reply.body["accepted"], 2);
    assert_eq!(reply.body["rejected"][0]["code"], "invalid_step");
    assert_eq!(reply.body["rejected"][1]["code"], "invalid_value");
    let series = api.get("/runs/r1/metrics?key=train%2Floss").await;
    assert_eq!(series.body["points"], json!([[1, 0.5], [3, 0.25]]));
    assert_error(
        &api.get("/runs/r1/metrics").await,
        StatusCode::BAD_REQUEST,
        "missing_parameter",
    );
}

async fn with_api_keys_reads_and_writes_need_a_bearer_token(t: TestStore) {
    let api = api_with_keys(t, vec!["secret-key".into()]).await;
    let body = json!({"project": "p"});
    assert_error(
        &api.send("PUT", "/runs/r1", body.clone()).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let wrong = json_request(
        "PUT",
        "/runs/r1",
        body.clone(),
        &[("authorization", "Bearer nope")],
    );
    assert_error(
        &api.call(wrong).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let right = json_request(
        "PUT",
        "/runs/r1",
        body.clone(),
        &[("authorization", "Bearer secret-key")],
    );
    assert_eq!(api.call(right).await.status, StatusCode::CREATED);
    // The scheme's case does not matter.
    let lower = json_request(
        "PUT",
        "/runs/r1",
        body,
        &[("authorization", "bearer secret-key")],
    );
    assert_eq!(api.call(lower).await.status, StatusCode::OK);
    // Reads need the key as well.
    assert_error(
        &api.get("/runs/r1").await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let read = Request::get("/runs/r1")
        .header("authorization", "Bearer secret-key")
        .body(Body::empty())
        .unwrap();
    assert_eq!(api.call(read).await.status, StatusCode::OK);
}

/// What a page of another site can send without a preflight: a form or a
/// `text/plain` fetch. Neither may write.
async fn a_cross_site_form_post_is_refused_and_writes_nothing(t: TestStore) {
    let api = api(t).await.with_run().await;
    let events = json!({"events": [event("open", "t1", "a")]}).to_string();
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        for path in [
            "/runs/r1/traces/events",
            "/runs/r1/metrics",
            "/runs/r1/finish",
        ] {
            let request = Request::post(path)
                .header("content-type", content_type)
                .body(Body::from(events.clone()))
                .unwrap();
            assert_error(
                &api.call(request).await,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
            );
        }
    }
    let run = api.get("/runs/r1").await.body;
    assert_eq!(run["trace_count"], 0);
    assert_eq!(run["status"], "running");
}

async fn reads_use_the_404_codes_of_the_contract(t: TestStore) {
    let api = api_with_root(t).await;
    assert_error(
        &api.get("/runs/r1/traces/t2").await,
        StatusCode::NOT_FOUND,
        "trace_not_found",
    );
    assert_error(
        &api.get("/runs/r1/traces/t1/spans/nope").await,
        StatusCode::NOT_FOUND,
        "span_not_found",
    );
    let missing_parent = api
        .get("/runs/r1/traces/t1/spans?parent_span_id=nope")
        .await;
    assert_error(&missing_parent, StatusCode::NOT_FOUND, "span_not_found");
    assert_error(
        &api.get("/runs/r2/traces/t1").await,
        StatusCode::NOT_FOUND,
        "run_not_found",
    );
    let roots = api.get("/runs/r1/traces/t1/spans").await;
    assert_eq!(roots.body["spans"][0]["span_id"], "root");
    assert!(roots.body["from"].is_null());
    let around = api.get("/runs/r1/traces/t1/spans?around=root").await;
    assert_eq!(around.body["from"], 0);
    assert_eq!(around.body["spans"][0]["span_id"], "root");
    let not_listed = api
        .get("/runs/r1/traces/t1/spans?parent_span_id=root&around=root")
        .await;
    assert_error(&not_listed, StatusCode::NOT_FOUND, "span_not_found");
}

async fn a_span_page_names_the_parameter_it_cannot_use(t: TestStore) {
    let api = api_with_root(t).await;
    let long = format!("name={}", "x".repeat(201));
    let cases = [
        ("from=-1", "invalid_parameter", "from"),
        ("from=ten", "invalid_parameter", "from"),
        ("from=3&around=root", "invalid_parameter", "give one"),
        ("around=not%20an%20id", "invalid_id", "around"),
        (long.as_str(), "invalid_parameter", "name"),
    ];
    for (query, code, names) in cases {
        let reply = api.get(&format!("/runs/r1/traces/t1/spans?{query}")).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, code);
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(names),
            "{query}: {}",
            reply.body
        );
    }
    let named = api.get("/runs/r1/traces/t1/spans?name=ROO&from=0").await;
    assert_eq!(named.body["spans"][0]["span_id"], "root");
    assert_eq!(named.body["from"], 0);
}

async fn trace_lists_report_their_window_and_limit_search_terms(t: TestStore) {
    let api = api_with_root(t).await;
    let project = api.get("/traces?project=cartpole").await;
    assert_eq!(project.body["traces"].as_array().unwrap().len(), 1);
    assert!(project.body["window"]["since_us"].is_i64());
    let run = api.get("/runs/r1/traces").await;
    assert!(run.body["window"].is_null());
    let nine = api.get("/traces?q=a+b+c+d+e+f+g+h+i").await;
    assert_error(&nine, StatusCode::BAD_REQUEST, "too_many_terms");
    let eight = api.get("/traces?q=a+b+c+d+e+f+g+h").await;
    assert_eq!(eight.status, StatusCode::OK);
    assert_error(
        &api.get("/traces?kind=llm").await,
        StatusCode::BAD_REQUEST,
        "invalid_kind",
    );
    assert_error(
        &api.get("/traces?limit=0").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    assert_error(
        &api.get("/traces?cursor=garbage").await,
        StatusCode::BAD_REQUEST,
        "invalid_cursor",
    );
    // A run's list: a bad parameter is named for a run that is there, and an absent
    // run is said to be absent whatever the parameters.
    for (path, status, code) in [
        (
            "/runs/r1/traces?limit=0",
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "/runs/r1/traces?kind=llm",
            StatusCode::BAD_REQUEST,
            "invalid_kind",
        ),
        (
            "/runs/nope/traces?limit=0",
            StatusCode::NOT_FOUND,
            "run_not_found",
        ),
        ("/runs/nope/traces", StatusCode::NOT_FOUND, "run_not_found"),
    ] {
        assert_error(&api.get(path).await, status, code);
    }
    let mut opened = event("open", "t2", "root");
    opened["input"] = json!({"prompt": "the tool printed a Traceback"});
    api.send(
        "POST",
        "/runs/r1/traces/events",
        json!({"events": [opened]}),
    )
    .await;
    let found = api.get("/runs/r1/traces?text=%22a+traceback%22").await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    assert_eq!(found.body["traces"].as_array().map(Vec::len), Some(1));
    let hit = &found.body["traces"][0]["text_match"];
    assert_eq!(
        (hit["span_id"].as_str(), hit["field"].as_str()),
        (Some("root"), Some("input"))
    );
    assert_eq!(
        hit["snippet"][1],
        json!({"text": "a Traceback", "hit": true})
    );
    for bad in ["%22%22", "!!!", &"w+".repeat(17)] {
        let reply = api.get(&format!("/runs/r1/traces?text={bad}")).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, "invalid_text");
        assert!(reply.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("text ")));
    }
}

async fn trace_filters_are_checked_and_applied_and_attribute_keys_listed(t: TestStore) {
    let api = api(t).await;
    api.send("PUT", "/runs/r1", json!({"project": "p"})).await;
    let events = json!({"events": [
        {"op": "open", "trace_id": "a", "span_id": "root", "name": "a", "kind": "rollout", "ts": 1,
         "attributes": {"reward": 0.2}},
        {"op": "open", "trace_id": "b", "span_id": "root", "name": "b", "kind": "rollout", "ts": 2,
         "attributes": {"reward": 0.9}},
    ]});
    let sent = api.send("POST", "/runs/r1/traces/events", events).await;
    assert_eq!(sent.body["rejected"], json!([]), "{}", sent.body);
    let low = api
        .get("/runs/r1/traces?filter=attr.reward%20%3C%200.5")
        .await;
    assert_eq!(low.status, StatusCode::OK);
    let ids: Vec<&str> = low.body["traces"]
        .as_array()
        .expect("traces")
        .iter()
        .filter_map(|t| t["trace_id"].as_str())
        .collect();
    assert_eq!(ids, ["a"]);
    let bad = api.get("/traces?run_id=r1&filter=reward%20%3E%201").await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "bad_filter");
    let message = bad.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"reward > 1\"") && message.contains("attr.NAME"),
        "{message}"
    );
    let nine = "&filter=step%20%3E%200".repeat(9);
    assert_error(
        &api.get(&format!("/runs/r1/traces?{nine}")).await,
        StatusCode::BAD_REQUEST,
        "bad_filter",
    );
    let keys = api.get("/runs/r1/traces/attributes").await;
    assert_eq!(keys.status, StatusCode::OK);
    assert_eq!(keys.body["attributes"][0]["key"], "reward");
    assert_eq!(keys.body["attributes"][0]["min"], 0.2);
    assert_error(
        &api.get("/runs/nope/traces/attributes").await,
        StatusCode::NOT_FOUND,
        "run_not_found",
    );
    let runs = api.get("/runs?q=R1").await;
    assert_eq!(runs.body["runs"].as_array().map(Vec::len), Some(1));
    let none = api.get("/runs?q=zzz").await;
    assert_eq!(none.body["runs"].as_array().map(Vec::len), Some(0));
}

async fn past_the_writes_in_flight_a_write_is_shed_with_retry_after_and_stores_nothing(
    store: TestStore,
) {
    let mut state = AppState::new(store.store.clone());
    // No free slot: as if every one were taken by a write in flight.
    state.write_slots = Arc::new(tokio::sync::Semaphore::new(0));
    let api = Api {
        router: router(state),
        _store: store,
    };
    let shed = api.send("PUT", "/runs/r1", json!({"project": "p"})).await;
    assert_error(&shed, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    assert_eq!(shed.headers["retry-after"], "1");
    // Reads are not writes: they still answer, and nothing was stored.
    assert_error(
        &api.get("/runs/r1").await,
        StatusCode::NOT_FOUND,
        "run_not_found",
    );
}

async fn a_body_that_stops_arriving_is_a_timeout_not_too_large(t: TestStore) {
    let api = api(t).await;
    api.send("PUT", "/runs/r1", json!({"project": "p"})).await;
    let broken = futures::stream::iter([
        Ok(bytes::Bytes::from_static(b"{\"events\": [")),
        Err(std::io::Error::other("the client went away")),
    ]);
    let request = Request::post("/runs/r1/traces/events")
        .header("content-type", "application/json")
        .body(Body::from_stream(broken))
        .unwrap();
    assert_error(
        &api.call(request).await,
        StatusCode::REQUEST_TIMEOUT,
        "request_timeout",
    );
}

on_both!(tokio::test, |t| t;
    runs_are_created_then_updated_and_keep_their_project,
    an_invalid_event_is_rejected_alone,
    an_idempotency_key_replays_the_first_answer_and_stores_nothing_twice,
    gzip_and_zstd_bodies_are_accepted,
    oversized_requests_are_413,
    an_unknown_run_is_404_and_bad_json_is_400,
    metric_points_are_checked_one_by_one,
    with_api_keys_reads_and_writes_need_a_bearer_token,
    a_cross_site_form_post_is_refused_and_writes_nothing,
    reads_use_the_404_codes_of_the_contract,
    a_span_page_names_the_parameter_it_cannot_use,
    trace_lists_report_their_window_and_limit_search_terms,
    trace_filters_are_checked_and_applied_and_attribute_keys_listed,
    past_the_writes_in_flight_a_write_is_shed_with_retry_after_and_stores_nothing,
    a_body_that_stops_arriving_is_a_timeout_not_too_large,
);
