//! `GET /api/runs` (docs/api.md §8.2): the runs list's query, with the summary
//! columns a reader picks (a metric's last, smallest or largest value, a config
//! value) and the column it is sorted by. The dashboard writes it with
//! [`RunListQuery::to_query`], the server reads it with [`RunListQuery::parse`].

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limits::{RUNS_PAGE, RUNS_PAGE_MAX};
use crate::query::{parse_order, QueryParams};
use crate::Invalid;

/// The most summary columns one list carries.
pub const RUN_COLUMNS_MAX: usize = 8;
/// The deepest config path a column reads (`a.b.c` is 3).
pub const CONFIG_PATH_DEPTH: usize = 8;
/// The most metric keys, and config paths, `GET /api/run-fields` names.
pub const RUN_FIELDS_MAX: usize = 500;
/// The newest runs whose configs `GET /api/run-fields` reads for paths.
pub const RUN_FIELDS_CONFIGS: usize = 200;

/// `GET /api/run-fields`: what a runs list can show as columns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFields {
    /// Every metric key the runs logged, in name order.
    pub metric_keys: Vec<String>,
    /// The config paths of the newest runs (leaves only), in name order.
    pub config_paths: Vec<String>,
}

/// Adds `config`'s leaf paths that a `config:` column can name to `out`.
pub fn add_config_paths(config: &Value, out: &mut BTreeSet<String>) {
    fn walk(value: &Value, path: &mut Vec<String>, out: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) if path.len() < CONFIG_PATH_DEPTH => {
                for (k, v) in map {
                    path.push(k.clone());
                    walk(v, path, out);
                    path.pop();
                }
            }
            _ if !path.is_empty() => {
                let joined = path.join(".");
                if config_path(&joined).is_ok() {
                    out.insert(joined);
                }
            }
            _ => {}
        }
    }
    walk(config, &mut Vec::new(), out);
}

/// Which of a metric's values a column shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetricStat {
    /// The value at the largest step.
    Last,
    Min,
    Max,
}

impl MetricStat {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricStat::Last => "last",
            MetricStat::Min => "min",
            MetricStat::Max => "max",
        }
    }
}

/// A summary column: `last:KEY`, `min:KEY`, `max:KEY` or `config:PATH`, where PATH
/// is a dotted path into the run's config (`model.layers`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RunColumn {
    Metric { stat: MetricStat, key: String },
    Config { path: Vec<String> },
}

impl RunColumn {
    /// Reads a column as written in `field` (`column` or `sort`).
    pub fn parse(text: &str, field: &str) -> Result<RunColumn, Invalid> {
        let bad =
            |why: String| Invalid::new("invalid_parameter", format!("{field} {text:?}: {why}"));
        let Some((kind, rest)) = text.split_once(':') else {
            return Err(bad(
                "write last:KEY, min:KEY, max:KEY or config:PATH".to_string()
            ));
        };
        let stat = match kind {
            "last" => MetricStat::Last,
            "min" => MetricStat::Min,
            "max" => MetricStat::Max,
            "config" => {
                return Ok(RunColumn::Config {
                    path: config_path(rest).map_err(bad)?,
                })
            }
            other => {
                return Err(bad(format!(
                    "{other:?} is not a column kind; use last, min, max or config"
                )))
            }
        };
        if rest.is_empty() || rest.len() > crate::limits::MAX_METRIC_NAME_BYTES {
            return Err(bad(format!(
                "the metric key must be 1-{} bytes",
                crate::limits::MAX_METRIC_NAME_BYTES
            )));
        }
        Ok(RunColumn::Metric {
            stat,
            key: rest.to_string(),
        })
    }

    /// What a person reads in the column's head.
    pub fn label(&self) -> String {
        match self {
            RunColumn::Metric { stat, key } => format!("{key} ({})", stat.as_str()),
            RunColumn::Config { path } => path.join("."),
        }
    }
}

/// As [`RunColumn::parse`] reads it back.
impl fmt::Display for RunColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunColumn::Metric { stat, key } => write!(f, "{}:{key}", stat.as_str()),
            RunColumn::Config { path } => write!(f, "config:{}", path.join(".")),
        }
    }
}

/// A dotted config path. Each part is a key of letters, digits, `_`, `-` or `/`,
/// which both databases' JSON paths take without quoting rules of their own.
fn config_path(text: &str) -> Result<Vec<String>, String> {
    let parts: Vec<String> = text.split('.').map(str::to_string).collect();
    if parts.len() > CONFIG_PATH_DEPTH {
        return Err(format!(
            "a config path is at most {CONFIG_PATH_DEPTH} keys deep"
        ));
    }
    let fine = |p: &String| {
        !p.is_empty()
            && p.len() <= 128
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/'))
    };
    if parts.iter().all(fine) {
        Ok(parts)
    } else {
        Err("a config path is keys of letters, digits, _, - or / joined by dots".to_string())
    }
}

