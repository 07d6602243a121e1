//! `--churn`: a run deleted and a retention policy applied while the soak's
//! writers write, as a team's server removes data beside ingest. Before the
//! soak, a project of traces last written 40 days ago (straight into the
//! database: the server stamps what it is sent with its own clock) and a run to
//! delete; a 30-day policy on the old project; the run deleted halfway through.
//! Afterwards: the old closed traces are gone, the old open ones and every other
//! acknowledged trace are there, and the deleted run is gone whole.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use treeline_wire::routes::{self, path};
use treeline_wire::{RunDetail, RunUpsert};

use super::deliver::{deliver, Tally};
use super::verify::{get, traces_of};
use crate::bench::query::write;
use crate::failure::{Context, Failure, Outcome};

const DAY_US: i64 = 86_400_000_000;
/// The old project's age, past its 30-day window.
const AGE_DAYS: i64 = 40;
const WINDOW_DAYS: u32 = 30;
/// Old traces: closed ones (which retention removes) and open ones (which it keeps).
const AGED_CLOSED: usize = 2_000;
const AGED_OPEN: usize = 50;
/// Traces of the run that is deleted.
const DOOMED_TRACES: usize = 400;

pub(crate) struct Churn {
    pub(crate) aged_project: String,
    aged_run: String,
    pub(crate) doomed: String,
    spans_per_trace: usize,
}

/// What the churn left, read after the soak.
pub(crate) struct ChurnVerdict {
    /// Old closed traces still there once retention had time to finish.
    pub(crate) expired_left: usize,
    /// Old open traces that retention removed (it must not).
    pub(crate) open_lost: usize,
    /// Whether the deleted run still answers.
    pub(crate) doomed_found: bool,
    pub(crate) delete_took: Duration,
    pub(crate) retention_took: Duration,
}

/// Rollout events: a root and `spans - 1` children, closed unless `open`.
fn rollout(trace: &str, spans: usize, open: bool, ts: i64) -> Vec<Value> {
    let mut events = vec![json!({"op": "open", "trace_id": trace, "span_id": "root",
        "name": "rollout", "kind": "rollout", "ts": ts, "attributes": {"reward": 0.5}})];
    for c in 1..spans {
        events.push(
            json!({"op": "open", "trace_id": trace, "span_id": format!("s{c}"),
            "parent_span_id": "root", "name": "env step", "kind": "env_step", "ts": ts + 1}),
        );
        events.push(
            json!({"op": "close", "trace_id": trace, "span_id": format!("s{c}"),
            "status": "ok", "ts": ts + 2, "output": {"text": format!("observation {c}")}}),
        );
    }
    if !open {
        events.push(json!({"op": "close", "trace_id": trace, "span_id": "root",
            "status": "ok", "ts": ts + 3}));
    }
    events
}

/// Writes the old project straight into `database_url` and the run to delete
/// through the server at `base`, and sets the old project's policy.
pub(crate) async fn prepare(
    database_url: &str,
    base: &str,
    http: &reqwest::Client,
    stamp: &str,
    spans_per_trace: usize,
) -> Outcome<Churn> {
    let churn = Churn {
        aged_project: format!("soak-aged-{stamp}"),
        aged_run: format!("soak-aged-{stamp}"),
        doomed: format!("soak-doomed-{stamp}"),
        spans_per_trace: spans_per_trace.max(1),
    };
    let store = treeline_store::open(database_url)
        .await
        .context("cannot open the soak's database")?;
    let then = crate::now_us() - AGE_DAYS * DAY_US;
    let upsert = RunUpsert {
        project: churn.aged_project.clone(),
        ..Default::default()
    };
    store
        .upsert_run(&churn.aged_run, &upsert, then)
        .await
        .context("cannot write the old run")?;
    let traces: Vec<(usize, bool)> = (0..AGED_CLOSED)
        .map(|i| (i, false))
        .chain((0..AGED_OPEN).map(|i| (AGED_CLOSED + i, true)))
        .collect();
    for chunk in traces.chunks(100) {
        let mut events = Vec::new();
        for &(i, open) in chunk {
            events.extend(rollout(
                &format!("aged-{i}"),
                churn.spans_per_trace,
                open,
                then,
            ));
        }
        write(store.as_ref(), &churn.aged_run, &events, then).await?;
    }

    let client = treeline_client::Client::new(base);
    let upsert = RunUpsert {
        project: "soak".into(),
        ..Default::default()
    };
    client
        .put_run(&churn.doomed, &upsert)
        .await
        .context("cannot create the run to delete")?;
    let url = format!("{base}{}", path(routes::RUN_TRACE_EVENTS, &[&churn.doomed]));
    let mut tally = Tally::default();
    for first in (0..DOOMED_TRACES).step_by(20) {
        let events: Vec<Value> = (first..first + 20)
            .flat_map(|i| {
                rollout(
                    &format!("doomed-{i}"),
                    churn.spans_per_trace,
                    false,
                    crate::now_us(),
                )
            })
            .collect();
        if deliver(http, &url, &json!({"events": events}), &mut tally)
            .await
            .is_none()
        {
            return Err(Failure::msg(format!(
                "the run to delete was refused: {:?}",
                tally.problems
            )));
        }
    }
    Ok(churn)
}

