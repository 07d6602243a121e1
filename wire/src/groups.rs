//! The group lens (docs/api.md §8.17): samples scored together (a GRPO group), per
//! group its size, mean, spread and best and worst sample; per step the share of
//! groups whose samples all scored the same, which teach nothing.

use serde::{Deserialize, Serialize};

use crate::filter::ATTR_PREFIX;
use crate::query::{ListQuery, QueryParams};
use crate::stats::{attr_name, check_filter_count, check_steps, STATS_MAX_FILTERS};
use crate::Invalid;

/// Groups listed for one step at most.
pub const GROUPS_LISTED_MAX: usize = 500;
pub const GROUPS_LISTED_DEFAULT: usize = 100;
/// Samples of a group ranked for Compare, which takes at most this many columns.
pub const GROUP_RANKED: usize = 8;
/// Most steps in the per-step series.
pub const GROUP_STEPS_MAX: usize = 2_000;

/// What makes a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupBy {
    /// Traces that share a root attribute's value (`group_id`, `prompt_id`).
    Attr(String),
    /// The children of one root: each trace is a group of its root's children.
    Children,
}

impl GroupBy {
    pub fn name(&self) -> String {
        match self {
            GroupBy::Attr(key) => format!("{ATTR_PREFIX}{key}"),
            GroupBy::Children => "children".into(),
        }
    }
}

/// `GET /api/runs/{run_id}/groups`, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupsQuery {
    pub list: ListQuery,
    pub by: GroupBy,
    /// The numeric attribute that scores a sample: a root attribute of each trace,
    /// or, by children, an attribute of each child span.
    pub value: String,
    /// The step whose groups are listed; none lists the latest step's.
    pub step: Option<i64>,
    /// Groups listed at most (`groups=`).
    pub limit: usize,
}

impl GroupsQuery {
    pub fn parse(raw: &str) -> Result<GroupsQuery, Invalid> {
        let list = ListQuery::parse(raw)?;
        let p = QueryParams::new(raw);
        let by = match p.text("by") {
            Some("children") => GroupBy::Children,
            Some(text) => match text.strip_prefix(ATTR_PREFIX) {
                Some(name) => GroupBy::Attr(attr_name(name, "by")?),
                None => {
                    return Err(Invalid::new(
                        "invalid_parameter",
                        format!(
                            "by {text:?} is not valid; use attr.NAME (traces sharing a root \
                             attribute) or children (the children of each root)"
                        ),
                    ))
                }
            },
            None => {
                return Err(Invalid::new(
                    "invalid_parameter",
                    "by is missing: use attr.NAME or children",
                ))
            }
        };
        let value = match p.text("value") {
            Some(text) => match text.strip_prefix(ATTR_PREFIX) {
                Some(name) => attr_name(name, "value")?,
                None => {
                    return Err(Invalid::new(
                        "invalid_parameter",
                        format!("value {text:?} must name a numeric attribute, as attr.NAME"),
                    ))
                }
            },
            None => {
                return Err(Invalid::new(
                    "invalid_parameter",
                    "value is missing: name the score, as attr.NAME",
                ))
            }
        };
        check_steps(list.min_step, list.max_step, ("min_step", "max_step"))?;
        check_filter_count(&list, STATS_MAX_FILTERS)?;
        Ok(GroupsQuery {
            by,
            value,
            step: p.non_negative("step")?,
            limit: p.count("groups", GROUPS_LISTED_DEFAULT, GROUPS_LISTED_MAX)?,
            list: ListQuery {
                limit: None,
                ..list
            },
        })
    }

    pub fn to_query(&self) -> String {
        self.list.to_query_with(vec![
            ("by", Some(self.by.name())),
            ("value", Some(format!("{ATTR_PREFIX}{}", self.value))),
            ("step", self.step.map(|s| s.to_string())),
            (
                "groups",
                (self.limit != GROUPS_LISTED_DEFAULT).then(|| self.limit.to_string()),
            ),
        ])
    }
}

/// One scored sample: a trace (its root span) or a child span.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub trace_id: String,
    pub span_id: String,
    pub value: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The shared attribute's value, or the root's trace id.
    pub key: String,
    /// The step of its samples (the earliest, if they differ).
    pub step: Option<i64>,
    pub size: i64,
    pub mean: f64,
    /// The standard deviation of its samples' values.
    pub spread: f64,
    /// At most [`GROUP_RANKED`] samples, best first: the best, the worst and the
    /// samples between, evenly by rank.
    pub ranked: Vec<Sample>,
}

/// How many groups one step has, and how many of them have no spread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupStep {
    pub step: i64,
    pub groups: i64,
    /// Groups of two or more samples that all scored the same.
    pub zero_spread: i64,
}

/// The answer of `GET /api/runs/{run_id}/groups`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Groups {
    pub by: String,
    pub value: String,
    /// Per step, in step order.
    pub steps: Vec<GroupStep>,
    /// The step whose groups are listed.
    pub step: Option<i64>,
    /// That step's groups, least spread first.
    pub groups: Vec<Group>,
    /// The step has more groups than were listed.
    pub groups_more: bool,
    /// Why there are no groups, when there are none.
    pub empty: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_its_parameters() {
        let q = GroupsQuery::parse("by=attr.group_id&value=attr.reward&step=12&groups=20")
            .expect("valid");
        assert_eq!(q.by, GroupBy::Attr("group_id".into()));
        assert_eq!(
            (q.value.as_str(), q.step, q.limit),
            ("reward", Some(12), 20)
        );
        assert_eq!(GroupsQuery::parse(&q.to_query()), Ok(q));
        let q = GroupsQuery::parse("by=children&value=attr.reward").expect("valid");
        assert_eq!(q.by, GroupBy::Children);
    }

    #[test]
    fn every_bad_parameter_is_named() {
        for (raw, says) in [
            ("value=attr.r", "by is missing"),
            ("by=group&value=attr.r", "by \"group\" is not valid"),
            ("by=attr.g", "value is missing"),
            ("by=attr.g&value=reward", "value \"reward\" must name"),
            (
                "by=attr.g&value=attr.r&step=-1",
                "step must be a non-negative",
            ),
            (
                "by=attr.g&value=attr.r&groups=501",
                "groups must be between 1 and 500",
            ),
        ] {
            let e = GroupsQuery::parse(raw).expect_err(raw);
            assert!(e.message.contains(says), "{raw}: {}", e.message);
        }
    }
}
