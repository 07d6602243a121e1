//! `treeline bench compare`: what the compare view asks of the server. Two traces
//! whose roots have N children each (model calls with chat bodies and attributes,
//! one in ten answering differently, a few only on one side) are aligned level
//! against level, the same with long chats, and a pair's bodies diffed, through
//! the API router in-process.

use serde_json::{json, Value};

use super::query::{report, write};
use crate::failure::{Context, Outcome};
use crate::Host;

#[derive(clap::Args, Clone, Debug)]
pub struct CompareArgs {
    /// Children under each compared root.
    #[arg(long, default_value_t = 10_000)]
    pub children: usize,
    /// Children under each root of the long-chat pair (16 KB of messages each).
    #[arg(long, default_value_t = 2_000)]
    pub long_children: usize,
    /// Timed requests per case.
    #[arg(long, default_value_t = 20)]
    pub samples: usize,
    /// Use this database instead of a temporary SQLite file (sqlite:… or postgres://…).
    #[arg(long)]
    pub database_url: Option<String>,
}

const RUN: &str = "bench-compare";

/// One side's events: a root and `n` model calls, each message `pad` words longer
/// than a line; side B answers every tenth differently, lacks every hundredth and
/// has one more at the end.
fn side(trace: &str, n: usize, b: bool, pad: usize) -> Vec<Value> {
    let padding = "and so on ".repeat(pad);
    let mut events = vec![
        json!({"op": "open", "trace_id": trace, "span_id": "root", "name": "episode", "kind": "rollout", "ts": 1}),
    ];
    let extra = usize::from(b);
    for i in 0..n + extra {
        if b && i % 100 == 50 {
            continue;
        }
        let id = format!("c{i}");
        let answer = if b && i % 10 == 3 { i + 1 } else { i };
        let messages: Vec<Value> = (0..4)
            .map(|m| json!({"role": if m % 2 == 0 { "user" } else { "assistant" }, "content": format!("turn {m} of call {i}: {padding}what is {i} plus one?")}))
            .collect();
        events.push(
            json!({"op": "open", "trace_id": trace, "span_id": id, "parent_span_id": "root",
            "name": "policy", "kind": "model", "ts": 10 + i as i64, "ordinal": i,
            "attributes": {"model": "policy-7b", "temperature": 1.0, "turn": i},
            "input": {"messages": messages}}),
        );
        events.push(
            json!({"op": "close", "trace_id": trace, "span_id": id, "status": "ok",
            "ts": 500 + i as i64, "token_count": 40,
            "output": {"role": "assistant", "content": format!("The answer is {answer}.")}}),
        );
    }
    events
}

pub async fn compare(host: &dyn Host, args: CompareArgs) -> Outcome {
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let (url, store) = super::run_store(
        args.database_url.clone(),
        dir.path(),
        "compare.db",
        (RUN, "bench-compare"),
    )
    .await?;
    let n = args.children;
    let long = args.long_children;
    // (trace, side B, children, padding words per message: 400 make 4 KB)
    let traces = [
        ("ta", false, n, 0),
        ("tb", true, n, 0),
        ("ga", false, 10, 0),
        ("gb", true, 10, 0),
        ("la", false, long, 400),
        ("lb", true, long, 400),
    ];
    for (trace, b, count, pad) in traces {
        for chunk in side(trace, count, b, pad).chunks(2_000) {
            write(store.as_ref(), RUN, chunk, 1).await?;
        }
    }
    println!(
        "two traces of {n} children each, two of {long} with 16 KB chats, two of 10, on {url}"
    );
    let api = host.api(store);
    let cases = [
        (
            format!("align {n} children against {n}"),
            format!("/runs/{RUN}/align?a=ta:root&b=tb:root"),
        ),
        (
            format!("align {long} 16 KB chats against {long}"),
            format!("/runs/{RUN}/align?a=la:root&b=lb:root"),
        ),
        (
            "align 10 children against 10 (a group's samples)".to_string(),
            format!("/runs/{RUN}/align?a=ga:root&b=gb:root"),
        ),
        (
            "diff a changed pair's bodies (4-message chats)".to_string(),
            format!("/runs/{RUN}/diff?a=ta:c3&b=tb:c3"),
        ),
    ];
    println!("{:<48} {:>9} {:>9}", "request", "p50 ms", "p95 ms");
    for (name, path) in cases {
        report(&api, &name, args.samples.max(5), 1, || path.clone()).await?;
    }
    Ok(())
}
