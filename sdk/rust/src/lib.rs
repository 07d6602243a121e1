//! A small client for Treeline's HTTP API (docs/api.md): create runs, send metric and span
//! event batches. Every batch carries an Idempotency-Key that is kept across its
//! retries, so a retried batch is never stored twice.

use std::time::Duration;

use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use treeline_wire::routes;
use treeline_wire::{BatchResponse, ErrorBody, MetricPoint, RunDetail, RunFinish, RunUpsert};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error that retrying will not fix.
    #[error("{status}: {code}: {message}")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// The server could not be reached (or kept failing) after every retry.
    #[error("gave up after {attempts} attempts: {last}")]
    Unreachable { attempts: u32, last: String },
}

#[derive(Clone)]
pub struct Client {
    base: String,
    api_key: Option<String>,
    http: reqwest::Client,
    /// Attempts per request, the first included.
    pub attempts: u32,
    pub backoff: Duration,
}

impl Client {
    /// `base` is the server's address, such as `http://127.0.0.1:3000`.
    pub fn new(base: &str) -> Self {
        Client {
            base: base.trim_end_matches('/').to_string(),
            api_key: None,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .pool_max_idle_per_host(16)
                .build()
                .unwrap_or_default(),
            attempts: 5,
            backoff: Duration::from_millis(100),
        }
    }

    pub fn with_api_key(mut self, key: Option<String>) -> Self {
        self.api_key = key;
        self
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Creates or updates a run.
    pub async fn put_run(&self, run_id: &str, run: &RunUpsert) -> Result<RunDetail, ClientError> {
        self.send(
            reqwest::Method::PUT,
            &routes::path(routes::RUN, &[run_id]),
            run,
            None,
        )
        .await
    }

    pub async fn finish_run(&self, run_id: &str, finish: &RunFinish) -> Result<Value, ClientError> {
        self.send(
            reqwest::Method::POST,
            &routes::path(routes::RUN_FINISH, &[run_id]),
            finish,
            Some(new_key()),
        )
        .await
    }

    pub async fn send_metrics(
        &self,
        run_id: &str,
        points: &[MetricPoint],
    ) -> Result<BatchResponse, ClientError> {
        let body = json!({ "points": points });
        self.send(
            reqwest::Method::POST,
            &routes::path(routes::RUN_METRICS, &[run_id]),
            &body,
            Some(new_key()),
        )
        .await
    }

    /// Sends span events (open/close objects as in docs/api.md) as one batch.
    pub async fn send_events(
        &self,
        run_id: &str,
        events: &[Value],
    ) -> Result<BatchResponse, ClientError> {
        self.send_events_with_key(run_id, events, &new_key()).await
    }

    pub async fn send_events_with_key(
        &self,
        run_id: &str,
        events: &[Value],
        key: &str,
    ) -> Result<BatchResponse, ClientError> {
        let body = json!({ "events": events });
        self.send(
            reqwest::Method::POST,
            &routes::path(routes::RUN_TRACE_EVENTS, &[run_id]),
            &body,
            Some(key.to_string()),
        )
        .await
    }

    /// POSTs a body that is already JSON, under `key`, with the same retries: for
    /// callers that encode their batches ahead of time.
    pub async fn post_raw<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Vec<u8>,
        key: &str,
    ) -> Result<T, ClientError> {
        self.request(reqwest::Method::POST, path, body, Some(key.to_string()))
            .await
    }

    /// PUTs a JSON body under a new Idempotency-Key, with the same retries.
    pub async fn put_json<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<T, ClientError> {
        self.send(reqwest::Method::PUT, path, body, Some(new_key()))
            .await
    }

    /// GETs an API path and decodes the answer.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(reqwest::Method::GET, path, &(), None).await
    }

    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &B,
        key: Option<String>,
    ) -> Result<T, ClientError> {
        let payload = serde_json::to_vec(body).map_err(|e| ClientError::Api {
            status: 0,
            code: "unserializable".into(),
            message: e.to_string(),
        })?;
        self.request(method, path, payload, key).await
    }

    async fn request<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        payload: Vec<u8>,
        key: Option<String>,
    ) -> Result<T, ClientError> {
        let response = self.respond(method, path, payload, key).await?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ClientError::Unreachable {
                attempts: 1,
                last: e.to_string(),
            })?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Api {
            status: status.as_u16(),
            code: "invalid_response".into(),
            message: e.to_string(),
        })
    }

    /// GETs an API path and hands back the successful response unread, for an answer
    /// to stream (an export).
    pub async fn get_response(&self, path: &str) -> Result<reqwest::Response, ClientError> {
        self.respond(reqwest::Method::GET, path, Vec::new(), None)
            .await
    }

    /// Sends the request, retrying transient failures, until a success (returned
    /// unread) or an error that retrying will not fix.
    async fn respond(
        &self,
        method: reqwest::Method,
        path: &str,
        payload: Vec<u8>,
        key: Option<String>,
    ) -> Result<reqwest::Response, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut last = String::new();
        // A server that sheds load says when to come back (Retry-After, seconds).
        let mut asked_wait = Duration::ZERO;
        for attempt in 0..self.attempts.max(1) {
            if attempt > 0 {
                let jitter = rand::random::<f64>() * 0.5 + 0.75;
                let wait = self.backoff.mul_f64(2f64.powi(attempt as i32 - 1) * jitter);
                let wait = wait.min(Duration::from_secs(10)).max(asked_wait);
                tokio::time::sleep(wait).await;
            }
            let mut request = self.http.request(method.clone(), &url);
            if method != reqwest::Method::GET {
                request = request
                    .header("content-type", "application/json")
                    .body(payload.clone());
            }
            if let Some(key) = &key {
                request = request.header("idempotency-key", key);
            }
            if let Some(api_key) = &self.api_key {
                request = request.bearer_auth(api_key);
            }
            match request.send().await {
                Err(e) => last = e.to_string(),
                Ok(response) => {
                    let status = response.status();
                    if status.is_success() {
                        return Ok(response);
                    }
                    asked_wait = retry_after(response.headers());
                    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
                        last = format!("{status}");
                        continue;
                    }
                    let bytes = response.bytes().await.unwrap_or_default();
                    let error: Option<ErrorBody> = serde_json::from_slice(&bytes).ok();
                    let (code, message) = error
                        .map(|e| (e.error.code, e.error.message))
                        .unwrap_or_else(|| {
                            (
                                "unknown".into(),
                                String::from_utf8_lossy(&bytes).into_owned(),
                            )
                        });
                    return Err(ClientError::Api {
                        status: status.as_u16(),
                        code,
                        message,
                    });
                }
            }
        }
        Err(ClientError::Unreachable {
            attempts: self.attempts.max(1),
            last,
        })
    }
}

/// The wait a `Retry-After` header asks for (whole seconds), at most 60 s.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Duration {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::ZERO, |s| Duration::from_secs(s.min(60)))
}

/// A fresh Idempotency-Key.
pub fn new_key() -> String {
    format!("{:032x}", rand::random::<u128>())
}
