//! The runs list: newest first and paged by a keyset, or sorted by a summary
//! column and paged by position (a run's last value moves while it trains, so no
//! keyset of it stays put between pages).

use std::collections::BTreeSet;

use serde_json::Value;
use treeline_wire::run_list::{
    add_config_paths, MetricStat, RunColumn, RunFields, RUN_FIELDS_CONFIGS, RUN_FIELDS_MAX,
};
use treeline_wire::RunList;

use super::cursor::page_cursor;
use super::dialect::{Dialect, Sql};
use super::reader::{Keyset, Reader};
use super::rows::{self, DbRow};
use super::{Cursor, StoreError, StoreResult};

/// The `b` of a cursor that holds a position, not a run.
const POSITION: &str = "position";

/// Which runs a list holds, with which columns, in which order.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunsAsked<'a> {
    pub project: Option<&'a str>,
    /// A piece of the name or id.
    pub search: Option<&'a str>,
    pub columns: &'a [RunColumn],
    /// The column sorted by, and whether ascending; none: newest first.
    pub sort: Option<(&'a RunColumn, bool)>,
    pub limit: usize,
    pub cursor: Option<&'a Cursor>,
}

impl<'a> RunsAsked<'a> {
    /// Newest first, without columns.
    pub fn newest(project: Option<&'a str>, limit: usize, cursor: Option<&'a Cursor>) -> Self {
        RunsAsked {
            project,
            limit,
            cursor,
            ..RunsAsked::default()
        }
    }
}

impl<DB: Dialect> Reader<DB> {
    pub(super) async fn read_runs(&self, asked: RunsAsked<'_>) -> StoreResult<RunList> {
        let columns: Vec<String> = asked.columns.iter().map(ToString::to_string).collect();
        let scale = self.size_scale().await?;
        let read = |r: &DB::Row| {
            let mut run = rows::run_summary(r, &scale)?;
            run.values = (0..asked.columns.len())
                .map(|i| column_value(r, &asked.columns[i], i))
                .collect::<StoreResult<_>>()?;
            Ok(run)
        };
        let (runs, next_cursor) = match asked.sort {
            None => {
                if asked.cursor.is_some_and(|c| c.b == POSITION) {
                    return Err(StoreError::BadCursor);
                }
                let order = Keyset {
                    columns: &["start_us", "run_id"],
                    descending: true,
                    tail: false,
                    lead: false,
                };
                let mut q = Sql::new("");
                push_selected::<DB>(&mut q, &asked, None);
                self.page(q, order, (asked.cursor, asked.limit), read, |r| Cursor {
                    value: r.start_us,
                    a: r.run_id.clone(),
                    b: String::new(),
                    number: None,
                    lead: None,
                })
                .await?
            }
            Some((column, ascending)) => {
                let skip = match asked.cursor {
                    None => 0,
                    Some(c) if c.b == POSITION && c.value >= 0 => c.value,
                    Some(_) => return Err(StoreError::BadCursor),
                };
                let mut q = Sql::<DB>::new("SELECT * FROM (");
                push_selected::<DB>(&mut q, &asked, Some(column));
                q.push(") t ORDER BY ");
                let dir = if ascending { "" } else { " DESC" };
                let sorted = match column {
                    RunColumn::Metric { .. } => {
                        format!("(sort_value IS NULL), sort_value{dir}")
                    }
                    RunColumn::Config { .. } => {
                        let (number, text) = (
                            DB::json_number("sort_value"),
                            DB::json_sort_text("sort_value"),
                        );
                        format!("({number}) IS NULL, {number}{dir}, ({text}) IS NULL, {text}{dir}")
                    }
                };
                q.push(format!("{sorted}, start_us DESC, run_id DESC LIMIT "))
                    .bind(
                        i64::try_from(asked.limit)
                            .unwrap_or(i64::MAX)
                            .saturating_add(1),
                    )
                    .push(" OFFSET ")
                    .bind(skip);
                let mut runs = self
                    .rows(q)
                    .await?
                    .iter()
                    .map(read)
                    .collect::<StoreResult<Vec<_>>>()?;
                let next = skip.saturating_add(i64::try_from(asked.limit).unwrap_or(i64::MAX));
                let cursor = page_cursor(&mut runs, asked.limit, |_| Cursor {
                    value: next,
                    a: String::new(),
                    b: POSITION.to_string(),
                    number: None,
                    lead: None,
                });
                (runs, cursor)
            }
        };
        Ok(RunList {
            runs,
            next_cursor,
            columns,
        })
    }
}

