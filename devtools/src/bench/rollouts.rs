//! `treeline bench rollouts`: a run's rollouts at once (§8.16–§8.18 of docs/api.md)
//! and span filters, on the traffic a GRPO trainer sends: one run of short traces, one
//! per sample (200 steps × 500 samples by default: 100,000 traces of 4–5 spans). Built
//! once through the real write path (reused afterwards), then timed through the API
//! router in-process: server-side figures, no network.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Value};

use super::query::{get_json, report, write};
use super::rng::Rng;
use crate::failure::{Context, Failure, Outcome};
use crate::{thousands, Host};

#[derive(clap::Args, Clone, Debug)]
pub struct RolloutsArgs {
    /// Where the benchmark store is kept between runs (a run per shape).
    #[arg(long, default_value = "./bench-data")]
    pub data_dir: PathBuf,
    /// Use this database instead (sqlite:… or postgres://…).
    #[arg(long)]
    pub database_url: Option<String>,
    /// Training steps (at least 50).
    #[arg(long, default_value_t = 200)]
    pub steps: usize,
    /// Samples a step, each its own trace, in groups of 8 (a prompt each).
    #[arg(long, default_value_t = 500)]
    pub per_step: usize,
    /// Timed requests per case.
    #[arg(long, default_value_t = 50)]
    pub samples: usize,
    /// Time only the cases whose label contains this (`stats`, `groups`, `span.`).
    #[arg(long)]
    pub only: Option<String>,
}

const PROJECT: &str = "bench-rollouts";
const GROUP: usize = 8;
/// The steps `changes` pins, against as many before them.
const WINDOW: usize = 20;
/// Sixteen: a split into 12 values has an `other`. The first four are the commonest.
const FAMILIES: [&str; 16] = [
    "arithmetic",
    "algebra",
    "geometry",
    "code",
    "probability",
    "logic",
    "sql",
    "regex",
    "physics",
    "chemistry",
    "units",
    "trivia",
    "translation",
    "summary",
    "puzzle",
    "chess",
];

/// The first step of the stretch in which the sandbox times out often, and of the
/// range `changes` pins.
fn stretch(args: &RolloutsArgs) -> usize {
    args.steps * 3 / 5
}

/// The events of sample `i` at `step`: a root (a rollout) over a model call, a search
/// (one sample in three), a python run (a TimeoutError in 1 of 50, 1 of 4 in the
/// stretch) and a judge.
fn sample(args: &RolloutsArgs, step: usize, i: usize, out: &mut Vec<Value>) {
    let n = step * args.per_step + i;
    let trace_id = format!("{n:032x}");
    let prompt = i / GROUP;
    // Every prompt (group) keeps its family and difficulty over the run.
    let family = FAMILIES[if prompt.is_multiple_of(3) {
        prompt % 4
    } else {
        prompt % 16
    }];
    let base = 0.1 + 0.5 * Rng::new(prompt as u64).unit();
    let mut r = Rng::new(0x5eed_0000_0000 ^ n as u64);
    let t0 = step as i64 * 600_000_000 + i as i64 * 10_000;
    let tokens = 60 + r.below(640) as i64;
    let in_stretch = (stretch(args)..stretch(args) + WINDOW).contains(&step);
    let timed_out = r.one_in(if in_stretch { 4 } else { 50 });
    let learned = step as f64 / (step as f64 + 60.0);
    let reward = if timed_out {
        0.0
    } else if r.unit() < (base + 0.6 * learned).min(0.98) {
        1.0
    } else if r.one_in(4) {
        0.5
    } else {
        0.0
    };
    out.push(json!({"op": "open", "trace_id": trace_id, "span_id": "r", "name": "grpo.sample", "kind": "rollout",
        "ts": t0, "step": step, "attributes": {"group_id": format!("s{step:03}-p{prompt:03}"), "task_family": family}}));
    let mut t = t0 + 1_000;
    let mut leaf = |id: &str, name: &str, kind: &str, took: i64, close: Value| {
        out.push(
            json!({"op": "open", "trace_id": trace_id, "span_id": id, "parent_span_id": "r",
            "name": name, "kind": kind, "ts": t}),
        );
        t += took;
        let mut event =
            json!({"op": "close", "trace_id": trace_id, "span_id": id, "ts": t, "status": "ok"});
        if let (Some(e), Value::Object(x)) = (event.as_object_mut(), close) {
            e.extend(x);
        }
        out.push(event);
        t += 5_000;
    };
    leaf(
        "m",
        "policy.generate",
        "model",
        400_000 + tokens * 10_000,
        json!({"token_count": 40 + tokens}),
    );
    if r.one_in(3) {
        leaf(
            "s",
            "tool.search",
            "tool",
            300_000 + r.below(600_000) as i64,
            json!({}),
        );
    }
    let python = if timed_out {
        json!({"status": "error", "error": {"type": "TimeoutError", "message": "sandbox did not finish within 30 s"}})
    } else {
        json!({})
    };
    let took = if timed_out {
        30_000_000
    } else {
        80_000 + r.below(3_000_000) as i64
    };
    leaf("p", "tool.python", "tool", took, python);
    leaf(
        "j",
        "reward.judge",
        "reward",
        45_000 + r.below(150_000) as i64,
        json!({}),
    );
    let status = if timed_out { "error" } else { "ok" };
    out.push(
        json!({"op": "close", "trace_id": trace_id, "span_id": "r", "ts": t, "status": status,
        "attributes": {"reward": reward, "response_tokens": tokens}}),
    );
}

