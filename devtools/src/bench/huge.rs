//! `treeline bench huge-trace`: one trace of a million spans, read as the workspace
//! reads it. Its root holds a node of 100,000 children, 900 agents of 999 tool
//! calls each, and a chain 50 levels deep. Timed through the whole app in-process:
//! pages of the wide node's children (the first, the last reached by cursor, one
//! jumped to near the end, the page around its last child, and those found by a
//! few letters of their name), a page of an agent's, and the server-rendered pages
//! of deep links to the span at the bottom of the chain and to a child 90 % of the
//! way along the wide node.

use serde_json::{json, Value};
use treeline_wire::SpanPage;

use super::query::{get_body, get_json, report, write};
use crate::failure::{Context, Failure, Outcome};
use crate::{store, Host};

#[derive(clap::Args, Clone, Debug)]
pub struct HugeArgs {
    /// Children of the wide node.
    #[arg(long, default_value_t = 100_000)]
    pub wide: usize,
    /// Agents beside it, each with 999 tool calls.
    #[arg(long, default_value_t = 900)]
    pub agents: usize,
    /// Timed requests per case.
    #[arg(long, default_value_t = 50)]
    pub samples: usize,
    /// Use this database instead of a temporary SQLite file (sqlite:… or postgres://…);
    /// a trace already written there is reused.
    #[arg(long)]
    pub database_url: Option<String>,
    /// Write the trace and stop, untimed: for `scripts/browser-bench.sh`, which
    /// serves it to Chromium.
    #[arg(long)]
    pub build_only: bool,
}

const RUN: &str = "bench-huge";
const TRACE: &str = "huge-trace-1m";
/// Levels of the chain under the root; its deepest span is `l{DEPTH}`.
const DEPTH: usize = 50;
const TOOLS_PER_AGENT: usize = 999;

fn open(span: &str, parent: &str, name: String, kind: &str, ts: usize) -> Value {
    json!({"op": "open", "trace_id": TRACE, "span_id": span, "parent_span_id": parent,
           "name": name, "kind": kind, "ts": ts})
}

/// The spans of the trace `args` describe: the root, the wide node and the chain,
/// the wide node's children, and the agents with their tool calls.
fn span_total(args: &HugeArgs) -> usize {
    2 + DEPTH + args.wide + args.agents * (1 + TOOLS_PER_AGENT)
}

/// Writes the trace in batches of about 10,000 spans, saying how far it got.
async fn build(store: &dyn store::Store, args: &HugeArgs) -> Outcome<usize> {
    let now = crate::now_us();
    let mut events = vec![
        json!({"op": "open", "trace_id": TRACE, "span_id": "root", "name": "long agent session", "kind": "session", "ts": 1}),
        open("wide", "root", "fan-out".into(), "agent", 2),
    ];
    let mut parent = "root".to_string();
    for level in 1..=DEPTH {
        let id = format!("l{level}");
        events.push(open(
            &id,
            &parent,
            format!("level {level}"),
            "agent",
            2 + level,
        ));
        parent = id;
    }
    let total = span_total(args);
    let mut written = 0;
    let mut flush = |events: &mut Vec<Value>| {
        let batch = std::mem::take(events);
        written += batch.len();
        eprint!("\rbuilding: {written} of {total} spans   ");
        batch
    };
    for c in 0..args.wide {
        events.push(open(
            &format!("w{c}"),
            "wide",
            format!("call {c}"),
            "tool",
            100 + c,
        ));
        if events.len() >= 10_000 {
            write(store, RUN, &flush(&mut events), now).await?;
        }
    }
    for a in 0..args.agents {
        let agent = format!("a{a}");
        events.push(open(
            &agent,
            "root",
            format!("agent {a}"),
            "agent",
            200_000 + a,
        ));
        for t in 0..TOOLS_PER_AGENT {
            let ts = 300_000 + a * 1_000 + t;
            events.push(open(
                &format!("a{a}t{t}"),
                &agent,
                format!("tool {t}"),
                "tool",
                ts,
            ));
        }
        if events.len() >= 10_000 {
            write(store, RUN, &flush(&mut events), now).await?;
        }
    }
    write(store, RUN, &flush(&mut events), now).await?;
    eprintln!();
    Ok(total)
}