/// Sets the old project's 30-day policy: the servers remove its closed traces
/// from now on, in batches beside ingest.
pub(crate) async fn start_retention(http: &reqwest::Client, base: &str, churn: &Churn) -> Outcome {
    let url = format!(
        "{base}{}",
        path(routes::PROJECT_RETENTION, &[&churn.aged_project])
    );
    http.put(&url)
        .json(&json!({"traces_days": WINDOW_DAYS, "metrics": "keep"}))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .with_context(|| format!("cannot set a retention policy at {url}"))?;
    Ok(())
}

/// Deletes the run through the API; answers how long the request took.
pub(crate) async fn delete(http: &reqwest::Client, base: &str, churn: &Churn) -> Outcome<Duration> {
    let url = format!("{base}{}", path(routes::RUN, &[&churn.doomed]));
    let started = Instant::now();
    http.delete(&url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .with_context(|| format!("cannot delete {url}"))?;
    Ok(started.elapsed())
}

/// How many traces the old run has left, from its summary: what the soak's clock
/// shows while retention works.
pub(crate) async fn aged_left(http: &reqwest::Client, base: &str, churn: &Churn) -> Outcome<i64> {
    let url = format!("{base}{}", path(routes::RUN, &[&churn.aged_run]));
    let run: RunDetail = get(http, &url).await?;
    Ok(run.summary.trace_count)
}

/// Whether `left` (from [`aged_left`]) means retention has done its work.
pub(crate) fn retention_done(left: i64) -> bool {
    left <= AGED_OPEN as i64
}

/// Waits (at most `patience`) for retention to remove the old closed traces,
/// then says what is left. `since` is when the policy was set; `done`, how long
/// retention took if the soak saw it finish.
pub(crate) async fn check(
    http: &reqwest::Client,
    base: &str,
    churn: &Churn,
    (since, done): (Instant, Option<Duration>),
    delete_took: Duration,
    patience: Duration,
) -> Outcome<ChurnVerdict> {
    let waited = Instant::now();
    let ids = loop {
        let ids: Vec<String> = traces_of(http, base, &churn.aged_run)
            .await?
            .into_keys()
            .collect();
        if ids.len() <= AGED_OPEN || waited.elapsed() > patience {
            break ids;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let retention_took = done.unwrap_or_else(|| since.elapsed());
    let expired_left = ids
        .iter()
        .filter(|id| {
            id.strip_prefix("aged-")
                .and_then(|n| n.parse::<usize>().ok())
                < Some(AGED_CLOSED)
        })
        .count();
    let open_kept = ids.len() - expired_left;
    let url = format!("{base}{}", path(routes::RUN, &[&churn.doomed]));
    let status = http
        .get(&url)
        .send()
        .await
        .with_context(|| format!("cannot read {url}"))?
        .status();
    Ok(ChurnVerdict {
        expired_left,
        open_lost: AGED_OPEN.saturating_sub(open_kept),
        doomed_found: status != reqwest::StatusCode::NOT_FOUND,
        delete_took,
        retention_took,
    })
}

impl ChurnVerdict {
    pub(crate) fn problems(&self) -> usize {
        self.expired_left + self.open_lost + usize::from(self.doomed_found)
    }

    pub(crate) fn report(&self) -> String {
        format!(
            "churn: a run of {DOOMED_TRACES} traces deleted mid-soak (the request took {:.0} ms), {}; \
             retention of {AGED_CLOSED} closed and {AGED_OPEN} open traces {AGE_DAYS} days old under a \
             {WINDOW_DAYS}-day window, applied beside the writers in {:.1} s: {} closed left, {} open lost",
            self.delete_took.as_secs_f64() * 1e3,
            if self.doomed_found { "but it still answers" } else { "and it answers 404" },
            self.retention_took.as_secs_f64(),
            self.expired_left,
            self.open_lost,
        )
    }
}
