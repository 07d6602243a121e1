//! The `treeline` command line.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

#[cfg(feature = "devtools")]
use crate::devtools::Server;
use crate::failure::{Context, Failure, Outcome};
use crate::http::{AppState, DEFAULT_WINDOW_US};
use crate::site::Site;
use crate::{serve, store};

#[derive(Parser)]
#[command(
    name = "treeline",
    version,
    about = "Tracing dashboard for machine-learning runs"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the dashboard and the HTTP API (the default).
    Serve(ServeArgs),
    /// Create, list and revoke API keys (a running server sees changes at once).
    Keys(crate::keys::KeysArgs),
    /// Delete runs (straight on the database; a running server sees it at once).
    Runs(crate::run_admin::RunsArgs),
    /// Keep a project's traces for so many days (straight on the database).
    Retention(crate::retention_admin::RetentionArgs),
    /// How much space the database takes, by project and by run (estimates).
    Du(crate::disk_usage::DuArgs),
    /// Write a run's spans (bodies included) as JSON lines, one span a line.
    Export(crate::transfer::ExportArgs),
    /// Send spans written by `export` to a server.
    Import(crate::transfer::ImportArgs),
    /// Measure the server and print the figures.
    #[cfg(feature = "devtools")]
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Load the demo projects through the ingest API.
    #[cfg(feature = "devtools")]
    Demo(crate::demo::DemoArgs),
    /// Write a copy of this binary with the dashboard's files sealed into it
    /// (`make build` runs it): the copy serves them alone, from any directory.
    #[command(hide = true)]
    Seal(SealArgs),
}

#[derive(clap::Args)]
struct SealArgs {
    /// The built site: the bundle under `pkg/`, and the favicon.
    #[arg(long)]
    site_dir: PathBuf,
    /// Where the sealed copy goes (replaced whole; a running copy is not touched).
    #[arg(long)]
    out: PathBuf,
}

fn seal(args: SealArgs) -> Outcome {
    let exe = std::env::current_exe().context("cannot find this binary")?;
    let files = crate::site::sealed::seal(&exe, &args.site_dir, &args.out)?;
    println!(
        "sealed {files} files of {} into {}",
        args.site_dir.display(),
        args.out.display()
    );
    Ok(())
}

#[cfg(feature = "devtools")]
#[derive(Subcommand)]
enum BenchCommand {
    /// Span events per second through HTTP, JSON and the store, acknowledged when durable.
    Ingest(crate::bench::IngestArgs),
    /// Read latency (p50/p95) of the hot queries on 1M traces / 10M spans.
    Query(crate::bench::QueryArgs),
    /// Latency (p50/p95) of a GRPO run's views (stats, groups, changes) and span
    /// filters on 100,000 short traces, one a sample.
    Rollouts(crate::bench::RolloutsArgs),
    /// Spans per second through OTLP/HTTP protobuf, until stored and visible to queries.
    Otlp(crate::bench::OtlpArgs),
    /// Body search (`text=`) latency (p50/p95) on 1M traces of chat-sized bodies, and
    /// the ingest rate with the bodies indexed.
    Text(crate::bench::TextArgs),
    /// Bytes on disk a span costs, by table and index, for spans with a dozen
    /// attributes and for model calls with chat bodies.
    Bytes(crate::bench::BytesArgs),
    /// Latency (p50/p95) of aligning two wide levels and diffing two spans' bodies.
    Compare(crate::bench::CompareArgs),
    /// Latency (p50/p95) of reading a million-span trace: pages of a 100,000-child
    /// node (first, last, jumped to, around a child, found by name) and the
    /// server-rendered deep links to a span 50 levels down and into the large node
    HugeTrace(crate::bench::HugeArgs),
    /// Latency (p50/p95) of the compare-runs page's reads on 20 runs x 4 metrics x
    /// 100,000 steps: all of it, zoomed, two runs, and the server-rendered page
    CompareRuns(crate::bench::RunCompareArgs),
    /// SDK-shaped writers and dashboard readers against real server processes,
    /// optionally killed mid-soak or several on one PostgreSQL database; then
    /// every acknowledged trace is read back.
    Soak(crate::bench::SoakArgs),
    /// Generated and mutated requests to every endpoint of a real server process:
    /// any 5xx but 503, a dropped connection or a panic fails it.
    Fuzz(crate::bench::FuzzArgs),
}

