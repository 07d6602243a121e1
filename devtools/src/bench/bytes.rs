//! `treeline bench bytes`: what a stored span costs on disk, indexes included, for
//! two shapes of traffic, each in a fresh database: spans with a dozen attributes
//! and no bodies (as OpenTelemetry sends them), and an agent's model calls, each with
//! the conversation so far as its prompt and a reply. Prints bytes per span in all
//! and by table and index.

use std::time::Instant;

use serde_json::{json, Value};

use super::query::write;
use super::rng::Rng;
use crate::failure::{Context, Failure, Outcome};
use crate::store::{self, Store};

#[derive(clap::Args, Clone, Debug)]
pub struct BytesArgs {
    /// Spans of each shape (traces of a root and 24 children).
    #[arg(long, default_value_t = 100_000)]
    pub spans: usize,
    /// A PostgreSQL server to measure instead of SQLite (a new database is made on
    /// it for each shape).
    #[arg(long)]
    pub database_url: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Attributes,
    Chat,
}

const SPANS_PER_TRACE: usize = 25;

/// A span's dozen attributes, as an instrumented agent sets them.
fn attributes(r: &mut Rng, c: usize) -> Value {
    json!({
        "gen_ai.system": "openai", "gen_ai.request.model": "policy-7b-instruct",
        "gen_ai.request.temperature": 0.7, "gen_ai.request.top_p": 0.95,
        "gen_ai.usage.input_tokens": 200 + r.below(800) as u64, "gen_ai.usage.output_tokens": 20 + r.below(300) as u64,
        "env.name": "gridworld-v2", "env.seed": r.below(1_000_000),
        "agent.turn": c, "service.instance": format!("worker-{}", r.below(64)),
        "retry.count": r.below(3), "cache.hit": r.one_in(4),
    })
}

fn trace(n: usize, shape: Shape, r: &mut Rng) -> Vec<Value> {
    let trace_id = format!("{:016x}{:016x}", r.next_u64(), n);
    let span = |i: usize| format!("{:016x}", (n as u64) << 8 | i as u64);
    let ts = 1_700_000_000_000_000 + n as i64 * 10_000;
    let mut events = vec![
        json!({"op": "open", "trace_id": trace_id, "span_id": span(0),
        "name": "agent.rollout", "kind": "rollout", "ts": ts, "step": n / 100,
        "attributes": attributes(r, 0)}),
    ];
    // An agent's calls: each prompt carries the conversation so far, as chat
    // models are called.
    let mut history = vec![json!({"role": "system", "content":
        "You are a careful agent in a grid world. Think, then give one move: up, down, left or right."})];
    for c in 1..SPANS_PER_TRACE {
        let mut open = json!({"op": "open", "trace_id": trace_id, "span_id": span(c),
            "parent_span_id": span(0), "name": "chat policy-7b", "kind": "model",
            "ts": ts + 10 * c as i64, "attributes": attributes(r, c)});
        let mut close = json!({"op": "close", "trace_id": trace_id, "span_id": span(c),
            "status": "ok", "ts": ts + 10 * c as i64 + 9});
        if shape == Shape::Chat {
            history.push(json!({"role": "user", "content": format!(
                "Turn {c}. You are at ({}, {}); the goal is at ({}, {}). Walls: {}. Last reward: {:.3}. Which move?",
                r.below(20), r.below(20), r.below(20), r.below(20),
                (0..6).map(|_| format!("({}, {})", r.below(20), r.below(20))).collect::<Vec<_>>().join(", "),
                r.unit())}));
            open["input"] = json!({"messages": history});
            let reply = json!({"role": "assistant", "content": format!(
                "The goal is {} cells away and a wall blocks the direct path, so I will go around it. Move: {}.",
                r.below(30), ["up", "down", "left", "right"][r.below(4)])});
            close["output"] = reply.clone();
            history.push(reply);
        }
        events.push(open);
        events.push(close);
    }
    events.push(
        json!({"op": "close", "trace_id": trace_id, "span_id": span(0), "status": "ok",
        "ts": ts + 10 * SPANS_PER_TRACE as i64}),
    );
    events
}

async fn fill(store: &dyn Store, shape: Shape, spans: usize) -> Outcome {
    let run = treeline_wire::RunUpsert {
        project: "bench-bytes".into(),
        ..Default::default()
    };
    store
        .upsert_run("bench-bytes", &run, crate::now_us())
        .await
        .context("cannot create the run")?;
    let traces = spans.div_ceil(SPANS_PER_TRACE);
    let mut r = Rng::new(0xb17e5);
    // Batches of 40 whole traces: each span's open and close in one write, as the
    // SDK's batches mostly carry them.
    for first in (0..traces).step_by(40) {
        let events: Vec<Value> = (first..(first + 40).min(traces))
            .flat_map(|n| trace(n, shape, &mut r))
            .collect();
        write(store, "bench-bytes", &events, crate::now_us()).await?;
    }
    Ok(())
}

pub async fn bytes(args: BytesArgs) -> Outcome {
    if !(SPANS_PER_TRACE..=10_000_000).contains(&args.spans) {
        return Err(Failure::msg(format!(
            "--spans must be between {SPANS_PER_TRACE} and 10000000"
        )));
    }
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let stamp = &treeline_client::new_key()[..8];
    for (shape, label) in [
        (Shape::Attributes, "a dozen attributes, no bodies"),
        (
            Shape::Chat,
            "a dozen attributes, the conversation so far in and a reply out",
        ),
    ] {
        let url = match &args.database_url {
            Some(url) => {
                let name = format!("treeline_bytes_{stamp}_{shape:?}").to_lowercase();
                store::PostgresStore::create_database(url, &name)
                    .await
                    .context("cannot make a database for the bench")?
            }
            None => format!(
                "sqlite:{}",
                dir.path().join(format!("{shape:?}.db")).display()
            ),
        };
        let store = store::open(&url).await.context("cannot open the store")?;
        let started = Instant::now();
        fill(store.as_ref(), shape, args.spans).await?;
        let spans = args.spans.div_ceil(SPANS_PER_TRACE) * SPANS_PER_TRACE;
        let usage = store
            .reads()
            .disk_usage(None, 1)
            .await
            .context("cannot read the database's size")?;
        let per_span = |bytes: i64| bytes as f64 / spans as f64;
        println!(
            "{label}: {spans} spans written in {:.1} s; {} in use = {:.0} bytes a span",
            started.elapsed().as_secs_f64(),
            treeline_wire::human_bytes(usage.used),
            per_span(usage.used)
        );
        let tables = store
            .reads()
            .table_sizes()
            .await
            .context("cannot read the tables' sizes")?;
        for (name, bytes) in tables.iter().filter(|(_, b)| per_span(*b) >= 1.0) {
            println!("  {name:<32} {:>6.0} bytes a span", per_span(*bytes));
        }
    }
    Ok(())
}
