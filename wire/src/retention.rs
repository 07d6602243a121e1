//! A project's retention policy: how long its traces are kept, and whether a run's
//! metrics outlive them.

use serde::{Deserialize, Serialize};

use crate::Invalid;

/// The longest window a policy may keep traces for (about a century): a bound, so
/// that "now minus the window" cannot wrap.
pub const MAX_TRACES_DAYS: u32 = 36_500;

/// What becomes of a run once retention has removed all its traces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricsRule {
    /// The run and its metrics stay, with no traces.
    #[default]
    Keep,
    /// The run goes whole, metrics included, once it has finished, has no traces
    /// left and has not been written to within the window.
    Drop,
}

impl MetricsRule {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricsRule::Keep => "keep",
            MetricsRule::Drop => "drop",
        }
    }
}

/// `PUT /api/projects/{project}/retention`'s body, and the policy a project has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionPolicy {
    /// Traces not updated for this many days are removed (open traces never are).
    pub traces_days: u32,
    #[serde(default)]
    pub metrics: MetricsRule,
}

impl RetentionPolicy {
    /// Reads a policy from a request body, naming the field at fault.
    pub fn from_json(body: &serde_json::Value) -> Result<Self, Invalid> {
        let Some(fields) = body.as_object() else {
            return Err(Invalid::new(
                "invalid_body",
                "the body must be a JSON object such as {\"traces_days\": 30}",
            ));
        };
        if let Some(unknown) = fields
            .keys()
            .find(|k| !matches!(k.as_str(), "traces_days" | "metrics"))
        {
            return Err(Invalid::new(
                "invalid_body",
                format!("unknown field {unknown:?}; a policy has traces_days and metrics"),
            ));
        }
        let days = fields
            .get("traces_days")
            .ok_or_else(|| Invalid::new("invalid_traces_days", "traces_days is required"))?;
        let traces_days = days
            .as_u64()
            .and_then(|d| u32::try_from(d).ok())
            .unwrap_or(0);
        let metrics = match fields.get("metrics").map(|m| m.as_str()) {
            None | Some(Some("keep")) => MetricsRule::Keep,
            Some(Some("drop")) => MetricsRule::Drop,
            Some(_) => {
                return Err(Invalid::new(
                    "invalid_metrics",
                    "metrics must be \"keep\" or \"drop\"",
                ))
            }
        };
        let policy = RetentionPolicy {
            traces_days,
            metrics,
        };
        policy.validate()?;
        Ok(policy)
    }

    pub fn validate(&self) -> Result<(), Invalid> {
        if self.traces_days == 0 || self.traces_days > MAX_TRACES_DAYS {
            return Err(Invalid::new(
                "invalid_traces_days",
                format!("traces_days must be between 1 and {MAX_TRACES_DAYS}"),
            ));
        }
        Ok(())
    }

    /// Traces last updated before this time (µs since the epoch) are past the window.
    pub fn cutoff_us(&self, now_us: i64) -> i64 {
        now_us.saturating_sub(i64::from(self.traces_days).saturating_mul(86_400_000_000))
    }

    /// "traces kept 30 days, metrics kept": how the dashboard and the CLI say it.
    pub fn describe(&self) -> String {
        let days = if self.traces_days == 1 { "day" } else { "days" };
        let metrics = match self.metrics {
            MetricsRule::Keep => "metrics kept",
            MetricsRule::Drop => "runs without traces removed",
        };
        format!("traces kept {} {days}, {metrics}", self.traces_days)
    }
}

/// What a policy would remove now, counted without removing anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionPreview {
    /// Closed traces past the window.
    pub traces: i64,
    /// Their spans.
    pub spans: i64,
    /// Traces past the window that are still open, and so stay.
    pub open_kept: i64,
    /// Runs that would go whole (`metrics: "drop"` only).
    pub runs: i64,
}

/// The answer to setting (or trying) a project's policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionAnswer {
    pub project: String,
    /// The policy now in force; `None` when the project keeps everything.
    pub policy: Option<RetentionPolicy>,
    /// What the policy asked for would remove now.
    pub preview: RetentionPreview,
    /// True when nothing was saved (`?dry_run=true`).
    pub dry_run: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_bounded_and_its_cutoff_saturates() {
        let p = RetentionPolicy {
            traces_days: 0,
            metrics: MetricsRule::Keep,
        };
        assert_eq!(p.validate().unwrap_err().code, "invalid_traces_days");
        let p = RetentionPolicy {
            traces_days: MAX_TRACES_DAYS,
            ..p
        };
        assert!(p.validate().is_ok());
        assert_eq!(p.cutoff_us(i64::MIN), i64::MIN);
        let day = RetentionPolicy {
            traces_days: 1,
            ..p
        };
        assert_eq!(day.cutoff_us(86_400_000_001), 1);
        assert_eq!(day.describe(), "traces kept 1 day, metrics kept");
    }

    #[test]
    fn metrics_default_to_kept_and_unknown_fields_are_refused() {
        let p: RetentionPolicy = serde_json::from_str(r#"{"traces_days": 30}"#).unwrap();
        assert_eq!(p.metrics, MetricsRule::Keep);
        assert!(serde_json::from_str::<RetentionPolicy>(r#"{"traces_day": 30}"#).is_err());
        assert!(serde_json::from_str::<RetentionPolicy>(r#"{"traces_days": -1}"#).is_err());
    }

    #[test]
    fn a_body_names_the_field_at_fault() {
        let read = |v: serde_json::Value| RetentionPolicy::from_json(&v);
        let p = read(serde_json::json!({"traces_days": 7, "metrics": "drop"})).unwrap();
        assert_eq!((p.traces_days, p.metrics), (7, MetricsRule::Drop));
        for (bad, field) in [
            (serde_json::json!({"traces_days": -3}), "traces_days"),
            (serde_json::json!({"traces_days": 2.5}), "traces_days"),
            (serde_json::json!({"metrics": "keep"}), "traces_days"),
            (
                serde_json::json!({"traces_days": 3, "metrics": 1}),
                "metrics",
            ),
            (serde_json::json!({"traces_days": 3, "days": 1}), "days"),
            (serde_json::json!([30]), "traces_days"),
        ] {
            let e = read(bad.clone()).unwrap_err();
            assert!(e.message.contains(field), "{bad}: {}", e.message);
        }
    }
}