#[derive(clap::Parser, Clone)]
pub struct ServeArgs {
    /// Address to listen on. Without API keys, keep it on loopback.
    #[arg(long, env = "TREELINE_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,
    /// Directory for the embedded SQLite database, created on first start.
    #[arg(long, env = "TREELINE_DATA_DIR", default_value = "./treeline-data")]
    pub data_dir: PathBuf,
    /// Database to use instead of the embedded one: sqlite:PATH or postgres://…
    #[arg(long, env = "TREELINE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// A streaming replica of the PostgreSQL --database-url (postgres://…), which the
    /// query routes and the dashboard read; writes and access checks stay on the
    /// primary. The dashboard says when the replica lags.
    #[arg(long, env = "TREELINE_READ_DATABASE_URL")]
    pub read_database_url: Option<String>,
    /// An admin API key, presented as `Authorization: Bearer <key>` (for a first
    /// start; `treeline keys create` makes scoped ones). Repeat for several;
    /// TREELINE_API_KEYS takes a comma-separated list.
    #[arg(long = "api-key", env = "TREELINE_API_KEYS", value_delimiter = ',')]
    pub api_keys: Vec<String>,
    /// A file of API keys, one a line (blank lines and `#` comments skipped): keys
    /// given here stay out of the process list, unlike `--api-key`.
    #[arg(long = "api-key-file", env = "TREELINE_API_KEY_FILE")]
    pub api_key_file: Option<PathBuf>,
    /// A host name a keyless server answers to besides loopback ones (its Host
    /// header is checked against DNS rebinding). Repeat for several.
    #[arg(
        long = "allowed-host",
        env = "TREELINE_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// Mark session cookies Secure: set it when a TLS proxy serves the dashboard
    /// over https (an `X-Forwarded-Proto: https` header does the same per request).
    #[arg(long, env = "TREELINE_SECURE_COOKIES")]
    pub secure_cookies: bool,
    /// A directory of the built dashboard (wasm, js, css) to serve instead of the one
    /// sealed into the binary (without one, the directory beside the binary).
    #[arg(long, env = "TREELINE_SITE_DIR")]
    pub site_dir: Option<PathBuf>,
    /// Days that project-wide trace browsing looks back by default.
    #[arg(long, env = "TREELINE_WINDOW_DAYS", default_value_t = 7)]
    pub window_days: i64,
    /// When the database has no runs, load the demo into this server after it starts.
    #[arg(long, env = "TREELINE_DEMO")]
    pub demo: bool,
}

impl Default for ServeArgs {
    fn default() -> Self {
        ServeArgs::parse_from(["serve"])
    }
}

