//! `treeline demo`: load the demo into a running server, or into a data directory
//! through a server of its own.

use crate::failure::{Context, Outcome};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use treeline_client::Client;

use super::{load, stderr_bar, DemoSummary, Options};
use crate::store::{self, Store};
use crate::Host;

#[derive(clap::Args, Clone, Debug)]
pub struct DemoArgs {
    /// Load into the server at this address instead of into a data directory.
    #[arg(long)]
    pub url: Option<String>,
    /// API key for the server at --url, sent as `Authorization: Bearer <key>`.
    #[arg(long, env = "TREELINE_API_KEY")]
    pub api_key: Option<String>,
    /// Data directory to load into (when no --url is given).
    #[arg(long, env = "TREELINE_DATA_DIR", default_value = "./treeline-data")]
    pub data_dir: PathBuf,
    /// Delete the data directory's database first.
    #[arg(long, conflicts_with = "url")]
    pub reset: bool,
    /// Scale the 100,000-span trace down to 5,000 spans (for tests).
    #[arg(long)]
    pub small: bool,
}

pub async fn run_command(host: &dyn Host, args: DemoArgs) -> Outcome {
    let options = if args.small {
        Options::small()
    } else {
        Options::full()
    };
    let summary = match &args.url {
        Some(url) => {
            let client = Client::new(url).with_api_key(args.api_key.clone());
            load(&client, &options, &mut stderr_bar()).await?
        }
        None => {
            if args.reset {
                reset(&args.data_dir)?;
            }
            std::fs::create_dir_all(&args.data_dir).with_context(|| {
                format!("cannot create data directory {}", args.data_dir.display())
            })?;
            let url = format!(
                "sqlite:{}",
                args.data_dir.join("treeline.db").to_string_lossy()
            );
            let store = store::open(&url)
                .await
                .context("cannot open the database")?;
            let (base, server) = spawn_api_server(host, store).await?;
            let result = load(&Client::new(&base), &options, &mut stderr_bar()).await;
            server.abort();
            result?
        }
    };
    print_summary(&summary);
    Ok(())
}

/// Deletes the SQLite database (and its WAL files) of a data directory.
fn reset(dir: &Path) -> Outcome {
    for name in ["treeline.db", "treeline.db-wal", "treeline.db-shm"] {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot delete {}", path.display())),
        }
    }
    Ok(())
}

/// Serves the API alone on a free loopback port; returns its base URL.
pub async fn spawn_api_server(
    host: &dyn Host,
    store: Arc<dyn Store>,
) -> Outcome<(String, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen on a loopback port")?;
    let addr: SocketAddr = listener
        .local_addr()
        .context("cannot read the listening address")?;
    let app = axum::Router::new().nest(treeline_wire::routes::API_PREFIX, host.api(store));
    let handle = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("demo server stopped: {e}");
        }
    });
    Ok((format!("http://{addr}"), handle))
}

fn print_summary(summary: &DemoSummary) {
    println!(
        "demo loaded: {} events, {} spans in {:.1} s",
        summary.events,
        summary.spans,
        summary.elapsed.as_secs_f64()
    );
    for run in &summary.runs {
        println!(
            "  {:<20} {:<12} {:>6} traces ({:>5} failed) {:>7} spans   /runs/{}",
            run.run_id, run.project, run.traces, run.errored_traces, run.spans, run.run_id
        );
    }
}
