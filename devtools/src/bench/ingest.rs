//! `treeline bench ingest`: end-to-end ingest throughput through the HTTP API and the
//! Rust client, on a server of its own (or the one `--url` names).

use crate::failure::{Context, Outcome};
use crate::Host;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use treeline_client::{new_key, Client};
use treeline_wire::RunUpsert;

#[derive(clap::Args, Clone, Debug)]
pub struct IngestArgs {
    /// Span events to send (an open and a close per span).
    #[arg(long, default_value_t = 1_000_000)]
    pub events: usize,
    /// Events per request.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Concurrent writers.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Spans per trace (a root and its children).
    #[arg(long, default_value_t = 25)]
    pub spans_per_trace: usize,
    /// Target this server instead of starting one.
    #[arg(long)]
    pub url: Option<String>,
    /// Database for the benchmark's own server (default: SQLite in a temporary directory).
    #[arg(long)]
    pub database_url: Option<String>,
    /// Give the benchmark's own server a stored write key and send it with every
    /// request, so each one is authenticated as on a team server.
    #[arg(long)]
    pub with_key: bool,
    /// Random trace ids, as OpenTelemetry clients send, instead of ids that rise with
    /// time, as the Python SDK sends: each trace lands at a random place in the indexes
    /// (the worst case).
    #[arg(long)]
    pub random_trace_ids: bool,
    /// Attributes on each span's open event, as OpenTelemetry spans carry a dozen
    /// (model, token counts, HTTP fields…); 1 sends the environment's name alone.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub attributes: u16,
    /// Runs the requests are dealt among in turn, as a team's concurrent jobs write
    /// (1, the default, is the hardest case: one run's batches are written in turn).
    /// A request holds whole traces when `--batch` is a multiple of twice
    /// `--spans-per-trace`, as by default; otherwise a trace's spans may go to two runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub runs: u16,
    /// Each span's close in a request after all the opens, bringing an attribute of
    /// its own (a reward), as an SDK sends a span that outlives a flush: every close
    /// then updates a stored span.
    #[arg(long)]
    pub late_closes: bool,
}

/// The attributes of span `i` of trace `trace`: the environment's name, then up to
/// `count - 1` more in OpenTelemetry's shape, their values varying by span.
fn attributes(count: u16, i: usize, trace: usize) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("env".into(), json!("CartPole-v1"));
    let more = [
        ("gen_ai.system", json!("openai")),
        (
            "gen_ai.request.model",
            json!(["gpt-4o-mini", "gpt-4o"][i % 2]),
        ),
        ("gen_ai.request.temperature", json!(0.7)),
        ("gen_ai.usage.input_tokens", json!(300 + i % 900)),
        ("gen_ai.usage.output_tokens", json!(20 + i % 200)),
        ("http.request.method", json!("POST")),
        (
            "http.response.status_code",
            json!(if i.is_multiple_of(50) { 429 } else { 200 }),
        ),
        ("server.address", json!("policy.internal")),
        ("episode", json!(trace)),
        ("seed", json!(i % 1_000)),
        ("retry", json!(i.is_multiple_of(50))),
    ];
    let named = more.len();
    for (key, value) in more.into_iter().take(usize::from(count) - 1) {
        map.insert(key.into(), value);
    }
    for extra in named + 1..usize::from(count) {
        map.insert(format!("extra.{extra}"), json!(i % 10));
    }
    Value::Object(map)
}

/// Pre-encoded request bodies, so the figure measures the server, not JSON encoding.
fn batches(args: &IngestArgs) -> Vec<Vec<u8>> {
    let spans = args.events / 2;
    let mut events = Vec::with_capacity(args.batch);
    // The closes `--late-closes` sends after every open.
    let mut late = Vec::new();
    let mut out = Vec::new();
    let base = 1_764_420_000_000_000i64;
    let mut rng = super::rng::Rng::new(7);
    let mut trace_id = String::new();
    for i in 0..spans {
        let trace = i / args.spans_per_trace;
        let index = i % args.spans_per_trace;
        if index == 0 {
            trace_id = if args.random_trace_ids {
                format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64())
            } else {
                format!("{trace:032x}")
            };
        }
        let span_id = format!("{i:016x}");
        let ts = base + i as i64 * 10;
        let parent = (index > 0).then(|| format!("{:016x}", i - index));
        let (name, kind) = if index == 0 {
            ("rollout", "rollout")
        } else {
            ("env step", "env_step")
        };
        let open = json!({"op": "open", "trace_id": trace_id, "span_id": span_id, "parent_span_id": parent,
            "name": name, "kind": kind, "ts": ts, "step": trace % 5_000, "attributes": attributes(args.attributes, i, trace),
            "input": {"obs": [0.1, 0.2, 0.3, 0.4]}});
        let mut close = json!({"op": "close", "trace_id": trace_id, "span_id": span_id, "ts": ts + 5,
            "status": if i % 97 == 0 { "error" } else { "ok" }, "output": {"action": i % 2}, "token_count": 3});
        events.push(open);
        if args.late_closes {
            close["attributes"] = json!({"reward": (i % 10) as f64 / 10.0});
            late.push(close);
        } else {
            events.push(close);
        }
        if events.len() >= args.batch {
            out.push(serde_json::to_vec(&json!({"events": events})).unwrap_or_default());
            events.clear();
        }
    }
    events.extend(late);
    for chunk in events.chunks(args.batch.max(1)) {
        out.push(serde_json::to_vec(&json!({ "events": chunk })).unwrap_or_default());
    }
    out
}

