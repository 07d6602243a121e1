//! `treeline bench compare-runs`: the compare-runs page's reads on a sweep of 20
//! runs, each with 4 metrics of 100,000 steps (8 million points). Timed through the
//! whole app in-process: the comparison of all 20 (the worst case: every line read
//! in full and reduced to 400 points), the same zoomed to a fifth of the steps, two
//! runs, one run's single series as Run Detail reads it, the server-rendered
//! page of all 20, and the runs list with summary columns, sorted by a metric and
//! by a config value.

use treeline_wire::run_compare::RunComparison;
use treeline_wire::{MetricPoint, RunUpsert};

use super::query::{get_json, report};
use super::rng::Rng;
use crate::failure::{Context, Failure, Outcome};
use crate::{store, Host};

#[derive(clap::Args, Clone, Debug)]
pub struct RunCompareArgs {
    /// Runs in the sweep (at most 20, what one comparison takes).
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    /// Steps logged per metric and run.
    #[arg(long, default_value_t = 100_000)]
    pub points: usize,
    /// Timed requests per case.
    #[arg(long, default_value_t = 20)]
    pub samples: usize,
    /// Use this database instead of a temporary SQLite file (sqlite:… or
    /// postgres://…); a sweep already written there is reused.
    #[arg(long)]
    pub database_url: Option<String>,
    /// Write the sweep and stop, untimed: for `scripts/browser-bench.sh`.
    #[arg(long)]
    pub build_only: bool,
}

const PROJECT: &str = "bench-sweep";
const KEYS: [&str; 4] = ["reward", "train/loss", "kl", "entropy"];
const LEARNING_RATES: [f64; 4] = [1e-4, 3e-4, 1e-3, 3e-3];

/// The sweep's `r`th run.
fn run_id(r: usize) -> String {
    format!("sweep-lr-{r:02}")
}

/// The value of metric `k` at `step` of run `r`: a curve each run bends its own way,
/// noise, and a rare spike downsampling must keep.
fn value(rng: &mut Rng, r: usize, k: usize, step: usize, steps: usize) -> f64 {
    let t = step as f64 / steps as f64;
    let rate = 1.0 + r as f64 * 0.15;
    let base = match k {
        0 => 1.0 - (-4.0 * rate * t).exp(),
        1 => 2.5 * (-3.0 * rate * t).exp() + 0.2,
        2 => 0.02 + 0.05 * t * rate,
        _ => 1.5 - 0.8 * t,
    };
    let noise = (rng.below(1_000) as f64 / 1_000.0 - 0.5) * 0.1;
    let spike = if step.is_multiple_of(9_973) { 0.8 } else { 0.0 };
    base + noise + spike
}

async fn build(store: &dyn store::Store, args: &RunCompareArgs) -> Outcome {
    let start = crate::now_us() - (args.points as i64) * 50_000;
    let mut rng = Rng::new(7);
    let total = args.runs * KEYS.len() * args.points;
    let mut written = 0;
    for r in 0..args.runs {
        let run = RunUpsert {
            project: PROJECT.into(),
            name: Some(format!("lr {} seed {}", LEARNING_RATES[r % 4], r / 4)),
            config: Some(serde_json::json!({
                "lr": LEARNING_RATES[r % 4], "seed": r / 4,
                "model": {"name": "policy-7b", "layers": 32}, "batch_size": 256,
            })),
            ..Default::default()
        };
        store
            .upsert_run(&run_id(r), &run, start)
            .await
            .with_context(|| format!("creating run {}", run_id(r)))?;
        for (k, key) in KEYS.iter().enumerate() {
            for chunk in (0..args.points).collect::<Vec<_>>().chunks(10_000) {
                let points: Vec<MetricPoint> = chunk
                    .iter()
                    .map(|&step| MetricPoint {
                        key: (*key).into(),
                        step: step as i64,
                        value: value(&mut rng, r, k, step, args.points),
                        // A step every 50 ms, each run a little slower than the last.
                        ts: Some(start + (step as i64) * (50_000 + r as i64 * 1_000)),
                    })
                    .collect();
                store
                    .write_metrics(&run_id(r), &points)
                    .await
                    .with_context(|| format!("writing {key} of {}", run_id(r)))?;
                written += points.len();
                eprint!("\rbuilding: {written} of {total} points   ");
            }
        }
    }
    eprintln!();
    Ok(())
}

pub async fn run_compare(host: &dyn Host, args: RunCompareArgs) -> Outcome {
    if !(2..=20).contains(&args.runs) {
        return Err(Failure::msg("--runs must be between 2 and 20"));
    }
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let first = run_id(0);
    let (url, store) = super::run_store(
        args.database_url.clone(),
        dir.path(),
        "sweep.db",
        (&first, PROJECT),
    )
    .await?;
    let last = run_id(args.runs - 1);
    let stored = store
        .reads()
        .get_run(&last)
        .await
        .context("reading the benchmark store")?
        .map_or(0, |r| r.metric_keys.len());
    if stored == KEYS.len() {
        println!("reusing the sweep on {url}");
    } else {
        let started = std::time::Instant::now();
        build(store.as_ref(), &args).await?;
        println!(
            "{} runs x {} metrics x {} steps on {url}, written in {:.0} s",
            args.runs,
            KEYS.len(),
            args.points,
            started.elapsed().as_secs_f64()
        );
    }
    if args.build_only {
        return Ok(());
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let app = host.app(store, addr);
    let runs = |n: usize| {
        (0..n)
            .map(|r| format!("run={}", run_id(r)))
            .collect::<Vec<_>>()
            .join("&")
    };
    let all = format!("/api/compare-runs?{}", runs(args.runs));
    // Timed only if it answers what the page draws: every line, none longer than asked.
    let answer: RunComparison = get_json(&app, &all).await?;
    let lines: usize = answer.metrics.iter().map(|m| m.series.len()).sum();
    if lines != args.runs * KEYS.len()
        || answer
            .metrics
            .iter()
            .flat_map(|m| &m.series)
            .any(|s| s.series.points.len() > 400 || s.series.stored != args.points as u64)
    {
        return Err(Failure::msg(format!(
            "{all}: {lines} lines, not {} of at most 400 points each",
            args.runs * KEYS.len()
        )));
    }
    let fifth = args.points / 5;
    let cases = [
        (
            format!("{} runs x 4 metrics, all steps", args.runs),
            all.clone(),
        ),
        (
            format!("{} runs x 4 metrics, zoomed to {fifth} steps", args.runs),
            format!("{all}&min_step={fifth}&max_step={}", 2 * fifth),
        ),
        (
            "2 runs x 4 metrics, all steps".to_string(),
            format!("/api/compare-runs?{}", runs(2)),
        ),
        (
            format!("one series of {} points (Run Detail)", args.points),
            format!("/api/runs/{first}/metrics?key=reward&max_points=400"),
        ),
        (
            format!("the page of {} runs, server-rendered", args.runs),
            format!("/compare-runs?{}", runs(args.runs)),
        ),
        (
            format!("runs list of {}, 3 columns, by last reward", args.runs),
            format!(
                "/api/runs?project={PROJECT}&column=last:reward&column=max:kl\
                 &column=config:lr&sort=last:reward"
            ),
        ),
        (
            format!("runs list of {}, sorted by config lr", args.runs),
            format!("/api/runs?project={PROJECT}&column=config:lr&sort=config:lr&order=asc"),
        ),
    ];
    println!("{:<48} {:>9} {:>9}", "request", "p50 ms", "p95 ms");
    for (name, path) in cases {
        report(&app, &name, args.samples.max(5), 2, || path.clone()).await?;
    }
    Ok(())
}
