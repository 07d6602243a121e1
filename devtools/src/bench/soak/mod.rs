//! `treeline bench soak`: SDK-shaped writers and dashboard readers against real
//! `treeline serve` processes for a while. With `--kill` the servers are killed with
//! SIGKILL and started again mid-soak (faults); with `--servers 2` on PostgreSQL
//! two processes share one database (scale-out). Afterwards every acknowledged trace
//! and metric point is read back: nothing lost, nothing stored twice.

mod churn;
mod deliver;
mod reader;
mod verify;
mod writer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use treeline_wire::RunUpsert;

use crate::bench::fleet::Fleet;
use crate::bench::percentile;
use crate::failure::{Context, Failure, Outcome};
use deliver::Tally;

#[derive(clap::Args, Clone, Debug)]
pub struct SoakArgs {
    /// Concurrent writers, each shaped like one SDK process.
    #[arg(long, default_value_t = 50)]
    pub writers: usize,
    /// Concurrent dashboard readers.
    #[arg(long, default_value_t = 5)]
    pub readers: usize,
    /// How long the writers begin new traces; they then finish the open ones.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Runs the writers share (writer w writes run w mod runs).
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    /// Spans per trace: a root and its children.
    #[arg(long, default_value_t = 25)]
    pub spans_per_trace: usize,
    /// Traces each writer has open at once.
    #[arg(long, default_value_t = 4)]
    pub traces_in_flight: usize,
    /// Events per batch.
    #[arg(long, default_value_t = 200)]
    pub batch: usize,
    /// `treeline serve` processes on the one database (more than one needs PostgreSQL).
    #[arg(long, default_value_t = 1)]
    pub servers: usize,
    /// The database (default: SQLite in a temporary directory).
    #[arg(long)]
    pub database_url: Option<String>,
    /// A streaming replica of that PostgreSQL database, which the servers' query
    /// routes (and so the readers) read.
    #[arg(long)]
    pub read_database_url: Option<String>,
    /// Times to kill a server with SIGKILL during the soak, each started again at once.
    #[arg(long, default_value_t = 0)]
    pub kill: usize,
    /// Delete a run halfway through and apply a retention policy to a project of
    /// old traces while the writers write; then check what each removed and kept.
    #[arg(long)]
    pub churn: bool,
    /// A stored write key on every request, as a team's server asks for (each
    /// request then looks its key up).
    #[arg(long, conflicts_with = "churn")]
    pub with_key: bool,
}

fn check_args(args: &SoakArgs) -> Outcome {
    let bounded = |name: &str, value: usize, max: usize| {
        if (1..=max).contains(&value) {
            Ok(())
        } else {
            Err(Failure::msg(format!(
                "--{name} must be between 1 and {max}"
            )))
        }
    };
    bounded("writers", args.writers, 1000)?;
    bounded("readers", args.readers, 1000)?;
    bounded("runs", args.runs, 1000)?;
    bounded("spans-per-trace", args.spans_per_trace, 10_000)?;
    bounded("traces-in-flight", args.traces_in_flight, 100)?;
    bounded("batch", args.batch, 10_000)?;
    bounded("servers", args.servers, 16)?;
    let postgres = args
        .database_url
        .as_deref()
        .is_some_and(|u| u.starts_with("postgres"));
    if args.servers > 1 && !postgres {
        return Err(Failure::msg(
            "--servers above 1 needs --database-url postgres://…: SQLite has one writer process",
        ));
    }
    if args.read_database_url.is_some() && !postgres {
        return Err(Failure::msg(
            "--read-database-url needs --database-url postgres://…: it names a replica of it",
        ));
    }
    Ok(())
}

