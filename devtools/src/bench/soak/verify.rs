//! After a soak: every trace and metric point the writers saw acknowledged is read
//! back and compared with what was sent. A missing trace was lost; a trace whose
//! span, error or token count differs lost spans or counted a replayed batch twice.

use std::collections::{BTreeMap, HashMap};

use treeline_wire::routes::{self, path};
use treeline_wire::{MetricSeries, SessionInfo, TraceList, TraceSummary};

use super::deliver::Tally;
use super::writer::Expected;
use crate::failure::{Context, Failure, Outcome};

/// Waits, at most a minute, until the replica that the server at `base` reads has
/// replayed everything it received, so the traces read back are those acknowledged
/// by the primary. Answers how long that took and the lag first seen (ms).
pub(crate) async fn replica_caught_up(
    http: &reqwest::Client,
    base: &str,
) -> Outcome<(std::time::Duration, i64)> {
    use std::time::{Duration, Instant};
    let url = format!("{base}{}", path(routes::SESSION, &[]));
    let started = Instant::now();
    // Time for the last commits to reach the replica's receiver, which the lag
    // (replay against what was received) does not see.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut first = None;
    loop {
        let session: SessionInfo = get(http, &url).await?;
        let lag = session.replica_lag_ms.unwrap_or(0);
        let first = *first.get_or_insert(lag);
        if lag == 0 {
            return Ok((started.elapsed(), first));
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err(Failure::msg(format!(
                "the replica was still {lag} ms behind a minute after the writes stopped"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[derive(Default)]
pub(crate) struct Verdict {
    pub(crate) traces: usize,
    pub(crate) lost: usize,
    pub(crate) wrong: usize,
    pub(crate) unexpected: usize,
    pub(crate) points: usize,
    pub(crate) points_wrong: usize,
    pub(crate) problems: Tally,
}

pub(crate) async fn get<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Outcome<T> {
    http.get(url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .with_context(|| format!("cannot read {url}"))?
        .json()
        .await
        .with_context(|| format!("cannot decode {url}"))
}

/// Every trace of `run`, paging through the list.
pub(crate) async fn traces_of(
    http: &reqwest::Client,
    base: &str,
    run: &str,
) -> Outcome<HashMap<String, TraceSummary>> {
    let mut out = HashMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base}{}?limit=500", path(routes::RUN_TRACES, &[run]));
        if let Some(c) = &cursor {
            url.push_str("&cursor=");
            url.push_str(&routes::encode(c));
        }
        let page: TraceList = get(http, &url).await?;
        for trace in page.traces {
            out.insert(trace.trace_id.clone(), trace);
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(out),
        }
    }
}

pub(crate) async fn verify(
    http: &reqwest::Client,
    base: &str,
    runs: &[String],
    expected: &[Expected],
    metrics: &[(String, String, BTreeMap<i64, f64>)],
) -> Outcome<Verdict> {
    let mut verdict = Verdict {
        traces: expected.len(),
        ..Default::default()
    };
    let mut by_run: HashMap<&str, Vec<&Expected>> = HashMap::new();
    for e in expected {
        by_run.entry(e.run.as_str()).or_default().push(e);
    }
    for run in runs {
        let mut stored = traces_of(http, base, run).await?;
        for e in by_run.get(run.as_str()).into_iter().flatten() {
            match stored.remove(&e.trace) {
                None => {
                    verdict.lost += 1;
                    verdict.problems.note(format!("{run}/{}: lost", e.trace));
                }
                Some(s)
                    if (s.span_count, s.error_count, s.token_count)
                        != (e.spans, e.errors, e.tokens) =>
                {
                    verdict.wrong += 1;
                    verdict.problems.note(format!(
                        "{run}/{}: sent (spans, errors, tokens) = ({}, {}, {}), stored ({}, {}, {})",
                        e.trace, e.spans, e.errors, e.tokens, s.span_count, s.error_count, s.token_count
                    ));
                }
                Some(_) => {}
            }
        }
        // Writers finish every trace they begin, so any other stored trace was
        // never acknowledged whole (its writer stopped on a refused batch).
        verdict.unexpected += stored.len();
        if let Some(id) = stored.keys().next() {
            verdict
                .problems
                .note(format!("{run}/{id}: stored but never acknowledged whole"));
        }
    }
    for (run, key, points) in metrics {
        let url = format!(
            "{base}{}?key={}&max_points=100000",
            path(routes::RUN_METRICS, &[run]),
            routes::encode(key)
        );
        let series: MetricSeries = get(http, &url).await?;
        verdict.points += points.len();
        let stored: BTreeMap<i64, f64> = series.points.iter().map(|p| (p.0, p.1)).collect();
        let same = stored.len() == points.len()
            && points
                .iter()
                .all(|(step, v)| stored.get(step).is_some_and(|s| (s - v).abs() < 1e-9));
        if !same {
            verdict.points_wrong += 1;
            verdict.problems.note(format!(
                "{run} {key}: {} points acknowledged, {} stored or with other values",
                points.len(),
                stored.len()
            ));
        }
    }
    Ok(verdict)
}
