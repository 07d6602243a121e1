//! Demo data: a PPO run, a GRPO agent run, a flat GRPO run of one trace per sample, a
//! live run and an interrupted one, loaded through the public ingest API so a newcomer
//! lands on something real.
//!
//! Ids, names and content are fixed (seeded); only timestamps follow the clock, so the
//! runs fall inside the dashboard's default window whenever they are loaded.

mod agent;
mod command;
mod grpo;
mod long;
mod rl;
mod rng;
mod text;
mod trace;

use crate::failure::{Context, Failure, Outcome};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use treeline_client::Client;
use treeline_wire::annotations::AnnotationPut;
use treeline_wire::{routes, BatchResponse, MetricPoint, RunFinish, RunUpsert};

pub use command::{run_command, spawn_api_server, DemoArgs};

pub const PPO_RUN: &str = rl::PPO_RUN;
pub const GRPO_RUN: &str = agent::GRPO_RUN;
pub const GRPO_FLAT_RUN: &str = grpo::GRPO_FLAT_RUN;
pub const LIVE_RUN: &str = agent::LIVE_RUN;
pub const INTERRUPTED_RUN: &str = rl::INTERRUPTED_RUN;
/// The PPO steps whose rollouts fail, while the episode return dips.
pub const PPO_INCIDENT: (i64, i64) = rl::INCIDENT;

/// Sizes of the demo's large objects.
#[derive(Clone, Debug)]
pub struct Options {
    /// Spans in the long-horizon agent trace.
    pub big_trace_spans: u64,
    /// Children of the one very wide node.
    pub wide_children: u64,
    /// Events per request.
    pub batch: usize,
    /// Prompts per step of the flat GRPO run (8 samples each, 200 steps).
    pub flat_prompts: usize,
}

impl Options {
    pub fn full() -> Options {
        Options {
            big_trace_spans: 100_000,
            wide_children: 10_000,
            batch: 4_000,
            flat_prompts: 32,
        }
    }

    /// The big trace and the flat GRPO run scaled down, for tests (8 prompts a step
    /// keep two of each task family); everything else as in [`Options::full`].
    pub fn small() -> Options {
        Options {
            big_trace_spans: 5_000,
            flat_prompts: 8,
            ..Options::full()
        }
    }
}

/// What was loaded, with the ids of the objects worth opening first.
#[derive(Clone, Debug)]
pub struct DemoSummary {
    pub runs: Vec<RunLoaded>,
    pub events: usize,
    pub spans: u64,
    pub elapsed: Duration,
    /// (run, trace) of the long-horizon trace.
    pub big_trace: (String, String),
    /// (run, trace, span) of the node with `wide_children` children.
    pub wide_node: (String, String, String),
}

#[derive(Clone, Debug)]
pub struct RunLoaded {
    pub run_id: String,
    pub project: String,
    pub traces: usize,
    /// Traces with a span that ended in error.
    pub errored_traces: usize,
    pub spans: u64,
}

/// Timestamps derive from `base`; nothing else depends on the clock.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    /// The hour two days before the load: every run fits between it and now.
    pub base: i64,
    pub options: Options,
}

impl Ctx {
    pub(crate) fn new(now_us: i64, options: &Options) -> Ctx {
        Ctx {
            base: now_us / trace::HOUR * trace::HOUR - 48 * trace::HOUR,
            options: options.clone(),
        }
    }
}

/// A run's span events, produced a chunk (a trace, or part of a big one) at a time so
/// the 100,000-span trace never sits in memory whole.
pub(crate) type Chunks = Box<dyn Iterator<Item = Vec<Value>> + Send>;

pub(crate) struct RunPlan {
    pub run_id: &'static str,
    pub upsert: RunUpsert,
    pub metrics: Vec<MetricPoint>,
    /// Annotations on its traces (trace id, body), written once its events are in.
    pub notes: Vec<(String, AnnotationPut)>,
    /// Called twice: once to count the events for the progress bar, once to send them.
    pub events: Box<dyn Fn() -> Chunks + Send + Sync>,
    /// None leaves the run running.
    pub finish: Option<RunFinish>,
}

/// The runs in load order: the small ones first, so the dashboard has something to
/// show while the big trace is still arriving.
pub(crate) fn plan(ctx: &Ctx) -> Vec<RunPlan> {
    vec![
        rl::ppo(ctx),
        rl::interrupted(ctx),
        agent::live(ctx),
        // 51,200 small traces: after the small runs, before the one with the big trace.
        grpo::grpo_flat(ctx),
        agent::grpo(ctx),
    ]
}

#[derive(Default)]
struct Counts {
    events: usize,
    traces: usize,
    errored_traces: usize,
    spans: u64,
}

