//! A value's distribution over a run's steps (docs/api.md §8.16): per step bucket its
//! count, mean, range and deciles, and a histogram over bins every bucket shares,
//! for the whole list or split by a string root attribute.

use serde::{Deserialize, Serialize};

use crate::filter::{Total, ATTR_PREFIX, MAX_FILTERS};
use crate::query::{ListQuery, QueryParams};
use crate::Invalid;

/// Most step buckets: a run's steps are grouped so that no more are needed.
pub const MAX_STEP_BUCKETS: usize = 200;
/// Most histogram bins, shared by every bucket.
pub const MAX_BINS: usize = 100;
pub const DEFAULT_BINS: usize = 40;
/// Most values of a split listed apart; the rest are counted as "other".
pub const MAX_SPLIT_VALUES: usize = 12;
/// Filters a distribution takes: a cell's link adds three (a value range and a
/// split value) and must stay within the list's [`MAX_FILTERS`].
pub const STATS_MAX_FILTERS: usize = MAX_FILTERS - 3;

/// What a distribution measures: a trace total or a numeric root attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Measure {
    Total(Total),
    Attr(String),
}

impl Measure {
    /// The totals that make sense as a value (the step is the axis, a rank a label).
    pub const TOTALS: [Total; 5] = [
        Total::Duration,
        Total::Spans,
        Total::Tokens,
        Total::Iterations,
        Total::Errors,
    ];

    /// Reads `attr.NAME` or a total's name, for the parameter `param`.
    pub fn parse(text: &str, param: &str) -> Result<Measure, Invalid> {
        if let Some(name) = text.strip_prefix(ATTR_PREFIX) {
            return attr_name(name, param).map(Measure::Attr);
        }
        Total::parse(text)
            .filter(|t| Measure::TOTALS.contains(t))
            .map(Measure::Total)
            .ok_or_else(|| {
                Invalid::new(
                    "invalid_parameter",
                    format!(
                        "{param} {text:?} is not a value; use attr.NAME (a numeric root \
                         attribute) or one of {}",
                        Measure::TOTALS.map(Total::name).join(", ")
                    ),
                )
            })
    }

    /// The name as the filter grammar writes the field.
    pub fn name(&self) -> String {
        match self {
            Measure::Total(t) => t.name().to_string(),
            Measure::Attr(key) => format!("{ATTR_PREFIX}{key}"),
        }
    }
}

/// An attribute name after `attr.` in a parameter: not empty, and free of what the
/// filter grammar reads as the end of a field.
pub fn attr_name(name: &str, param: &str) -> Result<String, Invalid> {
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || "=!<>\"(),".contains(c)) {
        return Err(Invalid::new(
            "invalid_parameter",
            format!("{param} needs an attribute name after attr., without spaces or operators"),
        ));
    }
    Ok(name.to_string())
}

/// `split=attr.NAME`: the attribute's name.
pub fn parse_split(text: &str, param: &str) -> Result<String, Invalid> {
    match text.strip_prefix(ATTR_PREFIX) {
        Some(name) => attr_name(name, param),
        None => Err(Invalid::new(
            "invalid_parameter",
            format!("{param} {text:?} must name a string root attribute, as attr.NAME"),
        )),
    }
}

/// Refuses a step range whose start is past its end, naming `min`.
pub fn check_steps(min: Option<i64>, max: Option<i64>, names: (&str, &str)) -> Result<(), Invalid> {
    match (min, max) {
        (Some(a), Some(b)) if a > b => Err(Invalid::new(
            "invalid_parameter",
            format!("{} ({a}) is past {} ({b})", names.0, names.1),
        )),
        _ => Ok(()),
    }
}

/// The filters of a list that a derived view takes, at most `max`.
pub fn check_filter_count(list: &ListQuery, max: usize) -> Result<(), Invalid> {
    if list.filters.len() > max {
        return Err(Invalid::new(
            "bad_filter",
            format!(
                "{} filters given; this view takes at most {max}, as its links add their own",
                list.filters.len()
            ),
        ));
    }
    Ok(())
}

/// `GET /api/runs/{run_id}/stats`, checked: the trace list's filters and the
/// distribution's own parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct StatsQuery {
    pub list: ListQuery,
    pub value: Measure,
    /// A string root attribute to split by.
    pub split: Option<String>,
    pub buckets: usize,
    pub bins: usize,
}

