//! OTLP/HTTP ingest through the real routers (`/v1/traces` and the `/api` reads), on a
//! real SQLite file: protobuf, JSON, gzip, partial success, retries, auth.

use crate::common;

use std::io::Write;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::Event;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as OtelCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;
use serde_json::{json, Value};
use tower::ServiceExt;
use treeline_server::http::AppState;

struct Server {
    router: Router,
    _store: common::TestStore,
}

async fn server(keys: Vec<String>) -> Server {
    let store = common::sqlite().await;
    let mut state = AppState::new(store.store.clone());
    state.api_keys = Arc::new(keys);
    Server {
        router: Router::new()
            .merge(treeline_server::otlp::router(state.clone()))
            .nest("/api", treeline_server::http::router(state)),
        _store: store,
    }
}

struct Reply {
    status: StatusCode,
    content_type: String,
    bytes: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or_else(|_| {
            panic!(
                "{}: not JSON: {}",
                self.status,
                String::from_utf8_lossy(&self.bytes)
            )
        })
    }

    fn protobuf(&self) -> ExportTraceServiceResponse {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&self.bytes)
        );
        assert_eq!(self.content_type, "application/x-protobuf");
        ExportTraceServiceResponse::decode(&self.bytes[..]).expect("an OTLP response")
    }
}

impl Server {
    async fn call(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            content_type,
            bytes: bytes.to_vec(),
        }
    }

    async fn export(&self, content_type: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> Reply {
        let mut builder = Request::post("/v1/traces").header("content-type", content_type);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        self.call(builder.body(Body::from(body)).unwrap()).await
    }

    async fn protobuf(&self, request: &ExportTraceServiceRequest) -> ExportTraceServiceResponse {
        self.export("application/x-protobuf", request.encode_to_vec(), &[])
            .await
            .protobuf()
    }

    async fn get(&self, path: &str) -> Value {
        // The servers with keys in these tests all have the key `secret`.
        let reply = self
            .call(
                Request::get(path)
                    .header("authorization", "Bearer secret")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.json());
        reply.json()
    }
}

fn kv(key: &str, value: Any) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn s(key: &str, value: &str) -> KeyValue {
    kv(key, Any::StringValue(value.into()))
}

fn i(key: &str, value: i64) -> KeyValue {
    kv(key, Any::IntValue(value))
}

const T0: u64 = 1_764_420_000_000_000_000;

fn span(trace: u8, id: u8, parent: Option<u8>, name: &str, attributes: Vec<KeyValue>) -> Span {
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: T0 + u64::from(id) * 1_000_000,
        end_time_unix_nano: T0 + u64::from(id) * 1_000_000 + 500_000,
        attributes,
        ..Default::default()
    }
}