/// Opens the store that `--database-url`, or else the SQLite file in `--data-dir`
/// (created if need be), names: what `serve` and `keys` share.
pub async fn open_store(
    data_dir: &std::path::Path,
    database_url: Option<&str>,
    read_url: Option<&str>,
) -> Outcome<(String, Arc<dyn store::Store>)> {
    store::open_in(data_dir, database_url, read_url)
        .await
        .context("cannot open the database")
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // A benchmark prints its own figures: a line per request would bury them.
    #[cfg(feature = "devtools")]
    let quiet = matches!(cli.command, Some(Command::Bench(_)));
    #[cfg(not(feature = "devtools"))]
    let quiet = false;
    tracing_subscriber::fmt()
        // Colour codes only for a person at a terminal, not in a log file.
        .with_ansi(std::io::stdout().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                if quiet {
                    "warn"
                } else {
                    "info,sqlx=warn,tower_http=info"
                }
                .into()
            }),
        )
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("treeline: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command.unwrap_or(Command::Serve(ServeArgs::default())) {
        Command::Serve(args) => runtime.block_on(serve_command(args)),
        Command::Keys(args) => runtime.block_on(crate::keys::run_command(args)),
        Command::Runs(args) => runtime.block_on(crate::run_admin::run_command(args)),
        Command::Retention(args) => runtime.block_on(crate::retention_admin::run_command(args)),
        Command::Du(args) => runtime.block_on(crate::disk_usage::run_command(args)),
        Command::Export(args) => runtime.block_on(crate::transfer::export(args)),
        Command::Import(args) => runtime.block_on(crate::transfer::import(args)),
        Command::Seal(args) => seal(args),
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::Ingest(args)) => {
            runtime.block_on(crate::bench::ingest(&Server, args))
        }
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::Query(args)) => {
            runtime.block_on(crate::bench::query(&Server, args))
        }
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::Text(args)) => {
            runtime.block_on(crate::bench::text(&Server, args))
        }
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::Rollouts(args)) => {
            runtime.block_on(crate::bench::rollouts(&Server, args))
        }
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::Bytes(args)) => runtime.block_on(crate::bench::bytes(args)),
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::Soak(args)) => {
            runtime.block_on(crate::bench::soak(&Server, args))
        }
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::Fuzz(args)) => runtime.block_on(crate::bench::fuzz(args)),
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::Compare(args)) => {
            runtime.block_on(crate::bench::compare(&Server, args))
        }
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::HugeTrace(args)) => {
            runtime.block_on(crate::bench::huge(&Server, args))
        }
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::CompareRuns(args)) => {
            runtime.block_on(crate::bench::run_compare(&Server, args))
        }
        #[cfg(feature = "devtools")]
        Command::Demo(args) => runtime.block_on(crate::demo::run_command(&Server, args)),
        #[cfg(feature = "devtools")]
        Command::Bench(BenchCommand::Otlp(args)) => {
            runtime.block_on(crate::bench::otlp(&Server, args))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("treeline: {}", failure.report());
            ExitCode::FAILURE
        }
    }
}

async fn serve_command(args: ServeArgs) -> Outcome {
    let (url, store) = open_store(
        &args.data_dir,
        args.database_url.as_deref(),
        args.read_database_url.as_deref(),
    )
    .await?;
    prune_old_records(store.clone());
    // Checked before serving, so a demo is never loaded over a user's own runs.
    let load_demo = args.demo
        && store
            .reads()
            .list_runs(crate::store::RunsAsked::newest(None, 1, None))
            .await
            .context("cannot read the database")?
            .runs
            .is_empty();
    let mut state = AppState::new(store.clone());
    crate::text_backfill::spawn(store.clone());
    crate::purge::spawn(store, state.retention_changed.clone());
    state.api_keys = Arc::new(api_keys(&args)?);
    state.allowed_hosts = Arc::new(
        args.allowed_hosts
            .iter()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .collect(),
    );
    state.window_us = args.window_days.clamp(1, 36_500) * (DEFAULT_WINDOW_US / 7);
    state.secure_cookies = args.secure_cookies;
    // Beyond loopback nobody reads without a key, even if every key is revoked later.
    state.require_auth = !args.addr.ip().is_loopback();
    let stored_keys = state
        .store
        .access()
        .any_key()
        .await
        .context("cannot read the database")?;
    if state.api_keys.is_empty() && !stored_keys {
        if state.require_auth {
            return Err(Failure::msg(format!(
                "refusing to listen on {} without API keys: create one with `treeline keys create \
                 --scope admin` (or pass --api-key-file), or listen on 127.0.0.1",
                args.addr
            )));
        }
        tracing::warn!(
            "no API keys: anyone who can reach {} reads and writes everything (create a key \
             with `treeline keys create` to require sign-in)",
            args.addr
        );
    }
    let site = Site::locate(args.site_dir.clone())?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    let addr = listener
        .local_addr()
        .context("cannot read the listening address")?;
    let database = if url.starts_with("sqlite:") {
        url.clone()
    } else if args.read_database_url.is_some() {
        "postgres, lists read from its replica".into()
    } else {
        "postgres".into()
    };
    tracing::info!(%database, site = %site.describe(), "Treeline is serving on http://{addr}");
    if load_demo && state.api_keys.is_empty() && stored_keys {
        tracing::warn!(
            "demo: not loaded, as this server has only stored keys; load it with \
             `treeline demo --api-key <a write key>`"
        );
    } else if load_demo {
        spawn_demo(addr, state.api_keys.first().cloned());
    } else if args.demo {
        tracing::info!("demo: the database already has runs; not loading the demo");
    }
    serve::run(listener, serve::app(state, &site, addr))
        .await
        .context("the server stopped")
}

