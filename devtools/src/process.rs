//! `treeline serve` as a child process, started and waited for: the soak's fleet and
//! the server's integration tests start servers this one way.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where a started server keeps its data.
pub enum Storage<'a> {
    /// A SQLite file in this directory.
    DataDir(&'a Path),
    /// A PostgreSQL database.
    Database(&'a str),
    /// A PostgreSQL database, whose query routes read a streaming replica of it.
    Replicated { primary: &'a str, replica: &'a str },
}

/// Starts `exe serve` on `addr`, its output appended to the file `log`.
pub fn spawn_serve(exe: &Path, addr: &str, storage: Storage, log: &Path) -> std::io::Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let err = out.try_clone()?;
    let mut command = Command::new(exe);
    command.args(["serve", "--addr", addr]);
    match storage {
        Storage::DataDir(dir) => command.arg("--data-dir").arg(dir),
        Storage::Database(url) => command.args(["--database-url", url]),
        Storage::Replicated { primary, replica } => {
            command.args(["--database-url", primary, "--read-database-url", replica])
        }
    };
    command.stdin(Stdio::null()).stdout(out).stderr(err).spawn()
}

/// Waits until the server at `base` (`http://host:port`) answers its health check,
/// for at most `within`: whether it did.
pub async fn wait_healthy(base: &str, within: Duration) -> bool {
    let health = format!("{base}{}", treeline_wire::routes::HEALTH);
    let http = reqwest::Client::new();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let answered = http
            .get(&health)
            .timeout(Duration::from_secs(1))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if answered {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
