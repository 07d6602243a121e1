//! Reading a distribution: the matching traces of a run as a row a (step, split
//! label) holding their values, the two halves of the steps read at once, then
//! summarized by [`super::distribution`].

use treeline_wire::filter::ATTR_PREFIX;
use treeline_wire::stats::{Measure, Stats, StatsQuery};
use treeline_wire::Invalid;

use super::dialect::{Dialect, Sql};
use super::distribution::{summarize, Cell};
use super::reader::Reader;
use super::rows::DbRow;
use super::search::{push_driver, Term};
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
        let Some(terms) = self.resolve_terms(query).await? else {
            return Ok(answer(Stats {
                empty: Some("no trace matches".into()),
                ..Stats::default()
            }));
        };
        let parts = self.step_halves(query).await?;
        let reads = parts
            .iter()
            .map(|part| self.rows(cells_sql::<DB>(part, &terms, &stats.value, split)));
        let rows: Vec<_> = futures::future::try_join_all(reads)
            .await?
            .into_iter()
            .flatten()
            .collect();
        let (mut cells, mut left_out, mut unsplit, mut counted) =
            (Vec::with_capacity(rows.len()), 0, 0, 0);
        for row in &rows {
            let k = row.req_int("k")?;
            left_out += row.req_int("n")? - k;
            if k == 0 {
                continue;
            }
            let label = match split {
                Some(_) => row.text("label")?,
                None => None,
            };
            unsplit += if split.is_some() && label.is_none() {
                k
            } else {
                0
            };
            counted += k;
            cells.push(Cell {
                step: row.req_int("step")?,
                label,
                values: number_list(&row.req_text("vs")?)?,
            });
        }
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
            let empty = if rows.is_empty() {
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

    /// Whether a trace of the query's run has a string for the root attribute `key`.
    async fn has_text(&self, query: &TraceQuery, key: &str) -> StoreResult<bool> {
        let mut q = Sql::new("SELECT 1 AS one FROM traces t WHERE t.run_id = ");
        q.bind(query.run_id.as_deref().unwrap_or_default())
            .push(" AND ");
        DB::push_attr_text(&mut q, "t.attributes", key);
        q.push(" IS NOT NULL LIMIT 1");
        Ok(!self.rows(q).await?.is_empty())
    }

    /// Whether a trace of the query's run has a number for the root attribute `key`.
    async fn has_number(&self, query: &TraceQuery, key: &str) -> StoreResult<bool> {
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
        // The index by trace holds the value: one descent a trace, not two.
        q.push(format!(
            " LEFT JOIN trace_numbers n{} ON n.run_id = t.run_id \
             AND n.trace_id = t.trace_id AND n.key = ",
            DB::use_index("trace_numbers_trace")
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

/// The numbers of a [`Dialect::number_list`].
fn number_list(text: &str) -> StoreResult<Vec<f64>> {
    text.split(',')
        .map(|n| {
            n.parse()
                .map_err(|_| StoreError::Corrupt(format!("a number list holds {n:?}")))
        })
        .collect()
}
