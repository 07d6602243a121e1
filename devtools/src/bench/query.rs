//! `treeline bench query`: read latency at scale. Builds (once, then reuses) a store of
//! 1,000,000 traces and 10,000,000 spans through the real write path, then times the
//! hot reads through the API router in-process: server-side figures, no network.

use crate::failure::{Context, Failure, Outcome};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;
use treeline_wire::annotations::{Author, NoteValue, NoteWrite, Source};
use treeline_wire::{parse_event, RunUpsert};

use crate::store::{self, Store};
use crate::Host;

#[derive(clap::Args, Clone, Debug)]
pub struct QueryArgs {
    /// Where the benchmark store is kept between runs.
    #[arg(long, default_value = "./bench-data")]
    pub data_dir: PathBuf,
    /// Use this database instead (sqlite:… or postgres://…).
    #[arg(long)]
    pub database_url: Option<String>,
    /// Traces to build (10 spans each, plus the 100,000-span trace).
    #[arg(long, default_value_t = 1_000_000)]
    pub traces: usize,
    /// Timed requests per query.
    #[arg(long, default_value_t = 200)]
    pub samples: usize,
    /// Time only the cases whose label contains this (`note.`, `search`).
    #[arg(long)]
    pub only: Option<String>,
}

const RUNS: usize = 100;
const PROJECT: &str = "bench-query";
const BIG_TRACE: &str = "big-trace-100k";
const KINDS: [&str; 9] = [
    "model",
    "tool",
    "env_step",
    "reward",
    "model",
    "tool",
    "thought",
    "retrieval",
    "env_step",
];

fn run_id(i: usize) -> String {
    format!("bench-q-{i:03}")
}

/// The events of ordinary trace `n`: a root and nine children.
fn trace_events(n: usize, out: &mut Vec<Value>) {
    let trace_id = format!("{n:032x}");
    let ts = 1_000_000 + n as i64 * 1_000;
    let (root_name, root_kind) = if n % 4 == 3 {
        (format!("eval.task{}", n % 97), "evaluator")
    } else {
        (format!("rollout.step{}.g{}", n % 5_000, n % 8), "rollout")
    };
    let step = if n.is_multiple_of(RUNS) {
        (n / RUNS / 2) % 5_000
    } else {
        (n / RUNS) % 5_000
    };
    out.push(json!({"op": "open", "trace_id": trace_id, "span_id": "r", "name": root_name, "kind": root_kind, "ts": ts,
        "step": step, "thread_id": format!("worker-{}", n % 16), "attributes": {"rollout_id": format!("ep-{n}"), "reward": (n % 1_000) as f64 / 1_000.0}}));
    for (c, kind) in KINDS.iter().enumerate() {
        out.push(json!({"op": "open", "trace_id": trace_id, "span_id": format!("c{c}"), "parent_span_id": "r",
            "name": format!("{kind} {c}"), "kind": kind, "ts": ts + 10 + c as i64}));
        let status = if (n + c) % 100 == 7 { "error" } else { "ok" };
        out.push(json!({"op": "close", "trace_id": trace_id, "span_id": format!("c{c}"), "status": status, "ts": ts + 50 + c as i64, "token_count": 12}));
    }
    let status = if n % 33 == 5 { "error" } else { "ok" };
    out.push(json!({"op": "close", "trace_id": trace_id, "span_id": "r", "status": status, "ts": ts + 100}));
}

pub(super) async fn write(store: &dyn Store, run: &str, events: &[Value], now: i64) -> Outcome {
    let parsed = events
        .iter()
        .enumerate()
        .map(|(i, e)| parse_event(e).map(|(ev, _)| (i, ev)))
        .collect::<Result<Vec<_>, _>>()
        .context("a generated event is invalid")?;
    store
        .write_events(run, parsed, now)
        .await
        .map(|_| ())
        .context("writing the benchmark's events")
}

