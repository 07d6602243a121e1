//! Sending a batch until it is acknowledged, under one Idempotency-Key, and counting
//! every answer on the way by kind.

use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a batch is retried before the soak gives up on it (and reports it).
const GIVE_UP_AFTER: Duration = Duration::from_secs(120);
/// Problems kept word for word; past these only the counts grow.
const PROBLEMS_KEPT: usize = 5;

/// Answers other than a plain success, by kind.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tally {
    /// 503s: the server shed load and said when to come back.
    pub(crate) shed: u64,
    /// No answer: the server was down (killed) or the connection broke.
    pub(crate) unreachable: u64,
    /// Any other 5xx: a server fault.
    pub(crate) server_errors: u64,
    /// 4xx, or events rejected inside a 200: the soak sent something the server
    /// thinks is wrong, which is a bug on one side or the other.
    pub(crate) refused: u64,
    pub(crate) problems: Vec<String>,
}

impl Tally {
    pub(crate) fn add(&mut self, other: &Tally) {
        self.shed += other.shed;
        self.unreachable += other.unreachable;
        self.server_errors += other.server_errors;
        self.refused += other.refused;
        for problem in &other.problems {
            self.note(problem.clone());
        }
    }

    pub(crate) fn note(&mut self, problem: String) {
        if self.problems.len() < PROBLEMS_KEPT {
            self.problems.push(problem);
        }
    }
}

/// The seconds a `Retry-After` header asks for, at most 10.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let seconds: u64 = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds.min(10)))
}

/// POSTs `body` to `url` until a 2xx, retrying 5xx and broken connections under the
/// same key. Answers the acknowledgement, or None when the batch was refused or
/// given up on (counted in `tally`).
pub(crate) async fn deliver(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
    tally: &mut Tally,
) -> Option<Value> {
    let key = treeline_client::new_key();
    let payload = serde_json::to_vec(body).unwrap_or_default();
    let started = Instant::now();
    loop {
        let sent = http
            .post(url)
            .header("content-type", "application/json")
            .header("idempotency-key", &key)
            .body(payload.clone())
            .send()
            .await;
        let wait = match sent {
            Err(_) => {
                tally.unreachable += 1;
                Duration::from_millis(100)
            }
            Ok(response) if response.status().is_success() => {
                let answer: Value = response.json().await.unwrap_or_default();
                if answer["rejected"].as_array().is_some_and(|r| !r.is_empty()) {
                    tally.refused += 1;
                    tally.note(format!("{url}: events rejected: {}", answer["rejected"]));
                }
                return Some(answer);
            }
            Ok(response) if response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                tally.shed += 1;
                retry_after(&response).unwrap_or(Duration::from_secs(1))
            }
            Ok(response) => {
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                tally.note(format!("{url}: {status}: {text}"));
                if !status.is_server_error() {
                    tally.refused += 1;
                    return None;
                }
                tally.server_errors += 1;
                Duration::from_millis(200)
            }
        };
        if started.elapsed() > GIVE_UP_AFTER {
            tally.note(format!(
                "{url}: no acknowledgement within {} s",
                GIVE_UP_AFTER.as_secs()
            ));
            tally.refused += 1;
            return None;
        }
        tokio::time::sleep(wait).await;
    }
}
