//! `GET /api/compare-runs` (docs/api.md §8.20): several runs' configs and metrics in
//! one answer, for the compare-runs page. One type at both ends, like the trace
//! list's: the page writes it with [`CompareRunsQuery::to_query`], the server reads
//! it with [`CompareRunsQuery::parse`].

use serde::{Deserialize, Serialize};

use crate::query::QueryParams;
use crate::stats::check_steps;
use crate::{check_id, Invalid, MetricSeries, RunDetail};

/// The most runs one comparison takes: past it, lines stop being told apart.
pub const COMPARE_RUNS_MAX: usize = 20;
/// The most metrics one answer draws.
pub const COMPARE_KEYS_MAX: usize = 16;
/// The metrics drawn when none are named: the most shared first.
pub const COMPARE_KEYS_DEFAULT: usize = 8;
/// Points per line by default: about one per pixel of a chart.
pub const COMPARE_POINTS: usize = 400;

/// The runs to compare (in the order given, repeats dropped), the metrics to draw
/// (none: the most shared ones), points per line, and a step range.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareRunsQuery {
    pub runs: Vec<String>,
    pub keys: Vec<String>,
    pub max_points: usize,
    pub min_step: Option<i64>,
    pub max_step: Option<i64>,
}

impl CompareRunsQuery {
    pub fn new(runs: Vec<String>) -> Self {
        CompareRunsQuery {
            runs,
            keys: Vec::new(),
            max_points: COMPARE_POINTS,
            min_step: None,
            max_step: None,
        }
    }

    /// Reads `run=` (repeated, 1 to [`COMPARE_RUNS_MAX`]), `key=` (repeated, at
    /// most [`COMPARE_KEYS_MAX`]), `max_points`, `min_step` and `max_step`.
    pub fn parse(raw: &str) -> Result<CompareRunsQuery, Invalid> {
        let p = QueryParams::new(raw);
        let mut runs: Vec<String> = Vec::new();
        for run in p.all("run") {
            check_id(run, "run")?;
            if !runs.iter().any(|r| r == run) {
                runs.push(run.to_string());
            }
        }
        if runs.is_empty() {
            return Err(Invalid::new(
                "missing_parameter",
                "run is required: name each run to compare as run=RUN_ID",
            ));
        }
        if runs.len() > COMPARE_RUNS_MAX {
            return Err(Invalid::new(
                "too_many_runs",
                format!(
                    "{} runs given; a comparison takes at most {COMPARE_RUNS_MAX}",
                    runs.len()
                ),
            ));
        }
        let mut keys: Vec<String> = Vec::new();
        for key in p.all("key") {
            if key.len() > 256 {
                return Err(Invalid::new(
                    "invalid_parameter",
                    "key must be a metric key of 1-256 bytes",
                ));
            }
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_string());
            }
        }
        if keys.len() > COMPARE_KEYS_MAX {
            return Err(Invalid::new(
                "invalid_parameter",
                format!(
                    "{} keys given; a comparison draws at most {COMPARE_KEYS_MAX}",
                    keys.len()
                ),
            ));
        }
        let max_points = p.max_points(COMPARE_POINTS)?;
        let (min_step, max_step) = (p.non_negative("min_step")?, p.non_negative("max_step")?);
        check_steps(min_step, max_step, ("min_step", "max_step"))?;
        Ok(CompareRunsQuery {
            runs,
            keys,
            max_points,
            min_step,
            max_step,
        })
    }

    /// The query string [`CompareRunsQuery::parse`] reads back as `self`.
    pub fn to_query(&self) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for run in &self.runs {
            out.append_pair("run", run);
        }
        for key in &self.keys {
            out.append_pair("key", key);
        }
        if self.max_points != COMPARE_POINTS {
            out.append_pair("max_points", &self.max_points.to_string());
        }
        if let Some(s) = self.min_step {
            out.append_pair("min_step", &s.to_string());
        }
        if let Some(s) = self.max_step {
            out.append_pair("max_step", &s.to_string());
        }
        out.finish()
    }
}

/// The answer of `GET /api/compare-runs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunComparison {
    /// The runs, in the order asked, each with its config and metric keys.
    pub runs: Vec<RunDetail>,
    /// Every metric key of the runs with how many of them logged it: the most
    /// shared first, then by name.
    pub keys: Vec<KeyCoverage>,
    /// The metrics asked for (or the first [`COMPARE_KEYS_DEFAULT`] of `keys`), each
    /// with a line for every run that logged it.
    pub metrics: Vec<ComparedMetric>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyCoverage {
    pub key: String,
    pub runs: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComparedMetric {
    pub key: String,
    /// One per run that logged the key, in the order of `runs`.
    pub series: Vec<RunSeries>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSeries {
    pub run_id: String,
    #[serde(flatten)]
    pub series: MetricSeries,
}

/// Every key of `runs` with how many of them logged it, the most shared first.
pub fn key_coverage(runs: &[RunDetail]) -> Vec<KeyCoverage> {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for run in runs {
        for key in &run.metric_keys {
            *counts.entry(key.as_str()).or_default() += 1;
        }
    }
    let mut keys: Vec<KeyCoverage> = counts
        .into_iter()
        .map(|(key, runs)| KeyCoverage {
            key: key.to_string(),
            runs,
        })
        .collect();
    // Stable: keys with the same count stay in name order.
    keys.sort_by_key(|k| std::cmp::Reverse(k.runs));
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_reads_back_as_written() {
        let q = CompareRunsQuery {
            runs: vec!["a.b".into(), "c".into()],
            keys: vec!["train/loss".into()],
            max_points: 100,
            min_step: Some(3),
            max_step: Some(9),
        };
        assert_eq!(CompareRunsQuery::parse(&q.to_query()), Ok(q));
        let plain = CompareRunsQuery::new(vec!["a".into(), "b".into()]);
        assert_eq!(plain.to_query(), "run=a&run=b");
    }

    #[test]
    fn bad_queries_name_their_field() {
        let err = |raw: &str| CompareRunsQuery::parse(raw).unwrap_err();
        assert_eq!(err("").code, "missing_parameter");
        let many: Vec<String> = (0..21).map(|i| format!("run=r{i}")).collect();
        let e = err(&many.join("&"));
        assert_eq!(e.code, "too_many_runs");
        assert!(e.message.contains("21 runs"), "{}", e.message);
        assert!(err("run=a&max_points=1").message.contains("max_points"));
        assert!(err("run=a&min_step=9&max_step=3")
            .message
            .contains("min_step"));
        let keys: Vec<String> = (0..17).map(|i| format!("key=k{i}")).collect();
        assert!(err(&format!("run=a&{}", keys.join("&")))
            .message
            .contains("keys"));
        // Repeats count once: 21 mentions of 20 runs are 20 runs.
        let mut twenty: Vec<String> = (0..20).map(|i| format!("run=r{i}")).collect();
        twenty.push("run=r0".into());
        assert_eq!(
            CompareRunsQuery::parse(&twenty.join("&")).map(|q| q.runs.len()),
            Ok(20)
        );
    }
}