async fn build(store: &dyn Store, traces: usize) -> Outcome {
    let now = crate::now_us();
    for r in 0..RUNS {
        let run = RunUpsert {
            project: PROJECT.into(),
            name: Some(format!("run {r}")),
            ..Default::default()
        };
        store
            .upsert_run(&run_id(r), &run, now)
            .await
            .with_context(|| format!("creating run {}", run_id(r)))?;
    }
    // Traces go round-robin over the runs; run 0 gets two per step over 5,000 steps.
    let per_batch = 500;
    let started = Instant::now();
    let mut by_run: Vec<Vec<Value>> = vec![Vec::new(); RUNS];
    let span = Duration::from_secs(3 * 24 * 3600).as_micros() as i64;
    for n in 0..traces {
        let r = n % RUNS;
        trace_events(n, &mut by_run[r]);
        if by_run[r].len() >= per_batch * 20 {
            let at = now - span + (n as i64 * span / traces as i64);
            write(store, &run_id(r), &by_run[r], at).await?;
            by_run[r].clear();
        }
        if n % 20_000 == 0 && n > 0 {
            let rate = n as f64 / started.elapsed().as_secs_f64();
            eprint!(
                "\rbuilding: {n} / {traces} traces ({rate:.0} traces/s, ~{:.0} s left)   ",
                (traces - n) as f64 / rate
            );
        }
    }
    for (r, events) in by_run.iter().enumerate() {
        if !events.is_empty() {
            write(store, &run_id(r), events, now).await?;
        }
    }
    // The 100,000-span trace: a root, 1,000 agents, 99 tool calls under each.
    let run = run_id(1);
    let mut events = vec![
        json!({"op": "open", "trace_id": BIG_TRACE, "span_id": "root", "name": "long agent session", "kind": "session", "ts": 1}),
    ];
    for a in 0..1_000 {
        events.push(json!({"op": "open", "trace_id": BIG_TRACE, "span_id": format!("a{a}"), "parent_span_id": "root", "name": format!("agent {a}"), "kind": "agent", "ts": 10 + a}));
        for t in 0..99 {
            events.push(json!({"op": "open", "trace_id": BIG_TRACE, "span_id": format!("a{a}t{t}"), "parent_span_id": format!("a{a}"), "name": format!("tool {t}"), "kind": "tool", "ts": 100_000 + a * 100 + t}));
        }
        if events.len() >= 9_000 {
            write(store, &run, &events, now).await?;
            events.clear();
        }
    }
    write(store, &run, &events, now).await?;
    eprintln!(
        "\rbuilt {traces} traces and {} spans in {:.0} s                    ",
        traces * 10 + 100_000,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The labels of the annotated traces, a quarter each.
const LABELS: [&str; 4] = ["reward hacking", "fine", "needs review", "tool misuse"];

/// Annotates one trace in ten of each run (100,000 of a million), on the trace
/// itself: a `label` and a `score`, as a review would leave them. Once; reused after.
async fn annotate(store: &dyn Store, traces: usize) -> Outcome {
    let author = Author {
        key_id: "bench".into(),
        name: "bench".into(),
    };
    let now = crate::now_us();
    let started = Instant::now();
    let per_run = traces / RUNS;
    let total = RUNS * per_run.div_ceil(10);
    let mut done = 0usize;
    for i in (0..per_run).step_by(10) {
        for r in 0..RUNS {
            let n = r + RUNS * i;
            let trace = format!("{n:032x}");
            for (name, value) in [
                ("label", NoteValue::Text(LABELS[(n / RUNS / 10) % 4].into())),
                ("score", NoteValue::Number((n % 5) as f64)),
            ] {
                let note = NoteWrite {
                    span_id: None,
                    name: name.into(),
                    value,
                    comment: None,
                };
                store
                    .annotate(&run_id(r), &trace, &note, &author, Source::Code, now)
                    .await
                    .with_context(|| format!("annotating trace {trace}"))?;
            }
            done += 1;
            if done.is_multiple_of(5_000) {
                let rate = done as f64 / started.elapsed().as_secs_f64();
                eprint!(
                    "\rannotating: {done} / {total} traces ({rate:.0}/s, ~{:.0} s left)   ",
                    (total - done) as f64 / rate
                );
            }
        }
    }
    eprintln!(
        "\rannotated {done} traces in {:.0} s                              ",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The body of the answer to `GET path`; an answer other than a success is an error
/// that quotes it.
pub(super) async fn get_body(api: &Router, path: &str) -> Outcome<bytes::Bytes> {
    let request = Request::get(path)
        .body(Body::empty())
        .with_context(|| format!("building GET {path}"))?;
    let response = api
        .clone()
        .oneshot(request)
        .await
        .with_context(|| format!("GET {path}"))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .with_context(|| format!("reading the answer to GET {path}"))?
        .to_bytes();
    if !status.is_success() {
        return Err(Failure::msg(format!(
            "{path}: {status}: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    Ok(body)
}

/// The JSON answer to `GET path`.
pub(super) async fn get_json<T: serde::de::DeserializeOwned>(
    api: &Router,
    path: &str,
) -> Outcome<T> {
    let body = get_body(api, path).await?;
    serde_json::from_slice(&body).with_context(|| format!("the answer to GET {path}"))
}

/// How long `GET path` takes, its whole body read.
async fn time_get(api: &Router, path: &str) -> Outcome<Duration> {
    let started = Instant::now();
    get_body(api, path).await?;
    Ok(started.elapsed())
}

/// A quantile in milliseconds.
fn pct(sorted: &[Duration], p: f64) -> f64 {
    super::percentile(sorted, p).as_secs_f64() * 1e3
}

pub async fn query(host: &dyn Host, args: QueryArgs) -> Outcome {
    let url = match &args.database_url {
        Some(u) => u.clone(),
        None => {
            std::fs::create_dir_all(&args.data_dir).with_context(|| {
                format!("cannot create data directory {}", args.data_dir.display())
            })?;
            format!("sqlite:{}", args.data_dir.join("query.db").display())
        }
    };
    let store = store::open(&url)
        .await
        .with_context(|| format!("cannot open {url}"))?;
    let have = store
        .reads()
        .get_run(&run_id(1))
        .await
        .context("reading the benchmark store")?;
    let built = store
        .reads()
        .get_trace(&run_id(1), BIG_TRACE)
        .await
        .context("reading the benchmark store")?
        .is_some();
    if have.is_none() || !built {
        println!("building the benchmark store at {url} (once; reused afterwards)");
        build(store.as_ref(), args.traces).await?;
    } else {
        println!("reusing the benchmark store at {url}");
    }
    let annotated = !store
        .reads()
        .attribute_keys(&run_id(1))
        .await
        .context("reading the benchmark store")?
        .notes
        .is_empty();
    if !annotated {
        let per_run = store
            .reads()
            .steps(&run_id(0), None, None)
            .await
            .context("reading the benchmark store")?
            .totals
            .traces;
        annotate(store.as_ref(), usize::try_from(per_run).unwrap_or(0) * RUNS).await?;
    }
    let api = host.api(store);
    let samples = args.samples.max(10);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // Trace n is in run n % RUNS, its rollout id `ep-{n}`: one trace's, picked at random.
    let per_run = (args.traces / RUNS).max(1) as u64;
    let one_rollout =
        move |run: u64, pick: u64| format!("ep-{}", run + RUNS as u64 * (pick % per_run));
    type Case = (&'static str, Box<dyn FnMut() -> String>);
    let cases: Vec<Case> = vec![
        (
            "run-scoped list, status=error + kind=tool",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?status=error&kind=tool&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            "project search, 2 terms",
            Box::new(move || {
                format!(
                    "/traces?project={PROJECT}&q=rollout+step{}&limit=50",
                    next() % 500
                )
            }),
        ),
        (
            "children of a span in the 100,000-span trace",
            Box::new(move || {
                let parent = if next() % 2 == 0 {
                    "root".to_string()
                } else {
                    format!("a{}", next() % 1_000)
                };
                format!(
                    "/runs/{}/traces/{BIG_TRACE}/spans?parent_span_id={parent}&limit=200",
                    run_id(1)
                )
            }),
        ),
        (
            "run-scoped, filter attr.reward < 0.1",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?filter=attr.reward%20%3C%200.1&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            // About 9% of traces hold a failed span: the page fills early.
            "run-scoped, span.status = error",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?filter=span.status%20%3D%20error&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            // Both on one span, 1% of traces: most of a run is read to fill a page.
            "run-scoped, span.name = \"tool 1\" and failed",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?filter=span.name%20%3D%20%22tool%201%22&filter=span.status%20%3D%20error&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            // The worst case: no span matches, so every trace of the run is read.
            "run-scoped, span.name matching nothing",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?filter=span.name%20%3D%20absent&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            // 1% of the million: looked up through the spans' name index first.
            "project-wide, span.name = \"tool 1\" and failed",
            Box::new(|| {
                format!(
                    "/traces?project={PROJECT}&filter=span.name%20%3D%20%22tool%201%22&filter=span.status%20%3D%20error&limit=50"
                )
            }),
        ),
        (
            // A name 2,577 spans have, of which 78 failed: too many by name to list,
            // and 1 failed trace in 1,500 to walk.
            "project-wide, span.name = \"eval.task5\" and failed (rare)",
            Box::new(|| {
                format!(
                    "/traces?project={PROJECT}&filter=span.name%20%3D%20eval.task5&filter=span.status%20%3D%20error&limit=50"
                )
            }),
        ),
        (
            // Before the lookup, every trace of the project read.
            "project-wide, span.name matching nothing (worst case)",
            Box::new(|| {
                format!("/traces?project={PROJECT}&filter=span.name%20%3D%20absent&limit=50")
            }),
        ),
        (
            "run-scoped, sort by attr.reward",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?sort=attr.reward&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            "run-scoped, failed beneath, sort by tokens",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?filter=error_count%20%3E%200&sort=tokens&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            // A quarter of the annotated tenth: 2.5% of a run's traces.
            "run-scoped, note.label = \"reward hacking\"",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?filter=note.label%20%3D%20%22reward%20hacking%22&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            "run-scoped, note.score >= 3 and note.label exists",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?filter=note.score%20%3E%3D%203&filter=note.label%20exists&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            // The worst case: no trace matches, so each of the run's is probed.
            "run-scoped, note.label matching nothing",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?filter=note.label%20%3D%20absent&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            "run-scoped, sort=note.score",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?sort=note.score&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            // Every annotated trace of the project (100,000 of a million) is ranked.
            "project-wide, sort=note.score (worst case)",
            Box::new(|| format!("/traces?project={PROJECT}&sort=note.score&limit=50")),
        ),
        (
            "project-wide, note.label = \"reward hacking\"",
            Box::new(|| {
                format!("/traces?project={PROJECT}&filter=note.label%20%3D%20%22reward%20hacking%22&limit=50")
            }),
        ),
        (
            "project-wide, note.label matching nothing (worst case)",
            Box::new(|| {
                format!("/traces?project={PROJECT}&filter=note.label%20%3D%20absent&limit=50")
            }),
        ),
        (
            // A string one trace of the run has: found through trace_texts' index.
            "run-scoped, attr.rollout_id = one trace's (rare string)",
            Box::new(move || {
                let run = next() % RUNS as u64;
                format!(
                    "/runs/{}/traces?filter=attr.rollout_id%20%3D%20%22{}%22&limit=50",
                    run_id(run as usize),
                    one_rollout(run, next())
                )
            }),
        ),
        (
            // A number 1 trace in 1,000 has: 10 a run.
            "run-scoped, attr.reward = 0.5 (rare number)",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?filter=attr.reward%20%3D%200.5&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            "project-wide, attr.rollout_id = one trace's (rare string)",
            Box::new(move || {
                let run = next() % RUNS as u64;
                format!(
                    "/traces?project={PROJECT}&filter=attr.rollout_id%20%3D%20%22{}%22&limit=50",
                    one_rollout(run, next())
                )
            }),
        ),
        (
            // 1,000 traces of the million.
            "project-wide, attr.reward = 0.5 (rare number)",
            Box::new(|| {
                format!("/traces?project={PROJECT}&filter=attr.reward%20%3D%200.5&limit=50")
            }),
        ),
        (
            // The worst case before the lookup: every trace of the project tested.
            "project-wide, attr.rollout_id matching nothing (worst case)",
            Box::new(|| {
                format!("/traces?project={PROJECT}&filter=attr.rollout_id%20%3D%20nobody&limit=50")
            }),
        ),
        (
            "project-wide, filter attr.reward < 0.1",
            Box::new(|| {
                format!("/traces?project={PROJECT}&filter=attr.reward%20%3C%200.1&limit=50")
            }),
        ),
        (
            "project-wide, sort by attr.reward",
            Box::new(|| format!("/traces?project={PROJECT}&sort=attr.reward&limit=50")),
        ),
        (
            "project-wide, sort by attr.reward ascending",
            Box::new(|| format!("/traces?project={PROJECT}&sort=attr.reward&order=asc&limit=50")),
        ),
        (
            "run-scoped, sort by an attribute none has",
            Box::new(move || {
                format!(
                    "/runs/{}/traces?sort=attr.score&limit=50",
                    run_id((next() % RUNS as u64) as usize)
                )
            }),
        ),
        (
            "project-wide, sort by an attribute none has (worst case)",
            Box::new(|| format!("/traces?project={PROJECT}&sort=attr.score&limit=50")),
        ),
        (
            "project search matching nothing (worst case)",
            Box::new(|| format!("/traces?project={PROJECT}&q=no-such-name&limit=50")),
        ),
        (
            "project search for one rollout id",
            Box::new(move || {
                // Six digits: exactly one trace of the million starts with it.
                format!(
                    "/traces?project={PROJECT}&q=ep-{}&limit=50",
                    next() % 900_000 + 100_000
                )
            }),
        ),
        (
            "project search, a term 3 in 4 traces match",
            Box::new(|| format!("/traces?project={PROJECT}&q=rollout&limit=50")),
        ),
        (
            "per-step activity, 5,000 steps (first 2,000)",
            Box::new(|| format!("/runs/{}/traces/steps", run_id(0))),
        ),
        (
            "per-step activity, 500 of 5,000 steps",
            Box::new(move || {
                let from = next() % 4_500;
                format!(
                    "/runs/{}/traces/steps?min_step={from}&max_step={}",
                    run_id(0),
                    from + 499
                )
            }),
        ),
    ];
    println!("{:<48} {:>9} {:>9}", "query", "p50 ms", "p95 ms");
    for (name, path) in cases {
        if args.only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        report(&api, name, samples, 5, path).await?;
    }
    Ok(())
}

/// Times `samples` GETs of the paths `path` gives (after `warm` untimed ones) and
/// prints their p50 and p95 on one line named `name`.
pub(super) async fn report(
    api: &Router,
    name: &str,
    samples: usize,
    warm: usize,
    mut path: impl FnMut() -> String,
) -> Outcome {
    for _ in 0..warm {
        time_get(api, &path()).await?; // warm the caches
    }
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        times.push(time_get(api, &path()).await?);
    }
    times.sort();
    println!(
        "{name:<48} {:>9.2} {:>9.2}",
        pct(&times, 0.50),
        pct(&times, 0.95)
    );
    Ok(())
}
