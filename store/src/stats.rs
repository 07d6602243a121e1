//! Reading a distribution: the matching traces of a run as a row a (step, split
//! label) holding their values, the two halves of the steps read at once, then
//! summarized by [`super::distribution`]. A root attribute over a whole run is read
//! from the values' indexes by step instead (see [`super::step_values`]).

use foldhash::{HashMap, HashMapExt};

use treeline_wire::filter::ATTR_PREFIX;
use treeline_wire::stats::{Measure, Stats, StatsQuery};
use treeline_wire::Invalid;

use super::dialect::{Dialect, JsonDoc, Sql};
use super::distribution::{summarize, Cell};
use super::reader::Reader;
use super::rows::DbRow;
use super::search::{push_driver, Term};
use super::step_values::{number_list, Labels, RunSteps};
use super::trace_list::{push_conditions, total};
use super::{StoreError, StoreResult, TraceQuery};

impl<DB: Dialect> Reader<DB> {
    pub(super) async fn distribution(
        &self,
        query: &TraceQuery,
        stats: &StatsQuery,
    ) -> StoreResult<Stats> {
        let value_name = stats.value.name();
        let split = stats.split.as_deref();
        let answer = |s: Stats| Stats {
            value: value_name.clone(),
            split: split.map(|k| format!("{ATTR_PREFIX}{k}")),
            ..s
        };
        let read = match &stats.value {
            Measure::Attr(key) => match RunSteps::of(query) {
                Some(steps) => self.cells_by_step(steps, query, key, split).await?,
                None => self.cells_matching(query, &stats.value, split).await?,
            },
            Measure::Total(_) => self.cells_matching(query, &stats.value, split).await?,
        };
        let Some(read) = read else {
            return Ok(answer(Stats {
                empty: Some("no trace matches".into()),
                ..Stats::default()
            }));
        };
        let Read {
            cells,
            left_out,
            unsplit,
            counted,
            stepped,
        } = read;
        if cells.is_empty() {
            if let Measure::Attr(key) = &stats.value {
                if left_out > 0 && self.has_text(query, key).await? {
                    return Err(StoreError::Invalid(Invalid::new(
                        "invalid_parameter",
                        format!(
                            "value attr.{key} is a string on this run's traces; value takes a \
                             numeric attribute or a total"
                        ),
                    )));
                }
            }
            let empty = if !stepped {
                "no matching trace has a step".to_string()
            } else {
                format!("no matching trace at a step has a number for {value_name}")
            };
            return Ok(answer(Stats {
                left_out,
                empty: Some(empty),
                ..Stats::default()
            }));
        }
        if let Some(key) = split {
            if unsplit == counted && self.has_number(query, key).await? {
                return Err(StoreError::Invalid(Invalid::new(
                    "invalid_parameter",
                    format!("split attr.{key} is a number on this run's traces; split takes a string attribute"),
                )));
            }
        }
        Ok(answer(Stats {
            left_out,
            unsplit,
            ..summarize(&cells, split, stats.buckets, stats.bins)
        }))
    }

    /// The cells of a query's traces, read through the traces (any query); none
    /// when a search term or filter matches no trace.
    async fn cells_matching(
        &self,
        query: &TraceQuery,
        value: &Measure,
        split: Option<&str>,
    ) -> StoreResult<Option<Read>> {
        let Some(terms) = self.resolve_terms(query).await? else {
            return Ok(None);
        };
        Ok(Some(
            self.cells_of_traces(query, &terms, value, split).await?,
        ))
    }

