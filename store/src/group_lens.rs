//! The group lens: samples are traces sharing a root attribute, or the children of
//! each root. The database sums up every group for the zero-spread series; the
//! listed step's groups are read sample by sample and measured here.

use std::collections::{BTreeMap, HashMap, HashSet};

use treeline_wire::groups::{
    Group, GroupBy, GroupStep, Groups, GroupsQuery, Sample, GROUP_RANKED, GROUP_STEPS_MAX,
};

use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::search::{push_driver, Term};
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
        // Each group's figures from the database, a row a group; the samples only of
        // the groups listed.
        let mut q = Sql::new(
            "SELECT x.g AS g, MIN(CASE WHEN x.v IS NOT NULL THEN x.step END) AS step,
                    MAX(CASE WHEN x.v IS NOT NULL THEN x.step END) AS last,
                    COUNT(x.v) AS n, MIN(x.v) AS lo, MAX(x.v) AS hi FROM (",
        );
        push_samples(&mut q, query, &terms, lens);
        q.push(") x GROUP BY x.g");
        let mut figures: Vec<Figures> = Vec::new();
        for row in self.rows(q).await? {
            let (Some(key), n) = (row.text("g")?, row.req_int("n")?) else {
                continue;
            };
            if n > 0 {
                figures.push(Figures {
                    key,
                    step: row.int("step")?,
                    last: row.int("last")?,
                    size: n,
                    same: row.float("lo")? == row.float("hi")?,
                });
            }
        }
        if figures.is_empty() {
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
        let mut steps: BTreeMap<i64, GroupStep> = BTreeMap::new();
        for f in &figures {
            if let Some(step) = f.step {
                let s = steps.entry(step).or_insert(GroupStep {
                    step,
                    groups: 0,
                    zero_spread: 0,
                });
                s.groups += 1;
                s.zero_spread += i64::from(no_spread(f.size, f.same));
            }
        }
        let step = lens.step.or_else(|| steps.keys().next_back().copied());
        let mut listed = self.listed(query, &terms, lens, step, &figures).await?;
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

    /// The groups of `step`, measured from their samples: the steps from `step` to
    /// the last of theirs, read again and kept for those groups.
    async fn listed(
        &self,
        query: &TraceQuery,
        terms: &[Term<'_>],
        lens: &GroupsQuery,
        step: Option<i64>,
        figures: &[Figures],
    ) -> StoreResult<Vec<Group>> {
        let of_step: Vec<&Figures> = figures.iter().filter(|f| f.step == step).collect();
        let keys: HashSet<&str> = of_step.iter().map(|f| f.key.as_str()).collect();
        let last = of_step.iter().filter_map(|f| f.last).max();
        let query = TraceQuery {
            min_step: step.or(query.min_step),
            max_step: last.or(query.max_step),
            ..query.clone()
        };
        let mut q = Sql::new("SELECT x.g AS g, x.step AS step, x.trace_id AS trace_id, x.span_id AS span_id, x.v AS v FROM (");
        push_samples(&mut q, &query, terms, lens);
        q.push(") x WHERE x.v IS NOT NULL");
        if step.is_none() {
            q.push(" AND x.step IS NULL");
        }
        let mut groups: HashMap<String, Acc> = HashMap::new();
        for row in self.rows(q).await? {
            let Some(key) = row.text("g")?.filter(|k| keys.contains(k.as_str())) else {
                continue;
            };
            let acc = groups.entry(key).or_default();
            if let Some(step) = row.int("step")? {
                acc.step = Some(acc.step.map_or(step, |s| s.min(step)));
            }
            acc.samples.push(Sample {
                trace_id: row.req_text("trace_id")?,
                span_id: row.text("span_id")?.unwrap_or_default(),
                value: row.req_float("v")?,
            });
        }
        Ok(groups.into_iter().map(|(k, a)| measure(k, a)).collect())
    }
}

/// The samples of the query's traces, `(g, step, trace_id, span_id, v)`: `g` the
/// group's key (a string of at most 256 bytes from `trace_texts`, or a number) and
/// `v` the sample's value, either none when the sample lacks it.
fn push_samples<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    query: &'a TraceQuery,
    terms: &'a [Term<'a>],
    lens: &'a GroupsQuery,
) {
    q.push("SELECT t.trace_id AS trace_id, t.step AS step, ");
    match &lens.by {
        GroupBy::Attr(key) => {
            // A number key read out of the attributes only where there is no string
            // (COALESCE reads its second argument then): most keys are strings.
            q.push("t.root_span_id AS span_id, n.value AS v, COALESCE(gs.value, CAST(");
            DB::push_attr_number(q, "t.attributes", key);
            q.push(" AS TEXT)) AS g FROM ");
            push_driver(q, terms);
            // The index by trace holds the value: one descent a sample, not two.
            q.push(format!(
                "traces t JOIN trace_numbers n{} ON n.run_id = t.run_id \
                 AND n.trace_id = t.trace_id AND n.key = ",
                DB::use_index("trace_numbers_trace")
            ))
            .bind(lens.value.as_str())
            .push(
                " LEFT JOIN trace_texts gs ON gs.run_id = t.run_id \
                 AND gs.trace_id = t.trace_id AND gs.key = ",
            )
            .bind(key.as_str());
        }
        GroupBy::Children => {
            q.push("s.span_id AS span_id, ");
            DB::push_attr_number(q, "s.attributes", &lens.value);
            q.push(" AS v, t.trace_id AS g FROM ");
            push_driver(q, terms);
            q.push(
                "traces t JOIN spans s ON s.run_id = t.run_id \
                 AND s.trace_id = t.trace_id AND s.tree_parent = t.root_span_id",
            );
        }
    }
    q.push(" WHERE 1 = 1");
    push_conditions(q, query, terms);
}

/// What the database says of a group: enough for the zero-spread series.
struct Figures {
    key: String,
    step: Option<i64>,
    last: Option<i64>,
    size: i64,
    /// Every sample has the same value.
    same: bool,
}

/// A group of two or more samples that all scored the same.
fn no_spread(size: i64, all_same: bool) -> bool {
    size >= 2 && all_same
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
        assert!(no_spread(g.size, g.spread == 0.0));
        let one = measure("g".into(), acc(&[1.0]));
        assert!(!no_spread(one.size, one.spread == 0.0));
        let g = measure("g".into(), acc(&[1.0, 0.0]));
        assert_eq!(g.spread, 0.5);
    }
}
