//! A soak reader: what a dashboard asks for while training writes (run list, trace
//! lists, step activity, a trace and its first level), and a check that each trace
//! the writers saw acknowledged reads back whole from any server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use treeline_wire::routes::{self, path};
use treeline_wire::{SpanPage, TraceSummary};

use super::deliver::Tally;
use super::writer::Expected;
use crate::bench::rng::Rng;

/// What a dashboard reader asks for, timed apart so that a slow read is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Read {
    Runs,
    TracesByTime,
    TracesByTokens,
    StepActivity,
    Trace,
    Children,
}

impl Read {
    pub(crate) const ALL: [Read; 6] = [
        Read::Runs,
        Read::TracesByTime,
        Read::TracesByTokens,
        Read::StepActivity,
        Read::Trace,
        Read::Children,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Read::Runs => "run list",
            Read::TracesByTime => "trace list, newest first",
            Read::TracesByTokens => "trace list by tokens",
            Read::StepActivity => "step activity",
            Read::Trace => "one trace's summary",
            Read::Children => "a trace's first level",
        }
    }
}

#[derive(Default)]
pub(crate) struct ReaderReport {
    pub(crate) latencies: Vec<(Read, Duration)>,
    pub(crate) tally: Tally,
    /// Acknowledged traces read back, and those that did not match what was sent.
    pub(crate) checked: u64,
    pub(crate) inconsistent: u64,
}

/// GETs `url`; the body on success, None (counted) otherwise.
async fn get(
    http: &reqwest::Client,
    read: Read,
    url: &str,
    report: &mut ReaderReport,
) -> Option<Vec<u8>> {
    let started = Instant::now();
    match http.get(url).send().await {
        Err(_) => {
            report.tally.unreachable += 1;
            None
        }
        Ok(response) if response.status().is_success() => {
            let body = response.bytes().await.ok()?;
            report.latencies.push((read, started.elapsed()));
            Some(body.to_vec())
        }
        Ok(response) => {
            let status = response.status();
            if status == reqwest::StatusCode::SERVICE_UNAVAILABLE {
                report.tally.shed += 1;
            } else if status.is_server_error() {
                report.tally.server_errors += 1;
            } else {
                report.tally.refused += 1;
            }
            let text = response.text().await.unwrap_or_default();
            report.tally.note(format!("GET {url}: {status}: {text}"));
            None
        }
    }
}

pub(crate) async fn read(
    index: usize,
    bases: Vec<String>,
    runs: Vec<String>,
    http: reqwest::Client,
    stop: Arc<AtomicBool>,
    done: Arc<Mutex<Vec<Expected>>>,
) -> ReaderReport {
    let mut rng = Rng::new(0x4ead ^ index as u64);
    let mut report = ReaderReport::default();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let base = &bases[(index + n) % bases.len()];
        let run = rng.pick(&runs).cloned().unwrap_or_default();
        let url = match n % 5 {
            0 => Some((
                Read::Runs,
                format!("{base}{}?project=soak&limit=50", path(routes::RUNS, &[])),
            )),
            1 => Some((
                Read::TracesByTime,
                format!("{base}{}?limit=50", path(routes::RUN_TRACES, &[&run])),
            )),
            2 => Some((
                Read::StepActivity,
                format!("{base}{}", path(routes::RUN_TRACE_STEPS, &[&run])),
            )),
            3 => Some((
                Read::TracesByTokens,
                format!(
                    "{base}{}?limit=50&sort=tokens",
                    path(routes::RUN_TRACES, &[&run])
                ),
            )),
            _ => None,
        };
        let got = match url {
            Some((read, url)) => get(&http, read, &url, &mut report).await,
            None => {
                check_one(&http, base, &done, &mut rng, &mut report).await;
                Some(Vec::new())
            }
        };
        if got.is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    report
}

/// Reads one acknowledged trace back and compares it with what was sent.
async fn check_one(
    http: &reqwest::Client,
    base: &str,
    done: &Mutex<Vec<Expected>>,
    rng: &mut Rng,
    report: &mut ReaderReport,
) {
    let expected = {
        let Ok(done) = done.lock() else { return };
        match rng.pick(&done) {
            Some(e) => e.clone(),
            None => return,
        }
    };
    let trace_url = format!(
        "{base}{}",
        path(routes::TRACE, &[&expected.run, &expected.trace])
    );
    let Some(body) = get(http, Read::Trace, &trace_url, report).await else {
        return;
    };
    report.checked += 1;
    let summary: Option<TraceSummary> = serde_json::from_slice(&body).ok();
    let found = summary
        .as_ref()
        .map(|s| (s.span_count, s.error_count, s.token_count));
    if found != Some((expected.spans, expected.errors, expected.tokens)) {
        report.inconsistent += 1;
        report.tally.note(format!(
            "{trace_url}: acknowledged as (spans, errors, tokens) = ({}, {}, {}), read {found:?}",
            expected.spans, expected.errors, expected.tokens
        ));
        return;
    }
    let spans_url = format!(
        "{base}{}?parent_span_id=root&limit=50",
        path(routes::SPANS, &[&expected.run, &expected.trace])
    );
    let Some(body) = get(http, Read::Children, &spans_url, report).await else {
        return;
    };
    let page: Option<SpanPage> = serde_json::from_slice(&body).ok();
    let want = (expected.spans - 1).clamp(0, 50) as usize;
    if page.as_ref().map(|p| p.spans.len()) != Some(want) {
        report.inconsistent += 1;
        report.tally.note(format!(
            "{spans_url}: {want} children expected, read {:?}",
            page.map(|p| p.spans.len())
        ));
    }
}
