//! The fuzzer's requests: every route with its path filled by a real id or a strange
//! one, query strings drawn from every parameter the server knows, and bodies that
//! start valid and are then mutated, as JSON values and as bytes, under every
//! encoding and with odd headers.

use std::io::Write;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use serde_json::{json, Value};
use treeline_wire::routes::{self, encode};

use crate::bench::rng::Rng;

/// One generated request.
pub(crate) struct Request {
    pub(crate) method: reqwest::Method,
    /// The route template it was made from, for the report.
    pub(crate) route: String,
    pub(crate) target: String,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
}

/// Ids that exist on the server, so that some requests get past the lookups.
pub(crate) struct Known {
    pub(crate) run: String,
    pub(crate) trace: String,
    pub(crate) span: String,
}

/// Pages the dashboard serves, besides the API.
const PAGES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/runs/{run_id}"),
    ("GET", "/traces"),
    ("GET", "/compare"),
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
    ("GET", "/no/such/page"),
];

const PARAMS: &[&str] = &[
    "project",
    "run_id",
    "trace_id",
    "span_id",
    "parent_span_id",
    "q",
    "status",
    "kind",
    "filter",
    "sort",
    "order",
    "limit",
    "cursor",
    "step",
    "min_step",
    "max_step",
    "since_us",
    "until_us",
    "key",
    "max_points",
    "a",
    "b",
    "threshold",
    "c",
    "diff",
    "open",
    "pair",
    "traces",
    "metric",
    "next",
];

const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "2",
    "50",
    "500",
    "501",
    "1000",
    "100001",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999999",
    "1e308",
    "-0",
    "0.5",
    "NaN",
    "inf",
    "abc",
    "ok",
    "error",
    "running",
    "model,tool",
    "rollout",
    "desc",
    "asc",
    "updated",
    "duration",
    "tokens",
    "attr.reward",
    "attr.",
    "reward > 0.5",
    "tokens >= 1e400",
    "errors > 0",
    "duration exists",
    "attr.reward < -9223372036854775808",
    "a b c d e f g h i",
    "%",
    "_",
    "'",
    "\"",
    "\\",
    "\u{0}",
    "😀",
    "::",
    "t:s",
    "x:y:z",
    "AAAA",
    "eyJ4IjoxfQ",
    "../../etc/passwd",
    "<script>",
    "1,2,3",
    "0:0",
];

/// Values a JSON field is swapped for.
fn odd_value(rng: &mut Rng) -> Value {
    match rng.below(24) {
        0 => json!(i64::MAX),
        1 => json!(i64::MIN),
        2 => json!(u64::MAX),
        3 => json!(-1),
        4 => json!(0),
        5 => json!(1e308),
        6 => json!(-1e308),
        7 => json!(0.5),
        8 => json!(""),
        9 => json!("x".repeat(rng.below(3) * 40_000 + 300)),
        10 => Value::Null,
        11 => json!(true),
        12 => json!([]),
        13 => json!({}),
        14 => json!("\u{0}\u{1}"),
        15 => json!("😀 ünïcode"),
        16 => json!(*rng
            .pick(&["open", "close", "ok", "error", "running", "model", "session"])
            .unwrap_or(&"")),
        17 => json!(9_007_199_254_740_993i64),
        18 => json!(-9_223_372_036_854_775_807i64),
        19 => json!([1, "two", null, {"three": 3}]),
        20 => json!({"nested": {"deeper": [1, 2, {"deepest": "x"}]}}),
        21 => json!(1_000_000_000_000_000i64),
        22 => json!("2026-01-01T00:00:00Z"),
        _ => json!(rng.next_u64() as i64),
    }
}

fn strange_id(rng: &mut Rng) -> String {
    match rng.below(10) {
        0 => String::new(),
        1 => "x".repeat(300),
        2 => "x".repeat(10_000),
        3 => "..".into(),
        4 => "a/b".into(),
        5 => "%00".into(),
        6 => "😀".into(),
        7 => " spaced id ".into(),
        8 => "'; drop table runs; --".into(),
        _ => format!("{:x}", rng.next_u64()),
    }
}