impl StatsQuery {
    pub fn parse(raw: &str) -> Result<StatsQuery, Invalid> {
        let list = ListQuery::parse(raw)?;
        let p = QueryParams::new(raw);
        let value = match p.text("value") {
            Some(v) => Measure::parse(v, "value")?,
            None => {
                return Err(Invalid::new(
                    "invalid_parameter",
                    "value is missing: name a total (duration_us, span_count …) or attr.NAME",
                ))
            }
        };
        let split = p
            .text("split")
            .map(|s| parse_split(s, "split"))
            .transpose()?;
        check_steps(list.min_step, list.max_step, ("min_step", "max_step"))?;
        check_filter_count(&list, STATS_MAX_FILTERS)?;
        Ok(StatsQuery {
            value,
            split,
            buckets: p.count("buckets", MAX_STEP_BUCKETS, MAX_STEP_BUCKETS)?,
            bins: p.count("bins", DEFAULT_BINS, MAX_BINS)?,
            list,
        })
    }

    pub fn to_query(&self) -> String {
        self.list.to_query_with(vec![
            ("value", Some(self.value.name())),
            (
                "split",
                self.split.as_ref().map(|s| format!("{ATTR_PREFIX}{s}")),
            ),
            (
                "buckets",
                (self.buckets != MAX_STEP_BUCKETS).then(|| self.buckets.to_string()),
            ),
            (
                "bins",
                (self.bins != DEFAULT_BINS).then(|| self.bins.to_string()),
            ),
        ])
    }
}

/// The answer of `GET /api/runs/{run_id}/stats`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The value, as the filter grammar names it.
    pub value: String,
    pub split: Option<String>,
    /// Steps per bucket; buckets start at multiples of it.
    pub bucket_steps: i64,
    /// The bins' edges, one more than the bins: bin `i` holds values from
    /// `edges[i]` up to, not including, `edges[i + 1]` (the last includes its end).
    pub edges: Vec<f64>,
    /// The whole list first (no label), then one per split value, most traces first,
    /// then "other".
    pub series: Vec<StatSeries>,
    /// Traces counted: matching, at a step, with the value.
    pub traces: i64,
    /// Matching traces at a step without the value: left out.
    pub left_out: i64,
    /// Traces counted whose split attribute is not a string: in the whole list's
    /// series only.
    pub unsplit: i64,
    /// Why the series are empty, when they are.
    pub empty: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatSeries {
    /// The split value; none for the whole list or "other".
    pub label: Option<String>,
    /// The values beyond the listed ones.
    pub other: bool,
    /// The filter that selects this series' traces (a split value's `=`, other's
    /// `not in`), to add to the request's filters in a link.
    pub filter: Option<String>,
    pub traces: i64,
    /// The buckets that hold a trace, by step.
    pub buckets: Vec<StatBucket>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatBucket {
    pub first_step: i64,
    pub last_step: i64,
    pub count: i64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    /// `[bin, traces]` for each bin that holds a trace.
    pub histogram: Vec<(u32, i64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_its_parameters() {
        let q = StatsQuery::parse(
            "value=attr.reward&split=attr.task_family&bins=20&buckets=50&min_step=3&filter=error_count%20%3E%200",
        )
        .expect("valid");
        assert_eq!(q.value, Measure::Attr("reward".into()));
        assert_eq!(q.split.as_deref(), Some("task_family"));
        assert_eq!((q.bins, q.buckets), (20, 50));
        assert_eq!(q.list.min_step, Some(3));
        assert_eq!(StatsQuery::parse(&q.to_query()), Ok(q));
        let q = StatsQuery::parse("value=duration_us").expect("valid");
        assert_eq!(q.value, Measure::Total(Total::Duration));
        assert_eq!((q.bins, q.buckets), (DEFAULT_BINS, MAX_STEP_BUCKETS));
    }

    #[test]
    fn every_bad_parameter_is_named() {
        for (raw, says) in [
            ("", "value is missing"),
            ("value=reward", "value \"reward\" is not a value"),
            ("value=step", "value \"step\" is not a value"),
            ("value=attr.", "value needs an attribute name"),
            ("value=attr.a&split=task", "split \"task\" must name"),
            ("value=attr.a&split=attr.a%20b", "split needs"),
            ("value=attr.a&bins=0", "bins must be between 1 and 100"),
            ("value=attr.a&bins=101", "bins must be between"),
            (
                "value=attr.a&buckets=201",
                "buckets must be between 1 and 200",
            ),
            ("value=attr.a&buckets=x", "buckets must be an integer"),
            (
                "value=attr.a&min_step=9&max_step=3",
                "min_step (9) is past max_step (3)",
            ),
        ] {
            let e = StatsQuery::parse(raw).expect_err(raw);
            assert!(e.message.contains(says), "{raw}: {}", e.message);
        }
        let six = "filter=step%3E1&".repeat(6);
        let e = StatsQuery::parse(&format!("{six}value=attr.a")).expect_err("six filters");
        assert!(e.message.contains("at most 5"), "{}", e.message);
    }
}
