//! One soak writer, shaped like the SDK's sender: a few traces open at once, their
//! events interleaved as the spans run, cut into batches by size, so a span's open
//! and its close usually travel in different batches and a trace spans many. Each
//! batch is sent until acknowledged under one Idempotency-Key, as the SDK's spool
//! replays it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::deliver::{deliver, Tally};
use crate::bench::rng::Rng;

/// What one acknowledged trace must look like when read back.
#[derive(Clone, Debug)]
pub(crate) struct Expected {
    pub(crate) run: String,
    pub(crate) trace: String,
    pub(crate) spans: i64,
    pub(crate) errors: i64,
    pub(crate) tokens: i64,
}

/// What a writer saw, for the report.
#[derive(Default)]
pub(crate) struct WriterReport {
    pub(crate) events: u64,
    pub(crate) ack_latencies: Vec<Duration>,
    pub(crate) tally: Tally,
    /// Metric series written: (run, key, step → value), each step's last value.
    pub(crate) metrics: Vec<(String, String, std::collections::BTreeMap<i64, f64>)>,
}

pub(crate) struct WriterPlan {
    pub(crate) index: usize,
    pub(crate) run: String,
    pub(crate) bases: Vec<String>,
    pub(crate) spans_per_trace: usize,
    pub(crate) traces_in_flight: usize,
    pub(crate) batch: usize,
}

/// A trace being written: its events still to send, and what it will add up to.
struct Open {
    events: VecDeque<Value>,
    expected: Expected,
}

fn new_trace(plan: &WriterPlan, number: u64, rng: &mut Rng) -> Open {
    let ts = crate::now_us();
    // As the Python SDK makes them: milliseconds, then 80 random bits.
    let trace = format!(
        "{:012x}{:04x}{:016x}",
        (ts / 1_000) & 0xffff_ffff_ffff,
        rng.next_u64() & 0xffff,
        rng.next_u64()
    );
    let mut events = VecDeque::new();
    events.push_back(
        json!({"op": "open", "trace_id": trace, "span_id": "root", "name": "rollout",
        "kind": "rollout", "ts": ts, "step": number, "attributes": {"writer": plan.index}}),
    );
    let (mut errors, mut tokens) = (0, 0);
    let children = plan.spans_per_trace.saturating_sub(1);
    let mut close = |c: usize, events: &mut VecDeque<Value>, rng: &mut Rng| {
        let status = if rng.one_in(40) {
            errors += 1;
            "error"
        } else {
            "ok"
        };
        let mut event = json!({"op": "close", "trace_id": trace, "span_id": format!("s{c}"),
            "ts": ts + 2 * c as i64 + 1, "status": status});
        if c.is_multiple_of(3) {
            tokens += 10 + c as i64;
            event["token_count"] = json!(10 + c);
            event["output"] = json!({"text": format!("answer {c}")});
        }
        events.push_back(event);
    };
    for c in 1..=children {
        let (name, kind) = if c.is_multiple_of(3) {
            ("policy", "model")
        } else {
            ("env step", "env_step")
        };
        events.push_back(
            json!({"op": "open", "trace_id": trace, "span_id": format!("s{c}"),
            "parent_span_id": "root", "name": name, "kind": kind, "ts": ts + 2 * c as i64}),
        );
        if c >= 2 {
            close(c - 1, &mut events, rng);
        }
    }
    if children > 0 {
        close(children, &mut events, rng);
    }
    events.push_back(json!({"op": "close", "trace_id": trace, "span_id": "root",
        "ts": ts + 2 * children as i64 + 2, "status": "ok", "attributes": {"reward": rng.unit()}}));
    Open {
        events,
        expected: Expected {
            run: plan.run.clone(),
            trace,
            spans: plan.spans_per_trace.max(1) as i64,
            errors,
            tokens,
        },
    }
}

/// Writes until `stop` is set, then finishes the traces it has open. Every trace
/// whose last batch was acknowledged is added to `done`.
pub(crate) async fn write(
    plan: WriterPlan,
    http: reqwest::Client,
    stop: Arc<AtomicBool>,
    done: Arc<Mutex<Vec<Expected>>>,
) -> WriterReport {
    let mut rng = Rng::new(0x5eed ^ plan.index as u64);
    let mut report = WriterReport::default();
    let metric_key = format!("w{}/loss", plan.index);
    let mut metric_points = std::collections::BTreeMap::new();
    let mut open: VecDeque<Open> = VecDeque::new();
    let (mut traces_begun, mut batch_number) = (0u64, 0usize);
    loop {
        let mut batch = Vec::with_capacity(plan.batch + plan.traces_in_flight);
        let mut finished = Vec::new();
        while batch.len() < plan.batch {
            while open.len() < plan.traces_in_flight && !stop.load(Ordering::Relaxed) {
                open.push_back(new_trace(&plan, traces_begun, &mut rng));
                traces_begun += 1;
            }
            if open.is_empty() {
                break;
            }
            // One event from each open trace in turn, as spans of concurrent
            // rollouts open and close.
            for trace in open.iter_mut() {
                if let Some(event) = trace.events.pop_front() {
                    batch.push(event);
                }
            }
            while let Some(i) = open.iter().position(|t| t.events.is_empty()) {
                if let Some(trace) = open.remove(i) {
                    finished.push(trace.expected);
                }
            }
        }
        if batch.is_empty() {
            break;
        }
        // A load balancer in front of several servers: odd writers' batches go to
        // each server in turn, even writers keep to one.
        let server = (plan.index / 2
            + if !plan.index.is_multiple_of(2) {
                batch_number
            } else {
                0
            })
            % plan.bases.len().max(1);
        let base = plan.bases.get(server).cloned().unwrap_or_default();
        let url = format!(
            "{base}{}",
            treeline_wire::routes::path(treeline_wire::routes::RUN_TRACE_EVENTS, &[&plan.run])
        );
        let started = Instant::now();
        let count = batch.len() as u64;
        if deliver(&http, &url, &json!({"events": batch}), &mut report.tally)
            .await
            .is_none()
        {
            break; // refused: a bug, reported; the rest of this writer's load is moot
        }
        report.ack_latencies.push(started.elapsed());
        report.events += count;
        if let Ok(mut done) = done.lock() {
            done.extend(finished);
        }
        if batch_number.is_multiple_of(10) {
            // A training loop's metrics; the step logged twice in one batch keeps
            // the second value, on every database.
            let step = (batch_number / 10) as i64;
            let value = rng.unit();
            let points = json!({"points": [
                {"key": metric_key, "step": step, "value": value + 1.0},
                {"key": metric_key, "step": step, "value": value},
            ]});
            let url = format!(
                "{base}{}",
                treeline_wire::routes::path(treeline_wire::routes::RUN_METRICS, &[&plan.run])
            );
            if deliver(&http, &url, &points, &mut report.tally)
                .await
                .is_some()
            {
                metric_points.insert(step, value);
            }
        }
        batch_number += 1;
    }
    report
        .metrics
        .push((plan.run.clone(), metric_key, metric_points));
    report
}