/// The runs list's query: which runs, with which columns, in which order.
#[derive(Clone, Debug, PartialEq)]
pub struct RunListQuery {
    pub project: Option<String>,
    /// A piece of the run's name or id.
    pub q: Option<String>,
    pub columns: Vec<RunColumn>,
    /// None: newest first.
    pub sort: Option<RunColumn>,
    pub ascending: bool,
    pub limit: usize,
    pub cursor: Option<String>,
}

impl Default for RunListQuery {
    fn default() -> Self {
        RunListQuery {
            project: None,
            q: None,
            columns: Vec::new(),
            sort: None,
            ascending: false,
            limit: RUNS_PAGE,
            cursor: None,
        }
    }
}

impl RunListQuery {
    /// Reads `project`, `q`, `column` (repeated, at most [`RUN_COLUMNS_MAX`]),
    /// `sort`, `order` (`desc` by default), `limit` and `cursor`.
    pub fn parse(raw: &str) -> Result<RunListQuery, Invalid> {
        let p = QueryParams::new(raw);
        let mut columns: Vec<RunColumn> = Vec::new();
        for text in p.all("column") {
            let column = RunColumn::parse(text, "column")?;
            if !columns.contains(&column) {
                columns.push(column);
            }
        }
        if columns.len() > RUN_COLUMNS_MAX {
            return Err(Invalid::new(
                "invalid_parameter",
                format!(
                    "{} columns given; a runs list carries at most {RUN_COLUMNS_MAX}",
                    columns.len()
                ),
            ));
        }
        let sort = p
            .text("sort")
            .map(|s| RunColumn::parse(s, "sort"))
            .transpose()?;
        let ascending = p
            .text("order")
            .map(parse_order)
            .transpose()?
            .unwrap_or(false);
        Ok(RunListQuery {
            project: p.text("project").map(str::to_string),
            q: p.text("q").map(str::to_string),
            columns,
            sort,
            ascending,
            limit: p.limit(RUNS_PAGE, RUNS_PAGE_MAX)?,
            cursor: p.text("cursor").map(str::to_string),
        })
    }

    /// The query string [`RunListQuery::parse`] reads back as `self`.
    pub fn to_query(&self) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        if let Some(p) = &self.project {
            out.append_pair("project", p);
        }
        if let Some(q) = &self.q {
            out.append_pair("q", q);
        }
        for c in &self.columns {
            out.append_pair("column", &c.to_string());
        }
        if let Some(s) = &self.sort {
            out.append_pair("sort", &s.to_string());
            if self.ascending {
                out.append_pair("order", "asc");
            }
        }
        if self.limit != RUNS_PAGE {
            out.append_pair("limit", &self.limit.to_string());
        }
        if let Some(c) = &self.cursor {
            out.append_pair("cursor", c);
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_reads_back_as_written() {
        let q = RunListQuery {
            project: Some("rl".into()),
            q: Some("grpo".into()),
            columns: vec![
                RunColumn::Metric {
                    stat: MetricStat::Last,
                    key: "reward/mean".into(),
                },
                RunColumn::Config {
                    path: vec!["model".into(), "layers".into()],
                },
            ],
            sort: Some(RunColumn::Metric {
                stat: MetricStat::Max,
                key: "a:b".into(),
            }),
            ascending: true,
            limit: 20,
            cursor: Some("abc".into()),
        };
        assert_eq!(RunListQuery::parse(&q.to_query()), Ok(q));
        assert_eq!(RunListQuery::default().to_query(), "");
        // A metric key may hold a colon: only the first one ends the kind.
        assert_eq!(
            RunColumn::parse("last:eval:acc", "column").map(|c| c.label()),
            Ok("eval:acc (last)".to_string())
        );
    }

    #[test]
    fn config_paths_are_the_leaves_a_column_can_name() {
        let mut out = BTreeSet::new();
        let config = serde_json::json!({
            "lr": 0.1, "model": {"name": "q", "sizes": [1, 2]}, "odd key": 1, "empty": {}
        });
        add_config_paths(&config, &mut out);
        let paths: Vec<&str> = out.iter().map(String::as_str).collect();
        assert_eq!(paths, ["lr", "model.name", "model.sizes"]);
    }

    #[test]
    fn bad_columns_name_their_field() {
        let err = |raw: &str| RunListQuery::parse(raw).unwrap_err().message;
        assert!(err("column=reward").contains("column \"reward\""));
        assert!(err("column=mean:reward").contains("\"mean\" is not a column kind"));
        assert!(err("sort=last:").contains("sort"));
        assert!(err("column=config:a..b").contains("config path"));
        assert!(err("column=config:a%20b").contains("config path"));
        assert!(err("sort=config:lr&order=up").contains("order"));
        let many: Vec<String> = (0..9).map(|i| format!("column=last:k{i}")).collect();
        assert!(err(&many.join("&")).contains("at most 8"));
        assert!(err("limit=0").contains("limit"));
    }
}