fn request(resource: Vec<KeyValue>, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: resource,
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// An OpenInference agent: an AGENT root, an LLM call with flattened messages, and
/// a TOOL call that failed.
fn openinference_trace() -> Vec<Span> {
    let mut tool = span(
        0xaa,
        3,
        Some(1),
        "search",
        vec![
            s("openinference.span.kind", "TOOL"),
            s("input.value", "{\"q\": \"paris\"}"),
            s("input.mime_type", "application/json"),
        ],
    );
    tool.status = Some(Status {
        message: "timed out".into(),
        code: OtelCode::Error as i32,
    });
    tool.events.push(Event {
        name: "exception".into(),
        attributes: vec![
            s("exception.type", "TimeoutError"),
            s("exception.message", "search timed out"),
        ],
        ..Default::default()
    });
    vec![
        span(
            0xaa,
            1,
            None,
            "agent",
            vec![
                s("openinference.span.kind", "AGENT"),
                s("input.value", "weather in paris?"),
                i("treeline.step", 7),
            ],
        ),
        span(
            0xaa,
            2,
            Some(1),
            "ChatCompletion",
            vec![
                s("openinference.span.kind", "LLM"),
                s("llm.input_messages.0.message.role", "user"),
                s("llm.input_messages.0.message.content", "weather in paris?"),
                s("llm.output_messages.0.message.role", "assistant"),
                s(
                    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
                    "search",
                ),
                s(
                    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
                    "{\"q\": \"paris\"}",
                ),
                i("llm.token_count.total", 42),
                s("llm.model_name", "gpt-test"),
            ],
        ),
        tool,
    ]
}

#[tokio::test]
async fn an_openinference_trace_over_protobuf_reads_back_as_native_spans() {
    let api = server(vec![]).await;
    // Exporters send spans as they end: children before their parent.
    let mut spans = openinference_trace();
    spans.reverse();
    let reply = api
        .protobuf(&request(
            vec![
                s("service.name", "agent-app"),
                s("treeline.project", "agents"),
                s("treeline.run_id", "oi-run"),
            ],
            spans,
        ))
        .await;
    assert_eq!(reply.partial_success, None);

    let run = api.get("/api/runs/oi-run").await;
    assert_eq!(run["project"], "agents");
    assert_eq!(run["trace_count"], 1);
    let trace_id = "aa".repeat(16);
    let trace = api
        .get(&format!("/api/runs/oi-run/traces/{trace_id}"))
        .await;
    assert_eq!(trace["span_count"], 3);
    assert_eq!(trace["error_count"], 1);
    assert_eq!(trace["status"], "ok");
    assert_eq!(trace["kind"], "agent");
    assert_eq!(trace["token_count"], 42);
    assert_eq!(trace["step"], 7);

    let base = format!("/api/runs/oi-run/traces/{trace_id}/spans");
    let roots = api.get(&base).await;
    assert_eq!(roots["spans"][0]["span_id"], "0101010101010101");
    assert_eq!(roots["spans"][0]["child_count"], 2);
    let children = api
        .get(&format!("{base}?parent_span_id=0101010101010101"))
        .await;
    let kinds: Vec<&str> = children["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["model", "tool"]);

    let llm = api.get(&format!("{base}/0202020202020202")).await;
    assert_eq!(llm["parent_span_id"], "0101010101010101");
    assert_eq!(llm["token_count"], 42);
    assert_eq!(llm["step"], 7, "children inherit the root's step");
    assert_eq!(
        llm["input"],
        json!([{"role": "user", "content": "weather in paris?"}])
    );
    assert_eq!(llm["output"][0]["role"], "assistant");
    assert_eq!(
        llm["output"][0]["tool_calls"][0]["function"],
        json!({"name": "search", "arguments": "{\"q\": \"paris\"}"})
    );
    assert_eq!(llm["attributes"]["llm.model_name"], "gpt-test");
    assert!(llm["attributes"]
        .as_object()
        .unwrap()
        .keys()
        .all(|k| !k.starts_with("llm.input_messages")));
    assert_eq!(
        llm["start_us"],
        (T0 / 1_000 + 2_000) as i64,
        "start kept in microseconds"
    );
    assert_eq!(llm["end_us"], (T0 / 1_000 + 2_500) as i64);

    let tool = api.get(&format!("{base}/0303030303030303")).await;
    assert_eq!(tool["status"], "error");
    assert_eq!(
        tool["error"],
        json!({"type": "TimeoutError", "message": "search timed out"})
    );
    assert_eq!(tool["input"], json!({"q": "paris"}));
}

#[tokio::test]
async fn a_gen_ai_trace_over_gzip_json_goes_to_the_projects_daily_run() {
    let api = server(vec![]).await;
    let messages = json!([{"role": "user", "parts": [{"type": "text", "content": "hello"}]}]);
    let answer = json!([{"role": "assistant", "parts": [{"type": "text", "content": "hi!"}],
        "finish_reason": "stop"}]);
    let spans = vec![
        span(
            0xbb,
            1,
            None,
            "invoke_agent helper",
            vec![s("gen_ai.operation.name", "invoke_agent")],
        ),
        span(
            0xbb,
            2,
            Some(1),
            "chat model",
            vec![
                s("gen_ai.operation.name", "chat"),
                s("gen_ai.input.messages", &messages.to_string()),
                s("gen_ai.output.messages", &answer.to_string()),
                i("gen_ai.usage.input_tokens", 5),
                i("gen_ai.usage.output_tokens", 3),
            ],
        ),
        span(
            0xbb,
            3,
            Some(1),
            "execute_tool lookup",
            vec![s("gen_ai.operation.name", "execute_tool"), i("step", 2)],
        ),
    ];
    // OTLP/JSON as the crate's serde mapping writes it: hex ids, string integers.
    let body = serde_json::to_vec(&request(vec![s("service.name", "chatbot")], spans)).unwrap();
    assert!(String::from_utf8_lossy(&body).contains(&"bb".repeat(16)));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&body).unwrap();
    let reply = api
        .export(
            "application/json",
            gz.finish().unwrap(),
            &[("content-encoding", "gzip")],
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json(), json!({}));

    let runs = api.get("/api/runs?project=chatbot").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
    let run_id = runs["runs"][0]["run_id"].as_str().unwrap().to_string();
    assert_eq!(
        run_id, "chatbot-2025-11-29",
        "one run per project per UTC day"
    );
    let base = format!("/api/runs/{run_id}/traces/{}/spans", "bb".repeat(16));
    let root = api.get(&format!("{base}/0101010101010101")).await;
    assert_eq!(root["kind"], "agent");
    let chat = api.get(&format!("{base}/0202020202020202")).await;
    assert_eq!(chat["kind"], "model");
    assert_eq!(chat["token_count"], 8);
    assert_eq!(chat["input"], json!([{"role": "user", "content": "hello"}]));
    assert_eq!(
        chat["output"],
        json!([{"role": "assistant", "content": "hi!", "finish_reason": "stop"}])
    );
    let tool = api.get(&format!("{base}/0303030303030303")).await;
    assert_eq!(tool["kind"], "tool");
    assert_eq!(tool["step"], 2);

    // A second export the same day lands in the same run.
    let again = request(
        vec![s("service.name", "chatbot")],
        vec![span(0xbc, 1, None, "other", vec![])],
    );
    api.protobuf(&again).await;
    let run = api.get(&format!("/api/runs/{run_id}")).await;
    assert_eq!(run["trace_count"], 2);
    let other = api
        .get(&format!("/api/runs/{run_id}/traces/{}", "bc".repeat(16)))
        .await;
    assert_eq!(other["kind"], "custom");
}

#[tokio::test]
async fn invalid_spans_are_rejected_alone_and_counted_in_partial_success() {
    let api = server(vec![]).await;
    let mut no_id = span(0xcc, 2, Some(1), "no id", vec![]);
    no_id.span_id.clear();
    let mut self_parent = span(0xcc, 3, Some(3), "own parent", vec![]);
    self_parent.name = "own parent".into();
    let reply = api
        .protobuf(&request(
            vec![s("treeline.project", "p")],
            vec![span(0xcc, 1, None, "root", vec![]), no_id, self_parent],
        ))
        .await;
    let partial = reply.partial_success.expect("partial success");
    assert_eq!(partial.rejected_spans, 2);
    assert!(
        partial.error_message.contains("span_id"),
        "{}",
        partial.error_message
    );
    assert!(partial.error_message.contains("parent_span_id"));
    let runs = api.get("/api/runs?project=p").await;
    let run_id = runs["runs"][0]["run_id"].as_str().unwrap();
    let trace = api
        .get(&format!("/api/runs/{run_id}/traces/{}", "cc".repeat(16)))
        .await;
    assert_eq!(trace["span_count"], 1);

    // A bad treeline.run_id rejects its resource's spans, as JSON too.
    let body = serde_json::to_vec(&request(
        vec![s("treeline.run_id", "not a valid id")],
        vec![span(0xcd, 1, None, "root", vec![])],
    ))
    .unwrap();
    let reply = api.export("application/json", body, &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = reply.json();
    assert_eq!(body["partialSuccess"]["rejectedSpans"], 1);
    assert!(body["partialSuccess"]["errorMessage"]
        .as_str()
        .unwrap()
        .contains("treeline.run_id"));
}

#[tokio::test]
async fn a_retried_export_stores_nothing_twice() {
    let api = server(vec![]).await;
    let export = request(vec![s("treeline.project", "agents")], openinference_trace());
    let run = [("treeline-run-id", "header-run")];
    let first = api
        .export("application/x-protobuf", export.encode_to_vec(), &run)
        .await
        .protobuf();
    assert_eq!(first.partial_success, None);
    let retry = api
        .export("application/x-protobuf", export.encode_to_vec(), &run)
        .await
        .protobuf();
    let partial = retry.partial_success.expect("warnings about the repeats");
    assert_eq!(partial.rejected_spans, 0);
    let run = api.get("/api/runs/header-run").await;
    assert_eq!(run["project"], "agents");
    assert_eq!(run["trace_count"], 1);
    let trace = api
        .get(&format!("/api/runs/header-run/traces/{}", "aa".repeat(16)))
        .await;
    assert_eq!(trace["span_count"], 3);
    assert_eq!(trace["error_count"], 1);
    assert_eq!(trace["token_count"], 42);
}

#[tokio::test]
async fn malformed_bodies_and_wrong_types_use_the_json_error_shape() {
    let api = server(vec![]).await;
    let bad = api
        .export("application/x-protobuf", vec![0xff, 0xff, 0xff], &[])
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json()["error"]["code"], "invalid_protobuf");
    let bad = api
        .export("application/json", b"{\"resourceSpans\": 1}".to_vec(), &[])
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json()["error"]["code"], "invalid_json");
    let bad = api.export("text/plain", b"hi".to_vec(), &[]).await;
    assert_eq!(bad.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(bad.json()["error"]["code"], "unsupported_media_type");
    let bad = api
        .export(
            "application/x-protobuf",
            vec![],
            &[("treeline-run-id", "bad id")],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json()["error"]["code"], "invalid_id");
    let get = api
        .call(Request::get("/v1/traces").body(Body::empty()).unwrap())
        .await;
    assert_eq!(get.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(get.json()["error"]["code"], "method_not_allowed");
    let empty = api
        .export("application/x-protobuf", vec![], &[])
        .await
        .protobuf();
    assert_eq!(empty.partial_success, None);
}

#[tokio::test]
async fn with_api_keys_exports_need_the_write_key() {
    let api = server(vec!["secret".into()]).await;
    let body = request(vec![], vec![span(0xdd, 1, None, "root", vec![])]).encode_to_vec();
    let refused = api
        .export("application/x-protobuf", body.clone(), &[])
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert_eq!(refused.json()["error"]["code"], "unauthorized");
    let wrong = api
        .export(
            "application/x-protobuf",
            body.clone(),
            &[("authorization", "Bearer nope")],
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let ok = api
        .export(
            "application/x-protobuf",
            body,
            &[("authorization", "Bearer secret")],
        )
        .await
        .protobuf();
    assert_eq!(ok.partial_success, None);
    let runs = api.get("/api/runs?project=default").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_daily_run_is_finished_at_its_last_activity_once_its_day_is_over() {
    let api = server(vec![]).await;
    let now_us = treeline_server::http::now_us();
    let mut today = span(0xd1, 1, None, "today's work", vec![]);
    today.start_time_unix_nano = now_us as u64 * 1000;
    today.end_time_unix_nano = today.start_time_unix_nano + 1_000_000;
    let past = span(0xd0, 1, None, "a past day's work", vec![]);
    let body = request(vec![s("service.name", "daily")], vec![past, today]).encode_to_vec();
    let sent = api.export("application/x-protobuf", body, &[]).await;
    assert_eq!(sent.protobuf().partial_success, None);
    let before = api.get("/api/runs?project=daily").await;
    let runs = before["runs"].as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 2, "{before}");
    assert!(runs.iter().all(|r| r["status"] == "running"), "{before}");
    let store = api._store.store.as_ref();
    let finished = treeline_server::otlp::runs::finish_past_days(store, now_us)
        .await
        .expect("finish");
    assert_eq!(finished, 1);
    let after = api.get("/api/runs?project=daily").await;
    for run in after["runs"].as_array().cloned().unwrap_or_default() {
        let is_today = run["run_id"].as_str().is_some_and(|id| {
            id.ends_with(&treeline_server::otlp::runs::date(
                treeline_server::otlp::runs::day_of(now_us),
            ))
        });
        if is_today {
            assert_eq!(run["status"], "running", "{run}");
        } else {
            assert_eq!(run["status"], "finished", "{run}");
            let last_activity = runs
                .iter()
                .find(|r| r["run_id"] == run["run_id"])
                .map(|r| r["updated_us"].clone());
            assert_eq!(Some(run["end_us"].clone()), last_activity, "{run}");
        }
    }
    // Once is enough: a finished run is not finished again.
    let again = treeline_server::otlp::runs::finish_past_days(store, now_us).await;
    assert_eq!(again.ok(), Some(0));
}
