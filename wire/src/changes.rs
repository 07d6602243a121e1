//! What changed between two step ranges of a run (docs/api.md §8.18): span names
//! whose failure rate, count, duration or tokens moved, error types that appeared
//! or grew, and root attributes whose distribution moved, strongest first.

use serde::{Deserialize, Serialize};

use crate::query::{ListQuery, QueryParams};
use crate::stats::{check_filter_count, check_steps, STATS_MAX_FILTERS};
use crate::Invalid;

/// Rows answered at most.
pub const CHANGES_MAX: usize = 50;

/// `GET /api/runs/{run_id}/changes`, checked. The list's filters apply to both
/// ranges.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangesQuery {
    pub list: ListQuery,
    /// The pinned range, inclusive.
    pub steps: (i64, i64),
    /// The range it is compared with; by default as many steps just before it.
    pub baseline: (i64, i64),
}

impl ChangesQuery {
    pub fn parse(raw: &str) -> Result<ChangesQuery, Invalid> {
        let list = ListQuery::parse(raw)?;
        let p = QueryParams::new(raw);
        let (Some(min), Some(max)) = (list.min_step, list.max_step) else {
            return Err(Invalid::new(
                "invalid_parameter",
                "min_step and max_step are required: the steps to explain",
            ));
        };
        let base_min = p.non_negative("baseline_min_step")?;
        let base_max = p.non_negative("baseline_max_step")?;
        ChangesQuery::new(list, (min, max), (base_min, base_max))
    }

    /// The steps `steps` of `list`'s traces against `baseline`'s bounds; a bound
    /// left out keeps the pinned range's length, and with both left out the
    /// baseline is as many steps just before.
    pub fn new(
        list: ListQuery,
        (min, max): (i64, i64),
        (base_min, base_max): (Option<i64>, Option<i64>),
    ) -> Result<ChangesQuery, Invalid> {
        check_steps(Some(min), Some(max), ("min_step", "max_step"))?;
        check_steps(
            base_min,
            base_max,
            ("baseline_min_step", "baseline_max_step"),
        )?;
        // Steps less one: saturating, as a step may be any non-negative integer.
        let span = max.saturating_sub(min);
        let baseline = match (base_min, base_max) {
            (Some(a), Some(b)) => (a, b),
            (Some(a), None) => (a, a.saturating_add(span)),
            (None, Some(b)) => (b.saturating_sub(span).max(0), b),
            (None, None) if min == 0 => {
                return Err(Invalid::new(
                    "invalid_parameter",
                    "min_step is 0, so no steps come before it: give baseline_min_step and \
                     baseline_max_step",
                ))
            }
            (None, None) => (min.saturating_sub(span).saturating_sub(1).max(0), min - 1),
        };
        check_filter_count(&list, STATS_MAX_FILTERS)?;
        Ok(ChangesQuery {
            list: ListQuery {
                min_step: None,
                max_step: None,
                limit: None,
                ..list
            },
            steps: (min, max),
            baseline,
        })
    }

    pub fn to_query(&self) -> String {
        ListQuery {
            min_step: Some(self.steps.0),
            max_step: Some(self.steps.1),
            ..self.list.clone()
        }
        .to_query_with(vec![
            ("baseline_min_step", Some(self.baseline.0.to_string())),
            ("baseline_max_step", Some(self.baseline.1.to_string())),
        ])
    }
}

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The share of traces in which a span of the name failed.
    Failures,
    /// Spans of the name per trace.
    Count,
    /// The mean duration of a span of the name, in microseconds.
    Duration,
    /// Tokens of spans of the name per trace.
    Tokens,
    /// The share of traces with a failed span whose error is of the type.
    ErrorType,
    /// A numeric root attribute's median.
    Number,
    /// The share of traces whose string root attribute has the value.
    Share,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangeRow {
    pub kind: ChangeKind,
    /// A span name (numbers in it written `#`), an error type, `attr.NAME`, or
    /// `attr.NAME = value`.
    pub subject: String,
    /// The span kind of a span name's rows.
    pub span_kind: Option<String>,
    pub before: f64,
    pub after: f64,
    /// How much of the distribution moved, from 0 to 1: a share's change, or for a
    /// number the chance that an after value and a before value are ordered the way
    /// the shift goes, beyond a coin toss (from the shift in spreads). Rows rank by it.
    pub strength: f64,
    /// For a number: the shift of the median in units of the baseline's spread.
    pub shift: Option<f64>,
    /// Filters that select example traces of the change in the pinned range.
    pub filters: Vec<String>,
}

/// The answer of `GET /api/runs/{run_id}/changes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Changes {
    pub steps: (i64, i64),
    pub baseline: (i64, i64),
    /// Matching traces in each range.
    pub traces: i64,
    pub baseline_traces: i64,
    /// Strongest first, at most [`CHANGES_MAX`].
    pub rows: Vec<ChangeRow>,
    /// Root attributes left out because they follow the step (a seed, a policy
    /// version): they always differ between two ranges.
    pub follow_step: Vec<String>,
    /// Why there are no rows, when a range has no traces.
    pub empty: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_is_the_same_length_just_before() {
        let q = ChangesQuery::parse("min_step=300&max_step=340").expect("valid");
        assert_eq!((q.steps, q.baseline), ((300, 340), (259, 299)));
        assert_eq!(ChangesQuery::parse(&q.to_query()), Ok(q));
        let q = ChangesQuery::parse("min_step=10&max_step=40").expect("valid");
        assert_eq!(q.baseline, (0, 9));
        // The largest steps saturate rather than wrap.
        let q = ChangesQuery::parse(&format!("min_step=1&max_step={}", i64::MAX)).expect("valid");
        assert_eq!(q.baseline, (0, 0));
        let q = ChangesQuery::parse(&format!(
            "min_step=5&max_step={}&baseline_min_step=9",
            i64::MAX
        ))
        .expect("valid");
        assert_eq!(q.baseline, (9, i64::MAX));
        let q =
            ChangesQuery::parse("min_step=50&max_step=60&baseline_min_step=0&baseline_max_step=20")
                .expect("valid");
        assert_eq!(q.baseline, (0, 20));
    }

    #[test]
    fn every_bad_parameter_is_named() {
        for (raw, says) in [
            ("max_step=3", "min_step and max_step are required"),
            ("min_step=9&max_step=3", "min_step (9) is past max_step (3)"),
            ("min_step=0&max_step=3", "give baseline_min_step"),
            (
                "min_step=5&max_step=9&baseline_min_step=4&baseline_max_step=1",
                "baseline_min_step (4) is past baseline_max_step (1)",
            ),
        ] {
            let e = ChangesQuery::parse(raw).expect_err(raw);
            assert!(e.message.contains(says), "{raw}: {}", e.message);
        }
    }
}
