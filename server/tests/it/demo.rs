//! The demo loaded through the real HTTP API into a real server on a temporary SQLite
//! file, then read back through the query API as the dashboard would.

use crate::common;

use treeline_client::Client;
use treeline_server::demo::{self, Options};
use treeline_wire::{
    MetricSeries, RunList, RunStatus, SpanDetail, SpanPage, SpanStatus, StepsResponse, TraceList,
    TraceSummary,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_loads_and_its_key_objects_open() {
    let store = common::sqlite().await;
    let (base, server) =
        demo::spawn_api_server(&treeline_server::devtools::Server, store.store.clone())
            .await
            .expect("server");
    let client = Client::new(&base);
    // One prompt a step of the flat GRPO run: its shape is the generator's to test,
    // and 1,600 traces load in a debug build without starving the tests beside it.
    let options = Options {
        flat_prompts: 1,
        ..Options::small()
    };
    let mut calls = 0;
    let summary = demo::load(&client, &options, &mut |sent, total| {
        assert!(sent <= total);
        calls += 1;
    })
    .await
    .expect("demo loads");
    assert!(calls > 2);

    // The five runs, with their statuses.
    let runs: RunList = client.get("/api/runs").await.expect("runs");
    let status = |id: &str| {
        runs.runs
            .iter()
            .find(|r| r.run_id == id)
            .unwrap_or_else(|| panic!("run {id} is missing"))
            .status
    };
    assert_eq!(status(demo::PPO_RUN), RunStatus::Finished);
    assert_eq!(status(demo::GRPO_RUN), RunStatus::Finished);
    assert_eq!(status(demo::GRPO_FLAT_RUN), RunStatus::Finished);
    assert_eq!(status(demo::LIVE_RUN), RunStatus::Running);
    assert_eq!(status(demo::INTERRUPTED_RUN), RunStatus::Failed);
    for loaded in &summary.runs {
        let run = runs
            .runs
            .iter()
            .find(|r| r.run_id == loaded.run_id)
            .expect("run");
        assert_eq!(run.trace_count, loaded.traces as i64, "{}", run.run_id);
        assert_eq!(
            run.error_trace_count, loaded.errored_traces as i64,
            "{}",
            run.run_id
        );
    }

    // The flat GRPO run's reviewed step carries a judge's score on every sample,
    // each on the trace the events wrote.
    let judged: TraceList = client
        .get(&format!(
            "/api/runs/{}/traces?filter=note.quality%20exists&limit=50",
            demo::GRPO_FLAT_RUN
        ))
        .await
        .expect("annotated traces");
    assert_eq!(judged.traces.len(), 8, "one prompt's group of eight");
    for t in &judged.traces {
        assert_eq!(t.step, Some(130), "{}", t.trace_id);
        assert!(
            t.notes.iter().any(|c| c.name == "quality"),
            "{}",
            t.trace_id
        );
    }

    // PPO: a stretch of consecutive errored steps where the episode return dips.
    let steps: StepsResponse = client
        .get(&format!("/api/runs/{}/traces/steps", demo::PPO_RUN))
        .await
        .expect("steps");
    let (from, to) = demo::PPO_INCIDENT;
    let mut longest: (usize, i64, i64) = (0, 0, 0);
    let mut current: Option<(usize, i64)> = None;
    for s in &steps.steps {
        current = match (s.errored > 0, current) {
            (true, Some((n, first))) => Some((n + 1, first)),
            (true, None) => Some((1, s.step)),
            (false, _) => None,
        };
        if let Some((n, first)) = current {
            if n > longest.0 {
                longest = (n, first, s.step);
            }
        }
    }
    assert_eq!(
        (longest.1, longest.2),
        (from, to),
        "errored stretch {longest:?}"
    );
    assert_eq!(
        longest.0 as i64,
        to - from + 1,
        "every step of it is traced"
    );
    let series: MetricSeries = client
        .get(&format!(
            "/api/runs/{}/metrics?key=train/episode_return",
            demo::PPO_RUN
        ))
        .await
        .expect("metrics");
    assert_eq!(series.points.len(), 500);
    let mean = |lo: i64, hi: i64| {
        let v: Vec<f64> = series
            .points
            .iter()
            .filter(|(s, _)| (lo..=hi).contains(s))
            .map(|p| p.1)
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    assert!(mean(from + 5, to) < 0.5 * mean(from - 30, from - 1));

    // The long-horizon trace and the very wide node.
    let (run, trace) = &summary.big_trace;
    let big: TraceSummary = client
        .get(&format!("/api/runs/{run}/traces/{trace}"))
        .await
        .expect("big trace");
    assert_eq!(big.span_count, options.big_trace_spans as i64);
    let (run, trace, node) = &summary.wide_node;
    let wide: SpanDetail = client
        .get(&format!("/api/runs/{run}/traces/{trace}/spans/{node}"))
        .await
        .expect("wide node");
    assert_eq!(wide.node.child_count, options.wide_children as i64);
    assert_eq!(options.wide_children, 10_000);
    let page: SpanPage = client
        .get(&format!(
            "/api/runs/{run}/traces/{trace}/spans?parent_span_id={node}&limit=1000"
        ))
        .await
        .expect("children");
    assert_eq!(page.spans.len(), 1000);
    assert!(page.next_cursor.is_some());

    // A model call of the agent run carries chat messages, and its reply tool calls.
    let groups: TraceList = client
        .get(&format!(
            "/api/runs/{}/traces?kind=model&sort=errors&limit=5",
            demo::GRPO_RUN
        ))
        .await
        .expect("agent traces");
    let group = groups
        .traces
        .iter()
        .find(|t| t.kind.map(|k| k.as_str()) == Some("rollout"))
        .expect("a group trace");
    assert!(group.error_count > 0, "errors deep in the tree: {group:?}");
    assert_eq!(group.status, SpanStatus::Ok);
    assert!(group.token_count > 0);
    assert!(group.attributes.contains_key("reward_mean"));
    let model = find_model(&client, demo::GRPO_RUN, &group.trace_id).await;
    let messages = model.input.as_ref().expect("input")["messages"]
        .as_array()
        .expect("messages")
        .clone();
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(&roles[..2], ["system", "user"]);
    let output = model.output.as_ref().expect("output");
    assert_eq!(output["role"], "assistant");
    assert!(output["tool_calls"].is_array(), "{output}");

    // Open spans: running in the live run, interrupted in the preempted one.
    let live: TraceList = client
        .get(&format!(
            "/api/runs/{}/traces?status=running",
            demo::LIVE_RUN
        ))
        .await
        .expect("live traces");
    assert_eq!(live.traces.len(), 1);
    let interrupted: TraceList = client
        .get(&format!(
            "/api/runs/{}/traces?status=interrupted",
            demo::INTERRUPTED_RUN
        ))
        .await
        .expect("interrupted traces");
    assert_eq!(interrupted.traces.len(), 2);

    server.abort();
}

/// Walks down the first children until a model span, as a person expanding rows would.
async fn find_model(client: &Client, run: &str, trace: &str) -> SpanDetail {
    let mut parent: Option<String> = None;
    for _ in 0..6 {
        let query = parent
            .as_ref()
            .map(|p| format!("?parent_span_id={p}"))
            .unwrap_or_default();
        let page: SpanPage = client
            .get(&format!("/api/runs/{run}/traces/{trace}/spans{query}"))
            .await
            .expect("spans");
        if let Some(model) = page.spans.iter().find(|s| s.kind.as_str() == "model") {
            return client
                .get(&format!(
                    "/api/runs/{run}/traces/{trace}/spans/{}",
                    model.span_id
                ))
                .await
                .expect("model span");
        }
        let next = page
            .spans
            .iter()
            .find(|s| s.child_count > 0)
            .expect("a span with children");
        parent = Some(next.span_id.clone());
    }
    panic!("no model span within six levels");
}