/// How long an Idempotency-Key's answer is kept, and how often old ones go.
const IDEMPOTENCY_WINDOW_US: i64 = 48 * 3600 * 1_000_000;
const PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// Forgets idempotency answers older than the window and expired sessions, and
/// finishes OpenTelemetry daily runs whose day is over, now and then every
/// `PRUNE_EVERY`, for as long as the server runs.
fn prune_old_records(store: Arc<dyn store::Store>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PRUNE_EVERY);
        loop {
            every.tick().await;
            let now = crate::http::now_us();
            let before = now.saturating_sub(IDEMPOTENCY_WINDOW_US);
            match store.idempotency_prune(before).await {
                Ok(n) => tracing::debug!(pruned = n, "old idempotency keys removed"),
                Err(e) => tracing::warn!(error = %crate::failure::chain(&e),
                    "old idempotency keys could not be removed; retrying in 10 minutes"),
            }
            if let Err(e) = store.access().prune_sessions(now).await {
                tracing::warn!(error = %crate::failure::chain(&e),
                    "expired sessions could not be removed; retrying in 10 minutes");
            }
            match crate::otlp::runs::finish_past_days(store.as_ref(), now).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    finished = n,
                    "OpenTelemetry daily runs of past days finished"
                ),
                Err(e) => tracing::warn!(error = %crate::failure::chain(&e),
                    "past days' OpenTelemetry runs could not be finished; retrying in 10 minutes"),
            }
        }
    });
}

/// The keys of `--api-key`, `TREELINE_API_KEYS` and `--api-key-file`. A key typed
/// on the command line shows in the process list: said once, as a warning.
fn api_keys(args: &ServeArgs) -> Outcome<Vec<String>> {
    if std::env::args().any(|a| a == "--api-key" || a.starts_with("--api-key=")) {
        tracing::warn!(
            "an API key was given on the command line, where other users of this machine \
             can read it; prefer --api-key-file or TREELINE_API_KEYS"
        );
    }
    let mut keys: Vec<String> = args
        .api_keys
        .iter()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect();
    if let Some(path) = &args.api_key_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the API key file {}", path.display()))?;
        keys.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string),
        );
    }
    if let Some(short) = keys
        .iter()
        .find(|k| k.chars().count() < MIN_SERVE_KEY_CHARS)
    {
        return Err(Failure::msg(format!(
            "a key given to serve must be at least {MIN_SERVE_KEY_CHARS} characters; one has {}. \
             Make a good one with `openssl rand -base64 32`, or store keys with \
             `treeline keys create` instead",
            short.chars().count()
        )));
    }
    Ok(keys)
}

/// The shortest key `serve` takes: a short one could be guessed.
pub const MIN_SERVE_KEY_CHARS: usize = 20;

#[cfg(not(feature = "devtools"))]
fn spawn_demo(_addr: SocketAddr, _api_key: Option<String>) {
    tracing::warn!("demo: this build has no demo (built without the devtools feature)");
}

/// Loads the demo into this server over HTTP, as any client would, while it serves.
#[cfg(feature = "devtools")]
fn spawn_demo(addr: SocketAddr, api_key: Option<String>) {
    let mut target = addr;
    if target.ip().is_unspecified() {
        target.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    tokio::spawn(async move {
        let client =
            treeline_client::Client::new(&format!("http://{target}")).with_api_key(api_key);
        tracing::info!("demo: loading the demo projects");
        let options = crate::demo::Options::full();
        match crate::demo::load(&client, &options, &mut crate::demo::log_progress()).await {
            Ok(summary) => tracing::info!(
                "demo: loaded {} runs, {} spans in {:.1} s",
                summary.runs.len(),
                summary.spans,
                summary.elapsed.as_secs_f64()
            ),
            Err(e) => tracing::error!("demo: loading failed: {}", e.report()),
        }
    });
}
