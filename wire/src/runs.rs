use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{check_project, Invalid, RunStatus};

/// `PUT /api/runs/{run_id}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunUpsert {
    pub project: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_us: Option<i64>,
}

impl RunUpsert {
    pub fn validate(&self) -> Result<(), Invalid> {
        check_project(&self.project)?;
        if self.name.as_ref().is_some_and(|n| n.contains('\0')) {
            return Err(Invalid::new(
                "invalid_string",
                "name contains a NUL character (\\u0000), which cannot be stored",
            ));
        }
        if let Some(config) = &self.config {
            crate::limits::check_no_nul(config, "config")?;
        }
        if self.name.as_ref().is_some_and(|n| n.chars().count() > 256) {
            return Err(Invalid::new(
                "invalid_name",
                "name must be at most 256 characters",
            ));
        }
        if let Some(start) = self.start_us {
            crate::limits::check_timestamp(start, "start_us")?;
        }
        if let Some(config) = &self.config {
            use crate::limits::MAX_CONFIG_BYTES;
            let size = serde_json::to_string(config).map_or(0, |t| t.len());
            if size > MAX_CONFIG_BYTES {
                return Err(Invalid::new(
                    "invalid_config",
                    format!("config is {size} bytes as JSON; the limit is {MAX_CONFIG_BYTES}"),
                ));
            }
        }
        Ok(())
    }
}

/// The answer of `POST /api/projects/{project}/daily-run`: the project's run of the
/// day, where a tracer with a project and no run of its own writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DailyRun {
    pub run_id: String,
    pub name: String,
    pub project: String,
    /// The UTC day, `YYYY-MM-DD`.
    pub date: String,
}

/// The name OTLP gives a project's run of one UTC day (`date` is `YYYY-MM-DD`).
pub fn daily_run_name(project: &str, date: &str) -> String {
    format!("{project} {date} {DAILY_SUFFIX}")
}

const DAILY_SUFFIX: &str = "(OpenTelemetry)";

/// The day (`YYYY-MM-DD`) of a project's daily OTLP run, when `name` is one: such a
/// run shows its last activity rather than a duration, and is finished once its day
/// is over.
pub fn daily_run_date<'a>(project: &str, name: &'a str) -> Option<&'a str> {
    let date = name
        .strip_prefix(project)?
        .strip_prefix(' ')?
        .strip_suffix(DAILY_SUFFIX)?
        .strip_suffix(' ')?;
    let shape = date.len() == 10
        && date.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    shape.then_some(date)
}

/// `POST /api/runs/{run_id}/finish`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFinish {
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_us: Option<i64>,
}

impl RunFinish {
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.status == RunStatus::Running {
            return Err(Invalid::new(
                "invalid_status",
                "status must be \"finished\" or \"failed\"",
            ));
        }
        if let Some(end) = self.end_us {
            crate::limits::check_timestamp(end, "end_us")?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    pub project: String,
    pub name: String,
    pub status: RunStatus,
    pub start_us: i64,
    pub end_us: Option<i64>,
    pub trace_count: i64,
    /// Traces with a failure anywhere in them: their root's, or a span's beneath.
    pub error_trace_count: i64,
    /// Traces whose root failed (a part of `error_trace_count`; the rest had a failure
    /// beneath a root that did not fail).
    #[serde(default)]
    pub failed_trace_count: i64,
    pub updated_us: i64,
    /// An estimate of the bytes the run takes on disk, indexes included: its share of
    /// the database's size, in proportion to what its spans, bodies and metric points
    /// brought (docs/api.md §8.2 says how it is made).
    #[serde(default)]
    pub size_bytes: i64,
    /// The summary columns asked for, in their order (`null` where a run has no
    /// such metric or config value); absent when none were asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDetail {
    #[serde(flatten)]
    pub summary: RunSummary,
    pub config: Value,
    pub metric_keys: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunList {
    pub runs: Vec<RunSummary>,
    pub next_cursor: Option<String>,
    /// The summary columns each run's `values` answer, as asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectSummary {
    pub name: String,
    pub runs: i64,
    pub traces: i64,
    pub updated_us: i64,
    /// The estimated bytes its runs take on disk: the sum of their `size_bytes`.
    #[serde(default)]
    pub size_bytes: i64,
    /// The project's retention policy; absent when it keeps everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::retention::RetentionPolicy>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectList {
    pub projects: Vec<ProjectSummary>,
}

/// Bytes for a person: three figures and a decimal unit ("812 B", "4.07 MB").
pub fn human_bytes(bytes: i64) -> String {
    const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    let mut value = bytes.max(0) as f64;
    let mut unit = 0;
    // 999.5 and up would print as "1000" in the unit below.
    while value >= 999.5 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B", bytes = bytes.max(0)),
        _ if value < 9.995 => format!("{value:.2} {}", UNITS[unit]),
        _ if value < 99.95 => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.0} {}", UNITS[unit]),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_in_three_figures() {
        let cases = [
            (0, "0 B"),
            (-5, "0 B"),
            (999, "999 B"),
            (1_000, "1.00 kB"),
            (4_070_000, "4.07 MB"),
            (12_345_678, "12.3 MB"),
            (999_499_999, "999 MB"),
            (999_500_000, "1.00 GB"),
            (i64::MAX, "9.22 EB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(super::human_bytes(bytes), text, "{bytes}");
        }
    }

    #[test]
    fn a_daily_run_is_known_by_its_project_and_name() {
        let name = super::daily_run_name("my agent", "2026-12-03");
        assert_eq!(name, "my agent 2026-12-03 (OpenTelemetry)");
        assert_eq!(super::daily_run_date("my agent", &name), Some("2026-12-03"));
        assert_eq!(super::daily_run_date("other", &name), None);
        assert_eq!(
            super::daily_run_date("p", "p 2026-1-03 (OpenTelemetry)"),
            None
        );
        assert_eq!(super::daily_run_date("p", "p my run"), None);
    }

    use super::*;

    #[test]
    fn a_config_past_a_megabyte_is_refused_by_name() {
        let run = |config: Value| RunUpsert {
            project: "p".into(),
            config: Some(config),
            ..Default::default()
        };
        assert!(run(serde_json::json!({"lr": 0.001})).validate().is_ok());
        let big = run(serde_json::json!({"blob": "x".repeat(1024 * 1024)}));
        let e = big.validate().expect_err("too big");
        assert_eq!(e.code, "invalid_config");
        assert!(e.message.starts_with("config is "), "{}", e.message);
    }
}
