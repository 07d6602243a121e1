//! The group lens: samples are traces sharing a root attribute, or the children of
//! each root. The database sums up every group for the zero-spread series; the
//! listed step's groups are read sample by sample and measured here. Over a whole
//! run grouped by a string key, every sample is read once from the values' indexes
//! by step instead (see [`super::step_values`]), and both are done here.

use std::collections::BTreeMap;

use foldhash::{HashMap, HashMapExt, HashSet};

use treeline_wire::groups::{
    Group, GroupBy, GroupStep, Groups, GroupsQuery, Sample, GROUP_RANKED, GROUP_STEPS_MAX,
};

use super::dialect::{Dialect, JsonDoc, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::search::{push_driver, Term};
use super::step_values::{Labels, RunSteps, StepNumbers, StepTexts};
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
        let by_step = match (&lens.by, RunSteps::of(query)) {
            (GroupBy::Attr(key), Some(steps)) if !self.has_number(query, key).await? => {
                Some((steps, key))
            }
            _ => None,
        };
        let source = match by_step {
            Some((steps, key)) => {
                Source::ByStep(self.samples_by_step(steps, query, key, &lens.value).await?)
            }
            None => match self.resolve_terms(query).await? {
                Some(terms) => Source::Traces(terms),
                None => {
                    return Ok(Groups {
                        empty: Some("no trace matches".into()),
                        ..answer
                    })
                }
            },
        };
        let resolved = match &source {
            Source::ByStep(samples) => samples.resolved(),
            Source::Traces(_) => Vec::new(),
        };
        let figures = match &source {
            Source::ByStep(_) => figures_of(&resolved),
            Source::Traces(terms) => self.figures(query, terms, lens).await?,
        };
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
        let mut listed = match &source {
            Source::ByStep(_) => listed_of(&resolved, step, &figures),
            Source::Traces(terms) => self.listed(query, terms, lens, step, &figures).await?,
        };
        listed.sort_by(|a, b| a.spread.total_cmp(&b.spread).then(a.key.cmp(&b.key)));
        let more = listed.len() > lens.limit;
        listed.truncate(lens.limit);
        if let Source::ByStep(_) = source {
            self.root_spans(query, &mut listed).await?;
        }
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

    /// Each group's figures, a row a group, through the traces (any query).
    async fn figures(
        &self,
        query: &TraceQuery,
        terms: &[Term<'_>],
        lens: &GroupsQuery,
    ) -> StoreResult<Vec<Figures>> {
        let mut q = Sql::new(
            "SELECT x.g AS g, MIN(CASE WHEN x.v IS NOT NULL THEN x.step END) AS step,
                    MAX(CASE WHEN x.v IS NOT NULL THEN x.step END) AS last,
                    COUNT(x.v) AS n, MIN(x.v) AS lo, MAX(x.v) AS hi FROM (",
        );
        push_samples(&mut q, query, terms, lens);
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
        Ok(figures)
    }

    /// The samples of a whole run (or a range of its steps) grouped by a string
    /// key, read by step from the values' indexes (see `step_values`).
    async fn samples_by_step(
        &self,
        steps: RunSteps<'_>,
        query: &TraceQuery,
        key: &str,
        value: &str,
    ) -> StoreResult<StepSamples> {
        // A group may hold samples without a step; halves of the steps leave them out.
        let parts = self.step_parts(steps, query, true).await?;
        let reads = parts.into_iter().map(|part| {
            futures::future::try_join(
                self.step_numbers(part, value, false),
                self.step_texts(part, key, false),
            )
        });
        let mut samples = StepSamples::default();
        for (numbers, texts) in futures::future::try_join_all(reads).await? {
            samples.numbers.extend(numbers);
            samples.texts.extend(texts);
        }
        Ok(samples)
    }

    /// The root span of each listed sample, which `samples_by_step` does not read.
    async fn root_spans(&self, query: &TraceQuery, groups: &mut [Group]) -> StoreResult<()> {
        let Some(run_id) = query.run_id.as_deref() else {
            return Ok(());
        };
        let ids: Vec<String> = groups
            .iter()
            .flat_map(|g| g.ranked.iter().map(|s| s.trace_id.clone()))
            .collect();
        let mut roots: HashMap<String, String> = HashMap::new();
        for chunk in ids.chunks(ROOTS_CHUNK) {
            let mut q = Sql::new("SELECT t.trace_id AS trace_id, t.root_span_id AS span_id FROM traces t WHERE t.run_id = ");
            q.bind(run_id).push(" AND t.trace_id IN (");
            for (i, id) in chunk.iter().enumerate() {
                q.push(if i == 0 { "" } else { ", " }).bind(id.as_str());
            }
            q.push(")");
            for row in self.rows(q).await? {
                if let Some(span_id) = row.text("span_id")? {
                    roots.insert(row.req_text("trace_id")?, span_id);
                }
            }
        }
        for sample in groups.iter_mut().flat_map(|g| g.ranked.iter_mut()) {
            if let Some(span_id) = roots.get(&sample.trace_id) {
                sample.span_id.clone_from(span_id);
            }
        }
        Ok(())
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
            DB::push_attr_number(q, JsonDoc::RootAttributes, key);
            q.push(" AS TEXT)) AS g FROM ");
            push_driver(q, terms);
            // The primary key by trace holds the value: one descent a sample.
            q.push(format!(
                "traces t JOIN trace_numbers n{} ON n.run_id = t.run_id \
                 AND n.trace_id = t.trace_id AND n.key = ",
                DB::by_primary_key()
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
            DB::push_attr_number(q, JsonDoc::SpanAttributes, &lens.value);
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

/// Trace ids a lookup of root spans binds at most.
const ROOTS_CHUNK: usize = 500;

/// Where the samples come from: the values' indexes for a whole run grouped by a
/// string key, the traces otherwise.
enum Source<'q> {
    ByStep(StepSamples),
    Traces(Vec<Term<'q>>),
}

/// A run's values and group keys by step, as `samples_by_step` read them.
#[derive(Default)]
struct StepSamples {
    numbers: Vec<StepNumbers>,
    texts: Vec<StepTexts>,
}

impl StepSamples {
    /// Each sample that has a value and a group: `(group, step, trace_id, value)`.
    fn resolved(&self) -> Vec<Resolved<'_>> {
        let labels = Labels::new(&self.texts);
        self.numbers
            .iter()
            .flat_map(|of_step| {
                let labels = &labels;
                of_step.iter().filter_map(move |(trace_id, value)| {
                    let group = labels.get(of_step.step, trace_id)?;
                    Some((group, of_step.step, trace_id, value))
                })
            })
            .collect()
    }
}

/// A sample as `StepSamples::resolved` lists it: `(group, step, trace_id, value)`.
type Resolved<'s> = (&'s str, Option<i64>, &'s str, f64);

/// Each group's figures from its samples, as `Reader::figures` reads them.
fn figures_of(samples: &[Resolved<'_>]) -> Vec<Figures> {
    let mut by_group: HashMap<&str, Tally> = HashMap::new();
    for &(group, step, _, v) in samples {
        let f = by_group.entry(group).or_insert(Tally {
            first: None,
            last: None,
            size: 0,
            lo: f64::INFINITY,
            hi: f64::NEG_INFINITY,
        });
        // The first and last steps, as MIN and MAX take them: steps only.
        f.first = match (f.first, step) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        f.last = f.last.max(step);
        f.size += 1;
        f.lo = f.lo.min(v);
        f.hi = f.hi.max(v);
    }
    by_group
        .into_iter()
        .map(|(key, t)| Figures {
            key: key.to_string(),
            step: t.first,
            last: t.last,
            size: t.size,
            same: t.lo == t.hi,
        })
        .collect()
}

/// A group's samples so far: first and last step, count, least and greatest value.
struct Tally {
    first: Option<i64>,
    last: Option<i64>,
    size: i64,
    lo: f64,
    hi: f64,
}

/// The groups whose first step is `step`, measured from `samples`; their samples
/// have no span yet.
fn listed_of(samples: &[Resolved<'_>], step: Option<i64>, figures: &[Figures]) -> Vec<Group> {
    let keys: HashSet<&str> = figures
        .iter()
        .filter(|f| f.step == step)
        .map(|f| f.key.as_str())
        .collect();
    let mut groups: HashMap<&str, Acc> = HashMap::new();
    for &(group, at, trace_id, value) in samples {
        // A sample without a step is not at a group's step (as `Reader::listed`
        // reads them).
        if !keys.contains(group) || (step.is_some() && at.is_none()) {
            continue;
        }
        let acc = groups.entry(group).or_default();
        if let Some(at) = at {
            acc.step = Some(acc.step.map_or(at, |s| s.min(at)));
        }
        acc.samples.push(Sample {
            trace_id: trace_id.to_string(),
            span_id: String::new(),
            value,
        });
    }
    groups
        .into_iter()
        .map(|(k, a)| measure(k.to_string(), a))
        .collect()
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
