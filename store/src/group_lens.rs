//! The group lens: samples read in one pass (traces sharing a root attribute, or
//! the children of each root), grouped and measured here.

use std::collections::{BTreeMap, HashMap};

use treeline_wire::groups::{
    Group, GroupBy, GroupStep, Groups, GroupsQuery, Sample, GROUP_RANKED, GROUP_STEPS_MAX,
};

use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::search::push_driver;
use super::trace_list::push_conditions;
use super::{StoreResult, TraceQuery};

#[derive(Default)]
struct Acc {
    step: Option<i64>,
    samples: Vec<Sample>,
}

impl<DB: Dialect> Reader<DB> {
    pub(super) async fn group_lens(
        &self,
        query: &TraceQuery,
        lens: &GroupsQuery,
    ) -> StoreResult<Groups> {
        let answer = Groups {
            by: lens.by.name(),
            value: format!("attr.{}", lens.value),
            ..Groups::default()
        };
        let Some(terms) = self.resolve_terms(query).await? else {
            return Ok(Groups {
                empty: Some("no trace matches".into()),
                ..answer
            });
        };
        let mut q = Sql::new("SELECT t.trace_id AS trace_id, t.step AS step, ");
        match &lens.by {
            GroupBy::Attr(key) => {
                q.push("t.root_span_id AS span_id, n.value AS v, COALESCE(");
                DB::push_attr_text(&mut q, "t.attributes", key);
                q.push(", CAST(");
                DB::push_attr_number(&mut q, "t.attributes", key);
                q.push(" AS TEXT)) AS g FROM ");
                push_driver(&mut q, &terms);
                q.push(
                    "traces t JOIN trace_numbers n ON n.run_id = t.run_id \
                     AND n.trace_id = t.trace_id AND n.key = ",
                )
                .bind(lens.value.as_str());
            }
            GroupBy::Children => {
                q.push("s.span_id AS span_id, ");
                DB::push_attr_number(&mut q, "s.attributes", &lens.value);
                q.push(" AS v, t.trace_id AS g FROM ");
                push_driver(&mut q, &terms);
                q.push(
                    "traces t JOIN spans s ON s.run_id = t.run_id \
                     AND s.trace_id = t.trace_id AND s.tree_parent = t.root_span_id",
                );
            }
        }
        q.push(" WHERE 1 = 1");
        push_conditions(&mut q, query, &terms);
        let mut groups: HashMap<String, Acc> = HashMap::new();
        for row in self.rows(q).await? {
            let (Some(key), Some(value)) = (row.text("g")?, row.float("v")?) else {
                continue;
            };
            let acc = groups.entry(key).or_default();
            if let Some(step) = row.int("step")? {
                acc.step = Some(acc.step.map_or(step, |s| s.min(step)));
            }
            acc.samples.push(Sample {
                trace_id: row.req_text("trace_id")?,
                span_id: row.text("span_id")?.unwrap_or_default(),
                value,
            });
        }
        if groups.is_empty() {
            let empty = match &lens.by {
                GroupBy::Attr(key) => format!(
                    "no matching trace has both attr.{key} and a number for attr.{}",
                    lens.value
                ),
                GroupBy::Children => format!(
                    "no child of a matching trace's root has a number for attr.{}",
                    lens.value
                ),
            };
            return Ok(Groups {
                empty: Some(empty),
                ..answer
            });
        }
        let groups: Vec<Group> = groups.into_iter().map(|(k, a)| measure(k, a)).collect();
        let mut steps: BTreeMap<i64, GroupStep> = BTreeMap::new();
        for g in &groups {
            if let Some(step) = g.step {
                let s = steps.entry(step).or_insert(GroupStep {
                    step,
                    groups: 0,
                    zero_spread: 0,
                });
                s.groups += 1;
                s.zero_spread += i64::from(no_spread(g));
            }
        }
        let step = lens.step.or_else(|| steps.keys().next_back().copied());
        let mut listed: Vec<Group> = groups.into_iter().filter(|g| g.step == step).collect();
        listed.sort_by(|a, b| a.spread.total_cmp(&b.spread).then(a.key.cmp(&b.key)));
        let more = listed.len() > lens.limit;
        listed.truncate(lens.limit);
        let steps: Vec<GroupStep> = steps.into_values().collect();
        // The latest steps, when a run has more than the series shows.
        let skip = steps.len().saturating_sub(GROUP_STEPS_MAX);
        Ok(Groups {
            steps: steps.into_iter().skip(skip).collect(),
            step,
            groups: listed,
            groups_more: more,
            ..answer
        })
    }
}

/// A group of two or more samples that all scored the same.
fn no_spread(g: &Group) -> bool {
    g.size >= 2 && g.spread == 0.0
}

/// A group's size, mean and spread, and its samples ranked for Compare.
fn measure(key: String, acc: Acc) -> Group {
    let mut samples = acc.samples;
    let n = samples.len();
    let mean = samples.iter().map(|s| s.value).sum::<f64>() / n.max(1) as f64;
    let variance = samples
        .iter()
        .map(|s| (s.value - mean) * (s.value - mean))
        .sum::<f64>()
        / n.max(1) as f64;
    samples.sort_by(|a, b| {
        b.value
            .total_cmp(&a.value)
            .then_with(|| a.trace_id.cmp(&b.trace_id))
            .then_with(|| a.span_id.cmp(&b.span_id))
    });
    let ranked = if n <= GROUP_RANKED {
        samples
    } else {
        // Evenly by rank, the best and the worst included.
        let last = GROUP_RANKED - 1;
        (0..GROUP_RANKED)
            .map(|i| samples[(i * (n - 1) + last / 2) / last].clone())
            .collect()
    };
    let all_same = ranked.first().map(|s| s.value) == ranked.last().map(|s| s.value);
    Group {
        key,
        step: acc.step,
        size: n as i64,
        mean,
        // Exactly 0 when every value is the same, whatever the rounding.
        spread: if all_same { 0.0 } else { variance.sqrt() },
        ranked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(values: &[f64]) -> Acc {
        Acc {
            step: Some(3),
            samples: values
                .iter()
                .enumerate()
                .map(|(i, v)| Sample {
                    trace_id: format!("t{i:02}"),
                    span_id: format!("s{i}"),
                    value: *v,
                })
                .collect(),
        }
    }

    #[test]
    fn a_large_group_ranks_its_best_its_worst_and_between() {
        let values: Vec<f64> = (0..20).map(f64::from).collect();
        let g = measure("g".into(), acc(&values));
        let ranked: Vec<f64> = g.ranked.iter().map(|s| s.value).collect();
        assert_eq!(ranked.len(), GROUP_RANKED);
        assert_eq!(ranked.first(), Some(&19.0));
        assert_eq!(ranked.last(), Some(&0.0));
        assert!(ranked.windows(2).all(|w| w[0] > w[1]), "{ranked:?}");
        assert_eq!(g.size, 20);
        assert!((g.mean - 9.5).abs() < 1e-12);
    }

    #[test]
    fn equal_scores_have_no_spread() {
        let g = measure("g".into(), acc(&[0.1, 0.1, 0.1]));
        assert_eq!(g.spread, 0.0);
        assert!(no_spread(&g));
        assert!(!no_spread(&measure("g".into(), acc(&[1.0]))));
        let g = measure("g".into(), acc(&[1.0, 0.0]));
        assert_eq!(g.spread, 0.5);
    }
}