pub async fn ingest(host: &dyn Host, args: IngestArgs) -> Outcome {
    let mut _temp = None;
    let mut key = None;
    let base = match &args.url {
        Some(url) => url.clone(),
        None => {
            let (base, dir, k) =
                super::start_server_with(host, args.database_url.clone(), args.with_key).await?;
            _temp = dir;
            key = k;
            base
        }
    };
    let client = Client::new(&base).with_api_key(key);
    let tag = new_key()[..12].to_string();
    let mut run_ids = Vec::new();
    for n in 0..args.runs {
        let run_id = format!("bench-{tag}-{n}");
        client
            .put_run(
                &run_id,
                &RunUpsert {
                    project: "bench".into(),
                    name: Some(format!("ingest benchmark {n}")),
                    ..Default::default()
                },
            )
            .await
            .context("creating the benchmark's runs")?;
        run_ids.push(run_id);
    }
    let run_ids = Arc::new(run_ids);
    print!(
        "encoding {} events in batches of {}… ",
        args.events, args.batch
    );
    let bodies = Arc::new(batches(&args));
    println!("{} requests", bodies.len());

    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.writers.max(1) {
        let (client, bodies, next, run_ids) = (
            client.clone(),
            bodies.clone(),
            next.clone(),
            run_ids.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(body) = bodies.get(i) else { break };
                let Some(run_id) = run_ids.get(i % run_ids.len()) else {
                    break;
                };
                let t = Instant::now();
                let reply: Value = client
                    .post_raw(
                        &treeline_wire::routes::path(
                            treeline_wire::routes::RUN_TRACE_EVENTS,
                            &[run_id],
                        ),
                        body.clone(),
                        &new_key(),
                    )
                    .await?;
                latencies.push(t.elapsed());
                if reply["rejected"].as_array().is_some_and(|r| !r.is_empty()) {
                    return Err(treeline_client::ClientError::Api {
                        status: 200,
                        code: "rejected".into(),
                        message: reply.to_string(),
                    });
                }
                if i % 100 == 0 {
                    eprint!("\r{:>5.1}% sent", 100.0 * i as f64 / bodies.len() as f64);
                }
            }
            Ok::<_, treeline_client::ClientError>(latencies)
        }));
    }
    let mut latencies: Vec<Duration> = Vec::new();
    for task in tasks {
        latencies.extend(
            task.await
                .context("a benchmark writer stopped")?
                .context("a benchmark writer's batch failed")?,
        );
    }
    let elapsed = started.elapsed();
    eprintln!("\r100.0% sent");
    latencies.sort();
    let pct = |p: f64| crate::bench::percentile(&latencies, p);
    println!(
        "ingest: {} events in {:.2} s = {:.0} events/s ({} writers, {} run{}, batches of {}, {} trace ids{}); batch latency p50 {:.1} ms, p99 {:.1} ms",
        args.events,
        elapsed.as_secs_f64(),
        args.events as f64 / elapsed.as_secs_f64(),
        args.writers,
        args.runs,
        if args.runs == 1 { "" } else { "s" },
        args.batch,
        if args.random_trace_ids { "random" } else { "rising" },
        if args.late_closes { ", closes after the opens" } else { "" },
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{attributes, batches, IngestArgs};
    use clap::Parser;
    use serde_json::Value;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: IngestArgs,
    }

    /// The ops of every request, in the order they are sent.
    fn ops(flags: &[&str]) -> Vec<(String, bool)> {
        let args = Cli::parse_from(
            ["bench", "--events", "200", "--batch", "50"]
                .iter()
                .chain(flags),
        )
        .args;
        batches(&args)
            .iter()
            .flat_map(|b| {
                let body: Value = serde_json::from_slice(b).unwrap_or_default();
                body["events"].as_array().cloned().unwrap_or_default()
            })
            .map(|e| {
                (
                    e["op"].as_str().unwrap_or("").to_string(),
                    e.get("attributes").is_some(),
                )
            })
            .collect()
    }

    #[test]
    fn late_closes_follow_every_open_and_bring_an_attribute() {
        let late = ops(&["--late-closes"]);
        assert_eq!(late.len(), 200);
        let first_close = late.iter().position(|(op, _)| op == "close");
        assert_eq!(first_close, Some(100));
        assert!(late[100..]
            .iter()
            .all(|(op, attrs)| op == "close" && *attrs));
        // By default a span's close follows its open, with no attributes.
        let paired = ops(&[]);
        assert_eq!(paired.len(), 200);
        assert_eq!(
            (paired[0].0.as_str(), paired[1].0.as_str()),
            ("open", "close")
        );
        assert!(!paired[1].1);
    }

    #[test]
    fn a_span_carries_the_attributes_asked_for() {
        for count in [1, 12, 64] {
            let attrs = attributes(count, 7, 0);
            assert_eq!(attrs.as_object().map(|m| m.len()), Some(usize::from(count)));
        }
    }
}
