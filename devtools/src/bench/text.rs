//! `treeline bench text`: body search (`text=`) latency at scale. Builds (once, then
//! reuses) a store of agent rollouts with chat-sized bodies through the real write
//! path, printing the ingest rate with the index kept, then times first pages of
//! body searches through the API router in-process, within a run and across the
//! project, from the rarest word to one most traces hold and phrases none holds.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Value};

use super::query::{report, write};
use super::rng::Rng;
use crate::failure::{Context, Outcome};
use crate::store::{self, Store};
use crate::Host;

#[derive(clap::Args, Clone, Debug)]
pub struct TextArgs {
    /// Where the benchmark store is kept between runs.
    #[arg(long, default_value = "./bench-data")]
    pub data_dir: PathBuf,
    /// Use this database instead (sqlite:… or postgres://…).
    #[arg(long)]
    pub database_url: Option<String>,
    /// Traces to build, over 10 runs (3 spans and about 110 words of bodies each).
    #[arg(long, default_value_t = 1_000_000)]
    pub traces: usize,
    /// Timed requests per query.
    #[arg(long, default_value_t = 100)]
    pub samples: usize,
    /// Time only the cases whose label contains this.
    #[arg(long)]
    pub only: Option<String>,
}

const RUNS: usize = 10;
const PROJECT: &str = "bench-text";
/// The words of the generated text, most common first.
const VOCABULARY: usize = 5_000;
const SYLLABLES: [&str; 16] = [
    "ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pe", "da", "gu", "ri", "so", "ba", "ze", "fo",
];

fn run_id(i: usize) -> String {
    format!("bench-text-{i:02}")
}

/// Word `i` of the vocabulary: two to four syllables.
fn word(i: usize) -> String {
    let mut out = String::new();
    let mut n = i + 16;
    while n > 0 {
        out.push_str(SYLLABLES[n % 16]);
        n /= 16;
    }
    out
}

