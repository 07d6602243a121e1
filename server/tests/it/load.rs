//! The fuzz and soak commands, short, on real server processes: what `treeline bench
//! fuzz` and `treeline bench soak` report in full (README) is kept true by every run
//! of the tests. Each command exits non-zero on any 5xx but 503, a request left
//! unanswered, a panic in the server's log, or an acknowledged trace or metric point
//! lost or stored twice.

use std::process::Command;

/// Runs `treeline bench` with `args` (split on spaces) and then `more`.
fn bench(args: &str, more: &[&str]) {
    let args: Vec<&str> = args
        .split_whitespace()
        .chain(more.iter().copied())
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_treeline"))
        .arg("bench")
        .args(&args)
        .output()
        .expect("treeline bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "treeline bench {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{stdout}");
}

#[test]
fn fuzzed_requests_get_answers_below_500_on_sqlite() {
    bench("fuzz --requests 3000 --seed 7", &[]);
}

#[test]
fn a_soak_with_kill_9s_loses_nothing_and_stores_nothing_twice() {
    bench("soak --seconds 8 --writers 8 --readers 2 --kill 2", &[]);
}

#[tokio::test]
async fn fuzzed_requests_get_answers_below_500_on_postgres() {
    let url = crate::common::postgres_url().await;
    bench("fuzz --requests 3000 --seed 8 --database-url", &[&url]);
}

/// Scale-out: two processes on one PostgreSQL database, writers split across them
/// (odd writers alternate per batch, as behind a load balancer), one killed mid-soak.
#[tokio::test]
async fn two_servers_on_one_postgres_lose_nothing_and_agree() {
    let url = crate::common::postgres_url().await;
    bench(
        "soak --seconds 8 --writers 8 --readers 2 --servers 2 --kill 1 --database-url",
        &[&url],
    );
}

/// Data removed beside ingest: a run deleted halfway and a project's old traces
/// removed by retention while the writers write; nothing else goes, and the old
/// open traces stay.
#[test]
fn a_soak_beside_a_deletion_and_retention_loses_nothing_else() {
    bench(
        "soak --seconds 8 --writers 8 --readers 2 --kill 1 --churn",
        &[],
    );
}

#[tokio::test]
async fn a_soak_beside_a_deletion_and_retention_loses_nothing_else_on_postgres() {
    let url = crate::common::postgres_url().await;
    bench(
        "soak --seconds 8 --writers 8 --readers 2 --servers 2 --churn --database-url",
        &[&url],
    );
}