impl<DB: Dialect> Reader<DB> {
    pub(super) async fn read_run_fields(&self, project: Option<&str>) -> StoreResult<RunFields> {
        let mut q = Sql::<DB>::new(
            "SELECT DISTINCT m.key FROM metric_summaries m \
             JOIN runs r ON r.run_id = m.run_id WHERE 1 = 1",
        );
        if let Some(p) = project {
            q.push(" AND r.project = ").bind(p);
        }
        q.push(" ORDER BY m.key LIMIT ")
            .bind(i64::try_from(RUN_FIELDS_MAX).unwrap_or(i64::MAX));
        let metric_keys = self
            .rows(q)
            .await?
            .iter()
            .map(|r| r.req_text("key"))
            .collect::<StoreResult<_>>()?;
        let mut q = Sql::<DB>::new("SELECT config FROM runs WHERE 1 = 1");
        if let Some(p) = project {
            q.push(" AND project = ").bind(p);
        }
        q.push(" ORDER BY start_us DESC, run_id DESC LIMIT ")
            .bind(i64::try_from(RUN_FIELDS_CONFIGS).unwrap_or(i64::MAX));
        let mut paths = BTreeSet::new();
        for row in self.rows(q).await? {
            if let Some(text) = row.text("config")? {
                let config: Value =
                    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                add_config_paths(&config, &mut paths);
            }
        }
        Ok(RunFields {
            metric_keys,
            config_paths: paths.into_iter().take(RUN_FIELDS_MAX).collect(),
        })
    }
}

/// The runs asked for with their columns (`c0`, `c1`, …) and the one sorted by
/// (`sort_value`), unordered.
fn push_selected<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    asked: &RunsAsked<'a>,
    sort: Option<&'a RunColumn>,
) {
    q.push(format!("SELECT {}", rows::RUN_COLUMNS));
    for (i, column) in asked.columns.iter().enumerate() {
        q.push(", ");
        push_column::<DB>(q, column);
        q.push(format!(" AS c{i}"));
    }
    if let Some(column) = sort {
        q.push(", ");
        push_column::<DB>(q, column);
        q.push(" AS sort_value");
    }
    q.push(" FROM runs WHERE 1 = 1");
    if let Some(p) = asked.project {
        q.push(" AND project = ").bind(p);
    }
    if let Some(text) = asked.search {
        let like = DB::LIKE_ANY_CASE;
        let pattern = format!("%{}%", rows::escape_like(text));
        q.push(format!(" AND (name {like} "))
            .bind(pattern.clone())
            .push(format!(" ESCAPE '\\' OR run_id {like} "))
            .bind(pattern)
            .push(" ESCAPE '\\')");
    }
}

/// A column's value for the run of the row: a metric's number, or a config value's
/// JSON text.
fn push_column<'a, DB: Dialect>(q: &mut Sql<'a, DB>, column: &'a RunColumn) {
    match column {
        RunColumn::Metric { stat, key } => {
            let value = match stat {
                MetricStat::Last => "last_value",
                MetricStat::Min => "min_value",
                MetricStat::Max => "max_value",
            };
            q.push(format!(
                "(SELECT m.{value} FROM metric_summaries m \
                 WHERE m.run_id = runs.run_id AND m.key = "
            ))
            .bind(key.as_str())
            .push(")");
        }
        RunColumn::Config { path } => DB::push_json_at(q, "runs.config", path),
    }
}

fn column_value(r: &impl DbRow, column: &RunColumn, i: usize) -> StoreResult<Value> {
    let name = format!("c{i}");
    Ok(match column {
        RunColumn::Metric { .. } => r.float(&name)?.map_or(Value::Null, Value::from),
        RunColumn::Config { .. } => match r.text(&name)? {
            None => Value::Null,
            Some(text) => {
                serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(e.to_string()))?
            }
        },
    })
}
