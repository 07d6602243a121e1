//! `treeline bench otlp`: OTLP/HTTP protobuf ingest, timed until every span is stored
//! and visible through the query API, on a server of its own (or the one `--url`
//! names).

use crate::failure::{Context, Failure, Outcome};
use crate::Host;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use serde_json::Value;
use treeline_client::new_key;

use super::rng::Rng;
use super::start_server;

#[derive(clap::Args, Clone, Debug)]
pub struct OtlpArgs {
    /// Traces to send.
    #[arg(long, default_value_t = 2_000)]
    pub traces: usize,
    /// Spans per trace: a root and its children.
    #[arg(long, default_value_t = 25)]
    pub spans_per_trace: usize,
    /// Spans per export request.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Concurrent writers.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Bytes of each child's input and output strings.
    #[arg(long, default_value_t = 200)]
    pub body_bytes: usize,
    /// Send the requests gzip-compressed.
    #[arg(long)]
    pub gzip: bool,
    /// Trace ids that rise in the order the traces are sent (the easy case for the
    /// store's indexes), instead of random ones as OpenTelemetry SDKs make.
    #[arg(long)]
    pub rising_trace_ids: bool,
    /// Target this server instead of starting one.
    #[arg(long)]
    pub url: Option<String>,
    /// Database for the benchmark's own server (default: SQLite in a temporary directory).
    #[arg(long)]
    pub database_url: Option<String>,
}

fn kv(key: &str, value: Any) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, Any::StringValue(value.into()))
}