    /// The cells of a query's traces, read through the traces (any query).
    async fn cells_of_traces(
        &self,
        query: &TraceQuery,
        terms: &[Term<'_>],
        value: &Measure,
        split: Option<&str>,
    ) -> StoreResult<Read> {
        let parts = self.step_halves(query).await?;
        let reads = parts
            .iter()
            .map(|part| self.rows(cells_sql::<DB>(part, terms, value, split)));
        let rows: Vec<_> = futures::future::try_join_all(reads)
            .await?
            .into_iter()
            .flatten()
            .collect();
        let mut read = Read {
            cells: Vec::with_capacity(rows.len()),
            stepped: !rows.is_empty(),
            ..Read::default()
        };
        for row in &rows {
            let k = row.req_int("k")?;
            read.left_out += row.req_int("n")? - k;
            if k == 0 {
                continue;
            }
            let label = match split {
                Some(_) => row.text("label")?,
                None => None,
            };
            read.count(k, split.is_some() && label.is_none());
            read.cells.push(Cell {
                step: row.req_int("step")?,
                label,
                values: number_list(&row.req_text("vs")?)?,
            });
        }
        Ok(read)
    }

    /// The cells of a whole run's traces (or a range of its steps) for a root
    /// attribute, read by step from the values' indexes (see `step_values`).
    async fn cells_by_step(
        &self,
        steps: RunSteps<'_>,
        query: &TraceQuery,
        key: &str,
        split: Option<&str>,
    ) -> StoreResult<Option<Read>> {
        let parts = self.step_parts(steps, query, false).await?;
        let reads = parts.into_iter().map(|part| {
            let labels = async move {
                match split {
                    Some(label) => self.step_texts(part, label, true).await,
                    None => Ok(Vec::new()),
                }
            };
            futures::future::try_join3(
                self.step_numbers(part, key, true),
                labels,
                self.stepped_traces(part),
            )
        });
        let mut read = Read::default();
        let mut traces = 0;
        for (numbers, texts, stepped) in futures::future::try_join_all(reads).await? {
            traces += stepped;
            let labels = Labels::new(&texts);
            for of_step in &numbers {
                let Some(step) = of_step.step else {
                    continue;
                };
                let mut by_label: HashMap<Option<&str>, Vec<f64>> = HashMap::new();
                for (trace_id, value) in of_step.iter() {
                    let label = labels.get(Some(step), trace_id);
                    by_label.entry(label).or_default().push(value);
                }
                for (label, values) in by_label {
                    read.count(values.len() as i64, split.is_some() && label.is_none());
                    read.cells.push(Cell {
                        step,
                        label: label.map(str::to_string),
                        values,
                    });
                }
            }
        }
        // Retention removes a trace's values before the trace itself.
        read.left_out = traces.saturating_sub(read.counted).max(0);
        read.stepped = traces > 0;
        Ok(Some(read))
    }

    /// Whether a trace of the query's run has a string for the root attribute `key`.
    async fn has_text(&self, query: &TraceQuery, key: &str) -> StoreResult<bool> {
        let mut q = Sql::new("SELECT 1 AS one FROM traces t WHERE t.run_id = ");
        q.bind(query.run_id.as_deref().unwrap_or_default())
            .push(" AND ");
        DB::push_attr_text(&mut q, JsonDoc::RootAttributes, key);
        q.push(" IS NOT NULL LIMIT 1");
        Ok(!self.rows(q).await?.is_empty())
    }

    /// Whether a trace of the query's run has a number for the root attribute `key`.
    pub(super) async fn has_number(&self, query: &TraceQuery, key: &str) -> StoreResult<bool> {
        let mut q = Sql::new("SELECT 1 AS one FROM trace_numbers n WHERE n.run_id = ");
        q.bind(query.run_id.as_deref().unwrap_or_default())
            .push(" AND n.key = ")
            .bind(key)
            .push(" LIMIT 1");
        Ok(!self.rows(q).await?.is_empty())
    }
}

/// One row a (step, label) with its values as a list: a run's traces in a few
/// thousand rows, where a row each cost more to carry than to read. The label is a
/// string of at most 256 bytes, read from `trace_texts`; a longer one counts as
/// none.
fn cells_sql<'a, DB: Dialect>(
    query: &'a TraceQuery,
    terms: &'a [Term<'a>],
    value: &'a Measure,
    split: Option<&'a str>,
) -> Sql<'a, DB> {
    let mut q = Sql::new("SELECT t.step AS step, COUNT(*) AS n, ");
    let v = match value {
        Measure::Total(t) => format!("CAST({} AS DOUBLE PRECISION)", total(*t)),
        Measure::Attr(_) => "n.value".to_string(),
    };
    q.push(format!("COUNT({v}) AS k, {} AS vs", DB::number_list(&v)));
    if split.is_some() {
        q.push(", x.value AS label");
    }
    q.push(" FROM ");
    push_driver(&mut q, terms);
    q.push("traces t");
    if let Measure::Attr(key) = value {
        // The primary key by trace holds the value: one descent a trace.
        q.push(format!(
            " LEFT JOIN trace_numbers n{} ON n.run_id = t.run_id \
             AND n.trace_id = t.trace_id AND n.key = ",
            DB::by_primary_key()
        ))
        .bind(key.as_str());
    }
    if let Some(key) = split {
        q.push(
            " LEFT JOIN trace_texts x ON x.run_id = t.run_id \
             AND x.trace_id = t.trace_id AND x.key = ",
        )
        .bind(key);
    }
    q.push(" WHERE t.step IS NOT NULL");
    push_conditions(&mut q, query, terms);
    q.push(if split.is_some() {
        " GROUP BY t.step, label"
    } else {
        " GROUP BY t.step"
    });
    q
}

/// The cells of a distribution and what they leave out.
#[derive(Default)]
struct Read {
    cells: Vec<Cell>,
    /// Traces at a step without a number for the value.
    left_out: i64,
    /// Traces counted without a string for the split.
    unsplit: i64,
    counted: i64,
    /// Whether a matching trace has a step.
    stepped: bool,
}

impl Read {
    fn count(&mut self, traces: i64, unsplit: bool) {
        self.counted += traces;
        if unsplit {
            self.unsplit += traces;
        }
    }
}