pub async fn soak(host: &dyn crate::Host, args: SoakArgs) -> Outcome {
    check_args(&args)?;
    let database = if args.read_database_url.is_some() {
        "PostgreSQL, reads from its replica"
    } else if args.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!(
        "soak: {} writers and {} readers for {} s, {} server(s) on {database}, {} kill(s); \
         traces of {} spans, {} open per writer, batches of {} events{}",
        args.writers,
        args.readers,
        args.seconds,
        args.servers,
        args.kill,
        args.spans_per_trace,
        args.traces_in_flight,
        args.batch,
        if args.with_key {
            "; a stored key on every request"
        } else {
            ""
        }
    );
    let mut fleet = Fleet::start(
        args.servers,
        args.database_url.clone(),
        args.read_database_url.clone(),
    )
    .await?;
    let bases = fleet.bases();
    let first = bases.first().cloned().unwrap_or_default();
    let stamp = &treeline_client::new_key()[..8];
    let runs: Vec<String> = (0..args.runs.min(args.writers))
        .map(|i| format!("soak-{stamp}-{i}"))
        .collect();
    let key = if args.with_key {
        Some(stored_key(host, &fleet.database_url()).await?)
    } else {
        None
    };
    let client = treeline_client::Client::new(&first).with_api_key(key.clone());
    for run in &runs {
        let upsert = RunUpsert {
            project: "soak".into(),
            ..Default::default()
        };
        client
            .put_run(run, &upsert)
            .await
            .with_context(|| format!("cannot create run {run}"))?;
    }
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(key) = &key {
        let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
            .context("a key that is no header value")?;
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(args.writers + args.readers)
        .build()
        .context("cannot build an HTTP client")?;
    let churn = match args.churn {
        true => {
            eprintln!("churn: writing a project of old traces and a run to delete…");
            let churn = churn::prepare(
                &fleet.database_url(),
                &first,
                &http,
                stamp,
                args.spans_per_trace,
            )
            .await?;
            churn::start_retention(&http, &first, &churn).await?;
            Some((churn, Instant::now()))
        }
        false => None,
    };
    let (mut delete_took, mut retention_took) = (None, None);

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let writers: Vec<_> = (0..args.writers)
        .map(|index| {
            let plan = writer::WriterPlan {
                index,
                run: runs[index % runs.len()].clone(),
                bases: bases.clone(),
                spans_per_trace: args.spans_per_trace,
                traces_in_flight: args.traces_in_flight,
                batch: args.batch,
            };
            tokio::spawn(writer::write(
                plan,
                http.clone(),
                stop.clone(),
                done.clone(),
            ))
        })
        .collect();
    let readers: Vec<_> = (0..args.readers)
        .map(|index| {
            tokio::spawn(reader::read(
                index,
                bases.clone(),
                runs.clone(),
                http.clone(),
                stop.clone(),
                done.clone(),
            ))
        })
        .collect();

    // The soak's clock: progress each second, and the kills spread evenly over it.
    let period = Duration::from_secs(args.seconds);
    let mut kills = 0;
    while started.elapsed() < period {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if kills < kill_due(args.kill, started.elapsed(), period) {
            let i = kills % args.servers;
            fleet.kill(i)?;
            fleet.restart(i).await?;
            kills += 1;
        }
        let mut churning = String::new();
        if let Some((churn, since)) = &churn {
            if delete_took.is_none() && started.elapsed() >= period / 2 {
                delete_took = Some(churn::delete(&http, &first, churn).await?);
            }
            if retention_took.is_none() {
                let left = churn::aged_left(&http, &first, churn).await?;
                if churn::retention_done(left) {
                    retention_took = Some(since.elapsed());
                }
                churning = format!(", {left} old traces left");
            }
        }
        let traces = done.lock().map(|d| d.len()).unwrap_or(0);
        eprint!(
            "\r{:>4} / {} s: {traces} traces acknowledged, {kills} kill(s){churning}   ",
            started.elapsed().as_secs(),
            args.seconds
        );
    }
    stop.store(true, Ordering::Relaxed);
    eprintln!("\nfinishing the traces still open…");
    let mut events = 0u64;
    let mut ack_latencies = Vec::new();
    let mut write_tally = Tally::default();
    let mut metrics = Vec::new();
    for task in writers {
        let report = task.await.context("a soak writer stopped")?;
        events += report.events;
        ack_latencies.extend(report.ack_latencies);
        write_tally.add(&report.tally);
        metrics.extend(report.metrics);
    }
    let write_time = started.elapsed();
    let mut by_read = Vec::new();
    let mut read_tally = Tally::default();
    let (mut checked, mut inconsistent) = (0, 0);
    for task in readers {
        let report = task.await.context("a soak reader stopped")?;
        by_read.extend(report.latencies);
        read_tally.add(&report.tally);
        checked += report.checked;
        inconsistent += report.inconsistent;
    }
    ack_latencies.sort();
    // By kind of read, then by time: each kind's times come out sorted.
    by_read.sort();
    let mut read_latencies: Vec<Duration> = by_read.iter().map(|(_, d)| *d).collect();
    read_latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "writes: {events} events acknowledged in {:.1} s = {:.0} events/s; ack latency p50 {:.0} ms, \
         p99 {:.0} ms (first send to acknowledgement, retries included)",
        write_time.as_secs_f64(),
        events as f64 / write_time.as_secs_f64(),
        ms(percentile(&ack_latencies, 0.5)),
        ms(percentile(&ack_latencies, 0.99)),
    );
    println!(
        "  retried: {} answered 503 (shed), {} unanswered (server down); failed: {} other 5xx, {} refused",
        write_tally.shed, write_tally.unreachable, write_tally.server_errors, write_tally.refused
    );
    println!(
        "reads: {} answered, p50 {:.1} ms, p95 {:.1} ms; {} answered 503, {} unanswered; \
         failed: {} other 5xx, {} refused; {checked} acknowledged traces read back, {inconsistent} not as sent",
        read_latencies.len(),
        ms(percentile(&read_latencies, 0.5)),
        ms(percentile(&read_latencies, 0.95)),
        read_tally.shed,
        read_tally.unreachable,
        read_tally.server_errors,
        read_tally.refused,
    );
    for read in reader::Read::ALL {
        let times: Vec<Duration> = by_read
            .iter()
            .filter(|(r, _)| *r == read)
            .map(|(_, d)| *d)
            .collect();
        if !times.is_empty() {
            println!(
                "  {:<26} {:>6} answered, p50 {:>6.1} ms, p95 {:>6.1} ms",
                read.label(),
                times.len(),
                ms(percentile(&times, 0.5)),
                ms(percentile(&times, 0.95)),
            );
        }
    }
    let peaks = fleet.peaks();
    println!(
        "servers: peak RSS {} MiB",
        peaks
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" MiB, ")
    );

    if args.read_database_url.is_some() {
        let (took, lag) = verify::replica_caught_up(&http, &first).await?;
        println!(
            "replica: {lag} ms behind when the writes stopped, caught up {:.1} s later",
            took.as_secs_f64()
        );
    }
    eprintln!("reading every acknowledged trace back…");
    let expected = done.lock().map(|d| d.clone()).unwrap_or_default();
    let verdict = verify::verify(&http, &first, &runs, &expected, &metrics).await?;
    println!(
        "check: {} traces acknowledged: {} lost, {} stored otherwise than sent, {} never acknowledged; \
         {} metric points: {} series differ",
        verdict.traces,
        verdict.lost,
        verdict.wrong,
        verdict.unexpected,
        verdict.points,
        verdict.points_wrong
    );
    let mut churned = 0;
    if let Some((churn, since)) = &churn {
        let took = match delete_took {
            Some(took) => took,
            None => churn::delete(&http, &first, churn).await?,
        };
        eprintln!("waiting for retention to finish…");
        let patience = Duration::from_secs(120);
        let timing = (*since, retention_took);
        let verdict = churn::check(&http, &first, churn, timing, took, patience).await?;
        println!("{}", verdict.report());
        churned = verdict.problems();
    }
    let mut problems = Tally::default();
    problems.add(&write_tally);
    problems.add(&read_tally);
    problems.add(&verdict.problems);
    for problem in &problems.problems {
        println!("  {problem}");
    }
    let failures = verdict.lost
        + verdict.wrong
        + verdict.unexpected
        + verdict.points_wrong
        + (write_tally.server_errors + write_tally.refused) as usize
        + (read_tally.server_errors + read_tally.refused) as usize
        + inconsistent as usize
        + churned;
    if failures > 0 {
        if let Some(dir) = fleet.keep_logs() {
            println!("  the servers' logs are kept in {}", dir.display());
        }
        return Err(Failure::msg(format!(
            "the soak found {failures} problem(s)"
        )));
    }
    Ok(())
}

/// How many of `kills` are due `elapsed` into `period`: the k-th falls at
/// k / (kills + 1) of the period.
fn kill_due(kills: usize, elapsed: Duration, period: Duration) -> usize {
    let share = elapsed.as_secs_f64() / period.as_secs_f64().max(1e-9);
    ((share * (kills as f64 + 1.0)).floor() as usize).min(kills)
}

/// A write key stored in the servers' database: from their next request on, they
/// ask every request for a key.
async fn stored_key(host: &dyn crate::Host, database_url: &str) -> Outcome<String> {
    let store = crate::store::open(database_url)
        .await
        .with_context(|| format!("cannot open {database_url}"))?;
    crate::bench::bench_key(host, store.as_ref()).await
}
