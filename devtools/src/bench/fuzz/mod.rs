//! `treeline bench fuzz`: generated and mutated requests to every route of a real
//! `treeline serve` process. Every request must get an answer below 500 (a 503
//! that sheds load is counted apart), the server must not panic, and its peak
//! memory is reported.

mod cases;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use treeline_wire::RunUpsert;

use crate::bench::fleet::Fleet;
use crate::failure::{Context, Failure, Outcome};
use cases::Known;

#[derive(clap::Args, Clone, Debug)]
pub struct FuzzArgs {
    /// Requests to send.
    #[arg(long, default_value_t = 100_000)]
    pub requests: u64,
    /// The seed: the same seed sends the same requests.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The number of the first request (with `--requests 1`, replays one request
    /// a report named).
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// The database (default: SQLite in a temporary directory).
    #[arg(long)]
    pub database_url: Option<String>,
}

/// Failures kept word for word; past these only the count grows.
const KEPT: usize = 10;

#[derive(Default)]
struct Tally {
    by_status: BTreeMap<u16, u64>,
    unanswered: u64,
    /// Requests that failed on a kept-alive connection and were sent again.
    resent: u64,
    failures: Vec<String>,
}

impl Tally {
    fn fail(&mut self, what: String) {
        if self.failures.len() < KEPT {
            self.failures.push(what);
        }
    }
}

/// A run holding one trace with a span, so generated requests can hit real ids.
async fn seed(base: &str) -> Outcome<Known> {
    let known = Known {
        run: format!("fuzz-{}", &treeline_client::new_key()[..8]),
        trace: "fuzz-trace".into(),
        span: "fuzz-root".into(),
    };
    let client = treeline_client::Client::new(base);
    let run = RunUpsert {
        project: "fuzz".into(),
        ..Default::default()
    };
    client
        .put_run(&known.run, &run)
        .await
        .context("cannot create the fuzz run")?;
    let events = [
        json!({"op": "open", "trace_id": known.trace, "span_id": known.span, "name": "root",
            "kind": "rollout", "ts": 1_764_420_000_000_000i64, "step": 1, "rollout_id": "ro",
            "attributes": {"reward": 0.5}}),
        json!({"op": "open", "trace_id": known.trace, "span_id": "child", "parent_span_id": known.span,
            "name": "call", "kind": "model", "ts": 1_764_420_000_000_001i64, "input": {"text": "hi"}}),
        json!({"op": "close", "trace_id": known.trace, "span_id": "child", "ts": 1_764_420_000_000_002i64,
            "status": "ok", "output": {"text": "hello"}}),
    ];
    client
        .send_events(&known.run, &events)
        .await
        .context("cannot write the fuzz trace")?;
    Ok(known)
}

pub async fn fuzz(args: FuzzArgs) -> Outcome {
    let database = if args.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!(
        "fuzz: {} requests, seed {}, {} at a time, against a treeline serve process on {database}",
        args.requests, args.seed, args.concurrency
    );
    let mut fleet = Fleet::start(1, args.database_url.clone(), None).await?;
    let base = fleet.bases().into_iter().next().unwrap_or_default();
    let known = Arc::new(seed(&base).await?);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("cannot build an HTTP client")?;
    let fresh = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()
        .context("cannot build an HTTP client")?;
    let next = Arc::new(AtomicU64::new(args.from));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.concurrency.clamp(1, 256))
        .map(|_| {
            let (http, fresh, next, tally, known, base) = (
                http.clone(),
                fresh.clone(),
                next.clone(),
                tally.clone(),
                known.clone(),
                base.clone(),
            );
            let (seed, total) = (args.seed, args.from.saturating_add(args.requests));
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= total {
                        break;
                    }
                    let request = cases::request(seed, n, &known);
                    let send = |http: &reqwest::Client| {
                        let mut builder = http
                            .request(request.method.clone(), format!("{base}{}", request.target))
                            .body(request.body.clone());
                        for (name, value) in &request.headers {
                            builder = builder.header(*name, value);
                        }
                        builder.send()
                    };
                    let mut answer = send(&http).await;
                    let mut resent = false;
                    if answer.is_err() {
                        // A kept-alive connection the server had closed (after an
                        // answer that did not read its request's body) fails the next
                        // request sent on it: sent again on a new connection.
                        answer = send(&fresh).await;
                        resent = true;
                    }
                    let summary = || {
                        format!(
                            "request #{n} ({}): {} {}",
                            request.route,
                            request.method,
                            request.target.chars().take(100).collect::<String>()
                        )
                    };
                    let Ok(mut tally) = tally.lock() else { break };
                    tally.resent += u64::from(resent);
                    match answer {
                        Ok(response) => {
                            let status = response.status().as_u16();
                            *tally.by_status.entry(status).or_default() += 1;
                            if status >= 500 && status != 503 {
                                tally.fail(format!("{}: answered {status}", summary()));
                            }
                        }
                        Err(e) => {
                            tally.unanswered += 1;
                            tally.fail(format!("{}: no answer: {e}", summary()));
                        }
                    }
                    if n.is_multiple_of(5_000) {
                        eprint!("\r{n} / {total} sent   ");
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.context("a fuzz task stopped")?;
    }
    let elapsed = started.elapsed();
    eprintln!("\r{} / {} sent   ", args.requests, args.requests);
    // On a new connection, as a request sent again is: a kept-alive one the server
    // closed after its last answer says nothing about whether it still serves.
    let alive = fresh
        .get(format!("{base}{}", treeline_wire::routes::HEALTH))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success());
    let peak = fleet.peaks().first().copied().unwrap_or(0);
    fleet.kill(0)?;
    let log = std::fs::read_to_string(fleet.log_path(0)).unwrap_or_default();
    let panics = log.matches("panicked").count();
    let tally = tally
        .lock()
        .map_err(|_| Failure::msg("a fuzz task panicked"))?;
    let count = |range: std::ops::RangeInclusive<u16>| -> u64 {
        tally
            .by_status
            .iter()
            .filter(|(s, _)| range.contains(s))
            .map(|(_, n)| n)
            .sum()
    };
    let server_errors = count(500..=599) - count(503..=503);
    println!(
        "fuzz: {} requests in {:.1} s: {} 2xx/3xx, {} 4xx, {} answered 503 (shed), {server_errors} other 5xx, {} unanswered \
         ({} sent again on a new connection); \
         server peak RSS {peak} MiB; {panics} panics in its log; {}",
        args.requests,
        elapsed.as_secs_f64(),
        count(200..=399),
        count(400..=499),
        count(503..=503),
        tally.unanswered,
        tally.resent,
        if alive { "still serving" } else { "NOT SERVING" }
    );
    let statuses: Vec<String> = tally
        .by_status
        .iter()
        .map(|(s, n)| format!("{s}: {n}"))
        .collect();
    println!("  by status: {}", statuses.join(", "));
    for failure in &tally.failures {
        println!("  {failure}");
    }
    if server_errors > 0 || tally.unanswered > 0 || panics > 0 || !alive {
        if let Some(dir) = fleet.keep_logs() {
            println!("  the server's log is kept in {}", dir.display());
        }
        return Err(Failure::msg(format!(
            "fuzzing found {} failure(s) and {panics} panic(s) (replay one with --seed {} --from NUMBER --requests 1)",
            server_errors + tally.unanswered,
            args.seed
        )));
    }
    Ok(())
}
