//! The soak's servers: real `treeline serve` processes of this same binary on one
//! database, which the soak may kill with SIGKILL and start again on the same port.

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use crate::failure::{Context, Failure, Outcome};
use crate::process::{spawn_serve, wait_healthy, Storage};

/// How long a server may take to answer its first health check: a debug build
/// migrating a fresh PostgreSQL database while the tests' other builds share two
/// cores once took longer than 30 s.
const START_WAIT: Duration = Duration::from_secs(90);
/// Lines of a server's log that a failed start reports.
const LOG_TAIL: usize = 20;

pub(crate) struct Fleet {
    exe: PathBuf,
    /// Held until the fleet goes, unless its logs are kept.
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    database_url: Option<String>,
    /// A replica of `database_url` that the servers' query routes read.
    read_url: Option<String>,
    servers: Vec<Server>,
}

struct Server {
    addr: String,
    child: Option<Child>,
    /// The largest peak resident memory of any of this server's processes, in MiB.
    peak_mib: u64,
}

impl Fleet {
    /// Starts `count` servers one after another (the first applies the migrations),
    /// on `database_url` or on SQLite in a temporary directory.
    pub(crate) async fn start(
        count: usize,
        database_url: Option<String>,
        read_url: Option<String>,
    ) -> Outcome<Fleet> {
        let exe = std::env::current_exe().context("cannot find this program's path")?;
        let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
        let mut fleet = Fleet {
            exe,
            root: dir.path().to_path_buf(),
            dir: Some(dir),
            database_url,
            read_url,
            servers: Vec::new(),
        };
        for _ in 0..count {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")
                .context("cannot find a free loopback port")?;
            let addr = listener
                .local_addr()
                .context("cannot read a loopback address")?
                .to_string();
            drop(listener);
            fleet.servers.push(Server {
                addr,
                child: None,
                peak_mib: 0,
            });
            fleet.restart(fleet.servers.len() - 1).await?;
        }
        Ok(fleet)
    }

    pub(crate) fn bases(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| format!("http://{}", s.addr))
            .collect()
    }

    /// Where server `i` writes its log.
    /// The database the servers share, as a store URL.
    pub(crate) fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!(
                "sqlite:{}",
                self.root
                    .join("data")
                    .join(treeline_store::SQLITE_FILE)
                    .display()
            ),
        }
    }

    pub(crate) fn log_path(&self, i: usize) -> PathBuf {
        self.root.join(format!("server-{i}.log"))
    }

    /// Starts server `i` (again), and waits until it answers its health check.
    pub(crate) async fn restart(&mut self, i: usize) -> Outcome {
        let log = self.log_path(i);
        let data = self.root.join("data");
        let storage = match (&self.database_url, &self.read_url) {
            (Some(primary), Some(replica)) => Storage::Replicated { primary, replica },
            (Some(url), None) => Storage::Database(url),
            (None, _) => Storage::DataDir(&data),
        };
        let Some(server) = self.servers.get_mut(i) else {
            return Err(Failure::msg(format!("there is no server {i}")));
        };
        let child = spawn_serve(&self.exe, &server.addr, storage, &log)
            .context("cannot start treeline serve")?;
        server.child = Some(child);
        let base = format!("http://{}", server.addr);
        if wait_healthy(&base, START_WAIT).await {
            return Ok(());
        }
        // The log's directory goes with the fleet: what it says is kept here.
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = said.lines().rev().take(LOG_TAIL).collect();
        Err(Failure::msg(format!(
            "server {i} did not answer {base}{} within {} s; the end of its log:\n{}",
            treeline_wire::routes::HEALTH,
            START_WAIT.as_secs(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )))
    }

    /// Kills server `i` with SIGKILL, as a power cut or the OOM killer would.
    pub(crate) fn kill(&mut self, i: usize) -> Outcome {
        let Some(server) = self.servers.get_mut(i) else {
            return Err(Failure::msg(format!("there is no server {i}")));
        };
        if let Some(mut child) = server.child.take() {
            server.peak_mib = server.peak_mib.max(peak_rss_mib(child.id()).unwrap_or(0));
            child.kill().context("cannot kill a server")?;
            child.wait().context("cannot reap a killed server")?;
        }
        Ok(())
    }

    /// Each server's peak resident memory so far, in MiB (0 where unknown).
    pub(crate) fn peaks(&self) -> Vec<u64> {
        self.servers
            .iter()
            .map(|s| {
                let now = s.child.as_ref().and_then(|c| peak_rss_mib(c.id()));
                s.peak_mib.max(now.unwrap_or(0))
            })
            .collect()
    }
}

impl Fleet {
    /// Keeps the temporary directory (the logs, and a SQLite database) after the
    /// fleet is gone, and says where it is.
    pub(crate) fn keep_logs(&mut self) -> Option<PathBuf> {
        self.dir.take().map(tempfile::TempDir::keep)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for server in &mut self.servers {
            if let Some(mut child) = server.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// A process's peak resident set (VmHWM) in MiB, where the system reports it.
pub(crate) fn peak_rss_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 1024)
}