/// Pre-encoded request bodies, so the figure measures the server, not the encoding.
fn requests(args: &OtlpArgs, run_id: &str) -> Vec<Vec<u8>> {
    let resource = Resource {
        attributes: vec![
            text("service.name", "treeline-bench"),
            text("treeline.project", "bench"),
            text("treeline.run_id", run_id),
        ],
        ..Default::default()
    };
    let filler = |c: char| c.to_string().repeat(args.body_bytes);
    let (input, output) = (filler('i'), filler('o'));
    let base_ns = (crate::now_us() as u64).saturating_mul(1_000);
    let run_tag = run_id
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let total = args.traces * args.spans_per_trace;
    let mut spans = Vec::with_capacity(args.batch);
    let mut out = Vec::new();
    let mut rng = Rng::new(run_tag);
    let mut trace_id = Vec::new();
    for i in 0..total {
        let trace = i / args.spans_per_trace;
        let index = i % args.spans_per_trace;
        if index == 0 {
            // Random unless asked, as OpenTelemetry SDKs make them: each trace's
            // spans land at a place of their own in every index keyed by trace.
            let (high, low) = if args.rising_trace_ids {
                (run_tag, trace as u64 + 1)
            } else {
                (rng.next_u64(), rng.next_u64())
            };
            trace_id = [high.to_be_bytes(), low.to_be_bytes()].concat();
        }
        let span_id = (i as u64 + 1).to_be_bytes().to_vec();
        let root_id = ((i - index) as u64 + 1).to_be_bytes().to_vec();
        let start = base_ns + (i as u64) * 10_000;
        let mut span = Span {
            trace_id: trace_id.clone(),
            span_id,
            start_time_unix_nano: start,
            end_time_unix_nano: start + 5_000,
            ..Default::default()
        };
        if index == 0 {
            span.name = "agent run".into();
            span.attributes = vec![
                text("openinference.span.kind", "AGENT"),
                kv("treeline.step", Any::IntValue((trace % 5_000) as i64)),
            ];
        } else {
            span.parent_span_id = root_id;
            let llm = index % 2 == 1;
            span.name = if llm { "llm call" } else { "tool call" }.into();
            span.attributes = vec![
                text("openinference.span.kind", if llm { "LLM" } else { "TOOL" }),
                text("input.value", &input),
                text("output.value", &output),
                kv("llm.token_count.total", Any::IntValue(12)),
            ];
        }
        spans.push(span);
        if spans.len() >= args.batch || i + 1 == total {
            let request = ExportTraceServiceRequest {
                resource_spans: vec![ResourceSpans {
                    resource: Some(resource.clone()),
                    scope_spans: vec![ScopeSpans {
                        scope: Some(InstrumentationScope {
                            name: "treeline.bench".into(),
                            ..Default::default()
                        }),
                        spans: std::mem::take(&mut spans),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
            };
            let bytes = request.encode_to_vec();
            out.push(if args.gzip { gzip(&bytes) } else { bytes });
        }
    }
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

async fn send(http: &reqwest::Client, url: &str, body: Vec<u8>, gzip: bool) -> Outcome {
    let mut request = http
        .post(url)
        .header("content-type", "application/x-protobuf")
        .body(body);
    if gzip {
        request = request.header("content-encoding", "gzip");
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .with_context(|| format!("reading the answer to POST {url}"))?;
    if !status.is_success() {
        return Err(Failure::msg(format!(
            "{status}: {}",
            String::from_utf8_lossy(&bytes)
        )));
    }
    let reply = ExportTraceServiceResponse::decode(&bytes[..])
        .context("the answer is not an OTLP ExportTraceServiceResponse")?;
    match reply.partial_success {
        Some(p) if p.rejected_spans > 0 => Err(Failure::msg(format!(
            "{} spans rejected: {}",
            p.rejected_spans, p.error_message
        ))),
        _ => Ok(()),
    }
}

/// Spans and traces of the run as the query API lists them.
async fn visible(http: &reqwest::Client, base: &str, run_id: &str) -> Outcome<(i64, usize)> {
    let mut spans = 0;
    let mut traces = 0;
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base}/api/runs/{run_id}/traces?limit=500");
        if let Some(c) = &cursor {
            url.push_str("&cursor=");
            url.push_str(&form_urlencoded::byte_serialize(c.as_bytes()).collect::<String>());
        }
        let page: Value = http
            .get(&url)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?
            .json()
            .await
            .with_context(|| format!("reading the answer to GET {url}"))?;
        let list = page["traces"].as_array().cloned().unwrap_or_default();
        traces += list.len();
        spans += list
            .iter()
            .map(|t| t["span_count"].as_i64().unwrap_or(0))
            .sum::<i64>();
        match page["next_cursor"].as_str() {
            Some(c) if !list.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok((spans, traces)),
        }
    }
}

pub async fn otlp(host: &dyn Host, args: OtlpArgs) -> Outcome {
    let (base, _temp) = match &args.url {
        Some(url) => (url.trim_end_matches('/').to_string(), None),
        None => start_server(host, args.database_url.clone()).await?,
    };
    let run_id = format!("bench-otlp-{}", &new_key()[..12]);
    let total = args.traces * args.spans_per_trace;
    print!(
        "encoding {} traces of {} spans as protobuf requests of {} spans… ",
        args.traces, args.spans_per_trace, args.batch
    );
    let bodies = Arc::new(requests(&args, &run_id));
    println!("{} requests", bodies.len());
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .context("cannot build the HTTP client")?;
    let url = format!("{base}/v1/traces");

    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.writers.max(1) {
        let (http, bodies, next, url) = (http.clone(), bodies.clone(), next.clone(), url.clone());
        let gzip = args.gzip;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(i) else { break };
                let t = Instant::now();
                send(&http, &url, body.clone(), gzip).await?;
                latencies.push(t.elapsed());
            }
            Ok::<_, Failure>(latencies)
        }));
    }
    let mut latencies: Vec<Duration> = Vec::new();
    for task in tasks {
        latencies.extend(task.await.context("a benchmark writer stopped")??);
    }
    let sent = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (spans, traces) = visible(&http, &base, &run_id).await?;
        if spans == total as i64 && traces == args.traces {
            break;
        }
        if Instant::now() > deadline {
            return Err(Failure::msg(format!(
                "only {spans} of {total} spans ({traces} of {} traces) became visible",
                args.traces
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |p: f64| crate::bench::percentile(&latencies, p);
    println!(
        "otlp: {total} spans ({} traces) in {:.2} s = {:.0} spans/s, stored and visible through the query API \
         ({} requests of {} spans{}, {} writers; all acknowledged after {:.2} s); request latency p50 {:.1} ms, p99 {:.1} ms",
        args.traces,
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64(),
        bodies.len(),
        args.batch,
        if args.gzip { ", gzip" } else { "" },
        args.writers,
        sent.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
    );
    Ok(())
}