fn fill(template: &str, known: &Known, rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.push_str(&rest[..open]);
        let name = &rest[open + 1..open + close];
        let real = match name {
            "run_id" => &known.run,
            "trace_id" => &known.trace,
            _ => &known.span,
        };
        match rng.below(10) {
            0..=6 => out.push_str(&encode(real)),
            7 => out.push_str("%zz%"), // not a valid escape
            _ => out.push_str(&encode(&strange_id(rng))),
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

fn query(rng: &mut Rng, known: &Known) -> String {
    let mut pairs = Vec::new();
    for _ in 0..rng.below(6) {
        let name = *rng.pick(PARAMS).unwrap_or(&"q");
        let value = match rng.below(10) {
            0 => known.trace.clone(),
            1 => format!("{}:{}", known.trace, known.span),
            2 => strange_id(rng),
            3 => format!(
                "attr.{} {} {}",
                strange_id(rng),
                rng.pick(&["<", ">=", "=", "!=", "exists", "~"])
                    .unwrap_or(&"="),
                rng.pick(VALUES).unwrap_or(&"")
            ),
            _ => rng.pick(VALUES).unwrap_or(&"").to_string(),
        };
        pairs.push(format!("{}={}", encode(name), encode(&value)));
    }
    if rng.one_in(20) {
        pairs.push("&&==&%zz=%".into());
    }
    if pairs.is_empty() {
        String::new()
    } else {
        format!("?{}", pairs.join("&"))
    }
}

fn span_event(rng: &mut Rng, known: &Known, n: usize) -> Value {
    let span = if rng.one_in(3) {
        known.span.clone()
    } else {
        format!("f{n}")
    };
    if rng.one_in(2) {
        json!({"op": "open", "trace_id": known.trace, "span_id": span,
            "parent_span_id": if n == 0 { Value::Null } else { json!(known.span) },
            "name": "fuzzed", "kind": *rng.pick(&["model", "tool", "env_step", "rollout", "agent"]).unwrap_or(&"model"),
            "ts": 1_764_420_000_000_000i64 + n as i64, "step": n, "rank": 0, "ordinal": n,
            "attributes": {"reward": 0.5, "env": "x"}, "input": {"messages": [{"role": "user", "content": "hi"}]},
            "thread_id": "th", "rollout_id": "ro"})
    } else {
        json!({"op": "close", "trace_id": known.trace, "span_id": span, "ts": 1_764_420_000_000_100i64 + n as i64,
            "status": *rng.pick(&["ok", "error"]).unwrap_or(&"ok"), "token_count": 12,
            "output": {"text": "answer"}, "metrics": {"latency": 1.5}, "attributes": {"score": 1}})
    }
}

fn otlp_body(rng: &mut Rng, known: &Known) -> Vec<u8> {
    let kv = |key: &str, value: Any| KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    };
    let mut bytes = |n: usize| (0..n).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>();
    let (trace_id, span_id, parent) = (bytes(16), bytes(8), bytes(8));
    let start = rng.next_u64() >> rng.below(64) as u32;
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv("treeline.project", Any::StringValue("fuzz".into())),
                    kv("treeline.run_id", Any::StringValue(known.run.clone())),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id,
                    span_id,
                    parent_span_id: parent,
                    name: "otlp fuzz".into(),
                    start_time_unix_nano: start,
                    end_time_unix_nano: start.wrapping_sub(rng.next_u64() >> 8),
                    attributes: vec![
                        kv("openinference.span.kind", Any::StringValue("LLM".into())),
                        kv(
                            "llm.token_count.total",
                            Any::IntValue(rng.next_u64() as i64),
                        ),
                        kv(
                            "treeline.step",
                            Any::DoubleValue(f64::from_bits(rng.next_u64())),
                        ),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    request.encode_to_vec()
}

/// A valid body for the route, or None for a route that takes none.
fn seed_body(method: &str, route: &str, rng: &mut Rng, known: &Known) -> Option<Value> {
    Some(match (method, route) {
        ("POST", routes::RUN_TRACE_EVENTS) => {
            let events: Vec<Value> = (0..rng.below(8) + 1)
                .map(|n| span_event(rng, known, n))
                .collect();
            json!({"events": events})
        }
        ("POST", routes::RUN_METRICS) => {
            json!({"points": [{"key": "loss", "step": rng.below(100), "value": rng.unit()},
                {"key": "reward", "step": 1, "value": 0.25, "ts": 1_764_420_000_000_000i64}]})
        }
        ("PUT", routes::RUN) => json!({"project": "fuzz", "name": "fuzzed run",
            "config": {"lr": 0.001, "layers": [1, 2]}, "start_us": 1_764_420_000_000_000i64}),
        ("POST", routes::RUN_FINISH) => {
            json!({"status": *rng.pick(&["finished", "failed", "crashed"]).unwrap_or(&"finished")})
        }
        _ => return None,
    })
}

/// Changes one node of `value`, chosen at random.
fn mutate(value: &mut Value, rng: &mut Rng, depth: usize) {
    let descend = depth < 6 && rng.below(3) != 0;
    match value {
        Value::Object(map) if descend && !map.is_empty() => {
            let i = rng.below(map.len());
            if let Some((_, child)) = map.iter_mut().nth(i) {
                mutate(child, rng, depth + 1);
            }
        }
        Value::Array(items) if descend && !items.is_empty() => {
            let i = rng.below(items.len());
            if let Some(child) = items.get_mut(i) {
                mutate(child, rng, depth + 1);
            }
        }
        Value::Object(map) => match rng.below(3) {
            0 if !map.is_empty() => {
                let i = rng.below(map.len());
                if let Some(key) = map.keys().nth(i).cloned() {
                    map.remove(&key);
                }
            }
            1 => {
                map.insert(strange_id(rng), odd_value(rng));
            }
            _ => *value = odd_value(rng),
        },
        Value::Array(items) if !items.is_empty() && rng.one_in(2) => {
            // Many copies of one element: a long list.
            let copies = [10, 1_000, 5_000, 20_000][rng.below(4)];
            let first = items[0].clone();
            items.extend(std::iter::repeat_n(first, copies));
        }
        _ => *value = odd_value(rng),
    }
}

/// Byte-level damage to an encoded body.
fn damage(bytes: &mut Vec<u8>, rng: &mut Rng) {
    match rng.below(5) {
        0 if !bytes.is_empty() => bytes.truncate(rng.below(bytes.len())),
        1 => {
            for _ in 0..rng.below(8) + 1 {
                let i = rng.below(bytes.len().max(1));
                if let Some(b) = bytes.get_mut(i) {
                    *b = rng.next_u64() as u8;
                }
            }
        }
        2 => {
            let depth = [10, 200, 100_000][rng.below(3)];
            *bytes = format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes();
        }
        3 => bytes.extend((0..rng.below(64)).map(|_| rng.next_u64() as u8)),
        _ => *bytes = (0..rng.below(256)).map(|_| rng.next_u64() as u8).collect(),
    }
}

/// For a write route, a body of many tiny items (a decompression amplifier): empty
/// events or points, empty OTLP spans in protobuf or JSON, or a config of numbers.
/// Answers the body and whether it is JSON.
fn amplified(route: &str, rng: &mut Rng) -> Option<(Vec<u8>, bool)> {
    let count = *rng.pick(&[20_000usize, 400_000, 2_000_000])?;
    let list = |prefix: &str, item: &str, suffix: &str| {
        let mut body = prefix.as_bytes().to_vec();
        for i in 0..count {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item.as_bytes());
        }
        body.extend_from_slice(suffix.as_bytes());
        body
    };
    let body = if route.ends_with("/traces/events") {
        (list(r#"{"events":["#, "{}", "]}"), true)
    } else if route.ends_with("/metrics") {
        (list(r#"{"points":["#, "{}", "]}"), true)
    } else if route == routes::OTLP_TRACES && rng.one_in(2) {
        (
            list(
                r#"{"resourceSpans":[{"scopeSpans":[{"spans":["#,
                "{}",
                "]}]}]}",
            ),
            true,
        )
    } else if route == routes::OTLP_TRACES {
        let spans = vec![Span::default(); count.min(4_000_000)];
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        (request.encode_to_vec(), false)
    } else if route.ends_with("/runs/{run_id}") {
        (list(r#"{"project":"fuzz","config":["#, "0", "]}"), true)
    } else {
        return None;
    };
    Some(body)
}

fn compress(bytes: &[u8], encoding: &str) -> Vec<u8> {
    match encoding {
        "gzip" => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            let _ = encoder.write_all(bytes);
            encoder.finish().unwrap_or_default()
        }
        _ => zstd::stream::encode_all(bytes, 1).unwrap_or_default(),
    }
}

/// The `n`-th request of a fuzz run: the same seed and `n` give the same request.
pub(crate) fn request(seed: u64, n: u64, known: &Known) -> Request {
    let mut rng = Rng::new(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let api = routes::ALL
        .iter()
        .map(|(m, r)| (*m, format!("{}{r}", routes::API_PREFIX)));
    let other = [("POST", routes::OTLP_TRACES), ("GET", routes::HEALTH)]
        .into_iter()
        .chain(PAGES.iter().copied())
        .map(|(m, r)| (m, r.to_string()));
    let all: Vec<(&str, String)> = api.chain(other).collect();
    let (mut method, route) = rng.pick(&all).cloned().unwrap_or(("GET", "/".into()));
    if rng.one_in(30) {
        method = *rng
            .pick(&["DELETE", "PATCH", "OPTIONS", "HEAD", "PUT", "POST", "GET"])
            .unwrap_or(&"GET");
    }
    let template = route.strip_prefix(routes::API_PREFIX).unwrap_or(&route);
    let target = format!(
        "{}{}",
        fill(&route, known, &mut rng),
        query(&mut rng, known)
    );

    let mut headers = Vec::new();
    let mut json_body = true;
    let mut body = if route == routes::OTLP_TRACES {
        if rng.one_in(3) {
            let request = ExportTraceServiceRequest::decode(otlp_body(&mut rng, known).as_slice())
                .unwrap_or_default();
            serde_json::to_vec(&request).unwrap_or_default()
        } else {
            json_body = false;
            otlp_body(&mut rng, known)
        }
    } else if route == "/login" {
        json_body = false;
        format!(
            "key={}&next={}",
            encode(&strange_id(&mut rng)),
            encode("/traces")
        )
        .into_bytes()
    } else {
        match seed_body(method, template, &mut rng, known) {
            Some(mut value) => {
                for _ in 0..rng.below(3) {
                    mutate(&mut value, &mut rng, 0);
                }
                serde_json::to_vec(&value).unwrap_or_default()
            }
            None if rng.one_in(10) => b"{\"unexpected\": true}".to_vec(),
            None => Vec::new(),
        }
    };
    // Now and then a body that is small once compressed but holds millions of items.
    let amplified = rng
        .one_in(40)
        .then(|| amplified(&route, &mut rng))
        .flatten();
    let amplified_body = amplified.is_some();
    if let Some((items, is_json)) = amplified {
        body = items;
        json_body = is_json;
    } else if rng.one_in(6) {
        damage(&mut body, &mut rng);
    }
    let content_type = match (json_body, route.as_str()) {
        (_, "/login") => "application/x-www-form-urlencoded",
        (false, _) => "application/x-protobuf",
        _ => "application/json",
    };
    headers.push((
        "content-type",
        if rng.one_in(12) {
            rng.pick(&[
                "text/plain",
                "application/x-protobuf",
                "application/json",
                "multipart/form-data; boundary=x",
                "bad/é",
            ])
            .unwrap_or(&"")
            .to_string()
        } else {
            content_type.to_string()
        },
    ));
    match if amplified_body { 0 } else { rng.below(20) } {
        0..=2 => {
            body = compress(&body, "gzip");
            headers.push(("content-encoding", "gzip".into()));
        }
        3..=4 => {
            body = compress(&body, "zstd");
            headers.push(("content-encoding", "zstd".into()));
        }
        5 => headers.push((
            "content-encoding",
            (*rng
                .pick(&["gzip", "zstd", "br", "gzip, zstd", "identity", "x-gzip"])
                .unwrap_or(&"br"))
            .into(),
        )),
        _ => {}
    }
    match rng.below(20) {
        0..=7 => headers.push(("idempotency-key", format!("fuzz-{seed:x}-{n}"))),
        8 => headers.push(("idempotency-key", "fuzz-reused-key".into())),
        9 => headers.push(("idempotency-key", "bad key é".into())),
        10 => headers.push(("idempotency-key", "k".repeat(300))),
        _ => {}
    }
    if rng.one_in(10) {
        headers.push((
            "authorization",
            (*rng
                .pick(&[
                    "Bearer nope",
                    "Bearer ",
                    "Basic Zm9vOmJhcg==",
                    "Bearer tl_0000",
                ])
                .unwrap_or(&""))
            .into(),
        ));
    }
    if rng.one_in(20) {
        headers.push(("cookie", "treeline_session=forged; other=1".into()));
    }
    Request {
        method: reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::GET),
        route: format!("{method} {route}"),
        target,
        headers,
        body,
    }
}