pub async fn huge(host: &dyn Host, args: HugeArgs) -> Outcome {
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let (url, store) = super::run_store(
        args.database_url.clone(),
        dir.path(),
        "huge.db",
        (RUN, "bench-huge"),
    )
    .await?;
    let stored = store
        .reads()
        .get_trace(RUN, TRACE)
        .await
        .context("reading the benchmark store")?
        .map_or(0, |t| t.span_count);
    let want = span_total(&args);
    if stored > 0 && usize::try_from(stored).ok() != Some(want) {
        // Its labels would name a shape the stored trace does not have.
        return Err(Failure::msg(format!(
            "{url} holds a trace of {stored} spans where these options make {want}: \
             give another --database-url, or the options it was written with"
        )));
    }
    if stored > 0 {
        println!("reusing the trace of {stored} spans on {url}");
    } else {
        let started = std::time::Instant::now();
        let total = build(store.as_ref(), &args).await?;
        println!(
            "one trace of {total} spans on {url}, written in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    if args.build_only {
        return Ok(());
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let app = host.app(store, addr);
    let spans = format!("/api/runs/{RUN}/traces/{TRACE}/spans");
    // The wide node's last page, reached by following cursors once.
    let mut last = format!("{spans}?parent_span_id=wide&limit=1000");
    loop {
        let page: SpanPage = get_json(&app, &last).await?;
        match page.next_cursor {
            Some(cursor) => last = format!("{spans}?parent_span_id=wide&limit=200&cursor={cursor}"),
            None => break,
        }
    }
    // Deep links are timed only if their pages show the spans they name.
    let deep = format!("/traces?run_id={RUN}&trace_id={TRACE}&span_id=l{DEPTH}");
    expect_shown(&app, &deep, &format!("level {DEPTH}")).await?;
    let far = args.wide * 9 / 10;
    let into_wide = format!("/traces?run_id={RUN}&trace_id={TRACE}&span_id=w{far}");
    expect_shown(&app, &into_wide, &format!("call {far}")).await?;
    let wide = args.wide;
    let near_end = wide.saturating_sub(200);
    let cases = [
        (
            format!("children, the first 200 of {wide}"),
            format!("{spans}?parent_span_id=wide&limit=200"),
        ),
        (
            format!("children, 200 from place {near_end} (go to #)"),
            format!("{spans}?parent_span_id=wide&limit=200&from={near_end}"),
        ),
        (
            format!("children, 200 around the last of {wide}"),
            format!(
                "{spans}?parent_span_id=wide&limit=200&around=w{}",
                wide.saturating_sub(1)
            ),
        ),
        (
            format!("children named \"call 9999\" (all {wide} read)"),
            format!("{spans}?parent_span_id=wide&limit=200&name=call%209999"),
        ),
        (
            format!("children named \"none\" (no match, all {wide} read)"),
            format!("{spans}?parent_span_id=wide&limit=200&name=none"),
        ),
        (
            format!("children, the last page of {wide} (by cursor)"),
            last,
        ),
        (
            "children, 200 of an agent's 999".to_string(),
            format!("{spans}?parent_span_id=a{}&limit=200", args.agents / 2),
        ),
        ("the top level (the root)".to_string(), spans.clone()),
        (
            format!("a deep link {DEPTH} levels down, server-rendered"),
            deep,
        ),
        (
            format!("a deep link to child {far} of {wide}, server-rendered"),
            into_wide,
        ),
    ];
    println!("{:<48} {:>9} {:>9}", "request", "p50 ms", "p95 ms");
    for (name, path) in cases {
        report(&app, &name, args.samples.max(5), 2, || path.clone()).await?;
    }
    Ok(())
}

/// Fails unless the page at `path` shows `text` as an element's whole text.
async fn expect_shown(app: &axum::Router, path: &str, text: &str) -> Outcome {
    let page = get_body(app, path).await?;
    if String::from_utf8_lossy(&page).contains(&format!(">{text}<")) {
        Ok(())
    } else {
        Err(Failure::msg(format!(
            "{path}: the page does not show {text}"
        )))
    }
}