async fn build(store: &dyn crate::store::Store, run: &str, args: &RolloutsArgs) -> Outcome {
    let total = args.steps * args.per_step;
    let now = crate::now_us();
    let started = Instant::now();
    let (mut events, mut spans) = (Vec::new(), 0);
    for step in 0..args.steps {
        for i in 0..args.per_step {
            sample(args, step, i, &mut events);
            let n = step * args.per_step + i + 1;
            if events.len() >= 10_000 || n == total {
                spans += events.len() / 2;
                // Written as a trainer sends it: the latest last, 10 ms apart.
                write(store, run, &events, now - (total - n) as i64 * 10_000).await?;
                events.clear();
                let rate = n as f64 / started.elapsed().as_secs_f64();
                eprint!("\rbuilding: {n} / {total} traces ({rate:.0} traces/s)   ");
            }
        }
    }
    eprintln!();
    println!(
        "built {total} traces and {spans} spans in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub async fn rollouts(host: &dyn Host, args: RolloutsArgs) -> Outcome {
    if args.steps < 50 || args.per_step < GROUP {
        return Err(Failure::msg(format!(
            "--steps must be at least 50 and --per-step at least {GROUP}"
        )));
    }
    let (steps, per_step, total) = (args.steps, args.per_step, args.steps * args.per_step);
    let run = format!("bench-rollouts-{steps}x{per_step}");
    if args.database_url.is_none() {
        std::fs::create_dir_all(&args.data_dir)
            .with_context(|| format!("cannot create data directory {}", args.data_dir.display()))?;
    }
    let (url, store) = super::run_store(
        args.database_url.clone(),
        &args.data_dir,
        "rollouts.db",
        (&run, PROJECT),
    )
    .await?;
    let last = format!("{:032x}", total - 1);
    let built = store
        .reads()
        .get_trace(&run, &last)
        .await
        .context("reading the benchmark store")?
        .is_some_and(|t| t.status != treeline_wire::SpanStatus::Running);
    if built {
        println!("reusing run {run} on {url}");
    } else {
        println!("building run {run} on {url} (once; reused afterwards)");
        build(store.as_ref(), &run, &args).await?;
    }
    let from = stretch(&args);
    let (to, base) = (from + WINDOW - 1, from - WINDOW);
    let rest = match per_step % GROUP {
        0 => String::new(),
        r => format!(", the last of {r}"),
    };
    println!(
        "one GRPO run of {} traces: {steps} steps × {per_step} samples, {} groups of {GROUP} a \
         step{rest}, 16 task families; 4–5 spans a trace (model, search 1 in 3, python, judge); \
         python times out in 1 of 50, 1 of 4 at steps {from}–{to}",
        thousands(total as u64),
        per_step.div_ceil(GROUP)
    );
    let api = host.api(store);
    let runs = format!("/runs/{run}");
    let filter = |f: &str| format!("{runs}/traces?filter={f}&limit=50");
    let across = |f: &str| format!("/traces?project={PROJECT}&filter={f}&limit=50");
    let (all, pinned) = (total as i64, (WINDOW * per_step) as i64);
    // Each case's first answer must have the shape its label names, or its figures
    // would mean nothing.
    type Check = Box<dyn Fn(&Value) -> bool>;
    let mut cases: Vec<(String, String, Check)> = vec![
        (
            format!(
                "stats attr.reward, split 12 + other, all {}",
                thousands(total as u64)
            ),
            format!("{runs}/stats?value=attr.reward&split=attr.task_family"),
            Box::new(move |v| {
                v["traces"] == all
                    && v["series"]
                        .as_array()
                        .and_then(|s| s.last())
                        .is_some_and(|s| s["other"] == true)
            }),
        ),
        (
            format!(
                "stats duration_us, no split, all {}",
                thousands(total as u64)
            ),
            format!("{runs}/stats?value=duration_us"),
            Box::new(move |v| v["traces"] == all),
        ),
        (
            format!("groups by attr.group_id, all {}", thousands(total as u64)),
            format!("{runs}/groups?by=attr.group_id&value=attr.reward"),
            Box::new(|v| {
                v["groups"]
                    .as_array()
                    .is_some_and(|g| g.iter().any(|g| g["size"] == GROUP))
            }),
        ),
        (
            format!(
                "changes {from}–{to} vs {base}–{}, 2 × {}",
                from - 1,
                thousands((WINDOW * per_step) as u64)
            ),
            format!("{runs}/changes?min_step={from}&max_step={to}"),
            Box::new(move |v| {
                let timeouts = v["rows"].as_array().is_some_and(|rows| {
                    rows.iter()
                        .any(|r| r["kind"] == "error_type" && r["subject"] == "TimeoutError")
                });
                v["traces"] == pinned && v["baseline_traces"] == pinned && timeouts
            }),
        ),
        (
            "span.status = error, first page".to_string(),
            filter("span.status%20%3D%20error"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.name matching nothing, first page".to_string(),
            filter("span.name%20%3D%20no.such.span"),
            Box::new(|v| v["traces"].as_array().is_some_and(Vec::is_empty)),
        ),
        // A name a third of the traces have, alone and with another span filter.
        (
            "span.name = tool.search, first page".to_string(),
            filter("span.name%20%3D%20tool.search"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.name = tool.search and span.kind = tool, first page".to_string(),
            filter("span.name%20%3D%20tool.search&filter=span.kind%20%3D%20tool"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.error_type = TimeoutError, first page".to_string(),
            filter("span.error_type%20%3D%20TimeoutError"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        // A span attribute, set on the root span: a common value, then a rare one
        // (one group of 8 samples), each found through the span's attribute codes.
        (
            format!("span.attr.task_family = {}, first page", FAMILIES[0]),
            filter(&format!("span.attr.task_family%20%3D%20{}", FAMILIES[0])),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.attr.group_id = one group of 8, first page".to_string(),
            filter("span.attr.group_id%20%3D%20s010-p000"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == GROUP)),
        ),
        // The same across the project, which probes each trace it walks.
        (
            format!(
                "span.attr.task_family = {}, project-wide first page",
                FAMILIES[0]
            ),
            across(&format!("span.attr.task_family%20%3D%20{}", FAMILIES[0])),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.attr.group_id = one group of 8, project-wide first page".to_string(),
            across("span.attr.group_id%20%3D%20s010-p000"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == GROUP)),
        ),
        // A span number over a bound about one trace in six passes, then one no
        // trace passes, each found through the traces' ranges.
        (
            "span.attr.response_tokens > 600, first page".to_string(),
            filter("span.attr.response_tokens%20%3E%20600"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.attr.response_tokens = 300, first page".to_string(),
            filter("span.attr.response_tokens%20%3D%20300"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.attr.reward < 0 (matching nothing), first page".to_string(),
            filter("span.attr.reward%20%3C%200"),
            Box::new(|v| v["traces"].as_array().is_some_and(Vec::is_empty)),
        ),
        // Unequal to it, among a list, and a name's presence: every trace has a
        // reward, none a `judge_notes`.
        (
            "span.attr.response_tokens != 300, first page".to_string(),
            filter("span.attr.response_tokens%20!%3D%20300"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.attr.response_tokens in (300, 301), first page".to_string(),
            filter("span.attr.response_tokens%20in%20(300%2C%20301)"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        // A string other than the common one, and one ordered before the second
        // step's groups (the first step's 63 groups of 8).
        (
            format!("span.attr.task_family != {}, first page", FAMILIES[0]),
            filter(&format!("span.attr.task_family%20!%3D%20{}", FAMILIES[0])),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.attr.group_id < s001, first page".to_string(),
            filter("span.attr.group_id%20%3C%20s001"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.attr.reward exists, first page".to_string(),
            filter("span.attr.reward%20exists"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.attr.judge_notes exists (no trace), first page".to_string(),
            filter("span.attr.judge_notes%20exists"),
            Box::new(|v| v["traces"].as_array().is_some_and(Vec::is_empty)),
        ),
        (
            "span.attr.response_tokens > 600, project-wide first page".to_string(),
            across("span.attr.response_tokens%20%3E%20600"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
        (
            "span.attr.reward < 0 (matching nothing), project-wide".to_string(),
            across("span.attr.reward%20%3C%200"),
            Box::new(|v| v["traces"].as_array().is_some_and(Vec::is_empty)),
        ),
        (
            "span.attr.reward exists, project-wide first page".to_string(),
            across("span.attr.reward%20exists"),
            Box::new(|v| v["traces"].as_array().is_some_and(|t| t.len() == 50)),
        ),
    ];
    // A sort's first page: 50 traces, in the order asked.
    let sorted = |field: &'static str, descending: bool| -> Check {
        Box::new(move |v: &Value| {
            let values: Vec<i64> = v["traces"]
                .as_array()
                .map(|t| t.iter().filter_map(|t| t[field].as_i64()).collect())
                .unwrap_or_default();
            values.len() == 50
                && values.windows(2).all(|w| {
                    if descending {
                        w[0] >= w[1]
                    } else {
                        w[0] <= w[1]
                    }
                })
        })
    };
    cases.extend([
        (
            format!("sort=tokens, all {}, first page", thousands(total as u64)),
            format!("{runs}/traces?sort=tokens&limit=50"),
            sorted("token_count", true),
        ),
        (
            format!(
                "sort=duration ascending, all {}, first page",
                thousands(total as u64)
            ),
            format!("{runs}/traces?sort=duration&order=asc&limit=50"),
            sorted("duration_us", false),
        ),
        (
            "sort=spans, span.status = error, first page".to_string(),
            format!("{runs}/traces?sort=spans&filter=span.status%20%3D%20error&limit=50"),
            sorted("span_count", true),
        ),
    ]);
    println!("{:<48} {:>9} {:>9}", "query", "p50 ms", "p95 ms");
    let chosen = |name: &str| args.only.as_deref().is_none_or(|o| name.contains(o));
    for (name, path, check) in cases.into_iter().filter(|c| chosen(&c.0)) {
        // A case that fails (a read past the server's timeout) is said, not timed.
        match get_json::<Value>(&api, &path).await {
            Err(e) => println!("{name:<48} failed: {}", e.report()),
            Ok(v) if !check(&v) => {
                let v: String = v.to_string().chars().take(400).collect();
                return Err(Failure::msg(format!(
                    "{path}: an answer of another shape: {v}"
                )));
            }
            Ok(_) => report(&api, &name, args.samples.max(5), 1, || path.clone()).await?,
        }
    }
    Ok(())
}