fn count(chunks: Chunks) -> Counts {
    let mut c = Counts::default();
    let mut errored = std::collections::HashSet::new();
    for chunk in chunks {
        c.events += chunk.len();
        for e in &chunk {
            if e["op"] == "open" {
                c.spans += 1;
                c.traces += usize::from(e["parent_span_id"].is_null());
            } else if e["status"] == "error" {
                errored.insert(e["trace_id"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    c.errored_traces = errored.len();
    c
}

/// Loads the demo through `client`, calling `progress(sent, total)` as batches are
/// acknowledged (metric points, span events and annotations all count).
pub async fn load(
    client: &Client,
    options: &Options,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Outcome<DemoSummary> {
    let started = Instant::now();
    let ctx = Ctx::new(crate::now_us(), options);
    let plans = plan(&ctx);
    let counts: Vec<Counts> = plans.iter().map(|p| count((p.events)())).collect();
    let total: usize = plans
        .iter()
        .zip(&counts)
        .map(|(p, c)| p.metrics.len() + c.events + p.notes.len())
        .sum();
    let batch = options.batch.clamp(1, 10_000);
    progress(0, total);
    // Every run at once: the writer commits their batches together, and the small
    // runs are done long before the big trace is.
    let sent = Mutex::new((0, progress));
    let advance = |n: usize| {
        let mut guard = sent.lock().unwrap_or_else(PoisonError::into_inner);
        let (done, progress) = &mut *guard;
        *done += n;
        progress(*done, total);
    };
    let loads = plans
        .iter()
        .zip(&counts)
        .map(|(plan, counts)| load_run(client, plan, counts, batch, &advance));
    let runs = futures::future::try_join_all(loads).await?;
    Ok(DemoSummary {
        events: total,
        spans: runs.iter().map(|r| r.spans).sum(),
        runs,
        elapsed: started.elapsed(),
        big_trace: (GRPO_RUN.into(), long::big_trace_id()),
        wide_node: (GRPO_RUN.into(), long::wide_trace_id(), long::wide_node_id()),
    })
}

/// Loads one run: its record, metrics, events in batches of `batch`, annotations,
/// and its end.
async fn load_run(
    client: &Client,
    plan: &RunPlan,
    counts: &Counts,
    batch: usize,
    advance: &(dyn Fn(usize) + Sync),
) -> Outcome<RunLoaded> {
    let run_id = plan.run_id;
    client
        .put_run(run_id, &plan.upsert)
        .await
        .with_context(|| format!("cannot create run {run_id}"))?;
    for points in plan.metrics.chunks(batch) {
        let reply = client
            .send_metrics(run_id, points)
            .await
            .with_context(|| format!("cannot send metrics of {run_id}"))?;
        check(run_id, &reply)?;
        advance(points.len());
    }
    let mut pending: Vec<Value> = Vec::with_capacity(batch * 2);
    for chunk in (plan.events)() {
        pending.extend(chunk);
        while pending.len() >= batch {
            let rest = pending.split_off(batch);
            send(client, run_id, &pending).await?;
            advance(pending.len());
            pending = rest;
        }
    }
    if !pending.is_empty() {
        send(client, run_id, &pending).await?;
        advance(pending.len());
    }
    for (trace_id, note) in &plan.notes {
        let path = routes::path(routes::TRACE_ANNOTATIONS, &[run_id, trace_id]);
        let body = serde_json::to_value(note).context("encoding a demo annotation")?;
        client
            .put_json::<Value>(&path, &body)
            .await
            .with_context(|| format!("cannot annotate trace {trace_id} of {run_id}"))?;
        advance(1);
    }
    if let Some(finish) = &plan.finish {
        client
            .finish_run(run_id, finish)
            .await
            .with_context(|| format!("cannot finish run {run_id}"))?;
    }
    Ok(RunLoaded {
        run_id: run_id.to_string(),
        project: plan.upsert.project.clone(),
        traces: counts.traces,
        errored_traces: counts.errored_traces,
        spans: counts.spans,
    })
}

async fn send(client: &Client, run_id: &str, events: &[Value]) -> Outcome {
    let reply = client
        .send_events(run_id, events)
        .await
        .with_context(|| format!("cannot send events of {run_id}"))?;
    check(run_id, &reply)
}

/// A rejected demo event is a bug in the demo: stop and say which.
fn check(run_id: &str, reply: &BatchResponse) -> Outcome {
    match reply.rejected.first() {
        None => Ok(()),
        Some(r) => Err(Failure::msg(format!(
            "the server rejected {} demo items of {run_id}; the first: {}: {}",
            reply.rejected.len(),
            r.code,
            r.message
        ))),
    }
}

/// A progress bar on stderr, redrawn in place.
pub fn stderr_bar() -> impl FnMut(usize, usize) + Send {
    move |sent, total| {
        let total = total.max(1);
        let filled = 30 * sent.min(total) / total;
        eprint!(
            "\rloading demo [{}{}] {sent}/{total} events ({}%)",
            "#".repeat(filled),
            ".".repeat(30 - filled),
            100 * sent / total
        );
        if sent >= total {
            eprintln!();
        }
    }
}

/// Progress as log lines, one per tenth, for a server that loads the demo into itself.
pub fn log_progress() -> impl FnMut(usize, usize) + Send {
    let mut next = 0;
    move |sent, total| {
        let percent = 100 * sent / total.max(1);
        if percent >= next {
            tracing::info!("demo: {sent}/{total} events loaded ({percent}%)");
            next = (percent / 10 + 1) * 10;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each run's events, streamed: the flat GRPO run is too large to hold as JSON.
    fn events(options: &Options) -> Vec<(&'static str, Chunks)> {
        let ctx = Ctx::new(1_800_000_000_000_000, options);
        plan(&ctx)
            .into_iter()
            .map(|p| (p.run_id, (p.events)()))
            .collect()
    }

    #[test]
    fn every_event_is_valid_and_spans_are_unique() {
        for (run, events) in events(&Options::small()) {
            let mut seen = std::collections::HashSet::new();
            for (i, e) in events.flatten().enumerate() {
                let parsed = treeline_wire::parse_event(&e);
                assert!(parsed.is_ok(), "{run} event {i} invalid: {parsed:?}: {e}");
                if let Ok((_, warnings)) = parsed {
                    assert!(warnings.is_empty(), "{run} event {i}: {warnings:?}");
                }
                let key = format!("{} {} {}", e["op"], e["trace_id"], e["span_id"]);
                assert!(seen.insert(key), "{run} event {i} repeats a span: {e}");
            }
        }
    }

    #[test]
    fn every_annotation_is_valid_and_on_a_trace_of_its_run() {
        let ctx = Ctx::new(1_800_000_000_000_000, &Options::small());
        let mut notes = 0;
        for plan in plan(&ctx) {
            let roots: std::collections::HashSet<String> = (plan.events)()
                .flatten()
                .filter(|e| e["op"] == "open" && e["parent_span_id"].is_null())
                .filter_map(|e| e["trace_id"].as_str().map(str::to_string))
                .collect();
            for (trace_id, note) in &plan.notes {
                assert!(
                    roots.contains(trace_id),
                    "{}: no trace {trace_id}",
                    plan.run_id
                );
                assert!(note.checked().is_ok(), "{}: {note:?}", plan.run_id);
                notes += 1;
            }
        }
        // A judge's score on each of 64 samples, a label on the 16 code samples.
        assert_eq!(notes, 64 + 16);
    }

    #[test]
    fn the_data_is_the_same_on_every_load_but_for_the_clock() {
        let strip = |mut e: Value| {
            if let Some(o) = e.as_object_mut() {
                o.remove("ts");
            }
            e
        };
        let a = Ctx::new(1_800_000_000_000_000, &Options::small());
        let b = Ctx::new(1_800_100_000_000_000, &Options::small());
        assert_ne!(a.base, b.base);
        for (pa, pb) in plan(&a).into_iter().zip(plan(&b)) {
            let (mut ea, mut eb) = ((pa.events)().flatten(), (pb.events)().flatten());
            loop {
                let (x, y) = (ea.next().map(strip), eb.next().map(strip));
                assert_eq!(x, y, "{}", pa.run_id);
                if x.is_none() {
                    break;
                }
            }
        }
    }

    #[test]
    fn every_span_falls_inside_its_run_and_before_the_load() {
        let now = 1_800_000_123_000_000;
        let ctx = Ctx::new(now, &Options::full());
        for plan in plan(&ctx) {
            let start = plan.upsert.start_us.expect("start");
            let end = plan.finish.as_ref().and_then(|f| f.end_us).unwrap_or(now);
            assert!(end <= now && start >= ctx.base, "{}", plan.run_id);
            let ts = (plan.events)()
                .flatten()
                .map(|e| e["ts"].as_i64().unwrap_or(-1))
                .chain(plan.metrics.iter().filter_map(|p| p.ts));
            for t in ts {
                assert!(
                    (start..=end).contains(&t),
                    "{}: {t} outside {start}..={end}",
                    plan.run_id
                );
            }
        }
    }

    #[test]
    fn the_big_trace_and_the_wide_node_have_their_sizes() {
        let options = Options {
            big_trace_spans: 3_333,
            wide_children: 1_234,
            batch: 100,
            flat_prompts: 1,
        };
        let grpo: Vec<Value> = events(&options)
            .into_iter()
            .find(|(r, _)| *r == GRPO_RUN)
            .expect("grpo run")
            .1
            .flatten()
            .collect();
        let big = long::big_trace_id();
        let opens = |trace: &str| {
            grpo.iter()
                .filter(|e| e["op"] == "open" && e["trace_id"] == trace)
                .count()
        };
        assert_eq!(opens(&big), 3_333);
        let wide_node = long::wide_node_id();
        let children = grpo
            .iter()
            .filter(|e| e["op"] == "open" && e["parent_span_id"] == wide_node.as_str())
            .count();
        assert_eq!(children, 1_234);
    }
}
