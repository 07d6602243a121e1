//! `treeline bench …`: benchmarks that print their figures.

mod bytes;
mod compare;
mod fleet;
mod fuzz;
mod huge;
mod ingest;
mod otlp;
mod query;
mod rng;
mod rollouts;
mod run_compare;
mod soak;
mod text;

pub use bytes::{bytes, BytesArgs};
pub use compare::{compare, CompareArgs};
pub use fuzz::{fuzz, FuzzArgs};
pub use huge::{huge, HugeArgs};
pub use ingest::{ingest, IngestArgs};
pub use otlp::{otlp, OtlpArgs};
pub use query::{query, QueryArgs};
pub use rollouts::{rollouts, RolloutsArgs};
pub use run_compare::{run_compare, RunCompareArgs};
pub use soak::{soak, SoakArgs};
pub use text::{text, TextArgs};

use crate::failure::{Context, Outcome};
use std::time::Duration;

use crate::{store, Host};

/// Starts a server of the benchmark's own on a free loopback port, on `url` or on
/// SQLite in a temporary directory (kept alive by the returned guard).
pub async fn start_server(
    host: &dyn Host,
    url: Option<String>,
) -> Outcome<(String, Option<tempfile::TempDir>)> {
    let (base, dir, _) = start_server_with(host, url, false).await?;
    Ok((base, dir))
}

/// [`start_server`], and with `with_key` a stored write key (returned) that the
/// server then asks every request for, as a team server does.
pub async fn start_server_with(
    host: &dyn Host,
    url: Option<String>,
    with_key: bool,
) -> Outcome<(String, Option<tempfile::TempDir>, Option<String>)> {
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let url = url.unwrap_or_else(|| format!("sqlite:{}", dir.path().join("bench.db").display()));
    let store = store::open(&url)
        .await
        .with_context(|| format!("cannot open {url}"))?;
    let key = if with_key {
        Some(bench_key(host, store.as_ref()).await?)
    } else {
        None
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen on a loopback port")?;
    let addr = listener
        .local_addr()
        .context("cannot read the listening address")?;
    let app = host.app(store, addr);
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!(
        "server: {} on http://{addr}{}",
        if url.starts_with("sqlite:") {
            "SQLite"
        } else {
            "PostgreSQL"
        },
        if with_key {
            ", every request checked against a stored write key"
        } else {
            ", no keys"
        }
    );
    Ok((format!("http://{addr}"), Some(dir), key))
}

async fn bench_key(host: &dyn Host, store: &dyn store::Store) -> Outcome<String> {
    let new = host.new_write_key("bench")?;
    store
        .access()
        .create_key(&new.record, &new.digest)
        .await
        .context("cannot store the bench key")?;
    Ok(new.key)
}

/// A benchmark's store: `url`, or a SQLite file `file` in `dir`; with the run
/// `run_id` of `project` made in it. Also the store's URL, for the report.
pub(crate) async fn run_store(
    url: Option<String>,
    dir: &std::path::Path,
    file: &str,
    (run_id, project): (&str, &str),
) -> Outcome<(String, std::sync::Arc<dyn store::Store>)> {
    let url = url.unwrap_or_else(|| format!("sqlite:{}", dir.join(file).display()));
    let store = store::open(&url)
        .await
        .with_context(|| format!("cannot open {url}"))?;
    let run = treeline_wire::RunUpsert {
        project: project.into(),
        ..Default::default()
    };
    store
        .upsert_run(run_id, &run, 1)
        .await
        .context("creating the benchmark run")?;
    Ok((url, store))
}

/// The `p` quantile (0..=1) of durations sorted ascending; zero when there are none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(i).copied().unwrap_or_default()
}