/// `count` words, skewed so the first of the vocabulary are by far the most said
/// (about as in prose: a handful of words fill much of any text).
fn prose(r: &mut Rng, words: &[String], count: usize) -> String {
    (0..count)
        .map(|_| {
            let u = r.unit();
            words[((u * u * u) * words.len() as f64) as usize % words.len()].as_str()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The events of trace `n`: a rollout over a policy call (a chat prompt in, an
/// answer out) and a tool call (its output, or a Python traceback in 1 of 200).
/// One answer in 50 refuses ("I cannot …"); each tool output cites `ref{n}`, a word
/// of its trace alone.
fn trace_events(n: usize, words: &[String], out: &mut Vec<Value>) {
    let mut r = Rng::new(0x7e47_0000 ^ n as u64);
    let trace_id = format!("{n:032x}");
    let ts = 1_000_000 + n as i64 * 1_000;
    let prompt = json!({"messages": [
        {"role": "system", "content": "You are a careful agent. Use the tools."},
        {"role": "user", "content": format!("Task {n}: {}", prose(&mut r, words, 25))},
    ]});
    let said = prose(&mut r, words, 40);
    // Drawn, not by `n`: trace n is in run n % 10, and every run holds its share.
    let (refuses, fails) = (r.one_in(50), r.one_in(200));
    let answer = if refuses {
        format!("I cannot finish this: {said}")
    } else {
        said
    };
    let tool_out = format!("ref{n} {}", prose(&mut r, words, 30));
    out.push(json!({"op": "open", "trace_id": trace_id, "span_id": "r", "name": "agent.rollout", "kind": "rollout", "ts": ts, "step": n / 1_000}));
    out.push(json!({"op": "open", "trace_id": trace_id, "span_id": "p", "parent_span_id": "r", "name": "policy", "kind": "model", "ts": ts + 1, "input": prompt}));
    out.push(json!({"op": "close", "trace_id": trace_id, "span_id": "p", "status": "ok", "ts": ts + 40, "output": {"role": "assistant", "content": answer}}));
    out.push(json!({"op": "open", "trace_id": trace_id, "span_id": "t", "parent_span_id": "r", "name": "python", "kind": "tool", "ts": ts + 41, "input": {"code": "run()"}}));
    let failed = fails;
    out.push(if failed {
        json!({"op": "close", "trace_id": trace_id, "span_id": "t", "status": "error", "ts": ts + 90,
            "error": {"type": "TimeoutError", "message": format!("Traceback (most recent call last): File sandbox.py line {} TimeoutError: sandbox timed out", n % 300)}})
    } else {
        json!({"op": "close", "trace_id": trace_id, "span_id": "t", "status": "ok", "ts": ts + 90, "output": tool_out})
    });
    out.push(json!({"op": "close", "trace_id": trace_id, "span_id": "r", "status": if failed { "error" } else { "ok" }, "ts": ts + 100}));
}

async fn build(store: &dyn Store, traces: usize) -> Outcome {
    let now = crate::now_us();
    for r in 0..RUNS {
        let run = treeline_wire::RunUpsert {
            project: PROJECT.into(),
            name: Some(format!("text run {r}")),
            ..Default::default()
        };
        store
            .upsert_run(&run_id(r), &run, now)
            .await
            .with_context(|| format!("creating run {}", run_id(r)))?;
    }
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    let started = Instant::now();
    let mut by_run: Vec<Vec<Value>> = vec![Vec::new(); RUNS];
    let (mut events, mut spent_writing) = (0usize, 0.0f64);
    for n in 0..traces {
        let r = n % RUNS;
        trace_events(n, &words, &mut by_run[r]);
        if by_run[r].len() >= 6_000 {
            events += by_run[r].len();
            let t = Instant::now();
            write(store, &run_id(r), &by_run[r], now).await?;
            spent_writing += t.elapsed().as_secs_f64();
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
    for (r, batch) in by_run.iter().enumerate() {
        if !batch.is_empty() {
            events += batch.len();
            let t = Instant::now();
            write(store, &run_id(r), batch, now).await?;
            spent_writing += t.elapsed().as_secs_f64();
        }
    }
    eprintln!(
        "\rbuilt {traces} traces ({} spans) in {:.0} s                    ",
        traces * 3,
        started.elapsed().as_secs_f64()
    );
    println!(
        "ingest with bodies indexed: {:.0} events/s ({:.0} spans/s) in the store's writes, batches of 6,000 events",
        events as f64 / spent_writing,
        (traces * 3) as f64 / spent_writing
    );
    Ok(())
}

pub async fn text(host: &dyn Host, args: TextArgs) -> Outcome {
    let url = match &args.database_url {
        Some(u) => u.clone(),
        None => {
            std::fs::create_dir_all(&args.data_dir).with_context(|| {
                format!("cannot create data directory {}", args.data_dir.display())
            })?;
            format!("sqlite:{}", args.data_dir.join("text.db").display())
        }
    };
    let store = store::open(&url)
        .await
        .with_context(|| format!("cannot open {url}"))?;
    let last = args.traces.saturating_sub(1);
    let built = store
        .reads()
        .get_trace(&run_id(last % RUNS), &format!("{last:032x}"))
        .await
        .context("reading the benchmark store")?
        .is_some();
    if built {
        println!("reusing the benchmark store at {url}");
    } else {
        println!(
            "building the benchmark store at {url} (once; reused afterwards): {} traces",
            args.traces
        );
        build(store.as_ref(), args.traces).await?;
    }
    let api = host.api(store);
    let per_run = (args.traces / RUNS).max(1);
    let mut r = Rng::new(0x5eed);
    let mut pick = move || r.below(per_run * RUNS);
    let mut r2 = Rng::new(0x5eee);
    let mut a_run = move || run_id(r2.below(RUNS));
    let common = word(0);
    let run_cases: Vec<(&str, String)> = vec![
        ("a word most traces hold", common.clone()),
        ("\"I cannot\" (1 trace in 50)", "%22I+cannot%22".into()),
        ("traceback (1 in 200)", "traceback".into()),
        (
            "\"cannot I\": both words, never so (worst)",
            "%22cannot+I%22".into(),
        ),
        ("a word no body holds", "xylophone".into()),
    ];
    println!(
        "{} traces of chat-sized bodies over {RUNS} runs; first pages of 50",
        args.traces
    );
    println!("{:<48} {:>9} {:>9}", "query", "p50 ms", "p95 ms");
    let samples = args.samples.max(10);
    let wanted = |name: &str| args.only.as_deref().is_none_or(|o| name.contains(o));
    let name = "run-scoped, ref{n}: a word of one trace";
    if wanted(name) {
        report(&api, name, samples, 5, || {
            let n = pick();
            format!("/runs/{}/traces?text=ref{n}&limit=50", run_id(n % RUNS))
        })
        .await?;
    }
    for (label, text) in &run_cases {
        let name = format!("run-scoped, {label}");
        if wanted(&name) {
            report(&api, &name, samples, 5, || {
                format!("/runs/{}/traces?text={text}&limit=50", a_run())
            })
            .await?;
        }
    }
    let name = "run-scoped, traceback + status=error, by duration";
    if wanted(name) {
        report(&api, name, samples, 5, || {
            format!(
                "/runs/{}/traces?text=traceback&status=error&sort=duration&limit=50",
                a_run()
            )
        })
        .await?;
    }
    let name = "project-wide, ref{n}: a word of one trace";
    if wanted(name) {
        report(&api, name, samples, 5, || {
            format!("/traces?project={PROJECT}&text=ref{}&limit=50", pick())
        })
        .await?;
    }
    for (label, text) in &run_cases {
        let name = format!("project-wide, {label}");
        if wanted(&name) {
            report(&api, &name, samples, 5, || {
                format!("/traces?project={PROJECT}&text={text}&limit=50")
            })
            .await?;
        }
    }
    Ok(())
}
